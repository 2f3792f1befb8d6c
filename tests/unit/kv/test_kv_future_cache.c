/* test_kv_future_cache.c — kv_11: the per-thread cache of freed futures keeps their result
 * arenas (src/kv/future.c, invariant 6): reads of 100,000-byte values allocate no large block
 * once warm; results of futures alive at the same time never share memory, whatever the order
 * futures were freed and recycled in, with more futures than the cache holds and more bytes than
 * its budget; a thread that used the cache and exits frees it (ASan/LSan would report a leak).
 *
 * Test IDs: kv_11_*. Seeded by rl_test_seed() (printed).
 */
#include <pthread.h>

#include "kvtest.h"
#include "reclayer/alloc.h"

#define BIG 100000 /* the value size limit */
#define N_KEYS 100 /* 10 MB of values: more than the cache's 8 MiB budget */

/* Byte j of key i's value. */
static uint8_t pat(int i, size_t j) { return (uint8_t)(i * 131 + (int)(j * 7) + (int)(j >> 9)); }

static void key_of(int i, char *k) { snprintf(k, 16, "big%04d", i); }

static void load(rl_db *db) {
    uint8_t *v = malloc(BIG);
    char k[16];
    for (int i = 0; i < N_KEYS;) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(db, &t));
        for (int j = 0; j < 20 && i < N_KEYS; j++, i++) {
            for (size_t b = 0; b < BIG; b++) v[b] = pat(i, b);
            key_of(i, k);
            ASSERT_OK(rl_txn_set(t, k, strlen(k), v, BIG));
        }
        ASSERT_OK(kvt_commit(t));
        rl_txn_free(t);
    }
    free(v);
}

/* The value of future f (a get of key i) is key i's, byte for byte. */
static void check_value(rl_future *f, int i) {
    int present, len;
    const uint8_t *v;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_value(f, &present, &v, &len));
    ASSERT_TRUE(present);
    ASSERT_EQ(len, BIG);
    for (size_t b = 0; b < BIG; b++)
        if (v[b] != pat(i, b)) fail_msg("key %d: byte %zu differs", i, b);
}

/* kv_11_1: gets and one-key range reads of 100,000-byte values, warm, allocate no large block
 * (before: one 100 KB arena block per read, freed with the future). */
TEST(kv_11_1_big_reads_reuse_future_arenas) {
    kvt_env e;
    kvt_open(&e);
    load(e.db);
    char k[16];
    for (int round = 0; round < 2; round++) {
        rl_alloc_stats a0, a1;
        rl_alloc_get_stats(&a0);
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(e.db, &t));
        for (int i = 0; i < 10; i++) {
            key_of(i, k);
            rl_future *f = rl_txn_get(t, k, strlen(k), 0);
            check_value(f, i);
            rl_future_free(f);
            char ke[24];
            snprintf(ke, sizeof ke, "%s\x01", k);
            f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(k, strlen(k)), RL_FIRST_GREATER_OR_EQUAL(ke, strlen(ke)),
                                 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
            const rl_keyvalue *kvs;
            int n, more;
            ASSERT_OK(rl_future_wait(f));
            ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
            ASSERT_EQ(n, 1);
            ASSERT_EQ(kvs[0].value_len, BIG);
            ASSERT_EQ(kvs[0].value[BIG - 1], pat(i, BIG - 1));
            rl_future_free(f);
        }
        rl_txn_free(t);
        rl_alloc_get_stats(&a1);
        if (round == 1 && a1.bytes - a0.bytes > 64 * 1024)
            fail_msg("%llu bytes allocated for 20 warm reads", (unsigned long long)(a1.bytes - a0.bytes));
    }
    kvt_close(&e);
}

/* kv_11_2: many futures alive at once (more than the cache holds, more bytes than its budget),
 * freed in a seeded order and recycled: every value stays intact while its future lives. */
TEST(kv_11_2_live_futures_never_share) {
    kvt_env e;
    uint64_t rs = rl_test_seed();
    kvt_open(&e);
    load(e.db);
    static rl_future *fs[N_KEYS];
    int order[N_KEYS];
    char k[16];
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (int round = 0; round < 4; round++) {
        int n = round == 0 ? N_KEYS : 5 + (int)rl_test_rand_below(&rs, N_KEYS - 5);
        for (int i = 0; i < n; i++) {
            key_of(i, k);
            fs[i] = rl_txn_get(t, k, strlen(k), 0);
            ASSERT_OK(rl_future_wait(fs[i]));
        }
        for (int i = 0; i < n; i++) check_value(fs[i], i);
        for (int i = 0; i < n; i++) order[i] = i;
        for (int i = n - 1; i > 0; i--) {
            int j = (int)rl_test_rand_below(&rs, (uint64_t)i + 1), x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        /* Free half, read again into recycled futures, check everything alive. */
        for (int i = 0; i < n / 2; i++) {
            rl_future_free(fs[order[i]]);
            fs[order[i]] = NULL;
        }
        for (int i = 0; i < n / 2; i++) {
            int x = order[i];
            key_of(x, k);
            fs[x] = rl_txn_get(t, k, strlen(k), 0);
        }
        for (int i = 0; i < n; i++) check_value(fs[i], i);
        for (int i = 0; i < n; i++) rl_future_free(fs[order[i]]);
    }
    rl_txn_free(t);
    kvt_close(&e);
}

typedef struct {
    rl_db *db;
    int rc;
} reader_arg;

static void *reader(void *p) {
    reader_arg *a = p;
    rl_txn *t;
    char k[16];
    if ((a->rc = rl_txn_begin(a->db, &t))) return NULL;
    for (int i = 0; i < 40 && !a->rc; i++) {
        key_of(i % 7, k);
        rl_future *f = rl_txn_get(t, k, strlen(k), 0);
        int present = 0, len = 0;
        const uint8_t *v = NULL;
        (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
        if (!(a->rc = rl_future_get_value(f, &present, &v, &len)) && (!present || len != BIG || v[5] != pat(i % 7, 5)))
            a->rc = RL_E_INTERNAL_ERROR;
        rl_future_free(f);
    }
    rl_txn_free(t);
    return NULL;
}

/* kv_11_3: threads that fill their own caches with big futures and exit: right values, and the
 * caches are freed at thread exit (a leak here is reported by the ASan build). */
TEST(kv_11_3_thread_exit_frees_cache) {
    kvt_env e;
    kvt_open(&e);
    load(e.db);
    pthread_t th[3];
    reader_arg args[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (reader_arg){e.db, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, reader, &args[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(pthread_join(th[i], NULL), 0);
        ASSERT_OK(args[i].rc);
    }
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_11_1_big_reads_reuse_future_arenas), T(kv_11_2_live_futures_never_share),
             T(kv_11_3_thread_exit_frees_cache))
