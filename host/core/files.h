/* files.h — WriteFile/ReadFile. files.c does the I/O on a sandbox's
 * workspace; file_jobs.c runs it on worker threads of its own, so no file
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

/* file_jobs.c */
int host_files_start(sg_err *err);
/* Joins the workers; jobs still queued are answered UNAVAILABLE. */
void host_files_stop(void);
/* With H.mu held, from the handlers: queue the call for a worker, which
 * answers it. WriteFile's data is taken from r (r->data emptied). On
 * failure nothing is queued and err says why (the caller answers). */
int host_files_submit_write(host_sandbox *sb, rpc_call *c, Sandgate__V1__WriteFileRequest *r,
                            sg_err *err);
int host_files_submit_read(host_sandbox *sb, rpc_call *c, const Sandgate__V1__ReadFileRequest *r,
                           sg_err *err);

#endif
