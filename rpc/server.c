/* server.c — the completion-queue server: threads, tag dispatch, method
 * registration, keeping request slots armed, and UNIMPLEMENTED for methods
 * nobody registered (grpc core would otherwise hold them until their
 * deadline). The per-call state machine lives in call.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "rpc/internal.h"

#define RPC_MAX_METHODS 64
#define RPC_SLOTS_PER_METHOD 8
#define RPC_GENERIC_SLOTS 4

typedef struct rpc_generic {
    rpc_server *srv;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    rpc_tag tag;        /* request_call completed */
    rpc_tag done_tag;   /* UNIMPLEMENTED sent */
    int recv_cancelled;
} rpc_generic;

struct rpc_server {
    grpc_server *server;
    grpc_completion_queue *cq;
    pthread_t *threads;
    int n_threads;
    int started;
    atomic_int shutting_down;
    rpc_method methods[RPC_MAX_METHODS];
    int n_methods;
    rpc_tag shutdown_tag;
    atomic_int shutdown_done;
    rpc_call_observer observer;
    void *observer_arg;
};

static void arm_method(rpc_server *s, rpc_method *m);
static void arm_generic(rpc_server *s);

rpc_server *rpc_server_create(int threads, sg_err *err)
{
    rpc_server *s = calloc(1, sizeof *s);
    if (!s) {
        sg_err_set(err, SG_EINTERNAL, "out of memory");
        return NULL;
    }
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
         .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_CHANNELZ, .value.integer = 0},
    };
    grpc_channel_args cargs = {.num_args = 3, .args = args};
    s->server = grpc_server_create(&cargs, NULL);
    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    s->n_threads = threads > 0 ? threads : 1;
    return s;
}

static int add_method(rpc_server *s, const char *path, rpc_handler_fn fn, void *data,
                      int stream_in, sg_err *err)
{
    if (s->started || s->n_methods == RPC_MAX_METHODS)
        return sg_err_set(err, SG_EINTERNAL, "rpc_server_add_method(%s): too late or too many",
                          path);
    rpc_method *m = &s->methods[s->n_methods];
    m->registered = grpc_server_register_method(
        s->server, path, NULL,
        stream_in ? GRPC_SRM_PAYLOAD_NONE : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    if (!m->registered)
        return sg_err_set(err, SG_EINTERNAL, "grpc_server_register_method(%s) failed", path);
    m->path = strdup(path);
    m->fn = fn;
    m->data = data;
    m->stream_in = stream_in;
    s->n_methods++;
    return 0;
}

int rpc_server_add_method(rpc_server *s, const char *path, rpc_handler_fn fn, void *data,
                          sg_err *err)
{
    return add_method(s, path, fn, data, 0, err);
}

int rpc_server_add_stream_method(rpc_server *s, const char *path, rpc_handler_fn fn,
                                 void *data, sg_err *err)
{
    return add_method(s, path, fn, data, 1, err);
}

size_t rpc_server_services(rpc_server *s, char (*out)[RPC_SERVICE_MAX], size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < s->n_methods; i++) {
        const char *p = s->methods[i].path + 1, *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len >= RPC_SERVICE_MAX)
            continue;
        size_t k = 0;
        while (k < n && !(strlen(out[k]) == len && strncmp(out[k], p, len) == 0))
            k++;
        if (k < n || n == cap)
            continue;
        memcpy(out[n], p, len);
        out[n++][len] = 0;
    }
    return n;
}

int rpc_server_listen(rpc_server *s, const char *addr, grpc_server_credentials *creds,
                      int *port, sg_err *err)
{
    grpc_server_credentials *c = creds ? creds : grpc_insecure_server_credentials_create();
    int p = grpc_server_add_http2_port(s->server, addr, c);
    if (!creds)
        grpc_server_credentials_release(c);
    if (p <= 0)
        return sg_err_set(err, SG_EUNAVAIL, "cannot listen on %s (in use or bad address)", addr);
    if (port)
        *port = p;
    return 0;
}

static void *loop_main(void *arg)
{
    rpc_server *s = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        rpc_tag *t = ev.tag;
        t->fn(t->arg, ev.success);
        sg_log_set_context(NULL, NULL);   /* a callback's call context ends with it */
    }
}

int rpc_server_start(rpc_server *s, sg_err *err)
{
    grpc_server_start(s->server);
    s->started = 1;
    for (int i = 0; i < s->n_methods; i++)
        for (int k = 0; k < RPC_SLOTS_PER_METHOD; k++)
            arm_method(s, &s->methods[i]);
    for (int k = 0; k < RPC_GENERIC_SLOTS; k++)
        arm_generic(s);
    s->threads = calloc((size_t)s->n_threads, sizeof *s->threads);
    for (int i = 0; i < s->n_threads; i++)
        if (pthread_create(&s->threads[i], NULL, loop_main, s) != 0)
            return sg_err_errno(err, SG_EINTERNAL, "pthread_create");
    return 0;
}

grpc_completion_queue *rpc_server_cq(rpc_server *s) { return s->cq; }

void rpc_server_set_observer(rpc_server *s, rpc_call_observer fn, void *arg)
{
    s->observer = fn;
    s->observer_arg = arg;
}

void rpc_server_observe(rpc_server *s, const char *method, grpc_status_code code, double seconds,
                        const char *label)
{
    if (s->observer)
        s->observer(s->observer_arg, method, code, seconds, label);
}

/* ---- registered methods ---- */

static void on_new_call(void *arg, int ok)
{
    rpc_call *c = arg;
    rpc_server *s = c->srv;
    if (!ok || atomic_load(&s->shutting_down)) {
        rpc_call_free_unstarted(c);
        return;
    }
    arm_method(s, c->method);   /* keep the slot count constant */
    rpc_call_dispatch(c);
}

static void arm_method(rpc_server *s, rpc_method *m)
{
    rpc_call *c = rpc_call_new(s, m);
    c->new_tag = (rpc_tag){on_new_call, c};
    grpc_call_error e = grpc_server_request_registered_call(
        s->server, m->registered, &c->call, &c->deadline, &c->md,
        m->stream_in ? NULL : &c->payload, s->cq, s->cq, &c->new_tag);
    if (e != GRPC_CALL_OK) {
        sg_log_warn("request_registered_call(%s): error %d", m->path, e);
        rpc_call_free_unstarted(c);
    }
}

/* ---- unknown methods ---- */

static void generic_free(rpc_generic *g)
{
    if (g->call)
        grpc_call_unref(g->call);
    grpc_call_details_destroy(&g->details);
    grpc_metadata_array_destroy(&g->md);
    free(g);
}

static void on_generic_done(void *arg, int ok)
{
    generic_free(arg);
}

static void on_generic_call(void *arg, int ok)
{
    rpc_generic *g = arg;
    rpc_server *s = g->srv;
    if (!ok || atomic_load(&s->shutting_down)) {
        generic_free(g);
        return;
    }
    arm_generic(s);
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[1].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
    grpc_slice msg = grpc_slice_from_static_string("method not implemented by sandgate");
    ops[1].data.send_status_from_server.status_details = &msg;
    ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[2].data.recv_close_on_server.cancelled = &g->recv_cancelled;
    g->done_tag = (rpc_tag){on_generic_done, g};
    if (grpc_call_start_batch(g->call, ops, 3, &g->done_tag, NULL) != GRPC_CALL_OK)
        generic_free(g);
}

static void arm_generic(rpc_server *s)
{
    rpc_generic *g = calloc(1, sizeof *g);
    g->srv = s;
    grpc_call_details_init(&g->details);
    grpc_metadata_array_init(&g->md);
    g->tag = (rpc_tag){on_generic_call, g};
    if (grpc_server_request_call(s->server, &g->call, &g->details, &g->md, s->cq, s->cq,
                                 &g->tag) != GRPC_CALL_OK)
        generic_free(g);
}

/* ---- shutdown ---- */

static void on_shutdown(void *arg, int ok)
{
    rpc_server *s = arg;
    atomic_store(&s->shutdown_done, 1);
}

void rpc_server_shutdown(rpc_server *s)
{
    if (!s->started || atomic_exchange(&s->shutting_down, 1))
        return;
    s->shutdown_tag = (rpc_tag){on_shutdown, s};
    grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
    grpc_server_cancel_all_calls(s->server);
    /* The loop threads keep draining until the server's tag arrives. */
    while (!atomic_load(&s->shutdown_done)) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    grpc_completion_queue_shutdown(s->cq);
    for (int i = 0; i < s->n_threads; i++)
        pthread_join(s->threads[i], NULL);
}

void rpc_server_destroy(rpc_server *s)
{
    if (!s)
        return;
    rpc_server_shutdown(s);
    grpc_server_destroy(s->server);
    grpc_completion_queue_destroy(s->cq);
    for (int i = 0; i < s->n_methods; i++)
        free(s->methods[i].path);
    free(s->threads);
    free(s);
}
