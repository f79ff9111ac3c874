/* daemon.h — what both daemons do around their main loop: the signal mask
 * set before any thread starts, the port file tests and run.sh read, and
 * the wait for SIGTERM/SIGINT. */
#ifndef SG_DAEMON_H
#define SG_DAEMON_H

/* Block SIGTERM, SIGINT and `extra` (0 = none) in this thread and every
 * thread made after it; ignore SIGPIPE. Call first in main. */
void sg_daemon_block_signals(int extra);

/* Write "<port>\n" to path (NULL = nothing). The file appears whole: it is
 * written beside and renamed, since run.sh polls for it. */
int sg_daemon_write_port(const char *path, int port);

/* Wait for SIGTERM or SIGINT; returns the signal. */
int sg_daemon_wait_stop(void);

#endif
