/* reaper.h — SIGKILL for a dying sandbox's cgroups, sent from a thread of
 * its own. On cgroup v1 a kill freezes the group first and waits for it to
 * freeze (up to a second: host/contain/cgroup.c kill_frozen); a fork bomb
 * makes that wait long, and under H.mu it stalled every call of the host. */
#ifndef SG_HOST_REAPER_H
#define SG_HOST_REAPER_H

#include "common/err.h"

int host_reaper_start(sg_err *err);
/* After the last host_reaper_signal: sends what is queued, joins. */
void host_reaper_stop(void);
/* Queue a signal to every process in cgroup `name` (copied; a name already
 * waiting is not queued twice). Never blocks: callable with H.mu held. */
void host_reaper_signal(const char *name);

#endif
