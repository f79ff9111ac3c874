/* forward.c — one public call relayed to a host. The host call is a child
 * of the incoming one (deadline and cancellation propagate); each host
 * message is sent on to the client before the next is read, so a slow
 * client slows the host instead of filling the gateway's memory. */
#include <stdio.h>
#include <stdlib.h>

#include "gateway/gw.h"

typedef struct gw_fwd {
    rpc_call *in;       /* owned ref */
    rpc_fwd *out;       /* owned by rpc_fwd; valid until on_done */
    gw_fwd_opts opts;
    int failed;
} gw_fwd;

static void on_client_sent(void *arg, int ok)
{
    gw_fwd *f = arg;
    if (ok)
        rpc_fwd_next(f->out);
    else
        rpc_fwd_cancel(f->out);   /* the client is gone */
}

static void on_host_message(void *arg, rpc_fwd *out, grpc_byte_buffer *bb)
{
    gw_fwd *f = arg;
    f->out = out;
    if (f->opts.rewrite) {
        grpc_byte_buffer *nb = f->opts.rewrite(f->opts.arg, bb);
        grpc_byte_buffer_destroy(bb);
        if (!nb) {
            f->failed = 1;
            rpc_call_finish(f->in, GRPC_STATUS_INTERNAL, "bad response from host");
            rpc_fwd_cancel(f->out);
            return;
        }
        bb = nb;
    }
    if (rpc_call_send(f->in, bb, on_client_sent, f) != 0)
        rpc_fwd_cancel(f->out);
}

static void on_host_done(void *arg, grpc_status_code code, const char *details,
                         const grpc_metadata_array *trailing)
{
    gw_fwd *f = arg;
    if (!f->failed) {
        /* UNAVAILABLE from the transport means the host is down; say which. */
        if (code == GRPC_STATUS_UNAVAILABLE && details[0] == 0)
            details = "sandbox host unavailable";
        rpc_call_finish(f->in, code, details);
    }
    if (f->opts.on_done)
        f->opts.on_done(f->opts.arg, code);
    rpc_call_unref(f->in);
    free(f);
}

void gw_forward(rpc_call *in, gw_host *h, const char *method, const ProtobufCMessage *req,
                const gw_fwd_opts *opts)
{
    gw_fwd *f = calloc(1, sizeof *f);
    f->in = rpc_call_ref(in);
    f->opts = *opts;
    static const rpc_fwd_cbs cbs = {on_host_message, on_host_done};
    sg_err err;
    rpc_fwd *out = rpc_fwd_start(h->channel, rpc_server_cq(rpc_call_server(in)), rpc_call_grpc(in),
                           method, rpc_deadline_in(opts->timeout_s > 0 ? opts->timeout_s : 30),
                           NULL, 0, rpc_pack(req), &cbs, f, &err);
    if (!out) {
        gw_fail(in, &err);
        if (f->opts.on_done)
            f->opts.on_done(f->opts.arg, GRPC_STATUS_INTERNAL);
        rpc_call_unref(f->in);
        free(f);
    }
}
