/* audit.c — the audit log: one JSON object per line per decision, with the
 * live policy's hash. Callers pass names, rule ids and messages, never
 * secret values. Lines are written whole under a lock. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gateway/gw.h"

static FILE *audit_f;
static pthread_mutex_t audit_mu = PTHREAD_MUTEX_INITIALIZER;

int gw_audit_open(const char *path, sg_err *err)
{
    if (!path)
        return 0;
    audit_f = strcmp(path, "-") == 0 ? stderr : fopen(path, "a");
    if (!audit_f)
        return sg_err_errno(err, SG_EINVAL, "open audit log %s", path);
    setvbuf(audit_f, NULL, _IOLBF, 0);
    return 0;
}

static void put_json(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void gw_audit(const policy *p, const char *tenant, const char *user, const char *task, const char *sandbox,
              const char *action, int allow, const char *rule, const char *message)
{
    if (!audit_f)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    pthread_mutex_lock(&audit_mu);
    fprintf(audit_f, "{\"time\":\"%s.%03ldZ\",\"tenant\":", when, ts.tv_nsec / 1000000);
    put_json(audit_f, tenant);
    fputs(",\"user\":", audit_f);
    put_json(audit_f, user);
    fputs(",\"task\":", audit_f);
    put_json(audit_f, task);
    fputs(",\"sandbox\":", audit_f);
    put_json(audit_f, sandbox);
    fputs(",\"action\":", audit_f);
    put_json(audit_f, action);
    fprintf(audit_f, ",\"decision\":\"%s\",\"rule\":", allow ? "allow" : "deny");
    put_json(audit_f, rule);
    fputs(",\"message\":", audit_f);
    put_json(audit_f, message);
    fprintf(audit_f, ",\"policy\":\"%s\"}\n", policy_hash(p));
    pthread_mutex_unlock(&audit_mu);
}
