/* rules.h — what the host accepts in each request, checked again here
 * because the host may be called directly (its API is internal, but a
 * second line costs microseconds): the string rules of every field (the
 * same ids and lengths the gateway applies) and the shape of a create. */
#ifndef SG_HOST_RULES_H
#define SG_HOST_RULES_H

#include "rpc/validate.h"
#include "sandgate/v1/host.pb-c.h"

/* The sandbox's environment, JSON-encoded with the granted secrets, must fit
 * the one message that carries it to the sandbox (a unix SEQPACKET datagram:
 * 208 KiB with the kernel's default buffer, less the template's spec). */
#define HOST_ENV_JSON_MAX (160u << 10)

/* The rules for a sandgate.v1.Host request message; NULL for anything else. */
const rpc_rules *host_rules_for(const ProtobufCMessageDescriptor *d);

/* Decode and validate with host_rules_for(d); NULL with err (SG_EINVAL, or
 * SG_EINTERNAL for a message without rules: fail closed). */
ProtobufCMessage *host_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                              size_t len, sg_err *err);

/* A create's shape: request and owner present, the env within the policy
 * ceilings (POLICY_ENV_*_MAX) and, encoded, within HOST_ENV_JSON_MAX. */
int host_check_create(const Sandgate__V1__HostCreateRequest *req, sg_err *err);

#endif
