/* validate.c — the policy schema: walks the node tree from parse.c, checks
 * every key, type, host, CIDR, port, pattern, id and cross-reference, and
 * builds the immutable in-memory policy. Every error names file:line:col and
 * the key path, and all of them are reported. Names are collected first
 * (templates, tenants, secrets) so references may point forward in the
 * file; uniqueness is checked by sorting, so 10k-rule files stay
 * O(n log n). Owns the schema and the built-in defaults; leaves decisions
 * to decide.c and reading files to load.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

typedef struct vctx {
    policy *p;
    pol_diag *d;
    pol_arena *a;
} vctx;

#define V_NAME_MAX 63
#define V_RULE_ID_MAX 40

/* ---- small helpers --------------------------------------------------- */

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
static const char *read_id(vctx *v, const ynode *n, const char *path, size_t max)
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
static const ynode *read_list(vctx *v, const ynode *n, const char *path)
{
    if (!n)
        return NULL;
    return y_is(v->d, n, path, YN_SEQ) == 0 ? n : NULL;
}

/* Sorted-neighbour duplicate check: names[i] defined at nodes[i]. */
typedef struct named { const char *name; const ynode *node; size_t idx; } named;

static int named_cmp(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

static void check_unique(vctx *v, named *items, size_t n, const char *what,
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

static void build_name_index(vctx *v, pol_index *ix, named *items, size_t n)
{
    pol_pair *pairs = pol_alloc(v->a, (n + 1) * sizeof *pairs);
    for (size_t i = 0; i < n; i++)
        pairs[i] = (pol_pair){items[i].name, (uint32_t)items[i].idx};
    pol_index_build(v->a, ix, pairs, n);
}

static long name_lookup(const pol_index *ix, const char *name)
{
    size_t n;
    const uint32_t *vals = pol_index_get(ix, name, strlen(name), &n);
    return n ? (long)vals[0] : -1;
}

/* ---- limits ---------------------------------------------------------- */

static const char *const limit_keys[] = {
    "action_timeout", "ttl", "ttl_max", "idle_timeout", "output_bytes", "memory",
    "cpu_millis", "pids", "disk", "file_bytes", "egress_bytes", NULL};
static const char *const quota_keys[] = {
    "sandboxes_per_tenant", "sandboxes_per_user", "concurrent_actions", "rate_per_s",
    "rate_burst", NULL};

static void default_limits(policy_limits *l)
{
    *l = (policy_limits){
        .action_timeout_s = 30, .ttl_s = 600, .ttl_max_s = 3600, .idle_timeout_s = 300,
        .output_bytes = 64 << 10, .memory_bytes = 512ull << 20, .cpu_millis = 1000,
        .pids = 128, .disk_bytes = 256ull << 20, .file_bytes = 16ull << 20,
        .egress_bytes = 64ull << 20, .max_sandboxes_tenant = 100, .max_sandboxes_user = 10,
        .max_concurrent_actions = 32, .rate_per_s = 20, .rate_burst = 40};
}

static int positive32(vctx *v, const ynode *n, const char *path, uint32_t x)
{
    if (x == 0) {
        pol_err(v->d, n, path, "must be greater than 0");
        return -1;
    }
    return 0;
}

static int positive64(vctx *v, const ynode *n, const char *path, uint64_t x)
{
    return positive32(v, n, path, x ? 1 : 0);
}

/* One limits mapping over `l`; sets bits in *set for the keys present. */
static void read_limits(vctx *v, const ynode *m, const char *path, policy_limits *l, uint32_t *set)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, limit_keys);
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const char *k = m->kids[i]->str;
        const ynode *val = m->kids[i + 1];
        char sub[YPATH_MAX];
        ypath_key(sub, sizeof sub, path, k ? k : "");
        uint32_t u32;
        uint64_t u64;
        int ok = 0;
#define DUR(key, field, bit) else if (strcmp(k, key) == 0) { \
    ok = y_duration(v->d, val, sub, &u32) == 0 && positive32(v, val, sub, u32) == 0; \
    if (ok) { l->field = u32; *set |= bit; } }
#define SIZE(key, field, bit) else if (strcmp(k, key) == 0) { \
    ok = y_size(v->d, val, sub, &u64) == 0 && positive64(v, val, sub, u64) == 0; \
    if (ok) { l->field = u64; *set |= bit; } }
#define U32(key, field, bit, max) else if (strcmp(k, key) == 0) { \
    ok = y_u32(v->d, val, sub, max, &u32) == 0 && positive32(v, val, sub, u32) == 0; \
    if (ok) { l->field = u32; *set |= bit; } }
        if (!k) continue;
        DUR("action_timeout", action_timeout_s, POL_LIM_ACTION_TIMEOUT)
        DUR("ttl", ttl_s, POL_LIM_TTL)
        DUR("ttl_max", ttl_max_s, POL_LIM_TTL_MAX)
        DUR("idle_timeout", idle_timeout_s, POL_LIM_IDLE)
        SIZE("output_bytes", output_bytes, POL_LIM_OUTPUT)
        SIZE("memory", memory_bytes, POL_LIM_MEMORY)
        U32("cpu_millis", cpu_millis, POL_LIM_CPU, 1024000)
        U32("pids", pids, POL_LIM_PIDS, 1u << 22)
        SIZE("disk", disk_bytes, POL_LIM_DISK)
        SIZE("file_bytes", file_bytes, POL_LIM_FILE)
        SIZE("egress_bytes", egress_bytes, POL_LIM_EGRESS)
        (void)ok;
    }
}

/* Quotas may be 0: "this tenant may create nothing" is a real setting. */
static void read_quotas(vctx *v, const ynode *m, const char *path, policy_limits *l, uint32_t *set)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, quota_keys);
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const char *k = m->kids[i]->str;
        const ynode *val = m->kids[i + 1];
        char sub[YPATH_MAX];
        uint32_t u32;
        double dv;
        if (!k)
            continue;
        ypath_key(sub, sizeof sub, path, k);
#define Q32(key, field, bit) else if (strcmp(k, key) == 0) { \
    if (y_u32(v->d, val, sub, 1000000, &u32) == 0) { l->field = u32; *set |= bit; } }
        if (0) {}
        Q32("sandboxes_per_tenant", max_sandboxes_tenant, POL_LIM_SB_TENANT)
        Q32("sandboxes_per_user", max_sandboxes_user, POL_LIM_SB_USER)
        Q32("concurrent_actions", max_concurrent_actions, POL_LIM_CONCURRENT)
        Q32("rate_burst", rate_burst, POL_LIM_BURST)
        else if (strcmp(k, "rate_per_s") == 0 && y_double(v->d, val, sub, &dv) == 0) {
            l->rate_per_s = dv;
            *set |= POL_LIM_RATE;
        }
    }
}

static void check_ttl_order(vctx *v, const ynode *limits, const char *path, const policy_limits *l)
{
    if (l->ttl_s <= l->ttl_max_s)
        return;
    const ynode *at = ymap_get(limits, "ttl") ? ymap_get(limits, "ttl") : ymap_get(limits, "ttl_max");
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, ymap_get(limits, "ttl") ? "ttl" : "ttl_max");
    pol_err(v->d, at ? at : limits, sub, "ttl %us is above ttl_max %us", l->ttl_s, l->ttl_max_s);
}

static void read_defaults(vctx *v, const ynode *m)
{
    default_limits(&v->p->defaults);
    if (!m || y_is(v->d, m, "defaults", YN_MAP) < 0)
        return;
    static const char *const keys[] = {"limits", "quotas", NULL};
    ymap_check(v->d, m, "defaults", keys);
    uint32_t set = 0;
    const ynode *lim = ymap_get(m, "limits");
    if (lim)
        read_limits(v, lim, "defaults.limits", &v->p->defaults, &set);
    if (ymap_get(m, "quotas"))
        read_quotas(v, ymap_get(m, "quotas"), "defaults.quotas", &v->p->defaults, &set);
    if (lim && lim->kind == YN_MAP)
        check_ttl_order(v, lim, "defaults.limits", &v->p->defaults);
}

/* ---- network rules --------------------------------------------------- */

static const char *const rule_keys_tenant[] = {"id", "hosts", "cidrs", "ports", "tasks", "templates", NULL};
static const char *const rule_keys_template[] = {"id", "hosts", "cidrs", "ports", "tasks", NULL};

static void read_rule_hosts(vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "hosts");
    const ynode *l = read_list(v, ymap_get(m, "hosts"), lp);
    if (!l)
        return;
    r->hosts = pol_alloc(v->a, (l->n + 1) * sizeof *r->hosts);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        uint8_t ip[16];
        char norm[256];
        ypath_idx(sub, sizeof sub, lp, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
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

static void read_rule_cidrs(vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "cidrs");
    const ynode *l = read_list(v, ymap_get(m, "cidrs"), lp);
    if (!l)
        return;
    r->cidrs = pol_alloc(v->a, (l->n + 1) * sizeof *r->cidrs);
    r->cidr_strs = pol_alloc(v->a, (l->n + 1) * sizeof *r->cidr_strs);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        ypath_idx(sub, sizeof sub, lp, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
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

static void read_rule_ports(vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "ports");
    const ynode *pn = ymap_get(m, "ports");
    if (!pn) {
        pol_warn(v->d, m, path, "rule allows every port; list ports to narrow it");
        return;
    }
    const ynode *l = read_list(v, pn, lp);
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

static void read_rule_templates(vctx *v, const ynode *m, const char *path, pol_rule *r)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "templates");
    const ynode *l = read_list(v, ymap_get(m, "templates"), lp);
    if (!l)
        return;
    r->templates = pol_alloc(v->a, (l->n + 1) * sizeof *r->templates);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        ypath_idx(sub, sizeof sub, lp, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
            continue;
        if (name_lookup(&v->p->by_template, s) < 0) {
            pol_err(v->d, l->kids[i], sub, "unknown template '%s'", s);
            continue;
        }
        r->templates[r->n_templates++] = s;
    }
}

static void read_tasks(vctx *v, const ynode *m, const char *path, const char **out)
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

/* owner: "tenants.acme" or "templates.code-interpreter" (rule-id prefix). */
static void read_rule(vctx *v, const ynode *m, const char *path, const char *owner,
                      size_t idx, int tenant_level, pol_rule *r, named *ids, size_t *n_ids)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, tenant_level ? rule_keys_tenant : rule_keys_template);
    const ynode *idn = ymap_get(m, "id");
    const char *id = NULL;
    if (idn) {
        char sub[YPATH_MAX];
        ypath_key(sub, sizeof sub, path, "id");
        id = read_id(v, idn, sub, V_RULE_ID_MAX);
        if (id)
            ids[(*n_ids)++] = (named){id, idn, idx};
    }
    r->id = id ? pol_sprintf(v->a, "%s.network.%s", owner, id)
               : pol_sprintf(v->a, "%s.network[%zu]", owner, idx);
    read_rule_hosts(v, m, path, r);
    read_rule_cidrs(v, m, path, r);
    read_rule_ports(v, m, path, r);
    read_tasks(v, m, path, &r->tasks);
    if (tenant_level)
        read_rule_templates(v, m, path, r);
    if (!ymap_get(m, "hosts") && !ymap_get(m, "cidrs"))
        pol_err(v->d, m, path, "a network rule needs hosts or cidrs");
}

static void read_network(vctx *v, const ynode *n, const char *path, const char *owner,
                         int tenant_level, pol_ruleset *rs)
{
    const ynode *l = read_list(v, n, path);
    if (!l)
        return;
    rs->rules = pol_alloc(v->a, (l->n + 1) * sizeof *rs->rules);
    rs->n = l->n;
    named *ids = malloc((l->n + 1) * sizeof *ids);
    size_t n_ids = 0;
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        ypath_idx(sub, sizeof sub, path, i);
        read_rule(v, l->kids[i], sub, owner, i, tenant_level, &rs->rules[i], ids, &n_ids);
    }
    char fmt[YPATH_MAX];
    snprintf(fmt, sizeof fmt, "%s[%%zu].id", path);
    check_unique(v, ids, n_ids, "rule id", fmt);
    free(ids);
    pol_ruleset_index(v->a, rs);
}

/* ---- secret sources -------------------------------------------------- */

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
static void read_source(vctx *v, const ynode *m, const char *path, int *kind, const char **src)
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

/* ---- templates ------------------------------------------------------- */

static const char *const template_keys[] = {"name", "tenants", "network", NULL};

/* tenants: ["*"] or ids; resolved against the tenant index. */
static uint32_t *read_tenant_refs(vctx *v, const ynode *n, const char *path, size_t *count, int *all)
{
    *count = 0;
    *all = 0;
    const ynode *l = read_list(v, n, path);
    if (!l)
        return NULL;
    uint32_t *out = pol_alloc(v->a, (l->n + 1) * sizeof *out);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        ypath_idx(sub, sizeof sub, path, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
            continue;
        if (strcmp(s, "*") == 0) {
            *all = 1;
            continue;
        }
        long t = name_lookup(&v->p->by_tenant, s);
        if (t < 0)
            pol_err(v->d, l->kids[i], sub, "unknown tenant '%s'", s);
        else
            out[(*count)++] = (uint32_t)t;
    }
    return out;
}

static uint32_t *read_template_refs(vctx *v, const ynode *n, const char *path, size_t *count)
{
    *count = 0;
    const ynode *l = read_list(v, n, path);
    if (!l)
        return NULL;
    uint32_t *out = pol_alloc(v->a, (l->n + 1) * sizeof *out);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        ypath_idx(sub, sizeof sub, path, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
            continue;
        long t = name_lookup(&v->p->by_template, s);
        if (t < 0)
            pol_err(v->d, l->kids[i], sub, "unknown template '%s'", s);
        else
            out[(*count)++] = (uint32_t)t;
    }
    return out;
}

static void read_template(vctx *v, const ynode *m, size_t i, pol_template *t)
{
    char path[YPATH_MAX], sub[YPATH_MAX];
    ypath_idx(path, sizeof path, "templates", i);
    ymap_check(v->d, m, path, template_keys);
    ypath_key(sub, sizeof sub, path, "tenants");
    t->tenants = read_tenant_refs(v, ymap_get(m, "tenants"), sub, &t->n_tenants, &t->all_tenants);
    const ynode *net = ymap_get(m, "network");
    if (net) {
        char owner[128];
        /* a bad name was reported; still check its rules */
        snprintf(owner, sizeof owner, "templates.%s", t->name ? t->name : "?");
        ypath_key(sub, sizeof sub, path, "network");
        read_network(v, net, sub, owner, 0, &t->net);
    }
}

/* ---- tenants --------------------------------------------------------- */

static const char *const tenant_keys[] = {"id", "api_keys", "mtls", "require_mtls", "templates",
    "scope", "limits", "quotas", "user_tokens", "network", NULL};

static void read_api_keys(vctx *v, const ynode *m, const char *path, pol_tenant *t, named *keys, size_t *nk)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "api_keys");
    const ynode *l = read_list(v, ymap_get(m, "api_keys"), lp);
    if (!l)
        return;
    t->key_hashes = pol_alloc(v->a, (l->n + 1) * sizeof *t->key_hashes);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        ypath_idx(sub, sizeof sub, lp, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
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
        keys[(*nk)++] = (named){low, l->kids[i], 0};
    }
}

static void read_mtls(vctx *v, const ynode *m, const char *path, pol_tenant *t, named *ids, size_t *ni)
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, "mtls");
    const ynode *l = read_list(v, ymap_get(m, "mtls"), lp);
    if (!l)
        return;
    t->mtls = pol_alloc(v->a, (l->n + 1) * sizeof *t->mtls);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s;
        ypath_idx(sub, sizeof sub, lp, i);
        if (y_str(v->d, l->kids[i], sub, &s) < 0)
            continue;
        if (strlen(s) > 512 || strchr(s, ' ')) {
            pol_err(v->d, l->kids[i], sub, "expected a SPIFFE ID or certificate SAN without spaces");
            continue;
        }
        t->mtls[t->n_mtls++] = s;
        ids[(*ni)++] = (named){s, l->kids[i], 0};
    }
}

static void read_user_tokens(vctx *v, const ynode *m, const char *path, pol_tenant *t)
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
            positive32(v, ymap_get(m, "max_ttl"), sub, t->tokens_max_ttl_s);
    }
    ypath_key(sub, sizeof sub, path, "hmac_key");
    if (!ymap_get(m, "hmac_key"))
        pol_err(v->d, m, path, "missing key 'hmac_key', expected {file: PATH} or {env: NAME}");
    else
        read_source(v, ymap_get(m, "hmac_key"), sub, &t->tokens_src_kind, &t->tokens_src);
}

static void read_scope(vctx *v, const ynode *n, const char *path, pol_tenant *t)
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

static void read_tenant(vctx *v, const ynode *m, size_t i, pol_tenant *t,
                        named *keys, size_t *nk, named *mtls, size_t *nm)
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
    t->templates = read_template_refs(v, ymap_get(m, "templates"), sub, &t->n_templates);
    if ((n = ymap_get(m, "scope"))) {
        ypath_key(sub, sizeof sub, path, "scope");
        read_scope(v, n, sub, t);
    }
    t->limits.v = v->p->defaults;
    if ((n = ymap_get(m, "limits"))) {
        ypath_key(sub, sizeof sub, path, "limits");
        read_limits(v, n, sub, &t->limits.v, &t->limits.overridden);
        if (n->kind == YN_MAP)
            check_ttl_order(v, n, sub, &t->limits.v);
    }
    if ((n = ymap_get(m, "quotas"))) {
        ypath_key(sub, sizeof sub, path, "quotas");
        read_quotas(v, n, sub, &t->limits.v, &t->limits.overridden);
    }
    if ((n = ymap_get(m, "user_tokens"))) {
        ypath_key(sub, sizeof sub, path, "user_tokens");
        read_user_tokens(v, n, sub, t);
    }
    if ((n = ymap_get(m, "network"))) {
        char owner[128];
        snprintf(owner, sizeof owner, "tenants.%s", t->id ? t->id : "?");
        ypath_key(sub, sizeof sub, path, "network");
        read_network(v, n, sub, owner, 1, &t->net);
    }
    if (!t->n_keys && !t->n_mtls && t->id)
        pol_warn(v->d, m, path, "tenant '%s' has no api_keys or mtls identities; nobody can authenticate as it", t->id);
}

/* ---- secrets --------------------------------------------------------- */

static const char *const secret_keys[] = {"name", "source", "env", "grants", NULL};
static const char *const grant_keys[] = {"tenants", "templates", "tasks", NULL};

static void read_grant(vctx *v, const ynode *m, const char *path, const char *secret,
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
        g->tenants = read_tenant_refs(v, ymap_get(m, "tenants"), sub, &g->n_tenants, &g->all_tenants);
    ypath_key(sub, sizeof sub, path, "templates");
    g->templates = read_template_refs(v, ymap_get(m, "templates"), sub, &g->n_templates);
    read_tasks(v, m, path, &g->tasks);
}

static void read_secret(vctx *v, const ynode *m, size_t i, pol_secret *s)
{
    char path[YPATH_MAX], sub[YPATH_MAX];
    ypath_idx(path, sizeof path, "secrets", i);
    ymap_check(v->d, m, path, secret_keys);
    const ynode *n;
    ypath_key(sub, sizeof sub, path, "source");
    if (!(n = ymap_get(m, "source")))
        pol_err(v->d, m, path, "missing key 'source', expected {file: PATH} or {env: NAME}");
    else
        read_source(v, n, sub, &s->src_kind, &s->src);
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
    const ynode *l = read_list(v, ymap_get(m, "grants"), sub);
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

/* ---- top level ------------------------------------------------------- */

/* First pass over a section: the names, so references may point forward. */
static named *collect_names(vctx *v, const ynode *l, const char *section, const char *key,
                            const char **names, size_t *n_named)
{
    named *items = malloc((l->n + 1) * sizeof *items);
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
        names[i] = read_id(v, n, sub, V_NAME_MAX);
        if (names[i])
            items[(*n_named)++] = (named){names[i], n, i};
    }
    return items;
}

static const ynode *section(vctx *v, const ynode *root, const char *key)
{
    const ynode *n = ymap_get(root, key);
    if (!n)
        return NULL;
    return read_list(v, n, key);
}

static void names_pass(vctx *v, const ynode *l, const char *sec, const char *key, const char *what,
                       const char ***names, pol_index *ix)
{
    if (!l)
        return;
    *names = pol_alloc(v->a, (l->n + 1) * sizeof **names);
    size_t n;
    named *items = collect_names(v, l, sec, key, *names, &n);
    char fmt[YPATH_MAX];
    snprintf(fmt, sizeof fmt, "%s[%%zu].%s", sec, key);
    build_name_index(v, ix, items, n);   /* before check_unique re-sorts */
    check_unique(v, items, n, what, fmt);
    free(items);
}

static void build_identity_indexes(vctx *v, named *keys, size_t nk, named *mtls, size_t nm)
{
    /* The same key or identity on two tenants would make authentication
     * ambiguous: an error, reported at the second occurrence. */
    build_name_index(v, &v->p->by_key, keys, nk);
    check_unique(v, keys, nk, "API key hash", "tenants[%zu].api_keys");
    build_name_index(v, &v->p->by_mtls, mtls, nm);
    check_unique(v, mtls, nm, "mTLS identity", "tenants[%zu].mtls");
}

static void read_tenants(vctx *v, const ynode *l)
{
    size_t total_keys = 0, total_mtls = 0;
    for (size_t i = 0; i < l->n; i++) {
        const ynode *k = ymap_get(l->kids[i], "api_keys"), *m = ymap_get(l->kids[i], "mtls");
        total_keys += k && k->kind == YN_SEQ ? k->n : 0;
        total_mtls += m && m->kind == YN_SEQ ? m->n : 0;
    }
    named *keys = malloc((total_keys + 1) * sizeof *keys);
    named *mtls = malloc((total_mtls + 1) * sizeof *mtls);
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

static void warn_unused_templates(vctx *v, const ynode *tl, const ynode *nl)
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

int pol_build(policy *p, pol_diag *d, const ynode *root)
{
    vctx v = {.p = p, .d = d, .a = &p->arena};
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
    read_defaults(&v, ymap_get(root, "defaults"));

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
            read_template(&v, tl->kids[i], i, &p->templates[i]);
    }
    if (nl)
        read_tenants(&v, nl);
    if (sl) {
        for (size_t i = 0; i < sl->n; i++) {
            p->secrets[i].name = snames[i];
            if (sl->kids[i]->kind == YN_MAP)
                read_secret(&v, sl->kids[i], i, &p->secrets[i]);
        }
    }
    if (!nl || !nl->n)
        pol_warn(d, root, "tenants", "no tenants: every request will be refused");
    if (tl && nl)
        warn_unused_templates(&v, tl, nl);
    return d->n_errs ? -1 : 0;
}
