/* procs.c — sandgate-cli's background-process commands: exec --background
 * (prints the process id), ps, attach, send-input, signal, wait, resize.
 * One call each; attach streams the output until the process ends (exit
 * status: the process's, 128+signal when killed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli/cli.h"

static const char *opt(int argc, char **argv, const char *name, const char *def)
{
    for (int i = 0; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return def;
}

static int flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

static const char *state_name(Sandgate__V1__ProcessState s)
{
    switch (s) {
    case SANDGATE__V1__PROCESS_STATE__PROCESS_STATE_STARTING: return "starting";
    case SANDGATE__V1__PROCESS_STATE__PROCESS_STATE_RUNNING: return "running";
    case SANDGATE__V1__PROCESS_STATE__PROCESS_STATE_EXITED: return "exited";
    default: return "unknown";
    }
}

static void print_info(const Sandgate__V1__ProcessInfo *p)
{
    printf("%s\t%s", p->process_id, state_name(p->state));
    if (p->exit)
        printf(" exit=%d signal=%d%s", p->exit->exit_code, p->exit->signal,
               p->exit->timed_out ? " timed_out" : "");
    printf("\tstdout=%llu stderr=%llu%s\t%s\n", (unsigned long long)p->stdout_bytes,
           (unsigned long long)p->stderr_bytes, p->pty ? " pty" : "", p->command);
}

static int on_started(void *arg, const uint8_t *buf, size_t len)
{
    Sandgate__V1__ExecEvent *ev = sandgate__v1__exec_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    if (ev->event_case == SANDGATE__V1__EXEC_EVENT__EVENT_STARTED)
        snprintf(arg, 32, "%s", ev->started->process_id);
    sandgate__v1__exec_event__free_unpacked(ev, NULL);
    return 0;
}

/* exec ID COMMAND --background [--pty] [--rows R] [--cols C] [--timeout S] [--max-output N] */
static int cmd_start(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__ExecRequest req;
    sandgate__v1__exec_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.command = argv[2];
    req.background = 1;
    req.pty = flag(argc, argv, "--pty");
    req.pty_rows = (uint32_t)atoi(opt(argc, argv, "--rows", "0"));
    req.pty_cols = (uint32_t)atoi(opt(argc, argv, "--cols", "0"));
    req.timeout_seconds = (uint32_t)atoi(opt(argc, argv, "--timeout", "0"));
    req.max_output_bytes = strtoull(opt(argc, argv, "--max-output", "0"), NULL, 10);
    char pid[32] = "";
    rpc_status st;
    if (rpc_blocking_stream(c->ch, "/sandgate.v1.Sandboxes/Exec", c->md, 1, 60, &req.base,
                            on_started, pid, &st) != 0 ||
        st.code != GRPC_STATUS_OK || !pid[0]) {
        fprintf(stderr, "sandgate-cli: Exec: %s: %s\n", rpc_status_name(st.code), st.details);
        return 1;
    }
    printf("%s\n", pid);
    return 0;
}

static int cmd_ps(cli_conn *c, const char *id)
{
    Sandgate__V1__ListProcessesRequest req;
    sandgate__v1__list_processes_request__init(&req);
    req.sandbox_id = (char *)id;
    req.user_id = (char *)c->user;
    Sandgate__V1__ListProcessesResponse *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/ListProcesses", &req.base,
                  &sandgate__v1__list_processes_response__descriptor, (ProtobufCMessage **)&out))
        return 1;
    for (size_t i = 0; i < out->n_processes; i++)
        print_info(out->processes[i]);
    sandgate__v1__list_processes_response__free_unpacked(out, NULL);
    return 0;
}

static int on_process_event(void *arg, const uint8_t *buf, size_t len)
{
    int *status = arg;
    Sandgate__V1__ProcessEvent *ev = sandgate__v1__process_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    switch (ev->event_case) {
    case SANDGATE__V1__PROCESS_EVENT__EVENT_STDOUT:
        fwrite(ev->stdout->data.data, 1, ev->stdout->data.len, stdout);
        fflush(stdout);
        break;
    case SANDGATE__V1__PROCESS_EVENT__EVENT_STDERR:
        fwrite(ev->stderr->data.data, 1, ev->stderr->data.len, stderr);
        break;
    case SANDGATE__V1__PROCESS_EVENT__EVENT_DROPPED:
        fprintf(stderr, "sandgate-cli: %llu bytes of %s at offset %llu were dropped\n",
                (unsigned long long)ev->dropped->bytes, ev->dropped->stderr ? "stderr" : "stdout",
                (unsigned long long)ev->dropped->offset);
        break;
    case SANDGATE__V1__PROCESS_EVENT__EVENT_EXIT:
        *status = ev->exit->signal ? 128 + ev->exit->signal : ev->exit->exit_code;
        break;
    default:
        break;
    }
    sandgate__v1__process_event__free_unpacked(ev, NULL);
    return 0;
}

static int cmd_attach(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__AttachProcessRequest req;
    sandgate__v1__attach_process_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.process_id = argv[2];
    req.stdout_offset = strtoull(opt(argc, argv, "--stdout-offset", "0"), NULL, 10);
    req.stderr_offset = strtoull(opt(argc, argv, "--stderr-offset", "0"), NULL, 10);
    int status = 1;
    rpc_status st;
    if (rpc_blocking_stream(c->ch, "/sandgate.v1.Sandboxes/AttachProcess", c->md, 1, 0,
                            &req.base, on_process_event, &status, &st) != 0 ||
        st.code != GRPC_STATUS_OK) {
        fprintf(stderr, "sandgate-cli: AttachProcess: %s: %s\n", rpc_status_name(st.code),
                st.details);
        return 1;
    }
    return status;
}

/* send-input ID PID DATA|- [--close]: DATA as given (with no newline added), or stdin */
static int cmd_input(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__SendInputRequest req;
    sandgate__v1__send_input_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.process_id = argv[2];
    req.close_stdin = flag(argc, argv, "--close");
    uint8_t *data = NULL;
    size_t n = 0, cap = 0;
    const char *arg = argc > 3 && strcmp(argv[3], "--close") != 0 ? argv[3] : "";
    if (strcmp(arg, "-") == 0) {
        size_t k;
        do {
            if (n == cap)
                data = realloc(data, cap = cap ? cap * 2 : 65536);
            k = fread(data + n, 1, cap - n, stdin);
            n += k;
        } while (k > 0);
    } else {
        data = (uint8_t *)strdup(arg);
        n = strlen(arg);
    }
    req.data.data = data;
    req.data.len = n;
    Sandgate__V1__SendInputResponse *out;
    int rc = cli_unary(c, "/sandgate.v1.Sandboxes/SendInput", &req.base,
                       &sandgate__v1__send_input_response__descriptor, (ProtobufCMessage **)&out);
    free(data);
    if (rc)
        return 1;
    if (out->pending_bytes)
        fprintf(stderr, "%llu bytes not read yet\n", (unsigned long long)out->pending_bytes);
    sandgate__v1__send_input_response__free_unpacked(out, NULL);
    return 0;
}

static int cmd_signal(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__SignalProcessRequest req;
    sandgate__v1__signal_process_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.process_id = argv[2];
    const char *sig = argc > 3 ? argv[3] : "TERM";
    char *end;
    unsigned long num = strtoul(sig, &end, 10);
    if (*sig && !*end)
        req.signal = (uint32_t)num;
    else
        req.signal_name = (char *)sig;
    ProtobufCMessage *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/SignalProcess", &req.base,
                  &sandgate__v1__signal_process_response__descriptor, &out))
        return 1;
    protobuf_c_message_free_unpacked(out, NULL);
    return 0;
}

static int cmd_wait(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__WaitProcessRequest req;
    sandgate__v1__wait_process_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.process_id = argv[2];
    req.timeout_seconds = (uint32_t)atoi(opt(argc, argv, "--timeout", "0"));
    Sandgate__V1__ProcessInfo *p;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/WaitProcess", &req.base,
                  &sandgate__v1__process_info__descriptor, (ProtobufCMessage **)&p))
        return 1;
    print_info(p);
    int rc = !p->exit ? 124 : p->exit->signal ? 128 + p->exit->signal : p->exit->exit_code;
    sandgate__v1__process_info__free_unpacked(p, NULL);
    return rc;
}

static int cmd_resize(cli_conn *c, int argc, char **argv)
{
    if (argc < 5)
        return 2;
    Sandgate__V1__ResizePtyRequest req;
    sandgate__v1__resize_pty_request__init(&req);
    req.sandbox_id = argv[1];
    req.user_id = (char *)c->user;
    req.process_id = argv[2];
    req.rows = (uint32_t)atoi(argv[3]);
    req.cols = (uint32_t)atoi(argv[4]);
    ProtobufCMessage *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/ResizePty", &req.base,
                  &sandgate__v1__resize_pty_response__descriptor, &out))
        return 1;
    protobuf_c_message_free_unpacked(out, NULL);
    return 0;
}

int cli_procs_dispatch(cli_conn *c, int argc, char **argv)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "exec") == 0 && argc >= 3 && flag(argc, argv, "--background"))
        return cmd_start(c, argc, argv);
    if (strcmp(cmd, "ps") == 0)
        return argc < 2 ? 2 : cmd_ps(c, argv[1]);
    int known = !strcmp(cmd, "attach") || !strcmp(cmd, "send-input") || !strcmp(cmd, "signal") ||
                !strcmp(cmd, "wait") || !strcmp(cmd, "resize");
    if (!known)
        return -1;
    if (argc < 3)
        return 2;
    if (strcmp(cmd, "attach") == 0)
        return cmd_attach(c, argc, argv);
    if (strcmp(cmd, "send-input") == 0)
        return cmd_input(c, argc, argv);
    if (strcmp(cmd, "signal") == 0)
        return cmd_signal(c, argc, argv);
    if (strcmp(cmd, "wait") == 0)
        return cmd_wait(c, argc, argv);
    return cmd_resize(c, argc, argv);
}
