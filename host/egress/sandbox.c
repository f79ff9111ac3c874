/* sandbox.c — one sandbox as the proxy sees it: its rules, its optional
 * Unix-socket listener and accept loop, the connections handed in
 * (egress_sandbox_adopt), and its accounting: the byte cap shared by all
 * its connections and the allowed/denied/open counters. A sandbox closed
 * by the API goes to the proxy's graveyard (proxy.c); each connection's
 * life is conn.c. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "host/egress/proxy_internal.h"

/* The cap counts both directions together. */
int eg_sandbox_cap_left(const egress_sandbox *sb, uint64_t *left)
{
    if (!sb->cap) {
        *left = UINT64_MAX;
        return 1;
    }
    uint64_t used = sb->up + sb->down;
    *left = used >= sb->cap ? 0 : sb->cap - used;
    return *left > 0;
}

/* Bounded per tick; the listener stays readable for the rest. */
void eg_sandbox_on_accept(egress_sandbox *sb)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(sb->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        eg_conn_start(sb, fd);
    }
}

void eg_sandbox_close(egress_sandbox *sb)
{
    egress_proxy *p = sb->p;
    if (sb->dead)
        return;
    sb->dead = 1;
    while (sb->conns)
        eg_conn_close(sb->conns);
    if (sb->lfd >= 0) {
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, sb->lfd, NULL);
        close(sb->lfd);
        sb->lfd = -1;
    }
    if (sb->path)
        unlink(sb->path);
    for (egress_sandbox **pp = &p->sandboxes; *pp; pp = &(*pp)->next) {
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
    }
    sb->next = p->sb_grave;
    p->sb_grave = sb;
}

void eg_sandbox_free(egress_sandbox *sb)
{
    egress_rules_destroy(sb->rules);
    free(sb->path);
    free(sb);
}

/* ---- API --------------------------------------------------------------------- */

int egress_sandbox_create(egress_proxy *p, const char *sandbox_id, const char *sock_path,
                          egress_rules *rules, uint64_t byte_cap, egress_sandbox **out,
                          sg_err *err)
{
    *out = NULL;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (!sandbox_id) {
        egress_rules_destroy(rules);
        return sg_err_set(err, SG_EINVAL, "egress: no sandbox id");
    }
    if (sock_path && strlen(sock_path) >= sizeof sun.sun_path) {
        egress_rules_destroy(rules);
        return sg_err_set(err, SG_EINVAL, "egress: socket path too long: %s", sock_path);
    }
    egress_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb || (sock_path && !(sb->path = strdup(sock_path)))) {
        free(sb);
        egress_rules_destroy(rules);
        return sg_err_set(err, SG_EINTERNAL, "egress: out of memory");
    }
    sb->p = p;
    sb->rules = rules;
    sb->cap = byte_cap;
    sb->ref = (fdref){FD_LISTEN, sb};
    snprintf(sb->id, sizeof sb->id, "%s", sandbox_id);
    sb->lfd = -1;
    if (!sock_path)
        goto listed;   /* no listener: connections come by egress_sandbox_adopt */
    strcpy(sun.sun_path, sock_path);
    sb->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sb->lfd < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress: socket(AF_UNIX)");
        goto fail;
    }
    unlink(sock_path);
    if (bind(sb->lfd, (struct sockaddr *)&sun, sizeof sun) < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress: bind(%s)", sock_path);
        goto fail;
    }
    /* the sandbox's uid must be able to connect; the directory guards it */
    if (chmod(sock_path, 0666) < 0 || listen(sb->lfd, 128) < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress: chmod/listen(%s)", sock_path);
        unlink(sock_path);
        goto fail;
    }
listed:
    pthread_mutex_lock(&p->mu);
    if (sb->lfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &sb->ref};
        epoll_ctl(p->epfd, EPOLL_CTL_ADD, sb->lfd, &ev);
    }
    sb->next = p->sandboxes;
    p->sandboxes = sb;
    pthread_mutex_unlock(&p->mu);
    *out = sb;
    return 0;
fail:
    if (sb->lfd >= 0)
        close(sb->lfd);
    egress_rules_destroy(rules);
    free(sb->path);
    free(sb);
    return err ? err->code : SG_EINTERNAL;
}

void egress_sandbox_destroy(egress_sandbox *sb)
{
    if (!sb)
        return;
    egress_proxy *p = sb->p;
    pthread_mutex_lock(&p->mu);
    eg_sandbox_close(sb);
    pthread_mutex_unlock(&p->mu);
    eg_proxy_wake(p);   /* reap soon */
}

void egress_sandbox_adopt(egress_sandbox *sb, int fd)
{
    if (fd < 0)
        return;
    egress_proxy *p = sb->p;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (sb->dead)
        close(fd);
    else
        eg_conn_start(sb, fd);
    pthread_mutex_unlock(&p->mu);
}

void egress_sandbox_counters(egress_sandbox *sb, egress_counters *out)
{
    egress_proxy *p = sb->p;
    pthread_mutex_lock(&p->mu);
    *out = (egress_counters){.bytes_up = sb->up, .bytes_down = sb->down, .byte_cap = sb->cap,
                             .allowed = sb->allowed, .denied = sb->denied, .open = sb->open};
    pthread_mutex_unlock(&p->mu);
}
