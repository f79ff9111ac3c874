/* contain_bench.c — what one sandbox's isolation costs: fork A, sgc_unshare,
 * fork B, sgc_enter, until B reports back. Prints the median and p90 over N
 * runs (default 100) with a per-phase split. Run as root:
 *   build-contain/host/contain/contain_bench [N] */
#include "host/contain/contain.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct { double unshare, fork_b, enter; } phases;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One create; returns total microseconds, fills the phase split. */
static double one(const char *spec_fmt, const char *procs, phases *ph)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC))
        return -1;
    char spec[4096];
    snprintf(spec, sizeof spec, spec_fmt, p[1], procs);
    double t0 = now_us();
    pid_t a = fork();
    if (a == 0) {
        char err[512];
        if (sgc_unshare(spec, err, sizeof err)) {
            fprintf(stderr, "sgc_unshare: %s\n", err);
            _exit(1);
        }
        double t1 = now_us();
        pid_t b = fork();
        if (b == 0) {
            double t2 = now_us();
            if (sgc_enter(spec, err, sizeof err)) {
                fprintf(stderr, "sgc_enter: %s\n", err);
                _exit(1);
            }
            double t[4] = {t0, t1, t2, now_us()};
            _exit(write(p[1], t, sizeof t) == sizeof t ? 0 : 1);
        }
        _exit(0);
    }
    close(p[1]);
    double t[4];
    ssize_t n = read(p[0], t, sizeof t);
    double total = now_us() - t0;
    close(p[0]);
    while (waitpid(-1, NULL, 0) > 0)
        ;
    if (n != sizeof t)
        return -1;
    ph->unshare = t[1] - t[0];
    ph->fork_b = t[2] - t[1];
    ph->enter = t[3] - t[2];
    return total;
}

static void stats(const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    printf("%-28s p50 %8.0f us   p90 %8.0f us   max %8.0f us\n", what, v[n / 2], v[n * 9 / 10], v[n - 1]);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    if (n < 1 || n > 100000)
        n = 100;
    /* Like the zygote: B is orphaned when A exits, and an unreaped zombie
     * still counts against pids.max. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    char dir[] = "/tmp/sgc-bench-XXXXXX", procs[1024] = "", err[512], name[64];
    if (!mkdtemp(dir))
        return 1;
    snprintf(name, sizeof name, "bench-%d", (int)getpid());
    sgc_cgroup_limits lim = {.memory_bytes = 256u << 20, .pids = 64, .cpu_millis = 1000};
    if (sgc_cgroup_create("/sys/fs/cgroup", name, &lim, procs, sizeof procs, err, sizeof err)) {
        fprintf(stderr, "sgc_cgroup_create: %s\n", err);
        return 1;
    }
    char cg[1200] = "";
    for (char *p = procs, *nl; p && *p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        snprintf(cg + strlen(cg), sizeof cg - strlen(cg), "cgroup_procs=%.*s\n", (int)l, p);
    }
    char fmt[2048];
    snprintf(fmt, sizeof fmt,
             "id=bench\nuid=61234\ngid=61234\nnewroot=%s\nro_bind=/usr\nsymlink=usr/bin:/bin\n"
             "symlink=usr/lib:/lib\nsymlink=usr/lib64:/lib64\nsymlink=usr/sbin:/sbin\n"
             "nofile=256\nfd_keep=%%d\n%%s", dir);
    double *tot = calloc((size_t)n, sizeof *tot), *un = calloc((size_t)n, sizeof *un);
    double *fb = calloc((size_t)n, sizeof *fb), *en = calloc((size_t)n, sizeof *en);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        phases ph;
        double t = one(fmt, cg, &ph);
        if (t < 0)
            break;
        tot[ok] = t, un[ok] = ph.unshare, fb[ok] = ph.fork_b, en[ok] = ph.enter;
        ok++;
    }
    sgc_cgroup_kill("/sys/fs/cgroup", name, err, sizeof err);
    sgc_cgroup_destroy("/sys/fs/cgroup", name, err, sizeof err);
    rmdir(dir);
    if (ok < n) {
        fprintf(stderr, "run %d failed\n", ok);
        return 1;
    }
    printf("%d creates\n", n);
    stats("fork A + sgc_unshare", un, n);
    stats("fork B", fb, n);
    stats("sgc_enter", en, n);
    stats("total (until B reports)", tot, n);
    return 0;
}
