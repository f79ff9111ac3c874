/* actions.c — calls that act inside a sandbox the caller owns:
 * CreateContext, ListContexts, RestartContext, DeleteContext, RunCode, Exec,
 * WriteFile, ReadFile. Each is capped by the
 * tenant's limits (timeout, output, file size) and relayed to the host; the
 * event streams pass through as bytes, unparsed. */
#include <stdio.h>
#include <stdlib.h>

#include "gateway/request.h"
#include "policy/query.h"

/* Grace on top of the action timeout for the host's interrupt ladder. */
#define ACTION_GRACE_S 15

/* A stream message's field number by name (the field that marks the last). */
static uint32_t field_id(const ProtobufCMessageDescriptor *d, const char *name)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
    return f ? f->id : 0;
}

static void caps(gw_req *r, uint32_t timeout, uint64_t output, policy_limits *lim)
{
    policy_limits asked = {.action_timeout_s = timeout, .output_bytes = output};
    policy_decision d;
    policy_decide_limits(r->pol, r->id.tenant, &asked, lim, &d);
}

static void context_owned(gw_req *r)
{
    gw_req_forward(r, "/sandgate.v1.Host/CreateContext", NULL, NULL, 30);
}

static void on_create_context(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__create_context_request__descriptor, "context");
    if (r)
        gw_req_with_owner(r, context_owned);
}

static void list_contexts_owned(gw_req *r)
{
    gw_req_forward(r, "/sandgate.v1.Host/ListContexts", NULL, NULL, 10);
}

static void on_list_contexts(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__list_contexts_request__descriptor, "context");
    if (r)
        gw_req_with_owner(r, list_contexts_owned);
}

/* Answered when the fresh interpreter is ready: as long as a create. */
static void restart_context_owned(gw_req *r)
{
    gw_req_forward(r, "/sandgate.v1.Host/RestartContext", NULL, NULL, 30);
}

static void on_restart_context(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__restart_context_request__descriptor, "context");
    if (r)
        gw_req_with_owner(r, restart_context_owned);
}

static void delete_context_owned(gw_req *r)
{
    gw_req_forward(r, "/sandgate.v1.Host/DeleteContext", NULL, NULL, 10);
}

static void on_delete_context(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__delete_context_request__descriptor, "context");
    if (r)
        gw_req_with_owner(r, delete_context_owned);
}

static void run_owned(gw_req *r)
{
    Sandgate__V1__RunCodeRequest *req = (Sandgate__V1__RunCodeRequest *)r->msg;
    policy_limits lim;
    caps(r, req->timeout_seconds, req->max_output_bytes, &lim);
    req->timeout_seconds = lim.action_timeout_s;
    req->max_output_bytes = lim.output_bytes;
    gw_req_forward_stream(r, "/sandgate.v1.Host/RunCode",
                          field_id(&sandgate__v1__run_code_event__descriptor, "end"),
                          (double)lim.action_timeout_s + ACTION_GRACE_S);
}

static void on_run(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__run_code_request__descriptor, "run_code");
    if (r && gw_req_count_action(r) == 0)
        gw_req_with_owner(r, run_owned);
}

/* A background process: its timeout 0 stays 0 (no timeout; any other is
 * capped by action_timeout) and its output cap is the bytes kept per
 * stream (process_output_bytes). Its Exec ends once it has started. */
static void exec_background_owned(gw_req *r)
{
    Sandgate__V1__ExecRequest *req = (Sandgate__V1__ExecRequest *)r->msg;
    policy_limits asked = {.action_timeout_s = req->timeout_seconds,
                           .process_output_bytes = req->max_output_bytes}, lim;
    policy_decision d;
    policy_decide_limits(r->pol, r->id.tenant, &asked, &lim, &d);
    if (req->timeout_seconds)
        req->timeout_seconds = lim.action_timeout_s;
    req->max_output_bytes = lim.process_output_bytes;
    gw_req_forward_stream(r, "/sandgate.v1.Host/Exec", 0, 30);
}

static void exec_owned(gw_req *r)
{
    Sandgate__V1__ExecRequest *req = (Sandgate__V1__ExecRequest *)r->msg;
    if (req->background) {
        exec_background_owned(r);
        return;
    }
    policy_limits lim;
    caps(r, req->timeout_seconds, req->max_output_bytes, &lim);
    req->timeout_seconds = lim.action_timeout_s;
    req->max_output_bytes = lim.output_bytes;
    gw_req_forward_stream(r, "/sandgate.v1.Host/Exec",
                          field_id(&sandgate__v1__exec_event__descriptor, "exit"),
                          (double)lim.action_timeout_s + ACTION_GRACE_S);
}

static void on_exec(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__exec_request__descriptor, "exec");
    if (r && gw_check_exec_process(r, (const Sandgate__V1__ExecRequest *)r->msg) == 0 &&
        gw_req_count_action(r) == 0)
        gw_req_with_owner(r, exec_owned);
}

static void write_owned(gw_req *r)
{
    Sandgate__V1__WriteFileRequest *req = (Sandgate__V1__WriteFileRequest *)r->msg;
    policy_limits lim;
    caps(r, 0, 0, &lim);
    if (lim.file_bytes && req->data.len > lim.file_bytes) {
        char msg[160];
        snprintf(msg, sizeof msg, "file is %zu bytes; the policy limit is %llu", req->data.len,
                 (unsigned long long)lim.file_bytes);
        gw_fail_policy(r->in, SG_EQUOTA, "QUOTA_EXCEEDED", "limits.file_bytes", msg, req->path);
        gw_req_free(r);
        return;
    }
    gw_req_forward(r, "/sandgate.v1.Host/WriteFile", NULL, NULL, 30);
}

static void on_write_file(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__write_file_request__descriptor, "write_file");
    if (r)
        gw_req_with_owner(r, write_owned);
}

static void read_owned(gw_req *r)
{
    gw_req_forward(r, "/sandgate.v1.Host/ReadFile", NULL, NULL, 30);
}

static void on_read_file(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__read_file_request__descriptor, "read_file");
    if (r)
        gw_req_with_owner(r, read_owned);
}

int gw_actions_register(rpc_server *srv, sg_err *err)
{
    static const struct {
        const char *path;
        rpc_handler_fn fn;
    } methods[] = {
        {"/sandgate.v1.Sandboxes/CreateContext", on_create_context},
        {"/sandgate.v1.Sandboxes/ListContexts", on_list_contexts},
        {"/sandgate.v1.Sandboxes/RestartContext", on_restart_context},
        {"/sandgate.v1.Sandboxes/DeleteContext", on_delete_context},
        {"/sandgate.v1.Sandboxes/RunCode", on_run},
        {"/sandgate.v1.Sandboxes/Exec", on_exec},
        {"/sandgate.v1.Sandboxes/WriteFile", on_write_file},
        {"/sandgate.v1.Sandboxes/ReadFile", on_read_file},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (rpc_server_add_method(srv, methods[i].path, methods[i].fn, NULL, err) != 0)
            return -1;
    return 0;
}
