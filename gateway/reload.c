/* reload.c — the live policy: loaded in full and validated, then swapped
 * with one pointer store; a call holds a ref to the policy it started
 * with. An invalid file is logged and rejected, and the old policy stays
 * live (keep-last-good). SIGHUP and a one-second mtime/size watch trigger a
 * reload. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gateway/gw.h"

static policy *live;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *live_path;
static struct stat live_stat;

policy *gw_policy_acquire(void)
{
    pthread_mutex_lock(&live_mu);
    policy *p = policy_ref(live);
    pthread_mutex_unlock(&live_mu);
    return p;
}

static int load(const char *path, policy **out)
{
    policy_errors errs = {0};
    int rc = policy_load_file(path, out, &errs);
    for (size_t i = 0; i < errs.n; i++)
        fprintf(stderr, "sandgate: policy: %s\n", errs.items[i]);
    policy_errors_cleanup(&errs);
    return rc;
}

int gw_policy_load_initial(const char *path, sg_err *err)
{
    live_path = path;
    stat(path, &live_stat);
    if (load(path, &live) != 0)
        return sg_err_set(err, SG_EINVAL, "policy %s has errors (above); not starting", path);
    fprintf(stderr, "sandgate: policy %s loaded, sha256 %s\n", path, policy_hash(live));
    return 0;
}

int gw_policy_reload(void)
{
    policy *p = NULL;
    struct stat st;
    stat(live_path, &st);
    if (load(live_path, &p) != 0) {
        pthread_mutex_lock(&live_mu);
        live_stat = st;   /* don't retry the same bad file every second */
        fprintf(stderr, "sandgate: policy reload rejected; keeping sha256 %s\n", policy_hash(live));
        pthread_mutex_unlock(&live_mu);
        return -1;
    }
    pthread_mutex_lock(&live_mu);
    policy *old = live;
    live = p;
    live_stat = st;
    pthread_mutex_unlock(&live_mu);
    fprintf(stderr, "sandgate: policy reloaded, sha256 %s\n", policy_hash(p));
    policy_unref(old);   /* calls in flight keep their own refs */
    return 0;
}

static void *watch_main(void *arg)
{
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    for (;;) {
        struct timespec ts = {1, 0};
        int sig = sigtimedwait(&hup, NULL, &ts);
        struct stat st;
        int changed = stat(live_path, &st) == 0 &&
                      (st.st_mtim.tv_sec != live_stat.st_mtim.tv_sec ||
                       st.st_mtim.tv_nsec != live_stat.st_mtim.tv_nsec ||
                       st.st_size != live_stat.st_size || st.st_ino != live_stat.st_ino);
        if (sig == SIGHUP || changed)
            gw_policy_reload();
    }
    return NULL;
}

void gw_policy_watch_start(void)
{
    pthread_t t;
    pthread_create(&t, NULL, watch_main, NULL);
    pthread_detach(t);
}
