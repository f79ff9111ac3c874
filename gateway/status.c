/* status.c — what a failing public call says. Two rules (README, API:
 * errors):
 *  - An agent can tell a policy block from an outage from a lost sandbox:
 *    PERMISSION_DENIED / RESOURCE_EXHAUSTED for policy, UNAVAILABLE with
 *    HOST_UNAVAILABLE for a host that cannot be reached, NOT_FOUND with
 *    SANDBOX_LOST for the owner's sandbox that its host's restart took. The
 *    reason rides in an ErrorInfo in grpc-status-details-bin (rpc/status.c).
 *  - Public text is stable and ours: grpc's own status text for a host call
 *    (addresses, resolver and socket errors) and a host's internal errors
 *    (syscalls, paths, errno) are logged here and never sent. A host's
 *    answers about the request itself (bad path, no such context, quota)
 *    are relayed as the host worded them; never secret values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "gateway/gw.h"

#define HOST_UNAVAILABLE_MSG "sandbox host unavailable; retry later"

void gw_fail(rpc_call *c, const sg_err *e)
{
    /* The gateway's own failures (a library call, the OS) name syscalls and
     * their arguments, which is what the log wants and the caller must not
     * see. Every other code's text is about the request and is meant for it. */
    if (e->code == SG_EINTERNAL)
        gw_fail_internal(c, "internal error", e);
    else
        rpc_call_fail(c, e);
}

void gw_fail_policy(rpc_call *c, int code, const char *reason, const char *rule,
                    const char *message, const char *asked)
{
    rpc_kv md[] = {{"rule", rule ? rule : ""}, {"asked", asked ? asked : ""}};
    rpc_call_fail_info(c, rpc_status_from_err(code), message, reason, md, 2);
}

void gw_fail_not_found(rpc_call *c)
{
    rpc_call_finish(c, GRPC_STATUS_NOT_FOUND, TENANCY_NOT_FOUND_MSG);
}

void gw_fail_host_unavailable(rpc_call *c)
{
    gw_public p = gw_public_from_host(GRPC_STATUS_UNAVAILABLE, "", 0);
    rpc_call_fail_info(c, p.code, p.message, p.reason, NULL, 0);
}

void gw_fail_host_lost(rpc_call *c)
{
    rpc_call_fail_info(c, GRPC_STATUS_UNAVAILABLE,
                       "the sandbox's host was lost (its registration ended: killed, crashed or "
                       "cut off); its sandboxes are gone; create the task's sandbox again",
                       "HOST_LOST", NULL, 0);
}

void gw_fail_registry(rpc_call *c, const char *what, const char *why)
{
    sg_log_warn("registry: %s: %s", what, why ? why : "etcd did not answer");
    rpc_call_fail_info(c, GRPC_STATUS_UNAVAILABLE,
                       "the sandbox registry (etcd) cannot be reached, so no sandbox can be "
                       "created now; running sandboxes are not affected; retry later",
                       "REGISTRY_UNAVAILABLE", NULL, 0);
}

void gw_fail_internal(rpc_call *c, const char *what, const sg_err *e)
{
    sg_log_warn("%s: %s", what, e ? e->msg : "");
    rpc_call_finish(c, GRPC_STATUS_INTERNAL, "internal error in the gateway");
}

void gw_fail_lost(rpc_call *c, const char *sandbox_id, const char *lost_at)
{
    char msg[256];
    snprintf(msg, sizeof msg,
             "sandbox %.100s was lost: its host restarted and its state is gone; create a new one",
             sandbox_id);
    rpc_kv md[] = {{"sandbox_id", sandbox_id}, {"lost_at", lost_at ? lost_at : ""}};
    rpc_call_fail_info(c, GRPC_STATUS_NOT_FOUND, msg, "SANDBOX_LOST", md, 2);
}

Sandgate__V1__ErrorInfo *gw_host_lost_info(grpc_status_code code, const rpc_trailer *t)
{
    if (code != GRPC_STATUS_NOT_FOUND || !t || !t->from_peer)
        return NULL;
    Sandgate__V1__ErrorInfo *info = rpc_error_info_parse(t->details_bin, t->details_bin_len);
    if (info && (!info->reason || strcmp(info->reason, "SANDBOX_LOST") != 0)) {
        protobuf_c_message_free_unpacked(&info->base, NULL);
        info = NULL;
    }
    return info;
}

gw_public gw_public_from_host(grpc_status_code code, const char *details, int from_peer)
{
    gw_public p = {.code = code, .message = details ? details : "", .reason = NULL, .log = 0};
    if (!from_peer) {
        /* grpc made this status up on our side of the host call. */
        p.log = 1;
        switch (code) {
        case GRPC_STATUS_UNAVAILABLE:
            p.message = HOST_UNAVAILABLE_MSG;
            p.reason = "HOST_UNAVAILABLE";
            break;
        case GRPC_STATUS_DEADLINE_EXCEEDED:
            p.message = "the sandbox host did not answer in time";
            break;
        case GRPC_STATUS_CANCELLED:
            p.message = "cancelled";
            break;
        case GRPC_STATUS_RESOURCE_EXHAUSTED:
            p.message = "the sandbox host's answer is larger than the gateway accepts";
            break;
        case GRPC_STATUS_NOT_FOUND:   /* grpc never says it; a host from before the trailer */
            p.message = TENANCY_NOT_FOUND_MSG;
            break;
        default:
            p.code = GRPC_STATUS_INTERNAL;
            p.message = "the call to the sandbox host failed";
            break;
        }
        return p;
    }
    switch (code) {
    case GRPC_STATUS_INTERNAL:
    case GRPC_STATUS_UNKNOWN:
    case GRPC_STATUS_DATA_LOSS:
        p.log = 1;
        p.code = GRPC_STATUS_INTERNAL;
        p.message = "internal error in the sandbox host";
        break;
    default:
        break;
    }
    return p;
}

void gw_fail_from_host(rpc_call *c, const gw_host *h, const char *method, const char *sandbox_id,
                       grpc_status_code code, const char *details, const rpc_trailer *t)
{
    Sandgate__V1__ErrorInfo *lost = gw_host_lost_info(code, t);
    if (lost) {
        /* Only calls whose ownership was proven get here (request.c). */
        gw_fail_lost(c, sandbox_id ? sandbox_id : "", rpc_error_info_get(lost, "lost_at"));
        protobuf_c_message_free_unpacked(&lost->base, NULL);
        return;
    }
    int from_peer = t && t->from_peer;
    gw_public p = gw_public_from_host(code, details, from_peer);
    if (p.log)
        sg_log_info("host %s (%s) %s: %s%s: %s", h->name, gw_host_address(h), method,
                rpc_status_name(code), from_peer ? "" : " (grpc)",
                details && details[0] ? details : "(no details)");
    if (p.reason)
        rpc_call_fail_info(c, p.code, p.message, p.reason, NULL, 0);
    else
        rpc_call_finish(c, p.code, p.message);
}
