/* log.h — the daemons' log: one JSON object per line on stderr, with a
 * time, a level, the daemon's name, the message and, while a call is being
 * handled, its request id and W3C traceparent. The context is per thread:
 * the rpc layer sets it around a call's handler, and code that continues a
 * call in a callback sets it again (rpc_call_log_context). */
#ifndef SG_LOG_H
#define SG_LOG_H

typedef enum { SG_LOG_DEBUG, SG_LOG_INFO, SG_LOG_WARN, SG_LOG_ERROR } sg_log_level;

/* daemon: "sandgate", "sandgate-host". Lines below min are dropped. */
void sg_log_init(const char *daemon, sg_log_level min);
/* "debug", "info", "warn", "error" -> level; -1 if none of those. */
int sg_log_level_parse(const char *s);
int sg_log_enabled(sg_log_level level);

void sg_log(sg_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with an explicit call context instead of this thread's. */
void sg_log_for(const char *request_id, const char *traceparent, sg_log_level level,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define sg_log_debug(...) sg_log(SG_LOG_DEBUG, __VA_ARGS__)
#define sg_log_info(...) sg_log(SG_LOG_INFO, __VA_ARGS__)
#define sg_log_warn(...) sg_log(SG_LOG_WARN, __VA_ARGS__)
#define sg_log_error(...) sg_log(SG_LOG_ERROR, __VA_ARGS__)

/* This thread's call context, copied (cut at SG_LOG_ID_MAX - 1 bytes;
 * NULL or "" clears). */
#define SG_LOG_ID_MAX 72
void sg_log_set_context(const char *request_id, const char *traceparent);
const char *sg_log_request_id(void);   /* "" outside a call */

/* s as a JSON string body (no quotes) into out; returns the length
 * written, cut to fit cap (always NUL-terminated). */
size_t sg_json_escape(const char *s, char *out, size_t cap);

#endif
