/* quota.c — per-tenant admission in one gateway process: a token bucket for
 * the request rate and a counter of actions in flight. Both are this
 * replica's view (with R replicas, set the policy's rate to R× the
 * per-replica share); live-sandbox quotas are counted from the hosts, which
 * are the shared record (see gateway/service.c). The clock is passed in, so
 * the arithmetic is testable. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tenancy/tenancy.h"

#define QUOTA_TENANTS 1024

typedef struct tenant_state {
    char tenant[TENANCY_NAME_MAX];
    double tokens;
    int64_t last_us;
    uint32_t inflight;
} tenant_state;

static tenant_state table[QUOTA_TENANTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Find or claim the tenant's slot (open addressing); NULL when full. */
static tenant_state *slot(const char *tenant)
{
    size_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)tenant; *p; p++)
        h = h * 33 + *p;
    for (size_t i = 0; i < QUOTA_TENANTS; i++) {
        tenant_state *s = &table[(h + i) % QUOTA_TENANTS];
        if (s->tenant[0] == 0) {
            snprintf(s->tenant, sizeof s->tenant, "%s", tenant);
            s->tokens = -1;   /* first use fills the bucket */
            return s;
        }
        if (strcmp(s->tenant, tenant) == 0)
            return s;
    }
    return NULL;
}

int tenancy_rate_take(const char *tenant, double rate, uint32_t burst, int64_t now_us, sg_err *err)
{
    if (rate <= 0)
        return 0;   /* no rate limit in the policy */
    double cap = burst ? burst : (rate < 1 ? 1 : rate);
    pthread_mutex_lock(&mu);
    tenant_state *s = slot(tenant);
    int rc = 0;
    if (s) {
        if (s->tokens < 0) {
            s->tokens = cap;
        } else {
            s->tokens += (double)(now_us - s->last_us) / 1e6 * rate;
            if (s->tokens > cap)
                s->tokens = cap;
        }
        s->last_us = now_us;
        if (s->tokens >= 1)
            s->tokens -= 1;
        else
            rc = sg_err_set(err, SG_EQUOTA,
                            "request rate limit exceeded: tenant %s may make %.0f calls/s "
                            "(burst %.0f)", tenant, rate, cap);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int tenancy_action_begin(const char *tenant, uint32_t max, sg_err *err)
{
    pthread_mutex_lock(&mu);
    tenant_state *s = slot(tenant);
    int rc = 0;
    if (s && max && s->inflight >= max)
        rc = sg_err_set(err, SG_EQUOTA,
                        "concurrent actions limit reached: tenant %s may run %u actions at once",
                        tenant, max);
    else if (s)
        s->inflight++;
    pthread_mutex_unlock(&mu);
    return rc;
}

void tenancy_action_end(const char *tenant)
{
    pthread_mutex_lock(&mu);
    tenant_state *s = slot(tenant);
    if (s && s->inflight)
        s->inflight--;
    pthread_mutex_unlock(&mu);
}
