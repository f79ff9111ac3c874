/* explain.h — one "would this be allowed, and by which rule?" entry point
 * over every decision kind, used by `sandgate-policy explain` and by the
 * security team's regression cases (`sandgate-policy test`). */
#ifndef SG_POLICY_EXPLAIN_H
#define SG_POLICY_EXPLAIN_H

#include <stdio.h>

#include "policy/policy.h"

typedef enum { POLICY_ASK_EGRESS, POLICY_ASK_SECRET, POLICY_ASK_CREATE } policy_ask_kind;

typedef struct policy_ask {
    policy_ask_kind kind;
    const char *tenant, *user, *task, *template_name;   /* borrowed */
    const char *host; uint32_t port; const char *ip;    /* egress; ip nullable */
    const char *secret;                                 /* secret */
    const policy_egress_ask *egress; size_t n_egress;   /* create */
    const char *const *secrets; size_t n_secrets;       /* create */
    uint32_t live_tenant, live_user;                    /* create: quota view */
} policy_ask;

void policy_explain(const policy *p, const policy_ask *ask, policy_decision *out);

/* For a create: which isolation it would get and why, naming the rules,
 * e.g. "gvisor: template 'ci-gv' is gvisor (templates.ci-gv.isolation);
 * tenant 'acme' requires at least gvisor (tenants.acme.isolation)". */
void policy_explain_isolation(const policy *p, const char *tenant, const char *template_name,
                              char *buf, size_t cap);

/* "host:port", "[v6]:port", or a bare host (port 0 = any). 0 or -1. */
int policy_parse_hostport(const char *s, char *host, size_t cap, uint32_t *port);

/* Run the cases in cases_path against p, printing PASS/FAIL lines and a
 * summary to out. Returns 0 if all pass, 1 on a mismatch, SG_EINVAL if the
 * cases file itself is invalid (errors in errs, "file:line:col: ..."). */
int policy_run_cases(const policy *p, const char *cases_path, FILE *out, policy_errors *errs);

#endif
