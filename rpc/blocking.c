/* blocking.c — synchronous unary, server-streaming and client-streaming
 * calls on a private pluck queue, for the CLI, tests and benchmarks (never
 * on a loop thread). */
#include <stdlib.h>
#include <string.h>

#include "rpc/internal.h"

typedef struct blocking {
    grpc_completion_queue *cq;
    grpc_call *call;
    grpc_metadata_array init_md, trailing;
    grpc_status_code code;
    grpc_slice details;
} blocking;

static int pluck(blocking *b, void *tag)
{
    grpc_event ev = grpc_completion_queue_pluck(b->cq, tag, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                NULL);
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

static int start(blocking *b, grpc_channel *ch, const char *method, const grpc_metadata *md,
                 size_t n_md, double timeout_s, const ProtobufCMessage *req)
{
    memset(b, 0, sizeof *b);
    b->cq = grpc_completion_queue_create_for_pluck(NULL);
    b->details = grpc_empty_slice();
    grpc_metadata_array_init(&b->init_md);
    grpc_metadata_array_init(&b->trailing);
    b->call = grpc_channel_create_call(ch, NULL, 0, b->cq, grpc_slice_from_static_string(method),
                                       NULL, rpc_deadline_in(timeout_s), NULL);
    if (!b->call)
        return -1;
    grpc_byte_buffer *bb = rpc_pack(req);
    grpc_op ops[4];
    rpc_client_open_ops(ops, md, n_md, bb, &b->init_md);
    grpc_call_start_batch(b->call, ops, 4, (void *)1, NULL);
    int ok = pluck(b, (void *)1);
    grpc_byte_buffer_destroy(bb);
    (void)ok;   /* a failed send shows up in the status */
    return 0;
}

static void finish(blocking *b, rpc_status *st)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &b->trailing;
    op.data.recv_status_on_client.status = &b->code;
    op.data.recv_status_on_client.status_details = &b->details;
    grpc_call_start_batch(b->call, &op, 1, (void *)3, NULL);
    pluck(b, (void *)3);
    memset(st, 0, sizeof *st);
    st->code = b->code;
    size_t n = GRPC_SLICE_LENGTH(b->details);
    if (n >= sizeof st->details)
        n = sizeof st->details - 1;
    memcpy(st->details, GRPC_SLICE_START_PTR(b->details), n);
    for (size_t i = 0; i < b->trailing.count; i++) {
        grpc_slice k = b->trailing.metadata[i].key, v = b->trailing.metadata[i].value;
        if (grpc_slice_str_cmp(k, "grpc-status-details-bin") == 0 &&
            GRPC_SLICE_LENGTH(v) <= sizeof st->trailer_bin) {
            st->trailer_bin_len = GRPC_SLICE_LENGTH(v);
            memcpy(st->trailer_bin, GRPC_SLICE_START_PTR(v), st->trailer_bin_len);
        }
    }
    grpc_slice_unref(b->details);
    grpc_metadata_array_destroy(&b->init_md);
    grpc_metadata_array_destroy(&b->trailing);
    grpc_call_unref(b->call);
    grpc_completion_queue_shutdown(b->cq);
    while (grpc_completion_queue_pluck(b->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
               .type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(b->cq);
}

/* Receive one message; returns 1 with *out set, 0 at end of stream. */
static int recv_one(blocking *b, grpc_byte_buffer **out)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    *out = NULL;
    op.data.recv_message.recv_message = out;
    grpc_call_start_batch(b->call, &op, 1, (void *)2, NULL);
    if (!pluck(b, (void *)2) || !*out)
        return 0;
    return 1;
}

int rpc_blocking_unary(grpc_channel *ch, const char *method, const grpc_metadata *md,
                       size_t n_md, double timeout_s, const ProtobufCMessage *req,
                       uint8_t **resp, size_t *resp_len, rpc_status *st)
{
    blocking b;
    *resp = NULL;
    *resp_len = 0;
    if (start(&b, ch, method, md, n_md, timeout_s, req) != 0)
        return -1;
    grpc_byte_buffer *bb;
    if (recv_one(&b, &bb)) {
        *resp = rpc_flatten(bb, resp_len);
        grpc_byte_buffer_destroy(bb);
    }
    finish(&b, st);
    if (st->code != GRPC_STATUS_OK) {
        free(*resp);
        *resp = NULL;
    }
    return 0;
}

int rpc_blocking_stream(grpc_channel *ch, const char *method, const grpc_metadata *md,
                        size_t n_md, double timeout_s, const ProtobufCMessage *req,
                        int (*on_msg)(void *arg, const uint8_t *buf, size_t len), void *arg,
                        rpc_status *st)
{
    blocking b;
    if (start(&b, ch, method, md, n_md, timeout_s, req) != 0)
        return -1;
    grpc_byte_buffer *bb;
    while (recv_one(&b, &bb)) {
        size_t n;
        uint8_t *buf = rpc_flatten(bb, &n);
        grpc_byte_buffer_destroy(bb);
        int stop = on_msg(arg, buf, n);
        free(buf);
        if (stop) {
            grpc_call_cancel(b.call, NULL);
            while (recv_one(&b, &bb))
                grpc_byte_buffer_destroy(bb);
            break;
        }
    }
    finish(&b, st);
    return 0;
}

int rpc_blocking_client_stream(grpc_channel *ch, const char *method, const grpc_metadata *md,
                               size_t n_md, double timeout_s,
                               grpc_byte_buffer *(*next)(void *arg), void *arg, uint8_t **resp,
                               size_t *resp_len, rpc_status *st)
{
    blocking b;
    memset(&b, 0, sizeof b);
    *resp = NULL;
    *resp_len = 0;
    b.cq = grpc_completion_queue_create_for_pluck(NULL);
    b.details = grpc_empty_slice();
    grpc_metadata_array_init(&b.init_md);
    grpc_metadata_array_init(&b.trailing);
    b.call = grpc_channel_create_call(ch, NULL, 0, b.cq, grpc_slice_from_static_string(method),
                                      NULL, rpc_deadline_in(timeout_s), NULL);
    if (!b.call) {
        grpc_completion_queue_destroy(b.cq);
        grpc_metadata_array_destroy(&b.init_md);
        grpc_metadata_array_destroy(&b.trailing);
        return -1;
    }
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    op.data.send_initial_metadata.count = n_md;
    op.data.send_initial_metadata.metadata = (grpc_metadata *)md;
    grpc_call_start_batch(b.call, &op, 1, (void *)1, NULL);
    int ok = pluck(&b, (void *)1);
    /* One message on the wire at a time: the server's flow control paces
     * the producer. A failed send ends the loop; the status says why. */
    grpc_byte_buffer *bb;
    while (ok && (bb = next(arg)) != NULL) {
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = bb;
        grpc_call_start_batch(b.call, &op, 1, (void *)4, NULL);
        ok = pluck(&b, (void *)4);
        grpc_byte_buffer_destroy(bb);
    }
    grpc_byte_buffer *out = NULL;
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (ok)
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &b.init_md;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &out;
    grpc_call_start_batch(b.call, ops, n, (void *)5, NULL);
    pluck(&b, (void *)5);
    finish(&b, st);
    if (out) {
        if (st->code == GRPC_STATUS_OK)
            *resp = rpc_flatten(out, resp_len);
        grpc_byte_buffer_destroy(out);
    }
    return 0;
}
