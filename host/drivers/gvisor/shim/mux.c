/* mux.c — frames on the container's stdio, channels, windows (mux.h).
 *
 * A frame is `u32 len` (big-endian, the bytes after it: 5 .. 65541), `u8
 * type`, `u32 chan`, payload. The shim never holds more than SHIM_WINDOW
 * bytes per channel from the agent (the agent may not send more before our
 * W) and never sends the agent more than SHIM_WINDOW per channel it has not
 * acknowledged, so neither side can make the other buffer without bound and
 * a full pipe stalls only its own channel. W is sent for bytes as they are
 * written to the channel's fd, not as they are buffered. Anything the agent
 * gets wrong (a length, a type, data past the window or after its C, a W
 * for more than was sent, data on a stdin channel) is a violation: the
 * caller exits.
 *
 * A stdin channel (MUX_INPIPE: the read end of the pipe whose write end the
 * host holds as a process's in_w) is read only while the agent has room in
 * its window, so a process that never reads its stdin fills the agent's
 * window, then this pipe, and then the host's writes say EAGAIN: the loop
 * never waits on it. The agent's C there means it takes nothing more (the
 * process closed its stdin or is gone): the pipe is closed, and the host's
 * writes get EPIPE, as they would on a pipe straight to the process. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mux.h"
#include "shim.h"

#define IN_CAP (4 + SHIM_FRAME_LEN_MAX) * 4
#define OUT_MAX (64u << 20)      /* frames queued for a stalled agent: past this it is hung */
#define READS_PER_CALL 16

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

size_t mux_frame(uint8_t *buf, uint8_t type, uint32_t chan, const void *payload, size_t n)
{
    put32(buf, (uint32_t)(5 + n));
    buf[4] = type;
    put32(buf + 5, chan);
    if (n)
        memcpy(buf + 9, payload, n);
    return 9 + n;
}

static int violation(mux *m, const char *fmt, uint32_t chan)
{
    snprintf(m->err, sizeof m->err, fmt, chan);
    return -1;
}

int mux_init(mux *m, int in_fd, int out_fd)
{
    memset(m, 0, sizeof *m);
    m->in_fd = in_fd;
    m->out_fd = out_fd;
    m->in = malloc(IN_CAP);
    m->out_cap = 2 * (9 + SHIM_FRAME_PAYLOAD_MAX);
    m->out = malloc(m->out_cap);
    return m->in && m->out ? 0 : -1;
}

static void discard(mux_chan *c);

void mux_free(mux *m)
{
    for (size_t i = 0; i < m->n_chans; i++) {
        mux_chan *c = m->chans[i];
        discard(c);
        if (c->fd >= 0)
            close(c->fd);
        free(c);
    }
    m->n_chans = 0;
    free(m->in);
    free(m->out);
    m->in = m->out = NULL;
    m->in_n = m->out_n = m->out_cap = 0;
    if (m->in_fd >= 0)
        close(m->in_fd);
    if (m->out_fd >= 0)
        close(m->out_fd);
    m->in_fd = m->out_fd = -1;
}

static void enqueue(mux *m, uint8_t type, uint32_t chan, const void *payload, size_t n)
{
    if (m->out_n + 9 + n > m->out_cap) {
        size_t cap = m->out_cap;
        while (m->out_n + 9 + n > cap)
            cap *= 2;
        uint8_t *o = realloc(m->out, cap);
        if (!o)
            return;   /* the agent then misses a frame and the sandbox breaks: its owner sees it */
        m->out = o;
        m->out_cap = cap;
    }
    m->out_n += mux_frame(m->out + m->out_n, type, chan, payload, n);
}

void mux_control(mux *m, const char *json, size_t n)
{
    enqueue(m, 'J', 0, json, n);
}

int mux_flush(mux *m)
{
    size_t off = 0;
    while (off < m->out_n) {
        ssize_t w = write(m->out_fd, m->out + off, m->out_n - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        snprintf(m->err, sizeof m->err, "write to the agent's stdin: %s",
                 w < 0 ? strerror(errno) : "short");
        return -1;
    }
    memmove(m->out, m->out + off, m->out_n - off);
    m->out_n -= off;
    if (m->out_n > OUT_MAX) {
        snprintf(m->err, sizeof m->err, "the agent reads nothing (%zu bytes queued)", m->out_n);
        return -1;
    }
    return 0;
}

/* ---- channels ---- */

static uint32_t max_shim_chan, max_agent_chan;   /* the highest ever opened */

mux_chan *mux_chan_find(mux *m, uint32_t id)
{
    for (size_t i = 0; i < m->n_chans; i++)
        if (m->chans[i]->id == id)
            return m->chans[i];
    return NULL;
}

mux_chan *mux_chan_add(mux *m, uint32_t id, mux_kind kind, int fd)
{
    if (m->n_chans == MUX_MAX_CHANS || mux_chan_find(m, id))
        return NULL;
    mux_chan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->id = id;
    c->kind = kind;
    c->fd = fd;
    m->chans[m->n_chans++] = c;
    if (id >= SHIM_EGRESS_CHAN_BASE) {
        if (id > max_agent_chan)
            max_agent_chan = id;
    } else if (id > max_shim_chan) {
        max_shim_chan = id;
    }
    return c;
}

/* A frame for a channel that no longer exists is a race (it was closed
 * here, the agent had not seen it yet); one never opened is a lie. */
static bool was_open(uint32_t id)
{
    return id >= SHIM_EGRESS_CHAN_BASE ? id <= max_agent_chan : id <= max_shim_chan;
}

static void discard(mux_chan *c)
{
    while (c->head) {
        mux_chunk *k = c->head;
        c->head = k->next;
        c->delivered += (uint32_t)(k->len - k->off);   /* acked: the agent's window frees */
        free(k);
    }
    c->tail = NULL;
    c->buffered = 0;
}

/* The agent's C and everything before it written: end the fd's write side,
 * so the host reads EOF. */
static void finish_write(mux_chan *c)
{
    if (c->wr_done || c->head || !c->peer_closed)
        return;
    c->wr_done = true;
    if (c->fd < 0)
        return;
    if (c->kind == MUX_PIPE || c->kind == MUX_INPIPE) {
        close(c->fd);
        c->fd = -1;
    } else {
        shutdown(c->fd, SHUT_WR);
    }
}

static void write_broken(mux_chan *c)
{
    c->wr_done = true;
    discard(c);
    if ((c->kind == MUX_PIPE || c->kind == MUX_INPIPE) && c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

/* Write buffered data to the fd as far as it takes it. */
static void deliver(mux_chan *c)
{
    while (c->head && !c->wr_done) {
        mux_chunk *k = c->head;
        ssize_t w;
        if (c->kind == MUX_SEQ)
            w = send(c->fd, k->data, k->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        else
            w = write(c->fd, k->data + k->off, k->len - k->off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) {
            write_broken(c);   /* the host closed its end: nobody to deliver to */
            return;
        }
        size_t got = c->kind == MUX_SEQ ? k->len - k->off : (size_t)w;
        k->off += got;
        c->delivered += (uint32_t)got;
        c->buffered -= got;
        if (k->off == k->len) {
            c->head = k->next;
            if (!c->head)
                c->tail = NULL;
            free(k);
        }
    }
    finish_write(c);
}

static int on_data(mux *m, mux_chan *c, const uint8_t *p, size_t n)
{
    if (c->peer_closed)
        return violation(m, "data on channel %u after its close", c->id);
    if (c->kind == MUX_INPIPE)
        return violation(m, "data on channel %u, a process's stdin", c->id);
    /* What the agent has sent and we have not yet acknowledged: buffered,
     * plus delivered bytes whose W is still to go out. */
    if (c->buffered + c->delivered + n > SHIM_WINDOW)
        return violation(m, "channel %u: the agent sent past its window", c->id);
    if (c->wr_done) {
        c->delivered += (uint32_t)n;
        return 0;
    }
    mux_chunk *k = malloc(sizeof *k + n);
    if (!k)
        return violation(m, "out of memory on channel %u", c->id);
    k->next = NULL;
    k->len = n;
    k->off = 0;
    memcpy(k->data, p, n);
    if (c->tail)
        c->tail->next = k;
    else
        c->head = k;
    c->tail = k;
    c->buffered += n;
    deliver(c);   /* the common case: straight through, no poll round */
    return 0;
}

static int on_frame(mux *m, uint8_t type, uint32_t chan, const uint8_t *p, size_t n)
{
    if (type == 'J') {
        if (chan != 0 || n > SHIM_JSON_MAX)
            return violation(m, "control frame on channel %u or too long", chan);
        return m->on_control(m->arg, (const char *)p, n) == 0 ? 0 : -1;
    }
    if (type != 'M' && type != 'C' && type != 'W')
        return violation(m, "unknown frame type on channel %u", chan);
    if (chan == 0)
        return violation(m, "data frame on channel %u", chan);
    mux_chan *c = mux_chan_find(m, chan);
    if (!c && !was_open(chan))
        return violation(m, "frame for channel %u, never opened", chan);
    switch (type) {
    case 'M':
        if (n > SHIM_FRAME_PAYLOAD_MAX)
            return violation(m, "frame on channel %u too long", chan);
        return c ? on_data(m, c, p, n) : 0;
    case 'C':
        if (n != 0)
            return violation(m, "close frame on channel %u has a payload", chan);
        if (c) {
            if (c->peer_closed)
                return violation(m, "channel %u closed twice", chan);
            c->peer_closed = true;
            finish_write(c);
        }
        return 0;
    case 'W':
        if (n != 4)
            return violation(m, "window frame on channel %u is not 4 bytes", chan);
        if (c) {
            uint32_t v = be32(p);
            if (v > c->unacked)
                return violation(m, "channel %u: window for more than was sent", chan);
            c->unacked -= v;
        }
        return 0;
    default:
        return violation(m, "unknown frame type on channel %u", chan);
    }
}

int mux_read(mux *m)
{
    for (int round = 0; round < READS_PER_CALL; round++) {
        ssize_t r = read(m->in_fd, m->in + m->in_n, IN_CAP - m->in_n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return 0;
        if (r < 0) {
            snprintf(m->err, sizeof m->err, "read from the agent: %s", strerror(errno));
            return 1;
        }
        if (r == 0) {
            snprintf(m->err, sizeof m->err, "the agent's stdout closed%s",
                     m->in_n ? " in the middle of a frame" : "");
            return 1;
        }
        m->in_n += (size_t)r;
        size_t off = 0;
        while (m->in_n - off >= 4) {
            uint32_t len = be32(m->in + off);
            if (len < 5 || len > SHIM_FRAME_LEN_MAX)
                return violation(m, "frame length %u out of range", len);
            if (m->in_n - off < 4 + (size_t)len)
                break;
            const uint8_t *f = m->in + off + 4;
            if (on_frame(m, f[0], be32(f + 1), f + 5, len - 5) != 0)
                return -1;
            off += 4 + (size_t)len;
        }
        memmove(m->in, m->in + off, m->in_n - off);
        m->in_n -= off;
    }
    return 0;
}

short mux_chan_events(const mux_chan *c)
{
    if (c->fd < 0)
        return 0;
    short ev = 0;
    if (c->kind != MUX_PIPE && !c->sent_close &&
        c->unacked + SHIM_FRAME_PAYLOAD_MAX <= SHIM_WINDOW)
        ev |= POLLIN;
    if (c->head && !c->wr_done)
        ev |= POLLOUT;
    return ev;
}

static void send_close(mux *m, mux_chan *c)
{
    if (!c->sent_close) {
        c->sent_close = true;
        enqueue(m, 'C', c->id, NULL, 0);
    }
}

int mux_chan_io(mux *m, mux_chan *c, short revents)
{
    if (c->fd < 0)
        return 0;
    if (revents & POLLOUT)
        deliver(c);
    if (c->kind == MUX_PIPE) {
        if (revents & (POLLERR | POLLHUP))
            write_broken(c);   /* the host closed the read end */
        return 0;
    }
    if (c->fd >= 0 && !c->sent_close && (revents & (POLLIN | POLLHUP | POLLERR)) &&
        c->unacked + SHIM_FRAME_PAYLOAD_MAX <= SHIM_WINDOW) {
        uint8_t buf[SHIM_FRAME_PAYLOAD_MAX];
        ssize_t r;
        do
            r = c->kind == MUX_INPIPE ? read(c->fd, buf, sizeof buf)
                                      : recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
        while (r < 0 && errno == EINTR);
        if (r > 0) {
            enqueue(m, 'M', c->id, buf, (size_t)r);
            c->unacked += (size_t)r;
        } else if (r == 0 || errno != EAGAIN) {
            send_close(m, c);   /* the host closed its end (or it broke) */
            if (r < 0 || c->kind == MUX_INPIPE)
                write_broken(c);
            if (c->kind == MUX_INPIPE && c->fd >= 0) {
                close(c->fd);   /* nothing more to read; the agent's C frees it */
                c->fd = -1;
            }
        }
    }
    return 0;
}

void mux_chan_drop(mux *m, mux_chan *c)
{
    send_close(m, c);
    discard(c);
    c->delivered = 0;
    c->peer_closed = c->wr_done = true;
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
}

static bool finished(const mux_chan *c)
{
    if (!c->peer_closed || !c->wr_done || c->head)
        return false;
    /* A stdin channel ends with the agent's C: after it, nothing is read
     * (our own C, if not sent, would be dropped there anyway). */
    return c->kind == MUX_PIPE || c->kind == MUX_INPIPE || c->sent_close;
}

void mux_settle(mux *m, int64_t now_ms)
{
    for (size_t i = 0; i < m->n_chans;) {
        mux_chan *c = m->chans[i];
        if (c->delivered && !c->peer_closed) {
            /* A W rides along with a frame going out anyway; alone it waits
             * up to MUX_ACK_DELAY_MS (the agent's next frame usually comes
             * sooner), unless a quarter of the window is owed. */
            if (!c->ack_due_ms)
                c->ack_due_ms = now_ms + MUX_ACK_DELAY_MS;
            if (m->out_n || c->delivered >= SHIM_WINDOW / 4 || now_ms >= c->ack_due_ms) {
                uint8_t v[4];
                put32(v, c->delivered);
                enqueue(m, 'W', c->id, v, 4);
                c->delivered = 0;
                c->ack_due_ms = 0;
            }
        } else if (c->peer_closed) {
            c->delivered = 0;   /* it sends nothing more: no window to give back */
            c->ack_due_ms = 0;
        }
        if (finished(c)) {
            if (c->fd >= 0)
                close(c->fd);
            free(c);
            m->chans[i] = m->chans[--m->n_chans];
            continue;
        }
        i++;
    }
}

int mux_ack_timeout(const mux *m, int64_t now_ms)
{
    int64_t next = 0;
    for (size_t i = 0; i < m->n_chans; i++) {
        const mux_chan *c = m->chans[i];
        if (c->delivered && c->ack_due_ms && (!next || c->ack_due_ms < next))
            next = c->ack_due_ms;
    }
    return !next ? -1 : next <= now_ms ? 0 : (int)(next - now_ms);
}
