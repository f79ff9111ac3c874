/* identity.c — authenticating a call: the bearer API key and/or the mTLS
 * identity, decided by the policy (policy_decide_auth hashes and compares in
 * constant time). */
#include <stdio.h>
#include <string.h>

#include "policy/query.h"
#include "tenancy/tenancy.h"

#define UNAUTH_MSG "unauthenticated: missing or invalid credentials"

int tenancy_authenticate(const policy *p, const char *authz, size_t authz_len,
                         const char *mtls_identity, tenancy_identity *out, sg_err *err)
{
    char key[512];
    const char *api_key = NULL;
    memset(out, 0, sizeof *out);
    if (authz) {
        if (authz_len < 8 || authz_len - 7 >= sizeof key || strncmp(authz, "Bearer ", 7) != 0)
            return sg_err_set(err, SG_EUNAUTH, UNAUTH_MSG);
        memcpy(key, authz + 7, authz_len - 7);
        key[authz_len - 7] = 0;
        api_key = key;
    }
    if (!api_key && !mtls_identity)
        return sg_err_set(err, SG_EUNAUTH, UNAUTH_MSG);
    const char *tenant = NULL;
    policy_decision d;
    policy_decide_auth(p, api_key, mtls_identity, &tenant, &d);
    if (api_key)
        explicit_bzero(key, sizeof key);
    if (!d.allow || !tenant)
        return sg_err_set(err, SG_EUNAUTH, UNAUTH_MSG);
    snprintf(out->tenant, sizeof out->tenant, "%s", tenant);
    return 0;
}

int tenancy_check_name(const char *what, const char *value, int required, sg_err *err)
{
    size_t n = strlen(value);
    if (n == 0)
        return required ? sg_err_set(err, SG_EINVAL, "%s is required", what) : 0;
    if (n >= TENANCY_NAME_MAX)
        return sg_err_set(err, SG_EINVAL, "%s is %zu bytes; the limit is %d", what, n,
                          TENANCY_NAME_MAX - 1);
    for (const unsigned char *c = (const unsigned char *)value; *c; c++)
        if (*c < 0x21 || *c == 0x7f)
            return sg_err_set(err, SG_EINVAL, "%s has a space or control character", what);
    return 0;
}

int tenancy_check_owner(const tenancy_identity *caller, const char *owner_tenant,
                        const char *owner_user, sg_err *err)
{
    if (strcmp(caller->tenant, owner_tenant) != 0)
        return sg_err_set(err, SG_ENOTFOUND, TENANCY_NOT_FOUND_MSG);
    if (strcmp(caller->user, owner_user) != 0)
        return sg_err_set(err, SG_EDENIED, "sandbox belongs to another user of this tenant");
    return 0;
}
