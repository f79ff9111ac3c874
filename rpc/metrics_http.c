/* metrics_http.c — GET /metrics on libmicrohttpd's internal polling
 * thread. Only that one path and method are served; connections are
 * capped and time out, so a slow or hostile scraper costs a bounded number
 * of fds and never a daemon thread. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"
#include "rpc/metrics_http.h"

#define MAX_CONNECTIONS 16
#define CONNECTION_TIMEOUT_S 10

static struct MHD_Daemon *daemon_;

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, char *body, size_t len,
                             const char *type)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ok = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **state)
{
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("only GET\n"), 9, "text/plain");
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, strdup("not found; try /metrics\n"), 24,
                     "text/plain");
    size_t len;
    char *body = metrics_render(&len);
    if (!body)
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, strdup("out of memory\n"), 14,
                     "text/plain");
    return reply(conn, MHD_HTTP_OK, body, len, "text/plain; version=0.0.4; charset=utf-8");
}

/* "a.b.c.d:port" or "[v6]:port" into sa; 0 or -1. */
static int parse_addr(const char *addr, struct sockaddr_storage *sa, sg_err *err)
{
    char host[64];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host)
        return sg_err_set(err, SG_EINVAL, "metrics address \"%.80s\": expected host:port", addr);
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535)
        return sg_err_set(err, SG_EINVAL, "metrics address \"%.80s\": bad port", addr);
    memset(sa, 0, sizeof *sa);
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = 0;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1)
            return 0;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &s4->sin_addr) == 1)
            return 0;
    }
    return sg_err_set(err, SG_EINVAL, "metrics address \"%.80s\": not an IP address", addr);
}

int rpc_metrics_http_start(const char *addr, int *port, sg_err *err)
{
    struct sockaddr_storage sa;
    if (parse_addr(addr, &sa, err) != 0)
        return -1;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
                               (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                               (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                               (unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_END);
    if (!daemon_)
        return sg_err_set(err, SG_EUNAVAIL, "cannot listen for metrics on %s (in use?)", addr);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    if (port)
        *port = info ? info->port : 0;
    return 0;
}

void rpc_metrics_http_stop(void)
{
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}
