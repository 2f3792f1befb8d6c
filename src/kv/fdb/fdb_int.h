/* fdb_int.h (internal to src/kv/fdb) — FoundationDB's C API as the fdb: backend consumes it: the
 * documented types and struct layouts, the numbers it uses, and the table of functions resolved
 * from the client library with dlsym (fdb_client.c). Written from FoundationDB's API
 * documentation for API versions 710-730 (every function used here has the same signature in all
 * of them); no FoundationDB header is included or copied.
 *
 *   FDBKey          packed to 4   12 bytes   0 key, 8 key_length
 *   FDBKeyValue     packed to 4   24 bytes   0 key, 8 key_length, 12 value, 20 value_length
 *   FDBKeySelector                20 bytes   0 key, 12 orEqual, 16 offset
 *   FDBGetRangeReqAndResult       56 bytes   0 begin, 20 end, 40 data, 48 m_size, 52 m_capacity
 *   FDBMappedKeyValue            112 bytes   0 key, 12 value, 24 getRange, 80 buffer[32]
 *
 * FDBMappedKeyValue's last 32 bytes are opaque in FoundationDB's header: they are the rest of the
 * C++ MappedKeyValueRef the struct mirrors byte for byte. For a range result (the only kind the C
 * view can show) the secondary range's `more` flag is the bool at offset 80 (buffer[0]) and the
 * std::variant's index is the byte at offset 104 (buffer[24], 1 = range). The backend reads them
 * defensively (fdb_backend.c, docs/design-fdb.md): a value other than 0/1, or another index,
 * means "not known".
 */
#ifndef RL_KV_FDB_INT_H
#define RL_KV_FDB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct FDB_future FDBFuture;
typedef struct FDB_database FDBDatabase;
typedef struct FDB_transaction FDBTransaction;
typedef int fdb_error_t;
typedef int fdb_bool_t;
typedef void (*FDBCallback)(FDBFuture *f, void *param);

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

_Static_assert(sizeof(FDBKeyValue) == 24 && offsetof(FDBKeyValue, value) == 12, "FDBKeyValue");
_Static_assert(sizeof(FDBKeySelector) == 20, "FDBKeySelector");
_Static_assert(sizeof(FDBGetRangeReqAndResult) == 56 && offsetof(FDBGetRangeReqAndResult, data) == 40,
               "FDBGetRangeReqAndResult");
_Static_assert(sizeof(FDBMappedKeyValue) == 112 && offsetof(FDBMappedKeyValue, getRange) == 24 &&
                   offsetof(FDBMappedKeyValue, buffer) == 80,
               "FDBMappedKeyValue");

#define RL_FDB_MKV_MORE 0     /* buffer offset of the secondary range's more flag */
#define RL_FDB_MKV_VARIANT 24 /* buffer offset of the variant index (1: range result) */

/* Numbers (fdb.options). */
enum {
    RL_FDB_STREAMING_WANT_ALL = -2,
    RL_FDB_STREAMING_EXACT = 0,
    RL_FDB_CONFLICT_READ = 0,
    RL_FDB_CONFLICT_WRITE = 1,
    RL_FDB_TR_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE = 30,
    RL_FDB_TR_READ_YOUR_WRITES_DISABLE = 51,
    RL_FDB_TR_ACCESS_SYSTEM_KEYS = 301,
    RL_FDB_TR_READ_SYSTEM_KEYS = 302,
    RL_FDB_TR_TIMEOUT = 500, /* Int parameter: milliseconds */
};

/* The API versions the backend accepts: the highest the library offers, capped at 730. */
#define RL_FDB_API_MIN 710
#define RL_FDB_API_MAX 730

/* The client library's functions (fdb_client.c resolves every one or refuses the library). */
typedef struct {
    int api_version;              /* selected */
    char path[512];               /* what was loaded */
    const char *(*get_error)(fdb_error_t);
    const char *(*get_client_version)(void);
    fdb_error_t (*create_database)(const char *, FDBDatabase **);
    void (*database_destroy)(FDBDatabase *);
    fdb_error_t (*database_create_transaction)(FDBDatabase *, FDBTransaction **);
    void (*transaction_destroy)(FDBTransaction *);
    void (*transaction_reset)(FDBTransaction *);
    fdb_error_t (*transaction_set_option)(FDBTransaction *, int, const uint8_t *, int);
    void (*transaction_set_read_version)(FDBTransaction *, int64_t);
    FDBFuture *(*transaction_get_read_version)(FDBTransaction *);
    FDBFuture *(*transaction_get)(FDBTransaction *, const uint8_t *, int, fdb_bool_t);
    FDBFuture *(*transaction_get_key)(FDBTransaction *, const uint8_t *, int, fdb_bool_t, int, fdb_bool_t);
    FDBFuture *(*transaction_get_range)(FDBTransaction *, const uint8_t *, int, fdb_bool_t, int,
                                        const uint8_t *, int, fdb_bool_t, int, int, int, int, int,
                                        fdb_bool_t, fdb_bool_t);
    FDBFuture *(*transaction_get_mapped_range)(FDBTransaction *, const uint8_t *, int, fdb_bool_t,
                                               int, const uint8_t *, int, fdb_bool_t, int,
                                               const uint8_t *, int, int, int, int, int, fdb_bool_t,
                                               fdb_bool_t);
    void (*transaction_set)(FDBTransaction *, const uint8_t *, int, const uint8_t *, int);
    void (*transaction_clear)(FDBTransaction *, const uint8_t *, int);
    void (*transaction_clear_range)(FDBTransaction *, const uint8_t *, int, const uint8_t *, int);
    void (*transaction_atomic_op)(FDBTransaction *, const uint8_t *, int, const uint8_t *, int, int);
    fdb_error_t (*transaction_add_conflict_range)(FDBTransaction *, const uint8_t *, int,
                                                  const uint8_t *, int, int);
    FDBFuture *(*transaction_commit)(FDBTransaction *);
    fdb_error_t (*transaction_get_committed_version)(FDBTransaction *, int64_t *);
    FDBFuture *(*transaction_get_versionstamp)(FDBTransaction *);
    void (*future_destroy)(FDBFuture *);
    fdb_error_t (*future_set_callback)(FDBFuture *, FDBCallback, void *);
    fdb_error_t (*future_get_error)(FDBFuture *);
    fdb_error_t (*future_get_int64)(FDBFuture *, int64_t *);
    fdb_error_t (*future_get_key)(FDBFuture *, const uint8_t **, int *);
    fdb_error_t (*future_get_value)(FDBFuture *, fdb_bool_t *, const uint8_t **, int *);
    fdb_error_t (*future_get_keyvalue_array)(FDBFuture *, const FDBKeyValue **, int *, fdb_bool_t *);
    fdb_error_t (*future_get_mappedkeyvalue_array)(FDBFuture *, const FDBMappedKeyValue **, int *,
                                                   fdb_bool_t *);
    /* Locality (fdb_backend.c, rl_kv_locality): the storage servers of a key, "IP:PORT" strings. */
    FDBFuture *(*transaction_get_addresses_for_key)(FDBTransaction *, const uint8_t *, int);
    fdb_error_t (*future_get_string_array)(FDBFuture *, const char ***, int *);
} rl_fdb_api;

/* fdb_client.c: the process's client (loaded, API version selected, network thread running),
 * loading it on the first call. Thread-safe. On failure, RL_E_FILE_NOT_FOUND (no library),
 * RL_E_UNSUPPORTED_OPERATION (too old, a missing function, another library already loaded) or
 * FoundationDB's code, with a message appended to errmsg; a library that could not be loaded is
 * tried again by the next call (RL_FDB_LIBRARY may have changed), one whose API version was
 * selected is not. */
int rl__fdb_client(const rl_fdb_api **out, rl_buf *errmsg);

#endif
