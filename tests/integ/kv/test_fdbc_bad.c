/* test_fdbc_bad.c — bad input through FoundationDB's C API on build/fdb/libfdb_c.so (declared
 * from the documentation in fdbc_api.h): every call returns FoundationDB's error code and nothing
 * crashes or leaks (run it under ASan: build-*-asan).
 *
 *   fdbc-bad-1.1  NULL handles and NULL out-parameters: client_invalid_operation (2000)
 *   fdbc-bad-1.2  negative lengths and NULL bytes with a length: 2000, deferred for void calls
 *                 (the commit and later reads fail with it until reset)
 *   fdbc-bad-1.3  unknown options (invalid_option 2007), bad option values (2006), options that
 *                 cannot be honoured (unsupported_operation 2108)
 *   fdbc-bad-1.4  range limits, streaming modes, mutation types, limits on keys and values,
 *                 inverted ranges, conflict range types, read versions (0 and negative are
 *                 version_invalid 2011, also for a watch, and on_error keeps it), system keys
 *   fdbc-bad-1.5  futures destroyed before they complete: their callbacks never run
 *   fdbc-bad-1.6  a transaction destroyed with futures outstanding: they complete with
 *                 transaction_cancelled (1025), callbacks included, and are destroyed afterwards
 *   fdbc-bad-1.7  cancel, release_memory, a getter before ready (2015), a getter of another kind
 *   fdbc-bad-1.8  fdb_future_block_until_ready on the network thread: blocked_from_network_thread
 *   fdbc-bad-1.9  what cannot be served: tenants, addresses, connection strings, URLs; a watch
 *                 of a transaction destroyed before its commit
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "fdbc_api.h"

static fdbt_client cl;

#define K(s) (const uint8_t *)(s), (int)strlen(s)

static FDBDatabase *open_db(const char *url) {
    if (!cl.started && fdbt_start(&cl)) fail_msg("cannot start the client over %s", fdbt_lib_path());
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

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

TEST(fdbc_bad_1_1) {
    FDBDatabase *db = open_db("mem:");
    ASSERT_EQ(cl.api.create_database(NULL, NULL), 2000);
    ASSERT_EQ(cl.api.database_create_transaction(db, NULL), 2000);
    ASSERT_EQ(cl.api.database_create_transaction(NULL, NULL), 2000);
    ASSERT_EQ(cl.api.database_set_option(NULL, 500, NULL, 0), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(NULL, K("k"), 0)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(NULL)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_read_version(NULL)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(NULL, 1020)), 2000);
    ASSERT_EQ(cl.api.transaction_set_option(NULL, 500, NULL, 0), 2000);
    ASSERT_EQ(cl.api.transaction_add_conflict_range(NULL, K("a"), K("b"), 0), 2000);
    cl.api.transaction_set(NULL, K("k"), K("v"));
    cl.api.transaction_clear(NULL, K("k"));
    cl.api.transaction_reset(NULL);
    cl.api.transaction_cancel(NULL);
    cl.api.transaction_destroy(NULL);
    cl.api.database_destroy(NULL);
    cl.api.future_destroy(NULL);
    cl.api.future_cancel(NULL);
    cl.api.future_release_memory(NULL);
    ASSERT_EQ(cl.api.future_block_until_ready(NULL), 2000);
    ASSERT_EQ(cl.api.future_get_error(NULL), 2000);
    FDBTransaction *tr = new_tr(db);
    ASSERT_EQ(cl.api.transaction_get_committed_version(tr, NULL), 2000);
    FDBFuture *f = cl.api.transaction_get(tr, K("k"), 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_EQ(cl.api.future_get_value(f, NULL, NULL, NULL), 2000);
    ASSERT_EQ(cl.api.future_set_callback(f, NULL, NULL), 2000);
    cl.api.future_destroy(f);
    f = cl.api.transaction_get_range(tr, K("a"), 0, 1, K("b"), 0, 1, 0, 0, FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_EQ(cl.api.future_get_keyvalue_array(f, NULL, NULL, NULL), 2000);
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_bad_1_2) {
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *tr = new_tr(db);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, (const uint8_t *)"k", -1, 0)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, NULL, 5, 0)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_key(tr, NULL, 3, 0, 1, 0)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_range(tr, K("a"), 0, 1, (const uint8_t *)"b", -4, 0, 1, 0,
                                                                  0, FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0)),
              2000);
    ASSERT_EQ(
        fdbt_wait_destroy(&cl, cl.api.transaction_get_mapped_range(tr, K("a"), 0, 1, K("b"), 0, 1, (const uint8_t *)"m",
                                                                   -1, 0, 0, FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0)),
        2000);
    ASSERT_EQ(cl.api.transaction_add_conflict_range(tr, (const uint8_t *)"a", -1, K("b"), 0), 2000);
    /* The empty key is a key: NULL with length 0 is fine. */
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, NULL, 0, 0)));
    /* A void call with a negative length: deferred to the commit and to later reads. */
    cl.api.transaction_set(tr, K("k"), (const uint8_t *)"v", -1);
    cl.api.transaction_set(tr, K("k2"), K("fine"));
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k2"), 0)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(tr, 2000)), 2000); /* not retryable */
    cl.api.transaction_reset(tr);
    cl.api.transaction_clear(tr, (const uint8_t *)"k", -3);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)), 2000);
    cl.api.transaction_reset(tr);
    cl.api.transaction_clear_range(tr, NULL, 2, K("z"));
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)), 2000);
    cl.api.transaction_reset(tr);
    cl.api.transaction_atomic_op(tr, K("k"), (const uint8_t *)"x", -8, FDB_MUTATION_TYPE_ADD);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)), 2000);
    /* After a reset the transaction works. */
    cl.api.transaction_reset(tr);
    cl.api.transaction_set(tr, K("k"), K("v"));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

static void le64(uint8_t *out, int64_t v) {
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)v >> (8 * i));
}

TEST(fdbc_bad_1_3) {
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *tr = new_tr(db);
    uint8_t v[8];
    ASSERT_EQ(cl.api.network_set_option(9999, NULL, 0), 2007);
    ASSERT_EQ(cl.api.network_set_option(FDB_NET_OPTION_TRACE_ENABLE, NULL, -1), 2006);
    ASSERT_EQ(cl.api.database_set_option(db, 9999, NULL, 0), 2007);
    ASSERT_EQ(cl.api.database_set_option(db, FDB_DB_OPTION_TRANSACTION_TIMEOUT, NULL, 0), 2006);
    ASSERT_EQ(cl.api.database_set_option(db, FDB_DB_OPTION_TRANSACTION_TIMEOUT, v, 4), 2006);
    le64(v, -5);
    ASSERT_EQ(cl.api.database_set_option(db, FDB_DB_OPTION_TRANSACTION_TIMEOUT, v, 8), 2006);
    ASSERT_EQ(cl.api.database_set_option(db, 27, NULL, 0), 2108); /* snapshot_ryw_disable */
    ASSERT_EQ(cl.api.transaction_set_option(tr, 9999, NULL, 0), 2007);
    ASSERT_EQ(cl.api.transaction_set_option(tr, -1, NULL, 0), 2007);
    ASSERT_EQ(cl.api.transaction_set_option(tr, FDB_TR_OPTION_TIMEOUT, NULL, 0), 2006);
    ASSERT_EQ(cl.api.transaction_set_option(tr, FDB_TR_OPTION_TIMEOUT, v, 7), 2006);
    ASSERT_EQ(cl.api.transaction_set_option(tr, FDB_TR_OPTION_TIMEOUT, v, 8), 2006); /* -5 */
    le64(v, -2);
    ASSERT_EQ(cl.api.transaction_set_option(tr, FDB_TR_OPTION_RETRY_LIMIT, v, 8), 2006);
    le64(v, 10);
    ASSERT_EQ(cl.api.transaction_set_option(tr, FDB_TR_OPTION_SIZE_LIMIT, v, 8), 2006);
    ASSERT_EQ(cl.api.transaction_set_option(tr, FDB_TR_OPTION_TIMEOUT, v, -8), 2006);
    ASSERT_EQ(cl.api.transaction_set_option(tr, 601, NULL, 0), 2108);  /* snapshot_ryw_disable */
    ASSERT_EQ(cl.api.transaction_set_option(tr, 1100, NULL, 0), 2108); /* bypass_unreadable */
    ASSERT_OK(cl.api.transaction_set_option(tr, 200, NULL, 0));        /* priority hints */
    ASSERT_OK(cl.api.transaction_set_option(tr, 800, K("tag")));
    /* A timeout that elapses: transaction_timed_out (1031), not retryable. */
    le64(v, 1);
    ASSERT_OK(cl.api.transaction_set_option(tr, FDB_TR_OPTION_TIMEOUT, v, 8));
    sleep_ms(20);
    fdb_error_t rc = fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k"), 0));
    ASSERT_EQ(rc, 1031);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(tr, rc)), 1031);
    /* reset restores the defaults: no timeout any more. */
    cl.api.transaction_reset(tr);
    sleep_ms(5);
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k"), 0)));
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

static fdb_error_t commit_after(FDBTransaction *tr) {
    fdb_error_t rc = fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr));
    cl.api.transaction_reset(tr);
    return rc;
}

TEST(fdbc_bad_1_4) {
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *tr = new_tr(db);
#define RANGE(lim, tb, mode, it) \
    fdbt_wait_destroy(&cl, cl.api.transaction_get_range(tr, K("a"), 0, 1, K("b"), 0, 1, lim, tb, mode, it, 0, 0))
    ASSERT_EQ(RANGE(-2, 0, FDB_STREAMING_MODE_WANT_ALL, 0), 2012);
    ASSERT_EQ(RANGE(0, -7, FDB_STREAMING_MODE_WANT_ALL, 0), 2012);
    ASSERT_OK(RANGE(-1, -1, FDB_STREAMING_MODE_WANT_ALL, 0)); /* -1: unlimited */
    ASSERT_EQ(RANGE(0, 0, FDB_STREAMING_MODE_EXACT, 0), 2210);
    ASSERT_EQ(RANGE(0, 0, FDB_STREAMING_MODE_ITERATOR, 0), 2000);
    ASSERT_EQ(RANGE(0, 0, 42, 0), 2000);
    ASSERT_OK(RANGE(5, 0, FDB_STREAMING_MODE_EXACT, 0));
#undef RANGE
    /* Void calls with bad arguments: their error comes with the commit. */
    cl.api.transaction_atomic_op(tr, K("k"), K("x"), 99);
    ASSERT_EQ(commit_after(tr), 2018);
    cl.api.transaction_clear_range(tr, K("z"), K("a"));
    ASSERT_EQ(commit_after(tr), 2005);
    static uint8_t big[100001];
    cl.api.transaction_set(tr, big, 10001, K("v"));
    ASSERT_EQ(commit_after(tr), 2102);
    cl.api.transaction_set(tr, K("k"), big, 100001);
    ASSERT_EQ(commit_after(tr), 2103);
    ASSERT_EQ(cl.api.transaction_add_conflict_range(tr, K("a"), K("b"), 7), 2000);
    ASSERT_EQ(cl.api.transaction_add_conflict_range(tr, K("b"), K("a"), 0), 2005);
    /* Read versions: negative is invalid, a second one is already set. */
    cl.api.transaction_set_read_version(tr, -5);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k"), 0)), 2011);
    cl.api.transaction_reset(tr);
    /* Version 0 is invalid too (FoundationDB's rule), not a read that is too old: a watch on the
     * transaction fails with it and on_error does not retry it (the Node binding's watch test). */
    cl.api.transaction_set_read_version(tr, 0);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_watch(tr, K("k"))), 2011);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k"), 0)), 2011);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(tr, 2011)), 2011);
    cl.api.transaction_reset(tr);
    int64_t rv;
    FDBFuture *f = cl.api.transaction_get_read_version(tr);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_OK(cl.api.future_get_int64(f, &rv));
    cl.api.future_destroy(f);
    if (rv <= 0) rv = 1; /* a fresh mem: database starts at version 0 */
    cl.api.transaction_set_read_version(tr, rv);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k"), 0)), 2010);
    cl.api.transaction_reset(tr);
    /* A read version far in the future: future_version (1009). */
    cl.api.transaction_set_read_version(tr, rv + 1000000000LL);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("k"), 0)), 1009);
    cl.api.transaction_reset(tr);
    /* System keys: unreadable without an option; READ_SYSTEM_KEYS reads but does not write. */
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("\xff/x"), 0)), 2004);
    cl.api.transaction_set(tr, K("\xff/x"), K("v"));
    ASSERT_EQ(commit_after(tr), 2004);
    ASSERT_OK(cl.api.transaction_set_option(tr, FDB_TR_OPTION_READ_SYSTEM_KEYS, NULL, 0));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("\xff/x"), 0)));
    cl.api.transaction_set(tr, K("\xff/x"), K("v"));
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)), 2004);
    cl.api.transaction_reset(tr);
    /* reset forgot READ_SYSTEM_KEYS. */
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get(tr, K("\xff/x"), 0)), 2004);
    cl.api.transaction_reset(tr);
    ASSERT_OK(cl.api.transaction_set_option(tr, FDB_TR_OPTION_ACCESS_SYSTEM_KEYS, NULL, 0));
    cl.api.transaction_set(tr, K("\xff/x"), K("v"));
    ASSERT_OK(commit_after(tr));
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

typedef struct {
    atomic_int fired;
    atomic_int errors[4]; /* 0: success, 1: 1025, 2: 1101, 3: other */
} counts;

static void count_cb(FDBFuture *f, void *ud) {
    counts *c = ud;
    fdb_error_t rc = cl.api.future_get_error(f);
    atomic_fetch_add(&c->errors[rc == 0 ? 0 : rc == 1025 ? 1 : rc == 1101 ? 2 : 3], 1);
    atomic_fetch_add(&c->fired, 1);
}

static void wait_count(counts *c, int n) {
    for (int i = 0; i < 1000 && atomic_load(&c->fired) < n; i++) sleep_ms(10);
    if (atomic_load(&c->fired) < n) fail_msg("%d of %d callbacks fired", atomic_load(&c->fired), n);
}

TEST(fdbc_bad_1_5) {
    FDBDatabase *db = open_db("defer:mem:");
    FDBTransaction *tr = new_tr(db);
    counts kept = {0}, dropped = {0};
    enum { N = 100 };
    FDBFuture *fs[N];
    int pending_dropped = 0;
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "d/%03d", i);
        fs[i] = i % 3 == 0 ? cl.api.transaction_get_range(tr, K(k), 0, 1, K("d0"), 0, 1, 0, 0,
                                                          FDB_STREAMING_MODE_WANT_ALL, 0, 1, 0)
                           : cl.api.transaction_get(tr, K(k), 1);
        if (i % 2 == 0) {
            ASSERT_OK(cl.api.future_set_callback(fs[i], count_cb, &kept));
        } else {
            if (!cl.api.future_is_ready(fs[i])) {
                pending_dropped++;
                ASSERT_OK(cl.api.future_set_callback(fs[i], count_cb, &dropped));
            }
            cl.api.future_destroy(fs[i]); /* at once, usually before it completes */
            fs[i] = NULL;
        }
    }
    wait_count(&kept, N / 2);
    FDBFuture *last = cl.api.transaction_get(tr, K("d/last"), 1);
    ASSERT_OK(fdbt_wait_destroy(&cl, last));
    /* A barrier, not a sleep: the deferred backend runs its queue a window at a time, in turn, and
     * the network thread runs posted callbacks in order; so once the callback of a read issued
     * after `last` completed has run, every earlier read has completed and any callback it posted
     * (a destroyed future's must not be) has run. */
    counts fence = {0};
    FDBFuture *ff = cl.api.transaction_get(tr, K("d/fence"), 1);
    ASSERT_OK(cl.api.future_set_callback(ff, count_cb, &fence));
    wait_count(&fence, 1);
    cl.api.future_destroy(ff);
    printf("%d futures destroyed while pending\n", pending_dropped);
    ASSERT_EQ(atomic_load(&dropped.fired), 0);
    ASSERT_EQ(atomic_load(&kept.errors[0]), N / 2);
    for (int i = 0; i < N; i += 2) cl.api.future_destroy(fs[i]);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_bad_1_6) {
    FDBDatabase *db = open_db("defer:mem:");
    counts c = {0};
    enum { N = 64 };
    FDBFuture *fs[N];
    FDBTransaction *tr = new_tr(db);
    cl.api.transaction_set(tr, K("t/k"), K("v")); /* reads must merge with a write too */
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "t/%03d", i);
        fs[i] = i % 4 == 0 ? cl.api.transaction_get_range(tr, K("t/"), 0, 1, K("t0"), 0, 1, 0, 0,
                                                          FDB_STREAMING_MODE_WANT_ALL, 0, 0, 0)
                           : cl.api.transaction_get(tr, K(k), i % 2);
        ASSERT_OK(cl.api.future_set_callback(fs[i], count_cb, &c));
    }
    cl.api.transaction_destroy(tr); /* futures outstanding */
    wait_count(&c, N);
    int cancelled = 0;
    for (int i = 0; i < N; i++) {
        ASSERT_OK(cl.api.future_block_until_ready(fs[i]));
        fdb_error_t rc = cl.api.future_get_error(fs[i]);
        ASSERT_TRUE(rc == 0 || rc == 1025);
        cancelled += rc == 1025;
        cl.api.future_destroy(fs[i]);
    }
    printf("%d of %d reads cancelled by the destroy\n", cancelled, N);
    ASSERT_EQ(atomic_load(&c.errors[3]), 0);
    ASSERT_EQ(atomic_load(&c.errors[0]) + atomic_load(&c.errors[1]), N);
    /* The database may go first too: the transaction keeps it alive. */
    tr = new_tr(db);
    cl.api.database_destroy(db);
    FDBFuture *f = cl.api.transaction_get(tr, K("t/k"), 0);
    cl.api.transaction_destroy(tr);
    fdb_error_t rc = fdbt_wait_destroy(&cl, f);
    ASSERT_TRUE(rc == 0 || rc == 1025);
}

TEST(fdbc_bad_1_7) {
    FDBDatabase *db = open_db("defer:mem:");
    FDBTransaction *tr = new_tr(db);
    counts c = {0};
    int saw_not_ready = 0, cancelled_pending = 0;
    for (int i = 0; i < 50; i++) {
        FDBFuture *f = cl.api.transaction_get(tr, K("k"), 1);
        if (!cl.api.future_is_ready(f)) {
            fdb_bool_t present;
            const uint8_t *v;
            int vl;
            fdb_error_t rc = cl.api.future_get_value(f, &present, &v, &vl);
            if (rc == 2015) saw_not_ready++;
            ASSERT_TRUE(rc == 2015 || rc == 0);
            ASSERT_OK(cl.api.future_set_callback(f, count_cb, &c));
            cl.api.future_cancel(f);
            rc = cl.api.future_get_error(f);
            ASSERT_TRUE(rc == 1101 || rc == 0);
            cancelled_pending += rc == 1101;
        } else {
            ASSERT_OK(cl.api.future_set_callback(f, count_cb, &c));
        }
        cl.api.future_cancel(f); /* on a ready future: no effect */
        ASSERT_OK(cl.api.future_block_until_ready(f));
        wait_count(&c, i + 1);
        cl.api.future_destroy(f);
    }
    printf("getter before ready %d times, %d pending futures cancelled\n", saw_not_ready, cancelled_pending);
    ASSERT_EQ(atomic_load(&c.errors[2]), cancelled_pending);
    ASSERT_TRUE(saw_not_ready > 0);
    /* release_memory: the error stays, getters say future_released (1102). */
    cl.api.transaction_set(tr, K("k"), K("v"));
    FDBFuture *f = cl.api.transaction_get(tr, K("k"), 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    cl.api.future_release_memory(f);
    ASSERT_OK(cl.api.future_get_error(f));
    fdb_bool_t present;
    const uint8_t *v;
    int vl;
    ASSERT_EQ(cl.api.future_get_value(f, &present, &v, &vl), 1102);
    cl.api.future_release_memory(f);
    cl.api.future_destroy(f);
    /* A getter of another kind. */
    f = cl.api.transaction_get(tr, K("k"), 0);
    ASSERT_OK(fdbt_wait(&cl, f));
    int64_t i64;
    const uint8_t *key;
    int kl;
    ASSERT_EQ(cl.api.future_get_int64(f, &i64), 2000);
    ASSERT_EQ(cl.api.future_get_key(f, &key, &kl), 2000);
    const FDBKeyValue *kv;
    int n;
    fdb_bool_t more;
    ASSERT_EQ(cl.api.future_get_keyvalue_array(f, &kv, &n, &more), 2000);
    ASSERT_OK(cl.api.future_get_value(f, &present, &v, &vl));
    ASSERT_MEM_EQ(v, (size_t)vl, "v", 1);
    cl.api.future_destroy(f);
    /* A commit's future holds no value. */
    f = cl.api.transaction_commit(tr);
    ASSERT_OK(fdbt_wait(&cl, f));
    ASSERT_EQ(cl.api.future_get_int64(f, &i64), 2000);
    cl.api.future_destroy(f);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

typedef struct {
    FDBTransaction *tr;
    atomic_int result; /* -1 until the callback ran */
} block_ctx;

static void block_in_cb(FDBFuture *f, void *ud) {
    block_ctx *b = ud;
    (void)f;
    /* A new read is pending on a deferred database; waiting for it here would deadlock. */
    int rc = -2;
    for (int i = 0; i < 100; i++) {
        FDBFuture *g = cl.api.transaction_get(b->tr, K("x"), 1);
        if (!cl.api.future_is_ready(g)) {
            rc = cl.api.future_block_until_ready(g);
            cl.api.future_destroy(g);
            break;
        }
        cl.api.future_destroy(g);
    }
    atomic_store(&b->result, rc);
}

TEST(fdbc_bad_1_8) {
    FDBDatabase *db = open_db("defer:mem:");
    block_ctx b = {new_tr(db), -1};
    for (int tries = 0; tries < 100 && atomic_load(&b.result) == -1; tries++) {
        FDBFuture *f = cl.api.transaction_get(b.tr, K("y"), 1);
        if (!cl.api.future_is_ready(f)) {
            ASSERT_OK(cl.api.future_set_callback(f, block_in_cb, &b));
            for (int i = 0; i < 1000 && atomic_load(&b.result) == -1; i++) sleep_ms(5);
        }
        cl.api.future_destroy(f);
    }
    ASSERT_EQ(atomic_load(&b.result), 2026);
    cl.api.transaction_destroy(b.tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_bad_1_9) {
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *tr = new_tr(db);
    FDBTenant *t = (FDBTenant *)1;
    ASSERT_EQ(cl.api.database_open_tenant(db, K("tenant"), &t), 2108);
    ASSERT_NULL(t);
    /* A watch of a transaction destroyed before its commit: transaction_cancelled, which a
     * getter of another kind reports too (the future's error comes first). */
    FDBFuture *f = cl.api.transaction_watch(tr, K("k"));
    cl.api.transaction_destroy(tr);
    ASSERT_OK(cl.api.future_block_until_ready(f));
    const char **strs;
    int n;
    ASSERT_EQ(cl.api.future_get_string_array(f, &strs, &n), 1025);
    cl.api.future_destroy(f);
    cl.api.database_destroy(db);
    /* URLs: an fdb: URL would load this library into itself; junk is a bad connection string. */
    FDBDatabase *d2 = NULL;
    ASSERT_EQ(fdbt_open(&cl, "fdb:/etc/foundationdb/fdb.cluster", &d2), 2104);
    ASSERT_EQ(fdbt_open(&cl, "nonsense:", &d2), 2104);
    ASSERT_NULL(d2);
    /* No RL_FDBC_URL and no cluster file anywhere: no_cluster_file_found (1515). */
    unsetenv("RL_FDBC_URL");
    char *old = getenv("FDB_CLUSTER_FILE") ? strdup(getenv("FDB_CLUSTER_FILE")) : NULL;
    unsetenv("FDB_CLUSTER_FILE");
    if (access("fdb.cluster", F_OK) != 0 && access("/etc/foundationdb/fdb.cluster", F_OK) != 0)
        ASSERT_EQ(cl.api.create_database(NULL, &d2), 1515);
    ASSERT_NE(cl.api.create_database("/nonexistent/dir/fdb.cluster", &d2), 0);
    ASSERT_NULL(d2);
    if (old) setenv("FDB_CLUSTER_FILE", old, 1);
    free(old);
}

static int teardown(void **state) {
    (void)state;
    fdbt_stop(&cl);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_bad_1_1), T(fdbc_bad_1_2), T(fdbc_bad_1_3),
                                       T(fdbc_bad_1_4), T(fdbc_bad_1_5), T(fdbc_bad_1_6),
                                       T(fdbc_bad_1_7), T(fdbc_bad_1_8), T(fdbc_bad_1_9)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
