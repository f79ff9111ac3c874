/* json.c — the agent's control messages: one flat JSON object each.
 *
 * Owns: parsing `{"op": "ctx", "id": "c1", "code": 0, ...}` (string,
 * integer, true/false/null values; arrays and nested objects are rejected,
 * as no agent -> shim message has them) and quoting strings for the
 * messages the shim builds. The text is untrusted (it comes from inside
 * gVisor): every length is bounded and any deviation is an error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

typedef struct rd {
    const char *s, *p, *end;
} rd;

static void ws(rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int hex4(rd *r, unsigned *v)
{
    if (r->end - r->p < 4)
        return -1;
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(*r->p++);
        if (h < 0)
            return -1;
        *v = (*v << 4) | (unsigned)h;
    }
    return 0;
}

static size_t utf8_put(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at r->p (after its opening quote) into a malloc'd buffer. An
 * unescaped string is never longer than its source, so n bytes suffice. */
static int string(rd *r, char **out, size_t *out_len)
{
    char *buf = malloc((size_t)(r->end - r->p) + 1), *o = buf;
    if (!buf)
        return -1;
    while (r->p < r->end && *r->p != '"') {
        unsigned char ch = (unsigned char)*r->p++;
        if (ch < 0x20)
            goto bad;
        if (ch != '\\') {
            *o++ = (char)ch;
            continue;
        }
        if (r->p >= r->end)
            goto bad;
        char e = *r->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (simple && e) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            *o++ = map[simple - "\"\\/bfnrt"];
            continue;
        }
        unsigned cp, lo;
        if (e != 'u' || hex4(r, &cp) != 0)
            goto bad;
        if (cp >= 0xd800 && cp < 0xdc00) {
            if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u')
                goto bad;
            r->p += 2;
            if (hex4(r, &lo) != 0 || lo < 0xdc00 || lo >= 0xe000)
                goto bad;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp < 0xe000) {
            goto bad;
        }
        /* 6 source bytes (\uXXXX) give at most 3; a pair's 12 give 4. */
        o += utf8_put(o, cp);
    }
    if (r->p >= r->end)
        goto bad;
    r->p++;
    *o = 0;
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
bad:
    free(buf);
    return -1;
}

static int fail(char *err, size_t errlen, const rd *r, const char *what)
{
    snprintf(err, errlen, "control message: %s at byte %zu", what, (size_t)(r->p - r->s));
    return -1;
}

int shim_json_parse(const char *s, size_t n, shim_json *j, char *err, size_t errlen)
{
    rd r = {.s = s, .p = s, .end = s + n};
    memset(j, 0, sizeof *j);
    ws(&r);
    if (r.p >= r.end || *r.p++ != '{')
        return fail(err, errlen, &r, "not an object");
    ws(&r);
    if (r.p < r.end && *r.p == '}') {
        r.p++;
        goto end;
    }
    for (;;) {
        ws(&r);
        if (r.p >= r.end || *r.p++ != '"')
            goto bad_key;
        char *key;
        size_t klen;
        if (string(&r, &key, &klen) != 0)
            goto bad_key;
        if (klen == 0 || klen >= sizeof j->f[0].key || memchr(key, 0, klen) ||
            j->n == SHIM_JSON_FIELDS) {
            free(key);
            shim_json_cleanup(j);
            return fail(err, errlen, &r, "bad or long key, or too many keys");
        }
        for (size_t i = 0; i < j->n; i++)
            if (strcmp(j->f[i].key, key) == 0) {
                free(key);
                shim_json_cleanup(j);
                return fail(err, errlen, &r, "repeated key");
            }
        memcpy(j->f[j->n].key, key, klen + 1);
        free(key);
        ws(&r);
        if (r.p >= r.end || *r.p++ != ':')
            goto bad_value;
        ws(&r);
        if (r.p >= r.end)
            goto bad_value;
        typeof(j->f[0]) *f = &j->f[j->n];
        if (*r.p == '"') {
            r.p++;
            if (string(&r, &f->str, &f->str_len) != 0)
                goto bad_value;
        } else if (*r.p == '-' || (*r.p >= '0' && *r.p <= '9')) {
            int neg = *r.p == '-';
            r.p += neg;
            long long v = 0;
            int digits = 0;
            while (r.p < r.end && *r.p >= '0' && *r.p <= '9') {
                if (++digits > 15)
                    goto bad_value;   /* control numbers are small */
                v = v * 10 + (*r.p++ - '0');
            }
            if (!digits)
                goto bad_value;
            f->num = neg ? -v : v;
            f->is_num = true;
        } else if (r.end - r.p >= 4 && memcmp(r.p, "true", 4) == 0) {
            r.p += 4;
            f->is_bool = true;
            f->num = 1;
        } else if (r.end - r.p >= 5 && memcmp(r.p, "false", 5) == 0) {
            r.p += 5;
            f->is_bool = true;
        } else if (r.end - r.p >= 4 && memcmp(r.p, "null", 4) == 0) {
            r.p += 4;
        } else {
            goto bad_value;
        }
        j->n++;
        ws(&r);
        if (r.p < r.end && *r.p == ',') {
            r.p++;
            continue;
        }
        if (r.p < r.end && *r.p == '}') {
            r.p++;
            break;
        }
        shim_json_cleanup(j);
        return fail(err, errlen, &r, "expected , or }");
    }
end:
    ws(&r);
    if (r.p != r.end) {
        shim_json_cleanup(j);
        return fail(err, errlen, &r, "bytes after the object");
    }
    return 0;
bad_key:
    shim_json_cleanup(j);
    return fail(err, errlen, &r, "bad key");
bad_value:
    shim_json_cleanup(j);
    return fail(err, errlen, &r, "bad value (strings, integers, true, false, null only)");
}

void shim_json_cleanup(shim_json *j)
{
    for (size_t i = 0; i < SHIM_JSON_FIELDS; i++) {
        free(j->f[i].str);
        j->f[i].str = NULL;
    }
    j->n = 0;
}

const char *shim_json_str(const shim_json *j, const char *key)
{
    for (size_t i = 0; i < j->n; i++)
        if (j->f[i].str && strcmp(j->f[i].key, key) == 0)
            return j->f[i].str;
    return NULL;
}

bool shim_json_num(const shim_json *j, const char *key, long long *v)
{
    for (size_t i = 0; i < j->n; i++)
        if (j->f[i].is_num && strcmp(j->f[i].key, key) == 0) {
            *v = j->f[i].num;
            return true;
        }
    return false;
}

void shim_json_quote(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n * 6 + 3 > *cap) {
        *cap = (*len + n * 6 + 3) * 2;
        *buf = realloc(*buf, *cap);
    }
    char *o = *buf + *len;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *o++ = '\\';
            *o++ = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            o += sprintf(o, "\\u%04x", ch);
        } else {
            *o++ = (char)ch;
        }
    }
    *o++ = '"';
    *o = 0;
    *len = (size_t)(o - *buf);
}
