/* rules.h — what the gateway accepts in the string fields of each public
 * request (the id charset and lengths documented in sandgate.proto), and
 * the environment's size limits from the policy. Checked in
 * gw_req_begin right after decoding, before any decision. */
#ifndef SG_GW_RULES_H
#define SG_GW_RULES_H

#include "rpc/validate.h"
#include "sandgate/v1/sandgate.pb-c.h"

/* The rules for a public request message; NULL for anything else. */
const rpc_rules *gw_rules_for(const ProtobufCMessageDescriptor *d);

/* A create's env against the policy's env_bytes (names + values, summed)
 * and env_entries: SG_EINVAL naming the limit. */
/* CreateSandbox's labels against the tenant's policy limits. */
int gw_check_metadata(const Sandgate__V1__CreateSandboxRequest *req, uint32_t max_bytes,
                      uint32_t max_entries, sg_err *err);
int gw_check_env(const Sandgate__V1__CreateSandboxRequest *req, uint64_t max_bytes,
                 uint32_t max_entries, sg_err *err);

/* The numeric bounds of a public request (ListFiles max_entries, MakeDir
 * and UploadFile mode, DownloadFile chunk_bytes, UploadFile data, List's
 * page_size and filter count): SG_EINVAL naming the field; 0 for others. */
int gw_check_ranges(const ProtobufCMessage *m, sg_err *err);

#endif
