/* internal.h — what the policy/ files share and nobody else sees: the string
 * index and the in-memory shape of a loaded policy (the arena, YAML tree,
 * diagnostics and readers are tree.h, shared with config/). The public API
 * is policy.h / secret.h / explain.h / lint.h / tree.h. */
#ifndef SG_POLICY_INTERNAL_H
#define SG_POLICY_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/isolation.h"
#include "policy/policy.h"
#include "policy/tree.h"

/* ---- string index (index.c): key → ascending list of uint32 -------- */
typedef struct pol_index {
    struct pol_slot *slots;  /* arena */
    size_t cap;              /* power of two, 0 = empty */
    uint32_t *vals;          /* arena */
} pol_index;
typedef struct pol_pair { const char *key; uint32_t val; } pol_pair;
/* Build from pairs (sorted in place). Keys are borrowed and must outlive. */
void pol_index_build(pol_arena *a, pol_index *ix, pol_pair *pairs, size_t n);
/* Values stored for key (len bytes); NULL and *n = 0 if absent. */
const uint32_t *pol_index_get(const pol_index *ix, const char *key, size_t len, size_t *n);

/* ---- addresses and egress (egress.c) ---------------------------------- */
typedef struct pol_cidr {
    uint8_t addr[16];        /* IPv4 stored as ::ffff:a.b.c.d */
    uint8_t plen;            /* 0..128 in the 16-byte space */
} pol_cidr;
/* Parse an IP literal (IPv4 incl. decimal/octal/hex forms, IPv6, [v6],
 * IPv4-mapped/compatible IPv6 → IPv4). Returns 1 if s is an IP literal. */
int pol_ip_parse(const char *s, uint8_t out[16]);
int pol_cidr_parse(const char *s, pol_cidr *out);   /* 0 ok, -1 bad */
int pol_cidr_contains(const pol_cidr *c, const uint8_t ip[16]);
/* Name of the special range ip falls into ("loopback", …) or NULL; *range
 * receives the range so a rule can be checked to lie inside it. */
const char *pol_ip_special(const uint8_t ip[16], pol_cidr *range);
void pol_ip_format(const uint8_t ip[16], char *buf, size_t cap);
/* Host names: 0 ok, else a reason string. Lowercases into out. */
const char *pol_host_check(const char *s, char *out, size_t cap, int allow_wild);
int pol_glob(const char *pat, const char *s);            /* '*', '?' */
const char *pol_glob_check(const char *pat);             /* NULL ok or reason */

/* ---- the loaded policy ------------------------------------------------ */
typedef struct pol_rule {
    const char *id;              /* full rule id */
    const char **hosts; size_t n_hosts;       /* lowercase; "*.x" wild */
    pol_cidr *cidrs; const char **cidr_strs; size_t n_cidrs;
    uint32_t *ports; size_t n_ports;          /* empty = any port */
    const char *tasks;                        /* glob or NULL = any */
    const char **templates; size_t n_templates; /* tenant rules: narrow */
} pol_rule;

typedef struct pol_ruleset {
    pol_rule *rules; size_t n;
    pol_index exact;             /* host → rule idx */
    pol_index wild;              /* suffix after "*." → rule idx */
    uint32_t *cidr_rules; size_t n_cidr_rules;
    pol_index cidr;              /* "hex(masked addr)/plen" → rule idx */
    uint8_t plens[129]; size_t n_plens;   /* distinct prefix lengths */
} pol_ruleset;

typedef struct pol_limits_src {
    policy_limits v;
    uint32_t overridden;         /* bit per POL_LIM_* from the tenant */
} pol_limits_src;

enum { POL_SRC_NONE = 0, POL_SRC_FILE = 1, POL_SRC_ENV = 2 };

typedef struct pol_tenant {
    const char *id;
    const char **key_hashes; size_t n_keys;   /* lowercase hex */
    const char **mtls; size_t n_mtls;
    uint32_t *templates; size_t n_templates;  /* template idx */
    int scope;
    int require_mtls;
    sg_isolation isolation;      /* minimum its sandboxes need; UNSET = none */
    pol_limits_src limits;
    pol_ruleset net;
    int tokens_enabled, tokens_required;
    int tokens_src_kind; const char *tokens_src;
    uint32_t tokens_max_ttl_s;
} pol_tenant;

typedef struct pol_template {
    const char *name;
    int all_tenants;
    uint32_t *tenants; size_t n_tenants;      /* tenant idx */
    pol_ruleset net;
    sg_isolation isolation;      /* what it runs under, as the policy says;
                                    UNSET = not said, taken as process */
} pol_template;

typedef struct pol_grant {
    const char *id;
    int all_tenants;
    uint32_t *tenants; size_t n_tenants;
    uint32_t *templates; size_t n_templates;  /* empty = any */
    const char *tasks;
} pol_grant;

typedef struct pol_secret {
    const char *name, *env;
    int src_kind; const char *src;
    pol_grant *grants; size_t n_grants;
} pol_secret;

struct policy {
    atomic_uint refs;
    pol_arena arena;             /* owns everything below */
    char hash[65];
    policy_limits defaults;
    pol_tenant *tenants; size_t n_tenants;
    pol_template *templates; size_t n_templates;
    pol_secret *secrets; size_t n_secrets;
    pol_index by_tenant, by_template, by_secret, by_key, by_mtls;
};

/* validate.c: tree → policy (all checks). Returns 0 if no error. */
int pol_build(policy *p, pol_diag *d, const ynode *root);
/* keys_file.c: a keys file's tenant -> digests, added to a built policy. */
int pol_add_key_file(policy *p, pol_diag *d, const ynode *root);

/* lookups (load.c) */
const pol_tenant *pol_tenant_find(const policy *p, const char *id);
const pol_template *pol_template_find(const policy *p, const char *name);
const pol_secret *pol_secret_find(const policy *p, const char *name);

/* egress.c: index of the first rule of rs that applies to (template, task,
 * port) and allows the name (exact, or "*.x" asks match wildcard rules only)
 * or the address; -1 if none. For an address in a special range, `inside`
 * is that range and only a rule whose CIDR lies within it counts. */
long pol_ruleset_match_name(const pol_ruleset *rs, const char *template_name,
                            const char *task, const char *host, uint32_t port);
long pol_ruleset_match_ip(const pol_ruleset *rs, const char *template_name,
                          const char *task, const uint8_t ip[16], uint32_t port,
                          const pol_cidr *inside);
/* Does r apply to (template, task), ports aside? */
int pol_rule_applies(const pol_rule *r, const char *template_name, const char *task);
void pol_ruleset_index(pol_arena *a, pol_ruleset *rs);

/* limit bits for pol_limits_src.overridden */
enum {
    POL_LIM_ACTION_TIMEOUT = 1u << 0, POL_LIM_TTL = 1u << 1, POL_LIM_TTL_MAX = 1u << 2,
    POL_LIM_IDLE = 1u << 3, POL_LIM_OUTPUT = 1u << 4, POL_LIM_MEMORY = 1u << 5,
    POL_LIM_CPU = 1u << 6, POL_LIM_PIDS = 1u << 7, POL_LIM_DISK = 1u << 8,
    POL_LIM_FILE = 1u << 9, POL_LIM_EGRESS = 1u << 10, POL_LIM_SB_TENANT = 1u << 11,
    POL_LIM_SB_USER = 1u << 12, POL_LIM_CONCURRENT = 1u << 13, POL_LIM_RATE = 1u << 14,
    POL_LIM_BURST = 1u << 15, POL_LIM_ENV_BYTES = 1u << 16, POL_LIM_ENV_ENTRIES = 1u << 17,
    POL_LIM_META_ENTRIES = 1u << 18, POL_LIM_META_BYTES = 1u << 19,
    POL_LIM_PROCESSES = 1u << 20, POL_LIM_PROC_OUTPUT = 1u << 21,
};

#endif
