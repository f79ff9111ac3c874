/* exec.c — one shell command in a sandbox (`/bin/sh -c`, run by the
 * supervisor in its own process group): stdout/stderr streamed with the same
 * cap and redaction as RunCode, a timeout that kills the whole group, and
 * the exit code last. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/host.h"

/* How long a finished command's pipes may stay open after its EXIT. */
#define EXEC_EXIT_GRACE_US 500000

host_exec *host_exec_find(host_sandbox *sb, const char *id)
{
    for (host_exec *e = sb->execs; e; e = e->next)
        if (strcmp(e->id, id) == 0)
            return e;
    return NULL;
}

int host_exec_start(host_sandbox *sb, const char *command, host_exec **out, sg_err *err)
{
    if (strlen(command) > 3000)
        return sg_err_set(err, SG_EINVAL, "command is %zu bytes; the limit is 3000 (write a script "
                                          "with WriteFile for more)", strlen(command));
    if (!command[0])
        return sg_err_set(err, SG_EINVAL, "command is empty");
    host_exec *e = calloc(1, sizeof *e);
    e->sb = sb;
    e->out.fd = e->err.fd = -1;
    snprintf(e->id, sizeof e->id, "x%u", ++sb->exec_seq);
    if (host_supervisor_send(sb, "EXEC %s %s", e->id, command) != 0) {
        free(e);
        return sg_err_set(err, SG_EUNAVAIL, "cannot reach the sandbox's supervisor");
    }
    e->next = sb->execs;
    sb->execs = e;
    *out = e;
    return 0;
}

static void finish(host_exec *e)
{
    host_action *a = &e->act;
    if (!a->call)
        return;
    host_action_output(a, e->sb, 1, 0, NULL, 0, 1);
    host_action_output(a, e->sb, 1, 1, NULL, 0, 1);
    Sandgate__V1__ExecExit x;
    sandgate__v1__exec_exit__init(&x);
    x.exit_code = e->signal ? -1 : e->exit_code;
    x.signal = e->signal;
    x.timed_out = a->timed_out;
    x.truncated = a->truncated;
    x.output_bytes_total = a->output_total;
    x.duration_us = (uint64_t)(host_now_us() - a->started_us);
    Sandgate__V1__ExecEvent ev;
    sandgate__v1__exec_event__init(&ev);
    ev.event_case = SANDGATE__V1__EXEC_EVENT__EVENT_EXIT;
    ev.exit = &x;
    rpc_call_send_msg(a->call, &ev.base);
    rpc_call_finish(a->call, GRPC_STATUS_OK, NULL);
    host_action_release(a);
    e->sb->last_active_ms = host_wall_ms();
}

static void drain(host_exec *e, host_watch *w)
{
    uint8_t buf[65536];
    for (int i = 0; i < 64 && w->fd >= 0; i++) {
        ssize_t n = read(w->fd, buf, sizeof buf);
        if (n > 0) {
            host_action_output(&e->act, e->sb, 1, w == &e->err, buf, (size_t)n, 0);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            host_watch_close(w);
        return;
    }
}

static void on_pipe(host_watch *w, uint32_t events)
{
    host_exec *e = w->owner;
    drain(e, w);
    /* Exit status first, then EOF on both pipes: the output is complete. */
    if (e->exited && e->out.fd < 0 && e->err.fd < 0)
        finish(e);
}

void host_exec_attach(host_exec *e, int out, int err)
{
    fcntl(out, F_SETFL, O_NONBLOCK);
    fcntl(err, F_SETFL, O_NONBLOCK);
    host_watch_add(&e->out, out, on_pipe, e);
    host_watch_add(&e->err, err, on_pipe, e);
    e->started = 1;
}

void host_exec_exited(host_exec *e, int code, int sig)
{
    e->exited = 1;
    e->exit_code = code;
    e->signal = sig;
    drain(e, &e->out);
    drain(e, &e->err);
    if (e->out.fd < 0 && e->err.fd < 0) {
        finish(e);
        return;
    }
    /* Output may still be in flight behind EXIT (the gVisor shim relays the
     * pipes apart from the channel), or a background child may hold the pipes
     * open: wait for EOF briefly (on_pipe finishes then), never for the child. */
    e->exit_grace_us = host_now_us() + EXEC_EXIT_GRACE_US;
}

static void end_grace(host_exec *e)
{
    drain(e, &e->out);
    drain(e, &e->err);
    host_watch_close(&e->out);
    host_watch_close(&e->err);
    finish(e);
}

void host_exec_failed(host_exec *e, const char *msg)
{
    e->started = 1;
    if (e->act.call) {
        rpc_call_finish(e->act.call, GRPC_STATUS_UNAVAILABLE, msg);
        host_action_release(&e->act);
    }
}

void host_exec_destroy(host_exec *e, const char *why)
{
    host_watch_close(&e->out);
    host_watch_close(&e->err);
    e->started = 1;
    if (e->act.call) {
        rpc_call_finish(e->act.call, GRPC_STATUS_UNAVAILABLE, why);
        host_action_release(&e->act);
    }
}

void host_exec_tick(host_exec *e, int64_t now)
{
    host_action *a = &e->act;
    if (e->exited) {
        /* also without a call (its client left): the pipes close at the end */
        if ((e->out.fd >= 0 || e->err.fd >= 0) && now >= e->exit_grace_us)
            end_grace(e);
        return;
    }
    if (!a->call)
        return;
    if (!a->interrupted_us && a->deadline_us && now >= a->deadline_us) {
        a->timed_out = !a->cancelled;
        if (a->timed_out)
            host_metrics_timeout("exec");
        a->interrupted_us = now;
        host_supervisor_send(e->sb, "KILLEXEC %s", e->id);
    }
}

void host_exec_cancel_call(rpc_call *call)
{
    for (host_sandbox *sb = H.sandboxes; sb; sb = sb->next)
        for (host_exec *e = sb->execs; e; e = e->next)
            if (e->act.call == call && !e->exited) {
                e->act.cancelled = 1;
                e->act.interrupted_us = host_now_us();
                host_supervisor_send(sb, "KILLEXEC %s", e->id);
            }
}
