/* test_fdbc_addresses.c — fdb_transaction_get_addresses_for_key on reclayer's libfdb_c.so, called
 * as a FoundationDB program calls it (fdbc_api.h: the documented API, the library loaded with
 * dlopen), over an embedded database and over a real two-server cluster (cluster_procs.h: rlkvd
 * processes, a shard boundary at "m", server 1 below it and server 2 above).
 *
 *   fdbc-addr-1.1  over mem:: unsupported_operation (2108, no storage server to name), from the
 *                  future and from fdb_future_get_string_array; bad input (NULL transaction,
 *                  negative length, NULL key with a length) is client_invalid_operation (2000)
 *   fdbc-addr-1.2  over the cluster: "IP:PORT" of the key's storage server, as the cluster file and
 *                  the servers' ports say (server 1 for "a" and "", server 2 for "q" and "zz"), the
 *                  coordinator's for a key in "\xff"; a callback set on the pending future runs on
 *                  the network thread with the strings ready; the user's transaction is left
 *                  untouched (its write commits)
 *   fdbc-addr-1.3  lifetimes: a future destroyed before it completes, one whose transaction and
 *                  database were destroyed first (it still completes with the addresses), and
 *                  release_memory (then future_released, 1102)
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_procs.h"
#include "fdbc_api.h"
#include "test.h"

#define K(s) (const uint8_t *)(s), (int)strlen(s)

static fdbt_client cl;
static cp_cluster clu; /* static: the exit hook finds it after a failed assertion */
static int clu_up;

static void start_once(void) {
    if (cl.started) return;
    if (fdbt_start(&cl)) fail_msg("cannot start %s", fdbt_lib_path());
}

static FDBDatabase *open_db(const char *url) {
    start_once();
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
    static const char *const split[] = {"m"};
    if (!clu_up) {
        cp_start(&clu, 2, split, 1, 1);
        clu_up = 1;
    }
    return &clu;
}

/* Wait for the addresses of key and check they are exactly want ("127.0.0.1:PORT"). */
static void expect_addresses(FDBTransaction *tr, const char *key, size_t key_len, int want_port) {
    FDBFuture *f = cl.api.transaction_get_addresses_for_key(tr, (const uint8_t *)key, (int)key_len);
    ASSERT_OK(fdbt_wait(&cl, f));
    const char **strs = NULL;
    int n = -1;
    ASSERT_OK(cl.api.future_get_string_array(f, &strs, &n));
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", want_port);
    if (n != 1 || strcmp(strs[0], want))
        fail_msg("key '%.*s': %d addresses, first '%s', want '%s'", (int)key_len, key, n, n > 0 ? strs[0] : "", want);
    cl.api.future_destroy(f);
}

TEST(fdbc_addr_1_1) {
    cluster(); /* forked before this program's threads exist */
    FDBDatabase *db = open_db("mem:");
    FDBTransaction *tr = new_tr(db);
    FDBFuture *f = cl.api.transaction_get_addresses_for_key(tr, K("k"));
    ASSERT_EQ(fdbt_wait(&cl, f), 2108);
    const char **strs;
    int n;
    ASSERT_EQ(cl.api.future_get_string_array(f, &strs, &n), 2108);
    cl.api.future_destroy(f);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_addresses_for_key(NULL, K("k"))), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_addresses_for_key(tr, (const uint8_t *)"k", -1)), 2000);
    ASSERT_EQ(fdbt_wait_destroy(&cl, cl.api.transaction_get_addresses_for_key(tr, NULL, 3)), 2000);
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

static atomic_int cb_ran, cb_on_net, cb_n;
static pthread_t net_thread_id;

static void on_addresses(FDBFuture *f, void *ud) {
    (void)ud;
    const char **strs;
    int n = 0;
    if (cl.api.future_get_string_array(f, &strs, &n) == 0) atomic_store(&cb_n, n);
    atomic_store(&cb_on_net, pthread_equal(pthread_self(), net_thread_id));
    atomic_store(&cb_ran, 1);
}

TEST(fdbc_addr_1_2) {
    cp_cluster *c = cluster();
    FDBDatabase *db = open_db(c->url);
    FDBTransaction *tr = new_tr(db);
    expect_addresses(tr, "a", 1, c->port[1]);
    expect_addresses(tr, "", 0, c->port[1]);
    expect_addresses(tr, "m", 1, c->port[2]); /* the boundary belongs to the shard it begins */
    expect_addresses(tr, "q", 1, c->port[2]);
    expect_addresses(tr, "zz", 2, c->port[2]);
    expect_addresses(tr, "\xff/x", 3, c->port[0]); /* the system keyspace: the coordinator's */
    /* A callback on the pending future: on the network thread, strings ready. */
    net_thread_id = cl.net_thread;
    FDBFuture *f = cl.api.transaction_get_addresses_for_key(tr, K("b"));
    ASSERT_OK(cl.api.future_set_callback(f, on_addresses, NULL));
    double t0 = cp_now();
    while (!atomic_load(&cb_ran) && cp_now() - t0 < 10) usleep(1000);
    ASSERT_TRUE(atomic_load(&cb_ran));
    ASSERT_EQ(atomic_load(&cb_n), 1);
    if (!cl.api.future_is_ready(f)) fail_msg("callback before ready");
    cl.api.future_destroy(f);
    /* The user's transaction gained nothing from the lookups: its write commits. */
    cl.api.transaction_set(tr, K("a-written"), K("v"));
    ASSERT_OK(fdbt_wait_destroy(&cl, cl.api.transaction_commit(tr)));
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
}

TEST(fdbc_addr_1_3) {
    cp_cluster *c = cluster();
    FDBDatabase *db = open_db(c->url);
    FDBTransaction *tr = new_tr(db);
    /* Destroyed before it completes. */
    for (int i = 0; i < 20; i++) cl.api.future_destroy(cl.api.transaction_get_addresses_for_key(tr, K("a")));
    /* The transaction and the database destroyed first: the future keeps what it needs. */
    FDBFuture *f = cl.api.transaction_get_addresses_for_key(tr, K("q"));
    cl.api.transaction_destroy(tr);
    cl.api.database_destroy(db);
    ASSERT_OK(fdbt_wait(&cl, f));
    const char **strs;
    int n = 0;
    ASSERT_OK(cl.api.future_get_string_array(f, &strs, &n));
    ASSERT_EQ(n, 1);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", c->port[2]);
    ASSERT_STR_EQ(strs[0], want);
    /* Released: the error stays, the getter says future_released. */
    cl.api.future_release_memory(f);
    ASSERT_OK(cl.api.future_get_error(f));
    ASSERT_EQ(cl.api.future_get_string_array(f, &strs, &n), 1102);
    cl.api.future_destroy(f);
}

static int teardown(void **state) {
    (void)state;
    fdbt_stop(&cl);
    if (clu_up) cp_stop(&clu);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdbc_addr_1_1), T(fdbc_addr_1_2), T(fdbc_addr_1_3)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
