/* test_failures.c — how failures surface (issue 27), against real clusters:
 *
 *   fail-1.1  `rl cluster restart` after several processes were killed with kill -9 together:
 *             restarting one of them exits 0 (and names the one still down), restarting several
 *             together (the coordinator with them) exits 0, and the cluster is healthy again.
 *
 * Every process is started by the fixture (tests/cluster_fixture.h) and stopped by recorded pid
 * whatever happens; every wait polls a condition with a deadline.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster_fixture.h"
#include "test.h"

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 1 once pid is gone (or a zombie: the processes are the fixture's grandchildren or ours). */
static int pid_gone(int pid) {
    int st;
    (void)waitpid(pid, &st, WNOHANG);
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return !p || p[2] == 'Z' || p[2] == 'X';
}

/* kill -9 process id of c by its recorded pid and wait (10 s at most) until it is gone. */
static void kill9(rl_test_cluster *c, uint32_t id) {
    int pid = rl_test_cluster_pid(c, id);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int64_t deadline = mono_ms() + 10000;
    while (!pid_gone(pid) && mono_ms() < deadline) usleep(5000);
    ASSERT_TRUE(pid_gone(pid));
}

/* The cluster's status through the library: RL_OK when every process is alive and healthy. */
static int cluster_ok(rl_test_cluster *c, json_t **out) {
    rl_buf msg;
    rl__buf_init(&msg);
    json_t *st = NULL;
    int rc = rl__cluster_status(c->dir, 0, &st, &msg);
    rl__buf_release(&msg);
    if (out) *out = st;
    else json_decref(st);
    return rc;
}

/* A write and a read of every shard through the client (keys "a", "m", "z" span the layout of
 * three shards split evenly by first byte). */
static void round_trip(rl_test_cluster *c) {
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(c->url, NULL, &db));
    static const char *keys[] = {"a", "m", "z"};
    for (int i = 0; i < 3; i++) {
        rl_txn *t = NULL;
        ASSERT_OK(rl_txn_begin(db, &t));
        ASSERT_OK(rl_txn_set(t, keys[i], 1, "v", 1));
        rl_future *f = rl_txn_commit(t);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
        rl_txn_reset(t);
        f = rl_txn_get(t, keys[i], 1, 0);
        ASSERT_OK(rl_future_wait(f));
        int present = 0, len = 0;
        const uint8_t *v = NULL;
        ASSERT_OK(rl_future_get_value(f, &present, &v, &len));
        ASSERT_TRUE(present && len == 1 && v[0] == 'v');
        rl_future_free(f);
        rl_txn_free(t);
    }
    rl_db_close(db);
}

/* fail-1.1: kill -9 storage 2 and 3 together; `rl cluster restart --storage 2` exits 0 and
 * names storage-3 as still down (it used to exit 1: "storage-3 (pid ...) has exited"); then
 * storage 3 alone. Then kill -9 the coordinator, storage 1 and storage 3 together and restart all
 * three in one command; the cluster is healthy and serves every shard. */
TEST(fail_1_1_restart_after_kills) {
    rl_cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    rl_test_cluster c;
    if (rl_test_cluster_start(&c, &o) != RL_OK) skip();
    round_trip(&c);
    kill9(&c, 2);
    kill9(&c, 3);
    char *out = NULL;
    int rc = rl_test_cluster_restart_args(&c, "--storage 2", &out);
    printf("rl cluster restart --storage 2 (3 also down): exit %d\n%s", rc, out);
    ASSERT_EQ(rc, 0);
    ASSERT_NOT_NULL(strstr(out, "restarted storage server 2"));
    ASSERT_NOT_NULL(strstr(out, "still down: storage-3"));
    free(out);
    ASSERT_TRUE(rl_test_cluster_pid(&c, 2) > 0);
    ASSERT_EQ(rl_test_cluster_pid(&c, 3), 0);
    json_t *st = NULL;
    ASSERT_EQ(cluster_ok(&c, &st), RL_E_SERVER_UNAVAILABLE); /* storage 3 is down */
    json_t *procs = json_object_get(st, "processes");
    for (int i = 0; i < 3; i++) ASSERT_TRUE(json_is_true(json_object_get(json_array_get(procs, i), "healthy")));
    ASSERT_FALSE(json_is_true(json_object_get(json_array_get(procs, 3), "alive")));
    json_decref(st);
    ASSERT_EQ(rl_test_cluster_restart_args(&c, "--storage 3", NULL), 0);
    ASSERT_OK(cluster_ok(&c, NULL));
    round_trip(&c);
    /* Several at once, the coordinator among them, every pid already gone. */
    kill9(&c, 0);
    kill9(&c, 1);
    kill9(&c, 3);
    rc = rl_test_cluster_restart_args(&c, "--coordinator --storage 1,3", &out);
    printf("rl cluster restart --coordinator --storage 1,3: exit %d\n%s", rc, out);
    ASSERT_EQ(rc, 0);
    ASSERT_NULL(strstr(out, "still down"));
    free(out);
    ASSERT_OK(cluster_ok(&c, NULL));
    round_trip(&c);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(fail_1_1_restart_after_kills))
