/* metrics_test.c — the registry's exposition text, label escaping, the
 * histogram's cumulative buckets, and the series cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/metrics.h"

static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
            return 1;
    return 0;
}

static int collected;
static void collector(void *arg) { collected++; }

static void test_counter_gauge_escaping(void **state)
{
    static const char *const l[] = {"who", NULL};
    metric_family *c = metric_family_create("t_calls_total", "Calls.", METRIC_COUNTER, l, NULL, 0);
    metric_family *g = metric_family_create("t_up", "Up.", METRIC_GAUGE, NULL, NULL, 0);
    assert_non_null(c);
    const char *a[] = {"a\"b\\c\nd"};
    metric_add(c, a, 2);
    metric_add(c, a, 0.5);
    metric_set(g, NULL, 7);
    metric_set(g, NULL, 3);
    assert_int_equal(metrics_add_collector(collector, NULL), 0);
    size_t len;
    char *t = metrics_render(&len);
    assert_int_equal(strlen(t), len);
    assert_true(has_line(t, "# TYPE t_calls_total counter"));
    assert_true(has_line(t, "t_calls_total{who=\"a\\\"b\\\\c\\nd\"} 2.5"));
    assert_true(has_line(t, "t_up 3"));
    assert_int_equal(collected, 1);
    free(t);
}

static void test_histogram(void **state)
{
    static const char *const l[] = {"m", NULL};
    static const double b[] = {0.1, 1};
    metric_family *h = metric_family_create("t_seconds", "Time.", METRIC_HISTOGRAM, l, b, 2);
    const char *m[] = {"x"};
    metric_observe(h, m, 0.05);
    metric_observe(h, m, 0.1);   /* le is inclusive */
    metric_observe(h, m, 0.5);
    metric_observe(h, m, 5);
    size_t len;
    char *t = metrics_render(&len);
    assert_true(has_line(t, "t_seconds_bucket{m=\"x\",le=\"0.1\"} 2"));
    assert_true(has_line(t, "t_seconds_bucket{m=\"x\",le=\"1\"} 3"));
    assert_true(has_line(t, "t_seconds_bucket{m=\"x\",le=\"+Inf\"} 4"));
    assert_true(has_line(t, "t_seconds_sum{m=\"x\"} 5.65"));
    assert_true(has_line(t, "t_seconds_count{m=\"x\"} 4"));
    free(t);
}

static void test_series_cap(void **state)
{
    static const char *const l[] = {"tenant", NULL};
    metric_family *c = metric_family_create("t_capped_total", "Capped.", METRIC_COUNTER, l, NULL, 0);
    char v[32];
    for (int i = 0; i < METRICS_MAX_SERIES + 100; i++) {
        snprintf(v, sizeof v, "t%d", i);
        const char *vals[] = {v};
        metric_add(c, vals, 1);
    }
    size_t len;
    char *t = metrics_render(&len);
    int n = 0;
    for (const char *p = t; (p = strstr(p, "\nt_capped_total{")); p++)
        n++;
    assert_int_equal(n, METRICS_MAX_SERIES + 1);   /* the cap, plus _overflow */
    assert_true(has_line(t, "t_capped_total{tenant=\"_overflow\"} 100"));
    free(t);
    metric_clear(c);
    t = metrics_render(&len);
    assert_null(strstr(t, "t_capped_total{"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_gauge_escaping),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_series_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
