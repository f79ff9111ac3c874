/* list.c — asking every host for a tenant's live sandboxes, in parallel:
 * ListSandboxes answers from it, and CreateSandbox counts live sandboxes for
 * the quota from it (the hosts are the shared record across gateway
 * replicas). A host the health checker (health.c) does not see SERVING is
 * not asked at all, and each host that is asked gets GW_LIST_DEADLINE_S, so
 * one stopped or wedged host costs a call at most that long (and nothing
 * once the checker has noticed it) instead of stalling everyone's creates
 * and lists. A host that is skipped or does not answer in time has a NULL
 * part; the caller decides what that means (list: named in
 * unreachable_hosts; create: its last known count, service.c). */
#include <stdlib.h>

#include "gateway/request.h"

typedef struct list_op {
    gw_req *r;                                  /* borrowed until done() */
    gw_list_done done;
    pthread_mutex_t mu;
    size_t pending;
    Sandgate__V1__HostListResponse **parts;     /* owned, one per host */
    size_t n_parts;
    int failed;                                 /* hosts with no part */
} list_op;

typedef struct list_leg {
    list_op *op;
    size_t index;
} list_leg;

static void leg_done(list_op *op, grpc_status_code code)
{
    pthread_mutex_lock(&op->mu);
    if (code != GRPC_STATUS_OK)
        op->failed++;
    int last = --op->pending == 0;
    pthread_mutex_unlock(&op->mu);
    if (!last)
        return;
    op->done(op->r, op->parts, op->n_parts, op->failed);
    for (size_t i = 0; i < op->n_parts; i++)
        if (op->parts[i])
            protobuf_c_message_free_unpacked(&op->parts[i]->base, NULL);
    free(op->parts);
    pthread_mutex_destroy(&op->mu);
    free(op);
}

static void on_leg_done(void *arg, rpc_unary_result *res)
{
    list_leg *leg = arg;
    list_op *op = leg->op;
    rpc_call_log_context(op->r->in);
    grpc_status_code code = res->code;
    if (res->resp) {
        size_t len;
        uint8_t *buf = rpc_flatten(res->resp, &len);
        grpc_byte_buffer_destroy(res->resp);
        op->parts[leg->index] = (Sandgate__V1__HostListResponse *)rpc_unpack(
            &sandgate__v1__host_list_response__descriptor, buf, len, NULL);
        free(buf);
    }
    /* An answer we cannot read is a host that failed, not one with no sandboxes. */
    if (code == GRPC_STATUS_OK && !op->parts[leg->index])
        code = GRPC_STATUS_INTERNAL;
    free(leg);
    leg_done(op, code);
}

void gw_list_all(gw_req *r, const char *user, gw_list_done done)
{
    gw_list_all_q(r, user, NULL, done);
}

void gw_list_all_q(gw_req *r, const char *user, const Sandgate__V1__HostListRequest *q,
                   gw_list_done done)
{
    list_op *op = calloc(1, sizeof *op);
    op->r = r;
    op->done = done;
    pthread_mutex_init(&op->mu, NULL);
    op->n_parts = G.n_hosts;
    op->parts = calloc(G.n_hosts + 1, sizeof *op->parts);
    op->pending = G.n_hosts + 1;   /* +1 until every leg is started */
    Sandgate__V1__HostListRequest h;
    sandgate__v1__host_list_request__init(&h);
    h.tenant_id = r->id.tenant;
    h.user_id = (char *)(user ? user : "");
    if (q) {
        h.n_metadata = q->n_metadata;
        h.metadata = q->metadata;
        h.after_id = q->after_id;
        h.limit = q->limit;
    }
    for (size_t i = 0; i < G.n_hosts; i++) {
        if (!gw_host_serving(&G.hosts[i])) {
            leg_done(op, GRPC_STATUS_UNAVAILABLE);
            continue;
        }
        list_leg *leg = calloc(1, sizeof *leg);
        leg->op = op;
        leg->index = i;
        sg_err e;
        grpc_metadata md[2];
        size_t n_md = rpc_call_trace_md(r->in, md);
        if (rpc_unary_start(gw_host_channel(&G.hosts[i]), rpc_server_cq(rpc_call_server(r->in)),
                            rpc_call_grpc(r->in), "/sandgate.v1.Host/ListSandboxes",
                            rpc_deadline_in(GW_LIST_DEADLINE_S), md, n_md, rpc_pack(&h.base),
                            on_leg_done, leg, &e) != 0) {
            free(leg);
            leg_done(op, GRPC_STATUS_UNAVAILABLE);
        }
    }
    leg_done(op, GRPC_STATUS_OK);
}
