/* time.c — deadline helpers on gpr clocks. */
#include "rpc/rpc.h"

gpr_timespec rpc_deadline_in(double seconds)
{
    if (seconds <= 0)
        return gpr_inf_future(GPR_CLOCK_REALTIME);
    return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                        gpr_time_from_micros((int64_t)(seconds * 1e6), GPR_TIMESPAN));
}

double rpc_deadline_left(gpr_timespec deadline)
{
    gpr_timespec d = gpr_convert_clock_type(deadline, GPR_CLOCK_REALTIME);
    if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_REALTIME)) >= 0)
        return 1e18;
    gpr_timespec left = gpr_time_sub(d, gpr_now(GPR_CLOCK_REALTIME));
    return (double)left.tv_sec + (double)left.tv_nsec / 1e9;
}
