/* bench.c — the policy's performance budget: a 10,000-rule file must load
 * well under a second and a decision must cost microseconds. Generates the
 * file in memory (two shapes: 100 tenants × 100 rules, and 1 tenant × 10,000
 * rules), then times loads and decisions. Usage: policy_bench [rules]
 * [--check]; with --check it fails if a load takes 1 s or more or a
 * decision 50 µs or more (budgets with headroom for a loaded CI machine). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy/lint.h"
#include "policy/policy.h"
#include "policy/query.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct buf { char *s; size_t n, cap; } buf;

static void add(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(buf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if ((size_t)n < b->cap - b->n) {
            b->n += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + 4096;
        b->s = realloc(b->s, b->cap);
    }
}

/* Every 4th rule is a CIDR rule, every 3rd host is a wildcard. */
static char *generate(size_t tenants, size_t rules_per, size_t *len)
{
    buf b = {0};
    add(&b, "templates:\n  - name: ci\n    tenants: [\"*\"]\ntenants:\n");
    for (size_t t = 0; t < tenants; t++) {
        char key[32];
        snprintf(key, sizeof key, "bench-key-%zu", t);
        char hex[65];
        policy_hash_key(key, strlen(key), hex);
        add(&b, "  - id: t%zu\n    api_keys: [%s]\n    network:\n", t, hex);
        for (size_t r = 0; r < rules_per; r++) {
            if (r % 4 == 3)
                add(&b, "      - id: r%zu\n        cidrs: [\"%zu.%zu.%zu.0/24\"]\n        ports: [443]\n",
                    r, 11 + r / 65536 % 80, r / 256 % 256, r % 256);
            else if (r % 3 == 2)
                add(&b, "      - id: r%zu\n        hosts: [\"*.svc%zu.example.com\"]\n        ports: [443, 80]\n", r, r);
            else
                add(&b, "      - id: r%zu\n        hosts: [h%zu.example.com]\n        ports: [443]\n        tasks: \"job-*\"\n", r, r);
        }
    }
    *len = b.n;
    return b.s;
}

static int over_budget;

static void run(size_t tenants, size_t rules_per)
{
    size_t len;
    char *yaml = generate(tenants, rules_per, &len);
    policy *p = NULL;
    policy_errors errs = {0};
    const int loads = 5;
    double best = 1e9;
    for (int i = 0; i < loads; i++) {
        policy_unref(p);
        double t0 = now_s();
        int r = policy_load_buffer("bench.yaml", yaml, len, &p, &errs);
        double dt = now_s() - t0;
        if (r) {
            fprintf(stderr, "load failed: %s\n", errs.n ? errs.items[0] : "?");
            exit(1);
        }
        if (dt < best)
            best = dt;
    }
    printf("%zu tenants x %zu rules = %zu rules, %zu bytes: load best of %d %.1f ms\n", tenants,
           rules_per, policy_rule_count(p), len, loads, best * 1e3);
    over_budget |= best >= 1.0;

    const int iters = 200000;
    policy_decision d;
    char host[64], tenant[16];
    struct { const char *name; int kind; } kinds[] = {
        {"egress exact hit", 0}, {"egress wildcard hit", 1}, {"egress miss (default deny)", 2},
        {"egress CIDR hit", 3}, {"egress name + resolved special ip", 4}, {"create (template, quotas)", 5},
        {"auth by api key (sha256)", 6}};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t allowed = 0;
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            size_t r = (size_t)i % rules_per;
            snprintf(tenant, sizeof tenant, "t%zu", (size_t)i % tenants);
            switch (kinds[k].kind) {
            case 0:
                snprintf(host, sizeof host, "h%zu.example.com", r / 12 * 12);   /* r%12==0: exact */
                policy_decide_egress(p, tenant, "ci", "job-1", host, 443, NULL, &d);
                break;
            case 1:
                snprintf(host, sizeof host, "a.b.svc%zu.example.com", (r / 12) * 12 + 2);
                policy_decide_egress(p, tenant, "ci", "job-1", host, 443, NULL, &d);
                break;
            case 2:
                policy_decide_egress(p, tenant, "ci", "job-1", "nowhere.example.org", 443, NULL, &d);
                break;
            case 3:
                snprintf(host, sizeof host, "%zu.%zu.%zu.7", 11 + (r / 4 * 4 + 3) / 65536 % 80, (r / 4 * 4 + 3) / 256 % 256, (r / 4 * 4 + 3) % 256);
                policy_decide_egress(p, tenant, "ci", "job-1", host, 443, NULL, &d);
                break;
            case 4:
                policy_decide_egress(p, tenant, "ci", "job-1", "h0.example.com", 443, "10.1.2.3", &d);
                break;
            case 5: {
                policy_create_ask a = {.tenant = tenant, .user = "u", .task = "job-1", .template_name = "ci"};
                policy_scope s;
                policy_decide_create(p, &a, &s, &d);
                break;
            }
            case 6: {
                char key[32];
                snprintf(key, sizeof key, "bench-key-%zu", (size_t)i % tenants);
                const char *tn;
                policy_decide_auth(p, key, NULL, &tn, &d);
                break;
            }
            }
            allowed += (size_t)d.allow;
        }
        double dt = now_s() - t0;
        printf("  %-36s %8.0f ns/decision  (%zu/%d allowed)\n", kinds[k].name, dt / iters * 1e9, allowed, iters);
        over_budget |= dt / iters >= 50e-6;
    }
    policy_unref(p);
    policy_errors_cleanup(&errs);
    free(yaml);
}

int main(int argc, char **argv)
{
    size_t rules = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
    int check = argc > 2 && strcmp(argv[2], "--check") == 0;
    if (rules < 100)
        rules = 100;
    run(100, rules / 100);
    run(1, rules);
    if (check && over_budget) {
        fprintf(stderr, "policy_bench: over budget (load >= 1 s or decision >= 50 us)\n");
        return 1;
    }
    return 0;
}
