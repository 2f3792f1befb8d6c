/* kv.h — reclayer's transactional key-value API, shaped after FoundationDB's C API.
 *
 * A database (rl_db) is opened from a URL:
 *   mem:            embedded, in memory, nothing on disk
 *   file:DIR        embedded, durable in DIR (which must exist; one process at a time)
 *   file:DIR?engine=ssd
 *                   the same with the storage engine named (memory or ssd; rl_db_options.engine);
 *                   "&checkpoint_bytes=N" (or alone) sets rl_db_options.checkpoint_log_bytes
 *   cluster:FILE    a cluster of rlkvd processes (rl cluster up writes FILE)
 *   cluster:FILE?secondary=individual|grouped&stream=0|1&chunk=BYTES&window=BYTES
 *                   the same with the mapped reads' secondary strategy, and whether mapped reads
 *                   are streamed (default 1) with which chunk and window (docs/design.md §8.5)
 *   fdb:FILE        a FoundationDB cluster through its client library libfdb_c
 *
 * Transactions are serializable with optimistic concurrency (docs/design.md §2): reads see a snapshot at
 * the read version plus the transaction's own writes; commit fails with not_committed (1020) if a
 * read conflict range intersects a write committed after the read version. Snapshot reads add no
 * read conflict range.
 *
 * Every read returns an rl_future. Embedded futures are ready at once; cluster futures complete
 * as replies arrive, on the database's network thread. Many futures may be outstanding in one
 * transaction (that is how SCAN_AND_FETCH pipelines). Results borrowed from a future are valid
 * until rl_future_free of that future.
 *
 * Threads: an rl_db may be shared by threads; one rl_txn (and its futures) is used by one thread
 * at a time; callbacks may run on another thread (rl_future_set_callback).
 *
 * Errors are the codes of include/reclayer/error.h (FoundationDB's numbers where FoundationDB has
 * the condition).
 */
#ifndef RECLAYER_KV_H
#define RECLAYER_KV_H

#include "reclayer/alloc.h"
#include "reclayer/common.h"
#include "reclayer/error.h"

typedef struct rl_db rl_db;
typedef struct rl_txn rl_txn;
typedef struct rl_future rl_future;

/* Limits (FoundationDB's). */
#define RL_KEY_SIZE_LIMIT 10000
#define RL_VALUE_SIZE_LIMIT 100000
#define RL_TXN_SIZE_LIMIT 10000000

/* Read flags (bit set). Unknown bits are refused with RL_E_INVALID_ARGUMENT. */
#define RL_SNAPSHOT 0x1 /* snapshot read: no read conflict range */
#define RL_REVERSE 0x2  /* ranges: newest key first */
/* Mapped ranges on a cluster: how a storage server reads the secondaries other servers hold, for
 * this request (neither flag: the database's rl_db_options.mapped_secondary_strategy; both:
 * RL_E_INVALID_ARGUMENT). Other backends accept and ignore them. */
#define RL_MAPPED_INDIVIDUAL 0x4 /* FoundationDB's: batches of 10 separate reads, one after another */
#define RL_MAPPED_GROUPED 0x8    /* the page's remote secondaries grouped by owner, one round trip */
/* Mapped ranges: the reply may leave out the index key and value of entries other than the
 * page's first and last (docs/design.md §3, "Omitted index entries"), for a caller that rebuilds
 * them from the records (the record layer). An omitted entry has index_omitted 1, an empty index
 * key and value, and its secondary read as usual. The embedded and cluster backends omit (a
 * streamed cluster reply also keeps the last entry of each batch the server sends); fdb: accepts
 * the flag and returns every entry whole (FoundationDB has no such option), as libfdb_c.so
 * offers none. */
#define RL_MAPPED_OMIT_INDEX 0x10
/* Mapped ranges on a cluster with the `grouped` strategy: the storage server may leave the
 * secondaries other servers hold unread — such an entry comes with no rows and `more` set (a
 * range mapper only: a point read is always read) — for a caller that reads them itself from
 * their owners (the record layer does, for large records: docs/design.md §8.4, "Deferred
 * secondaries"), so a large record crosses the network once rather than twice. Other strategies
 * and backends accept the flag and read every secondary. */
#define RL_MAPPED_DEFER_REMOTE 0x20

/* rl_db_options.mapped_secondary_strategy (docs/design.md §8.4, "Strategies"). */
typedef enum {
    RL_SECONDARY_DEFAULT = 0,    /* the cluster's default (docs/design.md §8.4) */
    RL_SECONDARY_INDIVIDUAL = 1, /* RL_MAPPED_INDIVIDUAL for every mapped range */
    RL_SECONDARY_GROUPED = 2,    /* RL_MAPPED_GROUPED for every mapped range */
} rl_secondary_strategy;

/* Streaming modes (FoundationDB's numbers). */
typedef enum {
    RL_STREAMING_WANT_ALL = -2,
    RL_STREAMING_ITERATOR = -1,
    RL_STREAMING_EXACT = 0,
    RL_STREAMING_SMALL = 1,
    RL_STREAMING_MEDIUM = 2,
    RL_STREAMING_LARGE = 3,
    RL_STREAMING_SERIAL = 4,
} rl_streaming_mode;

/* Atomic operations (FoundationDB's mutation type numbers where they exist). */
typedef enum {
    RL_ATOMIC_ADD = 2,
    RL_ATOMIC_BIT_AND = 6,
    RL_ATOMIC_BIT_OR = 7,
    RL_ATOMIC_BIT_XOR = 8,
    RL_ATOMIC_APPEND_IF_FITS = 9,
    RL_ATOMIC_MAX = 12,
    RL_ATOMIC_MIN = 13,
    RL_ATOMIC_SET_VERSIONSTAMPED_KEY = 14,
    RL_ATOMIC_SET_VERSIONSTAMPED_VALUE = 15,
    RL_ATOMIC_BYTE_MIN = 16,
    RL_ATOMIC_BYTE_MAX = 17,
    RL_ATOMIC_COMPARE_AND_CLEAR = 20,
} rl_atomic_op;

/* Conflict range kinds. */
typedef enum { RL_CONFLICT_READ = 0, RL_CONFLICT_WRITE = 1 } rl_conflict_type;

/* Transaction options (rl_txn_set_option). */
typedef enum {
    RL_TXN_OPT_TIMEOUT_MS = 500,  /* value: ms from rl_txn_begin / rl_txn_reset (not
                                          restarted by rl_txn_on_error, as FoundationDB); 0 = none;
                                          initially rl_db_options.transaction_timeout_ms. Once it
                                          elapses every pending and later operation fails with
                                          transaction_timed_out (1031, not retryable) until reset:
                                          a read, read version or commit waiting on a server that
                                          is down completes then (a commit may still have been
                                          applied); see docs/design.md §8.5 */
    RL_TXN_OPT_RETRY_LIMIT = 501, /* value: retries by on_error, -1 = unlimited */
    RL_TXN_OPT_MAX_RETRY_DELAY_MS = 502,
    RL_TXN_OPT_SIZE_LIMIT = 503,         /* value: bytes, at most RL_TXN_SIZE_LIMIT */
    RL_TXN_OPT_ACCESS_SYSTEM_KEYS = 301, /* value ignored: allow writes to \xff keys */
    RL_TXN_OPT_READ_YOUR_WRITES_DISABLE = 51,
    RL_TXN_OPT_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE = 30, /* value ignored: the next successful
                                          write (set, clear, clear range, atomic op) adds no write
                                          conflict range, as FoundationDB's option; every reset
                                          forgets it */
} rl_txn_option;

/* A key-value pair. Pointers are borrowed from the future (or cursor) that returned them. */
typedef struct {
    const uint8_t *key;
    uint32_t key_len;
    const uint8_t *value;
    uint32_t value_len;
} rl_keyvalue;

/* A key selector: firstGreaterOrEqual(k) = {k, 0, 1}, firstGreaterThan(k) = {k, 1, 1},
 * lastLessOrEqual(k) = {k, 1, 0}, lastLessThan(k) = {k, 0, 0}; offset moves further. */
typedef struct {
    const uint8_t *key;
    uint32_t key_len;
    int or_equal;
    int offset;
} rl_key_selector;

#define RL_FIRST_GREATER_OR_EQUAL(k, l) ((rl_key_selector){(const uint8_t *)(k), (uint32_t)(l), 0, 1})
#define RL_FIRST_GREATER_THAN(k, l) ((rl_key_selector){(const uint8_t *)(k), (uint32_t)(l), 1, 1})
#define RL_LAST_LESS_OR_EQUAL(k, l) ((rl_key_selector){(const uint8_t *)(k), (uint32_t)(l), 1, 0})
#define RL_LAST_LESS_THAN(k, l) ((rl_key_selector){(const uint8_t *)(k), (uint32_t)(l), 0, 0})

/* One entry of a mapped range result (docs/design.md §3): the index entry and its secondary read. */
typedef struct {
    rl_keyvalue index;    /* index key and value: always present */
    int is_range;         /* 1: prefix range [begin, end) ("{...}" mapper); 0: point read */
    const uint8_t *begin; /* secondary range begin (point: the key read) */
    uint32_t begin_len;
    const uint8_t *end; /* secondary range end (point: the key + "\x00") */
    uint32_t end_len;
    const rl_keyvalue *kvs; /* secondary key-values in ascending order (point: 0 or 1) */
    int n_kvs;
    int more;                   /* the secondary read was cut off by its per-entry limits */
    int served_locally;         /* 1: read by the storage server holding the index entry, 0: by
                                 * another one, -1: not known (fdb:: FoundationDB does not say) */
    int index_omitted;          /* 1: the index key and value were left out (RL_MAPPED_OMIT_INDEX): index
                           is empty; 0: index is the entry's */
    uint32_t index_omitted_len; /* index_omitted: the key + value bytes left out; else 0 */
} rl_mapped_keyvalue;

/* Database options (rl_db_open); zero-initialise and set size = sizeof(rl_db_options). */
typedef struct {
    uint32_t size;                 /* sizeof(rl_db_options) */
    int no_sync;                   /* file: skip fsync (faster, not durable against power loss) */
    uint64_t window_versions;      /* MVCC window in versions; 0 = 5,000,000 (5 s) */
    uint64_t checkpoint_log_bytes; /* file: checkpoint (ssd: flush to LMDB) every this many log
                                    * bytes; 0 = 64 MiB (ssd: 16 MiB) */
    /* Bounded fan-out of mapped ranges (docs/design.md §3): each secondary range read returns at most
     * this many rows / about this many bytes, and is marked `more` when cut off (the caller
     * completes it). 0 = 2,000 rows / 10,000,000 bytes (FoundationDB's quick-get limits). */
    int mapped_secondary_row_limit;
    long mapped_secondary_byte_limit;
    /* 1: open read-only. file: recovers into memory without creating, writing, renaming,
     * truncating or deleting any file; a damaged log tail is ignored and reported in the status,
     * not moved aside. The memory engine's readers take no lock: they open beside a writer in
     * another process (or this one) without blocking it, and each keeps the consistent state it
     * recovered — the versions the writer had written to its log by then (docs/file-format.md,
     * Read-only opening). The ssd engine's readers exclude a writer and are excluded by one
     * (RL_E_DATABASE_LOCKED_BY_PROCESS). A commit with mutations or write conflict ranges fails
     * with RL_E_READ_ONLY_DATABASE; reads work as usual. Read only when size covers it. */
    int read_only;
    /* cluster: the storage-to-storage strategy of mapped ranges whose request names none
     * (rl_secondary_strategy; the URL's ?secondary=individual|grouped overrides it). Other
     * backends ignore it. Read only when size covers it. */
    int mapped_secondary_strategy;
    /* file: the storage engine (docs/design.md §4): RL_DB_ENGINE_DEFAULT (0) opens whatever the
     * directory holds (memory for a new one); RL_DB_ENGINE_MEMORY or RL_DB_ENGINE_SSD create a
     * new directory with that engine and refuse (RL_E_INVALID_ARGUMENT, naming both) one that
     * holds the other. A URL's "?engine=NAME" overrides it. Read only when size covers it. */
    int engine;
    /* Every transaction's timeout in ms, the initial value of its RL_TXN_OPT_TIMEOUT_MS
     * (FoundationDB's transaction_timeout database option); 0: none (the default). Negative is
     * RL_E_INVALID_ARGUMENT. Read only when size covers it. */
    int64_t transaction_timeout_ms;
    /* cluster: a report of the requests that wait for a server (docs/design.md §8.5, "Waiting
     * for a server"). Once a request has waited wait_report_ms (0: never, the default), the
     * database's network thread calls wait_report(line, wait_report_ud) with one line per server
     * and kind of request — the server (role, id, address, host label), the request type, how
     * many wait, since when, and why (no reply yet, or the last attempt's failure) — and again
     * every wait_report_ms while requests wait. wait_report must not block nor call into the
     * database; line is valid during the call. Other backends never call it. Read only when size
     * covers it. */
    int64_t wait_report_ms;
    void (*wait_report)(const char *line, void *ud);
    void *wait_report_ud;
} rl_db_options;

enum { RL_DB_ENGINE_DEFAULT = 0, RL_DB_ENGINE_MEMORY = 1, RL_DB_ENGINE_SSD = 2 };

/* ---- Database ---------------------------------------------------------------------------- */

/* rl_db_open — open a database from a URL (see the top of this file). opts may be NULL.
 * [out] out: the handle on RL_OK, NULL otherwise; free with rl_db_close.
 * Errors: RL_E_BAD_URL (unknown scheme), RL_E_FILE_NOT_FOUND (file: directory missing),
 * RL_E_DATABASE_LOCKED_BY_PROCESS, RL_E_LOG_CORRUPT / RL_E_CHECKPOINT_CORRUPT (a damaged, junk
 * or missing file: the message, from rl_last_error_detail, names it and the offset; no file is
 * changed — docs/file-format.md, Recovery), RL_E_CORRUPT_DATA (ssd: a damaged or foreign
 * data.mdb or ENGINE, named in the message), RL_E_IO_ERROR, RL_E_OUT_OF_MEMORY,
 * RL_E_INVALID_ARGUMENT (also: the directory holds the other storage engine, both named). */
RL_API int rl_db_open(const char *url, const rl_db_options *opts, rl_db **out);
/* rl_db_close — close; every transaction of the db must be freed first. NULL is a no-op. */
RL_API void rl_db_close(rl_db *db);
/* rl_db_status_json — a JSON object describing the database (versions, sizes, log and checkpoint
 * state). [out] out: heap string, free with rl_free. RL_OK or RL_E_OUT_OF_MEMORY. */
RL_API int rl_db_status_json(rl_db *db, char **out);
/* rl_db_status_fdb_json — the status document in FoundationDB's schema, the value of the special
 * key "\xff\xff/status/json" (which any binding reads with a get): client {cluster_file,
 * coordinators, database_status, messages, timestamp} and cluster {connection_string,
 * database_available, processes, data}, with what reclayer does not have left out (docs/design.md
 * §8.8). A cluster's document asks its processes (up to a few seconds when some are down).
 * [out] out: heap string, free with rl_free. RL_OK or RL_E_OUT_OF_MEMORY. The special keys
 * "\xff\xff/connection_string" and "\xff\xff/cluster_file_path" read a cluster's cluster file
 * (absent on embedded databases); other keys from "\xff\xff" on are key_outside_legal_range. */
RL_API int rl_db_status_fdb_json(rl_db *db, char **out);
/* rl_last_error_detail (the detail of a failed rl_db_open) is in reclayer/error.h, rl_free (for
 * what the library hands out) in reclayer/alloc.h. */

/* Database options (rl_db_set_option; FoundationDB's database option numbers). */
typedef enum {
    RL_DB_OPT_MAX_WATCHES = 20, /* value: watches that may be outstanding on this handle at once,
                                   0..1,000,000 (FoundationDB's max_watches; default 10,000).
                                   Lowering it cancels no watch. */
} rl_db_option;

/* rl_db_set_option — set a database option (rl_db_option). RL_OK, RL_E_INVALID_OPTION for an
 * unknown option, RL_E_INVALID_OPTION_VALUE for a value out of its range, RL_E_INVALID_ARGUMENT
 * for a NULL db. Thread-safe. */
RL_API int rl_db_set_option(rl_db *db, rl_db_option opt, int64_t value);

/* rl_db_run — the retry loop: begin a transaction, call fn(txn, ctx), commit; on a retryable
 * error (fn's or commit's) wait with backoff (rl_txn_on_error) and run again. Returns RL_OK after a
 * successful commit, or the first non-retryable error (fn's error code as it returned it) —
 * transaction_timed_out (1031) once the database's transaction_timeout_ms (or a timeout fn set)
 * has elapsed since the first attempt. fn must be idempotent with respect to anything outside the
 * transaction. */
RL_API int rl_db_run(rl_db *db, int (*fn)(rl_txn *txn, void *ctx), void *ctx);

/* ---- Transactions ------------------------------------------------------------------------ */

/* rl_txn_begin — create a transaction. [out] out: free with rl_txn_free. RL_OK or
 * RL_E_OUT_OF_MEMORY. */
RL_API int rl_txn_begin(rl_db *db, rl_txn **out);
/* rl_txn_free — destroy a transaction. Reads still in flight are cancelled: their futures
 * complete with transaction_cancelled and stay valid until freed (free them after or before, in
 * any order). A commit in flight still completes its future with its outcome. NULL is a no-op. */
RL_API void rl_txn_free(rl_txn *txn);
/* rl_txn_reset — forget everything (reads, writes, read version, retry state, but not options
 * set with rl_txn_set_option) and start again as new. Reads in flight are cancelled (their futures
 * complete with transaction_cancelled). */
RL_API void rl_txn_reset(rl_txn *txn);
/* rl_txn_cancel — reads in flight and further operations fail with transaction_cancelled until
 * rl_txn_reset. */
RL_API void rl_txn_cancel(rl_txn *txn);
/* rl_txn_set_option — set a transaction option (rl_txn_option). RL_E_INVALID_OPTION for an
 * unknown option, RL_E_INVALID_OPTION_VALUE for a bad value. */
RL_API int rl_txn_set_option(rl_txn *txn, rl_txn_option opt, int64_t value);

/* rl_txn_set_read_version — use version v instead of asking for one. */
RL_API void rl_txn_set_read_version(rl_txn *txn, int64_t v);
/* rl_txn_get_read_version — future of the read version (rl_future_get_int64): a version that
 * sees every commit acknowledged before it was asked for. Versions advance with time whether or
 * not anything commits (docs/design.md §2), so a read version is inside the MVCC window however
 * long the database was idle, and the one asked for after rl_txn_on_error or rl_txn_reset is
 * fresh. */
RL_API rl_future *rl_txn_get_read_version(rl_txn *txn);

/* Reads. Each returns a future (never NULL; on OOM a future that holds RL_E_OUT_OF_MEMORY).
 * flags: RL_SNAPSHOT, and RL_REVERSE for ranges. */
/* rl_txn_get — value of key (rl_future_get_value). Reading a key this transaction wrote with
 * SET_VERSIONSTAMPED_VALUE fails with accessed_unreadable (1036); keys >= "\xff" (without
 * ACCESS_SYSTEM_KEYS) with key_outside_legal_range (2004). A key longer than the key limit is
 * simply absent. A read the transaction's own writes fully answer adds no read conflict. */
RL_API rl_future *rl_txn_get(rl_txn *txn, const void *key, size_t key_len, int flags);
/* rl_txn_get_key — the key a selector resolves to over the snapshot merged with this
 * transaction's writes (rl_future_get_key): "" when it runs off the front, "\xff" ("\xff\xff"
 * with ACCESS_SYSTEM_KEYS) off the end. A selector key beyond that is key_outside_legal_range. */
RL_API rl_future *rl_txn_get_key(rl_txn *txn, rl_key_selector sel, int flags);
/* rl_txn_get_range — key-values in [begin, end) as resolved selectors (rl_future_get_keyvalue_array).
 * limit: rows (0 = unlimited); target_bytes (0 = unlimited); mode and iteration as FoundationDB
 * (mode sets the byte target when target_bytes is 0; EXACT needs a limit). `more` says whether the
 * range has rows beyond those returned. */
RL_API rl_future *rl_txn_get_range(rl_txn *txn, rl_key_selector begin, rl_key_selector end, int limit, int target_bytes,
                                   rl_streaming_mode mode, int iteration, int flags);
/* rl_txn_get_mapped_range — FoundationDB's getMappedRange with reclayer's result struct
 * (rl_future_get_mapped_keyvalue_array). Requires serializable reads (RL_SNAPSHOT is refused
 * with RL_E_UNSUPPORTED_OPERATION, as in FoundationDB); a transaction that already wrote inside
 * the primary range or any secondary read fails with get_mapped_range_reads_your_writes (2039).
 * Adds read conflict ranges for the primary range and every secondary read. flags: RL_REVERSE,
 * at most one of RL_MAPPED_INDIVIDUAL / RL_MAPPED_GROUPED (both: RL_E_INVALID_ARGUMENT), and
 * RL_MAPPED_OMIT_INDEX (the entries between the first and the last may come without their index
 * key-value; the first and the last always have theirs) and RL_MAPPED_DEFER_REMOTE (entries whose
 * secondary another server holds may come unread: no rows, more). */
RL_API rl_future *rl_txn_get_mapped_range(rl_txn *txn, rl_key_selector begin, rl_key_selector end, const void *mapper,
                                          size_t mapper_len, int limit, int target_bytes, rl_streaming_mode mode,
                                          int iteration, int flags);

/* Writes. RL_OK, or: RL_E_KEY_TOO_LARGE, RL_E_VALUE_TOO_LARGE, RL_E_SYSTEM_KEY_WRITE (a \xff key
 * without RL_TXN_OPT_ACCESS_SYSTEM_KEYS), RL_E_KEY_OUTSIDE_LEGAL_RANGE (a key, or a clear range's
 * end, above "\xff\xff": the special-key space, which reads refuse too), RL_E_USED_DURING_COMMIT,
 * RL_E_INVERTED_RANGE, RL_E_INVALID_MUTATION_TYPE. A failed write changes nothing. Writes (and
 * reads) never fail for the transaction's size: the commit does (rl_txn_commit). */
RL_API int rl_txn_set(rl_txn *txn, const void *key, size_t key_len, const void *value, size_t value_len);
RL_API int rl_txn_clear(rl_txn *txn, const void *key, size_t key_len);
RL_API int rl_txn_clear_range(rl_txn *txn, const void *begin, size_t begin_len, const void *end, size_t end_len);
/* rl_txn_atomic_op — an atomic operation; for SET_VERSIONSTAMPED_KEY/VALUE the key/param ends
 * with the 4-byte little-endian offset of the 10-byte placeholder. */
RL_API int rl_txn_atomic_op(rl_txn *txn, const void *key, size_t key_len, const void *param, size_t param_len,
                            rl_atomic_op op);
RL_API int rl_txn_add_conflict_range(rl_txn *txn, const void *begin, size_t begin_len, const void *end, size_t end_len,
                                     rl_conflict_type type);

/* rl_txn_commit — commit (future with no value; its error is the outcome): RL_OK once the commit
 * is durable; not_committed (1020) on a conflict; transaction_too_old (1007); commit_unknown_result
 * (1021) when the log failed while writing this commit (it may or may not survive a restart);
 * after such a failure the database is poisoned and later commits fail with io_error, no_space or
 * out_of_memory; transaction_too_large (2101) when what it would send — the mutations' keys and
 * values plus the read and write conflict ranges, coalesced — passes RL_TXN_OPT_SIZE_LIMIT (default
 * RL_TXN_SIZE_LIMIT), checked here only, as FoundationDB does; transaction_timed_out, transaction_cancelled;
 * read_only_database (3008) for a transaction with writes on a database opened read-only. The
 * first three (and 1021) are retryable through rl_txn_on_error. */
RL_API rl_future *rl_txn_commit(rl_txn *txn);
/* rl_txn_get_committed_version — after a successful commit: its version; -1 for a read-only
 * transaction. RL_E_CLIENT_INVALID_OPERATION before commit. */
RL_API int rl_txn_get_committed_version(rl_txn *txn, int64_t *out);
/* rl_txn_get_versionstamp — future of the 10-byte versionstamp of the commit (rl_future_get_key);
 * ready once the commit succeeds; holds RL_E_NO_COMMIT_VERSION for a read-only transaction and the
 * commit's error if it failed, RL_E_TRANSACTION_CANCELLED if the transaction is reset, cancelled or
 * freed first. Ask for it before committing (one pending versionstamp future per transaction; a
 * second is RL_E_CLIENT_INVALID_OPERATION); after a successful commit it is ready at once. */
RL_API rl_future *rl_txn_get_versionstamp(rl_txn *txn);
/* rl_txn_watch — watch key (docs/design.md §2, "Watches"): a future with no value that becomes
 * ready (RL_OK) once a committed write changes the key's value from the value this transaction
 * sees — the value at its read version, or the value it wrote before the call. Any write that
 * leaves another value fires it, even one changed back later (A to B to A fires at B); a rewrite
 * of the same value does not. The watch is registered when the transaction commits (a read-only
 * commit too): until then it sees no change of other transactions, but a later write of this
 * transaction that changes the value it knows fires it at once. It then outlives the transaction.
 * The future holds the commit's error if the commit fails, transaction_cancelled (1025) if the
 * transaction is reset, cancelled or freed before committing, too_many_watches (1032) when the
 * database already has its limit of outstanding watches (RL_DB_OPT_MAX_WATCHES), watches_disabled
 * (1034) with RL_TXN_OPT_READ_YOUR_WRITES_DISABLE, key_too_large (2102), key_outside_legal_range
 * (2004) for keys from "\xff" ("\xff\xff" with ACCESS_SYSTEM_KEYS), used_during_commit,
 * unsupported_operation on a backend without watches. rl_future_free of a pending watch
 * cancels it (FoundationDB's fdb_future_cancel) and frees its place under the limit. Callbacks
 * run on the thread that applies the change (embedded: the thread whose commit made it, once
 * that commit is done; cluster: the network thread). Never NULL. */
RL_API rl_future *rl_txn_watch(rl_txn *txn, const void *key, size_t key_len);
/* rl_txn_on_error — the retry step: for a retryable error, reset the transaction at once and
 * return a future that becomes ready after a backoff delay (wait for it, then run the transaction
 * again); otherwise return a future holding the error. Honours the retry limit and timeout: once
 * the timeout has elapsed the future holds transaction_timed_out (1031), which is not retryable,
 * so rl_db_run stops with it. */
RL_API rl_future *rl_txn_on_error(rl_txn *txn, int error);

/* ---- Size estimates (docs/design.md §4, "Size estimates") ---------------------------------- *
 *
 * FoundationDB's getEstimatedRangeSizeBytes and getRangeSplitPoints. Every storage engine keeps a
 * byte sample of the pairs it holds (FoundationDB's rule and constants): a pair of s = key + value
 * bytes with a key of k bytes is sampled with probability p = min(1, s / D), D = 250 * (k + 100)
 * bytes, decided by a hash of the key, and stands for s / p bytes. The sample follows every
 * commit as it is applied and is rebuilt from the data when a store opens, so the same data gives
 * the same answers after a restart. These calls take no read version, add no conflict range and
 * do not see the transaction's own uncommitted writes; a cluster asks each storage server holding
 * part of the range and sums (merges) their answers.
 *
 * Error bound. The estimate of a range is unbiased, with a standard deviation of at most
 * sqrt(B * D_max) bytes for a range holding B bytes whose keys are at most K bytes long
 * (D_max = 250 * (K + 100)). With keys of at most 28 bytes (D_max = 32,000):
 *   - a range holding >= 10 MB is within 25% of its true size with high probability (4 standard
 *     deviations: 23% at 10 MB, 7.2% at 100 MB, 2.3% at 1 GB; failure probability below 1e-4);
 *   - a range holding >= 1 MB is within 72% (4 standard deviations);
 *   - a range smaller than D_max (32 KB) may hold no sampled pair and then estimates 0; any
 *     estimate is a sum of multiples of D (pairs smaller than D) and sizes of pairs larger.
 * Split points cut the range where the sample's running sum passes chunk_size, so every chunk but
 * the last (and, on a cluster, but the last before each shard boundary) weighs between
 * chunk_size - D_max and chunk_size in the sample: its true size is within the bound above for
 * B = chunk_size, plus D_max. Ask for chunks of 10 MB or more when the sizes matter. */

/* rl_txn_get_estimated_range_size_bytes — future of the estimated bytes (keys + values) of the
 * pairs in [begin, end) (rl_future_get_int64; >= 0). Keys beyond "\xff\xff" count as "\xff\xff".
 * Errors (in the future): inverted_range (2005) when begin > end, transaction_cancelled,
 * used_during_commit, transaction_timed_out, the backend's errors (a cluster: as reads';
 * unsupported_operation for a backend without estimates). The keys are copied: the caller's
 * buffers may change after the call. Never NULL. */
RL_API rl_future *rl_txn_get_estimated_range_size_bytes(rl_txn *txn, const void *begin, size_t begin_len,
                                                        const void *end, size_t end_len);
/* rl_txn_get_range_split_points — future of keys that split [begin, end) into chunks of about
 * chunk_size bytes (rl_future_get_key_array): sorted, first begin and last end (a single key when
 * begin == end), the cuts in between — on a cluster also every shard boundary inside the range,
 * as FoundationDB. Errors (in the future): inverted_range (2005) when begin > end,
 * key_outside_legal_range (2004) when begin or end is above "\xff" ("\xff\xff" with
 * ACCESS_SYSTEM_KEYS), client_invalid_operation (2000) when chunk_size <= 0, and those of
 * rl_txn_get_estimated_range_size_bytes. Never NULL. */
RL_API rl_future *rl_txn_get_range_split_points(rl_txn *txn, const void *begin, size_t begin_len, const void *end,
                                                size_t end_len, int64_t chunk_size);

/* ---- Futures ----------------------------------------------------------------------------- */

/* rl_future_wait — block until ready. Returns the future's error. Do not call it from a callback
 * (it would wait for the thread it runs on). */
RL_API int rl_future_wait(rl_future *f);
RL_API int rl_future_is_ready(rl_future *f);
/* rl_future_get_error — RL_OK or the error the operation failed with (only when ready). */
RL_API int rl_future_get_error(rl_future *f);
/* rl_future_set_callback — call cb(f, ud) once when f becomes ready: now, in this thread, if it
 * already is; otherwise in the thread that completes it (the backend's network thread for
 * cluster:, the caller's for embedded databases) — a callback must not block. A callback never
 * starts after rl_future_free(f) returned. RL_OK, RL_E_OUT_OF_MEMORY (cb is then never called),
 * RL_E_INVALID_ARGUMENT. */
RL_API int rl_future_set_callback(rl_future *f, void (*cb)(rl_future *f, void *ud), void *ud);
/* Typed getters: RL_OK and the result, or the future's error. Borrowed pointers live until
 * rl_future_free. RL_E_CLIENT_INVALID_OPERATION if the future holds another kind of result or is
 * not ready. */
RL_API int rl_future_get_int64(rl_future *f, int64_t *out);
RL_API int rl_future_get_value(rl_future *f, int *out_present, const uint8_t **out_value, int *out_len);
RL_API int rl_future_get_key(rl_future *f, const uint8_t **out_key, int *out_len);
RL_API int rl_future_get_keyvalue_array(rl_future *f, const rl_keyvalue **out_kvs, int *out_count, int *out_more);
/* rl_future_get_key_array — rl_txn_get_range_split_points's keys: *out_keys[0..*out_count),
 * array and bytes borrowed until rl_future_free. */
RL_API int rl_future_get_key_array(rl_future *f, const rl_slice **out_keys, int *out_count);
RL_API int rl_future_get_mapped_keyvalue_array(rl_future *f, const rl_mapped_keyvalue **out, int *out_count,
                                               int *out_more);
/* rl_future_free — release a future and everything borrowed from it. A pending future is
 * cancelled: its callbacks never run and its operation's late completion is dropped (a pending
 * watch is cancelled wherever it is, and no longer counts against the database's limit). If one of its
 * callbacks is running on another thread, waits until it returns; a callback may free its own
 * future. NULL is a no-op. */
RL_API void rl_future_free(rl_future *f);

#endif
