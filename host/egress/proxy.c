/* proxy.c — the egress proxy's thread, listeners and connections.
 *
 * One epoll thread per proxy (not the host loop): relaying bytes must not
 * take the host's table mutex (host.h) or sit in front of sandbox I/O, and
 * the proxy stays testable without the host daemon. Names are resolved by a
 * small pool of resolver threads (getaddrinfo blocks); results come back
 * through an eventfd. Every connection is a state machine:
 *
 *   HEAD ──CONNECT──▶ (RESOLVING) ▶ CONNECTING ▶ 200 ▶ HELLO (SNI check) ▶ RELAY
 *   HEAD ──http://──▶ (RESOLVING) ▶ CONNECTING ▶ rewritten head ▶ RELAY
 *   any denial ▶ FLUSH: 403/4xx/5xx with the rule and reason, then close
 *
 * Locking: p->mu guards every sandbox, connection and counter; the proxy
 * thread holds it while it handles one epoll batch, callers of the API take
 * it too. A connection or sandbox closed by another thread is put on a
 * graveyard and freed by the proxy thread after its current batch, so a
 * batch never touches freed memory. p->rmu guards only the resolver queue. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "host/egress/egress.h"
#include "host/egress/internal.h"

#define BUF_CAP (64 * 1024)
#define BUF_SLACK 256          /* room for the response head rewrite */
#define RESP_CAP 2048
#define MAX_CONNS_PER_SANDBOX 256

enum { FD_WAKE = 1, FD_LISTEN, FD_CLIENT, FD_UPSTREAM };
typedef struct fdref { int type; void *obj; } fdref;

typedef enum { C_HEAD, C_RESOLVING, C_CONNECTING, C_HELLO, C_RELAY, C_FLUSH } cstate;

typedef struct iobuf { uint8_t *p; size_t off, len; } iobuf;   /* p owned */

typedef struct job job;
typedef struct conn conn;

struct egress_sandbox {
    fdref ref;
    egress_proxy *p;                 /* borrowed */
    egress_sandbox *next;
    char id[128];
    char *path;                      /* owned */
    int lfd;
    egress_rules *rules;             /* owned */
    uint64_t cap, up, down, allowed, denied, open;
    conn *conns;                     /* owned list */
    int dead;
};

struct conn {
    conn *next;                      /* in sb->conns, then graveyard */
    egress_sandbox *sb;              /* borrowed */
    fdref cref, uref;
    int cfd, ufd;
    uint32_t cev, uev;               /* registered interest; ~0u = not registered */
    cstate st;
    int64_t deadline_us;
    iobuf c2u, u2c;
    char resp[RESP_CAP]; size_t resp_off, resp_len;   /* the proxy's own answer */
    eg_req req;
    int64_t body_left;               /* HTTP: request body bytes still allowed */
    int c_eof, u_eof, up_shut;
    job *job;                        /* borrowed: pending lookup */
    eg_addrs addrs; size_t next_addr;
    char ip[64];
    egress_decision dec;
    int decided, audited, dead, cap_hit;
    int resp_head_done;              /* HTTP: upstream's response head rewritten */
    uint64_t up, down;
};

struct job {
    job *next;
    conn *c;                         /* borrowed; NULL once the conn is gone (p->mu) */
    char host[256];
    uint16_t port;
    eg_addrs res;
};

struct egress_proxy {
    egress_options o;
    char *hosts_file;                /* owned */
    pthread_t thr;
    int epfd, wakefd;
    fdref wake;
    volatile int stop;
    pthread_mutex_t mu;
    egress_sandbox *sandboxes;       /* owned */
    egress_sandbox *sb_grave;        /* owned, freed after the batch */
    conn *grave;                     /* owned, freed after the batch */
    /* resolver */
    pthread_t *rthr; int n_rthr;
    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    int rstop;
    job *q_head, *q_tail, *done;     /* owned */
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- audit --------------------------------------------------------------- */

static size_t json_str(char *b, size_t cap, size_t n, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (n < cap)
        b[n] = '"';
    n++;
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7] = {0};
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
        } else {
            esc[0] = (char)c;
        }
        for (char *e = esc; *e; e++, n++)
            if (n < cap)
                b[n] = *e;
    }
    if (n < cap)
        b[n] = '"';
    return n + 1;
}

size_t egress_audit_json(const egress_audit *a, char *b, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t n = (size_t)snprintf(b, cap, "{\"time_ms\":%lld,\"event\":\"egress\",\"sandbox\":",
                                (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    n = json_str(b, cap, n, a->sandbox);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"kind\":");
    n = json_str(b, cap, n, a->kind);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"host\":");
    n = json_str(b, cap, n, a->host);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"port\":%u,\"ip\":",
                          a->port);
    n = json_str(b, cap, n, a->ip);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0,
                          ",\"decision\":\"%s\",\"rule\":", a->allow ? "allow" : "deny");
    n = json_str(b, cap, n, a->rule);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"reason\":");
    n = json_str(b, cap, n, a->reason);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0,
                          ",\"bytes_up\":%llu,\"bytes_down\":%llu,\"bytes\":%llu}\n",
                          (unsigned long long)a->bytes_up, (unsigned long long)a->bytes_down,
                          (unsigned long long)(a->bytes_up + a->bytes_down));
    if (n >= cap && cap >= 2) {   /* cut: still one line */
        b[cap - 2] = '\n';
        b[cap - 1] = 0;
        return cap - 1;
    }
    return n;
}

static void audit(conn *c)
{
    if (c->audited || !c->decided)
        return;
    c->audited = 1;
    egress_proxy *p = c->sb->p;
    if (!p->o.on_audit)
        return;
    egress_audit a = {.sandbox = c->sb->id,
                      .kind = c->req.kind == EG_REQ_CONNECT ? "connect" : "http",
                      .host = c->req.host, .port = c->req.port, .ip = c->ip,
                      .allow = c->dec.allow, .rule = c->dec.rule, .reason = c->dec.reason,
                      .bytes_up = c->up, .bytes_down = c->down};
    p->o.on_audit(p->o.audit_arg, &a);
}

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

static void update(conn *c)
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
        if (!c->c_eof && c->c2u.off + c->c2u.len < BUF_CAP)
            ce |= EPOLLIN;
        if (to_client)
            ce |= EPOLLOUT;
        if (!c->u_eof && c->u2c.off + c->u2c.len < BUF_CAP)
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

static void conn_close(conn *c)
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
    audit(c);
    if (c->job) {
        c->job->c = NULL;
        c->job = NULL;
    }
    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    c->cfd = c->ufd = -1;
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

static void conn_free(conn *c)
{
    eg_req_cleanup(&c->req);
    free(c->c2u.p);
    free(c->u2c.p);
    free(c);
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
static void fail(conn *c, int code, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(conn *c, int code, const char *rule, const char *fmt, ...)
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
    audit(c);
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
    if (c->ufd >= 0) {
        close(c->ufd);
        c->ufd = -1;
    }
    if (c->job) {
        c->job->c = NULL;
        c->job = NULL;
    }
    c->st = C_FLUSH;
    c->deadline_us = now_us() + 2000000;
    update(c);
}

/* After the 200 of a CONNECT the client speaks TLS: a refusal is a TLS
 * alert (access_denied), then close. */
static void fail_tunnel(conn *c, const char *rule, const char *reason)
{
    static const uint8_t alert[] = {0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31};
    if (c->dec.allow) {
        c->sb->allowed--;
        c->sb->denied++;
    }
    c->dec.allow = 0;
    snprintf(c->dec.rule, sizeof c->dec.rule, "%s", rule);
    snprintf(c->dec.reason, sizeof c->dec.reason, "%s", reason);
    audit(c);
    (void)!send(c->cfd, alert, sizeof alert, MSG_NOSIGNAL | MSG_DONTWAIT);
    conn_close(c);
}

/* ---- steps ---------------------------------------------------------------------- */

static void start_connect(conn *c);

static void allowed(conn *c, const egress_decision *d)
{
    c->dec = *d;
    c->decided = 1;
    c->sb->allowed++;
}

static void ip16_of(const struct sockaddr_storage *ss, uint8_t ip[16])
{
    static const uint8_t v4p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
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
static void on_resolved(conn *c, const eg_addrs *res)
{
    if (res->err || !res->n) {
        fail(c, 502, "default.resolve-failed", "could not resolve %s: %s", c->req.host,
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
        fail(c, 403, first.rule, "%s", first.reason);
        return;
    }
    allowed(c, &first);
    c->next_addr = 0;
    start_connect(c);
}

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
        c->deadline_us = now_us() + (int64_t)p->o.connect_timeout_ms * 1000;
        update(c);
        return;
    }
    fail(c, 502, "default.connect-failed", "could not connect to %s port %u (%s)", c->req.host,
         c->req.port, c->ip);
}

static void on_connected(conn *c)
{
    egress_proxy *p = c->sb->p;
    int err = 0;
    socklen_t el = sizeof err;
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
        close(c->ufd);
        c->ufd = -1;
        start_connect(c);
        return;
    }
    if (c->req.kind == EG_REQ_CONNECT) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        memcpy(c->resp, ok, sizeof ok - 1);
        c->resp_len = sizeof ok - 1;
        c->resp_off = 0;
        c->st = C_HELLO;
        c->deadline_us = now_us() + (int64_t)p->o.header_timeout_ms * 1000;
    } else {
        c->st = C_RELAY;
        c->deadline_us = now_us() + (int64_t)p->o.idle_timeout_ms * 1000;
    }
    update(c);
}

static void submit_lookup(conn *c)
{
    egress_proxy *p = c->sb->p;
    job *j = calloc(1, sizeof *j);
    if (!j) {
        fail(c, 503, "default.proxy-error", "out of memory");
        return;
    }
    j->c = c;
    snprintf(j->host, sizeof j->host, "%s", c->req.host);
    j->port = (uint16_t)c->req.port;
    c->job = j;
    c->st = C_RESOLVING;
    c->deadline_us = now_us() + (int64_t)p->o.connect_timeout_ms * 1000;
    pthread_mutex_lock(&p->rmu);
    if (p->q_tail)
        p->q_tail->next = j;
    else
        p->q_head = j;
    p->q_tail = j;
    pthread_cond_signal(&p->rcv);
    pthread_mutex_unlock(&p->rmu);
    update(c);
}

static int cap_left(const egress_sandbox *sb, uint64_t *left)
{
    if (!sb->cap) {
        *left = UINT64_MAX;
        return 1;
    }
    uint64_t used = sb->up + sb->down;
    *left = used >= sb->cap ? 0 : sb->cap - used;
    return *left > 0;
}

/* A complete request head is in c2u. */
static void on_head(conn *c)
{
    egress_sandbox *sb = c->sb;
    uint64_t left;
    if (!cap_left(sb, &left)) {
        fail(c, 403, "limits.egress_bytes",
             "the sandbox used its egress byte cap of %llu bytes", (unsigned long long)sb->cap);
        return;
    }
    egress_decision d;
    egress_decide(sb->rules, c->req.host, c->req.port, NULL, &d);
    if (!d.allow) {
        fail(c, 403, d.rule, "%s", d.reason);
        return;
    }
    /* what follows the head: a body (HTTP) or an early ClientHello (CONNECT) */
    size_t rest = c->c2u.len - c->req.head_len;
    uint8_t *after = c->c2u.p + c->c2u.off + c->req.head_len;
    if (c->req.kind == EG_REQ_HTTP) {
        int64_t body = c->req.content_length < 0 ? 0 : c->req.content_length;
        if ((int64_t)rest > body) {
            fail(c, 400, "default.bad-request",
                 "one request per connection: bytes after the request body (pipelining) are refused");
            return;
        }
        if (c->req.out_len + rest > BUF_CAP) {
            fail(c, 431, "default.bad-request", "request head too large after rewriting");
            return;
        }
        memmove(c->c2u.p + c->req.out_len, after, rest);
        memcpy(c->c2u.p, c->req.out_head, c->req.out_len);
        c->c2u.off = 0;
        c->c2u.len = c->req.out_len + rest;
        c->body_left = body - (int64_t)rest;
    } else {
        memmove(c->c2u.p, after, rest);
        c->c2u.off = 0;
        c->c2u.len = rest;
    }
    uint8_t lit[16];
    if (egress_ip_parse(c->req.host, lit)) {
        /* judged by CIDR rules only; the address is the literal itself */
        allowed(c, &d);
        egress_ip_format(lit, c->ip, sizeof c->ip);
        static const uint8_t v4p[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
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
        return;
    }
    submit_lookup(c);
}

static int buf_room(iobuf *b)
{
    if (b->off && b->off + b->len >= BUF_CAP) {
        memmove(b->p, b->p + b->off, b->len);
        b->off = 0;
    }
    return b->off + b->len < BUF_CAP;
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
        return b->off + b->len >= BUF_CAP ? -1 : 0;
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
    /* the buffer has BUF_SLACK bytes beyond BUF_CAP for this */
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
    ssize_t n = recv(fd, b->p + b->off + b->len, BUF_CAP - b->off - b->len, 0);
    if (n > 0)
        b->len += (size_t)n;
    else if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -1 : -2;
    return n;
}

static void on_client_in(conn *c)
{
    ssize_t n = fill(c->cfd, &c->c2u);
    if (n == -1)
        return;
    if (c->st == C_FLUSH) {   /* draining what the client still sends */
        c->c2u.len = c->c2u.off = 0;
        if (n <= 0)
            conn_close(c);
        return;
    }
    if (n == -2 || (n == 0 && c->st != C_RELAY)) {
        conn_close(c);
        return;
    }
    if (c->st == C_HEAD) {
        const char *why;
        int rc = eg_parse_request((const char *)c->c2u.p + c->c2u.off, c->c2u.len, &c->req, &why);
        if (rc == 0)
            return;
        if (rc != 1) {
            fail(c, rc, "default.bad-request", "%s", why);
            return;
        }
        on_head(c);
        return;
    }
    if (c->st == C_HELLO) {
        char sni[256];
        const char *why;
        int rc = eg_tls_sni(c->c2u.p + c->c2u.off, c->c2u.len, sni, sizeof sni, &why);
        if (rc == EG_TLS_MORE) {
            if (c->c2u.len >= BUF_CAP)
                fail_tunnel(c, "default.deny-tunnel", "ClientHello too large");
            return;
        }
        char r[400];
        if (rc == EG_TLS_BAD) {
            snprintf(r, sizeof r, "tunnel to %s:%u refused: %s (a second CONNECT or plain bytes in a tunnel are refused)",
                     c->req.host, c->req.port, why);
            fail_tunnel(c, "default.deny-tunnel", r);
            return;
        }
        uint8_t lit[16];
        int is_ip = egress_ip_parse(c->req.host, lit);
        if (rc == EG_TLS_NO_SNI && !is_ip) {
            snprintf(r, sizeof r, "tunnel to %s:%u refused: the TLS ClientHello has no SNI; it must name %s",
                     c->req.host, c->req.port, c->req.host);
            fail_tunnel(c, "default.deny-sni", r);
            return;
        }
        if (rc == EG_TLS_SNI && !eg_host_eq(sni, c->req.host)) {
            snprintf(r, sizeof r, "tunnel to %s:%u refused: TLS SNI '%.200s' differs from the CONNECT host",
                     c->req.host, c->req.port, sni);
            fail_tunnel(c, "default.deny-sni", r);
            return;
        }
        c->st = C_RELAY;
        c->deadline_us = now_us() + (int64_t)c->sb->p->o.idle_timeout_ms * 1000;
        update(c);
        return;
    }
    /* RELAY */
    if (n == 0) {
        c->c_eof = 1;
    } else if (c->req.kind == EG_REQ_HTTP) {
        if (n > c->body_left) {   /* a second request: one per connection */
            conn_close(c);
            return;
        }
        c->body_left -= n;
    }
    c->deadline_us = now_us() + (int64_t)c->sb->p->o.idle_timeout_ms * 1000;
}

/* Write from b to fd within the sandbox's byte cap; counts into *ctr. */
static int drain(conn *c, int fd, iobuf *b, uint64_t *ctr, uint64_t *sbctr)
{
    uint64_t left;
    if (!b->len)
        return 0;
    if (!cap_left(c->sb, &left)) {
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
    c->deadline_us = now_us() + (int64_t)c->sb->p->o.idle_timeout_ms * 1000;
    return 0;
}

static void on_client_out(conn *c)
{
    if (c->resp_off < c->resp_len) {
        ssize_t w = send(c->cfd, c->resp + c->resp_off, c->resp_len - c->resp_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno != EAGAIN && errno != EINTR)
                conn_close(c);
            return;
        }
        c->resp_off += (size_t)w;
        if (c->resp_off < c->resp_len)
            return;
        if (c->st == C_FLUSH)
            shutdown(c->cfd, SHUT_WR);
    }
    if (c->st == C_RELAY && drain(c, c->cfd, &c->u2c, &c->down, &c->sb->down) < 0)
        conn_close(c);
}

static void relay_check(conn *c)
{
    if (c->dead || c->st != C_RELAY)
        return;
    if (c->c_eof && !c->c2u.len && !c->up_shut && c->ufd >= 0) {
        shutdown(c->ufd, SHUT_WR);
        c->up_shut = 1;
    }
    if (c->u_eof && !c->u2c.len)
        conn_close(c);
}

static void on_upstream(conn *c, uint32_t ev)
{
    egress_proxy *p = c->sb->p;
    if (c->st == C_CONNECTING) {
        on_connected(c);
        return;
    }
    if (c->st != C_RELAY)
        return;
    if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        ssize_t n = fill(c->ufd, &c->u2c);
        if (n == 0 || n == -2 || (n == -1 && (ev & (EPOLLHUP | EPOLLERR)) && !(ev & EPOLLIN))) {
            c->u_eof = 1;
            epoll_ctl(p->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
            c->uev = ~0u;
            close(c->ufd);
            c->ufd = -1;
        }
        if (n > 0)
            c->deadline_us = now_us() + (int64_t)p->o.idle_timeout_ms * 1000;
        if (rewrite_response_head(c) < 0) {
            fail(c, 502, "default.bad-response", "the upstream's response head is too large");
            return;
        }
    }
    if (c->ufd >= 0 && (ev & EPOLLOUT) && drain(c, c->ufd, &c->c2u, &c->up, &c->sb->up) < 0)
        conn_close(c);
}

/* ---- accept ------------------------------------------------------------------ */

/* A client connection of sb (accepted here or handed in): fd is owned,
 * non-blocking. p->mu held. */
static void conn_start(egress_sandbox *sb, int fd)
{
    egress_proxy *p = sb->p;
    if (sb->open >= MAX_CONNS_PER_SANDBOX) {
        static const char busy[] = "HTTP/1.1 503 Service Unavailable by sandgate egress policy (too many connections)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        return;
    }
    conn *c = calloc(1, sizeof *c);
    if (c) {
        c->c2u.p = malloc(BUF_CAP + BUF_SLACK);
        c->u2c.p = malloc(BUF_CAP + BUF_SLACK);
    }
    if (!c || !c->c2u.p || !c->u2c.p) {
        if (c)
            conn_free(c);
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
    c->deadline_us = now_us() + (int64_t)p->o.header_timeout_ms * 1000;
    c->next = sb->conns;
    sb->conns = c;
    sb->open++;
    update(c);
}

static void on_accept(egress_sandbox *sb)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(sb->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        conn_start(sb, fd);
    }
}

/* ---- the thread ------------------------------------------------------------------ */

static void on_timeouts(egress_proxy *p, int64_t now)
{
    for (egress_sandbox *sb = p->sandboxes; sb; sb = sb->next) {
        conn *next;
        for (conn *c = sb->conns; c; c = next) {
            next = c->next;
            if (now < c->deadline_us)
                continue;
            switch (c->st) {
            case C_HEAD:
                if (c->c2u.len)
                    fail(c, 408, "default.bad-request", "no complete request head in time");
                else
                    conn_close(c);
                break;
            case C_RESOLVING:
            case C_CONNECTING:
                fail(c, 504, "default.connect-timeout", "%s port %u did not answer in time",
                     c->req.host, c->req.port);
                break;
            case C_HELLO:
                fail_tunnel(c, "default.deny-tunnel", "no TLS ClientHello in time");
                break;
            default:
                conn_close(c);
            }
        }
    }
}

static void on_wake(egress_proxy *p)
{
    uint64_t v;
    (void)!read(p->wakefd, &v, sizeof v);
    pthread_mutex_lock(&p->rmu);
    job *j = p->done;
    p->done = NULL;
    pthread_mutex_unlock(&p->rmu);
    while (j) {
        job *next = j->next;
        conn *c = j->c;
        if (c && !c->dead) {
            c->job = NULL;
            on_resolved(c, &j->res);
        }
        free(j);
        j = next;
    }
}

static void reap(egress_proxy *p)
{
    while (p->grave) {
        conn *c = p->grave;
        p->grave = c->next;
        conn_free(c);
    }
    while (p->sb_grave) {
        egress_sandbox *sb = p->sb_grave;
        p->sb_grave = sb->next;
        egress_rules_destroy(sb->rules);
        free(sb->path);
        free(sb);
    }
}

static void *proxy_main(void *arg)
{
    egress_proxy *p = arg;
    struct epoll_event evs[64];
    int64_t last_scan = 0;
    while (!p->stop) {
        int n = epoll_wait(p->epfd, evs, 64, 250);
        pthread_mutex_lock(&p->mu);
        for (int i = 0; i < n; i++) {
            fdref *r = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            if (r->type == FD_WAKE) {
                on_wake(p);
            } else if (r->type == FD_LISTEN) {
                egress_sandbox *sb = r->obj;
                if (!sb->dead)
                    on_accept(sb);
            } else {
                conn *c = r->obj;
                if (c->dead)
                    continue;
                if (r->type == FD_UPSTREAM) {
                    on_upstream(c, ev);
                } else {
                    if (ev & EPOLLERR) {
                        conn_close(c);
                        continue;
                    }
                    if (ev & (EPOLLIN | EPOLLHUP))
                        on_client_in(c);
                    if (!c->dead && (ev & EPOLLOUT))
                        on_client_out(c);
                    if (!c->dead && (ev & EPOLLHUP) && !(ev & EPOLLIN))
                        conn_close(c);
                }
                if (!c->dead && c->cap_hit)
                    conn_close(c);
                relay_check(c);
                if (!c->dead)
                    update(c);
            }
        }
        int64_t now = now_us();
        if (now - last_scan > 200000) {
            on_timeouts(p, now);
            last_scan = now;
        }
        reap(p);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

static void *resolver_main(void *arg)
{
    egress_proxy *p = arg;
    pthread_mutex_lock(&p->rmu);
    for (;;) {
        while (!p->q_head && !p->rstop)
            pthread_cond_wait(&p->rcv, &p->rmu);
        if (p->rstop)
            break;
        job *j = p->q_head;
        p->q_head = j->next;
        if (!p->q_head)
            p->q_tail = NULL;
        j->next = NULL;
        pthread_mutex_unlock(&p->rmu);
        eg_resolve(p->hosts_file, p->o.hosts_only, j->host, j->port, &j->res);
        pthread_mutex_lock(&p->rmu);
        j->next = p->done;
        p->done = j;
        uint64_t one = 1;
        (void)!write(p->wakefd, &one, sizeof one);
    }
    pthread_mutex_unlock(&p->rmu);
    return NULL;
}

/* ---- API --------------------------------------------------------------------- */

int egress_proxy_create(const egress_options *o, egress_proxy **out, sg_err *err)
{
    *out = NULL;
    egress_proxy *p = calloc(1, sizeof *p);
    if (!p)
        return sg_err_set(err, SG_EINTERNAL, "egress proxy: out of memory");
    p->o = *o;
    if (!p->o.resolver_threads)
        p->o.resolver_threads = 2;
    if (!p->o.connect_timeout_ms)
        p->o.connect_timeout_ms = 10000;
    if (!p->o.idle_timeout_ms)
        p->o.idle_timeout_ms = 300000;
    if (!p->o.header_timeout_ms)
        p->o.header_timeout_ms = 10000;
    p->hosts_file = o->hosts_file ? strdup(o->hosts_file) : NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->rmu, NULL);
    pthread_cond_init(&p->rcv, NULL);
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    p->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (p->epfd < 0 || p->wakefd < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress proxy: epoll_create1/eventfd");
        goto fail;
    }
    p->wake = (fdref){FD_WAKE, p};
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &p->wake};
    epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wakefd, &ev);
    p->rthr = calloc((size_t)p->o.resolver_threads, sizeof *p->rthr);
    if (!p->rthr) {
        sg_err_set(err, SG_EINTERNAL, "egress proxy: out of memory");
        goto fail;
    }
    for (; p->n_rthr < p->o.resolver_threads; p->n_rthr++) {
        if (pthread_create(&p->rthr[p->n_rthr], NULL, resolver_main, p)) {
            sg_err_set(err, SG_EINTERNAL, "egress proxy: pthread_create(resolver)");
            goto fail;
        }
    }
    if (pthread_create(&p->thr, NULL, proxy_main, p)) {
        sg_err_set(err, SG_EINTERNAL, "egress proxy: pthread_create");
        goto fail;
    }
    *out = p;
    return 0;
fail:
    p->stop = 1;
    p->thr = 0;
    egress_proxy_destroy(p);
    return err ? err->code : SG_EINTERNAL;
}

static void sandbox_close(egress_sandbox *sb)
{
    egress_proxy *p = sb->p;
    if (sb->dead)
        return;
    sb->dead = 1;
    while (sb->conns)
        conn_close(sb->conns);
    if (sb->lfd >= 0) {
        epoll_ctl(p->epfd, EPOLL_CTL_DEL, sb->lfd, NULL);
        close(sb->lfd);
        sb->lfd = -1;
    }
    if (sb->path)
        unlink(sb->path);
    for (egress_sandbox **pp = &p->sandboxes; *pp; pp = &(*pp)->next) {
        if (*pp == sb) {
            *pp = sb->next;
            break;
        }
    }
    sb->next = p->sb_grave;
    p->sb_grave = sb;
}

void egress_proxy_destroy(egress_proxy *p)
{
    if (!p)
        return;
    p->stop = 1;
    if (p->thr) {
        uint64_t one = 1;
        (void)!write(p->wakefd, &one, sizeof one);
        pthread_join(p->thr, NULL);
    }
    pthread_mutex_lock(&p->rmu);
    p->rstop = 1;
    pthread_cond_broadcast(&p->rcv);
    pthread_mutex_unlock(&p->rmu);
    for (int i = 0; i < p->n_rthr; i++)
        pthread_join(p->rthr[i], NULL);
    pthread_mutex_lock(&p->mu);
    while (p->sandboxes)
        sandbox_close(p->sandboxes);
    reap(p);
    pthread_mutex_unlock(&p->mu);
    for (job *lists[2] = {p->q_head, p->done}, **l = lists; l < lists + 2; l++) {
        while (*l) {
            job *next = (*l)->next;
            free(*l);
            *l = next;
        }
    }
    if (p->epfd >= 0)
        close(p->epfd);
    if (p->wakefd >= 0)
        close(p->wakefd);
    free(p->rthr);
    free(p->hosts_file);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->rmu);
    pthread_cond_destroy(&p->rcv);
    free(p);
}

int egress_sandbox_create(egress_proxy *p, const char *sandbox_id, const char *sock_path,
                          egress_rules *rules, uint64_t byte_cap, egress_sandbox **out,
                          sg_err *err)
{
    *out = NULL;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (!sandbox_id) {
        egress_rules_destroy(rules);
        return sg_err_set(err, SG_EINVAL, "egress: no sandbox id");
    }
    if (sock_path && strlen(sock_path) >= sizeof sun.sun_path) {
        egress_rules_destroy(rules);
        return sg_err_set(err, SG_EINVAL, "egress: socket path too long: %s", sock_path);
    }
    egress_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb || (sock_path && !(sb->path = strdup(sock_path)))) {
        free(sb);
        egress_rules_destroy(rules);
        return sg_err_set(err, SG_EINTERNAL, "egress: out of memory");
    }
    sb->p = p;
    sb->rules = rules;
    sb->cap = byte_cap;
    sb->ref = (fdref){FD_LISTEN, sb};
    snprintf(sb->id, sizeof sb->id, "%s", sandbox_id);
    sb->lfd = -1;
    if (!sock_path)
        goto listed;   /* no listener: connections come by egress_sandbox_adopt */
    strcpy(sun.sun_path, sock_path);
    sb->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sb->lfd < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress: socket(AF_UNIX)");
        goto fail;
    }
    unlink(sock_path);
    if (bind(sb->lfd, (struct sockaddr *)&sun, sizeof sun) < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress: bind(%s)", sock_path);
        goto fail;
    }
    /* the sandbox's uid must be able to connect; the directory guards it */
    if (chmod(sock_path, 0666) < 0 || listen(sb->lfd, 128) < 0) {
        sg_err_errno(err, SG_EINTERNAL, "egress: chmod/listen(%s)", sock_path);
        unlink(sock_path);
        goto fail;
    }
listed:
    pthread_mutex_lock(&p->mu);
    if (sb->lfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &sb->ref};
        epoll_ctl(p->epfd, EPOLL_CTL_ADD, sb->lfd, &ev);
    }
    sb->next = p->sandboxes;
    p->sandboxes = sb;
    pthread_mutex_unlock(&p->mu);
    *out = sb;
    return 0;
fail:
    if (sb->lfd >= 0)
        close(sb->lfd);
    egress_rules_destroy(rules);
    free(sb->path);
    free(sb);
    return err ? err->code : SG_EINTERNAL;
}

void egress_sandbox_destroy(egress_sandbox *sb)
{
    if (!sb)
        return;
    egress_proxy *p = sb->p;
    pthread_mutex_lock(&p->mu);
    sandbox_close(sb);
    pthread_mutex_unlock(&p->mu);
    uint64_t one = 1;
    (void)!write(p->wakefd, &one, sizeof one);   /* reap soon */
}

void egress_sandbox_adopt(egress_sandbox *sb, int fd)
{
    if (fd < 0)
        return;
    egress_proxy *p = sb->p;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (sb->dead)
        close(fd);
    else
        conn_start(sb, fd);
    pthread_mutex_unlock(&p->mu);
}

void egress_sandbox_counters(egress_sandbox *sb, egress_counters *out)
{
    egress_proxy *p = sb->p;
    pthread_mutex_lock(&p->mu);
    *out = (egress_counters){.bytes_up = sb->up, .bytes_down = sb->down, .byte_cap = sb->cap,
                             .allowed = sb->allowed, .denied = sb->denied, .open = sb->open};
    pthread_mutex_unlock(&p->mu);
}
