/* registry.c — the host's entry in etcd (config `registry:`; nothing runs
 * in the embedded mode). One key, <prefix>hosts/<name>, bound to a lease the
 * host keeps alive: a host that dies or is cut off loses the lease and the
 * key with it within lease_ttl, so gateways stop placing on it; an orderly
 * stop revokes the lease so they stop at once. The value is a JSON load
 * report (address, templates and their isolation and warm pool, capacity,
 * live sandboxes, free memory), rewritten every REPORT_MS.
 *
 * The key is claimed with a create-if-absent transaction, never a blind
 * put: a second host started under the same name (sandbox ids name their
 * host) cannot take over a live host's entry; it waits, and logs why, until
 * that entry's lease ends.
 *
 * A drain (host_registry_drain: SIGUSR1, or the --drain-file line) adds "draining":true to the
 * report, sent at once rather than at the next REPORT_MS: gateways then
 * place no new task here while every sandbox here keeps being served.
 *
 * Everything here runs on a thread of its own with etcd's calls bounded by
 * the client's deadline: an unreachable etcd delays only the next report,
 * never a call of any tenant (H.mu is taken only to count). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "etcd/etcd.h"
#include "host/core/admit.h"
#include "host/host.h"

#define REPORT_MS 2000
#define ETCD_CALL_TIMEOUT_S 1.0

static struct {
    etcd_client *etcd;          /* owned */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
    int kick;                   /* report now (with mu) */
    atomic_int draining;
    const char *drain_file;     /* borrowed (argv); NULL = none */
    int64_t lease;              /* 0 = none */
    etcd_keeper *keeper;        /* owned while lease */
    volatile int lost;          /* the keeper said the lease is gone */
    char key[256];
    char address[128];
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void on_lost(void *arg) { R.lost = 1; }

/* The load report; with H.mu taken only to count. */
static size_t report(char *out, size_t cap)
{
    host_admit_usage u;
    host_admit_measure(&u, H.cfg.cgroup_root);
    pthread_mutex_lock(&H.mu);
    size_t live = 0;
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        live += !sb->pooled && sb->state != SB_KILLING;
    int n = snprintf(out, cap, "{\"name\":\"%s\",\"address\":\"%s\",\"capacity\":%u,\"live\":%zu,"
                               "\"free_memory\":%lld,\"draining\":%s,\"templates\":[",
                     H.cfg.name, R.address, H.cfg.max_sandboxes, live,
                     (long long)(u.mem_available > 0 ? u.mem_available : 0),
                     atomic_load(&R.draining) ? "true" : "false");
    for (size_t i = 0; i < H.n_templates && n > 0 && (size_t)n < cap; i++) {
        size_t ready = 0;
        for (host_sandbox *sb = H.templates[i].pool; sb; sb = sb->pool_next)
            ready += sb->pool_ready != 0;
        n += snprintf(out + n, cap - (size_t)n,
                      "%s{\"name\":\"%s\",\"isolation\":\"process\",\"pool_ready\":%zu}",
                      i ? "," : "", H.templates[i].cfg->name, ready);
    }
    pthread_mutex_unlock(&H.mu);
    if (n > 0 && (size_t)n < cap)
        n += snprintf(out + n, cap - (size_t)n, "]}");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static void revoke(int64_t lease, sg_err *err)
{
    Etcdserverpb__LeaseRevokeRequest r;
    etcdserverpb__lease_revoke_request__init(&r);
    r.id = lease;
    ProtobufCMessage *resp = NULL;
    if (etcd_call_sync(R.etcd, ETCD_LEASE_REVOKE, &r.base, &resp, err) == 0)
        protobuf_c_message_free_unpacked(resp, NULL);
}

/* Stop keeping the lease and revoke it: etcd may still hold it (a restarted
 * etcd renews every lease it had), and an entry under it would block our
 * own claim until it ran out. A revoke that fails leaves it to expire. */
static void drop_lease(void)
{
    etcd_keeper_stop(R.keeper);
    sg_err e;
    if (R.lease)
        revoke(R.lease, &e);
    R.keeper = NULL;
    R.lease = 0;
    R.lost = 0;
}

/* A lease and the key claimed under it; 0 once registered. */
static int claim(const char *value, sg_err *err)
{
    int64_t lease;
    if (etcd_lease_grant_sync(R.etcd, H.cfg.registry.lease_ttl, &lease, err) != 0)
        return -1;
    int created = 0;
    char *existing = NULL;
    if (etcd_create_sync(R.etcd, R.key, value, lease, &created, &existing, err) != 0) {
        free(existing);
        return -1;
    }
    free(existing);
    if (!created) {
        /* Another live host has this name, or our own last life's entry
         * whose lease has not run out yet. Not ours to replace. */
        sg_err e;
        revoke(lease, &e);
        return sg_err_set(err, SG_EEXISTS,
                          "%s is registered by another host (or this host's last life, until "
                          "its lease ends); not registering yet", R.key);
    }
    R.lease = lease;
    R.keeper = etcd_keeper_start(R.etcd, lease, H.cfg.registry.lease_ttl, on_lost, NULL);
    sg_log_info("registry: registered %s (lease %llx, ttl %u s)", R.key,
                (unsigned long long)lease, H.cfg.registry.lease_ttl);
    return 0;
}

#define DRAIN_LINE "sandgate.io/drain=\"true\""

/* Whether the drain file asks for a drain: a whole line DRAIN_LINE. Read
 * here, on this thread, never on a loop thread; a missing file is no. */
static int drain_asked(void)
{
    FILE *f = R.drain_file ? fopen(R.drain_file, "re") : NULL;
    if (!f)
        return 0;
    char line[4096];
    int yes = 0;
    while (!yes && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        yes = strcmp(line, DRAIN_LINE) == 0;
    }
    fclose(f);
    return yes;
}

void host_registry_drain_file(const char *path) { R.drain_file = path; }

static void tick(int *logged)
{
    if (!atomic_load(&R.draining) && drain_asked()) {
        atomic_store(&R.draining, 1);
        sg_log_info("draining (%s says so): gateways place no new task here; the sandboxes "
                    "here keep running", R.drain_file);
    }
    char value[4096];
    sg_err err = {0};
    if (!report(value, sizeof value))
        return;
    if (R.lease && R.lost) {
        sg_log_warn("registry: lease %llx lost (etcd unreachable or the host was cut off); "
                    "registering again", (unsigned long long)R.lease);
        drop_lease();
    }
    int rc = R.lease ? etcd_put_sync(R.etcd, R.key, value, strlen(value), R.lease, &err)
                     : claim(value, &err);
    if (rc != 0 && !*logged) {
        sg_log_warn("registry: %s", err.msg);
        *logged = 1;   /* once per outage, not every REPORT_MS */
    } else if (rc == 0) {
        *logged = 0;
    }
}

static void *registry_main(void *arg)
{
    int logged = 0;
    pthread_mutex_lock(&R.mu);
    while (!R.stop) {
        pthread_mutex_unlock(&R.mu);
        tick(&logged);
        pthread_mutex_lock(&R.mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += REPORT_MS / 1000;
        while (!R.stop && !R.kick && pthread_cond_timedwait(&R.cv, &R.mu, &ts) == 0)
            ;
        R.kick = 0;
    }
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

int host_registry_start(const char *listen, sg_err *err)
{
    const config_registry *cfg = &H.cfg.registry;
    if (cfg->n_endpoints == 0)
        return 0;
    snprintf(R.key, sizeof R.key, "%shosts/%s", cfg->prefix, H.cfg.name);
    snprintf(R.address, sizeof R.address, "%s", cfg->advertise ? cfg->advertise : listen);
    R.etcd = etcd_client_create((const char *const *)cfg->endpoints, cfg->n_endpoints,
                                ETCD_CALL_TIMEOUT_S, err);
    if (!R.etcd)
        return -1;
    if (pthread_create(&R.thread, NULL, registry_main, NULL) != 0) {
        etcd_client_destroy(R.etcd);
        R.etcd = NULL;
        return sg_err_errno(err, SG_EINTERNAL, "registry: pthread_create");
    }
    R.running = 1;
    return 0;
}

void host_registry_drain(void)
{
    if (atomic_exchange(&R.draining, 1))
        return;
    if (!R.running) {
        sg_log_warn("draining: no registry, so no gateway hears it (static host lists "
                    "place by health alone); ignored");
        return;
    }
    sg_log_info("draining: gateways place no new task here; the sandboxes here keep running");
    pthread_mutex_lock(&R.mu);
    R.kick = 1;
    pthread_cond_signal(&R.cv);
    pthread_mutex_unlock(&R.mu);
}

void host_registry_stop(void)
{
    if (!R.running)
        return;
    pthread_mutex_lock(&R.mu);
    R.stop = 1;
    pthread_cond_signal(&R.cv);
    pthread_mutex_unlock(&R.mu);
    pthread_join(R.thread, NULL);
    if (R.lease) {
        /* Gateways stop placing here now, not a lease_ttl from now. */
        int64_t lease = R.lease;
        etcd_keeper_stop(R.keeper);
        R.keeper = NULL;
        R.lease = 0;
        sg_err e = {0};
        revoke(lease, &e);
        if (e.code)
            sg_log_warn("registry: revoking the lease: %s", e.msg);
        else
            sg_log_info("registry: lease %llx revoked; %s removed", (unsigned long long)lease,
                        R.key);
    }
    etcd_client_destroy(R.etcd);
    R.etcd = NULL;
    R.running = 0;
}
