/* host.h — the host daemon's shared state: the sandbox table and the types
 * every host file works on. One mutex (host_state.mu) guards the table and
 * every sandbox, context, run and exec; the I/O loop (loop.c) and the gRPC
 * handlers (service.c) both take it. Nothing under it blocks: sandbox fds are
 * non-blocking and replies are queued sends (rpc_call_send). */
#ifndef SG_HOST_H
#define SG_HOST_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "host/driver.h"
#include "host/core/journal.h"
#include "config/config.h"
#include "rpc/rpc.h"
#include "sandgate/v1/host.pb-c.h"

#define HOST_ID_MAX 80
#define HOST_FRAME_MAX (64 * 1024 + 16)
/* Live contexts per sandbox, the default one included: sandgate-init's table
 * holds as many (host/init/init.h INIT_MAX_CTX). */
#define HOST_MAX_CONTEXTS 64

typedef struct host_sandbox host_sandbox;
typedef struct host_ctx host_ctx;
struct egress_sandbox;

/* An fd the loop watches; fn runs on the loop thread with host_state.mu held. */
typedef struct host_watch {
    int fd;
    void (*fn)(struct host_watch *w, uint32_t events);
    void *owner;    /* borrowed: the sandbox, context or exec that owns fd */
} host_watch;

typedef struct host_secret {
    char *name;                      /* owned */
    uint8_t *value;                  /* owned; wiped before free */
    size_t len;
} host_secret;

/* Output held back so a secret split across two chunks is still caught. */
typedef struct host_stream {
    uint8_t *hold;                   /* owned */
    size_t n;
} host_stream;

/* One RunCode or Exec in progress: where its output goes and its caps. */
typedef struct host_action {
    rpc_call *call;          /* owned ref */
    uint64_t max_output;
    uint64_t output_total;   /* produced, including what was cut */
    uint64_t output_sent;
    int truncated;
    int64_t started_us;      /* monotonic */
    int64_t deadline_us;     /* monotonic; 0 = none */
    int64_t interrupted_us;  /* when the interrupt was sent; 0 = not yet */
    int timed_out;
    int cancelled;
    host_stream out, err;            /* redaction hold-back per stream */
} host_action;

/* Representations of one result the host keeps at most (more are dropped). */
#define HOST_RESULT_REPS 16
/* The largest result the host forwards, whatever the cap: one RunCode event
 * carries it twice at most (Result.data repeats one representation for older
 * clients) and must stay under a default gRPC client's 4 MiB receive limit. */
#define HOST_RESULT_MAX ((2u << 20) - (32u << 10))

/* A result being received from the context: 'b', then per representation
 * 'k' chunks and an 'r', then 'f' (host/runtime/PROTOCOL.md section 4). */
typedef struct host_rep {
    char mime[129];
    uint8_t *data;           /* owned; NULL when dropped */
    size_t len;              /* bytes the context sent, kept or not */
} host_rep;

typedef struct host_result {
    int open;                /* between 'b' and 'f' */
    int main;                /* the value of the cell's final expression */
    host_rep reps[HOST_RESULT_REPS];
    size_t n_reps;
    size_t n_extra;          /* representations past HOST_RESULT_REPS */
    uint8_t *cur;            /* owned: the representation being received */
    size_t cur_n, cur_cap;
    size_t cur_len;          /* its bytes so far, including those not kept */
    int cur_over;            /* it outgrew what may be buffered: counted only */
    size_t held;             /* bytes buffered for this result */
} host_result;

typedef struct host_run {
    struct host_run *next;
    host_action act;
    char *code;              /* owned */
    size_t code_len;
    host_result result;      /* the result being received, if any */
    uint32_t results_dropped;
} host_run;

typedef enum {
    CTX_STARTING,   /* CTX sent, waiting for its fds */
    CTX_IDLE,
    CTX_RUNNING,
    CTX_KILLING,    /* KILLCTX sent, waiting for CTXEXIT, then restart */
    CTX_DEAD,
} host_ctx_state;

struct host_ctx {
    host_ctx *next;
    host_sandbox *sb;        /* borrowed: the owner */
    char id[HOST_ID_MAX];
    char language[16];       /* "python" or "javascript" (host_ctx_language_ok) */
    host_ctx_state state;
    host_watch sock, out, err;   /* fd -1 when closed */
    host_run *run;           /* the run in progress; owned */
    host_run *queue, *queue_tail;  /* waiting runs; owned */
    rpc_call *create_call;   /* owned ref: a CreateContext waiting for the fds */
    /* process driver: a JOIN at the zygote in flight (drivers/process) */
    uint32_t join_job;       /* its number; 0 none */
    uint32_t join_gen;       /* the generation of the zygote it went to */
    int join_fds[3];         /* owned while join_job: host end, out_r, err_r */
    int restarts;
    int64_t created_ms;      /* wall clock, for ListContexts */
    int deleted;             /* DeleteContext: invisible to lookups, freed by the tick */
    char lost_reason[256];   /* why the last instance died, reported to the run */
};

typedef struct host_exec {
    struct host_exec *next;
    host_sandbox *sb;
    char id[32];
    host_action act;
    host_watch out, err;
    int started, exited, exit_code, signal;
    int64_t exit_grace_us;   /* EXIT came, a pipe still open: EOF awaited until then */
} host_exec;

typedef enum { SB_CREATING, SB_RUNNING, SB_KILLING } host_sb_state;

struct host_sandbox {
    host_sandbox *next;              /* table chain */
    char id[HOST_ID_MAX];
    char tenant[128], user[128], task[128], template_name[64], dedupe[400];
    /* labels from CreateSandbox, sorted by key; the entries, their strings
     * and the pointer array are owned (host_sandbox_assign, freed with sb) */
    Sandgate__V1__Sandbox__MetadataEntry *meta, **meta_ptrs;
    size_t n_meta;
    host_sb_state state;
    int64_t created_ms, expires_ms, last_active_ms;   /* wall clock */
    uint32_t slot;                   /* uid = uid_base + slot */
    const host_driver *drv;          /* borrowed: its template's driver */
    void *priv;                      /* owned by drv: its per-sandbox state; NULL none */
    int drv_cleaned;                 /* drv->cleanup_after_empty said done */
    pid_t pid;                       /* host pid of the supervisor (its PID message) */
    int pidfd;                       /* owned: pidfd of pid (files, JOIN); -1 none */
    char *ctx_env;                   /* owned, wiped: {"workdir","env"} a joined
                                      * context is activated with (secrets included) */
    host_watch sock;                 /* supervisor channel */
    host_ctx *contexts;
    host_exec *execs;
    struct host_proc *procs;         /* owned: background processes, oldest first (proc.c) */
    uint32_t proc_seq;
    rpc_call *create_call;           /* owned ref until the create is answered */
    rpc_call **create_waiters;       /* owned refs: racing creates of the same task */
    size_t n_create_waiters;
    rpc_call **kill_calls;           /* owned refs, answered when the cgroup is empty */
    size_t n_kill_calls;
    int64_t create_deadline_us;
    int64_t killed_us;               /* when the kill signals went out (monotonic) */
    long oom_base;                   /* OOM kills already accounted for */
    Sandgate__V1__Limits limits;     /* copied scalars */
    uint32_t ctx_seq, exec_seq;
    char cgroup[HOST_ID_MAX + 8];
    host_secret *secrets; size_t n_secrets;  /* owned: values to redact from output */
    size_t secret_max;               /* longest value */
    /* warm pool (sandbox.c): a sandbox created ahead of any request */
    int pooled;                      /* 1 while in its template's pool list */
    int pool_ready;                  /* POOLED received: contained, context held */
    uint32_t gen;                    /* its driver generation (drv->serving_gen) */
    char *activate_json;             /* owned, wiped: ACTIVATE to send once ready */
    host_sandbox *pool_next;         /* template pool chain */
    struct egress_sandbox *egress;   /* owned: its proxy entry when granted egress (egress.c) */
};

typedef struct host_template host_template;

struct host_template {
    config_template *cfg;            /* borrowed from the config */
    const host_driver *drv;          /* borrowed: chosen by cfg's isolation (drivers.c) */
    void *priv;                      /* owned by drv: its per-template state (process:
                                      * the zygote generations) */
    int restarts;                    /* times drv restarted the template's machinery */
    host_sandbox *pool;              /* warm pool, oldest first (sandbox.c) */
};

typedef struct host_state {
    pthread_mutex_t mu;
    config_host cfg;
    char contain_lib[512];
    char runtime_py[512];
    char init_path[512];    /* sandgate-init, exec'd as every sandbox's pid 1 */
    host_template *templates; size_t n_templates;
    host_sandbox *sandboxes;         /* list; small tables, id compare */
    size_t n_sandboxes;
    uint8_t *slots;                  /* uid slot bitmap (bytes) */
    host_sandbox *dying;             /* killed, waiting for empty cgroups */
    int epfd;
    rpc_server *srv;
    volatile int stopping;
    int draining;                    /* shutting down: no pool refills */
    /* H.mu: every template_start returned 0 (host_drivers_start). Until
     * then the loop thread calls no driver op and runs no tick: a driver's
     * t->priv does not exist before its template_start. */
    int drivers_started;
} host_state;

extern host_state H;

/* time.c-style helpers (loop.c) */
int64_t host_now_us(void);    /* monotonic */
int64_t host_wall_ms(void);

/* loop.c */
int host_loop_start(sg_err *err);
void host_loop_stop(void);
int host_watch_add(host_watch *w, int fd, void (*fn)(host_watch *, uint32_t), void *owner);
/* The same with other epoll events (0: errors and hang-ups only), and a change of them. */
int host_watch_add_events(host_watch *w, int fd, void (*fn)(host_watch *, uint32_t), void *owner,
                          uint32_t events);
int host_watch_set_events(host_watch *w, uint32_t events);
void host_watch_close(host_watch *w);

/* drivers.c: the core's calls on every driver in use (driver.h) */
host_template *host_template_find(const char *name);
void host_drivers_sweep(void);              /* start-up, after the cgroup sweep */
int host_drivers_start(sg_err *err);        /* H.mu held: template_start of each */
void host_drivers_tick(int64_t now_us);     /* loop: template_tick of each (once started) */
void host_drivers_reaped(pid_t pid);        /* loop: waitpid reaped pid (once started) */
void host_drivers_stop(void);               /* shutdown, no H.mu: template_stop of each */

/* sandbox.c — also the pieces pool.c builds on */
void host_limits_default(Sandgate__V1__Limits *l);
int host_slot_alloc(uint32_t *slot);
host_sandbox *host_sandbox_alloc(const char *template_name, uint32_t slot);
void host_sandbox_assign(host_sandbox *sb, const Sandgate__V1__HostCreateRequest *req);
char *host_sandbox_env(const Sandgate__V1__HostCreateRequest *req);   /* JSON; wipe after use */
int host_sandbox_launch(host_sandbox *sb, host_template *t, const char *env, int pooled, sg_err *err);
void host_sandbox_keep_env(host_sandbox *sb, const char *env_json);
void host_sandbox_fail_create(host_sandbox *sb, int code, const char *msg);

/* pool.c */
host_sandbox *host_pool_take(host_template *t, const Sandgate__V1__HostCreateRequest *req);
int host_pool_activate(host_sandbox *sb, host_template *t,
                       const Sandgate__V1__HostCreateRequest *req, rpc_call *call, sg_err *err);
/* 0; -1 (the sandbox is gone: a retry takes another); -2 the message is too
 * big for the socket (the same on every retry) */
int host_pool_send_activation(host_sandbox *sb);
void host_pool_unlink(host_sandbox *sb);
void host_pool_wipe_activation(host_sandbox *sb);
void host_pool_tick(int64_t now_us);
void host_pool_drain(void);
int host_pool_log(void);

host_sandbox *host_sandbox_find(const char *id);
int host_sandbox_create(const Sandgate__V1__HostCreateRequest *req, rpc_call *call, sg_err *err);
void host_sandbox_kill(host_sandbox *sb, rpc_call *reply_to);
/* labels.c: a sandbox's labels; the value of sb's label key, or NULL */
void host_labels_assign(host_sandbox *sb, const Sandgate__V1__CreateSandboxRequest *r);
void host_labels_free(host_sandbox *sb);
const char *host_sandbox_label(const host_sandbox *sb, const char *key);
void host_sandbox_fill(const host_sandbox *sb, Sandgate__V1__HostSandbox *out,
                       Sandgate__V1__Sandbox *sbuf, Sandgate__V1__Owner *obuf);
void host_sandboxes_tick(int64_t now_us);
int host_supervisor_send(host_sandbox *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* context.c */
host_ctx *host_ctx_new(host_sandbox *sb, const char *id);
int host_ctx_language_ok(const char *language);
host_ctx *host_ctx_find(host_sandbox *sb, const char *id);
void host_ctx_attach(host_ctx *c, int sock, int out, int err);
void host_ctx_spawn(host_ctx *c);
void host_ctx_joined(host_ctx *c, int pid);
int host_ctx_send_activation(int fd, const char *json);
void host_ctx_exited(host_ctx *c, int code, int sig);
void host_ctx_failed(host_ctx *c, const char *msg);
int host_ctx_submit(host_ctx *c, host_run *r, sg_err *err);
void host_ctx_destroy(host_ctx *c, const char *why);
void host_ctx_tick(host_ctx *c, int64_t now_us);
void host_ctx_cancel_call(rpc_call *call);
int host_ctx_restart(host_ctx *c, rpc_call *call, sg_err *err);
int host_ctx_delete(host_ctx *c, sg_err *err);
void host_ctx_fill_info(const host_ctx *c, Sandgate__V1__ContextInfo *out);
void host_ctx_reap_deleted(host_sandbox *sb);

/* result.c: rich results from a context's 'b' 'k' 'r' 'f' frames (type byte
 * included in buf), capped by the run's output cap, sent as Result events. */
void host_result_frame(host_run *r, const host_sandbox *sb, const uint8_t *buf, size_t n);
/* Send a result still open (the context ended the run without 'f'). */
void host_result_flush(host_run *r, const host_sandbox *sb);
void host_result_cleanup(host_result *res);

/* exec.c */
int host_exec_start(host_sandbox *sb, const char *command, host_exec **out, sg_err *err);
host_exec *host_exec_find(host_sandbox *sb, const char *id);
void host_exec_attach(host_exec *e, int out, int err);
void host_exec_exited(host_exec *e, int code, int sig);
void host_exec_failed(host_exec *e, const char *msg);
void host_exec_destroy(host_exec *e, const char *why);
void host_exec_tick(host_exec *e, int64_t now_us);
void host_exec_cancel_call(rpc_call *call);

/* proc.c: a sandbox's background processes (and PTY execs): their output
 * rings, attachers, stdin, signals, waits. The rpc functions answer the
 * call themselves (H.mu held, sb running, the message decoded). */
typedef struct host_proc host_proc;
int host_proc_start(host_sandbox *sb, const Sandgate__V1__ExecRequest *r, rpc_call *call,
                    sg_err *err);
host_proc *host_proc_find(host_sandbox *sb, const char *id);
void host_proc_started(host_proc *p, int *fds, int nfds);   /* PROC reply: takes the fds */
void host_proc_failed(host_proc *p, const char *msg);       /* PROCERR */
void host_proc_exited(host_proc *p, int code, int sig);     /* EXIT */
void host_procs_destroy(host_sandbox *sb);   /* the sandbox is killed: end every stream */
void host_procs_free(host_sandbox *sb);
void host_procs_tick(host_sandbox *sb, int64_t now_us);
void host_proc_cancel_call(rpc_call *call);
void host_proc_rpc_list(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);
void host_proc_rpc_attach(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);
void host_proc_rpc_input(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);
void host_proc_rpc_signal(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);
void host_proc_rpc_wait(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);
void host_proc_rpc_resize(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);

/* output.c: caps, redaction, event sending */
void host_action_init(host_action *a, rpc_call *call, uint64_t max_output, uint32_t timeout_s);
/* Account for len bytes; returns how many may still be sent (0..len). */
size_t host_action_admit(host_action *a, size_t len);
void host_secrets_free(host_sandbox *sb);
void host_action_release(host_action *a);
/* Send a stdout (is_err 0) or stderr chunk of a RunCode (exec 0) or Exec
 * (exec 1): redacts granted secrets (holding back a tail that may be the
 * start of one), applies the output cap, and queues the event. final=1
 * flushes the hold-back. */
void host_action_output(host_action *a, const host_sandbox *sb, int exec, int is_err,
                        const uint8_t *data, size_t len, int final);
/* Redact the next len bytes of one stream, holding back in st a tail that
 * may start a secret (final=1 flushes it). Returns malloc'd bytes, *out_n of them. */
uint8_t *host_redact_stream(const host_sandbox *sb, host_stream *st, const uint8_t *data,
                            size_t len, int final, size_t *out_n);
/* Redact a whole buffer (results, errors). Returns malloc'd bytes. */
uint8_t *host_redact_all(const host_sandbox *sb, const uint8_t *data, size_t len, size_t *out_len);

/* files.c, file_jobs.c: host/core/files.h */

/* egress.c: the host's egress proxy and each granted sandbox's entry */
int host_egress_start(const char *hosts_file, const char *audit_log, sg_err *err);
void host_egress_stop(void);
int host_egress_attach(host_sandbox *sb, const Sandgate__V1__HostCreateRequest *req, sg_err *err);
void host_egress_detach(host_sandbox *sb);
void host_egress_adopt(host_sandbox *sb, int fd);   /* fd consumed */

/* metrics.c — Prometheus metrics (common/metrics.h) */
int host_metrics_init(rpc_server *srv);
int host_metrics_listen(const char *addr, const char *port_file, sg_err *err);
void host_metrics_context_restart(const char *template_name);
void host_metrics_timeout(const char *kind);   /* "run", "exec" */
void host_metrics_oom(const char *template_name);
void host_metrics_egress(const char *kind, int allow, const char *rule, uint64_t up,
                         uint64_t down);

/* registry.c — the host's entry in etcd (config registry:; a no-op without) */
int host_registry_start(const char *advertise_default, sg_err *err);
void host_registry_stop(void);
/* A sandbox someone owned ended in this life (not an orderly stop): release
 * its task claim, record and quota key in etcd (queued; H.mu may be held). */
void host_registry_ended(const char *id, const char *tenant, const char *user,
                         const char *dedupe);
/* id ended in this life recently (its claim may not be released yet): a
 * create that names it is a stale claim, not a race. */
int host_registry_was_ended(const char *id);
/* An Extend moved id's expiry: its record and listing in etcd are rewritten (queued,
 * retried like a release; no-op in the embedded mode). */
void host_registry_extended(const char *id, const char *tenant, const char *user,
                            int64_t expires_ms);
/* Drain (SIGUSR1): the entry says "draining" from now on, reported at once,
 * and gateways place no new task here; the sandboxes here keep running and
 * their tasks keep them. Until the host stops; a no-op without a registry. */
void host_registry_drain(void);
/* --drain-file: checked at every report; the host drains once the file has
 * the line sandgate.io/drain="true" (a downward API annotations file, so
 * `kubectl annotate pod P sandgate.io/drain=true` drains it). Before start. */
void host_registry_drain_file(const char *path);

/* service.c */
int host_service_register(rpc_server *srv, sg_err *err);

#endif
