/* secret.h — resolving secret values. This is the one part of policy/ that
 * reads secrets (a file or the gateway's own environment), so it is kept
 * apart from the pure decisions. Values are never logged: error messages
 * name the secret and its source, never the value. */
#ifndef SG_POLICY_SECRET_H
#define SG_POLICY_SECRET_H

#include "policy/policy.h"

/* Read a granted secret's value into buf (cap bytes, NUL-terminated; one
 * trailing newline of a file is dropped). *len gets the value's length.
 * SG_EINVAL if the source is missing/unreadable or the value does not fit. */
int policy_secret_value(const policy_secret_grant *grant, char *buf, size_t cap,
                        size_t *len, sg_err *err);

/* The tenant's end-user token HMAC key (see query.h policy_user_tokens). */
int policy_user_token_key(const policy *p, const char *tenant, char *buf, size_t cap,
                          size_t *len, sg_err *err);

#endif
