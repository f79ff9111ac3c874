/* forward.c — one public call relayed to a host. The host call is a child
 * of the incoming one (deadline and cancellation propagate). Streams: each
 * host message is sent on to the client before the next is read, so a slow
 * client slows the host instead of filling the gateway's memory; the message
 * that ends a stream (RunCode's End, Exec's exit) waits for the status, which
 * follows it at once, and goes out with it. Unary: one batch to the host, and
 * the reply and status to the client in one batch. A failing status is
 * answered in its public form (status.c): grpc's own text never reaches the
 * client.
 *
 * Registry mode: calls in flight (streams and unary) are listed per host,
 * so that when a host's registration ends (its lease: killed, or cut off
 * with no TCP reset to end the call) they are cancelled at once and
 * answered HOST_LOST instead of waiting for their deadline
 * (gw_forward_host_lost). A unary call is listed with a ref of its own on
 * its grpc_call, dropped (and the call unlisted) first thing in its reply,
 * under fl_mu, so a cancel never touches a call that is gone.
 *
 * Lifetime: a gw_fwd is refcounted, one ref per thing that may still touch
 * it: the host call until its on_done has run, each send to the client in
 * flight, and gw_forward until it returns. A cancel (the registry's etcd
 * thread, a client gone) can end the host call while a send to the client
 * is still queued; that send's completion then finds the forward intact
 * and, through the ref it holds on the rpc_fwd (rpc_fwd_ref), a host call
 * on which next and cancel do nothing. Freeing at on_done instead was a
 * use-after-free (tests/registry/test_host_lost_race.py under ASan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "gateway/gw.h"

typedef struct gw_fwd {
    atomic_int refs;    /* see Lifetime above */
    rpc_call *in;       /* owned ref */
    rpc_fwd *out;       /* borrowed, under fl_mu: for gw_forward_host_lost while listed */
    grpc_call *ucall;   /* unary, registry mode: owned ref under fl_mu, while listed */
    rpc_fwd *stream;    /* owned ref (rpc_fwd_ref), taken at the first message: for the
                         * sends' completions, which may come after on_done */
    gw_fwd_opts opts;
    const gw_host *host;      /* borrowed: hosts live as long as the process */
    const char *method;       /* borrowed: a string literal */
    grpc_byte_buffer *last;   /* owned: the held last message (opts.last_field) */
    struct timespec started;  /* monotonic */
    struct gw_fwd *prev, *next;   /* in_flight list (streams), under fl_mu */
    int listed;
    int lost;                     /* cancelled by gw_forward_host_lost */
} gw_fwd;

/* Recursive: a cancel can run the stream's on_done, which unlists it, on
 * the cancelling thread. */
static pthread_mutex_t fl_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static gw_fwd *in_flight;

static void fl_add(gw_fwd *f)
{
    pthread_mutex_lock(&fl_mu);
    f->next = in_flight;
    if (in_flight)
        in_flight->prev = f;
    in_flight = f;
    f->listed = 1;
    pthread_mutex_unlock(&fl_mu);
}

static void fl_remove(gw_fwd *f)
{
    pthread_mutex_lock(&fl_mu);
    if (f->listed) {
        if (f->prev)
            f->prev->next = f->next;
        else
            in_flight = f->next;
        if (f->next)
            f->next->prev = f->prev;
        f->listed = 0;
    }
    pthread_mutex_unlock(&fl_mu);
}

void gw_forward_host_lost(const gw_host *h)
{
    size_t n = 0;
    pthread_mutex_lock(&fl_mu);
    for (gw_fwd *f = in_flight, *next; f; f = next) {
        next = f->next;   /* f may be unlisted and freed by its cancel */
        if (f->host == h && (f->out || f->ucall) && !f->lost) {
            f->lost = 1;
            n++;
            if (f->out)
                rpc_fwd_cancel(f->out);
            else   /* its reply comes on the server's queue, after we let go of fl_mu */
                grpc_call_cancel_with_status(f->ucall, GRPC_STATUS_UNAVAILABLE, "host lost", NULL);
        }
    }
    pthread_mutex_unlock(&fl_mu);
    if (n)
        sg_log_info("host %s lost: %zu call(s) in flight to it cancelled", h->name, n);
}

static gw_fwd *fwd_ref(gw_fwd *f)
{
    atomic_fetch_add(&f->refs, 1);
    return f;
}

static void fwd_unref(gw_fwd *f)
{
    if (atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    if (f->stream)
        rpc_fwd_unref(f->stream);
    if (f->last)
        grpc_byte_buffer_destroy(f->last);
    rpc_call_unref(f->in);
    free(f);
}

/* The host call is over (its on_done, or it never started): drop its ref. */
static void fwd_end(gw_fwd *f, grpc_status_code code)
{
    fl_remove(f);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    gw_metrics_forward(f->method, (double)(now.tv_sec - f->started.tv_sec) +
                                      (double)(now.tv_nsec - f->started.tv_nsec) / 1e9);
    if (f->opts.on_done)
        f->opts.on_done(f->opts.arg, code);
    fwd_unref(f);
}

/* ---- streams ---- */

/* A send's completion: may run after the host call's on_done (a cancel
 * ended it meanwhile), where next and cancel on f->stream do nothing. */
static void on_client_sent(void *arg, int ok)
{
    gw_fwd *f = arg;
    if (ok)
        rpc_fwd_next(f->stream);
    else
        rpc_fwd_cancel(f->stream);   /* the client is gone */
    fwd_unref(f);   /* the send's */
}

static void on_host_message(void *arg, rpc_fwd *out, grpc_byte_buffer *bb)
{
    gw_fwd *f = arg;
    if (!f->stream) {   /* messages come one at a time: no race on this */
        rpc_fwd_ref(out);
        f->stream = out;
    }
    if (f->last) {   /* more after the "last" one: keep the host's order */
        rpc_call_send(f->in, f->last, NULL, NULL);
        f->last = NULL;
    }
    if (f->opts.last_field && rpc_wire_first_field(bb) == f->opts.last_field) {
        f->last = bb;   /* the status follows at once; they go out together */
        rpc_fwd_next(out);
        return;
    }
    if (rpc_call_send(f->in, bb, on_client_sent, fwd_ref(f)) != 0) {
        fwd_unref(f);   /* a status is queued: on_client_sent will not run */
        rpc_fwd_cancel(out);
    }
}

static void on_host_done(void *arg, grpc_status_code code, const char *details,
                         const rpc_trailer *t)
{
    gw_fwd *f = arg;
    rpc_call_log_context(f->in);
    if (code == GRPC_STATUS_OK) {
        rpc_call_finish_msg(f->in, f->last, code, NULL);
    } else {
        if (f->last)   /* queued: the status rides in its batch */
            rpc_call_send(f->in, f->last, NULL, NULL);
        pthread_mutex_lock(&fl_mu);
        int lost = f->lost;
        pthread_mutex_unlock(&fl_mu);
        if (lost)
            gw_fail_host_lost(f->in);
        else
            gw_fail_from_host(f->in, f->host, f->method, f->opts.sandbox_id, code, details, t);
    }
    f->last = NULL;
    fwd_end(f, code);
}

/* ---- unary ---- */

static void on_host_reply(void *arg, rpc_unary_result *res)
{
    gw_fwd *f = arg;
    rpc_call_log_context(f->in);
    int lost = 0;
    if (G.cfg.registry.n_endpoints) {   /* listed: see gw_forward */
        pthread_mutex_lock(&fl_mu);
        fl_remove(f);
        if (f->ucall)
            grpc_call_unref(f->ucall);
        f->ucall = NULL;
        lost = f->lost;
        pthread_mutex_unlock(&fl_mu);
    }
    grpc_byte_buffer *bb = res->resp;
    if (bb && f->opts.rewrite) {
        grpc_byte_buffer *nb = f->opts.rewrite(f->opts.arg, bb);
        grpc_byte_buffer_destroy(bb);
        bb = nb;
        if (!nb) {
            rpc_call_finish(f->in, GRPC_STATUS_INTERNAL, "bad response from host");
            fwd_end(f, GRPC_STATUS_INTERNAL);
            return;
        }
    }
    if (res->code == GRPC_STATUS_OK)
        rpc_call_finish_msg(f->in, bb, res->code, NULL);
    else if (lost)
        gw_fail_host_lost(f->in);
    else
        gw_fail_from_host(f->in, f->host, f->method, f->opts.sandbox_id, res->code, res->details,
                          &res->trailer);
    fwd_end(f, res->code);
}

void gw_forward(rpc_call *in, gw_host *h, const char *method, const ProtobufCMessage *req,
                const gw_fwd_opts *opts)
{
    gw_fwd *f = calloc(1, sizeof *f);
    atomic_init(&f->refs, 2);   /* the host call's, and ours until we return */
    f->in = rpc_call_ref(in);
    f->opts = *opts;
    f->host = h;
    f->method = method;
    clock_gettime(CLOCK_MONOTONIC, &f->started);
    sg_err err;
    /* A client's cancel must reach the host (a long RunCode is interrupted). */
    rpc_call_watch_close(in);
    grpc_completion_queue *cq = rpc_server_cq(rpc_call_server(in));
    gpr_timespec deadline = rpc_deadline_in(opts->timeout_s > 0 ? opts->timeout_s : 30);
    int rc;
    grpc_metadata md[2];   /* the request id and traceparent, on to the host */
    size_t n_md = rpc_call_trace_md(in, md);
    if (opts->stream) {
        static const rpc_fwd_cbs cbs = {on_host_message, on_host_done};
        if (G.cfg.registry.n_endpoints)
            fl_add(f);   /* before the start: its on_done may come first */
        pthread_mutex_lock(&fl_mu);   /* a host_lost waits until out is known */
        rpc_fwd *out = rpc_fwd_start(gw_host_channel(h), cq, rpc_call_grpc(in), method, deadline,
                                     md, n_md, rpc_pack(req), &cbs, f, &err);
        rc = out ? 0 : -1;
        if (out && f->listed)
            f->out = out;
        pthread_mutex_unlock(&fl_mu);
    } else if (G.cfg.registry.n_endpoints) {
        fl_add(f);   /* before the start: its reply may come first */
        pthread_mutex_lock(&fl_mu);   /* a host_lost waits until ucall is known */
        grpc_call *call = NULL;
        rc = rpc_unary_start_call(gw_host_channel(h), cq, rpc_call_grpc(in), method, deadline, md,
                                  n_md, rpc_pack(req), on_host_reply, f, &call, &err);
        if (call && f->listed)
            f->ucall = call;   /* the reply (which unlists) has not run: we hold fl_mu */
        else if (call)
            grpc_call_unref(call);
        pthread_mutex_unlock(&fl_mu);
        if (rc != 0)
            fl_remove(f);
    } else {
        rc = rpc_unary_start(gw_host_channel(h), cq, rpc_call_grpc(in), method, deadline, md, n_md,
                             rpc_pack(req), on_host_reply, f, &err);
    }
    if (rc != 0) {
        gw_fail_internal(in, method, &err);
        fwd_end(f, GRPC_STATUS_INTERNAL);
    }
    fwd_unref(f);
}
