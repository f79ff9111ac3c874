/* activate.c — a pooled sandbox's ACTIVATE JSON, read by sandgate-init.
 *
 * Owns: turning {"env": {...}, "workdir": "...", "egress": bool} (PROTOCOL.md
 * §2a) into an environment for exec children, a workdir and the egress
 * flag. The same rules as the context's own reading (create.py _parse):
 * env maps non-empty names without '=' or NUL to strings; workdir is a
 * string (default /workspace); egress is true only when it is literally
 * true; other keys are skipped. The JSON comes from the host, which is
 * trusted, but a malformed one is an error, never a guess.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "init.h"

#define DEPTH_MAX 32

typedef struct reader {
    const char *start, *p, *end;
    char *err;
    size_t errlen;
} reader;

static int bad(reader *r, const char *what)
{
    snprintf(r->err, r->errlen, "ACTIVATE: %s at byte %zu", what, (size_t)(r->p - r->start));
    return -1;
}

static void ws(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int eat(reader *r, char c)
{
    ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return 0;
    }
    return -1;
}

static int hex4(reader *r, uint32_t *v)
{
    if (r->end - r->p < 4)
        return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = *r->p++;
        *v <<= 4;
        if (c >= '0' && c <= '9')
            *v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            *v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            *v |= (uint32_t)(c - 'A' + 10);
        else
            return -1;
    }
    return 0;
}

static size_t utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* One escape after the backslash; appends its UTF-8 to *o. */
static int escape(reader *r, char **o)
{
    if (r->p >= r->end)
        return -1;
    char c = *r->p++;
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *k = strchr(from, c);
    if (c && k) {
        *(*o)++ = to[k - from];
        return 0;
    }
    uint32_t cp, lo;
    if (c != 'u' || hex4(r, &cp))
        return -1;
    if (cp >= 0xD800 && cp < 0xDC00) {   /* a surrogate pair, or an error */
        if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u')
            return -1;
        r->p += 2;
        if (hex4(r, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return -1;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
        return -1;
    }
    *o += utf8(*o, cp);
    return 0;
}

/* A JSON string, decoded into a new NUL-terminated buffer (owned by the
 * caller); *len excludes the NUL, which may also occur inside (\u0000). */
static char *string(reader *r, size_t *len)
{
    if (eat(r, '"'))
        return NULL;
    char *out = malloc((size_t)(r->end - r->p) + 1);   /* decoding never grows */
    char *o = out;
    while (out && r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p++;
        if (c < 0x20 || (c == '\\' && escape(r, &o))) {
            free(out);
            return NULL;
        }
        if (c != '\\')
            *o++ = (char)c;
    }
    if (!out || r->p >= r->end) {
        free(out);
        return NULL;
    }
    r->p++;
    *o = 0;
    *len = (size_t)(o - out);
    return out;
}

static int skip_value(reader *r, int depth);

static int skip_container(reader *r, char close, bool keyed, int depth)
{
    if (depth > DEPTH_MAX)
        return -1;
    if (eat(r, close) == 0)
        return 0;
    do {
        size_t n;
        if (keyed) {
            char *k = string(r, &n);
            free(k);
            if (!k || eat(r, ':'))
                return -1;
        }
        if (skip_value(r, depth + 1))
            return -1;
    } while (eat(r, ',') == 0);
    return eat(r, close);
}

static int skip_value(reader *r, int depth)
{
    ws(r);
    if (r->p >= r->end)
        return -1;
    char c = *r->p;
    if (c == '"') {
        size_t n;
        char *s = string(r, &n);
        free(s);
        return s ? 0 : -1;
    }
    if (c == '{' || c == '[') {
        r->p++;
        return skip_container(r, c == '{' ? '}' : ']', c == '{', depth);
    }
    const char *lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++)
        if ((size_t)(r->end - r->p) >= strlen(lit[i]) && !memcmp(r->p, lit[i], strlen(lit[i]))) {
            r->p += strlen(lit[i]);
            return 0;
        }
    const char *start = r->p;
    while (r->p < r->end && strchr("+-0123456789.eE", *r->p))
        r->p++;
    return r->p > start ? 0 : -1;
}

/* "K=V", owned by the caller. */
static char *env_entry(const char *k, size_t kl, const char *v, size_t vl)
{
    char *kv = malloc(kl + vl + 2);
    if (kv) {
        memcpy(kv, k, kl);
        kv[kl] = '=';
        memcpy(kv + kl + 1, v, vl + 1);
    }
    return kv;
}

static int env_add(init_activation *a, size_t *n, const char *k, size_t kl, const char *v,
                   size_t vl)
{
    if (!kl || memchr(k, '=', kl) || memchr(k, 0, kl) || memchr(v, 0, vl))
        return -1;
    char *kv = env_entry(k, kl, v, vl);
    if (!kv)
        return -1;
    /* A repeated name: the last one wins, as in a Python dict. */
    for (size_t i = 0; i < *n; i++)
        if (strncmp(a->env[i], k, kl) == 0 && a->env[i][kl] == '=') {
            free(a->env[i]);
            a->env[i] = kv;
            return 0;
        }
    char **e = realloc(a->env, (*n + 2) * sizeof *e);
    if (!e) {
        free(kv);
        return -1;
    }
    a->env = e;
    e[*n] = kv;
    e[++*n] = NULL;
    return 0;
}

static int env_object(reader *r, init_activation *a)
{
    size_t n = 0;
    if (eat(r, '{'))
        return bad(r, "env must map names to strings");
    if (eat(r, '}') == 0)
        return 0;
    do {
        size_t kl, vl;
        char *k = string(r, &kl);
        char *v = NULL;
        int rc = (!k || eat(r, ':') || !(v = string(r, &vl))) ? -1
                                                               : env_add(a, &n, k, kl, v, vl);
        free(k);
        free(v);
        if (rc)
            return bad(r, "env must map names to strings");
    } while (eat(r, ',') == 0);
    return eat(r, '}') ? bad(r, "env: '}' expected") : 0;
}

static int member(reader *r, init_activation *a)
{
    size_t n;
    char *key = string(r, &n);
    if (!key || eat(r, ':')) {
        free(key);
        return bad(r, "a member name expected");
    }
    int rc = 0;
    ws(r);
    if (strcmp(key, "env") == 0) {
        rc = env_object(r, a);
    } else if (strcmp(key, "workdir") == 0) {
        free(a->workdir);
        a->workdir = string(r, &n);
        if (!a->workdir || memchr(a->workdir, 0, n))
            rc = bad(r, "workdir must be a string");
    } else if (strcmp(key, "egress") == 0) {
        a->egress = (size_t)(r->end - r->p) >= 4 && !memcmp(r->p, "true", 4);
        rc = skip_value(r, 0) ? bad(r, "a value expected") : 0;
    } else {
        rc = skip_value(r, 0) ? bad(r, "a value expected") : 0;
    }
    free(key);
    return rc;
}

int init_activation_parse(const char *json, size_t n, init_activation *a, char *err,
                          size_t errlen)
{
    memset(a, 0, sizeof *a);
    reader r = {.start = json, .p = json, .end = json + n, .err = err, .errlen = errlen};
    int rc = 0;
    if (eat(&r, '{'))
        rc = bad(&r, "JSON object expected");
    else if (eat(&r, '}') != 0) {
        do
            rc = member(&r, a);
        while (rc == 0 && eat(&r, ',') == 0);
        if (rc == 0 && eat(&r, '}'))
            rc = bad(&r, "'}' expected");
    }
    ws(&r);
    if (rc == 0 && r.p != r.end)
        rc = bad(&r, "trailing data");
    if (rc == 0 && !a->env && !(a->env = calloc(1, sizeof *a->env)))
        rc = bad(&r, "out of memory");
    if (rc == 0 && !a->workdir && !(a->workdir = strdup("/workspace")))
        rc = bad(&r, "out of memory");
    if (rc)
        init_activation_cleanup(a);
    return rc;
}

void init_activation_cleanup(init_activation *a)
{
    for (char **e = a->env; e && *e; e++)
        free(*e);
    free(a->env);
    free(a->workdir);
    memset(a, 0, sizeof *a);
}
