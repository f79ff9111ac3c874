/* validate.c — the descriptor-driven check of a request's string fields on
 * its wire bytes (see validate.h for the rules). Owns the wire walk, UTF-8
 * and charset checks and the field names in messages; the tables of which
 * field gets which rule belong to the daemons. */
#include <stdio.h>
#include <string.h>

#include "rpc/validate.h"

#define PATH_MAX_CHARS 192
#define MAX_DEPTH 8   /* our requests nest 3 deep; deeper is not ours */

typedef struct walk {
    const rpc_rules *rules;
    sg_err *err;
    char rpath[PATH_MAX_CHARS];   /* see rpath_push */
    size_t rlen;
} walk;

/* ---- bytes ---- */

/* Length of the valid UTF-8 sequence at s (inside n bytes) and its code
 * point, or 0 if it is not one (RFC 3629). */
static size_t utf8_seq(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t b = s[0];
    size_t len;
    uint32_t min, c;
    if (b < 0x80) {
        *cp = b;
        return 1;
    } else if (b >= 0xc2 && b <= 0xdf) {
        len = 2, min = 0x80, c = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        len = 3, min = 0x800, c = b & 0x0f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        len = 4, min = 0x10000, c = b & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

/* A non-ASCII code point an id may not hold: C1 controls, Unicode spaces
 * and the invisible format characters (zero-width, bidi overrides, BOM)
 * that would make two ids look the same in a log or a console. */
static int id_invisible(uint32_t cp)
{
    return cp <= 0x9f || cp == 0xa0 || cp == 0xad || cp == 0x1680 || cp == 0x180e ||
           (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) ||
           (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 || cp == 0xfeff ||
           (cp >= 0xfff9 && cp <= 0xfffb);
}

/* What is wrong with s[0..n) under cs, or NULL. */
static const char *string_problem(rpc_charset cs, const uint8_t *s, size_t n)
{
    if (memchr(s, 0, n))
        return "contains a NUL byte";
    /* One pass for UTF-8 and the id rule; bad UTF-8 is reported first. */
    int id = cs == RPC_CS_ID, bad_id = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {   /* ASCII, the common case */
            bad_id |= id && (s[i] <= 0x20 || s[i] == 0x7f);
            i++;
            continue;
        }
        uint32_t cp;
        size_t k = utf8_seq(s + i, n - i, &cp);
        if (!k)
            return "not valid UTF-8";
        bad_id |= id && id_invisible(cp);
        i += k;
    }
    switch (cs) {
    case RPC_CS_TEXT:
        return NULL;
    case RPC_CS_ID:
        return bad_id ? "has a space or control character" : NULL;
    case RPC_CS_SANDBOX_ID:
        for (size_t i = 0; i < n; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
                  s[i] == '_'))
                return "may hold only a-z, 0-9, '-' and '_'";
        return NULL;
    case RPC_CS_ENV_NAME:
        if (n == 0)
            return "is empty; a variable name is required";
        for (size_t i = 0; i < n; i++)
            if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
                  (i > 0 && s[i] >= '0' && s[i] <= '9')))
                return "is not a variable name ([A-Za-z_][A-Za-z0-9_]*)";
        return NULL;
    case RPC_CS_LABEL_KEY:
        if (n == 0)
            return "is empty; a label key is required";
        for (size_t i = 0; i < n; i++)
            if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                  (s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '_' || s[i] == '/' ||
                  s[i] == '-'))
                return "may hold only A-Z, a-z, 0-9, '.', '_', '/' and '-'";
        return NULL;
    }
    return "has an unknown charset rule";
}

int rpc_charset_ok(rpc_charset cs, const uint8_t *s, size_t n)
{
    return string_problem(cs, s, n) == NULL;
}

/* ---- wire ---- */

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* One field at *p: its number, wire type and, for length-delimited ones,
 * the payload. -1 if malformed. */
static int next_field(const uint8_t **p, const uint8_t *end, uint32_t *num, int *wt,
                      const uint8_t **val, size_t *vlen)
{
    uint64_t key, v;
    if (varint(p, end, &key) != 0 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return -1;
    *num = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0:
        return varint(p, end, &v);
    case 1:
    case 5: {
        size_t w = *wt == 1 ? 8 : 4;
        if ((size_t)(end - *p) < w)
            return -1;
        *p += w;
        return 0;
    }
    case 2:
        if (varint(p, end, &v) != 0 || v > (uint64_t)(end - *p))
            return -1;
        *val = *p;
        *vlen = (size_t)v;
        *p += v;
        return 0;
    default:
        return -1;   /* groups: never in our protos */
    }
}

static int malformed(walk *w)
{
    return sg_err_set(w->err, SG_EINVAL, "request is not a valid %s message", w->rules->desc->name);
}

static const rpc_field_rule *rule_for(const walk *w)
{
    for (size_t i = 0; i < w->rules->n_fields; i++)
        if (strcmp(w->rules->fields[i].path, w->rpath) == 0)
            return &w->rules->fields[i];
    return NULL;
}

/* The rules' name of where the walk is ("request.env.value"), kept as the
 * walk goes: entering a field appends ".name", leaving restores. A path too
 * long for the buffer matches no rule (the table's default applies). */
static size_t rpath_push(walk *w, const char *name)
{
    size_t saved = w->rlen, nl = strlen(name);
    if (w->rlen + nl + 2 < sizeof w->rpath) {
        if (w->rlen)
            w->rpath[w->rlen++] = '.';
        memcpy(w->rpath + w->rlen, name, nl);
        w->rlen += nl;
    } else if (w->rlen + 2 < sizeof w->rpath) {
        w->rpath[w->rlen++] = '\x01';
    }
    w->rpath[w->rlen] = 0;
    return saved;
}

static void rpath_pop(walk *w, size_t saved)
{
    w->rlen = saved;
    w->rpath[saved] = 0;
}

/* What is wrong with the string at the walk's place, into why; 0 if none. */
static int string_fails(walk *w, const uint8_t *s, size_t n, char *why, size_t cap)
{
    const rpc_field_rule *fr = rule_for(w);
    rpc_charset cs = fr ? fr->charset : RPC_CS_TEXT;
    uint32_t max = fr && fr->max_bytes ? fr->max_bytes : w->rules->default_max;
    const char *bad = string_problem(cs, s, n);
    if (bad)
        snprintf(why, cap, "%s", bad);
    else if (max && n > max)
        snprintf(why, cap, "is %zu bytes; the limit is %u", n, max);
    else
        return 0;
    return 1;
}

/* The caller's name of a field ("egress[1].host", "env[\"A\"]"): one frame
 * per field entered, rendered only when a message needs it. */
typedef enum {
    F_PLAIN,      /* name */
    F_INDEX,      /* name[i]: a repeated field's element */
    F_MAP_KEY,    /* name key #i */
    F_MAP_NAMED,  /* name["key"]: a map value, its key shown */
    F_MAP_VALUE,  /* name value #i: a map value whose key is not shown */
} frame_kind;

typedef struct frame {
    const struct frame *up;   /* borrowed; NULL at the top message */
    const char *name;         /* borrowed: the field's name */
    frame_kind kind;
    uint32_t index;
    const uint8_t *key;       /* borrowed, F_MAP_NAMED: klen printable bytes */
    size_t klen;
} frame;

static void render(const frame *f, char *out, size_t cap, size_t *n)
{
    if (!f)
        return;
    render(f->up, out, cap, n);
    int k = 0;
    if (*n + 1 >= cap)
        return;
    char *o = out + *n;
    size_t room = cap - *n;
    const char *dot = *n ? "." : "";
    switch (f->kind) {
    case F_PLAIN: k = snprintf(o, room, "%s%s", dot, f->name); break;
    case F_INDEX: k = snprintf(o, room, "%s%s[%u]", dot, f->name, f->index); break;
    case F_MAP_KEY: k = snprintf(o, room, "%s%s key #%u", dot, f->name, f->index); break;
    case F_MAP_NAMED:
        k = snprintf(o, room, "%s%s[\"%.*s\"]", dot, f->name, (int)f->klen, (const char *)f->key);
        break;
    case F_MAP_VALUE: k = snprintf(o, room, "%s%s value #%u", dot, f->name, f->index); break;
    }
    if (k > 0)
        *n = *n + (size_t)k < cap ? *n + (size_t)k : cap - 1;
}

static int fail_at(walk *w, const frame *f, const char *why)
{
    char shown[PATH_MAX_CHARS + 96] = "";
    size_t n = 0;
    render(f, shown, sizeof shown, &n);
    return sg_err_set(w->err, SG_EINVAL, "%s: %s", shown, why);
}

/* A map entry has exactly key = 1 and value = 2 (protobuf-c's generated
 * "<Name>Entry" message). */
static int is_map_entry(const ProtobufCMessageDescriptor *d)
{
    size_t nl = strlen(d->name);
    return d->n_fields == 2 && nl > 5 && strcmp(d->name + nl - 5, "Entry") == 0 &&
           d->fields[0].id == 1 && strcmp(d->fields[0].name, "key") == 0 &&
           d->fields[1].id == 2 && strcmp(d->fields[1].name, "value") == 0;
}

static int walk_message(walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                        size_t len, const frame *up, int depth);

/* A map's entry (map field `name`, entry #index, under up): the key first
 * (its own rule), then the value, named by the key when the key may be
 * shown, else by its position. */
static int walk_map_entry(walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                          size_t len, const frame *up, const char *name, uint32_t index,
                          int depth)
{
    const uint8_t *p = buf, *end = buf + len, *key = (const uint8_t *)"", *val = NULL;
    size_t klen = 0, vlen = 0;
    const ProtobufCFieldDescriptor *kf = &d->fields[0], *vf = &d->fields[1];
    while (p < end) {
        uint32_t num;
        int wt;
        const uint8_t *v = NULL;
        size_t vl = 0;
        if (next_field(&p, end, &num, &wt, &v, &vl) != 0)
            return malformed(w);
        if (wt != 2)
            continue;
        if (num == 1 && kf->type == PROTOBUF_C_TYPE_STRING)
            key = v, klen = vl;
        else if (num == 2)
            val = v, vlen = vl;
    }
    char why[96];
    if (kf->type == PROTOBUF_C_TYPE_STRING) {
        size_t saved = rpath_push(w, "key");
        int bad = string_fails(w, key, klen, why, sizeof why);
        rpath_pop(w, saved);
        if (bad) {
            frame kfr = {up, name, F_MAP_KEY, index, NULL, 0};
            return fail_at(w, &kfr, why);
        }
    }
    if (!val)
        return 0;
    /* Shown only when it is short and plain ASCII: the message must never
     * carry bytes a caller could use to forge log lines or terminal codes. */
    int plain = kf->type == PROTOBUF_C_TYPE_STRING && klen <= 64;
    for (size_t i = 0; plain && i < klen; i++)
        plain = key[i] >= 0x20 && key[i] < 0x7f && key[i] != '"' && key[i] != '\\';
    frame vfr = {up, name, plain ? F_MAP_NAMED : F_MAP_VALUE, index, key, klen};
    size_t saved = rpath_push(w, "value");
    int rc = 0;
    if (vf->type == PROTOBUF_C_TYPE_STRING) {
        if (string_fails(w, val, vlen, why, sizeof why))
            rc = fail_at(w, &vfr, why);
    } else if (vf->type == PROTOBUF_C_TYPE_MESSAGE) {
        rc = walk_message(w, vf->descriptor, val, vlen, &vfr, depth + 1);
    }
    rpath_pop(w, saved);
    return rc;
}

static int walk_message(walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *buf,
                        size_t len, const frame *up, int depth)
{
    if (depth > MAX_DEPTH)
        return malformed(w);
    uint32_t seen[64] = {0};   /* occurrences per field index, for "[i]" */
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        uint32_t num;
        int wt;
        const uint8_t *v = NULL;
        size_t vl = 0;
        if (next_field(&p, end, &num, &wt, &v, &vl) != 0)
            return malformed(w);
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, num);
        if (!f || wt != 2)
            continue;   /* unknown fields and scalars carry no strings we read */
        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        size_t fi = (size_t)(f - d->fields);
        uint32_t index = fi < 64 ? seen[fi]++ : 0;
        int map = f->type == PROTOBUF_C_TYPE_MESSAGE && is_map_entry(f->descriptor);
        frame fr = {up, f->name,
                    f->label == PROTOBUF_C_LABEL_REPEATED && !map ? F_INDEX : F_PLAIN, index,
                    NULL, 0};
        size_t saved = rpath_push(w, f->name);
        int rc = 0;
        char why[96];
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            if (string_fails(w, v, vl, why, sizeof why))
                rc = fail_at(w, &fr, why);
        } else if (map) {
            rc = walk_map_entry(w, f->descriptor, v, vl, up, f->name, index, depth + 1);
        } else {
            rc = walk_message(w, f->descriptor, v, vl, &fr, depth + 1);
        }
        rpath_pop(w, saved);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int rpc_validate(const rpc_rules *r, const uint8_t *buf, size_t len, sg_err *err)
{
    sg_err local;
    walk w = {.rules = r, .err = err ? err : &local, .rlen = 0};
    w.rpath[0] = 0;
    return walk_message(&w, r->desc, buf ? buf : (const uint8_t *)"", len, NULL, 0);
}

ProtobufCMessage *rpc_unpack_valid(const rpc_rules *r, const uint8_t *buf, size_t len,
                                   sg_err *err)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(r->desc, NULL, len, buf);
    if (!m) {
        sg_err_set(err, SG_EINVAL, "request is not a valid %s message", r->desc->name);
        return NULL;
    }
    if (rpc_validate(r, buf, len, err) != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

const rpc_rules *rpc_rules_find(const rpc_rules *table, size_t n,
                                const ProtobufCMessageDescriptor *d)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].desc == d)
            return &table[i];
    return NULL;
}
