/* relay.c — moving a connection's bytes: the client and upstream sockets
 * read into and written from the two bounded buffers, every write counted
 * against the sandbox's byte cap, half-close passed on, the proxy's own
 * answer sent, and the upstream's HTTP response head marked
 * "Connection: close". What the first client bytes mean (head, ClientHello)
 * is request.c; the epoll interest is conn.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host/egress/proxy_internal.h"

static int buf_room(iobuf *b)
{
    if (b->off && b->off + b->len >= EG_BUF_CAP) {
        memmove(b->p, b->p + b->off, b->len);
        b->off = 0;
    }
    return b->off + b->len < EG_BUF_CAP;
}

static int hdr_is(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && line[k] == ':' && strncasecmp(line, name, k) == 0;
}

/* HTTP: the proxy answers one request per connection, so the response the
 * client sees says so ("Connection: close", the upstream's Connection and
 * Keep-Alive dropped); a client that pools connections (pip, urllib3) then
 * never reuses one the proxy will not serve again. Returns 0 when done or
 * still waiting for the head, -1 when the head does not fit. */
static int rewrite_response_head(conn *c)
{
    iobuf *b = &c->u2c;
    if (c->req.kind != EG_REQ_HTTP || c->resp_head_done)
        return 0;
    char *p = (char *)b->p + b->off, *end = NULL;
    for (size_t i = 3; i < b->len; i++)
        if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r') {
            end = p + i + 1;
            break;
        }
    if (!end)
        return b->off + b->len >= EG_BUF_CAP ? -1 : 0;
    c->resp_head_done = 1;
    size_t head = (size_t)(end - p), rest = b->len - head;
    char *nh = malloc(head + 32);
    if (!nh)
        return -1;
    size_t n = 0;
    for (char *l = p; l < end - 2;) {
        char *e = memchr(l, '\n', (size_t)(end - l));
        size_t ll = (size_t)(e - l) + 1;
        if (l == p || !(hdr_is(l, ll, "connection") || hdr_is(l, ll, "keep-alive") ||
                        hdr_is(l, ll, "proxy-connection"))) {
            memcpy(nh + n, l, ll);
            n += ll;
        }
        l = e + 1;
    }
    memcpy(nh + n, "Connection: close\r\n\r\n", 21);
    n += 21;
    /* the buffer has EG_BUF_SLACK bytes beyond EG_BUF_CAP for this */
    memmove(b->p + n, end, rest);
    memcpy(b->p, nh, n);
    free(nh);
    b->off = 0;
    b->len = n + rest;
    return 0;
}

/* Read what fd has into b. Returns bytes read, 0 on EOF, -1 on EAGAIN, -2
 * on error. */
static ssize_t fill(int fd, iobuf *b)
{
    if (!buf_room(b))
        return -1;
    ssize_t n = recv(fd, b->p + b->off + b->len, EG_BUF_CAP - b->off - b->len, 0);
    if (n > 0)
        b->len += (size_t)n;
    else if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -1 : -2;
    return n;
}

/* The client socket is readable: bytes go to c2u, then to the handler of
 * the state (the head, the ClientHello, or the body counted). */
void eg_relay_on_client_in(conn *c)
{
    ssize_t n = fill(c->cfd, &c->c2u);
    if (n == -1)
        return;
    if (c->st == C_FLUSH) {   /* draining what the client still sends */
        c->c2u.len = c->c2u.off = 0;
        if (n <= 0)
            eg_conn_close(c);
        return;
    }
    if (n == -2 || (n == 0 && c->st != C_RELAY)) {
        eg_conn_close(c);
        return;
    }
    if (c->st == C_HEAD) {
        eg_request_on_head_bytes(c);
        return;
    }
    if (c->st == C_HELLO) {
        eg_request_on_hello_bytes(c);
        return;
    }
    /* RELAY */
    if (n == 0) {
        c->c_eof = 1;
    } else if (c->req.kind == EG_REQ_HTTP) {
        if (n > c->body_left) {   /* a second request: one per connection */
            eg_conn_close(c);
            return;
        }
        c->body_left -= n;
    }
    c->deadline_us = eg_now_us() + (int64_t)c->sb->p->o.idle_timeout_ms * 1000;
}

/* Write from b to fd within the sandbox's byte cap; counts into *ctr. */
static int drain(conn *c, int fd, iobuf *b, uint64_t *ctr, uint64_t *sbctr)
{
    uint64_t left;
    if (!b->len)
        return 0;
    if (!eg_sandbox_cap_left(c->sb, &left)) {
        c->cap_hit = 1;
        return -1;
    }
    size_t n = b->len < left ? b->len : (size_t)left;
    ssize_t w = send(fd, b->p + b->off, n, MSG_NOSIGNAL);
    if (w < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    b->off += (size_t)w;
    b->len -= (size_t)w;
    if (!b->len)
        b->off = 0;
    *ctr += (uint64_t)w;
    *sbctr += (uint64_t)w;
    c->deadline_us = eg_now_us() + (int64_t)c->sb->p->o.idle_timeout_ms * 1000;
    return 0;
}

void eg_relay_on_client_out(conn *c)
{
    if (c->resp_off < c->resp_len) {
        ssize_t w = send(c->cfd, c->resp + c->resp_off, c->resp_len - c->resp_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno != EAGAIN && errno != EINTR)
                eg_conn_close(c);
            return;
        }
        c->resp_off += (size_t)w;
        if (c->resp_off < c->resp_len)
            return;
        if (c->st == C_FLUSH)
            shutdown(c->cfd, SHUT_WR);
    }
    if (c->st == C_RELAY && drain(c, c->cfd, &c->u2c, &c->down, &c->sb->down) < 0)
        eg_conn_close(c);
}

void eg_relay_check(conn *c)
{
    if (c->dead || c->st != C_RELAY)
        return;
    if (c->c_eof && !c->c2u.len && !c->up_shut && c->ufd >= 0) {
        shutdown(c->ufd, SHUT_WR);
        c->up_shut = 1;
    }
    if (c->u_eof && !c->u2c.len)
        eg_conn_close(c);
}

void eg_relay_on_upstream(conn *c, uint32_t ev)
{
    egress_proxy *p = c->sb->p;
    if (c->st == C_CONNECTING) {
        eg_connect_on_ready(c);
        return;
    }
    if (c->st != C_RELAY)
        return;
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t n = fill(c->ufd, &c->u2c);
        if (n == 0 || n == -2 || (n == -1 && (ev & (EPOLLHUP | EPOLLERR)) && !(ev & EPOLLIN))) {
            c->u_eof = 1;
            eg_conn_drop_fd(c, &c->ufd, &c->uev);
        }
        if (n > 0)
            c->deadline_us = eg_now_us() + (int64_t)p->o.idle_timeout_ms * 1000;
        if (rewrite_response_head(c) < 0) {
            eg_fail(c, 502, "default.bad-response", "the upstream's response head is too large");
            return;
        }
    }
    if (c->ufd >= 0 && (ev & EPOLLOUT) && drain(c, c->ufd, &c->c2u, &c->up, &c->sb->up) < 0)
        eg_conn_close(c);
}
