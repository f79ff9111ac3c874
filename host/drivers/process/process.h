/* process.h — the process driver's private API (host/driver.h is the only
 * thing the core sees of it): process.c is the ops table and the contain
 * spec of a sandbox, zygote.c the warm Pythons that fork sandboxes and
 * contexts. Everything runs with H.mu held unless said. */
#ifndef SG_HOST_DRIVERS_PROCESS_H
#define SG_HOST_DRIVERS_PROCESS_H

#include "host/host.h"

extern const host_driver host_driver_process;

/* One exec of zygote.py: a generation of the template's address-space
 * layout and str hash secret (zygote.c says when one replaces another). */
typedef struct proc_zygote {
    struct proc_zygote *next;        /* the template's retiring list */
    host_template *t;                /* borrowed: the owner */
    uint32_t gen;                    /* 1, 2, … per template */
    pid_t pid;                       /* 0 once reaped */
    host_watch sock;                 /* channel; fd -1 once closed */
    int ready;                       /* HELLO seen */
    uint32_t uses;                   /* sandboxes of this generation given to a request */
    uint32_t joins;                  /* JOINs sent and not answered */
    int64_t born_us, first_use_us;   /* monotonic; first_use 0 = none yet */
    int64_t retire_us;               /* retiring since (0 = not retiring) */
} proc_zygote;

/* A template's zygotes: host_template.priv of a process-driver template. */
typedef struct proc_template {
    proc_zygote *zygote;             /* owned: the serving one; NULL while down */
    proc_zygote *next;               /* owned: warming up to replace it, or NULL */
    proc_zygote *retiring;           /* owned: replaced ones still finishing */
    uint32_t gens;                   /* the last generation started */
    int64_t restart_at_us;           /* a dead zygote's (or failed successor's) retry */
    int64_t warm_us;                 /* how long the last zygote took to say HELLO */
} proc_template;

#define PT(t) ((proc_template *)(t)->priv)

/* process.c: the contain spec (host/contain/contain.h) of sb, in the
 * cgroups it is in now (a pooled sandbox's were renamed at activation).
 * Owned by the caller; NULL with err set. */
char *proc_join_spec(host_sandbox *sb, const host_template *t, sg_err *err);

/* zygote.c */
int proc_zygote_start(host_template *t, sg_err *err);
void proc_zygote_tick(host_template *t, int64_t now_us);
void proc_zygote_stop(host_template *t);        /* no H.mu: SIGKILL every zygote of t */
void proc_zygote_reaped(pid_t pid);
/* The serving zygote, if it said HELLO. */
proc_zygote *proc_zygote_serving(host_template *t);
/* The record of a generation, or NULL when it is gone. */
proc_zygote *proc_zygote_by_gen(host_template *t, uint32_t gen);
void proc_zygote_note_use(host_template *t, uint32_t gen);
int proc_zygote_gen_usable(host_template *t, uint32_t gen);
/* CREATE: the zygote forks sb (pooled: POOLED, then ACTIVATE). Sets sb->gen. */
int proc_zygote_create(host_template *t, host_sandbox *sb, const char *spec, const char *env_json,
                       int pooled, int child_fd, sg_err *err);
/* JOIN: a context forked into the running sandbox (answered by JOINED). */
int proc_zygote_join(host_template *t, host_ctx *c, sg_err *err);

#endif
