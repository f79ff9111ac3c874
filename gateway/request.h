/* request.h — one public call inside the gateway: decoded request, the
 * policy it runs under, the caller's identity, and the host that holds the
 * sandbox. Shared by service.c (lifecycle calls) and actions.c (calls that
 * act inside a sandbox). */
#ifndef SG_GW_REQUEST_H
#define SG_GW_REQUEST_H

#include "gateway/gw.h"
#include "sandgate/v1/host.pb-c.h"

typedef struct gw_req {
    rpc_call *in;               /* owned ref */
    policy *pol;                /* owned ref: the policy this call started under */
    tenancy_identity id;
    ProtobufCMessage *msg;      /* owned: the decoded public request */
    const char *sandbox_id;     /* borrowed from msg */
    const char *action;         /* audit name, static */
    gw_host *host;              /* borrowed */
    void (*next)(struct gw_req *r);   /* runs once ownership is proven */
    /* for owner lookups */
    char owner_tenant[TENANCY_NAME_MAX], owner_user[TENANCY_NAME_MAX];
    char owner_task[TENANCY_NAME_MAX];
    int owner_found;
    int has_token;              /* the tenant uses end-user tokens and this one verified */
    tenancy_token token;
    int counted_action;         /* holds one of the tenant's concurrent-action slots */
    struct gw_claim *claim;     /* owned: etcd mode create (claims.c) */
    void *user;                 /* the handler's own state (files.c's upload) */
    void (*user_free)(void *);  /* optional: frees user with r */
} gw_req;

/* Decode, authenticate and check user_id; on failure the call is answered
 * and NULL returned. user_id is read from the message's field named
 * "user_id"; sandbox_id from "sandbox_id" when present. */
gw_req *gw_req_begin(rpc_call *c, const ProtobufCMessageDescriptor *d, const char *action);
/* The same for a request the caller read itself (a client stream's first
 * message); buf is borrowed for the call. */
gw_req *gw_req_begin_buf(rpc_call *c, const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                         size_t len, const char *action);
void gw_req_free(gw_req *r);
/* Find the sandbox's host and prove the caller owns it, then run next(r).
 * Answers NOT_FOUND / PERMISSION_DENIED itself. */
void gw_req_with_owner(gw_req *r, void (*next)(gw_req *r));
/* Forward r->msg (or req if non-NULL) to the host's unary method; frees r at
 * the end. rewrite (optional) turns the host's reply into the public one. */
void gw_req_forward(gw_req *r, const char *method, const ProtobufCMessage *req,
                    grpc_byte_buffer *(*rewrite)(void *, grpc_byte_buffer *), double timeout_s);
/* The same for a server-streaming method: messages are relayed as they are;
 * one with field last_field (0 = none) is the last and rides with the status. */
void gw_req_forward_stream(gw_req *r, const char *method, uint32_t last_field, double timeout_s);
void gw_req_fail(gw_req *r, const sg_err *e);
/* Take one of the tenant's concurrent-action slots for this call (released
 * when r is freed). Answers RESOURCE_EXHAUSTED itself on failure. */
int gw_req_count_action(gw_req *r);

/* Every host's live sandboxes of the caller's tenant (user filter optional);
 * done() owns nothing it is given beyond the call. parts[i] belongs to
 * G.hosts[i]; NULL when that host is not SERVING (skipped, not asked) or did
 * not answer within GW_LIST_DEADLINE_S. failed = how many are NULL. */
#define GW_LIST_DEADLINE_S 1.0
typedef void (*gw_list_done)(gw_req *r, Sandgate__V1__HostListResponse **parts, size_t n,
                             int failed);
void gw_list_all(gw_req *r, const char *user, gw_list_done done);
/* The same with the filter, cursor and limit of q (its tenant and user
 * are ignored; borrowed until the legs are sent). */
void gw_list_all_q(gw_req *r, const char *user, const Sandgate__V1__HostListRequest *q,
                   gw_list_done done);

/* records.c — etcd mode: the caller's live sandboxes from their listing
 * copies in etcd (no host asked), ids after after_id, carrying every label
 * of q->metadata, at most q->limit. done(r, items, n, more) on the etcd
 * thread, items borrowed for the call; more -1 (n 0): etcd failed or held
 * a copy it cannot vouch for, ask the hosts instead. q is borrowed until
 * done (its metadata from r->msg). */
typedef void (*gw_records_done)(gw_req *r, Sandgate__V1__Sandbox **items, size_t n, int more);
void gw_records_list(gw_req *r, const char *after_id, const Sandgate__V1__HostListRequest *q,
                     gw_records_done done);

/* counts.c — each host's last answer to the quota count, per tenant, for
 * when it cannot answer now. get returns a copy (free_unpacked) or NULL. */
void gw_counts_put(size_t host, const char *tenant, const Sandgate__V1__HostListResponse *part);
/* The host's load report (every tenant's live sandboxes): replaces its entries. */
void gw_counts_report(size_t host, const Sandgate__V1__HostListResponse *all);
/* A sandbox this gateway just created there (added to an entry, if any). */
void gw_counts_add(size_t host, const char *tenant, const Sandgate__V1__Owner *owner);
Sandgate__V1__HostListResponse *gw_counts_get(size_t host, const char *tenant);

int gw_actions_register(rpc_server *srv, sg_err *err);
/* files.c */
int gw_files_register(rpc_server *srv, sg_err *err);
/* procs.c: background processes; and Exec's process fields (0, or answered) */
int gw_procs_register(rpc_server *srv, sg_err *err);
int gw_check_exec_process(gw_req *r, const Sandgate__V1__ExecRequest *req);

#endif
