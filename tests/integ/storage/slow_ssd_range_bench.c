/* slow_ssd_range_bench.c — the ssd engine's 1,000-row range read against raw LMDB on the same
 * file (docs/benchmarks.md, "The ssd engine"): 100,000 rows (12-byte keys, 100-byte values) are
 * applied and flushed to LMDB, then RANGES ranges of 1,000 rows are read through
 * rl__storage_get_range (copying into an arena) and through an LMDB cursor on data.mdb directly
 * (the encoded keys, no copy); both touch one byte of every key and value and must agree. Prints
 * ns per range of each and the ratio. Run under callgrind for instruction counts:
 *   valgrind --tool=callgrind build/integ_storage_slow_ssd_range_bench
 * RL_SSD_BENCH_RANGES (default 200).
 */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/clock.h"
#include "storage/storage.h"
#include "test.h"

TEST(ssd_bench_1_1_range_vs_lmdb) {
    const char *e = getenv("RL_SSD_BENCH_RANGES");
    int ranges = e && *e ? atoi(e) : 200;
    char *dir = rl_test_tmpdir("ssd-bench");
    rl__storage_options o = {0};
    o.engine = RL_ENGINE_SSD;
    o.dir = dir;
    o.no_sync = 1;
    o.window_versions = 2;
    o.checkpoint_log_bytes = 1 << 20;
    rl__storage *st = NULL;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    char v[100], keys[100][32];
    memset(v, 'x', sizeof v);
    rl__mutation mu[100];
    for (int b = 0; b < 1000; b++) {
        for (int j = 0; j < 100; j++) {
            int kl = snprintf(keys[j], sizeof keys[j], "\x15\x01k%08d", b * 100 + j);
            mu[j] = (rl__mutation){.type = RL_MUT_SET,
                                   .p1 = (const uint8_t *)keys[j],
                                   .len1 = (uint32_t)kl,
                                   .p2 = (const uint8_t *)v,
                                   .len2 = 100};
        }
        ASSERT_OK(rl__storage_apply(st, (rl__version)b + 1, mu, 100));
    }
    ASSERT_OK(rl__storage_apply(st, 2000, NULL, 0));
    ASSERT_OK(rl__storage_checkpoint(st)); /* everything in LMDB, the window empty */
    rl_arena a;
    rl__arena_init(&a, 0);
    uint64_t sum_ssd = 0, sum_lmdb = 0;
    uint64_t t0 = rl__clock_mono_ns();
    for (int r = 0; r < ranges; r++) {
        char b[32];
        int bl = snprintf(b, sizeof b, "\x15\x01k%08d", (r * 397) % 99000);
        rl_keyvalue *kv;
        int n, more;
        ASSERT_OK(rl__storage_get_range(st, 2000, b, (size_t)bl, "\x16", 1, 1000, 0, 0, &a, &kv, &n, &more));
        ASSERT_EQ(n, 1000);
        for (int i = 0; i < n; i++) sum_ssd += kv[i].key[kv[i].key_len - 1] + kv[i].value[50];
        rl__arena_reset(&a);
    }
    uint64_t t1 = rl__clock_mono_ns();
    rl__storage_close(st);
    /* Raw LMDB on the same file (the "data" database; keys carry the engine's 0x00 prefix). */
    MDB_env *env;
    MDB_txn *t;
    MDB_dbi d;
    ASSERT_EQ(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 4);
    mdb_env_set_mapsize(env, 1ull << 32);
    ASSERT_EQ(mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK, 0644), 0);
    ASSERT_EQ(mdb_txn_begin(env, NULL, MDB_RDONLY, &t), 0);
    ASSERT_EQ(mdb_dbi_open(t, "data", 0, &d), 0);
    uint64_t t2 = rl__clock_mono_ns();
    for (int r = 0; r < ranges; r++) {
        char b[32];
        b[0] = 0;
        int bl = 1 + snprintf(b + 1, sizeof b - 1, "\x15\x01k%08d", (r * 397) % 99000);
        MDB_cursor *c;
        ASSERT_EQ(mdb_cursor_open(t, d, &c), 0);
        MDB_val k = {(size_t)bl, b}, val;
        int rc = mdb_cursor_get(c, &k, &val, MDB_SET_RANGE);
        for (int i = 0; i < 1000 && rc == 0; i++) {
            sum_lmdb += ((const uint8_t *)k.mv_data)[k.mv_size - 1] + ((const uint8_t *)val.mv_data)[50];
            rc = mdb_cursor_get(c, &k, &val, MDB_NEXT);
        }
        mdb_cursor_close(c);
    }
    uint64_t t3 = rl__clock_mono_ns();
    mdb_txn_abort(t);
    mdb_env_close(env);
    ASSERT_EQ(sum_ssd, sum_lmdb);
    double ns_ssd = (double)(t1 - t0) / ranges, ns_lmdb = (double)(t3 - t2) / ranges;
    printf("1,000-row range: ssd %.0f ns, raw LMDB %.0f ns, ratio %.2f (%d ranges)\n", ns_ssd, ns_lmdb,
           ns_ssd / ns_lmdb, ranges);
    rl__arena_release(&a);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(ssd_bench_1_1_range_vs_lmdb))
