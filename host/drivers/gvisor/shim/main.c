/* main.c — sandgate-gvisor-shim: argv, the start-up sequence, the loop.
 *
 * Start-up, in this order (each step's failure is `ERR <why>` to the host
 * and exit 1; the host then kills the cgroup and removes the directory):
 *   0. join the sandbox's cgroups (--cgroup-procs: the host spawns us with
 *      posix_spawn, so we move ourselves before anything else runs);
 *   1. child subreaper (runsc create's sandbox and gofer reparent to us and
 *      are reaped at once, issue 14), parent-death SIGKILL, SIGCHLD on a
 *      signalfd;
 *   2. a private mount namespace, the workspace tmpfs, the bundle (bundle.c);
 *   3. `runsc create` with pipes as the container's stdio, then `runsc
 *      start`, each bounded (runsc.c);
 *   4. chroot into view/ (its `workspace` is the tmpfs), then uid/gid
 *      65534, no groups, no capabilities, no_new_privs, not dumpable;
 *   5. the loop: the host's socket, the agent's stdout/stdin, the
 *      container's stderr (logged, bounded), every channel's fd.
 * The shim exits when the host's socket closes, the agent's stdout closes
 * (the Sentry or the agent died), the agent breaks the protocol or misses
 * a deadline; in every case the host sees EOF and tears the sandbox down. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "mux.h"
#include "relay.h"
#include "shim.h"

#define RUNSC_CREATE_MS 20000
#define RUNSC_START_MS 10000
#define STDERR_LINE_MAX 400
#define STDERR_LINES_PER_10S 50

static void usage(void)
{
    fprintf(stderr,
            "usage: sandgate-gvisor-shim --sock FD --name HEX32 --state-dir DIR --runsc PATH\n"
            "  --platform P [--runsc-flag F]... --uid N --workspace-bytes N --tmp-bytes N\n"
            "  --nofile N --fsize N --nproc N --as-bytes N [--ro-bind PATH]... [--symlink T:/L]...\n"
            "  --python PATH --agent-dir DIR --runtime-dir DIR [--preload a,b] [--pooled]\n"
            "  [--start-timeout S] [--cgroup-procs FILE]...\n");
    exit(2);
}

static uint64_t num(const char *v)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || *end || !*v)
        usage();
    return n;
}

static void parse_args(shim_config *c, int argc, char **argv)
{
    memset(c, 0, sizeof *c);
    c->sock = -1;
    c->platform = "ptrace";
    c->preload = "";
    c->start_timeout_s = 60;
    c->nofile = 1024;
    c->nproc = 256;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--pooled") == 0) {
            c->pooled = true;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        const char *v = argv[++i];
        if (strcmp(a, "--sock") == 0)
            c->sock = (int)num(v);
        else if (strcmp(a, "--name") == 0)
            c->name = v;
        else if (strcmp(a, "--state-dir") == 0)
            c->state_dir = v;
        else if (strcmp(a, "--runsc") == 0)
            c->runsc = v;
        else if (strcmp(a, "--platform") == 0)
            c->platform = v;
        else if (strcmp(a, "--runsc-flag") == 0 && c->n_runsc_flags < 16)
            c->runsc_flags[c->n_runsc_flags++] = v;
        else if (strcmp(a, "--uid") == 0)
            c->uid = (uid_t)num(v);
        else if (strcmp(a, "--workspace-bytes") == 0)
            c->workspace_bytes = num(v);
        else if (strcmp(a, "--tmp-bytes") == 0)
            c->tmp_bytes = num(v);
        else if (strcmp(a, "--nofile") == 0)
            c->nofile = num(v);
        else if (strcmp(a, "--fsize") == 0)
            c->fsize = num(v);
        else if (strcmp(a, "--nproc") == 0)
            c->nproc = num(v);
        else if (strcmp(a, "--as-bytes") == 0)
            c->as_bytes = num(v);
        else if (strcmp(a, "--ro-bind") == 0 && c->n_ro_binds < 64)
            c->ro_binds[c->n_ro_binds++] = v;
        else if (strcmp(a, "--symlink") == 0 && c->n_symlinks < 32)
            c->symlinks[c->n_symlinks++] = v;
        else if (strcmp(a, "--python") == 0)
            c->python = v;
        else if (strcmp(a, "--agent-dir") == 0)
            c->agent_dir = v;
        else if (strcmp(a, "--runtime-dir") == 0)
            c->runtime_dir = v;
        else if (strcmp(a, "--preload") == 0)
            c->preload = v;
        else if (strcmp(a, "--cgroup-procs") == 0 && c->n_cgroup_procs < 8)
            c->cgroup_procs[c->n_cgroup_procs++] = v;
        else if (strcmp(a, "--start-timeout") == 0)
            c->start_timeout_s = (int)num(v);
        else
            usage();
    }
    bool hex = c->name && strlen(c->name) == SHIM_NAME_LEN;
    for (const char *p = c->name; hex && *p; p++)
        hex = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
    if (c->sock < 3 || !hex || !c->state_dir || c->state_dir[0] != '/' || !c->runsc ||
        !c->python || !c->agent_dir || !c->runtime_dir || !c->workspace_bytes ||
        !c->tmp_bytes || !c->fsize || !c->as_bytes || c->uid == 0 || c->start_timeout_s <= 0)
        usage();
}

/* What runsc said on the container's stderr before a failed step (its
 * errors), as one log line. */
static int runsc_stderr = -1;
static void log_runsc_stderr(const shim_config *c)
{
    if (runsc_stderr < 0)
        return;
    char buf[2048];
    fcntl(runsc_stderr, F_SETFL, O_NONBLOCK);
    ssize_t n = read(runsc_stderr, buf, sizeof buf - 1);
    if (n <= 0)
        return;
    buf[n] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '\n' || *p == '"' || (unsigned char)*p < 0x20)
            *p = ' ';
    sg_log_warn("shim %s: runsc said: %s", c->name, buf);
}

/* Step failed: tell the host and go. */
static void die(const shim_config *c, const char *what)
{
    char m[1200];
    snprintf(m, sizeof m, "ERR gvisor: %s", what);
    for (char *p = m; *p; p++)
        if (*p == '\n')
            *p = ' ';
    sg_log_warn("shim %s: %s", c->name, what);
    log_runsc_stderr(c);
    send(c->sock, m, strlen(m), MSG_NOSIGNAL | MSG_DONTWAIT);
    exit(1);
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* The container's stderr: the agent's (and runsc's) own messages, as
 * bounded, rate-limited log lines. */
typedef struct errlog {
    int fd;
    char line[STDERR_LINE_MAX + 1];
    size_t n;
    int64_t window_ms;
    int count;
} errlog;

static void errlog_emit(errlog *e, const char *name)
{
    int64_t now = shim_now_ms();
    if (now - e->window_ms > 10000) {
        e->window_ms = now;
        e->count = 0;
    }
    e->line[e->n] = 0;
    if (e->n && ++e->count <= STDERR_LINES_PER_10S)
        sg_log_info("shim %s: container stderr: %s", name, e->line);
    e->n = 0;
}

static void errlog_read(errlog *e, const char *name)
{
    char buf[4096];
    ssize_t r = read(e->fd, buf, sizeof buf);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        errlog_emit(e, name);
        close(e->fd);
        e->fd = -1;
        return;
    }
    for (ssize_t i = 0; i < r; i++) {
        if (buf[i] == '\n' || e->n == STDERR_LINE_MAX)
            errlog_emit(e, name);
        if (buf[i] != '\n')
            e->line[e->n++] = (buf[i] >= 0x20 && buf[i] < 0x7f) || (buf[i] & 0x80) ? buf[i] : ' ';
    }
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
/* The sanitizer build only (tests/run.sh's build-asan): LeakSanitizer's
 * check at exit lists /proc/<pid>/task and reads /proc/self/maps by path,
 * and opens ASAN_OPTIONS' log_path.<pid> only when it reports. After the
 * chroot into view/ (and as uid 65534) neither works: the check fails, its
 * tracer dies trying to open the log to say so, and the shim spins at exit
 * for ever (the host never sees EOF). So the view gets a proc, in the
 * shim's private mount namespace, and the report file is opened now, while
 * its path still resolves; the production build has neither. */
static void sanitizer_view(const shim_config *c, const shim_paths *p)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/proc", p->view);
    if ((mkdir(path, 0555) != 0 && errno != EEXIST) ||
        mount("proc", path, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die(c, "sanitizer build: mounting proc in the view failed");
    const char *o = getenv("ASAN_OPTIONS"), *lp = o ? strstr(o, "log_path=") : NULL;
    if (!lp || lp[9] != '/')
        return;
    snprintf(path, sizeof path, "%.*s.%d", (int)strcspn(lp + 9, ":"), lp + 9, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        die(c, "sanitizer build: opening the sanitizer log failed");
    __sanitizer_set_report_fd((void *)(intptr_t)fd);
}
#endif

static void drop_privileges(const shim_config *c, const shim_paths *p)
{
#if defined(__SANITIZE_ADDRESS__)
    sanitizer_view(c, p);
#endif
    if (chroot(p->view) != 0 || chdir("/") != 0)
        die(c, "chroot into the sandbox view failed");
    /* Nothing more needs root: the runsc processes are started, and what
     * is left is relaying fds we hold. */
    if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0)
        die(c, "dropping to uid 65534 failed");
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);   /* ACTIVATE passes through us */
}

static void reap(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

int main(int argc, char **argv)
{
    static shim_config cfg;
    static shim_paths paths;
    static mux m;
    static relay r;
    char err[1024];
    sg_log_init("sandgate-gvisor-shim", SG_LOG_INFO);
    parse_args(&cfg, argc, argv);
    for (size_t i = 0; i < cfg.n_cgroup_procs; i++) {
        int fd = open(cfg.cgroup_procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
            die(&cfg, "joining the sandbox's cgroups failed");
        close(fd);
    }
    prctl(PR_SET_NAME, "sg-gvisor-shim", 0, 0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    fcntl(cfg.sock, F_SETFD, FD_CLOEXEC);
    if (sfd < 0)
        die(&cfg, "signalfd failed");

    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        die(&cfg, "a private mount namespace: unshare/mount failed");
    if (shim_bundle_paths(&cfg, &paths, err, sizeof err) != 0 ||
        shim_bundle_create(&cfg, &paths, err, sizeof err) != 0)
        die(&cfg, err);

    /* Pipes, never files, as the container's stdio (issue 14). */
    int in[2], out[2], errp[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0)
        die(&cfg, "pipe2 failed");
    int stdio[3] = {in[0], out[1], errp[1]};
    runsc_stderr = errp[0];
    const char *create[] = {"create", "--bundle", paths.bundle, cfg.name, NULL};
    if (shim_runsc(&cfg, &paths, create, stdio, RUNSC_CREATE_MS, err, sizeof err) != 0)
        die(&cfg, err);
    close(in[0]);
    close(out[1]);
    reap();
    int start_stdio[3] = {-1, errp[1], errp[1]};
    const char *start[] = {"start", cfg.name, NULL};
    if (shim_runsc(&cfg, &paths, start, start_stdio, RUNSC_START_MS, err, sizeof err) != 0)
        die(&cfg, err);
    close(errp[1]);
    runsc_stderr = -1;
    drop_privileges(&cfg, &paths);

    nonblock(in[1]);
    nonblock(out[0]);
    nonblock(errp[0]);
    nonblock(cfg.sock);
    if (mux_init(&m, out[0], in[1]) != 0)
        die(&cfg, "out of memory");
    m.on_control = relay_control;
    m.arg = &r;
    if (relay_init(&r, &cfg, &m, cfg.sock) != 0)
        die(&cfg, r.err);
    errlog el = {.fd = errp[0]};

    static struct pollfd pf[MUX_MAX_CHANS + 8];
    static mux_chan *pc[MUX_MAX_CHANS + 8];
    const char *why = NULL;
    while (!why) {
        mux_settle(&m, shim_now_ms());
        if (mux_flush(&m) != 0) {
            why = m.err;
            break;
        }
        int n = 0;
        pf[n++] = (struct pollfd){.fd = cfg.sock, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = m.in_fd, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = m.out_fd, .events = m.out_n ? POLLOUT : 0};
        pf[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        pf[n++] = (struct pollfd){.fd = el.fd, .events = POLLIN};
        int fixed = n;
        for (size_t i = 0; i < m.n_chans; i++) {
            mux_chan *c = m.chans[i];
            if (c->fd < 0)
                continue;
            pc[n] = c;
            pf[n++] = (struct pollfd){.fd = c->fd, .events = mux_chan_events(c)};
        }
        int64_t now = shim_now_ms();
        int timeout = relay_timeout(&r, now), ack = mux_ack_timeout(&m, now);
        if (ack >= 0 && (timeout < 0 || ack < timeout))
            timeout = ack;
        if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            why = "poll failed";
            break;
        }
        if (relay_tick(&r, shim_now_ms()) != 0) {
            why = r.err;
            break;
        }
        if (pf[3].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                ;
            reap();
        }
        if (el.fd >= 0 && pf[4].revents)
            errlog_read(&el, cfg.name);
        if (pf[2].revents & (POLLERR | POLLHUP)) {
            why = "the agent's stdin closed";
            break;
        }
        if (pf[1].revents) {
            int rc = mux_read(&m);
            if (rc != 0) {
                why = rc < 0 && r.err[0] ? r.err : m.err;
                break;
            }
        }
        if (pf[0].revents) {
            int rc = relay_host(&r);
            if (rc != 0) {
                why = rc > 0 ? "the host closed the supervisor socket" : r.err;
                break;
            }
        }
        for (int i = fixed; i < n; i++)
            if (pf[i].revents)
                mux_chan_io(&m, pc[i], pf[i].revents);
    }
    /* Drain the container's stderr a little: the agent's last words are
     * often why it died. */
    for (int i = 0; i < 8 && el.fd >= 0; i++) {
        struct pollfd e = {.fd = el.fd, .events = POLLIN};
        if (poll(&e, 1, 20) <= 0)
            break;
        errlog_read(&el, cfg.name);
    }
    sg_log_warn("shim %s: exiting: %s", cfg.name, why);
    /* Everything the loop held goes with the process; freed here so the
     * sanitizer build's leak check at exit sees only real leaks. */
    mux_free(&m);
    if (r.activation) {
        explicit_bzero(r.activation, r.activation_len);
        free(r.activation);
        r.activation = NULL;
    }
    return 1;
}
