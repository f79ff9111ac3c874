/* read.c — typed reading of tree nodes with one wording for every type
 * mismatch ("expected X, got Y") and unknown-key errors that suggest the
 * nearest known key, as haproxy's cfgparse does. Owns scalar syntax for
 * booleans, integers, durations ("30s", "10m") and sizes ("64KiB"). Leaves
 * which keys exist to the schema code in validate.c and config.c. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"

void ypath_key(char *buf, size_t cap, const char *path, const char *key)
{
    snprintf(buf, cap, "%s%s%s", path, *path ? "." : "", key);
}

void ypath_idx(char *buf, size_t cap, const char *path, size_t i)
{
    snprintf(buf, cap, "%s[%zu]", path, i);
}

static int is_null(const ynode *n)
{
    return n->kind == YN_SCALAR && n->plain &&
           (n->len == 0 || strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0);
}

const char *yn_kind_name(const ynode *n)
{
    if (n->kind == YN_MAP)
        return "a mapping";
    if (n->kind == YN_SEQ)
        return "a list";
    return is_null(n) ? "nothing" : "a scalar";
}

ynode *ymap_get(const ynode *map, const char *key)
{
    if (!map || map->kind != YN_MAP)
        return NULL;
    for (size_t i = 0; i + 1 < map->n; i += 2)
        if (map->kids[i]->kind == YN_SCALAR && strcmp(map->kids[i]->str, key) == 0)
            return map->kids[i + 1];
    return NULL;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40)
        return 99;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (a[i - 1] != b[j - 1]);
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

static void unknown_key(pol_diag *d, const ynode *k, const char *path,
                        const char *const *allowed)
{
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, k->str);
    const char *best = NULL;
    size_t best_d = 3;   /* suggest only close typos */
    for (size_t i = 0; allowed[i]; i++) {
        size_t dist = edit_distance(k->str, allowed[i]);
        if (dist < best_d) {
            best_d = dist;
            best = allowed[i];
        }
    }
    if (best) {
        pol_err(d, k, sub, "unknown key '%s'; did you mean '%s'?", k->str, best);
        return;
    }
    char list[512] = "";
    size_t off = 0;
    for (size_t i = 0; allowed[i] && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "", allowed[i]);
    pol_err(d, k, sub, "unknown key '%s', expected one of: %s", k->str, list);
}

void ymap_check(pol_diag *d, const ynode *map, const char *path, const char *const *allowed)
{
    for (size_t i = 0; i + 1 < map->n; i += 2) {
        const ynode *k = map->kids[i];
        if (k->kind != YN_SCALAR) {
            pol_err(d, k, path, "a key must be a plain string, got %s", yn_kind_name(k));
            continue;
        }
        size_t j = 0;
        while (allowed[j] && strcmp(allowed[j], k->str) != 0)
            j++;
        if (!allowed[j])
            unknown_key(d, k, path, allowed);
    }
}

int y_is(pol_diag *d, const ynode *n, const char *path, yn_kind kind)
{
    if (n->kind == kind)
        return 0;
    static const char *const want[] = {"a scalar", "a mapping", "a list"};
    pol_err(d, n, path, "expected %s, got %s", want[kind], yn_kind_name(n));
    return -1;
}

int y_str(pol_diag *d, const ynode *n, const char *path, const char **out)
{
    if (n->kind != YN_SCALAR || is_null(n)) {
        pol_err(d, n, path, "expected a string, got %s", yn_kind_name(n));
        return -1;
    }
    if (strlen(n->str) != n->len) {
        pol_err(d, n, path, "string contains a NUL byte");
        return -1;
    }
    *out = n->str;
    return 0;
}

int y_bool(pol_diag *d, const ynode *n, const char *path, int *out)
{
    if (n->kind == YN_SCALAR && n->plain) {
        if (strcmp(n->str, "true") == 0)
            return *out = 1, 0;
        if (strcmp(n->str, "false") == 0)
            return *out = 0, 0;
    }
    if (n->kind == YN_SCALAR)
        pol_err(d, n, path, "expected true or false, got '%s'", n->str);
    else
        pol_err(d, n, path, "expected true or false, got %s", yn_kind_name(n));
    return -1;
}

/* Parse a decimal integer with an optional unit suffix from units[]. */
typedef struct unit { const char *suffix; uint64_t mult; } unit;

static int parse_scaled(const char *s, const unit *units, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    uint64_t mult = 1;
    if (*end) {
        size_t i = 0;
        while (units && units[i].suffix && strcmp(units[i].suffix, end) != 0)
            i++;
        if (!units || !units[i].suffix)
            return -1;
        mult = units[i].mult;
    }
    if (mult && v > UINT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

static int y_scaled(pol_diag *d, const ynode *n, const char *path, const unit *units,
                    uint64_t max, const char *what, uint64_t *out)
{
    uint64_t v;
    if (n->kind != YN_SCALAR || is_null(n)) {
        pol_err(d, n, path, "expected %s, got %s", what, yn_kind_name(n));
        return -1;
    }
    if (parse_scaled(n->str, units, &v) < 0) {
        pol_err(d, n, path, "expected %s, got '%s'", what, n->str);
        return -1;
    }
    if (v > max) {
        pol_err(d, n, path, "%s is out of range, expected at most %llu", n->str,
                (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int y_u64(pol_diag *d, const ynode *n, const char *path, uint64_t max, uint64_t *out)
{
    return y_scaled(d, n, path, NULL, max, "an integer", out);
}

int y_u32(pol_diag *d, const ynode *n, const char *path, uint32_t max, uint32_t *out)
{
    uint64_t v;
    if (y_scaled(d, n, path, NULL, max, "an integer", &v) < 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int y_double(pol_diag *d, const ynode *n, const char *path, double *out)
{
    if (n->kind == YN_SCALAR && !is_null(n) && n->str[0] >= '0' && n->str[0] <= '9') {
        char *end;
        errno = 0;
        double v = strtod(n->str, &end);
        if (!errno && !*end && isfinite(v) && v <= 1e9)
            return *out = v, 0;
    }
    pol_err(d, n, path, "expected a non-negative number, got %s%s%s",
            n->kind == YN_SCALAR ? "'" : "", n->kind == YN_SCALAR ? n->str : yn_kind_name(n),
            n->kind == YN_SCALAR ? "'" : "");
    return -1;
}

int y_duration(pol_diag *d, const ynode *n, const char *path, uint32_t *out)
{
    static const unit units[] = {{"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}, {0, 0}};
    uint64_t v;
    if (y_scaled(d, n, path, units, UINT32_MAX, "a duration such as 30s, 10m or 2h", &v) < 0)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int y_size(pol_diag *d, const ynode *n, const char *path, uint64_t *out)
{
    static const unit units[] = {{"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20},
                                 {"GiB", 1ull << 30}, {"TiB", 1ull << 40}, {0, 0}};
    return y_scaled(d, n, path, units, UINT64_MAX / 2, "a size such as 4096, 64KiB or 512MiB", out);
}
