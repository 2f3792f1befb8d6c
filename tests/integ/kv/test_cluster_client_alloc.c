/* test_cluster_client_alloc.c — cluster_alloc_*: allocation failures in the cluster client. A
 * scripted session (open, writes, every kind of read across two storage servers, commit, status)
 * runs with the calling thread's Nth allocation failing, for every N the session makes (the
 * application thread's side of the client: request blocks, connections, the pending table,
 * encoding, posts, waiters). Every call returns RL_OK or RL_E_OUT_OF_MEMORY (an open may say so
 * too), nothing crashes, hangs or leaks (run it in the sanitizer build), and the database answers
 * correctly afterwards. */
#include "cluster_procs.h"
#include "reclayer/alloc.h"

static const char *const split_m[] = {"m"};

static int ok_or_oom(int rc) {
    if (rc != RL_OK && rc != RL_E_OUT_OF_MEMORY)
        fail_msg("unexpected %s (%d) under allocation failure", rl_error_name(rc), rc);
    return rc;
}

/* One session on a fresh db handle; returns the first failure (or RL_OK). */
static int session(const char *url, int write) {
    rl_db *db = NULL;
    int rc = ok_or_oom(rl_db_open(url, NULL, &db));
    if (rc) return rc;
    rl_txn *t = NULL;
    rl_future *f = NULL;
    rc = ok_or_oom(rl_txn_begin(db, &t));
    for (int i = 0; rc == RL_OK && write && i < 20; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "%ckey%03d", i % 2 ? 'a' : 'x', i);
        rc = ok_or_oom(rl_txn_set(t, k, (size_t)kl, "value", 5));
    }
    if (rc == RL_OK) {
        f = rl_txn_get(t, "akey001", 7, 0);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) { /* across both servers, reverse, with a limit */
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("z", 1), 15, 0,
                             RL_STREAMING_WANT_ALL, 0, RL_REVERSE);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) { /* a selector walking across the boundary */
        f = rl_txn_get_key(t, (rl_key_selector){(const uint8_t *)"akey005", 7, 0, 9}, RL_SNAPSHOT);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) { /* the fallback: the end selector is resolved on the other server */
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("a", 1),
                             (rl_key_selector){(const uint8_t *)"akey011", 7, 0, 6}, 0, 0, RL_STREAMING_WANT_ALL, 0,
                             RL_SNAPSHOT);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) {
        f = rl_txn_commit(t);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) {
        char *js = NULL;
        rc = ok_or_oom(rl_db_status_json(db, &js));
        rl_free(js);
    }
    rl_txn_free(t);
    rl_db_close(db);
    return rc;
}

/* The data is there and right (injection off). */
static void check_data(const char *url) {
    rl_db *db;
    ASSERT_OK(rl_db_open(url, NULL, &db));
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("", 0), RL_FIRST_GREATER_OR_EQUAL("\xff", 1), 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, 0);
    ASSERT_OK(rl_future_wait(f));
    const rl_keyvalue *kv;
    int n, more;
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kv, &n, &more));
    ASSERT_EQ(n, 20);
    ASSERT_FALSE(more);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
}

/* cluster-alloc-1.1: the application thread's Nth allocation fails, for every N of the session
 * (writing, then read-only sessions over the written data). */
TEST(cluster_alloc_1_1_sweep) {
    static cp_cluster c; /* static: the exit hook can still stop it after a failed assertion */
    cp_start(&c, 2, split_m, 1, 1);
    for (int write = 1; write >= 0; write--) {
        rl_alloc_stats a, b;
        rl_alloc_get_stats(&a);
        ASSERT_OK(session(c.url, write));
        rl_alloc_get_stats(&b);
        long total = (long)(b.allocs - a.allocs);
        printf("session (write %d) makes %ld allocations on the calling thread\n", write, total);
        ASSERT_TRUE(total > 20);
        int failures = 0;
        for (long n = 0; n < total + 5; n++) {
            rl_alloc_fail_after(n);
            int rc = session(c.url, write);
            rl_alloc_fail_after(-1);
            failures += rc != RL_OK;
        }
        printf("  %d of %ld sessions saw out_of_memory\n", failures, total + 5);
        ASSERT_TRUE(failures > 0);
        check_data(c.url);
    }
    cp_stop(&c);
}

RL_TEST_MAIN(T(cluster_alloc_1_1_sweep))
