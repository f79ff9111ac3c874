/* env.c — the environment a sandbox is activated with, as the JSON object
 * the activation frame carries: a fixed base, the request's env, the egress
 * proxy variables when egress is granted, and the granted secrets. Nothing
 * from the daemon's own environment. Callers wipe the result (secrets). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

/* JSON string escape into a growing buffer. */
static void json_str(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n * 6 + 4 > *cap) {
        *cap = (*len + n * 6 + 4) * 2;
        *buf = realloc(*buf, *cap);
    }
    char *o = *buf + *len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch < 0x20) {
            o += sprintf(o, "\\u%04x", ch);
        } else {
            *o++ = (char)ch;
        }
    }
    *o++ = '"';
    *len = (size_t)(o - *buf);
}

static void json_kv(char **buf, size_t *len, size_t *cap, int *first, const char *k,
                    const char *v, size_t vlen)
{
    if (!*first)
        (*buf)[(*len)++] = ',';
    *first = 0;
    json_str(buf, len, cap, k, strlen(k));
    (*buf)[(*len)++] = ':';
    json_str(buf, len, cap, v, vlen);
}

/* The sandbox's whole environment: a fixed base, the request's env, the
 * granted secrets. Nothing from the daemon. */
char *host_sandbox_env(const Sandgate__V1__HostCreateRequest *req)
{
    size_t cap = 1024, len = 0;
    char *buf = malloc(cap);
    int first = 1;
    buf[len++] = '{';
    static const char *base[][2] = {{"PATH", "/usr/local/bin:/usr/bin:/bin"},
                                    {"HOME", "/workspace"},
                                    {"LANG", "C.UTF-8"},
                                    {"MPLBACKEND", "Agg"},
                                    /* matplotlib's config/cache dir (font list):
                                     * writable and per sandbox, not the workspace */
                                    {"MPLCONFIGDIR", "/tmp/.cache/matplotlib"},
                                    {"TMPDIR", "/tmp"}};
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        json_kv(&buf, &len, &cap, &first, base[i][0], base[i][1], strlen(base[i][1]));
    const Sandgate__V1__CreateSandboxRequest *r = req->request;
    for (size_t i = 0; r && i < r->n_env; i++)
        json_kv(&buf, &len, &cap, &first, r->env[i]->key, r->env[i]->value,
                strlen(r->env[i]->value));
    if (req->n_egress) {   /* granted: the supervisor's listener (egress.c); last one wins */
        static const char *px[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                   "http_proxy", "https_proxy", "all_proxy"};
        static const char url[] = "http://127.0.0.1:3128";
        for (size_t i = 0; i < sizeof px / sizeof px[0]; i++)
            json_kv(&buf, &len, &cap, &first, px[i], url, sizeof url - 1);
        json_kv(&buf, &len, &cap, &first, "NO_PROXY", "localhost,127.0.0.1", 19);
        json_kv(&buf, &len, &cap, &first, "no_proxy", "localhost,127.0.0.1", 19);
    }
    for (size_t i = 0; i < req->n_secrets; i++)
        json_kv(&buf, &len, &cap, &first, req->secrets[i]->env,
                (const char *)req->secrets[i]->value.data, req->secrets[i]->value.len);
    if (len + 2 > cap)
        buf = realloc(buf, cap = len + 2);
    buf[len++] = '}';
    buf[len] = 0;
    return buf;
}
