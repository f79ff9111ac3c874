/* service.c — sandbox lifecycle on the public API (sandgate.v1.Sandboxes):
 * CreateSandbox (policy decision, limits, secrets, egress grants, host
 * choice, per-task dedupe), GetSandbox, ListSandboxes (every serving host,
 * the caller's own only, naming the hosts it could not ask), KillSandbox,
 * ExtendSandbox. Calls that act inside a sandbox are in actions.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "gateway/claims.h"
#include "gateway/page_token.h"
#include "gateway/request.h"
#include "gateway/rules.h"
#include "policy/query.h"
#include "policy/secret.h"
#include "rpc/health.h"

#define MAX_EGRESS_RULES 256
#define MAX_SECRETS 32
#define SECRET_MAX 8192

/* HostSandbox -> public Sandbox (and remember its owner). */
static grpc_byte_buffer *to_public_sandbox(void *arg, grpc_byte_buffer *bb)
{
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    Sandgate__V1__HostSandbox *hs = (Sandgate__V1__HostSandbox *)rpc_unpack(
        &sandgate__v1__host_sandbox__descriptor, buf, len, NULL);
    free(buf);
    if (!hs || !hs->sandbox) {
        if (hs)
            protobuf_c_message_free_unpacked(&hs->base, NULL);
        return NULL;
    }
    if (hs->owner)
        tenancy_owner_put(hs->sandbox->sandbox_id, hs->owner->tenant_id, hs->owner->user_id,
                          hs->owner->task_id);
    gw_req *r = arg;
    if (hs->owner && !hs->reused && r->host && !r->claim)
        gw_counts_add((size_t)(r->host - G.hosts), r->id.tenant, hs->owner);
    /* etcd mode: the task's last sandbox went with its host */
    char *keep = hs->sandbox->lost_sandbox_id;
    const char *lost = r->claim ? gw_claim_lost(r->claim) : "";
    if (lost[0] && strcmp(lost, hs->sandbox->sandbox_id) != 0)
        hs->sandbox->lost_sandbox_id = (char *)lost;
    grpc_byte_buffer *out = rpc_pack(&hs->sandbox->base);
    hs->sandbox->lost_sandbox_id = keep;   /* borrowed: not for free_unpacked */
    protobuf_c_message_free_unpacked(&hs->base, NULL);
    return out;
}

/* HostSandbox -> public Sandbox by lifting field `sandbox` out of the wire
 * bytes: Get and Extend do not change the owner (the call was just proven
 * to come from it), so there is nothing to decode. */
static grpc_byte_buffer *host_sandbox_unwrap(void *arg, grpc_byte_buffer *bb)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
        &sandgate__v1__host_sandbox__descriptor, "sandbox");
    return rpc_wire_submessage(bb, f->id);
}

/* ---- CreateSandbox ---- */

typedef struct create_parts {
    Sandgate__V1__HostCreateRequest hreq;
    Sandgate__V1__Owner owner;
    Sandgate__V1__Limits limits;
    Sandgate__V1__EgressRule rules[MAX_EGRESS_RULES], *rule_ptrs[MAX_EGRESS_RULES];
    Sandgate__V1__Secret secrets[MAX_SECRETS], *secret_ptrs[MAX_SECRETS];
    char values[MAX_SECRETS][SECRET_MAX];
    char id[96], dedupe[400];
    policy_limits lim;          /* the limits decided for this create */
    gw_host *host;              /* etcd mode: the host placed on, before the claim */
} create_parts;

static void wipe_parts(create_parts *p)
{
    explicit_bzero(p->values, sizeof p->values);
    free(p);
}

static int decide_create(gw_req *r, const Sandgate__V1__CreateSandboxRequest *req,
                         uint32_t live_tenant, uint32_t live_user, policy_scope *scope)
{
    policy_egress_ask eg[64];
    size_t ne = req->n_egress < 64 ? req->n_egress : 64;
    for (size_t i = 0; i < ne; i++)
        eg[i] = (policy_egress_ask){req->egress[i]->host, req->egress[i]->port};
    policy_create_ask ask = {.tenant = r->id.tenant, .user = r->id.user, .task = req->task_id,
                             .template_name = req->template_, .egress = eg, .n_egress = ne,
                             .secrets = (const char *const *)req->secrets,
                             .n_secrets = req->n_secrets,
                             .live_sandboxes_tenant = live_tenant,
                             .live_sandboxes_user = live_user};
    policy_decision d;
    policy_decide_create(r->pol, &ask, scope, &d);
    gw_audit(r->pol, r->id.tenant, r->id.user, req->task_id, NULL, "create", d.allow, d.rule,
             d.message);
    if (d.allow)
        return 0;
    char asked[256];
    snprintf(asked, sizeof asked, "template=%s egress=%zu secrets=%zu", req->template_,
             req->n_egress, req->n_secrets);
    int code = d.err ? d.err : SG_EDENIED;
    if (code == SG_ENOTFOUND || code == SG_EUNAUTH)
        code = SG_EDENIED;
    gw_fail_policy(r->in, code, code == SG_EQUOTA ? "QUOTA_EXCEEDED" : "POLICY_DENIED", d.rule,
                   d.message, asked);
    return -1;
}

/* Granted secrets: resolve values now, at create, and only these. */
static int add_secrets(gw_req *r, const Sandgate__V1__CreateSandboxRequest *req, create_parts *p)
{
    policy_secret_grant grants[MAX_SECRETS];
    size_t n = 0;
    policy_decision d;
    if (req->n_secrets == 0)
        return 0;
    if (req->n_secrets > MAX_SECRETS) {
        sg_err e;
        sg_err_set(&e, SG_EINVAL, "at most %d secrets per sandbox", MAX_SECRETS);
        gw_req_fail(r, &e);
        return -1;
    }
    policy_decide_credentials(r->pol, r->id.tenant, req->template_, req->task_id,
                              (const char *const *)req->secrets, req->n_secrets, grants, &n, &d);
    if (!d.allow) {
        gw_fail_policy(r->in, SG_EDENIED, "POLICY_DENIED", d.rule, d.message, "secrets");
        gw_req_free(r);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        size_t len;
        sg_err e;
        if (policy_secret_value(&grants[i], p->values[i], SECRET_MAX, &len, &e) != 0) {
            /* The log names the secret and its source (a path or variable),
             * the caller only the secret; never a value. */
            sg_log_warn("create: %s", e.msg);
            sg_err_set(&e, SG_EUNAVAIL, "secret %s cannot be read by the gateway", grants[i].name);
            gw_req_fail(r, &e);
            return -1;
        }
        sandgate__v1__secret__init(&p->secrets[i]);
        p->secrets[i].name = (char *)grants[i].name;
        p->secrets[i].env = (char *)grants[i].env;
        p->secrets[i].value.data = (uint8_t *)p->values[i];
        p->secrets[i].value.len = len;
        p->secret_ptrs[i] = &p->secrets[i];
    }
    p->hreq.n_secrets = n;
    p->hreq.secrets = p->secret_ptrs;
    return 0;
}

static void add_egress(gw_req *r, const Sandgate__V1__CreateSandboxRequest *req, create_parts *p)
{
    policy_egress_rule rules[MAX_EGRESS_RULES];
    if (req->n_egress == 0)
        return;   /* no ask, no grant: network stays off */
    size_t n = policy_egress_rules(r->pol, r->id.tenant, req->template_, req->task_id, rules,
                                   MAX_EGRESS_RULES);
    for (size_t i = 0; i < n; i++) {
        sandgate__v1__egress_rule__init(&p->rules[i]);
        p->rules[i].id = (char *)rules[i].id;
        p->rules[i].host = (char *)(rules[i].host ? rules[i].host : "");
        p->rules[i].cidr = (char *)(rules[i].cidr ? rules[i].cidr : "");
        p->rules[i].n_ports = rules[i].n_ports;
        p->rules[i].ports = (uint32_t *)rules[i].ports;
        p->rule_ptrs[i] = &p->rules[i];
    }
    p->hreq.n_egress = n;
    p->hreq.egress = p->rule_ptrs;
}

/* Live sandboxes of the tenant and of this user on one host; the one this
 * create would return (same task, or same user when per_user) does not
 * count, so a retry is never refused by the quota. *holds says the host has
 * that one. */
static void count_live(gw_req *r, Sandgate__V1__HostListResponse *part, uint32_t *tenant,
                       uint32_t *user, int *holds)
{
    const Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    int per_user = policy_tenant_scope(r->pol, r->id.tenant) == POLICY_SCOPE_PER_USER;
    *tenant = *user = 0;
    *holds = 0;
    for (size_t k = 0; part && k < part->n_sandboxes; k++) {
        const Sandgate__V1__Owner *o = part->sandboxes[k]->owner;
        if (!o)
            continue;
        int same_user = strcmp(o->user_id, r->id.user) == 0;
        if (same_user && (per_user || strcmp(o->task_id, req->task_id) == 0)) {
            *holds = 1;
            continue;
        }
        (*tenant)++;
        *user += same_user;
    }
}

/* Where the create goes. The host that already holds this key's sandbox, if
 * the count saw one: it dedupes and returns it, so a task keeps its sandbox
 * even after placement changed under it (its winning host flapped, a host
 * was added). If that host is not SERVING the create fails UNAVAILABLE
 * rather than start a second sandbox for the task elsewhere. Otherwise the
 * highest-scoring serving host for the key (router.c), passing over hosts
 * that did not answer the count just now (silent[]): a host that was just
 * killed refuses connections before the health check has noticed. */
static gw_host *create_host(gw_req *r, int holder, const char *dedupe, const int *silent,
                            sg_err *e)
{
    const Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    if (holder >= 0) {
        if (gw_host_serving(&G.hosts[holder]))
            return &G.hosts[holder];
        sg_err_set(e, SG_EUNAVAIL, "the live sandbox of task %s is on sandbox host %s, which is "
                   "not serving; retry later", req->task_id, G.hosts[holder].name);
        return NULL;
    }
    gw_host *h = gw_host_for_key(dedupe, silent);
    if (!h)
        sg_err_set(e, SG_EUNAVAIL, G.n_hosts ? "no sandbox host is serving; retry later"
                                             : "no sandbox hosts configured");
    return h;
}

/* The host request's owner, limits and ids, once p->id is chosen. */
static void fill_host_request(gw_req *r, Sandgate__V1__CreateSandboxRequest *req, create_parts *p,
                              const policy_limits *limp)
{
    policy_limits lim = *limp;
    sandgate__v1__owner__init(&p->owner);
    p->owner.tenant_id = r->id.tenant;
    p->owner.user_id = r->id.user;
    p->owner.task_id = req->task_id;
    sandgate__v1__limits__init(&p->limits);
    p->limits.memory_bytes = lim.memory_bytes;
    p->limits.cpu_millis = lim.cpu_millis;
    p->limits.pids = lim.pids;
    p->limits.disk_bytes = lim.disk_bytes;
    p->limits.idle_timeout_seconds = lim.idle_timeout_s;
    p->limits.max_file_bytes = lim.file_bytes;
    p->limits.max_processes = lim.processes;
    req->ttl_seconds = lim.ttl_s;
    p->hreq.request = req;
    p->hreq.owner = &p->owner;
    p->hreq.limits = &p->limits;
    p->hreq.sandbox_id = p->id;
    p->hreq.dedupe_key = p->dedupe;
    p->hreq.egress_byte_cap = lim.egress_bytes;
    /* The policy allowed the template's isolation for this tenant; the host
     * checks its own template against it (and against the tenant's minimum,
     * should the two ever disagree). */
    sg_isolation iso = policy_template_isolation(r->pol, req->template_),
                 min = policy_tenant_isolation(r->pol, r->id.tenant);
    p->hreq.min_isolation = (char *)sg_isolation_name(iso > min ? iso : min);
}

/* While a host is down every create would say so: once a second is enough. */
static _Atomic int64_t count_log_at;

static int log_once_per_second(_Atomic int64_t *last)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = ts.tv_sec, prev = atomic_load(last);
    return now != prev && atomic_compare_exchange_strong(last, &prev, now);
}

static void create_counted(gw_req *r, Sandgate__V1__HostListResponse **parts, size_t n_parts,
                           int failed)
{
    Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    sg_err e;
    /* per host, so the chosen host can add the others' to its own count */
    uint32_t live_tenant = 0, live_user = 0, host_tenant[GW_MAX_HOSTS] = {0},
             host_user[GW_MAX_HOSTS] = {0};
    int holder = -1, holder_fresh = 0, silent[GW_MAX_HOSTS] = {0};
    size_t n_cached = 0;
    for (size_t i = 0; i < n_parts && i < GW_MAX_HOSTS; i++) {
        /* A host that did not answer counts what it said last (counts.c). */
        Sandgate__V1__HostListResponse *part = parts[i], *cached = NULL;
        silent[i] = !part;
        if (part)
            gw_counts_put(i, r->id.tenant, part);
        else if ((part = cached = gw_counts_get(i, r->id.tenant)))
            n_cached++;
        int holds;
        count_live(r, part, &host_tenant[i], &host_user[i], &holds);
        /* Two holders can only be a stale cached one and a fresh one. */
        if (holds && (holder < 0 || (!holder_fresh && parts[i]))) {
            holder = (int)i;
            holder_fresh = parts[i] != NULL;
        }
        live_tenant += host_tenant[i];
        live_user += host_user[i];
        if (cached)
            protobuf_c_message_free_unpacked(&cached->base, NULL);
    }
    if (failed && log_once_per_second(&count_log_at))
        sg_log_warn("create: %d host(s) not serving or did not answer the quota "
            "count; %zu counted from their last answer (logged at most once a "
            "second)", failed, n_cached);
    policy_scope scope = POLICY_SCOPE_PER_TASK;
    if (decide_create(r, req, live_tenant, live_user, &scope) != 0) {
        gw_req_free(r);
        return;
    }
    policy_limits asked = {.ttl_s = req->ttl_seconds}, lim;
    policy_decision d;
    policy_decide_limits(r->pol, r->id.tenant, &asked, &lim, &d);
    create_parts *p = calloc(1, sizeof *p);
    sandgate__v1__host_create_request__init(&p->hreq);
    if (add_secrets(r, req, p) != 0) {
        wipe_parts(p);
        return;
    }
    add_egress(r, req, p);
    tenancy_dedupe_key(scope, r->id.tenant, r->id.user, req->task_id, p->dedupe, sizeof p->dedupe);
    r->host = create_host(r, holder, p->dedupe, silent, &e);
    if (!r->host && e.code == SG_EUNAVAIL) {
        /* No serving host for this create: an agent's retry can succeed. */
        rpc_call_fail_info(r->in, GRPC_STATUS_UNAVAILABLE, e.msg, "HOST_UNAVAILABLE", NULL, 0);
        gw_req_free(r);
        wipe_parts(p);
        return;
    }
    if (!r->host || tenancy_new_sandbox_id(r->host->name, p->id, sizeof p->id, &e) != 0) {
        gw_req_fail(r, &e);
        wipe_parts(p);
        return;
    }
    fill_host_request(r, req, p, &lim);
    size_t hi = (size_t)(r->host - G.hosts);
    policy_limits tl;
    if (policy_tenant_limits(r->pol, r->id.tenant, &tl) == 0) {
        p->hreq.max_sandboxes_tenant = tl.max_sandboxes_tenant;
        p->hreq.max_sandboxes_user = tl.max_sandboxes_user;
    }
    p->hreq.live_elsewhere_tenant = live_tenant - host_tenant[hi];
    p->hreq.live_elsewhere_user = live_user - host_user[hi];
    p->hreq.egress_byte_cap = lim.egress_bytes;
    gw_req_forward(r, "/sandgate.v1.Host/CreateSandbox", &p->hreq.base, to_public_sandbox, 60);
    wipe_parts(p);
}

/* ---- CreateSandbox, etcd mode (claims.c): the task is claimed in etcd
 * before the host is asked, so every replica agrees on its one sandbox and
 * the live-sandbox quotas are exact; the host's own quota check is off
 * (the claim already counted), its dedupe still joins racing creates. */

static void etcd_counted(gw_req *r);

static void on_etcd_create_done(void *arg, grpc_status_code code)
{
    gw_req *r = arg;
    if (code != GRPC_STATUS_OK)
        gw_claim_rollback(r);   /* a no-op unless this create made the claim */
    gw_req_free(r);
}

static void etcd_forward(gw_req *r, create_parts *p)
{
    Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    fill_host_request(r, req, p, &p->lim);
    gw_fwd_opts o = {.rewrite = to_public_sandbox, .on_done = on_etcd_create_done, .arg = r,
                     .timeout_s = 60, .sandbox_id = NULL};
    gw_forward(r->in, r->host, "/sandgate.v1.Host/CreateSandbox", &p->hreq.base, &o);
    wipe_parts(p);
}

/* Someone holds the task's claim: send this create to its host, with its
 * id and dedupe key; the host answers with that sandbox (waiting for it to
 * be ready if it is still starting, or starting it if this create got
 * there first). */
static void etcd_join(gw_req *r, create_parts *p, const char *id)
{
    const Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    char host[64];
    gw_host *h = tenancy_sandbox_host(id, host, sizeof host) == 0 ? gw_host_by_name(host) : NULL;
    if (!h || !atomic_load(&h->registered) || !gw_host_serving(h)) {
        char msg[256];
        snprintf(msg, sizeof msg, "the live sandbox of task %s is on a sandbox host that is not "
                 "serving; retry later", req->task_id);
        rpc_call_fail_info(r->in, GRPC_STATUS_UNAVAILABLE, msg, "HOST_UNAVAILABLE", NULL, 0);
        gw_req_free(r);
        wipe_parts(p);
        return;
    }
    r->host = h;
    snprintf(p->id, sizeof p->id, "%s", id);
    etcd_forward(r, p);
}

static void on_etcd_committed(gw_req *r, int rc, void *arg)
{
    create_parts *p = arg;
    if (rc < 0) {            /* answered; claims.c frees r */
        wipe_parts(p);
        return;
    }
    if (rc == 0) {
        r->host = p->host;
        etcd_forward(r, p);
    } else if (rc == 1) {
        etcd_join(r, p, gw_claim_existing(r->claim));
    } else {
        /* the counts moved under us: read and decide again */
        char dedupe[400];
        snprintf(dedupe, sizeof dedupe, "%s", p->dedupe);
        wipe_parts(p);
        gw_claim_read(r, dedupe, etcd_counted);
    }
}

static void etcd_counted(gw_req *r)
{
    Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    sg_err e;
    uint32_t live_tenant, live_user;
    gw_claim_counts(r->claim, &live_tenant, &live_user);
    policy_scope scope = POLICY_SCOPE_PER_TASK;
    if (decide_create(r, req, live_tenant, live_user, &scope) != 0) {
        gw_req_free(r);
        return;
    }
    create_parts *p = calloc(1, sizeof *p);
    policy_limits asked = {.ttl_s = req->ttl_seconds};
    policy_decision d;
    policy_decide_limits(r->pol, r->id.tenant, &asked, &p->lim, &d);
    sandgate__v1__host_create_request__init(&p->hreq);
    if (add_secrets(r, req, p) != 0) {
        wipe_parts(p);
        return;
    }
    add_egress(r, req, p);
    p->hreq.egress_byte_cap = p->lim.egress_bytes;
    tenancy_dedupe_key(scope, r->id.tenant, r->id.user, req->task_id, p->dedupe, sizeof p->dedupe);
    const char *existing = gw_claim_existing(r->claim);
    if (existing) {
        etcd_join(r, p, existing);
        return;
    }
    sg_isolation iso = policy_template_isolation(r->pol, req->template_),
                 min = policy_tenant_isolation(r->pol, r->id.tenant);
    p->host = gw_claim_place(req->template_, sg_isolation_name(iso > min ? iso : min), &e);
    if (!p->host) {
        rpc_call_fail_info(r->in, GRPC_STATUS_UNAVAILABLE, e.msg, "HOST_UNAVAILABLE", NULL, 0);
        gw_req_free(r);
        wipe_parts(p);
        return;
    }
    if (tenancy_new_sandbox_id(p->host->name, p->id, sizeof p->id, &e) != 0) {
        gw_req_fail(r, &e);
        wipe_parts(p);
        return;
    }
    policy_limits tl = {0};
    policy_tenant_limits(r->pol, r->id.tenant, &tl);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t expires = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (int64_t)p->lim.ttl_s * 1000;
    gw_claim_commit(r, p->host, p->id, req->template_, expires, tl.max_sandboxes_tenant,
                    tl.max_sandboxes_user, on_etcd_committed, p);
}

static void create_etcd(gw_req *r)
{
    const Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    char dedupe[400];
    tenancy_dedupe_key(policy_tenant_scope(r->pol, r->id.tenant), r->id.tenant, r->id.user,
                       req->task_id, dedupe, sizeof dedupe);
    gw_claim_read(r, dedupe, etcd_counted);
}

static void on_create(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__create_sandbox_request__descriptor, "create");
    if (!r)
        return;
    Sandgate__V1__CreateSandboxRequest *req = (Sandgate__V1__CreateSandboxRequest *)r->msg;
    sg_err e;
    if (tenancy_check_name("task_id", req->task_id, 1, &e) != 0 ||
        tenancy_check_name("template", req->template_, 1, &e) != 0) {
        gw_req_fail(r, &e);
        return;
    }
    policy_limits lim;
    if (policy_tenant_limits(r->pol, r->id.tenant, &lim) == 0 &&
        (gw_check_env(req, lim.env_bytes, lim.env_entries, &e) != 0 ||
         gw_check_metadata(req, lim.metadata_bytes, lim.metadata_entries, &e) != 0)) {
        gw_req_fail(r, &e);
        return;
    }
    if (r->has_token && strcmp(r->token.task, req->task_id) != 0) {
        sg_err_set(&e, SG_EDENIED, "the user token is for another task");
        gw_req_fail(r, &e);
        return;
    }
    if (G.cfg.registry.n_endpoints)
        create_etcd(r);
    else
        gw_list_all(r, NULL, create_counted);
}

/* ---- Get / Kill / Extend ---- */

static void get_owned(gw_req *r)
{
    Sandgate__V1__HostSandboxRef ref;
    sandgate__v1__host_sandbox_ref__init(&ref);
    ref.sandbox_id = (char *)r->sandbox_id;
    gw_req_forward(r, "/sandgate.v1.Host/GetSandbox", &ref.base, host_sandbox_unwrap, 10);
}

static void on_get(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__get_sandbox_request__descriptor, "get");
    if (r)
        gw_req_with_owner(r, get_owned);
}

static void kill_owned(gw_req *r)
{
    Sandgate__V1__HostSandboxRef ref;
    sandgate__v1__host_sandbox_ref__init(&ref);
    ref.sandbox_id = (char *)r->sandbox_id;
    gw_req_forward(r, "/sandgate.v1.Host/KillSandbox", &ref.base, NULL, 30);
}

static void on_kill(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__kill_sandbox_request__descriptor, "kill");
    if (r)
        gw_req_with_owner(r, kill_owned);
}

static void extend_owned(gw_req *r)
{
    Sandgate__V1__ExtendSandboxRequest *req = (Sandgate__V1__ExtendSandboxRequest *)r->msg;
    policy_limits asked = {.ttl_s = req->ttl_seconds}, lim;
    policy_decision d;
    policy_decide_limits(r->pol, r->id.tenant, &asked, &lim, &d);
    gw_audit(r->pol, r->id.tenant, r->id.user, NULL, r->sandbox_id, "extend", 1, d.rule,
             d.message);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    Sandgate__V1__HostExtendRequest h;
    sandgate__v1__host_extend_request__init(&h);
    h.sandbox_id = (char *)r->sandbox_id;
    h.expires_at = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + (int64_t)lim.ttl_s * 1000;
    gw_req_forward(r, "/sandgate.v1.Host/ExtendSandbox", &h.base, host_sandbox_unwrap, 10);
}

static void on_extend(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__extend_sandbox_request__descriptor, "extend");
    if (r)
        gw_req_with_owner(r, extend_owned);
}

/* ---- List: every serving host, the caller's own sandboxes only; hosts
 * that could not be asked are named in unreachable_hosts ---- */

#define LIST_PAGE_DEFAULT 100
static int cmp_sandbox(const void *a, const void *b)
{
    return strcmp((*(Sandgate__V1__Sandbox *const *)a)->sandbox_id,
                  (*(Sandgate__V1__Sandbox *const *)b)->sandbox_id);
}

/* A page of items (sorted by id, at most a page and one) as the answer. */
static void list_send(gw_req *r, Sandgate__V1__Sandbox **items, size_t n, int more,
                      char **unreachable, size_t n_unreachable)
{
    const Sandgate__V1__ListSandboxesRequest *lreq = (const void *)r->msg;
    uint32_t page = lreq->page_size ? lreq->page_size : LIST_PAGE_DEFAULT;
    if (n > page) {
        n = page;
        more = 1;
    }
    char next[256] = "";
    if (more && n > 0)
        gw_page_token_make(items[n - 1]->sandbox_id, next, sizeof next);
    Sandgate__V1__ListSandboxesResponse out;
    sandgate__v1__list_sandboxes_response__init(&out);
    out.n_sandboxes = n;
    out.sandboxes = items;
    out.n_unreachable_hosts = n_unreachable;
    out.unreachable_hosts = unreachable;
    out.next_page_token = next;
    rpc_call_reply(r->in, &out.base);
}

static void list_reply(gw_req *r, Sandgate__V1__HostListResponse **parts, size_t n_parts,
                       int failed)
{
    int more = 0;
    size_t total = 0;
    for (size_t i = 0; i < n_parts; i++)
        if (parts[i])
            total += parts[i]->n_sandboxes;
    Sandgate__V1__Sandbox **items = calloc(total + 1, sizeof *items);
    size_t n = 0;
    for (size_t i = 0; i < n_parts; i++)
        for (size_t k = 0; parts[i] && k < parts[i]->n_sandboxes; k++) {
            Sandgate__V1__HostSandbox *hs = parts[i]->sandboxes[k];
            /* The host filtered by tenant and user; check again anyway. */
            if (hs->sandbox && hs->owner && strcmp(hs->owner->tenant_id, r->id.tenant) == 0 &&
                strcmp(hs->owner->user_id, r->id.user) == 0)
                items[n++] = hs->sandbox;
            more |= parts[i]->more;
        }
    /* Merge the hosts' pages: by id, the first page_size of them. */
    qsort(items, n, sizeof *items, cmp_sandbox);
    /* A host that is down is named, so the caller knows the answer is partial. */
    char *unreachable[GW_MAX_HOSTS];
    size_t n_unreachable = 0, n_present = 0;
    for (size_t i = 0; i < n_parts && i < GW_MAX_HOSTS; i++) {
        if (!atomic_load(&G.hosts[i].present))
            continue;   /* an empty registry slot */
        n_present++;
        if (!parts[i])
            unreachable[n_unreachable++] = G.hosts[i].name;
    }
    if (n_present > 0 && n_unreachable == n_present)
        gw_fail_host_unavailable(r->in);
    else
        list_send(r, items, n, more, unreachable, n_unreachable);
    free(items);
    gw_req_free(r);
}

/* The host-side request of a list (filter, cursor, limit): what both the
 * registry read and the fan-out take. after: the cursor's id (storage). */
static void list_query(const Sandgate__V1__ListSandboxesRequest *req, char *after,
                       Sandgate__V1__HostListRequest *q)
{
    sandgate__v1__host_list_request__init(q);
    q->n_metadata = req->n_metadata;
    q->metadata = (Sandgate__V1__HostListRequest__MetadataEntry **)req->metadata;
    q->after_id = after;
    /* One more than a page: whether there is a next page. */
    q->limit = (req->page_size ? req->page_size : LIST_PAGE_DEFAULT) + 1;
}

/* etcd mode: the registry answered (the listing copies, records.c), or
 * could not: then every host is asked, as in the embedded mode. */
static void list_from_records(gw_req *r, Sandgate__V1__Sandbox **items, size_t n, int more)
{
    if (more < 0) {
        const Sandgate__V1__ListSandboxesRequest *req = (const void *)r->msg;
        char after[96] = "";
        if (req->page_token[0])
            gw_page_token_parse(req->page_token, after, sizeof after);   /* checked before */
        Sandgate__V1__HostListRequest q;
        list_query(req, after, &q);
        gw_list_all_q(r, r->id.user, &q, list_reply);
        return;
    }
    list_send(r, items, n, more, NULL, 0);
    gw_req_free(r);
}

static void on_list(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__list_sandboxes_request__descriptor, "list");
    if (!r)
        return;
    const Sandgate__V1__ListSandboxesRequest *req = (const void *)r->msg;
    sg_err e;
    char after[96] = "";
    int bad = gw_check_ranges(r->msg, &e) != 0;
    if (!bad && req->page_token[0] &&
        gw_page_token_parse(req->page_token, after, sizeof after) != 0) {
        sg_err_set(&e, SG_EINVAL, "page_token: not a token this API issued");
        bad = 1;
    }
    if (bad) {
        gw_req_fail(r, &e);
        return;
    }
    Sandgate__V1__HostListRequest q;
    list_query(req, after, &q);
    if (G.cfg.registry.n_endpoints)
        gw_records_list(r, after, &q, list_from_records);   /* no host asked */
    else
        gw_list_all_q(r, r->id.user, &q, list_reply);
}

int gw_service_register(rpc_server *srv, sg_err *err)
{
    static const struct {
        const char *path;
        rpc_handler_fn fn;
    } methods[] = {
        {"/sandgate.v1.Sandboxes/CreateSandbox", on_create},
        {"/sandgate.v1.Sandboxes/GetSandbox", on_get},
        {"/sandgate.v1.Sandboxes/ListSandboxes", on_list},
        {"/sandgate.v1.Sandboxes/KillSandbox", on_kill},
        {"/sandgate.v1.Sandboxes/ExtendSandbox", on_extend},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (rpc_server_add_method(srv, methods[i].path, methods[i].fn, NULL, err) != 0)
            return -1;
    if (gw_actions_register(srv, err) != 0 || gw_files_register(srv, err) != 0 ||
        gw_procs_register(srv, err) != 0)
        return -1;
    return rpc_health_register(srv, "sandgate.v1.Sandboxes", err);
}
