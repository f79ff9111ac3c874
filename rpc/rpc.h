/* rpc.h — sandgate's gRPC plumbing on the C core API, shared by both daemons,
 * the CLI and the benchmarks.
 *
 *  - rpc_server: one completion queue, N threads; every tag is an rpc_tag
 *    closure. Registered methods (unary or server-streaming) are dispatched to
 *    handlers; unknown methods get UNIMPLEMENTED at once.
 *  - rpc_call: one incoming call, refcounted. A handler may answer on the
 *    spot or keep a ref and answer later from any thread: sends are queued and
 *    serialised, so a long RunCode never blocks a loop thread.
 *  - rpc_fwd: an outgoing call made on behalf of an incoming one (parent call,
 *    GRPC_PROPAGATE_DEFAULTS), completing on the server's queue.
 *  - rpc_blocking_*: simple synchronous calls for the CLI, tests and benches.
 *  - codec: protobuf-c <-> grpc_byte_buffer with size limits.
 *  - status: sg_err codes -> grpc_status_code (the only place that maps). */
#ifndef SG_RPC_H
#define SG_RPC_H

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>

#include "common/err.h"
#include "sandgate/v1/errors.pb-c.h"

#define RPC_MAX_MESSAGE (16 * 1024 * 1024)

/* grpc_init plus process-wide tuning (runtime.c). Call instead of grpc_init. */
void rpc_runtime_init(void);
/* Daemons: grpc's own log lines go through common/log.h as JSON. */
void rpc_runtime_log_json(void);

/* A completion-queue tag: the loop calls fn(arg, ok). */
typedef struct rpc_tag {
    void (*fn)(void *arg, int ok);
    void *arg;
} rpc_tag;

typedef struct rpc_server rpc_server;
typedef struct rpc_call rpc_call;

typedef void (*rpc_handler_fn)(rpc_call *call, void *data);

/* ---- server ---- */
rpc_server *rpc_server_create(int threads, sg_err *err);
/* path "/pkg.Service/Method". Before rpc_server_start. */
int rpc_server_add_method(rpc_server *s, const char *path, rpc_handler_fn fn, void *data,
                          sg_err *err);
/* addr "127.0.0.1:0" picks a port; *port receives it. creds NULL = insecure. */
/* The same for a method whose client streams (client- or bidi-streaming):
 * the handler runs with no request read; it reads with rpc_call_recv. */
int rpc_server_add_stream_method(rpc_server *s, const char *path, rpc_handler_fn fn,
                                 void *data, sg_err *err);
/* The distinct services of the registered methods ("pkg.Service"), in
 * registration order; returns how many were written to out. */
#define RPC_SERVICE_MAX 128
size_t rpc_server_services(rpc_server *s, char (*out)[RPC_SERVICE_MAX], size_t cap);
int rpc_server_listen(rpc_server *s, const char *addr, grpc_server_credentials *creds,
                      int *port, sg_err *err);
int rpc_server_start(rpc_server *s, sg_err *err);
/* fn runs once per call when its status is queued, on the thread that
 * queued it: the method path, the status, the seconds since the call was
 * dispatched and its label (rpc_call_set_label; "" if none). For metrics:
 * it must not block. Before rpc_server_start. */
typedef void (*rpc_call_observer)(void *arg, const char *method, grpc_status_code code,
                                  double seconds, const char *label);
void rpc_server_set_observer(rpc_server *s, rpc_call_observer fn, void *arg);
grpc_completion_queue *rpc_server_cq(rpc_server *s);
/* Stop accepting, cancel calls in flight, join the threads. */
void rpc_server_shutdown(rpc_server *s);
void rpc_server_destroy(rpc_server *s);

/* ---- incoming call ---- */
rpc_call *rpc_call_ref(rpc_call *c);
void rpc_call_unref(rpc_call *c);
/* The request message (flattened; valid for the call's life). */
const uint8_t *rpc_call_request(rpc_call *c, size_t *len);
/* Metadata value for key, not NUL-terminated; NULL if absent. */
const char *rpc_call_md(rpc_call *c, const char *key, size_t *len);
gpr_timespec rpc_call_deadline(rpc_call *c);
/* Request ids. Every call has one: the client's `x-request-id` if it is
 * 1..RPC_REQUEST_ID_MAX bytes of [A-Za-z0-9._:+=/-], else 32 random hex
 * digits made here. It is in the log context while the handler runs, goes
 * back to the client in the `x-request-id` trailer of every status, and
 * rides on to a backend in rpc_call_trace_md with a valid W3C
 * `traceparent`, which is passed through unchanged and logged. */
#define RPC_REQUEST_ID_MAX 64
const char *rpc_call_request_id(rpc_call *c);
const char *rpc_call_traceparent(rpc_call *c);   /* "" if none or malformed */
/* Metadata for a call made on c's behalf: x-request-id and, if present,
 * traceparent. The values point into c: use them before c is released. */
size_t rpc_call_trace_md(rpc_call *c, grpc_metadata md[2]);
/* Make c's ids this thread's log context (a callback continuing c). */
void rpc_call_log_context(rpc_call *c);

/* A short label the observer gets with the call (the gateway's tenant);
 * cut at 63 bytes. */
void rpc_call_set_label(rpc_call *c, const char *label);
grpc_call *rpc_call_grpc(rpc_call *c);
rpc_server *rpc_call_server(rpc_call *c);
/* First value of an auth-context property (e.g. GRPC_PEER_SPIFFE_ID_PROPERTY_NAME)
 * into buf; 0 on success, -1 if absent. */
int rpc_call_auth_property(rpc_call *c, const char *name, char *buf, size_t len);
/* Nonzero once the call is known cancelled: known only after rpc_call_on_cancel
 * was registered or the status went out (the close watch starts then). */
int rpc_call_cancelled(rpc_call *c);
/* Start watching for the client's cancel now (without it, the watch starts
 * with rpc_call_on_cancel or rides in the status batch). A call whose
 * forwarded child may run long needs it: grpc hands a client's cancel on
 * to the children only through a pending close watch. */
void rpc_call_watch_close(rpc_call *c);
/* cb runs once, on a loop thread, when the client cancels or the call ends
 * abnormally; immediately if that already happened. */
void rpc_call_on_cancel(rpc_call *c, void (*cb)(void *arg), void *arg);

/* Read the client's next message (stream methods only; one read at a time).
 * on_recv(arg, bb) runs on a loop thread with the message, which it owns,
 * or NULL when the client half-closed or the call died. Returns -1 if a
 * read is already pending or cannot start (on_recv is then not called). */
int rpc_call_recv(rpc_call *c, void (*on_recv)(void *arg, grpc_byte_buffer *bb), void *arg);

/* Queue a message (takes ownership of bb). on_sent(arg, ok) runs when it is on
 * the wire (ok=0: the call died). Returns -1 once a status was queued. */
int rpc_call_send(rpc_call *c, grpc_byte_buffer *bb, void (*on_sent)(void *, int), void *arg);
int rpc_call_send_msg(rpc_call *c, const ProtobufCMessage *m);
/* Queue the final status. msg may be NULL. Extra trailing metadata optional
 * (copied). Only the first finish counts. */
int rpc_call_finish(rpc_call *c, grpc_status_code code, const char *msg);
int rpc_call_finish_md(rpc_call *c, grpc_status_code code, const char *msg,
                       const grpc_metadata *trailing, size_t n_trailing);
/* A message (may be NULL; ownership taken) and the status in one batch. */
int rpc_call_finish_msg(rpc_call *c, grpc_byte_buffer *bb, grpc_status_code code, const char *msg);
/* Reply + OK in one batch (unary). */
int rpc_call_reply(rpc_call *c, const ProtobufCMessage *m);
/* Finish with the status that matches an sg_err. */
int rpc_call_fail(rpc_call *c, const sg_err *e);

/* ---- codec ---- */
grpc_byte_buffer *rpc_pack(const ProtobufCMessage *m);
/* Unpack bytes; returns NULL with INVALID_ARGUMENT-style err on garbage. Free
 * with protobuf_c_message_free_unpacked(m, NULL). */
ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                             size_t len, sg_err *err);
/* Flatten a received buffer into a new malloc'd copy. */
uint8_t *rpc_flatten(grpc_byte_buffer *bb, size_t *len);
/* Where length-delimited field `field` of a serialized message lies
 * ([*off, *off + *n) of buf); -1 if it is absent, appears twice, or the
 * bytes are not well-formed wire format. Nothing is decoded. */
int rpc_wire_field(const uint8_t *buf, size_t len, uint32_t field, size_t *off, size_t *n);
/* A new buffer holding just that field's bytes (an embedded message), or NULL. */
grpc_byte_buffer *rpc_wire_submessage(grpc_byte_buffer *bb, uint32_t field);
/* The field number of the first key in bb, 0 if none or malformed: for a
 * message that is one oneof (a stream event), which kind it is. */
uint32_t rpc_wire_first_field(grpc_byte_buffer *bb);

/* ---- status ---- */
grpc_status_code rpc_status_from_err(int sg_code);
const char *rpc_status_name(grpc_status_code code);

/* Every failing status a handler sends (rpc_call_finish*, rpc_call_fail)
 * carries this trailer, so whoever receives it can tell a status a sandgate
 * server chose from one grpc made up on the client's side (connect failure,
 * deadline, message too large), whose text names addresses and library
 * internals. */
#define RPC_ORIGIN_KEY "sandgate-origin"

/* Machine-readable reasons: google.rpc.Status{code, message, details:
 * [ErrorInfo{reason, domain "sandgate", metadata}]} in the
 * grpc-status-details-bin trailer (proto/sandgate/v1/errors.proto). */
typedef struct rpc_kv {
    const char *key, *value;
} rpc_kv;
int rpc_call_fail_info(rpc_call *c, grpc_status_code code, const char *message,
                       const char *reason, const rpc_kv *md, size_t n_md);
/* The ErrorInfo inside a grpc-status-details-bin value, or NULL. Free with
 * protobuf_c_message_free_unpacked(&info->base, NULL). */
Sandgate__V1__ErrorInfo *rpc_error_info_parse(const uint8_t *bin, size_t len);
/* A metadata value of info, or NULL. */
const char *rpc_error_info_get(const Sandgate__V1__ErrorInfo *info, const char *key);

/* What a backend's failing status carried beyond its code and text. */
typedef struct rpc_trailer {
    int from_peer;               /* RPC_ORIGIN_KEY was present: the backend's handler chose it */
    const uint8_t *details_bin;  /* grpc-status-details-bin, borrowed; NULL if none */
    size_t details_bin_len;
} rpc_trailer;

/* ---- outgoing call forwarded for an incoming one ---- */
typedef struct rpc_fwd rpc_fwd;
typedef struct rpc_fwd_cbs {
    /* One per message; takes ownership of bb. Call rpc_fwd_next(f) for the
     * next one (now, or later for backpressure); without it the call cannot
     * finish. f is passed because it may arrive before rpc_fwd_start returns. */
    void (*on_message)(void *arg, rpc_fwd *f, grpc_byte_buffer *bb);
    /* Exactly once, last. details is NUL-terminated. Of the backend's
     * trailing metadata only t is passed on (copied: grpc owns the rest
     * with the call, which is released before on_done; see fwd.c); t is
     * borrowed for the callback's duration. */
    void (*on_done)(void *arg, grpc_status_code code, const char *details, const rpc_trailer *t);
} rpc_fwd_cbs;

grpc_channel *rpc_channel_create(const char *target, grpc_channel_credentials *creds);
/* The same with a TLS server-name override (NULL = the target's host). */
grpc_channel *rpc_channel_create_tls(const char *target, grpc_channel_credentials *creds,
                                     const char *server_name);
/* parent may be NULL. Takes ownership of req. Completes on cq (a server's).
 * method must outlive the channel (a string literal): it is registered with
 * the channel on first use. */
rpc_fwd *rpc_fwd_start(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                       const char *method, gpr_timespec deadline, const grpc_metadata *md,
                       size_t n_md, grpc_byte_buffer *req, const rpc_fwd_cbs *cbs, void *arg,
                       sg_err *err);
void rpc_fwd_next(rpc_fwd *f);
void rpc_fwd_cancel(rpc_fwd *f);
/* A ref of the caller's own, taken where f is known alive (in on_message):
 * it keeps f valid after on_done, where rpc_fwd_next and rpc_fwd_cancel do
 * nothing, for a user whose own completions (a send to its client) may
 * still call them. Release with rpc_fwd_unref. */
void rpc_fwd_ref(rpc_fwd *f);
void rpc_fwd_unref(rpc_fwd *f);

/* ---- outgoing unary call: every op in one batch, one completion ---- */
typedef struct rpc_unary_result {
    grpc_status_code code;
    const char *details;                  /* NUL-terminated, borrowed */
    grpc_byte_buffer *resp;               /* the callback owns it; NULL unless OK */
    rpc_trailer trailer;                  /* borrowed; all zero on OK */
} rpc_unary_result;
typedef void (*rpc_unary_done)(void *arg, rpc_unary_result *r);

/* As rpc_fwd_start, for a unary method: done runs exactly once, on a thread
 * of cq, unless this returns -1 (then req is freed and done never runs). */
int rpc_unary_start(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                    const char *method, gpr_timespec deadline, const grpc_metadata *md,
                    size_t n_md, grpc_byte_buffer *req, rpc_unary_done done, void *arg,
                    sg_err *err);
/* The same; *call gets a ref of its own on the call (grpc_call_unref it),
 * for grpc_call_cancel_with_status from another thread: the batch then
 * completes with that status. Set before done can run. */
int rpc_unary_start_call(grpc_channel *ch, grpc_completion_queue *cq, grpc_call *parent,
                         const char *method, gpr_timespec deadline, const grpc_metadata *md,
                         size_t n_md, grpc_byte_buffer *req, rpc_unary_done done, void *arg,
                         grpc_call **call, sg_err *err);

/* ---- blocking calls ---- */
typedef struct rpc_status {
    grpc_status_code code;
    char details[1024];
    char trailer_bin[1024];   /* grpc-status-details-bin, if the server sent one */
    size_t trailer_bin_len;
} rpc_status;

/* One unary call. *resp receives the response bytes (malloc'd) on OK.
 * Returns 0 when the call completed (see st->code), -1 on local failure. */
int rpc_blocking_unary(grpc_channel *ch, const char *method, const grpc_metadata *md,
                       size_t n_md, double timeout_s, const ProtobufCMessage *req,
                       uint8_t **resp, size_t *resp_len, rpc_status *st);
/* A server-streaming call; on_msg gets each message (borrowed bytes); a
 * nonzero return cancels the call. */
int rpc_blocking_stream(grpc_channel *ch, const char *method, const grpc_metadata *md,
                        size_t n_md, double timeout_s, const ProtobufCMessage *req,
                        int (*on_msg)(void *arg, const uint8_t *buf, size_t len), void *arg,
                        rpc_status *st);

/* A client-streaming call: next(arg) gives each message to send (ours to
 * destroy) until it returns NULL; then the one response, as in
 * rpc_blocking_unary. */
int rpc_blocking_client_stream(grpc_channel *ch, const char *method, const grpc_metadata *md,
                               size_t n_md, double timeout_s,
                               grpc_byte_buffer *(*next)(void *arg), void *arg, uint8_t **resp,
                               size_t *resp_len, rpc_status *st);

gpr_timespec rpc_deadline_in(double seconds);
double rpc_deadline_left(gpr_timespec deadline);  /* seconds, may be <0; huge if infinite */

#endif
