/* request.c — the steps every public call goes through: decode,
 * authenticate, validate the user, find the host, prove ownership (owner
 * cache, else the host's record), then forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "gateway/claims.h"
#include "gateway/request.h"
#include "gateway/rules.h"
#include "policy/query.h"
#include "policy/secret.h"

static const char *string_field(const ProtobufCMessage *m, const char *name)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
        m->descriptor, name);
    if (!f || f->type != PROTOBUF_C_TYPE_STRING)
        return NULL;
    return *(const char **)((const char *)m + f->offset);
}

void gw_req_free(gw_req *r)
{
    if (r->counted_action)
        tenancy_action_end(r->id.tenant);
    if (r->claim)
        gw_claim_free(r->claim);
    if (r->msg)
        protobuf_c_message_free_unpacked(r->msg, NULL);
    if (r->pol)
        policy_unref(r->pol);
    rpc_call_unref(r->in);
    if (r->user_free)
        r->user_free(r->user);
    free(r);
}

void gw_req_fail(gw_req *r, const sg_err *e)
{
    gw_fail(r->in, e);
    gw_req_free(r);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The tenant's request rate (token bucket, this replica's share). */
static int admit(gw_req *r, sg_err *err)
{
    policy_limits lim;
    if (policy_tenant_limits(r->pol, r->id.tenant, &lim) != 0)
        return 0;
    return tenancy_rate_take(r->id.tenant, lim.rate_per_s, lim.rate_burst, now_us(), err);
}

/* Tenants with user_tokens: the token must verify and name this user. The
 * token comes in metadata x-sandgate-user-token (or, on create, the
 * request's user_token field). */
static int check_user_token(gw_req *r, sg_err *err)
{
    policy_user_tokens ut;
    if (policy_tenant_user_tokens(r->pol, r->id.tenant, &ut) != 0 || !ut.enabled)
        return 0;
    char tok[1024];
    size_t n = 0;
    const char *md = rpc_call_md(r->in, "x-sandgate-user-token", &n);
    const char *field = string_field(r->msg, "user_token");
    if (md && n < sizeof tok) {
        memcpy(tok, md, n);
        tok[n] = 0;
    } else if (field && field[0]) {
        snprintf(tok, sizeof tok, "%s", field);
    } else {
        return ut.required ? sg_err_set(err, SG_EUNAUTH, "unauthenticated: user token required") : 0;
    }
    char key[512];
    size_t klen;
    if (policy_user_token_key(r->pol, r->id.tenant, key, sizeof key, &klen, err) != 0)
        return sg_err_set(err, SG_EUNAVAIL, "user token key unavailable");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int rc = tenancy_token_verify(tok, (const uint8_t *)key, klen, ts.tv_sec, ut.max_ttl_s,
                                  &r->token, err);
    explicit_bzero(key, sizeof key);
    if (rc != 0)
        return rc;
    if (strcmp(r->token.user, r->id.user) != 0)
        return sg_err_set(err, SG_EUNAUTH, "unauthenticated: the user token names another user");
    r->has_token = 1;
    return 0;
}

/* The client certificate's identity (SPIFFE ID, else SAN) once its chain is
 * verified; "" when the client sent none (API-key callers). A certificate
 * that does not verify is UNAUTHENTICATED. */
static int peer_identity(rpc_call *c, char *out, size_t cap, sg_err *err)
{
    static __thread char leaf[16384], chain[32768];
    out[0] = 0;
    if (rpc_call_auth_property(c, GRPC_X509_PEM_CERT_PROPERTY_NAME, leaf, sizeof leaf) != 0)
        return 0;
    const char *ch = rpc_call_auth_property(c, GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME, chain,
                                            sizeof chain) == 0 ? chain : NULL;
    if (tenancy_mtls_verify(leaf, ch, err) != 0)
        return -1;
    if (rpc_call_auth_property(c, GRPC_PEER_SPIFFE_ID_PROPERTY_NAME, out, cap) != 0 &&
        rpc_call_auth_property(c, GRPC_X509_SAN_PROPERTY_NAME, out, cap) != 0)
        out[0] = 0;
    return 0;
}

gw_req *gw_req_begin(rpc_call *c, const ProtobufCMessageDescriptor *d, const char *action)
{
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    return gw_req_begin_buf(c, d, buf, len, action);
}

gw_req *gw_req_begin_buf(rpc_call *c, const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                         size_t len, const char *action)
{
    gw_req *r = calloc(1, sizeof *r);
    r->in = rpc_call_ref(c);
    r->action = action;
    sg_err err, uerr;
    r->msg = rpc_unpack(d, buf, len, &uerr);
    r->pol = gw_policy_acquire();
    /* Authenticate before looking at the request's content. */
    size_t alen = 0;
    const char *authz = rpc_call_md(c, "authorization", &alen);
    char mtls[512];
    const char *mid = NULL;
    if (G.mtls && peer_identity(c, mtls, sizeof mtls, &err) != 0) {
        gw_audit(r->pol, "", "", NULL, NULL, action, 0, "default.unauthenticated", err.msg);
        gw_req_fail(r, &err);
        return NULL;
    }
    if (G.mtls && mtls[0])
        mid = mtls;
    if (tenancy_authenticate(r->pol, authz, alen, mid, &r->id, &err) != 0) {
        gw_audit(r->pol, "", "", NULL, NULL, action, 0, "default.unauthenticated", err.msg);
        gw_req_fail(r, &err);
        return NULL;
    }
    rpc_call_set_label(c, r->id.tenant);   /* metrics: calls by tenant */
    if (!r->msg) {
        gw_req_fail(r, &uerr);
        return NULL;
    }
    if (admit(r, &err) != 0) {
        gw_audit(r->pol, r->id.tenant, "", NULL, NULL, action, 0, "quotas.rate", err.msg);
        if (err.code == SG_EQUOTA)
            gw_fail_policy(c, SG_EQUOTA, "QUOTA_EXCEEDED", "limits.rate", err.msg, r->action);
        else
            gw_fail(c, &err);
        gw_req_free(r);
        return NULL;
    }
    /* Every string field, on the wire bytes (a NUL would be cut by the
     * decoder), before anything reads the message. */
    const rpc_rules *rules = gw_rules_for(d);
    if (!rules) {
        sg_err_set(&err, SG_EINTERNAL, "no field rules for %s", d->name);
        gw_req_fail(r, &err);
        return NULL;
    }
    if (rpc_validate(rules, buf, len, &err) != 0) {
        gw_req_fail(r, &err);
        return NULL;
    }
    const char *user = string_field(r->msg, "user_id");
    if (tenancy_check_name("user_id", user ? user : "", 1, &err) != 0) {
        gw_req_fail(r, &err);
        return NULL;
    }
    snprintf(r->id.user, sizeof r->id.user, "%s", user);
    r->sandbox_id = string_field(r->msg, "sandbox_id");
    if (check_user_token(r, &err) != 0) {
        gw_req_fail(r, &err);
        return NULL;
    }
    return r;
}

int gw_req_count_action(gw_req *r)
{
    policy_limits lim;
    sg_err err;
    if (policy_tenant_limits(r->pol, r->id.tenant, &lim) != 0)
        return 0;
    if (tenancy_action_begin(r->id.tenant, lim.max_concurrent_actions, &err) != 0) {
        gw_fail_policy(r->in, SG_EQUOTA, "QUOTA_EXCEEDED", "quotas.concurrent_actions", err.msg,
                       r->action);
        gw_req_free(r);
        return -1;
    }
    r->counted_action = 1;
    return 0;
}

/* ---- ownership ---- */

static void owner_proven(gw_req *r)
{
    sg_err err;
    if (r->has_token && strcmp(r->token.task, r->owner_task) != 0) {
        sg_err_set(&err, SG_EDENIED, "the user token is for another task");
        gw_req_fail(r, &err);
        return;
    }
    if (tenancy_check_owner(&r->id, r->owner_tenant, r->owner_user, &err) != 0) {
        gw_audit(r->pol, r->id.tenant, r->id.user, NULL, r->sandbox_id, r->action, 0,
                 err.code == SG_EDENIED ? "tenancy.owner.user" : "tenancy.owner.tenant",
                 err.msg);
        gw_req_fail(r, &err);
        return;
    }
    /* Reads of metadata are not audited (hot and harmless); actions are. */
    if (strcmp(r->action, "get") != 0)
        gw_audit(r->pol, r->id.tenant, r->id.user, r->owner_task, r->sandbox_id, r->action, 1,
                 "tenancy.owner", "the caller owns the sandbox");
    r->next(r);
}

/* The host's record of the sandbox, read for its owner. */
static void owner_from_host(gw_req *r, grpc_byte_buffer *bb)
{
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    grpc_byte_buffer_destroy(bb);
    Sandgate__V1__HostSandbox *hs = (Sandgate__V1__HostSandbox *)rpc_unpack(
        &sandgate__v1__host_sandbox__descriptor, buf, len, NULL);
    free(buf);
    if (hs && hs->owner) {
        snprintf(r->owner_tenant, sizeof r->owner_tenant, "%s", hs->owner->tenant_id);
        snprintf(r->owner_user, sizeof r->owner_user, "%s", hs->owner->user_id);
        snprintf(r->owner_task, sizeof r->owner_task, "%s", hs->owner->task_id);
        r->owner_found = 1;
        tenancy_owner_put(r->sandbox_id, r->owner_tenant, r->owner_user, r->owner_task);
    }
    if (hs)
        protobuf_c_message_free_unpacked(&hs->base, NULL);
}

/* The host says the sandbox was lost to its restart. Only its owner hears
 * that; anyone else gets exactly what an id that never existed gets. */
static void owner_lost(gw_req *r, const Sandgate__V1__ErrorInfo *info)
{
    const char *t = rpc_error_info_get(info, "tenant_id"), *u = rpc_error_info_get(info, "user_id"),
               *k = rpc_error_info_get(info, "task_id");
    int own = t && u && strcmp(t, r->id.tenant) == 0 && strcmp(u, r->id.user) == 0 &&
              (!r->has_token || (k && strcmp(k, r->token.task) == 0));
    if (own)
        gw_fail_lost(r->in, r->sandbox_id, rpc_error_info_get(info, "lost_at"));
    else
        gw_fail_not_found(r->in);
    gw_req_free(r);
}

static void on_owner_done(void *arg, rpc_unary_result *res)
{
    gw_req *r = arg;
    rpc_call_log_context(r->in);
    if (res->resp)
        owner_from_host(r, res->resp);
    if (res->code == GRPC_STATUS_OK && r->owner_found) {
        owner_proven(r);
        return;
    }
    Sandgate__V1__ErrorInfo *lost = gw_host_lost_info(res->code, &res->trailer);
    if (lost) {
        owner_lost(r, lost);
        protobuf_c_message_free_unpacked(&lost->base, NULL);
        return;
    }
    /* Whatever else the host (or grpc) says depends on the id's text and
     * the host's state, never on whose the sandbox is: a host that is down
     * is the same HOST_UNAVAILABLE for every id and caller. */
    if (res->code == GRPC_STATUS_NOT_FOUND || res->code == GRPC_STATUS_OK)
        gw_fail_not_found(r->in);
    else
        gw_fail_from_host(r->in, r->host, "/sandgate.v1.Host/GetSandbox", r->sandbox_id,
                          res->code, res->details, &res->trailer);
    gw_req_free(r);
}

void gw_req_with_owner(gw_req *r, void (*next)(gw_req *r))
{
    sg_err err;
    char host[64];
    r->next = next;
    if (!r->sandbox_id || !r->sandbox_id[0]) {
        sg_err_set(&err, SG_EINVAL, "sandbox_id is required");
        gw_req_fail(r, &err);
        return;
    }
    if (tenancy_sandbox_host(r->sandbox_id, host, sizeof host) != 0 ||
        !(r->host = gw_host_by_name(host))) {
        sg_err_set(&err, SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG);
        gw_req_fail(r, &err);
        return;
    }
    /* Registry mode: a host whose lease ended is lost, with every sandbox
     * it had (their records and claims went with the lease): say so at
     * once, the same for every id and caller naming it. */
    if (G.cfg.registry.n_endpoints && !atomic_load(&r->host->registered)) {
        gw_fail_host_lost(r->in);
        gw_req_free(r);
        return;
    }
    /* A host the health checker sees down answers at once, before anything
     * about the id is looked at: the same HOST_UNAVAILABLE for every id and
     * caller, and no call waits on a stopped host for its deadline. */
    if (!gw_host_serving(r->host)) {
        gw_fail_host_unavailable(r->in);
        gw_req_free(r);
        return;
    }
    /* The cache only ever proves ownership. A caller it names as someone
     * else asks the host like an uncached id does, so another tenant's
     * sandbox answers exactly as an id that never existed, host down
     * included (and a stale entry is corrected). */
    if (tenancy_owner_get(r->sandbox_id, r->owner_tenant, r->owner_user, r->owner_task) == 0 &&
        strcmp(r->owner_tenant, r->id.tenant) == 0 && strcmp(r->owner_user, r->id.user) == 0) {
        owner_proven(r);
        return;
    }
    Sandgate__V1__HostSandboxRef ref;
    sandgate__v1__host_sandbox_ref__init(&ref);
    ref.sandbox_id = (char *)r->sandbox_id;
    grpc_metadata md[2];
    size_t n_md = rpc_call_trace_md(r->in, md);
    if (rpc_unary_start(gw_host_channel(r->host), rpc_server_cq(rpc_call_server(r->in)),
                        rpc_call_grpc(r->in), "/sandgate.v1.Host/GetSandbox", rpc_deadline_in(10),
                        md, n_md, rpc_pack(&ref.base), on_owner_done, r, &err) != 0) {
        gw_fail_internal(r->in, "owner lookup", &err);
        gw_req_free(r);
    }
}

/* ---- forwarding ---- */

static void on_forward_done(void *arg, grpc_status_code code)
{
    gw_req_free(arg);
}

void gw_req_forward(gw_req *r, const char *method, const ProtobufCMessage *req,
                    grpc_byte_buffer *(*rewrite)(void *, grpc_byte_buffer *), double timeout_s)
{
    gw_fwd_opts o = {.rewrite = rewrite, .on_done = on_forward_done, .arg = r,
                     .timeout_s = timeout_s, .sandbox_id = r->sandbox_id};
    gw_forward(r->in, r->host, method, req ? req : r->msg, &o);
}

void gw_req_forward_stream(gw_req *r, const char *method, uint32_t last_field, double timeout_s)
{
    gw_fwd_opts o = {.stream = 1, .last_field = last_field, .on_done = on_forward_done, .arg = r,
                     .timeout_s = timeout_s, .sandbox_id = r->sandbox_id};
    gw_forward(r->in, r->host, method, r->msg, &o);
}
