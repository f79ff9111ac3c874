/* validate_names.c — names and references in the policy schema: the syntax
 * of ids (tenant ids, template and secret names, rule ids), list nodes,
 * duplicate checks by sorting (so 10k-rule files stay O(n log n)), the
 * name → index tables, and resolving tenant and template references once
 * every name is known. Also the task pattern, which rules and grants share.
 * Leaves what each section means to the other validate_*.c files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/validate_internal.h"

static const char *id_check(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return "must be 1 to %zu characters";
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= '0' && s[0] <= '9')))
        return "must start with a letter or digit";
    if (s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")])
        return "may contain only letters, digits, '_' and '-'";
    return NULL;
}

/* Read an id-like string (tenant id, template or secret name, rule id). */
const char *pol_read_id(pol_vctx *v, const ynode *n, const char *path, size_t max)
{
    const char *s;
    if (y_str(v->d, n, path, &s) < 0)
        return NULL;
    const char *why = id_check(s, max);
    if (why) {
        char msg[96];
        snprintf(msg, sizeof msg, why, max);
        pol_err(v->d, n, path, "'%s' %s", s, msg);
        return NULL;
    }
    return s;
}

/* A list node (or absent). Returns the node or NULL after reporting. */
const ynode *pol_read_list(pol_vctx *v, const ynode *n, const char *path)
{
    if (!n)
        return NULL;
    return y_is(v->d, n, path, YN_SEQ) == 0 ? n : NULL;
}

const ynode *pol_key_list(pol_vctx *v, const ynode *m, const char *path, const char *key,
                          char lp[YPATH_MAX])
{
    ypath_key(lp, YPATH_MAX, path, key);
    return pol_read_list(v, ymap_get(m, key), lp);
}

int pol_list_str(pol_vctx *v, const ynode *l, const char *lp, size_t i, char sub[YPATH_MAX],
                 const char **s)
{
    ypath_idx(sub, YPATH_MAX, lp, i);
    return y_str(v->d, l->kids[i], sub, s);
}

static int named_cmp(const void *a, const void *b)
{
    const pol_named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

/* Sorted-neighbour duplicate check: items[i].name defined at items[i].node.
 * Reorders items. */
void pol_check_unique(pol_vctx *v, pol_named *items, size_t n, const char *what,
                      const char *path_fmt_prefix)
{
    qsort(items, n, sizeof *items, named_cmp);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(items[i].name, items[i - 1].name) != 0)
            continue;
        size_t first = i - 1;
        while (first > 0 && strcmp(items[first - 1].name, items[i].name) == 0)
            first--;
        char path[YPATH_MAX];
        snprintf(path, sizeof path, path_fmt_prefix, items[i].idx);
        pol_err(v->d, items[i].node, path, "duplicate %s '%s', first defined at line %u",
                what, items[i].name, items[first].node->line);
    }
}

void pol_build_name_index(pol_vctx *v, pol_index *ix, pol_named *items, size_t n)
{
    pol_pair *pairs = pol_alloc(v->a, (n + 1) * sizeof *pairs);
    for (size_t i = 0; i < n; i++)
        pairs[i] = (pol_pair){items[i].name, (uint32_t)items[i].idx};
    pol_index_build(v->a, ix, pairs, n);
}

long pol_name_lookup(const pol_index *ix, const char *name)
{
    size_t n;
    const uint32_t *vals = pol_index_get(ix, name, strlen(name), &n);
    return n ? (long)vals[0] : -1;
}

/* tasks: one glob over task names, on rules and on grants. */
void pol_read_tasks(pol_vctx *v, const ynode *m, const char *path, const char **out)
{
    const ynode *t = ymap_get(m, "tasks");
    if (!t)
        return;
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, "tasks");
    const char *s;
    if (y_str(v->d, t, sub, &s) < 0)
        return;
    const char *why = pol_glob_check(s);
    if (why) {
        pol_err(v->d, t, sub, "bad task pattern '%s': %s", s, why);
        return;
    }
    *out = s;
}

/* A list of names resolved against ix (what: "tenant", "template"); with
 * all non-NULL, "*" sets it instead of naming one. */
static uint32_t *read_refs(pol_vctx *v, const ynode *n, const char *path, const pol_index *ix,
                           const char *what, size_t *count, int *all)
{
    *count = 0;
    const ynode *l = pol_read_list(v, n, path);
    if (!l)
        return NULL;
    uint32_t *out = pol_alloc(v->a, (l->n + 1) * sizeof *out);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        if (pol_list_str(v, l, path, i, sub, &s) < 0)
            continue;
        if (all && strcmp(s, "*") == 0) {
            *all = 1;
            continue;
        }
        long t = pol_name_lookup(ix, s);
        if (t < 0)
            pol_err(v->d, l->kids[i], sub, "unknown %s '%s'", what, s);
        else
            out[(*count)++] = (uint32_t)t;
    }
    return out;
}

/* tenants: ["*"] or ids; resolved against the tenant index. */
uint32_t *pol_read_tenant_refs(pol_vctx *v, const ynode *n, const char *path, size_t *count, int *all)
{
    *all = 0;
    return read_refs(v, n, path, &v->p->by_tenant, "tenant", count, all);
}

uint32_t *pol_read_template_refs(pol_vctx *v, const ynode *n, const char *path, size_t *count)
{
    return read_refs(v, n, path, &v->p->by_template, "template", count, NULL);
}
