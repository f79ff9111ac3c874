/* spec.c — parsing the contain spec ("key=value" lines, see contain.h) into
 * an sgc_spec. Unknown keys, bad numbers and unsafe paths are errors that
 * name the line: the spec comes from the host daemon, but a typo must not
 * silently weaken a sandbox. Applying the spec is left to the step files. */
#include "host/contain/steps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An inside path must be absolute, not "/" and free of ".." components, so
 * joining it to newroot can never point outside the new root. */
static bool inside_path_ok(const char *p)
{
    if (p[0] != '/' || p[1] == '\0')
        return false;
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2) {
        bool starts = c[-1] == '/';
        bool ends = c[2] == '/' || c[2] == '\0';
        if (starts && ends)
            return false;
    }
    return true;
}

static int parse_u64(const char *v, uint64_t *out)
{
    if (*v < '0' || *v > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end)
        return -1;
    *out = n;
    return 0;
}

/* "a:b" -> pair; with b optional (then b = a) when `need_b` is false. */
static int split_pair(char *v, sgc_pair *p, bool need_b)
{
    char *colon = strchr(v, ':');
    if (!colon) {
        if (need_b)
            return -1;
        p->a = p->b = v;
        return 0;
    }
    *colon = '\0';
    p->a = v;
    p->b = colon + 1;
    return 0;
}

static int add_bind(sgc_spec *s, char *v)
{
    if (s->n_ro_bind >= SGC_MAX_BINDS)
        return -1;
    sgc_pair *p = &s->ro_bind[s->n_ro_bind];
    if (split_pair(v, p, false) || p->a[0] != '/' || !inside_path_ok(p->b))
        return -1;
    s->n_ro_bind++;
    return 0;
}

static int add_symlink(sgc_spec *s, char *v)
{
    if (s->n_symlink >= SGC_MAX_SYMLINKS)
        return -1;
    sgc_pair *p = &s->symlink[s->n_symlink];
    if (split_pair(v, p, true) || !p->a[0] || !inside_path_ok(p->b))
        return -1;
    s->n_symlink++;
    return 0;
}

static int add_fd(sgc_spec *s, const char *v)
{
    uint64_t n;
    if (s->n_fd_keep >= SGC_MAX_FDKEEP || parse_u64(v, &n) || n > 1u << 20)
        return -1;
    s->fd_keep[s->n_fd_keep++] = (int)n;
    return 0;
}

static int add_procs(sgc_spec *s, const char *v)
{
    if (s->n_cgroup_procs >= SGC_MAX_PROCS || v[0] != '/')
        return -1;
    s->cgroup_procs[s->n_cgroup_procs++] = v;
    return 0;
}

static int parse_id(const char *v, uint32_t *out)
{
    uint64_t n;
    if (parse_u64(v, &n) || n == 0 || n >= UINT32_MAX)
        return -1; /* 0 is root: the spec asks for an unprivileged id */
    *out = (uint32_t)n;
    return 0;
}

/* Numeric keys, by table so adding one is a one-line change. */
static uint64_t *num_field(sgc_spec *s, const char *k)
{
    static const struct { const char *key; size_t off; } tab[] = {
        {"workspace_bytes", offsetof(sgc_spec, workspace_bytes)},
        {"workspace_inodes", offsetof(sgc_spec, workspace_inodes)},
        {"tmp_bytes", offsetof(sgc_spec, tmp_bytes)},
        {"tmp_inodes", offsetof(sgc_spec, tmp_inodes)},
        {"shm_bytes", offsetof(sgc_spec, shm_bytes)},
        {"nofile", offsetof(sgc_spec, nofile)},
        {"fsize", offsetof(sgc_spec, fsize)},
        {"nproc", offsetof(sgc_spec, nproc)},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(tab[i].key, k) == 0)
            return (uint64_t *)((char *)s + tab[i].off);
    return NULL;
}

/* Returns 0, -1 for a bad value, -2 for an unknown key. */
static int apply_kv(sgc_spec *s, const char *k, char *v)
{
    uint64_t *num = num_field(s, k);
    if (num)
        return parse_u64(v, num);
    if (!strcmp(k, "id")) { s->id = v; return *v ? 0 : -1; }
    if (!strcmp(k, "uid")) return parse_id(v, &s->uid);
    if (!strcmp(k, "gid")) return parse_id(v, &s->gid);
    if (!strcmp(k, "hostname")) { s->hostname = v; return (*v && strlen(v) < 64) ? 0 : -1; }
    if (!strcmp(k, "newroot")) { s->newroot = v; return v[0] == '/' && v[1] ? 0 : -1; }
    if (!strcmp(k, "workspace")) { s->workspace = v; return inside_path_ok(v) ? 0 : -1; }
    if (!strcmp(k, "ro_bind")) return add_bind(s, v);
    if (!strcmp(k, "symlink")) return add_symlink(s, v);
    if (!strcmp(k, "cgroup_procs")) return add_procs(s, v);
    if (!strcmp(k, "fd_keep")) return add_fd(s, v);
    if (!strcmp(k, "seccomp")) {
        if (strcmp(v, "0") && strcmp(v, "1"))
            return -1;
        s->seccomp = v[0] == '1';
        return 0;
    }
    if (!strcmp(k, "net")) return strcmp(v, "none") ? -1 : 0;
    return -2;
}

static void set_defaults(sgc_spec *s)
{
    memset(s, 0, sizeof *s);
    s->hostname = "sandbox";
    s->workspace = "/workspace";
    s->workspace_bytes = 256ull << 20;
    s->workspace_inodes = 16384;
    s->tmp_bytes = 64ull << 20;
    s->tmp_inodes = 4096;
    s->shm_bytes = 16ull << 20;
    s->seccomp = true;
}

static int check_required(const sgc_spec *s, char *err, size_t len)
{
    if (!s->id)
        return sgc_failx(err, len, "spec: missing required key 'id'");
    if (!s->uid || !s->gid)
        return sgc_failx(err, len, "spec: missing required key '%s'", s->uid ? "gid" : "uid");
    if (!s->newroot)
        return sgc_failx(err, len, "spec: missing required key 'newroot'");
    return 0;
}

int sgc_spec_parse(sgc_spec *s, const char *text, char *err, size_t len)
{
    set_defaults(s);
    if (!text)
        return sgc_failx(err, len, "spec: NULL");
    size_t n = strlen(text);
    if (n >= sizeof s->buf)
        return sgc_failx(err, len, "spec: %zu bytes, expected at most %zu", n, sizeof s->buf - 1);
    memcpy(s->buf, text, n + 1);
    int lineno = 0;
    for (char *line = s->buf, *next; line; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!*line || *line == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq)
            return sgc_failx(err, len, "spec:%d: '%s', expected key=value", lineno, line);
        *eq = '\0';
        int rc = apply_kv(s, line, eq + 1);
        if (rc == -2)
            return sgc_failx(err, len, "spec:%d: unknown key '%s'", lineno, line);
        if (rc)
            return sgc_failx(err, len, "spec:%d: bad value '%s' for key '%s'", lineno, eq + 1, line);
    }
    return check_required(s, err, len);
}
