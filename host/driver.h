/* driver.h — what sandgate-host's core asks of an isolation driver: the one
 * seam between the core (sandbox table, API service, supervisor channel,
 * contexts/runs/execs, output caps and redaction, results, TTL/idle, warm
 * pool list, egress proxy, files, journal, admission, cgroups) and the code
 * that actually makes a sandbox (host/drivers/<name>/). As redis's ae.c keeps
 * ae_epoll.c/ae_kqueue.c behind aeApi*, each driver is one ops table.
 *
 * A template picks its driver by its config `isolation` ("process" when
 * unset); host_drivers_bind() resolves every template at start-up and the
 * host refuses to start when one names a driver this build lacks or whose
 * check() fails: never a silent fall-back to a weaker driver.
 *
 * Adding a driver: one file defining `const host_driver host_driver_<name>`
 * and one line in host_drivers[] (host/core/drivers.c). The core never names a
 * driver's functions; a driver may call any core function in host/host.h.
 *
 * What every driver shares with the core:
 * - Cgroups are the core's: it makes the sandbox's groups (sb->cgroup, with
 *   its memory/pids/CPU limits) before launch(), renames them when a pool
 *   sandbox is handed out, SIGKILLs them on kill, waits for them to be empty
 *   and removes them; OOM kills are read from them. A driver puts every
 *   process of the sandbox in them (cgroup_procs of launch()).
 * - The supervisor channel is the core's: launch() gets one end of a
 *   SOCK_SEQPACKET socketpair, the core watches the other. Whatever the
 *   driver runs on it speaks host/runtime/PROTOCOL.md section 3 (PID, READY,
 *   POOLED, ERR, ACTIVATE, CTX + fds, INT, KILLCTX, EXEC + fds, CTXEXIT,
 *   EXIT, EGRESS + fd). EOF on it means the sandbox is gone.
 * - Contexts speak section 4 on the fds the supervisor (or the driver, by
 *   host_ctx_attach / host_ctx_joined) hands to the core.
 * - The supervisor's `PID <pid>` names sb->pid (host pid namespace); the core
 *   opens sb->pidfd on it, SIGKILLs it on kill, and serves WriteFile/ReadFile
 *   through /proc/<pid>/root/workspace (host/core/files.c): that process's
 *   root must be the sandbox's view of its files, its workspace at
 *   /workspace (gvisor: the shim, chrooted into the view it gives runsc).
 *
 * Threads and locks: unless said otherwise an op runs with H.mu held, on the
 * loop thread (ticks, watches, reaping) or a gRPC handler thread (creates,
 * contexts, kills), and must not block: no waitpid on a live child, no disk
 * or network I/O without O_NONBLOCK, no exec of a helper to wait for. Work
 * that blocks goes to a thread of the driver's own, which takes H.mu to
 * report back. Every call to another process has a deadline.
 * Ownership: pointer arguments are borrowed for the call unless said. */
#ifndef SG_HOST_DRIVER_H
#define SG_HOST_DRIVER_H

#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"

typedef struct host_sandbox host_sandbox;
typedef struct host_ctx host_ctx;
typedef struct host_template host_template;
struct sgc_cgroup_limits;

typedef struct host_driver {
    /* The config's `isolation` value, and what GetSandbox/ListSandboxes and
     * the metrics report as a sandbox's isolation. */
    const char *name;

    /* --- start-up and shutdown --- */

    /* Start-up, once if any template uses the driver, before the sweep; no
     * H.mu, no thread but main yet; may block briefly (bounded). Nonzero,
     * with err saying what is missing: the host refuses to start. NULL: ok. */
    int (*check)(sg_err *err);
    /* Start-up, after the core has killed and removed the cgroups a previous
     * host of this name left ("<name>-*"): remove the driver's own leftovers
     * of that host (e.g. runsc state). Same context as check(). May be NULL. */
    void (*sweep_on_start)(void);
    /* Start the template's shared machinery (process: its zygote). H.mu
     * held, the loop running. The driver may keep state in t->priv (owned by
     * the driver). Nonzero: the host refuses to start. */
    int (*template_start)(host_template *t, sg_err *err);
    /* Every loop tick (~20 ms), loop thread, H.mu held: restarts, rotation. */
    void (*template_tick)(host_template *t, int64_t now_us);
    /* Shutdown, after every sandbox was killed and the loop stopped; no
     * H.mu: SIGKILL whatever template_start started. */
    void (*template_stop)(host_template *t);
    /* The loop's waitpid reaped pid (the host is a child subreaper, so it
     * may be any descendant that was orphaned). Loop thread, H.mu held;
     * called on every driver in use, which ignores pids not its own. */
    void (*reaped)(pid_t pid);

    /* --- generations (the warm pool asks; a driver without them: one
     * generation, 1, always usable) --- */

    /* The generation a sandbox launched now belongs to; 0 while the template
     * cannot make one (no pool refill, pool sandboxes of older generations
     * are kept). */
    uint32_t (*serving_gen)(host_template *t);
    /* 1 while a pool sandbox of generation gen may still be handed out. */
    int (*gen_usable)(host_template *t, uint32_t gen);
    /* A sandbox of generation gen was given to a request (pool hand-out or
     * direct create): rotation bounds count these. */
    void (*note_use)(host_template *t, uint32_t gen);

    /* --- one sandbox --- */

    /* Start sb's supervisor on sup_fd (borrowed: the core closes its copy
     * after the call, so dup it or hand it to a child first). The core has
     * made sb's cgroups already: cgroup_procs is their cgroup.procs paths,
     * "\n"-separated ("" when the template is not contained); the driver puts
     * the sandbox's processes there before they run its code. env_json is the
     * sandbox's environment as a JSON object, secrets included: wipe every
     * copy. pooled=1: a pool sandbox, env_json is "{}", its supervisor says
     * POOLED and waits for ACTIVATE; else it says READY then CTX default.
     * sb->egress is set when the sandbox was granted egress. Sets sb->gen.
     * Fails with err (SG_EUNAVAIL when a retry can succeed); the core then
     * kills sb. Must answer at once: the supervisor's messages arrive later. */
    int (*launch)(host_template *t, host_sandbox *sb, const char *env_json, int pooled,
                  int sup_fd, const char *cgroup_procs, sg_err *err);
    /* Open (or restart) context c of a running sandbox; its fds reach the
     * core later (a CTX + fds from the supervisor, or host_ctx_attach /
     * host_ctx_joined from the driver); a late failure is host_ctx_failed.
     * c->sb->ctx_env is the activation ('A' frame) a new context gets.
     * Nonzero: the context fails; an SG_EINTERNAL message is only logged (the
     * caller gets a fixed text), any other goes to the caller as it is. */
    int (*open_context)(host_ctx *c, sg_err *err);
    /* sb is being killed: the core has closed its channel, SIGKILLed sb->pid
     * and asked the reaper to SIGKILL its cgroups. Anything else to stop
     * (processes outside the cgroups). Must not block. May be NULL. */
    void (*kill)(host_sandbox *sb);
    /* sb is dead and its cgroups are empty (or, uncontained, its pid is gone);
     * before the core removes the cgroups and frees sb: remove what the
     * driver keeps for it (e.g. runsc state; free sb->priv). 1 when done, 0 to
     * be asked again next tick (start blocking work elsewhere and return 0).
     * Called until it returns 1, never again after. May be NULL. */
    int (*cleanup_after_empty)(host_sandbox *sb);
    /* The cgroup limits the core is about to write for sb (at launch, and
     * when a pool sandbox is handed out with other limits): a driver whose
     * own machinery lives in the groups adds its headroom (gvisor: the
     * Sentry's memory and threads). May be NULL: written as they are. */
    void (*cgroup_limits)(const host_sandbox *sb, struct sgc_cgroup_limits *lim);
} host_driver;

/* host/core/drivers.c: the registration point. NULL-terminated. */
extern const host_driver *const host_drivers[];
/* The driver named name, or NULL when this build has none. */
const host_driver *host_driver_find(const char *name);
/* The driver of a template's config `isolation`; NULL with err naming the
 * template and isolation when this build has none. */
struct config_template;
const host_driver *host_driver_for(const struct config_template *c, sg_err *err);
/* Set t->drv for each of the n templates from its config `isolation`, then
 * check() each driver in use. Nonzero with err naming the template and
 * isolation when one has no driver or its driver cannot run here. */
int host_drivers_bind(host_template *templates, size_t n, sg_err *err);

#endif
