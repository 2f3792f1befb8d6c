/* test_kv_txn.c — KV conformance, part 1: opening, writes and their limits, transactions and
 * conflicts, timeouts, the retry loop, cancel/reset, versions that advance while idle (public
 * API only, any backend by RL_TEST_URL). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <jansson.h>

#include "base/clock.h"
#include "kvtest.h"
#include "kv/kv_int.h"

/* kv-1.1: URLs and open errors. */
TEST(kv_1_1_open_errors) {
    rl_db *db = NULL;
    ASSERT_RC(rl_db_open("nope:x", NULL, &db), RL_E_BAD_URL);
    ASSERT_NULL(db);
    ASSERT_TRUE(strlen(rl_last_error_detail()) > 0);
    ASSERT_RC(rl_db_open("file:/nonexistent/rl-kv-test-dir", NULL, &db), RL_E_FILE_NOT_FOUND);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "/nonexistent/rl-kv-test-dir") != NULL);
    /* cluster: reads its cluster file first (a missing one is named in the detail). */
    ASSERT_RC(rl_db_open("cluster:/nonexistent/rl-kv-test.cluster", NULL, &db), RL_E_FILE_NOT_FOUND);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "/nonexistent/rl-kv-test.cluster") != NULL);
    ASSERT_RC(rl_db_open("cluster:", NULL, &db), RL_E_BAD_URL);
    /* fdb: loads FoundationDB's client library: tests/integ/kv/test_fdb_backend.c checks its errors. */
    ASSERT_RC(rl_db_open("file:", NULL, &db), RL_E_BAD_URL);
    ASSERT_RC(rl_db_open(NULL, NULL, &db), RL_E_BAD_URL);
    /* A directory is locked by its first opener. */
    char *dir = rl_test_tmpdir("kvlock");
    char url[4200];
    snprintf(url, sizeof url, "file:%s", dir);
    rl_db *a = NULL, *b = NULL;
    ASSERT_OK(rl_db_open(url, NULL, &a));
    ASSERT_RC(rl_db_open(url, NULL, &b), RL_E_DATABASE_LOCKED_BY_PROCESS);
    ASSERT_NULL(b);
    rl_db_close(a);
    ASSERT_OK(rl_db_open(url, NULL, &b));
    rl_db_close(b);
    rl_test_rmtree(dir);
    free(dir);
    rl_db_close(NULL);
}

/* kv-1.2: set/get/clear round trip, visibility only after commit, status JSON. */
TEST(kv_1_2_basic) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t, *u;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set(t, "a", 1, "1", 1));
    ASSERT_OK(rl_txn_set(t, "", 0, "empty", 5));
    kvt_expect(t, "a", "1", 0);
    kvt_expect(t, "", "empty", 0);
    ASSERT_OK(rl_txn_begin(e.db, &u));
    kvt_expect(u, "a", NULL, 0); /* not committed yet */
    ASSERT_OK(kvt_commit(t));
    int64_t cv;
    ASSERT_OK(rl_txn_get_committed_version(t, &cv));
    ASSERT_TRUE(cv > 0);
    rl_txn_reset(u);
    kvt_expect(u, "a", "1", 0);
    rl_future *f = rl_txn_get_read_version(u);
    int64_t rv;
    ASSERT_OK(rl_future_get_int64(f, &rv));
    ASSERT_TRUE(rv >= cv);
    /* wrong typed getter */
    ASSERT_RC(rl_future_get_value(f, NULL, NULL, NULL), RL_E_CLIENT_INVALID_OPERATION);
    rl_future_free(f);
    rl_txn_reset(t);
    ASSERT_OK(rl_txn_clear(t, "a", 1));
    ASSERT_OK(kvt_commit(t));
    rl_txn_reset(u);
    kvt_expect(u, "a", NULL, 0);
    kvt_expect(u, "", "empty", 0);
    rl_txn_free(t);
    rl_txn_free(u);
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(e.db, &js));
    ASSERT_TRUE(strstr(js, "\"read_version\"") != NULL);
    ASSERT_TRUE(strstr(js, "\"keys\"") != NULL);
    rl_free(js);
    kvt_close(&e);
}

/* Byte-wise order (shorter first on a tie), written out for the tests' expectations. */
static int lex_cmp(const char *a, size_t al, const char *b, size_t bl) {
    for (size_t i = 0; i < al && i < bl; i++)
        if (a[i] != b[i]) return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

/* kv-1.4: the edges of the readable keyspace, one byte either side of the max key (the point
 * read and the selectors decide most keys by their first byte): get needs key < max key,
 * a selector's key <= max key; a range bound past the max key is clamped to it. Expected
 * values are the FoundationDB rules, listed by hand. */
TEST(kv_1_4_legal_range_edges) {
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "", "empty", "\xfe\xff", "fe", NULL);
    static const struct {
        const char *k;
        size_t kl;
        int sys;    /* ACCESS_SYSTEM_KEYS */
        int get_ok; /* rl_txn_get legal */
        int sel_ok; /* as a firstGreaterOrEqual selector */
    } cases[] = {
        {"", 0, 0, 1, 1},         {"\xfe", 1, 0, 1, 1},         {"\xfe\xff\xff", 3, 0, 1, 1}, {"\xff", 1, 0, 0, 1},
        {"\xff\x00", 2, 0, 0, 0}, {"\xff\xff", 2, 0, 0, 0},     {"\xff", 1, 1, 1, 1},         {"\xff\xfe", 2, 1, 1, 1},
        {"\xff\xff", 2, 1, 0, 1}, {"\xff\xff\x00", 3, 1, 0, 0}, {"\xfe", 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(e.db, &t));
        if (cases[i].sys) ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0));
        rl_future *f = rl_txn_get(t, cases[i].k, cases[i].kl, 0);
        ASSERT_RC(rl_future_wait(f), cases[i].get_ok ? RL_OK : RL_E_KEY_OUTSIDE_LEGAL_RANGE);
        rl_future_free(f);
        /* As the begin of a range up to the max key: legal ones read the keys from there on
         * ("\xfe\xff" when the bound is below it). */
        const char *mk = cases[i].sys ? "\xff\xff" : "\xff";
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(cases[i].k, cases[i].kl),
                             RL_FIRST_GREATER_OR_EQUAL(mk, strlen(mk)), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
        int rc = rl_future_wait(f);
        ASSERT_RC(rc, cases[i].sel_ok ? RL_OK : RL_E_KEY_OUTSIDE_LEGAL_RANGE);
        if (rc == RL_OK) {
            const rl_keyvalue *kv;
            int n = 0, more = 0;
            ASSERT_OK(rl_future_get_keyvalue_array(f, &kv, &n, &more));
            int want =
                (lex_cmp("", 0, cases[i].k, cases[i].kl) >= 0) + (lex_cmp("\xfe\xff", 2, cases[i].k, cases[i].kl) >= 0);
            /* A cluster's system keyspace holds its shard map and server list (FoundationDB's
             * \xff/keyServers/ and \xff/serverList/): count the user keys only there. */
            int user = 0;
            for (int j = 0; j < n; j++) user += !(kv[j].key_len > 0 && kv[j].key[0] == 0xff);
            ASSERT_EQ(rl_test_is_cluster(rl_test_url()) || rl_test_is_fdb(rl_test_url()) ? user : n, want);
        }
        rl_future_free(f);
        /* firstGreaterThan of the same key as the end: legal iff the key is. */
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("", 0), RL_FIRST_GREATER_THAN(cases[i].k, cases[i].kl), 0, 0,
                             RL_STREAMING_WANT_ALL, 0, 0);
        ASSERT_RC(rl_future_wait(f), cases[i].sel_ok ? RL_OK : RL_E_KEY_OUTSIDE_LEGAL_RANGE);
        rl_future_free(f);
        rl_txn_free(t);
    }
    kvt_close(&e);
}

/* kv-1.3: size limits, system keys, inverted ranges; a failed write changes nothing. */
TEST(kv_1_3_limits) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    char *big = calloc(1, 200001);
    memset(big, 'x', 200000);
    ASSERT_OK(rl_txn_set(t, big, RL_KEY_SIZE_LIMIT, "v", 1));
    ASSERT_RC(rl_txn_set(t, big, RL_KEY_SIZE_LIMIT + 1, "v", 1), RL_E_KEY_TOO_LARGE);
    ASSERT_OK(rl_txn_set(t, "k", 1, big, RL_VALUE_SIZE_LIMIT));
    ASSERT_RC(rl_txn_set(t, "k2", 2, big, RL_VALUE_SIZE_LIMIT + 1), RL_E_VALUE_TOO_LARGE);
    ASSERT_RC(rl_txn_clear(t, big, RL_KEY_SIZE_LIMIT + 1), RL_E_KEY_TOO_LARGE);
    kvt_expect(t, "k2", NULL, 0);
    ASSERT_RC(rl_txn_set(t, "\xff/x", 3, "v", 1), RL_E_SYSTEM_KEY_WRITE);
    ASSERT_RC(rl_txn_clear(t, "\xff", 1), RL_E_SYSTEM_KEY_WRITE);
    ASSERT_RC(rl_txn_clear_range(t, "a", 1, "\xff\x01", 2), RL_E_SYSTEM_KEY_WRITE);
    ASSERT_OK(rl_txn_clear_range(t, "b", 1, "\xff", 1));
    ASSERT_RC(rl_txn_clear_range(t, "b", 1, "a", 1), RL_E_INVERTED_RANGE);
    ASSERT_RC(rl_txn_add_conflict_range(t, "b", 1, "a", 1, RL_CONFLICT_READ), RL_E_INVERTED_RANGE);
    ASSERT_RC(rl_txn_atomic_op(t, "k", 1, "\x01", 1, (rl_atomic_op)99), RL_E_INVALID_MUTATION_TYPE);
    ASSERT_RC(rl_txn_set_option(t, (rl_txn_option)12345, 0), RL_E_INVALID_OPTION);
    ASSERT_RC(rl_txn_set_option(t, RL_TXN_OPT_SIZE_LIMIT, 5), RL_E_INVALID_OPTION_VALUE);
    ASSERT_RC(rl_txn_set_option(t, RL_TXN_OPT_TIMEOUT_MS, -1), RL_E_INVALID_OPTION_VALUE);
    /* Reads beyond the user keyspace. */
    rl_future *f = rl_txn_get(t, "\xff/x", 3, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future_free(f);
    f = rl_txn_get_key(t, RL_FIRST_GREATER_OR_EQUAL("\xff\x01", 2), 0);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future_free(f);
    f = rl_txn_get(t, "k", 1, 0x80);
    ASSERT_RC(rl_future_wait(f), RL_E_INVALID_ARGUMENT);
    rl_future_free(f);
    /* With ACCESS_SYSTEM_KEYS, \xff keys can be written and read. */
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0));
    ASSERT_OK(rl_txn_set(t, "\xff/x", 3, "sys", 3));
    kvt_expect(t, "\xff/x", "sys", 0);
    /* ... but "\xff\xff" and above is the special-key space: writes, clears
     * and reads all refuse it the same way, so nothing unreadable is ever committed. */
    ASSERT_RC(rl_txn_set(t, "\xff\xff/foo", 6, "x", 1), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    ASSERT_RC(rl_txn_clear(t, "\xff\xff/foo", 6), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    ASSERT_RC(rl_txn_atomic_op(t, "\xff\xff", 2, "\x01", 1, RL_ATOMIC_ADD), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    ASSERT_RC(rl_txn_clear_range(t, "\xff/", 2, "\xff\xff/", 3), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    ASSERT_OK(rl_txn_clear_range(t, "\xff/y", 3, "\xff\xff", 2));
    f = rl_txn_get(t, "\xff\xff/foo", 6, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future_free(f);
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    /* The transaction size limit (option) and the default, checked at commit only, as FoundationDB
     * does: writes and reads never fail for it, and the size is what the commit sends (mutations
     * plus coalesced conflict ranges). */
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_SIZE_LIMIT, 1000));
    ASSERT_OK(rl_txn_set(t, "a", 1, big, 500));
    ASSERT_OK(rl_txn_set(t, "b", 1, big, 500));
    {
        int present = 0, len = 0;
        char buf[600];
        ASSERT_OK(kvt_get(t, "b", 1, 0, &present, buf, sizeof buf, &len));
        ASSERT_TRUE(present);
        ASSERT_EQ(len, 500);
    }
    ASSERT_RC(kvt_commit(t), RL_E_TRANSACTION_TOO_LARGE);
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(e.db, &t)); /* 501 bytes of mutation + 3 of write range: fits */
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_SIZE_LIMIT, 1000));
    for (int i = 0; i < 1000; i++) { /* the same read 1,000 times: one range once coalesced */
        int present = 0, len = 0;
        char buf[8];
        ASSERT_OK(kvt_get(t, "zz", 2, 0, &present, buf, sizeof buf, &len));
    }
    ASSERT_OK(rl_txn_set(t, "a", 1, big, 500));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(e.db, &t)); /* the default, 10,000,000 bytes */
    for (int n = 0; n < 101; n++) {
        char k[16];
        snprintf(k, sizeof k, "big%03d", n);
        ASSERT_OK(rl_txn_set(t, k, strlen(k), big, RL_VALUE_SIZE_LIMIT));
    }
    ASSERT_RC(kvt_commit(t), RL_E_TRANSACTION_TOO_LARGE);
    rl_txn_free(t);
    free(big);
    kvt_close(&e);
}

/* kv-2.1: write skew is refused: T1 reads x writes y, T2 reads y writes x. */
TEST(kv_2_1_write_skew) {
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "x", "0", "y", "0", NULL);
    rl_txn *t1, *t2;
    ASSERT_OK(rl_txn_begin(e.db, &t1));
    ASSERT_OK(rl_txn_begin(e.db, &t2));
    kvt_expect(t1, "x", "0", 0);
    kvt_expect(t2, "y", "0", 0);
    ASSERT_OK(rl_txn_set(t1, "y", 1, "1", 1));
    ASSERT_OK(rl_txn_set(t2, "x", 1, "1", 1));
    ASSERT_OK(kvt_commit(t1));
    ASSERT_RC(kvt_commit(t2), RL_E_NOT_COMMITTED);
    rl_future *f = rl_txn_on_error(t2, RL_E_NOT_COMMITTED);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    kvt_expect(t2, "y", "1", 0); /* retried: sees the new value */
    rl_txn_free(t1);
    rl_txn_free(t2);
    kvt_close(&e);
}

/* kv-2.2: read-only transactions never conflict; snapshot reads add no conflict; blind writes
 * don't conflict; a read of one's own write adds no conflict. */
TEST(kv_2_2_no_conflict_cases) {
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "x", "0", NULL);
    rl_txn *t1, *t2;
    /* read-only */
    ASSERT_OK(rl_txn_begin(e.db, &t1));
    kvt_expect(t1, "x", "0", 0);
    kvt_put(e.db, "x", "1", NULL);
    ASSERT_OK(kvt_commit(t1));
    int64_t cv;
    ASSERT_OK(rl_txn_get_committed_version(t1, &cv));
    ASSERT_EQ(cv, -1);
    rl_future *vf = rl_txn_get_versionstamp(t1);
    ASSERT_RC(rl_future_wait(vf), RL_E_NO_COMMIT_VERSION);
    rl_future_free(vf);
    /* snapshot read + write elsewhere */
    rl_txn_reset(t1);
    kvt_expect(t1, "x", "1", RL_SNAPSHOT);
    rl_future *rf = rl_txn_get_range(t1, RL_FIRST_GREATER_OR_EQUAL("", 0), RL_FIRST_GREATER_OR_EQUAL("\xff", 1), 0, 0,
                                     RL_STREAMING_WANT_ALL, 0, RL_SNAPSHOT);
    ASSERT_OK(rl_future_wait(rf));
    rl_future_free(rf);
    ASSERT_OK(rl_txn_set(t1, "z", 1, "z", 1));
    kvt_put(e.db, "x", "2", NULL);
    ASSERT_OK(kvt_commit(t1));
    /* blind writes to the same key */
    ASSERT_OK(rl_txn_begin(e.db, &t2));
    rl_txn_reset(t1);
    ASSERT_OK(rl_txn_set(t1, "x", 1, "a", 1));
    ASSERT_OK(rl_txn_set(t2, "x", 1, "b", 1));
    ASSERT_OK(kvt_commit(t2));
    ASSERT_OK(kvt_commit(t1));
    /* own write read back: no conflict */
    rl_txn_reset(t1);
    ASSERT_OK(rl_txn_set(t1, "x", 1, "c", 1));
    kvt_expect(t1, "x", "c", 0);
    kvt_put(e.db, "x", "d", NULL);
    ASSERT_OK(kvt_commit(t1));
    /* and a non-snapshot read does conflict */
    rl_txn_reset(t1);
    kvt_expect(t1, "x", "c", 0);
    ASSERT_OK(rl_txn_set(t1, "w", 1, "1", 1));
    kvt_put(e.db, "x", "e", NULL);
    ASSERT_RC(kvt_commit(t1), RL_E_NOT_COMMITTED);
    rl_txn_free(t1);
    rl_txn_free(t2);
    kvt_close(&e);
}

/* kv-2.3: explicit conflict ranges (read and write). */
TEST(kv_2_3_explicit_conflicts) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t1, *t2;
    ASSERT_OK(rl_txn_begin(e.db, &t1));
    ASSERT_OK(rl_txn_begin(e.db, &t2));
    rl_future *f = rl_txn_get_read_version(t1);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    ASSERT_OK(rl_txn_add_conflict_range(t1, "m", 1, "n", 1, RL_CONFLICT_READ));
    ASSERT_OK(rl_txn_set(t1, "out", 3, "1", 1));
    /* t2 only declares a write conflict inside [m, n): no mutation needed. */
    ASSERT_OK(rl_txn_add_conflict_range(t2, "m5", 2, "m6", 2, RL_CONFLICT_WRITE));
    ASSERT_OK(kvt_commit(t2));
    ASSERT_RC(kvt_commit(t1), RL_E_NOT_COMMITTED);
    /* Outside the range: no conflict. */
    rl_txn_reset(t1);
    rl_txn_reset(t2);
    f = rl_txn_get_read_version(t1);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    ASSERT_OK(rl_txn_add_conflict_range(t1, "m", 1, "n", 1, RL_CONFLICT_READ));
    ASSERT_OK(rl_txn_set(t1, "out", 3, "1", 1));
    ASSERT_OK(rl_txn_add_conflict_range(t2, "n", 1, "o", 1, RL_CONFLICT_WRITE));
    ASSERT_OK(kvt_commit(t2));
    ASSERT_OK(kvt_commit(t1));
    rl_txn_free(t1);
    rl_txn_free(t2);
    kvt_close(&e);
}

/* A hand-advanced sequencer clock (rl__db_set_clock): ud is an _Atomic uint64_t of ns. */
static uint64_t test_clock(void *ud) { return atomic_load((_Atomic uint64_t *)ud); }

/* kv-2.4: transaction_too_old with a small MVCC window; future version. */
TEST(kv_2_4_too_old) {
    if (rl_test_is_fdb(rl_test_url())) {
        printf("kv-2.4 skipped: it needs a 20 ms MVCC window, and behind fdb: the window is the "
               "FoundationDB cluster's (5 s)\n");
        skip();
    }
    if (rl_test_is_cluster(rl_test_url())) {
        /* On a cluster the MVCC window is the servers' (rlkvd --window-versions), not a db option. */
        const char *w = getenv("RL_TEST_CLUSTER_WINDOW_VERSIONS");
        if (!w || strcmp(w, "20000") != 0) {
            printf(
                "kv-2.4 skipped: it needs a 20 ms MVCC window, and on a cluster the window is the servers' "
                "(ctest runs it as unit_kv_test_kv_txn_cluster_window, on a cluster with --window-versions 20000)\n");
            skip();
        }
    }
    kvt_env e;
    rl_db_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.window_versions = 20000; /* 20 ms of versions */
    kvt_open_opts(&e, &o);
    /* Embedded backends: the sequencer's clock is the test's (rl__db_set_clock), advanced by hand;
     * a cluster's sequencer is in rlkvd, so there the test waits for wall time to pass. */
    _Atomic uint64_t now = 1000000000;
    int fake = rl__db_set_clock(e.db, test_clock, &now) == RL_OK;
    kvt_put(e.db, "a", "1", NULL);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    rl_future *f = rl_txn_get_read_version(t);
    int64_t rv;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_int64(f, &rv));
    rl_future_free(f);
    for (int i = 0; i < 10; i++) {
        if (fake) now += 10000000; /* 10 ms of versions */
        else usleep(10000);
        kvt_put(e.db, "a", "2", "b", "x", NULL);
    }
    int present, len;
    char buf[16];
    ASSERT_RC(kvt_get(t, "a", 1, 0, &present, buf, sizeof buf, &len), RL_E_TRANSACTION_TOO_OLD);
    /* A range read the transaction's own writes fully determine (inside a range it cleared) never
     * reaches the storage, so it is not too old (FoundationDB's read-your-writes); one reaching past
     * the cleared range is. */
    ASSERT_OK(rl_txn_clear_range(t, "p", 1, "q", 1));
    ASSERT_OK(rl_txn_set(t, "pb", 2, "v", 1));
    for (int reverse = 0; reverse < 2; reverse++) {
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("p", 1), RL_FIRST_GREATER_OR_EQUAL("q", 1), 0, 0,
                             RL_STREAMING_WANT_ALL, 0, reverse ? RL_REVERSE : 0);
        ASSERT_OK(rl_future_wait(f));
        const rl_keyvalue *kv;
        int n, more;
        ASSERT_OK(rl_future_get_keyvalue_array(f, &kv, &n, &more));
        ASSERT_EQ(n, 1);
        ASSERT_MEM_EQ(kv[0].key, kv[0].key_len, "pb", 2);
        rl_future_free(f);
        f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("p", 1), RL_FIRST_GREATER_OR_EQUAL("r", 1), 0, 0,
                             RL_STREAMING_WANT_ALL, 0, reverse ? RL_REVERSE : 0);
        ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_TOO_OLD);
        rl_future_free(f);
    }
    ASSERT_OK(rl_txn_set(t, "c", 1, "1", 1));
    /* FoundationDB: only a transaction with read conflict ranges is too old to commit. */
    ASSERT_OK(rl_txn_add_conflict_range(t, "a", 1, "b", 1, RL_CONFLICT_READ));
    ASSERT_RC(kvt_commit(t), RL_E_TRANSACTION_TOO_OLD);
    ASSERT_TRUE(rl_error_retryable(RL_E_TRANSACTION_TOO_OLD));
    f = rl_txn_on_error(t, RL_E_TRANSACTION_TOO_OLD);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    kvt_expect(t, "a", "2", 0);
    /* A read version from the future. */
    rl_txn_reset(t);
    rl_txn_set_read_version(t, rv + 1000000000000LL);
    ASSERT_RC(kvt_get(t, "a", 1, 0, &present, buf, sizeof buf, &len), RL_E_FUTURE_VERSION);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-2.5: timeouts. */
TEST(kv_2_5_timeout) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_TIMEOUT_MS, 30));
    kvt_expect(t, "a", NULL, 0);
    usleep(40000);
    int present, len;
    char buf[8];
    ASSERT_RC(kvt_get(t, "a", 1, 0, &present, buf, sizeof buf, &len), RL_E_TRANSACTION_TIMED_OUT);
    ASSERT_RC(rl_txn_set(t, "a", 1, "1", 1), RL_E_TRANSACTION_TIMED_OUT);
    ASSERT_RC(kvt_commit(t), RL_E_TRANSACTION_TIMED_OUT);
    rl_future *f = rl_txn_on_error(t, RL_E_TRANSACTION_TIMED_OUT);
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_TIMED_OUT);
    rl_future_free(f);
    /* A retryable error after the deadline also ends in transaction_timed_out. */
    f = rl_txn_on_error(t, RL_E_NOT_COMMITTED);
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_TIMED_OUT);
    rl_future_free(f);
    rl_txn_reset(t); /* restarts the clock */
    kvt_expect(t, "a", NULL, 0);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-2.9: the database's transaction_timeout_ms (FoundationDB's transaction_timeout database
 * option) is every new transaction's timeout; a transaction may set its own (0: none); a negative
 * one is refused at open. */
TEST(kv_2_9_database_timeout) {
    rl_db_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.transaction_timeout_ms = -1;
    rl_db *bad = NULL;
    ASSERT_RC(rl_db_open("mem:", &o, &bad), RL_E_INVALID_ARGUMENT);
    ASSERT_NULL(bad);
    o.transaction_timeout_ms = 500;
    kvt_env e;
    kvt_open_opts(&e, &o);
    rl_txn *t, *t2;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_begin(e.db, &t2));
    ASSERT_OK(rl_txn_set_option(t2, RL_TXN_OPT_TIMEOUT_MS, 0));
    kvt_expect(t, "a", NULL, 0);
    usleep(600000);
    int present, len;
    char buf[8];
    ASSERT_RC(kvt_get(t, "a", 1, 0, &present, buf, sizeof buf, &len), RL_E_TRANSACTION_TIMED_OUT);
    rl_future *f = rl_txn_on_error(t, RL_E_TRANSACTION_TIMED_OUT);
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_TIMED_OUT);
    rl_future_free(f);
    kvt_expect(t2, "a", NULL, 0); /* its own: none */
    rl_txn_free(t);
    rl_txn_free(t2);
    kvt_close(&e);
}

/* kv-2.6: on_error: retryable vs not, the retry limit, backoff grows. */
TEST(kv_2_6_on_error) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    rl_future *f = rl_txn_on_error(t, RL_E_KEY_TOO_LARGE);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_TOO_LARGE);
    rl_future_free(f);
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_RETRY_LIMIT, 2));
    ASSERT_OK(rl_txn_set(t, "a", 1, "1", 1));
    for (int i = 0; i < 2; i++) {
        f = rl_txn_on_error(t, RL_E_NOT_COMMITTED);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
    }
    kvt_expect(t, "a", NULL, 0); /* the retry reset the writes */
    f = rl_txn_on_error(t, RL_E_NOT_COMMITTED);
    ASSERT_RC(rl_future_wait(f), RL_E_NOT_COMMITTED);
    rl_future_free(f);
    rl_txn_reset(t); /* clears the retry count */
    f = rl_txn_on_error(t, RL_E_COMMIT_UNKNOWN_RESULT);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-2.7: cancel and reset. */
TEST(kv_2_7_cancel_reset) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set(t, "a", 1, "1", 1));
    rl_future *vs = rl_txn_get_versionstamp(t);
    ASSERT_FALSE(rl_future_is_ready(vs));
    rl_txn_cancel(t);
    ASSERT_RC(rl_future_wait(vs), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(vs);
    ASSERT_RC(rl_txn_set(t, "b", 1, "1", 1), RL_E_TRANSACTION_CANCELLED);
    ASSERT_RC(kvt_commit(t), RL_E_TRANSACTION_CANCELLED);
    rl_future *f = rl_txn_get(t, "a", 1, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(f);
    rl_txn_reset(t);
    kvt_expect(t, "a", NULL, 0);
    ASSERT_OK(rl_txn_set(t, "b", 1, "2", 1));
    ASSERT_OK(kvt_commit(t));
    rl_txn_reset(t);
    kvt_expect(t, "a", NULL, 0);
    kvt_expect(t, "b", "2", 0);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-2.8: read-modify-write races: threads increment one counter through rl_db_run; the final
 * count is exact. */
typedef struct {
    rl_db *db;
    int n;
    int attempts;
} incr_ctx;

static int incr_fn(rl_txn *t, void *ud) {
    incr_ctx *c = ud;
    c->attempts++;
    rl_future *f = rl_txn_get(t, "counter", 7, 0);
    int rc = rl_future_wait(f);
    long v = 0;
    if (rc == RL_OK) {
        int present, len;
        const uint8_t *p;
        rc = rl_future_get_value(f, &present, &p, &len);
        if (rc == RL_OK && present) {
            char buf[32];
            memcpy(buf, p, (size_t)len);
            buf[len] = 0;
            v = atol(buf);
        }
    }
    rl_future_free(f);
    if (rc) return rc;
    if (c->attempts % 3 == 0) usleep(200); /* widen the race window */
    char out[32];
    int n = snprintf(out, sizeof out, "%ld", v + 1);
    return rl_txn_set(t, "counter", 7, out, (size_t)n);
}

static void *incr_thread(void *ud) {
    incr_ctx *c = ud;
    for (int i = 0; i < c->n; i++)
        if (rl_db_run(c->db, incr_fn, c) != RL_OK) return (void *)1;
    return NULL;
}

static int fail_fn(rl_txn *t, void *ud) {
    (void)t;
    (void)ud;
    return RL_E_INDEX_UNKNOWN;
}

TEST(kv_2_8_increment_race) {
    kvt_env e;
    kvt_open(&e);
    enum { THREADS = 4, N = 60 };
    pthread_t th[THREADS];
    incr_ctx c[THREADS];
    for (int i = 0; i < THREADS; i++) {
        c[i].db = e.db;
        c[i].n = N;
        c[i].attempts = 0;
        pthread_create(&th[i], NULL, incr_thread, &c[i]);
    }
    int attempts = 0;
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(th[i], &r);
        ASSERT_NULL(r);
        attempts += c[i].attempts;
    }
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    char want[16];
    snprintf(want, sizeof want, "%d", THREADS * N);
    kvt_expect(t, "counter", want, 0);
    rl_txn_free(t);
    printf("increments %d, attempts %d\n", THREADS * N, attempts);
    /* A non-retryable error of fn comes back as is. */
    ASSERT_RC(rl_db_run(e.db, fail_fn, NULL), RL_E_INDEX_UNKNOWN);
    kvt_close(&e);
}

/* kv-2.10 helpers. Read the key "idle" in t at its current read version and write it back, then
 * commit, with the retry loop (rl_txn_on_error), at most max_attempts times; every retry after
 * transaction_too_old must get a newer read version than the attempt it follows. *out_first_rv:
 * the first attempt's read version. Returns the last outcome; *out_attempts the attempts made. */
static int idle_read_write(rl_txn *t, int max_attempts, int *out_attempts, int64_t *out_first_rv) {
    int64_t prev_rv = -1;
    int prev_err = RL_OK, rc = RL_OK;
    for (int attempt = 1; attempt <= max_attempts; attempt++) {
        *out_attempts = attempt;
        rl_future *f = rl_txn_get_read_version(t);
        int64_t rv = 0;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_int64(f, &rv);
        rl_future_free(f);
        if (rc != RL_OK) return rc;
        if (attempt == 1) *out_first_rv = rv;
        if (prev_err == RL_E_TRANSACTION_TOO_OLD && rv <= prev_rv)
            fail_msg("the retry after transaction_too_old got read version %lld, not newer than the failed "
                     "attempt's %lld",
                     (long long)rv, (long long)prev_rv);
        int present = 0, len = 0;
        char buf[16];
        rc = kvt_get(t, "idle", 4, 0, &present, buf, sizeof buf, &len);
        if (rc == RL_OK) rc = rl_txn_set(t, "idle", 4, "x", 1);
        if (rc == RL_OK) rc = kvt_commit(t);
        if (rc == RL_OK) return RL_OK;
        printf("kv-2.10: attempt %d at read version %lld: %s\n", attempt, (long long)rv, rl_error_name(rc));
        prev_rv = rv;
        prev_err = rc;
        f = rl_txn_on_error(t, rc);
        int rc2 = rl_future_wait(f);
        rl_future_free(f);
        if (rc2 != RL_OK) return rc2;
    }
    return rc;
}

/* One idle spell of kv-2.10 on e: commit, take a read version in a transaction held open, stay idle
 * (idle_us of the sequencer's clock: the test's, advanced by hand, when now is not NULL; else
 * wall time), then a new read-then-write transaction commits in at most max_attempts attempts
 * (1 on the test's clock: at once) at a read version that advanced with the idle time although
 * nothing committed, and the held transaction, now too old, commits after retries whose read
 * versions are newer each time. */
static void idle_round(kvt_env *e, _Atomic uint64_t *now, uint64_t idle_us, int max_attempts) {
    rl_txn *held, *t;
    ASSERT_OK(rl_txn_begin(e->db, &held));
    ASSERT_OK(rl_txn_begin(e->db, &t));
    ASSERT_OK(rl_txn_set_option(held, RL_TXN_OPT_TIMEOUT_MS, 20000));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_TIMEOUT_MS, 20000));
    ASSERT_OK(rl_txn_set(held, "idle", 4, "0", 1));
    ASSERT_OK(kvt_commit(held));
    int64_t cv;
    ASSERT_OK(rl_txn_get_committed_version(held, &cv));
    rl_txn_reset(held);
    rl_future *f = rl_txn_get_read_version(held);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    /* The idle spell: the condition under test. */
    if (now) *now += idle_us * 1000;
    else rl__clock_sleep_us(idle_us);
    int attempts = 0;
    int64_t rv = 0;
    ASSERT_OK(idle_read_write(t, max_attempts, &attempts, &rv));
    printf("kv-2.10: idle %llu us: read version %lld is %lld versions after the last commit; %d attempt(s)\n",
           (unsigned long long)idle_us, (long long)rv, (long long)(rv - cv), attempts);
    if (rv - cv < (int64_t)idle_us / 2)
        fail_msg("after %llu us without a commit the read version %lld is only %lld versions after the last "
                 "commit %lld: versions do not advance while nothing commits",
                 (unsigned long long)idle_us, (long long)rv, (long long)(rv - cv), (long long)cv);
    int held_attempts = 0;
    int64_t held_rv = 0;
    ASSERT_OK(idle_read_write(held, max_attempts + 1, &held_attempts, &held_rv));
    ASSERT_TRUE(held_attempts >= 2); /* its read version was older than the window */
    rl_txn_free(held);
    rl_txn_free(t);
}

/* kv-2.10: versions advance while nothing commits: after an idle spell longer than the
 * MVCC window a read-then-write transaction commits at once at a fresh read version, and a retry
 * after transaction_too_old gets a newer read version. Embedded backends use a 20 ms window and
 * the test's clock (one second of idle in no time, then 60 ms of wall time on the real clock);
 * a cluster's window is its servers': a small one (rl_with_cluster --window-versions, ctest
 * unit_kv_test_kv_txn_cluster_idle) is idled for 2.5 windows, the default 5 s one only when
 * RL_TEST_IDLE_DEFAULT_WINDOW is set (ctest unit_kv_test_kv_txn_cluster_idle_default, labelled
 * slow: 6 s of idle). */
TEST(kv_2_10_idle) {
    const char *url = rl_test_url();
    if (rl_test_is_fdb(url)) {
        printf("kv-2.10 skipped: an fdb: database's window cannot be shortened nor its clock set "
               "(integ_kv_test_fdbc_idle tests libfdb_c.so)\n");
        skip();
    }
    uint64_t idle_us = 0;
    if (rl_test_is_cluster(url)) {
        const char *w = getenv("RL_TEST_CLUSTER_WINDOW_VERSIONS");
        uint64_t window = w ? strtoull(w, NULL, 10) : 0;
        const char *dflt = getenv("RL_TEST_IDLE_DEFAULT_WINDOW");
        if (window > 0 && window <= 1000000) {
            idle_us = window * 5 / 2;
        } else if (window == 0 && dflt && *dflt == '1') {
            idle_us = 6000000;
        } else {
            printf("kv-2.10 skipped: it idles longer than the servers' MVCC window; ctest runs it as "
                   "unit_kv_test_kv_txn_cluster_idle (--window-versions 200000) and "
                   "unit_kv_test_kv_txn_cluster_idle_default (the default window, label slow)\n");
            skip();
        }
    }
    kvt_env e;
    rl_db_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.window_versions = 20000; /* embedded: 20 ms of versions (a cluster's is its servers') */
    kvt_open_opts(&e, &o);
    _Atomic uint64_t now = 1000000000;
    if (rl__db_set_clock(e.db, test_clock, &now) == RL_OK) {
        idle_round(&e, &now, 1000000, 1);              /* 50 windows on the test's clock */
        ASSERT_OK(rl__db_set_clock(e.db, NULL, NULL)); /* the monotonic clock again */
        idle_round(&e, NULL, 60000, 3);                /* 3 windows of wall time */
    } else {
        idle_round(&e, NULL, idle_us, 3);
    }
    kvt_close(&e);
}

/* kv-2.11: the special-key space reclayer has: "\xff\xff/status/json" is a status document in
 * FoundationDB's schema on every backend (a cluster's names every process and its cluster file,
 * and its connection string is the cluster file's), "\xff\xff/connection_string" and
 * "\xff\xff/cluster_file_path" are a cluster's own (absent embedded), any other special key is
 * still key_outside_legal_range; rl_db_status_fdb_json gives the same document. */
static char *special_get(rl_txn *t, const char *k, int *out_present) {
    rl_future *f = rl_txn_get(t, k, strlen(k), 0);
    const uint8_t *v;
    int len = 0;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_value(f, out_present, &v, &len));
    char *s = malloc((size_t)len + 1);
    if (len) memcpy(s, v, (size_t)len);
    s[len] = 0;
    rl_future_free(f);
    return s;
}

TEST(kv_2_11_special_keys) {
    kvt_env e;
    kvt_open(&e);
    const char *url = rl_test_url();
    int cluster = rl_test_is_cluster(url), present = 0;
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    char *js = special_get(t, "\xff\xff/status/json", &present);
    ASSERT_TRUE(present);
    json_error_t je;
    json_t *doc = json_loads(js, 0, &je);
    if (!doc) fail_msg("status/json is not JSON (%s): %s", je.text, js);
    json_t *client = json_object_get(doc, "client"), *cl = json_object_get(doc, "cluster");
    if (!json_is_true(json_object_get(json_object_get(client, "database_status"), "available")))
        fail_msg("not available: %s", js);
    ASSERT_TRUE(json_is_integer(json_object_get(client, "timestamp")));
    ASSERT_TRUE(json_is_array(json_object_get(client, "messages")));
    ASSERT_TRUE(json_is_true(json_object_get(cl, "database_available")));
    char *conn = special_get(t, "\xff\xff/connection_string", &present);
    int conn_present = present;
    char *path = special_get(t, "\xff\xff/cluster_file_path", &present);
    if (cluster) {
        const char *file = url + 8;
        ASSERT_TRUE(conn_present && present);
        ASSERT_STR_EQ(path, file);
        FILE *fp = fopen(file, "r");
        char line[1024] = "";
        ASSERT_NOT_NULL(fp);
        ASSERT_NOT_NULL(fgets(line, sizeof line, fp));
        fclose(fp);
        line[strcspn(line, "\r\n")] = 0;
        ASSERT_STR_EQ(conn, line);
        ASSERT_STR_EQ(json_string_value(json_object_get(cl, "connection_string")), line);
        ASSERT_STR_EQ(json_string_value(json_object_get(json_object_get(client, "cluster_file"), "path")), file);
        json_t *procs = json_object_get(cl, "processes"), *p;
        const char *id;
        int storage = 0, coordinator = 0;
        json_object_foreach(procs, id, p) {
            const char *role =
                json_string_value(json_object_get(json_array_get(json_object_get(p, "roles"), 0), "role"));
            ASSERT_NOT_NULL(strchr(json_string_value(json_object_get(p, "address")), ':'));
            storage += role && !strcmp(role, "storage");
            coordinator += role && !strcmp(role, "coordinator");
        }
        ASSERT_EQ(coordinator, 1);
        ASSERT_TRUE(storage >= 1);
    } else if (!rl_test_is_fdb(url)) {
        ASSERT_FALSE(conn_present || present); /* embedded: no cluster file */
        ASSERT_NULL(json_object_get(client, "cluster_file"));
    }
    free(conn);
    free(path);
    free(js);
    json_decref(doc);
    rl_future *f = rl_txn_get(t, "\xff\xff/nothing", 10, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future_free(f);
    char *direct = NULL;
    ASSERT_OK(rl_db_status_fdb_json(e.db, &direct));
    doc = json_loads(direct, 0, NULL);
    ASSERT_NOT_NULL(json_object_get(doc, "client"));
    json_decref(doc);
    rl_free(direct);
    rl_txn_free(t);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_1_1_open_errors), T(kv_1_2_basic), T(kv_1_3_limits), T(kv_1_4_legal_range_edges),
             T(kv_2_1_write_skew), T(kv_2_2_no_conflict_cases), T(kv_2_3_explicit_conflicts), T(kv_2_4_too_old),
             T(kv_2_5_timeout), T(kv_2_6_on_error), T(kv_2_7_cancel_reset), T(kv_2_8_increment_race),
             T(kv_2_9_database_timeout), T(kv_2_10_idle), T(kv_2_11_special_keys))
