/* test_fdbc_workload.c — a program written only against FoundationDB's documented C API
 * (fdbc_api.h: its own declarations, the library loaded with dlopen) running a mixed workload on
 * build/fdb/libfdb_c.so over reclayer: the life cycle, reads and writes, conflicts and retries
 * through on_error, concurrent read-modify-write from several threads, versionstamps, mapped
 * ranges in range mode, and callbacks from the network thread.
 *
 *   fdbc-1.1  API version selection and network life cycle: FoundationDB's error codes (a second
 *             fdb_run_network while it runs is checked in fdbc-1.7, once callbacks proved it runs)
 *   fdbc-1.2  set, get, get_key selectors, get_range (limit, more, reverse), clear_range, atomic add
 *   fdbc-1.3  a conflict: not_committed (1020), retryable; on_error resets and the retry commits;
 *             NEXT_WRITE_NO_WRITE_CONFLICT_RANGE leaves one write out of the conflict check
 *   fdbc-1.4  4 threads x 50 read-modify-write increments through the retry loop: total 200
 *   fdbc-1.5  versionstamps: SET_VERSIONSTAMPED_KEY / _VALUE, get_versionstamp, committed version
 *   fdbc-1.6  mapped ranges in range mode: entries and records, limits and reverse, 2039, 2108
 *   fdbc-1.7  callbacks: on a pending future they run on the network thread, on a ready one at
 *             once in the calling thread; 200 pipelined reads completed by callbacks
 *   fdbc-1.8  error predicates and messages
 *   fdbc-1.9  CALLBACKS_ON_EXTERNAL_THREADS (network option 61): callbacks of pending futures run
 *             on the thread that completes them, not the network thread (runs last: the option
 *             is process-wide)
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "fdbc_api.h"

static fdbt_client cl;
static int api_checked;

static void start_once(void) {
    if (cl.started) return;
    if (fdbt_load(&cl.api, fdbt_lib_path())) fail_msg("cannot load %s", fdbt_lib_path());
    api_checked = 1;
    ASSERT_EQ(cl.api.get_max_api_version(), 730);
    /* Versions outside 610..730, and a runtime version above the header's. */
    ASSERT_EQ(cl.api.select_api_version_impl(600, 730), 2203);
    ASSERT_EQ(cl.api.select_api_version_impl(740, 740), 2203);
    ASSERT_EQ(cl.api.select_api_version_impl(730, 720), 2202);
    ASSERT_EQ(cl.api.setup_network(), 2200); /* api_version_unset */
    ASSERT_OK(cl.api.select_api_version_impl(730, 730));
    ASSERT_EQ(cl.api.select_api_version_impl(730, 730), 2201);
    FDBDatabase *db = NULL;
    ASSERT_EQ(cl.api.create_database(NULL, &db), 2008); /* network_not_setup */
    ASSERT_EQ(cl.api.run_network(), 2008);
    ASSERT_EQ(cl.api.network_set_option(FDB_NET_OPTION_TRACE_ENABLE, NULL, 0), 0);
    ASSERT_EQ(cl.api.network_set_option(9999, NULL, 0), 2007);
    ASSERT_OK(cl.api.setup_network());
    ASSERT_EQ(cl.api.setup_network(), 2009);
    if (pthread_create(&cl.net_thread, NULL, fdbt_net_main, &cl)) fail_msg("pthread_create");
    cl.started = 1;
}

static FDBDatabase *open_db(const char *url) {
    start_once();
    FDBDatabase *db = NULL;
    fdb_error_t rc = fdbt_open(&cl, url, &db);
    if (rc) fail_msg("create_database over %s: %d %s", url, rc, cl.api.get_error(rc));
    return db;
}

#define K(s) (const uint8_t *)(s), (int)strlen(s)

TEST(fdbc_1_1) {
    start_once(); /* the life cycle checks run there, once per process */
    ASSERT_TRUE(api_checked);
}

/* Read key and return its value in buf (NUL-terminated; "" when absent, *present 0). */
static fdb_error_t get_str(FDBTransaction *tr, const char *key, int snapshot, char *buf, size_t cap, int *present) {
    FDBFuture *f = cl.api.transaction_get(tr, K(key), snapshot);
    fdb_error_t rc = fdbt_wait(&cl, f);
    buf[0] = 0;
    *present = 0;
    if (rc == 0) {
        const uint8_t *v;
        int vl;
        rc = cl.api.future_get_value(f, present, &v, &vl);
        if (rc == 0 && *present) {
            size_t n = (size_t)vl < cap - 1 ? (size_t)vl : cap - 1;
            memcpy(buf, v, n);
            buf[n] = 0;
        }
    }
    cl.api.future_destroy(f);
    return rc;
}

static fdb_error_t put_abc(fdbt_client *c, FDBTransaction *tr, void *ud) {
    (void)ud;
    const char *keys[] = {"w/a", "w/b", "w/c", "w/d", "w/e"};
    for (int i = 0; i < 5; i++) c->api.transaction_set(tr, K(keys[i]), K(keys[i] + 2));
    uint8_t one[8] = {1};
    c->api.transaction_atomic_op(tr, K("w/counter"), one, 8, FDB_MUTATION_TYPE_ADD);
    c->api.transaction_atomic_op(tr, K("w/counter"), one, 8, FDB_MUTATION_TYPE_ADD);
    return 0;
}

TEST(fdbc_1_2) {
    FDBDatabase *db = open_db("mem:");
    ASSERT_OK(fdbt_run(&cl, db, put_abc, NULL, NULL));
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    char buf[64];
    int present;
    ASSERT_OK(get_str(tr, "w/c", 0, buf, sizeof buf, &present));
    ASSERT_TRUE(present);
    ASSERT_STR_EQ(buf, "c");
    ASSERT_OK(get_str(tr, "w/zz", 0, buf, sizeof buf, &present));
    ASSERT_FALSE(present);
    /* The counter: two ADDs of 1, little-endian. */
    FDBFuture *f = cl.api.transaction_get(tr, K("w/counter"), 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    const uint8_t *v;
    int vl;
    ASSERT_OK(cl.api.future_get_value(f, &present, &v, &vl));
    ASSERT_EQ(vl, 8);
    ASSERT_EQ(v[0], 2);
    cl.api.future_destroy(f);
    /* Keys: w/a w/b w/c w/counter w/d w/e. firstGreaterThan(w/b) = w/c, lastLessThan(w/b) = w/a,
     * firstGreaterOrEqual(w/a) + 4 = w/d, lastLessOrEqual(w/bb) = w/b. */
    struct {
        const char *k;
        int or_equal, offset;
        const char *want;
    } sel[] = {{"w/b", 1, 1, "w/c"}, {"w/b", 0, 0, "w/a"}, {"w/a", 0, 5, "w/d"}, {"w/bb", 1, 0, "w/b"}};
    for (int i = 0; i < 4; i++) {
        f = cl.api.transaction_get_key(tr, K(sel[i].k), sel[i].or_equal, sel[i].offset, 0);
        ASSERT_OK(fdbt_wait(&cl, f));
        const uint8_t *key;
        int kl;
        ASSERT_OK(cl.api.future_get_key(f, &key, &kl));
        ASSERT_MEM_EQ(key, (size_t)kl, sel[i].want, strlen(sel[i].want));
        cl.api.future_destroy(f);
    }
    /* Ranges: limit 2 forward (more), reverse, everything. */
    const FDBKeyValue *kv;
    int n;
    fdb_bool_t more;
    f = cl.api.transaction_get_range(tr, K("w/a"), 0, 1, K("w/e"), 0, 1, 2, 0, FDB_STREAMING_MODE_EXACT, 0, 0, 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_OK(cl.api.future_get_keyvalue_array(f, &kv, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_TRUE(more);
    ASSERT_MEM_EQ(kv[1].key, (size_t)kv[1].key_length, "w/b", 3);
    cl.api.future_destroy(f);
    f = cl.api.transaction_get_range(tr, K("w/a"), 0, 1, K("w/e"), 0, 1, 0, 0, FDB_STREAMING_MODE_WANT_ALL, 0, 0, 1);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_OK(cl.api.future_get_keyvalue_array(f, &kv, &n, &more));
    ASSERT_EQ(n, 5);
    ASSERT_FALSE(more);
    ASSERT_MEM_EQ(kv[0].key, (size_t)kv[0].key_length, "w/d", 3);
    cl.api.future_destroy(f);
    /* clear_range, read your writes, commit, read back in a new transaction. */
    cl.api.transaction_clear_range(tr, K("w/b"), K("w/d"));
    cl.api.transaction_clear(tr, K("w/e"));
    f = cl.api.transaction_get_range(tr, K("w/"), 0, 1, K("w0"), 0, 1, 0, 0, FDB_STREAMING_MODE_ITERATOR, 1, 0, 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_OK(cl.api.future_get_keyvalue_array(f, &kv, &n, &more));
    ASSERT_EQ(n, 2); /* w/a, w/d */
    cl.api.future_destroy(f);
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    int64_t cv = 0;
    ASSERT_OK(cl.api.transaction_get_committed_version(tr, &cv));
    ASSERT_TRUE(cv > 0);
    cl.api.transaction_reset(tr);
    ASSERT_OK(get_str(tr, "w/c", 0, buf, sizeof buf, &present));
    ASSERT_FALSE(present);
    ASSERT_OK(get_str(tr, "w/d", 1, buf, sizeof buf, &present));
    ASSERT_TRUE(present);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_1_3) {
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *a, *b;
    ASSERT_OK(cl.api.database_create_transaction(db, &a));
    ASSERT_OK(cl.api.database_create_transaction(db, &b));
    char buf[64];
    int present, attempts = 0;
    for (;;) {
        attempts++;
        ASSERT_OK(get_str(a, "c/x", 0, buf, sizeof buf, &present));
        if (attempts == 1) { /* b writes what a read, and commits first */
            cl.api.transaction_set(b, K("c/x"), K("b"));
            ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(b)));
        }
        cl.api.transaction_set(a, K("c/y"), K(present ? buf : "none"));
        fdb_error_t rc = fdbt_wait_destroy(&cl, cl.api.transaction_commit(a));
        if (rc == 0) break;
        ASSERT_EQ(rc, 1020);
        ASSERT_TRUE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE, rc));
        ASSERT_TRUE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE_NOT_COMMITTED, rc));
        ASSERT_FALSE(cl.api.error_predicate(FDB_ERROR_PREDICATE_MAYBE_COMMITTED, rc));
        ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(a, rc)));
        ASSERT_TRUE(attempts < 5);
    }
    ASSERT_EQ(attempts, 2);
    cl.api.transaction_reset(a);
    ASSERT_OK(get_str(a, "c/y", 0, buf, sizeof buf, &present));
    ASSERT_STR_EQ(buf, "b");
    /* NEXT_WRITE_NO_WRITE_CONFLICT_RANGE: b's next write adds no write conflict range, so a's
     * read of c/x does not conflict with it; the write after it does. */
    for (int round = 0; round < 2; round++) {
        cl.api.transaction_reset(a);
        cl.api.transaction_reset(b);
        ASSERT_OK(get_str(a, "c/x", 0, buf, sizeof buf, &present));
        if (round == 0)
            ASSERT_OK(cl.api.transaction_set_option(b, FDB_TR_OPTION_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE, NULL, 0));
        cl.api.transaction_set(b, K("c/x"), K("b2"));
        ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(b)));
        cl.api.transaction_set(a, K("c/z"), K("a"));
        ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(a)), round == 0 ? 0 : 1020);
    }
    cl.api.transaction_reset(a);
    /* A non-retryable error: on_error hands it back. */
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(a, 2102)), 2102);
    cl.api.transaction_destroy(a);
    cl.api.transaction_destroy(b);
    cl.api.database_destroy(db);
}

typedef struct {
    FDBDatabase *db;
    int n;
    atomic_int retries;
} incr_ctx;

static fdb_error_t incr(fdbt_client *c, FDBTransaction *tr, void *ud) {
    (void)ud;
    FDBFuture *f = c->api.transaction_get(tr, K("ctr"), 0);
    fdb_error_t rc = fdbt_wait(c, f);
    long v = 0;
    if (rc == 0) {
        fdb_bool_t present;
        const uint8_t *p;
        int l;
        rc = c->api.future_get_value(f, &present, &p, &l);
        if (rc == 0 && present) {
            char b[32];
            memcpy(b, p, (size_t)l);
            b[l] = 0;
            v = atol(b);
        }
    }
    c->api.future_destroy(f);
    if (rc) return rc;
    char b[32];
    int l = snprintf(b, sizeof b, "%ld", v + 1);
    c->api.transaction_set(tr, K("ctr"), (const uint8_t *)b, l);
    return 0;
}

static void *incr_thread(void *ud) {
    incr_ctx *x = ud;
    for (int i = 0; i < x->n; i++) {
        int r = 0;
        fdb_error_t rc = fdbt_run(&cl, x->db, incr, NULL, &r);
        if (rc) {
            fprintf(stderr, "increment failed: %d\n", rc);
            return (void *)1;
        }
        atomic_fetch_add(&x->retries, r);
    }
    return NULL;
}

TEST(fdbc_1_4) {
    incr_ctx x = {open_db("defer:mem:"), 50, 0};
    pthread_t th[4];
    for (int i = 0; i < 4; i++) ASSERT_EQ(pthread_create(&th[i], NULL, incr_thread, &x), 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        ASSERT_NULL(r);
    }
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(x.db, &tr));
    char buf[32];
    int present;
    ASSERT_OK(get_str(tr, "ctr", 0, buf, sizeof buf, &present));
    ASSERT_STR_EQ(buf, "200");
    printf("200 increments from 4 threads: %d retries\n", atomic_load(&x.retries));
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(x.db);
}

TEST(fdbc_1_5) {
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    /* Key "vs/" + 10-byte placeholder + "/k", offset 3 little-endian at the end. */
    uint8_t key[32] = "vs/0123456789/k";
    int kl = 15;
    key[kl] = 3, key[kl + 1] = 0, key[kl + 2] = 0, key[kl + 3] = 0;
    cl.api.transaction_atomic_op(tr, key, kl + 4, K("stamped"), FDB_MUTATION_TYPE_SET_VERSIONSTAMPED_KEY);
    uint8_t val[32] = "pre:0123456789";
    int vl = 14;
    val[vl] = 4, val[vl + 1] = 0, val[vl + 2] = 0, val[vl + 3] = 0;
    cl.api.transaction_atomic_op(tr, K("vs/value"), val, vl + 4, FDB_MUTATION_TYPE_SET_VERSIONSTAMPED_VALUE);
    FDBFuture *vsf = cl.api.transaction_get_versionstamp(tr);
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    ASSERT_OK(fdbt_wait(&cl, vsf));
    const uint8_t *vs;
    int vsl;
    ASSERT_OK(cl.api.future_get_key(vsf, &vs, &vsl));
    ASSERT_EQ(vsl, 10);
    int64_t cv;
    ASSERT_OK(cl.api.transaction_get_committed_version(tr, &cv));
    uint64_t stamp_v = 0;
    for (int i = 0; i < 8; i++) stamp_v = stamp_v << 8 | vs[i];
    ASSERT_EQ((int64_t)stamp_v, cv);
    uint8_t want_key[16];
    memcpy(want_key, "vs/", 3);
    memcpy(want_key + 3, vs, 10);
    memcpy(want_key + 13, "/k", 2);
    uint8_t want_val[14];
    memcpy(want_val, "pre:", 4);
    memcpy(want_val + 4, vs, 10);
    cl.api.future_destroy(vsf);
    cl.api.transaction_reset(tr);
    FDBFuture *f = cl.api.transaction_get(tr, want_key, 15, 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    fdb_bool_t present;
    const uint8_t *v;
    int l;
    ASSERT_OK(cl.api.future_get_value(f, &present, &v, &l));
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(v, (size_t)l, "stamped", 7);
    cl.api.future_destroy(f);
    f = cl.api.transaction_get(tr, K("vs/value"), 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_OK(cl.api.future_get_value(f, &present, &v, &l));
    ASSERT_MEM_EQ(v, (size_t)l, want_val, 14);
    cl.api.future_destroy(f);
    /* A read-only transaction has no versionstamp: no_commit_version (2021). */
    cl.api.transaction_reset(tr);
    vsf = cl.api.transaction_get_versionstamp(tr);
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    ASSERT_EQ(fdbt_wait_destroy(&cl, vsf), 2021);
    ASSERT_OK(cl.api.transaction_get_committed_version(tr, &cv));
    ASSERT_EQ(cv, -1);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

/* ---- Mapped ranges ------------------------------------------------------------------------ */

static size_t tup_str(uint8_t *out, const char *s) {
    size_t n = strlen(s);
    out[0] = 0x02;
    memcpy(out + 1, s, n);
    out[n + 1] = 0;
    return n + 2;
}

static size_t tup_int(uint8_t *out, int v) {
    out[0] = 0x15;
    out[1] = (uint8_t)v;
    return 2;
}

/* 20 records ("rec", pk, 1..3 parts), indexed by ("idx", score, pk) with score = 100 - pk. */
static fdb_error_t put_recs(fdbt_client *c, FDBTransaction *tr, void *ud) {
    (void)ud;
    uint8_t k[64];
    for (int pk = 1; pk <= 20; pk++) {
        size_t l = tup_str(k, "idx");
        l += tup_int(k + l, 100 - pk);
        l += tup_int(k + l, pk);
        c->api.transaction_set(tr, k, (int)l, (const uint8_t *)"", 0);
        for (int part = 1; part <= 1 + pk % 3; part++) {
            size_t r = tup_str(k, "rec");
            r += tup_int(k + r, pk);
            r += tup_int(k + r, part);
            char v[16];
            int vl = snprintf(v, sizeof v, "r%d/%d", pk, part);
            c->api.transaction_set(tr, k, (int)r, (const uint8_t *)v, vl);
        }
    }
    return 0;
}

TEST(fdbc_1_6) {
    FDBDatabase *db = open_db("mem:");
    ASSERT_OK(fdbt_run(&cl, db, put_recs, NULL, NULL));
    uint8_t b[16], e[16], m[64];
    size_t bl = tup_str(b, "idx");
    memcpy(e, b, bl);
    e[bl - 1] = 0x01;
    size_t ml = tup_str(m, "rec");
    ml += tup_str(m + ml, "{K[2]}");
    ml += tup_str(m + ml, "{...}");
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    for (int reverse = 0; reverse <= 1; reverse++) {
        FDBFuture *f = cl.api.transaction_get_mapped_range(tr, b, (int)bl, 0, 1, e, (int)bl, 0, 1, m, (int)ml, 7, 0,
                                                           FDB_STREAMING_MODE_EXACT, 0, 0, reverse);
        ASSERT_OK(fdbt_wait(&cl, f));
        const FDBMappedKeyValue *mkv;
        int n;
        fdb_bool_t more;
        ASSERT_OK(cl.api.future_get_mappedkeyvalue_array(f, &mkv, &n, &more));
        ASSERT_EQ(n, 7);
        ASSERT_TRUE(more);
        for (int i = 0; i < n; i++) {
            int pk = reverse ? 1 + i : 20 - i; /* ascending score = descending pk */
            ASSERT_EQ(mkv[i].key.key[mkv[i].key.key_length - 1], pk);
            ASSERT_EQ(mkv[i].getRange.m_size, 1 + pk % 3);
            char v[16];
            int vl = snprintf(v, sizeof v, "r%d/1", pk);
            ASSERT_MEM_EQ(mkv[i].getRange.data[0].value, (size_t)mkv[i].getRange.data[0].value_length, v, (size_t)vl);
        }
        cl.api.future_destroy(f);
    }
    /* Snapshot mapped reads and read-your-writes disabled are unsupported_operation. */
    FDBFuture *f = cl.api.transaction_get_mapped_range(tr, b, (int)bl, 0, 1, e, (int)bl, 0, 1, m, (int)ml, 0, 0,
                                                       FDB_STREAMING_MODE_WANT_ALL, 0, 1, 0);
    ASSERT_EQ(fdbt_wait_destroy(&cl, f), 2108);
    /* A write inside a secondary range: get_mapped_range_reads_your_writes (2039). */
    uint8_t k[32];
    size_t kl = tup_str(k, "rec");
    kl += tup_int(k + kl, 5);
    kl += tup_int(k + kl, 9);
    cl.api.transaction_set(tr, k, (int)kl, K("new"));
    f = cl.api.transaction_get_mapped_range(tr, b, (int)bl, 0, 1, e, (int)bl, 0, 1, m, (int)ml, 0, 0,
                                            FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0);
    ASSERT_EQ(fdbt_wait_destroy(&cl, f), 2039);
    cl.api.transaction_destroy(tr);
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    ASSERT_OK(cl.api.transaction_set_option(tr, FDB_TR_OPTION_READ_YOUR_WRITES_DISABLE, NULL, 0));
    f = cl.api.transaction_get_mapped_range(tr, b, (int)bl, 0, 1, e, (int)bl, 0, 1, m, (int)ml, 0, 0,
                                            FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0);
    ASSERT_EQ(fdbt_wait_destroy(&cl, f), 2108);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

/* ---- Callbacks ---------------------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fired;
    int on_net_thread;
    int on_caller;
    pthread_t caller;
} cb_state;

static void on_ready(FDBFuture *f, void *ud) {
    cb_state *s = ud;
    (void)f;
    pthread_mutex_lock(&s->mu);
    s->fired++;
    if (pthread_equal(pthread_self(), cl.net_thread)) s->on_net_thread++;
    if (pthread_equal(pthread_self(), s->caller)) s->on_caller++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Wait until n callbacks fired, 10 s at most (a deadline: every callback's broadcast wakes the
 * wait, so counting wake-ups instead gave up early on a loaded machine, with callbacks still to
 * come into s). */
static void wait_fired(cb_state *s, int n) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (s->fired < n && rc == 0) rc = pthread_cond_timedwait(&s->cv, &s->mu, &dl);
    pthread_mutex_unlock(&s->mu);
    if (s->fired < n) fail_msg("%d of %d callbacks fired within 10 s", s->fired, n);
}

TEST(fdbc_1_7) {
    FDBDatabase *db = open_db("defer:mem:"); /* completions come later, from another thread */
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    cb_state s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, pthread_self()};
    enum { N = 200 };
    FDBFuture *fs[N];
    int pending = 0;
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "cb/%03d", i);
        fs[i] = cl.api.transaction_get(tr, K(k), 1);
        if (!cl.api.future_is_ready(fs[i])) pending++;
        ASSERT_OK(cl.api.future_set_callback(fs[i], on_ready, &s));
    }
    wait_fired(&s, N);
    printf("%d of %d futures were pending when their callback was set\n", pending, N);
    ASSERT_TRUE(pending > 0);
    ASSERT_EQ(s.on_net_thread + s.on_caller, N);
    ASSERT_EQ(s.on_net_thread, pending);
    /* The network thread is running (it ran callbacks): a second fdb_run_network is refused. */
    ASSERT_EQ(cl.api.run_network(), 2025);
    for (int i = 0; i < N; i++) {
        ASSERT_OK(cl.api.future_get_error(fs[i]));
        cl.api.future_destroy(fs[i]);
    }
    /* A ready future's callback runs at once, in the calling thread. */
    FDBFuture *f = cl.api.transaction_get(tr, K("cb/x"), 1);
    ASSERT_OK(fdbt_wait(&cl, f));
    s.fired = s.on_caller = s.on_net_thread = 0;
    ASSERT_OK(cl.api.future_set_callback(f, on_ready, &s));
    ASSERT_EQ(s.fired, 1);
    ASSERT_EQ(s.on_caller, 1);
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_1_8) {
    start_once();
    ASSERT_STR_EQ(cl.api.get_error(1020), "Transaction not committed due to conflict with another transaction");
    ASSERT_STR_EQ(cl.api.get_error(0), "Success");
    ASSERT_STR_EQ(cl.api.get_error(2203), "API version not supported");
    ASSERT_NOT_NULL(cl.api.get_error(123456));
    int maybe[] = {1021, 1039}, retry[] = {1020, 1007, 1009, 1037, 1038, 1213},
        no[] = {1001, 1025, 1031, 2000, 2101, 0};
    for (size_t i = 0; i < 2; i++) {
        ASSERT_TRUE(cl.api.error_predicate(FDB_ERROR_PREDICATE_MAYBE_COMMITTED, maybe[i]));
        ASSERT_TRUE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE, maybe[i]));
        ASSERT_FALSE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE_NOT_COMMITTED, maybe[i]));
    }
    for (size_t i = 0; i < 6; i++) {
        ASSERT_TRUE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE_NOT_COMMITTED, retry[i]));
        ASSERT_TRUE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE, retry[i]));
    }
    for (size_t i = 0; i < 6; i++) ASSERT_FALSE(cl.api.error_predicate(FDB_ERROR_PREDICATE_RETRYABLE, no[i]));
    ASSERT_FALSE(cl.api.error_predicate(12345, 1020));
    ASSERT_NOT_NULL(strstr(cl.api.get_client_version(), "reclayer"));
}

TEST(fdbc_1_9) {
    FDBDatabase *db = open_db("defer:mem:");
    ASSERT_OK(cl.api.network_set_option(61, NULL, 0));
    FDBTransaction *tr;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    cb_state s = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, pthread_self()};
    enum { N = 100 };
    FDBFuture *fs[N];
    int pending = 0;
    for (int i = 0; i < N; i++) {
        fs[i] = cl.api.transaction_get(tr, K("cb/y"), 1);
        if (!cl.api.future_is_ready(fs[i])) pending++;
        ASSERT_OK(cl.api.future_set_callback(fs[i], on_ready, &s));
    }
    wait_fired(&s, N);
    ASSERT_TRUE(pending > 0);
    ASSERT_EQ(s.on_net_thread, 0);
    ASSERT_EQ(s.on_caller, N - pending);
    for (int i = 0; i < N; i++) cl.api.future_destroy(fs[i]);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

static int teardown(void **state) {
    (void)state;
    fdbt_stop(&cl);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_1_1), T(fdbc_1_2), T(fdbc_1_3), T(fdbc_1_4), T(fdbc_1_5),
                                       T(fdbc_1_6), T(fdbc_1_7), T(fdbc_1_8), T(fdbc_1_9)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
