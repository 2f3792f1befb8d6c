/* test_sample.c — the byte sample (src/storage/sample.h): its ordered map against a plain
 * array model under random puts, notes and range clears (chunk splits and merges included), its
 * sums and split points, the membership rule, and the engine's sample through apply, a
 * checkpoint reload and the ssd engine's rebuild. */
#include <stdlib.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "storage/sample.h"
#include "storage/storage.h"
#include "test.h"

#define NK 3000 /* the model's keyspace: "k%05u" */

static void mkey(uint32_t i, char *k) { snprintf(k, 8, "k%05u", i); }

/* The number of key "k%05u" (6 bytes, not NUL-terminated). */
static uint32_t knum(const rl_slice *k) {
    uint32_t x = 0;
    for (size_t i = 1; i < k->len; i++) x = x * 10 + (uint32_t)(k->data[i] - '0');
    return x;
}

static int64_t model_sum(const int64_t *w, uint32_t lo, uint32_t hi) {
    int64_t s = 0;
    for (uint32_t i = lo; i < hi && i < NK; i++) s += w[i];
    return s;
}

/* sample-1.1: random puts, drops and range clears against an array of weights; every sum over
 * random ranges matches, and the split points keep their contract. */
TEST(sample_1_1_model) {
    uint64_t rng = rl_test_seed();
    static int64_t w[NK];
    memset(w, 0, sizeof w);
    rl__bsample s;
    rl__bsample_init(&s);
    char k[8], e[8];
    for (int round = 0; round < 40000; round++) {
        uint32_t i = (uint32_t)rl_test_rand_below(&rng, NK);
        mkey(i, k);
        uint64_t op = rl_test_rand_below(&rng, 100);
        if (op < 70) { /* put or reweigh */
            int64_t x = 1 + (int64_t)rl_test_rand_below(&rng, 50000);
            ASSERT_OK(rl__bsample_put(&s, (const uint8_t *)k, 6, x));
            w[i] = x;
        } else if (op < 95) { /* drop through note: present at a sampled size, then absent */
            if (w[i]) {
                ASSERT_OK(rl__bsample_note(&s, (const uint8_t *)k, 6, 1, 1u << 30, 0, 0)); /* p = 1 before */
                w[i] = 0;
            }
        } else { /* a range clear of up to 200 keys */
            uint32_t j = i + (uint32_t)rl_test_rand_below(&rng, 200);
            mkey(j, e);
            rl__bsample_clear_range(&s, (const uint8_t *)k, 6, (const uint8_t *)e, 6);
            for (uint32_t x = i; x < j && x < NK; x++) w[x] = 0;
        }
        if (round % 500 == 0) {
            uint32_t a = (uint32_t)rl_test_rand_below(&rng, NK), b = a + (uint32_t)rl_test_rand_below(&rng, NK);
            mkey(a, k);
            mkey(b < NK ? b : NK, e);
            ASSERT_EQ(rl__bsample_sum(&s, (const uint8_t *)k, 6, (const uint8_t *)e, 6), model_sum(w, a, b));
            ASSERT_EQ(rl__bsample_sum(&s, (const uint8_t *)"", 0, NULL, 0), model_sum(w, 0, NK));
            ASSERT_EQ(s.total, model_sum(w, 0, NK));
        }
    }
    /* Split points: ascending, inside (b, e), each chunk but the last within (chunk - max, chunk]. */
    rl_arena a;
    rl__arena_init(&a, 4096);
    const int64_t chunk = 400000;
    rl_slice *cuts;
    int n;
    mkey(100, k);
    mkey(2900, e);
    ASSERT_OK(rl__bsample_split(&s, (const uint8_t *)k, 6, (const uint8_t *)e, 6, chunk, &a, &cuts, &n));
    ASSERT_TRUE(n > 0);
    uint32_t prev = 100;
    for (int c = 0; c <= n; c++) {
        uint32_t at = c < n ? knum(&cuts[c]) : 2900;
        ASSERT_TRUE(at > prev);
        int64_t sum = model_sum(w, prev, at);
        ASSERT_TRUE(sum <= chunk || c == n || w[prev] > chunk);
        if (c < n) ASSERT_TRUE(sum + w[at] > chunk);
        prev = at;
    }
    /* chunk <= 0 and an empty range give no cuts. */
    ASSERT_OK(rl__bsample_split(&s, (const uint8_t *)k, 6, (const uint8_t *)e, 6, 0, &a, &cuts, &n));
    ASSERT_EQ(n, 0);
    ASSERT_OK(rl__bsample_split(&s, (const uint8_t *)e, 6, (const uint8_t *)k, 6, 10, &a, &cuts, &n));
    ASSERT_EQ(n, 0);
    rl__arena_release(&a);
    rl__bsample_release(&s);
    ASSERT_EQ(s.count, 0);
}

/* sample-1.2: membership: a pair of at least D = 250 * (key + 100) bytes is always in with its
 * size; smaller pairs weigh D when in, and about size / D of them are in. */
TEST(sample_1_2_membership) {
    ASSERT_EQ(rl__bsample_weight((const uint8_t *)"key", 3, 25750), 25753);
    ASSERT_EQ(rl__bsample_weight((const uint8_t *)"key", 3, 90000), 90003);
    int in = 0;
    char k[16];
    for (int i = 0; i < 100000; i++) {
        snprintf(k, sizeof k, "x%07d", i);                           /* 8 bytes: D = 27,000 */
        int64_t x = rl__bsample_weight((const uint8_t *)k, 8, 2692); /* size 2,700: p = 0.1 */
        ASSERT_TRUE(x == 0 || x == 27000);
        in += x != 0;
    }
    ASSERT_TRUE(in > 9000 && in < 11000); /* 10,000 expected; sd 95 */
}

/* sample-1.3: the engine keeps the sample through apply (sets, overwrites, clears, range clears,
 * atomic operations), and a reopen rebuilds the same sample (memory: checkpoint plus log; ssd:
 * LMDB plus log). */
TEST(sample_1_3_engine) {
    for (int engine = RL_ENGINE_MEMORY; engine <= RL_ENGINE_SSD; engine++) {
        char *dir = rl_test_tmpdir("sample");
        rl__storage_options o = {.engine = engine, .dir = dir, .no_sync = 1, .checkpoint_log_bytes = 65536};
        rl__storage *st;
        ASSERT_OK(rl__storage_open(&o, &st, NULL));
        uint64_t rng = rl_test_seed();
        static uint8_t val[3000];
        rl__version v = 1;
        char k[16];
        for (int batch = 0; batch < 40; batch++) {
            rl__mutation m[100];
            for (int j = 0; j < 100; j++) {
                snprintf(k, sizeof k, "s%06d", (int)rl_test_rand_below(&rng, 4000));
                uint8_t *kc = rl__malloc(8);
                memcpy(kc, k, 8);
                memset(&m[j], 0, sizeof m[j]);
                m[j].p1 = kc;
                m[j].len1 = 8;
                uint64_t op = rl_test_rand_below(&rng, 10);
                if (op < 7) {
                    m[j].type = RL_MUT_SET;
                    m[j].p2 = val;
                    m[j].len2 = 100 + (uint32_t)rl_test_rand_below(&rng, 2900);
                } else if (op < 9) {
                    m[j].type = RL_MUT_CLEAR;
                } else {
                    m[j].type = RL_MUT_APPEND_IF_FITS;
                    m[j].p2 = val;
                    m[j].len2 = 500;
                }
            }
            if (batch == 20) { /* one range clear */
                m[0].type = RL_MUT_CLEAR_RANGE;
                m[0].p2 = (const uint8_t *)"s002000";
                m[0].len2 = 7;
            }
            ASSERT_OK(rl__storage_apply(st, v++, m, 100));
            for (int j = 0; j < 100; j++) rl__free((void *)m[j].p1);
        }
        ASSERT_OK(rl__storage_sync(st));
        /* The sample equals one built from scratch over the data at latest. */
        rl_arena a;
        rl__arena_init(&a, 1 << 16);
        rl_keyvalue *kvs;
        int n, more;
        ASSERT_OK(rl__storage_get_range(st, v - 1, "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more));
        rl__bsample fresh;
        rl__bsample_init(&fresh);
        for (int i = 0; i < n; i++) {
            int64_t x = rl__bsample_weight(kvs[i].key, kvs[i].key_len, kvs[i].value_len);
            if (x) ASSERT_OK(rl__bsample_put(&fresh, kvs[i].key, kvs[i].key_len, x));
        }
        uint64_t cnt;
        int64_t tot, est;
        rl__storage_sample_stats(st, &cnt, &tot);
        ASSERT_EQ(cnt, fresh.count);
        ASSERT_EQ(tot, fresh.total);
        ASSERT_TRUE(cnt > 0);
        ASSERT_OK(rl__storage_estimate_bytes(st, "s001000", 7, "s003000", 7, &est));
        ASSERT_EQ(est, rl__bsample_sum(&fresh, (const uint8_t *)"s001000", 7, (const uint8_t *)"s003000", 7));
        rl__storage_close(st);
        ASSERT_OK(rl__storage_open(&o, &st, NULL));
        uint64_t cnt2;
        int64_t tot2;
        rl__storage_sample_stats(st, &cnt2, &tot2);
        ASSERT_EQ(cnt2, cnt);
        ASSERT_EQ(tot2, tot);
        rl__storage_close(st);
        rl__bsample_release(&fresh);
        rl__arena_release(&a);
        rl_test_rmtree(dir);
        free(dir);
    }
}

RL_TEST_MAIN(T(sample_1_1_model), T(sample_1_2_membership), T(sample_1_3_engine))
