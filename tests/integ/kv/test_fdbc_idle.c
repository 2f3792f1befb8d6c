/* test_fdbc_idle.c — versions advance while nothing commits , seen by a program written
 * only against FoundationDB's documented C API (fdbc_api.h: the library loaded with dlopen) on
 * build/fdb/libfdb_c.so over reclayer.
 *
 *   fdbc-idle-1.1  over a one-server cluster (cluster_procs.h) whose servers run a 200 ms MVCC
 *                  window: after 500 ms without a commit, fdb_transaction_get_read_version is
 *                  newer than the last commit by most of the idle time (the coordinator's version
 *                  tick), a read-then-write transaction commits at once through the retry loop,
 *                  and a transaction whose read version was taken before the idle spell fails
 *                  with transaction_too_old (1007) and, after fdb_transaction_on_error, gets a
 *                  newer read version and commits
 *   fdbc-idle-1.2  over mem: (the embedded store, 5 s window): with nothing committing, the read
 *                  version follows the clock — 20 ms after a commit it is at least 10,000
 *                  versions newer — and a read-then-write transaction at it commits
 *
 * The idle spells are sleeps: being idle is the condition under test.
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cluster_procs.h"
#include "fdbc_api.h"
#include "test.h"

#define K(s) (const uint8_t *)(s), (int)strlen(s)

enum { FDB_E_TRANSACTION_TOO_OLD = 1007 };

static fdbt_client cl;
static cp_cluster clu; /* static: the exit hook finds it after a failed assertion */
static int clu_up;

/* Open url; its transactions time out after 10 s (a retry loop that never commits fails the
 * test instead of hanging it). */
static FDBDatabase *open_db(const char *url) {
    if (!cl.started && fdbt_start(&cl)) fail_msg("cannot start %s", fdbt_lib_path());
    FDBDatabase *db = NULL;
    fdb_error_t rc = fdbt_open(&cl, url, &db);
    if (rc) fail_msg("create_database over %s: %d %s", url, rc, cl.api.get_error(rc));
    uint8_t ms[8] = {0x10, 0x27, 0, 0, 0, 0, 0, 0}; /* 10,000, little-endian */
    ASSERT_OK(cl.api.database_set_option(db, FDB_DB_OPTION_TRANSACTION_TIMEOUT, ms, 8));
    return db;
}

static FDBTransaction *new_tr(FDBDatabase *db) {
    FDBTransaction *tr = NULL;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    return tr;
}

/* The read version of tr (taken now if it has none yet). */
static int64_t read_version(FDBTransaction *tr) {
    FDBFuture *f = cl.api.transaction_get_read_version(tr);
    ASSERT_OK(fdbt_wait(&cl, f));
    int64_t v = 0;
    ASSERT_OK(cl.api.future_get_int64(f, &v));
    cl.api.future_destroy(f);
    return v;
}

/* Commit "idle" = "0" and return the committed version. */
static int64_t commit_marker(FDBDatabase *db) {
    FDBTransaction *tr = new_tr(db);
    cl.api.transaction_set(tr, K("idle"), K("0"));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    int64_t cv = 0;
    ASSERT_OK(cl.api.transaction_get_committed_version(tr, &cv));
    cl.api.transaction_destroy(tr);
    return cv;
}

/* fdbt_run's body: read "idle" and write it back; the attempt's read version goes to *ud. */
static fdb_error_t read_then_write(fdbt_client *c, FDBTransaction *tr, void *ud) {
    *(int64_t *)ud = read_version(tr);
    FDBFuture *f = c->api.transaction_get(tr, K("idle"), 0);
    fdb_error_t rc = fdbt_wait_destroy(c, f);
    if (rc) return rc;
    c->api.transaction_set(tr, K("idle"), K("x"));
    return 0;
}

/* fdbc-idle-1.1: the cluster's version tick, through libfdb_c.so. */
TEST(fdbc_idle_1_1) {
    cp_start_window(&clu, 1, NULL, 0, 1, 200000); /* a 200 ms window */
    clu_up = 1;
    FDBDatabase *db = open_db(clu.url);
    int64_t cv = commit_marker(db);
    FDBTransaction *held = new_tr(db);
    int64_t rv_old = read_version(held);
    rl__clock_sleep_us(500000); /* 2.5 windows without a commit */
    int64_t rv = 0;
    int retries = -1;
    ASSERT_OK(fdbt_run(&cl, db, read_then_write, &rv, &retries));
    printf("fdbc-idle-1.1: read version %lld, %lld versions after the last commit, %d retries\n", (long long)rv,
           (long long)(rv - cv), retries);
    if (rv - cv < 250000)
        fail_msg("500 ms without a commit moved the read version only %lld versions past the last commit",
                 (long long)(rv - cv));
    ASSERT_TRUE(retries <= 2); /* at once, but for a stall of this shared machine */
    /* The held transaction is too old; its retry gets a newer read version and commits. */
    FDBFuture *f = cl.api.transaction_get(held, K("idle"), 0);
    fdb_error_t rc = fdbt_wait_destroy(&cl, f);
    if (rc == 0) {
        cl.api.transaction_set(held, K("idle"), K("y"));
        rc = fdbt_wait_destroy(&cl, cl.api.transaction_commit(held));
    }
    ASSERT_EQ(rc, FDB_E_TRANSACTION_TOO_OLD);
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_on_error(held, rc)));
    int64_t rv_new = read_version(held);
    if (rv_new <= rv_old)
        fail_msg("the retry after transaction_too_old got read version %lld, not newer than %lld", (long long)rv_new,
                 (long long)rv_old);
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_get(held, K("idle"), 0)));
    cl.api.transaction_set(held, K("idle"), K("y"));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(held)));
    cl.api.transaction_destroy(held);
    cl.api.database_destroy(db);
}

/* fdbc-idle-1.2: the embedded store's read versions follow the clock, through libfdb_c.so. */
TEST(fdbc_idle_1_2) {
    FDBDatabase *db = open_db("mem:");
    int64_t cv = commit_marker(db);
    rl__clock_sleep_us(20000);
    int64_t rv = 0;
    int retries = -1;
    ASSERT_OK(fdbt_run(&cl, db, read_then_write, &rv, &retries));
    printf("fdbc-idle-1.2: read version %lld, %lld versions after the last commit, %d retries\n", (long long)rv,
           (long long)(rv - cv), retries);
    if (rv - cv < 10000)
        fail_msg("20 ms without a commit moved the read version only %lld versions past the last commit",
                 (long long)(rv - cv));
    ASSERT_EQ(retries, 0);
    cl.api.database_destroy(db);
}

static int teardown(void **state) {
    (void)state;
    fdbt_stop(&cl);
    if (clu_up) cp_stop(&clu);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_idle_1_1), T(fdbc_idle_1_2)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
