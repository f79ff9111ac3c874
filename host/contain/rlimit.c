/* rlimit.c — per-process limits: no core dumps ever (a dump would write the
 * sandbox's memory, secrets included, somewhere), and the file size, open
 * files and process count the spec gives. Memory, CPU and the sandbox-wide
 * process count are cgroup.c's. */
#include "host/contain/steps.h"

#include <sys/resource.h>

static int set(int res, const char *name, uint64_t v, char *err, size_t len)
{
    struct rlimit rl = {.rlim_cur = v, .rlim_max = v};
    if (setrlimit(res, &rl) != 0)
        return sgc_fail(err, len, "setrlimit(%s, %llu)", name, (unsigned long long)v);
    return 0;
}

int sgc_rlimit_enter(const sgc_spec *s, char *err, size_t len)
{
    if (set(RLIMIT_CORE, "RLIMIT_CORE", 0, err, len))
        return -1;
    if (s->fsize && set(RLIMIT_FSIZE, "RLIMIT_FSIZE", s->fsize, err, len))
        return -1;
    if (s->nofile && set(RLIMIT_NOFILE, "RLIMIT_NOFILE", s->nofile, err, len))
        return -1;
    if (s->nproc && set(RLIMIT_NPROC, "RLIMIT_NPROC", s->nproc, err, len))
        return -1;
    return 0;
}
