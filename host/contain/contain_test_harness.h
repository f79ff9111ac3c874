/* contain_test_harness.h — the harness contain_test's cases use
 * (contain_test_harness.c): sandboxes started as the zygote starts them,
 * reports from inside, expectations, cleanup. Test code only. */
#ifndef SG_CONTAIN_TEST_HARNESS_H
#define SG_CONTAIN_TEST_HARNESS_H

#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "host/contain/contain.h"

#define ROOT "/sys/fs/cgroup"
#define UID 61234
#define WS_BYTES (4u << 20)

extern char g_newroot[64];
extern int g_mounts_before;
extern int g_stray_fd;       /* opened in the parent, must be closed inside */
extern int g_seq;
extern int g_one_fork;       /* 1: start sandboxes with the runtime's one fork */
extern const sgc_cgroup_limits k_lim;

#define CHECK_ERRNO(fd, name, expr, want)                                                   \
    do {                                                                                    \
        errno = 0;                                                                          \
        long rc_ = (long)(expr);                                                            \
        int e_ = errno;                                                                     \
        report(fd, name, rc_ == -1 && e_ == (want), "rc=%ld errno=%d (%s), want %d", rc_, e_, \
               strerror(e_), (want));                                                       \
    } while (0)

typedef struct sandbox {
    char name[64];
    char procs[1024];
    pid_t a;      /* child A, host pid namespace */
    int status;   /* A's wait status, once waited */
    int waited;
    int rfd;      /* read end of B's report pipe */
    char out[16384];
    size_t outlen;
} sandbox;

int count_lines(const char *path);
void reap_all(void);
void report(int fd, const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void spec_for(const sandbox *sb, int wfd, const char *extra, char *spec, size_t size);
void sandbox_start(sandbox *sb, const sgc_cgroup_limits *lim, const char *extra,
                   void (*inside)(int));
void sandbox_read(sandbox *sb, const char *until);
int sandbox_finish(sandbox *sb);
void expect_ok(const sandbox *sb, const char *const *names);
void run_case(const sgc_cgroup_limits *lim, const char *extra, void (*inside)(int),
              const char *const *names);
void status_field(const char *key, char *out, size_t size);
void check_status(int fd, const char *key, const char *want);

#endif
