/* admit.h — admission control: a sandbox (or context) is refused before
 * anything is allocated for it when it would leave the host with less than
 * the configured reserve (config `reserve:`) of file descriptors, memory or
 * pids, so the host never runs dry and loses every sandbox it holds.
 * host_admit_decide is pure (table-tested); host_admit_measure reads /proc
 * and the sandgate cgroup. */
#ifndef SG_HOST_ADMIT_H
#define SG_HOST_ADMIT_H

#include <stdint.h>

#include "common/err.h"

/* What the host has now; a limit <= 0 means unknown or none (not checked). */
typedef struct host_admit_usage {
    long fds_open, fds_limit;         /* this process: /proc/self/fd, RLIMIT_NOFILE (soft) */
    long files_open, files_limit;     /* the system: fs.file-nr */
    int64_t mem_available;            /* MemAvailable, bytes; < 0 unknown */
    long tasks, tasks_limit;          /* the system: threads, min(pid_max, threads-max) */
    long cg_pids, cg_pids_limit;      /* the sandgate cgroup's pids.current / pids.max */
} host_admit_usage;

/* What one more of a kind costs (measured: see admit.c) and what must stay
 * free after it (config; 0 = that check off). */
typedef struct host_admit_amounts {
    long fds;
    int64_t memory;
    long pids;
} host_admit_amounts;

typedef enum { HOST_ADMIT_SANDBOX, HOST_ADMIT_CONTEXT } host_admit_kind;

/* 0 if one more fits with the reserve left, else SG_EQUOTA with a message
 * naming what ran out ("file descriptors", "memory", "pids"). */
int host_admit_decide(const host_admit_usage *u, const host_admit_amounts *need,
                      const host_admit_amounts *reserve, const char *what, sg_err *err);
void host_admit_measure(host_admit_usage *u, const char *cgroup_root);
/* Measure and decide for one more of kind, with H.cfg's reserve. */
int host_admit_check(host_admit_kind kind, sg_err *err);
/* At start: RLIMIT_NOFILE's soft limit up to the hard one; logs both. */
void host_admit_raise_nofile(void);

#endif
