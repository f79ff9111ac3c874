/* validate_internal.h — what the schema files (validate*.c) share and the
 * rest of policy/ does not: the walk's context, (name, node) pairs for
 * duplicate checks and name indexes, and one reader per section. Every
 * reader reports into v->d and carries on, so a load lists all errors.
 * The loader's entry point, pol_build, stays in internal.h. */
#ifndef SG_POLICY_VALIDATE_INTERNAL_H
#define SG_POLICY_VALIDATE_INTERNAL_H

#include "policy/internal.h"

typedef struct pol_vctx {
    policy *p;               /* borrowed: the policy being built */
    pol_diag *d;             /* borrowed */
    pol_arena *a;            /* borrowed: p's arena */
} pol_vctx;

#define V_NAME_MAX 63
#define V_RULE_ID_MAX 40

/* A name defined at node; idx is its list position (or its tenant). */
typedef struct pol_named { const char *name; const ynode *node; size_t idx; } pol_named;

/* validate_names.c: ids, lists, uniqueness, name indexes, references */
const char *pol_read_id(pol_vctx *v, const ynode *n, const char *path, size_t max);
const ynode *pol_read_list(pol_vctx *v, const ynode *n, const char *path);
/* The list under key of map m (or absent); lp receives its path. */
const ynode *pol_key_list(pol_vctx *v, const ynode *m, const char *path, const char *key,
                          char lp[YPATH_MAX]);
/* Item i of list l (at path lp) as a string; sub receives the item's path.
 * -1 (reported) when it is not a string. */
int pol_list_str(pol_vctx *v, const ynode *l, const char *lp, size_t i, char sub[YPATH_MAX],
                 const char **s);
void pol_check_unique(pol_vctx *v, pol_named *items, size_t n, const char *what,
                      const char *path_fmt_prefix);
void pol_build_name_index(pol_vctx *v, pol_index *ix, pol_named *items, size_t n);
long pol_name_lookup(const pol_index *ix, const char *name);
void pol_read_tasks(pol_vctx *v, const ynode *m, const char *path, const char **out);
uint32_t *pol_read_tenant_refs(pol_vctx *v, const ynode *n, const char *path,
                               size_t *count, int *all);
uint32_t *pol_read_template_refs(pol_vctx *v, const ynode *n, const char *path, size_t *count);

/* validate_limits.c */
int pol_positive32(pol_vctx *v, const ynode *n, const char *path, uint32_t x);
void pol_read_defaults(pol_vctx *v, const ynode *m);
void pol_read_limits(pol_vctx *v, const ynode *m, const char *path, policy_limits *l,
                     uint32_t *set);
void pol_read_quotas(pol_vctx *v, const ynode *m, const char *path, policy_limits *l,
                     uint32_t *set);
void pol_check_ttl_order(pol_vctx *v, const ynode *limits, const char *path,
                         const policy_limits *l);

/* validate_network.c: tenant_level rules may also narrow to templates */
void pol_read_network(pol_vctx *v, const ynode *n, const char *path, const char *owner,
                      int tenant_level, pol_ruleset *rs);

/* validate_secrets.c */
void pol_read_source(pol_vctx *v, const ynode *m, const char *path, int *kind,
                     const char **src);
void pol_read_secret(pol_vctx *v, const ynode *m, size_t i, pol_secret *s);

/* validate_templates.c */
void pol_read_template(pol_vctx *v, const ynode *m, size_t i, pol_template *t);
void pol_warn_unused_templates(pol_vctx *v, const ynode *tl, const ynode *nl);
/* `isolation: process|gvisor` at n into *out; `what` names the owner in errors. */
void pol_read_isolation(pol_vctx *v, const ynode *n, const char *path, const char *what,
                        sg_isolation *out);
void pol_warn_isolation(pol_vctx *v, const ynode *nl);

/* validate_tenants.c: every tenant, then the key and identity indexes */
void pol_read_tenants(pol_vctx *v, const ynode *l);

#endif
