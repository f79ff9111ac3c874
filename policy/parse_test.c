/* parse_test.c — golden-message tests for the loader: each invalid policy
 * asserts the exact, complete list of "file:line:col: key.path: message"
 * lines it produces, and that no policy comes out. Valid files in deploy/
 * must load. Set GOLDEN_PRINT=1 to print what a row produced. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/lint.h"
#include "policy/policy.h"

typedef struct golden {
    const char *name;
    const char *yaml;
    const char *want;     /* every error, one per line */
    const char *why;
} golden;

#define T "templates:\n  - name: ci\n"
#define KEY "5b9862fde34fbb0c04a2ce55ee9a4810454901c6a8ce9a1c1bf6ce28d3e77185"

static const golden goldens[] = {
    {"unknown top-level key, suggestion",
     "tenant: []\n",
     "p.yaml:1:1: tenant: unknown key 'tenant'; did you mean 'tenants'?\n",
     "typo gets a did-you-mean"},
    {"unknown nested key, list of keys",
     T "tenants:\n  - id: a\n    colour: red\n",
     "p.yaml:5:5: tenants[0].colour: unknown key 'colour', expected one of: id, api_keys, mtls, require_mtls, templates, scope, limits, quotas, user_tokens, network, isolation\n",
     "unknown keys are errors"},
    {"unknown key in a rule",
     T "tenants:\n  - id: a\n    network:\n      - hosts: [a.example.com]\n        prots: [443]\n",
     "p.yaml:7:9: tenants[0].network[0].prots: unknown key 'prots'; did you mean 'ports'?\n",
     "rule keys"},
    {"wrong type: list expected",
     T "tenants:\n  - id: a\n    templates: ci\n",
     "p.yaml:5:16: tenants[0].templates: expected a list, got a scalar\n",
     "scalar for a list"},
    {"wrong type: mapping expected",
     "defaults:\n  limits: [1, 2]\n",
     "p.yaml:2:11: defaults.limits: expected a mapping, got a list\n",
     "list for a mapping"},
    {"wrong type: boolean",
     T "tenants:\n  - id: a\n    mtls: [spiffe://a]\n    require_mtls: yes\n",
     "p.yaml:6:19: tenants[0].require_mtls: expected true or false, got 'yes'\n",
     "only true/false"},
    {"bad size and duration",
     "defaults:\n  limits:\n    memory: lots\n    ttl: 5 minutes\n",
     "p.yaml:3:13: defaults.limits.memory: expected a size such as 4096, 64KiB or 512MiB, got 'lots'\n"
     "p.yaml:4:10: defaults.limits.ttl: expected a duration such as 30s, 10m or 2h, got '5 minutes'\n",
     "units"},
    {"zero limit",
     "defaults:\n  limits:\n    pids: 0\n",
     "p.yaml:3:11: defaults.limits.pids: must be greater than 0\n",
     "a zero cap would break every sandbox"},
    {"env limits above their ceilings",
     "defaults:\n  limits:\n    env_bytes: 1MiB\n    env_entries: 5000\n"
     T "tenants:\n  - id: a\n    limits: {env_bytes: 0}\n",
     "p.yaml:3:16: defaults.limits.env_bytes: must be at most 131072 (128KiB), the most a "
     "sandbox's environment may hold\n"
     "p.yaml:4:18: defaults.limits.env_entries: 5000 is out of range, expected at most 1024\n"
     "p.yaml:9:25: tenants[0].limits.env_bytes: must be greater than 0\n",
     "the host could not carry more"},
    {"ttl above ttl_max",
     "defaults:\n  limits:\n    ttl: 2h\n",
     "p.yaml:3:10: defaults.limits.ttl: ttl 7200s is above ttl_max 3600s\n",
     "consistency"},
    {"bad CIDRs",
     T "tenants:\n  - id: a\n    network:\n      - cidrs: [10.0.0.1/8, 10.0.0.0/33, 300.0.0.0/8, \"fe80::/200\", nonsense]\n        ports: [80]\n",
     "p.yaml:6:17: tenants[0].network[0].cidrs[0]: bad CIDR '10.0.0.1/8', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32\n"
     "p.yaml:6:29: tenants[0].network[0].cidrs[1]: bad CIDR '10.0.0.0/33', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32\n"
     "p.yaml:6:42: tenants[0].network[0].cidrs[2]: bad CIDR '300.0.0.0/8', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32\n"
     "p.yaml:6:55: tenants[0].network[0].cidrs[3]: bad CIDR 'fe80::/200', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32\n"
     "p.yaml:6:69: tenants[0].network[0].cidrs[4]: bad CIDR 'nonsense', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32\n",
     "host bits, prefix range, octets, v6 prefix, garbage"},
    {"bad ports",
     T "tenants:\n  - id: a\n    network:\n      - hosts: [a.example.com]\n        ports: [0, 65536, https, -1, \"443\"]\n",
     "p.yaml:7:17: tenants[0].network[0].ports[0]: bad port '0', expected an integer from 1 to 65535\n"
     "p.yaml:7:20: tenants[0].network[0].ports[1]: bad port '65536', expected an integer from 1 to 65535\n"
     "p.yaml:7:27: tenants[0].network[0].ports[2]: bad port 'https', expected an integer from 1 to 65535\n"
     "p.yaml:7:34: tenants[0].network[0].ports[3]: bad port '-1', expected an integer from 1 to 65535\n"
     "p.yaml:7:38: tenants[0].network[0].ports[4]: bad port '443', expected an integer from 1 to 65535\n",
     "ports are plain integers 1-65535"},
    {"bad hosts",
     T "tenants:\n  - id: a\n    network:\n      - hosts: [\"*bad.com\", \"a.*.com\", 10.1.2.3, \"-a.com\", \"a..com\", \"x y\"]\n        ports: [443]\n",
     "p.yaml:6:17: tenants[0].network[0].hosts[0]: bad host '*bad.com': a wildcard must be a whole first label, as in *.example.com\n"
     "p.yaml:6:29: tenants[0].network[0].hosts[1]: bad host 'a.*.com': '*' is allowed only as the whole first label\n"
     "p.yaml:6:40: tenants[0].network[0].hosts[2]: '10.1.2.3' is an IP address, expected a host name; put addresses in cidrs\n"
     "p.yaml:6:50: tenants[0].network[0].hosts[3]: bad host '-a.com': a label may not start with '-'\n"
     "p.yaml:6:60: tenants[0].network[0].hosts[4]: bad host 'a..com': empty label in host name\n"
     "p.yaml:6:70: tenants[0].network[0].hosts[5]: bad host 'x y': invalid character in host name\n",
     "host syntax"},
    {"bad task pattern",
     T "tenants:\n  - id: a\n    network:\n      - hosts: [a.example.com]\n        ports: [443]\n        tasks: \"build-[0-9]\"\n",
     "p.yaml:8:16: tenants[0].network[0].tasks: bad task pattern 'build-[0-9]': pattern may use only '*' and '?' as special characters\n",
     "only * and ?"},
    {"rule without target",
     T "tenants:\n  - id: a\n    network:\n      - ports: [443]\n",
     "p.yaml:6:9: tenants[0].network[0]: a network rule needs hosts or cidrs\n",
     "empty rule"},
    {"duplicate ids",
     "templates:\n  - name: ci\n  - name: ci\ntenants:\n  - id: a\n    templates: [ci]\n  - id: a\n",
     "p.yaml:3:11: templates[1].name: duplicate template 'ci', first defined at line 2\n"
     "p.yaml:7:9: tenants[1].id: duplicate tenant 'a', first defined at line 5\n",
     "unique names"},
    {"duplicate rule id",
     T "tenants:\n  - id: a\n    network:\n      - id: r\n        hosts: [a.com]\n        ports: [1]\n      - id: r\n        hosts: [b.com]\n        ports: [1]\n",
     "p.yaml:9:13: tenants[0].network[1].id: duplicate rule id 'r', first defined at line 6\n",
     "rule ids unique per owner"},
    {"duplicate api key across tenants",
     T "tenants:\n  - id: a\n    api_keys: [" KEY "]\n  - id: b\n    api_keys: [" KEY "]\n",
     "p.yaml:7:16: tenants[1].api_keys: duplicate API key hash '" KEY "', first defined at line 5\n",
     "a key must name one tenant"},
    {"api key not a hash",
     T "tenants:\n  - id: a\n    api_keys: [sg-demo-key-0001]\n",
     "p.yaml:5:16: tenants[0].api_keys[0]: expected a SHA-256 hex digest (64 hex characters), not the key itself; use 'sandgate-policy hash-key'\n",
     "plain keys never go in the file"},
    {"duplicate map key",
     T "tenants:\n  - id: a\n    id: b\n",
     "p.yaml:5:5: id: duplicate key, first defined at line 4\n",
     "YAML duplicate keys are errors"},
    {"unknown template and secret references",
     T "tenants:\n  - id: a\n    templates: [ci, gpu]\n    network:\n      - hosts: [a.com]\n        ports: [1]\n        templates: [cpu]\n"
     "secrets:\n  - name: s\n    source: {env: S}\n    env: S\n    grants:\n      - tenants: [a, z]\n        templates: [gpu]\n",
     "p.yaml:5:21: tenants[0].templates[1]: unknown template 'gpu'\n"
     "p.yaml:9:21: tenants[0].network[0].templates[0]: unknown template 'cpu'\n"
     "p.yaml:15:22: secrets[0].grants[0].tenants[1]: unknown tenant 'z'\n"
     "p.yaml:16:21: secrets[0].grants[0].templates[0]: unknown template 'gpu'\n",
     "references resolve"},
    {"secret source and env",
     "secrets:\n  - name: s\n    source: {file: rel/path}\n    env: LD_PRELOAD\n  - name: t\n    source: {file: /a, env: B}\n    env: lower\n",
     "p.yaml:3:20: secrets[0].source.file: 'rel/path' is not an absolute path\n"
     "p.yaml:4:10: secrets[0].env: 'LD_PRELOAD' is reserved: it changes what runs in the sandbox\n"
     "p.yaml:6:13: secrets[1].source: expected exactly one of file or env\n"
     "p.yaml:7:10: secrets[1].env: 'lower' is not a variable name, expected [A-Z_][A-Z0-9_]*\n",
     "sources and sandbox variable names"},
    {"scope that would share",
     T "tenants:\n  - id: a\n    scope: shared\n",
     "p.yaml:5:12: tenants[0].scope: bad scope 'shared', expected per_task or per_user (a sandbox is never shared between users)\n",
     "sharing is not expressible"},
    {"bad id",
     "tenants:\n  - id: \"acme corp\"\n",
     "p.yaml:2:9: tenants[0].id: 'acme corp' may contain only letters, digits, '_' and '-'\n",
     "ids go into rule ids"},
    {"alias refused",
     "defaults: &d {}\nx: *d\n",
     "p.yaml:2:4: YAML aliases (*d) are not allowed, write the value out\n",
     "no alias expansion"},
    {"syntax error",
     "tenants: [\n",
     "p.yaml:2:1: YAML syntax error: did not find expected node content while parsing a flow node (line 2)\n",
     "libyaml's problem with a 1-based mark"},
    {"empty file",
     "",
     "p.yaml: empty policy, expected a mapping with tenants and templates\n",
     "nothing to load"},
    {"unknown isolation",
     "templates:\n  - name: a\n    isolation: vm\n  - name: b\n    isolation: [gvisor]\n"
     "tenants:\n  - id: x\n    isolation: Gvisor\n    templates: [a]\n",
     "p.yaml:3:16: templates[0].isolation: template 'a': unknown isolation 'vm', expected process or gvisor\n"
     "p.yaml:5:16: templates[1].isolation: expected a string, got a list\n"
     "p.yaml:8:16: tenants[0].isolation: tenant 'x': unknown isolation 'Gvisor', expected process or gvisor\n",
     "fail closed: an isolation the gateway does not know never loads"},
    {"version",
     "version: 2\n",
     "p.yaml:1:10: version: unsupported version 2, expected 1\n",
     "one schema version"},
};

static char *join(const policy_errors *e)
{
    size_t n = 1;
    for (size_t i = 0; i < e->n; i++)
        n += strlen(e->items[i]) + 1;
    char *s = calloc(1, n);
    for (size_t i = 0; i < e->n; i++) {
        strcat(s, e->items[i]);
        strcat(s, "\n");
    }
    return s;
}

static void test_goldens(void **state)
{
    (void)state;
    int failed = 0, print = getenv("GOLDEN_PRINT") != NULL;
    for (size_t i = 0; i < sizeof goldens / sizeof *goldens; i++) {
        const golden *g = &goldens[i];
        policy *p = (policy *)1;
        policy_errors errs = {0};
        int r = policy_load_buffer("p.yaml", g->yaml, strlen(g->yaml), &p, &errs);
        char *got = join(&errs);
        if (print)
            printf("== %s\n%s", g->name, got);
        if (r != SG_EINVAL || p != NULL || strcmp(got, g->want) != 0) {
            print_error("FAIL row '%s' (%s)\n--- want\n%s+++ got (r=%d)\n%s", g->name, g->why, g->want, r, got);
            failed++;
        }
        free(got);
        policy_errors_cleanup(&errs);
    }
    assert_int_equal(failed, 0);
}

static void load_ok(const char *rel)
{
    const char *src = getenv("SG_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", src ? src : "..", rel);
    policy *p = NULL;
    policy_errors errs = {0}, warns = {0};
    int r = policy_lint_file(path, &p, &errs, &warns);
    for (size_t i = 0; i < errs.n; i++)
        print_error("%s\n", errs.items[i]);
    assert_int_equal(r, 0);
    assert_int_equal(warns.n, 0);
    assert_non_null(p);
    policy_unref(p);
    policy_errors_cleanup(&errs);
    policy_errors_cleanup(&warns);
}

static void test_deploy_files_load(void **state)
{
    (void)state;
    load_ok("deploy/policy.example.yaml");
    load_ok("deploy/local/policy.yaml");
}

static void test_warnings(void **state)
{
    (void)state;
    const char *y = T "tenants:\n  - id: a\n    templates: [ci]\n    network:\n      - hosts: [\"*.com\"]\n      - cidrs: [0.0.0.0/0]\n        ports: [1]\n"
                      "  - id: b\nsecrets:\n  - name: s\n    source: {env: S}\n    env: S\n";
    static const char want[] =
        "p.yaml:7:17: tenants[0].network[0].hosts[0]: warning: '*.com' matches every name under a top-level domain\n"
        "p.yaml:7:9: tenants[0].network[0]: warning: rule allows every port; list ports to narrow it\n"
        "p.yaml:8:17: tenants[0].network[1].cidrs[0]: warning: '0.0.0.0/0' covers every address; special ranges (loopback, private, link-local) still need a rule of their own\n"
        "p.yaml:4:5: tenants[0]: warning: tenant 'a' has no api_keys or mtls identities; nobody can authenticate as it\n"
        "p.yaml:10:5: tenants[1]: warning: tenant 'b' has no api_keys or mtls identities; nobody can authenticate as it\n"
        "p.yaml:12:5: secrets[0]: warning: secret 's' has no grants; no sandbox receives it\n"
        "p.yaml:10:5: tenants[1]: warning: tenant 'b' may use no template\n";
    policy *p = NULL;
    policy_errors errs = {0}, warns = {0};
    assert_int_equal(policy_lint_buffer("p.yaml", y, strlen(y), &p, &errs, &warns), 0);
    char *got = join(&warns);
    if (strcmp(got, want) != 0)
        print_error("--- want\n%s+++ got\n%s", want, got);
    assert_string_equal(got, want);
    free(got);
    policy_unref(p);
    policy_errors_cleanup(&errs);
    policy_errors_cleanup(&warns);
}

/* A tenant that requires gvisor but may use only weaker templates can
 * create nothing: lint says so; one gvisor template among them is enough. */
static void test_isolation_contradiction(void **state)
{
    (void)state;
    const char *y = "templates:\n  - name: ci\n  - name: ds\n    isolation: process\n    tenants: [\"*\"]\n"
                    "  - name: gv\n    isolation: gvisor\n"
                    "tenants:\n  - id: a\n    api_keys: [" KEY "]\n    isolation: gvisor\n    templates: [ci]\n"
                    "  - id: b\n    mtls: [spiffe://b]\n    isolation: gvisor\n    templates: [gv]\n";
    static const char want[] =
        "p.yaml:11:16: tenants[0].isolation: warning: tenant 'a' requires isolation gvisor but every "
        "template it may use is weaker; it can create no sandbox\n";
    policy *p = NULL;
    policy_errors errs = {0}, warns = {0};
    assert_int_equal(policy_lint_buffer("p.yaml", y, strlen(y), &p, &errs, &warns), 0);
    char *got = join(&warns);
    if (strcmp(got, want) != 0)
        print_error("--- want\n%s+++ got\n%s", want, got);
    assert_string_equal(got, want);
    free(got);
    policy_unref(p);
    policy_errors_cleanup(&errs);
    policy_errors_cleanup(&warns);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_deploy_files_load),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_isolation_contradiction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
