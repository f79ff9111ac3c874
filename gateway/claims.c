/* claims.c — etcd mode: what makes many gateway replicas one service for
 * creates. Keys (common/regkeys.h):
 *
 *  - a task is claimed with a create-if-absent transaction on
 *    tasks/<sha256(dedupe key)> whose value is the sandbox id (which names
 *    its host), bound to the chosen host's lease: racing creates on any
 *    replicas get one winner, and the losers read its id and send their
 *    create to the same host with the same id and dedupe key, where the host
 *    returns the one sandbox (or waits, bounded, for it to become ready). A
 *    lost host's lease takes its claims along, so its tasks can be created
 *    again elsewhere; history/<hash> (no lease) remembers the task's last
 *    sandbox so that create says the old one was lost.
 *  - the same transaction writes the sandbox's record sandboxes/<id>
 *    (host, owner, expiry) and a quota key live/<tenant>/<user>/<id>, both
 *    under the host's lease; the host deletes all of them when the sandbox
 *    ends (host/registry.c). The quota key's value is the sandbox as
 *    ListSandboxes shows it (a packed sandgate.v1.Sandbox: template, task,
 *    times, labels, isolation), so a list is one range read of the user's
 *    keys, with no host asked (records.c).
 *  - quotas are exact: the read counts the tenant's and user's live keys at
 *    revision R, and the claim compares that no key in those ranges was
 *    written after R (mod_revision < R+1 over the range). Two replicas
 *    racing for the last slot cannot both pass: the second's compare sees
 *    the first's key and reads again. Deletions only lower the count, so
 *    they need no compare. A tenant with no live-sandbox quota has no
 *    compare and no contention.
 *
 * Every call is asynchronous with the etcd client's deadline, completing on
 * its thread: no gateway loop thread or lock waits on etcd. Calls that act
 * on an existing sandbox never come here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "common/isolation.h"
#include "common/log.h"
#include "common/regkeys.h"
#include "etcd/etcd.h"
#include "gateway/claims.h"
#include "gateway/placement.h"

#define MAX_ATTEMPTS 32

struct gw_claim {
    char task[SG_REGKEY_MAX], hist[SG_REGKEY_MAX], live_t[SG_REGKEY_MAX], live_u[SG_REGKEY_MAX];
    char rec[SG_REGKEY_MAX], live[SG_REGKEY_MAX];
    char existing[96], lost[96], ours[96];
    uint32_t n_tenant, n_user;
    int64_t rev;                /* the read's revision */
    int attempts;
    void (*read_done)(gw_req *r);
    gw_claim_done commit_done;
    void *commit_arg;
};

static ProtobufCBinaryData bin(const char *s)
{
    return (ProtobufCBinaryData){strlen(s), (uint8_t *)s};
}

static void copy_val(const ProtobufCBinaryData *v, char *out, size_t cap)
{
    size_t n = v->len < cap - 1 ? v->len : cap - 1;
    memcpy(out, v->data, n);
    out[n] = 0;
}

void gw_claim_free(gw_claim *c) { free(c); }
const char *gw_claim_existing(const gw_claim *c) { return c->existing[0] ? c->existing : NULL; }
const char *gw_claim_lost(const gw_claim *c) { return c->lost; }
int gw_claim_ours(const gw_claim *c) { return c->ours[0] != 0; }

void gw_claim_counts(const gw_claim *c, uint32_t *tenant, uint32_t *user)
{
    /* the task's own live sandbox (a retry returns it) does not count */
    int own = c->existing[0] != 0;
    *tenant = c->n_tenant > (uint32_t)own ? c->n_tenant - (uint32_t)own : 0;
    *user = c->n_user > (uint32_t)own ? c->n_user - (uint32_t)own : 0;
}

/* ---- read ---- */

static void on_read(void *arg, int code, ProtobufCMessage *m, const char *why)
{
    gw_req *r = arg;
    gw_claim *c = r->claim;
    rpc_call_log_context(r->in);
    if (code != 0) {
        gw_fail_registry(r->in, "reading the task's claim", why);
        gw_req_free(r);
        return;
    }
    Etcdserverpb__TxnResponse *t = (Etcdserverpb__TxnResponse *)m;
    c->existing[0] = c->lost[0] = 0;
    c->n_tenant = c->n_user = 0;
    c->rev = t->header ? t->header->revision : 0;
    for (size_t i = 0; i < t->n_responses && i < 4; i++) {
        const Etcdserverpb__RangeResponse *rr = t->responses[i]->response_range;
        if (!rr)
            continue;
        if (i == 0 && rr->n_kvs)
            copy_val(&rr->kvs[0]->value, c->existing, sizeof c->existing);
        else if (i == 1 && rr->n_kvs)
            copy_val(&rr->kvs[0]->value, c->lost, sizeof c->lost);
        else if (i == 2)
            c->n_tenant = (uint32_t)rr->count;
        else if (i == 3)
            c->n_user = (uint32_t)rr->count;
    }
    /* The history names the live sandbox itself while its claim lives; it
     * is lost only when the claim went without a release. */
    if (c->existing[0])
        c->lost[0] = 0;
    protobuf_c_message_free_unpacked(m, NULL);
    c->read_done(r);
}

static void start_read(gw_req *r)
{
    gw_claim *c = r->claim;
    uint8_t end_t[SG_REGKEY_MAX], end_u[SG_REGKEY_MAX];
    Etcdserverpb__RangeRequest rg[4];
    Etcdserverpb__RequestOp ops[4], *po[4];
    const char *keys[] = {c->task, c->hist, c->live_t, c->live_u};
    for (int i = 0; i < 4; i++) {
        etcdserverpb__range_request__init(&rg[i]);
        rg[i].key = bin(keys[i]);
        etcdserverpb__request_op__init(&ops[i]);
        ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
        ops[i].request_range = &rg[i];
        po[i] = &ops[i];
    }
    rg[2].range_end = (ProtobufCBinaryData){etcd_prefix_end(c->live_t, end_t, sizeof end_t), end_t};
    rg[2].count_only = 1;
    rg[3].range_end = (ProtobufCBinaryData){etcd_prefix_end(c->live_u, end_u, sizeof end_u), end_u};
    rg[3].count_only = 1;
    Etcdserverpb__TxnRequest txn;   /* no compare: every op, at one revision */
    etcdserverpb__txn_request__init(&txn);
    txn.n_success = 4;
    txn.success = po;
    sg_err e;
    if (etcd_call(gw_registry_etcd(), ETCD_TXN, &txn.base, on_read, r, &e) != 0) {
        gw_fail_registry(r->in, "reading the task's claim", e.msg);
        gw_req_free(r);
    }
}

void gw_claim_read(gw_req *r, const char *dedupe, void (*done)(gw_req *r))
{
    if (!r->claim) {
        gw_claim *c = calloc(1, sizeof *c);
        const char *pf = G.cfg.registry.prefix;
        sg_regkey_task(pf, dedupe, c->task, sizeof c->task);
        sg_regkey_history(pf, dedupe, c->hist, sizeof c->hist);
        sg_regkey_live(pf, r->id.tenant, NULL, NULL, c->live_t, sizeof c->live_t);
        sg_regkey_live(pf, r->id.tenant, r->id.user, NULL, c->live_u, sizeof c->live_u);
        r->claim = c;
    }
    r->claim->read_done = done;
    start_read(r);
}

/* ---- placement ---- */

/* The host reports the template, at an isolation at least min (a template
 * whose report names no isolation is left to the host's own check). */
static int serves(const gw_host_load *l, const char *template_name, sg_isolation min)
{
    if (l->n_templates == 0)
        return 1;   /* a report without templates: the host decides */
    for (size_t i = 0; i < l->n_templates; i++) {
        if (strcmp(l->templates[i].name, template_name) != 0)
            continue;
        sg_isolation have;
        if (!l->templates[i].isolation[0] || min == SG_ISOLATION_UNSET)
            return 1;
        return sg_isolation_parse(l->templates[i].isolation, &have) == 0 && have >= min;
    }
    return 0;
}

gw_host *gw_claim_place(const char *template_name, const char *min_isolation, sg_err *e)
{
    sg_isolation min = SG_ISOLATION_UNSET;
    if (min_isolation && min_isolation[0] && sg_isolation_parse(min_isolation, &min) != 0)
        min = SG_ISOLATION_UNSET;   /* the host refuses what it cannot honour */
    gw_place_cand cand[GW_MAX_HOSTS];
    gw_host *who[GW_MAX_HOSTS];
    size_t n = 0, registered = 0;
    for (size_t i = 0; i < G.n_hosts; i++) {
        gw_host *h = &G.hosts[i];
        gw_host_load l;
        if (!atomic_load(&h->present) || !atomic_load(&h->registered) ||
            gw_host_load_get(h, &l) != 0 || !l.lease)
            continue;
        registered++;
        if (!gw_host_serving(h) || atomic_load(&h->draining) || !serves(&l, template_name, min))
            continue;
        uint32_t ready = 0;
        for (size_t k = 0; k < l.n_templates; k++)
            if (strcmp(l.templates[k].name, template_name) == 0)
                ready = l.templates[k].pool_ready;
        cand[n] = (gw_place_cand){.capacity = l.capacity, .live = l.live,
                                  .pending = atomic_load(&h->placed),
                                  .free_memory = l.free_memory, .pool_ready = ready};
        who[n++] = h;
    }
    uint64_t rnd = 0;
    RAND_bytes((unsigned char *)&rnd, sizeof rnd);
    int best = gw_place_by_load(cand, n, rnd);
    if (best < 0) {
        sg_err_set(e, SG_EUNAVAIL, registered ? "no serving sandbox host has template %s at the isolation it needs; retry later"
                                              : "no sandbox host is registered; retry later",
                   template_name);
        return NULL;
    }
    atomic_fetch_add(&who[best]->placed, 1);
    return who[best];
}

/* ---- commit ---- */

static void on_commit(void *arg, int code, ProtobufCMessage *m, const char *why)
{
    gw_req *r = arg;
    gw_claim *c = r->claim;
    rpc_call_log_context(r->in);
    if (code != 0) {
        /* A lease that just ended (the host left between the read and the
         * claim) is NOT_FOUND from etcd: the host is gone, retry elsewhere. */
        if (code == SG_ENOTFOUND) {
            rpc_call_fail_info(r->in, GRPC_STATUS_UNAVAILABLE,
                               "the chosen sandbox host left the registry just now; retry",
                               "HOST_UNAVAILABLE", NULL, 0);
            sg_log_info("registry: claim on a lease that ended: %s", why);
        } else {
            gw_fail_registry(r->in, "claiming the task", why);
        }
        c->commit_done(r, -1, c->commit_arg);
        gw_req_free(r);
        return;
    }
    Etcdserverpb__TxnResponse *t = (Etcdserverpb__TxnResponse *)m;
    int rc;
    if (t->succeeded) {
        rc = 0;
    } else {
        char now[96] = "";
        const Etcdserverpb__RangeResponse *rr =
            t->n_responses ? t->responses[0]->response_range : NULL;
        if (rr && rr->n_kvs)
            copy_val(&rr->kvs[0]->value, now, sizeof now);
        if (now[0] && strcmp(now, c->ours) == 0)
            rc = 0;   /* our own claim: an attempt that timed out had applied */
        else if (now[0]) {
            snprintf(c->existing, sizeof c->existing, "%s", now);
            rc = 1;
        } else {
            rc = 2;
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (rc != 0)
        c->ours[0] = 0;
    if (rc == 2 && ++c->attempts >= MAX_ATTEMPTS) {
        rpc_call_fail_info(r->in, GRPC_STATUS_UNAVAILABLE,
                           "too many creates of this tenant at once to count its quota; retry",
                           "REGISTRY_UNAVAILABLE", NULL, 0);
        c->commit_done(r, -1, c->commit_arg);
        gw_req_free(r);
        return;
    }
    c->commit_done(r, rc, c->commit_arg);
}

static void set_mod_compare(Etcdserverpb__Compare *cmp, const char *key, uint8_t *end,
                            size_t cap, int64_t rev)
{
    etcdserverpb__compare__init(cmp);
    cmp->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS;
    cmp->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
    cmp->key = bin(key);
    cmp->range_end = (ProtobufCBinaryData){etcd_prefix_end(key, end, cap), end};
    cmp->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
    cmp->mod_revision = rev + 1;
}

void gw_claim_commit(gw_req *r, gw_host *h, const char *id, const char *template_name,
                     int64_t expires_ms, uint32_t max_tenant, uint32_t max_user,
                     gw_claim_done done, void *arg)
{
    gw_claim *c = r->claim;
    gw_host_load l;
    sg_err e;
    c->commit_done = done;
    c->commit_arg = arg;
    if (gw_host_load_get(h, &l) != 0 || !l.lease) {
        rpc_call_fail_info(r->in, GRPC_STATUS_UNAVAILABLE,
                           "the chosen sandbox host left the registry just now; retry",
                           "HOST_UNAVAILABLE", NULL, 0);
        done(r, -1, arg);
        gw_req_free(r);
        return;
    }
    const char *pf = G.cfg.registry.prefix;
    const Sandgate__V1__CreateSandboxRequest *req = (const Sandgate__V1__CreateSandboxRequest *)r->msg;
    snprintf(c->ours, sizeof c->ours, "%s", id);
    sg_regkey_sandbox(pf, id, c->rec, sizeof c->rec);
    sg_regkey_live(pf, r->id.tenant, r->id.user, id, c->live, sizeof c->live);
    /* The listing copy (records.c reads it back): what the host will
     * report, known here: labels as given, isolation as the host's report
     * says it runs the template. */
    Sandgate__V1__Sandbox lsb;
    sandgate__v1__sandbox__init(&lsb);
    lsb.sandbox_id = (char *)id;
    lsb.template_ = (char *)template_name;
    lsb.user_id = r->id.user;
    lsb.task_id = req->task_id;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    lsb.created_at = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    lsb.expires_at = expires_ms;
    lsb.state = SANDGATE__V1__SANDBOX_STATE__SANDBOX_STATE_RUNNING;
    for (size_t i = 0; i < l.n_templates; i++)
        if (strcmp(l.templates[i].name, template_name) == 0 && l.templates[i].isolation[0])
            lsb.isolation = l.templates[i].isolation;
    Sandgate__V1__Sandbox__MetadataEntry *mde = calloc(req->n_metadata + 1, sizeof *mde);
    Sandgate__V1__Sandbox__MetadataEntry **mdp = calloc(req->n_metadata + 1, sizeof *mdp);
    for (size_t i = 0; i < req->n_metadata; i++) {
        sandgate__v1__sandbox__metadata_entry__init(&mde[i]);
        mde[i].key = req->metadata[i]->key;
        mde[i].value = req->metadata[i]->value;
        mdp[i] = &mde[i];
    }
    lsb.n_metadata = req->n_metadata;
    lsb.metadata = mdp;
    size_t llen = protobuf_c_message_get_packed_size(&lsb.base);
    uint8_t *lval = malloc(llen + 1);
    protobuf_c_message_pack(&lsb.base, lval);
    free(mdp);
    free(mde);

    char record[1400], et[300], eu[300], ek[300];
    sg_json_escape(r->id.tenant, et, sizeof et);
    sg_json_escape(r->id.user, eu, sizeof eu);
    sg_json_escape(req->task_id, ek, sizeof ek);
    snprintf(record, sizeof record,
             "{\"sandbox_id\":\"%s\",\"host\":\"%s\",\"tenant\":\"%s\",\"user\":\"%s\","
             "\"task\":\"%s\",\"template\":\"%s\",\"expires_at\":%lld}",
             id, h->name, et, eu, ek, template_name, (long long)expires_ms);

    Etcdserverpb__Compare cmp[3], *pc[3];
    size_t nc = 0;
    uint8_t end_t[SG_REGKEY_MAX], end_u[SG_REGKEY_MAX];
    etcdserverpb__compare__init(&cmp[nc]);
    cmp[nc].result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp[nc].target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp[nc].key = bin(c->task);
    cmp[nc].target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp[nc].create_revision = 0;
    nc++;
    if (max_tenant)
        set_mod_compare(&cmp[nc++], c->live_t, end_t, sizeof end_t, c->rev);
    if (max_user)
        set_mod_compare(&cmp[nc++], c->live_u, end_u, sizeof end_u, c->rev);
    for (size_t i = 0; i < nc; i++)
        pc[i] = &cmp[i];

    const char *keys[] = {c->task, c->hist, c->rec, c->live};
    const char *vals[] = {id, id, record, ""};
    int64_t leases[] = {l.lease, 0, l.lease, l.lease};
    Etcdserverpb__PutRequest put[4];
    Etcdserverpb__RequestOp ops[4], *po[4];
    for (int i = 0; i < 4; i++) {
        etcdserverpb__put_request__init(&put[i]);
        put[i].key = bin(keys[i]);
        put[i].value = i == 3 ? (ProtobufCBinaryData){llen, lval} : bin(vals[i]);
        put[i].lease = leases[i];
        etcdserverpb__request_op__init(&ops[i]);
        ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        ops[i].request_put = &put[i];
        po[i] = &ops[i];
    }
    Etcdserverpb__RangeRequest get;
    etcdserverpb__range_request__init(&get);
    get.key = bin(c->task);
    Etcdserverpb__RequestOp fail_op, *pf_op[] = {&fail_op};
    etcdserverpb__request_op__init(&fail_op);
    fail_op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
    fail_op.request_range = &get;
    Etcdserverpb__TxnRequest txn;
    etcdserverpb__txn_request__init(&txn);
    txn.n_compare = nc;
    txn.compare = pc;
    txn.n_success = 4;
    txn.success = po;
    txn.n_failure = 1;
    txn.failure = pf_op;
    int rc = etcd_call(gw_registry_etcd(), ETCD_TXN, &txn.base, on_commit, r, &e);
    free(lval);   /* packed into the call's bytes */
    if (rc != 0) {
        c->ours[0] = 0;
        gw_fail_registry(r->in, "claiming the task", e.msg);
        done(r, -1, arg);
        gw_req_free(r);
    }
}

/* ---- rollback ---- */

static void on_rollback(void *arg, int code, ProtobufCMessage *m, const char *why)
{
    char *id = arg;
    if (code != 0)
        sg_log_warn("registry: releasing the claim of failed create %s: %s (its host's lease "
                    "or the host's own release ends it)", id, why);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    free(id);
}

void gw_claim_rollback(gw_req *r)
{
    gw_claim *c = r->claim;
    if (!c || !c->ours[0])
        return;
    /* Only while the claim still names this create's sandbox. */
    Etcdserverpb__Compare cmp, *pc[] = {&cmp};
    etcdserverpb__compare__init(&cmp);
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
    cmp.key = bin(c->task);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
    cmp.value = bin(c->ours);
    /* the history goes too: it names this sandbox, which never lived */
    const char *keys[] = {c->task, c->rec, c->live, c->hist};
    Etcdserverpb__DeleteRangeRequest del[4];
    Etcdserverpb__RequestOp ops[4], *ho[4];
    for (int i = 0; i < 4; i++) {
        etcdserverpb__delete_range_request__init(&del[i]);
        del[i].key = bin(keys[i]);
        etcdserverpb__request_op__init(&ops[i]);
        ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        ops[i].request_delete_range = &del[i];
        ho[i] = &ops[i];
    }
    Etcdserverpb__TxnRequest txn;
    etcdserverpb__txn_request__init(&txn);
    txn.n_compare = 1;
    txn.compare = pc;
    txn.n_success = 4;
    txn.success = ho;
    sg_err e;
    char *id = strdup(c->ours);
    c->ours[0] = 0;
    if (etcd_call(gw_registry_etcd(), ETCD_TXN, &txn.base, on_rollback, id, &e) != 0)
        on_rollback(id, -1, NULL, e.msg);
}
