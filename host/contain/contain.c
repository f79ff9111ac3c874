/* contain.c — the ordered list of isolation steps, and nothing else: A's
 * half (sgc_unshare: join cgroups, unshare namespaces), B's half
 * (sgc_enter: mounts .. seccomp), and a later process joining a made
 * sandbox (sgc_join: cgroups, setns, its root; sgc_enter_joined: the
 * privilege-dropping steps of sgc_enter). Each step lives in its facility's
 * file; spec parsing is spec.c's. The order is the contract of contain.h. */
#include "host/contain/contain.h"
#include "host/contain/steps.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

/* What makes the sandbox: only its pid 1 runs these. */
static const sgc_step make_steps[] = {
    sgc_mnt_enter,    /* needs root: first */
    sgc_uts_enter,
    sgc_net_enter,
    NULL,
};

/* What every process entering it does, pid 1 and joining contexts alike. */
static const sgc_step drop_steps[] = {
    sgc_rlimit_enter, /* raising a hard limit needs root: before caps */
    sgc_caps_enter,   /* uid/gid, capabilities, no_new_privs */
    sgc_fds_enter,
    sgc_seccomp_enter, /* last: the steps above use calls it denies */
    NULL,
};

static int run_steps(const sgc_spec *s, const sgc_step *steps, char *errbuf, size_t errlen)
{
    for (; *steps; steps++)
        if ((*steps)(s, errbuf, errlen))
            return -1;
    return 0;
}

SGC_API int sgc_enter(const char *spec, char *errbuf, size_t errlen)
{
    sgc_spec s;
    if (sgc_spec_parse(&s, spec, errbuf, errlen))
        return -1;
    if (getpid() != 1)
        return sgc_failx(errbuf, errlen, "sgc_enter: getpid() = %d, expected 1 (fork after sgc_unshare)",
                         (int)getpid());
    return run_steps(&s, make_steps, errbuf, errlen) || run_steps(&s, drop_steps, errbuf, errlen)
               ? -1
               : 0;
}

/* ---- joining a made sandbox (see contain.h) ---- */

SGC_API int sgc_pidns_join(int pidfd, char *errbuf, size_t errlen)
{
    if (setns(pidfd, CLONE_NEWPID) != 0)
        return sgc_fail(errbuf, errlen, "setns(pidfd %d, NEWPID)", pidfd);
    return 0;
}

/* An O_PATH fd of the root directory pidfd's process sees, opened through
 * our /proc (the host's): setns into a mount namespace gives the root of
 * the namespace's first mount, which is the sandbox's pivoted root only
 * when the daemons themselves were not started under a chroot. */
static int open_root_of(int pidfd, char *err, size_t len)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
    ssize_t n = sgc_read_file(path, buf, sizeof buf);
    const char *p = n > 0 ? strstr(buf, "\nPid:\t") : NULL;
    long pid = p ? strtol(p + 6, NULL, 10) : 0;
    if (pid <= 0)
        return sgc_failx(err, len, "%s: no live pid in the pidfd", path);
    snprintf(path, sizeof path, "/proc/%ld/root", pid);
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sgc_fail(err, len, "open(\"%s\", O_PATH)", path);
    /* Still the same process? (pid reuse between the two reads) */
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0) {
        close(fd);
        return sgc_fail(err, len, "pidfd_send_signal(pidfd %d, 0)", pidfd);
    }
    return fd;
}

SGC_API int sgc_join(const char *spec, int pidfd, char *errbuf, size_t errlen)
{
    sgc_spec s;
    if (sgc_spec_parse(&s, spec, errbuf, errlen))
        return -1;
    if (getpid() == 1)
        return sgc_failx(errbuf, errlen, "sgc_join: in pid 1; expected a child forked after "
                         "sgc_pidns_join");
    int root = open_root_of(pidfd, errbuf, errlen);
    if (root < 0)
        return -1;
    /* cgroups by their host paths: before the mount namespace hides them */
    int rc = join_cgroups(&s, errbuf, errlen);
    if (rc == 0 &&
        setns(pidfd, CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP))
        rc = sgc_fail(errbuf, errlen, "setns(pidfd %d, NEWNS|NEWNET|NEWIPC|NEWUTS|NEWCGROUP)",
                      pidfd);
    if (rc == 0 && (fchdir(root) != 0 || chroot(".") != 0 || chdir("/") != 0))
        rc = sgc_fail(errbuf, errlen, "entering the sandbox's root (fchdir, chroot)");
    close(root);
    return rc;
}

SGC_API int sgc_enter_joined(const char *spec, char *errbuf, size_t errlen)
{
    sgc_spec s;
    if (sgc_spec_parse(&s, spec, errbuf, errlen))
        return -1;
    return run_steps(&s, drop_steps, errbuf, errlen);
}
