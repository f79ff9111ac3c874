/* procargs.c — background-process argument checks (procargs.h). */
#include "common/procargs.h"

#include <signal.h>
#include <string.h>
#include <strings.h>

int sg_proc_check_id(const char *id, sg_err *err)
{
    size_t n = strlen(id);
    if (n == 0)
        return sg_err_set(err, SG_EINVAL, "process_id: required");
    int ok = n >= 2 && n <= 11 && id[0] == 'p' && id[1] != '0';
    for (size_t i = 1; ok && i < n; i++)
        ok = id[i] >= '0' && id[i] <= '9';
    if (!ok)
        return sg_err_set(err, SG_EINVAL, "process_id: not a process id (\"p\" and a number, "
                                          "as Exec's started event gave)");
    return 0;
}

static int check_dim(const char *field, uint32_t v, int zero_ok, sg_err *err)
{
    if ((v == 0 && !zero_ok) || v > SG_PROC_PTY_MAX)
        return sg_err_set(err, SG_EINVAL, "%s: %u; must be %s1..%d", field, v,
                          zero_ok ? "0 (the default) or " : "", SG_PROC_PTY_MAX);
    return 0;
}

int sg_proc_check_pty(int pty, uint32_t rows, uint32_t cols, sg_err *err)
{
    if (!pty && (rows || cols))
        return sg_err_set(err, SG_EINVAL, "%s: set without pty", rows ? "pty_rows" : "pty_cols");
    if (check_dim("pty_rows", rows, 1, err) || check_dim("pty_cols", cols, 1, err))
        return SG_EINVAL;
    return 0;
}

int sg_proc_check_size(uint32_t rows, uint32_t cols, sg_err *err)
{
    if (check_dim("rows", rows, 0, err) || check_dim("cols", cols, 0, err))
        return SG_EINVAL;
    return 0;
}

static const struct {
    const char *name;
    int num;
} signals[] = {
    {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},   {"HUP", SIGHUP},
    {"QUIT", SIGQUIT}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP},
    {"CONT", SIGCONT}, {"WINCH", SIGWINCH},
};

int sg_proc_parse_signal(uint32_t num, const char *name, int *signo, sg_err *err)
{
    if (num && name[0])
        return sg_err_set(err, SG_EINVAL, "signal: give signal or signal_name, not both");
    if (num) {
        if (num > 64)
            return sg_err_set(err, SG_EINVAL, "signal: %u; must be 1..64", num);
        *signo = (int)num;
        return 0;
    }
    if (!name[0]) {
        *signo = SIGTERM;
        return 0;
    }
    const char *n = strncasecmp(name, "SIG", 3) == 0 ? name + 3 : name;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
        if (strcasecmp(n, signals[i].name) == 0) {
            *signo = signals[i].num;
            return 0;
        }
    return sg_err_set(err, SG_EINVAL, "signal_name: unknown signal; one of TERM, KILL, INT, HUP, "
                                      "QUIT, USR1, USR2, STOP, CONT, WINCH");
}
