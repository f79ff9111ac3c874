/* admit_test.c — table tests of host_admit_decide (admit.c), and one
 * host_admit_measure sanity pass on this machine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/core/admit.h"
#include "host/host.h"

host_state H;   /* host_admit_check reads the config; unused by these rows */

typedef struct row {
    const char *name;
    host_admit_usage u;
    host_admit_amounts reserve;
    const char *want;    /* NULL = admitted, else a substring of the refusal */
} row;

#define NEED {.fds = 8, .memory = 32ll << 20, .pids = 4}
#define MiB (1ll << 20)
/* Rows start from ROOMY and override one field: designated initializers
 * overriding earlier ones is what makes each row read as its one change. */
#pragma GCC diagnostic ignored "-Woverride-init"
/* plenty of everything, nothing limited by the cgroup */
#define ROOMY .fds_open = 100, .fds_limit = 20000, .files_open = 5000, .files_limit = 1000000, \
              .mem_available = 8192 * MiB, .tasks = 300, .tasks_limit = 32768, .cg_pids_limit = -1

static const row rows[] = {
    {"roomy host", {ROOMY}, {64, 256 * MiB, 256}, NULL},
    {"fds: exactly the reserve left after", {ROOMY, .fds_open = 20000 - 72}, {64, 0, 0}, NULL},
    {"fds: one short of the reserve", {ROOMY, .fds_open = 20000 - 71}, {64, 0, 0},
     "out of file descriptors: 19929 of 20000 in use"},
    {"fds: all used", {ROOMY, .fds_open = 20000}, {64, 0, 0}, "file descriptors"},
    {"fds: the reserve off", {ROOMY, .fds_open = 20000}, {0, 0, 0}, NULL},
    {"fds: the system table full", {ROOMY, .files_open = 999990}, {64, 0, 0},
     "fs.file-max"},
    {"fds: limit unknown", {ROOMY, .fds_open = 1 << 30, .fds_limit = -1}, {64, 0, 0}, NULL},
    {"memory: short", {ROOMY, .mem_available = 200 * MiB}, {0, 256 * MiB, 0},
     "out of memory: 200 MiB available"},
    {"memory: just enough", {ROOMY, .mem_available = 288 * MiB}, {0, 256 * MiB, 0}, NULL},
    {"memory: unknown", {ROOMY, .mem_available = -1}, {0, 256 * MiB, 0}, NULL},
    {"pids: the system near pid_max", {ROOMY, .tasks = 32600}, {0, 0, 256},
     "out of pids: 32600 of 32768 tasks"},
    {"pids: the cgroup near pids.max", {ROOMY, .cg_pids = 900, .cg_pids_limit = 1000},
     {0, 0, 256}, "pids.max 1000"},
    {"pids: the cgroup roomy", {ROOMY, .cg_pids = 100, .cg_pids_limit = 1000}, {0, 0, 256}, NULL},
    {"fds are named first when all run out",
     {ROOMY, .fds_open = 20000, .mem_available = 0, .tasks = 32768}, {64, 256 * MiB, 256},
     "file descriptors"},
};

static void test_rows(void **state)
{
    (void)state;
    const host_admit_amounts need = NEED;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        sg_err e = {0};
        int rc = host_admit_decide(&r->u, &need, &r->reserve, "a sandbox", &e);
        if (!r->want && rc != 0)
            fail_msg("%s: refused: %s", r->name, e.msg);
        if (r->want && (rc != SG_EQUOTA || e.code != SG_EQUOTA))
            fail_msg("%s: admitted, want a refusal naming \"%s\"", r->name, r->want);
        if (r->want && !strstr(e.msg, r->want))
            fail_msg("%s: \"%s\" lacks \"%s\"", r->name, e.msg, r->want);
    }
}

/* The real readings are plausible: fds counted, limits found. */
static void test_measure(void **state)
{
    (void)state;
    host_admit_usage u;
    host_admit_measure(&u, "/sys/fs/cgroup");
    assert_true(u.fds_open >= 3 && u.fds_open < u.fds_limit);
    assert_true(u.mem_available > 0);
    assert_true(u.tasks > 0 && u.tasks < u.tasks_limit);
    assert_true(u.files_limit > 0);
    /* one more open fd shows */
    int fd = dup(0);
    host_admit_usage v;
    host_admit_measure(&v, "/sys/fs/cgroup");
    close(fd);
    assert_int_equal(v.fds_open, u.fds_open + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_measure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
