/* page_token.c — ListSandboxes' page tokens (page_token.h). A token is
 * only a cursor: ids are ordered and the next page is the ids after it, so
 * a token grants nothing (a forged one lists the caller's own sandboxes
 * from some point on); parsing checks the cursor is a valid sandbox id, so
 * nothing else reaches the hosts' list. Fuzzed: tests/fuzz/gateway_api_fuzz.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gateway/page_token.h"
#include "rpc/validate.h"

#define TOKEN_PREFIX "sgp1."

/* page_token: TOKEN_PREFIX + the page's last sandbox id, base64url. The id
 * is only a cursor (ids are ordered, the next page is the ids after it),
 * so a token grants nothing: a forged one lists the caller's own sandboxes
 * from some point on. */
void gw_page_token_make(const char *id, char *out, size_t cap)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t n = strlen(id), o = snprintf(out, cap, "%s", TOKEN_PREFIX);
    const uint8_t *s = (const uint8_t *)id;
    for (size_t i = 0; i < n && o + 5 < cap; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = b64[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = b64[v & 63];
    }
    out[o] = 0;
}

static int b64val(char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
         : c >= '0' && c <= '9' ? c - '0' + 52 : c == '-' ? 62 : c == '_' ? 63 : -1;
}

/* 0 and the cursor id, or -1: not a token this gateway issued. */
int gw_page_token_parse(const char *tok, char *id, size_t cap)
{
    size_t pl = sizeof TOKEN_PREFIX - 1, n = strlen(tok), o = 0;
    if (strncmp(tok, TOKEN_PREFIX, pl) != 0 || n == pl || (n - pl) % 4 == 1)
        return -1;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = pl; i < n; i++) {
        int v = b64val(tok[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 >= cap)
                return -1;
            id[o++] = (char)(acc >> bits & 0xff);
        }
    }
    id[o] = 0;
    return rpc_charset_ok(RPC_CS_SANDBOX_ID, (const uint8_t *)id, o) ? 0 : -1;
}
