/* workspace.c — sandgate-cli commands for a sandbox's workspace files
 * (ls, stat, mkdir, rm, mv, upload, download, watch), its contexts (context
 * list/restart/delete) and labels (create/list --label, list pages). Each is
 * one call; output is one line per entry, tab-separated, for scripts.
 * Process commands live elsewhere; commands.c dispatches here first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clients/cli/cli.h"

#define UPLOAD_CHUNK (1u << 20)   /* under the API's 4 MiB per message */

static const char *flag_val(int argc, char **argv, const char *name)
{
    for (int i = 0; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return argv[i + 1];
    return NULL;
}

static int has_flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return 1;
    return 0;
}

/* The n-th argument that is neither a flag nor a flag's value (flags with
 * values: those in valued[]). */
static const char *positional(int argc, char **argv, int n, const char *const *valued)
{
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) == 0) {
            for (const char *const *v = valued; *v; v++)
                if (strcmp(argv[i], *v) == 0) {
                    i++;
                    break;
                }
            continue;
        }
        if (n-- == 0)
            return argv[i];
    }
    return NULL;
}

static const char *const NO_VALUES[] = {NULL};

static const char *type_name(Sandgate__V1__FileType t)
{
    switch (t) {
    case SANDGATE__V1__FILE_TYPE__FILE_TYPE_FILE: return "file";
    case SANDGATE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY: return "dir";
    case SANDGATE__V1__FILE_TYPE__FILE_TYPE_SYMLINK: return "symlink";
    case SANDGATE__V1__FILE_TYPE__FILE_TYPE_FIFO: return "fifo";
    case SANDGATE__V1__FILE_TYPE__FILE_TYPE_SOCKET: return "socket";
    case SANDGATE__V1__FILE_TYPE__FILE_TYPE_DEVICE: return "device";
    default: return "unknown";
    }
}

static void print_info(const Sandgate__V1__FileInfo *f)
{
    printf("%s\t%llu\t%04o\t%s\n", type_name(f->type), (unsigned long long)f->size, f->mode,
           f->path[0] ? f->path : ".");
}

/* ---- labels ---- */

int cli_labels_parse(int argc, char **argv, Sandgate__V1__CreateSandboxRequest__MetadataEntry *e,
                     size_t cap, size_t *n)
{
    *n = 0;
    for (int i = 0; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--label") != 0)
            continue;
        char *eq = strchr(argv[i + 1], '=');
        if (!eq || eq == argv[i + 1] || *n >= cap) {
            fprintf(stderr, "sandgate-cli: --label wants KEY=VALUE (at most %zu)\n", cap);
            return -1;
        }
        *eq = 0;
        sandgate__v1__create_sandbox_request__metadata_entry__init(&e[*n]);
        e[*n].key = argv[i + 1];
        e[*n].value = eq + 1;
        (*n)++;
        i++;
    }
    return 0;
}

void cli_print_labels(const Sandgate__V1__Sandbox *s)
{
    for (size_t i = 0; i < s->n_metadata; i++)
        printf("%s%s=%s", i ? "," : " labels=", s->metadata[i]->key, s->metadata[i]->value);
}

/* list [--label K=V]... [--page-size N] [--page-token T]: every page, or with
 * --page-size/--page-token just one, its next token on stderr. */
int cli_list(cli_conn *c, int argc, char **argv,
             void (*print)(const Sandgate__V1__Sandbox *s))
{
    Sandgate__V1__CreateSandboxRequest__MetadataEntry lab[64];
    Sandgate__V1__ListSandboxesRequest__MetadataEntry fl[64], *flp[64];
    size_t n_lab;
    if (cli_labels_parse(argc, argv, lab, 64, &n_lab) != 0)
        return 2;
    for (size_t i = 0; i < n_lab; i++) {
        sandgate__v1__list_sandboxes_request__metadata_entry__init(&fl[i]);
        fl[i].key = lab[i].key;
        fl[i].value = lab[i].value;
        flp[i] = &fl[i];
    }
    const char *ps = flag_val(argc, argv, "--page-size"), *pt = flag_val(argc, argv, "--page-token");
    int one_page = ps || pt;
    char *token = strdup(pt ? pt : "");
    int rc = 0;
    do {
        Sandgate__V1__ListSandboxesRequest req;
        sandgate__v1__list_sandboxes_request__init(&req);
        req.user_id = (char *)c->user;
        req.metadata = flp;
        req.n_metadata = n_lab;
        req.page_size = ps ? (uint32_t)strtoul(ps, NULL, 10) : 0;
        req.page_token = token;
        Sandgate__V1__ListSandboxesResponse *out;
        if (cli_unary(c, "/sandgate.v1.Sandboxes/ListSandboxes", &req.base,
                      &sandgate__v1__list_sandboxes_response__descriptor,
                      (ProtobufCMessage **)&out)) {
            rc = 1;
            break;
        }
        for (size_t i = 0; i < out->n_sandboxes; i++)
            print(out->sandboxes[i]);
        /* A partial answer says so, on stderr so scripts reading ids are unchanged. */
        for (size_t i = 0; i < out->n_unreachable_hosts; i++)
            fprintf(stderr, "%s%s%s", i ? ", " : "sandgate-cli: not listed (host unreachable): ",
                    out->unreachable_hosts[i], i + 1 == out->n_unreachable_hosts ? "\n" : "");
        free(token);
        token = strdup(out->next_page_token);
        sandgate__v1__list_sandboxes_response__free_unpacked(out, NULL);
        if (one_page && token[0])
            fprintf(stderr, "next_page_token: %s\n", token);
    } while (!one_page && token[0]);
    free(token);
    return rc;
}

/* ---- files ---- */

static int cmd_ls(cli_conn *c, int argc, char **argv)
{
    const char *const valued[] = {"--max-entries", NULL};
    Sandgate__V1__ListFilesRequest req;
    sandgate__v1__list_files_request__init(&req);
    req.sandbox_id = (char *)positional(argc, argv, 0, valued);
    const char *path = positional(argc, argv, 1, valued);
    if (!req.sandbox_id)
        return 2;
    req.user_id = (char *)c->user;
    req.path = (char *)(path ? path : "");
    req.recursive = has_flag(argc, argv, "--recursive");
    const char *me = flag_val(argc, argv, "--max-entries");
    req.max_entries = me ? (uint32_t)strtoul(me, NULL, 10) : 0;
    Sandgate__V1__ListFilesResponse *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/ListFiles", &req.base,
                  &sandgate__v1__list_files_response__descriptor, (ProtobufCMessage **)&out))
        return 1;
    for (size_t i = 0; i < out->n_entries; i++)
        print_info(out->entries[i]);
    if (out->truncated)
        fprintf(stderr, "sandgate-cli: more than %zu entries; the list is cut\n", out->n_entries);
    sandgate__v1__list_files_response__free_unpacked(out, NULL);
    return 0;
}

/* stat, mkdir and mv answer a FileInfo. */
static int cmd_info(cli_conn *c, const char *cmd, int argc, char **argv)
{
    const char *const valued[] = {"--mode", NULL};
    const char *id = positional(argc, argv, 0, valued), *a = positional(argc, argv, 1, valued),
               *b = positional(argc, argv, 2, valued);
    if (!id || (!a && strcmp(cmd, "stat") != 0) || (!b && strcmp(cmd, "mv") == 0))
        return 2;
    ProtobufCMessage *out;
    int rc;
    if (strcmp(cmd, "stat") == 0) {
        Sandgate__V1__StatFileRequest req;
        sandgate__v1__stat_file_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        req.path = (char *)(a ? a : "");
        rc = cli_unary(c, "/sandgate.v1.Sandboxes/StatFile", &req.base,
                       &sandgate__v1__file_info__descriptor, &out);
    } else if (strcmp(cmd, "mkdir") == 0) {
        Sandgate__V1__MakeDirRequest req;
        sandgate__v1__make_dir_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        req.path = (char *)a;
        req.parents = has_flag(argc, argv, "--parents");
        const char *m = flag_val(argc, argv, "--mode");
        req.mode = m ? (uint32_t)strtoul(m, NULL, 8) : 0;
        rc = cli_unary(c, "/sandgate.v1.Sandboxes/MakeDir", &req.base,
                       &sandgate__v1__file_info__descriptor, &out);
    } else {
        Sandgate__V1__RenameFileRequest req;
        sandgate__v1__rename_file_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        req.from_path = (char *)a;
        req.to_path = (char *)b;
        req.overwrite = has_flag(argc, argv, "--overwrite");
        rc = cli_unary(c, "/sandgate.v1.Sandboxes/RenameFile", &req.base,
                       &sandgate__v1__file_info__descriptor, &out);
    }
    if (rc)
        return 1;
    print_info((Sandgate__V1__FileInfo *)out);
    protobuf_c_message_free_unpacked(out, NULL);
    return 0;
}

static int cmd_rm(cli_conn *c, int argc, char **argv)
{
    Sandgate__V1__RemoveFileRequest req;
    sandgate__v1__remove_file_request__init(&req);
    req.sandbox_id = (char *)positional(argc, argv, 0, NO_VALUES);
    req.path = (char *)positional(argc, argv, 1, NO_VALUES);
    if (!req.sandbox_id || !req.path)
        return 2;
    req.user_id = (char *)c->user;
    req.recursive = has_flag(argc, argv, "--recursive");
    Sandgate__V1__RemoveFileResponse *out;
    if (cli_unary(c, "/sandgate.v1.Sandboxes/RemoveFile", &req.base,
                  &sandgate__v1__remove_file_response__descriptor, (ProtobufCMessage **)&out))
        return 1;
    printf("removed %llu\n", (unsigned long long)out->removed);
    sandgate__v1__remove_file_response__free_unpacked(out, NULL);
    return 0;
}

typedef struct upload_src {
    FILE *f;
    const char *sandbox, *user, *path;
    uint64_t offset;
    uint32_t mode;
    int sent_first;
    uint8_t *buf;
} upload_src;

static grpc_byte_buffer *upload_next(void *arg)
{
    upload_src *u = arg;
    size_t n = fread(u->buf, 1, UPLOAD_CHUNK, u->f);
    if (n == 0 && u->sent_first)
        return NULL;
    Sandgate__V1__UploadFileRequest req;
    sandgate__v1__upload_file_request__init(&req);
    if (!u->sent_first) {   /* only the first message names the file */
        req.sandbox_id = (char *)u->sandbox;
        req.user_id = (char *)u->user;
        req.path = (char *)u->path;
        req.offset = u->offset;
        req.mode = u->mode;
        u->sent_first = 1;
    }
    req.data.data = u->buf;
    req.data.len = n;
    return rpc_pack(&req.base);
}

/* upload ID LOCAL|- PATH [--offset N] [--mode M] */
static int cmd_upload(cli_conn *c, int argc, char **argv)
{
    const char *const valued[] = {"--offset", "--mode", NULL};
    const char *id = positional(argc, argv, 0, valued), *local = positional(argc, argv, 1, valued),
               *path = positional(argc, argv, 2, valued);
    if (!id || !local || !path)
        return 2;
    upload_src u = {.sandbox = id, .user = c->user, .path = path};
    const char *o = flag_val(argc, argv, "--offset"), *m = flag_val(argc, argv, "--mode");
    u.offset = o ? strtoull(o, NULL, 10) : 0;
    u.mode = m ? (uint32_t)strtoul(m, NULL, 8) : 0;
    u.f = strcmp(local, "-") == 0 ? stdin : fopen(local, "rb");
    if (!u.f) {
        perror(local);
        return 1;
    }
    u.buf = malloc(UPLOAD_CHUNK);
    uint8_t *resp;
    size_t len;
    rpc_status st;
    int rc = rpc_blocking_client_stream(c->ch, "/sandgate.v1.Sandboxes/UploadFile", c->md, 1, 0,
                                        upload_next, &u, &resp, &len, &st);
    free(u.buf);
    if (u.f != stdin)
        fclose(u.f);
    if (rc != 0 || st.code != GRPC_STATUS_OK) {
        fprintf(stderr, "sandgate-cli: UploadFile: %s: %s\n", rpc_status_name(st.code),
                st.details);
        free(resp);
        return 1;
    }
    Sandgate__V1__UploadFileResponse *out = sandgate__v1__upload_file_response__unpack(NULL, len,
                                                                                      resp);
    free(resp);
    if (!out)
        return 1;
    printf("uploaded %llu bytes; %s is %llu bytes\n", (unsigned long long)out->bytes_written,
           path, (unsigned long long)out->size);
    sandgate__v1__upload_file_response__free_unpacked(out, NULL);
    return 0;
}

static int on_chunk(void *arg, const uint8_t *buf, size_t len)
{
    FILE *f = arg;
    Sandgate__V1__FileChunk *ch = sandgate__v1__file_chunk__unpack(NULL, len, buf);
    if (!ch)
        return 1;
    size_t w = fwrite(ch->data.data, 1, ch->data.len, f);
    int bad = w != ch->data.len;
    sandgate__v1__file_chunk__free_unpacked(ch, NULL);
    return bad;
}

/* download ID PATH [LOCAL|-] [--offset N] [--length N] */
static int cmd_download(cli_conn *c, int argc, char **argv)
{
    const char *const valued[] = {"--offset", "--length", NULL};
    const char *id = positional(argc, argv, 0, valued), *path = positional(argc, argv, 1, valued),
               *local = positional(argc, argv, 2, valued);
    if (!id || !path)
        return 2;
    Sandgate__V1__DownloadFileRequest req;
    sandgate__v1__download_file_request__init(&req);
    req.sandbox_id = (char *)id;
    req.user_id = (char *)c->user;
    req.path = (char *)path;
    const char *o = flag_val(argc, argv, "--offset"), *l = flag_val(argc, argv, "--length");
    req.offset = o ? strtoull(o, NULL, 10) : 0;
    req.length = l ? strtoull(l, NULL, 10) : 0;
    FILE *f = !local || strcmp(local, "-") == 0 ? stdout : fopen(local, "wb");
    if (!f) {
        perror(local);
        return 1;
    }
    rpc_status st;
    int rc = rpc_blocking_stream(c->ch, "/sandgate.v1.Sandboxes/DownloadFile", c->md, 1, 0,
                                 &req.base, on_chunk, f, &st);
    int werr = f != stdout ? fclose(f) : fflush(f);
    if (rc != 0 || st.code != GRPC_STATUS_OK) {
        fprintf(stderr, "sandgate-cli: DownloadFile: %s: %s\n", rpc_status_name(st.code),
                st.details);
        return 1;
    }
    if (werr) {
        perror(local ? local : "stdout");
        return 1;
    }
    return 0;
}

typedef struct watch_state {
    long left;   /* events to print before stopping; <0 = no limit */
} watch_state;

static int on_file_event(void *arg, const uint8_t *buf, size_t len)
{
    watch_state *w = arg;
    Sandgate__V1__FileEvent *ev = sandgate__v1__file_event__unpack(NULL, len, buf);
    if (!ev)
        return 1;
    static const char *names[] = {"UNSPECIFIED", "READY", "CREATE", "MODIFY", "DELETE",
                                  "RENAME", "OVERFLOW"};
    const char *t = (unsigned)ev->type < sizeof names / sizeof names[0] ? names[ev->type] : "?";
    if (ev->type == SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_RENAME)
        printf("%s\t%s\t%s%s\n", t, ev->from_path, ev->path, ev->is_dir ? "/" : "");
    else if (ev->type == SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_OVERFLOW)
        printf("%s\t%llu dropped\n", t, (unsigned long long)ev->dropped);
    else
        printf("%s\t%s%s\n", t, ev->path, ev->is_dir && ev->path[0] ? "/" : "");
    fflush(stdout);
    int ready = ev->type == SANDGATE__V1__FILE_EVENT_TYPE__FILE_EVENT_READY;
    sandgate__v1__file_event__free_unpacked(ev, NULL);
    if (!ready && w->left > 0)
        w->left--;
    return w->left == 0;
}

/* watch ID [PATH] [--recursive] [--timeout S] [--count N]: events, one a
 * line, until the sandbox ends, S seconds pass or N events (after READY). */
static int cmd_watch(cli_conn *c, int argc, char **argv)
{
    const char *const valued[] = {"--timeout", "--count", NULL};
    Sandgate__V1__WatchFilesRequest req;
    sandgate__v1__watch_files_request__init(&req);
    req.sandbox_id = (char *)positional(argc, argv, 0, valued);
    const char *path = positional(argc, argv, 1, valued);
    if (!req.sandbox_id)
        return 2;
    req.user_id = (char *)c->user;
    req.path = (char *)(path ? path : "");
    req.recursive = has_flag(argc, argv, "--recursive");
    const char *to = flag_val(argc, argv, "--timeout"), *n = flag_val(argc, argv, "--count");
    watch_state w = {.left = n ? strtol(n, NULL, 10) : -1};
    if (w.left == 0)
        return 2;
    rpc_status st;
    int rc = rpc_blocking_stream(c->ch, "/sandgate.v1.Sandboxes/WatchFiles", c->md, 1,
                                 to ? strtod(to, NULL) : 0, &req.base, on_file_event, &w, &st);
    if (rc != 0)
        return 1;
    /* Our own stop (--count) or deadline (--timeout) is how a watch ends. */
    if (st.code == GRPC_STATUS_OK || (w.left == 0 && st.code == GRPC_STATUS_CANCELLED) ||
        (to && st.code == GRPC_STATUS_DEADLINE_EXCEEDED))
        return 0;
    fprintf(stderr, "sandgate-cli: WatchFiles: %s: %s\n", rpc_status_name(st.code), st.details);
    return 1;
}

/* ---- contexts ---- */

static const char *ctx_state(Sandgate__V1__ContextState s)
{
    switch (s) {
    case SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_STARTING: return "starting";
    case SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_IDLE: return "idle";
    case SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_RUNNING: return "running";
    case SANDGATE__V1__CONTEXT_STATE__CONTEXT_STATE_RESTARTING: return "restarting";
    default: return "unknown";
    }
}

static void print_ctx(const Sandgate__V1__ContextInfo *x)
{
    printf("%s\t%s\t%s\trestarts=%u\n", x->context_id, x->language, ctx_state(x->state),
           x->restarts);
}

/* context list ID | context restart ID [CTX] | context delete ID CTX */
static int cmd_context_admin(cli_conn *c, const char *what, int argc, char **argv)
{
    const char *id = argc > 2 ? argv[2] : NULL, *ctx = argc > 3 ? argv[3] : NULL;
    if (!id || (strcmp(what, "delete") == 0 && !ctx))
        return 2;
    ProtobufCMessage *out;
    if (strcmp(what, "list") == 0) {
        Sandgate__V1__ListContextsRequest req;
        sandgate__v1__list_contexts_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        if (cli_unary(c, "/sandgate.v1.Sandboxes/ListContexts", &req.base,
                      &sandgate__v1__list_contexts_response__descriptor, &out))
            return 1;
        Sandgate__V1__ListContextsResponse *r = (Sandgate__V1__ListContextsResponse *)out;
        for (size_t i = 0; i < r->n_contexts; i++)
            print_ctx(r->contexts[i]);
    } else if (strcmp(what, "restart") == 0) {
        Sandgate__V1__RestartContextRequest req;
        sandgate__v1__restart_context_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        req.context_id = (char *)(ctx ? ctx : "");
        if (cli_unary(c, "/sandgate.v1.Sandboxes/RestartContext", &req.base,
                      &sandgate__v1__context__descriptor, &out))
            return 1;
        Sandgate__V1__Context *x = (Sandgate__V1__Context *)out;
        printf("restarted %s\t%s\n", x->context_id, x->language);
    } else {
        Sandgate__V1__DeleteContextRequest req;
        sandgate__v1__delete_context_request__init(&req);
        req.sandbox_id = (char *)id;
        req.user_id = (char *)c->user;
        req.context_id = (char *)ctx;
        if (cli_unary(c, "/sandgate.v1.Sandboxes/DeleteContext", &req.base,
                      &sandgate__v1__delete_context_response__descriptor, &out))
            return 1;
        printf("deleted %s\n", ctx);
    }
    protobuf_c_message_free_unpacked(out, NULL);
    return 0;
}

int cli_workspace_dispatch(cli_conn *c, int argc, char **argv)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "ls") == 0)
        return cmd_ls(c, argc, argv);
    if (!strcmp(cmd, "stat") || !strcmp(cmd, "mkdir") || !strcmp(cmd, "mv"))
        return cmd_info(c, cmd, argc, argv);
    if (strcmp(cmd, "rm") == 0)
        return cmd_rm(c, argc, argv);
    if (strcmp(cmd, "upload") == 0)
        return cmd_upload(c, argc, argv);
    if (strcmp(cmd, "download") == 0)
        return cmd_download(c, argc, argv);
    if (strcmp(cmd, "watch") == 0)
        return cmd_watch(c, argc, argv);
    if (strcmp(cmd, "context") == 0 && argc > 1 &&
        (!strcmp(argv[1], "list") || !strcmp(argv[1], "restart") || !strcmp(argv[1], "delete")))
        return cmd_context_admin(c, argv[1], argc, argv);
    return -1;
}
