/* router.c — backend hosts: one channel each, found by the name a sandbox
 * id starts with, or chosen for a new sandbox by hashing its dedupe key so
 * every create for one task (from any gateway replica) reaches the same
 * host, which keeps at most one live sandbox per key. */
#include <stdlib.h>
#include <string.h>

#include "gateway/gw.h"

int gw_hosts_connect(sg_err *err)
{
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
    }
    return 0;
}

gw_host *gw_host_by_name(const char *name)
{
    for (size_t i = 0; i < G.n_hosts; i++)
        if (strcmp(G.hosts[i].name, name) == 0)
            return &G.hosts[i];
    return NULL;
}

gw_host *gw_host_for_key(const char *key)
{
    if (!G.n_hosts)
        return NULL;
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return &G.hosts[h % G.n_hosts];
}
