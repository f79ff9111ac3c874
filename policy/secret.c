/* secret.c — reading secret values from their sources (a file, or a
 * variable of the gateway's environment). Kept out of decide.c because it
 * does I/O. Never puts a value in an error message, and wipes partial reads. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/query.h"
#include "policy/secret.h"

static int read_source(const char *name, const char *kind, const char *src, char *buf,
                       size_t cap, size_t *len, sg_err *err)
{
    *len = 0;
    if (!kind || !src || cap == 0)
        return sg_err_set(err, SG_EINVAL, "secret '%s': no source", name);
    if (strcmp(kind, "env") == 0) {
        const char *v = getenv(src);
        if (!v)
            return sg_err_set(err, SG_EINVAL, "secret '%s': gateway variable %s is not set", name, src);
        size_t n = strlen(v);
        if (n >= cap)
            return sg_err_set(err, SG_EINVAL, "secret '%s': value longer than %zu bytes", name, cap - 1);
        memcpy(buf, v, n + 1);
        *len = n;
        return 0;
    }
    int fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return sg_err_errno(err, SG_EINVAL, "secret '%s': open(%s)", name, src);
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            close(fd);
            explicit_bzero(buf, cap);
            return sg_err_set(err, SG_EINVAL, "secret '%s': %s is longer than %zu bytes", name, src, cap - 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = sg_err_errno(err, SG_EINVAL, "secret '%s': read(%s)", name, src);
            close(fd);
            explicit_bzero(buf, cap);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (n == cap) {
        explicit_bzero(buf, cap);
        return sg_err_set(err, SG_EINVAL, "secret '%s': %s is longer than %zu bytes", name, src, cap - 1);
    }
    if (n && buf[n - 1] == '\n')   /* `echo token > file` adds one */
        n--;
    buf[n] = 0;
    *len = n;
    return 0;
}

int policy_secret_value(const policy_secret_grant *g, char *buf, size_t cap, size_t *len,
                        sg_err *err)
{
    return read_source(g->name, g->source_kind, g->source, buf, cap, len, err);
}

int policy_user_token_key(const policy *p, const char *tenant, char *buf, size_t cap,
                          size_t *len, sg_err *err)
{
    policy_user_tokens ut;
    if (policy_tenant_user_tokens(p, tenant, &ut) < 0 || !ut.enabled)
        return sg_err_set(err, SG_ENOTFOUND, "tenant '%s' has no user_tokens", tenant);
    return read_source("user_tokens.hmac_key", ut.source_kind, ut.source, buf, cap, len, err);
}
