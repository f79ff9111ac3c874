/* result_test.c — host/core/result.c alone: results assembled from 'b' 'k' 'r'
 * 'f' frames, the output cap per representation and its notice, what older
 * clients read (mime_type/data), hostile frames (bad MIME bytes, too many
 * representations, a representation without its 'r', more data than may be
 * buffered). The event sender and redaction are stubbed: every Result event
 * is packed and unpacked again, as a client would see it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/host.h"

#define MAX_EVENTS 8
static Sandgate__V1__RunCodeEvent *events[MAX_EVENTS];
static int n_events;
static int n_redacts;

int rpc_call_send_msg(rpc_call *c, const ProtobufCMessage *m)
{
    (void)c;
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    protobuf_c_message_pack(m, buf);
    assert_true(n_events < MAX_EVENTS);
    events[n_events++] = sandgate__v1__run_code_event__unpack(NULL, n, buf);
    free(buf);
    return 0;
}

uint8_t *host_redact_all(const host_sandbox *sb, const uint8_t *data, size_t len, size_t *out_len)
{
    (void)sb;
    n_redacts++;
    uint8_t *out = malloc(len ? len : 1);
    memcpy(out, data, len);
    *out_len = len;
    return out;
}

static host_run run;

static int setup(void **state)
{
    (void)state;
    memset(&run, 0, sizeof run);
    run.act.max_output = 1 << 20;
    n_events = n_redacts = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < n_events; i++)
        sandgate__v1__run_code_event__free_unpacked(events[i], NULL);
    host_result_cleanup(&run.result);
    return 0;
}

static void frame(char type, const void *p, size_t n)
{
    uint8_t *buf = malloc(n + 1);
    buf[0] = (uint8_t)type;
    memcpy(buf + 1, p, n);
    host_result_frame(&run, NULL, buf, n + 1);
    free(buf);
}

/* One representation: its data in 'k' chunks of `chunk` bytes, then 'r'. */
static void rep(const char *mime, const uint8_t *data, size_t n, size_t chunk)
{
    size_t pos = 0;
    while (n - pos > chunk) {
        frame('k', data + pos, chunk);
        pos += chunk;
    }
    size_t ml = strlen(mime);
    uint8_t *buf = malloc(ml + 1 + (n - pos));
    memcpy(buf, mime, ml);
    buf[ml] = 0;
    memcpy(buf + ml + 1, data + pos, n - pos);
    frame('r', buf, ml + 1 + (n - pos));
    free(buf);
}

static Sandgate__V1__Result *result(int i)
{
    assert_true(i < n_events);
    assert_int_equal(events[i]->event_case, SANDGATE__V1__RUN_CODE_EVENT__EVENT_RESULT);
    return events[i]->result;
}

static uint8_t *pattern(size_t n)
{
    uint8_t *d = malloc(n);
    for (size_t i = 0; i < n; i++)
        d[i] = (uint8_t)(i * 7 + 3);
    return d;
}

static void test_bundle_in_chunks_arrives_whole(void **state)
{
    (void)state;
    uint8_t *png = pattern(150000);
    frame('b', "main", 4);
    rep("text/plain", (const uint8_t *)"<Figure>", 8, 65535);
    rep("image/png", png, 150000, 65535);
    assert_int_equal(n_events, 0);
    frame('f', "", 0);
    Sandgate__V1__Result *r = result(0);
    assert_int_equal(r->n_representations, 2);
    assert_string_equal(r->representations[0]->mime_type, "text/plain");
    assert_string_equal(r->representations[1]->mime_type, "image/png");
    assert_int_equal(r->representations[1]->data.len, 150000);
    assert_memory_equal(r->representations[1]->data.data, png, 150000);
    /* Older clients read the PNG, as before. */
    assert_string_equal(r->mime_type, "image/png");
    assert_int_equal(r->data.len, 150000);
    assert_true(r->is_main_result);
    assert_false(r->dropped);
    assert_int_equal(run.act.output_sent, 150008);
    assert_int_equal(n_redacts, 2);
    assert_int_equal(run.result.held, 0);
    free(png);
}

static void test_text_primary_without_png(void **state)
{
    (void)state;
    frame('b', "", 0);
    rep("text/plain", (const uint8_t *)"df", 2, 65535);
    rep("text/html", (const uint8_t *)"<table/>", 8, 65535);
    frame('f', "", 0);
    Sandgate__V1__Result *r = result(0);
    assert_string_equal(r->mime_type, "text/plain");
    assert_false(r->is_main_result);
    assert_int_equal(r->n_representations, 2);
}

static void test_cap_drops_what_does_not_fit_with_notice(void **state)
{
    (void)state;
    run.act.max_output = 1000;
    uint8_t *png = pattern(100000);
    frame('b', "", 0);
    rep("text/plain", (const uint8_t *)"<Figure>", 8, 65535);
    rep("image/png", png, 100000, 65535);
    assert_true(run.result.held <= 1000);   /* never buffered past the cap */
    frame('f', "", 0);
    Sandgate__V1__Result *r = result(0);
    assert_true(r->dropped);
    assert_int_equal(r->n_representations, 1);
    assert_string_equal(r->representations[0]->mime_type, "text/plain");
    assert_int_equal(r->n_dropped_mime_types, 1);
    assert_string_equal(r->dropped_mime_types[0], "image/png");
    assert_non_null(strstr(r->notice, "image/png (97.7 KiB)"));
    assert_non_null(strstr(r->notice, "output limit of 1000 bytes"));
    assert_string_equal(r->mime_type, "text/plain");
    assert_int_equal(run.results_dropped, 1);
    assert_true(run.act.truncated);
    assert_int_equal(run.act.output_total, 100008);
    free(png);
}

static void test_all_dropped_result_is_the_notice(void **state)
{
    (void)state;
    run.act.max_output = 10;
    uint8_t *big = pattern(5000);
    frame('b', "main", 4);
    rep("text/plain", big, 5000, 65535);
    frame('f', "", 0);
    Sandgate__V1__Result *r = result(0);
    assert_true(r->dropped);
    assert_int_equal(r->n_representations, 0);
    assert_string_equal(r->mime_type, "text/plain");
    assert_int_equal(r->data.len, strlen(r->notice));
    assert_memory_equal(r->data.data, r->notice, r->data.len);
    assert_non_null(strstr(r->notice, "result dropped"));
    assert_true(r->is_main_result);
    free(big);
}

static void test_lone_r_is_a_result(void **state)
{
    (void)state;
    rep("text/plain", (const uint8_t *)"42", 2, 65535);
    Sandgate__V1__Result *r = result(0);
    assert_int_equal(r->n_representations, 1);
    assert_string_equal(r->mime_type, "text/plain");
    assert_memory_equal(r->data.data, "42", 2);
}

static void test_mime_bytes_sanitised(void **state)
{
    (void)state;
    frame('b', "", 0);
    rep("text/\x01h\xc3\xa9 x", (const uint8_t *)"d", 1, 65535);
    frame('f', "", 0);
    /* The packed event unpacked fine (protobuf strings are UTF-8). */
    assert_string_equal(result(0)->representations[0]->mime_type, "text/?h???x");
}

static void test_too_many_representations(void **state)
{
    (void)state;
    frame('b', "", 0);
    for (int i = 0; i < HOST_RESULT_REPS + 3; i++)
        rep("text/plain", (const uint8_t *)"x", 1, 65535);
    frame('f', "", 0);
    Sandgate__V1__Result *r = result(0);
    assert_int_equal(r->n_representations, HOST_RESULT_REPS);
    assert_true(r->dropped);
    assert_non_null(strstr(r->notice, "3 more representations"));
}

static void test_flush_drops_an_unfinished_representation(void **state)
{
    (void)state;
    frame('b', "", 0);
    rep("text/plain", (const uint8_t *)"ok", 2, 65535);
    frame('k', "partial", 7);   /* interrupted before its 'r' */
    host_result_flush(&run, NULL);
    Sandgate__V1__Result *r = result(0);
    assert_int_equal(r->n_representations, 1);
    assert_memory_equal(r->representations[0]->data.data, "ok", 2);
    assert_int_equal(run.result.held, 0);
    host_result_flush(&run, NULL);   /* nothing open: nothing sent */
    assert_int_equal(n_events, 1);
}

static void test_buffering_bounded_whatever_the_cap(void **state)
{
    (void)state;
    run.act.max_output = 64u << 20;
    uint8_t *chunk = pattern(65535);
    frame('b', "", 0);
    for (int i = 0; i < 100; i++) {   /* 6.25 MiB */
        frame('k', chunk, 65535);
        assert_true(run.result.held <= HOST_RESULT_MAX);
    }
    frame('r', "image/png\0", 10);
    frame('f', "", 0);
    Sandgate__V1__Result *r = result(0);
    assert_true(r->dropped);
    assert_non_null(strstr(r->notice, "image/png (6.2 MiB)"));
    free(chunk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bundle_in_chunks_arrives_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_primary_without_png, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cap_drops_what_does_not_fit_with_notice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_all_dropped_result_is_the_notice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lone_r_is_a_result, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mime_bytes_sanitised, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_many_representations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_drops_an_unfinished_representation, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_buffering_bounded_whatever_the_cap, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
