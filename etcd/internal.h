/* internal.h — what the client's files share: the client itself and the
 * keeper tick that its thread runs. */
#ifndef SG_ETCD_INTERNAL_H
#define SG_ETCD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "etcd/etcd.h"
#include "rpc/rpc.h"

#define ETCD_TICK_MS 100
#define ETCD_MAX_KEEPERS 8
#define ETCD_MAX_WATCHES 8

struct etcd_client {
    grpc_channel *ch[ETCD_MAX_ENDPOINTS];   /* owned */
    char *endpoints[ETCD_MAX_ENDPOINTS];    /* owned */
    size_t n;
    atomic_size_t current;                  /* the member calls start at */
    double timeout_s;
    grpc_completion_queue *cq;              /* owned; the thread drains it */
    pthread_t thread;
    int started;
    atomic_int stopping;
    pthread_mutex_t mu;                     /* guards keepers */
    etcd_keeper *keepers[ETCD_MAX_KEEPERS]; /* borrowed: each owned by its starter */
    etcd_watch *watches[ETCD_MAX_WATCHES];  /* borrowed, likewise */
    int tls;                                /* the channels speak TLS */
    /* Per member: the last failure logged, so a handshake that keeps
     * failing is logged once (and again when it changes or recovers). */
    pthread_mutex_t log_mu;
    char last_err[ETCD_MAX_ENDPOINTS][160];
};

/* tls.c: grpc ssl credentials from the files (read and checked). */
grpc_channel_credentials *etcd_tls_creds(const etcd_tls *t, sg_err *err);

int64_t etcd_now_us(void);                  /* monotonic */
void etcd_watches_tick(etcd_client *c);     /* watch.c, on the client's thread */

void etcd_keepers_tick(etcd_client *c);     /* on the client's thread */
grpc_channel *etcd_channel(etcd_client *c, size_t i);
const grpc_metadata *etcd_leader_md(void);   /* "hasleader: true", one entry */

#endif
