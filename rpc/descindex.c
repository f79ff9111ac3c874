/* descindex.c — reads a FileDescriptorSet's wire bytes far enough to know
 * each file's name, dependencies and the symbols it defines (descriptor.proto
 * field numbers below). No descriptor.proto code is generated for this: the
 * few fields needed are read with a small wire scanner, and everything else
 * is skipped, so a newer protoc that adds fields changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/descindex.h"

/* descriptor.proto field numbers */
enum {
    SET_FILE = 1,
    FILE_NAME = 1, FILE_PACKAGE = 2, FILE_DEPENDENCY = 3, FILE_MESSAGE = 4, FILE_ENUM = 5,
    FILE_SERVICE = 6,
    MSG_NAME = 1, MSG_NESTED = 3, MSG_ENUM = 4,
    ENUM_NAME = 1,
    SVC_NAME = 1, SVC_METHOD = 2,
    METHOD_NAME = 1,
};

#define MAX_DEPTH 32   /* message nesting a set may have; deeper is refused */

typedef struct wire {
    const uint8_t *p, *end;
} wire;

static int varint(wire *w, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* The next field: 1 with its number and, for length-delimited fields, the
 * bytes; 0 at the end; -1 on malformed input. */
static int next_field(wire *w, uint32_t *field, const uint8_t **data, size_t *len)
{
    if (w->p == w->end)
        return 0;
    uint64_t key, v;
    if (varint(w, &key) != 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
        return -1;
    *field = (uint32_t)(key >> 3);
    *data = NULL;
    *len = 0;
    switch (key & 7) {
    case 0:
        return varint(w, &v) == 0 ? 1 : -1;
    case 1:
        if (w->end - w->p < 8)
            return -1;
        w->p += 8;
        return 1;
    case 5:
        if (w->end - w->p < 4)
            return -1;
        w->p += 4;
        return 1;
    case 2:
        if (varint(w, &v) != 0 || v > (uint64_t)(w->end - w->p))
            return -1;
        *data = w->p;
        *len = (size_t)v;
        w->p += v;
        return 1;
    default:
        return -1;   /* groups: protoc never writes them in descriptors */
    }
}

/* The first string field `want` of a message, as a new C string ("" when
 * absent); NULL on malformed input or a NUL inside. */
static char *string_field(const uint8_t *msg, size_t len, uint32_t want)
{
    wire w = {msg, msg + len};
    uint32_t f;
    const uint8_t *d;
    size_t n;
    int rc;
    while ((rc = next_field(&w, &f, &d, &n)) == 1)
        if (f == want && d) {
            if (memchr(d, 0, n))
                return NULL;
            char *s = malloc(n + 1);
            memcpy(s, d, n);
            s[n] = 0;
            return s;
        }
    return rc == 0 ? strdup("") : NULL;
}

static int add_sym(rpc_descindex *ix, size_t *cap, const char *scope, const char *name,
                   size_t file)
{
    if (!name[0])
        return -1;
    if (ix->n_syms == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        rpc_descsym *n = realloc(ix->syms, *cap * sizeof *n);
        if (!n)
            return -1;
        ix->syms = n;
    }
    size_t len = strlen(scope) + strlen(name) + 2;
    char *full = malloc(len);
    if (!full)
        return -1;
    if (scope[0])
        snprintf(full, len, "%s.%s", scope, name);
    else
        snprintf(full, len, "%s", name);
    ix->syms[ix->n_syms++] = (rpc_descsym){full, file};
    return 0;
}

/* A DescriptorProto or EnumDescriptorProto under scope, and for messages
 * everything nested in it. */
static int index_type(rpc_descindex *ix, size_t *cap, const char *scope, const uint8_t *msg,
                      size_t len, size_t file, int is_enum, int depth)
{
    if (depth > MAX_DEPTH)
        return -1;
    char *name = string_field(msg, len, is_enum ? ENUM_NAME : MSG_NAME);
    if (!name || add_sym(ix, cap, scope, name, file) != 0) {
        free(name);
        return -1;
    }
    int rc = 0;
    if (!is_enum) {
        const char *full = ix->syms[ix->n_syms - 1].name;
        wire w = {msg, msg + len};
        uint32_t f;
        const uint8_t *d;
        size_t n;
        int r = 0;
        while (rc == 0 && (r = next_field(&w, &f, &d, &n)) == 1)
            if ((f == MSG_NESTED || f == MSG_ENUM) && d)
                rc = index_type(ix, cap, full, d, n, file, f == MSG_ENUM, depth + 1);
        if (rc == 0 && r < 0)
            rc = -1;
    }
    free(name);
    return rc;
}

static int index_service(rpc_descindex *ix, size_t *cap, const char *pkg, const uint8_t *msg,
                         size_t len, size_t file)
{
    char *name = string_field(msg, len, SVC_NAME);
    if (!name || add_sym(ix, cap, pkg, name, file) != 0) {
        free(name);
        return -1;
    }
    free(name);
    char *svc = strdup(ix->syms[ix->n_syms - 1].name);
    wire w = {msg, msg + len};
    uint32_t f;
    const uint8_t *d;
    size_t n;
    int r = 0, rc = 0;
    while (rc == 0 && (r = next_field(&w, &f, &d, &n)) == 1) {
        if (f != SVC_METHOD || !d)
            continue;
        char *m = string_field(d, n, METHOD_NAME);
        rc = m ? add_sym(ix, cap, svc, m, file) : -1;
        free(m);
    }
    free(svc);
    return rc == 0 && r == 0 ? 0 : -1;
}

/* Symbols of one file; its dependency names are resolved later. */
static int index_file(rpc_descindex *ix, size_t *cap, size_t file, char ***dep_names)
{
    const rpc_descfile *fd = &ix->files[file];
    char *pkg = string_field(fd->data, fd->len, FILE_PACKAGE);
    if (!pkg)
        return -1;
    wire w = {fd->data, fd->data + fd->len};
    uint32_t f;
    const uint8_t *d;
    size_t n, n_deps = 0;
    int r = 0, rc = 0;
    while (rc == 0 && (r = next_field(&w, &f, &d, &n)) == 1) {
        if (!d)
            continue;
        if (f == FILE_MESSAGE || f == FILE_ENUM)
            rc = index_type(ix, cap, pkg, d, n, file, f == FILE_ENUM, 0);
        else if (f == FILE_SERVICE)
            rc = index_service(ix, cap, pkg, d, n, file);
        else if (f == FILE_DEPENDENCY) {
            char **grown = realloc(*dep_names, (n_deps + 2) * sizeof *grown);
            if (!grown || memchr(d, 0, n)) {
                rc = -1;
                if (grown)
                    *dep_names = grown;
                break;
            }
            *dep_names = grown;
            grown[n_deps] = strndup((const char *)d, n);
            grown[++n_deps] = NULL;
        }
    }
    free(pkg);
    return rc == 0 && r == 0 ? 0 : -1;
}

static int cmp_sym(const void *a, const void *b)
{
    return strcmp(((const rpc_descsym *)a)->name, ((const rpc_descsym *)b)->name);
}

static void free_names(char **names)
{
    for (size_t i = 0; names && names[i]; i++)
        free(names[i]);
    free(names);
}

/* Every file's dependencies as indexes; a name missing from the set is an
 * error (protoc --include_imports always writes them). */
static int resolve_deps(rpc_descindex *ix, size_t file, char **names, sg_err *err)
{
    rpc_descfile *fd = &ix->files[file];
    size_t n = 0;
    while (names && names[n])
        n++;
    fd->deps = calloc(n + 1, sizeof *fd->deps);
    for (size_t i = 0; i < n; i++) {
        long k = rpc_descindex_file(ix, names[i]);
        if (k < 0)
            return sg_err_set(err, SG_EINVAL, "descriptor set: %s imports %s, which it lacks",
                              fd->name, names[i]);
        fd->deps[fd->n_deps++] = (size_t)k;
    }
    return 0;
}

static int read_files(rpc_descindex *ix, const uint8_t *set, size_t len)
{
    wire w = {set, set + len};
    uint32_t f;
    const uint8_t *d;
    size_t n, cap = 0;
    int r;
    while ((r = next_field(&w, &f, &d, &n)) == 1) {
        if (f != SET_FILE || !d)
            continue;
        if (ix->n_files == cap) {
            cap = cap ? cap * 2 : 8;
            rpc_descfile *g = realloc(ix->files, cap * sizeof *g);
            if (!g)
                return -1;
            ix->files = g;
        }
        rpc_descfile *fd = &ix->files[ix->n_files++];
        memset(fd, 0, sizeof *fd);
        fd->data = d;
        fd->len = n;
        fd->name = string_field(d, n, FILE_NAME);
        if (!fd->name || !fd->name[0])
            return -1;
    }
    return r;
}

int rpc_descindex_init(rpc_descindex *ix, const uint8_t *set, size_t len, sg_err *err)
{
    memset(ix, 0, sizeof *ix);
    if (read_files(ix, set, len) != 0) {
        rpc_descindex_cleanup(ix);
        return sg_err_set(err, SG_EINVAL, "descriptor set: malformed FileDescriptorSet");
    }
    size_t cap = 0;
    for (size_t i = 0; i < ix->n_files; i++) {
        char **deps = NULL;
        int rc = index_file(ix, &cap, i, &deps);
        if (rc != 0)
            sg_err_set(err, SG_EINVAL, "descriptor set: file %s is malformed", ix->files[i].name);
        else
            rc = resolve_deps(ix, i, deps, err);
        free_names(deps);
        if (rc != 0) {
            rpc_descindex_cleanup(ix);
            return -1;
        }
    }
    qsort(ix->syms, ix->n_syms, sizeof *ix->syms, cmp_sym);
    return 0;
}

void rpc_descindex_cleanup(rpc_descindex *ix)
{
    for (size_t i = 0; i < ix->n_files; i++) {
        free(ix->files[i].name);
        free(ix->files[i].deps);
    }
    for (size_t i = 0; i < ix->n_syms; i++)
        free(ix->syms[i].name);
    free(ix->files);
    free(ix->syms);
    memset(ix, 0, sizeof *ix);
}

long rpc_descindex_file(const rpc_descindex *ix, const char *name)
{
    for (size_t i = 0; i < ix->n_files; i++)
        if (strcmp(ix->files[i].name, name) == 0)
            return (long)i;
    return -1;
}

long rpc_descindex_symbol(const rpc_descindex *ix, const char *symbol)
{
    rpc_descsym key = {(char *)symbol, 0};
    const rpc_descsym *s = bsearch(&key, ix->syms, ix->n_syms, sizeof *ix->syms, cmp_sym);
    return s ? (long)s->file : -1;
}
