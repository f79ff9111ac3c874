/* contain.h — the isolation of one sandbox, in ordered steps (nsjail style).
 *
 * Two halves run in the sandbox's own processes (see host/runtime/PROTOCOL.md):
 *   sgc_unshare(spec)  in child A (still root, host pid namespace):
 *                      join the sandbox's cgroups, then unshare
 *                      mount, pid, net, ipc, uts and cgroup namespaces.
 *   sgc_enter(spec)    in B, pid 1 of the new pid namespace, in this order:
 *                      mounts + pivot_root, hostname, loopback up, rlimits,
 *                      uid/gid, capabilities dropped (effective, permitted,
 *                      inheritable, bounding, ambient), no_new_privs,
 *                      close stray fds, seccomp LAST.
 * Both are exported from libsandgate_contain.so with C linkage so the Python
 * zygote calls them through ctypes. They never exit(); they return 0, or -1
 * with a message naming the syscall and its arguments in errbuf.
 *
 * The host daemon uses the cgroup half (sgc_cgroup_*) directly: it creates a
 * sandbox's cgroups before the create, reads OOM counts, and kills and
 * removes them at teardown. cgroup v1 (per-controller hierarchies under
 * /sys/fs/cgroup/{memory,pids,cpu}) and v2 (unified) are both supported;
 * sgc_cgroup_detect tells which.
 *
 * Spec: lines "key=value". Keys:
 *   id=<sandbox id>                     required
 *   uid=<n> gid=<n>                     required, unprivileged ids to run as
 *   hostname=<name>                     default "sandbox"
 *   newroot=<dir>                       empty host dir used as mount point for the new root
 *   ro_bind=<host path>[:<path inside>] repeated; read-only, nosuid, nodev bind
 *   symlink=<target>:<path inside>      repeated, e.g. symlink=usr/bin:/bin
 *   workspace=<path inside>             default /workspace; tmpfs owned by uid
 *   workspace_bytes=<n> workspace_inodes=<n>   default 256 MiB, 16384
 *   tmp_bytes=<n> tmp_inodes=<n>        /tmp tmpfs; default 64 MiB, 4096
 *   shm_bytes=<n>                       /dev/shm tmpfs; default 16 MiB
 *   cgroup_procs=<path>                 repeated; "cgroup.procs" files to join (A)
 *   nofile=<n> fsize=<n> nproc=<n>      rlimits (core is always 0)
 *   fd_keep=<n>                         repeated; fds that survive the close step
 *   seccomp=0|1                         default 1
 *   net=none                            (egress issue adds more modes)
 * Unknown keys, bad values and inside paths with ".." are errors
 * ("spec:<line>: ..."). /etc gets stub passwd, group and hosts unless a
 * ro_bind or symlink targets /etc itself.
 *
 * Zombies count against pids.max until reaped: whoever is B's parent after
 * A exits (the zygote, a child subreaper) must reap promptly.
 */
#ifndef SG_CONTAIN_H
#define SG_CONTAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

int sgc_unshare(const char *spec, char *errbuf, size_t errlen);
int sgc_enter(const char *spec, char *errbuf, size_t errlen);

/* One fork per sandbox instead of A + B (what the runtime uses):
 *   sgc_pidns_next()   in the forking process (the zygote, may be
 *                      multi-threaded): unshare(CLONE_NEWPID), so its next
 *                      child is pid 1 of a new pid namespace;
 *   fork()             (os.fork: Python's and glibc's fork handling intact);
 *   sgc_pidns_reset()  in the parent right after: setns() back to its own
 *                      pid namespace, so later children are not put in
 *                      the same one (a second unshare(NEWPID) would fail);
 *   sgc_unshare_pid1(spec)  in the child (pid 1, single-threaded): join the
 *                      cgroups, then unshare mount, net, ipc, uts and
 *                      cgroup namespaces — sgc_unshare minus NEWPID;
 *   sgc_enter(spec)    as before.
 * The namespaces and their order relative to the cgroup join are those of
 * sgc_unshare; only the pid namespace is made one step earlier. */
int sgc_pidns_next(char *errbuf, size_t errlen);
int sgc_pidns_reset(char *errbuf, size_t errlen);
int sgc_unshare_pid1(const char *spec, char *errbuf, size_t errlen);

/* A later process joining a made sandbox (a context the zygote forks):
 *   sgc_pidns_join(pidfd)  in the zygote, pidfd naming the sandbox's pid 1:
 *                          setns(NEWPID), so its next child is in the
 *                          sandbox's pid namespace; fork(); then
 *                          sgc_pidns_reset() in the parent, as above;
 *   sgc_join(spec, pidfd)  in that child (J: root, single-threaded, not pid 1):
 *                          join the sandbox's cgroups, then setns into its
 *                          mount, net, ipc, uts and cgroup namespaces; the
 *                          root and cwd become the sandbox's root. J then
 *                          forks K and exits: K is in the sandbox's pid
 *                          namespace, so it is reparented to its pid 1;
 *   sgc_enter_joined(spec) in K: sgc_enter's steps from rlimits on (rlimits,
 *                          uid/gid, caps, no_new_privs, close stray fds,
 *                          seccomp last), without the ones that made the
 *                          sandbox (mounts, hostname, loopback). */
int sgc_pidns_join(int pidfd, char *errbuf, size_t errlen);
int sgc_join(const char *spec, int pidfd, char *errbuf, size_t errlen);
int sgc_enter_joined(const char *spec, char *errbuf, size_t errlen);

/* ---- cgroups, used by the host daemon ---- */
typedef enum { SGC_CGROUP_NONE = 0, SGC_CGROUP_V1 = 1, SGC_CGROUP_V2 = 2 } sgc_cgroup_kind;

typedef struct sgc_cgroup_limits {
    uint64_t memory_bytes;  /* 0 = unlimited */
    uint32_t pids;          /* 0 = unlimited */
    uint32_t cpu_millis;    /* 1000 = one core; 0 = unlimited */
} sgc_cgroup_limits;

/* Detect the hierarchy under root (normally "/sys/fs/cgroup"). */
sgc_cgroup_kind sgc_cgroup_detect(const char *root);

/* Create the sandbox's cgroup(s) named `name` under our parent group
 * (v1: <root>/<controller>/sandgate/<name>; v2: <root>/sandgate/<name>),
 * apply limits. Writes into procs_out up to max newline-separated
 * "cgroup.procs" paths (for the spec's cgroup_procs keys). */
int sgc_cgroup_create(const char *root, const char *name, const sgc_cgroup_limits *lim,
                      char *procs_out, size_t max, char *errbuf, size_t errlen);

/* The "cgroup.procs" paths of existing group(s) `name`, newline-separated
 * (as sgc_cgroup_create writes them), for the spec of a joining process. */
int sgc_cgroup_procs(const char *root, const char *name, char *procs_out, size_t max,
                     char *errbuf, size_t errlen);

/* Rewrite the limits of existing group(s) (a pooled sandbox given its
 * owner's limits). A memory limit below current use fails (v1 EBUSY). */
int sgc_cgroup_set_limits(const char *root, const char *name, const sgc_cgroup_limits *lim,
                          char *errbuf, size_t errlen);

/* Rename the group(s) `from` to `to` in place, processes and all (a pooled
 * sandbox taking its sandbox id). cgroup v1 only: v2 fails with EOPNOTSUPP
 * and the caller keeps the old name. */
int sgc_cgroup_rename(const char *root, const char *from, const char *to, char *errbuf,
                      size_t errlen);

/* Kill every process in the sandbox's cgroups (v2 cgroup.kill where present;
 * else freeze, SIGKILL each pid, thaw) — returns the number signalled. */
int sgc_cgroup_kill(const char *root, const char *name, char *errbuf, size_t errlen);

/* The same signals without the wait: for a daemon's loop thread, which
 * polls sgc_cgroup_empty and calls this again until the groups are empty. */
int sgc_cgroup_signal(const char *root, const char *name, char *errbuf, size_t errlen);

/* 1 when no process is left in the group(s). */
int sgc_cgroup_empty(const char *root, const char *name);

/* rmdir the group(s); fails (-1, EBUSY) while processes remain. */
int sgc_cgroup_destroy(const char *root, const char *name, char *errbuf, size_t errlen);

/* OOM kills seen in the group so far (v1 memory.oom_control oom_kill; v2 memory.events). */
long sgc_cgroup_oom_kills(const char *root, const char *name);

/* Current memory use in bytes, or -1. */
long long sgc_cgroup_memory_current(const char *root, const char *name);

#endif
