/* registry.c — registry mode: the gateway's host table follows the entries
 * hosts keep in etcd (host/core/registry.c) under <prefix>hosts/<name>, instead
 * of a static list. The table is GW_MAX_HOSTS slots made at start and never
 * moved, so every gw_host pointer the rest of the gateway holds stays
 * valid: a host seen for the first time fills a free slot (then `present`
 * is set, after which its name never changes); a host whose entry goes
 * (lease expired: killed or cut off; revoked: stopped) is `registered` 0,
 * which gw_host_serving honours at once; one that registers again, perhaps
 * at a new address, gets its slot back with a new channel (the old channel
 * and address are kept until exit, since calls in flight may hold them).
 *
 * The entries are read once at start (retried until etcd answers, so a
 * gateway that starts before etcd serves as soon as it can), then watched
 * from the next revision: a membership change reaches every replica within
 * the watch's latency, with no polling. Health checks (health.c) still
 * decide SERVING for every present host, so a registered host that hangs is
 * skipped as in static mode. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "etcd/etcd.h"
#include "gateway/gw.h"

#define ETCD_CALL_TIMEOUT_S 1.0
#define RETIRED_MAX 256

static struct {
    etcd_client *etcd;          /* owned */
    etcd_watch *watch;          /* owned */
    char prefix[256];           /* <prefix>hosts/ */
    pthread_mutex_t mu;         /* serialises table writers (start, the watch) */
    pthread_t thread;
    int running;
    atomic_int stop;
    void *retired[RETIRED_MAX]; /* old channels and addresses, kept until exit */
    size_t n_retired;
    pthread_mutex_t load_mu;    /* guards load[] */
    gw_host_load load[GW_MAX_HOSTS];
    int has_load[GW_MAX_HOSTS];
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .load_mu = PTHREAD_MUTEX_INITIALIZER};

int gw_host_load_get(const gw_host *h, gw_host_load *out)
{
    if (!G.hosts || h < G.hosts || h >= G.hosts + G.n_hosts || !R.etcd)
        return -1;
    size_t i = (size_t)(h - G.hosts);
    pthread_mutex_lock(&R.load_mu);
    int ok = R.has_load[i];
    if (ok)
        *out = R.load[i];
    pthread_mutex_unlock(&R.load_mu);
    return ok ? 0 : -1;
}

struct etcd_client *gw_registry_etcd(void) { return R.etcd; }

/* The string value of "key" in a host's report (which host/core/registry.c
 * writes without escapes); 0 or -1 when absent, escaped or too long. */
static int json_str(const char *json, size_t len, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = memmem(json, len, pat, strlen(pat));
    if (!p)
        return -1;
    p += strlen(pat);
    const char *end = memchr(p, '"', (size_t)(json + len - p));
    if (!end || (size_t)(end - p) >= cap || memchr(p, '\\', (size_t)(end - p)))
        return -1;
    memcpy(out, p, (size_t)(end - p));
    out[end - p] = 0;
    return 0;
}

/* The number after "key": in json, or -1. */
static int64_t json_num(const char *json, size_t len, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = memmem(json, len, pat, strlen(pat));
    if (!p)
        return -1;
    p += strlen(pat);
    int64_t v = 0;
    int any = 0;
    for (; p < json + len && *p >= '0' && *p <= '9'; p++, any = 1)
        v = v * 10 + (*p - '0');
    return any ? v : -1;
}

/* The report's load figures and templates (host/registry.c writes them as
 * [{"name":..,"isolation":..,"pool_ready":N},...], no nesting). */
static void parse_load(const char *json, size_t len, gw_host_load *l)
{
    memset(l, 0, sizeof *l);
    int64_t v;
    l->lease = (v = json_num(json, len, "lease")) > 0 ? v : 0;
    l->capacity = (v = json_num(json, len, "capacity")) > 0 ? (uint32_t)v : 0;
    l->live = (v = json_num(json, len, "live")) > 0 ? (uint32_t)v : 0;
    l->free_memory = (v = json_num(json, len, "free_memory")) > 0 ? v : 0;
    const char *p = memmem(json, len, "\"templates\":[", 13);
    const char *end = json + len;
    if (!p)
        return;
    p += 13;
    while (p < end && *p == '{' && l->n_templates < GW_HOST_TEMPLATES) {
        const char *close = memchr(p, '}', (size_t)(end - p));
        if (!close)
            break;
        size_t ol = (size_t)(close - p + 1);
        typeof(l->templates[0]) *t = &l->templates[l->n_templates];
        if (json_str(p, ol, "name", t->name, sizeof t->name) == 0) {
            if (json_str(p, ol, "isolation", t->isolation, sizeof t->isolation) != 0)
                t->isolation[0] = 0;
            t->pool_ready = (v = json_num(p, ol, "pool_ready")) > 0 ? (uint32_t)v : 0;
            l->n_templates++;
        }
        p = close + 1;
        if (p < end && *p == ',')
            p++;
    }
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 16)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
            return 0;
    return 1;
}

static void retire(void *p)
{
    if (p && R.n_retired < RETIRED_MAX)
        R.retired[R.n_retired++] = p;
    /* past the cap the pointer leaks: bounded by address changes of one run */
}

static gw_host *slot_for(const char *name, int make)
{
    gw_host *free_slot = NULL;
    for (size_t i = 0; i < G.n_hosts; i++) {
        gw_host *h = &G.hosts[i];
        if (atomic_load(&h->present) && strcmp(h->name, name) == 0)
            return h;
        if (!free_slot && !atomic_load(&h->present))
            free_slot = h;
    }
    return make ? free_slot : NULL;
}

/* A host's entry appeared or changed; with R.mu held. */
static void host_put(const char *name, const char *json, size_t len)
{
    char address[128];
    if (!name_ok(name) || json_str(json, len, "address", address, sizeof address) != 0 ||
        !strchr(address, ':')) {
        sg_log_warn("registry: entry for \"%.32s\" is not a host report; ignored", name);
        return;
    }
    gw_host *h = slot_for(name, 1);
    if (!h) {
        sg_log_error("registry: host %s: the table is full (%d hosts); not used", name,
                     GW_MAX_HOSTS);
        return;
    }
    int is_new = !atomic_load(&h->present);
    if (is_new || strcmp(gw_host_address(h), address) != 0) {
        grpc_channel *ch = rpc_channel_create(address, NULL);
        if (!ch) {
            sg_log_error("registry: host %s: cannot make a channel to %s", name, address);
            return;
        }
        if (is_new) {
            h->name = strdup(name);
            h->address = strdup(address);
            h->channel = ch;
            atomic_store(&h->serving, GW_HOST_UNKNOWN);
            atomic_store(&h->present, 1);   /* after every field: readers check it first */
        } else {
            retire(gw_host_channel(h));
            retire((void *)gw_host_address(h));
            __atomic_store_n(&h->channel, ch, __ATOMIC_RELEASE);
            __atomic_store_n(&h->address, strdup(address), __ATOMIC_RELEASE);
            atomic_store(&h->serving, GW_HOST_UNKNOWN);   /* the health check decides anew */
        }
        sg_log_info("registry: host %s at %s %s", name, address,
                    is_new ? "joined" : "moved");
    }
    gw_host_load l;
    parse_load(json, len, &l);
    pthread_mutex_lock(&R.load_mu);
    size_t i = (size_t)(h - G.hosts);
    R.load[i] = l;
    R.has_load[i] = 1;
    atomic_store(&h->placed, 0);   /* the report's live count has them now */
    pthread_mutex_unlock(&R.load_mu);
    if (!atomic_exchange(&h->registered, 1) && !is_new)
        sg_log_info("registry: host %s registered again", name);
    /* A report is one line of JSON that host/core/registry.c writes. */
    int draining = memmem(json, len, "\"draining\":true", 15) != NULL;
    if (atomic_exchange(&h->draining, draining) != draining)
        sg_log_info("registry: host %s %s", name,
                    draining ? "is draining: no new task goes there" : "takes new tasks");
}

static void host_gone(const char *name)
{
    gw_host *h = slot_for(name, 0);
    if (h && atomic_exchange(&h->registered, 0)) {
        sg_log_info("registry: host %s left (its entry expired or was removed)", name);
        gw_forward_host_lost(h);
    }
}

static void on_event(void *arg, int is_delete, const char *key, const uint8_t *val, size_t len,
                     int64_t rev)
{
    size_t pl = strlen(R.prefix);
    if (strncmp(key, R.prefix, pl) != 0)
        return;
    pthread_mutex_lock(&R.mu);
    if (is_delete)
        host_gone(key + pl);
    else
        host_put(key + pl, (const char *)val, len);
    pthread_mutex_unlock(&R.mu);
}

/* Every entry now; the revision to watch from. -1 if etcd did not answer. */
static int64_t load_all(void)
{
    uint8_t end[300];
    Etcdserverpb__RangeRequest r;
    etcdserverpb__range_request__init(&r);
    r.key = (ProtobufCBinaryData){strlen(R.prefix), (uint8_t *)R.prefix};
    r.range_end = (ProtobufCBinaryData){etcd_prefix_end(R.prefix, end, sizeof end), end};
    ProtobufCMessage *m = NULL;
    sg_err e;
    if (etcd_call_sync(R.etcd, ETCD_RANGE, &r.base, &m, &e) != 0)
        return -1;
    Etcdserverpb__RangeResponse *resp = (Etcdserverpb__RangeResponse *)m;
    pthread_mutex_lock(&R.mu);
    for (size_t i = 0; i < resp->n_kvs; i++) {
        const Etcdserverpb__KeyValue *kv = resp->kvs[i];
        char key[300];
        size_t kl = kv->key.len < sizeof key - 1 ? kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.data, kl);
        key[kl] = 0;
        host_put(key + strlen(R.prefix), (const char *)kv->value.data, kv->value.len);
    }
    pthread_mutex_unlock(&R.mu);
    int64_t rev = resp->header ? resp->header->revision : 0;
    protobuf_c_message_free_unpacked(m, NULL);
    return rev;
}

static void *reload_main(void *arg)
{
    pthread_mutex_lock(&R.mu);
    for (size_t i = 0; i < G.n_hosts; i++)
        atomic_store(&G.hosts[i].registered, 0);
    pthread_mutex_unlock(&R.mu);
    if (load_all() < 0)
        sg_log_warn("registry: re-reading the hosts failed; the watch fills them in");
    return NULL;
}

/* The watch lost history (etcd compacted past it): read everything again.
 * Not here: this runs on the etcd client's thread, which a blocking call
 * would need for its own answer. */
static void on_reset(void *arg)
{
    sg_log_warn("registry: the watch fell behind etcd's history; hosts are read again");
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, reload_main, NULL) != 0)
        sg_log_error("registry: cannot start the re-read; restart the gateway");
    pthread_attr_destroy(&a);
}

/* Until etcd answers once: a gateway may start before its etcd. */
static void *start_main(void *arg)
{
    int logged = 0;
    while (!atomic_load(&R.stop)) {
        int64_t rev = load_all();
        if (rev >= 0) {
            R.watch = etcd_watch_start(R.etcd, R.prefix, rev + 1, on_event, on_reset, NULL);
            sg_log_info("registry: watching %s from revision %lld", R.prefix, (long long)rev + 1);
            return NULL;
        }
        if (!logged++)
            sg_log_warn("registry: etcd does not answer yet; no hosts until it does");
        nanosleep(&(struct timespec){0, 500 * 1000 * 1000}, NULL);
    }
    return NULL;
}

int gw_registry_start(sg_err *err)
{
    const config_registry *cfg = &G.cfg.registry;
    snprintf(R.prefix, sizeof R.prefix, "%shosts/", cfg->prefix);
    G.hosts = calloc(GW_MAX_HOSTS, sizeof *G.hosts);
    G.n_hosts = GW_MAX_HOSTS;   /* slots; empty ones are not `present` */
    etcd_tls tls = {cfg->tls_ca, cfg->tls_cert, cfg->tls_key, cfg->tls_server_name};
    R.etcd = etcd_client_create((const char *const *)cfg->endpoints, cfg->n_endpoints,
                                ETCD_CALL_TIMEOUT_S, cfg->tls_ca ? &tls : NULL, err);
    if (!R.etcd)
        return -1;
    /* A first read now, so the gateway starts with the hosts it can know;
     * if etcd is not there yet, a thread keeps trying. */
    int64_t rev = load_all();
    if (rev >= 0) {
        R.watch = etcd_watch_start(R.etcd, R.prefix, rev + 1, on_event, on_reset, NULL);
        return R.watch ? 0 : sg_err_set(err, SG_EINTERNAL, "registry: cannot start the watch");
    }
    if (pthread_create(&R.thread, NULL, start_main, NULL) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "registry: pthread_create");
    R.running = 1;
    return 0;
}

void gw_registry_stop(void)
{
    if (!R.etcd)
        return;
    atomic_store(&R.stop, 1);
    if (R.running)
        pthread_join(R.thread, NULL);
    etcd_watch_stop(R.watch);
    R.watch = NULL;
    etcd_client_destroy(R.etcd);
    R.etcd = NULL;
}
