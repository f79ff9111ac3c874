/* egress_bench.c — bench_egress: what the host's egress proxy adds to a
 * connection, and its throughput on one stream.
 *
 * Runs entirely inside a network namespace it makes itself
 * (unshare(CLONE_NEWNET): only lo, no route; checked before anything
 * starts), so nothing can leave the machine. Needs root (CAP_SYS_ADMIN).
 *
 * Pieces, all in this process:
 *   upstream  an HTTP server on 127.0.0.1 (one thread, one connection at a
 *             time): "/" answers a small body, "/big?n=N" streams N bytes;
 *   sandbox   a listener on 127.0.0.1:3128 whose accepted sockets are sent
 *             with SCM_RIGHTS over a SEQPACKET pair, as the supervisor does,
 *             to a thread that egress_sandbox_adopt()s them, as the host loop
 *             does; the proxy is host/egress/ unchanged (its own threads,
 *             hosts-file resolver: bench.test -> 127.0.0.1);
 *   client    the measuring thread.
 * Latency: connect + GET + whole response + close, direct to the upstream
 * vs through the proxy (absolute-URI GET http://bench.test:PORT/), N times
 * each; p50/p99/mean. Throughput: one GET of /big, direct vs proxied.
 *
 *   bench_egress [--n 2000] [--bytes 1073741824]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "host/egress/egress.h"

#define PROXY_PORT 3128

static int up_port;
static int pass_sv[2];   /* [0] "supervisor" sends, [1] "host loop" receives */
static egress_sandbox *sbx;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* ---- the namespace: only lo, up, no route --------------------------------- */
static void enter_private_net(void)
{
    if (unshare(CLONE_NEWNET) != 0)
        die("unshare(CLONE_NEWNET) (needs root)");
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        die("SIOCGIFFLAGS(lo)");
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        die("SIOCSIFFLAGS(lo up)");
    close(s);
    struct if_nameindex *ifs = if_nameindex();
    for (struct if_nameindex *i = ifs; i && i->if_name; i++)
        if (strcmp(i->if_name, "lo") != 0) {
            fprintf(stderr, "ABORT: interface %s in the bench netns\n", i->if_name);
            exit(1);
        }
    if_freenameindex(ifs);
    FILE *f = fopen("/proc/net/route", "r");   /* this netns's IPv4 table */
    char line[256];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n++;
    if (f)
        fclose(f);
    if (n > 1) {
        fprintf(stderr, "ABORT: the bench netns has IPv4 routes\n");
        exit(1);
    }
    printf("netns: private, only lo, no route\n");
}

static int listen_on(int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 256) != 0)
        die("bind/listen");
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    if (bound)
        *bound = ntohs(a.sin_port);
    return fd;
}

/* ---- upstream --------------------------------------------------------------- */
static void *upstream_main(void *arg)
{
    int lfd = *(int *)arg;
    static char buf[1 << 16];
    static char zeros[1 << 18];
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        size_t n = 0;
        while (n < sizeof buf - 1) {
            ssize_t r = recv(c, buf + n, sizeof buf - 1 - n, 0);
            if (r <= 0)
                break;
            n += (size_t)r;
            buf[n] = 0;
            if (strstr(buf, "\r\n\r\n"))
                break;
        }
        unsigned long long want = 0;
        char *big = strstr(buf, "/big?n=");
        if (big)
            want = strtoull(big + 7, NULL, 10);
        char head[160];
        static const char small[] = "{\"ok\":true,\"server\":\"bench-upstream\"}\n";
        unsigned long long len = big ? want : sizeof small - 1;
        int hl = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nConnection: close\r\n\r\n", len);
        send(c, head, (size_t)hl, MSG_NOSIGNAL);
        if (!big) {
            send(c, small, sizeof small - 1, MSG_NOSIGNAL);
        } else {
            while (want > 0) {
                size_t k = want < sizeof zeros ? (size_t)want : sizeof zeros;
                ssize_t w = send(c, zeros, k, MSG_NOSIGNAL);
                if (w <= 0)
                    break;
                want -= (unsigned long long)w;
            }
        }
        shutdown(c, SHUT_WR);
        while (recv(c, buf, sizeof buf, 0) > 0) {
        }
        close(c);
    }
    return NULL;
}

/* ---- the supervisor's and the host loop's parts ------------------------------ */
static void *supervisor_main(void *arg)
{
    int lfd = *(int *)arg;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        char msg[] = "EGRESS";
        struct iovec iov = {.iov_base = msg, .iov_len = 6};
        char cbuf[CMSG_SPACE(sizeof(int))] = {0};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                            .msg_controllen = sizeof cbuf};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &c, sizeof c);
        sendmsg(pass_sv[0], &mh, MSG_NOSIGNAL);
        close(c);
    }
    return NULL;
}

static void *hostloop_main(void *arg)
{
    (void)arg;
    for (;;) {
        char msg[64];
        struct iovec iov = {.iov_base = msg, .iov_len = sizeof msg};
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                            .msg_controllen = sizeof cbuf};
        if (recvmsg(pass_sv[1], &mh, MSG_CMSG_CLOEXEC) <= 0)
            return NULL;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        if (cm && cm->cmsg_type == SCM_RIGHTS) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm), sizeof fd);
            egress_sandbox_adopt(sbx, fd);
        }
    }
}

/* ---- client ---------------------------------------------------------------------- */
static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    return fd;
}

/* One request; returns bytes of the response (head + body), or -1. */
static long long fetch(int proxied, const char *path, int *status)
{
    int fd = dial(proxied ? PROXY_PORT : up_port);
    char req[256];
    int n = proxied ? snprintf(req, sizeof req,
                               "GET http://bench.test:%d%s HTTP/1.1\r\nHost: bench.test:%d\r\n\r\n",
                               up_port, path, up_port)
                    : snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: bench.test:%d\r\n\r\n",
                               path, up_port);
    send(fd, req, (size_t)n, MSG_NOSIGNAL);
    static char buf[1 << 18];
    long long total = 0;
    *status = 0;
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0)
            break;
        if (!total && r > 12)
            *status = atoi(buf + 9);
        total += r;
    }
    close(fd);
    return total;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void latency(int proxied, int n, double *p50, double *p99, double *mean)
{
    double *t = malloc(sizeof *t * (size_t)n), sum = 0;
    for (int i = 0; i < n + 50; i++) {   /* 50 warm-up rounds */
        int st;
        double t0 = now_s();
        fetch(proxied, "/", &st);
        double dt = (now_s() - t0) * 1e6;
        if (st != 200) {
            fprintf(stderr, "%s request: status %d\n", proxied ? "proxied" : "direct", st);
            exit(1);
        }
        if (i >= 50) {
            t[i - 50] = dt;
            sum += dt;
        }
    }
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    *p50 = t[n / 2];
    *p99 = t[(int)(n * 0.99)];
    *mean = sum / n;
    free(t);
}

static double throughput(int proxied, unsigned long long bytes)
{
    char path[64];
    snprintf(path, sizeof path, "/big?n=%llu", bytes);
    int st;
    double t0 = now_s();
    long long got = fetch(proxied, path, &st);
    double dt = now_s() - t0;
    if (st != 200 || got < (long long)bytes) {
        fprintf(stderr, "throughput %s: status %d, %lld bytes\n", proxied ? "proxied" : "direct", st,
                got);
        exit(1);
    }
    return (double)got / dt / 1e6;
}

int main(int argc, char **argv)
{
    int n = 2000;
    unsigned long long bytes = 1ull << 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = strtoull(argv[i + 1], NULL, 10);
    }
    signal(SIGPIPE, SIG_IGN);
    enter_private_net();   /* before any thread: the whole process moves */

    int up_l = listen_on(0, &up_port), sup_l = listen_on(PROXY_PORT, NULL);
    char hosts[] = "/tmp/bench_egress_hosts.XXXXXX";
    int hfd = mkstemp(hosts);
    dprintf(hfd, "127.0.0.1 bench.test\n");
    close(hfd);

    sg_err err = {0};
    uint32_t port = (uint32_t)up_port;
    egress_rule rules[] = {{.id = "bench.web", .host = "bench.test", .ports = &port, .n_ports = 1},
                           {.id = "bench.lo", .cidr = "127.0.0.0/8", .ports = &port, .n_ports = 1}};
    egress_rules *rs;
    egress_options o = {.hosts_file = hosts, .hosts_only = 1};
    egress_proxy *p;
    if (egress_rules_create(rules, 2, &rs, &err) != 0 || egress_proxy_create(&o, &p, &err) != 0 ||
        egress_sandbox_create(p, "bench", NULL, rs, 0, &sbx, &err) != 0) {
        fprintf(stderr, "bench_egress: %s\n", err.msg);
        return 1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pass_sv) != 0)
        die("socketpair");
    pthread_t th;
    pthread_create(&th, NULL, upstream_main, &up_l);
    pthread_create(&th, NULL, supervisor_main, &sup_l);
    pthread_create(&th, NULL, hostloop_main, NULL);

    double d50, d99, dm, p50, p99, pm;
    latency(0, n, &d50, &d99, &dm);
    latency(1, n, &p50, &p99, &pm);
    printf("latency per connection (connect + GET + response + close, n=%d), microseconds:\n", n);
    printf("  direct   p50 %8.1f  p99 %8.1f  mean %8.1f\n", d50, d99, dm);
    printf("  proxied  p50 %8.1f  p99 %8.1f  mean %8.1f\n", p50, p99, pm);
    printf("  added    p50 %8.1f  p99 %8.1f  mean %8.1f\n", p50 - d50, p99 - d99, pm - dm);
    double td = throughput(0, bytes), tp = throughput(1, bytes);
    printf("single-stream throughput (%llu bytes): direct %.0f MB/s, proxied %.0f MB/s (%.0f%%)\n",
           bytes, td, tp, 100.0 * tp / td);
    egress_counters c;
    egress_sandbox_counters(sbx, &c);
    printf("proxy counters: allowed %llu denied %llu down %llu bytes\n",
           (unsigned long long)c.allowed, (unsigned long long)c.denied,
           (unsigned long long)c.bytes_down);
    unlink(hosts);
    fflush(stdout);
    _exit(0);   /* the server threads block in accept */
}
