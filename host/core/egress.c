/* egress.c — the host daemon's side of network egress: one egress proxy
 * (host/egress/, its own threads) for the whole host, one proxy entry per
 * sandbox that was granted rules, the audit log, and the connections the
 * sandboxes' supervisors hand over.
 *
 * The path out of a sandbox with a grant: code inside connects to
 * 127.0.0.1:3128 (HTTP_PROXY etc. say so), where the supervisor (pid 1 in
 * the sandbox's own network namespace, which has only lo) accepts and
 * sends the accepted socket to the host as `EGRESS` + fd (PROTOCOL.md,
 * section 3); the host adopts it into the proxy as a client connection of
 * that sandbox. The proxy decides every connection against the sandbox's
 * rules and connects from the host's namespace. A sandbox without a grant
 * has no listener, no proxy variables and no entry here: an `EGRESS` from
 * it is closed unread.
 *
 * The sandbox table (host.h, H.mu) owns sb->egress; the proxy owns its
 * connections. Lock order: H.mu, then the proxy's own mutex; the proxy
 * thread never takes H.mu (the audit callback writes one line to a file). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "host/egress/egress.h"
#include "host/host.h"

#define MAX_RULES 256

static egress_proxy *proxy;   /* owned; NULL until host_egress_start */
static int audit_fd = -1;     /* owned (append-only), or -1: stderr */

static void on_proxy_audit(void *arg, const egress_audit *a)
{
    (void)arg;
    host_metrics_egress(a->kind, a->allow, a->rule, a->bytes_up, a->bytes_down);
    char line[2048];
    size_t n = egress_audit_json(a, line, sizeof line);
    /* one write of one line: O_APPEND keeps lines whole across writers */
    if (audit_fd >= 0)
        (void)!write(audit_fd, line, n);
    else
        sg_log_info("audit: %.*s", (int)n, line);
}

int host_egress_start(const char *hosts_file, const char *audit_log, sg_err *err)
{
    if (audit_log) {
        audit_fd = open(audit_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (audit_fd < 0)
            return sg_err_errno(err, SG_EINVAL, "open(%s) for the audit log", audit_log);
    }
    if (hosts_file && access(hosts_file, R_OK) != 0)
        return sg_err_errno(err, SG_EINVAL, "--egress-hosts %s", hosts_file);
    /* egress stops at the host's reserve too: a sandbox's connections must
     * not eat the fds its neighbours' calls need */
    egress_options o = {.hosts_file = hosts_file, .on_audit = on_proxy_audit,
                        .reserve_fds = H.cfg.reserve_fds};
    return egress_proxy_create(&o, &proxy, err);
}

void host_egress_stop(void)
{
    egress_proxy_destroy(proxy);
    proxy = NULL;
    if (audit_fd >= 0)
        close(audit_fd);
    audit_fd = -1;
}

int host_egress_attach(host_sandbox *sb, const Sandgate__V1__HostCreateRequest *req, sg_err *err)
{
    if (req->n_egress == 0)
        return 0;   /* no grant: no listener, nothing leaves */
    if (!proxy)
        return sg_err_set(err, SG_EUNAVAIL, "egress: this host runs no egress proxy");
    size_t n = req->n_egress < MAX_RULES ? req->n_egress : MAX_RULES;
    egress_rule *rules = calloc(n ? n : 1, sizeof *rules);
    if (!rules)
        return sg_err_set(err, SG_EINTERNAL, "egress: out of memory");
    for (size_t i = 0; i < n; i++) {
        const Sandgate__V1__EgressRule *r = req->egress[i];
        rules[i] = (egress_rule){.id = r->id,
                                 .host = r->host && r->host[0] ? r->host : NULL,
                                 .cidr = r->cidr && r->cidr[0] ? r->cidr : NULL,
                                 .ports = r->ports, .n_ports = r->n_ports};
    }
    egress_rules *rs;
    int rc = egress_rules_create(rules, n, &rs, err);
    free(rules);
    if (rc != 0)
        return rc;
    return egress_sandbox_create(proxy, sb->id, NULL, rs, req->egress_byte_cap, &sb->egress, err);
}

void host_egress_detach(host_sandbox *sb)
{
    if (!sb->egress)
        return;
    egress_sandbox_destroy(sb->egress);   /* closes its connections, audits them */
    sb->egress = NULL;
}

void host_egress_adopt(host_sandbox *sb, int fd)
{
    if (sb->egress && sb->state != SB_KILLING)
        egress_sandbox_adopt(sb->egress, fd);
    else
        close(fd);
}
