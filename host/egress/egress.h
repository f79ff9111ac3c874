/* egress.h — the host's egress proxy: the one way out of a sandbox that was
 * granted network rules. A sandbox's client connections reach it either
 * through a Unix-socket listener of its own (egress-testd) or handed in as
 * fds (egress_sandbox_adopt: the host daemon, whose sandbox supervisors
 * accept on 127.0.0.1:3128 inside the sandbox and pass each connection
 * over; see host/egress_glue.c). The proxy speaks HTTP CONNECT (TLS passed through; the ClientHello's SNI must
 * equal the CONNECT host) and absolute-URI HTTP (one request per
 * connection, Host must match the URI; the response is marked
 * "Connection: close"). It resolves names itself, connects
 * only to addresses it resolved and judged, counts bytes per sandbox against
 * a cap, answers every denial with 403 naming the rule and reason, and
 * reports every connection decision to an audit callback.
 *
 * Threads: the proxy runs its own epoll thread (so relaying bytes never
 * takes the host's table mutex or adds to the host loop's latency) and a
 * small resolver pool (getaddrinfo blocks). The functions below may be
 * called from any thread. Matching is pure and mirrors policy_decide_egress
 * (policy/decide.c): see match.c. Parsers are pure: see parse.c. */
#ifndef SG_EGRESS_H
#define SG_EGRESS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---- rules and the pure decision (match.c) ------------------------------ */

/* One granted rule, as HostCreateRequest.egress carries it. Borrowed by
 * egress_rules_create, which copies what it keeps. */
typedef struct egress_rule {
    const char *id;                          /* policy rule id */
    const char *host;                        /* exact or "*.suffix", or NULL */
    const char *cidr;                        /* or NULL */
    const uint32_t *ports; size_t n_ports;   /* empty = any port */
} egress_rule;

typedef struct egress_rules egress_rules;    /* immutable, compiled */

typedef struct egress_decision {
    int allow;
    char rule[128];      /* deciding rule id, or "default.deny-egress", ... */
    char reason[320];
} egress_decision;

int egress_rules_create(const egress_rule *r, size_t n, egress_rules **out, sg_err *err);
void egress_rules_destroy(egress_rules *rs);

/* IP literal (every IPv4 spelling inet_aton takes, IPv6, [v6], mapped,
 * compatible, NAT64 folded to IPv4) → 16 bytes, IPv4 as ::ffff:a.b.c.d.
 * Returns 1 if s is an IP literal. */
int egress_ip_parse(const char *s, uint8_t out[16]);
void egress_ip_format(const uint8_t ip[16], char *buf, size_t cap);
/* Special range name ("loopback", ...) or NULL. */
const char *egress_ip_special(const uint8_t ip[16]);

/* Decide a connection to host:port. ip: the address the proxy resolved the
 * name to (NULL: judge the name alone). An IP-literal host is judged by
 * CIDR rules only and ip is ignored. */
void egress_decide(const egress_rules *rs, const char *host, uint32_t port,
                   const uint8_t *ip, egress_decision *out);

/* ---- the proxy (proxy.c and its parts, proxy_internal.h; resolve.c) -------- */

typedef struct egress_audit {
    const char *sandbox, *kind;       /* kind: "connect" or "http" */
    const char *host;                 /* as asked */
    uint32_t port;
    const char *ip;                   /* connected/judged address or "" */
    int allow;
    const char *rule, *reason;
    uint64_t bytes_up, bytes_down;    /* sandbox→out, out→sandbox */
} egress_audit;

/* One JSON line (with '\n') into buf; returns its length. */
size_t egress_audit_json(const egress_audit *a, char *buf, size_t cap);

typedef struct egress_options {
    const char *hosts_file;   /* "IP name..." lines consulted before DNS; NULL = none */
    int hosts_only;           /* 1: never call getaddrinfo (tests) */
    int resolver_threads;     /* 0 = 2 */
    uint32_t connect_timeout_ms, idle_timeout_ms, header_timeout_ms;  /* 0 = defaults */
    /* New connections are refused (503) while fewer fds than this would be
     * left in the process: sandboxes must not drain the host's table. 0 = off. */
    uint32_t reserve_fds;
    /* Called on the proxy thread for every decision (a denial at once, an
     * allowed connection when it ends, with its bytes). */
    void (*on_audit)(void *arg, const egress_audit *a);
    void *audit_arg;          /* borrowed */
} egress_options;

typedef struct egress_proxy egress_proxy;
typedef struct egress_sandbox egress_sandbox;

typedef struct egress_counters {
    uint64_t bytes_up, bytes_down, byte_cap;
    uint64_t allowed, denied, open;
} egress_counters;

int egress_proxy_create(const egress_options *o, egress_proxy **out, sg_err *err);
/* Stops the thread, closes every listener and connection. */
void egress_proxy_destroy(egress_proxy *p);

/* Register one sandbox; with sock_path, listen there (created, mode 0666;
 * an existing file is replaced), with NULL only adopted connections come.
 * rules is consumed (owned by the sandbox from now on, also on failure).
 * byte_cap 0 = unlimited. */
int egress_sandbox_create(egress_proxy *p, const char *sandbox_id, const char *sock_path,
                          egress_rules *rules, uint64_t byte_cap, egress_sandbox **out,
                          sg_err *err);
/* Close the listener and every connection of the sandbox, unlink the
 * socket. Connections still open are audited with their bytes. */
void egress_sandbox_destroy(egress_sandbox *s);
/* A client connection of s (a connected stream socket, any namespace):
 * fd is consumed (made non-blocking; closed at once when s is closing or
 * has too many connections). */
void egress_sandbox_adopt(egress_sandbox *s, int fd);
void egress_sandbox_counters(egress_sandbox *s, egress_counters *out);

#endif
