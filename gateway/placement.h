/* placement.h — which host a new sandbox goes to: rendezvous (highest
 * random weight) hashing of the host's configured *name* with the sandbox's
 * dedupe key. Pure functions, no gateway state, so they are table-tested
 * (placement_test.c). */
#ifndef SG_GW_PLACEMENT_H
#define SG_GW_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* The weight of host `name` for `key`: FNV-1a 64 of name "\0" key, then a
 * 64-bit finalizer so every bit depends on every input byte. */
uint64_t gw_place_score(const char *name, const char *key);

/* Index of the highest-scoring name among those with usable[i] != 0 (usable
 * NULL = all), ties to the smaller name; -1 when none is usable. The order
 * of names never matters, and adding a host moves only the keys it wins. */
int gw_place_pick(const char *const *names, const int *usable, size_t n, const char *key);

/* Registry mode: placement by load, as E2B's orchestrator does it: sample
 * GW_PLACE_K of the usable hosts at random, take the best score. Sampling
 * (not the global best) keeps replicas that see the same slightly old
 * reports from all piling onto one host. */
#define GW_PLACE_K 3
typedef struct gw_place_cand {
    uint32_t capacity;      /* 0 = not reported (counted as half free) */
    uint32_t live;          /* as last reported */
    uint32_t pending;       /* placed here since that report */
    int64_t free_memory;    /* bytes */
    uint32_t pool_ready;    /* warm sandboxes of the template ready */
} gw_place_cand;

/* In [0, 1], higher is better; negative for a host with no free slot:
 * 0.5 x free slots (fraction of capacity) + 0.3 x free memory (up to 8 GiB)
 * + 0.2 if a warm sandbox is ready for this create. Pure. */
double gw_place_load_score(const gw_place_cand *c);
/* Index of the best of up to GW_PLACE_K candidates drawn with rnd (a
 * random 64-bit value; the same rnd draws the same sample); a full host
 * only if every sampled one is full; -1 when n is 0. */
int gw_place_by_load(const gw_place_cand *c, size_t n, uint64_t rnd);

#endif
