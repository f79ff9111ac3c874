/* isolation.h — the isolation levels a sandbox can run under, shared by the
 * host config (a template's `isolation`), the policy (a tenant's or a
 * template's minimum) and the wire (the "isolation" string fields). They
 * are ordered: a higher level puts more between the agent's code and the
 * host kernel, so "at least X" is a comparison. */
#ifndef SG_ISOLATION_H
#define SG_ISOLATION_H

typedef enum sg_isolation {
    SG_ISOLATION_UNSET = 0,     /* no requirement / not said */
    SG_ISOLATION_PROCESS = 1,   /* namespaces + seccomp + cgroups on the host kernel */
    SG_ISOLATION_GVISOR = 2,    /* gVisor's user-space kernel (runsc) in between */
} sg_isolation;

/* "process", "gvisor"; "" for UNSET. */
const char *sg_isolation_name(sg_isolation i);
/* Exact lower-case names only; anything else (including "") is -1. */
int sg_isolation_parse(const char *s, sg_isolation *out);
/* What error messages list as the accepted values. */
#define SG_ISOLATION_EXPECTED "process or gvisor"

#endif
