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

#endif
