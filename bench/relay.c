/* relay.c — bench_relay: the least a gRPC proxy built on sandgate's rpc
 * layer can do per call, as a peer in bench/run.sh's scenario 3. Not a
 * product and not a test.
 *
 *   bench_relay --backend HOST:PORT [--listen ADDR] [--port-file FILE]
 *
 * It serves the host's GetSandbox and forwards each call to the backend the
 * way the gateway does (one loop thread, the close watch started so a
 * client's cancel reaches the backend, one batch each way, the backend's
 * answer and status sent together) and does nothing else: no
 * authentication, no policy, no decode. The gateway minus this relay is what
 * sandgate's own code costs; this relay minus nginx is what two C-core legs
 * cost against nginx's forward. Runs until SIGTERM or SIGINT. */
#include <getopt.h>
#include <stdio.h>

#include "common/daemon.h"
#include "rpc/rpc.h"

#define RELAY_METHOD "/sandgate.v1.Host/GetSandbox"

static grpc_channel *backend;

static int usage(void)
{
    fprintf(stderr, "usage: bench_relay --backend HOST:PORT [--listen ADDR] [--port-file FILE]\n");
    return 2;
}

static void on_backend_reply(void *arg, rpc_unary_result *res)
{
    rpc_call *in = arg;
    rpc_call_finish_msg(in, res->resp, res->code, res->details);
    rpc_call_unref(in);
}

static void relay_call(rpc_call *in, void *data)
{
    (void)data;
    size_t len;
    const uint8_t *req = rpc_call_request(in, &len);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)req, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    rpc_call_watch_close(in);
    sg_err err;
    rpc_call_ref(in);
    if (rpc_unary_start(backend, rpc_server_cq(rpc_call_server(in)), rpc_call_grpc(in),
                        RELAY_METHOD, rpc_deadline_in(30), NULL, 0, bb, on_backend_reply, in,
                        &err) != 0) {
        rpc_call_fail(in, &err);
        rpc_call_unref(in);
    }
}

int main(int argc, char **argv)
{
    const char *listen = "127.0.0.1:0", *port_file = NULL, *target = NULL;
    static const struct option opts[] = {{"backend", 1, 0, 'b'}, {"listen", 1, 0, 'l'},
                                         {"port-file", 1, 0, 'p'}, {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (o == 'b')
            target = optarg;
        else if (o == 'l')
            listen = optarg;
        else if (o == 'p')
            port_file = optarg;
        else
            return usage();
    }
    if (!target || optind != argc)
        return usage();
    sg_daemon_block_signals(0);
    rpc_runtime_init();
    backend = rpc_channel_create(target, NULL);
    sg_err err;
    int port = 0;
    rpc_server *srv = rpc_server_create(1, &err);
    if (!srv || rpc_server_add_method(srv, RELAY_METHOD, relay_call, NULL, &err) != 0 ||
        rpc_server_listen(srv, listen, NULL, &port, &err) != 0 ||
        rpc_server_start(srv, &err) != 0) {
        fprintf(stderr, "bench_relay: %s\n", err.msg);
        return 1;
    }
    if (sg_daemon_write_port(port_file, port) != 0)
        fprintf(stderr, "bench_relay: cannot write port file %s\n", port_file);
    sg_daemon_wait_stop();
    rpc_server_destroy(srv);
    grpc_channel_destroy(backend);
    grpc_shutdown();
    return 0;
}
