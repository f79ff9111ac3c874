/* proc.c — a sandbox's background processes (Exec with background or pty):
 * started by the supervisor (PROC, host/runtime/PROTOCOL.md section 3),
 * their output kept in one bounded ring per stream (the newest
 * max_output_bytes, redacted as exec output is), the attachers that stream
 * it from an offset, stdin, signals, PTY sizes, waits and timeouts.
 *
 * Nothing here waits on the process: stdin is a non-blocking fd with a
 * bounded buffer (SendInput past it is RESOURCE_EXHAUSTED), and an attacher
 * has at most PROC_INFLIGHT messages queued; it reads on from the ring at
 * its own pace, and output the ring lost before it got there is reported
 * as `dropped`. Sends completing wake the loop through an eventfd, which
 * pumps the attachers again. Exec-stream plumbing and caps are output.c's;
 * the supervisor channel is sandbox.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/log.h"
#include "common/procargs.h"
#include "host/host.h"

#define PROC_RING_DEFAULT (1u << 20)
#define PROC_RING_MAX (64u << 20)    /* whatever the gateway sent */
#define PROC_CHUNK (64u << 10)
#define PROC_INFLIGHT 2              /* messages queued per attacher */
#define PROC_KEEP_EXITED 64
#define PROC_MAX_DEFAULT 16
#define PROC_COMMAND_MAX 3000

typedef enum { P_STARTING, P_RUNNING, P_EXITED } p_state;

/* The newest cap bytes of a stream; offset o lives at buf[o % cap]. The
 * buffer grows as output comes, up to cap. */
typedef struct ring {
    uint8_t *buf;            /* owned */
    size_t alloc, cap;
    uint64_t end;            /* bytes the stream produced: the next byte's offset */
} ring;

typedef struct attacher {
    struct attacher *next;
    rpc_call *call;          /* owned ref while listed */
    int exec;                /* the Exec stream of a foreground PTY exec: ExecEvents */
    uint64_t pos[2];         /* next offset to send, per stream */
    atomic_int inflight;     /* messages queued, not yet on the wire */
    atomic_int refs;         /* the list's, and one per message in flight */
    atomic_int failed;       /* a send failed: the client is gone */
    int finished;            /* its status is queued (send_exit or at_remove) */
} attacher;

typedef struct waiter {
    struct waiter *next;
    rpc_call *call;          /* owned ref */
    int64_t deadline_us;
} waiter;

struct host_proc {
    host_proc *next;
    host_sandbox *sb;        /* borrowed: the owner */
    char id[16];
    char *command;           /* owned */
    int pty, fg;             /* fg: a foreground PTY exec, killed when its call goes */
    uint32_t rows, cols;
    p_state state;
    host_watch in, out, err; /* fd -1 when closed */
    ring ring[2];            /* stdout, stderr */
    host_stream hold[2];     /* redaction hold-back */
    uint8_t *inbuf;          /* owned: stdin the process has not read yet */
    size_t in_n;
    int close_after;         /* close stdin once inbuf is written */
    int stdin_closed;
    int64_t started_ms, ended_ms, started_us, ended_us, deadline_us;
    int kill_sent, timed_out, exit_code, signal;
    int exit_seen;           /* EXIT came; output fds still open: until EOF or exit_grace_us */
    int64_t exit_grace_us;
    rpc_call *start_call;    /* owned ref: the Exec, until PROC or PROCERR */
    attacher *attachers;
    waiter *waiters;
};

static host_watch wake = {.fd = -1};
static atomic_int wake_fd = -1;

/* ---- the ring ---- */

static uint64_t ring_oldest(const ring *r) { return r->end > r->cap ? r->end - r->cap : 0; }

static void ring_put(ring *r, const uint8_t *d, size_t n)
{
    if (n > r->cap) {   /* only the newest cap bytes can be kept */
        r->end += n - r->cap;
        d += n - r->cap;
        n = r->cap;
    }
    uint64_t need = r->end + n < r->cap ? r->end + n : r->cap;
    if (need > r->alloc) {
        size_t a = r->alloc ? r->alloc * 2 : 16384;
        if (a < need)
            a = (size_t)need;
        if (a > r->cap)
            a = r->cap;
        uint8_t *nb = realloc(r->buf, a);
        if (!nb) {   /* out of memory: the bytes are lost, and reported as dropped */
            r->end += n + r->cap;
            return;
        }
        r->buf = nb;
        r->alloc = a;
    }
    while (n) {
        size_t idx = (size_t)(r->end % r->cap), k = r->cap - idx < n ? r->cap - idx : n;
        memcpy(r->buf + idx, d, k);
        d += k;
        n -= k;
        r->end += k;
    }
}

/* ---- lookups and info ---- */

host_proc *host_proc_find(host_sandbox *sb, const char *id)
{
    for (host_proc *p = sb->procs; p; p = p->next)
        if (strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

static void fill_exit(const host_proc *p, Sandgate__V1__ExecExit *x)
{
    sandgate__v1__exec_exit__init(x);
    x->exit_code = p->signal ? -1 : p->exit_code;
    x->signal = p->signal;
    x->timed_out = p->timed_out;
    x->truncated = p->ring[0].end > p->ring[0].cap || p->ring[1].end > p->ring[1].cap;
    x->output_bytes_total = p->ring[0].end + p->ring[1].end;
    x->duration_us = (uint64_t)(p->ended_us - p->started_us);
}

static void fill_info(const host_proc *p, Sandgate__V1__ProcessInfo *o, Sandgate__V1__ExecExit *x)
{
    sandgate__v1__process_info__init(o);
    o->process_id = (char *)p->id;
    o->command = p->command;
    o->state = p->state == P_STARTING  ? SANDGATE__V1__PROCESS_STATE__PROCESS_STATE_STARTING
               : p->state == P_RUNNING ? SANDGATE__V1__PROCESS_STATE__PROCESS_STATE_RUNNING
                                       : SANDGATE__V1__PROCESS_STATE__PROCESS_STATE_EXITED;
    o->pty = p->pty;
    o->pty_rows = p->pty ? p->rows : 0;
    o->pty_cols = p->pty ? p->cols : 0;
    o->started_at = p->started_ms;
    o->ended_at = p->ended_ms;
    o->stdout_bytes = p->ring[0].end;
    o->stderr_bytes = p->ring[1].end;
    o->stdin_closed = p->stdin_closed || p->close_after;
    if (p->state == P_EXITED) {
        fill_exit(p, x);
        o->exit = x;
    }
}

static void reply_info(rpc_call *c, const host_proc *p)
{
    Sandgate__V1__ProcessInfo o;
    Sandgate__V1__ExecExit x;
    fill_info(p, &o, &x);
    rpc_call_reply(c, &o.base);
}

static void fail(rpc_call *c, int code, const char *fmt, const char *arg)
{
    sg_err e;
    sg_err_set(&e, code, fmt, arg);
    rpc_call_fail(c, &e);
}

/* ---- attachers ---- */

static void at_unref(attacher *a)
{
    if (atomic_fetch_sub(&a->refs, 1) == 1)
        free(a);
}

/* Any thread, any lock held (rpc_call_send may call it inline): atomics
 * and an eventfd write only. */
static void on_sent(void *arg, int ok)
{
    attacher *a = arg;
    if (!ok)
        atomic_store(&a->failed, 1);
    atomic_fetch_sub(&a->inflight, 1);
    int fd = atomic_load(&wake_fd);
    uint64_t one = 1;
    if (fd >= 0 && write(fd, &one, sizeof one) < 0) {
        /* the counter is saturated: a wake is pending anyway */
    }
    at_unref(a);
}

static int at_send(attacher *a, const ProtobufCMessage *m)
{
    atomic_fetch_add(&a->inflight, 1);
    atomic_fetch_add(&a->refs, 1);
    if (rpc_call_send(a->call, rpc_pack(m), on_sent, a) == 0)
        return 0;
    atomic_fetch_sub(&a->inflight, 1);
    atomic_fetch_sub(&a->refs, 1);
    atomic_store(&a->failed, 1);
    return -1;
}

static void send_output(attacher *a, int s, uint64_t off, const uint8_t *d, size_t n)
{
    if (a->exec) {
        Sandgate__V1__OutputChunk ch;
        sandgate__v1__output_chunk__init(&ch);
        ch.data.data = (uint8_t *)d;
        ch.data.len = n;
        Sandgate__V1__ExecEvent ev;
        sandgate__v1__exec_event__init(&ev);
        ev.event_case = s ? SANDGATE__V1__EXEC_EVENT__EVENT_STDERR
                          : SANDGATE__V1__EXEC_EVENT__EVENT_STDOUT;
        if (s)
            ev.stderr = &ch;
        else
            ev.stdout = &ch;
        at_send(a, &ev.base);
        return;
    }
    Sandgate__V1__ProcessOutput o;
    sandgate__v1__process_output__init(&o);
    o.offset = off;
    o.data.data = (uint8_t *)d;
    o.data.len = n;
    Sandgate__V1__ProcessEvent ev;
    sandgate__v1__process_event__init(&ev);
    ev.event_case = s ? SANDGATE__V1__PROCESS_EVENT__EVENT_STDERR
                      : SANDGATE__V1__PROCESS_EVENT__EVENT_STDOUT;
    if (s)
        ev.stderr = &o;
    else
        ev.stdout = &o;
    at_send(a, &ev.base);
}

/* Output this attacher will never get; an Exec stream has no event for it
 * (its exit says truncated). */
static void send_dropped(attacher *a, int s, uint64_t off, uint64_t n)
{
    if (a->exec || !n)
        return;
    Sandgate__V1__OutputDropped d;
    sandgate__v1__output_dropped__init(&d);
    d.stderr = s;
    d.offset = off;
    d.bytes = n;
    Sandgate__V1__ProcessEvent ev;
    sandgate__v1__process_event__init(&ev);
    ev.event_case = SANDGATE__V1__PROCESS_EVENT__EVENT_DROPPED;
    ev.dropped = &d;
    at_send(a, &ev.base);
}

static void send_exit(attacher *a, const host_proc *p)
{
    Sandgate__V1__ExecExit x;
    fill_exit(p, &x);
    grpc_byte_buffer *bb;
    if (a->exec) {
        Sandgate__V1__ExecEvent ev;
        sandgate__v1__exec_event__init(&ev);
        ev.event_case = SANDGATE__V1__EXEC_EVENT__EVENT_EXIT;
        ev.exit = &x;
        bb = rpc_pack(&ev.base);
    } else {
        Sandgate__V1__ProcessEvent ev;
        sandgate__v1__process_event__init(&ev);
        ev.event_case = SANDGATE__V1__PROCESS_EVENT__EVENT_EXIT;
        ev.exit = &x;
        bb = rpc_pack(&ev.base);
    }
    rpc_call_finish_msg(a->call, bb, GRPC_STATUS_OK, NULL);
    a->finished = 1;
}

/* Send what the attacher may; 1 when it is finished (remove it). */
static int pump(host_proc *p, attacher *a)
{
    if (atomic_load(&a->failed) || rpc_call_cancelled(a->call))
        return 1;
    while (atomic_load(&a->inflight) < PROC_INFLIGHT) {
        int s = p->ring[0].end > a->pos[0] ? 0 : p->ring[1].end > a->pos[1] ? 1 : -1;
        if (s < 0) {
            if (p->state != P_EXITED)
                return 0;
            send_exit(a, p);
            return 1;
        }
        ring *r = &p->ring[s];
        uint64_t old = ring_oldest(r);
        if (a->pos[s] < old) {
            send_dropped(a, s, a->pos[s], old - a->pos[s]);
            a->pos[s] = old;
            continue;
        }
        size_t idx = (size_t)(a->pos[s] % r->cap);
        uint64_t k = r->end - a->pos[s];
        if (k > r->cap - idx)
            k = r->cap - idx;
        if (k > PROC_CHUNK)
            k = PROC_CHUNK;
        send_output(a, s, a->pos[s], r->buf + idx, (size_t)k);
        a->pos[s] += k;
    }
    return 0;
}

static void at_remove(host_proc *p, attacher **link)
{
    attacher *a = *link;
    *link = a->next;
    /* Every dispatched call gets a status, even one whose client is gone
     * (it goes nowhere then): without it the call and the server leak. */
    if (!a->finished)
        rpc_call_finish(a->call, GRPC_STATUS_CANCELLED, "the attach ended");
    rpc_call_unref(a->call);
    a->call = NULL;
    at_unref(a);
}

static void pump_proc(host_proc *p)
{
    for (attacher **l = &p->attachers; *l;) {
        if (pump(p, *l))
            at_remove(p, l);
        else
            l = &(*l)->next;
    }
}

static void on_wake(host_watch *w, uint32_t events)
{
    uint64_t v;
    if (read(w->fd, &v, sizeof v) < 0) {
        /* EAGAIN: another wake took it */
    }
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_proc *p = sb->procs; p; p = p->next)
            pump_proc(p);
}

static int ensure_wake(void)
{
    if (wake.fd >= 0)
        return 0;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0 || host_watch_add(&wake, fd, on_wake, NULL) != 0) {
        if (fd >= 0)
            close(fd);
        wake.fd = -1;
        return -1;
    }
    atomic_store(&wake_fd, fd);
    return 0;
}

static attacher *attach(host_proc *p, rpc_call *call, int exec, uint64_t out_off,
                        uint64_t err_off)
{
    attacher *a = calloc(1, sizeof *a);
    a->call = rpc_call_ref(call);
    a->exec = exec;
    a->pos[0] = out_off;
    a->pos[1] = err_off;
    atomic_init(&a->refs, 1);
    a->next = p->attachers;
    p->attachers = a;
    return a;
}

/* ---- output and stdin ---- */

static void store(host_proc *p, int s, const uint8_t *d, size_t n, int final)
{
    if (p->sb->n_secrets == 0) {
        if (n)
            ring_put(&p->ring[s], d, n);
        return;
    }
    size_t out_n;
    uint8_t *out = host_redact_stream(p->sb, &p->hold[s], d, n, final, &out_n);
    if (out_n)
        ring_put(&p->ring[s], out, out_n);
    free(out);
}

static void drain(host_proc *p, host_watch *w)
{
    uint8_t buf[65536];
    for (int i = 0; i < 16 && w->fd >= 0; i++) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n > 0) {
            store(p, w == &p->err, buf, (size_t)n, 0);
            continue;
        }
        /* EIO: a PTY whose last slave fd closed */
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            host_watch_close(w);
        return;
    }
}

static void end(host_proc *p, int code, int sig);

/* After EXIT: once both output fds reached EOF, or at the grace's end (a
 * child it left behind may hold them open), the process has ended. A
 * driver that relays output (gVisor) may deliver its last bytes after EXIT. */
static void finish_exit(host_proc *p, int force)
{
    if (!p->exit_seen || p->state == P_EXITED)
        return;
    if (!force && (p->out.fd >= 0 || p->err.fd >= 0))
        return;
    drain(p, &p->out);
    drain(p, &p->err);
    host_watch_close(&p->out);
    host_watch_close(&p->err);
    end(p, p->exit_code, p->signal);
    pump_proc(p);
}

static void on_output(host_watch *w, uint32_t events)
{
    host_proc *p = w->owner;
    drain(p, w);
    finish_exit(p, 0);
    pump_proc(p);
}

static void stdin_close(host_proc *p)
{
    host_watch_close(&p->in);
    free(p->inbuf);
    p->inbuf = NULL;
    p->in_n = 0;
    p->stdin_closed = 1;
}

static void in_flush(host_proc *p)
{
    while (p->in_n && p->in.fd >= 0) {
        ssize_t n = write(p->in.fd, p->inbuf, p->in_n);
        if (n > 0) {
            memmove(p->inbuf, p->inbuf + n, p->in_n - (size_t)n);
            p->in_n -= (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            break;
        } else {
            stdin_close(p);   /* EPIPE: the process closed its stdin */
            return;
        }
    }
    if (p->in.fd < 0)
        return;
    if (!p->in_n && p->close_after) {
        stdin_close(p);
        return;
    }
    host_watch_set_events(&p->in, p->in_n ? EPOLLOUT : 0);
}

static void on_stdin(host_watch *w, uint32_t events)
{
    host_proc *p = w->owner;
    if (events & (EPOLLERR | EPOLLHUP))
        stdin_close(p);
    else
        in_flush(p);
}

/* ---- start, exit, teardown ---- */

int host_proc_start(host_sandbox *sb, const Sandgate__V1__ExecRequest *r, rpc_call *call,
                    sg_err *err)
{
    size_t clen = strlen(r->command);
    if (clen > PROC_COMMAND_MAX)
        return sg_err_set(err, SG_EINVAL, "command is %zu bytes; the limit is %d (write a script "
                                          "with WriteFile for more)", clen, PROC_COMMAND_MAX);
    if (!clen)
        return sg_err_set(err, SG_EINVAL, "command is empty");
    if (sg_proc_check_pty(r->pty, r->pty_rows, r->pty_cols, err) != 0)
        return SG_EINVAL;
    uint32_t max = sb->limits.max_processes ? sb->limits.max_processes : PROC_MAX_DEFAULT;
    uint32_t live = 0;
    for (host_proc *p = sb->procs; p; p = p->next)
        live += p->state != P_EXITED;
    if (live >= max)
        return sg_err_set(err, SG_EQUOTA, "the sandbox runs %u processes, its limit "
                          "(limits.processes); wait for or signal one first", live);
    if (ensure_wake() != 0)
        return sg_err_set(err, SG_EINTERNAL, "cannot start a process now");
    host_proc *p = calloc(1, sizeof *p);
    p->sb = sb;
    p->in.fd = p->out.fd = p->err.fd = -1;
    snprintf(p->id, sizeof p->id, "p%u", ++sb->proc_seq);
    p->pty = r->pty;
    p->fg = !r->background;
    p->rows = r->pty_rows ? r->pty_rows : SG_PROC_PTY_ROWS_DEFAULT;
    p->cols = r->pty_cols ? r->pty_cols : SG_PROC_PTY_COLS_DEFAULT;
    uint64_t cap = r->max_output_bytes ? r->max_output_bytes : PROC_RING_DEFAULT;
    p->ring[0].cap = p->ring[1].cap = cap < PROC_RING_MAX ? (size_t)cap : PROC_RING_MAX;
    p->started_ms = host_wall_ms();
    p->started_us = host_now_us();
    if (r->timeout_seconds)
        p->deadline_us = p->started_us + (int64_t)r->timeout_seconds * 1000000;
    if (p->fg) {   /* an Exec stream: its client's deadline bounds it too */
        double left = rpc_deadline_left(rpc_call_deadline(call));
        int64_t d = p->started_us + (int64_t)(left * 1e6);
        if (left < 1e9 && (!p->deadline_us || d < p->deadline_us))
            p->deadline_us = d;
    }
    if (host_supervisor_send(sb, "PROC %s %c %u %u %s", p->id, p->pty ? 't' : 'p', p->rows,
                             p->cols, r->command) != 0) {
        free(p);
        return sg_err_set(err, SG_EUNAVAIL, "cannot reach the sandbox's supervisor");
    }
    p->command = strdup(r->command);
    p->start_call = rpc_call_ref(call);
    host_proc **tail = &sb->procs;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    sb->last_active_ms = host_wall_ms();
    return 0;
}

void host_proc_started(host_proc *p, int *fds, int nfds)
{
    if (p->state != P_STARTING || nfds != (p->pty ? 2 : 3)) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return;
    }
    for (int i = 0; i < nfds; i++)
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
    p->state = P_RUNNING;
    host_watch_add_events(&p->in, fds[0], on_stdin, p, 0);
    host_watch_add(&p->out, fds[1], on_output, p);
    if (!p->pty)
        host_watch_add(&p->err, fds[2], on_output, p);
    Sandgate__V1__ProcessStarted st;
    sandgate__v1__process_started__init(&st);
    st.process_id = p->id;
    Sandgate__V1__ExecEvent ev;
    sandgate__v1__exec_event__init(&ev);
    ev.event_case = SANDGATE__V1__EXEC_EVENT__EVENT_STARTED;
    ev.started = &st;
    if (p->fg) {   /* the Exec stream goes on as this process's attacher */
        rpc_call_send_msg(p->start_call, &ev.base);
        attach(p, p->start_call, 1, 0, 0);
    } else {
        rpc_call_finish_msg(p->start_call, rpc_pack(&ev.base), GRPC_STATUS_OK, NULL);
    }
    rpc_call_unref(p->start_call);
    p->start_call = NULL;
}

static void end(host_proc *p, int code, int sig)
{
    p->state = P_EXITED;
    p->exit_code = code;
    p->signal = sig;
    p->ended_ms = host_wall_ms();
    p->ended_us = host_now_us();
    store(p, 0, NULL, 0, 1);
    store(p, 1, NULL, 0, 1);
    stdin_close(p);
    for (waiter *w = p->waiters, *n; w; w = n) {
        n = w->next;
        reply_info(w->call, p);
        rpc_call_unref(w->call);
        free(w);
    }
    p->waiters = NULL;
    p->sb->last_active_ms = host_wall_ms();
}

void host_proc_failed(host_proc *p, const char *msg)
{
    if (p->state != P_STARTING)
        return;
    sg_log_warn("sandbox %s: process %s did not start: %s", p->sb->id, p->id, msg);
    end(p, 127, 0);
    if (p->start_call) {
        rpc_call_finish(p->start_call, GRPC_STATUS_INTERNAL, "the process could not be started");
        rpc_call_unref(p->start_call);
        p->start_call = NULL;
    }
}

#define PROC_EXIT_GRACE_US 500000

void host_proc_exited(host_proc *p, int code, int sig)
{
    if (p->state == P_EXITED || p->exit_seen)
        return;
    p->exit_seen = 1;
    p->exit_code = code;
    p->signal = sig;
    p->exit_grace_us = host_now_us() + PROC_EXIT_GRACE_US;
    drain(p, &p->out);
    drain(p, &p->err);
    finish_exit(p, 0);
}

/* An attacher that cannot wait for the ring to drain: the rest is dropped. */
static void at_cut(host_proc *p, attacher *a)
{
    for (int s = 0; s < 2; s++)
        if (p->ring[s].end > a->pos[s])
            send_dropped(a, s, a->pos[s], p->ring[s].end - a->pos[s]);
    send_exit(a, p);
}

void host_procs_destroy(host_sandbox *sb)
{
    for (host_proc *p = sb->procs; p; p = p->next) {
        host_watch_close(&p->out);
        host_watch_close(&p->err);
        if (p->start_call) {
            rpc_call_finish(p->start_call, GRPC_STATUS_UNAVAILABLE, "the sandbox was killed");
            rpc_call_unref(p->start_call);
            p->start_call = NULL;
        }
        if (p->state != P_EXITED && p->exit_seen)
            end(p, p->exit_code, p->signal);
        else if (p->state != P_EXITED)
            end(p, -1, 9);   /* died with its sandbox */
        while (p->attachers) {
            at_cut(p, p->attachers);
            at_remove(p, &p->attachers);
        }
    }
}

static void proc_free(host_proc *p)
{
    for (int s = 0; s < 2; s++) {
        free(p->ring[s].buf);
        if (p->hold[s].hold)
            explicit_bzero(p->hold[s].hold, p->hold[s].n);
        free(p->hold[s].hold);
    }
    free(p->inbuf);
    free(p->command);
    free(p);
}

void host_procs_free(host_sandbox *sb)
{
    host_procs_destroy(sb);
    for (host_proc *p = sb->procs, *n; p; p = n) {
        n = p->next;
        proc_free(p);
    }
    sb->procs = NULL;
}

void host_procs_tick(host_sandbox *sb, int64_t now)
{
    size_t exited = 0;
    for (host_proc *p = sb->procs; p; p = p->next) {
        if (p->exit_seen && now >= p->exit_grace_us)
            finish_exit(p, 1);
        if (p->state != P_EXITED && !p->exit_seen && !p->kill_sent && p->deadline_us &&
            now >= p->deadline_us) {
            p->timed_out = 1;
            p->kill_sent = 1;
            host_metrics_timeout("process");
            host_supervisor_send(sb, "KILLEXEC %s", p->id);
        }
        for (waiter **l = &p->waiters; *l;) {
            waiter *w = *l;
            if (now >= w->deadline_us || rpc_call_cancelled(w->call)) {
                reply_info(w->call, p);   /* still running; a cancelled call drops it */
                rpc_call_unref(w->call);
                *l = w->next;
                free(w);
            } else {
                l = &w->next;
            }
        }
        pump_proc(p);   /* drops attachers whose client went away */
        exited += p->state == P_EXITED;
    }
    /* Keep the newest PROC_KEEP_EXITED exited ones listed; the oldest go
     * once nobody is attached to them. */
    for (host_proc **l = &sb->procs; *l && exited > PROC_KEEP_EXITED;) {
        host_proc *p = *l;
        if (p->state == P_EXITED && !p->attachers && !p->waiters && !p->start_call) {
            *l = p->next;
            proc_free(p);
            exited--;
        } else {
            l = &p->next;
        }
    }
}

void host_proc_cancel_call(rpc_call *call)
{
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_proc *p = sb->procs; p; p = p->next) {
            int mine = p->start_call == call;
            for (attacher **l = &p->attachers; *l;) {
                if ((*l)->call == call) {
                    mine |= (*l)->exec;
                    at_remove(p, l);
                } else {
                    l = &(*l)->next;
                }
            }
            for (waiter **l = &p->waiters; *l;) {
                waiter *w = *l;
                if (w->call == call) {
                    *l = w->next;
                    rpc_call_finish(w->call, GRPC_STATUS_CANCELLED, "the wait was cancelled");
                    rpc_call_unref(w->call);
                    free(w);
                } else {
                    l = &w->next;
                }
            }
            /* A foreground PTY exec dies with its call, as an exec does. */
            if (mine && p->fg && p->state != P_EXITED && !p->kill_sent) {
                p->kill_sent = 1;
                host_supervisor_send(sb, "KILLEXEC %s", p->id);
            }
        }
}

/* ---- the RPCs ---- */

/* The process a request names, or NULL after answering. */
static host_proc *lookup(rpc_call *c, host_sandbox *sb, const char *id)
{
    sg_err e;
    if (sg_proc_check_id(id, &e) != 0) {
        rpc_call_fail(c, &e);
        return NULL;
    }
    host_proc *p = host_proc_find(sb, id);
    if (!p)
        fail(c, SG_ENOTFOUND, "process_id: no process %s in this sandbox", id);
    else
        sb->last_active_ms = host_wall_ms();
    return p;
}

void host_proc_rpc_list(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    (void)m;
    size_t n = 0;
    for (host_proc *p = sb->procs; p; p = p->next)
        n++;
    Sandgate__V1__ProcessInfo *infos = calloc(n + 1, sizeof *infos), **ptrs =
                                           calloc(n + 1, sizeof *ptrs);
    Sandgate__V1__ExecExit *exits = calloc(n + 1, sizeof *exits);
    size_t i = 0;
    for (host_proc *p = sb->procs; p; p = p->next, i++) {
        fill_info(p, &infos[i], &exits[i]);
        ptrs[i] = &infos[i];
    }
    Sandgate__V1__ListProcessesResponse out;
    sandgate__v1__list_processes_response__init(&out);
    out.n_processes = n;
    out.processes = ptrs;
    rpc_call_reply(c, &out.base);
    free(infos);
    free(ptrs);
    free(exits);
}

void host_proc_rpc_attach(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__AttachProcessRequest *r = (const void *)m;
    host_proc *p = lookup(c, sb, r->process_id);
    if (!p)
        return;
    char msg[160];
    if (r->stdout_offset > p->ring[0].end || r->stderr_offset > p->ring[1].end) {
        int e = r->stdout_offset > p->ring[0].end;
        snprintf(msg, sizeof msg, "%s: %llu is past the stream's end (%llu bytes so far)",
                 e ? "stdout_offset" : "stderr_offset",
                 (unsigned long long)(e ? r->stdout_offset : r->stderr_offset),
                 (unsigned long long)p->ring[e ? 0 : 1].end);
        fail(c, SG_EINVAL, "%s", msg);
        return;
    }
    if (ensure_wake() != 0) {
        fail(c, SG_EINTERNAL, "%s", "cannot attach now");
        return;
    }
    attacher *a = attach(p, c, 0, r->stdout_offset, r->stderr_offset);
    if (pump(p, a))
        at_remove(p, &p->attachers);   /* just added: it is first */
}

void host_proc_rpc_input(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__SendInputRequest *r = (const void *)m;
    host_proc *p = lookup(c, sb, r->process_id);
    if (!p)
        return;
    size_t len = r->data.len, extra = r->close_stdin && p->pty;   /* ^D */
    char msg[200];
    if (len > SG_PROC_INPUT_MAX) {
        snprintf(msg, sizeof msg, "data: %zu bytes; at most %u in one call", len,
                 SG_PROC_INPUT_MAX);
        fail(c, SG_EINVAL, "%s", msg);
        return;
    }
    if (p->state == P_STARTING) {
        fail(c, SG_EPRECOND, "process %s is still starting", p->id);
        return;
    }
    if (p->state == P_EXITED) {
        fail(c, SG_EPRECOND, "process %s has exited", p->id);
        return;
    }
    if (p->stdin_closed || p->close_after) {
        fail(c, SG_EPRECOND, "process %s: its stdin is closed", p->id);
        return;
    }
    if (p->in_n + len + extra > SG_PROC_INPUT_MAX) {
        snprintf(msg, sizeof msg, "stdin: %zu bytes are still waiting for process %s to read "
                 "them; at most %u are held (it is not reading its input)", p->in_n, p->id,
                 SG_PROC_INPUT_MAX);
        fail(c, SG_EQUOTA, "%s", msg);
        return;
    }
    if (len + extra) {
        p->inbuf = realloc(p->inbuf, p->in_n + len + extra);
        memcpy(p->inbuf + p->in_n, r->data.data, len);
        if (extra)
            p->inbuf[p->in_n + len] = 0x04;
        p->in_n += len + extra;
    }
    if (r->close_stdin)
        p->close_after = 1;
    in_flush(p);
    Sandgate__V1__SendInputResponse out;
    sandgate__v1__send_input_response__init(&out);
    out.pending_bytes = p->in_n;
    rpc_call_reply(c, &out.base);
}

void host_proc_rpc_signal(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__SignalProcessRequest *r = (const void *)m;
    sg_err e;
    int sig;
    if (sg_proc_parse_signal(r->signal, r->signal_name, &sig, &e) != 0) {
        rpc_call_fail(c, &e);
        return;
    }
    host_proc *p = lookup(c, sb, r->process_id);
    if (!p)
        return;
    if (p->state != P_RUNNING) {
        fail(c, SG_EPRECOND, p->state == P_EXITED ? "process %s has exited"
                                                  : "process %s is still starting", p->id);
        return;
    }
    if (host_supervisor_send(sb, "SIGPROC %s %d", p->id, sig) != 0) {
        fail(c, SG_EUNAVAIL, "%s", "cannot reach the sandbox's supervisor");
        return;
    }
    Sandgate__V1__SignalProcessResponse out;
    sandgate__v1__signal_process_response__init(&out);
    rpc_call_reply(c, &out.base);
}

void host_proc_rpc_wait(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__WaitProcessRequest *r = (const void *)m;
    if (r->timeout_seconds > SG_PROC_WAIT_MAX_S) {
        char msg[96];
        snprintf(msg, sizeof msg, "timeout_seconds: %u; at most %d", r->timeout_seconds,
                 SG_PROC_WAIT_MAX_S);
        fail(c, SG_EINVAL, "%s", msg);
        return;
    }
    host_proc *p = lookup(c, sb, r->process_id);
    if (!p)
        return;
    if (p->state == P_EXITED) {
        reply_info(c, p);
        return;
    }
    uint32_t t = r->timeout_seconds ? r->timeout_seconds : SG_PROC_WAIT_DEFAULT_S;
    waiter *w = calloc(1, sizeof *w);
    w->call = rpc_call_ref(c);
    w->deadline_us = host_now_us() + (int64_t)t * 1000000;
    /* answer before the client's own deadline, not with DEADLINE_EXCEEDED */
    double left = rpc_deadline_left(rpc_call_deadline(c));
    if (left < 1e9) {
        int64_t d = host_now_us() + (int64_t)((left - 0.2) * 1e6);
        if (d < w->deadline_us)
            w->deadline_us = d;
    }
    w->next = p->waiters;
    p->waiters = w;
}

void host_proc_rpc_resize(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__ResizePtyRequest *r = (const void *)m;
    sg_err e;
    if (sg_proc_check_size(r->rows, r->cols, &e) != 0) {
        rpc_call_fail(c, &e);
        return;
    }
    host_proc *p = lookup(c, sb, r->process_id);
    if (!p)
        return;
    if (!p->pty) {
        fail(c, SG_EPRECOND, "process %s has no PTY (start it with pty: true)", p->id);
        return;
    }
    if (p->state != P_RUNNING) {
        fail(c, SG_EPRECOND, p->state == P_EXITED ? "process %s has exited"
                                                  : "process %s is still starting", p->id);
        return;
    }
    /* The process driver hands the host the PTY master itself: set the size
     * here too, so it holds before this call answers (input sent next is
     * read at the new size). A relayed fd (gVisor) is no terminal: the
     * supervisor's RESIZE does it. */
    struct winsize ws = {.ws_row = (unsigned short)r->rows, .ws_col = (unsigned short)r->cols};
    if (p->out.fd >= 0)
        ioctl(p->out.fd, TIOCSWINSZ, &ws);
    if (host_supervisor_send(sb, "RESIZE %s %u %u", p->id, r->rows, r->cols) != 0) {
        fail(c, SG_EUNAVAIL, "%s", "cannot reach the sandbox's supervisor");
        return;
    }
    p->rows = r->rows;
    p->cols = r->cols;
    Sandgate__V1__ResizePtyResponse out;
    sandgate__v1__resize_pty_response__init(&out);
    rpc_call_reply(c, &out.base);
}
