/* request.c — what a sandbox asks for: the proxy request head (CONNECT or
 * absolute-URI HTTP) parsed and its name judged before any lookup, the
 * byte cap checked, the head rewritten to origin-form with what followed it
 * kept (one request per connection), and, for a tunnel, the ClientHello's
 * SNI checked against the CONNECT host. Parsing is parse.c, judging
 * addresses and connecting connect.c, reading the socket relay.c. */
#include <stdio.h>
#include <string.h>

#include "host/egress/proxy_internal.h"

/* A complete request head is in c2u: judge the name, keep what followed
 * the head, then connect to a literal or look the name up. */
static void on_head(conn *c)
{
    egress_sandbox *sb = c->sb;
    uint64_t left;
    if (!eg_sandbox_cap_left(sb, &left)) {
        eg_fail(c, 403, "limits.egress_bytes",
                "the sandbox used its egress byte cap of %llu bytes", (unsigned long long)sb->cap);
        return;
    }
    egress_decision d;
    egress_decide(sb->rules, c->req.host, c->req.port, NULL, &d);
    if (!d.allow) {
        eg_fail(c, 403, d.rule, "%s", d.reason);
        return;
    }
    /* what follows the head: a body (HTTP) or an early ClientHello (CONNECT) */
    size_t rest = c->c2u.len - c->req.head_len;
    uint8_t *after = c->c2u.p + c->c2u.off + c->req.head_len;
    if (c->req.kind == EG_REQ_HTTP) {
        int64_t body = c->req.content_length < 0 ? 0 : c->req.content_length;
        if ((int64_t)rest > body) {
            eg_fail(c, 400, "default.bad-request",
                    "one request per connection: bytes after the request body (pipelining) are refused");
            return;
        }
        if (c->req.out_len + rest > EG_BUF_CAP) {
            eg_fail(c, 431, "default.bad-request", "request head too large after rewriting");
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
        eg_connect_literal(c, lit, &d);
        return;
    }
    eg_lookup_submit(c);
}

/* State HEAD: more of the request head arrived. */
void eg_request_on_head_bytes(conn *c)
{
    const char *why;
    int rc = eg_parse_request((const char *)c->c2u.p + c->c2u.off, c->c2u.len, &c->req, &why);
    if (rc == 0)
        return;
    if (rc != 1) {
        eg_fail(c, rc, "default.bad-request", "%s", why);
        return;
    }
    on_head(c);
}

/* State HELLO: the client's first bytes in the tunnel must be a TLS
 * ClientHello whose SNI names the CONNECT host (an IP-literal host may
 * have none). */
void eg_request_on_hello_bytes(conn *c)
{
    char sni[256];
    const char *why;
    int rc = eg_tls_sni(c->c2u.p + c->c2u.off, c->c2u.len, sni, sizeof sni, &why);
    if (rc == EG_TLS_MORE) {
        if (c->c2u.len >= EG_BUF_CAP)
            eg_fail_tunnel(c, "default.deny-tunnel", "ClientHello too large");
        return;
    }
    char r[400];
    if (rc == EG_TLS_BAD) {
        snprintf(r, sizeof r, "tunnel to %s:%u refused: %s (a second CONNECT or plain bytes in a tunnel are refused)",
                 c->req.host, c->req.port, why);
        eg_fail_tunnel(c, "default.deny-tunnel", r);
        return;
    }
    uint8_t lit[16];
    int is_ip = egress_ip_parse(c->req.host, lit);
    if (rc == EG_TLS_NO_SNI && !is_ip) {
        snprintf(r, sizeof r, "tunnel to %s:%u refused: the TLS ClientHello has no SNI; it must name %s",
                 c->req.host, c->req.port, c->req.host);
        eg_fail_tunnel(c, "default.deny-sni", r);
        return;
    }
    if (rc == EG_TLS_SNI && !eg_host_eq(sni, c->req.host)) {
        snprintf(r, sizeof r, "tunnel to %s:%u refused: TLS SNI '%.200s' differs from the CONNECT host",
                 c->req.host, c->req.port, sni);
        eg_fail_tunnel(c, "default.deny-sni", r);
        return;
    }
    c->st = C_RELAY;
    c->deadline_us = eg_now_us() + (int64_t)c->sb->p->o.idle_timeout_ms * 1000;
    eg_conn_update(c);
}
