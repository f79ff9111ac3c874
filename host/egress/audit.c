/* audit.c — the egress audit record: one JSON line per decision
 * (egress_audit_json) and the report of a connection's decision, once, to
 * the proxy's on_audit callback. What is decided, and when a connection
 * ends, is the other files' business. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "host/egress/proxy_internal.h"

static size_t json_str(char *b, size_t cap, size_t n, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (n < cap)
        b[n] = '"';
    n++;
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7] = {0};
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
        } else {
            esc[0] = (char)c;
        }
        for (char *e = esc; *e; e++, n++)
            if (n < cap)
                b[n] = *e;
    }
    if (n < cap)
        b[n] = '"';
    return n + 1;
}

size_t egress_audit_json(const egress_audit *a, char *b, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    size_t n = (size_t)snprintf(b, cap, "{\"time_ms\":%lld,\"event\":\"egress\",\"sandbox\":",
                                (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    n = json_str(b, cap, n, a->sandbox);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"kind\":");
    n = json_str(b, cap, n, a->kind);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"host\":");
    n = json_str(b, cap, n, a->host);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"port\":%u,\"ip\":",
                          a->port);
    n = json_str(b, cap, n, a->ip);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0,
                          ",\"decision\":\"%s\",\"rule\":", a->allow ? "allow" : "deny");
    n = json_str(b, cap, n, a->rule);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0, ",\"reason\":");
    n = json_str(b, cap, n, a->reason);
    n += (size_t)snprintf(n < cap ? b + n : NULL, n < cap ? cap - n : 0,
                          ",\"bytes_up\":%llu,\"bytes_down\":%llu,\"bytes\":%llu}\n",
                          (unsigned long long)a->bytes_up, (unsigned long long)a->bytes_down,
                          (unsigned long long)(a->bytes_up + a->bytes_down));
    if (n >= cap && cap >= 2) {   /* cut: still one line */
        b[cap - 2] = '\n';
        b[cap - 1] = 0;
        return cap - 1;
    }
    return n;
}

void eg_audit_conn(conn *c)
{
    if (c->audited || !c->decided)
        return;
    c->audited = 1;
    egress_proxy *p = c->sb->p;
    if (!p->o.on_audit)
        return;
    egress_audit a = {.sandbox = c->sb->id,
                      .kind = c->req.kind == EG_REQ_CONNECT ? "connect" : "http",
                      .host = c->req.host, .port = c->req.port, .ip = c->ip,
                      .allow = c->dec.allow, .rule = c->dec.rule, .reason = c->dec.reason,
                      .bytes_up = c->up, .bytes_down = c->down};
    p->o.on_audit(p->o.audit_arg, &a);
}
