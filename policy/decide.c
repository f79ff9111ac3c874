/* decide.c — the pure decisions: create (template, scope, quotas, egress
 * asks, secrets), egress connections, credentials, limits, and the queries
 * tenancy/ needs. Functions of (policy, identity, request) only: no I/O, no
 * clock, no globals. Each decision names the rule that decided (see
 * docs/policy.md for the id scheme) and a message saying what was asked.
 * Matching mechanics (addresses, wildcards, CIDRs) live in egress.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/query.h"

static void decide(policy_decision *out, int allow, int err, const char *rule,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void decide(policy_decision *out, int allow, int err, const char *rule,
                   const char *fmt, ...)
{
    out->allow = allow;
    out->err = allow ? SG_OK : err;
    snprintf(out->rule, sizeof out->rule, "%s", rule);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
}

static const char *nz(const char *s)
{
    return s && *s ? s : "-";
}

/* ---- templates and limits ----------------------------------------------- */

/* The rule id that lets tenant t use template tp, written to buf; 0 if none. */
static int template_grant(const policy *p, const pol_tenant *t, const pol_template *tp,
                          char *buf, size_t cap)
{
    uint32_t ti = (uint32_t)(tp - p->templates), ni = (uint32_t)(t - p->tenants);
    for (size_t i = 0; i < t->n_templates; i++)
        if (t->templates[i] == ti)
            return snprintf(buf, cap, "tenants.%s.templates", t->id), 1;
    int listed = tp->all_tenants;
    for (size_t i = 0; !listed && i < tp->n_tenants; i++)
        listed = tp->tenants[i] == ni;
    if (listed)
        snprintf(buf, cap, "templates.%s.tenants", tp->name);
    return listed;
}

int policy_template_allowed(const policy *p, const char *tenant, const char *template_name)
{
    const pol_tenant *t = pol_tenant_find(p, tenant);
    const pol_template *tp = pol_template_find(p, template_name);
    char rule[128];
    return t && tp && template_grant(p, t, tp, rule, sizeof rule);
}

static sg_isolation template_iso(const pol_template *tp)
{
    return tp && tp->isolation != SG_ISOLATION_UNSET ? tp->isolation : SG_ISOLATION_PROCESS;
}

sg_isolation policy_template_isolation(const policy *p, const char *template_name)
{
    return template_iso(template_name ? pol_template_find(p, template_name) : NULL);
}

sg_isolation policy_tenant_isolation(const policy *p, const char *tenant)
{
    const pol_tenant *t = tenant ? pol_tenant_find(p, tenant) : NULL;
    return t ? t->isolation : SG_ISOLATION_UNSET;
}

int policy_tenant_limits(const policy *p, const char *tenant, policy_limits *out)
{
    const pol_tenant *t = pol_tenant_find(p, tenant);
    if (!t)
        return SG_ENOTFOUND;
    *out = t->limits.v;
    return 0;
}

uint32_t policy_cap_u32(uint32_t requested, uint32_t def, uint32_t max)
{
    uint32_t v = requested ? requested : def;
    return v < max ? v : max;
}

uint64_t policy_cap_u64(uint64_t requested, uint64_t def, uint64_t max)
{
    uint64_t v = requested ? requested : def;
    return v < max ? v : max;
}

int policy_tenant_scope(const policy *p, const char *tenant)
{
    const pol_tenant *t = pol_tenant_find(p, tenant);
    return t ? t->scope : -1;
}

int policy_tenant_user_tokens(const policy *p, const char *tenant, policy_user_tokens *out)
{
    const pol_tenant *t = pol_tenant_find(p, tenant);
    if (!t)
        return SG_ENOTFOUND;
    *out = (policy_user_tokens){
        .enabled = t->tokens_enabled, .required = t->tokens_required,
        .source_kind = t->tokens_src_kind == POL_SRC_FILE ? "file" : t->tokens_src_kind == POL_SRC_ENV ? "env" : NULL,
        .source = t->tokens_src, .max_ttl_s = t->tokens_max_ttl_s};
    return 0;
}

size_t policy_tenant_count(const policy *p)
{
    return p->n_tenants;
}

size_t policy_rule_count(const policy *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_tenants; i++)
        n += p->tenants[i].net.n;
    for (size_t i = 0; i < p->n_templates; i++)
        n += p->templates[i].net.n;
    return n;
}

/* Where a limit came from, for rule ids: the tenant's override or defaults. */
static void limit_rule(const pol_tenant *t, uint32_t bit, const char *section,
                       const char *key, char *buf, size_t cap)
{
    if (t->limits.overridden & bit)
        snprintf(buf, cap, "tenants.%s.%s.%s", t->id, section, key);
    else
        snprintf(buf, cap, "defaults.%s.%s", section, key);
}

void policy_decide_limits(const policy *p, const char *tenant, const policy_limits *asked,
                          policy_limits *eff, policy_decision *out)
{
    const pol_tenant *t = pol_tenant_find(p, tenant);
    if (!t) {
        decide(out, 0, SG_ENOTFOUND, "default.unknown-tenant", "unknown tenant '%s'", nz(tenant));
        return;
    }
    const policy_limits *l = &t->limits.v;
    *eff = *l;
    char rule[128] = "", capped[160] = "";
    size_t off = 0;
#define CAP(field, def, max, bit, key) do { \
        eff->field = asked->field ? (asked->field < (max) ? asked->field : (max)) : (def); \
        if (asked->field > (max)) { \
            if (!rule[0]) limit_rule(t, bit, "limits", key, rule, sizeof rule); \
            if (off < sizeof capped) off += (size_t)snprintf(capped + off, sizeof capped - off, \
                "%s%s", off ? ", " : "", key); } } while (0)
    CAP(action_timeout_s, l->action_timeout_s, l->action_timeout_s, POL_LIM_ACTION_TIMEOUT, "action_timeout");
    CAP(ttl_s, l->ttl_s, l->ttl_max_s, POL_LIM_TTL_MAX, "ttl_max");
    CAP(idle_timeout_s, l->idle_timeout_s, l->idle_timeout_s, POL_LIM_IDLE, "idle_timeout");
    CAP(output_bytes, l->output_bytes, l->output_bytes, POL_LIM_OUTPUT, "output_bytes");
    CAP(memory_bytes, l->memory_bytes, l->memory_bytes, POL_LIM_MEMORY, "memory");
    CAP(cpu_millis, l->cpu_millis, l->cpu_millis, POL_LIM_CPU, "cpu_millis");
    CAP(pids, l->pids, l->pids, POL_LIM_PIDS, "pids");
    CAP(disk_bytes, l->disk_bytes, l->disk_bytes, POL_LIM_DISK, "disk");
    CAP(file_bytes, l->file_bytes, l->file_bytes, POL_LIM_FILE, "file_bytes");
    CAP(egress_bytes, l->egress_bytes, l->egress_bytes, POL_LIM_EGRESS, "egress_bytes");
    CAP(process_output_bytes, l->process_output_bytes, l->process_output_bytes, POL_LIM_PROC_OUTPUT,
        "process_output_bytes");
#undef CAP
    eff->ttl_max_s = l->ttl_max_s;
    if (rule[0])
        decide(out, 1, SG_OK, rule, "tenant '%s': capped %s at the policy limit", t->id, capped);
    else
        decide(out, 1, SG_OK, "defaults.limits", "tenant '%s': every ask within the policy limits", t->id);
}

/* ---- egress ------------------------------------------------------------ */

typedef struct egress_ctx {
    const policy *p;
    const pol_tenant *t;
    const pol_template *tp;   /* NULL if unknown or not allowed to t */
    const char *tmpl, *task;
} egress_ctx;

static const pol_rule *match_ip(const egress_ctx *c, const uint8_t ip[16], uint32_t port,
                                const pol_cidr *inside)
{
    long r = pol_ruleset_match_ip(&c->t->net, c->tmpl, c->task, ip, port, inside);
    if (r >= 0)
        return &c->t->net.rules[r];
    if (c->tp && (r = pol_ruleset_match_ip(&c->tp->net, NULL, c->task, ip, port, inside)) >= 0)
        return &c->tp->net.rules[r];
    return NULL;
}

static const pol_rule *match_name(const egress_ctx *c, const char *host, uint32_t port)
{
    long r = pol_ruleset_match_name(&c->t->net, c->tmpl, c->task, host, port);
    if (r >= 0)
        return &c->t->net.rules[r];
    if (c->tp && (r = pol_ruleset_match_name(&c->tp->net, NULL, c->task, host, port)) >= 0)
        return &c->tp->net.rules[r];
    return NULL;
}

static void deny_special(policy_decision *out, const char *what, const char *addr,
                         const char *kind, const pol_cidr *range)
{
    char net[64];
    pol_ip_format(range->addr, net, sizeof net);
    int plen = range->plen >= 96 && strchr(net, '.') ? range->plen - 96 : range->plen;
    decide(out, 0, SG_EDENIED, "default.deny-special-address",
           "egress to %s denied: %s is a %s address; only a CIDR rule inside %s/%d allows it",
           what, addr, kind, net, plen);
}

/* An IP literal target: only CIDR rules can match it. */
static void egress_ip(const egress_ctx *c, const uint8_t ip[16], const char *what,
                      uint32_t port, policy_decision *out)
{
    char addr[64];
    pol_ip_format(ip, addr, sizeof addr);
    pol_cidr range;
    const char *kind = pol_ip_special(ip, &range);
    const pol_rule *r = match_ip(c, ip, port, kind ? &range : NULL);
    if (r)
        decide(out, 1, SG_OK, r->id, "egress to %s (%s) allowed", what, addr);
    else if (kind)
        deny_special(out, what, addr, kind, &range);
    else
        decide(out, 0, SG_EDENIED, "default.deny-egress",
               "egress to %s denied: no CIDR rule covers %s for tenant '%s' (an IP literal matches only CIDR rules)",
               what, addr, c->t->id);
}

static void egress_one(const egress_ctx *c, const char *host, uint32_t port,
                       const char *resolved, int allow_wild, policy_decision *out)
{
    char what[300], norm[256];
    snprintf(what, sizeof what, port ? "%s:%u" : "%s (any port)", nz(host), port);
    if (port > 65535) {
        decide(out, 0, SG_EDENIED, "default.bad-request", "egress to %s denied: bad port", what);
        return;
    }
    uint8_t ip[16];
    if (host && pol_ip_parse(host, ip)) {
        egress_ip(c, ip, what, port, out);
        return;
    }
    const char *why = host ? pol_host_check(host, norm, sizeof norm, allow_wild) : "no host";
    if (why) {
        decide(out, 0, SG_EDENIED, "default.bad-request", "egress to %s denied: %s", what, why);
        return;
    }
    const pol_rule *r = match_name(c, norm, port);
    if (!r) {
        decide(out, 0, SG_EDENIED, "default.deny-egress",
               "egress to %s denied: no network rule for tenant '%s' (template %s, task %s) allows it",
               what, c->t->id, nz(c->tmpl), nz(c->task));
        return;
    }
    if (!resolved) {
        decide(out, 1, SG_OK, r->id, "egress to %s allowed", what);
        return;
    }
    /* The name is allowed; the address it resolved to must not be one the
     * policy protects (metadata, loopback, the private network). */
    uint8_t rip[16];
    if (!pol_ip_parse(resolved, rip)) {
        decide(out, 0, SG_EDENIED, "default.bad-request",
               "egress to %s denied: resolved address '%s' is not an IP address", what, resolved);
        return;
    }
    char addr[64];
    pol_ip_format(rip, addr, sizeof addr);
    pol_cidr range;
    const char *kind = pol_ip_special(rip, &range);
    if (!kind) {
        decide(out, 1, SG_OK, r->id, "egress to %s (%s) allowed", what, addr);
        return;
    }
    const pol_rule *cr = match_ip(c, rip, port, &range);
    if (cr)
        decide(out, 1, SG_OK, cr->id, "egress to %s (%s, %s) allowed by name rule %s and this CIDR rule",
               what, addr, kind, r->id);
    else
        deny_special(out, what, addr, kind, &range);
}

/* Set up the context; on failure `out` holds the deny. */
static int egress_ctx_init(egress_ctx *c, const policy *p, const char *tenant,
                           const char *tmpl, const char *task, policy_decision *out)
{
    *c = (egress_ctx){.p = p, .tmpl = tmpl, .task = task};
    c->t = pol_tenant_find(p, tenant);
    if (!c->t) {
        decide(out, 0, SG_ENOTFOUND, "default.unknown-tenant", "unknown tenant '%s'", nz(tenant));
        return -1;
    }
    const pol_template *tp = tmpl ? pol_template_find(p, tmpl) : NULL;
    char rule[128];
    /* template-level rules reach only tenants allowed to use the template */
    if (tp && template_grant(p, c->t, tp, rule, sizeof rule))
        c->tp = tp;
    return 0;
}

void policy_decide_egress(const policy *p, const char *tenant, const char *template_name,
                          const char *task, const char *host, uint32_t port, const char *ip,
                          policy_decision *out)
{
    egress_ctx c;
    if (egress_ctx_init(&c, p, tenant, template_name, task, out) < 0)
        return;
    egress_one(&c, host, port, ip, 0, out);
}

static size_t emit_rules(const pol_ruleset *rs, const char *tmpl, const char *task,
                         policy_egress_rule *out, size_t max, size_t n)
{
    for (size_t i = 0; i < rs->n; i++) {
        const pol_rule *r = &rs->rules[i];
        if (!pol_rule_applies(r, tmpl, task))
            continue;
        for (size_t h = 0; h < r->n_hosts + r->n_cidrs; h++, n++) {
            if (n >= max)
                continue;
            out[n] = (policy_egress_rule){
                .id = r->id, .host = h < r->n_hosts ? r->hosts[h] : NULL,
                .cidr = h < r->n_hosts ? NULL : r->cidr_strs[h - r->n_hosts],
                .ports = r->ports, .n_ports = r->n_ports};
        }
    }
    return n;
}

size_t policy_egress_rules(const policy *p, const char *tenant, const char *template_name,
                           const char *task, policy_egress_rule *out, size_t max)
{
    egress_ctx c;
    policy_decision ignored;
    if (egress_ctx_init(&c, p, tenant, template_name, task, &ignored) < 0)
        return 0;
    size_t n = emit_rules(&c.t->net, template_name, task, out, max, 0);
    if (c.tp)
        n = emit_rules(&c.tp->net, NULL, task, out, max, n);
    return n;
}

/* ---- credentials --------------------------------------------------------- */

static const pol_grant *find_grant(const policy *p, const pol_secret *s, const pol_tenant *t,
                                   const char *tmpl, const char *task)
{
    uint32_t ti = (uint32_t)(t - p->tenants);
    const pol_template *tp = tmpl ? pol_template_find(p, tmpl) : NULL;
    for (size_t g = 0; g < s->n_grants; g++) {
        const pol_grant *gr = &s->grants[g];
        int ok = gr->all_tenants;
        for (size_t i = 0; !ok && i < gr->n_tenants; i++)
            ok = gr->tenants[i] == ti;
        if (ok && gr->n_templates) {
            ok = 0;
            for (size_t i = 0; tp && !ok && i < gr->n_templates; i++)
                ok = &p->templates[gr->templates[i]] == tp;
        }
        if (ok && gr->tasks)
            ok = task && pol_glob(gr->tasks, task);
        if (ok)
            return gr;
    }
    return NULL;
}

void policy_decide_credentials(const policy *p, const char *tenant, const char *template_name,
                               const char *task, const char *const *asked, size_t n_asked,
                               policy_secret_grant *out, size_t *n_out, policy_decision *dec)
{
    *n_out = 0;
    const pol_tenant *t = pol_tenant_find(p, tenant);
    if (!t) {
        decide(dec, 0, SG_ENOTFOUND, "default.unknown-tenant", "unknown tenant '%s'", nz(tenant));
        return;
    }
    if (n_asked == 0) {
        decide(dec, 1, SG_OK, "default.no-secrets", "no secrets asked");
        return;
    }
    const char *first_rule = NULL;
    char names[200] = "";
    size_t off = 0, n = 0;
    for (size_t i = 0; i < n_asked; i++) {
        const pol_secret *s = pol_secret_find(p, asked[i]);
        if (!s) {
            decide(dec, 0, SG_EDENIED, "default.unknown-secret", "secret '%s' is not defined in the policy", nz(asked[i]));
            *n_out = 0;
            return;
        }
        const pol_grant *g = find_grant(p, s, t, template_name, task);
        if (!g) {
            decide(dec, 0, SG_EDENIED, "default.deny-secret",
                   "secret '%s' is not granted to tenant '%s' (template %s, task %s)",
                   s->name, t->id, nz(template_name), nz(task));
            *n_out = 0;
            return;
        }
        size_t k = 0;
        while (k < n && strcmp(out[k].name, s->name) != 0)
            k++;
        if (k < n)
            continue;   /* asked twice: one grant */
        out[n++] = (policy_secret_grant){s->name, s->env,
                                         s->src_kind == POL_SRC_FILE ? "file" : "env", s->src};
        if (!first_rule)
            first_rule = g->id;
        if (off < sizeof names)
            off += (size_t)snprintf(names + off, sizeof names - off, "%s%s", off ? ", " : "", s->name);
    }
    *n_out = n;
    decide(dec, 1, SG_OK, first_rule, "secrets granted: %s", names);
}

/* ---- create ----------------------------------------------------------- */

static int check_quotas(const pol_tenant *t, const policy_create_ask *ask, policy_decision *out)
{
    char rule[128];
    const policy_limits *l = &t->limits.v;
    if (ask->live_sandboxes_tenant >= l->max_sandboxes_tenant) {
        limit_rule(t, POL_LIM_SB_TENANT, "quotas", "sandboxes_per_tenant", rule, sizeof rule);
        decide(out, 0, SG_EQUOTA, rule, "tenant '%s' has %u live sandboxes, the limit is %u",
               t->id, ask->live_sandboxes_tenant, l->max_sandboxes_tenant);
        return -1;
    }
    if (ask->live_sandboxes_user >= l->max_sandboxes_user) {
        limit_rule(t, POL_LIM_SB_USER, "quotas", "sandboxes_per_user", rule, sizeof rule);
        decide(out, 0, SG_EQUOTA, rule, "user '%s' of tenant '%s' has %u live sandboxes, the limit is %u",
               nz(ask->user), t->id, ask->live_sandboxes_user, l->max_sandboxes_user);
        return -1;
    }
    return 0;
}

void policy_decide_create(const policy *p, const policy_create_ask *ask,
                          policy_scope *scope, policy_decision *out)
{
    egress_ctx c;
    if (egress_ctx_init(&c, p, ask->tenant, ask->template_name, ask->task, out) < 0)
        return;
    if (scope)
        *scope = (policy_scope)c.t->scope;
    if (!ask->user || !*ask->user || !ask->task || !*ask->task) {
        decide(out, 0, SG_EDENIED, "default.bad-request", "a create needs a user and a task");
        return;
    }
    const pol_template *tp = ask->template_name ? pol_template_find(p, ask->template_name) : NULL;
    if (!tp) {
        decide(out, 0, SG_ENOTFOUND, "default.unknown-template", "unknown template '%s'", nz(ask->template_name));
        return;
    }
    char grant[128];
    if (!template_grant(p, c.t, tp, grant, sizeof grant)) {
        decide(out, 0, SG_EDENIED, "default.deny-template",
               "tenant '%s' may not use template '%s'", c.t->id, tp->name);
        return;
    }
    /* Before quotas: asking again later cannot change this answer. */
    sg_isolation iso = template_iso(tp);
    if (c.t->isolation > iso) {
        char rule[128];
        snprintf(rule, sizeof rule, "tenants.%s.isolation", c.t->id);
        decide(out, 0, SG_EDENIED, rule, "tenant '%s' requires isolation %s; template '%s' is %s",
               c.t->id, sg_isolation_name(c.t->isolation), tp->name, sg_isolation_name(iso));
        return;
    }
    if (check_quotas(c.t, ask, out) < 0)
        return;
    for (size_t i = 0; i < ask->n_egress; i++) {
        egress_one(&c, ask->egress[i].host, ask->egress[i].port, NULL, 1, out);
        if (!out->allow)
            return;
    }
    if (ask->n_secrets) {
        policy_secret_grant tmp[64];
        size_t n;
        if (ask->n_secrets > 64) {
            decide(out, 0, SG_EDENIED, "default.bad-request", "more than 64 secrets asked");
            return;
        }
        policy_decide_credentials(p, ask->tenant, ask->template_name, ask->task,
                                  ask->secrets, ask->n_secrets, tmp, &n, out);
        if (!out->allow)
            return;
    }
    decide(out, 1, SG_OK, grant,
           "tenant '%s' user '%s' task '%s' may create '%s' (scope %s, isolation %s, %zu egress asks, %zu secrets)",
           c.t->id, ask->user, ask->task, tp->name,
           c.t->scope == POLICY_SCOPE_PER_USER ? "per_user" : "per_task", sg_isolation_name(iso),
           ask->n_egress, ask->n_secrets);
}
