/* test_kv_crash.c — durability with real crashes: a child process opens file:DIR and commits
 * transactions, each writing a group of keys that must stay consistent, and reports every
 * acknowledged commit to the parent over a pipe; the parent SIGKILLs it at a random moment. After
 * each kill the parent reopens the directory and checks that every acknowledged commit is present
 * and that no transaction is half applied. Seeded (printed); about 10 s. RL_TEST_FILE_OPTS is
 * appended to the URL (ctest fault_kv_test_kv_crash_ssd: the ssd engine, flushing often). */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../unit/kv/kvtest.h"

enum { ROUNDS = 30, GROUP_KEYS = 4 };

static void group_key(char *out, size_t cap, int g, int i) { snprintf(out, cap, "g/%08d/%d", g, i); }

/* Child: commit groups first..∞, one transaction each: keys g/N/0..3 = "N" and "last" = N (and,
 * every other commit, clear the previous group's key 3 and re-add it, a clear+set in one txn).
 * Write N to fd after each acknowledged commit. Never returns. */
static void child(const char *url, int first, int fd) {
    rl_db *db = NULL;
    if (rl_db_open(url, NULL, &db) != RL_OK) _exit(3);
    rl_txn *t;
    if (rl_txn_begin(db, &t) != RL_OK) _exit(4);
    for (int g = first;; g++) {
        char k[32], v[16];
        int vl = snprintf(v, sizeof v, "%d", g);
        for (int i = 0; i < GROUP_KEYS; i++) {
            group_key(k, sizeof k, g, i);
            if (rl_txn_set(t, k, strlen(k), v, (size_t)vl) != RL_OK) _exit(5);
        }
        if (rl_txn_set(t, "last", 4, v, (size_t)vl) != RL_OK) _exit(5);
        rl_future *f = rl_txn_commit(t);
        int rc = rl_future_wait(f);
        rl_future_free(f);
        if (rc != RL_OK) _exit(6);
        if (write(fd, &g, sizeof g) != (ssize_t)sizeof g) _exit(7);
        rl_txn_reset(t);
    }
}

/* Parent check: every group 1..acked is complete; every group present is complete; groups are
 * contiguous; "last" names the newest. Returns the newest group. */
static int verify(const char *url, int acked) {
    rl_db *db = NULL;
    int rc = rl_db_open(url, NULL, &db);
    if (rc) fail_msg("reopen: %s %s", rl_error_name(rc), rl_last_error_detail());
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("g/", 2), RL_FIRST_GREATER_OR_EQUAL("g0", 2), 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, 0);
    const rl_keyvalue *kvs;
    int n, more;
    (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
    if (n % GROUP_KEYS) fail_msg("%d group keys: a transaction is half applied", n);
    int groups = n / GROUP_KEYS;
    for (int g = 1; g <= groups; g++)
        for (int i = 0; i < GROUP_KEYS; i++) {
            char k[32], v[16];
            group_key(k, sizeof k, g, i);
            int vl = snprintf(v, sizeof v, "%d", g);
            const rl_keyvalue *kv = &kvs[(g - 1) * GROUP_KEYS + i];
            ASSERT_MEM_EQ(kv->key, kv->key_len, k, strlen(k));
            ASSERT_MEM_EQ(kv->value, kv->value_len, v, (size_t)vl);
        }
    if (groups < acked) fail_msg("acknowledged commit %d lost (only %d groups)", acked, groups);
    rl_future_free(f);
    char buf[16];
    int present = 0, len = 0;
    ASSERT_OK(kvt_get(t, "last", 4, 0, &present, buf, sizeof buf - 1, &len));
    if (groups) {
        ASSERT_TRUE(present);
        buf[len] = 0;
        ASSERT_EQ(atoi(buf), groups);
    }
    rl_txn_free(t);
    rl_db_close(db);
    return groups;
}

TEST(kv_8_1_crash_durability) {
    uint64_t rs = rl_test_seed();
    char *dir = rl_test_tmpdir("kvcrash");
    char url[4200];
    /* RL_TEST_FILE_OPTS: URL options, e.g. "?engine=ssd&checkpoint_bytes=8192" (ctest _ssd). */
    const char *fo = getenv("RL_TEST_FILE_OPTS");
    snprintf(url, sizeof url, "file:%s%s", dir, fo ? fo : "");
    int groups = 0, total_acked = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int fds[2];
        ASSERT_EQ(pipe(fds), 0);
        pid_t pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            child(url, groups + 1, fds[1]);
        }
        close(fds[1]);
        /* Let it run 5..300 ms, then kill -9. */
        uint64_t ms = 5 + rl_test_rand_below(&rs, 296);
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        if (!WIFSIGNALED(status)) fail_msg("child exited with %d", WEXITSTATUS(status));
        /* Every number that reached the pipe was acknowledged before the kill. */
        int acked = groups, g;
        while (read(fds[0], &g, sizeof g) == (ssize_t)sizeof g) acked = g;
        close(fds[0]);
        total_acked += acked - groups;
        groups = verify(url, acked);
    }
    printf("%d rounds, %d acknowledged commits, %d groups on disk\n", ROUNDS, total_acked, groups);
    ASSERT_TRUE(total_acked > 0);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(kv_8_1_crash_durability))
