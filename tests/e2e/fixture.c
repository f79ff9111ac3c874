/* fixture.c — starts and stops the daemons for the e2e tests and wraps the
 * public API in blocking helpers that collect every event of a call.
 *
 * Lifetime: fx_start (group setup) makes a mkdtemp dir, forks a guardian in
 * its own session that waits for EOF on a pipe only we hold, then runs
 * `run.sh start` (also in its own session, so a signal to our process group
 * does not hit the daemons before they can clean up). fx_stop runs
 * `run.sh stop`, removes the dir and closes the pipe. If this program dies
 * (assert abort, crash, CTest timeout SIGKILL) the pipe closes anyway and the
 * guardian runs `run.sh stop` and removes the dir itself. */
#define _GNU_SOURCE
#include "tests/e2e/fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define CALL_TIMEOUT_S 60

static struct {
    char dir[256];          /* mkdtemp run dir; "" when not made */
    char src[512];          /* the source tree (deploy/local) */
    char run_sh[600];
    char build[512];
    char addr[64];
    char secret[96];
    grpc_channel *ch;       /* owned */
    pid_t guardian;
    int guardian_fd;        /* write end; -1 when closed */
    char **created;         /* owned ids from fx_create */
    size_t n_created;
} F = {.guardian_fd = -1};

static const char *const KEYS[] = {
    [FX_DEMO] = "Bearer sg-demo-key-0001",
    [FX_OTHER] = "Bearer sg-other-key-0002",
    [FX_WRONG_KEY] = "Bearer sg-wrong-key-9999",
};

/* ---- buffers ---- */

void fx_buf_add(fx_buf *b, const void *p, size_t n)
{
    b->data = realloc(b->data, b->len + n + 1);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void fx_buf_free(fx_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static void buf_str(fx_buf *b, const char *s)
{
    fx_buf_add(b, s, strlen(s));
}

/* ---- processes and files ---- */

static void print_file(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", F.dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fprintf(stderr, "---- %s\n", path);
    char line[1024];
    while (fgets(line, sizeof line, f))
        fputs(line, stderr);
    fclose(f);
}

/* Run `run.sh <verb>` in a new session with SANDGATE_* set for our dir;
 * its output goes to <dir>/run.sh.out. Returns the exit status. */
static int run_sh(const char *verb)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setsid();
        char out[600], host_cfg[600];
        snprintf(out, sizeof out, "%s/run.sh.out", F.dir);
        snprintf(host_cfg, sizeof host_cfg, "%s/host.yaml", F.dir);
        int fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        setenv("SANDGATE_BUILD", F.build, 1);
        setenv("SANDGATE_RUN_DIR", F.dir, 1);
        setenv("SANDGATE_PORT", "0", 1);
        setenv("SANDGATE_HOST_PORT", "0", 1);
        setenv("SANDGATE_HOST_CONFIG", host_cfg, 1);
        setenv("SANDGATE_TEST_SECRET", F.secret, 1);
        execl("/bin/bash", "bash", F.run_sh, verb, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A process in its own session that stops the daemons and removes the dir
 * once the pipe's write end (held only by us, CLOEXEC) closes. */
static int start_guardian(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setsid();
        dup2(p[0], 0);   /* dup2 clears CLOEXEC on fd 0 */
        int nul = open("/dev/null", O_WRONLY);
        if (nul >= 0) {
            dup2(nul, 1);
            dup2(nul, 2);
        }
        setenv("SANDGATE_BUILD", F.build, 1);
        setenv("SANDGATE_RUN_DIR", F.dir, 1);
        execl("/bin/sh", "sh", "-c",
              "cat >/dev/null; bash \"$0\" stop; "
              "[ -d \"$1\" ] && rm -rf --one-file-system \"$1\"",
              F.run_sh, F.dir, (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    F.guardian = pid;
    F.guardian_fd = p[1];
    return 0;
}

static void stop_guardian(void)
{
    if (F.guardian_fd >= 0)
        close(F.guardian_fd);
    F.guardian_fd = -1;
    if (F.guardian > 0)
        while (waitpid(F.guardian, NULL, 0) < 0 && errno == EINTR)
            ;
    F.guardian = 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    if (remove(path) != 0)
        fprintf(stderr, "e2e: remove(%s): %s\n", path, strerror(errno));
    return 0;
}

static void remove_dir(void)
{
    if (F.dir[0])
        nftw(F.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int write_text(const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", F.dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* tests/drivers.py FILE: FILE's templates for the driver this run asks for
 * (SANDGATE_TEST_DRIVER; e2e_gvisor runs every template under gVisor, e2e
 * drops deploy/local's gvisor template). */
static int rewrite_for_driver(const char *path)
{
    char script[600];
    snprintf(script, sizeof script, "%s/tests/drivers.py", F.src);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execl("/usr/bin/python3", "python3", script, path, (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "e2e: %s %s failed (status %d)\n", script, path, status);
        return -1;
    }
    return 0;
}

/* The host config: deploy/local/host.yaml with runtime_dir moved into our
 * temp dir, so a concurrent run elsewhere never shares the newroot, and its
 * templates on this run's driver. The rest (the name "local" that run.sh's
 * gateway.yaml expects, template names, limits) stays as deployed. */
static int write_host_config(void)
{
    char src[600], line[1024];
    snprintf(src, sizeof src, "%s/deploy/local/host.yaml", F.src);
    FILE *in = fopen(src, "r");
    if (!in) {
        fprintf(stderr, "e2e: fopen(%s): %s\n", src, strerror(errno));
        return -1;
    }
    fx_buf text = {0};
    int replaced = 0;
    while (fgets(line, sizeof line, in)) {
        if (strncmp(line, "runtime_dir:", 12) == 0) {
            snprintf(line, sizeof line, "runtime_dir: %s/rt\n", F.dir);
            replaced = 1;
        }
        buf_str(&text, line);
    }
    fclose(in);
    if (!replaced) {
        char extra[400];
        snprintf(extra, sizeof extra, "runtime_dir: %s/rt\n", F.dir);
        buf_str(&text, extra);
    }
    int rc = write_text("host.yaml", text.data);
    fx_buf_free(&text);
    if (rc == 0) {
        char path[600];
        snprintf(path, sizeof path, "%s/host.yaml", F.dir);
        rc = rewrite_for_driver(path);
    }
    return rc;
}

static int read_port(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", F.dir, name);
    FILE *f = fopen(path, "r");
    int port = -1;
    if (f) {
        if (fscanf(f, "%d", &port) != 1)
            port = -1;
        fclose(f);
    }
    return port;
}

/* ---- setup / teardown ---- */

/* One create + RunCode before any test: a stack that cannot run code fails
 * the group at once with the daemons' logs, instead of every test timing
 * out on its own. */
static int probe(void)
{
    Sandgate__V1__Sandbox *sb = NULL;
    rpc_status st;
    grpc_status_code code = fx_create_as(FX_DEMO, FX_USER, "e2e-probe", 0, NULL, &sb, &st);
    if (code != GRPC_STATUS_OK) {
        fprintf(stderr, "e2e: probe CreateSandbox: %s: %s\n", rpc_status_name(code), st.details);
        return -1;
    }
    fx_run r;
    code = fx_run_code(sb->sandbox_id, "1 + 1", NULL, &r);
    int ok = code == GRPC_STATUS_OK && r.n_results == 1 && strcmp(r.result.data, "2") == 0;
    if (!ok)
        fprintf(stderr, "e2e: probe RunCode(1 + 1): %s: %s, %d results\n", rpc_status_name(code),
                r.st.details, r.n_results);
    fx_run_free(&r);
    fx_kill(FX_DEMO, FX_USER, sb->sandbox_id, NULL);
    sandgate__v1__sandbox__free_unpacked(sb, NULL);
    return ok ? 0 : -1;
}

int fx_start(void **state)
{
    (void)state;
    const char *src = getenv("E2E_SOURCE_DIR"), *build = getenv("E2E_BUILD_DIR");
    snprintf(F.src, sizeof F.src, "%s", src ? src : E2E_SOURCE_DIR);
    snprintf(F.run_sh, sizeof F.run_sh, "%s/deploy/local/run.sh", F.src);
    snprintf(F.build, sizeof F.build, "%s", build ? build : E2E_BUILD_DIR);
    snprintf(F.dir, sizeof F.dir, "/tmp/sandgate-e2e-XXXXXX");
    if (!mkdtemp(F.dir)) {
        fprintf(stderr, "e2e: mkdtemp: %s\n", strerror(errno));
        F.dir[0] = 0;
        return -1;
    }
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    snprintf(F.secret, sizeof F.secret, "e2e-daemon-secret-%d-%08x", getpid(), rand_r(&seed));
    if (write_host_config() != 0 || start_guardian() != 0) {
        fx_stop(state);
        return -1;
    }
    if (run_sh("start") != 0) {
        fprintf(stderr, "e2e: run.sh start failed\n");
        print_file("run.sh.out");
        print_file("host.log");
        print_file("gateway.log");
        fx_stop(state);
        return -1;
    }
    int port = read_port("gateway.port");
    if (port <= 0) {
        fprintf(stderr, "e2e: no gateway port\n");
        fx_stop(state);
        return -1;
    }
    snprintf(F.addr, sizeof F.addr, "127.0.0.1:%d", port);
    grpc_init();
    F.ch = rpc_channel_create(F.addr, NULL);
    if (!F.ch || probe() != 0) {
        print_file("host.log");
        print_file("gateway.log");
        fx_stop(state);
        return -1;
    }
    return 0;
}

int fx_stop(void **state)
{
    (void)state;
    fx_kill_created(state);
    if (F.ch) {
        grpc_channel_destroy(F.ch);
        F.ch = NULL;
        grpc_shutdown();
    }
    int rc = 0;
    if (F.dir[0]) {
        if (run_sh("stop") != 0) {
            fprintf(stderr, "e2e: run.sh stop failed\n");
            rc = -1;
        }
        if (getenv("E2E_KEEP_LOGS")) {
            print_file("host.log");
            print_file("gateway.log");
        }
        remove_dir();
        F.dir[0] = 0;
    }
    stop_guardian();
    return rc;
}

const char *fx_daemon_secret(void)
{
    return F.secret;
}

grpc_channel *fx_channel(void)
{
    return F.ch;
}

/* ---- unary ---- */

grpc_status_code fx_unary(fx_auth a, const char *method, const ProtobufCMessage *req,
                          const ProtobufCMessageDescriptor *resp_d, ProtobufCMessage **out,
                          rpc_status *st)
{
    grpc_metadata md = {0};
    size_t n_md = 0;
    if (a != FX_NO_KEY) {
        md.key = grpc_slice_from_static_string("authorization");
        md.value = grpc_slice_from_static_string(KEYS[a]);
        n_md = 1;
    }
    rpc_status local;
    if (!st)
        st = &local;
    memset(st, 0, sizeof *st);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (out)
        *out = NULL;
    if (rpc_blocking_unary(F.ch, method, &md, n_md, CALL_TIMEOUT_S, req, &buf, &len, st) != 0) {
        st->code = GRPC_STATUS_INTERNAL;
        snprintf(st->details, sizeof st->details, "e2e: rpc_blocking_unary failed locally");
        return st->code;
    }
    if (st->code == GRPC_STATUS_OK && out) {
        *out = protobuf_c_message_unpack(resp_d, NULL, len, buf);
        if (!*out) {
            st->code = GRPC_STATUS_INTERNAL;
            snprintf(st->details, sizeof st->details, "e2e: reply does not decode");
        }
    }
    free(buf);
    return st->code;
}

grpc_status_code fx_create_as(fx_auth a, const char *user, const char *task, unsigned ttl,
                              const char *const *env, Sandgate__V1__Sandbox **out,
                              rpc_status *st)
{
    Sandgate__V1__CreateSandboxRequest req;
    sandgate__v1__create_sandbox_request__init(&req);
    req.template_ = FX_TEMPLATE;
    req.user_id = (char *)user;
    req.task_id = (char *)task;
    req.ttl_seconds = ttl;
    size_t n = 0;
    while (env && env[2 * n])
        n++;
    Sandgate__V1__CreateSandboxRequest__EnvEntry entries[16], *ptrs[16];
    for (size_t i = 0; i < n && i < 16; i++) {
        sandgate__v1__create_sandbox_request__env_entry__init(&entries[i]);
        entries[i].key = (char *)env[2 * i];
        entries[i].value = (char *)env[2 * i + 1];
        ptrs[i] = &entries[i];
    }
    req.n_env = n < 16 ? n : 16;
    req.env = ptrs;
    return fx_unary(a, "/sandgate.v1.Sandboxes/CreateSandbox", &req.base,
                    &sandgate__v1__sandbox__descriptor, (ProtobufCMessage **)out, st);
}

const char *fx_create(const char *task, unsigned ttl, const char *const *env)
{
    Sandgate__V1__Sandbox *sb = NULL;
    rpc_status st;
    grpc_status_code code = fx_create_as(FX_DEMO, FX_USER, task, ttl, env, &sb, &st);
    if (code != GRPC_STATUS_OK)
        fail_msg("CreateSandbox(task %s): %s: %s", task, rpc_status_name(code), st.details);
    F.created = realloc(F.created, (F.n_created + 1) * sizeof *F.created);
    F.created[F.n_created++] = strdup(sb->sandbox_id);
    sandgate__v1__sandbox__free_unpacked(sb, NULL);
    return F.created[F.n_created - 1];
}

grpc_status_code fx_get(fx_auth a, const char *user, const char *id, rpc_status *st)
{
    Sandgate__V1__GetSandboxRequest req;
    sandgate__v1__get_sandbox_request__init(&req);
    req.sandbox_id = (char *)id;
    req.user_id = (char *)user;
    ProtobufCMessage *out = NULL;
    grpc_status_code code = fx_unary(a, "/sandgate.v1.Sandboxes/GetSandbox", &req.base,
                                     &sandgate__v1__sandbox__descriptor, &out, st);
    if (out)
        protobuf_c_message_free_unpacked(out, NULL);
    return code;
}

grpc_status_code fx_kill(fx_auth a, const char *user, const char *id, rpc_status *st)
{
    Sandgate__V1__KillSandboxRequest req;
    sandgate__v1__kill_sandbox_request__init(&req);
    req.sandbox_id = (char *)id;
    req.user_id = (char *)user;
    return fx_unary(a, "/sandgate.v1.Sandboxes/KillSandbox", &req.base,
                    &sandgate__v1__kill_sandbox_response__descriptor, NULL, st);
}

static struct timespec test_started;

int fx_test_begin(void **state)
{
    (void)state;
    clock_gettime(CLOCK_MONOTONIC, &test_started);
    return 0;
}

int fx_test_end(void **state)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    fprintf(stderr, "    (%.2f s)\n", (double)(now.tv_sec - test_started.tv_sec) +
                                        (now.tv_nsec - test_started.tv_nsec) / 1e9);
    return fx_kill_created(state);
}

int fx_kill_created(void **state)
{
    (void)state;
    for (size_t i = 0; i < F.n_created; i++) {
        if (F.ch)
            fx_kill(FX_DEMO, FX_USER, F.created[i], NULL);
        free(F.created[i]);
    }
    free(F.created);
    F.created = NULL;
    F.n_created = 0;
    return 0;
}

char *fx_create_context(const char *sandbox_id)
{
    Sandgate__V1__CreateContextRequest req;
    sandgate__v1__create_context_request__init(&req);
    req.sandbox_id = (char *)sandbox_id;
    req.user_id = FX_USER;
    req.language = "python";
    Sandgate__V1__Context *ctx = NULL;
    rpc_status st;
    grpc_status_code code =
        fx_unary(FX_DEMO, "/sandgate.v1.Sandboxes/CreateContext", &req.base,
                 &sandgate__v1__context__descriptor, (ProtobufCMessage **)&ctx, &st);
    if (code != GRPC_STATUS_OK)
        fail_msg("CreateContext: %s: %s", rpc_status_name(code), st.details);
    char *id = strdup(ctx->context_id);
    sandgate__v1__context__free_unpacked(ctx, NULL);
    return id;
}

/* ---- RunCode ---- */

static void order_add(fx_run *r, const char *tag, const ProtobufCBinaryData *d)
{
    const char *last = NULL;
    for (size_t i = r->order.len; i >= 3 && !last; i--)
        if (r->order.data[i - 3] == '<' && r->order.data[i - 1] == '>')
            last = r->order.data + i - 3;
    if (!last || strncmp(last, tag, 3) != 0)
        buf_str(&r->order, tag);
    fx_buf_add(&r->order, d->data, d->len);
}

static int on_run_event(void *arg, const uint8_t *buf, size_t len)
{
    fx_run *r = arg;
    Sandgate__V1__RunCodeEvent *ev = sandgate__v1__run_code_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    if (r->n_ends)
        r->events_after_end++;
    switch (ev->event_case) {
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_STDOUT:
        fx_buf_add(&r->out, ev->stdout->data.data, ev->stdout->data.len);
        order_add(r, "<O>", &ev->stdout->data);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_STDERR:
        fx_buf_add(&r->err, ev->stderr->data.data, ev->stderr->data.len);
        order_add(r, "<E>", &ev->stderr->data);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_RESULT:
        r->n_results++;
        snprintf(r->result_mime, sizeof r->result_mime, "%s", ev->result->mime_type);
        fx_buf_free(&r->result);
        fx_buf_add(&r->result, ev->result->data.data, ev->result->data.len);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_ERROR:
        r->n_errors++;
        fx_buf_free(&r->err_name);
        fx_buf_free(&r->err_value);
        fx_buf_free(&r->err_tb);
        buf_str(&r->err_name, ev->error->name);
        buf_str(&r->err_value, ev->error->value);
        buf_str(&r->err_tb, ev->error->traceback);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_END:
        r->n_ends++;
        r->duration_us = ev->end->duration_us;
        r->output_bytes_total = ev->end->output_bytes_total;
        r->truncated = ev->end->truncated;
        r->timed_out = ev->end->timed_out;
        r->context_restarted = ev->end->context_restarted;
        break;
    default:
        break;
    }
    sandgate__v1__run_code_event__free_unpacked(ev, NULL);
    return 0;
}

grpc_status_code fx_run_code(const char *sandbox_id, const char *code, const fx_run_req *opt,
                             fx_run *r)
{
    static const fx_run_req defaults = {0};
    if (!opt)
        opt = &defaults;
    memset(r, 0, sizeof *r);
    fx_buf_add(&r->out, "", 0);
    fx_buf_add(&r->err, "", 0);
    fx_buf_add(&r->order, "", 0);
    fx_buf_add(&r->result, "", 0);
    Sandgate__V1__RunCodeRequest req;
    sandgate__v1__run_code_request__init(&req);
    req.sandbox_id = (char *)sandbox_id;
    req.user_id = (char *)(opt->user ? opt->user : FX_USER);
    req.context_id = (char *)(opt->context_id ? opt->context_id : "");
    req.code = (char *)code;
    req.timeout_seconds = opt->timeout;
    req.max_output_bytes = opt->max_output;
    grpc_metadata md = {0};
    size_t n_md = 0;
    if (opt->auth != FX_NO_KEY) {
        md.key = grpc_slice_from_static_string("authorization");
        md.value = grpc_slice_from_static_string(KEYS[opt->auth]);
        n_md = 1;
    }
    if (rpc_blocking_stream(F.ch, "/sandgate.v1.Sandboxes/RunCode", &md, n_md, CALL_TIMEOUT_S,
                            &req.base, on_run_event, r, &r->st) != 0) {
        r->st.code = GRPC_STATUS_INTERNAL;
        snprintf(r->st.details, sizeof r->st.details, "e2e: rpc_blocking_stream failed locally");
    }
    return r->st.code;
}

void fx_run_free(fx_run *r)
{
    fx_buf_free(&r->out);
    fx_buf_free(&r->err);
    fx_buf_free(&r->order);
    fx_buf_free(&r->result);
    fx_buf_free(&r->err_name);
    fx_buf_free(&r->err_value);
    fx_buf_free(&r->err_tb);
}

/* ---- Exec ---- */

static int on_exec_event(void *arg, const uint8_t *buf, size_t len)
{
    fx_exec *r = arg;
    Sandgate__V1__ExecEvent *ev = sandgate__v1__exec_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_STDOUT) {
        fx_buf_add(&r->out, ev->stdout->data.data, ev->stdout->data.len);
    } else if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_STDERR) {
        fx_buf_add(&r->err, ev->stderr->data.data, ev->stderr->data.len);
    } else if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_EXIT) {
        r->n_exits++;
        r->exit_code = ev->exit->exit_code;
        r->signal = ev->exit->signal;
        r->timed_out = ev->exit->timed_out;
    }
    sandgate__v1__exec_event__free_unpacked(ev, NULL);
    return 0;
}

grpc_status_code fx_exec_cmd(const char *sandbox_id, const char *command, fx_exec *r)
{
    memset(r, 0, sizeof *r);
    fx_buf_add(&r->out, "", 0);
    fx_buf_add(&r->err, "", 0);
    Sandgate__V1__ExecRequest req;
    sandgate__v1__exec_request__init(&req);
    req.sandbox_id = (char *)sandbox_id;
    req.user_id = FX_USER;
    req.command = (char *)command;
    req.timeout_seconds = 20;
    grpc_metadata md = {.key = grpc_slice_from_static_string("authorization"),
                        .value = grpc_slice_from_static_string(KEYS[FX_DEMO])};
    if (rpc_blocking_stream(F.ch, "/sandgate.v1.Sandboxes/Exec", &md, 1, CALL_TIMEOUT_S,
                            &req.base, on_exec_event, r, &r->st) != 0) {
        r->st.code = GRPC_STATUS_INTERNAL;
        snprintf(r->st.details, sizeof r->st.details, "e2e: rpc_blocking_stream failed locally");
    }
    return r->st.code;
}

void fx_exec_free(fx_exec *r)
{
    fx_buf_free(&r->out);
    fx_buf_free(&r->err);
}

/* ---- files ---- */

grpc_status_code fx_write_file(const char *sandbox_id, const char *path, const void *data,
                               size_t len, uint64_t *written, rpc_status *st)
{
    Sandgate__V1__WriteFileRequest req;
    sandgate__v1__write_file_request__init(&req);
    req.sandbox_id = (char *)sandbox_id;
    req.user_id = FX_USER;
    req.path = (char *)path;
    req.data.data = (uint8_t *)data;
    req.data.len = len;
    Sandgate__V1__WriteFileResponse *resp = NULL;
    grpc_status_code code =
        fx_unary(FX_DEMO, "/sandgate.v1.Sandboxes/WriteFile", &req.base,
                 &sandgate__v1__write_file_response__descriptor, (ProtobufCMessage **)&resp, st);
    if (resp) {
        if (written)
            *written = resp->bytes_written;
        sandgate__v1__write_file_response__free_unpacked(resp, NULL);
    }
    return code;
}

grpc_status_code fx_read_file(const char *sandbox_id, const char *path, fx_buf *data,
                              rpc_status *st)
{
    Sandgate__V1__ReadFileRequest req;
    sandgate__v1__read_file_request__init(&req);
    req.sandbox_id = (char *)sandbox_id;
    req.user_id = FX_USER;
    req.path = (char *)path;
    Sandgate__V1__ReadFileResponse *resp = NULL;
    grpc_status_code code =
        fx_unary(FX_DEMO, "/sandgate.v1.Sandboxes/ReadFile", &req.base,
                 &sandgate__v1__read_file_response__descriptor, (ProtobufCMessage **)&resp, st);
    if (resp) {
        fx_buf_add(data, resp->data.data, resp->data.len);
        sandgate__v1__read_file_response__free_unpacked(resp, NULL);
    }
    return code;
}
