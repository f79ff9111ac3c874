/* claims.h — etcd mode: one sandbox per task across every gateway replica,
 * exact live-sandbox quotas, and placement by load (claims.c). */
#ifndef SG_GW_CLAIMS_H
#define SG_GW_CLAIMS_H

#include "gateway/request.h"

typedef struct gw_claim gw_claim;   /* owned by its gw_req (r->claim) */

/* Read the task's claim and history and the tenant's and user's live
 * sandboxes, all at one revision; then done(r) on the etcd client's
 * thread. If etcd cannot be reached the call is answered UNAVAILABLE
 * (REGISTRY_UNAVAILABLE) and r freed instead. dedupe: the task's dedupe key. */
void gw_claim_read(gw_req *r, const char *dedupe, void (*done)(gw_req *r));

/* After a read: the task's live sandbox id (someone holds the claim), or
 * NULL. Live counts leave that one out (a retry is never refused). */
const char *gw_claim_existing(const gw_claim *c);
void gw_claim_counts(const gw_claim *c, uint32_t *tenant, uint32_t *user);
/* The task's previous sandbox, lost with its host ("" if none). */
const char *gw_claim_lost(const gw_claim *c);

/* Sample GW_PLACE_K registered, serving, not draining hosts that report the
 * template at an isolation at least min_isolation ("" = any) and take the
 * best by load (placement.h); NULL (e says why) if none. */
gw_host *gw_claim_place(const char *template_name, const char *min_isolation, sg_err *e);

/* Claim the task for sandbox id on h (bound to h's lease) with its record
 * and quota key, in one transaction that also checks the quota counts read
 * are still true (max_* 0: no such quota). done(r, rc) on the etcd thread:
 * rc 0 the claim is ours; 1 another create claimed the task first
 * (gw_claim_existing says which sandbox); 2 the counts moved: read again;
 * -1 etcd failed (the call is answered and r freed). */
typedef void (*gw_claim_done)(gw_req *r, int rc, void *arg);
void gw_claim_commit(gw_req *r, gw_host *h, const char *id, const char *template_name,
                     int64_t expires_ms, uint32_t max_tenant, uint32_t max_user,
                     gw_claim_done done, void *arg);
/* The host refused our claimed create: release it (fire and forget). */
void gw_claim_rollback(gw_req *r);
/* 1 while this create holds a claim it made. */
int gw_claim_ours(const gw_claim *c);
void gw_claim_free(gw_claim *c);

#endif
