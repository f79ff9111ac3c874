/* journal.h — the host's record of which sandboxes it ran, kept across its
 * restarts (journal.c says how), so that an id of the host's earlier life
 * answers "lost" to its owner instead of looking killed. */
#ifndef SG_HOST_JOURNAL_H
#define SG_HOST_JOURNAL_H

#include <stdint.h>

#include "common/err.h"

#define JOURNAL_LOST_MAX 4096                        /* lost records kept, newest first */
#define JOURNAL_LOST_KEEP_MS (24LL * 3600 * 1000)     /* and for at most a day */
#define JOURNAL_COMPACT_BYTES (1024 * 1024)          /* appended before a rewrite */

/* Open <dir>/<name>.journal (dir made 0700 if missing, file 0600), lock it
 * for this process, turn the previous life's live sandboxes into lost ones,
 * rewrite the file compacted and start the writer thread. Call once, before
 * serving. */
int host_journal_open(const char *dir, const char *name, sg_err *err);
/* Flush what is queued (fdatasync), stop the writer and forget everything
 * (host_journal_lost answers -1): call once no handler can run. */
void host_journal_close(void);

/* A sandbox was created for its owner / ended during this life (owner's
 * kill, TTL, idle, crash). Queue a record; never blocks on I/O. Ending an
 * id never recorded as created is a no-op. */
void host_journal_created(const char *id, const char *tenant, const char *user,
                          const char *task);
void host_journal_ended(const char *id);

typedef struct host_lost {
    const char *tenant, *user, *task;   /* borrowed: valid for the process's life */
    int64_t lost_ms;                    /* wall clock: when this life found it gone */
} host_lost;
/* 0 and *out filled if id was alive when an earlier life of this host
 * ended; -1 otherwise. Lock-free: the lost table is fixed at open. */
int host_journal_lost(const char *id, host_lost *out);

#endif
