/* runsc.c — running one runsc subcommand, bounded.
 *
 * Owns the global flags every call gets (pinned first, the host config's
 * extra flags after them) and the deadline: a call that has not exited by
 * then is SIGKILLed and reaped (issue 14: a killed app stub or a wedged
 * create must never hang the shim). The per-sandbox --root is what makes a
 * killed `create` harmless to every other sandbox. Pinned:
 *   --network=none            no network stack but loopback inside;
 *   --file-access-mounts=shared  the workspace bind is revalidated on every
 *                             access, so files the host writes through
 *                             /proc/<shim>/root/workspace show inside at
 *                             once, and the reverse (tests/gvisor check it);
 *   --ignore-cgroups          runsc makes and joins no cgroup: everything
 *                             stays in the host-made groups the shim is in;
 *   --overlay2=none           writes go to the real mounts (the workspace
 *                             tmpfs, /tmp), not to a memory overlay the
 *                             host could not see or limit. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

#define ARGS_MAX 48

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* In the child: stdio from fds (moved above 2 first so none is clobbered),
 * every other fd closed, then exec. Never returns. */
static void child(const char *path, char **argv, const int stdio[3])
{
    int tmp[3];
    for (int i = 0; i < 3; i++) {
        int fd = stdio[i] >= 0 ? stdio[i] : open("/dev/null", O_RDWR);
        tmp[i] = fcntl(fd, F_DUPFD, 10);
        if (tmp[i] < 0)
            _exit(126);
    }
    for (int i = 0; i < 3; i++)
        if (dup2(tmp[i], i) != i)
            _exit(126);
    syscall(SYS_close_range, 3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);   /* whatever the host ignored: runsc starts from defaults */
    char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
    execve(path, argv, envp);
    _exit(127);
}

int shim_runsc(const shim_config *c, const shim_paths *p, const char *const *args,
               const int stdio[3], int timeout_ms, char *err, size_t errlen)
{
    char *argv[ARGS_MAX + 1];
    char root[600], platform[128];
    size_t n = 0;
    snprintf(root, sizeof root, "--root=%s", p->root);
    snprintf(platform, sizeof platform, "--platform=%s", c->platform);
    argv[n++] = (char *)c->runsc;
    argv[n++] = root;
    argv[n++] = platform;
    argv[n++] = "--network=none";
    argv[n++] = "--file-access-mounts=shared";
    argv[n++] = "--ignore-cgroups";
    argv[n++] = "--overlay2=none";
    for (size_t i = 0; i < c->n_runsc_flags && n < ARGS_MAX - 8; i++)
        argv[n++] = (char *)c->runsc_flags[i];
    for (size_t i = 0; args[i]; i++) {
        if (n == ARGS_MAX) {
            snprintf(err, errlen, "runsc: too many arguments");
            return -1;
        }
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    int64_t t0 = now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork (runsc %s): %s", args[0], strerror(errno));
        return -1;
    }
    if (pid == 0)
        child(c->runsc, argv, stdio);
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        int left = (int)(t0 + timeout_ms - now_ms());
        if (left <= 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            if (pfd >= 0)
                close(pfd);
            snprintf(err, errlen, "runsc %s did not finish in %d ms; killed", args[0],
                     timeout_ms);
            return -1;
        }
        if (pfd >= 0) {
            struct pollfd pf = {.fd = pfd, .events = POLLIN};
            poll(&pf, 1, left);
        } else {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    if (pfd >= 0)
        close(pfd);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        snprintf(err, errlen, "runsc %s exited with %d", args[0], WEXITSTATUS(status));
    else
        snprintf(err, errlen, "runsc %s killed by signal %d", args[0], WTERMSIG(status));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
