/* loop.c — the host's I/O thread: one epoll set over every driver's fds
 * (process: its zygotes) and every supervisor, context and exec fd, a
 * signalfd for SIGCHLD (the host is a child subreaper, so it reaps what the
 * drivers start and any orphan of theirs, and tells the drivers), and a
 * 20 ms tick for timeouts, TTLs and the drivers' restarts. Handlers run
 * with H.mu held. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/host.h"

#define TICK_US 20000

static pthread_t loop_thread;
static host_watch sigchld_watch;

int64_t host_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t host_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int host_watch_add(host_watch *w, int fd, void (*fn)(host_watch *, uint32_t), void *owner)
{
    w->fd = fd;
    w->fn = fn;
    w->owner = owner;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = w};
    return epoll_ctl(H.epfd, EPOLL_CTL_ADD, fd, &ev);
}

int host_watch_add_events(host_watch *w, int fd, void (*fn)(host_watch *, uint32_t), void *owner,
                          uint32_t events)
{
    w->fd = fd;
    w->fn = fn;
    w->owner = owner;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    return epoll_ctl(H.epfd, EPOLL_CTL_ADD, fd, &ev);
}

int host_watch_set_events(host_watch *w, uint32_t events)
{
    if (w->fd < 0)
        return -1;
    struct epoll_event ev = {.events = events, .data.ptr = w};
    return epoll_ctl(H.epfd, EPOLL_CTL_MOD, w->fd, &ev);
}

void host_watch_close(host_watch *w)
{
    if (w->fd < 0)
        return;
    epoll_ctl(H.epfd, EPOLL_CTL_DEL, w->fd, NULL);
    close(w->fd);
    w->fd = -1;
}

static void on_sigchld(host_watch *w, uint32_t events)
{
    struct signalfd_siginfo si;
    while (read(w->fd, &si, sizeof si) == sizeof si)
        ;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        host_drivers_reaped(pid);
}

/* H.mu held. Nothing until the drivers have started (drivers.c says why):
 * the pool's refill launches through them. */
static void tick(int64_t now)
{
    if (!H.drivers_started)
        return;
    host_drivers_tick(now);
    host_sandboxes_tick(now);
}

static void *loop_main(void *arg)
{
    struct epoll_event evs[64];
    int64_t next_tick = host_now_us() + TICK_US;
    while (!H.stopping) {
        int64_t now = host_now_us();
        int timeout_ms = next_tick > now ? (int)((next_tick - now) / 1000) + 1 : 0;
        int n = epoll_wait(H.epfd, evs, 64, timeout_ms);
        pthread_mutex_lock(&H.mu);
        for (int i = 0; i < n; i++) {
            host_watch *w = evs[i].data.ptr;
            /* A handler earlier in this batch may have closed this fd. */
            if (w->fd >= 0)
                w->fn(w, evs[i].events);
        }
        now = host_now_us();
        if (now >= next_tick) {
            tick(now);
            next_tick = now + TICK_US;
        }
        pthread_mutex_unlock(&H.mu);
    }
    return NULL;
}

int host_loop_start(sg_err *err)
{
    H.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (H.epfd < 0)
        return sg_err_errno(err, SG_EINTERNAL, "epoll_create1");
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    int sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0)
        return sg_err_errno(err, SG_EINTERNAL, "signalfd(SIGCHLD)");
    host_watch_add(&sigchld_watch, sfd, on_sigchld, NULL);
    if (pthread_create(&loop_thread, NULL, loop_main, NULL) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "pthread_create(loop)");
    return 0;
}

void host_loop_stop(void)
{
    H.stopping = 1;
    pthread_join(loop_thread, NULL);
}
