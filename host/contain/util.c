/* util.c — the small helpers every contain step shares: filling errbuf,
 * writing and reading short files (cgroup knobs, /etc stubs), mkdir -p and
 * path joining. No policy lives here. */
#include "host/contain/steps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* errbuf gets "what: strerror(errno)"; errno is preserved for the caller. */
int sgc_fail(char *err, size_t len, const char *fmt, ...)
{
    int saved = errno;
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err, len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < len)
            snprintf(err + n, len - (size_t)n, ": %s", strerror(saved));
    }
    errno = saved;
    return -1;
}

/* Like sgc_fail but without errno (input errors). */
int sgc_failx(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    errno = EINVAL;
    return -1;
}

/* One write(2): cgroup knobs must get the whole value in a single write. */
int sgc_write_file(const char *path, const char *data, char *err, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return sgc_fail(err, len, "open(\"%s\", O_WRONLY)", path);
    size_t n = strlen(data);
    ssize_t w = write(fd, data, n);
    if (w < 0 || (size_t)w != n) {
        if (w >= 0)
            errno = EIO;
        sgc_fail(err, len, "write(\"%s\", \"%s\")", path, data);
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    close(fd);
    return 0;
}

/* Reads up to size-1 bytes and NUL-terminates; returns the length or -1. */
ssize_t sgc_read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < size) {
        ssize_t r = read(fd, buf + got, size - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

int sgc_mkdir_p(const char *path, mode_t mode, char *err, size_t len)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return sgc_failx(err, len, "path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, mode) != 0 && errno != EEXIST)
            return sgc_fail(err, len, "mkdir(\"%s\", 0%o)", tmp, mode);
        *p = '/';
    }
    if (mkdir(tmp, mode) != 0 && errno != EEXIST)
        return sgc_fail(err, len, "mkdir(\"%s\", 0%o)", tmp, mode);
    return 0;
}

/* out = a + b where b is an absolute path inside a. */
int sgc_path_join(char *out, size_t size, const char *a, const char *b, char *err, size_t len)
{
    if (snprintf(out, size, "%s%s", a, b) >= (int)size)
        return sgc_failx(err, len, "path too long: %s%s", a, b);
    return 0;
}
