/* fds.h — how many file descriptors this process holds and may hold, for
 * the admission checks that keep a daemon from running out of them (the
 * host's creates, host/core/admit.c; the egress proxy's connections). */
#ifndef SG_FDS_H
#define SG_FDS_H

/* Open fds, by one pass over /proc/self/fd; `limit` if even that cannot be
 * opened (the table is full). */
long sg_fds_open(long limit);
/* RLIMIT_NOFILE's soft limit; -1 if unlimited or unknown. */
long sg_fds_limit(void);

#endif
