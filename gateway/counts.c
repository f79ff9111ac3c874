/* counts.c — each host's last answer to CreateSandbox's quota count, per
 * tenant: the owners (user, task) of its live sandboxes. When a host is not
 * SERVING or misses the fan-out deadline (list.c), the create counts what
 * that host last said instead of waiting for it or counting it as empty; the
 * chosen host still re-checks the quota atomically (live_elsewhere_*).
 *
 * A stopped host's sandboxes are still there when it resumes, so its entry
 * does not expire; it is replaced by the host's next answer: to a create's
 * fan-out (that tenant), or its load report (every tenant, about once a
 * second, health.c), so a replica that never created for a tenant still
 * counts that tenant's sandboxes on a host that has just stopped. A sandbox the
 * gateway just created is added to its host's entry at once (gw_counts_add),
 * so an entry is never a create behind; one killed or expired since the
 * last answer still counts until the next (while the host is down, a count
 * too high rather than too low). Bounded: at
 * most COUNTS_MAX_TENANTS tenants per host (the least recently written goes). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/request.h"

#define COUNTS_MAX_TENANTS 1024

typedef struct counts_entry {
    char tenant[TENANCY_NAME_MAX];
    uint8_t *buf;               /* owned: a packed HostListResponse of owners only */
    size_t len;
    uint64_t written;           /* put sequence number, for eviction */
} counts_entry;

typedef struct counts_host {
    counts_entry *items;        /* owned */
    size_t n, cap;
} counts_host;

static pthread_mutex_t counts_mu = PTHREAD_MUTEX_INITIALIZER;
static counts_host counts[GW_MAX_HOSTS];
static uint64_t counts_seq;

static counts_entry *find(counts_host *h, const char *tenant)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->items[i].tenant, tenant) == 0)
            return &h->items[i];
    return NULL;
}

static counts_entry *slot(counts_host *h, const char *tenant)
{
    counts_entry *e = find(h, tenant);
    if (e)
        return e;
    if (h->n == COUNTS_MAX_TENANTS) {
        e = &h->items[0];
        for (size_t i = 1; i < h->n; i++)
            if (h->items[i].written < e->written)
                e = &h->items[i];
        free(e->buf);
    } else {
        if (h->n == h->cap) {
            size_t cap = h->cap ? h->cap * 2 : 16;
            counts_entry *items = realloc(h->items, cap * sizeof *items);
            if (!items)
                return NULL;
            h->items = items;
            h->cap = cap;
        }
        e = &h->items[h->n++];
    }
    memset(e, 0, sizeof *e);
    snprintf(e->tenant, sizeof e->tenant, "%s", tenant);
    return e;
}

void gw_counts_put(size_t host, const char *tenant, const Sandgate__V1__HostListResponse *part)
{
    if (host >= GW_MAX_HOSTS || !part)
        return;
    /* Keep only what counting needs: the owners. */
    size_t n = part->n_sandboxes;
    Sandgate__V1__HostSandbox *hs = calloc(n + 1, sizeof *hs);
    Sandgate__V1__HostSandbox **ptrs = calloc(n + 1, sizeof *ptrs);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!part->sandboxes[i]->owner)
            continue;
        sandgate__v1__host_sandbox__init(&hs[k]);
        hs[k].owner = part->sandboxes[i]->owner;
        ptrs[k] = &hs[k];
        k++;
    }
    Sandgate__V1__HostListResponse slim;
    sandgate__v1__host_list_response__init(&slim);
    slim.n_sandboxes = k;
    slim.sandboxes = ptrs;
    size_t len = protobuf_c_message_get_packed_size(&slim.base);
    uint8_t *buf = malloc(len ? len : 1);
    protobuf_c_message_pack(&slim.base, buf);
    free(ptrs);
    free(hs);
    pthread_mutex_lock(&counts_mu);
    counts_entry *e = slot(&counts[host], tenant);
    if (e) {
        free(e->buf);
        e->buf = buf;
        e->len = len;
        e->written = ++counts_seq;
        buf = NULL;
    }
    pthread_mutex_unlock(&counts_mu);
    free(buf);
}

/* Owners of tenant's sandboxes in `all`, as a HostListResponse to put. */
static void put_tenant(size_t host, const char *tenant, const Sandgate__V1__HostListResponse *all)
{
    Sandgate__V1__HostSandbox **ptrs = calloc(all->n_sandboxes + 1, sizeof *ptrs);
    size_t k = 0;
    for (size_t i = 0; i < all->n_sandboxes; i++) {
        const Sandgate__V1__Owner *o = all->sandboxes[i]->owner;
        if (o && strcmp(o->tenant_id, tenant) == 0)
            ptrs[k++] = all->sandboxes[i];
    }
    Sandgate__V1__HostListResponse one;
    sandgate__v1__host_list_response__init(&one);
    one.n_sandboxes = k;
    one.sandboxes = ptrs;
    gw_counts_put(host, tenant, &one);
    free(ptrs);
}

void gw_counts_report(size_t host, const Sandgate__V1__HostListResponse *all)
{
    if (host >= GW_MAX_HOSTS || !all)
        return;
    /* Each tenant in the report and each cached one (gone from the report
     * means none left there) gets the report's list of its owners. */
    pthread_mutex_lock(&counts_mu);
    size_t cached = counts[host].n, n = 0;
    const char **names = calloc(cached + all->n_sandboxes + 1, sizeof *names);
    char (*copies)[TENANCY_NAME_MAX] = calloc(cached + 1, sizeof *copies);
    for (size_t i = 0; i < cached; i++) {
        memcpy(copies[i], counts[host].items[i].tenant, TENANCY_NAME_MAX);
        names[n++] = copies[i];
    }
    pthread_mutex_unlock(&counts_mu);
    for (size_t i = 0; i < all->n_sandboxes; i++) {
        const Sandgate__V1__Owner *o = all->sandboxes[i]->owner;
        size_t j = 0;
        while (o && j < n && strcmp(names[j], o->tenant_id) != 0)
            j++;
        if (o && j == n)
            names[n++] = o->tenant_id;
    }
    for (size_t j = 0; j < n; j++)
        put_tenant(host, names[j], all);
    free(copies);
    free(names);
}

void gw_counts_add(size_t host, const char *tenant, const Sandgate__V1__Owner *owner)
{
    if (host >= GW_MAX_HOSTS || !owner)
        return;
    /* Only onto a count this host gave: without one, the next answer says. */
    Sandgate__V1__HostListResponse *part = gw_counts_get(host, tenant);
    if (!part)
        return;
    Sandgate__V1__HostSandbox hs, **ptrs = calloc(part->n_sandboxes + 1, sizeof *ptrs);
    sandgate__v1__host_sandbox__init(&hs);
    hs.owner = (Sandgate__V1__Owner *)owner;
    if (part->n_sandboxes)   /* an empty count's array is NULL (UBSan: memcpy from NULL) */
        memcpy(ptrs, part->sandboxes, part->n_sandboxes * sizeof *ptrs);
    ptrs[part->n_sandboxes] = &hs;
    Sandgate__V1__HostListResponse grown = *part;
    grown.sandboxes = ptrs;
    grown.n_sandboxes = part->n_sandboxes + 1;
    gw_counts_put(host, tenant, &grown);
    free(ptrs);
    protobuf_c_message_free_unpacked(&part->base, NULL);
}

Sandgate__V1__HostListResponse *gw_counts_get(size_t host, const char *tenant)
{
    if (host >= GW_MAX_HOSTS)
        return NULL;
    Sandgate__V1__HostListResponse *out = NULL;
    pthread_mutex_lock(&counts_mu);
    counts_entry *e = find(&counts[host], tenant);
    if (e)
        out = sandgate__v1__host_list_response__unpack(NULL, e->len, e->buf);
    pthread_mutex_unlock(&counts_mu);
    return out;
}
