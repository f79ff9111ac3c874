/* init.c — sandgate-init's loop: argv, sandbox_sock, teardown.
 *
 * Owns: what pid 1 does between the host and the sandbox once the zygote's
 * fork has made it (PROTOCOL.md §2, §3): READY and the default context to
 * the host, ACTIVATE for a pooled sandbox, the host's CTX / ADOPT / INT /
 * KILLCTX / EXEC / KILLEXEC / PROC / SIGPROC / RESIZE, the egress listener (EGRESS + fd), SIGCHLD, and killing
 * everything in the sandbox when the host goes away. Starting and reaping
 * children is children.c's; the ACTIVATE JSON is activate.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "init.h"

#define EGRESS_PORT 3128
#define EGRESS_ACCEPT_BATCH 64

extern char **environ;

static char msgbuf[INIT_COMMAND_MAX + 1];

int init_send(init_state *s, const char *text, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    for (;;) {
        if (sendmsg(s->sock, &mh, MSG_NOSIGNAL) >= 0)
            return 0;
        if (errno != EINTR)
            break;
    }
    /* The host is gone: nothing of the sandbox may outlive it. */
    init_shutdown(s);
}

void init_shutdown(init_state *s)
{
    if (s->contained && getpid() == 1)
        kill(-1, SIGKILL);   /* in our own pid namespace: exactly the sandbox */
    else
        init_kill_descendants();
    _exit(0);
}

/* Listen on 127.0.0.1:3128 in the sandbox's network namespace, before READY,
 * so no code of the sandbox can have taken the port. */
static int egress_listen(init_state *s, char *err, size_t errlen)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(EGRESS_PORT),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 128) != 0) {
        snprintf(err, errlen, "egress listener on 127.0.0.1:%d: %s", EGRESS_PORT,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    s->egress = fd;
    return 0;
}

/* Hand each waiting connection to the host's proxy; keep no copy. */
static void on_egress(init_state *s)
{
    for (int i = 0; i < EGRESS_ACCEPT_BATCH; i++) {
        int c = accept4(s->egress, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return;   /* EAGAIN; ECONNABORTED, EMFILE: again on the next wakeup */
        init_send(s, "EGRESS", &c, 1);
        close(c);
    }
}

static void fail(init_state *s, const char *what)
{
    char m[1200];
    snprintf(m, sizeof m, "ERR %s", what);
    for (char *p = m; *p; p++)
        if (*p == '\n')
            *p = ' ';
    init_send(s, m, NULL, 0);
    _exit(1);
}

/* READY, then the default context to the host (PROTOCOL.md §2). */
static void go_ready(init_state *s, bool egress)
{
    char err[256];
    if (egress && egress_listen(s, err, sizeof err) != 0)
        fail(s, err);
    init_send(s, "READY", NULL, 0);
    init_ctx_release_held(s);
}

/* Frames 'a'... 'A' carrying the JSON to the held context, on the socket
 * end the host is about to get: they come first there. */
static void send_activation_frames(init_state *s, const char *json, size_t n)
{
    if (!s->held.pid)
        return;   /* it died: release_held starts a new one */
    size_t step = INIT_FRAME_MAX - 1;
    char frame[INIT_FRAME_MAX];
    size_t off = 0;
    do {
        size_t len = n - off < step ? n - off : step;
        frame[0] = off + len < n ? 'a' : 'A';
        memcpy(frame + 1, json + off, len);
        if (send(s->held_fds[0], frame, len + 1, MSG_NOSIGNAL) < 0)
            return;
        off += len;
    } while (off < n);
}

static void on_activate(init_state *s, const char *json, size_t n)
{
    init_activation a;
    char err[512];
    if (init_activation_parse(json, n, &a, err, sizeof err) != 0)
        fail(s, err);
    /* The context first: it applies the same JSON on the other CPU while we
     * apply it here. */
    send_activation_frames(s, json, n);
    if (chdir(a.workdir) != 0) {
        snprintf(err, sizeof err, "chdir(%s): %s", a.workdir, strerror(errno));
        fail(s, err);
    }
    s->envp = a.env;   /* owned from here: lives as long as we do */
    a.env = NULL;
    bool egress = a.egress;
    init_activation_cleanup(&a);
    go_ready(s, egress);
}

static void on_message(init_state *s, bool *pooled)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = msgbuf, .iov_len = INIT_COMMAND_MAX};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    ssize_t n = recvmsg(s->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0)
        init_shutdown(s);   /* EOF or a broken socket: the host is gone */
    /* The host sends us no fds; keep none. */
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int *fds = (int *)CMSG_DATA(c);
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++)
                close(fds[i]);
        }
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        return;
    msgbuf[n] = 0;
    if (*pooled) {
        /* Nothing but ACTIVATE is expected before it; drop the rest. */
        if (n >= 9 && memcmp(msgbuf, "ACTIVATE ", 9) == 0) {
            *pooled = false;
            on_activate(s, msgbuf + 9, (size_t)n - 9);
        }
        return;
    }
    if (memchr(msgbuf, 0, (size_t)n))
        return;
    char *rest = strchr(msgbuf, ' ');
    if (rest)
        *rest++ = 0;
    else
        rest = msgbuf + n;
    const char *cmd = msgbuf;
    if (strcmp(cmd, "CTX") == 0) {
        char *language = strchr(rest, ' ');   /* CTX <id> [python|javascript] */
        if (language)
            *language++ = 0;
        init_ctx_start(s, rest, language && *language ? language : "python");
    } else if (strcmp(cmd, "ADOPT") == 0) {
        char *pid = strchr(rest, ' ');
        if (pid)
            *pid++ = 0;
        init_ctx_adopt(s, rest, pid ? (pid_t)atoi(pid) : 0);
    } else if (strcmp(cmd, "INT") == 0) {
        init_signal(s, INIT_CTX, rest, SIGINT, false);
    } else if (strcmp(cmd, "KILLCTX") == 0) {
        init_signal(s, INIT_CTX, rest, SIGKILL, true);
    } else if (strcmp(cmd, "EXEC") == 0) {
        char *command = strchr(rest, ' ');
        if (command)
            *command++ = 0;
        init_exec_start(s, rest, command ? command : "");
    } else if (strcmp(cmd, "KILLEXEC") == 0) {
        init_signal(s, INIT_EXEC, rest, SIGKILL, true);
    } else if (strcmp(cmd, "PROC") == 0) {
        init_proc_start(s, rest);
    } else if (strcmp(cmd, "SIGPROC") == 0) {
        init_proc_signal(s, rest);
    } else if (strcmp(cmd, "RESIZE") == 0) {
        init_proc_resize(s, rest);
    }
    /* Anything else: ignored; the host is trusted, just not infallible. */
}

static int parse_fd(const char *v)
{
    char *end;
    long fd = strtol(v, &end, 10);
    return (*end || fd < 3 || fd > 65535) ? -1 : (int)fd;
}

/* --held ID:PID:HOSTFD:OUTFD:ERRFD — the default context forked before exec. */
static int parse_held(init_state *s, const char *arg)
{
    char copy[INIT_ID_MAX + 64], *v = copy, *f[5];
    if (strlen(arg) >= sizeof copy)
        return -1;
    strcpy(copy, arg);   /* argv stays readable in /proc/1/cmdline */
    for (int i = 0; i < 5; i++) {
        f[i] = strsep(&v, ":");
        if (!f[i] || !*f[i])
            return -1;
    }
    if (v || strlen(f[0]) > INIT_ID_MAX)
        return -1;
    snprintf(s->held.id, sizeof s->held.id, "%s", f[0]);
    s->held.pid = (pid_t)atoi(f[1]);
    for (int i = 0; i < 3; i++)
        if ((s->held_fds[i] = parse_fd(f[2 + i])) < 0)
            return -1;
    return s->held.pid > 0 ? 0 : -1;
}

static void usage(void)
{
    fprintf(stderr, "usage: sandgate-init --sock FD --held ID:PID:FD:FD:FD --python PATH "
                    "--context-main PATH [--pooled] [--egress] [--no-contain]\n");
    _exit(2);
}

static void parse_args(init_state *s, int argc, char **argv, bool *pooled, bool *egress)
{
    bool have_held = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--pooled") == 0)
            *pooled = true;
        else if (strcmp(a, "--egress") == 0)
            *egress = true;
        else if (strcmp(a, "--no-contain") == 0)
            s->contained = false;
        else if (!v)
            usage();
        else if (strcmp(a, "--sock") == 0 && (s->sock = parse_fd(v)) >= 0)
            i++;
        else if (strcmp(a, "--held") == 0 && parse_held(s, v) == 0 && ++i)
            have_held = true;
        else if (strcmp(a, "--python") == 0 && ++i)
            s->python = v;
        else if (strcmp(a, "--context-main") == 0 && ++i)
            s->context_main = v;
        else
            usage();
    }
    if (s->sock < 0 || !have_held || !s->python || !s->context_main)
        usage();
}

/* Every fd we were handed stays ours alone: children get theirs by dup2. */
static void cloexec_all(void)
{
    for (int fd = 3; fd < 1024; fd++) {
        int fl = fcntl(fd, F_GETFD);
        if (fl >= 0)
            fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    }
}

int main(int argc, char **argv)
{
    static init_state s = {.sock = -1, .contained = true, .egress = -1};
    bool pooled = false, egress = false;
    parse_args(&s, argc, argv, &pooled, &egress);
    s.envp = environ;
    cloexec_all();
    /* execve made us dumpable again; pid 1 must not be (host /proc views). */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Exec'd through an fd, our comm would read as the fd's number. */
    prctl(PR_SET_NAME, "sandgate-init", 0, 0, 0);
    if (!s.contained)
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);   /* reap as pid 1 would */
    int ign[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof ign / sizeof ign[0]; i++)
        signal(ign[i], SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0)
        fail(&s, "signalfd(SIGCHLD) failed");
    if (!pooled)
        go_ready(&s, egress);
    init_reap(&s);
    for (;;) {
        struct pollfd p[3] = {{.fd = s.sock, .events = POLLIN},
                              {.fd = sfd, .events = POLLIN},
                              {.fd = s.egress, .events = POLLIN}};
        if (poll(p, s.egress >= 0 ? 3 : 2, -1) < 0)
            continue;
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
                ;
            init_reap(&s);
        }
        if (s.egress >= 0 && p[2].revents)
            on_egress(&s);
        if (p[0].revents)
            on_message(&s, &pooled);
    }
}
