/* fdb_api.h (internal, standalone) — FoundationDB's C API types, once for the three places that
 * speak it: the library built over reclayer (src/fdbc/fdbc.h), the fdb: backend that loads a
 * client library (src/kv/fdb/fdb_int.h) and the tests that load one as a binding would
 * (tests/integ/kv/fdbc_api.h). Only the documented ABI is here: the opaque handles, the scalar
 * typedefs, the callback type and the struct layouts, the same in API versions 710 to 730. Each
 * includer keeps its own numbers and functions (prototypes or a dlsym table).
 *
 * Written from FoundationDB's C API documentation (api-c.html); no FoundationDB header was
 * included or copied. Needs only <stddef.h> and <stdint.h>, so a test can use it without any other
 * reclayer header.
 *
 *   FDBKey                  packed to 4   12 bytes   0 key, 8 key_length
 *   FDBKeyValue             packed to 4   24 bytes   0 key, 8 key_length, 12 value, 20 value_length
 *   FDBKeyRange             packed to 4   24 bytes   0 begin_key, 8 .._length, 12 end_key, 20 .._length
 *   FDBKeySelector                        20 bytes   0 key (FDBKey), 12 orEqual, 16 offset
 *   FDBGetRangeReqAndResult               56 bytes   0 begin, 20 end, 40 data, 48 m_size, 52 m_capacity
 *   FDBMappedKeyValue                    112 bytes   0 key, 12 value, 24 getRange, 80 buffer[32]
 *
 * FDBMappedKeyValue mirrors FoundationDB's C++ MappedKeyValueRef, whose secondary result is a
 * std::variant; its last 32 bytes are opaque in the C header. For a range result (the only kind
 * the C view can show) the secondary range's `more` flag is the bool at buffer[RL_FDB_MKV_MORE]
 * and the variant's index the byte at buffer[RL_FDB_MKV_VARIANT] (1: a range result);
 * docs/design.md §8.8 says how the library fills them and how the backend reads them.
 */
#ifndef RL_BASE_FDB_API_H
#define RL_BASE_FDB_API_H

#include <stddef.h>
#include <stdint.h>

typedef int fdb_error_t;
typedef int fdb_bool_t;

typedef struct FDB_future FDBFuture;
typedef struct FDB_result FDBResult;
typedef struct FDB_database FDBDatabase;
typedef struct FDB_tenant FDBTenant;
typedef struct FDB_transaction FDBTransaction;

typedef void (*FDBCallback)(FDBFuture *future, void *callback_parameter);

#pragma pack(push, 4)
typedef struct {
    const uint8_t *key;
    int key_length;
} FDBKey;

typedef struct {
    const uint8_t *key;
    int key_length;
    const uint8_t *value;
    int value_length;
} FDBKeyValue;

typedef struct {
    const uint8_t *begin_key;
    int begin_key_length;
    const uint8_t *end_key;
    int end_key_length;
} FDBKeyRange;

typedef struct {
    FDBKeyRange key_range;
    int64_t snapshot_version;
    int64_t snapshot_size;
    int64_t delta_version;
    int64_t delta_size;
} FDBGranuleSummary;
#pragma pack(pop)

typedef struct {
    FDBKey key;
    fdb_bool_t orEqual;
    int offset;
} FDBKeySelector;

typedef struct {
    FDBKeySelector begin;
    FDBKeySelector end;
    FDBKeyValue *data;
    int m_size, m_capacity;
} FDBGetRangeReqAndResult;

typedef struct {
    FDBKey key;
    FDBKey value;
    FDBGetRangeReqAndResult getRange;
    unsigned char buffer[32];
} FDBMappedKeyValue;

/* The argument of fdb_transaction_read_blob_granules (passed by value). */
typedef struct {
    void *userContext;
    int64_t (*start_load_f)(const char *filename, int filenameLength, int64_t offset, int64_t length,
                            int64_t fullFileLength, void *context);
    uint8_t *(*get_load_f)(int64_t loadId, void *context);
    void (*free_load_f)(int64_t loadId, void *context);
    fdb_bool_t debugNoMaterialize;
    int granuleParallelism;
} FDBReadBlobGranuleContext;

/* The documented layout (the file comment's table), checked wherever this header is compiled. */
_Static_assert(sizeof(FDBKey) == 12 && offsetof(FDBKey, key_length) == 8, "FDBKey");
_Static_assert(sizeof(FDBKeyValue) == 24 && offsetof(FDBKeyValue, key_length) == 8 &&
                   offsetof(FDBKeyValue, value) == 12 && offsetof(FDBKeyValue, value_length) == 20,
               "FDBKeyValue");
_Static_assert(sizeof(FDBKeySelector) == 20 && offsetof(FDBKeySelector, orEqual) == 12 &&
                   offsetof(FDBKeySelector, offset) == 16,
               "FDBKeySelector");
_Static_assert(sizeof(FDBGetRangeReqAndResult) == 56 && offsetof(FDBGetRangeReqAndResult, end) == 20 &&
                   offsetof(FDBGetRangeReqAndResult, data) == 40 && offsetof(FDBGetRangeReqAndResult, m_size) == 48 &&
                   offsetof(FDBGetRangeReqAndResult, m_capacity) == 52,
               "FDBGetRangeReqAndResult");
_Static_assert(sizeof(FDBMappedKeyValue) == 112 && offsetof(FDBMappedKeyValue, value) == 12 &&
                   offsetof(FDBMappedKeyValue, getRange) == 24 && offsetof(FDBMappedKeyValue, buffer) == 80,
               "FDBMappedKeyValue");
_Static_assert(sizeof(FDBKeyRange) == 24 && offsetof(FDBKeyRange, end_key) == 12, "FDBKeyRange");

/* Offsets into FDBMappedKeyValue.buffer (the C++ layout described in the file comment). */
#define RL_FDB_MKV_MORE 0     /* the secondary range's `more` (a bool) */
#define RL_FDB_MKV_VARIANT 24 /* the variant's index (1: a range result) */

/* The functions of FoundationDB's C API that reclayer's two loaders resolve with dlsym — the fdb:
 * backend (src/kv/fdb/fdb_int.h: rl__fdb_api) and the tests' binding (tests/integ/kv/fdbc_api.h:
 * fdbt_api) — once: X(need, ret, name, params), where name is the function's without "fdb_",
 * and need is 1 for the functions the backend cannot run without (a library lacking one is
 * refused), 0 for those only the tests call (the backend leaves them NULL). */
#define RL_FDB_FUNCTIONS(X)                                                                                            \
    X(1, int, get_max_api_version, (void))                                                                             \
    X(1, fdb_error_t, select_api_version_impl, (int, int))                                                             \
    X(1, const char *, get_error, (fdb_error_t))                                                                       \
    X(0, fdb_bool_t, error_predicate, (int, fdb_error_t))                                                              \
    X(1, const char *, get_client_version, (void))                                                                     \
    X(1, fdb_error_t, network_set_option, (int, const uint8_t *, int))                                                 \
    X(1, fdb_error_t, setup_network, (void))                                                                           \
    X(1, fdb_error_t, run_network, (void))                                                                             \
    X(1, fdb_error_t, stop_network, (void))                                                                            \
    X(0, fdb_error_t, add_network_thread_completion_hook, (void (*)(void *), void *))                                  \
    X(1, fdb_error_t, create_database, (const char *, FDBDatabase **))                                                 \
    X(1, void, database_destroy, (FDBDatabase *))                                                                      \
    X(0, fdb_error_t, database_set_option, (FDBDatabase *, int, const uint8_t *, int))                                 \
    X(1, fdb_error_t, database_create_transaction, (FDBDatabase *, FDBTransaction **))                                 \
    X(0, fdb_error_t, database_open_tenant, (FDBDatabase *, const uint8_t *, int, FDBTenant **))                       \
    X(1, void, transaction_destroy, (FDBTransaction *))                                                                \
    X(0, void, transaction_cancel, (FDBTransaction *))                                                                 \
    X(1, void, transaction_reset, (FDBTransaction *))                                                                  \
    X(1, fdb_error_t, transaction_set_option, (FDBTransaction *, int, const uint8_t *, int))                           \
    X(1, void, transaction_set_read_version, (FDBTransaction *, int64_t))                                              \
    X(1, FDBFuture *, transaction_get_read_version, (FDBTransaction *))                                                \
    X(1, FDBFuture *, transaction_get, (FDBTransaction *, const uint8_t *, int, fdb_bool_t))                           \
    X(1, FDBFuture *, transaction_get_key, (FDBTransaction *, const uint8_t *, int, fdb_bool_t, int, fdb_bool_t))      \
    X(1, FDBFuture *, transaction_get_range,                                                                           \
      (FDBTransaction *, const uint8_t *, int, fdb_bool_t, int, const uint8_t *, int, fdb_bool_t, int, int, int, int,  \
       int, fdb_bool_t, fdb_bool_t))                                                                                   \
    X(1, FDBFuture *, transaction_get_mapped_range,                                                                    \
      (FDBTransaction *, const uint8_t *, int, fdb_bool_t, int, const uint8_t *, int, fdb_bool_t, int,                 \
       const uint8_t *, int, int, int, int, int, fdb_bool_t, fdb_bool_t))                                              \
    X(1, void, transaction_set, (FDBTransaction *, const uint8_t *, int, const uint8_t *, int))                        \
    X(1, void, transaction_clear, (FDBTransaction *, const uint8_t *, int))                                            \
    X(1, void, transaction_clear_range, (FDBTransaction *, const uint8_t *, int, const uint8_t *, int))                \
    X(1, void, transaction_atomic_op, (FDBTransaction *, const uint8_t *, int, const uint8_t *, int, int))             \
    X(1, FDBFuture *, transaction_commit, (FDBTransaction *))                                                          \
    X(1, fdb_error_t, transaction_get_committed_version, (FDBTransaction *, int64_t *))                                \
    X(1, FDBFuture *, transaction_get_versionstamp, (FDBTransaction *))                                                \
    X(1, FDBFuture *, transaction_get_estimated_range_size_bytes,                                                      \
      (FDBTransaction *, const uint8_t *, int, const uint8_t *, int))                                                  \
    X(1, FDBFuture *, transaction_get_range_split_points,                                                              \
      (FDBTransaction *, const uint8_t *, int, const uint8_t *, int, int64_t))                                         \
    X(1, fdb_error_t, future_get_key_array, (FDBFuture *, const FDBKey **, int *))                                     \
    X(0, FDBFuture *, transaction_get_approximate_size, (FDBTransaction *))                                            \
    X(0, FDBFuture *, transaction_on_error, (FDBTransaction *, fdb_error_t))                                           \
    X(1, fdb_error_t, transaction_add_conflict_range,                                                                  \
      (FDBTransaction *, const uint8_t *, int, const uint8_t *, int, int))                                             \
    X(1, FDBFuture *, transaction_watch, (FDBTransaction *, const uint8_t *, int))                                     \
    X(1, FDBFuture *, transaction_get_addresses_for_key, (FDBTransaction *, const uint8_t *, int))                     \
    X(1, void, future_cancel, (FDBFuture *))                                                                           \
    X(0, void, future_release_memory, (FDBFuture *))                                                                   \
    X(1, void, future_destroy, (FDBFuture *))                                                                          \
    X(0, fdb_error_t, future_block_until_ready, (FDBFuture *))                                                         \
    X(0, fdb_bool_t, future_is_ready, (FDBFuture *))                                                                   \
    X(1, fdb_error_t, future_set_callback, (FDBFuture *, FDBCallback, void *))                                         \
    X(1, fdb_error_t, future_get_error, (FDBFuture *))                                                                 \
    X(1, fdb_error_t, future_get_int64, (FDBFuture *, int64_t *))                                                      \
    X(1, fdb_error_t, future_get_key, (FDBFuture *, const uint8_t **, int *))                                          \
    X(1, fdb_error_t, future_get_value, (FDBFuture *, fdb_bool_t *, const uint8_t **, int *))                          \
    X(1, fdb_error_t, future_get_keyvalue_array, (FDBFuture *, const FDBKeyValue **, int *, fdb_bool_t *))             \
    X(1, fdb_error_t, future_get_mappedkeyvalue_array, (FDBFuture *, const FDBMappedKeyValue **, int *, fdb_bool_t *)) \
    X(1, fdb_error_t, future_get_string_array, (FDBFuture *, const char ***, int *))

/* The struct members of that table: one function pointer per entry. */
#define RL__FDB_FN_MEMBER(need, ret, name, params) ret(*name) params;

#endif
