/* validate_test.c — table tests of the request field validator
 * (validate.c) under both daemons' rules tables (gateway/rules.c,
 * host/core/rules.c). Generated rows: every string field of every request
 * message, found by walking its descriptor (nested messages, repeated
 * fields, map keys and values), fed a NUL, four kinds of invalid UTF-8, one
 * byte past its limit, and a good value at its limit. Named rows: the cases
 * from the issue and each charset. A failure prints the row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/rules.h"
#include "grpc/health/v1/health.pb-c.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "host/core/rules.h"
#include "policy/policy.h"
#include "rpc/validate.h"

/* ---- building wire bytes ---- */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void put_varint(buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t k = 0;
    do {
        t[k++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, t, k);
}

static void put_ld(buf *b, uint32_t field, const void *d, size_t n)
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, n);
    put(b, d, n);
}

/* ---- the fields of a message, from its descriptor ---- */

#define MAX_STEPS 4

typedef struct field_path {
    const ProtobufCFieldDescriptor *step[MAX_STEPS];   /* borrowed */
    size_t n;
    int map_key;   /* the leaf is a map entry's key (else its value, if in a map) */
} field_path;

static int is_map(const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *d = f->descriptor;
    size_t nl = d ? strlen(d->name) : 0;
    return f->type == PROTOBUF_C_TYPE_MESSAGE && nl > 5 && strcmp(d->name + nl - 5, "Entry") == 0;
}

typedef void (*field_fn)(const rpc_rules *r, const field_path *fp, void *arg);

static void each_string(const rpc_rules *r, const ProtobufCMessageDescriptor *d, field_path *fp,
                        field_fn fn, void *arg)
{
    for (unsigned i = 0; i < d->n_fields && fp->n < MAX_STEPS; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        fp->step[fp->n++] = f;
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            fn(r, fp, arg);
        } else if (is_map(f)) {
            const ProtobufCMessageDescriptor *e = f->descriptor;
            fp->step[fp->n++] = &e->fields[0];
            fp->map_key = 1;
            fn(r, fp, arg);
            fp->map_key = 0;
            fp->n--;
            if (e->fields[1].type == PROTOBUF_C_TYPE_STRING) {
                fp->step[fp->n++] = &e->fields[1];
                fn(r, fp, arg);
                fp->n--;
            }
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            each_string(r, f->descriptor, fp, fn, arg);
        }
        fp->n--;
    }
}

/* The wire bytes of a top message holding only this field = v. */
static buf wire_for(const field_path *fp, const uint8_t *v, size_t vn)
{
    buf cur = {0};
    put_ld(&cur, fp->step[fp->n - 1]->id, v, vn);
    for (size_t i = fp->n - 1; i-- > 0;) {
        buf outer = {0};
        const ProtobufCFieldDescriptor *f = fp->step[i];
        buf inner = {0};
        if (is_map(f)) {   /* the entry's other half */
            if (fp->map_key) {
                put(&inner, cur.p, cur.n);
                put_ld(&inner, 2, "v", 1);
            } else {
                put_ld(&inner, 1, "K", 1);
                put(&inner, cur.p, cur.n);
            }
        } else {
            put(&inner, cur.p, cur.n);
        }
        put_ld(&outer, f->id, inner.p, inner.n);
        free(inner.p);
        free(cur.p);
        cur = outer;
    }
    return cur;
}

/* "request.env.value" (the rules' path) and `request.env["K"]` (shown). */
static void names(const field_path *fp, char *rpath, size_t rcap, char *shown, size_t scap)
{
    rpath[0] = shown[0] = 0;
    for (size_t i = 0; i < fp->n; i++) {
        const ProtobufCFieldDescriptor *f = fp->step[i];
        size_t rl = strlen(rpath), sl = strlen(shown);
        snprintf(rpath + rl, rcap - rl, "%s%s", rl ? "." : "", f->name);
        if (i > 0 && is_map(fp->step[i - 1]))
            continue;   /* key/value: shown on the map's own step */
        if (is_map(f))
            snprintf(shown + sl, scap - sl, "%s%s%s", sl ? "." : "", f->name,
                     fp->map_key ? " key #0" : "[\"K\"]");
        else
            snprintf(shown + sl, scap - sl, "%s%s%s", sl ? "." : "", f->name,
                     f->label == PROTOBUF_C_LABEL_REPEATED ? "[0]" : "");
    }
}

static const rpc_field_rule *rule_of(const rpc_rules *r, const char *rpath)
{
    for (size_t i = 0; i < r->n_fields; i++)
        if (strcmp(r->fields[i].path, rpath) == 0)
            return &r->fields[i];
    return NULL;
}

/* ---- the generated rows ---- */

typedef struct counts {
    int fields, cases;
} counts;

static void expect_refused(const rpc_rules *r, const field_path *fp, const char *what,
                           const uint8_t *v, size_t vn, const char *want, counts *c)
{
    char rpath[192], shown[192], wantmsg[512];
    names(fp, rpath, sizeof rpath, shown, sizeof shown);
    snprintf(wantmsg, sizeof wantmsg, "%s: %s", shown, want);
    buf w = wire_for(fp, v, vn);
    sg_err e = {0};
    int rc = rpc_validate(r, w.p, w.n, &e);
    if (rc != SG_EINVAL || strncmp(e.msg, wantmsg, strlen(wantmsg)) != 0)
        fail_msg("%s %s = %s: got rc %d \"%s\", want \"%s\"", r->desc->name, rpath, what, rc,
                 e.msg, wantmsg);
    /* the decoder itself takes it (that is the bug), the checked decode does not */
    ProtobufCMessage *m = protobuf_c_message_unpack(r->desc, NULL, w.n, w.p);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    assert_null(rpc_unpack_valid(r, w.p, w.n, &e));
    /* never the bad bytes back: only printable ASCII in a message */
    for (const char *p = e.msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            fail_msg("%s %s = %s: message carries byte 0x%02x", r->desc->name, rpath, what,
                     (unsigned char)*p);
    if (strstr(e.msg, "JUNK"))
        fail_msg("%s %s = %s: message echoes the value: %s", r->desc->name, rpath, what, e.msg);
    free(w.p);
    c->cases++;
}

static void expect_ok(const rpc_rules *r, const field_path *fp, const char *what,
                      const uint8_t *v, size_t vn, counts *c)
{
    char rpath[192], shown[192];
    names(fp, rpath, sizeof rpath, shown, sizeof shown);
    buf w = wire_for(fp, v, vn);
    sg_err e = {0};
    if (rpc_validate(r, w.p, w.n, &e) != 0)
        fail_msg("%s %s = %s: refused: %s", r->desc->name, rpath, what, e.msg);
    ProtobufCMessage *m = rpc_unpack_valid(r, w.p, w.n, &e);
    if (!m)
        fail_msg("%s %s = %s: checked decode refused: %s", r->desc->name, rpath, what, e.msg);
    protobuf_c_message_free_unpacked(m, NULL);
    free(w.p);
    c->cases++;
}

static void one_field(const rpc_rules *r, const field_path *fp, void *arg)
{
    counts *c = arg;
    char rpath[192], shown[192];
    names(fp, rpath, sizeof rpath, shown, sizeof shown);
    const rpc_field_rule *fr = rule_of(r, rpath);
    rpc_charset cs = fr ? fr->charset : RPC_CS_TEXT;
    uint32_t max = fr && fr->max_bytes ? fr->max_bytes : r->default_max;
    c->fields++;
    /* a NUL in the middle, after a good prefix (what protobuf-c cuts at) */
    static const uint8_t nul[] = "OK\0JUNK";
    expect_refused(r, fp, "NUL", nul, sizeof nul - 1, "contains a NUL byte", c);
    static const struct {
        const char *what, *v;
    } bad_utf8[] = {{"0xff", "OK\xff"}, {"overlong", "OK\xc0\xaf"},
                    {"surrogate", "OK\xed\xa0\x80"}, {"truncated", "OK\xe2\x82"},
                    {"above U+10FFFF", "OK\xf4\x90\x80\x80"}};
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++)
        expect_refused(r, fp, bad_utf8[i].what, (const uint8_t *)bad_utf8[i].v,
                       strlen(bad_utf8[i].v), "not valid UTF-8", c);
    /* good: a plain value, and one exactly at the limit */
    const char *good = cs == RPC_CS_ENV_NAME ? "OK_1" : cs == RPC_CS_SANDBOX_ID ? "h-0a_" : "ok";
    expect_ok(r, fp, "plain", (const uint8_t *)good, strlen(good), c);
    if (cs == RPC_CS_TEXT || cs == RPC_CS_ID) {
        static const char cafe[] = "caf\xc3\xa9 \xf0\x9f\x98\x80";   /* U+00E9, U+1F600 */
        if (cs == RPC_CS_TEXT)
            expect_ok(r, fp, "non-ASCII", (const uint8_t *)cafe, sizeof cafe - 1, c);
        else
            expect_ok(r, fp, "non-ASCII", (const uint8_t *)"caf\xc3\xa9", 5, c);
    }
    if (max && max != UINT32_MAX) {
        uint8_t *v = malloc((size_t)max + 1);
        memset(v, cs == RPC_CS_ENV_NAME ? 'A' : 'a', (size_t)max + 1);
        expect_ok(r, fp, "at the limit", v, max, c);
        char want[96];
        snprintf(want, sizeof want, "is %u bytes; the limit is %u", max + 1, max);
        expect_refused(r, fp, "one past the limit", v, (size_t)max + 1, want, c);
        free(v);
    }
}

static void every_field(const rpc_rules *(*rules_for)(const ProtobufCMessageDescriptor *),
                        const ProtobufCMessageDescriptor *const *msgs, size_t n, int want_fields)
{
    counts c = {0};
    for (size_t i = 0; i < n; i++) {
        const rpc_rules *r = rules_for(msgs[i]);
        if (!r)
            fail_msg("no rules for %s", msgs[i]->name);
        field_path fp = {0};
        each_string(r, r->desc, &fp, one_field, &c);
    }
    print_message("%d string fields, %d cases\n", c.fields, c.cases);
    assert_int_equal(c.fields, want_fields);
}

/* Every request the gateway serves (sandgate.proto's service). */
static const ProtobufCMessageDescriptor *const public_requests[] = {
    &sandgate__v1__create_sandbox_request__descriptor,
    &sandgate__v1__get_sandbox_request__descriptor,
    &sandgate__v1__list_sandboxes_request__descriptor,
    &sandgate__v1__kill_sandbox_request__descriptor,
    &sandgate__v1__extend_sandbox_request__descriptor,
    &sandgate__v1__create_context_request__descriptor,
    &sandgate__v1__list_contexts_request__descriptor,
    &sandgate__v1__restart_context_request__descriptor,
    &sandgate__v1__delete_context_request__descriptor,
    &sandgate__v1__run_code_request__descriptor,
    &sandgate__v1__exec_request__descriptor,
    &sandgate__v1__write_file_request__descriptor,
    &sandgate__v1__read_file_request__descriptor,
    &sandgate__v1__list_files_request__descriptor,
    &sandgate__v1__stat_file_request__descriptor,
    &sandgate__v1__make_dir_request__descriptor,
    &sandgate__v1__remove_file_request__descriptor,
    &sandgate__v1__rename_file_request__descriptor,
    &sandgate__v1__upload_file_request__descriptor,
    &sandgate__v1__download_file_request__descriptor,
    &sandgate__v1__watch_files_request__descriptor,    &sandgate__v1__list_processes_request__descriptor,
    &sandgate__v1__attach_process_request__descriptor,
    &sandgate__v1__send_input_request__descriptor,
    &sandgate__v1__signal_process_request__descriptor,
    &sandgate__v1__wait_process_request__descriptor,
    &sandgate__v1__resize_pty_request__descriptor,
};

/* Every request the host serves (host.proto's service). */
static const ProtobufCMessageDescriptor *const host_requests[] = {
    &sandgate__v1__host_create_request__descriptor,
    &sandgate__v1__host_sandbox_ref__descriptor,
    &sandgate__v1__host_list_request__descriptor,
    &sandgate__v1__host_extend_request__descriptor,
    &sandgate__v1__create_context_request__descriptor,
    &sandgate__v1__list_contexts_request__descriptor,
    &sandgate__v1__restart_context_request__descriptor,
    &sandgate__v1__delete_context_request__descriptor,
    &sandgate__v1__run_code_request__descriptor,
    &sandgate__v1__exec_request__descriptor,
    &sandgate__v1__write_file_request__descriptor,
    &sandgate__v1__read_file_request__descriptor,
    &sandgate__v1__list_files_request__descriptor,
    &sandgate__v1__stat_file_request__descriptor,
    &sandgate__v1__make_dir_request__descriptor,
    &sandgate__v1__remove_file_request__descriptor,
    &sandgate__v1__rename_file_request__descriptor,
    &sandgate__v1__host_write_at_request__descriptor,
    &sandgate__v1__download_file_request__descriptor,
    &sandgate__v1__watch_files_request__descriptor,    &sandgate__v1__list_processes_request__descriptor,
    &sandgate__v1__attach_process_request__descriptor,
    &sandgate__v1__send_input_request__descriptor,
    &sandgate__v1__signal_process_request__descriptor,
    &sandgate__v1__wait_process_request__descriptor,
    &sandgate__v1__resize_pty_request__descriptor,
};

/* Every method of each service has rules for its input: a new RPC without
 * a row would be refused (fail closed) in production. */
static void test_every_method_has_rules(void **state)
{
    const ProtobufCServiceDescriptor *svc[] = {&sandgate__v1__sandboxes__descriptor,
                                               &sandgate__v1__host__descriptor};
    const rpc_rules *(*find[])(const ProtobufCMessageDescriptor *) = {gw_rules_for,
                                                                      host_rules_for};
    for (int s = 0; s < 2; s++)
        for (unsigned i = 0; i < svc[s]->n_methods; i++)
            if (!find[s](svc[s]->methods[i].input))
                fail_msg("%s/%s: no rules for %s", svc[s]->name, svc[s]->methods[i].name,
                         svc[s]->methods[i].input->name);
    /* and the tables the every-field tests walk are those services' inputs */
    assert_int_equal(svc[0]->n_methods, sizeof public_requests / sizeof public_requests[0]);
}

static void test_gateway_every_field(void **state)
{
    /* create 10 (template user_id task_id env.key env.value egress.host secrets
     * user_token metadata.key metadata.value), get/kill/extend 2 each, list 4
     * (user_id metadata.key metadata.value page_token), context 3, list
     * contexts 2, restart/delete context 3 each, run 4,
     * exec 3, write 3, read 3; list/stat/mkdir/remove/upload/download/watch
     * 3 each, rename 4; list processes 2, attach/input/wait/resize 3 each,
     * signal 4 (signal_name) */
    every_field(gw_rules_for, public_requests, sizeof public_requests / sizeof public_requests[0],
                10 + 2 + 4 + 2 + 2 + 3 + 2 + 3 + 3 + 4 + 3 + 3 + 3 + 7 * 3 + 4 + 2 + 4 * 3 + 4);
}

static void test_host_every_field(void **state)
{
    /* create: its request's 10 (metadata too), owner 3, egress rules 3,
     * secrets 2, sandbox_id, dedupe_key, min_isolation = 21; ref 1, list 5 (tenant_id user_id
     * metadata.key metadata.value after_id), extend 1, then the five public
     * ones, the three context calls (2, 3, 3), the file calls (3 each, rename 4), WriteFileAt 2
     * and the process calls (list 2, attach/input/wait/resize 3 each, signal 4) */
    every_field(host_rules_for, host_requests, sizeof host_requests / sizeof host_requests[0],
                21 + 1 + 5 + 1 + 3 + 2 + 3 + 3 + 4 + 3 + 3 + 3 + 6 * 3 + 4 + 2 + 2 + 4 * 3 + 4);
}

static const rpc_rules *std_rules_for(const ProtobufCMessageDescriptor *d)
{
    return d == rpc_health_request_rules.desc       ? &rpc_health_request_rules
           : d == rpc_reflection_request_rules.desc ? &rpc_reflection_request_rules
                                                    : NULL;
}

static void test_std_every_field(void **state)
{
    /* health: service; reflection: host, file_by_filename,
     * file_containing_symbol, file_containing_extension.containing_type,
     * all_extension_numbers_of_type, list_services */
    static const ProtobufCMessageDescriptor *const std_requests[] = {
        &grpc__health__v1__health_check_request__descriptor,
        &grpc__reflection__v1__server_reflection_request__descriptor};
    every_field(std_rules_for, std_requests, 2, 1 + 6);
}

/* ---- named rows ---- */

typedef struct row {
    const char *name;
    const ProtobufCMessageDescriptor *desc;
    int host;                /* the host's table, else the gateway's */
    const char *field;       /* "a" or "a.b" (nested) or "env:KEY" (a map value) */
    const char *value;
    size_t len;              /* 0 = strlen(value) */
    const char *want;        /* NULL = accepted, else the message's start */
} row;

#define S(lit) lit, sizeof lit - 1

static const row rows[] = {
    {"sandbox id with junk after NUL", &sandgate__v1__get_sandbox_request__descriptor, 0,
     "sandbox_id", S("local-0123\0junk"), "sandbox_id: contains a NUL byte"},
    {"user alice\\0evil", &sandgate__v1__list_sandboxes_request__descriptor, 0, "user_id",
     S("alice\0evil"), "user_id: contains a NUL byte"},
    {"task T\\0a", &sandgate__v1__create_sandbox_request__descriptor, 0, "task_id", S("T\0a"),
     "task_id: contains a NUL byte"},
    {"path a.txt\\0../../x", &sandgate__v1__write_file_request__descriptor, 0, "path",
     S("a.txt\0../../x"), "path: contains a NUL byte"},
    {"env value a\\0b", &sandgate__v1__create_sandbox_request__descriptor, 0, "env:A", S("a\0b"),
     "env[\"A\"]: contains a NUL byte"},
    {"env value invalid UTF-8", &sandgate__v1__create_sandbox_request__descriptor, 0, "env:A",
     S("\xc3("), "env[\"A\"]: not valid UTF-8"},
    {"user_id invalid UTF-8", &sandgate__v1__create_sandbox_request__descriptor, 0, "user_id",
     S("al\xe9"), "user_id: not valid UTF-8"},
    {"user_id with a space", &sandgate__v1__get_sandbox_request__descriptor, 0, "user_id",
     S("a b"), "user_id: has a space or control character"},
    {"user_id with U+0085 (C1 control)", &sandgate__v1__get_sandbox_request__descriptor, 0,
     "user_id", S("a\xc2\x85"), "user_id: has a space or control character"},
    {"user_id with U+200B (zero-width space)", &sandgate__v1__get_sandbox_request__descriptor, 0,
     "user_id", S("ali\xe2\x80\x8b" "ce"), "user_id: has a space or control character"},
    {"task_id with U+202E (bidi override)", &sandgate__v1__create_sandbox_request__descriptor, 0,
     "task_id", S("t\xe2\x80\xae" "1"), "task_id: has a space or control character"},
    {"user_id with U+00A0 (no-break space)", &sandgate__v1__get_sandbox_request__descriptor, 0,
     "user_id", S("a\xc2\xa0" "b"), "user_id: has a space or control character"},
    {"user_id with U+FEFF (BOM)", &sandgate__v1__get_sandbox_request__descriptor, 0, "user_id",
     S("\xef\xbb\xbf" "a"), "user_id: has a space or control character"},
    {"user_id CJK and emoji", &sandgate__v1__get_sandbox_request__descriptor, 0, "user_id",
     S("\xe7\x94\xb0\xe4\xb8\xad\xf0\x9f\x98\x80"), NULL},
    {"user_id with DEL", &sandgate__v1__get_sandbox_request__descriptor, 0, "user_id", S("a\x7f"),
     "user_id: has a space or control character"},
    {"user_id email", &sandgate__v1__get_sandbox_request__descriptor, 0, "user_id",
     S("alice@example.com"), NULL},
    {"user_id non-ASCII", &sandgate__v1__get_sandbox_request__descriptor, 0, "user_id",
     S("j\xc3\xb6rg"), NULL},
    {"sandbox_id upper case", &sandgate__v1__kill_sandbox_request__descriptor, 0, "sandbox_id",
     S("Local-00"), "sandbox_id: may hold only a-z, 0-9, '-' and '_'"},
    {"sandbox_id with a slash", &sandgate__v1__read_file_request__descriptor, 0, "sandbox_id",
     S("local/../x"), "sandbox_id: may hold only"},
    {"env name with '='", &sandgate__v1__create_sandbox_request__descriptor, 0, "env.key",
     S("A=B"), "env key #0: is not a variable name"},
    {"env name starting with a digit", &sandgate__v1__create_sandbox_request__descriptor, 0,
     "env.key", S("1A"), "env key #0: is not a variable name"},
    {"env name empty", &sandgate__v1__create_sandbox_request__descriptor, 0, "env.key", S(""),
     "env key #0: is empty"},
    {"env value with newline and UTF-8", &sandgate__v1__create_sandbox_request__descriptor, 0,
     "env:PEM", S("-----BEGIN-----\n\xc3\xa9\n"), NULL},
    {"env key shown only when plain", &sandgate__v1__create_sandbox_request__descriptor, 0,
     "env:A", S("ok"), NULL},
    {"second secret invalid", &sandgate__v1__create_sandbox_request__descriptor, 0, "secrets2",
     S("\xff"), "secrets[1]: not valid UTF-8"},
    {"egress host NUL", &sandgate__v1__create_sandbox_request__descriptor, 0, "egress.host",
     S("example.com\0.evil"), "egress[0].host: contains a NUL byte"},
    {"context id NUL", &sandgate__v1__run_code_request__descriptor, 0, "context_id",
     S("ctx1\0x"), "context_id: contains a NUL byte"},
    {"code with NUL", &sandgate__v1__run_code_request__descriptor, 0, "code",
     S("print(1)\0import os"), "code: contains a NUL byte"},
    {"code non-ASCII", &sandgate__v1__run_code_request__descriptor, 0, "code",
     S("print('\xe2\x82\xac')"), NULL},
    {"command NUL", &sandgate__v1__exec_request__descriptor, 0, "command", S("ls\0; rm -rf /"),
     "command: contains a NUL byte"},
    {"host: owner user NUL", &sandgate__v1__host_create_request__descriptor, 1, "owner.user_id",
     S("alice\0evil"), "owner.user_id: contains a NUL byte"},
    {"host: request env value", &sandgate__v1__host_create_request__descriptor, 1,
     "request.env:A", S("a\0b"), "request.env[\"A\"]: contains a NUL byte"},
    {"host: tenant in list", &sandgate__v1__host_list_request__descriptor, 1, "tenant_id",
     S("acme\0x"), "tenant_id: contains a NUL byte"},
    {"host: dedupe key with U+001F", &sandgate__v1__host_create_request__descriptor, 1,
     "dedupe_key", S("task\x1f" "acme\x1f" "u\x1f" "t"), NULL},
    {"host: sandbox ref", &sandgate__v1__host_sandbox_ref__descriptor, 1, "sandbox_id",
     S("h1-00\0"), "sandbox_id: contains a NUL byte"},
};

static buf row_wire(const row *r)
{
    const ProtobufCMessageDescriptor *d = r->desc;
    buf w = {0};
    char field[64];
    snprintf(field, sizeof field, "%s", r->field);
    char *dot = strchr(field, '.'), *colon = strchr(field, ':');
    int second = 0;
    size_t fl = strlen(field);
    if (fl && field[fl - 1] == '2' && !dot && !colon) {   /* "secrets2": a second element */
        field[fl - 1] = 0;
        second = 1;
    }
    if (dot && (!colon || dot < colon)) {
        *dot = 0;
        const ProtobufCFieldDescriptor *outer = protobuf_c_message_descriptor_get_field_by_name(d, field);
        assert_non_null(outer);
        row sub = *r;
        sub.desc = outer->descriptor;
        sub.field = r->field + (dot - field) + 1;
        buf in = is_map(outer) ? (buf){0} : row_wire(&sub);
        if (is_map(outer)) {   /* "env.key": the key itself */
            put_ld(&in, 1, r->value, r->len);
            put_ld(&in, 2, "v", 1);
        }
        put_ld(&w, outer->id, in.p, in.n);
        free(in.p);
        return w;
    }
    if (colon) {
        *colon = 0;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, field);
        assert_non_null(f);
        buf e = {0};
        put_ld(&e, 1, colon + 1, strlen(colon + 1));
        put_ld(&e, 2, r->value, r->len);
        put_ld(&w, f->id, e.p, e.n);
        free(e.p);
        return w;
    }
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, field);
    assert_non_null(f);
    if (second)
        put_ld(&w, f->id, "ok", 2);
    put_ld(&w, f->id, r->value, r->len);
    return w;
}

static void test_named_rows(void **state)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        const rpc_rules *rules = r->host ? host_rules_for(r->desc) : gw_rules_for(r->desc);
        assert_non_null(rules);
        buf w = row_wire(r);
        sg_err e = {0};
        int rc = rpc_validate(rules, w.p, w.n, &e);
        if (!r->want && rc != 0)
            fail_msg("row '%s': refused: %s", r->name, e.msg);
        if (r->want && (rc != SG_EINVAL || strncmp(e.msg, r->want, strlen(r->want)) != 0))
            fail_msg("row '%s': got %d \"%s\", want \"%s...\"", r->name, rc, e.msg, r->want);
        free(w.p);
    }
}

static void test_malformed(void **state)
{
    const rpc_rules *r = gw_rules_for(&sandgate__v1__get_sandbox_request__descriptor);
    sg_err e;
    static const uint8_t trunc[] = {0x0a, 0x05, 'a'};       /* length past the end */
    static const uint8_t group[] = {0x0b, 0x0c};            /* a group */
    static const uint8_t zero[] = {0x02, 0x00};             /* field number 0 */
    assert_int_equal(rpc_validate(r, trunc, sizeof trunc, &e), SG_EINVAL);
    assert_int_equal(rpc_validate(r, group, sizeof group, &e), SG_EINVAL);
    assert_int_equal(rpc_validate(r, zero, sizeof zero, &e), SG_EINVAL);
    assert_int_equal(rpc_validate(r, NULL, 0, &e), 0);       /* empty = all defaults */
    static const uint8_t unknown[] = {0xfa, 0x01, 0x01, 0xff};   /* field 31: skipped */
    assert_int_equal(rpc_validate(r, unknown, sizeof unknown, &e), 0);
}

/* ---- env limits ---- */

static Sandgate__V1__CreateSandboxRequest *env_req(size_t n, size_t vlen, char fill)
{
    Sandgate__V1__CreateSandboxRequest *q = calloc(1, sizeof *q);
    sandgate__v1__create_sandbox_request__init(q);
    q->n_env = n;
    q->env = calloc(n + 1, sizeof *q->env);
    for (size_t i = 0; i < n; i++) {
        Sandgate__V1__CreateSandboxRequest__EnvEntry *e = calloc(1, sizeof *e);
        sandgate__v1__create_sandbox_request__env_entry__init(e);
        e->key = malloc(16);
        snprintf(e->key, 16, "V%zu", i);
        e->value = malloc(vlen + 1);
        memset(e->value, fill, vlen);
        e->value[vlen] = 0;
        q->env[i] = e;
    }
    return q;
}

static void free_req(Sandgate__V1__CreateSandboxRequest *q)
{
    for (size_t i = 0; i < q->n_env; i++) {
        free(q->env[i]->key);
        free(q->env[i]->value);
        free(q->env[i]);
    }
    free(q->env);
    free(q);
}

static void test_gateway_env_limits(void **state)
{
    sg_err e;
    Sandgate__V1__CreateSandboxRequest *q = env_req(10, 100, 'x');
    assert_int_equal(gw_check_env(q, 64 << 10, 256, &e), 0);
    assert_int_equal(gw_check_env(q, 64 << 10, 9, &e), SG_EINVAL);
    assert_string_equal(e.msg, "env: 10 variables; the policy limit is 9 (limits.env_entries)");
    /* 10 x (2 + 100) = 1020 bytes */
    assert_int_equal(gw_check_env(q, 1020, 256, &e), 0);
    assert_int_equal(gw_check_env(q, 1019, 256, &e), SG_EINVAL);
    assert_string_equal(e.msg, "env: 1020 bytes (names and values); the policy limit is 1019 "
                               "(limits.env_bytes)");
    free_req(q);
    /* one variable: "V0=" + value + NUL within execve's 128 KiB */
    q = env_req(1, POLICY_ENV_VAR_MAX - 2, 'x');
    assert_int_equal(gw_check_env(q, POLICY_ENV_BYTES_MAX, 256, &e), 0);
    free_req(q);
    q = env_req(1, POLICY_ENV_VAR_MAX - 1, 'x');
    assert_int_equal(gw_check_env(q, POLICY_ENV_BYTES_MAX, 256, &e), SG_EINVAL);
    assert_string_equal(e.msg, "env[\"V0\"]: name and value are 131071 bytes; the limit for one "
                               "variable is 131070");
    free_req(q);
}

static void test_host_create_shape(void **state)
{
    sg_err e;
    Sandgate__V1__HostCreateRequest h;
    Sandgate__V1__Owner o;
    sandgate__v1__host_create_request__init(&h);
    sandgate__v1__owner__init(&o);
    assert_int_equal(host_check_create(&h, &e), SG_EINVAL);   /* no request, no owner */
    h.owner = &o;
    /* 200 KiB: over the ceiling whatever the gateway's policy said */
    Sandgate__V1__CreateSandboxRequest *q = env_req(2, 100 << 10, 'x');
    h.request = q;
    assert_int_equal(host_check_create(&h, &e), SG_EINVAL);
    assert_non_null(strstr(e.msg, "the limit is 131072"));
    free_req(q);
    q = env_req(POLICY_ENV_ENTRIES_MAX + 1, 1, 'x');
    h.request = q;
    assert_int_equal(host_check_create(&h, &e), SG_EINVAL);
    assert_non_null(strstr(e.msg, "1025 variables"));
    free_req(q);
    /* 100 KiB of control characters: within the raw ceiling, 6x encoded */
    q = env_req(1, 100 << 10, '\x01');
    h.request = q;
    assert_int_equal(host_check_create(&h, &e), SG_EINVAL);
    assert_non_null(strstr(e.msg, "once encoded"));
    free_req(q);
    q = env_req(1, POLICY_ENV_VAR_MAX - 1, 'x');
    h.request = q;
    assert_int_equal(host_check_create(&h, &e), SG_EINVAL);
    assert_non_null(strstr(e.msg, "the limit for one variable is 131070"));
    free_req(q);
    /* the same size of plain text fits */
    q = env_req(1, 100 << 10, 'x');
    h.request = q;
    assert_int_equal(host_check_create(&h, &e), 0);
    free_req(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_method_has_rules),
        cmocka_unit_test(test_gateway_every_field), cmocka_unit_test(test_host_every_field),
        cmocka_unit_test(test_std_every_field),
        cmocka_unit_test(test_named_rows),          cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_gateway_env_limits),  cmocka_unit_test(test_host_create_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
