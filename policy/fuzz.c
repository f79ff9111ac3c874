/* fuzz.c — libFuzzer target for the policy loader and the cases/config
 * tree: any bytes must either load or yield errors, never crash, leak or
 * read out of bounds. Seed corpus: the YAML files under deploy/ and policy/testdata/. */
#include <stdint.h>
#include <stdlib.h>

#include "policy/lint.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    policy *p = NULL;
    policy_errors errs = {0}, warns = {0};
    if (policy_lint_buffer("fuzz.yaml", (const char *)data, size, &p, &errs, &warns) == 0) {
        policy_decision d;
        policy_decide_egress(p, "a", "t", "k", "example.com", 443, "10.0.0.1", &d);
        policy_unref(p);
    }
    policy_errors_cleanup(&errs);
    policy_errors_cleanup(&warns);
    return 0;
}
