/* validate_limits.c — resource limits and quotas: the built-in defaults, the
 * `defaults` section, and the limits/quotas mappings a tenant may override
 * (recording which ones it did). Owns the rule that limits are positive
 * while quotas may be 0, and that ttl may not exceed ttl_max. Leaves
 * enforcing them to decide.c, tenancy/ and host/. */
#include <string.h>

#include "policy/validate_internal.h"

static const char *const limit_keys[] = {
    "action_timeout", "ttl", "ttl_max", "idle_timeout", "output_bytes", "memory",
    "cpu_millis", "pids", "disk", "file_bytes", "egress_bytes", "env_bytes", "env_entries",
    "metadata_entries", "metadata_bytes", "processes", "process_output_bytes", NULL};
static const char *const quota_keys[] = {
    "sandboxes_per_tenant", "sandboxes_per_user", "concurrent_actions", "rate_per_s",
    "rate_burst", NULL};

static void default_limits(policy_limits *l)
{
    *l = (policy_limits){
        .action_timeout_s = 30, .ttl_s = 600, .ttl_max_s = 3600, .idle_timeout_s = 300,
        .output_bytes = 64 << 10, .memory_bytes = 512ull << 20, .cpu_millis = 1000,
        .pids = 128, .disk_bytes = 256ull << 20, .file_bytes = 16ull << 20,
        .egress_bytes = 64ull << 20, .env_bytes = POLICY_ENV_BYTES_DEFAULT,
        .env_entries = POLICY_ENV_ENTRIES_DEFAULT,
        .metadata_entries = POLICY_METADATA_ENTRIES_DEFAULT,
        .metadata_bytes = POLICY_METADATA_BYTES_DEFAULT, .processes = 16,
        .process_output_bytes = 1u << 20, .max_sandboxes_tenant = 100, .max_sandboxes_user = 10,
        .max_concurrent_actions = 32, .rate_per_s = 20, .rate_burst = 40};
}

int pol_positive32(pol_vctx *v, const ynode *n, const char *path, uint32_t x)
{
    if (x == 0) {
        pol_err(v->d, n, path, "must be greater than 0");
        return -1;
    }
    return 0;
}

static int positive64(pol_vctx *v, const ynode *n, const char *path, uint64_t x)
{
    return pol_positive32(v, n, path, x ? 1 : 0);
}

/* One limits mapping over `l`; sets bits in *set for the keys present. */
void pol_read_limits(pol_vctx *v, const ynode *m, const char *path, policy_limits *l, uint32_t *set)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, limit_keys);
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const char *k = m->kids[i]->str;
        const ynode *val = m->kids[i + 1];
        char sub[YPATH_MAX];
        ypath_key(sub, sizeof sub, path, k ? k : "");
        uint32_t u32;
        uint64_t u64;
        int ok = 0;
#define DUR(key, field, bit) else if (strcmp(k, key) == 0) { \
    ok = y_duration(v->d, val, sub, &u32) == 0 && pol_positive32(v, val, sub, u32) == 0; \
    if (ok) { l->field = u32; *set |= bit; } }
#define SIZE(key, field, bit) else if (strcmp(k, key) == 0) { \
    ok = y_size(v->d, val, sub, &u64) == 0 && positive64(v, val, sub, u64) == 0; \
    if (ok) { l->field = u64; *set |= bit; } }
#define U32(key, field, bit, max) else if (strcmp(k, key) == 0) { \
    ok = y_u32(v->d, val, sub, max, &u32) == 0 && pol_positive32(v, val, sub, u32) == 0; \
    if (ok) { l->field = u32; *set |= bit; } }
        if (!k) continue;
        DUR("action_timeout", action_timeout_s, POL_LIM_ACTION_TIMEOUT)
        DUR("ttl", ttl_s, POL_LIM_TTL)
        DUR("ttl_max", ttl_max_s, POL_LIM_TTL_MAX)
        DUR("idle_timeout", idle_timeout_s, POL_LIM_IDLE)
        SIZE("output_bytes", output_bytes, POL_LIM_OUTPUT)
        SIZE("memory", memory_bytes, POL_LIM_MEMORY)
        U32("cpu_millis", cpu_millis, POL_LIM_CPU, 1024000)
        U32("pids", pids, POL_LIM_PIDS, 1u << 22)
        SIZE("disk", disk_bytes, POL_LIM_DISK)
        SIZE("file_bytes", file_bytes, POL_LIM_FILE)
        SIZE("egress_bytes", egress_bytes, POL_LIM_EGRESS)
        /* The env rides to the sandbox in one message and into every execve:
         * the ceilings keep both within what the host can carry. */
        else if (strcmp(k, "env_bytes") == 0) {
            ok = y_size(v->d, val, sub, &u64) == 0 && positive64(v, val, sub, u64) == 0;
            if (ok && u64 > POLICY_ENV_BYTES_MAX)
                pol_err(v->d, val, sub, "must be at most %u (128KiB), the most a sandbox's "
                        "environment may hold", (unsigned)POLICY_ENV_BYTES_MAX);
            else if (ok) { l->env_bytes = u64; *set |= POL_LIM_ENV_BYTES; }
        }
        U32("env_entries", env_entries, POL_LIM_ENV_ENTRIES, POLICY_ENV_ENTRIES_MAX)
        /* Labels ride with the sandbox in every Get/List answer: small. */
        U32("metadata_entries", metadata_entries, POL_LIM_META_ENTRIES,
            POLICY_METADATA_ENTRIES_MAX)
        else if (strcmp(k, "metadata_bytes") == 0) {
            ok = y_size(v->d, val, sub, &u64) == 0 && positive64(v, val, sub, u64) == 0;
            if (ok && u64 > POLICY_METADATA_BYTES_MAX)
                pol_err(v->d, val, sub, "must be at most %u (16KiB), the most a sandbox's "
                        "labels may hold", (unsigned)POLICY_METADATA_BYTES_MAX);
            else if (ok) { l->metadata_bytes = (uint32_t)u64; *set |= POL_LIM_META_BYTES; }
        }
        /* Each running process costs the host its output rings. */
        U32("processes", processes, POL_LIM_PROCESSES, POLICY_PROCESSES_MAX)
        else if (strcmp(k, "process_output_bytes") == 0) {
            ok = y_size(v->d, val, sub, &u64) == 0 && positive64(v, val, sub, u64) == 0;
            if (ok && u64 > POLICY_PROCESS_OUTPUT_MAX)
                pol_err(v->d, val, sub, "must be at most %u (64MiB), the most a host keeps of "
                        "one process stream", (unsigned)POLICY_PROCESS_OUTPUT_MAX);
            else if (ok) { l->process_output_bytes = u64; *set |= POL_LIM_PROC_OUTPUT; }
        }
        (void)ok;
    }
}

/* Quotas may be 0: "this tenant may create nothing" is a real setting. */
void pol_read_quotas(pol_vctx *v, const ynode *m, const char *path, policy_limits *l, uint32_t *set)
{
    if (y_is(v->d, m, path, YN_MAP) < 0)
        return;
    ymap_check(v->d, m, path, quota_keys);
    for (size_t i = 0; i + 1 < m->n; i += 2) {
        const char *k = m->kids[i]->str;
        const ynode *val = m->kids[i + 1];
        char sub[YPATH_MAX];
        uint32_t u32;
        double dv;
        if (!k)
            continue;
        ypath_key(sub, sizeof sub, path, k);
#define Q32(key, field, bit) else if (strcmp(k, key) == 0) { \
    if (y_u32(v->d, val, sub, 1000000, &u32) == 0) { l->field = u32; *set |= bit; } }
        if (0) {}
        Q32("sandboxes_per_tenant", max_sandboxes_tenant, POL_LIM_SB_TENANT)
        Q32("sandboxes_per_user", max_sandboxes_user, POL_LIM_SB_USER)
        Q32("concurrent_actions", max_concurrent_actions, POL_LIM_CONCURRENT)
        Q32("rate_burst", rate_burst, POL_LIM_BURST)
        else if (strcmp(k, "rate_per_s") == 0 && y_double(v->d, val, sub, &dv) == 0) {
            l->rate_per_s = dv;
            *set |= POL_LIM_RATE;
        }
    }
}

void pol_check_ttl_order(pol_vctx *v, const ynode *limits, const char *path, const policy_limits *l)
{
    if (l->ttl_s <= l->ttl_max_s)
        return;
    const ynode *at = ymap_get(limits, "ttl") ? ymap_get(limits, "ttl") : ymap_get(limits, "ttl_max");
    char sub[YPATH_MAX];
    ypath_key(sub, sizeof sub, path, ymap_get(limits, "ttl") ? "ttl" : "ttl_max");
    pol_err(v->d, at ? at : limits, sub, "ttl %us is above ttl_max %us", l->ttl_s, l->ttl_max_s);
}

void pol_read_defaults(pol_vctx *v, const ynode *m)
{
    default_limits(&v->p->defaults);
    if (!m || y_is(v->d, m, "defaults", YN_MAP) < 0)
        return;
    static const char *const keys[] = {"limits", "quotas", NULL};
    ymap_check(v->d, m, "defaults", keys);
    uint32_t set = 0;
    const ynode *lim = ymap_get(m, "limits");
    if (lim)
        pol_read_limits(v, lim, "defaults.limits", &v->p->defaults, &set);
    if (ymap_get(m, "quotas"))
        pol_read_quotas(v, ymap_get(m, "quotas"), "defaults.quotas", &v->p->defaults, &set);
    if (lim && lim->kind == YN_MAP)
        pol_check_ttl_order(v, lim, "defaults.limits", &v->p->defaults);
}
