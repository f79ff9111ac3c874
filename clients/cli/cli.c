/* cli.c — sandgate-cli: a command-line client of the public API on the
 * shared rpc library. Each subcommand is one call (or, for `demo`, the agent
 * session the README shows). Credentials come from flags or the
 * environment (SANDGATE_ADDR, SANDGATE_API_KEY, SANDGATE_USER) and are never
 * printed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli/cli.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: sandgate-cli [--addr HOST:PORT] [--key API_KEY] [--user USER] COMMAND ...\n"
            "  create --template T --task K [--ttl S] [--env K=V]... [--label K=V]...\n"
            "                                    prints the sandbox id\n"
            "  get ID | kill ID | extend ID SECONDS\n"
            "  list [--label K=V]... [--page-size N] [--page-token T]\n"
            "                                    every page; with --page-size/--page-token one,\n"
            "                                    its next_page_token on stderr\n"
            "  context ID                        new context; prints its id\n"
            "  context list ID | context restart ID [CTX] | context delete ID CTX\n"
            "  ls ID [PATH] [--recursive] [--max-entries N]   type, size, mode, path per line\n"
            "  stat ID [PATH] | mkdir ID PATH [--parents] [--mode M] | rm ID PATH [--recursive]\n"
            "  mv ID FROM TO [--overwrite]\n"
            "  upload ID LOCAL|- PATH [--offset N] [--mode M]\n"
            "  download ID PATH [LOCAL|-] [--offset N] [--length N]\n"
            "  watch ID [PATH] [--recursive] [--timeout S] [--count N]   events, one a line\n"
            "  run ID CODE|- [--context C] [--timeout S] [--max-output N]\n"
            "  exec ID COMMAND [--timeout S]     exit status is the command's\n"
            "  exec ID COMMAND --background [--pty] [--rows R] [--cols C] [--timeout S]\n"
            "       [--max-output N]             a background process; prints its id\n"
            "  ps ID                             processes: id, state, output bytes, command\n"
            "  attach ID PID [--stdout-offset N] [--stderr-offset N]   its output until it\n"
            "                                    ends; exit status is the process's\n"
            "  send-input ID PID DATA|- [--close] | signal ID PID [SIG] | resize ID PID ROWS COLS\n"
            "  wait ID PID [--timeout S]         its info; exit status is the process's\n"
            "  write ID PATH FILE|-  |  read ID PATH\n"
            "  demo [--template T]               an agent session: state, an error, truncation,\n"
            "                                    the kernel it ran under\n"
            "environment: SANDGATE_ADDR (127.0.0.1:7443), SANDGATE_API_KEY, SANDGATE_USER\n");
}

int main(int argc, char **argv)
{
    cli_conn conn = {.addr = getenv("SANDGATE_ADDR"), .key = getenv("SANDGATE_API_KEY"),
                     .user = getenv("SANDGATE_USER")};
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i += 2) {
        if (i + 1 >= argc) {
            usage();
            return 2;
        }
        if (strcmp(argv[i], "--addr") == 0)
            conn.addr = argv[i + 1];
        else if (strcmp(argv[i], "--key") == 0)
            conn.key = argv[i + 1];
        else if (strcmp(argv[i], "--user") == 0)
            conn.user = argv[i + 1];
        else {
            usage();
            return 2;
        }
    }
    if (i >= argc) {
        usage();
        return 2;
    }
    if (!conn.addr)
        conn.addr = "127.0.0.1:7443";
    if (!conn.user)
        conn.user = "cli-user";
    if (!conn.key) {
        fprintf(stderr, "sandgate-cli: no API key (--key or SANDGATE_API_KEY)\n");
        return 2;
    }
    rpc_runtime_init();
    cli_connect(&conn);
    int rc = cli_dispatch(&conn, argc - i, argv + i);
    if (rc == 2)
        usage();
    grpc_channel_destroy(conn.ch);
    grpc_shutdown();
    return rc;
}
