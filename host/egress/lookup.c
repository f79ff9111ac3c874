/* lookup.c — the resolver pool: getaddrinfo blocks, so names are looked
 * up by a few threads of their own, never on the proxy thread. A
 * connection's lookup is queued (p->rmu guards the queue only), resolved
 * by eg_resolve (resolve.c), put on the done list, and the proxy thread is
 * woken through its eventfd to hand the result to connect.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "host/egress/proxy_internal.h"

/* The connection keeps a borrowed pointer to its job so that closing it
 * can cut the job loose (j->c = NULL) while a resolver still holds it. */
void eg_lookup_submit(conn *c)
{
    egress_proxy *p = c->sb->p;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        eg_fail(c, 503, "default.proxy-error", "out of memory");
        return;
    }
    j->c = c;
    snprintf(j->host, sizeof j->host, "%s", c->req.host);
    j->port = (uint16_t)c->req.port;
    c->job = j;
    c->st = C_RESOLVING;
    c->deadline_us = eg_now_us() + (int64_t)p->o.connect_timeout_ms * 1000;
    pthread_mutex_lock(&p->rmu);
    if (p->q_tail)
        p->q_tail->next = j;
    else
        p->q_head = j;
    p->q_tail = j;
    pthread_cond_signal(&p->rcv);
    pthread_mutex_unlock(&p->rmu);
    eg_conn_update(c);
}

/* On the proxy thread, after a wake: a lookup whose connection closed
 * meanwhile (j->c NULL) is just freed. */
void eg_lookup_collect(egress_proxy *p)
{
    pthread_mutex_lock(&p->rmu);
    job *j = p->done;
    p->done = NULL;
    pthread_mutex_unlock(&p->rmu);
    while (j) {
        job *next = j->next;
        conn *c = j->c;
        if (c && !c->dead) {
            c->job = NULL;
            eg_connect_on_resolved(c, &j->res);
        }
        free(j);
        j = next;
    }
}

static void *resolver_main(void *arg)
{
    egress_proxy *p = arg;
    pthread_mutex_lock(&p->rmu);
    for (;;) {
        while (!p->q_head && !p->rstop)
            pthread_cond_wait(&p->rcv, &p->rmu);
        if (p->rstop)
            break;
        job *j = p->q_head;
        p->q_head = j->next;
        if (!p->q_head)
            p->q_tail = NULL;
        j->next = NULL;
        pthread_mutex_unlock(&p->rmu);
        eg_resolve(p->hosts_file, p->o.hosts_only, j->host, j->port, &j->res);
        pthread_mutex_lock(&p->rmu);
        j->next = p->done;
        p->done = j;
        eg_proxy_wake(p);
    }
    pthread_mutex_unlock(&p->rmu);
    return NULL;
}

int eg_lookup_start(egress_proxy *p, sg_err *err)
{
    p->rthr = calloc((size_t)p->o.resolver_threads, sizeof *p->rthr);
    if (!p->rthr)
        return sg_err_set(err, SG_EINTERNAL, "egress proxy: out of memory");
    for (; p->n_rthr < p->o.resolver_threads; p->n_rthr++) {
        if (pthread_create(&p->rthr[p->n_rthr], NULL, resolver_main, p))
            return sg_err_set(err, SG_EINTERNAL, "egress proxy: pthread_create(resolver)");
    }
    return 0;
}

void eg_lookup_stop(egress_proxy *p)
{
    pthread_mutex_lock(&p->rmu);
    p->rstop = 1;
    pthread_cond_broadcast(&p->rcv);
    pthread_mutex_unlock(&p->rmu);
    for (int i = 0; i < p->n_rthr; i++)
        pthread_join(p->rthr[i], NULL);
}

void eg_lookup_drop(egress_proxy *p)
{
    for (job *lists[2] = {p->q_head, p->done}, **l = lists; l < lists + 2; l++) {
        while (*l) {
            job *next = (*l)->next;
            free(*l);
            *l = next;
        }
    }
}
