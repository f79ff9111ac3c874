/* placement.c — rendezvous hashing by host name (see placement.h). The
 * score depends on the name and the key only, so gateway replicas whose
 * configs list the same hosts in another order still agree, and a host that
 * joins takes only the keys it now wins (about 1/n), leaving the rest where
 * they were. */
#include <string.h>

#include "gateway/placement.h"

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* splitmix64's finalizer: FNV-1a alone leaves the high bits of similar
 * inputs (host-1, host-2) correlated, and the comparison is on all 64. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t gw_place_score(const char *name, const char *key)
{
    uint64_t h = 1469598103934665603ull;
    h = fnv1a(h, (const unsigned char *)name, strlen(name) + 1);   /* with its NUL */
    h = fnv1a(h, (const unsigned char *)key, strlen(key));
    return mix64(h);
}

int gw_place_pick(const char *const *names, const int *usable, size_t n, const char *key)
{
    int best = -1;
    uint64_t best_score = 0;
    for (size_t i = 0; i < n; i++) {
        if (usable && !usable[i])
            continue;
        uint64_t s = gw_place_score(names[i], key);
        if (best < 0 || s > best_score ||
            (s == best_score && strcmp(names[i], names[best]) < 0)) {
            best = (int)i;
            best_score = s;
        }
    }
    return best;
}

double gw_place_load_score(const gw_place_cand *c)
{
    uint32_t used = c->live + c->pending;
    if (c->capacity && used >= c->capacity)
        return -1.0;
    double free_slots = c->capacity ? (double)(c->capacity - used) / c->capacity : 0.5;
    double mem = (double)c->free_memory / (8.0 * 1024 * 1024 * 1024);
    if (mem > 1)
        mem = 1;
    if (mem < 0)
        mem = 0;
    double warm = c->pool_ready > c->pending ? 1.0 : 0.0;
    return 0.5 * free_slots + 0.3 * mem + 0.2 * warm;
}

int gw_place_by_load(const gw_place_cand *c, size_t n, uint64_t rnd)
{
    if (n == 0)
        return -1;
    size_t idx[256], m = n < 256 ? n : 256;
    for (size_t i = 0; i < m; i++)
        idx[i] = i;
    size_t k = m < GW_PLACE_K ? m : GW_PLACE_K;
    int best = -1;
    double best_score = 0;
    uint64_t x = rnd | 1;
    for (size_t i = 0; i < k; i++) {
        x = mix64(x + 0x9e3779b97f4a7c15ull);
        size_t j = i + (size_t)(x % (m - i));   /* partial Fisher-Yates: k distinct */
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        double s = gw_place_load_score(&c[idx[i]]);
        if (best < 0 || s > best_score) {
            best = (int)idx[i];
            best_score = s;
        }
    }
    return best;
}
