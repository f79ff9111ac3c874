/* arena.c — bump allocation for a policy or a parse tree. Everything a load
 * builds is freed at once with the policy (or the tree), so the loader never
 * tracks individual frees. Leaves lifetimes to the owner of the arena. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

struct pol_chunk {
    struct pol_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

#define POL_CHUNK_MIN (64 * 1024)

void *pol_alloc(pol_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    struct pol_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > POL_CHUNK_MIN ? n : POL_CHUNK_MIN;
        c = malloc(sizeof *c + cap);
        if (!c)
            abort();   /* a policy load out of memory has no useful recovery */
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *pol_strndup(pol_arena *a, const char *s, size_t n)
{
    char *d = pol_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *pol_strdup(pol_arena *a, const char *s)
{
    return pol_strndup(a, s, strlen(s));
}

char *pol_sprintf(pol_arena *a, const char *fmt, ...)
{
    va_list ap;
    char *tmp = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();   /* as pol_alloc: out of memory during a load */
    char *d = pol_strndup(a, tmp, (size_t)n);
    free(tmp);
    return d;
}

void pol_arena_cleanup(pol_arena *a)
{
    struct pol_chunk *c = a->head;
    while (c) {
        struct pol_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}
