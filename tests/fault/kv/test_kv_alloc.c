/* test_kv_alloc.c — allocation failures through the KV API: the Nth allocation of a scripted
 * session (open, writes of every kind, reads of every kind, commit, versionstamp) fails, for every
 * N the session makes. Each call must return RL_OK or RL_E_OUT_OF_MEMORY (or, when the failure hit
 * the commit sink, which poisons the committer, RL_E_COMMIT_UNKNOWN_RESULT for that commit and
 * RL_E_OUT_OF_MEMORY after), never crash or leak (run under the sanitizer build), and the database
 * must stay readable afterwards. */
#include "reclayer/alloc.h"
#include "../../unit/kv/kvtest.h"

static int ok_or_oom(int rc) {
    if (rc != RL_OK && rc != RL_E_OUT_OF_MEMORY && rc != RL_E_COMMIT_UNKNOWN_RESULT)
        fail_msg("unexpected %s under allocation failure", rl_error_name(rc));
    return rc;
}

/* One session; returns the first failure (or RL_OK). */
static int session(rl_db *db) {
    rl_txn *t = NULL;
    rl_future *f = NULL, *vs = NULL;
    int rc = ok_or_oom(rl_txn_begin(db, &t));
    if (rc) return rc;
    for (int i = 0; i < 40 && rc == RL_OK; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "key%03d", i);
        rc = ok_or_oom(rl_txn_set(t, k, (size_t)kl, "value", 5));
    }
    if (rc == RL_OK) rc = ok_or_oom(rl_txn_clear_range(t, "key010", 6, "key020", 6));
    if (rc == RL_OK) rc = ok_or_oom(rl_txn_clear(t, "key030", 6));
    if (rc == RL_OK) rc = ok_or_oom(rl_txn_atomic_op(t, "ctr", 3, "\x01\x00", 2, RL_ATOMIC_ADD));
    if (rc == RL_OK) rc = ok_or_oom(rl_txn_atomic_op(t, "key015", 6, "\x01", 1, RL_ATOMIC_ADD));
    if (rc == RL_OK) {
        f = rl_txn_get(t, "key015", 6, 0);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) {
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("key", 3), RL_FIRST_GREATER_OR_EQUAL("kez", 3), 7, 0,
                             RL_STREAMING_WANT_ALL, 0, RL_REVERSE);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) {
        f = rl_txn_get_key(t, RL_LAST_LESS_THAN("key025", 6), 0);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
    }
    if (rc == RL_OK) {
        vs = rl_txn_get_versionstamp(t);
        f = rl_txn_commit(t);
        rc = ok_or_oom(rl_future_wait(f));
        rl_future_free(f);
        int vrc = rl_future_wait(vs);
        if (rc == RL_OK) ok_or_oom(vrc);
        rl_future_free(vs);
    }
    if (rc == RL_OK) {
        char *js = NULL;
        rc = ok_or_oom(rl_db_status_json(db, &js));
        rl_free(js);
    }
    rl_txn_free(t);
    return rc;
}

/* The database answers a fresh read after the session (OOM injection off). */
static void still_readable(rl_db *db) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    int present, len;
    char buf[16];
    ASSERT_OK(kvt_get(t, "key001", 6, 0, &present, buf, sizeof buf, &len));
    rl_txn_free(t);
}

TEST(kv_9_1_alloc_failures) {
    /* Count the allocations of a clean session. */
    kvt_env e;
    kvt_open(&e);
    rl_alloc_stats a, b;
    rl_alloc_get_stats(&a);
    ASSERT_OK(session(e.db));
    rl_alloc_get_stats(&b);
    kvt_close(&e);
    long n = (long)(b.allocs - a.allocs);
    ASSERT_TRUE(n > 10);
    int failures = 0;
    for (long i = 0; i <= n; i++) {
        kvt_open(&e);
        rl_alloc_fail_after(i);
        int rc = session(e.db);
        rl_alloc_fail_after(-1);
        failures += rc != RL_OK;
        still_readable(e.db);
        kvt_close(&e);
    }
    printf("%ld allocations in a session, %d sessions failed cleanly\n", n, failures);
    ASSERT_TRUE(failures > 0);
    /* Opening under allocation failure. */
    for (long i = 0; i < 60; i++) {
        rl_db *db = NULL;
        rl_alloc_fail_after(i);
        int rc = rl_db_open("mem:", NULL, &db);
        rl_alloc_fail_after(-1);
        ok_or_oom(rc);
        if (rc) ASSERT_NULL(db);
        rl_db_close(db);
    }
}

RL_TEST_MAIN(T(kv_9_1_alloc_failures))
