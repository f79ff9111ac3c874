/* resolve.c — name lookup for the egress proxy: a hosts-style override file
 * (read on every lookup, so tests can change it between cases) first, then
 * getaddrinfo unless the proxy runs hosts-only. Blocking: called only from
 * the proxy's resolver threads (lookup.c), never from a loop thread. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "host/egress/internal.h"

static void add(eg_addrs *out, const char *ip, uint16_t port)
{
    if (out->n >= EG_ADDR_MAX)
        return;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&out->a[out->n];
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->a[out->n];
    memset(&out->a[out->n], 0, sizeof out->a[out->n]);
    if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        out->len[out->n++] = sizeof *s4;
    } else if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        out->len[out->n++] = sizeof *s6;
    }
}

static int from_file(const char *path, const char *host, uint16_t port, eg_addrs *out)
{
    FILE *f = path ? fopen(path, "re") : NULL;
    if (!f)
        return 0;
    char line[1024];
    int named = 0;
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *save = NULL, *ip = strtok_r(line, " \t\r\n", &save), *name;
        if (!ip)
            continue;
        while ((name = strtok_r(NULL, " \t\r\n", &save))) {
            if (eg_host_eq(name, host)) {
                named = 1;
                add(out, ip, port);
            }
        }
    }
    fclose(f);
    return named;
}

void eg_resolve(const char *hosts_file, int hosts_only, const char *host, uint16_t port,
                eg_addrs *out)
{
    memset(out, 0, sizeof *out);
    if (from_file(hosts_file, host, port, out)) {
        out->err = out->n ? 0 : EAI_NONAME;
        return;
    }
    if (hosts_only) {
        out->err = EAI_NONAME;
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char ps[8];
    snprintf(ps, sizeof ps, "%u", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc) {
        out->err = rc;
        return;
    }
    for (struct addrinfo *a = res; a && out->n < EG_ADDR_MAX; a = a->ai_next) {
        if (a->ai_addrlen > sizeof out->a[0])
            continue;
        memcpy(&out->a[out->n], a->ai_addr, a->ai_addrlen);
        out->len[out->n++] = a->ai_addrlen;
    }
    freeaddrinfo(res);
    out->err = out->n ? 0 : EAI_NONAME;
}
