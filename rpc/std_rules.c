/* std_rules.c — field rules for the requests of the standard services rpc/
 * serves on both daemons (grpc.health.v1.Health, grpc.reflection.v1):
 * valid UTF-8 without NUL, at most 255 bytes for a health service name and
 * 4096 for anything in a reflection request. Checked by health.c and
 * reflection.c before they look a name up or echo the request back (an
 * echoed invalid string would make the reply unreadable to the client). */
#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rpc/validate.h"

static const rpc_field_rule health_fields[] = {{"service", RPC_CS_TEXT, 255}};

const rpc_rules rpc_health_request_rules = {
    &grpc__health__v1__health_check_request__descriptor, health_fields, 1, 255};
const rpc_rules rpc_reflection_request_rules = {
    &grpc__reflection__v1__server_reflection_request__descriptor, NULL, 0, 4096};
