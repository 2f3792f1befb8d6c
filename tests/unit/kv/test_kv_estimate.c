/* test_kv_estimate.c — KV conformance: size estimates and range split points
 * (rl_txn_get_estimated_range_size_bytes, rl_txn_get_range_split_points; docs/design.md §4,
 * "Size estimates") on a known seeded dataset, against the error bound kv.h documents, after
 * clears, overwrites and atomic operations, across a restart (file:), and their argument errors
 * (public API only, any backend by RL_TEST_URL). */
#include <math.h>

#include "kvtest.h"

#define N_KEYS 20000
#define KEY_MAX 8                       /* "%c%07u": every key is 8 bytes */
#define D_MAX (250.0 * (KEY_MAX + 100)) /* kv.h: the largest weight of a small pair */

/* The dataset: key i is letter ('a' + i % 26) then i in 7 digits; its value length (0: absent). */
typedef struct {
    uint32_t vlen[N_KEYS];
    uint64_t rng;
} dataset;

static void key_of(uint32_t i, char *k) { snprintf(k, KEY_MAX + 1, "%c%07u", 'a' + (int)(i % 26), i); }

static void fill(uint8_t *v, uint32_t n, uint64_t *rng) {
    for (uint32_t j = 0; j < n; j++) v[j] = (uint8_t)rl_test_rand(rng);
}

/* Write keys [lo, hi) with values of lengths in [min, max] (0 = clear), in transactions of 400. */
static void write_keys(rl_db *db, dataset *d, uint32_t lo, uint32_t hi, uint32_t min, uint32_t max) {
    static uint8_t buf[4096];
    for (uint32_t i = lo; i < hi;) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(db, &t));
        for (uint32_t n = 0; n < 400 && i < hi; n++, i++) {
            char k[KEY_MAX + 1];
            key_of(i, k);
            uint32_t len = max ? min + (uint32_t)rl_test_rand_below(&d->rng, max - min + 1) : 0;
            if (len) {
                fill(buf, len, &d->rng);
                ASSERT_OK(rl_txn_set(t, k, KEY_MAX, buf, len));
            } else {
                ASSERT_OK(rl_txn_clear(t, k, KEY_MAX));
            }
            d->vlen[i] = len;
        }
        ASSERT_OK(kvt_commit(t));
        rl_txn_free(t);
    }
}

/* The true bytes (key + value) of the pairs in [b, e). */
static double true_bytes(const dataset *d, const char *b, const char *e) {
    double sum = 0;
    for (uint32_t i = 0; i < N_KEYS; i++) {
        char k[KEY_MAX + 1];
        key_of(i, k);
        if (d->vlen[i] && strcmp(k, b) >= 0 && strcmp(k, e) < 0) /* strcmp: unsigned bytes */
            sum += KEY_MAX + d->vlen[i];
    }
    return sum;
}

/* The bound checked: kv.h's standard deviation for B bytes, sqrt(B * D_MAX), times 5, plus one
 * weight (granularity). kv.h promises 4 standard deviations with probability above 1 - 1e-4 per
 * range; a ctest run makes some 400 such checks across the backends, so the tests allow 5
 * (about 1e-6 each) to stay deterministic in practice while still failing on a biased or
 * wrongly weighted sample. */
static double bound(double b) { return 5.0 * sqrt(b * D_MAX) + D_MAX; }

/* The shard boundaries of a cluster ("\xff/keyServers/" + begin), strictly inside (b, e), as
 * strings (none on an embedded store). */
static int shard_begins(rl_db *db, const char *b, const char *e, char out[][64], int cap) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0));
    static const char pfx[] = "\xff/keyServers/";
    rl_future *f = rl_txn_get_range(t, (rl_key_selector){(const uint8_t *)pfx, sizeof pfx - 1, 0, 1},
                                    (rl_key_selector){(const uint8_t *)"\xff/keyServers0", 14, 0, 1}, 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, RL_SNAPSHOT);
    ASSERT_OK(rl_future_wait(f));
    const rl_keyvalue *kvs;
    int n, more, m = 0;
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
    for (int i = 0; i < n && m < cap; i++) {
        size_t l = kvs[i].key_len - (sizeof pfx - 1);
        if (l >= 64) continue;
        memcpy(out[m], kvs[i].key + sizeof pfx - 1, l);
        out[m][l] = 0;
        if (strcmp(out[m], b) > 0 && strcmp(out[m], e) < 0) m++;
    }
    rl_future_free(f);
    rl_txn_free(t);
    return m;
}

/* Make every storage server hold the commits made so far: a read at a fresh read version of a
 * key in each shard waits until its server applied that version (size estimates answer from
 * what a server has applied, with no read version; an embedded store is always current). */
static void catch_up(rl_db *db) {
    static char shards[256][64];
    int n = shard_begins(db, "", "\xff", shards, 256);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    for (int i = -1; i < n; i++) {
        const char *k = i < 0 ? "" : shards[i];
        rl_future *f = rl_txn_get(t, k, strlen(k), RL_SNAPSHOT);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
    }
    rl_txn_free(t);
}

/* A printable form of a test key ("\xff" for the byte 0xff). */
static const char *pk(const char *k, char *buf) {
    size_t j = 0;
    for (size_t i = 0; k[i] && j < 60; i++) {
        if ((unsigned char)k[i] >= 0x80) j += (size_t)snprintf(buf + j, 8, "\\x%02x", (unsigned char)k[i]);
        else buf[j++] = k[i];
    }
    buf[j] = 0;
    return buf;
}

static int64_t estimate(rl_db *db, const void *b, size_t bl, const void *e, size_t el, int *rc) {
    catch_up(db);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get_estimated_range_size_bytes(t, b, bl, e, el);
    int64_t v = -1;
    *rc = rl_future_wait(f);
    if (*rc == RL_OK) ASSERT_OK(rl_future_get_int64(f, &v));
    rl_future_free(f);
    rl_txn_free(t);
    return v;
}

static int64_t est_ok(rl_db *db, const char *b, const char *e) {
    int rc;
    int64_t v = estimate(db, b, strlen(b), e, strlen(e), &rc);
    ASSERT_OK(rc);
    return v;
}

static void expect_within(rl_db *db, const dataset *d, const char *b, const char *e) {
    double want = true_bytes(d, b, e);
    int64_t got = est_ok(db, b, e);
    char pb[64], pe[64];
    print_message("  [%s, %s): true %.0f, estimate %lld (bound +-%.0f)\n", pk(b, pb), pk(e, pe), want, (long long)got,
                  bound(want));
    if (fabs((double)got - want) > bound(want))
        fail_msg("estimate of [%s, %s) is %lld, true %.0f: outside +-%.0f", pk(b, pb), pk(e, pe), (long long)got, want,
                 bound(want));
}

/* The split points of [b, e); *out a malloc'd copy of the keys as strings (caller frees each). */
static int split(rl_db *db, const char *b, size_t bl, const char *e, size_t el, int64_t chunk, int sys, char ***out,
                 int *n) {
    catch_up(db);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    if (sys) ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0));
    rl_future *f = rl_txn_get_range_split_points(t, b, bl, e, el, chunk);
    int rc = rl_future_wait(f);
    if (rc == RL_OK && out) {
        const rl_slice *keys;
        ASSERT_OK(rl_future_get_key_array(f, &keys, n));
        *out = calloc((size_t)*n + 1, sizeof **out);
        for (int i = 0; i < *n; i++) {
            (*out)[i] = calloc(1, keys[i].len + 1);
            if (keys[i].len) memcpy((*out)[i], keys[i].data, keys[i].len);
        }
    }
    rl_future_free(f);
    rl_txn_free(t);
    return rc;
}

static void free_keys(char **k, int n) {
    for (int i = 0; i < n; i++) free(k[i]);
    free(k);
}

static void load(kvt_env *e, dataset *d) {
    memset(d, 0, sizeof *d);
    d->rng = rl_test_seed();
    write_keys(e->db, d, 0, N_KEYS, 100, 1000);
}

/* kv-14.1: a known dataset (20,000 keys of 100-1,000 bytes, seeded): the whole range and
 * sub-ranges within the bound of kv.h; an empty range is 0; a small range is not negative. */
TEST(kv_14_1_estimate_known_dataset) {
    kvt_env e;
    kvt_open(&e);
    dataset *d = calloc(1, sizeof *d);
    load(&e, d);
    expect_within(e.db, d, "", "\xff");
    expect_within(e.db, d, "a", "g");
    expect_within(e.db, d, "g", "n");
    expect_within(e.db, d, "n", "t");
    expect_within(e.db, d, "t", "\xff");
    expect_within(e.db, d, "c", "m"); /* a range across several shards on the 3-server cluster */
    ASSERT_EQ(est_ok(e.db, "k", "k"), 0);
    ASSERT_TRUE(est_ok(e.db, "a0000000", "a0000100") >= 0);
    /* Nothing is stored there. */
    ASSERT_EQ(est_ok(e.db, "\xfe", "\xff"), 0);
    free(d);
    kvt_close(&e);
}

/* kv-14.2: the estimate follows clears, range clears, overwrites and atomic operations. */
TEST(kv_14_2_estimate_follows_writes) {
    kvt_env e;
    kvt_open(&e);
    dataset *d = calloc(1, sizeof *d);
    load(&e, d);
    /* Clear every key below "m" by range: the range estimates 0, the rest as before. */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_clear_range(t, "", 0, "m", 1));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    for (uint32_t i = 0; i < N_KEYS; i++)
        if ('a' + (int)(i % 26) < 'm') d->vlen[i] = 0;
    ASSERT_EQ(est_ok(e.db, "", "m"), 0);
    expect_within(e.db, d, "", "\xff");
    /* Point clears of a quarter of the keys, then overwrites of another quarter with 2-3 KB. */
    write_keys(e.db, d, 0, N_KEYS / 4, 0, 0);
    expect_within(e.db, d, "", "\xff");
    write_keys(e.db, d, N_KEYS / 4, N_KEYS / 2, 2000, 3000);
    expect_within(e.db, d, "", "\xff");
    expect_within(e.db, d, "m", "t");
    /* Atomic appends grow 2,000 values by 1,000 bytes each. */
    static uint8_t app[1000];
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (uint32_t i = N_KEYS / 2; i < N_KEYS / 2 + 2000; i++) {
        char k[KEY_MAX + 1];
        key_of(i, k);
        ASSERT_OK(rl_txn_atomic_op(t, k, KEY_MAX, app, sizeof app, RL_ATOMIC_APPEND_IF_FITS));
        d->vlen[i] += sizeof app;
    }
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    expect_within(e.db, d, "", "\xff");
    free(d);
    kvt_close(&e);
}

/* kv-14.3: restarting the store (file:) gives the same estimates and split points. */
TEST(kv_14_3_estimate_survives_restart) {
    if (strncmp(rl_test_url(), "file:", 5) != 0 && strncmp(rl_test_url(), "defer:file:", 11) != 0)
        skip(); /* only a durable embedded store can be restarted by the test (mem: has no files,
                 * a cluster's servers belong to the runner) */
    kvt_env e;
    kvt_open(&e);
    dataset *d = calloc(1, sizeof *d);
    load(&e, d);
    write_keys(e.db, d, 0, 3000, 0, 0); /* some clears in the log too */
    int64_t before = est_ok(e.db, "", "\xff"), before_sub = est_ok(e.db, "d", "q");
    char **k1 = NULL, **k2 = NULL;
    int n1 = 0, n2 = 0;
    ASSERT_OK(split(e.db, "", 0, "\xff", 1, 1000000, 0, &k1, &n1));
    rl_db_close(e.db);
    ASSERT_OK(rl_db_open(e.url, NULL, &e.db));
    ASSERT_EQ(est_ok(e.db, "", "\xff"), before);
    ASSERT_EQ(est_ok(e.db, "d", "q"), before_sub);
    ASSERT_OK(split(e.db, "", 0, "\xff", 1, 1000000, 0, &k2, &n2));
    ASSERT_EQ(n1, n2);
    for (int i = 0; i < n1; i++) ASSERT_STR_EQ(k1[i], k2[i]);
    expect_within(e.db, d, "", "\xff");
    free_keys(k1, n1);
    free_keys(k2, n2);
    free(d);
    kvt_close(&e);
}

/* kv-14.4: split points: begin and end included, strictly increasing, every shard boundary
 * inside the range included (a cluster), each chunk's true size within the bound of chunk_size
 * (all but the last, and those ending at a shard boundary, from both sides). */
TEST(kv_14_4_split_points) {
    kvt_env e;
    kvt_open(&e);
    dataset *d = calloc(1, sizeof *d);
    load(&e, d);
    static char shards[256][64];
    int n_shards = shard_begins(e.db, "a", "z", shards, 256);
    print_message("  %d shard boundaries inside [a, z)\n", n_shards);
    const int64_t chunks[] = {2000000, 1000000};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        int64_t chunk = chunks[c];
        char **k = NULL;
        int n = 0;
        ASSERT_OK(split(e.db, "a", 1, "z", 1, chunk, 0, &k, &n));
        print_message("  chunk %lld: %d keys\n", (long long)chunk, n);
        ASSERT_TRUE(n >= 2);
        ASSERT_STR_EQ(k[0], "a");
        ASSERT_STR_EQ(k[n - 1], "z");
        for (int i = 1; i < n; i++)
            if (strcmp(k[i - 1], k[i]) >= 0) fail_msg("split keys not increasing at %d: %s, %s", i, k[i - 1], k[i]);
        for (int s = 0; s < n_shards; s++) {
            int found = 0;
            for (int i = 0; i < n; i++) found |= !strcmp(k[i], shards[s]);
            if (!found) fail_msg("shard boundary %s missing from the split points", shards[s]);
        }
        double total = true_bytes(d, "a", "z");
        ASSERT_TRUE(n - 1 >= (int)(total / chunk / 2)); /* about total / chunk chunks, at least half */
        for (int i = 1; i < n; i++) {
            double tb = true_bytes(d, k[i - 1], k[i]);
            int at_shard = 0;
            for (int s = 0; s < n_shards; s++) at_shard |= !strcmp(k[i], shards[s]);
            if (tb > chunk + bound(chunk))
                fail_msg("chunk [%s, %s) holds %.0f bytes, over %lld + %.0f", k[i - 1], k[i], tb, (long long)chunk,
                         bound(chunk));
            if (i < n - 1 && !at_shard && tb < chunk - bound(chunk) - D_MAX)
                fail_msg("chunk [%s, %s) holds %.0f bytes, under %lld - %.0f", k[i - 1], k[i], tb, (long long)chunk,
                         bound(chunk) + D_MAX);
        }
        free_keys(k, n);
    }
    /* A chunk larger than the range: just [begin, end]; begin == end: [begin]. */
    char **k = NULL;
    int n = 0;
    ASSERT_OK(split(e.db, "a", 1, "z", 1, (int64_t)1 << 40, 0, &k, &n));
    ASSERT_EQ(n, 2 + n_shards);
    free_keys(k, n);
    ASSERT_OK(split(e.db, "k", 1, "k", 1, 1000, 0, &k, &n));
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(k[0], "k");
    free_keys(k, n);
    /* Up to "\xff" is legal, and with ACCESS_SYSTEM_KEYS up to "\xff\xff". */
    ASSERT_OK(split(e.db, "", 0, "\xff", 1, 4000000, 0, &k, &n));
    ASSERT_STR_EQ(k[0], "");
    free_keys(k, n);
    ASSERT_OK(split(e.db, "", 0, "\xff\xff", 2, 4000000, 1, NULL, NULL));
    free(d);
    kvt_close(&e);
}

/* kv-14.5: argument errors, FoundationDB's codes. */
TEST(kv_14_5_bad_arguments) {
    kvt_env e;
    kvt_open(&e);
    int rc;
    estimate(e.db, "b", 1, "a", 1, &rc);
    ASSERT_RC(rc, RL_E_INVERTED_RANGE);
    ASSERT_RC(split(e.db, "b", 1, "a", 1, 1000, 0, NULL, NULL), RL_E_INVERTED_RANGE);
    ASSERT_RC(split(e.db, "a", 1, "b", 1, 0, 0, NULL, NULL), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_RC(split(e.db, "a", 1, "b", 1, -5, 0, NULL, NULL), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_RC(split(e.db, "a", 1, "\xff\x01", 2, 1000, 0, NULL, NULL), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    ASSERT_RC(split(e.db, "a", 1, "\xff\xff\x01", 3, 1000, 1, NULL, NULL), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    /* Estimates go anywhere (FoundationDB checks no key), system keys included. */
    ASSERT_TRUE(estimate(e.db, "", 0, "\xff\xff\xff", 3, &rc) >= 0);
    ASSERT_OK(rc);
    /* A cancelled transaction refuses both. */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    rl_txn_cancel(t);
    rl_future *f = rl_txn_get_estimated_range_size_bytes(t, "a", 1, "b", 1);
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(f);
    f = rl_txn_get_range_split_points(t, "a", 1, "b", 1, 100);
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_CANCELLED);
    /* The getter of another kind. */
    int64_t v;
    ASSERT_RC(rl_future_get_int64(f, &v), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(f);
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(e.db, &t));
    f = rl_txn_get_estimated_range_size_bytes(t, "a", 1, "b", 1);
    ASSERT_OK(rl_future_wait(f));
    const rl_slice *keys;
    int n;
    ASSERT_RC(rl_future_get_key_array(f, &keys, &n), RL_E_CLIENT_INVALID_OPERATION);
    rl_future_free(f);
    rl_txn_free(t);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_14_1_estimate_known_dataset), T(kv_14_2_estimate_follows_writes),
             T(kv_14_3_estimate_survives_restart), T(kv_14_4_split_points), T(kv_14_5_bad_arguments))
