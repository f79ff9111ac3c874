/* mnt.c — the sandbox's filesystem view, built by B inside the mount and pid
 * namespaces A unshared: a tmpfs root on `newroot`, read-only binds of what
 * the template needs, symlinks, a private /proc, a minimal /dev, size- and
 * inode-limited /tmp and workspace, stub /etc files, then pivot_root and the
 * old root detached. Creating `newroot` on the host and deciding what to bind
 * is the daemon's job; this file only assembles. */
#include "host/contain/steps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PATH_SZ 4096

static int do_mount(const char *src, const char *dst, const char *type, unsigned long flags,
                    const char *data, char *err, size_t len)
{
    if (mount(src, dst, type, flags, data) != 0)
        return sgc_fail(err, len, "mount(\"%s\", \"%s\", \"%s\", 0x%lx, \"%s\")", src ? src : "",
                        dst, type ? type : "", flags, data ? data : "");
    return 0;
}

/* Creates the mount point for a bind: a directory, or an empty file when the
 * source is not a directory (binding a file needs a file to cover). */
static int make_mountpoint(const char *path, bool dir, char *err, size_t len)
{
    if (dir)
        return sgc_mkdir_p(path, 0755, err, len);
    char parent[PATH_SZ];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (sgc_mkdir_p(parent, 0755, err, len))
            return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return sgc_fail(err, len, "open(\"%s\", O_CREAT)", path);
    close(fd);
    return 0;
}

/* Bind src on dst, then remount with `flags` (a bind ignores them on the first
 * call). Not MS_REC: submounts of a bound tree would stay writable and could
 * expose more of the host than asked for. noexec of the source is kept. */
static int bind(const char *src, const char *dst, unsigned long flags, char *err, size_t len)
{
    struct stat st;
    if (stat(src, &st) != 0)
        return sgc_fail(err, len, "stat(\"%s\")", src);
    if (make_mountpoint(dst, S_ISDIR(st.st_mode), err, len))
        return -1;
    if (do_mount(src, dst, NULL, MS_BIND, NULL, err, len))
        return -1;
    struct statvfs vfs;
    if (statvfs(src, &vfs) == 0 && (vfs.f_flag & ST_NOEXEC))
        flags |= MS_NOEXEC;
    return do_mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | flags, NULL, err, len);
}

static int ro_binds(const sgc_spec *s, char *err, size_t len)
{
    char dst[PATH_SZ];
    for (int i = 0; i < s->n_ro_bind; i++) {
        if (sgc_path_join(dst, sizeof dst, s->newroot, s->ro_bind[i].b, err, len) ||
            bind(s->ro_bind[i].a, dst, MS_RDONLY | MS_NOSUID | MS_NODEV, err, len))
            return -1;
    }
    return 0;
}

static int symlinks(const sgc_spec *s, char *err, size_t len)
{
    char dst[PATH_SZ];
    for (int i = 0; i < s->n_symlink; i++) {
        if (sgc_path_join(dst, sizeof dst, s->newroot, s->symlink[i].b, err, len))
            return -1;
        char *slash = strrchr(dst, '/');
        *slash = '\0';
        int rc = sgc_mkdir_p(dst, 0755, err, len);
        *slash = '/';
        if (rc)
            return -1;
        if (symlink(s->symlink[i].a, dst) != 0)
            return sgc_fail(err, len, "symlink(\"%s\", \"%s\")", s->symlink[i].a, dst);
    }
    return 0;
}

/* A tmpfs at newroot+inside with the given options. */
static int tmpfs_at(const sgc_spec *s, const char *inside, unsigned long flags, const char *opts,
                    char *err, size_t len)
{
    char dst[PATH_SZ];
    if (sgc_path_join(dst, sizeof dst, s->newroot, inside, err, len) ||
        sgc_mkdir_p(dst, 0755, err, len))
        return -1;
    return do_mount("tmpfs", dst, "tmpfs", flags, opts, err, len);
}

/* /proc of the new pid namespace: B is its pid 1, so only the sandbox shows. */
static int proc(const sgc_spec *s, char *err, size_t len)
{
    char dst[PATH_SZ];
    if (sgc_path_join(dst, sizeof dst, s->newroot, "/proc", err, len) ||
        sgc_mkdir_p(dst, 0555, err, len))
        return -1;
    return do_mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err, len);
}

/* Hide what a sandbox has no business reading in its own /proc (kernel
 * symbols and memory, keys, timers, the kernel log) behind /dev/null, and
 * make /proc/sys read-only. Unprivileged code could not write most of it
 * anyway; this removes the information leaks too. Missing entries (kernel
 * config) are skipped. */
static int mask_proc(const sgc_spec *s, char *err, size_t len)
{
    static const char *const files[] = {"kcore", "kallsyms", "keys", "key-users", "timer_list",
                                        "sched_debug", "sysrq-trigger", "kmsg", "kpagecount",
                                        "kpageflags", "kpagecgroup", "config.gz"};
    char dst[PATH_SZ];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(dst, sizeof dst, "%s/proc/%s", s->newroot, files[i]);
        if (access(dst, F_OK) != 0)
            continue;
        if (bind("/dev/null", dst, MS_RDONLY | MS_NOSUID | MS_NOEXEC, err, len))
            return -1;
    }
    snprintf(dst, sizeof dst, "%s/proc/sys", s->newroot);
    if (do_mount(dst, dst, NULL, MS_BIND | MS_REC, NULL, err, len))
        return -1;
    return do_mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV |
                                         MS_NOEXEC, NULL, err, len);
}

/* Bind the harmless character devices rather than mknod: each bind is its
 * own mount without MS_NODEV, so the /dev tmpfs under them can be nodev and
 * a node created there by anyone would not open. */
static int dev_nodes(const sgc_spec *s, char *err, size_t len)
{
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    char src[64], dst[PATH_SZ];
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        snprintf(src, sizeof src, "/dev/%s", nodes[i]);
        if (access(src, F_OK) != 0)
            continue; /* a host without /dev/tty still gets a working sandbox */
        snprintf(dst, sizeof dst, "%s/dev/%s", s->newroot, nodes[i]);
        if (bind(src, dst, MS_NOSUID | MS_NOEXEC, err, len))
            return -1;
    }
    return 0;
}

static int dev_links(const sgc_spec *s, char *err, size_t len)
{
    static const char *const links[][2] = {
        {"/proc/self/fd", "fd"},       {"/proc/self/fd/0", "stdin"},
        {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
    };
    char dst[PATH_SZ];
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(dst, sizeof dst, "%s/dev/%s", s->newroot, links[i][1]);
        if (symlink(links[i][0], dst) != 0)
            return sgc_fail(err, len, "symlink(\"%s\", \"%s\")", links[i][0], dst);
    }
    return 0;
}

/* A private devpts instance for the sandbox's PTYs (background processes
 * with a terminal, host/init/children.c): its own numbering, at most 64
 * terminals, nothing of the host's. /dev/ptmx is its multiplexer. */
static int dev_pts(const sgc_spec *s, char *err, size_t len)
{
    char dst[PATH_SZ];
    snprintf(dst, sizeof dst, "%s/dev/pts", s->newroot);
    if (sgc_mkdir_p(dst, 0755, err, len) ||
        do_mount("devpts", dst, "devpts", MS_NOSUID | MS_NOEXEC,
                 "newinstance,ptmxmode=0666,mode=0620,max=64", err, len))
        return -1;
    snprintf(dst, sizeof dst, "%s/dev/ptmx", s->newroot);
    if (symlink("pts/ptmx", dst) != 0)
        return sgc_fail(err, len, "symlink(\"pts/ptmx\", \"%s\")", dst);
    return 0;
}

static int dev(const sgc_spec *s, char *err, size_t len)
{
    char opts[64];
    if (tmpfs_at(s, "/dev", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755", err, len) ||
        dev_nodes(s, err, len) || dev_links(s, err, len) || dev_pts(s, err, len))
        return -1;
    snprintf(opts, sizeof opts, "size=%llu,nr_inodes=256,mode=1777",
             (unsigned long long)s->shm_bytes);
    return tmpfs_at(s, "/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts, err, len);
}

static int tmp_and_workspace(const sgc_spec *s, char *err, size_t len)
{
    char opts[128];
    snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=1777",
             (unsigned long long)s->tmp_bytes, (unsigned long long)s->tmp_inodes);
    if (tmpfs_at(s, "/tmp", MS_NOSUID | MS_NODEV, opts, err, len))
        return -1;
    snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=0700,uid=%u,gid=%u",
             (unsigned long long)s->workspace_bytes, (unsigned long long)s->workspace_inodes,
             (unsigned)s->uid, (unsigned)s->gid);
    return tmpfs_at(s, s->workspace, MS_NOSUID | MS_NODEV, opts, err, len);
}

/* Create-only: a file the spec bound (e.g. /etc/hosts) is left alone. */
static int write_new(const char *path, const char *data, char *err, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return errno == EEXIST ? 0 : sgc_fail(err, len, "open(\"%s\", O_CREAT|O_EXCL)", path);
    size_t n = strlen(data);
    ssize_t w = write(fd, data, n);
    close(fd);
    if (w != (ssize_t)n)
        return sgc_fail(err, len, "write(\"%s\")", path);
    return 0;
}

static bool etc_bound(const sgc_spec *s)
{
    for (int i = 0; i < s->n_ro_bind; i++)
        if (!strcmp(s->ro_bind[i].b, "/etc"))
            return true;
    for (int i = 0; i < s->n_symlink; i++)
        if (!strcmp(s->symlink[i].b, "/etc"))
            return true;
    return false;
}

/* Just enough for getpwuid(), `id` and resolving localhost. */
static int etc(const sgc_spec *s, char *err, size_t len)
{
    if (etc_bound(s))
        return 0;
    char dir[PATH_SZ], path[PATH_SZ + 16], text[512];
    if (sgc_path_join(dir, sizeof dir, s->newroot, "/etc", err, len) ||
        sgc_mkdir_p(dir, 0755, err, len))
        return -1;
    snprintf(text, sizeof text,
             "root:x:0:0:root:/root:/usr/sbin/nologin\n"
             "sandbox:x:%u:%u:sandbox:%s:/bin/sh\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             (unsigned)s->uid, (unsigned)s->gid, s->workspace);
    snprintf(path, sizeof path, "%s/passwd", dir);
    if (write_new(path, text, err, len))
        return -1;
    snprintf(text, sizeof text, "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n", (unsigned)s->gid);
    snprintf(path, sizeof path, "%s/group", dir);
    if (write_new(path, text, err, len))
        return -1;
    snprintf(text, sizeof text, "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n",
             s->hostname);
    snprintf(path, sizeof path, "%s/hosts", dir);
    return write_new(path, text, err, len);
}

/* pivot_root(".", ".") stacks the old root on top of the new one; detaching
 * "." then drops it, so no directory for the old root is needed. */
static int pivot(const sgc_spec *s, char *err, size_t len)
{
    if (chdir(s->newroot) != 0)
        return sgc_fail(err, len, "chdir(\"%s\")", s->newroot);
    if (syscall(SYS_pivot_root, ".", ".") != 0)
        return sgc_fail(err, len, "pivot_root(\".\", \".\") in %s", s->newroot);
    if (umount2(".", MNT_DETACH) != 0)
        return sgc_fail(err, len, "umount2(\".\", MNT_DETACH)");
    if (chdir("/") != 0)
        return sgc_fail(err, len, "chdir(\"/\")");
    /* Everything is written: the root tmpfs itself can go read-only. */
    return do_mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
                    NULL, err, len);
}

int sgc_mnt_enter(const sgc_spec *s, char *err, size_t len)
{
    /* Private first: otherwise the mounts below would propagate to the host. */
    if (do_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, err, len))
        return -1;
    if (do_mount("tmpfs", s->newroot, "tmpfs", MS_NOSUID | MS_NODEV,
                 "size=1m,nr_inodes=1024,mode=0755", err, len))
        return -1;
    if (ro_binds(s, err, len) || symlinks(s, err, len) || proc(s, err, len) || mask_proc(s, err, len) ||
        dev(s, err, len) || tmp_and_workspace(s, err, len) || etc(s, err, len))
        return -1;
    return pivot(s, err, len);
}
