/* metrics.c — what the gateway tells Prometheus: every call by service,
 * method, status and tenant (the rpc observer), call and forward latency,
 * policy decisions, the live policy's hash and its reloads, and each
 * host's health as the gateway sees it. Tenant values come only from
 * authenticated identities, which the policy defines, so the label's
 * cardinality is bounded by the policy (and by the registry's cap). */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "gateway/gw.h"
#include "rpc/metrics_http.h"

static metric_family *calls, *call_seconds, *forward_seconds, *decisions, *reloads,
    *policy_info, *host_up;

/* "/pkg.Service/Method" into its two halves. */
static void split_path(const char *path, char *svc, size_t svc_cap, const char **method)
{
    const char *p = path[0] == '/' ? path + 1 : path, *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    snprintf(svc, svc_cap, "%.*s", (int)n, p);
    *method = slash ? slash + 1 : "";
}

static void on_call(void *arg, const char *path, grpc_status_code code, double seconds,
                    const char *tenant)
{
    char svc[128];
    const char *method;
    split_path(path, svc, sizeof svc, &method);
    const char *labels[] = {svc, method, rpc_status_name(code), tenant};
    metric_add(calls, labels, 1);
    metric_observe(call_seconds, labels, seconds);   /* uses the first two */
}

void gw_metrics_forward(const char *path, double seconds)
{
    char svc[128];
    const char *method;
    split_path(path, svc, sizeof svc, &method);
    const char *labels[] = {method};
    metric_observe(forward_seconds, labels, seconds);
}

void gw_metrics_decision(const char *action, int allow)
{
    const char *labels[] = {action ? action : "", allow ? "allow" : "deny"};
    metric_add(decisions, labels, 1);
}

void gw_metrics_reload(int ok)
{
    const char *labels[] = {ok ? "ok" : "rejected"};
    metric_add(reloads, labels, 1);
}

/* Gauges that mirror state, refilled at each scrape. */
static void collect(void *arg)
{
    metric_clear(policy_info);
    policy *p = gw_policy_acquire();
    if (p) {
        const char *labels[] = {policy_hash(p)};
        metric_set(policy_info, labels, 1);
        policy_unref(p);
    }
    for (size_t i = 0; i < G.n_hosts; i++) {
        if (!atomic_load(&G.hosts[i].present))
            continue;
        const char *labels[] = {G.hosts[i].name};
        metric_set(host_up, labels, gw_host_serving(&G.hosts[i]) ? 1 : 0);
    }
}

int gw_metrics_init(rpc_server *srv)
{
    static const char *const call_labels[] = {"grpc_service", "grpc_method", "grpc_code",
                                              "tenant", NULL};
    static const char *const svc_labels[] = {"grpc_service", "grpc_method", NULL};
    static const char *const method_label[] = {"grpc_method", NULL};
    static const char *const decision_labels[] = {"action", "decision", NULL};
    static const char *const result_label[] = {"result", NULL};
    static const char *const hash_label[] = {"sha256", NULL};
    static const char *const host_label[] = {"host", NULL};
    calls = metric_family_create("sandgate_gateway_calls_total",
                                 "Calls answered, by service, method, status and tenant.",
                                 METRIC_COUNTER, call_labels, NULL, 0);
    call_seconds = metric_family_create(
        "sandgate_gateway_call_seconds",
        "Time from a call's arrival to its status (a RunCode's whole stream).", METRIC_HISTOGRAM,
        svc_labels, NULL, 0);
    forward_seconds = metric_family_create(
        "sandgate_gateway_forward_seconds",
        "Time a call spent forwarded to its host, until the host's status.", METRIC_HISTOGRAM,
        method_label, NULL, 0);
    decisions = metric_family_create("sandgate_gateway_policy_decisions_total",
                                     "Policy decisions, by action and outcome.", METRIC_COUNTER,
                                     decision_labels, NULL, 0);
    reloads = metric_family_create("sandgate_gateway_policy_reloads_total",
                                   "Policy reloads, applied (ok) or refused (rejected).",
                                   METRIC_COUNTER, result_label, NULL, 0);
    policy_info = metric_family_create("sandgate_gateway_policy_info",
                                       "The live policy's sha256 (value 1).", METRIC_GAUGE,
                                       hash_label, NULL, 0);
    host_up = metric_family_create("sandgate_gateway_host_serving",
                                   "1 while the host's health check answers SERVING in time.",
                                   METRIC_GAUGE, host_label, NULL, 0);
    if (!calls || !call_seconds || !forward_seconds || !decisions || !reloads || !policy_info ||
        !host_up || metrics_add_collector(collect, NULL) != 0)
        return -1;
    rpc_server_set_observer(srv, on_call, NULL);
    return 0;
}

int gw_metrics_listen(const char *addr, const char *port_file, sg_err *err)
{
    int port = 0;
    if (rpc_metrics_http_start(addr, &port, err) != 0)
        return -1;
    if (sg_daemon_write_port(port_file, port) != 0)
        sg_log_warn("cannot write metrics port file %s", port_file);
    sg_log_info("metrics on http://%s/metrics (port %d)", addr, port);
    return 0;
}
