/* identity.c — who is calling: API key (by SHA-256 digest) or mTLS identity
 * → tenant, and the authentication decision. Pure: hashing is computation.
 * The digest is looked up in a hash index and then compared in constant
 * time: the bucket only depends on a one-way digest of the key, so lookup
 * timing tells an attacker nothing about stored keys. Leaves transport
 * (metadata, certificates) to tenancy/ and rpc/. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/lint.h"
#include "policy/query.h"

const char *policy_tenant_by_api_key(const policy *p, const char *api_key)
{
    if (!p || !api_key || !*api_key)
        return NULL;
    char hex[65];
    policy_hash_key(api_key, strlen(api_key), hex);
    size_t n;
    const uint32_t *v = pol_index_get(&p->by_key, hex, 64, &n);
    for (size_t i = 0; i < n; i++) {
        const pol_tenant *t = &p->tenants[v[i]];
        for (size_t k = 0; k < t->n_keys; k++)
            if (CRYPTO_memcmp(t->key_hashes[k], hex, 64) == 0)
                return t->id;
    }
    return NULL;
}

const char *policy_tenant_by_mtls(const policy *p, const char *identity)
{
    if (!p || !identity || !*identity)
        return NULL;
    size_t n;
    const uint32_t *v = pol_index_get(&p->by_mtls, identity, strlen(identity), &n);
    return n ? p->tenants[v[0]].id : NULL;
}

static void unauth(policy_decision *out)
{
    out->allow = 0;
    out->err = SG_EUNAUTH;
    snprintf(out->rule, sizeof out->rule, "default.unauthenticated");
    snprintf(out->message, sizeof out->message, "credentials not recognised");
}

void policy_decide_auth(const policy *p, const char *api_key, const char *mtls_identity,
                        const char **tenant, policy_decision *out)
{
    *tenant = NULL;
    const char *by_key = api_key && *api_key ? policy_tenant_by_api_key(p, api_key) : NULL;
    const char *by_mtls = mtls_identity && *mtls_identity ? policy_tenant_by_mtls(p, mtls_identity) : NULL;
    int has_key = api_key && *api_key, has_mtls = mtls_identity && *mtls_identity;
    if ((!has_key && !has_mtls) || (has_key && !by_key) || (has_mtls && !by_mtls) ||
        (by_key && by_mtls && strcmp(by_key, by_mtls) != 0)) {
        unauth(out);
        return;
    }
    const char *id = by_mtls ? by_mtls : by_key;
    const pol_tenant *t = pol_tenant_find(p, id);
    if (!t || (t->require_mtls && !by_mtls)) {
        unauth(out);
        return;
    }
    *tenant = t->id;
    out->allow = 1;
    out->err = SG_OK;
    snprintf(out->rule, sizeof out->rule, "tenants.%s.%s", t->id, by_mtls ? "mtls" : "api_keys");
    snprintf(out->message, sizeof out->message, "authenticated as tenant '%s' by %s", t->id,
             by_mtls && by_key ? "mTLS identity and API key" : by_mtls ? "mTLS identity" : "API key");
}
