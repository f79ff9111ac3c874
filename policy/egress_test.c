/* egress_test.c — table tests for the matching mechanics in egress.c: IP
 * literal spellings and their normalisation, special ranges, CIDR syntax,
 * host syntax and task globs. One row per case; failures print the row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "policy/internal.h"

typedef struct ip_row {
    const char *name, *in;
    int is_ip;
    const char *norm;        /* formatted normal form */
    const char *special;     /* range name or NULL */
} ip_row;

static const ip_row ip_rows[] = {
    {"dotted v4", "93.184.216.34", 1, "93.184.216.34", NULL},
    {"decimal v4", "2130706433", 1, "127.0.0.1", "loopback"},
    {"octal v4", "0177.0.0.01", 1, "127.0.0.1", "loopback"},
    {"hex v4", "0x7f000001", 1, "127.0.0.1", "loopback"},
    {"short v4", "127.1", 1, "127.0.0.1", "loopback"},
    {"mixed hex short", "0xa9.0xfe.0xa9fe", 1, "169.254.169.254", "link-local"},
    {"mapped v6", "::ffff:169.254.169.254", 1, "169.254.169.254", "link-local"},
    {"mapped v6 hex", "::ffff:a9fe:a9fe", 1, "169.254.169.254", "link-local"},
    {"bracketed mapped", "[::ffff:10.0.0.1]", 1, "10.0.0.1", "private (RFC 1918)"},
    {"compat v6", "::10.0.0.1", 1, "10.0.0.1", "private (RFC 1918)"},
    {"nat64", "64:ff9b::7f00:1", 1, "127.0.0.1", "loopback"},
    {"v6 unspecified", "::", 1, "::", "unspecified"},
    {"v6 loopback", "::1", 1, "::1", "loopback"},
    {"v6 public", "2606:4700::1111", 1, "2606:4700::1111", NULL},
    {"v6 link-local", "fe80::abcd", 1, "fe80::abcd", "link-local"},
    {"v6 ULA", "fd00::1", 1, "fd00::1", "unique-local (private)"},
    {"v6 multicast", "ff05::2", 1, "ff05::2", "multicast"},
    {"6to4 metadata", "2002:a9fe:a9fe::1", 1, "2002:a9fe:a9fe::1", "link-local"},
    {"cgnat", "100.100.100.100", 1, "100.100.100.100", "carrier-grade NAT"},
    {"172.16/12 edge in", "172.31.255.255", 1, "172.31.255.255", "private (RFC 1918)"},
    {"172.16/12 edge out", "172.32.0.1", 1, "172.32.0.1", NULL},
    {"broadcast", "255.255.255.255", 1, "255.255.255.255", "reserved"},
    {"multicast v4", "239.1.1.1", 1, "239.1.1.1", "multicast"},
    {"this network", "0.1.2.3", 1, "0.1.2.3", "unspecified"},
    {"name", "example.com", 0, NULL, NULL},
    {"hex-looking name", "cafe.be", 0, NULL, NULL},
    {"trailing garbage", "1.2.3.4 x", 0, NULL, NULL},
    /* a zone id does not make a link-local address a name */
    {"v6 with zone", "fe80::1%eth0", 1, "fe80::1", "link-local"},
    {"empty", "", 0, NULL, NULL},
    {"trailing dot v4", "127.0.0.1.", 1, "127.0.0.1", "loopback"},
};

static void test_ip(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof ip_rows / sizeof *ip_rows; i++) {
        const ip_row *r = &ip_rows[i];
        uint8_t ip[16];
        int is = pol_ip_parse(r->in, ip);
        char buf[64] = "";
        const char *sp = NULL;
        if (is) {
            pol_ip_format(ip, buf, sizeof buf);
            sp = pol_ip_special(ip, NULL);
        }
        if (is != r->is_ip || (is && strcmp(buf, r->norm) != 0) ||
            (sp == NULL) != (r->special == NULL) || (sp && strcmp(sp, r->special) != 0)) {
            print_error("FAIL row '%s': '%s' → ip=%d norm=%s special=%s\n", r->name, r->in, is, buf,
                        sp ? sp : "-");
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

typedef struct cidr_row {
    const char *name, *cidr, *ip;
    int ok, contains;
} cidr_row;

static const cidr_row cidr_rows[] = {
    {"v4 /16 in", "10.1.0.0/16", "10.1.200.3", 1, 1},
    {"v4 /16 out", "10.1.0.0/16", "10.2.0.1", 1, 0},
    {"v4 /32", "169.254.169.254/32", "169.254.169.254", 1, 1},
    {"v4 bare address", "8.8.8.8", "8.8.8.8", 1, 1},
    {"v4 /0", "0.0.0.0/0", "1.2.3.4", 1, 1},
    {"v4 /0 vs v6", "0.0.0.0/0", "2001:db8::1", 1, 0},
    {"v4 rule vs mapped ip", "10.0.0.0/8", "::ffff:10.9.9.9", 1, 1},
    {"v4 /12 odd bits", "172.16.0.0/12", "172.31.0.1", 1, 1},
    {"v6 /32", "2001:db8::/32", "2001:db8:1::1", 1, 1},
    {"v6 /10", "fe80::/10", "febf::1", 1, 1},
    {"v6 /10 out", "fe80::/10", "fec0::1", 1, 0},
    {"host bits set", "10.0.0.1/8", NULL, 0, 0},
    {"prefix too long v4", "10.0.0.0/33", NULL, 0, 0},
    {"prefix too long v6", "::/129", NULL, 0, 0},
    {"non-canonical v4", "010.0.0.0/8", NULL, 0, 0},
    {"short v4 in rule", "10/8", NULL, 0, 0},
    {"empty prefix", "10.0.0.0/", NULL, 0, 0},
    {"signed prefix", "10.0.0.0/+8", NULL, 0, 0},
    {"mapped prefix too short", "::ffff:0:0/95", NULL, 0, 0},
};

static void test_cidr(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof cidr_rows / sizeof *cidr_rows; i++) {
        const cidr_row *r = &cidr_rows[i];
        pol_cidr c;
        int ok = pol_cidr_parse(r->cidr, &c) == 0;
        int in = 0;
        uint8_t ip[16];
        if (ok && r->ip && pol_ip_parse(r->ip, ip))
            in = pol_cidr_contains(&c, ip);
        if (ok != r->ok || in != r->contains) {
            print_error("FAIL row '%s': %s ok=%d contains(%s)=%d\n", r->name, r->cidr, ok, r->ip ? r->ip : "-", in);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

typedef struct host_row {
    const char *name, *in;
    int wild;
    const char *norm;   /* NULL = rejected */
} host_row;

static const host_row host_rows[] = {
    {"plain", "Example.COM", 0, "example.com"},
    {"trailing dot", "example.com.", 0, "example.com"},
    {"wildcard allowed", "*.Example.com", 1, "*.example.com"},
    {"wildcard refused", "*.example.com", 0, NULL},
    {"partial wildcard", "a*.example.com", 1, NULL},
    {"bare star", "*", 1, NULL},
    {"underscore", "_srv.example.com", 0, "_srv.example.com"},
    {"leading hyphen", "-x.com", 0, NULL},
    {"trailing hyphen", "x-.com", 0, NULL},
    {"empty label", "a..b", 0, NULL},
    {"long label", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com", 0, NULL},
    {"slash", "a.com/x", 0, NULL},
    {"at sign", "user@a.com", 0, NULL},
    {"empty", "", 0, NULL},
    {"numeric last label", "*.0.0.1", 1, NULL},
    {"five numeric labels", "1.2.3.4.5", 0, NULL},
    {"hex last label", "a.0x7f", 0, NULL},
    {"digits inside a name", "1.2.3.4.nip.io", 0, "1.2.3.4.nip.io"},
};

static void test_host(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof host_rows / sizeof *host_rows; i++) {
        const host_row *r = &host_rows[i];
        char out[256];
        const char *why = pol_host_check(r->in, out, sizeof out, r->wild);
        if ((why == NULL) != (r->norm != NULL) || (!why && strcmp(out, r->norm) != 0)) {
            print_error("FAIL row '%s': '%s' → %s\n", r->name, r->in, why ? why : out);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

typedef struct glob_row { const char *pat, *s; int want; } glob_row;

static const glob_row glob_rows[] = {
    {"*", "", 1}, {"*", "anything", 1}, {"ci-*", "ci-42", 1}, {"ci-*", "cd-42", 0},
    {"ci-?", "ci-4", 1}, {"ci-?", "ci-42", 0}, {"*-build-*", "x-build-y", 1},
    {"*-build-*", "x-buil-y", 0}, {"a*b*c", "aXbYbZc", 1}, {"a*b*c", "aXbYbZ", 0},
    {"exact", "exact", 1}, {"exact", "exactly", 0},
};

static void test_glob(void **state)
{
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof glob_rows / sizeof *glob_rows; i++)
        if (pol_glob(glob_rows[i].pat, glob_rows[i].s) != glob_rows[i].want) {
            print_error("FAIL row '%s' vs '%s'\n", glob_rows[i].pat, glob_rows[i].s);
            failed++;
        }
    assert_null(pol_glob_check("ci-*"));
    assert_non_null(pol_glob_check(""));
    assert_non_null(pol_glob_check("a b"));
    assert_non_null(pol_glob_check("[ab]"));
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ip),
        cmocka_unit_test(test_cidr),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_glob),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
