/* seccomp.c — the syscall filter, installed LAST by sgc_enter so nothing
 * after it needs a denied call. Default allow with a deny list: the sandbox
 * runs arbitrary Python and its subprocesses, and an allow list would break
 * them with every new libc; the deny list removes the kernel's riskiest
 * surfaces (namespaces, mounts, ptrace, bpf, io_uring, keyrings, modules, raw
 * and netlink sockets). Only the native ABI passes: other architectures are
 * killed, and on x86_64 the x32 syscall numbers are refused. */
#include "host/contain/steps.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Denied outright with EPERM. Names unknown to this libseccomp are skipped. */
static const char *const deny_eperm[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "mount", "umount", "umount2", "pivot_root", "chroot",
    "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
    "unshare", "setns",
    "bpf", "perf_event_open", "userfaultfd", "fanotify_init",
    "add_key", "request_key", "keyctl",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "name_to_handle_at", "open_by_handle_at", "lookup_dcookie",
    "iopl", "ioperm", "uselib", "vhangup", "syslog", "nfsservctl",
};

#define CLONE_NS_FLAGS \
    (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | \
     CLONE_NEWNET | CLONE_NEWCGROUP)

typedef struct {
    scmp_filter_ctx ctx; /* owned by sgc_seccomp_enter */
    char *err;           /* borrowed */
    size_t len;
} fctx;

static int rule(fctx *f, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *cmp)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR)
        return 0;
    int rc = seccomp_rule_add_array(f->ctx, action, nr, n, cmp);
    if (rc < 0) {
        errno = -rc;
        return sgc_fail(f->err, f->len, "seccomp_rule_add(%s, %u args)", name, n);
    }
    return 0;
}

static int deny_list(fctx *f)
{
    for (size_t i = 0; i < sizeof deny_eperm / sizeof deny_eperm[0]; i++)
        if (rule(f, SCMP_ACT_ERRNO(EPERM), deny_eperm[i], 0, NULL))
            return -1;
    /* ENOSYS, not EPERM: glibc then falls back to clone(), which we can inspect. */
    return rule(f, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
}

/* clone's flags are arg 0 on the ABIs we build for. One rule per flag: the
 * filter language has "masked equals", not "masked not-zero". */
static int clone_rules(fctx *f)
{
    for (unsigned bit = 0; bit < 64; bit++) {
        uint64_t flag = 1ull << bit;
        if (!(CLONE_NS_FLAGS & flag))
            continue;
        struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag);
        if (rule(f, SCMP_ACT_ERRNO(EPERM), "clone", 1, &c))
            return -1;
    }
    return 0;
}

/* The kernel reads ioctl's request as 32 bits: mask, or TIOCSTI|1<<32 passes. */
static int ioctl_rules(fctx *f)
{
    static const unsigned long reqs[] = {TIOCSTI, TIOCLINUX};
    for (size_t i = 0; i < 2; i++) {
        struct scmp_arg_cmp c = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, reqs[i]);
        if (rule(f, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &c))
            return -1;
    }
    return 0;
}

/* Families other than AF_UNIX(1), AF_INET(2), AF_INET6(10) get EAFNOSUPPORT:
 * 0, 3..9, and anything above 10 (which also catches junk in the upper bits). */
static int socket_family_rules(fctx *f, const char *call)
{
    uint32_t act = SCMP_ACT_ERRNO(EAFNOSUPPORT);
    struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_GT, AF_INET6);
    if (rule(f, act, call, 1, &c))
        return -1;
    for (uint64_t fam = 0; fam < AF_INET6; fam++) {
        if (fam == AF_UNIX || fam == AF_INET)
            continue;
        c = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_EQ, fam);
        if (rule(f, act, call, 1, &c))
            return -1;
    }
    return 0;
}

/* Raw (and the obsolete SOCK_PACKET) IP sockets; the type's low 4 bits are the
 * kind, the rest are SOCK_NONBLOCK/SOCK_CLOEXEC. */
static int socket_type_rules(fctx *f)
{
    static const uint64_t fams[] = {AF_INET, AF_INET6};
    static const uint64_t types[] = {SOCK_RAW, SOCK_PACKET};
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 2; j++) {
            struct scmp_arg_cmp c[2] = {SCMP_A0(SCMP_CMP_EQ, fams[i]),
                                        SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, types[j])};
            if (rule(f, SCMP_ACT_ERRNO(EPERM), "socket", 2, c))
                return -1;
        }
    return 0;
}

/* personality(0) (PER_LINUX) and the query 0xffffffff stay allowed; any other
 * persona (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ...) is refused. libseccomp
 * takes one comparison per argument, so "neither all zeros nor all ones" is
 * spelled "some two adjacent bits differ": 31 pairs, two orders each. The
 * kernel reads the argument as 32 bits, and so do the masks. */
static int personality_rules(fctx *f)
{
    for (unsigned i = 0; i < 31; i++) {
        uint64_t pair = 3ull << i;
        struct scmp_arg_cmp c[2] = {SCMP_A0(SCMP_CMP_MASKED_EQ, pair, 1ull << i),
                                    SCMP_A0(SCMP_CMP_MASKED_EQ, pair, 2ull << i)};
        if (rule(f, SCMP_ACT_ERRNO(EPERM), "personality", 1, &c[0]) ||
            rule(f, SCMP_ACT_ERRNO(EPERM), "personality", 1, &c[1]))
            return -1;
    }
    return 0;
}

static int attrs(fctx *f)
{
    int rc = seccomp_attr_set(f->ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc == 0)
        rc = seccomp_attr_set(f->ctx, SCMP_FLTATR_CTL_NNP, 1);
    if (rc < 0) {
        errno = -rc;
        return sgc_fail(f->err, f->len, "seccomp_attr_set(BADARCH=KILL_PROCESS, NNP=1)");
    }
    /* A binary tree of syscall numbers instead of a linear scan: every
     * allowed syscall pays for the scan. Best effort: older kernels lack it. */
    (void)seccomp_attr_set(f->ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    return 0;
}

/* x32 shares the x86_64 audit arch; libseccomp's x86_64-only filter sends any
 * number with the x32 bit (0x40000000) to the bad-arch action, so x32 calls
 * kill the process too (the BPF was read to check; the tests check it live). */
static int build(fctx *f)
{
    if (attrs(f) || deny_list(f) || clone_rules(f) || ioctl_rules(f) ||
        socket_family_rules(f, "socket") || socket_family_rules(f, "socketpair") ||
        socket_type_rules(f) || personality_rules(f))
        return -1;
    return 0;
}

/* Compiling the filter costs ~2 ms of libseccomp work per sandbox, the
 * largest step of sgc_enter; the program never depends on the spec. So the
 * shared library (built with SGC_PREBUILD_FILTER) compiles it once when the
 * zygote loads it, and every forked sandbox inherits the BPF and loads it
 * with one seccomp(2). Without it (the static library) each call compiles. */
static struct sock_fprog g_prog; /* filter owned, built once, never freed */

#ifdef SGC_PREBUILD_FILTER
static int export_prog(scmp_filter_ctx ctx, struct sock_fprog *out)
{
    int fd = memfd_create("sgc-bpf", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = -1;
    off_t size;
    if (seccomp_export_bpf(ctx, fd) == 0 && (size = lseek(fd, 0, SEEK_END)) > 0 &&
        size % sizeof(struct sock_filter) == 0) {
        struct sock_filter *buf = malloc((size_t)size);
        if (buf && pread(fd, buf, (size_t)size, 0) == size) {
            out->len = (unsigned short)(size / sizeof(struct sock_filter));
            out->filter = buf;
            rc = 0;
        } else {
            free(buf);
        }
    }
    close(fd);
    return rc;
}

__attribute__((constructor)) static void prebuild(void)
{
    char err[256];
    fctx f = {.ctx = seccomp_init(SCMP_ACT_ALLOW), .err = err, .len = sizeof err};
    if (!f.ctx)
        return;
    if (build(&f) == 0 && export_prog(f.ctx, &g_prog) != 0)
        g_prog.filter = NULL; /* fall back to compiling in sgc_enter */
    seccomp_release(f.ctx);
}
#endif

/* no_new_privs is already set by caps.c, which seccomp(2) requires. */
static int load_prebuilt(char *err, size_t len)
{
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &g_prog) != 0)
        return sgc_fail(err, len, "seccomp(SECCOMP_SET_MODE_FILTER, %u insns)", g_prog.len);
    return 0;
}

int sgc_seccomp_enter(const sgc_spec *s, char *err, size_t len)
{
    if (!s->seccomp)
        return 0;
    if (g_prog.filter)
        return load_prebuilt(err, len);
    fctx f = {.ctx = seccomp_init(SCMP_ACT_ALLOW), .err = err, .len = len};
    if (!f.ctx)
        return sgc_failx(err, len, "seccomp_init(SCMP_ACT_ALLOW) failed");
    int rc = build(&f);
    if (rc == 0) {
        rc = seccomp_load(f.ctx);
        if (rc < 0) {
            errno = -rc;
            rc = sgc_fail(err, len, "seccomp_load()");
        }
    }
    seccomp_release(f.ctx);
    return rc;
}
