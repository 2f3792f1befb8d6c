/* ss_int.h (private to the storage server: storage_server.c and ss_*.c) — the structures of
 * `rlkvd storage` and the functions its files share.
 *
 * The files: a core and its parts (docs/design.md §8.4). An arrow is "calls or includes".
 *
 *   ss_life.c            new, run, free; sets the hooks (the only file that knows every part)
 *    ├─▶ ss_serve.c ─┐   accepted connections, the request table (ss_requests.def), the reads
 *    │               │   served on the loop thread, parked reads, STATUS
 *    ├─▶ ss_coord.c ──┤   the coordinator connection, PEEK and apply, sync, POP, the shard map
 *    │               ├─▶ ss_mapped.c   mapped reads on workers, GET_MULTI both ways, the peers
 *    │               └─▶ ss_move.c     shard moves in and out: fetch, apply, report
 *    └─▶ every one of them ─▶ storage_server.c + ss_int.h + ss_options.h   the core
 *
 *   - Every part uses the core; the core calls no part by name. Two hooks of rl__ss, set by
 *     ss_life.c, carry what would run back: wake_parked (ss_coord.c, known advanced ->
 *     ss_serve.c's parked reads) and maybe_sync (ss_move.c, a fetch wants a sync -> ss_coord.c).
 *   - ss_serve.c uses ss_mapped.c (GET_MULTI, mapped reads, the peers' delay) and ss_move.c
 *     (STATUS); ss_coord.c drives ss_move.c (PEEK changes, every version it applies) and tells
 *     ss_mapped.c of a new map. ss_move.c and ss_mapped.c use the core only.
 *   - ss_life.c is the only file that knows every part; nothing of the role calls it.
 *
 * Ownership of state by thread (the invariants every function here relies on):
 *   1. The loop thread owns the connection objects of clients and the coordinator, the parked
 *      reads and the replication state (co_*, sync_busy, …). Nothing else touches them; other
 *      threads post to the loop. The peer records (ss->peers: connections to other storage
 *      servers and their pending requests) are shared under peers_mu: workers send GET_MULTI
 *      themselves on a connected peer (no thread hop), the loop thread connects, matches
 *      replies and handles closes and deadlines.
 *   2. `own` (the ranges this server holds) and `map` (the coordinator's shard map) are written
 *      by the loop thread under map_mu and read by workers under map_mu; the loop thread reads
 *      them without the lock.
 *   3. Versions: `applied` and `known` are written by the loop thread only and read atomically
 *      anywhere; applied <= known; a version v <= known is readable at min(v, applied), whose data
 *      equals v's for this server's shards (no mutation of its shards lies in (applied, known]).
 *   4. Counters are atomics, updated by whichever thread counts.
 *   5. The engine (rl__storage) allows concurrent readers and one writer; the loop thread is the
 *      only writer (apply), the sync thread only syncs.
 */
#ifndef RL_SERVER_SS_INT_H
#define RL_SERVER_SS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "base/kvtypes.h"
#include "net/loop.h"
#include "net/netem.h"
#include "net/proto.h"
#include "server/ss_options.h"
#include "storage/mapped.h"
#include "storage/storage.h"

/* The storage server (storage_server.h names it too: C11 allows the same typedef twice). */
typedef struct rl__ss rl__ss;

/* Defaults of the knobs (rl__ss_options). */
#define SS_DEFAULT_WORKERS 3
#define SS_MAX_WORKERS 16
#define SS_DEFAULT_FUTURE_WAIT_MS 1000
#define SS_DEFAULT_S2S_TIMEOUT_MS 2000
#define SS_DEFAULT_PEEK_WAIT_MS 500
#define SS_DEFAULT_SYNC_INTERVAL_MS 10
#define SS_DEFAULT_MAP_REFRESH_MS 5000
#define SS_DEFAULT_CONNECT_TIMEOUT_MS 1000
#define SS_TICK_MS 100                /* the housekeeping timer: map refresh, s2s deadlines */
#define SS_DEFAULT_CO_TIMEOUT_MS 5000 /* coordinator replies (ss_coord.c invariant 6) */

/* Reply bounds (about 8 MiB of rows per range reply, 32 MiB per GET_MULTI reply; frames carry at
 * most 64 MiB). */
#define SS_REPLY_BYTES (8L << 20)
#define SS_MULTI_REPLY_BYTES (32L << 20)
#define SS_MAPPED_SECONDARY_BUDGET (24L << 20) /* per batch of secondaries */
/* Streamed mapped reads (GET_MAPPED_STREAM, docs/design.md §8.4): a page of up to 64 MiB (the
 * server holds one batch and the client's window of it, not the page), in batches of about
 * 1 MiB of secondaries (`grouped`'s batch and its GET_MULTI budget); the window a request may
 * ask for is capped at 64 MiB. */
#define SS_STREAM_REPLY_BYTES (64L << 20)
#define SS_STREAM_BATCH_BYTES (1L << 20)
#define SS_STREAM_MAX_WINDOW (64u << 20)
#define SS_DEFAULT_STREAM_WINDOW (4u << 20) /* a request's window or chunk of 0 */
#define SS_DEFAULT_STREAM_CHUNK (256u << 10)
#define SS_DEFAULT_STREAM_CREDIT_MS 30000
#define SS_MAX_BATCH 100 /* FoundationDB's BUGGIFY range tops at 100 */
#define SS_DEFAULT_BATCH 10
#define SS_GROUPED_MAX_BATCH RL_PROTO_MAX_BATCH /* `grouped`: the whole page (at most this) */
#define SS_MULTI_MIN_ITEMS 10                   /* GET_MULTI reads at least this many items whatever max_bytes says */
/* The strategy of mapped reads that name none (RL_FETCH_DEFAULT): grouped, by measurement
 * (docs/design.md §8.4, docs/benchmarks.md "Secondary-read strategies"). */
#define SS_DEFAULT_STRATEGY RL_FETCH_GROUPED
#define SS_DEFAULT_SECONDARY_ROWS 2000
#define SS_DEFAULT_SECONDARY_BYTES 10000000L

/* A key range with heap copies of its keys. As an owned range (ss->own) it also carries the
 * versions it is readable at (ss_move.c): since (moved in: reads below are transaction_too_old;
 * 0 none) and until (moved out: reads at or above are wrong_shard_server; 0 none). */
typedef struct {
    uint8_t *begin;
    uint32_t begin_len;
    uint8_t *end;
    uint32_t end_len;
    rl__version since, until;
} ss_range;

typedef struct ss_fetch ss_fetch;

/* One server of the shard map. */
typedef struct {
    uint32_t id;
    uint8_t role;
    char addr[16]; /* dotted IPv4, NUL-terminated */
    uint16_t port;
    uint8_t healthy;
    uint8_t same_host; /* 1: its host label is this server's (no injected delay to it) */
} ss_server;

/* One shard of the shard map. */
typedef struct {
    ss_range r;
    uint32_t team[RL_PROTO_MAX_TEAM];
    uint32_t n_team;
} ss_shard;

/* The coordinator's shard map, as last fetched (one heap object, replaced whole). */
typedef struct {
    rl__version version;
    ss_server *servers;
    uint32_t n_servers;
    ss_shard *shards;
    uint32_t n_shards;
} ss_map;

typedef struct ss_client ss_client;
typedef struct ss_parked ss_parked;
typedef struct ss_job ss_job;
typedef struct ss_peer ss_peer;
typedef struct ss_batch ss_batch;
typedef struct ss_s2s_req ss_s2s_req;
typedef struct ss_stream ss_stream;

/* An accepted connection (a client or a peer storage server). Loop thread only. */
struct ss_client {
    rl__ss *ss;
    rl__conn *conn; /* one reference, released when the client is freed */
    int hello;      /* 1 once its HELLO was answered */
    uint8_t role;   /* its HELLO's role */
    uint32_t peer_id;
    int delayed; /* 1: on another host (netem.h): replies carry the injected delay */
    ss_client *prev, *next;
};

/* A read waiting for a version this server does not know yet: the request's frame, kept to be
 * dispatched again when the version arrives, or answered future_version at its deadline. */
struct ss_parked {
    ss_parked *prev, *next;
    ss_client *cl;
    uint16_t type;
    uint64_t id;
    rl__version version;
    uint64_t timer; /* the deadline timer's id */
    uint64_t t0_ns; /* arrival (for server_ns) */
    size_t len;
    uint8_t payload[]; /* the request's payload */
};

/* A mapped read handed to a worker. */
struct ss_job {
    ss_job *next;
    rl__conn *conn; /* one reference */
    uint64_t id;
    uint16_t type; /* RL_MSG_GET_MAPPED_RANGE or RL_MSG_GET_MAPPED_STREAM */
    uint64_t t0_ns;
    ss_range shard; /* the shard the read runs in (copies) */
    size_t len;
    uint8_t payload[];
};

/* A streamed mapped read (GET_MAPPED_STREAM) being run by a worker: its flow control. On
 * ss->streams from the worker's start of the read to its end; every field but the links, conn
 * and id is under ss->stream_mu. The worker sends a chunk only while sent - credited plus the
 * chunk stays within window (or nothing is outstanding); MAPPED_CREDIT (loop thread) raises
 * credited or sets cancelled, and wakes the workers (stream_cv). */
struct ss_stream {
    ss_stream *prev, *next;
    rl__conn *conn; /* the client's (the job's reference) */
    uint64_t id;    /* the request's */
    uint64_t sent;  /* chunk payload bytes sent */
    uint64_t credited;
    uint32_t window; /* bytes */
    int cancelled;   /* 1: the client cancelled */
};

/* A connection to another storage server for GET_MULTI. Every field is under ss->peers_mu
 * (ss_int.h invariant 1); the record lives until the server is freed. */
struct ss_peer {
    rl__ss *ss;
    uint32_t id;
    char addr[16];
    uint16_t port;
    rl__conn *conn;      /* NULL while not connected */
    int connecting;      /* a connect is under way */
    uint64_t gen;        /* connect generation (a late on_connect of an old one is dropped) */
    ss_s2s_req *pending; /* sent, awaiting their reply */
    ss_s2s_req *waiting; /* queued until the connection is up */
    int delayed;         /* 1: on another host per the shard map (or not in it): delayed */
    ss_peer *next;
};

/* One piece of a secondary read: the part of an item's keys inside one shard. */
typedef struct {
    int item; /* index of its item in the batch */
    int is_range;
    const uint8_t *begin; /* in the mapped read's arena (or the item's own keys) */
    uint32_t begin_len;
    const uint8_t *end;
    uint32_t end_len;
    int local;      /* 1: read from this engine */
    uint32_t owner; /* remote: the server id to ask */
    /* Result. */
    int error;
    rl_keyvalue *kvs;
    int n_kvs;
    int more;
    int unread; /* remote: the peer's reply budget did not reach it (no rows, more) */
} ss_piece;

/* One GET_MULTI request of a batch. */
struct ss_s2s_req {
    ss_batch *b;
    ss_s2s_req *next; /* in its peer's pending or waiting list */
    uint32_t server;
    uint64_t req_id;
    uint64_t deadline_ns;
    rl_buf payload; /* the encoded GET_MULTI request */
    int *pieces;    /* indexes into b->pieces, in the request's item order */
    int n_pieces;
    uint32_t reply_bytes; /* its reply frame, header included (set before req_reply) */
    int done;             /* finished (under the batch's mu) */
    int sent;             /* sent by the worker itself (set before the loop sees the batch) */
};

/* The remote part of one batch of a mapped read: shared by the worker (which waits) and the
 * loop thread (which sends and completes), reference counted (the worker's reference plus one
 * per request not yet finished by the loop). The arena and pieces are the worker's; the loop
 * thread writes results into them only under mu and only while !cancelled. */
struct ss_batch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int refs;
    int outstanding; /* requests not finished (under mu) */
    int cancelled;   /* the worker gave up (under mu) */
    rl__ss *ss;
    rl_arena *a; /* the mapped read's arena */
    ss_piece *pieces;
    int n_pieces;
    ss_s2s_req *reqs;
    int n_reqs;
    int error;               /* first transport error (under mu) */
    rl__errdetail err;       /* the first transport error's reason (under mu) */
    uint64_t bytes_received; /* reply frames taken while !cancelled (under mu) */
};

struct rl__ss {
    rl__ss_options o; /* strings point to the copies below */
    char *dir, *host, *coord_ip, *listen_ip;
    char *coord_host; /* the coordinator's host label from the options, or NULL */
    rl__storage *st;
    rl__loop *loop;
    rl__listener *lis;
    uint16_t port;
    atomic_int fatal; /* a fatal error (rl__ss_run returns it) */
    atomic_int stopping;
    char fatal_what[128];      /* what failed: written once by the first rl__ss_fatal ... */
    atomic_int fatal_what_set; /* ... which then sets this (release; rl__ss_fatal_what) */

    /* Versions (invariant 3). */
    _Atomic rl__version applied, known;
    _Atomic rl__version durable, popped;

    /* Ownership and the shard map (invariant 2). */
    pthread_mutex_t map_mu;
    ss_range *own;
    uint32_t n_own;
    ss_map *map; /* NULL until fetched */

    /* The hooks (ss_life.c sets them before the loop runs; the core calls them: ss_int.h, "The
     * files"). [loop] */
    void (*wake_parked)(rl__ss *ss); /* ss_serve.c: dispatch every parked read whose version is known */
    void (*maybe_sync)(rl__ss *ss);  /* ss_coord.c: start a sync if something known is not durable */
    /* ss_serve.c: version v was applied (its mutations muts): answer the watches it changes. */
    void (*watch_applied)(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n);
    /* ss_serve.c: range k moved away: its watches are answered wrong_shard_server. */
    void (*watch_moved)(rl__ss *ss, const rl__keyrange *k);

    /* Inbound connections and parked reads (loop; ss_serve.c). */
    ss_client *clients;
    ss_parked *parked;
    struct ss_watch *watches; /* WATCH_VALUE requests waiting for a change (loop; ss_serve.c) */
    _Atomic int64_t watches_now;
    _Atomic uint64_t n_watches, n_watches_fired;
    rl_arena req_arena; /* decode arena of the request being handled (loop) */
    rl_buf reply;       /* reply encoding buffer (loop) */

    /* The coordinator connection (loop; ss_coord.c, requests sent by rl__ss_co_send). */
    rl__conn *co;
    int co_state; /* SS_CO_* */
    uint64_t co_gen;
    uint64_t co_next_id;
    uint64_t co_reg_id, co_peek_id, co_map_id;
    rl__version co_peek_after;
    uint64_t co_peek_sent_ns; /* when the outstanding PEEK was sent */
    uint64_t co_since_ns;     /* when the connection was made (registration timeout) */
    uint32_t co_backoff_ms;
    uint64_t co_retry_timer;
    uint64_t last_map_ns;
    rl_arena co_arena; /* decode arena of coordinator replies (loop) */
    rl_buf co_buf;     /* encoding buffer of coordinator requests (loop) */
    atomic_int map_refresh_wanted;
    int map_incomplete; /* loop: the map names a team member missing from its server list */
    atomic_int registered;
    _Atomic uint64_t registrations;

    /* Background sync (ss_coord.c). */
    pthread_t sync_thread;
    int sync_started;
    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
    int sync_want;                /* under sync_mu: a sync is requested */
    int sync_quit;                /* under sync_mu */
    rl__version sync_target;      /* under sync_mu: what the requested sync covers */
    int sync_rc;                  /* under sync_mu: the last sync's result */
    rl__version sync_done_target; /* under sync_mu: what it covered */
    int sync_busy;                /* loop: a sync is requested or running */
    uint64_t sync_timer;          /* loop: a timer that will start the next sync */
    uint64_t last_sync_ns;

    /* Workers (ss_mapped.c). */
    pthread_t workers[SS_MAX_WORKERS];
    int n_workers;
    pthread_mutex_t job_mu;
    pthread_cond_t job_cv;
    ss_job *jobs, *jobs_tail;
    int jobs_quit;

    /* Streamed mapped reads (ss_mapped.c): the flow control of those running (ss_stream). */
    pthread_mutex_t stream_mu;
    pthread_cond_t stream_cv;
    ss_stream *streams;

    /* Peers (under peers_mu; ss_mapped.c). */
    pthread_mutex_t peers_mu;
    ss_peer *peers;
    uint64_t s2s_next_id;
    rl_arena s2s_arena; /* decode arena of GET_MULTI replies (loop) */
    uint64_t tick_timer;

    /* Injected delay (netem.h; loop thread): the setting, applied to every delayed connection —
     * accepted ones (their HELLO's label), peers (the shard map's label) and the coordinator's
     * (delayed until its HELLO reply shows the same label) — and the lateness of delayed frames
     * on connections that closed. */
    uint32_t delay_us, jitter_us;
    uint64_t delay_salt;
    int co_delayed;
    rl__lat_hist closed_late;
    /* Shard moves in (ss_move.c; loop thread). */
    ss_fetch *fetches;
    ss_range *moved_in; /* ranges moved in, with `since`, also in DIR/moved-in (a restart keeps
                            refusing reads below since); pruned once since leaves the window */
    uint32_t n_moved_in;
    int moved_in_loaded;
    ss_range *drops; /* ranges that moved away and left the window: their rows are cleared
                            at the next version this server applies */
    uint32_t n_drops;
    _Atomic uint64_t n_dropped;
    _Atomic uint64_t n_fetches_done, n_fetched_rows;

    /* Counters (invariant 4). */
    _Atomic uint64_t n_reads, n_mapped, n_sec_local, n_sec_remote, n_s2s_requests, n_s2s_round_trips, n_peeks, n_parked,
        n_future, n_mapped_ns;
    /* Tracing (STATUS): reads by type, GET_MULTI served for peers, storage-to-storage bytes of
     * this server's mapped reads; gauges: mapped reads queued for a worker / being run by one,
     * reads parked now (n_parked counts every park). */
    _Atomic uint64_t n_gets, n_get_keys, n_get_ranges, n_get_multi_served, n_get_multi_items, n_s2s_bytes_sent,
        n_s2s_bytes_received;
    _Atomic int64_t mapped_queued, mapped_running, parked_now;
    /* Streamed mapped reads (STATUS): streams run, chunks and their payload bytes sent, streams
     * cancelled by their client, the largest chunk bytes one stream ever had outstanding
     * (sent, not credited back: what a slow client can make the server hold), and the gauge of
     * streams waiting for credit now. */
    _Atomic uint64_t n_streams, n_stream_chunks, n_stream_bytes, n_stream_cancels, stream_unacked_max;
    _Atomic int64_t streams_waiting;
};

enum { SS_CO_DOWN = 0, SS_CO_CONNECTING = 1, SS_CO_HELLO = 2, SS_CO_READY = 3 };

/* ---- storage_server.c: the core ---- */

/* Encode reply m (type, flags REPLY) into ss->reply and send it on conn with id. Logs and closes
 * conn when encoding fails (a bug: the server built a struct the codec refuses). [loop or
 * worker: uses buf, its own buffer] */
int rl__ss_send_msg(rl__conn *conn, uint64_t id, const rl__msg *m, rl_buf *buf);
/* Send an error reply (code, printf message) for a request of type/id. [any] */
void rl__ss_send_error(rl__conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Check a read's version v against what the server knows: RL_OK with *out_readv = the engine
 * version to read at, RL_E_FUTURE_VERSION (v > known: the caller parks or fails), or
 * RL_E_TRANSACTION_TOO_OLD. [any] */
int rl__ss_read_version(rl__ss *ss, rl__version v, rl__version *out_readv);
/* A fatal error: log, remember, stop the loop. [any] */
void rl__ss_fatal(rl__ss *ss, int rc, const char *what);
/* Ownership lookups over `own` (caller holds map_mu, or is the loop thread). The index of the
 * range holding key (lo <= key < hi), or with below the range holding the key just below key
 * (lo < key <= hi, or lo == "" for key == ""); -1 when none. */
int rl__ss_own_find(const rl__ss *ss, const uint8_t *key, uint32_t len, int below);
/* The version rule of owned range i for a read at version v: RL_OK, RL_E_WRONG_SHARD_SERVER (the
 * range moved away at or before v) or RL_E_TRANSACTION_TOO_OLD (it moved in after v). [as
 * rl__ss_own_find] */
int rl__ss_own_version(const rl__ss *ss, int i, rl__version v);
/* Ownership edits (under map_mu inside): remove [k) from the owned ranges (splitting what it
 * cuts); add it (what it overlaps is removed first) readable from `since` (0: always). A failure
 * (out of memory) is fatal. [loop] */
void rl__ss_own_remove(rl__ss *ss, const rl__keyrange *k);
void rl__ss_own_assign(rl__ss *ss, const rl__keyrange *k, rl__version since);
/* Copy a key into fresh heap memory (NULL on OOM; a valid pointer for len 0). */
uint8_t *rl__ss_memdup(const void *p, size_t len);
/* Free the keys of n ranges and the array. */
void rl__ss_ranges_free(ss_range *r, uint32_t n);
/* Free the map. */
void rl__ss_map_free(ss_map *m);
/* Ask for a GET_SHARD_MAP soon (e.g. a peer said wrong_shard_server): ss_coord.c's housekeeping
 * sends it. [any] */
void rl__ss_want_map(rl__ss *ss);
/* Encode and send a request to the coordinator (*out_id may be NULL): RL_E_CONNECTION_FAILED
 * while there is no connection. [loop] */
int rl__ss_co_send(rl__ss *ss, const rl__msg *m, uint64_t *out_id);
/* Apply the current delay to conn (a new connection to a peer on another host). [loop] */
void rl__ss_delay_conn(rl__ss *ss, rl__conn *conn);
/* Fill m (zeroed first) with the HELLO request this server opens its connections with (role
 * storage, its id and host label; the label is borrowed from ss). Pure. */
void rl__ss_hello(const rl__ss *ss, rl__msg *m);
/* Send that HELLO on conn (a new connection to a peer storage server). If encoding fails (out
 * of memory only), nothing is sent. [loop] */
void rl__ss_send_hello(const rl__ss *ss, rl__conn *conn);
/* A delayed connection closed: keep its frames' lateness for STATUS. [loop] */
void rl__ss_delay_closed(rl__ss *ss, rl__conn *conn);
/* The hooks: dispatch every parked read whose version is now known (ss->wake_parked); start a
 * sync if something known is not durable (ss->maybe_sync). [loop] */
void rl__ss_wake_parked(rl__ss *ss);
void rl__ss_maybe_sync(rl__ss *ss);
/* The watch hooks (ss->watch_applied, ss->watch_moved). [loop] */
void rl__ss_watch_applied(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n);
void rl__ss_watch_moved(rl__ss *ss, const rl__keyrange *k);

/* ---- ss_serve.c (accepted connections, the request table, reads, parked reads, STATUS) ---- */

/* Accept a connection (the listener's callback, ss_life.c). [loop] */
void rl__ss_on_accept(rl__listener *lis, rl__conn *conn, void *ud);
/* The wake_parked hook (ss_life.c sets it). [loop] */
void rl__ss_serve_wake_parked(rl__ss *ss);
/* Drop every parked read and waiting watch (rl__ss_free, before the loop closes their clients).
 * [owner] */
void rl__ss_serve_free_parked(rl__ss *ss);
/* The watch hooks (ss_life.c sets them; docs/design.md §8.4, "Watches"). [loop] */
void rl__ss_serve_watch_applied(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n);
void rl__ss_serve_watch_moved(rl__ss *ss, const rl__keyrange *k);
/* Append the status JSON. [loop] */
void rl__ss_status(rl__ss *ss, rl_buf *out);

/* ---- ss_coord.c (replication: the coordinator connection, PEEK/apply, sync, POP) ---- */

/* Start connecting to the coordinator and the housekeeping. [loop] */
void rl__ss_repl_start(rl__ss *ss);
/* Start the sync thread (rl__ss_new). */
int rl__ss_sync_start(rl__ss *ss);
/* Stop and join the sync thread (rl__ss_free). */
void rl__ss_sync_stop(rl__ss *ss);
/* Periodic housekeeping of the replication side. [loop] */
void rl__ss_repl_tick(rl__ss *ss);
/* The maybe_sync hook (ss_life.c sets it): start a background sync if something known is not
 * durable. [loop] */
void rl__ss_repl_maybe_sync(rl__ss *ss);

/* ---- ss_move.c (shard moves in and out: fetch, apply, report) ---- */

/* A PEEK change assigned range k at version v in a reply ending at end: fetch it at end. [loop] */
void rl__ss_move_assign(rl__ss *ss, const rl__keyrange *k, rl__version v, rl__version end);
/* A PEEK change removed range k at version v: reads at >= v are refused from now on. [loop] */
void rl__ss_move_remove(rl__ss *ss, const rl__keyrange *k, rl__version v);
/* A PEEK version arrived: keep the parts of its mutations that fall in ranges being fetched
 * (versions after their fetch version). [loop] */
void rl__ss_move_buffer(rl__ss *ss, const rl__msg_peek_version *pv);
/* Apply PEEK version v (muts: this server's mutations of it) to the engine, with what waits to
 * be applied first: the clears of moved-out ranges that left the window, and the data of fetched
 * ranges (which become owned from v). Also keeps v's part of ranges still being fetched. Returns
 * rl__storage_apply's result (fatal for the caller). [loop] */
int rl__ss_move_apply(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n_muts);
/* After a PEEK reply (known advanced): apply what waits at known if no version carried it. [loop] */
void rl__ss_move_after_peek(rl__ss *ss);
/* The durable version advanced: report applied moves to the coordinator. [loop] */
void rl__ss_move_on_durable(rl__ss *ss);
/* A new map / a registration (drops every fetch: the coordinator assigns again) / the tick. */
void rl__ss_move_on_map(rl__ss *ss);
void rl__ss_move_on_register(rl__ss *ss);
void rl__ss_move_tick(rl__ss *ss);
/* Free every fetch (shutdown). [loop or owner] */
void rl__ss_move_free(rl__ss *ss);
/* Fetches in progress (STATUS `fetching`). [loop] */
uint32_t rl__ss_move_count(const rl__ss *ss);

/* ---- ss_mapped.c (mapped reads on workers; GET_MULTI on both sides; peers) ---- */

int rl__ss_workers_start(rl__ss *ss);
void rl__ss_workers_stop(rl__ss *ss);
/* Queue a mapped read of type (RL_MSG_GET_MAPPED_RANGE or RL_MSG_GET_MAPPED_STREAM; the frame's
 * payload is copied). [loop] */
int rl__ss_mapped_submit(rl__ss *ss, ss_client *cl, uint16_t type, uint64_t id, const uint8_t *payload, size_t len,
                         uint64_t t0_ns, int shard);
/* MAPPED_CREDIT from conn for its stream id: add the credit, or cancel the stream; a stream that
 * is not running (ended, or never was) is ignored. [loop] */
void rl__ss_stream_credit(rl__ss *ss, rl__conn *conn, uint64_t id, const rl__msg_mapped_credit *m);
/* Serve a GET_MULTI request (local reads only) on the loop thread. */
void rl__ss_get_multi(rl__ss *ss, ss_client *cl, uint64_t id, const rl__msg_get_multi_req *r, rl__version readv);
/* Fail storage-to-storage requests whose deadline passed. [loop] */
void rl__ss_s2s_tick(rl__ss *ss);
/* A new shard map arrived: connect the peers whose requests waited for their address. [loop] */
void rl__ss_peers_on_map(rl__ss *ss);
/* Set (delay_us, jitter_us) on every delayed peer connection, and merge their lateness into
 * *late when late is not NULL. [loop] */
void rl__ss_peers_delay(rl__ss *ss, int set, rl__lat_hist *late);
/* Close every peer connection and fail what is pending (shutdown). [loop or owner] */
void rl__ss_peers_free(rl__ss *ss);

#endif
