/* path_test.c — table tests of host_path_clean (path.c): one row per case,
 * and the invariants path.h promises checked on every accepted row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "host/core/path.h"

typedef struct row {
    const char *name;
    const char *path;
    size_t cap;           /* 0 = HOST_PATH_MAX */
    const char *want;     /* cleaned path, or NULL when it must be refused */
    const char *err;      /* a substring of the message when refused */
} row;

static char long_name[HOST_PATH_MAX + 8];   /* HOST_PATH_MAX bytes: one too many */
static char longest[HOST_PATH_MAX];          /* HOST_PATH_MAX - 1 bytes, as the edges allow */

static const row rows[] = {
    {"relative", "a/b", 0, "a/b", NULL},
    {"the workspace prefix", "/workspace/a/b", 0, "a/b", NULL},
    {"doubled slashes", "/workspace//a///b", 0, "a/b", NULL},
    {"dot components", "./a/./b/.", 0, "a/b", NULL},
    {"trailing slash", "a/b/", 0, "a/b", NULL},
    {"leading slashes after the prefix", "/workspace///x", 0, "x", NULL},
    {"dots inside names are names", "a/..b/c..", 0, "a/..b/c..", NULL},
    {"three dots is a name", ".../x", 0, ".../x", NULL},
    {"hidden file", ".env", 0, ".env", NULL},
    {"fits exactly", "abc", 4, "abc", NULL},
    {"too long by one", "abcd", 4, NULL, "too long"},
    {"too long after joining", "ab/cd", 5, NULL, "too long"},
    {"long path", long_name, 0, NULL, "too long"},
    {"the longest path the edges pass", longest, 0, longest, NULL},
    {"another absolute path", "/etc/passwd", 0, NULL, "outside the workspace"},
    {"a prefix that only looks like it", "/workspacex/a", 0, NULL, "outside the workspace"},
    {"root", "/", 0, NULL, "outside the workspace"},
    {"dot-dot", "../x", 0, NULL, "\"..\" component"},
    {"dot-dot in the middle", "a/../../x", 0, NULL, "\"..\" component"},
    {"dot-dot last", "/workspace/a/..", 0, NULL, "\"..\" component"},
    {"empty", "", 0, NULL, "names no file"},
    {"the workspace itself", "/workspace", 0, NULL, "names no file"},
    {"the workspace with a slash", "/workspace/", 0, NULL, "names no file"},
    {"only dots and slashes", "././/.", 0, NULL, "names no file"},
    {"NULL", NULL, 0, NULL, "required"},
};

static void check_invariants(const char *name, const char *out)
{
    size_t n = strlen(out);
    if (n == 0 || out[0] == '/' || out[n - 1] == '/' || strstr(out, "//"))
        fail_msg("%s: \"%s\" is not canonical", name, out);
    char copy[HOST_PATH_MAX + 8];
    snprintf(copy, sizeof copy, "/%s/", out);
    if (strstr(copy, "/../") || strstr(copy, "/./"))
        fail_msg("%s: \"%s\" keeps a dot component", name, out);
    char again[HOST_PATH_MAX];
    sg_err e;
    if (host_path_clean(out, again, sizeof again, &e) != 0 || strcmp(again, out) != 0)
        fail_msg("%s: cleaning \"%s\" again changed it", name, out);
}

static void test_rows(void **state)
{
    (void)state;
    memset(long_name, 'a', HOST_PATH_MAX);
    long_name[HOST_PATH_MAX] = 0;
    for (size_t i = 0; i < HOST_PATH_MAX - 1; i++)   /* "aaa/aaa/..." */
        longest[i] = i % 4 == 3 ? '/' : 'a';
    longest[HOST_PATH_MAX - 2] = 'a';
    longest[HOST_PATH_MAX - 1] = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        char out[HOST_PATH_MAX];
        memset(out, 'X', sizeof out);
        sg_err e = {0};
        int rc = host_path_clean(r->path, out, r->cap ? r->cap : sizeof out, &e);
        if (r->want) {
            if (rc != 0)
                fail_msg("%s: refused: %s", r->name, e.msg);
            if (strcmp(out, r->want) != 0)
                fail_msg("%s: got \"%s\", want \"%s\"", r->name, out, r->want);
            check_invariants(r->name, out);
        } else {
            if (rc != SG_EINVAL || e.code != SG_EINVAL)
                fail_msg("%s: accepted as \"%.*s\"", r->name, 40, out);
            if (!strstr(e.msg, r->err))
                fail_msg("%s: message \"%s\" lacks \"%s\"", r->name, e.msg, r->err);
        }
    }
}

/* A refusal never writes past cap (the caller's buffer). */
static void test_no_overrun(void **state)
{
    (void)state;
    char buf[8];
    memset(buf, 'Z', sizeof buf);
    sg_err e;
    assert_int_equal(host_path_clean("aaaa/bbbb/cccc", buf, 4, &e), SG_EINVAL);
    for (int i = 4; i < 8; i++)
        assert_int_equal(buf[i], 'Z');
}

/* host_path_clean_dir: the workspace itself is "." (ListFiles, StatFile,
 * WatchFiles); everything else as host_path_clean. */
static void test_dir_rows(void **state)
{
    (void)state;
    static const struct {
        const char *path, *want;
    } ok[] = {{"", "."}, {"/workspace", "."}, {"/workspace/", "."}, {"././/.", "."},
              {"a//b/", "a/b"}, {"/workspace/./x", "x"}};
    static const char *const bad[] = {"..", "/etc", "a/../b", "/workspacex"};
    char out[HOST_PATH_MAX];
    sg_err e;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (host_path_clean_dir(ok[i].path, out, sizeof out, &e) != 0)
            fail_msg("\"%s\": refused: %s", ok[i].path, e.msg);
        if (strcmp(out, ok[i].want) != 0)
            fail_msg("\"%s\": got \"%s\", want \"%s\"", ok[i].path, out, ok[i].want);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (host_path_clean_dir(bad[i], out, sizeof out, &e) != SG_EINVAL)
            fail_msg("\"%s\": accepted as \"%s\"", bad[i], out);
    assert_int_equal(host_path_clean_dir("", out, 1, &e), SG_EINVAL);   /* no room for "." */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_dir_rows),
        cmocka_unit_test(test_no_overrun),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
