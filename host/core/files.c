/* files.c — WriteFile/ReadFile inside a sandbox's workspace, done by the
 * host through /proc/<pid>/root so no code in the sandbox is trusted with
 * it. Every lookup is openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from
 * the workspace directory: "..", absolute paths and symlinks that lead out
 * are refused by the kernel, not by string checks alone (path.c only gives
 * the clear message first).
 *
 * Everything in the workspace is the sandbox's to shape, so nothing here
 * may wait on it: files are opened O_NONBLOCK | O_NOFOLLOW (a FIFO without
 * a reader answers ENXIO instead of blocking the open), and anything that
 * is not a regular file once open (FIFO, socket, device) is refused before
 * a byte moves. The workspace is a tmpfs, so a regular file's read or
 * write is a memory copy; it still goes in chunks with a deadline. Runs on
 * the file workers (file_jobs.c), never with H.mu held. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "host/core/files.h"
#include "host/core/path.h"

#define CHUNK (1u << 20)

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode,
                       uint64_t resolve)
{
    struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

#define BENEATH (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static int open_workspace(const host_file_target *t, sg_err *err)
{
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)t->pid);
    int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0) {
        sg_log_warn("sandbox %s: open(%s): %s", t->id, root, strerror(errno));
        return sg_err_set(err, SG_ENOTFOUND, "sandbox %s is gone", t->id);
    }
    /* The pid may have been reused since the sandbox died: its pidfd still
     * naming a live process after the open proves rfd is the sandbox's. */
    if (syscall(SYS_pidfd_send_signal, t->pidfd, 0, NULL, 0) != 0) {
        close(rfd);
        return sg_err_set(err, SG_ENOTFOUND, "sandbox %s is gone", t->id);
    }
    int wfd = sys_openat2(rfd, "workspace", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS);
    int e = errno;
    close(rfd);
    if (wfd < 0) {
        sg_log_warn("sandbox %s: open workspace: %s", t->id, strerror(e));
        return sg_err_set(err, SG_EUNAVAIL, "sandbox %s: the workspace cannot be opened", t->id);
    }
    return wfd;
}

static int not_regular(const char *path, sg_err *err)
{
    return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is not a regular file (a FIFO, socket "
                                      "or device); only regular files can be read or written",
                      path);
}

static int path_error(const char *path, int code_errno, sg_err *err)
{
    if (code_errno == EXDEV || code_errno == ELOOP)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" leads outside the workspace "
                                          "(through a symlink or mount); refused", path);
    if (code_errno == ENOENT)
        return sg_err_set(err, SG_ENOTFOUND, "no file \"%.200s\" in the workspace", path);
    if (code_errno == EISDIR)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is a directory", path);
    if (code_errno == ENOTDIR)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\": a parent is not a directory", path);
    /* ENXIO: a FIFO with no reader or a socket; EACCES on a nodev mount */
    if (code_errno == ENXIO || code_errno == ENODEV || code_errno == EOPNOTSUPP)
        return not_regular(path, err);
    if (code_errno == ENOSPC || code_errno == EDQUOT || code_errno == EFBIG)
        return sg_err_set(err, SG_EQUOTA, "workspace quota exceeded writing \"%.200s\"", path);
    if (code_errno == ENAMETOOLONG)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" has a component over 255 bytes", path);
    /* EACCES, EPERM, EROFS, ...: the sandbox made it so; say no, log why */
    sg_log_warn("file \"%.200s\": %s", path, strerror(code_errno));
    return sg_err_set(err, SG_EINVAL, "path \"%.200s\" cannot be accessed", path);
}

/* mkdir -p for the parents of rel, each step beneath the workspace. */
static int make_parents(int wfd, char *rel, uid_t uid, sg_err *err)
{
    for (char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        int d = sys_openat2(wfd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, BENEATH);
        if (d < 0 && errno == ENOENT) {
            /* The parent of this step was already checked beneath. */
            if (mkdirat(wfd, rel, 0755) == 0) {
                fchownat(wfd, rel, uid, uid, AT_SYMLINK_NOFOLLOW);
                d = sys_openat2(wfd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC, 0, BENEATH);
            }
        }
        int e = errno;
        *s = '/';
        if (d < 0)
            return path_error(rel, e, err);
        close(d);
    }
    return 0;
}

static int past(int64_t deadline_us, const char *path, sg_err *err)
{
    if (host_now_us() < deadline_us)
        return 0;
    return sg_err_set(err, SG_ETIMEOUT, "file \"%.200s\": the call's deadline passed", path);
}

int host_file_write(const host_file_target *t, const char *path, const uint8_t *data,
                    size_t len, uint32_t mode, int64_t deadline_us, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (host_path_clean(path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    int rc = make_parents(wfd, rel, t->uid, err);
    if (rc != 0) {
        close(wfd);
        return rc;
    }
    /* No O_TRUNC: truncate only once fstat says it is a regular file. */
    int fd = sys_openat2(wfd, rel, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                         (mode ? mode : 0644) & 0777, BENEATH);
    int e = errno;
    close(wfd);
    if (fd < 0)
        return path_error(path, e, err);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return not_regular(path, err);
    }
    if (ftruncate(fd, 0) != 0) {
        rc = path_error(path, errno, err);
        close(fd);
        return rc;
    }
    fchown(fd, t->uid, t->uid);
    size_t off = 0;
    while (off < len && rc == 0) {
        if ((rc = past(deadline_us, path, err)) != 0)
            break;
        size_t want = len - off < CHUNK ? len - off : CHUNK;
        ssize_t n = write(fd, data + off, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = path_error(path, n < 0 ? errno : ENOSPC, err);
            break;
        }
        off += (size_t)n;
    }
    close(fd);
    return rc;
}

int host_file_read(const host_file_target *t, const char *path, uint64_t max,
                   int64_t deadline_us, uint8_t **data, size_t *len, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    *data = NULL;
    *len = 0;
    if (host_path_clean(path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    int fd = sys_openat2(wfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0, BENEATH);
    int e = errno;
    close(wfd);
    if (fd < 0)
        return path_error(path, e, err);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        e = errno;
        close(fd);
        return path_error(path, e, err);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode) ? path_error(path, EISDIR, err) : not_regular(path, err);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return sg_err_set(err, SG_EQUOTA, "file \"%.200s\" is %lld bytes; the limit is %llu",
                          path, (long long)st.st_size, (unsigned long long)max);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return sg_err_set(err, SG_EQUOTA, "no memory for %zu bytes of \"%.200s\"", size, path);
    }
    size_t off = 0;
    int rc = 0;
    while (off < size) {
        if ((rc = past(deadline_us, path, err)) != 0)
            break;
        size_t want = size - off < CHUNK ? size - off : CHUNK;
        ssize_t n = read(fd, buf + off, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;   /* shrank meanwhile: what is there */
        off += (size_t)n;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = off;
    return 0;
}
