/* regkeys.c — the etcd key layout (regkeys.h). */
#include <stdio.h>
#include <string.h>

#include <openssl/sha.h>

#include "common/regkeys.h"

static void hex(const unsigned char *p, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[p[i] >> 4];
        out[2 * i + 1] = d[p[i] & 15];
    }
    out[2 * n] = 0;
}

static void hashed(const char *prefix, const char *dir, const char *dedupe, char *out, size_t cap)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    char h[2 * SHA256_DIGEST_LENGTH + 1];
    SHA256((const unsigned char *)dedupe, strlen(dedupe), md);
    hex(md, sizeof md, h);
    snprintf(out, cap, "%s%s/%s", prefix, dir, h);
}

void sg_regkey_task(const char *prefix, const char *dedupe, char *out, size_t cap)
{
    hashed(prefix, "tasks", dedupe, out, cap);
}

void sg_regkey_history(const char *prefix, const char *dedupe, char *out, size_t cap)
{
    hashed(prefix, "history", dedupe, out, cap);
}

void sg_regkey_sandbox(const char *prefix, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%ssandboxes/%s", prefix, id);
}

void sg_regkey_live(const char *prefix, const char *tenant, const char *user, const char *id,
                    char *out, size_t cap)
{
    char t[260], u[260];
    size_t tl = strlen(tenant) > 127 ? 127 : strlen(tenant);
    hex((const unsigned char *)tenant, tl, t);
    if (!user) {
        snprintf(out, cap, "%slive/%s/", prefix, t);
        return;
    }
    size_t ul = strlen(user) > 127 ? 127 : strlen(user);
    hex((const unsigned char *)user, ul, u);
    snprintf(out, cap, "%slive/%s/%s/%s", prefix, t, u, id ? id : "");
}
