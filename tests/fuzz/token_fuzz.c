/* token_fuzz.c — libFuzzer target for the end-user token verifier
 * (tenancy/token.c), which the gateway runs on the x-sandgate-user-token
 * metadata of every call (up to 1023 bytes, gateway/request.c).
 *
 * Two properties per input:
 *  1. verify(input): never a crash, leak or UB; on success the names are
 *     NUL-free strings that fit, the expiry lies in (now, now + max_ttl], and
 *     re-signing them gives back the input byte for byte: a token has one
 *     spelling, so no one can mint a second string for a token they hold
 *     (dedupe and revocation lists key on the string).
 *  2. sign(user, task) then verify, with the input split at its first NUL
 *     into user and task: signing either refuses or makes a token that
 *     verifies to the same names.
 * Seeds (tests/fuzz/corpus/token_fuzz/) are tokens signed with KEY below,
 * expiring inside the window, so mutations start from valid MACs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenancy/tenancy.h"

static const uint8_t KEY[] = "fuzz-user-token-key-0123456789ab";
#define KEYLEN (sizeof KEY - 1)
#define NOW 1700000000LL
#define MAX_TTL 86400u

#define CHECK(cond)                                                 \
    do {                                                            \
        if (!(cond)) {                                              \
            fprintf(stderr, "token_fuzz: broken: %s\n", #cond);     \
            abort();                                                \
        }                                                           \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1023)   /* the gateway's cap on the metadata value */
        return 0;
    char tok[1024];
    memcpy(tok, data, size);
    tok[size] = 0;

    tenancy_token t;
    sg_err e = {0};
    int rc = tenancy_token_verify(tok, KEY, KEYLEN, NOW, MAX_TTL, &t, &e);
    if (rc == 0) {
        CHECK(strnlen(t.user, sizeof t.user) < sizeof t.user);
        CHECK(strnlen(t.task, sizeof t.task) < sizeof t.task);
        CHECK(t.expiry > NOW && t.expiry <= NOW + MAX_TTL);
        char again[1024];
        CHECK(tenancy_token_sign(KEY, KEYLEN, t.user, t.task, t.expiry, again, sizeof again) == 0);
        if (strcmp(again, tok) != 0)
            fprintf(stderr, "token_fuzz: accepted \"%s\", signed form \"%s\"\n", tok, again);
        CHECK(strcmp(again, tok) == 0);
    } else {
        CHECK(rc == SG_EUNAUTH && strstr(e.msg, "unauthenticated"));
    }

    /* sign → verify round trip; data up to the first NUL is the user. */
    const char *user = tok;
    const char *task = memchr(data, 0, size) ? tok + strlen(tok) + 1 : "";
    char signed_tok[1024];
    if (tenancy_token_sign(KEY, KEYLEN, user, task, NOW + 60, signed_tok, sizeof signed_tok) == 0) {
        tenancy_token t2;
        sg_err e2 = {0};
        rc = tenancy_token_verify(signed_tok, KEY, KEYLEN, NOW, MAX_TTL, &t2, &e2);
        if (rc != 0)
            fprintf(stderr, "token_fuzz: signed %zu+%zu-byte names, verify: %s\n", strlen(user),
                    strlen(task), e2.msg);
        CHECK(rc == 0);
        CHECK(strcmp(t2.user, user) == 0 && strcmp(t2.task, task) == 0 && t2.expiry == NOW + 60);
    }
    return 0;
}
