/* egress.c — the pure matching behind egress decisions: IP literal parsing
 * and normalisation (every IPv4 spelling libc accepts, IPv4-mapped,
 * -compatible and NAT64 IPv6 folded to IPv4 so one rule set covers all
 * spellings), CIDRs, the special ranges that stay denied unless a rule names
 * them, host-name and task-pattern syntax, and rule-set lookup (hash on exact
 * hosts and wildcard suffixes, so a decision costs O(labels), not O(rules)).
 * No I/O, no globals. The decision wording lives in decide.c. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/addr.h"
#include "policy/internal.h"

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int only_chars(const char *s, const char *set)
{
    return s[strspn(s, set)] == 0;
}

/* Fold IPv6 spellings of an IPv4 destination to ::ffff:a.b.c.d. */
static void fold_v4(uint8_t a[16])
{
    static const uint8_t zero12[12];
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    int compat = memcmp(a, zero12, 12) == 0 && (a[12] | a[13] | a[14]) != 0;
    if (compat || memcmp(a, nat64, 12) == 0)
        memcpy(a, v4_prefix, 12);
}

int pol_ip_parse(const char *s, uint8_t out[16])
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
            buf[n - 1] = 0;   /* "127.0.0.1." is still an address */
    }
    if (strchr(buf, ':')) {
        char *zone = strchr(buf, '%');   /* fe80::1%eth0 is still fe80::1 */
        if (zone)
            *zone = 0;
        if (inet_pton(AF_INET6, buf, out) != 1)
            return 0;
        fold_v4(out);
        return 1;
    }
    /* inet_aton takes 1-4 parts in decimal, octal or hex (127.1, 0x7f.1,
     * 2130706433): exactly the spellings a resolver or proxy might honour,
     * so they must be recognised as addresses, never as names. */
    struct in_addr in;
    if (!only_chars(buf, "0123456789abcdefABCDEFxX.") || inet_aton(buf, &in) != 1)
        return 0;
    memcpy(out, v4_prefix, 12);
    memcpy(out + 12, &in.s_addr, 4);
    return 1;
}

int pol_cidr_parse(const char *s, pol_cidr *out)
{
    char buf[64];
    const char *slash = strchr(s, '/');
    size_t n = slash ? (size_t)(slash - s) : strlen(s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    int v6 = strchr(buf, ':') != NULL;
    /* In rules we accept only canonical dotted-quad IPv4, so what the team
     * reads is what we match. */
    struct in_addr in;
    if (v6) {
        if (inet_pton(AF_INET6, buf, out->addr) != 1)
            return -1;
    } else {
        if (inet_pton(AF_INET, buf, &in) != 1)
            return -1;
        memcpy(out->addr, v4_prefix, 12);
        memcpy(out->addr + 12, &in.s_addr, 4);
    }
    int max = v6 ? 128 : 32;
    int plen = max;
    if (slash) {
        const char *p = slash + 1;
        if (!*p || !only_chars(p, "0123456789") || strlen(p) > 3)
            return -1;
        plen = atoi(p);
        if (plen > max)
            return -1;
    }
    out->plen = (uint8_t)(v6 ? plen : plen + 96);
    if (v6 && memcmp(out->addr, v4_prefix, 12) == 0 && out->plen < 96)
        return -1;   /* a mapped prefix shorter than /96 spans non-v4 space */
    /* host bits set (10.0.0.1/8) is a typo more often than intent */
    for (int b = out->plen; b < 128; b++)
        if (out->addr[b / 8] & (0x80 >> (b % 8)))
            return -1;
    return 0;
}

int pol_cidr_contains(const pol_cidr *c, const uint8_t ip[16])
{
    int full = c->plen / 8, rem = c->plen % 8;
    if (memcmp(c->addr, ip, (size_t)full) != 0)
        return 0;
    if (!rem)
        return 1;
    uint8_t mask = (uint8_t)(0xff << (8 - rem));
    return (c->addr[full] & mask) == (ip[full] & mask);
}

/* Ranges denied unless a rule inside them names them. Stored pre-parsed
 * (IPv4 as ::ffff:a.b.c.d) because this runs on every decision. */
typedef struct special { pol_cidr net; const char *cidr, *name; } special;
static const special specials[] = {
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00}, 104}, "0.0.0.0/8", "unspecified"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x00}, 104}, "127.0.0.0/8", "loopback"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x0a, 0x00, 0x00, 0x00}, 104}, "10.0.0.0/8", "private (RFC 1918)"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xac, 0x10, 0x00, 0x00}, 108}, "172.16.0.0/12", "private (RFC 1918)"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xc0, 0xa8, 0x00, 0x00}, 112}, "192.168.0.0/16", "private (RFC 1918)"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x64, 0x40, 0x00, 0x00}, 106}, "100.64.0.0/10", "carrier-grade NAT"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xa9, 0xfe, 0x00, 0x00}, 112}, "169.254.0.0/16", "link-local"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xc0, 0x00, 0x00, 0x00}, 120}, "192.0.0.0/24", "IETF protocol assignments"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xc6, 0x12, 0x00, 0x00}, 111}, "198.18.0.0/15", "benchmarking"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xe0, 0x00, 0x00, 0x00}, 100}, "224.0.0.0/4", "multicast"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xf0, 0x00, 0x00, 0x00}, 100}, "240.0.0.0/4", "reserved"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, 128}, "::/128", "unspecified"},
    {{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01}, 128}, "::1/128", "loopback"},
    {{{0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, 10}, "fe80::/10", "link-local"},
    {{{0xfe, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, 10}, "fec0::/10", "site-local"},
    {{{0xfc, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, 7}, "fc00::/7", "unique-local (private)"},
    {{{0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, 8}, "ff00::/8", "multicast"},
};

const char *pol_ip_special(const uint8_t ip[16], pol_cidr *range)
{
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
        if (pol_cidr_contains(&specials[i].net, ip)) {
            if (range)
                *range = specials[i].net;
            return specials[i].name;
        }
    }
    /* 6to4 (2002:AABB:CCDD::/48) carries an IPv4 destination: judge that. */
    if (ip[0] == 0x20 && ip[1] == 0x02) {
        uint8_t v4[16];
        memcpy(v4, v4_prefix, 12);
        memcpy(v4 + 12, ip + 2, 4);
        pol_cidr r4;
        const char *name = pol_ip_special(v4, &r4);
        if (name && range) {
            memset(range, 0, sizeof *range);
            range->addr[0] = 0x20;
            range->addr[1] = 0x02;
            memcpy(range->addr + 2, r4.addr + 12, 4);
            range->plen = (uint8_t)(16 + r4.plen - 96);
        }
        return name;
    }
    return NULL;
}

void pol_ip_format(const uint8_t ip[16], char *buf, size_t cap)
{
    if (memcmp(ip, v4_prefix, 12) == 0)
        inet_ntop(AF_INET, ip + 12, buf, (socklen_t)cap);
    else
        inet_ntop(AF_INET6, ip, buf, (socklen_t)cap);
}

const char *pol_host_check(const char *s, char *out, size_t cap, int allow_wild)
{
    size_t n = strlen(s);
    if (n && s[n - 1] == '.')
        n--;                       /* "example.com." is "example.com" */
    if (n == 0)
        return "empty host name";
    if (n > 253 || n >= cap)
        return "host name longer than 253 characters";
    size_t i = 0;
    if (s[0] == '*') {
        if (!allow_wild)
            return "wildcard not allowed here";
        if (n < 3 || s[1] != '.')
            return "a wildcard must be a whole first label, as in *.example.com";
        out[0] = '*';
        out[1] = '.';
        i = 2;
    }
    size_t label = 0;
    for (; i < n; i++) {
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
        } else if (c == '*') {
            return "'*' is allowed only as the whole first label";
        } else {
            return "invalid character in host name";
        }
        out[i] = c;
    }
    if (label == 0)
        return "empty label in host name";
    if (out[n - 1] == '-')
        return "a label may not end with '-'";
    out[n] = 0;
    /* No top-level domain is all digits: such a "name" is an address
     * spelling the resolver might honour, so it never counts as a name. */
    const char *last = strrchr(out, '.');
    last = last ? last + 1 : out;
    if (strspn(last, "0123456789") == strlen(last) ||
        (last[0] == '0' && (last[1] == 'x' || last[1] == 'X')))
        return "the last label is numeric; IP addresses go in cidrs";
    return NULL;
}

int pol_glob(const char *pat, const char *s)
{
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*pat == '*') {
            star = pat++;
            resume = s;
        } else if (*pat == '?' || *pat == *s) {
            pat++;
            s++;
        } else if (star) {
            pat = star + 1;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*pat == '*')
        pat++;
    return *pat == 0;
}

const char *pol_glob_check(const char *pat)
{
    size_t n = strlen(pat);
    if (n == 0)
        return "empty pattern";
    if (n > 128)
        return "pattern longer than 128 characters";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)pat[i];
        if (c <= ' ' || c >= 0x7f)
            return "pattern contains a space or control character";
        if (strchr("[]{}\\!", c))
            return "pattern may use only '*' and '?' as special characters";
    }
    return NULL;
}

/* ---- rule sets ------------------------------------------------------- */

int pol_rule_applies(const pol_rule *r, const char *tmpl, const char *task)
{
    if (r->n_templates) {
        size_t i = 0;
        while (tmpl && i < r->n_templates && strcmp(r->templates[i], tmpl) != 0)
            i++;
        if (!tmpl || i == r->n_templates)
            return 0;
    }
    if (r->tasks && (!task || !pol_glob(r->tasks, task)))
        return 0;   /* a pattern never matches a missing task: fail closed */
    return 1;
}

static int rule_applies(const pol_rule *r, const char *tmpl, const char *task, uint32_t port)
{
    if (!pol_rule_applies(r, tmpl, task))
        return 0;
    if (r->n_ports) {
        size_t i = 0;
        while (i < r->n_ports && r->ports[i] != port)
            i++;
        if (port == 0 || i == r->n_ports)
            return 0;   /* "any port" is granted only by a rule without ports */
    }
    return 1;
}

static long first_applying(const pol_ruleset *rs, const pol_index *ix, const char *key,
                           size_t len, const char *tmpl, const char *task, uint32_t port)
{
    size_t n;
    const uint32_t *v = pol_index_get(ix, key, len, &n);
    for (size_t i = 0; i < n; i++)      /* ascending: first hit is first rule */
        if (rule_applies(&rs->rules[v[i]], tmpl, task, port))
            return v[i];
    return -1;
}

long pol_ruleset_match_name(const pol_ruleset *rs, const char *tmpl, const char *task,
                            const char *host, uint32_t port)
{
    long best = -1;
    int wild_ask = host[0] == '*' && host[1] == '.';
    if (!wild_ask)
        best = first_applying(rs, &rs->exact, host, strlen(host), tmpl, task, port);
    /* "*.example.com" covers every proper subdomain, never the apex: look
     * up each suffix that follows a label of the asked name. */
    for (const char *dot = strchr(host, '.'); dot; dot = strchr(dot + 1, '.')) {
        long r = first_applying(rs, &rs->wild, dot + 1, strlen(dot + 1), tmpl, task, port);
        if (r >= 0 && (best < 0 || r < best))
            best = r;
    }
    return best;
}

/* Key of a CIDR in the per-ruleset index: hex of the masked address and
 * the prefix length, so lookup is one hash probe per distinct length. */
static size_t cidr_key(const uint8_t addr[16], int plen, char out[40])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t m[16];
    memcpy(m, addr, 16);
    for (int b = plen; b < 128; b++)
        m[b / 8] &= (uint8_t)~(0x80 >> (b % 8));
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[m[i] >> 4];
        out[2 * i + 1] = hex[m[i] & 15];
    }
    size_t n = 32;   /* "/plen" by hand: this runs per prefix length per decision */
    out[n++] = '/';
    if (plen >= 100)
        out[n++] = (char)('0' + plen / 100);
    if (plen >= 10)
        out[n++] = (char)('0' + plen / 10 % 10);
    out[n++] = (char)('0' + plen % 10);
    out[n] = 0;
    return n;
}

long pol_ruleset_match_ip(const pol_ruleset *rs, const char *tmpl, const char *task,
                          const uint8_t ip[16], uint32_t port, const pol_cidr *inside)
{
    long best = -1;
    for (size_t k = 0; k < rs->n_plens; k++) {
        int plen = rs->plens[k];
        /* 0.0.0.0/0 does not "name" 127.0.0.0/8: only a CIDR inside the
         * special range unlocks it. A CIDR holding ip with plen >= the
         * range's is inside it, as the range holds ip too. */
        if (inside && plen < inside->plen)
            continue;
        char key[40];
        size_t len = cidr_key(ip, plen, key);
        size_t n;
        const uint32_t *v = pol_index_get(&rs->cidr, key, len, &n);
        for (size_t i = 0; i < n; i++) {
            if ((best >= 0 && v[i] >= (uint32_t)best) ||
                !rule_applies(&rs->rules[v[i]], tmpl, task, port))
                continue;
            best = v[i];
            break;
        }
    }
    return best;
}

static void index_cidrs(pol_arena *a, pol_ruleset *rs)
{
    size_t n = 0;
    for (size_t i = 0; i < rs->n; i++)
        n += rs->rules[i].n_cidrs;
    pol_pair *pairs = pol_alloc(a, (n + 1) * sizeof *pairs);
    uint8_t seen[129] = {0};
    size_t k = 0;
    rs->n_plens = 0;
    for (size_t i = 0; i < rs->n; i++) {
        for (size_t c = 0; c < rs->rules[i].n_cidrs; c++) {
            const pol_cidr *cd = &rs->rules[i].cidrs[c];
            char key[40];
            size_t len = cidr_key(cd->addr, cd->plen, key);
            pairs[k++] = (pol_pair){pol_strndup(a, key, len), (uint32_t)i};
            if (!seen[cd->plen]++)
                rs->plens[rs->n_plens++] = cd->plen;
        }
    }
    pol_index_build(a, &rs->cidr, pairs, k);
}

void pol_ruleset_index(pol_arena *a, pol_ruleset *rs)
{
    size_t n_exact = 0, n_wild = 0, n_cidr = 0;
    for (size_t i = 0; i < rs->n; i++) {
        for (size_t h = 0; h < rs->rules[i].n_hosts; h++)
            rs->rules[i].hosts[h][0] == '*' ? n_wild++ : n_exact++;
        n_cidr += rs->rules[i].n_cidrs > 0;
    }
    pol_pair *ex = pol_alloc(a, (n_exact + 1) * sizeof *ex);
    pol_pair *wi = pol_alloc(a, (n_wild + 1) * sizeof *wi);
    rs->cidr_rules = pol_alloc(a, (n_cidr + 1) * sizeof *rs->cidr_rules);
    size_t e = 0, w = 0;
    rs->n_cidr_rules = 0;
    for (size_t i = 0; i < rs->n; i++) {
        const pol_rule *r = &rs->rules[i];
        for (size_t h = 0; h < r->n_hosts; h++) {
            if (r->hosts[h][0] == '*')
                wi[w++] = (pol_pair){r->hosts[h] + 2, (uint32_t)i};
            else
                ex[e++] = (pol_pair){r->hosts[h], (uint32_t)i};
        }
        if (r->n_cidrs)
            rs->cidr_rules[rs->n_cidr_rules++] = (uint32_t)i;
    }
    pol_index_build(a, &rs->exact, ex, e);
    pol_index_build(a, &rs->wild, wi, w);
    index_cidrs(a, rs);
}

/* ---- policy/addr.h: the same rules, exported for the host's proxy ---- */

_Static_assert(sizeof(policy_cidr) == sizeof(pol_cidr), "policy_cidr mirrors pol_cidr");

int policy_ip_parse(const char *s, uint8_t out[16]) { return pol_ip_parse(s, out); }

void policy_ip_format(const uint8_t ip[16], char *buf, size_t cap) { pol_ip_format(ip, buf, cap); }

int policy_cidr_parse(const char *s, policy_cidr *out)
{
    pol_cidr c;
    if (pol_cidr_parse(s, &c) != 0)
        return -1;
    memcpy(out->addr, c.addr, 16);
    out->plen = c.plen;
    return 0;
}

int policy_cidr_contains(const policy_cidr *c, const uint8_t ip[16])
{
    pol_cidr p;
    memcpy(p.addr, c->addr, 16);
    p.plen = c->plen;
    return pol_cidr_contains(&p, ip);
}

const char *policy_ip_special(const uint8_t ip[16], policy_cidr *range)
{
    pol_cidr r;
    const char *name = pol_ip_special(ip, &r);
    if (name && range) {
        memcpy(range->addr, r.addr, 16);
        range->plen = r.plen;
    }
    return name;
}

const char *policy_host_check(const char *s, char *out, size_t cap, int allow_wild)
{
    return pol_host_check(s, out, cap, allow_wild);
}
