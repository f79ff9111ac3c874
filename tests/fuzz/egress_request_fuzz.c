/* egress_request_fuzz.c — libFuzzer target for the egress proxy's request
 * head parser (host/egress/parse.c eg_parse_request), fed the bytes a
 * sandbox sends to 127.0.0.1:3128, and what the proxy does next with the
 * host it names (IP-literal parse, host-name check: policy/addr.h).
 *
 * Beyond "no crash, no leak, no UB", it checks what the proxy relies on:
 * a complete head is self-contained and every shorter prefix of it asks for
 * more bytes (the proxy reads incrementally); a result names a host of
 * 1..255 bytes and a port of 1..65535; an HTTP request's rewritten head is
 * exactly out_len bytes, ends "Connection: close\r\n\r\n" and has no bare LF;
 * an error carries a reason. Seed corpus: tests/fuzz/corpus/egress_request_fuzz/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/egress/internal.h"
#include "policy/addr.h"

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "egress_request_fuzz: broken: %s\n", #cond);   \
            abort();                                                       \
        }                                                                  \
    } while (0)

static int parse(const uint8_t *data, size_t size, eg_req *r, const char **why)
{
    /* A copy of exactly size bytes, so ASan sees any read past the end. */
    char *in = malloc(size ? size : 1);
    CHECK(in);
    memcpy(in, data, size);
    *why = NULL;
    int rc = eg_parse_request(in, size, r, why);
    free(in);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eg_req r;
    const char *why;
    int rc = parse(data, size, &r, &why);
    CHECK(rc == 0 || rc == 1 || rc == 400 || rc == 405 || rc == 411 || rc == 431 ||
          rc == 500 || rc == 501);
    if (rc == 0) {
        CHECK(size < EG_HEAD_MAX);
        CHECK(r.out_head == NULL);
        return 0;
    }
    if (rc != 1) {
        CHECK(why && why[0]);
        CHECK(r.out_head == NULL);
        return 0;
    }
    CHECK(r.head_len >= 4 && r.head_len <= size && r.head_len <= EG_HEAD_MAX);
    CHECK(memcmp(data + r.head_len - 4, "\r\n\r\n", 4) == 0);
    size_t hl = strnlen(r.host, sizeof r.host);
    CHECK(hl > 0 && hl < sizeof r.host);
    CHECK(r.port >= 1 && r.port <= 65535);
    if (r.kind == EG_REQ_HTTP) {
        CHECK(r.out_head && strlen(r.out_head) == r.out_len);
        CHECK(r.out_len >= 21 && memcmp(r.out_head + r.out_len - 21, "Connection: close\r\n\r\n", 21) == 0);
        for (size_t i = 0; i < r.out_len; i++)
            CHECK(r.out_head[i] != '\n' || (i > 0 && r.out_head[i - 1] == '\r'));
    } else {
        CHECK(r.kind == EG_REQ_CONNECT && r.out_head == NULL);
    }

    /* What the proxy does with the host next (request.c, match.c). */
    uint8_t lit[16];
    char norm[256];
    if (!policy_ip_parse(r.host, lit)) {
        const char *bad = policy_host_check(r.host, norm, sizeof norm, 0);
        if (!bad)
            CHECK(strlen(norm) < sizeof norm);
    } else {
        char back[64];
        policy_ip_format(lit, back, sizeof back);
        CHECK(policy_ip_parse(back, lit));
    }

    /* The head alone parses the same; its prefixes ask for more. */
    eg_req again;
    const char *why2;
    CHECK(parse(data, r.head_len, &again, &why2) == 1);
    CHECK(again.kind == r.kind && again.port == r.port && strcmp(again.host, r.host) == 0);
    CHECK(again.out_len == r.out_len &&
          (r.out_len == 0 || memcmp(again.out_head, r.out_head, r.out_len) == 0));
    eg_req_cleanup(&again);
    size_t cuts[] = {r.head_len - 1, r.head_len / 2, 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        int prc = parse(data, cuts[i], &again, &why2);
        if (prc != 0)
            fprintf(stderr, "prefix %zu of a %zu-byte head: %d (%s)\n", cuts[i], r.head_len, prc,
                    why2 ? why2 : "");
        CHECK(prc == 0);
        eg_req_cleanup(&again);
    }
    eg_req_cleanup(&r);
    return 0;
}
