/* path.h — workspace path normalisation for WriteFile/ReadFile, pure (no
 * syscalls) so it can be table-tested and fuzzed on its own. The kernel
 * check (openat2 RESOLVE_BENEATH in files.c) is the real boundary; this
 * gives clear messages and one canonical spelling first. Table test:
 * host/core/path_test.c; libFuzzer target: tests/fuzz/host_path_fuzz.c. */
#ifndef SG_HOST_PATH_H
#define SG_HOST_PATH_H

#include <stddef.h>

#include "common/err.h"

/* Longest cleaned path, NUL included (the caller's buffer size): Linux's
 * PATH_MAX, as the edges allow paths of up to 4095 bytes (host/core/rules.c). */
#define HOST_PATH_MAX 4096

/* "/workspace/a//./b", "/workspace/a/b/" and "a/b" all become "a/b": the
 * "/workspace" prefix is dropped, empty and "." components are removed and
 * the rest joined by single slashes. Refused (SG_EINVAL, err names the
 * path): another absolute path, a ".." component, nothing left (the
 * workspace itself), a result of cap bytes or more, or a NULL path.
 * On success out holds a relative path that never starts or ends with '/',
 * never has an empty, "." or ".." component, and cleaning it again gives
 * itself. */
int host_path_clean(const char *path, char *out, size_t cap, sg_err *err);
/* The same, for calls that may name the workspace itself (ListFiles,
 * StatFile, WatchFiles): "", "/workspace" and "." become "." instead of
 * an error. */
int host_path_clean_dir(const char *path, char *out, size_t cap, sg_err *err);

#endif
