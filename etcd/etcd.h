/* etcd.h — a client for etcd's v3 gRPC API (proto/etcd/v3/kv.proto), on the
 * same gRPC C core and protobuf-c stack as the daemons. No C etcd client
 * exists in Debian; this one covers what sandgate's registry needs:
 *
 *  - unary KV and Lease calls, each with a deadline, on any of the
 *    cluster's endpoints: a call that gets UNAVAILABLE or DEADLINE_EXCEEDED
 *    from one member is tried on the next (every operation sandgate makes is
 *    safe to repeat: puts of the same value, create-if-absent transactions
 *    whose winner is read back, grants whose extra lease simply expires);
 *  - a lease keeper that keeps one lease alive and says when it was lost;
 *  - a prefix watch that reconnects from the last revision it saw.
 *
 * Async calls complete on the client's own thread (its completion queue),
 * never on a caller's loop thread; the _sync forms block the caller and are
 * for start-up and tools. Everything a callback is given it may keep only
 * for the call, except resp, which it owns. */
#ifndef SG_ETCD_H
#define SG_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "etcd/v3/kv.pb-c.h"

#define ETCD_MAX_ENDPOINTS 16

typedef struct etcd_client etcd_client;

typedef enum {
    ETCD_RANGE,
    ETCD_PUT,
    ETCD_DELETE_RANGE,
    ETCD_TXN,
    ETCD_LEASE_GRANT,
    ETCD_LEASE_REVOKE,
    ETCD_LEASE_KEEPALIVE,   /* one request, one answer, on a stream of its own */
    ETCD_N_METHODS
} etcd_method;

/* TLS to the members (file paths; tls.c). ca is required; cert and key,
 * both or neither, answer etcd's --client-cert-auth; server_name (NULL =
 * the endpoint's host) is the name the members' certificates must carry. */
typedef struct etcd_tls {
    const char *ca, *cert, *key, *server_name;
} etcd_tls;

/* Read and check the files as etcd_client_create would (--check-config). */
int etcd_tls_check(const etcd_tls *tls, sg_err *err);

/* endpoints: "host:port" (IPv4 or a name; no scheme). timeout_s bounds
 * each attempt of each call. tls NULL: plaintext. A file that cannot be
 * read or parsed, or a key that is not the certificate's, fails here. */
etcd_client *etcd_client_create(const char *const *endpoints, size_t n, double timeout_s,
                                const etcd_tls *tls, sg_err *err);
void etcd_client_destroy(etcd_client *c);

/* done(arg, code, resp): code 0 or a negative SG_E* (SG_EUNAVAIL when no
 * member answered); resp is the method's response message, owned by done
 * (protobuf_c_message_free_unpacked), NULL unless code is 0. */
typedef void (*etcd_done)(void *arg, int code, ProtobufCMessage *resp, const char *why);
int etcd_call(etcd_client *c, etcd_method m, const ProtobufCMessage *req, etcd_done done,
              void *arg, sg_err *err);
int etcd_call_sync(etcd_client *c, etcd_method m, const ProtobufCMessage *req,
                   ProtobufCMessage **resp, sg_err *err);

/* Conveniences on etcd_call_sync. */
int etcd_put_sync(etcd_client *c, const char *key, const void *val, size_t len, int64_t lease,
                  sg_err *err);
/* *val: malloc'd copy (NUL-terminated), NULL if the key is absent. */
int etcd_get_sync(etcd_client *c, const char *key, char **val, size_t *len, sg_err *err);
/* Put key=val only if key does not exist (create revision 0), in one
 * transaction. *created: 1 if this call made it; *existing: the value that
 * is there now (malloc'd; ours when created), may be NULL. */
int etcd_create_sync(etcd_client *c, const char *key, const char *val, int64_t lease,
                     int *created, char **existing, sg_err *err);
int etcd_lease_grant_sync(etcd_client *c, int64_t ttl_s, int64_t *id, sg_err *err);

/* Keep lease alive: a keepalive every ttl/3; on_lost(arg) runs once, on the
 * client's thread, when etcd says the lease is gone or no keepalive got
 * through for ttl seconds. */
typedef struct etcd_keeper etcd_keeper;
etcd_keeper *etcd_keeper_start(etcd_client *c, int64_t lease, int64_t ttl_s,
                               void (*on_lost)(void *arg), void *arg);
void etcd_keeper_stop(etcd_keeper *k);   /* before etcd_client_destroy */

/* Watch every key under prefix from start_rev (0 = now). on_event runs on
 * the client's thread for each event, in revision order; after a
 * reconnect the watch resumes at the revision after the last one seen, so
 * no event is lost or repeated. on_reset runs if etcd compacted past that
 * revision: the caller must re-read the prefix (the watch restarts now). */
typedef struct etcd_watch etcd_watch;
typedef void (*etcd_watch_event)(void *arg, int is_delete, const char *key,
                                 const uint8_t *val, size_t len, int64_t rev);
etcd_watch *etcd_watch_start(etcd_client *c, const char *prefix, int64_t start_rev,
                             etcd_watch_event on_event, void (*on_reset)(void *arg), void *arg);
void etcd_watch_stop(etcd_watch *w);      /* before etcd_client_destroy */

/* The end of the range of keys that start with prefix (prefix + 1). */
size_t etcd_prefix_end(const char *prefix, uint8_t *out, size_t cap);

#endif
