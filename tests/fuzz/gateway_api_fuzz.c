/* gateway_api_fuzz.c — libFuzzer target for the public requests added with
 * workspace files, contexts and labels: their decode and validation as
 * gw_req_begin runs them (gateway/rules.c over rpc/validate.c), then the
 * numeric bounds (gw_check_ranges: ListFiles max_entries, MakeDir/Upload
 * mode, DownloadFile chunk_bytes, UploadFile data, List page_size and
 * filter count), a create's label limits (gw_check_metadata) and
 * ListSandboxes' page token (gateway/page_token.c). Input: a selector byte
 * (mod 15: the messages below, then Health.Check and reflection), then the
 * message's wire bytes. Promises checked beyond fuzz_requests.h's: a refusal
 * is SG_EINVAL and its message starts with the name of a field of that
 * message (what the client is told to fix); a token that parses names a
 * valid sandbox id, and the token made from that id parses back to it.
 * Seed corpus: tests/fuzz/corpus/gateway_api_fuzz (make_corpus.py). */
#include <stdint.h>
#include <stdio.h>

#include "gateway/page_token.h"
#include "gateway/rules.h"
#include "policy/policy.h"
#include "tests/fuzz/fuzz_requests.h"

static const ProtobufCMessageDescriptor *const msgs[] = {
    &sandgate__v1__list_files_request__descriptor,
    &sandgate__v1__stat_file_request__descriptor,
    &sandgate__v1__make_dir_request__descriptor,
    &sandgate__v1__remove_file_request__descriptor,
    &sandgate__v1__rename_file_request__descriptor,
    &sandgate__v1__upload_file_request__descriptor,
    &sandgate__v1__download_file_request__descriptor,
    &sandgate__v1__watch_files_request__descriptor,
    &sandgate__v1__list_contexts_request__descriptor,
    &sandgate__v1__restart_context_request__descriptor,
    &sandgate__v1__delete_context_request__descriptor,
    &sandgate__v1__list_sandboxes_request__descriptor,
    &sandgate__v1__create_sandbox_request__descriptor,
    FUZZ_STD_REQUESTS,
};

/* err names a field of d: "field: ..." (or "field[" for an entry). */
static void names_a_field(const ProtobufCMessageDescriptor *d, const sg_err *e)
{
    if (e->code != SG_EINVAL)
        abort();
    for (unsigned i = 0; i < d->n_fields; i++) {
        size_t n = strlen(d->fields[i].name);
        if (strncmp(e->msg, d->fields[i].name, n) == 0 && (e->msg[n] == ':' || e->msg[n] == '['))
            return;
    }
    abort();
}

static void token_round_trip(const char *tok)
{
    char id[256], again[256], tok2[256];
    if (gw_page_token_parse(tok, id, sizeof id) != 0)
        return;
    if (!rpc_charset_ok(RPC_CS_SANDBOX_ID, (const uint8_t *)id, strlen(id)))
        abort();
    gw_page_token_make(id, tok2, sizeof tok2);
    if (gw_page_token_parse(tok2, again, sizeof again) != 0 || strcmp(id, again) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const rpc_rules *r = NULL;
    ProtobufCMessage *m = fuzz_one(gw_rules_for, msgs, sizeof msgs / sizeof msgs[0], data, size, &r);
    if (!m)
        return 0;
    sg_err e;
    if (gw_check_ranges(m, &e) != 0)
        names_a_field(m->descriptor, &e);
    if (m->descriptor == &sandgate__v1__create_sandbox_request__descriptor &&
        gw_check_metadata((const Sandgate__V1__CreateSandboxRequest *)m,
                          POLICY_METADATA_BYTES_DEFAULT, POLICY_METADATA_ENTRIES_DEFAULT, &e) != 0)
        names_a_field(m->descriptor, &e);
    if (m->descriptor == &sandgate__v1__list_sandboxes_request__descriptor)
        token_round_trip(((const Sandgate__V1__ListSandboxesRequest *)m)->page_token);
    /* any sandbox id makes a token that parses back to it */
    if (m->descriptor == &sandgate__v1__stat_file_request__descriptor) {
        const char *sid = ((const Sandgate__V1__StatFileRequest *)m)->sandbox_id;
        char tok[256], id[256];
        if (sid[0]) {
            gw_page_token_make(sid, tok, sizeof tok);
            if (gw_page_token_parse(tok, id, sizeof id) != 0 || strcmp(id, sid) != 0)
                abort();
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
