/* diag.c — collecting load diagnostics. Every error and warning reads
 * "file:line:col: key.path: message" with a 1-based line and column, and all
 * of them are kept (a load reports everything, not the first). Owns the
 * policy_errors list helpers; leaves the wording to the callers. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "policy/internal.h"

void pol_errors_push(policy_errors *e, char *owned)
{
    char **items = realloc(e->items, (e->n + 1) * sizeof *items);
    if (!items) {
        free(owned);
        return;
    }
    e->items = items;
    e->items[e->n++] = owned;
}

static void vpush(policy_errors *e, const char *file, const ynode *at,
                  const char *path, const char *kind, const char *fmt, va_list ap)
{
    char *msg = NULL, *line = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        return;
    int r;
    if (at)
        r = asprintf(&line, "%s:%u:%u: %s%s%s%s", file, at->line, at->col,
                     path && *path ? path : "", path && *path ? ": " : "", kind, msg);
    else
        r = asprintf(&line, "%s: %s%s%s%s", file, path && *path ? path : "",
                     path && *path ? ": " : "", kind, msg);
    free(msg);
    if (r >= 0)
        pol_errors_push(e, line);
}

void pol_err(pol_diag *d, const ynode *at, const char *path, const char *fmt, ...)
{
    d->n_errs++;
    if (!d->errs)
        return;
    va_list ap;
    va_start(ap, fmt);
    vpush(d->errs, d->file, at, path, "", fmt, ap);
    va_end(ap);
}

void pol_warn(pol_diag *d, const ynode *at, const char *path, const char *fmt, ...)
{
    d->n_warns++;
    if (!d->warns)
        return;
    va_list ap;
    va_start(ap, fmt);
    vpush(d->warns, d->file, at, path, "warning: ", fmt, ap);
    va_end(ap);
}

void pol_err_plain(pol_diag *d, const char *fmt, ...)
{
    d->n_errs++;
    if (!d->errs)
        return;
    va_list ap;
    va_start(ap, fmt);
    vpush(d->errs, d->file, NULL, NULL, "", fmt, ap);
    va_end(ap);
}

void policy_errors_cleanup(policy_errors *errs)
{
    if (!errs)
        return;
    for (size_t i = 0; i < errs->n; i++)
        free(errs->items[i]);
    free(errs->items);
    errs->items = NULL;
    errs->n = 0;
}
