/* calls.c — the calls sandgate-cli makes, and how their results print:
 * stdout to stdout, stderr and errors to stderr, results as "[result mime]"
 * lines, and the end event as a one-line summary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli/cli.h"

void cli_connect(cli_conn *c)
{
    c->ch = rpc_channel_create(c->addr, NULL);
    snprintf(c->bearer, sizeof c->bearer, "Bearer %s", c->key);
    c->md[0].key = grpc_slice_from_static_string("authorization");
    c->md[0].value = grpc_slice_from_static_string(c->bearer);
}

static void print_status(const char *method, const rpc_status *st)
{
    fprintf(stderr, "sandgate-cli: %s: %s: %s\n", method, rpc_status_name(st->code), st->details);
}

int cli_unary(cli_conn *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_d, ProtobufCMessage **out)
{
    uint8_t *buf;
    size_t len;
    rpc_status st;
    if (rpc_blocking_unary(c->ch, method, c->md, 1, 120, req, &buf, &len, &st) != 0 ||
        st.code != GRPC_STATUS_OK) {
        print_status(method, &st);
        return -1;
    }
    *out = protobuf_c_message_unpack(resp_d, NULL, len, buf);
    free(buf);
    return *out ? 0 : -1;
}

static int on_run_event(void *arg, const uint8_t *buf, size_t len)
{
    cli_run_result *res = arg;
    Sandgate__V1__RunCodeEvent *ev = sandgate__v1__run_code_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    switch (ev->event_case) {
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_STDOUT:
        fwrite(ev->stdout->data.data, 1, ev->stdout->data.len, stdout);
        fflush(stdout);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_STDERR:
        fwrite(ev->stderr->data.data, 1, ev->stderr->data.len, stderr);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_RESULT:
        if (strcmp(ev->result->mime_type, "text/plain") == 0)
            printf("[result] %.*s\n", (int)ev->result->data.len, (const char *)ev->result->data.data);
        else
            printf("[result %s, %zu bytes]\n", ev->result->mime_type, ev->result->data.len);
        /* Part of it was dropped by the output cap (when all of it was, the
         * text above is the notice). */
        if (ev->result->dropped && ev->result->n_representations && ev->result->notice)
            printf("[result notice] %s\n", ev->result->notice);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_ERROR:
        res->had_error = 1;
        printf("[error] %s: %s\n%s", ev->error->name, ev->error->value, ev->error->traceback);
        break;
    case SANDGATE__V1__RUN_CODE_EVENT__EVENT_END:
        res->truncated = ev->end->truncated;
        res->output_bytes_total = ev->end->output_bytes_total;
        printf("%s[end]", ev->end->truncated ? "\n" : "");   /* the cut may fall mid-line */
        printf(" %.1f ms%s, output %llu bytes%s%s\n", ev->end->duration_us / 1000.0,
               ev->end->timed_out ? ", timed out" : "",
               (unsigned long long)ev->end->output_bytes_total,
               ev->end->truncated ? ", TRUNCATED to the output cap" : "",
               ev->end->context_restarted ? ", context restarted (state lost)" : "");
        break;
    default:
        break;
    }
    sandgate__v1__run_code_event__free_unpacked(ev, NULL);
    return 0;
}

int cli_run(cli_conn *c, const char *sandbox, const char *context, const char *code,
            unsigned timeout, unsigned long long max_output, cli_run_result *res)
{
    Sandgate__V1__RunCodeRequest req;
    sandgate__v1__run_code_request__init(&req);
    req.sandbox_id = (char *)sandbox;
    req.user_id = (char *)c->user;
    req.context_id = (char *)(context ? context : "");
    req.code = (char *)code;
    req.timeout_seconds = timeout;
    req.max_output_bytes = max_output;
    memset(res, 0, sizeof *res);
    rpc_status st;
    if (rpc_blocking_stream(c->ch, "/sandgate.v1.Sandboxes/RunCode", c->md, 1, 0, &req.base,
                            on_run_event, res, &st) != 0 ||
        st.code != GRPC_STATUS_OK) {
        print_status("RunCode", &st);
        return -1;
    }
    return 0;
}

static int on_exec_event(void *arg, const uint8_t *buf, size_t len)
{
    cli_run_result *res = arg;
    Sandgate__V1__ExecEvent *ev = sandgate__v1__exec_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_STDOUT)
        fwrite(ev->stdout->data.data, 1, ev->stdout->data.len, stdout);
    else if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_STDERR)
        fwrite(ev->stderr->data.data, 1, ev->stderr->data.len, stderr);
    else if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_EXIT) {
        res->exit_code = ev->exit->signal ? 128 + ev->exit->signal : ev->exit->exit_code;
        res->truncated = ev->exit->truncated;
        if (ev->exit->timed_out)
            fprintf(stderr, "sandgate-cli: exec timed out\n");
    }
    sandgate__v1__exec_event__free_unpacked(ev, NULL);
    return 0;
}

int cli_exec(cli_conn *c, const char *sandbox, const char *command, unsigned timeout,
             cli_run_result *res)
{
    Sandgate__V1__ExecRequest req;
    sandgate__v1__exec_request__init(&req);
    req.sandbox_id = (char *)sandbox;
    req.user_id = (char *)c->user;
    req.command = (char *)command;
    req.timeout_seconds = timeout;
    memset(res, 0, sizeof *res);
    res->exit_code = -1;
    rpc_status st;
    if (rpc_blocking_stream(c->ch, "/sandgate.v1.Sandboxes/Exec", c->md, 1, 0, &req.base,
                            on_exec_event, res, &st) != 0 ||
        st.code != GRPC_STATUS_OK) {
        print_status("Exec", &st);
        return -1;
    }
    return 0;
}
