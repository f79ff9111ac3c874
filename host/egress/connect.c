/* connect.c — from a judged name to a connected upstream: each resolved
 * address is judged by the rules (only those allowed are kept, the first
 * decides), then the kept addresses, or an allowed IP literal, are tried in
 * order until one connects; a CONNECT then answers 200 and waits for the
 * ClientHello (HELLO), an HTTP request starts relaying. Judging the name and
 * the request is request.c, resolving it lookup.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host/egress/proxy_internal.h"

static const uint8_t v4p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};  /* ::ffff:0:0/96 */

static void start_connect(conn *c);

static void ip16_of(const struct sockaddr_storage *ss, uint8_t ip[16])
{
    if (ss->ss_family == AF_INET) {
        memcpy(ip, v4p, 12);
        memcpy(ip + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    } else {
        char tmp[64];
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, tmp, sizeof tmp);
        if (!egress_ip_parse(tmp, ip))   /* folds mapped/NAT64 forms */
            memcpy(ip, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    }
}

/* Keep only the addresses the rules allow; the first decides. */
void eg_connect_on_resolved(conn *c, const eg_addrs *res)
{
    if (res->err || !res->n) {
        eg_fail(c, 502, "default.resolve-failed", "could not resolve %s: %s", c->req.host,
                res->err == EAI_NONAME || res->err == -1 ? "no such host" : gai_strerror(res->err));
        return;
    }
    egress_decision first = {0}, d;
    c->addrs.n = 0;
    for (size_t i = 0; i < res->n; i++) {
        uint8_t ip[16];
        ip16_of(&res->a[i], ip);
        egress_decide(c->sb->rules, c->req.host, c->req.port, ip, &d);
        if (i == 0)
            first = d;
        if (d.allow) {
            if (!c->addrs.n) {
                first = d;
                egress_ip_format(ip, c->ip, sizeof c->ip);
            }
            c->addrs.a[c->addrs.n] = res->a[i];
            c->addrs.len[c->addrs.n++] = res->len[i];
        }
    }
    if (!c->addrs.n) {
        uint8_t ip[16];
        ip16_of(&res->a[0], ip);
        egress_ip_format(ip, c->ip, sizeof c->ip);
        eg_fail(c, 403, first.rule, "%s", first.reason);
        return;
    }
    eg_conn_allowed(c, &first);
    c->next_addr = 0;
    start_connect(c);
}

/* An IP-literal host is judged by CIDR rules only (d allowed it); the
 * address is the literal itself. */
void eg_connect_literal(conn *c, const uint8_t lit[16], const egress_decision *d)
{
    eg_conn_allowed(c, d);
    egress_ip_format(lit, c->ip, sizeof c->ip);
    memset(&c->addrs, 0, sizeof c->addrs);
    if (memcmp(lit, v4p, 12) == 0) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&c->addrs.a[0];
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)c->req.port);
        memcpy(&s4->sin_addr, lit + 12, 4);
        c->addrs.len[0] = sizeof *s4;
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&c->addrs.a[0];
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)c->req.port);
        memcpy(&s6->sin6_addr, lit, 16);
        c->addrs.len[0] = sizeof *s6;
    }
    c->addrs.n = 1;
    c->next_addr = 0;
    start_connect(c);
}

/* Try the kept addresses in order, from c->next_addr. */
static void start_connect(conn *c)
{
    egress_proxy *p = c->sb->p;
    while (c->next_addr < c->addrs.n) {
        size_t i = c->next_addr++;
        const struct sockaddr *sa = (const struct sockaddr *)&c->addrs.a[i];
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, sa, c->addrs.len[i]) < 0 && errno != EINPROGRESS) {
            close(fd);
            continue;
        }
        uint8_t ip[16];
        ip16_of(&c->addrs.a[i], ip);
        egress_ip_format(ip, c->ip, sizeof c->ip);
        c->ufd = fd;
        c->uev = ~0u;
        c->st = C_CONNECTING;
        c->deadline_us = eg_now_us() + (int64_t)p->o.connect_timeout_ms * 1000;
        eg_conn_update(c);
        return;
    }
    eg_fail(c, 502, "default.connect-failed", "could not connect to %s port %u (%s)", c->req.host,
            c->req.port, c->ip);
}

void eg_connect_on_ready(conn *c)
{
    egress_proxy *p = c->sb->p;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
        eg_conn_drop_fd(c, &c->ufd, &c->uev);
        start_connect(c);
        return;
    }
    if (c->req.kind == EG_REQ_CONNECT) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        memcpy(c->resp, ok, sizeof ok - 1);
        c->resp_len = sizeof ok - 1;
        c->resp_off = 0;
        c->st = C_HELLO;
        c->deadline_us = eg_now_us() + (int64_t)p->o.header_timeout_ms * 1000;
    } else {
        c->st = C_RELAY;
        c->deadline_us = eg_now_us() + (int64_t)p->o.idle_timeout_ms * 1000;
    }
    eg_conn_update(c);
}
