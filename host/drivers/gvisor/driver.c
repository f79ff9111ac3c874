/* driver.c — the `gvisor` driver (host/driver.h): a sandbox is one runsc
 * container, started and relayed by its own sandgate-gvisor-shim
 * (host/drivers/gvisor/shim/, PROTOCOL.md next to this file).
 *
 * Owns: spawning the shim (posix_spawn; it joins the sandbox's cgroups
 * itself before anything else, so runsc, the gofer and the Sentry are all
 * in the groups the core made, kills, empties and accounts OOM from),
 * sending a direct create's ACTIVATE at once (the shim forwards it when the
 * agent is up), opening contexts (`CTX <id>`: no zygote, no JOIN), the
 * cgroup headroom the Sentry needs, and removing the per-sandbox runsc
 * state directory once the cgroups are empty (and every leftover of this
 * host at start-up: a `runsc create` killed midway leaves its state and a
 * lock that `runsc delete --force` does not remove, issue 14).
 *
 * Cgroup limits of a gvisor sandbox (what the core writes, adjusted here):
 *   memory = the sandbox's limit + GV_SENTRY_MEMORY: the Sentry's Go heap
 *            and page tables are charged to the group next to the app's
 *            memory file; inside, RLIMIT_AS = the limit per process, so
 *            Python gets MemoryError before the group's OOM killer would
 *            kill the whole Sentry;
 *   pids   = the limit + GV_SENTRY_PIDS: every Sentry and gofer thread is a
 *            host task (~48 idle; 10 app processes under pids.max=64 made
 *            it panic), so pids.max is only a backstop; RLIMIT_NPROC inside
 *            (= the limit) is what stops a fork bomb with a clean EAGAIN.
 * The per-sandbox directory is <gvisor root>/<host name>/<32 hex>. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "host/contain/contain.h"
#include "host/driver.h"
#include "host/host.h"

#define GV_SENTRY_MEMORY (192ull << 20)
#define GV_SENTRY_PIDS 256
#define GV_START_TIMEOUT_S 60
#define GV_NAME_LEN 32

extern char **environ;

typedef struct gv_sandbox {
    char name[GV_NAME_LEN + 1];   /* runsc container id and dir name */
} gv_sandbox;

static char shim_path[512];
static char agent_dir[512];
static char runtime_dir[512];

/* ---- config (host file `gvisor:`) ---- */

static const char *gv_runsc(void)
{
    return H.cfg.gvisor.runsc ? H.cfg.gvisor.runsc : "/usr/bin/runsc";
}

static const char *gv_platform(void)
{
    return H.cfg.gvisor.platform ? H.cfg.gvisor.platform : "ptrace";
}

/* <root>/<host name>: this host's sandboxes' directories, and nothing else
 * (several hosts may share one root on a machine). */
static void host_state_dir(char *out, size_t n)
{
    if (H.cfg.gvisor.root)
        snprintf(out, n, "%s/%s", H.cfg.gvisor.root, H.cfg.name);
    else
        snprintf(out, n, "%s/runsc/%s", H.cfg.runtime_dir, H.cfg.name);
}

/* ---- start-up ---- */

static int gv_check(sg_err *err)
{
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    snprintf(shim_path, sizeof shim_path, "%s/sandgate-gvisor-shim", dirname(exe));
    char rt[512];
    snprintf(rt, sizeof rt, "%s", H.runtime_py);   /* <runtime>/zygote.py */
    snprintf(runtime_dir, sizeof runtime_dir, "%s", dirname(rt));
    /* SANDGATE_GVISOR_AGENT_DIR: tests of the shim and driver run a
     * stand-in agent (tests/gvisor/fake_agent); read once, at start-up. */
    const char *ad = getenv("SANDGATE_GVISOR_AGENT_DIR");
    snprintf(agent_dir, sizeof agent_dir, "%s", ad && *ad ? ad : SANDGATE_GVISOR_AGENT_DIR);
    if (access(gv_runsc(), X_OK) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "runsc at %s (Debian package runsc)", gv_runsc());
    if (access(shim_path, X_OK) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "%s (built with sandgate-host)", shim_path);
    char agent[600];
    snprintf(agent, sizeof agent, "%s/agent.py", agent_dir);
    if (access(agent, R_OK) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "the gvisor agent %s", agent);
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        return rmdir(path) != 0 && errno != ENOENT ? 0 : 0;
    return unlink(path) != 0 && errno != ENOENT ? 0 : 0;
}

/* rm -rf, never crossing into a mount (FTW_MOUNT) or following a link. The
 * tree is small (a few dozen entries on the runtime tmpfs). */
static int remove_tree(const char *dir)
{
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    struct stat st;
    return lstat(dir, &st) == 0 ? -1 : 0;
}

/* Every leftover of a previous host of this name: the core has already
 * killed and removed its "<name>-*" cgroups, so nothing runs in these. */
static void gv_sweep(void)
{
    char dir[600];
    host_state_dir(dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != GV_NAME_LEN)
            continue;
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove_tree(path) == 0)
            n++;
        else
            sg_log_warn("gvisor: could not remove leftover runsc state %s", path);
    }
    closedir(d);
    if (n)
        sg_log_info("gvisor: removed %d leftover runsc state dirs of host %s", n, H.cfg.name);
}

static int gv_template_start(host_template *t, sg_err *err)
{
    if (!t->cfg->contain)
        return sg_err_set(err, SG_EINVAL, "template %s: isolation gvisor needs contain: true "
                          "(its cgroups hold the Sentry)", t->cfg->name);
    char dir[600];
    host_state_dir(dir, sizeof dir);
    char parent[600];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    mkdir(parent, 0700);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sg_err_errno(err, SG_EINTERNAL, "mkdir(%s)", dir);
    return 0;
}

static void gv_template_tick(host_template *t, int64_t now_us)
{
    (void)t;
    (void)now_us;
}

static void gv_template_stop(host_template *t)
{
    (void)t;   /* nothing shared: each sandbox's shim dies with its cgroups */
}

/* One generation, always usable: each sandbox is its own exec of Python
 * (its own address-space layout and str hash secret). */
static uint32_t gv_serving_gen(host_template *t)
{
    (void)t;
    return 1;
}

static int gv_gen_usable(host_template *t, uint32_t gen)
{
    (void)t;
    return gen == 1;
}

static void gv_note_use(host_template *t, uint32_t gen)
{
    (void)t;
    (void)gen;
}

/* ---- one sandbox ---- */

static int random_name(char *out)
{
    unsigned char b[GV_NAME_LEN / 2];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b)
        return -1;
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

typedef struct argvb {
    char *v[160];
    char store[16][32];
    int n, ns;
} argvb;

static void arg(argvb *a, const char *s)
{
    if (a->n < 158)
        a->v[a->n++] = (char *)s;
}

static void argnum(argvb *a, const char *flag, unsigned long long v)
{
    arg(a, flag);
    snprintf(a->store[a->ns], sizeof a->store[0], "%llu", v);
    arg(a, a->store[a->ns++]);
}

static int gv_launch(host_template *t, host_sandbox *sb, const char *env_json, int pooled,
                     int sup_fd, const char *cgroup_procs, sg_err *err)
{
    const config_template *c = t->cfg;
    gv_sandbox *g = calloc(1, sizeof *g);
    if (!g || random_name(g->name) != 0) {
        free(g);
        return sg_err_set(err, SG_EUNAVAIL, "host could not make a sandbox name now; retry");
    }
    sb->priv = g;
    sb->gen = 1;
    /* The core's start budget (15 s) is the process driver's; a runsc
     * sandbox importing numpy and pandas under ptrace takes ~2 s on an idle
     * machine and many times that on a loaded one, so it gets the shim's
     * own start deadline (which ends in a kill and an ERR) and a margin:
     * else a busy host fails every warm-up at 15 s and its pool never
     * fills. */
    sb->create_deadline_us = host_now_us() + (GV_START_TIMEOUT_S + 5) * 1000000LL;
    char state[600], procs[2048];
    host_state_dir(state, sizeof state);
    snprintf(procs, sizeof procs, "%s", cgroup_procs);
    argvb a = {0};
    arg(&a, shim_path);
    arg(&a, "--sock");
    arg(&a, "3");
    arg(&a, "--name");
    arg(&a, g->name);
    arg(&a, "--state-dir");
    arg(&a, state);
    arg(&a, "--runsc");
    arg(&a, gv_runsc());
    arg(&a, "--platform");
    arg(&a, gv_platform());
    for (size_t i = 0; i < H.cfg.gvisor.n_flags && i < 16; i++) {
        arg(&a, "--runsc-flag");
        arg(&a, H.cfg.gvisor.flags[i]);
    }
    argnum(&a, "--uid", H.cfg.uid_base + sb->slot);
    argnum(&a, "--workspace-bytes", sb->limits.disk_bytes);
    argnum(&a, "--tmp-bytes", sb->limits.tmp_bytes);
    argnum(&a, "--nofile", 1024);
    argnum(&a, "--fsize", sb->limits.disk_bytes);   /* as the process driver's */
    argnum(&a, "--nproc", sb->limits.pids);
    argnum(&a, "--as-bytes", sb->limits.memory_bytes);
    argnum(&a, "--start-timeout", GV_START_TIMEOUT_S);
    for (size_t i = 0; i < c->n_ro_binds && i < 60; i++) {
        arg(&a, "--ro-bind");
        arg(&a, c->ro_binds[i]);
    }
    for (size_t i = 0; i < c->n_symlinks && i < 30; i++) {
        arg(&a, "--symlink");
        arg(&a, c->symlinks[i]);
    }
    arg(&a, "--python");
    arg(&a, c->python);
    arg(&a, "--agent-dir");
    arg(&a, agent_dir);
    arg(&a, "--runtime-dir");
    arg(&a, runtime_dir);
    char preload[1024] = "";
    for (size_t i = 0, k = 0; i < c->n_preload && k < sizeof preload; i++)
        k += (size_t)snprintf(preload + k, sizeof preload - k, "%s%s", i ? "," : "",
                              c->preload[i]);
    if (preload[0]) {
        arg(&a, "--preload");
        arg(&a, preload);
    }
    for (char *p = procs, *line; (line = strsep(&p, "\n"));)
        if (*line) {
            arg(&a, "--cgroup-procs");
            arg(&a, line);
        }
    if (pooled)
        arg(&a, "--pooled");
    a.v[a.n] = NULL;

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sup_fd, 3);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    sigset_t all;
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    /* the host ignores some signals; runsc (Go) must start from defaults */
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, shim_path, &fa, &attr, a.v, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return sg_err_errno(err, SG_EUNAVAIL, "posix_spawn(%s)", shim_path);
    }
    /* The shim is the sandbox's "pid 1" to the core: kill() it first,
     * files.c reaches the workspace through its /proc/<pid>/root. */
    sb->pid = pid;
    sb->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (!pooled) {
        /* A direct create: the shim holds it until the agent is up. */
        size_t n = strlen(env_json);
        char *msg = malloc(n + 80);
        int k = snprintf(msg, n + 80, "ACTIVATE {\"workdir\":\"/workspace\",\"egress\":%s,\"env\":%s}",
                         sb->egress ? "true" : "false", env_json);
        ssize_t w = send(sb->sock.fd, msg, (size_t)k, MSG_DONTWAIT | MSG_NOSIGNAL);
        int e = errno;
        explicit_bzero(msg, n + 80);
        free(msg);
        if (w != k) {
            errno = e;
            return sg_err_set(err, e == EMSGSIZE ? SG_EINVAL : SG_EUNAVAIL,
                              e == EMSGSIZE ? "env: too large for this host to pass to the sandbox; "
                                              "send a smaller environment"
                                            : "could not reach the sandbox's shim; retry");
        }
    }
    return 0;
}

/* The Sentry's headroom on top of the sandbox's limits (top comment). */
static void gv_cgroup_limits(const host_sandbox *sb, sgc_cgroup_limits *lim)
{
    (void)sb;
    if (lim->memory_bytes)
        lim->memory_bytes += GV_SENTRY_MEMORY;
    if (lim->pids)
        lim->pids += GV_SENTRY_PIDS;
}

static int gv_open_context(host_ctx *c, sg_err *err)
{
    if (host_supervisor_send(c->sb, "CTX %s %s", c->id, c->language) != 0)
        return sg_err_set(err, SG_EPRECOND, "cannot reach the sandbox's shim");
    return 0;
}

/* The cgroups are empty: runsc's state of it can go. */
static int gv_cleanup(host_sandbox *sb)
{
    gv_sandbox *g = sb->priv;
    if (!g)
        return 1;
    char dir[700], state[600];
    host_state_dir(state, sizeof state);
    snprintf(dir, sizeof dir, "%s/%s", state, g->name);
    if (remove_tree(dir) != 0)
        sg_log_warn("gvisor: sandbox %s: could not remove %s; the next start sweeps it", sb->id,
                    dir);
    free(g);
    sb->priv = NULL;
    return 1;
}

const host_driver host_driver_gvisor = {
    .name = "gvisor",
    .check = gv_check,
    .sweep_on_start = gv_sweep,
    .template_start = gv_template_start,
    .template_tick = gv_template_tick,
    .template_stop = gv_template_stop,
    .reaped = NULL,
    .serving_gen = gv_serving_gen,
    .gen_usable = gv_gen_usable,
    .note_use = gv_note_use,
    .launch = gv_launch,
    .open_context = gv_open_context,
    .kill = NULL,   /* the shim and everything runsc started are in the cgroups */
    .cleanup_after_empty = gv_cleanup,
    .cgroup_limits = gv_cgroup_limits,
};
