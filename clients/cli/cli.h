/* cli.h — sandgate-cli internals: a connection and the calls the commands
 * and the demo share. */
#ifndef SG_CLI_H
#define SG_CLI_H

#include "rpc/rpc.h"
#include "sandgate/v1/sandgate.pb-c.h"

typedef struct cli_conn {
    const char *addr, *key, *user;
    grpc_channel *ch;
    grpc_metadata md[1];
    char bearer[600];
} cli_conn;

void cli_connect(cli_conn *c);
int cli_dispatch(cli_conn *c, int argc, char **argv);

/* Unary call; prints the status on failure and returns -1. *out is the
 * decoded response (free with protobuf_c_message_free_unpacked). */
int cli_unary(cli_conn *c, const char *method, const ProtobufCMessage *req,
              const ProtobufCMessageDescriptor *resp_d, ProtobufCMessage **out);

typedef struct cli_run_result {
    int had_error;
    int truncated;
    unsigned long long output_bytes_total;
    int exit_code;
} cli_run_result;

/* RunCode, printing events as they stream. */
int cli_run(cli_conn *c, const char *sandbox, const char *context, const char *code,
            unsigned timeout, unsigned long long max_output, cli_run_result *res);
int cli_exec(cli_conn *c, const char *sandbox, const char *command, unsigned timeout,
             cli_run_result *res);
/* workspace.c: files, contexts, labels. -1 = not one of its commands. */
int cli_workspace_dispatch(cli_conn *c, int argc, char **argv);
/* procs.c: exec --background, ps, attach, send-input, signal, wait,
 * resize. -1 = not one of its commands. */
int cli_procs_dispatch(cli_conn *c, int argc, char **argv);
/* --label K=V flags into e[0..cap); -1 (message printed) if malformed. */
int cli_labels_parse(int argc, char **argv, Sandgate__V1__CreateSandboxRequest__MetadataEntry *e,
                     size_t cap, size_t *n);
void cli_print_labels(const Sandgate__V1__Sandbox *s);
/* ListSandboxes with --label filters and pages (--page-size, --page-token). */
int cli_list(cli_conn *c, int argc, char **argv, void (*print)(const Sandgate__V1__Sandbox *s));
/* The README's agent session on template_name. */
int cli_demo(cli_conn *c, const char *template_name);

#endif
