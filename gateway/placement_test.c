/* placement_test.c — rendezvous hashing by host name (placement.c): a
 * table of fixed picks (replicas of any version must agree, so the hash
 * may not change silently), then the properties placement relies on: the
 * order of the configured hosts never matters, adding a host moves only the
 * keys it wins (~1/n), a host that is not usable loses only its own keys,
 * and keys spread evenly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "gateway/placement.h"

#define NKEYS 20000

static void key_of(int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "task\x1f" "demo\x1f" "user-%d\x1f" "task-%d", i % 37, i);
}

/* Golden rows: the picks of today's hash, computed by an independent
 * implementation of the spec in placement.h (Python, in the commit that
 * added them). */
static void test_fixed_picks(void **state)
{
    static const char *const hosts[] = {"host-a", "host-b", "host-c"};
    static const struct {
        const char *name, *key;
        int want;   /* index into hosts */
    } rows[] = {
        {"r0", "task\x1f" "demo\x1f" "alice\x1f" "t0", 2},
        {"r1", "task\x1f" "demo\x1f" "alice\x1f" "t1", 1},
        {"r2", "task\x1f" "demo\x1f" "alice\x1f" "t2", 2},
        {"r3", "task\x1f" "demo\x1f" "alice\x1f" "t3", 2},
        {"r4", "task\x1f" "demo\x1f" "alice\x1f" "t4", 0},
        {"r5", "task\x1f" "demo\x1f" "alice\x1f" "t5", 1},
        {"r6", "task\x1f" "demo\x1f" "alice\x1f" "t6", 2},
        {"r7", "task\x1f" "demo\x1f" "alice\x1f" "t7", 0},
        {"r8", "task\x1f" "demo\x1f" "alice\x1f" "t8", 2},
        {"r9", "user\x1f" "demo\x1f" "bob", 1},
        {"r10", "task\x1f" "other\x1f" "u\x1f" "x", 1},
        {"r11", "", 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int got = gw_place_pick(hosts, NULL, 3, rows[i].key);
        if (got != rows[i].want) {
            fprintf(stderr, "row %s: key %s: got %d, want %d\n", rows[i].name, rows[i].key, got,
                    rows[i].want);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
    assert_true(gw_place_score("host-a", "k") == 0x52daec1fd74a35b0ull);
    assert_true(gw_place_score("", "") == 0x15e42bf327bbda0full);
}

static void test_order_never_matters(void **state)
{
    const char *a[] = {"alpha", "bravo", "charlie", "delta", "echo"};
    const char *b[] = {"echo", "charlie", "alpha", "delta", "bravo"};
    char key[128];
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, key, sizeof key);
        int x = gw_place_pick(a, NULL, 5, key), y = gw_place_pick(b, NULL, 5, key);
        assert_true(x >= 0 && y >= 0);
        if (strcmp(a[x], b[y]) != 0)
            fail_msg("key %s: %s in one order, %s in the other", key, a[x], b[y]);
    }
}

static void test_adding_a_host_moves_only_its_keys(void **state)
{
    const char *four[] = {"h1", "h2", "h3", "h4"};
    const char *five[] = {"h1", "h2", "h5", "h3", "h4"};   /* joins in the middle */
    char key[128];
    int moved = 0;
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, key, sizeof key);
        const char *was = four[gw_place_pick(four, NULL, 4, key)];
        const char *now = five[gw_place_pick(five, NULL, 5, key)];
        if (strcmp(was, now) != 0) {
            if (strcmp(now, "h5") != 0)
                fail_msg("key %s moved %s -> %s, not to the new host", key, was, now);
            moved++;
        }
    }
    double f = (double)moved / NKEYS;
    fprintf(stderr, "adding a 5th host moved %.3f of the keys (ideal 0.200)\n", f);
    assert_true(f > 0.17 && f < 0.23);
}

static void test_unusable_host_loses_only_its_keys(void **state)
{
    const char *hosts[] = {"h1", "h2", "h3", "h4"};
    const int up[] = {1, 0, 1, 1};
    char key[128];
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, key, sizeof key);
        int all = gw_place_pick(hosts, NULL, 4, key), some = gw_place_pick(hosts, up, 4, key);
        assert_int_not_equal(some, 1);
        if (all != 1 && all != some)
            fail_msg("key %s moved %s -> %s though its host is up", key, hosts[all], hosts[some]);
    }
    const int none[] = {0, 0, 0, 0};
    assert_int_equal(gw_place_pick(hosts, none, 4, "k"), -1);
    assert_int_equal(gw_place_pick(hosts, NULL, 0, "k"), -1);
}

static void test_keys_spread_evenly(void **state)
{
    /* Names that differ in one character: a bare FNV-1a would skew these. */
    const char *hosts[] = {"host-1", "host-2", "host-3", "host-4"};
    int per[4] = {0};
    char key[128];
    for (int i = 0; i < NKEYS; i++) {
        key_of(i, key, sizeof key);
        per[gw_place_pick(hosts, NULL, 4, key)]++;
    }
    for (int h = 0; h < 4; h++) {
        double f = (double)per[h] / NKEYS;
        fprintf(stderr, "%s: %.3f of the keys\n", hosts[h], f);
        assert_true(f > 0.22 && f < 0.28);
    }
}

static void test_score_separates_name_and_key(void **state)
{
    /* The NUL between them: ("ab", "c") and ("a", "bc") are different inputs. */
    assert_true(gw_place_score("ab", "c") != gw_place_score("a", "bc"));
    assert_true(gw_place_score("h", "k") == gw_place_score("h", "k"));
}

/* Placement by load (registry mode): table rows for the score, then the
 * sampling's properties. */
static void test_load_score_rows(void **state)
{
    static const struct {
        const char *name;
        gw_place_cand a, b;
        int a_wins;
        const char *why;
    } rows[] = {
        {"free slots", {10, 2, 0, 1ll << 30, 0}, {10, 8, 0, 1ll << 30, 0}, 1,
         "more free slots wins at equal memory and pool"},
        {"pending counts", {10, 2, 7, 1ll << 30, 0}, {10, 4, 0, 1ll << 30, 0}, 0,
         "creates placed since the report count as used"},
        {"memory", {10, 5, 0, 8ll << 30, 0}, {10, 5, 0, 1ll << 30, 0}, 1,
         "more free memory wins at equal slots"},
        {"warm pool", {10, 5, 0, 1ll << 30, 2}, {10, 5, 0, 1ll << 30, 0}, 1,
         "a ready warm sandbox wins"},
        {"warm pool used up", {10, 5, 2, 1ll << 30, 2}, {10, 5, 0, 1ll << 30, 1}, 0,
         "pending creates take the ready ones first"},
        {"full", {10, 10, 0, 64ll << 30, 4}, {10, 9, 0, 0, 0}, 0,
         "a full host loses to any host with a slot"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double sa = gw_place_load_score(&rows[i].a), sb = gw_place_load_score(&rows[i].b);
        if ((sa > sb) != rows[i].a_wins)
            fail_msg("row %s: %.3f vs %.3f (%s)", rows[i].name, sa, sb, rows[i].why);
    }
    gw_place_cand full = {4, 4, 0, 0, 0};
    assert_true(gw_place_load_score(&full) < 0);
}

static void test_load_sampling(void **state)
{
    /* 10 hosts, one nearly empty: it wins whenever sampled (about 3/10 of
     * draws), never loses to a fuller one, and every draw picks one of its
     * own sample; with 2 hosts both are always sampled. */
    gw_place_cand c[10];
    for (int i = 0; i < 10; i++)
        c[i] = (gw_place_cand){100, 80, 0, 1ll << 30, 0};
    c[7].live = 1;
    int wins = 0;
    for (uint64_t r = 1; r <= 3000; r++) {
        int p = gw_place_by_load(c, 10, r * 0x2545F4914F6CDD1Dull);
        assert_true(p >= 0 && p < 10);
        wins += p == 7;
    }
    fprintf(stderr, "emptiest host chosen in %d of 3000 draws\n", wins);
    assert_true(wins > 700 && wins < 1100);
    gw_place_cand two[2] = {{10, 9, 0, 0, 0}, {10, 1, 0, 0, 0}};
    for (uint64_t r = 1; r <= 100; r++)
        assert_int_equal(gw_place_by_load(two, 2, r), 1);
    assert_int_equal(gw_place_by_load(two, 0, 1), -1);
    /* full hosts only if nothing else was sampled */
    gw_place_cand f[2] = {{1, 1, 0, 0, 0}, {1, 1, 0, 0, 0}};
    assert_true(gw_place_by_load(f, 2, 5) >= 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_picks),
        cmocka_unit_test(test_order_never_matters),
        cmocka_unit_test(test_adding_a_host_moves_only_its_keys),
        cmocka_unit_test(test_unusable_host_loses_only_its_keys),
        cmocka_unit_test(test_keys_spread_evenly),
        cmocka_unit_test(test_score_separates_name_and_key),
        cmocka_unit_test(test_load_score_rows),
        cmocka_unit_test(test_load_sampling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
