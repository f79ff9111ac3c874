/* daemon.c — signal mask, port file and stop wait shared by sandgate and
 * sandgate-host. See daemon.h. */
#include "common/daemon.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>

void sg_daemon_block_signals(int extra)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (extra)
        sigaddset(&set, extra);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int sg_daemon_write_port(const char *path, int port)
{
    if (!path)
        return 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

int sg_daemon_wait_stop(void)
{
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    int sig = 0;
    sigwait(&stop, &sig);
    return sig;
}
