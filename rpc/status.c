/* status.c — the one place where sandgate's domain codes become gRPC status
 * codes (policy/ and tenancy/ never include grpc), and the machine-readable
 * reason a failing status may carry: a google.rpc.Status holding one
 * ErrorInfo in the grpc-status-details-bin trailer, built and read here. */
#include <stdlib.h>
#include <string.h>

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

/* ---- google.rpc.Status with one ErrorInfo, in grpc-status-details-bin ---- */

#define INFO_MD_MAX 8

int rpc_call_fail_info(rpc_call *c, grpc_status_code code, const char *message,
                       const char *reason, const rpc_kv *md, size_t n_md)
{
    if (n_md > INFO_MD_MAX)
        n_md = INFO_MD_MAX;
    Sandgate__V1__ErrorInfo info;
    sandgate__v1__error_info__init(&info);
    info.reason = (char *)reason;
    info.domain = "sandgate";
    Sandgate__V1__ErrorInfo__MetadataEntry ents[INFO_MD_MAX], *ptrs[INFO_MD_MAX];
    for (size_t i = 0; i < n_md; i++) {
        sandgate__v1__error_info__metadata_entry__init(&ents[i]);
        ents[i].key = (char *)md[i].key;
        ents[i].value = (char *)(md[i].value ? md[i].value : "");
        ptrs[i] = &ents[i];
    }
    info.n_metadata = n_md;
    info.metadata = ptrs;

    size_t ilen = protobuf_c_message_get_packed_size(&info.base);
    uint8_t *ibuf = malloc(ilen ? ilen : 1);
    protobuf_c_message_pack(&info.base, ibuf);
    Sandgate__V1__RpcAny any;
    sandgate__v1__rpc_any__init(&any);
    any.type_url = "type.googleapis.com/google.rpc.ErrorInfo";
    any.value.data = ibuf;
    any.value.len = ilen;
    Sandgate__V1__RpcAny *anys[] = {&any};
    Sandgate__V1__RpcStatus st;
    sandgate__v1__rpc_status__init(&st);
    st.code = (int32_t)code;
    st.message = (char *)(message ? message : "");
    st.n_details = 1;
    st.details = anys;
    size_t slen = protobuf_c_message_get_packed_size(&st.base);
    grpc_slice val = grpc_slice_malloc(slen);
    protobuf_c_message_pack(&st.base, GRPC_SLICE_START_PTR(val));
    free(ibuf);

    grpc_metadata out = {.key = grpc_slice_from_static_string("grpc-status-details-bin"),
                         .value = val};
    int rc = rpc_call_finish_md(c, code, message, &out, 1);
    grpc_slice_unref(val);
    return rc;
}

Sandgate__V1__ErrorInfo *rpc_error_info_parse(const uint8_t *bin, size_t len)
{
    if (!bin || !len)
        return NULL;
    Sandgate__V1__RpcStatus *st = sandgate__v1__rpc_status__unpack(NULL, len, bin);
    if (!st)
        return NULL;
    Sandgate__V1__ErrorInfo *info = NULL;
    for (size_t i = 0; i < st->n_details && !info; i++)
        if (st->details[i]->type_url &&
            strcmp(st->details[i]->type_url, "type.googleapis.com/google.rpc.ErrorInfo") == 0)
            info = sandgate__v1__error_info__unpack(NULL, st->details[i]->value.len,
                                                    st->details[i]->value.data);
    sandgate__v1__rpc_status__free_unpacked(st, NULL);
    return info;
}

const char *rpc_error_info_get(const Sandgate__V1__ErrorInfo *info, const char *key)
{
    for (size_t i = 0; info && i < info->n_metadata; i++)
        if (strcmp(info->metadata[i]->key, key) == 0)
            return info->metadata[i]->value;
    return NULL;
}
