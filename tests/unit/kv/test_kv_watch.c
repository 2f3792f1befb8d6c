/* test_kv_watch.c — kv-15: watches (rl_txn_watch, docs/design.md §2 "Watches"). Run on every
 * backend (RL_TEST_URL: mem:, file:, file:?engine=ssd, defer:mem:, the clusters). A watch that
 * must not fire is checked against a barrier: a second watch, on a key written after the write
 * under test, fires first — a backend reports the changes of a key range in version order (the
 * embedded backend at the commit that applied them, a storage server as it applies them) — so the
 * first is still pending when the second is ready. Every wait is bounded (WAIT_MS).
 *
 *   kv_15_1  a change by another transaction fires the watch; the watch sees nothing before
 *   kv_15_2  a rewrite of the same value does not fire; a clear (a change) does
 *   kv_15_3  a change away and back fires: after the watch registered, and between the watching
 *            transaction's read version and its commit (the history)
 *   kv_15_4  the transaction's own writes: the value it wrote is the watch's; a later write of
 *            another value fires at once, before the commit
 *   kv_15_5  before the commit: reset, free and cancel give transaction_cancelled; a failed
 *            commit gives its error to the watch
 *   kv_15_6  rl_future_free cancels a registered watch and frees its place; too_many_watches at
 *            the database's limit (RL_DB_OPT_MAX_WATCHES), the option's bounds
 *   kv_15_7  refused watches: watches_disabled, key_outside_legal_range, key_too_large
 *   kv_15_8  many watches on a few keys, callbacks: each fires once, on the change of its key
 */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "kvtest.h"

#define WAIT_MS 20000

/* Wait until f is ready, at most ms; 1 when it is. */
static int wait_ready(rl_future *f, int ms) {
    uint64_t end = rl__clock_mono_ns() + (uint64_t)ms * 1000000u;
    while (!rl_future_is_ready(f)) {
        if (rl__clock_mono_ns() > end) return 0;
        rl__clock_sleep_us(1000);
    }
    return 1;
}

static void set1(rl_db *db, const char *k, const char *v) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    if (v) ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
    else ASSERT_OK(rl_txn_clear(t, k, strlen(k)));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
}

/* A committed watch of k (read-only transaction). */
static rl_future *watch1(rl_db *db, const char *k) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *w = rl_txn_watch(t, k, strlen(k));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    return w;
}

/* Fire a barrier watch on key b (written after whatever the caller checks): once it is ready,
 * every change written before it has been reported. */
static void barrier(rl_db *db, const char *b) {
    rl_future *w = watch1(db, b);
    set1(db, b, "barrier");
    if (!wait_ready(w, WAIT_MS)) fail_msg("the barrier watch on %s did not fire", b);
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
}

static void expect_fired(rl_future *w, const char *what) {
    if (!wait_ready(w, WAIT_MS)) fail_msg("%s: the watch did not fire within %d ms", what, WAIT_MS);
    ASSERT_OK(rl_future_get_error(w));
}

TEST(kv_15_1_fires_on_change) {
    kvt_env e;
    kvt_open(&e);
    set1(e.db, "w1/k", "a");
    rl_future *w = watch1(e.db, "w1/k");
    barrier(e.db, "w1/kb");
    ASSERT_FALSE(rl_future_is_ready(w));
    set1(e.db, "w1/k", "b");
    expect_fired(w, "a change");
    rl_future_free(w);
    /* An absent key: creating it is a change. */
    w = watch1(e.db, "w1/none");
    set1(e.db, "w1/none", "x");
    expect_fired(w, "creating the key");
    rl_future_free(w);
    kvt_close(&e);
}

TEST(kv_15_2_same_value_does_not_fire) {
    kvt_env e;
    kvt_open(&e);
    set1(e.db, "w2/k", "same");
    rl_future *w = watch1(e.db, "w2/k");
    set1(e.db, "w2/k", "same");
    barrier(e.db, "w2/kb");
    ASSERT_FALSE(rl_future_is_ready(w));
    set1(e.db, "w2/k", NULL); /* a clear is a change */
    expect_fired(w, "a clear");
    rl_future_free(w);
    /* Clearing an absent key changes nothing; a clear range over it does once it exists. */
    w = watch1(e.db, "w2/absent");
    set1(e.db, "w2/absent", NULL);
    barrier(e.db, "w2/absentb");
    ASSERT_FALSE(rl_future_is_ready(w));
    set1(e.db, "w2/absent", "now");
    expect_fired(w, "creating it");
    rl_future_free(w);
    w = watch1(e.db, "w2/absent");
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_clear_range(t, "w2/a", 4, "w2/b", 4));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    expect_fired(w, "a clear range");
    rl_future_free(w);
    kvt_close(&e);
}

TEST(kv_15_3_change_and_back) {
    kvt_env e;
    kvt_open(&e);
    set1(e.db, "w3/k", "A");
    rl_future *w = watch1(e.db, "w3/k");
    set1(e.db, "w3/k", "B");
    set1(e.db, "w3/k", "A");
    expect_fired(w, "A to B to A after the watch registered");
    rl_future_free(w);
    /* Between the read version and the commit: the registration finds B in the history. */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    kvt_expect(t, "w3/k", "A", 0);
    w = rl_txn_watch(t, "w3/k", 4);
    set1(e.db, "w3/k", "B");
    set1(e.db, "w3/k", "A");
    ASSERT_FALSE(rl_future_is_ready(w)); /* not registered before the commit */
    ASSERT_OK(kvt_commit(t));            /* read-only: nothing conflicts */
    rl_txn_free(t);
    expect_fired(w, "A to B to A between the read version and the commit");
    rl_future_free(w);
    kvt_close(&e);
}

TEST(kv_15_4_own_writes) {
    kvt_env e;
    kvt_open(&e);
    set1(e.db, "w4/k", "old");
    /* Written before the watch: the watch compares with the value written. */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set(t, "w4/k", 4, "mine", 4));
    rl_future *w = rl_txn_watch(t, "w4/k", 4);
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    set1(e.db, "w4/k", "mine");
    barrier(e.db, "w4/kb");
    ASSERT_FALSE(rl_future_is_ready(w));
    set1(e.db, "w4/k", "theirs");
    expect_fired(w, "another value after the own write");
    rl_future_free(w);
    /* Written after the watch, another value: fired at once, before the commit. */
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set(t, "w4/k", 4, "x", 1));
    w = rl_txn_watch(t, "w4/k", 4);
    ASSERT_OK(rl_txn_set(t, "w4/k", 4, "x", 1)); /* the same value: nothing */
    ASSERT_FALSE(rl_future_is_ready(w));
    ASSERT_OK(rl_txn_set(t, "w4/k", 4, "y", 1));
    ASSERT_TRUE(rl_future_is_ready(w));
    ASSERT_OK(rl_future_get_error(w));
    rl_future_free(w);
    rl_txn_free(t);
    /* A stored value written over after the watch: the commit is the change. */
    ASSERT_OK(rl_txn_begin(e.db, &t));
    kvt_expect(t, "w4/k", "theirs", 0);
    w = rl_txn_watch(t, "w4/k", 4);
    ASSERT_OK(rl_txn_set(t, "w4/k", 4, "again", 5));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    expect_fired(w, "the watching transaction's own later write");
    rl_future_free(w);
    kvt_close(&e);
}

TEST(kv_15_5_before_commit) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    rl_future *w = rl_txn_watch(t, "w5/k", 4);
    rl_txn_reset(t);
    ASSERT_TRUE(rl_future_is_ready(w));
    ASSERT_RC(rl_future_get_error(w), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(w);
    w = rl_txn_watch(t, "w5/k", 4);
    rl_txn_cancel(t);
    ASSERT_RC(rl_future_get_error(w), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(w);
    rl_txn_reset(t);
    w = rl_txn_watch(t, "w5/k", 4);
    rl_txn_free(t);
    ASSERT_RC(rl_future_get_error(w), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(w);
    /* A commit that fails (a conflict) fails its watches with its error. */
    rl_txn *a, *b;
    ASSERT_OK(rl_txn_begin(e.db, &a));
    ASSERT_OK(rl_txn_begin(e.db, &b));
    kvt_expect(a, "w5/c", NULL, 0);
    w = rl_txn_watch(a, "w5/k", 4);
    ASSERT_OK(rl_txn_set(a, "w5/x", 4, "1", 1));
    ASSERT_OK(rl_txn_set(b, "w5/c", 4, "1", 1));
    ASSERT_OK(kvt_commit(b));
    ASSERT_RC(kvt_commit(a), RL_E_NOT_COMMITTED);
    if (!wait_ready(w, WAIT_MS)) fail_msg("the failed commit's watch is pending");
    ASSERT_RC(rl_future_get_error(w), RL_E_NOT_COMMITTED);
    rl_future_free(w);
    rl_txn_free(a);
    rl_txn_free(b);
    kvt_close(&e);
}

TEST(kv_15_6_cancel_and_limit) {
    kvt_env e;
    kvt_open(&e);
    ASSERT_RC(rl_db_set_option(e.db, RL_DB_OPT_MAX_WATCHES, -1), RL_E_INVALID_OPTION_VALUE);
    ASSERT_RC(rl_db_set_option(e.db, RL_DB_OPT_MAX_WATCHES, 1000001), RL_E_INVALID_OPTION_VALUE);
    ASSERT_RC(rl_db_set_option(e.db, (rl_db_option)999, 1), RL_E_INVALID_OPTION);
    ASSERT_OK(rl_db_set_option(e.db, RL_DB_OPT_MAX_WATCHES, 2));
    rl_future *w1 = watch1(e.db, "w6/a");
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    rl_future *w2 = rl_txn_watch(t, "w6/b", 4); /* pending ones count too (FoundationDB's) */
    rl_future *w3 = rl_txn_watch(t, "w6/c", 4);
    ASSERT_TRUE(rl_future_is_ready(w3));
    ASSERT_RC(rl_future_get_error(w3), RL_E_TOO_MANY_WATCHES);
    rl_future_free(w3);
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    /* Cancelling a registered watch frees its place; its key's change then touches nothing. */
    rl_future_free(w1);
    rl_future *w4 = watch1(e.db, "w6/d");
    ASSERT_FALSE(rl_future_is_ready(w4));
    set1(e.db, "w6/a", "changed");
    /* A fired watch frees its place too. */
    set1(e.db, "w6/b", "changed");
    expect_fired(w2, "w6/b");
    rl_future *w5 = watch1(e.db, "w6/e");
    ASSERT_FALSE(rl_future_is_ready(w5));
    rl_future_free(w2);
    rl_future_free(w4);
    rl_future_free(w5);
    /* Limit 0: none at all. */
    ASSERT_OK(rl_db_set_option(e.db, RL_DB_OPT_MAX_WATCHES, 0));
    rl_future *w6 = watch1(e.db, "w6/f");
    ASSERT_RC(rl_future_get_error(w6), RL_E_TOO_MANY_WATCHES);
    rl_future_free(w6);
    kvt_close(&e);
}

TEST(kv_15_7_refused) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    rl_future *w = rl_txn_watch(t, "\xff/x", 3);
    ASSERT_RC(rl_future_get_error(w), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future_free(w);
    static char big[RL_KEY_SIZE_LIMIT + 1];
    memset(big, 'k', sizeof big);
    w = rl_txn_watch(t, big, sizeof big);
    ASSERT_RC(rl_future_get_error(w), RL_E_KEY_TOO_LARGE);
    rl_future_free(w);
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_READ_YOUR_WRITES_DISABLE, 1));
    w = rl_txn_watch(t, "w7/k", 4);
    ASSERT_RC(rl_future_get_error(w), RL_E_WATCHES_DISABLED);
    rl_future_free(w);
    rl_txn_free(t);
    kvt_close(&e);
}

typedef struct {
    int calls;
    int err;
} cb_count;

static void on_fire(rl_future *f, void *ud) {
    cb_count *c = ud;
    c->err = rl_future_get_error(f);
    __atomic_add_fetch(&c->calls, 1, __ATOMIC_RELEASE);
}

TEST(kv_15_8_many) {
    enum { N = 40, KEYS = 4 };
    kvt_env e;
    kvt_open(&e);
    rl_future *w[N];
    cb_count c[N];
    memset(c, 0, sizeof c);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "w8/%d", i % KEYS);
        w[i] = rl_txn_watch(t, k, strlen(k));
        ASSERT_OK(rl_future_set_callback(w[i], on_fire, &c[i]));
    }
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    set1(e.db, "w8/0", "x");
    for (int i = 0; i < N; i += KEYS) expect_fired(w[i], "w8/0");
    for (int i = 0; i < N; i++)
        if (i % KEYS) ASSERT_FALSE(rl_future_is_ready(w[i])); /* w8/0 was written last */
    for (int i = 0; i < N; i += KEYS) {
        uint64_t end = rl__clock_mono_ns() + (uint64_t)WAIT_MS * 1000000u;
        while (!__atomic_load_n(&c[i].calls, __ATOMIC_ACQUIRE) && rl__clock_mono_ns() < end) rl__clock_sleep_us(1000);
        ASSERT_EQ(__atomic_load_n(&c[i].calls, __ATOMIC_ACQUIRE), 1);
        ASSERT_OK(c[i].err);
    }
    for (int i = 0; i < N; i++) rl_future_free(w[i]); /* the rest are cancelled */
    for (int i = 0; i < N; i++)
        if (i % KEYS) ASSERT_EQ(__atomic_load_n(&c[i].calls, __ATOMIC_ACQUIRE), 0);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_15_1_fires_on_change), T(kv_15_2_same_value_does_not_fire), T(kv_15_3_change_and_back),
             T(kv_15_4_own_writes), T(kv_15_5_before_commit), T(kv_15_6_cancel_and_limit), T(kv_15_7_refused),
             T(kv_15_8_many))
