/* keeper.c — keeping one lease alive: a LeaseKeepAlive every ttl/3 (each
 * its own short stream: one request, one answer, so every keepalive has a
 * deadline and a dead member is just a failed attempt on the next), and
 * on_lost once etcd says the lease is gone or nothing got through for a
 * whole ttl. State is under the client's mu; ticks and answers run on the
 * client's thread, stop on the caller's. */
#include <stdlib.h>
#include <time.h>

#include "etcd/internal.h"

struct etcd_keeper {
    etcd_client *c;             /* borrowed */
    int64_t lease, ttl_us;
    void (*on_lost)(void *arg);
    void *arg;
    int64_t next_us, last_ok_us;
    int in_flight, lost, stopped;
};

int64_t etcd_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void lose_locked(etcd_keeper *k, int *notify)
{
    if (!k->lost) {
        k->lost = 1;
        *notify = 1;
    }
}

static void on_answer(void *arg, int code, ProtobufCMessage *m, const char *why)
{
    etcd_keeper *k = arg;
    etcd_client *c = k->c;
    int notify = 0, free_it = 0;
    int64_t now = etcd_now_us();
    pthread_mutex_lock(&c->mu);
    k->in_flight = 0;
    Etcdserverpb__LeaseKeepAliveResponse *r = (Etcdserverpb__LeaseKeepAliveResponse *)m;
    if (code == 0 && r->ttl > 0) {
        k->last_ok_us = now;
        k->next_us = now + k->ttl_us / 3;
    } else if (code == 0) {
        lose_locked(k, &notify);   /* etcd no longer has it */
    } else {
        k->next_us = now + 250 * 1000;   /* try again soon, on the next member */
        if (now - k->last_ok_us >= k->ttl_us)
            lose_locked(k, &notify);
    }
    free_it = k->stopped;
    pthread_mutex_unlock(&c->mu);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (notify && !free_it)
        k->on_lost(k->arg);
    if (free_it)
        free(k);
}

void etcd_keepers_tick(etcd_client *c)
{
    int64_t now = etcd_now_us();
    etcd_keeper *send[ETCD_MAX_KEEPERS], *lost[ETCD_MAX_KEEPERS];
    size_t ns = 0, nl = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ETCD_MAX_KEEPERS; i++) {
        etcd_keeper *k = c->keepers[i];
        if (!k || k->lost || k->in_flight)
            continue;
        if (now - k->last_ok_us >= k->ttl_us) {
            int notify = 0;
            lose_locked(k, &notify);
            if (notify)
                lost[nl++] = k;
        } else if (now >= k->next_us) {
            k->in_flight = 1;
            send[ns++] = k;
        }
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nl; i++)
        lost[i]->on_lost(lost[i]->arg);
    for (size_t i = 0; i < ns; i++) {
        Etcdserverpb__LeaseKeepAliveRequest r;
        etcdserverpb__lease_keep_alive_request__init(&r);
        r.id = send[i]->lease;
        sg_err e;
        if (etcd_call(c, ETCD_LEASE_KEEPALIVE, &r.base, on_answer, send[i], &e) != 0) {
            pthread_mutex_lock(&c->mu);
            send[i]->in_flight = 0;
            send[i]->next_us = now + 250 * 1000;
            pthread_mutex_unlock(&c->mu);
        }
    }
}

etcd_keeper *etcd_keeper_start(etcd_client *c, int64_t lease, int64_t ttl_s,
                               void (*on_lost)(void *arg), void *arg)
{
    etcd_keeper *k = calloc(1, sizeof *k);
    k->c = c;
    k->lease = lease;
    k->ttl_us = (ttl_s > 0 ? ttl_s : 1) * 1000000;
    k->on_lost = on_lost;
    k->arg = arg;
    k->last_ok_us = etcd_now_us();   /* granted just now */
    k->next_us = k->last_ok_us + k->ttl_us / 3;
    pthread_mutex_lock(&c->mu);
    size_t i = 0;
    while (i < ETCD_MAX_KEEPERS && c->keepers[i])
        i++;
    if (i < ETCD_MAX_KEEPERS)
        c->keepers[i] = k;
    pthread_mutex_unlock(&c->mu);
    if (i == ETCD_MAX_KEEPERS) {
        free(k);
        return NULL;
    }
    return k;
}

void etcd_keeper_stop(etcd_keeper *k)
{
    if (!k)
        return;
    etcd_client *c = k->c;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ETCD_MAX_KEEPERS; i++)
        if (c->keepers[i] == k)
            c->keepers[i] = NULL;
    int later = k->in_flight;   /* its answer frees it */
    k->stopped = 1;
    pthread_mutex_unlock(&c->mu);
    if (!later)
        free(k);
}
