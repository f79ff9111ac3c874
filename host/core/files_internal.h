/* files_internal.h — what the host's file modules share (files.c,
 * file_ops.c, watch.c): kernel-side resolution beneath the workspace and
 * the one mapping of errno to a caller's message. Not an API beyond
 * host/. */
#ifndef SG_HOST_CORE_FILES_INTERNAL_H
#define SG_HOST_CORE_FILES_INTERNAL_H

#include <linux/openat2.h>
#include <stdint.h>
#include <sys/stat.h>

#include "host/core/files.h"
#include "host/core/path.h"

#define HF_BENEATH (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

int hf_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve);
/* An O_PATH fd of the sandbox's /workspace, proven to be this sandbox's
 * (pidfd), or <0 with err set. */
int hf_open_workspace(const host_file_target *t, sg_err *err);
/* errno of a lookup or I/O on path -> the caller's error. */
int hf_path_error(const char *path, int code_errno, sg_err *err);
/* INVALID_ARGUMENT naming path and what kind of special file it is. */
int hf_special(const char *path, mode_t mode, sg_err *err);
int hf_is_special(mode_t mode);
/* The parent directory of rel (cleaned, not ".") opened O_PATH beneath
 * wfd; *base points at rel's last component. Missing parents are created
 * (owned by uid) when make is set, one component at a time through fds,
 * so a parent swapped for a symlink meanwhile never leads out. */
int hf_open_parent(int wfd, const char *rel, const char **base, int make, uid_t uid,
                   const char *shown, sg_err *err);
int hf_past(int64_t deadline_us, const char *path, sg_err *err);

#endif
