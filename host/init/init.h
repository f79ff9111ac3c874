/* init.h — sandgate-init, pid 1 of a sandbox (host/runtime/PROTOCOL.md §3).
 *
 * The zygote's fork (host/runtime/create.py) makes the sandbox, forks its
 * default context and then execs this program, so an idle sandbox keeps one
 * Python process, its context, next to this small C one. Files:
 *   init.c      argv, the loop on sandbox_sock, the messages, teardown;
 *   children.c  contexts, exec children and background processes (PROC,
 *               pipes or a PTY): start, signal, resize, reap;
 *   activate.c  a pooled sandbox's ACTIVATE JSON: env, workdir, egress.
 * Single-threaded; every fd is close-on-exec and children get theirs by
 * dup2. Nothing here reads what sandboxed code writes: accepted egress
 * connections are passed to the host unread. */
#ifndef SG_INIT_H
#define SG_INIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define INIT_ID_MAX 128     /* context / exec ids, as the host makes them */
#define INIT_MAX_CTX 64     /* = HOST_MAX_CONTEXTS: the host refuses more */
#define INIT_MAX_EXEC 256
#define INIT_COMMAND_MAX (1024 * 1024)
#define INIT_FRAME_MAX (64 * 1024)
#define INIT_EARLY_EXITS 32  /* reaped before ADOPT named them (children.c) */

typedef enum { INIT_CTX = 1, INIT_EXEC = 2 } init_kind;

typedef struct init_child {
    pid_t pid;               /* 0: free slot */
    char id[INIT_ID_MAX + 1];
    int pty;                 /* owned: a PROC mode t process's PTY master
                              * (RESIZE), closed when it is reaped; -1 none */
} init_child;

typedef struct init_state {
    int sock;                /* owned: sandbox_sock, to the host */
    bool contained;          /* pid 1 of our own pid namespace */
    const char *python;      /* borrowed from argv: interpreter for new contexts */
    const char *context_main; /* borrowed from argv: its entry script */
    char **envp;             /* the sandbox's environment for children; owned
                              * when set by ACTIVATE, else environ */
    init_child ctx[INIT_MAX_CTX];
    init_child exec[INIT_MAX_EXEC];
    /* The default context forked before exec, not yet handed to the host. */
    init_child held;
    int held_fds[3];         /* owned until sent: host end, out_r, err_r */
    int egress;              /* owned: listener on 127.0.0.1:3128, or -1 */
    /* Exits of processes reaped while unknown: orphans, and joined contexts
     * that ended before their ADOPT arrived. A ring; pid 0 = empty. */
    struct {
        pid_t pid;
        int status;
    } early[INIT_EARLY_EXITS];
    int early_next;
} init_state;

typedef struct init_activation {
    char **env;              /* owned: "K=V" strings, NULL-terminated */
    char *workdir;           /* owned */
    bool egress;
} init_activation;

/* init.c */
int init_send(init_state *s, const char *text, const int *fds, int nfds);
void init_shutdown(init_state *s) __attribute__((noreturn));

/* children.c */
void init_ctx_start(init_state *s, const char *id, const char *language);
void init_ctx_release_held(init_state *s);
void init_ctx_adopt(init_state *s, const char *id, pid_t pid);
void init_exec_start(init_state *s, const char *id, const char *command);
void init_signal(init_state *s, init_kind kind, const char *id, int sig, bool group);
/* PROC <id> <mode> <rows> <cols> <command>: args = everything after "PROC ". */
void init_proc_start(init_state *s, char *args);
void init_proc_resize(init_state *s, char *args);
void init_proc_signal(init_state *s, char *args);
void init_reap(init_state *s);
void init_kill_descendants(void);

/* activate.c: 0, or -1 with a message in err. */
int init_activation_parse(const char *json, size_t n, init_activation *a, char *err,
                          size_t errlen);
void init_activation_cleanup(init_activation *a);

#endif
