/* validate.c — the policy schema's top level: the root keys and version,
 * then the order of the passes. Names are collected first (templates,
 * tenants, secrets) so references may point forward in the file; then each
 * section is read by its own file (validate_limits.c, validate_templates.c,
 * validate_tenants.c, validate_secrets.c, rules in validate_network.c) and
 * the cross-section warnings run last. Every error names file:line:col and
 * the key path, and all of them are reported. Builds the immutable
 * in-memory policy; leaves decisions to decide.c and reading files to
 * load.c. */
#include <stdio.h>
#include <stdlib.h>

#include "policy/validate_internal.h"

/* First pass over a section: the names, so references may point forward. */
static pol_named *collect_names(pol_vctx *v, const ynode *l, const char *section,
                                const char *key, const char **names, size_t *n_named)
{
    pol_named *items = malloc((l->n + 1) * sizeof *items);
    *n_named = 0;
    for (size_t i = 0; i < l->n; i++) {
        char path[YPATH_MAX], sub[YPATH_MAX];
        ypath_idx(path, sizeof path, section, i);
        const ynode *m = l->kids[i];
        if (y_is(v->d, m, path, YN_MAP) < 0)
            continue;
        const ynode *n = ymap_get(m, key);
        ypath_key(sub, sizeof sub, path, key);
        if (!n) {
            pol_err(v->d, m, path, "missing key '%s'", key);
            continue;
        }
        names[i] = pol_read_id(v, n, sub, V_NAME_MAX);
        if (names[i])
            items[(*n_named)++] = (pol_named){names[i], n, i};
    }
    return items;
}

static const ynode *section(pol_vctx *v, const ynode *root, const char *key)
{
    const ynode *n = ymap_get(root, key);
    if (!n)
        return NULL;
    return pol_read_list(v, n, key);
}

static void names_pass(pol_vctx *v, const ynode *l, const char *sec, const char *key, const char *what,
                       const char ***names, pol_index *ix)
{
    if (!l)
        return;
    *names = pol_alloc(v->a, (l->n + 1) * sizeof **names);
    size_t n;
    pol_named *items = collect_names(v, l, sec, key, *names, &n);
    char fmt[YPATH_MAX];
    snprintf(fmt, sizeof fmt, "%s[%%zu].%s", sec, key);
    pol_build_name_index(v, ix, items, n);   /* before pol_check_unique re-sorts */
    pol_check_unique(v, items, n, what, fmt);
    free(items);
}

int pol_build(policy *p, pol_diag *d, const ynode *root)
{
    pol_vctx v = {.p = p, .d = d, .a = &p->arena};
    if (!root) {
        pol_err_plain(d, "empty policy, expected a mapping with tenants and templates");
        return -1;
    }
    if (y_is(d, root, "", YN_MAP) < 0)
        return -1;
    static const char *const top[] = {"version", "defaults", "templates", "secrets", "tenants", NULL};
    ymap_check(d, root, "", top);
    const ynode *ver = ymap_get(root, "version");
    uint32_t version = 1;
    if (ver && y_u32(d, ver, "version", 1000, &version) == 0 && version != 1)
        pol_err(d, ver, "version", "unsupported version %u, expected 1", version);
    pol_read_defaults(&v, ymap_get(root, "defaults"));

    const ynode *tl = section(&v, root, "templates");
    const ynode *nl = section(&v, root, "tenants");
    const ynode *sl = section(&v, root, "secrets");
    const char **tnames = NULL, **nnames = NULL, **snames = NULL;
    names_pass(&v, tl, "templates", "name", "template", &tnames, &p->by_template);
    names_pass(&v, nl, "tenants", "id", "tenant", &nnames, &p->by_tenant);
    names_pass(&v, sl, "secrets", "name", "secret", &snames, &p->by_secret);

    p->n_templates = tl ? tl->n : 0;
    p->templates = pol_alloc(v.a, (p->n_templates + 1) * sizeof *p->templates);
    p->n_tenants = nl ? nl->n : 0;
    p->tenants = pol_alloc(v.a, (p->n_tenants + 1) * sizeof *p->tenants);
    p->n_secrets = sl ? sl->n : 0;
    p->secrets = pol_alloc(v.a, (p->n_secrets + 1) * sizeof *p->secrets);
    for (size_t i = 0; i < p->n_tenants; i++)
        p->tenants[i].id = nnames[i];
    for (size_t i = 0; i < p->n_templates; i++) {
        p->templates[i].name = tnames[i];
        if (tl->kids[i]->kind == YN_MAP)
            pol_read_template(&v, tl->kids[i], i, &p->templates[i]);
    }
    if (nl)
        pol_read_tenants(&v, nl);
    if (sl) {
        for (size_t i = 0; i < sl->n; i++) {
            p->secrets[i].name = snames[i];
            if (sl->kids[i]->kind == YN_MAP)
                pol_read_secret(&v, sl->kids[i], i, &p->secrets[i]);
        }
    }
    if (!nl || !nl->n)
        pol_warn(d, root, "tenants", "no tenants: every request will be refused");
    if (tl && nl)
        pol_warn_unused_templates(&v, tl, nl);
    if (nl)
        pol_warn_isolation(&v, nl);
    return d->n_errs ? -1 : 0;
}
