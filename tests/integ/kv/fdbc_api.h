/* fdbc_api.h — FoundationDB's C API as a program written for FoundationDB sees it, declared here
 * from FoundationDB's API documentation (api-c.html: types, struct layouts, the functions of API
 * version 730, option / error / mutation numbers) and independent of src/fdbc: the tests that
 * include it (test_fdbc_*.c) load a libfdb_c.so with dlopen and call it only through this table,
 * as a binding would. The types and struct layouts are src/base/fdb_api.h's (standalone, shared
 * with the library and the fdb: backend; test_fdbc_abi.c checks them against the documented
 * sizes and offsets); no other reclayer header is needed to use it.
 *
 * fdbt_load(path) fills the table with dlsym; every function listed must be exported (a binding
 * that resolves all symbols at load time, as FoundationDB's Java binding does, needs that).
 */
#ifndef RL_TEST_FDBC_API_H
#define RL_TEST_FDBC_API_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/fdb_api.h" /* the types and layouts (standalone: <stddef.h>, <stdint.h>) */

/* Numbers from FoundationDB's documentation. */
enum {
    FDB_STREAMING_MODE_WANT_ALL = -2,
    FDB_STREAMING_MODE_ITERATOR = -1,
    FDB_STREAMING_MODE_EXACT = 0,
    FDB_STREAMING_MODE_SMALL = 1,
    FDB_STREAMING_MODE_SERIAL = 4,
    FDB_MUTATION_TYPE_ADD = 2,
    FDB_MUTATION_TYPE_SET_VERSIONSTAMPED_KEY = 14,
    FDB_MUTATION_TYPE_SET_VERSIONSTAMPED_VALUE = 15,
    FDB_CONFLICT_RANGE_TYPE_READ = 0,
    FDB_CONFLICT_RANGE_TYPE_WRITE = 1,
    FDB_ERROR_PREDICATE_RETRYABLE = 50000,
    FDB_ERROR_PREDICATE_MAYBE_COMMITTED = 50001,
    FDB_ERROR_PREDICATE_RETRYABLE_NOT_COMMITTED = 50002,
    FDB_TR_OPTION_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE = 30,
    FDB_TR_OPTION_READ_YOUR_WRITES_DISABLE = 51,
    FDB_TR_OPTION_ACCESS_SYSTEM_KEYS = 301,
    FDB_TR_OPTION_READ_SYSTEM_KEYS = 302,
    FDB_TR_OPTION_TIMEOUT = 500,
    FDB_TR_OPTION_RETRY_LIMIT = 501,
    FDB_TR_OPTION_SIZE_LIMIT = 503,
    FDB_DB_OPTION_TRANSACTION_TIMEOUT = 500,
    FDB_NET_OPTION_TRACE_ENABLE = 30,
};

typedef struct {
    void *lib;
    RL_FDB_FUNCTIONS(RL__FDB_FN_MEMBER) /* every function of base/fdb_api.h's table */
} fdbt_api;

/* Every function of FoundationDB's 730 C API (what a binding may resolve at load time). */
static const char *const fdbt_all_symbols[] = {"fdb_get_error",
                                               "fdb_error_predicate",
                                               "fdb_network_set_option",
                                               "fdb_setup_network",
                                               "fdb_run_network",
                                               "fdb_stop_network",
                                               "fdb_add_network_thread_completion_hook",
                                               "fdb_future_cancel",
                                               "fdb_future_release_memory",
                                               "fdb_future_destroy",
                                               "fdb_future_block_until_ready",
                                               "fdb_future_is_ready",
                                               "fdb_future_set_callback",
                                               "fdb_future_get_error",
                                               "fdb_future_get_bool",
                                               "fdb_future_get_int64",
                                               "fdb_future_get_uint64",
                                               "fdb_future_get_double",
                                               "fdb_future_get_key",
                                               "fdb_future_get_value",
                                               "fdb_future_get_keyvalue_array",
                                               "fdb_future_get_mappedkeyvalue_array",
                                               "fdb_future_get_key_array",
                                               "fdb_future_get_string_array",
                                               "fdb_future_get_keyrange_array",
                                               "fdb_future_get_granule_summary_array",
                                               "fdb_result_destroy",
                                               "fdb_result_get_keyvalue_array",
                                               "fdb_create_database",
                                               "fdb_create_database_from_connection_string",
                                               "fdb_database_destroy",
                                               "fdb_database_set_option",
                                               "fdb_database_open_tenant",
                                               "fdb_database_create_transaction",
                                               "fdb_database_reboot_worker",
                                               "fdb_database_force_recovery_with_data_loss",
                                               "fdb_database_create_snapshot",
                                               "fdb_database_get_main_thread_busyness",
                                               "fdb_database_get_server_protocol",
                                               "fdb_database_purge_blob_granules",
                                               "fdb_database_wait_purge_granules_complete",
                                               "fdb_database_blobbify_range",
                                               "fdb_database_unblobbify_range",
                                               "fdb_database_list_blobbified_ranges",
                                               "fdb_database_verify_blob_range",
                                               "fdb_tenant_create_transaction",
                                               "fdb_tenant_purge_blob_granules",
                                               "fdb_tenant_wait_purge_granules_complete",
                                               "fdb_tenant_blobbify_range",
                                               "fdb_tenant_unblobbify_range",
                                               "fdb_tenant_list_blobbified_ranges",
                                               "fdb_tenant_verify_blob_range",
                                               "fdb_tenant_get_id",
                                               "fdb_tenant_destroy",
                                               "fdb_transaction_destroy",
                                               "fdb_transaction_cancel",
                                               "fdb_transaction_set_option",
                                               "fdb_transaction_set_read_version",
                                               "fdb_transaction_get_read_version",
                                               "fdb_transaction_get",
                                               "fdb_transaction_get_key",
                                               "fdb_transaction_get_addresses_for_key",
                                               "fdb_transaction_get_range",
                                               "fdb_transaction_get_mapped_range",
                                               "fdb_transaction_set",
                                               "fdb_transaction_atomic_op",
                                               "fdb_transaction_clear",
                                               "fdb_transaction_clear_range",
                                               "fdb_transaction_watch",
                                               "fdb_transaction_commit",
                                               "fdb_transaction_get_committed_version",
                                               "fdb_transaction_get_tag_throttled_duration",
                                               "fdb_transaction_get_total_cost",
                                               "fdb_transaction_get_approximate_size",
                                               "fdb_transaction_get_versionstamp",
                                               "fdb_transaction_on_error",
                                               "fdb_transaction_reset",
                                               "fdb_transaction_add_conflict_range",
                                               "fdb_transaction_get_estimated_range_size_bytes",
                                               "fdb_transaction_get_range_split_points",
                                               "fdb_transaction_get_blob_granule_ranges",
                                               "fdb_transaction_read_blob_granules",
                                               "fdb_transaction_summarize_blob_granules",
                                               "fdb_select_api_version_impl",
                                               "fdb_get_max_api_version",
                                               "fdb_get_client_version",
                                               NULL};

#define FDBT_SYM(a, name)                                      \
    do {                                                       \
        *(void **)&(a)->name = dlsym((a)->lib, "fdb_" #name);  \
        if (!(a)->name) {                                      \
            fprintf(stderr, "missing symbol fdb_%s\n", #name); \
            return -1;                                         \
        }                                                      \
    } while (0)

/* Load the library at path into a (RTLD_NOW | RTLD_LOCAL, as bindings do). 0 or -1. */
static inline int fdbt_load(fdbt_api *a, const char *path) {
    a->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
#define X(need, ret, name, params) FDBT_SYM(a, name);
    RL_FDB_FUNCTIONS(X)
#undef X
    return 0;
}

/* The path of the library under test: RL_FDBC_LIB (ctest sets it), else build/fdb/libfdb_c.so
 * of the build the test belongs to. */
static inline const char *fdbt_lib_path(void) {
    const char *p = getenv("RL_FDBC_LIB");
    return p && *p ? p : RL_BIN_DIR "/fdb/libfdb_c.so";
}

/* ---- A started client: the library loaded, API 730 selected, the network running -------- */

typedef struct {
    fdbt_api api;
    pthread_t net_thread;
    int started;
} fdbt_client;

static void *fdbt_net_main(void *ud) {
    fdbt_client *c = ud;
    fdb_error_t rc = c->api.run_network();
    if (rc) fprintf(stderr, "fdb_run_network: %d %s\n", rc, c->api.get_error(rc));
    return NULL;
}

/* Load, select API version 730, set up and run the network on its own thread. 0 or -1. */
static inline int fdbt_start(fdbt_client *c) {
    if (fdbt_load(&c->api, fdbt_lib_path())) return -1;
    fdb_error_t rc = c->api.select_api_version_impl(730, 730);
    if (rc == 0) rc = c->api.setup_network();
    if (rc) {
        fprintf(stderr, "start: %d %s\n", rc, c->api.get_error(rc));
        return -1;
    }
    if (pthread_create(&c->net_thread, NULL, fdbt_net_main, c)) return -1;
    c->started = 1;
    return 0;
}

/* Stop the network and join its thread. */
static inline void fdbt_stop(fdbt_client *c) {
    if (!c->started) return;
    c->api.stop_network();
    pthread_join(c->net_thread, NULL);
    c->started = 0;
}

/* Open a database over the reclayer URL url (RL_FDBC_URL, docs/design.md §8.8.1). */
static inline fdb_error_t fdbt_open(fdbt_client *c, const char *url, FDBDatabase **out) {
    setenv("RL_FDBC_URL", url, 1);
    return c->api.create_database(NULL, out);
}

/* Wait for f and return its error (the future stays to be destroyed). */
static inline fdb_error_t fdbt_wait(fdbt_client *c, FDBFuture *f) {
    fdb_error_t rc = c->api.future_block_until_ready(f);
    return rc ? rc : c->api.future_get_error(f);
}

/* Wait for f, destroy it and return its error. */
static inline fdb_error_t fdbt_wait_destroy(fdbt_client *c, FDBFuture *f) {
    fdb_error_t rc = fdbt_wait(c, f);
    c->api.future_destroy(f);
    return rc;
}

/* Commit with the standard retry loop around fn (FoundationDB's documented loop). */
static inline fdb_error_t fdbt_run(fdbt_client *c, FDBDatabase *db,
                                   fdb_error_t (*fn)(fdbt_client *c, FDBTransaction *tr, void *ud), void *ud,
                                   int *out_retries) {
    FDBTransaction *tr;
    fdb_error_t rc = c->api.database_create_transaction(db, &tr);
    if (rc) return rc;
    if (out_retries) *out_retries = 0;
    for (;;) {
        rc = fn(c, tr, ud);
        if (rc == 0) rc = fdbt_wait_destroy(c, c->api.transaction_commit(tr));
        if (rc == 0) break;
        fdb_error_t rc2 = fdbt_wait_destroy(c, c->api.transaction_on_error(tr, rc));
        if (rc2) {
            rc = rc2;
            break;
        }
        if (out_retries) (*out_retries)++;
    }
    c->api.transaction_destroy(tr);
    return rc;
}

#endif
