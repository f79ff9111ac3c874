/* admit.c — admission control (admit.h): measure what the host has left,
 * and refuse a create that would eat into the reserve, naming what ran out.
 * Called with H.mu held from the create paths; every read here is of
 * /proc or cgroupfs (kernel state, nothing a sandbox can make wait), and
 * the fd count is one getdents pass over /proc/self/fd.
 *
 * Costs, measured on the process driver (tests/security/test_fd_exhaustion
 * prints the host's fd count per sandbox): a running sandbox holds 5 fds
 * (supervisor socket, pidfd, its default context's socket, stdout and
 * stderr pipes); creating one briefly takes 3 more (the socketpair, cgroup
 * files). A joined context holds 3 and takes 3 more while it starts. The
 * memory figure is what a fresh interpreter dirties of the zygote's
 * copy-on-write heap; pids: pid 1 and the context, with room to fork. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/log.h"
#include "common/fds.h"
#include "host/core/admit.h"
#include "host/host.h"

static const host_admit_amounts COST[] = {
    [HOST_ADMIT_SANDBOX] = {.fds = 8, .memory = 32ll << 20, .pids = 4},
    [HOST_ADMIT_CONTEXT] = {.fds = 6, .memory = 16ll << 20, .pids = 2},
};

/* Free after one more, with the reserve kept: refused when below. */
static int short_of(long have_free, long need, long reserve)
{
    return have_free - need < reserve;
}

int host_admit_decide(const host_admit_usage *u, const host_admit_amounts *need,
                      const host_admit_amounts *reserve, const char *what, sg_err *err)
{
    if (reserve->fds > 0) {
        if (u->fds_limit > 0 && short_of(u->fds_limit - u->fds_open, need->fds, reserve->fds))
            return sg_err_set(err, SG_EQUOTA,
                              "host is out of file descriptors: %ld of %ld in use, %s needs %ld "
                              "and %ld stay in reserve; try another host or fewer sandboxes",
                              u->fds_open, u->fds_limit, what, need->fds, reserve->fds);
        if (u->files_limit > 0 &&
            short_of(u->files_limit - u->files_open, need->fds, reserve->fds))
            return sg_err_set(err, SG_EQUOTA,
                              "host is out of file descriptors: the system has %ld of %ld open "
                              "(fs.file-max); %s needs %ld and %ld stay in reserve",
                              u->files_open, u->files_limit, what, need->fds, reserve->fds);
    }
    if (reserve->memory > 0 && u->mem_available >= 0 &&
        u->mem_available - need->memory < reserve->memory)
        return sg_err_set(err, SG_EQUOTA,
                          "host is out of memory: %lld MiB available, %s needs %lld MiB and "
                          "%lld MiB stay in reserve",
                          (long long)(u->mem_available >> 20), what,
                          (long long)(need->memory >> 20), (long long)(reserve->memory >> 20));
    if (reserve->pids > 0) {
        if (u->tasks_limit > 0 && short_of(u->tasks_limit - u->tasks, need->pids, reserve->pids))
            return sg_err_set(err, SG_EQUOTA,
                              "host is out of pids: %ld of %ld tasks (pid_max, threads-max), "
                              "%s needs %ld and %ld stay in reserve",
                              u->tasks, u->tasks_limit, what, need->pids, reserve->pids);
        if (u->cg_pids_limit > 0 &&
            short_of(u->cg_pids_limit - u->cg_pids, need->pids, reserve->pids))
            return sg_err_set(err, SG_EQUOTA,
                              "host is out of pids: the sandboxes' cgroup holds %ld of its "
                              "pids.max %ld, %s needs %ld and %ld stay in reserve",
                              u->cg_pids, u->cg_pids_limit, what, need->pids, reserve->pids);
    }
    return 0;
}

/* The first number(s) of a small kernel file; -1 on failure. */
static int read_longs(const char *path, const char *fmt, long *a, long *b, long *c)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int n = c ? fscanf(f, fmt, a, b, c) : b ? fscanf(f, fmt, a, b) : fscanf(f, fmt, a);
    fclose(f);
    return n;
}

static int64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -1;
    char line[128];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}

/* The sandboxes' parent group: v1 pids/sandgate, v2 sandgate (or under
 * unified/ on a hybrid layout). "max" is no limit. */
static void cgroup_pids(const char *root, long *cur, long *max)
{
    static const char *const dirs[] = {"pids/sandgate", "sandgate", "unified/sandgate"};
    *cur = 0;
    *max = -1;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s/pids.max", root, dirs[i]);
        FILE *f = fopen(p, "re");
        if (!f)
            continue;
        char v[32] = "";
        int ok = fscanf(f, "%31s", v) == 1;
        fclose(f);
        if (!ok || strcmp(v, "max") == 0)
            return;
        *max = strtol(v, NULL, 10);
        snprintf(p, sizeof p, "%s/%s/pids.current", root, dirs[i]);
        if (read_longs(p, "%ld", cur, NULL, NULL) != 1)
            *max = -1;
        return;
    }
}

void host_admit_measure(host_admit_usage *u, const char *cgroup_root)
{
    memset(u, 0, sizeof *u);
    u->fds_limit = sg_fds_limit();
    u->fds_open = sg_fds_open(u->fds_limit);
    long unused;
    if (read_longs("/proc/sys/fs/file-nr", "%ld %ld %ld", &u->files_open, &unused,
                   &u->files_limit) != 3)
        u->files_limit = -1;
    u->mem_available = mem_available();
    long running, pid_max = -1, threads_max = -1;
    if (read_longs("/proc/loadavg", "%*f %*f %*f %ld/%ld", &running, &u->tasks, NULL) != 2)
        u->tasks = 0;
    read_longs("/proc/sys/kernel/pid_max", "%ld", &pid_max, NULL, NULL);
    read_longs("/proc/sys/kernel/threads-max", "%ld", &threads_max, NULL, NULL);
    u->tasks_limit = pid_max > 0 && (threads_max <= 0 || pid_max < threads_max) ? pid_max
                                                                                : threads_max;
    cgroup_pids(cgroup_root, &u->cg_pids, &u->cg_pids_limit);
}

int host_admit_check(host_admit_kind kind, sg_err *err)
{
    host_admit_amounts reserve = {.fds = (long)H.cfg.reserve_fds,
                                  .memory = (int64_t)H.cfg.reserve_memory,
                                  .pids = (long)H.cfg.reserve_pids};
    if (!reserve.fds && !reserve.memory && !reserve.pids)
        return 0;
    host_admit_usage u;
    host_admit_measure(&u, H.cfg.cgroup_root);
    return host_admit_decide(&u, &COST[kind], &reserve,
                             kind == HOST_ADMIT_SANDBOX ? "a sandbox" : "a context", err);
}

void host_admit_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        sg_log_warn("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
        return;
    }
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (was != rl.rlim_max && setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        sg_log_warn("setrlimit(RLIMIT_NOFILE, %llu): %s; staying at %llu",
                (unsigned long long)rl.rlim_max, strerror(errno), (unsigned long long)was);
        return;
    }
    sg_log_info("RLIMIT_NOFILE %llu (soft was %llu, hard %llu)",
            (unsigned long long)rl.rlim_cur, (unsigned long long)was,
            (unsigned long long)rl.rlim_max);
}
