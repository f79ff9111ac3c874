/* keys_file.c — API-key digests kept out of the policy, in a file of their
 * own (the gateway's `api_keys_file`; on Kubernetes a Secret, while the
 * policy is a ConfigMap). The file maps tenant ids to SHA-256 digests:
 *
 *     # tenant id: SHA-256 hex digests of its API keys (sandgate-policy hash-key)
 *     example:
 *       - 3f5d...c1
 *
 * Each digest joins its tenant's api_keys as if the policy listed it:
 * same format check, and a digest belongs to one tenant only, across the
 * policy and the file. A tenant the policy does not define is an error
 * (fail closed: a typo must not leave a key unusable without a word, nor
 * create a tenant). Errors name the keys file, line and column. Runs after
 * the policy itself validated, on the policy being built (its arena). */
#include <stdlib.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/validate_internal.h"

static int digest_ok(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
}

int pol_add_key_file(policy *p, pol_diag *d, const ynode *root)
{
    pol_vctx v = {.p = p, .d = d, .a = &p->arena};
    if (!root)
        return 0;   /* an empty file: no keys from it */
    if (y_is(d, root, "", YN_MAP) < 0)
        return -1;
    size_t n_file = 0;
    for (size_t i = 0; i + 1 < root->n; i += 2)
        n_file += root->kids[i + 1]->kind == YN_SEQ ? root->kids[i + 1]->n : 0;
    /* per tenant: how many digests the file adds */
    size_t *add = calloc(p->n_tenants + 1, sizeof *add);
    const char **dig = calloc(n_file + 1, sizeof *dig);
    size_t *who = calloc(n_file + 1, sizeof *who);
    const ynode **at = calloc(n_file + 1, sizeof *at);
    size_t n = 0;
    for (size_t i = 0; i + 1 < root->n; i += 2) {
        const ynode *k = root->kids[i], *l = root->kids[i + 1];
        const char *id = k->str ? k->str : "";
        long t = pol_name_lookup(&p->by_tenant, id);
        if (t < 0) {
            pol_err(d, k, id, "no tenant '%s' in the policy, expected one of its tenant ids", id);
            continue;
        }
        if (y_is(d, l, id, YN_SEQ) < 0)
            continue;
        for (size_t j = 0; j < l->n; j++) {
            char sub[YPATH_MAX];
            const char *s;
            if (pol_list_str(&v, l, id, j, sub, &s) < 0)
                continue;
            if (!digest_ok(s)) {
                pol_err(d, l->kids[j], sub,
                        "expected a SHA-256 hex digest (64 hex characters), not the key itself; use 'sandgate-policy hash-key'");
                continue;
            }
            char *low = pol_strdup(v.a, s);
            for (char *c = low; *c; c++)
                if (*c >= 'A' && *c <= 'F')
                    *c = (char)(*c - 'A' + 'a');
            /* one tenant per digest: against the policy's, then the file's */
            size_t hits;
            const uint32_t *pv = pol_index_get(&p->by_key, low, 64, &hits);
            size_t dup = n;
            for (size_t e = 0; e < n && dup == n; e++)
                if (strcmp(dig[e], low) == 0)
                    dup = e;
            if (hits)
                pol_err(d, l->kids[j], sub, "duplicate API key hash '%s': the policy gives it to tenant '%s'",
                        low, p->tenants[pv[0]].id);
            else if (dup < n)
                pol_err(d, l->kids[j], sub, "duplicate API key hash '%s', first at line %u", low,
                        at[dup]->line);
            else {
                dig[n] = low;
                who[n] = (size_t)t;
                at[n++] = l->kids[j];
                add[t]++;
            }
        }
    }
    int rc = d->n_errs ? -1 : 0;
    if (rc == 0 && n) {
        /* Each tenant's list: the policy's digests, then the file's. */
        size_t total = 0;
        for (size_t t = 0; t < p->n_tenants; t++) {
            pol_tenant *te = &p->tenants[t];
            if (add[t]) {
                const char **keys = pol_alloc(v.a, (te->n_keys + add[t] + 1) * sizeof *keys);
                memcpy(keys, te->key_hashes, te->n_keys * sizeof *keys);
                for (size_t e = 0; e < n; e++)
                    if (who[e] == t)
                        keys[te->n_keys++] = dig[e];
                te->key_hashes = keys;
            }
            total += te->n_keys;
        }
        pol_named *all = malloc((total + 1) * sizeof *all);
        size_t m = 0;
        for (size_t t = 0; t < p->n_tenants; t++)
            for (size_t k = 0; k < p->tenants[t].n_keys; k++)
                all[m++] = (pol_named){p->tenants[t].key_hashes[k], NULL, t};
        pol_build_name_index(&v, &p->by_key, all, m);
        free(all);
    }
    free(add);
    free(dig);
    free(who);
    free(at);
    return rc;
}
