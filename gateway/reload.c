/* reload.c — the live policy: loaded in full and validated, then swapped
 * with one pointer store; a call holds a ref to the policy it started
 * with. An invalid file is logged and rejected, and the old policy stays
 * live (keep-last-good).
 *
 * What triggers a reload (the watch thread; docs/policy.md "Shipping a
 * policy"):
 *   - SIGHUP, always;
 *   - inotify on the policy's directory (and on its target's, when the path
 *     is a symlink elsewhere): IN_CLOSE_WRITE (a writer closed the file),
 *     IN_MOVED_TO / IN_CREATE / IN_DELETE (a rename over it, or a symlink
 *     swap such as a Kubernetes ConfigMap's `..data`). IN_MODIFY is ignored
 *     on purpose: a file written in place in two chunks is a valid YAML
 *     prefix after the first, and loading that prefix once cut a tenant off.
 * A burst of events is debounced (RELOAD_QUIET_MS without a new one), then
 * the file is read until two reads RELOAD_REREAD_MS apart are
 * byte-identical, and only those bytes are validated and swapped in.
 * Without inotify (it failed to start) a 1 s stat poll stands in: it reloads
 * once the file's stat stood still for a whole period, then re-reads the
 * same way. The thread never holds live_mu while it
 * reads or parses, so serving threads never wait for it.
 *
 * With `api_keys_file` (a Secret beside the policy's ConfigMap) the keys
 * file is one more input of the same load: both are watched the same way,
 * both read until settled, and a change in either builds and validates a
 * new policy from both (policy_load_buffers); an error in either keeps the
 * last good pair. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "gateway/gw.h"
#include "policy/lint.h"

#define RELOAD_QUIET_MS 150     /* no event for this long ends a burst */
#define RELOAD_REREAD_MS 50     /* gap between the reads that must agree */
#define RELOAD_READS_MAX 40     /* then give up on this round (about 2 s) */
#define RELOAD_POLL_MS 1000     /* the stat poll without inotify */
#define RELOAD_WATCH_MASK (IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF)

static policy *live;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static const char *live_path;
static const char *keys_path;   /* NULL: no keys file */
/* Watch thread only: sha256 of the bytes last tried (loaded or rejected),
 * so an unrelated event in the directory does not reload the same bytes. */
static char tried_hash[65];

policy *gw_policy_acquire(void)
{
    pthread_mutex_lock(&live_mu);
    policy *p = policy_ref(live);
    pthread_mutex_unlock(&live_mu);
    return p;
}

static void log_errors(policy_errors *errs)
{
    for (size_t i = 0; i < errs->n; i++)
        sg_log_warn("policy: %s", errs->items[i]);
    policy_errors_cleanup(errs);
}

/* What tried_hash compares: the policy's bytes, and the keys file's. */
static void inputs_hash(const char *buf, size_t len, const char *kbuf, size_t klen, char out[65])
{
    if (!keys_path) {
        policy_hash_key(buf, len, out);
        return;
    }
    char both[130];
    policy_hash_key(buf, len, both);
    policy_hash_key(kbuf, klen, both + 64);
    policy_hash_key(both, 128, out);
}

/* Build from the bytes of both inputs; *out NULL on any error (logged). */
static int load_bytes(const char *buf, size_t len, const char *kbuf, size_t klen, policy **out)
{
    policy_errors errs = {0};
    int rc = keys_path ? policy_load_buffers(live_path, buf, len, keys_path, kbuf, klen, out, &errs)
                       : policy_load_buffer(live_path, buf, len, out, &errs);
    log_errors(&errs);
    return rc;
}

static void log_loaded(const char *what, const policy *p, const char *kbuf, size_t klen)
{
    if (!keys_path) {
        sg_log_info("policy %s%s, sha256 %s", what[0] ? live_path : "", what[0] ? what : "reloaded",
                    policy_hash(p));
        return;
    }
    char kh[65];
    policy_hash_key(kbuf, klen, kh);
    sg_log_info("policy %s%s, sha256 %s; API keys from %s, sha256 %s", what[0] ? live_path : "",
                what[0] ? what : "reloaded", policy_hash(p), keys_path, kh);
}

int gw_policy_load_initial(const char *path, const char *keys, sg_err *err)
{
    live_path = path;
    keys_path = keys;
    char *buf = NULL, *kbuf = NULL;
    size_t len = 0, klen = 0;
    sg_err rerr;
    if (policy_read_file(path, &buf, &len, &rerr) != 0) {
        sg_log_warn("policy: %s", rerr.msg);
        return sg_err_set(err, SG_EINVAL, "policy %s cannot be read (above); not starting", path);
    }
    if (keys && policy_read_file(keys, &kbuf, &klen, &rerr) != 0) {
        sg_log_warn("api_keys_file: %s", rerr.msg);
        free(buf);
        return sg_err_set(err, SG_EINVAL, "API keys file %s cannot be read (above); not starting",
                          keys);
    }
    int rc = load_bytes(buf, len, kbuf, klen, &live);
    inputs_hash(buf, len, kbuf, klen, tried_hash);
    free(buf);
    if (rc != 0) {
        if (kbuf)
            explicit_bzero(kbuf, klen);
        free(kbuf);
        return sg_err_set(err, SG_EINVAL, "policy %s%s%s has errors (above); not starting", path,
                          keys ? " with API keys from " : "", keys ? keys : "");
    }
    log_loaded(" loaded", live, kbuf, klen);
    free(kbuf);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The file's bytes once two reads RELOAD_REREAD_MS apart agree: a writer
 * still at it changes them between the reads. NULL when they never settle
 * (logged) or the file cannot be read (logged; e.g. mid-rename). */
static char *read_settled(const char *path, size_t *len)
{
    char *prev = NULL;
    size_t prev_len = 0;
    sg_err err = {0};
    for (int i = 0; i < RELOAD_READS_MAX; i++) {
        char *cur;
        size_t cur_len;
        if (policy_read_file(path, &cur, &cur_len, &err) != 0) {
            free(prev);
            prev = NULL;   /* a swap in progress: start over */
        } else if (prev && cur_len == prev_len && memcmp(cur, prev, cur_len) == 0) {
            free(prev);
            *len = cur_len;
            return cur;
        } else {
            free(prev);
            prev = cur;
            prev_len = cur_len;
        }
        sleep_ms(RELOAD_REREAD_MS);
    }
    free(prev);
    if (err.msg[0])
        sg_log_warn("policy: %s; keeping sha256 %s", err.msg,
                policy_hash(live));
    else
        sg_log_warn("policy %s kept changing for %d ms; not reloaded, "
            "keeping sha256 %s", path, RELOAD_READS_MAX * RELOAD_REREAD_MS,
                policy_hash(live));
    return NULL;
}

/* Validate bytes in full and swap them in. force: even when they are the
 * bytes tried last (SIGHUP asks for it). */
static int reload_bytes(const char *buf, size_t len, const char *kbuf, size_t klen, int force)
{
    char h[65];
    inputs_hash(buf, len, kbuf, klen, h);
    if (!force && strcmp(h, tried_hash) == 0)
        return 0;
    memcpy(tried_hash, h, sizeof h);
    policy *p = NULL;
    int rc = load_bytes(buf, len, kbuf, klen, &p);
    if (rc != 0) {
        sg_log_warn("policy reload rejected; keeping sha256 %s",
                policy_hash(live));
        gw_metrics_reload(0);
        return -1;
    }
    pthread_mutex_lock(&live_mu);
    policy *old = live;
    live = p;
    pthread_mutex_unlock(&live_mu);
    log_loaded("", p, kbuf, klen);
    gw_metrics_reload(1);
    policy_unref(old);   /* calls in flight keep their own refs */
    return 0;
}

static int reload(int force)
{
    size_t len = 0, klen = 0;
    char *buf = read_settled(live_path, &len), *kbuf = NULL;
    if (!buf)
        return -1;
    if (keys_path && !(kbuf = read_settled(keys_path, &klen))) {
        free(buf);
        return -1;
    }
    int rc = reload_bytes(buf, len, kbuf, klen, force);
    free(buf);
    if (kbuf)
        explicit_bzero(kbuf, klen);
    free(kbuf);
    return rc;
}

int gw_policy_reload(void)
{
    return reload(1);
}

/* (Re)add the watches: the path's directory, and its target's when the path
 * is a symlink into another one. Adding a watched directory again is a
 * no-op; a removed directory's watch goes by itself (IN_IGNORED). */
static int add_watches_for(int in, const char *path)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    int n = inotify_add_watch(in, dirname(a), RELOAD_WATCH_MASK) >= 0;
    if (realpath(path, b)) {
        char *d = dirname(b);
        snprintf(a, sizeof a, "%s", path);
        if (strcmp(d, dirname(a)) != 0)
            n += inotify_add_watch(in, d, RELOAD_WATCH_MASK) >= 0;
    }
    return n;
}

/* Both inputs' watches; 0 when either has none left (then: the poll). */
static int add_watches(int in)
{
    int n = add_watches_for(in, live_path);
    if (keys_path && n)
        n = add_watches_for(in, keys_path) ? n : 0;
    return n;
}

/* Drain what inotify has; 1 if any event is one we reload on. */
static int drain(int in)
{
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    int hit = 0;
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            hit |= (e->mask & (RELOAD_WATCH_MASK | IN_Q_OVERFLOW)) != 0;
            p += sizeof *e + e->len;
        }
    return hit;
}

static int stat_changed_one(const char *path, struct stat *last)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    int changed = st.st_mtim.tv_sec != last->st_mtim.tv_sec ||
                  st.st_mtim.tv_nsec != last->st_mtim.tv_nsec || st.st_size != last->st_size ||
                  st.st_ino != last->st_ino;
    *last = st;
    return changed;
}

static int stat_changed(struct stat last[2])
{
    int a = stat_changed_one(live_path, &last[0]);
    int b = keys_path && stat_changed_one(keys_path, &last[1]);
    return a || b;
}

static void *watch_main(void *arg)
{
    (void)arg;
    sigset_t hup;
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    int sfd = signalfd(-1, &hup, SFD_CLOEXEC | SFD_NONBLOCK);
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in >= 0 && add_watches(in) == 0) {
        close(in);
        in = -1;
    }
    if (in < 0)
        sg_log_warn("policy: no inotify watch on %s (%s); polling it every "
            "%d ms", live_path, strerror(errno), RELOAD_POLL_MS);
    struct stat last[2] = {{0}};
    stat_changed(last);
    int pending = 0;   /* a change seen, waiting for RELOAD_QUIET_MS of quiet */
    for (;;) {
        struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = in, .events = POLLIN}};
        int timeout = in < 0 ? RELOAD_POLL_MS : pending ? RELOAD_QUIET_MS : -1;
        int r = poll(pf, 2, timeout);
        if (r < 0 && errno != EINTR) {
            sleep_ms(RELOAD_POLL_MS);   /* never spin */
            continue;
        }
        if (r > 0 && (pf[0].revents & POLLIN)) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si)
                ;
            gw_policy_reload();
            pending = 0;
            stat_changed(last);
            if (in >= 0)
                drain(in), add_watches(in);
            continue;
        }
        if (r > 0 && in >= 0 && (pf[1].revents & POLLIN)) {
            pending |= drain(in);
            continue;   /* the quiet period starts again */
        }
        if (in < 0) {   /* the poll: reload once the file stood still for a whole period */
            if (stat_changed(last))
                pending = 1;
            else if (pending) {
                pending = 0;
                reload(0);
            }
            continue;
        }
        if (r == 0 && pending) {
            pending = 0;
            reload(0);
            if (add_watches(in) == 0) {   /* the directory went away: poll from now on */
                sg_log_info("policy: %s's directory is gone; polling the file "
            "every %d ms", live_path, RELOAD_POLL_MS);
                close(in);
                in = -1;
                stat_changed(last);
            }
        }
    }
    return NULL;
}

void gw_policy_watch_start(void)
{
    pthread_t t;
    pthread_create(&t, NULL, watch_main, NULL);
    pthread_detach(t);
}
