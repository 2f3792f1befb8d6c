/* test_kv_async.c — kv-12: futures that complete later . Run on every backend
 * (RL_TEST_URL); on an asynchronous one (defer:mem:, cluster:) reads really are pending when the
 * test frees, resets or cancels around them, and callbacks run on the backend's thread. Under
 * ASan these tests are what proves a late completion never writes into reused memory.
 *
 *   kv_12_1  many reads in flight at once, completed in any order, each with its own result
 *   kv_12_2  futures freed while pending: no callback runs, their memory is reused safely
 *   kv_12_3  reset / free / cancel of a transaction with reads in flight: cancelled futures, and
 *            the transaction works again after a reset
 *   kv_12_4  callbacks: run once, after the result is readable; a callback may issue a read
 *   kv_12_5  a commit issued while reads are in flight waits for them: their conflict ranges count
 *   kv_12_6  on_error's future becomes ready after its backoff, without blocking the caller
 *
 * Seeded by rl_test_seed() (printed).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "kvtest.h"

static void key_of(int i, char *k) { snprintf(k, 16, "a%05d", i); }

static void fill(kvt_env *e, int n) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e->db, &t));
    for (int i = 0; i < n; i++) {
        char k[16], v[32];
        key_of(i, k);
        snprintf(v, sizeof v, "value-%d", i * 7);
        ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
    }
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
}

static void want_value(rl_future *f, int i) {
    ASSERT_OK(rl_future_wait(f));
    int present, len;
    const uint8_t *v;
    ASSERT_OK(rl_future_get_value(f, &present, &v, &len));
    char want[32];
    snprintf(want, sizeof want, "value-%d", i * 7);
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(v, len, want, strlen(want));
}

TEST(kv_12_1_many_in_flight) {
    kvt_env e;
    kvt_open(&e);
    fill(&e, 300);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    enum { N = 300 };
    rl_future *f[N], *r[N / 10];
    for (int i = 0; i < N; i++) {
        char k[16];
        key_of(i, k);
        f[i] = rl_txn_get(t, k, strlen(k), 0);
        if (i % 10 == 0) {
            char k2[16];
            key_of(i + 10 < N ? i + 10 : N, k2);
            r[i / 10] = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(k, strlen(k)),
                                         RL_FIRST_GREATER_OR_EQUAL(k2, strlen(k2)), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
        }
    }
    /* Wait in reverse order: completions come in whatever order the backend chose. */
    for (int i = N - 1; i >= 0; i--) want_value(f[i], i);
    for (int j = N / 10 - 1; j >= 0; j--) {
        ASSERT_OK(rl_future_wait(r[j]));
        const rl_keyvalue *kvs;
        int n, more;
        ASSERT_OK(rl_future_get_keyvalue_array(r[j], &kvs, &n, &more));
        ASSERT_EQ(n, 10);
        ASSERT_EQ(more, 0);
        char k[16];
        key_of(j * 10, k);
        ASSERT_MEM_EQ(kvs[0].key, kvs[0].key_len, k, strlen(k));
    }
    for (int i = 0; i < N; i++) rl_future_free(f[i]);
    for (int j = 0; j < N / 10; j++) rl_future_free(r[j]);
    rl_txn_free(t);
    kvt_close(&e);
}

/* A callback of a future being freed: it may run only if it started before rl_future_free
 * returned (free waits for a running callback); once free returned it must never start. */
static int cb_late; /* callbacks that started after their future's free returned (atomic) */
static int cb_calls;

static void count_cb(rl_future *f, void *ud) {
    (void)f;
    int *freed = ud;
    if (__atomic_load_n(freed, __ATOMIC_ACQUIRE)) __atomic_add_fetch(&cb_late, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&cb_calls, 1, __ATOMIC_RELAXED);
}

TEST(kv_12_2_freed_while_pending) {
    kvt_env e;
    kvt_open(&e);
    fill(&e, 100);
    uint64_t rs = rl_test_seed();
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    cb_calls = cb_late = 0;
    int registered = 0;
    static int freed[50][40];
    for (int round = 0; round < 50; round++) {
        /* Issue a burst, free a random half at once (maybe still pending), wait for the rest. */
        rl_future *f[40];
        int keep[40];
        for (int i = 0; i < 40; i++) {
            char k[16];
            key_of((int)rl_test_rand_below(&rs, 100), k);
            f[i] = rl_txn_get(t, k, strlen(k), 0);
            keep[i] = (int)rl_test_rand_below(&rs, 2);
            if (!keep[i]) {
                if (!rl_future_is_ready(f[i])) {
                    ASSERT_OK(rl_future_set_callback(f[i], count_cb, &freed[round][i]));
                    registered++;
                }
                rl_future_free(f[i]);
                __atomic_store_n(&freed[round][i], 1, __ATOMIC_RELEASE);
            }
        }
        for (int i = 0; i < 40; i++)
            if (keep[i]) {
                ASSERT_OK(rl_future_wait(f[i]));
                rl_future_free(f[i]);
            }
    }
    /* Anything still in flight ends with the transaction; then no callback may have run. */
    rl_txn_free(t);
    kvt_close(&e);
    printf("futures freed while pending with a callback: %d; callbacks that ran (started before "
           "the free): %d\n",
           registered, cb_calls);
    ASSERT_EQ(cb_late, 0);
    ASSERT_TRUE(cb_calls <= registered);
}

TEST(kv_12_3_reset_free_cancel_in_flight) {
    kvt_env e;
    kvt_open(&e);
    fill(&e, 50);
    for (int mode = 0; mode < 3; mode++) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(e.db, &t));
        rl_future *f[20];
        for (int i = 0; i < 20; i++) {
            char k[16];
            key_of(i, k);
            f[i] = rl_txn_get(t, k, strlen(k), 0);
        }
        if (mode == 0) rl_txn_reset(t);
        else if (mode == 1) rl_txn_cancel(t);
        else rl_txn_free(t);
        for (int i = 0; i < 20; i++) {
            int rc = rl_future_wait(f[i]);
            /* Either it completed before (RL_OK, the right value) or it was cancelled. */
            if (rc == RL_OK) want_value(f[i], i);
            else ASSERT_RC(rc, RL_E_TRANSACTION_CANCELLED);
            rl_future_free(f[i]);
        }
        if (mode == 2) continue;
        if (mode == 1) {
            rl_future *g = rl_txn_get(t, "a00001", 6, 0);
            ASSERT_RC(rl_future_wait(g), RL_E_TRANSACTION_CANCELLED);
            rl_future_free(g);
            rl_txn_reset(t);
        }
        /* Usable again after the reset. */
        rl_future *g = rl_txn_get(t, "a00003", 6, 0);
        want_value(g, 3);
        rl_future_free(g);
        ASSERT_OK(rl_txn_set(t, "zz", 2, "1", 1));
        ASSERT_OK(kvt_commit(t));
        rl_txn_free(t);
    }
    kvt_close(&e);
}

typedef struct {
    rl_txn *t;
    int calls;
    int saw_ready;
    rl_future *chained;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} chain_ctx;

/* A callback that checks its future and issues another read (it must not block). */
static void chain_cb(rl_future *f, void *ud) {
    chain_ctx *c = ud;
    pthread_mutex_lock(&c->mu);
    c->calls++;
    c->saw_ready = rl_future_is_ready(f) && rl_future_get_error(f) == RL_OK;
    c->chained = rl_txn_get(c->t, "a00002", 6, 0);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

TEST(kv_12_4_callbacks) {
    kvt_env e;
    kvt_open(&e);
    fill(&e, 10);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    chain_ctx c = {t, 0, 0, NULL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    rl_future *f = rl_txn_get(t, "a00001", 6, 0);
    ASSERT_OK(rl_future_set_callback(f, chain_cb, &c));
    /* Wait for the callback (not for f: the callback may run on another thread). */
    pthread_mutex_lock(&c.mu);
    uint64_t deadline = rl__clock_mono_ns() + 10ull * 1000000000ull;
    while (c.calls == 0 && rl__clock_mono_ns() < deadline) {
        pthread_mutex_unlock(&c.mu);
        rl__clock_sleep_us(1000);
        pthread_mutex_lock(&c.mu);
    }
    pthread_mutex_unlock(&c.mu);
    ASSERT_EQ(c.calls, 1);
    ASSERT_TRUE(c.saw_ready);
    want_value(f, 1);
    want_value(c.chained, 2);
    rl_future_free(c.chained);
    /* A callback set on a ready future runs at once, in this thread. */
    c.calls = 0;
    ASSERT_OK(rl_future_set_callback(f, chain_cb, &c));
    ASSERT_EQ(c.calls, 1);
    want_value(c.chained, 2);
    rl_future_free(c.chained);
    rl_future_free(f);
    rl_txn_free(t);
    kvt_close(&e);
}

TEST(kv_12_5_commit_waits_for_reads) {
    kvt_env e;
    kvt_open(&e);
    fill(&e, 10);
    /* t reads a00001 and commits at once (the read may still be in flight); u writes a00001 in
     * between t's read version and its commit: t must conflict, so its read's conflict range was
     * part of the commit. */
    for (int round = 0; round < 20; round++) {
        rl_txn *t, *u;
        ASSERT_OK(rl_txn_begin(e.db, &t));
        ASSERT_OK(rl_txn_begin(e.db, &u));
        rl_future *rv = rl_txn_get_read_version(t);
        ASSERT_OK(rl_future_wait(rv));
        rl_future_free(rv);
        ASSERT_OK(rl_txn_set(u, "a00001", 6, "changed", 7));
        ASSERT_OK(kvt_commit(u));
        rl_future *r = rl_txn_get(t, "a00001", 6, 0);
        ASSERT_OK(rl_txn_set(t, "other", 5, "x", 1));
        rl_future *c = rl_txn_commit(t);
        ASSERT_RC(rl_future_wait(c), RL_E_NOT_COMMITTED);
        ASSERT_OK(rl_future_wait(r)); /* the snapshot value, read at t's version */
        rl_future_free(r);
        rl_future_free(c);
        rl_txn_free(t);
        rl_txn_free(u);
        kvt_put(e.db, "a00001", "value-7", NULL); /* back to the model */
    }
    kvt_close(&e);
}

TEST(kv_12_6_on_error_later) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_MAX_RETRY_DELAY_MS, 200));
    /* Walk the backoff up so the delay is long enough to see. */
    for (int i = 0; i < 4; i++) {
        rl_future *f = rl_txn_on_error(t, RL_E_NOT_COMMITTED);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
    }
    uint64_t t0 = rl__clock_mono_ns();
    rl_future *f = rl_txn_on_error(t, RL_E_NOT_COMMITTED);
    uint64_t issued = rl__clock_mono_ns() - t0;
    int ready_at_once = rl_future_is_ready(f);
    ASSERT_OK(rl_future_wait(f));
    uint64_t waited = rl__clock_mono_ns() - t0;
    rl_future_free(f);
    printf("on_error: returned after %llu us, ready after %llu us\n", (unsigned long long)(issued / 1000),
           (unsigned long long)(waited / 1000));
    ASSERT_FALSE(ready_at_once);        /* the backoff (>= 40 ms here) runs after the call */
    ASSERT_TRUE(waited >= 40000000ull); /* half of the 80 ms backoff at least */
    /* The transaction was reset at once and works during the backoff. */
    ASSERT_OK(rl_txn_set(t, "k", 1, "v", 1));
    ASSERT_OK(kvt_commit(t));
    /* A non-retryable error is returned as it is, at once. */
    f = rl_txn_on_error(t, RL_E_KEY_TOO_LARGE);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_TOO_LARGE);
    rl_future_free(f);
    rl_txn_free(t);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_12_1_many_in_flight), T(kv_12_2_freed_while_pending), T(kv_12_3_reset_free_cancel_in_flight),
             T(kv_12_4_callbacks), T(kv_12_5_commit_waits_for_reads), T(kv_12_6_on_error_later))
