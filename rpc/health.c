/* health.c — grpc.health.v1.Health for both daemons. Check answers the
 * daemon's current status; Watch sends it once and keeps the stream open
 * until the server shuts down (status changes are rare: start and stop). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "rpc/health.h"
#include "rpc/validate.h"

static atomic_int health_status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;

void rpc_health_set_serving(int serving)
{
    atomic_store(&health_status,
                 serving ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                         : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
}

static int answer(rpc_call *c, Grpc__Health__V1__HealthCheckResponse *resp)
{
    size_t len;
    const uint8_t *buf = rpc_call_request(c, &len);
    sg_err err;
    /* checked on the wire: "<service>\0junk" must not pass for <service> */
    Grpc__Health__V1__HealthCheckRequest *req = (Grpc__Health__V1__HealthCheckRequest *)
        rpc_unpack_valid(&rpc_health_request_rules, buf, len, &err);
    if (!req) {
        rpc_call_fail(c, &err);
        return -1;
    }
    int known = req->service[0] == 0 || rpc_health_service_known(req->service);
    protobuf_c_message_free_unpacked(&req->base, NULL);
    if (!known) {
        rpc_call_finish(c, GRPC_STATUS_NOT_FOUND, "unknown service");
        return -1;
    }
    grpc__health__v1__health_check_response__init(resp);
    resp->status = atomic_load(&health_status);
    return 0;
}

static const char *info_key;
static void (*info_fn)(char *buf, size_t cap);

void rpc_health_set_info(const char *key, void (*fn)(char *buf, size_t cap))
{
    info_key = key;
    info_fn = fn;
}

static void on_check(rpc_call *c, void *data)
{
    Grpc__Health__V1__HealthCheckResponse resp;
    if (answer(c, &resp) != 0)
        return;
    if (!info_fn) {
        rpc_call_reply(c, &resp.base);
        return;
    }
    char buf[256];
    info_fn(buf, sizeof buf);
    grpc_metadata md = {.key = grpc_slice_from_static_string(info_key),
                        .value = grpc_slice_from_copied_string(buf)};
    rpc_call_send_msg(c, &resp.base);
    rpc_call_finish_md(c, GRPC_STATUS_OK, NULL, &md, 1);
    grpc_slice_unref(md.value);
}

static void on_watch(rpc_call *c, void *data)
{
    Grpc__Health__V1__HealthCheckResponse resp;
    if (answer(c, &resp) == 0)
        rpc_call_send_msg(c, &resp.base);
    /* Status is sent when the server cancels the call at shutdown. */
    rpc_call_on_cancel(c, (void (*)(void *))rpc_health_watch_end, c);
}

void rpc_health_watch_end(rpc_call *c)
{
    rpc_call_finish(c, GRPC_STATUS_CANCELLED, "server shutting down");
}

static const char *known_services[8];

int rpc_health_service_known(const char *name)
{
    for (int i = 0; i < 8 && known_services[i]; i++)
        if (strcmp(known_services[i], name) == 0)
            return 1;
    return 0;
}

int rpc_health_register(rpc_server *s, const char *service, sg_err *err)
{
    for (int i = 0; i < 8; i++)
        if (!known_services[i]) {
            known_services[i] = service;
            break;
        }
    if (rpc_server_add_method(s, "/grpc.health.v1.Health/Check", on_check, NULL, err) != 0)
        return -1;
    return rpc_server_add_method(s, "/grpc.health.v1.Health/Watch", on_watch, NULL, err);
}
