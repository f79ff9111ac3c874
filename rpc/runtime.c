/* runtime.c — process-wide gRPC setup. Besides grpc_init, it switches off
 * abseil's mutex deadlock detection, which Debian's abseil build leaves on:
 * it records a lock graph on every contended mutex inside grpc core (a few
 * percent of a proxy's CPU in the gateway's profile). The symbol is looked
 * up at run time, so an abseil without it (another ABI namespace) just keeps
 * its default. */
#include <dlfcn.h>

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
