/* fuzz_requests.h — what the gateway and host fuzz targets share: an input
 * is one selector byte (which request message) and that message's wire
 * bytes. Each run decodes and validates as the daemon's edge does, then
 * checks the validator's promise on what it accepted: every decoded string
 * is valid UTF-8 (no string the walk missed), the message re-encodes to
 * bytes that validate again, and the per-message checks that follow
 * (env limits, a create's shape) do not crash. Any broken promise aborts,
 * which libFuzzer reports as a crash. */
#ifndef SG_FUZZ_REQUESTS_H
#define SG_FUZZ_REQUESTS_H

#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rpc/validate.h"

/* The standard services both daemons serve (rpc/std_rules.c), appended to
 * each target's table. */
#define FUZZ_STD_REQUESTS \
    &grpc__health__v1__health_check_request__descriptor, \
    &grpc__reflection__v1__server_reflection_request__descriptor

static const rpc_rules *fuzz_std_rules(const ProtobufCMessageDescriptor *d)
{
    if (d == rpc_health_request_rules.desc)
        return &rpc_health_request_rules;
    if (d == rpc_reflection_request_rules.desc)
        return &rpc_reflection_request_rules;
    return NULL;
}

/* Every string in m (nested, repeated, map entries) is valid UTF-8. */
static void fuzz_strings_ok(const ProtobufCMessage *m, int depth)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (depth > 8)
        abort();
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m + f->offset;
        size_t n = 1;
        const void *items = base;
        /* a oneof's members share storage: only the one set may be read */
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
            continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(const size_t *)((const char *)m + f->quantifier_offset);
            items = *(void *const *)base;
        }
        for (size_t k = 0; k < n; k++) {
            if (f->type == PROTOBUF_C_TYPE_STRING) {
                const char *s = ((const char *const *)items)[k];
                if (s && !rpc_charset_ok(RPC_CS_TEXT, (const uint8_t *)s, strlen(s)))
                    abort();
            } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
                const ProtobufCMessage *sub = ((const ProtobufCMessage *const *)items)[k];
                if (sub)
                    fuzz_strings_ok(sub, depth + 1);
            }
        }
    }
}

/* Decode + validate data (selector byte, then wire bytes) with the rules
 * rules_for gives msgs[selector]; returns the accepted message or NULL. */
static ProtobufCMessage *fuzz_one(const rpc_rules *(*rules_for)(const ProtobufCMessageDescriptor *),
                                  const ProtobufCMessageDescriptor *const *msgs, size_t n_msgs,
                                  const uint8_t *data, size_t size, const rpc_rules **out_rules)
{
    if (size < 1)
        return NULL;
    const ProtobufCMessageDescriptor *d = msgs[data[0] % n_msgs];
    const rpc_rules *r = rules_for(d) ? rules_for(d) : fuzz_std_rules(d);
    if (!r)
        abort();   /* a request without rules would be refused in production: a table bug */
    *out_rules = r;
    sg_err e;
    /* the walk alone, on bytes the decoder may refuse */
    int vrc = rpc_validate(r, data + 1, size - 1, &e);
    if (vrc != 0 && (vrc != SG_EINVAL || !e.msg[0]))
        abort();
    ProtobufCMessage *m = rpc_unpack_valid(r, data + 1, size - 1, &e);
    if (!m)
        return NULL;
    if (vrc != 0)
        abort();   /* accepted by one path and not the other */
    fuzz_strings_ok(m, 0);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    protobuf_c_message_pack(m, b);
    if (rpc_validate(r, b, n, &e) != 0)
        abort();   /* what was accepted re-encodes to something refused */
    free(b);
    return m;
}

#endif
