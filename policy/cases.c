/* cases.c — the security team's regression cases: a YAML list of
 * {name, tenant, user, task, template, one ask, expect, rule?} run against a
 * policy, printing PASS/FAIL with a readable want/got diff, as `opa test`
 * does. The cases file gets the same file:line:col diagnostics as a policy.
 * Owns the case schema; the decisions come from explain.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/explain.h"
#include "policy/internal.h"
#include "policy/lint.h"

#define CASE_MAX_LIST 64

typedef struct tcase {
    const char *name;
    const ynode *node;
    policy_ask ask;
    int want_allow;
    const char *want_rule;       /* NULL: any rule */
    char host[256];
    policy_egress_ask egress[CASE_MAX_LIST];
    const char *secrets[CASE_MAX_LIST];
} tcase;

static const char *const case_keys[] = {"name", "tenant", "user", "task", "template", "egress",
    "ip", "secret", "create", "expect", "rule", NULL};
static const char *const create_keys[] = {"egress", "secrets", "live_tenant", "live_user", NULL};

static const char *opt(pol_diag *d, const ynode *m, const char *path, const char *key)
{
    const ynode *n = ymap_get(m, key);
    const char *s = NULL;
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, key);
    if (n)
        y_str(d, n, sub, &s);
    return s;
}

static void read_create(pol_diag *d, const ynode *n, const char *path, tcase *c)
{
    c->ask.kind = POLICY_ASK_CREATE;
    int yes = 1;
    if (n->kind == YN_SCALAR) {
        if (y_bool(d, n, path, &yes) == 0 && !yes)
            pol_err(d, n, path, "create: false asks nothing, expected true or a mapping");
        return;
    }
    if (y_is(d, n, path, YN_MAP) < 0)
        return;
    ymap_check(d, n, path, create_keys);
    char sub[YPATH_MAX];
    const ynode *l;
    ypath_key(sub, sizeof sub, path, "egress");
    if ((l = ymap_get(n, "egress")) && y_is(d, l, sub, YN_SEQ) == 0) {
        for (size_t i = 0; i < l->n && i < CASE_MAX_LIST; i++) {
            char ip[YPATH_MAX];
            const char *s;
            ypath_idx(ip, sizeof ip, sub, i);
            if (y_str(d, l->kids[i], ip, &s) < 0)
                continue;
            char buf[256];
            uint32_t port;
            if (policy_parse_hostport(s, buf, sizeof buf, &port) < 0) {
                pol_err(d, l->kids[i], ip, "expected host:port, got '%s'", s);
                continue;
            }
            c->egress[c->ask.n_egress++] = (policy_egress_ask){strdup(buf), port};
        }
        c->ask.egress = c->egress;
    }
    ypath_key(sub, sizeof sub, path, "secrets");
    if ((l = ymap_get(n, "secrets")) && y_is(d, l, sub, YN_SEQ) == 0) {
        for (size_t i = 0; i < l->n && i < CASE_MAX_LIST; i++) {
            char ip[YPATH_MAX];
            ypath_idx(ip, sizeof ip, sub, i);
            if (y_str(d, l->kids[i], ip, &c->secrets[c->ask.n_secrets]) == 0)
                c->ask.n_secrets++;
        }
        c->ask.secrets = c->secrets;
    }
    if (ymap_get(n, "live_tenant"))
        y_u32(d, ymap_get(n, "live_tenant"), path, 1u << 30, &c->ask.live_tenant);
    if (ymap_get(n, "live_user"))
        y_u32(d, ymap_get(n, "live_user"), path, 1u << 30, &c->ask.live_user);
}

static void read_case(pol_diag *d, const ynode *m, size_t i, tcase *c)
{
    char path[YPATH_MAX], sub[YPATH_MAX];
    ypath_idx(path, sizeof path, "", i);
    c->node = m;
    if (y_is(d, m, path, YN_MAP) < 0)
        return;
    ymap_check(d, m, path, case_keys);
    c->name = opt(d, m, path, "name");
    if (!c->name)
        pol_err(d, m, path, "missing key 'name'");
    c->ask.tenant = opt(d, m, path, "tenant");
    c->ask.user = opt(d, m, path, "user");
    c->ask.task = opt(d, m, path, "task");
    c->ask.template_name = opt(d, m, path, "template");
    c->ask.ip = opt(d, m, path, "ip");
    int asks = 0;
    const char *eg = opt(d, m, path, "egress");
    if (eg) {
        asks++;
        c->ask.kind = POLICY_ASK_EGRESS;
        c->ask.host = c->host;
        ypath_key(sub, sizeof sub, path, "egress");
        if (policy_parse_hostport(eg, c->host, sizeof c->host, &c->ask.port) < 0)
            pol_err(d, ymap_get(m, "egress"), sub, "expected host:port, got '%s'", eg);
    }
    if ((c->ask.secret = opt(d, m, path, "secret"))) {
        asks++;
        c->ask.kind = POLICY_ASK_SECRET;
    }
    if (ymap_get(m, "create")) {
        asks++;
        ypath_key(sub, sizeof sub, path, "create");
        read_create(d, ymap_get(m, "create"), sub, c);
    }
    if (asks != 1)
        pol_err(d, m, path, "expected exactly one of egress, secret or create");
    const char *ex = opt(d, m, path, "expect");
    ypath_key(sub, sizeof sub, path, "expect");
    if (!ex)
        pol_err(d, m, path, "missing key 'expect'");
    else if (strcmp(ex, "allow") == 0 || strcmp(ex, "deny") == 0)
        c->want_allow = ex[0] == 'a';
    else
        pol_err(d, ymap_get(m, "expect"), sub, "expected allow or deny, got '%s'", ex);
    c->want_rule = opt(d, m, path, "rule");
}

static int run_case(const policy *p, const char *file, const tcase *c, FILE *out)
{
    policy_decision dec;
    policy_explain(p, &c->ask, &dec);
    int ok = dec.allow == c->want_allow && (!c->want_rule || strcmp(c->want_rule, dec.rule) == 0);
    if (ok) {
        fprintf(out, "PASS %s\n", c->name);
        return 0;
    }
    fprintf(out, "FAIL %s (%s:%u:%u)\n", c->name, file, c->node->line, c->node->col);
    fprintf(out, "  - want: %s%s%s\n", c->want_allow ? "allow" : "deny",
            c->want_rule ? " by " : "", c->want_rule ? c->want_rule : "");
    fprintf(out, "  + got:  %s by %s\n", dec.allow ? "allow" : "deny", dec.rule);
    fprintf(out, "          %s\n", dec.message);
    return 1;
}

int policy_run_cases(const policy *p, const char *path, FILE *out, policy_errors *errs)
{
    char *buf;
    size_t len;
    sg_err err;
    if (policy_read_file(path, &buf, &len, &err) < 0) {
        if (errs)
            pol_errors_push(errs, strdup(err.msg));
        return SG_EINVAL;
    }
    pol_arena a = {0};
    pol_diag d = {.file = path, .errs = errs};
    const ynode *root = pol_parse(&a, &d, buf, len);
    free(buf);
    if (!d.n_errs && !root)
        pol_err_plain(&d, "empty file, expected a list of cases");
    else if (root)
        y_is(&d, root, "", YN_SEQ);
    size_t n = root && root->kind == YN_SEQ ? root->n : 0;
    tcase *cases = calloc(n + 1, sizeof *cases);
    for (size_t i = 0; i < n; i++)
        read_case(&d, root->kids[i], i, &cases[i]);
    int failed = 0;
    if (!d.n_errs) {
        for (size_t i = 0; i < n; i++)
            failed += run_case(p, path, &cases[i], out);
        fprintf(out, "%zu passed, %d failed\n", n - (size_t)failed, failed);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < cases[i].ask.n_egress; k++)
            free((char *)cases[i].egress[k].host);
    free(cases);
    pol_arena_cleanup(&a);
    if (d.n_errs)
        return SG_EINVAL;
    return failed ? 1 : 0;
}
