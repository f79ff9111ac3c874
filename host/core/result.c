/* result.c — rich results of a RunCode: assembling one result from the
 * context's frames ('b' begin, 'k' chunks and 'r' per representation, 'f'
 * finish; host/runtime/PROTOCOL.md section 4), applying the run's output cap
 * per representation, and sending it as one Result event — with a notice
 * the agent reads when the cap dropped some or all of it.
 *
 * Everything here comes from the sandbox: the host buffers at most what
 * could still be sent (the cap's room, and HOST_RESULT_MAX), counts the rest
 * without keeping it, and only lets printable ASCII into MIME types (a
 * protobuf string must be valid UTF-8). Redaction of granted secrets and the
 * cap itself are output.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

void host_result_cleanup(host_result *res)
{
    for (size_t i = 0; i < res->n_reps; i++)
        free(res->reps[i].data);
    free(res->cur);
    memset(res, 0, sizeof *res);
}

static void begin(host_result *res, int main)
{
    host_result_cleanup(res);
    res->open = 1;
    res->main = main;
}

/* How many more bytes this result may buffer: what the cap has left for
 * the run, less what the result already holds (it is sent only if it fits). */
static size_t room(const host_run *r)
{
    const host_action *a = &r->act;
    uint64_t cap_room = a->output_sent < a->max_output ? a->max_output - a->output_sent : 0;
    size_t budget = cap_room < HOST_RESULT_MAX ? (size_t)cap_room : HOST_RESULT_MAX;
    return r->result.held < budget ? budget - r->result.held : 0;
}

static void drop_cur(host_result *res)
{
    res->held -= res->cur_n;
    free(res->cur);
    res->cur = NULL;
    res->cur_n = res->cur_cap = 0;
}

/* Bytes of the representation being received: kept while they fit, then
 * only counted (so the notice can say how large it was). */
static void take(host_run *r, const uint8_t *p, size_t n)
{
    host_result *res = &r->result;
    res->cur_len += n;
    if (res->cur_over || !n)
        return;
    if (n > room(r)) {
        drop_cur(res);
        res->cur_over = 1;
        return;
    }
    if (res->cur_n + n > res->cur_cap) {
        size_t cap = res->cur_cap ? res->cur_cap : 65536;
        while (cap < res->cur_n + n)
            cap *= 2;
        uint8_t *nb = realloc(res->cur, cap);
        if (!nb) {
            drop_cur(res);
            res->cur_over = 1;
            return;
        }
        res->cur = nb;
        res->cur_cap = cap;
    }
    memcpy(res->cur + res->cur_n, p, n);
    res->cur_n += n;
    res->held += n;
}

static void copy_mime(char *dst, const uint8_t *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < 128; i++)
        dst[k++] = (p[i] > 0x20 && p[i] < 0x7f) ? (char)p[i] : '?';
    dst[k] = '\0';
    if (!k)
        snprintf(dst, 129, "application/octet-stream");
}

/* 'r': mime \0 the last bytes of this representation. */
static void end_rep(host_run *r, const uint8_t *p, size_t n)
{
    host_result *res = &r->result;
    const uint8_t *z = memchr(p, 0, n);
    size_t mlen = z ? (size_t)(z - p) : n;
    const uint8_t *d = z ? z + 1 : p + n;
    take(r, d, (size_t)(p + n - d));
    if (res->n_reps == HOST_RESULT_REPS) {
        res->n_extra++;
        drop_cur(res);
    } else {
        host_rep *rep = &res->reps[res->n_reps++];
        copy_mime(rep->mime, p, mlen);
        rep->len = res->cur_len;
        if (!res->cur_over) {
            /* Kept: its bytes stay counted in `held`. */
            rep->data = res->cur ? res->cur : malloc(1);
            res->cur = NULL;
            res->cur_n = 0;
        }
        drop_cur(res);
    }
    res->cur_cap = res->cur_len = 0;
    res->cur_over = 0;
}

static const char *human(size_t n, char *buf, size_t len)
{
    if (n >= (1u << 20))
        snprintf(buf, len, "%.1f MiB", (double)n / (1 << 20));
    else if (n >= 1024)
        snprintf(buf, len, "%.1f KiB", (double)n / 1024);
    else
        snprintf(buf, len, "%zu bytes", n);
    return buf;
}

static void finish(host_run *r, const host_sandbox *sb)
{
    host_result *res = &r->result;
    host_action *a = &r->act;
    drop_cur(res);   /* a representation without its 'r' is incomplete */
    Sandgate__V1__Representation reps[HOST_RESULT_REPS];
    Sandgate__V1__Representation *rep_ptrs[HOST_RESULT_REPS];
    char *dropped[HOST_RESULT_REPS + 1];
    uint8_t *owned[HOST_RESULT_REPS];
    size_t n_kept = 0, n_dropped = 0, n_owned = 0, sent = 0;
    char dropped_list[512] = "";
    size_t dl = 0;
    for (size_t i = 0; i < res->n_reps; i++) {
        host_rep *rp = &res->reps[i];
        size_t red_n = rp->len;
        uint8_t *red = NULL;
        if (rp->data)
            red = host_redact_all(sb, rp->data, rp->len, &red_n);
        /* All or nothing per representation: half a PNG is no use. */
        uint64_t left = a->output_sent < a->max_output ? a->max_output - a->output_sent : 0;
        /* Redaction may lengthen it a little: keep the event under the limit. */
        int fits = red && red_n <= left && sent + red_n <= HOST_RESULT_MAX;
        if (fits)
            sent += red_n;
        a->output_total += red_n;
        if (fits) {
            a->output_sent += red_n;
            owned[n_owned++] = red;
            Sandgate__V1__Representation *x = &reps[n_kept];
            sandgate__v1__representation__init(x);
            x->mime_type = rp->mime;
            x->data.data = red;
            x->data.len = red_n;
            rep_ptrs[n_kept++] = x;
        } else {
            free(red);
            a->truncated = 1;
            dropped[n_dropped++] = rp->mime;
            char hb[32];
            if (dl < sizeof dropped_list - 1)
                dl += (size_t)snprintf(dropped_list + dl, sizeof dropped_list - dl, "%s%s (%s)",
                                       dl ? ", " : "", rp->mime, human(red_n, hb, sizeof hb));
        }
    }
    if (res->n_extra) {
        a->truncated = 1;
        if (dl < sizeof dropped_list - 1)
            dl += (size_t)snprintf(dropped_list + dl, sizeof dropped_list - dl,
                                   "%s%zu more representations", dl ? ", " : "", res->n_extra);
    }
    if (dl >= sizeof dropped_list)
        dl = sizeof dropped_list - 1;
    if (!res->n_reps && !res->n_extra) {
        host_result_cleanup(res);
        return;
    }

    Sandgate__V1__Result out;
    sandgate__v1__result__init(&out);
    out.n_representations = n_kept;
    out.representations = rep_ptrs;
    out.is_main_result = res->main;
    char notice[768] = "";
    if (n_dropped || res->n_extra) {
        char hb[32];
        r->results_dropped++;
        out.dropped = 1;
        out.n_dropped_mime_types = n_dropped;
        out.dropped_mime_types = dropped;
        snprintf(notice, sizeof notice,
                 n_kept ? "[part of this result was dropped: %s did not fit under the output "
                          "limit of %s for this run; the rest was kept]"
                        : "[result dropped: %s did not fit under the output limit of %s for "
                          "this run; print less or ask for a larger max_output_bytes]",
                 dropped_list, human((size_t)a->max_output, hb, sizeof hb));
        out.notice = notice;
    }
    /* What older clients read: a figure's PNG, else the repr, else the first. */
    Sandgate__V1__Representation *primary = NULL;
    for (size_t i = 0; i < n_kept && !primary; i++)
        if (!strcmp(rep_ptrs[i]->mime_type, "image/png"))
            primary = rep_ptrs[i];
    for (size_t i = 0; i < n_kept && !primary; i++)
        if (!strcmp(rep_ptrs[i]->mime_type, "text/plain"))
            primary = rep_ptrs[i];
    if (!primary && n_kept)
        primary = rep_ptrs[0];
    if (primary) {
        out.mime_type = primary->mime_type;
        out.data = primary->data;
    } else {
        out.mime_type = "text/plain";
        out.data.data = (uint8_t *)notice;
        out.data.len = strlen(notice);
    }
    if (!a->cancelled) {
        Sandgate__V1__RunCodeEvent ev;
        sandgate__v1__run_code_event__init(&ev);
        ev.event_case = SANDGATE__V1__RUN_CODE_EVENT__EVENT_RESULT;
        ev.result = &out;
        rpc_call_send_msg(a->call, &ev.base);
    }
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    host_result_cleanup(res);
}

void host_result_frame(host_run *r, const host_sandbox *sb, const uint8_t *buf, size_t n)
{
    host_result *res = &r->result;
    const uint8_t *p = buf + 1;
    size_t pn = n - 1;
    switch (buf[0]) {
    case 'b':
        if (res->open)
            finish(r, sb);
        begin(res, pn == 4 && !memcmp(p, "main", 4));
        break;
    case 'k':
        if (!res->open)
            begin(res, 0);
        take(r, p, pn);
        break;
    case 'r':
        if (!res->open) {
            /* A lone 'r' is a whole result of one representation. */
            begin(res, 0);
            end_rep(r, p, pn);
            finish(r, sb);
            break;
        }
        end_rep(r, p, pn);
        break;
    case 'f':
        if (res->open)
            finish(r, sb);
        break;
    }
}

void host_result_flush(host_run *r, const host_sandbox *sb)
{
    if (r->result.open)
        finish(r, sb);
}
