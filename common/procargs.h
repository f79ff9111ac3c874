/* procargs.h — the shape of background-process arguments (issue 17 item 2),
 * checked the same way at both edges: the gateway (gateway/procs.c) and the
 * host (host/core/proc.c). Each returns 0, or SG_EINVAL with a message that
 * names the field. No state. */
#ifndef SG_PROCARGS_H
#define SG_PROCARGS_H

#include <stdint.h>

#include "common/err.h"

#define SG_PROC_PTY_MAX 1000          /* rows and cols: 1..1000 */
#define SG_PROC_PTY_ROWS_DEFAULT 24
#define SG_PROC_PTY_COLS_DEFAULT 80
#define SG_PROC_INPUT_MAX (1u << 20)  /* one SendInput, and the stdin a host holds */
#define SG_PROC_WAIT_DEFAULT_S 60
#define SG_PROC_WAIT_MAX_S 3600

/* process_id: "p" and 1..10 digits, no leading zero. */
int sg_proc_check_id(const char *id, sg_err *err);
/* ExecRequest's pty fields: sizes 0 (default) or 1..1000, and 0 unless pty. */
int sg_proc_check_pty(int pty, uint32_t rows, uint32_t cols, sg_err *err);
/* ResizePty: both 1..1000. */
int sg_proc_check_size(uint32_t rows, uint32_t cols, sg_err *err);
/* SignalProcess: a number 1..64 or a name (TERM, KILL, INT, HUP, QUIT,
 * USR1, USR2, STOP, CONT, WINCH; "SIG" prefix optional), not both; neither
 * = SIGTERM. *signo gets the number. */
int sg_proc_parse_signal(uint32_t num, const char *name, int *signo, sg_err *err);

#endif
