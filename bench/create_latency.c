/* create_latency.c — sandbox create latency and idle memory through the real
 * daemons (issue 3's benchmark). Not a test.
 *
 *   bench_create --addr 127.0.0.1:7443 --key sg-demo-key-0001 [options]
 *
 *   -n N            creates per run (default 200)
 *   --mode M        b2b | paced | both (default both). b2b: each create right
 *                   after the previous kill answered; paced: --pause-ms of
 *                   idle between a kill and the next create.
 *   --pause-ms P    the pause of paced runs (default 100)
 *   --template T    (default code-interpreter)
 *   --pss LIST      also measure idle PSS with these counts of idle
 *                   sandboxes, e.g. 1,10,50 (the daemons must run on this
 *                   machine; reads cgroup.procs and /proc/<pid>/smaps_rollup)
 *   --pss-code C    with --pss: run C in each sandbox's default context
 *                   first (with sandgate-cli, next to this binary), so the
 *                   figure is for a sandbox that has run code and gone idle
 *   --host-pid P    with --pss: also sum PSS over the host daemon's whole
 *                   process tree (zygotes, warm pool, sandboxes) before and
 *                   with the idle sandboxes: what each added sandbox really
 *                   costs the machine, template and pool included
 *   --csv FILE      also write every create as "run,start_ms,create_ms" (start
 *                   on CLOCK_MONOTONIC, as time.monotonic() in Python), so
 *                   creates can be matched to host events (bench/rotation.py)
 *   --pool-metrics HOST:PORT  before every create, wait (up to 300 s) until
 *                   the host's /metrics (HTTP, this address) shows at least
 *                   --pool-min warm sandboxes of the template (default 1):
 *                   each create then takes a warm sandbox with no refill of
 *                   the pool still running (a gVisor pool sandbox takes
 *                   seconds of CPU to warm; without the wait back-to-back
 *                   creates drain the pool and time cold starts)
 *   --cold N        also time N cold starts: fork+exec of
 *                   /usr/bin/python3 -c "import numpy, pandas" (what a create
 *                   would cost with no zygote, before any isolation)
 *
 * Latency is wall time of the CreateSandbox RPC as the client sees it
 * (gateway + host + zygote + the sandbox reporting its default context).
 * Kill latency is reported too but is not the target. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netdb.h>
#include <sys/socket.h>

extern char **environ;

#include "rpc/rpc.h"
#include "sandgate/v1/sandgate.pb-c.h"

typedef struct {
    grpc_channel *ch;
    grpc_metadata md[1];
    char bearer[256];
    const char *user, *template_;
    const char *addr, *key;   /* borrowed from argv / environ: for sandgate-cli */
    char cli[512];            /* sandgate-cli next to this binary */
} conn;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const double *v, int n, double p)
{
    int k = (int)(p / 100.0 * n + 0.999999) - 1;
    if (k < 0)
        k = 0;
    if (k >= n)
        k = n - 1;
    return v[k];
}

static void summary(const char *what, double *v, int n)
{
    if (n <= 0) {
        printf("%-34s no samples\n", what);
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    printf("%-34s n=%d p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  max %.1f ms\n", what, n,
           pct(v, n, 50), pct(v, n, 90), pct(v, n, 99), v[n - 1]);
}

static int create(conn *c, const char *task, char *id_out, size_t id_len)
{
    Sandgate__V1__CreateSandboxRequest req;
    sandgate__v1__create_sandbox_request__init(&req);
    req.template_ = (char *)c->template_;
    req.task_id = (char *)task;
    req.user_id = (char *)c->user;
    req.ttl_seconds = 600;
    uint8_t *buf = NULL;
    size_t len = 0;
    rpc_status st;
    if (rpc_blocking_unary(c->ch, "/sandgate.v1.Sandboxes/CreateSandbox", c->md, 1, 60,
                           &req.base, &buf, &len, &st) != 0 || st.code != GRPC_STATUS_OK) {
        fprintf(stderr, "bench_create: CreateSandbox(%s): %s: %s\n", task,
                rpc_status_name(st.code), st.details);
        free(buf);
        return -1;
    }
    Sandgate__V1__Sandbox *s = sandgate__v1__sandbox__unpack(NULL, len, buf);
    free(buf);
    if (!s)
        return -1;
    snprintf(id_out, id_len, "%s", s->sandbox_id);
    sandgate__v1__sandbox__free_unpacked(s, NULL);
    return 0;
}

static int kill_sb(conn *c, const char *id)
{
    Sandgate__V1__KillSandboxRequest req;
    sandgate__v1__kill_sandbox_request__init(&req);
    req.sandbox_id = (char *)id;
    req.user_id = (char *)c->user;
    uint8_t *buf = NULL;
    size_t len = 0;
    rpc_status st;
    int rc = rpc_blocking_unary(c->ch, "/sandgate.v1.Sandboxes/KillSandbox", c->md, 1, 60,
                                &req.base, &buf, &len, &st);
    free(buf);
    if (rc != 0 || st.code != GRPC_STATUS_OK) {
        fprintf(stderr, "bench_create: KillSandbox(%s): %s: %s\n", id,
                rpc_status_name(st.code), st.details);
        return -1;
    }
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static FILE *csv;   /* --csv: one line per create; NULL = none */
static const char *pool_metrics;   /* --pool-metrics HOST:PORT; NULL = no wait */
static int pool_min = 1;
static double pool_waited_ms;

/* Warm sandboxes of template t on the host's /metrics at hostport, -1 when
 * it cannot be read. One HTTP/1.0 GET; the gauge's line is
 * sandgate_host_warm_pool{template="T",...} N. */
static int warm_pool(const char *hostport, const char *t)
{
    char host[256], *colon;
    snprintf(host, sizeof host, "%s", hostport);
    if (!(colon = strrchr(host, ':')))
        return -1;
    *colon = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0)
        return -1;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 5};
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
        close(fd);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while (buf && (r = read(fd, buf + len, cap - 1 - len)) > 0) {
        len += (size_t)r;
        if (len == cap - 1) {
            char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
    }
    close(fd);
    if (!buf)
        return -1;
    buf[len] = 0;
    char key[300];
    snprintf(key, sizeof key, "sandgate_host_warm_pool{template=\"%s\"", t);
    int n = -1;
    for (char *line = strstr(buf, key); line; line = strstr(line + 1, key))
        if (line == buf || line[-1] == '\n') {
            char *sp = strchr(line, '}');
            n = sp ? (int)strtod(sp + 1, NULL) : -1;
            break;
        }
    free(buf);
    return n;
}


/* --pool-metrics: wait until the pool holds pool_min warm sandboxes. */
static void wait_pool(const conn *c)
{
    if (!pool_metrics)
        return;
    double t0 = now_ms();
    while (now_ms() - t0 < 300e3) {
        int n = warm_pool(pool_metrics, c->template_);
        if (n >= pool_min)
            break;
        if (n < 0 && now_ms() - t0 > 10e3) {
            fprintf(stderr, "bench_create: no warm_pool gauge for %s at %s\n", c->template_,
                    pool_metrics);
            break;
        }
        sleep_ms(50);
    }
    pool_waited_ms += now_ms() - t0;
}

static int run(conn *c, int n, int pause_ms, const char *label)
{
    double *cr = calloc((size_t)n, sizeof *cr), *kl = calloc((size_t)n, sizeof *kl);
    int ok = 0, failed = 0;
    static int run_no;
    run_no++;
    for (int i = 0; i < n; i++) {
        char task[96], id[128];
        snprintf(task, sizeof task, "bench-%d-%d-%d", (int)getpid(), run_no, i);
        wait_pool(c);
        double t0 = now_ms();
        if (create(c, task, id, sizeof id) != 0) {
            failed++;
            continue;
        }
        double t1 = now_ms();
        if (kill_sb(c, id) != 0)
            failed++;
        double t2 = now_ms();
        cr[ok] = t1 - t0;
        kl[ok] = t2 - t1;
        if (csv)
            fprintf(csv, "%s,%.3f,%.3f\n", label, t0, t1 - t0);
        ok++;
        if (pause_ms)
            sleep_ms(pause_ms);
    }
    char what[96];
    snprintf(what, sizeof what, "create, %s:", label);
    summary(what, cr, ok);
    snprintf(what, sizeof what, "  (kill, %s:", label);
    summary(what, kl, ok);
    if (pool_metrics)
        printf("  (waited for a full pool before each create: %.1f s in all)\n", pool_waited_ms / 1e3);
    pool_waited_ms = 0;
    if (failed)
        printf("  %d calls failed\n", failed);
    free(cr);
    free(kl);
    return failed ? -1 : 0;
}

/* Pss (KiB) of one process, -1 if gone. */
static long pss_kib(const char *pid)
{
    char path[128], line[256];
    snprintf(path, sizeof path, "/proc/%s/smaps_rollup", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "Pss:", 4) == 0) {
            v = atol(line + 4);
            break;
        }
    fclose(f);
    return v;
}

/* Sum of Pss over every process in the sandbox's cgroup (v1 pids
 * controller, or v2). Returns KiB, the process count in *nproc. */
static long sandbox_pss(const char *id, int *nproc)
{
    static const char *const dirs[] = {"/sys/fs/cgroup/pids/sandgate", "/sys/fs/cgroup/sandgate",
                                       "/sys/fs/cgroup/unified/sandgate"};
    *nproc = 0;
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        char path[512], pid[32];
        snprintf(path, sizeof path, "%s/%s/cgroup.procs", dirs[d], id);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        long sum = 0;
        while (fgets(pid, sizeof pid, f)) {
            pid[strcspn(pid, "\n")] = 0;
            long v = pss_kib(pid);
            if (v >= 0) {
                sum += v;
                (*nproc)++;
            }
        }
        fclose(f);
        return sum;
    }
    return -1;
}

/* Sum of Pss over pid root's descendants (not root itself), in KiB;
 * *nproc receives how many there are. */
static long tree_pss(int root, int *nproc)
{
    enum { MAXP = 1 << 16 };
    static int ppid_of[MAXP];
    memset(ppid_of, 0, sizeof ppid_of);
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid >= MAXP)
            continue;
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        const char *rp;
        if (fgets(line, sizeof line, f) && (rp = strrchr(line, ')')))
            sscanf(rp + 1, " %*c %d", &ppid_of[pid]);
        fclose(f);
    }
    closedir(d);
    long sum = 0;
    *nproc = 0;
    for (int pid = 1; pid < MAXP; pid++) {
        int a = ppid_of[pid], hops = 0;
        while (a > 1 && a != root && hops++ < 64)
            a = a < MAXP ? ppid_of[a] : 0;
        if (a != root)
            continue;
        char s[16];
        snprintf(s, sizeof s, "%d", pid);
        long v = pss_kib(s);
        if (v > 0) {
            sum += v;
            (*nproc)++;
        }
    }
    return sum;
}

/* The host tree's PSS once it has settled: the same number of processes
 * and PSS within 0.5 % over three samples 300 ms apart (pool refills and
 * kills finish), or whatever it is after 15 s, with a warning. Measured
 * right after creates or kills, the tree is still changing. */
static long tree_pss_settled(int root)
{
    long prev = -1;
    int prev_n = -1, steady = 0;
    for (int i = 0; i < 50; i++) {
        int n;
        long v = tree_pss(root, &n);
        if (n == prev_n && prev > 0 && labs(v - prev) * 200 <= prev)
            steady++;
        else
            steady = 0;
        if (steady >= 2)
            return v;
        prev = v;
        prev_n = n;
        sleep_ms(300);
    }
    fprintf(stderr, "bench_create: host tree PSS did not settle in 15 s\n");
    return prev;
}

/* RunCode through sandgate-cli: the bench has no streaming client of its own. */
static int run_code(conn *c, const char *id, const char *code)
{
    char *argv[] = {c->cli, "--addr", (char *)c->addr, "--key", (char *)c->key, "--user",
                    (char *)c->user, "run", (char *)id, (char *)code, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawn(&pid, c->cli, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    int st = 0;
    if (rc != 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_create: %s run %s: failed (%s)\n", c->cli, id,
                rc ? strerror(rc) : "see its stderr");
        return -1;
    }
    return 0;
}

static void pss(conn *c, const char *list, int host_pid, const char *code)
{
    char *copy = strdup(list), *save = NULL;
    long base = host_pid > 0 ? tree_pss_settled(host_pid) : -1;
    if (base >= 0)
        printf("host tree PSS with no sandbox (zygote + warm pool): %.1f MiB\n", base / 1024.0);
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int k = atoi(tok);
        if (k <= 0)
            continue;
        char (*ids)[128] = calloc((size_t)k, sizeof *ids);
        int made = 0;
        for (int i = 0; i < k; i++) {
            char task[96];
            snprintf(task, sizeof task, "bench-pss-%d-%d-%d", (int)getpid(), k, i);
            if (create(c, task, ids[made], sizeof ids[made]) == 0 &&
                (!code || run_code(c, ids[made], code) == 0))
                made++;
        }
        /* Pool refills and context start-up settle first. */
        long all = -1;
        if (base >= 0)
            all = tree_pss_settled(host_pid);
        else
            sleep_ms(1000);
        double *v = calloc((size_t)made + 1, sizeof *v);
        int nv = 0, procs = 0;
        double total = 0;
        for (int i = 0; i < made; i++) {
            int np;
            long kib = sandbox_pss(ids[i], &np);
            if (kib < 0)
                continue;
            v[nv++] = kib / 1024.0;
            total += kib / 1024.0;
            procs += np;
        }
        if (nv) {
            qsort(v, (size_t)nv, sizeof *v, cmp_d);
            printf("idle PSS%s, %2d sandboxes: mean %.2f MiB/sandbox  median %.2f  max %.2f  "
                   "(%.1f processes/sandbox, total %.1f MiB)\n",
                   code ? " (after one run)" : "", nv, total / nv, pct(v, nv, 50), v[nv - 1], (double)procs / nv, total);
            if (all >= 0)
                printf("  host tree PSS %.1f MiB: %.2f MiB per added idle sandbox\n",
                       all / 1024.0, (all - base) / 1024.0 / nv);
        } else {
            printf("idle PSS, %d sandboxes: no cgroup.procs readable (daemons elsewhere?)\n",
                   made);
        }
        for (int i = 0; i < made; i++)
            kill_sb(c, ids[i]);
        free(v);
        free(ids);
        if (base >= 0)
            base = tree_pss_settled(host_pid);   /* the next count starts from here */
        else
            sleep_ms(500);
    }
    free(copy);
}

static void cold(int n)
{
    double *v = calloc((size_t)n, sizeof *v);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_ms();
        pid_t p = fork();
        if (p == 0) {
            char *argv[] = {"/usr/bin/python3", "-c", "import numpy, pandas", NULL};
            char *envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
            execve(argv[0], argv, envp);
            _exit(127);
        }
        int st;
        if (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            v[ok++] = now_ms() - t0;
    }
    summary("cold python3 + import numpy,pandas:", v, ok);
    free(v);
}

int main(int argc, char **argv)
{
    const char *addr = getenv("SANDGATE_ADDR"), *key = getenv("SANDGATE_API_KEY");
    const char *mode = "both", *pss_list = NULL, *pss_code = NULL;
    int n = 200, pause_ms = 100, n_cold = 0, host_pid = 0;
    conn c = {.user = "bench-user", .template_ = "code-interpreter"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_create: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--addr")) addr = v;
        else if (!strcmp(a, "--key")) key = v;
        else if (!strcmp(a, "-n")) n = atoi(v);
        else if (!strcmp(a, "--mode")) mode = v;
        else if (!strcmp(a, "--pause-ms")) pause_ms = atoi(v);
        else if (!strcmp(a, "--template")) c.template_ = v;
        else if (!strcmp(a, "--user")) c.user = v;
        else if (!strcmp(a, "--pss")) pss_list = v;
        else if (!strcmp(a, "--pss-code")) pss_code = v;
        else if (!strcmp(a, "--cold")) n_cold = atoi(v);
        else if (!strcmp(a, "--host-pid")) host_pid = atoi(v);
        else if (!strcmp(a, "--pool-metrics")) pool_metrics = v;
        else if (!strcmp(a, "--pool-min")) pool_min = atoi(v);
        else if (!strcmp(a, "--csv")) {
            if (!(csv = fopen(v, "w"))) {
                fprintf(stderr, "bench_create: fopen(%s): %s\n", v, strerror(errno));
                return 2;
            }
        }
        else {
            fprintf(stderr, "usage: bench_create --addr HOST:PORT --key KEY [-n N] "
                            "[--mode b2b|paced|both] [--pause-ms P] [--template T] "
                            "[--pss 1,10,50 [--pss-code CODE] [--host-pid P]] [--csv FILE] [--cold N]\n"
                            "       [--pool-metrics HOST:PORT [--pool-min N]]\n");
            return 2;
        }
        i++;
    }
    if (!addr || !key) {
        fprintf(stderr, "bench_create: --addr and --key (or SANDGATE_ADDR, SANDGATE_API_KEY)\n");
        return 2;
    }
    c.addr = addr;
    c.key = key;
    char self[512];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(c.cli, sizeof c.cli, "%s/sandgate-cli", dirname(self));
    grpc_init();
    c.ch = rpc_channel_create(addr, NULL);
    snprintf(c.bearer, sizeof c.bearer, "Bearer %s", key);
    c.md[0].key = grpc_slice_from_static_string("authorization");
    c.md[0].value = grpc_slice_from_static_string(c.bearer);

    /* Warm-up: connection, first create after a zygote start. */
    char id[128];
    wait_pool(&c);
    pool_waited_ms = 0;
    if (create(&c, "bench-warmup", id, sizeof id) != 0)
        return 1;
    kill_sb(&c, id);
    sleep_ms(200);

    int rc = 0;
    if (n > 0 && (!strcmp(mode, "b2b") || !strcmp(mode, "both")))
        rc |= run(&c, n, 0, "back-to-back");
    if (n > 0 && (!strcmp(mode, "paced") || !strcmp(mode, "both"))) {
        char label[64];
        snprintf(label, sizeof label, "paced %d ms", pause_ms);
        sleep_ms(pause_ms);
        rc |= run(&c, n, pause_ms, label);
    }
    if (pss_list)
        pss(&c, pss_list, host_pid, pss_code);
    if (n_cold > 0)
        cold(n_cold);
    grpc_channel_destroy(c.ch);
    if (csv)
        fclose(csv);
    return rc ? 1 : 0;
}
