/* labels.c — a sandbox's labels (CreateSandbox metadata): the host's own
 * copy, sorted by key so Get/List return them in one order, and the lookup
 * ListSandboxes filters with. host_check_create bounded them before they get
 * here; the arrays are owned by the sandbox (freed with it). */
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const Sandgate__V1__Sandbox__MetadataEntry *)a)->key,
                  ((const Sandgate__V1__Sandbox__MetadataEntry *)b)->key);
}

void host_labels_free(host_sandbox *sb)
{
    for (size_t i = 0; i < sb->n_meta; i++) {
        free(sb->meta[i].key);
        free(sb->meta[i].value);
    }
    free(sb->meta);
    free(sb->meta_ptrs);
    sb->meta = NULL;
    sb->meta_ptrs = NULL;
    sb->n_meta = 0;
}

/* The request's labels, copied (host_check_create bounded them). */
void host_labels_assign(host_sandbox *sb, const Sandgate__V1__CreateSandboxRequest *r)
{
    host_labels_free(sb);
    if (!r->n_metadata)
        return;
    sb->meta = calloc(r->n_metadata, sizeof *sb->meta);
    sb->meta_ptrs = calloc(r->n_metadata, sizeof *sb->meta_ptrs);
    if (!sb->meta || !sb->meta_ptrs) {
        host_labels_free(sb);
        return;
    }
    for (size_t i = 0; i < r->n_metadata; i++) {
        sandgate__v1__sandbox__metadata_entry__init(&sb->meta[i]);
        sb->meta[i].key = strdup(r->metadata[i]->key);
        sb->meta[i].value = strdup(r->metadata[i]->value);
        if (!sb->meta[i].key || !sb->meta[i].value) {
            free(sb->meta[i].key);
            free(sb->meta[i].value);
            break;
        }
        sb->n_meta++;
    }
    qsort(sb->meta, sb->n_meta, sizeof *sb->meta, cmp_meta);
    for (size_t i = 0; i < sb->n_meta; i++)
        sb->meta_ptrs[i] = &sb->meta[i];
}

const char *host_sandbox_label(const host_sandbox *sb, const char *key)
{
    for (size_t i = 0; i < sb->n_meta; i++)
        if (strcmp(sb->meta[i].key, key) == 0)
            return sb->meta[i].value;
    return NULL;
}
