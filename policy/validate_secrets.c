/* validate_secrets.c — the `secrets` section and where a credential comes
 * from: {file: /abs/path} or {env: NAME} sources (shared with tenants'
 * user-token keys), the variable name a secret takes inside the sandbox
 * (never one that changes what runs there), and its grants to tenants,
 * templates and tasks. Leaves reading the values to secret.c. */
#include <string.h>

#include "policy/validate_internal.h"

static int env_name_ok(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return 0;
    return s[strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")] == 0;
}

/* Variables a secret must never overwrite inside a sandbox: they change
 * what runs (loader, interpreter, proxy) rather than carry a credential. */
static int env_reserved(const char *s)
{
    static const char *const exact[] = {"PATH", "HOME", "USER", "SHELL", "TMPDIR", "PWD",
        "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE", NULL};
    for (size_t i = 0; exact[i]; i++)
        if (strcmp(s, exact[i]) == 0)
            return 1;
    return strncmp(s, "LD_", 3) == 0 || strncmp(s, "PYTHON", 6) == 0 ||
           strncmp(s, "SANDGATE", 8) == 0;
}

/* {file: /abs/path} or {env: NAME} */
void pol_read_source(pol_vctx *v, const ynode *m, const char *path, int *kind, const char **src)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    static const char *const keys[] = {"file", "env", NULL};
    ymap_check(v->d, m, path, keys);
    const ynode *f = ymap_get(m, "file"), *e = ymap_get(m, "env");
    char sub[YPATH_MAX];
    if ((f != NULL) == (e != NULL)) {
        pol_err(v->d, m, path, "expected exactly one of file or env");
        return;
    }
    ypath_key(sub, sizeof sub, path, f ? "file" : "env");
    const char *s;
    if (y_str(v->d, f ? f : e, sub, &s) < 0)
        return;
    if (f && s[0] != '/') {
        pol_err(v->d, f, sub, "'%s' is not an absolute path", s);
        return;
    }
    if (e && !env_name_ok(s)) {
        pol_err(v->d, e, sub, "'%s' is not a variable name, expected [A-Z_][A-Z0-9_]*", s);
        return;
    }
    *kind = f ? POL_SRC_FILE : POL_SRC_ENV;
    *src = s;
}

static const char *const secret_keys[] = {"name", "source", "env", "grants", NULL};
static const char *const grant_keys[] = {"tenants", "templates", "tasks", NULL};

static void read_grant(pol_vctx *v, const ynode *m, const char *path, const char *secret,
                       size_t i, pol_grant *g)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, grant_keys);
    char sub[YPATH_MAX];
    g->id = pol_sprintf(v->a, "secrets.%s.grants[%zu]", secret, i);
    ypath_key(sub, sizeof sub, path, "tenants");
    if (!ymap_get(m, "tenants"))
        pol_err(v->d, m, path, "missing key 'tenants', expected a list of tenant ids or [\"*\"]");
    else
        g->tenants = pol_read_tenant_refs(v, ymap_get(m, "tenants"), sub, &g->n_tenants, &g->all_tenants);
    ypath_key(sub, sizeof sub, path, "templates");
    g->templates = pol_read_template_refs(v, ymap_get(m, "templates"), sub, &g->n_templates);
    pol_read_tasks(v, m, path, &g->tasks);
}

void pol_read_secret(pol_vctx *v, const ynode *m, size_t i, pol_secret *s)
{
    char path[YPATH_MAX], sub[YPATH_MAX];
    ypath_idx(path, sizeof path, "secrets", i);
    ymap_check(v->d, m, path, secret_keys);
    const ynode *n;
    ypath_key(sub, sizeof sub, path, "source");
    if (!(n = ymap_get(m, "source")))
        pol_err(v->d, m, path, "missing key 'source', expected {file: PATH} or {env: NAME}");
    else
        pol_read_source(v, n, sub, &s->src_kind, &s->src);
    ypath_key(sub, sizeof sub, path, "env");
    if (!(n = ymap_get(m, "env"))) {
        pol_err(v->d, m, path, "missing key 'env', the variable name inside the sandbox");
    } else if (y_str(v->d, n, sub, &s->env) == 0) {
        if (!env_name_ok(s->env))
            pol_err(v->d, n, sub, "'%s' is not a variable name, expected [A-Z_][A-Z0-9_]*", s->env);
        else if (env_reserved(s->env))
            pol_err(v->d, n, sub, "'%s' is reserved: it changes what runs in the sandbox", s->env);
    }
    ypath_key(sub, sizeof sub, path, "grants");
    const ynode *l = pol_read_list(v, ymap_get(m, "grants"), sub);
    if (!l || !l->n) {
        if (s->name)
            pol_warn(v->d, m, path, "secret '%s' has no grants; no sandbox receives it", s->name);
        return;
    }
    s->grants = pol_alloc(v->a, l->n * sizeof *s->grants);
    s->n_grants = l->n;
    for (size_t g = 0; g < l->n; g++) {
        char gp[YPATH_MAX];
        ypath_idx(gp, sizeof gp, sub, g);
        read_grant(v, l->kids[g], gp, s->name ? s->name : "?", g, &s->grants[g]);
    }
}
