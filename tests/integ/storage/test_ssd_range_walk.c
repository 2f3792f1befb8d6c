/* test_ssd_range_walk.c — the ssd engine's range reads off LMDB's leaf pages (ssd.c, "range reads
 * off LMDB's leaf pages") against the memory engine as the model. 12,000 keys are loaded into an
 * ssd store and a mem: store and flushed to LMDB: mostly short keys with values of 0 to 300 bytes
 * (many rows per leaf page), some with 3,000-byte values (on LMDB overflow pages: the walk hands
 * them to the cursor), keys at the 480/481-byte boundary and groups of long keys sharing a
 * 600-byte prefix (read through the cursor's groups), the empty key, and cleared keys. Then random
 * ranges (both directions, limits, byte targets, bounds on and between keys) must return the
 * same rows and `more` on both, first with the window empty (every range is read by the walk),
 * then with some rows changed in the window (ranges that touch them merge instead), then after a
 * reopen with RL_SSD_PAGE_WALK=0 (the cursor alone). The walk must have read pages and never
 * turned itself off. Seed printed; RL_TEST_SEED overrides. ssd-5.1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/bytes.h"
#include "reclayer/error.h"
#include "storage/ssd.h"
#include "storage/storage.h"
#include "test.h"

#define NKEYS 12000
#define MAXK 2048
#define MAXV 3000

static rl__storage *open_store(const char *dir) {
    rl__storage_options o = {0};
    rl__storage *st = NULL;
    o.engine = dir ? RL_ENGINE_SSD : RL_ENGINE_AUTO;
    o.dir = dir;
    o.no_sync = 1;
    o.window_versions = 2;
    o.checkpoint_log_bytes = 4u << 20;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    return st;
}

/* Key i: "w%05d" mostly; every 97th at the 480/481-byte boundary; every 41st one of a group of
 * long keys sharing 600 bytes (its tail orders it); key 0 is the empty key. */
static size_t make_key(int i, uint8_t *out) {
    if (i == 0) return 0;
    size_t n = (size_t)snprintf((char *)out, 16, "w%05d", i);
    if (i % 97 == 5) {
        size_t want = 480 + (size_t)(i / 97) % 2;
        memset(out + n, 'm', want - n);
        return want;
    }
    if (i % 41 == 3) {
        memset(out + n, 'p', 600 - n);
        return 600 + (size_t)snprintf((char *)out + 600, 16, "%d", i % 7);
    }
    return n;
}

/* Value of key i at round r: 0-300 bytes, every 53rd 3,000 bytes. */
static size_t make_val(int i, int r, uint8_t *out) {
    size_t n = i % 53 == 7 ? MAXV : (size_t)((i * 7 + r * 13) % 301);
    for (size_t j = 0; j < n; j++) out[j] = (uint8_t)(i + r + j);
    return n;
}

static void cmp_range(rl__storage *a, rl__storage *b, const uint8_t *bk, size_t bl, const uint8_t *ek, size_t el,
                      int limit, long target, int reverse, rl_arena *ar, uint64_t seed) {
    rl_keyvalue *ka, *kb;
    int na, nb, ma, mb;
    rl__version v = rl__storage_latest_version(a);
    ASSERT_OK(rl__storage_get_range(a, v, bk, bl, ek, el, limit, target, reverse, ar, &ka, &na, &ma));
    ASSERT_OK(rl__storage_get_range(b, v, bk, bl, ek, el, limit, target, reverse, ar, &kb, &nb, &mb));
    if (na != nb || ma != mb)
        fail_msg("seed %llu: range [%zu bytes, %zu bytes) limit %d target %ld reverse %d: ssd %d "
                 "rows more %d, model %d more %d",
                 (unsigned long long)seed, bl, el, limit, target, reverse, na, ma, nb, mb);
    for (int i = 0; i < na; i++)
        if (rl__bytes_cmp(ka[i].key, ka[i].key_len, kb[i].key, kb[i].key_len) != 0 ||
            ka[i].value_len != kb[i].value_len ||
            (ka[i].value_len && memcmp(ka[i].value, kb[i].value, ka[i].value_len) != 0))
            fail_msg("seed %llu: range row %d of %d differs (reverse %d)", (unsigned long long)seed, i, na, reverse);
}

/* A bound: a key of the key space, a prefix of one (between keys), or the ends. */
static size_t make_bound(uint64_t *rs, uint8_t *out) {
    int kind = (int)rl_test_rand_below(rs, 10);
    if (kind == 0) return 0;
    if (kind == 1) {
        out[0] = 0xff;
        return 1;
    }
    size_t n = make_key((int)rl_test_rand_below(rs, NKEYS), out);
    if (kind == 2 && n > 2) n -= 1 + rl_test_rand_below(rs, n - 1); /* a prefix: between keys */
    if (kind == 3) out[n++] = 0;                                    /* just after the key */
    return n;
}

static void random_ranges(rl__storage *s, rl__storage *m, uint64_t *rs, int n, uint64_t seed) {
    static const int limits[] = {0, 0, 1, 2, 7, 33, 1000, 5000};
    static const long targets[] = {0, 0, 0, 1, 500, 20000};
    uint8_t *k1 = malloc(MAXK), *k2 = malloc(MAXK);
    rl_arena ar;
    rl__arena_init(&ar, 0);
    for (int q = 0; q < n; q++) {
        size_t l1 = make_bound(rs, k1), l2 = make_bound(rs, k2);
        int c = rl__bytes_cmp(k1, l1, k2, l2);
        if (c == 0) continue;
        uint8_t *b = c < 0 ? k1 : k2, *e = c < 0 ? k2 : k1;
        size_t bl = c < 0 ? l1 : l2, el = c < 0 ? l2 : l1;
        int limit = limits[rl_test_rand_below(rs, sizeof limits / sizeof limits[0])];
        long target = targets[rl_test_rand_below(rs, sizeof targets / sizeof targets[0])];
        cmp_range(s, m, b, bl, e, el, limit, target, q & 1, &ar, seed);
        rl__arena_reset(&ar);
    }
    /* Everything, both ways. */
    cmp_range(s, m, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1, 0, 0, 0, &ar, seed);
    cmp_range(s, m, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1, 0, 0, 1, &ar, seed);
    rl__arena_release(&ar);
    free(k1);
    free(k2);
}

/* Apply round r to both stores: every key whose index is in [lo, hi) with step `step` is set
 * (or cleared when clear_mod divides i + r). */
static void apply_round(rl__storage *s, rl__storage *m, rl__version v, int lo, int hi, int step, int r, int clear_mod) {
    enum { BATCH = 200 };
    rl__mutation mu[BATCH];
    uint8_t *buf = malloc((size_t)BATCH * (MAXK + MAXV));
    int n = 0;
    for (int i = lo; i < hi; i += step) {
        uint8_t *kp = buf + (size_t)n * (MAXK + MAXV), *vp = kp + MAXK;
        size_t kl = make_key(i, kp);
        memset(&mu[n], 0, sizeof mu[n]);
        mu[n].p1 = kp;
        mu[n].len1 = (uint32_t)kl;
        if (clear_mod && (i + r) % clear_mod == 0) {
            mu[n].type = RL_MUT_CLEAR;
        } else {
            mu[n].type = RL_MUT_SET;
            mu[n].p2 = vp;
            mu[n].len2 = (uint32_t)make_val(i, r, vp);
        }
        if (++n == BATCH || i + step >= hi) {
            ASSERT_OK(rl__storage_apply(s, v, mu, (size_t)n));
            ASSERT_OK(rl__storage_apply(m, v, mu, (size_t)n));
            v++;
            n = 0;
        }
    }
    /* Versions move on so the window's rows of this round age out (window of 2 versions). */
    ASSERT_OK(rl__storage_apply(s, v + 10, NULL, 0));
    ASSERT_OK(rl__storage_apply(m, v + 10, NULL, 0));
    free(buf);
}

TEST(ssd_5_1_range_walk_vs_memory) {
    uint64_t seed = rl_test_seed(), rs = seed;
    printf("seed %llu\n", (unsigned long long)seed);
    char *dir = rl_test_tmpdir("ssd-walk");
    rl__storage *s = open_store(dir), *m = open_store(NULL);
    uint64_t pages0, pages1, pages2;
    ASSERT_TRUE(rl__ssd_page_walk(s, &pages0));
    ASSERT_EQ(pages0, 0);
    apply_round(s, m, 1, 0, NKEYS, 1, 0, 0);
    apply_round(s, m, 1000, 1, NKEYS, 3, 1, 5); /* overwrites and clears */
    rl__storage_collect(s);
    ASSERT_OK(rl__storage_checkpoint(s)); /* everything in LMDB */
    rl__storage_status x;
    rl__storage_get_status(s, &x);
    printf("window rows after the flush %llu\n", (unsigned long long)x.window_rows);
    ASSERT_OK(rl__storage_apply(s, rl__storage_latest_version(s) + 10, NULL, 0));
    ASSERT_OK(rl__storage_apply(m, rl__storage_latest_version(m) + 10, NULL, 0));
    rl__storage_collect(s);
    ASSERT_OK(rl__storage_checkpoint(s));
    rl__storage_get_status(s, &x);
    printf("window rows after the second flush %llu\n", (unsigned long long)x.window_rows);
    ASSERT_EQ(x.window_rows, 0); /* the window empty */

    random_ranges(s, m, &rs, 600, seed);
    ASSERT_TRUE(rl__ssd_page_walk(s, &pages1));
    printf("leaf pages walked with the window empty: %llu\n", (unsigned long long)pages1);
    ASSERT_TRUE(pages1 > 1000);

    /* Rows in the window over part of the key space (not flushed): ranges over them merge. */
    apply_round(s, m, 2000, 4000, 6000, 7, 2, 4);
    random_ranges(s, m, &rs, 300, seed);
    ASSERT_TRUE(rl__ssd_page_walk(s, &pages2));
    ASSERT_TRUE(pages2 > pages1);

    /* The cursor alone gives the same rows. */
    ASSERT_OK(rl__storage_sync(s));
    rl__storage_close(s);
    setenv("RL_SSD_PAGE_WALK", "0", 1);
    s = open_store(dir);
    unsetenv("RL_SSD_PAGE_WALK");
    ASSERT_FALSE(rl__ssd_page_walk(s, NULL));
    random_ranges(s, m, &rs, 150, seed);
    rl__storage_close(s);
    s = open_store(dir);
    ASSERT_TRUE(rl__ssd_page_walk(s, NULL));
    rl__storage_collect(s);
    ASSERT_OK(rl__storage_checkpoint(s));
    random_ranges(s, m, &rs, 150, seed);
    ASSERT_TRUE(rl__ssd_page_walk(s, &pages2));
    ASSERT_TRUE(pages2 > 0);

    rl__storage_close(s);
    rl__storage_close(m);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(ssd_5_1_range_walk_vs_memory))
