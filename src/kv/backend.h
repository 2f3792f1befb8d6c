/* backend.h (internal) — the completion-based interface between the generic transaction layer
 * (txn.c, ryw.c) and what actually stores data: the embedded engine (embedded.c), the deferred
 * test backend (deferred.c), the cluster client (cluster/) and FoundationDB (fdb/, later).
 *
 * Contract:
 *   1. A backend serves reads at an explicit version and commits fully formed transactions (read
 *      version, read and write conflict ranges, mutations in order). It knows nothing about write
 *      maps, read-your-writes, options or retries: all of that lives above it, once. It does
 *      resolve key selectors over committed data (so a selector with an offset — how a query's
 *      skip is pushed down — costs one request, resolved where the data is).
 *   2. Every operation is started by a call that takes a caller-owned request block (rl__kv_read,
 *      rl__kv_grv, rl__kv_commit) and completes it later by calling its `done` exactly once, with
 *      RL_OK (outputs filled) or an error code. `done` may run before the starting call returns
 *      (the embedded backend always does: vt->completes_inline) or later on a backend thread
 *      (the cluster's network thread, the deferred backend's worker). The starting calls return
 *      nothing: every failure, even one found at once, is reported through `done`.
 *   3. The request block and everything its input pointers reach stay valid and unchanged until
 *      `done` has been called (the transaction layer keeps them in the future's arena, which the
 *      future's reference count keeps alive). Results are allocated from the block's `arena`; the
 *      backend is the only user of that arena from the start call until `done`.
 *   4. Errors are codes of include/reclayer/error.h: RL_E_TRANSACTION_TOO_OLD and
 *      RL_E_FUTURE_VERSION for versions outside the readable window, RL_E_NOT_COMMITTED for a
 *      conflict, RL_E_COMMIT_UNKNOWN_RESULT when the outcome of a commit is not known, RL_E_IO_ERROR,
 *      RL_E_OUT_OF_MEMORY, the mapper codes (2030–2043), RL_E_CONNECTION_FAILED for a server that
 *      could not be reached within the backend's own retries.
 *   5. A backend handle is shared by every thread using the rl_db; every call is thread-safe, and
 *      many operations may be outstanding at once (from one thread or many).
 *   6. close() is called once, after every operation has completed (rl_db_close's precondition:
 *      every transaction and future of the database is freed first).
 *   7. Deadlines: a request block's deadline_ns (rl__clock_mono_ns(); 0: none) is its
 *      transaction's timeout. An asynchronous backend completes an operation still pending at
 *      its deadline with RL_E_TRANSACTION_TIMED_OUT soon after it (the cluster: within its sweep
 *      period, wherever the request is — waiting for a reply, a connection, a retry or the shard
 *      map; a commit may have been applied all the same), and never starts one past it. A
 *      backend that completes inline may ignore it (the transaction layer refuses operations
 *      past the timeout before they start). began_ns (0: unknown) is when the transaction began
 *      (its timeout's start, kept across rl_txn_on_error): what a report of waits may show.
 */
#ifndef RL_KV_BACKEND_H
#define RL_KV_BACKEND_H

#include <stddef.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "base/kvtypes.h"
#include "reclayer/kv.h"

typedef struct rl__kv_backend rl__kv_backend;

/* ---- Reads ------------------------------------------------------------------------------- */

typedef enum {
    RL_KV_GET = 1,        /* point read of key */
    RL_KV_GET_KEY = 2,    /* resolve selector begin */
    RL_KV_GET_RANGE = 3,  /* rows between two selectors */
    RL_KV_GET_MAPPED = 4, /* mapped range between two selectors */
} rl__kv_read_op;

typedef struct rl__kv_read rl__kv_read;

/* Links a request can cross (the tracing of docs/design.md §7). */
typedef enum {
    RL_KV_LINK_CLIENT_STORAGE = 1,     /* the client to a storage server */
    RL_KV_LINK_CLIENT_COORDINATOR = 2, /* the client to the coordinator (read versions, system keys) */
    RL_KV_LINK_STORAGE_STORAGE = 3,    /* a storage server to another (mapped reads' GET_MULTI) */
} rl__kv_link;

/* One request of a read (or a read-version request) as the backend saw it, recorded only when
 * the read asked for it (rl__kv_read.trace). Allocated by the backend from the read's arena (a
 * read-version request's one event lives in the rl__kv_grv block) and linked in send order; the
 * transaction layer moves the list to the future. Times are rl__clock_mono_ns(). Every attempt
 * sent has one: an attempt that got no reply (a lost connection, a timeout, a failed send: then
 * retried or failed) has err = the transport error and bytes_received 0. A read version keeps
 * only its last attempt's. */
/* What a mapped read's storage server sent one peer (the reply's per-peer stats). */
typedef struct {
    uint32_t server_id, requests, items;
    uint64_t bytes_sent, bytes_received;
} rl__kv_s2s_peer;

typedef struct rl__kv_trace_event rl__kv_trace_event;
struct rl__kv_trace_event {
    rl__kv_trace_event *next;
    uint64_t start_ns;  /* the request was handed to its connection */
    uint64_t end_ns;    /* its reply was taken by the network thread */
    uint16_t type;      /* wire message type (net/proto.h RL_MSG_*) */
    uint8_t link;       /* rl__kv_link */
    int32_t err;        /* the error reply's code, 0 for a reply */
    uint32_t server_id; /* 0: the coordinator */
    char address[16];   /* dotted IPv4 */
    uint16_t port;
    char host[32];           /* the server's host label ("" if unknown) */
    uint32_t bytes_sent;     /* the request frame, header included */
    uint32_t bytes_received; /* the reply frame, header included */
    /* GET_MAPPED_RANGE replies: the server's own counters (0 otherwise). */
    uint32_t secondaries_local, secondaries_remote;
    uint32_t s2s_requests, s2s_round_trips, s2s_peers;
    uint64_t s2s_bytes_sent, s2s_bytes_received;
    uint64_t server_ns;           /* time the server spent on it */
    const rl__kv_s2s_peer *peers; /* per peer (the server's first RL_PROTO_MAX_PEER_STATS), in the
                                  * read's arena */
    uint32_t n_peers;
};

/* Per-read counters a backend may fill (all zero for the embedded backend); the transaction layer
 * sums them over a read's requests into the future (rl_future.stats) and the query layer adds them
 * up for its tracing counters (rl_query_counters). */
typedef struct {
    uint32_t requests;        /* requests sent for this read (embedded: 0) */
    uint32_t round_trips;     /* of them, on the read's critical path, one after another */
    uint64_t bytes_sent;      /* request bytes on the wire (frames with headers) */
    uint64_t bytes_received;  /* reply bytes on the wire */
    uint32_t s2s_requests;    /* mapped reads: storage-to-storage requests the servers sent */
    uint32_t s2s_round_trips; /* ... of them one after another on the server's critical path */
    /* Appended for tracing (all are parts of the figures above). */
    uint32_t req_get, req_get_key, req_get_range, req_get_mapped; /* requests by message type */
    uint32_t coord_requests;   /* requests to the coordinator (system keys; read versions) */
    uint64_t coord_bytes_sent; /* ... their bytes each way (the rest went to storage) */
    uint64_t coord_bytes_received;
    uint64_t s2s_bytes_sent; /* mapped reads: GET_MULTI frames the servers sent / received */
    uint64_t s2s_bytes_received;
    uint32_t s2s_peers;    /* mapped reads: the most peers one server read from */
    uint32_t grv_requests; /* read-version requests charged to this read (transaction
                                    * layer: the first read that waited for one; its requests,
                                    * bytes and coord_* include it) */
    uint32_t grv_waits;    /* 1: the read waited for a read version first (one round
                                    * trip before its own) */
} rl__kv_read_stats;

struct rl__kv_read {
    /* Inputs (set by the caller; see contract 3). */
    int op; /* rl__kv_read_op */
    rl__version version;
    const uint8_t *key; /* RL_KV_GET */
    uint32_t key_len;
    rl_key_selector begin, end; /* GET_KEY: begin only; ranges: both */
    const uint8_t *max_key;     /* end of the readable keyspace: "\xff", or "\xff\xff" with
                                  * system keys. Selectors clamp to ["", max_key]. */
    uint32_t max_key_len;
    int limit;         /* ranges: rows (index entries); 0 = unlimited */
    long target_bytes; /* ranges: about this many bytes; 0 = unlimited */
    int reverse;
    const uint8_t *mapper; /* RL_KV_GET_MAPPED: the packed mapper tuple */
    size_t mapper_len;
    int secondary_strategy; /* RL_KV_GET_MAPPED: rl_secondary_strategy (0: the database's);
                                  * only the cluster backend uses it */
    int omit_index;         /* RL_KV_GET_MAPPED: RL_MAPPED_OMIT_INDEX (rl_mapped_keyvalue.index_omitted);
                                  * a backend may ignore it (fdb: does) */
    int defer_remote;       /* RL_KV_GET_MAPPED: RL_MAPPED_DEFER_REMOTE; only the cluster backend
                                  * uses it */
    rl_arena *arena;        /* results are allocated here */
    void (*done)(rl__kv_read *r, int err);
    void *ud; /* the caller's */
    /* Outputs (valid in done when err == RL_OK). */
    int present; /* GET */
    const uint8_t *value;
    uint32_t value_len;
    const uint8_t *rbegin; /* GET_KEY: the resolved key; ranges: the resolved begin */
    uint32_t rbegin_len;
    const uint8_t *rend; /* ranges: the resolved end (exclusive) */
    uint32_t rend_len;
    rl_keyvalue *kvs;         /* GET_RANGE: n rows */
    rl_mapped_keyvalue *mkvs; /* GET_MAPPED: n entries */
    int n;
    int more;                /* ranges: rows (entries) remain in [rbegin, rend) beyond these */
    rl__kv_read_stats stats; /* zeroed by the caller before the call; the backend adds to it */
    void *be_link;           /* the backend's own (queue link); untouched by the caller */
    /* Tracing (appended): input `trace` 1 asks the backend to record an event per request
     * (zero cost when 0); outputs: the events, in the read's arena, oldest first. */
    int trace;
    rl__kv_trace_event *trace_head, *trace_tail;
    uint64_t deadline_ns; /* input (appended): contract 7 */
    uint64_t began_ns;    /* input (appended): when its transaction began (0: unknown), for reports */
    /* The cluster client's own watch polls (appended; op RL_CPLAN_WATCH, cluster/plan.h):
     * inputs the value compared with and how long the server may hold the request; outputs
     * whether it changed and the version the server looked through. */
    int watch_present;
    const uint8_t *watch_value;
    uint32_t watch_value_len;
    uint32_t watch_hold_ms;
    int watch_changed;
    rl__version watch_version;
    /* Input (appended; may be NULL): 1 once nobody wants the result any more (the operation was
     * cancelled or its future freed). Callable from any thread while the read is in flight; a
     * backend may then stop the read early (the cluster backend cancels a streamed mapped read
     * on the server) — it still calls done, with any result. */
    int (*abandoned)(const rl__kv_read *r);
    /* Input (appended; may be NULL; RL_KV_GET_MAPPED only): ents[0..n) are certain to be the
     * first n entries of the result (in r->arena, never changed after; n grows from call to
     * call), handed up before the read completes so its user can start on them. A backend may
     * call it from its own thread while the read is in flight, never after done; the cluster
     * backend does for the chunks of a streamed mapped read's first page (cluster/plan.h,
     * rl__cplan_stream_prefix). The read may still fail after it. */
    void (*progress)(rl__kv_read *r, const rl_mapped_keyvalue *ents, int n);
};

/* ---- Read versions and commits ----------------------------------------------------------- */

typedef struct rl__kv_grv rl__kv_grv;
struct rl__kv_grv {
    void (*done)(rl__kv_grv *g, int err);
    void *ud;
    rl__version version; /* output: a version whose snapshot is final and holds every commit
                         * acknowledged before the request (embedded: one that follows the
                         * clock; cluster: the coordinator's durable version) */
    void *be_link;       /* the backend's own */
    /* Tracing (appended; the backend may leave them 0): counters of the request (requests,
     * round_trips, bytes, coord_*), and with `trace` 1 its event in `ev` (has_ev 1). */
    rl__kv_read_stats stats;
    int trace;
    int has_ev;
    rl__kv_trace_event ev;
    uint64_t deadline_ns; /* input (appended): contract 7 */
    uint64_t began_ns;    /* input (appended): when its transaction began (0: unknown), for reports */
};

typedef struct rl__kv_commit rl__kv_commit;
struct rl__kv_commit {
    /* Inputs: borrowed only during the start call — a backend that sends the commit later copies
     * (or encodes) them first, because a reset of the transaction may reuse their memory while the
     * commit is still in flight. The block itself stays valid until done. */
    rl__version read_version;
    const rl__keyrange *reads;
    size_t n_reads;
    const rl__keyrange *writes;
    size_t n_writes;
    const rl__mutation *muts; /* may contain SET_VERSIONSTAMPED_KEY / _VALUE */
    size_t n_muts;
    void (*done)(rl__kv_commit *c, int err);
    void *ud;
    /* Outputs (err == RL_OK). */
    rl__version commit_version;
    uint16_t batch_order; /* the transaction's order within its commit batch */
    void *be_link;        /* the backend's own */
    uint64_t deadline_ns; /* input (appended): contract 7 */
    uint64_t began_ns;    /* input (appended): when its transaction began (0: unknown), for reports */
};

/* ---- Watches ------------------------------------------------------------------------------ */

/* A watch of one key (docs/design.md §2, "Watches"): done(w, RL_OK) once a committed write at a
 * version after `version` leaves the key with a value other than (present, value) — a change
 * away and back fires too, a rewrite of the same value does not. The transaction layer fills the
 * inputs (the value is what the watching transaction saw or wrote at `version`); they stay valid
 * and unchanged until done. done is called exactly once: RL_OK on a change, an error when the
 * watch cannot be kept (RL_E_OUT_OF_MEMORY; the cluster keeps retrying a lost server and does
 * not give up), or RL_E_OPERATION_CANCELLED after watch_cancel. It may run inside the starting
 * call (the value already changed) or later on the thread that applies the change (embedded:
 * the committing caller's, after its commit; cluster: the network thread). */
typedef struct rl__kv_watch rl__kv_watch;
struct rl__kv_watch {
    const uint8_t *key; /* input */
    uint32_t key_len;
    rl__version version;  /* input: the value below is the key's at this version (> 0) */
    int present;          /* input: the key existed then */
    const uint8_t *value; /* input (present) */
    uint32_t value_len;
    void (*done)(rl__kv_watch *w, int err);
    void *ud;
    void *be_link; /* the backend's own */
};

/* ---- Locality (the ADAPTIVE fetch method's network inputs) ------------------------------- */

#define RL_KV_LOCALITY_MAX_TEAM 8

/* Where a read of a key goes and what the client measured of the way there (rl__db_locality,
 * kv_stats.h). All zero for a local backend (embedded, deferred): no round trip, one server. */
typedef struct {
    int networked;                          /* 1: the figures come from a networked backend's client */
    uint32_t n_team;                        /* servers holding the key's shard (reads rotate among them) */
    uint32_t team[RL_KV_LOCALITY_MAX_TEAM]; /* their ids (the first RL_KV_LOCALITY_MAX_TEAM) */
    double rtt_ns;                          /* mean over the team of each server's measured round trip: an EWMA
                             * of its replies' latency (less the server's own time when it says;
                             * replies of at most 16 KiB),
                             * from requests sent while none other was in flight on the connection
                             * when there are such, else from all (0: nothing measured yet) */
    uint32_t rtt_samples;                   /* samples behind rtt_ns (summed over the team) */
    int strategy;                           /* mapped reads' secondary strategy: 1 individual, 2 grouped (0: the
                             * servers' default, or n/a) */
    int s2s_batch;                          /* its batch of secondary reads (0: the server's default) */
} rl__kv_locality;

/* ---- Size estimates (appended; docs/design.md §4, "Size estimates") ---------------------- */

typedef enum {
    RL_KV_ESTIMATE = 1, /* the estimated bytes of [begin, end) */
    RL_KV_SPLIT = 2,    /* the split points of [begin, end) for chunks of about chunk bytes */
} rl__kv_metrics_op;

/* A size-estimate request: answered from the storage servers' byte samples at their latest
 * state, with no read version and no conflict range (FoundationDB's getEstimatedRangeSizeBytes
 * and getRangeSplitPoints). Contracts 2, 3, 4, 6 and 7 hold as for reads. */
typedef struct rl__kv_metrics rl__kv_metrics;
struct rl__kv_metrics {
    /* Inputs. */
    int op;                     /* rl__kv_metrics_op */
    const uint8_t *begin, *end; /* the range: begin <= end, both at most "\xff\xff" */
    uint32_t begin_len, end_len;
    int64_t chunk;   /* RL_KV_SPLIT: > 0 */
    rl_arena *arena; /* results are allocated here */
    void (*done)(rl__kv_metrics *m, int err);
    void *ud;             /* the caller's */
    uint64_t deadline_ns; /* contract 7 */
    /* Outputs (valid in done when err == RL_OK). */
    int64_t bytes;  /* RL_KV_ESTIMATE: the estimate (>= 0) */
    rl_slice *keys; /* RL_KV_SPLIT: n_keys ascending keys in arena: begin, the cuts (and on
                            * a cluster the shard boundaries inside the range), then end unless
                            * it equals begin */
    int n_keys;
    void *be_link; /* the backend's own */
};

/* rl__kv_split_list — the list an RL_KV_SPLIT request returns, from the cuts strictly inside
 * (begin, end) in ascending order: begin, the cuts, then end unless it equals begin (borrowed:
 * begin, end and the cuts' bytes must outlive the list). *out in arena a. RL_OK or
 * RL_E_OUT_OF_MEMORY. (txn_metrics.c) */
int rl__kv_split_list(rl_arena *a, const uint8_t *begin, uint32_t begin_len, const rl_slice *cuts, int n_cuts,
                      const uint8_t *end, uint32_t end_len, rl_slice **out, int *out_n);

/* ---- The vtable -------------------------------------------------------------------------- */

typedef struct {
    const char *name;     /* "embedded", "deferred", "cluster", "fdb" */
    int completes_inline; /* 1: every done runs before the starting call returns, in the
                            * calling thread (the transaction layer then takes no locks) */
    /* Release everything (contract 6). */
    void (*close)(rl__kv_backend *b);
    /* Start a read-version request. */
    void (*get_read_version)(rl__kv_backend *b, rl__kv_grv *g);
    /* Start a read (rl__kv_read.op says which). */
    void (*read)(rl__kv_backend *b, rl__kv_read *r);
    /* Start a commit. The outcome codes are those of rl_txn_commit (kv.h). */
    void (*commit)(rl__kv_backend *b, rl__kv_commit *c);
    /* Append a JSON object describing the backend to out (may block). */
    int (*status_json)(rl__kv_backend *b, rl_buf *out);
    /* Optional (NULL: a local backend; appended): fill *out (zeroed by the caller) with where a
     * read of key[0..key_len) goes and the round trip measured to those servers. Thread-safe,
     * never blocks on the network, never fails (unknown figures stay 0). */
    void (*locality)(rl__kv_backend *b, const uint8_t *key, uint32_t key_len, rl__kv_locality *out);
    /* Optional (NULL: the backend's versions come from elsewhere, e.g. a cluster's sequencer;
     * appended): make the backend's sequencer read fn(ud) instead of the monotonic clock, for
     * tests (rl__db_set_clock, kv_int.h). RL_OK. */
    int (*set_clock)(rl__kv_backend *b, uint64_t (*fn)(void *ud), void *ud);
    /* Optional, only with completes_inline (NULL otherwise; appended): a point read of
     * key[0..key_len) at version, done before it returns — what read() does for RL_KV_GET, without
     * the request block and its done callback (the transaction layer's cheapest read). Results
     * in arena, outputs and errors as rl__kv_read's. */
    int (*get_now)(rl__kv_backend *b, rl__version version, const uint8_t *key, uint32_t key_len, rl_arena *arena,
                   int *out_present, const uint8_t **out_value, uint32_t *out_value_len);
    /* Optional (NULL: the transaction layer answers unsupported_operation; appended): start a
     * size-estimate request (rl__kv_metrics). */
    void (*metrics)(rl__kv_backend *b, rl__kv_metrics *m);
    /* Optional (NULL: RL_E_UNSUPPORTED_OPERATION; appended): start watch w (rl__kv_watch above). */
    void (*watch)(rl__kv_backend *b, rl__kv_watch *w);
    /* Cancel watch w, started on b and not yet done: its done runs with RL_E_OPERATION_CANCELLED
     * (inside this call or soon after, on any thread). w stays valid until done, so a watch whose
     * done is already running or over is left alone: the caller may race a change. Thread-safe. */
    void (*watch_cancel)(rl__kv_backend *b, rl__kv_watch *w);
} rl__kv_backend_vtable;

/* Every backend struct begins with this header. */
struct rl__kv_backend {
    const rl__kv_backend_vtable *vt;
};

/* ---- Constructors ------------------------------------------------------------------------ */

/* embedded.c: open "mem:" (dir == NULL) or "file:DIR". On failure a message is appended to
 * err. Errors as rl__storage_open, plus RL_E_OUT_OF_MEMORY, RL_E_INVALID_ARGUMENT. */
int rl__kv_embedded_open(const char *dir, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err);

/* deferred.c: the test backend "defer:URL" — the embedded backend for URL (mem: or file:DIR)
 * behind a worker thread that completes every operation later, in a shuffled order within a
 * small window, from its own thread (what a network backend does), so that asynchronous
 * completion, callbacks and pipelining are tested without a network. Errors as the embedded
 * backend's, plus RL_E_BAD_URL. */
/* Split "DIR" or "DIR?OPT&OPT" (the part of a file: URL after the colon; OPT engine=memory,
 * engine=ssd or checkpoint_bytes=N): *out_dir a heap copy of DIR (rl__free), *out_opts a copy of
 * opts (NULL: defaults; size = sizeof) with the URL's options applied. RL_E_BAD_URL (an option
 * not understood; err says so), RL_E_OUT_OF_MEMORY. */
int rl__kv_file_url(const char *rest, const rl_db_options *opts, char **out_dir, rl_db_options *out_opts,
                    rl__errdetail *err);
int rl__kv_deferred_open(const char *inner_url, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err);

#endif
