/* file_jobs.c — the file workers: every file call runs here (WriteFile,
 * ReadFile, ListFiles, ..., each DownloadFile chunk, a watch's setup), on a few
 * threads of their own, never on a gRPC thread or under H.mu. A sandbox
 * shapes its workspace, so a file call must not be able to stall anyone
 * else: the handler copies what the job needs (the sandbox's pid, a dup of
 * its pidfd, the uid, the limit) under H.mu, queues it and returns; a
 * worker does the I/O (files.c) and answers the call. The queue is
 * bounded (jobs and bytes in total, jobs per sandbox): past the bound a call is answered
 * UNAVAILABLE at once, and a job whose deadline passed while it waited is
 * answered DEADLINE_EXCEEDED without touching the workspace. */
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
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
    int op;                    /* HOST_FOP_* */
    rpc_call *call;            /* owned ref */
    host_file_target t;        /* t.pidfd owned */
    char *path;                /* owned */
    uint8_t *data;             /* owned (write): taken from the request */
    size_t len;
    uint32_t mode;
    uint64_t max;              /* read: the sandbox's max_file_bytes */
    int64_t deadline_us;       /* monotonic */
    /* DownloadFile, between chunks (the job is requeued after each send) */
    int fd;                    /* owned; -1 until opened */
    uint64_t pos, end, size;
    uint32_t chunk;
} file_job;

static struct {
    pthread_mutex_t mu;        /* guards the fields below only; never held over I/O */
    pthread_cond_t cv;
    file_job *head, *tail;
    size_t queued;
    size_t bytes;              /* data of the waiting jobs */
    /* sandbox ids of the running jobs (copies: a download job may be freed
     * by its send callback before its worker comes back) */
    char running[FILE_WORKERS][HOST_ID_MAX];
    pthread_t thr[FILE_WORKERS];
    int n_thr;
    int stopping;
} Q = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void job_free(file_job *j)
{
    if (j->fd >= 0)
        close(j->fd);
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

/* The request, decoded again from the call's bytes (host_unpack checked
 * them before the job was queued). */
static ProtobufCMessage *request_of(file_job *j, const ProtobufCMessageDescriptor *d)
{
    size_t len;
    const uint8_t *buf = rpc_call_request(j->call, &len);
    return rpc_unpack(d, buf, len, NULL);
}

static void requeue(file_job *j);

static void on_chunk_sent(void *arg, int ok)
{
    file_job *j = arg;
    if (!ok) {   /* the client is gone */
        /* Still a status: rpc/call.c holds every dispatched call until its
         * status batch completes, so a call freed without one leaks with its
         * grpc_call (sandgate_host_calls_total never counts it; LSan reports
         * it at exit). To a cancelled call it goes nowhere. */
        rpc_call_finish(j->call, GRPC_STATUS_CANCELLED, "the download ended");
        job_free(j);
        return;
    }
    requeue(j);
}

/* One chunk of a download; 1 = the job continues (it was handed to a send). */
static int download_step(file_job *j, sg_err *err)
{
    if (j->fd < 0) {
        const Sandgate__V1__DownloadFileRequest *r = (const Sandgate__V1__DownloadFileRequest *)
            request_of(j, &sandgate__v1__download_file_request__descriptor);
        if (!r)
            return sg_err_set(err, SG_EINTERNAL, "request vanished");
        int rc = 0;
        if (r->chunk_bytes > HOST_CHUNK_MAX)
            rc = sg_err_set(err, SG_EINVAL, "chunk_bytes: %u; at most %u", r->chunk_bytes,
                            HOST_CHUNK_MAX);
        else if ((j->fd = host_file_open_read(&j->t, r->path, &j->size, err)) < 0)
            rc = err->code;
        else if (r->offset > j->size)
            rc = sg_err_set(err, SG_EINVAL, "offset: %llu is past the end of \"%.200s\" (%llu "
                            "bytes)", (unsigned long long)r->offset, r->path,
                            (unsigned long long)j->size);
        j->pos = r->offset;
        j->end = r->length && r->length < j->size - j->pos ? j->pos + r->length : j->size;
        j->chunk = r->chunk_bytes ? r->chunk_bytes : (1u << 20);
        protobuf_c_message_free_unpacked((ProtobufCMessage *)r, NULL);
        if (rc != 0)
            return rc;
    } else if (syscall(SYS_pidfd_send_signal, j->t.pidfd, 0, NULL, 0) != 0) {
        return sg_err_set(err, SG_ENOTFOUND, "sandbox %s is gone", j->t.id);
    }
    size_t want = j->end - j->pos < j->chunk ? (size_t)(j->end - j->pos) : j->chunk;
    uint8_t *buf = malloc(want ? want : 1);
    if (!buf)
        return sg_err_set(err, SG_EUNAVAIL, "the host is out of memory; retry");
    size_t got = 0;
    while (got < want) {
        ssize_t n = pread(j->fd, buf + got, want - got, (off_t)(j->pos + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;   /* shrank meanwhile: this is the end */
        got += (size_t)n;
    }
    Sandgate__V1__FileChunk ch;
    sandgate__v1__file_chunk__init(&ch);
    ch.offset = j->pos;
    ch.data.data = buf;
    ch.data.len = got;
    ch.size = j->size;
    j->pos += got;
    ch.last = got < want || j->pos >= j->end;
    grpc_byte_buffer *bb = rpc_pack(&ch.base);
    free(buf);
    if (ch.last) {
        rpc_call_finish_msg(j->call, bb, GRPC_STATUS_OK, NULL);
        return 0;
    }
    if (rpc_call_send(j->call, bb, on_chunk_sent, j) != 0)
        return 0;   /* the call already ended */
    return 1;
}

/* 1 = the job lives on (a download between chunks, a watch handed over). */
static int run_job(file_job *j)
{
    sg_err err;
    if (host_now_us() >= j->deadline_us) {
        sg_err_set(&err, SG_ETIMEOUT, "the call's deadline passed while it waited for the host");
        rpc_call_fail(j->call, &err);
        return 0;
    }
    int rc = 0;
    ProtobufCMessage *m = NULL;
    switch (j->op) {
    case HOST_FOP_WRITE:
        if ((rc = host_file_write(&j->t, j->path, j->data, j->len, j->mode, j->deadline_us,
                                  &err)) == 0) {
            Sandgate__V1__WriteFileResponse out;
            sandgate__v1__write_file_response__init(&out);
            out.bytes_written = j->len;
            rpc_call_reply(j->call, &out.base);
        }
        break;
    case HOST_FOP_READ: {
        uint8_t *data = NULL;
        size_t len = 0;
        if ((rc = host_file_read(&j->t, j->path, j->max, j->deadline_us, &data, &len, &err)) ==
            0) {
            Sandgate__V1__ReadFileResponse out;
            sandgate__v1__read_file_response__init(&out);
            out.data.data = data;
            out.data.len = len;
            rpc_call_reply(j->call, &out.base);
            free(data);
        }
        break;
    }
    case HOST_FOP_LIST:
        if ((m = request_of(j, &sandgate__v1__list_files_request__descriptor)))
            rc = host_file_list(&j->t, (void *)m, j->deadline_us, j->call, &err);
        break;
    case HOST_FOP_STAT:
        if ((m = request_of(j, &sandgate__v1__stat_file_request__descriptor)))
            rc = host_file_stat(&j->t, (void *)m, j->call, &err);
        break;
    case HOST_FOP_MKDIR:
        if ((m = request_of(j, &sandgate__v1__make_dir_request__descriptor)))
            rc = host_file_mkdir(&j->t, (void *)m, j->call, &err);
        break;
    case HOST_FOP_REMOVE:
        if ((m = request_of(j, &sandgate__v1__remove_file_request__descriptor)))
            rc = host_file_remove(&j->t, (void *)m, j->deadline_us, j->call, &err);
        break;
    case HOST_FOP_RENAME:
        if ((m = request_of(j, &sandgate__v1__rename_file_request__descriptor)))
            rc = host_file_rename(&j->t, (void *)m, j->call, &err);
        break;
    case HOST_FOP_WRITE_AT:
        if ((m = request_of(j, &sandgate__v1__host_write_at_request__descriptor))) {
            const Sandgate__V1__HostWriteAtRequest *r = (const void *)m;
            uint64_t size = 0;
            if ((rc = host_file_write_at(&j->t, r, j->deadline_us, &size, &err)) == 0) {
                Sandgate__V1__UploadFileResponse out;
                sandgate__v1__upload_file_response__init(&out);
                out.size = size;
                out.bytes_written = r->data.len;
                rpc_call_reply(j->call, &out.base);
            }
        }
        break;
    case HOST_FOP_DOWNLOAD:
        rc = download_step(j, &err);
        if (rc == 1)
            return 1;
        break;
    case HOST_FOP_WATCH:
        if ((m = request_of(j, &sandgate__v1__watch_files_request__descriptor))) {
            rc = host_fwatch_begin(&j->t, (void *)m, j->call, &err);
            if (rc == 0)
                j->t.pidfd = -1;   /* the watch owns it now */
        }
        break;
    }
    if (j->op >= HOST_FOP_LIST && j->op != HOST_FOP_DOWNLOAD && !m)
        rc = sg_err_set(&err, SG_EINTERNAL, "request vanished");
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    if (rc != 0) {
        rpc_call_fail(j->call, &err);
        return 0;
    }
    touch(j->t.id);
    return 0;
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
        snprintf(Q.running[slot], HOST_ID_MAX, "%s", j->t.id);
        pthread_mutex_unlock(&Q.mu);
        int keep = run_job(j);
        pthread_mutex_lock(&Q.mu);
        Q.running[slot][0] = 0;
        if (!keep)
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

/* A download's next chunk, after its last one went out (a loop thread). */
static void requeue(file_job *j)
{
    pthread_mutex_lock(&Q.mu);
    int stopping = Q.stopping;
    if (!stopping) {
        j->next = NULL;
        if (Q.tail)
            Q.tail->next = j;
        else
            Q.head = j;
        Q.tail = j;
        Q.queued++;
        pthread_cond_signal(&Q.cv);
    }
    pthread_mutex_unlock(&Q.mu);
    if (stopping) {
        sg_err err;
        sg_err_set(&err, SG_EUNAVAIL, "the host is shutting down");
        rpc_call_fail(j->call, &err);
        job_free(j);
    }
}

/* Jobs of sandbox id waiting or running; Q.mu held. */
static size_t jobs_of(const char *id)
{
    size_t n = 0;
    for (file_job *j = Q.head; j; j = j->next)
        n += strcmp(j->t.id, id) == 0;
    for (int i = 0; i < FILE_WORKERS; i++)
        n += strcmp(Q.running[i], id) == 0;
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
static int submit(host_sandbox *sb, rpc_call *c, int op, char *path, uint8_t *data,
                  size_t len, uint32_t mode, sg_err *err)
{
    file_job *j = calloc(1, sizeof *j);
    if (!j) {
        free(path);
        free(data);
        return sg_err_set(err, SG_EUNAVAIL, "the host is out of memory; retry");
    }
    j->op = op;
    j->fd = -1;
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
    if ((op <= HOST_FOP_READ && !path) || sb->pid <= 0 || sb->pidfd < 0 ||
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
    return submit(sb, c, HOST_FOP_WRITE, strdup(r->path), data, len, r->mode, err);
}

int host_files_submit_read(host_sandbox *sb, rpc_call *c, const Sandgate__V1__ReadFileRequest *r,
                           sg_err *err)
{
    return submit(sb, c, HOST_FOP_READ, strdup(r->path), NULL, 0, 0, err);
}

int host_files_submit(host_sandbox *sb, rpc_call *c, int op, sg_err *err)
{
    return submit(sb, c, op, NULL, NULL, 0, 0, err);
}
