/* isolation.c — names of the isolation levels. See isolation.h. */
#include "isolation.h"

#include <string.h>

const char *sg_isolation_name(sg_isolation i)
{
    switch (i) {
    case SG_ISOLATION_PROCESS: return "process";
    case SG_ISOLATION_GVISOR: return "gvisor";
    default: return "";
    }
}

int sg_isolation_parse(const char *s, sg_isolation *out)
{
    if (s && strcmp(s, "process") == 0)
        *out = SG_ISOLATION_PROCESS;
    else if (s && strcmp(s, "gvisor") == 0)
        *out = SG_ISOLATION_GVISOR;
    else
        return -1;
    return 0;
}
