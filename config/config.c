/* config.c — the daemons' own configuration files (gateway and host), read
 * with the same tree and diagnostics as the policy: every error is
 * "file:line:col: key.path: message", unknown keys are errors, and all
 * errors are reported. Relative paths are resolved against the config
 * file's directory. Owns config.h; leaves the policy file to policy/. The
 * YAML tree and its diagnostics are policy/tree.h's, so both read alike. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "policy/tree.h"
#include "policy/lint.h"

typedef struct cctx {
    pol_diag d;
    pol_arena a;     /* the tree; values are strdup'd out of it */
    char *dir;       /* malloc'd: directory of the file, for relative paths */
} cctx;

static char *dupstr(const char *s)
{
    return s ? strdup(s) : NULL;
}

static char *resolve(cctx *c, const char *s)
{
    if (!s || s[0] == '/' || strcmp(s, "-") == 0)
        return dupstr(s);
    char *out = NULL;
    if (asprintf(&out, "%s/%s", c->dir, s) < 0)
        return NULL;
    return out;
}

static int open_tree(cctx *c, const char *path, policy_errors *errs, const ynode **root)
{
    memset(c, 0, sizeof *c);
    c->d = (pol_diag){.file = path, .errs = errs};
    char *buf;
    size_t len;
    sg_err err;
    if (policy_read_file(path, &buf, &len, &err) < 0) {
        if (errs)
            pol_errors_push(errs, strdup(err.msg));
        return SG_EINVAL;
    }
    *root = pol_parse(&c->a, &c->d, buf, len);
    free(buf);
    const char *slash = strrchr(path, '/');
    if (slash && path[0] == '/')
        c->dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    else {
        char *cwd = getcwd(NULL, 0);
        if (slash && asprintf(&c->dir, "%s/%.*s", cwd ? cwd : ".", (int)(slash - path), path) < 0)
            c->dir = NULL;
        else if (!slash)
            c->dir = dupstr(cwd ? cwd : ".");
        free(cwd);
    }
    if (!c->d.n_errs && !*root)
        pol_err_plain(&c->d, "empty file, expected a mapping");
    else if (*root && y_is(&c->d, *root, "", YN_MAP) < 0)
        *root = NULL;
    return c->d.n_errs ? SG_EINVAL : 0;
}

static int close_tree(cctx *c)
{
    pol_arena_cleanup(&c->a);
    free(c->dir);
    return c->d.n_errs ? SG_EINVAL : 0;
}

/* "host:port" or "[v6]:port" with a port 1..65535 */
static void check_addr(cctx *c, const ynode *n, const char *path, const char *s)
{
    const char *colon = strrchr(s, ':');
    const char *host_end = colon;
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb || rb + 1 != colon)
            colon = NULL;
    }
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || host_end == s || !colon[1] || *end || port < 1 || port > 65535)
        pol_err(&c->d, n, path, "bad address '%s', expected host:port with a port from 1 to 65535", s);
}

static char *req_str(cctx *c, const ynode *m, const char *path, const char *key)
{
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, key);
    const ynode *n = ymap_get(m, key);
    const char *s;
    if (!n) {
        pol_err(&c->d, m, path, "missing key '%s'", key);
        return NULL;
    }
    return y_str(&c->d, n, sub, &s) == 0 ? strdup(s) : NULL;
}

static char *opt_str(cctx *c, const ynode *m, const char *path, const char *key, const char *def)
{
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, key);
    const ynode *n = ymap_get(m, key);
    const char *s;
    if (!n)
        return dupstr(def);
    return y_str(&c->d, n, sub, &s) == 0 ? strdup(s) : NULL;
}

/* Key `key` of mapping m at `path` ("" at the top), if present, into *out. */
static void opt_u32(cctx *c, const ynode *m, const char *path, const char *key, uint32_t lo,
                    uint32_t hi, uint32_t *out)
{
    const ynode *n = ymap_get(m, key);
    char sub[YPATH_MAX];
    uint32_t v;
    if (!n)
        return;
    ypath_key(sub, sizeof sub, path, key);
    if (y_u32(&c->d, n, sub, hi, &v) < 0)
        return;
    if (v < lo) {
        pol_err(&c->d, n, sub, "%u is out of range, expected at least %u", v, lo);
        return;
    }
    *out = v;
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 16 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789") == n;
}

/* ---- gateway ------------------------------------------------------------- */

static void gw_tls(cctx *c, const ynode *m, config_gateway *g)
{
    if (y_is(&c->d, m, "tls", YN_MAP) < 0)
        return;
    static const char *const keys[] = {"cert", "key", "client_ca", NULL};
    ymap_check(&c->d, m, "tls", keys);
    char *cert = req_str(c, m, "tls", "cert"), *key = req_str(c, m, "tls", "key");
    char *ca = opt_str(c, m, "tls", "client_ca", NULL);
    g->tls_cert = resolve(c, cert);
    g->tls_key = resolve(c, key);
    g->tls_client_ca = resolve(c, ca);
    free(cert);
    free(key);
    free(ca);
}

static void gw_hosts(cctx *c, const ynode *l, config_gateway *g)
{
    if (y_is(&c->d, l, "hosts", YN_SEQ) < 0)
        return;
    g->hosts = calloc(l->n + 1, sizeof *g->hosts);
    static const char *const keys[] = {"name", "address", NULL};
    for (size_t i = 0; i < l->n; i++) {
        char path[YPATH_MAX], sub[YPATH_MAX];
        ypath_idx(path, sizeof path, "hosts", i);
        const ynode *m = l->kids[i];
        if (y_is(&c->d, m, path, YN_MAP) < 0)
            continue;
        ymap_check(&c->d, m, path, keys);
        config_host_ref *h = &g->hosts[g->n_hosts++];
        h->name = req_str(c, m, path, "name");
        h->address = req_str(c, m, path, "address");
        ypath_key(sub, sizeof sub, path, "name");
        if (h->name && !name_ok(h->name))
            pol_err(&c->d, ymap_get(m, "name"), sub, "bad host name '%s', expected [a-z0-9]{1,16}", h->name);
        for (size_t k = 0; h->name && k + 1 < g->n_hosts; k++)
            if (g->hosts[k].name && strcmp(g->hosts[k].name, h->name) == 0)
                pol_err(&c->d, ymap_get(m, "name"), sub, "duplicate host name '%s'", h->name);
        ypath_key(sub, sizeof sub, path, "address");
        if (h->address)
            check_addr(c, ymap_get(m, "address"), sub, h->address);
    }
    if (!l->n)
        pol_err(&c->d, l, "hosts", "expected at least one host");
}

static void parse_registry(cctx *c, const ynode *m, config_registry *r, int is_host);
static void registry_cleanup(config_registry *r);

int config_gateway_load(const char *path, config_gateway *out, policy_errors *errs)
{
    memset(out, 0, sizeof *out);
    cctx c;
    const ynode *root = NULL;
    if (open_tree(&c, path, errs, &root) < 0 || !root) {
        close_tree(&c);
        return SG_EINVAL;
    }
    static const char *const keys[] = {"listen", "policy", "audit_log", "threads", "tls", "hosts",
                                       "metrics_listen", "registry", "api_keys_file", NULL};
    ymap_check(&c.d, root, "", keys);
    out->listen = req_str(&c, root, "", "listen");
    if (out->listen)
        check_addr(&c, ymap_get(root, "listen"), "listen", out->listen);
    out->metrics_listen = opt_str(&c, root, "", "metrics_listen", NULL);
    if (out->metrics_listen)
        check_addr(&c, ymap_get(root, "metrics_listen"), "metrics_listen", out->metrics_listen);
    char *pol = req_str(&c, root, "", "policy");
    out->policy_path = resolve(&c, pol);
    free(pol);
    char *kf = opt_str(&c, root, "", "api_keys_file", NULL);
    out->api_keys_path = resolve(&c, kf);
    free(kf);
    char *audit = opt_str(&c, root, "", "audit_log", NULL);
    out->audit_log = resolve(&c, audit);
    free(audit);
    uint32_t threads = 1;
    opt_u32(&c, root, "", "threads", 1, 256, &threads);
    out->threads = (int)threads;
    if (ymap_get(root, "tls"))
        gw_tls(&c, ymap_get(root, "tls"), out);
    if (ymap_get(root, "registry"))
        parse_registry(&c, ymap_get(root, "registry"), &out->registry, 0);
    if (ymap_get(root, "registry") && ymap_get(root, "hosts"))
        pol_err(&c.d, ymap_get(root, "hosts"), "hosts",
                "a static host list and a registry exclude each other; keep one");
    else if (ymap_get(root, "hosts"))
        gw_hosts(&c, ymap_get(root, "hosts"), out);
    else if (!ymap_get(root, "registry"))
        pol_err(&c.d, root, "", "missing key 'hosts' (or 'registry')");
    int r = close_tree(&c);
    if (r < 0)
        config_gateway_cleanup(out);
    return r;
}

void config_gateway_cleanup(config_gateway *g)
{
    registry_cleanup(&g->registry);
    free(g->api_keys_path);
    free(g->listen);
    free(g->metrics_listen);
    free(g->policy_path);
    free(g->audit_log);
    free(g->tls_cert);
    free(g->tls_key);
    free(g->tls_client_ca);
    for (size_t i = 0; i < g->n_hosts; i++) {
        free(g->hosts[i].name);
        free(g->hosts[i].address);
    }
    free(g->hosts);
    memset(g, 0, sizeof *g);
}

/* ---- host ------------------------------------------------------------------ */

/* A list of strings, each checked by ok() (NULL = any). */
static char **str_list(cctx *c, const ynode *m, const char *path, const char *key, size_t *n,
                       const char *(*ok)(const char *))
{
    char lp[YPATH_MAX];
    ypath_key(lp, sizeof lp, path, key);
    const ynode *l = ymap_get(m, key);
    *n = 0;
    if (!l || y_is(&c->d, l, lp, YN_SEQ) < 0)
        return NULL;
    char **out = calloc(l->n + 1, sizeof *out);
    for (size_t i = 0; i < l->n; i++) {
        char sub[YPATH_MAX];
        const char *s, *why;
        ypath_idx(sub, sizeof sub, lp, i);
        if (y_str(&c->d, l->kids[i], sub, &s) < 0)
            continue;
        if (ok && (why = ok(s))) {
            pol_err(&c->d, l->kids[i], sub, "'%s': %s", s, why);
            continue;
        }
        out[(*n)++] = strdup(s);
    }
    return out;
}

static const char *abs_path_ok(const char *s)
{
    return s[0] == '/' ? NULL : "expected an absolute path";
}

static const char *module_ok(const char *s)
{
    size_t n = strlen(s);
    return n && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") == n
               ? NULL : "expected a Python module name";
}

/* "target:link" — both relative to the new root, as in "usr/bin:/bin" */
static const char *symlink_ok(const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon || colon == s || !colon[1] || strchr(colon + 1, ':'))
        return "expected TARGET:LINK, as in usr/bin:/bin";
    return colon[1] == '/' ? NULL : "the link (after ':') must be an absolute path";
}

static void host_template(cctx *c, const ynode *m, const char *path, config_template *t)
{
    static const char *const keys[] = {"name",    "python",       "preload",
                                       "ro_binds", "symlinks",    "contain",
                                       "pool",    "rotate_forks", "rotate_after",
                                       "isolation", NULL};
    ymap_check(&c->d, m, path, keys);
    char sub[YPATH_MAX];
    t->name = req_str(c, m, path, "name");
    t->python = req_str(c, m, path, "python");
    ypath_key(sub, sizeof sub, path, "python");
    if (t->python && t->python[0] != '/')
        pol_err(&c->d, ymap_get(m, "python"), sub, "'%s': expected an absolute path", t->python);
    t->preload = str_list(c, m, path, "preload", &t->n_preload, module_ok);
    t->ro_binds = str_list(c, m, path, "ro_binds", &t->n_ro_binds, abs_path_ok);
    t->symlinks = str_list(c, m, path, "symlinks", &t->n_symlinks, symlink_ok);
    t->contain = 1;
    ypath_key(sub, sizeof sub, path, "contain");
    if (ymap_get(m, "contain"))
        y_bool(&c->d, ymap_get(m, "contain"), sub, &t->contain);
    uint32_t pool = CONFIG_POOL_DEFAULT;
    opt_u32(c, m, path, "pool", 0, CONFIG_POOL_MAX, &pool);
    t->pool = (int)pool;
    t->rotate_forks = CONFIG_ROTATE_FORKS_DEFAULT;
    opt_u32(c, m, path, "rotate_forks", 0, CONFIG_ROTATE_FORKS_MAX, &t->rotate_forks);
    t->rotate_after = CONFIG_ROTATE_AFTER_DEFAULT;
    ypath_key(sub, sizeof sub, path, "rotate_after");
    if (ymap_get(m, "rotate_after"))
        y_duration(&c->d, ymap_get(m, "rotate_after"), sub, &t->rotate_after);
    t->isolation = SG_ISOLATION_PROCESS;
    const ynode *iso = ymap_get(m, "isolation");
    const char *s;
    ypath_key(sub, sizeof sub, path, "isolation");
    if (iso && y_str(&c->d, iso, sub, &s) == 0 && sg_isolation_parse(s, &t->isolation) < 0)
        pol_err(&c->d, iso, sub, "template '%s': unknown isolation '%s', expected " SG_ISOLATION_EXPECTED,
                t->name ? t->name : "?", s);
}

/* A runsc global flag an operator may add: --name or --name=value, and not
 * one sandgate sets itself (a second --network or --root would override
 * the driver's and weaken or break isolation) or a test-only flag. */
static const char *runsc_flag_ok(const char *s)
{
    static const char *const owned[] = {"root", "platform", "network", "host-uds", NULL};
    if (strncmp(s, "--", 2) != 0 || !s[2] || s[2] == '-' || s[2] == '=')
        return "expected --name or --name=value";
    const char *name = s + 2;
    size_t n = strcspn(name, "=");
    if (strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") < n)
        return "expected --name or --name=value";
    if (strncmp(name, "TESTONLY", 8) == 0)
        return "test-only runsc flags are refused";
    for (size_t i = 0; owned[i]; i++)
        if (strlen(owned[i]) == n && strncmp(name, owned[i], n) == 0)
            return "set by sandgate itself (use gvisor.root / gvisor.platform); refused";
    return NULL;
}

/* gvisor: {runsc, platform, flags, root} — how the gvisor driver runs runsc. */
static void host_gvisor(cctx *c, const ynode *m, config_gvisor *g)
{
    static const char *const keys[] = {"runsc", "platform", "flags", "root", NULL};
    if (y_is(&c->d, m, "gvisor", YN_MAP) < 0)
        return;
    ymap_check(&c->d, m, "gvisor", keys);
    free(g->runsc);
    g->runsc = opt_str(c, m, "gvisor", "runsc", CONFIG_RUNSC_DEFAULT);
    if (g->runsc && g->runsc[0] != '/')
        pol_err(&c->d, ymap_get(m, "runsc"), "gvisor.runsc", "'%s': expected an absolute path", g->runsc);
    free(g->platform);
    g->platform = opt_str(c, m, "gvisor", "platform", CONFIG_RUNSC_PLATFORM_DEFAULT);
    if (g->platform && strcmp(g->platform, "ptrace") != 0 && strcmp(g->platform, "systrap") != 0 &&
        strcmp(g->platform, "kvm") != 0)
        pol_err(&c->d, ymap_get(m, "platform"), "gvisor.platform",
                "unknown platform '%s', expected ptrace, systrap or kvm", g->platform);
    g->flags = str_list(c, m, "gvisor", "flags", &g->n_flags, runsc_flag_ok);
    g->root = opt_str(c, m, "gvisor", "root", NULL);
    if (g->root && g->root[0] != '/')
        pol_err(&c->d, ymap_get(m, "root"), "gvisor.root", "'%s': expected an absolute path", g->root);
}

/* reserve: {fds, memory, pids} — what admission control keeps free. */
static void host_reserve(cctx *c, const ynode *m, config_host *h)
{
    static const char *const keys[] = {"fds", "memory", "pids", NULL};
    if (y_is(&c->d, m, "reserve", YN_MAP) < 0)
        return;
    ymap_check(&c->d, m, "reserve", keys);
    opt_u32(c, m, "reserve", "fds", 0, 1u << 20, &h->reserve_fds);
    opt_u32(c, m, "reserve", "pids", 0, 1u << 22, &h->reserve_pids);
    const ynode *n = ymap_get(m, "memory");
    uint64_t v;
    if (n && y_size(&c->d, n, "reserve.memory", &v) == 0)
        h->reserve_memory = v;
}

static const char *endpoint_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == s || !colon[1] || *end || port < 1 || port > 65535 ||
        strstr(s, "://"))
        return "expected host:port (no scheme) with a port from 1 to 65535";
    return NULL;
}

/* registry.tls: the files are read (and checked) when the client is made. */
static void parse_registry_tls(cctx *c, const ynode *m, config_registry *r)
{
    if (y_is(&c->d, m, "registry.tls", YN_MAP) < 0)
        return;
    static const char *const keys[] = {"ca", "cert", "key", "server_name", NULL};
    ymap_check(&c->d, m, "registry.tls", keys);
    char *ca = req_str(c, m, "registry.tls", "ca");
    char *cert = opt_str(c, m, "registry.tls", "cert", NULL);
    char *key = opt_str(c, m, "registry.tls", "key", NULL);
    r->tls_server_name = opt_str(c, m, "registry.tls", "server_name", NULL);
    if (!cert != !key)
        pol_err(&c->d, m, "registry.tls",
                "'cert' and 'key' go together (etcd's client-cert auth needs both); "
                "expected both or neither");
    if (r->tls_server_name && (!r->tls_server_name[0] || strlen(r->tls_server_name) > 253 ||
                               strpbrk(r->tls_server_name, " /\t")))
        pol_err(&c->d, ymap_get(m, "server_name"), "registry.tls.server_name",
                "'%s': expected a DNS name or IP address, at most 253 bytes",
                r->tls_server_name);
    r->tls_ca = resolve(c, ca);
    r->tls_cert = resolve(c, cert);
    r->tls_key = resolve(c, key);
    free(ca);
    free(cert);
    free(key);
}

static void parse_registry(cctx *c, const ynode *m, config_registry *r, int is_host)
{
    static const char *const host_keys[] = {"etcd", "prefix", "lease_ttl", "advertise", "tls",
                                            NULL};
    static const char *const gw_keys[] = {"etcd", "prefix", "lease_ttl", "tls", NULL};
    if (y_is(&c->d, m, "registry", YN_MAP) < 0)
        return;
    ymap_check(&c->d, m, "registry", is_host ? host_keys : gw_keys);
    r->endpoints = str_list(c, m, "registry", "etcd", &r->n_endpoints, endpoint_ok);
    const ynode *eps = ymap_get(m, "etcd");
    if (!eps)
        pol_err(&c->d, m, "registry", "missing key 'etcd', expected a list of endpoints");
    else if (eps->n == 0)
        pol_err(&c->d, eps, "registry.etcd", "expected at least one endpoint");
    r->prefix = opt_str(c, m, "registry", "prefix", "/sandgate/");
    if (r->prefix && (r->prefix[0] != '/' || r->prefix[strlen(r->prefix) - 1] != '/' ||
                      strlen(r->prefix) > 128))
        pol_err(&c->d, ymap_get(m, "prefix"), "registry.prefix",
                "'%s': expected a path that starts and ends with '/', at most 128 bytes",
                r->prefix);
    r->lease_ttl = CONFIG_LEASE_TTL_DEFAULT;
    opt_u32(c, m, "registry", "lease_ttl", 2, 60, &r->lease_ttl);
    if (is_host) {
        r->advertise = opt_str(c, m, "registry", "advertise", NULL);
        if (r->advertise)
            check_addr(c, ymap_get(m, "advertise"), "registry.advertise", r->advertise);
    }
    if (ymap_get(m, "tls"))
        parse_registry_tls(c, ymap_get(m, "tls"), r);
}

static void registry_cleanup(config_registry *r)
{
    for (size_t i = 0; i < r->n_endpoints; i++)
        free(r->endpoints[i]);
    free(r->endpoints);
    free(r->prefix);
    free(r->advertise);
    free(r->tls_ca);
    free(r->tls_cert);
    free(r->tls_key);
    free(r->tls_server_name);
    memset(r, 0, sizeof *r);
}

static void host_templates(cctx *c, const ynode *l, config_host *h)
{
    if (y_is(&c->d, l, "templates", YN_SEQ) < 0)
        return;
    h->templates = calloc(l->n + 1, sizeof *h->templates);
    for (size_t i = 0; i < l->n; i++) {
        char path[YPATH_MAX];
        ypath_idx(path, sizeof path, "templates", i);
        if (y_is(&c->d, l->kids[i], path, YN_MAP) < 0)
            continue;
        config_template *t = &h->templates[h->n_templates++];
        host_template(c, l->kids[i], path, t);
        for (size_t k = 0; t->name && k + 1 < h->n_templates; k++)
            if (h->templates[k].name && strcmp(h->templates[k].name, t->name) == 0) {
                char sub[YPATH_MAX];
                ypath_key(sub, sizeof sub, path, "name");
                pol_err(&c->d, ymap_get(l->kids[i], "name"), sub, "duplicate template '%s'", t->name);
            }
    }
}

int config_host_load(const char *path, config_host *out, policy_errors *errs)
{
    memset(out, 0, sizeof *out);
    cctx c;
    const ynode *root = NULL;
    if (open_tree(&c, path, errs, &root) < 0 || !root) {
        close_tree(&c);
        return SG_EINVAL;
    }
    static const char *const keys[] = {"listen", "name", "threads", "runtime_dir", "state_dir",
                                       "cgroup_root", "uid_base", "max_sandboxes", "reserve",
                                       "templates", "metrics_listen", "registry", "gvisor",
                                       NULL};
    ymap_check(&c.d, root, "", keys);
    out->listen = req_str(&c, root, "", "listen");
    if (out->listen)
        check_addr(&c, ymap_get(root, "listen"), "listen", out->listen);
    out->metrics_listen = opt_str(&c, root, "", "metrics_listen", NULL);
    if (out->metrics_listen)
        check_addr(&c, ymap_get(root, "metrics_listen"), "metrics_listen", out->metrics_listen);
    out->name = req_str(&c, root, "", "name");
    if (out->name && !name_ok(out->name))
        pol_err(&c.d, ymap_get(root, "name"), "name", "bad host name '%s', expected [a-z0-9]{1,16}", out->name);
    uint32_t threads = 1;
    opt_u32(&c, root, "", "threads", 1, 256, &threads);
    out->threads = (int)threads;
    out->runtime_dir = opt_str(&c, root, "", "runtime_dir", "/run/sandgate");
    out->cgroup_root = opt_str(&c, root, "", "cgroup_root", "/sys/fs/cgroup");
    if (out->runtime_dir && out->runtime_dir[0] != '/')
        pol_err(&c.d, ymap_get(root, "runtime_dir"), "runtime_dir", "expected an absolute path");
    out->state_dir = opt_str(&c, root, "", "state_dir", NULL);
    if (out->state_dir && out->state_dir[0] != '/')
        pol_err(&c.d, ymap_get(root, "state_dir"), "state_dir", "expected an absolute path");
    if (out->cgroup_root && out->cgroup_root[0] != '/')
        pol_err(&c.d, ymap_get(root, "cgroup_root"), "cgroup_root", "expected an absolute path");
    out->uid_base = 200000;
    opt_u32(&c, root, "", "uid_base", 1000, UINT32_MAX - 1000000, &out->uid_base);
    out->max_sandboxes = 1024;
    opt_u32(&c, root, "", "max_sandboxes", 1, 65536, &out->max_sandboxes);
    out->reserve_fds = CONFIG_RESERVE_FDS;
    out->reserve_memory = CONFIG_RESERVE_MEMORY;
    out->reserve_pids = CONFIG_RESERVE_PIDS;
    if (ymap_get(root, "reserve"))
        host_reserve(&c, ymap_get(root, "reserve"), out);
    if (ymap_get(root, "templates"))
        host_templates(&c, ymap_get(root, "templates"), out);
    if (ymap_get(root, "registry"))
        parse_registry(&c, ymap_get(root, "registry"), &out->registry, 1);
    out->gvisor.runsc = strdup(CONFIG_RUNSC_DEFAULT);
    out->gvisor.platform = strdup(CONFIG_RUNSC_PLATFORM_DEFAULT);
    if (ymap_get(root, "gvisor"))
        host_gvisor(&c, ymap_get(root, "gvisor"), &out->gvisor);
    int r = close_tree(&c);
    if (r < 0)
        config_host_cleanup(out);
    return r;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

void config_host_cleanup(config_host *h)
{
    registry_cleanup(&h->registry);
    free(h->listen);
    free(h->metrics_listen);
    free(h->name);
    free(h->runtime_dir);
    free(h->state_dir);
    free(h->cgroup_root);
    for (size_t i = 0; i < h->n_templates; i++) {
        config_template *t = &h->templates[i];
        free(t->name);
        free(t->python);
        free_list(t->preload, t->n_preload);
        free_list(t->ro_binds, t->n_ro_binds);
        free_list(t->symlinks, t->n_symlinks);
    }
    free(h->templates);
    free(h->gvisor.runsc);
    free(h->gvisor.platform);
    free_list(h->gvisor.flags, h->gvisor.n_flags);
    free(h->gvisor.root);
    memset(h, 0, sizeof *h);
}
