/* counts_test.c — the cached quota counts (counts.c): what a create counts
 * for a host that cannot answer. A fan-out answer replaces a tenant's entry
 * with owners only; a create adds to an entry but never invents one; a load
 * report replaces every tenant it names and empties the ones it no longer
 * has; the table is bounded, dropping the least recently written tenant. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gateway/request.h"

/* A HostListResponse of n sandboxes of (tenant, user, task-i). */
typedef struct fake_list {
    Sandgate__V1__HostListResponse resp;
    Sandgate__V1__HostSandbox hs[8], *ptrs[8];
    Sandgate__V1__Sandbox sb[8];
    Sandgate__V1__Owner own[8];
    char tasks[8][32];
} fake_list;

static void fake_add(fake_list *f, const char *tenant, const char *user, const char *task)
{
    size_t i = f->resp.n_sandboxes++;
    sandgate__v1__host_sandbox__init(&f->hs[i]);
    sandgate__v1__sandbox__init(&f->sb[i]);
    sandgate__v1__owner__init(&f->own[i]);
    snprintf(f->tasks[i], sizeof f->tasks[i], "%s", task);
    f->sb[i].sandbox_id = "h-0123";
    f->own[i].tenant_id = (char *)tenant;
    f->own[i].user_id = (char *)user;
    f->own[i].task_id = f->tasks[i];
    f->hs[i].sandbox = &f->sb[i];
    f->hs[i].owner = &f->own[i];
    f->ptrs[i] = &f->hs[i];
    f->resp.sandboxes = f->ptrs;
}

static void fake_init(fake_list *f)
{
    memset(f, 0, sizeof *f);
    sandgate__v1__host_list_response__init(&f->resp);
}

/* How many cached sandboxes host has for tenant; -1 = no entry. */
static int cached(size_t host, const char *tenant)
{
    Sandgate__V1__HostListResponse *r = gw_counts_get(host, tenant);
    if (!r)
        return -1;
    int n = (int)r->n_sandboxes;
    for (size_t i = 0; i < r->n_sandboxes; i++) {
        assert_non_null(r->sandboxes[i]->owner);
        assert_string_equal(r->sandboxes[i]->owner->tenant_id, tenant);
        assert_null(r->sandboxes[i]->sandbox);   /* owners only */
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return n;
}

static void test_put_get(void **state)
{
    fake_list f;
    fake_init(&f);
    fake_add(&f, "acme", "u1", "t1");
    fake_add(&f, "acme", "u2", "t2");
    assert_int_equal(cached(0, "acme"), -1);
    gw_counts_put(0, "acme", &f.resp);
    assert_int_equal(cached(0, "acme"), 2);
    assert_int_equal(cached(1, "acme"), -1);   /* per host */
    assert_int_equal(cached(0, "beta"), -1);   /* per tenant */
    fake_init(&f);
    gw_counts_put(0, "acme", &f.resp);          /* the next answer replaces it */
    assert_int_equal(cached(0, "acme"), 0);
    gw_counts_put(GW_MAX_HOSTS, "acme", &f.resp);   /* out of range: ignored */
    assert_null(gw_counts_get(GW_MAX_HOSTS, "acme"));
}

static void test_add(void **state)
{
    Sandgate__V1__Owner o;
    sandgate__v1__owner__init(&o);
    o.tenant_id = "gamma";
    o.user_id = "u";
    o.task_id = "t";
    gw_counts_add(2, "gamma", &o);   /* no entry: the next answer says */
    assert_int_equal(cached(2, "gamma"), -1);
    fake_list f;
    fake_init(&f);
    fake_add(&f, "gamma", "u0", "t0");
    gw_counts_put(2, "gamma", &f.resp);
    gw_counts_add(2, "gamma", &o);
    gw_counts_add(2, "gamma", &o);
    assert_int_equal(cached(2, "gamma"), 3);
    fake_init(&f);
    gw_counts_put(2, "delta", &f.resp);   /* an empty entry (no array) grows too */
    o.tenant_id = "delta";
    gw_counts_add(2, "delta", &o);
    assert_int_equal(cached(2, "delta"), 1);
}

static void test_report(void **state)
{
    fake_list f;
    fake_init(&f);
    fake_add(&f, "old", "u", "t");
    gw_counts_put(3, "old", &f.resp);
    fake_init(&f);
    fake_add(&f, "kept", "u", "t");
    gw_counts_put(3, "kept", &f.resp);
    /* the report: "kept" now has two, "new" one, "old" none */
    fake_init(&f);
    fake_add(&f, "kept", "u", "t1");
    fake_add(&f, "new", "v", "t2");
    fake_add(&f, "kept", "w", "t3");
    gw_counts_report(3, &f.resp);
    assert_int_equal(cached(3, "kept"), 2);
    assert_int_equal(cached(3, "new"), 1);
    assert_int_equal(cached(3, "old"), 0);
    assert_int_equal(cached(4, "new"), -1);
}

static void test_bounded(void **state)
{
    fake_list f;
    char name[32];
    for (int i = 0; i <= 1024; i++) {   /* one more than the table holds */
        snprintf(name, sizeof name, "tenant-%d", i);
        fake_init(&f);
        fake_add(&f, name, "u", "t");
        gw_counts_put(5, name, &f.resp);
    }
    assert_int_equal(cached(5, "tenant-0"), -1);   /* the least recently written went */
    assert_int_equal(cached(5, "tenant-1"), 1);
    assert_int_equal(cached(5, "tenant-1024"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
