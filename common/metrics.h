/* metrics.h — a process-wide registry of Prometheus metrics (counters,
 * gauges, histograms with labels) and their text exposition (format
 * 0.0.4). Families are made once at start and never freed; series are
 * made on first use. Each family caps its series (METRICS_MAX_SERIES): past
 * the cap, new label sets are counted under every label = "_overflow", so
 * an unexpected label value can never grow memory without bound. Gauges
 * that mirror daemon state are filled by collectors run at scrape time. */
#ifndef SG_METRICS_H
#define SG_METRICS_H

#include <stddef.h>

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_SERIES 2048
#define METRICS_MAX_BUCKETS 16

typedef enum { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM } metric_kind;
typedef struct metric_family metric_family;

/* labels: NULL-terminated names (at most METRICS_MAX_LABELS), or NULL.
 * buckets: upper bounds, ascending (histograms only; NULL = latency
 * defaults from 100 µs to 30 s). Returns NULL only when out of memory or
 * the registry is full. */
metric_family *metric_family_create(const char *name, const char *help, metric_kind kind,
                                    const char *const *labels, const double *buckets,
                                    size_t n_buckets);
/* values: one per label name, in order (NULL when the family has none). */
void metric_add(metric_family *f, const char *const *values, double v);       /* counter */
void metric_set(metric_family *f, const char *const *values, double v);       /* gauge */
void metric_observe(metric_family *f, const char *const *values, double v);   /* histogram */
/* Drop every series (a gauge family its collector refills in full). */
void metric_clear(metric_family *f);

/* fn(arg) runs before each render, on the scraping thread. */
int metrics_add_collector(void (*fn)(void *arg), void *arg);
/* The whole registry as exposition text; malloc'd, *len without the NUL. */
char *metrics_render(size_t *len);

#endif
