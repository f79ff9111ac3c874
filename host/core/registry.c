/* registry.c — the host's entry in etcd (config `registry:`; nothing runs
 * in the embedded mode). One key, <prefix>hosts/<name>, bound to a lease the
 * host keeps alive: a host that dies or is cut off loses the lease and the
 * key with it within lease_ttl, so gateways stop placing on it; an orderly
 * stop revokes the lease so they stop at once. The value is a JSON load
 * report (address, templates and their isolation and warm pool, capacity,
 * live sandboxes, free memory), rewritten every REPORT_MS.
 *
 * The key is claimed with a create-if-absent transaction, never a blind
 * put: a second host started under the same name (sandbox ids name their
 * host) cannot take over a live host's entry; it waits, and logs why, until
 * that entry's lease ends.
 *
 * The report carries the lease id: gateways bind each task claim and
 * sandbox record they write for this host (common/regkeys.h) to it, so a
 * lost host releases its tasks, records and quota slots with its entry.
 * When one of this host's sandboxes ends (owner's kill, TTL, idle, crash)
 * its keys are released here (host_registry_ended: queued, then one
 * transaction off the request path, retried until etcd answers, so an
 * outage loses no release). An Extend rewrites the record's expiry the same
 * way (host_registry_extended: queued in the same order, so a release
 * queued after it wins, and a record already gone is left gone). A lease the keeper reports lost is probed
 * first: if etcd still has it (etcd was only unreachable, or restarted and
 * renewed it) the host keeps it and nothing changes; if it is gone, the
 * gateways have already released this host's tasks (perhaps re-created
 * elsewhere), so after registering again the host kills every sandbox whose
 * record no longer exists: no sandbox is reachable twice after a partition
 * heals.
 *
 * A drain (host_registry_drain: SIGUSR1, or the --drain-file line) adds "draining":true to the
 * report, sent at once rather than at the next REPORT_MS: gateways then
 * place no new task here while every sandbox here keeps being served.
 *
 * Everything here runs on a thread of its own with etcd's calls bounded by
 * the client's deadline: an unreachable etcd delays only the next report,
 * never a call of any tenant (H.mu is taken only to count, queue and kill). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/regkeys.h"
#include "etcd/etcd.h"
#include "host/core/admit.h"
#include "host/host.h"

#define REPORT_MS 2000
#define ETCD_CALL_TIMEOUT_S 1.0
#define ENDED_RING 1024          /* ids refused as stale claims (see host_registry_was_ended) */
#define RELEASE_MAX 65536        /* queued releases; past it the lease's end releases them */

typedef struct release {
    struct release *next;
    char id[HOST_ID_MAX];
    char tenant[128], user[128], dedupe[400];
    int64_t expires_ms;         /* 0: a release; else an Extend's new expiry */
} release;

static struct {
    etcd_client *etcd;          /* owned */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
    int kick;                   /* report now (with mu) */
    atomic_int draining;
    const char *drain_file;     /* borrowed (argv); NULL = none */
    int64_t lease;              /* 0 = none */
    etcd_keeper *keeper;        /* owned while lease */
    volatile int lost;          /* the keeper said the lease is gone */
    int had_lease;              /* a lease was held earlier in this life */
    char key[256];
    char address[128];
    /* under mu: */
    release *q_head, *q_tail;   /* owned: releases not yet done */
    size_t q_len;
    char ended[ENDED_RING][HOST_ID_MAX];
    size_t n_ended;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void on_lost(void *arg) { R.lost = 1; }

/* The load report; with H.mu taken only to count. */
static size_t report(char *out, size_t cap, int64_t lease)
{
    host_admit_usage u;
    host_admit_measure(&u, H.cfg.cgroup_root);
    pthread_mutex_lock(&H.mu);
    size_t live = 0;
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        live += !sb->pooled && sb->state != SB_KILLING;
    int n = snprintf(out, cap, "{\"name\":\"%s\",\"address\":\"%s\",\"lease\":%lld,"
                               "\"capacity\":%u,\"live\":%zu,"
                               "\"free_memory\":%lld,\"draining\":%s,\"templates\":[",
                     H.cfg.name, R.address, (long long)lease, H.cfg.max_sandboxes, live,
                     (long long)(u.mem_available > 0 ? u.mem_available : 0),
                     atomic_load(&R.draining) ? "true" : "false");
    for (size_t i = 0; i < H.n_templates && n > 0 && (size_t)n < cap; i++) {
        size_t ready = 0;
        for (host_sandbox *sb = H.templates[i].pool; sb; sb = sb->pool_next)
            ready += sb->pool_ready != 0;
        n += snprintf(out + n, cap - (size_t)n,
                      "%s{\"name\":\"%s\",\"isolation\":\"%s\",\"pool_ready\":%zu}",
                      i ? "," : "", H.templates[i].cfg->name,
                      sg_isolation_name(H.templates[i].cfg->isolation), ready);
    }
    pthread_mutex_unlock(&H.mu);
    if (n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "]}");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static void revoke(int64_t lease, sg_err *err)
{
    Etcdserverpb__LeaseRevokeRequest r;
    etcdserverpb__lease_revoke_request__init(&r);
    r.id = lease;
    ProtobufCMessage *resp = NULL;
    if (etcd_call_sync(R.etcd, ETCD_LEASE_REVOKE, &r.base, &resp, err) == 0)
        protobuf_c_message_free_unpacked(resp, NULL);
}

/* A lease and the key claimed under it, with a report naming the lease; 0
 * once registered. */
static int claim(sg_err *err)
{
    int64_t lease;
    char value[4096];
    if (etcd_lease_grant_sync(R.etcd, H.cfg.registry.lease_ttl, &lease, err) != 0)
        return -1;
    if (!report(value, sizeof value, lease)) {
        sg_err e;
        revoke(lease, &e);
        return sg_err_set(err, SG_EINTERNAL, "registry: the report does not fit");
    }
    int created = 0;
    char *existing = NULL;
    if (etcd_create_sync(R.etcd, R.key, value, lease, &created, &existing, err) != 0) {
        free(existing);
        return -1;
    }
    free(existing);
    if (!created) {
        /* Another live host has this name, or our own last life's entry
         * whose lease has not run out yet. Not ours to replace. */
        sg_err e;
        revoke(lease, &e);
        return sg_err_set(err, SG_EEXISTS,
                          "%s is registered by another host (or this host's last life, until "
                          "its lease ends); not registering yet", R.key);
    }
    R.lease = lease;
    R.keeper = etcd_keeper_start(R.etcd, lease, H.cfg.registry.lease_ttl, on_lost, NULL);
    sg_log_info("registry: registered %s (lease %llx, ttl %u s)", R.key,
                (unsigned long long)lease, H.cfg.registry.lease_ttl);
    return 0;
}

/* The keeper gave up on R.lease: does etcd still have it? 1 yes (its TTL
 * was renewed just now), 0 gone, -1 etcd did not answer. */
static int lease_alive(sg_err *err)
{
    Etcdserverpb__LeaseKeepAliveRequest r;
    etcdserverpb__lease_keep_alive_request__init(&r);
    r.id = R.lease;
    ProtobufCMessage *m = NULL;
    if (etcd_call_sync(R.etcd, ETCD_LEASE_KEEPALIVE, &r.base, &m, err) != 0)
        return -1;
    int alive = ((Etcdserverpb__LeaseKeepAliveResponse *)m)->ttl > 0;
    protobuf_c_message_free_unpacked(m, NULL);
    return alive;
}

/* ---- releases: a sandbox of this host ended ---- */

static void enqueue(const char *id, const char *tenant, const char *user, const char *dedupe,
                    int64_t expires_ms);

void host_registry_ended(const char *id, const char *tenant, const char *user,
                         const char *dedupe)
{
    if (!R.running || !tenant[0])
        return;   /* embedded mode, or a sandbox no one owned (pool) */
    enqueue(id, tenant, user, dedupe, 0);
}

void host_registry_extended(const char *id, const char *tenant, const char *user,
                            int64_t expires_ms)
{
    if (!R.running || !tenant[0])
        return;
    enqueue(id, tenant, user, "", expires_ms);
}

static void enqueue(const char *id, const char *tenant, const char *user, const char *dedupe,
                    int64_t expires_ms)
{
    pthread_mutex_lock(&R.mu);
    if (!expires_ms)
        snprintf(R.ended[R.n_ended++ % ENDED_RING], HOST_ID_MAX, "%s", id);
    if (R.q_len < RELEASE_MAX) {
        release *q = calloc(1, sizeof *q);
        if (q) {
            snprintf(q->id, sizeof q->id, "%s", id);
            snprintf(q->tenant, sizeof q->tenant, "%s", tenant);
            snprintf(q->user, sizeof q->user, "%s", user);
            snprintf(q->dedupe, sizeof q->dedupe, "%s", dedupe);
            q->expires_ms = expires_ms;
            if (R.q_tail)
                R.q_tail->next = q;
            else
                R.q_head = q;
            R.q_tail = q;
            R.q_len++;
        }
    }
    pthread_cond_signal(&R.cv);   /* released now, not at the next report */
    pthread_mutex_unlock(&R.mu);
}

int host_registry_was_ended(const char *id)
{
    if (!R.running)
        return 0;
    pthread_mutex_lock(&R.mu);
    int found = 0;
    size_t n = R.n_ended < ENDED_RING ? R.n_ended : ENDED_RING;
    for (size_t i = 0; i < n && !found; i++)
        found = strcmp(R.ended[i], id) == 0;
    pthread_mutex_unlock(&R.mu);
    return found;
}

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

/* One transaction: the sandbox's record and quota key go; the task's claim
 * and history go too if the history still names this sandbox (a claim and
 * its history are written together, so it is this sandbox's claim, or one
 * already gone with its lease; a later sandbox of the task is left alone). */
static int release_one(const release *q, sg_err *err)
{
    const char *pf = H.cfg.registry.prefix;
    char task[SG_REGKEY_MAX], hist[SG_REGKEY_MAX], rec[SG_REGKEY_MAX], live[SG_REGKEY_MAX];
    sg_regkey_task(pf, q->dedupe, task, sizeof task);
    sg_regkey_history(pf, q->dedupe, hist, sizeof hist);
    sg_regkey_sandbox(pf, q->id, rec, sizeof rec);
    sg_regkey_live(pf, q->tenant, q->user, q->id, live, sizeof live);
    Etcdserverpb__Compare cmp;
    etcdserverpb__compare__init(&cmp);
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
    cmp.key = bin(hist);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    cmp.value = bin(q->id);
    const char *keys[] = {rec, live, task, hist};
    Etcdserverpb__DeleteRangeRequest del[4];
    Etcdserverpb__RequestOp ops[4], *ok[4], *fail[2];
    for (int i = 0; i < 4; i++) {
        etcdserverpb__delete_range_request__init(&del[i]);
        del[i].key = bin(keys[i]);
        etcdserverpb__request_op__init(&ops[i]);
        ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        ops[i].request_delete_range = &del[i];
        ok[i] = &ops[i];
        if (i < 2)
            fail[i] = &ops[i];
    }
    Etcdserverpb__Compare *cmps[] = {&cmp};
    Etcdserverpb__TxnRequest txn;
    etcdserverpb__txn_request__init(&txn);
    txn.n_compare = 1;
    txn.compare = cmps;
    txn.n_success = q->dedupe[0] ? 4 : 2;
    txn.success = ok;
    txn.n_failure = 2;
    txn.failure = fail;
    ProtobufCMessage *m = NULL;
    if (etcd_call_sync(R.etcd, ETCD_TXN, &txn.base, &m, err) != 0)
        return -1;
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

/* A value with the new expiry, in out (cap bytes); its length, or 0 when
 * it has none to rewrite. */
typedef size_t (*rewrite_fn)(const ProtobufCBinaryData *v, int64_t expires_ms, uint8_t *out,
                             size_t cap);

/* The record (JSON): the number after "expires_at":, every other byte kept. */
static size_t rewrite_record(const ProtobufCBinaryData *v, int64_t expires_ms, uint8_t *out,
                             size_t cap)
{
    static const char field[] = "\"expires_at\":";
    const uint8_t *at = memmem(v->data, v->len, field, sizeof field - 1);
    if (!at || v->len + 24 > cap)
        return 0;
    size_t pre = (size_t)(at - v->data) + sizeof field - 1, end = pre;
    while (end < v->len && (v->data[end] == '-' || (v->data[end] >= '0' && v->data[end] <= '9')))
        end++;
    memcpy(out, v->data, pre);
    size_t n = pre + (size_t)snprintf((char *)out + pre, cap - pre, "%lld", (long long)expires_ms);
    memcpy(out + n, v->data + end, v->len - end);
    return n + v->len - end;
}

/* The listing copy in the quota key (a packed sandgate.v1.Sandbox, which
 * gateways list from): its expires_at. */
static size_t rewrite_listing(const ProtobufCBinaryData *v, int64_t expires_ms, uint8_t *out,
                              size_t cap)
{
    if (!v->len)
        return 0;   /* a key written before listings were kept: nothing to keep current */
    Sandgate__V1__Sandbox *sb = (Sandgate__V1__Sandbox *)protobuf_c_message_unpack(
        &sandgate__v1__sandbox__descriptor, NULL, v->len, v->data);
    if (!sb)
        return 0;
    sb->expires_at = expires_ms;
    size_t n = protobuf_c_message_get_packed_size(&sb->base);
    if (n <= cap)
        protobuf_c_message_pack(&sb->base, out);
    protobuf_c_message_free_unpacked(&sb->base, NULL);
    return n <= cap ? n : 0;
}

/* key's value rewritten, read-modify-write on its mod revision, keeping its
 * lease (ignore_lease). A key that is gone stays gone (the sandbox ended,
 * or its lease did). 0 when done or moot, -1 when etcd did not answer. */
static int rewrite_one(const char *key, const char *id, rewrite_fn fn, int64_t expires_ms,
                       sg_err *err)
{
    enum { VAL_MAX = 64 * 1024 };
    uint8_t *val = malloc(VAL_MAX);
    int rc = -1;
    if (!val)
        return sg_err_set(err, SG_EINTERNAL, "out of memory");
    for (int round = 0; round < 8; round++) {
        Etcdserverpb__RangeRequest get;
        etcdserverpb__range_request__init(&get);
        get.key = bin(key);
        ProtobufCMessage *m = NULL;
        if (etcd_call_sync(R.etcd, ETCD_RANGE, &get.base, &m, err) != 0)
            goto out;
        Etcdserverpb__RangeResponse *rr = (Etcdserverpb__RangeResponse *)m;
        size_t n = 0;
        int64_t mod = 0;
        int absent = rr->n_kvs == 0;
        if (!absent) {
            mod = rr->kvs[0]->mod_revision;
            n = fn(&rr->kvs[0]->value, expires_ms, val, VAL_MAX);
        }
        protobuf_c_message_free_unpacked(m, NULL);
        if (absent || !n) {
            if (!absent)
                sg_log_warn("registry: sandbox %s: %s has no expiry to rewrite; left as is", id,
                            key);
            rc = 0;
            goto out;
        }
        Etcdserverpb__Compare cmp, *cmps[] = {&cmp};
        etcdserverpb__compare__init(&cmp);
        cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
        cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
        cmp.key = bin(key);
        cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
        cmp.mod_revision = mod;
        Etcdserverpb__PutRequest put;
        etcdserverpb__put_request__init(&put);
        put.key = bin(key);
        put.value = (ProtobufCBinaryData){n, val};
        put.ignore_lease = 1;
        Etcdserverpb__RequestOp op, *ops[] = {&op};
        etcdserverpb__request_op__init(&op);
        op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op.request_put = &put;
        Etcdserverpb__TxnRequest txn;
        etcdserverpb__txn_request__init(&txn);
        txn.n_compare = 1;
        txn.compare = cmps;
        txn.n_success = 1;
        txn.success = ops;
        if (etcd_call_sync(R.etcd, ETCD_TXN, &txn.base, &m, err) != 0)
            goto out;
        int done = ((Etcdserverpb__TxnResponse *)m)->succeeded;
        protobuf_c_message_free_unpacked(m, NULL);
        if (done) {
            rc = 0;
            goto out;
        }
        /* the key changed between the read and the write: read again */
    }
    sg_log_warn("registry: sandbox %s: %s kept changing; expiry not rewritten", id, key);
    rc = 0;
out:
    free(val);
    return rc;
}

/* An Extend: the record's expiry and the listing's. */
static int extend_one(const release *q, sg_err *err)
{
    char rec[SG_REGKEY_MAX], live[SG_REGKEY_MAX];
    sg_regkey_sandbox(H.cfg.registry.prefix, q->id, rec, sizeof rec);
    sg_regkey_live(H.cfg.registry.prefix, q->tenant, q->user, q->id, live, sizeof live);
    if (rewrite_one(rec, q->id, rewrite_record, q->expires_ms, err) != 0)
        return -1;
    return rewrite_one(live, q->id, rewrite_listing, q->expires_ms, err);
}

/* Every queued release, in order, until one fails (etcd away: the rest
 * wait for the next tick). */
static void releases_run(int *logged)
{
    for (;;) {
        pthread_mutex_lock(&R.mu);
        release *q = R.q_head;
        pthread_mutex_unlock(&R.mu);
        if (!q)
            return;
        sg_err e;
        if ((q->expires_ms ? extend_one(q, &e) : release_one(q, &e)) != 0) {
            if (!*logged)
                sg_log_warn("registry: %s sandbox %s: %s (retried)",
                            q->expires_ms ? "rewriting the expiry of" : "releasing", q->id, e.msg);
            *logged = 1;
            return;
        }
        pthread_mutex_lock(&R.mu);
        R.q_head = q->next;
        if (!R.q_head)
            R.q_tail = NULL;
        R.q_len--;
        pthread_mutex_unlock(&R.mu);
        free(q);
    }
}

/* After a new lease replaced a lost one: the gateways released this host's
 * tasks when the old lease ended, so every sandbox whose record is gone is
 * an orphan (its task may live elsewhere now). Killed. */
static void reconcile(void)
{
    size_t n = 0, cap = 0, killed = 0;
    char (*ids)[HOST_ID_MAX] = NULL;
    pthread_mutex_lock(&H.mu);
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next) {
        if (sb->pooled || sb->state == SB_KILLING || !sb->tenant[0])
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            void *nb = realloc(ids, cap * sizeof *ids);
            if (!nb)
                break;
            ids = nb;
        }
        snprintf(ids[n++], HOST_ID_MAX, "%s", sb->id);
    }
    pthread_mutex_unlock(&H.mu);
    for (size_t i = 0; i < n; i++) {
        char key[SG_REGKEY_MAX], *val = NULL;
        sg_err e;
        sg_regkey_sandbox(H.cfg.registry.prefix, ids[i], key, sizeof key);
        if (etcd_get_sync(R.etcd, key, &val, NULL, &e) != 0) {
            sg_log_warn("registry: checking sandbox %s after the lease loss: %s; kept", ids[i],
                        e.msg);
            continue;
        }
        if (val) {
            free(val);
            continue;
        }
        pthread_mutex_lock(&H.mu);
        host_sandbox *sb = host_sandbox_find(ids[i]);
        if (sb && sb->state != SB_KILLING) {
            sg_log_warn("sandbox %s: its registry record ended with this host's lost lease "
                        "(its task may live on another host now); killed", ids[i]);
            host_sandbox_kill(sb, NULL);
            killed++;
        }
        pthread_mutex_unlock(&H.mu);
    }
    if (n)
        sg_log_info("registry: %zu sandbox(es) checked after the lease loss, %zu killed", n,
                    killed);
    free(ids);
}

#define DRAIN_LINE "sandgate.io/drain=\"true\""

/* Whether the drain file asks for a drain: a whole line DRAIN_LINE. Read
 * here, on this thread, never on a loop thread; a missing file is no. */
static int drain_asked(void)
{
    FILE *f = R.drain_file ? fopen(R.drain_file, "re") : NULL;
    if (!f)
        return 0;
    char line[4096];
    int yes = 0;
    while (!yes && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        yes = strcmp(line, DRAIN_LINE) == 0;
    }
    fclose(f);
    return yes;
}

void host_registry_drain_file(const char *path) { R.drain_file = path; }

static void tick(int *logged)
{
    if (!atomic_load(&R.draining) && drain_asked()) {
        atomic_store(&R.draining, 1);
        sg_log_info("draining (%s says so): gateways place no new task here; the sandboxes "
                    "here keep running", R.drain_file);
    }
    char value[4096];
    sg_err err = {0};
    int rc = 0;
    if (R.lease && R.lost) {
        int alive = lease_alive(&err);
        if (alive < 0)
            goto out;   /* etcd away: keep everything as it is, ask again next tick */
        etcd_keeper_stop(R.keeper);
        R.keeper = NULL;
        R.lost = 0;
        if (alive) {
            sg_log_info("registry: lease %llx is still alive; kept", (unsigned long long)R.lease);
            R.keeper = etcd_keeper_start(R.etcd, R.lease, H.cfg.registry.lease_ttl, on_lost,
                                         NULL);
        } else {
            sg_log_warn("registry: lease %llx ended (this host was cut off from etcd for "
                        "longer than its ttl); registering again", (unsigned long long)R.lease);
            R.lease = 0;
        }
    }
    if (R.lease) {
        rc = report(value, sizeof value, R.lease)
                 ? etcd_put_sync(R.etcd, R.key, value, strlen(value), R.lease, &err)
                 : 0;
    } else {
        rc = claim(&err);
        if (rc == 0 && R.had_lease)
            reconcile();
        if (rc == 0)
            R.had_lease = 1;
    }
out:
    if (err.code && !*logged) {
        sg_log_warn("registry: %s", err.msg);
        *logged = 1;   /* once per outage, not every REPORT_MS */
    } else if (!err.code && rc == 0) {
        *logged = 0;
    }
}

static void *registry_main(void *arg)
{
    int logged = 0, rlogged = 0;
    int64_t next_report = 0;
    pthread_mutex_lock(&R.mu);
    while (!R.stop) {
        pthread_mutex_unlock(&R.mu);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
        if (now_ms >= next_report) {
            tick(&logged);
            next_report = now_ms + REPORT_MS;
        }
        releases_run(&rlogged);
        pthread_mutex_lock(&R.mu);
        if (!R.q_head)
            rlogged = 0;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        /* a failed release is retried within a second; a new one wakes us */
        int64_t wait_ms = next_report - now_ms;
        if (R.q_head && wait_ms > 500)
            wait_ms = 500;
        if (wait_ms < 1)
            wait_ms = 1;
        ts.tv_sec += wait_ms / 1000;
        ts.tv_nsec += (wait_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (!R.stop && !R.kick && !(R.q_head && !rlogged))
            pthread_cond_timedwait(&R.cv, &R.mu, &ts);
        if (R.kick)
            next_report = 0;   /* a drain: report now */
        R.kick = 0;
    }
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

int host_registry_start(const char *listen, sg_err *err)
{
    const config_registry *cfg = &H.cfg.registry;
    if (cfg->n_endpoints == 0)
        return 0;
    snprintf(R.key, sizeof R.key, "%shosts/%s", cfg->prefix, H.cfg.name);
    snprintf(R.address, sizeof R.address, "%s", cfg->advertise ? cfg->advertise : listen);
    etcd_tls tls = {cfg->tls_ca, cfg->tls_cert, cfg->tls_key, cfg->tls_server_name};
    R.etcd = etcd_client_create((const char *const *)cfg->endpoints, cfg->n_endpoints,
                                ETCD_CALL_TIMEOUT_S, cfg->tls_ca ? &tls : NULL, err);
    if (!R.etcd)
        return -1;
    if (pthread_create(&R.thread, NULL, registry_main, NULL) != 0) {
        etcd_client_destroy(R.etcd);
        R.etcd = NULL;
        return sg_err_errno(err, SG_EINTERNAL, "registry: pthread_create");
    }
    R.running = 1;
    return 0;
}

void host_registry_drain(void)
{
    if (atomic_exchange(&R.draining, 1))
        return;
    if (!R.running) {
        sg_log_warn("draining: no registry, so no gateway hears it (static host lists "
                    "place by health alone); ignored");
        return;
    }
    sg_log_info("draining: gateways place no new task here; the sandboxes here keep running");
    pthread_mutex_lock(&R.mu);
    R.kick = 1;
    pthread_cond_signal(&R.cv);
    pthread_mutex_unlock(&R.mu);
}

void host_registry_stop(void)
{
    if (!R.running)
        return;
    pthread_mutex_lock(&R.mu);
    R.stop = 1;
    pthread_cond_signal(&R.cv);
    pthread_mutex_unlock(&R.mu);
    pthread_join(R.thread, NULL);
    if (R.lease) {
        /* Gateways stop placing here now, not a lease_ttl from now. */
        int64_t lease = R.lease;
        etcd_keeper_stop(R.keeper);
        R.keeper = NULL;
        R.lease = 0;
        sg_err e = {0};
        revoke(lease, &e);
        if (e.code)
            sg_log_warn("registry: revoking the lease: %s", e.msg);
        else
            sg_log_info("registry: lease %llx revoked; %s removed", (unsigned long long)lease,
                        R.key);
    }
    etcd_client_destroy(R.etcd);
    R.etcd = NULL;
    pthread_mutex_lock(&R.mu);
    R.running = 0;
    while (R.q_head) {
        /* an orderly stop revoked the lease: every key they name is gone */
        release *q = R.q_head;
        R.q_head = q->next;
        free(q);
    }
    R.q_tail = NULL;
    R.q_len = 0;
    pthread_mutex_unlock(&R.mu);
}
