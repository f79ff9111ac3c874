/* parse.c — libyaml events → a node tree that keeps every node's mark, so
 * later checks (types, references, duplicates) can point at a line:col.
 * libyaml marks are 0-based; the tree stores them 1-based. Owns syntax
 * errors, aliases (refused: a policy must read the same to a human and to
 * us, and aliases invite expansion bombs), duplicate keys and nesting depth.
 * Leaves the meaning of keys to validate.c and config.c. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "policy/internal.h"

#define PARSE_MAX_DEPTH 64

typedef struct frame {
    ynode *node;
    ynode **kids;        /* malloc'd while the collection is open */
    size_t n, cap;
} frame;

typedef struct parser {
    pol_arena *a;
    pol_diag *d;
    frame stack[PARSE_MAX_DEPTH];
    int depth;
    ynode *root;
    int docs;
} parser;

static ynode *node_new(parser *ps, yn_kind k, const yaml_mark_t *m)
{
    ynode *n = pol_alloc(ps->a, sizeof *n);
    n->kind = k;
    n->line = (uint32_t)m->line + 1;
    n->col = (uint32_t)m->column + 1;
    return n;
}

static int attach(parser *ps, ynode *n)
{
    if (ps->depth == 0) {
        ps->root = n;
        return 0;
    }
    frame *f = &ps->stack[ps->depth - 1];
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        ynode **k = realloc(f->kids, cap * sizeof *k);
        if (!k)
            return -1;
        f->kids = k;
        f->cap = cap;
    }
    f->kids[f->n++] = n;
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    const ynode *x = *(ynode *const *)a, *y = *(ynode *const *)b;
    int c = strcmp(x->str ? x->str : "", y->str ? y->str : "");
    if (c)
        return c;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->col < y->col ? -1 : x->col > y->col;
}

/* Duplicate keys are errors, not last-one-wins: a reviewer reading the
 * first occurrence must not be misled by a second one further down. */
static void check_dup_keys(parser *ps, ynode *map)
{
    size_t np = map->n / 2;
    if (np < 2)
        return;
    ynode **keys = malloc(np * sizeof *keys);
    if (!keys)
        return;
    for (size_t i = 0; i < np; i++)
        keys[i] = map->kids[2 * i];
    qsort(keys, np, sizeof *keys, key_cmp);
    for (size_t i = 1; i < np; i++)
        if (keys[i]->kind == YN_SCALAR && keys[i - 1]->kind == YN_SCALAR &&
            strcmp(keys[i]->str, keys[i - 1]->str) == 0)
            pol_err(ps->d, keys[i], keys[i]->str,
                    "duplicate key, first defined at line %u", keys[i - 1]->line);
    free(keys);
}

static int open_coll(parser *ps, yn_kind k, const yaml_mark_t *m)
{
    if (ps->depth == PARSE_MAX_DEPTH) {
        ynode at = {.line = (uint32_t)m->line + 1, .col = (uint32_t)m->column + 1};
        pol_err(ps->d, &at, "", "nesting deeper than %d levels", PARSE_MAX_DEPTH);
        return -1;
    }
    ynode *n = node_new(ps, k, m);
    if (attach(ps, n) < 0)
        return -1;
    ps->stack[ps->depth++] = (frame){.node = n};
    return 0;
}

static void close_coll(parser *ps)
{
    frame *f = &ps->stack[--ps->depth];
    ynode *n = f->node;
    n->n = f->n;
    if (f->n) {
        n->kids = pol_alloc(ps->a, f->n * sizeof *n->kids);
        memcpy(n->kids, f->kids, f->n * sizeof *n->kids);
    }
    free(f->kids);
    if (n->kind == YN_MAP)
        check_dup_keys(ps, n);
}

static int on_event(parser *ps, yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++ps->docs > 1) {
            ynode at = {.line = (uint32_t)ev->start_mark.line + 1,
                     .col = (uint32_t)ev->start_mark.column + 1};
            pol_err(ps->d, &at, "", "a second YAML document, expected exactly one");
            return -1;
        }
        return 0;
    case YAML_ALIAS_EVENT: {
        ynode at = {.line = (uint32_t)ev->start_mark.line + 1,
                 .col = (uint32_t)ev->start_mark.column + 1};
        pol_err(ps->d, &at, "", "YAML aliases (*%s) are not allowed, write the value out",
                (const char *)ev->data.alias.anchor);
        return -1;
    }
    case YAML_SCALAR_EVENT: {
        ynode *n = node_new(ps, YN_SCALAR, &ev->start_mark);
        n->str = pol_strndup(ps->a, (const char *)ev->data.scalar.value, ev->data.scalar.length);
        n->len = ev->data.scalar.length;
        n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        return attach(ps, n);
    }
    case YAML_MAPPING_START_EVENT:
        return open_coll(ps, YN_MAP, &ev->start_mark);
    case YAML_SEQUENCE_START_EVENT:
        return open_coll(ps, YN_SEQ, &ev->start_mark);
    case YAML_MAPPING_END_EVENT:
    case YAML_SEQUENCE_END_EVENT:
        close_coll(ps);
        return 0;
    default:
        return 0;
    }
}

static void syntax_error(parser *ps, yaml_parser_t *yp)
{
    ynode at = {.line = (uint32_t)yp->problem_mark.line + 1,
             .col = (uint32_t)yp->problem_mark.column + 1};
    if (yp->context)
        pol_err(ps->d, &at, "", "YAML syntax error: %s %s (line %zu)",
                yp->problem ? yp->problem : "error", yp->context,
                yp->context_mark.line + 1);
    else
        pol_err(ps->d, &at, "", "YAML syntax error: %s", yp->problem ? yp->problem : "error");
}

ynode *pol_parse(pol_arena *a, pol_diag *d, const char *yaml, size_t len)
{
    parser ps = {.a = a, .d = d};
    yaml_parser_t yp;
    if (!yaml_parser_initialize(&yp)) {
        pol_err_plain(d, "libyaml: out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&yp, (const unsigned char *)yaml, len);
    int ok = 1;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&yp, &ev)) {
            syntax_error(&ps, &yp);
            ok = 0;
            break;
        }
        int done = ev.type == YAML_STREAM_END_EVENT;
        int r = on_event(&ps, &ev);
        yaml_event_delete(&ev);
        if (r < 0) {
            ok = 0;
            break;
        }
        if (done)
            break;
    }
    while (ps.depth > 0)            /* free open frames after an error */
        free(ps.stack[--ps.depth].kids);
    yaml_parser_delete(&yp);
    return ok ? ps.root : NULL;
}
