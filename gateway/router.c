/* router.c — backend hosts: one channel each, found by the name a sandbox
 * id starts with, or chosen for a new sandbox by rendezvous hashing of the
 * host names with its dedupe key (placement.c), so every create for one task
 * (from any gateway replica, whatever order its config lists the hosts in)
 * reaches the same host, which keeps at most one live sandbox per key.
 *
 * Only SERVING hosts (health.c) are candidates: while a task's winning host
 * is down, its create goes to the next-highest serving host. When the winner
 * comes back, new keys return to it; a key that already has a live sandbox
 * on the runner-up keeps going there, because CreateSandbox first looks for
 * the key's sandbox in the quota fan-out (service.c) and sends the create to
 * the host that holds it, which dedupes. */
#include <stdlib.h>
#include <string.h>

#include "gateway/gw.h"
#include "gateway/placement.h"

int gw_hosts_connect(sg_err *err)
{
    if (G.cfg.registry.n_endpoints)
        return gw_registry_start(err);
    G.n_hosts = G.cfg.n_hosts;
    if (G.n_hosts > GW_MAX_HOSTS)
        return sg_err_set(err, SG_EINVAL, "%zu hosts configured; the gateway supports %d",
                          G.n_hosts, GW_MAX_HOSTS);
    G.hosts = calloc(G.n_hosts, sizeof *G.hosts);
    for (size_t i = 0; i < G.n_hosts; i++) {
        G.hosts[i].name = G.cfg.hosts[i].name;
        G.hosts[i].address = G.cfg.hosts[i].address;
        G.hosts[i].channel = rpc_channel_create(G.hosts[i].address, NULL);
        if (!G.hosts[i].channel)
            return sg_err_set(err, SG_EINTERNAL, "cannot create a channel to host %s (%s)",
                              G.hosts[i].name, G.hosts[i].address);
        atomic_store(&G.hosts[i].present, 1);
        atomic_store(&G.hosts[i].registered, 1);
    }
    return 0;
}


gw_host *gw_host_by_name(const char *name)
{
    for (size_t i = 0; i < G.n_hosts; i++)
        if (atomic_load(&G.hosts[i].present) && strcmp(G.hosts[i].name, name) == 0)
            return &G.hosts[i];
    return NULL;
}

gw_host *gw_host_for_key(const char *key, const int *avoid)
{
    const char *names[GW_MAX_HOSTS];
    int usable[GW_MAX_HOSTS], any = 0;
    for (size_t i = 0; i < G.n_hosts; i++) {
        /* an empty slot never serves; a draining host takes no new task */
        usable[i] = gw_host_serving(&G.hosts[i]) && !atomic_load(&G.hosts[i].draining);
        names[i] = usable[i] ? G.hosts[i].name : "";
        any |= usable[i] && !(avoid && avoid[i]);
    }
    /* avoid[] is a preference: if it rules out every serving host, ignore it. */
    for (size_t i = 0; any && avoid && i < G.n_hosts; i++)
        usable[i] = usable[i] && !avoid[i];
    int i = gw_place_pick(names, usable, G.n_hosts, key);
    return i < 0 ? NULL : &G.hosts[i];
}
