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
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "host/core/files_internal.h"

#define CHUNK (1u << 20)

int hf_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve)
{
    struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

#define BENEATH HF_BENEATH

int hf_open_workspace(const host_file_target *t, sg_err *err)
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
    int wfd = hf_openat2(rfd, "workspace", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0,
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

int hf_path_error(const char *path, int code_errno, sg_err *err)
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

int hf_is_special(mode_t mode)
{
    return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}

int hf_special(const char *path, mode_t mode, sg_err *err)
{
    const char *what = S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket" : "a device";
    return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is not a regular file (%s); file calls "
                      "never open one", path, what);
}

/* Each component of rel's parent opened from the last one's fd (beneath
 * the workspace), made when missing and make is set. mkdirat and the next
 * open are relative to an fd already proven inside, so a component the
 * sandbox swaps for a symlink meanwhile is refused by the next open
 * (RESOLVE_BENEATH) instead of followed. */
int hf_open_parent(int wfd, const char *rel, const char **base, int make, uid_t uid,
                   const char *shown, sg_err *err)
{
    char name[256];
    int d = fcntl(wfd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return sg_err_errno(err, SG_EUNAVAIL, "dup(workspace)");
    const char *p = rel;
    for (const char *s = strchr(p, '/'); s; p = s + 1, s = strchr(p, '/')) {
        size_t n = (size_t)(s - p);
        if (n >= sizeof name) {
            close(d);
            return hf_path_error(shown, ENAMETOOLONG, err);
        }
        memcpy(name, p, n);
        name[n] = 0;
        int nd = hf_openat2(d, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0, BENEATH);
        if (nd < 0 && errno == ENOENT && make) {
            if (mkdirat(d, name, 0755) == 0 || errno == EEXIST) {
                fchownat(d, name, uid, uid, AT_SYMLINK_NOFOLLOW);
                nd = hf_openat2(d, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0,
                                BENEATH);
            }
        }
        int e = errno;
        close(d);
        if (nd < 0) {
            if (e == ENOENT)
                return sg_err_set(err, SG_ENOTFOUND, "path \"%.200s\": a parent directory "
                                  "does not exist", shown);
            return hf_path_error(shown, e == ELOOP ? ENOTDIR : e, err);
        }
        d = nd;
    }
    *base = p;
    return d;
}


/* A regular file opened for I/O without ever opening anything else: the
 * name is opened O_PATH (which opens nothing: no FIFO's open side effect,
 * no device's open handler), fstat'd, and only a regular file is then
 * reopened through its /proc/self/fd link, which names that inode and no
 * other. create_mode != 0: a missing file is made O_EXCL (a new, empty
 * regular file). */
int hf_open_regular(int dirfd, const char *name, int oflags, mode_t create_mode,
                    const char *shown, sg_err *err)
{
    for (int tries = 0; tries < 3; tries++) {
        int p = hf_openat2(dirfd, name, O_PATH | O_CLOEXEC | O_NOFOLLOW, 0, BENEATH);
        if (p < 0 && errno == ENOENT && create_mode) {
            int fd = hf_openat2(dirfd, name, oflags | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                                create_mode & 0777, BENEATH);
            if (fd >= 0)
                return fd;
            if (errno == EEXIST)
                continue;   /* made meanwhile: look at what it is */
        }
        if (p < 0)
            return hf_path_error(shown, errno, err);
        struct stat st;
        if (fstat(p, &st) != 0) {
            int e = errno;
            close(p);
            return hf_path_error(shown, e, err);
        }
        if (!S_ISREG(st.st_mode)) {
            close(p);
            if (S_ISDIR(st.st_mode))
                return hf_path_error(shown, EISDIR, err);
            if (S_ISLNK(st.st_mode))
                return hf_path_error(shown, ELOOP, err);
            return hf_special(shown, st.st_mode, err);
        }
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", p);
        int fd = open(link, (oflags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC | O_NONBLOCK);
        int e = errno;
        close(p);
        if (fd < 0)
            return hf_path_error(shown, e, err);
        return fd;
    }
    return sg_err_set(err, SG_EUNAVAIL, "path \"%.200s\" keeps changing; retry", shown);
}

int hf_past(int64_t deadline_us, const char *path, sg_err *err)
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
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    const char *base;
    int pfd = hf_open_parent(wfd, rel, &base, 1, t->uid, path, err);
    close(wfd);
    if (pfd < 0)
        return err->code;
    int rc = 0;
    /* No O_TRUNC: truncate only once fstat says it is a regular file. */
    int fd = hf_open_regular(pfd, base, O_WRONLY, mode ? mode : 0644, path, err);
    close(pfd);
    if (fd < 0)
        return err->code;
    if (ftruncate(fd, 0) != 0) {
        rc = hf_path_error(path, errno, err);
        close(fd);
        return rc;
    }
    fchown(fd, t->uid, t->uid);
    size_t off = 0;
    while (off < len && rc == 0) {
        if ((rc = hf_past(deadline_us, path, err)) != 0)
            break;
        size_t want = len - off < CHUNK ? len - off : CHUNK;
        ssize_t n = write(fd, data + off, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = hf_path_error(path, n < 0 ? errno : ENOSPC, err);
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
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    int fd = hf_open_regular(wfd, rel, O_RDONLY, 0, path, err);
    close(wfd);
    if (fd < 0)
        return err->code;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return hf_path_error(path, e, err);
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
        if ((rc = hf_past(deadline_us, path, err)) != 0)
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

/* The workspace's free bytes and size, for the quota's messages. */
static int space_left(int fd, uint64_t *free_b, uint64_t *total_b)
{
    struct statvfs vs;
    if (fstatvfs(fd, &vs) != 0)
        return -1;
    *free_b = (uint64_t)vs.f_bavail * vs.f_frsize;
    *total_b = (uint64_t)vs.f_blocks * vs.f_frsize;
    return 0;
}

static int quota_error(const char *path, uint64_t need, uint64_t free_b, uint64_t total_b,
                       sg_err *err)
{
    return sg_err_set(err, SG_EQUOTA, "workspace quota exceeded writing \"%.200s\": %llu more "
                      "bytes needed, %llu free of the workspace's %llu (limits.disk_bytes)",
                      path, (unsigned long long)need, (unsigned long long)free_b,
                      (unsigned long long)total_b);
}

int host_file_write_at(const host_file_target *t, const Sandgate__V1__HostWriteAtRequest *r,
                       int64_t deadline_us, uint64_t *size_out, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    const char *path = r->path;
    if (host_path_clean(path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    const char *base;
    int pfd = hf_open_parent(wfd, rel, &base, r->first, t->uid, path, err);
    close(wfd);
    if (pfd < 0)
        return err->code;
    int fd = hf_open_regular(pfd, base, O_WRONLY, r->first ? (r->mode ? r->mode : 0644) : 0,
                             path, err);
    close(pfd);
    if (fd < 0)
        return err->code;
    struct stat st;
    int rc = 0, e;
    if (fstat(fd, &st) != 0) {
        rc = hf_path_error(path, errno, err);
        goto out;
    }
    uint64_t free_b = 0, total_b = 0;
    space_left(fd, &free_b, &total_b);
    if (r->first) {
        if ((uint64_t)st.st_size < r->offset) {
            rc = sg_err_set(err, SG_EINVAL, "offset: %llu is past the end of \"%.200s\" (%lld "
                            "bytes); resume from at most its size",
                            (unsigned long long)r->offset, path, (long long)st.st_size);
            goto out;
        }
        /* The announced size must fit in what is free once the file is cut. */
        uint64_t kept = r->offset, had = (uint64_t)st.st_size;
        if (r->size > kept && r->size - kept > free_b + (had - kept)) {
            rc = quota_error(path, r->size - kept, free_b + (had - kept), total_b, err);
            goto out;
        }
        if (ftruncate(fd, (off_t)r->offset) != 0) {
            rc = hf_path_error(path, errno, err);
            goto out;
        }
        fchown(fd, t->uid, t->uid);
        st.st_size = (off_t)r->offset;
        space_left(fd, &free_b, &total_b);
    }
    uint64_t end = r->offset + r->data.len;
    if (end > (uint64_t)st.st_size && end - (uint64_t)st.st_size > free_b) {
        rc = quota_error(path, end - (uint64_t)st.st_size, free_b, total_b, err);
        goto out;
    }
    size_t off = 0;
    while (off < r->data.len) {
        if ((rc = hf_past(deadline_us, path, err)) != 0)
            goto out;
        size_t want = r->data.len - off < CHUNK ? r->data.len - off : CHUNK;
        ssize_t n = pwrite(fd, r->data.data + off, want, (off_t)(r->offset + off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            e = n < 0 ? errno : ENOSPC;
            if (e == ENOSPC || e == EDQUOT) {
                space_left(fd, &free_b, &total_b);
                rc = quota_error(path, r->data.len - off, free_b, total_b, err);
            } else {
                rc = hf_path_error(path, e, err);
            }
            goto out;
        }
        off += (size_t)n;
    }
    if (fstat(fd, &st) == 0)
        *size_out = (uint64_t)st.st_size;
out:
    close(fd);
    return rc;
}

int host_file_open_read(const host_file_target *t, const char *path, uint64_t *size,
                        sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (host_path_clean(path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    int fd = hf_open_regular(wfd, rel, O_RDONLY, 0, path, err);
    close(wfd);
    if (fd < 0)
        return err->code;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = hf_path_error(path, errno, err);
        close(fd);
        return rc;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}
