/* test_cluster_kill.c — kill -9 rounds against a real cluster (Tests: "Kill -9 at random
 * moments"). A client process commits transactions that each write two keys on different storage
 * servers ("a/I" on storage 1, "z/I" on storage 2, the keyspace split at "m") and records every
 * acknowledged commit in a file. Meanwhile the test kills the coordinator or a storage server by
 * its recorded pid at random moments (SIGKILL) and brings it back with `rl cluster restart`. At
 * the end: every acknowledged commit is readable (both keys, the right values), no transaction is
 * half applied (a/I present exactly when z/I is), and every storage server catches up (its STATUS
 * applied_version reaches the coordinator's durable version).
 *
 * Rounds: RL_KILL_ROUNDS (default 3, for CI); scripts/soak-cluster.sh runs many. The seed
 * (victims, delays) is printed; RL_SEED=N replays the schedule.
 *
 * Idle gaps (scripts/soak-cluster.sh sets them): with RL_KILL_IDLE_MS=N every round
 * ends with N ms in which nothing commits (the client process is stopped with SIGSTOP, then
 * continued), longer than the servers' MVCC window (RL_KILL_WINDOW_VERSIONS, passed to every
 * process; 0 or unset: their default). After each gap a read-then-write transaction of the test's
 * own must commit within three attempts (at once, but for reconnecting to a process that was just
 * restarted), and its read version must have advanced with the idle time: versions keep moving
 * on an idle cluster, across kill -9 and restarts too.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "test.h"

static volatile sig_atomic_t g_stop;
static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The client process: commit pairs until SIGTERM (or 10 minutes), appending "I\n" to ack_path
 * after each acknowledged commit. Exits 0, or 1 on an unexpected error. */
static void client_main(const char *url, const char *ack_path) {
    signal(SIGTERM, on_term);
    int fd = open(ack_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) _exit(1);
    rl_db *db = NULL;
    if (rl_db_open(url, NULL, &db) != RL_OK) _exit(1);
    int64_t until = mono_ms() + 600000;
    int i = 1, failures = 0;
    while (!g_stop && mono_ms() < until) {
        rl_txn *t = NULL;
        if (rl_txn_begin(db, &t) != RL_OK) _exit(1);
        char ka[32], kz[32], v[32];
        snprintf(ka, sizeof ka, "a/%08d", i);
        snprintf(kz, sizeof kz, "z/%08d", i);
        snprintf(v, sizeof v, "v%d", i);
        rl_txn_set(t, ka, strlen(ka), v, strlen(v));
        rl_txn_set(t, kz, strlen(kz), v, strlen(v));
        rl_future *f = rl_txn_commit(t);
        int rc = rl_future_wait(f);
        rl_future_free(f);
        rl_txn_free(t);
        if (rc == RL_OK) {
            char line[32];
            int n = snprintf(line, sizeof line, "%d\n", i);
            if (write(fd, line, (size_t)n) != n) _exit(1);
            i++;
            failures = 0;
            continue;
        }
        /* Not acknowledged (commit_unknown_result, connection_failed, ...): the same writes are
         * retried (they are idempotent), so I is acknowledged later or never. */
        if (++failures > 2000) {
            fprintf(stderr, "client: %d failures in a row, last %s\n", failures, rl_error_name(rc));
            _exit(1);
        }
        usleep(5000);
    }
    rl_db_close(db);
    close(fd);
    _exit(0);
}

/* All keys of [b, e) in db, paging; calls fn for each. */
static void scan(rl_db *db, const char *b, const char *e, void (*fn)(const rl_keyvalue *kv, void *ud), void *ud) {
    char from[64];
    size_t fl = strlen(b);
    memcpy(from, b, fl);
    int first = 1;
    for (;;) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(db, &t));
        rl_key_selector sb = first ? RL_FIRST_GREATER_OR_EQUAL(from, fl) : RL_FIRST_GREATER_THAN(from, fl);
        rl_future *f = rl_txn_get_range(t, sb, RL_FIRST_GREATER_OR_EQUAL(e, strlen(e)), 1000, 0, RL_STREAMING_WANT_ALL,
                                        0, RL_SNAPSHOT);
        ASSERT_OK(rl_future_wait(f));
        const rl_keyvalue *kvs;
        int n, more;
        ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
        for (int i = 0; i < n; i++) fn(&kvs[i], ud);
        if (n > 0) {
            fl = kvs[n - 1].key_len;
            memcpy(from, kvs[n - 1].key, fl);
            first = 0;
        }
        rl_future_free(f);
        rl_txn_free(t);
        if (!more || n == 0) break;
    }
}

#define MAXI 2000000
typedef struct {
    uint8_t *seen; /* per I: bit 1 a/I, bit 2 z/I */
    int max;
} seen_set;

static void mark(const rl_keyvalue *kv, void *ud) {
    seen_set *s = ud;
    char k[32], v[32];
    snprintf(k, sizeof k, "%.*s", (int)kv->key_len, (const char *)kv->key);
    int i = atoi(k + 2);
    if (i <= 0 || i >= MAXI) fail_msg("unexpected key %s", k);
    snprintf(v, sizeof v, "v%d", i);
    if (kv->value_len != strlen(v) || memcmp(kv->value, v, kv->value_len))
        fail_msg("key %s has value '%.*s', expected '%s'", k, (int)kv->value_len, (const char *)kv->value, v);
    s->seen[i] |= k[0] == 'a' ? 1 : 2;
    if (i > s->max) s->max = i;
}

/* The acknowledgements the client has written to path so far (its lines). */
static long ack_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long n = 0;
    for (int ch; (ch = getc(f)) != EOF;) n += ch == '\n';
    fclose(f);
    return n;
}

/* An idle gap of idle_ms (see the file comment) on db, with the client process stopped. */
static void idle_gap(rl_db *db, pid_t client, int idle_ms, int round) {
    ASSERT_EQ(kill(client, SIGSTOP), 0);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_TIMEOUT_MS, 20000));
    rl_future *f = rl_txn_get_read_version(t);
    ASSERT_OK(rl_future_wait(f));
    int64_t before;
    ASSERT_OK(rl_future_get_int64(f, &before));
    rl_future_free(f);
    rl_txn_reset(t);
    usleep((useconds_t)idle_ms * 1000); /* nothing commits: the condition under test */
    int attempts = 0, rc;
    int64_t rv = 0;
    for (;;) {
        attempts++;
        f = rl_txn_get_read_version(t);
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_int64(f, &rv);
        rl_future_free(f);
        if (rc == RL_OK) {
            f = rl_txn_get(t, "idle", 4, 0);
            rc = rl_future_wait(f);
            rl_future_free(f);
        }
        if (rc == RL_OK) rc = rl_txn_set(t, "idle", 4, "x", 1);
        if (rc == RL_OK) {
            f = rl_txn_commit(t);
            rc = rl_future_wait(f);
            rl_future_free(f);
        }
        if (rc == RL_OK || attempts >= 3) break;
        f = rl_txn_on_error(t, rc);
        int rc2 = rl_future_wait(f);
        rl_future_free(f);
        if (rc2 != RL_OK) break;
    }
    rl_txn_free(t);
    ASSERT_EQ(kill(client, SIGCONT), 0);
    if (rc != RL_OK)
        fail_msg("round %d: after %d ms idle the read-then-write failed %d times: %s", round, idle_ms, attempts,
                 rl_error_name(rc));
    printf("round %d: after %d ms idle the read version had moved %lld versions; %d attempt(s)\n", round, idle_ms,
           (long long)(rv - before), attempts);
    if (rv - before < (int64_t)idle_ms * 500)
        fail_msg("round %d: %d ms idle moved the read version only %lld versions", round, idle_ms,
                 (long long)(rv - before));
}

/* kill-1.1: kill -9 rounds; every acknowledged commit survives whole. */
TEST(kill_1_1_acknowledged_commits_survive) {
    const char *rounds_env = getenv("RL_KILL_ROUNDS");
    int rounds = rounds_env && *rounds_env ? atoi(rounds_env) : 3;
    const char *idle_env = getenv("RL_KILL_IDLE_MS"), *window_env = getenv("RL_KILL_WINDOW_VERSIONS");
    int idle_ms = idle_env && *idle_env ? atoi(idle_env) : 0;
    rl_test_cluster c;
    const char *keys[] = {"m"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.split = keys;
    o.n_split = 1;
    o.window_versions = window_env && *window_env ? atoll(window_env) : 0;
    int rc = rl_test_cluster_start(&c, &o);
    ASSERT_OK(rc);
    rl_db *probe = NULL; /* the cluster opens (or the test fails here, not in a forked client) */
    ASSERT_OK(rl_db_open(c.url, NULL, &probe));
    rl_db_close(probe);
    char ack_path[4300];
    snprintf(ack_path, sizeof ack_path, "%s/acks.txt", c.dir);
    uint64_t seed = rl_test_seed(), rs = seed;
    fflush(stdout);
    pid_t client = fork();
    if (client == 0) client_main(c.url, ack_path);
    ASSERT_TRUE(client > 0);
    rl_db *idle_db = NULL;
    if (idle_ms > 0) ASSERT_OK(rl_db_open(c.url, NULL, &idle_db));
    int64_t t0 = mono_ms();
    for (int r = 0; r < rounds; r++) {
        usleep((useconds_t)(100000 + rl_test_rand_below(&rs, 500000)));
        uint32_t victim = (uint32_t)rl_test_rand_below(&rs, 3);
        int pid = rl_test_cluster_pid(&c, victim);
        ASSERT_TRUE(pid > 0);
        ASSERT_EQ(kill(pid, SIGKILL), 0);
        for (int i = 0; i < 500 && rl_test_cluster_pid(&c, victim) != 0; i++) usleep(2000);
        int64_t tk = mono_ms();
        rc = rl_test_cluster_restart(&c, victim, 1);
        ASSERT_EQ(rc, 0);
        printf("round %d: killed %s (pid %d), healthy again after %lld ms\n", r + 1,
               victim == 0   ? "the coordinator"
               : victim == 1 ? "storage 1"
                             : "storage 2",
               pid, (long long)(mono_ms() - tk));
        if (idle_ms > 0) idle_gap(idle_db, client, idle_ms, r + 1);
    }
    rl_db_close(idle_db);
    /* The client commits again after the last restart (an acknowledgement more; 30 s at most),
     * then it is stopped. */
    long acks_then = ack_lines(ack_path), acks_now = acks_then;
    for (int64_t t1 = mono_ms(); (acks_now = ack_lines(ack_path)) <= acks_then && mono_ms() - t1 < 30000;) usleep(5000);
    if (acks_now <= acks_then) fail_msg("no commit acknowledged in 30 s after the last restart");
    kill(client, SIGTERM);
    int st = 0;
    ASSERT_EQ(waitpid(client, &st, 0), client);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_EQ(WEXITSTATUS(st), 0);
    /* The acknowledged commits. */
    FILE *f = fopen(ack_path, "r");
    ASSERT_NOT_NULL(f);
    int acked = 0, max_acked = 0, v;
    seen_set s = {calloc(MAXI, 1), 0};
    int *acks = malloc(sizeof(int) * MAXI);
    while (fscanf(f, "%d", &v) == 1) {
        ASSERT_TRUE(v > 0 && v < MAXI);
        acks[acked++] = v;
        if (v > max_acked) max_acked = v;
    }
    fclose(f);
    printf("%d commits acknowledged in %lld ms over %d kill rounds\n", acked, (long long)(mono_ms() - t0), rounds);
    ASSERT_TRUE(acked > 0);
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    scan(db, "a/", "a0", mark, &s);
    scan(db, "z/", "z0", mark, &s);
    for (int i = 0; i < acked; i++)
        if (s.seen[acks[i]] != 3)
            fail_msg("acknowledged commit %d: a/ %s, z/ %s", acks[i], s.seen[acks[i]] & 1 ? "present" : "MISSING",
                     s.seen[acks[i]] & 2 ? "present" : "MISSING");
    for (int i = 1; i <= s.max; i++)
        if (s.seen[i] == 1 || s.seen[i] == 2)
            fail_msg("commit %d is half applied (only %s/)", i, s.seen[i] == 1 ? "a" : "z");
    /* At most one transaction beyond the acknowledged ones can be there (one not acknowledged when
     * the client stopped, or one whose acknowledgement was lost with a connection). */
    ASSERT_TRUE(s.max <= max_acked + 1);
    rl_db_close(db);
    /* Every storage server catches up with the coordinator. */
    uint16_t ports[3];
    int pid;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    for (uint32_t i = 0; i < 3; i++) ASSERT_OK(rl__cluster_pid(c.dir, i, &pid, &ports[i], &msg));
    long long durable = rl_test_status_num(&c, ports[0], "durable_version");
    ASSERT_TRUE(durable > 0);
    for (uint32_t i = 1; i < 3; i++) {
        long long applied = -1;
        for (int w = 0; w < 1000; w++) {
            applied = rl_test_status_num(&c, ports[i], "applied_version");
            long long known = rl_test_status_num(&c, ports[i], "known_version");
            if (applied >= durable || known >= durable) break;
            usleep(10000);
        }
        long long known = rl_test_status_num(&c, ports[i], "known_version");
        if (applied < durable && known < durable)
            fail_msg("storage %u: applied %lld, known %lld, behind the coordinator's durable version %lld", i, applied,
                     known, durable);
    }
    free(s.seen);
    free(acks);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(kill_1_1_acknowledged_commits_survive))
