/* main.c — sandgate-host: load the host config, bind each template to its
 * isolation driver (host/driver.h) and start it, the I/O loop and the gRPC server, and shut down cleanly on SIGTERM/SIGINT
 * (every sandbox killed, every cgroup removed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/daemon.h"
#include "common/log.h"
#include "etcd/etcd.h"
#include "host/core/admit.h"
#include "host/contain/contain.h"
#include "host/core/files.h"
#include "host/host.h"
#include "host/core/reaper.h"
#include "rpc/health.h"
#include "rpc/metrics_http.h"
#include "rpc/reflection.h"

/* The host API's descriptors, embedded at build time (CMakeLists.txt). */
extern const unsigned char sg_host_descriptor_set[];
extern const size_t sg_host_descriptor_set_len;

host_state H = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void usage(void)
{
    fprintf(stderr,
            "usage: sandgate-host --config FILE [--listen ADDR] [--port-file FILE]\n"
            "                     [--contain-lib PATH] [--runtime DIR] [--name NAME]\n"
            "                     [--runtime-dir DIR] [--state-dir DIR] [--audit-log FILE]\n"
            "                     [--egress-hosts FILE] [--metrics-listen ADDR]\n"
            "                     [--metrics-port-file FILE] [--log-level LEVEL]\n"
            "                     [--advertise ADDR] [--drain-file FILE] [--check-config]\n"
            "  --name NAME          overrides the config's name ([a-z0-9]{1,16})\n"
            "  --advertise ADDR     overrides registry.advertise, the host:port gateways\n"
            "                       dial (Kubernetes: the pod IP from the downward API)\n"
            "  --drain-file FILE    drain (as SIGUSR1 does) once FILE has the line\n"
            "                       sandgate.io/drain=\"true\" (Kubernetes: the pod's\n"
            "                       annotations through the downward API)\n"
            "  --check-config       load the config with the overrides, report every\n"
            "                       error, and exit (0 = would start); changes nothing\n"
            "  --audit-log FILE     egress decisions, one JSON line each (appended;\n"
            "                       default: stderr)\n"
            "  --egress-hosts FILE  \"IP name...\" lines the egress proxy consults before\n"
            "                       DNS (tests map names to their servers)\n"
            "  --state-dir DIR      the sandbox journal (default: config state_dir, else\n"
            "                       <runtime-dir>/state)\n"
            "  --metrics-listen ADDR  Prometheus /metrics over HTTP (config: metrics_listen;\n"
            "                       port 0 picks one, written to --metrics-port-file)\n");
}

static void default_paths(void)
{
    char exe[512];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    char *dir = dirname(exe);
    snprintf(H.contain_lib, sizeof H.contain_lib, "%s/../lib/libsandgate_contain.so", dir);
    snprintf(H.runtime_py, sizeof H.runtime_py, "%s/zygote.py", SANDGATE_RUNTIME_DIR);
    snprintf(H.init_path, sizeof H.init_path, "%s/sandgate-init", dir);
}

static int load_config(const char *path, const char *name, const char *runtime_dir,
                       const char *state_dir)
{
    policy_errors errs = {0};
    if (config_host_load(path, &H.cfg, &errs) != 0) {
        for (size_t i = 0; i < errs.n; i++)
            sg_log_error("%s", errs.items[i]);
        policy_errors_cleanup(&errs);
        return -1;
    }
    policy_errors_cleanup(&errs);
    if (name) {
        free(H.cfg.name);
        H.cfg.name = strdup(name);
    }
    if (runtime_dir) {
        free(H.cfg.runtime_dir);
        H.cfg.runtime_dir = strdup(runtime_dir);
    }
    if (state_dir) {
        free(H.cfg.state_dir);
        H.cfg.state_dir = strdup(state_dir);
    }
    if (!H.cfg.state_dir) {
        char sd[600];
        snprintf(sd, sizeof sd, "%s/state", H.cfg.runtime_dir);
        H.cfg.state_dir = strdup(sd);
    }
    if (!H.cfg.gvisor.root) {
        char gr[600];
        snprintf(gr, sizeof gr, "%s/runsc", H.cfg.runtime_dir);
        H.cfg.gvisor.root = strdup(gr);
    }
    H.n_templates = H.cfg.n_templates;
    H.templates = calloc(H.n_templates, sizeof *H.templates);
    for (size_t i = 0; i < H.n_templates; i++)
        H.templates[i].cfg = &H.cfg.templates[i];
    H.slots = calloc(H.cfg.max_sandboxes ? H.cfg.max_sandboxes : 1, 1);
    char nr[600];
    snprintf(nr, sizeof nr, "%s/newroot", H.cfg.runtime_dir);
    mkdir(H.cfg.runtime_dir, 0755);
    if (mkdir(nr, 0755) != 0 && errno != EEXIST) {
        sg_log_error("mkdir(%s): %s", nr, strerror(errno));
        return -1;
    }
    return 0;
}

/* The command-line overrides get the checks the config file's keys get. */
static int check_overrides(const char *name, const char *advertise)
{
    size_t n = name ? strlen(name) : 1;
    if (name && (n < 1 || n > 16 || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789") != n)) {
        sg_log_error("--name '%s': bad host name, expected [a-z0-9]{1,16}", name);
        return -1;
    }
    const char *colon = advertise ? strrchr(advertise, ':') : NULL;
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (advertise && (!colon || colon == advertise || !colon[1] || *end || port < 1 ||
                      port > 65535 || (advertise[0] == '[' && colon[-1] != ']'))) {
        sg_log_error("--advertise '%s': bad address, expected host:port with a port from 1 "
                     "to 65535 (an IPv6 address in brackets)", advertise);
        return -1;
    }
    return 0;
}

/* --check-config: the loader alone, so a check creates no directory. */
static int check_config(const char *path, const char *name, const char *advertise)
{
    policy_errors errs = {0};
    config_host c;
    memset(&c, 0, sizeof c);
    int rc = config_host_load(path, &c, &errs);
    for (size_t i = 0; i < errs.n; i++)
        sg_log_error("%s", errs.items[i]);
    policy_errors_cleanup(&errs);
    /* every template's isolation has a driver here (whether it can run on
     * this machine is for the start to find: it is not this machine) */
    for (size_t i = 0; rc == 0 && i < c.n_templates; i++) {
        sg_err derr;
        if (!host_driver_for(&c.templates[i], &derr)) {
            sg_log_error("%s: %s", path, derr.msg);
            rc = -1;
        }
    }
    if (rc == 0 && c.registry.tls_ca) {
        etcd_tls tls = {c.registry.tls_ca, c.registry.tls_cert, c.registry.tls_key,
                        c.registry.tls_server_name};
        sg_err terr;
        if (etcd_tls_check(&tls, &terr) != 0) {
            sg_log_error("%s: %s", path, terr.msg);
            rc = -1;
        }
    }
    const char *adv = advertise ? advertise : c.registry.advertise ? c.registry.advertise : c.listen;
    if (rc == 0)
        sg_log_info("config %s: ok (host %s, %zu template(s), registry: %s%s)", path,
                name ? name : c.name, c.n_templates,
                c.registry.n_endpoints ? c.registry.tls_ca ? "etcd over TLS, advertise "
                                                      : "etcd, advertise "
                                : "none",
                c.registry.n_endpoints && adv ? adv : "");
    config_host_cleanup(&c);
    return rc == 0 ? 0 : 1;
}

/* One host per (name, runtime dir): the lock makes the stale cleanup below
 * safe, since no live host can own "<name>-*" cgroups while we hold it. */
static int lock_instance(void)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s.lock", H.cfg.runtime_dir, H.cfg.name);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        sg_log_error("another host named %s is running (%s is locked)",
                H.cfg.name, path);
        return -1;
    }
    return 0;   /* fd stays open: the lock lives as long as the process */
}

/* A previous host of this name that died (crash, SIGKILL) may have left
 * sandboxes behind: their cgroups are "<name>-<id>". Kill and remove them
 * before serving, so a restart never leaks processes or cgroups. Other
 * hosts' sandboxes on this machine (other names) are left alone. */
static void cleanup_stale(void)
{
    sgc_cgroup_kind kind = sgc_cgroup_detect(H.cfg.cgroup_root);
    if (kind == SGC_CGROUP_NONE)
        return;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/%s/sandgate", H.cfg.cgroup_root,
             kind == SGC_CGROUP_V1 ? "pids" : "");
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t nl = strlen(H.cfg.name);
        if (e->d_type != DT_DIR || strncmp(e->d_name, H.cfg.name, nl) != 0 ||
            e->d_name[nl] != '-')
            continue;
        char eb[256];
        for (int i = 0; i < 100 && !sgc_cgroup_empty(H.cfg.cgroup_root, e->d_name); i++) {
            sgc_cgroup_kill(H.cfg.cgroup_root, e->d_name, eb, sizeof eb);
            usleep(10000);
        }
        if (sgc_cgroup_destroy(H.cfg.cgroup_root, e->d_name, eb, sizeof eb) == 0)
            sg_log_warn("removed stale sandbox %s", e->d_name);
        else
            sg_log_warn("stale sandbox %s: %s", e->d_name, eb);
    }
    closedir(d);
}

/* Kill every sandbox and wait (bounded) for their cgroups to go. The loop
 * thread's tick reaps them, never this thread: only the loop may free a
 * sandbox, because an event it has taken from epoll_wait and not yet
 * handled can point into one (freeing here was a use-after-free in
 * loop_main that ASan caught at shutdown). */
static void kill_all(void)
{
    pthread_mutex_lock(&H.mu);
    H.draining = 1;
    host_pool_drain();
    while (H.sandboxes)
        host_sandbox_kill(H.sandboxes, NULL);
    pthread_mutex_unlock(&H.mu);
    for (int i = 0; i < 250; i++) {
        pthread_mutex_lock(&H.mu);
        int left = H.dying != NULL;
        pthread_mutex_unlock(&H.mu);
        if (!left)
            break;
        usleep(20000);
    }
}

int main(int argc, char **argv)
{
    const char *config = NULL, *listen = NULL, *port_file = NULL, *name = NULL, *rtdir = NULL;
    const char *audit_log = NULL, *egress_hosts = NULL, *state_dir = NULL, *metrics = NULL,
               *metrics_port_file = NULL, *log_level = getenv("SANDGATE_LOG_LEVEL");
    default_paths();
    static struct option opts[] = {{"config", 1, 0, 'c'},      {"listen", 1, 0, 'l'},
                                   {"port-file", 1, 0, 'p'},   {"contain-lib", 1, 0, 'L'},
                                   {"runtime", 1, 0, 'r'},     {"help", 0, 0, 'h'},
                                   {"name", 1, 0, 'n'},        {"runtime-dir", 1, 0, 'R'},
                                   {"audit-log", 1, 0, 'A'},   {"egress-hosts", 1, 0, 'E'},
                                   {"state-dir", 1, 0, 'S'},   {"metrics-listen", 1, 0, 'm'},
                                   {"metrics-port-file", 1, 0, 'P'}, {"log-level", 1, 0, 'g'},
                                   {"advertise", 1, 0, 'a'},   {"check-config", 0, 0, 'C'},
                                   {"drain-file", 1, 0, 'D'},
                                   {0, 0, 0, 0}};
    const char *advertise_arg = NULL;
    int o, check_only = 0;
    while ((o = getopt_long(argc, argv, "c:l:p:L:r:hn:R:", opts, NULL)) != -1) {
        switch (o) {
        case 'c': config = optarg; break;
        case 'l': listen = optarg; break;
        case 'p': port_file = optarg; break;
        case 'L': snprintf(H.contain_lib, sizeof H.contain_lib, "%s", optarg); break;
        case 'r': snprintf(H.runtime_py, sizeof H.runtime_py, "%s/zygote.py", optarg); break;
        case 'n': name = optarg; break;
        case 'R': rtdir = optarg; break;
        case 'A': audit_log = optarg; break;
        case 'E': egress_hosts = optarg; break;
        case 'S': state_dir = optarg; break;
        case 'm': metrics = optarg; break;
        case 'P': metrics_port_file = optarg; break;
        case 'g': log_level = optarg; break;
        case 'a': advertise_arg = optarg; break;
        case 'D': host_registry_drain_file(optarg); break;
        case 'C': check_only = 1; break;
        default: usage(); return 2;
        }
    }
    if (!config) {
        usage();
        return 2;
    }
    int lvl = log_level ? sg_log_level_parse(log_level) : SG_LOG_INFO;
    if (lvl < 0) {
        sg_log_warn("--log-level %s: expected debug, info, warn or error",
                log_level);
        return 2;
    }
    sg_log_init("sandgate-host", (sg_log_level)lvl);
    /* SIGCHLD goes to the loop's signalfd; SIGTERM/INT to sigwait below.
     * Blocked before any thread exists so every thread inherits the mask. */
    sg_daemon_block_signals(SIGCHLD);
    sigset_t usr1;   /* drain: sigwait below, like SIGTERM */
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* ~5 fds per sandbox: the soft limit (often 1,024) would cap a host
     * near 200 sandboxes while the hard one allows far more. */
    host_admit_raise_nofile();

    if (check_overrides(name, advertise_arg) != 0)
        return 2;
    if (check_only)
        return check_config(config, name, advertise_arg);
    if (load_config(config, name, rtdir, state_dir) != 0)
        return 1;
    if (advertise_arg) {
        free(H.cfg.registry.advertise);
        H.cfg.registry.advertise = strdup(advertise_arg);
    }
    sg_err err;
    /* Every template's isolation has a driver that can run here, or the
     * host does not start (never a fall-back to a weaker one). */
    if (host_drivers_bind(H.templates, H.n_templates, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    if (lock_instance() != 0)
        return 1;
    cleanup_stale();
    host_drivers_sweep();
    if (host_journal_open(H.cfg.state_dir, H.cfg.name, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    if (host_egress_start(egress_hosts, audit_log, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    if (host_files_start(&err) != 0 || host_fwatch_start(&err) != 0 || host_reaper_start(&err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    rpc_runtime_init();
    rpc_runtime_log_json();
    int port = 0;
    H.srv = rpc_server_create(H.cfg.threads, &err);
    if (H.srv && host_metrics_init(H.srv) != 0) {
        sg_log_error("cannot set up metrics (out of memory)");
        return 1;
    }
    if (!metrics)
        metrics = H.cfg.metrics_listen;
    if (!H.srv || (metrics && host_metrics_listen(metrics, metrics_port_file, &err) != 0) ||
        host_service_register(H.srv, &err) != 0 ||
        rpc_reflection_register(H.srv, sg_host_descriptor_set, sg_host_descriptor_set_len,
                                &err) != 0 ||
        rpc_server_listen(H.srv, listen ? listen : H.cfg.listen, NULL, &port, &err) != 0 ||
        host_loop_start(&err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    pthread_mutex_lock(&H.mu);
    int zrc = host_drivers_start(&err);
    pthread_mutex_unlock(&H.mu);
    if (zrc != 0 || rpc_server_start(H.srv, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    sg_log_info("reserve: %u fds, %llu MiB memory, %u pids (0 = off)",
            H.cfg.reserve_fds, (unsigned long long)(H.cfg.reserve_memory >> 20),
            H.cfg.reserve_pids);
    if (sg_daemon_write_port(port_file, port) != 0)
        sg_log_warn("cannot write port file %s", port_file);
    /* Registered only once serving: a gateway that sees the entry can call. */
    char advertise[128];
    const char *la = listen ? listen : H.cfg.listen, *colon = strrchr(la, ':');
    snprintf(advertise, sizeof advertise, "%.*s:%d", (int)(colon ? colon - la : 0), la, port);
    if (host_registry_start(advertise, &err) != 0) {
        sg_log_error("%s", err.msg);
        return 1;
    }
    sg_log_info("%s serving on port %d (cgroups: %s)", H.cfg.name, port,
            sgc_cgroup_detect(H.cfg.cgroup_root) == SGC_CGROUP_V2   ? "v2"
            : sgc_cgroup_detect(H.cfg.cgroup_root) == SGC_CGROUP_V1 ? "v1"
                                                                   : "none");
    sigset_t waited;
    sigemptyset(&waited);
    sigaddset(&waited, SIGTERM);
    sigaddset(&waited, SIGINT);
    sigaddset(&waited, SIGUSR1);
    int sig = 0;
    while (sigwait(&waited, &sig) == 0 && sig == SIGUSR1)
        host_registry_drain();
    sg_log_info("signal %d: shutting down", sig);
    rpc_health_set_serving(0);
    host_registry_stop();   /* gateways stop placing here at once */
    kill_all();
    host_reaper_stop();  /* after kill_all: its last signals go out */
    host_fwatch_stop();   /* watches end UNAVAILABLE */
    host_files_stop();   /* file calls in flight answer; the rest get UNAVAILABLE */
    rpc_metrics_http_stop();
    rpc_server_shutdown(H.srv);
    host_journal_close();   /* no handler runs now: none reads the lost table */
    host_loop_stop();
    host_egress_stop();   /* after the loop: no EGRESS can arrive any more */
    host_drivers_stop();
    rpc_server_destroy(H.srv);
    grpc_shutdown();
    return 0;
}
