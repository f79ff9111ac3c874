/* relay.h — the supervisor side of the shim (relay.c): the host's messages
 * (host/runtime/PROTOCOL.md §2a, §3) turned into the agent's control
 * messages and back, and the contexts and exec children they name. */
#ifndef SG_GVSHIM_RELAY_H
#define SG_GVSHIM_RELAY_H

#include <stdbool.h>
#include <stdint.h>

#include "mux.h"
#include "shim.h"

typedef enum {
    RELAY_STARTING,     /* waiting for the agent's ready */
    RELAY_HELD,         /* ready (POOLED said if pooled): waiting for ACTIVATE */
    RELAY_ACTIVATING,   /* activate sent, waiting for activated */
    RELAY_RUNNING,      /* READY said */
} relay_phase;

typedef enum { RELAY_FREE = 0, RELAY_PENDING, RELAY_LIVE, RELAY_KILLING } relay_state;

typedef struct relay_child {
    relay_state state;
    char id[SHIM_ID_MAX + 1];
    uint32_t chans[3];     /* ctx: sock, out, err; exec: out, err; proc: in, out[, err] */
    int host_fds[3];       /* owned until sent to the host; -1 none */
    int nchans;            /* how many of chans / host_fds are in use (exec table) */
    bool proc;             /* exec table: a background process (PROC), not an EXEC */
    int64_t deadline_ms;   /* an answer the agent owes by then; 0 none */
} relay_child;

typedef struct relay {
    const shim_config *cfg;   /* borrowed */
    mux *m;                   /* borrowed */
    int sock;                 /* borrowed: fd 3 */
    relay_phase phase;
    int64_t phase_deadline_ms;
    char *activation;         /* owned, wiped: an ACTIVATE that came before ready */
    size_t activation_len;
    bool egress;              /* granted at ACTIVATE */
    uint32_t next_chan;
    relay_child ctx[SHIM_MAX_CTX];
    relay_child exec[SHIM_MAX_EXEC];
    int64_t log_window_ms;
    int log_count;
    char err[512];            /* why the shim must exit */
} relay;

/* Set up the default context (channels 1, 2, 3). 0, or -1 with r->err. */
int relay_init(relay *r, const shim_config *cfg, mux *m, int sock);
/* One message from the host. 0; 1 on EOF (the host is gone); -1 fatal. */
int relay_host(relay *r);
/* mux's on_control. */
int relay_control(void *arg, const char *json, size_t n);
/* Deadlines: -1 when the agent missed one (r->err says which). */
int relay_tick(relay *r, int64_t now_ms);
/* Milliseconds until the next deadline (-1: none). */
int relay_timeout(const relay *r, int64_t now_ms);
/* A line to the host, e.g. "ERR ..." (newlines removed). */
void relay_send_text(relay *r, const char *text);

int64_t shim_now_ms(void);

#endif
