/* reflection.c — the ServerReflectionInfo stream: one answer per request,
 * read and sent in turn (rpc_call_recv, then a queued send). v1 and v1alpha
 * have the same messages and field numbers under two package names, so one
 * set of generated code (v1) decodes and encodes both. Each stream sends a
 * dependency file at most once, as grpc's own servers do, so a client that
 * walks a service's types gets every file it needs and none twice. */
#include <stdlib.h>
#include <string.h>

#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rpc/descindex.h"
#include "rpc/reflection.h"
#include "rpc/validate.h"

#define REFL_MAX_SERVICES 32

typedef Grpc__Reflection__V1__ServerReflectionRequest refl_req;
typedef Grpc__Reflection__V1__ServerReflectionResponse refl_resp;

/* One per process: each daemon has one server. Never freed (reachable). */
static struct {
    rpc_server *srv;            /* borrowed */
    rpc_descindex ix;
} R;

typedef struct refl_stream {
    rpc_call *call;             /* owned ref */
    uint8_t *sent;              /* owned: per file, already sent on this stream */
} refl_stream;

static void stream_end(refl_stream *st, grpc_status_code code, const char *msg)
{
    rpc_call_finish(st->call, code, msg);
    rpc_call_unref(st->call);
    free(st->sent);
    free(st);
}

/* file and every file it imports, transitively; the file itself always, its
 * imports only if not yet sent on this stream. */
static void collect(refl_stream *st, size_t file, int force, ProtobufCBinaryData *out, size_t *n)
{
    if (st->sent[file] && !force)
        return;
    st->sent[file] = 1;
    const rpc_descfile *f = &R.ix.files[file];
    out[(*n)++] = (ProtobufCBinaryData){f->len, (uint8_t *)f->data};
    for (size_t i = 0; i < f->n_deps; i++)
        collect(st, f->deps[i], 0, out, n);
}

static void answer_files(refl_stream *st, refl_resp *resp, long file,
                         Grpc__Reflection__V1__FileDescriptorResponse *fdr,
                         ProtobufCBinaryData *files)
{
    size_t n = 0;
    collect(st, (size_t)file, 1, files, &n);
    grpc__reflection__v1__file_descriptor_response__init(fdr);
    fdr->n_file_descriptor_proto = n;
    fdr->file_descriptor_proto = files;
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_FILE_DESCRIPTOR_RESPONSE;
    resp->file_descriptor_response = fdr;
}

static void answer_error(refl_resp *resp, Grpc__Reflection__V1__ErrorResponse *er,
                         grpc_status_code code, const char *msg)
{
    grpc__reflection__v1__error_response__init(er);
    er->error_code = code;
    er->error_message = (char *)msg;
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ERROR_RESPONSE;
    resp->error_response = er;
}

static void answer_services(refl_resp *resp, Grpc__Reflection__V1__ListServiceResponse *ls,
                            Grpc__Reflection__V1__ServiceResponse *items,
                            Grpc__Reflection__V1__ServiceResponse **ptrs,
                            char (*names)[RPC_SERVICE_MAX])
{
    size_t n = rpc_server_services(R.srv, names, REFL_MAX_SERVICES);
    for (size_t i = 0; i < n; i++) {
        grpc__reflection__v1__service_response__init(&items[i]);
        items[i].name = names[i];
        ptrs[i] = &items[i];
    }
    grpc__reflection__v1__list_service_response__init(ls);
    ls->n_service = n;
    ls->service = ptrs;
    resp->message_response_case =
        GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_LIST_SERVICES_RESPONSE;
    resp->list_services_response = ls;
}

/* The answer to one request, queued on the stream. */
static void answer(refl_stream *st, refl_req *req)
{
    refl_resp resp;
    grpc__reflection__v1__server_reflection_response__init(&resp);
    resp.valid_host = req->host;
    resp.original_request = req;
    Grpc__Reflection__V1__FileDescriptorResponse fdr;
    ProtobufCBinaryData *files = calloc(R.ix.n_files + 1, sizeof *files);
    Grpc__Reflection__V1__ErrorResponse er;
    Grpc__Reflection__V1__ListServiceResponse ls;
    Grpc__Reflection__V1__ServiceResponse items[REFL_MAX_SERVICES], *ptrs[REFL_MAX_SERVICES];
    char names[REFL_MAX_SERVICES][RPC_SERVICE_MAX];
    Grpc__Reflection__V1__ExtensionNumberResponse enr;
    long k;
    switch (req->message_request_case) {
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_BY_FILENAME:
        if ((k = rpc_descindex_file(&R.ix, req->file_by_filename)) >= 0)
            answer_files(st, &resp, k, &fdr, files);
        else
            answer_error(&resp, &er, GRPC_STATUS_NOT_FOUND, "file not found");
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_SYMBOL:
        if ((k = rpc_descindex_symbol(&R.ix, req->file_containing_symbol)) >= 0)
            answer_files(st, &resp, k, &fdr, files);
        else
            answer_error(&resp, &er, GRPC_STATUS_NOT_FOUND, "symbol not found");
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_ALL_EXTENSION_NUMBERS_OF_TYPE:
        /* The APIs define no extensions: a known type has none. */
        if (rpc_descindex_symbol(&R.ix, req->all_extension_numbers_of_type) < 0) {
            answer_error(&resp, &er, GRPC_STATUS_NOT_FOUND, "type not found");
            break;
        }
        grpc__reflection__v1__extension_number_response__init(&enr);
        enr.base_type_name = req->all_extension_numbers_of_type;
        resp.message_response_case =
            GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_ALL_EXTENSION_NUMBERS_RESPONSE;
        resp.all_extension_numbers_response = &enr;
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_FILE_CONTAINING_EXTENSION:
        answer_error(&resp, &er, GRPC_STATUS_NOT_FOUND, "extension not found");
        break;
    case GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_LIST_SERVICES:
        answer_services(&resp, &ls, items, ptrs, names);
        break;
    default:
        answer_error(&resp, &er, GRPC_STATUS_UNIMPLEMENTED, "request kind not implemented");
        break;
    }
    rpc_call_send_msg(st->call, &resp.base);
    free(files);
}

static void on_request(void *arg, grpc_byte_buffer *bb)
{
    refl_stream *st = arg;
    if (!bb) {   /* the client is done (or gone) */
        stream_end(st, GRPC_STATUS_OK, NULL);
        return;
    }
    size_t len;
    uint8_t *buf = rpc_flatten(bb, &len);
    grpc_byte_buffer_destroy(bb);
    sg_err err;
    /* checked on the wire: the answer echoes the request back */
    refl_req *req = (refl_req *)rpc_unpack_valid(&rpc_reflection_request_rules, buf, len, &err);
    free(buf);
    if (!req) {
        stream_end(st, GRPC_STATUS_INVALID_ARGUMENT, err.msg);
        return;
    }
    answer(st, req);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (rpc_call_recv(st->call, on_request, st) != 0)
        stream_end(st, GRPC_STATUS_INTERNAL, "reflection stream could not read");
}

static void on_info(rpc_call *c, void *data)
{
    refl_stream *st = calloc(1, sizeof *st);
    st->sent = calloc(R.ix.n_files + 1, 1);
    st->call = rpc_call_ref(c);
    if (rpc_call_recv(c, on_request, st) != 0)
        stream_end(st, GRPC_STATUS_INTERNAL, "reflection stream could not read");
}

int rpc_reflection_register(rpc_server *s, const uint8_t *set, size_t len, sg_err *err)
{
    if (R.srv)
        return sg_err_set(err, SG_EINTERNAL, "server reflection is registered already");
    if (rpc_descindex_init(&R.ix, set, len, err) != 0)
        return -1;
    R.srv = s;
    if (rpc_server_add_stream_method(s, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                                     on_info, NULL, err) != 0 ||
        rpc_server_add_stream_method(
            s, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", on_info, NULL,
            err) != 0)
        return -1;
    return 0;
}
