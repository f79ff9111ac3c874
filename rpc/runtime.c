/* runtime.c — process-wide gRPC setup. Besides grpc_init, it switches off
 * abseil's mutex deadlock detection, which Debian's abseil build leaves on:
 * it records a lock graph on every contended mutex inside grpc core (a few
 * percent of a proxy's CPU in the gateway's profile). The symbol is looked
 * up at run time, so an abseil without it (another ABI namespace) just keeps
 * its default. */
#include <dlfcn.h>
#include <string.h>
#include <grpc/support/log.h>

#include "common/log.h"
#include "rpc/rpc.h"

/* absl::debian3::SetMutexDeadlockDetectionMode(OnDeadlockCycle), kIgnore = 0 */
#define ABSL_SET_DEADLOCK_MODE "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE"

void rpc_runtime_init(void)
{
    void (*set_mode)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, ABSL_SET_DEADLOCK_MODE);
    if (!set_mode) {
        void *h = dlopen("libabsl_synchronization.so.20220623", RTLD_NOW | RTLD_NOLOAD);
        if (h)
            set_mode = (void (*)(int))dlsym(h, ABSL_SET_DEADLOCK_MODE);
    }
    if (set_mode)
        set_mode(0);
    grpc_init();
}

/* grpc's own log lines (connection failures and the like) as the daemon's
 * JSON lines, at the matching level, naming where in grpc they came from. */
static void on_grpc_log(gpr_log_func_args *a)
{
    sg_log_level l = a->severity == GPR_LOG_SEVERITY_ERROR ? SG_LOG_WARN
                     : a->severity == GPR_LOG_SEVERITY_INFO ? SG_LOG_INFO
                                                             : SG_LOG_DEBUG;
    const char *file = strrchr(a->file, '/');
    sg_log(l, "grpc %s:%d: %s", file ? file + 1 : a->file, a->line, a->message);
}

void rpc_runtime_log_json(void)
{
    gpr_set_log_function(on_grpc_log);
}
