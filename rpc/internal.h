/* internal.h — what the library's own files share: the server's structures
 * (server.c, call.c) and the ops that open a client call (fwd.c, blocking.c). */
#ifndef SG_RPC_INTERNAL_H
#define SG_RPC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "rpc/rpc.h"

typedef struct rpc_method {
    char *path;
    rpc_handler_fn fn;
    void *data;
    void *registered;   /* grpc's handle for the method */
    int stream_in;      /* client streams: no payload is read before dispatch */
} rpc_method;

/* One queued send: a message, a status, or both (unary reply). */
typedef struct rpc_out {
    struct rpc_out *next;
    grpc_byte_buffer *msg;            /* owned; NULL for status-only */
    void (*on_sent)(void *, int);
    void *sent_arg;
    int has_status;
    grpc_status_code code;
    grpc_slice details;               /* owned */
    grpc_metadata *trailing;          /* owned, with owned slices */
    size_t n_trailing;
    int with_close;                   /* the batch carries RECV_CLOSE_ON_SERVER */
} rpc_out;

struct rpc_call {
    atomic_int refs;
    rpc_server *srv;
    rpc_method *method;               /* borrowed from srv */
    grpc_call *call;                  /* owned: one grpc ref */
    gpr_timespec deadline;
    grpc_metadata_array md;           /* owned */
    grpc_byte_buffer *payload;        /* owned until flattened */
    uint8_t *req;                     /* owned */
    size_t req_len;

    struct timespec dispatched;       /* monotonic, for the observer */
    char label[64];                   /* rpc_call_set_label */
    char request_id[RPC_REQUEST_ID_MAX + 1];   /* the client's x-request-id, or made here */
    char traceparent[56];             /* W3C traceparent passed through; "" none */
    rpc_tag new_tag;                  /* request_registered_call completed */
    rpc_tag close_tag;                /* RECV_CLOSE_ON_SERVER completed */
    int close_started;                /* under mu: the close watch is on the wire */
    int cancelled_flag;               /* written by grpc at close */
    atomic_int closed;
    atomic_int cancelled;
    void (*on_cancel)(void *);
    void *cancel_arg;

    pthread_mutex_t mu;               /* guards everything below */
    rpc_out *head, *tail;
    rpc_out *inflight;                /* the batch on the wire */
    int sending;
    int md_sent;
    int status_queued;
    rpc_tag send_tag;

    /* receiving, for methods whose client streams (rpc_call_recv) */
    grpc_byte_buffer *recv_buf;       /* written by grpc; handed to on_recv */
    rpc_tag recv_tag;
    int receiving;                    /* under mu: a RECV_MESSAGE is on the wire */
    void (*on_recv)(void *arg, grpc_byte_buffer *bb);
    void *recv_arg;
};

/* ops[0..3] of a client call: metadata, the one request, half-close, and
 * reading the server's initial metadata (fwd.c). */
void rpc_client_open_ops(grpc_op ops[4], const grpc_metadata *md, size_t n_md,
                         grpc_byte_buffer *req, grpc_metadata_array *init_md);

rpc_call *rpc_call_new(rpc_server *s, rpc_method *m);
/* A new call arrived: run the handler. */
void rpc_call_dispatch(rpc_call *c);
void rpc_call_free_unstarted(rpc_call *c);
/* The server's observer, if any (server.c). */
void rpc_server_observe(rpc_server *s, const char *method, grpc_status_code code, double seconds,
                        const char *label);

#endif
