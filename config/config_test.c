/* config_test.c — the daemons' config loader: the deploy/local files load
 * to the values the other daemons expect, defaults apply, relative paths
 * resolve against the file, and invalid files give exact golden errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/config.h"

static char tmpdir[256];

static const char *src_path(const char *rel, char *buf, size_t cap)
{
    const char *src = getenv("SG_SOURCE_DIR");
    snprintf(buf, cap, "%s/%s", src ? src : "..", rel);
    return buf;
}

static const char *write_tmp(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static char *join(const policy_errors *e)
{
    static char buf[8192];
    buf[0] = 0;
    for (size_t i = 0; i < e->n; i++) {
        strncat(buf, e->items[i], sizeof buf - strlen(buf) - 2);
        strcat(buf, "\n");
    }
    return buf;
}

static void test_local_gateway(void **state)
{
    (void)state;
    char path[4096], want[4200];
    config_gateway g;
    policy_errors errs = {0};
    int r = config_gateway_load(src_path("deploy/local/gateway.yaml", path, sizeof path), &g, &errs);
    if (r)
        print_error("%s", join(&errs));
    assert_int_equal(r, 0);
    assert_string_equal(g.listen, "127.0.0.1:7443");
    snprintf(want, sizeof want, "%s", path);
    strcpy(strrchr(want, '/') + 1, "policy.yaml");
    assert_string_equal(g.policy_path, want);
    assert_null(g.audit_log);
    assert_int_equal(g.threads, 1);
    assert_null(g.tls_cert);
    assert_int_equal(g.n_hosts, 1);
    assert_string_equal(g.hosts[0].name, "local");
    assert_string_equal(g.hosts[0].address, "127.0.0.1:7444");
    config_gateway_cleanup(&g);
    policy_errors_cleanup(&errs);
}

static void test_local_host(void **state)
{
    (void)state;
    char path[4096];
    config_host h;
    policy_errors errs = {0};
    int r = config_host_load(src_path("deploy/local/host.yaml", path, sizeof path), &h, &errs);
    if (r)
        print_error("%s", join(&errs));
    assert_int_equal(r, 0);
    assert_string_equal(h.listen, "127.0.0.1:7444");
    assert_string_equal(h.name, "local");
    assert_string_equal(h.runtime_dir, "/run/sandgate");
    assert_string_equal(h.cgroup_root, "/sys/fs/cgroup");
    assert_int_equal(h.uid_base, 200000);
    assert_int_equal(h.max_sandboxes, 1024);
    assert_int_equal(h.reserve_fds, 64);
    assert_true(h.reserve_memory == 256ull << 20);
    assert_int_equal(h.reserve_pids, 256);
    assert_int_equal(h.n_templates, 2);   /* code-interpreter, code-interpreter-gvisor */
    config_template *t = &h.templates[0];
    assert_string_equal(t->name, "code-interpreter");
    assert_string_equal(t->python, "/usr/bin/python3");
    assert_int_equal(t->n_preload, 2);
    assert_string_equal(t->preload[1], "pandas");
    assert_int_equal(t->n_ro_binds, 6);
    assert_string_equal(t->ro_binds[5], "/etc/fonts");
    assert_string_equal(t->ro_binds[3], "/etc/ld.so.cache");
    assert_int_equal(t->n_symlinks, 4);
    assert_string_equal(t->symlinks[0], "usr/bin:/bin");
    assert_true(t->contain);
    assert_int_equal(t->pool, 4);
    assert_int_equal(t->isolation, SG_ISOLATION_PROCESS);
    /* the same template under gVisor, with a smaller pool (~110 MiB each) */
    config_template *g = &h.templates[1];
    assert_string_equal(g->name, "code-interpreter-gvisor");
    assert_int_equal(g->isolation, SG_ISOLATION_GVISOR);
    assert_int_equal(g->pool, 2);
    assert_int_equal(g->n_preload, 2);
    assert_int_equal(g->n_ro_binds, 6);
    assert_true(g->contain);
    assert_string_equal(h.gvisor.runsc, "/usr/bin/runsc");
    assert_string_equal(h.gvisor.platform, "ptrace");
    config_host_cleanup(&h);
    policy_errors_cleanup(&errs);
}

static void test_defaults_and_paths(void **state)
{
    (void)state;
    const char *p = write_tmp("gw.yaml",
                              "listen: \"[::1]:9000\"\npolicy: /etc/p.yaml\naudit_log: logs/audit.log\n"
                              "tls: {cert: c.pem, key: /k.pem}\nhosts: [{name: h1, address: \"10.0.0.2:7444\"}]\n");
    config_gateway g;
    policy_errors errs = {0};
    assert_int_equal(config_gateway_load(p, &g, &errs), 0);
    char want[600];
    assert_string_equal(g.policy_path, "/etc/p.yaml");
    snprintf(want, sizeof want, "%s/logs/audit.log", tmpdir);
    assert_string_equal(g.audit_log, want);
    snprintf(want, sizeof want, "%s/c.pem", tmpdir);
    assert_string_equal(g.tls_cert, want);
    assert_string_equal(g.tls_key, "/k.pem");
    assert_null(g.tls_client_ca);
    assert_null(g.registry.tls_ca);
    config_gateway_cleanup(&g);

    p = write_tmp("gr.yaml", "listen: \"127.0.0.1:1\"\npolicy: p.yaml\nregistry:\n"
                             "  etcd: [\"e:2379\"]\n  tls: {ca: tls/ca.pem, cert: /c.pem, key: c.key,"
                             " server_name: etcd.internal}\n");
    assert_int_equal(config_gateway_load(p, &g, &errs), 0);
    snprintf(want, sizeof want, "%s/tls/ca.pem", tmpdir);
    assert_string_equal(g.registry.tls_ca, want);
    assert_string_equal(g.registry.tls_cert, "/c.pem");
    snprintf(want, sizeof want, "%s/c.key", tmpdir);
    assert_string_equal(g.registry.tls_key, want);
    assert_string_equal(g.registry.tls_server_name, "etcd.internal");
    config_gateway_cleanup(&g);

    p = write_tmp("hp.yaml", "listen: \"0.0.0.0:1\"\nname: h\ntemplates:\n"
                             "  - {name: a, python: /p}\n  - {name: b, python: /p, pool: 0,"
                             " rotate_forks: 0, rotate_after: 10m}\n");
    config_host hp;
    assert_int_equal(config_host_load(p, &hp, &errs), 0);
    assert_int_equal(hp.n_templates, 2);
    assert_int_equal(hp.templates[0].pool, CONFIG_POOL_DEFAULT);
    assert_int_equal(hp.templates[1].pool, 0);
    assert_int_equal(hp.templates[0].rotate_forks, CONFIG_ROTATE_FORKS_DEFAULT);
    assert_int_equal(hp.templates[0].rotate_after, CONFIG_ROTATE_AFTER_DEFAULT);
    assert_int_equal(hp.templates[1].rotate_forks, 0);
    assert_int_equal(hp.templates[1].rotate_after, 600);
    assert_int_equal(hp.templates[0].isolation, SG_ISOLATION_PROCESS);
    assert_string_equal(hp.gvisor.runsc, CONFIG_RUNSC_DEFAULT);
    assert_string_equal(hp.gvisor.platform, CONFIG_RUNSC_PLATFORM_DEFAULT);
    assert_int_equal(hp.gvisor.n_flags, 0);
    assert_null(hp.gvisor.root);
    config_host_cleanup(&hp);

    p = write_tmp("hg.yaml", "listen: \"0.0.0.0:1\"\nname: h\ntemplates:\n"
                             "  - {name: a, python: /p, isolation: process}\n"
                             "  - {name: b, python: /p, isolation: gvisor}\n"
                             "gvisor:\n  runsc: /opt/runsc\n  platform: systrap\n"
                             "  flags: [\"--debug\", \"--strace-syscalls=open\"]\n  root: /var/run/rs\n");
    assert_int_equal(config_host_load(p, &hp, &errs), 0);
    assert_int_equal(hp.templates[0].isolation, SG_ISOLATION_PROCESS);
    assert_int_equal(hp.templates[1].isolation, SG_ISOLATION_GVISOR);
    assert_string_equal(hp.gvisor.runsc, "/opt/runsc");
    assert_string_equal(hp.gvisor.platform, "systrap");
    assert_int_equal(hp.gvisor.n_flags, 2);
    assert_string_equal(hp.gvisor.flags[1], "--strace-syscalls=open");
    assert_string_equal(hp.gvisor.root, "/var/run/rs");
    config_host_cleanup(&hp);

    p = write_tmp("hr.yaml", "listen: \"0.0.0.0:1\"\nname: h\n"
                             "reserve: {fds: 0, memory: 1GiB, pids: 4000}\n");
    assert_int_equal(config_host_load(p, &hp, &errs), 0);
    assert_int_equal(hp.reserve_fds, 0);
    assert_true(hp.reserve_memory == 1ull << 30);
    assert_int_equal(hp.reserve_pids, 4000);
    config_host_cleanup(&hp);

    p = write_tmp("h.yaml", "listen: \"0.0.0.0:1\"\nname: h\n");
    config_host h;
    assert_int_equal(config_host_load(p, &h, &errs), 0);
    assert_string_equal(h.runtime_dir, "/run/sandgate");
    assert_int_equal(h.threads, 1);
    assert_int_equal(h.reserve_fds, CONFIG_RESERVE_FDS);
    assert_true(h.reserve_memory == CONFIG_RESERVE_MEMORY);
    assert_int_equal(h.reserve_pids, CONFIG_RESERVE_PIDS);
    assert_int_equal(h.n_templates, 0);
    config_host_cleanup(&h);
    policy_errors_cleanup(&errs);
}

typedef struct golden { const char *name, *file, *yaml, *want; int host; } golden;

static const golden goldens[] = {
    {"gateway: unknown key, bad listen, bad host", "g1.yaml",
     "listen: 127.0.0.1\npolicy: p.yaml\nthreds: 2\nhosts:\n  - name: Local_1\n    address: \"h:0\"\n  - name: a\n    address: a:1\n  - name: a\n    address: a:2\n",
     "g1.yaml:3:1: threds: unknown key 'threds'; did you mean 'threads'?\n"
     "g1.yaml:1:9: listen: bad address '127.0.0.1', expected host:port with a port from 1 to 65535\n"
     "g1.yaml:5:11: hosts[0].name: bad host name 'Local_1', expected [a-z0-9]{1,16}\n"
     "g1.yaml:6:14: hosts[0].address: bad address 'h:0', expected host:port with a port from 1 to 65535\n"
     "g1.yaml:9:11: hosts[2].name: duplicate host name 'a'\n", 0},
    {"gateway: missing keys, wrong types", "g2.yaml",
     "threads: 0\ntls: {key: k}\n",
     "g2.yaml:1:1: missing key 'listen'\n"
     "g2.yaml:1:1: missing key 'policy'\n"
     "g2.yaml:1:10: threads: 0 is out of range, expected at least 1\n"
     "g2.yaml:2:6: tls: missing key 'cert'\n"
     "g2.yaml:1:1: missing key 'hosts' (or 'registry')\n", 0},
    {"gateway: registry errors", "g3.yaml",
     "listen: \"127.0.0.1:1\"\npolicy: p.yaml\nhosts: [{name: a, address: \"a:1\"}]\n"
     "registry:\n  etcd: [\"http://e:2379\", \"e\"]\n  prefix: sg\n  lease_ttl: 1\n  advertise: \"a:1\"\n",
     "g3.yaml:8:3: registry.advertise: unknown key 'advertise', expected one of: etcd, prefix, lease_ttl, tls\n"
     "g3.yaml:5:10: registry.etcd[0]: 'http://e:2379': expected host:port (no scheme) with a port from 1 to 65535\n"
     "g3.yaml:5:27: registry.etcd[1]: 'e': expected host:port (no scheme) with a port from 1 to 65535\n"
     "g3.yaml:6:11: registry.prefix: 'sg': expected a path that starts and ends with '/', at most 128 bytes\n"
     "g3.yaml:7:14: registry.lease_ttl: 1 is out of range, expected at least 2\n"
     "g3.yaml:3:8: hosts: a static host list and a registry exclude each other; keep one\n", 0},
    {"host: template errors", "h1.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\nuid_base: 5\ntemplates:\n  - name: ci\n    python: python3\n    preload: [\"no such\"]\n    ro_binds: [usr]\n    symlinks: [\"usr/bin\"]\n    contain: maybe\n    extra: 1\n",
     "h1.yaml:3:11: uid_base: 5 is out of range, expected at least 1000\n"
     "h1.yaml:11:5: templates[0].extra: unknown key 'extra', expected one of: name, python, preload, ro_binds, symlinks, contain, pool, rotate_forks, rotate_after, isolation\n"
     "h1.yaml:6:13: templates[0].python: 'python3': expected an absolute path\n"
     "h1.yaml:7:15: templates[0].preload[0]: 'no such': expected a Python module name\n"
     "h1.yaml:8:16: templates[0].ro_binds[0]: 'usr': expected an absolute path\n"
     "h1.yaml:9:16: templates[0].symlinks[0]: 'usr/bin': expected TARGET:LINK, as in usr/bin:/bin\n"
     "h1.yaml:10:14: templates[0].contain: expected true or false, got 'maybe'\n", 1},
    {"host: registry errors", "h3.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\nregistry:\n  etcd: []\n  advertise: \"x\"\n  extra: 1\n",
     "h3.yaml:6:3: registry.extra: unknown key 'extra', expected one of: etcd, prefix, lease_ttl, advertise, tls\n"
     "h3.yaml:4:9: registry.etcd: expected at least one endpoint\n"
     "h3.yaml:5:14: registry.advertise: bad address 'x', expected host:port with a port from 1 to 65535\n", 1},
    {"host: registry.tls errors", "h6.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\nregistry:\n  etcd: [\"e:2379\"]\n"
     "  tls:\n    cert: c.pem\n    server_name: \"a b\"\n    crl: x\n",
     "h6.yaml:8:5: registry.tls.crl: unknown key 'crl'; did you mean 'ca'?\n"
     "h6.yaml:6:5: registry.tls: missing key 'ca'\n"
     "h6.yaml:6:5: registry.tls: 'cert' and 'key' go together (etcd's client-cert auth needs both); expected both or neither\n"
     "h6.yaml:7:18: registry.tls.server_name: 'a b': expected a DNS name or IP address, at most 253 bytes\n", 1},
    {"gateway: registry.tls not a mapping", "g4.yaml",
     "listen: \"127.0.0.1:1\"\npolicy: p.yaml\nregistry:\n  etcd: [\"e:2379\"]\n  tls: yes\n",
     "g4.yaml:5:8: registry.tls: expected a mapping, got a scalar\n", 0},
    {"host: not a mapping", "h2.yaml", "- a\n", "h2.yaml:1:1: expected a mapping, got a list\n", 1},
    {"host: pool out of range or not a count", "h3.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\ntemplates:\n"
     "  - {name: a, python: /p, pool: 65}\n  - {name: b, python: /p, pool: -1}\n"
     "  - {name: c, python: /p, pool: [1]}\n",
     "h3.yaml:4:33: templates[0].pool: 65 is out of range, expected at most 64\n"
     "h3.yaml:5:33: templates[1].pool: expected an integer, got '-1'\n"
     "h3.yaml:6:33: templates[2].pool: expected an integer, got a list\n", 1},
    {"host: zygote rotation out of range or not a duration", "h4.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\ntemplates:\n"
     "  - {name: a, python: /p, rotate_forks: 1000001}\n"
     "  - {name: b, python: /p, rotate_after: 5 minutes}\n",
     "h4.yaml:4:41: templates[0].rotate_forks: 1000001 is out of range, expected at most 1000000\n"
     "h4.yaml:5:41: templates[1].rotate_after: expected a duration such as 30s, 10m or 2h, got '5 minutes'\n", 1},
    {"host: reserve errors", "h5.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\nreserve:\n  fds: many\n  memory: 3 apples\n  cpu: 1\n",
     "h5.yaml:6:3: reserve.cpu: unknown key 'cpu', expected one of: fds, memory, pids\n"
     "h5.yaml:4:8: reserve.fds: expected an integer, got 'many'\n"
     "h5.yaml:5:11: reserve.memory: expected a size such as 4096, 64KiB or 512MiB, got '3 apples'\n", 1},
    {"host: unknown or mistyped isolation", "h6.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\ntemplates:\n"
     "  - {name: ci, python: /p, isolation: vm}\n"
     "  - {name: cj, python: /p, isolation: GVISOR}\n"
     "  - {name: ck, python: /p, isolation: [gvisor]}\n",
     "h6.yaml:4:39: templates[0].isolation: template 'ci': unknown isolation 'vm', expected process or gvisor\n"
     "h6.yaml:5:39: templates[1].isolation: template 'cj': unknown isolation 'GVISOR', expected process or gvisor\n"
     "h6.yaml:6:39: templates[2].isolation: expected a string, got a list\n", 1},
    {"host: gvisor section errors", "h7.yaml",
     "listen: \"127.0.0.1:7444\"\nname: local\ngvisor:\n  runsc: runsc\n  platform: vm\n"
     "  flags: [\"--network=host\", \"-x\", \"--TESTONLY-unsafe-nonroot\", \"--root=/x\", \"--debug\"]\n"
     "  root: state\n  ptrace: 1\n",
     "h7.yaml:8:3: gvisor.ptrace: unknown key 'ptrace', expected one of: runsc, platform, flags, root\n"
     "h7.yaml:4:10: gvisor.runsc: 'runsc': expected an absolute path\n"
     "h7.yaml:5:13: gvisor.platform: unknown platform 'vm', expected ptrace, systrap or kvm\n"
     "h7.yaml:6:11: gvisor.flags[0]: '--network=host': set by sandgate itself (use gvisor.root / gvisor.platform); refused\n"
     "h7.yaml:6:29: gvisor.flags[1]: '-x': expected --name or --name=value\n"
     "h7.yaml:6:35: gvisor.flags[2]: '--TESTONLY-unsafe-nonroot': test-only runsc flags are refused\n"
     "h7.yaml:6:64: gvisor.flags[3]: '--root=/x': set by sandgate itself (use gvisor.root / gvisor.platform); refused\n"
     "h7.yaml:7:9: gvisor.root: 'state': expected an absolute path\n", 1},
};

static void test_goldens(void **state)
{
    (void)state;
    int failed = 0;
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(tmpdir), 0);   /* so errors carry the short name */
    for (size_t i = 0; i < sizeof goldens / sizeof *goldens; i++) {
        const golden *g = &goldens[i];
        write_tmp(g->file, g->yaml);
        policy_errors errs = {0};
        int r;
        if (g->host) {
            config_host h;
            r = config_host_load(g->file, &h, &errs);
        } else {
            config_gateway gw;
            r = config_gateway_load(g->file, &gw, &errs);
        }
        const char *got = join(&errs);
        if (r != SG_EINVAL || strcmp(got, g->want) != 0) {
            print_error("FAIL row '%s'\n--- want\n%s+++ got\n%s", g->name, g->want, got);
            failed++;
        }
        policy_errors_cleanup(&errs);
    }
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(failed, 0);
}

static void test_missing_file(void **state)
{
    (void)state;
    config_host h;
    policy_errors errs = {0};
    assert_int_equal(config_host_load("/nonexistent/host.yaml", &h, &errs), SG_EINVAL);
    assert_int_equal(errs.n, 1);
    assert_string_equal(errs.items[0], "open(/nonexistent/host.yaml): No such file or directory");
    policy_errors_cleanup(&errs);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sg-config-test-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_gateway),
        cmocka_unit_test(test_local_host),
        cmocka_unit_test(test_defaults_and_paths),
        cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_missing_file),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0)
        r = r ? r : 1;
    return r;
}
