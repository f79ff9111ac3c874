/* codec.c — protobuf-c messages to and from grpc byte buffers. Received
 * sizes are already bounded by GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH; unpack
 * failures are the caller's INVALID_ARGUMENT. Also a wire-format scan that
 * lifts one embedded message out without decoding anything (a relay that
 * only unwraps should not pay a full unpack and repack). */
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc.h"

grpc_byte_buffer *rpc_pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

uint8_t *rpc_flatten(grpc_byte_buffer *bb, size_t *len)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb)) {
        *len = 0;
        return NULL;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    *len = GRPC_SLICE_LENGTH(s);
    uint8_t *out = malloc(*len ? *len : 1);
    memcpy(out, GRPC_SLICE_START_PTR(s), *len);
    grpc_slice_unref(s);
    return out;
}

ProtobufCMessage *rpc_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                             size_t len, sg_err *err)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, buf);
    if (!m)
        sg_err_set(err, SG_EINVAL, "request is not a valid %s message", d->name);
    return m;
}

/* One varint at *p (at most 10 bytes, inside end); -1 if truncated. */
static int wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

int rpc_wire_field(const uint8_t *buf, size_t len, uint32_t field, size_t *off, size_t *n)
{
    const uint8_t *p = buf, *end = buf + len;
    int found = 0;
    while (p < end) {
        uint64_t key, v;
        if (wire_varint(&p, end, &key) != 0)
            return -1;
        switch (key & 7) {
        case 0:
            if (wire_varint(&p, end, &v) != 0)
                return -1;
            break;
        case 1:
        case 5: {
            size_t w = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < w)
                return -1;
            p += w;
            break;
        }
        case 2:
            if (wire_varint(&p, end, &v) != 0 || v > (uint64_t)(end - p))
                return -1;
            if ((key >> 3) == field) {
                if (found++)
                    return -1;   /* a repeated embedded message means merging: not ours */
                *off = (size_t)(p - buf);
                *n = (size_t)v;
            }
            p += v;
            break;
        default:
            return -1;   /* groups: never in our protos */
        }
    }
    return found ? 0 : -1;
}

grpc_byte_buffer *rpc_wire_submessage(grpc_byte_buffer *bb, uint32_t field)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    size_t off, n;
    grpc_byte_buffer *out = NULL;
    if (rpc_wire_field(GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s), field, &off, &n) == 0) {
        grpc_slice sub = grpc_slice_sub(s, off, off + n);
        out = grpc_raw_byte_buffer_create(&sub, 1);
        grpc_slice_unref(sub);
    }
    grpc_slice_unref(s);
    return out;
}

/* Only the key is read, from the first slice when it holds it whole: a
 * relay looks at every stream message and must not copy a 64 KiB chunk to
 * learn its kind. */
uint32_t rpc_wire_first_field(grpc_byte_buffer *bb)
{
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
        return 0;
    grpc_slice *first = NULL;
    uint64_t key = 0;
    int ok = -1;
    if (grpc_byte_buffer_reader_peek(&r, &first)) {
        const uint8_t *p = GRPC_SLICE_START_PTR(*first);
        ok = wire_varint(&p, p + GRPC_SLICE_LENGTH(*first), &key);
    }
    grpc_byte_buffer_reader_destroy(&r);
    if (ok != 0 && grpc_byte_buffer_length(bb) > 0) {
        /* the key runs on past the first slice: read it all (rare) */
        grpc_byte_buffer_reader_init(&r, bb);
        grpc_slice all = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        const uint8_t *p = GRPC_SLICE_START_PTR(all);
        ok = wire_varint(&p, p + GRPC_SLICE_LENGTH(all), &key);
        grpc_slice_unref(all);
    }
    return ok == 0 && (key >> 3) <= UINT32_MAX ? (uint32_t)(key >> 3) : 0;
}
