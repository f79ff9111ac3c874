/* match.c — the pure egress decision the proxy makes per connection, from
 * the rules the gateway granted (HostCreateRequest.egress), mirroring
 * policy_decide_egress (policy/decide.c, policy/egress.c): name rules match
 * host names (exact, or "*.suffix" for proper subdomains), an IP literal
 * matches only CIDR rules, a rule with ports needs one of them, and a
 * special address (loopback, private, link-local, multicast, ...) is allowed
 * only by a CIDR rule lying inside its range. The first rule in grant order
 * decides, as the policy's lowest rule index does. The policy library keeps
 * its matchers private (policy/internal.h), so this file holds the same
 * semantics over a flat list; match_test.c checks both agree on a table.
 * No I/O, no globals. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/egress/egress.h"
#include "host/egress/internal.h"

typedef struct cidr { uint8_t addr[16]; int plen; } cidr;

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

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int only_chars(const char *s, const char *set) { return s[strspn(s, set)] == 0; }

int egress_ip_parse(const char *s, uint8_t out[16])
{
    char buf[64];
    size_t n = strlen(s);
    if (n == 0 || n >= sizeof buf)
        return 0;
    if (s[0] == '[' && s[n - 1] == ']') {
        memcpy(buf, s + 1, n - 2);
        buf[n - 2] = 0;
    } else {
        memcpy(buf, s, n + 1);
        if (n > 1 && buf[n - 1] == '.')
            buf[n - 1] = 0;
    }
    if (strchr(buf, ':')) {
        char *pct = strchr(buf, '%');   /* zone id: fe80::1%lo is still fe80::1 */
        if (pct)
            *pct = 0;
        if (inet_pton(AF_INET6, buf, out) != 1)
            return 0;
        static const uint8_t zero12[12];
        static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
        int compat = memcmp(out, zero12, 12) == 0 && (out[12] | out[13] | out[14]) != 0;
        if (compat || memcmp(out, nat64, 12) == 0)
            memcpy(out, v4_prefix, 12);
        return 1;
    }
    /* inet_aton's 1-4 parts in decimal, octal or hex: what a resolver or
     * client library may honour, so never a name. */
    struct in_addr in;
    if (!only_chars(buf, "0123456789abcdefABCDEFxX.") || inet_aton(buf, &in) != 1)
        return 0;
    memcpy(out, v4_prefix, 12);
    memcpy(out + 12, &in.s_addr, 4);
    return 1;
}

void egress_ip_format(const uint8_t ip[16], char *buf, size_t cap)
{
    if (memcmp(ip, v4_prefix, 12) == 0)
        inet_ntop(AF_INET, ip + 12, buf, (socklen_t)cap);
    else
        inet_ntop(AF_INET6, ip, buf, (socklen_t)cap);
}

static int cidr_contains(const cidr *c, const uint8_t ip[16])
{
    int full = c->plen / 8, rem = c->plen % 8;
    if (memcmp(c->addr, ip, (size_t)full) != 0)
        return 0;
    if (!rem)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rem));
    return (c->addr[full] & mask) == (ip[full] & mask);
}

static int cidr_parse(const char *s, cidr *out)
{
    char buf[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    int v6 = strchr(buf, ':') != NULL;
    if (v6) {
        if (inet_pton(AF_INET6, buf, out->addr) != 1)
            return -1;
    } else {
        struct in_addr in;
        if (inet_pton(AF_INET, buf, &in) != 1)
            return -1;
        memcpy(out->addr, v4_prefix, 12);
        memcpy(out->addr + 12, &in.s_addr, 4);
    }
    int max = v6 ? 128 : 32, plen = max;
    if (slash) {
        if (!slash[1] || !only_chars(slash + 1, "0123456789") || strlen(slash + 1) > 3)
            return -1;
        plen = atoi(slash + 1);
        if (plen > max)
            return -1;
    }
    out->plen = v6 ? plen : plen + 96;
    return 0;
}

/* Ranges denied unless a CIDR rule inside them names them; the same list
 * as policy/egress.c. */
typedef struct special { const char *cidr, *name; } special;
static const special specials[] = {
    {"0.0.0.0/8", "unspecified"},
    {"127.0.0.0/8", "loopback"},
    {"10.0.0.0/8", "private (RFC 1918)"},
    {"172.16.0.0/12", "private (RFC 1918)"},
    {"192.168.0.0/16", "private (RFC 1918)"},
    {"100.64.0.0/10", "carrier-grade NAT"},
    {"169.254.0.0/16", "link-local"},
    {"192.0.0.0/24", "IETF protocol assignments"},
    {"198.18.0.0/15", "benchmarking"},
    {"224.0.0.0/4", "multicast"},
    {"240.0.0.0/4", "reserved"},
    {"::/128", "unspecified"},
    {"::1/128", "loopback"},
    {"fe80::/10", "link-local"},
    {"fec0::/10", "site-local"},
    {"fc00::/7", "unique-local (private)"},
    {"ff00::/8", "multicast"},
};

static const char *special_range(const uint8_t ip[16], cidr *range)
{
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
        cidr c;
        cidr_parse(specials[i].cidr, &c);
        if (cidr_contains(&c, ip)) {
            if (range)
                *range = c;
            return specials[i].name;
        }
    }
    /* 6to4 (2002:AABB:CCDD::/48) carries an IPv4 destination: judge it. */
    if (ip[0] == 0x20 && ip[1] == 0x02) {
        uint8_t v4[16];
        memcpy(v4, v4_prefix, 12);
        memcpy(v4 + 12, ip + 2, 4);
        cidr r4;
        const char *name = special_range(v4, &r4);
        if (name && range) {
            memset(range, 0, sizeof *range);
            range->addr[0] = 0x20;
            range->addr[1] = 0x02;
            memcpy(range->addr + 2, r4.addr + 12, 4);
            range->plen = 16 + r4.plen - 96;
        }
        return name;
    }
    return NULL;
}

const char *egress_ip_special(const uint8_t ip[16]) { return special_range(ip, NULL); }

const char *egress_host_check(const char *s, char *out, size_t cap)
{
    size_t n = strlen(s);
    if (n && s[n - 1] == '.')
        n--;
    if (n == 0)
        return "empty host name";
    if (n > 253 || n >= cap)
        return "host name longer than 253 characters";
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c == '.') {
            if (label == 0)
                return "empty label in host name";
            if (out[i - 1] == '-')
                return "a label may not end with '-'";
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
            if (c == '-' && label == 0)
                return "a label may not start with '-'";
            if (++label > 63)
                return "a label is longer than 63 characters";
        } else {
            return "invalid character in host name";
        }
        out[i] = c;
    }
    if (out[n - 1] == '-')
        return "a label may not end with '-'";
    out[n] = 0;
    const char *last = strrchr(out, '.');
    last = last ? last + 1 : out;
    if (strspn(last, "0123456789") == strlen(last) ||
        (last[0] == '0' && (last[1] == 'x' || last[1] == 'X')))
        return "the last label is numeric (an address spelling, matched only by CIDR rules)";
    return NULL;
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
