/* file_jobs.c — the file workers: WriteFile and ReadFile run here, on a few
 * threads of their own, never on a gRPC thread or under H.mu. A sandbox
 * shapes its workspace, so a file call must not be able to stall anyone
 * else: the handler copies what the job needs (the sandbox's pid, a dup of
 * its pidfd, the uid, the limit) under H.mu, queues it and returns; a
 * worker does the I/O (files.c) and answers the call. The queue is
 * bounded (jobs and bytes in total, jobs per sandbox): past the bound a call is answered
 * UNAVAILABLE at once, and a job whose deadline passed while it waited is
 * answered DEADLINE_EXCEEDED without touching the workspace. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/core/files.h"

#define FILE_WORKERS 2
#define FILE_QUEUE_MAX 32      /* jobs waiting, all sandboxes */
#define FILE_SANDBOX_MAX 4     /* jobs waiting or running, one sandbox */
#define FILE_BYTES_MAX (128u << 20)   /* WriteFile data held by waiting jobs, all sandboxes */
#define FILE_JOB_MAX_US (30 * 1000000LL)   /* however long the call's deadline */

typedef struct file_job {
    struct file_job *next;
    int write;
    rpc_call *call;            /* owned ref */
    host_file_target t;        /* t.pidfd owned */
    char *path;                /* owned */
    uint8_t *data;             /* owned (write): taken from the request */
    size_t len;
    uint32_t mode;
    uint64_t max;              /* read: the sandbox's max_file_bytes */
    int64_t deadline_us;       /* monotonic */
} file_job;

static struct {
    pthread_mutex_t mu;        /* guards the fields below only; never held over I/O */
    pthread_cond_t cv;
    file_job *head, *tail;
    size_t queued;
    size_t bytes;              /* data of the waiting jobs */
    file_job *running[FILE_WORKERS];
    pthread_t thr[FILE_WORKERS];
    int n_thr;
    int stopping;
} Q = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void job_free(file_job *j)
{
    if (j->t.pidfd >= 0)
        close(j->t.pidfd);
    if (j->call)
        rpc_call_unref(j->call);
    free(j->path);
    free(j->data);
    free(j);
}

static void touch(const char *id)
{
    pthread_mutex_lock(&H.mu);
    host_sandbox *sb = host_sandbox_find(id);
    if (sb)
        sb->last_active_ms = host_wall_ms();
    pthread_mutex_unlock(&H.mu);
}

static void run_job(file_job *j)
{
    sg_err err;
    if (host_now_us() >= j->deadline_us) {
        sg_err_set(&err, SG_ETIMEOUT, "the call's deadline passed while it waited for the host");
        rpc_call_fail(j->call, &err);
        return;
    }
    if (j->write) {
        if (host_file_write(&j->t, j->path, j->data, j->len, j->mode, j->deadline_us, &err) != 0) {
            rpc_call_fail(j->call, &err);
            return;
        }
        Sandgate__V1__WriteFileResponse out;
        sandgate__v1__write_file_response__init(&out);
        out.bytes_written = j->len;
        rpc_call_reply(j->call, &out.base);
    } else {
        uint8_t *data = NULL;
        size_t len = 0;
        if (host_file_read(&j->t, j->path, j->max, j->deadline_us, &data, &len, &err) != 0) {
            rpc_call_fail(j->call, &err);
            return;
        }
        Sandgate__V1__ReadFileResponse out;
        sandgate__v1__read_file_response__init(&out);
        out.data.data = data;
        out.data.len = len;
        rpc_call_reply(j->call, &out.base);
        free(data);
    }
    touch(j->t.id);
}

static void *worker_main(void *arg)
{
    int slot = (int)(intptr_t)arg;
    pthread_mutex_lock(&Q.mu);
    for (;;) {
        while (!Q.head && !Q.stopping)
            pthread_cond_wait(&Q.cv, &Q.mu);
        if (Q.stopping)
            break;
        file_job *j = Q.head;
        Q.head = j->next;
        if (!Q.head)
            Q.tail = NULL;
        Q.queued--;
        Q.bytes -= j->len;
        Q.running[slot] = j;
        pthread_mutex_unlock(&Q.mu);
        run_job(j);
        pthread_mutex_lock(&Q.mu);
        Q.running[slot] = NULL;
        job_free(j);
    }
    pthread_mutex_unlock(&Q.mu);
    return NULL;
}

int host_files_start(sg_err *err)
{
    for (int i = 0; i < FILE_WORKERS; i++) {
        if (pthread_create(&Q.thr[i], NULL, worker_main, (void *)(intptr_t)i) != 0)
            return sg_err_errno(err, SG_EINTERNAL, "pthread_create(file worker)");
        Q.n_thr++;
    }
    return 0;
}

void host_files_stop(void)
{
    pthread_mutex_lock(&Q.mu);
    Q.stopping = 1;
    pthread_cond_broadcast(&Q.cv);
    file_job *j = Q.head;
    Q.head = Q.tail = NULL;
    Q.queued = 0;
    Q.bytes = 0;
    pthread_mutex_unlock(&Q.mu);
    for (int i = 0; i < Q.n_thr; i++)
        pthread_join(Q.thr[i], NULL);
    Q.n_thr = 0;
    while (j) {
        file_job *n = j->next;
        sg_err err;
        sg_err_set(&err, SG_EUNAVAIL, "the host is shutting down");
        rpc_call_fail(j->call, &err);
        job_free(j);
        j = n;
    }
}

/* Jobs of sandbox id waiting or running; Q.mu held. */
static size_t jobs_of(const char *id)
{
    size_t n = 0;
    for (file_job *j = Q.head; j; j = j->next)
        n += strcmp(j->t.id, id) == 0;
    for (int i = 0; i < FILE_WORKERS; i++)
        n += Q.running[i] && strcmp(Q.running[i]->t.id, id) == 0;
    return n;
}

static int64_t deadline_of(rpc_call *c)
{
    double left = rpc_deadline_left(rpc_call_deadline(c));
    int64_t now = host_now_us();
    if (left * 1e6 >= (double)FILE_JOB_MAX_US)
        return now + FILE_JOB_MAX_US;
    return now + (int64_t)(left > 0 ? left * 1e6 : 0);
}

/* H.mu held (sb is live). Takes ownership of path and data in every case. */
static int submit(host_sandbox *sb, rpc_call *c, int write, char *path, uint8_t *data,
                  size_t len, uint32_t mode, sg_err *err)
{
    file_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(path);
        free(data);
        return sg_err_set(err, SG_EUNAVAIL, "the host is out of memory; retry");
    }
    j->write = write;
    j->path = path;
    j->data = data;
    j->len = len;
    j->mode = mode;
    j->max = sb->limits.max_file_bytes;
    j->deadline_us = deadline_of(c);
    j->t.pidfd = -1;
    snprintf(j->t.id, sizeof j->t.id, "%s", sb->id);
    j->t.pid = sb->pid;
    j->t.uid = H.cfg.uid_base + sb->slot;
    if (!path || sb->pid <= 0 || sb->pidfd < 0 ||
        (j->t.pidfd = fcntl(sb->pidfd, F_DUPFD_CLOEXEC, 0)) < 0) {
        free(j->path);
        free(j->data);
        if (j->t.pidfd >= 0)
            close(j->t.pidfd);
        free(j);
        return sg_err_set(err, SG_EUNAVAIL, "sandbox %s cannot take file calls now; retry", sb->id);
    }
    pthread_mutex_lock(&Q.mu);
    const char *why = Q.stopping                     ? "the host is shutting down"
                      : Q.queued >= FILE_QUEUE_MAX || Q.bytes + len > FILE_BYTES_MAX
                          ? "the host is busy with file calls; retry"
                      : jobs_of(sb->id) >= FILE_SANDBOX_MAX
                          ? "this sandbox has too many file calls in flight; retry"
                          : NULL;
    if (!why) {
        j->call = rpc_call_ref(c);
        if (Q.tail)
            Q.tail->next = j;
        else
            Q.head = j;
        Q.tail = j;
        Q.queued++;
        Q.bytes += len;
        pthread_cond_signal(&Q.cv);
    }
    pthread_mutex_unlock(&Q.mu);
    if (why) {
        job_free(j);   /* no call ref taken: j->call is NULL */
        return sg_err_set(err, SG_EUNAVAIL, "%s", why);
    }
    return 0;
}

int host_files_submit_write(host_sandbox *sb, rpc_call *c, Sandgate__V1__WriteFileRequest *r,
                            sg_err *err)
{
    if (r->data.len > sb->limits.max_file_bytes)
        return sg_err_set(err, SG_EQUOTA, "data is %zu bytes; the sandbox's max_file_bytes is %llu",
                          r->data.len, (unsigned long long)sb->limits.max_file_bytes);
    uint8_t *data = r->data.data;
    size_t len = r->data.len;
    r->data.data = NULL;   /* ours now: free_unpacked skips a NULL field */
    r->data.len = 0;
    return submit(sb, c, 1, strdup(r->path), data, len, r->mode, err);
}

int host_files_submit_read(host_sandbox *sb, rpc_call *c, const Sandgate__V1__ReadFileRequest *r,
                           sg_err *err)
{
    return submit(sb, c, 0, strdup(r->path), NULL, 0, 0, err);
}
