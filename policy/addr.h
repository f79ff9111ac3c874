/* addr.h — the address and host-name rules of egress decisions, exported
 * so the host's egress proxy (host/egress/match.c) decides with the same
 * code as policy_decide_egress: IP-literal parsing in every spelling a
 * resolver accepts (decimal, octal, hex, IPv4-mapped/compatible, NAT64),
 * CIDRs, the special ranges (loopback, private, link-local, ...) and host
 * name normalisation. Pure; no I/O. */
#ifndef SG_POLICY_ADDR_H
#define SG_POLICY_ADDR_H

#include <stddef.h>
#include <stdint.h>

typedef struct policy_cidr {
    uint8_t addr[16];   /* IPv4 stored as ::ffff:a.b.c.d */
    uint8_t plen;       /* 0..128 in the 16-byte space */
} policy_cidr;

/* 1 if s is an IP literal (then out holds it, IPv4 mapped), else 0. */
int policy_ip_parse(const char *s, uint8_t out[16]);
void policy_ip_format(const uint8_t ip[16], char *buf, size_t cap);
int policy_cidr_parse(const char *s, policy_cidr *out);   /* 0 ok, -1 bad */
int policy_cidr_contains(const policy_cidr *c, const uint8_t ip[16]);
/* The special range ip is in ("loopback", ...) or NULL; *range (nullable)
 * receives it, so a CIDR rule can be checked to lie inside it. */
const char *policy_ip_special(const uint8_t ip[16], policy_cidr *range);
/* Lowercase, check and copy a host name into out; NULL when fine, else
 * what is wrong. allow_wild accepts a leading "*.". */
const char *policy_host_check(const char *s, char *out, size_t cap, int allow_wild);

#endif
