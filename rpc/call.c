/* call.c — one incoming call: refcounted (a ref per batch in flight plus one
 * for "status not sent yet"), with a send queue so any thread may send and
 * at most one send batch is on the wire, as grpc core requires.
 *
 * Lifetime: created armed (server.c); dispatch takes a ref for the pending
 * status; the close watch, once started, holds one of its own (or rides in
 * the status batch and its ref); the handler borrows the call during its
 * run and takes its own ref to keep it longer. The last unref frees it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/log.h"
#include "rpc/internal.h"

static void start_next_send_locked(rpc_call *c);

rpc_call *rpc_call_new(rpc_server *s, rpc_method *m)
{
    rpc_call *c = calloc(1, sizeof *c);
    c->srv = s;
    c->method = m;
    grpc_metadata_array_init(&c->md);
    pthread_mutex_init(&c->mu, NULL);
    atomic_init(&c->refs, 0);
    return c;
}

static void call_free(rpc_call *c)
{
    if (c->call)
        grpc_call_unref(c->call);
    grpc_metadata_array_destroy(&c->md);
    if (c->payload)
        grpc_byte_buffer_destroy(c->payload);
    free(c->req);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void rpc_call_free_unstarted(rpc_call *c) { call_free(c); }

rpc_call *rpc_call_ref(rpc_call *c)
{
    atomic_fetch_add(&c->refs, 1);
    return c;
}

void rpc_call_unref(rpc_call *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        call_free(c);
}

/* The close watch completed (alone, or inside the status batch). Not under mu. */
static void call_closed(rpc_call *c, int cancelled)
{
    atomic_store(&c->closed, 1);
    if (!cancelled)
        return;
    atomic_store(&c->cancelled, 1);
    pthread_mutex_lock(&c->mu);
    void (*cb)(void *) = c->on_cancel;
    void *cb_arg = c->cancel_arg;
    c->on_cancel = NULL;
    pthread_mutex_unlock(&c->mu);
    if (cb)
        cb(cb_arg);
}

static void on_close(void *arg, int ok)
{
    rpc_call *c = arg;
    call_closed(c, c->cancelled_flag || !ok);
    rpc_call_unref(c);
}

/* The close watch (RECV_CLOSE_ON_SERVER) is started only when someone asks
 * about cancellation (rpc_call_on_cancel, rpc_call_watch_close); otherwise
 * it rides in the batch that sends the status: one completion fewer for a
 * short call. Holds c->mu. */
static void start_close_watch_locked(rpc_call *c)
{
    if (c->close_started)
        return;
    c->close_started = 1;
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled_flag;
    c->close_tag = (rpc_tag){on_close, c};
    rpc_call_ref(c);
    if (grpc_call_start_batch(c->call, &op, 1, &c->close_tag, NULL) != GRPC_CALL_OK)
        atomic_fetch_sub(&c->refs, 1);   /* never below 1 here: the caller holds one */
}

static int id_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr("._:+=/-", ch) != NULL;
}

/* The client's request id if acceptable, else a new random one. */
static void take_request_id(rpc_call *c)
{
    size_t n;
    const char *v = rpc_call_md(c, "x-request-id", &n);
    int ok = v && n >= 1 && n <= RPC_REQUEST_ID_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = v[i] && id_char((unsigned char)v[i]);
    if (ok) {
        memcpy(c->request_id, v, n);
        c->request_id[n] = 0;
        return;
    }
    unsigned char b[16];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
        /* No entropy yet: an id need not be secret, only unique enough. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        uintptr_t p = (uintptr_t)c;
        memcpy(b, &x, 8);
        memcpy(b + 8, &p, sizeof p < 8 ? sizeof p : 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(c->request_id + 2 * i, 3, "%02x", b[i]);
}

static int hex_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

/* version-traceid-parentid-flags, lower-case hex, 55 bytes for version 00;
 * all-zero trace or parent ids are invalid (W3C Trace Context). */
static void take_traceparent(rpc_call *c)
{
    size_t n;
    const char *v = rpc_call_md(c, "traceparent", &n);
    c->traceparent[0] = 0;
    if (!v || n != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || !hex_run(v, 2) ||
        !hex_run(v + 3, 32) || !hex_run(v + 36, 16) || !hex_run(v + 53, 2) ||
        (v[0] == 'f' && v[1] == 'f'))
        return;
    static const char zeros[33] = "00000000000000000000000000000000";
    if (memcmp(v + 3, zeros, 32) == 0 || memcmp(v + 36, zeros, 16) == 0)
        return;
    memcpy(c->traceparent, v, 55);
    c->traceparent[55] = 0;
}

const char *rpc_call_request_id(rpc_call *c) { return c->request_id; }
const char *rpc_call_traceparent(rpc_call *c) { return c->traceparent; }

size_t rpc_call_trace_md(rpc_call *c, grpc_metadata md[2])
{
    size_t n = 0;
    md[n].key = grpc_slice_from_static_string("x-request-id");
    md[n++].value = grpc_slice_from_static_buffer(c->request_id, strlen(c->request_id));
    if (c->traceparent[0]) {
        md[n].key = grpc_slice_from_static_string("traceparent");
        md[n++].value = grpc_slice_from_static_buffer(c->traceparent, strlen(c->traceparent));
    }
    return n;
}

void rpc_call_log_context(rpc_call *c) { sg_log_set_context(c->request_id, c->traceparent); }

void rpc_call_dispatch(rpc_call *c)
{
    atomic_store(&c->refs, 2);   /* pending status, the handler's borrow */
    clock_gettime(CLOCK_MONOTONIC, &c->dispatched);
    if (c->payload) {
        c->req = rpc_flatten(c->payload, &c->req_len);
        grpc_byte_buffer_destroy(c->payload);
        c->payload = NULL;
    }
    take_request_id(c);
    take_traceparent(c);
    rpc_call_log_context(c);
    c->method->fn(c, c->method->data);
    sg_log_set_context(NULL, NULL);
    rpc_call_unref(c);
}

const uint8_t *rpc_call_request(rpc_call *c, size_t *len)
{
    *len = c->req_len;
    return c->req ? c->req : (const uint8_t *)"";
}

const char *rpc_call_md(rpc_call *c, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_slice *k = &c->md.metadata[i].key;
        if (GRPC_SLICE_LENGTH(*k) == klen && memcmp(GRPC_SLICE_START_PTR(*k), key, klen) == 0) {
            *len = GRPC_SLICE_LENGTH(c->md.metadata[i].value);
            return (const char *)GRPC_SLICE_START_PTR(c->md.metadata[i].value);
        }
    }
    return NULL;
}

gpr_timespec rpc_call_deadline(rpc_call *c) { return c->deadline; }

void rpc_call_set_label(rpc_call *c, const char *label)
{
    snprintf(c->label, sizeof c->label, "%s", label ? label : "");
}

static void observe(rpc_call *c, grpc_status_code code)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double s = (double)(now.tv_sec - c->dispatched.tv_sec) +
               (double)(now.tv_nsec - c->dispatched.tv_nsec) / 1e9;
    rpc_server_observe(c->srv, c->method->path, code, s, c->label);
    /* the access log, one line per call, when asked for (--log-level debug) */
    sg_log_for(c->request_id, c->traceparent, SG_LOG_DEBUG, "call %s %s %.3f ms%s%s",
               c->method->path, rpc_status_name(code), s * 1e3, c->label[0] ? " tenant " : "",
               c->label);
}
grpc_call *rpc_call_grpc(rpc_call *c) { return c->call; }
rpc_server *rpc_call_server(rpc_call *c) { return c->srv; }
int rpc_call_cancelled(rpc_call *c) { return atomic_load(&c->cancelled); }

int rpc_call_auth_property(rpc_call *c, const char *name, char *buf, size_t len)
{
    grpc_auth_context *ctx = grpc_call_auth_context(c->call);
    if (!ctx)
        return -1;
    grpc_auth_property_iterator it = grpc_auth_context_find_properties_by_name(ctx, name);
    const grpc_auth_property *p = grpc_auth_property_iterator_next(&it);
    int rc = -1;
    if (p && p->value_length < len) {
        memcpy(buf, p->value, p->value_length);
        buf[p->value_length] = 0;
        rc = 0;
    }
    grpc_auth_context_release(ctx);
    return rc;
}

void rpc_call_watch_close(rpc_call *c)
{
    pthread_mutex_lock(&c->mu);
    start_close_watch_locked(c);
    pthread_mutex_unlock(&c->mu);
}

void rpc_call_on_cancel(rpc_call *c, void (*cb)(void *arg), void *arg)
{
    pthread_mutex_lock(&c->mu);
    int already = atomic_load(&c->cancelled);
    if (!already) {
        c->on_cancel = cb;
        c->cancel_arg = arg;
        start_close_watch_locked(c);
    }
    pthread_mutex_unlock(&c->mu);
    if (already)
        cb(arg);
}

/* ---- receiving (stream methods) ---- */

static void on_recv_done(void *arg, int ok)
{
    rpc_call *c = arg;
    pthread_mutex_lock(&c->mu);
    grpc_byte_buffer *bb = c->recv_buf;
    c->recv_buf = NULL;
    c->receiving = 0;
    void (*cb)(void *, grpc_byte_buffer *) = c->on_recv;
    void *cb_arg = c->recv_arg;
    pthread_mutex_unlock(&c->mu);
    if (!ok && bb) {
        grpc_byte_buffer_destroy(bb);
        bb = NULL;
    }
    cb(cb_arg, bb);
    rpc_call_unref(c);   /* the read's ref */
}

int rpc_call_recv(rpc_call *c, void (*on_recv)(void *arg, grpc_byte_buffer *bb), void *arg)
{
    pthread_mutex_lock(&c->mu);
    if (c->receiving || !c->method->stream_in) {
        pthread_mutex_unlock(&c->mu);
        return -1;
    }
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv_buf;
    c->on_recv = on_recv;
    c->recv_arg = arg;
    c->receiving = 1;
    c->recv_tag = (rpc_tag){on_recv_done, c};
    rpc_call_ref(c);
    if (grpc_call_start_batch(c->call, &op, 1, &c->recv_tag, NULL) != GRPC_CALL_OK) {
        c->receiving = 0;
        pthread_mutex_unlock(&c->mu);
        atomic_fetch_sub(&c->refs, 1);   /* the caller holds one */
        return -1;
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* ---- sending ---- */

static void out_free(rpc_out *o)
{
    if (o->msg)
        grpc_byte_buffer_destroy(o->msg);
    grpc_slice_unref(o->details);
    for (size_t i = 0; i < o->n_trailing; i++) {
        grpc_slice_unref(o->trailing[i].key);
        grpc_slice_unref(o->trailing[i].value);
    }
    free(o->trailing);
    free(o);
}

static void on_sent(void *arg, int ok)
{
    rpc_call *c = arg;
    pthread_mutex_lock(&c->mu);
    rpc_out *o = c->inflight;
    c->inflight = NULL;
    c->sending = 0;
    if (!o->has_status)
        start_next_send_locked(c);
    pthread_mutex_unlock(&c->mu);
    if (o->with_close)
        call_closed(c, c->cancelled_flag || !ok);
    if (o->on_sent)
        o->on_sent(o->sent_arg, ok);
    int had_status = o->has_status;
    out_free(o);
    if (had_status)
        rpc_call_unref(c);   /* the pending-status ref */
    rpc_call_unref(c);       /* the batch's ref */
}

static void start_next_send_locked(rpc_call *c)
{
    if (c->sending || !c->head)
        return;
    rpc_out *o = c->head;
    c->head = o->next;
    if (!c->head)
        c->tail = NULL;
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (!c->md_sent) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->md_sent = 1;
    }
    if (o->msg) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = o->msg;
    }
    if (o->has_status) {
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = o->code;
        ops[n].data.send_status_from_server.status_details = &o->details;
        ops[n].data.send_status_from_server.trailing_metadata = o->trailing;
        ops[n++].data.send_status_from_server.trailing_metadata_count = o->n_trailing;
        if (!c->close_started) {
            c->close_started = 1;
            o->with_close = 1;
            ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
            ops[n++].data.recv_close_on_server.cancelled = &c->cancelled_flag;
        }
    }
    c->inflight = o;
    c->sending = 1;
    c->send_tag = (rpc_tag){on_sent, c};
    rpc_call_ref(c);
    if (grpc_call_start_batch(c->call, ops, n, &c->send_tag, NULL) != GRPC_CALL_OK) {
        /* Cannot happen with one op of each kind; treat as a dead call. */
        c->inflight = NULL;
        c->sending = 0;
        if (o->on_sent)
            o->on_sent(o->sent_arg, 0);
        if (o->has_status)
            rpc_call_unref(c);
        out_free(o);
        rpc_call_unref(c);
    }
}

/* Every status carries the call's request id back to the client. */
static void add_request_id_trailer(rpc_call *c, rpc_out *o)
{
    grpc_metadata *t = realloc(o->trailing, (o->n_trailing + 1) * sizeof *t);
    if (!t)
        return;
    o->trailing = t;
    t[o->n_trailing].key = grpc_slice_from_static_string("x-request-id");
    t[o->n_trailing].value = grpc_slice_from_copied_string(c->request_id);
    o->n_trailing++;
}

static int enqueue(rpc_call *c, rpc_out *o)
{
    pthread_mutex_lock(&c->mu);
    if (c->status_queued) {
        pthread_mutex_unlock(&c->mu);
        out_free(o);
        return -1;
    }
    if (o->has_status) {
        c->status_queued = 1;
        observe(c, o->code);
        add_request_id_trailer(c, o);
    }
    /* A status right behind a queued message rides in the same batch. */
    if (o->has_status && !o->msg && c->tail && !c->tail->has_status) {
        rpc_out *t = c->tail;
        t->has_status = 1;
        t->code = o->code;
        t->details = o->details;
        o->details = grpc_empty_slice();
        t->trailing = o->trailing;
        t->n_trailing = o->n_trailing;
        o->trailing = NULL;
        o->n_trailing = 0;
        out_free(o);
    } else {
        if (c->tail)
            c->tail->next = o;
        else
            c->head = o;
        c->tail = o;
    }
    start_next_send_locked(c);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int rpc_call_send(rpc_call *c, grpc_byte_buffer *bb, void (*cb)(void *, int), void *arg)
{
    rpc_out *o = calloc(1, sizeof *o);
    o->msg = bb;
    o->on_sent = cb;
    o->sent_arg = arg;
    o->details = grpc_empty_slice();
    return enqueue(c, o);
}

int rpc_call_send_msg(rpc_call *c, const ProtobufCMessage *m)
{
    return rpc_call_send(c, rpc_pack(m), NULL, NULL);
}

/* The trailing metadata of a status: the caller's (copied) and, on a
 * failing one, RPC_ORIGIN_KEY (rpc.h says why). */
static void set_trailing(rpc_out *o, const grpc_metadata *trailing, size_t n_trailing)
{
    size_t n = n_trailing + (o->code != GRPC_STATUS_OK);
    if (!n)
        return;
    o->trailing = calloc(n, sizeof *o->trailing);
    for (size_t i = 0; i < n_trailing; i++) {
        o->trailing[i].key = grpc_slice_ref(trailing[i].key);
        o->trailing[i].value = grpc_slice_ref(trailing[i].value);
    }
    if (o->code != GRPC_STATUS_OK) {
        o->trailing[n_trailing].key = grpc_slice_from_static_string(RPC_ORIGIN_KEY);
        o->trailing[n_trailing].value = grpc_slice_from_static_string("sandgate");
    }
    o->n_trailing = n;
}

int rpc_call_finish_md(rpc_call *c, grpc_status_code code, const char *msg,
                       const grpc_metadata *trailing, size_t n_trailing)
{
    rpc_out *o = calloc(1, sizeof *o);
    o->has_status = 1;
    o->code = code;
    o->details = msg ? grpc_slice_from_copied_string(msg) : grpc_empty_slice();
    set_trailing(o, trailing, n_trailing);
    return enqueue(c, o);
}

int rpc_call_finish(rpc_call *c, grpc_status_code code, const char *msg)
{
    return rpc_call_finish_md(c, code, msg, NULL, 0);
}

int rpc_call_finish_msg(rpc_call *c, grpc_byte_buffer *bb, grpc_status_code code, const char *msg)
{
    rpc_out *o = calloc(1, sizeof *o);
    o->msg = bb;
    o->has_status = 1;
    o->code = code;
    o->details = msg && msg[0] ? grpc_slice_from_copied_string(msg) : grpc_empty_slice();
    set_trailing(o, NULL, 0);
    return enqueue(c, o);
}

int rpc_call_reply(rpc_call *c, const ProtobufCMessage *m)
{
    return rpc_call_finish_msg(c, rpc_pack(m), GRPC_STATUS_OK, NULL);
}

int rpc_call_fail(rpc_call *c, const sg_err *e)
{
    return rpc_call_finish(c, rpc_status_from_err(e->code), e->msg);
}
