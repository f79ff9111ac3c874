/* conn.c — one client connection's life: start (with the per-sandbox
 * connection limit), the epoll interest its state calls for, close (into the
 * proxy's graveyard, freed after the batch), and the proxy's own answers: a
 * decision recorded as allowed, or a denial answered with an HTTP error or,
 * inside a tunnel, a TLS alert. Moving a connection from state to state is
 * request.c, connect.c, lookup.c and relay.c. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fds.h"
#include "host/egress/proxy_internal.h"

/* ---- epoll interest -------------------------------------------------------- */

static void watch(egress_proxy *p, int fd, fdref *ref, uint32_t *cur, uint32_t want)
{
    if (fd < 0 || *cur == want)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = ref};
    if (*cur == ~0u)
        epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev);
    else
        epoll_ctl(p->epfd, EPOLL_CTL_MOD, fd, &ev);
    *cur = want;
}

/* Deregister, then close. close() alone does not take an fd out of epoll
 * while another reference to its file lives on: the supervisor in the
 * sandbox may still hold the client socket it passed us, or a fork may
 * hold any of them for a moment. The registration then outlives the conn
 * and its next event reads freed memory (seen: SIGSEGV in proxy_main under
 * load). */
void eg_conn_drop_fd(conn *c, int *fd, uint32_t *ev)
{
    if (*fd < 0)
        return;
    if (*ev != ~0u)
        epoll_ctl(c->sb->p->epfd, EPOLL_CTL_DEL, *fd, NULL);
    close(*fd);
    *fd = -1;
    *ev = ~0u;
}

void eg_conn_update(conn *c)
{
    egress_proxy *p = c->sb->p;
    uint32_t ce = 0, ue = 0;
    int to_client = c->resp_len > c->resp_off || c->u2c.len;
    switch (c->st) {
    case C_HEAD:
        ce = EPOLLIN;
        break;
    case C_RESOLVING:
        break;
    case C_CONNECTING:
        ue = EPOLLOUT;
        break;
    case C_HELLO:
        ce = EPOLLIN | (to_client ? EPOLLOUT : 0);
        break;
    case C_RELAY:
        if (!c->c_eof && c->c2u.off + c->c2u.len < EG_BUF_CAP)
            ce |= EPOLLIN;
        if (to_client)
            ce |= EPOLLOUT;
        if (!c->u_eof && c->u2c.off + c->u2c.len < EG_BUF_CAP)
            ue |= EPOLLIN;
        if (c->c2u.len && !c->u_eof)
            ue |= EPOLLOUT;
        break;
    case C_FLUSH:
        ce = to_client ? EPOLLOUT : EPOLLIN;   /* then drain until EOF */
        break;
    }
    watch(p, c->cfd, &c->cref, &c->cev, ce);
    watch(p, c->ufd, &c->uref, &c->uev, ue);
}

/* ---- closing ----------------------------------------------------------------- */

void eg_conn_close(conn *c)
{
    if (c->dead)
        return;
    c->dead = 1;
    egress_sandbox *sb = c->sb;
    egress_proxy *p = sb->p;
    if (c->cap_hit) {
        size_t n = strlen(c->dec.reason);
        snprintf(c->dec.reason + n, sizeof c->dec.reason - n,
                 "; closed: the sandbox reached its egress byte cap of %llu bytes",
                 (unsigned long long)sb->cap);
    }
    eg_audit_conn(c);
    if (c->job) {
        c->job->c = NULL;
        c->job = NULL;
    }
    eg_conn_drop_fd(c, &c->cfd, &c->cev);
    eg_conn_drop_fd(c, &c->ufd, &c->uev);
    sb->open--;
    for (conn **pp = &sb->conns; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    c->next = p->grave;
    p->grave = c;
}

void eg_conn_free(conn *c)
{
    eg_req_cleanup(&c->req);
    free(c->c2u.p);
    free(c->u2c.p);
    free(c);
}

/* ---- start ------------------------------------------------------------------- */

/* A connection takes two fds (client, upstream): refused while that would
 * leave fewer than the reserve. A count is a /proc/self/fd scan, so it is
 * redone at most every 100 ms, or at every connection near the edge; in
 * between each connection is taken to cost its two. */
static int fds_short(egress_proxy *p)
{
    long reserve = (long)p->o.reserve_fds;
    if (!reserve)
        return 0;
    int64_t now = eg_now_us();
    if (now - p->fds_at > 100000 || p->fds_free < 4 * reserve) {
        long limit = sg_fds_limit();
        p->fds_free = limit < 0 ? LONG_MAX / 2 : limit - sg_fds_open(limit);
        p->fds_at = now;
    }
    if (p->fds_free - 2 < reserve)
        return 1;
    p->fds_free -= 2;
    return 0;
}

/* A client connection of sb (accepted or handed in): fd is owned,
 * non-blocking. p->mu held. */
void eg_conn_start(egress_sandbox *sb, int fd)
{
    egress_proxy *p = sb->p;
    if (sb->open >= EG_MAX_CONNS_PER_SANDBOX) {
        static const char busy[] = "HTTP/1.1 503 Service Unavailable by sandgate egress policy (too many connections)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    if (fds_short(p)) {
        static const char dry[] = "HTTP/1.1 503 Service Unavailable by sandgate egress (the host is short of file descriptors)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!send(fd, dry, sizeof dry - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    conn *c = calloc(1, sizeof *c);
    if (c) {
        c->c2u.p = malloc(EG_BUF_CAP + EG_BUF_SLACK);
        c->u2c.p = malloc(EG_BUF_CAP + EG_BUF_SLACK);
    }
    if (!c || !c->c2u.p || !c->u2c.p) {
        if (c)
            eg_conn_free(c);
        close(fd);
        return;
    }
    c->sb = sb;
    c->cfd = fd;
    c->ufd = -1;
    c->cev = c->uev = ~0u;
    c->cref = (fdref){FD_CLIENT, c};
    c->uref = (fdref){FD_UPSTREAM, c};
    c->st = C_HEAD;
    c->deadline_us = eg_now_us() + (int64_t)p->o.header_timeout_ms * 1000;
    c->next = sb->conns;
    sb->conns = c;
    sb->open++;
    eg_conn_update(c);
}

/* ---- answers ------------------------------------------------------------------ */

static const char *status_text(int code)
{
    switch (code) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
    }
}

/* Answer with an error and close after it is sent. The rule and reason go
 * in the status line (what pip and most clients print), in headers, and
 * in the body. Audited as a denial. */
void eg_fail(conn *c, int code, const char *rule, const char *fmt, ...)
{
    va_list ap;
    char reason[320];
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (c->decided && c->dec.allow)
        c->sb->allowed--;
    c->sb->denied++;
    c->decided = 1;
    c->dec.allow = 0;
    snprintf(c->dec.rule, sizeof c->dec.rule, "%s", rule);
    snprintf(c->dec.reason, sizeof c->dec.reason, "%s", reason);
    eg_audit_conn(c);
    char body[512];
    int bl = snprintf(body, sizeof body,
                      "sandgate egress proxy: %s %s:%u %s\nrule: %s\nreason: %s\n",
                      c->req.method[0] ? c->req.method : "request", c->req.host, c->req.port,
                      code == 403 ? "denied" : "failed", rule, reason);
    if (bl < 0 || bl >= (int)sizeof body)
        bl = (int)strlen(body);
    c->resp_len = (size_t)snprintf(
        c->resp, sizeof c->resp,
        "HTTP/1.1 %d %s by sandgate egress policy (%s)\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "X-Sandgate-Egress-Rule: %s\r\n"
        "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
        code, status_text(code), rule, rule, bl, body);
    if (c->resp_len >= sizeof c->resp)
        c->resp_len = sizeof c->resp - 1;
    c->resp_off = 0;
    c->u2c.len = c->u2c.off = 0;
    eg_conn_drop_fd(c, &c->ufd, &c->uev);
    if (c->job) {
        c->job->c = NULL;
        c->job = NULL;
    }
    c->st = C_FLUSH;
    c->deadline_us = eg_now_us() + 2000000;
    eg_conn_update(c);
}

/* After the 200 of a CONNECT the client speaks TLS: a refusal is a TLS
 * alert (access_denied), then close. */
void eg_fail_tunnel(conn *c, const char *rule, const char *reason)
{
    static const uint8_t alert[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31};
    if (c->dec.allow) {
        c->sb->allowed--;
        c->sb->denied++;
    }
    c->dec.allow = 0;
    snprintf(c->dec.rule, sizeof c->dec.rule, "%s", rule);
    snprintf(c->dec.reason, sizeof c->dec.reason, "%s", reason);
    eg_audit_conn(c);
    (void)!send(c->cfd, alert, sizeof alert, MSG_NOSIGNAL | MSG_DONTWAIT);
    eg_conn_close(c);
}

/* ---- decisions ---------------------------------------------------------------- */

void eg_conn_allowed(conn *c, const egress_decision *d)
{
    c->dec = *d;
    c->decided = 1;
    c->sb->allowed++;
}
