/* index.c — a read-only string → ascending-uint32-list hash table, built
 * once at load (sort + open addressing) so lookups of tenants, keys and
 * egress hosts cost O(1) and validation of 10k-rule files stays O(n log n).
 * Owns no strings: keys are borrowed from the policy arena. */
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

struct pol_slot {
    const char *key;   /* borrowed; NULL = empty */
    uint32_t len, off, cnt;
    uint64_t h;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a: keys are short */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int pair_cmp(const void *a, const void *b)
{
    const pol_pair *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->val < y->val ? -1 : x->val > y->val;
}

void pol_index_build(pol_arena *a, pol_index *ix, pol_pair *pairs, size_t n)
{
    memset(ix, 0, sizeof *ix);
    if (!n)
        return;
    qsort(pairs, n, sizeof *pairs, pair_cmp);
    size_t cap = 8;
    while (cap < n * 2)
        cap <<= 1;
    ix->cap = cap;
    ix->slots = pol_alloc(a, cap * sizeof *ix->slots);
    ix->vals = pol_alloc(a, n * sizeof *ix->vals);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(pairs[j].key, pairs[i].key) == 0) {
            ix->vals[j] = pairs[j].val;
            j++;
        }
        size_t len = strlen(pairs[i].key);
        uint64_t h = hash_bytes(pairs[i].key, len);
        size_t s = h & (cap - 1);
        while (ix->slots[s].key)
            s = (s + 1) & (cap - 1);
        ix->slots[s] = (struct pol_slot){pairs[i].key, (uint32_t)len, (uint32_t)i,
                                         (uint32_t)(j - i), h};
        i = j;
    }
}

const uint32_t *pol_index_get(const pol_index *ix, const char *key, size_t len, size_t *n)
{
    *n = 0;
    if (!ix->cap)
        return NULL;
    uint64_t h = hash_bytes(key, len);
    for (size_t s = h & (ix->cap - 1);; s = (s + 1) & (ix->cap - 1)) {
        const struct pol_slot *sl = &ix->slots[s];
        if (!sl->key)
            return NULL;
        if (sl->h == h && sl->len == len && memcmp(sl->key, key, len) == 0) {
            *n = sl->cnt;
            return ix->vals + sl->off;
        }
    }
}
