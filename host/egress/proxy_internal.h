/* proxy_internal.h — the egress proxy's shared state and the calls its
 * files make into each other: the proxy and its thread (proxy.c), sandboxes
 * and their byte accounting (sandbox.c), connections and the proxy's own
 * answers (conn.c), the request head and tunnel check (request.c), judging
 * resolved addresses and connecting (connect.c), the resolver pool
 * (lookup.c), byte relaying (relay.c) and audit records (audit.c).
 * The module's API is egress.h; the pure parsers are internal.h.
 *
 * Every function here runs with p->mu held (see proxy.c) unless it says
 * otherwise. */
#ifndef SG_EGRESS_PROXY_INTERNAL_H
#define SG_EGRESS_PROXY_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "host/egress/egress.h"
#include "host/egress/internal.h"

#define EG_BUF_CAP (64 * 1024)
#define EG_BUF_SLACK 256          /* room for the response head rewrite */
#define EG_RESP_CAP 2048
#define EG_MAX_CONNS_PER_SANDBOX 256

/* What an epoll event's data.ptr points at. */
enum { FD_WAKE = 1, FD_LISTEN, FD_CLIENT, FD_UPSTREAM };
typedef struct fdref { int type; void *obj; } fdref;

/* A connection's state, and the file whose handler moves it on:
 *
 *   HEAD ──CONNECT──▶ (RESOLVING) ▶ CONNECTING ▶ 200 ▶ HELLO (SNI check) ▶ RELAY
 *   HEAD ──http://──▶ (RESOLVING) ▶ CONNECTING ▶ rewritten head ▶ RELAY
 *   any denial ▶ FLUSH: 403/4xx/5xx with the rule and reason, then close
 *
 * HEAD, HELLO: request.c; RESOLVING: lookup.c; CONNECTING: connect.c;
 * RELAY: relay.c; FLUSH: conn.c (the answer) and relay.c (sending it). */
typedef enum { C_HEAD, C_RESOLVING, C_CONNECTING, C_HELLO, C_RELAY, C_FLUSH } cstate;

typedef struct iobuf { uint8_t *p; size_t off, len; } iobuf;   /* p owned */

typedef struct job job;
typedef struct conn conn;

struct egress_sandbox {
    fdref ref;
    egress_proxy *p;                 /* borrowed */
    egress_sandbox *next;
    char id[128];
    char *path;                      /* owned */
    int lfd;
    egress_rules *rules;             /* owned */
    uint64_t cap, up, down, allowed, denied, open;
    conn *conns;                     /* owned list */
    int dead;
};

struct conn {
    conn *next;                      /* in sb->conns, then graveyard */
    egress_sandbox *sb;              /* borrowed */
    fdref cref, uref;
    int cfd, ufd;
    uint32_t cev, uev;               /* registered interest; ~0u = not registered */
    cstate st;
    int64_t deadline_us;
    iobuf c2u, u2c;
    char resp[EG_RESP_CAP]; size_t resp_off, resp_len;   /* the proxy's own answer */
    eg_req req;
    int64_t body_left;               /* HTTP: request body bytes still allowed */
    int c_eof, u_eof, up_shut;
    job *job;                        /* borrowed: pending lookup */
    eg_addrs addrs; size_t next_addr;
    char ip[64];
    egress_decision dec;
    int decided, audited, dead, cap_hit;
    int resp_head_done;              /* HTTP: upstream's response head rewritten */
    uint64_t up, down;
};

/* One name lookup, queued for the resolver threads (lookup.c). */
struct job {
    job *next;
    conn *c;                         /* borrowed; NULL once the conn is gone (p->mu) */
    char host[256];
    uint16_t port;
    eg_addrs res;
};

struct egress_proxy {
    egress_options o;
    char *hosts_file;                /* owned */
    pthread_t thr;
    int epfd, wakefd;
    fdref wake;
    volatile int stop;
    pthread_mutex_t mu;
    egress_sandbox *sandboxes;       /* owned */
    egress_sandbox *sb_grave;        /* owned, freed after the batch */
    conn *grave;                     /* owned, freed after the batch */
    /* resolver */
    pthread_t *rthr; int n_rthr;
    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    int rstop;
    job *q_head, *q_tail, *done;     /* owned */
    /* fd headroom (conn.c fds_short): the last count, less 2 per connection since */
    long fds_free;
    int64_t fds_at;
};

static inline int64_t eg_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- proxy.c --------------------------------------------------------------- */
/* Wake the proxy thread (any thread, no lock needed). */
void eg_proxy_wake(egress_proxy *p);

/* ---- sandbox.c ------------------------------------------------------------- */
void eg_sandbox_on_accept(egress_sandbox *sb);
/* Close every connection and the listener; sb goes to the graveyard. */
void eg_sandbox_close(egress_sandbox *sb);
void eg_sandbox_free(egress_sandbox *sb);
/* 1 with *left bytes the sandbox may still move, 0 when its cap is used. */
int eg_sandbox_cap_left(const egress_sandbox *sb, uint64_t *left);

/* ---- conn.c ---------------------------------------------------------------- */
/* A client connection of sb (accepted or handed in): fd is owned, non-blocking. */
void eg_conn_start(egress_sandbox *sb, int fd);
/* Audit, close both sockets; c goes to the graveyard. */
void eg_conn_close(conn *c);
/* EPOLL_CTL_DEL (if registered) then close; *fd = -1, *ev = ~0u. */
void eg_conn_drop_fd(conn *c, int *fd, uint32_t *ev);
void eg_conn_free(conn *c);
/* Register the epoll interest c's state and buffers call for. */
void eg_conn_update(conn *c);
/* Record an allowing decision. */
void eg_conn_allowed(conn *c, const egress_decision *d);
/* Answer with an HTTP error naming rule and reason, then close (FLUSH). */
void eg_fail(conn *c, int code, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Inside a tunnel: a TLS alert, then close. */
void eg_fail_tunnel(conn *c, const char *rule, const char *reason);

/* ---- audit.c --------------------------------------------------------------- */
/* Report c's decision to on_audit once. */
void eg_audit_conn(conn *c);

/* ---- request.c ------------------------------------------------------------- */
/* Client bytes arrived in c2u in state HEAD / HELLO. */
void eg_request_on_head_bytes(conn *c);
void eg_request_on_hello_bytes(conn *c);

/* ---- connect.c ------------------------------------------------------------- */
/* Judge the resolved addresses; connect to the allowed ones in order. */
void eg_connect_on_resolved(conn *c, const eg_addrs *res);
/* An IP-literal host, already allowed by d: connect to the literal itself. */
void eg_connect_literal(conn *c, const uint8_t lit[16], const egress_decision *d);
/* The upstream socket became writable in state CONNECTING. */
void eg_connect_on_ready(conn *c);

/* ---- lookup.c -------------------------------------------------------------- */
/* Start / join the resolver threads (no p->mu needed). */
int eg_lookup_start(egress_proxy *p, sg_err *err);
void eg_lookup_stop(egress_proxy *p);
/* Free the lookups still queued or done (after eg_lookup_stop). */
void eg_lookup_drop(egress_proxy *p);
/* Queue c's host for the resolvers (state RESOLVING). */
void eg_lookup_submit(conn *c);
/* Hand finished lookups to their connections (after a wake). */
void eg_lookup_collect(egress_proxy *p);

/* ---- relay.c --------------------------------------------------------------- */
void eg_relay_on_client_in(conn *c);
void eg_relay_on_client_out(conn *c);
void eg_relay_on_upstream(conn *c, uint32_t ev);
/* Half-close or close once one side is finished and drained. */
void eg_relay_check(conn *c);

#endif
