/* process.c — the `process` driver (host/driver.h): a sandbox is a fork of
 * its template's zygote (zygote.c), contained on the host kernel by
 * libsandgate_contain (namespaces, pivot_root, uid, caps, rlimits, seccomp;
 * host/contain/) with sandgate-init (host/init/) as its pid 1 and
 * supervisor. This file is the ops table and the contain spec a sandbox is
 * made (or a context joined) with; zygote.c owns the zygote generations.
 * The core's cgroups, supervisor channel and contexts are used as they are. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "host/contain/contain.h"
#include "host/drivers/process/process.h"
#include "host/host.h"

/* A sandbox's RLIMIT_NOFILE: 1,024, or the host's hard limit if that is
 * lower (the contained child cannot raise it, and would fail to start). */
static unsigned long sandbox_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max < 1024)
        return (unsigned long)rl.rlim_max;
    return 1024;
}

/* The contain spec for this sandbox (host/contain/contain.h). */
static char *build_spec(host_sandbox *sb, const host_template *t, const char *procs)
{
    size_t cap = 8192;
    char *spec = malloc(cap);
    const config_template *c = t->cfg;
    uint32_t uid = H.cfg.uid_base + sb->slot;
    int n = snprintf(spec, cap,
                     "id=%s\nuid=%u\ngid=%u\nhostname=sandbox\nnewroot=%s/newroot\n"
                     "workspace=/workspace\nworkspace_bytes=%llu\nworkspace_inodes=%llu\n"
                     "tmp_bytes=%llu\ntmp_inodes=16384\nnofile=%lu\nfsize=%llu\n"
                     "seccomp=1\nnet=none\nfd_keep=3\n",
                     sb->id, uid, uid, H.cfg.runtime_dir,
                     (unsigned long long)sb->limits.disk_bytes,
                     (unsigned long long)(sb->limits.disk_bytes / 4096 + 64),
                     (unsigned long long)sb->limits.tmp_bytes, sandbox_nofile(),
                     (unsigned long long)sb->limits.disk_bytes);
    for (size_t i = 0; i < c->n_ro_binds; i++)
        n += snprintf(spec + n, cap - (size_t)n, "ro_bind=%s\n", c->ro_binds[i]);
    for (size_t i = 0; i < c->n_symlinks; i++)
        n += snprintf(spec + n, cap - (size_t)n, "symlink=%s\n", c->symlinks[i]);
    for (const char *p = procs; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len)
            n += snprintf(spec + n, cap - (size_t)n, "cgroup_procs=%.*s\n", (int)len, p);
        p += len + (e ? 1 : 0);
    }
    return spec;
}

char *proc_join_spec(host_sandbox *sb, const host_template *t, sg_err *err)
{
    char procs[2048], eb[256];
    if (sgc_cgroup_procs(H.cfg.cgroup_root, sb->cgroup, procs, sizeof procs, eb, sizeof eb) != 0) {
        sg_err_set(err, SG_EINTERNAL, "cgroups of %s: %s", sb->id, eb);
        return NULL;
    }
    return build_spec(sb, t, procs);
}

/* sandgate-init is every sandbox's pid 1: without it nothing starts. The
 * contain library is only warned about (an uncontained test host runs
 * without it; a contained create then fails with the zygote's ERR). */
static int proc_check(sg_err *err)
{
    if (access(H.contain_lib, R_OK) != 0)
        sg_log_warn("%s: %s", H.contain_lib, strerror(errno));
    if (access(H.init_path, X_OK) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "%s (built with sandgate-host)", H.init_path);
    return 0;
}

static void proc_tick(host_template *t, int64_t now_us)
{
    proc_zygote_tick(t, now_us);
}

static uint32_t proc_serving_gen(host_template *t)
{
    proc_zygote *z = proc_zygote_serving(t);
    return z ? z->gen : 0;
}

/* The zygote forks the sandbox: sup_fd becomes its fd 3 (sandgate-init's
 * supervisor channel) and the spec names the groups it joins. */
static int proc_launch(host_template *t, host_sandbox *sb, const char *env_json, int pooled,
                       int sup_fd, const char *cgroup_procs, sg_err *err)
{
    char *spec = build_spec(sb, t, cgroup_procs);
    int rc = proc_zygote_create(t, sb, spec, env_json, pooled, sup_fd, err);
    free(spec);
    return rc;
}

/* Where the template is contained, the zygote forks the context into the
 * running sandbox (JOIN, then ADOPT to pid 1), so it shares the preloaded
 * heap like the default context; otherwise (tests of the runtime alone)
 * sandgate-init starts a fresh one (CTX). */
static int proc_open_context(host_ctx *c, sg_err *err)
{
    host_template *t = host_template_find(c->sb->template_name);
    if (t && t->cfg->contain) {
        if (c->sb->pidfd < 0)
            return sg_err_set(err, SG_EPRECOND, "no handle on the sandbox's pid 1 "
                              "(pidfd_open failed)");
        return proc_zygote_join(t, c, err);
    }
    if (host_supervisor_send(c->sb, "CTX %s %s", c->id, c->language) != 0)
        return sg_err_set(err, SG_EPRECOND, "cannot reach the sandbox's supervisor");
    return 0;
}

const host_driver host_driver_process = {
    .name = "process",
    .check = proc_check,
    .sweep_on_start = NULL,   /* the core's cgroup sweep is all it leaves */
    .template_start = proc_zygote_start,
    .template_tick = proc_tick,
    .template_stop = proc_zygote_stop,
    .reaped = proc_zygote_reaped,
    .serving_gen = proc_serving_gen,
    .gen_usable = proc_zygote_gen_usable,
    .note_use = proc_zygote_note_use,
    .launch = proc_launch,
    .open_context = proc_open_context,
    .kill = NULL,                  /* SIGKILL of pid 1 and the cgroups is all */
    .cleanup_after_empty = NULL,   /* nothing outside the cgroups */
};
