/* journal.c — the host's append-only record of its sandboxes, so that after
 * a restart (crash, SIGKILL, or an orderly stop, which kills every sandbox)
 * the ids of its earlier life answer "lost" instead of "no such sandbox".
 * What the answer says and who may hear it is service.c's and the
 * gateway's business; this file only remembers.
 *
 * File <state_dir>/<host name>.journal, mode 0600, one record a line:
 *   sandgate-journal 1                      header
 *   C <ms> <id> <tenant> <user> <task>      created: answered to its owner
 *   E <id>                                  ended in this life (owner's kill,
 *                                           TTL, idle, its supervisor died)
 *   L <ms> <id> <tenant> <user> <task>      lost: alive when a life ended
 * Fields are percent-escaped (space, '%', control and non-ASCII bytes), so
 * nothing a request carries can forge a record. Records are idempotent (a
 * second C for an id replaces the first; an E for an unknown id is
 * nothing), which lets a rewrite and appends overlap safely.
 *
 * Open (before serving): read the file; every C without an E becomes an L
 * stamped now; L records older than JOURNAL_LOST_KEEP_MS go, and beyond
 * JOURNAL_LOST_MAX the oldest; the rest are written to a new file (fsync,
 * rename, directory fsync). The lost table is then fixed for the process's
 * life, so lookups take no lock.
 *
 * Running: created/ended queue a line under the journal's own mutex (never
 * I/O under H.mu or on the loop thread); one writer thread appends each
 * batch and fdatasyncs it. So a record is on disk milliseconds after its
 * create was answered: a host process that dies loses nothing (the page
 * cache has it); a machine crash may lose the last batch, and then those ids
 * answer the plain NOT_FOUND (a lost C) or "lost" though they ended (a lost
 * E). After JOURNAL_COMPACT_BYTES of appends the writer rewrites the file as
 * the lost records plus a C per live sandbox, so it stays bounded by
 * (live + JOURNAL_LOST_MAX) records plus that slack. A failing disk is
 * logged once and the journal stops writing: ids then answer plain
 * NOT_FOUND after the next restart, which is today's behaviour, not worse. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "host/core/journal.h"

#define JBUCKETS 4096
#define JHEADER "sandgate-journal 1\n"
#define JFIELD_MAX 400   /* escaped field: 128 bytes can grow threefold */

typedef struct jrec {
    struct jrec *next;
    int64_t ms;
    const char *tenant, *user, *task;   /* point into id's allocation */
    char id[];                          /* id\0tenant\0user\0task\0 */
} jrec;

typedef struct jtable {
    jrec *b[JBUCKETS];
    size_t n;
} jtable;

typedef struct jline {
    struct jline *next;
    size_t len;
    char text[];
} jline;

typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

static struct {
    pthread_mutex_t mu;   /* guards live, the queue, fd, appended, stop */
    pthread_cond_t cv;
    int fd;               /* append fd; -1 when off */
    int lock_fd;
    char path[1100], tmp[1120], dir[1024];
    jtable live;
    jtable lost;          /* fixed after open: read without mu */
    jline *head, *tail;
    size_t appended;
    int stop, started, failed;
    pthread_t thread;
} J = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .fd = -1, .lock_fd = -1};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % JBUCKETS;
}

/* ---- tables ---- */

static jrec *rec_new(const char *id, const char *tenant, const char *user, const char *task,
                     int64_t ms)
{
    size_t a = strlen(id) + 1, b = strlen(tenant) + 1, c = strlen(user) + 1, d = strlen(task) + 1;
    jrec *r = malloc(sizeof *r + a + b + c + d);
    if (!r)
        return NULL;
    r->next = NULL;
    r->ms = ms;
    memcpy(r->id, id, a);
    r->tenant = memcpy(r->id + a, tenant, b);
    r->user = memcpy(r->id + a + b, user, c);
    r->task = memcpy(r->id + a + b + c, task, d);
    return r;
}

static jrec **slot(jtable *t, const char *id)
{
    jrec **p = &t->b[hash(id)];
    while (*p && strcmp((*p)->id, id) != 0)
        p = &(*p)->next;
    return p;
}

static void table_put(jtable *t, jrec *r)
{
    jrec **p = slot(t, r->id);
    if (*p) {
        jrec *old = *p;
        r->next = old->next;
        free(old);
    } else {
        t->n++;
    }
    *p = r;
}

static int table_del(jtable *t, const char *id)
{
    jrec **p = slot(t, id);
    if (!*p)
        return -1;
    jrec *r = *p;
    *p = r->next;
    free(r);
    t->n--;
    return 0;
}

static void table_clear(jtable *t)
{
    for (size_t i = 0; i < JBUCKETS; i++)
        while (t->b[i]) {
            jrec *r = t->b[i];
            t->b[i] = r->next;
            free(r);
        }
    t->n = 0;
}

/* ---- text ---- */

static int buf_add(jbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

static void esc(char out[JFIELD_MAX], const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 4 < JFIELD_MAX; p++) {
        if (*p <= ' ' || *p >= 0x7f || *p == '%') {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        } else {
            out[n++] = (char)*p;
        }
    }
    out[n] = 0;
}

static int unhex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* In place; -1 on a malformed escape. */
static int unesc(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r != '%') {
            *w++ = *r;
            continue;
        }
        int hi = unhex(r[1]), lo = hi < 0 ? -1 : unhex(r[2]);
        if (lo < 0)
            return -1;
        *w++ = (char)(hi << 4 | lo);
        r += 2;
    }
    *w = 0;
    return 0;
}

static int rec_line(char *out, size_t cap, char kind, const jrec *r)
{
    char id[JFIELD_MAX], t[JFIELD_MAX], u[JFIELD_MAX], k[JFIELD_MAX];
    esc(id, r->id);
    if (kind == 'E')
        return snprintf(out, cap, "E %s\n", id);
    esc(t, r->tenant);
    esc(u, r->user);
    esc(k, r->task);
    return snprintf(out, cap, "%c %lld %s %s %s %s\n", kind, (long long)r->ms, id, t, u, k);
}

/* One line of the file into the tables; unknown or malformed lines are
 * skipped (a torn last line after a machine crash is one). */
static void parse_line(char *line, jtable *live, jtable *lost)
{
    char *f[6];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(line, " ", &save); tok && n < 6;
         tok = strtok_r(NULL, " ", &save))
        f[n++] = tok;
    if (n == 0 || strlen(f[0]) != 1)
        return;
    for (int i = 1; i < n; i++)
        if (unesc(f[i]) != 0)
            return;
    char kind = f[0][0];
    if (kind == 'E' && n == 2) {
        table_del(live, f[1]);
        return;
    }
    if ((kind != 'C' && kind != 'L') || n != 6)
        return;
    char *end;
    long long ms = strtoll(f[1], &end, 10);
    if (*end || !f[2][0])
        return;
    jrec *r = rec_new(f[2], f[3], f[4], f[5], ms);
    if (!r)
        return;
    if (kind == 'C') {
        table_put(live, r);
    } else {
        table_del(live, r->id);
        table_put(lost, r);
    }
}

/* ---- files ---- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Replace the file with body, durably, and reopen it for appends. */
static int rewrite(const char *body, size_t len, int *fd_out, sg_err *err)
{
    int fd = open(J.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sg_err_errno(err, SG_EINTERNAL, "journal: open(%s)", J.tmp);
    if (fchmod(fd, 0600) != 0 || write_all(fd, body, len) != 0 || fsync(fd) != 0) {
        sg_err_errno(err, SG_EINTERNAL, "journal: write(%s)", J.tmp);
        close(fd);
        unlink(J.tmp);
        return -1;
    }
    close(fd);
    if (rename(J.tmp, J.path) != 0) {
        sg_err_errno(err, SG_EINTERNAL, "journal: rename(%s, %s)", J.tmp, J.path);
        unlink(J.tmp);
        return -1;
    }
    int dfd = open(J.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    fd = open(J.path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return sg_err_errno(err, SG_EINTERNAL, "journal: open(%s)", J.path);
    *fd_out = fd;
    return 0;
}

static int add_table(jbuf *b, const jtable *t, char kind)
{
    char line[6 * JFIELD_MAX];
    for (size_t i = 0; i < JBUCKETS; i++)
        for (const jrec *r = t->b[i]; r; r = r->next) {
            int n = rec_line(line, sizeof line, kind, r);
            if (n < 0 || buf_add(b, line, (size_t)n) != 0)
                return -1;
        }
    return 0;
}

static int cmp_newest(const void *a, const void *b)
{
    int64_t x = (*(jrec *const *)a)->ms, y = (*(jrec *const *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Drop lost records past their keep time, then all but the newest MAX. */
static void prune_lost(int64_t now)
{
    jrec **all = malloc((J.lost.n + 1) * sizeof *all);
    if (!all)
        return;
    size_t n = 0;
    for (size_t i = 0; i < JBUCKETS; i++) {
        for (jrec *r = J.lost.b[i]; r;) {
            jrec *next = r->next;
            r->next = NULL;
            all[n++] = r;
            r = next;
        }
        J.lost.b[i] = NULL;
    }
    J.lost.n = 0;
    qsort(all, n, sizeof *all, cmp_newest);
    for (size_t i = 0; i < n; i++) {
        if (i < JOURNAL_LOST_MAX && now - all[i]->ms <= JOURNAL_LOST_KEEP_MS)
            table_put(&J.lost, all[i]);
        else
            free(all[i]);
    }
    free(all);
}

static int mkdirs(const char *dir, sg_err *err)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return sg_err_errno(err, SG_EINTERNAL, "journal: mkdir(%s)", p);
        *s = '/';
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST)
        return sg_err_errno(err, SG_EINTERNAL, "journal: mkdir(%s)", p);
    return 0;
}

static int read_file(const char *path, jbuf *out, sg_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : sg_err_errno(err, SG_EINTERNAL, "journal: open(%s)", path);
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            return sg_err_errno(err, SG_EINTERNAL, "journal: read(%s)", path);
        }
        if (n == 0)
            break;
        if (buf_add(out, chunk, (size_t)n) != 0) {
            close(fd);
            return sg_err_set(err, SG_EINTERNAL, "journal: %s: out of memory", path);
        }
    }
    close(fd);
    return 0;
}

/* ---- the writer ---- */

/* The writer's only; J.failed is read under mu by enqueue_locked. */
static void fail_once(const char *what)
{
    int e = errno;
    pthread_mutex_lock(&J.mu);
    int first = !J.failed;
    J.failed = 1;
    pthread_mutex_unlock(&J.mu);
    if (first)
        sg_log_warn("journal: %s(%s): %s; no longer recording sandboxes",
                what, J.path, strerror(e));
}

/* Rewrite as lost + live; called by the writer without mu held. */
static void compact(void)
{
    jbuf b = {0};
    buf_add(&b, JHEADER, strlen(JHEADER));
    add_table(&b, &J.lost, 'L');
    pthread_mutex_lock(&J.mu);
    int rc = add_table(&b, &J.live, 'C');
    pthread_mutex_unlock(&J.mu);
    sg_err err;
    int fd = -1;
    if (rc == 0 && b.p && rewrite(b.p, b.n, &fd, &err) == 0) {
        pthread_mutex_lock(&J.mu);
        close(J.fd);
        J.fd = fd;
        J.appended = 0;
        pthread_mutex_unlock(&J.mu);
    } else {
        sg_log_warn("%s", rc == 0 ? err.msg : "journal: out of memory");
        pthread_mutex_lock(&J.mu);
        J.appended = 0;   /* try again after as many bytes, not on every batch */
        pthread_mutex_unlock(&J.mu);
    }
    free(b.p);
}

static void *writer(void *arg)
{
    pthread_mutex_lock(&J.mu);
    for (;;) {
        while (!J.head && !J.stop)
            pthread_cond_wait(&J.cv, &J.mu);
        if (!J.head && J.stop)
            break;
        jline *batch = J.head;
        J.head = J.tail = NULL;
        int fd = J.fd;
        pthread_mutex_unlock(&J.mu);
        jbuf b = {0};
        for (jline *l = batch; l; l = l->next)
            buf_add(&b, l->text, l->len);
        while (batch) {
            jline *n = batch->next;
            free(batch);
            batch = n;
        }
        size_t wrote = 0;
        pthread_mutex_lock(&J.mu);
        int failed = J.failed;
        pthread_mutex_unlock(&J.mu);
        if (!failed && b.p) {
            if (write_all(fd, b.p, b.n) != 0 || fdatasync(fd) != 0)
                fail_once("append");
            else
                wrote = b.n;
        }
        free(b.p);
        pthread_mutex_lock(&J.mu);
        J.appended += wrote;
        int big = J.appended > JOURNAL_COMPACT_BYTES;
        pthread_mutex_unlock(&J.mu);
        if (big)
            compact();
        pthread_mutex_lock(&J.mu);
    }
    pthread_mutex_unlock(&J.mu);
    return arg;
}

/* Under mu. */
static void enqueue_locked(const char *text, size_t len)
{
    if (J.fd < 0 || J.failed)
        return;
    jline *l = malloc(sizeof *l + len + 1);
    if (!l)
        return;
    l->next = NULL;
    l->len = len;
    memcpy(l->text, text, len + 1);
    if (J.tail)
        J.tail->next = l;
    else
        J.head = l;
    J.tail = l;
    pthread_cond_signal(&J.cv);
}

/* ---- API ---- */

static int open_failed(void)
{
    if (J.lock_fd >= 0)
        close(J.lock_fd);
    J.lock_fd = -1;
    table_clear(&J.lost);
    return -1;
}

int host_journal_open(const char *dir, const char *name, sg_err *err)
{
    snprintf(J.dir, sizeof J.dir, "%s", dir);
    snprintf(J.path, sizeof J.path, "%s/%s.journal", dir, name);
    snprintf(J.tmp, sizeof J.tmp, "%s.tmp", J.path);
    if (mkdirs(dir, err) != 0)
        return -1;
    char lock[1120];
    snprintf(lock, sizeof lock, "%s.lock", J.path);
    J.lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (J.lock_fd < 0)
        return sg_err_errno(err, SG_EINTERNAL, "journal: open(%s)", lock);
    if (flock(J.lock_fd, LOCK_EX | LOCK_NB) != 0) {
        sg_err_set(err, SG_EINTERNAL, "journal: %s is locked by another host named %s", lock,
                   name);
        return open_failed();
    }
    jbuf text = {0};
    if (read_file(J.path, &text, err) != 0) {
        free(text.p);
        return open_failed();
    }
    jtable *prev_live = calloc(1, sizeof *prev_live);
    if (!prev_live) {
        free(text.p);
        sg_err_set(err, SG_EINTERNAL, "journal: out of memory");
        return open_failed();
    }
    for (char *save = NULL, *line = text.p ? strtok_r(text.p, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save))
        parse_line(line, prev_live, &J.lost);
    free(text.p);
    /* What was alive when the last life ended is lost, stamped now. */
    int64_t now = wall_ms();
    for (size_t i = 0; i < JBUCKETS; i++)
        while (prev_live->b[i]) {
            jrec *r = prev_live->b[i];
            prev_live->b[i] = r->next;
            r->next = NULL;
            r->ms = now;
            table_put(&J.lost, r);
        }
    free(prev_live);
    prune_lost(now);
    jbuf b = {0};
    if (buf_add(&b, JHEADER, strlen(JHEADER)) != 0 || add_table(&b, &J.lost, 'L') != 0) {
        free(b.p);
        sg_err_set(err, SG_EINTERNAL, "journal: out of memory");
        return open_failed();
    }
    int rc = rewrite(b.p, b.n, &J.fd, err);
    free(b.p);
    if (rc != 0)
        return open_failed();
    if (pthread_create(&J.thread, NULL, writer, NULL) != 0) {
        close(J.fd);
        J.fd = -1;
        sg_err_set(err, SG_EINTERNAL, "journal: pthread_create failed");
        return open_failed();
    }
    J.started = 1;
    if (J.lost.n)
        sg_log_warn("journal: %zu sandboxes of earlier lives answer as lost",
                J.lost.n);
    return 0;
}

void host_journal_close(void)
{
    if (!J.started)
        return;
    pthread_mutex_lock(&J.mu);
    J.stop = 1;
    pthread_cond_signal(&J.cv);
    pthread_mutex_unlock(&J.mu);
    pthread_join(J.thread, NULL);
    J.started = 0;
    pthread_mutex_lock(&J.mu);
    close(J.fd);
    J.fd = -1;
    table_clear(&J.live);
    table_clear(&J.lost);
    J.stop = J.failed = 0;
    J.appended = 0;
    pthread_mutex_unlock(&J.mu);
    close(J.lock_fd);
    J.lock_fd = -1;
}

void host_journal_created(const char *id, const char *tenant, const char *user, const char *task)
{
    jrec *r = rec_new(id, tenant, user, task, wall_ms());
    if (!r)
        return;
    char line[6 * JFIELD_MAX];
    int n = rec_line(line, sizeof line, 'C', r);
    pthread_mutex_lock(&J.mu);
    if (J.fd >= 0 && n > 0) {
        table_put(&J.live, r);
        enqueue_locked(line, (size_t)n);
    } else {
        free(r);
    }
    pthread_mutex_unlock(&J.mu);
}

void host_journal_ended(const char *id)
{
    char eid[JFIELD_MAX], line[JFIELD_MAX + 8];
    esc(eid, id);
    int n = snprintf(line, sizeof line, "E %s\n", eid);
    pthread_mutex_lock(&J.mu);
    if (table_del(&J.live, id) == 0)
        enqueue_locked(line, (size_t)n);
    pthread_mutex_unlock(&J.mu);
}

int host_journal_lost(const char *id, host_lost *out)
{
    if (!id || !id[0])
        return -1;
    jrec *const *p = slot(&J.lost, id);
    if (!*p)
        return -1;
    out->tenant = (*p)->tenant;
    out->user = (*p)->user;
    out->task = (*p)->task;
    out->lost_ms = (*p)->ms;
    return 0;
}
