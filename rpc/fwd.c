/* fwd.c — an outgoing call made for an incoming one (the gateway's hop to a
 * host). It completes on the server's queue, carries the parent's deadline
 * and cancellation (GRPC_PROPAGATE_DEFAULTS), and reads one message at a
 * time so a slow client slows the backend instead of growing a buffer.
 * Unary calls (rpc_unary_start) skip all that: every op goes in one batch,
 * one completion per call, which is most of a forwarded call's cost.
 *
 * Lifetime: one ref per batch in flight plus one until on_done has run (the
 * user may call rpc_fwd_next/cancel until then); on_done runs once, when the
 * status is in and no read is outstanding. The last unref frees the struct.
 * rpc_fwd_next and rpc_fwd_cancel each hold a ref of their own from entry to
 * return: they may be called from a thread other than the one completing the
 * call's batches (etcd_watch_stop, gw_forward_host_lost), and their own
 * maybe_done may find on_done already run there and the batch refs dropped,
 * which freed the struct under them (ASan: use in maybe_done after a free
 * from the completion loop). The caller's promise that on_done has not
 * returned (or a ref of its own, rpc_fwd_ref) makes the ref at entry safe
 * to take. After on_done both are no-ops: reading is over and the call is
 * released. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/internal.h"

struct rpc_fwd {
    atomic_int refs;
    grpc_call *call;
    rpc_fwd_cbs cbs;
    void *arg;
    grpc_byte_buffer *req;            /* owned until the send completes */
    grpc_metadata_array init_md;      /* received initial metadata */
    grpc_metadata_array trailing;
    grpc_status_code status;
    grpc_slice details;
    grpc_byte_buffer *recv;
    rpc_tag send_tag, status_tag, recv_tag;
    pthread_mutex_t mu;
    int reading;        /* a RECV_MESSAGE is outstanding */
    int stream_ended;   /* a NULL message came, or reads abandoned */
    int have_status;
    int done_called;
};

void rpc_fwd_ref(rpc_fwd *f) { atomic_fetch_add(&f->refs, 1); }

void rpc_fwd_unref(rpc_fwd *f)
{
    if (atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    if (f->call)
        grpc_call_unref(f->call);
    grpc_metadata_array_destroy(&f->init_md);
    grpc_metadata_array_destroy(&f->trailing);
    grpc_slice_unref(f->details);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

#define DETAILS_MAX 1024

/* Status details as a NUL-terminated string, cut to fit. */
static void details_str(grpc_slice d, char out[DETAILS_MAX])
{
    size_t n = GRPC_SLICE_LENGTH(d);
    if (n >= DETAILS_MAX)
        n = DETAILS_MAX - 1;
    memcpy(out, GRPC_SLICE_START_PTR(d), n);
    out[n] = 0;
}

#define TRAILER_BIN_MAX 4096

/* What the gateway needs of a failing status's trailing metadata, copied
 * out before the call (which owns the slices) is released. OK statuses are
 * not scanned: nothing on the hot path. */
static void trailer_read(const grpc_metadata_array *md, grpc_status_code code, rpc_trailer *t,
                         uint8_t bin[TRAILER_BIN_MAX])
{
    memset(t, 0, sizeof *t);
    if (code == GRPC_STATUS_OK)
        return;
    for (size_t i = 0; i < md->count; i++) {
        grpc_slice k = md->metadata[i].key, v = md->metadata[i].value;
        if (grpc_slice_str_cmp(k, RPC_ORIGIN_KEY) == 0) {
            t->from_peer = 1;
        } else if (grpc_slice_str_cmp(k, "grpc-status-details-bin") == 0 &&
                   GRPC_SLICE_LENGTH(v) <= TRAILER_BIN_MAX) {
            memcpy(bin, GRPC_SLICE_START_PTR(v), GRPC_SLICE_LENGTH(v));
            t->details_bin = bin;
            t->details_bin_len = GRPC_SLICE_LENGTH(v);
        }
    }
}

/* Call on_done once both the status is in and reading is over. */
static void maybe_done(rpc_fwd *f)
{
    pthread_mutex_lock(&f->mu);
    int go = f->have_status && f->stream_ended && !f->reading && !f->done_called;
    grpc_call *call = NULL;
    if (go) {
        f->done_called = 1;
        call = f->call;   /* detached: see on_unary */
        f->call = NULL;
    }
    pthread_mutex_unlock(&f->mu);
    if (!go)
        return;
    rpc_trailer t;
    uint8_t bin[TRAILER_BIN_MAX];
    trailer_read(&f->trailing, f->status, &t, bin);
    grpc_call_unref(call);
    char details[DETAILS_MAX];
    details_str(f->details, details);
    f->cbs.on_done(f->arg, f->status, details, &t);
    rpc_fwd_unref(f);   /* the ref that kept f alive for on_done */
}

static void on_send_done(void *arg, int ok)
{
    rpc_fwd *f = arg;
    grpc_byte_buffer_destroy(f->req);
    f->req = NULL;
    rpc_fwd_unref(f);
}

static void on_status(void *arg, int ok)
{
    rpc_fwd *f = arg;
    pthread_mutex_lock(&f->mu);
    f->have_status = 1;
    pthread_mutex_unlock(&f->mu);
    maybe_done(f);
    rpc_fwd_unref(f);
}

static void on_recv(void *arg, int ok)
{
    rpc_fwd *f = arg;
    grpc_byte_buffer *bb = ok ? f->recv : NULL;
    if (!ok && f->recv)
        grpc_byte_buffer_destroy(f->recv);
    f->recv = NULL;
    pthread_mutex_lock(&f->mu);
    f->reading = 0;
    if (!bb)
        f->stream_ended = 1;
    pthread_mutex_unlock(&f->mu);
    if (bb)
        f->cbs.on_message(f->arg, f, bb);
    else
        maybe_done(f);
    rpc_fwd_unref(f);
}

void rpc_fwd_next(rpc_fwd *f)
{
    atomic_fetch_add(&f->refs, 1);   /* the caller's: see Lifetime above */
    pthread_mutex_lock(&f->mu);
    if (f->reading || f->stream_ended) {
        pthread_mutex_unlock(&f->mu);
        rpc_fwd_unref(f);
        return;
    }
    f->reading = 1;
    atomic_fetch_add(&f->refs, 1);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &f->recv;
    f->recv_tag = (rpc_tag){on_recv, f};
    grpc_call_error e = grpc_call_start_batch(f->call, &op, 1, &f->recv_tag, NULL);
    if (e != GRPC_CALL_OK) {
        f->reading = 0;
        f->stream_ended = 1;
        atomic_fetch_sub(&f->refs, 1);
    }
    pthread_mutex_unlock(&f->mu);
    if (e != GRPC_CALL_OK)
        maybe_done(f);
    rpc_fwd_unref(f);
}

void rpc_fwd_cancel(rpc_fwd *f)
{
    atomic_fetch_add(&f->refs, 1);   /* the caller's: see Lifetime above */
    pthread_mutex_lock(&f->mu);
    if (f->call)
        grpc_call_cancel(f->call, NULL);
    f->stream_ended = 1;   /* nobody will ask for more */
    pthread_mutex_unlock(&f->mu);
    maybe_done(f);
    rpc_fwd_unref(f);
}

/* Registered methods per channel: a call made from a registered handle
 * skips parsing and interning the method path every time. Entries live as
 * long as the process (channels here are made once at start). */
#define REG_MAX 256
static struct {
    grpc_channel *ch;
    const char *method;   /* borrowed: callers pass string literals */
    void *handle;
} reg[REG_MAX];
static size_t n_reg;
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;

static void *registered(grpc_channel *ch, const char *method)
{
    void *h = NULL;
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < n_reg && !h; i++)
        if (reg[i].ch == ch && (reg[i].method == method || strcmp(reg[i].method, method) == 0))
            h = reg[i].handle;
    if (!h && n_reg < REG_MAX) {
        h = grpc_channel_register_call(ch, method, NULL, NULL);
        reg[n_reg].ch = ch;
        reg[n_reg].method = method;
        reg[n_reg].handle = h;
        n_reg++;
    }
    pthread_mutex_unlock(&reg_mu);
    return h;
}

grpc_channel *rpc_channel_create(const char *target, grpc_channel_credentials *creds)
{
    return rpc_channel_create_tls(target, creds, NULL);
}

grpc_channel *rpc_channel_create_tls(const char *target, grpc_channel_credentials *creds,
                                     const char *server_name)
{
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
         .value.integer = RPC_MAX_MESSAGE},
        /* Our calls are not idempotent (RunCode): never replay them. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_CHANNELZ, .value.integer = 0},
        /* A peer that went away is retried at least every second: gRPC's
         * default backoff grows to 120 s, so a host back after a minute's
         * outage would wait up to two more before the gateway reconnected
         * (tests/hosts/test_host_restart.py). Refused connects are cheap. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
         .value.integer = 250},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
         .value.integer = 1000},
        /* The name the peer's certificate must carry (last: counted out when NULL). */
        {.type = GRPC_ARG_STRING, .key = GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
         .value.string = (char *)server_name},
    };
    grpc_channel_args cargs = {.num_args = sizeof args / sizeof args[0] - !server_name,
                               .args = args};
    grpc_channel_credentials *c = creds ? creds : grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, c, &cargs);
    if (!creds)
        grpc_channel_credentials_release(c);
    return ch;
}

static grpc_call *call_create(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                              const char *method, gpr_timespec deadline)
{
    void *h = registered(ch, method);
    uint32_t mask = parent ? GRPC_PROPAGATE_DEFAULTS : 0;
    return h ? grpc_channel_create_registered_call(ch, parent, mask, cq, h, deadline, NULL)
             : grpc_channel_create_call(ch, parent, mask, cq, grpc_slice_from_static_string(method),
                                        NULL, deadline, NULL);
}

void rpc_client_open_ops(grpc_op ops[4], const grpc_metadata *md, size_t n_md,
                         grpc_byte_buffer *req, grpc_metadata_array *init_md)
{
    memset(ops, 0, 4 * sizeof *ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = n_md;
    ops[0].data.send_initial_metadata.metadata = (grpc_metadata *)md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = req;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = init_md;
}

rpc_fwd *rpc_fwd_start(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                       const char *method, gpr_timespec deadline, const grpc_metadata *md,
                       size_t n_md, grpc_byte_buffer *req, const rpc_fwd_cbs *cbs, void *arg,
                       sg_err *err)
{
    rpc_fwd *f = calloc(1, sizeof *f);
    f->cbs = *cbs;
    f->arg = arg;
    f->req = req;
    f->details = grpc_empty_slice();
    grpc_metadata_array_init(&f->init_md);
    grpc_metadata_array_init(&f->trailing);
    pthread_mutex_init(&f->mu, NULL);
    f->call = call_create(ch, cq, parent, method, deadline);
    if (!f->call) {
        grpc_byte_buffer_destroy(req);
        pthread_mutex_destroy(&f->mu);
        free(f);
        sg_err_set(err, SG_EINTERNAL, "grpc_channel_create_call(%s) failed", method);
        return NULL;
    }
    grpc_op ops[4];
    rpc_client_open_ops(ops, md, n_md, req, &f->init_md);
    /* send batch, status batch, on_done not yet delivered, the caller until we return */
    atomic_init(&f->refs, 4);
    f->send_tag = (rpc_tag){on_send_done, f};
    grpc_call_start_batch(f->call, ops, 4, &f->send_tag, NULL);
    grpc_op st;
    memset(&st, 0, sizeof st);
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &f->trailing;
    st.data.recv_status_on_client.status = &f->status;
    st.data.recv_status_on_client.status_details = &f->details;
    f->status_tag = (rpc_tag){on_status, f};
    grpc_call_start_batch(f->call, &st, 1, &f->status_tag, NULL);
    rpc_fwd_next(f);
    rpc_fwd_unref(f);
    return f;
}

/* ---- unary: one batch ---- */

typedef struct rpc_unary {
    grpc_call *call;
    rpc_unary_done done;
    void *arg;
    grpc_byte_buffer *req;            /* owned until the batch completes */
    grpc_byte_buffer *resp;
    grpc_metadata_array init_md, trailing;
    grpc_status_code status;
    grpc_slice details;
    rpc_tag tag;
} rpc_unary;

static void unary_free(rpc_unary *u)
{
    if (u->call)
        grpc_call_unref(u->call);
    grpc_byte_buffer_destroy(u->req);
    if (u->resp)
        grpc_byte_buffer_destroy(u->resp);
    grpc_metadata_array_destroy(&u->init_md);
    grpc_metadata_array_destroy(&u->trailing);
    grpc_slice_unref(u->details);
    free(u);
}

static void on_unary(void *arg, int ok)
{
    rpc_unary *u = arg;
    char details[DETAILS_MAX];
    details_str(u->details, details);
    /* A batch with RECV_STATUS_ON_CLIENT always completes ok; the status says
     * what happened. A message without OK is dropped, as a client would. */
    rpc_unary_result r = {.code = ok ? u->status : GRPC_STATUS_UNAVAILABLE,
                          .details = details};
    if (r.code == GRPC_STATUS_OK) {
        r.resp = u->resp;
        u->resp = NULL;
    }
    uint8_t bin[TRAILER_BIN_MAX];
    trailer_read(&u->trailing, r.code, &r.trailer, bin);
    /* Let go of the call before done answers the parent: a parent that
     * finishes with a child still attached cancels it, and cancelling even a
     * finished stream costs ~11k instructions (callgrind). */
    grpc_call_unref(u->call);
    u->call = NULL;
    u->done(u->arg, &r);
    unary_free(u);
}

int rpc_unary_start(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                    const char *method, gpr_timespec deadline, const grpc_metadata *md,
                    size_t n_md, grpc_byte_buffer *req, rpc_unary_done done, void *arg,
                    sg_err *err)
{
    return rpc_unary_start_call(ch, cq, parent, method, deadline, md, n_md, req, done, arg, NULL,
                                err);
}

int rpc_unary_start_call(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                         const char *method, gpr_timespec deadline, const grpc_metadata *md,
                         size_t n_md, grpc_byte_buffer *req, rpc_unary_done done, void *arg,
                         grpc_call **call, sg_err *err)
{
    rpc_unary *u = calloc(1, sizeof *u);
    u->done = done;
    u->arg = arg;
    u->req = req;
    u->details = grpc_empty_slice();
    grpc_metadata_array_init(&u->init_md);
    grpc_metadata_array_init(&u->trailing);
    u->call = call_create(ch, cq, parent, method, deadline);
    if (!u->call) {
        grpc_byte_buffer_destroy(req);
        grpc_metadata_array_destroy(&u->init_md);
        grpc_metadata_array_destroy(&u->trailing);
        free(u);
        return sg_err_set(err, SG_EINTERNAL, "grpc_channel_create_call(%s) failed", method);
    }
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    rpc_client_open_ops(ops, md, n_md, req, &u->init_md);
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->resp;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trailing;
    ops[5].data.recv_status_on_client.status = &u->status;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    u->tag = (rpc_tag){on_unary, u};
    if (call) {
        *call = u->call;   /* the caller's ref, taken before done can run */
        grpc_call_ref(u->call);
    }
    grpc_call_error e = grpc_call_start_batch(u->call, ops, 6, &u->tag, NULL);
    if (e != GRPC_CALL_OK) {
        if (call) {
            grpc_call_unref(*call);
            *call = NULL;
        }
        unary_free(u);
        return sg_err_set(err, SG_EINTERNAL, "grpc_call_start_batch(%s): error %d", method, e);
    }
    return 0;
}
