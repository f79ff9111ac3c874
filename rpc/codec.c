/* codec.c — protobuf-c messages to and from grpc byte buffers. Received
 * sizes are already bounded by GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH; unpack
 * failures are the caller's INVALID_ARGUMENT. */
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
