/* parse_test.c — table tests for the proxy's parsers (parse.c): request
 * heads (CONNECT authority, absolute URI, Host header, smuggling shapes),
 * authorities, IP-literal normalisation, and TLS ClientHello SNI extraction
 * including every truncation and malformed lengths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "host/egress/egress.h"
#include "host/egress/internal.h"

typedef struct req_row {
    const char *name, *in;
    int want;                /* 1, 0 (more) or a status */
    int kind;
    const char *host;
    uint32_t port;
    const char *head;        /* expected rewritten head (HTTP) or NULL */
} req_row;

static const req_row req_rows[] = {
    {"connect", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 1,
     EG_REQ_CONNECT, "example.com", 443, NULL},
    {"connect v6", "CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", 1, EG_REQ_CONNECT, "::1", 8443, NULL},
    {"connect decimal ip", "CONNECT 2130706433:80 HTTP/1.1\r\n\r\n", 1, EG_REQ_CONNECT,
     "2130706433", 80, NULL},
    {"connect no port", "CONNECT example.com HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"connect port 0", "CONNECT example.com:0 HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"connect port too big", "CONNECT example.com:65536 HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"connect bare v6", "CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"connect userinfo", "CONNECT a@b.com:443 HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"incomplete", "CONNECT example.com:443 HTTP/1.1\r\nHost: x", 0, 0, NULL, 0, NULL},
    {"absolute uri",
     "GET http://Example.com/a/b?c=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n"
     "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\n\r\n",
     1, EG_REQ_HTTP, "Example.com", 80,
     "GET /a/b?c=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\nConnection: close\r\n\r\n"},
    {"absolute uri port", "GET http://example.com:8000 HTTP/1.0\r\nHost: example.com:8000\r\n\r\n", 1,
     EG_REQ_HTTP, "example.com", 8000, "GET / HTTP/1.1\r\nHost: example.com:8000\r\nConnection: close\r\n\r\n"},
    {"query without path", "GET http://example.com?x HTTP/1.1\r\nHost: example.com\r\n\r\n", 1,
     EG_REQ_HTTP, "example.com", 80, "GET /?x HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"},
    {"no host header is added", "GET http://example.com/ HTTP/1.0\r\n\r\n", 1, EG_REQ_HTTP,
     "example.com", 80, "GET / HTTP/1.1\r\nHost: example.com:80\r\nConnection: close\r\n\r\n"},
    {"host header names another host", "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
     400, 0, NULL, 0, NULL},
    {"host header other port", "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test:8080\r\n\r\n",
     400, 0, NULL, 0, NULL},
    {"two host headers", "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", 400, 0,
     NULL, 0, NULL},
    {"origin form", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"https uri", "GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"userinfo in uri", "GET http://allowed.test@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400, 0,
     NULL, 0, NULL},
    {"percent in host", "GET http://evil%2etest/ HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"backslash in host", "GET http://a.test\\@evil.test/ HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"bare lf", "GET http://a.test/ HTTP/1.1\nHost: a.test\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"obs fold", "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n X: y\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"transfer-encoding", "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n",
     411, 0, NULL, 0, NULL},
    {"conflicting lengths",
     "POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, 0,
     NULL, 0, NULL},
    {"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"space in target", "GET http://a.test/a b HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
    {"nul", "GET http://a.test/\0 HTTP/1.1\r\n\r\n", 400, 0, NULL, 0, NULL},
};

static void request_table(void **state)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof req_rows / sizeof *req_rows; i++) {
        const req_row *r = &req_rows[i];
        size_t len = strlen(r->in);
        if (strcmp(r->name, "nul") == 0)
            len = 34;
        eg_req q;
        const char *why = NULL;
        int rc = eg_parse_request(r->in, len, &q, &why);
        int ok = rc == r->want;
        if (ok && rc == 1) {
            ok = (int)q.kind == r->kind && strcmp(q.host, r->host) == 0 && q.port == r->port;
            if (ok && r->head)
                ok = q.out_head && strcmp(q.out_head, r->head) == 0;
        }
        if (!ok) {
            printf("FAIL %s: rc %d (%s) want %d; host '%s' port %u head '%s'\n", r->name, rc,
                   why ? why : "", r->want, rc == 1 ? q.host : "", rc == 1 ? q.port : 0,
                   rc == 1 && q.out_head ? q.out_head : "");
            bad++;
        }
        if (rc == 1)
            eg_req_cleanup(&q);
    }
    assert_int_equal(bad, 0);
}

static void request_body_and_size(void **state)
{
    const char *in = "POST http://a.test/x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nhello";
    eg_req q;
    const char *why;
    assert_int_equal(eg_parse_request(in, strlen(in), &q, &why), 1);
    assert_int_equal(q.content_length, 5);
    assert_int_equal(q.head_len, strlen(in) - 5);
    eg_req_cleanup(&q);
    /* a head that never ends is refused at 16 KiB, not buffered forever */
    char *big = malloc(EG_HEAD_MAX + 10);
    memset(big, 'a', EG_HEAD_MAX + 10);
    memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
    assert_int_equal(eg_parse_request(big, EG_HEAD_MAX + 10, &q, &why), 431);
    free(big);
}

/* A head of n bytes: the request line, one X header padding it out, CRLF CRLF. */
static char *head_of(size_t n)
{
    char *h = malloc(n);
    memset(h, 'a', n);
    memcpy(h, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
    memcpy(h + n - 4, "\r\n\r\n", 4);
    return h;
}

/* The 16 KiB limit holds whatever the read sizes: a head is accepted whole
 * only if each prefix of it would have been waited for, not refused (heads
 * of 16385..16387 bytes passed in one read and were 431 in two). */
static void request_head_limit_any_split(void **state)
{
    eg_req q;
    const char *why;
    for (size_t n = EG_HEAD_MAX - 2; n <= EG_HEAD_MAX + 4; n++) {
        char *h = head_of(n);
        int whole = eg_parse_request(h, n, &q, &why);
        if (whole == 1)
            eg_req_cleanup(&q);
        for (size_t cut = n - 4; cut < n; cut++) {
            int part = eg_parse_request(h, cut, &q, &why);
            if (whole == 1 && part != 0)
                fail_msg("%zu-byte head: accepted whole, prefix of %zu is %d", n, cut, part);
        }
        if (whole != (n <= EG_HEAD_MAX ? 1 : 431))
            fail_msg("%zu-byte head: %d", n, whole);
        free(h);
    }
}

/* The bytes after the head are not a C string: the head sits at the end of
 * a mapping whose next page is PROT_NONE (strstr, before, read past the
 * bytes given; under ASan that read faults here). */
static void request_at_buffer_end(void **state)
{
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, (size_t)pg * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    assert_int_equal(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
    const char *in[] = {"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n",
                        "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Y: z\r\n\r\n"};
    for (size_t i = 0; i < 2; i++) {
        size_t n = strlen(in[i]);
        char *at = m + pg - n;
        memcpy(at, in[i], n);
        eg_req q;
        const char *why;
        assert_int_equal(eg_parse_request(at, n, &q, &why), 1);
        assert_string_equal(q.host, "a.test");
        eg_req_cleanup(&q);
    }
    munmap(m, (size_t)pg * 2);
}

typedef struct ip_row { const char *in; int is_ip; const char *norm; const char *special; } ip_row;
static const ip_row ip_rows[] = {
    {"93.184.216.34", 1, "93.184.216.34", NULL},
    {"2130706433", 1, "127.0.0.1", "loopback"},
    {"0177.0.0.1", 1, "127.0.0.1", "loopback"},
    {"0x7f.0.0.1", 1, "127.0.0.1", "loopback"},
    {"0x7f000001", 1, "127.0.0.1", "loopback"},
    {"127.1", 1, "127.0.0.1", "loopback"},
    {"127.0.0.1.", 1, "127.0.0.1", "loopback"},
    {"0xa9.0xfe.0xa9fe", 1, "169.254.169.254", "link-local"},
    {"2852039166", 1, "169.254.169.254", "link-local"},
    {"::ffff:169.254.169.254", 1, "169.254.169.254", "link-local"},
    {"[::ffff:7f00:1]", 1, "127.0.0.1", "loopback"},
    {"::127.0.0.1", 1, "127.0.0.1", "loopback"},
    {"64:ff9b::a9fe:a9fe", 1, "169.254.169.254", "link-local"},
    {"::", 1, "::", "unspecified"},
    {"0", 1, "0.0.0.0", "unspecified"},
    {"0.0.0.0", 1, "0.0.0.0", "unspecified"},
    {"fe80::1%eth0", 1, "fe80::1", "link-local"},
    {"10.0.0.1", 1, "10.0.0.1", "private (RFC 1918)"},
    {"192.168.1.1", 1, "192.168.1.1", "private (RFC 1918)"},
    {"224.0.0.251", 1, "224.0.0.251", "multicast"},
    {"example.com", 0, NULL, NULL},
    {"0x7f.example", 0, NULL, NULL},
    {"1.2.3.4.5", 0, NULL, NULL},
    {"256.1.1.1", 0, NULL, NULL},
};

static void ip_literals(void **state)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof ip_rows / sizeof *ip_rows; i++) {
        const ip_row *r = &ip_rows[i];
        uint8_t ip[16];
        char buf[64] = "";
        int is = egress_ip_parse(r->in, ip);
        const char *sp = NULL;
        if (is) {
            egress_ip_format(ip, buf, sizeof buf);
            sp = egress_ip_special(ip);
        }
        if (is != r->is_ip || (is && (strcmp(buf, r->norm) != 0 ||
                                      (sp == NULL) != (r->special == NULL) ||
                                      (sp && strcmp(sp, r->special) != 0)))) {
            printf("FAIL ip %s: is_ip %d norm %s special %s\n", r->in, is, buf, sp ? sp : "-");
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* ---- ClientHello builder ------------------------------------------------ */

typedef struct hb { uint8_t b[20000]; size_t n; } hb;
static void u8(hb *h, unsigned v) { h->b[h->n++] = (uint8_t)v; }
static void u16(hb *h, unsigned v) { u8(h, v >> 8); u8(h, v & 255); }
static void u24(hb *h, unsigned v) { u8(h, v >> 16); u16(h, v & 0xffff); }
static void bytes(hb *h, const void *p, size_t n) { memcpy(h->b + h->n, p, n); h->n += n; }
static void put16_at(hb *h, size_t at, unsigned v) { h->b[at] = (uint8_t)(v >> 8); h->b[at + 1] = (uint8_t)v; }

/* A ClientHello body (no record or handshake header). names: SNI entries
 * (NULL = no SNI extension); pad: bytes of an extra extension. */
static void hello_body(hb *h, const char *const *names, size_t n_names, size_t pad, int no_ext)
{
    u16(h, 0x0303);
    for (int i = 0; i < 32; i++)
        u8(h, i);
    u8(h, 32);
    for (int i = 0; i < 32; i++)
        u8(h, 0xaa);
    u16(h, 4); u16(h, 0x1301); u16(h, 0x1302);
    u8(h, 1); u8(h, 0);
    if (no_ext)
        return;
    size_t ext_at = h->n;
    u16(h, 0);
    u16(h, 0x000a); u16(h, 4); u16(h, 2); u16(h, 0x001d);    /* supported_groups */
    if (names) {
        u16(h, 0);
        size_t xl_at = h->n;
        u16(h, 0);
        size_t list_at = h->n;
        u16(h, 0);
        for (size_t i = 0; i < n_names; i++) {
            u8(h, 0);
            u16(h, (unsigned)strlen(names[i]));
            bytes(h, names[i], strlen(names[i]));
        }
        put16_at(h, list_at, (unsigned)(h->n - list_at - 2));
        put16_at(h, xl_at, (unsigned)(h->n - xl_at - 2));
    }
    if (pad) {
        u16(h, 0x0015);
        u16(h, (unsigned)pad);
        for (size_t i = 0; i < pad; i++)
            u8(h, 0);
    }
    put16_at(h, ext_at, (unsigned)(h->n - ext_at - 2));
}

/* Wrap a body into a handshake message and records of at most rec bytes. */
static void wrap(hb *out, const hb *body, size_t rec)
{
    hb hs = {.n = 0};
    u8(&hs, 1);
    u24(&hs, (unsigned)body->n);
    bytes(&hs, body->b, body->n);
    out->n = 0;
    for (size_t off = 0; off < hs.n; off += rec) {
        size_t n = hs.n - off < rec ? hs.n - off : rec;
        u8(out, 0x16); u16(out, 0x0301); u16(out, (unsigned)n);
        bytes(out, hs.b + off, n);
    }
}

static int sni_of(const hb *h, char *sni, const char **why)
{
    return eg_tls_sni(h->b, h->n, sni, 256, why);
}

static void sni_basic(void **state)
{
    static hb body, rec;
    char sni[256];
    const char *why;
    const char *one[] = {"files.pythonhosted.org"};
    body.n = 0;
    hello_body(&body, one, 1, 0, 0);
    wrap(&rec, &body, 16384);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_SNI);
    assert_string_equal(sni, "files.pythonhosted.org");

    /* split across records of 50 bytes */
    wrap(&rec, &body, 50);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_SNI);
    assert_string_equal(sni, "files.pythonhosted.org");

    /* big hello (padding) over several records */
    body.n = 0;
    hello_body(&body, one, 1, 9000, 0);
    wrap(&rec, &body, 4000);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_SNI);

    /* no SNI extension; no extensions at all */
    body.n = 0;
    hello_body(&body, NULL, 0, 0, 0);
    wrap(&rec, &body, 16384);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_NO_SNI);
    body.n = 0;
    hello_body(&body, NULL, 0, 0, 1);
    wrap(&rec, &body, 16384);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_NO_SNI);
}

static void sni_truncated(void **state)
{
    static hb body, rec;
    char sni[256];
    const char *why;
    const char *one[] = {"a.example"};
    body.n = 0;
    hello_body(&body, one, 1, 300, 0);
    wrap(&rec, &body, 100);
    /* every prefix asks for more; none yields a name */
    for (size_t n = 0; n < rec.n; n++) {
        int rc = eg_tls_sni(rec.b, n, sni, sizeof sni, &why);
        if (rc != EG_TLS_MORE) {
            printf("FAIL prefix %zu of %zu: rc %d (%s)\n", n, rec.n, rc, why);
            fail();
        }
    }
    assert_int_equal(eg_tls_sni(rec.b, rec.n, sni, sizeof sni, &why), EG_TLS_SNI);
}

static void sni_malformed(void **state)
{
    static hb body, rec, m;
    char sni[256];
    const char *why;
    const char *one[] = {"a.example"}, *two[] = {"a.example", "b.example"}, *ctl[] = {"a\x01.example"};
    /* plain bytes: a second CONNECT inside the tunnel */
    const char *conn = "CONNECT evil.test:443 HTTP/1.1\r\n\r\n";
    assert_int_equal(eg_tls_sni((const uint8_t *)conn, strlen(conn), sni, sizeof sni, &why), EG_TLS_BAD);
    /* two host names */
    body.n = 0;
    hello_body(&body, two, 2, 0, 0);
    wrap(&rec, &body, 16384);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_BAD);
    /* control character in the name */
    body.n = 0;
    hello_body(&body, ctl, 1, 0, 0);
    wrap(&rec, &body, 16384);
    assert_int_equal(sni_of(&rec, sni, &why), EG_TLS_BAD);
    /* not a ClientHello */
    body.n = 0;
    hello_body(&body, one, 1, 0, 0);
    wrap(&rec, &body, 16384);
    m = rec;
    m.b[5] = 2;
    assert_int_equal(sni_of(&m, sni, &why), EG_TLS_BAD);
    /* not a handshake record; bad record version */
    m = rec;
    m.b[0] = 0x17;
    assert_int_equal(sni_of(&m, sni, &why), EG_TLS_BAD);
    m = rec;
    m.b[1] = 0x02;
    assert_int_equal(sni_of(&m, sni, &why), EG_TLS_BAD);
    /* session id length past the end */
    m = rec;
    m.b[5 + 4 + 34] = 0xff;
    assert_int_equal(sni_of(&m, sni, &why), EG_TLS_BAD);
    /* every single-byte corruption of the body: never a crash, never a
     * different name than the one written */
    for (size_t i = 5; i < rec.n; i++) {
        for (unsigned v = 0; v < 256; v += 17) {
            m = rec;
            m.b[i] = (uint8_t)v;
            int rc = sni_of(&m, sni, &why);
            if (rc == EG_TLS_SNI && strcmp(sni, "a.example") != 0 && strlen(sni) != 9) {
                printf("FAIL corruption at %zu=%u gave '%s'\n", i, v, sni);
                fail();
            }
        }
    }
    /* a handshake length over 16 KiB */
    m = rec;
    m.b[6] = 0x01;
    assert_int_equal(sni_of(&m, sni, &why), EG_TLS_BAD);
}

static void authority(void **state)
{
    char h[256];
    uint32_t port = 0;
    assert_int_equal(eg_parse_authority("a.test", 6, h, sizeof h, &port, 80), 0);
    assert_int_equal(port, 80);
    assert_int_equal(eg_parse_authority("a.test:", 7, h, sizeof h, &port, 80), -1);
    assert_int_equal(eg_parse_authority("[::1]", 5, h, sizeof h, &port, 80), 0);
    assert_string_equal(h, "::1");
    assert_int_equal(eg_parse_authority("[::1]x", 6, h, sizeof h, &port, 80), -1);
    assert_int_equal(eg_parse_authority(":80", 3, h, sizeof h, &port, 80), -1);
    assert_int_equal(eg_parse_authority("a.test:+80", 10, h, sizeof h, &port, 80), -1);
    assert_true(eg_host_eq("A.Test.", "a.test"));
    assert_false(eg_host_eq("a.test", "a.tes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(request_table),
        cmocka_unit_test(request_body_and_size),
        cmocka_unit_test(request_head_limit_any_split),
        cmocka_unit_test(request_at_buffer_end),
        cmocka_unit_test(ip_literals),
        cmocka_unit_test(sni_basic),
        cmocka_unit_test(sni_truncated),
        cmocka_unit_test(sni_malformed),
        cmocka_unit_test(authority),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
