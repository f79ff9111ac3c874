/* validate_templates.c — the `templates` section: which tenants may use a
 * template and its own network rules, plus the warnings for templates no
 * tenant may use and tenants that may use no template. Leaves the rules
 * themselves to validate_network.c. */
#include <stdio.h>
#include <stdlib.h>

#include "policy/validate_internal.h"

static const char *const template_keys[] = {"name", "tenants", "network", NULL};

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
