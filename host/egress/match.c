/* match.c — the pure egress decision the proxy makes per connection, from
 * the rules the gateway granted (HostCreateRequest.egress), mirroring
 * policy_decide_egress (policy/decide.c, policy/egress.c): name rules match
 * host names (exact, or "*.suffix" for proper subdomains), an IP literal
 * matches only CIDR rules, a rule with ports needs one of them, and a
 * special address (loopback, private, link-local, multicast, ...) is allowed
 * only by a CIDR rule lying inside its range. The first rule in grant order
 * decides, as the policy's lowest rule index does. Address parsing, CIDRs,
 * special ranges and host names are the policy's (policy/addr.h); this file
 * only walks the granted rules as a flat list; match_test.c checks the two
 * decisions agree on a table.
 * No I/O, no globals. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/egress/egress.h"
#include "policy/addr.h"
#include "host/egress/internal.h"

typedef policy_cidr cidr;

typedef struct crule {
    char *id;            /* owned */
    char *host;          /* owned, lowercase; NULL for a CIDR rule */
    int wild;            /* host is "*.suffix"; host holds the suffix */
    int has_cidr;
    cidr net;
    uint32_t *ports; size_t n_ports;   /* owned */
} crule;

struct egress_rules {
    crule *r; size_t n;  /* owned */
};

/* Addresses, CIDRs, special ranges and host names: the policy's own code
 * (policy/addr.h), so the proxy and policy_decide_egress cannot disagree. */
#define cidr_parse policy_cidr_parse
#define cidr_contains policy_cidr_contains
#define special_range policy_ip_special

int egress_ip_parse(const char *s, uint8_t out[16]) { return policy_ip_parse(s, out); }

void egress_ip_format(const uint8_t ip[16], char *buf, size_t cap)
{
    policy_ip_format(ip, buf, cap);
}

const char *egress_ip_special(const uint8_t ip[16]) { return policy_ip_special(ip, NULL); }

const char *egress_host_check(const char *s, char *out, size_t cap)
{
    return policy_host_check(s, out, cap, 0);
}

/* ---- compiled rules ------------------------------------------------------ */

void egress_rules_destroy(egress_rules *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->r[i].id);
        free(rs->r[i].host);
        free(rs->r[i].ports);
    }
    free(rs->r);
    free(rs);
}

int egress_rules_create(const egress_rule *in, size_t n, egress_rules **out, sg_err *err)
{
    *out = NULL;
    egress_rules *rs = calloc(1, sizeof *rs);
    if (!rs || !(rs->r = calloc(n + 1, sizeof *rs->r))) {
        free(rs);
        return sg_err_set(err, SG_EINTERNAL, "egress rules: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        crule *c = &rs->r[rs->n++];   /* counted now: destroy frees it */
        const egress_rule *r = &in[i];
        c->id = strdup(r->id && *r->id ? r->id : "unnamed");
        c->ports = calloc(r->n_ports + 1, sizeof *c->ports);
        if (!c->id || !c->ports)
            goto oom;
        for (size_t k = 0; k < r->n_ports; k++) {
            if (r->ports[k] == 0 || r->ports[k] > 65535) {
                int rc = sg_err_set(err, SG_EINVAL, "egress rule %s: bad port %u", r->id, r->ports[k]);
                egress_rules_destroy(rs);
                return rc;
            }
            c->ports[k] = r->ports[k];
        }
        c->n_ports = r->n_ports;
        int has_host = r->host && *r->host, has_cidr = r->cidr && *r->cidr;
        if (has_host == has_cidr) {
            int rc = sg_err_set(err, SG_EINVAL, "egress rule %s: needs exactly one of host and cidr",
                              c->id);
            egress_rules_destroy(rs);
            return rc;
        }
        if (has_cidr) {
            if (cidr_parse(r->cidr, &c->net) < 0) {
                int rc = sg_err_set(err, SG_EINVAL, "egress rule %s: bad CIDR '%s'", c->id, r->cidr);
                egress_rules_destroy(rs);
                return rc;
            }
            c->has_cidr = 1;
            continue;
        }
        char norm[256];
        const char *h = r->host;
        c->wild = h[0] == '*' && h[1] == '.';
        const char *why = egress_host_check(c->wild ? h + 2 : h, norm, sizeof norm);
        if (why) {
            int rc = sg_err_set(err, SG_EINVAL, "egress rule %s: host '%s': %s", c->id, h, why);
            egress_rules_destroy(rs);
            return rc;
        }
        if (!(c->host = strdup(norm)))
            goto oom;
    }
    *out = rs;
    return 0;
oom:
    rs->n++;
    int rc = sg_err_set(err, SG_EINTERNAL, "egress rules: out of memory");
    egress_rules_destroy(rs);
    return rc;
}

/* ---- the decision --------------------------------------------------------- */

static int port_ok(const crule *c, uint32_t port)
{
    if (!c->n_ports)
        return 1;
    for (size_t i = 0; i < c->n_ports; i++)
        if (c->ports[i] == port)
            return port != 0;
    return 0;
}

static int name_ok(const crule *c, const char *host)
{
    if (!c->host)
        return 0;
    if (!c->wild)
        return strcmp(c->host, host) == 0;
    size_t hl = strlen(host), sl = strlen(c->host);
    return hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, c->host) == 0;
}

/* First CIDR rule holding ip; inside: the special range ip is in (the rule
 * must lie within it: 0.0.0.0/0 does not name 127.0.0.0/8). */
static const crule *match_ip(const egress_rules *rs, const uint8_t ip[16], uint32_t port,
                             const cidr *inside)
{
    for (size_t i = 0; i < rs->n; i++) {
        const crule *c = &rs->r[i];
        if (c->has_cidr && (!inside || c->net.plen >= inside->plen) &&
            cidr_contains(&c->net, ip) && port_ok(c, port))
            return c;
    }
    return NULL;
}

static void set(egress_decision *out, int allow, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set(egress_decision *out, int allow, const char *rule, const char *fmt, ...)
{
    out->allow = allow;
    snprintf(out->rule, sizeof out->rule, "%s", rule);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
}

static void deny_special(egress_decision *out, const char *what, const char *addr,
                         const char *kind, const cidr *range)
{
    char net[64];
    egress_ip_format(range->addr, net, sizeof net);
    int plen = range->plen >= 96 && strchr(net, '.') ? range->plen - 96 : range->plen;
    set(out, 0, "default.deny-special-address",
        "egress to %s denied: %s is a %s address; only a CIDR rule inside %s/%d allows it",
        what, addr, kind, net, plen);
}

void egress_decide(const egress_rules *rs, const char *host, uint32_t port, const uint8_t *ip,
                   egress_decision *out)
{
    char what[300], norm[256], addr[64];
    snprintf(what, sizeof what, "%s:%u", host ? host : "", port);
    if (port == 0 || port > 65535) {
        set(out, 0, "default.bad-request", "egress to %s denied: bad port", what);
        return;
    }
    uint8_t lit[16];
    cidr range;
    if (host && egress_ip_parse(host, lit)) {
        egress_ip_format(lit, addr, sizeof addr);
        const char *kind = special_range(lit, &range);
        const crule *r = match_ip(rs, lit, port, kind ? &range : NULL);
        if (r)
            set(out, 1, r->id, "egress to %s (%s) allowed", what, addr);
        else if (kind)
            deny_special(out, what, addr, kind, &range);
        else
            set(out, 0, "default.deny-egress",
                "egress to %s denied: no CIDR rule covers %s (an IP literal matches only CIDR rules)",
                what, addr);
        return;
    }
    const char *why = host ? egress_host_check(host, norm, sizeof norm) : "no host";
    if (why) {
        set(out, 0, "default.bad-request", "egress to %s denied: %s", what, why);
        return;
    }
    const crule *r = NULL;
    for (size_t i = 0; i < rs->n && !r; i++)
        if (name_ok(&rs->r[i], norm) && port_ok(&rs->r[i], port))
            r = &rs->r[i];
    if (!r) {
        set(out, 0, "default.deny-egress",
            "egress to %s denied: no network rule granted to this sandbox allows it", what);
        return;
    }
    if (!ip) {
        set(out, 1, r->id, "egress to %s allowed", what);
        return;
    }
    /* The name is allowed; the address it resolved to must not be one the
     * policy protects (metadata, loopback, the private network). */
    egress_ip_format(ip, addr, sizeof addr);
    const char *kind = special_range(ip, &range);
    if (!kind) {
        set(out, 1, r->id, "egress to %s (%s) allowed", what, addr);
        return;
    }
    const crule *cr = match_ip(rs, ip, port, &range);
    if (cr)
        set(out, 1, cr->id, "egress to %s (%s, %s) allowed by name rule %s and this CIDR rule",
            what, addr, kind, r->id);
    else
        deny_special(out, what, addr, kind, &range);
}
