/* log.c — JSON log lines (log.h). Each line is built in a buffer and
 * written with one write(2), so lines from many threads never interleave
 * on a pipe or an O_APPEND file. Control characters and non-ASCII bytes in
 * messages are escaped, so a log line is always valid JSON whatever a
 * message carries. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define LINE_MAX_BYTES 4096

static const char *daemon_name = "sandgate";
static sg_log_level min_level = SG_LOG_INFO;
/* Copies, not pointers: a callback sets the context of the call it
 * continues and may return after that call is freed; a later line on the
 * same thread (grpc's own, say) must not read freed memory. */
static __thread char ctx_request_id[SG_LOG_ID_MAX], ctx_traceparent[SG_LOG_ID_MAX];

void sg_log_init(const char *daemon, sg_log_level min)
{
    daemon_name = daemon;
    min_level = min;
}

int sg_log_level_parse(const char *s)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int sg_log_enabled(sg_log_level level) { return level >= min_level; }

static void copy_ctx(char *dst, const char *src)
{
    size_t n = src ? strnlen(src, SG_LOG_ID_MAX - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = 0;
}

void sg_log_set_context(const char *request_id, const char *traceparent)
{
    copy_ctx(ctx_request_id, request_id);
    copy_ctx(ctx_traceparent, traceparent);
}

const char *sg_log_request_id(void) { return ctx_request_id; }

size_t sg_json_escape(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (!cap)
        return 0;
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7] = {0};
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
        } else if (c == '\n') {
            memcpy(esc, "\\n", 2);
        } else if (c < 0x20 || c >= 0x7f) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
        } else {
            esc[0] = (char)c;
        }
        size_t k = strlen(esc);
        if (n + k >= cap)
            break;
        memcpy(out + n, esc, k);
        n += k;
    }
    out[n] = 0;
    return n;
}

static void vlog(const char *rid, const char *tp, sg_log_level level, const char *fmt,
                 va_list ap) __attribute__((format(printf, 4, 0)));
static void vlog(const char *rid, const char *tp, sg_log_level level, const char *fmt, va_list ap)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    char msg[2048], esc[LINE_MAX_BYTES / 2], line[LINE_MAX_BYTES];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t m = strlen(msg);
    while (m && msg[m - 1] == '\n')
        msg[--m] = 0;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    size_t w = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + w, sizeof when - w, ".%03ldZ", ts.tv_nsec / 1000000);
    sg_json_escape(msg, esc, sizeof esc);
    int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"daemon\":\"%s\",\"msg\":\"%s\"",
                     when, names[level], daemon_name, esc);
    /* the context values were checked when the call arrived (rpc/call.c) */
    if (n > 0 && (size_t)n < sizeof line && rid && rid[0])
        n += snprintf(line + n, sizeof line - (size_t)n, ",\"request_id\":\"%s\"", rid);
    if (n > 0 && (size_t)n < sizeof line && tp && tp[0])
        n += snprintf(line + n, sizeof line - (size_t)n, ",\"traceparent\":\"%s\"", tp);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 2)
        n = (int)sizeof line - 3;   /* cut: still one line, still closed */
    line[n++] = '}';
    line[n++] = '\n';
    (void)!write(2, line, (size_t)n);
}

void sg_log(sg_log_level level, const char *fmt, ...)
{
    if (level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(ctx_request_id, ctx_traceparent, level, fmt, ap);
    va_end(ap);
}

void sg_log_for(const char *request_id, const char *traceparent, sg_log_level level,
                const char *fmt, ...)
{
    if (level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(request_id, traceparent, level, fmt, ap);
    va_end(ap);
}
