/* reflection.h — gRPC server reflection (grpc.reflection.v1 and v1alpha,
 * ServerReflectionInfo) so grpcurl, grpcui and Postman can discover a
 * daemon's API. Answers from a FileDescriptorSet embedded at build time
 * (see the daemons' CMakeLists: protoc --descriptor_set_out); the services
 * listed are the ones the server registered, so a daemon never advertises
 * an API it does not serve. */
#ifndef SG_RPC_REFLECTION_H
#define SG_RPC_REFLECTION_H

#include "rpc/rpc.h"

/* Register both reflection services on s (before rpc_server_start). set
 * must outlive the server (a build-time constant). */
int rpc_reflection_register(rpc_server *s, const uint8_t *set, size_t len, sg_err *err);

#endif
