/* test_replica_failover.c — replication teams against a real cluster: reads
 * spread over the members of a team, and a member killed with kill -9 in the middle of a loop of
 * commits and reads costs no read an error and no acknowledged commit.
 *
 * The cluster: 2 storage servers, double replication, the keyspace split at "m" (both shards on
 * the team {1, 2}). A workload thread runs transactions one after another — a commit of one key
 * ("a/NN" or "z/NN", one on each shard) or a read (a point get, sometimes a range over one
 * prefix) — and checks every read against a model of the acknowledged values (the workload is
 * sequential, so a read at a later version must see the last acknowledged value). A read is
 * never retried by the test: any error it returns is a failure (the client must move to the
 * other member within its own retry window). Meanwhile the main thread kills storage 1 with
 * SIGKILL, lets the loop run on storage 2 alone, restarts storage 1 (`rl cluster restart`),
 * waits until its known_version reaches the coordinator's durable version and checks that it
 * serves reads again (its STATUS read counter grows), then does the same with storage 2.
 * At the end every key is read back and must hold its acknowledged value.
 *
 * The seed (keys and operations) is printed; RL_SEED=N replays the workload's choices.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster_fixture.h"
#include "test.h"

#define NKEYS 32 /* per prefix */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint16_t port_of(rl_test_cluster *c, uint32_t id) {
    int pid = 0;
    uint16_t port = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__cluster_pid(c->dir, id, &pid, &port, &msg));
    return port;
}

static void key_of(int k, char *out, size_t cap) { snprintf(out, cap, "%c/%02d", k < NKEYS ? 'a' : 'z', k % NKEYS); }

/* ---- The workload ------------------------------------------------------------------------------ */

typedef struct {
    rl_db *db;
    uint64_t rng;
    atomic_int stop;
    int model[2 * NKEYS]; /* the last acknowledged value (0: never written) */
    atomic_long reads, commits, read_errors, commit_errors, wrong_values;
    atomic_long max_read_ms;
    char first_error[256];
} workload;

static void note_error(workload *w, const char *what, int rc) {
    if (!w->first_error[0]) snprintf(w->first_error, sizeof w->first_error, "%s: %s", what, rl_error_name(rc));
}

static int read_key(rl_db *db, int k, int *out_v) {
    char key[16];
    key_of(k, key, sizeof key);
    rl_txn *t = NULL;
    int rc = rl_txn_begin(db, &t);
    if (rc) return rc;
    rl_future *f = rl_txn_get(t, key, strlen(key), 0);
    rc = rl_future_wait(f);
    int present = 0, len = 0;
    const uint8_t *v = NULL;
    if (rc == RL_OK) rc = rl_future_get_value(f, &present, &v, &len);
    *out_v = 0;
    if (rc == RL_OK && present) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.*s", len, (const char *)v);
        *out_v = atoi(buf + 1);
    }
    rl_future_free(f);
    rl_txn_free(t);
    return rc;
}

/* A range read of one prefix, checked key by key against the model. */
static int read_prefix(workload *w, int half) {
    char b[4] = {half ? 'z' : 'a', '/', 0}, e[4] = {half ? 'z' : 'a', '0', 0};
    rl_txn *t = NULL;
    int rc = rl_txn_begin(w->db, &t);
    if (rc) return rc;
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(b, 2), RL_FIRST_GREATER_OR_EQUAL(e, 2), 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, 0);
    rc = rl_future_wait(f);
    const rl_keyvalue *kvs = NULL;
    int n = 0, more = 0;
    if (rc == RL_OK) rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more);
    if (rc == RL_OK) {
        int seen[NKEYS] = {0};
        for (int i = 0; i < n; i++) {
            int k = atoi((const char *)kvs[i].key + 2);
            char buf[32];
            snprintf(buf, sizeof buf, "%.*s", (int)kvs[i].value_len, (const char *)kvs[i].value);
            if (k < 0 || k >= NKEYS) continue;
            seen[k] = atoi(buf + 1);
        }
        for (int k = 0; k < NKEYS; k++)
            if (seen[k] != w->model[half * NKEYS + k]) atomic_fetch_add(&w->wrong_values, 1);
    }
    rl_future_free(f);
    rl_txn_free(t);
    return rc;
}

static void *workload_main(void *ud) {
    workload *w = ud;
    int next = 1;
    while (!atomic_load(&w->stop)) {
        int k = (int)rl_test_rand_below(&w->rng, 2 * NKEYS);
        int op = (int)rl_test_rand_below(&w->rng, 10);
        if (op < 3) { /* commit */
            char key[16], val[16];
            key_of(k, key, sizeof key);
            snprintf(val, sizeof val, "v%d", next);
            rl_txn *t = NULL;
            int rc = rl_txn_begin(w->db, &t);
            if (rc == RL_OK) rc = rl_txn_set(t, key, strlen(key), val, strlen(val));
            if (rc == RL_OK) {
                rl_future *f = rl_txn_commit(t);
                rc = rl_future_wait(f);
                rl_future_free(f);
            }
            rl_txn_free(t);
            if (rc == RL_OK) {
                w->model[k] = next;
                atomic_fetch_add(&w->commits, 1);
            } else { /* the coordinator is never killed: every commit must be acknowledged */
                atomic_fetch_add(&w->commit_errors, 1);
                note_error(w, "commit", rc);
            }
            next++;
            continue;
        }
        int64_t t0 = mono_ms();
        int rc, v = 0;
        if (op == 9) {
            rc = read_prefix(w, k < NKEYS ? 0 : 1);
        } else {
            rc = read_key(w->db, k, &v);
            if (rc == RL_OK && v != w->model[k]) {
                atomic_fetch_add(&w->wrong_values, 1);
                if (!w->first_error[0])
                    snprintf(w->first_error, sizeof w->first_error, "key %d: read v%d, acknowledged v%d", k, v,
                             w->model[k]);
            }
        }
        long ms = (long)(mono_ms() - t0);
        if (ms > atomic_load(&w->max_read_ms)) atomic_store(&w->max_read_ms, ms);
        atomic_fetch_add(&w->reads, 1);
        if (rc != RL_OK) {
            atomic_fetch_add(&w->read_errors, 1);
            note_error(w, "read", rc);
        }
    }
    return NULL;
}

static rl_test_cluster g_cluster; /* static: the exit hook stops it after a failed assertion */

static void start_double(rl_test_cluster *c) {
    const char *keys[] = {"m"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.replication = 2;
    o.split = keys;
    o.n_split = 1;
    ASSERT_OK(rl_test_cluster_start(c, &o));
}

/* Wait until storage id's known_version reaches the coordinator's durable version (10 s). */
static void wait_caught_up(rl_test_cluster *c, uint32_t id) {
    long long durable = rl_test_status_num(c, port_of(c, 0), "durable_version");
    ASSERT_TRUE(durable > 0);
    long long known = -1;
    for (int i = 0; i < 1000; i++) {
        known = rl_test_status_num(c, port_of(c, id), "known_version");
        if (known >= durable) break;
        usleep(10000);
    }
    if (known < durable) fail_msg("storage %u: known_version %lld behind the coordinator's %lld", id, known, durable);
}

/* Kill storage id, run on the other member, restart it, check it catches up and serves reads. */
static void kill_and_restart(rl_test_cluster *c, workload *w, uint32_t id) {
    int pid = rl_test_cluster_pid(c, id);
    ASSERT_TRUE(pid > 0);
    long reads0 = atomic_load(&w->reads);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    for (int i = 0; i < 500 && rl_test_cluster_pid(c, id) != 0; i++) usleep(2000);
    /* The loop runs on the other member alone: at least 20 reads while this one is down (30 s at
     * most; a wait for a count, not a sleep). */
    long during = 0;
    for (int64_t t1 = mono_ms(); (during = atomic_load(&w->reads) - reads0) <= 20 && mono_ms() - t1 < 30000;)
        usleep(10000);
    int64_t t0 = mono_ms();
    ASSERT_EQ(rl_test_cluster_restart(c, id, 1), 0);
    wait_caught_up(c, id);
    printf("storage %u killed (pid %d): %ld reads while it was down, restarted and caught up in %lld ms\n", id, pid,
           during, (long long)(mono_ms() - t0));
    ASSERT_TRUE(during > 20); /* reads went on */
    /* It serves reads again (the client sees it healthy within a map refresh). */
    uint16_t port = port_of(c, id);
    long long r0 = rl_test_status_num(c, port, "reads"), r1 = r0;
    for (int i = 0; i < 500 && r1 < r0 + 20; i++) {
        usleep(10000);
        r1 = rl_test_status_num(c, port, "reads");
    }
    printf("storage %u served %lld reads after its restart\n", id, r1 - r0);
    ASSERT_TRUE(r1 >= r0 + 20);
}

/* replica-1.1: kill -9 each member of a double team in turn during a loop of commits and reads:
 * every read answers with the acknowledged value, every commit is acknowledged and survives, each
 * restarted member catches up and serves reads again. */
TEST(replica_1_1_failover) {
    rl_test_cluster *c = &g_cluster;
    start_double(c);
    static workload w;
    memset(&w, 0, sizeof w);
    w.rng = rl_test_seed();
    ASSERT_OK(rl_db_open(c->url, NULL, &w.db));
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, workload_main, &w), 0);
    /* The loop runs (commits acknowledged, reads answered) before the first kill. */
    for (int64_t t1 = mono_ms(); (atomic_load(&w.reads) < 20 || atomic_load(&w.commits) < 5) && mono_ms() - t1 < 30000;)
        usleep(10000);
    kill_and_restart(c, &w, 1);
    kill_and_restart(c, &w, 2);
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    printf("%ld reads (%ld errors, %ld wrong values, slowest %ld ms), %ld commits (%ld errors)%s%s\n",
           atomic_load(&w.reads), atomic_load(&w.read_errors), atomic_load(&w.wrong_values),
           atomic_load(&w.max_read_ms), atomic_load(&w.commits), atomic_load(&w.commit_errors),
           w.first_error[0] ? "; first: " : "", w.first_error);
    ASSERT_EQ(atomic_load(&w.read_errors), 0);
    ASSERT_EQ(atomic_load(&w.wrong_values), 0);
    ASSERT_EQ(atomic_load(&w.commit_errors), 0);
    ASSERT_TRUE(atomic_load(&w.commits) > 0);
    /* Every acknowledged value is there. */
    for (int k = 0; k < 2 * NKEYS; k++) {
        int v = -1;
        ASSERT_OK(read_key(w.db, k, &v));
        ASSERT_EQ(v, w.model[k]);
    }
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(w.db, &js));
    json_error_t je;
    json_t *j = json_loads(js, 0, &je);
    ASSERT_NOT_NULL(j);
    json_t *cl = json_object_get(j, "client");
    printf("client: %lld failovers, %lld retries, %lld lost connections\n",
           (long long)json_integer_value(json_object_get(cl, "failovers")),
           (long long)json_integer_value(json_object_get(cl, "requests_retried")),
           (long long)json_integer_value(json_object_get(cl, "lost_connections")));
    json_decref(j);
    rl_free(js);
    rl_db_close(w.db);
    rl_test_cluster_stop(c);
}

/* replica-1.2: reads spread over the members of a team: 1,000 point gets of keys of one shard
 * (team {1, 2}) are served by both servers, neither taking less than a quarter (their STATUS
 * read counters). */
TEST(replica_1_2_reads_spread) {
    rl_test_cluster *c = &g_cluster;
    start_double(c);
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(c->url, NULL, &db));
    long long r0[3], r1[3];
    for (uint32_t id = 1; id <= 2; id++) r0[id] = rl_test_status_num(c, port_of(c, id), "reads");
    int64_t t0 = mono_ms();
    for (int i = 0; i < 1000; i++) {
        int v;
        ASSERT_OK(read_key(db, i % NKEYS, &v));
    }
    printf("1,000 gets (one transaction each) in %lld ms\n", (long long)(mono_ms() - t0));
    for (uint32_t id = 1; id <= 2; id++) r1[id] = rl_test_status_num(c, port_of(c, id), "reads");
    long long d1 = r1[1] - r0[1], d2 = r1[2] - r0[2];
    printf("1,000 gets: storage 1 served %lld, storage 2 %lld\n", d1, d2);
    ASSERT_TRUE(d1 + d2 >= 1000);
    ASSERT_TRUE(d1 >= 250);
    ASSERT_TRUE(d2 >= 250);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* replica-1.3: a member that stops answering (SIGSTOP: its connections stay open, nothing comes
 * back) costs reads a hedge, not a timeout: 200 point gets of one shard of a double team while
 * storage 1 is stopped all answer, each within 1 s (the attempt timeout is 5 s: without hedging
 * half of them would wait for it), and the client reports hedges won by the other member. */
TEST(replica_1_3_hedged_reads) {
    rl_test_cluster *c = &g_cluster;
    start_double(c);
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(c->url, NULL, &db));
    for (int i = 0; i < 50; i++) { /* connections to both members, round trips measured */
        int v;
        ASSERT_OK(read_key(db, i % NKEYS, &v));
    }
    int pid = rl_test_cluster_pid(c, 1);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
    long slowest = 0;
    int failed = 0;
    for (int i = 0; i < 200; i++) {
        int v;
        int64_t t0 = mono_ms();
        int rc = read_key(db, i % NKEYS, &v);
        long ms = (long)(mono_ms() - t0);
        if (ms > slowest) slowest = ms;
        failed += rc != RL_OK;
    }
    ASSERT_EQ(kill(pid, SIGCONT), 0);
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(db, &js));
    json_error_t je;
    json_t *j = json_loads(js, 0, &je);
    ASSERT_NOT_NULL(j);
    json_t *cl = json_object_get(j, "client");
    long long hedges = json_integer_value(json_object_get(cl, "hedges"));
    long long wins = json_integer_value(json_object_get(cl, "hedge_wins"));
    printf("200 gets with storage 1 stopped: %d failed, slowest %ld ms, %lld hedges, %lld won\n", failed, slowest,
           hedges, wins);
    json_decref(j);
    rl_free(js);
    ASSERT_EQ(failed, 0);
    ASSERT_TRUE(slowest < 1000);
    ASSERT_TRUE(hedges > 0 && wins > 0);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

RL_TEST_MAIN(T(replica_1_2_reads_spread), T(replica_1_1_failover), T(replica_1_3_hedged_reads))
