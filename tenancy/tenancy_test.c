/* tenancy_test.c — cmocka unit tests for tenancy/: end-user tokens (sign,
 * verify, every way a token can be bad), the rate bucket with an injected
 * clock, the concurrent-action counter (also under threads), ownership
 * (NOT_FOUND vs PERMISSION_DENIED), sandbox ids and their host prefix, and
 * dedupe keys. Table-driven where there is a table. */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tenancy/tenancy.h"

static const uint8_t KEY[] = "unit-test-hmac-key-0123456789";
#define KEYLEN (sizeof KEY - 1)
#define NOW 1700000000LL

/* ---- tokens ---- */

static void sign(const char *user, const char *task, long long exp, char *out, size_t cap)
{
    assert_int_equal(tenancy_token_sign(KEY, KEYLEN, user, task, exp, out, cap), 0);
}

static void test_token_good(void **state)
{
    (void)state;
    static const struct { const char *user, *task; } rows[] = {
        {"alice", "task-1"}, {"b", "t"}, {"user@example.com", "a/b:c"},
        {"ab", "abc"}, {"abcd", "abcde"},   /* every base64 tail length */
        {"x", "\xc3\xa9t\xc3\xa9"},         /* UTF-8 */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char tok[1024];
        tenancy_token t;
        sg_err e;
        sign(rows[i].user, rows[i].task, NOW + 60, tok, sizeof tok);
        assert_null(strchr(tok, '='));   /* unpadded */
        assert_int_equal(tenancy_token_verify(tok, KEY, KEYLEN, NOW, 3600, &t, &e), 0);
        assert_string_equal(t.user, rows[i].user);
        assert_string_equal(t.task, rows[i].task);
        assert_int_equal(t.expiry, NOW + 60);
    }
}

/* The exact wire format, as a Python signer would build it. */
static void test_token_known_vector(void **state)
{
    (void)state;
    char tok[1024];
    sign("alice", "t1", 1700000060, tok, sizeof tok);
    /* b64url("alice") = YWxpY2U, b64url("t1") = dDE */
    assert_memory_equal(tok, "YWxpY2U.dDE.1700000060.", strlen("YWxpY2U.dDE.1700000060."));
    assert_int_equal(strlen(tok), strlen("YWxpY2U.dDE.1700000060.") + 43);   /* 32-byte MAC */
}

static void flip_last_mac_char(char *tok)
{
    char *c = tok + strlen(tok) - 2;   /* not the last: its low bits may be ignored */
    *c = *c == 'A' ? 'B' : 'A';
}

static void test_token_bad(void **state)
{
    (void)state;
    char good[1024], other_user[1024], other_key[1024];
    sign("alice", "task-1", NOW + 60, good, sizeof good);
    sign("bob", "task-1", NOW + 60, other_user, sizeof other_user);
    assert_int_equal(tenancy_token_sign((const uint8_t *)"another key", 11, "alice", "task-1",
                                        NOW + 60, other_key, sizeof other_key), 0);

    char badmac[1024], trunc[1024], swapped[1024], noexp[1024], garbage[1024], nul_user[1024];
    snprintf(badmac, sizeof badmac, "%s", good);
    flip_last_mac_char(badmac);
    snprintf(trunc, sizeof trunc, "%s", good);
    trunc[strlen(trunc) - 5] = 0;   /* MAC shortened */
    /* bob's user part with alice's MAC: decodes to bob, MAC does not match */
    const char *dot = strchr(good, '.');
    snprintf(swapped, sizeof swapped, "Ym9i%s", dot);
    snprintf(noexp, sizeof noexp, "YWxpY2U.dGFzay0x..%s", strrchr(good, '.') + 1);
    snprintf(garbage, sizeof garbage, "YW*pY2U.dGFzay0x.%lld.%s", NOW + 60, strrchr(good, '.') + 1);
    /* "al\0ice": an embedded NUL must not decode to "al" */
    char tok2[1024];
    sign("al", "task-1", NOW + 60, tok2, sizeof tok2);
    snprintf(nul_user, sizeof nul_user, "YWwAaWNl%s", strchr(tok2, '.'));

    char expired[1024], too_long[1024], at_now[1024];
    sign("alice", "task-1", NOW - 1, expired, sizeof expired);
    sign("alice", "task-1", NOW, at_now, sizeof at_now);
    sign("alice", "task-1", NOW + 3601, too_long, sizeof too_long);

    static char big[4096];
    memset(big, 'A', sizeof big - 1);

    /* Other spellings of a valid token (one token, one string): a sign,
     * space or leading zero in the expiry; set bits past the data in the
     * last base64 char (YWxpY2U and YWxpY2V are both "alice"); a lone
     * trailing char that holds no byte. */
    char plus[1024], zero[1024], space[1024], mac_tail[1024], user_tail[1024], lone[1024];
    char ali[1024];
    const char *exp_at = strstr(good, ".1700000060.");
    assert_non_null(exp_at);
    int pre = (int)(exp_at - good);
    snprintf(plus, sizeof plus, "%.*s.+%s", pre, good, exp_at + 1);
    snprintf(zero, sizeof zero, "%.*s.0%s", pre, good, exp_at + 1);
    snprintf(space, sizeof space, "%.*s. %s", pre, good, exp_at + 1);
    snprintf(mac_tail, sizeof mac_tail, "%s", good);
    char *last = mac_tail + strlen(mac_tail) - 1;   /* 43 chars carry 258 bits: 2 unused */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    *last = b64[(strchr(b64, *last) - b64) ^ 1];
    assert_memory_equal(good, "YWxpY2U.", 8);
    snprintf(user_tail, sizeof user_tail, "YWxpY2V%s", strchr(good, '.'));
    sign("ali", "task-1", NOW + 60, ali, sizeof ali);
    snprintf(lone, sizeof lone, "YWxpA%s", strchr(ali, '.'));   /* "ali" + 6 zero bits */

    const struct { const char *name, *tok; } rows[] = {
        {"bad MAC", badmac},
        {"signed with another key", other_key},
        {"truncated MAC", trunc},
        {"user swapped", swapped},
        {"empty expiry", noexp},
        {"garbage base64", garbage},
        {"embedded NUL in user", nul_user},
        {"expired", expired},
        {"expires now", at_now},
        {"expiry beyond max_ttl", too_long},
        {"empty", ""},
        {"no dots", "YWxpY2U"},
        {"three parts", "YWxpY2U.dGFzay0x.1700000060"},
        {"non-numeric expiry", "YWxpY2U.dGFzay0x.17x.AAAA"},
        {"padding", "YWxpY2U=.dGFzay0x.1700000060.AAAA"},
        {"all A", big},
        {"plus sign in expiry", plus},
        {"leading zero in expiry", zero},
        {"space before expiry", space},
        {"unused bits set in the MAC's last char", mac_tail},
        {"unused bits set in the user's last char", user_tail},
        {"lone base64 char", lone},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        tenancy_token t;
        sg_err e = {0};
        int rc = tenancy_token_verify(rows[i].tok, KEY, KEYLEN, NOW, 3600, &t, &e);
        if (rc != SG_EUNAUTH)
            fail_msg("%s: verify returned %d, want SG_EUNAUTH", rows[i].name, rc);
        assert_non_null(strstr(e.msg, "unauthenticated"));
    }
    /* the other user's own token is fine, and names bob, not alice */
    tenancy_token t;
    sg_err e;
    assert_int_equal(tenancy_token_verify(other_user, KEY, KEYLEN, NOW, 3600, &t, &e), 0);
    assert_string_equal(t.user, "bob");
    /* max_ttl 0 = no cap */
    assert_int_equal(tenancy_token_verify(too_long, KEY, KEYLEN, NOW, 0, &t, &e), 0);
    /* overflowing expiry: strtoll clamped it to LLONG_MAX, whose MAC a
     * token for LLONG_MAX carries */
    char huge[1024], huge_alias[1024];
    sign("alice", "task-1", LLONG_MAX, huge, sizeof huge);
    const char *hd = strstr(huge, ".9223372036854775807.");
    assert_non_null(hd);
    snprintf(huge_alias, sizeof huge_alias, "%.*s.99999999999999999999%s", (int)(hd - huge), huge,
             hd + strlen(".9223372036854775807"));
    assert_int_equal(tenancy_token_verify(huge_alias, KEY, KEYLEN, NOW, 0, &t, &e), SG_EUNAUTH);
    /* exactly max_ttl is accepted */
    char edge[1024];
    sign("alice", "task-1", NOW + 3600, edge, sizeof edge);
    assert_int_equal(tenancy_token_verify(edge, KEY, KEYLEN, NOW, 3600, &t, &e), 0);
}

/* Names the verifier cannot hold are refused when signing, not turned
 * into a token that never verifies; long ones made mac_of's HMAC read past
 * its message buffer (token_fuzz's sign → verify round trip found it). */
static void test_token_sign_limits(void **state)
{
    (void)state;
    char name127[128], name128[129], name250[251], tok[2048];
    memset(name127, 'u', 127);
    name127[127] = 0;
    memset(name128, 'u', 128);
    name128[128] = 0;
    memset(name250, 'v', 250);
    name250[250] = 0;
    tenancy_token t;
    sg_err e;
    sign(name127, name127, NOW + 60, tok, sizeof tok);
    assert_int_equal(tenancy_token_verify(tok, KEY, KEYLEN, NOW, 3600, &t, &e), 0);
    assert_string_equal(t.user, name127);
    assert_int_equal(tenancy_token_sign(KEY, KEYLEN, name128, "t", NOW + 60, tok, sizeof tok), -1);
    assert_int_equal(tenancy_token_sign(KEY, KEYLEN, "u", name128, NOW + 60, tok, sizeof tok), -1);
    assert_int_equal(tenancy_token_sign(KEY, KEYLEN, name250, name250, NOW + 60, tok, sizeof tok), -1);
    assert_int_equal(tenancy_token_sign(KEY, KEYLEN, "u", "t", -1, tok, sizeof tok), -1);
}

/* ---- rate bucket (clock injected) ---- */

static void test_rate_bucket(void **state)
{
    (void)state;
    sg_err e;
    int64_t t0 = 5000000;
    /* burst 5 at 5/s: five pass, the sixth is refused */
    for (int i = 0; i < 5; i++)
        assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t0, &e), 0);
    assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t0, &e), SG_EQUOTA);
    assert_non_null(strstr(e.msg, "rate limit"));
    assert_non_null(strstr(e.msg, "rate-a"));
    /* 100 ms later: half a token, still refused; 200 ms: one token */
    assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t0 + 100000, &e), SG_EQUOTA);
    assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t0 + 200000, &e), 0);
    assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t0 + 200000, &e), SG_EQUOTA);
    /* a long pause refills only up to the burst */
    int64_t t1 = t0 + 60 * 1000000LL;
    for (int i = 0; i < 5; i++)
        assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t1, &e), 0);
    assert_int_equal(tenancy_rate_take("rate-a", 5, 5, t1, &e), SG_EQUOTA);
    /* tenants have separate buckets */
    assert_int_equal(tenancy_rate_take("rate-b", 5, 5, t1, &e), 0);
    /* burst 0 = max(rate, 1): rate 3 → 3 at once */
    for (int i = 0; i < 3; i++)
        assert_int_equal(tenancy_rate_take("rate-c", 3, 0, t0, &e), 0);
    assert_int_equal(tenancy_rate_take("rate-c", 3, 0, t0, &e), SG_EQUOTA);
    /* rate 0.5, burst 0 → a bucket of 1, refilled every 2 s */
    assert_int_equal(tenancy_rate_take("rate-d", 0.5, 0, t0, &e), 0);
    assert_int_equal(tenancy_rate_take("rate-d", 0.5, 0, t0 + 1000000, &e), SG_EQUOTA);
    assert_int_equal(tenancy_rate_take("rate-d", 0.5, 0, t0 + 2000001, &e), 0);
    /* no rate in the policy: unlimited */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(tenancy_rate_take("rate-e", 0, 0, t0, &e), 0);
    /* steady state: 10/s for 10 s at 20 calls/s → ~burst + 100 pass */
    int passed = 0;
    for (int i = 0; i < 200; i++)
        passed += tenancy_rate_take("rate-f", 10, 4, t0 + i * 50000LL, &e) == 0;
    assert_in_range(passed, 4 + 99 - 1, 4 + 100);
}

/* ---- concurrent actions ---- */

static void test_action_counter(void **state)
{
    (void)state;
    sg_err e;
    assert_int_equal(tenancy_action_begin("act-a", 2, &e), 0);
    assert_int_equal(tenancy_action_begin("act-a", 2, &e), 0);
    assert_int_equal(tenancy_action_begin("act-a", 2, &e), SG_EQUOTA);
    assert_non_null(strstr(e.msg, "concurrent actions"));
    assert_int_equal(tenancy_action_begin("act-b", 2, &e), 0);   /* other tenant unaffected */
    tenancy_action_end("act-a");
    assert_int_equal(tenancy_action_begin("act-a", 2, &e), 0);
    assert_int_equal(tenancy_action_begin("act-a", 2, &e), SG_EQUOTA);
    tenancy_action_end("act-a");
    tenancy_action_end("act-a");
    tenancy_action_end("act-a");   /* one too many: must not underflow */
    assert_int_equal(tenancy_action_begin("act-a", 1, &e), 0);
    assert_int_equal(tenancy_action_begin("act-a", 1, &e), SG_EQUOTA);
    tenancy_action_end("act-a");
    for (int i = 0; i < 100; i++)   /* max 0 = unlimited */
        assert_int_equal(tenancy_action_begin("act-c", 0, &e), 0);
}

#define THREADS 8
#define ROUNDS 20000
static int admitted[THREADS];

static void *churn(void *arg)
{
    sg_err e;
    for (int i = 0; i < ROUNDS; i++)
        if (tenancy_action_begin("act-threads", 3, &e) == 0)
            tenancy_action_end("act-threads");
    return arg;
}

static void *grab(void *arg)
{
    sg_err e;
    int idx = (int)(intptr_t)arg;
    admitted[idx] = tenancy_action_begin("act-grab", 5, &e) == 0;
    return NULL;
}

static void test_action_counter_threads(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, churn, NULL);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* every begin was ended: all 3 slots are free again */
    sg_err e;
    for (int i = 0; i < 3; i++)
        assert_int_equal(tenancy_action_begin("act-threads", 3, &e), 0);
    assert_int_equal(tenancy_action_begin("act-threads", 3, &e), SG_EQUOTA);
    /* racing begins never admit more than max */
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, grab, (void *)(intptr_t)i);
    int n = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        n += admitted[i];
    }
    assert_int_equal(n, 5);
}

/* ---- ownership ---- */

static void test_check_owner(void **state)
{
    (void)state;
    tenancy_identity me = {.tenant = "acme", .user = "alice"};
    static const struct { const char *tenant, *user; int want; const char *msg; } rows[] = {
        {"acme", "alice", 0, NULL},
        {"acme", "bob", SG_EDENIED, "another user"},
        {"other", "alice", SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG},
        {"other", "bob", SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG},
        {"acm", "alice", SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG},
        {"acmee", "alice", SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG},
        {"acme", "alic", SG_EDENIED, "another user"},
        {"acme", "", SG_EDENIED, "another user"},
        {"", "alice", SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        sg_err e = {0};
        int rc = tenancy_check_owner(&me, rows[i].tenant, rows[i].user, &e);
        if (rc != rows[i].want)
            fail_msg("owner (%s,%s): got %d want %d", rows[i].tenant, rows[i].user, rc,
                     rows[i].want);
        if (rows[i].want == SG_ENOTFOUND)   /* exactly the "never existed" wording */
            assert_string_equal(e.msg, TENANCY_NOT_FOUND_MSG);
        else if (rows[i].msg)
            assert_non_null(strstr(e.msg, rows[i].msg));
    }
}

/* ---- sandbox ids ---- */

static void test_sandbox_ids(void **state)
{
    (void)state;
    char a[96], b[96], host[64];
    sg_err e;
    assert_int_equal(tenancy_new_sandbox_id("h1", a, sizeof a, &e), 0);
    assert_int_equal(tenancy_new_sandbox_id("h1", b, sizeof b, &e), 0);
    assert_int_equal(strlen(a), 3 + 32);   /* 128 bits = 32 hex chars */
    assert_memory_equal(a, "h1-", 3);
    for (const char *p = a + 3; *p; p++)
        assert_non_null(strchr("0123456789abcdef", *p));
    assert_string_not_equal(a, b);
    assert_int_equal(tenancy_sandbox_host(a, host, sizeof host), 0);
    assert_string_equal(host, "h1");
    /* 1000 ids: all distinct, and the hex digits are not stuck */
    static char ids[1000][96];
    int seen[16] = {0};
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(tenancy_new_sandbox_id("local", ids[i], sizeof ids[i], &e), 0);
        for (const char *p = ids[i] + 6; *p; p++)
            seen[*p <= '9' ? *p - '0' : *p - 'a' + 10]++;
        for (int k = 0; k < i; k++)
            assert_string_not_equal(ids[i], ids[k]);
    }
    for (int d = 0; d < 16; d++)
        assert_in_range(seen[d], 1500, 2500);   /* 32000 digits, 2000 expected each */

    static const struct { const char *id; int ok; const char *host; } rows[] = {
        {"local-0123456789abcdef0123456789abcdef", 0, "local"},
        {"t1a2b3c4-ffffffffffffffffffffffffffffffff", 0, "t1a2b3c4"},
        {"local-0123456789abcdef0123456789abcde", -1, NULL},     /* 31 hex */
        {"local-0123456789abcdef0123456789abcdef0", -1, NULL},   /* 33 hex */
        {"local-0123456789ABCDEF0123456789abcdef", -1, NULL},    /* upper case */
        {"local-0123456789abcdef0123456789abcdeg", -1, NULL},
        {"-0123456789abcdef0123456789abcdef", -1, NULL},         /* no host */
        {"0123456789abcdef0123456789abcdef", -1, NULL},          /* no dash */
        {"", -1, NULL},
        {"a-b-0123456789abcdef0123456789abcdef", -1, NULL},
        {"local-../0123456789abcdef0123456789ab", -1, NULL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char h[64] = "";
        int rc = tenancy_sandbox_host(rows[i].id, h, sizeof h);
        if (rc != rows[i].ok)
            fail_msg("tenancy_sandbox_host(\"%s\") = %d, want %d", rows[i].id, rc, rows[i].ok);
        if (rows[i].host)
            assert_string_equal(h, rows[i].host);
    }
    /* a host name that does not fit the caller's buffer is malformed */
    assert_int_equal(tenancy_sandbox_host("longhostname-0123456789abcdef0123456789abcdef", host, 5),
                     -1);
}

/* ---- dedupe keys ---- */

static void test_dedupe_keys(void **state)
{
    (void)state;
    char k[8][400];
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "acme", "alice", "t1", k[0], sizeof k[0]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "acme", "alice", "t1", k[1], sizeof k[1]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "acme", "alice", "t2", k[2], sizeof k[2]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "acme", "bob", "t1", k[3], sizeof k[3]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "other", "alice", "t1", k[4], sizeof k[4]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_USER, "acme", "alice", "t1", k[5], sizeof k[5]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_USER, "acme", "alice", "t2", k[6], sizeof k[6]);
    tenancy_dedupe_key(POLICY_SCOPE_PER_USER, "acme", "bob", "t1", k[7], sizeof k[7]);
    assert_string_equal(k[0], k[1]);       /* same task: same key (retries dedupe) */
    assert_string_not_equal(k[0], k[2]);   /* other task */
    assert_string_not_equal(k[0], k[3]);   /* other user, same task name */
    assert_string_not_equal(k[0], k[4]);   /* other tenant */
    assert_string_equal(k[5], k[6]);       /* per_user: tasks share */
    assert_string_not_equal(k[5], k[7]);   /* ... users never */
    assert_string_not_equal(k[0], k[5]);   /* scopes never collide */
    /* field boundaries: ("ab","c") vs ("a","bc") */
    char x[400], y[400];
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "acme", "ab", "c", x, sizeof x);
    tenancy_dedupe_key(POLICY_SCOPE_PER_TASK, "acme", "a", "bc", y, sizeof y);
    assert_string_not_equal(x, y);
    tenancy_dedupe_key(POLICY_SCOPE_PER_USER, "ab", "c", "t", x, sizeof x);
    tenancy_dedupe_key(POLICY_SCOPE_PER_USER, "a", "bc", "t", y, sizeof y);
    assert_string_not_equal(x, y);
}

/* ---- names and the owner cache ---- */

static void test_names_and_cache(void **state)
{
    (void)state;
    sg_err e;
    assert_int_equal(tenancy_check_name("user_id", "alice", 1, &e), 0);
    assert_int_equal(tenancy_check_name("user_id", "", 1, &e), SG_EINVAL);
    assert_int_equal(tenancy_check_name("user_id", "", 0, &e), 0);
    assert_int_equal(tenancy_check_name("user_id", "a b", 1, &e), SG_EINVAL);
    assert_int_equal(tenancy_check_name("user_id", "a\x1f" "b", 1, &e), SG_EINVAL);
    char longname[200];
    memset(longname, 'u', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_int_equal(tenancy_check_name("user_id", longname, 1, &e), SG_EINVAL);

    char t[TENANCY_NAME_MAX], u[TENANCY_NAME_MAX], k[TENANCY_NAME_MAX];
    const char *id = "h1-00112233445566778899aabbccddeeff";
    assert_int_equal(tenancy_owner_get(id, t, u, k), -1);
    tenancy_owner_put(id, "acme", "alice", "t1");
    assert_int_equal(tenancy_owner_get(id, t, u, k), 0);
    assert_string_equal(t, "acme");
    assert_string_equal(u, "alice");
    assert_string_equal(k, "t1");
    assert_int_equal(tenancy_owner_get("h1-00112233445566778899aabbccddeef0", t, u, k), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_good),
        cmocka_unit_test(test_token_known_vector),
        cmocka_unit_test(test_token_bad),
        cmocka_unit_test(test_token_sign_limits),
        cmocka_unit_test(test_rate_bucket),
        cmocka_unit_test(test_action_counter),
        cmocka_unit_test(test_action_counter_threads),
        cmocka_unit_test(test_check_owner),
        cmocka_unit_test(test_sandbox_ids),
        cmocka_unit_test(test_dedupe_keys),
        cmocka_unit_test(test_names_and_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
