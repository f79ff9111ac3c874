/* host_request_fuzz.c — libFuzzer target for every sandgate.v1.Host request's
 * decode and validation as host_unpack runs them (host/core/rules.c over
 * rpc/validate.c), then a create's shape check (host_check_create).
 * Input: a selector byte choosing the message (mod 11: the host's nine requests, then
 * Health.Check and reflection), then its wire
 * bytes. Seed corpus: tests/fuzz/corpus/host_request_fuzz (make_corpus.py). */
#include <stdint.h>

#include "host/core/rules.h"
#include "tests/fuzz/fuzz_requests.h"

static const ProtobufCMessageDescriptor *const msgs[] = {
    &sandgate__v1__host_create_request__descriptor,
    &sandgate__v1__host_sandbox_ref__descriptor,
    &sandgate__v1__host_list_request__descriptor,
    &sandgate__v1__host_extend_request__descriptor,
    &sandgate__v1__create_context_request__descriptor,
    &sandgate__v1__run_code_request__descriptor,
    &sandgate__v1__exec_request__descriptor,
    &sandgate__v1__write_file_request__descriptor,
    &sandgate__v1__read_file_request__descriptor,
    FUZZ_STD_REQUESTS,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const rpc_rules *r = NULL;
    ProtobufCMessage *m = fuzz_one(host_rules_for, msgs, sizeof msgs / sizeof msgs[0], data, size, &r);
    if (!m)
        return 0;
    if (m->descriptor == &sandgate__v1__host_create_request__descriptor) {
        sg_err e;
        host_check_create((const Sandgate__V1__HostCreateRequest *)m, &e);
        /* host_unpack is the production path: it must agree */
        ProtobufCMessage *again = host_unpack(m->descriptor, data + 1, size - 1, &e);
        if (!again)
            abort();
        protobuf_c_message_free_unpacked(again, NULL);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
