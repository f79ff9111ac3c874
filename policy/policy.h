/* policy.h — the security team's policy: loaded from YAML, immutable once
 * built, shared by reference. Decisions are pure functions of
 * (policy, identity, request): no I/O, no clock, no globals, so they are
 * table-tested. Loading (parse.c, validate.c) is the only part that reads a
 * file. The gateway holds one live policy pointer and swaps it on reload
 * (gateway/reload.c); each call holds a ref to the policy it started with.
 *
 * Every decision returns allow/deny, the id of the rule that decided (a
 * stable string such as "tenants.acme.network.pypi" or "default.deny-egress";
 * the scheme is in docs/policy.md),
 * and a human message that names what was asked. */
#ifndef SG_POLICY_H
#define SG_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/isolation.h"

typedef struct policy policy;  /* opaque, refcounted, immutable */

/* ---- loading ---------------------------------------------------------- */

/* All errors from one load, each "file:line:col: key.path: what, expected X".
 * Owned by the caller; free with policy_errors_cleanup. */
typedef struct policy_errors {
    char **items;
    size_t n;
} policy_errors;
void policy_errors_cleanup(policy_errors *errs);

/* Parse and validate `path` in full. On any error returns SG_EINVAL, fills
 * errs with every error found, and sets *out to NULL: a file with an error
 * is never loaded. On success *out holds one ref. Secret *sources* are
 * recorded but not read here (values are resolved by policy_secret_value). */
int policy_load_file(const char *path, policy **out, policy_errors *errs);
int policy_load_buffer(const char *name, const char *yaml, size_t len,
                       policy **out, policy_errors *errs);
/* The same, with the API-key digests of a keys file (keys_name, keys:
 * a mapping of tenant id to digests, policy/keys_file.c) added to the
 * tenants'; an error in either rejects both. */
int policy_load_buffers(const char *name, const char *yaml, size_t len, const char *keys_name,
                        const char *keys, size_t keys_len, policy **out, policy_errors *errs);

policy *policy_ref(policy *p);
void policy_unref(policy *p);

/* SHA-256 of the file's bytes, lowercase hex (64 chars). */
const char *policy_hash(const policy *p);

/* ---- identity ---------------------------------------------------------- */

/* Find the tenant whose API-key hash list holds sha256(api_key). The
 * comparison is constant-time per stored hash. Returns the tenant id
 * (borrowed from p) or NULL. */
const char *policy_tenant_by_api_key(const policy *p, const char *api_key);
/* Find the tenant mapped to an mTLS identity (SPIFFE ID or SAN). */
const char *policy_tenant_by_mtls(const policy *p, const char *identity);

/* ---- decisions ----------------------------------------------------------- */

typedef struct policy_decision {
    int allow;            /* 1 allow, 0 deny */
    char rule[128];       /* rule that decided */
    char message[256];    /* what was asked and why */
    int err;              /* on deny: SG_EDENIED, SG_EQUOTA (a quota), SG_ENOTFOUND
                             (unknown tenant/template/secret) or SG_EUNAUTH;
                             SG_OK on allow. Added after the contract. */
} policy_decision;

typedef enum { POLICY_SCOPE_PER_TASK = 0, POLICY_SCOPE_PER_USER = 1 } policy_scope;

typedef struct policy_limits {
    uint32_t action_timeout_s;     /* RunCode/Exec timeout */
    uint32_t ttl_s;                /* sandbox lifetime */
    uint32_t ttl_max_s;            /* cap for ttl and extensions */
    uint32_t idle_timeout_s;
    uint64_t output_bytes;         /* per action */
    uint64_t memory_bytes;
    uint32_t cpu_millis;           /* 1000 = one core */
    uint32_t pids;
    uint64_t disk_bytes;
    uint64_t file_bytes;           /* ReadFile/WriteFile cap */
    uint64_t egress_bytes;         /* per sandbox */
    uint64_t env_bytes;            /* CreateSandbox env: names + values, summed */
    uint32_t env_entries;          /* CreateSandbox env: variables */
    uint32_t metadata_entries;     /* CreateSandbox metadata: labels */
    uint32_t metadata_bytes;       /* CreateSandbox metadata: keys + values, summed */
    uint32_t processes;            /* background processes running at once, per sandbox */
    uint64_t process_output_bytes; /* per background process stream: the bytes kept */
    uint32_t max_sandboxes_tenant; /* live sandboxes */
    uint32_t max_sandboxes_user;
    uint32_t max_concurrent_actions;
    double rate_per_s;             /* token bucket refill */
    uint32_t rate_burst;
} policy_limits;

/* env limits: the defaults, and the ceilings a policy may not exceed (the
 * host enforces the ceilings itself, whatever the gateway sent). */
#define POLICY_ENV_BYTES_DEFAULT (64u << 10)
#define POLICY_ENV_BYTES_MAX (128u << 10)
#define POLICY_ENV_ENTRIES_DEFAULT 256u
#define POLICY_ENV_ENTRIES_MAX 1024u
/* Sandbox labels (metadata): defaults and ceilings, and each key and value's
 * bound (the edges check those: gateway/rules.c, host/core/rules.c). */
#define POLICY_METADATA_ENTRIES_DEFAULT 16u
#define POLICY_METADATA_ENTRIES_MAX 64u
#define POLICY_METADATA_BYTES_DEFAULT (4u << 10)
#define POLICY_METADATA_BYTES_MAX (16u << 10)
#define POLICY_METADATA_KEY_MAX 63u
#define POLICY_METADATA_VALUE_MAX 255u
/* Background processes: ceilings (what a host holds per sandbox). */
#define POLICY_PROCESSES_MAX 256u
#define POLICY_PROCESS_OUTPUT_MAX (64u << 20)
/* One variable, name + value: "NAME=VALUE" and its NUL within execve's
 * MAX_ARG_STRLEN (128 KiB); not a policy setting. */
#define POLICY_ENV_VAR_MAX ((128u << 10) - 2)

/* The limits that apply to a tenant (defaults overlaid by its overrides). */
int policy_tenant_limits(const policy *p, const char *tenant, policy_limits *out);

/* Effective cap: min(requested, policy); requested 0 means "the default". */
uint32_t policy_cap_u32(uint32_t requested, uint32_t def, uint32_t max);
uint64_t policy_cap_u64(uint64_t requested, uint64_t def, uint64_t max);

typedef struct policy_egress_ask {
    const char *host;   /* name or IP literal */
    uint32_t port;      /* 0 = any */
} policy_egress_ask;

typedef struct policy_create_ask {
    const char *tenant;
    const char *user;
    const char *task;
    const char *template_name;
    const policy_egress_ask *egress; size_t n_egress;
    const char *const *secrets; size_t n_secrets;
    /* quota view, filled by tenancy/ from live state */
    uint32_t live_sandboxes_tenant;
    uint32_t live_sandboxes_user;
} policy_create_ask;

/* May this tenant create this sandbox: template allowed, scope, quotas,
 * every egress ask covered by a rule, every secret granted. The first
 * failing check decides. *scope receives the tenant's scope. */
void policy_decide_create(const policy *p, const policy_create_ask *ask,
                          policy_scope *scope, policy_decision *out);

/* One egress rule granted to a sandbox, as the host proxy enforces it. */
typedef struct policy_egress_rule {
    const char *id;       /* borrowed from the policy */
    const char *host;     /* exact or "*.suffix", or NULL */
    const char *cidr;     /* or NULL */
    const uint32_t *ports; size_t n_ports;  /* empty = any */
} policy_egress_rule;

/* Rules that apply to (tenant, template, task). Fills up to max, returns
 * the number that apply. Borrowed from p. */
size_t policy_egress_rules(const policy *p, const char *tenant,
                           const char *template_name, const char *task,
                           policy_egress_rule *out, size_t max);

/* Would a connection to host:port (resolved to ip, may be NULL) from a
 * sandbox of (tenant, template, task) be allowed? Name rules match host
 * names only; an IP literal matches only CIDR rules; loopback, private,
 * link-local, multicast and unspecified addresses are denied unless a CIDR
 * rule names them. */
void policy_decide_egress(const policy *p, const char *tenant,
                          const char *template_name, const char *task,
                          const char *host, uint32_t port, const char *ip,
                          policy_decision *out);

typedef struct policy_secret_grant {
    const char *name;     /* policy name */
    const char *env;      /* variable inside the sandbox */
    const char *source_kind;  /* "file" or "env" */
    const char *source;       /* path or gateway variable name */
} policy_secret_grant;

/* Which of the asked secrets (tenant, template, task) may receive. Denies
 * the whole set if any one is not granted. */
void policy_decide_credentials(const policy *p, const char *tenant,
                               const char *template_name, const char *task,
                               const char *const *asked, size_t n_asked,
                               policy_secret_grant *out, size_t *n_out,
                               policy_decision *dec);

/* Isolation (docs/policy.md "Isolation"). A template's is what the policy
 * says it runs under (process when it says nothing, or is unknown); a
 * tenant's is the minimum its sandboxes need (UNSET: none). A create is
 * denied when the template's is below the tenant's; an allowed create gets
 * the template's, which the gateway sends to the host as the minimum the
 * host's own template must meet. */
sg_isolation policy_template_isolation(const policy *p, const char *template_name);
sg_isolation policy_tenant_isolation(const policy *p, const char *tenant);

/* Templates the policy names, and whether a tenant may use one. */
int policy_template_allowed(const policy *p, const char *tenant, const char *template_name);

#endif
