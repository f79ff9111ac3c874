/* validate_tenants.c — the `tenants` section and who a caller is: API-key
 * digests, mTLS identities, user tokens, scope, and the tenant's templates,
 * limits and network rules. Owns the rule that a key or identity belongs to
 * one tenant only, and the key → tenant and identity → tenant indexes that
 * authentication looks up. Leaves the lookups to identity.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/validate_internal.h"

static const char *const tenant_keys[] = {"id", "api_keys", "mtls", "require_mtls", "templates",
    "scope", "limits", "quotas", "user_tokens", "network", "isolation", NULL};

static void read_api_keys(pol_vctx *v, const ynode *m, const char *path, pol_tenant *t, pol_named *keys, size_t *nk)
{
    char lp[YPATH_MAX];
    const ynode *l = pol_key_list(v, m, path, "api_keys", lp);
    if (!l)
        return;
    t->key_hashes = pol_alloc(v->a, (l->n + 1) * sizeof *t->key_hashes);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        if (pol_list_str(v, l, lp, i, sub, &s) < 0)
            continue;
        if (strlen(s) != 64 || strspn(s, "0123456789abcdefABCDEF") != 64) {
            pol_err(v->d, l->kids[i], sub,
                    "expected a SHA-256 hex digest (64 hex characters), not the key itself; use 'sandgate-policy hash-key'");
            continue;
        }
        char *low = pol_strdup(v->a, s);
        for (char *c = low; *c; c++)
            if (*c >= 'A' && *c <= 'F')
                *c = (char)(*c - 'A' + 'a');
        t->key_hashes[t->n_keys++] = low;
        keys[(*nk)++] = (pol_named){low, l->kids[i], 0};
    }
}

static void read_mtls(pol_vctx *v, const ynode *m, const char *path, pol_tenant *t, pol_named *ids, size_t *ni)
{
    char lp[YPATH_MAX];
    const ynode *l = pol_key_list(v, m, path, "mtls", lp);
    if (!l)
        return;
    t->mtls = pol_alloc(v->a, (l->n + 1) * sizeof *t->mtls);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        if (pol_list_str(v, l, lp, i, sub, &s) < 0)
            continue;
        if (strlen(s) > 512 || strchr(s, ' ')) {
            pol_err(v->d, l->kids[i], sub, "expected a SPIFFE ID or certificate SAN without spaces");
            continue;
        }
        t->mtls[t->n_mtls++] = s;
        ids[(*ni)++] = (pol_named){s, l->kids[i], 0};
    }
}

static void read_user_tokens(pol_vctx *v, const ynode *m, const char *path, pol_tenant *t)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    static const char *const keys[] = {"required", "hmac_key", "max_ttl", NULL};
    ymap_check(v->d, m, path, keys);
    char sub[YPATH_MAX];
    t->tokens_enabled = 1;
    t->tokens_required = 1;
    t->tokens_max_ttl_s = 3600;
    if (ymap_get(m, "required")) {
        ypath_key(sub, sizeof sub, path, "required");
        y_bool(v->d, ymap_get(m, "required"), sub, &t->tokens_required);
    }
    if (ymap_get(m, "max_ttl")) {
        ypath_key(sub, sizeof sub, path, "max_ttl");
        if (y_duration(v->d, ymap_get(m, "max_ttl"), sub, &t->tokens_max_ttl_s) == 0)
            pol_positive32(v, ymap_get(m, "max_ttl"), sub, t->tokens_max_ttl_s);
    }
    ypath_key(sub, sizeof sub, path, "hmac_key");
    if (!ymap_get(m, "hmac_key"))
        pol_err(v->d, m, path, "missing key 'hmac_key', expected {file: PATH} or {env: NAME}");
    else
        pol_read_source(v, ymap_get(m, "hmac_key"), sub, &t->tokens_src_kind, &t->tokens_src);
}

static void read_scope(pol_vctx *v, const ynode *n, const char *path, pol_tenant *t)
{
    const char *s;
    if (y_str(v->d, n, path, &s) < 0)
        return;
    if (strcmp(s, "per_task") == 0)
        t->scope = POLICY_SCOPE_PER_TASK;
    else if (strcmp(s, "per_user") == 0)
        t->scope = POLICY_SCOPE_PER_USER;
    else
        pol_err(v->d, n, path, "bad scope '%s', expected per_task or per_user (a sandbox is never shared between users)", s);
}

static void read_tenant(pol_vctx *v, const ynode *m, size_t i, pol_tenant *t,
                        pol_named *keys, size_t *nk, pol_named *mtls, size_t *nm)
{
    char path[YPATH_MAX], sub[YPATH_MAX];
    ypath_idx(path, sizeof path, "tenants", i);
    ymap_check(v->d, m, path, tenant_keys);
    read_api_keys(v, m, path, t, keys, nk);
    read_mtls(v, m, path, t, mtls, nm);
    const ynode *n;
    if ((n = ymap_get(m, "require_mtls"))) {
        ypath_key(sub, sizeof sub, path, "require_mtls");
        if (y_bool(v->d, n, sub, &t->require_mtls) == 0 && t->require_mtls && !t->n_mtls)
            pol_err(v->d, n, sub, "require_mtls is true but the tenant lists no mtls identities");
    }
    ypath_key(sub, sizeof sub, path, "templates");
    t->templates = pol_read_template_refs(v, ymap_get(m, "templates"), sub, &t->n_templates);
    if ((n = ymap_get(m, "scope"))) {
        ypath_key(sub, sizeof sub, path, "scope");
        read_scope(v, n, sub, t);
    }
    if ((n = ymap_get(m, "isolation"))) {
        char what[128];
        snprintf(what, sizeof what, "tenant '%s'", t->id ? t->id : "?");
        ypath_key(sub, sizeof sub, path, "isolation");
        pol_read_isolation(v, n, sub, what, &t->isolation);
    }
    t->limits.v = v->p->defaults;
    if ((n = ymap_get(m, "limits"))) {
        ypath_key(sub, sizeof sub, path, "limits");
        pol_read_limits(v, n, sub, &t->limits.v, &t->limits.overridden);
        if (n->kind == YN_MAP)
            pol_check_ttl_order(v, n, sub, &t->limits.v);
    }
    if ((n = ymap_get(m, "quotas"))) {
        ypath_key(sub, sizeof sub, path, "quotas");
        pol_read_quotas(v, n, sub, &t->limits.v, &t->limits.overridden);
    }
    if ((n = ymap_get(m, "user_tokens"))) {
        ypath_key(sub, sizeof sub, path, "user_tokens");
        read_user_tokens(v, n, sub, t);
    }
    if ((n = ymap_get(m, "network"))) {
        char owner[128];
        snprintf(owner, sizeof owner, "tenants.%s", t->id ? t->id : "?");
        ypath_key(sub, sizeof sub, path, "network");
        pol_read_network(v, n, sub, owner, 1, &t->net);
    }
    if (!t->n_keys && !t->n_mtls && t->id)
        pol_warn(v->d, m, path, "tenant '%s' has no api_keys or mtls identities; nobody can authenticate as it", t->id);
}

static void build_identity_indexes(pol_vctx *v, pol_named *keys, size_t nk, pol_named *mtls, size_t nm)
{
    /* The same key or identity on two tenants would make authentication
     * ambiguous: an error, reported at the second occurrence. */
    pol_build_name_index(v, &v->p->by_key, keys, nk);
    pol_check_unique(v, keys, nk, "API key hash", "tenants[%zu].api_keys");
    pol_build_name_index(v, &v->p->by_mtls, mtls, nm);
    pol_check_unique(v, mtls, nm, "mTLS identity", "tenants[%zu].mtls");
}

void pol_read_tenants(pol_vctx *v, const ynode *l)
{
    size_t total_keys = 0, total_mtls = 0;
    for (size_t i = 0; i < l->n; i++) {
        const ynode *k = ymap_get(l->kids[i], "api_keys"), *m = ymap_get(l->kids[i], "mtls");
        total_keys += k && k->kind == YN_SEQ ? k->n : 0;
        total_mtls += m && m->kind == YN_SEQ ? m->n : 0;
    }
    pol_named *keys = malloc((total_keys + 1) * sizeof *keys);
    pol_named *mtls = malloc((total_mtls + 1) * sizeof *mtls);
    size_t nk = 0, nm = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->kids[i]->kind != YN_MAP)
            continue;
        size_t k0 = nk, m0 = nm;
        read_tenant(v, l->kids[i], i, &v->p->tenants[i], keys, &nk, mtls, &nm);
        for (size_t k = k0; k < nk; k++)
            keys[k].idx = i;    /* the index value is the tenant */
        for (size_t k = m0; k < nm; k++)
            mtls[k].idx = i;
    }
    build_identity_indexes(v, keys, nk, mtls, nm);
    free(keys);
    free(mtls);
}
