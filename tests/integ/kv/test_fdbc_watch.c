/* test_fdbc_watch.c — watches through FoundationDB's documented C API (fdbc_api.h: the library
 * loaded with dlopen) on build/fdb/libfdb_c.so over reclayer: over mem: (RL_TEST_URL unset) and
 * over a one-server cluster (ctest's *_cluster1 run, rl_with_cluster). A watch that must not fire
 * is checked against a barrier watch on a key written after it (it fires first: changes are
 * reported in version order); every wait is bounded (WAIT_MS, a poll of fdb_future_is_ready).
 *
 *   fdbc-watch-1.1  fdb_transaction_watch fires on a change committed by another transaction,
 *                   not on a rewrite of the same value; a change away and back fires
 *   fdbc-watch-1.2  before the commit: fdb_transaction_reset and fdb_transaction_destroy give the
 *                   watch transaction_cancelled (1025)
 *   fdbc-watch-1.3  fdb_future_cancel of a registered watch: operation_cancelled (1101), and its
 *                   place under max_watches (database option 20) is free again; too_many_watches
 *                   (1032) at the limit; max_watches out of 0..1,000,000 is invalid_option_value
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "fdbc_api.h"
#include "test.h"

#define K(s) (const uint8_t *)(s), (int)strlen(s)
#define WAIT_MS 30000

enum { FDB_DB_OPTION_MAX_WATCHES = 20 };

static fdbt_client cl;

static const char *url(void) {
    const char *u = getenv("RL_TEST_URL");
    return u && *u ? u : "mem:";
}

static FDBDatabase *open_db(void) {
    if (!cl.started && fdbt_start(&cl)) fail_msg("cannot start %s", fdbt_lib_path());
    FDBDatabase *db = NULL;
    fdb_error_t rc = fdbt_open(&cl, url(), &db);
    if (rc) fail_msg("create_database over %s: %d %s", url(), rc, cl.api.get_error(rc));
    return db;
}

static FDBTransaction *new_tr(FDBDatabase *db) {
    FDBTransaction *tr = NULL;
    ASSERT_OK(cl.api.database_create_transaction(db, &tr));
    return tr;
}

static int ready_within(FDBFuture *f, int ms) {
    uint64_t end = rl__clock_mono_ns() + (uint64_t)ms * 1000000u;
    while (!cl.api.future_is_ready(f)) {
        if (rl__clock_mono_ns() > end) return 0;
        rl__clock_sleep_us(2000);
    }
    return 1;
}

static void set1(FDBDatabase *db, const char *k, const char *v) {
    FDBTransaction *tr = new_tr(db);
    cl.api.transaction_set(tr, K(k), K(v));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    cl.api.transaction_destroy(tr);
}

/* A watch of k, registered by a committed read-only transaction. */
static FDBFuture *watch1(FDBDatabase *db, const char *k) {
    FDBTransaction *tr = new_tr(db);
    FDBFuture *w = cl.api.transaction_watch(tr, K(k));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    cl.api.transaction_destroy(tr);
    return w;
}

static void expect_fired(FDBFuture *w, const char *what) {
    if (!ready_within(w, WAIT_MS)) fail_msg("%s: the watch did not fire", what);
    ASSERT_OK(cl.api.future_get_error(w));
}

static void barrier(FDBDatabase *db, const char *b) {
    FDBFuture *w = watch1(db, b);
    set1(db, b, "barrier");
    expect_fired(w, b);
    cl.api.future_destroy(w);
}

TEST(fdbc_watch_1_1_fires) {
    FDBDatabase *db = open_db();
    set1(db, "fw/k", "A");
    FDBFuture *w = watch1(db, "fw/k");
    set1(db, "fw/k", "A"); /* the same value */
    barrier(db, "fw/kb");
    ASSERT_FALSE(cl.api.future_is_ready(w));
    set1(db, "fw/k", "B");
    expect_fired(w, "a change");
    cl.api.future_destroy(w);
    w = watch1(db, "fw/k");
    set1(db, "fw/k", "C");
    set1(db, "fw/k", "B");
    expect_fired(w, "B to C to B");
    cl.api.future_destroy(w);
    cl.api.database_destroy(db);
}

TEST(fdbc_watch_1_2_before_commit) {
    FDBDatabase *db = open_db();
    FDBTransaction *tr = new_tr(db);
    FDBFuture *w = cl.api.transaction_watch(tr, K("fw/r"));
    cl.api.transaction_reset(tr);
    ASSERT_EQ(fdbt_wait_destroy(&cl, w), 1025);
    w = cl.api.transaction_watch(tr, K("fw/r"));
    cl.api.transaction_destroy(tr);
    ASSERT_EQ(fdbt_wait_destroy(&cl, w), 1025);
    cl.api.database_destroy(db);
}

TEST(fdbc_watch_1_3_cancel_and_limit) {
    FDBDatabase *db = open_db();
    uint8_t v[8] = {0};
    int64_t bad = -1;
    memcpy(v, &bad, 8);
    ASSERT_EQ(cl.api.database_set_option(db, FDB_DB_OPTION_MAX_WATCHES, v, 8), 2006);
    int64_t big = 1000001;
    memcpy(v, &big, 8);
    ASSERT_EQ(cl.api.database_set_option(db, FDB_DB_OPTION_MAX_WATCHES, v, 8), 2006);
    int64_t one = 1;
    memcpy(v, &one, 8);
    ASSERT_OK(cl.api.database_set_option(db, FDB_DB_OPTION_MAX_WATCHES, v, 8));
    FDBFuture *a = watch1(db, "fw/a");
    FDBFuture *b = watch1(db, "fw/b");
    ASSERT_EQ(fdbt_wait_destroy(&cl, b), 1032);
    cl.api.future_cancel(a);
    ASSERT_EQ(fdbt_wait_destroy(&cl, a), 1101);
    FDBFuture *c = watch1(db, "fw/c");
    ASSERT_FALSE(cl.api.future_is_ready(c));
    set1(db, "fw/c", "x");
    expect_fired(c, "fw/c");
    cl.api.future_destroy(c);
    cl.api.database_destroy(db);
}

static int teardown(void **state) {
    (void)state;
    if (cl.started) fdbt_stop(&cl);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_watch_1_1_fires), T(fdbc_watch_1_2_before_commit),
                                       T(fdbc_watch_1_3_cancel_and_limit)};
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    return cmocka_run_group_tests(tests, NULL, teardown);
}
