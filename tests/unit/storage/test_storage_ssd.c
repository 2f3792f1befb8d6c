/* test_storage_ssd.c — the ssd engine (src/storage/ssd.c) against the memory engine as the model:
 * the same random versions (sets, clears, range clears, atomic adds) go to an ssd store with a
 * small flush threshold and a short window (so flushes, pins, evictions and GC all happen often)
 * and to a mem: store; point reads, ranges (both directions, limits) and selectors at random
 * versions in the window must agree; after close and reopen the state at the latest version
 * must agree. Long keys (over LMDB's 511 bytes, sharing long prefixes) and keys at the
 * 480-byte boundary are mixed in (rl.ssd-2). Also: the engine recorded in the directory and the
 * mismatch error, status fields. Seeds are printed; RL_TEST_SEED overrides.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "reclayer/error.h"
#include "storage/storage.h"
#include "test.h"

static rl__storage *open_ssd(const char *dir, uint64_t window, uint64_t flush_bytes) {
    rl__storage_options o = {0};
    rl__storage *st = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    o.engine = RL_ENGINE_SSD;
    o.dir = dir;
    o.no_sync = 1;
    o.window_versions = window;
    o.checkpoint_log_bytes = flush_bytes;
    int rc = rl__storage_open(&o, &st, &msg);
    if (rc)
        fail_msg("open ssd %s: %s %.*s", dir, rl_error_name(rc), (int)rl__errdetail_len(&msg), rl__errdetail_get(&msg));
    return st;
}

static rl__storage *open_mem(uint64_t window) {
    rl__storage_options o = {0};
    rl__storage *st = NULL;
    o.window_versions = window;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    return st;
}

/* Key i of the key space: mostly short, some at the 480-byte boundary, some long with a shared
 * 600-byte prefix (one LMDB group) and distinct tails, so groups of several keys exist. */
static size_t make_key(uint64_t i, int long_keys, uint8_t *out) {
    size_t n = (size_t)snprintf((char *)out, 32, "k%05llu", (unsigned long long)i);
    if (!long_keys) return n;
    switch (i % 7) {
    case 1: /* exactly 480, 479, 481 bytes: the boundary */
    case 2:
    case 3: {
        size_t want = 479 + (i % 7) - 1;
        memset(out, 'b', want);
        memcpy(out, "kb", 2);
        out[want - 1] = (uint8_t)('0' + i % 10);
        out[want - 2] = (uint8_t)('0' + (i / 10) % 10);
        return want;
    }
    case 4:
    case 5: { /* long, sharing 600 bytes: sorted by key, stored by hash */
        memset(out, 'p', 600);
        memcpy(out, "kp", 2);
        size_t t = (size_t)snprintf((char *)out + 600, 32, "%05llu", (unsigned long long)i);
        size_t extra = (i % 3) * 1000; /* up to 2,600 bytes */
        memset(out + 600 + t, 'z', extra);
        return 600 + t + extra;
    }
    default: return n;
    }
}

#define NKEYS 300
#define MAXK 4000

static void cmp_get(rl__storage *a, rl__storage *b, rl__version v, const uint8_t *k, size_t kl, rl_arena *ar) {
    int pa, pb;
    const uint8_t *va, *vb;
    uint32_t la, lb;
    ASSERT_OK(rl__storage_get(a, v, k, kl, ar, &pa, &va, &la));
    ASSERT_OK(rl__storage_get(b, v, k, kl, ar, &pb, &vb, &lb));
    if (pa != pb || (pa && (la != lb || memcmp(va, vb, la) != 0)))
        fail_msg("get at %llu of key %.20s (%zu bytes): ssd present %d, model %d", (unsigned long long)v,
                 (const char *)k, kl, pa, pb);
}

static void cmp_range(rl__storage *a, rl__storage *b, rl__version v, const uint8_t *bk, size_t bl, const uint8_t *ek,
                      size_t el, int limit, int reverse, rl_arena *ar) {
    rl_keyvalue *ka, *kb;
    int na, nb, ma, mb;
    ASSERT_OK(rl__storage_get_range(a, v, bk, bl, ek, el, limit, 0, reverse, ar, &ka, &na, &ma));
    ASSERT_OK(rl__storage_get_range(b, v, bk, bl, ek, el, limit, 0, reverse, ar, &kb, &nb, &mb));
    if (na != nb || ma != mb)
        fail_msg("range at %llu (limit %d, reverse %d): ssd %d rows more %d, model %d more %d", (unsigned long long)v,
                 limit, reverse, na, ma, nb, mb);
    for (int i = 0; i < na; i++) {
        if (rl__bytes_cmp(ka[i].key, ka[i].key_len, kb[i].key, kb[i].key_len) != 0 ||
            ka[i].value_len != kb[i].value_len || memcmp(ka[i].value, kb[i].value, ka[i].value_len) != 0)
            fail_msg("range at %llu row %d differs", (unsigned long long)v, i);
    }
}

static void cmp_key(rl__storage *a, rl__storage *b, rl__version v, const uint8_t *k, size_t kl, int or_equal,
                    int offset, rl_arena *ar) {
    rl_key_selector sel = {k, (uint32_t)kl, or_equal, offset};
    const uint8_t *ka, *kb;
    uint32_t la, lb;
    ASSERT_OK(rl__storage_get_key(a, v, &sel, ar, &ka, &la));
    ASSERT_OK(rl__storage_get_key(b, v, &sel, ar, &kb, &lb));
    if (rl__bytes_cmp(ka, la, kb, lb) != 0)
        fail_msg("get_key at %llu (or_equal %d offset %d) differs: %u vs %u bytes", (unsigned long long)v, or_equal,
                 offset, la, lb);
}

static void random_vs_memory(int long_keys, int rounds) {
    uint64_t seed = rl_test_seed();
    printf("seed %llu (long keys %d)\n", (unsigned long long)seed, long_keys);
    uint64_t rs = seed;
    char *dir = rl_test_tmpdir("ssd");
    const uint64_t window = 40;
    rl__storage *s = open_ssd(dir, window, 4096);
    uint64_t flushes = 0;
    rl__storage *m = open_mem(window);
    rl_arena ar;
    rl__arena_init(&ar, 0);
    uint8_t *k1 = malloc(MAXK), *k2 = malloc(MAXK), val[64];
    rl__version v = 0;
    for (int round = 0; round < rounds; round++) {
        /* One version of 1-8 mutations. */
        rl__mutation mu[8];
        uint8_t *kb[8];
        int nm = 1 + (int)rl_test_rand_below(&rs, 8);
        for (int i = 0; i < nm; i++) {
            kb[i] = malloc(2 * MAXK);
            size_t kl = make_key(rl_test_rand_below(&rs, NKEYS), long_keys, kb[i]);
            int op = (int)rl_test_rand_below(&rs, 20);
            memset(&mu[i], 0, sizeof mu[i]);
            mu[i].p1 = kb[i];
            mu[i].len1 = (uint32_t)kl;
            if (op < 14) {
                mu[i].type = RL_MUT_SET;
                size_t vl = (size_t)snprintf((char *)kb[i] + MAXK, 64, "v%llu.%d", (unsigned long long)v + 1, i);
                mu[i].p2 = kb[i] + MAXK;
                mu[i].len2 = (uint32_t)vl;
            } else if (op < 16) {
                mu[i].type = RL_MUT_CLEAR;
            } else if (op < 17) {
                mu[i].type = RL_MUT_CLEAR_RANGE;
                size_t el = make_key(rl_test_rand_below(&rs, NKEYS), long_keys, kb[i] + MAXK);
                mu[i].p2 = kb[i] + MAXK;
                mu[i].len2 = (uint32_t)el;
                if (rl__bytes_cmp(mu[i].p1, mu[i].len1, mu[i].p2, mu[i].len2) > 0) {
                    mu[i].p1 = kb[i] + MAXK, mu[i].len1 = (uint32_t)el;
                    mu[i].p2 = kb[i], mu[i].len2 = (uint32_t)kl;
                }
            } else {
                mu[i].type = RL_MUT_ADD;
                uint64_t one = 1 + rl_test_rand_below(&rs, 5);
                memcpy(kb[i] + MAXK, &one, 8);
                mu[i].p2 = kb[i] + MAXK;
                mu[i].len2 = 8;
            }
        }
        v += 1 + rl_test_rand_below(&rs, 3);
        ASSERT_OK(rl__storage_apply(s, v, mu, (size_t)nm));
        ASSERT_OK(rl__storage_apply(m, v, mu, (size_t)nm));
        for (int i = 0; i < nm; i++) free(kb[i]);
        /* Reads at random versions both can serve. */
        rl__version lo = rl__storage_oldest_version(s);
        if (rl__storage_oldest_version(m) > lo) lo = rl__storage_oldest_version(m);
        for (int q = 0; q < 4; q++) {
            rl__version rv = lo + rl_test_rand_below(&rs, v - lo + 1);
            size_t l1 = make_key(rl_test_rand_below(&rs, NKEYS), long_keys, k1);
            size_t l2 = make_key(rl_test_rand_below(&rs, NKEYS), long_keys, k2);
            cmp_get(s, m, rv, k1, l1, &ar);
            if (rl__bytes_cmp(k1, l1, k2, l2) < 0)
                cmp_range(s, m, rv, k1, l1, k2, l2, (int)rl_test_rand_below(&rs, 6), q & 1, &ar);
            cmp_range(s, m, rv, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1, 0, q & 1, &ar);
            cmp_key(s, m, rv, k1, l1, q & 1, (int)rl_test_rand_below(&rs, 5) - 2, &ar);
            rl__arena_reset(&ar);
        }
        (void)val;
        if (round % 97 == 96) { /* reopen: recovery replays the log over LMDB */
            ASSERT_OK(rl__storage_sync(s));
            rl__storage_status x;
            rl__storage_get_status(s, &x);
            flushes += x.checkpoints;
            rl__storage_close(s);
            s = open_ssd(dir, window, 4096);
            ASSERT_EQ(rl__storage_latest_version(s), v);
            cmp_range(s, m, v, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1, 0, 0, &ar);
        }
    }
    rl__storage_status ss, ms;
    rl__storage_get_status(s, &ss);
    rl__storage_get_status(m, &ms);
    ASSERT_STR_EQ(ss.engine, "ssd");
    ASSERT_EQ(ss.keys, ms.keys);
    ASSERT_EQ(ss.bytes, ms.bytes);
    flushes += ss.checkpoints;
    ASSERT_TRUE(flushes > 5); /* flushes happened */
    printf("flushes %llu, rows in the window %llu of %llu keys\n", (unsigned long long)flushes,
           (unsigned long long)ss.window_rows, (unsigned long long)ss.keys);
    ASSERT_OK(rl__storage_sync(s));
    rl__storage_close(s);
    s = open_ssd(dir, window, 4096);
    cmp_range(s, m, v, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1, 0, 0, &ar);
    cmp_range(s, m, v, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1, 0, 1, &ar);
    rl__storage_get_status(s, &ss);
    ASSERT_EQ(ss.keys, ms.keys);
    ASSERT_EQ(ss.bytes, ms.bytes);
    rl__storage_close(s);
    rl__storage_close(m);
    rl__arena_release(&ar);
    free(k1);
    free(k2);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(ssd_1_1_random_vs_memory) { random_vs_memory(0, 1500); }

TEST(ssd_2_1_long_keys_vs_memory) { random_vs_memory(1, 1500); }

/* The engine is recorded in the directory: AUTO opens it as ssd; memory is refused naming both;
 * a memory directory is refused as ssd. */
TEST(ssd_1_2_engine_recorded) {
    char *dir = rl_test_tmpdir("ssd-eng");
    rl__storage *st = open_ssd(dir, 0, 0);
    rl__mutation mu = {
        .type = RL_MUT_SET, .p1 = (const uint8_t *)"a", .len1 = 1, .p2 = (const uint8_t *)"1", .len2 = 1};
    ASSERT_OK(rl__storage_apply(st, 5, &mu, 1));
    ASSERT_OK(rl__storage_sync(st));
    rl__storage_close(st);
    rl__storage_options o = {0};
    o.dir = dir;
    o.engine = RL_ENGINE_AUTO;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_STR_EQ(s.engine, "ssd");
    ASSERT_EQ(s.latest_version, 5);
    rl__storage_close(st);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    o.engine = RL_ENGINE_MEMORY;
    ASSERT_RC(rl__storage_open(&o, &st, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "ssd"));
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "memory"));
    rl_test_rmtree(dir);
    free(dir);
    /* A memory directory refuses ssd. */
    dir = rl_test_tmpdir("ssd-eng2");
    o.dir = dir;
    o.engine = RL_ENGINE_MEMORY;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    ASSERT_OK(rl__storage_apply(st, 5, &mu, 1));
    rl__storage_close(st);
    rl__errdetail_init(&msg, NULL);
    o.engine = RL_ENGINE_SSD;
    ASSERT_RC(rl__storage_open(&o, &st, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "memory"));
    rl_test_rmtree(dir);
    free(dir);
}

/* A damaged data.mdb is a clear error naming the file, and no file is changed. */
TEST(ssd_4_1_corrupt_names_file) {
    char *dir = rl_test_tmpdir("ssd-corrupt");
    rl__storage *st = open_ssd(dir, 0, 0);
    rl__mutation mu = {
        .type = RL_MUT_SET, .p1 = (const uint8_t *)"a", .len1 = 1, .p2 = (const uint8_t *)"1", .len2 = 1};
    ASSERT_OK(rl__storage_apply(st, 5, &mu, 1));
    ASSERT_OK(rl__storage_checkpoint(st)); /* flush: the row is in LMDB */
    rl__storage_close(st);
    char path[4200];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    FILE *f = fopen(path, "r+b");
    ASSERT_NOT_NULL(f);
    char junk[8192];
    memset(junk, 0x5a, sizeof junk);
    ASSERT_EQ(fwrite(junk, 1, sizeof junk, f), sizeof junk); /* both meta pages */
    fclose(f);
    rl__storage_options o = {0};
    o.dir = dir;
    o.engine = RL_ENGINE_SSD;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__storage_open(&o, &st, &msg);
    ASSERT_TRUE(rc == RL_E_CORRUPT_DATA);
    ASSERT_NOT_NULL(rl__errdetail_get(&msg));
    printf("message: %.*s\n", (int)rl__errdetail_len(&msg), rl__errdetail_get(&msg));
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "data.mdb"));
    rl_test_rmtree(dir);
    free(dir);
}

/* Readers on threads while the writer applies and flushes (every 2 KiB of log, so LMDB write
 * transactions, pins, evictions and pooled read transactions renewed after each flush all meet
 * concurrent reads): every version writes the same value to all NK keys, so a range or a point
 * read at any readable version must see NK equal values. */
enum { NK = 20, READERS = 3 };

typedef struct {
    rl__storage *st;
    atomic_int stop;
    atomic_long reads;
    atomic_int bad;
} conc;

static void *reader(void *arg) {
    conc *c = arg;
    rl_arena a;
    rl__arena_init(&a, 0);
    while (!atomic_load(&c->stop)) {
        rl__version v = rl__storage_latest_version(c->st);
        rl_keyvalue *kv;
        int n, more, rc;
        rc = rl__storage_get_range(c->st, v, "k", 1, "l", 1, 0, 0, (int)(v & 1), &a, &kv, &n, &more);
        if (rc == RL_E_TRANSACTION_TOO_OLD) continue;
        if (rc != RL_OK || (v > 0 && n != NK)) atomic_store(&c->bad, 1);
        for (int i = 1; i < n; i++)
            if (kv[i].value_len != kv[0].value_len || memcmp(kv[i].value, kv[0].value, kv[0].value_len) != 0)
                atomic_store(&c->bad, 2);
        int present;
        const uint8_t *val;
        uint32_t len;
        rc = rl__storage_get(c->st, v, "k07", 3, &a, &present, &val, &len);
        if (rc == RL_OK && n == NK && (!present || len != kv[0].value_len || memcmp(val, kv[0].value, len) != 0))
            atomic_store(&c->bad, 3);
        atomic_fetch_add(&c->reads, 1);
        rl__arena_reset(&a);
    }
    rl__arena_release(&a);
    return NULL;
}

TEST(ssd_4_2_reads_during_flushes) {
    char *dir = rl_test_tmpdir("ssd-conc");
    conc c = {.st = open_ssd(dir, 3, 2048)};
    char keys[NK][8], val[32];
    rl__mutation mu[NK];
    pthread_t th[READERS];
    rl__version v = 1;
    /* Version 1 so readers always find NK keys. */
    for (int i = 0; i < NK; i++) {
        snprintf(keys[i], sizeof keys[i], "k%02d", i);
        mu[i] = (rl__mutation){
            .type = RL_MUT_SET, .p1 = (const uint8_t *)keys[i], .len1 = 3, .p2 = (const uint8_t *)val, .len2 = 0};
    }
    snprintf(val, sizeof val, "v%016llu", 1ull);
    for (int i = 0; i < NK; i++) mu[i].len2 = 17;
    ASSERT_OK(rl__storage_apply(c.st, v, mu, NK));
    for (int i = 0; i < READERS; i++) ASSERT_EQ(pthread_create(&th[i], NULL, reader, &c), 0);
    uint64_t t0 = (rl__clock_mono_ns() / 1000000);
    while ((rl__clock_mono_ns() / 1000000) - t0 < 1500) {
        v++;
        snprintf(val, sizeof val, "v%016llu", (unsigned long long)v);
        ASSERT_OK(rl__storage_apply(c.st, v, mu, NK));
    }
    atomic_store(&c.stop, 1);
    for (int i = 0; i < READERS; i++) pthread_join(th[i], NULL);
    rl__storage_status s;
    rl__storage_get_status(c.st, &s);
    printf("%llu versions, %ld reads, %llu flushes\n", (unsigned long long)v, (long)atomic_load(&c.reads),
           (unsigned long long)s.checkpoints);
    ASSERT_EQ(atomic_load(&c.bad), 0);
    ASSERT_TRUE(s.checkpoints > 10);
    ASSERT_TRUE(atomic_load(&c.reads) > 10);
    rl__storage_close(c.st);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(ssd_1_1_random_vs_memory), T(ssd_1_2_engine_recorded), T(ssd_2_1_long_keys_vs_memory),
             T(ssd_4_1_corrupt_names_file), T(ssd_4_2_reads_during_flushes))
