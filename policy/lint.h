/* lint.h — loading with warnings, for `sandgate-policy lint` and reviews.
 * Warnings (a tenant nobody can authenticate as, a rule open on every port,
 * a secret granted to nobody, …) never stop a load; errors always do. Both
 * lists read "file:line:col: key.path: message". */
#ifndef SG_POLICY_LINT_H
#define SG_POLICY_LINT_H

#include "policy/policy.h"

/* As policy_load_buffer / policy_load_file, also filling warns (nullable). */
int policy_lint_buffer(const char *name, const char *yaml, size_t len,
                       policy **out, policy_errors *errs, policy_errors *warns);
int policy_lint_file(const char *path, policy **out, policy_errors *errs,
                     policy_errors *warns);

/* Read a whole file (for callers that hash or lint bytes themselves).
 * *buf is malloc'd and NUL-terminated. Errors name the file and syscall. */
int policy_read_file(const char *path, char **buf, size_t *len, sg_err *err);

/* Lowercase hex SHA-256 of key into hex[65]. */
void policy_hash_key(const char *key, size_t len, char hex[65]);

#endif
