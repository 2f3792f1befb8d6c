/* test_fdb_backend_bench.c — what the fdb: path costs: the same workloads on a reclayer database
 * opened directly and through the fdb: backend over reclayer's own libfdb_c.so (two layers:
 * reclayer's transaction layer, FoundationDB's C API, then reclayer's transaction layer again).
 *
 *   fdb-bench-1.1  point gets (one transaction, random keys), 1,000-row ranges, commits of one
 *                  small write, and 1,000-entry mapped ranges: the results agree between the two
 *                  paths; ns/op and the ratio fdb:/direct are printed
 *
 * Environment:
 *   RL_FDB_BENCH_SECONDS  seconds per workload and path per round (default 0.05: a smoke run for
 *                         ctest -L bench; the figures in docs/benchmarks.md use 2)
 *   RL_FDB_BENCH_ROUNDS   rounds, alternating which path goes first (default 1; the figures use 5);
 *                         the median is shown
 *   RL_FDB_BENCH_URL      the database (default mem:, each path its own; cluster:FILE: both paths
 *                         on the same cluster)
 * Nothing is asserted about times (they depend on the machine); only that both paths agree.
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "reclayer/kv.h"
#include "test.h"

enum { N_KEYS = 100000, VALUE_LEN = 100, N_INDEX = 20000 };

static const char *lib_path(void) {
    const char *p = getenv("RL_FDBC_LIB");
    return p && *p ? p : RL_BIN_DIR "/fdb/libfdb_c.so";
}

static double env_num(const char *name, double def) {
    const char *v = getenv(name);
    return v && *v ? atof(v) : def;
}

static void key_of(char *k, int i) { snprintf(k, 16, "k%08d", i); }

/* Load N_KEYS keys with VALUE_LEN-byte values, and N_INDEX index entries ("i", i) -> records
 * ("r", i) in tuple form, in batches. */
static void load(rl_db *db) {
    char v[VALUE_LEN];
    memset(v, 'v', sizeof v);
    for (int b = 0; b < N_KEYS; b += 1000) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(db, &t));
        for (int i = b; i < b + 1000; i++) {
            char k[16];
            key_of(k, i);
            memcpy(v, k, 9);
            ASSERT_OK(rl_txn_set(t, k, 9, v, sizeof v));
        }
        rl_future *f = rl_txn_commit(t);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
        rl_txn_free(t);
    }
    for (int b = 0; b < N_INDEX; b += 1000) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(db, &t));
        for (int i = b; i < b + 1000; i++) {
            uint8_t k[16];
            int x = i + 256; /* ("i", x): a canonical 2-byte tuple integer */
            k[0] = 0x02, k[1] = 'i', k[2] = 0x00, k[3] = 0x16;
            k[4] = (uint8_t)(x >> 8), k[5] = (uint8_t)x;
            ASSERT_OK(rl_txn_set(t, k, 6, "", 0));
            k[1] = 'r';
            ASSERT_OK(rl_txn_set(t, k, 6, v, sizeof v));
        }
        rl_future *f = rl_txn_commit(t);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
        rl_txn_free(t);
    }
}

typedef struct {
    rl_db *db;
    uint64_t rng;
    uint64_t check; /* a checksum of what was read: equal on both paths for the same seed */
} sys;

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Run one workload for about `seconds` (or max_ops operations, when not 0); returns ns per
 * operation. */
static double run(sys *s, int w, double seconds, uint64_t max_ops) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(s->db, &t));
    uint64_t t0 = rl__clock_mono_ns(), end = t0 + (uint64_t)(seconds * 1e9), ops = 0;
    static const uint8_t ib[] = {0x02, 'i', 0x00}, ie[] = {0x02, 'i', 0x01};
    static const uint8_t mapper[] = {0x02, 'r',  0x00, 0x02, '{', 'K', '[', '1', ']',
                                     '}',  0x00, 0x02, '{',  '.', '.', '.', '}', 0x00};
    do {
        for (int rep = 0; rep < 16; rep++, ops++) {
            rl_future *f = NULL;
            if (w == 0) { /* point get */
                char k[16];
                key_of(k, (int)(next(&s->rng) % N_KEYS));
                f = rl_txn_get(t, k, 9, 0);
                ASSERT_OK(rl_future_wait(f));
                int present, vl;
                const uint8_t *v;
                ASSERT_OK(rl_future_get_value(f, &present, &v, &vl));
                s->check += present ? v[8] : 7;
            } else if (w == 1) { /* 1,000 rows */
                char k[16];
                key_of(k, (int)(next(&s->rng) % (N_KEYS - 1000)));
                f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(k, 9), RL_FIRST_GREATER_OR_EQUAL("l", 1), 1000, 0,
                                     RL_STREAMING_EXACT, 0, 0);
                ASSERT_OK(rl_future_wait(f));
                const rl_keyvalue *kv;
                int n, more;
                ASSERT_OK(rl_future_get_keyvalue_array(f, &kv, &n, &more));
                ASSERT_EQ(n, 1000);
                s->check += kv[n - 1].key[8];
            } else if (w == 2) { /* commit of one small write */
                rl_txn_reset(t);
                char k[16];
                snprintf(k, sizeof k, "w%08d", (int)(next(&s->rng) % 1000));
                ASSERT_OK(rl_txn_set(t, k, 9, "x", 1));
                f = rl_txn_commit(t);
                ASSERT_OK(rl_future_wait(f));
            } else { /* 1,000 index entries mapped to their records */
                f = rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(ib, 3), RL_FIRST_GREATER_OR_EQUAL(ie, 3),
                                            mapper, sizeof mapper, 1000, 0, RL_STREAMING_EXACT, 0, 0);
                ASSERT_OK(rl_future_wait(f));
                const rl_mapped_keyvalue *m;
                int n, more;
                ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &m, &n, &more));
                ASSERT_EQ(n, 1000);
                ASSERT_EQ(m[n - 1].n_kvs, 1);
                s->check += m[n - 1].kvs[0].value_len;
            }
            rl_future_free(f);
        }
        if (w != 2 && ops % 4096 == 0) rl_txn_reset(t); /* a fresh read version now and then */
    } while (rl__clock_mono_ns() < end && (!max_ops || ops < max_ops));
    double ns = (double)(rl__clock_mono_ns() - t0) / (double)ops;
    rl_txn_free(t);
    return ns;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

TEST(fdb_bench_1_1) {
    const char *url = getenv("RL_FDB_BENCH_URL");
    if (!url || !*url) url = "mem:";
    double seconds = env_num("RL_FDB_BENCH_SECONDS", 0.05);
    int rounds = (int)env_num("RL_FDB_BENCH_ROUNDS", 1);
    if (rounds < 1) rounds = 1;
    if (rounds > 15) rounds = 15;
    sys direct = {NULL, 88172645463325252ull, 0}, fdb = {NULL, 88172645463325252ull, 0};
    ASSERT_OK(rl_test_db_open(url, NULL, &direct.db));
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
    setenv("RL_FDBC_URL", url, 1);
    int rc = rl_test_db_open("fdb:", NULL, &fdb.db);
    if (rc) fail_msg("fdb: over %s: %s %s", url, rl_error_name(rc), rl_last_error_detail());
    load(direct.db);
    if (strncmp(url, "mem:", 4) == 0) load(fdb.db); /* another store; a cluster is shared */
    static const char *names[] = {"point get", "range 1,000 rows", "commit (1 write)", "mapped 1,000 entries"};
    printf("fdb: over reclayer's libfdb_c.so against the direct path, database %s, %.2f s x %d rounds\n", url, seconds,
           rounds);
    printf("%-22s %14s %14s %8s\n", "workload", "direct ns/op", "fdb: ns/op", "ratio");
    for (int w = 0; w < 4; w++) {
        /* Both paths read the same things for the same random sequence. */
        direct.rng = fdb.rng = 0x9e3779b97f4a7c15ull + (uint64_t)w;
        direct.check = fdb.check = 0;
        run(&direct, w, 1e6, 256);
        run(&fdb, w, 1e6, 256);
        ASSERT_EQ(direct.check, fdb.check);
        double d[15], f[15];
        for (int r = 0; r < rounds; r++) {
            if (r % 2 == 0) {
                d[r] = run(&direct, w, seconds, 0);
                f[r] = run(&fdb, w, seconds, 0);
            } else {
                f[r] = run(&fdb, w, seconds, 0);
                d[r] = run(&direct, w, seconds, 0);
            }
        }
        qsort(d, (size_t)rounds, sizeof d[0], cmp_d);
        qsort(f, (size_t)rounds, sizeof f[0], cmp_d);
        double dm = d[rounds / 2], fm = f[rounds / 2];
        printf("%-22s %14.0f %14.0f %7.2fx\n", names[w], dm, fm, fm / dm);
    }
    rl_db_close(direct.db);
    rl_db_close(fdb.db);
}

RL_TEST_MAIN(T(fdb_bench_1_1))
