/* fds.c — closing every file descriptor the sandbox must not inherit (the
 * zygote's control socket, other sandboxes' sockets, log files): all but
 * 0, 1, 2 and the spec's fd_keep list. */
#include "host/contain/steps.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* close_range (Linux 5.9) when we have it; a brute loop otherwise. */
static int close_between(unsigned lo, unsigned hi, char *err, size_t len)
{
    if (lo > hi)
        return 0;
    if (close_range(lo, hi, 0) == 0)
        return 0;
    if (errno != ENOSYS)
        return sgc_fail(err, len, "close_range(%u, %u, 0)", lo, hi);
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20)
        max = 1 << 20;
    for (unsigned fd = lo; fd <= hi && fd < (unsigned)max; fd++)
        close((int)fd);
    return 0;
}

int sgc_fds_enter(const sgc_spec *s, char *err, size_t len)
{
    int keep[SGC_MAX_FDKEEP];
    int n = s->n_fd_keep;
    for (int i = 0; i < n; i++)
        keep[i] = s->fd_keep[i];
    qsort(keep, (size_t)n, sizeof keep[0], cmp_int);
    unsigned next = 3;
    for (int i = 0; i < n; i++) {
        if (keep[i] < 3 || (unsigned)keep[i] < next)
            continue; /* duplicates and 0..2 */
        if (close_between(next, (unsigned)keep[i] - 1, err, len))
            return -1;
        next = (unsigned)keep[i] + 1;
    }
    return close_between(next, UINT_MAX, err, len);
}
