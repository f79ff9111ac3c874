/* metrics.c — the registry behind metrics.h. One mutex per family guards
 * its series; a series is found by its joined label values in an
 * open-addressing table, so the per-call cost does not grow with the
 * number of series. Rendering copies nothing out of a family while other
 * threads update it: it holds the family's mutex while writing its lines. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"

#define MAX_FAMILIES 96
#define MAX_COLLECTORS 8
#define TABLE_SIZE (METRICS_MAX_SERIES * 2)   /* power of two, half full at most */

typedef struct series {
    char *key;                   /* owned: values joined by \x1f */
    char *values[METRICS_MAX_LABELS];   /* owned */
    double value;                /* counter, gauge; histogram: sum */
    uint64_t count;              /* histogram */
    uint64_t *buckets;           /* owned: histogram, cumulative at render only */
} series;

struct metric_family {
    char *name, *help;           /* owned */
    metric_kind kind;
    size_t n_labels;
    char *labels[METRICS_MAX_LABELS];   /* owned */
    double bounds[METRICS_MAX_BUCKETS];
    size_t n_bounds;
    pthread_mutex_t mu;
    series *series;              /* owned, n_series of them */
    size_t n_series;
    int32_t *table;              /* owned: TABLE_SIZE slots, index + 1, 0 = empty */
};

static struct {
    pthread_mutex_t mu;          /* guards the lists, not the families */
    metric_family *families[MAX_FAMILIES];
    size_t n_families;
    struct { void (*fn)(void *); void *arg; } collectors[MAX_COLLECTORS];
    size_t n_collectors;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const double default_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                        0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30};

metric_family *metric_family_create(const char *name, const char *help, metric_kind kind,
                                    const char *const *labels, const double *buckets,
                                    size_t n_buckets)
{
    metric_family *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->name = strdup(name);
    f->help = strdup(help);
    f->kind = kind;
    for (size_t i = 0; labels && labels[i] && i < METRICS_MAX_LABELS; i++)
        f->labels[f->n_labels++] = strdup(labels[i]);
    if (kind == METRIC_HISTOGRAM) {
        if (!buckets) {
            buckets = default_bounds;
            n_buckets = sizeof default_bounds / sizeof *default_bounds;
        }
        f->n_bounds = n_buckets < METRICS_MAX_BUCKETS ? n_buckets : METRICS_MAX_BUCKETS;
        memcpy(f->bounds, buckets, f->n_bounds * sizeof *buckets);
    }
    pthread_mutex_init(&f->mu, NULL);
    f->series = calloc(METRICS_MAX_SERIES + 1, sizeof *f->series);
    f->table = calloc(TABLE_SIZE, sizeof *f->table);
    pthread_mutex_lock(&M.mu);
    int full = M.n_families == MAX_FAMILIES;
    if (!full)
        M.families[M.n_families++] = f;
    pthread_mutex_unlock(&M.mu);
    if (full || !f->series || !f->table || !f->name || !f->help)
        return NULL;   /* not freed: a partial family may be registered; start-up only */
    return f;
}

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static char *join(const metric_family *f, const char *const *values)
{
    size_t len = 1;
    for (size_t i = 0; i < f->n_labels; i++)
        len += strlen(values && values[i] ? values[i] : "") + 1;
    char *k = malloc(len), *p = k;
    if (!k)
        return NULL;
    for (size_t i = 0; i < f->n_labels; i++) {
        const char *v = values && values[i] ? values[i] : "";
        size_t n = strlen(v);
        memcpy(p, v, n);
        p += n;
        *p++ = '\x1f';
    }
    *p = 0;
    return k;
}

/* The series for these values, made if new; with f->mu held. Past the cap,
 * the "_overflow" series (made in the slot kept for it). */
static series *find_locked(metric_family *f, const char *const *values)
{
    char *key = join(f, values);
    if (!key)
        return NULL;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t h = hash(key);
        for (size_t i = 0; i < TABLE_SIZE; i++) {
            int32_t *slot = &f->table[(h + i) & (TABLE_SIZE - 1)];
            if (*slot && strcmp(f->series[*slot - 1].key, key) == 0) {
                free(key);
                return &f->series[*slot - 1];
            }
            if (*slot)
                continue;
            int overflow = strncmp(key, "_overflow\x1f", 10) == 0;
            if (f->n_series >= METRICS_MAX_SERIES && !overflow)
                break;   /* full: count it under _overflow */
            series *s = &f->series[f->n_series];
            s->key = key;
            for (size_t l = 0; l < f->n_labels; l++)
                s->values[l] = strdup(overflow ? "_overflow"
                                               : (values && values[l] ? values[l] : ""));
            if (f->kind == METRIC_HISTOGRAM)
                s->buckets = calloc(f->n_bounds + 1, sizeof *s->buckets);
            *slot = (int32_t)++f->n_series;
            return s;
        }
        free(key);
        const char *ov[METRICS_MAX_LABELS] = {"_overflow", "_overflow", "_overflow", "_overflow"};
        key = join(f, ov);
        if (!key)
            return NULL;
    }
    free(key);
    return NULL;
}

static void update(metric_family *f, const char *const *values, double v, int op)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    series *s = find_locked(f, values);
    if (s) {
        if (op == 0)
            s->value += v;
        else if (op == 1)
            s->value = v;
        else if (s->buckets) {
            size_t b = 0;
            while (b < f->n_bounds && v > f->bounds[b])
                b++;
            s->buckets[b]++;
            s->value += v;
            s->count++;
        }
    }
    pthread_mutex_unlock(&f->mu);
}

void metric_add(metric_family *f, const char *const *values, double v) { update(f, values, v, 0); }
void metric_set(metric_family *f, const char *const *values, double v) { update(f, values, v, 1); }
void metric_observe(metric_family *f, const char *const *values, double v)
{
    update(f, values, v, 2);
}

void metric_clear(metric_family *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < f->n_series; i++) {
        series *s = &f->series[i];
        free(s->key);
        for (size_t l = 0; l < f->n_labels; l++)
            free(s->values[l]);
        free(s->buckets);
        memset(s, 0, sizeof *s);
    }
    f->n_series = 0;
    memset(f->table, 0, TABLE_SIZE * sizeof *f->table);
    pthread_mutex_unlock(&f->mu);
}

int metrics_add_collector(void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&M.mu);
    int rc = -1;
    if (M.n_collectors < MAX_COLLECTORS) {
        M.collectors[M.n_collectors].fn = fn;
        M.collectors[M.n_collectors++].arg = arg;
        rc = 0;
    }
    pthread_mutex_unlock(&M.mu);
    return rc;
}

/* ---- exposition ---- */

typedef struct buf {
    char *p;
    size_t len, cap;
    int failed;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)n + 1) * 2;
        char *g = realloc(b->p, cap);
        if (!g) {
            b->failed = 1;
            return;
        }
        b->p = g;
        b->cap = cap;
    }
}

/* A label value with \, " and newline escaped, as the format requires. */
static void put_escaped(buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            put(b, "\\\\");
        else if (*v == '"')
            put(b, "\\\"");
        else if (*v == '\n')
            put(b, "\\n");
        else
            put(b, "%c", *v);
    }
}

static void put_labels(buf *b, const metric_family *f, const series *s, const char *le)
{
    if (!f->n_labels && !le)
        return;
    put(b, "{");
    for (size_t l = 0; l < f->n_labels; l++) {
        put(b, "%s%s=\"", l ? "," : "", f->labels[l]);
        put_escaped(b, s->values[l]);
        put(b, "\"");
    }
    if (le)
        put(b, "%sle=\"%s\"", f->n_labels ? "," : "", le);
    put(b, "}");
}

static void put_value(buf *b, double v)
{
    if (isinf(v))
        put(b, v > 0 ? " +Inf\n" : " -Inf\n");
    else if (v == floor(v) && fabs(v) < 1e15)
        put(b, " %.0f\n", v);
    else
        put(b, " %.9g\n", v);
}

static void render_family(buf *b, metric_family *f)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    pthread_mutex_lock(&f->mu);
    put(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, types[f->kind]);
    for (size_t i = 0; i < f->n_series; i++) {
        const series *s = &f->series[i];
        if (f->kind != METRIC_HISTOGRAM) {
            put(b, "%s", f->name);
            put_labels(b, f, s, NULL);
            put_value(b, s->value);
            continue;
        }
        uint64_t cum = 0;
        for (size_t k = 0; k <= f->n_bounds; k++) {
            char le[32];
            if (k < f->n_bounds)
                snprintf(le, sizeof le, "%g", f->bounds[k]);
            else
                snprintf(le, sizeof le, "+Inf");
            cum += s->buckets ? s->buckets[k] : 0;
            put(b, "%s_bucket", f->name);
            put_labels(b, f, s, le);
            put_value(b, (double)cum);
        }
        put(b, "%s_sum", f->name);
        put_labels(b, f, s, NULL);
        put_value(b, s->value);
        put(b, "%s_count", f->name);
        put_labels(b, f, s, NULL);
        put_value(b, (double)s->count);
    }
    pthread_mutex_unlock(&f->mu);
}

char *metrics_render(size_t *len)
{
    pthread_mutex_lock(&M.mu);
    size_t nc = M.n_collectors, nf = M.n_families;
    typeof(M.collectors[0]) cs[MAX_COLLECTORS];
    memcpy(cs, M.collectors, nc * sizeof *cs);
    metric_family *fs[MAX_FAMILIES];
    memcpy(fs, M.families, nf * sizeof *fs);
    pthread_mutex_unlock(&M.mu);
    for (size_t i = 0; i < nc; i++)
        cs[i].fn(cs[i].arg);
    buf b = {0};
    for (size_t i = 0; i < nf; i++)
        render_family(&b, fs[i]);
    if (b.failed || !b.p) {
        free(b.p);
        b.p = strdup("");
        b.len = 0;
    }
    *len = b.len;
    return b.p;
}
