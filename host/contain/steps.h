/* steps.h — internal to host/contain: the parsed spec and one entry point per
 * kernel facility. Not installed; contain.h is the public API.
 *
 * The spec lives in caller storage with fixed-size arrays: sgc_enter runs in
 * a child forked from a possibly multi-threaded Python zygote, where we keep
 * heap use to a minimum (libseccomp still allocates; that is unavoidable). */
#ifndef SGC_STEPS_H
#define SGC_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SGC_API __attribute__((visibility("default")))

#define SGC_SPEC_MAX 16384
#define SGC_MAX_BINDS 64
#define SGC_MAX_SYMLINKS 32
#define SGC_MAX_PROCS 8
#define SGC_MAX_FDKEEP 32

typedef struct sgc_pair {
    const char *a; /* borrowed from sgc_spec.buf */
    const char *b; /* borrowed from sgc_spec.buf */
} sgc_pair;

typedef struct sgc_spec {
    char buf[SGC_SPEC_MAX];        /* owned copy of the spec text, split in place */
    const char *id;                /* every const char * below points into buf or a literal */
    uid_t uid;
    gid_t gid;
    const char *hostname;
    const char *newroot;
    sgc_pair ro_bind[SGC_MAX_BINDS];   /* a = host path, b = path inside */
    int n_ro_bind;
    sgc_pair symlink[SGC_MAX_SYMLINKS]; /* a = target, b = path inside */
    int n_symlink;
    const char *workspace;
    uint64_t workspace_bytes, workspace_inodes;
    uint64_t tmp_bytes, tmp_inodes;
    uint64_t shm_bytes;
    const char *cgroup_procs[SGC_MAX_PROCS];
    int n_cgroup_procs;
    uint64_t nofile, fsize, nproc; /* 0 = leave as inherited */
    int fd_keep[SGC_MAX_FDKEEP];
    int n_fd_keep;
    bool seccomp;
} sgc_spec;

/* util.c */
int sgc_fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int sgc_failx(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int sgc_write_file(const char *path, const char *data, char *err, size_t len);
ssize_t sgc_read_file(const char *path, char *buf, size_t size);
int sgc_mkdir_p(const char *path, mode_t mode, char *err, size_t len);
int sgc_path_join(char *out, size_t size, const char *a, const char *b, char *err, size_t len);

/* spec.c */
int sgc_spec_parse(sgc_spec *s, const char *text, char *err, size_t len);

/* the facility steps, in the order contain.c calls them */
int sgc_mnt_enter(const sgc_spec *s, char *err, size_t len);
int sgc_uts_enter(const sgc_spec *s, char *err, size_t len);
int sgc_net_enter(const sgc_spec *s, char *err, size_t len);
int sgc_rlimit_enter(const sgc_spec *s, char *err, size_t len);
int sgc_caps_enter(const sgc_spec *s, char *err, size_t len);
int sgc_fds_enter(const sgc_spec *s, char *err, size_t len);
int sgc_seccomp_enter(const sgc_spec *s, char *err, size_t len);

#endif
