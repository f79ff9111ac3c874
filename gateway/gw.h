/* gw.h — the gateway's state and its modules: the live policy (reload.c),
 * backend hosts (router.c), the audit log (audit.c), forwarded calls
 * (forward.c) and the public service (service.c). */
#ifndef SG_GW_H
#define SG_GW_H

#include <pthread.h>
#include <stdatomic.h>

#include "config/config.h"
#include "policy/policy.h"
#include "rpc/rpc.h"
#include "tenancy/tenancy.h"

#define GW_MAX_HOSTS 64

/* Registry mode: what the host's last report said (host/registry.c). */
#define GW_HOST_TEMPLATES 16
typedef struct gw_host_load {
    int64_t lease;              /* the host's etcd lease: claims for it are bound to it */
    uint32_t capacity, live;    /* sandboxes; capacity 0 = not reported */
    int64_t free_memory;        /* bytes */
    size_t n_templates;
    struct {
        char name[64], isolation[24];
        uint32_t pool_ready;    /* warm sandboxes ready now */
    } templates[GW_HOST_TEMPLATES];
} gw_host_load;

typedef struct gw_host {
    /* Static mode: every field set before serving. Registry mode
     * (registry.c): a slot is filled once, then `present` is set; name never
     * changes after that, address and channel may be replaced (atomically;
     * the old ones are retired, never freed while the process runs, since a
     * call in flight may hold them). */
    char *name;                 /* borrowed from the config, or owned (registry) */
    char *address;              /* likewise; read with gw_host_address */
    grpc_channel *channel;      /* owned; read with gw_host_channel */
    atomic_int present;         /* the slot is in use */
    atomic_int registered;      /* registry mode: the host's entry exists in etcd */
    atomic_int draining;        /* registry mode: its report says "draining": no new
                                 * task goes there; its sandboxes are served as ever */
    atomic_int serving;         /* GW_HOST_*: health.c writes, anyone reads */
    atomic_int checking;        /* health.c: a Check is in flight */
    int misses;                 /* health.c only: Checks in a row past their deadline */
    int reporting;              /* health.c only: a load report is in flight */
    int64_t next_report_ms;     /* health.c only: when to ask for the next */
    atomic_uint placed;         /* registry mode: creates placed here since its last report */
} gw_host;

enum { GW_HOST_UNKNOWN = 0, GW_HOST_SERVING = 1, GW_HOST_NOT_SERVING = 2 };

typedef struct gw_state {
    config_gateway cfg;
    char config_path[1024];
    gw_host *hosts;
    size_t n_hosts;
    rpc_server *srv;
    int mtls;                   /* the listener requires client certificates */
} gw_state;

extern gw_state G;

/* reload.c — keep-last-good policy */
/* keys_path: the config's api_keys_file, NULL = none. */
int gw_policy_load_initial(const char *path, const char *keys_path, sg_err *err);
/* Validate the file in full and swap it in; on any error the live policy stays. */
int gw_policy_reload(void);
policy *gw_policy_acquire(void);   /* one ref; policy_unref when the call ends */
void gw_policy_watch_start(void);  /* SIGHUP and file-change watch thread */

/* health.c — every host's grpc.health.v1 Check, every GW_HEALTH_PERIOD_MS
 * with a GW_HEALTH_DEADLINE_MS deadline, on a thread of its own. A host is
 * NOT_SERVING at once when it says so or cannot be reached, and after
 * GW_HEALTH_MISSES Checks in a row miss their deadline (one slow answer on
 * a busy machine is not an outage): a SIGSTOPped host is out within ~1.2 s. */
#define GW_HEALTH_PERIOD_MS 200
#define GW_HEALTH_DEADLINE_MS 400
#define GW_HEALTH_MISSES 2
/* ...and, while it is SERVING, every GW_LOAD_REPORT_MS its load report:
 * every tenant's live sandboxes, for the cached quota counts (counts.c). */
#define GW_LOAD_REPORT_MS 1000
/* Nonzero while the host's last Check answered SERVING in time. A host not
 * yet checked, stopped, wedged or down reads 0. Lock-free; any thread. */
int gw_host_serving(const gw_host *h);
/* After gw_hosts_connect; returns once every host answered once (or its
 * first deadline passed). */
int gw_health_start(sg_err *err);
void gw_health_stop(void);

/* router.c */
int gw_hosts_connect(sg_err *err);
static inline grpc_channel *gw_host_channel(const gw_host *h)
{
    return __atomic_load_n(&h->channel, __ATOMIC_ACQUIRE);
}
static inline const char *gw_host_address(const gw_host *h)
{
    return __atomic_load_n(&h->address, __ATOMIC_ACQUIRE);
}

/* registry.c — registry mode (config registry:): the host table follows
 * etcd's <prefix>hosts/ entries, read at start and then watched. */
int gw_registry_start(sg_err *err);
void gw_registry_stop(void);
gw_host *gw_host_by_name(const char *name);
/* The host's last report (registry mode); -1 if it sent none. Any thread. */
int gw_host_load_get(const gw_host *h, gw_host_load *out);
/* The etcd client registry mode runs on (NULL in the embedded mode). */
struct etcd_client *gw_registry_etcd(void);
/* The highest-scoring SERVING host for a dedupe key (rendezvous hashing by
 * host name) that is not draining; NULL when there is none. avoid (optional, per G.hosts
 * index): hosts to pass over unless no other is serving. */
gw_host *gw_host_for_key(const char *key, const int *avoid);

/* audit.c — one JSON line per decision; never secret values */
int gw_audit_open(const char *path, sg_err *err);
void gw_audit(const policy *p, const char *tenant, const char *user, const char *task, const char *sandbox,
              const char *action, int allow, const char *rule, const char *message);

/* forward.c — relay a call to a host, optionally rewriting each response */
typedef struct gw_fwd_opts {
    int stream;                 /* server-streaming method; else unary (one batch each way) */
    /* Streams: an event of this kind (its oneof field: RunCode's End, Exec's
     * exit) is the last; it is held and sent with the status, in one batch.
     * 0 = none. */
    uint32_t last_field;
    /* Rewrite the host's unary reply into the public one (unary only). NULL =
     * relay bytes as they are. Returns a new buffer or NULL to fail the call
     * with INTERNAL. */
    grpc_byte_buffer *(*rewrite)(void *arg, grpc_byte_buffer *host_msg);
    void (*on_done)(void *arg, grpc_status_code code);   /* optional */
    void *arg;
    double timeout_s;           /* bound on the host call; the client's deadline also applies */
    const char *sandbox_id;     /* borrowed (lives as long as arg): named in a lost answer */
} gw_fwd_opts;

void gw_forward(rpc_call *in, gw_host *h, const char *method, const ProtobufCMessage *req,
                const gw_fwd_opts *opts);
/* Registry mode: h's registration ended; cancel every stream in flight to
 * it, each answered UNAVAILABLE/HOST_LOST. Any thread. */
void gw_forward_host_lost(const gw_host *h);

/* service.c */
int gw_service_register(rpc_server *srv, sg_err *err);

/* metrics.c — Prometheus metrics (common/metrics.h) */
int gw_metrics_init(rpc_server *srv);   /* families and the call observer */
int gw_metrics_listen(const char *addr, const char *port_file, sg_err *err);
void gw_metrics_forward(const char *method, double seconds);
void gw_metrics_decision(const char *action, int allow);
void gw_metrics_reload(int ok);

/* status.c: fail a call with a reason the agent can parse and text that
 * names nothing internal (addresses, paths, library errors are logged) */
void gw_fail(rpc_call *c, const sg_err *e);
void gw_fail_policy(rpc_call *c, int code, const char *reason, const char *rule,
                    const char *message, const char *asked);
/* What an id that never existed gets (and so does anyone else's sandbox). */
void gw_fail_not_found(rpc_call *c);
/* UNAVAILABLE, reason HOST_UNAVAILABLE: the same for every caller and id. */
void gw_fail_host_unavailable(rpc_call *c);
/* UNAVAILABLE, reason HOST_LOST (registry mode): the sandbox's host lost
 * its registration; the same for every caller and id naming that host. */
void gw_fail_host_lost(rpc_call *c);
/* UNAVAILABLE, reason REGISTRY_UNAVAILABLE: etcd did not answer a call a
 * create needs (what is logged; the caller gets a fixed text). */
void gw_fail_registry(rpc_call *c, const char *what, const char *why);
/* INTERNAL with a fixed text; what and e are logged. */
void gw_fail_internal(rpc_call *c, const char *what, const sg_err *e);
/* NOT_FOUND, reason SANDBOX_LOST: only ever to the sandbox's owner. */
void gw_fail_lost(rpc_call *c, const char *sandbox_id, const char *lost_at);
/* The host's ErrorInfo when its status says the sandbox was lost to a host
 * restart (NOT_FOUND, SANDBOX_LOST; metadata names the owner), else NULL.
 * Free with protobuf_c_message_free_unpacked. */
Sandgate__V1__ErrorInfo *gw_host_lost_info(grpc_status_code code, const rpc_trailer *t);
/* The public form of a host call's failing status (pure; status_test.c).
 * from_peer: the host's handler chose it (rpc.h RPC_ORIGIN_KEY). message is
 * static or details itself; log says the host's text goes to the log. */
typedef struct gw_public {
    grpc_status_code code;
    const char *message;
    const char *reason;         /* ErrorInfo reason, or NULL for none */
    int log;
} gw_public;
gw_public gw_public_from_host(grpc_status_code code, const char *details, int from_peer);
/* A host call failed: answer c with the public form of its status. */
void gw_fail_from_host(rpc_call *c, const gw_host *h, const char *method, const char *sandbox_id,
                       grpc_status_code code, const char *details, const rpc_trailer *t);

#endif
