/* rules.c — the host's field rules for every sandgate.v1.Host request
 * (host.proto's own and the public ones it reuses) and the shape check of
 * a create. The walk is rpc/validate.c; the gateway's table
 * (gateway/rules.c) holds the same ids and lengths for the public API. */
#include <string.h>

#include "common/isolation.h"
#include "host/core/rules.h"
#include "policy/policy.h"

#define ID_MAX 127          /* TENANCY_NAME_MAX - 1 */
#define SANDBOX_ID_MAX 79   /* HOST_ID_MAX - 1 */
#define NO_LIMIT UINT32_MAX

#define SANDBOX_ID {"sandbox_id", RPC_CS_SANDBOX_ID, SANDBOX_ID_MAX}
#define USER_ID {"user_id", RPC_CS_ID, ID_MAX}

static const rpc_field_rule create_fields[] = {
    {"request.template", RPC_CS_ID, ID_MAX},
    {"request.user_id", RPC_CS_ID, ID_MAX},
    {"request.task_id", RPC_CS_ID, ID_MAX},
    {"request.env.key", RPC_CS_ENV_NAME, 128},
    {"request.env.value", RPC_CS_TEXT, POLICY_ENV_VAR_MAX - 1},
    {"request.egress.host", RPC_CS_ID, 253},
    {"request.secrets", RPC_CS_ID, ID_MAX},
    {"request.user_token", RPC_CS_ID, 1023},
    {"owner.tenant_id", RPC_CS_ID, ID_MAX},
    {"owner.user_id", RPC_CS_ID, ID_MAX},
    {"owner.task_id", RPC_CS_ID, ID_MAX},
    {"egress.id", RPC_CS_TEXT, 255},
    {"egress.host", RPC_CS_ID, 253},
    {"egress.cidr", RPC_CS_ID, 64},
    {"secrets.name", RPC_CS_ID, ID_MAX},
    {"secrets.env", RPC_CS_ENV_NAME, 128},
    SANDBOX_ID,
    {"dedupe_key", RPC_CS_TEXT, 399},   /* ids joined by U+001F (tenancy_dedupe_key) */
    {"request.metadata.key", RPC_CS_LABEL_KEY, POLICY_METADATA_KEY_MAX},
    {"request.metadata.value", RPC_CS_TEXT, POLICY_METADATA_VALUE_MAX},
    {"min_isolation", RPC_CS_ID, 32},
};
static const rpc_field_rule ref_fields[] = {SANDBOX_ID};
static const rpc_field_rule list_fields[] = {{"tenant_id", RPC_CS_ID, ID_MAX}, USER_ID,
                                             {"metadata.key", RPC_CS_LABEL_KEY,
                                              POLICY_METADATA_KEY_MAX},
                                             {"metadata.value", RPC_CS_TEXT,
                                              POLICY_METADATA_VALUE_MAX},
                                             {"after_id", RPC_CS_SANDBOX_ID, SANDBOX_ID_MAX}};
static const rpc_field_rule context_fields[] = {SANDBOX_ID, USER_ID,
                                                {"language", RPC_CS_ID, 32}};
static const rpc_field_rule sb_user_fields[] = {SANDBOX_ID, USER_ID};
static const rpc_field_rule ctx_ref_fields[] = {SANDBOX_ID, USER_ID,
                                                {"context_id", RPC_CS_ID, ID_MAX}};
static const rpc_field_rule run_fields[] = {SANDBOX_ID, USER_ID,
                                            {"context_id", RPC_CS_ID, ID_MAX},
                                            {"code", RPC_CS_TEXT, NO_LIMIT}};
static const rpc_field_rule exec_fields[] = {SANDBOX_ID, USER_ID,
                                             {"command", RPC_CS_TEXT, NO_LIMIT}};
static const rpc_field_rule file_fields[] = {SANDBOX_ID, USER_ID, {"path", RPC_CS_TEXT, 4095}};
static const rpc_field_rule rename_fields[] = {SANDBOX_ID, USER_ID,
                                               {"from_path", RPC_CS_TEXT, 4095},
                                               {"to_path", RPC_CS_TEXT, 4095}};
static const rpc_field_rule write_at_fields[] = {SANDBOX_ID, {"path", RPC_CS_TEXT, 4095}};

/* process ids ("p" and a number) are checked for shape by common/procargs.c */
static const rpc_field_rule proc_fields[] = {SANDBOX_ID, USER_ID, {"process_id", RPC_CS_ID, 15}};
static const rpc_field_rule signal_fields[] = {SANDBOX_ID, USER_ID, {"process_id", RPC_CS_ID, 15},
                                               {"signal_name", RPC_CS_ID, 16}};

#define N(a) (sizeof a / sizeof a[0])
static const rpc_rules table[] = {
    {&sandgate__v1__host_create_request__descriptor, create_fields, N(create_fields), 4096},
    {&sandgate__v1__host_sandbox_ref__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__host_list_request__descriptor, list_fields, N(list_fields), 4096},
    {&sandgate__v1__host_extend_request__descriptor, ref_fields, N(ref_fields), 4096},
    {&sandgate__v1__create_context_request__descriptor, context_fields, N(context_fields), 4096},
    {&sandgate__v1__list_contexts_request__descriptor, sb_user_fields, N(sb_user_fields), 4096},
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
    {&sandgate__v1__host_write_at_request__descriptor, write_at_fields, N(write_at_fields), 4096},
    {&sandgate__v1__download_file_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__watch_files_request__descriptor, file_fields, N(file_fields), 4096},
    {&sandgate__v1__list_processes_request__descriptor, sb_user_fields, N(sb_user_fields), 4096},
    {&sandgate__v1__attach_process_request__descriptor, proc_fields, N(proc_fields), 4096},
    {&sandgate__v1__send_input_request__descriptor, proc_fields, N(proc_fields), 4096},
    {&sandgate__v1__signal_process_request__descriptor, signal_fields, N(signal_fields), 4096},
    {&sandgate__v1__wait_process_request__descriptor, proc_fields, N(proc_fields), 4096},
    {&sandgate__v1__resize_pty_request__descriptor, proc_fields, N(proc_fields), 4096},
};

const rpc_rules *host_rules_for(const ProtobufCMessageDescriptor *d)
{
    return rpc_rules_find(table, N(table), d);
}

ProtobufCMessage *host_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                              size_t len, sg_err *err)
{
    const rpc_rules *r = host_rules_for(d);
    if (!r) {
        sg_err_set(err, SG_EINTERNAL, "no field rules for %s", d->name);
        return NULL;
    }
    return rpc_unpack_valid(r, buf, len, err);
}

/* Bytes s takes as a JSON string (host_sandbox_env's escaping). */
static size_t json_len(const uint8_t *s, size_t n)
{
    size_t k = 2;
    for (size_t i = 0; i < n; i++)
        k += s[i] == '"' || s[i] == '\\' ? 2 : s[i] < 0x20 ? 6 : 1;
    return k;
}

int host_check_create(const Sandgate__V1__HostCreateRequest *req, sg_err *err)
{
    const Sandgate__V1__CreateSandboxRequest *r = req->request;
    if (!r || !req->owner)
        return sg_err_set(err, SG_EINVAL, "create: request and owner are required");
    sg_isolation iso;
    if (req->min_isolation[0] && sg_isolation_parse(req->min_isolation, &iso) < 0)
        return sg_err_set(err, SG_EINVAL, "min_isolation: unknown isolation \"%s\", expected "
                          SG_ISOLATION_EXPECTED, req->min_isolation);   /* charset checked */
    if (r->n_env > POLICY_ENV_ENTRIES_MAX)
        return sg_err_set(err, SG_EINVAL, "env: %zu variables; the limit is %u", r->n_env,
                          POLICY_ENV_ENTRIES_MAX);
    size_t raw = 0, enc = 512;   /* the base variables and proxy settings */
    for (size_t i = 0; i < r->n_env; i++) {
        size_t kl = strlen(r->env[i]->key), vl = strlen(r->env[i]->value);
        if (kl + vl > POLICY_ENV_VAR_MAX)   /* the key passed its charset: safe to show */
            return sg_err_set(err, SG_EINVAL, "request.env[\"%.128s\"]: name and value are %zu "
                              "bytes; the limit for one variable is %u", r->env[i]->key, kl + vl,
                              POLICY_ENV_VAR_MAX);
        raw += kl + vl;
        enc += json_len((const uint8_t *)r->env[i]->key, kl) +
               json_len((const uint8_t *)r->env[i]->value, vl) + 2;
    }
    size_t meta = 0;
    for (size_t i = 0; i < r->n_metadata; i++)
        meta += strlen(r->metadata[i]->key) + strlen(r->metadata[i]->value);
    if (r->n_metadata > POLICY_METADATA_ENTRIES_MAX)
        return sg_err_set(err, SG_EINVAL, "metadata: %zu labels; the limit is %u", r->n_metadata,
                          POLICY_METADATA_ENTRIES_MAX);
    if (meta > POLICY_METADATA_BYTES_MAX)
        return sg_err_set(err, SG_EINVAL, "metadata: %zu bytes (keys and values); the limit is %u",
                          meta, POLICY_METADATA_BYTES_MAX);
    if (raw > POLICY_ENV_BYTES_MAX)
        return sg_err_set(err, SG_EINVAL, "env: %zu bytes (names and values); the limit is %u",
                          raw, POLICY_ENV_BYTES_MAX);
    for (size_t i = 0; i < req->n_secrets; i++)
        enc += json_len((const uint8_t *)req->secrets[i]->env, strlen(req->secrets[i]->env)) +
               json_len(req->secrets[i]->value.data, req->secrets[i]->value.len) + 2;
    if (enc > HOST_ENV_JSON_MAX)
        return sg_err_set(err, SG_EINVAL,
                          "env: %zu bytes once encoded with the granted secrets; the limit is %u "
                          "(fewer control characters, quotes or backslashes encode smaller)",
                          enc, HOST_ENV_JSON_MAX);
    return 0;
}
