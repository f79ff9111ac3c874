/* testd.c — egress-testd: one egress proxy with one sandbox listener, for
 * the netns integration test and the benchmark. Not installed.
 *
 *   egress-testd --sock PATH [--hosts FILE] [--audit FILE] [--cap BYTES]
 *                [--id SANDBOX] [--rule ID,host|cidr,VALUE,PORTS]...
 *
 * PORTS is "-" (any) or "80+443". Prints "ready" when listening; on
 * SIGTERM prints the sandbox counters and exits 0. The resolver is
 * hosts-file only: this binary never asks DNS. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/egress/egress.h"

static FILE *audit_f;
static void on_audit(void *arg, const egress_audit *a)
{
    char line[2048];
    size_t n = egress_audit_json(a, line, sizeof line);
    if (audit_f) {
        fwrite(line, 1, n, audit_f);
        fflush(audit_f);
    }
}

int main(int argc, char **argv)
{
    const char *sock = NULL, *hosts = NULL, *audit = NULL, *id = "sb-test";
    uint64_t cap = 0;
    egress_rule rules[64];
    uint32_t ports[64][16];
    size_t n = 0;
    char *owned[64];   /* the split --rule strings */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "egress-testd: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "--sock")) sock = v;
        else if (!strcmp(a, "--hosts")) hosts = v;
        else if (!strcmp(a, "--audit")) audit = v;
        else if (!strcmp(a, "--id")) id = v;
        else if (!strcmp(a, "--cap")) cap = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--rule") && n < 64) {
            char *s = owned[n] = strdup(v), *save = NULL;
            char *rid = strtok_r(s, ",", &save), *kind = strtok_r(NULL, ",", &save);
            char *val = strtok_r(NULL, ",", &save), *ps = strtok_r(NULL, ",", &save);
            if (!rid || !kind || !val || !ps) {
                fprintf(stderr, "egress-testd: bad --rule %s\n", v);
                return 2;
            }
            rules[n] = (egress_rule){.id = rid};
            if (!strcmp(kind, "host")) rules[n].host = val;
            else rules[n].cidr = val;
            if (strcmp(ps, "-")) {
                char *psave = NULL;
                for (char *p = strtok_r(ps, "+", &psave); p && rules[n].n_ports < 16; p = strtok_r(NULL, "+", &psave))
                    ports[n][rules[n].n_ports++] = (uint32_t)atoi(p);
                rules[n].ports = ports[n];
            }
            n++;
        } else {
            fprintf(stderr, "egress-testd: unknown option %s\n", a);
            return 2;
        }
    }
    if (!sock) {
        fprintf(stderr, "egress-testd: --sock is required\n");
        return 2;
    }
    if (audit && !(audit_f = fopen(audit, "ae"))) {
        perror(audit);
        return 1;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);   /* before the proxy's threads */
    signal(SIGPIPE, SIG_IGN);
    sg_err err = {0};
    egress_rules *rs;
    if (egress_rules_create(rules, n, &rs, &err) < 0) {
        fprintf(stderr, "egress-testd: %s\n", err.msg);
        return 1;
    }
    egress_options o = {.hosts_file = hosts, .hosts_only = 1, .on_audit = on_audit,
                        .connect_timeout_ms = 3000, .header_timeout_ms = 3000};
    egress_proxy *p;
    egress_sandbox *sb;
    if (egress_proxy_create(&o, &p, &err) < 0 ||
        egress_sandbox_create(p, id, sock, rs, cap, &sb, &err) < 0) {
        fprintf(stderr, "egress-testd: %s\n", err.msg);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    int sig;
    sigwait(&set, &sig);
    egress_counters c;
    egress_sandbox_counters(sb, &c);
    egress_sandbox_destroy(sb);
    egress_proxy_destroy(p);
    printf("counters up=%llu down=%llu allowed=%llu denied=%llu open=%llu\n",
           (unsigned long long)c.bytes_up, (unsigned long long)c.bytes_down,
           (unsigned long long)c.allowed, (unsigned long long)c.denied, (unsigned long long)c.open);
    if (audit_f)
        fclose(audit_f);
    for (size_t i = 0; i < n; i++)
        free(owned[i]);
    return access(sock, F_OK) == 0;   /* destroy must remove the socket */
}
