/* metrics_http.h — the /metrics endpoint: a separate HTTP listener
 * (libmicrohttpd, its own thread) serving common/metrics.c's registry in
 * Prometheus text format. It shares nothing with the gRPC listener, so a
 * scrape never waits behind calls and calls never wait behind a scrape. */
#ifndef SG_RPC_METRICS_HTTP_H
#define SG_RPC_METRICS_HTTP_H

#include "common/err.h"

/* addr "127.0.0.1:9100", "[::1]:0" (0 = any free port); *port gets the
 * port bound. */
int rpc_metrics_http_start(const char *addr, int *port, sg_err *err);
void rpc_metrics_http_stop(void);

#endif
