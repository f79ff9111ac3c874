/* etcd_test.c — the etcd client against a real 3-member etcd cluster
 * (Debian's etcd-server) on loopback, started here and stopped by PID:
 * put/get, 20 racing create-if-absent calls with one winner, a kept lease
 * that outlives its TTL and expires once no longer kept, a revoked lease
 * reported lost, a prefix watch that survives the death of the member it
 * streamed from, and calls that fail cleanly and in bounded time once the
 * cluster has lost its quorum. */
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "etcd/internal.h"

#define MEMBERS 3

static struct {
    char dir[256];
    int client_port[MEMBERS], peer_port[MEMBERS];
    pid_t pid[MEMBERS];
    char endpoint[MEMBERS][32];
    etcd_client *c;
} T;

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &l);
    close(s);
    return ntohs(a.sin_port);
}

static pid_t start_member(int i)
{
    char name[16], data[300], curls[64], purls[64], cluster[512] = "", log[300], token[64];
    snprintf(name, sizeof name, "m%d", i);
    snprintf(data, sizeof data, "%s/%s", T.dir, name);
    snprintf(curls, sizeof curls, "http://127.0.0.1:%d", T.client_port[i]);
    snprintf(purls, sizeof purls, "http://127.0.0.1:%d", T.peer_port[i]);
    snprintf(log, sizeof log, "%s/%s.log", T.dir, name);
    snprintf(token, sizeof token, "sgtest-%d", (int)getpid());
    for (int k = 0; k < MEMBERS; k++) {
        size_t n = strlen(cluster);
        snprintf(cluster + n, sizeof cluster - n, "%sm%d=http://127.0.0.1:%d", k ? "," : "", k,
                 T.peer_port[k]);
    }
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        (void)f;
        dup2(2, 1);
        const char *etcd = getenv("SANDGATE_ETCD") ? getenv("SANDGATE_ETCD") : "/usr/bin/etcd";
        execl(etcd, etcd, "--name", name, "--data-dir", data, "--listen-client-urls", curls,
              "--advertise-client-urls", curls, "--listen-peer-urls", purls,
              "--initial-advertise-peer-urls", purls, "--initial-cluster", cluster,
              "--initial-cluster-state", "new", "--initial-cluster-token", token,
              "--heartbeat-interval", "50", "--election-timeout", "500", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void stop_member(int i)
{
    if (T.pid[i] <= 0)
        return;
    kill(T.pid[i], SIGKILL);
    waitpid(T.pid[i], NULL, 0);
    T.pid[i] = 0;
}

static int setup(void **state)
{
    snprintf(T.dir, sizeof T.dir, "/tmp/sandgate-etcd-test-XXXXXX");
    if (!mkdtemp(T.dir))
        return -1;
    for (int i = 0; i < MEMBERS; i++) {
        T.client_port[i] = free_port();
        T.peer_port[i] = free_port();
        snprintf(T.endpoint[i], sizeof T.endpoint[i], "127.0.0.1:%d", T.client_port[i]);
    }
    for (int i = 0; i < MEMBERS; i++)
        T.pid[i] = start_member(i);
    rpc_runtime_init();
    const char *eps[MEMBERS] = {T.endpoint[0], T.endpoint[1], T.endpoint[2]};
    sg_err e;
    T.c = etcd_client_create(eps, MEMBERS, 1.0, NULL, &e);
    if (!T.c)
        return -1;
    for (int tries = 0; tries < 150; tries++) {   /* up to ~15 s for the first election */
        if (etcd_put_sync(T.c, "/ready", "1", 1, 0, &e) == 0)
            return 0;
        usleep(100 * 1000);
    }
    fprintf(stderr, "etcd cluster did not come up: %s (logs in %s)\n", e.msg, T.dir);
    return -1;
}

static int teardown(void **state)
{
    etcd_client_destroy(T.c);
    for (int i = 0; i < MEMBERS; i++)
        stop_member(i);
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", T.dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_put_get(void **state)
{
    sg_err e;
    char *v = NULL;
    size_t len = 0;
    assert_int_equal(etcd_put_sync(T.c, "/t/a", "hello", 5, 0, &e), 0);
    assert_int_equal(etcd_get_sync(T.c, "/t/a", &v, &len, &e), 0);
    assert_non_null(v);
    assert_int_equal(len, 5);
    assert_string_equal(v, "hello");
    free(v);
    assert_int_equal(etcd_get_sync(T.c, "/t/none", &v, &len, &e), 0);
    assert_null(v);
}

typedef struct racer {
    pthread_t th;
    char mine[32];
    int created, rc;
    char *existing;
} racer;

static void *race(void *arg)
{
    racer *r = arg;
    sg_err e;
    r->rc = etcd_create_sync(T.c, "/t/task", r->mine, 0, &r->created, &r->existing, &e);
    return NULL;
}

static void test_racing_creates_have_one_winner(void **state)
{
    racer rs[20];
    for (int i = 0; i < 20; i++) {
        memset(&rs[i], 0, sizeof rs[i]);
        snprintf(rs[i].mine, sizeof rs[i].mine, "sandbox-%d", i);
        pthread_create(&rs[i].th, NULL, race, &rs[i]);
    }
    int winners = 0;
    const char *winner = NULL;
    for (int i = 0; i < 20; i++) {
        pthread_join(rs[i].th, NULL);
        assert_int_equal(rs[i].rc, 0);
        if (rs[i].created) {
            winners++;
            winner = rs[i].mine;
        }
    }
    assert_int_equal(winners, 1);
    for (int i = 0; i < 20; i++) {
        assert_string_equal(rs[i].existing, winner);   /* everyone got the same sandbox */
        free(rs[i].existing);
    }
}

static int lost_count;
static void on_lost(void *arg) { __atomic_add_fetch(&lost_count, 1, __ATOMIC_SEQ_CST); }

static int key_exists(const char *k)
{
    char *v = NULL;
    sg_err e;
    if (etcd_get_sync(T.c, k, &v, NULL, &e) != 0)
        return -1;
    free(v);
    return v != NULL;
}

static void test_kept_lease_outlives_its_ttl(void **state)
{
    sg_err e;
    int64_t lease = 0;
    assert_int_equal(etcd_lease_grant_sync(T.c, 2, &lease, &e), 0);
    assert_true(lease != 0);
    assert_int_equal(etcd_put_sync(T.c, "/t/leased", "x", 1, lease, &e), 0);
    lost_count = 0;
    etcd_keeper *k = etcd_keeper_start(T.c, lease, 2, on_lost, NULL);
    assert_non_null(k);
    sleep(5);   /* 2.5 TTLs */
    assert_int_equal(key_exists("/t/leased"), 1);
    assert_int_equal(lost_count, 0);
    etcd_keeper_stop(k);
    int gone = 0;
    for (int i = 0; i < 60 && !gone; i++) {   /* TTL plus etcd's own slack */
        usleep(100 * 1000);
        gone = key_exists("/t/leased") == 0;
    }
    assert_true(gone);
}

static void test_revoked_lease_is_reported_lost(void **state)
{
    sg_err e;
    int64_t lease = 0;
    assert_int_equal(etcd_lease_grant_sync(T.c, 3, &lease, &e), 0);
    lost_count = 0;
    etcd_keeper *k = etcd_keeper_start(T.c, lease, 3, on_lost, NULL);
    Etcdserverpb__LeaseRevokeRequest r;
    etcdserverpb__lease_revoke_request__init(&r);
    r.id = lease;
    ProtobufCMessage *resp = NULL;
    assert_int_equal(etcd_call_sync(T.c, ETCD_LEASE_REVOKE, &r.base, &resp, &e), 0);
    protobuf_c_message_free_unpacked(resp, NULL);
    for (int i = 0; i < 30 && !lost_count; i++)   /* the next keepalive, within ttl/3 */
        usleep(100 * 1000);
    assert_int_equal(lost_count, 1);
    etcd_keeper_stop(k);
}

static struct {
    pthread_mutex_t mu;
    char seen[16][64];
    int n;
    int64_t last_rev;
} W = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_event(void *arg, int is_delete, const char *key, const uint8_t *val, size_t len,
                     int64_t rev)
{
    pthread_mutex_lock(&W.mu);
    if (W.n < 16)
        snprintf(W.seen[W.n++], sizeof W.seen[0], "%s %s", is_delete ? "del" : "put", key);
    assert_true(rev > W.last_rev);   /* in order, never repeated */
    W.last_rev = rev;
    pthread_mutex_unlock(&W.mu);
}

static int wait_events(int n)
{
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&W.mu);
        int got = W.n;
        pthread_mutex_unlock(&W.mu);
        if (got >= n)
            return got;
        usleep(100 * 1000);
    }
    return W.n;
}

static void test_watch_survives_a_member_death(void **state)
{
    sg_err e;
    etcd_watch *w = etcd_watch_start(T.c, "/w/", 0, on_event, NULL, NULL);
    assert_non_null(w);
    usleep(300 * 1000);   /* created */
    assert_int_equal(etcd_put_sync(T.c, "/w/a", "1", 1, 0, &e), 0);
    assert_int_equal(etcd_put_sync(T.c, "/other", "1", 1, 0, &e), 0);   /* not under /w/ */
    Etcdserverpb__DeleteRangeRequest d;
    etcdserverpb__delete_range_request__init(&d);
    d.key = (ProtobufCBinaryData){4, (uint8_t *)"/w/a"};
    ProtobufCMessage *resp = NULL;
    assert_int_equal(etcd_call_sync(T.c, ETCD_DELETE_RANGE, &d.base, &resp, &e), 0);
    protobuf_c_message_free_unpacked(resp, NULL);
    assert_int_equal(wait_events(2), 2);
    assert_string_equal(W.seen[0], "put /w/a");
    assert_string_equal(W.seen[1], "del /w/a");
    /* The watch streams from the member calls start at; kill every member
     * the client has used so far but keep a quorum: kill one. */
    size_t cur = atomic_load(&T.c->current) % MEMBERS;
    stop_member((int)cur);
    int put_ok = -1;
    for (int i = 0; i < 50 && put_ok != 0; i++) {   /* a new leader, if it was the leader */
        put_ok = etcd_put_sync(T.c, "/w/b", "2", 1, 0, &e);
        if (put_ok != 0)
            usleep(100 * 1000);
    }
    assert_int_equal(put_ok, 0);
    assert_int_equal(wait_events(3), 3);
    assert_string_equal(W.seen[2], "put /w/b");
    etcd_watch_stop(w);
}

static void test_no_quorum_fails_cleanly_and_fast(void **state)
{
    /* One member is already down; a second leaves no quorum. */
    for (int i = 0; i < MEMBERS; i++)
        if (T.pid[i] > 0) {
            stop_member(i);
            break;
        }
    sg_err e;
    int64_t t0 = etcd_now_us();
    int rc = etcd_put_sync(T.c, "/t/after", "x", 1, 0, &e);
    double s = (etcd_now_us() - t0) / 1e6;
    fprintf(stderr, "etcd_test: put without quorum: %s in %.2f s (%s)\n",
            rc ? "refused" : "ACCEPTED", s, e.msg);
    assert_int_not_equal(rc, 0);
    assert_int_equal(e.code, SG_EUNAVAIL);
    assert_true(s < 1.0 * MEMBERS + 1.0);   /* one bounded attempt per member */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_racing_creates_have_one_winner),
        cmocka_unit_test(test_kept_lease_outlives_its_ttl),
        cmocka_unit_test(test_revoked_lease_is_reported_lost),
        cmocka_unit_test(test_watch_survives_a_member_death),
        cmocka_unit_test(test_no_quorum_fails_cleanly_and_fast),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
