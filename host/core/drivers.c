/* drivers.c — the registration point of the isolation drivers (driver.h)
 * and the core's dispatch to them: which driver each template gets, and
 * the start-up, tick, reaping and shutdown calls made on every driver in
 * use. Adding a driver is its file plus one line in host_drivers[]. */
#include <stdio.h>
#include <string.h>

#include "common/isolation.h"
#include "common/log.h"
#include "host/driver.h"
#include "host/host.h"

extern const host_driver host_driver_process;   /* host/drivers/process/ */
extern const host_driver host_driver_gvisor;    /* host/drivers/gvisor/ */

const host_driver *const host_drivers[] = {
    &host_driver_process,
    &host_driver_gvisor,
    NULL,
};

const host_driver *host_driver_find(const char *name)
{
    for (size_t i = 0; host_drivers[i]; i++)
        if (strcmp(host_drivers[i]->name, name) == 0)
            return host_drivers[i];
    return NULL;
}

/* The template's `isolation` (config.c defaults it to process). */
static const char *isolation_of(const config_template *c)
{
    return c->isolation == SG_ISOLATION_UNSET ? "process" : sg_isolation_name(c->isolation);
}

static void compiled(char *out, size_t n)
{
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; host_drivers[i] && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", host_drivers[i]->name);
}

/* Each driver once, in host_drivers[] order, if a template uses it. */
static int in_use(const host_driver *d)
{
    for (size_t i = 0; i < H.n_templates; i++)
        if (H.templates[i].drv == d)
            return 1;
    return 0;
}

const host_driver *host_driver_for(const config_template *c, sg_err *err)
{
    const char *iso = isolation_of(c);
    const host_driver *d = host_driver_find(iso);
    if (!d) {
        char have[256];
        compiled(have, sizeof have);
        sg_err_set(err, SG_EINVAL, "template %s: isolation \"%s\" has no driver in this "
                   "sandgate-host (it has: %s); refusing to start", c->name, iso, have);
    }
    return d;
}

int host_drivers_bind(host_template *templates, size_t n, sg_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (!(templates[i].drv = host_driver_for(templates[i].cfg, err)))
            return SG_EINVAL;
    for (size_t k = 0; host_drivers[k]; k++) {
        const host_driver *d = host_drivers[k];
        const host_template *first = NULL;
        for (size_t i = 0; i < n && !first; i++)
            if (templates[i].drv == d)
                first = &templates[i];
        if (first && d->check && d->check(err) != 0) {
            char why[SG_ERR_MSG_MAX];
            snprintf(why, sizeof why, "%s", err ? err->msg : "");
            return sg_err_set(err, SG_EINVAL, "template %s: isolation \"%s\" cannot run on "
                              "this host: %.300s; refusing to start", first->cfg->name, d->name,
                              why);
        }
    }
    return 0;
}

host_template *host_template_find(const char *name)
{
    for (size_t i = 0; i < H.n_templates; i++)
        if (strcmp(H.templates[i].cfg->name, name) == 0)
            return &H.templates[i];
    return NULL;
}

void host_drivers_sweep(void)
{
    for (size_t k = 0; host_drivers[k]; k++)
        if (host_drivers[k]->sweep_on_start && in_use(host_drivers[k]))
            host_drivers[k]->sweep_on_start();
}

/* Ordering rule: a driver op on a template (tick, reaped, launch through
 * the pool's refill) runs only after that driver's template_start, which
 * makes t->priv. The loop thread must exist first (template_start adds its
 * fds to the loop's epoll set), so main starts it, then calls this with
 * H.mu held, and only this sets H.drivers_started; the loop checks it under
 * H.mu and skips its tick until then. (Ticking earlier dereferenced a NULL
 * t->priv in the process driver's retiring_tick: SIGSEGV at start-up when
 * main was descheduled for a tick, 20 ms, between the two.) */
int host_drivers_start(sg_err *err)
{
    for (size_t i = 0; i < H.n_templates; i++) {
        host_template *t = &H.templates[i];
        if (t->drv->template_start(t, err) != 0)
            return err && err->code ? err->code : SG_EINTERNAL;
    }
    H.drivers_started = 1;
    return 0;
}

void host_drivers_tick(int64_t now_us)
{
    if (!H.drivers_started)
        return;
    for (size_t i = 0; i < H.n_templates; i++)
        H.templates[i].drv->template_tick(&H.templates[i], now_us);
}

void host_drivers_reaped(pid_t pid)
{
    if (!H.drivers_started)   /* nothing reaped yet can be a driver's */
        return;
    for (size_t k = 0; host_drivers[k]; k++)
        if (host_drivers[k]->reaped && in_use(host_drivers[k]))
            host_drivers[k]->reaped(pid);
}

void host_drivers_stop(void)
{
    for (size_t i = 0; i < H.n_templates; i++)
        H.templates[i].drv->template_stop(&H.templates[i]);
}
