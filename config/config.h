/* config.h — the daemons' own YAML configuration (ops-owned), as opposed to
 * the security policy (policy.h, security-owned). Same loader style: every
 * error is "file:line:col: key.path: what, expected X"; unknown keys are
 * errors; all errors are reported.
 *
 * Gateway file:
 *   listen: "127.0.0.1:7443"
 *   metrics_listen: "127.0.0.1:9443"  # optional: Prometheus /metrics over HTTP
 *   policy: "policy.yaml"          # relative paths are relative to this file
 *   api_keys_file: keys.yaml       # optional: more API-key digests per tenant, kept
 *                                  # out of the policy (policy/keys_file.c); reloaded
 *                                  # with it
 *   audit_log: "audit.log"         # optional; "-" = stderr
 *   threads: 1                     # completion-queue threads
 *   tls:                           # optional: mTLS on the listener
 *     cert: server.pem
 *     key: server.key
 *     client_ca: ca.pem
 *   registry:                      # instead of hosts: the hosts that registered in
 *     etcd: ["10.0.0.1:2379"]      # etcd under <prefix>hosts/ (see the host file)
 *     prefix: /sandgate/
 *     tls: {...}                   # as in the host file
 *   hosts:
 *     - name: local                # [a-z0-9]{1,16}, unique; part of sandbox ids
 *       address: "127.0.0.1:7444"
 *
 * Host file:
 *   listen: "127.0.0.1:7444"
 *   metrics_listen: "127.0.0.1:9444"  # optional: Prometheus /metrics over HTTP
 *   name: local
 *   threads: 1
 *   runtime_dir: /run/sandgate     # newroot mount point, sockets
 *   cgroup_root: /sys/fs/cgroup
 *   uid_base: 200000               # sandbox i runs as uid_base + slot
 *   max_sandboxes: 1024
 *   reserve:                       # admission control: a CreateSandbox (or a pool
 *     fds: 64                      # refill) that would leave less than this free is
 *     memory: 256MiB               # refused RESOURCE_EXHAUSTED naming what ran out:
 *     pids: 256                    # fds under RLIMIT_NOFILE and fs.file-max; MemAvailable;
 *                                  # tasks under pid_max, threads-max and the sandgate
 *                                  # cgroup's pids.max. 0 turns one check off.
 *   registry:                      # optional: register in etcd (issue: scale-out)
 *     etcd: ["10.0.0.1:2379", "10.0.0.2:2379"]   # client endpoints, host:port
 *     prefix: /sandgate/           # every key sandgate writes starts with it
 *     lease_ttl: 5                 # seconds a silent host stays registered
 *     advertise: "10.0.0.9:7444"   # host only: the address gateways dial
 *                                  # (default: listen)
 *     tls:                         # optional: TLS to every member (else plaintext)
 *       ca: etcd-ca.pem            # required: the CA that signed the members' certs
 *       cert: etcd-client.pem      # this daemon's client certificate and key, for
 *       key: etcd-client.key       # etcd's --client-cert-auth (both or neither)
 *       server_name: etcd.internal # the name the members' certificates carry, when
 *                                  # it is not the endpoint's host
 *   templates:
 *     - name: code-interpreter
 *       python: /usr/bin/python3
 *       preload: [numpy, pandas]
 *       ro_binds: [/usr, /etc/alternatives, /etc/ssl]
 *       symlinks: ["usr/bin:/bin", "usr/lib:/lib", "usr/lib64:/lib64", "usr/sbin:/sbin"]
 *       contain: true              # false only for tests without root
 *       pool: 4                    # warm sandboxes kept ready, 0..64 (0 = none);
 *                                  # SANDGATE_POOL_SIZE overrides it for every template
 *       rotate_forks: 64           # a fresh zygote (new ASLR layout, new str hash
 *                                  # secret) after this many sandboxes were handed
 *                                  # out; 0 = never (host/drivers/process/zygote.c, docs/security.md)
 *       rotate_after: 300s         # ... or this long after its first one; 0 = never
 *       isolation: process         # process (default) | gvisor: the driver that runs
 *                                  # it; a policy's minimum is checked against this
 *   gvisor:                        # optional: how the gvisor driver runs runsc
 *     runsc: /usr/bin/runsc        # absolute path (default /usr/bin/runsc)
 *     platform: ptrace             # ptrace (default) | systrap | kvm
 *     flags: ["--debug"]           # extra runsc global flags, each --name or
 *                                  # --name=value; the ones sandgate sets itself
 *                                  # (--root, --platform, --network, --host-uds)
 *                                  # and --TESTONLY-* are refused
 *     root: /run/sandgate/runsc    # runsc --root, its state dir (absolute);
 *                                  # default <runtime_dir>/runsc
 */
#ifndef SG_CONFIG_H
#define SG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/isolation.h"
#include "policy/policy.h"

typedef struct config_host_ref {
    char *name;
    char *address;
} config_host_ref;

/* Where the daemons meet in etcd mode; n_endpoints 0 = the embedded mode. */
typedef struct config_registry {
    char **endpoints; size_t n_endpoints;
    char *prefix;              /* ends with '/' */
    uint32_t lease_ttl;        /* seconds */
    char *advertise;           /* host: the address gateways dial; NULL = listen */
    /* TLS to etcd; tls_ca NULL = plaintext. Paths are absolute after load. */
    char *tls_ca, *tls_cert, *tls_key;   /* cert and key: both or neither */
    char *tls_server_name;               /* NULL = each endpoint's host */
} config_registry;

#define CONFIG_LEASE_TTL_DEFAULT 5

typedef struct config_gateway {
    config_registry registry;   /* n_endpoints 0: the static `hosts` list */
    char *listen;
    char *metrics_listen;  /* NULL = no metrics listener */
    char *policy_path;     /* absolute after load */
    char *api_keys_path;   /* absolute after load; NULL = the policy's keys only */
    char *audit_log;       /* NULL = none */
    int threads;
    char *tls_cert, *tls_key, *tls_client_ca;   /* NULL when no TLS */
    config_host_ref *hosts;
    size_t n_hosts;
} config_gateway;

typedef struct config_template {
    char *name;
    char *python;
    char **preload; size_t n_preload;
    char **ro_binds; size_t n_ro_binds;
    char **symlinks; size_t n_symlinks;
    int contain;
    int pool;              /* warm sandboxes to keep, 0..CONFIG_POOL_MAX */
    uint32_t rotate_forks; /* sandboxes per zygote generation; 0 = no limit */
    uint32_t rotate_after; /* seconds a generation serves after its first; 0 = no limit */
    sg_isolation isolation;  /* PROCESS (default) or GVISOR; never UNSET after load */
} config_template;

/* The gvisor driver's runsc invocation (host file, `gvisor:`). */
typedef struct config_gvisor {
    char *runsc;           /* absolute path; default CONFIG_RUNSC_DEFAULT */
    char *platform;        /* "ptrace" (default), "systrap" or "kvm" */
    char **flags; size_t n_flags;   /* extra global flags, checked at load */
    char *root;            /* runsc --root; NULL = "<runtime_dir>/runsc" */
} config_gvisor;

#define CONFIG_RUNSC_DEFAULT "/usr/bin/runsc"
#define CONFIG_RUNSC_PLATFORM_DEFAULT "ptrace"

#define CONFIG_POOL_DEFAULT 4
#define CONFIG_RESERVE_FDS 64
#define CONFIG_RESERVE_MEMORY (256ull << 20)
#define CONFIG_RESERVE_PIDS 256
#define CONFIG_POOL_MAX 64
#define CONFIG_ROTATE_FORKS_DEFAULT 64
#define CONFIG_ROTATE_FORKS_MAX 1000000
#define CONFIG_ROTATE_AFTER_DEFAULT 300

typedef struct config_host {
    config_registry registry;
    char *listen;
    char *metrics_listen;  /* NULL = no metrics listener */
    char *name;
    int threads;
    char *runtime_dir;
    /* The sandbox journal (host/core/journal.c); NULL = "<runtime_dir>/state".
     * Put it on a disk that outlives a reboot (e.g. /var/lib/sandgate). */
    char *state_dir;
    char *cgroup_root;
    uint32_t uid_base;
    uint32_t max_sandboxes;
    uint32_t reserve_fds;      /* admission control (host/core/admit.c); 0 = no check */
    uint64_t reserve_memory;   /* bytes */
    uint32_t reserve_pids;
    config_template *templates;
    size_t n_templates;
    config_gvisor gvisor;  /* always filled (defaults when the section is absent) */
} config_host;

int config_gateway_load(const char *path, config_gateway *out, policy_errors *errs);
void config_gateway_cleanup(config_gateway *c);
int config_host_load(const char *path, config_host *out, policy_errors *errs);
void config_host_cleanup(config_host *c);

#endif
