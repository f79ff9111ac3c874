/* path.c — host_path_clean (path.h): the workspace-relative spelling of a
 * workspace path (every file call).  Pure string work; files.c does the lookup. */
#include <string.h>

#include "host/core/path.h"

#define WS "/workspace"

static int clean(const char *path, char *out, size_t cap, int root_ok, sg_err *err)
{
    if (!path)
        return sg_err_set(err, SG_EINVAL, "path is required");
    if (cap == 0)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is too long", path);
    const char *p = path;
    if (p[0] == '/') {
        size_t n = sizeof WS - 1;
        if (strncmp(p, WS, n) != 0 || (p[n] != '/' && p[n] != 0))
            return sg_err_set(err, SG_EINVAL,
                              "path \"%.200s\" is outside the workspace (/workspace)", path);
        p += n;
    }
    size_t len = 0;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0)
            break;
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return sg_err_set(err, SG_EINVAL, "path \"%.200s\" has a \"..\" component", path);
        if (!(n == 1 && p[0] == '.')) {
            /* room for a separator, the component and the NUL */
            if (len + (len ? 1 : 0) + n >= cap)
                return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is too long (at most %zu bytes)",
                                  path, cap - 1);
            if (len)
                out[len++] = '/';
            memcpy(out + len, p, n);
            len += n;
        }
        p += n;
    }
    if (len == 0 && root_ok) {
        out[0] = '.';
        out[1] = 0;
        return 0;
    }
    if (len == 0)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" names no file in the workspace", path);
    out[len] = 0;
    return 0;
}

int host_path_clean(const char *path, char *out, size_t cap, sg_err *err)
{
    return clean(path, out, cap, 0, err);
}

int host_path_clean_dir(const char *path, char *out, size_t cap, sg_err *err)
{
    if (cap < 2)
        return sg_err_set(err, SG_EINVAL, "path \"%.200s\" is too long", path ? path : "");
    return clean(path, out, cap, 1, err);
}
