/* contain.c — the ordered list of isolation steps, and nothing else: A's
 * half (sgc_unshare: join cgroups, unshare namespaces) and B's half
 * (sgc_enter: mounts .. seccomp). Each step lives in its facility's file;
 * spec parsing is spec.c's. The order is the contract of contain.h. */
#include "host/contain/contain.h"
#include "host/contain/steps.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

/* Join before unsharing the cgroup namespace, so its root is the sandbox's
 * own group and /proc/self/cgroup shows "/" inside. */
static int join_cgroups(const sgc_spec *s, char *err, size_t len)
{
    for (int i = 0; i < s->n_cgroup_procs; i++)
        if (sgc_write_file(s->cgroup_procs[i], "0", err, len))
            return -1;
    return 0;
}

/* The pid namespace applies to A's children: B becomes its pid 1. */
static int unshare_namespaces(char *err, size_t len)
{
    int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_NEWCGROUP;
    if (unshare(flags) != 0)
        return sgc_fail(err, len, "unshare(NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP)");
    return 0;
}

SGC_API int sgc_unshare(const char *spec, char *errbuf, size_t errlen)
{
    sgc_spec s;
    if (sgc_spec_parse(&s, spec, errbuf, errlen) || join_cgroups(&s, errbuf, errlen) ||
        unshare_namespaces(errbuf, errlen))
        return -1;
    return 0;
}

/* ---- one fork per sandbox (see contain.h) ---- */

SGC_API int sgc_pidns_next(char *errbuf, size_t errlen)
{
    if (unshare(CLONE_NEWPID) != 0)
        return sgc_fail(errbuf, errlen, "unshare(NEWPID)");
    return 0;
}

SGC_API int sgc_pidns_reset(char *errbuf, size_t errlen)
{
    int fd = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sgc_fail(errbuf, errlen, "open(\"/proc/self/ns/pid\")");
    int rc = setns(fd, CLONE_NEWPID);
    close(fd);
    if (rc != 0)
        return sgc_fail(errbuf, errlen, "setns(own pid namespace, NEWPID)");
    return 0;
}

SGC_API int sgc_unshare_pid1(const char *spec, char *errbuf, size_t errlen)
{
    sgc_spec s;
    if (sgc_spec_parse(&s, spec, errbuf, errlen))
        return -1;
    if (getpid() != 1)
        return sgc_failx(errbuf, errlen, "sgc_unshare_pid1: getpid() = %d, expected 1 "
                         "(fork after sgc_pidns_next)", (int)getpid());
    if (join_cgroups(&s, errbuf, errlen))
        return -1;
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0)
        return sgc_fail(errbuf, errlen, "unshare(NEWNS|NEWNET|NEWIPC|NEWUTS|NEWCGROUP)");
    return 0;
}

typedef int (*sgc_step)(const sgc_spec *, char *, size_t);

SGC_API int sgc_enter(const char *spec, char *errbuf, size_t errlen)
{
    static const sgc_step steps[] = {
        sgc_mnt_enter,    /* needs root: first */
        sgc_uts_enter,
        sgc_net_enter,
        sgc_rlimit_enter, /* raising a hard limit needs root: before caps */
        sgc_caps_enter,   /* uid/gid, capabilities, no_new_privs */
        sgc_fds_enter,
        sgc_seccomp_enter, /* last: the steps above use calls it denies */
    };
    sgc_spec s;
    if (sgc_spec_parse(&s, spec, errbuf, errlen))
        return -1;
    if (getpid() != 1)
        return sgc_failx(errbuf, errlen, "sgc_enter: getpid() = %d, expected 1 (fork after sgc_unshare)",
                         (int)getpid());
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (steps[i](&s, errbuf, errlen))
            return -1;
    return 0;
}
