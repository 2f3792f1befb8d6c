/* test_kv_watch_cluster.c — kv-15.9 to 15.11: watches on a real cluster (rlkvd processes on
 * 127.0.0.1, dynamic ports), changed by other processes and kept across a storage server's
 * kill -9 (docs/design.md §2 "Watches", §8.4, §8.5). The cluster is the test's own (started and
 * stopped by pid through tests/cluster_fixture.h). A watch is known to be registered when the
 * owning storage server's STATUS says watches_now >= 1 (a bounded poll on that counter); every
 * other wait is bounded too (WAIT_MS).
 *
 *   kv_15_9   a change by another process (`rl kv set`) fires a watch of this process; `rl kv
 *             watch` in another process prints the value this process then writes, exit 0, and
 *             gives up after --timeout with transaction_timed_out (exit 1)
 *   kv_15_10  kill -9 of the owning storage server, the key changed while it is down, restarted:
 *             the watch fires (the restarted server checks the versions since the watch's)
 *   kv_15_11  kill -9 of the owning storage server, restarted, the key changed afterwards: the
 *             watch fires (the client polled the restarted server again)
 *   kv_15_12  on a second cluster of two storage servers: the watched key's shard moves to the
 *             other server (rl__placement_assign); the watch moves with it (the new owner's
 *             STATUS counts it), does not fire for the move, and fires on the next change
 *   kv_15_13  on a third cluster, two storage servers with double replication: the server holding
 *             the watch is killed (kill -9, not restarted), the key changes: the watch fires
 *             through the other member of the team (failover)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/placement.h"
#include "base/clock.h"
#include "cluster_fixture.h"
#include "reclayer/kv.h"
#include "test.h"

#define WAIT_MS 30000

static rl_test_cluster g_c;
static int g_started;

static void start(void) {
    if (g_started) return;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    ASSERT_OK(rl_test_cluster_start(&g_c, &o));
    g_started = 1;
}

static uint64_t deadline(void) { return rl__clock_mono_ns() + (uint64_t)WAIT_MS * 1000000u; }

static int wait_ready(rl_future *f) {
    uint64_t end = deadline();
    while (!rl_future_is_ready(f)) {
        if (rl__clock_mono_ns() > end) return 0;
        rl__clock_sleep_us(2000);
    }
    return 1;
}

static void set1(rl_db *db, const char *k, const char *v) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
    rl_future *f = rl_txn_commit(t);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    while (rc) { /* a commit while a server restarts may need a retry */
        rl_future *e = rl_txn_on_error(t, rc);
        ASSERT_OK(rl_future_wait(e));
        rl_future_free(e);
        ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
        f = rl_txn_commit(t);
        rc = rl_future_wait(f);
        rl_future_free(f);
    }
    rl_txn_free(t);
}

static rl_future *watch1(rl_db *db, const char *k) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *w = rl_txn_watch(t, k, strlen(k));
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    return w;
}

/* The storage server's port (it changes across a restart). */
static uint16_t ss_port(void) {
    int pid = 0;
    uint16_t port = 0;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    ASSERT_OK(rl__cluster_pid(g_c.dir, 1, &pid, &port, &err));
    return port;
}

/* Wait until the storage server holds at least n watches. */
static void wait_registered(long long n) {
    uint64_t end = deadline();
    long long have = -1;
    while ((have = rl_test_status_num(&g_c, ss_port(), "watches_now")) < n) {
        if (rl__clock_mono_ns() > end) fail_msg("the storage server holds %lld watches, not %lld", have, n);
        rl__clock_sleep_us(10000);
    }
}

/* kill -9 the storage server by its recorded pid and wait until it is gone. */
static void kill_storage(void) {
    int pid = rl_test_cluster_pid(&g_c, 1);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    uint64_t end = deadline();
    while (rl_test_cluster_pid(&g_c, 1) != 0) {
        if (rl__clock_mono_ns() > end) fail_msg("storage server pid %d still alive after SIGKILL", pid);
        rl__clock_sleep_us(5000);
    }
}

TEST(kv_15_9_other_process) {
    start();
    rl_db *db;
    ASSERT_OK(rl_db_open(g_c.url, NULL, &db));
    set1(db, "p/k", "one");
    rl_future *w = watch1(db, "p/k");
    char *out = NULL;
    ASSERT_EQ(rl_test_rl(&out, "kv --db '%s' set p/k two", g_c.url), 0);
    free(out);
    if (!wait_ready(w)) fail_msg("a change by `rl kv set` did not fire the watch");
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
    /* `rl kv watch` in another process: started, registered, then this process writes. */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s/rl' kv --db '%s' --timeout 60 watch p/k 2>&1", RL_BIN_DIR, g_c.url);
    long long before = rl_test_status_num(&g_c, ss_port(), "watches_now");
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    wait_registered(before + 1);
    set1(db, "p/k", "three");
    char line[256] = {0};
    char *got = fgets(line, sizeof line, p);
    int st = pclose(p);
    ASSERT_NOT_NULL(got);
    ASSERT_STR_EQ(line, "three\n");
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    /* Nothing changes: --timeout ends the wait with transaction_timed_out, exit 1. */
    char *err = NULL;
    ASSERT_EQ(rl_test_run("rl", NULL, &err, "kv --db '%s' --timeout 0.5 watch p/k", g_c.url), 1);
    ASSERT_NOT_NULL(strstr(err, "transaction_timed_out"));
    free(err);
    rl_db_close(db);
}

TEST(kv_15_10_restart_change_while_down) {
    start();
    rl_db *db;
    ASSERT_OK(rl_db_open(g_c.url, NULL, &db));
    set1(db, "r/k", "a");
    long long before = rl_test_status_num(&g_c, ss_port(), "watches_now");
    rl_future *w = watch1(db, "r/k");
    wait_registered(before + 1);
    kill_storage();
    set1(db, "r/k", "b"); /* committed while the owner is down */
    ASSERT_FALSE(rl_future_is_ready(w));
    ASSERT_EQ(rl_test_cluster_restart(&g_c, 1, 0), 0);
    if (!wait_ready(w)) fail_msg("the change made while the server was down did not fire the watch");
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
    rl_db_close(db);
}

TEST(kv_15_11_restart_change_after) {
    start();
    rl_db *db;
    ASSERT_OK(rl_db_open(g_c.url, NULL, &db));
    set1(db, "s/k", "a");
    long long before = rl_test_status_num(&g_c, ss_port(), "watches_now");
    rl_future *w = watch1(db, "s/k");
    wait_registered(before + 1);
    kill_storage();
    ASSERT_EQ(rl_test_cluster_restart(&g_c, 1, 0), 0);
    wait_registered(1); /* the client polls the restarted server */
    ASSERT_FALSE(rl_future_is_ready(w));
    set1(db, "s/k", "c");
    if (!wait_ready(w)) fail_msg("a change after the restart did not fire the watch");
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
    rl_db_close(db);
}

static rl_test_cluster g_c2;
static int g_started2;

/* Wait until storage server id of cluster c holds at least n watches. */
static void wait_registered_on(rl_test_cluster *c, uint32_t id, long long n) {
    uint64_t end = deadline();
    long long have = -1;
    for (;;) {
        int pid = 0;
        uint16_t port = 0;
        rl__errdetail err;
        rl__errdetail_init(&err, NULL);
        ASSERT_OK(rl__cluster_pid(c->dir, id, &pid, &port, &err));
        if ((have = rl_test_status_num(c, port, "watches_now")) >= n) return;
        if (rl__clock_mono_ns() > end) fail_msg("storage server %u holds %lld watches, not %lld", id, have, n);
        rl__clock_sleep_us(10000);
    }
}

TEST(kv_15_12_shard_move) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2; /* one shard each, split at \x80: "m/" starts on server 1 */
    ASSERT_OK(rl_test_cluster_start(&g_c2, &o));
    g_started2 = 1;
    rl_db *db;
    ASSERT_OK(rl_db_open(g_c2.url, NULL, &db));
    set1(db, "m/k", "a");
    rl_future *w = watch1(db, "m/k");
    wait_registered_on(&g_c2, 1, 1);
    const uint32_t team[1] = {2};
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__placement_assign(g_c2.url, NULL, (const uint8_t *)"m/", 2, (const uint8_t *)"m0", 2, team, 1, 20000,
                                  NULL, NULL, &msg);
    if (rc) fail_msg("assign [m/, m0) to server 2: %s %s", rl_error_name(rc), rl__errdetail_get(&msg));
    wait_registered_on(&g_c2, 2, 1); /* the client asked the new owner */
    /* A barrier in the moved range: the move itself changed nothing. */
    rl_future *b = watch1(db, "m/b");
    set1(db, "m/b", "x");
    if (!wait_ready(b)) fail_msg("the barrier watch did not fire");
    ASSERT_OK(rl_future_get_error(b));
    rl_future_free(b);
    ASSERT_FALSE(rl_future_is_ready(w));
    set1(db, "m/k", "b");
    if (!wait_ready(w)) fail_msg("a change after the shard moved did not fire the watch");
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
    rl_db_close(db);
    rl_test_cluster_stop(&g_c2);
    g_started2 = 0;
}

static long long watches_on(rl_test_cluster *c, uint32_t id) {
    int pid = 0;
    uint16_t port = 0;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    if (rl__cluster_pid(c->dir, id, &pid, &port, &err) != RL_OK) return -1;
    return rl_test_status_num(c, port, "watches_now");
}

TEST(kv_15_13_failover) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.replication = 2; /* every shard on both servers */
    ASSERT_OK(rl_test_cluster_start(&g_c2, &o));
    g_started2 = 1;
    rl_db *db;
    ASSERT_OK(rl_db_open(g_c2.url, NULL, &db));
    set1(db, "f/k", "a");
    rl_future *w = watch1(db, "f/k");
    uint32_t holder = 0;
    uint64_t end = deadline();
    while (!holder) {
        if (watches_on(&g_c2, 1) >= 1) holder = 1;
        else if (watches_on(&g_c2, 2) >= 1) holder = 2;
        else if (rl__clock_mono_ns() > end) fail_msg("no storage server holds the watch");
        else rl__clock_sleep_us(10000);
    }
    int pid = rl_test_cluster_pid(&g_c2, holder);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0); /* a process of our own cluster, by its recorded pid */
    while (rl_test_cluster_pid(&g_c2, holder) != 0) {
        if (rl__clock_mono_ns() > end) fail_msg("storage server %u still alive after SIGKILL", holder);
        rl__clock_sleep_us(5000);
    }
    set1(db, "f/k", "b");
    if (!wait_ready(w)) fail_msg("the watch did not fail over to the other member of the team");
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
    rl_db_close(db);
    rl_test_cluster_stop(&g_c2);
    g_started2 = 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_started) rl_test_cluster_stop(&g_c);
    g_started = 0;
    if (g_started2) rl_test_cluster_stop(&g_c2);
    g_started2 = 0;
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(kv_15_9_other_process), T(kv_15_10_restart_change_while_down),
                                       T(kv_15_11_restart_change_after), T(kv_15_12_shard_move), T(kv_15_13_failover)};
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, teardown);
}
