/* validate.h — every string field of a request, checked on its wire bytes
 * against a rules table before anything reads the decoded message.
 *
 * protobuf-c hands out NUL-terminated C strings, so "id\0junk" decodes to
 * "id" and invalid UTF-8 decodes silently. The check therefore walks the
 * wire bytes with the message's descriptor: every string field, repeated
 * strings, map keys and values and nested messages, whatever the field is
 * called. Each string must be valid UTF-8 (RFC 3629: no overlongs, no
 * surrogates), hold no NUL byte, fit its length limit and its charset.
 * Errors name the field ("env[\"A\"]: not valid UTF-8", "secrets[2]: ...")
 * and never echo the offending bytes. Which fields have which rule is the
 * caller's table (gateway/rules.c, host/core/rules.c); no grpc here. */
#ifndef SG_RPC_VALIDATE_H
#define SG_RPC_VALIDATE_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef enum rpc_charset {
    RPC_CS_TEXT = 0,    /* any valid UTF-8 without NUL */
    RPC_CS_ID,          /* ids and names: no space, control or invisible
                           format character: none of U+0000-U+0020,
                           U+007F-U+00A0, U+00AD, U+1680, U+180E,
                           U+2000-U+200F, U+2028-U+202F, U+205F-U+206F,
                           U+3000, U+FEFF, U+FFF9-U+FFFB */
    RPC_CS_SANDBOX_ID,  /* [a-z0-9_-], as the host mints them */
    RPC_CS_ENV_NAME,    /* [A-Za-z_][A-Za-z0-9_]*, never empty */
    RPC_CS_LABEL_KEY,   /* [A-Za-z0-9._/-]+: sandbox label (metadata) keys */
} rpc_charset;

typedef struct rpc_field_rule {
    const char *path;       /* borrowed: field names from the top message joined
                               by '.'; a map's "<map>.key" and "<map>.value" */
    rpc_charset charset;
    uint32_t max_bytes;     /* 0 = the table's default_max */
} rpc_field_rule;

typedef struct rpc_rules {
    const ProtobufCMessageDescriptor *desc;   /* borrowed: the top message */
    const rpc_field_rule *fields;             /* borrowed, n_fields of them */
    size_t n_fields;
    uint32_t default_max;   /* strings not in fields; 0 = no limit beyond the
                               message size the server accepts */
} rpc_rules;

/* 0, or SG_EINVAL naming the first bad field. buf must hold one message
 * of r->desc; malformed wire bytes are SG_EINVAL too. */
int rpc_validate(const rpc_rules *r, const uint8_t *buf, size_t len, sg_err *err);

/* Decode and validate; NULL (err set, SG_EINVAL) if either fails. */
ProtobufCMessage *rpc_unpack_valid(const rpc_rules *r, const uint8_t *buf, size_t len,
                                   sg_err *err);

/* The rules for d among table[0..n), or NULL. */
const rpc_rules *rpc_rules_find(const rpc_rules *table, size_t n,
                                const ProtobufCMessageDescriptor *d);

/* The standard services' requests (std_rules.c): grpc.health.v1's
 * HealthCheckRequest and grpc.reflection.v1's ServerReflectionRequest. */
extern const rpc_rules rpc_health_request_rules;
extern const rpc_rules rpc_reflection_request_rules;

/* Does s[0..n) satisfy the charset (and is it valid UTF-8 with no NUL)? */
int rpc_charset_ok(rpc_charset cs, const uint8_t *s, size_t n);

#endif
