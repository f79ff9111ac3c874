/* watch.c — one prefix watch on one Watch stream, resumed after the stream
 * ends (a member died, lost its leader, or the connection broke) from the
 * revision after the last event delivered, on the next member. The stream
 * is read one message at a time (rpc_fwd_next after each), so a slow
 * consumer slows etcd's sending instead of growing our memory. */
#include <stdlib.h>
#include <string.h>

#include "etcd/internal.h"

#define RECONNECT_US (200 * 1000)

struct etcd_watch {
    etcd_client *c;                 /* borrowed */
    char *prefix;                   /* owned */
    uint8_t end[512];
    size_t end_len;
    int64_t next_rev;               /* where a new stream starts; 0 = now */
    etcd_watch_event on_event;
    void (*on_reset)(void *arg);
    void *arg;
    rpc_fwd *f;                     /* the stream, while running */
    int running, stopped;
    int64_t reconnect_us;
    size_t ep;                      /* the member the next stream goes to */
};

static void on_message(void *arg, rpc_fwd *f, grpc_byte_buffer *bb)
{
    etcd_watch *w = arg;
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    grpc_byte_buffer_destroy(bb);
    Etcdserverpb__WatchResponse *r = etcdserverpb__watch_response__unpack(NULL, len, buf);
    free(buf);
    pthread_mutex_lock(&w->c->mu);
    w->f = f;
    int stopped = w->stopped;
    pthread_mutex_unlock(&w->c->mu);
    if (!r || stopped) {
        if (r)
            etcdserverpb__watch_response__free_unpacked(r, NULL);
        rpc_fwd_cancel(f);
        rpc_fwd_next(f);
        return;
    }
    if (r->created && w->next_rev == 0 && r->header)
        w->next_rev = r->header->revision + 1;   /* a resumed stream misses nothing */
    if (r->canceled && r->compact_revision > 0) {
        w->next_rev = 0;   /* history is gone past where we were */
        if (w->on_reset)
            w->on_reset(w->arg);
    }
    for (size_t i = 0; i < r->n_events; i++) {
        const Etcdserverpb__Event *e = r->events[i];
        if (!e->kv)
            continue;
        char key[1024];
        size_t kl = e->kv->key.len < sizeof key - 1 ? e->kv->key.len : sizeof key - 1;
        memcpy(key, e->kv->key.data, kl);
        key[kl] = 0;
        w->on_event(w->arg, e->type == ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE, key,
                    e->kv->value.data, e->kv->value.len, e->kv->mod_revision);
        w->next_rev = e->kv->mod_revision + 1;
    }
    etcdserverpb__watch_response__free_unpacked(r, NULL);
    rpc_fwd_next(f);
}

static void on_done(void *arg, grpc_status_code code, const char *details, const rpc_trailer *t)
{
    etcd_watch *w = arg;
    pthread_mutex_lock(&w->c->mu);
    w->running = 0;
    w->f = NULL;
    w->ep++;
    w->reconnect_us = etcd_now_us() + RECONNECT_US;
    int free_it = w->stopped;
    pthread_mutex_unlock(&w->c->mu);
    if (free_it) {
        free(w->prefix);
        free(w);
    }
}

/* With c->mu held. */
static void start_stream_locked(etcd_watch *w)
{
    Etcdserverpb__WatchCreateRequest cr;
    etcdserverpb__watch_create_request__init(&cr);
    cr.key = (ProtobufCBinaryData){strlen(w->prefix), (uint8_t *)w->prefix};
    cr.range_end = (ProtobufCBinaryData){w->end_len, w->end};
    cr.start_revision = w->next_rev;
    cr.progress_notify = 1;
    Etcdserverpb__WatchRequest req;
    etcdserverpb__watch_request__init(&req);
    req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    req.create_request = &cr;
    static const rpc_fwd_cbs cbs = {on_message, on_done};
    sg_err e;
    w->running = 1;
    rpc_fwd *f = rpc_fwd_start(etcd_channel(w->c, w->ep), w->c->cq, NULL,
                               "/etcdserverpb.Watch/Watch", gpr_inf_future(GPR_CLOCK_REALTIME),
                               etcd_leader_md(), 1, rpc_pack(&req.base), &cbs, w, &e);
    if (!f) {
        w->running = 0;
        w->ep++;
        w->reconnect_us = etcd_now_us() + RECONNECT_US;
    }
}

void etcd_watches_tick(etcd_client *c)
{
    int64_t now = etcd_now_us();
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ETCD_MAX_WATCHES; i++) {
        etcd_watch *w = c->watches[i];
        if (w && !w->running && !w->stopped && now >= w->reconnect_us)
            start_stream_locked(w);
    }
    pthread_mutex_unlock(&c->mu);
}

etcd_watch *etcd_watch_start(etcd_client *c, const char *prefix, int64_t start_rev,
                             etcd_watch_event on_event, void (*on_reset)(void *arg), void *arg)
{
    etcd_watch *w = calloc(1, sizeof *w);
    w->c = c;
    w->prefix = strdup(prefix);
    w->end_len = etcd_prefix_end(prefix, w->end, sizeof w->end);
    w->next_rev = start_rev;
    w->on_event = on_event;
    w->on_reset = on_reset;
    w->arg = arg;
    w->ep = atomic_load(&c->current);
    pthread_mutex_lock(&c->mu);
    size_t i = 0;
    while (i < ETCD_MAX_WATCHES && c->watches[i])
        i++;
    if (i < ETCD_MAX_WATCHES) {
        c->watches[i] = w;
        start_stream_locked(w);   /* the first stream now, not at the next tick */
    }
    pthread_mutex_unlock(&c->mu);
    if (i == ETCD_MAX_WATCHES) {
        free(w->prefix);
        free(w);
        return NULL;
    }
    return w;
}

void etcd_watch_stop(etcd_watch *w)
{
    if (!w)
        return;
    etcd_client *c = w->c;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < ETCD_MAX_WATCHES; i++)
        if (c->watches[i] == w)
            c->watches[i] = NULL;
    w->stopped = 1;
    if (w->running) {
        /* Cancelled with mu held: the stream's on_done (which takes mu)
         * cannot free it between reading w->f and the cancel (ASan: a
         * stream that ended on the client's thread just then was used after
         * free). on_done frees w, perhaps inside this cancel. A stream with
         * no message yet (w->f NULL) sees `stopped` at its first one. */
        if (w->f)
            rpc_fwd_cancel(w->f);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pthread_mutex_unlock(&c->mu);
    free(w->prefix);
    free(w);
}
