/* token.c — end-user tokens: the tenant's service signs (user, task,
 * expiry) with an HMAC-SHA256 key named in the policy, and the gateway
 * checks every call against it, so a bug in the agent service cannot name
 * another user's sandbox.
 *
 * Format: b64url(user) "." b64url(task) "." expiry-unix-seconds "." b64url(mac)
 * mac = HMAC-SHA256(key, "sandgate-user-token-v1\n" user "\n" task "\n" expiry) */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenancy/tenancy.h"

#define TOKEN_MSG "unauthenticated: missing or invalid user token"

static size_t b64url_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    static const char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = tbl[v >> 18 & 63];
        out[o++] = tbl[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = tbl[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = tbl[v & 63];
    }
    out[o] = 0;
    return o;
}

static int b64url_val(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

/* Decode n chars; returns the byte count or -1. Only the one spelling
 * b64url_encode makes is accepted: no length that leaves a lone char, and the
 * bits the last char carries beyond the data are zero (else the 32-byte
 * MAC had 4 spellings and a name up to 16, and a holder of one token had
 * many). */
static int b64url_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    if (n % 4 == 1)
        return -1;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_val(in[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= cap)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    if (acc & ((1u << bits) - 1))
        return -1;
    return (int)o;
}

/* -1 when the names do not fit: HMAC must never read past msg. */
static int mac_of(const uint8_t *key, size_t keylen, const char *user, const char *task,
                  long long expiry, uint8_t mac[32])
{
    char msg[2 * TENANCY_NAME_MAX + 64];
    int n = snprintf(msg, sizeof msg, "sandgate-user-token-v1\n%s\n%s\n%lld", user, task, expiry);
    if (n < 0 || (size_t)n >= sizeof msg)
        return -1;
    unsigned int len = 32;
    HMAC(EVP_sha256(), key, (int)keylen, (const uint8_t *)msg, (size_t)n, mac, &len);
    return 0;
}

/* The expiry exactly as "%lld" prints a non-negative value: digits, no
 * sign, space or leading zero, no overflow. 0 ok, -1 not. */
static int parse_expiry(const char *s, size_t n, long long *out)
{
    if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
        return -1;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (LLONG_MAX - (s[i] - '0')) / 10)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int tenancy_token_sign(const uint8_t *key, size_t keylen, const char *user, const char *task,
                       long long expiry, char *out, size_t cap)
{
    uint8_t mac[32];
    char u[256], t[256], m[64];
    /* A name the verifier could not hold, or a negative expiry, would make
     * a token that never verifies. */
    if (strlen(user) >= TENANCY_NAME_MAX || strlen(task) >= TENANCY_NAME_MAX || expiry < 0 ||
        mac_of(key, keylen, user, task, expiry, mac) != 0)
        return -1;
    b64url_encode((const uint8_t *)user, strlen(user), u, sizeof u);
    b64url_encode((const uint8_t *)task, strlen(task), t, sizeof t);
    b64url_encode(mac, sizeof mac, m, sizeof m);
    int n = snprintf(out, cap, "%s.%s.%lld.%s", u, t, expiry, m);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int tenancy_token_verify(const char *token, const uint8_t *key, size_t keylen, long long now_s,
                         uint32_t max_ttl_s, tenancy_token *out, sg_err *err)
{
    const char *p[4];
    size_t len[4];
    const char *s = token;
    for (int i = 0; i < 4; i++) {
        const char *dot = i < 3 ? strchr(s, '.') : s + strlen(s);
        if (!dot)
            return sg_err_set(err, SG_EUNAUTH, TOKEN_MSG);
        p[i] = s;
        len[i] = (size_t)(dot - s);
        s = dot + 1;
    }
    int un = b64url_decode(p[0], len[0], (uint8_t *)out->user, sizeof out->user - 1);
    int tn = b64url_decode(p[1], len[1], (uint8_t *)out->task, sizeof out->task - 1);
    uint8_t mac[40], want[32];
    int mn = b64url_decode(p[3], len[3], mac, sizeof mac);
    long long expiry;
    if (un < 0 || tn < 0 || mn != 32 || parse_expiry(p[2], len[2], &expiry) != 0)
        return sg_err_set(err, SG_EUNAUTH, TOKEN_MSG);
    out->user[un] = 0;
    out->task[tn] = 0;
    if (memchr(out->user, 0, (size_t)un) || memchr(out->task, 0, (size_t)tn))
        return sg_err_set(err, SG_EUNAUTH, TOKEN_MSG);
    if (mac_of(key, keylen, out->user, out->task, expiry, want) != 0 ||
        CRYPTO_memcmp(mac, want, 32) != 0)
        return sg_err_set(err, SG_EUNAUTH, TOKEN_MSG);
    if (expiry <= now_s || (max_ttl_s && expiry - now_s > (long long)max_ttl_s))
        return sg_err_set(err, SG_EUNAUTH, "unauthenticated: user token expired or too long-lived");
    out->expiry = expiry;
    return 0;
}
