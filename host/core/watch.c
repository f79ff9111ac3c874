/* watch.c — WatchFiles: inotify on a sandbox's workspace, from the host.
 * A file worker sets a watcher up (host_fwatch_begin: the directory checked
 * beneath the workspace, one inotify instance, a watch per directory added
 * through an O_PATH handle so nothing is opened but directories); then one
 * thread of this module's own (epoll over every watcher's inotify fd and
 * the sandbox's pidfd) turns inotify records into FileEvents. Each watcher
 * has a bounded queue: past WATCH_QUEUE_MAX unsent events new ones are
 * counted and dropped, and an OVERFLOW event with the count goes out once
 * there is room (inotify's own overflow becomes one with count 0). One
 * event is on the wire at a time per watcher, so a slow client fills its
 * own queue and nobody else's. The stream ends OK when the sandbox ends
 * (its pidfd turns readable) or the watched directory goes, and stops when
 * the client cancels or its deadline passes. Never under H.mu; the loop
 * threads only flip flags (on_sent) and wake this thread. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "common/log.h"
#include "host/core/files_internal.h"

#define WATCH_QUEUE_MAX 1024      /* unsent events per watcher */
#define WATCH_DIRS_MAX 4096       /* directories per recursive watcher */
#define WATCHERS_MAX 64           /* all sandboxes (each is an inotify instance) */
#define WATCH_SANDBOX_MAX 8
#define WATCH_DEPTH_MAX 64
#define MASK (IN_CREATE | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
              IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

typedef struct wev {
    int type;
    char *path, *from;     /* owned */
    int is_dir;
    uint64_t dropped;
} wev;

typedef struct wdir {
    int wd;
    char *rel;             /* owned: "" = the watched root, else workspace-relative */
} wdir;

typedef struct watcher {
    struct watcher *next;
    rpc_call *call;        /* owned ref */
    char id[HOST_ID_MAX];
    int ifd, pidfd, wfd;   /* owned: inotify, the sandbox's pidfd, the workspace (O_PATH) */
    int recursive;
    int root_wd;
    char *root;            /* owned: the watched directory, workspace-relative ("" = all) */
    wdir *dirs;            /* owned, n_dirs of cap_dirs */
    size_t n_dirs, cap_dirs;
    int dirs_full;
    wev q[WATCH_QUEUE_MAX];
    size_t qh, qn;
    uint64_t dropped;
    int sending, ending, dead;
    int finished;          /* the call's status is queued (rpc_call_finish) */
    uint32_t cookie;       /* a MOVED_FROM waiting for its MOVED_TO */
    char *moved_from;
    int moved_dir;
} watcher;

static struct {
    pthread_mutex_t mu;    /* the list and every watcher's queue and flags */
    watcher *list;
    size_t n;
    int epfd, evfd;
    pthread_t thr;
    int started, stopping;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .evfd = -1};

static void wake(void)
{
    uint64_t one = 1;
    if (write(W.evfd, &one, sizeof one) < 0) {
        /* the counter is saturated: the thread is awake anyway */
    }
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p)
        return NULL;
    if (a)
        snprintf(p, a + b + 2, "%s/%s", dir, name);
    else
        memcpy(p, name, b + 1);
    return p;
}

/* W.mu held. Takes path and from. */
static void push(watcher *w, int type, char *path, char *from, int is_dir, uint64_t dropped)
{
    if (w->dropped && w->qn < WATCH_QUEUE_MAX) {
        wev *o = &w->q[(w->qh + w->qn++) % WATCH_QUEUE_MAX];
        *o = (wev){SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_OVERFLOW, NULL, NULL, 0, w->dropped};
        w->dropped = 0;
    }
    if (w->qn >= WATCH_QUEUE_MAX) {
        w->dropped++;
        free(path);
        free(from);
        return;
    }
    w->q[(w->qh + w->qn++) % WATCH_QUEUE_MAX] = (wev){type, path, from, is_dir, dropped};
}

static wdir *dir_by_wd(watcher *w, int wd)
{
    for (size_t i = 0; i < w->n_dirs; i++)
        if (w->dirs[i].wd == wd)
            return &w->dirs[i];
    return NULL;
}

/* A watch on rel (a directory beneath the workspace) and, when recursive,
 * on every directory below it. synth: a directory that appeared while
 * watched: what is already in it was made before its watch existed
 * (mkdir -p, an unpacked archive), so each entry gets a CREATE here; one
 * made between the watch and the scan may come twice. */
static void add_tree(watcher *w, const char *rel, int depth, int synth)
{
    if (w->n_dirs >= WATCH_DIRS_MAX) {
        if (!w->dirs_full)
            push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_OVERFLOW, NULL, NULL, 0, 0);
        w->dirs_full = 1;
        return;
    }
    int p = hf_openat2(w->wfd, rel[0] ? rel : ".", O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                       0, HF_BENEATH);
    if (p < 0)
        return;   /* gone or not a directory meanwhile */
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", p);
    /* the magic link is followed to the directory p holds (opened
     * NOFOLLOW beneath the workspace): no name is resolved again */
    int wd = inotify_add_watch(w->ifd, link, MASK);
    int e = errno;
    close(p);
    if (wd < 0) {
        sg_log_warn("sandbox %s: inotify_add_watch(%s): %s", w->id, rel, strerror(e));
        return;
    }
    wdir *have = dir_by_wd(w, wd);
    if (have) {   /* the same directory again (moved in): its new name */
        free(have->rel);
        have->rel = strdup(rel);
    } else {
        if (w->n_dirs == w->cap_dirs) {
            size_t nc = w->cap_dirs ? w->cap_dirs * 2 : 16;
            wdir *nd = realloc(w->dirs, nc * sizeof *nd);
            if (!nd) {
                inotify_rm_watch(w->ifd, wd);
                return;
            }
            w->dirs = nd;
            w->cap_dirs = nc;
        }
        w->dirs[w->n_dirs++] = (wdir){wd, strdup(rel)};
    }
    if (!w->recursive || depth >= WATCH_DEPTH_MAX)
        return;
    int d = hf_openat2(w->wfd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
                       0, HF_BENEATH);
    DIR *dp = d >= 0 ? fdopendir(d) : NULL;
    if (!dp) {
        if (d >= 0)
            close(d);
        return;
    }
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (synth) {
            char *p = join(rel, de->d_name);
            if (p)
                push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_CREATE, p, NULL,
                     de->d_type == DT_DIR, 0);
        }
        if (de->d_type != DT_DIR)
            continue;
        char *sub = join(rel, de->d_name);
        if (sub)
            add_tree(w, sub, depth + 1, synth);
        free(sub);
    }
    closedir(dp);
}

/* Directories under from (itself included) now live under to. */
static void rename_dirs(watcher *w, const char *from, const char *to)
{
    size_t fl = strlen(from);
    for (size_t i = 0; i < w->n_dirs; i++) {
        const char *r = w->dirs[i].rel;
        if (strncmp(r, from, fl) != 0 || (r[fl] != 0 && r[fl] != '/'))
            continue;
        char *n = join(to, r[fl] ? r + fl + 1 : "");
        if (n && !r[fl] && n[strlen(n) - 1] == '/')
            n[strlen(n) - 1] = 0;
        if (n) {
            free(w->dirs[i].rel);
            w->dirs[i].rel = n;
        }
    }
}

static void flush_moved(watcher *w)
{
    if (!w->moved_from)
        return;
    push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_DELETE, w->moved_from, NULL, w->moved_dir, 0);
    w->moved_from = NULL;
}

/* W.mu held: every record inotify has for w now. */
static void read_events(watcher *w)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->ifd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                flush_moved(w);
                push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_OVERFLOW, NULL, NULL, 0, 0);
                continue;
            }
            wdir *d = dir_by_wd(w, ev->wd);
            if (!d)
                continue;
            if (ev->mask & IN_IGNORED) {
                if (ev->wd == w->root_wd)
                    w->ending = 1;
                free(d->rel);
                *d = w->dirs[--w->n_dirs];
                continue;
            }
            if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
                if (ev->wd == w->root_wd)
                    w->ending = 1;
                continue;
            }
            if (!ev->len)
                continue;
            int is_dir = (ev->mask & IN_ISDIR) != 0;
            char *path = join(d->rel, ev->name);
            if (!path)
                continue;
            if (ev->mask & IN_MOVED_FROM) {
                flush_moved(w);
                w->moved_from = path;
                w->moved_dir = is_dir;
                w->cookie = ev->cookie;
            } else if (ev->mask & IN_MOVED_TO) {
                if (w->moved_from && w->cookie == ev->cookie) {
                    if (is_dir)
                        rename_dirs(w, w->moved_from, path);
                    push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_RENAME, path, w->moved_from,
                         is_dir, 0);
                    w->moved_from = NULL;
                } else {
                    flush_moved(w);
                    char *copy = is_dir && w->recursive ? strdup(path) : NULL;
                    push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_CREATE, path, NULL, is_dir, 0);
                    if (copy)
                        add_tree(w, copy, 1, 1);
                    free(copy);
                }
            } else if (ev->mask & IN_CREATE) {
                flush_moved(w);
                char *copy = is_dir && w->recursive ? strdup(path) : NULL;
                push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_CREATE, path, NULL, is_dir, 0);
                if (copy)
                    add_tree(w, copy, 1, 1);
                free(copy);
            } else if (ev->mask & IN_DELETE) {
                flush_moved(w);
                push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_DELETE, path, NULL, is_dir, 0);
            } else if (ev->mask & (IN_CLOSE_WRITE | IN_ATTRIB)) {
                flush_moved(w);
                push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_MODIFY, path, NULL, is_dir, 0);
            } else {
                free(path);
            }
        }
    }
    /* a MOVED_FROM with no MOVED_TO in the same read: moved out of sight */
    flush_moved(w);
}

static void on_event_sent(void *arg, int ok)
{
    watcher *w = arg;
    pthread_mutex_lock(&W.mu);
    w->sending = 0;
    if (!ok)
        w->dead = 1;
    pthread_mutex_unlock(&W.mu);
    wake();
}

static void watcher_free(watcher *w)
{
    if (w->ifd >= 0)
        close(w->ifd);
    if (w->pidfd >= 0)
        close(w->pidfd);
    if (w->wfd >= 0)
        close(w->wfd);
    for (size_t i = 0; i < w->qn; i++) {
        wev *e = &w->q[(w->qh + i) % WATCH_QUEUE_MAX];
        free(e->path);
        free(e->from);
    }
    for (size_t i = 0; i < w->n_dirs; i++)
        free(w->dirs[i].rel);
    free(w->dirs);
    free(w->moved_from);
    free(w->root);
    if (w->call)
        rpc_call_unref(w->call);
    free(w);
}

/* W.mu held: the next event out, the end, or the watcher freed. Returns
 * the message to send (outside the lock), or NULL. */
static grpc_byte_buffer *pump(watcher *w, int *finish)
{
    *finish = 0;
    if (w->sending || w->dead)
        return NULL;
    if (rpc_call_cancelled(w->call)) {
        w->dead = 1;
        return NULL;
    }
    if (w->qn == 0 && w->dropped)
        push(w, SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_OVERFLOW, NULL, NULL, 0, 0);
    if (w->qn == 0) {
        if (w->ending) {
            *finish = 1;
            w->dead = 1;
        }
        return NULL;
    }
    wev e = w->q[w->qh];
    w->qh = (w->qh + 1) % WATCH_QUEUE_MAX;
    w->qn--;
    Sandgate__V1__FileEvent fe;
    sandgate__v1__file_event__init(&fe);
    fe.type = e.type;
    fe.path = e.path ? e.path : "";
    fe.from_path = e.from ? e.from : "";
    fe.is_dir = e.is_dir;
    fe.dropped = e.dropped;
    grpc_byte_buffer *bb = rpc_pack(&fe.base);
    free(e.path);
    free(e.from);
    w->sending = 1;
    return bb;
}

static void *watch_main(void *arg)
{
    (void)arg;
    struct epoll_event evs[32];
    for (;;) {
        int n = epoll_wait(W.epfd, evs, 32, 200);
        pthread_mutex_lock(&W.mu);
        if (W.stopping) {
            pthread_mutex_unlock(&W.mu);
            break;
        }
        for (int i = 0; i < n; i++) {
            uintptr_t tag = (uintptr_t)evs[i].data.ptr;
            if (tag == 0) {
                uint64_t v;
                if (read(W.evfd, &v, sizeof v) < 0) {
                    /* nothing pending */
                }
                continue;
            }
            watcher *w = (watcher *)(tag & ~(uintptr_t)1);
            if (tag & 1)
                w->ending = 1;   /* the sandbox ended */
            else
                read_events(w);
        }
        /* send what can go, end and free what is done */
        for (watcher **pp = &W.list; *pp;) {
            watcher *w = *pp;
            int finish;
            grpc_byte_buffer *bb = pump(w, &finish);
            if (bb) {
                /* rpc_call_send may run on_event_sent (ok=0) at once: not under W.mu */
                pthread_mutex_unlock(&W.mu);
                int rc = rpc_call_send(w->call, bb, on_event_sent, w);
                pthread_mutex_lock(&W.mu);
                if (rc != 0) {
                    w->sending = 0;
                    w->dead = 1;
                }
            }
            if (finish) {
                rpc_call_finish(w->call, GRPC_STATUS_OK, NULL);
                w->finished = 1;
            }
            if (w->dead && !w->sending) {
                /* Every dispatched call must get a status: the call holds a
                 * ref for it until that status batch completes (rpc/call.c),
                 * and our unref in watcher_free is only the watcher's own.
                 * A watch that died (client gone, a send failed) still
                 * finishes; to a cancelled call the status goes nowhere, but
                 * without it the call, its grpc_call and the server leak. */
                if (!w->finished) {
                    rpc_call_finish(w->call, GRPC_STATUS_CANCELLED, "the watch ended");
                    w->finished = 1;
                }
                *pp = w->next;
                W.n--;
                epoll_ctl(W.epfd, EPOLL_CTL_DEL, w->ifd, NULL);
                epoll_ctl(W.epfd, EPOLL_CTL_DEL, w->pidfd, NULL);
                watcher_free(w);
                continue;
            }
            pp = &w->next;
        }
        pthread_mutex_unlock(&W.mu);
    }
    return NULL;
}

int host_fwatch_start(sg_err *err)
{
    W.epfd = epoll_create1(EPOLL_CLOEXEC);
    W.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (W.epfd < 0 || W.evfd < 0)
        return sg_err_errno(err, SG_EINTERNAL, "epoll_create1/eventfd(watch)");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(W.epfd, EPOLL_CTL_ADD, W.evfd, &ev) != 0)
        return sg_err_errno(err, SG_EINTERNAL, "epoll_ctl(watch eventfd)");
    if (pthread_create(&W.thr, NULL, watch_main, NULL) != 0)
        return sg_err_set(err, SG_EINTERNAL, "pthread_create(watch)");
    W.started = 1;
    return 0;
}

void host_fwatch_stop(void)
{
    if (!W.started)
        return;
    pthread_mutex_lock(&W.mu);
    W.stopping = 1;
    pthread_mutex_unlock(&W.mu);
    wake();
    pthread_join(W.thr, NULL);
    W.started = 0;
    while (W.list) {
        watcher *w = W.list;
        W.list = w->next;
        rpc_call_finish(w->call, GRPC_STATUS_UNAVAILABLE, "the host is shutting down");
        watcher_free(w);   /* a send in flight completes with the call's cancel */
    }
}

int host_fwatch_begin(const host_file_target *t, const Sandgate__V1__WatchFilesRequest *r,
                     rpc_call *c, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (!W.started)
        return sg_err_set(err, SG_EUNAVAIL, "file watches are not running on this host");
    if (host_path_clean_dir(r->path, rel, sizeof rel, err) != 0)
        return err->code;
    pthread_mutex_lock(&W.mu);
    size_t mine = 0;
    for (watcher *x = W.list; x; x = x->next)
        mine += strcmp(x->id, t->id) == 0;
    size_t total = W.n;
    pthread_mutex_unlock(&W.mu);
    if (total >= WATCHERS_MAX)
        return sg_err_set(err, SG_EUNAVAIL, "the host has %d file watches, its most; retry later",
                          WATCHERS_MAX);
    if (mine >= WATCH_SANDBOX_MAX)
        return sg_err_set(err, SG_EQUOTA, "sandbox %s has %d file watches, the most a sandbox may "
                          "hold", t->id, WATCH_SANDBOX_MAX);
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    struct stat st;
    int p = hf_openat2(wfd, rel, O_PATH | O_CLOEXEC | O_NOFOLLOW, 0, HF_BENEATH);
    int rc = p < 0 ? hf_path_error(r->path, errno, err) : 0;
    if (rc == 0 && fstat(p, &st) != 0)
        rc = hf_path_error(r->path, errno, err);
    if (p >= 0)
        close(p);
    if (rc == 0 && hf_is_special(st.st_mode))
        rc = hf_special(r->path, st.st_mode, err);
    else if (rc == 0 && !S_ISDIR(st.st_mode))
        rc = sg_err_set(err, SG_EINVAL, "path \"%.200s\" is not a directory", r->path);
    if (rc != 0) {
        close(wfd);
        return rc;
    }
    watcher *w = calloc(1, sizeof *w);
    if (!w) {
        close(wfd);
        return sg_err_set(err, SG_EUNAVAIL, "the host is out of memory; retry");
    }
    w->wfd = wfd;
    w->pidfd = -1;
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    w->recursive = r->recursive;
    w->root = strdup(strcmp(rel, ".") == 0 ? "" : rel);
    snprintf(w->id, sizeof w->id, "%s", t->id);
    if (w->ifd < 0 || !w->root) {
        sg_log_warn("sandbox %s: inotify_init1: %s", t->id, strerror(errno));
        watcher_free(w);
        return sg_err_set(err, SG_EUNAVAIL, "the host cannot watch files now; retry later");
    }
    pthread_mutex_lock(&W.mu);   /* add_tree may queue an overflow */
    add_tree(w, w->root, 0, 0);
    pthread_mutex_unlock(&W.mu);
    if (w->n_dirs == 0) {
        watcher_free(w);
        return sg_err_set(err, SG_ENOTFOUND, "no directory \"%.200s\" in the workspace", r->path);
    }
    w->root_wd = w->dirs[0].wd;
    w->call = rpc_call_ref(c);
    rpc_call_watch_close(c);   /* so rpc_call_cancelled sees the client go */
    w->pidfd = t->pidfd;
    struct epoll_event ie = {.events = EPOLLIN, .data.ptr = w};
    struct epoll_event pe = {.events = EPOLLIN, .data.ptr = (void *)((uintptr_t)w | 1)};
    pthread_mutex_lock(&W.mu);
    /* READY first: every change from now on is seen */
    w->q[w->qn++] = (wev){SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_READY, NULL, NULL, 1, 0};
    if (epoll_ctl(W.epfd, EPOLL_CTL_ADD, w->ifd, &ie) != 0 ||
        epoll_ctl(W.epfd, EPOLL_CTL_ADD, w->pidfd, &pe) != 0) {
        epoll_ctl(W.epfd, EPOLL_CTL_DEL, w->ifd, NULL);
        pthread_mutex_unlock(&W.mu);
        w->pidfd = -1;   /* still the job's */
        watcher_free(w);
        return sg_err_errno(err, SG_EUNAVAIL, "epoll_ctl(watch)");
    }
    w->next = W.list;
    W.list = w;
    W.n++;
    pthread_mutex_unlock(&W.mu);
    wake();
    return 0;
}
