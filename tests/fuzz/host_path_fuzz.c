/* host_path_fuzz.c — libFuzzer target for host_path_clean (host/core/path.c), the
 * first look WriteFile/ReadFile take at a caller's path before openat2
 * (host/core/files.c).
 *
 * Input: one byte choosing the output buffer's size (1..HOST_PATH_MAX, so
 * the "too long" edges are reached), then the path (up to its first NUL, as
 * the proto string arrives). Per input:
 *  1. no crash, leak or UB, and nothing written past the buffer (canary);
 *  2. the verdict matches a model: refused exactly when the path is
 *     absolute outside /workspace, has a ".." component, names nothing, or
 *     its cleaned form does not fit;
 *  3. when accepted, the output is canonical (no leading, trailing or
 *     doubled '/', no "." or ".." component), keeps the input's components
 *     in order, and cleaning it again gives itself. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/core/path.h"

#define CHECK(cond)                                                 \
    do {                                                            \
        if (!(cond)) {                                              \
            fprintf(stderr, "host_path_fuzz: broken: %s\n", #cond); \
            abort();                                                \
        }                                                           \
    } while (0)

#define CANARY 0xA5

/* The components the model keeps: "" and "." dropped; *dotdot set if a
 * ".." is among them. Joined with '/' into out (unbounded model buffer). */
static size_t model(const char *p, char *out, int *dotdot)
{
    size_t len = 0;
    *dotdot = 0;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            *dotdot = 1;
        if (n && !(n == 1 && p[0] == '.')) {
            if (len)
                out[len++] = '/';
            memcpy(out + len, p, n);
            len += n;
        }
        p += n + (e ? 1 : 0);
    }
    out[len] = 0;
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > HOST_PATH_MAX + 64)
        return 0;
    size_t cap = 1 + (size_t)data[0] * HOST_PATH_MAX / 256;   /* 1..HOST_PATH_MAX */
    char in[HOST_PATH_MAX + 65];
    memcpy(in, data + 1, size - 1);
    in[size - 1] = 0;

    unsigned char buf[HOST_PATH_MAX + 16];
    memset(buf, CANARY, sizeof buf);
    sg_err e = {0};
    int rc = host_path_clean(in, (char *)buf, cap, &e);
    for (size_t i = cap; i < sizeof buf; i++)
        CHECK(buf[i] == CANARY);

    /* the model's verdict */
    const char *rest = in;
    int outside = 0;
    if (in[0] == '/') {
        if (strncmp(in, "/workspace", 10) == 0 && (in[10] == '/' || in[10] == 0))
            rest = in + 10;
        else
            outside = 1;
    }
    char want[HOST_PATH_MAX + 80];
    int dotdot;
    size_t wlen = model(rest, want, &dotdot);
    int refuse = outside || dotdot || wlen == 0 || wlen >= cap;

    if (refuse) {
        CHECK(rc == SG_EINVAL && e.code == SG_EINVAL && e.msg[0]);
        return 0;
    }
    CHECK(rc == 0);
    const char *out = (const char *)buf;
    size_t n = strnlen(out, cap);
    CHECK(n < cap && n == wlen && strcmp(out, want) == 0);
    CHECK(out[0] != '/' && out[n - 1] != '/' && !strstr(out, "//"));
    char framed[HOST_PATH_MAX + 4];
    snprintf(framed, sizeof framed, "/%s/", out);
    CHECK(!strstr(framed, "/./") && !strstr(framed, "/../"));
    char again[HOST_PATH_MAX];
    CHECK(host_path_clean(out, again, sizeof again, &e) == 0 && strcmp(again, out) == 0);
    return 0;
}
