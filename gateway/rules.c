/* rules.c — the gateway's table of field rules for every sandgate.v1
 * request (sandgate.proto documents them), and the env limit check. The
 * walk itself is rpc/validate.c. Lengths are bytes:
 *   ids (user_id, task_id, template, context_id, secret names): 127, no
 *     space, control or invisible format character (rpc/validate.h); sandbox_id: 79 of [a-z0-9_-];
 *   env names: [A-Za-z_][A-Za-z0-9_]*, 128; egress hosts: 253; paths: 4095;
 *   user_token: 1023; code and command: the message size limit only.
 * Every string is valid UTF-8 without NUL. */
#include <string.h>

#include "gateway/rules.h"
#include "policy/policy.h"

#define ID_MAX 127         /* TENANCY_NAME_MAX - 1 */
#define SANDBOX_ID_MAX 79  /* the host's HOST_ID_MAX - 1 */
#define PATH_MAX_BYTES 4095
#define NO_LIMIT UINT32_MAX

#define SANDBOX_ID {"sandbox_id", RPC_CS_SANDBOX_ID, SANDBOX_ID_MAX}
#define USER_ID {"user_id", RPC_CS_ID, ID_MAX}

static const rpc_field_rule create_fields[] = {
    {"template", RPC_CS_ID, ID_MAX},
    USER_ID,
    {"task_id", RPC_CS_ID, ID_MAX},
    {"env.key", RPC_CS_ENV_NAME, 128},
    {"env.value", RPC_CS_TEXT, POLICY_ENV_VAR_MAX - 1},
    {"egress.host", RPC_CS_ID, 253},
    {"secrets", RPC_CS_ID, ID_MAX},
    {"user_token", RPC_CS_ID, 1023},
    {"metadata.key", RPC_CS_LABEL_KEY, POLICY_METADATA_KEY_MAX},
    {"metadata.value", RPC_CS_TEXT, POLICY_METADATA_VALUE_MAX},
};
static const rpc_field_rule ref_fields[] = {SANDBOX_ID, USER_ID};
static const rpc_field_rule list_fields[] = {
    USER_ID,
    {"metadata.key", RPC_CS_LABEL_KEY, POLICY_METADATA_KEY_MAX},
    {"metadata.value", RPC_CS_TEXT, POLICY_METADATA_VALUE_MAX},
    {"page_token", RPC_CS_ID, 255},
};
static const rpc_field_rule context_fields[] = {SANDBOX_ID, USER_ID,
                                                {"language", RPC_CS_ID, 32}};
static const rpc_field_rule ctx_ref_fields[] = {SANDBOX_ID, USER_ID,
                                                {"context_id", RPC_CS_ID, ID_MAX}};
static const rpc_field_rule run_fields[] = {SANDBOX_ID, USER_ID,
                                            {"context_id", RPC_CS_ID, ID_MAX},
                                            {"code", RPC_CS_TEXT, NO_LIMIT}};
static const rpc_field_rule exec_fields[] = {SANDBOX_ID, USER_ID,
                                             {"command", RPC_CS_TEXT, NO_LIMIT}};
static const rpc_field_rule file_fields[] = {SANDBOX_ID, USER_ID,
                                             {"path", RPC_CS_TEXT, PATH_MAX_BYTES}};
static const rpc_field_rule rename_fields[] = {SANDBOX_ID, USER_ID,
                                               {"from_path", RPC_CS_TEXT, PATH_MAX_BYTES},
                                               {"to_path", RPC_CS_TEXT, PATH_MAX_BYTES}};

/* process ids ("p" and a number) are checked for shape by common/procargs.c */
static const rpc_field_rule proc_fields[] = {SANDBOX_ID, USER_ID, {"process_id", RPC_CS_ID, 15}};
static const rpc_field_rule signal_fields[] = {SANDBOX_ID, USER_ID, {"process_id", RPC_CS_ID, 15},
                                               {"signal_name", RPC_CS_ID, 16}};

#define N(a) (sizeof a / sizeof a[0])
/* default_max: a string field added later without a row still gets a bound. */
static const rpc_rules table[] = {
    {&sandgate__v1__create_sandbox_request__descriptor, create_fields, N(create_fields), 4096},
    {&sandgate__v1__get_sandbox_request__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__list_sandboxes_request__descriptor, list_fields, N(list_fields), 4096},
    {&sandgate__v1__kill_sandbox_request__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__extend_sandbox_request__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__create_context_request__descriptor, context_fields, N(context_fields), 4096},
    {&sandgate__v1__list_contexts_request__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__restart_context_request__descriptor, ctx_ref_fields, N(ctx_ref_fields), 4096},
    {&sandgate__v1__delete_context_request__descriptor, ctx_ref_fields, N(ctx_ref_fields), 4096},
    {&sandgate__v1__run_code_request__descriptor, run_fields, N(run_fields), 4096},
    {&sandgate__v1__exec_request__descriptor, exec_fields, N(exec_fields), 4096},
    {&sandgate__v1__write_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__read_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__list_files_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__stat_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__make_dir_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__remove_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__rename_file_request__descriptor, rename_fields, N(rename_fields), 4096},
    {&sandgate__v1__upload_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__download_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__watch_files_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__list_processes_request__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__attach_process_request__descriptor, proc_fields, N(proc_fields), 4096},
    {&sandgate__v1__send_input_request__descriptor, proc_fields, N(proc_fields), 4096},
    {&sandgate__v1__signal_process_request__descriptor, signal_fields, N(signal_fields), 4096},
    {&sandgate__v1__wait_process_request__descriptor, proc_fields, N(proc_fields), 4096},
    {&sandgate__v1__resize_pty_request__descriptor, proc_fields, N(proc_fields), 4096},
};

const rpc_rules *gw_rules_for(const ProtobufCMessageDescriptor *d)
{
    return rpc_rules_find(table, N(table), d);
}

int gw_check_metadata(const Sandgate__V1__CreateSandboxRequest *req, uint32_t max_bytes,
                      uint32_t max_entries, sg_err *err)
{
    if (max_entries && req->n_metadata > max_entries)
        return sg_err_set(err, SG_EINVAL,
                          "metadata: %zu labels; the policy limit is %u (limits.metadata_entries)",
                          req->n_metadata, max_entries);
    uint64_t total = 0;
    for (size_t i = 0; i < req->n_metadata; i++)
        total += strlen(req->metadata[i]->key) + strlen(req->metadata[i]->value);
    if (max_bytes && total > max_bytes)
        return sg_err_set(err, SG_EINVAL,
                          "metadata: %llu bytes (keys and values); the policy limit is %u "
                          "(limits.metadata_bytes)", (unsigned long long)total, max_bytes);
    return 0;
}

int gw_check_env(const Sandgate__V1__CreateSandboxRequest *req, uint64_t max_bytes,
                 uint32_t max_entries, sg_err *err)
{
    if (max_entries && req->n_env > max_entries)
        return sg_err_set(err, SG_EINVAL,
                          "env: %zu variables; the policy limit is %u (limits.env_entries)",
                          req->n_env, max_entries);
    uint64_t total = 0;
    for (size_t i = 0; i < req->n_env; i++) {
        size_t one = strlen(req->env[i]->key) + strlen(req->env[i]->value);
        if (one > POLICY_ENV_VAR_MAX)
            return sg_err_set(err, SG_EINVAL,
                              "env[\"%s\"]: name and value are %zu bytes; the limit for one "
                              "variable is %u", req->env[i]->key, one, POLICY_ENV_VAR_MAX);
        total += one;
    }
    if (max_bytes && total > max_bytes)
        return sg_err_set(err, SG_EINVAL,
                          "env: %llu bytes (names and values); the policy limit is %llu "
                          "(limits.env_bytes)",
                          (unsigned long long)total, (unsigned long long)max_bytes);
    return 0;
}

/* ---- ranges: the numeric fields' bounds, after the strings' rules ---- */

#define LIST_FILES_MAX 10000
#define CHUNK_MAX (4u << 20)   /* the host's HOST_CHUNK_MAX */
#define LIST_PAGE_MAX 1000
#define LIST_FILTER_MAX 16

static int too_big(sg_err *err, const char *field, unsigned long long v, unsigned long long max,
                   int octal)
{
    if (octal)
        return sg_err_set(err, SG_EINVAL, "%s: %#llo; at most %#llo", field, v, max);
    return sg_err_set(err, SG_EINVAL, "%s: %llu; at most %llu", field, v, max);
}

int gw_check_ranges(const ProtobufCMessage *m, sg_err *err)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (d == &sandgate__v1__list_files_request__descriptor) {
        const Sandgate__V1__ListFilesRequest *r = (const void *)m;
        if (r->max_entries > LIST_FILES_MAX)
            return too_big(err, "max_entries", r->max_entries, LIST_FILES_MAX, 0);
    } else if (d == &sandgate__v1__make_dir_request__descriptor) {
        const Sandgate__V1__MakeDirRequest *r = (const void *)m;
        if (r->mode > 0777)
            return too_big(err, "mode", r->mode, 0777, 1);
    } else if (d == &sandgate__v1__download_file_request__descriptor) {
        const Sandgate__V1__DownloadFileRequest *r = (const void *)m;
        if (r->chunk_bytes > CHUNK_MAX)
            return too_big(err, "chunk_bytes", r->chunk_bytes, CHUNK_MAX, 0);
    } else if (d == &sandgate__v1__upload_file_request__descriptor) {
        const Sandgate__V1__UploadFileRequest *r = (const void *)m;
        if (r->data.len > CHUNK_MAX)
            return sg_err_set(err, SG_EINVAL, "data: %zu bytes in one message; at most %u",
                              r->data.len, CHUNK_MAX);
        if (r->mode > 0777)
            return too_big(err, "mode", r->mode, 0777, 1);
    } else if (d == &sandgate__v1__list_sandboxes_request__descriptor) {
        const Sandgate__V1__ListSandboxesRequest *r = (const void *)m;
        if (r->page_size > LIST_PAGE_MAX)
            return too_big(err, "page_size", r->page_size, LIST_PAGE_MAX, 0);
        if (r->n_metadata > LIST_FILTER_MAX)
            return sg_err_set(err, SG_EINVAL, "metadata: %zu labels to match; at most %u",
                              r->n_metadata, LIST_FILTER_MAX);
    }
    return 0;
}
