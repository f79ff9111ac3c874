/* status_test.c — the public form of a host call's failure
 * (gw_public_from_host), one row per case: grpc's own text (addresses,
 * resolver and socket errors) and a host's internal errors never reach the
 * caller; a host's answers about the request do, word for word. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/gw.h"

gw_state G;   /* status.c reads nothing of it; gw.h declares it */

#define C_CORE_DOWN                                                                        \
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:40111: Failed " \
    "to connect to remote host: Connection refused"

static const struct row {
    const char *name;
    grpc_status_code code;
    const char *details;
    int from_peer;
    grpc_status_code want_code;
    const char *want_message;   /* NULL: the host's details, as they are */
    const char *want_reason;
    int want_log;
} rows[] = {
    {"host down (grpc)", GRPC_STATUS_UNAVAILABLE, C_CORE_DOWN, 0, GRPC_STATUS_UNAVAILABLE,
     "sandbox host unavailable; retry later", "HOST_UNAVAILABLE", 1},
    {"host down, no text (grpc)", GRPC_STATUS_UNAVAILABLE, "", 0, GRPC_STATUS_UNAVAILABLE,
     "sandbox host unavailable; retry later", "HOST_UNAVAILABLE", 1},
    {"deadline (grpc)", GRPC_STATUS_DEADLINE_EXCEEDED, "Deadline Exceeded", 0,
     GRPC_STATUS_DEADLINE_EXCEEDED, "the sandbox host did not answer in time", NULL, 1},
    {"cancelled (grpc)", GRPC_STATUS_CANCELLED, "Cancelled", 0, GRPC_STATUS_CANCELLED,
     "cancelled", NULL, 1},
    {"too large (grpc)", GRPC_STATUS_RESOURCE_EXHAUSTED,
     "Received message larger than max (20000000 vs. 16777216)", 0,
     GRPC_STATUS_RESOURCE_EXHAUSTED, "the sandbox host's answer is larger than the gateway accepts",
     NULL, 1},
    {"unimplemented (grpc)", GRPC_STATUS_UNIMPLEMENTED, "", 0, GRPC_STATUS_INTERNAL,
     "the call to the sandbox host failed", NULL, 1},
    {"NOT_FOUND without the trailer (an older host): stable text", GRPC_STATUS_NOT_FOUND,
     "no such context in this sandbox", 0, GRPC_STATUS_NOT_FOUND, "no such sandbox", NULL, 1},
    {"host internal: syscall and path", GRPC_STATUS_INTERNAL,
     "cgroup for h1-ab: mkdir(/sys/fs/cgroup/pids/sandgate/h1-ab): Permission denied", 1,
     GRPC_STATUS_INTERNAL, "internal error in the sandbox host", NULL, 1},
    {"host unknown", GRPC_STATUS_UNKNOWN, "boom", 1, GRPC_STATUS_INTERNAL,
     "internal error in the sandbox host", NULL, 1},
    {"host data loss", GRPC_STATUS_DATA_LOSS, "boom", 1, GRPC_STATUS_INTERNAL,
     "internal error in the sandbox host", NULL, 1},
    {"host: bad path", GRPC_STATUS_INVALID_ARGUMENT, "path: leads out of /workspace", 1,
     GRPC_STATUS_INVALID_ARGUMENT, NULL, NULL, 0},
    {"host: no such sandbox", GRPC_STATUS_NOT_FOUND, "no such sandbox", 1, GRPC_STATUS_NOT_FOUND,
     NULL, NULL, 0},
    {"host: retry later", GRPC_STATUS_UNAVAILABLE, "template code-interpreter is restarting; retry",
     1, GRPC_STATUS_UNAVAILABLE, NULL, NULL, 0},
    {"host: quota", GRPC_STATUS_RESOURCE_EXHAUSTED, "host is full (1024 sandboxes)", 1,
     GRPC_STATUS_RESOURCE_EXHAUSTED, NULL, NULL, 0},
    {"host: still starting", GRPC_STATUS_FAILED_PRECONDITION, "sandbox is still starting", 1,
     GRPC_STATUS_FAILED_PRECONDITION, NULL, NULL, 0},
};

static void test_public_form(void **state)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *w = &rows[i];
        gw_public p = gw_public_from_host(w->code, w->details, w->from_peer);
        const char *want = w->want_message ? w->want_message : w->details;
        if (p.code != w->want_code || strcmp(p.message, want) != 0 || p.log != w->want_log ||
            (p.reason == NULL) != (w->want_reason == NULL) ||
            (p.reason && strcmp(p.reason, w->want_reason) != 0))
            fail_msg("row \"%s\": got %d \"%s\" reason %s log %d", w->name, p.code, p.message,
                     p.reason ? p.reason : "-", p.log);
        if (!w->from_peer && (strstr(p.message, "127.0.0.1") || strstr(p.message, "ipv4") ||
                              strstr(p.message, "onnect")))
            fail_msg("row \"%s\": public text leaks \"%s\"", w->name, p.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_public_form)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
