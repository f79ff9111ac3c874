/* journal_test.c — the sandbox journal (journal.c) on a temp dir: what a
 * restart calls lost (alive at the end of a life; not ended ones), escaping,
 * torn and foreign lines, the age and count bounds, runtime compaction, the
 * lock, and file modes. Each case opens and closes the journal as host
 * lives would. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/core/journal.h"

static char dir[256], path[320];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/sg-journal-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    strcat(dir, "/state");   /* not there yet: open makes it */
    snprintf(path, sizeof path, "%s/h1.journal", dir);
    return 0;
}

static int teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%.*s'", (int)(strlen(dir) - strlen("/state")), dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void life(void)
{
    sg_err err;
    int rc = host_journal_open(dir, "h1", &err);
    if (rc != 0)
        fail_msg("open: %s", err.msg);
}

static long file_size(void)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void write_file(const char *text)
{
    mkdir(dir, 0700);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_alive_at_end_is_lost_ended_is_not(void **state)
{
    life();
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    host_journal_created("h1-aaaa", "acme", "alice", "t1");
    host_journal_created("h1-bbbb", "acme", "bob", "t2");
    host_journal_ended("h1-bbbb");
    host_journal_ended("h1-never");   /* never created: nothing */
    host_lost l;
    assert_int_equal(host_journal_lost("h1-aaaa", &l), -1);   /* alive, not lost */
    host_journal_close();

    int64_t before = now_ms();
    life();
    assert_int_equal(host_journal_lost("h1-aaaa", &l), 0);
    assert_string_equal(l.tenant, "acme");
    assert_string_equal(l.user, "alice");
    assert_string_equal(l.task, "t1");
    assert_true(l.lost_ms >= before && l.lost_ms <= now_ms());
    assert_int_equal(host_journal_lost("h1-bbbb", &l), -1);
    assert_int_equal(host_journal_lost("h1-never", &l), -1);
    assert_int_equal(host_journal_lost("", &l), -1);
    host_journal_close();

    /* A third life still knows, with the same stamp (not re-stamped). */
    host_lost again;
    life();
    assert_int_equal(host_journal_lost("h1-aaaa", &again), 0);
    assert_true(again.lost_ms <= now_ms());
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    host_journal_close();
}

static void test_fields_are_escaped(void **state)
{
    life();
    /* nothing a request carries may forge a record */
    host_journal_created("h1-x y", "ten ant%", "us\ner\nE h1-x y", "t\x01");
    host_journal_close();
    life();
    host_lost l;
    assert_int_equal(host_journal_lost("h1-x y", &l), 0);
    assert_string_equal(l.tenant, "ten ant%");
    assert_string_equal(l.user, "us\ner\nE h1-x y");
    assert_string_equal(l.task, "t\x01");
    host_journal_close();
}

static void test_torn_and_foreign_lines_are_skipped(void **state)
{
    write_file("sandgate-journal 1\n"
               "C 5 h1-good acme alice t1\n"
               "X what is this\n"
               "C notanumber h1-bad acme alice t1\n"
               "C 5 h1-bad2 acme%zz alice t1\n"
               "L 5 h1-short acme\n"
               "C 5 h1-torn acme ali");   /* a machine crash cut it */
    life();
    host_lost l;
    assert_int_equal(host_journal_lost("h1-good", &l), 0);
    assert_int_equal(host_journal_lost("h1-bad", &l), -1);
    assert_int_equal(host_journal_lost("h1-bad2", &l), -1);
    assert_int_equal(host_journal_lost("h1-short", &l), -1);
    assert_int_equal(host_journal_lost("h1-torn", &l), -1);
    host_journal_close();
}

static void test_old_and_excess_lost_records_go(void **state)
{
    int64_t now = now_ms();
    size_t n = JOURNAL_LOST_MAX + 100;
    char *text = malloc(n * 80 + 200);
    size_t off = (size_t)sprintf(text, "sandgate-journal 1\n");
    off += (size_t)sprintf(text + off, "L %lld h1-old acme alice t1\n",
                           (long long)(now - JOURNAL_LOST_KEEP_MS - 60000));
    for (size_t i = 0; i < n; i++)   /* h1-r0 is the oldest */
        off += (size_t)sprintf(text + off, "L %lld h1-r%zu acme alice t1\n",
                               (long long)(now - 100000 + (int64_t)i), i);
    write_file(text);
    free(text);
    life();
    host_lost l;
    char id[32];
    assert_int_equal(host_journal_lost("h1-old", &l), -1);
    for (size_t i = 0; i < 100; i++) {
        snprintf(id, sizeof id, "h1-r%zu", i);
        assert_int_equal(host_journal_lost(id, &l), -1);
    }
    for (size_t i = 100; i < n; i++) {
        snprintf(id, sizeof id, "h1-r%zu", i);
        assert_int_equal(host_journal_lost(id, &l), 0);
    }
    host_journal_close();
    assert_true(file_size() < (long)JOURNAL_LOST_MAX * 60);
}

static void test_runtime_compaction_bounds_the_file(void **state)
{
    life();
    char id[64];
    /* ~4 MiB of churn; 50 stay alive */
    for (int i = 0; i < 40000; i++) {
        snprintf(id, sizeof id, "h1-%032d", i);
        host_journal_created(id, "acme", "alice", "some-task-name");
        if (i % 800 != 0)
            host_journal_ended(id);
        if (i % 2000 == 0)
            usleep(2000);   /* let the writer take batches */
    }
    host_journal_close();
    long size = file_size();
    assert_true(size > 0);
    assert_true(size < JOURNAL_COMPACT_BYTES + 512 * 1024);
    life();
    host_lost l;
    int lost = 0;
    for (int i = 0; i < 40000; i++) {
        snprintf(id, sizeof id, "h1-%032d", i);
        lost += host_journal_lost(id, &l) == 0;
    }
    assert_int_equal(lost, 50);
    host_journal_close();
}

static void test_a_second_host_of_the_name_is_refused(void **state)
{
    mkdir(dir, 0700);
    char lock[400];
    snprintf(lock, sizeof lock, "%s.lock", path);
    int fd = open(lock, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    sg_err err;
    assert_int_equal(host_journal_open(dir, "h1", &err), -1);
    assert_non_null(strstr(err.msg, "locked"));
    close(fd);
    host_journal_close();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alive_at_end_is_lost_ended_is_not, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fields_are_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_and_foreign_lines_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_and_excess_lost_records_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runtime_compaction_bounds_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_second_host_of_the_name_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
