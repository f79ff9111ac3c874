/* match_test.c — table tests for the proxy's pure decision (match.c): one
 * row per case {name, host, port, resolved ip, want, rule}, and a cross-
 * check that every row decides as policy_decide_egress does for the same
 * policy, with the rules the gateway would grant (policy_egress_rules). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "host/egress/egress.h"
#include "host/egress/internal.h"
#include "policy/policy.h"

static const char yaml[] =
    "templates:\n"
    "  - name: ci\n"
    "    network:\n"
    "      - id: pypi\n"
    "        hosts: [pypi.org, \"*.pythonhosted.org\"]\n"
    "        ports: [443]\n"
    "tenants:\n"
    "  - id: acme\n"
    "    api_keys: [afacab3575137afa4e00d9cbcafcb14c9ae25f779d964eb0ea5b2c4eb5dfd163]\n"
    "    templates: [ci]\n"
    "    network:\n"
    "      - id: gh\n"
    "        hosts: [github.com, \"*.githubusercontent.com\"]\n"
    "        ports: [443, 80]\n"
    "      - id: lan\n"
    "        cidrs: [10.20.0.0/16, \"fd12:3456::/32\"]\n"
    "        ports: [8080]\n"
    "      - id: meta\n"
    "        cidrs: [169.254.169.254/32]\n"
    "        ports: [80]\n"
    "      - id: public\n"
    "        cidrs: [0.0.0.0/0]\n"
    "        ports: [22]\n"
    "      - id: anyport\n"
    "        hosts: [any.example.com]\n"
    "      - id: testnet\n"
    "        hosts: [internal.test]\n"
    "        cidrs: [127.0.0.2/32]\n"
    "        ports: [8000]\n";

typedef struct row {
    const char *name, *host;
    uint32_t port;
    const char *ip;          /* resolved address or NULL */
    int allow;
    const char *rule;
    int policy_differs;      /* documented difference from policy_decide_egress */
} row;

#define T(x) "tenants.acme.network." x
static const row rows[] = {
    {"exact name, port", "github.com", 443, NULL, 1, T("gh"), 0},
    {"exact name, upper case", "GitHub.COM", 80, NULL, 1, T("gh"), 0},
    {"exact name, trailing dot", "github.com.", 443, NULL, 1, T("gh"), 0},
    {"exact name, wrong port", "github.com", 22, NULL, 0, "default.deny-egress", 0},
    {"wildcard subdomain", "raw.githubusercontent.com", 443, NULL, 1, T("gh"), 0},
    {"wildcard deep subdomain", "a.b.githubusercontent.com", 443, NULL, 1, T("gh"), 0},
    {"wildcard not the apex", "githubusercontent.com", 443, NULL, 0, "default.deny-egress", 0},
    {"suffix trick", "evilgithubusercontent.com", 443, NULL, 0, "default.deny-egress", 0},
    {"prefix trick", "github.com.evil.net", 443, NULL, 0, "default.deny-egress", 0},
    {"template rule", "pypi.org", 443, NULL, 1, "templates.ci.network.pypi", 0},
    {"template wildcard", "files.pythonhosted.org", 443, NULL, 1, "templates.ci.network.pypi", 0},
    {"unknown host", "example.org", 443, NULL, 0, "default.deny-egress", 0},
    {"rule without ports", "any.example.com", 9999, NULL, 1, T("anyport"), 0},
    {"resolved public", "github.com", 443, "140.82.112.3", 1, T("gh"), 0},
    {"resolved loopback", "github.com", 443, "127.0.0.1", 0, "default.deny-special-address", 0},
    {"resolved private", "github.com", 443, "10.1.2.3", 0, "default.deny-special-address", 0},
    {"resolved private named by cidr wrong port", "github.com", 443, "10.20.1.1", 0, "default.deny-special-address", 0},
    {"resolved metadata", "github.com", 80, "169.254.169.254", 1, T("meta"), 0},
    {"resolved metadata wrong port", "github.com", 443, "169.254.169.254", 0, "default.deny-special-address", 0},
    {"resolved mapped loopback", "github.com", 443, "::ffff:127.0.0.1", 0, "default.deny-special-address", 0},
    {"resolved v6 ULA", "github.com", 443, "fd00::1", 0, "default.deny-special-address", 0},
    {"resolved multicast", "github.com", 443, "224.0.0.1", 0, "default.deny-special-address", 0},
    {"resolved unspecified", "github.com", 443, "0.0.0.0", 0, "default.deny-special-address", 0},
    {"resolved 6to4 metadata", "github.com", 80, "2002:a9fe:a9fe::1", 0, "default.deny-special-address", 0},
    {"test name on its loopback cidr", "internal.test", 8000, "127.0.0.2", 1, T("testnet"), 0},
    {"test name on other loopback", "internal.test", 8000, "127.0.0.3", 0, "default.deny-special-address", 0},
    {"literal v4 in cidr", "10.20.3.4", 8080, NULL, 1, T("lan"), 0},
    {"literal v4 wrong port", "10.20.3.4", 80, NULL, 0, "default.deny-special-address", 0},
    {"literal public via 0/0 port 22", "93.184.216.34", 22, NULL, 1, T("public"), 0},
    {"literal public other port", "93.184.216.34", 443, NULL, 0, "default.deny-egress", 0},
    {"0/0 does not name loopback", "127.0.0.1", 22, NULL, 0, "default.deny-special-address", 0},
    {"decimal loopback", "2130706433", 22, NULL, 0, "default.deny-special-address", 0},
    {"octal loopback", "0177.0.0.1", 22, NULL, 0, "default.deny-special-address", 0},
    {"hex loopback", "0x7f.0.0.1", 22, NULL, 0, "default.deny-special-address", 0},
    {"hex whole", "0x7f000001", 22, NULL, 0, "default.deny-special-address", 0},
    {"short form", "127.1", 22, NULL, 0, "default.deny-special-address", 0},
    {"mapped v6 metadata", "[::ffff:169.254.169.254]", 80, NULL, 1, T("meta"), 0},
    {"mapped v6 metadata hex", "::ffff:a9fe:a9fe", 443, NULL, 0, "default.deny-special-address", 0},
    {"v6 loopback", "::1", 22, NULL, 0, "default.deny-special-address", 0},
    {"v6 in lan cidr", "fd12:3456::9", 8080, NULL, 1, T("lan"), 0},
    {"literal for an allowed name's ip", "140.82.112.3", 443, NULL, 0, "default.deny-egress", 0},
    {"bad host chars", "git hub.com", 443, NULL, 0, "default.bad-request", 0},
    {"numeric tld", "github.123", 443, NULL, 0, "default.bad-request", 0},
    /* policy reads port 0 as "any port" in create asks; a connection has one */
    {"port zero", "github.com", 0, NULL, 0, "default.bad-request", 1},
};

static void table(void **state)
{
    policy *p = NULL;
    policy_errors errs = {0};
    int rc = policy_load_buffer("match_test.yaml", yaml, sizeof yaml - 1, &p, &errs);
    for (size_t i = 0; i < errs.n; i++)
        fprintf(stderr, "%s\n", errs.items[i]);
    assert_int_equal(rc, 0);
    policy_egress_rule pr[32];
    size_t n = policy_egress_rules(p, "acme", "ci", "t1", pr, 32);
    assert_true(n > 0 && n <= 32);
    egress_rule er[32];
    for (size_t i = 0; i < n; i++)
        er[i] = (egress_rule){pr[i].id, pr[i].host, pr[i].cidr, pr[i].ports, pr[i].n_ports};
    egress_rules *rs;
    sg_err err;
    assert_int_equal(egress_rules_create(er, n, &rs, &err), 0);
    int bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const row *r = &rows[i];
        uint8_t ip[16];
        if (r->ip && !egress_ip_parse(r->ip, ip)) {
            printf("FAIL %s: test ip does not parse\n", r->name);
            bad++;
            continue;
        }
        egress_decision d;
        egress_decide(rs, r->host, r->port, r->ip ? ip : NULL, &d);
        policy_decision pd;
        policy_decide_egress(p, "acme", "ci", "t1", r->host, r->port, r->ip, &pd);
        if (d.allow != r->allow || strcmp(d.rule, r->rule) != 0) {
            printf("FAIL %s: got %s by %s (%s), want %s by %s\n", r->name,
                   d.allow ? "allow" : "deny", d.rule, d.reason, r->allow ? "allow" : "deny", r->rule);
            bad++;
        }
        if (!r->policy_differs && (pd.allow != d.allow || strcmp(pd.rule, d.rule) != 0)) {
            printf("FAIL %s: policy says %s by %s, proxy %s by %s\n", r->name,
                   pd.allow ? "allow" : "deny", pd.rule, d.allow ? "allow" : "deny", d.rule);
            bad++;
        }
    }
    egress_rules_destroy(rs);
    policy_unref(p);
    assert_int_equal(bad, 0);
}

static void bad_rules(void **state)
{
    static const uint32_t p0[] = {0};
    const struct { const char *name; egress_rule r; } rows2[] = {
        {"both host and cidr", {"x", "a.com", "10.0.0.0/8", NULL, 0}},
        {"neither", {"x", NULL, NULL, NULL, 0}},
        {"bad cidr", {"x", NULL, "10.0.0.0/40", NULL, 0}},
        {"bad host", {"x", "a b.com", NULL, NULL, 0}},
        {"port 0", {"x", "a.com", NULL, p0, 1}},
    };
    for (size_t i = 0; i < sizeof rows2 / sizeof *rows2; i++) {
        egress_rules *rs = NULL;
        sg_err err = {0};
        if (egress_rules_create(&rows2[i].r, 1, &rs, &err) != SG_EINVAL || rs) {
            printf("FAIL %s: accepted\n", rows2[i].name);
            fail();
        }
    }
}

static void empty_rules_deny(void **state)
{
    egress_rules *rs;
    assert_int_equal(egress_rules_create(NULL, 0, &rs, NULL), 0);
    egress_decision d;
    egress_decide(rs, "github.com", 443, NULL, &d);
    assert_int_equal(d.allow, 0);
    assert_string_equal(d.rule, "default.deny-egress");
    egress_rules_destroy(rs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
        cmocka_unit_test(bad_rules),
        cmocka_unit_test(empty_rules_deny),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
