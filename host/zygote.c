/* zygote.c — one warm Python per template (host/runtime/zygote.py): started
 * at boot with posix_spawn (safe in a threaded process), restarted with
 * backoff when it dies, and asked to fork a sandbox per create. The zygote
 * is started with a fixed, clean environment: it holds no secrets, and
 * nothing of the daemon's environment can reach a sandbox through it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host/host.h"

#define ZYGOTE_BACKOFF_US 500000

static void on_join_reply(const char *msg);
static void fail_joins(host_template *t);

static void on_zygote_msg(host_watch *w, uint32_t events)
{
    host_template *t = w->owner;
    char buf[1024];
    ssize_t n = recv(w->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n > 0) {
        buf[n] = 0;
        if (strncmp(buf, "HELLO ", 6) == 0) {
            t->zygote_ready = 1;
            fprintf(stderr, "sandgate-host: template %s: zygote %s ready\n", t->cfg->name,
                    buf + 6);
        } else if (strncmp(buf, "JOINED ", 7) == 0 || strncmp(buf, "JOINERR ", 8) == 0) {
            on_join_reply(buf);
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    fprintf(stderr, "sandgate-host: template %s: zygote %d exited; restarting\n", t->cfg->name,
            (int)t->zygote_pid);
    host_watch_close(&t->sock);
    t->zygote_ready = 0;
    fail_joins(t);
    if (t->zygote_pid > 0)
        kill(t->zygote_pid, SIGKILL);
    t->restart_at_us = host_now_us() + (t->restarts ? ZYGOTE_BACKOFF_US : 0);
    t->restarts++;
}

static int spawn_zygote(host_template *t, sg_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "socketpair(zygote %s)", t->cfg->name);
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
    argv[a] = NULL;
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
        return sg_err_errno(err, SG_EUNAVAIL, "posix_spawn(%s %s)", t->cfg->python, H.runtime_py);
    }
    t->zygote_pid = pid;
    host_watch_add(&t->sock, sv[0], on_zygote_msg, t);
    return 0;
}

int host_zygotes_start(sg_err *err)
{
    for (size_t i = 0; i < H.n_templates; i++) {
        H.templates[i].sock.fd = -1;
        if (spawn_zygote(&H.templates[i], err) != 0)
            return err ? err->code : SG_EINTERNAL;
    }
    return 0;
}

void host_zygotes_tick(int64_t now_us)
{
    for (size_t i = 0; i < H.n_templates; i++) {
        host_template *t = &H.templates[i];
        if (t->sock.fd >= 0 || H.stopping || now_us < t->restart_at_us)
            continue;
        sg_err err;
        if (spawn_zygote(t, &err) != 0) {
            fprintf(stderr, "sandgate-host: %s\n", err.msg);
            t->restart_at_us = now_us + ZYGOTE_BACKOFF_US;
        }
    }
}

host_template *host_template_find(const char *name)
{
    for (size_t i = 0; i < H.n_templates; i++)
        if (strcmp(H.templates[i].cfg->name, name) == 0)
            return &H.templates[i];
    return NULL;
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
static int send_zygote(host_template *t, const char *msg, size_t len, const int *fds, int nfds,
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
    if (sendmsg(t->sock.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        return sg_err_errno(err, SG_EUNAVAIL, "sendmsg(zygote %s)", t->cfg->name);
    return 0;
}

int host_zygote_create(host_template *t, host_sandbox *sb, const char *spec, const char *env_json,
                       int pooled, int child_fd, sg_err *err)
{
    if (t->sock.fd < 0)
        return sg_err_set(err, SG_EUNAVAIL, "template %s is restarting; retry", t->cfg->name);
    size_t cap = strlen(spec) * 2 + strlen(env_json) + 256;
    char *msg = malloc(cap);
    int n = snprintf(msg, cap, "CREATE {\"id\":\"%s\",\"workdir\":\"/workspace\",\"env\":%s,"
                               "\"pool\":%s,\"egress\":%s,\"spec\":\"", sb->id, env_json,
                     pooled ? "true" : "false", sb->egress ? "true" : "false");
    n += (int)escape_spec(msg + n, spec);
    n += snprintf(msg + n, cap - (size_t)n, "\"}");
    int rc = send_zygote(t, msg, (size_t)n, &child_fd, 1, err);
    explicit_bzero(msg, (size_t)n);   /* the env holds secrets */
    free(msg);
    return rc;
}

static uint32_t jobs;   /* the last JOIN's number; 0 is never used */

/* The JOIN message itself, with the sandbox's pidfd and the context's ends. */
static int send_join(host_template *t, host_sandbox *sb, const int *f, sg_err *err)
{
    char *spec = host_sandbox_join_spec(sb, t, err);
    if (!spec)
        return err->code;
    if (++jobs == 0)
        ++jobs;
    size_t cap = strlen(spec) * 2 + 64;
    char *msg = malloc(cap);
    int n = snprintf(msg, cap, "JOIN {\"job\":%u,\"spec\":\"", jobs);
    n += (int)escape_spec(msg + n, spec);
    n += snprintf(msg + n, cap - (size_t)n, "\"}");
    int fds[4] = {sb->pidfd, f[3], f[4], f[5]};
    int rc = send_zygote(t, msg, (size_t)n, fds, 4, err);
    free(msg);
    free(spec);
    return rc;
}

/* JOIN (PROTOCOL.md section 1a): the zygote forks a context into the running
 * sandbox. We make the context's socket and pipes, queue its activation
 * (env, workdir) on the socket before the zygote has it, so the zygote never
 * sees the sandbox's environment, and keep our ends in the context until
 * JOINED. */
int host_zygote_join(host_template *t, host_ctx *c, sg_err *err)
{
    host_sandbox *sb = c->sb;
    if (t->sock.fd < 0)
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
        rc = send_join(t, sb, f, err);
    for (int i = rc == 0 ? 3 : 0; i < 6; i++)   /* theirs always; ours on failure */
        if (f[i] >= 0)
            close(f[i]);
    if (rc != 0)
        return rc;
    c->join_job = jobs;
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
static void on_join_reply(const char *msg)
{
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

/* The zygote died: its JOINs in flight will never be answered. */
static void fail_joins(host_template *t)
{
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_ctx *c = sb->contexts; c; c = c->next)
            if (c->join_job && strcmp(sb->template_name, t->cfg->name) == 0)
                host_ctx_failed(c, "the template's zygote restarted while starting the context; "
                                   "retry");
}
