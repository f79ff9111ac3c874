/* host_view.c — the e2e tests' view of the host from outside: a sandbox's
 * cgroup and the processes in it, whether a process is alive, exiting,
 * a zombie or gone, and a one-line description of one for failure
 * messages. Read from /sys/fs/cgroup and /proc; nothing here talks to
 * the daemons (that is fixture.c). */
#include "tests/e2e/fixture.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void fx_cgroup_dir(const char *sandbox_id, char *buf, size_t len)
{
    struct stat s;
    if (stat("/sys/fs/cgroup/pids/sandgate", &s) == 0 ||
        stat("/sys/fs/cgroup/cgroup.controllers", &s) != 0)
        snprintf(buf, len, "/sys/fs/cgroup/pids/sandgate/%s", sandbox_id);   /* v1 */
    else
        snprintf(buf, len, "/sys/fs/cgroup/sandgate/%s", sandbox_id);        /* v2 */
}

size_t fx_cgroup_pids(const char *sandbox_id, int *pids, size_t max)
{
    char dir[600], path[700];
    fx_cgroup_dir(sandbox_id, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/cgroup.procs", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = 0;
    int pid;
    while (n < max && fscanf(f, "%d", &pid) == 1)
        pids[n++] = pid;
    fclose(f);
    return n;
}

/* /proc/<pid>/stat: state letter, flags (field 9) and start time (field
 * 22). 0 if gone. */
static int read_stat(int pid, char *state, unsigned *flags, unsigned long long *start)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *p = ok ? strrchr(line, ')') : NULL;   /* comm may hold spaces and parens */
    if (!p)
        return 0;
    /* after ") ": field 3 (state) ... field 22 (starttime) */
    return sscanf(p + 2, "%c %*d %*d %*d %*d %*d %u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                         "%*d %llu",
                  state, flags, start) == 3;
}

size_t fx_sandbox_procs(const char *sandbox_id, fx_proc *procs, size_t max)
{
    int pids[1024];
    size_t n = fx_cgroup_pids(sandbox_id, pids, max < 1024 ? max : 1024), k = 0;
    for (size_t i = 0; i < n; i++) {
        char state;
        unsigned flags;
        if (read_stat(pids[i], &state, &flags, &procs[k].start)) {
            procs[k].pid = pids[i];
            k++;
        }
    }
    return k;
}

fx_pid_state fx_proc_state(const fx_proc *p)
{
    char state;
    unsigned flags;
    unsigned long long start;
    if (!read_stat(p->pid, &state, &flags, &start) || start != p->start)
        return FX_PID_GONE;   /* gone, or the pid now names another process */
    if (state == 'Z' || state == 'X')
        return FX_PID_ZOMBIE;
    /* PF_EXITING (0x4): killed and inside do_exit; a cgroup v1 drops the
     * task from cgroup.procs here, before it becomes a zombie. */
    return flags & 0x4 ? FX_PID_EXITING : FX_PID_ALIVE;
}

static void read_small(const char *path, char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == 0 || buf[i] == '\n')
            buf[i] = ' ';
}

void fx_proc_describe(int pid, char *buf, size_t len)
{
    char path[64], cmd[256], stat[256], cg[1024], *pids_cg = "";
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    read_small(path, cmd, sizeof cmd);
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    read_small(path, stat, sizeof stat);
    snprintf(path, sizeof path, "/proc/%d/cgroup", pid);
    read_small(path, cg, sizeof cg);
    char *p = strstr(cg, ":pids:");
    if (p) {
        pids_cg = p + 6;
        p = strchr(pids_cg, ' ');
        if (p)
            *p = 0;
    }
    snprintf(buf, len, "cmdline '%s' | stat '%s' | pids cgroup '%s'", cmd, stat, pids_cg);
}
