/* procs.c — background processes: ListProcesses, AttachProcess, SendInput,
 * SignalProcess, WaitProcess, ResizePty, and the shape of Exec's process
 * fields (background, pty, pty_rows/cols; actions.c forwards the Exec).
 * Each argument is checked here at the edge (common/procargs.c, the same
 * checks the host makes again), the sandbox proven the caller's
 * (request.c), and the call relayed to the host as it is. AttachProcess
 * streams pass through unparsed; WaitProcess may wait up to an hour. */
#include <stdio.h>
#include <stdlib.h>

#include "common/procargs.h"
#include "gateway/request.h"

#define ATTACH_TIMEOUT_S (7 * 86400)
#define WAIT_GRACE_S 10

static int check(gw_req *r, int rc, const sg_err *e)
{
    if (rc != 0)
        gw_req_fail(r, e);
    return rc;
}

/* The process_id every call names. */
static int check_id(gw_req *r, const char *id)
{
    sg_err e;
    return check(r, sg_proc_check_id(id, &e), &e);
}

int gw_check_exec_process(gw_req *r, const Sandgate__V1__ExecRequest *req)
{
    sg_err e;
    return check(r, sg_proc_check_pty(req->pty, req->pty_rows, req->pty_cols, &e), &e);
}

static void list_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/ListProcesses", NULL, NULL, 10); }
static void input_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/SendInput", NULL, NULL, 10); }
static void signal_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/SignalProcess", NULL, NULL, 10); }
static void resize_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/ResizePty", NULL, NULL, 10); }

static uint32_t exit_field(void)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(
        &sandgate__v1__process_event__descriptor, "exit");
    return f ? f->id : 0;
}

static void attach_owned(gw_req *r)
{
    gw_req_forward_stream(r, "/sandgate.v1.Host/AttachProcess", exit_field(), ATTACH_TIMEOUT_S);
}

static void wait_owned(gw_req *r)
{
    const Sandgate__V1__WaitProcessRequest *m = (const void *)r->msg;
    uint32_t t = m->timeout_seconds ? m->timeout_seconds : SG_PROC_WAIT_DEFAULT_S;
    gw_req_forward(r, "/sandgate.v1.Host/WaitProcess", NULL, NULL, (double)t + WAIT_GRACE_S);
}

static void on_list(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__list_processes_request__descriptor, "processes");
    if (r)
        gw_req_with_owner(r, list_owned);
}

static void on_attach(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__attach_process_request__descriptor, "attach");
    if (r && check_id(r, ((const Sandgate__V1__AttachProcessRequest *)r->msg)->process_id) == 0)
        gw_req_with_owner(r, attach_owned);
}

static void on_input(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__send_input_request__descriptor, "send_input");
    if (!r)
        return;
    const Sandgate__V1__SendInputRequest *m = (const void *)r->msg;
    sg_err e;
    if (check_id(r, m->process_id) != 0)
        return;
    if (m->data.len > SG_PROC_INPUT_MAX) {
        sg_err_set(&e, SG_EINVAL, "data: %zu bytes; at most %u in one call", m->data.len,
                   SG_PROC_INPUT_MAX);
        gw_req_fail(r, &e);
        return;
    }
    gw_req_with_owner(r, input_owned);
}

static void on_signal(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__signal_process_request__descriptor, "signal");
    if (!r)
        return;
    const Sandgate__V1__SignalProcessRequest *m = (const void *)r->msg;
    sg_err e;
    int sig;
    if (check_id(r, m->process_id) == 0 &&
        check(r, sg_proc_parse_signal(m->signal, m->signal_name, &sig, &e), &e) == 0)
        gw_req_with_owner(r, signal_owned);
}

static void on_wait(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__wait_process_request__descriptor, "wait");
    if (!r)
        return;
    const Sandgate__V1__WaitProcessRequest *m = (const void *)r->msg;
    sg_err e;
    if (check_id(r, m->process_id) != 0)
        return;
    if (m->timeout_seconds > SG_PROC_WAIT_MAX_S) {
        sg_err_set(&e, SG_EINVAL, "timeout_seconds: %u; at most %d", m->timeout_seconds,
                   SG_PROC_WAIT_MAX_S);
        gw_req_fail(r, &e);
        return;
    }
    gw_req_with_owner(r, wait_owned);
}

static void on_resize(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__resize_pty_request__descriptor, "resize_pty");
    if (!r)
        return;
    const Sandgate__V1__ResizePtyRequest *m = (const void *)r->msg;
    sg_err e;
    if (check_id(r, m->process_id) == 0 &&
        check(r, sg_proc_check_size(m->rows, m->cols, &e), &e) == 0)
        gw_req_with_owner(r, resize_owned);
}

int gw_procs_register(rpc_server *srv, sg_err *err)
{
    static const struct {
        const char *path;
        rpc_handler_fn fn;
    } methods[] = {
        {"/sandgate.v1.Sandboxes/ListProcesses", on_list},
        {"/sandgate.v1.Sandboxes/AttachProcess", on_attach},
        {"/sandgate.v1.Sandboxes/SendInput", on_input},
        {"/sandgate.v1.Sandboxes/SignalProcess", on_signal},
        {"/sandgate.v1.Sandboxes/WaitProcess", on_wait},
        {"/sandgate.v1.Sandboxes/ResizePty", on_resize},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (rpc_server_add_method(srv, methods[i].path, methods[i].fn, NULL, err) != 0)
            return -1;
    return 0;
}
