/* validate_network.c — egress rules, the `network` lists of templates and
 * tenants: hosts (names, never addresses), CIDRs, ports, task patterns, and
 * on tenant rules the templates they narrow to. Each rule gets its full id
 * ("tenants.acme.network.pypi") and each list its lookup index. Leaves the
 * address and host-name syntax and matching to egress.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/validate_internal.h"

static const char *const rule_keys_tenant[] = {"id", "hosts", "cidrs", "ports", "tasks", "templates", NULL};
static const char *const rule_keys_template[] = {"id", "hosts", "cidrs", "ports", "tasks", NULL};

static void read_rule_hosts(pol_vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    const ynode *l = pol_key_list(v, m, path, "hosts", lp);
    if (!l)
        return;
    r->hosts = pol_alloc(v->a, (l->n + 1) * sizeof *r->hosts);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        uint8_t ip[16];
        char norm[256];
        if (pol_list_str(v, l, lp, i, sub, &s) < 0)
            continue;
        if (pol_ip_parse(s, ip)) {
            pol_err(v->d, l->kids[i], sub, "'%s' is an IP address, expected a host name; put addresses in cidrs", s);
            continue;
        }
        const char *why = pol_host_check(s, norm, sizeof norm, 1);
        if (why) {
            pol_err(v->d, l->kids[i], sub, "bad host '%s': %s", s, why);
            continue;
        }
        if (norm[0] == '*' && !strchr(norm + 2, '.'))
            pol_warn(v->d, l->kids[i], sub, "'%s' matches every name under a top-level domain", s);
        r->hosts[r->n_hosts++] = pol_strdup(v->a, norm);
    }
}

static void read_rule_cidrs(pol_vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    const ynode *l = pol_key_list(v, m, path, "cidrs", lp);
    if (!l)
        return;
    r->cidrs = pol_alloc(v->a, (l->n + 1) * sizeof *r->cidrs);
    r->cidr_strs = pol_alloc(v->a, (l->n + 1) * sizeof *r->cidr_strs);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        if (pol_list_str(v, l, lp, i, sub, &s) < 0)
            continue;
        pol_cidr c;
        if (pol_cidr_parse(s, &c) < 0) {
            pol_err(v->d, l->kids[i], sub,
                    "bad CIDR '%s', expected an address with an optional /prefix and no host bits, as in 10.1.0.0/16 or 2001:db8::/32", s);
            continue;
        }
        if (c.plen == 96 || c.plen == 0)
            pol_warn(v->d, l->kids[i], sub,
                     "'%s' covers every address; special ranges (loopback, private, link-local) still need a rule of their own", s);
        r->cidrs[r->n_cidrs] = c;
        r->cidr_strs[r->n_cidrs++] = s;
    }
}

static void read_rule_ports(pol_vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "ports");
    const ynode *pn = ymap_get(m, "ports");
    if (!pn) {
        pol_warn(v->d, m, path, "rule allows every port; list ports to narrow it");
        return;
    }
    const ynode *l = pol_read_list(v, pn, lp);
    if (!l)
        return;
    r->ports = pol_alloc(v->a, (l->n + 1) * sizeof *r->ports);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const ynode *it = l->kids[i];
        ypath_idx(sub, sizeof sub, lp, i);
        uint64_t port;
        if (it->kind != YN_SCALAR || !it->plain || it->str[0] < '0' || it->str[0] > '9' ||
            strspn(it->str, "0123456789") != it->len || it->len > 6 ||
            (port = strtoull(it->str, NULL, 10)) < 1 || port > 65535) {
            pol_err(v->d, it, sub, "bad port %s%s%s, expected an integer from 1 to 65535",
                    it->kind == YN_SCALAR ? "'" : "", it->kind == YN_SCALAR ? it->str : yn_kind_name(it),
                    it->kind == YN_SCALAR ? "'" : "");
            continue;
        }
        r->ports[r->n_ports++] = (uint32_t)port;
    }
}

static void read_rule_templates(pol_vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    const ynode *l = pol_key_list(v, m, path, "templates", lp);
    if (!l)
        return;
    r->templates = pol_alloc(v->a, (l->n + 1) * sizeof *r->templates);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        if (pol_list_str(v, l, lp, i, sub, &s) < 0)
            continue;
        if (pol_name_lookup(&v->p->by_template, s) < 0) {
            pol_err(v->d, l->kids[i], sub, "unknown template '%s'", s);
            continue;
        }
        r->templates[r->n_templates++] = s;
    }
}

/* owner: "tenants.acme" or "templates.code-interpreter" (rule-id prefix). */
static void read_rule(pol_vctx *v, const ynode *m, const char *path, const char *owner,
                      size_t idx, int tenant_level, pol_rule *r, pol_named *ids, size_t *n_ids)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, tenant_level ? rule_keys_tenant : rule_keys_template);
    const ynode *idn = ymap_get(m, "id");
    const char *id = NULL;
    if (idn) {
        char sub[YPATH_MAX];
        ypath_key(sub, sizeof sub, path, "id");
        id = pol_read_id(v, idn, sub, V_RULE_ID_MAX);
        if (id)
            ids[(*n_ids)++] = (pol_named){id, idn, idx};
    }
    r->id = id ? pol_sprintf(v->a, "%s.network.%s", owner, id)
               : pol_sprintf(v->a, "%s.network[%zu]", owner, idx);
    read_rule_hosts(v, m, path, r);
    read_rule_cidrs(v, m, path, r);
    read_rule_ports(v, m, path, r);
    pol_read_tasks(v, m, path, &r->tasks);
    if (tenant_level)
        read_rule_templates(v, m, path, r);
    if (!ymap_get(m, "hosts") && !ymap_get(m, "cidrs"))
        pol_err(v->d, m, path, "a network rule needs hosts or cidrs");
}

void pol_read_network(pol_vctx *v, const ynode *n, const char *path, const char *owner,
                      int tenant_level, pol_ruleset *rs)
{
    const ynode *l = pol_read_list(v, n, path);
    if (!l)
        return;
    rs->rules = pol_alloc(v->a, (l->n + 1) * sizeof *rs->rules);
    rs->n = l->n;
    pol_named *ids = malloc((l->n + 1) * sizeof *ids);
    size_t n_ids = 0;
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        ypath_idx(sub, sizeof sub, path, i);
        read_rule(v, l->kids[i], sub, owner, i, tenant_level, &rs->rules[i], ids, &n_ids);
    }
    char fmt[YPATH_MAX];
    snprintf(fmt, sizeof fmt, "%s[%%zu].id", path);
    pol_check_unique(v, ids, n_ids, "rule id", fmt);
    free(ids);
    pol_ruleset_index(v->a, rs);
}
