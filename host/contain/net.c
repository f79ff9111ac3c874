/* net.c — networking inside the sandbox's new net namespace. With net=none
 * (the only mode so far) that is just `lo` brought up; the namespace starts
 * with no other interface, so nothing can reach the host or the outside.
 * Egress modes (veth, proxies) are for the egress work and its parent half. */
#include "host/contain/steps.h"

#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int sgc_net_enter(const sgc_spec *s, char *err, size_t len)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sgc_fail(err, len, "socket(AF_INET, SOCK_DGRAM)");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    int rc = 0;
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
        rc = sgc_fail(err, len, "ioctl(\"lo\", SIOCGIFFLAGS)");
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
            rc = sgc_fail(err, len, "ioctl(\"lo\", SIOCSIFFLAGS, IFF_UP|IFF_RUNNING)");
    }
    close(fd);
    return rc;
}
