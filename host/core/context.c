/* context.c — a persistent Python context seen from the host: a queue of
 * runs (one at a time per context), the frame stream from the interpreter,
 * the timeout ladder (SIGINT, then after a grace period kill and restart with
 * its state lost), and what happens when the interpreter dies (out of
 * memory, os._exit, a broken control channel): the run is told, the context
 * restarts empty. Also the context's own lifecycle calls: RestartContext
 * (kill, same id, fresh state) and DeleteContext (kill, gone), both
 * driver-agnostic: KILLCTX to the supervisor and the driver's open_context. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "host/contain/contain.h"
#include "host/host.h"

#define INTERRUPT_GRACE_US (2 * 1000000LL)
#define CODE_MAX (4u << 20)
#define CODE_CHUNK (60 * 1024)
#define ERR_FIELD_MAX (16 * 1024)

static void start_next(host_ctx *c);

host_ctx *host_ctx_find(host_sandbox *sb, const char *id)
{
    for (host_ctx *c = sb->contexts; c; c = c->next)
        if (!c->deleted && strcmp(c->id, id) == 0)
            return c;
    return NULL;
}

/* The languages a context may speak: "python" (the template's interpreter,
 * host/runtime/context.py) and "javascript" (Node, host/runtime/js/). */
int host_ctx_language_ok(const char *language)
{
    return strcmp(language, "python") == 0 || strcmp(language, "javascript") == 0;
}

host_ctx *host_ctx_new(host_sandbox *sb, const char *id)
{
    host_ctx *c = calloc(1, sizeof *c);
    c->sb = sb;
    snprintf(c->id, sizeof c->id, "%s", id);
    snprintf(c->language, sizeof c->language, "python");
    c->state = CTX_STARTING;
    c->created_ms = host_wall_ms();
    c->sock.fd = c->out.fd = c->err.fd = -1;
    c->join_fds[0] = c->join_fds[1] = c->join_fds[2] = -1;
    host_ctx **p = &sb->contexts;
    while (*p)
        p = &(*p)->next;
    *p = c;
    return c;
}

/* ---- events to the client ---- */

static void send_end(host_run *r, int restarted)
{
    Sandgate__V1__End end;
    sandgate__v1__end__init(&end);
    end.duration_us = (uint64_t)(host_now_us() - r->act.started_us);
    end.truncated = r->act.truncated;
    end.output_bytes_total = r->act.output_total;
    end.timed_out = r->act.timed_out;
    end.context_restarted = restarted;
    end.results_dropped = r->results_dropped;
    Sandgate__V1__RunCodeEvent ev;
    sandgate__v1__run_code_event__init(&ev);
    ev.event_case = SANDGATE__V1__RUN_CODE_EVENT__EVENT_END;
    ev.end = &end;
    rpc_call_send_msg(r->act.call, &ev.base);
    rpc_call_finish(r->act.call, GRPC_STATUS_OK, NULL);
}

static void send_error(host_run *r, const char *name, const char *value, size_t vlen,
                       const char *tb, size_t tblen)
{
    Sandgate__V1__Error e;
    sandgate__v1__error__init(&e);
    char *n = strndup(name, 256);
    char *v = strndup(value, vlen < ERR_FIELD_MAX ? vlen : ERR_FIELD_MAX);
    char *t = strndup(tb, tblen < ERR_FIELD_MAX ? tblen : ERR_FIELD_MAX);
    e.name = n;
    e.value = v;
    e.traceback = t;
    Sandgate__V1__RunCodeEvent ev;
    sandgate__v1__run_code_event__init(&ev);
    ev.event_case = SANDGATE__V1__RUN_CODE_EVENT__EVENT_ERROR;
    ev.error = &e;
    rpc_call_send_msg(r->act.call, &ev.base);
    free(n);
    free(v);
    free(t);
}

static void run_free(host_run *r)
{
    host_result_cleanup(&r->result);
    host_action_release(&r->act);
    free(r->code);
    free(r);
}

/* Finish the current run with an error the runtime could not report. */
static void end_run_lost(host_ctx *c, const char *name, const char *why)
{
    host_run *r = c->run;
    if (!r)
        return;
    c->run = NULL;
    host_action_output(&r->act, c->sb, 0, 0, NULL, 0, 1);
    host_action_output(&r->act, c->sb, 0, 1, NULL, 0, 1);
    send_error(r, name, why, strlen(why), "", 0);
    send_end(r, 1);
    run_free(r);
}

/* ---- the interpreter's frames ---- */

static void drain_pipe(host_ctx *c, host_watch *w, int is_err)
{
    uint8_t buf[65536];
    for (int i = 0; i < 64 && w->fd >= 0; i++) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n > 0) {
            if (c->run)
                host_action_output(&c->run->act, c->sb, 0, is_err, buf, (size_t)n, 0);
            continue;
        }
        if (n == 0)
            host_watch_close(w);
        return;
    }
}

static void on_pipe(host_watch *w, uint32_t events)
{
    host_ctx *c = w->owner;
    drain_pipe(c, w, w == &c->err);
}

static void frame_error(host_ctx *c, const uint8_t *p, size_t n)
{
    const char *name = (const char *)p, *end = (const char *)p + n;
    const char *z1 = memchr(name, 0, n);
    const char *value = z1 ? z1 + 1 : end;
    const char *z2 = z1 ? memchr(value, 0, (size_t)(end - value)) : NULL;
    const char *tb = z2 ? z2 + 1 : end;
    size_t vn, tn;
    uint8_t *v = host_redact_all(c->sb, (const uint8_t *)value,
                                 (size_t)((z2 ? z2 : end) - value), &vn);
    uint8_t *t = host_redact_all(c->sb, (const uint8_t *)tb, (size_t)(end - tb), &tn);
    char nm[257];
    snprintf(nm, sizeof nm, "%.*s", (int)(z1 ? z1 - name : 0), name);
    if (!c->run->act.cancelled)
        send_error(c->run, nm[0] ? nm : "Error", (const char *)v, vn, (const char *)t, tn);
    free(v);
    free(t);
}

static void frame_done(host_ctx *c)
{
    host_run *r = c->run;
    host_result_flush(r, c->sb);
    c->run = NULL;
    drain_pipe(c, &c->out, 0);   /* subprocess output written before 'd' */
    drain_pipe(c, &c->err, 1);
    host_action_output(&r->act, c->sb, 0, 0, NULL, 0, 1);
    host_action_output(&r->act, c->sb, 0, 1, NULL, 0, 1);
    send_end(r, 0);
    run_free(r);
    c->state = CTX_IDLE;
    c->sb->last_active_ms = host_wall_ms();
    start_next(c);
}

/* The channel broke or lied: kill the interpreter; CTXEXIT restarts it. */
static void ctx_kill(host_ctx *c, const char *why)
{
    if (c->state == CTX_KILLING || c->state == CTX_DEAD)
        return;
    snprintf(c->lost_reason, sizeof c->lost_reason, "%s", why);
    c->state = CTX_KILLING;
    host_watch_close(&c->sock);
    host_supervisor_send(c->sb, "KILLCTX %s", c->id);
}

static void on_frame(host_ctx *c, const uint8_t *buf, size_t n)
{
    if (!c->run || n == 0) {
        ctx_kill(c, "the context sent output outside a run (its control channel was tampered with); "
                    "the context was restarted and its state was lost");
        return;
    }
    switch (buf[0]) {
    case 'o': host_action_output(&c->run->act, c->sb, 0, 0, buf + 1, n - 1, 0); break;
    case 'e': host_action_output(&c->run->act, c->sb, 0, 1, buf + 1, n - 1, 0); break;
    case 'b': case 'k': case 'r': case 'f': host_result_frame(c->run, c->sb, buf, n); break;
    case 'x': frame_error(c, buf + 1, n - 1); break;
    case 'd': frame_done(c); break;
    default:
        ctx_kill(c, "the context's control channel carried garbage (the code wrote to it); "
                    "the context was restarted and its state was lost");
    }
}

static void on_sock(host_watch *w, uint32_t events)
{
    host_ctx *c = w->owner;
    static uint8_t buf[HOST_FRAME_MAX];   /* loop thread only */
    for (int i = 0; i < 256 && c->sock.fd >= 0; i++) {
        ssize_t n = recv(c->sock.fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0 || (size_t)n > sizeof buf) {
            ctx_kill(c, "the context's control channel was closed or overflowed by the code; "
                        "the context was restarted and its state was lost");
            return;
        }
        on_frame(c, buf, (size_t)n);
    }
}

void host_ctx_attach(host_ctx *c, int sock, int out, int err)
{
    fcntl(sock, F_SETFL, O_NONBLOCK);
    fcntl(out, F_SETFL, O_NONBLOCK);
    fcntl(err, F_SETFL, O_NONBLOCK);
    int sz = 4 << 20;
    setsockopt(sock, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
    host_watch_add(&c->sock, sock, on_sock, c);
    host_watch_add(&c->out, out, on_pipe, c);
    host_watch_add(&c->err, err, on_pipe, c);
    c->state = CTX_IDLE;
    if (c->create_call) {
        Sandgate__V1__Context ctx;
        sandgate__v1__context__init(&ctx);
        ctx.context_id = c->id;
        ctx.language = c->language;
        rpc_call_reply(c->create_call, &ctx.base);
        rpc_call_unref(c->create_call);
        c->create_call = NULL;
    }
    start_next(c);
}

/* ---- runs ---- */

static int send_code(host_ctx *c, const char *code, size_t len)
{
    uint8_t buf[CODE_CHUNK + 1];
    size_t off = 0;
    do {
        size_t k = len - off > CODE_CHUNK ? CODE_CHUNK : len - off;
        buf[0] = off + k < len ? 'c' : 'R';
        memcpy(buf + 1, code + off, k);
        if (send(c->sock.fd, buf, k + 1, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(k + 1))
            return -1;
        off += k;
    } while (off < len);
    return 0;
}

static void start_next(host_ctx *c)
{
    while (c->state == CTX_IDLE && !c->run && c->queue) {
        host_run *r = c->queue;
        c->queue = r->next;
        if (!c->queue)
            c->queue_tail = NULL;
        if (r->act.cancelled) {
            rpc_call_finish(r->act.call, GRPC_STATUS_CANCELLED, "cancelled while queued");
            run_free(r);
            continue;
        }
        /* Time spent queued counts: the deadline is the caller's. */
        c->run = r;
        c->state = CTX_RUNNING;
        c->sb->last_active_ms = host_wall_ms();
        if (send_code(c, r->code, r->code_len) != 0)
            ctx_kill(c, "the context stopped reading its control channel; "
                        "the context was restarted and its state was lost");
    }
}

int host_ctx_submit(host_ctx *c, host_run *r, sg_err *err)
{
    if (r->code_len > CODE_MAX)
        return sg_err_set(err, SG_EINVAL, "code is %zu bytes; the limit is %u", r->code_len,
                          CODE_MAX);
    if (c->state == CTX_DEAD)
        return sg_err_set(err, SG_EUNAVAIL, "context %s is gone: %s", c->id, c->lost_reason);
    if (c->queue_tail)
        c->queue_tail->next = r;
    else
        c->queue = r;
    c->queue_tail = r;
    start_next(c);
    return 0;
}

/* ---- the interpreter ended ---- */

/* Start (or restart) the interpreter: the driver opens it (process: the
 * zygote forks it into the running sandbox; gvisor: CTX to its shim); its
 * fds arrive later. */
void host_ctx_spawn(host_ctx *c)
{
    sg_err err;
    if (c->sb->drv->open_context(c, &err) == 0)
        return;
    /* An internal cause names cgroup paths and syscalls: logged, and the
     * caller gets a fixed text; the others are worded for it ("template ...
     * is restarting; retry"). */
    if (err.code == SG_EINTERNAL)
        sg_log_warn("context %s of %s: %s", c->id, c->sb->id, err.msg);
    host_ctx_failed(c, err.code == SG_EINTERNAL ? "the context could not be started" : err.msg);
}

/* 'a' chunks then a final 'A': the environment and workdir a context takes
 * before any code (PROTOCOL.md section 4), queued on a socket nobody reads
 * yet. It never blocks the loop: the buffer is raised first, and what does
 * not fit fails (-1). */
int host_ctx_send_activation(int fd, const char *json)
{
    size_t n = strlen(json), off = 0;
    int sz = 4 << 20, rc = 0;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
    uint8_t frame[CODE_CHUNK + 1];
    do {
        size_t len = n - off < CODE_CHUNK ? n - off : CODE_CHUNK;
        frame[0] = off + len < n ? 'a' : 'A';
        memcpy(frame + 1, json + off, len);
        if (send(fd, frame, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
            rc = -1;
            break;
        }
        off += len;
    } while (off < n);
    explicit_bzero(frame, sizeof frame);
    return rc;
}

/* JOINED (process driver): the zygote's fork is in the sandbox as pid `pid`
 * there. pid 1 reaps and signals it by that pid from now on. */
void host_ctx_joined(host_ctx *c, int pid)
{
    int *f = c->join_fds;
    c->join_job = 0;
    if (host_supervisor_send(c->sb, "ADOPT %s %d", c->id, pid) != 0) {
        host_ctx_failed(c, "cannot reach the sandbox's supervisor");
        return;
    }
    host_ctx_attach(c, f[0], f[1], f[2]);
    f[0] = f[1] = f[2] = -1;
}

static void restart(host_ctx *c)
{
    host_watch_close(&c->sock);
    host_watch_close(&c->out);
    host_watch_close(&c->err);
    c->state = CTX_STARTING;
    c->restarts++;
    host_metrics_context_restart(c->sb->template_name);
    host_ctx_spawn(c);
}

void host_ctx_exited(host_ctx *c, int code, int sig)
{
    if (c->state == CTX_DEAD)
        return;
    long ooms = sgc_cgroup_oom_kills(H.cfg.cgroup_root, c->sb->cgroup);
    int oom = ooms > c->sb->oom_base;
    if (ooms > 0)
        c->sb->oom_base = ooms;
    if (oom)
        host_metrics_oom(c->sb->template_name);
    if (c->run) {
        char why[512];
        if (oom) {
            snprintf(why, sizeof why,
                     "out of memory: the code exceeded the sandbox's memory limit (%llu MiB) and "
                     "was killed; the context was restarted and its state was lost",
                     (unsigned long long)(c->sb->limits.memory_bytes >> 20));
            end_run_lost(c, "MemoryError", why);
        } else if (sig == SIGSYS) {
            /* The channel may have broken first; the signal says why. */
            end_run_lost(c, "ContextLost",
                         "the code made a system call the sandbox forbids (seccomp) and was "
                         "killed; the context was restarted and its state was lost");
        } else if (sig == SIGINT && c->run->act.interrupted_us) {
            /* Killed by the very interrupt the host sent (timeout or
             * cancel): the code left SIGINT at its default action (Python's
             * signal.signal(SIGINT, SIG_DFL), JS removing every SIGINT
             * listener). That is the timeout ending the run, not a lost
             * context of unknown cause; it outranks CTX_KILLING, which the
             * channel's EOF may have set first (process driver). */
            end_run_lost(c, c->run->act.timed_out ? "TimeoutError" : "ContextLost",
                         "the code was interrupted and its interpreter did not survive the "
                         "interrupt (SIGINT); the context was restarted and its state was lost");
        } else if (c->state == CTX_KILLING && c->lost_reason[0]) {
            end_run_lost(c, c->run->act.timed_out ? "TimeoutError" : "ContextLost", c->lost_reason);
        } else {
            snprintf(why, sizeof why,
                     "the context's interpreter exited (code %d, signal %d); the context was "
                     "restarted and its state was lost", code, sig);
            end_run_lost(c, "ContextLost", why);
        }
    }
    c->lost_reason[0] = 0;
    restart(c);
}

void host_ctx_failed(host_ctx *c, const char *msg)
{
    snprintf(c->lost_reason, sizeof c->lost_reason, "%s", msg);
    if (c->create_call) {
        rpc_call_finish(c->create_call, GRPC_STATUS_UNAVAILABLE, msg);
        rpc_call_unref(c->create_call);
        c->create_call = NULL;
    }
    host_ctx_destroy(c, msg);
}

void host_ctx_destroy(host_ctx *c, const char *why)
{
    c->state = CTX_DEAD;
    c->join_job = 0;   /* a late JOINED finds nobody; the process dies with the sandbox */
    for (int i = 0; i < 3; i++)
        if (c->join_fds[i] >= 0) {
            close(c->join_fds[i]);
            c->join_fds[i] = -1;
        }
    host_watch_close(&c->sock);
    host_watch_close(&c->out);
    host_watch_close(&c->err);
    if (c->create_call) {
        rpc_call_finish(c->create_call, GRPC_STATUS_UNAVAILABLE, why);
        rpc_call_unref(c->create_call);
        c->create_call = NULL;
    }
    if (c->run) {
        rpc_call_finish(c->run->act.call, GRPC_STATUS_UNAVAILABLE, why);
        run_free(c->run);
        c->run = NULL;
    }
    while (c->queue) {
        host_run *r = c->queue;
        c->queue = r->next;
        rpc_call_finish(r->act.call, GRPC_STATUS_UNAVAILABLE, why);
        run_free(r);
    }
    c->queue_tail = NULL;
}

void host_ctx_tick(host_ctx *c, int64_t now)
{
    host_run *r = c->run;
    if (c->state != CTX_RUNNING || !r)
        return;
    if (!r->act.interrupted_us && r->act.deadline_us && now >= r->act.deadline_us) {
        r->act.timed_out = !r->act.cancelled;
        if (r->act.timed_out)
            host_metrics_timeout("run");
        r->act.interrupted_us = now;
        host_supervisor_send(c->sb, "INT %s", c->id);
    } else if (r->act.interrupted_us && now - r->act.interrupted_us >= INTERRUPT_GRACE_US) {
        ctx_kill(c, "the code did not stop within 2 s of the interrupt; the context was killed "
                    "and restarted, and its state was lost");
    }
}

/* The client went away: interrupt a running run, drop a queued one. */
void host_ctx_cancel_call(rpc_call *call)
{
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_ctx *c = sb->contexts; c; c = c->next) {
            if (c->run && c->run->act.call == call && !c->run->act.interrupted_us) {
                c->run->act.cancelled = 1;
                c->run->act.interrupted_us = host_now_us();
                host_supervisor_send(sb, "INT %s", c->id);
                return;
            }
            for (host_run *r = c->queue; r; r = r->next)
                if (r->act.call == call)
                    r->act.cancelled = 1;
        }
}

/* ---- RestartContext / DeleteContext / ListContexts ---- */

/* RestartContext: the run in progress ends now with a clear error (output
 * of the dying interpreter is dropped), KILLCTX goes out, and CTXEXIT
 * restarts it (host_ctx_exited) under the same id; `call` is answered with
 * the Context when the fresh one attaches, as a create is. Queued runs wait
 * for the fresh state. Nothing here blocks: one datagram to the
 * supervisor. */
int host_ctx_restart(host_ctx *c, rpc_call *call, sg_err *err)
{
    if (c->state == CTX_DEAD)
        return sg_err_set(err, SG_EUNAVAIL, "context %s is gone: %s", c->id, c->lost_reason);
    if (c->create_call)
        return sg_err_set(err, SG_EPRECOND, "context %s is %s; retry when it is ready", c->id,
                          c->restarts ? "already restarting" : "still being created");
    c->create_call = rpc_call_ref(call);
    if (c->state == CTX_STARTING || c->state == CTX_KILLING)
        return 0;   /* already coming back empty: answered when it is ready */
    if (c->run)
        end_run_lost(c, "ContextRestarted",
                     "the context was restarted (RestartContext) while this code ran; "
                     "its state was lost");
    ctx_kill(c, "the context was restarted (RestartContext); its state was lost");
    return 0;
}

/* DeleteContext: its runs (in progress and queued) end CANCELLED, its
 * interpreter is killed, and its id is free of lookups at once (a late
 * CTX, CTXEXIT or JOINED for it finds nobody). The struct stays until the
 * tick (host_ctx_reap_deleted): an event of this loop batch may still point
 * at its watches. The default context is the sandbox's own: restart it. */
int host_ctx_delete(host_ctx *c, sg_err *err)
{
    if (strcmp(c->id, "default") == 0)
        return sg_err_set(err, SG_EPRECOND, "context_id: the default context cannot be "
                          "deleted; RestartContext wipes its state");
    char msg[160];
    snprintf(msg, sizeof msg, "context %s was deleted (DeleteContext)", c->id);
    if (c->state != CTX_DEAD)
        host_supervisor_send(c->sb, "KILLCTX %s", c->id);
    if (c->run) {
        host_run *r = c->run;
        c->run = NULL;
        host_action_output(&r->act, c->sb, 0, 0, NULL, 0, 1);
        host_action_output(&r->act, c->sb, 0, 1, NULL, 0, 1);
        rpc_call_finish(r->act.call, GRPC_STATUS_CANCELLED, msg);
        run_free(r);
    }
    while (c->queue) {
        host_run *r = c->queue;
        c->queue = r->next;
        rpc_call_finish(r->act.call, GRPC_STATUS_CANCELLED, msg);
        run_free(r);
    }
    c->queue_tail = NULL;
    if (c->create_call) {
        rpc_call_finish(c->create_call, GRPC_STATUS_CANCELLED, msg);
        rpc_call_unref(c->create_call);
        c->create_call = NULL;
    }
    host_ctx_destroy(c, msg);
    c->deleted = 1;
    return 0;
}

/* From the tick, outside any event batch: free what DeleteContext left. */
void host_ctx_reap_deleted(host_sandbox *sb)
{
    for (host_ctx **p = &sb->contexts; *p;) {
        host_ctx *c = *p;
        if (c->deleted) {
            *p = c->next;
            free(c);
        } else {
            p = &c->next;
        }
    }
}

void host_ctx_fill_info(const host_ctx *c, Sandgate__V1__ContextInfo *out)
{
    sandgate__v1__context_info__init(out);
    out->context_id = (char *)c->id;
    out->language = (char *)c->language;
    out->created_at = c->created_ms;
    out->restarts = (uint32_t)c->restarts;
    switch (c->state) {
    case CTX_STARTING:
        out->state = c->restarts ? SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_RESTARTING
                                 : SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_STARTING;
        break;
    case CTX_IDLE: out->state = SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_IDLE; break;
    case CTX_RUNNING: out->state = SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_RUNNING; break;
    case CTX_KILLING: out->state = SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_RESTARTING; break;
    case CTX_DEAD: out->state = SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_UNSPECIFIED; break;
    }
}
