/* file_ops.c — ListFiles, StatFile, MakeDir, RemoveFile and RenameFile on a
 * sandbox's workspace, from the host (files.c opens the workspace and
 * resolves beneath it). Every name is looked up relative to a directory fd
 * already proven inside the workspace, with RESOLVE_BENEATH and no
 * symlinks followed, so nothing the sandbox renames or swaps meanwhile
 * leads out; nothing is opened but directories (and O_PATH handles), so a
 * FIFO, socket or device is only ever stat'ed. Walks (recursive list and
 * remove) are bounded by depth, entries and the call's deadline. Runs on
 * the file workers (file_jobs.c), never under H.mu; each answers the call
 * on success and returns nonzero (err set) for the worker to answer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/core/files_internal.h"

#define LIST_DEFAULT 1000
#define LIST_MAX 10000
#define WALK_DEPTH_MAX 128

static Sandgate__V1__FileType type_of(mode_t m)
{
    return S_ISREG(m)    ? SANDGATE__V1__FILE_TYPE__FILE_TYPE_FILE
           : S_ISDIR(m)  ? SANDGATE__V1__FILE_TYPE__FILE_TYPE_DIRECTORY
           : S_ISLNK(m)  ? SANDGATE__V1__FILE_TYPE__FILE_TYPE_SYMLINK
           : S_ISFIFO(m) ? SANDGATE__V1__FILE_TYPE__FILE_TYPE_FIFO
           : S_ISSOCK(m) ? SANDGATE__V1__FILE_TYPE__FILE_TYPE_SOCKET
                         : SANDGATE__V1__FILE_TYPE__FILE_TYPE_DEVICE;
}

/* rel "." is the workspace itself: path "". */
static void fill_info(Sandgate__V1__FileInfo *fi, char *path, char *name, const struct stat *st)
{
    sandgate__v1__file_info__init(fi);
    fi->path = path;
    fi->name = name;
    fi->type = type_of(st->st_mode);
    fi->size = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0;
    fi->mode = st->st_mode & 07777;
    fi->mtime = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

static char *last_name(const char *rel)
{
    const char *s = strrchr(rel, '/');
    return (char *)(s ? s + 1 : rel);
}

static int reply_info(rpc_call *c, const char *rel, const struct stat *st)
{
    int root = strcmp(rel, ".") == 0;
    Sandgate__V1__FileInfo fi;
    fill_info(&fi, root ? "" : (char *)rel, root ? "" : last_name(rel), st);
    rpc_call_reply(c, &fi.base);
    return 0;
}

/* lstat of rel beneath wfd through an O_PATH handle (nothing opened). */
static int stat_beneath(int wfd, const char *rel, struct stat *st, const char *shown, sg_err *err)
{
    int p = hf_openat2(wfd, rel, O_PATH | O_CLOEXEC | O_NOFOLLOW, 0, HF_BENEATH);
    if (p < 0)
        return hf_path_error(shown, errno, err);
    int rc = fstat(p, st) == 0 ? 0 : hf_path_error(shown, errno, err);
    close(p);
    return rc;
}

/* ---- StatFile ---- */

int host_file_stat(const host_file_target *t, const Sandgate__V1__StatFileRequest *r,
                   rpc_call *c, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (host_path_clean_dir(r->path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    struct stat st;
    int rc = stat_beneath(wfd, rel, &st, r->path, err);
    close(wfd);
    if (rc != 0)
        return rc;
    if (hf_is_special(st.st_mode))
        return hf_special(r->path, st.st_mode, err);
    return reply_info(c, rel, &st);
}

/* ---- ListFiles ---- */

typedef struct list_acc {
    Sandgate__V1__FileInfo *items;   /* owned, n of cap */
    size_t n, cap, max;
    int truncated;
    int64_t deadline_us;
} list_acc;

static int cmp_info(const void *a, const void *b)
{
    return strcmp(((const Sandgate__V1__FileInfo *)a)->path,
                  ((const Sandgate__V1__FileInfo *)b)->path);
}

/* Entries of the directory dfd (at prefix, "" for the workspace), into acc;
 * below too when recursive. dfd is consumed. */
static int list_dir(int dfd, const char *prefix, int recursive, int depth, list_acc *acc,
                    const char *shown, sg_err *err)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        int e = errno;
        close(dfd);
        return hf_path_error(shown, e, err);
    }
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((rc = hf_past(acc->deadline_us, shown, err)) != 0)
            break;
        if (acc->n >= acc->max) {
            acc->truncated = 1;
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;   /* removed meanwhile */
        size_t pl = strlen(prefix), nl = strlen(de->d_name);
        if (pl + nl + 2 > HOST_PATH_MAX)
            continue;
        char *path = malloc(pl + nl + 2);
        if (!path) {
            rc = sg_err_set(err, SG_EUNAVAIL, "the host is out of memory; retry");
            break;
        }
        if (pl)
            snprintf(path, pl + nl + 2, "%s/%s", prefix, de->d_name);
        else
            memcpy(path, de->d_name, nl + 1);
        if (acc->n == acc->cap) {
            size_t nc = acc->cap ? acc->cap * 2 : 64;
            void *ni = realloc(acc->items, nc * sizeof *acc->items);
            if (!ni) {
                free(path);
                rc = sg_err_set(err, SG_EUNAVAIL, "the host is out of memory; retry");
                break;
            }
            acc->items = ni;
            acc->cap = nc;
        }
        fill_info(&acc->items[acc->n], path, path + (pl ? pl + 1 : 0), &st);
        acc->n++;
        if (recursive && S_ISDIR(st.st_mode) && depth < WALK_DEPTH_MAX) {
            int sub = hf_openat2(dirfd(d), de->d_name,
                                 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0, HF_BENEATH);
            if (sub >= 0 && (rc = list_dir(sub, path, 1, depth + 1, acc, shown, err)) != 0)
                break;
            if (acc->truncated)
                break;
        }
    }
    closedir(d);
    return rc;
}

int host_file_list(const host_file_target *t, const Sandgate__V1__ListFilesRequest *r,
                   int64_t deadline_us, rpc_call *c, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (r->max_entries > LIST_MAX)
        return sg_err_set(err, SG_EINVAL, "max_entries: %u; at most %u", r->max_entries,
                          LIST_MAX);
    if (host_path_clean_dir(r->path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    struct stat st;
    int rc = stat_beneath(wfd, rel, &st, r->path, err);
    if (rc == 0 && hf_is_special(st.st_mode))
        rc = hf_special(r->path, st.st_mode, err);
    else if (rc == 0 && !S_ISDIR(st.st_mode))
        rc = sg_err_set(err, SG_EINVAL, "path \"%.200s\" is not a directory", r->path);
    int dfd = -1;
    if (rc == 0 && (dfd = hf_openat2(wfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0,
                                     HF_BENEATH)) < 0)
        rc = hf_path_error(r->path, errno, err);
    close(wfd);
    if (rc != 0)
        return rc;
    list_acc acc = {.max = r->max_entries ? r->max_entries : LIST_DEFAULT,
                    .deadline_us = deadline_us};
    rc = list_dir(dfd, strcmp(rel, ".") == 0 ? "" : rel, r->recursive, 0, &acc, r->path, err);
    if (rc == 0) {
        if (acc.n > 1)   /* an empty directory leaves items NULL: qsort's array must not be */
            qsort(acc.items, acc.n, sizeof *acc.items, cmp_info);
        Sandgate__V1__FileInfo **ptrs = calloc(acc.n + 1, sizeof *ptrs);
        for (size_t i = 0; ptrs && i < acc.n; i++)
            ptrs[i] = &acc.items[i];
        Sandgate__V1__ListFilesResponse out;
        sandgate__v1__list_files_response__init(&out);
        out.n_entries = ptrs ? acc.n : 0;
        out.entries = ptrs;
        out.truncated = acc.truncated || !ptrs;
        rpc_call_reply(c, &out.base);
        free(ptrs);
    }
    for (size_t i = 0; i < acc.n; i++)
        free(acc.items[i].path);
    free(acc.items);
    return rc;
}

/* ---- MakeDir ---- */

int host_file_mkdir(const host_file_target *t, const Sandgate__V1__MakeDirRequest *r,
                    rpc_call *c, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (r->mode > 0777)
        return sg_err_set(err, SG_EINVAL, "mode: %#o; at most 0777", r->mode);
    if (host_path_clean(r->path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    const char *base;
    int pfd = hf_open_parent(wfd, rel, &base, r->parents, t->uid, r->path, err);
    close(wfd);
    if (pfd < 0)
        return err->code;
    int rc = 0, existed = 0;
    if (mkdirat(pfd, base, r->mode ? r->mode : 0755) == 0)
        fchownat(pfd, base, t->uid, t->uid, AT_SYMLINK_NOFOLLOW);
    else if (errno == EEXIST)
        existed = 1;
    else
        rc = hf_path_error(r->path, errno, err);
    struct stat st;
    if (rc == 0 && fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
        rc = hf_path_error(r->path, errno, err);
    if (rc == 0 && existed) {
        /* it was there: fine for parents (mkdir -p) if it is a directory */
        if (!S_ISDIR(st.st_mode))
            rc = sg_err_set(err, SG_EEXISTS, "path \"%.200s\" exists and is not a directory",
                            r->path);
        else if (!r->parents)
            rc = sg_err_set(err, SG_EEXISTS, "directory \"%.200s\" already exists", r->path);
    }
    close(pfd);
    return rc ? rc : reply_info(c, rel, &st);
}

/* ---- RemoveFile ---- */

typedef struct rm_acc {
    uint64_t removed;
    int64_t deadline_us;
} rm_acc;

/* Everything inside the directory name (beneath pfd), then it. */
static int remove_tree(int pfd, const char *name, int depth, rm_acc *acc, const char *shown,
                       sg_err *err)
{
    if (depth > WALK_DEPTH_MAX)
        return sg_err_set(err, SG_EPRECOND, "path \"%.200s\": directories nest deeper than %d; "
                          "remove the deepest first", shown, WALK_DEPTH_MAX);
    int dfd = hf_openat2(pfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW, 0, HF_BENEATH);
    if (dfd < 0)
        return hf_path_error(shown, errno, err);
    DIR *d = fdopendir(dfd);
    if (!d) {
        int e = errno;
        close(dfd);
        return hf_path_error(shown, e, err);
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((rc = hf_past(acc->deadline_us, shown, err)) != 0)
            break;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            rc = remove_tree(dirfd(d), de->d_name, depth + 1, acc, shown, err);
        else if (unlinkat(dirfd(d), de->d_name, 0) == 0)
            acc->removed++;
        else if (errno != ENOENT)
            rc = hf_path_error(shown, errno, err);
    }
    closedir(d);
    if (rc == 0) {
        if (unlinkat(pfd, name, AT_REMOVEDIR) == 0)
            acc->removed++;
        else if (errno == ENOTEMPTY)
            rc = sg_err_set(err, SG_EUNAVAIL, "path \"%.200s\": entries were added while it was "
                            "removed; retry", shown);
        else if (errno != ENOENT)
            rc = hf_path_error(shown, errno, err);
    }
    return rc;
}

int host_file_remove(const host_file_target *t, const Sandgate__V1__RemoveFileRequest *r,
                     int64_t deadline_us, rpc_call *c, sg_err *err)
{
    char rel[HOST_PATH_MAX];
    if (host_path_clean(r->path, rel, sizeof rel, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    const char *base;
    int pfd = hf_open_parent(wfd, rel, &base, 0, t->uid, r->path, err);
    close(wfd);
    if (pfd < 0)
        return err->code;
    rm_acc acc = {.deadline_us = deadline_us};
    struct stat st;
    int rc = 0;
    if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        rc = hf_path_error(r->path, errno, err);
    } else if (S_ISDIR(st.st_mode)) {
        if (r->recursive)
            rc = remove_tree(pfd, base, 0, &acc, r->path, err);
        else if (unlinkat(pfd, base, AT_REMOVEDIR) == 0)
            acc.removed = 1;
        else if (errno == ENOTEMPTY || errno == EEXIST)
            rc = sg_err_set(err, SG_EPRECOND, "directory \"%.200s\" is not empty; set recursive "
                            "to remove it with everything in it", r->path);
        else
            rc = hf_path_error(r->path, errno, err);
    } else if (unlinkat(pfd, base, 0) == 0) {
        acc.removed = 1;   /* a FIFO or socket too: unlink never opens it */
    } else {
        rc = hf_path_error(r->path, errno, err);
    }
    close(pfd);
    if (rc != 0)
        return rc;
    Sandgate__V1__RemoveFileResponse out;
    sandgate__v1__remove_file_response__init(&out);
    out.removed = acc.removed;
    rpc_call_reply(c, &out.base);
    return 0;
}

/* ---- RenameFile ---- */

int host_file_rename(const host_file_target *t, const Sandgate__V1__RenameFileRequest *r,
                     rpc_call *c, sg_err *err)
{
    char from[HOST_PATH_MAX], to[HOST_PATH_MAX];
    if (host_path_clean(r->from_path, from, sizeof from, err) != 0 ||
        host_path_clean(r->to_path, to, sizeof to, err) != 0)
        return err->code;
    int wfd = hf_open_workspace(t, err);
    if (wfd < 0)
        return err->code;
    const char *fb, *tb;
    int fp = hf_open_parent(wfd, from, &fb, 0, t->uid, r->from_path, err);
    int tp = fp < 0 ? -1 : hf_open_parent(wfd, to, &tb, 0, t->uid, r->to_path, err);
    close(wfd);
    int rc = fp < 0 || tp < 0 ? err->code : 0;
    struct stat src, dst;
    if (rc == 0 && fstatat(fp, fb, &src, AT_SYMLINK_NOFOLLOW) != 0)
        rc = hf_path_error(r->from_path, errno, err);
    if (rc == 0 && hf_is_special(src.st_mode))
        rc = hf_special(r->from_path, src.st_mode, err);
    int exists = rc == 0 && fstatat(tp, tb, &dst, AT_SYMLINK_NOFOLLOW) == 0;
    if (rc == 0 && exists && !r->overwrite)
        rc = sg_err_set(err, SG_EEXISTS, "to_path \"%.200s\" exists; set overwrite to replace it",
                        r->to_path);
    if (rc == 0 && exists && hf_is_special(dst.st_mode))
        rc = hf_special(r->to_path, dst.st_mode, err);
    if (rc == 0 && exists && S_ISDIR(src.st_mode) != S_ISDIR(dst.st_mode))
        rc = sg_err_set(err, SG_EPRECOND, "to_path \"%.200s\" is a %s and from_path a %s; a "
                        "rename never replaces one kind with the other", r->to_path,
                        S_ISDIR(dst.st_mode) ? "directory" : "file",
                        S_ISDIR(src.st_mode) ? "directory" : "file");
    if (rc == 0 && renameat2(fp, fb, tp, tb, r->overwrite ? 0 : RENAME_NOREPLACE) != 0) {
        int e = errno;
        if (e == EEXIST && !r->overwrite)
            rc = sg_err_set(err, SG_EEXISTS, "to_path \"%.200s\" exists; set overwrite to "
                            "replace it", r->to_path);
        else if (e == ENOTEMPTY || e == EEXIST)
            rc = sg_err_set(err, SG_EPRECOND, "to_path \"%.200s\" is a directory that is not "
                            "empty", r->to_path);
        else if (e == EISDIR || e == ENOTDIR)
            rc = sg_err_set(err, SG_EPRECOND, "to_path \"%.200s\": a rename never replaces a "
                            "directory with a file or a file with a directory", r->to_path);
        else if (e == EINVAL)
            rc = sg_err_set(err, SG_EINVAL, "to_path \"%.200s\" is inside from_path", r->to_path);
        else if (e == ENOENT)
            rc = hf_path_error(r->from_path, e, err);
        else
            rc = hf_path_error(r->to_path, e, err);
    }
    if (rc == 0 && fstatat(tp, tb, &dst, AT_SYMLINK_NOFOLLOW) != 0)
        rc = hf_path_error(r->to_path, errno, err);
    if (fp >= 0)
        close(fp);
    if (tp >= 0)
        close(tp);
    return rc ? rc : reply_info(c, to, &dst);
}
