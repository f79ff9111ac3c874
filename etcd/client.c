/* client.c — the client's channels (one per endpoint), its completion-queue
 * thread, and unary calls with per-attempt deadlines and failover to the
 * next member. The keeper (keeper.c) and watch (watch.c) run on the same
 * thread: the loop wakes at least every ETCD_TICK_MS to let them act on
 * time, since C core has no timers of its own in the C API. */
#define _GNU_SOURCE   /* strcasestr */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "etcd/internal.h"

static const struct {
    const char *path;
    const ProtobufCMessageDescriptor *resp;
} methods[ETCD_N_METHODS] = {
    [ETCD_RANGE] = {"/etcdserverpb.KV/Range", &etcdserverpb__range_response__descriptor},
    [ETCD_PUT] = {"/etcdserverpb.KV/Put", &etcdserverpb__put_response__descriptor},
    [ETCD_DELETE_RANGE] = {"/etcdserverpb.KV/DeleteRange",
                           &etcdserverpb__delete_range_response__descriptor},
    [ETCD_TXN] = {"/etcdserverpb.KV/Txn", &etcdserverpb__txn_response__descriptor},
    [ETCD_LEASE_GRANT] = {"/etcdserverpb.Lease/LeaseGrant",
                          &etcdserverpb__lease_grant_response__descriptor},
    [ETCD_LEASE_REVOKE] = {"/etcdserverpb.Lease/LeaseRevoke",
                           &etcdserverpb__lease_revoke_response__descriptor},
    [ETCD_LEASE_KEEPALIVE] = {"/etcdserverpb.Lease/LeaseKeepAlive",
                              &etcdserverpb__lease_keep_alive_response__descriptor},
};

/* Ask members to refuse rather than serve without a leader (etcd's own
 * clients send it): a partitioned member fails the call, and the next
 * member is tried. */
static grpc_metadata require_leader_md[1];

static void *loop_main(void *arg)
{
    etcd_client *c = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(c->cq, rpc_deadline_in(ETCD_TICK_MS / 1e3),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type == GRPC_OP_COMPLETE) {
            rpc_tag *t = ev.tag;
            t->fn(t->arg, ev.success);
        }
        if (!atomic_load(&c->stopping)) {
            etcd_keepers_tick(c);
            etcd_watches_tick(c);
        }
    }
}

etcd_client *etcd_client_create(const char *const *endpoints, size_t n, double timeout_s,
                                const etcd_tls *tls, sg_err *err)
{
    if (n == 0 || n > ETCD_MAX_ENDPOINTS) {
        sg_err_set(err, SG_EINVAL, "etcd: %zu endpoints; expected 1 to %d", n,
                   ETCD_MAX_ENDPOINTS);
        return NULL;
    }
    require_leader_md[0].key = grpc_slice_from_static_string("hasleader");
    require_leader_md[0].value = grpc_slice_from_static_string("true");
    etcd_client *c = calloc(1, sizeof *c);
    c->n = n;
    c->timeout_s = timeout_s > 0 ? timeout_s : 2;
    /* Recursive: etcd_watch_stop cancels a stream with mu held (so the
     * stream cannot finish and be freed in between), and the cancel may run
     * the stream's on_done, which takes mu, on the same thread. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&c->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_init(&c->log_mu, NULL);
    grpc_channel_credentials *creds = NULL;
    if (tls && !(creds = etcd_tls_creds(tls, err))) {
        etcd_client_destroy(c);
        return NULL;
    }
    c->tls = creds != NULL;
    for (size_t i = 0; i < n; i++) {
        char target[300];
        snprintf(target, sizeof target, "dns:///%s", endpoints[i]);
        c->endpoints[i] = strdup(endpoints[i]);
        c->ch[i] = rpc_channel_create_tls(target, creds, tls ? tls->server_name : NULL);
        if (!c->ch[i]) {
            if (creds)
                grpc_channel_credentials_release(creds);
            sg_err_set(err, SG_EINTERNAL, "etcd: cannot make a channel to %s", endpoints[i]);
            etcd_client_destroy(c);
            return NULL;
        }
    }
    if (creds)
        grpc_channel_credentials_release(creds);   /* each channel holds its own ref */
    c->cq = grpc_completion_queue_create_for_next(NULL);
    if (pthread_create(&c->thread, NULL, loop_main, c) != 0) {
        sg_err_errno(err, SG_EINTERNAL, "etcd: pthread_create");
        grpc_completion_queue_destroy(c->cq);
        c->cq = NULL;
        etcd_client_destroy(c);
        return NULL;
    }
    c->started = 1;
    return c;
}

void etcd_client_destroy(etcd_client *c)
{
    if (!c)
        return;
    atomic_store(&c->stopping, 1);
    for (size_t i = 0; i < c->n; i++)
        if (c->ch[i])
            grpc_channel_destroy(c->ch[i]);   /* calls in flight fail and complete */
    if (c->started) {
        grpc_completion_queue_shutdown(c->cq);
        pthread_join(c->thread, NULL);
        grpc_completion_queue_destroy(c->cq);
    }
    for (size_t i = 0; i < c->n; i++)
        free(c->endpoints[i]);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->log_mu);
    free(c);
}

/* ---- unary calls with failover ---- */

typedef struct etcd_req {
    etcd_client *c;
    etcd_method m;
    uint8_t *bytes;       /* owned: the packed request, re-sent on failover */
    size_t len;
    size_t first, tried;  /* endpoint of the first attempt, attempts made */
    etcd_done done;
    void *arg;
} etcd_req;

static int attempt(etcd_req *q, sg_err *err);

/* What a member's failures look like in the log: once per new reason, and
 * once when it answers again, so a member that refuses our certificate (or
 * whose certificate we refuse) says so plainly without a line per call.
 * why is grpc's text: for the log only, never for a client. */
static void note_member(etcd_client *c, size_t ep, const char *why)
{
    char now[sizeof c->last_err[0]];
    snprintf(now, sizeof now, "%s", why ? why : "");
    pthread_mutex_lock(&c->log_mu);
    int changed = strcmp(c->last_err[ep], now) != 0;
    char was = c->last_err[ep][0];
    memcpy(c->last_err[ep], now, sizeof now);
    pthread_mutex_unlock(&c->log_mu);
    if (!changed)
        return;
    if (!now[0]) {
        if (was)
            sg_log_info("etcd: member %s answers again", c->endpoints[ep]);
        return;
    }
    int handshake = c->tls && (strcasestr(now, "handshake") || strcasestr(now, "ssl") ||
                               strcasestr(now, "certificate") || strcasestr(now, "tls"));
    /* With TLS 1.3 the member checks our certificate after the handshake:
     * a refusal is a connection closed or reset at once, not an error. */
    int closed = c->tls && !handshake && !strcasestr(now, "refused") &&
                 (strcasestr(now, "reset") || strcasestr(now, "closed") ||
                  strcasestr(now, "read failed") || strcasestr(now, "eof"));
    if (handshake)
        sg_log_error("etcd: member %s: TLS handshake failed, so no call reaches it (check "
                     "registry.tls.ca and server_name against the member's certificate): %s",
                     c->endpoints[ep], now);
    else if (closed)
        sg_log_error("etcd: member %s closed the TLS connection at once (a member that refuses "
                     "our client certificate does this: check registry.tls.cert and key "
                     "against its --trusted-ca-file): %s",
                     c->endpoints[ep], now);
    else
        sg_log_warn("etcd: member %s does not answer: %s", c->endpoints[ep], now);
}

static void on_reply(void *arg, rpc_unary_result *r)
{
    etcd_req *q = arg;
    etcd_client *c = q->c;
    size_t ep = (q->first + q->tried - 1) % c->n;   /* the member this attempt asked */
    if (r->code == GRPC_STATUS_UNAVAILABLE || r->code == GRPC_STATUS_DEADLINE_EXCEEDED)
        note_member(c, ep, r->details && r->details[0] ? r->details : "no answer");
    else if (!atomic_load(&c->stopping))
        note_member(c, ep, "");
    if (r->code == GRPC_STATUS_OK && r->resp) {
        size_t len;
        uint8_t *buf = rpc_flatten(r->resp, &len);
        grpc_byte_buffer_destroy(r->resp);
        ProtobufCMessage *resp = protobuf_c_message_unpack(methods[q->m].resp, NULL, len, buf);
        free(buf);
        q->done(q->arg, resp ? 0 : SG_EINTERNAL, resp, resp ? "" : "undecodable answer");
        free(q->bytes);
        free(q);
        return;
    }
    int retry = (r->code == GRPC_STATUS_UNAVAILABLE || r->code == GRPC_STATUS_DEADLINE_EXCEEDED) &&
                q->tried < c->n && !atomic_load(&c->stopping);
    if (retry) {
        /* This member is out; later calls start at the next one. */
        size_t bad = ep;
        atomic_compare_exchange_strong(&c->current, &bad, (bad + 1) % c->n);
        sg_err e;
        if (attempt(q, &e) == 0)
            return;
    }
    int code = r->code == GRPC_STATUS_UNAVAILABLE || r->code == GRPC_STATUS_DEADLINE_EXCEEDED
                   ? SG_EUNAVAIL
               : r->code == GRPC_STATUS_NOT_FOUND ? SG_ENOTFOUND
                                                  : SG_EINTERNAL;
    q->done(q->arg, code, NULL, r->details ? r->details : "");
    free(q->bytes);
    free(q);
}

static int attempt(etcd_req *q, sg_err *err)
{
    etcd_client *c = q->c;
    size_t ep = (q->first + q->tried) % c->n;
    q->tried++;
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)q->bytes, q->len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return rpc_unary_start(c->ch[ep], c->cq, NULL, methods[q->m].path,
                           rpc_deadline_in(c->timeout_s), require_leader_md, 1, bb, on_reply, q,
                           err);
}

int etcd_call(etcd_client *c, etcd_method m, const ProtobufCMessage *req, etcd_done done,
              void *arg, sg_err *err)
{
    if (atomic_load(&c->stopping))
        return sg_err_set(err, SG_EUNAVAIL, "etcd: the client is stopping");
    etcd_req *q = calloc(1, sizeof *q);
    q->c = c;
    q->m = m;
    q->len = protobuf_c_message_get_packed_size(req);
    q->bytes = malloc(q->len ? q->len : 1);
    protobuf_c_message_pack(req, q->bytes);
    q->first = atomic_load(&c->current) % c->n;
    q->done = done;
    q->arg = arg;
    if (attempt(q, err) != 0) {
        free(q->bytes);
        free(q);
        return -1;
    }
    return 0;
}

/* ---- blocking form ---- */

typedef struct sync_wait {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, code;
    ProtobufCMessage *resp;
    char why[256];
} sync_wait;

static void on_sync(void *arg, int code, ProtobufCMessage *resp, const char *why)
{
    sync_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->code = code;
    w->resp = resp;
    snprintf(w->why, sizeof w->why, "%s", why ? why : "");
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int etcd_call_sync(etcd_client *c, etcd_method m, const ProtobufCMessage *req,
                   ProtobufCMessage **resp, sg_err *err)
{
    sync_wait w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    if (etcd_call(c, m, req, on_sync, &w, err) != 0)
        return -1;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    *resp = w.resp;
    if (w.code != 0)
        return sg_err_set(err, w.code, "etcd %s: %s", methods[m].path,
                          w.code == SG_EUNAVAIL ? "no member answered in time" : w.why);
    return 0;
}

grpc_channel *etcd_channel(etcd_client *c, size_t i) { return c->ch[i % c->n]; }

const grpc_metadata *etcd_leader_md(void) { return require_leader_md; }
