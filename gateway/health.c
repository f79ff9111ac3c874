/* health.c — which hosts are serving. A thread of its own, on a completion
 * queue of its own, sends grpc.health.v1 Check ("sandgate.v1.Host") to every
 * host every GW_HEALTH_PERIOD_MS, each with a GW_HEALTH_DEADLINE_MS deadline,
 * and keeps the answer in gw_host.serving. A host is NOT_SERVING as soon as
 * a Check fails (refused, reset, NOT_SERVING, unknown service) or
 * GW_HEALTH_MISSES Checks in a row miss their deadline: a stopped (SIGSTOP)
 * or wedged host is out within period + misses x deadline (~1.2 s), and one
 * slow answer on a loaded machine does not flap it. One SERVING answer in
 * time brings it back. Placement
 * (router.c) and fan-outs (list.c) read the flag and skip such hosts at once,
 * so no public call waits on a host the checker already knows is gone.
 *
 * While a host is SERVING it is also asked, every GW_LOAD_REPORT_MS, for its
 * load report (ListSandboxes with all_tenants), which refreshes the cached
 * quota counts (counts.c) for every tenant: a create on any replica then
 * counts a host that has just stopped by what it held a second before.
 *
 * Nothing here blocks the server's loop threads: the checks complete on this
 * thread's queue. A Watch stream would not do: a stopped host keeps its TCP
 * connection, so the stream just goes quiet. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/log.h"
#include "gateway/request.h"
#include "grpc/health/v1/health.pb-c.h"

static grpc_completion_queue *health_cq;
static pthread_t health_thread;
static atomic_int health_stop;
static int health_running;

int gw_host_serving(const gw_host *h)
{
    return h && atomic_load(&h->present) && atomic_load(&h->registered) &&
           atomic_load(&h->serving) == GW_HOST_SERVING;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void set_state(gw_host *h, int state, const char *why)
{
    int old = atomic_exchange(&h->serving, state);
    if (old != state)
        /* The log may name the address; public messages never do. */
        sg_log_info("host %s (%s): %s%s%s", h->name, gw_host_address(h),
                state == GW_HOST_SERVING ? "SERVING" : "NOT_SERVING", why[0] ? ": " : "", why);
}

static void on_check_done(void *arg, rpc_unary_result *res)
{
    gw_host *h = arg;
    int state = GW_HOST_NOT_SERVING;
    char why[128] = "";
    if (res->code == GRPC_STATUS_OK && res->resp) {
        size_t len;
        uint8_t *buf = rpc_flatten(res->resp, &len);
        Grpc__Health__V1__HealthCheckResponse *hr =
            (Grpc__Health__V1__HealthCheckResponse *)rpc_unpack(
                &grpc__health__v1__health_check_response__descriptor, buf, len, NULL);
        free(buf);
        if (hr && hr->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING)
            state = GW_HOST_SERVING;
        else
            snprintf(why, sizeof why, "health check says %d", hr ? (int)hr->status : -1);
        if (hr)
            protobuf_c_message_free_unpacked(&hr->base, NULL);
    } else {
        snprintf(why, sizeof why, "health check %s", rpc_status_name(res->code));
    }
    if (res->code == GRPC_STATUS_DEADLINE_EXCEEDED && ++h->misses < GW_HEALTH_MISSES &&
        atomic_load(&h->serving) == GW_HOST_SERVING)
        state = GW_HOST_SERVING;   /* one late answer: wait for the next */
    else if (res->code != GRPC_STATUS_DEADLINE_EXCEEDED)
        h->misses = 0;
    if (res->resp)
        grpc_byte_buffer_destroy(res->resp);
    set_state(h, state, why);
    atomic_store(&h->checking, 0);
}

static void check_start(gw_host *h)
{
    Grpc__Health__V1__HealthCheckRequest req;
    grpc__health__v1__health_check_request__init(&req);
    req.service = "sandgate.v1.Host";
    sg_err e;
    atomic_store(&h->checking, 1);
    if (rpc_unary_start(gw_host_channel(h), health_cq, NULL, "/grpc.health.v1.Health/Check",
                        rpc_deadline_in(GW_HEALTH_DEADLINE_MS / 1000.0), NULL, 0,
                        rpc_pack(&req.base), on_check_done, h, &e) != 0) {
        set_state(h, GW_HOST_NOT_SERVING, e.msg);
        atomic_store(&h->checking, 0);
    }
}

static void on_report_done(void *arg, rpc_unary_result *res)
{
    gw_host *h = arg;
    if (res->resp) {
        size_t len;
        uint8_t *buf = rpc_flatten(res->resp, &len);
        grpc_byte_buffer_destroy(res->resp);
        Sandgate__V1__HostListResponse *all = (Sandgate__V1__HostListResponse *)rpc_unpack(
            &sandgate__v1__host_list_response__descriptor, buf, len, NULL);
        free(buf);
        if (all) {
            gw_counts_report((size_t)(h - G.hosts), all);
            protobuf_c_message_free_unpacked(&all->base, NULL);
        }
    }
    h->reporting = 0;
}

static void report_start(gw_host *h, int64_t now)
{
    Sandgate__V1__HostListRequest req;
    sandgate__v1__host_list_request__init(&req);
    req.all_tenants = 1;
    sg_err e;
    h->next_report_ms = now + GW_LOAD_REPORT_MS;
    h->reporting = 1;
    if (rpc_unary_start(gw_host_channel(h), health_cq, NULL, "/sandgate.v1.Host/ListSandboxes",
                        rpc_deadline_in(GW_LOAD_REPORT_MS / 1000.0), NULL, 0, rpc_pack(&req.base),
                        on_report_done, h, &e) != 0)
        h->reporting = 0;
}

static void *health_main(void *arg)
{
    int64_t next = 0;
    int stopping = 0;
    for (;;) {
        if (!stopping && atomic_load(&health_stop)) {
            stopping = 1;   /* no new checks; drain the ones in flight */
            grpc_completion_queue_shutdown(health_cq);
        }
        int64_t t = now_ms();
        if (!stopping && t >= next) {
            for (size_t i = 0; i < G.n_hosts; i++) {
                gw_host *h = &G.hosts[i];
                if (!atomic_load(&h->present))
                    continue;   /* an empty registry slot */
                if (!atomic_load(&h->checking))
                    check_start(h);
                if (!h->reporting && t >= h->next_report_ms && gw_host_serving(h))
                    report_start(h, t);
            }
            next = t + GW_HEALTH_PERIOD_MS;
        }
        gpr_timespec until = stopping ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                                      : gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                     gpr_time_from_millis(next - t, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(health_cq, until, NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type == GRPC_OP_COMPLETE) {
            rpc_tag *tag = ev.tag;
            tag->fn(tag->arg, ev.success);
        }
    }
}

int gw_health_start(sg_err *err)
{
    health_cq = grpc_completion_queue_create_for_next(NULL);
    atomic_store(&health_stop, 0);
    if (pthread_create(&health_thread, NULL, health_main, NULL) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "pthread_create(host health)");
    health_running = 1;
    /* Start serving with a first answer from every host (or its deadline
     * passed), so the first calls already skip a host that is down. */
    int64_t until = now_ms() + GW_HEALTH_DEADLINE_MS + 100;
    for (;;) {
        int pending = 0;
        for (size_t i = 0; i < G.n_hosts; i++)
            pending += atomic_load(&G.hosts[i].present) &&
                       atomic_load(&G.hosts[i].serving) == GW_HOST_UNKNOWN;
        if (!pending || now_ms() >= until)
            break;
        nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
    }
    return 0;
}

void gw_health_stop(void)
{
    if (!health_running)
        return;
    atomic_store(&health_stop, 1);
    pthread_join(health_thread, NULL);
    grpc_completion_queue_destroy(health_cq);
    health_running = 0;
}
