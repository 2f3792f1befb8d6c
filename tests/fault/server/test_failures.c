/* test_failures.c — how failures surface , against real clusters:
 *
 *   fail-1.1  `rl cluster restart` after several processes were killed with kill -9 together:
 *             restarting one of them exits 0 (and names the one still down), restarting several
 *             together (the coordinator with them) exits 0, and the cluster is healthy again.
 *   fail-1.2  the C API: a transaction with a timeout (RL_TXN_OPT_TIMEOUT_MS, or the database's
 *             rl_db_options.transaction_timeout_ms) whose read, read version or commit waits on a
 *             storage server or coordinator that is killed or stopped (SIGSTOP: connected, no
 *             reply) completes with transaction_timed_out (1031) within the timeout plus a
 *             small margin, and rl_db_run stops with it.
 *   fail-1.3  `rl kv get` and `rl load` against a killed storage server print the waiting report
 *             (which server, which request, since when) and exit 1 with transaction_timed_out
 *             (1031) after --timeout.
 *   fail-1.4  a coordinator that cannot start (its port taken) records why in its fatal.json, and
 *             `rl cluster status` shows it; a later successful start clears it. A process killed
 *             with kill -9 records nothing. (A storage server on a full disk: test_disk_full.c.)
 *
 * Every process is started by the fixture (tests/cluster_fixture.h) and stopped by recorded pid
 * whatever happens; every wait polls a condition with a deadline.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster_fixture.h"
#include "server/fatal.h"
#include "test.h"

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* kill -9 process id of c by its recorded pid and wait (10 s at most) until it is gone. */
static void kill9(rl_test_cluster *c, uint32_t id) {
    int pid = rl_test_cluster_pid(c, id);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int64_t deadline = mono_ms() + 10000;
    while (!rl_test_pid_gone(pid) && mono_ms() < deadline) usleep(5000);
    ASSERT_TRUE(rl_test_pid_gone(pid));
}

/* The cluster's status through the library: RL_OK when every process is alive and healthy. */
static int cluster_ok(rl_test_cluster *c, json_t **out) {
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    json_t *st = NULL;
    int rc = rl__cluster_status(c->dir, 0, &st, &msg);
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
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    rl_test_cluster c;
    ASSERT_OK(rl_test_cluster_start(&c, &o));
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

/* The margin a timeout may be late by: the sweep runs every 50 ms, but this machine is shared. */
static int64_t margin_ms(void) { return rl_test_machine_busy() ? 3000 : 1000; }

/* Wait for f and check that it failed with 1031 between timeout_ms and timeout_ms + the margin
 * after t0. */
static void expect_timed_out(rl_future *f, int64_t t0, int64_t timeout_ms, const char *what) {
    int rc = rl_future_wait(f);
    int64_t took = mono_ms() - t0;
    printf("%s: %s after %lld ms (timeout %lld ms)\n", what, rl_error_name(rc), (long long)took, (long long)timeout_ms);
    ASSERT_EQ(rc, RL_E_TRANSACTION_TIMED_OUT);
    ASSERT_TRUE(took >= timeout_ms - 50); /* the clock is the transaction's: a little slack */
    ASSERT_TRUE(took <= timeout_ms + margin_ms());
}

/* A get of key in a new transaction with a timeout of timeout_ms: 1031 in time, and on_error
 * does not retry it. */
static void get_times_out(rl_db *db, const char *key, int64_t timeout_ms, const char *what) {
    rl_txn *t = NULL;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_TIMEOUT_MS, timeout_ms));
    int64_t t0 = mono_ms();
    rl_future *f = rl_txn_get(t, key, strlen(key), 0);
    expect_timed_out(f, t0, timeout_ms, what);
    rl_future_free(f);
    f = rl_txn_on_error(t, RL_E_TRANSACTION_TIMED_OUT); /* not retryable: the error at once */
    ASSERT_EQ(rl_future_wait(f), RL_E_TRANSACTION_TIMED_OUT);
    rl_future_free(f);
    f = rl_txn_get(t, "a", 1, 0); /* every later operation fails too, until reset */
    ASSERT_EQ(rl_future_wait(f), RL_E_TRANSACTION_TIMED_OUT);
    rl_future_free(f);
    rl_txn_free(t);
}

/* A read of key without a timeout works (the cluster is otherwise fine). */
static void get_works(rl_db *db, const char *key) {
    rl_txn *t = NULL;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get(t, key, strlen(key), 0);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
}

static int get_z_fn(rl_txn *t, void *ud) {
    int *calls = ud;
    (*calls)++;
    rl_future *f = rl_txn_get(t, "z", 1, 0);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    return rc;
}

/* Signal process id of c by its recorded pid. */
static void signal_proc(rl_test_cluster *c, uint32_t id, int sig) {
    int pid = rl_test_cluster_pid(c, id);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, sig), 0);
}

/* fail-1.2: two storage servers, the keyspace split at "m" ("a" on storage 1, "z" on storage
 * 2). Timeouts of 1.5 s against: storage 2 killed (a get; rl_db_run with the database's default
 * timeout), storage 2 stopped with SIGSTOP (a get whose request waits for its reply), the
 * coordinator stopped (a read version; a commit at a given read version) and the coordinator
 * killed (a read version). Without the timeout each of these waits (rl_db_run: for ever). */
TEST(fail_1_2_txn_timeout) {
    const char *keys[] = {"m"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.split = keys;
    o.n_split = 1;
    rl_test_cluster c;
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    const int64_t tmo = 1500;
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    dbo.transaction_timeout_ms = tmo;
    rl_db *dbt = NULL; /* every transaction with the timeout */
    ASSERT_OK(rl_db_open(c.url, &dbo, &dbt));
    round_trip(&c);
    get_works(db, "z");

    /* Storage 2 killed: connections refused, the client retries; the timeout ends it. */
    kill9(&c, 2);
    get_times_out(db, "z", tmo, "get, storage killed");
    int calls = 0;
    int64_t t0 = mono_ms();
    int rc = rl_db_run(dbt, get_z_fn, &calls);
    int64_t took = mono_ms() - t0;
    printf("rl_db_run, storage killed: %s after %lld ms, %d attempts\n", rl_error_name(rc), (long long)took, calls);
    ASSERT_EQ(rc, RL_E_TRANSACTION_TIMED_OUT);
    ASSERT_TRUE(took >= tmo - 50 && took <= tmo + margin_ms());
    get_works(db, "a");
    ASSERT_EQ(rl_test_cluster_restart_args(&c, "--storage 2", NULL), 0);
    get_works(db, "z");

    /* Storage 2 stopped: the request is sent and waits for a reply that does not come. */
    signal_proc(&c, 2, SIGSTOP);
    get_times_out(db, "z", tmo, "get, storage stopped");
    signal_proc(&c, 2, SIGCONT);
    get_works(db, "z");

    /* The coordinator stopped: a read version, and a commit at a given read version. */
    rl_txn *t = NULL;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get_read_version(t);
    ASSERT_OK(rl_future_wait(f));
    int64_t rv = 0;
    ASSERT_OK(rl_future_get_int64(f, &rv));
    rl_future_free(f);
    rl_txn_free(t);
    signal_proc(&c, 0, SIGSTOP);
    ASSERT_OK(rl_txn_begin(dbt, &t));
    t0 = mono_ms();
    f = rl_txn_get_read_version(t);
    expect_timed_out(f, t0, tmo, "read version, coordinator stopped");
    rl_future_free(f);
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(dbt, &t));
    rl_txn_set_read_version(t, rv);
    ASSERT_OK(rl_txn_set(t, "b", 1, "1", 1));
    t0 = mono_ms();
    f = rl_txn_commit(t);
    expect_timed_out(f, t0, tmo, "commit, coordinator stopped");
    rl_future_free(f);
    rl_txn_free(t);
    signal_proc(&c, 0, SIGCONT);
    get_works(db, "a");

    /* The coordinator killed: the read version's connection is refused and retried. */
    kill9(&c, 0);
    ASSERT_OK(rl_txn_begin(dbt, &t));
    t0 = mono_ms();
    f = rl_txn_get_read_version(t);
    expect_timed_out(f, t0, tmo, "read version, coordinator killed");
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(dbt);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

/* Run `rl ARGS` and check it exits 1 with transaction_timed_out (1031) after timeout_s, having
 * reported what it waited for on stderr. */
static void rl_times_out(const char *args, int timeout_s, const char *waits_for) {
    char *out = NULL, *err = NULL;
    int64_t t0 = mono_ms();
    int rc = rl_test_run("rl", &out, &err, "%s --timeout %d", args, timeout_s);
    int64_t took = mono_ms() - t0;
    printf("rl %s --timeout %d: exit %d after %lld ms\nstdout: %s\nstderr: %s", args, timeout_s, rc, (long long)took,
           out, err);
    ASSERT_EQ(rc, 1);
    ASSERT_NOT_NULL(strstr(err, "transaction_timed_out (1031)"));
    ASSERT_NOT_NULL(strstr(err, "waiting "));
    ASSERT_NOT_NULL(strstr(err, waits_for));
    ASSERT_NOT_NULL(strstr(err, "(since "));
    ASSERT_TRUE(took >= (int64_t)timeout_s * 1000);
    ASSERT_TRUE(took <= (int64_t)timeout_s * 1000 + 2000 + margin_ms());
    free(out), free(err);
}

/* fail-1.3: two storage servers, everything from "\x01" on storage 2 (the store's keys too);
 * storage 2 killed. `rl kv get z` and `rl load` report after 3 s that they wait for storage
 * server 2 (its address) and give up after --timeout 5 with 1031. */
TEST(fail_1_3_rl_waits_and_gives_up) {
    const char *keys[] = {"\\x01"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.split = keys;
    o.n_split = 1;
    rl_test_cluster c;
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    char args[4600], waits[128], ip[16];
    uint16_t port = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__cluster_addr(c.dir, 2, ip, &port, NULL, &msg));
    snprintf(waits, sizeof waits, "for storage server 2 at %s:%u", ip, port);
    snprintf(args, sizeof args, "kv --db '%s' set z 1", c.url);
    ASSERT_EQ(rl_test_run("rl", NULL, NULL, "%s", args), 0);
    kill9(&c, 2);
    snprintf(args, sizeof args, "kv --db '%s' get z", c.url);
    rl_times_out(args, 5, waits);
    snprintf(args, sizeof args, "load --db '%s' --count 10", c.url);
    rl_times_out(args, 5, waits);
    rl_test_cluster_stop(&c);
}

/* fail-1.4: see the file comment. */
TEST(fail_1_4_coordinator_records_why) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    rl_test_cluster c;
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    char ip[16];
    uint16_t port = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__cluster_addr(c.dir, 0, ip, &port, NULL, &msg));
    kill9(&c, 1); /* killed: no record */
    json_t *st = NULL;
    ASSERT_EQ(cluster_ok(&c, &st), RL_E_SERVER_UNAVAILABLE);
    ASSERT_NULL(json_object_get(json_array_get(json_object_get(st, "processes"), 1), "stopped_on"));
    json_decref(st);
    ASSERT_EQ(rl_test_cluster_restart_args(&c, "--storage 1", NULL), 0);
    /* The coordinator's port taken while it is down: its start fails, and says why. */
    kill9(&c, 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0); /* past TIME_WAIT */
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    ASSERT_EQ(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    int64_t deadline = mono_ms() + 10000; /* the old socket may linger a moment */
    int bound = -1;
    while ((bound = bind(fd, (struct sockaddr *)&sa, sizeof sa)) != 0 && mono_ms() < deadline) usleep(20000);
    ASSERT_EQ(bound, 0);
    ASSERT_EQ(listen(fd, 1), 0);
    char *out = NULL;
    int rc = rl_test_cluster_restart_args(&c, "--coordinator --timeout 20", &out);
    printf("rl cluster restart --coordinator, port taken: exit %d\n%s", rc, out);
    ASSERT_EQ(rc, 1); /* it tried 20 times, each start exiting at once, and says why */
    ASSERT_NOT_NULL(strstr(out, "exited before listening: stopped on address_in_use (2105)"));
    free(out);
    deadline = mono_ms() + 15000; /* restart stops the last attempt if it was still starting */
    while (rl_test_cluster_pid(&c, 0) != 0 && mono_ms() < deadline) usleep(20000);
    ASSERT_EQ(rl_test_cluster_pid(&c, 0), 0);
    ASSERT_EQ(cluster_ok(&c, &st), RL_E_SERVER_UNAVAILABLE);
    json_t *p0 = json_array_get(json_object_get(st, "processes"), 0);
    json_t *why = json_object_get(p0, "stopped_on");
    ASSERT_TRUE(json_is_object(why));
    ASSERT_STR_EQ(json_string_value(json_object_get(why, "name")), "address_in_use");
    ASSERT_STR_EQ(json_string_value(json_object_get(why, "role")), "coordinator");
    ASSERT_NOT_NULL(strstr(json_string_value(json_object_get(why, "what")), "starting: "));
    ASSERT_NOT_NULL(strstr(json_string_value(json_object_get(p0, "error")), "stopped on address_in_use (2105) at "));
    json_decref(st);
    ASSERT_EQ(rl_test_rl(&out, "cluster status --dir '%s'", c.dir), 1);
    printf("%s", out);
    ASSERT_NOT_NULL(strstr(out, "stopped on address_in_use (2105)"));
    free(out);
    close(fd);
    /* Started again: healthy, and the record is gone. */
    ASSERT_EQ(rl_test_cluster_restart_args(&c, "--coordinator", NULL), 0);
    ASSERT_OK(cluster_ok(&c, &st));
    ASSERT_NULL(json_object_get(json_array_get(json_object_get(st, "processes"), 0), "stopped_on"));
    json_decref(st);
    json_t *rec = NULL;
    char cdir[4300];
    snprintf(cdir, sizeof cdir, "%s/coordinator", c.dir);
    ASSERT_OK(rl__fatal_read(cdir, &rec, &msg));
    ASSERT_NULL(rec);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(fail_1_1_restart_after_kills), T(fail_1_2_txn_timeout), T(fail_1_3_rl_waits_and_gives_up),
             T(fail_1_4_coordinator_records_why))
