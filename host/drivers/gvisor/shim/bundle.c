/* bundle.c — one gvisor sandbox's directory and OCI bundle.
 *
 * Owns the layout under <state_dir>/<name>/ (all made by the shim, removed
 * by the host once the sandbox's cgroups are empty):
 *   root/             runsc --root: this sandbox's runsc state alone, so a
 *                     create killed midway never leaves a lock another
 *                     sandbox trips on, and cleanup is "remove the dir";
 *   bundle/config.json, bundle/rootfs/  an empty root (mount points, stub
 *                     /etc files, the template's symlinks) that gVisor
 *                     mounts read-only, the template's binds on top;
 *   view/workspace    the workspace tmpfs (mounted in the shim's private
 *                     mount namespace: nothing of it shows on the host's
 *                     tree), bound rw at /workspace inside; the shim later
 *                     chroots into view/ so the host's files.c finds it at
 *                     /proc/<shim>/root/workspace.
 * What runsc does with the bundle is runsc.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

static int failf(char *err, size_t errlen, const char *what, const char *path)
{
    snprintf(err, errlen, "%s(%s): %s", what, path, strerror(errno));
    return -1;
}

int shim_bundle_paths(const shim_config *c, shim_paths *p, char *err, size_t errlen)
{
    if (strlen(c->state_dir) + SHIM_NAME_LEN + 2 >= sizeof p->dir) {
        snprintf(err, errlen, "state dir path too long");
        return -1;
    }
    snprintf(p->dir, sizeof p->dir, "%s/%s", c->state_dir, c->name);
    snprintf(p->root, sizeof p->root, "%s/root", p->dir);
    snprintf(p->bundle, sizeof p->bundle, "%s/bundle", p->dir);
    snprintf(p->rootfs, sizeof p->rootfs, "%s/rootfs", p->bundle);
    snprintf(p->view, sizeof p->view, "%s/view", p->dir);
    snprintf(p->workspace, sizeof p->workspace, "%s/workspace", p->view);
    return 0;
}

/* mkdir -p below base (base itself exists); rel is absolute inside. */
static int mkdirs_in(const char *base, const char *rel, char *err, size_t errlen)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s%s", base, rel) >= (int)sizeof path) {
        snprintf(err, errlen, "path too long: %s", rel);
        return -1;
    }
    for (char *s = path + strlen(base) + 1; ; s++) {
        if (*s == '/' || *s == 0) {
            char was = *s;
            *s = 0;
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return failf(err, errlen, "mkdir", path);
            *s = was;
            if (!was)
                break;
        }
    }
    return 0;
}

static int write_file(const char *dir, const char *name, const char *text, char *err,
                      size_t errlen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return failf(err, errlen, "open", path);
    size_t n = strlen(text);
    ssize_t w = write(fd, text, n);
    if (close(fd) != 0 || w != (ssize_t)n)
        return failf(err, errlen, "write", path);
    return 0;
}

/* A mount point for the bind of host path src: a directory or an empty
 * file, as src is. */
static int mount_point(const char *rootfs, const char *src, char *err, size_t errlen)
{
    struct stat st;
    if (stat(src, &st) != 0)
        return failf(err, errlen, "stat (a template ro_bind)", src);
    if (S_ISDIR(st.st_mode))
        return mkdirs_in(rootfs, src, err, errlen);
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", src);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        if (mkdirs_in(rootfs, parent, err, errlen) != 0)
            return -1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s%s", rootfs, src);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return failf(err, errlen, "open", path);
    close(fd);
    return 0;
}

static bool binds_etc(const shim_config *c)
{
    for (size_t i = 0; i < c->n_ro_binds; i++)
        if (strcmp(c->ro_binds[i], "/etc") == 0)
            return true;
    return false;
}

static int rootfs(const shim_config *c, const shim_paths *p, char *err, size_t errlen)
{
    if (mkdir(p->rootfs, 0755) != 0)
        return failf(err, errlen, "mkdir", p->rootfs);
    static const char *const dirs[] = {"/proc", "/tmp", "/workspace", "/dev", SHIM_AGENT_MNT,
                                       SHIM_RUNTIME_MNT};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (mkdirs_in(p->rootfs, dirs[i], err, errlen) != 0)
            return -1;
    for (size_t i = 0; i < c->n_ro_binds; i++)
        if (mount_point(p->rootfs, c->ro_binds[i], err, errlen) != 0)
            return -1;
    for (size_t i = 0; i < c->n_symlinks; i++) {
        /* "usr/bin:/bin": the link /bin pointing at usr/bin */
        const char *colon = strchr(c->symlinks[i], ':');
        char target[512], link[1024];
        if (!colon || colon[1] != '/' || (size_t)(colon - c->symlinks[i]) >= sizeof target) {
            snprintf(err, errlen, "symlink %s: expected target:/link", c->symlinks[i]);
            return -1;
        }
        snprintf(target, sizeof target, "%.*s", (int)(colon - c->symlinks[i]), c->symlinks[i]);
        snprintf(link, sizeof link, "%s%s", p->rootfs, colon + 1);
        if (symlink(target, link) != 0 && errno != EEXIST)
            return failf(err, errlen, "symlink", link);
    }
    if (binds_etc(c))
        return 0;
    char etc[700], text[512];
    snprintf(etc, sizeof etc, "%s/etc", p->rootfs);
    if (mkdir(etc, 0755) != 0 && errno != EEXIST)
        return failf(err, errlen, "mkdir", etc);
    /* Just enough for getpwuid(), `id` and resolving localhost (as the
     * process driver's contain/mnt.c writes them). */
    snprintf(text, sizeof text,
             "root:x:0:0:root:/root:/usr/sbin/nologin\n"
             "sandbox:x:%u:%u:sandbox:/workspace:/bin/sh\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             (unsigned)c->uid, (unsigned)c->uid);
    if (write_file(etc, "passwd", text, err, errlen) != 0)
        return -1;
    snprintf(text, sizeof text, "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n", (unsigned)c->uid);
    if (write_file(etc, "group", text, err, errlen) != 0)
        return -1;
    return write_file(etc, "hosts", "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n",
                      err, errlen);
}

/* ---- config.json ---- */

typedef struct sbuf {
    char *b;
    size_t n, cap;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *s, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(s->b + s->n, s->cap - s->n, fmt, ap);
        va_end(ap);
        if (k >= 0 && (size_t)k < s->cap - s->n) {
            s->n += (size_t)k;
            return;
        }
        s->cap = s->cap * 2 + (size_t)(k > 0 ? k : 0);
        s->b = realloc(s->b, s->cap);
    }
}

static void str(sbuf *s, const char *v)
{
    shim_json_quote(&s->b, &s->n, &s->cap, v, strlen(v));
}

static void bind(sbuf *s, const char *dst, const char *src, bool rw)
{
    put(s, ",{\"destination\":");
    str(s, dst);
    put(s, ",\"type\":\"bind\",\"source\":");
    str(s, src);
    put(s, ",\"options\":[\"rbind\",\"%s\",\"nosuid\",\"nodev\"]}", rw ? "rw" : "ro");
}

#define SPLIT_CAPS "[\"CAP_SETUID\",\"CAP_SETGID\",\"CAP_KILL\"]"

char *shim_bundle_config_json(const shim_config *c, const shim_paths *p)
{
    sbuf s = {.b = malloc(4096), .cap = 4096};
    s.b[0] = 0;
    /* The agent is root inside gVisor (the Sentry's credentials, nothing
     * of the host's) with only CAP_SETUID/SETGID/KILL, and starts every
     * context and exec as the sandbox's uid (--child-uid), so no code of
     * the sandbox can signal, stop or trace pid 1: this runsc delivers
     * SIGKILL/SIGSTOP to pid 1 from inside, and a dead or frozen agent is
     * a hung Sentry (issue 14). */
    put(&s, "{\"ociVersion\":\"1.0.2\",\"process\":{\"terminal\":false,"
            "\"user\":{\"uid\":0,\"gid\":0},\"args\":[");
    str(&s, c->python);
    put(&s, ",\"-I\",\"" SHIM_AGENT_MNT "/agent.py\",\"--runtime\",\"" SHIM_RUNTIME_MNT "\","
            "\"--child-uid\",\"%u\",\"--child-gid\",\"%u\"",
        (unsigned)c->uid, (unsigned)c->uid);
    if (c->preload && *c->preload) {
        put(&s, ",\"--preload\",");
        str(&s, c->preload);
    }
    /* The agent's own environment; each context gets the owner's with
     * ACTIVATE. */
    put(&s, "],\"env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\",\"LANG=C.UTF-8\","
            "\"HOME=/workspace\",\"TMPDIR=/tmp\",\"MPLBACKEND=Agg\"],"
            "\"cwd\":\"/workspace\","
            /* the agent's three; its children drop them with setresuid */
            "\"capabilities\":{\"bounding\":" SPLIT_CAPS ",\"effective\":" SPLIT_CAPS ","
            "\"inheritable\":[],\"permitted\":" SPLIT_CAPS ",\"ambient\":[]},"
            "\"noNewPrivileges\":true,\"rlimits\":["
            "{\"type\":\"RLIMIT_NOFILE\",\"hard\":%llu,\"soft\":%llu},"
            "{\"type\":\"RLIMIT_NPROC\",\"hard\":%llu,\"soft\":%llu},"
            "{\"type\":\"RLIMIT_FSIZE\",\"hard\":%llu,\"soft\":%llu},"
            "{\"type\":\"RLIMIT_AS\",\"hard\":%llu,\"soft\":%llu},"
            "{\"type\":\"RLIMIT_CORE\",\"hard\":0,\"soft\":0}]},",
        (unsigned long long)c->nofile, (unsigned long long)c->nofile,
        (unsigned long long)c->nproc, (unsigned long long)c->nproc,
        (unsigned long long)c->fsize, (unsigned long long)c->fsize,
        (unsigned long long)c->as_bytes, (unsigned long long)c->as_bytes);
    put(&s, "\"root\":{\"path\":");
    str(&s, p->rootfs);
    put(&s, ",\"readonly\":true},\"hostname\":\"sandbox\",\"mounts\":["
            "{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\","
            "\"options\":[\"nosuid\",\"noexec\",\"nodev\"]},"
            "{\"destination\":\"/tmp\",\"type\":\"tmpfs\",\"source\":\"tmpfs\","
            "\"options\":[\"nosuid\",\"nodev\",\"mode=1777\",\"size=%llu\"]}",
        (unsigned long long)c->tmp_bytes);
    bind(&s, "/workspace", p->workspace, true);
    for (size_t i = 0; i < c->n_ro_binds; i++)
        bind(&s, c->ro_binds[i], c->ro_binds[i], false);
    bind(&s, SHIM_AGENT_MNT, c->agent_dir, false);
    bind(&s, SHIM_RUNTIME_MNT, c->runtime_dir, false);
    /* No cgroupsPath and no resources: runsc makes no cgroup of its own
     * (also --ignore-cgroups, runsc.c); the shim runs in the sandbox's
     * host-made groups, which runsc, the gofer and the Sentry inherit. */
    put(&s, "],\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"ipc\"},"
            "{\"type\":\"uts\"},{\"type\":\"mount\"},{\"type\":\"network\"}]}}");
    return s.b;
}

int shim_bundle_create(const shim_config *c, const shim_paths *p, char *err, size_t errlen)
{
    if (mkdir(c->state_dir, 0700) != 0 && errno != EEXIST)
        return failf(err, errlen, "mkdir", c->state_dir);
    /* EEXIST: a leftover of the same name (names are random: a bug or a
     * replay); never build on top of it. */
    if (mkdir(p->dir, 0700) != 0)
        return failf(err, errlen, "mkdir", p->dir);
    if (mkdir(p->root, 0700) != 0 || mkdir(p->bundle, 0755) != 0 || mkdir(p->view, 0755) != 0 ||
        mkdir(p->workspace, 0755) != 0)
        return failf(err, errlen, "mkdir", p->dir);
    char opts[160];
    /* 0755: the agent (root inside, no CAP_DAC_*) must enter it to start
     * children there; only the sandbox's uid writes. Nothing outside the
     * shim's mount namespace sees this mount. */
    snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=0755,uid=%u,gid=%u",
             (unsigned long long)c->workspace_bytes,
             (unsigned long long)(c->workspace_bytes / 4096 + 64), (unsigned)c->uid,
             (unsigned)c->uid);
    if (mount("tmpfs", p->workspace, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return failf(err, errlen, "mount tmpfs", p->workspace);
    if (rootfs(c, p, err, errlen) != 0)
        return -1;
    char *json = shim_bundle_config_json(c, p);
    int rc = write_file(p->bundle, "config.json", json, err, errlen);
    free(json);
    return rc;
}
