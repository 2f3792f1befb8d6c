/* query.h — index scans over a record store and the ways of fetching their records.
 *
 * A cursor (rl_cursor) scans one VALUE index of a store inside the caller's transaction and
 * yields rows: the index entry and the record it points to. It follows the Java Record Layer's
 * scan semantics (the Java Record Layer's; docs/design.md §7):
 *
 *   - Bounds on the index values: an equality prefix (a packed tuple of the first values), then
 *     an inclusive or exclusive low and high on what follows (each a packed tuple, usually one
 *     element), either side open.
 *   - Direction (reverse), skip, a returned-row limit, and out-of-band limits on scanned index
 *     entries, scanned bytes (index entries plus record key-values) and time.
 *   - When it returns no more rows it says why (rl_no_next_reason) and keeps saying the same
 *     thing: a cursor that ended stays ended.
 *   - Its continuation resumes exactly after the last row it returned (or the last orphan entry
 *     it skipped). Continuations are opaque bytes that carry a magic number, a version, the last
 *     index key after the index subspace, a hash of the index and the bounds (and direction),
 *     and a checksum: any other use (other index, other bounds, other direction, tampered or
 *     truncated bytes) is refused with RL_E_CONTINUATION_INVALID. They are interchangeable
 *     between fetch methods.
 *   - Skip applies only to the first page: a continuation does not record skip, and a cursor
 *     opened with a continuation ignores the skip it is given. Skip is pushed down into the
 *     index read as a key-selector offset (forward: begin offset += skip; reverse: end offset
 *     -= skip) for every fetch method, so skipped entries are never sent to the client and their
 *     records are never read.
 *   - The out-of-band limits (scanned entries, bytes, time) are checked before each index entry
 *     except the cursor's first ("free initial pass"), so every page makes progress. Bytes are
 *     counted after the fact (a page can overshoot the byte limit by one entry). Time runs from
 *     rl_cursor_open.
 *
 * Fetch methods (rl_fetch_method):
 *   SCAN_AND_FETCH  reads index entries with get_range and loads each record with its own range
 *                   read of (1, pk...) (version and every chunk), keeping up to pipeline_depth
 *                   loads outstanding; rows come in index order.
 *   USE_REMOTE_FETCH  one get_mapped_range per index read with the mapper
 *                   (records subspace elements..., "{K[i]}" per primary-key column, "{...}"); a
 *                   secondary result cut off by the server (its `more`) is completed by the client.
 *   USE_REMOTE_FETCH_WITH_FALLBACK  remote fetch; on any error of it (a read error such as
 *                   get_mapped_range_reads_your_writes, an undecodable record, an orphan under
 *                   RL_ORPHAN_ERROR, a store prefix the mapper cannot express) the cursor falls
 *                   back once to SCAN_AND_FETCH, resuming after the last row it returned (from the
 *                   start position if it returned none), so no row is repeated or skipped. The
 *                   fallback is not recorded in the continuation. A failure after the fallback is
 *                   RL_E_FALLBACK_FAILED; rl_cursor_error_cause gives the underlying error.
 *   ADAPTIVE        runs the scan in pages (of at most 1,024 entries; never more than the return
 *                   limit leaves) and, before each page,
 *                   estimates what it would cost with SCAN_AND_FETCH and with USE_REMOTE_FETCH
 *                   (src/query/adaptive.h: the rows, bytes per row, pipeline depth, the round
 *                   trips the client measured to the index's and the records' servers, the share
 *                   of records off the index server's team, the servers' secondary strategy),
 *                   runs the cheaper and calibrates the model with the page's observed time (the
 *                   time spent inside rl_cursor_next), exploring the other method now and then at
 *                   a bounded cost. The model lives per rl_db, so it learns across queries. Rows,
 *                   continuations and errors are those of SCAN_AND_FETCH for the same arguments
 *                   (continuations are interchangeable between methods). A remote page failing
 *                   with an error SCAN_AND_FETCH would not meet (the mapper's codes,
 *                   unsupported_operation, get_mapped_range_reads_your_writes) is resumed with
 *                   SCAN_AND_FETCH, as is the rest of the cursor (counters: fallbacks,
 *                   fallback_error); snapshot cursors and stores the mapper cannot express use
 *                   SCAN_AND_FETCH only. rl_query_options.explain and rl_cursor_explain say why.
 *
 * Orphans (an index entry whose record is missing) are handled alike by every method:
 * RL_ORPHAN_ERROR (default) fails with RL_E_INDEX_ORPHAN_ENTRY and a detail naming the entry
 * (rl_cursor_errmsg); RL_ORPHAN_SKIP drops the entry; RL_ORPHAN_RETURN returns it with no record.
 *
 * Errors are sticky: after rl_cursor_next fails, every later call returns the same code.
 * Threads: a cursor is used by one thread at a time, like its transaction.
 */
#ifndef RECLAYER_QUERY_H
#define RECLAYER_QUERY_H

#include "reclayer/common.h"
#include "reclayer/error.h"
#include "reclayer/kv.h"
#include "reclayer/record.h"

typedef struct rl_cursor rl_cursor;

/* How a query loads the records of the index entries it scans. */
typedef enum {
    RL_FETCH_SCAN_AND_FETCH = 0,
    RL_FETCH_USE_REMOTE_FETCH = 1,
    RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK = 2,
    RL_FETCH_ADAPTIVE = 3, /* per page, the method estimated cheaper (see below) */
} rl_fetch_method;

/* What to do with an index entry whose record is missing. */
typedef enum {
    RL_ORPHAN_ERROR = 0,  /* fail with RL_E_INDEX_ORPHAN_ENTRY */
    RL_ORPHAN_SKIP = 1,   /* drop the entry */
    RL_ORPHAN_RETURN = 2, /* return the entry with record == NULL */
} rl_orphan_behavior;

/* Why a cursor returned no row (Java's NoNextReason). */
typedef enum {
    RL_NO_NEXT_NONE = 0,             /* the cursor has not ended */
    RL_NO_NEXT_SOURCE_EXHAUSTED = 1, /* no more entries within the bounds (no continuation) */
    RL_NO_NEXT_RETURN_LIMIT_REACHED = 2,
    RL_NO_NEXT_SCAN_LIMIT_REACHED = 3, /* out-of-band */
    RL_NO_NEXT_BYTE_LIMIT_REACHED = 4, /* out-of-band */
    RL_NO_NEXT_TIME_LIMIT_REACHED = 5, /* out-of-band */
} rl_no_next_reason;

/* The largest skip: it becomes a key-selector offset of 1 + skip, an int. */
#define RL_QUERY_MAX_SKIP 2147483646

/* Options of one cursor. Zero-initialise, set size = sizeof(rl_query_options), then the fields
 * you need; zero means "default" or "none" everywhere. Pointers are borrowed during
 * rl_cursor_open only (the cursor copies what it keeps). */
typedef struct {
    uint32_t size; /* sizeof(rl_query_options) */
    /* Bounds on the index values, each a packed tuple. */
    const void *eq; /* equality prefix: the first values (NULL/0: none) */
    size_t eq_len;
    const void *low; /* low bound on the values after eq (NULL: open) */
    size_t low_len;
    int low_exclusive; /* 0: values >= low; 1: values > low */
    const void *high;  /* high bound on the values after eq (NULL: open) */
    size_t high_len;
    int high_exclusive;         /* 0: values <= high; 1: values < high */
    int reverse;                /* 1: descending index order */
    int snapshot;               /* 1: snapshot reads of the index (records are always loaded
                                   * serializably; remote fetch then fails: unsupported_operation) */
    rl_fetch_method fetch;      /* default RL_FETCH_SCAN_AND_FETCH */
    rl_orphan_behavior orphans; /* default RL_ORPHAN_ERROR */
    int skip;                   /* entries to skip before the first row (first page only);
                                   * at most RL_QUERY_MAX_SKIP */
    int limit;                  /* returned rows (0: unlimited) */
    int scan_limit;             /* index entries scanned (0: unlimited) */
    int64_t byte_limit;         /* bytes scanned: index key-values + record key-values (0: none) */
    int64_t time_limit_ms;      /* from rl_cursor_open (0: none) */
    int pipeline_depth;         /* SCAN_AND_FETCH record loads outstanding (0: 10) */
    int index_batch;            /* index entries per read request at most (0: streaming mode) */
    const void *continuation;   /* from an earlier cursor of the same scan (NULL/0: start) */
    size_t continuation_len;
    /* The clock of the time limit, for tests: nanoseconds, monotonic (NULL: the system's). */
    uint64_t (*clock_ns)(void *ud);
    void *clock_ud;
    int trace; /* 1: record the timeline of the query's requests
                                   * (rl_cursor_get_trace); 0: none (costs nothing) */
    /* Remote fetch on a cluster: how the storage server holding an index page reads the records
     * other servers hold (rl_secondary_strategy: 0 the database's default, RL_SECONDARY_INDIVIDUAL
     * or RL_SECONDARY_GROUPED; passed as RL_MAPPED_* flags of each mapped read). Ignored by
     * other backends and fetch methods. Read only when size covers it. */
    int secondary_strategy;
    int explain; /* ADAPTIVE: 1 keeps one line per page explaining its method
                                   * (rl_cursor_explain); 0: none */
    /* Remote fetch: 0 (default) lets mapped reads leave out the index entries the cursor can
     * rebuild from their records (RL_MAPPED_OMIT_INDEX; VALUE indexes, docs/design.md §7 "Mapped
     * reads without the index entries") — rows, continuations and limits are the same; 1 asks
     * for every entry whole. */
    int keep_index_entries;
} rl_query_options;

/* Counters filled by every cursor (rl_cursor_get_counters). */
typedef struct {
    uint32_t size;                  /* sizeof(rl_query_counters) */
    uint64_t index_entries_read;    /* index entries received from reads */
    uint64_t rows_returned;         /* rows handed to the caller (orphans returned included) */
    uint64_t records_returned;      /* rows that carried a record */
    uint64_t orphans;               /* orphan entries met (whatever the behaviour) */
    uint64_t reads_get;             /* client reads issued: point gets */
    uint64_t reads_range;           /* client reads issued: get_range (index pages, loads) */
    uint64_t reads_mapped_range;    /* client reads issued: get_mapped_range */
    uint64_t mapped_range_requests; /* mapped-range requests sent (one per read on embedded) */
    uint64_t record_loads;          /* records the client loaded itself (SCAN_AND_FETCH; remote fetch:
                                     * the deferred ones, RL_MAPPED_DEFER_REMOTE) */
    uint64_t secondary_local;       /* mapped entries whose record the server read locally */
    uint64_t secondary_remote;      /* ... that another storage server served */
    uint64_t secondary_completions; /* secondaries cut off or deferred (`more`) completed by the client */
    uint64_t kv_bytes_received;     /* key + value bytes of every key-value received */
    uint64_t allocs;                /* allocations during cursor calls (this thread) */
    uint64_t alloc_bytes;           /* bytes requested by them */
    uint64_t fallbacks;             /* 1 if the cursor fell back to SCAN_AND_FETCH */
    int fallback_error;             /* the remote-fetch error that caused it (0: none) */
    /* SCAN_AND_FETCH's pipeline (it runs across index pages): */
    uint64_t max_loads_in_flight; /* most record loads outstanding when one was taken */
    uint64_t pipeline_stalls;     /* loads taken with fewer than pipeline_depth outstanding
                                     * although the scan had more entries to load */
    uint64_t secondary_unknown;   /* mapped entries whose backend cannot tell where the record
                                     * was read (fdb:: FoundationDB does not report it) */
    /* ---- Tracing (docs/design.md §7 "Tracing counters"). The requests behind the
     * reads whose results the cursor took (and reads it dropped complete); every network figure
     * is 0 on the embedded backends (mem:, file:, defer:). Bytes are whole frames, headers
     * included. ---- */
    uint64_t requests;                    /* client requests sent (to storage and coordinator) */
    uint64_t requests_get;                /* ... by type: GET */
    uint64_t requests_get_key;            /* GET_KEY (selector resolution steps) */
    uint64_t requests_get_range;          /* GET_RANGE (index pages, record loads, probes) */
    uint64_t requests_get_mapped_range;   /* GET_MAPPED_RANGE */
    uint64_t requests_get_read_version;   /* GET_READ_VERSION the query's first read waited for */
    uint64_t requests_get_multi;          /* storage->storage GET_MULTI its mapped reads caused */
    uint64_t requests_client_storage;     /* by link: client -> storage server */
    uint64_t requests_client_coordinator; /* client -> coordinator (read version, system keys) */
    uint64_t requests_storage_storage;    /* storage -> storage (= requests_get_multi) */
    uint64_t bytes_sent_client_storage;   /* bytes each way per link */
    uint64_t bytes_received_client_storage;
    uint64_t bytes_sent_client_coordinator;
    uint64_t bytes_received_client_coordinator;
    uint64_t bytes_sent_storage_storage;     /* GET_MULTI requests the servers sent ... */
    uint64_t bytes_received_storage_storage; /* ... and their replies */
    uint64_t round_trips;                    /* client round trips, summed over reads (each read's
                                          * sequential requests, plus the read version) */
    uint64_t s2s_round_trips;                /* the servers' storage->storage round trips, summed */
    uint64_t s2s_peers_max;                  /* most peers one mapped request read from */
    uint64_t critical_round_trips;           /* round trips on the critical path: the longest chain
                                          * of reads each issued after the cursor took the result
                                          * of the one before, each read counting its sequential
                                          * round trips, the read version it waited for and its
                                          * servers' s2s round trips (docs/design.md §7) */
    uint64_t waits;                          /* times the cursor blocked on a read still in flight */
    /* ---- ADAPTIVE (0 for the fixed methods): the method of each page it started. ---- */
    uint64_t pages_scan_and_fetch;  /* pages run with SCAN_AND_FETCH */
    uint64_t pages_remote_fetch;    /* pages run with USE_REMOTE_FETCH */
    uint64_t adaptive_explorations; /* pages whose method was the estimated-slower one,
                                          * run to keep its calibration fresh */
    /* ---- Remote fetch without the index entries (rl_query_options.keep_index_entries 0). ---- */
    uint64_t index_bytes_omitted;  /* index key + value bytes the mapped reads left out (the
                                    * cursor rebuilt those entries from their records) */
    uint64_t index_keys_read_back; /* omitted entries it could not rebuild (orphans) and read
                                    * from the index instead */
    /* ---- Streamed remote fetch (cluster): rows before their page was complete. ---- */
    uint64_t entries_early; /* index entries (with their records) the cursor consumed while
                             * their mapped page was still arriving (docs/design.md §7) */
} rl_query_counters;

/* What the storage server of a traced mapped read sent one of its peers. */
typedef struct {
    uint32_t server_id;      /* the peer storage server */
    uint32_t requests;       /* GET_MULTI requests sent to it */
    uint32_t items;          /* the reads they carried */
    uint64_t bytes_sent;     /* their request frames */
    uint64_t bytes_received; /* their reply frames */
} rl_query_s2s_peer;

/* One request of a traced query (rl_query_options.trace): every attempt sent; one that got no
 * reply (a lost connection, a timeout: the backend retried it) has error = the transport error
 * (connection_failed, ...) and bytes_received 0. */
typedef struct {
    int64_t start_ns;   /* sent, nanoseconds after rl_cursor_open */
    int64_t latency_ns; /* until its reply was taken on the client's network thread */
    const char *type;   /* "get", "get_key", "get_range", "get_mapped_range",
                                 * "get_read_version", "other": static strings */
    const char *link;   /* "client-storage" or "client-coordinator" */
    uint32_t server_id; /* 0: the coordinator */
    char address[16];   /* dotted IPv4 */
    uint16_t port;
    char host[32];           /* the server's host label ("" when unknown) */
    uint64_t bytes_sent;     /* request frame */
    uint64_t bytes_received; /* reply frame */
    int error;               /* the error reply's code (0: a reply) */
    /* get_mapped_range: what the storage server reported for it (0 otherwise). */
    uint32_t secondaries_local, secondaries_remote;
    uint32_t s2s_requests, s2s_round_trips, s2s_peers;
    uint64_t s2s_bytes_sent, s2s_bytes_received;
    int64_t server_ns;                    /* the server's time on it */
    const rl_query_s2s_peer *s2s_by_peer; /* per peer (at most 64, first-use order); borrowed
                                           * like the event */
    size_t n_s2s_by_peer;
} rl_query_trace_event;

/* One row. Every pointer is borrowed from the cursor and valid until the next call on it. */
typedef struct {
    const uint8_t *index_key; /* the whole index entry key */
    size_t index_key_len;
    const uint8_t *entry; /* the entry tuple after the index subspace: values..., pk... */
    size_t entry_len;
    const uint8_t *pk; /* the record's packed primary key */
    size_t pk_len;
    const rl_record *record; /* NULL for an orphan under RL_ORPHAN_RETURN */
} rl_query_row;

/* rl_cursor_open — start a scan of index index_name of store s in txn.
 * [in] s, txn: borrowed; both must outlive the cursor. [in] opts: may be NULL (defaults, no
 * bounds). [out] out: free with rl_cursor_free. No read is issued until rl_cursor_next.
 * Errors: RL_E_INDEX_UNKNOWN (with a detail), RL_E_INVALID_ARGUMENT (bad size, a skip outside
 * [0, RL_QUERY_MAX_SKIP], negative limits, bounds that are not packed tuples, bounds naming more
 * columns than the index entry has (eq values plus one for low/high), unknown fetch method or orphan behaviour),
 * RL_E_CONTINUATION_INVALID (with a detail),
 * RL_E_OUT_OF_MEMORY. The detail of a failed open is on the store: rl_store_errmsg(s) (there is no
 * cursor to hold it; reclayer/error.h). */
RL_API int rl_cursor_open(rl_store *s, rl_txn *txn, const char *index_name, const rl_query_options *opts,
                          rl_cursor **out);

/* rl_cursor_next — the next row.
 * [out] out: the row (borrowed, valid until the next call on c), or NULL when the cursor ended;
 * then rl_cursor_no_next_reason says why and later calls return NULL again.
 * Returns RL_OK, or: transaction errors, RL_E_INDEX_ORPHAN_ENTRY, RL_E_RECORD_SPLIT_CORRUPT,
 * RL_E_RECORD_PARSE_FAILED, RL_E_FALLBACK_FAILED, RL_E_OUT_OF_MEMORY (sticky). */
RL_API int rl_cursor_next(rl_cursor *c, const rl_query_row **out);

/* rl_cursor_no_next_reason — why the cursor ended (RL_NO_NEXT_NONE while it has not). */
RL_API rl_no_next_reason rl_cursor_no_next_reason(const rl_cursor *c);

/* rl_cursor_continuation — where a later cursor resumes: after the last row returned (or the
 * start position if none was). [out] out, out_len: borrowed, valid until the next call on c;
 * NULL/0 once the cursor ended with RL_NO_NEXT_SOURCE_EXHAUSTED (nothing left). RL_OK or
 * RL_E_OUT_OF_MEMORY. */
RL_API int rl_cursor_continuation(rl_cursor *c, const uint8_t **out, size_t *out_len);

/* rl_cursor_get_counters — copy the cursor's counters. */
RL_API void rl_cursor_get_counters(const rl_cursor *c, rl_query_counters *out);

/* rl_cursor_get_trace — the timeline of a cursor opened with rl_query_options.trace = 1: one
 * event per request attempt of the reads it took, ordered by start. [out] out, out_n: borrowed
 * from c, valid until the next call on c; NULL/0 when not traced (or no request: embedded). */
RL_API void rl_cursor_get_trace(rl_cursor *c, const rl_query_trace_event **out, size_t *out_n);

/* rl_cursor_explain — ADAPTIVE with rl_query_options.explain = 1: one line per page started so
 * far ("page N: adaptive: <inputs>; <both estimates> -> <method> (<why>)\n"); "" otherwise.
 * Owned by c, valid until the next call on c. */
RL_API const char *rl_cursor_explain(const rl_cursor *c);

/* rl_cursor_error_cause — after RL_E_FALLBACK_FAILED: the error of the fallback scan; else the
 * cursor's error (0 if none). */
RL_API int rl_cursor_error_cause(const rl_cursor *c);

/* rl_cursor_errmsg — the detail of the cursor's last failed call ("" if none has failed); owned by
 * c, valid until the next call on c. Errors are sticky, so after a failure it stays that
 * failure's. */
RL_API const char *rl_cursor_errmsg(const rl_cursor *c);

/* rl_cursor_free — free the cursor and its pending reads. NULL is a no-op. */
RL_API void rl_cursor_free(rl_cursor *c);

/* Names of the enums ("scan", "remote", "remote-fallback", "adaptive"; "source_exhausted", ...):
 * static strings, "unknown" for other values. */
RL_API const char *rl_fetch_method_name(rl_fetch_method m);
RL_API const char *rl_no_next_reason_name(rl_no_next_reason r);

#endif
