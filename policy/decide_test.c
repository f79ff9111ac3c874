/* decide_test.c — table tests for every decision kind and every default.
 * One row per case: {name, policy, request, want, why}; a failing row
 * prints its name and why, and every row runs even after a failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/explain.h"
#include "policy/policy.h"
#include "policy/query.h"
#include "policy/secret.h"

/* key hashes: sha256("acme-key"), sha256("beta-key") */
static const char main_yaml[] =
    "defaults:\n"
    "  quotas: {sandboxes_per_tenant: 5, sandboxes_per_user: 2}\n"
    "templates:\n"
    "  - name: ci\n"
    "    network:\n"
    "      - id: pypi\n"
    "        hosts: [pypi.org, \"*.pythonhosted.org\"]\n"
    "        ports: [443]\n"
    "        tasks: \"pip-*\"\n"
    "  - name: ds\n"
    "    tenants: [\"*\"]\n"
    "  - name: locked\n"
    "    tenants: [beta]\n"
    "secrets:\n"
    "  - name: gh\n"
    "    source: {env: SG_TEST_GH}\n"
    "    env: GITHUB_TOKEN\n"
    "    grants:\n"
    "      - tenants: [acme]\n"
    "        templates: [ci]\n"
    "        tasks: \"ci-*\"\n"
    "      - tenants: [\"*\"]\n"
    "        tasks: \"shared-*\"\n"
    "  - name: npm\n"
    "    source: {file: /nonexistent/npm}\n"
    "    env: NPM_TOKEN\n"
    "    grants:\n"
    "      - tenants: [acme]\n"
    "tenants:\n"
    "  - id: acme\n"
    "    api_keys: [afacab3575137afa4e00d9cbcafcb14c9ae25f779d964eb0ea5b2c4eb5dfd163]\n"
    "    mtls: [spiffe://acme/agent]\n"
    "    templates: [ci]\n"
    "    scope: per_user\n"
    "    limits: {memory: 1GiB, ttl_max: 2h}\n"
    "    quotas: {sandboxes_per_tenant: 3}\n"
    "    network:\n"
    "      - id: gh\n"
    "        hosts: [github.com, \"*.githubusercontent.com\"]\n"
    "        ports: [443, 80]\n"
    "      - id: lan\n"
    "        cidrs: [10.20.0.0/16, \"fd12:3456::/32\"]\n"
    "        ports: [8080]\n"
    "        templates: [ci]\n"
    "      - id: meta\n"
    "        cidrs: [169.254.169.254/32]\n"
    "        ports: [80]\n"
    "        tasks: \"meta-*\"\n"
    "      - id: public\n"
    "        cidrs: [0.0.0.0/0]\n"
    "        ports: [22]\n"
    "      - id: anyport\n"
    "        hosts: [any.example.com]\n"
    "      - hosts: [unnamed.example.com]\n"
    "        ports: [443]\n"
    "  - id: beta\n"
    "    api_keys: [7a3d637bc601f7000cc2c33141c8c8a7554e02e319fa8b293a0c88c613b77620]\n"
    "    mtls: [spiffe://beta/agent]\n"
    "    require_mtls: true\n";

/* Nothing but a tenant: every built-in default shows. */
static const char bare_yaml[] =
    "templates: [{name: t}]\n"
    "tenants: [{id: solo, templates: [t]}]\n";

/* Isolation: a tenant's minimum against each template's isolation. */
static const char iso_yaml[] =
    "templates:\n"
    "  - name: proc\n"            /* says nothing: process */
    "    tenants: [\"*\"]\n"
    "  - name: proc2\n"
    "    isolation: process\n"
    "  - name: gv\n"
    "    isolation: gvisor\n"
    "tenants:\n"
    "  - id: strict\n"
    "    isolation: gvisor\n"
    "    templates: [proc2, gv]\n"
    "    quotas: {sandboxes_per_tenant: 1}\n"
    "  - id: loose\n"
    "    templates: [gv]\n"
    "  - id: procmin\n"
    "    isolation: process\n"
    "    templates: [proc2]\n";

static policy *fixture(const char *which)
{
    const char *y = strcmp(which, "bare") == 0 ? bare_yaml
                    : strcmp(which, "iso") == 0 ? iso_yaml : main_yaml;
    policy *p = NULL;
    policy_errors errs = {0};
    int r = policy_load_buffer(which, y, strlen(y), &p, &errs);
    for (size_t i = 0; i < errs.n; i++)
        print_error("fixture %s: %s\n", which, errs.items[i]);
    policy_errors_cleanup(&errs);
    assert_int_equal(r, 0);
    return p;
}

/* ---- ask rows (egress, secret, create) via policy_explain ------------- */

typedef struct row {
    const char *name;
    const char *policy;
    policy_ask ask;
    int want;                /* 1 allow, 0 deny */
    const char *rule;
    const char *why;
} row;

#define EG(t, tm, tk, h, pt) {.kind = POLICY_ASK_EGRESS, .tenant = t, .template_name = tm, .task = tk, .host = h, .port = pt}
#define EGIP(t, tm, tk, h, pt, addr) {.kind = POLICY_ASK_EGRESS, .tenant = t, .template_name = tm, .task = tk, .host = h, .port = pt, .ip = addr}
#define SEC(t, tm, tk, s) {.kind = POLICY_ASK_SECRET, .tenant = t, .template_name = tm, .task = tk, .secret = s}
#define CREATE(t, u, tk, tm, ...) {.kind = POLICY_ASK_CREATE, .tenant = t, .user = u, .task = tk, .template_name = tm, __VA_ARGS__}

static const row rows[] = {
    /* egress: names */
    {"exact host and port", "main", EG("acme", "ci", "t1", "github.com", 443), 1, "tenants.acme.network.gh", "exact host rule"},
    {"exact host, case and trailing dot", "main", EG("acme", "ci", "t1", "GitHub.COM.", 443), 1, "tenants.acme.network.gh", "names compare case-insensitively"},
    {"exact host, wrong port", "main", EG("acme", "ci", "t1", "github.com", 22), 0, "default.deny-egress", "ports narrow a rule"},
    {"any port asked, rule has ports", "main", EG("acme", "ci", "t1", "github.com", 0), 0, "default.deny-egress", "'any port' needs a rule without ports"},
    {"rule without ports allows any port", "main", EG("acme", "ci", "t1", "any.example.com", 0), 1, "tenants.acme.network.anyport", "omitted ports = every port"},
    {"wildcard matches subdomain", "main", EG("acme", "ci", "t1", "raw.githubusercontent.com", 443), 1, "tenants.acme.network.gh", "*.x covers a.x"},
    {"wildcard matches deep subdomain", "main", EG("acme", "ci", "t1", "a.b.githubusercontent.com", 443), 1, "tenants.acme.network.gh", "*.x covers a.b.x"},
    {"wildcard never matches apex", "main", EG("acme", "ci", "t1", "githubusercontent.com", 443), 0, "default.deny-egress", "*.x does not cover x"},
    {"suffix trick is not a subdomain", "main", EG("acme", "ci", "t1", "evilgithub.com", 443), 0, "default.deny-egress", "label boundary"},
    {"unnamed rule has index id", "main", EG("acme", "ci", "t1", "unnamed.example.com", 443), 1, "tenants.acme.network[5]", "rule id without id: index"},
    {"default deny", "main", EG("acme", "ci", "t1", "example.org", 443), 0, "default.deny-egress", "network is default deny"},
    {"template rule with task match", "main", EG("acme", "ci", "pip-install", "pypi.org", 443), 1, "templates.ci.network.pypi", "template-level rule"},
    {"template rule, task mismatch", "main", EG("acme", "ci", "build", "pypi.org", 443), 0, "default.deny-egress", "task pattern narrows"},
    {"template rule, no task", "main", EG("acme", "ci", NULL, "pypi.org", 443), 0, "default.deny-egress", "a pattern never matches a missing task"},
    {"template rule, other template", "main", EG("acme", "ds", "pip-x", "pypi.org", 443), 0, "default.deny-egress", "template rules stay with their template"},
    {"template rule wildcard", "main", EG("acme", "ci", "pip-1", "files.pythonhosted.org", 443), 1, "templates.ci.network.pypi", "template wildcard"},
    {"template rules need the template allowed", "main", EG("beta", "ci", "pip-1", "pypi.org", 443), 0, "default.deny-egress", "beta may not use ci"},
    {"unknown tenant", "main", EG("ghost", "ci", "t", "github.com", 443), 0, "default.unknown-tenant", "unknown tenant"},
    {"bad host", "main", EG("acme", "ci", "t", "bad host", 443), 0, "default.bad-request", "malformed host"},
    {"wildcard host at connect time", "main", EG("acme", "ci", "t", "*.githubusercontent.com", 443), 0, "default.bad-request", "a connection names one host"},
    /* egress: resolved addresses */
    {"name resolves to public", "main", EGIP("acme", "ci", "t", "github.com", 443, "140.82.112.3"), 1, "tenants.acme.network.gh", "public address"},
    {"name resolves to loopback", "main", EGIP("acme", "ci", "t", "github.com", 443, "127.0.0.1"), 0, "default.deny-special-address", "DNS rebinding to loopback"},
    {"name resolves to metadata", "main", EGIP("acme", "ci", "t", "github.com", 80, "169.254.169.254"), 0, "default.deny-special-address", "metadata service"},
    {"name resolves to private", "main", EGIP("acme", "ci", "t", "github.com", 443, "192.168.1.1"), 0, "default.deny-special-address", "RFC 1918"},
    {"name resolves to mapped loopback", "main", EGIP("acme", "ci", "t", "github.com", 443, "::ffff:127.0.0.1"), 0, "default.deny-special-address", "mapped form"},
    {"name resolves to ULA", "main", EGIP("acme", "ci", "t", "github.com", 443, "fd00::1"), 0, "default.deny-special-address", "fc00::/7"},
    {"name resolves into named private CIDR", "main", EGIP("acme", "ci", "t", "github.com", 8080, "10.20.3.4"), 0, "default.deny-egress", "gh has no port 8080"},
    {"resolved ip garbage", "main", EGIP("acme", "ci", "t", "github.com", 443, "nope"), 0, "default.bad-request", "resolver must give an address"},
    /* egress: IP literals */
    {"literal in named private CIDR", "main", EG("acme", "ci", "t", "10.20.3.4", 8080), 1, "tenants.acme.network.lan", "a CIDR inside 10/8 names it"},
    {"literal private CIDR, other template", "main", EG("acme", "ds", "t", "10.20.3.4", 8080), 0, "default.deny-special-address", "tenant rule narrowed to templates"},
    {"literal outside CIDR", "main", EG("acme", "ci", "t", "10.21.0.1", 8080), 0, "default.deny-special-address", "private stays denied"},
    {"literal v6 in named ULA CIDR", "main", EG("acme", "ci", "t", "[fd12:3456::9]", 8080), 1, "tenants.acme.network.lan", "IPv6 CIDR"},
    {"literal public via 0/0", "main", EG("acme", "ci", "t", "8.8.8.8", 22), 1, "tenants.acme.network.public", "0.0.0.0/0 covers public"},
    {"0/0 does not unlock loopback", "main", EG("acme", "ci", "t", "127.0.0.1", 22), 0, "default.deny-special-address", "special ranges need their own rule"},
    {"0/0 does not unlock CGNAT", "main", EG("acme", "ci", "t", "100.64.1.1", 22), 0, "default.deny-special-address", "100.64/10"},
    {"0/0 does not unlock multicast", "main", EG("acme", "ci", "t", "224.0.0.1", 22), 0, "default.deny-special-address", "224/4"},
    {"0/0 does not unlock unspecified", "main", EG("acme", "ci", "t", "0.0.0.0", 22), 0, "default.deny-special-address", "0/8"},
    {"decimal literal loopback", "main", EG("acme", "ci", "t", "2130706433", 22), 0, "default.deny-special-address", "2130706433 = 127.0.0.1"},
    {"octal literal loopback", "main", EG("acme", "ci", "t", "0177.0.0.1", 22), 0, "default.deny-special-address", "octal spelling"},
    {"hex literal loopback", "main", EG("acme", "ci", "t", "0x7f.1", 22), 0, "default.deny-special-address", "hex short spelling"},
    {"mapped v6 literal loopback", "main", EG("acme", "ci", "t", "[::ffff:7f00:1]", 22), 0, "default.deny-special-address", "IPv4-mapped IPv6"},
    {"v6 loopback", "main", EG("acme", "ci", "t", "::1", 22), 0, "default.deny-special-address", "::1"},
    {"v6 link-local", "main", EG("acme", "ci", "t", "fe80::1", 22), 0, "default.deny-special-address", "fe80::/10"},
    {"v6 multicast", "main", EG("acme", "ci", "t", "ff02::1", 22), 0, "default.deny-special-address", "ff00::/8"},
    {"6to4 of loopback", "main", EG("acme", "ci", "t", "2002:7f00:1::", 22), 0, "default.deny-special-address", "6to4 carries IPv4"},
    {"metadata with named /32 and task", "main", EG("acme", "ci", "meta-read", "169.254.169.254", 80), 1, "tenants.acme.network.meta", "an exact CIDR names it"},
    {"metadata, task mismatch", "main", EG("acme", "ci", "other", "169.254.169.254", 80), 0, "default.deny-special-address", "task-narrowed"},
    {"literal never matches name rules", "main", EG("acme", "ci", "t", "140.82.112.3", 443), 0, "default.deny-egress", "IP literal matches only CIDR rules"},
    {"no rules at all", "bare", EG("solo", "t", "t", "example.com", 443), 0, "default.deny-egress", "default deny with no network section"},
    /* secrets */
    {"secret granted by tenant+template+task", "main", SEC("acme", "ci", "ci-9", "gh"), 1, "secrets.gh.grants[0]", "first grant"},
    {"secret, task mismatch", "main", SEC("acme", "ci", "build", "gh"), 0, "default.deny-secret", "task pattern"},
    {"secret, template mismatch", "main", SEC("acme", "ds", "ci-1", "gh"), 0, "default.deny-secret", "template list"},
    {"secret via * grant", "main", SEC("beta", "locked", "shared-1", "gh"), 1, "secrets.gh.grants[1]", "tenants [*]"},
    {"secret not granted to tenant", "main", SEC("beta", "locked", "x", "npm"), 0, "default.deny-secret", "only acme"},
    {"secret grant without templates/tasks", "main", SEC("acme", NULL, NULL, "npm"), 1, "secrets.npm.grants[0]", "grant of tenant only"},
    {"unknown secret", "main", SEC("acme", "ci", "ci-1", "nope"), 0, "default.unknown-secret", "undefined secret"},
    {"secret, unknown tenant", "main", SEC("ghost", "ci", "ci-1", "gh"), 0, "default.unknown-tenant", "unknown tenant"},
    /* create */
    {"create allowed by tenant's template list", "main", CREATE("acme", "u1", "t1", "ci"), 1, "tenants.acme.templates", "tenant lists ci"},
    {"create allowed by template's tenants *", "main", CREATE("acme", "u1", "t1", "ds"), 1, "templates.ds.tenants", "ds is for every tenant"},
    {"create allowed by template's tenant list", "main", CREATE("beta", "u1", "t1", "locked"), 1, "templates.locked.tenants", "locked lists beta"},
    {"create template not allowed", "main", CREATE("acme", "u1", "t1", "locked"), 0, "default.deny-template", "acme is not on locked"},
    {"create unknown template", "main", CREATE("acme", "u1", "t1", "nope"), 0, "default.unknown-template", "unknown template"},
    {"create unknown tenant", "main", CREATE("ghost", "u1", "t1", "ci"), 0, "default.unknown-tenant", "unknown tenant"},
    {"create without user", "main", CREATE("acme", NULL, "t1", "ci"), 0, "default.bad-request", "user required"},
    {"create without task", "main", CREATE("acme", "u1", "", "ci"), 0, "default.bad-request", "task required"},
    {"create tenant quota (override)", "main", CREATE("acme", "u1", "t1", "ci", .live_tenant = 3), 0, "tenants.acme.quotas.sandboxes_per_tenant", "tenant override 3"},
    {"create under tenant quota", "main", CREATE("acme", "u1", "t1", "ci", .live_tenant = 2, .live_user = 1), 1, "tenants.acme.templates", "2 < 3, 1 < 2"},
    {"create user quota (defaults)", "main", CREATE("acme", "u1", "t1", "ci", .live_user = 2), 0, "defaults.quotas.sandboxes_per_user", "defaults section 2"},
    {"create tenant quota (defaults)", "main", CREATE("beta", "u1", "t1", "locked", .live_tenant = 5), 0, "defaults.quotas.sandboxes_per_tenant", "defaults section 5"},
    {"create built-in user quota", "bare", CREATE("solo", "u", "t", "t", .live_user = 10), 0, "defaults.quotas.sandboxes_per_user", "built-in 10"},
    {"create with granted egress", "main", CREATE("acme", "u1", "pip-1", "ci", .egress = (const policy_egress_ask[]){{"github.com", 443}, {"pypi.org", 443}}, .n_egress = 2), 1, "tenants.acme.templates", "all egress covered"},
    {"create with wildcard egress ask", "main", CREATE("acme", "u1", "t", "ci", .egress = (const policy_egress_ask[]){{"*.githubusercontent.com", 443}}, .n_egress = 1), 1, "tenants.acme.templates", "wildcard ask covered by wildcard rule"},
    {"create wildcard ask broader than rule", "main", CREATE("acme", "u1", "t", "ci", .egress = (const policy_egress_ask[]){{"*.com", 443}}, .n_egress = 1), 0, "default.deny-egress", "*.com is not covered"},
    {"create with ungranted egress", "main", CREATE("acme", "u1", "t1", "ci", .egress = (const policy_egress_ask[]){{"github.com", 443}, {"evil.com", 443}}, .n_egress = 2), 0, "default.deny-egress", "first failing egress decides"},
    {"create with granted secret", "main", CREATE("acme", "u1", "ci-1", "ci", .secrets = (const char *const[]){"gh"}, .n_secrets = 1), 1, "tenants.acme.templates", "secret granted"},
    /* create: isolation */
    {"gvisor tenant, template that says nothing", "iso", CREATE("strict", "u", "t", "proc"), 0, "tenants.strict.isolation", "unset template isolation is process"},
    {"gvisor tenant, process template", "iso", CREATE("strict", "u", "t", "proc2"), 0, "tenants.strict.isolation", "process < gvisor"},
    {"gvisor tenant, gvisor template", "iso", CREATE("strict", "u", "t", "gv"), 1, "tenants.strict.templates", "gvisor meets gvisor"},
    {"isolation decides before quotas", "iso", CREATE("strict", "u", "t", "proc2", .live_tenant = 5), 0, "tenants.strict.isolation", "a retry cannot fix isolation"},
    {"quota still applies on a gvisor template", "iso", CREATE("strict", "u", "t", "gv", .live_tenant = 1), 0, "tenants.strict.quotas.sandboxes_per_tenant", "isolation ok, quota not"},
    {"no minimum, gvisor template", "iso", CREATE("loose", "u", "t", "gv"), 1, "tenants.loose.templates", "stronger than needed is fine"},
    {"no minimum, process template", "iso", CREATE("loose", "u", "t", "proc"), 1, "templates.proc.tenants", "no minimum"},
    {"process minimum, process template", "iso", CREATE("procmin", "u", "t", "proc2"), 1, "tenants.procmin.templates", "process meets process"},
    {"create with ungranted secret", "main", CREATE("acme", "u1", "t1", "ci", .secrets = (const char *const[]){"npm", "gh"}, .n_secrets = 2), 0, "default.deny-secret", "one ungranted denies all"},
};

static void test_rows(void **state)
{
    (void)state;
    policy *main_p = fixture("main"), *bare_p = fixture("bare"), *iso_p = fixture("iso");
    int failed = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        const row *r = &rows[i];
        policy_decision d;
        policy_explain(strcmp(r->policy, "bare") == 0  ? bare_p
                       : strcmp(r->policy, "iso") == 0 ? iso_p : main_p, &r->ask, &d);
        if (d.allow != r->want || strcmp(d.rule, r->rule) != 0) {
            print_error("FAIL row '%s' (%s): want %s by %s, got %s by %s: %s\n", r->name, r->why,
                        r->want ? "allow" : "deny", r->rule, d.allow ? "allow" : "deny", d.rule, d.message);
            failed++;
        }
        if (!d.allow && d.err == 0) {
            print_error("FAIL row '%s': deny without an error code\n", r->name);
            failed++;
        }
    }
    policy_unref(main_p);
    policy_unref(bare_p);
    policy_unref(iso_p);
    assert_int_equal(failed, 0);
}

/* What the gateway shows and sends: the deny message naming the rule, the
 * isolation an allowed create gets, and explain's account of it. */
static void test_isolation(void **state)
{
    (void)state;
    policy *p = fixture("iso");
    policy_decision d;
    policy_ask a = CREATE("strict", "u", "t", "proc2");
    policy_explain(p, &a, &d);
    assert_int_equal(d.allow, 0);
    assert_int_equal(d.err, SG_EDENIED);
    assert_string_equal(d.message, "tenant 'strict' requires isolation gvisor; template 'proc2' is process");
    policy_ask b = CREATE("strict", "u", "t", "gv");
    policy_explain(p, &b, &d);
    assert_int_equal(d.allow, 1);
    assert_non_null(strstr(d.message, "isolation gvisor"));

    assert_int_equal(policy_template_isolation(p, "gv"), SG_ISOLATION_GVISOR);
    assert_int_equal(policy_template_isolation(p, "proc2"), SG_ISOLATION_PROCESS);
    assert_int_equal(policy_template_isolation(p, "proc"), SG_ISOLATION_PROCESS);
    assert_int_equal(policy_template_isolation(p, "nope"), SG_ISOLATION_PROCESS);
    assert_int_equal(policy_tenant_isolation(p, "strict"), SG_ISOLATION_GVISOR);
    assert_int_equal(policy_tenant_isolation(p, "loose"), SG_ISOLATION_UNSET);
    assert_int_equal(policy_tenant_isolation(p, "ghost"), SG_ISOLATION_UNSET);

    char buf[512];
    policy_explain_isolation(p, "strict", "gv", buf, sizeof buf);
    assert_string_equal(buf, "gvisor: template 'gv' is gvisor (templates.gv.isolation); "
                             "tenant 'strict' requires at least gvisor (tenants.strict.isolation)");
    policy_explain_isolation(p, "strict", "proc", buf, sizeof buf);
    assert_string_equal(buf, "none (refused): template 'proc' is process (the default; "
                             "templates.proc.isolation is not set); tenant 'strict' requires at "
                             "least gvisor (tenants.strict.isolation)");
    policy_explain_isolation(p, "loose", "proc", buf, sizeof buf);
    assert_string_equal(buf, "process: template 'proc' is process (the default; "
                             "templates.proc.isolation is not set); tenant 'loose' sets no minimum");
    policy_explain_isolation(p, "loose", "nope", buf, sizeof buf);
    assert_string_equal(buf, "none: unknown template 'nope'");
    policy_unref(p);
}

/* ---- authentication ------------------------------------------------------ */

typedef struct auth_row {
    const char *name;
    const char *key, *mtls;
    int want;
    const char *rule, *tenant, *why;
} auth_row;

static const auth_row auth_rows[] = {
    {"api key", "acme-key", NULL, 1, "tenants.acme.api_keys", "acme", "hash match"},
    {"mtls", NULL, "spiffe://acme/agent", 1, "tenants.acme.mtls", "acme", "identity match"},
    {"both agree", "acme-key", "spiffe://acme/agent", 1, "tenants.acme.mtls", "acme", "both given"},
    {"both disagree", "acme-key", "spiffe://beta/agent", 0, "default.unauthenticated", NULL, "two tenants"},
    {"wrong key", "acme-kez", NULL, 0, "default.unauthenticated", NULL, "unknown key"},
    {"no credentials", NULL, NULL, 0, "default.unauthenticated", NULL, "nothing"},
    {"empty key", "", NULL, 0, "default.unauthenticated", NULL, "empty"},
    {"require_mtls, key only", "beta-key", NULL, 0, "default.unauthenticated", NULL, "beta needs mTLS"},
    {"require_mtls, both", "beta-key", "spiffe://beta/agent", 1, "tenants.beta.mtls", "beta", "beta with mTLS"},
    {"unknown identity", NULL, "spiffe://x", 0, "default.unauthenticated", NULL, "unknown SPIFFE ID"},
    {"hash given as key", "afacab3575137afa4e00d9cbcafcb14c9ae25f779d964eb0ea5b2c4eb5dfd163", NULL, 0, "default.unauthenticated", NULL, "the stored hash is not a key"},
};

static void test_auth(void **state)
{
    (void)state;
    policy *p = fixture("main");
    int failed = 0;
    for (size_t i = 0; i < sizeof auth_rows / sizeof *auth_rows; i++) {
        const auth_row *r = &auth_rows[i];
        policy_decision d;
        const char *tenant;
        policy_decide_auth(p, r->key, r->mtls, &tenant, &d);
        int ok = d.allow == r->want && strcmp(d.rule, r->rule) == 0 &&
                 ((!tenant && !r->tenant) || (tenant && r->tenant && strcmp(tenant, r->tenant) == 0));
        if (!ok) {
            print_error("FAIL row '%s' (%s): got %s by %s\n", r->name, r->why, d.allow ? "allow" : "deny", d.rule);
            failed++;
        }
    }
    assert_string_equal(policy_tenant_by_api_key(p, "acme-key"), "acme");
    assert_null(policy_tenant_by_api_key(p, "nope"));
    assert_string_equal(policy_tenant_by_mtls(p, "spiffe://beta/agent"), "beta");
    policy_unref(p);
    assert_int_equal(failed, 0);
}

/* ---- limits and defaults ------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    policy *p = fixture("bare");
    policy_limits l;
    assert_int_equal(policy_tenant_limits(p, "solo", &l), 0);
    assert_int_equal(l.action_timeout_s, 30);
    assert_int_equal(l.ttl_s, 600);
    assert_int_equal(l.ttl_max_s, 3600);
    assert_int_equal(l.idle_timeout_s, 300);
    assert_int_equal(l.output_bytes, 64 << 10);
    assert_int_equal(l.memory_bytes, 512ull << 20);
    assert_int_equal(l.cpu_millis, 1000);
    assert_int_equal(l.pids, 128);
    assert_int_equal(l.disk_bytes, 256ull << 20);
    assert_int_equal(l.file_bytes, 16ull << 20);
    assert_int_equal(l.egress_bytes, 64ull << 20);
    assert_int_equal(l.env_bytes, 64 << 10);
    assert_int_equal(l.env_entries, 256);
    assert_int_equal(l.max_sandboxes_tenant, 100);
    assert_int_equal(l.max_sandboxes_user, 10);
    assert_int_equal(l.max_concurrent_actions, 32);
    assert_true(l.rate_per_s == 20.0);
    assert_int_equal(l.rate_burst, 40);
    assert_int_equal(policy_tenant_scope(p, "solo"), POLICY_SCOPE_PER_TASK);
    assert_int_equal(policy_tenant_limits(p, "ghost", &l), SG_ENOTFOUND);
    policy_user_tokens ut;
    assert_int_equal(policy_tenant_user_tokens(p, "solo", &ut), 0);
    assert_false(ut.enabled);
    assert_int_equal(strlen(policy_hash(p)), 64);
    policy_egress_rule er[4];
    assert_int_equal(policy_egress_rules(p, "solo", "t", "x", er, 4), 0);
    policy_unref(p);
}

typedef struct limit_row {
    const char *name;
    policy_limits asked;
    uint32_t want_ttl, want_timeout;
    uint64_t want_memory;
    const char *rule, *why;
} limit_row;

static const limit_row limit_rows[] = {
    {"nothing asked", {0}, 600, 30, 1ull << 30, "defaults.limits", "defaults apply"},
    {"ttl within max", {.ttl_s = 5000}, 5000, 30, 1ull << 30, "defaults.limits", "acme ttl_max 2h"},
    {"ttl over max", {.ttl_s = 99999}, 7200, 30, 1ull << 30, "tenants.acme.limits.ttl_max", "capped by override"},
    {"memory over override", {.memory_bytes = 4ull << 30}, 600, 30, 1ull << 30, "tenants.acme.limits.memory", "capped at 1GiB"},
    {"smaller memory kept", {.memory_bytes = 1 << 20}, 600, 30, 1 << 20, "defaults.limits", "min(request, policy)"},
    {"timeout over default", {.action_timeout_s = 600}, 600, 30, 1ull << 30, "defaults.limits.action_timeout", "capped by defaults"},
};

static void test_limits(void **state)
{
    (void)state;
    policy *p = fixture("main");
    int failed = 0;
    for (size_t i = 0; i < sizeof limit_rows / sizeof *limit_rows; i++) {
        const limit_row *r = &limit_rows[i];
        policy_limits eff;
        policy_decision d;
        policy_decide_limits(p, "acme", &r->asked, &eff, &d);
        if (!d.allow || eff.ttl_s != r->want_ttl || eff.action_timeout_s != r->want_timeout ||
            eff.memory_bytes != r->want_memory || strcmp(d.rule, r->rule) != 0) {
            print_error("FAIL row '%s' (%s): ttl %u timeout %u memory %llu rule %s\n", r->name, r->why,
                        eff.ttl_s, eff.action_timeout_s, (unsigned long long)eff.memory_bytes, d.rule);
            failed++;
        }
    }
    policy_limits eff;
    policy_decision d;
    policy_decide_limits(p, "ghost", &(policy_limits){0}, &eff, &d);
    assert_false(d.allow);
    assert_string_equal(d.rule, "default.unknown-tenant");
    assert_int_equal(policy_cap_u32(0, 30, 60), 30);
    assert_int_equal(policy_cap_u32(90, 30, 60), 60);
    assert_int_equal(policy_cap_u32(10, 30, 60), 10);
    assert_int_equal(policy_cap_u64(0, 100, 50), 50);
    policy_unref(p);
    assert_int_equal(failed, 0);
}

/* ---- views for the gateway and host ------------------------------------- */

static void test_views(void **state)
{
    (void)state;
    policy *p = fixture("main");
    policy_scope scope = POLICY_SCOPE_PER_TASK;
    policy_decision d;
    policy_create_ask ask = {.tenant = "acme", .user = "u", .task = "pip-1", .template_name = "ci"};
    policy_decide_create(p, &ask, &scope, &d);
    assert_true(d.allow);
    assert_int_equal(scope, POLICY_SCOPE_PER_USER);
    assert_true(policy_template_allowed(p, "acme", "ci"));
    assert_false(policy_template_allowed(p, "acme", "locked"));
    assert_true(policy_template_allowed(p, "beta", "ds"));

    policy_egress_rule rules[32];
    size_t n = policy_egress_rules(p, "acme", "ci", "pip-1", rules, 32);
    /* gh: 2 hosts, lan: 2 cidrs, public: 1, anyport: 1, unnamed: 1, pypi: 2 (meta needs meta-*) */
    assert_int_equal(n, 9);
    assert_string_equal(rules[0].id, "tenants.acme.network.gh");
    assert_string_equal(rules[0].host, "github.com");
    assert_int_equal(rules[0].n_ports, 2);
    assert_string_equal(rules[2].cidr, "10.20.0.0/16");
    assert_string_equal(rules[8].host, "*.pythonhosted.org");
    assert_int_equal(policy_egress_rules(p, "acme", "ci", "pip-1", rules, 3), 9);   /* count beyond max */
    assert_int_equal(policy_egress_rules(p, "acme", "ds", "x", rules, 32), 5);      /* no lan, no pypi */

    const char *asked[] = {"gh", "npm", "gh"};
    policy_secret_grant g[3];
    policy_decide_credentials(p, "acme", "ci", "ci-1", asked, 3, g, &n, &d);
    assert_true(d.allow);
    assert_int_equal(n, 2);   /* asked twice, granted once */
    assert_string_equal(g[0].env, "GITHUB_TOKEN");
    assert_string_equal(g[0].source_kind, "env");
    assert_string_equal(g[1].source_kind, "file");

    char buf[64];
    size_t len;
    sg_err err = {0};
    setenv("SG_TEST_GH", "ghp_secretvalue", 1);
    assert_int_equal(policy_secret_value(&g[0], buf, sizeof buf, &len, &err), 0);
    assert_string_equal(buf, "ghp_secretvalue");
    assert_int_equal(len, 15);
    assert_int_equal(policy_secret_value(&g[0], buf, 4, &len, &err), SG_EINVAL);
    assert_null(strstr(err.msg, "ghp_"));   /* never the value */
    assert_int_equal(policy_secret_value(&g[1], buf, sizeof buf, &len, &err), SG_EINVAL);
    assert_non_null(strstr(err.msg, "/nonexistent/npm"));

    /* refcount: the last unref frees (run under ASan to see it) */
    policy_ref(p);
    policy_unref(p);
    policy_unref(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_isolation),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
