/* main.c — sandgate, the gateway: load its config and the policy, connect to
 * the hosts, serve the public API (optionally with mTLS), reload the policy
 * on SIGHUP or file change, and stop on SIGTERM/SIGINT. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/daemon.h"
#include "common/log.h"
#include "etcd/etcd.h"
#include "gateway/gw.h"
#include "rpc/health.h"
#include "rpc/metrics_http.h"
#include "rpc/reflection.h"

/* The public API's descriptors, embedded at build time (CMakeLists.txt). */
extern const unsigned char sg_gateway_descriptor_set[];
extern const size_t sg_gateway_descriptor_set_len;

gw_state G;

static void policy_hash_info(char *buf, size_t cap)
{
    policy *p = gw_policy_acquire();
    snprintf(buf, cap, "%s", policy_hash(p));
    policy_unref(p);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    return buf;
}

static grpc_server_credentials *tls_creds(sg_err *err)
{
    char *cert = slurp(G.cfg.tls_cert), *key = slurp(G.cfg.tls_key);
    char *ca = G.cfg.tls_client_ca ? slurp(G.cfg.tls_client_ca) : NULL;
    if (!cert || !key || (G.cfg.tls_client_ca && !ca)) {
        sg_err_set(err, SG_EINVAL, "tls: cannot read %s, %s or %s", G.cfg.tls_cert, G.cfg.tls_key,
                   G.cfg.tls_client_ca ? G.cfg.tls_client_ca : "(no client CA)");
        return NULL;
    }
    grpc_ssl_pem_key_cert_pair pair = {.private_key = key, .cert_chain = cert};
    G.mtls = ca != NULL;
    /* Ask for a certificate but verify it ourselves (tenancy/mtls.c): API-key
     * tenants need none, and a bad one is UNAUTHENTICATED like a bad key. */
    if (ca && tenancy_mtls_load_ca(ca, err) != 0)
        return NULL;
    grpc_server_credentials *c = grpc_ssl_server_credentials_create_ex(
        ca, &pair, 1,
        ca ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_BUT_DONT_VERIFY
           : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        NULL);
    explicit_bzero(key, strlen(key));
    free(key);
    free(cert);
    free(ca);
    return c;
}

int main(int argc, char **argv)
{
    const char *config = NULL, *listen = NULL, *port_file = NULL, *metrics = NULL,
               *metrics_port_file = NULL, *log_level = getenv("SANDGATE_LOG_LEVEL");
    static struct option opts[] = {{"config", 1, 0, 'c'}, {"listen", 1, 0, 'l'},
                                   {"port-file", 1, 0, 'p'}, {"metrics-listen", 1, 0, 'm'},
                                   {"metrics-port-file", 1, 0, 'P'}, {"log-level", 1, 0, 'g'},
                                   {"check-config", 0, 0, 'C'}, {0, 0, 0, 0}};
    int o, check_only = 0;
    while ((o = getopt_long(argc, argv, "c:l:p:m:P:", opts, NULL)) != -1) {
        switch (o) {
        case 'c': config = optarg; break;
        case 'l': listen = optarg; break;
        case 'p': port_file = optarg; break;
        case 'm': metrics = optarg; break;
        case 'P': metrics_port_file = optarg; break;
        case 'g': log_level = optarg; break;
        case 'C': check_only = 1; break;
        default:
            fprintf(stderr, "usage: sandgate --config FILE [--listen ADDR] [--port-file FILE]\n"
                            "                [--metrics-listen ADDR] [--metrics-port-file FILE]\n"
                            "                [--log-level debug|info|warn|error] [--check-config]\n"
                            "  --check-config  load the config, its policy and its TLS files the\n"
                            "                  way serving would, report every error, and exit\n"
                            "                  (0 = would start); nothing listens or dials\n");
            return 2;
        }
    }
    if (!config) {
        fprintf(stderr, "usage: sandgate --config FILE [--listen ADDR] [--port-file FILE]\n");
        return 2;
    }
    int lvl = log_level ? sg_log_level_parse(log_level) : SG_LOG_INFO;
    if (lvl < 0) {
        sg_log_warn("--log-level %s: expected debug, info, warn or error",
                log_level);
        return 2;
    }
    sg_log_init("sandgate", (sg_log_level)lvl);
    sg_daemon_block_signals(SIGHUP);   /* SIGHUP: the policy watch thread (reload.c) */

    policy_errors errs = {0};
    if (config_gateway_load(config, &G.cfg, &errs) != 0) {
        for (size_t i = 0; i < errs.n; i++)
            sg_log_error("%s", errs.items[i]);
        return 1;
    }
    policy_errors_cleanup(&errs);
    sg_err err;
    if (gw_policy_load_initial(G.cfg.policy_path, G.cfg.api_keys_path, &err) != 0 ||
        gw_audit_open(G.cfg.audit_log, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    if (check_only) {
        /* The TLS files are read as serving reads them (slurp), so a
         * missing or unreadable Secret key fails here, not at start. */
        const char *files[] = {G.cfg.tls_cert, G.cfg.tls_key, G.cfg.tls_client_ca};
        int bad = 0;
        for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
            char *b = files[i] ? slurp(files[i]) : NULL;
            if (files[i] && !b) {
                sg_log_error("tls: %s cannot be read", files[i]);
                bad = 1;
            }
            if (b) {
                explicit_bzero(b, strlen(b));
                free(b);
            }
        }
        const config_registry *rg = &G.cfg.registry;
        etcd_tls tls = {rg->tls_ca, rg->tls_cert, rg->tls_key, rg->tls_server_name};
        if (rg->tls_ca && etcd_tls_check(&tls, &err) != 0) {
            sg_log_error("%s: %s", config, err.msg);
            bad = 1;
        }
        if (bad)
            return 1;
        sg_log_info("config %s: ok (%s)", config,
                !rg->n_endpoints ? "registry: static hosts"
                : rg->tls_ca     ? "registry: etcd over TLS"
                                 : "registry: etcd");
        return 0;
    }
    rpc_runtime_init();
    rpc_runtime_log_json();
    grpc_server_credentials *creds = NULL;
    if (G.cfg.tls_cert && !(creds = tls_creds(&err))) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    int port = 0;
    G.srv = rpc_server_create(G.cfg.threads, &err);
    if (G.srv && gw_metrics_init(G.srv) != 0) {
        sg_log_error("cannot set up metrics (out of memory)");
        return 1;
    }
    if (!metrics)
        metrics = G.cfg.metrics_listen;
    if (!G.srv || (metrics && gw_metrics_listen(metrics, metrics_port_file, &err) != 0) ||
        gw_hosts_connect(&err) != 0 || gw_health_start(&err) != 0 ||
        gw_service_register(G.srv, &err) != 0 ||
        rpc_reflection_register(G.srv, sg_gateway_descriptor_set, sg_gateway_descriptor_set_len,
                                &err) != 0 ||
        rpc_server_listen(G.srv, listen ? listen : G.cfg.listen, creds, &port, &err) != 0 ||
        rpc_server_start(G.srv, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    if (creds)
        grpc_server_credentials_release(creds);
    gw_policy_watch_start();
    rpc_health_set_info("sandgate-policy-sha256", policy_hash_info);
    if (sg_daemon_write_port(port_file, port) != 0)
        sg_log_warn("cannot write port file %s", port_file);
    sg_log_info("serving on port %d%s, %zu host(s)", port,
            G.mtls ? " (mTLS)" : "", G.n_hosts);
    int sig = sg_daemon_wait_stop();
    sg_log_info("signal %d: shutting down", sig);
    rpc_health_set_serving(0);
    rpc_metrics_http_stop();
    rpc_server_destroy(G.srv);
    gw_health_stop();
    gw_registry_stop();
    for (size_t i = 0; i < G.n_hosts; i++)
        if (G.hosts[i].channel)
            grpc_channel_destroy(G.hosts[i].channel);
    grpc_shutdown();
    return 0;
}
