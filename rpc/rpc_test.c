/* rpc_test.c — the rpc library against itself on loopback: unary and
 * server-streaming calls, a stream sent from another thread, UNIMPLEMENTED
 * for unknown methods, the message-size limit, deadlines reaching the
 * handler as a cancel, and a forwarder (rpc_unary_start for unary methods,
 * rpc_fwd for streams, both with a parent call) that keeps the backend's
 * status and whose client's cancel reaches the backend; the wire-format
 * field scan. Messages are OutputChunk {bytes}. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc/rpc.h"
#include "sandgate/v1/sandgate.pb-c.h"

static rpc_server *backend, *proxy;
static int backend_port, proxy_port;
static grpc_channel *to_backend, *to_proxy;
static volatile int slow_cancelled;

static Sandgate__V1__OutputChunk *decode(const uint8_t *buf, size_t len)
{
    return sandgate__v1__output_chunk__unpack(NULL, len, buf);
}

static void on_echo(rpc_call *c, void *d)
{
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    Sandgate__V1__OutputChunk *in = decode(buf, len);
    if (!in) {
        rpc_call_finish(c, GRPC_STATUS_INVALID_ARGUMENT, "bad request");
        return;
    }
    rpc_call_reply(c, &in->base);
    sandgate__v1__output_chunk__free_unpacked(in, NULL);
}

/* Streams n messages "0".."n-1" from a thread of its own, then OK. */
static void *stream_thread(void *arg)
{
    rpc_call *c = arg;
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    Sandgate__V1__OutputChunk *in = decode(buf, len);
    char num[16] = "";
    memcpy(num, in->data.data, in->data.len < 15 ? in->data.len : 15);
    int n = atoi(num);
    sandgate__v1__output_chunk__free_unpacked(in, NULL);
    for (int i = 0; i < n; i++) {
        char s[16];
        Sandgate__V1__OutputChunk out;
        sandgate__v1__output_chunk__init(&out);
        out.data.len = (size_t)snprintf(s, sizeof s, "%d", i);
        out.data.data = (uint8_t *)s;
        rpc_call_send_msg(c, &out.base);
    }
    rpc_call_finish(c, GRPC_STATUS_OK, NULL);
    rpc_call_unref(c);
    return NULL;
}

static void on_stream(rpc_call *c, void *d)
{
    pthread_t t;
    pthread_create(&t, NULL, stream_thread, rpc_call_ref(c));
    pthread_detach(t);
}

static void slow_cancel(void *arg)
{
    slow_cancelled = 1;
    rpc_call_finish(arg, GRPC_STATUS_CANCELLED, "cancelled");
}

/* Always fails, with details the forwarder must carry through. */
static void on_fail(rpc_call *c, void *d)
{
    rpc_call_finish(c, GRPC_STATUS_NOT_FOUND, "no such thing: 42");
}

/* Never answers on its own: only the client's deadline or cancel ends it. */
static void on_slow(rpc_call *c, void *d)
{
    rpc_call_on_cancel(c, slow_cancel, c);
}

/* The proxy relays any call to the backend as its child call. */
typedef struct relay {
    rpc_call *in;
} relay;

static void relay_msg(void *arg, rpc_fwd *f, grpc_byte_buffer *bb)
{
    relay *r = arg;
    rpc_call_send(r->in, bb, NULL, NULL);
    rpc_fwd_next(f);
}

static void relay_done(void *arg, grpc_status_code code, const char *details,
                       const rpc_trailer *t)
{
    relay *r = arg;
    rpc_call_finish(r->in, code, details);
    rpc_call_unref(r->in);
    free(r);
}

static grpc_byte_buffer *request_copy(rpc_call *c)
{
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

static void relay_unary_done(void *arg, rpc_unary_result *res)
{
    rpc_call *in = arg;
    rpc_call_finish_msg(in, res->resp, res->code, res->details);
    rpc_call_unref(in);
}

static void on_relay_unary(rpc_call *c, void *d)
{
    sg_err err;
    rpc_call_watch_close(c);   /* a client's cancel reaches the child */
    rpc_call *in = rpc_call_ref(c);
    if (rpc_unary_start(to_backend, rpc_server_cq(rpc_call_server(c)), rpc_call_grpc(c),
                        (const char *)d, rpc_deadline_in(30), NULL, 0, request_copy(c),
                        relay_unary_done, in, &err) != 0) {
        rpc_call_fail(c, &err);
        rpc_call_unref(in);
    }
}

static void on_relay(rpc_call *c, void *d)
{
    rpc_call_watch_close(c);
    relay *r = calloc(1, sizeof *r);
    r->in = rpc_call_ref(c);
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    static const rpc_fwd_cbs cbs = {relay_msg, relay_done};
    sg_err err;
    if (!rpc_fwd_start(to_backend, rpc_server_cq(rpc_call_server(c)), rpc_call_grpc(c),
                       (const char *)d, rpc_deadline_in(30), NULL, 0, bb, &cbs, r, &err)) {
        rpc_call_fail(c, &err);
        rpc_call_unref(r->in);
        free(r);
    }
}

static rpc_server *start(int *port, int is_proxy)
{
    sg_err err;
    rpc_server *s = rpc_server_create(2, &err);
    assert_non_null(s);
    if (is_proxy) {
        assert_int_equal(rpc_server_add_method(s, "/t.T/Echo", on_relay_unary, "/t.T/Echo", &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/EchoS", on_relay, "/t.T/Echo", &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/Stream", on_relay, "/t.T/Stream", &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/Slow", on_relay_unary, "/t.T/Slow", &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/SlowS", on_relay, "/t.T/Slow", &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/Fail", on_relay_unary, "/t.T/Fail", &err), 0);
    } else {
        assert_int_equal(rpc_server_add_method(s, "/t.T/Echo", on_echo, NULL, &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/Stream", on_stream, NULL, &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/Slow", on_slow, NULL, &err), 0);
        assert_int_equal(rpc_server_add_method(s, "/t.T/Fail", on_fail, NULL, &err), 0);
    }
    assert_int_equal(rpc_server_listen(s, "127.0.0.1:0", NULL, port, &err), 0);
    assert_int_equal(rpc_server_start(s, &err), 0);
    return s;
}

static int setup(void **state)
{
    rpc_runtime_init();
    backend = start(&backend_port, 0);
    char target[64];
    snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", backend_port);
    to_backend = rpc_channel_create(target, NULL);
    proxy = start(&proxy_port, 1);
    snprintf(target, sizeof target, "ipv4:127.0.0.1:%d", proxy_port);
    to_proxy = rpc_channel_create(target, NULL);
    return 0;
}

static int teardown(void **state)
{
    grpc_channel_destroy(to_proxy);
    rpc_server_destroy(proxy);
    grpc_channel_destroy(to_backend);
    rpc_server_destroy(backend);
    grpc_shutdown();
    return 0;
}

static void chunk(Sandgate__V1__OutputChunk *m, const char *s, size_t n)
{
    sandgate__v1__output_chunk__init(m);
    m->data.data = (uint8_t *)s;
    m->data.len = n;
}

static void unary_on_method(grpc_channel *ch, const char *method)
{
    Sandgate__V1__OutputChunk req;
    chunk(&req, "hello\0world", 11);
    uint8_t *resp;
    size_t len;
    rpc_status st;
    assert_int_equal(rpc_blocking_unary(ch, method, NULL, 0, 5, &req.base, &resp, &len, &st), 0);
    assert_int_equal(st.code, GRPC_STATUS_OK);
    Sandgate__V1__OutputChunk *out = decode(resp, len);
    assert_int_equal(out->data.len, 11);
    assert_memory_equal(out->data.data, "hello\0world", 11);
    sandgate__v1__output_chunk__free_unpacked(out, NULL);
    free(resp);
}

static void test_unary(void **s) { unary_on_method(to_backend, "/t.T/Echo"); }
static void test_unary_through_forwarder(void **s) { unary_on_method(to_proxy, "/t.T/Echo"); }
/* A unary method relayed by the streaming forwarder works too. */
static void test_unary_through_stream_forwarder(void **s)
{
    unary_on_method(to_proxy, "/t.T/EchoS");
}

static void test_status_through_forwarder(void **s)
{
    Sandgate__V1__OutputChunk req;
    chunk(&req, "x", 1);
    uint8_t *resp = NULL;
    size_t len;
    rpc_status st;
    assert_int_equal(rpc_blocking_unary(to_proxy, "/t.T/Fail", NULL, 0, 5, &req.base, &resp, &len, &st), 0);
    assert_int_equal(st.code, GRPC_STATUS_NOT_FOUND);
    assert_string_equal(st.details, "no such thing: 42");
    assert_null(resp);
}

typedef struct seen {
    int n;
    int in_order;
} seen;

static int count_msg(void *arg, const uint8_t *buf, size_t len)
{
    seen *sn = arg;
    Sandgate__V1__OutputChunk *m = decode(buf, len);
    char s[16];
    snprintf(s, sizeof s, "%d", sn->n);
    if (m->data.len != strlen(s) || memcmp(m->data.data, s, m->data.len) != 0)
        sn->in_order = 0;
    sandgate__v1__output_chunk__free_unpacked(m, NULL);
    sn->n++;
    return 0;
}

static void stream_on(grpc_channel *ch, int n)
{
    char s[16];
    Sandgate__V1__OutputChunk req;
    chunk(&req, s, (size_t)snprintf(s, sizeof s, "%d", n));
    seen sn = {0, 1};
    rpc_status st;
    assert_int_equal(rpc_blocking_stream(ch, "/t.T/Stream", NULL, 0, 10, &req.base, count_msg, &sn, &st), 0);
    assert_int_equal(st.code, GRPC_STATUS_OK);
    assert_int_equal(sn.n, n);
    assert_true(sn.in_order);
}

static void test_stream(void **s) { stream_on(to_backend, 1000); }
static void test_stream_through_forwarder(void **s) { stream_on(to_proxy, 1000); }

static void test_unknown_method_is_unimplemented(void **s)
{
    Sandgate__V1__OutputChunk req;
    chunk(&req, "x", 1);
    uint8_t *resp;
    size_t len;
    rpc_status st;
    rpc_blocking_unary(to_backend, "/t.T/Nope", NULL, 0, 5, &req.base, &resp, &len, &st);
    assert_int_equal(st.code, GRPC_STATUS_UNIMPLEMENTED);
}

static void test_message_over_limit(void **s)
{
    size_t n = RPC_MAX_MESSAGE + 1024;
    char *big = calloc(1, n);
    Sandgate__V1__OutputChunk req;
    chunk(&req, big, n);
    uint8_t *resp;
    size_t len;
    rpc_status st;
    rpc_blocking_unary(to_backend, "/t.T/Echo", NULL, 0, 10, &req.base, &resp, &len, &st);
    assert_int_equal(st.code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    free(big);
}

static void test_deadline_cancels_handler(void **s)
{
    slow_cancelled = 0;
    Sandgate__V1__OutputChunk req;
    chunk(&req, "x", 1);
    uint8_t *resp;
    size_t len;
    rpc_status st;
    rpc_blocking_unary(to_backend, "/t.T/Slow", NULL, 0, 0.3, &req.base, &resp, &len, &st);
    assert_int_equal(st.code, GRPC_STATUS_DEADLINE_EXCEEDED);
    for (int i = 0; i < 100 && !slow_cancelled; i++)
        usleep(10000);
    assert_true(slow_cancelled);
}

/* The client's deadline ends the proxy's call; propagation must end the
 * proxy's child call at the backend too. */
static void cancel_propagates(const char *method)
{
    slow_cancelled = 0;
    Sandgate__V1__OutputChunk req;
    chunk(&req, "x", 1);
    uint8_t *resp;
    size_t len;
    rpc_status st;
    rpc_blocking_unary(to_proxy, method, NULL, 0, 0.3, &req.base, &resp, &len, &st);
    assert_int_equal(st.code, GRPC_STATUS_DEADLINE_EXCEEDED);
    for (int i = 0; i < 200 && !slow_cancelled; i++)
        usleep(10000);
    assert_true(slow_cancelled);
}

static void test_cancel_propagates_through_forwarder(void **s) { cancel_propagates("/t.T/Slow"); }

static grpc_byte_buffer *bytes_in_slices(const uint8_t *b, size_t n, size_t first_len)
{
    grpc_slice parts[2] = {grpc_slice_from_copied_buffer((const char *)b, first_len),
                           grpc_slice_from_copied_buffer((const char *)b + first_len, n - first_len)};
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(parts, n > first_len ? 2 : 1);
    grpc_slice_unref(parts[0]);
    grpc_slice_unref(parts[1]);
    return bb;
}

/* rpc_wire_first_field: the kind of a stream event, from a key split or not. */
static void test_wire_first_field(void **s)
{
    uint8_t big[4096] = {0x2a, 0x02, 'o', 'k'};   /* field 5 (End), then zeros */
    grpc_byte_buffer *bb = bytes_in_slices(big, sizeof big, sizeof big);
    assert_int_equal(rpc_wire_first_field(bb), 5);
    grpc_byte_buffer_destroy(bb);
    static const uint8_t wide[] = {0xfa, 0x01, 0x00};   /* field 31, key in 2 bytes */
    bb = bytes_in_slices(wide, sizeof wide, 1);          /* split inside the key */
    assert_int_equal(rpc_wire_first_field(bb), 31);
    grpc_byte_buffer_destroy(bb);
    static const uint8_t cut[] = {0xfa};                  /* key never ends */
    bb = bytes_in_slices(cut, sizeof cut, 1);
    assert_int_equal(rpc_wire_first_field(bb), 0);
    grpc_byte_buffer_destroy(bb);
    bb = grpc_raw_byte_buffer_create(NULL, 0);
    assert_int_equal(rpc_wire_first_field(bb), 0);
    grpc_byte_buffer_destroy(bb);
}

/* The client cancels (long deadline, no expiry): the proxy's close watch
 * must carry it to the child, and the backend's handler must see it. */
static void explicit_cancel_propagates(const char *method)
{
    slow_cancelled = 0;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_call *call = grpc_channel_create_call(to_proxy, NULL, 0, cq,
                                               grpc_slice_from_static_string(method), NULL,
                                               rpc_deadline_in(60), NULL);
    Sandgate__V1__OutputChunk req;
    chunk(&req, "x", 1);
    grpc_byte_buffer *bb = rpc_pack(&req.base);
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = bb;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    assert_int_equal(grpc_call_start_batch(call, ops, 3, (void *)1, NULL), GRPC_CALL_OK);
    grpc_event ev = grpc_completion_queue_next(cq, rpc_deadline_in(5), NULL);
    assert_int_equal(ev.type, GRPC_OP_COMPLETE);
    usleep(200000);   /* the backend's handler is waiting by now */
    grpc_call_cancel(call, NULL);
    for (int i = 0; i < 300 && !slow_cancelled; i++)
        usleep(10000);
    assert_true(slow_cancelled);
    grpc_call_unref(call);
    grpc_byte_buffer_destroy(bb);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

static void test_client_cancel_through_forwarder(void **s) { explicit_cancel_propagates("/t.T/Slow"); }
static void test_client_cancel_through_stream_forwarder(void **s)
{
    explicit_cancel_propagates("/t.T/SlowS");
}
static void test_cancel_propagates_through_stream_forwarder(void **s)
{
    cancel_propagates("/t.T/SlowS");
}

/* rpc_wire_field: where field 1 lies, or -1, over well-formed and broken bytes. */
static void test_wire_field(void **s)
{
    static const struct {
        const char *name;
        const uint8_t bytes[16];
        size_t len;
        int rc;
        size_t off, n;
    } cases[] = {
        {"field 1 alone", {0x0a, 0x02, 'h', 'i'}, 4, 0, 2, 2},
        {"fixed32 cut short after varint, fixed64", {0x10, 0x96, 0x01, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3}, 16, -1, 0, 0},
        {"after other fields", {0x10, 0x96, 0x01, 0x12, 0x01, 'x', 0x0a, 0x01, 'y'}, 9, 0, 8, 1},
        {"empty field 1", {0x0a, 0x00}, 2, 0, 2, 0},
        {"absent", {0x12, 0x01, 'x'}, 3, -1, 0, 0},
        {"twice (would merge)", {0x0a, 0x00, 0x0a, 0x00}, 4, -1, 0, 0},
        {"length past the end", {0x0a, 0x05, 'h', 'i'}, 4, -1, 0, 0},
        {"truncated varint", {0x10, 0x96}, 2, -1, 0, 0},
        {"truncated fixed32", {0x25, 1, 2}, 3, -1, 0, 0},
        {"group wire type", {0x0b, 0x0c}, 2, -1, 0, 0},
        {"empty message", {0}, 0, -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t off = 99, n = 99;
        int rc = rpc_wire_field(cases[i].bytes, cases[i].len, 1, &off, &n);
        if (rc != cases[i].rc || (rc == 0 && (off != cases[i].off || n != cases[i].n)))
            fail_msg("%s: rc %d off %zu n %zu", cases[i].name, rc, off, n);
    }
}

static void *parallel_client(void *arg)
{
    for (int i = 0; i < 50; i++)
        stream_on(to_proxy, 20);
    return NULL;
}

static void test_many_concurrent_streams(void **s)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, parallel_client, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_unary_through_forwarder),
        cmocka_unit_test(test_unary_through_stream_forwarder),
        cmocka_unit_test(test_status_through_forwarder),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_stream_through_forwarder),
        cmocka_unit_test(test_unknown_method_is_unimplemented),
        cmocka_unit_test(test_message_over_limit),
        cmocka_unit_test(test_deadline_cancels_handler),
        cmocka_unit_test(test_cancel_propagates_through_forwarder),
        cmocka_unit_test(test_cancel_propagates_through_stream_forwarder),
        cmocka_unit_test(test_client_cancel_through_forwarder),
        cmocka_unit_test(test_client_cancel_through_stream_forwarder),
        cmocka_unit_test(test_wire_field),
        cmocka_unit_test(test_wire_first_field),
        cmocka_unit_test(test_many_concurrent_streams),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
