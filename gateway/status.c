/* status.c — failing a public call so an agent can tell a policy block from
 * an outage: PERMISSION_DENIED / RESOURCE_EXHAUSTED carry a google.rpc.Status
 * in the grpc-status-details-bin trailer with an ErrorInfo naming the
 * reason, the rule and what was asked. Never secret values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw.h"
#include "sandgate/v1/errors.pb-c.h"

void gw_fail(rpc_call *c, const sg_err *e)
{
    rpc_call_fail(c, e);
}

void gw_fail_policy(rpc_call *c, int code, const char *reason, const char *rule,
                    const char *message, const char *asked)
{
    Sandgate__V1__ErrorInfo info;
    sandgate__v1__error_info__init(&info);
    info.reason = (char *)reason;
    info.domain = "sandgate";
    Sandgate__V1__ErrorInfo__MetadataEntry e_rule, e_asked;
    sandgate__v1__error_info__metadata_entry__init(&e_rule);
    sandgate__v1__error_info__metadata_entry__init(&e_asked);
    e_rule.key = "rule";
    e_rule.value = (char *)(rule ? rule : "");
    e_asked.key = "asked";
    e_asked.value = (char *)(asked ? asked : "");
    Sandgate__V1__ErrorInfo__MetadataEntry *md[] = {&e_rule, &e_asked};
    info.n_metadata = 2;
    info.metadata = md;

    size_t ilen = protobuf_c_message_get_packed_size(&info.base);
    uint8_t *ibuf = malloc(ilen);
    protobuf_c_message_pack(&info.base, ibuf);
    Sandgate__V1__RpcAny any;
    sandgate__v1__rpc_any__init(&any);
    any.type_url = "type.googleapis.com/google.rpc.ErrorInfo";
    any.value.data = ibuf;
    any.value.len = ilen;
    Sandgate__V1__RpcAny *anys[] = {&any};
    Sandgate__V1__RpcStatus st;
    sandgate__v1__rpc_status__init(&st);
    grpc_status_code gcode = rpc_status_from_err(code);
    st.code = (int32_t)gcode;
    st.message = (char *)message;
    st.n_details = 1;
    st.details = anys;
    size_t slen = protobuf_c_message_get_packed_size(&st.base);
    grpc_slice val = grpc_slice_malloc(slen);
    protobuf_c_message_pack(&st.base, GRPC_SLICE_START_PTR(val));
    free(ibuf);

    grpc_metadata md_out = {.key = grpc_slice_from_static_string("grpc-status-details-bin"),
                            .value = val};
    rpc_call_finish_md(c, gcode, message, &md_out, 1);
    grpc_slice_unref(val);
}
