/* gateway_request_fuzz.c — libFuzzer target for every public request's decode and
 * validation as gw_req_begin runs them (gateway/rules.c over
 * rpc/validate.c), then the create's env limit check. Input: a selector
 * byte choosing the message (mod 12: the ten public requests, then
 * Health.Check and reflection), then its wire bytes. Seed corpus:
 * tests/fuzz/corpus/gateway_request_fuzz (make_corpus.py). */
#include <stdint.h>

#include "gateway/rules.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz_requests.h"

static const ProtobufCMessageDescriptor *const msgs[] = {
    &sandgate__v1__create_sandbox_request__descriptor,
    &sandgate__v1__get_sandbox_request__descriptor,
    &sandgate__v1__list_sandboxes_request__descriptor,
    &sandgate__v1__kill_sandbox_request__descriptor,
    &sandgate__v1__extend_sandbox_request__descriptor,
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
    ProtobufCMessage *m = fuzz_one(gw_rules_for, msgs, sizeof msgs / sizeof msgs[0], data, size, &r);
    if (!m)
        return 0;
    if (m->descriptor == &sandgate__v1__create_sandbox_request__descriptor) {
        sg_err e;
        gw_check_env((const Sandgate__V1__CreateSandboxRequest *)m, POLICY_ENV_BYTES_DEFAULT,
                     POLICY_ENV_ENTRIES_DEFAULT, &e);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
