/* test_fdbc_estimate.c — fdb_transaction_get_estimated_range_size_bytes and
 * fdb_transaction_get_range_split_points on reclayer's libfdb_c.so, called as a FoundationDB
 * program calls them (fdbc_api.h: the documented API, the library loaded with dlopen), with
 * FoundationDB's future types (int64, key array), over an embedded database and over a real
 * cluster of three storage servers (cluster_procs.h: rlkvd processes, shard boundaries at "h"
 * and "p"; docs/design.md §4, "Size estimates").
 *
 *   fdbc-est-1.1  over mem:: a seeded dataset of 6,000 pairs (108-1,008 bytes): the estimate of
 *                 the whole range and of a part within kv.h's bound, split points from begin to
 *                 end, sorted, with chunks of about chunk_size; inverted ranges (2005),
 *                 chunk_size <= 0 (2000), keys beyond "\xff" (2004), bad input (2000), the getter
 *                 of the other kind (2000), release_memory (1102)
 *   fdbc-est-1.2  the same dataset over the cluster: the estimates within the bound (the sum of
 *                 the servers' answers), the split points include both shard boundaries
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_procs.h"
#include "fdbc_api.h"
#include "test.h"

#define K(s) (const uint8_t *)(s), (int)strlen(s)
#define N_KEYS 6000
#define D_MAX (250.0 * (8 + 100)) /* kv.h: keys of 8 bytes */

static fdbt_client cl;
static cp_cluster clu; /* static: the exit hook finds it after a failed assertion */
static int clu_up;
static uint32_t vlen[N_KEYS];

static FDBDatabase *open_db(const char *url) {
    if (!cl.started && fdbt_start(&cl)) fail_msg("cannot start %s", fdbt_lib_path());
    FDBDatabase *db = NULL;
    fdb_error_t rc = fdbt_open(&cl, url, &db);
    if (rc) fail_msg("create_database over %s: %d %s", url, rc, cl.api.get_error(rc));
    return db;
}

static FDBTransaction *new_tr(FDBDatabase *db) {
    FDBTransaction *tr = NULL;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    return tr;
}

/* The cluster (started once, before the network thread's first use in this program). */
static cp_cluster *cluster(void) {
    static const char *const split[] = {"h", "p"};
    if (!clu_up) {
        cp_start(&clu, 3, split, 2, 1);
        clu_up = 1;
    }
    return &clu;
}

/* Make each storage server hold the load: a read at a fresh read version in each shard waits
 * until its server applied it (estimates answer from what a server applied). */
static void catch_up(FDBDatabase *db) {
    FDBTransaction *tr = new_tr(db);
    static const char *const keys[] = {"a", "h", "p"};
    for (int i = 0; i < 3; i++) ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K(keys[i]), 1)));
    cl.api.transaction_destroy(tr);
}

static void key_of(uint32_t i, char *k) { snprintf(k, 9, "%c%07u", 'a' + (int)(i % 26), i); }

/* Load the dataset (seeded) in transactions of 500 pairs. */
static void load(FDBDatabase *db) {
    uint64_t rng = rl_test_seed();
    static uint8_t buf[1000];
    for (uint32_t i = 0; i < N_KEYS;) {
        FDBTransaction *tr = new_tr(db);
        for (int n = 0; n < 500 && i < N_KEYS; n++, i++) {
            char k[9];
            key_of(i, k);
            vlen[i] = 100 + (uint32_t)rl_test_rand_below(&rng, 901);
            for (uint32_t j = 0; j < vlen[i]; j++) buf[j] = (uint8_t)rl_test_rand(&rng);
            cl.api.transaction_set(tr, K(k), buf, (int)vlen[i]);
        }
        ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
        cl.api.transaction_destroy(tr);
    }
}

static double true_bytes(const char *b, const char *e) {
    double s = 0;
    for (uint32_t i = 0; i < N_KEYS; i++) {
        char k[9];
        key_of(i, k);
        if (strcmp(k, b) >= 0 && strcmp(k, e) < 0) s += 8 + vlen[i];
    }
    return s;
}

/* 5 standard deviations plus one weight (test_kv_estimate.c says why 5). */
static double bound(double b) { return 5.0 * sqrt(b * D_MAX) + D_MAX; }

static void expect_estimate(FDBDatabase *db, const char *b, const char *e) {
    FDBTransaction *tr = new_tr(db);
    FDBFuture *f = cl.api.transaction_get_estimated_range_size_bytes(tr, K(b), K(e));
    ASSERT_OK(fdbt_wait(&cl, f));
    int64_t got = -1;
    ASSERT_OK(cl.api.future_get_int64(f, &got));
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    double want = true_bytes(b, e);
    print_message("  [%s, %s): true %.0f, estimate %lld\n", b, e, want, (long long)got);
    if (fabs((double)got - want) > bound(want))
        fail_msg("estimate %lld, true %.0f: outside +-%.0f", (long long)got, want, bound(want));
}

/* Split [a, z) into chunks of chunk bytes; check the list; return how many of want[] it holds. */
static int check_split(FDBDatabase *db, int64_t chunk, const char *const *want, int n_want) {
    FDBTransaction *tr = new_tr(db);
    FDBFuture *f = cl.api.transaction_get_range_split_points(tr, K("a"), K("z"), chunk);
    ASSERT_OK(fdbt_wait(&cl, f));
    const FDBKey *keys;
    int n = 0, found = 0;
    ASSERT_OK(cl.api.future_get_key_array(f, &keys, &n));
    print_message("  chunk %lld: %d keys\n", (long long)chunk, n);
    ASSERT_TRUE(n >= 2);
    ASSERT_EQ(keys[0].key_length, 1);
    ASSERT_EQ(keys[0].key[0], 'a');
    ASSERT_EQ(keys[n - 1].key_length, 1);
    ASSERT_EQ(keys[n - 1].key[0], 'z');
    char prev[16] = "a";
    for (int i = 1; i < n; i++) {
        char cur[16];
        ASSERT_TRUE(keys[i].key_length > 0 && keys[i].key_length < 16);
        memcpy(cur, keys[i].key, (size_t)keys[i].key_length);
        cur[keys[i].key_length] = 0;
        ASSERT_TRUE(strcmp(prev, cur) < 0);
        for (int w = 0; w < n_want; w++) found += !strcmp(cur, want[w]);
        int at_boundary = 0;
        for (int w = 0; w < n_want; w++) at_boundary |= !strcmp(cur, want[w]);
        double tb = true_bytes(prev, cur);
        ASSERT_TRUE(tb <= chunk + bound(chunk));
        if (i < n - 1 && !at_boundary) ASSERT_TRUE(tb >= chunk - bound(chunk) - D_MAX);
        strcpy(prev, cur);
    }
    /* Released memory: the error stays readable, the getter says future_released (1102). */
    cl.api.future_release_memory(f);
    ASSERT_EQ(cl.api.future_get_key_array(f, &keys, &n), 1102);
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    return found;
}

TEST(fdbc_est_1_1) {
    cluster(); /* forked before this program's threads exist */
    FDBDatabase *db = open_db("mem:");
    load(db);
    expect_estimate(db, "", "\xff");
    expect_estimate(db, "d", "q");
    check_split(db, 1000000, NULL, 0);
    FDBTransaction *tr = new_tr(db);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_estimated_range_size_bytes(tr, K("b"), K("a"))), 2005);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_range_split_points(tr, K("b"), K("a"), 10)), 2005);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_range_split_points(tr, K("a"), K("b"), 0)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_range_split_points(tr, K("a"), K("b"), -1)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_range_split_points(tr, K("a"), K("\xff\x01"), 10)), 2004);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_estimated_range_size_bytes(tr, NULL, 3, K("a"))), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_range_split_points(NULL, K("a"), K("b"), 10)), 2000);
    /* The getters check the kind. */
    FDBFuture *f = cl.api.transaction_get_estimated_range_size_bytes(tr, K("a"), K("b"));
    ASSERT_OK(fdbt_wait(&cl, f));
    const FDBKey *keys;
    int n;
    ASSERT_EQ(cl.api.future_get_key_array(f, &keys, &n), 2000);
    cl.api.future_destroy(f);
    f = cl.api.transaction_get_range_split_points(tr, K("k"), K("k"), 10);
    ASSERT_OK(fdbt_wait(&cl, f));
    int64_t v;
    ASSERT_EQ(cl.api.future_get_int64(f, &v), 2000);
    ASSERT_OK(cl.api.future_get_key_array(f, &keys, &n));
    ASSERT_EQ(n, 1); /* begin == end: [begin] */
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_est_1_2) {
    cp_cluster *c = cluster();
    FDBDatabase *db = open_db(c->url);
    load(db);
    catch_up(db);
    expect_estimate(db, "", "\xff");
    expect_estimate(db, "b", "j");  /* across the boundary at "h": two servers summed */
    expect_estimate(db, "d", "zz"); /* three */
    static const char *const bounds[] = {"h", "p"};
    ASSERT_EQ(check_split(db, 1000000, bounds, 2), 2);
    ASSERT_EQ(check_split(db, (int64_t)1 << 40, bounds, 2), 2); /* just the boundaries */
    cl.api.database_destroy(db);
}

static int teardown(void **state) {
    (void)state;
    fdbt_stop(&cl);
    if (clu_up) cp_stop(&clu);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_est_1_1), T(fdbc_est_1_2)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
