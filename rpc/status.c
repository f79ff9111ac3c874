/* status.c — the one place where sandgate's domain codes become gRPC status
 * codes. policy/ and tenancy/ never include grpc. */
#include "rpc/rpc.h"

grpc_status_code rpc_status_from_err(int code)
{
    switch (code) {
    case SG_OK: return GRPC_STATUS_OK;
    case SG_EINVAL: return GRPC_STATUS_INVALID_ARGUMENT;
    case SG_ENOTFOUND: return GRPC_STATUS_NOT_FOUND;
    case SG_EDENIED: return GRPC_STATUS_PERMISSION_DENIED;
    case SG_EUNAUTH: return GRPC_STATUS_UNAUTHENTICATED;
    case SG_EQUOTA: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case SG_EUNAVAIL: return GRPC_STATUS_UNAVAILABLE;
    case SG_EEXISTS: return GRPC_STATUS_ALREADY_EXISTS;
    case SG_ETIMEOUT: return GRPC_STATUS_DEADLINE_EXCEEDED;
    case SG_EPRECOND: return GRPC_STATUS_FAILED_PRECONDITION;
    default: return GRPC_STATUS_INTERNAL;
    }
}

const char *rpc_status_name(grpc_status_code code)
{
    static const char *names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"};
    if ((int)code >= 0 && (size_t)code < sizeof names / sizeof names[0])
        return names[code];
    return "UNKNOWN";
}
