/* sandbox.c — a sandbox's lifecycle on the host: create (cgroups, then the
 * template's driver launches it: host/driver.h), the supervisor channel, TTL and idle expiry, kill and
 * teardown. A kill answers only once the sandbox's cgroups are empty and
 * removed, so "killed" means no process is left. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "host/core/admit.h"
#include "host/contain/contain.h"
#include "host/host.h"
#include "host/core/reaper.h"
#include "host/core/rules.h"

#define KILL_RESIGNAL_US 500000
#define CREATE_TIMEOUT_US (15 * 1000000LL)
#define SUP_MSG_MAX 4096

host_sandbox *host_sandbox_find(const char *id)
{
    for (host_sandbox *s = H.sandboxes; s; s = s->next)
        if (strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

static host_sandbox *find_dedupe(const char *key)
{
    for (host_sandbox *s = H.sandboxes; s; s = s->next)
        if (s->state != SB_KILLING && strcmp(s->dedupe, key) == 0)
            return s;
    return NULL;
}

void host_sandbox_fill(const host_sandbox *sb, Sandgate__V1__HostSandbox *out,
                       Sandgate__V1__Sandbox *s, Sandgate__V1__Owner *o)
{
    sandgate__v1__host_sandbox__init(out);
    sandgate__v1__sandbox__init(s);
    sandgate__v1__owner__init(o);
    s->sandbox_id = (char *)sb->id;
    s->template_ = (char *)sb->template_name;
    s->user_id = (char *)sb->user;
    s->task_id = (char *)sb->task;
    s->created_at = sb->created_ms;
    s->expires_at = sb->expires_ms;
    s->n_metadata = sb->n_meta;
    s->metadata = sb->meta_ptrs;
    s->isolation = (char *)(sb->drv ? sb->drv->name : "process");
    s->state = sb->state == SB_KILLING ? SANDGATE__V1__SANDBOX_STATE__SANDBOX_STATE_TERMINATED
                                       : SANDGATE__V1__SANDBOX_STATE__SANDBOX_STATE_RUNNING;
    o->tenant_id = (char *)sb->tenant;
    o->user_id = (char *)sb->user;
    o->task_id = (char *)sb->task;
    out->sandbox = s;
    out->owner = o;
    out->last_active_at = sb->last_active_ms;
}

int host_supervisor_send(host_sandbox *sb, const char *fmt, ...)
{
    char buf[SUP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (sb->sock.fd < 0 || n < 0 || (size_t)n >= sizeof buf)
        return -1;
    return send(sb->sock.fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n ? 0 : -1;
}

/* ---- create ---- */

static void reply_created(host_sandbox *sb, int reused, rpc_call *call)
{
    Sandgate__V1__HostSandbox out;
    Sandgate__V1__Sandbox s;
    Sandgate__V1__Owner o;
    host_sandbox_fill(sb, &out, &s, &o);
    out.reused = reused;
    rpc_call_reply(call, &out.base);
}


/* Answer the create and every racing create of the same task: with the
 * sandbox (e == NULL) or the error. */
static void answer_creates(host_sandbox *sb, const sg_err *e)
{
    if (sb->create_call) {
        if (e)
            rpc_call_fail(sb->create_call, e);
        else
            reply_created(sb, 0, sb->create_call);
        rpc_call_unref(sb->create_call);
        sb->create_call = NULL;
    }
    for (size_t i = 0; i < sb->n_create_waiters; i++) {
        if (e)
            rpc_call_fail(sb->create_waiters[i], e);
        else
            reply_created(sb, 1, sb->create_waiters[i]);
        rpc_call_unref(sb->create_waiters[i]);
    }
    free(sb->create_waiters);
    sb->create_waiters = NULL;
    sb->n_create_waiters = 0;
}

void host_sandbox_fail_create(host_sandbox *sb, int code, const char *msg)
{
    host_pool_unlink(sb);
    host_pool_wipe_activation(sb);
    sg_err e;
    sg_err_set(&e, code, "sandbox %s: %s", sb->id, msg);
    answer_creates(sb, &e);
    host_sandbox_kill(sb, NULL);
}

/* Live sandboxes here of the tenant / of the user (pool ones have no owner). */
static void count_owned(const char *tenant, const char *user, uint32_t *nt, uint32_t *nu)
{
    *nt = *nu = 0;
    for (host_sandbox *s = H.sandboxes; s; s = s->next) {
        if (s->state == SB_KILLING || strcmp(s->tenant, tenant) != 0)
            continue;
        (*nt)++;
        *nu += strcmp(s->user, user) == 0;
    }
}

/* The quota check that holds across racing creates: under H.mu, with the
 * gateway's count of the tenant's sandboxes on other hosts added. */
static int check_quota(const Sandgate__V1__HostCreateRequest *req, sg_err *err)
{
    uint32_t nt, nu;
    count_owned(req->owner->tenant_id, req->owner->user_id, &nt, &nu);
    nt += req->live_elsewhere_tenant;
    nu += req->live_elsewhere_user;
    if (req->max_sandboxes_tenant && nt >= req->max_sandboxes_tenant)
        return sg_err_set(err, SG_EQUOTA, "quota: tenant %s has %u live sandboxes, the limit is %u",
                          req->owner->tenant_id, nt, req->max_sandboxes_tenant);
    if (req->max_sandboxes_user && nu >= req->max_sandboxes_user)
        return sg_err_set(err, SG_EQUOTA,
                          "quota: user %s of tenant %s has %u live sandboxes, the limit is %u",
                          req->owner->user_id, req->owner->tenant_id, nu, req->max_sandboxes_user);
    return 0;
}

int host_slot_alloc(uint32_t *slot)
{
    for (uint32_t i = 0; i < H.cfg.max_sandboxes; i++)
        if (!H.slots[i]) {
            H.slots[i] = 1;
            *slot = i;
            return 0;
        }
    return -1;
}

static void on_supervisor(host_watch *w, uint32_t events);

/* 128 random bits from getrandom(2): no fd to open, so it works with the
 * fd table full. GRND_NONBLOCK: only before the kernel's pool is seeded
 * (early boot) does it fail, and then the create fails, never the host. */
static int random_id(char *out, size_t n)
{
    unsigned char b[16];
    ssize_t got;
    do
        got = getrandom(b, sizeof b, GRND_NONBLOCK);
    while (got < 0 && errno == EINTR);
    if (got != (ssize_t)sizeof b) {
        sg_log_error("getrandom(16): %s",
                got < 0 ? strerror(errno) : "short read");
        return -1;
    }
    int k = snprintf(out, n, "%s-", H.cfg.name);
    for (int i = 0; i < 16 && (size_t)k + 2 < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%02x", b[i]);
    explicit_bzero(b, sizeof b);
    return 0;
}

void host_limits_default(Sandgate__V1__Limits *l)
{
    if (!l->memory_bytes) l->memory_bytes = 512ull << 20;
    if (!l->pids) l->pids = 128;
    if (!l->cpu_millis) l->cpu_millis = 1000;
    if (!l->disk_bytes) l->disk_bytes = 256ull << 20;
    if (!l->tmp_bytes) l->tmp_bytes = 64ull << 20;
    if (!l->max_file_bytes) l->max_file_bytes = 8ull << 20;
    if (!l->max_processes) l->max_processes = 16;
}

/* A sandbox of a template of this host, with a fresh random id, default
 * limits, no owner yet; NULL when there is no memory or no randomness (the
 * caller frees the slot). */
host_sandbox *host_sandbox_alloc(const char *template_name, uint32_t slot)
{
    host_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb || random_id(sb->id, sizeof sb->id) != 0) {
        free(sb);
        return NULL;
    }
    snprintf(sb->template_name, sizeof sb->template_name, "%s", template_name);
    host_template *t = host_template_find(template_name);
    sb->drv = t ? t->drv : NULL;
    snprintf(sb->cgroup, sizeof sb->cgroup, "%s", sb->id);
    sandgate__v1__limits__init(&sb->limits);
    host_limits_default(&sb->limits);
    sb->slot = slot;
    sb->sock.fd = -1;
    sb->pidfd = -1;
    sb->create_deadline_us = host_now_us() + CREATE_TIMEOUT_US;
    return sb;
}

/* Everything of the request's: id, owner, limits, TTL, secrets, labels. */
void host_sandbox_assign(host_sandbox *sb, const Sandgate__V1__HostCreateRequest *req)
{
    if (req->sandbox_id[0])
        snprintf(sb->id, sizeof sb->id, "%s", req->sandbox_id);
    snprintf(sb->tenant, sizeof sb->tenant, "%s", req->owner->tenant_id);
    snprintf(sb->user, sizeof sb->user, "%s", req->owner->user_id);
    snprintf(sb->task, sizeof sb->task, "%s", req->owner->task_id);
    snprintf(sb->template_name, sizeof sb->template_name, "%s", req->request->template_);
    snprintf(sb->dedupe, sizeof sb->dedupe, "%s", req->dedupe_key);
    sandgate__v1__limits__init(&sb->limits);
    if (req->limits) {
        sb->limits = *req->limits;
        sb->limits.base.unknown_fields = NULL;
        sb->limits.base.n_unknown_fields = 0;
    }
    host_limits_default(&sb->limits);
    host_labels_assign(sb, req->request);
    sb->created_ms = sb->last_active_ms = host_wall_ms();
    uint32_t ttl = req->request->ttl_seconds ? req->request->ttl_seconds : 600;
    sb->expires_ms = sb->created_ms + (int64_t)ttl * 1000;
    /* a pool sandbox still warming keeps a longer budget its driver gave it */
    int64_t deadline = host_now_us() + CREATE_TIMEOUT_US;
    if (deadline > sb->create_deadline_us)
        sb->create_deadline_us = deadline;
    sb->secrets = calloc(req->n_secrets + 1, sizeof *sb->secrets);
    for (size_t i = 0; i < req->n_secrets; i++) {
        const Sandgate__V1__Secret *s = req->secrets[i];
        if (s->value.len == 0)
            continue;   /* an empty value cannot be found in output */
        host_secret *d = &sb->secrets[sb->n_secrets++];
        d->name = strdup(s->name);
        d->value = malloc(s->value.len);
        memcpy(d->value, s->value.data, s->value.len);
        d->len = s->value.len;
        if (d->len > sb->secret_max)
            sb->secret_max = d->len;
    }
}

static host_sandbox *sandbox_new(const Sandgate__V1__HostCreateRequest *req, uint32_t slot)
{
    host_sandbox *sb = host_sandbox_alloc(req->request->template_, slot);
    if (!sb)
        return NULL;
    host_sandbox_assign(sb, req);
    snprintf(sb->cgroup, sizeof sb->cgroup, "%s", sb->id);
    return sb;
}

/* Keep the sandbox's environment for contexts the zygote joins into it
 * later: they get it as their activation ('A' frame), as a pooled default
 * context does. Secrets included: wiped in sandbox_free. */
void host_sandbox_keep_env(host_sandbox *sb, const char *env_json)
{
    size_t n = strlen(env_json) + 40;
    if (sb->ctx_env) {
        explicit_bzero(sb->ctx_env, strlen(sb->ctx_env));
        free(sb->ctx_env);
    }
    sb->ctx_env = malloc(n);
    snprintf(sb->ctx_env, n, "{\"workdir\":\"/workspace\",\"env\":%s}", env_json);
}

/* Launch: cgroups and the supervisor channel, then the driver starts the
 * sandbox on it. Called with H.mu held. env_json is the sandbox's
 * environment ("{}" for a pool sandbox: it gets its env with ACTIVATE). */
int host_sandbox_launch(host_sandbox *sb, host_template *t, const char *env, int pooled, sg_err *err)
{
    char procs[2048] = "", eb[512] = "";
    if (t->cfg->contain) {
        sgc_cgroup_limits lim = {.memory_bytes = sb->limits.memory_bytes,
                                 .pids = sb->limits.pids,
                                 .cpu_millis = sb->limits.cpu_millis};
        if (sb->drv->cgroup_limits)
            sb->drv->cgroup_limits(sb, &lim);
        if (sgc_cgroup_create(H.cfg.cgroup_root, sb->cgroup, &lim, procs, sizeof procs, eb,
                              sizeof eb) != 0)
            return sg_err_set(err, SG_EINTERNAL, "cgroup for %s: %s", sb->id, eb);
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "socketpair(sandbox %s)", sb->id);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    host_watch_add(&sb->sock, sv[0], on_supervisor, sb);
    int rc = sb->drv->launch(t, sb, env, pooled, sv[1], procs, err);
    close(sv[1]);
    return rc;
}

/* Fail closed on the host's own word: the template's isolation in this
 * host's config must be at least what the create requires, whoever asks. */
static int check_isolation(const host_template *t, const Sandgate__V1__HostCreateRequest *req,
                           sg_err *err)
{
    sg_isolation want = SG_ISOLATION_UNSET;
    if (req->min_isolation[0] && sg_isolation_parse(req->min_isolation, &want) < 0)
        return sg_err_set(err, SG_EINVAL, "min_isolation: unknown isolation, expected "
                          SG_ISOLATION_EXPECTED);
    sg_isolation have = t->cfg->isolation ? t->cfg->isolation : SG_ISOLATION_PROCESS;
    if (have < want)
        return sg_err_set(err, SG_EPRECOND, "template '%s' runs under isolation %s on this host; "
                          "the create requires at least %s", t->cfg->name,
                          sg_isolation_name(have), sg_isolation_name(want));
    return 0;
}

int host_sandbox_create(const Sandgate__V1__HostCreateRequest *req, rpc_call *call, sg_err *err)
{
    if (host_check_create(req, err) != 0)
        return err->code;
    host_template *t = host_template_find(req->request->template_);
    if (!t)
        return sg_err_set(err, SG_EINVAL, "create: this host has no template \"%.64s\"",
                          req->request->template_);
    if (check_isolation(t, req, err) != 0)
        return err->code;
    pthread_mutex_lock(&H.mu);
    host_sandbox *old = req->dedupe_key[0] ? find_dedupe(req->dedupe_key) : NULL;
    /* The task's live sandbox answers only if it, too, is strong enough
     * (it may be of another template, from before a policy change). */
    host_template *ot = old ? host_template_find(old->template_name) : NULL;
    if (old && (!ot || check_isolation(ot, req, err) != 0)) {
        pthread_mutex_unlock(&H.mu);
        if (!ot)
            sg_err_set(err, SG_EPRECOND, "create: the task's live sandbox %s has no template "
                       "on this host", old->id);
        return err->code;
    }
    if (old && old->state == SB_RUNNING) {
        reply_created(old, 1, call);
        pthread_mutex_unlock(&H.mu);
        return 0;
    }
    if (old) {
        /* The same task is being created right now: answer with it. */
        old->create_waiters = realloc(old->create_waiters,
                                      (old->n_create_waiters + 1) * sizeof *old->create_waiters);
        old->create_waiters[old->n_create_waiters++] = rpc_call_ref(call);
        pthread_mutex_unlock(&H.mu);
        return 0;
    }
    if (req->sandbox_id[0] && host_sandbox_find(req->sandbox_id)) {
        pthread_mutex_unlock(&H.mu);
        return sg_err_set(err, SG_EEXISTS, "create: sandbox id %s is taken", req->sandbox_id);
    }
    /* etcd mode: a gateway that read the task's claim just before this
     * host released it names the ended sandbox. Never a second life for an
     * id; the release is a moment away, so a retry creates anew. */
    host_lost lost;
    if (req->sandbox_id[0] &&
        (host_registry_was_ended(req->sandbox_id) || host_journal_lost(req->sandbox_id, &lost) == 0)) {
        pthread_mutex_unlock(&H.mu);
        return sg_err_set(err, SG_EUNAVAIL, "create: the task's last sandbox %s has ended and "
                          "its claim is being released; retry", req->sandbox_id);
    }
    if (check_quota(req, err) != 0) {
        pthread_mutex_unlock(&H.mu);
        return err->code;
    }
    /* A ready pool sandbox is already paid for (its fds and pids are
     * counted): handing it out takes nothing new, so no admission check. */
    host_sandbox *psb = host_pool_take(t, req);
    if (psb) {
        int prc = host_pool_activate(psb, t, req, call, err);
        pthread_mutex_unlock(&H.mu);
        return prc;
    }
    /* Before anything is allocated: a host that runs dry loses every
     * sandbox it holds, so refuse while the reserve is still there. */
    if (host_admit_check(HOST_ADMIT_SANDBOX, err) != 0) {
        pthread_mutex_unlock(&H.mu);
        return err->code;
    }
    uint32_t slot;
    if (host_slot_alloc(&slot) != 0) {
        pthread_mutex_unlock(&H.mu);
        return sg_err_set(err, SG_EQUOTA, "host is full (%u sandboxes)", H.cfg.max_sandboxes);
    }
    host_sandbox *sb = sandbox_new(req, slot);
    if (!sb) {
        H.slots[slot] = 0;
        pthread_mutex_unlock(&H.mu);
        return sg_err_set(err, SG_EUNAVAIL, "host could not make a sandbox id now; retry");
    }
    sb->next = H.sandboxes;
    H.sandboxes = sb;
    H.n_sandboxes++;
    sb->create_call = rpc_call_ref(call);
    char *env = host_sandbox_env(req);
    host_sandbox_keep_env(sb, env);
    int rc = host_egress_attach(sb, req, err);
    if (rc == 0)
        rc = host_sandbox_launch(sb, t, env, 0, err);
    if (rc == 0)
        t->drv->note_use(t, sb->gen);
    /* env holds secret values: wipe before free */
    explicit_bzero(env, strlen(env));
    free(env);
    if (rc != 0) {
        rpc_call_unref(sb->create_call);
        sb->create_call = NULL;
        host_sandbox_kill(sb, NULL);
    }
    pthread_mutex_unlock(&H.mu);
    return rc;
}

/* ---- the supervisor channel ---- */

static int recv_msg(int fd, char *buf, size_t cap, int *fds, int *nfds)
{
    struct iovec iov = {.iov_base = buf, .iov_len = cap - 1};
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf};
    ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    *nfds = 0;
    if (n <= 0)
        return (int)n;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int fd2;
            memcpy(&fd2, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*nfds < 4)
                fds[(*nfds)++] = fd2;
            else
                close(fd2);
        }
    }
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        return -2;
    }
    buf[n] = 0;
    return (int)n;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

static void on_ready_ctx(host_sandbox *sb, const char *id, int *fds, int nfds)
{
    host_ctx *c = host_ctx_find(sb, id);
    if (!c && strcmp(id, "default") == 0 && sb->state == SB_CREATING)
        c = host_ctx_new(sb, "default");
    if (!c || nfds != 3) {
        close_fds(fds, nfds);
        return;
    }
    host_ctx_attach(c, fds[0], fds[1], fds[2]);
    if (sb->state == SB_CREATING && strcmp(id, "default") == 0) {
        sb->state = SB_RUNNING;
        /* The TTL is the owner's time with a usable sandbox, counted from
         * now: a create that waited for a warm sandbox still starting (a
         * gVisor one takes seconds on a loaded machine) spends none of it.
         * created_at moves with it, so expires_at - created_at stays the TTL. */
        int64_t waited = host_wall_ms() - sb->created_ms;
        if (waited > 0) {
            sb->created_ms += waited;
            sb->expires_ms += waited;
            sb->last_active_ms = sb->created_ms;
        }
        if (sb->tenant[0])
            host_journal_created(sb->id, sb->tenant, sb->user, sb->task);
        if (host_pool_log())
            sg_log_info("pool: %s running %.2f ms after the request", sb->id,
                    (host_now_us() - (sb->create_deadline_us - CREATE_TIMEOUT_US)) / 1000.0);
        answer_creates(sb, NULL);
    }
}

/* One message from the supervisor (or, during create, from A or B). */
static void handle_sup_msg(host_sandbox *sb, char *msg, int *fds, int nfds)
{
    char verb[16] = "", id[HOST_ID_MAX] = "";
    int a = 0, b = 0;
    sscanf(msg, "%15s %79s %d %d", verb, id, &a, &b);
    if (strcmp(verb, "PID") == 0 && sb->state == SB_CREATING) {
        sb->pid = (pid_t)atoi(id);
        /* Before anything can reap it (process driver: its parent, the
         * zygote, only reaps what died): a handle that file calls (and the
         * process driver's JOINs) name the sandbox by. */
        if (sb->pidfd < 0 && sb->pid > 0)
            sb->pidfd = (int)syscall(SYS_pidfd_open, sb->pid, 0);
    } else if (strcmp(verb, "POOLED") == 0 && sb->state == SB_CREATING && !sb->pool_ready) {
        sb->pool_ready = 1;
        int arc = sb->activate_json ? host_pool_send_activation(sb) : 0;
        if (arc == -2)   /* see host_pool_activate */
            host_sandbox_fail_create(sb, SG_EINVAL, "env: too large for this host to pass to the "
                                     "sandbox; send a smaller environment");
        else if (arc != 0)
            host_sandbox_fail_create(sb, SG_EINTERNAL, "could not activate the pooled sandbox");
        return;
    } else if (strcmp(verb, "READY") == 0) {
        /* the default context follows */
    } else if (strcmp(verb, "ERR") == 0 && sb->state == SB_CREATING) {
        sg_log_warn("sandbox %s: setup failed: %s", sb->id, msg + 4);
        host_sandbox_fail_create(sb, SG_EINTERNAL, msg + 4);
        return;
    } else if (strcmp(verb, "EGRESS") == 0 && nfds == 1) {
        host_egress_adopt(sb, fds[0]);   /* a connection to 127.0.0.1:3128 inside */
        return;
    } else if (strcmp(verb, "CTX") == 0) {
        on_ready_ctx(sb, id, fds, nfds);
        return;
    } else if (strcmp(verb, "CTXERR") == 0) {
        host_ctx *c = host_ctx_find(sb, id);
        if (c)
            host_ctx_failed(c, msg);
    } else if (strcmp(verb, "CTXEXIT") == 0) {
        host_ctx *c = host_ctx_find(sb, id);
        if (c)
            host_ctx_exited(c, a, b);
    } else if (strcmp(verb, "EXEC") == 0) {
        host_exec *e = host_exec_find(sb, id);
        if (e && nfds == 2) {
            host_exec_attach(e, fds[0], fds[1]);
            return;
        }
    } else if (strcmp(verb, "EXECERR") == 0) {
        host_exec *e = host_exec_find(sb, id);
        if (e)
            host_exec_failed(e, msg);
    } else if (strcmp(verb, "EXIT") == 0 && id[0] == 'p') {
        host_proc *p = host_proc_find(sb, id);
        if (p)
            host_proc_exited(p, a, b);
    } else if (strcmp(verb, "EXIT") == 0) {
        host_exec *e = host_exec_find(sb, id);
        if (e)
            host_exec_exited(e, a, b);
    } else if (strcmp(verb, "PROC") == 0) {
        host_proc *p = host_proc_find(sb, id);
        if (p) {
            host_proc_started(p, fds, nfds);   /* takes the fds */
            return;
        }
    } else if (strcmp(verb, "PROCERR") == 0) {
        host_proc *p = host_proc_find(sb, id);
        if (p)
            host_proc_failed(p, msg);
    }
    close_fds(fds, nfds);
}

static void on_supervisor(host_watch *w, uint32_t events)
{
    host_sandbox *sb = w->owner;
    for (int i = 0; i < 64 && sb->sock.fd >= 0; i++) {
        char buf[SUP_MSG_MAX];
        int fds[4], nfds;
        int n = recv_msg(w->fd, buf, sizeof buf, fds, &nfds);
        if (n < 0 && (errno == EAGAIN || errno == EINTR) && n == -1)
            return;
        if (n <= 0) {
            /* EOF or garbage: the supervisor is gone, so is the sandbox. */
            if (sb->state == SB_CREATING)
                host_sandbox_fail_create(sb, SG_EINTERNAL, "the sandbox died while starting");
            else
                host_sandbox_kill(sb, NULL);
            return;
        }
        handle_sup_msg(sb, buf, fds, nfds);
    }
}

/* ---- kill and teardown ---- */

static void unlink_table(host_sandbox *sb)
{
    for (host_sandbox **p = &H.sandboxes; *p; p = &(*p)->next)
        if (*p == sb) {
            *p = sb->next;
            H.n_sandboxes--;
            break;
        }
}

/* Stop everything: fail waiting calls, close fds, SIGKILL the cgroup. The
 * struct moves to H.dying and is freed by the tick once its cgroups are
 * empty (never inside an epoll batch that may still name its watches). */
void host_sandbox_kill(host_sandbox *sb, rpc_call *reply_to)
{
    if (reply_to) {
        sb->kill_calls = realloc(sb->kill_calls, (sb->n_kill_calls + 1) * sizeof *sb->kill_calls);
        sb->kill_calls[sb->n_kill_calls++] = rpc_call_ref(reply_to);
    }
    if (sb->state == SB_KILLING)
        return;
    /* Ended in this life; an orderly stop (draining) ends none, so after the
     * restart they answer as lost (journal.c). */
    if (!H.draining) {
        host_journal_ended(sb->id);
        /* An orderly stop revokes the lease instead: its keys go at once,
         * and the task's history stays, so a new create says it was lost. */
        host_registry_ended(sb->id, sb->tenant, sb->user, sb->dedupe);
    }
    sb->state = SB_KILLING;
    unlink_table(sb);
    sb->next = H.dying;
    H.dying = sb;
    sg_err e;
    sg_err_set(&e, SG_EUNAVAIL, "sandbox was killed while starting");
    answer_creates(sb, &e);
    for (host_ctx *c = sb->contexts; c; c = c->next)
        host_ctx_destroy(c, "the sandbox was killed");
    for (host_exec *e = sb->execs; e; e = e->next)
        host_exec_destroy(e, "the sandbox was killed");
    host_procs_destroy(sb);
    host_watch_close(&sb->sock);
    host_egress_detach(sb);
    /* Signal and go on: the processes exit (an interpreter's exit takes
     * milliseconds) while this thread serves others; the tick removes the
     * cgroups once they are empty and answers the kill then. pid 1 first
     * (its pid namespace dies with it), then the groups, from the reaper
     * thread: a v1 freeze of a fork bomb can take a second, never under
     * H.mu. */
    sb->killed_us = host_now_us();
    if (sb->pid > 0)
        kill(sb->pid, SIGKILL);
    if (sgc_cgroup_detect(H.cfg.cgroup_root) != SGC_CGROUP_NONE)
        host_reaper_signal(sb->cgroup);
    if (sb->drv && sb->drv->kill)
        sb->drv->kill(sb);
}

static void sandbox_free(host_sandbox *sb)
{
    host_ctx *c = sb->contexts;
    while (c) {
        host_ctx *n = c->next;
        free(c);
        c = n;
    }
    host_exec *e = sb->execs;
    while (e) {
        host_exec *n = e->next;
        free(e);
        e = n;
    }
    host_procs_free(sb);
    host_secrets_free(sb);
    host_pool_wipe_activation(sb);
    if (sb->ctx_env) {
        explicit_bzero(sb->ctx_env, strlen(sb->ctx_env));
        free(sb->ctx_env);
    }
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    free(sb->kill_calls);
    host_labels_free(sb);
    free(sb);
}

/* The driver's own leftovers of a dead sandbox (driver.h
 * cleanup_after_empty): 1 once removed. */
static int driver_cleaned(host_sandbox *sb)
{
    if (!sb->drv_cleaned)
        sb->drv_cleaned = !sb->drv || !sb->drv->cleanup_after_empty ||
                          sb->drv->cleanup_after_empty(sb);
    return sb->drv_cleaned;
}

/* A dying sandbox is finished when its cgroups are gone. */
static int reap_dying(host_sandbox *sb)
{
    host_template *t = host_template_find(sb->template_name);
    int contained = t && t->cfg->contain;
    if (contained) {
        char eb[256];
        if (!sgc_cgroup_empty(H.cfg.cgroup_root, sb->cgroup)) {
            /* still exiting; signal again only if something outlived the
             * first kill (a process forked while it was being sent) */
            if (host_now_us() - sb->killed_us > KILL_RESIGNAL_US) {
                host_reaper_signal(sb->cgroup);
                sb->killed_us = host_now_us();
            }
            return 0;
        }
        if (!driver_cleaned(sb))
            return 0;
        if (sgc_cgroup_destroy(H.cfg.cgroup_root, sb->cgroup, eb, sizeof eb) != 0)
            return 0;
    } else if (sb->pid > 0 && kill(sb->pid, 0) == 0) {
        return 0;
    } else if (!driver_cleaned(sb)) {
        return 0;
    }
    for (size_t i = 0; i < sb->n_kill_calls; i++) {
        Sandgate__V1__KillSandboxResponse r;
        sandgate__v1__kill_sandbox_response__init(&r);
        rpc_call_reply(sb->kill_calls[i], &r.base);
        rpc_call_unref(sb->kill_calls[i]);
    }
    H.slots[sb->slot] = 0;
    return 1;
}

void host_sandboxes_tick(int64_t now_us)
{
    host_pool_tick(now_us);
    int64_t wall = host_wall_ms();
    host_sandbox *sb = H.sandboxes;
    while (sb) {
        host_sandbox *next = sb->next;
        if (sb->state == SB_CREATING && now_us > sb->create_deadline_us) {
            host_sandbox_fail_create(sb, SG_EUNAVAIL, "timed out starting (zygote busy or broken)");
        } else if (sb->state != SB_CREATING && wall >= sb->expires_ms) {
            /* a create has its own deadline (above); TTL and idle start at READY */
            sg_log_info("sandbox %s expired", sb->id);
            host_sandbox_kill(sb, NULL);
        } else if (sb->state != SB_CREATING && sb->limits.idle_timeout_seconds &&
                   wall - sb->last_active_ms >= (int64_t)sb->limits.idle_timeout_seconds * 1000) {
            sg_log_warn("sandbox %s idle; killed", sb->id);
            host_sandbox_kill(sb, NULL);
        } else {
            host_ctx_reap_deleted(sb);
            for (host_ctx *c = sb->contexts; c; c = c->next)
                host_ctx_tick(c, now_us);
            host_procs_tick(sb, now_us);
            for (host_exec **pe = &sb->execs; *pe;) {
                host_exec *e = *pe;
                host_exec_tick(e, now_us);
                if (e->act.call == NULL && e->out.fd < 0 && e->err.fd < 0 && e->started) {
                    *pe = e->next;   /* finished: no watch of it is in flight now */
                    free(e);
                } else {
                    pe = &e->next;
                }
            }
        }
        sb = next;
    }
    for (host_sandbox **p = &H.dying; *p;) {
        host_sandbox *d = *p;
        if (reap_dying(d)) {
            *p = d->next;
            sandbox_free(d);
        } else {
            p = &d->next;
        }
    }
}
