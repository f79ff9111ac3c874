/* err.h — the one error carrier every sandgate module fills.
 *
 * Functions return 0 or a negative code and, when the caller passes a
 * non-NULL sg_err, describe what failed (syscall and arguments, or file:line
 * and key). Codes are domain codes, not gRPC ones: rpc/status.c maps them. */
#ifndef SG_ERR_H
#define SG_ERR_H

#include <stddef.h>

enum {
    SG_OK = 0,
    SG_EINVAL = -1,      /* bad input from the caller          -> INVALID_ARGUMENT */
    SG_ENOTFOUND = -2,   /* no such object (or not yours)      -> NOT_FOUND */
    SG_EDENIED = -3,     /* policy or ownership says no        -> PERMISSION_DENIED */
    SG_EUNAUTH = -4,     /* no valid identity                  -> UNAUTHENTICATED */
    SG_EQUOTA = -5,      /* over a limit                       -> RESOURCE_EXHAUSTED */
    SG_EINTERNAL = -6,   /* our bug or the OS failed us        -> INTERNAL */
    SG_EUNAVAIL = -7,    /* a backend is down or restarting    -> UNAVAILABLE */
    SG_EEXISTS = -8,     /*                                    -> ALREADY_EXISTS */
    SG_ETIMEOUT = -9,    /*                                    -> DEADLINE_EXCEEDED */
    SG_EPRECOND = -10,   /* wrong state for the call           -> FAILED_PRECONDITION */
};

#define SG_ERR_MSG_MAX 512

typedef struct sg_err {
    int code;
    char msg[SG_ERR_MSG_MAX];
} sg_err;

/* Fill err (if non-NULL) and return code, so callers can write
 * `return sg_err_set(err, SG_EINVAL, "bad port %d", p);` */
int sg_err_set(sg_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like sg_err_set, appending ": strerror(errno)". */
int sg_err_errno(sg_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *sg_err_code_name(int code);

#endif
