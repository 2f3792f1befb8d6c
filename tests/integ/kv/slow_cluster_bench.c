/* slow_cluster_bench.c — cluster_bench_*: the cluster client's latency goals , measured
 * against real rlkvd processes on this machine and printed (a benchmark, label bench: `ctest -L
 * bench -R cluster_bench`, or run the program). Nothing is asserted beyond the results being
 * right: the figures depend on the machine and its load; docs/design.md §8.5 records a run.
 *
 *   bench-1.1  a point get through the client vs a bare PING on the same connection (goal: get
 *              <= 2x ping), both issued by the calling thread and completed on the network thread;
 *   bench-1.2  1,000 gets issued at once, then waited for, vs one get (goal: <= 10x);
 *   bench-1.3  a 1,000-entry mapped read of small Orders (index and records on one storage
 *              server) vs the embedded mapped read of the same data plus 2 round trips (goal:
 *              <= 1.5x).
 * RL_BENCH_N scales the repetitions (default 1); RL_BENCH_BURST_ONLY=1 shortens bench-1.1 to
 * profile bench-1.2. In bench-1.2 the keys are formatted before the clock starts (as the one get's
 * key is), so the issuing time is the client's alone; the client process's CPU time per get (both
 * threads, from getrusage) is printed too, a figure less at the mercy of a shared machine's
 * scheduling than wall time. */
#include <stdlib.h>
#include <sys/resource.h>

#include "cluster_procs.h"
#include "kv/cluster/cluster.h"
#include "kv/kv_int.h"
#include "tuple/tuple.h"

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct {
    double p50, p10, p90, mean;
} stats;

static stats summarize(uint64_t *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)v[i];
    stats s = {(double)v[n / 2] / 1e3, (double)v[n / 10] / 1e3, (double)v[n * 9 / 10] / 1e3, sum / n / 1e3};
    return s;
}

static int scale(void) {
    const char *e = getenv("RL_BENCH_N");
    int n = e ? atoi(e) : 1;
    return n < 1 ? 1 : n;
}

static void load_keys(rl_db *db, int n) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    for (int i = 0; i < n; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "key%05d", i);
        snprintf(v, sizeof v, "value%05d", i);
        ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
}

/* One snapshot get of key i, waited for; returns its latency. */
static uint64_t timed_get(rl_txn *t, int i) {
    char k[32];
    snprintf(k, sizeof k, "key%05d", i);
    uint64_t t0 = now_ns();
    rl_future *f = rl_txn_get(t, k, strlen(k), RL_SNAPSHOT);
    ASSERT_OK(rl_future_wait(f));
    uint64_t t1 = now_ns();
    int present, vl;
    const uint8_t *v;
    ASSERT_OK(rl_future_get_value(f, &present, &v, &vl));
    ASSERT_TRUE(present);
    rl_future_free(f);
    return t1 - t0;
}

static rl_txn *txn_with_version(rl_db *db) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get_read_version(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    return t;
}

/* A fresh transaction in place of *t, between timed spans: versions advance with time (a tick
 * every 500 ms while nothing commits), so one read version serves at most the 5 s MVCC window —
 * and a sanitizer build runs the loops below for longer than that. */
static void renew(rl_db *db, rl_txn **t) {
    rl_txn_free(*t);
    *t = txn_with_version(db);
}

/* bench-1.1 and 1.2 on one storage server. */
TEST(cluster_bench_1_1_get_vs_ping) {
    static cp_cluster c; /* static: the exit hook can still stop it after a failed assertion */
    cp_start(&c, 1, NULL, 0, 1);
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    load_keys(db, 1000);
    int n = (getenv("RL_BENCH_BURST_ONLY") ? 100 : 20000) * scale(); /* profiling the burst alone */
    uint64_t *ping = calloc((size_t)n, sizeof *ping), *get = calloc((size_t)n, sizeof *get);
    rl_txn *t = txn_with_version(db);
    for (int i = 0; i < 2000; i++) { /* warm up both paths */
        uint64_t ns;
        if (i % 500 == 0) renew(db, &t);
        ASSERT_OK(rl__kv_cluster_ping(db->be, 1, &ns));
        (void)timed_get(t, i % 1000);
    }
    /* Interleaved so both see the same machine. */
    for (int i = 0; i < n; i++) {
        if (i % 500 == 0) renew(db, &t);
        ASSERT_OK(rl__kv_cluster_ping(db->be, 1, &ping[i]));
        get[i] = timed_get(t, i % 1000);
    }
    stats sp = summarize(ping, n), sg = summarize(get, n);
    printf("bench-1.1 ping (client connection to storage 1): p50 %.1f us, p10 %.1f, p90 %.1f, mean %.1f (n %d)\n",
           sp.p50, sp.p10, sp.p90, sp.mean, n);
    printf("bench-1.1 point get:                              p50 %.1f us, p10 %.1f, p90 %.1f, mean %.1f\n", sg.p50,
           sg.p10, sg.p90, sg.mean);
    printf("bench-1.1 get / ping: p50 %.2fx, mean %.2fx (goal <= 2x)\n", sg.p50 / sp.p50, sg.mean / sp.mean);
    /* bench-1.2: 1,000 at once. */
    int rounds = 200 * scale();
    uint64_t *batch = calloc((size_t)rounds, sizeof *batch), *one = calloc((size_t)rounds, sizeof *one);
    uint64_t *issue = calloc((size_t)rounds, sizeof *issue);
    rl_future **fs = calloc(1000, sizeof *fs);
    static char keys[1000][16];
    for (int i = 0; i < 1000; i++) snprintf(keys[i], sizeof keys[i], "key%05d", i);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    for (int r = 0; r < rounds; r++) {
        if (r % 20 == 0) renew(db, &t);
        uint64_t t0 = now_ns();
        for (int i = 0; i < 1000; i++) fs[i] = rl_txn_get(t, keys[i], strlen(keys[i]), RL_SNAPSHOT);
        issue[r] = now_ns() - t0;
        for (int i = 0; i < 1000; i++) ASSERT_OK(rl_future_wait(fs[i]));
        batch[r] = now_ns() - t0;
        for (int i = 0; i < 1000; i++) {
            int present, vl;
            const uint8_t *v;
            ASSERT_OK(rl_future_get_value(fs[i], &present, &v, &vl));
            ASSERT_TRUE(present);
            rl_future_free(fs[i]);
        }
        one[r] = timed_get(t, r % 1000);
    }
    getrusage(RUSAGE_SELF, &ru1);
    double cpu_user = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e6 +
                      (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec);
    double cpu_sys = (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
                     (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
    stats sb = summarize(batch, rounds), so = summarize(one, rounds), si = summarize(issue, rounds);
    printf("bench-1.2 1,000 gets at once: p50 %.1f us (%.2f us per get), p10 %.1f, p90 %.1f (rounds %d)\n", sb.p50,
           sb.p50 / 1000, sb.p10, sb.p90, rounds);
    printf("bench-1.2 ... of which issuing the 1,000: p50 %.1f us\n", si.p50);
    printf("bench-1.2 one get:            p50 %.1f us\n", so.p50);
    printf("bench-1.2 client CPU per get (both threads, the single gets included): user %.2f us, system %.2f us\n",
           cpu_user / (rounds * 1001.0), cpu_sys / (rounds * 1001.0));
    printf(
        "bench-1.2 client context switches per round (the 1,000 and the one get): voluntary %.1f, involuntary %.1f\n",
        (double)(ru1.ru_nvcsw - ru0.ru_nvcsw) / rounds, (double)(ru1.ru_nivcsw - ru0.ru_nivcsw) / rounds);
    printf("bench-1.2 1,000 / 1: %.1fx (goal <= 10x)\n", sb.p50 / so.p50);
    free(fs);
    free(issue);
    free(batch);
    free(one);
    free(ping);
    free(get);
    rl_txn_free(t);
    rl_db_close(db);
    cp_stop(&c);
}

/* Small Orders: records ("o", "r", id) with an ~80-byte value, index ("o", "i", price, id). */
static void load_orders(rl_db *db, int n) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_buf k;
    rl__buf_init(&k);
    for (int id = 0; id < n; id++) {
        rl__tuple_packer pk;
        rl__buf_reset(&k);
        rl__tuple_packer_init(&pk, &k);
        rl__tuple_pack_string(&pk, "o", 1);
        rl__tuple_pack_string(&pk, "r", 1);
        rl__tuple_pack_int(&pk, id);
        char v[100];
        snprintf(v, sizeof v, "order %06d customer %06d price %06d padding-padding-padding-padding-padding", id,
                 id * 7 % 1000, id * 13 % 10007);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, v, strlen(v)));
        rl__buf_reset(&k);
        rl__tuple_packer_init(&pk, &k);
        rl__tuple_pack_string(&pk, "o", 1);
        rl__tuple_pack_string(&pk, "i", 1);
        rl__tuple_pack_int(&pk, id * 13 % 10007);
        rl__tuple_pack_int(&pk, id);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, "", 0));
    }
    rl__buf_release(&k);
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
}

static uint64_t timed_mapped(rl_txn *t, const rl_buf *b, const rl_buf *e, const rl_buf *mapper, int want) {
    uint64_t t0 = now_ns();
    rl_future *f = rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(b->data, b->len),
                                           RL_FIRST_GREATER_OR_EQUAL(e->data, e->len), mapper->data, mapper->len, 0, 0,
                                           RL_STREAMING_WANT_ALL, 0, 0);
    ASSERT_OK(rl_future_wait(f));
    uint64_t dt = now_ns() - t0;
    const rl_mapped_keyvalue *m;
    int n, more;
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &m, &n, &more));
    ASSERT_EQ(n, want);
    ASSERT_EQ(m[n / 2].n_kvs, 1);
    rl_future_free(f);
    return dt;
}

/* bench-1.3: a 1,000-entry mapped read on one storage server vs embedded + 2 RTT. */
TEST(cluster_bench_1_3_mapped_1000) {
    static cp_cluster c; /* static: the exit hook can still stop it after a failed assertion */
    cp_start(&c, 1, NULL, 0, 1);
    rl_db *db, *mem;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    ASSERT_OK(rl_db_open("mem:", NULL, &mem));
    load_orders(db, 1000);
    load_orders(mem, 1000);
    rl_buf mapper, b, e;
    cp_mapped_setup("o", "r", "i", 3, &mapper, &b, &e);
    int n = 300 * scale();
    uint64_t *cl = calloc((size_t)n, sizeof *cl), *em = calloc((size_t)n, sizeof *em),
             *ping = calloc((size_t)n, sizeof *ping);
    /* A fresh transaction now and then keeps the conflict ranges (1,001 per read) in check. */
    rl_txn *tc = NULL, *tm = NULL;
    for (int i = -20; i < n; i++) {
        if ((i + 20) % 50 == 0) {
            rl_txn_free(tc);
            rl_txn_free(tm);
            tc = txn_with_version(db);
            tm = txn_with_version(mem);
        }
        uint64_t a = timed_mapped(tc, &b, &e, &mapper, 1000), x = timed_mapped(tm, &b, &e, &mapper, 1000), p;
        ASSERT_OK(rl__kv_cluster_ping(db->be, 1, &p));
        if (i >= 0) cl[i] = a, em[i] = x, ping[i] = p;
    }
    stats sc = summarize(cl, n), se = summarize(em, n), sp = summarize(ping, n);
    printf("bench-1.3 mapped 1,000 on the cluster: p50 %.1f us, p10 %.1f, p90 %.1f (n %d)\n", sc.p50, sc.p10, sc.p90,
           n);
    printf("bench-1.3 mapped 1,000 embedded (mem:): p50 %.1f us; ping p50 %.1f us\n", se.p50, sp.p50);
    printf("bench-1.3 cluster / (embedded + 2 RTT): %.2fx (goal <= 1.5x)\n", sc.p50 / (se.p50 + 2 * sp.p50));
    rl_txn_free(tc);
    rl_txn_free(tm);
    free(cl);
    free(em);
    free(ping);
    rl__buf_release(&mapper);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl_db_close(mem);
    rl_db_close(db);
    cp_stop(&c);
}

RL_TEST_MAIN(T(cluster_bench_1_1_get_vs_ping), T(cluster_bench_1_3_mapped_1000))
