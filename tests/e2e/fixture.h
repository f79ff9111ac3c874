/* fixture.h — the e2e tests' world: one sandgate-host + sandgate gateway
 * started by deploy/local/run.sh on ephemeral loopback ports in a mkdtemp
 * dir, and blocking helpers that call the public API through the gateway and
 * collect what comes back. The fixture owns the daemons, the temp dir and a
 * guardian process that stops the daemons if the test program dies. */
#ifndef SG_E2E_FIXTURE_H
#define SG_E2E_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc.h"
#include "sandgate/v1/sandgate.pb-c.h"

#define FX_USER "alice"
#define FX_TEMPLATE "code-interpreter"

/* Which credentials a call carries. */
typedef enum { FX_DEMO, FX_OTHER, FX_WRONG_KEY, FX_NO_KEY } fx_auth;

/* ---- daemons (cmocka group setup / teardown) ---- */
int fx_start(void **state);
int fx_stop(void **state);
/* Per-test setup / teardown: note the start; print the time taken and kill
 * every sandbox fx_create made (ignoring NOT_FOUND). */
int fx_test_begin(void **state);
int fx_test_end(void **state);
int fx_kill_created(void **state);
/* The random value of SANDGATE_TEST_SECRET in the daemons' environment. */
const char *fx_daemon_secret(void);
grpc_channel *fx_channel(void);

/* ---- growable byte buffer ---- */
typedef struct fx_buf {
    char *data;   /* owned; always NUL-terminated */
    size_t len;
} fx_buf;
void fx_buf_add(fx_buf *b, const void *p, size_t n);
void fx_buf_free(fx_buf *b);

/* ---- unary calls ---- */
/* Returns the status code; *out (may be NULL) gets the decoded reply on OK. */
grpc_status_code fx_unary(fx_auth a, const char *method, const ProtobufCMessage *req,
                          const ProtobufCMessageDescriptor *resp_d, ProtobufCMessage **out,
                          rpc_status *st);

/* env: "K", "V", "K2", "V2", ..., NULL (or NULL for none). */
grpc_status_code fx_create_as(fx_auth a, const char *user, const char *task, unsigned ttl,
                              const char *const *env, Sandgate__V1__Sandbox **out,
                              rpc_status *st);
/* Create as demo/alice; fails the test unless OK. Returns the id (owned by
 * the fixture, valid until fx_kill_created). */
const char *fx_create(const char *task, unsigned ttl, const char *const *env);
grpc_status_code fx_get(fx_auth a, const char *user, const char *id, rpc_status *st);
grpc_status_code fx_kill(fx_auth a, const char *user, const char *id, rpc_status *st);
/* CreateContext as demo/alice; fails the test unless OK. Returns a malloc'd id. */
char *fx_create_context(const char *sandbox_id);

/* ---- RunCode ---- */
typedef struct fx_run {
    rpc_status st;
    fx_buf out, err;         /* stdout / stderr bytes as received */
    fx_buf order;            /* "<O>" / "<E>" at each switch of stream, then the bytes */
    int n_results;
    char result_mime[64];    /* of the last result */
    fx_buf result;           /* data of the last result */
    int n_errors;
    fx_buf err_name, err_value, err_tb;
    int n_ends, events_after_end;
    uint64_t duration_us, output_bytes_total;
    int truncated, timed_out, context_restarted;
} fx_run;

typedef struct fx_run_req {
    fx_auth auth;            /* FX_DEMO when zero */
    const char *user;        /* FX_USER when NULL */
    const char *context_id;  /* NULL = default */
    unsigned timeout;
    uint64_t max_output;
} fx_run_req;

/* Runs code and collects every event into *r (zeroed first). Returns r->st.code. */
grpc_status_code fx_run_code(const char *sandbox_id, const char *code, const fx_run_req *opt,
                             fx_run *r);
void fx_run_free(fx_run *r);

/* ---- Exec ---- */
typedef struct fx_exec {
    rpc_status st;
    fx_buf out, err;
    int n_exits;
    int exit_code, signal, timed_out;
} fx_exec;
grpc_status_code fx_exec_cmd(const char *sandbox_id, const char *command, fx_exec *r);
void fx_exec_free(fx_exec *r);

/* ---- files (demo/alice) ---- */
grpc_status_code fx_write_file(const char *sandbox_id, const char *path, const void *data,
                               size_t len, uint64_t *written, rpc_status *st);
grpc_status_code fx_read_file(const char *sandbox_id, const char *path, fx_buf *data,
                              rpc_status *st);

/* ---- the host's view of a sandbox (host_view.c) ---- */
/* The sandbox's cgroup dir (pids controller on v1, the unified dir on v2). */
void fx_cgroup_dir(const char *sandbox_id, char *buf, size_t len);
/* Host pids in the sandbox's cgroup; returns how many (0 if the cgroup is gone). */
size_t fx_cgroup_pids(const char *sandbox_id, int *pids, size_t max);
/* A process named by pid and start time (pids wrap fast on a busy host). */
typedef struct fx_proc {
    int pid;
    unsigned long long start;
} fx_proc;
typedef enum { FX_PID_GONE, FX_PID_ZOMBIE, FX_PID_EXITING, FX_PID_ALIVE } fx_pid_state;
size_t fx_sandbox_procs(const char *sandbox_id, fx_proc *procs, size_t max);
fx_pid_state fx_proc_state(const fx_proc *p);
/* "cmdline | stat | pids cgroup", for failure messages. */
void fx_proc_describe(int pid, char *buf, size_t len);

#endif
