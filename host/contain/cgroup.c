/* cgroup.c — the sandbox's control groups, for the host daemon: detect v1 or
 * v2, create sandgate/<name> with memory, pids and CPU limits, kill every
 * process in it, tell when it is empty, remove it, and read OOM kills and
 * memory use. Joining the groups is sgc_unshare's (via cgroup_procs paths
 * this file hands out); the namespace is unshared there too.
 *
 * v1: one directory per controller, <root>/<ctrl>/sandgate/<name>, for
 *     memory and pids (required), cpu (when a CPU limit is asked or mounted)
 *     and freezer (used by kill when mounted).
 * v2: <base>/sandgate/<name>, where base is <root> when it is the unified
 *     hierarchy, or <root>/unified on a hybrid host whose memory controller
 *     lives there. */
#include "host/contain/contain.h"
#include "host/contain/steps.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PATH_SZ 512
#define V1_CTRLS 4
static const char *const v1_ctrls[V1_CTRLS] = {"memory", "pids", "cpu", "freezer"};

/* The groups of one sandbox: up to one directory per v1 controller. */
typedef struct {
    sgc_cgroup_kind kind;
    int n;
    char dir[V1_CTRLS][PATH_SZ];
    const char *ctrl[V1_CTRLS]; /* borrowed literals; NULL on v2 */
} groups;

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static bool controllers_have(const char *dir, const char *ctrl)
{
    char path[PATH_SZ], buf[512];
    snprintf(path, sizeof path, "%s/cgroup.controllers", dir);
    if (sgc_read_file(path, buf, sizeof buf) < 0)
        return false;
    size_t n = strlen(ctrl);
    for (char *p = buf; (p = strstr(p, ctrl)) != NULL; p += n)
        if ((p == buf || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || !p[n]))
            return true;
    return false;
}

/* v2 base directory into out, or false. */
static bool v2_base(const char *root, char *out, size_t size)
{
    char path[PATH_SZ];
    snprintf(path, sizeof path, "%s/cgroup.controllers", root);
    if (exists(path)) {
        snprintf(out, size, "%s", root);
        return true;
    }
    snprintf(path, sizeof path, "%s/unified", root);
    if (controllers_have(path, "memory")) {
        snprintf(out, size, "%s", path);
        return true;
    }
    return false;
}

/* v1 wins when its memory controller is mounted: on a hybrid host the
 * unified tree then has no memory controller to limit anything with. */
SGC_API sgc_cgroup_kind sgc_cgroup_detect(const char *root)
{
    char path[PATH_SZ];
    snprintf(path, sizeof path, "%s/memory/memory.limit_in_bytes", root);
    if (exists(path))
        return SGC_CGROUP_V1;
    return v2_base(root, path, sizeof path) ? SGC_CGROUP_V2 : SGC_CGROUP_NONE;
}

/* Names become path components: no '/', no "..", nothing odd. */
static int check_name(const char *name, char *err, size_t len)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > 128 || name[0] == '.')
        return sgc_failx(err, len, "cgroup name '%s': expected 1-128 of [A-Za-z0-9_.-]", name ? name : "");
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return sgc_failx(err, len, "cgroup name '%s': bad character '%c'", name, c);
    }
    return 0;
}

/* The group directories for name (whether or not they exist yet). */
static int resolve(const char *root, const char *name, groups *g, char *err, size_t len)
{
    memset(g, 0, sizeof *g);
    if (check_name(name, err, len))
        return -1;
    g->kind = sgc_cgroup_detect(root);
    if (g->kind == SGC_CGROUP_V2) {
        char base[PATH_SZ];
        v2_base(root, base, sizeof base);
        if (snprintf(g->dir[0], PATH_SZ, "%s/sandgate/%s", base, name) >= PATH_SZ)
            return sgc_failx(err, len, "cgroup path too long under %s", base);
        g->n = 1;
        return 0;
    }
    if (g->kind == SGC_CGROUP_NONE)
        return sgc_failx(err, len, "no cgroup hierarchy with a memory controller under %s", root);
    for (int i = 0; i < V1_CTRLS; i++) {
        char probe[PATH_SZ];
        snprintf(probe, sizeof probe, "%s/%s/cgroup.procs", root, v1_ctrls[i]);
        if (!exists(probe))
            continue;
        g->ctrl[g->n] = v1_ctrls[i];
        if (snprintf(g->dir[g->n++], PATH_SZ, "%s/%s/sandgate/%s", root, v1_ctrls[i], name) >= PATH_SZ)
            return sgc_failx(err, len, "cgroup path too long under %s", root);
    }
    return 0;
}

/* Index of a v1 controller's directory in g, or -1. */
static int find_ctrl(const groups *g, const char *ctrl)
{
    for (int i = 0; i < g->n; i++)
        if (g->ctrl[i] && !strcmp(g->ctrl[i], ctrl))
            return i;
    return -1;
}

static int knob(const char *dir, const char *file, const char *val, char *err, size_t len)
{
    char path[PATH_SZ + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return sgc_write_file(path, val, err, len);
}

static int knob_u64(const char *dir, const char *file, uint64_t v, char *err, size_t len)
{
    char val[32];
    snprintf(val, sizeof val, "%llu", (unsigned long long)v);
    return knob(dir, file, val, err, len);
}

static bool has_file(const char *dir, const char *file)
{
    char path[PATH_SZ + 64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return exists(path);
}

/* ---- limits ---- */

static int v1_limits(const groups *g, int i, const sgc_cgroup_limits *lim, char *err, size_t len)
{
    const char *c = g->ctrl[i], *d = g->dir[i];
    if (!strcmp(c, "memory")) {
        /* oom_kill_disable=0: the kernel OOM killer acts inside the group. */
        if (knob(d, "memory.oom_control", "0", err, len))
            return -1;
        if (!lim->memory_bytes)
            return 0;
        if (knob_u64(d, "memory.limit_in_bytes", lim->memory_bytes, err, len))
            return -1;
        /* memory+swap = memory: no swapping around the limit (when accounted). */
        if (has_file(d, "memory.memsw.limit_in_bytes"))
            return knob_u64(d, "memory.memsw.limit_in_bytes", lim->memory_bytes, err, len);
        return 0;
    }
    if (!strcmp(c, "pids") && lim->pids)
        return knob_u64(d, "pids.max", lim->pids, err, len);
    if (!strcmp(c, "cpu") && lim->cpu_millis) {
        if (knob(d, "cpu.cfs_period_us", "100000", err, len))
            return -1;
        return knob_u64(d, "cpu.cfs_quota_us", (uint64_t)lim->cpu_millis * 100, err, len);
    }
    return 0;
}

static int v2_limits(const char *d, const sgc_cgroup_limits *lim, char *err, size_t len)
{
    if (lim->memory_bytes) {
        if (knob_u64(d, "memory.max", lim->memory_bytes, err, len))
            return -1;
        if (has_file(d, "memory.swap.max") && knob(d, "memory.swap.max", "0", err, len))
            return -1;
    }
    if (lim->pids && knob_u64(d, "pids.max", lim->pids, err, len))
        return -1;
    if (lim->cpu_millis) {
        char val[48];
        snprintf(val, sizeof val, "%llu 100000", (unsigned long long)lim->cpu_millis * 100);
        return knob(d, "cpu.max", val, err, len);
    }
    return 0;
}

/* ---- create ---- */

static int mkdir_group(const char *dir, char *err, size_t len)
{
    char parent[PATH_SZ];
    snprintf(parent, sizeof parent, "%s", dir);
    *strrchr(parent, '/') = '\0';
    if (mkdir(parent, 0755) != 0 && errno != EEXIST)
        return sgc_fail(err, len, "mkdir(\"%s\")", parent);
    if (mkdir(dir, 0755) != 0)
        return sgc_fail(err, len, "mkdir(\"%s\")", dir); /* EEXIST too: a stale group may hold processes */
    return 0;
}

/* v2: a child group only gets the controllers its parent delegates. */
static int v2_enable(const char *base, const sgc_cgroup_limits *lim, char *err, size_t len)
{
    static const char *const want[] = {"memory", "pids", "cpu"};
    bool need[] = {lim->memory_bytes > 0, lim->pids > 0, lim->cpu_millis > 0};
    char val[64] = "", parent[PATH_SZ];
    for (int i = 0; i < 3; i++) {
        if (controllers_have(base, want[i])) {
            strcat(val, val[0] ? " +" : "+");
            strcat(val, want[i]);
        } else if (need[i]) {
            return sgc_failx(err, len, "cgroup v2 %s: controller '%s' not available", base, want[i]);
        }
    }
    if (!val[0])
        return 0;
    if (snprintf(parent, sizeof parent, "%s/sandgate", base) >= (int)sizeof parent)
        return sgc_failx(err, len, "cgroup path too long under %s", base);
    if (mkdir(parent, 0755) != 0 && errno != EEXIST)
        return sgc_fail(err, len, "mkdir(\"%s\")", parent);
    if (knob(base, "cgroup.subtree_control", val, err, len))
        return -1;
    return knob(parent, "cgroup.subtree_control", val, err, len);
}

static int put_procs(char *out, size_t max, size_t *used, const char *dir, char *err, size_t len)
{
    if (!out)
        return 0;
    int n = snprintf(out + *used, max - *used, "%s%s/cgroup.procs", *used ? "\n" : "", dir);
    if (n < 0 || (size_t)n >= max - *used)
        return sgc_failx(err, len, "sgc_cgroup_create: procs_out too small (%zu bytes)", max);
    *used += (size_t)n;
    return 0;
}

static int create_all(const char *root, const groups *g, const sgc_cgroup_limits *lim,
                      char *out, size_t max, int *made, char *err, size_t len)
{
    size_t used = 0;
    if (out && max)
        out[0] = '\0';
    if (g->kind == SGC_CGROUP_V2) {
        char base[PATH_SZ];
        v2_base(root, base, sizeof base);
        if (v2_enable(base, lim, err, len))
            return -1;
    } else if (lim->cpu_millis && find_ctrl(g, "cpu") < 0) {
        return sgc_failx(err, len, "cgroup v1: cpu limit asked but no cpu controller under %s", root);
    }
    for (int i = 0; i < g->n; i++) {
        if (mkdir_group(g->dir[i], err, len))
            return -1;
        ++*made;
        int rc = g->kind == SGC_CGROUP_V2 ? v2_limits(g->dir[i], lim, err, len)
                                          : v1_limits(g, i, lim, err, len);
        if (rc || put_procs(out, max, &used, g->dir[i], err, len))
            return -1;
    }
    return 0;
}

SGC_API int sgc_cgroup_create(const char *root, const char *name, const sgc_cgroup_limits *lim,
                              char *procs_out, size_t max, char *errbuf, size_t errlen)
{
    groups g;
    static const sgc_cgroup_limits none = {0, 0, 0};
    if (resolve(root, name, &g, errbuf, errlen))
        return -1;
    if (g.kind == SGC_CGROUP_V1 && (find_ctrl(&g, "memory") < 0 || find_ctrl(&g, "pids") < 0))
        return sgc_failx(errbuf, errlen, "cgroup v1 under %s: memory and pids controllers required", root);
    int made = 0;
    if (create_all(root, &g, lim ? lim : &none, procs_out, max, &made, errbuf, errlen) == 0)
        return 0;
    int saved = errno; /* undo, keeping the first error */
    while (made > 0)
        rmdir(g.dir[--made]);
    errno = saved;
    return -1;
}

/* The "cgroup.procs" paths of existing groups, as sgc_cgroup_create wrote
 * them (a context joining a made sandbox joins the same groups). */
SGC_API int sgc_cgroup_procs(const char *root, const char *name, char *procs_out, size_t max,
                             char *errbuf, size_t errlen)
{
    groups g;
    size_t used = 0;
    if (resolve(root, name, &g, errbuf, errlen))
        return -1;
    if (max)
        procs_out[0] = '\0';
    for (int i = 0; i < g.n; i++)
        if (put_procs(procs_out, max, &used, g.dir[i], errbuf, errlen))
            return -1;
    return 0;
}

/* ---- warm pool: re-limit and rename an existing sandbox's groups ---- */

SGC_API int sgc_cgroup_set_limits(const char *root, const char *name, const sgc_cgroup_limits *lim,
                                  char *errbuf, size_t errlen)
{
    groups g;
    if (resolve(root, name, &g, errbuf, errlen))
        return -1;
    for (int i = 0; i < g.n; i++) {
        int rc = g.kind == SGC_CGROUP_V2 ? v2_limits(g.dir[i], lim, errbuf, errlen)
                                         : v1_limits(&g, i, lim, errbuf, errlen);
        if (rc)
            return -1;
    }
    return 0;
}

/* v1 only: the kernel renames a cgroup directory within its parent
 * (cgroup1_rename); the unified hierarchy has no rename. Processes, limits
 * and the sandbox's cgroup namespace root (a pointer to the group, not a
 * path) are untouched. All or nothing: a failure renames back. */
SGC_API int sgc_cgroup_rename(const char *root, const char *from, const char *to, char *errbuf,
                              size_t errlen)
{
    groups a, b;
    if (resolve(root, from, &a, errbuf, errlen) || resolve(root, to, &b, errbuf, errlen))
        return -1;
    if (a.kind != SGC_CGROUP_V1) {
        errno = EOPNOTSUPP;
        return sgc_failx(errbuf, errlen, "cgroup rename: only cgroup v1 renames groups");
    }
    for (int i = 0; i < a.n; i++) {
        if (rename(a.dir[i], b.dir[i]) != 0) {
            int saved = errno;
            sgc_fail(errbuf, errlen, "rename(\"%s\", \"%s\")", a.dir[i], b.dir[i]);
            while (i-- > 0)
                rename(b.dir[i], a.dir[i]);
            errno = saved;
            return -1;
        }
    }
    return 0;
}

/* ---- kill, empty, destroy ---- */

/* SIGKILL (when `sig`) or just count every pid listed in dir/cgroup.procs;
 * returns how many, or -1 when the file cannot be read (group gone). */
static int scan_listed(const char *dir, bool sig)
{
    char path[PATH_SZ + 16];
    static __thread char buf[65536]; /* pids.max bounds the list; leftovers come next round */
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    if (sgc_read_file(path, buf, sizeof buf) < 0)
        return -1;
    int n = 0;
    for (char *p = buf, *end; *p; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 1 && (!sig || kill((pid_t)pid, SIGKILL) == 0))
            n++;
        while (*end == '\n')
            end++;
    }
    return n;
}

static bool group_empty(const char *dir)
{
    char path[PATH_SZ + 16], buf[16];
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    return sgc_read_file(path, buf, sizeof buf) <= 0; /* gone counts as empty */
}

static bool all_empty(const groups *g)
{
    for (int i = 0; i < g->n; i++)
        if (!group_empty(g->dir[i]))
            return false;
    return true;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits up to `ms` for the frozen state to settle (v1 goes FREEZING first). */
static void wait_frozen(const char *state_file, const char *want, long ms)
{
    char buf[32];
    for (long t = 0; t < ms; t++) {
        if (sgc_read_file(state_file, buf, sizeof buf) > 0 && !strncmp(buf, want, strlen(want)))
            return;
        sleep_ms(1);
    }
}

/* Frozen tasks can neither fork nor exit, so the pids we read stay ours while
 * we signal them (no pid reuse race) and none escapes by forking. */
static int kill_frozen(const groups *g, char *err, size_t len)
{
    int fi = g->kind == SGC_CGROUP_V2 ? 0 : find_ctrl(g, "freezer");
    if (fi < 0 || (g->kind == SGC_CGROUP_V2 && !has_file(g->dir[0], "cgroup.freeze")))
        return 0;
    const char *d = g->dir[fi];
    bool v2 = g->kind == SGC_CGROUP_V2;
    char state[PATH_SZ + 32];
    snprintf(state, sizeof state, "%s/%s", d, v2 ? "cgroup.events" : "freezer.state");
    if (knob(d, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "1" : "FROZEN", err, len))
        return -1;
    if (!v2)
        wait_frozen(state, "FROZEN", 1000);
    int n = scan_listed(d, true);
    if (knob(d, v2 ? "cgroup.freeze" : "freezer.state", v2 ? "0" : "THAWED", err, len))
        return -1;
    return n < 0 ? 0 : n;
}

/* Wait until every group is empty. For the first `grace` ms only watch the
 * already-killed tasks exit; after that (or with no freezer or cgroup.kill)
 * signal whatever is listed, accepting the small pid-reuse window. */
static int kill_loop(const groups *g, int grace, int *count, char *err, size_t len)
{
    for (int round = 0; round < 2000; round++) {
        if (all_empty(g))
            return 0;
        for (int i = 0; round >= grace && i < g->n; i++) {
            int n = scan_listed(g->dir[i], true);
            if (n > 0)
                *count += n;
        }
        sleep_ms(1);
    }
    errno = EBUSY;
    return sgc_fail(err, len, "sgc_cgroup_kill(%s): processes left after 2 s of SIGKILL", g->dir[0]);
}

SGC_API int sgc_cgroup_kill(const char *root, const char *name, char *errbuf, size_t errlen)
{
    groups g;
    if (resolve(root, name, &g, errbuf, errlen))
        return -1;
    if (!exists(g.dir[0]))
        return 0; /* already gone: nothing to kill */
    int count = 0, grace = 0;
    if (g.kind == SGC_CGROUP_V2 && has_file(g.dir[0], "cgroup.kill")) {
        count = scan_listed(g.dir[0], false); /* the kernel signals them all */
        if (count < 0 || knob(g.dir[0], "cgroup.kill", "1", errbuf, errlen))
            return count < 0 ? sgc_fail(errbuf, errlen, "read(\"%s/cgroup.procs\")", g.dir[0]) : -1;
        grace = 500;
    } else {
        count = kill_frozen(&g, errbuf, errlen);
        if (count < 0)
            return -1;
        grace = count > 0 ? 500 : 0;
    }
    if (kill_loop(&g, grace, &count, errbuf, errlen))
        return -1;
    return count;
}

SGC_API int sgc_cgroup_signal(const char *root, const char *name, char *errbuf, size_t errlen)
{
    groups g;
    if (resolve(root, name, &g, errbuf, errlen))
        return -1;
    if (!exists(g.dir[0]))
        return 0;
    if (g.kind == SGC_CGROUP_V2 && has_file(g.dir[0], "cgroup.kill")) {
        int count = scan_listed(g.dir[0], false);
        return knob(g.dir[0], "cgroup.kill", "1", errbuf, errlen) ? -1 : count;
    }
    int count = kill_frozen(&g, errbuf, errlen);
    for (int i = 0; count == 0 && i < g.n; i++) {   /* no freezer: signal what is listed */
        int n = scan_listed(g.dir[i], true);
        if (n > 0)
            count += n;
    }
    return count;
}

SGC_API int sgc_cgroup_empty(const char *root, const char *name)
{
    groups g;
    if (resolve(root, name, &g, NULL, 0))
        return 1;
    return all_empty(&g) ? 1 : 0;
}

SGC_API int sgc_cgroup_destroy(const char *root, const char *name, char *errbuf, size_t errlen)
{
    groups g;
    if (resolve(root, name, &g, errbuf, errlen))
        return -1;
    for (int i = 0; i < g.n; i++)
        if (rmdir(g.dir[i]) != 0 && errno != ENOENT)
            return sgc_fail(errbuf, errlen, "rmdir(\"%s\")", g.dir[i]);
    return 0;
}

/* ---- accounting ---- */

/* The value after "key " on its own line of a flat-keyed file, or -1. */
static long long read_key(const char *path, const char *key)
{
    char buf[4096];
    if (sgc_read_file(path, buf, sizeof buf) < 0)
        return -1;
    size_t n = strlen(key);
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (!strncmp(line, key, n) && line[n] == ' ')
            return strtoll(line + n + 1, NULL, 10);
    return -1;
}

/* The memory group's directory: v2's only one, v1's memory one. */
static const char *memory_dir(const char *root, const char *name, groups *g)
{
    if (resolve(root, name, g, NULL, 0))
        return NULL;
    int i = g->kind == SGC_CGROUP_V2 ? 0 : find_ctrl(g, "memory");
    return i < 0 ? NULL : g->dir[i];
}

SGC_API long sgc_cgroup_oom_kills(const char *root, const char *name)
{
    groups g;
    const char *d = memory_dir(root, name, &g);
    if (!d)
        return -1;
    char path[PATH_SZ + 32];
    bool v2 = g.kind == SGC_CGROUP_V2;
    snprintf(path, sizeof path, "%s/%s", d, v2 ? "memory.events" : "memory.oom_control");
    return (long)read_key(path, "oom_kill");
}

SGC_API long long sgc_cgroup_memory_current(const char *root, const char *name)
{
    groups g;
    const char *d = memory_dir(root, name, &g);
    if (!d)
        return -1;
    char path[PATH_SZ + 32], buf[32];
    bool v2 = g.kind == SGC_CGROUP_V2;
    snprintf(path, sizeof path, "%s/%s", d, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (sgc_read_file(path, buf, sizeof buf) <= 0)
        return -1;
    return strtoll(buf, NULL, 10);
}
