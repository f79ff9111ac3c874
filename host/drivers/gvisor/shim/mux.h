/* mux.h — the frames on the container's stdio and the channels they carry
 * (host/drivers/gvisor/PROTOCOL.md "The mux"). mux.c owns framing, the
 * per-channel windows and buffers, and moving bytes between a channel's fd
 * (the shim's end of a context socket, pipe, stdin pipe or egress connection) and the
 * agent; relay.c decides which channels exist. */
#ifndef SG_GVSHIM_MUX_H
#define SG_GVSHIM_MUX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MUX_MAX_CHANS 1024

typedef enum {
    MUX_SEQ = 1,     /* context socket: one M frame = one SEQPACKET message, both ways */
    MUX_PIPE = 2,    /* a pipe's write end: agent -> host only */
    MUX_STREAM = 3,  /* an egress connection: bytes both ways */
    MUX_INPIPE = 4,  /* a pipe's read end: host -> agent only (a process's stdin) */
} mux_kind;

typedef struct mux_chunk {
    struct mux_chunk *next;
    size_t len, off;
    uint8_t data[];
} mux_chunk;

typedef struct mux_chan {
    uint32_t id;
    mux_kind kind;
    int fd;                   /* owned: the shim's end; -1 once closed */
    mux_chunk *head, *tail;   /* owned: agent -> fd, not yet delivered */
    size_t buffered;          /* bytes in head..tail (<= SHIM_WINDOW) */
    uint32_t delivered;       /* written to fd, not yet acknowledged with W */
    int64_t ack_due_ms;       /* when that W goes out at the latest; 0 none */
    size_t unacked;           /* fd -> agent, not yet acknowledged by the agent */
    bool peer_closed;         /* the agent sent C */
    bool sent_close;          /* we sent C */
    bool wr_done;             /* fd's write side is finished (shut down or broken) */
} mux_chan;

typedef struct mux {
    int in_fd;                /* owned: the container's stdout (agent -> shim) */
    int out_fd;               /* owned: the container's stdin (shim -> agent) */
    uint8_t *in;              /* owned: read buffer */
    size_t in_n;
    uint8_t *out;             /* owned: frames not yet written */
    size_t out_n, out_cap;
    mux_chan *chans[MUX_MAX_CHANS];   /* owned */
    size_t n_chans;
    /* A J frame from the agent; returns 0, or -1: the shim must exit. */
    int (*on_control)(void *arg, const char *json, size_t n);
    void *arg;
    char err[256];            /* why the last call failed */
} mux;

int mux_init(mux *m, int in_fd, int out_fd);
/* Free everything m owns: every channel (fd closed, buffers freed; no C is
 * sent), both buffers, in_fd and out_fd. */
void mux_free(mux *m);
/* Read what the agent sent and act on it. 0; 1 on EOF (the agent or the
 * Sentry is gone); -1 on a protocol violation (m->err says which). */
int mux_read(mux *m);
/* Write queued frames. 0, or -1 (the agent's stdin is broken). */
int mux_flush(mux *m);
void mux_control(mux *m, const char *json, size_t n);
mux_chan *mux_chan_add(mux *m, uint32_t id, mux_kind kind, int fd);
mux_chan *mux_chan_find(mux *m, uint32_t id);
/* Drop a channel at once (its owner is gone): fd closed, buffer freed; C
 * sent if not yet sent, so the agent frees its side. */
void mux_chan_drop(mux *m, mux_chan *c);
/* poll(2) events wanted on c->fd, and what to do when they come. */
short mux_chan_events(const mux_chan *c);
int mux_chan_io(mux *m, mux_chan *c, short revents);
/* Send the W frames due and free channels that are finished. */
#define MUX_ACK_DELAY_MS 2
void mux_settle(mux *m, int64_t now_ms);
/* Milliseconds until a W falls due (-1: none). */
int mux_ack_timeout(const mux *m, int64_t now_ms);

/* For tests: encode one frame into buf (>= 9 + n bytes); returns its size. */
size_t mux_frame(uint8_t *buf, uint8_t type, uint32_t chan, const void *payload, size_t n);

#endif
