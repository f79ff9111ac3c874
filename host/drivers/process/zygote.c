/* zygote.c — the warm Pythons of each template (host/runtime/zygote.py) and
 * their generations. A zygote is started with posix_spawn (safe in a
 * threaded process), restarted with backoff when it dies, and asked to fork
 * a sandbox per create (CREATE) and a context per later context (JOIN). It
 * is started with a fixed, clean environment: it holds no secrets, and
 * nothing of the daemon's environment can reach a sandbox through it.
 *
 * Rotation (docs/security.md "Zygote generations"). Every fork of one
 * zygote has its address-space layout (libc, heap, stack, mmap bases) and
 * its str hash secret, so one tenant's sandbox could learn another's. Each
 * exec is therefore a *generation* that serves a bounded number of
 * requests: `rotate_forks` of its sandboxes, or `rotate_after` seconds
 * after its first one. Then a successor is exec'd (a new
 * ASLR layout; -I ignores PYTHONHASHSEED and the environment sets none, so
 * a new hash secret). The old one keeps serving until the successor says
 * HELLO, so creates never wait for a preload (it is started early enough
 * to be ready at the bound, at the create rate seen); then the successor serves
 * every CREATE and JOIN, and the old one retires: its socket is closed once
 * its JOINs are answered (it forks what is queued, sees EOF and exits; its
 * sandboxes, reparented to the host, live on). pool.c hands out a replaced
 * generation's warm sandboxes only within its bounds and until the
 * successor's are ready. An idle generation (nothing handed out)
 * is never rotated: no tenant has seen its layout. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "host/drivers/process/process.h"
#include "host/host.h"

#define ZYGOTE_BACKOFF_US 500000
#define ZYGOTE_RETIRE_MAX_US (30 * 1000000LL)   /* a replaced zygote's JOINs get this long */
#define ZYGOTE_EXIT_MAX_US (10 * 1000000LL)     /* then, its socket closed, this long to exit */

static void on_join_reply(proc_zygote *z, const char *msg);
static void fail_joins(proc_zygote *z);

/* The list of replaced (or dead) zygotes still finishing; tick frees them. */
static void retire(proc_zygote *z)
{
    host_template *t = z->t;
    z->retire_us = host_now_us();
    z->next = PT(t)->retiring;
    PT(t)->retiring = z;
}

/* The successor said HELLO: it serves from now on. */
static void promote(host_template *t)
{
    proc_zygote *old = PT(t)->zygote, *z = PT(t)->next;
    PT(t)->zygote = z;
    PT(t)->next = NULL;
    t->restarts = 0;
    if (old) {
        sg_log_info("template %s: zygote generation %u (pid %d) serves; "
            "generation %u (pid %d) retires after %u sandboxes",
                t->cfg->name, z->gen, (int)z->pid, old->gen, (int)old->pid, old->uses);
        retire(old);
    }
}

static void on_zygote_msg(host_watch *w, uint32_t events)
{
    (void)events;
    proc_zygote *z = w->owner;
    host_template *t = z->t;
    char buf[1024];
    ssize_t n = recv(w->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n > 0) {
        buf[n] = 0;
        if (strncmp(buf, "HELLO ", 6) == 0) {
            z->ready = 1;
            PT(t)->warm_us = host_now_us() - z->born_us;
            sg_log_info("template %s: zygote %s ready (generation %u, "
            "%.0f ms)", t->cfg->name, buf + 6, z->gen,
                    (host_now_us() - z->born_us) / 1000.0);
            if (z == PT(t)->next)
                promote(t);
        } else if (strncmp(buf, "JOINED ", 7) == 0 || strncmp(buf, "JOINERR ", 8) == 0) {
            on_join_reply(z, buf);
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    host_watch_close(&z->sock);
    fail_joins(z);
    if (z->pid > 0)
        kill(z->pid, SIGKILL);
    if (z == PT(t)->zygote || z == PT(t)->next) {
        int serving = z == PT(t)->zygote;
        sg_log_warn("template %s: zygote %d (generation %u) exited%s",
                t->cfg->name, (int)z->pid, z->gen,
                serving ? (PT(t)->next ? "; its successor takes over" : "; restarting")
                        : " before it was ready; the current one serves on");
        if (serving)
            PT(t)->zygote = NULL;
        else
            PT(t)->next = NULL;
        retire(z);
        PT(t)->restart_at_us = host_now_us() + (t->restarts ? ZYGOTE_BACKOFF_US : 0);
        if (!serving)   /* a failed successor: not again at once */
            PT(t)->restart_at_us = host_now_us() + ZYGOTE_BACKOFF_US * (1 + t->restarts);
        t->restarts++;
    }
    /* a retiring one that exited: tick frees it once reaped */
}

/* successor: it preloads niced (zygote.py --preload-nice) while the one it
 * replaces serves; a first start or a restart is waited for, so it is not. */
static proc_zygote *spawn_zygote(host_template *t, int successor, sg_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        sg_err_errno(err, SG_EINTERNAL, "socketpair(zygote %s)", t->cfg->name);
        return NULL;
    }
    char preload[512] = "";
    for (size_t i = 0; i < t->cfg->n_preload; i++) {
        if (i)
            strncat(preload, ",", sizeof preload - strlen(preload) - 1);
        strncat(preload, t->cfg->preload[i], sizeof preload - strlen(preload) - 1);
    }
    char *argv[16];
    int a = 0;
    argv[a++] = t->cfg->python;
    argv[a++] = "-I";
    argv[a++] = H.runtime_py;
    argv[a++] = "--control-fd";
    argv[a++] = "3";
    argv[a++] = "--contain-lib";
    argv[a++] = H.contain_lib;
    argv[a++] = "--init";
    argv[a++] = H.init_path;
    argv[a++] = "--preload";
    argv[a++] = preload;
    if (!t->cfg->contain)
        argv[a++] = "--no-contain";
    if (successor) {
        argv[a++] = "--preload-nice";
        argv[a++] = "10";
    }
    argv[a] = NULL;
    /* No PYTHONHASHSEED (and -I would ignore one): each exec draws its own
     * str hash secret from the kernel, which rotation relies on. */
    char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "MPLBACKEND=Agg", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawn(&pid, t->cfg->python, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        errno = rc;
        sg_err_errno(err, SG_EUNAVAIL, "posix_spawn(%s %s)", t->cfg->python, H.runtime_py);
        return NULL;
    }
    proc_zygote *z = calloc(1, sizeof *z);
    z->t = t;
    z->gen = ++PT(t)->gens;
    z->pid = pid;
    z->born_us = host_now_us();
    z->sock.fd = -1;
    host_watch_add(&z->sock, sv[0], on_zygote_msg, z);
    return z;
}

int proc_zygote_start(host_template *t, sg_err *err)
{
    if (!t->priv && !(t->priv = calloc(1, sizeof(proc_template))))
        return sg_err_set(err, SG_EINTERNAL, "template %s: out of memory", t->cfg->name);
    if (!(PT(t)->zygote = spawn_zygote(t, 0, err)))
        return err ? err->code : SG_EINTERNAL;
    return 0;
}

static int64_t age_limit_us(const host_template *t)
{
    return (int64_t)t->cfg->rotate_after * 1000000;
}

/* Why generation z should be replaced now, or NULL. The successor starts
 * early so that it is ready when z reaches its bound: for rotate_forks, as
 * many sandboxes early as z hands out in 1.5 preloads at its rate so far
 * (the rate over at least one preload, so a burst at its start does not
 * count as a rate), and at least a quarter of rotate_forks; for
 * rotate_after, a quarter of it (at most 10 s) early. */
static const char *rotation_due(const host_template *t, const proc_zygote *z, int64_t now_us)
{
    uint32_t n = t->cfg->rotate_forks;
    if (n) {
        uint32_t ahead = n / 4;
        if (z->first_use_us && PT(t)->warm_us > 0) {
            double span = (double)(now_us - z->first_use_us), warm = (double)PT(t)->warm_us;
            double want = z->uses / (span > warm ? span : warm) * warm * 1.5;
            if (want > ahead)
                ahead = want < n - 1 ? (uint32_t)want : n - 1;
        }
        if (z->uses + ahead >= n)
            return "sandboxes";
    }
    int64_t age = age_limit_us(t), ahead = age / 4 < 10000000 ? age / 4 : 10000000;
    if (age && z->first_use_us && now_us - z->first_use_us >= age - ahead)
        return "age";
    return NULL;
}

static int pool_has_gen(const host_template *t, uint32_t gen)
{
    for (const host_sandbox *sb = t->pool; sb; sb = sb->pool_next)
        if (sb->gen == gen)
            return 1;
    return 0;
}

/* Retiring zygotes: close the socket once the JOINs are answered (or
 * after ZYGOTE_RETIRE_MAX_US), kill what has not exited ZYGOTE_EXIT_MAX_US
 * later, free the record once reaped and no pool sandbox is of its
 * generation (pool.c asks how many requests it served). */
static void retiring_tick(host_template *t, int64_t now_us)
{
    for (proc_zygote **p = &PT(t)->retiring; *p;) {
        proc_zygote *z = *p;
        if (z->sock.fd >= 0 && (z->joins == 0 || now_us - z->retire_us > ZYGOTE_RETIRE_MAX_US)) {
            fail_joins(z);
            host_watch_close(&z->sock);   /* it forks what is queued, then sees EOF */
            z->retire_us = now_us;
            sg_log_info("template %s: zygote %d (generation %u) retired",
                    t->cfg->name, (int)z->pid, z->gen);
        } else if (z->sock.fd < 0 && z->pid > 0 && now_us - z->retire_us > ZYGOTE_EXIT_MAX_US) {
            kill(z->pid, SIGKILL);
            z->retire_us = now_us;
        }
        if (z->sock.fd < 0 && z->pid == 0 && !pool_has_gen(t, z->gen)) {
            *p = z->next;
            free(z);
            continue;
        }
        p = &z->next;
    }
}

void proc_zygote_tick(host_template *t, int64_t now_us)
{
    retiring_tick(t, now_us);
    if (H.stopping || now_us < PT(t)->restart_at_us || PT(t)->next)
        return;
    proc_zygote *z = PT(t)->zygote;
    const char *why = NULL;
    if (z && (!z->ready || H.draining || !(why = rotation_due(t, z, now_us))))
        return;
    sg_err err;
    proc_zygote *nz = spawn_zygote(t, z != NULL, &err);
    if (!nz) {
        sg_log_warn("%s", err.msg);
        PT(t)->restart_at_us = now_us + ZYGOTE_BACKOFF_US;
        return;
    }
    if (!z) {
        PT(t)->zygote = nz;
        return;
    }
    PT(t)->next = nz;
    sg_log_info("template %s: starting zygote generation %u (pid %d) "
        "to replace generation %u (%s: %u sandboxes, %.0f s since its first)",
            t->cfg->name, nz->gen, (int)nz->pid, z->gen, why, z->uses,
            z->first_use_us ? (now_us - z->first_use_us) / 1e6 : 0.0);
}

/* Any pid the loop reaped: a zygote of a process-driver template's? */
void proc_zygote_reaped(pid_t pid)
{
    for (size_t i = 0; i < H.n_templates; i++) {
        host_template *t = &H.templates[i];
        if (t->drv != &host_driver_process || !PT(t))
            continue;
        proc_zygote *all[2] = {PT(t)->zygote, PT(t)->next};
        for (int k = 0; k < 2; k++)
            if (all[k] && all[k]->pid == pid)
                all[k]->pid = 0;
        for (proc_zygote *z = PT(t)->retiring; z; z = z->next)
            if (z->pid == pid)
                z->pid = 0;
    }
}

/* Shutdown: SIGKILL every zygote of t. */
void proc_zygote_stop(host_template *t)
{
    if (!PT(t))
        return;
    proc_zygote *all[2] = {PT(t)->zygote, PT(t)->next};
    for (int k = 0; k < 2; k++)
        if (all[k] && all[k]->pid > 0)
            kill(all[k]->pid, SIGKILL);
    for (proc_zygote *z = PT(t)->retiring; z; z = z->next)
        if (z->pid > 0)
            kill(z->pid, SIGKILL);
}

proc_zygote *proc_zygote_serving(host_template *t)
{
    if (!PT(t))
        return NULL;
    return PT(t)->zygote && PT(t)->zygote->ready && PT(t)->zygote->sock.fd >= 0 ? PT(t)->zygote : NULL;
}

proc_zygote *proc_zygote_by_gen(host_template *t, uint32_t gen)
{
    if (!PT(t))
        return NULL;
    if (PT(t)->zygote && PT(t)->zygote->gen == gen)
        return PT(t)->zygote;
    if (PT(t)->next && PT(t)->next->gen == gen)
        return PT(t)->next;
    for (proc_zygote *z = PT(t)->retiring; z; z = z->next)
        if (z->gen == gen)
            return z;
    return NULL;
}

void proc_zygote_note_use(host_template *t, uint32_t gen)
{
    proc_zygote *z = proc_zygote_by_gen(t, gen);
    if (!z)
        return;
    z->uses++;
    if (!z->first_use_us)
        z->first_use_us = host_now_us();
}

int proc_zygote_gen_usable(host_template *t, uint32_t gen)
{
    proc_zygote *z = proc_zygote_by_gen(t, gen);
    if (!z)
        return 0;
    if (z == PT(t)->zygote)
        return 1;   /* the serving generation: within its bounds, or no successor yet */
    if (t->cfg->rotate_forks && z->uses >= t->cfg->rotate_forks)
        return 0;
    return !age_limit_us(t) || !z->first_use_us ||
           host_now_us() - z->first_use_us < age_limit_us(t);
}

/* The spec as a JSON string's contents: it is ours, so only \n, " and \\
 * need escaping. out has room for 2 * strlen(spec) + 1. */
static size_t escape_spec(char *out, const char *spec)
{
    size_t n = 0;
    for (const char *p = spec; *p; p++) {
        if (*p == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else {
            if (*p == '"' || *p == '\\')
                out[n++] = '\\';
            out[n++] = *p;
        }
    }
    out[n] = 0;
    return n;
}

/* One message with fds to the zygote. */
static int send_zygote(proc_zygote *z, const char *msg, size_t len, const int *fds, int nfds,
                       sg_err *err)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nfds);
    if (sendmsg(z->sock.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
        int e = errno;
        /* errno text is for the log; the caller (relayed to the agent) gets
         * what it can act on */
        sg_log_warn("sendmsg(zygote %s): %s", z->t->cfg->name,
                strerror(e));
        /* Too big for the socket: the same message fails on every retry
         * (host/core/rules.c bounds the env below the default buffer; a host with
         * a smaller net.core.wmem_default can still get here). */
        if (e == EMSGSIZE)
            return sg_err_set(err, SG_EINVAL, "env: too large for this host to pass to the "
                              "sandbox (a %zu-byte message); send a smaller environment", len);
        return sg_err_set(err, SG_EUNAVAIL, "template %s is restarting; retry", z->t->cfg->name);
    }
    return 0;
}

int proc_zygote_create(host_template *t, host_sandbox *sb, const char *spec, const char *env_json,
                       int pooled, int child_fd, sg_err *err)
{
    /* not yet ready (or only a successor, the serving one dead): it forks
     * once preloaded */
    proc_zygote *z = PT(t)->zygote ? PT(t)->zygote : PT(t)->next;
    if (!z || z->sock.fd < 0)
        return sg_err_set(err, SG_EUNAVAIL, "template %s is restarting; retry", t->cfg->name);
    size_t cap = strlen(spec) * 2 + strlen(env_json) + 256;
    char *msg = malloc(cap);
    int n = snprintf(msg, cap, "CREATE {\"id\":\"%s\",\"workdir\":\"/workspace\",\"env\":%s,"
                               "\"pool\":%s,\"egress\":%s,\"spec\":\"", sb->id, env_json,
                     pooled ? "true" : "false", sb->egress ? "true" : "false");
    n += (int)escape_spec(msg + n, spec);
    n += snprintf(msg + n, cap - (size_t)n, "\"}");
    int rc = send_zygote(z, msg, (size_t)n, &child_fd, 1, err);
    explicit_bzero(msg, (size_t)n);   /* the env holds secrets */
    free(msg);
    if (rc == 0)
        sb->gen = z->gen;   /* the core counts its use (note_use) */
    return rc;
}

static uint32_t jobs;   /* the last JOIN's number; 0 is never used */

/* The JOIN message itself, with the sandbox's pidfd and the context's ends. */
static int send_join(proc_zygote *z, host_sandbox *sb, const char *language, const int *f,
                     sg_err *err)
{
    host_template *t = z->t;
    char *spec = proc_join_spec(sb, t, err);
    if (!spec)
        return err->code;
    if (++jobs == 0)
        ++jobs;
    size_t cap = strlen(spec) * 2 + 96;
    char *msg = malloc(cap);
    int n = snprintf(msg, cap, "JOIN {\"job\":%u,\"spec\":\"", jobs);
    n += (int)escape_spec(msg + n, spec);
    /* language: one of host_ctx_language_ok's words, nothing to escape */
    n += snprintf(msg + n, cap - (size_t)n, "\",\"language\":\"%s\"}", language);
    int fds[4] = {sb->pidfd, f[3], f[4], f[5]};
    int rc = send_zygote(z, msg, (size_t)n, fds, 4, err);
    free(msg);
    free(spec);
    return rc;
}

/* JOIN (PROTOCOL.md section 1a): the zygote forks a context into the running
 * sandbox. We make the context's socket and pipes, queue its activation
 * (env, workdir) on the socket before the zygote has it, so the zygote never
 * sees the sandbox's environment, and keep our ends in the context until
 * JOINED. */
int proc_zygote_join(host_template *t, host_ctx *c, sg_err *err)
{
    host_sandbox *sb = c->sb;
    /* the serving generation, whatever made the sandbox */
    proc_zygote *z = PT(t)->zygote ? PT(t)->zygote : PT(t)->next;
    if (!z || z->sock.fd < 0)
        return sg_err_set(err, SG_EUNAVAIL, "template %s is restarting; retry", t->cfg->name);
    if (!sb->ctx_env)
        return sg_err_set(err, SG_EINTERNAL, "sandbox %s has no environment for a context", sb->id);
    /* [0..2]: our ends (socket, out_r, err_r); [3..5]: the context's */
    int f[6] = {-1, -1, -1, -1, -1, -1}, sv[2], out[2], er[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
        f[0] = sv[0];
        f[3] = sv[1];
    }
    if (f[0] >= 0 && pipe2(out, O_CLOEXEC) == 0) {
        f[1] = out[0];
        f[4] = out[1];
    }
    if (f[1] >= 0 && pipe2(er, O_CLOEXEC) == 0) {
        f[2] = er[0];
        f[5] = er[1];
    }
    int rc;
    if (f[2] < 0)
        rc = sg_err_errno(err, SG_EINTERNAL, "socketpair/pipe for context %s", c->id);
    else if (host_ctx_send_activation(f[0], sb->ctx_env) != 0)
        rc = sg_err_errno(err, SG_EINTERNAL, "queueing the environment of context %s", c->id);
    else
        rc = send_join(z, sb, c->language, f, err);
    for (int i = rc == 0 ? 3 : 0; i < 6; i++)   /* theirs always; ours on failure */
        if (f[i] >= 0)
            close(f[i]);
    if (rc != 0)
        return rc;
    c->join_job = jobs;
    c->join_gen = z->gen;
    z->joins++;
    memcpy(c->join_fds, f, sizeof c->join_fds);
    return 0;
}

static host_ctx *find_join(uint32_t job)
{
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_ctx *c = sb->contexts; c; c = c->next)
            if (c->join_job == job)
                return c;
    return NULL;
}

/* JOINED <job> <pid> / JOINERR <job> <message>. */
static void on_join_reply(proc_zygote *z, const char *msg)
{
    if (z->joins)
        z->joins--;
    unsigned job = 0;
    int pid = 0, used = 0;
    int joined = strncmp(msg, "JOINED ", 7) == 0;
    if (sscanf(msg + (joined ? 7 : 8), "%u %n", &job, &used) != 1 || job == 0)
        return;
    host_ctx *c = find_join(job);
    if (!c)
        return;   /* destroyed meanwhile; the process dies with its sandbox */
    if (joined && sscanf(msg + 7 + used, "%d", &pid) == 1 && pid > 1) {
        host_ctx_joined(c, pid);
        return;
    }
    char why[320];
    snprintf(why, sizeof why, "could not start the context: %s",
             joined ? "bad JOINED from the zygote" : msg + 8 + used);
    host_ctx_failed(c, why);
}

/* The zygote died or retires: its JOINs in flight will never be answered. */
static void fail_joins(proc_zygote *z)
{
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_ctx *c = sb->contexts; c; c = c->next)
            if (c->join_job && c->join_gen == z->gen &&
                strcmp(sb->template_name, z->t->cfg->name) == 0)
                host_ctx_failed(c, "the template's zygote restarted while starting the context; "
                                   "retry");
    z->joins = 0;
}
