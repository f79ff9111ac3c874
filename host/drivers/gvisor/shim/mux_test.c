/* mux_test.c — the shim's framing, windows and control-message reader on
 * pipes (no runsc): what the agent may send, and what ends the shim. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "mux.h"
#include "shim.h"

typedef struct fx {
    mux m;
    int agent_w;     /* the agent's stdout: we write frames here */
    int agent_r;     /* the agent's stdin: frames the shim sends */
    int controls;
    char last[256];
} fx;

static int on_control(void *arg, const char *json, size_t n)
{
    fx *f = arg;
    f->controls++;
    snprintf(f->last, sizeof f->last, "%.*s", (int)n, json);
    return strstr(f->last, "\"bad\"") ? -1 : 0;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    int a[2], b[2];
    assert_int_equal(pipe2(a, O_NONBLOCK), 0);
    assert_int_equal(pipe2(b, O_NONBLOCK), 0);
    fcntl(a[1], F_SETPIPE_SZ, 1 << 20);
    assert_int_equal(mux_init(&f->m, a[0], b[1]), 0);
    f->agent_w = a[1];
    f->agent_r = b[0];
    f->m.on_control = on_control;
    f->m.arg = f;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    mux_free(&f->m);   /* channels still open, their fds, both buffers */
    close(f->agent_w);
    close(f->agent_r);
    free(f);
    return 0;
}

static void agent_send(fx *f, uint8_t type, uint32_t chan, const void *p, size_t n)
{
    uint8_t *buf = malloc(9 + n);
    size_t k = mux_frame(buf, type, chan, p, n);
    assert_int_equal(write(f->agent_w, buf, k), (ssize_t)k);
    free(buf);
}

static void raw(fx *f, const void *p, size_t n)
{
    assert_int_equal(write(f->agent_w, p, n), (ssize_t)n);
}

static void test_control_and_split_frames(void **state)
{
    fx *f = *state;
    const char *j = "{\"op\":\"ready\"}";
    uint8_t buf[64];
    size_t k = mux_frame(buf, 'J', 0, j, strlen(j));
    raw(f, buf, 3);   /* half a header: nothing yet */
    assert_int_equal(mux_read(&f->m), 0);
    assert_int_equal(f->controls, 0);
    raw(f, buf + 3, k - 3);
    assert_int_equal(mux_read(&f->m), 0);
    assert_int_equal(f->controls, 1);
    assert_string_equal(f->last, j);
}

static void test_seq_boundaries_and_window_ack(void **state)
{
    fx *f = *state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
    assert_non_null(mux_chan_add(&f->m, 1, MUX_SEQ, sv[1]));
    agent_send(f, 'M', 1, "one", 3);
    agent_send(f, 'M', 1, "two!", 4);
    assert_int_equal(mux_read(&f->m), 0);
    char got[16];
    assert_int_equal(recv(sv[0], got, sizeof got, 0), 3);
    assert_int_equal(recv(sv[0], got, sizeof got, 0), 4);
    mux_settle(&f->m, 1000);   /* nothing else goes out: the W waits */
    assert_int_equal(f->m.out_n, 0);
    assert_int_equal(mux_ack_timeout(&f->m, 1000), MUX_ACK_DELAY_MS);
    mux_settle(&f->m, 1000 + MUX_ACK_DELAY_MS);
    assert_int_equal(mux_flush(&f->m), 0);
    uint8_t w[32];
    assert_int_equal(read(f->agent_r, w, sizeof w), 13);   /* one W frame: 7 bytes delivered */
    assert_int_equal(w[4], 'W');
    assert_int_equal(w[12], 7);
    /* host -> agent: one message = one M frame */
    assert_int_equal(send(sv[0], "Rx", 2, 0), 2);
    mux_chan_io(&f->m, f->m.chans[0], POLLIN);
    assert_int_equal(mux_flush(&f->m), 0);
    assert_int_equal(read(f->agent_r, w, sizeof w), 11);
    assert_int_equal(w[4], 'M');
    assert_memory_equal(w + 9, "Rx", 2);
    assert_int_equal(f->m.chans[0]->unacked, 2);
    /* an ack for more than was sent is a lie */
    uint8_t v[4] = {0, 0, 0, 3};
    agent_send(f, 'W', 1, v, 4);
    assert_int_equal(mux_read(&f->m), -1);
    assert_non_null(strstr(f->m.err, "more than was sent"));
    close(sv[0]);
}

static void test_window_overrun_is_fatal(void **state)
{
    fx *f = *state;
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    assert_non_null(mux_chan_add(&f->m, 2, MUX_PIPE, p[1]));
    static uint8_t chunk[SHIM_FRAME_PAYLOAD_MAX];
    int rc = 0;
    /* nobody reads p[0]: 64 KiB fit in the pipe, the rest is held, and
     * past 256 KiB unacknowledged the agent broke the rule */
    for (int i = 0; i < 6 && rc == 0; i++) {
        agent_send(f, 'M', 2, chunk, sizeof chunk);
        rc = mux_read(&f->m);
    }
    assert_int_equal(rc, -1);
    assert_non_null(strstr(f->m.err, "past its window"));
    close(p[0]);
}

/* A process's stdin (MUX_INPIPE): read only within the agent's window,
 * never data from the agent, the host's EOF is a C, the agent's C closes
 * the pipe (the host's writes then fail). */
static void test_stdin_pipe_window_and_close(void **state)
{
    fx *f = *state;
    int p[2];
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    mux_chan *c = mux_chan_add(&f->m, 40, MUX_INPIPE, p[0]);
    assert_non_null(c);
    static uint8_t chunk[SHIM_FRAME_PAYLOAD_MAX];
    size_t wrote = 0;
    for (int i = 0; i < 8; i++)
        wrote += (size_t)write(p[1], chunk, sizeof chunk);
    assert_int_equal(wrote, 8 * sizeof chunk);
    int rounds = 0;
    while (mux_chan_events(c) & POLLIN) {
        mux_chan_io(&f->m, c, POLLIN);
        assert_int_equal(mux_flush(&f->m), 0);
        rounds++;
        assert_true(rounds < 100);
    }
    /* the window is full: nothing more is read, however much waits */
    assert_true(c->unacked <= SHIM_WINDOW);
    assert_true(c->unacked > SHIM_WINDOW - SHIM_FRAME_PAYLOAD_MAX);
    uint8_t v[4] = {0, 1, 0, 0};   /* W 65536 */
    agent_send(f, 'W', 40, v, 4);
    assert_int_equal(mux_read(&f->m), 0);
    assert_true(mux_chan_events(c) & POLLIN);
    /* the agent's C: the pipe is closed, the host's writes break */
    agent_send(f, 'C', 40, NULL, 0);
    assert_int_equal(mux_read(&f->m), 0);
    assert_int_equal(c->fd, -1);
    signal(SIGPIPE, SIG_IGN);
    assert_int_equal(write(p[1], "x", 1), -1);
    mux_settle(&f->m, 1000);
    assert_null(mux_chan_find(&f->m, 40));
    close(p[1]);
    /* another: the host's EOF is our C; data from the agent is a lie */
    assert_int_equal(pipe2(p, O_NONBLOCK), 0);
    c = mux_chan_add(&f->m, 41, MUX_INPIPE, p[0]);
    close(p[1]);
    size_t before = f->m.out_n;
    mux_chan_io(&f->m, c, POLLHUP);
    assert_int_equal(f->m.out_n, before + 9);
    assert_int_equal(f->m.out[before + 4], 'C');
    assert_int_equal(c->fd, -1);
    agent_send(f, 'M', 41, "x", 1);
    assert_int_equal(mux_read(&f->m), -1);
    assert_non_null(strstr(f->m.err, "stdin"));
}

static void test_bad_frames(void **state)
{
    fx *f = *state;
    struct {
        const char *name;
        uint8_t bytes[16];
        size_t n;
        const char *want;
    } rows[] = {
        {"length too small", {0, 0, 0, 4, 'M', 0, 0, 0, 1}, 9, "out of range"},
        {"length too big", {0, 1, 0, 6, 'M'}, 5, "out of range"},
        {"unknown type", {0, 0, 0, 5, 'Z', 0, 0, 0, 9}, 9, "unknown frame type"},
        {"channel never opened", {0, 0, 0, 5, 'C', 0, 0, 0, 77}, 9, "never opened"},
        {"data on channel 0", {0, 0, 0, 5, 'M', 0, 0, 0, 0}, 9, "channel 0"},
        {"control off channel 0", {0, 0, 0, 7, 'J', 0, 0, 0, 1, '{', '}'}, 11, "control frame"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fx *g;
        void *st;
        setup(&st);
        g = st;
        raw(g, rows[i].bytes, rows[i].n);
        int rc = mux_read(&g->m);
        if (rc != -1 || !strstr(g->m.err, rows[i].want))
            fail_msg("%s: rc %d, err \"%s\"", rows[i].name, rc, g->m.err);
        teardown(&st);
    }
    (void)f;
}

static void test_eof(void **state)
{
    fx *f = *state;
    close(f->agent_w);
    f->agent_w = open("/dev/null", O_WRONLY);
    assert_int_equal(mux_read(&f->m), 1);
}

static void test_json(void **state)
{
    shim_json j;
    char err[128];
    const char *ok = "{\"op\":\"ctxexit\",\"id\":\"c\\u00e91\\n\",\"code\":-1,\"signal\":9,"
                     "\"x\":true,\"y\":null}";
    assert_int_equal(shim_json_parse(ok, strlen(ok), &j, err, sizeof err), 0);
    assert_string_equal(shim_json_str(&j, "op"), "ctxexit");
    assert_string_equal(shim_json_str(&j, "id"), "c\xc3\xa9" "1\n");
    long long v;
    assert_true(shim_json_num(&j, "code", &v));
    assert_int_equal(v, -1);
    assert_false(shim_json_num(&j, "x", &v));
    shim_json_cleanup(&j);
    const char *bad[] = {"", "[]", "{\"a\":[1]}", "{\"a\":{}}", "{\"a\":1,\"a\":2}",
                         "{\"a\":\"\\ud800\"}", "{\"a\":1} x", "{\"a\":12345678901234567}",
                         "{\"a\":\"\x01\"}", "{\"a\" 1}", "{\"a\":1,}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (shim_json_parse(bad[i], strlen(bad[i]), &j, err, sizeof err) == 0)
            fail_msg("accepted %s", bad[i]);
    (void)state;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_control_and_split_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seq_boundaries_and_window_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_overrun_is_fatal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stdin_pipe_window_and_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eof, setup, teardown),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
