/* err.c — filling sg_err. See err.h. */
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sg_err_set(sg_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int sg_err_errno(sg_err *err, int code, const char *fmt, ...)
{
    int saved = errno;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        if (n < 0)
            n = 0;
        if ((size_t)n < sizeof err->msg)
            snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(saved));
        err->code = code;
    }
    errno = saved;
    return code;
}

const char *sg_err_code_name(int code)
{
    switch (code) {
    case SG_OK: return "ok";
    case SG_EINVAL: return "invalid argument";
    case SG_ENOTFOUND: return "not found";
    case SG_EDENIED: return "permission denied";
    case SG_EUNAUTH: return "unauthenticated";
    case SG_EQUOTA: return "resource exhausted";
    case SG_EINTERNAL: return "internal";
    case SG_EUNAVAIL: return "unavailable";
    case SG_EEXISTS: return "already exists";
    case SG_ETIMEOUT: return "deadline exceeded";
    case SG_EPRECOND: return "failed precondition";
    }
    return "unknown";
}
