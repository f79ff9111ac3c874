/* reaper.c — the cgroup killer thread (reaper.h). sandbox.c queues a
 * dying sandbox's cgroup name when it kills it and again when something
 * outlives the first signal; this thread calls sgc_cgroup_signal with no
 * lock held, so however long a group takes to freeze, only this thread
 * waits. The tick still decides when a sandbox is gone (its cgroups empty
 * and removed); a name whose group was removed meanwhile signals nothing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "host/contain/contain.h"
#include "host/host.h"
#include "host/core/reaper.h"

typedef struct reap_item {
    struct reap_item *next;
    char name[HOST_ID_MAX + 8];
} reap_item;

static struct {
    pthread_mutex_t mu;          /* guards the queue only; never held over a signal */
    pthread_cond_t cv;
    reap_item *head, *tail;      /* owned */
    int stopping, started;
    pthread_t thr;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *reaper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&R.mu);
    for (;;) {
        while (!R.head && !R.stopping)
            pthread_cond_wait(&R.cv, &R.mu);
        if (!R.head)
            break;   /* stopping, nothing left */
        reap_item *it = R.head;
        R.head = it->next;
        if (!R.head)
            R.tail = NULL;
        pthread_mutex_unlock(&R.mu);
        char eb[256];
        /* cgroup_root is fixed after start: read without H.mu */
        if (sgc_cgroup_signal(H.cfg.cgroup_root, it->name, eb, sizeof eb) < 0)
            sg_log_warn("kill cgroup %s: %s", it->name, eb);
        free(it);
        pthread_mutex_lock(&R.mu);
    }
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

int host_reaper_start(sg_err *err)
{
    if (pthread_create(&R.thr, NULL, reaper_main, NULL) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "pthread_create(reaper)");
    R.started = 1;
    return 0;
}

void host_reaper_stop(void)
{
    if (!R.started)
        return;
    pthread_mutex_lock(&R.mu);
    R.stopping = 1;
    pthread_cond_signal(&R.cv);
    pthread_mutex_unlock(&R.mu);
    pthread_join(R.thr, NULL);
    R.started = 0;
}

void host_reaper_signal(const char *name)
{
    pthread_mutex_lock(&R.mu);
    for (reap_item *it = R.head; it; it = it->next)
        if (strcmp(it->name, name) == 0) {
            pthread_mutex_unlock(&R.mu);
            return;
        }
    reap_item *it = calloc(1, sizeof *it);
    if (it) {
        snprintf(it->name, sizeof it->name, "%s", name);
        if (R.tail)
            R.tail->next = it;
        else
            R.head = it;
        R.tail = it;
        pthread_cond_signal(&R.cv);
    }
    pthread_mutex_unlock(&R.mu);
    if (!it)   /* no memory for the queue: signal here rather than not at all */
    {
        char eb[256];
        sgc_cgroup_signal(H.cfg.cgroup_root, name, eb, sizeof eb);
    }
}
