/* explain.c — maps one ask (egress, secret or create) to the matching pure
 * decision, so the CLI and the regression cases ask exactly what the
 * gateway asks. No I/O. Case files are read by cases.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/explain.h"
#include "policy/internal.h"

void policy_explain_isolation(const policy *p, const char *tenant, const char *template_name,
                              char *buf, size_t cap)
{
    const pol_tenant *t = tenant ? pol_tenant_find(p, tenant) : NULL;
    const pol_template *tp = template_name ? pol_template_find(p, template_name) : NULL;
    if (!t || !tp) {
        snprintf(buf, cap, "none: unknown %s '%s'", t ? "template" : "tenant",
                 t ? (template_name ? template_name : "") : (tenant ? tenant : ""));
        return;
    }
    sg_isolation got = policy_template_isolation(p, tp->name);
    char tpart[160], npart[160];
    if (tp->isolation != SG_ISOLATION_UNSET)
        snprintf(tpart, sizeof tpart, "template '%s' is %s (templates.%s.isolation)", tp->name,
                 sg_isolation_name(got), tp->name);
    else
        snprintf(tpart, sizeof tpart, "template '%s' is %s (the default; templates.%s.isolation "
                 "is not set)", tp->name, sg_isolation_name(got), tp->name);
    if (t->isolation != SG_ISOLATION_UNSET)
        snprintf(npart, sizeof npart, "tenant '%s' requires at least %s (tenants.%s.isolation)",
                 t->id, sg_isolation_name(t->isolation), t->id);
    else
        snprintf(npart, sizeof npart, "tenant '%s' sets no minimum", t->id);
    snprintf(buf, cap, "%s: %s; %s", t->isolation > got ? "none (refused)" : sg_isolation_name(got),
             tpart, npart);
}

int policy_parse_hostport(const char *s, char *host, size_t cap, uint32_t *port)
{
    *port = 0;
    const char *colon = strrchr(s, ':');
    size_t hl = strlen(s);
    if (s[0] == '[') {
        const char *rb = strchr(s, ']');
        if (!rb)
            return -1;
        colon = rb[1] == ':' ? rb + 1 : NULL;
        if (!colon && rb[1])
            return -1;
        hl = (size_t)(rb + 1 - s);
    } else if (colon && strchr(s, ':') != colon) {
        colon = NULL;   /* bare IPv6: no port */
    } else if (colon) {
        hl = (size_t)(colon - s);
    }
    if (colon) {
        char *end;
        unsigned long v = strtoul(colon + 1, &end, 10);
        if (!colon[1] || *end || v < 1 || v > 65535)
            return -1;
        *port = (uint32_t)v;
    }
    if (hl == 0 || hl >= cap)
        return -1;
    memcpy(host, s, hl);
    host[hl] = 0;
    return 0;
}

void policy_explain(const policy *p, const policy_ask *a, policy_decision *out)
{
    memset(out, 0, sizeof *out);
    switch (a->kind) {
    case POLICY_ASK_EGRESS:
        policy_decide_egress(p, a->tenant, a->template_name, a->task, a->host, a->port, a->ip, out);
        return;
    case POLICY_ASK_SECRET: {
        policy_secret_grant g;
        size_t n;
        const char *names[1] = {a->secret};
        policy_decide_credentials(p, a->tenant, a->template_name, a->task, names, 1, &g, &n, out);
        return;
    }
    case POLICY_ASK_CREATE: {
        policy_create_ask c = {
            .tenant = a->tenant, .user = a->user, .task = a->task,
            .template_name = a->template_name, .egress = a->egress, .n_egress = a->n_egress,
            .secrets = a->secrets, .n_secrets = a->n_secrets,
            .live_sandboxes_tenant = a->live_tenant, .live_sandboxes_user = a->live_user};
        policy_scope scope;
        policy_decide_create(p, &c, &scope, out);
        return;
    }
    }
}
