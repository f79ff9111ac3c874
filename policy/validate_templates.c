/* validate_templates.c — the `templates` section: which tenants may use a
 * template and its own network rules, plus the warnings for templates no
 * tenant may use and tenants that may use no template. Leaves the rules
 * themselves to validate_network.c. */
#include <stdio.h>
#include <stdlib.h>

#include "policy/validate_internal.h"

static const char *const template_keys[] = {"name", "tenants", "network", "isolation", NULL};

void pol_read_template(pol_vctx *v, const ynode *m, size_t i, pol_template *t)
{
    char path[YPATH_MAX], sub[YPATH_MAX];
    ypath_idx(path, sizeof path, "templates", i);
    ymap_check(v->d, m, path, template_keys);
    ypath_key(sub, sizeof sub, path, "tenants");
    t->tenants = pol_read_tenant_refs(v, ymap_get(m, "tenants"), sub, &t->n_tenants, &t->all_tenants);
    const ynode *net = ymap_get(m, "network");
    if (net) {
        char owner[128];
        /* a bad name was reported; still check its rules */
        snprintf(owner, sizeof owner, "templates.%s", t->name ? t->name : "?");
        ypath_key(sub, sizeof sub, path, "network");
        pol_read_network(v, net, sub, owner, 0, &t->net);
    }
    const ynode *iso = ymap_get(m, "isolation");
    if (iso) {
        char what[128];
        snprintf(what, sizeof what, "template '%s'", t->name ? t->name : "?");
        ypath_key(sub, sizeof sub, path, "isolation");
        pol_read_isolation(v, iso, sub, what, &t->isolation);
    }
}

void pol_read_isolation(pol_vctx *v, const ynode *n, const char *path, const char *what,
                        sg_isolation *out)
{
    const char *s;
    if (y_str(v->d, n, path, &s) == 0 && sg_isolation_parse(s, out) < 0)
        pol_err(v->d, n, path, "%s: unknown isolation '%s', expected " SG_ISOLATION_EXPECTED, what, s);
}

/* The isolation a template gets under the policy: what it says, else process. */
static sg_isolation template_iso(const pol_template *t)
{
    return t->isolation == SG_ISOLATION_UNSET ? SG_ISOLATION_PROCESS : t->isolation;
}

/* A tenant whose minimum isolation no template it may use meets can create
 * nothing: not unsafe (creates fail closed), but surely not what was meant. */
void pol_warn_isolation(pol_vctx *v, const ynode *nl)
{
    policy *p = v->p;
    for (size_t i = 0; i < p->n_tenants; i++) {
        const pol_tenant *t = &p->tenants[i];
        if (!t->id || t->isolation <= SG_ISOLATION_PROCESS || nl->kids[i]->kind != YN_MAP)
            continue;
        size_t allowed = 0, strong = 0;
        for (size_t k = 0; k < p->n_templates; k++) {
            const pol_template *tp = &p->templates[k];
            int ok = tp->all_tenants;
            for (size_t j = 0; !ok && j < t->n_templates; j++)
                ok = t->templates[j] == k;
            for (size_t j = 0; !ok && j < tp->n_tenants; j++)
                ok = tp->tenants[j] == i;
            allowed += ok;
            strong += ok && template_iso(tp) >= t->isolation;
        }
        if (allowed && !strong) {
            char ti[YPATH_MAX], path[YPATH_MAX];
            ypath_idx(ti, sizeof ti, "tenants", i);
            ypath_key(path, sizeof path, ti, "isolation");
            pol_warn(v->d, ymap_get(nl->kids[i], "isolation"), path,
                     "tenant '%s' requires isolation %s but every template it may use is weaker; "
                     "it can create no sandbox", t->id, sg_isolation_name(t->isolation));
        }
    }
}

void pol_warn_unused_templates(pol_vctx *v, const ynode *tl, const ynode *nl)
{
    policy *p = v->p;
    char *used = calloc(p->n_templates + 1, 1);
    for (size_t i = 0; i < p->n_tenants; i++)
        for (size_t k = 0; k < p->tenants[i].n_templates; k++)
            used[p->tenants[i].templates[k]] = 1;
    for (size_t i = 0; i < p->n_templates; i++) {
        const pol_template *t = &p->templates[i];
        if (!used[i] && !t->all_tenants && !t->n_tenants && t->name) {
            char path[YPATH_MAX];
            ypath_idx(path, sizeof path, "templates", i);
            pol_warn(v->d, tl->kids[i], path, "template '%s' is allowed to no tenant", t->name);
        }
    }
    for (size_t i = 0; i < p->n_tenants; i++) {
        const pol_tenant *t = &p->tenants[i];
        int any = t->n_templates > 0;
        for (size_t k = 0; !any && k < p->n_templates; k++) {
            any = p->templates[k].all_tenants;
            for (size_t j = 0; !any && j < p->templates[k].n_tenants; j++)
                any = p->templates[k].tenants[j] == i;
        }
        if (!any && t->id) {
            char path[YPATH_MAX];
            ypath_idx(path, sizeof path, "tenants", i);
            pol_warn(v->d, nl->kids[i], path, "tenant '%s' may use no template", t->id);
        }
    }
    free(used);
}
