/* parse.c — the pure parsers of the egress proxy: the proxy request head
 * (CONNECT authority-form, or an absolute http:// URI whose Host header must
 * name the same host, rewritten to origin-form with "Connection: close" so
 * one connection carries one request), and the SNI of a TLS ClientHello
 * (reassembled across records, every length checked). No I/O; strict on
 * purpose: whatever two parsers might read differently is refused. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/egress/internal.h"

void eg_req_cleanup(eg_req *r)
{
    free(r->out_head);
    r->out_head = NULL;
}

int eg_host_eq(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na && a[na - 1] == '.')
        na--;
    if (nb && b[nb - 1] == '.')
        nb--;
    return na == nb && strncasecmp(a, b, na) == 0;
}

int eg_parse_authority(const char *s, size_t n, char *host, size_t cap, uint32_t *port,
                       uint32_t defport)
{
    const char *hend, *colon = NULL;
    const char *hs = s;
    if (n && s[0] == '[') {
        hend = memchr(s, ']', n);
        if (!hend)
            return -1;
        hs = s + 1;
        if ((size_t)(hend + 1 - s) < n) {
            if (hend[1] != ':')
                return -1;
            colon = hend + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        hend = colon ? colon : s + n;
        if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1)))
            return -1;   /* a bare IPv6 literal must be bracketed */
    }
    size_t hl = (size_t)(hend - hs);
    if (hl == 0 || hl >= cap)
        return -1;
    for (size_t i = 0; i < hl; i++) {
        unsigned char c = (unsigned char)hs[i];
        if (c <= ' ' || c >= 0x7f || c == '@' || c == '/' || c == '\\' || c == '%')
            return -1;   /* userinfo, paths, escapes: not a host */
    }
    memcpy(host, hs, hl);
    host[hl] = 0;
    if (!colon) {
        if (!defport)
            return -1;
        *port = defport;
        return 0;
    }
    const char *p = colon + 1, *e = s + n;
    if (p == e || e - p > 5)
        return -1;
    uint32_t v = 0;
    for (; p < e; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (uint32_t)(*p - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = v;
    return 0;
}

static int is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

typedef struct buf { char *p; size_t n, cap; } buf;

static int put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

/* Headers not passed on: hop-by-hop ones, and the client's proxy credentials. */
static int dropped(const char *name, size_t n)
{
    static const char *const drop[] = {"connection", "proxy-connection", "keep-alive",
                                       "proxy-authorization", "proxy-authenticate", "te",
                                       "trailer", "upgrade", NULL};
    for (int i = 0; drop[i]; i++)
        if (strlen(drop[i]) == n && strncasecmp(drop[i], name, n) == 0)
            return 1;
    return 0;
}

#define BAD(code, msg) do { *why = (msg); eg_req_cleanup(r); free(out.p); return (code); } while (0)

int eg_parse_request(const char *in, size_t len, eg_req *r, const char **why)
{
    memset(r, 0, sizeof *r);
    r->content_length = -1;
    buf out = {0};
    /* the head ends at the first CRLF CRLF; a bare LF anywhere is refused.
     * The whole head, CRLF CRLF included, fits in EG_HEAD_MAX: a longer one
     * must be 431 however the reads split it (a 16387-byte head was taken
     * in one read, and refused in two). */
    size_t end = 0;
    for (size_t i = 0; i + 3 < len && i + 4 <= EG_HEAD_MAX; i++) {
        if (in[i] == '\r' && in[i + 1] == '\n' && in[i + 2] == '\r' && in[i + 3] == '\n') {
            end = i + 4;
            break;
        }
    }
    for (size_t i = 0; i < (end ? end : len); i++) {
        if (in[i] == '\n' && (i == 0 || in[i - 1] != '\r'))
            BAD(400, "bare LF in the request head (lines must end with CRLF)");
        if (in[i] == '\r' && i + 1 < len && in[i + 1] != '\n')
            BAD(400, "bare CR in the request head");
        if (in[i] == 0)
            BAD(400, "NUL byte in the request head");
    }
    if (!end) {
        if (len >= EG_HEAD_MAX)
            BAD(431, "request head larger than 16 KiB");
        return 0;
    }
    r->head_len = end;

    /* request line: METHOD SP target SP HTTP/1.x CRLF */
    /* Searches stay inside in[0..end): the buffer is not NUL-terminated
     * (strstr here read past the bytes received; found by egress_request_fuzz). */
    const char *line_end = memmem(in, end, "\r\n", 2);
    const char *sp1 = memchr(in, ' ', (size_t)(line_end - in));
    if (!sp1 || sp1 == in || (size_t)(sp1 - in) >= sizeof r->method)
        BAD(400, "malformed request line");
    const char *sp2 = memchr(sp1 + 1, ' ', (size_t)(line_end - sp1 - 1));
    if (!sp2 || sp2 == sp1 + 1)
        BAD(400, "malformed request line");
    for (const char *p = in; p < sp1; p++)
        if (!is_tchar((unsigned char)*p))
            BAD(400, "malformed method in the request line");
    size_t vlen = (size_t)(line_end - sp2 - 1);
    if (!(vlen == 8 && (memcmp(sp2 + 1, "HTTP/1.1", 8) == 0 || memcmp(sp2 + 1, "HTTP/1.0", 8) == 0)))
        BAD(400, "the proxy speaks HTTP/1.0 and HTTP/1.1 only");
    memcpy(r->method, in, (size_t)(sp1 - in));
    const char *t = sp1 + 1;
    size_t tlen = (size_t)(sp2 - t);
    for (size_t i = 0; i < tlen; i++)
        if ((unsigned char)t[i] <= ' ' || (unsigned char)t[i] >= 0x7f)
            BAD(400, "control character or space in the request target");

    const char *path = "/";
    size_t path_len = 1;
    if (strcmp(r->method, "CONNECT") == 0) {
        r->kind = EG_REQ_CONNECT;
        if (eg_parse_authority(t, tlen, r->host, sizeof r->host, &r->port, 0) < 0)
            BAD(400, "CONNECT needs host:port");
    } else {
        r->kind = EG_REQ_HTTP;
        if (tlen >= 8 && strncasecmp(t, "https://", 8) == 0)
            BAD(400, "https:// URIs go through CONNECT; the proxy does not originate TLS");
        if (tlen < 7 || strncasecmp(t, "http://", 7) != 0)
            BAD(400, "not a proxy request: the target must be an absolute http:// URI or CONNECT host:port");
        const char *a = t + 7, *e = t + tlen;
        const char *ae = a;
        while (ae < e && *ae != '/' && *ae != '?' && *ae != '#')
            ae++;
        if (memchr(a, '@', (size_t)(ae - a)))
            BAD(400, "user information in the URI authority is refused");
        if (eg_parse_authority(a, (size_t)(ae - a), r->host, sizeof r->host, &r->port, 80) < 0)
            BAD(400, "bad host or port in the URI");
        if (ae < e) {
            if (*ae == '#')
                BAD(400, "fragment in the request URI");
            path = ae;
            path_len = (size_t)(e - ae);
        }
        if (*path == '?') {
            if (put(&out, r->method, strlen(r->method)) || put(&out, " /", 2))
                BAD(500, "out of memory");
        } else if (put(&out, r->method, strlen(r->method)) || put(&out, " ", 1)) {
            BAD(500, "out of memory");
        }
        if (put(&out, path, path_len) || put(&out, " HTTP/1.1\r\n", 11))
            BAD(500, "out of memory");
    }

    /* headers */
    int hosts = 0, te = 0;
    const char *p = line_end + 2;
    while (p < in + end - 2) {
        const char *le = memmem(p, (size_t)(in + end - p), "\r\n", 2);
        if (*p == ' ' || *p == '\t')
            BAD(400, "folded header line (obs-fold) refused");
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p)
            BAD(400, "malformed header line");
        for (const char *q = p; q < colon; q++)
            if (!is_tchar((unsigned char)*q))
                BAD(400, "malformed header name");
        size_t nlen = (size_t)(colon - p);
        const char *v = colon + 1, *ve = le;
        while (v < ve && (*v == ' ' || *v == '\t'))
            v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        if (nlen == 4 && strncasecmp(p, "host", 4) == 0) {
            if (hosts++)
                BAD(400, "more than one Host header");
            if (r->kind == EG_REQ_HTTP) {
                char h[256];
                uint32_t hp;
                if (eg_parse_authority(v, (size_t)(ve - v), h, sizeof h, &hp, 80) < 0)
                    BAD(400, "malformed Host header");
                if (!eg_host_eq(h, r->host) || hp != r->port)
                    BAD(400, "the Host header names another host than the request URI");
            }
        } else if (nlen == 14 && strncasecmp(p, "content-length", 14) == 0) {
            int64_t cl = 0;
            if (v == ve || ve - v > 15)
                BAD(400, "bad Content-Length");
            for (const char *q = v; q < ve; q++) {
                if (*q < '0' || *q > '9')
                    BAD(400, "bad Content-Length");
                cl = cl * 10 + (*q - '0');
            }
            if (r->content_length >= 0 && r->content_length != cl)
                BAD(400, "conflicting Content-Length headers");
            r->content_length = cl;
        } else if (nlen == 17 && strncasecmp(p, "transfer-encoding", 17) == 0) {
            te = 1;
        }
        if (r->kind == EG_REQ_HTTP && !dropped(p, nlen))
            if (put(&out, p, (size_t)(le - p)) || put(&out, "\r\n", 2))
                BAD(500, "out of memory");
        p = le + 2;
    }
    if (r->kind == EG_REQ_HTTP) {
        if (te)
            BAD(411, "request bodies must have a Content-Length (Transfer-Encoding is not forwarded)");
        if (!hosts) {
            char hb[300];
            int hn = strchr(r->host, ':') ? snprintf(hb, sizeof hb, "Host: [%s]:%u\r\n", r->host, r->port)
                                          : snprintf(hb, sizeof hb, "Host: %s:%u\r\n", r->host, r->port);
            if (put(&out, hb, (size_t)hn))
                BAD(500, "out of memory");
        }
        if (put(&out, "Connection: close\r\n\r\n", 21))
            BAD(500, "out of memory");
        r->out_head = out.p;
        r->out_len = out.n;
    }
    return 1;
}

/* ---- TLS ClientHello --------------------------------------------------- */

static uint32_t be(const uint8_t *p, int n)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

int eg_tls_sni(const uint8_t *in, size_t len, char *sni, size_t cap, const char **why)
{
    /* Reassemble the handshake bytes from consecutive handshake records. */
    uint8_t hs[EG_HELLO_MAX + 4];
    size_t hn = 0, off = 0;
    uint32_t need = 0;   /* handshake message length + 4, once known */
    *why = "";
    for (;;) {
        if (len - off < 5)
            return EG_TLS_MORE;
        if (in[off] != 0x16) {
            *why = "the tunnel must start with a TLS ClientHello";
            return EG_TLS_BAD;
        }
        if (in[off + 1] != 0x03) {
            *why = "not a TLS record";
            return EG_TLS_BAD;
        }
        uint32_t rl = be(in + off + 3, 2);
        if (rl == 0 || rl > 16384 + 256) {
            *why = "bad TLS record length";
            return EG_TLS_BAD;
        }
        if (len - off - 5 < rl)
            return EG_TLS_MORE;
        if (hn + rl > sizeof hs) {
            *why = "ClientHello larger than 16 KiB";
            return EG_TLS_BAD;
        }
        memcpy(hs + hn, in + off + 5, rl);
        hn += rl;
        off += 5 + rl;
        if (hn >= 4 && !need) {
            if (hs[0] != 0x01) {
                *why = "the first handshake message is not a ClientHello";
                return EG_TLS_BAD;
            }
            need = be(hs + 1, 3) + 4;
            if (need > EG_HELLO_MAX) {
                *why = "ClientHello larger than 16 KiB";
                return EG_TLS_BAD;
            }
        }
        if (need && hn >= need)
            break;
    }
    /* ClientHello body: version(2) random(32) session_id<1> suites<2>
     * compression<1> extensions<2> */
    const uint8_t *p = hs + 4, *e = hs + need;
#define TAKE(n) do { if ((size_t)(e - p) < (size_t)(n)) goto bad; p += (n); } while (0)
    TAKE(34);
    if (p >= e) goto bad;
    TAKE(1 + p[0]);
    if (e - p < 2) goto bad;
    TAKE(2 + be(p, 2));
    if (p >= e) goto bad;
    TAKE(1 + p[0]);
    if (p == e)
        return EG_TLS_NO_SNI;   /* no extensions at all */
    if (e - p < 2) goto bad;
    uint32_t el = be(p, 2);
    p += 2;
    if ((size_t)(e - p) != el) goto bad;
    int found = 0;
    while (p < e) {
        if (e - p < 4) goto bad;
        uint32_t type = be(p, 2), xl = be(p + 2, 2);
        p += 4;
        if ((size_t)(e - p) < xl) goto bad;
        if (type == 0) {
            if (found) {
                *why = "two server_name extensions";
                return EG_TLS_BAD;
            }
            const uint8_t *q = p, *qe = p + xl;
            if (qe - q < 2 || be(q, 2) != (uint32_t)(qe - q - 2)) goto bad;
            q += 2;
            int names = 0;
            while (q < qe) {
                if (qe - q < 3) goto bad;
                uint32_t nt = q[0], nl = be(q + 1, 2);
                q += 3;
                if ((size_t)(qe - q) < nl) goto bad;
                if (nt == 0) {
                    if (names++) {
                        *why = "more than one host name in server_name";
                        return EG_TLS_BAD;
                    }
                    if (nl == 0 || nl >= cap) goto bad;
                    for (uint32_t i = 0; i < nl; i++)
                        if (q[i] <= ' ' || q[i] >= 0x7f) {
                            *why = "invalid character in the SNI host name";
                            return EG_TLS_BAD;
                        }
                    memcpy(sni, q, nl);
                    sni[nl] = 0;
                }
                q += nl;
            }
            found = names > 0;
        }
        p += xl;
    }
    return found ? EG_TLS_SNI : EG_TLS_NO_SNI;
bad:
    *why = "malformed TLS ClientHello";
    return EG_TLS_BAD;
#undef TAKE
}
