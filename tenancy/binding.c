/* binding.c — a sandbox's binding to (tenant, user, task): its id, the host
 * that holds it, the dedupe key the host enforces, and a bounded owner cache
 * so most calls skip the host round trip for ownership. The host stays the
 * record: a cache miss asks it, so gateway replicas share nothing. */
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tenancy/tenancy.h"

int tenancy_new_sandbox_id(const char *host, char *out, size_t cap, sg_err *err)
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1)
        return sg_err_set(err, SG_EINTERNAL, "RAND_bytes failed: no sandbox id");
    int n = snprintf(out, cap, "%s-", host);
    for (size_t i = 0; i < sizeof b && (size_t)n + 3 <= cap; i++)
        n += snprintf(out + n, cap - (size_t)n, "%02x", b[i]);
    return 0;
}

int tenancy_sandbox_host(const char *id, char *host, size_t cap)
{
    const char *dash = strchr(id, '-');
    if (!dash || dash == id || (size_t)(dash - id) >= cap || strlen(dash + 1) != 32)
        return -1;
    for (const char *p = dash + 1; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return -1;
    memcpy(host, id, (size_t)(dash - id));
    host[dash - id] = 0;
    return 0;
}

void tenancy_dedupe_key(policy_scope scope, const char *tenant, const char *user,
                        const char *task, char *out, size_t cap)
{
    if (scope == POLICY_SCOPE_PER_USER)
        snprintf(out, cap, "user\x1f%s\x1f%s", tenant, user);
    else
        snprintf(out, cap, "task\x1f%s\x1f%s\x1f%s", tenant, user, task);
}

#define CACHE_SLOTS 16384

typedef struct owner_entry {
    char id[80];
    char tenant[TENANCY_NAME_MAX];
    char user[TENANCY_NAME_MAX];
    char task[TENANCY_NAME_MAX];
} owner_entry;

static owner_entry cache[CACHE_SLOTS];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(const char *id)
{
    size_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h % CACHE_SLOTS;
}

void tenancy_owner_put(const char *id, const char *tenant, const char *user, const char *task)
{
    if (strlen(id) >= sizeof cache[0].id)
        return;
    owner_entry *e = &cache[slot_of(id)];
    pthread_mutex_lock(&cache_mu);
    snprintf(e->id, sizeof e->id, "%s", id);
    snprintf(e->tenant, sizeof e->tenant, "%s", tenant);
    snprintf(e->user, sizeof e->user, "%s", user);
    snprintf(e->task, sizeof e->task, "%s", task);
    pthread_mutex_unlock(&cache_mu);
}

int tenancy_owner_get(const char *id, char *tenant, char *user, char *task)
{
    owner_entry *e = &cache[slot_of(id)];
    int rc = -1;
    pthread_mutex_lock(&cache_mu);
    if (strcmp(e->id, id) == 0) {
        memcpy(tenant, e->tenant, TENANCY_NAME_MAX);
        memcpy(user, e->user, TENANCY_NAME_MAX);
        memcpy(task, e->task, TENANCY_NAME_MAX);
        rc = 0;
    }
    pthread_mutex_unlock(&cache_mu);
    return rc;
}
