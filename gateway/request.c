/* request.c — the steps every public call goes through: decode,
 * authenticate, validate the user, find the host, prove ownership (owner
 * cache, else the host's record), then forward. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/request.h"

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
    if (r->msg)
        protobuf_c_message_free_unpacked(r->msg, NULL);
    if (r->pol)
        policy_unref(r->pol);
    rpc_call_unref(r->in);
    free(r);
}

void gw_req_fail(gw_req *r, const sg_err *e)
{
    gw_fail(r->in, e);
    gw_req_free(r);
}

gw_req *gw_req_begin(rpc_call *c, const ProtobufCMessageDescriptor *d, const char *action)
{
    gw_req *r = calloc(1, sizeof *r);
    r->in = rpc_call_ref(c);
    r->action = action;
    sg_err err, uerr;
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    r->msg = rpc_unpack(d, buf, len, &uerr);
    r->pol = gw_policy_acquire();
    /* Authenticate before looking at the request's content. */
    size_t alen = 0;
    const char *authz = rpc_call_md(c, "authorization", &alen);
    char mtls[512];
    const char *mid = NULL;
    if (G.mtls && (rpc_call_auth_property(c, GRPC_PEER_SPIFFE_ID_PROPERTY_NAME, mtls, sizeof mtls) == 0 ||
                   rpc_call_auth_property(c, GRPC_X509_SAN_PROPERTY_NAME, mtls, sizeof mtls) == 0))
        mid = mtls;
    if (tenancy_authenticate(r->pol, authz, alen, mid, &r->id, &err) != 0) {
        gw_req_fail(r, &err);
        return NULL;
    }
    if (!r->msg) {
        gw_req_fail(r, &uerr);
        return NULL;
    }
    const char *user = string_field(r->msg, "user_id");
    if (tenancy_check_name("user_id", user ? user : "", 1, &err) != 0) {
        gw_req_fail(r, &err);
        return NULL;
    }
    snprintf(r->id.user, sizeof r->id.user, "%s", user);
    r->sandbox_id = string_field(r->msg, "sandbox_id");
    return r;
}

/* ---- ownership ---- */

static void owner_proven(gw_req *r)
{
    sg_err err;
    if (tenancy_check_owner(&r->id, r->owner_tenant, r->owner_user, &err) != 0) {
        gw_audit(r->pol, r->id.tenant, r->id.user, NULL, r->sandbox_id, r->action, 0,
                 err.code == SG_EDENIED ? "tenancy.owner.user" : "tenancy.owner.tenant",
                 err.msg);
        gw_req_fail(r, &err);
        return;
    }
    r->next(r);
}

static void on_owner_msg(void *arg, grpc_byte_buffer *bb)
{
    gw_req *r = arg;
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    grpc_byte_buffer_destroy(bb);
    Sandgate__V1__HostSandbox *hs = (Sandgate__V1__HostSandbox *)rpc_unpack(
        &sandgate__v1__host_sandbox__descriptor, buf, len, NULL);
    free(buf);
    if (hs && hs->owner) {
        snprintf(r->owner_tenant, sizeof r->owner_tenant, "%s", hs->owner->tenant_id);
        snprintf(r->owner_user, sizeof r->owner_user, "%s", hs->owner->user_id);
        r->owner_found = 1;
        tenancy_owner_put(r->sandbox_id, r->owner_tenant, r->owner_user);
    }
    if (hs)
        protobuf_c_message_free_unpacked(&hs->base, NULL);
}

static void on_owner_done(void *arg, grpc_status_code code, const char *details,
                          const grpc_metadata_array *trailing)
{
    gw_req *r = arg;
    sg_err err;
    if (code == GRPC_STATUS_OK && r->owner_found) {
        owner_proven(r);
        return;
    }
    if (code == GRPC_STATUS_NOT_FOUND || code == GRPC_STATUS_OK)
        sg_err_set(&err, SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG);
    else
        sg_err_set(&err, SG_EUNAVAIL, "sandbox host %s: %s", r->host->name,
                   details[0] ? details : "unavailable");
    gw_req_fail(r, &err);
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
    if (tenancy_owner_get(r->sandbox_id, r->owner_tenant, r->owner_user) == 0) {
        owner_proven(r);
        return;
    }
    Sandgate__V1__HostSandboxRef ref;
    sandgate__v1__host_sandbox_ref__init(&ref);
    ref.sandbox_id = (char *)r->sandbox_id;
    static const rpc_fwd_cbs cbs = {on_owner_msg, on_owner_done};
    if (!rpc_fwd_start(r->host->channel, rpc_server_cq(rpc_call_server(r->in)), rpc_call_grpc(r->in),
                       "/sandgate.v1.Host/GetSandbox", rpc_deadline_in(10), NULL, 0,
                       rpc_pack(&ref.base), &cbs, r, &err))
        gw_req_fail(r, &err);
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
                     .timeout_s = timeout_s};
    gw_forward(r->in, r->host, method, req ? req : r->msg, &o);
}
