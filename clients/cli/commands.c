/* commands.c — sandgate-cli subcommands: argument parsing for each, then one
 * call. Exit status: 0 ok, 1 the call failed, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli/cli.h"

static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 2)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 0; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

static void print_sandbox(const Sandgate__V1__Sandbox *s)
{
    printf("%s\ttemplate=%s user=%s task=%s expires_at=%lld state=%d", s->sandbox_id,
           s->template_, s->user_id, s->task_id, (long long)s->expires_at, s->state);
    cli_print_labels(s);
    printf("\n");
}

static int cmd_create(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__CreateSandboxRequest req;
    sandgate__v1__create_sandbox_request__init(&req);
    req.template_ = (char *)opt(argc, argv, "--template", "code-interpreter");
    req.task_id = (char *)opt(argc, argv, "--task", "cli-task");
    req.user_id = (char *)c->user;
    req.ttl_seconds = (uint32_t)atoi(opt(argc, argv, "--ttl", "0"));
    Sandgate__V1__CreateSandboxRequest__EnvEntry env[32], *envp[32];
    for (int i = 0; i + 1 < argc && req.n_env < 32; i++) {
        if (strcmp(argv[i], "--env") != 0)
            continue;
        char *eq = strchr(argv[i + 1], '=');
        if (!eq)
            return 2;
        *eq = 0;
        sandgate__v1__create_sandbox_request__env_entry__init(&env[req.n_env]);
        env[req.n_env].key = argv[i + 1];
        env[req.n_env].value = eq + 1;
        envp[req.n_env] = &env[req.n_env];
        req.n_env++;
    }
    req.env = envp;
    Sandgate__V1__CreateSandboxRequest__MetadataEntry lab[64], *labp[64];
    if (cli_labels_parse(argc, argv, lab, 64, &req.n_metadata) != 0)
        return 2;
    for (size_t i = 0; i < req.n_metadata; i++)
        labp[i] = &lab[i];
    req.metadata = labp;
    Sandgate__V1__Sandbox *s;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/CreateSandbox", &req.base,
                  &sandgate__v1__sandbox__descriptor, (ProtobufCMessage **)&s) != 0)
        return 1;
    printf("%s\n", s->sandbox_id);
    sandgate__v1__sandbox__free_unpacked(s, NULL);
    return 0;
}

static int cmd_sandbox(cli_conn *c, const char *what, const char *id, uint32_t ttl)
{
    ProtobufCMessage *out;
    int rc;
    if (strcmp(what, "kill") == 0) {
        Sandgate__V1__KillSandboxRequest req;
        sandgate__v1__kill_sandbox_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        rc = cli_unary(c, "/sandgate.v1.Sandboxes/KillSandbox", &req.base,
                       &sandgate__v1__kill_sandbox_response__descriptor, &out);
        if (rc == 0)
            printf("killed %s\n", id);
    } else if (strcmp(what, "extend") == 0) {
        Sandgate__V1__ExtendSandboxRequest req;
        sandgate__v1__extend_sandbox_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        req.ttl_seconds = ttl;
        rc = cli_unary(c, "/sandgate.v1.Sandboxes/ExtendSandbox", &req.base,
                       &sandgate__v1__sandbox__descriptor, &out);
        if (rc == 0)
            print_sandbox((Sandgate__V1__Sandbox *)out);
    } else {
        Sandgate__V1__GetSandboxRequest req;
        sandgate__v1__get_sandbox_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        rc = cli_unary(c, "/sandgate.v1.Sandboxes/GetSandbox", &req.base,
                       &sandgate__v1__sandbox__descriptor, &out);
        if (rc == 0)
            print_sandbox((Sandgate__V1__Sandbox *)out);
    }
    if (rc == 0)
        protobuf_c_message_free_unpacked(out, NULL);
    return rc ? 1 : 0;
}

static int cmd_context(cli_conn *c, const char *id)
{
    Sandgate__V1__CreateContextRequest req;
    sandgate__v1__create_context_request__init(&req);
    req.sandbox_id = (char *)id;
    req.user_id = (char *)c->user;
    req.language = "python";
    Sandgate__V1__Context *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/CreateContext", &req.base,
                  &sandgate__v1__context__descriptor, (ProtobufCMessage **)&out))
        return 1;
    printf("%s\n", out->context_id);
    sandgate__v1__context__free_unpacked(out, NULL);
    return 0;
}

static int cmd_files(cli_conn *c, const char *what, int argc, char **argv)
{
    ProtobufCMessage *out;
    if (strcmp(what, "write") == 0) {
        if (argc < 4)
            return 2;
        FILE *f = strcmp(argv[3], "-") == 0 ? stdin : fopen(argv[3], "rb");
        if (!f) {
            perror(argv[3]);
            return 1;
        }
        size_t len;
        char *data = read_all(f, &len);
        Sandgate__V1__WriteFileRequest req;
        sandgate__v1__write_file_request__init(&req);
        req.sandbox_id = argv[1];
        req.user_id = (char *)c->user;
        req.path = argv[2];
        req.data.data = (uint8_t *)data;
        req.data.len = len;
        int rc = cli_unary(c, "/sandgate.v1.Sandboxes/WriteFile", &req.base,
                           &sandgate__v1__write_file_response__descriptor, &out);
        free(data);
        if (rc)
            return 1;
        protobuf_c_message_free_unpacked(out, NULL);
        return 0;
    }
    if (argc < 3)
        return 2;
    Sandgate__V1__ReadFileRequest req;
    sandgate__v1__read_file_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.path = argv[2];
    if (cli_unary(c, "/sandgate.v1.Sandboxes/ReadFile", &req.base,
                  &sandgate__v1__read_file_response__descriptor, &out))
        return 1;
    Sandgate__V1__ReadFileResponse *r = (Sandgate__V1__ReadFileResponse *)out;
    fwrite(r->data.data, 1, r->data.len, stdout);
    protobuf_c_message_free_unpacked(out, NULL);
    return 0;
}

int cli_dispatch(cli_conn *c, int argc, char **argv)
{
    const char *cmd = argv[0];
    cli_run_result res;
    if (strcmp(cmd, "create") == 0)
        return cmd_create(c, argc, argv);
    if (strcmp(cmd, "list") == 0)
        return cli_list(c, argc, argv, print_sandbox);
    int ws = cli_workspace_dispatch(c, argc, argv);   /* files, contexts, labels */
    if (ws != -1)
        return ws;
    int pr = cli_procs_dispatch(c, argc, argv);       /* background processes */
    if (pr != -1)
        return pr;
    if (strcmp(cmd, "demo") == 0)
        return cli_demo(c, opt(argc, argv, "--template", "code-interpreter")) ? 1 : 0;
    if (argc < 2)
        return 2;
    if (!strcmp(cmd, "get") || !strcmp(cmd, "kill") || !strcmp(cmd, "extend"))
        return cmd_sandbox(c, cmd, argv[1], argc > 2 ? (uint32_t)atoi(argv[2]) : 0);
    if (strcmp(cmd, "context") == 0)
        return cmd_context(c, argv[1]);
    if (!strcmp(cmd, "write") || !strcmp(cmd, "read"))
        return cmd_files(c, cmd, argc, argv);
    if (argc < 3)
        return 2;
    if (strcmp(cmd, "run") == 0) {
        char *code = strcmp(argv[2], "-") == 0 ? read_all(stdin, NULL) : strdup(argv[2]);
        int rc = cli_run(c, argv[1], opt(argc, argv, "--context", NULL), code,
                         (unsigned)atoi(opt(argc, argv, "--timeout", "0")),
                         strtoull(opt(argc, argv, "--max-output", "0"), NULL, 10), &res);
        free(code);
        return rc ? 1 : (res.had_error ? 3 : 0);
    }
    if (strcmp(cmd, "exec") == 0) {
        if (cli_exec(c, argv[1], argv[2], (unsigned)atoi(opt(argc, argv, "--timeout", "0")),
                     &res) != 0)
            return 1;
        return res.exit_code;
    }
    return 2;
}
