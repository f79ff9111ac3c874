/* tenancy.h — who is calling and what they own. Identity (API key or mTLS
 * identity → tenant, decided by the policy), ownership of a sandbox
 * (tenant, user, task), sandbox ids, the dedupe key that makes "one sandbox
 * per task" hold, and the owner cache. No grpc here: the gateway hands in
 * metadata strings and maps the returned sg_err codes. */
#ifndef SG_TENANCY_H
#define SG_TENANCY_H

#include <stddef.h>

#include "common/err.h"
#include "policy/policy.h"

#define TENANCY_NAME_MAX 128

typedef struct tenancy_identity {
    char tenant[TENANCY_NAME_MAX];
    char user[TENANCY_NAME_MAX];
} tenancy_identity;

/* authorization metadata ("Bearer <key>", not NUL-terminated) and/or the
 * mTLS identity (NULL when none). Any failure is SG_EUNAUTH with the same
 * message, so a caller learns nothing about which part was wrong. */
int tenancy_authenticate(const policy *p, const char *authz, size_t authz_len,
                         const char *mtls_identity, tenancy_identity *out, sg_err *err);

/* A user id names the end user inside the tenant: 1..127 printable bytes. */
int tenancy_check_name(const char *what, const char *value, int required, sg_err *err);

/* May the caller act on a sandbox owned by (tenant, user)? Another tenant's
 * sandbox is SG_ENOTFOUND, worded exactly as for an id that does not exist;
 * the same tenant but another user is SG_EDENIED. */
int tenancy_check_owner(const tenancy_identity *caller, const char *owner_tenant,
                        const char *owner_user, sg_err *err);
#define TENANCY_NOT_FOUND_MSG "no such sandbox"

/* "<host>-<32 hex>" from 128 random bits (OpenSSL RAND_bytes). */
int tenancy_new_sandbox_id(const char *host, char *out, size_t cap, sg_err *err);
/* The host name a sandbox id starts with, into host (cap bytes); -1 if the
 * id is malformed. */
int tenancy_sandbox_host(const char *sandbox_id, char *host, size_t cap);

/* Key under which the host keeps at most one live sandbox: per task
 * (tenant, user, task) or per user (tenant, user). */
void tenancy_dedupe_key(policy_scope scope, const char *tenant, const char *user,
                        const char *task, char *out, size_t cap);

/* Owner cache (thread-safe; ids are never reused, so entries never go stale
 * in a way that matters: a killed sandbox is NOT_FOUND at the host). */
void tenancy_owner_put(const char *sandbox_id, const char *tenant, const char *user);
int tenancy_owner_get(const char *sandbox_id, char *tenant, char *user);  /* 0 = hit */

#endif
