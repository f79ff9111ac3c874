/* health.h — the standard health service. `service` (e.g. "sandgate.v1.Sandboxes")
 * is answered as known besides the empty name. */
#ifndef SG_RPC_HEALTH_H
#define SG_RPC_HEALTH_H
#include "rpc/rpc.h"
int rpc_health_register(rpc_server *s, const char *service, sg_err *err);
void rpc_health_set_serving(int serving);
int rpc_health_service_known(const char *name);
void rpc_health_watch_end(rpc_call *c);
/* A fact Check reports in trailing metadata, e.g. the gateway's live policy
 * hash as "sandgate-policy-sha256". fn fills buf (NUL-terminated). */
void rpc_health_set_info(const char *key, void (*fn)(char *buf, size_t cap));
#endif
