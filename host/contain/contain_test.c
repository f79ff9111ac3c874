/* contain_test.c — libsandgate_contain tested for real, as root: each case
 * plays the zygote (fork A: sgc_unshare, fork B: sgc_enter; or the runtime's
 * one fork; or a later process joining), runs checks inside, and asserts
 * them and the cgroup side (contain_test_harness.c starts, reads and cleans
 * up). The last case proves no mount leaked. */
#include "host/contain/contain.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/contain/contain_test_harness.h"

/* ---------- inside B ---------- */

static void inside_identity(int fd)
{
    report(fd, "pid1", getpid() == 1, "pid=%d", (int)getpid());
    report(fd, "uid", getuid() == UID && geteuid() == UID && getgid() == UID, "uid=%d gid=%d",
           (int)getuid(), (int)getgid());
    check_status(fd, "CapEff", "0000000000000000");
    check_status(fd, "CapPrm", "0000000000000000");
    check_status(fd, "CapInh", "0000000000000000");
    check_status(fd, "CapBnd", "0000000000000000");
    check_status(fd, "CapAmb", "0000000000000000");
    check_status(fd, "NoNewPrivs", "1");
    check_status(fd, "Seccomp", "2");
    CHECK_ERRNO(fd, "setuid0", setuid(0), EPERM);
    struct rlimit rl;
    getrlimit(RLIMIT_CORE, &rl);
    report(fd, "core0", rl.rlim_cur == 0 && rl.rlim_max == 0, "core=%llu", (unsigned long long)rl.rlim_max);
    getrlimit(RLIMIT_NOFILE, &rl);
    report(fd, "nofile", rl.rlim_cur == 256, "nofile=%llu", (unsigned long long)rl.rlim_cur);
    report(fd, "stray_fd_closed", fcntl(g_stray_fd, F_GETFD) == -1 && errno == EBADF, "fd %d", g_stray_fd);
    char host[64] = "";
    gethostname(host, sizeof host);
    report(fd, "hostname", !strcmp(host, "sandbox-test"), "'%s'", host);
}

static int count_procs(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] >= '1' && e->d_name[0] <= '9';
    closedir(d);
    return n;
}

/* Fill the workspace with 256 KiB files until the tmpfs refuses. */
static void check_quota(int fd)
{
    static char chunk[256 << 10];
    size_t total = 0;
    int e = 0;
    for (int i = 0; i < 64 && !e; i++) {
        char path[64];
        snprintf(path, sizeof path, "/workspace/f%d", i);
        int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (f < 0) {
            e = errno;
            break;
        }
        ssize_t w = write(f, chunk, sizeof chunk);
        if (w < 0)
            e = errno;
        else
            total += (size_t)w;
        if (w >= 0 && (size_t)w < sizeof chunk && write(f, chunk, 4096) < 0)
            e = errno;
        close(f);
    }
    report(fd, "workspace_quota", e == ENOSPC && total <= WS_BYTES && total >= WS_BYTES / 2,
           "wrote %zu, errno=%d (%s)", total, e, strerror(e));
}

static void check_fsize(int fd)
{
    static char chunk[2 << 20];
    signal(SIGXFSZ, SIG_IGN);
    int f = open("/tmp/big", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ssize_t w = f < 0 ? -1 : write(f, chunk, sizeof chunk);
    ssize_t w2 = f < 0 ? -1 : write(f, chunk, 16);
    int e = errno;
    if (f >= 0)
        close(f);
    unlink("/tmp/big");
    report(fd, "fsize", w == (1 << 20) && w2 == -1 && e == EFBIG, "w=%zd w2=%zd errno=%d", w, w2, e);
}

static void inside_fs(int fd)
{
    CHECK_ERRNO(fd, "no_shadow", open("/etc/shadow", O_RDONLY), ENOENT);
    char buf[512] = "";
    int f = open("/etc/passwd", O_RDONLY);
    ssize_t n = f < 0 ? -1 : read(f, buf, sizeof buf - 1);
    if (f >= 0)
        close(f);
    if (n > 0)
        buf[n] = '\0';
    report(fd, "passwd", strstr(buf, "sandbox:x:61234:61234:") != NULL, "%zd bytes", n);
    CHECK_ERRNO(fd, "usr_ro", open("/usr/sgc-test", O_WRONLY | O_CREAT, 0600), EROFS);
    CHECK_ERRNO(fd, "root_ro", mkdir("/sgc-test", 0700), EROFS);
    CHECK_ERRNO(fd, "no_work_dir", access("/work", F_OK), ENOENT);
    f = open("/tmp/x", O_WRONLY | O_CREAT, 0600);
    report(fd, "tmp_rw", f >= 0, "errno=%d", errno);
    if (f >= 0)
        close(f);
    f = open("/dev/null", O_WRONLY);
    report(fd, "dev_null", f >= 0 && write(f, "x", 1) == 1, "errno=%d", errno);
    if (f >= 0)
        close(f);
    f = open("/dev/urandom", O_RDONLY);
    report(fd, "dev_urandom", f >= 0 && read(f, buf, 16) == 16, "errno=%d", errno);
    if (f >= 0)
        close(f);
    report(fd, "dev_fd", readlink("/dev/fd", buf, sizeof buf) > 0, "errno=%d", errno);
    report(fd, "only_own_pids", count_procs() == 1, "%d pids in /proc", count_procs());
    check_quota(fd);
    check_fsize(fd);
}

/* A child issuing an x32 syscall number must die of the bad-arch action. */
static void check_x32(int fd)
{
    pid_t p = fork();
    if (p == 0) {
        syscall(0x40000000 | SYS_getpid);
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    report(fd, "x32_killed", WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status=0x%x", st);
}

static void check_clone(int fd)
{
    long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    int e = errno;
    report(fd, "clone_newuser", r == -1 && e == EPERM, "rc=%ld errno=%d", r, e);
    CHECK_ERRNO(fd, "clone3", syscall(SYS_clone3, NULL, 0), ENOSYS);
    pid_t p = fork();
    if (p == 0)
        _exit(7);
    int st = 0;
    waitpid(p, &st, 0);
    report(fd, "fork_ok", p > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 7, "pid=%d", (int)p);
}

static void check_sockets(int fd)
{
    CHECK_ERRNO(fd, "af_netlink", socket(AF_NETLINK, SOCK_RAW, 0), EAFNOSUPPORT);
    CHECK_ERRNO(fd, "af_packet", socket(AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT);
    CHECK_ERRNO(fd, "af_netlink_hi", syscall(SYS_socket, (1ul << 32) | AF_NETLINK, SOCK_RAW, 0),
                EAFNOSUPPORT);
    CHECK_ERRNO(fd, "raw4", socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP), EPERM);
    CHECK_ERRNO(fd, "raw6", socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6), EPERM);
    int s = socket(AF_INET, SOCK_STREAM, 0), u = socket(AF_UNIX, SOCK_STREAM, 0);
    report(fd, "inet_unix_ok", s >= 0 && u >= 0, "inet=%d unix=%d errno=%d", s, u, errno);
    close(s);
    close(u);
}

static void inside_denied(int fd)
{
    CHECK_ERRNO(fd, "mount", mount("none", "/tmp", "tmpfs", 0, NULL), EPERM);
    CHECK_ERRNO(fd, "umount", umount2("/usr", MNT_DETACH), EPERM);
    CHECK_ERRNO(fd, "unshare_ns", unshare(CLONE_NEWNS), EPERM);
    CHECK_ERRNO(fd, "unshare_user", unshare(CLONE_NEWUSER), EPERM);
    CHECK_ERRNO(fd, "setns", setns(0, 0), EPERM);
    CHECK_ERRNO(fd, "ptrace", ptrace(PTRACE_TRACEME, 0, 0, 0), EPERM);
    CHECK_ERRNO(fd, "bpf", syscall(SYS_bpf, 0, 0, 0), EPERM);
    CHECK_ERRNO(fd, "io_uring", syscall(SYS_io_uring_setup, 1, NULL), EPERM);
    CHECK_ERRNO(fd, "keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0), EPERM);
    CHECK_ERRNO(fd, "perf", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
    CHECK_ERRNO(fd, "userfaultfd", syscall(SYS_userfaultfd, 0), EPERM);
    CHECK_ERRNO(fd, "pvm_readv", syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0), EPERM);
    CHECK_ERRNO(fd, "tiocsti", ioctl(0, TIOCSTI, "x"), EPERM);
    CHECK_ERRNO(fd, "tiocsti_hi", syscall(SYS_ioctl, 0, (1ul << 32) | TIOCSTI, "x"), EPERM);
    CHECK_ERRNO(fd, "persona", personality(ADDR_NO_RANDOMIZE), EPERM);
    report(fd, "persona_query", personality(0xffffffff) == 0, "errno=%d", errno);
    check_clone(fd);
    check_sockets(fd);
    check_x32(fd);
}

static void inside_net(int fd)
{
    /* /proc/net/dev, not if_nameindex(): that needs netlink, which is denied. */
    char buf[2048] = "";
    int f = open("/proc/net/dev", O_RDONLY);
    ssize_t r = f < 0 ? -1 : read(f, buf, sizeof buf - 1);
    if (f >= 0)
        close(f);
    if (r > 0)
        buf[r] = '\0';
    int n = 0, lo = 0;
    for (char *line = buf; (line = strchr(line, '\n')) && line[1]; n++) {
        line++;
        lo += strncmp(line + strspn(line, " "), "lo:", 3) == 0;
    }
    n -= 1; /* two header lines: the loop counts lines after the first */
    report(fd, "only_lo", n == 1 && lo == 1, "%d interfaces in /proc/net/dev", n);
    struct if_nameindex *ifs = if_nameindex();
    report(fd, "nameindex_denied", ifs == NULL, "if_nameindex needs AF_NETLINK");
    if (ifs)
        if_freenameindex(ifs);
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    int up = s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
    report(fd, "lo_up", up, "flags=0x%x", ifr.ifr_flags);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53), .sin_addr.s_addr = htonl(0x08080808)};
    CHECK_ERRNO(fd, "no_route", connect(s, (struct sockaddr *)&a, sizeof a), ENETUNREACH);
    close(s);
}

static void inside_exec(int fd)
{
    int p[2];
    if (pipe(p))
        _exit(4);
    pid_t c = fork();
    if (c == 0) {
        dup2(p[1], 1);
        char *argv[] = {"/bin/sh", "-c", "echo hi", NULL}, *envp[] = {"PATH=/usr/bin:/bin", NULL};
        execve("/bin/sh", argv, envp);
        _exit(127);
    }
    close(p[1]);
    char buf[16] = "";
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    int st = 0;
    waitpid(c, &st, 0);
    report(fd, "exec_sh", n == 3 && !strcmp(buf, "hi\n") && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "read %zd '%s' status=0x%x", n, n > 0 ? buf : "", st);
}

/* pids.max=16: forking stops with EAGAIN before 16 processes exist. */
static void inside_pids(int fd)
{
    int n = 0, e = 0;
    for (; n < 64; n++) {
        pid_t p = fork();
        if (p == 0) {
            pause();
            _exit(0);
        }
        if (p < 0) {
            e = errno;
            break;
        }
    }
    report(fd, "pids_limit", e == EAGAIN && n < 16, "forked %d, errno=%d", n, e);
}

/* 32 MiB limit: a child touching 128 MiB is OOM-killed. */
static void inside_oom(int fd)
{
    pid_t p = fork();
    if (p == 0) {
        for (size_t i = 0; i < 128; i++) {
            char *m = malloc(1 << 20);
            if (m)
                memset(m, 1, 1 << 20);
        }
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    report(fd, "oom_killed", WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status=0x%x", st);
}

/* A setsid double-forked daemon keeps running after its parent exits. */
static void inside_daemon(int fd)
{
    pid_t c = fork();
    if (c == 0) {
        if (fork() == 0) {
            setsid();
            report(fd, "daemon", 1, "pid %d", (int)getpid());
            for (;;)
                pause();
        }
        _exit(0);
    }
    waitpid(c, NULL, 0);
    for (;;)
        pause();
}

/* ---------- cases ---------- */

static void test_identity(void **state)
{
    static const char *const names[] = {"pid1", "uid", "status_CapEff", "status_CapPrm",
        "status_CapInh", "status_CapBnd", "status_CapAmb", "status_NoNewPrivs", "status_Seccomp",
        "setuid0", "core0", "nofile", "stray_fd_closed", "hostname", NULL};
    run_case(&k_lim, NULL, inside_identity, names);
}

static void test_fs(void **state);
static void test_denied(void **state);
static void test_net(void **state);

/* The runtime's path: one fork into a new pid namespace; the same
 * identity, fs, seccomp and net checks hold, and the test process's own
 * children go back to its pid namespace afterwards. */
static void test_one_fork(void **state)
{
    char a[64] = "", b[64] = "";
    g_one_fork = 1;
    test_identity(state);
    test_fs(state);
    test_denied(state);
    test_net(state);
    g_one_fork = 0;
    assert_true(readlink("/proc/self/ns/pid", a, sizeof a - 1) > 0);
    assert_true(readlink("/proc/self/ns/pid_for_children", b, sizeof b - 1) > 0);
    assert_string_equal(a, b);
}

/* pid 1 of a sandbox that a later process joins: says it is up, waits. */
static void inside_wait(int fd)
{
    report(fd, "up", 1, "%s", "");
    close(fd);
    pause();
}

static const char *const k_join_ns[] = {"mnt", "net", "pid", "ipc", "uts", "cgroup"};

/* K, joined into the sandbox by the zygote's steps: where did it land? */
static void inside_joined(int fd)
{
    char cg[256] = "";
    for (int i = 0; i < 200 && getppid() != 1; i++)   /* J exits right after the fork */
        usleep(5000);
    report(fd, "reparented_to_pid1", getppid() == 1, "ppid=%d", (int)getppid());
    report(fd, "uid", getuid() == UID && getgid() == UID, "uid=%d", (int)getuid());
    /* pid 1's links are not ours to read (it changed uid, so it is not
     * dumpable): the parent compares these with them. */
    for (size_t i = 0; i < sizeof k_join_ns / sizeof k_join_ns[0]; i++) {
        char path[64], link[64] = "", name[32];
        snprintf(path, sizeof path, "/proc/self/ns/%s", k_join_ns[i]);
        snprintf(name, sizeof name, "ns_%s", k_join_ns[i]);
        ssize_t x = readlink(path, link, sizeof link - 1);
        report(fd, name, x > 0, "%s", link);
    }
    /* the sandbox's root: its workspace, and no host /sys */
    report(fd, "sandbox_root",
           access("/workspace", F_OK) == 0 && access("/sys/fs/cgroup", F_OK) != 0, "%s", "");
    int cfd = open("/proc/self/cgroup", O_RDONLY);
    ssize_t n = cfd < 0 ? -1 : read(cfd, cg, sizeof cg - 1);
    if (cfd >= 0)
        close(cfd);
    report(fd, "cgroup_root", n > 0 && strstr(cg, ":/\n") != NULL, "%.60s", cg);
    check_status(fd, "CapEff", "0000000000000000");
    check_status(fd, "NoNewPrivs", "1");
    check_status(fd, "Seccomp", "2");
    CHECK_ERRNO(fd, "unshare_denied", unshare(CLONE_NEWNS), EPERM);
}

/* The zygote's JOIN (contain.h): sgc_pidns_join, fork J, sgc_pidns_reset;
 * J: sgc_join, fork K, exit; K: sgc_enter_joined, then the checks above. */
static void test_join(void **state)
{
    (void)state;
    char err[512], spec[8192];
    sandbox sb;
    g_one_fork = 1;
    sandbox_start(&sb, &k_lim, NULL, inside_wait);
    g_one_fork = 0;
    sandbox_read(&sb, "up 1");
    int pidfd = (int)syscall(SYS_pidfd_open, sb.a, 0);
    assert_true(pidfd >= 0);
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    spec_for(&sb, p[1], NULL, spec, sizeof spec);
    if (sgc_pidns_join(pidfd, err, sizeof err) != 0)
        fail_msg("sgc_pidns_join: %s", err);
    pid_t j = fork();
    assert_true(j >= 0);
    if (j == 0) {
        close(p[0]);
        if (sgc_join(spec, pidfd, err, sizeof err) != 0) {
            report(p[1], "ERR", 0, "sgc_join: %s", err);
            _exit(1);
        }
        pid_t k = fork();
        if (k == 0) {
            if (sgc_enter_joined(spec, err, sizeof err) != 0) {
                report(p[1], "ERR", 0, "sgc_enter_joined: %s", err);
                _exit(1);
            }
            inside_joined(p[1]);
            _exit(0);
        }
        _exit(k > 0 ? 0 : 1);
    }
    if (sgc_pidns_reset(err, sizeof err) != 0)
        fail_msg("sgc_pidns_reset: %s", err);
    close(p[1]);
    int st;
    assert_int_equal(waitpid(j, &st, 0), j);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    sandbox k = {.rfd = p[0]};
    sandbox_read(&k, NULL);   /* until K is done: EOF */
    close(p[0]);
    close(pidfd);
    char want[6][64] = {{0}};
    for (size_t i = 0; i < sizeof k_join_ns / sizeof k_join_ns[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)sb.a, k_join_ns[i]);
        assert_true(readlink(path, want[i], sizeof want[i] - 1) > 0);
    }
    sandbox_finish(&sb);   /* before any assertion: nothing may outlive a failure */
    static const char *const names[] = {"reparented_to_pid1", "uid", "ns_mnt", "ns_net",
        "ns_pid", "ns_ipc", "ns_uts", "ns_cgroup", "sandbox_root", "cgroup_root",
        "status_CapEff", "status_NoNewPrivs", "status_Seccomp", "unshare_denied", NULL};
    expect_ok(&k, names);
    for (size_t i = 0; i < sizeof k_join_ns / sizeof k_join_ns[0]; i++) {
        char line[128];
        snprintf(line, sizeof line, "ns_%s 1 %s\n", k_join_ns[i], want[i]);
        if (!strstr(k.out, line))
            fail_msg("K is not in pid 1's %s namespace (pid 1: %s); K said:\n%s", k_join_ns[i],
                     want[i], k.out);
    }
}

static void test_fs(void **state)
{
    static const char *const names[] = {"no_shadow", "passwd", "usr_ro", "root_ro", "no_work_dir",
        "tmp_rw", "dev_null", "dev_urandom", "dev_fd", "only_own_pids", "workspace_quota", "fsize", NULL};
    run_case(&k_lim, NULL, inside_fs, names);
}

static void test_denied(void **state)
{
    static const char *const names[] = {"mount", "umount", "unshare_ns", "unshare_user", "setns",
        "ptrace", "bpf", "io_uring", "keyctl", "perf", "userfaultfd", "pvm_readv", "tiocsti",
        "tiocsti_hi", "persona", "persona_query", "clone_newuser", "clone3", "fork_ok",
        "af_netlink", "af_packet", "af_netlink_hi", "raw4", "raw6", "inet_unix_ok", "x32_killed", NULL};
    run_case(&k_lim, NULL, inside_denied, names);
}

static void test_net(void **state)
{
    static const char *const names[] = {"only_lo", "nameindex_denied", "lo_up", "no_route", NULL};
    run_case(&k_lim, NULL, inside_net, names);
}

static void test_exec(void **state)
{
    static const char *const names[] = {"exec_sh", NULL};
    run_case(&k_lim, NULL, inside_exec, names);
}

static long long read_num(const char *fmt, const char *name)
{
    char path[256], buf[64] = "";
    snprintf(path, sizeof path, fmt, name);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    if (!fgets(buf, sizeof buf, f))
        buf[0] = '\0';
    fclose(f);
    return atoll(buf);
}

static void test_cgroup_limits(void **state)
{
    static const char *const names[] = {"pids_limit", NULL};
    sgc_cgroup_limits lim = {.memory_bytes = 64u << 20, .pids = 16, .cpu_millis = 500};
    sandbox sb;
    sandbox_start(&sb, &lim, NULL, inside_pids);
    assert_int_equal(read_num(ROOT "/memory/sandgate/%s/memory.limit_in_bytes", sb.name), 64 << 20);
    assert_int_equal(read_num(ROOT "/pids/sandgate/%s/pids.max", sb.name), 16);
    assert_int_equal(read_num(ROOT "/cpu/sandgate/%s/cpu.cfs_quota_us", sb.name), 50000);
    sandbox_read(&sb, "pids_limit");
    assert_true(sgc_cgroup_memory_current(ROOT, sb.name) > 0);
    sandbox_finish(&sb);
    expect_ok(&sb, names);
}

static void test_oom(void **state)
{
    static const char *const names[] = {"oom_killed", NULL};
    sgc_cgroup_limits lim = {.memory_bytes = 32u << 20, .pids = 16};
    sandbox sb;
    sandbox_start(&sb, &lim, NULL, inside_oom);
    sandbox_read(&sb, "oom_killed");
    long ooms = sgc_cgroup_oom_kills(ROOT, sb.name);
    sandbox_finish(&sb);
    expect_ok(&sb, names);
    assert_true(ooms >= 1);
}

/* The kill reaches a setsid double-forked daemon, and pid 1 too. */
static void test_kill_sandbox(void **state)
{
    sandbox sb;
    char err[256];
    sandbox_start(&sb, &k_lim, NULL, inside_daemon);
    sandbox_read(&sb, "daemon 1");
    assert_non_null(strstr(sb.out, "daemon 1"));
    assert_int_equal(sgc_cgroup_empty(ROOT, sb.name), 0);
    int n = sgc_cgroup_kill(ROOT, sb.name, err, sizeof err);
    if (n < 0)
        fail_msg("sgc_cgroup_kill: %s", err);
    assert_true(n >= 2);
    assert_int_equal(sgc_cgroup_empty(ROOT, sb.name), 1);
    sandbox_finish(&sb);
}

/* Same without namespaces: the orphaned daemon is only found via the cgroup. */
static void kill_plain(const char *root, sgc_cgroup_kind want)
{
    char name[64], procs[1024], err[256];
    if (sgc_cgroup_detect(root) != want)
        skip();
    snprintf(name, sizeof name, "sgct-%d-%d", (int)getpid(), ++g_seq);
    sgc_cgroup_limits none = {0};
    if (sgc_cgroup_create(root, name, &none, procs, sizeof procs, err, sizeof err))
        fail_msg("sgc_cgroup_create(%s): %s", root, err);
    pid_t x = fork();
    if (x == 0) {
        for (char *p = procs, *nl; p && *p; p = nl ? nl + 1 : NULL) {
            nl = strchr(p, '\n');
            if (nl)
                *nl = '\0';
            int f = open(p, O_WRONLY);
            if (f < 0 || write(f, "0", 1) != 1)
                _exit(1);
            close(f);
        }
        if (fork() == 0) {
            setsid();
            if (fork() == 0)
                for (;;)
                    pause();
            _exit(0);
        }
        _exit(0);
    }
    int st;
    waitpid(x, &st, 0);
    assert_int_equal(st, 0);
    usleep(20000);
    reap_all();
    assert_int_equal(sgc_cgroup_empty(root, name), 0);
    int n = sgc_cgroup_kill(root, name, err, sizeof err);
    if (n < 0)
        fail_msg("sgc_cgroup_kill: %s", err);
    assert_true(n >= 1);
    reap_all();
    assert_int_equal(sgc_cgroup_empty(root, name), 1);
    if (sgc_cgroup_destroy(root, name, err, sizeof err))
        fail_msg("sgc_cgroup_destroy: %s", err);
}

static void test_kill_plain_v1(void **state) { kill_plain(ROOT, SGC_CGROUP_V1); }
static void test_kill_plain_v2(void **state) { kill_plain(ROOT "/unified", SGC_CGROUP_V2); }

static void test_detect(void **state)
{
    assert_int_equal(sgc_cgroup_detect(ROOT), SGC_CGROUP_V1);
    assert_int_equal(sgc_cgroup_detect("/nonexistent"), SGC_CGROUP_NONE);
    char err[256];
    assert_int_equal(sgc_cgroup_create(ROOT, "../x", NULL, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "cgroup name '../x'"));
    assert_int_equal(sgc_cgroup_create(ROOT, "a/b", NULL, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "bad character '/'"));
}

static void test_spec_errors(void **state)
{
    static const struct { const char *spec, *want; } rows[] = {
        {"id=a\nuid=5\ngid=5\nnewroot=/x\nbogus=1\n", "unknown key 'bogus'"},
        {"id=a\nuid=0\ngid=5\nnewroot=/x\n", "bad value '0' for key 'uid'"},
        {"id=a\nuid=5\ngid=5\n", "missing required key 'newroot'"},
        {"id=a\nuid=5\ngid=5\nnewroot=/x\nro_bind=/usr:/../etc\n", "bad value"},
        {"id=a\nuid=5\ngid=5\nnewroot=/x\nseccomp=2\n", "key 'seccomp'"},
        {"id=a\nuid=5\ngid=5\nnewroot=/x\nnofile=12x\n", "spec:5:"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char err[256] = "";
        assert_int_equal(sgc_unshare(rows[i].spec, err, sizeof err), -1);
        if (!strstr(err, rows[i].want))
            fail_msg("row %zu: got '%s', want '%s'", i, err, rows[i].want);
    }
}

static void test_no_mount_leak(void **state)
{
    reap_all();
    assert_int_equal(count_lines("/proc/self/mountinfo"), g_mounts_before);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "contain_test: needs root\n");
        return 77;
    }
    /* Orphans of the plain kill test reparent to us, so we can reap them. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    snprintf(g_newroot, sizeof g_newroot, "/tmp/sgc-newroot-XXXXXX");
    if (!mkdtemp(g_newroot))
        return 1;
    g_mounts_before = count_lines("/proc/self/mountinfo");
    g_stray_fd = open("/dev/null", O_RDONLY); /* not CLOEXEC, not kept */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_errors),  cmocka_unit_test(test_detect),
        cmocka_unit_test(test_identity),     cmocka_unit_test(test_fs),
        cmocka_unit_test(test_one_fork),     cmocka_unit_test(test_join),
        cmocka_unit_test(test_denied),       cmocka_unit_test(test_net),
        cmocka_unit_test(test_exec),         cmocka_unit_test(test_cgroup_limits),
        cmocka_unit_test(test_oom),          cmocka_unit_test(test_kill_sandbox),
        cmocka_unit_test(test_kill_plain_v1), cmocka_unit_test(test_kill_plain_v2),
        cmocka_unit_test(test_no_mount_leak),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(g_newroot);
    return rc;
}
