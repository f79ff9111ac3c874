/* proxy.c — the egress proxy handle and its thread: create and destroy,
 * the epoll dispatcher, the timeout scan and the graveyard.
 *
 * One epoll thread per proxy (not the host loop): relaying bytes must not
 * take the host's table mutex (host.h) or sit in front of sandbox I/O, and
 * the proxy stays testable without the host daemon. Names are resolved by a
 * small pool of resolver threads (lookup.c); results come back through an
 * eventfd. Every connection is a state machine (proxy_internal.h).
 *
 * Locking: p->mu guards every sandbox, connection and counter; the proxy
 * thread holds it while it handles one epoll batch, callers of the API take
 * it too. A connection or sandbox closed by another thread is put on a
 * graveyard and freed by the proxy thread after its current batch, so a
 * batch never touches freed memory. p->rmu guards only the resolver queue. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "host/egress/proxy_internal.h"

void eg_proxy_wake(egress_proxy *p)
{
    uint64_t one = 1;
    (void)!write(p->wakefd, &one, sizeof one);
}

static void on_timeouts(egress_proxy *p, int64_t now)
{
    for (egress_sandbox *sb = p->sandboxes; sb; sb = sb->next) {
        conn *next;
        for (conn *c = sb->conns; c; c = next) {
            next = c->next;
            if (now < c->deadline_us)
                continue;
            switch (c->st) {
            case C_HEAD:
                if (c->c2u.len)
                    eg_fail(c, 408, "default.bad-request", "no complete request head in time");
                else
                    eg_conn_close(c);
                break;
            case C_RESOLVING:
            case C_CONNECTING:
                eg_fail(c, 504, "default.connect-timeout", "%s port %u did not answer in time",
                        c->req.host, c->req.port);
                break;
            case C_HELLO:
                eg_fail_tunnel(c, "default.deny-tunnel", "no TLS ClientHello in time");
                break;
            default:
                eg_conn_close(c);
            }
        }
    }
}

/* Free what was closed during the batch, now that no event of it is left. */
static void reap(egress_proxy *p)
{
    while (p->grave) {
        conn *c = p->grave;
        p->grave = c->next;
        eg_conn_free(c);
    }
    while (p->sb_grave) {
        egress_sandbox *sb = p->sb_grave;
        p->sb_grave = sb->next;
        eg_sandbox_free(sb);
    }
}

/* The dispatcher: one epoll batch at a time under p->mu, then the
 * timeout scan (at most every 200 ms) and the graveyard. */
static void *proxy_main(void *arg)
{
    egress_proxy *p = arg;
    struct epoll_event evs[64];
    int64_t last_scan = 0;
    while (!p->stop) {
        int n = epoll_wait(p->epfd, evs, 64, 250);
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < n; i++) {
            fdref *r = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            if (r->type == FD_WAKE) {
                uint64_t v;
                (void)!read(p->wakefd, &v, sizeof v);
                eg_lookup_collect(p);
            } else if (r->type == FD_LISTEN) {
                egress_sandbox *sb = r->obj;
                if (!sb->dead)
                    eg_sandbox_on_accept(sb);
            } else {
                conn *c = r->obj;
                if (c->dead)
                    continue;
                if (r->type == FD_UPSTREAM) {
                    eg_relay_on_upstream(c, ev);
                } else {
                    if (ev & EPOLLERR) {
                        eg_conn_close(c);
                        continue;
                    }
                    if (ev & (EPOLLIN | EPOLLHUP))
                        eg_relay_on_client_in(c);
                    if (!c->dead && (ev & EPOLLOUT))
                        eg_relay_on_client_out(c);
                    if (!c->dead && (ev & EPOLLHUP) && !(ev & EPOLLIN))
                        eg_conn_close(c);
                }
                if (!c->dead && c->cap_hit)
                    eg_conn_close(c);
                eg_relay_check(c);
                if (!c->dead)
                    eg_conn_update(c);
            }
        }
        int64_t now = eg_now_us();
        if (now - last_scan > 200000) {
            on_timeouts(p, now);
            last_scan = now;
        }
        reap(p);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

/* ---- API --------------------------------------------------------------------- */

int egress_proxy_create(const egress_options *o, egress_proxy **out, sg_err *err)
{
    *out = NULL;
    egress_proxy *p = calloc(1, sizeof *p);
    if (!p)
        return sg_err_set(err, SG_EINTERNAL, "egress proxy: out of memory");
    p->o = *o;
    if (!p->o.resolver_threads)
        p->o.resolver_threads = 2;
    if (!p->o.connect_timeout_ms)
        p->o.connect_timeout_ms = 10000;
    if (!p->o.idle_timeout_ms)
        p->o.idle_timeout_ms = 300000;
    if (!p->o.header_timeout_ms)
        p->o.header_timeout_ms = 10000;
    p->hosts_file = o->hosts_file ? strdup(o->hosts_file) : NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->rmu, NULL);
    pthread_cond_init(&p->rcv, NULL);
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    p->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->epfd < 0 || p->wakefd < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress proxy: epoll_create1/eventfd");
        goto fail;
    }
    p->wake = (fdref){FD_WAKE, p};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->wake};
    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wakefd, &ev);
    if (eg_lookup_start(p, err) < 0)
        goto fail;
    if (pthread_create(&p->thr, NULL, proxy_main, p)) {
        sg_err_set(err, SG_EINTERNAL, "egress proxy: pthread_create");
        goto fail;
    }
    *out = p;
    return 0;
fail:
    p->stop = 1;
    p->thr = 0;
    egress_proxy_destroy(p);
    return err ? err->code : SG_EINTERNAL;
}

void egress_proxy_destroy(egress_proxy *p)
{
    if (!p)
        return;
    p->stop = 1;
    if (p->thr) {
        eg_proxy_wake(p);
        pthread_join(p->thr, NULL);
    }
    eg_lookup_stop(p);
    pthread_mutex_lock(&p->mu);
    while (p->sandboxes)
        eg_sandbox_close(p->sandboxes);
    reap(p);
    pthread_mutex_unlock(&p->mu);
    eg_lookup_drop(p);   /* after the sandboxes: closing a conn cuts its job loose */
    if (p->epfd >= 0)
        close(p->epfd);
    if (p->wakefd >= 0)
        close(p->wakefd);
    free(p->rthr);
    free(p->hosts_file);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->rmu);
    pthread_cond_destroy(&p->rcv);
    free(p);
}
