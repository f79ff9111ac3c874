/* relay.c — the shim as the host sees it: sandgate-init's messages.
 *
 * Owns: the phases POOLED/ACTIVATE/READY, the table of contexts and exec
 * children, their channels and the host-side fds (a SEQPACKET socketpair and
 * two pipes per context, two pipes per exec, exactly as sandgate-init hands
 * them over), background processes (PROC: a stdin pipe whose write end the
 * host gets, and one or two output pipes; they share the exec table and its
 * EXIT / KILLEXEC; SIGPROC and RESIZE pass through), egress connections
 * (EGRESS + fd), and the deadline on every
 * answer the agent owes: an agent that does not answer a ctx / exec / kill /
 * activate in time is hung (a killed stub hangs the Sentry, issue 14), and
 * the shim exits so the host tears the sandbox down. The ACTIVATE JSON
 * carries secrets: it is never logged, and wiped once forwarded. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "host/init/init.h"
#include "relay.h"

#define ANSWER_MS 10000          /* ctx / exec / activate / kill answers */
#define LOG_PER_WINDOW 20        /* agent log lines per 10 s */

static char hostbuf[SHIM_HOST_MSG_MAX + 1];

int64_t shim_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fatal(relay *r, const char *msg)
{
    snprintf(r->err, sizeof r->err, "%s", msg);
    return -1;
}

static void send_host(relay *r, const char *text, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 3)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    /* The host reads its socket from a loop that never blocks on us, so a
     * full buffer clears at once; one that stays full for a second means
     * the host is wedged or gone, and a lost message would leave a context
     * or exec hanging: the shim exits instead (the host tears down). */
    for (int tries = 0;; tries++) {
        if (sendmsg(r->sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
            return;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN || tries == 100) {
            sg_log_warn("shim %s: the host does not take messages (%s); exiting", r->cfg->name,
                        strerror(errno));
            _exit(1);
        }
        struct pollfd p = {.fd = r->sock, .events = POLLOUT};
        poll(&p, 1, 10);
    }
}

void relay_send_text(relay *r, const char *text)
{
    char m[1200];
    snprintf(m, sizeof m, "%s", text);
    for (char *p = m; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    send_host(r, m, NULL, 0);
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

static relay_child *find(relay_child *tab, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (tab[i].state != RELAY_FREE && strcmp(tab[i].id, id) == 0)
            return &tab[i];
    return NULL;
}

static relay_child *slot(relay_child *tab, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tab[i].state == RELAY_FREE)
            return &tab[i];
    return NULL;
}

static void child_free(relay *r, relay_child *c, int nchans)
{
    close_fds(c->host_fds, 3);
    for (int i = 0; i < nchans; i++) {
        mux_chan *ch = mux_chan_find(r->m, c->chans[i]);
        if (ch)
            mux_chan_drop(r->m, ch);
    }
    memset(c, 0, sizeof *c);
    c->host_fds[0] = c->host_fds[1] = c->host_fds[2] = -1;
}

/* A pipe: the host reads [0]; the shim writes [1] as channel chan. */
static int pipe_chan(relay *r, uint32_t chan, int *host_end)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    if (!mux_chan_add(r->m, chan, MUX_PIPE, p[1])) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    *host_end = p[0];
    return 0;
}

/* A stdin pipe: the host writes [1] (in_w); the shim reads [0] as channel
 * chan and relays it within the agent's window (mux.c MUX_INPIPE). */
static int inpipe_chan(relay *r, uint32_t chan, int *host_end)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    if (!mux_chan_add(r->m, chan, MUX_INPIPE, p[0])) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    *host_end = p[1];
    return 0;
}

/* A context's three channels and the host's ends of them. */
static int ctx_make(relay *r, relay_child *c, uint32_t base)
{
    int sv[2];
    c->host_fds[0] = c->host_fds[1] = c->host_fds[2] = -1;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (!mux_chan_add(r->m, base, MUX_SEQ, sv[1])) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    c->host_fds[0] = sv[0];
    c->chans[0] = base;
    c->chans[1] = base + 1;
    c->chans[2] = base + 2;
    if (pipe_chan(r, base + 1, &c->host_fds[1]) != 0 || pipe_chan(r, base + 2, &c->host_fds[2]) != 0)
        return -1;
    return 0;
}

int relay_init(relay *r, const shim_config *cfg, mux *m, int sock)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->m = m;
    r->sock = sock;
    r->next_chan = 4;
    for (size_t i = 0; i < SHIM_MAX_CTX; i++)
        r->ctx[i].host_fds[0] = r->ctx[i].host_fds[1] = r->ctx[i].host_fds[2] = -1;
    for (size_t i = 0; i < SHIM_MAX_EXEC; i++)
        r->exec[i].host_fds[0] = r->exec[i].host_fds[1] = r->exec[i].host_fds[2] = -1;
    relay_child *c = &r->ctx[0];
    if (ctx_make(r, c, 1) != 0)
        return fatal(r, "the default context's channels: out of fds");
    c->state = RELAY_PENDING;   /* held until READY */
    snprintf(c->id, sizeof c->id, "default");
    r->phase = RELAY_STARTING;
    r->phase_deadline_ms = shim_now_ms() + (int64_t)cfg->start_timeout_s * 1000;
    return 0;
}

/* ---- to the agent ---- */

typedef struct jb {
    char *b;
    size_t n, cap;
} jb;

static void jraw(jb *j, const char *s)
{
    size_t k = strlen(s);
    if (j->n + k + 1 > j->cap) {
        j->cap = (j->n + k + 1) * 2;
        j->b = realloc(j->b, j->cap);
    }
    memcpy(j->b + j->n, s, k + 1);
    j->n += k;
}

static void jstr(jb *j, const char *key, const char *v)
{
    char k[64];
    snprintf(k, sizeof k, ",\"%s\":", key);
    jraw(j, k);
    shim_json_quote(&j->b, &j->n, &j->cap, v, strlen(v));
}

static void jnum(jb *j, const char *key, long long v)
{
    char k[96];
    snprintf(k, sizeof k, ",\"%s\":%lld", key, v);
    jraw(j, k);
}

/* -1 (nothing sent) when the message is past what the agent takes. */
static int jsend(relay *r, jb *j)
{
    jraw(j, "}");
    int rc = j->n <= SHIM_JSON_TO_AGENT_MAX ? 0 : -1;
    if (rc == 0)
        mux_control(r->m, j->b, j->n);
    free(j->b);
    return rc;
}

static jb jop(const char *op)
{
    jb j = {0};
    char s[64];
    snprintf(s, sizeof s, "{\"op\":\"%s\"", op);
    jraw(&j, s);
    return j;
}

/* ---- the host's messages ---- */

static bool good_id(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > SHIM_ID_MAX)
        return false;
    for (const char *p = id; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            return false;
    return true;
}

static void forward_activation(relay *r)
{
    /* {"op":"activate", + the host's object without its '{' */
    const char *p = r->activation, *end = p + r->activation_len;
    while (p < end && *p != '{')
        p++;
    p++;
    const char *q = p;
    while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r'))
        q++;
    size_t rest = (size_t)(end - p);
    size_t n = 17 + rest + 2;
    char *msg = malloc(n);
    size_t k = (size_t)snprintf(msg, n, "{\"op\":\"activate\"");
    if (q < end && *q != '}')
        msg[k++] = ',';
    memcpy(msg + k, p, rest);
    k += rest;
    mux_control(r->m, msg, k);
    explicit_bzero(msg, n);
    free(msg);
    explicit_bzero(r->activation, r->activation_len);
    free(r->activation);
    r->activation = NULL;
    r->phase = RELAY_ACTIVATING;
    r->phase_deadline_ms = shim_now_ms() + ANSWER_MS;
}

static int on_activate(relay *r, const char *json, size_t n)
{
    if (r->activation || r->phase >= RELAY_ACTIVATING)
        return 0;   /* one activation per sandbox; the rest is ignored, as sandgate-init does */
    init_activation a;
    char err[512];
    if (init_activation_parse(json, n, &a, err, sizeof err) != 0) {
        char m[600];
        snprintf(m, sizeof m, "ERR %s", err);
        relay_send_text(r, m);
        return fatal(r, "ACTIVATE rejected");
    }
    r->egress = a.egress;
    init_activation_cleanup(&a);
    r->activation = malloc(n);
    memcpy(r->activation, json, n);
    r->activation_len = n;
    if (r->phase == RELAY_HELD)
        forward_activation(r);
    return 0;
}

/* CTX <id> [python|javascript] */
static void on_ctx(relay *r, char *id)
{
    char m[300];
    char *language = strchr(id, ' ');
    if (language)
        *language++ = 0;
    if (!language || !*language)
        language = "python";
    if (!good_id(id))
        return;
    if (strcmp(language, "python") != 0 && strcmp(language, "javascript") != 0) {
        snprintf(m, sizeof m, "CTXERR %s unknown language", id);
        relay_send_text(r, m);
        return;
    }
    if (find(r->ctx, SHIM_MAX_CTX, id)) {
        snprintf(m, sizeof m, "CTXERR %s context still running", id);
        relay_send_text(r, m);
        return;
    }
    relay_child *c = slot(r->ctx, SHIM_MAX_CTX);
    uint32_t base = r->next_chan;
    if (!c || base > SHIM_EGRESS_CHAN_BASE - 8) {
        snprintf(m, sizeof m, "CTXERR %s too many contexts", id);
        relay_send_text(r, m);
        return;
    }
    r->next_chan += 3;
    if (ctx_make(r, c, base) != 0) {
        child_free(r, c, 3);
        snprintf(m, sizeof m, "CTXERR %s out of file descriptors", id);
        relay_send_text(r, m);
        return;
    }
    c->state = RELAY_PENDING;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->deadline_ms = shim_now_ms() + ANSWER_MS;
    jb j = jop("ctx");
    jstr(&j, "id", id);
    jstr(&j, "language", language);
    jnum(&j, "sock", c->chans[0]);
    jnum(&j, "out", c->chans[1]);
    jnum(&j, "err", c->chans[2]);
    jsend(r, &j);
}

static void on_exec(relay *r, const char *id, const char *command)
{
    char m[300];
    if (!good_id(id))
        return;
    if (find(r->exec, SHIM_MAX_EXEC, id)) {
        snprintf(m, sizeof m, "EXECERR %s exec still running", id);
        relay_send_text(r, m);
        return;
    }
    relay_child *c = slot(r->exec, SHIM_MAX_EXEC);
    uint32_t base = r->next_chan;
    if (!c || base > SHIM_EGRESS_CHAN_BASE - 8) {
        snprintf(m, sizeof m, "EXECERR %s too many execs", id);
        relay_send_text(r, m);
        return;
    }
    r->next_chan += 2;
    c->nchans = 2;
    c->proc = false;
    c->chans[0] = base;
    c->chans[1] = base + 1;
    if (pipe_chan(r, base, &c->host_fds[0]) != 0 || pipe_chan(r, base + 1, &c->host_fds[1]) != 0) {
        child_free(r, c, 2);
        snprintf(m, sizeof m, "EXECERR %s out of file descriptors", id);
        relay_send_text(r, m);
        return;
    }
    c->state = RELAY_PENDING;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->deadline_ms = shim_now_ms() + ANSWER_MS;
    jb j = jop("exec");
    jstr(&j, "id", id);
    jstr(&j, "command", command);
    jnum(&j, "out", c->chans[0]);
    jnum(&j, "err", c->chans[1]);
    if (jsend(r, &j) != 0) {
        child_free(r, c, 2);
        snprintf(m, sizeof m, "EXECERR %s command too long", id);
        relay_send_text(r, m);
    }
}

/* A decimal in [lo, hi], nothing else (no sign, no spaces). */
static bool parse_num(const char *s, long lo, long hi, long *out)
{
    long v = 0;
    if (!s || !*s || strlen(s) > 4)
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Cut the next space-separated word off *rest (NULL when there is none). */
static char *word(char **rest)
{
    char *w = *rest;
    if (!w)
        return NULL;
    char *sp = strchr(w, ' ');
    if (sp) {
        *sp = 0;
        *rest = sp + 1;
    } else {
        *rest = NULL;
    }
    return w;
}

#define PTY_DIM_MAX 1000

/* PROC <id> <mode> <rows> <cols> <command>: refused here with PROCERR when
 * the fields are bad (the host checks first; this is the supervisor's
 * own check), else the agent's proc with the new channels. */
static void on_proc(relay *r, char *rest)
{
    char m[400];
    const char *id = word(&rest);
    if (!id || !good_id(id))
        return;   /* nothing to answer to (as a bad EXEC id) */
    const char *mode = word(&rest);
    const char *rows_s = word(&rest);
    const char *cols_s = word(&rest);
    const char *command = rest ? rest : "";
    long rows = 0, cols = 0;
    bool pty = mode && strcmp(mode, "t") == 0;
    const char *bad = NULL;
    if (!mode || (!pty && strcmp(mode, "p") != 0))
        bad = "mode: p or t expected";
    else if (!parse_num(rows_s, pty ? 1 : 0, PTY_DIM_MAX, &rows))
        bad = "rows: 1..1000 expected";
    else if (!parse_num(cols_s, pty ? 1 : 0, PTY_DIM_MAX, &cols))
        bad = "cols: 1..1000 expected";
    if (bad) {
        snprintf(m, sizeof m, "PROCERR %s %s", id, bad);
        relay_send_text(r, m);
        return;
    }
    if (find(r->exec, SHIM_MAX_EXEC, id)) {
        snprintf(m, sizeof m, "PROCERR %s process still running", id);
        relay_send_text(r, m);
        return;
    }
    relay_child *c = slot(r->exec, SHIM_MAX_EXEC);
    uint32_t base = r->next_chan;
    int n = pty ? 2 : 3;
    if (!c || base > SHIM_EGRESS_CHAN_BASE - 8) {
        snprintf(m, sizeof m, "PROCERR %s too many of them running", id);
        relay_send_text(r, m);
        return;
    }
    r->next_chan += (uint32_t)n;
    c->nchans = n;
    c->proc = true;
    for (int i = 0; i < n; i++)
        c->chans[i] = base + (uint32_t)i;
    if (inpipe_chan(r, base, &c->host_fds[0]) != 0 ||
        pipe_chan(r, base + 1, &c->host_fds[1]) != 0 ||
        (!pty && pipe_chan(r, base + 2, &c->host_fds[2]) != 0)) {
        child_free(r, c, n);
        snprintf(m, sizeof m, "PROCERR %s out of file descriptors", id);
        relay_send_text(r, m);
        return;
    }
    c->state = RELAY_PENDING;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->deadline_ms = shim_now_ms() + ANSWER_MS;
    jb j = jop("proc");
    jstr(&j, "id", id);
    jstr(&j, "mode", mode);
    jnum(&j, "rows", rows);
    jnum(&j, "cols", cols);
    jstr(&j, "command", command);
    jnum(&j, "in", c->chans[0]);
    jnum(&j, "out", c->chans[1]);
    if (!pty)
        jnum(&j, "err", c->chans[2]);
    if (jsend(r, &j) != 0) {
        child_free(r, c, n);
        snprintf(m, sizeof m, "PROCERR %s command too long", id);
        relay_send_text(r, m);
    }
}

/* A live process of the exec table started by PROC, or NULL. */
static relay_child *live_proc(relay *r, const char *id)
{
    relay_child *c = find(r->exec, SHIM_MAX_EXEC, id);
    return c && c->proc && c->state == RELAY_LIVE ? c : NULL;
}

/* SIGPROC <id> <signo>: unknown id or bad signo ignored. */
static void on_sigproc(relay *r, char *rest)
{
    const char *id = word(&rest);
    long sig;
    if (!id || !parse_num(rest, 1, 64, &sig) || !live_proc(r, id))
        return;
    jb j = jop("sigproc");
    jstr(&j, "id", id);
    jnum(&j, "signal", sig);
    jsend(r, &j);
}

/* RESIZE <id> <rows> <cols>: ignored for bad sizes or an unknown id (the
 * agent ignores it for a mode p process). */
static void on_resize(relay *r, char *rest)
{
    const char *id = word(&rest);
    const char *rows_s = word(&rest);
    long rows, cols;
    if (!id || !parse_num(rows_s, 1, PTY_DIM_MAX, &rows) ||
        !parse_num(rest, 1, PTY_DIM_MAX, &cols) || !live_proc(r, id))
        return;
    jb j = jop("resize");
    jstr(&j, "id", id);
    jnum(&j, "rows", rows);
    jnum(&j, "cols", cols);
    jsend(r, &j);
}

static void on_signal(relay *r, relay_child *tab, size_t n, const char *op, const char *id,
                      bool kill)
{
    relay_child *c = find(tab, n, id);
    if (!c || c->state == RELAY_PENDING)
        return;   /* unknown ids are ignored (§6); a pending one has no process yet */
    if (kill && c->state == RELAY_LIVE) {
        c->state = RELAY_KILLING;
        c->deadline_ms = shim_now_ms() + ANSWER_MS;
    }
    jb j = jop(op);
    jstr(&j, "id", id);
    jsend(r, &j);
}

int relay_host(relay *r)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * 8)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = hostbuf, .iov_len = SHIM_HOST_MSG_MAX};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof u.buf};
    ssize_t n = recvmsg(r->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return 1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int *fds = (int *)CMSG_DATA(c);
            for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                close(fds[i]);   /* the host sends no fds; keep none */
        }
    if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        return 0;
    hostbuf[n] = 0;
    int rc = 0;
    if (n >= 9 && memcmp(hostbuf, "ACTIVATE ", 9) == 0) {
        rc = on_activate(r, hostbuf + 9, (size_t)n - 9);
        explicit_bzero(hostbuf, (size_t)n);
        return rc;
    }
    if (r->phase != RELAY_RUNNING || memchr(hostbuf, 0, (size_t)n))
        return 0;   /* before READY only ACTIVATE counts (as in sandgate-init) */
    char *rest = strchr(hostbuf, ' ');
    if (rest)
        *rest++ = 0;
    else
        rest = hostbuf + n;
    if (strcmp(hostbuf, "CTX") == 0) {
        on_ctx(r, rest);
    } else if (strcmp(hostbuf, "EXEC") == 0) {
        char *command = strchr(rest, ' ');
        if (command)
            *command++ = 0;
        on_exec(r, rest, command ? command : "");
    } else if (strcmp(hostbuf, "INT") == 0) {
        on_signal(r, r->ctx, SHIM_MAX_CTX, "int", rest, false);
    } else if (strcmp(hostbuf, "KILLCTX") == 0) {
        on_signal(r, r->ctx, SHIM_MAX_CTX, "killctx", rest, true);
    } else if (strcmp(hostbuf, "KILLEXEC") == 0) {
        on_signal(r, r->exec, SHIM_MAX_EXEC, "killexec", rest, true);
    } else if (strcmp(hostbuf, "PROC") == 0) {
        on_proc(r, rest);
    } else if (strcmp(hostbuf, "SIGPROC") == 0) {
        on_sigproc(r, rest);
    } else if (strcmp(hostbuf, "RESIZE") == 0) {
        on_resize(r, rest);
    }
    /* ADOPT and anything else: not in this driver's protocol; ignored. */
    return rc;
}

/* ---- the agent's messages ---- */

static void release(relay *r, relay_child *c, const char *verb, int nfds)
{
    char m[300];
    snprintf(m, sizeof m, "%s %s", verb, c->id);
    send_host(r, m, c->host_fds, nfds);
    close_fds(c->host_fds, 3);
    c->state = RELAY_LIVE;
    c->deadline_ms = 0;
}

static int on_ready(relay *r)
{
    if (r->phase != RELAY_STARTING)
        return fatal(r, "agent: ready twice");
    r->phase = RELAY_HELD;
    r->phase_deadline_ms = 0;
    if (r->cfg->pooled)
        relay_send_text(r, "POOLED");
    if (r->activation)
        forward_activation(r);
    return 0;
}

static int on_activated(relay *r)
{
    if (r->phase != RELAY_ACTIVATING)
        return fatal(r, "agent: activated out of turn");
    r->phase = RELAY_RUNNING;
    r->phase_deadline_ms = 0;
    relay_send_text(r, "READY");
    relay_child *d = find(r->ctx, SHIM_MAX_CTX, "default");
    if (!d || d->state != RELAY_PENDING)
        return fatal(r, "agent: the default context is gone before READY");
    release(r, d, "CTX", 3);
    return 0;
}

/* code/signal fields, bounded to what an exit can be. */
static int exit_fields(relay *r, const shim_json *j, long long *code, long long *sig)
{
    if (!shim_json_num(j, "code", code) || !shim_json_num(j, "signal", sig) || *code < -1 ||
        *code > 255 || *sig < 0 || *sig > 64)
        return fatal(r, "agent: an exit without a valid code and signal");
    return 0;
}

static void clean_msg(char *out, size_t cap, const char *in)
{
    size_t k = 0;
    for (const char *p = in ? in : "failed"; *p && k + 1 < cap; p++)
        out[k++] = (*p == '\n' || *p == '\r' || *p == 0) ? ' ' : *p;
    out[k] = 0;
}

static int on_egress(relay *r, const shim_json *j)
{
    long long chan;
    if (!r->egress || r->phase != RELAY_RUNNING)
        return fatal(r, "agent: an egress connection without a grant");
    if (!shim_json_num(j, "chan", &chan) || chan < SHIM_EGRESS_CHAN_BASE || chan > 0xffffffffLL ||
        !(chan & 1) || mux_chan_find(r->m, (uint32_t)chan))
        return fatal(r, "agent: egress on a bad channel");
    int sv[2];
    size_t live = 0;
    for (size_t i = 0; i < r->m->n_chans; i++)
        live += r->m->chans[i]->kind == MUX_STREAM;
    if (live >= SHIM_MAX_EGRESS || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        /* refuse this one connection: the agent sees our C at once */
        mux_chan *c = mux_chan_add(r->m, (uint32_t)chan, MUX_STREAM, -1);
        if (c)
            mux_chan_drop(r->m, c);
        return 0;
    }
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    if (!mux_chan_add(r->m, (uint32_t)chan, MUX_STREAM, sv[1])) {
        close(sv[0]);
        close(sv[1]);
        return fatal(r, "agent: egress channel table full");
    }
    send_host(r, "EGRESS", &sv[0], 1);
    close(sv[0]);
    return 0;
}

static int on_log(relay *r, const char *msg)
{
    int64_t now = shim_now_ms();
    if (now - r->log_window_ms > 10000) {
        r->log_window_ms = now;
        r->log_count = 0;
    }
    if (++r->log_count <= LOG_PER_WINDOW) {
        char m[512];
        clean_msg(m, sizeof m, msg);
        sg_log_info("shim %s: agent: %s", r->cfg->name, m);
    }
    return 0;
}

static int dispatch(relay *r, const shim_json *j)
{
    const char *op = shim_json_str(j, "op");
    const char *id = shim_json_str(j, "id");
    char m[700], msg[512];
    long long code, sig;
    if (!op)
        return fatal(r, "agent: a control message without op");
    if (strcmp(op, "ready") == 0)
        return on_ready(r);
    if (strcmp(op, "activated") == 0)
        return on_activated(r);
    if (strcmp(op, "log") == 0)
        return on_log(r, shim_json_str(j, "msg"));
    if (strcmp(op, "egress") == 0)
        return on_egress(r, j);
    bool is_ctx = strcmp(op, "ctx") == 0 || strcmp(op, "ctxerr") == 0 ||
                  strcmp(op, "ctxexit") == 0;
    bool is_proc_op = strcmp(op, "proc") == 0 || strcmp(op, "procerr") == 0;
    bool is_exec = strcmp(op, "exec") == 0 || strcmp(op, "execerr") == 0 ||
                   strcmp(op, "exit") == 0 || is_proc_op;
    if (!is_ctx && !is_exec) {
        snprintf(m, sizeof m, "agent: unknown op \"%.32s\"", op);
        return fatal(r, m);
    }
    relay_child *c = id ? (is_ctx ? find(r->ctx, SHIM_MAX_CTX, id)
                                  : find(r->exec, SHIM_MAX_EXEC, id))
                        : NULL;
    if (!c) {
        snprintf(m, sizeof m, "agent: %.16s for an id the shim never sent", op);
        return fatal(r, m);
    }
    int nch = is_ctx ? 3 : c->nchans;
    /* An exec's answers for an exec, a proc's for a proc. */
    if (!is_ctx && strcmp(op, "exit") != 0 && is_proc_op != c->proc)
        return fatal(r, "agent: a start answer of the wrong kind");
    const char *errverb = is_ctx ? "CTXERR" : c->proc ? "PROCERR" : "EXECERR";
    /* The first default context is answered by `activated`, never by a
     * start answer; once running, a default the host opens again (CTX
     * default after it died: the timeout ladder, RestartContext) is
     * answered like any other context. */
    bool first_default = is_ctx && strcmp(c->id, "default") == 0 && r->phase != RELAY_RUNNING;
    if (strcmp(op, "ctx") == 0 || strcmp(op, "exec") == 0 || strcmp(op, "proc") == 0) {
        if (c->state != RELAY_PENDING || first_default)
            return fatal(r, "agent: a start answer out of turn");
        release(r, c, is_ctx ? "CTX" : c->proc ? "PROC" : "EXEC", nch);
        return 0;
    }
    if (strcmp(op, "ctxerr") == 0 || strcmp(op, "execerr") == 0 || strcmp(op, "procerr") == 0) {
        if (c->state != RELAY_PENDING || first_default)
            return fatal(r, "agent: a start error out of turn");
        clean_msg(msg, sizeof msg, shim_json_str(j, "msg"));
        snprintf(m, sizeof m, "%s %s %s", errverb, c->id, msg);
        relay_send_text(r, m);
        child_free(r, c, nch);
        return 0;
    }
    /* ctxexit / exit */
    if (exit_fields(r, j, &code, &sig) != 0)
        return -1;
    if (c->state == RELAY_PENDING && r->phase != RELAY_RUNNING)
        return fatal(r, "agent: the default context died before the sandbox was ready");
    if (c->state == RELAY_PENDING) {
        /* it died before the agent said it started: a start error to the host */
        snprintf(m, sizeof m, "%s %s exited at start (code %lld, signal %lld)", errverb, c->id,
                 code, sig);
        relay_send_text(r, m);
    } else {
        snprintf(m, sizeof m, "%s %s %lld %lld", is_ctx ? "CTXEXIT" : "EXIT", c->id, code, sig);
        relay_send_text(r, m);
    }
    /* Its channels end on their own: the agent closes (C) each once it has
     * sent what the process wrote. */
    close_fds(c->host_fds, 3);
    c->state = RELAY_FREE;
    c->deadline_ms = 0;
    return 0;
}

int relay_control(void *arg, const char *json, size_t n)
{
    relay *r = arg;
    shim_json j;
    char err[200];
    if (shim_json_parse(json, n, &j, err, sizeof err) != 0)
        return fatal(r, err);
    int rc = dispatch(r, &j);
    shim_json_cleanup(&j);
    return rc;
}

/* ---- deadlines ---- */

int relay_tick(relay *r, int64_t now)
{
    if (r->phase_deadline_ms && now >= r->phase_deadline_ms) {
        const char *what = r->phase == RELAY_STARTING ? "the agent did not say ready in time"
                                                      : "the agent did not answer activate in time";
        if (r->phase == RELAY_STARTING) {
            char m[200];
            snprintf(m, sizeof m, "ERR %s (%d s)", what, r->cfg->start_timeout_s);
            relay_send_text(r, m);
        }
        return fatal(r, what);
    }
    for (size_t i = 0; i < SHIM_MAX_CTX; i++)
        if (r->ctx[i].state != RELAY_FREE && r->ctx[i].deadline_ms && now >= r->ctx[i].deadline_ms)
            return fatal(r, "the agent did not answer for a context in time: it is hung");
    for (size_t i = 0; i < SHIM_MAX_EXEC; i++)
        if (r->exec[i].state != RELAY_FREE && r->exec[i].deadline_ms &&
            now >= r->exec[i].deadline_ms)
            return fatal(r, "the agent did not answer for an exec in time: it is hung");
    return 0;
}

int relay_timeout(const relay *r, int64_t now)
{
    int64_t next = r->phase_deadline_ms;
    for (size_t i = 0; i < SHIM_MAX_CTX; i++)
        if (r->ctx[i].deadline_ms && (!next || r->ctx[i].deadline_ms < next))
            next = r->ctx[i].deadline_ms;
    for (size_t i = 0; i < SHIM_MAX_EXEC; i++)
        if (r->exec[i].deadline_ms && (!next || r->exec[i].deadline_ms < next))
            next = r->exec[i].deadline_ms;
    if (!next)
        return -1;
    return next <= now ? 0 : (int)(next - now);
}
