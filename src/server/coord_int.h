/* coord_int.h (internal to src/server/coord*.c) — the coordinator's state and the functions its
 * files share.
 *
 * The files: a core and its parts (docs/design.md §8.3). An arrow is "calls or includes".
 *
 *   coord_life.c          open, run, stop, close; the housekeeping timer (the only file that
 *    │                    knows every part)
 *    ├─▶ coord_net.c ─┐   connections, the request table (coord_requests.def), every handler
 *    │                │   but placement's, parked PEEKs, STATUS
 *    │                └─▶ coord_move.c   placement: SPLIT_SHARD, ASSIGN_SHARD, MOVE_SHARD, shard
 *    │                                   moves, the PEEK barrier
 *    └─▶ every one of them ─▶ coordinator.c + coord_int.h   the core: the state below, recovery,
 *                             the layout, the commit sink, sending replies, operations and their
 *                             completions, the version tick
 *
 *   - The core calls no part by name. What it needs of one is a hook in rl__coordinator, set by
 *     coord_life.c: wake_parked (coord_net.c answers parked PEEKs when the durable version or the
 *     PEEK cap moved) and each operation's finish (set by whoever submitted it).
 *   - coord_net.c uses coord_move.c's interface (the placement handlers in its request table, the
 *     PEEK cap and changes, a registration, STATUS); coord_move.c never calls coord_net.c: it
 *     wakes parked PEEKs through the core (rl__co_wake_peeks).
 *   - coord_life.c is the only file that knows every part; nothing of the role calls it.
 *
 * Ownership and threads (see coordinator.c's header for the whole picture):
 *   - LOOP THREAD ONLY: everything under "loop" below — connections, parked peeks, the server
 *     list and the shard map (changed by registrations and placement, on the loop thread), the
 *     scratch arena and buffer, the free pool of operations.
 *   - COMMITTER THREAD: the sink state ("sink" below), touched only by the sink callbacks
 *     (one batch at a time) and, before the committer thread exists, by open.
 *   - The completion queue ("done") is the hand-off from the committer thread to the loop: the
 *     commit callback appends under done_mu and posts a flush to the loop when the queue was
 *     empty.
 *   - commitlog, sys (the system-keyspace engine) and the committer lock internally.
 *   - Commit log truncation runs only on the loop thread, so record bytes a PEEK read from the
 *     log stay valid on the loop thread until it has encoded its reply.
 */
#ifndef RL_SERVER_COORD_INT_H
#define RL_SERVER_COORD_INT_H

#include <pthread.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "commit/commit.h"
#include "net/loop.h"
#include "net/proto.h"
#include "server/commitlog.h"
#include "storage/storage.h"

/* The coordinator and its options (coordinator.h, the role's face, names them too: C11 allows the
 * same typedef twice; the parts need nothing else of it). */
typedef struct rl__coordinator rl__coordinator;
struct rl__coordinator_options;

#define CO_MAX_TEAM RL_PROTO_MAX_TEAM
#define CO_HEALTH_NS (2000000000ull)     /* healthy: peeked within the last 2 s */
#define CO_PEEK_DEFAULT_BYTES (4u << 20) /* PEEK max_bytes 0 */
#define CO_PEEK_MAX_BYTES (8u << 20)     /* PEEK max_bytes is capped here */
#define CO_BATCH_BYTES \
    (48ull << 20)                         /* a batch's mutation bytes: one version always
                                                fits a log record and a PEEK reply (64 MiB) */
#define CO_READ_MAX_BYTES (8l << 20)      /* GET_RANGE replies: about this many bytes */
#define CO_HOUSEKEEPING_NS (100000000ull) /* the 100 ms timer (completions, health) */
/* The version tick: an empty batch when none became durable for CO_TICK_NS (at most a quarter
 * of the MVCC window; docs/design.md §8.3), never more often than every CO_TICK_MIN_NS. */
#define CO_TICK_NS (500000000ull)
#define CO_TICK_MIN_NS (1000000ull)

/* The system keyspace's prefixes (docs/design.md §8.3, The system keyspace). */
#define CO_KEYSERVERS "\xff/keyServers/"
#define CO_KEYSERVERS_LEN 13
#define CO_SERVERLIST "\xff/serverList/"
#define CO_SERVERLIST_LEN 13
#define CO_CONF_STORAGE "\xff/conf/storage"
#define CO_CONF_STORAGE_LEN 14

/* One shard of the map: [begin, end) and its team (storage ids; [0] for the system shard). */
typedef struct {
    uint8_t *begin; /* heap */
    uint32_t begin_len;
    uint8_t *end; /* heap */
    uint32_t end_len;
    uint32_t team[CO_MAX_TEAM];
    uint32_t n_team;
} co_shard;

typedef struct co_conn co_conn;

/* An ownership change still to be sent to a storage server in its PEEK replies (coord_move.c):
 * sent in every reply whose (after_version, end_version] holds version, dropped once the server
 * peeks after it. Keys are heap copies. */
typedef struct {
    rl__version version;
    uint8_t kind; /* RL_SHARD_ASSIGN or RL_SHARD_REMOVE */
    uint8_t *begin, *end;
    uint32_t begin_len, end_len;
} co_change;

/* A range PEEK sends a server beyond its shards, for log versions in [from, to) (to 0: no end):
 * a move's destination from the move's start, a source until the switch. Dropped once the
 * server peeks after `to`. Keys are heap copies. */
typedef struct {
    uint8_t *begin, *end;
    uint32_t begin_len, end_len;
    rl__version from, to;
} co_extra;

/* A storage server the coordinator knows: on a team, in the --init storage list, or in the
 * server list. */
typedef struct {
    uint32_t id;
    int has_address;  /* address/port/host known (registered now or in the server list) */
    char address[16]; /* dotted IPv4, NUL-terminated */
    uint16_t port;
    uint8_t *host; /* heap, host_len bytes (not NUL-terminated) */
    uint32_t host_len;
    int registered;                 /* registered with this coordinator process */
    int registering;                /* a REGISTER_STORAGE is being committed */
    rl__version registered_durable; /* its durable version when it registered */
    rl__version popped;             /* newest version it popped (0 until it pops) */
    int owns_shard;                 /* on some team: the log keeps versions until it popped them */
    rl__keyrange *owned;            /* its shards' ranges, sorted (pointers into the shard map) */
    uint32_t n_owned;
    rl__keyrange *merged; /* the same, adjacent ranges merged (for PEEK filtering) */
    uint32_t n_merged;
    rl__conn *peek_conn;   /* the connection of its latest PEEK (a reference), or NULL */
    uint64_t last_peek_ns; /* when that PEEK arrived */
    uint32_t parked;       /* PEEKs of it parked now */
    uint64_t peeks;        /* PEEK requests answered */
    co_change *changes;    /* ownership changes to send (coord_move.c), version order */
    uint32_t n_changes;
    co_extra *extras; /* extra PEEK ranges (coord_move.c) */
    uint32_t n_extras;
} co_server;

/* A parked PEEK (long poll), on the coordinator's list until answered or its connection closes. */
typedef struct co_peek {
    struct co_peek *prev, *next;
    co_conn *cc; /* its connection's state (the peek is dropped before cc is freed) */
    uint64_t req_id;
    co_server *srv;
    rl__version after;
    uint32_t max_bytes;
    uint64_t timer_id; /* its max_wait_ms timer */
} co_peek;

/* Per-connection state (loop thread), freed in on_close. */
struct co_conn {
    rl__coordinator *co;
    rl__conn *conn; /* the owner's reference, released in on_close */
    int hello;      /* HELLO received */
    uint8_t role;   /* the peer's HELLO role and id */
    uint32_t id;
    int delayed;          /* 1: the peer is on another host (netem.h): sends carry the delay */
    co_conn *prev, *next; /* the coordinator's list of connections */
};

typedef struct co_admin co_admin;

/* A request handler of the table (coord_requests.def): h is the frame, payload its payload (the
 * frame reader's, valid for the call), m the decoded request (in co->scratch; NULL for a CO_RAW
 * handler, which decodes its own copy). It answers, or queues something that will. [loop] */
typedef void co_handler(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m);

/* An asynchronous request: a client COMMIT, a REGISTER_STORAGE, a placement transaction or a
 * version tick, from the frame (or the timer) to its reply. Everything it needs after the frame
 * callback lives here (the frame's payload is copied). */
typedef struct co_op {
    struct co_op *next; /* the completion queue / the free pool */
    rl__coordinator *co;
    /* The submitter's: run by rl__co_flush on the loop thread once the committer is done (the
     * reply, the placement step, the tick's count); then the operation goes back to the pool. */
    void (*finish)(rl__coordinator *co, struct co_op *op);
    rl__conn *conn; /* a reference (the reply goes here; it may be closed by then) */
    uint64_t req_id;
    rl__commit_request req; /* what the committer sees */
    rl_arena arena;         /* decoded arrays and built mutations */
    uint8_t *payload;       /* the frame payload's copy (heap, payload_cap bytes) */
    size_t payload_cap;
    co_server *srv; /* a registration: the server, and what it registered */
    rl__msg_register_storage_req reg;
    int move_step; /* a placement transaction: which one (coord_move.c) */
} co_op;

/* The coordinator's placement state (coord_move.c; loop thread only). One admin request
 * (SPLIT_SHARD / ASSIGN_SHARD) runs at a time, the others queue; an ASSIGN runs one shard move
 * at a time. */
typedef struct {
    co_admin *head, *tail; /* queued requests; head is the running one */
    int txn;               /* a placement transaction is being committed */
    int barrier;           /* PEEKs answer versions <= barrier_version only (the move's
                               start or switch version is not yet installed here) */
    rl__version barrier_version;
    /* The shard move in flight (also resumed from \xff/moveKeys/ after a restart). */
    int active;
    uint8_t *begin, *end; /* heap */
    uint32_t begin_len, end_len;
    uint32_t dest[CO_MAX_TEAM], n_dest;
    uint32_t src[CO_MAX_TEAM], n_src;
    uint32_t pending[CO_MAX_TEAM], n_pending; /* destinations that have not reported complete */
    rl__version start_version;
    uint64_t moves_done, splits_done;
} co_placement;

struct rl__coordinator {
    /* Options (copied). */
    char *dir;
    char *listen_ip;
    char *port_file;
    char *host;
    uint32_t host_len;
    int no_sync;
    uint64_t window_versions;
    /* Engines. */
    rl__commitlog *log;
    rl__storage *sys; /* the system keyspace ["\xff", "\xff\xff"), DIR/sys */
    rl__committer *cm;
    /* The commit sink (committer thread; see coordinator.c): the batch's system mutations. */
    struct {
        rl__version v;     /* the batch in flight */
        rl__mutation *sys; /* its system-keyspace mutations, for sync */
        size_t n_sys, cap_sys;
        rl__mutation *split; /* apply's scratch: every mutation, clear ranges split */
        size_t cap_split;
    } sink;
    /* The completion queue (committer thread -> loop thread), under done_mu. */
    pthread_mutex_t done_mu;
    co_op *done_head, *done_tail;
    /* Loop. */
    rl__loop *loop;
    rl__listener *listener;
    uint16_t port;
    uint64_t housekeeping_timer;
    co_shard *shards; /* the whole map, "" .. "\xff\xff" (the last is the system shard) */
    uint32_t n_shards;
    co_server *servers; /* storage servers, ids increasing */
    uint32_t n_servers;
    co_conn *conns; /* open connections */
    uint32_t n_conns;
    co_peek *parked;      /* parked PEEKs */
    rl__version notified; /* the durable version parked peeks were last woken for */
    co_op *pool;          /* free operations */
    uint32_t n_pool;
    rl_arena scratch; /* per request, reset after each */
    rl_buf out;       /* reply encoding */
    /* PEEK building (loop thread). */
    rl__msg_peek_version *pk_versions;
    size_t pk_cap_versions;
    rl__mutation *pk_muts;
    size_t pk_cap_muts;
    co_placement mv; /* placement (coord_move.c) */
    /* The hook to coord_net.c (set by coord_life.c): answer every parked PEEK that durable (and
     * the PEEK cap) lets through. Called by rl__co_flush and rl__co_wake_peeks. [loop] */
    void (*wake_parked)(rl__coordinator *co, rl__version durable);
    /* The version tick (coordinator.c; loop thread): an empty batch whenever none became durable
     * for rl__co_tick_interval, so versions, read versions and storage servers' known versions
     * advance on an idle cluster. */
    uint64_t tick_timer;       /* the armed tick timer's id (0: none) */
    uint64_t tick_deadline_ns; /* when it fires */
    uint64_t last_version_ns;  /* when durable last advanced (by a batch other than a tick's) or
                                  a tick was submitted: the next tick is due an interval later */
    rl__version tick_version;  /* the commit version of the last tick that completed */
    int tick_busy;             /* a tick is in the committer */
    uint64_t ticks;            /* ticks committed */
    /* Counters (loop thread). */
    uint64_t commits; /* client transactions committed */
    uint64_t commit_requests;
    uint64_t refused_system_writes;
    uint64_t protocol_errors; /* connections closed for bad input */
    uint64_t start_ns;
    /* Injected delay (netem.h; loop thread): the current setting, applied to every delayed
     * connection, and the lateness of delayed frames on connections that have closed. */
    uint32_t delay_us, jitter_us;
    uint64_t delay_salt; /* jitter seeds: one per connection */
    rl__lat_hist closed_late;
};

/* ---- coordinator.c: the core ------------------------------------------------------------- */

/* Create the coordinator from o (validated and copied) and recover it: the directory, the commit
 * log, the system keyspace replayed from it, the committer after every version either has seen,
 * the layout (written first for a fresh directory), every server's owned ranges. RL_OK with *out;
 * RL_E_INVALID_ARGUMENT (o or out missing, no --dir or no member key), the file, log and engine
 * errors, RL_E_OUT_OF_MEMORY; err (may be NULL) says why. Nothing is left on failure. [owner] */
int rl__co_new(const struct rl__coordinator_options *o, rl__coordinator **out, rl__errdetail *err);
/* Once listening (co->port set): write the coordinator's own \xff/serverList/ entry if it changed,
 * then the port file if the options named one. [owner, before the loop runs] */
int rl__co_publish(rl__coordinator *co, rl__errdetail *err);
/* Free the core: the committer (if still there), what a failed post left to flush, the pool of
 * operations, the map, the engines, co itself. Last step of rl__coordinator_close; NULL is a
 * no-op. [owner, loop freed] */
void rl__co_free(rl__coordinator *co);

/* The server with this id, or NULL. [loop] */
co_server *rl__co_server(rl__coordinator *co, uint32_t id);
/* 1 if srv counts as healthy now (a connection that peeked within CO_HEALTH_NS, or a parked
 * peek). [loop] */
int rl__co_server_healthy(const rl__coordinator *co, const co_server *srv, uint64_t now_ns);
/* The system keyspace write check of a COMMIT: RL_OK, RL_E_SYSTEM_KEY_WRITE (a mutation touches
 * \xff/keyServers/ or \xff/serverList/), or RL_E_KEY_OUTSIDE_LEGAL_RANGE (at or above
 * "\xff\xff"). *out_index: the mutation. Pure. */
int rl__co_check_mutations(const rl__mutation *muts, size_t n, size_t *out_index);
/* The newest durable version (the read version clients get). [any] */
rl__version rl__co_durable(rl__coordinator *co);
/* Fill a registration's transaction (SET \xff/serverList/<id> with its conflict range) from
 * op->reg; everything is allocated in op->arena. RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__co_build_register(rl__coordinator *co, co_op *op);

/* Recompute every server's owned and merged ranges from the shard map (after it changed).
 * RL_OK or RL_E_OUT_OF_MEMORY. [loop, or open] */
int rl__co_compute_ownership(rl__coordinator *co);
/* Pack ids as a tuple of integers into b; unpack a tuple of ids into ids[0..cap) (*n the count):
 * RL_OK or RL_E_CORRUPT_DATA. Pure. */
void rl__co_pack_ids(rl_buf *b, const uint32_t *ids, uint32_t n);
int rl__co_unpack_ids(const uint8_t *p, uint32_t len, uint32_t *ids, uint32_t cap, uint32_t *n);

/* Encode m as a reply of type with id into co->out and send it on conn (a connection that closed
 * meanwhile drops it). A reply the codec refuses is a bug: logged, and answered internal_error
 * instead. [loop] */
void rl__co_send_reply(rl__coordinator *co, rl__conn *conn, uint16_t type, uint64_t id, rl__msg *m);
/* An error reply with code and a printf-formatted message (cut at 1,023 bytes). [loop] */
void rl__co_send_error(rl__coordinator *co, rl__conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* An operation with room for len payload bytes (pooled), or NULL; give it back with
 * rl__co_op_put (drops its connection reference). Submit it with rl__co_op_done as the
 * committer's callback and its finish set. [loop] */
co_op *rl__co_op_get(rl__coordinator *co, size_t len);
void rl__co_op_put(rl__coordinator *co, co_op *op);
/* Free the pool of operations. */
void rl__co_free_pool(rl__coordinator *co);
/* The committer's done callback: queue the operation for the loop and post rl__co_flush when the
 * queue was empty (a failed post is caught by the housekeeping timer). [committer thread] */
void rl__co_op_done(rl__commit_request *req, void *ud);
/* Run every finished operation's finish, then, if durable advanced, wake parked PEEKs (the
 * wake_parked hook). [loop; also a posted function and the housekeeping timer's work] */
void rl__co_flush(rl__coordinator *co);
/* Answer every parked PEEK that the current durable version (and cap) lets through (the
 * wake_parked hook): for coord_move.c when the PEEK barrier lifts. [loop] */
void rl__co_wake_peeks(rl__coordinator *co);

/* The version tick's interval now: CO_TICK_NS, at most a quarter of the MVCC window, at most
 * CO_HOUSEKEEPING_NS while a move waits for destinations, at least CO_TICK_MIN_NS. [loop] */
uint64_t rl__co_tick_interval(const rl__coordinator *co);
/* Submit a tick if none is in flight and nothing became durable for an interval, then arm the
 * tick timer for the next check (sooner than the armed one, if the interval shrank). Called by
 * the tick timer, the housekeeping timer and run. [loop] */
void rl__co_tick_check(rl__coordinator *co);
/* Set the loop's sleep margin for the current delay: the default precise timers (20-200 µs of
 * spinning, loop.h) while a delay or jitter is injected, none otherwise. [loop or owner] */
void rl__co_margin_for_delay(rl__coordinator *co);

/* ---- coord_move.c (placement: SPLIT_SHARD, ASSIGN_SHARD, MOVE_SHARD, moves) ----------------- */

#define CO_MOVEKEYS "\xff/moveKeys/"
#define CO_MOVEKEYS_LEN 11

/* The placement requests of the table (coord_requests.def): SPLIT_SHARD and ASSIGN_SHARD queue
 * an admin request (answered when it is done), MOVE_SHARD records a destination's report. */
co_handler rl__co_split_shard, rl__co_assign_shard, rl__co_move_shard;
/* A placement transaction is durable (or failed): install it, go on (its operations' finish).
 * [loop] */
void rl__co_move_done(rl__coordinator *co, co_op *op);
/* Load an in-flight move from \xff/moveKeys/ at open (resumed once its destinations register).
 * RL_OK, RL_E_OUT_OF_MEMORY or RL_E_CORRUPT_DATA (err says why). [open] */
int rl__co_move_load(rl__coordinator *co, rl__errdetail *err);
/* A storage server registered (at commit version cv): reset its changes and extra ranges, and
 * if it is a destination of the move in flight, assign it the range again at cv. [loop] */
void rl__co_move_on_register(rl__coordinator *co, co_server *srv, rl__version cv);
/* The PEEK version cap: versions above it are not sent yet (0: none). [loop] */
rl__version rl__co_peek_cap(const rl__coordinator *co);
/* The housekeeping part: advance versions while a move waits, fail timed-out requests. [loop] */
void rl__co_move_tick(rl__coordinator *co);
/* Drop srv's changes and extras that the PEEK after `after` no longer needs. [loop] */
void rl__co_move_prune(co_server *srv, rl__version after);
/* Free the placement state and every server's changes and extras (close). */
void rl__co_move_free(rl__coordinator *co);
/* Append the placement part of STATUS (`,"placement":{...}`). [loop] */
void rl__co_move_status(rl__coordinator *co, rl_buf *j);

/* ---- coord_net.c (connections and requests) ------------------------------------------------ */

/* Accept connections on co->loop (the listener's callback, coord_life.c). */
void rl__co_on_accept(rl__listener *l, rl__conn *conn, void *ud);
/* The wake_parked hook (coord_life.c sets it): answer every parked PEEK with something new —
 * durable above its after_version, capped at the PEEK cap. [loop] */
void rl__co_wake_parked(rl__coordinator *co, rl__version durable);
/* Drop every parked peek (close). [owner, loop stopped] */
void rl__co_drop_parked(rl__coordinator *co);

#endif
