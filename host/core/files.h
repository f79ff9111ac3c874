/* files.h — the workspace file calls. files.c (read, write, chunks) and
 * file_ops.c (list, stat, mkdir, remove, rename) do the I/O on a sandbox's
 * workspace; watch.c watches it (inotify); file_jobs.c runs it on worker threads of its own, so no file
 * call ever holds H.mu or a gRPC thread while it touches the workspace. */
#ifndef SG_HOST_FILES_H
#define SG_HOST_FILES_H

#include <stdint.h>
#include <sys/types.h>

#include "host/host.h"

/* What a worker needs of a sandbox, copied under H.mu: the sandbox may be
 * killed and freed while the job runs. */
typedef struct host_file_target {
    char id[HOST_ID_MAX];
    pid_t pid;        /* the sandbox's pid 1 */
    int pidfd;        /* owned by the job: a dup of sb->pidfd, proves pid is still ours */
    uid_t uid;        /* owner of created files and directories */
} host_file_target;

/* files.c; H.mu not held. deadline_us (monotonic) bounds the copy loop. */
int host_file_write(const host_file_target *t, const char *path, const uint8_t *data,
                    size_t len, uint32_t mode, int64_t deadline_us, sg_err *err);
int host_file_read(const host_file_target *t, const char *path, uint64_t max,
                   int64_t deadline_us, uint8_t **data, size_t *len, sg_err *err);

/* files.c: one chunk of an upload; *size is the file's size after it. */
int host_file_write_at(const host_file_target *t, const Sandgate__V1__HostWriteAtRequest *r,
                       int64_t deadline_us, uint64_t *size, sg_err *err);
/* files.c: a regular file opened for reading (nothing else is ever
 * opened); returns the fd, or <0 with err set. */
int host_file_open_read(const host_file_target *t, const char *path, uint64_t *size,
                        sg_err *err);
/* file_ops.c: each answers c on success; nonzero (err set) otherwise. */
int host_file_list(const host_file_target *t, const Sandgate__V1__ListFilesRequest *r,
                   int64_t deadline_us, rpc_call *c, sg_err *err);
int host_file_stat(const host_file_target *t, const Sandgate__V1__StatFileRequest *r,
                   rpc_call *c, sg_err *err);
int host_file_mkdir(const host_file_target *t, const Sandgate__V1__MakeDirRequest *r,
                    rpc_call *c, sg_err *err);
int host_file_remove(const host_file_target *t, const Sandgate__V1__RemoveFileRequest *r,
                     int64_t deadline_us, rpc_call *c, sg_err *err);
int host_file_rename(const host_file_target *t, const Sandgate__V1__RenameFileRequest *r,
                     rpc_call *c, sg_err *err);

/* watch.c: WatchFiles. begin runs on a file worker: it checks the
 * directory, sets the inotify watches and hands the call to the watch
 * thread, which streams events until the sandbox ends (t->pidfd becomes
 * readable; taken over on success) or the client goes. */
int host_fwatch_begin(const host_file_target *t, const Sandgate__V1__WatchFilesRequest *r,
                     rpc_call *c, sg_err *err);
int host_fwatch_start(sg_err *err);
void host_fwatch_stop(void);

/* Largest data of one upload or download message. */
#define HOST_CHUNK_MAX (4u << 20)

enum {
    HOST_FOP_WRITE,
    HOST_FOP_READ,
    HOST_FOP_LIST,
    HOST_FOP_STAT,
    HOST_FOP_MKDIR,
    HOST_FOP_REMOVE,
    HOST_FOP_RENAME,
    HOST_FOP_WRITE_AT,
    HOST_FOP_DOWNLOAD,
    HOST_FOP_WATCH,
};

/* file_jobs.c */
int host_files_start(sg_err *err);
/* Joins the workers; jobs still queued are answered UNAVAILABLE. */
void host_files_stop(void);
/* With H.mu held, from the handlers: queue the call for a worker, which
 * answers it. WriteFile's data is taken from r (r->data emptied). On
 * failure nothing is queued and err says why (the caller answers). */
int host_files_submit_write(host_sandbox *sb, rpc_call *c, Sandgate__V1__WriteFileRequest *r,
                            sg_err *err);
/* Any other op: the worker decodes the request from c's bytes again. */
int host_files_submit(host_sandbox *sb, rpc_call *c, int op, sg_err *err);
int host_files_submit_read(host_sandbox *sb, rpc_call *c, const Sandgate__V1__ReadFileRequest *r,
                           sg_err *err);

#endif
