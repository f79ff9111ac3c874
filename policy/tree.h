/* tree.h — the YAML reader the policy is loaded with, offered to the other
 * file formats that must read alike (config/, the daemons' config): a bump
 * arena, the node tree with line:col marks, the diagnostics collector
 * ("file:line:col: key.path: message", all errors, not only the first) and
 * the typed readers that report a mismatch at its node. Implemented in
 * arena.c, parse.c, diag.c and read.c. */
#ifndef SG_POLICY_TREE_H
#define SG_POLICY_TREE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

/* ---- arena (arena.c): one allocation lifetime per policy / per tree ---- */
typedef struct pol_arena {
    struct pol_chunk *head;   /* owned */
} pol_arena;
void *pol_alloc(pol_arena *a, size_t n);            /* zeroed; aborts on OOM */
char *pol_strndup(pol_arena *a, const char *s, size_t n);
char *pol_strdup(pol_arena *a, const char *s);
char *pol_sprintf(pol_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void pol_arena_cleanup(pol_arena *a);

/* ---- YAML node tree (parse.c) ---------------------------------------- */
typedef enum { YN_SCALAR, YN_MAP, YN_SEQ } yn_kind;
typedef struct ynode {
    yn_kind kind;
    int plain;               /* scalar written without quotes */
    uint32_t line, col;      /* 1-based */
    const char *str;         /* scalar text, NUL-terminated (arena) */
    size_t len;
    struct ynode **kids;        /* map: key,value,key,value…; seq: items */
    size_t n;                /* number of kids (map: 2 × pairs) */
} ynode;

/* ---- diagnostics (diag.c) ---------------------------------------------- */
typedef struct pol_diag {
    const char *file;        /* borrowed: the name printed before line:col */
    policy_errors *errs;     /* nullable: counted but not stored */
    policy_errors *warns;    /* nullable */
    size_t n_errs, n_warns;
} pol_diag;
void pol_err(pol_diag *d, const ynode *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void pol_warn(pol_diag *d, const ynode *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void pol_err_plain(pol_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void pol_errors_push(policy_errors *e, char *owned);

/* Parse YAML bytes into a tree in arena `a`. Syntax errors go to d.
 * Returns the root (NULL on error or for an empty document). */
ynode *pol_parse(pol_arena *a, pol_diag *d, const char *yaml, size_t len);

/* ---- typed reading of nodes (read.c); each reports on mismatch ------- */
const char *yn_kind_name(const ynode *n);
ynode *ymap_get(const ynode *map, const char *key);
/* Report every key of map not in allowed[] (NULL-terminated). */
void ymap_check(pol_diag *d, const ynode *map, const char *path,
                const char *const *allowed);
int y_is(pol_diag *d, const ynode *n, const char *path, yn_kind kind);
int y_str(pol_diag *d, const ynode *n, const char *path, const char **out);
int y_bool(pol_diag *d, const ynode *n, const char *path, int *out);
int y_u64(pol_diag *d, const ynode *n, const char *path, uint64_t max, uint64_t *out);
int y_u32(pol_diag *d, const ynode *n, const char *path, uint32_t max, uint32_t *out);
int y_double(pol_diag *d, const ynode *n, const char *path, double *out);
int y_duration(pol_diag *d, const ynode *n, const char *path, uint32_t *out);
int y_size(pol_diag *d, const ynode *n, const char *path, uint64_t *out);
/* child path helpers: "a" + ".b" / "a" + "[3]" */
void ypath_key(char *buf, size_t cap, const char *path, const char *key);
void ypath_idx(char *buf, size_t cap, const char *path, size_t i);
#define YPATH_MAX 256

#endif
