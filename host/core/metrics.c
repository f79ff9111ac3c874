/* metrics.c — what a host tells Prometheus: every call by service, method
 * and status (the rpc observer) with its latency; live sandboxes by
 * template and isolation, warm-pool depth and zygote restarts (read from
 * the table at scrape time); context restarts, action timeouts and OOM
 * kills; egress connections by decision and rule, and their bytes. The
 * scrape takes H.mu only to count, never across I/O. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/daemon.h"
#include "common/metrics.h"
#include "host/host.h"
#include "rpc/metrics_http.h"

static metric_family *calls, *call_seconds, *sandboxes, *pool_depth, *zygote_restarts,
    *ctx_restarts, *timeouts, *ooms, *egress_conns, *egress_bytes;

static void on_call(void *arg, const char *path, grpc_status_code code, double seconds,
                    const char *label)
{
    const char *p = path[0] == '/' ? path + 1 : path, *slash = strchr(p, '/');
    char svc[128];
    snprintf(svc, sizeof svc, "%.*s", (int)(slash ? slash - p : (long)strlen(p)), p);
    const char *labels[] = {svc, slash ? slash + 1 : "", rpc_status_name(code)};
    metric_add(calls, labels, 1);
    metric_observe(call_seconds, labels, seconds);   /* uses the first two */
}

static void collect(void *arg)
{
    metric_clear(sandboxes);
    pthread_mutex_lock(&H.mu);
    for (size_t i = 0; i < H.n_templates; i++) {
        host_template *t = &H.templates[i];
        size_t live = 0, ready = 0;
        for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
            live += !sb->pooled && sb->state == SB_RUNNING &&
                    strcmp(sb->template_name, t->cfg->name) == 0;
        for (host_sandbox *sb = t->pool; sb; sb = sb->pool_next)
            ready += sb->pool_ready != 0;
        const char *tl[] = {t->cfg->name, t->drv->name};
        metric_set(sandboxes, tl, (double)live);
        metric_set(pool_depth, tl, (double)ready);
        metric_set(zygote_restarts, tl, (double)t->restarts);
    }
    pthread_mutex_unlock(&H.mu);
}

void host_metrics_context_restart(const char *template_name)
{
    const char *l[] = {template_name};
    metric_add(ctx_restarts, l, 1);
}

void host_metrics_timeout(const char *kind)
{
    const char *l[] = {kind};
    metric_add(timeouts, l, 1);
}

void host_metrics_oom(const char *template_name)
{
    const char *l[] = {template_name};
    metric_add(ooms, l, 1);
}

void host_metrics_egress(const char *kind, int allow, const char *rule, uint64_t up,
                         uint64_t down)
{
    const char *l[] = {kind ? kind : "", allow ? "allow" : "deny", rule ? rule : ""};
    metric_add(egress_conns, l, 1);
    const char *u[] = {"up"}, *d[] = {"down"};
    metric_add(egress_bytes, u, (double)up);
    metric_add(egress_bytes, d, (double)down);
}

int host_metrics_init(rpc_server *srv)
{
    static const char *const call_l[] = {"grpc_service", "grpc_method", "grpc_code", NULL};
    static const char *const svc_l[] = {"grpc_service", "grpc_method", NULL};
    static const char *const tmpl_l[] = {"template", "isolation", NULL};
    static const char *const t_l[] = {"template", NULL};
    static const char *const kind_l[] = {"kind", NULL};
    static const char *const eg_l[] = {"kind", "decision", "rule", NULL};
    static const char *const dir_l[] = {"direction", NULL};
    calls = metric_family_create("sandgate_host_calls_total",
                                 "Calls answered, by service, method and status.",
                                 METRIC_COUNTER, call_l, NULL, 0);
    call_seconds = metric_family_create("sandgate_host_call_seconds",
                                        "Time from a call's arrival to its status.",
                                        METRIC_HISTOGRAM, svc_l, NULL, 0);
    sandboxes = metric_family_create("sandgate_host_sandboxes",
                                     "Live sandboxes with an owner, by template and isolation.",
                                     METRIC_GAUGE, tmpl_l, NULL, 0);
    pool_depth = metric_family_create("sandgate_host_warm_pool",
                                      "Warm sandboxes ready to hand out, by template.",
                                      METRIC_GAUGE, tmpl_l, NULL, 0);
    zygote_restarts = metric_family_create("sandgate_host_zygote_restarts",
                                           "Times the template's zygote was restarted.",
                                           METRIC_GAUGE, tmpl_l, NULL, 0);
    ctx_restarts = metric_family_create("sandgate_host_context_restarts_total",
                                        "Contexts restarted after they died, by template.",
                                        METRIC_COUNTER, t_l, NULL, 0);
    timeouts = metric_family_create("sandgate_host_action_timeouts_total",
                                    "Actions stopped at their timeout, by kind (run, exec).",
                                    METRIC_COUNTER, kind_l, NULL, 0);
    ooms = metric_family_create("sandgate_host_oom_kills_total",
                                "Contexts killed for exceeding the sandbox's memory limit.",
                                METRIC_COUNTER, t_l, NULL, 0);
    egress_conns = metric_family_create(
        "sandgate_host_egress_connections_total",
        "Egress connections decided by the proxy, by kind, decision and policy rule.",
        METRIC_COUNTER, eg_l, NULL, 0);
    egress_bytes = metric_family_create("sandgate_host_egress_bytes_total",
                                        "Bytes relayed by the egress proxy, by direction.",
                                        METRIC_COUNTER, dir_l, NULL, 0);
    if (!calls || !call_seconds || !sandboxes || !pool_depth || !zygote_restarts ||
        !ctx_restarts || !timeouts || !ooms || !egress_conns || !egress_bytes ||
        metrics_add_collector(collect, NULL) != 0)
        return -1;
    /* series every scrape should show from the start, at 0 */
    const char *run[] = {"run"}, *exec[] = {"exec"}, *up[] = {"up"}, *down[] = {"down"};
    metric_add(timeouts, run, 0);
    metric_add(timeouts, exec, 0);
    metric_add(egress_bytes, up, 0);
    metric_add(egress_bytes, down, 0);
    rpc_server_set_observer(srv, on_call, NULL);
    return 0;
}

int host_metrics_listen(const char *addr, const char *port_file, sg_err *err)
{
    int port = 0;
    if (rpc_metrics_http_start(addr, &port, err) != 0)
        return -1;
    if (sg_daemon_write_port(port_file, port) != 0)
        sg_log_warn("cannot write metrics port file %s", port_file);
    sg_log_info("metrics on http://%s/metrics (port %d)", addr, port);
    return 0;
}
