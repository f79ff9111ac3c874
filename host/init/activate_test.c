/* activate_test.c — table tests of init_activation_parse (activate.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "init.h"

typedef struct row {
    const char *name;
    const char *json;
    const char *env;      /* "K=V|K=V" in order, or NULL when parsing must fail */
    const char *workdir;
    bool egress;
    const char *err;      /* a substring of the error when env is NULL */
} row;

static const row rows[] = {
    {"the host's layout", "{\"workdir\":\"/workspace\",\"egress\":false,\"env\":{\"A\":\"1\",\"B\":\"x y\"}}",
     "A=1|B=x y", "/workspace", false, NULL},
    {"egress granted", "{\"egress\":true,\"env\":{}}", "", "/workspace", true, NULL},
    {"egress only when literally true", "{\"egress\":1}", "", "/workspace", false, NULL},
    {"defaults", "{}", "", "/workspace", false, NULL},
    {"escapes and unicode", "{\"env\":{\"K\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\"}}",
     "K=a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80", "/workspace", false, NULL},
    {"unknown keys skipped", "{\"x\":[1,{\"y\":null},-2.5e3],\"workdir\":\"/w\"}", "", "/w", false, NULL},
    {"last repeated name wins", "{\"env\":{\"K\":\"1\",\"L\":\"2\",\"K\":\"3\"}}", "K=3|L=2",
     "/workspace", false, NULL},
    {"whitespace", " { \"env\" : { \"K\" : \"v\" } } ", "K=v", "/workspace", false, NULL},
    {"not an object", "[1]", NULL, NULL, false, "JSON object expected"},
    {"env not an object", "{\"env\":[\"K=v\"]}", NULL, NULL, false, "env must map"},
    {"env value not a string", "{\"env\":{\"K\":1}}", NULL, NULL, false, "env must map"},
    {"empty name", "{\"env\":{\"\":\"v\"}}", NULL, NULL, false, "env must map"},
    {"name with =", "{\"env\":{\"A=B\":\"v\"}}", NULL, NULL, false, "env must map"},
    {"NUL in a value", "{\"env\":{\"K\":\"a\\u0000b\"}}", NULL, NULL, false, "env must map"},
    {"lone surrogate", "{\"env\":{\"K\":\"\\udc00\"}}", NULL, NULL, false, "env must map"},
    {"raw control character", "{\"env\":{\"K\":\"a\tb\"}}", NULL, NULL, false, "env must map"},
    {"workdir not a string", "{\"workdir\":5}", NULL, NULL, false, "workdir must be a string"},
    {"trailing data", "{} x", NULL, NULL, false, "trailing data at byte 3"},
    {"unterminated", "{\"env\":{\"K\":\"v\"", NULL, NULL, false, "ACTIVATE:"},
    {"too deep", "{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", NULL,
     NULL, false, "a value expected"},
};

static void join_env(char **env, char *out, size_t size)
{
    out[0] = 0;
    for (char **e = env; *e; e++) {
        if (e != env)
            strncat(out, "|", size - strlen(out) - 1);
        strncat(out, *e, size - strlen(out) - 1);
    }
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        init_activation a;
        char err[256] = "", env[512];
        int rc = init_activation_parse(r->json, strlen(r->json), &a, err, sizeof err);
        if (!r->env) {
            if (rc != -1 || !strstr(err, r->err))
                fail_msg("%s: want an error with \"%s\", got rc %d \"%s\"", r->name, r->err, rc,
                         err);
            continue;
        }
        if (rc != 0)
            fail_msg("%s: %s", r->name, err);
        join_env(a.env, env, sizeof env);
        if (strcmp(env, r->env) || strcmp(a.workdir, r->workdir) || a.egress != r->egress)
            fail_msg("%s: got env \"%s\" workdir \"%s\" egress %d", r->name, env, a.workdir,
                     a.egress);
        init_activation_cleanup(&a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
