/* descindex_test.c — the descriptor-set index over the gateway's real,
 * embedded set, and over damaged copies of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "rpc/descindex.h"

extern const unsigned char sg_gateway_descriptor_set[];
extern const size_t sg_gateway_descriptor_set_len;

static void test_real_set(void **state)
{
    rpc_descindex ix;
    sg_err e;
    assert_int_equal(rpc_descindex_init(&ix, sg_gateway_descriptor_set,
                                        sg_gateway_descriptor_set_len, &e), 0);
    long api = rpc_descindex_file(&ix, "sandgate/v1/sandgate.proto");
    assert_true(api >= 0);
    static const char *const in_api[] = {"sandgate.v1.Sandboxes", "sandgate.v1.Sandboxes.RunCode",
                                         "sandgate.v1.CreateSandboxRequest",
                                         "sandgate.v1.SandboxState", NULL};
    for (int i = 0; in_api[i]; i++)
        assert_int_equal(rpc_descindex_symbol(&ix, in_api[i]), api);
    /* a map field's entry type is a nested message */
    assert_int_equal(rpc_descindex_symbol(&ix, "sandgate.v1.CreateSandboxRequest.EnvEntry"), api);
    assert_true(rpc_descindex_symbol(&ix, "grpc.reflection.v1alpha.ServerReflection") >= 0);
    assert_true(rpc_descindex_symbol(&ix, "sandgate.v1.ErrorInfo") >= 0);
    assert_int_equal(rpc_descindex_symbol(&ix, "sandgate.v1.Host"), -1);
    assert_int_equal(rpc_descindex_symbol(&ix, "sandgate.v1"), -1);
    assert_int_equal(rpc_descindex_file(&ix, "nope.proto"), -1);
    rpc_descindex_cleanup(&ix);
}

/* Every prefix and a byte flipped at every offset: parsed or refused, never
 * a crash or an out-of-bounds read (run under ASan in CI). */
static void test_damaged_sets(void **state)
{
    size_t n = sg_gateway_descriptor_set_len;
    uint8_t *copy = malloc(n);
    int refused = 0;
    for (size_t cut = 0; cut < n; cut += 7) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, sg_gateway_descriptor_set, cut);
        rpc_descindex ix;
        sg_err e;
        if (rpc_descindex_init(&ix, p, cut, &e) == 0)
            rpc_descindex_cleanup(&ix);
        else
            refused++;
        free(p);
    }
    for (size_t at = 0; at < n; at += 5) {
        memcpy(copy, sg_gateway_descriptor_set, n);
        copy[at] ^= 0xa5;
        rpc_descindex ix;
        sg_err e;
        if (rpc_descindex_init(&ix, copy, n, &e) == 0)
            rpc_descindex_cleanup(&ix);
    }
    assert_true(refused > 0);   /* truncation mid-field is noticed */
    free(copy);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_set),
        cmocka_unit_test(test_damaged_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
