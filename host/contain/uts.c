/* uts.c — the sandbox's hostname, in the uts namespace A unshared. */
#include "host/contain/steps.h"

#include <string.h>
#include <unistd.h>

int sgc_uts_enter(const sgc_spec *s, char *err, size_t len)
{
    if (sethostname(s->hostname, strlen(s->hostname)) != 0)
        return sgc_fail(err, len, "sethostname(\"%s\")", s->hostname);
    /* The host's NIS domain name would leak otherwise. */
    if (setdomainname("none", 4) != 0)
        return sgc_fail(err, len, "setdomainname(\"none\")");
    return 0;
}
