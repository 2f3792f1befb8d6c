/* fdbc.h (internal to src/fdbc) — FoundationDB's C API, API versions 710 to 730, as the
 * libfdb_c.so built over reclayer implements it: the documented ABI (types, constants, the
 * exported functions) and the private structures of the library's objects.
 *
 * Everything here was written from FoundationDB's API documentation (api-c.html, the option and
 * error tables); no FoundationDB header was copied. The library sits on reclayer's public API
 * (include/reclayer/) only, like a tool: an FDBDatabase is an rl_db, an FDBTransaction an
 * rl_txn, an FDBFuture wraps an rl_future.
 *
 * ABI: the types and struct layouts are base/fdb_api.h's (shared with the fdb: backend and the
 * tests; tests/integ/kv/test_fdbc_abi.c checks every size and offset against the documented
 * numbers).
 *
 * FDBMappedKeyValue mirrors FoundationDB's C++ MappedKeyValueRef, whose secondary result is a
 * std::variant; its last 32 bytes are opaque in the C header. This library fills them as that C++
 * layout has them for a range result: buffer[0] the secondary range's `more` (a bool), buffer[4..20)
 * an absent readThrough, buffer[20] and [21] readToBegin / readThroughEnd (0), buffer[24] the
 * variant index (1: a range result), the rest zero. A point-mode entry (mapper without "{...}")
 * is presented through the same range view: getRange.begin is the key read, getRange.end that key
 * plus "\x00", data holds 0 or 1 rows (FoundationDB's C view cannot represent a point result at
 * all; docs/design.md §8.8.1).
 *
 * Threads (FoundationDB's model): every function may be called from any thread; a transaction's
 * calls are serialised by its mutex. fdb_run_network runs the network thread: callbacks set on a
 * future that is not ready yet run there; a callback set on a ready future runs at once in the
 * setting thread. Futures become ready on whatever thread reclayer completes them (the caller's
 * for embedded databases), so fdb_future_block_until_ready works with or without a running
 * network thread; only callbacks need it.
 */
#ifndef RL_FDBC_H
#define RL_FDBC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/fdb_api.h"
#include "reclayer/kv.h"

#define FDBC_API __attribute__((visibility("default")))

/* The API versions this library speaks. */
#define FDBC_MIN_API_VERSION 610
#define FDBC_MAX_API_VERSION 730

/* Streaming modes, conflict range types and error predicates (FoundationDB's numbers). */
enum {
    FDBC_STREAMING_WANT_ALL = -2,
    FDBC_STREAMING_ITERATOR = -1,
    FDBC_STREAMING_EXACT = 0,
    FDBC_STREAMING_SERIAL = 4,
};
enum { FDBC_CONFLICT_READ = 0, FDBC_CONFLICT_WRITE = 1 };
enum {
    FDBC_PRED_RETRYABLE = 50000,
    FDBC_PRED_MAYBE_COMMITTED = 50001,
    FDBC_PRED_RETRYABLE_NOT_COMMITTED = 50002,
};

/* FoundationDB error codes the library returns itself or tests against (error_definitions). */
enum {
    FDBC_E_OPERATION_CANCELLED = 1101,
    FDBC_E_FUTURE_RELEASED = 1102,
    FDBC_E_LARGE_ALLOC_FAILED = 1501,
    FDBC_E_IO_ERROR = 1510,
    FDBC_E_NO_CLUSTER_FILE_FOUND = 1515,
    FDBC_E_FILE_CORRUPT = 1522,
    FDBC_E_CLIENT_INVALID_OPERATION = 2000,
    FDBC_E_KEY_OUTSIDE_LEGAL_RANGE = 2004,
    FDBC_E_INVALID_OPTION_VALUE = 2006,
    FDBC_E_INVALID_OPTION = 2007,
    FDBC_E_NETWORK_NOT_SETUP = 2008,
    FDBC_E_NETWORK_ALREADY_SETUP = 2009,
    FDBC_E_READ_VERSION_ALREADY_SET = 2010,
    FDBC_E_VERSION_INVALID = 2011,
    FDBC_E_RANGE_LIMITS_INVALID = 2012,
    FDBC_E_FUTURE_NOT_SET = 2015,
    FDBC_E_TRANSACTION_READ_ONLY = 2023,
    FDBC_E_NETWORK_CANNOT_BE_RESTARTED = 2025,
    FDBC_E_BLOCKED_FROM_NETWORK_THREAD = 2026,
    FDBC_E_CONNECTION_STRING_INVALID = 2104,
    FDBC_E_UNSUPPORTED_OPERATION = 2108,
    FDBC_E_API_VERSION_UNSET = 2200,
    FDBC_E_API_VERSION_ALREADY_SET = 2201,
    FDBC_E_API_VERSION_INVALID = 2202,
    FDBC_E_API_VERSION_NOT_SUPPORTED = 2203,
    FDBC_E_INTERNAL_ERROR = 4100,
};

/* ---- Errors (errors.c) ------------------------------------------------------------------- */

/* The FoundationDB code for a reclayer code: FoundationDB's own numbers unchanged, reclayer's
 * own conditions (3000-3999) mapped to FoundationDB's nearest (the table in errors.c, also in
 * docs/design.md §8.8.1, Errors). 0 stays 0. */
int fdbc_err(int rl_code);
/* FoundationDB's predicate (retryable, maybe_committed, retryable_not_committed). */
int fdbc_pred(int predicate, int code);

/* ---- Network (network.c) ----------------------------------------------------------------- */

/* A unit of work for the network thread. Intrusive: the poster owns the node and keeps it alive
 * until fn has run (a future embeds its own, so posting never allocates). */
typedef struct fdbc_task {
    void (*fn)(struct fdbc_task *t);
    struct fdbc_task *next;
} fdbc_task;

/* The API version selected by fdb_select_api_version_impl, or 0. */
int fdbc_api_version(void);
/* The header version given with it (which removed functions follow, as FoundationDB's), or 0. */
int fdbc_header_version(void);
/* 1 once CALLBACKS_ON_EXTERNAL_THREADS (network option 61) was set. */
int fdbc_callbacks_anywhere(void);
/* 1 once fdb_setup_network succeeded. */
int fdbc_network_is_setup(void);
/* 1 if the calling thread is the one running fdb_run_network. */
int fdbc_on_network_thread(void);
/* Queue t->fn to run on the network thread (runs when fdb_run_network runs; after
 * fdb_stop_network, queued tasks still run before fdb_run_network returns). Thread-safe. */
void fdbc_post(fdbc_task *t);

/* ---- Futures (future.c) ------------------------------------------------------------------ */

typedef enum {
    FK_NONE = 0, /* commit, on_error, watch: no value */
    FK_INT64,    /* read version, approximate size */
    FK_KEY,      /* get_key, versionstamp */
    FK_VALUE,    /* get */
    FK_KVS,      /* get_range */
    FK_MAPPED,   /* get_mapped_range */
    FK_STRINGS,  /* get_addresses_for_key */
    FK_KEYS,     /* get_range_split_points */
    FK_RANGES,   /* blob granule ranges */
    FK_UINT64,   /* server protocol */
    FK_BOOL,
    FK_DOUBLE,
} fdbc_kind;

struct FDB_future {
    int kind; /* fdbc_kind */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready;         /* under mu; once 1 never changes */
    int err;           /* FoundationDB code; valid when ready */
    int refs;          /* under mu: the user's + the inner callback's + a posted task's */
    int destroyed;     /* fdb_future_destroy was called (under mu) */
    int released;      /* fdb_future_release_memory was called (under mu) */
    int inner_cb_done; /* the inner future's callback ran or will never run (under mu) */
    FDBCallback cb;    /* set and not yet run (under mu) */
    void *cb_param;
    fdbc_task task;      /* posts the callback to the network thread */
    rl_future *inner;    /* owned; results below may point into it */
    rl_future *inner2;   /* FK_STRINGS: the second read (the server list), owned */
    int inner2_cb_done;  /* its callback ran or will never run (under mu) */
    int parts;           /* FK_STRINGS: bit 0 inner, bit 1 inner2 completed (under mu) */
    rl_txn *aux_txn;     /* FK_STRINGS: the transaction of the two reads, owned */
    FDBDatabase *aux_db; /* ... and one reference to its database */
    FDBTransaction *tr;  /* on_error: the transaction it retries (borrowed, see transaction.c) */
    int on_error_code;   /* on_error: the code the user passed */
    int on_error_sub;    /* on_error: the code handed to rl_txn_on_error */
    int addr_no_port;    /* FK_STRINGS: addresses without ":PORT" (API < 630, option unset) */
    /* Results (valid when ready and err == 0). */
    int64_t i64;
    const uint8_t *bytes; /* FK_KEY / FK_VALUE */
    int len;
    int present;
    void *conv; /* heap block: FDBKeyValue[], FDBMappedKeyValue[] + rows, or FDBKey[] (FK_KEYS) */
    int count;
    int more;
};

/* A new pending future of kind (NULL when out of memory: callers then return
 * fdbc_future_oom()). The user holds one reference. */
FDBFuture *fdbc_future_new(int kind);
/* A ready future holding err (a shared static one when even that cannot be allocated). */
FDBFuture *fdbc_future_error(int kind, int err);
/* Attach inner (owned from now on) to the pending future f and complete f when inner completes
 * (converting its results). Returns f. On failure f completes with the error. */
FDBFuture *fdbc_future_attach(FDBFuture *f, rl_future *inner);
/* Complete a pending future with err (results already set). Runs or posts its callback. */
void fdbc_future_complete(FDBFuture *f, int err);
/* get_addresses_for_key: attach to the pending FK_STRINGS future f the read of the key's shard map
 * entry (ks: "\xff/keyServers/" at or before the key, one row) and of the server list (sl), both
 * on aux, a transaction of database d that f owns from now on with one reference of d taken here;
 * f completes when both did, with the team's addresses (future.c: addresses_convert). Returns f.
 * On failure f completes with the error. */
FDBFuture *fdbc_future_attach_addresses(FDBFuture *f, rl_future *ks, rl_future *sl, rl_txn *aux, FDBDatabase *d);

/* ---- Databases and transactions (database.c, transaction.c) ------------------------------ */

struct FDB_database {
    rl_db *db;      /* owned */
    int is_cluster; /* a cluster: URL (get_addresses_for_key has storage servers to name) */
    pthread_mutex_t mu;
    int refs; /* under mu: the user's handle + one per transaction */
    /* Transaction defaults (database options 500-503). */
    int64_t def_timeout_ms;
    int64_t def_retry_limit;
    int64_t def_max_retry_delay_ms;
    int64_t def_size_limit;
    int has_defaults;     /* one of them was set */
    int def_include_port; /* transaction_include_port_in_address (505): matters below API 630 */
};

/* reclayer's shard map in the system keyspace (docs/design.md §8.3): "\xff/keyServers/BEGIN" ->
 * tuple of the team's server ids, "\xff/serverList/" + 4-byte big-endian id -> (address, port,
 * host). get_addresses_for_key reads them. */
#define FDBC_KEYSERVERS "\xff/keyServers/"
#define FDBC_SERVERLIST "\xff/serverList/"

/* Drop one reference to d (closes the rl_db after the last). */
void fdbc_database_unref(FDBDatabase *d);
/* Decode FoundationDB's Int option parameter (8 bytes, little-endian) into *out; 0 or
 * invalid_option_value (a missing or wrongly sized parameter). */
int fdbc_int_param(const uint8_t *value, int len, int64_t *out);

struct FDB_transaction {
    FDBDatabase *d;         /* one reference held */
    rl_txn *txn;            /* owned */
    pthread_mutex_t mu;     /* serialises every call on the transaction */
    int deferred_err;       /* first error of a void call (set, clear, ...) since the last reset;
                                 commit and later reads fail with it, as FoundationDB's do */
    int used;               /* a read or read version was issued (set_read_version then fails) */
    int has_rv;             /* a read version was set */
    int sticky;             /* an option rl_txn_reset cannot undo was set (reset recreates) */
    int access_system_keys; /* ACCESS_SYSTEM_KEYS (read and write \xff) */
    int read_system_keys;   /* READ_SYSTEM_KEYS only: \xff readable, not writable */
    int ryw_disabled;
    int64_t approx_size; /* bytes of mutations and conflict ranges given (approximate) */
    int include_port;    /* include_port_in_address (23): matters below API 630 */
};

#endif
