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

static void on_zygote_msg(host_watch *w, uint32_t events)
{
    host_template *t = w->owner;
    char buf[256];
    ssize_t n = recv(w->fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n > 0) {
        buf[n] = 0;
        if (strncmp(buf, "HELLO ", 6) == 0) {
            t->zygote_ready = 1;
            fprintf(stderr, "sandgate-host: template %s: zygote %s ready\n", t->cfg->name,
                    buf + 6);
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    fprintf(stderr, "sandgate-host: template %s: zygote %d exited; restarting\n", t->cfg->name,
            (int)t->zygote_pid);
    host_watch_close(&t->sock);
    t->zygote_ready = 0;
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
    for (const char *p = spec; *p; p++) {   /* the spec is ours: only \n needs escaping */
        if (*p == '\n') {
            msg[n++] = '\\';
            msg[n++] = 'n';
        } else if (*p == '"' || *p == '\\') {
            msg[n++] = '\\';
            msg[n++] = *p;
        } else {
            msg[n++] = *p;
        }
    }
    n += snprintf(msg + n, cap - (size_t)n, "\"}");
    struct iovec iov = {.iov_base = msg, .iov_len = (size_t)n};
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &child_fd, sizeof(int));
    ssize_t s = sendmsg(t->sock.fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    free(msg);
    if (s < 0)
        return sg_err_errno(err, SG_EUNAVAIL, "sendmsg(zygote %s)", t->cfg->name);
    return 0;
}
