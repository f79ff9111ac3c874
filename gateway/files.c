/* files.c — the workspace file calls beyond WriteFile/ReadFile (those are
 * in actions.c): ListFiles, StatFile, MakeDir, RemoveFile, RenameFile,
 * DownloadFile and WatchFiles are checked (ranges here, strings in
 * rules.c), proven to be the caller's (request.c) and relayed to the host
 * as they are; UploadFile is read from the client's stream here, one
 * message at a time, each chunk sent to the host's WriteFileAt and the
 * next read only once the host answered, so a fast client waits on the
 * host instead of filling the gateway's memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/request.h"
#include "gateway/rules.h"

#define CHUNK_MAX (4u << 20)   /* the host's HOST_CHUNK_MAX */
#define DOWNLOAD_TIMEOUT_S 3600
#define WATCH_TIMEOUT_S (7 * 86400)

/* The numeric bounds (rules.c, fuzzed there), then the owner check. */
static void checked(gw_req *r, void (*owned)(gw_req *r))
{
    sg_err e;
    if (gw_check_ranges(r->msg, &e) != 0)
        gw_req_fail(r, &e);
    else
        gw_req_with_owner(r, owned);
}

static void list_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/ListFiles", NULL, NULL, 30); }
static void stat_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/StatFile", NULL, NULL, 30); }
static void mkdir_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/MakeDir", NULL, NULL, 30); }
static void remove_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/RemoveFile", NULL, NULL, 60); }
static void rename_owned(gw_req *r) { gw_req_forward(r, "/sandgate.v1.Host/RenameFile", NULL, NULL, 30); }
static void download_owned(gw_req *r)
{
    gw_req_forward_stream(r, "/sandgate.v1.Host/DownloadFile", 0, DOWNLOAD_TIMEOUT_S);
}
static void watch_owned(gw_req *r)
{
    gw_req_forward_stream(r, "/sandgate.v1.Host/WatchFiles", 0, WATCH_TIMEOUT_S);
}

static void on_list(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__list_files_request__descriptor, "list_files");
    if (!r)
        return;
    checked(r, list_owned);
}

static void on_stat(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__stat_file_request__descriptor, "stat_file");
    if (r)
        gw_req_with_owner(r, stat_owned);
}

static void on_mkdir(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__make_dir_request__descriptor, "make_dir");
    if (!r)
        return;
    checked(r, mkdir_owned);
}

static void on_remove(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__remove_file_request__descriptor, "remove_file");
    if (r)
        gw_req_with_owner(r, remove_owned);
}

static void on_rename(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__rename_file_request__descriptor, "rename_file");
    if (r)
        gw_req_with_owner(r, rename_owned);
}

static void on_download(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__download_file_request__descriptor, "download_file");
    if (!r)
        return;
    checked(r, download_owned);
}

static void on_watch(rpc_call *c, void *data)
{
    gw_req *r = gw_req_begin(c, &sandgate__v1__watch_files_request__descriptor, "watch_files");
    if (r)
        gw_req_with_owner(r, watch_owned);
}

/* ---- UploadFile ---- */

typedef struct upload {
    rpc_call *in;          /* owned ref */
    gw_req *r;             /* owned once the first message is read */
    uint64_t offset;       /* where the next chunk goes */
    uint64_t written;      /* by this call */
    uint64_t size;         /* the file's size after the last chunk */
    size_t chunk_len;      /* of the chunk in flight */
    int first_done;
} upload;

static void upload_free(void *arg)
{
    upload *u = arg;
    rpc_call_unref(u->in);
    free(u);
}

/* Once the first message is read, r owns u (ownership failures free both). */
static void upload_end(upload *u)
{
    if (u->r)
        gw_req_free(u->r);
    else
        upload_free(u);
}

static void upload_fail(upload *u, int code, const char *fmt, const char *field,
                        unsigned long long v)
{
    sg_err e;
    sg_err_set(&e, code, fmt, field, v);
    gw_fail(u->in, &e);
    upload_end(u);
}

static void on_next(void *arg, grpc_byte_buffer *bb);

static void on_chunk_done(void *arg, rpc_unary_result *res)
{
    upload *u = arg;
    rpc_call_log_context(u->in);
    if (res->code != GRPC_STATUS_OK) {
        if (res->resp)
            grpc_byte_buffer_destroy(res->resp);
        gw_fail_from_host(u->in, u->r->host, "/sandgate.v1.Host/WriteFileAt", u->r->sandbox_id,
                          res->code, res->details, &res->trailer);
        upload_end(u);
        return;
    }
    size_t len;
    uint8_t *buf = rpc_flatten(res->resp, &len);
    grpc_byte_buffer_destroy(res->resp);
    Sandgate__V1__UploadFileResponse *out = (Sandgate__V1__UploadFileResponse *)rpc_unpack(
        &sandgate__v1__upload_file_response__descriptor, buf, len, NULL);
    free(buf);
    if (out) {
        u->size = out->size;
        protobuf_c_message_free_unpacked(&out->base, NULL);
    }
    u->offset += u->chunk_len;
    u->written += u->chunk_len;
    u->first_done = 1;
    if (rpc_call_recv(u->in, on_next, u) != 0) {
        rpc_call_finish(u->in, GRPC_STATUS_CANCELLED, "the upload's stream cannot be read");
        upload_end(u);
    }
}

static void send_chunk(upload *u, const ProtobufCBinaryData *data)
{
    const Sandgate__V1__UploadFileRequest *first = (const void *)u->r->msg;
    Sandgate__V1__HostWriteAtRequest h;
    sandgate__v1__host_write_at_request__init(&h);
    h.sandbox_id = (char *)u->r->sandbox_id;
    h.path = first->path;
    h.offset = u->offset;
    h.data = *data;
    h.first = !u->first_done;
    h.mode = first->mode;
    h.size = first->size;
    u->chunk_len = data->len;
    grpc_metadata md[2];
    size_t n_md = rpc_call_trace_md(u->in, md);
    sg_err err;
    if (rpc_unary_start(gw_host_channel(u->r->host), rpc_server_cq(rpc_call_server(u->in)),
                        rpc_call_grpc(u->in), "/sandgate.v1.Host/WriteFileAt",
                        rpc_deadline_in(30), md, n_md, rpc_pack(&h.base), on_chunk_done, u,
                        &err) != 0) {
        gw_fail_internal(u->in, "upload chunk", &err);
        upload_end(u);
    }
}

static void on_next(void *arg, grpc_byte_buffer *bb)
{
    upload *u = arg;
    rpc_call_log_context(u->in);
    if (!bb) {   /* the client is done (or gone: the reply then goes nowhere) */
        Sandgate__V1__UploadFileResponse out;
        sandgate__v1__upload_file_response__init(&out);
        out.size = u->size;
        out.bytes_written = u->written;
        rpc_call_reply(u->in, &out.base);
        upload_end(u);
        return;
    }
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    grpc_byte_buffer_destroy(bb);
    sg_err err;
    Sandgate__V1__UploadFileRequest *m = NULL;
    if (rpc_validate(gw_rules_for(&sandgate__v1__upload_file_request__descriptor), buf, len,
                     &err) == 0)
        m = (Sandgate__V1__UploadFileRequest *)rpc_unpack(
            &sandgate__v1__upload_file_request__descriptor, buf, len, &err);
    free(buf);
    if (!m) {
        gw_fail(u->in, &err);
        upload_end(u);
        return;
    }
    /* m was unpacked here and is this function's alone (u and u->r never
     * point into it): every path frees it exactly once, after its last read.
     * What an error message needs of it is copied out first, because
     * upload_fail frees u and may free r too. */
    const char *set = m->sandbox_id[0] ? "sandbox_id" : m->user_id[0] ? "user_id"
                      : m->path[0] ? "path" : m->offset ? "offset" : m->mode ? "mode"
                      : m->size ? "size" : NULL;
    unsigned long long data_len = m->data.len;
    if (set || data_len > CHUNK_MAX) {
        protobuf_c_message_free_unpacked(&m->base, NULL);   /* m is not read below */
        if (set)
            upload_fail(u, SG_EINVAL, "%s: set on a later message of the upload; only data "
                        "may be (%llu)", set, 0);
        else
            upload_fail(u, SG_EINVAL, "%s: %llu bytes in one message; at most 4194304", "data",
                        data_len);
        return;
    }
    if (m->data.len == 0) {   /* nothing to write: the next one */
        protobuf_c_message_free_unpacked(&m->base, NULL);
        if (rpc_call_recv(u->in, on_next, u) != 0) {
            rpc_call_finish(u->in, GRPC_STATUS_CANCELLED, "the upload's stream cannot be read");
            upload_end(u);
        }
        return;
    }
    send_chunk(u, &m->data);   /* packed into the host request: m may go */
    protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void upload_owned(gw_req *r)
{
    upload *u = r->user;
    const Sandgate__V1__UploadFileRequest *first = (const void *)r->msg;
    u->offset = first->offset;
    send_chunk(u, &first->data);
}

static void on_first(void *arg, grpc_byte_buffer *bb)
{
    upload *u = arg;
    rpc_call_log_context(u->in);
    if (!bb) {
        upload_fail(u, SG_EINVAL, "%s: the upload sent no message (%llu)", "path", 0);
        return;
    }
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    grpc_byte_buffer_destroy(bb);
    gw_req *r = gw_req_begin_buf(u->in, &sandgate__v1__upload_file_request__descriptor, buf, len,
                                 "upload_file");
    free(buf);
    if (!r) {   /* answered */
        upload_end(u);
        return;
    }
    u->r = r;
    r->user = u;
    r->user_free = upload_free;
    sg_err e;
    if (gw_check_ranges(r->msg, &e) != 0) {   /* data and mode (rules.c) */
        gw_fail(u->in, &e);
        upload_end(u);
        return;
    }
    gw_req_with_owner(r, upload_owned);   /* on failure it frees r, and u with it */
}

static void on_upload(rpc_call *c, void *data)
{
    upload *u = calloc(1, sizeof *u);
    if (!u) {
        rpc_call_finish(c, GRPC_STATUS_UNAVAILABLE, "the gateway is out of memory; retry");
        return;
    }
    u->in = rpc_call_ref(c);
    rpc_call_watch_close(c);   /* a client's cancel reaches the host call */
    if (rpc_call_recv(c, on_first, u) != 0) {
        rpc_call_finish(c, GRPC_STATUS_INTERNAL, "the upload's stream cannot be read");
        upload_end(u);
    }
}

int gw_files_register(rpc_server *srv, sg_err *err)
{
    static const struct {
        const char *path;
        rpc_handler_fn fn;
    } methods[] = {
        {"/sandgate.v1.Sandboxes/ListFiles", on_list},
        {"/sandgate.v1.Sandboxes/StatFile", on_stat},
        {"/sandgate.v1.Sandboxes/MakeDir", on_mkdir},
        {"/sandgate.v1.Sandboxes/RemoveFile", on_remove},
        {"/sandgate.v1.Sandboxes/RenameFile", on_rename},
        {"/sandgate.v1.Sandboxes/DownloadFile", on_download},
        {"/sandgate.v1.Sandboxes/WatchFiles", on_watch},
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (rpc_server_add_method(srv, methods[i].path, methods[i].fn, NULL, err) != 0)
            return -1;
    return rpc_server_add_stream_method(srv, "/sandgate.v1.Sandboxes/UploadFile", on_upload, NULL,
                                        err);
}
