/* pool.c — the warm pool: per template, sandboxes made ahead of any
 * request (contained, default context forked, no owner, env or secrets),
 * handed to a CreateSandbox by ACTIVATE, and refilled from the tick.
 * sandbox.c owns a sandbox's lifecycle; this file owns only the pool list,
 * the activation and the refill policy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "host/core/admit.h"
#include "host/contain/contain.h"
#include "host/host.h"

/* ---- warm pool ----
 *
 * Per template, `pool` sandboxes (host config, default 4; 0 = off;
 * SANDGATE_POOL_SIZE overrides it for every template) are created ahead of
 * any request: cgroups with default limits, a uid slot, the
 * driver's sandbox (process: the zygote's fork) fully contained (namespaces, pivot_root, uid, caps,
 * seccomp) and its default context forked, but no owner, no env and no
 * secrets (CREATE carries "pool":true and env {}). The supervisor says
 * POOLED and waits. A CreateSandbox takes the oldest ready one (or one
 * still starting, which it then waits for), gives it its id (v1: the
 * cgroups are renamed to it; v2 cannot rename, the pool name stays), its
 * memory/pids/CPU limits (rewritten) and sends ACTIVATE with the env and
 * secrets; the supervisor answers READY and CTX default as a fresh
 * sandbox does. The pool is refilled from the tick, one at a time.
 * Workspace, /tmp and file-size limits are fixed when the sandbox is
 * made: a request asking for other values skips the pool. */

/* Refills in flight per template (SANDGATE_POOL_REFILL, default 1): each is
 * a fork of the zygote and a full containment, so more than the CPUs can
 * run only slows the creates that are waiting. */
static int pool_refill_max(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("SANDGATE_POOL_REFILL");
        v = e && *e ? atoi(e) : 1;
        if (v < 1)
            v = 1;
    }
    return v;
}

/* The template's `pool`, unless SANDGATE_POOL_SIZE (read once) overrides
 * it for every template, clamped to the config's range. */
static int pool_target(const host_template *t)
{
    static int env = -2;   /* -2 unread, -1 unset */
    if (env == -2) {
        const char *e = getenv("SANDGATE_POOL_SIZE");
        env = e && *e ? atoi(e) : -1;
        if (e && *e && env < 0)
            env = 0;
        if (env > CONFIG_POOL_MAX)
            env = CONFIG_POOL_MAX;
    }
    return env >= 0 ? env : t->cfg->pool;
}

void host_pool_wipe_activation(host_sandbox *sb)
{
    if (sb->activate_json) {
        explicit_bzero(sb->activate_json, strlen(sb->activate_json));
        free(sb->activate_json);
        sb->activate_json = NULL;
    }
}

void host_pool_unlink(host_sandbox *sb)
{
    if (!sb->pooled)
        return;
    host_template *t = host_template_find(sb->template_name);
    for (host_sandbox **p = t ? &t->pool : NULL; p && *p; p = &(*p)->pool_next)
        if (*p == sb) {
            *p = sb->pool_next;
            break;
        }
    sb->pool_next = NULL;
    sb->pooled = 0;
}

/* Only what a pool sandbox was made with can come from the pool. */
static int pool_eligible(const host_template *t, const Sandgate__V1__HostCreateRequest *req)
{
    Sandgate__V1__Limits want;
    sandgate__v1__limits__init(&want);
    if (req->limits)
        want = *req->limits;
    Sandgate__V1__Limits pooled;
    sandgate__v1__limits__init(&pooled);
    host_limits_default(&pooled);
    host_limits_default(&want);
    return pool_target(t) > 0 && want.disk_bytes == pooled.disk_bytes &&
           want.tmp_bytes == pooled.tmp_bytes;
}

/* The oldest ready pool sandbox, else none (a fresh create). Never one still
 * starting: activate() renames its cgroups at once, and a sandbox that has not
 * yet said POOLED may still be joining them by the old name (sgc_unshare_pid1
 * then fails with ENOENT and the create with INTERNAL). */
static host_sandbox *take_ready(host_template *t)
{
    /* The serving generation's first; an older one's only while it may
     * still serve (driver gen_usable; process: under rotate_forks). */
    uint32_t gen = t->drv->serving_gen(t);
    host_sandbox *pick = NULL;
    for (host_sandbox *p = t->pool; p && !pick; p = p->pool_next)
        if (p->pool_ready && gen && p->gen == gen)
            pick = p;
    for (host_sandbox *p = t->pool; p && !pick; p = p->pool_next)
        if (p->pool_ready && t->drv->gen_usable(t, p->gen))
            pick = p;
    if (pick)
        host_pool_unlink(pick);
    return pick;
}

host_sandbox *host_pool_take(host_template *t, const Sandgate__V1__HostCreateRequest *req)
{
    return pool_eligible(t, req) ? take_ready(t) : NULL;
}

/* The sandbox's cgroups take its id (v1 rename; v2 keeps the pool name)
 * and the request's limits. Only once it is POOLED: before that its
 * process may not have joined the groups under their pool name yet. */
static int bind_cgroups(host_sandbox *sb, char *eb, size_t ebl)
{
    host_template *t = host_template_find(sb->template_name);
    if (!t || !t->cfg->contain)
        return 0;
    if (strcmp(sb->cgroup, sb->id) != 0 &&
        sgc_cgroup_rename(H.cfg.cgroup_root, sb->cgroup, sb->id, eb, ebl) == 0)
        snprintf(sb->cgroup, sizeof sb->cgroup, "%s", sb->id);
    Sandgate__V1__Limits made;   /* what a pool sandbox is made with */
    sandgate__v1__limits__init(&made);
    host_limits_default(&made);
    if (made.memory_bytes == sb->limits.memory_bytes && made.pids == sb->limits.pids &&
        made.cpu_millis == sb->limits.cpu_millis)
        return 0;
    sgc_cgroup_limits lim = {.memory_bytes = sb->limits.memory_bytes,
                             .pids = sb->limits.pids,
                             .cpu_millis = sb->limits.cpu_millis};
    if (sb->drv && sb->drv->cgroup_limits)
        sb->drv->cgroup_limits(sb, &lim);
    return sgc_cgroup_set_limits(H.cfg.cgroup_root, sb->cgroup, &lim, eb, ebl);
}

/* Cgroups, then ACTIVATE (the env, secrets included). */
int host_pool_log(void)
{
    static int v = -1;
    if (v < 0)
        v = getenv("SANDGATE_POOL_LOG") != NULL;
    return v;
}

int host_pool_send_activation(host_sandbox *sb)
{
    char eb[512] = "";
    int64_t t0 = host_now_us();
    int brc = bind_cgroups(sb, eb, sizeof eb);
    if (host_pool_log())
        sg_log_info("pool: %s cgroups bound in %.2f ms", sb->id,
                (host_now_us() - t0) / 1000.0);
    if (brc != 0) {
        sg_log_warn("sandbox %s: cgroup limits: %s", sb->id, eb);
        host_pool_wipe_activation(sb);
        return -1;
    }
    size_t n = strlen(sb->activate_json);
    char *msg = malloc(n + 10);
    memcpy(msg, "ACTIVATE ", 9);
    memcpy(msg + 9, sb->activate_json, n);
    ssize_t w = sb->sock.fd < 0 ? -1 : send(sb->sock.fd, msg, n + 9, MSG_DONTWAIT | MSG_NOSIGNAL);
    int too_big = w < 0 && errno == EMSGSIZE;
    explicit_bzero(msg, n + 9);
    free(msg);
    host_pool_wipe_activation(sb);
    if (too_big)
        return -2;   /* the same on every retry: the caller says so */
    return w == (ssize_t)(n + 9) ? 0 : -1;
}

/* Give a pool sandbox to a request. Called with H.mu held; sb is out of
 * the pool. On failure the sandbox is killed and err set. */
int host_pool_activate(host_sandbox *sb, host_template *t, const Sandgate__V1__HostCreateRequest *req,
                    rpc_call *call, sg_err *err)
{
    if (host_pool_log())
        sg_log_info("pool: %s -> %s (%s)", sb->id,
                req->sandbox_id[0] ? req->sandbox_id : "new id", sb->pool_ready ? "ready" : "starting");
    host_sandbox_assign(sb, req);
    t->drv->note_use(t, sb->gen);
    sb->next = H.sandboxes;
    H.sandboxes = sb;
    H.n_sandboxes++;
    sb->create_call = rpc_call_ref(call);
    if (host_egress_attach(sb, req, err) != 0) {
        rpc_call_unref(sb->create_call);
        sb->create_call = NULL;
        host_sandbox_kill(sb, NULL);
        return err ? err->code : SG_EINTERNAL;
    }
    char *env = host_sandbox_env(req);
    host_sandbox_keep_env(sb, env);
    size_t n = strlen(env);
    sb->activate_json = malloc(n + 80);
    snprintf(sb->activate_json, n + 80, "{\"workdir\":\"/workspace\",\"egress\":%s,\"env\":%s}",
             sb->egress ? "true" : "false", env);
    explicit_bzero(env, n);
    free(env);
    int arc = sb->pool_ready ? host_pool_send_activation(sb) : 0;
    if (arc != 0) {
        rpc_call_unref(sb->create_call);
        sb->create_call = NULL;
        host_sandbox_kill(sb, NULL);
        if (arc == -2)   /* host/core/rules.c bounds the env below the default socket buffer */
            return sg_err_set(err, SG_EINVAL, "env: too large for this host to pass to the "
                              "sandbox; send a smaller environment");
        return sg_err_set(err, SG_EUNAVAIL, "sandbox %s: could not activate; retry", sb->id);
    }
    /* not ready yet: ACTIVATE goes out when its POOLED arrives */
    return 0;
}

static void pool_start(host_template *t)
{
    /* A refill is a create: held back, quietly, while the reserve is short
     * (logged when that starts and ends, not every tick). */
    static int held;
    sg_err aerr;
    if (host_admit_check(HOST_ADMIT_SANDBOX, &aerr) != 0) {
        if (!held)
            sg_log_warn("pool refill held back: %s", aerr.msg);
        held = 1;
        return;
    }
    if (held)
        sg_log_info("pool refill resumed");
    held = 0;
    uint32_t slot;
    if (host_slot_alloc(&slot) != 0)
        return;
    host_sandbox *sb = host_sandbox_alloc(t->cfg->name, slot);
    if (!sb) {
        H.slots[slot] = 0;
        return;
    }
    sb->pooled = 1;
    host_sandbox **p = &t->pool;
    while (*p)
        p = &(*p)->pool_next;
    *p = sb;
    sg_err err;
    if (host_sandbox_launch(sb, t, "{}", 1, &err) != 0) {
        sg_log_warn("template %s: pool: %s", t->cfg->name, err.msg);
        host_pool_unlink(sb);
        host_sandbox_kill(sb, NULL);
    }
}

/* Shutdown: pool sandboxes are in no sandbox table; kill them like any
 * sandbox (they move to H.dying, reaped by the tick). H.mu held. */
void host_pool_drain(void)
{
    for (size_t i = 0; i < H.n_templates; i++) {
        host_template *t = &H.templates[i];
        while (t->pool) {
            host_sandbox *sb = t->pool;
            host_pool_unlink(sb);
            host_sandbox_kill(sb, NULL);
        }
    }
}

/* After a driver's generation changes (process: a zygote rotation) the pool
 * holds an older generation's sandboxes: the serving generation's are made
 * as for an empty pool, and each one that is ready retires one of the older
 * ones (oldest first), so creates find a warm sandbox throughout; an older
 * one that may no longer serve (driver gen_usable) goes at once. */
void host_pool_tick(int64_t now_us)
{
    for (size_t i = 0; i < H.n_templates; i++) {
        host_template *t = &H.templates[i];
        uint32_t gen = t->drv->serving_gen(t);   /* 0: cannot make one now */
        int have = 0, starting = 0, ready = 0, older = 0;
        for (host_sandbox *sb = t->pool, *next; sb; sb = next) {
            next = sb->pool_next;
            if ((H.stopping || H.draining) || (!sb->pool_ready && now_us > sb->create_deadline_us)) {
                host_sandbox_fail_create(sb, SG_EUNAVAIL, "pool sandbox did not start");
                continue;
            }
            if (gen && sb->gen != gen) {
                if (!t->drv->gen_usable(t, sb->gen)) {
                    host_pool_unlink(sb);
                    host_sandbox_kill(sb, NULL);
                    continue;
                }
                starting += !sb->pool_ready;
                older++;
                continue;
            }
            starting += !sb->pool_ready;
            have++;
            ready += sb->pool_ready;
        }
        if ((H.stopping || H.draining) || !gen)
            continue;
        while (have < pool_target(t) && starting < pool_refill_max()) {
            pool_start(t);
            have++;
            starting++;
        }
        for (host_sandbox *sb = t->pool, *next; sb && older > 0 && ready + older > pool_target(t);
             sb = next) {
            next = sb->pool_next;
            if (sb->gen == gen)
                continue;
            host_pool_unlink(sb);
            host_sandbox_kill(sb, NULL);
            older--;
        }
    }
}
