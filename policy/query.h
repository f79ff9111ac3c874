/* query.h — decisions and views added beyond the policy.h contract:
 * authentication as one decision (API key and/or mTLS), the tenant's scope
 * and end-user token settings for tenancy/, and the limits decision that
 * caps a request's asks. All pure, like policy.h. */
#ifndef SG_POLICY_QUERY_H
#define SG_POLICY_QUERY_H

#include "policy/policy.h"

/* Who is calling? api_key and mtls_identity are each nullable. If both are
 * given they must name the same tenant; a tenant with require_mtls needs
 * the mTLS identity. Every failure has the same rule and message
 * ("default.unauthenticated") so nothing hints which part failed. On allow
 * *tenant is the tenant id (borrowed from p). */
void policy_decide_auth(const policy *p, const char *api_key, const char *mtls_identity,
                        const char **tenant, policy_decision *out);

/* The tenant's scope, or -1 if the tenant is unknown. */
int policy_tenant_scope(const policy *p, const char *tenant);

typedef struct policy_user_tokens {
    int enabled;               /* the tenant has user_tokens */
    int required;              /* calls without a token are refused */
    const char *source_kind;   /* "file" or "env": where the HMAC key is */
    const char *source;        /* borrowed */
    uint32_t max_ttl_s;        /* longest expiry accepted */
} policy_user_tokens;
int policy_tenant_user_tokens(const policy *p, const char *tenant, policy_user_tokens *out);

/* Effective limits for a request: each field of `asked` (0 = the default)
 * capped by the tenant's limits; ttl defaults to ttl but caps at ttl_max.
 * Always allows (a cap is not a refusal); the rule names the first limit
 * that capped an ask, or "defaults.limits". Unknown tenant denies. */
void policy_decide_limits(const policy *p, const char *tenant, const policy_limits *asked,
                          policy_limits *effective, policy_decision *out);

/* Counts for tools and benchmarks. */
size_t policy_tenant_count(const policy *p);
size_t policy_rule_count(const policy *p);

#endif
