/* files.c — WriteFile/ReadFile inside a sandbox's workspace, done by the
 * host through /proc/<pid>/root so no code in the sandbox is trusted with
 * it. Every lookup is openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from
 * the workspace directory: "..", absolute paths and symlinks that lead out
 * are refused by the kernel, not by string checks alone. The workspace is a
 * tmpfs, so these are memory operations, not disk I/O. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "host/host.h"

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode,
                       uint64_t resolve)
{
    struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

#define BENEATH (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* "/workspace/a/b" and "a/b" both name a/b; anything else absolute, or with
 * a ".." component, is refused up front with a clear message. */
static int clean_path(const char *path, char *out, size_t cap, sg_err *err)
{
    const char *p = path;
    if (p[0] == '/') {
        if (strncmp(p, "/workspace/", 11) != 0)
            return sg_err_set(err, SG_EINVAL,
                              "path \"%.200s\" is outside the workspace (/workspace)", path);
        p += 11;
    }
    while (*p == '/')
        p++;
    if (!*p || strlen(p) >= cap)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is empty or too long", path);
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return sg_err_set(err, SG_EINVAL, "path \"%.200s\" has a \"..\" component", path);
        s += n + (e ? 1 : 0);
    }
    snprintf(out, cap, "%s", p);
    return 0;
}

static int open_workspace(host_sandbox *sb, sg_err *err)
{
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)sb->pid);
    int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return sg_err_errno(err, SG_EUNAVAIL, "sandbox %s: open(%s)", sb->id, root);
    int wfd = sys_openat2(rfd, "workspace", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0,
                          RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS);
    close(rfd);
    if (wfd < 0)
        return sg_err_errno(err, SG_EUNAVAIL, "sandbox %s: open workspace", sb->id);
    return wfd;
}

static int path_error(const char *path, int code_errno, sg_err *err)
{
    errno = code_errno;
    if (code_errno == EXDEV || code_errno == ELOOP)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" leads outside the workspace "
                                          "(through a symlink or mount); refused", path);
    if (code_errno == ENOENT)
        return sg_err_set(err, SG_ENOTFOUND, "no file \"%.200s\" in the workspace", path);
    if (code_errno == EISDIR)
        return sg_err_set(err, SG_EINVAL, "\"%.200s\" is a directory", path);
    if (code_errno == ENOSPC || code_errno == EDQUOT || code_errno == EFBIG)
        return sg_err_set(err, SG_EQUOTA, "workspace quota exceeded writing \"%.200s\"", path);
    return sg_err_errno(err, SG_EINVAL, "\"%.200s\"", path);
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

int host_file_write(host_sandbox *sb, const char *path, const uint8_t *data, size_t len,
                    uint32_t mode, sg_err *err)
{
    char rel[1024];
    if (clean_path(path, rel, sizeof rel, err) != 0)
        return err->code;
    if (len > sb->limits.max_file_bytes)
        return sg_err_set(err, SG_EQUOTA, "file is %zu bytes; the limit is %llu", len,
                          (unsigned long long)sb->limits.max_file_bytes);
    int wfd = open_workspace(sb, err);
    if (wfd < 0)
        return err->code;
    uid_t uid = H.cfg.uid_base + sb->slot;
    int rc = make_parents(wfd, rel, uid, err);
    if (rc != 0) {
        close(wfd);
        return rc;
    }
    int fd = sys_openat2(wfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                         (mode ? mode : 0644) & 0777, BENEATH);
    if (fd < 0) {
        rc = path_error(path, errno, err);
        close(wfd);
        return rc;
    }
    fchown(fd, uid, uid);
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = path_error(path, n < 0 ? errno : ENOSPC, err);
            break;
        }
        off += (size_t)n;
    }
    close(fd);
    close(wfd);
    return rc;
}

int host_file_read(host_sandbox *sb, const char *path, uint64_t max, uint8_t **data,
                   size_t *len, sg_err *err)
{
    char rel[1024];
    if (clean_path(path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = open_workspace(sb, err);
    if (wfd < 0)
        return err->code;
    int fd = sys_openat2(wfd, rel, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0, BENEATH);
    int e = errno;
    close(wfd);
    if (fd < 0)
        return path_error(path, e, err);
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sg_err_set(err, SG_EINVAL, "\"%.200s\" is not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return sg_err_set(err, SG_EQUOTA, "file is %lld bytes; the limit is %llu",
                          (long long)st.st_size, (unsigned long long)max);
    }
    *data = malloc((size_t)st.st_size + 1);
    size_t off = 0;
    while (off < (size_t)st.st_size) {
        ssize_t n = read(fd, *data + off, (size_t)st.st_size - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    close(fd);
    *len = off;
    return 0;
}
