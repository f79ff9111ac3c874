/* shim.h — sandgate-gvisor-shim: one per gvisor sandbox, outside gVisor
 * (host/drivers/gvisor/PROTOCOL.md).
 *
 * The host starts it in the sandbox's cgroups with fd 3 = the supervisor
 * socket. It builds the OCI bundle, runs `runsc create` + `start` (so runsc,
 * the gofer and the Sentry inherit those cgroups), chroots into a directory
 * whose `workspace` is the sandbox's workspace tmpfs (the host's files.c
 * reaches it through /proc/<shim>/root/workspace), and relays the
 * supervisor protocol to and from the agent over the container's stdio.
 * Files:
 *   main.c    argv, the start-up sequence, the poll loop;
 *   bundle.c  the per-sandbox directory, rootfs and config.json;
 *   runsc.c   running runsc subcommands, each with a deadline ending in kill;
 *   mux.c     frames on the container's stdio, channels, windows, buffers;
 *   relay.c   the supervisor messages <-> the agent's control messages;
 *   json.c    the flat JSON objects of the control messages.
 * Single-threaded: one poll loop, every fd non-blocking. Everything the
 * agent sends is untrusted: a malformed frame or one past a limit ends the
 * shim (the host sees EOF and tears the sandbox down). */
#ifndef SG_GVSHIM_H
#define SG_GVSHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SHIM_NAME_LEN 32             /* container id = dir name: 32 hex, fixed length */
#define SHIM_FRAME_PAYLOAD_MAX 65536 /* mux: payload of one M frame */
#define SHIM_FRAME_LEN_MAX (SHIM_FRAME_PAYLOAD_MAX + 5)
#define SHIM_JSON_MAX (64 * 1024)    /* a J frame from the agent */
/* A J frame to the agent: an `activate` carries the host's ACTIVATE (the
 * owner's env, up to the 128 KiB env ceiling, escaped), an `exec` its
 * command; both fit under what the shim takes from the host. */
#define SHIM_JSON_TO_AGENT_MAX (SHIM_HOST_MSG_MAX + 4096)
#define SHIM_WINDOW (256 * 1024)     /* per channel, each direction */
#define SHIM_ID_MAX 128              /* context / exec ids (host/init/init.h) */
#define SHIM_MAX_CTX 64
#define SHIM_MAX_EXEC 256
#define SHIM_MAX_EGRESS 256
#define SHIM_HOST_MSG_MAX (1024 * 1024 + 64)
#define SHIM_EGRESS_CHAN_BASE 0x80000001u

/* Mount point of the agent and the runtime inside the container. */
#define SHIM_AGENT_MNT "/sandgate/agent"
#define SHIM_RUNTIME_MNT "/sandgate/runtime"

typedef struct shim_config {
    int sock;                     /* fd 3: the supervisor socket to the host */
    const char *name;             /* SHIM_NAME_LEN hex: container id, dir name */
    const char *state_dir;        /* per-sandbox dirs are made under it */
    const char *runsc;            /* /usr/bin/runsc */
    const char *platform;         /* ptrace */
    const char *runsc_flags[16];  /* extra global flags, verbatim */
    size_t n_runsc_flags;
    uid_t uid;                    /* the sandbox's uid (slot uid) inside gVisor */
    uint64_t workspace_bytes, tmp_bytes, nofile, fsize, nproc, as_bytes;
    const char *ro_binds[64];
    size_t n_ro_binds;
    const char *symlinks[32];     /* "target:/link" as in the contain spec */
    size_t n_symlinks;
    const char *python;           /* interpreter path (bound from the host) */
    const char *agent_dir;        /* host dir bound read-only at SHIM_AGENT_MNT */
    const char *runtime_dir;      /* host dir bound read-only at SHIM_RUNTIME_MNT */
    const char *preload;          /* "numpy,pandas" or "" */
    bool pooled;                  /* say POOLED and wait for ACTIVATE */
    int start_timeout_s;          /* runsc create+start and the agent's ready */
    const char *cgroup_procs[8];  /* cgroup.procs files to join first ("0" = this process) */
    size_t n_cgroup_procs;
} shim_config;

/* Paths of one sandbox's directory (bundle.c). */
typedef struct shim_paths {
    char dir[512];                /* <state_dir>/<name> */
    char root[560];               /* runsc --root */
    char bundle[560];
    char rootfs[580];
    char view[560];               /* chroot target; its workspace is the tmpfs */
    char workspace[580];
} shim_paths;

/* bundle.c: the directory tree, the workspace tmpfs (in the shim's private
 * mount namespace) and config.json. 0, or -1 with err set. */
int shim_bundle_paths(const shim_config *c, shim_paths *p, char *err, size_t errlen);
int shim_bundle_create(const shim_config *c, const shim_paths *p, char *err, size_t errlen);
/* The OCI config.json text (malloc'd), for bundle_create and the tests. */
char *shim_bundle_config_json(const shim_config *c, const shim_paths *p);

/* runsc.c: run `runsc <global flags> <args...>` with stdio = fds (-1 =
 * /dev/null), waiting at most timeout_ms, then SIGKILL. Returns its exit
 * status (0 = success), or -1 with err set (could not start, killed). */
int shim_runsc(const shim_config *c, const shim_paths *p, const char *const *args,
               const int stdio[3], int timeout_ms, char *err, size_t errlen);

/* json.c: one flat JSON object (string, integer, true/false/null values;
 * nested values rejected). Strings are unescaped to UTF-8. */
#define SHIM_JSON_FIELDS 16
typedef struct shim_json {
    size_t n;
    struct {
        char key[32];
        char *str;                /* owned; NULL for a non-string */
        size_t str_len;
        long long num;
        bool is_num, is_bool;
    } f[SHIM_JSON_FIELDS];
} shim_json;
int shim_json_parse(const char *s, size_t n, shim_json *j, char *err, size_t errlen);
void shim_json_cleanup(shim_json *j);
const char *shim_json_str(const shim_json *j, const char *key);   /* NULL if absent */
bool shim_json_num(const shim_json *j, const char *key, long long *v);
/* Append s (n bytes) as a JSON string literal, quotes included. */
void shim_json_quote(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

#endif
