/* adopt_test.c — connections handed to the proxy (egress_sandbox_adopt, as
 * the host does with the sockets a sandbox's supervisor accepts) while
 * another copy of the socket stays open elsewhere. Such a connection's
 * epoll registration must end with the connection: close() alone leaves it
 * while the other copy lives, and its next event then reads a freed conn.
 * No network: every request here is denied before any lookup (no rules),
 * over a socketpair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/egress/proxy_internal.h"

/* Registrations in the proxy's epoll set (one "tfd:" line each in fdinfo). */
static int registrations(const egress_proxy *p)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", p->epfd);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, "tfd:", 4) == 0;
    fclose(f);
    return n;
}

/* Read until the response head and its body are in (the proxy closes only
 * after the client hangs up). */
static void read_response(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        assert_true(n > 0);
        got += (size_t)n;
        buf[got] = 0;
        const char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strstr(buf, "Content-Length: ");
        if (end && cl && got >= (size_t)(end + 4 - buf) + (size_t)atoi(cl + 16))
            return;
    }
}

static void test_closed_adopted_conn_leaves_epoll(void **state)
{
    egress_options o = {.hosts_only = 1};
    egress_proxy *p;
    sg_err err;
    assert_int_equal(egress_proxy_create(&o, &p, &err), 0);
    egress_rules *rules;
    assert_int_equal(egress_rules_create(NULL, 0, &rules, &err), 0);
    egress_sandbox *sb;
    assert_int_equal(egress_sandbox_create(p, "sb-adopt", NULL, rules, 0, &sb, &err), 0);
    int base = registrations(p);   /* the wake fd */

    for (int i = 0; i < 20; i++) {
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        int held = dup(sv[0]);   /* the supervisor's copy, not yet closed */
        egress_sandbox_adopt(sb, sv[0]);
        static const char req[] = "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n";
        assert_int_equal(write(sv[1], req, sizeof req - 1), (ssize_t)(sizeof req - 1));
        char resp[2048];
        read_response(sv[1], resp, sizeof resp);
        assert_non_null(strstr(resp, "403"));
        /* The client hangs up; the proxy closes its end; wait for it. */
        close(sv[1]);
        egress_counters ctr;
        for (int k = 0; k < 200; k++) {
            egress_sandbox_counters(sb, &ctr);
            if (ctr.open == 0)
                break;
            usleep(5000);
        }
        assert_int_equal(ctr.open, 0);
        usleep(20000);   /* a stale registration would keep firing EPOLLHUP here */
        assert_int_equal(registrations(p), base);
        close(held);
    }
    egress_sandbox_destroy(sb);
    egress_proxy_destroy(p);
}

/* A proxy whose process has fewer free fds than its reserve turns a new
 * connection away with a 503 naming why, instead of taking two more. */
static void test_refused_when_short_of_fds(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    /* a reserve above the limit: always short */
    egress_options o = {.hosts_only = 1, .reserve_fds = (uint32_t)rl.rlim_cur + 1};
    egress_proxy *p;
    sg_err err;
    assert_int_equal(egress_proxy_create(&o, &p, &err), 0);
    egress_rules *rules;
    assert_int_equal(egress_rules_create(NULL, 0, &rules, &err), 0);
    egress_sandbox *sb;
    assert_int_equal(egress_sandbox_create(p, "sb-dry", NULL, rules, 0, &sb, &err), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    egress_sandbox_adopt(sb, sv[0]);
    char resp[2048];
    read_response(sv[1], resp, sizeof resp);
    assert_non_null(strstr(resp, "503"));
    assert_non_null(strstr(resp, "short of file descriptors"));
    close(sv[1]);
    egress_sandbox_destroy(sb);
    egress_proxy_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_adopted_conn_leaves_epoll),
        cmocka_unit_test(test_refused_when_short_of_fds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
