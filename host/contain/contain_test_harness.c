/* contain_test_harness.c — what contain_test's cases stand on: a sandbox
 * started the way the zygote starts one (fork A + B, or the runtime's one
 * fork), checks inside it reported as "name 1|0 detail" lines over a pipe
 * kept by fd_keep, reading and asserting those lines, and killing and
 * removing everything a case made. The cases are contain_test.c's. */
#include "host/contain/contain_test_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

char g_newroot[64];
int g_mounts_before;
int g_stray_fd = -1; /* opened in the parent, must be closed inside */
int g_seq;

/* ---------- helpers ---------- */

int count_lines(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

void report(int fd, const char *name, int ok, const char *fmt, ...)
{
    char line[512], detail[400] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "%s %d %s\n", name, ok ? 1 : 0, detail);
    if (write(fd, line, (size_t)n) < 0)
        _exit(3);
}



void spec_for(const sandbox *sb, int wfd, const char *extra, char *spec, size_t size)
{
    int n = snprintf(spec, size,
                     "id=%s\nuid=%d\ngid=%d\nhostname=sandbox-test\nnewroot=%s\n"
                     "ro_bind=/usr\nsymlink=usr/bin:/bin\nsymlink=usr/lib:/lib\n"
                     "symlink=usr/lib64:/lib64\nsymlink=usr/sbin:/sbin\n"
                     "workspace_bytes=%u\nworkspace_inodes=64\ntmp_bytes=8388608\n"
                     "fsize=1048576\nnofile=256\nfd_keep=%d\n%s",
                     sb->name, UID, UID, g_newroot, WS_BYTES, wfd, extra ? extra : "");
    for (char *p = (char *)sb->procs, *nl; *p && n < (int)size; p = nl ? nl + 1 : p + strlen(p)) {
        nl = strchr(p, '\n');
        int l = nl ? (int)(nl - p) : (int)strlen(p);
        n += snprintf(spec + n, size - (size_t)n, "cgroup_procs=%.*s\n", l, p);
    }
}

/* B: enter, run the checks, exit. Never returns. */
static void run_b(const char *spec, int wfd, void (*inside)(int))
{
    char err[512];
    if (sgc_enter(spec, err, sizeof err) != 0) {
        report(wfd, "ERR", 0, "sgc_enter: %s", err);
        _exit(1);
    }
    inside(wfd);
    _exit(0);
}

/* A: what the zygote's child does, except that A waits for B so the test
 * gets B's status through A. */
static void run_a(const char *spec, int wfd, void (*inside)(int))
{
    char err[512];
    if (sgc_unshare(spec, err, sizeof err) != 0) {
        report(wfd, "ERR", 0, "sgc_unshare: %s", err);
        _exit(1);
    }
    pid_t b = fork();
    if (b < 0)
        _exit(2);
    if (b == 0)
        run_b(spec, wfd, inside);
    close(wfd);
    int st;
    if (waitpid(b, &st, 0) < 0)
        _exit(2);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* 1: start sandboxes as the runtime does (one fork: sgc_pidns_next, fork,
 * sgc_pidns_reset; the child sgc_unshare_pid1 then sgc_enter). */
int g_one_fork;

static void run_pid1(const char *spec, int wfd, void (*inside)(int))
{
    char err[512];
    if (sgc_unshare_pid1(spec, err, sizeof err) != 0) {
        report(wfd, "ERR", 0, "sgc_unshare_pid1: %s", err);
        _exit(1);
    }
    run_b(spec, wfd, inside);
}

void sandbox_start(sandbox *sb, const sgc_cgroup_limits *lim, const char *extra,
                          void (*inside)(int))
{
    char err[512], spec[8192];
    memset(sb, 0, sizeof *sb);
    snprintf(sb->name, sizeof sb->name, "sgct-%d-%d", (int)getpid(), ++g_seq);
    if (sgc_cgroup_create(ROOT, sb->name, lim, sb->procs, sizeof sb->procs, err, sizeof err))
        fail_msg("sgc_cgroup_create: %s", err);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    spec_for(sb, p[1], extra, spec, sizeof spec);
    if (g_one_fork && sgc_pidns_next(err, sizeof err) != 0)
        fail_msg("sgc_pidns_next: %s", err);
    sb->a = fork();
    assert_true(sb->a >= 0);
    if (sb->a == 0) {
        close(p[0]);
        if (g_one_fork)
            run_pid1(spec, p[1], inside);
        run_a(spec, p[1], inside);
    }
    if (g_one_fork && sgc_pidns_reset(err, sizeof err) != 0)
        fail_msg("sgc_pidns_reset: %s", err);
    close(p[1]);
    sb->rfd = p[0];
}

/* Read until `until` shows up (or EOF when NULL). */
void sandbox_read(sandbox *sb, const char *until)
{
    while (sb->outlen + 1 < sizeof sb->out) {
        if (until && strstr(sb->out, until))
            return;
        ssize_t r = read(sb->rfd, sb->out + sb->outlen, sizeof sb->out - 1 - sb->outlen);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return;
        sb->outlen += (size_t)r;
        sb->out[sb->outlen] = '\0';
    }
}

/* Kill whatever is left, reap, remove the groups, check they are gone. */
int sandbox_finish(sandbox *sb)
{
    char err[512], path[256];
    int killed = sgc_cgroup_kill(ROOT, sb->name, err, sizeof err);
    if (killed < 0)
        fail_msg("sgc_cgroup_kill: %s", err);
    if (!sb->waited)
        assert_int_equal(waitpid(sb->a, &sb->status, 0), sb->a);
    sb->waited = 1;
    int st = sb->status;
    sandbox_read(sb, NULL);
    close(sb->rfd);
    reap_all();
    assert_int_equal(sgc_cgroup_empty(ROOT, sb->name), 1);
    if (sgc_cgroup_destroy(ROOT, sb->name, err, sizeof err))
        fail_msg("sgc_cgroup_destroy: %s", err);
    snprintf(path, sizeof path, ROOT "/memory/sandgate/%s", sb->name);
    assert_int_equal(access(path, F_OK), -1);
    snprintf(path, sizeof path, ROOT "/pids/sandgate/%s", sb->name);
    assert_int_equal(access(path, F_OK), -1);
    return st;
}

/* Every line named in `names` must read "name 1". */
void expect_ok(const sandbox *sb, const char *const *names)
{
    if (getenv("SGC_TEST_VERBOSE"))
        fputs(sb->out, stderr);
    if (strstr(sb->out, "ERR 0"))
        fail_msg("sandbox setup failed:\n%s", sb->out);
    for (; *names; names++) {
        char key[128];
        snprintf(key, sizeof key, "\n%s ", *names);
        const char *hit = strstr(sb->out, key + 1) == sb->out ? sb->out : strstr(sb->out, key);
        if (!hit)
            fail_msg("check '%s' not reported; output:\n%s", *names, sb->out);
        hit += hit == sb->out ? 0 : 1;
        const char *val = hit + strlen(*names) + 1;
        if (*val != '1') {
            const char *eol = strchr(hit, '\n');
            fail_msg("check failed: %.*s", eol ? (int)(eol - hit) : (int)strlen(hit), hit);
        }
    }
}

void run_case(const sgc_cgroup_limits *lim, const char *extra, void (*inside)(int),
                     const char *const *names)
{
    sandbox sb;
    sandbox_start(&sb, lim, extra, inside);
    sandbox_read(&sb, NULL);
    /* A must end on its own: the kill in sandbox_finish is for leftovers. */
    assert_int_equal(waitpid(sb.a, &sb.status, 0), sb.a);
    sb.waited = 1;
    int st = sandbox_finish(&sb);
    expect_ok(&sb, names);
    assert_int_equal(st, 0);
}

const sgc_cgroup_limits k_lim = {.memory_bytes = 256u << 20, .pids = 64, .cpu_millis = 1000};

/* ---------- inside B ---------- */

void status_field(const char *key, char *out, size_t size)
{
    char buf[4096];
    out[0] = '\0';
    int fd = open("/proc/self/status", O_RDONLY);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *p = strstr(buf, key);
    if (!p)
        return;
    p += strlen(key);
    while (*p == ':' || *p == '\t' || *p == ' ')
        p++;
    snprintf(out, size, "%.*s", (int)strcspn(p, "\n"), p);
}

void check_status(int fd, const char *key, const char *want)
{
    char v[64], name[64];
    status_field(key, v, sizeof v);
    snprintf(name, sizeof name, "status_%s", key);
    report(fd, name, !strcmp(v, want), "%s='%s' want '%s'", key, v, want);
}
