/* cli.c — `sandgate-policy`: lint, explain, test and hash-key for security
 * teams, in the spirit of `nginx -t` and `opa test`. Exit codes: 0 ok /
 * allow / all cases pass; 1 errors / deny / a case failed; 2 usage or an
 * unreadable input. Only this file prints; the library returns. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/explain.h"
#include "policy/lint.h"
#include "policy/policy.h"

#define EXIT_USAGE 2

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sandgate-policy lint FILE\n"
            "       sandgate-policy explain FILE --tenant T [--user U] [--task K] [--template X]\n"
            "                 (--egress HOST:PORT [--ip ADDR] | --secret NAME |\n"
            "                  --create [--egress HOST:PORT]... [--secret NAME]...\n"
            "                           [--live-tenant N] [--live-user N])\n"
            "       sandgate-policy test FILE CASES.yaml\n"
            "       sandgate-policy hash-key KEY|-\n");
}

static void print_list(const policy_errors *e)
{
    for (size_t i = 0; i < e->n; i++)
        fprintf(stderr, "%s\n", e->items[i]);
}

static policy *load_or_print(const char *file, int *rc)
{
    policy *p = NULL;
    policy_errors errs = {0};
    if (policy_load_file(file, &p, &errs) < 0) {
        print_list(&errs);
        fprintf(stderr, "%s: %zu error%s, policy not loaded\n", file, errs.n, errs.n == 1 ? "" : "s");
        *rc = EXIT_USAGE;
    }
    policy_errors_cleanup(&errs);
    return p;
}

static int cmd_lint(int argc, char **argv)
{
    if (argc != 3)
        return usage(stderr), EXIT_USAGE;
    policy *p = NULL;
    policy_errors errs = {0}, warns = {0};
    int r = policy_lint_file(argv[2], &p, &errs, &warns);
    print_list(&errs);
    print_list(&warns);
    if (r == 0)
        printf("ok %s\n", policy_hash(p));
    else
        fprintf(stderr, "%s: %zu error%s, %zu warning%s\n", argv[2], errs.n, errs.n == 1 ? "" : "s",
                warns.n, warns.n == 1 ? "" : "s");
    policy_errors_cleanup(&errs);
    policy_errors_cleanup(&warns);
    policy_unref(p);
    return r == 0 ? 0 : 1;
}

#define EXPLAIN_MAX 64

typedef struct explain_args {
    policy_ask ask;
    int create;
    char hosts[EXPLAIN_MAX][256];
    policy_egress_ask egress[EXPLAIN_MAX];
    const char *secrets[EXPLAIN_MAX];
    size_t n_egress, n_secrets;
} explain_args;

static int parse_explain(int argc, char **argv, explain_args *a)
{
    static const struct option opts[] = {
        {"tenant", required_argument, 0, 't'}, {"user", required_argument, 0, 'u'},
        {"task", required_argument, 0, 'k'}, {"template", required_argument, 0, 'x'},
        {"egress", required_argument, 0, 'e'}, {"ip", required_argument, 0, 'i'},
        {"secret", required_argument, 0, 's'}, {"create", no_argument, 0, 'c'},
        {"live-tenant", required_argument, 0, 'L'}, {"live-user", required_argument, 0, 'l'},
        {0, 0, 0, 0}};
    optind = 3;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 't': a->ask.tenant = optarg; break;
        case 'u': a->ask.user = optarg; break;
        case 'k': a->ask.task = optarg; break;
        case 'x': a->ask.template_name = optarg; break;
        case 'i': a->ask.ip = optarg; break;
        case 'c': a->create = 1; break;
        case 'L': a->ask.live_tenant = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'l': a->ask.live_user = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'e':
            if (a->n_egress == EXPLAIN_MAX ||
                policy_parse_hostport(optarg, a->hosts[a->n_egress], 256, &a->egress[a->n_egress].port) < 0) {
                fprintf(stderr, "sandgate-policy: bad --egress '%s', expected HOST:PORT\n", optarg);
                return -1;
            }
            a->egress[a->n_egress].host = a->hosts[a->n_egress];
            a->n_egress++;
            break;
        case 's':
            if (a->n_secrets == EXPLAIN_MAX)
                return -1;
            a->secrets[a->n_secrets++] = optarg;
            break;
        default:
            return -1;
        }
    }
    if (optind != argc || !a->ask.tenant)
        return -1;
    if (a->create) {
        a->ask.kind = POLICY_ASK_CREATE;
        a->ask.egress = a->egress;
        a->ask.n_egress = a->n_egress;
        a->ask.secrets = a->secrets;
        a->ask.n_secrets = a->n_secrets;
    } else if (a->n_egress == 1 && a->n_secrets == 0) {
        a->ask.kind = POLICY_ASK_EGRESS;
        a->ask.host = a->egress[0].host;
        a->ask.port = a->egress[0].port;
    } else if (a->n_secrets == 1 && a->n_egress == 0) {
        a->ask.kind = POLICY_ASK_SECRET;
        a->ask.secret = a->secrets[0];
    } else {
        return -1;
    }
    return 0;
}

static int cmd_explain(int argc, char **argv)
{
    if (argc < 3)
        return usage(stderr), EXIT_USAGE;
    explain_args *a = calloc(1, sizeof *a);
    if (parse_explain(argc, argv, a) < 0) {
        usage(stderr);
        free(a);
        return EXIT_USAGE;
    }
    int rc = 0;
    policy *p = load_or_print(argv[2], &rc);
    if (p) {
        policy_decision d;
        policy_explain(p, &a->ask, &d);
        printf("decision: %s\nrule: %s\nmessage: %s\n", d.allow ? "allow" : "deny",
               d.rule, d.message);
        if (a->create) {
            char iso[512];
            policy_explain_isolation(p, a->ask.tenant, a->ask.template_name, iso, sizeof iso);
            printf("isolation: %s\n", iso);
        }
        printf("policy: %s\n", policy_hash(p));
        rc = d.allow ? 0 : 1;
    }
    policy_unref(p);
    free(a);
    return rc;
}

static int cmd_test(int argc, char **argv)
{
    if (argc != 4)
        return usage(stderr), EXIT_USAGE;
    int rc = 0;
    policy *p = load_or_print(argv[2], &rc);
    if (!p)
        return rc;
    policy_errors errs = {0};
    int r = policy_run_cases(p, argv[3], stdout, &errs);
    print_list(&errs);
    policy_errors_cleanup(&errs);
    policy_unref(p);
    return r < 0 ? EXIT_USAGE : r;
}

static int cmd_hash_key(int argc, char **argv)
{
    if (argc != 3)
        return usage(stderr), EXIT_USAGE;
    char buf[4096];
    const char *key = argv[2];
    size_t len = strlen(key);
    if (strcmp(key, "-") == 0) {
        /* stdin keeps the key out of shell history and `ps` */
        len = fread(buf, 1, sizeof buf - 1, stdin);
        while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            len--;
        buf[len] = 0;
        key = buf;
    }
    if (len == 0) {
        fprintf(stderr, "sandgate-policy: empty key\n");
        return EXIT_USAGE;
    }
    char hex[65];
    policy_hash_key(key, len, hex);
    printf("%s\n", hex);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr), EXIT_USAGE;
    const char *cmd = argv[1];
    if (strcmp(cmd, "lint") == 0)
        return cmd_lint(argc, argv);
    if (strcmp(cmd, "explain") == 0)
        return cmd_explain(argc, argv);
    if (strcmp(cmd, "test") == 0)
        return cmd_test(argc, argv);
    if (strcmp(cmd, "hash-key") == 0)
        return cmd_hash_key(argc, argv);
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0)
        return usage(stdout), 0;
    fprintf(stderr, "sandgate-policy: unknown command '%s'\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
