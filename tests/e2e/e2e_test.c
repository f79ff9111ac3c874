/* e2e_test.c — sandgate end to end through the gateway (issue 2, "Tests"):
 * one host + gateway for the whole program (fixture.c), one small function
 * per check, each asserting exact values. Every test creates its own
 * sandbox(es) with a task id of its own; the per-test teardown kills them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/e2e/fixture.h"

#define MAX_PIDS 256

/* Run code in a sandbox's context (NULL = default) as demo/alice and assert
 * the call itself succeeded with exactly one end event, last. */
static void run_ok(const char *sb, const char *ctx, const char *code, fx_run *r)
{
    fx_run_req opt = {.context_id = ctx};
    grpc_status_code code_st = fx_run_code(sb, code, &opt, r);
    if (code_st != GRPC_STATUS_OK)
        fail_msg("RunCode(%s): %s: %s", code, rpc_status_name(code_st), r->st.details);
    assert_int_equal(r->n_ends, 1);
    assert_int_equal(r->events_after_end, 0);
}

/* Run code and assert it produced exactly one result, with this repr. */
static void assert_result(const char *sb, const char *ctx, const char *code, const char *repr)
{
    fx_run r;
    run_ok(sb, ctx, code, &r);
    assert_int_equal(r.n_errors, 0);
    assert_int_equal(r.n_results, 1);
    assert_string_equal(r.result_mime, "text/plain");
    assert_string_equal(r.result.data, repr);
    fx_run_free(&r);
}

/* Exec a command and assert it exited 0. */
static void exec_ok(const char *sb, const char *command)
{
    fx_exec e;
    grpc_status_code code = fx_exec_cmd(sb, command, &e);
    if (code != GRPC_STATUS_OK || e.n_exits != 1 || e.exit_code != 0 || e.signal != 0)
        fail_msg("Exec(%s): %s %s, %d exit events, exit %d, signal %d, timed out %d, "
                 "stdout '%s', stderr '%s'",
                 command, rpc_status_name(code), e.st.details, e.n_exits, e.exit_code, e.signal,
                 e.timed_out, e.out.data, e.err.data);
    fx_exec_free(&e);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int dir_exists(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 && S_ISDIR(s.st_mode);
}

/* ---- Python state ---- */

static void test_state_persists_in_default_context(void **state)
{
    const char *sb = fx_create("state", 0, NULL);
    fx_run r;
    run_ok(sb, NULL, "x = 20\ny = [1, 2]", &r);
    assert_int_equal(r.n_results, 0);
    assert_int_equal(r.n_errors, 0);
    fx_run_free(&r);
    run_ok(sb, NULL, "x += 1\ny.append(x)", &r);
    fx_run_free(&r);
    assert_result(sb, NULL, "x * 2, y", "(42, [1, 2, 21])");
}

static void test_new_context_has_own_globals(void **state)
{
    const char *sb = fx_create("contexts", 0, NULL);
    char *ctx = fx_create_context(sb);
    assert_string_not_equal(ctx, "");
    fx_run r;
    run_ok(sb, NULL, "v = 'default'", &r);
    fx_run_free(&r);
    assert_result(sb, ctx, "'v' in globals()", "False");
    run_ok(sb, ctx, "v = 'mine'", &r);
    fx_run_free(&r);
    assert_result(sb, NULL, "v", "'default'");
    assert_result(sb, ctx, "v", "'mine'");
    free(ctx);
}

static void test_final_expression_result(void **state)
{
    const char *sb = fx_create("result", 0, NULL);
    assert_result(sb, NULL, "a = 6\na * 7", "42");
    assert_result(sb, NULL, "{'k': 'v'}", "{'k': 'v'}");
    assert_result(sb, NULL, "'hi'", "'hi'");
}

static void test_no_result_for_none(void **state)
{
    const char *sb = fx_create("none", 0, NULL);
    const char *codes[] = {"None", "x = 1", "print('p')", "def f():\n    pass\nf()"};
    for (size_t i = 0; i < sizeof codes / sizeof *codes; i++) {
        fx_run r;
        run_ok(sb, NULL, codes[i], &r);
        assert_int_equal(r.n_errors, 0);
        assert_int_equal(r.n_results, 0);
        fx_run_free(&r);
    }
}

/* ---- output ---- */

static void test_stdout_stderr_separation_and_order(void **state)
{
    const char *sb = fx_create("streams", 0, NULL);
    fx_run r;
    run_ok(sb, NULL,
           "import sys\n"
           "for i in range(3):\n"
           "    print('out', i)\n"
           "    print('err', i, file=sys.stderr)\n"
           "sys.stdout.write('tail-out\\n')\n"
           "n = sys.stderr.write('tail-err\\n')\n",
           &r);
    assert_int_equal(r.n_errors, 0);
    assert_int_equal(r.n_results, 0);
    assert_string_equal(r.out.data, "out 0\nout 1\nout 2\ntail-out\n");
    assert_string_equal(r.err.data, "err 0\nerr 1\nerr 2\ntail-err\n");
    assert_string_equal(r.order.data, "<O>out 0\n<E>err 0\n<O>out 1\n<E>err 1\n<O>out 2\n"
                                      "<E>err 2\n<O>tail-out\n<E>tail-err\n");
    assert_int_equal(r.output_bytes_total, r.out.len + r.err.len);
    assert_false(r.truncated);
    fx_run_free(&r);
}

static void test_exception_error_and_context_survives(void **state)
{
    const char *sb = fx_create("exception", 0, NULL);
    fx_run r;
    run_ok(sb, NULL, "kept = 'still here'", &r);
    fx_run_free(&r);
    run_ok(sb, NULL, "a = 1\nb = 0\nboom = a / b\n", &r);
    assert_int_equal(r.n_errors, 1);
    assert_int_equal(r.n_results, 0);
    assert_string_equal(r.err_name.data, "ZeroDivisionError");
    assert_string_equal(r.err_value.data, "division by zero");
    assert_non_null(strstr(r.err_tb.data, "Traceback (most recent call last)"));
    assert_non_null(strstr(r.err_tb.data, "line 3"));
    assert_non_null(strstr(r.err_tb.data, "boom = a / b"));
    fx_run_free(&r);
    assert_result(sb, NULL, "kept, 'boom' in globals()", "('still here', False)");
}

/* ---- timeouts ---- */

static void test_timeout_interrupts_and_context_keeps_state(void **state)
{
    const char *sb = fx_create("timeout", 0, NULL);
    fx_run r;
    run_ok(sb, NULL, "before = 41", &r);
    fx_run_free(&r);
    fx_run_req opt = {.timeout = 1};
    assert_int_equal(fx_run_code(sb, "while True:\n    pass\n", &opt, &r), GRPC_STATUS_OK);
    assert_int_equal(r.n_ends, 1);
    assert_int_equal(r.n_errors, 1);
    assert_string_equal(r.err_name.data, "KeyboardInterrupt");
    assert_true(r.timed_out);
    assert_false(r.context_restarted);
    assert_true(r.duration_us >= 1000000);
    fx_run_free(&r);
    assert_result(sb, NULL, "before + 1", "42");
}

static void test_timeout_ignoring_sigint_restarts_context(void **state)
{
    const char *sb = fx_create("sigign", 0, NULL);
    fx_run r;
    run_ok(sb, NULL, "before = 41", &r);
    fx_run_free(&r);
    fx_run_req opt = {.timeout = 1};
    assert_int_equal(fx_run_code(sb,
                                 "import signal\n"
                                 "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                 "while True:\n    pass\n",
                                 &opt, &r),
                     GRPC_STATUS_OK);
    assert_int_equal(r.n_ends, 1);
    assert_true(r.timed_out);
    assert_true(r.context_restarted);
    assert_int_equal(r.n_errors, 1);
    if (!strstr(r.err_value.data, "state was lost"))
        fail_msg("error does not say the state was lost: %s: %s", r.err_name.data,
                 r.err_value.data);
    fx_run_free(&r);
    assert_result(sb, NULL, "'before' in globals(), 2 + 2", "(False, 4)");
}

/* ---- output cap ---- */

static void test_truncation(void **state)
{
    const char *sb = fx_create("truncate", 0, NULL);
    fx_run r;
    fx_run_req opt = {.max_output = 1000};
    assert_int_equal(fx_run_code(sb, "print('x' * 102400)", &opt, &r), GRPC_STATUS_OK);
    assert_int_equal(r.n_ends, 1);
    assert_int_equal(r.n_errors, 0);
    assert_true(r.truncated);
    assert_true(r.output_bytes_total >= 102400);
    if (r.out.len + r.err.len > 1000)
        fail_msg("received %zu stdout + %zu stderr bytes, cap 1000", r.out.len, r.err.len);
    assert_true(r.out.len > 0);
    fx_run_free(&r);
}

/* ---- environment ---- */

static void test_daemon_env_invisible_and_create_env_visible(void **state)
{
    const char *env[] = {"E2E_VISIBLE", "yes-visible", NULL};
    const char *sb = fx_create("env", 0, env);
    const char *secret = fx_daemon_secret();
    assert_result(sb, NULL, "import os\nos.environ.get('E2E_VISIBLE')", "'yes-visible'");
    assert_result(sb, NULL, "'SANDGATE_TEST_SECRET' in os.environ", "False");
    /* Every environ readable inside (pid 1 is usually not: not dumpable). */
    fx_run r;
    run_ok(sb, NULL,
           "import os\n"
           "seen = []\n"
           "for p in os.listdir('/proc'):\n"
           "    if p.isdigit():\n"
           "        try:\n"
           "            seen.append(open('/proc/%s/environ' % p, 'rb').read())\n"
           "        except OSError:\n"
           "            pass\n"
           "print(b'SANDGATE_TEST_SECRET' in b''.join(seen))\n",
           &r);
    assert_int_equal(r.n_errors, 0);
    assert_string_equal(r.out.data, "False\n");
    fx_run_free(&r);
    fx_exec e;
    assert_int_equal(fx_exec_cmd(sb, "cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; env", &e),
                     GRPC_STATUS_OK);
    assert_null(strstr(e.out.data, "SANDGATE_TEST_SECRET"));
    assert_null(strstr(e.out.data, secret));
    assert_non_null(strstr(e.out.data, "E2E_VISIBLE=yes-visible"));
    fx_exec_free(&e);
    /* The host's view: no process of the sandbox has it in its environ. */
    int pids[MAX_PIDS];
    size_t n = fx_cgroup_pids(sb, pids, MAX_PIDS);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/environ", pids[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        fx_buf b = {0};
        char chunk[4096];
        size_t k;
        while ((k = fread(chunk, 1, sizeof chunk, f)) > 0)
            fx_buf_add(&b, chunk, k);
        fclose(f);
        if (b.len && memmem(b.data, b.len, secret, strlen(secret)))
            fail_msg("pid %d of the sandbox has the daemon's secret in /proc/%d/environ", pids[i],
                     pids[i]);
        fx_buf_free(&b);
    }
}

/* ---- Exec ---- */

static void test_exec_exit_code_and_streams(void **state)
{
    const char *sb = fx_create("exec", 0, NULL);
    fx_exec e;
    assert_int_equal(fx_exec_cmd(sb, "exit 3", &e), GRPC_STATUS_OK);
    assert_int_equal(e.n_exits, 1);
    assert_int_equal(e.exit_code, 3);
    assert_int_equal(e.signal, 0);
    fx_exec_free(&e);
    assert_int_equal(fx_exec_cmd(sb, "echo to-out; echo to-err >&2; echo more-out", &e),
                     GRPC_STATUS_OK);
    assert_int_equal(e.n_exits, 1);
    assert_int_equal(e.exit_code, 0);
    assert_string_equal(e.out.data, "to-out\nmore-out\n");
    assert_string_equal(e.err.data, "to-err\n");
    fx_exec_free(&e);
}

/* ---- files ---- */

static void test_file_round_trip(void **state)
{
    const char *sb = fx_create("files", 0, NULL);
    uint8_t data[512];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);   /* NULs at 0 and 256 (7 is odd) */
    data[100] = 0;
    uint64_t written = 0;
    rpc_status st;
    assert_int_equal(fx_write_file(sb, "a/b/c.bin", data, sizeof data, &written, &st),
                     GRPC_STATUS_OK);
    assert_int_equal(written, sizeof data);
    fx_buf back = {0};
    assert_int_equal(fx_read_file(sb, "a/b/c.bin", &back, &st), GRPC_STATUS_OK);
    assert_int_equal(back.len, sizeof data);
    assert_memory_equal(back.data, data, sizeof data);
    fx_buf_free(&back);
    /* The code sees the same bytes at /workspace. */
    assert_result(sb, NULL, "d = open('/workspace/a/b/c.bin', 'rb').read()\nlen(d), d.count(0)",
                  "(512, 3)");
}

static void assert_path_rejected(const char *sb, const char *path)
{
    rpc_status st;
    fx_buf b = {0};
    grpc_status_code code = fx_read_file(sb, path, &b, &st);
    if (code != GRPC_STATUS_INVALID_ARGUMENT)
        fail_msg("ReadFile(%s): want INVALID_ARGUMENT, got %s: %s (%zu bytes)", path,
                 rpc_status_name(code), st.details, b.len);
    fx_buf_free(&b);
    code = fx_write_file(sb, path, "x", 1, NULL, &st);
    if (code != GRPC_STATUS_INVALID_ARGUMENT)
        fail_msg("WriteFile(%s): want INVALID_ARGUMENT, got %s: %s", path, rpc_status_name(code),
                 st.details);
}

static void test_file_paths_outside_workspace_rejected(void **state)
{
    const char *sb = fx_create("badpaths", 0, NULL);
    assert_path_rejected(sb, "../x");
    assert_path_rejected(sb, "/etc/passwd");
    assert_path_rejected(sb, "a/../../x");
    exec_ok(sb, "ln -s /etc /workspace/out");
    assert_path_rejected(sb, "out/passwd");
    exec_ok(sb, "ln -s /etc/passwd /workspace/pw");
    assert_path_rejected(sb, "pw");
}

/* ---- kill and TTL ---- */

/* None may still run (a process already in do_exit counts as dead: cgroup v1
 * reports the cgroup empty at that point); every one must be fully gone
 * (exited and reaped, no zombie) within 2 s. */
static void assert_procs_gone(const fx_proc *procs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fx_proc_state(&procs[i]) == FX_PID_ALIVE) {
            char what[1024];
            fx_proc_describe(procs[i].pid, what, sizeof what);
            fail_msg("pid %d of the sandbox is still running: %s", procs[i].pid, what);
        }
    for (int tries = 0; tries < 200; tries++) {
        size_t zombies = 0;
        for (size_t i = 0; i < n; i++)
            zombies += fx_proc_state(&procs[i]) != FX_PID_GONE;
        if (!zombies)
            return;
        sleep_ms(10);
    }
    for (size_t i = 0; i < n; i++)
        if (fx_proc_state(&procs[i]) != FX_PID_GONE)
            fail_msg("pid %d of the sandbox is still %s 2 s after the kill", procs[i].pid,
                     fx_proc_state(&procs[i]) == FX_PID_ZOMBIE ? "an unreaped zombie" : "exiting");
}

static void test_kill_leaves_no_process(void **state)
{
    const char *sb = fx_create("kill", 0, NULL);
    /* something extra that would outlive a careless kill */
    exec_ok(sb, "nohup sleep 1000 >/dev/null 2>&1 &");
    char dir[600];
    fx_cgroup_dir(sb, dir, sizeof dir);
    fx_proc procs[MAX_PIDS];
    size_t n = fx_sandbox_procs(sb, procs, MAX_PIDS);
    assert_true(n >= 3);   /* supervisor, default context, the sleep */
    rpc_status st;
    assert_int_equal(fx_kill(FX_DEMO, FX_USER, sb, &st), GRPC_STATUS_OK);
    assert_procs_gone(procs, n);
    assert_false(dir_exists(dir));
    assert_int_equal(fx_get(FX_DEMO, FX_USER, sb, &st), GRPC_STATUS_NOT_FOUND);
    fx_run r;
    assert_int_equal(fx_run_code(sb, "1", NULL, &r), GRPC_STATUS_NOT_FOUND);
    fx_run_free(&r);
    assert_int_equal(fx_kill(FX_DEMO, FX_USER, sb, &st), GRPC_STATUS_NOT_FOUND);
}

/* The same, while code runs and children fork: nothing may escape the kill. */
static void test_kill_leaves_no_process_busy(void **state)
{
    const char *sb = fx_create("kill-busy", 0, NULL);
    exec_ok(sb, "for i in 1 2 3 4; do (while :; do :; done) & done");
    fx_run r;
    fx_run_req opt = {.timeout = 1};
    fx_run_code(sb, "import subprocess\np = subprocess.Popen(['sleep', '1000'])\np.pid", &opt, &r);
    fx_run_free(&r);
    char dir[600];
    fx_cgroup_dir(sb, dir, sizeof dir);
    fx_proc procs[MAX_PIDS];
    size_t n = fx_sandbox_procs(sb, procs, MAX_PIDS);
    assert_true(n >= 7);
    rpc_status st;
    assert_int_equal(fx_kill(FX_DEMO, FX_USER, sb, &st), GRPC_STATUS_OK);
    assert_procs_gone(procs, n);
    assert_false(dir_exists(dir));
}

static void test_ttl_expiry_kills_sandbox(void **state)
{
    Sandgate__V1__Sandbox *sb = NULL;
    rpc_status st;
    assert_int_equal(fx_create_as(FX_DEMO, FX_USER, "ttl", 2, NULL, &sb, &st), GRPC_STATUS_OK);
    assert_int_equal(sb->expires_at - sb->created_at, 2000);
    char id[128], dir[600];
    snprintf(id, sizeof id, "%s", sb->sandbox_id);
    sandgate__v1__sandbox__free_unpacked(sb, NULL);
    fx_cgroup_dir(id, dir, sizeof dir);
    fx_proc procs[MAX_PIDS];
    size_t n = fx_sandbox_procs(id, procs, MAX_PIDS);
    assert_true(n > 0);
    assert_int_equal(fx_get(FX_DEMO, FX_USER, id, &st), GRPC_STATUS_OK);
    sleep_ms(3000);
    grpc_status_code code = fx_get(FX_DEMO, FX_USER, id, &st);
    if (code != GRPC_STATUS_NOT_FOUND)
        fail_msg("GetSandbox 3 s after create with ttl 2 s: want NOT_FOUND, got %s: %s",
                 rpc_status_name(code), st.details);
    assert_procs_gone(procs, n);
    assert_false(dir_exists(dir));
}

/* ---- auth and ownership ---- */

static void test_unauthenticated(void **state)
{
    const char *sb = fx_create("auth", 0, NULL);
    rpc_status st;
    assert_int_equal(fx_get(FX_NO_KEY, FX_USER, sb, &st), GRPC_STATUS_UNAUTHENTICATED);
    assert_int_equal(fx_get(FX_WRONG_KEY, FX_USER, sb, &st), GRPC_STATUS_UNAUTHENTICATED);
    assert_int_equal(fx_create_as(FX_NO_KEY, FX_USER, "auth2", 0, NULL, NULL, &st),
                     GRPC_STATUS_UNAUTHENTICATED);
    assert_int_equal(fx_create_as(FX_WRONG_KEY, FX_USER, "auth2", 0, NULL, NULL, &st),
                     GRPC_STATUS_UNAUTHENTICATED);
    fx_run r;
    fx_run_req opt = {.auth = FX_WRONG_KEY};
    assert_int_equal(fx_run_code(sb, "1", &opt, &r), GRPC_STATUS_UNAUTHENTICATED);
    assert_int_equal(r.n_ends, 0);
    fx_run_free(&r);
    assert_int_equal(fx_kill(FX_NO_KEY, FX_USER, sb, &st), GRPC_STATUS_UNAUTHENTICATED);
    assert_int_equal(fx_get(FX_DEMO, FX_USER, sb, &st), GRPC_STATUS_OK);
}

static void test_not_found_other_tenant_same_as_missing(void **state)
{
    const char *sb = fx_create("tenant", 0, NULL);
    rpc_status theirs, missing;
    assert_int_equal(fx_get(FX_OTHER, FX_USER, sb, &theirs), GRPC_STATUS_NOT_FOUND);
    assert_int_equal(fx_get(FX_DEMO, FX_USER, "local-00000000000000000000000000000000", &missing),
                     GRPC_STATUS_NOT_FOUND);
    assert_string_equal(theirs.details, missing.details);
    assert_int_equal(fx_get(FX_OTHER, FX_USER, "local-00000000000000000000000000000000", &missing),
                     GRPC_STATUS_NOT_FOUND);
    assert_string_equal(theirs.details, missing.details);
    fx_run r;
    fx_run_req opt = {.auth = FX_OTHER};
    assert_int_equal(fx_run_code(sb, "1", &opt, &r), GRPC_STATUS_NOT_FOUND);
    assert_string_equal(r.st.details, missing.details);
    fx_run_free(&r);
    assert_int_equal(fx_kill(FX_OTHER, FX_USER, sb, &theirs), GRPC_STATUS_NOT_FOUND);
    assert_string_equal(theirs.details, missing.details);
    assert_int_equal(fx_get(FX_DEMO, FX_USER, sb, &theirs), GRPC_STATUS_OK);
}

static void test_permission_denied_other_user(void **state)
{
    const char *sb = fx_create("user", 0, NULL);
    rpc_status st;
    assert_int_equal(fx_get(FX_DEMO, "bob", sb, &st), GRPC_STATUS_PERMISSION_DENIED);
    fx_run r;
    fx_run_req opt = {.user = "bob"};
    assert_int_equal(fx_run_code(sb, "1", &opt, &r), GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(r.n_ends, 0);
    fx_run_free(&r);
    assert_int_equal(fx_kill(FX_DEMO, "bob", sb, &st), GRPC_STATUS_PERMISSION_DENIED);
    assert_int_equal(fx_get(FX_DEMO, FX_USER, sb, &st), GRPC_STATUS_OK);
}

/* ---- concurrency ---- */

#define N_SANDBOXES 10
#define N_CALLS 50
/* e2e_gvisor (tests/drivers.py): 4 sandboxes, the template's warm pool, not
 * 10 (each more is a gVisor sandbox started cold, 2 s+ of CPU under ptrace);
 * the same 50 concurrent calls over them. */
#define N_SANDBOXES_GVISOR 4

static int driver_is_gvisor(void)
{
    const char *d = getenv("SANDGATE_TEST_DRIVER");
    return d && strcmp(d, "gvisor") == 0;
}

typedef struct conc_job {
    const char *sandbox;
    int sandbox_index, call_index;
    char want[32];
    fx_run r;
    grpc_status_code code;
} conc_job;

static void *conc_thread(void *arg)
{
    conc_job *j = arg;
    char code[64];
    snprintf(code, sizeof code, "k * 1000 + %d", j->call_index);
    fx_run_req opt = {.timeout = 30};
    j->code = fx_run_code(j->sandbox, code, &opt, &j->r);
    return NULL;
}

static void test_concurrent_runcode(void **state)
{
    const char *sbs[N_SANDBOXES];
    int n_sb = driver_is_gvisor() ? N_SANDBOXES_GVISOR : N_SANDBOXES;
    for (int i = 0; i < n_sb; i++) {
        char task[32], code[32], want[32];
        snprintf(task, sizeof task, "conc-%d", i);
        sbs[i] = fx_create(task, 0, NULL);
        snprintf(code, sizeof code, "k = %d\nk", i);
        snprintf(want, sizeof want, "%d", i);
        assert_result(sbs[i], NULL, code, want);
    }
    static conc_job jobs[N_CALLS];
    pthread_t th[N_CALLS];
    for (int c = 0; c < N_CALLS; c++) {
        memset(&jobs[c], 0, sizeof jobs[c]);
        jobs[c].sandbox_index = c % n_sb;
        jobs[c].sandbox = sbs[c % n_sb];
        jobs[c].call_index = c;
        snprintf(jobs[c].want, sizeof jobs[c].want, "%d", (c % n_sb) * 1000 + c);
        assert_int_equal(pthread_create(&th[c], NULL, conc_thread, &jobs[c]), 0);
    }
    for (int c = 0; c < N_CALLS; c++)
        pthread_join(th[c], NULL);
    int bad = 0;
    for (int c = 0; c < N_CALLS; c++) {
        conc_job *j = &jobs[c];
        if (j->code != GRPC_STATUS_OK || j->r.n_results != 1 ||
            strcmp(j->r.result.data, j->want) != 0 || j->r.n_ends != 1) {
            fprintf(stderr, "call %d (sandbox %d): %s %s, %d results '%s', want '%s', error %s\n",
                    c, j->sandbox_index, rpc_status_name(j->code), j->r.st.details,
                    j->r.n_results, j->r.result.data ? j->r.result.data : "", j->want,
                    j->r.err_name.data ? j->r.err_name.data : "-");
            bad++;
        }
        fx_run_free(&j->r);
    }
    assert_int_equal(bad, 0);
}

/* ---- per-task scope ---- */

static void test_same_task_same_sandbox(void **state)
{
    const char *a = fx_create("scope", 0, NULL);
    const char *b = fx_create("scope", 0, NULL);
    assert_string_equal(a, b);
    const char *c = fx_create("scope-other", 0, NULL);
    assert_string_not_equal(a, c);
    fx_run r;
    run_ok(a, NULL, "shared = 7", &r);
    fx_run_free(&r);
    assert_result(b, NULL, "shared", "7");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_test_begin, fx_test_end)
        T(test_state_persists_in_default_context),
        T(test_new_context_has_own_globals),
        T(test_final_expression_result),
        T(test_no_result_for_none),
        T(test_stdout_stderr_separation_and_order),
        T(test_exception_error_and_context_survives),
        T(test_timeout_interrupts_and_context_keeps_state),
        T(test_timeout_ignoring_sigint_restarts_context),
        T(test_truncation),
        T(test_daemon_env_invisible_and_create_env_visible),
        T(test_exec_exit_code_and_streams),
        T(test_file_round_trip),
        T(test_file_paths_outside_workspace_rejected),
        T(test_kill_leaves_no_process),
        T(test_kill_leaves_no_process_busy),
        T(test_ttl_expiry_kills_sandbox),
        T(test_unauthenticated),
        T(test_not_found_other_tenant_same_as_missing),
        T(test_permission_denied_other_user),
        T(test_concurrent_runcode),
        T(test_same_task_same_sandbox),
#undef T
    };
    if (getenv("E2E_FILTER"))   /* e.g. E2E_FILTER='test_kill*' */
        cmocka_set_test_filter(getenv("E2E_FILTER"));
    return cmocka_run_group_tests_name("e2e", tests, fx_start, fx_stop);
}
