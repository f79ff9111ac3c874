/* output.c — what leaves a sandbox on a RunCode or Exec stream: the
 * per-action output cap (cut, counted, and reported in the last event), and
 * redaction of the secrets granted to the sandbox, including a value split
 * across two chunks (the tail that could start one is held back until the
 * next chunk or the end). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

void host_action_init(host_action *a, rpc_call *call, uint64_t max_output, uint32_t timeout_s)
{
    memset(a, 0, sizeof *a);
    a->call = rpc_call_ref(call);
    a->max_output = max_output ? max_output : 64 * 1024;
    a->started_us = host_now_us();
    if (timeout_s)
        a->deadline_us = a->started_us + (int64_t)timeout_s * 1000000;
    /* The client's own deadline bounds the action too. */
    double left = rpc_deadline_left(rpc_call_deadline(call));
    if (left < 1e9) {
        int64_t d = a->started_us + (int64_t)(left * 1e6);
        if (!a->deadline_us || d < a->deadline_us)
            a->deadline_us = d;
    }
}

size_t host_action_admit(host_action *a, size_t len)
{
    a->output_total += len;
    if (a->output_sent >= a->max_output) {
        if (len)
            a->truncated = 1;
        return 0;
    }
    uint64_t room = a->max_output - a->output_sent;
    size_t ok = len <= room ? len : (size_t)room;
    if (ok < len)
        a->truncated = 1;
    a->output_sent += ok;
    return ok;
}

void host_action_release(host_action *a)
{
    if (a->call)
        rpc_call_unref(a->call);
    a->call = NULL;
    free(a->out.hold);
    free(a->err.hold);
    a->out.hold = a->err.hold = NULL;
    a->out.n = a->err.n = 0;
}

void host_secrets_free(host_sandbox *sb)
{
    for (size_t i = 0; i < sb->n_secrets; i++) {
        explicit_bzero(sb->secrets[i].value, sb->secrets[i].len);
        free(sb->secrets[i].value);
        free(sb->secrets[i].name);
    }
    free(sb->secrets);
    sb->secrets = NULL;
    sb->n_secrets = 0;
}

/* First secret occurrence in buf at or after `from`; *which gets its index. */
static const uint8_t *find_secret(const host_sandbox *sb, const uint8_t *buf, size_t n,
                                  size_t from, size_t *which)
{
    const uint8_t *best = NULL;
    for (size_t i = 0; i < sb->n_secrets; i++) {
        const host_secret *s = &sb->secrets[i];
        if (s->len > n - from)
            continue;
        const uint8_t *p = memmem(buf + from, n - from, s->value, s->len);
        if (p && (!best || p < best)) {
            best = p;
            *which = i;
        }
    }
    return best;
}

/* Replace every whole occurrence; *safe_end is where a partial match could
 * still begin (everything before it is final). */
static uint8_t *redact(const host_sandbox *sb, const uint8_t *buf, size_t n, size_t *out_n,
                       size_t *consumed, int final)
{
    size_t cap = n + 64, len = 0, pos = 0;
    uint8_t *out = malloc(cap);
    size_t which;
    const uint8_t *hit;
    while ((hit = find_secret(sb, buf, n, pos, &which))) {
        size_t before = (size_t)(hit - buf) - pos;
        char tag[160];
        int tl = snprintf(tag, sizeof tag, "[REDACTED:%s]", sb->secrets[which].name);
        if (len + before + (size_t)tl > cap)
            out = realloc(out, cap = (len + before + (size_t)tl) * 2);
        memcpy(out + len, buf + pos, before);
        len += before;
        memcpy(out + len, tag, (size_t)tl);
        len += (size_t)tl;
        pos = (size_t)(hit - buf) + sb->secrets[which].len;
    }
    size_t keep = 0;
    if (!final && sb->secret_max > 1) {
        keep = sb->secret_max - 1;
        if (keep > n - pos)
            keep = n - pos;
    }
    size_t rest = n - pos - keep;
    if (len + rest > cap)
        out = realloc(out, cap = len + rest + 1);
    memcpy(out + len, buf + pos, rest);
    len += rest;
    *consumed = pos + rest;
    *out_n = len;
    return out;
}

uint8_t *host_redact_all(const host_sandbox *sb, const uint8_t *data, size_t len, size_t *out_len)
{
    size_t consumed;
    return redact(sb, data, len, out_len, &consumed, 1);
}

static void send_chunk(host_action *a, int exec, int is_err, const uint8_t *data, size_t len)
{
    size_t ok = host_action_admit(a, len);
    if (!ok || a->cancelled)
        return;
    Sandgate__V1__OutputChunk chunk;
    sandgate__v1__output_chunk__init(&chunk);
    chunk.data.data = (uint8_t *)data;
    chunk.data.len = ok;
    if (exec) {
        Sandgate__V1__ExecEvent ev;
        sandgate__v1__exec_event__init(&ev);
        ev.event_case = is_err ? SANDGATE__V1__EXEC_EVENT__EVENT_STDERR
                               : SANDGATE__V1__EXEC_EVENT__EVENT_STDOUT;
        if (is_err)
            ev.stderr = &chunk;
        else
            ev.stdout = &chunk;
        rpc_call_send_msg(a->call, &ev.base);
    } else {
        Sandgate__V1__RunCodeEvent ev;
        sandgate__v1__run_code_event__init(&ev);
        ev.event_case = is_err ? SANDGATE__V1__RUN_CODE_EVENT__EVENT_STDERR
                               : SANDGATE__V1__RUN_CODE_EVENT__EVENT_STDOUT;
        if (is_err)
            ev.stderr = &chunk;
        else
            ev.stdout = &chunk;
        rpc_call_send_msg(a->call, &ev.base);
    }
}

uint8_t *host_redact_stream(const host_sandbox *sb, host_stream *st, const uint8_t *data,
                            size_t len, int final, size_t *out_n)
{
    size_t n = st->n + len;
    uint8_t *buf = malloc(n ? n : 1);
    if (st->n)
        memcpy(buf, st->hold, st->n);
    if (len)
        memcpy(buf + st->n, data, len);
    size_t consumed;
    uint8_t *out = redact(sb, buf, n, out_n, &consumed, final);
    free(st->hold);
    st->n = n - consumed;
    st->hold = st->n ? malloc(st->n) : NULL;
    if (st->n)
        memcpy(st->hold, buf + consumed, st->n);
    explicit_bzero(buf, n);
    free(buf);
    return out;
}

void host_action_output(host_action *a, const host_sandbox *sb, int exec, int is_err,
                        const uint8_t *data, size_t len, int final)
{
    if (!a->call)
        return;
    if (sb->n_secrets == 0) {
        if (len)
            send_chunk(a, exec, is_err, data, len);
        return;
    }
    size_t out_n;
    uint8_t *out = host_redact_stream(sb, is_err ? &a->err : &a->out, data, len, final, &out_n);
    if (out_n)
        send_chunk(a, exec, is_err, out, out_n);
    free(out);
}
