/* cluster.c — the `cluster:FILE` backend: the client side of a cluster of rlkvd processes
 * (docs/design.md §8.5), behind the completion-based interface of backend.h.
 *
 *   application threads                         network thread (one per rl_db, an rl__loop)
 *   -------------------                         ------------------------------------------
 *   read / grv / commit ──plan, route──▶ conn ──▶ socket (rl__conn_send writes directly; while
 *                                                 others are in flight, rl__conn_send_queued:
 *                                                 the network thread writes the burst together)
 *                                                 socket ──▶ on_frame: match the id, decode into
 *                                                            the read's arena, plan the next
 *                                                            request or call done
 *
 * Pieces:
 *   - The planner (plan.h) turns a read into requests and their replies into the result; the
 *     location cache (locmap.h) says which process serves each request's route.
 *   - Connections (cconn): one per server address, opened lazily (HELLO as a client, then
 *     requests right away, as docs/protocol.md §2 allows), kept open. Each has a table of the
 *     requests outstanding on it by request id, and a list of requests waiting for its connect.
 *   - Requests (creq): one per operation in flight. A read's creq lives in the read's arena
 *     (backend.h contract 3: only the backend uses it until done); the others on the heap.
 *   - Tracing (docs/design.md §8.5): every attempt actually sent counts into its read's (or the
 *     transaction's read version's) rl__kv_read_stats — requests, round trips, bytes, its type, the
 *     coordinator link — and its reply's bytes too (send_on, note_reply); when the read asked for
 *     it (r->trace), note_reply also records an rl__kv_trace_event in the read's arena.
 *
 * The life of a request (where it is, under whose lock):
 *
 *     start ──▶ send_attempt ──(conn open)────▶ W_PENDING (conn->mu) ──reply──▶ plan / finish
 *                   │  └──(conn connecting)──▶ W_WAITING (conn->mu) ──connected──▶ W_PENDING
 *                   │                                                 └──failed──▶ fail_attempt
 *                   └──(no route: map stale)──▶ W_MAPWAIT (cl->mu) ──map──▶ send_attempt
 *     W_PENDING ──closed / timed out──▶ fail_attempt ──retry_decide──▶ W_TIMER ──▶ send_attempt
 *                                                                 └──▶ finish (done)
 *
 * Invariants:
 *   1. A creq is in at most one place (W_*), and whoever takes it out of that place (the reply
 *      handler, the close handler, the timeout sweep, a failed send taking its entry back) is
 *      the only one to continue it. So a late reply, a close racing a send, or a timeout racing
 *      a reply each continue the request exactly once.
 *   2. `done` is called exactly once per operation, never while a lock of this file is held,
 *      and the creq is never touched after it (a read's creq dies with its arena).
 *   3. An application thread never waits for the network thread inside read / grv / commit
 *      (they may run under the transaction's lock, which done callbacks take on the network
 *      thread): a request whose connection is not open yet is parked on the connection, and
 *      failures found on an application thread are posted to the network thread.
 *   4. Lock order: cl->mu before conn->mu; done and rl__conn functions are called with neither
 *      (only the status view reads connection counters under cl->mu, which no rl__conn callback
 *      path takes while holding an rl__conn lock).
 *   5. A connection holds its rl__conn reference until the cconn itself is freed, so a thread
 *      that holds a cconn reference can always call rl__conn_send on it (it fails once closed).
 *   6. Every wait has a timeout: connects (RL_CLUSTER_CONNECT_TIMEOUT_MS), every attempt
 *      (RL_CLUSTER_*_TIMEOUT_NS, checked by a sweep timer that runs while requests are
 *      outstanding), retries (RL_CLUSTER_RETRY_WINDOW_NS), status_json and open.
 *   7. Hedged reads (cluster.h): a read with q->hedged == 1 is in TWO pending tables, its
 *      attempt (q->conn, q->id) and its hedge (q->hconn, q->hid) on another member's open
 *      connection — the one exception to invariant 1. Hedges are armed, and every entry of a
 *      hedged read is taken out of a table, only on the network thread (the reply handler, the
 *      close drain, the timeout sweep, the hedge's own failed send), which then calls
 *      attempt_ended: a reply that wins cancels the other entry and continues q; a failed
 *      attempt leaves q to the other one. An application thread whose send of an attempt failed
 *      finds it hedged (q->hedged is set under that attempt's connection mutex) and leaves it in
 *      its table for the network thread. So a hedged read is still continued exactly once.
 *   8. Deadlines (backend.h contract 7): an operation with a deadline (q->op_deadline_ns, its
 *      transaction's timeout) finishes with transaction_timed_out once it passes, wherever it
 *      is: the sweep takes it out of a pending table, a connect queue or the map waiters (each
 *      under its place's lock, so invariant 1 holds), a retry timer is never set past it, and
 *      send_attempt and fail_attempt never start another attempt past it. The finishing itself
 *      is fail_attempt's, on the network thread, like any other failure.
 *   9. The wait report (rl_db_options.wait_report): a request whose attempt failed and that is
 *      retried is linked in cl->stalled (under cl->mu) with a snapshot of what it waits for (the
 *      st_* fields, written under cl->mu) until it gets a reply or finishes; requests waiting
 *      for a reply are found in the pending tables. The sweep reads both and calls the report
 *      on the network thread, at most every wait_report_ms; nothing on the request path.
 *
 * The index read alone (docs/design.md §8.4 "Deferred secondaries"): a `grouped` mapped read with
 * RL_MAPPED_DEFER_REMOTE and a range mapper, routed to a server that — by the location cache —
 * holds no shard of the range every secondary key lies in (the mapper's leading literal bytes,
 * rl__mapper_prefix), would answer every entry unread. Such an attempt goes as a plain GET_RANGE
 * of the index (index_only: no mapped read's worker, no stream), and its rows come back to the
 * planner as the entries that server would have sent (rl__mapped_entry_unread: the secondary's
 * bounds, no rows, more, not served locally), which the caller reads from their owners as it
 * reads any deferred entry. A stale cache costs only speed: an entry the server would have
 * read is read by the caller instead, at the same version.
 *
 * Replicas: reads rotate over a team's members, avoid members whose connection was just lost or
 * refused, move to the next member at once after a transport failure or future_version
 * (rl__cluster_failover_now), and plain reads slow to answer are hedged (invariant 7).
 *
 * Timeouts and reports: an operation past its transaction's deadline finishes with
 * transaction_timed_out within a sweep period (invariant 8); requests that wait longer than
 * rl_db_options.wait_report_ms for a server are reported, grouped by server, type and reason
 * (invariant 9).
 *
 * Retries (rl__cluster_retry_decide): lost or refused connections and attempts without reply
 * are retried with backoff for RL_CLUSTER_RETRY_WINDOW_NS (reads, read versions, the map;
 * commits only if they cannot have reached the coordinator — otherwise
 * commit_unknown_result); wrong_shard_server refreshes the map and retries; other error replies
 * are the operation's outcome. A read that loses a storage server also refreshes the map (at
 * most every 500 ms), so a team member the coordinator knows to be down is avoided.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/sync.h"
#include "kv/cluster/cluster.h"
#include "kv/kv_int.h"
#include "kv/cluster/clusterfile.h"
#include "kv/cluster/locmap.h"
#include "kv/cluster/plan.h"
#include "kv/cluster/ptable.h"
#include "net/loop.h"
#include "net/netem.h"
#include "net/proto.h"
#include "storage/mapped.h"
#include "tuple/tuple.h"

#define TICK_NS 50000000ull             /* timeout sweep period while requests are outstanding */
#define REFRESH_MIN_GAP_NS 500000000ull /* storage-failure map refreshes at most this often */
#define DELAY_REFRESH_NS \
    1000000000ull /* while sending, refetch the map (and the cluster's injected
                                           delay) at most this often */
#define CLIENT_HOST "client"
#define AVOID_MAX 16     /* storage servers avoided at once (the oldest mark goes) */
#define WHY_CAP 48       /* the reason of a request's last failed attempt, for the wait report */
#define REPORT_GROUPS 16 /* lines of one wait report at most (the rest are counted) */

typedef struct cluster cluster;
typedef struct cconn cconn;
typedef struct creq creq;

enum { W_NONE = 0, W_WAITING, W_PENDING, W_TIMER, W_MAPWAIT };
enum { C_CONNECTING = 1, C_OPEN, C_CLOSED };
enum { AFTER_SEND = 0, AFTER_REFRESH = 1 };

/* ---- Structures ------------------------------------------------------------------------------- */

/* A caller waiting synchronously for an internal request (status, ping). Two references: the
 * caller's and the request's; the last drop frees it. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs; /* under mu */
    int done; /* under mu */
    int err;
    rl_buf out;          /* STATUS: the JSON */
    rl__version version; /* GRV: the read version */
    uint64_t t_done_ns;
} waiter;

/* A commit's encoded request, shared by the creq and a thread sending it: the reply may finish
 * the creq while rl__conn_send is still in the call that wrote it. */
typedef struct {
    atomic_int refs;
    rl_buf b;
} cpayload;

static void pl_unref(cpayload *pl) {
    if (!pl || atomic_fetch_sub(&pl->refs, 1) != 1) return;
    rl__buf_release(&pl->b);
    rl__free(pl);
}

struct creq {
    int kind; /* rl__creq_kind */
    cluster *cl;
    int where;              /* W_*: invariant 1 */
    cconn *conn;            /* W_WAITING / W_PENDING */
    uint64_t id;            /* W_PENDING: the request id */
    uint64_t deadline_ns;   /* W_PENDING: the attempt's deadline */
    creq *next, *prev;      /* W_WAITING (conn) / W_MAPWAIT (cl) / cl->internal list links */
    creq *inext, *iprev;    /* cl->internal (status, ping) */
    uint64_t timer_id;      /* W_TIMER */
    int after_timer;        /* AFTER_SEND / AFTER_REFRESH */
    int err;                /* a failure posted to the network thread */
    uint64_t fail_since_ns; /* first transport failure of the current step (0: none) */
    int attempts;           /* transport failures of the current step */
    int wrong_shard;        /* wrong_shard_server replies of the current step */
    uint32_t salt;          /* team member rotation */
    uint32_t team_size;     /* READ: members of the team of the last attempt's shard */
    uint64_t sent_ns;       /* W_PENDING: when the attempt was sent (its round trip) */
    atomic_int hedged;      /* READ: 1 while a hedge is out too (invariant 7), 2 while armed */
    cconn *hconn;           /* hedged: the hedge's connection, request id, send time, deadline */
    uint64_t hid, hsent_ns, hdeadline_ns;
    int failover_tries; /* READ: immediate moves to another member in this step */
    int sent;           /* COMMIT: may have reached the coordinator */
    /* By kind. */
    rl__kv_read *r;       /* READ; its plan is the last member */
    rl__kv_grv *g;        /* GRV */
    rl__kv_commit *c;     /* COMMIT */
    cpayload *pl;         /* COMMIT: the encoded request (inputs are borrowed only at start) */
    waiter *w;            /* STATUS, PING */
    uint32_t ping_server; /* STATUS, PING: the server asked (0: the coordinator) */
    rl__locmap *newmap;   /* MAP: the map its reply built (given to map_done) */
    /* Tracing of the attempt in flight (a read or read version whose caller asked for it). */
    uint64_t tr_start_ns; /* 0: no traced attempt outstanding */
    uint32_t tr_bytes_sent;
    uint32_t tr_sid; /* where it went */
    char tr_ip[16];
    uint16_t tr_port;
    /* The round-trip sample of the attempt in flight (reads): when it was sent, and whether no
     * other request was in flight on its connection then (an unqueued sample). */
    uint64_t rtt_t0;
    int rtt_idle;
    /* Deadline (invariant 8) and what the wait report says of it (invariant 9). */
    uint64_t op_deadline_ns; /* the operation's deadline (its transaction's timeout); 0: none */
    uint64_t op_began_ns;    /* when its transaction began (0: unknown; the report shows it) */
    uint64_t step_ns;        /* when the current step's first attempt was sent (0: not yet) */
    uint32_t last_sid;       /* the server of the last attempt sent (or parked for a connect) */
    char last_ip[16];
    uint16_t last_port;
    char why[WHY_CAP];   /* the last failed attempt's reason ("": its error's name) */
    creq *snext, *sprev; /* cl->stalled links (under cl->mu) */
    int stalled;         /* in cl->stalled (under cl->mu; read by the owner without it) */
    uint16_t st_type;    /* the snapshot, under cl->mu: request type, server, reason, since */
    uint32_t st_sid;
    char st_ip[16];
    uint16_t st_port;
    int st_err;
    char st_why[WHY_CAP];
    uint64_t st_since_ns;
    /* A streamed mapped read's attempt (GET_MAPPED_STREAM; network thread, reset by send_on): the
     * entries of the chunks received so far, in the read's arena, their frames' bytes, and
     * whether the cancel was sent. */
    rl_mapped_keyvalue *s_ents;
    uint32_t s_n, s_cap;
    uint32_t s_pub; /* of them, checked and handed up as final (rl__kv_read.progress) */
    uint64_t s_bytes;
    int s_cancelled;
    /* The index read alone (the file header): sec_state 0 not looked at yet, 1 a deferring
     * grouped range mapper whose secondaries lie in [sec_lo, sec_hi) (in the read's arena), -1
     * never; index_only: the attempt being sent goes as GET_RANGE (set by target_of). */
    int sec_state;
    rl__mapper *sec_mapper;
    const uint8_t *sec_lo, *sec_hi;
    uint32_t sec_lo_len, sec_hi_len;
    int index_only;
    rl__cplan plan; /* READ (last: a read's creq is zeroed up to it, rl__cplan_start does the plan) */
};

struct cconn {
    cluster *cl;
    char ip[16];
    uint16_t port;
    uint32_t server_id; /* for the status view */
    atomic_int refs;    /* cl->conns + holders; the last drop frees */
    pthread_mutex_t mu;
    int state;      /* C_*, under mu */
    rl__conn *conn; /* once connected (invariant 5) */
    uint64_t hello_id;
    int hello_ok;                           /* loop thread */
    ptable pending;                         /* under mu */
    uint64_t rtt[RL_CLUSTER_HEDGE_SAMPLES]; /* under mu: the last plain reads' round trips */
    int n_rtt, rtt_pos;
    creq *wait_head, *wait_tail; /* under mu */
    uint64_t connected_ns;
    /* The measured round trip (rl__kv_locality): EWMAs (weight RTT_ALPHA) of reads' reply
     * latency, less the server's time when the reply reports it, over unqueued attempts (idle)
     * and over all; written by the network thread only, read by anyone (atomics). */
    atomic_uint_fast64_t rtt_idle_ns, rtt_all_ns;
    atomic_uint n_rtt_idle, n_rtt_all;
    int delayed; /* loop thread: the server is on another host (netem.h): our sends
                               carry the cluster's injected delay */
};

#define RTT_ALPHA 0.125
#define RTT_MAX_REPLY 16384 /* replies larger than this are not round-trip samples */

struct cluster {
    rl__kv_backend base; /* must be first */
    char *path;          /* the cluster file */
    rl__cluster_file cf;
    rl__loop *loop;
    pthread_t thread;
    int thread_started;
    atomic_int closing;
    int read_only;
    rl__cplan_options popt;
    atomic_uint_fast64_t next_id;
    atomic_uint rr; /* salt source */
    atomic_long outstanding;
    atomic_int tick_armed;
    atomic_int has_teams;    /* the map has a user shard served by more than one member */
    atomic_int hedge_armed;  /* the hedge timer is armed or about to be (see hedge_rearm) */
    atomic_uint hedge_gen;   /* bumped by every hedgeable read started */
    unsigned hedge_seen_gen; /* network thread: hedge_gen at the last scan */
    uint64_t hedge_timer;    /* network thread: the timer's id (0: none) */
    atomic_int hedges_out;   /* hedged reads now (at most RL_CLUSTER_HEDGE_MAX_OUT) */
    int hedge_on;            /* 0: RL_CLUSTER_HEDGE=0 in the environment at open (benchmarks) */
    /* Streamed mapped reads (cluster:FILE?stream=0 turns them off; chunk=, window= in bytes). */
    int stream;
    uint32_t stream_chunk, stream_window;
    /* The wait report (invariant 9): rl_db_options.wait_report_ms in ns (0: none), the callback,
     * and when the next report may be made (network thread). */
    uint64_t report_ns;
    void (*report)(const char *line, void *ud);
    void *report_ud;
    uint64_t next_report_ns;
    /* Watches (docs/design.md §8.5, "Watches"): each a loop of WATCH_VALUE polls; wmu guards
     * the list, every cwatch's `w` and `polls` (polls and backoff timers pending: close waits
     * for them). */
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    struct cwatch *watches;
    int polls;
    pthread_mutex_t mu;    /* guards everything below */
    pthread_cond_t map_cv; /* map_gen changed */
    rl__locmap *map;
    uint64_t map_gen; /* map fetches finished (ok or not) */
    int map_last_err;
    int map_inflight;
    creq map_req;      /* the one map fetch (when map_inflight) */
    creq *map_waiters; /* W_MAPWAIT, singly linked by next */
    uint64_t last_refresh_ns;
    atomic_uint_fast64_t map_fetch_ns; /* when the last map fetch started (the 1 s refresh) */
    uint32_t delay_us, jitter_us;      /* the cluster's injected delay, from the last map */
    uint64_t delay_salt;               /* jitter seeds, one per connection */
    cconn **conns;
    size_t n_conns, cap_conns;
    creq *internal; /* status / ping requests alive (freed at close if left) */
    /* Storage servers reads steer clear of (a lost or refused connection), until until_ns or
     * until a connection to them opens again: rl__locmap_pick_avoid. */
    struct {
        uint32_t id;
        uint64_t until_ns;
    } avoid[AVOID_MAX];
    int n_avoid;
    creq *stalled; /* requests retried after a failed attempt (invariant 9), linked by snext */
    /* Counters (status view). */
    uint64_t n_requests, n_retries, n_wrong_shard, n_timeouts, n_connects, n_refreshes, n_late_replies,
        n_lost_connections, n_failovers, n_hedges, n_hedge_wins, n_deadlines;
};

static const rl__kv_backend_vtable cluster_vt;
static void send_attempt(creq *q);
static void fail_attempt(creq *q, int err);
static void finish(creq *q, int err);
static void want_map(cluster *cl, creq *waiter);
static void maybe_refresh(cluster *cl);

static uint64_t now_ns(void) { return rl__clock_mono_ns(); }

/* ---- Retry rules ------------------------------------------------------------------------------ */

static uint64_t backoff_ns(int n) {
    uint64_t d = RL_CLUSTER_BACKOFF_MIN_NS;
    for (int i = 1; i < n && d < RL_CLUSTER_BACKOFF_MAX_NS; i++) d *= 2;
    return d > RL_CLUSTER_BACKOFF_MAX_NS ? RL_CLUSTER_BACKOFF_MAX_NS : d;
}

/* 1 for a connection failure that no retry can mend: the servers speak another protocol version,
 * or the handshake found that they are not this cluster file's cluster (loop.h). */
static int refused_for_good(int err) {
    return err == RL_E_INCOMPATIBLE_PROTOCOL_VERSION || err == RL_E_INVALID_CLUSTER_ID ||
           err == RL_E_UNAUTHORIZED_ATTEMPT;
}

rl__cretry rl__cluster_retry_decide(int kind, int err, int is_reply, int sent, uint64_t since_ns, uint64_t now,
                                    int attempts, int wrong_shard) {
    rl__cretry d = {RL_CRETRY_FAIL, err, 0};
    if (is_reply) {
        if (err == RL_E_WRONG_SHARD_SERVER && kind == RL_CREQ_READ && wrong_shard <= RL_CLUSTER_WRONG_SHARD_RETRIES) {
            d.action = RL_CRETRY_REFRESH;
            d.delay_ns = wrong_shard <= 1 ? 0 : backoff_ns(wrong_shard - 1);
        }
        return d;
    }
    if (kind == RL_CREQ_COMMIT && sent) {
        d.err = RL_E_COMMIT_UNKNOWN_RESULT;
        return d;
    }
    if (refused_for_good(err) || err == RL_E_OUT_OF_MEMORY || err == RL_E_OPERATION_CANCELLED) return d;
    if (now >= since_ns && now - since_ns >= RL_CLUSTER_RETRY_WINDOW_NS) {
        d.err = RL_E_CONNECTION_FAILED;
        return d;
    }
    d.action = RL_CRETRY_BACKOFF;
    d.delay_ns = backoff_ns(attempts < 1 ? 1 : attempts);
    return d;
}

int rl__cluster_failover_now(int kind, int err, int is_reply, uint32_t team_size, int tries) {
    if (kind != RL_CREQ_READ || team_size < 2 || tries < 1 || (uint32_t)tries >= team_size) return 0;
    if (is_reply) return err == RL_E_FUTURE_VERSION;
    return err != RL_E_OUT_OF_MEMORY && err != RL_E_OPERATION_CANCELLED && !refused_for_good(err);
}

uint64_t rl__cluster_hedge_threshold(const uint64_t *rtt_ns, int n) {
    if (n <= 0) return RL_CLUSTER_HEDGE_MIN_NS;
    uint64_t v[RL_CLUSTER_HEDGE_SAMPLES];
    if (n > RL_CLUSTER_HEDGE_SAMPLES) n = RL_CLUSTER_HEDGE_SAMPLES;
    memcpy(v, rtt_ns, (size_t)n * sizeof *v);
    for (int i = 1; i < n; i++) /* insertion sort: n <= 16 */
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    uint64_t t = v[n / 2] * RL_CLUSTER_HEDGE_FACTOR;
    return t > RL_CLUSTER_HEDGE_MIN_NS ? t : RL_CLUSTER_HEDGE_MIN_NS;
}

/* ---- Replica avoidance (under cl->mu) ---------------------------------------------------------- */

/* Mark storage server id as failed just now (a lost or refused connection). */
static void avoid_mark_locked(cluster *cl, uint32_t id, uint64_t now) {
    int slot = -1;
    for (int i = 0; i < cl->n_avoid; i++)
        if (cl->avoid[i].id == id || cl->avoid[i].until_ns <= now) slot = slot < 0 ? i : slot;
    if (slot < 0 && cl->n_avoid < AVOID_MAX) slot = cl->n_avoid++;
    if (slot < 0) { /* full of live marks: replace the one expiring first */
        slot = 0;
        for (int i = 1; i < cl->n_avoid; i++)
            if (cl->avoid[i].until_ns < cl->avoid[slot].until_ns) slot = i;
    }
    cl->avoid[slot].id = id;
    cl->avoid[slot].until_ns = now + RL_CLUSTER_AVOID_NS;
}

/* A connection to id opened: it is no longer avoided. */
static void avoid_clear_locked(cluster *cl, uint32_t id) {
    for (int i = 0; i < cl->n_avoid; i++)
        if (cl->avoid[i].id == id) cl->avoid[i] = cl->avoid[--cl->n_avoid], i--;
}

/* The ids avoided now into out (AVOID_MAX); returns their number. */
static int avoid_list_locked(cluster *cl, uint64_t now, uint32_t *out) {
    int n = 0;
    for (int i = 0; i < cl->n_avoid; i++)
        if (cl->avoid[i].until_ns > now) out[n++] = cl->avoid[i].id;
    return n;
}

/* ---- The stalled requests (invariant 9; under cl->mu) ------------------------------------------ */

/* q's attempt failed with err at now and q will be retried: link it (once) and take the snapshot
 * the wait report reads. */
static void stall_note_locked(cluster *cl, creq *q, uint16_t type, int err, uint64_t now) {
    if (!q->stalled) {
        q->stalled = 1;
        q->sprev = NULL;
        q->snext = cl->stalled;
        if (cl->stalled) cl->stalled->sprev = q;
        cl->stalled = q;
    }
    q->st_type = type;
    q->st_sid = q->last_sid;
    memcpy(q->st_ip, q->last_ip, sizeof q->st_ip);
    q->st_port = q->last_port;
    q->st_err = err;
    memcpy(q->st_why, q->why, sizeof q->st_why);
    q->st_since_ns = q->step_ns ? q->step_ns : q->fail_since_ns ? q->fail_since_ns : now;
}

/* q got a reply or finishes: it no longer waits (its owner calls this; cheap when not linked). */
static void stall_clear(cluster *cl, creq *q) {
    if (!q->stalled) return;
    pthread_mutex_lock(&cl->mu);
    if (q->sprev) q->sprev->snext = q->snext;
    else cl->stalled = q->snext;
    if (q->snext) q->snext->sprev = q->sprev;
    q->snext = q->sprev = NULL;
    q->stalled = 0;
    pthread_mutex_unlock(&cl->mu);
}

/* ---- Encoding scratch (one buffer per thread, freed at thread exit) --------------------------- */

static pthread_key_t enc_key;
static pthread_once_t enc_once = PTHREAD_ONCE_INIT;

static void enc_free(void *p) {
    rl__buf_release(p);
    rl__free(p);
}

static void enc_init(void) { (void)pthread_key_create(&enc_key, enc_free); }

/* The calling thread's scratch buffer, emptied; NULL on OOM. */
static rl_buf *enc_buf(void) {
    pthread_once(&enc_once, enc_init);
    rl_buf *b = pthread_getspecific(enc_key);
    if (!b) {
        b = rl__malloc(sizeof *b);
        if (!b) return NULL;
        rl__buf_init(b);
        if (pthread_setspecific(enc_key, b)) {
            rl__free(b);
            return NULL;
        }
    }
    rl__buf_reset(b);
    return b;
}

/* ---- Waiters ---------------------------------------------------------------------------------- */

static waiter *waiter_new(void) {
    waiter *w = rl__calloc(1, sizeof *w);
    if (!w) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->refs = 2;
    rl__buf_init(&w->out);
    return w;
}

static void waiter_unref(waiter *w) {
    pthread_mutex_lock(&w->mu);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last) return;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    rl__buf_release(&w->out);
    rl__free(w);
}

static void waiter_complete(waiter *w, int err) {
    pthread_mutex_lock(&w->mu);
    w->err = err;
    w->done = 1;
    w->t_done_ns = now_ns();
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Wait until w is done or timeout_ms passed. Returns w->err or RL_E_TIMED_OUT. */
static int waiter_wait(waiter *w, int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts)) break;
    int rc = w->done ? w->err : RL_E_TIMED_OUT;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* ---- Connections ------------------------------------------------------------------------------ */

static void cconn_unref(cconn *cc) {
    if (atomic_fetch_sub(&cc->refs, 1) != 1) return;
    rl__conn_release(cc->conn);
    pt_release(&cc->pending);
    pthread_mutex_destroy(&cc->mu);
    rl__free(cc);
}

/* Remove cc from the connection table (if it is there) and drop the table's reference. */
static void cconn_unlist(cconn *cc) {
    cluster *cl = cc->cl;
    int found = 0;
    pthread_mutex_lock(&cl->mu);
    for (size_t i = 0; i < cl->n_conns; i++) {
        if (cl->conns[i] == cc) {
            cl->conns[i] = cl->conns[--cl->n_conns];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&cl->mu);
    if (found) cconn_unref(cc);
}

/* ---- Hedged reads (network thread; invariant 7) ------------------------------------------------ */

/* Plain reads: the request types a read may hedge (cluster.h). */
static int hedgeable_type(uint16_t type) {
    return type == RL_MSG_GET || type == RL_MSG_GET_KEY || type == RL_MSG_GET_RANGE;
}

/* The attempt (cc, id) of hedged read q ended; its entry is already out of cc's table. ok: it
 * brought q's reply: the other attempt's entry is taken out (its reply, if one comes, is dropped
 * as late) and q continues with this one — returns 0. Not ok (its connection lost, its deadline
 * passed, an error reply, a failed send): q goes on with the other attempt alone — returns 1, and
 * the caller drops this one. Takes the other connection's mutex (ok only): call it holding none
 * but cc's (not ok). */
static int attempt_ended(creq *q, cconn *cc, uint64_t id, int ok) {
    cluster *cl = q->cl;
    int was_hedge = cc == q->hconn && id == q->hid;
    cconn *oc = was_hedge ? q->conn : q->hconn;
    uint64_t oid = was_hedge ? q->id : q->hid;
    atomic_store(&q->hedged, 0);
    atomic_fetch_sub(&cl->hedges_out, 1);
    q->hconn = NULL;
    if (ok) {
        pthread_mutex_lock(&oc->mu);
        (void)pt_take(&oc->pending, oid);
        pthread_mutex_unlock(&oc->mu);
        q->conn = cc;
        q->id = id;
        if (was_hedge) rl__locked_add_u64(&cl->mu, &cl->n_hedge_wins, 1);
        return 0;
    }
    if (!was_hedge) { /* the hedge becomes the attempt */
        q->conn = oc;
        q->id = oid;
        q->deadline_ns = q->hdeadline_ns;
        q->sent_ns = q->hsent_ns;
    }
    return 1;
}

/* Take every request out of cc (it has closed or failed to open): they continue elsewhere. */
static creq *cconn_drain_locked(cconn *cc) {
    creq *list = NULL;
    for (creq *q = cc->wait_head, *nx; q; q = nx) {
        nx = q->next;
        q->where = W_NONE;
        q->next = list;
        list = q;
    }
    cc->wait_head = cc->wait_tail = NULL;
    for (uint32_t i = 0; i < cc->pending.cap; i++) {
        if (!cc->pending.v[i].id) continue;
        creq *q = cc->pending.v[i].q;
        uint64_t id = cc->pending.v[i].id;
        cc->pending.v[i].id = 0;
        if (atomic_load(&q->hedged) == 1 && attempt_ended(q, cc, id, 0)) continue; /* the other goes on */
        q->where = W_NONE;
        q->next = list;
        list = q;
    }
    cc->pending.n = 0;
    return list;
}

/* Fail every request of list (taken out of a connection, so each is ours) with err; why is the
 * reason the wait report gives. */
static void fail_list(creq *list, int err, const char *why) {
    for (creq *q = list, *nx; q; q = nx) {
        nx = q->next;
        q->next = NULL;
        snprintf(q->why, sizeof q->why, "%s", why);
        fail_attempt(q, err);
    }
}

/* The connect failed or the connection closed (loop thread). */
static void cconn_dead(cconn *cc, int err, const char *why) {
    cluster *cl = cc->cl;
    pthread_mutex_lock(&cc->mu);
    int was = cc->state;
    cc->state = C_CLOSED;
    creq *list = cconn_drain_locked(cc);
    pthread_mutex_unlock(&cc->mu);
    if (was != C_CLOSED && !atomic_load(&cl->closing))
        rl__log(RL_LOG_INFO, "cluster client: connection to %s:%u (server %u) %s: %s", cc->ip, cc->port, cc->server_id,
                was == C_OPEN ? "lost" : "failed", why);
    pthread_mutex_lock(&cl->mu);
    if (was == C_OPEN) cl->n_lost_connections++;
    if (cc->server_id != 0) avoid_mark_locked(cl, cc->server_id, now_ns()); /* reads go elsewhere */
    pthread_mutex_unlock(&cl->mu);
    cconn_unlist(cc);
    char reason[WHY_CAP];
    if (was == C_OPEN) snprintf(reason, sizeof reason, "connection lost: %s", why);
    else snprintf(reason, sizeof reason, "cannot connect");
    fail_list(list, refused_for_good(err) ? err : RL_E_CONNECTION_FAILED, reason);
}

/* Register q in cc's pending table, encode its request and send it (any thread). cc is open. */
static void send_on(cconn *cc, creq *q, uint64_t now);
static void ensure_hedge_tick(cluster *cl);

static void on_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud);

static void on_close(rl__conn *conn, int err, void *ud) {
    (void)conn;
    cconn *cc = ud;
    cconn_dead(cc, err, rl__conn_close_reason(conn));
}

static void on_connect(rl__conn *conn, int err, void *ud) {
    cconn *cc = ud;
    cluster *cl = cc->cl;
    if (err) {
        cconn_dead(cc, err, rl_error_name(err));
        return;
    }
    rl__conn_set_callbacks(conn, on_frame, on_close, cc);
    cc->hello_id = atomic_fetch_add(&cl->next_id, 1);
    cc->connected_ns = now_ns();
    /* The delay goes on before the HELLO, the first frame (netem.h). The server's label comes
     * from the map; a server the map does not list counts as another host. */
    uint32_t d_us, j_us;
    uint64_t salt;
    pthread_mutex_lock(&cl->mu);
    const uint8_t *label = NULL;
    size_t label_len = 0;
    if (cl->map)
        for (uint32_t i = 0; i < cl->map->n_servers; i++)
            if (cl->map->servers[i].id == cc->server_id) {
                label = (const uint8_t *)cl->map->servers[i].host;
                label_len = strlen(cl->map->servers[i].host);
            }
    cc->delayed = rl__netem_applies(CLIENT_HOST, strlen(CLIENT_HOST), label, label_len, RL_ROLE_STORAGE);
    d_us = cl->delay_us, j_us = cl->jitter_us, salt = cl->delay_salt++;
    pthread_mutex_unlock(&cl->mu);
    if (cc->delayed && (d_us || j_us)) (void)rl__netem_set(conn, d_us, j_us, salt);
    rl__msg_hello_req hr;
    memset(&hr, 0, sizeof hr);
    hr.magic = RL_PROTOCOL_MAGIC;
    hr.protocol_version = RL_PROTOCOL_VERSION;
    hr.role = RL_ROLE_CLIENT;
    hr.id = 0;
    hr.host = (const uint8_t *)CLIENT_HOST;
    hr.host_len = (uint32_t)strlen(CLIENT_HOST);
    rl_buf *b = enc_buf();
    int rc = b ? rl__msg_hello_req_encode(b, &hr, NULL) : RL_E_OUT_OF_MEMORY;
    if (rc == RL_OK) rc = rl__conn_send(conn, RL_MSG_HELLO, 0, cc->hello_id, b->data, b->len);
    pthread_mutex_lock(&cc->mu);
    cc->conn = conn; /* the owner's reference, kept until cc is freed (invariant 5) */
    if (cc->state == C_CONNECTING) cc->state = C_OPEN;
    creq *list = NULL, *tail = NULL;
    for (creq *q = cc->wait_head, *nx; q; q = nx) { /* keep their order */
        nx = q->next;
        q->where = W_NONE;
        q->next = NULL;
        if (tail) tail->next = q;
        else list = q;
        tail = q;
    }
    cc->wait_head = cc->wait_tail = NULL;
    pthread_mutex_unlock(&cc->mu);
    pthread_mutex_lock(&cl->mu);
    cl->n_connects++;
    if (!rc && cc->server_id != 0) avoid_clear_locked(cl, cc->server_id);
    pthread_mutex_unlock(&cl->mu);
    if (rc) {
        rl__log(RL_LOG_WARN, "cluster client: HELLO to %s:%u failed: %s", cc->ip, cc->port, rl_error_name(rc));
        rl__conn_close(conn, 0);
        /* on_close fails what is pending; the waiters go through it too */
    }
    for (creq *q = list, *nx; q; q = nx) {
        nx = q->next;
        q->next = NULL;
        send_on(cc, q, now_ns());
    }
}

/* The listed connection to ip:port with a reference for the caller, or NULL. Under cl->mu. */
static cconn *find_conn_locked(cluster *cl, const char *ip, uint16_t port) {
    for (size_t i = 0; i < cl->n_conns; i++) {
        cconn *cc = cl->conns[i];
        if (cc->port == port && !strcmp(cc->ip, ip)) {
            atomic_fetch_add(&cc->refs, 1);
            return cc;
        }
    }
    return NULL;
}

/* The connection to ip:port, with a reference for the caller (cconn_unref); connecting it when
 * there is none. NULL on OOM. */
static cconn *get_conn(cluster *cl, const char *ip, uint16_t port, uint32_t server_id) {
    pthread_mutex_lock(&cl->mu);
    cconn *found = find_conn_locked(cl, ip, port);
    if (found) {
        pthread_mutex_unlock(&cl->mu);
        return found;
    }
    if (RL_GROW(cl->conns, cl->cap_conns, cl->n_conns + 1, 8)) {
        pthread_mutex_unlock(&cl->mu);
        return NULL;
    }
    cconn *cc = rl__calloc(1, sizeof *cc);
    if (!cc) {
        pthread_mutex_unlock(&cl->mu);
        return NULL;
    }
    cc->cl = cl;
    snprintf(cc->ip, sizeof cc->ip, "%s", ip);
    cc->port = port;
    cc->server_id = server_id;
    atomic_init(&cc->refs, 2); /* the table's and the caller's */
    rl__mutex_init_adaptive(&cc->mu);
    cc->state = C_CONNECTING;
    cl->conns[cl->n_conns++] = cc;
    pthread_mutex_unlock(&cl->mu);
    rl__errdetail nd;
    rl__errdetail_init(&nd, NULL);
    int rc = rl__connect(cl->loop, ip, port, RL_CLUSTER_CONNECT_TIMEOUT_MS, on_connect, cc, &nd);
    if (rc) { /* on_connect will not run: nothing waits on cc yet (the caller adds itself) */
        pthread_mutex_lock(&cc->mu);
        cc->state = C_CLOSED;
        pthread_mutex_unlock(&cc->mu);
        rl__log(RL_LOG_INFO, "cluster client: cannot connect to %s:%u: %s", ip, port, rl__errdetail_get(&nd));
        cconn_unlist(cc);
    }
    return cc;
}

/* ---- Sending ---------------------------------------------------------------------------------- */

/* 1: q is a mapped read sent as GET_MAPPED_STREAM (docs/protocol.md, "Streamed mapped reads"). */
static int streamed(const creq *q) {
    return q->kind == RL_CREQ_READ && q->plan.req.type == RL_MSG_GET_MAPPED_RANGE && q->cl->stream && !q->index_only;
}

static uint16_t req_type(const creq *q) {
    switch (q->kind) {
    case RL_CREQ_READ:
        return q->index_only ? RL_MSG_GET_RANGE : streamed(q) ? RL_MSG_GET_MAPPED_STREAM : q->plan.req.type;
    case RL_CREQ_GRV: return RL_MSG_GET_READ_VERSION;
    case RL_CREQ_COMMIT: return RL_MSG_COMMIT;
    case RL_CREQ_MAP: return RL_MSG_GET_SHARD_MAP;
    case RL_CREQ_STATUS: return RL_MSG_STATUS;
    default: return RL_MSG_PING;
    }
}

static uint64_t attempt_timeout(const creq *q) {
    if (q->kind == RL_CREQ_COMMIT) return RL_CLUSTER_COMMIT_TIMEOUT_NS;
    if (q->kind == RL_CREQ_READ && q->plan.req.type == RL_MSG_GET_MAPPED_RANGE) return RL_CLUSTER_MAPPED_TIMEOUT_NS;
    return RL_CLUSTER_READ_TIMEOUT_NS;
}

/* Encode q's request into b (why: the codec's reason when it refuses the request — a bug of ours,
 * logged by the caller). */
static int encode(creq *q, rl_buf *b, rl__errdetail *why) {
    switch (q->kind) {
    case RL_CREQ_READ:
        if (streamed(q)) {
            rl__msg_get_mapped_stream_req m;
            m.r = q->plan.req.u.get_mapped_range_req;
            m.chunk_bytes = q->cl->stream_chunk;
            m.window_bytes = q->cl->stream_window;
            return rl__msg_get_mapped_stream_req_encode(b, &m, why);
        }
        if (q->index_only) { /* the mapped read's own bounds, limits and direction */
            const rl__msg_get_mapped_range_req *mr = &q->plan.req.u.get_mapped_range_req;
            rl__msg_get_range_req g = {mr->version, mr->begin, mr->end, mr->limit, mr->target_bytes, mr->reverse};
            return rl__msg_get_range_req_encode(b, &g, why);
        }
        return rl__msg_encode(b, &q->plan.req, why);
    case RL_CREQ_GRV: {
        rl__msg_get_read_version_req m = {0};
        return rl__msg_get_read_version_req_encode(b, &m, NULL);
    }
    case RL_CREQ_COMMIT: return RL_OK; /* pre-encoded in q->pl */
    case RL_CREQ_MAP: {
        rl__msg_get_shard_map_req m = {0};
        return rl__msg_get_shard_map_req_encode(b, &m, NULL);
    }
    case RL_CREQ_STATUS: {
        rl__msg_status_req m = {0};
        return rl__msg_status_req_encode(b, &m, NULL);
    }
    default: {
        rl__msg_ping_req m = {(const uint8_t *)"rl", 2};
        return rl__msg_ping_req_encode(b, &m, NULL);
    }
    }
}

/* Hand a failure found on any thread to the network thread (invariant 3). */
static void fail_post_fn(rl__loop *loop, void *ud) {
    (void)loop;
    creq *q = ud;
    fail_attempt(q, q->err);
}

static void fail_any(creq *q, int err) {
    cluster *cl = q->cl;
    if (rl__loop_in_loop_thread(cl->loop)) {
        fail_attempt(q, err);
        return;
    }
    q->err = err;
    if (rl__loop_post(cl->loop, fail_post_fn, q) != RL_OK) finish(q, RL_E_OUT_OF_MEMORY);
}

/* ---- Tracing (backend.h: rl__kv_read_stats, rl__kv_trace_event) ------------------------------- */

/* The counters q's request adds to: a read's, or a transaction's read version's; NULL for the
 * backend's own requests (map, status, ping, status_json's read version). */
static rl__kv_read_stats *q_stats(creq *q) {
    if (q->kind == RL_CREQ_READ) return &q->r->stats;
    if (q->kind == RL_CREQ_GRV && q->g) return &q->g->stats;
    return NULL;
}

/* 1 when q's caller asked for an event per request (the only cost when not: this test). */
static int q_tracing(const creq *q) {
    if (q->kind == RL_CREQ_READ) return q->r->trace;
    return q->kind == RL_CREQ_GRV && q->g && q->g->trace;
}

/* A new event for q's traced attempt (sent at q->tr_start_ns, ended now), linked to the read (or
 * held by the read version), or NULL (out of memory: the timeline loses it, the counters stay
 * exact). Takes the attempt: q->tr_start_ns is 0 afterwards. */
static rl__kv_trace_event *trace_event(creq *q, uint16_t type, int err, uint32_t bytes_received) {
    rl__kv_trace_event *ev;
    if (q->kind == RL_CREQ_READ) {
        ev = rl__arena_alloc(q->r->arena, sizeof *ev);
        if (!ev) {
            q->tr_start_ns = 0;
            return NULL;
        }
    } else {
        ev = &q->g->ev;
        q->g->has_ev = 1;
    }
    memset(ev, 0, sizeof *ev);
    ev->start_ns = q->tr_start_ns;
    ev->end_ns = now_ns();
    ev->type = type;
    ev->err = err;
    ev->bytes_sent = q->tr_bytes_sent;
    ev->bytes_received = bytes_received;
    ev->server_id = q->tr_sid;
    memcpy(ev->address, q->tr_ip, sizeof ev->address);
    ev->port = q->tr_port;
    ev->link = q->tr_sid == 0 ? RL_KV_LINK_CLIENT_COORDINATOR : RL_KV_LINK_CLIENT_STORAGE;
    cluster *cl = q->cl;
    pthread_mutex_lock(&cl->mu);
    rl__locmap *m = cl->map;
    int si = m ? rl__locmap_server(m, q->tr_sid) : -1;
    if (si >= 0 && m->servers[si].host) snprintf(ev->host, sizeof ev->host, "%s", m->servers[si].host);
    pthread_mutex_unlock(&cl->mu);
    if (q->kind == RL_CREQ_READ) {
        rl__kv_read *r = q->r;
        if (r->trace_tail) r->trace_tail->next = ev;
        else r->trace_head = ev;
        r->trace_tail = ev;
    }
    q->tr_start_ns = 0;
    return ev;
}

/* q's reply (or error reply, err != 0) of h->payload_len bytes arrived on cc: count its bytes and,
 * when traced, record the attempt's event (ms: a mapped reply's server counters, or NULL).
 * Network thread; q is not finished yet. */
/* One EWMA step of *v (n: samples so far) towards x. Network thread (the only writer). */
static void rtt_update(atomic_uint_fast64_t *v, atomic_uint *n, uint64_t x) {
    unsigned k = atomic_load_explicit(n, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(v, memory_order_relaxed);
    uint64_t nv = k == 0 ? x : (uint64_t)((1 - RTT_ALPHA) * (double)old + RTT_ALPHA * (double)x);
    atomic_store_explicit(v, nv, memory_order_relaxed);
    if (k < UINT32_MAX) atomic_store_explicit(n, k + 1, memory_order_relaxed);
}

/* The round-trip sample of q's attempt that just got a reply on cc (reads only, replies of at
 * most RTT_MAX_REPLY bytes; ms: a mapped reply's stats, whose server time is not network time). */
static void rtt_sample(creq *q, cconn *cc, const rl__frame_header *h, const rl__msg_mapped_stats *ms) {
    if (q->kind != RL_CREQ_READ || !q->rtt_t0 || !cc) return;
    if (h->payload_len > RTT_MAX_REPLY) { /* its transfer, not the round trip, would dominate */
        q->rtt_t0 = 0;
        return;
    }
    uint64_t t = now_ns(), lat = t > q->rtt_t0 ? t - q->rtt_t0 : 0;
    if (ms && ms->server_ns < lat) lat -= ms->server_ns;
    if (q->rtt_idle) rtt_update(&cc->rtt_idle_ns, &cc->n_rtt_idle, lat);
    rtt_update(&cc->rtt_all_ns, &cc->n_rtt_all, lat);
    q->rtt_t0 = 0;
}

static void note_reply(creq *q, cconn *cc, const rl__frame_header *h, int err, const rl__msg_mapped_stats *ms) {
    rtt_sample(q, cc, h, ms);
    rl__kv_read_stats *st = q_stats(q);
    if (!st) return;
    uint32_t fb = (uint32_t)(RL_FRAME_HEADER_LEN + h->payload_len);
    st->bytes_received += fb;
    if (cc && cc->server_id == 0) st->coord_bytes_received += fb;
    if (!q_tracing(q) || !q->tr_start_ns) return;
    if (h->type == RL_MSG_GET_MAPPED_STREAM) fb += (uint32_t)q->s_bytes; /* the event: every frame */
    rl__kv_trace_event *ev = trace_event(q, h->type, err, fb);
    if (ev && ms) {
        ev->secondaries_local = ms->secondaries_local;
        ev->secondaries_remote = ms->secondaries_remote;
        ev->s2s_requests = ms->s2s_requests;
        ev->s2s_round_trips = ms->s2s_round_trips;
        ev->s2s_peers = ms->s2s_peers;
        ev->s2s_bytes_sent = ms->s2s_bytes_sent;
        ev->s2s_bytes_received = ms->s2s_bytes_received;
        ev->server_ns = ms->server_ns;
        rl__kv_s2s_peer *pp = ms->n_peer_stats ? rl__arena_alloc(q->r->arena, ms->n_peer_stats * sizeof *pp) : NULL;
        if (pp) {
            for (uint32_t i = 0; i < ms->n_peer_stats; i++) {
                const rl__msg_s2s_peer *x = &ms->peer_stats[i];
                pp[i] = (rl__kv_s2s_peer){x->server_id, x->requests, x->items, x->bytes_sent, x->bytes_received};
            }
            ev->peers = pp;
            ev->n_peers = ms->n_peer_stats;
        }
    }
}

/* q's traced attempt ended without a reply (its connection was lost, it timed out, or its send
 * failed): an event with the transport error and no reply bytes, so the timeline's bytes sent
 * still add up to the counters'. */
static void note_failed(creq *q, int err) {
    if (q_stats(q) && q_tracing(q) && q->tr_start_ns) (void)trace_event(q, req_type(q), err, 0);
}

/* Send q's request on cc (now: the clock read by the caller, the attempt's send time). */
static void send_on(cconn *cc, creq *q, uint64_t now) {
    cluster *cl = q->cl;
    rl_buf *b = NULL;
    cpayload *pl = NULL;            /* a commit's payload, referenced for the send (the reply may free q) */
    const void *data, *more = NULL; /* the payload: data, then more (a GET's key) */
    size_t len, more_len = 0;
    uint8_t head[RL_MSG_GET_REQ_HEAD];
    if (q->kind == RL_CREQ_COMMIT) {
        pl = q->pl;
        atomic_fetch_add(&pl->refs, 1);
        data = pl->b.data;
        len = pl->b.len;
    } else if (q->kind == RL_CREQ_READ && q->plan.req.type == RL_MSG_GET && q->plan.req.flags == 0 &&
               rl__msg_get_req_head(&q->plan.req.u.get_req, head)) { /* the commonest: no buffer */
        data = head;
        len = sizeof head;
        more = q->plan.req.u.get_req.key;
        more_len = q->plan.req.u.get_req.key_len;
    } else {
        b = enc_buf();
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        int rc = b ? encode(q, b, &why) : RL_E_OUT_OF_MEMORY;
        if (rc == RL_OK) rc = rl__buf_error(b);
        if (rc) {
            if (rc != RL_E_OUT_OF_MEMORY)
                rl__log(RL_LOG_ERROR, "cluster client: cannot encode a %s request: %s: %s",
                        rl__msg_type_name(req_type(q)), rl_error_name(rc), rl__errdetail_get(&why));
            finish(q, rc);
            return;
        }
        data = b->data;
        len = b->len;
    }
    uint64_t id = atomic_fetch_add(&cl->next_id, 1);
    uint16_t type = req_type(q);
    if (type == RL_MSG_GET_MAPPED_STREAM) { /* a new attempt: no chunk of it yet (not pending yet) */
        q->s_ents = NULL;
        q->s_n = q->s_cap = q->s_pub = 0;
        q->s_bytes = 0;
        q->s_cancelled = 0;
    }
    /* The wait report's view (invariant 9): where the attempt goes, since when the step waits. */
    q->last_sid = cc->server_id;
    memcpy(q->last_ip, cc->ip, sizeof q->last_ip);
    q->last_port = cc->port;
    if (!q->step_ns) q->step_ns = now;
    pthread_mutex_lock(&cc->mu);
    if (cc->state != C_OPEN) {
        int closed = cc->state == C_CLOSED;
        if (!closed) { /* connecting: park (the connect sends it) */
            q->where = W_WAITING;
            q->conn = cc;
            q->next = NULL;
            if (cc->wait_tail) cc->wait_tail->next = q;
            else cc->wait_head = q;
            cc->wait_tail = q;
        }
        pthread_mutex_unlock(&cc->mu);
        pl_unref(pl);
        if (closed) {
            snprintf(q->why, sizeof q->why, "the connection closed");
            fail_any(q, RL_E_CONNECTION_FAILED);
        }
        return;
    }
    rl__kv_read_stats *st = q_stats(q);
    if (st) { /* counted once per attempt actually sent (a request parked for a connect comes
               * back here), before it is sent: the reply may finish q at once */
        uint32_t fb = (uint32_t)(RL_FRAME_HEADER_LEN + len + more_len);
        st->requests++;
        st->round_trips++;
        st->bytes_sent += fb;
        switch (type) {
        case RL_MSG_GET: st->req_get++; break;
        case RL_MSG_GET_KEY: st->req_get_key++; break;
        case RL_MSG_GET_RANGE: st->req_get_range++; break;
        case RL_MSG_GET_MAPPED_RANGE: st->req_get_mapped++; break;
        case RL_MSG_GET_MAPPED_STREAM: st->req_get_mapped++; break;
        default: break;
        }
        if (cc->server_id == 0) {
            st->coord_requests++;
            st->coord_bytes_sent += fb;
        }
        if (q_tracing(q)) {
            q->tr_start_ns = now;
            q->tr_bytes_sent = fb;
            q->tr_sid = cc->server_id;
            memcpy(q->tr_ip, cc->ip, sizeof q->tr_ip);
            q->tr_port = cc->port;
        }
    }
    int busy = cc->pending.n > 0; /* requests already in flight here: batch (below) */
    if (q->kind == RL_CREQ_READ) {
        q->rtt_t0 = now;
        q->rtt_idle = !busy;
    }
    /* A plain read of a team: the hedge timer must look at it once it is in the table (and q
     * may be gone once sent: decided now). */
    int watch = q->kind == RL_CREQ_READ && cl->hedge_on && q->team_size > 1 && hedgeable_type(q->plan.req.type);
    if (pt_put(&cc->pending, id, q) != RL_OK) {
        pthread_mutex_unlock(&cc->mu);
        pl_unref(pl);
        finish(q, RL_E_OUT_OF_MEMORY);
        return;
    }
    q->where = W_PENDING;
    q->conn = cc;
    q->id = id;
    q->sent_ns = now;
    q->deadline_ns = q->sent_ns + attempt_timeout(q);
    if (q->kind == RL_CREQ_COMMIT) q->sent = 1; /* before the send: a close may take q at once */
    rl__conn *conn = cc->conn;
    pthread_mutex_unlock(&cc->mu);
    /* The first request of a burst is written by this thread (the latency path); while others are
     * in flight, requests queue and the network thread writes them together (one wake-up, a few
     * sendmsg calls for many requests: what makes 1,000 gets at once cheap). */
    int rc = rl__conn_send2(conn, type, 0, id, data, len, more, more_len, busy);
    pl_unref(pl);
    if (rc == RL_OK) {
        if (watch) ensure_hedge_tick(cl); /* uses cl only */
        return;
    }
    /* Not sent: take q back, unless the close or a reply already took it (invariant 1). */
    pthread_mutex_lock(&cc->mu);
    creq *back = pt_take(&cc->pending, id);
    if (back && atomic_load(&q->hedged)) {
        /* Hedged meanwhile (invariant 7): the network thread owns it; leave the entry (its
         * close or deadline ends this attempt). The put cannot fail: the take made room. */
        (void)pt_put(&cc->pending, id, q);
        back = NULL;
    } else if (back) {
        q->where = W_NONE;
        q->sent = 0;
    }
    pthread_mutex_unlock(&cc->mu);
    if (back) {
        snprintf(q->why, sizeof q->why, "the send failed: %s", rl_error_name(rc));
        fail_any(q, rc == RL_E_OUT_OF_MEMORY ? RL_E_OUT_OF_MEMORY : RL_E_CONNECTION_FAILED);
    }
}

/* The index read alone (the file header): look at q's mapped read once — a `grouped` (or the
 * servers' default, grouped) read with RL_MAPPED_DEFER_REMOTE and a range mapper with leading
 * literal bytes P gets sec_state 1 and [sec_lo, sec_hi) = [P, strinc(P)); any other -1 (a mapper
 * that does not parse is left to the server, which names its error). Allocates from the read's
 * arena: call it where q is this thread's alone (invariant 1) and before taking cl->mu. */
static void sec_setup(creq *q) {
    const rl__msg_get_mapped_range_req *mr = &q->plan.req.u.get_mapped_range_req;
    rl__mapper *mp = NULL;
    const uint8_t *pre, *hi;
    size_t n;
    rl_buf b;
    q->sec_state = -1;
    if (q->plan.req.type != RL_MSG_GET_MAPPED_RANGE || !mr->defer_remote || mr->strategy == RL_FETCH_INDIVIDUAL) return;
    if (rl__mapper_parse(mr->mapper, mr->mapper_len, q->r->arena, &mp) != RL_OK || !rl__mapper_is_range(mp)) return;
    rl__mapper_prefix(mp, &pre, &n);
    if (n > UINT32_MAX) return;
    rl__buf_init(&b);
    /* No literal bytes (or all 0xff: strinc refuses them): its secondaries may lie anywhere. */
    int rc = rl__strinc(pre, n, &b);
    hi = rc == RL_OK ? rl__arena_memdup(q->r->arena, b.data, b.len) : NULL;
    q->sec_hi_len = (uint32_t)b.len;
    rl__buf_release(&b);
    if (!hi) return;
    q->sec_mapper = mp;
    q->sec_lo = pre, q->sec_lo_len = (uint32_t)n;
    q->sec_hi = hi;
    q->sec_state = 1;
}

/* 1 when map m says server sid holds no shard of [q->sec_lo, q->sec_hi) (sec_state 1; cl->mu held):
 * it would defer every entry of q's mapped read. */
static int index_only_to(const creq *q, const rl__locmap *m, uint32_t sid) {
    int i = rl__locmap_find(m, q->sec_lo, q->sec_lo_len, 0);
    if (i < 0) return 0;
    for (; (uint32_t)i < m->n_shards; i++) {
        const rl__loc_shard *sh = &m->shards[i];
        if (rl__bytes_cmp(sh->begin, sh->begin_len, q->sec_hi, q->sec_hi_len) >= 0) break;
        for (uint32_t j = 0; j < sh->n_team; j++)
            if (sh->team_id[j] == sid) return 0;
    }
    return 1;
}

/* Where q goes: the coordinator for everything but reads (and status / pings to a storage
 * server), which go where the location cache says. Returns 0 with the address filled, and
 * *out_cc the open-or-connecting connection to it when there is one (with a reference; NULL:
 * the caller gets one) — the map, the avoided servers and the connection table are all looked
 * at under one hold of cl->mu; 1 when q went to wait for a map refresh or to a retry; -1 when q
 * was finished. now: the caller's clock. */
static int target_of(creq *q, uint64_t now, char ip[16], uint16_t *port, uint32_t *server_id, cconn **out_cc) {
    cluster *cl = q->cl;
    *out_cc = NULL;
    q->index_only = 0;
    int by_id = (q->kind == RL_CREQ_PING || q->kind == RL_CREQ_STATUS) && q->ping_server != 0;
    if (q->kind != RL_CREQ_READ && !by_id) {
        memcpy(ip, cl->cf.ip, 16);
        *port = cl->cf.port;
        *server_id = 0;
        return 0;
    }
    uint32_t avoid[AVOID_MAX];
    pthread_mutex_lock(&cl->mu);
    rl__locmap *m = cl->map; /* alive while cl->mu is held: map_done swaps it under the lock */
    if (!m) {
        pthread_mutex_unlock(&cl->mu);
        want_map(cl, q);
        return 1;
    }
    int n_avoid = by_id || cl->n_avoid == 0 ? 0 : avoid_list_locked(cl, now, avoid);
    int sidx, refresh = 0;
    if (by_id) {
        sidx = rl__locmap_server(m, q->ping_server);
        if (sidx < 0) {
            pthread_mutex_unlock(&cl->mu);
            finish(q, RL_E_INVALID_ARGUMENT);
            return -1;
        }
    } else {
        int si = rl__locmap_find(m, q->plan.route_key, q->plan.route_key_len, q->plan.route_backward);
        if (si < 0) { /* cannot happen with a valid map (locmap invariant 1) */
            pthread_mutex_unlock(&cl->mu);
            finish(q, RL_E_KEY_OUTSIDE_LEGAL_RANGE);
            return -1;
        }
        sidx = rl__locmap_pick_avoid(m, &m->shards[si], q->salt, avoid, n_avoid);
        q->team_size = m->shards[si].n_team;
        /* A member down in this map is looked at again (at most every 500 ms), so a restarted
         * server gets its share of the reads back once the coordinator sees it. */
        for (uint32_t j = 0; j < m->shards[si].n_team && !refresh; j++) {
            int mi = m->shards[si].team_idx[j];
            if (mi >= 0 && !m->servers[mi].healthy) refresh = 1;
        }
        if (sidx < 0) { /* no member in the server list (not registered yet?): refresh and
                         * retry with backoff, bounded by the retry window like a lost server */
            pthread_mutex_unlock(&cl->mu);
            if (refresh) maybe_refresh(cl);
            want_map(cl, NULL);
            snprintf(q->why, sizeof q->why, "no member of the shard's team is registered");
            fail_any(q, RL_E_CONNECTION_FAILED);
            return 1;
        }
    }
    const rl__loc_server *s = &m->servers[sidx];
    memcpy(ip, s->address, 16);
    *port = s->port;
    *server_id = s->id;
    if (!by_id && q->sec_state == 1 && q->plan.req.type == RL_MSG_GET_MAPPED_RANGE)
        q->index_only = index_only_to(q, m, s->id);
    if (!s->healthy) refresh = 1; /* the best member is down in this map: is it back? */
    *out_cc = find_conn_locked(cl, ip, *port);
    pthread_mutex_unlock(&cl->mu);
    if (refresh) maybe_refresh(cl);
    return 0;
}

/* Send q's current request to where it goes (any thread). */
static void send_attempt(creq *q) {
    cluster *cl = q->cl;
    char ip[16];
    uint16_t port;
    uint32_t sid;
    if (atomic_load(&cl->closing)) {
        finish(q, RL_E_OPERATION_CANCELLED);
        return;
    }
    /* While the client sends, the map (and with it the cluster's injected delay, which
     * `rl cluster delay` changes at run time) is refetched at most every DELAY_REFRESH_NS. */
    uint64_t now = now_ns(), fetched = atomic_load(&cl->map_fetch_ns);
    if (q->op_deadline_ns && now >= q->op_deadline_ns) { /* invariant 8: no attempt past it */
        fail_any(q, RL_E_TRANSACTION_TIMED_OUT);
        return;
    }
    if (q->kind != RL_CREQ_MAP && now > fetched && now - fetched >= DELAY_REFRESH_NS) want_map(cl, NULL);
    if (q->kind == RL_CREQ_READ && q->sec_state == 0) sec_setup(q);
    cconn *cc;
    if (target_of(q, now, ip, &port, &sid, &cc)) return;
    if (!cc) cc = get_conn(cl, ip, port, sid);
    if (!cc) {
        finish(q, RL_E_OUT_OF_MEMORY);
        return;
    }
    send_on(cc, q, now);
    cconn_unref(cc);
}

/* ---- The sweep timer (timeouts) --------------------------------------------------------------- */

static void tick_fn(rl__loop *loop, void *ud);

static void arm_tick(cluster *cl) {
    if (rl__loop_timer_add(cl->loop, now_ns() + TICK_NS, tick_fn, cl, NULL) != RL_OK)
        atomic_store(&cl->tick_armed, 0); /* retried at the next operation */
}

static void arm_tick_fn(rl__loop *loop, void *ud) {
    (void)loop;
    cluster *cl = ud;
    if (rl__loop_is_closing(loop)) return;
    arm_tick(cl);
}

/* Make sure the sweep runs (any thread; cheap when it already does). */
static void ensure_tick(cluster *cl) {
    if (atomic_load(&cl->tick_armed)) return;
    if (atomic_exchange(&cl->tick_armed, 1)) return;
    if (rl__loop_in_loop_thread(cl->loop)) arm_tick(cl);
    else if (rl__loop_post(cl->loop, arm_tick_fn, cl) != RL_OK) atomic_store(&cl->tick_armed, 0);
}

/* Every connection of cl with a reference for the caller (cconn_unref each), in stack
 * (CONNS_STACK entries) or, for more, a heap array (free it with conns_free): returns the array
 * and *n its length (0 when the heap array could not be allocated). Takes cl->mu. */
#define CONNS_STACK 64
static cconn **conns_take(cluster *cl, cconn **stack, size_t *n) {
    pthread_mutex_lock(&cl->mu);
    size_t k = cl->n_conns;
    cconn **cs = k <= CONNS_STACK ? stack : rl__malloc(k * sizeof *cs);
    if (!cs) cs = stack, k = 0;
    for (size_t i = 0; i < k; i++) {
        cs[i] = cl->conns[i];
        atomic_fetch_add(&cs[i]->refs, 1);
    }
    pthread_mutex_unlock(&cl->mu);
    *n = k;
    return cs;
}

static void conns_free(cconn **cs, cconn **stack) {
    if (cs != stack) rl__free(cs);
}

/* 1 when q's own deadline (invariant 8) has passed at now. */
static int past_deadline(const creq *q, uint64_t now) { return q->op_deadline_ns && q->op_deadline_ns <= now; }

/* Take the requests of every connection whose attempt deadline passed, and every request past
 * its own deadline wherever it waits: a pending table, a connect queue, the map waiters
 * (invariant 8). */
static void sweep(cluster *cl) {
    uint64_t now = now_ns();
    size_t n;
    cconn *stack[CONNS_STACK];
    cconn **cs = conns_take(cl, stack, &n);
    creq *late = NULL, *expired = NULL;
    for (size_t i = 0; i < n; i++) {
        cconn *cc = cs[i];
        pthread_mutex_lock(&cc->mu);
        for (uint32_t j = 0; j < cc->pending.cap;) {
            pslot *s = &cc->pending.v[j];
            creq *sq = s->id ? s->q : NULL;
            int sh = sq && atomic_load(&sq->hedged) == 1;
            int op_late = sq && past_deadline(sq, now);
            if (sq &&
                (op_late || (sh && s->id == sq->hid && cc == sq->hconn ? sq->hdeadline_ns : sq->deadline_ns) <= now)) {
                creq *q = sq;
                uint64_t sid = s->id;
                pt_remove_at(&cc->pending, j);                    /* j now holds the next slot's entry, if any */
                if (sh && attempt_ended(q, cc, sid, 0)) continue; /* the other attempt goes on */
                q->where = W_NONE;
                if (op_late) {
                    q->next = expired;
                    expired = q;
                } else {
                    q->next = late;
                    late = q;
                }
                continue;
            }
            j++;
        }
        for (creq *q = cc->wait_head, *prev = NULL, *nx; q; q = nx) { /* parked for the connect */
            nx = q->next;
            if (!past_deadline(q, now)) {
                prev = q;
                continue;
            }
            if (prev) prev->next = nx;
            else cc->wait_head = nx;
            if (cc->wait_tail == q) cc->wait_tail = prev;
            q->where = W_NONE;
            q->next = expired;
            expired = q;
        }
        pthread_mutex_unlock(&cc->mu);
        cconn_unref(cc);
    }
    conns_free(cs, stack);
    pthread_mutex_lock(&cl->mu);
    for (creq **pp = &cl->map_waiters; *pp;) { /* waiting for the shard map */
        creq *q = *pp;
        if (!past_deadline(q, now)) {
            pp = &q->next;
            continue;
        }
        *pp = q->next;
        q->where = W_NONE;
        q->next = expired;
        expired = q;
    }
    pthread_mutex_unlock(&cl->mu);
    for (creq *q = late, *nx; q; q = nx) {
        nx = q->next;
        q->next = NULL;
        rl__locked_add_u64(&cl->mu, &cl->n_timeouts, 1);
        rl__log(RL_LOG_WARN, "cluster client: %s request timed out", rl__msg_type_name(req_type(q)));
        snprintf(q->why, sizeof q->why, "no reply within %llu s",
                 (unsigned long long)(attempt_timeout(q) / 1000000000ull));
        fail_attempt(q, RL_E_TIMED_OUT);
    }
    for (creq *q = expired, *nx; q; q = nx) { /* fail_attempt finishes them (invariant 8) */
        nx = q->next;
        q->next = NULL;
        fail_attempt(q, RL_E_TRANSACTION_TIMED_OUT);
    }
}

static void report_waits(cluster *cl, uint64_t now);

static void tick_fn(rl__loop *loop, void *ud) {
    cluster *cl = ud;
    if (rl__loop_is_closing(loop)) return;
    sweep(cl);
    if (cl->report_ns) report_waits(cl, now_ns());
    if (atomic_load(&cl->outstanding) > 0) {
        arm_tick(cl);
        return;
    }
    atomic_store(&cl->tick_armed, 0);
    if (atomic_load(&cl->outstanding) > 0 && !atomic_exchange(&cl->tick_armed, 1)) arm_tick(cl);
}

/* ---- The wait report (network thread; invariant 9) -------------------------------------------- */

/* One line of the report: the requests of one type waiting for one server for one reason. */
typedef struct {
    uint32_t sid;
    char ip[16];
    uint16_t port;
    uint16_t type;
    int err; /* 0: waiting for its reply */
    char why[WHY_CAP];
    int n;
    uint64_t since_ns; /* the oldest */
    uint64_t began_ns; /* the oldest transaction's start (0: unknown) */
} wgroup;

/* Count one waiting request into g (*ng groups, REPORT_GROUPS at most); *n_other counts those
 * that fit no group. */
static void wgroup_add(wgroup *g, int *ng, int *n_other, uint32_t sid, const char *ip, uint16_t port, uint16_t type,
                       int err, const char *why, uint64_t since_ns, uint64_t began_ns) {
    for (int i = 0; i < *ng; i++) {
        wgroup *x = &g[i];
        if (x->sid == sid && x->port == port && x->type == type && x->err == err && !strcmp(x->ip, ip) &&
            !strcmp(x->why, why)) {
            x->n++;
            if (since_ns < x->since_ns) x->since_ns = since_ns;
            if (began_ns && (!x->began_ns || began_ns < x->began_ns)) x->began_ns = began_ns;
            return;
        }
    }
    if (*ng == REPORT_GROUPS) {
        (*n_other)++;
        return;
    }
    wgroup *x = &g[(*ng)++];
    x->sid = sid;
    snprintf(x->ip, sizeof x->ip, "%s", ip);
    x->port = port;
    x->type = type;
    x->err = err;
    snprintf(x->why, sizeof x->why, "%s", why);
    x->n = 1;
    x->since_ns = since_ns;
    x->began_ns = began_ns;
}

/* Report (cl->report) every group of requests that has waited cl->report_ns or longer for a
 * server, one line each: "waiting 3.2 s (since 2026-01-02T10:11:12Z; its transaction began 8.1 s
 * ago) for storage server 2 at 127.0.0.1:4501 (host1): 1 GET request; last attempt: cannot
 * connect (connection_failed), retrying" (or "...; no reply yet"). At most one report every
 * cl->report_ns. */
static void report_waits(cluster *cl, uint64_t now) {
    if (now < cl->next_report_ns) return;
    wgroup g[REPORT_GROUPS];
    int ng = 0, n_other = 0;
    /* Retried after a failed attempt: the snapshots of cl->stalled. */
    pthread_mutex_lock(&cl->mu);
    for (creq *q = cl->stalled; q; q = q->snext)
        if (now >= q->st_since_ns && now - q->st_since_ns >= cl->report_ns)
            wgroup_add(g, &ng, &n_other, q->st_sid, q->st_ip, q->st_port, q->st_type, q->st_err,
                       q->st_why[0] ? q->st_why : rl_error_name(q->st_err), q->st_since_ns, q->op_began_ns);
    pthread_mutex_unlock(&cl->mu);
    /* Waiting for a reply (the attempt entries of the pending tables; a hedge is not counted). */
    size_t n;
    cconn *stack[CONNS_STACK];
    cconn **cs = conns_take(cl, stack, &n);
    for (size_t i = 0; i < n; i++) {
        cconn *cc = cs[i];
        pthread_mutex_lock(&cc->mu);
        for (uint32_t j = 0; j < cc->pending.cap; j++) {
            pslot *sl = &cc->pending.v[j];
            creq *q = sl->id ? sl->q : NULL;
            if (!q || q->fail_since_ns || !q->step_ns || q->id != sl->id || q->conn != cc) continue;
            if (now < q->step_ns || now - q->step_ns < cl->report_ns) continue;
            wgroup_add(g, &ng, &n_other, cc->server_id, cc->ip, cc->port, req_type(q), 0, "no reply yet", q->step_ns,
                       q->op_began_ns);
        }
        pthread_mutex_unlock(&cc->mu);
        cconn_unref(cc);
    }
    conns_free(cs, stack);
    if (ng == 0) return; /* nothing has waited that long: look again at the next tick */
    cl->next_report_ns = now + cl->report_ns;
    time_t wall = time(NULL);
    for (int i = 0; i < ng; i++) {
        wgroup *x = &g[i];
        char who[96], host[40] = "", line[512], at[32] = "?";
        pthread_mutex_lock(&cl->mu);
        rl__locmap *m = cl->map;
        int si = m ? rl__locmap_server(m, x->sid) : -1;
        if (si >= 0 && m->servers[si].host) snprintf(host, sizeof host, " (%s)", m->servers[si].host);
        pthread_mutex_unlock(&cl->mu);
        if (x->sid == 0) snprintf(who, sizeof who, "the coordinator at %s:%u%s", x->ip, x->port, host);
        else snprintf(who, sizeof who, "storage server %u at %s:%u%s", x->sid, x->ip, x->port, host);
        uint64_t waited = now - x->since_ns;
        time_t since = wall - (time_t)(waited / 1000000000ull);
        struct tm tm;
        if (gmtime_r(&since, &tm)) strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        char began[64] = ""; /* the transaction's age, when it began before this wait (retries) */
        if (x->began_ns && x->began_ns + 1000000000ull < x->since_ns)
            snprintf(began, sizeof began, "; its transaction began %.1f s ago", (double)(now - x->began_ns) / 1e9);
        char why[WHY_CAP + 64];
        if (x->err) snprintf(why, sizeof why, "last attempt: %s (%s), retrying", x->why, rl_error_name(x->err));
        else snprintf(why, sizeof why, "%s", x->why);
        snprintf(line, sizeof line, "waiting %.1f s (since %s%s) for %s: %d %s request%s; %s", (double)waited / 1e9, at,
                 began, who, x->n, rl__msg_type_name(x->type), x->n == 1 ? "" : "s", why);
        cl->report(line, cl->report_ud);
    }
    if (n_other) {
        char line[128];
        snprintf(line, sizeof line, "waiting: %d more request%s for other servers or reasons", n_other,
                 n_other == 1 ? "" : "s");
        cl->report(line, cl->report_ud);
    }
}

/* ---- The hedge timer (network thread; invariant 7) -------------------------------------------- */

/* The timer is armed (hedge_armed) while plain reads of teams may be waiting: at the moment the
 * first of them passes its server's threshold. An application thread starting such a read bumps
 * hedge_gen and, when the timer is not armed, posts hedge_rearm to the network thread (one post
 * per burst, no work for a single server's cluster); the network thread disarms it when no such
 * read waits (hedge_rearm finds none) or when the last operation completes (finish), and arms it
 * again if a read started meanwhile (hedge_gen moved since its scan). */

static void hedge_rearm(cluster *cl);

static void hedge_timer_fn(rl__loop *loop, void *ud) {
    cluster *cl = ud;
    cl->hedge_timer = 0;
    if (rl__loop_is_closing(loop)) return;
    hedge_rearm(cl);
}

static void hedge_rearm_fn(rl__loop *loop, void *ud) {
    if (rl__loop_is_closing(loop)) return;
    hedge_rearm(ud);
}

/* Make sure the hedge timer will look at a read just started (any thread). */
static void ensure_hedge_tick(cluster *cl) {
    atomic_fetch_add(&cl->hedge_gen, 1);
    if (atomic_load(&cl->hedge_armed) || atomic_exchange(&cl->hedge_armed, 1)) return;
    if (rl__loop_in_loop_thread(cl->loop)) hedge_rearm(cl);
    else if (rl__loop_post(cl->loop, hedge_rearm_fn, cl) != RL_OK) atomic_store(&cl->hedge_armed, 0);
}

/* Disarm (nothing to watch) and return 0, unless a read started since the last scan: then the
 * timer stays armed and 1 says to scan again (network thread). */
static int hedge_disarm_once(cluster *cl) {
    if (cl->hedge_timer) {
        (void)rl__loop_timer_cancel(cl->loop, cl->hedge_timer);
        cl->hedge_timer = 0;
    }
    atomic_store(&cl->hedge_armed, 0);
    return atomic_load(&cl->hedge_gen) != cl->hedge_seen_gen && !atomic_exchange(&cl->hedge_armed, 1);
}

static void hedge_disarm(cluster *cl) {
    if (hedge_disarm_once(cl)) hedge_rearm(cl);
}

/* Send hedge of q (marked hedged 2 by the scan, its attempt pending on pc) to another member of
 * its team over an open connection; clears the mark when there is none. */
static void hedge_send(cluster *cl, creq *q, cconn *pc) {
    uint32_t avoid[AVOID_MAX + 1];
    pthread_mutex_lock(&cl->mu);
    rl__locmap *m = cl->map;
    rl__locmap_ref(m);
    int n_avoid = avoid_list_locked(cl, now_ns(), avoid);
    pthread_mutex_unlock(&cl->mu);
    avoid[n_avoid++] = pc->server_id; /* the slow one */
    cconn *hc = NULL;
    int si = m ? rl__locmap_find(m, q->plan.route_key, q->plan.route_key_len, q->plan.route_backward) : -1;
    int sidx = si < 0 ? -1 : rl__locmap_pick_avoid(m, &m->shards[si], q->salt + 1, avoid, n_avoid);
    if (sidx >= 0 && m->servers[sidx].id != pc->server_id)
        hc = get_conn(cl, m->servers[sidx].address, m->servers[sidx].port, m->servers[sidx].id);
    rl__locmap_unref(m);
    if (!hc) goto none;
    rl_buf *b = enc_buf();
    if (!b || encode(q, b, NULL) != RL_OK || rl__buf_error(b)) goto none;
    uint64_t id = atomic_fetch_add(&cl->next_id, 1);
    pthread_mutex_lock(&hc->mu);
    if (hc->state != C_OPEN || pt_put(&hc->pending, id, q) != RL_OK) { /* connecting: next time */
        pthread_mutex_unlock(&hc->mu);
        goto none;
    }
    q->hconn = hc;
    q->hid = id;
    q->hsent_ns = now_ns();
    q->hdeadline_ns = q->hsent_ns + attempt_timeout(q);
    atomic_store(&q->hedged, 1);
    atomic_fetch_add(&cl->hedges_out, 1);
    int busy = hc->pending.n > 1;
    rl__conn *conn = hc->conn;
    pthread_mutex_unlock(&hc->mu);
    q->r->stats.requests++; /* in parallel with the attempt: no round trip of its own */
    q->r->stats.bytes_sent += RL_FRAME_HEADER_LEN + b->len;
    rl__locked_add_u64(&cl->mu, &cl->n_hedges, 1);
    uint16_t type = req_type(q);
    int rc = busy ? rl__conn_send_queued(conn, type, 0, id, b->data, b->len)
                  : rl__conn_send(conn, type, 0, id, b->data, b->len);
    if (rc != RL_OK) {
        pthread_mutex_lock(&hc->mu);
        creq *back = pt_take(&hc->pending, id);
        pthread_mutex_unlock(&hc->mu);
        if (back) (void)attempt_ended(q, hc, id, 0); /* q goes on with its attempt */
    }
    cconn_unref(hc);
    return;
none:
    if (hc) cconn_unref(hc);
    atomic_store(&q->hedged, 0);
}

/* Hedge the plain reads of teams of more than one member that have waited longer than their
 * server's threshold (at most RL_CLUSTER_HEDGE_MAX_OUT hedges in flight), then arm the timer for
 * the next one to pass its threshold, or disarm it when none waits. */
static int hedge_scan(cluster *cl);

static void hedge_rearm(cluster *cl) {
    /* Reads keep starting while it looks: a few rounds, then the timer in a tick. */
    for (int round = 0; round < 4; round++)
        if (!hedge_scan(cl)) return;
    if (rl__loop_timer_add(cl->loop, now_ns() + RL_CLUSTER_HEDGE_TICK_NS, hedge_timer_fn, cl, &cl->hedge_timer) !=
        RL_OK) {
        cl->hedge_timer = 0;
        atomic_store(&cl->hedge_armed, 0);
    }
}

/* One look (hedge_rearm): returns 1 when it disarmed the timer but a read started meanwhile. */
static int hedge_scan(cluster *cl) {
    enum { MAXC = 64 };
    struct {
        creq *q;
        cconn *cc;
    } cand[MAXC];
    int nc = 0;
    cl->hedge_seen_gen = atomic_load(&cl->hedge_gen);
    uint64_t now = now_ns(), next = UINT64_MAX;
    size_t n;
    cconn *stack[CONNS_STACK];
    cconn **cs = conns_take(cl, stack, &n);
    int room = RL_CLUSTER_HEDGE_MAX_OUT - atomic_load(&cl->hedges_out);
    for (size_t i = 0; i < n; i++) {
        cconn *cc = cs[i];
        pthread_mutex_lock(&cc->mu);
        uint64_t thr = rl__cluster_hedge_threshold(cc->rtt, cc->n_rtt);
        for (uint32_t j = 0; j < cc->pending.cap; j++) {
            pslot *s = &cc->pending.v[j];
            if (!s->id) continue;
            creq *q = s->q;
            if (q->kind != RL_CREQ_READ || q->id != s->id || q->conn != cc || q->team_size < 2 ||
                !hedgeable_type(q->plan.req.type) || atomic_load(&q->hedged))
                continue;
            uint64_t due = q->sent_ns + thr;
            if (due > now || nc >= MAXC || nc >= room) { /* not yet (or no room): look again then */
                if (due <= now) due = now + (nc >= room ? RL_CLUSTER_HEDGE_TICK_NS : RL_CLUSTER_HEDGE_TICK_NS / 10);
                if (due < next) next = due;
                continue;
            }
            atomic_store(&q->hedged, 2); /* under the attempt's mutex: invariant 7 */
            atomic_fetch_add(&cc->refs, 1);
            cand[nc].q = q;
            cand[nc].cc = cc;
            nc++;
        }
        pthread_mutex_unlock(&cc->mu);
        cconn_unref(cc);
    }
    conns_free(cs, stack);
    for (int i = 0; i < nc; i++) {
        hedge_send(cl, cand[i].q, cand[i].cc);
        cconn_unref(cand[i].cc);
    }
    if (cl->hedge_timer) {
        (void)rl__loop_timer_cancel(cl->loop, cl->hedge_timer);
        cl->hedge_timer = 0;
    }
    if (next == UINT64_MAX) return hedge_disarm_once(cl);
    if (next < now + RL_CLUSTER_HEDGE_TICK_NS / 10) next = now + RL_CLUSTER_HEDGE_TICK_NS / 10;
    if (rl__loop_timer_add(cl->loop, next, hedge_timer_fn, cl, &cl->hedge_timer) != RL_OK) {
        cl->hedge_timer = 0;
        atomic_store(&cl->hedge_armed, 0); /* the next read arms it again */
    }
    return 0;
}

/* ---- Failures and retries (network thread) ---------------------------------------------------- */

static void retry_timer_fn(rl__loop *loop, void *ud) {
    (void)loop;
    creq *q = ud;
    q->where = W_NONE;
    q->timer_id = 0;
    if (q->after_timer == AFTER_REFRESH) want_map(q->cl, q);
    else send_attempt(q);
}

/* Continue q after delay_ns (then = AFTER_SEND or AFTER_REFRESH). */
static void retry_later(creq *q, uint64_t delay_ns, int then) {
    cluster *cl = q->cl;
    if (delay_ns == 0) {
        if (then == AFTER_REFRESH) want_map(cl, q);
        else send_attempt(q);
        return;
    }
    /* A little jitter so clients retrying together spread out; never past q's deadline
     * (invariant 8: the timer then finds it expired). */
    uint64_t jit = (delay_ns / 8) * (atomic_fetch_add(&cl->rr, 1) % 8) / 8, at = now_ns() + delay_ns + jit;
    if (q->op_deadline_ns && at > q->op_deadline_ns) at = q->op_deadline_ns;
    q->where = W_TIMER;
    q->after_timer = then;
    if (rl__loop_timer_add(cl->loop, at, retry_timer_fn, q, &q->timer_id) != RL_OK) {
        q->where = W_NONE;
        finish(q, RL_E_OUT_OF_MEMORY);
    }
}

/* A storage server was lost: refresh the map (at most every REFRESH_MIN_GAP_NS) so a member the
 * coordinator reports down is avoided by the retries. */
static void maybe_refresh(cluster *cl) {
    uint64_t now = now_ns();
    pthread_mutex_lock(&cl->mu);
    int go = now - cl->last_refresh_ns >= REFRESH_MIN_GAP_NS;
    pthread_mutex_unlock(&cl->mu);
    if (go) want_map(cl, NULL);
}

/* An attempt of q failed in transport (loop thread). */
static void fail_attempt(creq *q, int err) {
    cluster *cl = q->cl;
    note_failed(q, err);
    if (atomic_load(&cl->closing)) {
        finish(q, RL_E_OPERATION_CANCELLED);
        return;
    }
    uint64_t now = now_ns();
    if (past_deadline(q, now)) { /* invariant 8: the transaction's timeout ends it, whatever failed */
        rl__locked_add_u64(&cl->mu, &cl->n_deadlines, 1);
        finish(q, RL_E_TRANSACTION_TIMED_OUT);
        return;
    }
    if (!q->fail_since_ns) q->fail_since_ns = now;
    q->attempts++;
    rl__cretry d =
        rl__cluster_retry_decide(q->kind, err, 0, q->sent, q->fail_since_ns, now, q->attempts, q->wrong_shard);
    if (d.action == RL_CRETRY_FAIL) {
        if (d.err == RL_E_CONNECTION_FAILED)
            rl__log(RL_LOG_WARN, "cluster client: %s: no server reachable for %.1f s, giving up",
                    rl__msg_type_name(req_type(q)), (double)(now - q->fail_since_ns) / 1e9);
        finish(q, d.err);
        return;
    }
    /* A replicated read moves to another member at once (each member one immediate try). */
    int now_other = rl__cluster_failover_now(q->kind, err, 0, q->team_size, q->failover_tries + 1);
    q->failover_tries += now_other;
    pthread_mutex_lock(&cl->mu);
    cl->n_retries++;
    cl->n_failovers += (uint64_t)now_other;
    if (cl->report_ns) stall_note_locked(cl, q, req_type(q), err, now); /* invariant 9 */
    pthread_mutex_unlock(&cl->mu);
    q->salt++;
    if (q->kind == RL_CREQ_READ) maybe_refresh(cl);
    retry_later(q, now_other ? 0 : d.delay_ns, AFTER_SEND);
}

/* An error reply to q. */
static void error_reply(creq *q, int code) {
    cluster *cl = q->cl;
    if (code == RL_E_WRONG_SHARD_SERVER) q->wrong_shard++;
    if (rl__cluster_failover_now(q->kind, code, 1, q->team_size, q->failover_tries + 1)) {
        /* That member is behind (catching up?): another one of the team may not be. */
        q->failover_tries++;
        rl__locked_add_u64(&cl->mu, &cl->n_failovers, 1);
        q->salt++;
        send_attempt(q);
        return;
    }
    rl__cretry d = rl__cluster_retry_decide(q->kind, code, 1, q->sent, 0, 0, q->attempts, q->wrong_shard);
    if (d.action == RL_CRETRY_FAIL) {
        finish(q, d.err);
        return;
    }
    rl__locked_add_u64(&cl->mu, &cl->n_wrong_shard, 1);
    q->salt++;
    retry_later(q, d.delay_ns, AFTER_REFRESH);
}

/* ---- The location cache ------------------------------------------------------------------------ */

/* Ask for a fresh map; waiter (may be NULL) is sent again once it arrives (any thread). */
static void want_map(cluster *cl, creq *waiter_q) {
    pthread_mutex_lock(&cl->mu);
    if (waiter_q) {
        waiter_q->where = W_MAPWAIT;
        waiter_q->next = cl->map_waiters;
        cl->map_waiters = waiter_q;
    }
    int start = !cl->map_inflight && !atomic_load(&cl->closing);
    creq *mq = &cl->map_req;
    if (start) {
        cl->map_inflight = 1;
        cl->n_refreshes++;
        cl->last_refresh_ns = now_ns();
        atomic_store(&cl->map_fetch_ns, cl->last_refresh_ns);
        memset(mq, 0, sizeof *mq);
        mq->kind = RL_CREQ_MAP;
        mq->cl = cl;
    }
    pthread_mutex_unlock(&cl->mu);
    if (start) {
        atomic_fetch_add(&cl->outstanding, 1);
        ensure_tick(cl);
        send_attempt(mq);
    }
}

/* Continue the requests that waited for a map (linked by next; q->err: 0 to send again, else the
 * error to finish with). */
static void continue_waiters(creq *list) {
    for (creq *q = list, *nx; q; q = nx) {
        nx = q->next;
        q->next = NULL;
        q->where = W_NONE;
        if (q->err == RL_OK) send_attempt(q);
        else finish(q, q->err);
    }
}

static void continue_waiters_fn(rl__loop *loop, void *ud) {
    (void)loop;
    continue_waiters(ud);
}

/* The map fetch ended: install m (NULL on failure, err says why) and continue the waiters — on
 * the network thread: a fetch that fails on an application thread (memory) must not complete
 * other operations under that thread's transaction lock (invariant 3). */
static void map_done(cluster *cl, rl__locmap *m, int err) {
    pthread_mutex_lock(&cl->mu);
    rl__locmap *old = NULL;
    cconn **redelay = NULL;
    size_t n_redelay = 0;
    uint32_t d_us = 0, j_us = 0;
    uint64_t salt = 0;
    if (m) {
        old = cl->map;
        cl->map = m;
        /* A new injected delay goes onto every open connection to another host (an unchanged
         * one is left alone: re-setting it would restart the jitter sequence for nothing). The
         * connections are referenced here and set outside the lock (invariant 4). */
        if (m->delay_us != cl->delay_us || m->jitter_us != cl->jitter_us) {
            cl->delay_us = d_us = m->delay_us;
            cl->jitter_us = j_us = m->jitter_us;
            salt = cl->delay_salt;
            cl->delay_salt += cl->n_conns;
            redelay = cl->n_conns ? rl__malloc(cl->n_conns * sizeof *redelay) : NULL;
            for (size_t i = 0; redelay && i < cl->n_conns; i++) {
                atomic_fetch_add(&cl->conns[i]->refs, 1);
                redelay[n_redelay++] = cl->conns[i];
            }
        }
        int teams = 0;
        for (uint32_t i = 0; i < m->n_shards; i++) teams |= m->shards[i].n_team > 1;
        atomic_store(&cl->has_teams, teams);
    }
    creq *list = cl->map_waiters;
    cl->map_waiters = NULL;
    cl->map_inflight = 0;
    cl->map_gen++;
    cl->map_last_err = err;
    pthread_cond_broadcast(&cl->map_cv);
    pthread_mutex_unlock(&cl->mu);
    rl__locmap_unref(old);
    for (size_t i = 0; i < n_redelay; i++) {
        cconn *cc = redelay[i];
        pthread_mutex_lock(&cc->mu);
        rl__conn *conn = cc->state == C_OPEN ? cc->conn : NULL;
        pthread_mutex_unlock(&cc->mu);
        /* cc->delayed is the loop thread's; map replies are handled there. A connection still
         * connecting takes the new setting in on_connect. */
        if (conn && cc->delayed) (void)rl__netem_set(conn, d_us, j_us, salt + i);
        cconn_unref(cc);
    }
    rl__free(redelay);
    if (n_redelay)
        rl__log(RL_LOG_INFO, "cluster client: injected delay now %u us (jitter %u us) on its links", d_us, j_us);
    int fail = m ? RL_OK : err == RL_E_OPERATION_CANCELLED ? err : RL_E_CONNECTION_FAILED;
    for (creq *q = list; q; q = q->next) q->err = fail;
    if (list && !rl__loop_in_loop_thread(cl->loop) && rl__loop_post(cl->loop, continue_waiters_fn, list) == RL_OK)
        return;
    continue_waiters(list);
}

/* ---- Replies (network thread) ------------------------------------------------------------------ */

static void hello_reply(cconn *cc, rl__conn *conn, const rl__frame_header *h, const uint8_t *payload) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    if (h->type != RL_MSG_HELLO) {
        rl__log(RL_LOG_WARN, "cluster client: %s:%u answered HELLO with a %s frame", cc->ip, cc->port,
                rl__msg_type_name(h->type));
        rl__conn_close(conn, 0);
        return;
    }
    if (h->flags & RL_FRAME_ERROR) {
        rl__msg_error e;
        int rc = rl__msg_error_decode(payload, h->payload_len, NULL, &e, &why);
        rl__log(RL_LOG_WARN, "cluster client: %s:%u refused HELLO: %s", cc->ip, cc->port,
                rc ? rl__errdetail_get(&why) : rl_error_name(e.code));
        rl__conn_close(conn, 0);
        return;
    }
    rl__msg_hello_reply r;
    int rc = rl__msg_hello_reply_decode(payload, h->payload_len, NULL, &r, &why);
    if (rc == RL_OK && r.role != RL_ROLE_COORDINATOR && r.role != RL_ROLE_STORAGE) {
        rc = RL_E_MALFORMED_FRAME;
        rl__errdetail_set(&why, "HELLO reply: role %u is not a server", r.role);
    }
    if (rc) {
        rl__log(RL_LOG_WARN, "cluster client: bad HELLO reply from %s:%u: %s", cc->ip, cc->port,
                rl__errdetail_get(&why));
        rl__conn_close(conn, 0);
        return;
    }
    cc->hello_ok = 1;
}

/* ---- Streamed mapped reads (docs/protocol.md, "Streamed mapped reads") ------------------------ */

/* A MAPPED_CHUNK for the request id on cc (network thread): its entries are appended to the
 * attempt's (decoded into the read's arena as they come), and its bytes credited back at once —
 * or, when nobody wants the read any more (rl__kv_read.abandoned), the stream is cancelled (once;
 * the server answers operation_cancelled, which ends the attempt). A chunk for no pending request
 * (its attempt ended) is dropped; one for a request that is not a stream, or that does not
 * decode, closes the connection (its requests fail over). The attempt's deadline restarts with
 * every chunk. Entries that are certainly the read's first (rl__cplan_stream_prefix) go up
 * through r->progress at once; an attempt after a failover restarts from its first entry, and
 * its entries go up only past those already handed up (the same version gives the same rows; the
 * cursor checks the one it stood on). */
static void on_chunk(cconn *cc, rl__conn *conn, const rl__frame_header *h, const uint8_t *payload) {
    cluster *cl = cc->cl;
    uint64_t now = now_ns();
    pthread_mutex_lock(&cc->mu);
    creq *q = pt_find(&cc->pending, h->id);
    int ok = q && streamed(q) && !atomic_load(&q->hedged);
    if (ok) q->deadline_ns = now + attempt_timeout(q);
    pthread_mutex_unlock(&cc->mu);
    if (!q) {
        rl__locked_add_u64(&cl->mu, &cl->n_late_replies, 1);
        return;
    }
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__kv_read *r = q->r;
    rl__msg_mapped_chunk m;
    int rc = RL_E_MALFORMED_FRAME;
    const uint8_t *copy = NULL;
    if (!ok) {
        rl__errdetail_set(&why, "a MAPPED_CHUNK for a request that is not a stream");
    } else {
        uint8_t *own = rl__conn_take_payload(conn); /* read into its own buffer: kept, not copied */
        if (own) rl__arena_adopt(r->arena, own);
        copy = own ? own : h->payload_len ? rl__arena_memdup(r->arena, payload, h->payload_len) : NULL;
        rc = h->payload_len && !copy ? RL_E_OUT_OF_MEMORY
                                     : rl__msg_mapped_chunk_decode(copy, h->payload_len, r->arena, &m, &why);
    }
    if (rc == RL_OK && q->s_n + (uint64_t)m.n_entries > q->s_cap) {
        uint64_t cap = q->s_cap ? 2 * (uint64_t)q->s_cap : 64;
        while (cap < q->s_n + (uint64_t)m.n_entries) cap *= 2;
        rl_mapped_keyvalue *v = cap <= UINT32_MAX ? rl__arena_alloc(r->arena, cap * sizeof *v) : NULL;
        if (!v) rc = RL_E_OUT_OF_MEMORY;
        else {
            if (q->s_n) memcpy(v, q->s_ents, q->s_n * sizeof *v);
            q->s_ents = v;
            q->s_cap = (uint32_t)cap;
        }
    }
    if (rc != RL_OK) {
        rl__log(RL_LOG_WARN, "cluster client: bad MAPPED_CHUNK from %s:%u: %s; closing", cc->ip, cc->port,
                rc == RL_E_OUT_OF_MEMORY ? "out of memory" : rl__errdetail_get(&why));
        rl__conn_close(conn, 0); /* the close fails the attempt over (bad input, or no memory for it) */
        return;
    }
    memcpy(q->s_ents + q->s_n, m.entries, m.n_entries * sizeof *m.entries);
    q->s_n += m.n_entries;
    if (r->progress) { /* the read's first entries, final before its end: up to its user now */
        uint32_t fin = rl__cplan_stream_prefix(&q->plan, q->s_ents, q->s_pub, q->s_n);
        if (fin > q->s_pub) {
            q->s_pub = fin;
            r->progress(r, q->s_ents, (int)fin); /* a later attempt's are ignored until they outgrow these */
        }
    }
    uint32_t fb = (uint32_t)(RL_FRAME_HEADER_LEN + h->payload_len);
    q->s_bytes += fb;
    r->stats.bytes_received += fb;
    rl__msg_mapped_credit c = {h->payload_len, 0};
    if (!q->s_cancelled && r->abandoned && r->abandoned(r)) c.cancel = 1, q->s_cancelled = 1;
    else if (q->s_cancelled) return; /* cancelled: no more credit */
    uint8_t b[5] = {(uint8_t)c.bytes, (uint8_t)(c.bytes >> 8), (uint8_t)(c.bytes >> 16), (uint8_t)(c.bytes >> 24),
                    c.cancel};
    (void)rl__conn_send(conn, RL_MSG_MAPPED_CREDIT, 0, h->id, b, sizeof b); /* a failure closes it */
}

/* The final reply of a streamed mapped read: the chunks' entries go before its own, and the whole
 * is handed to the planner as the GET_MAPPED_RANGE reply it asked for. */
static int stream_final(creq *q, rl__msg *m) {
    rl__msg_get_mapped_range_reply g = m->u.get_mapped_stream_reply;
    if (q->s_n && !g.n_entries) {
        g.entries = q->s_ents;
        g.n_entries = q->s_n;
    } else if (q->s_n) {
        uint64_t n = (uint64_t)q->s_n + g.n_entries;
        rl_mapped_keyvalue *v = n <= UINT32_MAX ? rl__arena_alloc(q->r->arena, n * sizeof *v) : NULL;
        if (!v) return RL_E_OUT_OF_MEMORY;
        memcpy(v, q->s_ents, q->s_n * sizeof *v);
        if (g.n_entries) memcpy(v + q->s_n, g.entries, g.n_entries * sizeof *v);
        g.entries = v;
        g.n_entries = (uint32_t)n;
    }
    m->type = RL_MSG_GET_MAPPED_RANGE;
    m->u.get_mapped_range_reply = g;
    return RL_OK;
}

/* The index read alone (the file header): the rows of its GET_RANGE reply in m become the entries
 * of the GET_MAPPED_RANGE reply the server would have sent, every one unread. */
static int index_rows_as_entries(creq *q, rl__msg *m) {
    rl__msg_get_range_reply g = m->u.get_range_reply;
    rl__msg_get_mapped_range_reply x;
    memset(&x, 0, sizeof x);
    rl_mapped_keyvalue *v = g.n_kvs ? rl__arena_alloc(q->r->arena, (size_t)g.n_kvs * sizeof *v) : NULL;
    if (g.n_kvs && !v) return RL_E_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < g.n_kvs; i++) {
        int rc = rl__mapped_entry_unread(q->sec_mapper, &g.kvs[i], q->r->arena, &v[i]);
        if (rc != RL_OK) return rc; /* as the server fails the whole read */
    }
    x.entries = v;
    x.n_entries = g.n_kvs;
    x.more = g.more;
    x.status = g.status;
    x.read_through = g.read_through, x.read_through_len = g.read_through_len;
    x.resolved_begin = g.resolved_begin, x.resolved_begin_len = g.resolved_begin_len;
    x.resolved_end = g.resolved_end, x.resolved_end_len = g.resolved_end_len;
    m->type = RL_MSG_GET_MAPPED_RANGE;
    m->u.get_mapped_range_reply = x;
    return RL_OK;
}

/* A successful reply to q (type checked). Returns RL_OK or an error (>= 0): finish q with it
 * (RL_E_MALFORMED_FRAME: also close the connection); -1: q continues with its next request. */
static int take_reply(creq *q, const rl__frame_header *h, const uint8_t *payload) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__msg m;
    int rc;
    switch (q->kind) {
    case RL_CREQ_READ: {
        rl__kv_read *r = q->r;
        /* Decode a copy held in the read's arena: result rows point into it (plan.h inv. 3). */
        const uint8_t *copy = h->payload_len ? rl__arena_memdup(r->arena, payload, h->payload_len) : NULL;
        if (h->payload_len && !copy) {
            note_reply(q, q->conn, h, RL_E_OUT_OF_MEMORY, NULL);
            return RL_E_OUT_OF_MEMORY;
        }
        rc = rl__msg_decode(h->type, h->flags, copy, h->payload_len, r->arena, &m, &why); /* GET: by hand */
        note_reply(q, q->conn, h, rc ? RL_E_MALFORMED_FRAME : 0,
                   rc == RL_OK && h->type == RL_MSG_GET_MAPPED_RANGE    ? &m.u.get_mapped_range_reply.stats
                   : rc == RL_OK && h->type == RL_MSG_GET_MAPPED_STREAM ? &m.u.get_mapped_stream_reply.stats
                                                                        : NULL);
        if (rc) goto bad;
        if (h->type == RL_MSG_GET_MAPPED_STREAM && (rc = stream_final(q, &m)) != RL_OK) return rc;
        if (q->index_only && (rc = index_rows_as_entries(q, &m)) != RL_OK) return rc;
        q->fail_since_ns = 0, q->attempts = 0, q->wrong_shard = 0, q->failover_tries = 0, q->step_ns = 0;
        stall_clear(q->cl, q); /* it got its reply: no longer waiting (invariant 9) */
        int more_to_send = 0;
        rc = rl__cplan_reply(&q->plan, &m, &more_to_send);
        if (rc == RL_E_MALFORMED_FRAME) {
            rl__errdetail_set(&why, "%s reply breaks the read's rules (order, bounds or progress)",
                              rl__msg_type_name(h->type));
            goto bad;
        }
        if (rc) return rc;
        if (more_to_send) {
            send_attempt(q);
            return -1; /* continues */
        }
        return RL_OK;
    }
    case RL_CREQ_GRV:
        rc = rl__msg_get_read_version_reply_decode(payload, h->payload_len, NULL, &m.u.get_read_version_reply, &why);
        note_reply(q, q->conn, h, rc ? RL_E_MALFORMED_FRAME : 0, NULL);
        if (rc) goto bad;
        if (q->g) q->g->version = m.u.get_read_version_reply.version;
        else q->w->version = m.u.get_read_version_reply.version; /* status_json's own */
        return RL_OK;
    case RL_CREQ_COMMIT:
        rc = rl__msg_commit_reply_decode(payload, h->payload_len, NULL, &m.u.commit_reply, &why);
        if (rc) goto bad;
        if (m.u.commit_reply.result == RL_OK) {
            q->c->commit_version = m.u.commit_reply.commit_version;
            q->c->batch_order = m.u.commit_reply.batch_order;
        }
        return m.u.commit_reply.result;
    case RL_CREQ_MAP: {
        rl_arena a;
        rl__arena_init(&a, 4096);
        rc = rl__msg_get_shard_map_reply_decode(payload, h->payload_len, &a, &m.u.get_shard_map_reply, &why);
        if (rc) {
            rl__arena_release(&a);
            goto bad;
        }
        rc = rl__locmap_new(&m.u.get_shard_map_reply, &q->newmap, &why);
        if (rc == RL_OK) {
            q->newmap->delay_us = m.u.get_shard_map_reply.delay_us;
            q->newmap->jitter_us = m.u.get_shard_map_reply.jitter_us;
        }
        if (rc)
            rl__log(RL_LOG_WARN, "cluster client: unusable shard map from the coordinator: %s",
                    rl__errdetail_get(&why));
        rl__arena_release(&a);
        return rc;
    }
    case RL_CREQ_STATUS:
        rc = rl__msg_status_reply_decode(payload, h->payload_len, NULL, &m.u.status_reply, &why);
        if (rc) goto bad;
        rl__buf_append(&q->w->out, m.u.status_reply.json, m.u.status_reply.json_len);
        return RL_OK;
    default:
        rc = rl__msg_ping_reply_decode(payload, h->payload_len, NULL, &m.u.ping_reply, &why);
        if (rc) goto bad;
        return RL_OK;
    }
bad:
    rl__log(RL_LOG_WARN, "cluster client: bad reply from %s:%u: %s", q->conn ? q->conn->ip : "?",
            q->conn ? q->conn->port : 0, rl__errdetail_get(&why));
    return RL_E_MALFORMED_FRAME;
}

static void on_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    cconn *cc = ud;
    cluster *cl = cc->cl;
    if (h->type == RL_MSG_MAPPED_CHUNK && h->flags == 0) { /* a streamed mapped read's entries */
        on_chunk(cc, conn, h, payload);
        return;
    }
    if (!(h->flags & RL_FRAME_REPLY)) { /* servers never send clients requests */
        rl__log(RL_LOG_WARN, "cluster client: %s:%u sent a %s request; closing", cc->ip, cc->port,
                rl__msg_type_name(h->type));
        rl__conn_close(conn, 0);
        return;
    }
    if (h->id == cc->hello_id) {
        hello_reply(cc, conn, h, payload);
        return;
    }
    pthread_mutex_lock(&cc->mu);
    creq *q = pt_take(&cc->pending, h->id);
    int hedged = q && atomic_load(&q->hedged) == 1;
    if (q && q->kind == RL_CREQ_READ && hedgeable_type(q->plan.req.type) && h->type == req_type(q) &&
        !(h->flags & RL_FRAME_ERROR)) { /* the server's round trip, for the hedge threshold */
        uint64_t sent = hedged && h->id == q->hid && cc == q->hconn ? q->hsent_ns : q->sent_ns;
        cc->rtt[cc->rtt_pos] = now_ns() - sent;
        cc->rtt_pos = (cc->rtt_pos + 1) % RL_CLUSTER_HEDGE_SAMPLES;
        if (cc->n_rtt < RL_CLUSTER_HEDGE_SAMPLES) cc->n_rtt++;
    }
    if (q && !hedged) q->where = W_NONE;
    pthread_mutex_unlock(&cc->mu);
    if (hedged) { /* the first good reply wins; a failed attempt leaves q to the other one */
        int ok = h->type == req_type(q) && !(h->flags & RL_FRAME_ERROR);
        if (attempt_ended(q, cc, h->id, ok)) {
            if (h->type != req_type(q)) rl__conn_close(conn, 0);
            return;
        }
        q->where = W_NONE;
    }
    if (!q) { /* its attempt timed out (or the id is junk): nothing waits for it */
        rl__locked_add_u64(&cl->mu, &cl->n_late_replies, 1);
        return;
    }
    if (h->type != req_type(q)) {
        rl__log(RL_LOG_WARN, "cluster client: %s:%u answered a %s request with a %s reply; closing", cc->ip, cc->port,
                rl__msg_type_name(req_type(q)), rl__msg_type_name(h->type));
        rl__conn_close(conn, 0);
        snprintf(q->why, sizeof q->why, "a %s reply to it", rl__msg_type_name(h->type));
        fail_attempt(q, RL_E_CONNECTION_FAILED);
        return;
    }
    if (h->flags & RL_FRAME_ERROR) {
        rl__msg_error e;
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        if (rl__msg_error_decode(payload, h->payload_len, NULL, &e, &why) != RL_OK) {
            rl__log(RL_LOG_WARN, "cluster client: bad error reply from %s:%u: %s; closing", cc->ip, cc->port,
                    rl__errdetail_get(&why));
            rl__conn_close(conn, 0);
            finish(q, RL_E_MALFORMED_FRAME);
            return;
        }
        note_reply(q, cc, h, e.code, NULL);
        rl__log(RL_LOG_DEBUG, "cluster client: %s error reply from %s:%u: %s (%.*s)", rl__msg_type_name(h->type),
                cc->ip, cc->port, rl_error_name(e.code), (int)(e.message_len > 300 ? 300 : e.message_len),
                e.message ? (const char *)e.message : "");
        error_reply(q, e.code);
        return;
    }
    int rc = take_reply(q, h, payload);
    if (rc == RL_E_MALFORMED_FRAME) rl__conn_close(conn, 0); /* bad input closes the connection */
    if (rc >= 0) finish(q, rc);
}

/* ---- Finishing (invariant 2) ------------------------------------------------------------------- */

static void internal_unlink(cluster *cl, creq *q) {
    pthread_mutex_lock(&cl->mu);
    if (q->iprev) q->iprev->inext = q->inext;
    else if (cl->internal == q) cl->internal = q->inext;
    if (q->inext) q->inext->iprev = q->iprev;
    q->inext = q->iprev = NULL;
    pthread_mutex_unlock(&cl->mu);
}

static void finish(creq *q, int err) {
    cluster *cl = q->cl;
    stall_clear(cl, q);
    switch (q->kind) {
    case RL_CREQ_READ: {
        rl__kv_read *r = q->r;
        /* The last operation done: no read waits for a hedge (network thread). */
        if (atomic_fetch_sub(&cl->outstanding, 1) == 1 && atomic_load(&cl->hedge_armed) &&
            rl__loop_in_loop_thread(cl->loop))
            hedge_disarm(cl);
        r->done(r, err); /* q lives in r->arena: not touched after this */
        return;
    }
    case RL_CREQ_GRV: {
        if (q->w) goto internal;
        rl__kv_grv *g = q->g;
        rl__free(q);
        atomic_fetch_sub(&cl->outstanding, 1);
        g->done(g, err);
        return;
    }
    case RL_CREQ_COMMIT: {
        rl__kv_commit *c = q->c;
        pl_unref(q->pl);
        rl__free(q);
        atomic_fetch_sub(&cl->outstanding, 1);
        c->done(c, err);
        return;
    }
    case RL_CREQ_MAP: {
        rl__locmap *m = err == RL_OK ? q->newmap : NULL;
        if (err) rl__locmap_unref(q->newmap);
        q->newmap = NULL;
        atomic_fetch_sub(&cl->outstanding, 1);
        if (err && err != RL_E_OPERATION_CANCELLED)
            rl__log(RL_LOG_WARN, "cluster client: cannot fetch the shard map from %s:%u: %s", cl->cf.ip, cl->cf.port,
                    rl_error_name(err));
        map_done(cl, m, err);
        return;
    }
    default: { /* STATUS, PING, status_json's GRV */
    internal:;
        waiter *w = q->w;
        internal_unlink(cl, q);
        rl__free(q);
        atomic_fetch_sub(&cl->outstanding, 1);
        waiter_complete(w, err);
        waiter_unref(w);
        return;
    }
    }
}

/* ---- Watches ------------------------------------------------------------------------------------ *
 *
 * A watch is a loop of WATCH_VALUE long polls (docs/design.md §8.5, "Watches"), each an ordinary
 * read of this client (planned like a GET: routed by the key through the location cache, retried
 * on a lost connection, sent to the new owner after wrong_shard_server) with a deadline of its
 * own. An unchanged reply moves the watch's version to what the server looked through and polls
 * again; a changed one fires it. A failed poll (a server down longer than the retry window, a
 * deadline, a version not known yet) polls again after a backoff, with the value the watch
 * compares with and the version it last knew, so a restarted or new owner checks every version
 * since (its window permitting): no change is missed across a shard move, a failover or a
 * restart. A cancel detaches the watch (its done runs at once); the poll in flight ends by
 * itself and frees it. */

#define WATCH_HOLD_MS 2000                 /* a poll's hold time at the server */
#define WATCH_POLL_SLACK_NS 5000000000ull  /* a poll's deadline: the hold time and this */
#define WATCH_BACKOFF_MIN_NS 20000000ull   /* after a failed poll, doubling ... */
#define WATCH_BACKOFF_MAX_NS 1000000000ull /* ... up to this */

typedef struct cwatch {
    cluster *cl;
    rl__kv_watch *w; /* under wmu; NULL once detached (cancelled or done) */
    rl_arena arena;  /* the poll's (reset before each) */
    rl__kv_read r;
    uint8_t *key, *value; /* copies (a detached watch's poll still reads them) */
    uint32_t key_len, value_len;
    int present;
    rl__version version;
    uint64_t backoff_ns;
    struct cwatch *prev, *next; /* cl->watches */
} cwatch;

static void watch_poll(cwatch *x);

/* Free x (unlinked, nothing pending). */
static void cwatch_free(cwatch *x) {
    rl__arena_release(&x->arena);
    rl__free(x->key);
    rl__free(x->value);
    rl__free(x);
}

/* Take x off cl->watches and detach its watch (wmu held). */
static void watch_unlink(cluster *cl, cwatch *x) {
    x->w = NULL;
    if (x->prev) x->prev->next = x->next;
    else cl->watches = x->next;
    if (x->next) x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

/* One poll or backoff of x is over (wmu held): 1 if x goes on, 0 if it was detached or the
 * client is closing (x is then unlinked; the caller frees it and completes *out_w with
 * operation_cancelled when not NULL). */
static int watch_step_end(cluster *cl, cwatch *x, rl__kv_watch **out_w) {
    *out_w = NULL;
    cl->polls--;
    pthread_cond_broadcast(&cl->wcv);
    if (x->w && !atomic_load(&cl->closing)) return 1;
    *out_w = x->w;
    watch_unlink(cl, x);
    return 0;
}

static void watch_retry(void *ud) {
    cwatch *x = ud;
    cluster *cl = x->cl;
    rl__kv_watch *w;
    pthread_mutex_lock(&cl->wmu);
    int go = watch_step_end(cl, x, &w);
    pthread_mutex_unlock(&cl->wmu);
    if (go) {
        watch_poll(x);
        return;
    }
    cwatch_free(x);
    if (w) w->done(w, RL_E_OPERATION_CANCELLED);
}

static void watch_polled(rl__kv_read *r, int err) {
    cwatch *x = r->ud;
    cluster *cl = x->cl;
    rl__kv_watch *w;
    pthread_mutex_lock(&cl->wmu);
    int go = watch_step_end(cl, x, &w);
    /* A change fires the watch; what no retry mends fails it; anything else polls again. */
    int fired = go && err == RL_OK && r->watch_changed;
    int fatal = go && (err == RL_E_OUT_OF_MEMORY || err == RL_E_MALFORMED_FRAME || err == RL_E_UNSUPPORTED_OPERATION ||
                       err == RL_E_PROTOCOL_UNEXPECTED_MESSAGE);
    if (fired || fatal) {
        w = x->w;
        watch_unlink(cl, x);
        go = 0;
    }
    if (go && err == RL_OK) {
        if (r->watch_version > x->version) x->version = r->watch_version;
        x->backoff_ns = 0;
        cl->polls++;
    } else if (go) {
        x->backoff_ns = x->backoff_ns ? x->backoff_ns * 2 : WATCH_BACKOFF_MIN_NS;
        if (x->backoff_ns > WATCH_BACKOFF_MAX_NS) x->backoff_ns = WATCH_BACKOFF_MAX_NS;
        cl->polls++;
    }
    pthread_mutex_unlock(&cl->wmu);
    if (go && err == RL_OK) {
        watch_poll(x);
        return;
    }
    if (go) {
        rl__log(RL_LOG_DEBUG, "cluster client: a watch poll failed (%s); again in %llu ms", rl_error_name(err),
                (unsigned long long)(x->backoff_ns / 1000000u));
        if (rl__kv_timer_add(now_ns() + x->backoff_ns, watch_retry, x) != RL_OK) watch_retry(x);
        return;
    }
    cwatch_free(x);
    if (w) w->done(w, fired ? RL_OK : fatal ? err : RL_E_OPERATION_CANCELLED);
}

/* Send x's next poll (counted in cl->polls by the caller). */
static void watch_poll(cwatch *x) {
    rl__arena_reset(&x->arena);
    rl__kv_read *r = &x->r;
    memset(r, 0, sizeof *r);
    r->op = RL_CPLAN_WATCH;
    r->version = x->version;
    r->key = x->key;
    r->key_len = x->key_len;
    r->watch_present = x->present;
    r->watch_value = x->value;
    r->watch_value_len = x->value_len;
    r->watch_hold_ms = WATCH_HOLD_MS;
    r->arena = &x->arena;
    r->done = watch_polled;
    r->ud = x;
    r->deadline_ns = now_ns() + (uint64_t)WATCH_HOLD_MS * 1000000u + WATCH_POLL_SLACK_NS;
    x->cl->base.vt->read(&x->cl->base, r);
}

static void cl_watch(rl__kv_backend *b, rl__kv_watch *w) {
    cluster *cl = (cluster *)b;
    if (w->key_len && w->key[0] == 0xff) { /* the coordinator serves the system keys, not watches */
        w->done(w, RL_E_UNSUPPORTED_OPERATION);
        return;
    }
    cwatch *x = rl__calloc(1, sizeof *x);
    if (x) {
        x->key = rl__malloc(w->key_len ? w->key_len : 1);
        x->value = rl__malloc(w->value_len ? w->value_len : 1);
    }
    if (!x || !x->key || !x->value) {
        if (x) cwatch_free(x);
        w->done(w, RL_E_OUT_OF_MEMORY);
        return;
    }
    rl__arena_init(&x->arena, 512);
    if (w->key_len) memcpy(x->key, w->key, w->key_len);
    if (w->value_len) memcpy(x->value, w->value, w->value_len);
    x->cl = cl;
    x->w = w;
    x->key_len = w->key_len;
    x->present = w->present;
    x->value_len = w->present ? w->value_len : 0;
    x->version = w->version;
    pthread_mutex_lock(&cl->wmu);
    x->next = cl->watches;
    if (x->next) x->next->prev = x;
    cl->watches = x;
    cl->polls++;
    pthread_mutex_unlock(&cl->wmu);
    watch_poll(x);
}

static void cl_watch_cancel(rl__kv_backend *b, rl__kv_watch *w) {
    cluster *cl = (cluster *)b;
    pthread_mutex_lock(&cl->wmu);
    cwatch *x = cl->watches;
    while (x && x->w != w) x = x->next;
    if (x) x->w = NULL; /* detached: its poll in flight ends it */
    pthread_mutex_unlock(&cl->wmu);
    if (x) w->done(w, RL_E_OPERATION_CANCELLED);
}

/* Close: end the polls in flight by closing the storage servers' connections (the lost-connection
 * path: with `closing` set, a request whose connection closes finishes with operation_cancelled,
 * instead of waiting out its hold time), then wait (bounded) for them and the backoffs; the
 * watches still attached are completed with operation_cancelled as their polls end. */
static void watches_close(cluster *cl) {
    pthread_mutex_lock(&cl->wmu);
    int polls = cl->polls;
    pthread_mutex_unlock(&cl->wmu);
    if (polls) {
        pthread_mutex_lock(&cl->mu);
        for (size_t i = 0; i < cl->n_conns; i++) {
            cconn *cc = cl->conns[i];
            if (cc->server_id == 0) continue; /* the coordinator: no watch is polled there */
            pthread_mutex_lock(&cc->mu);
            if (cc->state == C_OPEN && cc->conn) rl__conn_close(cc->conn, 0);
            pthread_mutex_unlock(&cc->mu);
        }
        pthread_mutex_unlock(&cl->mu);
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += WATCH_HOLD_MS / 1000 + 12;
    pthread_mutex_lock(&cl->wmu);
    int wr = 0;
    while (cl->polls > 0 && wr == 0) wr = pthread_cond_timedwait(&cl->wcv, &cl->wmu, &ts);
    int left = cl->polls;
    pthread_mutex_unlock(&cl->wmu);
    if (left) rl__log(RL_LOG_WARN, "cluster client: closing with %d watch polls unanswered", left);
}

/* ---- The vtable -------------------------------------------------------------------------------- */

static void cl_read(rl__kv_backend *b, rl__kv_read *r) {
    cluster *cl = (cluster *)b;
    creq *q = rl__arena_alloc(r->arena, sizeof *q);
    if (!q) {
        r->done(r, RL_E_OUT_OF_MEMORY);
        return;
    }
    memset(q, 0, offsetof(creq, plan)); /* rl__cplan_start sets up the plan, the last member */
    q->kind = RL_CREQ_READ;
    q->cl = cl;
    q->r = r;
    q->op_deadline_ns = r->deadline_ns;
    q->op_began_ns = r->began_ns;
    q->salt = atomic_fetch_add(&cl->rr, 1);
    int send = 0;
    int rc = rl__cplan_start(&q->plan, r, &cl->popt, &send);
    if (rc || !send) {
        r->done(r, rc);
        return;
    }
    atomic_fetch_add(&cl->outstanding, 1);
    ensure_tick(cl);
    send_attempt(q);
}

/* Size estimates (docs/design.md §4, "Size estimates"): run as a read of the planner's
 * RL__CPLAN_METRICS (plan.h), so they get the read path's routing, retries, map refreshes after
 * wrong_shard_server, deadlines and counters. The read block lives in the request's arena. */
static void metrics_read_done(rl__kv_read *r, int err) {
    rl__kv_metrics *m = r->ud;
    m->done(m, err);
}

static void cl_metrics(rl__kv_backend *b, rl__kv_metrics *m) {
    rl__kv_read *r = rl__arena_alloc(m->arena, sizeof *r);
    if (!r) {
        m->done(m, RL_E_OUT_OF_MEMORY);
        return;
    }
    memset(r, 0, sizeof *r);
    r->op = RL__CPLAN_METRICS;
    r->arena = m->arena;
    r->done = metrics_read_done;
    r->ud = m;
    r->deadline_ns = m->deadline_ns;
    cl_read(b, r);
}

static void cl_get_read_version(rl__kv_backend *b, rl__kv_grv *g) {
    cluster *cl = (cluster *)b;
    creq *q = rl__calloc(1, sizeof *q);
    if (!q) {
        g->done(g, RL_E_OUT_OF_MEMORY);
        return;
    }
    q->kind = RL_CREQ_GRV;
    q->cl = cl;
    q->g = g;
    q->op_deadline_ns = g->deadline_ns;
    q->op_began_ns = g->began_ns;
    atomic_fetch_add(&cl->outstanding, 1);
    ensure_tick(cl);
    send_attempt(q);
}

static void cl_commit(rl__kv_backend *b, rl__kv_commit *c) {
    cluster *cl = (cluster *)b;
    if (cl->read_only && (c->n_muts || c->n_writes)) {
        c->done(c, RL_E_READ_ONLY_DATABASE);
        return;
    }
    if (c->n_reads > UINT32_MAX || c->n_writes > UINT32_MAX || c->n_muts > UINT32_MAX) {
        c->done(c, RL_E_TRANSACTION_TOO_LARGE);
        return;
    }
    creq *q = rl__calloc(1, sizeof *q);
    if (!q) {
        c->done(c, RL_E_OUT_OF_MEMORY);
        return;
    }
    q->kind = RL_CREQ_COMMIT;
    q->cl = cl;
    q->c = c;
    q->op_deadline_ns = c->deadline_ns;
    q->op_began_ns = c->began_ns;
    q->pl = rl__malloc(sizeof *q->pl);
    if (!q->pl) {
        rl__free(q);
        c->done(c, RL_E_OUT_OF_MEMORY);
        return;
    }
    atomic_init(&q->pl->refs, 1);
    rl__buf_init(&q->pl->b);
    /* Encode now: the inputs are borrowed only during this call (backend.h). */
    rl__msg_commit_req m;
    m.read_version = c->read_version;
    m.reads = c->reads;
    m.n_reads = (uint32_t)c->n_reads;
    m.writes = c->writes;
    m.n_writes = (uint32_t)c->n_writes;
    m.muts = c->muts;
    m.n_muts = (uint32_t)c->n_muts;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_commit_req_encode(&q->pl->b, &m, &why);
    if (rc) {
        if (rc == RL_E_INVALID_ARGUMENT)
            rl__log(RL_LOG_WARN, "cluster client: commit refused: %s", rl__errdetail_get(&why));
        pl_unref(q->pl);
        rl__free(q);
        c->done(c, rc);
        return;
    }
    atomic_fetch_add(&cl->outstanding, 1);
    ensure_tick(cl);
    send_attempt(q);
}

/* Start an internal request (kind GRV, STATUS or PING to server, 0: the coordinator) whose
 * outcome goes to a waiter. Returns the waiter (two references: drop the caller's with
 * waiter_unref after waiter_wait), or NULL on OOM. [not the network thread] */
static waiter *internal_start(cluster *cl, int kind, uint32_t server) {
    waiter *w = waiter_new();
    creq *q = w ? rl__calloc(1, sizeof *q) : NULL;
    if (!q) {
        if (w) {
            waiter_unref(w);
            waiter_unref(w);
        }
        return NULL;
    }
    q->kind = kind;
    q->cl = cl;
    q->w = w;
    q->ping_server = server;
    pthread_mutex_lock(&cl->mu);
    q->inext = cl->internal;
    if (cl->internal) cl->internal->iprev = q;
    cl->internal = q;
    pthread_mutex_unlock(&cl->mu);
    atomic_fetch_add(&cl->outstanding, 1);
    ensure_tick(cl);
    send_attempt(q);
    return w;
}

/* Start and wait (timeout_ms). *out_w: the waiter, for its results (waiter_unref it; NULL on
 * OOM). */
static int run_internal(cluster *cl, int kind, uint32_t server, int timeout_ms, waiter **out_w) {
    waiter *w = internal_start(cl, kind, server);
    *out_w = w;
    return w ? waiter_wait(w, timeout_ms) : RL_E_OUT_OF_MEMORY;
}

/* The client's own view: connections, the location cache, counters. */
static void client_view(cluster *cl, rl_buf *out) {
    pthread_mutex_lock(&cl->mu);
    rl__buf_printf(out,
                   "\"client\": {\"outstanding\": %ld, \"requests_retried\": %llu, "
                   "\"wrong_shard_retries\": %llu, \"timeouts\": %llu, \"connects\": %llu, "
                   "\"lost_connections\": %llu, \"map_refreshes\": %llu, \"late_replies\": %llu, "
                   "\"failovers\": %llu, \"hedges\": %llu, \"hedge_wins\": %llu, \"transaction_timeouts\": %llu, "
                   "\"connections\": [",
                   (long)atomic_load(&cl->outstanding), (unsigned long long)cl->n_retries,
                   (unsigned long long)cl->n_wrong_shard, (unsigned long long)cl->n_timeouts,
                   (unsigned long long)cl->n_connects, (unsigned long long)cl->n_lost_connections,
                   (unsigned long long)cl->n_refreshes, (unsigned long long)cl->n_late_replies,
                   (unsigned long long)cl->n_failovers, (unsigned long long)cl->n_hedges,
                   (unsigned long long)cl->n_hedge_wins, (unsigned long long)cl->n_deadlines);
    for (size_t i = 0; i < cl->n_conns; i++) {
        cconn *cc = cl->conns[i];
        pthread_mutex_lock(&cc->mu);
        int st = cc->state;
        uint32_t pend = cc->pending.n;
        rl__conn *conn = cc->conn; /* valid while cc is in the table (cl->mu held) */
        pthread_mutex_unlock(&cc->mu);
        rl__conn_stats s;
        memset(&s, 0, sizeof s);
        if (conn) rl__conn_get_stats(conn, &s); /* invariant 4: not under conn->mu */
        rl__buf_printf(out,
                       "%s{\"address\": \"%s\", \"port\": %u, \"server_id\": %u, \"state\": \"%s\", "
                       "\"pending\": %u, \"frames_sent\": %llu, \"bytes_sent\": %llu, "
                       "\"frames_received\": %llu, \"bytes_received\": %llu, \"delay_us\": %u, "
                       "\"jitter_us\": %u, \"delayed_frames\": %llu, \"late_p50_ns\": %llu, "
                       "\"late_p99_ns\": %llu, \"late_max_ns\": %llu}",
                       i ? ", " : "", cc->ip, cc->port, cc->server_id,
                       st == C_OPEN         ? "open"
                       : st == C_CONNECTING ? "connecting"
                                            : "closed",
                       pend, (unsigned long long)s.frames_sent, (unsigned long long)s.bytes_sent,
                       (unsigned long long)s.frames_received, (unsigned long long)s.bytes_received, s.delay_us,
                       s.jitter_us, (unsigned long long)s.delayed_frames, (unsigned long long)s.late_p50_ns,
                       (unsigned long long)s.late_p99_ns, (unsigned long long)s.late_max_ns);
    }
    rl__buf_printf(out, "], \"location_cache\": ");
    rl__locmap *m = cl->map;
    if (!m) {
        rl__buf_printf(out, "null}");
    } else {
        rl__buf_printf(out, "{\"version\": %llu, \"servers\": [", (unsigned long long)m->version);
        for (uint32_t i = 0; i < m->n_servers; i++) {
            const rl__loc_server *s = &m->servers[i];
            rl__buf_printf(
                out, "%s{\"id\": %u, \"role\": \"%s\", \"address\": \"%s\", \"port\": %u, \"host\": ", i ? ", " : "",
                s->id, s->role == RL_ROLE_COORDINATOR ? "coordinator" : "storage", s->address, s->port);
            rl__buf_append_json_str(out, s->host, strlen(s->host));
            rl__buf_printf(out, ", \"healthy\": %s}", s->healthy ? "true" : "false");
        }
        rl__buf_printf(out, "], \"shards\": [");
        for (uint32_t i = 0; i < m->n_shards; i++) {
            const rl__loc_shard *s = &m->shards[i];
            rl__buf_printf(out, "%s{\"begin\": \"", i ? ", " : "");
            rl__buf_append_hex(out, s->begin, s->begin_len);
            rl__buf_printf(out, "\", \"end\": \"");
            rl__buf_append_hex(out, s->end, s->end_len);
            rl__buf_printf(out, "\", \"team\": [");
            for (uint32_t j = 0; j < s->n_team; j++) rl__buf_printf(out, "%s%u", j ? ", " : "", s->team_id[j]);
            rl__buf_printf(out, "]}");
        }
        rl__buf_printf(out, "]}}");
    }
    pthread_mutex_unlock(&cl->mu);
}

/* The "keys" member of a storage server's STATUS JSON (-1 if absent or unparsable). */
static long long json_keys(const rl_buf *js) {
    json_error_t e;
    json_t *j = json_loadb((const char *)js->data, js->len, 0, &e);
    long long k = -1;
    if (j && json_is_integer(json_object_get(j, "keys"))) k = json_integer_value(json_object_get(j, "keys"));
    json_decref(j);
    return k;
}

/* {"backend": "cluster", "cluster_file": ..., "coordinator": "IP:PORT", "read_only": ...,
 *  "read_version": N, "keys": N (key copies held by the storage servers, summed: a key of a team
 *  of R counts R times), "client": {...the client's view...}, "cluster": <the coordinator's
 *  STATUS JSON> or null, "storage": [<each storage server's STATUS JSON or null>],
 *  "errors": {...what could not be had...}}. The requests go out at once and are waited for up
 * to RL_CLUSTER_STATUS_TIMEOUT_MS together. On the network thread (a done callback) only the
 * client's view can be given: the rest is null. */
static int cl_status_json(rl__kv_backend *b, rl_buf *out) {
    cluster *cl = (cluster *)b;
    int on_loop = rl__loop_in_loop_thread(cl->loop);
    /* The storage servers of the current map. */
    uint32_t ids[64];
    int n_ids = 0;
    pthread_mutex_lock(&cl->mu);
    for (uint32_t i = 0; cl->map && i < cl->map->n_servers && n_ids < 64; i++)
        if (cl->map->servers[i].role == RL_ROLE_STORAGE) ids[n_ids++] = cl->map->servers[i].id;
    pthread_mutex_unlock(&cl->mu);
    waiter *wg = NULL, *wc = NULL, *ws[64] = {0};
    if (!on_loop) {
        wg = internal_start(cl, RL_CREQ_GRV, 0);
        wc = internal_start(cl, RL_CREQ_STATUS, 0);
        for (int i = 0; i < n_ids; i++) ws[i] = internal_start(cl, RL_CREQ_STATUS, ids[i]);
    }
    uint64_t deadline = now_ns() + (uint64_t)RL_CLUSTER_STATUS_TIMEOUT_MS * 1000000ull;
#define WAIT_LEFT_MS() ((int)(now_ns() >= deadline ? 0 : (deadline - now_ns()) / 1000000ull + 1))
    int rg = wg ? waiter_wait(wg, WAIT_LEFT_MS()) : RL_E_CLIENT_INVALID_OPERATION;
    int rcs = wc ? waiter_wait(wc, WAIT_LEFT_MS()) : RL_E_CLIENT_INVALID_OPERATION;
    int rs[64];
    for (int i = 0; i < n_ids; i++) rs[i] = ws[i] ? waiter_wait(ws[i], WAIT_LEFT_MS()) : RL_E_CLIENT_INVALID_OPERATION;
#undef WAIT_LEFT_MS
    rl__buf_printf(out, "{\"backend\": \"cluster\", \"cluster_file\": ");
    rl__buf_append_json_str(out, cl->path, strlen(cl->path));
    rl__buf_printf(out, ", \"coordinator\": \"%s:%u\", \"read_only\": %s, ", cl->cf.ip, cl->cf.port,
                   cl->read_only ? "true" : "false");
    if (rg == RL_OK) rl__buf_printf(out, "\"read_version\": %llu, ", (unsigned long long)wg->version);
    else rl__buf_printf(out, "\"read_version\": null, ");
    long long keys = 0;
    int keys_known = n_ids > 0;
    for (int i = 0; i < n_ids; i++) {
        long long k = rs[i] == RL_OK ? json_keys(&ws[i]->out) : -1;
        if (k < 0) keys_known = 0;
        else keys += k;
    }
    if (keys_known) rl__buf_printf(out, "\"keys\": %lld, ", keys);
    else rl__buf_printf(out, "\"keys\": null, ");
    client_view(cl, out);
    rl__buf_printf(out, ", \"cluster\": ");
    if (rcs == RL_OK) rl__buf_append(out, wc->out.data, wc->out.len);
    else rl__buf_printf(out, "null");
    rl__buf_printf(out, ", \"storage\": [");
    for (int i = 0; i < n_ids; i++) {
        if (i) rl__buf_printf(out, ", ");
        if (rs[i] == RL_OK) rl__buf_append(out, ws[i]->out.data, ws[i]->out.len);
        else rl__buf_printf(out, "null");
    }
    rl__buf_printf(out, "], \"errors\": {");
    const char *sep = "";
    if (rg) rl__buf_printf(out, "%s\"read_version\": \"%s\"", sep, rl_error_name(rg)), sep = ", ";
    if (rcs) rl__buf_printf(out, "%s\"cluster\": \"%s\"", sep, rl_error_name(rcs)), sep = ", ";
    for (int i = 0; i < n_ids; i++)
        if (rs[i]) rl__buf_printf(out, "%s\"storage %u\": \"%s\"", sep, ids[i], rl_error_name(rs[i])), sep = ", ";
    rl__buf_printf(out, "}}");
    if (wg) waiter_unref(wg);
    if (wc) waiter_unref(wc);
    for (int i = 0; i < n_ids; i++)
        if (ws[i]) waiter_unref(ws[i]);
    return rl__buf_error(out);
}

int rl__kv_cluster_ping(rl__kv_backend *b, uint32_t server_id, uint64_t *out_ns) {
    return rl__kv_cluster_ping_within(b, server_id, RL_CLUSTER_STATUS_TIMEOUT_MS, out_ns);
}

int rl__kv_cluster_ping_within(rl__kv_backend *b, uint32_t server_id, int timeout_ms, uint64_t *out_ns) {
    if (!b || b->vt != &cluster_vt || !out_ns || timeout_ms < 0) return RL_E_INVALID_ARGUMENT;
    cluster *cl = (cluster *)b;
    if (rl__loop_in_loop_thread(cl->loop)) return RL_E_CLIENT_INVALID_OPERATION;
    uint64_t t0 = now_ns();
    waiter *w = NULL;
    int rc = run_internal(cl, RL_CREQ_PING, server_id, timeout_ms, &w);
    uint64_t t1 = now_ns();
    if (w) waiter_unref(w);
    *out_ns = t1 - t0;
    return rc;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int rl__kv_cluster_ping_stats(rl__kv_backend *b, uint32_t server_id, int n, rl__kv_ping_stats *out) {
    return rl__kv_cluster_ping_stats_within(b, server_id, n, RL_CLUSTER_STATUS_TIMEOUT_MS, out);
}

int rl__kv_cluster_ping_stats_within(rl__kv_backend *b, uint32_t server_id, int n, int timeout_ms,
                                     rl__kv_ping_stats *out) {
    if (!out) return RL_E_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    out->server_id = server_id;
    if (!b || b->vt != &cluster_vt || n < 1 || n > RL_KV_PING_MAX) return RL_E_INVALID_ARGUMENT;
    uint64_t *ns = rl__malloc((size_t)n * sizeof *ns);
    if (!ns) return RL_E_OUT_OF_MEMORY;
    int rc = RL_OK;
    uint64_t sum = 0;
    for (int i = 0; i < n && rc == RL_OK; i++) {
        rc = rl__kv_cluster_ping_within(b, server_id, timeout_ms, &ns[i]);
        sum += ns[i];
    }
    if (rc == RL_OK) {
        qsort(ns, (size_t)n, sizeof *ns, cmp_u64);
        out->n = n;
        out->min_ns = ns[0];
        out->p50_ns = ns[(size_t)(n - 1) / 2];
        out->p99_ns = ns[(size_t)((double)(n - 1) * 0.99 + 0.5)];
        out->max_ns = ns[n - 1];
        out->mean_ns = sum / (uint64_t)n;
    }
    rl__free(ns);
    return rc;
}

int rl__kv_cluster_servers(rl__kv_backend *b, uint32_t *ids, int cap, int *out_n) {
    *out_n = 0;
    if (!b || b->vt != &cluster_vt || cap < 0) return RL_E_INVALID_ARGUMENT;
    cluster *cl = (cluster *)b;
    pthread_mutex_lock(&cl->mu);
    int n = 0;
    if (cl->map)
        for (uint32_t i = 0; i < cl->map->n_servers; i++) {
            if (n < cap) ids[n] = cl->map->servers[i].id;
            n++;
        }
    pthread_mutex_unlock(&cl->mu);
    *out_n = n;
    return n > cap ? RL_E_INVALID_ARGUMENT : RL_OK;
}

int rl__kv_cluster_delay(rl__kv_backend *b, uint32_t *out_delay_us, uint32_t *out_jitter_us) {
    if (!b || b->vt != &cluster_vt) return RL_E_INVALID_ARGUMENT;
    cluster *cl = (cluster *)b;
    pthread_mutex_lock(&cl->mu);
    if (out_delay_us) *out_delay_us = cl->delay_us;
    if (out_jitter_us) *out_jitter_us = cl->jitter_us;
    pthread_mutex_unlock(&cl->mu);
    return RL_OK;
}

int rl__db_cluster_ping_stats(rl_db *db, uint32_t server_id, int n, rl__kv_ping_stats *out) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    return rl__kv_cluster_ping_stats(db->be, server_id, n, out);
}

int rl__db_cluster_ping(rl_db *db, uint32_t server_id, uint64_t *out_ns) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    return rl__kv_cluster_ping(db->be, server_id, out_ns);
}

int rl__db_cluster_ping_within(rl_db *db, uint32_t server_id, int timeout_ms, uint64_t *out_ns) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    return rl__kv_cluster_ping_within(db->be, server_id, timeout_ms, out_ns);
}

int rl__db_cluster_ping_stats_within(rl_db *db, uint32_t server_id, int n, int timeout_ms, rl__kv_ping_stats *out) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    return rl__kv_cluster_ping_stats_within(db->be, server_id, n, timeout_ms, out);
}

int rl__db_cluster_servers(rl_db *db, uint32_t *ids, int cap, int *out_n) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    return rl__kv_cluster_servers(db->be, ids, cap, out_n);
}

int rl__db_cluster_delay(rl_db *db, uint32_t *out_delay_us, uint32_t *out_jitter_us) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    return rl__kv_cluster_delay(db->be, out_delay_us, out_jitter_us);
}

static void *net_main(void *ud) {
    cluster *cl = ud;
    rl__loop_run(cl->loop);
    return NULL;
}

/* Free everything (contract 6: every operation of the user has completed). */
static void cl_close(rl__kv_backend *b) {
    cluster *cl = (cluster *)b;
    if (!cl) return;
    atomic_store(&cl->closing, 1);
    if (cl->thread_started) watches_close(cl); /* before the loop stops: their polls end on it */
    if (cl->thread_started) {
        rl__loop_stop(cl->loop);
        pthread_join(cl->thread, NULL);
    }
    /* Closes every connection: on_close fails what is still pending (internal requests only)
     * with operation_cancelled; their timers are dropped. */
    rl__loop_free(cl->loop);
    cl->loop = NULL;
    pthread_mutex_lock(&cl->mu);
    creq *left = cl->internal;
    cl->internal = NULL;
    creq *mw = cl->map_waiters;
    cl->map_waiters = NULL;
    pthread_mutex_unlock(&cl->mu);
    for (creq *q = left, *nx; q; q = nx) { /* status / ping abandoned by a timed-out caller */
        nx = q->inext;
        waiter_complete(q->w, RL_E_OPERATION_CANCELLED);
        waiter_unref(q->w);
        rl__free(q);
    }
    (void)mw; /* only reads wait for the map, and all of them have completed */
    for (size_t i = 0; i < cl->n_conns; i++) cconn_unref(cl->conns[i]);
    rl__free(cl->conns);
    rl__locmap_unref(cl->map);
    pthread_mutex_destroy(&cl->mu);
    pthread_cond_destroy(&cl->map_cv);
    pthread_mutex_destroy(&cl->wmu);
    pthread_cond_destroy(&cl->wcv);
    rl__free(cl->path);
    rl__free(cl);
}

/* rl__kv_locality of key: the team of its shard in the current map and the mean of their
 * connections' measured round trips (the unqueued EWMA when it has samples, else the EWMA of
 * all). Never blocks on the network: only the map and the connection table are looked at. */
static void cl_locality(rl__kv_backend *b, const uint8_t *key, uint32_t key_len, rl__kv_locality *out) {
    cluster *cl = (cluster *)b;
    out->networked = 1;
    out->strategy = cl->popt.strategy == RL_FETCH_GROUPED ? 2 : cl->popt.strategy == RL_FETCH_INDIVIDUAL ? 1 : 0;
    out->s2s_batch = (int)cl->popt.batch;
    pthread_mutex_lock(&cl->mu);
    rl__locmap *m = cl->map;
    int si = m ? rl__locmap_find(m, key, key_len, 0) : -1;
    if (si >= 0) {
        const rl__loc_shard *sh = &m->shards[si];
        double sum = 0;
        int n_rtt = 0;
        for (uint32_t j = 0; j < sh->n_team && out->n_team < RL_KV_LOCALITY_MAX_TEAM; j++) {
            uint32_t id = sh->team_id[j];
            out->team[out->n_team++] = id;
            for (size_t i = 0; i < cl->n_conns; i++) {
                cconn *cc = cl->conns[i];
                if (cc->server_id != id) continue;
                unsigned ni = atomic_load_explicit(&cc->n_rtt_idle, memory_order_relaxed);
                unsigned na = atomic_load_explicit(&cc->n_rtt_all, memory_order_relaxed);
                if (ni + na == 0) break;
                uint64_t v = ni ? atomic_load_explicit(&cc->rtt_idle_ns, memory_order_relaxed)
                                : atomic_load_explicit(&cc->rtt_all_ns, memory_order_relaxed);
                sum += (double)v;
                n_rtt++;
                out->rtt_samples += ni ? ni : na;
                break;
            }
        }
        if (n_rtt) out->rtt_ns = sum / n_rtt;
    }
    pthread_mutex_unlock(&cl->mu);
}

static const rl__kv_backend_vtable cluster_vt = {
    .name = "cluster",
    .completes_inline = 0,
    .close = cl_close,
    .get_read_version = cl_get_read_version,
    .read = cl_read,
    .commit = cl_commit,
    .status_json = cl_status_json,
    .locality = cl_locality,
    .metrics = cl_metrics,
    .watch = cl_watch,
    .watch_cancel = cl_watch_cancel,
};

/* ---- Open --------------------------------------------------------------------------------------- */

int rl__kv_cluster_open(const char *cluster_file, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err) {
    int rc;
    if (!cluster_file || !*cluster_file || !out) {
        rl__errdetail_append(err, "cluster: needs the path of a cluster file (cluster:FILE)");
        return RL_E_INVALID_ARGUMENT;
    }
    *out = NULL;
    int strategy = RL_SECONDARY_DEFAULT;
    cluster *cl = rl__calloc(1, sizeof *cl);
    if (!cl) return RL_E_OUT_OF_MEMORY;
    const char *hedge_env = getenv("RL_CLUSTER_HEDGE"); /* "0": no hedged reads (cluster.h) */
    cl->hedge_on = !(hedge_env && !strcmp(hedge_env, "0"));
    cl->base.vt = &cluster_vt;
    rl__mutex_init_adaptive(&cl->mu);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cl->map_cv, &ca);
    pthread_cond_init(&cl->wcv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&cl->wmu, NULL);
    atomic_init(&cl->next_id, 1);
    cl->path = rl__strdup(cluster_file);
    if (!cl->path) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    if (opts) {
        size_t have = opts->size ? opts->size : sizeof *opts;
        if (have >= offsetof(rl_db_options, mapped_secondary_byte_limit) + sizeof(long)) {
            if (opts->mapped_secondary_row_limit < 0 || opts->mapped_secondary_byte_limit < 0) {
                rc = RL_E_INVALID_ARGUMENT;
                rl__errdetail_append(err, "mapped secondary limits must not be negative");
                goto fail;
            }
            cl->popt.secondary_row_limit = opts->mapped_secondary_row_limit;
            cl->popt.secondary_byte_limit = opts->mapped_secondary_byte_limit;
        }
        if (have >= offsetof(rl_db_options, read_only) + sizeof(int)) cl->read_only = opts->read_only != 0;
        if (have >= offsetof(rl_db_options, wait_report_ud) + sizeof(void *) && opts->wait_report &&
            opts->wait_report_ms > 0) {
            int64_t ms = opts->wait_report_ms < 86400000 ? opts->wait_report_ms : 86400000; /* a day at most */
            cl->report_ns = (uint64_t)ms * 1000000ull;
            cl->report = opts->wait_report;
            cl->report_ud = opts->wait_report_ud;
        }
        if (have >= offsetof(rl_db_options, mapped_secondary_strategy) + sizeof(int)) {
            int st = opts->mapped_secondary_strategy;
            if (st < RL_SECONDARY_DEFAULT || st > RL_SECONDARY_GROUPED) {
                rc = RL_E_INVALID_ARGUMENT;
                rl__errdetail_append(err, "mapped_secondary_strategy %d is not 0, 1 or 2", st);
                goto fail;
            }
            strategy = st;
        }
    }
    /* cluster:FILE?secondary=individual|grouped&stream=0|1&chunk=BYTES&window=BYTES (the URL wins
     * over the options; parameters in any order, a repeated one: the last wins). */
    cl->stream = 1;
    cl->stream_chunk = RL_CLUSTER_STREAM_CHUNK;
    cl->stream_window = RL_CLUSTER_STREAM_WINDOW;
    char *q = strchr(cl->path, '?');
    if (q) {
        *q++ = 0; /* the file's path */
        while (q && *q) {
            char *next = strchr(q, '&');
            if (next) *next++ = 0;
            char *v = strchr(q, '=');
            if (v) *v++ = 0;
            char *e = NULL;
            unsigned long n = v && *v ? strtoul(v, &e, 10) : 0;
            int num_ok = v && *v && e && !*e && n >= 1 && n <= 0xffffffffUL;
            if (v && !strcmp(q, "secondary") && !strcmp(v, "individual")) strategy = RL_SECONDARY_INDIVIDUAL;
            else if (v && !strcmp(q, "secondary") && !strcmp(v, "grouped")) strategy = RL_SECONDARY_GROUPED;
            else if (v && !strcmp(q, "secondary") && !strcmp(v, "default")) strategy = RL_SECONDARY_DEFAULT;
            else if (v && !strcmp(q, "stream") && (!strcmp(v, "0") || !strcmp(v, "1"))) cl->stream = *v == '1';
            else if (!strcmp(q, "chunk") && num_ok) cl->stream_chunk = (uint32_t)n;
            else if (!strcmp(q, "window") && num_ok) cl->stream_window = (uint32_t)n;
            else {
                rc = RL_E_BAD_URL;
                rl__errdetail_append(err,
                                     "cluster:%s: unknown parameter or value \"%s\" (secondary=individual|grouped|"
                                     "default, stream=0|1, chunk=BYTES, window=BYTES)",
                                     cluster_file, q);
                goto fail;
            }
            q = next;
        }
    }
    cl->popt.strategy = strategy == RL_SECONDARY_GROUPED      ? RL_FETCH_GROUPED
                        : strategy == RL_SECONDARY_INDIVIDUAL ? RL_FETCH_INDIVIDUAL
                                                              : RL_FETCH_DEFAULT;
    cl->popt.batch = 0;
    if ((rc = rl__cluster_file_read(cl->path, &cl->cf, err))) goto fail;
    rl__errdetail nd;
    rl__errdetail_init(&nd, NULL);
    if ((rc = rl__loop_new(0, &cl->loop, &nd))) {
        rl__errdetail_append(err, "cannot create the network loop: %s", rl__errdetail_get(&nd));
        goto fail;
    }
    /* The cluster file's name is the client's credential: every connection proves it, and the
     * servers prove it back (loop.h), so a wrong file fails with invalid_cluster_id. */
    {
        char name[2 * RL_CLUSTER_FIELD_MAX + 2];
        int n = snprintf(name, sizeof name, "%s:%s", cl->cf.description, cl->cf.id);
        rl__net_auth auth;
        if ((rc = rl__auth_init(&auth, name, (size_t)n, NULL, 0)) == RL_OK) rc = rl__loop_set_auth(cl->loop, &auth);
        if (rc) {
            rl__errdetail_append(err, "cannot derive the cluster key from %s", cl->path);
            goto fail;
        }
    }
    if (pthread_create(&cl->thread, NULL, net_main, cl)) {
        rc = RL_E_OPERATION_FAILED;
        rl__errdetail_append(err, "cannot start the network thread");
        goto fail;
    }
    cl->thread_started = 1;
    /* The first map, synchronously: it tells whether the cluster is there at all. */
    pthread_mutex_lock(&cl->mu);
    uint64_t gen = cl->map_gen;
    pthread_mutex_unlock(&cl->mu);
    want_map(cl, NULL);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += RL_CLUSTER_RETRY_WINDOW_NS / 1000000000ull + 3;
    pthread_mutex_lock(&cl->mu);
    while (cl->map_gen == gen)
        if (pthread_cond_timedwait(&cl->map_cv, &cl->mu, &ts)) break;
    rc = cl->map ? RL_OK : cl->map_gen == gen ? RL_E_TIMED_OUT : cl->map_last_err;
    pthread_mutex_unlock(&cl->mu);
    if (rc) {
        rl__errdetail_append(err, "cannot get the shard map from the coordinator %s:%u (cluster file %s): %s%s",
                             cl->cf.ip, cl->cf.port, cluster_file, rl_error_name(rc),
                             rc == RL_E_INVALID_CLUSTER_ID
                                 ? " (the server there does not know this cluster file's description:ID: a cluster "
                                   "file of another cluster, or an old one)"
                                 : "");
        if (rc == RL_E_TIMED_OUT) rc = RL_E_CONNECTION_FAILED;
        goto fail;
    }
    *out = &cl->base;
    return RL_OK;
fail:
    if (cl->loop) {
        cl_close(&cl->base);
        return rc;
    }
    rl__free(cl->path);
    pthread_mutex_destroy(&cl->mu);
    pthread_cond_destroy(&cl->map_cv);
    rl__free(cl);
    return rc;
}
