/* test_fdb_backend.c — the fdb: backend itself (src/kv/fdb/): loading FoundationDB's client
 * library and its errors, the status, what it records as unknown, completions on FoundationDB's
 * network thread, read-only databases. The KV, record and query suites run through it as ctest's
 * *_fdb, *_fdb_defer, *_fdb_cluster1 and *_fdb_real (cmake/fdbc.cmake); this program covers what
 * they cannot. The client library is reclayer's own build/fdb/libfdb_c.so (RL_FDBC_LIB).
 *
 *   fdb-be-1.1  no library: file_not_found naming FoundationDB's client package; a library that
 *               is not FoundationDB's: unsupported_operation naming the missing function; both
 *               leave nothing behind, so the right library still loads afterwards
 *   fdb-be-1.2  open, status JSON (library, API version 730, client version, read version),
 *               another library in the same process refused
 *   fdb-be-1.3  mapped reads: served_locally is -1 (unknown), point-mode mappers answered
 *               exactly (present and absent records), range mode with its `more`
 *   fdb-be-1.4  completions and callbacks of pending reads come from FoundationDB's network
 *               thread; 100 reads in flight at one version share one FoundationDB transaction
 *   fdb-be-1.5  a read-only database refuses writes (read_only_database), reads work
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "reclayer/kv.h"
#include "reclayer/version.h"
#include "test.h"

static const char *lib_path(void) {
    const char *p = getenv("RL_FDBC_LIB");
    return p && *p ? p : RL_BIN_DIR "/fdb/libfdb_c.so";
}

static rl_db *open_fdb(const char *inner, const rl_db_options *o) {
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
    setenv("RL_FDBC_URL", inner, 1);
    rl_db *db = NULL;
    int rc = rl_db_open("fdb:", o, &db);
    if (rc) fail_msg("rl_db_open(fdb:) over %s: %s %s", inner, rl_error_name(rc), rl_last_error_detail());
    return db;
}

static int loaded; /* the library is loaded into this process (no more error cases then) */

TEST(fdb_be_1_1) {
    if (loaded) skip();
    rl_db *db = NULL;
    setenv("RL_FDB_LIBRARY", "/nonexistent/dir/libfdb_c.so", 1);
    ASSERT_RC(rl_db_open("fdb:/etc/foundationdb/fdb.cluster", NULL, &db), RL_E_FILE_NOT_FOUND);
    ASSERT_NULL(db);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "/nonexistent/dir/libfdb_c.so"));
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "FoundationDB's client package"));
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "7.1 or later"));
    /* A shared library that is not FoundationDB's client. */
    setenv("RL_FDB_LIBRARY", "libm.so.6", 1);
    ASSERT_RC(rl_db_open("fdb:", NULL, &db), RL_E_UNSUPPORTED_OPERATION);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "lacks fdb_get_max_api_version"));
    /* Nothing was left behind: the right library loads now. */
    db = open_fdb("mem:", NULL);
    loaded = 1;
    rl_db_close(db);
}

TEST(fdb_be_1_2) {
    rl_db *db = open_fdb("mem:", NULL);
    loaded = 1;
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(db, &js));
    ASSERT_NOT_NULL(strstr(js, "\"backend\": \"fdb\""));
    ASSERT_NOT_NULL(strstr(js, "\"api_version\": 730"));
    ASSERT_NOT_NULL(strstr(js, rl_version_string())); /* fdb_get_client_version names the build */
    ASSERT_NOT_NULL(strstr(js, "\"read_version\": "));
    ASSERT_NULL(strstr(js, "\"read_version\": null"));
    printf("%s\n", js);
    rl_free(js);
    rl_db_close(db);
    /* One client library per process: another one is refused, saying which is loaded. */
    setenv("RL_FDB_LIBRARY", "/some/other/libfdb_c.so", 1);
    ASSERT_RC(rl_db_open("fdb:", NULL, &db), RL_E_UNSUPPORTED_OPERATION);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "is loaded"));
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
}

static void put(rl_db *db, const uint8_t *k, size_t kl, const char *v) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set(t, k, kl, v, strlen(v)));
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
}

static size_t tup_str(uint8_t *out, const char *s) {
    size_t n = strlen(s);
    out[0] = 0x02;
    memcpy(out + 1, s, n);
    out[n + 1] = 0;
    return n + 2;
}

TEST(fdb_be_1_3) {
    rl_db *db = open_fdb("mem:", NULL);
    loaded = 1;
    /* Index ("i", k) -> records ("r", k) stored whole, plus ("r", k, "x") beside them. */
    const char *ks[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        uint8_t k[32];
        size_t l = tup_str(k, "i");
        l += tup_str(k + l, ks[i]);
        put(db, k, l, "");
        if (i == 1) continue; /* "b" has no record */
        l = tup_str(k, "r");
        l += tup_str(k + l, ks[i]);
        put(db, k, l, ks[i]);
        l += tup_str(k + l, "x");
        put(db, k, l, "extra");
    }
    uint8_t b[8], e[8], m[64];
    size_t bl = tup_str(b, "i");
    memcpy(e, b, bl);
    e[bl - 1] = 1;
    for (int range = 0; range < 2; range++) {
        size_t ml = tup_str(m, "r");
        ml += tup_str(m + ml, "{K[1]}");
        if (range) ml += tup_str(m + ml, "{...}");
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(db, &t));
        rl_future *f = rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(b, bl), RL_FIRST_GREATER_OR_EQUAL(e, bl), m,
                                               ml, 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
        ASSERT_OK(rl_future_wait(f));
        const rl_mapped_keyvalue *mk;
        int n, more;
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &mk, &n, &more));
        ASSERT_EQ(n, 3);
        ASSERT_FALSE(more);
        for (int i = 0; i < 3; i++) {
            ASSERT_EQ(mk[i].served_locally, -1);
            ASSERT_EQ(mk[i].is_range, range);
            ASSERT_FALSE(mk[i].more);
            int want = i == 1 ? 0 : (range ? 2 : 1);
            ASSERT_EQ(mk[i].n_kvs, want);
            if (want) ASSERT_MEM_EQ(mk[i].kvs[0].value, mk[i].kvs[0].value_len, ks[i], 1);
            if (!range) ASSERT_EQ(mk[i].end_len, mk[i].begin_len + 1);
        }
        rl_future_free(f);
        rl_txn_free(t);
    }
    rl_db_close(db);
}

typedef struct {
    atomic_int fired;
    atomic_int other_thread;
    pthread_t caller;
} cb_count;

static void on_done(rl_future *f, void *ud) {
    cb_count *c = ud;
    (void)f;
    if (!pthread_equal(pthread_self(), c->caller)) atomic_fetch_add(&c->other_thread, 1);
    atomic_fetch_add(&c->fired, 1);
}

TEST(fdb_be_1_4) {
    rl_db *db = open_fdb("defer:mem:", NULL);
    loaded = 1;
    put(db, (const uint8_t *)"k", 1, "v");
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *rv = rl_txn_get_read_version(t);
    ASSERT_OK(rl_future_wait(rv));
    rl_future_free(rv);
    cb_count c = {0, 0, pthread_self()};
    enum { N = 100 };
    rl_future *fs[N];
    for (int i = 0; i < N; i++) {
        fs[i] = rl_txn_get(t, "k", 1, RL_SNAPSHOT);
        ASSERT_OK(rl_future_set_callback(fs[i], on_done, &c));
    }
    for (int i = 0; i < N; i++) {
        ASSERT_OK(rl_future_wait(fs[i]));
        int present, vl;
        const uint8_t *v;
        ASSERT_OK(rl_future_get_value(fs[i], &present, &v, &vl));
        ASSERT_TRUE(present);
        rl_future_free(fs[i]);
    }
    ASSERT_EQ(atomic_load(&c.fired), N);
    printf("%d of %d callbacks ran on another thread (FoundationDB's network thread)\n", atomic_load(&c.other_thread),
           N);
    ASSERT_TRUE(atomic_load(&c.other_thread) > 0);
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(db, &js));
    ASSERT_NOT_NULL(strstr(js, "\"pooled_transactions\": {\"active\": "));
    rl_free(js);
    rl_txn_free(t);
    rl_db_close(db);
}

TEST(fdb_be_1_5) {
    rl_db_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.read_only = 1;
    rl_db *db = open_fdb("mem:", &o);
    loaded = 1;
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *f = rl_txn_get(t, "k", 1, 0);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    ASSERT_OK(rl_txn_set(t, "k", 1, "v", 1));
    f = rl_txn_commit(t);
    ASSERT_RC(rl_future_wait(f), RL_E_READ_ONLY_DATABASE);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
}

RL_TEST_MAIN(T(fdb_be_1_1), T(fdb_be_1_2), T(fdb_be_1_3), T(fdb_be_1_4), T(fdb_be_1_5))
