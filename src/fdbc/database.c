/* database.c — FDBDatabase over rl_db: which reclayer database a FoundationDB program opens,
 * database options, and the tenant and administration calls (unsupported).
 *
 * Which database (fdb_create_database):
 *   1. RL_FDBC_URL, when set and not empty, names any reclayer URL (mem:, file:DIR,
 *      defer:mem:, cluster:FILE); the cluster file argument is then ignored. Every
 *      fdb_create_database opens its own database: two mem: databases are two stores.
 *   2. Otherwise the cluster file: the path given, or FoundationDB's default when it is NULL or
 *      "" ($FDB_CLUSTER_FILE, then ./fdb.cluster, then /etc/foundationdb/fdb.cluster), opened as
 *      a reclayer cluster file (cluster:PATH — its form is FoundationDB's). No file found is
 *      no_cluster_file_found (1515).
 *   An fdb: URL is refused (connection_string_invalid): this library would load itself.
 *
 * Invariants:
 *   1. A database holds one reference for its user and one per transaction, so
 *      fdb_database_destroy before the last fdb_transaction_destroy is allowed (FoundationDB's
 *      transactions keep their database alive); the rl_db closes with the last reference.
 *   2. Database options 500-503 become the defaults of the transactions created afterwards;
 *      max_watches (20) is the database's limit of watches (rl_db_set_option);
 *      the other documented options are accepted with no effect (location cache,
 *      machine and datacenter ids, logging) or refused with unsupported_operation when their
 *      meaning cannot be honoured (snapshot_ryw_disable, transaction_bypass_unreadable).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdbc/fdbc.h"

/* Decode FoundationDB's Int option parameter: 8 bytes, little-endian. */
int fdbc_int_param(const uint8_t *value, int len, int64_t *out) {
    if (!value || len != 8) return FDBC_E_INVALID_OPTION_VALUE;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | value[i];
    *out = (int64_t)v;
    return 0;
}

/* Find FoundationDB's default cluster file; NULL if none exists. */
static const char *default_cluster_file(void) {
    const char *env = getenv("FDB_CLUSTER_FILE");
    if (env && *env) return env;
    if (access("fdb.cluster", F_OK) == 0) return "fdb.cluster";
    if (access("/etc/foundationdb/fdb.cluster", F_OK) == 0) return "/etc/foundationdb/fdb.cluster";
    return NULL;
}

static fdb_error_t open_url(const char *url, FDBDatabase **out) {
    if (!strncmp(url, "fdb:", 4)) return FDBC_E_CONNECTION_STRING_INVALID;
    FDBDatabase *d = calloc(1, sizeof *d);
    if (!d) return FDBC_E_LARGE_ALLOC_FAILED;
    int rc = rl_db_open(url, NULL, &d->db);
    if (rc) {
        free(d);
        return fdbc_err(rc);
    }
    pthread_mutex_init(&d->mu, NULL);
    d->is_cluster = !strncmp(url, "cluster:", 8);
    d->refs = 1;
    d->def_retry_limit = -1;
    *out = d;
    return 0;
}

/* Open the database (file comment). Needs the API version and the network set up, as
 * FoundationDB does. [out] out_database: destroy with fdb_database_destroy. */
FDBC_API fdb_error_t fdb_create_database(const char *cluster_file_path, FDBDatabase **out) {
    if (!out) return FDBC_E_CLIENT_INVALID_OPERATION;
    *out = NULL;
    if (fdbc_api_version() == 0) return FDBC_E_API_VERSION_UNSET;
    if (!fdbc_network_is_setup()) return FDBC_E_NETWORK_NOT_SETUP;
    const char *url = getenv("RL_FDBC_URL");
    if (url && *url) return open_url(url, out);
    const char *path = cluster_file_path && *cluster_file_path ? cluster_file_path : default_cluster_file();
    if (!path) return FDBC_E_NO_CLUSTER_FILE_FOUND;
    size_t n = strlen(path);
    char *u = malloc(n + 9);
    if (!u) return FDBC_E_LARGE_ALLOC_FAILED;
    memcpy(u, "cluster:", 8);
    memcpy(u + 8, path, n + 1);
    fdb_error_t rc = open_url(u, out);
    free(u);
    return rc;
}

/* A connection string instead of a cluster file: reclayer's cluster client reads files only. */
FDBC_API fdb_error_t fdb_create_database_from_connection_string(const char *s, FDBDatabase **out) {
    (void)s;
    if (out) *out = NULL;
    return FDBC_E_UNSUPPORTED_OPERATION;
}

void fdbc_database_unref(FDBDatabase *d) {
    pthread_mutex_lock(&d->mu);
    int last = --d->refs == 0;
    pthread_mutex_unlock(&d->mu);
    if (!last) return;
    rl_db_close(d->db);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

FDBC_API void fdb_database_destroy(FDBDatabase *d) {
    if (d) fdbc_database_unref(d);
}

FDBC_API fdb_error_t fdb_database_set_option(FDBDatabase *d, int option, const uint8_t *value, int value_length) {
    if (!d) return FDBC_E_CLIENT_INVALID_OPERATION;
    if (value_length < 0) return FDBC_E_INVALID_OPTION_VALUE;
    int64_t v = 0;
    int rc;
    switch (option) {
    case 500:
    case 501:
    case 502:
    case 503: /* transaction_timeout, _retry_limit, ... */
        if ((rc = fdbc_int_param(value, value_length, &v))) return rc;
        if ((option == 500 && (v < 0 || v > 2147483647)) || (option == 501 && (v < -1 || v > 2147483647)) ||
            (option == 502 && (v < 0 || v > 2147483647)) || (option == 503 && (v < 32 || v > RL_TXN_SIZE_LIMIT)))
            return FDBC_E_INVALID_OPTION_VALUE;
        pthread_mutex_lock(&d->mu);
        if (option == 500) d->def_timeout_ms = v;
        else if (option == 501) d->def_retry_limit = v;
        else if (option == 502) d->def_max_retry_delay_ms = v;
        else d->def_size_limit = v;
        d->has_defaults = 1;
        pthread_mutex_unlock(&d->mu);
        return 0;
    case 20: /* max_watches: 0..1,000,000 (FoundationDB's bounds) */
        if ((rc = fdbc_int_param(value, value_length, &v))) return rc;
        rc = rl_db_set_option(d->db, RL_DB_OPT_MAX_WATCHES, v);
        return rc == RL_E_INVALID_OPTION_VALUE ? FDBC_E_INVALID_OPTION_VALUE : fdbc_err(rc);
    case 10:
    case 21:
    case 22:  /* location cache, machine/dc ids */
    case 26:  /* snapshot_ryw_enable (the default) */
    case 405: /* transaction_logging_max_field_length */
    case 505: /* transaction_include_port_in_address: the default from API version 630 */
        pthread_mutex_lock(&d->mu);
        d->def_include_port = 1;
        pthread_mutex_unlock(&d->mu);
        return 0;
    case 504: /* transaction_causal_read_risky */
    case 506:
    case 507: /* transaction_automatic_idempotency, report_conflicting */
    case 800:
    case 900:  /* use_config_database, test_causal_read_risky */
    case 1000: /* transaction_expensive_clear_cost_estimation */
    case 1001:
    case 1002: /* authorization / tenant defaults */ return 0;
    case 27: /* snapshot_ryw_disable */
    case 700: /* transaction_bypass_unreadable */ return FDBC_E_UNSUPPORTED_OPERATION;
    }
    return FDBC_E_INVALID_OPTION;
}

/* ---- Tenants and administration: not served by reclayer ---------------------------------- */

FDBC_API fdb_error_t fdb_database_open_tenant(FDBDatabase *d, const uint8_t *name, int name_length, FDBTenant **out) {
    (void)d;
    (void)name;
    (void)name_length;
    if (out) *out = NULL;
    return FDBC_E_UNSUPPORTED_OPERATION;
}

FDBC_API fdb_error_t fdb_tenant_create_transaction(FDBTenant *t, FDBTransaction **out) {
    (void)t;
    if (out) *out = NULL;
    return FDBC_E_UNSUPPORTED_OPERATION;
}

FDBC_API void fdb_tenant_destroy(FDBTenant *t) { (void)t; }

FDBC_API FDBFuture *fdb_tenant_get_id(FDBTenant *t) {
    (void)t;
    return fdbc_future_error(FK_INT64, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_reboot_worker(FDBDatabase *d, const uint8_t *address, int address_length,
                                               fdb_bool_t check, int duration) {
    (void)d, (void)address, (void)address_length, (void)check, (void)duration;
    return fdbc_future_error(FK_INT64, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_force_recovery_with_data_loss(FDBDatabase *d, const uint8_t *dcid, int dcid_length) {
    (void)d, (void)dcid, (void)dcid_length;
    return fdbc_future_error(FK_NONE, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_create_snapshot(FDBDatabase *d, const uint8_t *uid, int uid_length, const uint8_t *cmd,
                                                 int cmd_length) {
    (void)d, (void)uid, (void)uid_length, (void)cmd, (void)cmd_length;
    return fdbc_future_error(FK_NONE, FDBC_E_UNSUPPORTED_OPERATION);
}

/* The network thread does no I/O of its own (network.c invariant 2): never busy. */
FDBC_API double fdb_database_get_main_thread_busyness(FDBDatabase *d) {
    (void)d;
    return 0.0;
}

FDBC_API FDBFuture *fdb_database_get_server_protocol(FDBDatabase *d, uint64_t expected_version) {
    (void)d, (void)expected_version;
    return fdbc_future_error(FK_UINT64, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_get_client_status(FDBDatabase *d) {
    (void)d;
    return fdbc_future_error(FK_KEY, FDBC_E_UNSUPPORTED_OPERATION);
}
