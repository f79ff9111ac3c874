/* tenancy.h — who is calling and what they own. Identity (API key or mTLS
 * identity → tenant, decided by the policy), ownership of a sandbox
 * (tenant, user, task), sandbox ids, the dedupe key that makes "one sandbox
 * per task" hold, and the owner cache. No grpc here: the gateway hands in
 * metadata strings and maps the returned sg_err codes. */
#ifndef SG_TENANCY_H
#define SG_TENANCY_H

#include <stddef.h>
#include <stdint.h>

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
void tenancy_owner_put(const char *sandbox_id, const char *tenant, const char *user,
                       const char *task);
int tenancy_owner_get(const char *sandbox_id, char *tenant, char *user, char *task); /* 0 = hit */

/* ---- mtls.c: client certificates, verified here (the listener lets any
 * certificate through so a bad one is UNAUTHENTICATED, not a TLS error) ---- */
int tenancy_mtls_load_ca(const char *ca_pem, sg_err *err);
/* SG_EUNAUTH unless leaf_pem chains to the client CA (chain_pem: the
 * peer's intermediates, nullable). */
int tenancy_mtls_verify(const char *leaf_pem, const char *chain_pem, sg_err *err);

/* ---- quota.c: this gateway's per-tenant admission ---- */
/* Token bucket: rate calls/s, burst (0 = max(rate, 1)). SG_EQUOTA naming the limit. */
int tenancy_rate_take(const char *tenant, double rate, uint32_t burst, int64_t now_us, sg_err *err);
/* Actions (RunCode, Exec) in flight; max 0 = unlimited. */
int tenancy_action_begin(const char *tenant, uint32_t max, sg_err *err);
void tenancy_action_end(const char *tenant);

/* ---- token.c: end-user tokens (HMAC-SHA256) ---- */
typedef struct tenancy_token {
    char user[TENANCY_NAME_MAX];
    char task[TENANCY_NAME_MAX];
    long long expiry;
} tenancy_token;
int tenancy_token_sign(const uint8_t *key, size_t keylen, const char *user, const char *task,
                       long long expiry_unix_s, char *out, size_t cap);
/* SG_EUNAUTH on a bad MAC, format, expiry, or expiry beyond now + max_ttl_s (0 = no cap). */
int tenancy_token_verify(const char *token, const uint8_t *key, size_t keylen, long long now_s,
                         uint32_t max_ttl_s, tenancy_token *out, sg_err *err);

#endif
