/* fds.c — fd counting (fds.h). */
#include <dirent.h>
#include <sys/resource.h>

#include "common/fds.h"

long sg_fds_open(long limit)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return limit;   /* EMFILE: none left at all */
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;       /* the directory's own fd */
}

long sg_fds_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (long)rl.rlim_cur;
}
