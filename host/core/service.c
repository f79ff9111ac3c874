/* service.c — the host's gRPC surface (sandgate.v1.Host). Each handler
 * decodes, takes H.mu for the table, and either answers at once or hands
 * the call to the sandbox/context/exec that answers it from the I/O loop.
 * The gateway has authenticated and applied policy; the host checks shape
 * (every string field again, host_unpack: rules.c) and state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/core/admit.h"
#include "host/core/files.h"
#include "host/host.h"
#include "host/core/rules.h"
#include "rpc/health.h"

#define UNPACK(type, fn, call)                                                              \
    ({                                                                                      \
        size_t len_;                                                                        \
        const uint8_t *buf_ = rpc_call_request(call, &len_);                                \
        sg_err e_;                                                                          \
        type *m_ = (type *)host_unpack(&fn##__descriptor, buf_, len_, &e_);                  \
        if (!m_)                                                                            \
            rpc_call_fail(call, &e_);                                                       \
        m_;                                                                                 \
    })

static void fail(rpc_call *c, int code, const char *msg)
{
    sg_err e;
    sg_err_set(&e, code, "%s", msg);
    rpc_call_fail(c, &e);
}

/* NOT_FOUND for an id not in the table. An id this host's earlier life was
 * running when it ended (journal.c) says so: reason SANDBOX_LOST, with its
 * owner in the metadata, since only the gateway can tell whether the caller
 * may hear it (it answers anyone else exactly as for an unknown id). */
static void not_found(rpc_call *c, const char *id)
{
    host_lost l;
    if (host_journal_lost(id, &l) != 0) {
        fail(c, SG_ENOTFOUND, "no such sandbox");
        return;
    }
    char at[32] = "";
    time_t t = (time_t)(l.lost_ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    rpc_kv md[] = {{"sandbox_id", id},  {"tenant_id", l.tenant}, {"user_id", l.user},
                   {"task_id", l.task}, {"lost_at", at}};
    rpc_call_fail_info(c, GRPC_STATUS_NOT_FOUND, "sandbox lost: its host restarted",
                       "SANDBOX_LOST", md, sizeof md / sizeof md[0]);
}

/* Look up a running sandbox with H.mu held; answers NOT_FOUND itself. */
static host_sandbox *lookup(rpc_call *c, const char *id)
{
    host_sandbox *sb = host_sandbox_find(id);
    if (!sb || sb->state == SB_KILLING) {
        not_found(c, id);
        return NULL;
    }
    if (sb->state != SB_RUNNING) {
        fail(c, SG_EPRECOND, "sandbox is still starting");
        return NULL;
    }
    return sb;
}

static void on_create(rpc_call *c, void *d)
{
    Sandgate__V1__HostCreateRequest *r =
        UNPACK(Sandgate__V1__HostCreateRequest, sandgate__v1__host_create_request, c);
    if (!r)
        return;
    sg_err err;
    if (host_sandbox_create(r, c, &err) != 0)
        rpc_call_fail(c, &err);
    /* wipe secret values from the decoded request */
    for (size_t i = 0; i < r->n_secrets; i++)
        explicit_bzero(r->secrets[i]->value.data, r->secrets[i]->value.len);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void reply_sandbox(rpc_call *c, host_sandbox *sb)
{
    Sandgate__V1__HostSandbox out;
    Sandgate__V1__Sandbox s;
    Sandgate__V1__Owner o;
    host_sandbox_fill(sb, &out, &s, &o);
    rpc_call_reply(c, &out.base);
}

static void on_get(rpc_call *c, void *d)
{
    Sandgate__V1__HostSandboxRef *r =
        UNPACK(Sandgate__V1__HostSandboxRef, sandgate__v1__host_sandbox_ref, c);
    if (!r)
        return;
    pthread_mutex_lock(&H.mu);
    host_sandbox *sb = host_sandbox_find(r->sandbox_id);
    if (sb && sb->state != SB_KILLING)
        reply_sandbox(c, sb);
    else
        not_found(c, r->sandbox_id);
    pthread_mutex_unlock(&H.mu);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* Every label the list asks for, with the same value. */
static int labels_match(const host_sandbox *sb, const Sandgate__V1__HostListRequest *r)
{
    for (size_t i = 0; i < r->n_metadata; i++) {
        const char *v = host_sandbox_label(sb, r->metadata[i]->key);
        if (!v || strcmp(v, r->metadata[i]->value) != 0)
            return 0;
    }
    return 1;
}

static int cmp_listed(const void *a, const void *b)
{
    const Sandgate__V1__HostSandbox *x = *(Sandgate__V1__HostSandbox *const *)a,
                                    *y = *(Sandgate__V1__HostSandbox *const *)b;
    return strcmp(x->sandbox ? x->sandbox->sandbox_id : "", y->sandbox ? y->sandbox->sandbox_id : "");
}

static void on_list(rpc_call *c, void *d)
{
    Sandgate__V1__HostListRequest *r =
        UNPACK(Sandgate__V1__HostListRequest, sandgate__v1__host_list_request, c);
    if (!r)
        return;
    if (r->all_tenants && (r->tenant_id[0] || r->user_id[0])) {
        fail(c, SG_EINVAL, "all_tenants: tenant_id and user_id must be empty");
        protobuf_c_message_free_unpacked(&r->base, NULL);
        return;
    }
    pthread_mutex_lock(&H.mu);
    if (H.draining) {
        /* Shutting down (kill_all): the sandboxes are being stopped, not
         * ended (they answer as lost after a restart), so an empty or
         * shrinking list here is not what the host holds. A gateway that
         * took it as its quota count (load report, create fan-out) forgot a
         * task's live sandbox and placed its create retry on another host
         * (tenancy_host_down under ASan, where the stop lasts longer). */
        pthread_mutex_unlock(&H.mu);
        fail(c, SG_EUNAVAIL, "the host is shutting down; retry later");
        protobuf_c_message_free_unpacked(&r->base, NULL);
        return;
    }
    size_t n = 0, room = r->limit ? r->limit : SIZE_MAX;
    int more = 0;
    Sandgate__V1__HostSandbox *items = calloc(H.n_sandboxes + 1, sizeof *items);
    Sandgate__V1__HostSandbox **ptrs = calloc(H.n_sandboxes + 1, sizeof *ptrs);
    Sandgate__V1__Sandbox *sbs = calloc(H.n_sandboxes + 1, sizeof *sbs);
    Sandgate__V1__Owner *owners = calloc(H.n_sandboxes + 1, sizeof *owners);
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next) {
        if (sb->state != SB_RUNNING ||
            (!r->all_tenants && strcmp(sb->tenant, r->tenant_id) != 0) ||
            (r->user_id[0] && strcmp(sb->user, r->user_id) != 0) ||
            (r->after_id[0] && strcmp(sb->id, r->after_id) <= 0) || !labels_match(sb, r))
            continue;
        host_sandbox_fill(sb, &items[n], &sbs[n], &owners[n]);
        if (r->all_tenants)
            items[n].sandbox = NULL;   /* a load report carries owners only */
        ptrs[n] = &items[n];
        n++;
    }
    /* A page: the first `limit` ids after the cursor. */
    if (r->limit || r->after_id[0])
        qsort(ptrs, n, sizeof *ptrs, cmp_listed);
    if (n > room) {
        n = room;
        more = 1;
    }
    Sandgate__V1__HostListResponse out;
    sandgate__v1__host_list_response__init(&out);
    out.n_sandboxes = n;
    out.sandboxes = ptrs;
    out.more = more;
    rpc_call_reply(c, &out.base);
    pthread_mutex_unlock(&H.mu);
    free(items);
    free(ptrs);
    free(sbs);
    free(owners);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void on_kill(rpc_call *c, void *d)
{
    Sandgate__V1__HostSandboxRef *r =
        UNPACK(Sandgate__V1__HostSandboxRef, sandgate__v1__host_sandbox_ref, c);
    if (!r)
        return;
    pthread_mutex_lock(&H.mu);
    host_sandbox *sb = host_sandbox_find(r->sandbox_id);
    if (sb)
        host_sandbox_kill(sb, c);   /* answered once the cgroup is empty */
    else
        not_found(c, r->sandbox_id);
    pthread_mutex_unlock(&H.mu);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* ---- calls on one running sandbox ----
 * Each is decoded, the table locked, the sandbox named by the request's
 * sandbox_id found (else NOT_FOUND / FAILED_PRECONDITION is answered), and
 * then the op's fn runs with H.mu held. */

typedef struct sandbox_op {
    const char *path;
    const ProtobufCMessageDescriptor *desc;
    void (*fn)(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m);
    void (*on_cancel)(void *call);   /* optional: the client went away */
} sandbox_op;

static const char *sandbox_id_of(const ProtobufCMessage *m)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "sandbox_id");
    return f ? *(const char **)((const char *)m + f->offset) : "";
}

static void on_sandbox_op(rpc_call *c, void *data)
{
    const sandbox_op *op = data;
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    sg_err err;
    ProtobufCMessage *m = host_unpack(op->desc, buf, len, &err);
    if (!m) {
        rpc_call_fail(c, &err);
        return;
    }
    /* before the lock: the callback runs at once if already cancelled */
    if (op->on_cancel)
        rpc_call_on_cancel(c, op->on_cancel, c);
    pthread_mutex_lock(&H.mu);
    host_sandbox *sb = lookup(c, sandbox_id_of(m));
    if (sb)
        op->fn(c, sb, m);
    pthread_mutex_unlock(&H.mu);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void do_extend(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__HostExtendRequest *r = (const Sandgate__V1__HostExtendRequest *)m;
    if (r->expires_at > sb->expires_ms) {
        sb->expires_ms = r->expires_at;
        host_registry_extended(sb->id, sb->tenant, sb->user, sb->expires_ms);   /* gateways read the record */
    }
    reply_sandbox(c, sb);
}

static void do_create_context(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__CreateContextRequest *r = (const Sandgate__V1__CreateContextRequest *)m;
    if (r->language[0] && !host_ctx_language_ok(r->language)) {
        fail(c, SG_EINVAL, "language must be \"python\" or \"javascript\"");
        return;
    }
    int live = 0;
    for (host_ctx *x = sb->contexts; x; x = x->next)
        live += x->state != CTX_DEAD;
    if (live >= HOST_MAX_CONTEXTS) {
        char msg[160];
        snprintf(msg, sizeof msg, "sandbox %s has %d contexts, the most a sandbox may hold",
                 sb->id, live);
        fail(c, SG_EQUOTA, msg);
        return;
    }
    sg_err aerr;
    if (host_admit_check(HOST_ADMIT_CONTEXT, &aerr) != 0) {   /* before anything is made */
        rpc_call_fail(c, &aerr);
        return;
    }
    char id[32];
    snprintf(id, sizeof id, "ctx%u", ++sb->ctx_seq);
    host_ctx *ctx = host_ctx_new(sb, id);
    if (r->language[0])
        snprintf(ctx->language, sizeof ctx->language, "%s", r->language);
    ctx->create_call = rpc_call_ref(c);
    host_ctx_spawn(ctx);
}

static void do_list_contexts(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    (void)m;
    Sandgate__V1__ContextInfo infos[HOST_MAX_CONTEXTS + 1], *ptrs[HOST_MAX_CONTEXTS + 1];
    size_t n = 0;
    for (host_ctx *x = sb->contexts; x && n < HOST_MAX_CONTEXTS + 1; x = x->next) {
        if (x->deleted || x->state == CTX_DEAD)
            continue;
        host_ctx_fill_info(x, &infos[n]);
        ptrs[n] = &infos[n];
        n++;
    }
    Sandgate__V1__ListContextsResponse out;
    sandgate__v1__list_contexts_response__init(&out);
    out.contexts = ptrs;
    out.n_contexts = n;
    rpc_call_reply(c, &out.base);
}

/* RestartContext and DeleteContext name a context; "" means the default
 * for a restart (as RunCode) and nothing for a delete. */
static host_ctx *find_ctx(rpc_call *c, host_sandbox *sb, const char *id)
{
    host_ctx *ctx = host_ctx_find(sb, id[0] ? id : "default");
    if (!ctx || ctx->state == CTX_DEAD)
        fail(c, SG_ENOTFOUND, "context_id: no such context in this sandbox");
    return ctx && ctx->state != CTX_DEAD ? ctx : NULL;
}

static void do_restart_context(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__RestartContextRequest *r = (const Sandgate__V1__RestartContextRequest *)m;
    host_ctx *ctx = find_ctx(c, sb, r->context_id);
    sg_err err;
    if (ctx && host_ctx_restart(ctx, c, &err) != 0)
        rpc_call_fail(c, &err);
}

static void do_delete_context(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__DeleteContextRequest *r = (const Sandgate__V1__DeleteContextRequest *)m;
    if (!r->context_id[0]) {
        fail(c, SG_EINVAL, "context_id: required (the default context cannot be deleted)");
        return;
    }
    host_ctx *ctx = find_ctx(c, sb, r->context_id);
    sg_err err;
    if (!ctx)
        return;
    if (host_ctx_delete(ctx, &err) != 0) {
        rpc_call_fail(c, &err);
        return;
    }
    Sandgate__V1__DeleteContextResponse out;
    sandgate__v1__delete_context_response__init(&out);
    rpc_call_reply(c, &out.base);
}

static void cancel_run(void *arg)
{
    pthread_mutex_lock(&H.mu);
    host_ctx_cancel_call(arg);
    pthread_mutex_unlock(&H.mu);
}

static void do_run(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    Sandgate__V1__RunCodeRequest *r = (Sandgate__V1__RunCodeRequest *)m;
    host_ctx *ctx = host_ctx_find(sb, r->context_id[0] ? r->context_id : "default");
    if (!ctx) {
        fail(c, SG_ENOTFOUND, "no such context in this sandbox");
        return;
    }
    host_run *run = calloc(1, sizeof *run);
    host_action_init(&run->act, c, r->max_output_bytes, r->timeout_seconds);
    run->code_len = strlen(r->code);
    run->code = r->code;   /* steal the string from the message */
    r->code = (char *)protobuf_c_empty_string;
    sg_err err;
    if (host_ctx_submit(ctx, run, &err) != 0) {
        rpc_call_fail(c, &err);
        host_action_release(&run->act);
        free(run->code);
        free(run);
    }
}

static void cancel_exec(void *arg)
{
    pthread_mutex_lock(&H.mu);
    host_exec_cancel_call(arg);
    host_proc_cancel_call(arg);
    pthread_mutex_unlock(&H.mu);
}

static void do_exec(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    const Sandgate__V1__ExecRequest *r = (const Sandgate__V1__ExecRequest *)m;
    host_exec *e;
    sg_err err;
    if (r->background || r->pty) {   /* a process (proc.c) */
        if (host_proc_start(sb, r, c, &err) != 0)
            rpc_call_fail(c, &err);
        return;
    }
    if (r->pty_rows || r->pty_cols) {
        fail(c, SG_EINVAL, r->pty_rows ? "pty_rows: set without pty" : "pty_cols: set without pty");
        return;
    }
    if (host_exec_start(sb, r->command, &e, &err) != 0)
        rpc_call_fail(c, &err);
    else
        host_action_init(&e->act, c, r->max_output_bytes, r->timeout_seconds);
}

/* File calls are queued for the file workers (file_jobs.c), which answer
 * them: the workspace is the sandbox's to shape (a FIFO, a huge file), so
 * its I/O never runs here, under H.mu, on a gRPC thread. */
static void do_write_file(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    sg_err err;
    if (host_files_submit_write(sb, c, (Sandgate__V1__WriteFileRequest *)m, &err) != 0)
        rpc_call_fail(c, &err);
}

static void do_read_file(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m)
{
    sg_err err;
    if (host_files_submit_read(sb, c, (const Sandgate__V1__ReadFileRequest *)m, &err) != 0)
        rpc_call_fail(c, &err);
}

static void file_op(rpc_call *c, host_sandbox *sb, int op)
{
    sg_err err;
    if (host_files_submit(sb, c, op, &err) != 0)
        rpc_call_fail(c, &err);
}

#define FILE_OP(name, op)                                                  \
    static void name(rpc_call *c, host_sandbox *sb, ProtobufCMessage *m) \
    {                                                                      \
        (void)m;                                                           \
        file_op(c, sb, op);                                                \
    }
FILE_OP(do_list_files, HOST_FOP_LIST)
FILE_OP(do_stat_file, HOST_FOP_STAT)
FILE_OP(do_make_dir, HOST_FOP_MKDIR)
FILE_OP(do_remove_file, HOST_FOP_REMOVE)
FILE_OP(do_rename_file, HOST_FOP_RENAME)
FILE_OP(do_write_at, HOST_FOP_WRITE_AT)
FILE_OP(do_download, HOST_FOP_DOWNLOAD)
FILE_OP(do_watch, HOST_FOP_WATCH)

static void cancel_proc(void *arg)
{
    pthread_mutex_lock(&H.mu);
    host_proc_cancel_call(arg);
    pthread_mutex_unlock(&H.mu);
}

static const sandbox_op sandbox_ops[] = {
    {"/sandgate.v1.Host/ListProcesses", &sandgate__v1__list_processes_request__descriptor,
     host_proc_rpc_list, NULL},
    {"/sandgate.v1.Host/AttachProcess", &sandgate__v1__attach_process_request__descriptor,
     host_proc_rpc_attach, cancel_proc},
    {"/sandgate.v1.Host/SendInput", &sandgate__v1__send_input_request__descriptor,
     host_proc_rpc_input, NULL},
    {"/sandgate.v1.Host/SignalProcess", &sandgate__v1__signal_process_request__descriptor,
     host_proc_rpc_signal, NULL},
    {"/sandgate.v1.Host/WaitProcess", &sandgate__v1__wait_process_request__descriptor,
     host_proc_rpc_wait, cancel_proc},
    {"/sandgate.v1.Host/ResizePty", &sandgate__v1__resize_pty_request__descriptor,
     host_proc_rpc_resize, NULL},
    {"/sandgate.v1.Host/ExtendSandbox", &sandgate__v1__host_extend_request__descriptor,
     do_extend, NULL},
    {"/sandgate.v1.Host/CreateContext", &sandgate__v1__create_context_request__descriptor,
     do_create_context, NULL},
    {"/sandgate.v1.Host/ListContexts", &sandgate__v1__list_contexts_request__descriptor,
     do_list_contexts, NULL},
    {"/sandgate.v1.Host/RestartContext", &sandgate__v1__restart_context_request__descriptor,
     do_restart_context, NULL},
    {"/sandgate.v1.Host/DeleteContext", &sandgate__v1__delete_context_request__descriptor,
     do_delete_context, NULL},
    {"/sandgate.v1.Host/RunCode", &sandgate__v1__run_code_request__descriptor, do_run,
     cancel_run},
    {"/sandgate.v1.Host/Exec", &sandgate__v1__exec_request__descriptor, do_exec, cancel_exec},
    {"/sandgate.v1.Host/WriteFile", &sandgate__v1__write_file_request__descriptor,
     do_write_file, NULL},
    {"/sandgate.v1.Host/ReadFile", &sandgate__v1__read_file_request__descriptor, do_read_file,
     NULL},
    {"/sandgate.v1.Host/ListFiles", &sandgate__v1__list_files_request__descriptor, do_list_files,
     NULL},
    {"/sandgate.v1.Host/StatFile", &sandgate__v1__stat_file_request__descriptor, do_stat_file,
     NULL},
    {"/sandgate.v1.Host/MakeDir", &sandgate__v1__make_dir_request__descriptor, do_make_dir, NULL},
    {"/sandgate.v1.Host/RemoveFile", &sandgate__v1__remove_file_request__descriptor,
     do_remove_file, NULL},
    {"/sandgate.v1.Host/RenameFile", &sandgate__v1__rename_file_request__descriptor,
     do_rename_file, NULL},
    {"/sandgate.v1.Host/WriteFileAt", &sandgate__v1__host_write_at_request__descriptor,
     do_write_at, NULL},
    {"/sandgate.v1.Host/DownloadFile", &sandgate__v1__download_file_request__descriptor,
     do_download, NULL},
    {"/sandgate.v1.Host/WatchFiles", &sandgate__v1__watch_files_request__descriptor, do_watch,
     NULL},
};

int host_service_register(rpc_server *srv, sg_err *err)
{
    static const struct {
        const char *path;
        rpc_handler_fn fn;
    } methods[] = {
        {"/sandgate.v1.Host/CreateSandbox", on_create},
        {"/sandgate.v1.Host/GetSandbox", on_get},
        {"/sandgate.v1.Host/ListSandboxes", on_list},
        {"/sandgate.v1.Host/KillSandbox", on_kill},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (rpc_server_add_method(srv, methods[i].path, methods[i].fn, NULL, err) != 0)
            return -1;
    for (size_t i = 0; i < sizeof sandbox_ops / sizeof sandbox_ops[0]; i++)
        if (rpc_server_add_method(srv, sandbox_ops[i].path, on_sandbox_op,
                                  (void *)&sandbox_ops[i], err) != 0)
            return -1;
    return rpc_health_register(srv, "sandgate.v1.Host", err);
}
