/* stubs.c — the parts of FoundationDB's C API (730) that reclayer cannot serve: blob granules
 * and their FDBResult, tenant blob ranges. Each is exported with its documented signature (so
 * programs and bindings that resolve every symbol at load time, as the Java binding's JNI
 * library does, load and run) and answers unsupported_operation (2108): a future or FDBResult
 * holding the error. None of them reads its arguments.
 */
#include <stdlib.h>

#include "fdbc/fdbc.h"

/* A synchronous result: always an error here. */
struct FDB_result {
    int err;
};

static FDBResult oom_result = {FDBC_E_LARGE_ALLOC_FAILED};

static FDBResult *result_error(int err) {
    FDBResult *r = malloc(sizeof *r);
    if (!r) return &oom_result;
    r->err = err;
    return r;
}

FDBC_API void fdb_result_destroy(FDBResult *r) {
    if (r && r != &oom_result) free(r);
}

FDBC_API fdb_error_t fdb_result_get_keyvalue_array(FDBResult *r, const FDBKeyValue **out_kv, int *out_count,
                                                   fdb_bool_t *out_more) {
    (void)out_kv, (void)out_count, (void)out_more;
    return r ? r->err : FDBC_E_CLIENT_INVALID_OPERATION;
}

FDBC_API fdb_error_t fdb_result_get_bg_mutations_array(FDBResult *r, const void **out, int *out_count) {
    (void)out, (void)out_count;
    return r ? r->err : FDBC_E_CLIENT_INVALID_OPERATION;
}

FDBC_API FDBResult *fdb_readbg_parse_snapshot_file(const uint8_t *data, int len, const void *tenant_prefix,
                                                   const void *encryption_ctx) {
    (void)data, (void)len, (void)tenant_prefix, (void)encryption_ctx;
    return result_error(FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBResult *fdb_readbg_parse_delta_file(const uint8_t *data, int len, const void *tenant_prefix,
                                                const void *encryption_ctx) {
    (void)data, (void)len, (void)tenant_prefix, (void)encryption_ctx;
    return result_error(FDBC_E_UNSUPPORTED_OPERATION);
}

/* ---- Transactions ------------------------------------------------------------------------ */

FDBC_API FDBFuture *fdb_transaction_get_blob_granule_ranges(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                            const uint8_t *ek, int ekl, int range_limit) {
    (void)tr, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)range_limit;
    return fdbc_future_error(FK_RANGES, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBResult *fdb_transaction_read_blob_granules(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                       const uint8_t *ek, int ekl, int64_t begin_version,
                                                       int64_t read_version, FDBReadBlobGranuleContext context) {
    (void)tr, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)begin_version, (void)read_version;
    (void)context;
    return result_error(FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_transaction_summarize_blob_granules(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                            const uint8_t *ek, int ekl, int64_t summary_version,
                                                            int range_limit) {
    (void)tr, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)summary_version, (void)range_limit;
    return fdbc_future_error(FK_RANGES, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_transaction_read_blob_granules_description(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                                   const uint8_t *ek, int ekl, int64_t begin_version,
                                                                   int64_t read_version, int64_t *read_version_out) {
    (void)tr, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)begin_version, (void)read_version;
    (void)read_version_out;
    return fdbc_future_error(FK_RANGES, FDBC_E_UNSUPPORTED_OPERATION);
}

/* ---- Databases and tenants: blob ranges -------------------------------------------------- */

/* The blobbify family shares one shape: (handle, begin, begin length, end, end length, ...). */
#define BLOB_STUB(name, handle, kind)                                                             \
    FDBC_API FDBFuture *name(handle *h, const uint8_t *bk, int bkl, const uint8_t *ek, int ekl) { \
        (void)h, (void)bk, (void)bkl, (void)ek, (void)ekl;                                        \
        return fdbc_future_error(kind, FDBC_E_UNSUPPORTED_OPERATION);                             \
    }

BLOB_STUB(fdb_database_blobbify_range, FDBDatabase, FK_BOOL)
BLOB_STUB(fdb_database_blobbify_range_blocking, FDBDatabase, FK_BOOL)
BLOB_STUB(fdb_database_unblobbify_range, FDBDatabase, FK_BOOL)
BLOB_STUB(fdb_tenant_blobbify_range, FDBTenant, FK_BOOL)
BLOB_STUB(fdb_tenant_blobbify_range_blocking, FDBTenant, FK_BOOL)
BLOB_STUB(fdb_tenant_unblobbify_range, FDBTenant, FK_BOOL)

FDBC_API FDBFuture *fdb_database_list_blobbified_ranges(FDBDatabase *d, const uint8_t *bk, int bkl, const uint8_t *ek,
                                                        int ekl, int range_limit) {
    (void)d, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)range_limit;
    return fdbc_future_error(FK_RANGES, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_tenant_list_blobbified_ranges(FDBTenant *t, const uint8_t *bk, int bkl, const uint8_t *ek,
                                                      int ekl, int range_limit) {
    (void)t, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)range_limit;
    return fdbc_future_error(FK_RANGES, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_purge_blob_granules(FDBDatabase *d, const uint8_t *bk, int bkl, const uint8_t *ek,
                                                     int ekl, int64_t purge_version, fdb_bool_t force) {
    (void)d, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)purge_version, (void)force;
    return fdbc_future_error(FK_KEY, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_tenant_purge_blob_granules(FDBTenant *t, const uint8_t *bk, int bkl, const uint8_t *ek, int ekl,
                                                   int64_t purge_version, fdb_bool_t force) {
    (void)t, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)purge_version, (void)force;
    return fdbc_future_error(FK_KEY, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_wait_purge_granules_complete(FDBDatabase *d, const uint8_t *key, int key_length) {
    (void)d, (void)key, (void)key_length;
    return fdbc_future_error(FK_NONE, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_tenant_wait_purge_granules_complete(FDBTenant *t, const uint8_t *key, int key_length) {
    (void)t, (void)key, (void)key_length;
    return fdbc_future_error(FK_NONE, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_verify_blob_range(FDBDatabase *d, const uint8_t *bk, int bkl, const uint8_t *ek,
                                                   int ekl, int64_t version) {
    (void)d, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)version;
    return fdbc_future_error(FK_INT64, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_tenant_verify_blob_range(FDBTenant *t, const uint8_t *bk, int bkl, const uint8_t *ek, int ekl,
                                                 int64_t version) {
    (void)t, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)version;
    return fdbc_future_error(FK_INT64, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_database_flush_blob_range(FDBDatabase *d, const uint8_t *bk, int bkl, const uint8_t *ek,
                                                  int ekl, fdb_bool_t compact, int64_t version) {
    (void)d, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)compact, (void)version;
    return fdbc_future_error(FK_BOOL, FDBC_E_UNSUPPORTED_OPERATION);
}

FDBC_API FDBFuture *fdb_tenant_flush_blob_range(FDBTenant *t, const uint8_t *bk, int bkl, const uint8_t *ek, int ekl,
                                                fdb_bool_t compact, int64_t version) {
    (void)t, (void)bk, (void)bkl, (void)ek, (void)ekl, (void)compact, (void)version;
    return fdbc_future_error(FK_BOOL, FDBC_E_UNSUPPORTED_OPERATION);
}
