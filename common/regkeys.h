/* regkeys.h — the layout of sandgate's keys in etcd (etcd mode), shared by
 * the gateway (which claims) and the host (which releases). Every key is
 * under the configured prefix:
 *
 *   hosts/<name>                       host report (JSON)        host's lease
 *   tasks/<sha256(dedupe key)>         the task's sandbox id     host's lease
 *   history/<sha256(dedupe key)>       the task's last sandbox   no lease
 *   sandboxes/<id>                     record (JSON: host, owner, expiry)  host's lease
 *   live/<hex tenant>/<hex user>/<id>  one per live sandbox (quotas)       host's lease
 *
 * The dedupe key is hashed (SHA-256, so two tasks never share a claim) and
 * tenant and user are hex-encoded, so no id's bytes can reach across a '/'
 * into another tenant's or user's range. */
#ifndef SG_REGKEYS_H
#define SG_REGKEYS_H

#include <stddef.h>

#define SG_REGKEY_MAX 640

void sg_regkey_task(const char *prefix, const char *dedupe, char *out, size_t cap);
void sg_regkey_history(const char *prefix, const char *dedupe, char *out, size_t cap);
void sg_regkey_sandbox(const char *prefix, const char *id, char *out, size_t cap);
/* user NULL: the tenant's range; id NULL: the user's range (both end in '/'). */
void sg_regkey_live(const char *prefix, const char *tenant, const char *user, const char *id,
                    char *out, size_t cap);

#endif
