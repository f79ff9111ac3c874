/* children.c — the processes sandgate-init starts, signals and reaps.
 *
 * Owns: the context and exec tables (id -> pid, which is also the process
 * group), contexts (the default one was forked by the zygote's child
 * before it exec'd us and is "held" until READY; later ones are zygote
 * forks joined into the sandbox that ADOPT hands us, or, with --no-contain
 * only, a fresh interpreter running context_main.py), exec children (/bin/sh -c,
 * posix_spawn), INT / KILL by id, reaping everything that ends in the
 * sandbox (orphans reparent to pid 1) with CTXEXIT / EXIT for ours, and, when
 * not pid 1 (--no-contain), killing our descendants at teardown.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "init.h"

static init_child *find(init_child *t, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (t[i].pid && strcmp(t[i].id, id) == 0)
            return &t[i];
    return NULL;
}

static init_child *slot(init_child *t, int n)
{
    for (int i = 0; i < n; i++)
        if (!t[i].pid)
            return &t[i];
    return NULL;
}

static void close_fds(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static void reply_err(init_state *s, const char *verb, const char *id, const char *msg)
{
    char m[INIT_ID_MAX + 256];
    snprintf(m, sizeof m, "%s %s %s", verb, id, msg);
    init_send(s, m, NULL, 0);
}

/* A free table slot for a new id, or NULL after telling the host why not
 * (errverb CTXERR / EXECERR, noun "context" / "exec"). */
static init_child *claim(init_state *s, init_child *t, int n, const char *errverb,
                         const char *noun, const char *id)
{
    char why[64] = "";
    init_child *c = NULL;
    if (!*id || strchr(id, ' ') || strlen(id) > INIT_ID_MAX)
        snprintf(why, sizeof why, "bad %s id", noun);
    else if (find(t, n, id))
        snprintf(why, sizeof why, "%s still running", noun);
    else if (!(c = slot(t, n)))
        snprintf(why, sizeof why, "too many of them running (%d)", n);
    if (*why)
        reply_err(s, errverb, id, why);
    return c;
}

/* Record a started child under its id and send the host "<verb> <id>" with
 * its fds; ours are closed after. */
static void hand_over(init_state *s, init_child *c, pid_t pid, const char *verb,
                      const char *id, int *fds, int nfds)
{
    c->pid = pid;
    c->pty = -1;
    snprintf(c->id, sizeof c->id, "%s", id);
    char m[INIT_ID_MAX + 16];
    snprintf(m, sizeof m, "%s %s", verb, id);
    init_send(s, m, fds, nfds);
    close_fds(fds, nfds);
}

static void report(init_state *s, const char *verb, init_child *c, int status)
{
    int code = -1, sig = 0;
    if (WIFSIGNALED(status))
        sig = WTERMSIG(status);
    else
        code = WEXITSTATUS(status);
    char m[INIT_ID_MAX + 64];
    snprintf(m, sizeof m, "%s %s %d %d", verb, c->id, code, sig);
    c->pid = 0;
    init_send(s, m, NULL, 0);
}

/* In the forked child: the signals pid 1 ignores or takes through signalfd
 * go back to their defaults, the mask is cleared, and 0/1/2 (and 3 for a
 * context) are the only fds left. Never returns. */
static void exec_context(init_state *s, int ctx_end, int out_w, int err_w, int javascript)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int dfl[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
        signal(dfl[i], SIG_DFL);
    if (!s->contained)
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || setpgid(0, 0) != 0 || dup2(devnull, 0) < 0 || dup2(out_w, 1) < 0 ||
        dup2(err_w, 2) < 0 || dup2(ctx_end, 3) < 0)
        _exit(127);
    char *argv[] = {(char *)s->python, "-I", (char *)s->context_main,
                    javascript ? "--javascript" : NULL, NULL};
    execve(s->python, argv, s->envp);
    _exit(127);
}

/* CTX <id> [language]: a new context, a fresh interpreter (context_main.py,
 * which execs Node for "javascript"). Reply CTX + [sock, out_r, err_r] or
 * CTXERR. */
void init_ctx_start(init_state *s, const char *id, const char *language)
{
    int javascript = strcmp(language, "javascript") == 0;
    if (!javascript && strcmp(language, "python") != 0) {
        reply_err(s, "CTXERR", id, "unknown language");
        return;
    }
    init_child *c = claim(s, s->ctx, INIT_MAX_CTX, "CTXERR", "context", id);
    if (!c)
        return;
    int sv[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0 ||
        pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        int e = errno;
        int all[] = {sv[0], sv[1], out[0], out[1], err[0], err[1]};
        close_fds(all, 6);
        reply_err(s, "CTXERR", id, strerror(e));
        return;
    }
    pid_t pid = fork();
    if (pid == 0)
        exec_context(s, sv[1], out[1], err[1], javascript);
    int mine[] = {sv[1], out[1], err[1]};
    close_fds(mine, 3);
    int host[] = {sv[0], out[0], err[0]};
    if (pid < 0) {
        int e = errno;
        close_fds(host, 3);
        reply_err(s, "CTXERR", id, strerror(e));
        return;
    }
    setpgid(pid, pid);   /* also here: the group exists before any KILLCTX */
    hand_over(s, c, pid, "CTX", id, host, 3);
}

/* Hand the held default context to the host (CTX <id> + fds); if it died
 * while held, start a new one under its id. */
void init_ctx_release_held(init_state *s)
{
    init_reap(s);
    init_child h = s->held;
    memset(&s->held, 0, sizeof s->held);
    if (!h.pid) {
        close_fds(s->held_fds, 3);
        init_ctx_start(s, h.id, "python");   /* the default context */
        return;
    }
    /* The table is empty: nothing was started before READY. */
    hand_over(s, slot(s->ctx, INIT_MAX_CTX), h.pid, "CTX", h.id, s->held_fds, 3);
}

/* ADOPT <id> <pid>: a context the zygote forked into the sandbox (a JOIN,
 * PROTOCOL.md section 1a) is ours to signal and reap under id. It was
 * reparented to us when its first parent exited; if it has ended already,
 * its exit is in the early ring and is reported now. */
void init_ctx_adopt(init_state *s, const char *id, pid_t pid)
{
    if (pid <= 1)
        return;
    init_child *c = claim(s, s->ctx, INIT_MAX_CTX, "CTXERR", "context", id);
    if (!c)
        return;
    c->pid = pid;
    snprintf(c->id, sizeof c->id, "%s", id);
    for (int i = 0; i < INIT_EARLY_EXITS; i++)
        if (s->early[i].pid == pid) {
            s->early[i].pid = 0;
            report(s, "CTXEXIT", c, s->early[i].status);
            return;
        }
}

/* EXEC <id> <command>: /bin/sh -c command in its own process group, stdin
 * /dev/null, in the workdir (our cwd), with the sandbox's environment. */
void init_exec_start(init_state *s, const char *id, const char *command)
{
    init_child *c = claim(s, s->exec, INIT_MAX_EXEC, "EXECERR", "exec", id);
    if (!c)
        return;
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    int devnull = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    int rc = -1;
    pid_t pid = 0;
    if (pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0 &&
        (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
        posix_spawn_file_actions_adddup2(&fa, devnull, 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err[1], 2);
        sigset_t none, dfl;
        sigemptyset(&none);
        sigemptyset(&dfl);
        int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaddset(&dfl, sigs[i]);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &dfl);
        posix_spawnattr_setpgroup(&at, 0);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                          POSIX_SPAWN_SETPGROUP);
        char *argv[] = {"/bin/sh", "-c", (char *)command, NULL};
        rc = posix_spawn(&pid, "/bin/sh", &fa, &at, argv, s->envp);
    } else {
        rc = errno;
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    int mine[] = {out[1], err[1], devnull};
    close_fds(mine, 3);
    int host[] = {out[0], err[0]};
    if (rc != 0) {
        close_fds(host, 2);
        reply_err(s, "EXECERR", id, strerror(rc));
        return;
    }
    hand_over(s, c, pid, "EXEC", id, host, 2);
}

/* ---- background processes (PROC) ---- */

#define PROC_SIZE_MAX 1000

/* The sandbox's env for a PTY process: TERM=xterm-256color unless set.
 * In the forked child only (malloc is safe: we are single-threaded). */
static char **pty_env(char **envp)
{
    size_t n = 0;
    bool has_term = false;
    for (; envp && envp[n]; n++)
        has_term |= strncmp(envp[n], "TERM=", 5) == 0;
    char **e = calloc(n + 2, sizeof *e);
    if (!e)
        return envp;
    for (size_t i = 0; i < n; i++)
        e[i] = envp[i];
    if (!has_term)
        e[n++] = "TERM=xterm-256color";
    return e;
}

/* In the forked child: a new session (for a PTY, the slave becomes its
 * controlling terminal), default signals, fds 0-2 only. Never returns. */
static void exec_proc(init_state *s, const char *command, int slave, int in_r, int out_w,
                      int err_w)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int dfl[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD};
    for (size_t i = 0; i < sizeof dfl / sizeof dfl[0]; i++)
        signal(dfl[i], SIG_DFL);
    if (!s->contained)
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (setsid() < 0)
        _exit(127);
    char **envp = s->envp;
    if (slave >= 0) {   /* our controlling terminal */
        if (ioctl(slave, TIOCSCTTY, 0) != 0)
            _exit(127);
        in_r = out_w = err_w = slave;
        envp = pty_env(envp);
    }
    if (dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0)
        _exit(127);
    char *argv[] = {"/bin/sh", "-c", (char *)command, NULL};
    execve("/bin/sh", argv, envp);
    _exit(127);
}

static int parse_size(const char *v)
{
    char *end;
    long x = strtol(v, &end, 10);
    return *v && !*end && x >= 1 && x <= PROC_SIZE_MAX ? (int)x : -1;
}

/* A PTY master of rows x cols and its slave's name. */
static int open_pty(int rows, int cols, char *slave, size_t cap)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -1;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    if (grantpt(m) != 0 || unlockpt(m) != 0 || ptsname_r(m, slave, cap) != 0 ||
        ioctl(m, TIOCSWINSZ, &ws) != 0) {
        int e = errno;
        close(m);
        errno = e;
        return -1;
    }
    return m;
}

/* PROC <id> <p|t> <rows> <cols> <command>: reply PROC <id> + [in_w, out_r,
 * err_r] (pipes) or [in_w, out_r] (both dups of the PTY master; we keep a
 * third for RESIZE), or PROCERR. */
void init_proc_start(init_state *s, char *args)
{
    char *f[5] = {0};
    for (int i = 0; i < 4 && args; i++) {
        f[i] = args;
        args = strchr(args, ' ');
        if (args)
            *args++ = 0;
    }
    f[4] = args;
    const char *id = f[0] ? f[0] : "";
    if (!f[4] || !f[1] || (strcmp(f[1], "p") != 0 && strcmp(f[1], "t") != 0)) {
        reply_err(s, "PROCERR", id, "malformed PROC message");
        return;
    }
    bool pty = f[1][0] == 't';
    int rows = parse_size(f[2]), cols = parse_size(f[3]);
    if (pty && (rows < 0 || cols < 0)) {
        reply_err(s, "PROCERR", id, "rows and cols must be 1..1000");
        return;
    }
    init_child *c = claim(s, s->exec, INIT_MAX_EXEC, "PROCERR", "process", id);
    if (!c)
        return;
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, master = -1, slave = -1;
    char name[128];
    /* The slave is open before the fork and held by the child from then
     * on, so the host never sees the master hung up before it started. */
    int ok = pty ? (master = open_pty(rows, cols, name, sizeof name)) >= 0 &&
                       (slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) >= 0
                 : pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
                       pipe2(err, O_CLOEXEC) == 0;
    pid_t pid = -1;
    if (ok)
        pid = fork();
    if (pid == 0)
        exec_proc(s, f[4], slave, in[0], out[1], err[1]);
    int e = errno;
    int child_ends[] = {in[0], out[1], err[1], slave};
    close_fds(child_ends, 4);
    if (pid < 0) {
        int host_ends[] = {in[1], out[0], err[0], master};
        close_fds(host_ends, 4);
        reply_err(s, "PROCERR", id, strerror(e));
        return;
    }
    /* No setpgid(pid, pid) here: a group leader could not setsid. Until the
     * child's setsid, signals reach it through kill(pid) (init_signal). */
    if (pty) {
        int host_ends[] = {fcntl(master, F_DUPFD_CLOEXEC, 3), fcntl(master, F_DUPFD_CLOEXEC, 3)};
        if (host_ends[0] < 0 || host_ends[1] < 0) {
            /* no fds to send: the child goes, its reap is not reported */
            close_fds(host_ends, 2);
            close(master);
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            reply_err(s, "PROCERR", id, "out of file descriptors");
            return;
        }
        hand_over(s, c, pid, "PROC", id, host_ends, 2);
        c->pty = master;
    } else {
        int host_ends[] = {in[1], out[0], err[0]};
        hand_over(s, c, pid, "PROC", id, host_ends, 3);
    }
}

/* RESIZE <id> <rows> <cols>: ignored unless id is a PTY process and the
 * sizes are valid. */
void init_proc_resize(init_state *s, char *args)
{
    char id[INIT_ID_MAX + 1], r[16], c[16];
    if (sscanf(args, "%128s %15s %15s", id, r, c) != 3)
        return;
    int rows = parse_size(r), cols = parse_size(c);
    init_child *ch = find(s->exec, INIT_MAX_EXEC, id);
    if (!ch || ch->pty < 0 || rows < 0 || cols < 0)
        return;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    ioctl(ch->pty, TIOCSWINSZ, &ws);
}

/* SIGPROC <id> <signo>: the group and the pid; signo 1..64, else ignored. */
void init_proc_signal(init_state *s, char *args)
{
    char id[INIT_ID_MAX + 1], v[16];
    if (sscanf(args, "%128s %15s", id, v) != 2)
        return;
    char *end;
    long sig = strtol(v, &end, 10);
    if (*end || sig < 1 || sig > 64)
        return;
    init_child *c = find(s->exec, INIT_MAX_EXEC, id);
    if (!c)
        return;
    /* Each process once: a handled signal sent twice runs its handler twice. */
    kill(-c->pid, (int)sig);
    if (getpgid(c->pid) != c->pid)   /* not (or no longer) its group's leader */
        kill(c->pid, (int)sig);
}

/* The group catches what the child forked; the pid itself in case the code
 * moved to another group (setsid). Unknown ids are ignored. Safe against pid
 * reuse: an id stays in the table until we reap it. */
void init_signal(init_state *s, init_kind kind, const char *id, int sig, bool group)
{
    init_child *c = kind == INIT_CTX ? find(s->ctx, INIT_MAX_CTX, id)
                                     : find(s->exec, INIT_MAX_EXEC, id);
    if (!c)
        return;
    if (group)
        kill(-c->pid, sig);
    kill(c->pid, sig);
}


void init_reap(init_state *s)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            if (pid < 0 && errno == EINTR)
                continue;
            return;
        }
        if (s->held.pid == pid) {
            s->held.pid = 0;   /* not the host's yet: nothing to report */
            continue;
        }
        int known = 0;
        for (int i = 0; i < INIT_MAX_CTX; i++)
            if (s->ctx[i].pid == pid) {
                report(s, "CTXEXIT", &s->ctx[i], status);
                known = 1;
            }
        for (int i = 0; i < INIT_MAX_EXEC; i++)
            if (s->exec[i].pid == pid) {
                if (s->exec[i].pty >= 0)
                    close(s->exec[i].pty);
                s->exec[i].pty = -1;
                report(s, "EXIT", &s->exec[i], status);
                known = 1;
            }
        if (!known) {   /* an orphan, or a joined context not yet adopted */
            s->early[s->early_next].pid = pid;
            s->early[s->early_next].status = status;
            s->early_next = (s->early_next + 1) % INIT_EARLY_EXITS;
        }
    }
}

/* Our children's pids from /proc (--no-contain: we are not pid 1). */
static int children_of(pid_t ppid, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0)
            continue;
        buf[k] = 0;
        /* fields after the last ')' (comm may hold spaces): state ppid ... */
        char *p = strrchr(buf, ')');
        char state;
        int pp;
        if (p && sscanf(p + 1, " %c %d", &state, &pp) == 2 && pp == ppid)
            out[n++] = (pid_t)pid;
    }
    closedir(d);
    return n;
}

/* --no-contain teardown: kill what is ours, never kill(-1) on the host. We
 * are a subreaper, so grandchildren whose parents die come to us; keep
 * killing our children until none are left (at most 2 s). */
void init_kill_descendants(void)
{
    pid_t me = getpid();
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        pid_t kids[256];
        int n = children_of(me, kids, 256);
        for (int i = 0; i < n; i++) {
            kill(-kids[i], SIGKILL);
            kill(kids[i], SIGKILL);
        }
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (n == 0)
            return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec > 2)
            return;
        struct timespec d = {0, 2000000};
        nanosleep(&d, NULL);
    }
}
