/* kv_int.h (internal) — the private structures shared by the files of src/kv: the database
 * handle, the future, the write map (ryw.c), the transaction and its read operations.
 *
 * Ownership at a glance:
 *   rl_db      owns its backend; transactions borrow the db (close it last).
 *   rl_txn     owns its write map, mutation log, conflict ranges (all in txn->arena, reset as a
 *              whole by rl_txn_reset) and, weakly, its pending versionstamp future. It is
 *              reference counted: the user's handle plus one per operation in flight (a read
 *              waiting for the backend, a read-version request, a commit), so a late completion
 *              never touches freed memory; its memory is released when the count drops to zero.
 *   rl_future  owns an arena holding its results and the state of the operation that fills it.
 *              Reference counted: the user's handle plus one while a backend operation may still
 *              write into it; rl_future_free drops the user's and cancels the operation.
 *
 * Threads. With a backend that completes inline (embedded) everything runs in the calling
 * thread and no lock is taken. Otherwise completions run on the backend's thread: txn->mu
 * guards every field of the transaction (API calls hold it except while calling into the
 * backend; completions hold it to add their conflict ranges), and a future's ready flag, error
 * and callbacks are guarded by its own mu.
 */
#ifndef RL_KV_INT_H
#define RL_KV_INT_H

#include <pthread.h>

#include "kv/backend.h"
#include "kv/keyidx.h"
#include "storage/storage.h"

/* ---- Database ---------------------------------------------------------------------------- */

#define RL__DEFAULT_MAX_WATCHES 10000 /* FoundationDB's default max_watches */

struct rl_db {
    rl__kv_backend *be;     /* owned */
    uint64_t seed;          /* backoff jitter state (guarded by mu) */
    int64_t txn_timeout_ms; /* rl_db_options.transaction_timeout_ms: every new transaction's
                             * RL_TXN_OPT_TIMEOUT_MS (0: none); set at open, then read only */
    pthread_mutex_t mu;
    /* Watches (watch.c): how many count against the limit now, and the limit
     * (rl_db_set_option RL_DB_OPT_MAX_WATCHES; RL__DEFAULT_MAX_WATCHES). Under mu. */
    int64_t n_watches, max_watches;
    /* The upper layers' per-database slot (rl__db_slot): created once under mu, freed at close. */
    void *slot;
    void (*slot_fini)(void *p);
};

/* rl__db_set_clock — tests only: the database's sequencer reads fn(ud) (a monotonic clock in
 * nanoseconds) instead of the real clock, so a test advances commit versions (and with them the
 * MVCC window) without sleeping; fn NULL restores the real clock. Versions keep increasing across
 * the switch. Call it while no commit is in flight on db; fn must stay callable until rl_db_close
 * or the next call. RL_OK, or RL_E_UNSUPPORTED_OPERATION for backends whose versions come from
 * elsewhere (cluster:, fdb:). */
int rl__db_set_clock(rl_db *db, uint64_t (*fn)(void *ud), void *ud);

/* ---- Futures ----------------------------------------------------------------------------- */

typedef enum {
    RL_FUT_NONE = 0,   /* no value: commit, on_error */
    RL_FUT_INT64 = 1,  /* read version */
    RL_FUT_VALUE = 2,  /* get */
    RL_FUT_KEY = 3,    /* get_key, versionstamp */
    RL_FUT_KVS = 4,    /* get_range */
    RL_FUT_MAPPED = 5, /* get_mapped_range */
    RL_FUT_KEYS = 6,   /* get_range_split_points: keys[0..count) */
} rl__future_kind;

typedef struct rl__watch rl__watch;

typedef struct {
    void (*cb)(rl_future *f, void *ud);
    void *ud;
} rl__future_cb;

struct rl_future {
    int kind;            /* rl__future_kind */
    int is_static;       /* the shared out-of-memory future: never freed */
    int ready;           /* written under mu; once 1 never changes; the futex rl_future_wait sleeps on */
    int error;           /* valid when ready */
    int refs;            /* atomic: 1 for the user's handle + 1 per backend operation in flight */
    int user_freed;      /* rl_future_free was called: no callback runs any more (under mu) */
    int cb_running;      /* callbacks are running (under mu): rl_future_free waits for them */
    pthread_t cb_thread; /* ... on this thread */
    int free_in_cb;      /* a callback freed its own future: the completer drops the reference */
    int n_waiting;       /* atomic: threads in rl_future_wait's sleep (a futex on `ready`) */
    rl_arena arena;      /* results live here */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rl__future_cb *cbs; /* callbacks waiting for ready (heap, n_cbs entries) */
    int n_cbs;
    /* Results (by kind). */
    int64_t i64;
    int present;
    const uint8_t *data; /* value or key */
    uint32_t len;
    rl_keyvalue *kvs;
    rl_mapped_keyvalue *mkvs;
    int count;
    int more;
    rl_txn *vs_owner;                            /* versionstamp future: the transaction that will complete it */
    struct rl_future *vs_next;                   /* ... and the next pending one of that transaction */
    rl__kv_read_stats stats;                     /* what the backend reported for the read (summed over its requests) */
    rl__kv_trace_event *trace_head, *trace_tail; /* its requests' events (in arena), when traced */
    const rl_slice *keys;                        /* RL_FUT_KEYS: count keys (array and bytes in arena) */
    rl__watch *watch;                            /* a watch's future: its watch (in arena), which
                                                  * rl_future_free cancels (watch.c) */
    /* A pending mapped read's entries that are final before it completes (future.c, invariant
     * 7): under mu; pseq, the futex rl__future_mapped_wait sleeps on, changes with each publish
     * and at completion; n_pwait (atomic) counts its sleepers. */
    const rl_mapped_keyvalue *p_mkvs;
    int p_count;
    int pseq;
    int n_pwait;
};

/* A new pending future of the given kind, or the shared out-of-memory future (never NULL). */
rl_future *rl__future_new(int kind);
/* A ready future holding err (RL_OK for a value-less success). Never NULL. */
rl_future *rl__future_error(int kind, int err);
/* Mark f ready with err (RL_OK: the result fields are filled) and run its callbacks (not when
 * the user already freed it). Idempotent: a second completion is ignored. */
void rl__future_complete(rl_future *f, int err);
/* Complete f, which no other thread can have seen yet (created by this thread and not handed
 * out: so no waiter, no callback, no other reference), without its lock: the embedded backend's
 * reads complete before the call that made the future returns. */
void rl__future_complete_unseen(rl_future *f, int err);
/* Complete f (as rl__future_complete) and drop one reference in one step (future.c says why). */
void rl__future_complete_unref(rl_future *f, int err);
/* Take / drop a reference (refs above). The last drop recycles or frees the future. */
void rl__future_ref(rl_future *f);
void rl__future_unref(rl_future *f);
/* 1 once the user freed f (a pending operation may skip its work). */
int rl__future_is_abandoned(rl_future *f);
/* rl__future_mapped_publish — the first n entries of the pending mapped read f are final: they
 * will be the first n of its result (the cluster backend's streamed replies, backend.h
 * rl__kv_read.progress). ents lives in f's arena and its first n entries never change; a call
 * that does not grow the count, or comes once f is ready, is ignored. Any thread. */
void rl__future_mapped_publish(rl_future *f, const rl_mapped_keyvalue *ents, int n);

/* ---- The special-key space (special.c) ------------------------------------------------- */

/* 1 if k is a special key reclayer computes on db (never on fdb:, whose reads go to FoundationDB). */
int rl__special_key(const rl_db *db, const uint8_t *k, uint32_t kl);
/* 1 if k is in the special-key space and db is fdb: (the read is FoundationDB's to answer). */
int rl__special_forwarded(const rl_db *db, const uint8_t *k, uint32_t kl);
/* Compute special key k (rl__special_key said 1) into arena a: *out_present 0 when the database
 * has no such value (a cluster file key on an embedded database). RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__special_get(rl_db *db, const uint8_t *k, uint32_t kl, rl_arena *a, int *out_present, const uint8_t **out_v,
                    uint32_t *out_len);
/* Start the read of special key k into the pending future f, computed on a thread of its own
 * which completes f (special.c says why). f is not handed out yet. */
void rl__special_start(rl_db *db, const uint8_t *k, uint32_t kl, rl_future *f);
/* The status document in FoundationDB's schema (special.c), appended to out. */
int rl__status_fdb_json(rl_db *db, rl_buf *out);

/* ---- Write map (ryw.c) ------------------------------------------------------------------- */

typedef enum {
    WM_VALUE = 0,      /* key known to hold value */
    WM_CLEARED = 1,    /* key known absent */
    WM_ATOMIC = 2,     /* atomic ops stacked on the unknown stored value */
    WM_UNREADABLE = 3, /* a versionstamped value (or ops on one): reads fail with 1036 */
} rl__wm_kind;

typedef struct rl__wm_op {
    uint8_t type;           /* rl__mutation_type */
    const uint8_t *operand; /* in the txn arena */
    uint32_t len;
    struct rl__wm_op *next; /* application order */
} rl__wm_op;

typedef struct {
    const uint8_t *key; /* in the txn arena */
    uint32_t key_len;
    int kind; /* rl__wm_kind */
    const uint8_t *value;
    uint32_t value_len;
    rl__wm_op *ops, *ops_tail; /* WM_ATOMIC / WM_UNREADABLE */
} rl__wm_point;

typedef struct {
    const uint8_t *begin, *end; /* in the txn arena */
    uint32_t begin_len, end_len;
} rl__wm_range;

/* The write map: point entries by key, plus disjoint cleared ranges (merged when they touch),
 * each in an ordered index (keyidx.h: a B+tree over a linked list), so a write costs O(log n) in
 * the writes already made. A point entry overrides a cleared range; a key in a cleared range
 * without a point entry is absent. */
typedef struct {
    rl__keyidx pts, clears;
    rl_arena *arena; /* where nodes, keys, values, operands and index pages go (the txn arena; a
                      * copy's own) */
} rl__wmap;

void rl__wmap_init(rl__wmap *w, rl_arena *a);
void rl__wmap_release(rl__wmap *w);
/* Forget every entry (the arena is reset by the caller). */
void rl__wmap_reset(rl__wmap *w);
/* 1 when the map holds no point and no cleared range. */
int rl__wmap_empty(const rl__wmap *w);
int rl__wmap_set(rl__wmap *w, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl);
int rl__wmap_clear(rl__wmap *w, const uint8_t *k, uint32_t kl);
int rl__wmap_clear_range(rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);
/* Stack or apply an atomic op (type: rl__mutation_type, never SET_VERSIONSTAMPED_KEY). */
int rl__wmap_atomic(rl__wmap *w, const uint8_t *k, uint32_t kl, int type, const uint8_t *p, uint32_t pl);
/* The point entry of k, or NULL. */
const rl__wm_point *rl__wmap_find(const rl__wmap *w, const uint8_t *k, uint32_t kl);
/* The first point entry with key >= k, or NULL. */
const rl__wm_point *rl__wmap_seek(const rl__wmap *w, const uint8_t *k, uint32_t kl);
/* The last point entry with key < k, or NULL. */
const rl__wm_point *rl__wmap_seek_before(const rl__wmap *w, const uint8_t *k, uint32_t kl);
/* The point entries after and before p (a point of the same map), or NULL. */
const rl__wm_point *rl__wmap_next(const rl__wm_point *p);
const rl__wm_point *rl__wmap_prev(const rl__wm_point *p);
/* 1 if k lies in a cleared range. */
int rl__wmap_in_clear(const rl__wmap *w, const uint8_t *k, uint32_t kl);
/* The cleared range that holds k (begin <= k < end), or NULL. Points into w's arena. */
const rl__wm_range *rl__wmap_clear_at(const rl__wmap *w, const uint8_t *k, uint32_t kl);
/* The cleared range that holds the keys just below e (begin < e <= end), or NULL. Points into
 * w's arena. */
const rl__wm_range *rl__wmap_clear_below(const rl__wmap *w, const uint8_t *e, uint32_t el);
/* 1 if [b, e) contains a point entry or meets a cleared range. */
int rl__wmap_overlaps(const rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);
/* Copy the part of w that a read of [b, e) sees (e NULL: to the end) into a map whose nodes live
 * in arena a (ryw.c); the copy is only read. */
int rl__wmap_copy_slice(const rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, rl_arena *a,
                        rl__wmap *out);
/* The value of point p over a stored base (present/base): applies its ops. Result in arena a.
 * RL_E_ACCESSED_UNREADABLE for WM_UNREADABLE. */
int rl__wmap_resolve(const rl__wm_point *p, int base_present, const uint8_t *base, uint32_t base_len, rl_arena *a,
                     int *out_present, const uint8_t **out_v, uint32_t *out_len);

/* ---- Transactions ------------------------------------------------------------------------ */

typedef struct {
    rl__keyrange *v; /* heap array; bytes in the txn arena */
    size_t n, cap;
} rl__rangelist;

typedef struct txn_op txn_op;
typedef struct txn_grv txn_grv;

struct rl_txn {
    rl_db *db;
    int is_async;       /* the backend completes later (locks and copies are needed) */
    pthread_mutex_t mu; /* is_async: guards everything below */
    int refs;           /* under mu: the user's handle + operations in flight */
    int user_freed;     /* rl_txn_free was called */
    uint64_t gen;       /* bumped by every reset: completions of an older generation are
                              * cancelled and change nothing */
    rl_arena arena;     /* write map keys/values, mutations, conflict ranges */
    rl__wmap wm;
    rl__mutation *muts; /* heap array, in order */
    size_t n_muts, cap_muts;
    rl__rangelist reads, writes;
    size_t size; /* bytes of mutations + conflict ranges */
    /* Read version: known (has_rv), or being asked for (grv != NULL) with operations waiting. */
    int has_rv;
    rl__version rv;
    txn_grv *grv;       /* the request in flight, or NULL */
    txn_op *rv_waiters; /* operations started before the read version was known (FIFO) */
    txn_op *rv_waiters_tail;
    txn_op *ops; /* reads in flight (doubly linked), to cancel on reset/free */
    int n_ops;
    txn_op *commit_waiting; /* a commit issued while reads were in flight: sent when the
                              * last one finishes (FoundationDB waits the same way) */
    int cancelled;
    int committing;            /* a commit is running (threads misuse guard) */
    int committed;             /* committed successfully: further use is an error until reset */
    int64_t committed_version; /* -1 until commit / read-only */
    uint8_t versionstamp[10];
    int commit_error;     /* outcome of the last commit (for the versionstamp future) */
    rl_future *vs_future; /* pending versionstamp futures (weak), linked by vs_next: as many as
                           * were asked for, all completed by the commit (FoundationDB's) */
    int has_vs_key;       /* a SET_VERSIONSTAMPED_KEY is pending (ranges read unreadable) */
    /* Options (kept across reset). */
    int64_t timeout_ms;
    int64_t retry_limit; /* -1 unlimited */
    int64_t max_retry_delay_ms;
    int64_t size_limit;
    int access_system_keys;
    int ryw_disabled;
    int trace_on;          /* atomic: > 0 while a tracer (a query cursor) wants the backend's
                              * per-request events of this transaction's reads (kv_stats.h) */
    int next_write_no_wcr; /* NEXT_WRITE_NO_WRITE_CONFLICT_RANGE: the next write adds no write
                              * conflict range (cleared by that write and by every reset) */
    rl__watch *watches;    /* pending watches (rl_txn_watch before the commit), newest first */
    /* Retry state (kept across on_error resets, cleared by rl_txn_reset). */
    uint64_t start_ns; /* timeout clock start */
    int64_t retries;
    int64_t backoff_ms;
    /* The read version's wait (kv_stats.h rl__txn_rv_wait), asynchronous backends only:
     * rl__clock_mono_ns() when the request for it was sent and when it arrived (0: not asked /
     * not arrived). Atomic (read by the query cursor's thread); zeroed by every reset. */
    uint64_t rv_asked_ns, rv_ready_ns;
};

/* Lock / unlock t->mu when the backend is asynchronous (no-ops otherwise). */
static inline void rl__txn_lock(rl_txn *t) {
    if (t->is_async) pthread_mutex_lock(&t->mu);
}
static inline void rl__txn_unlock(rl_txn *t) {
    if (t->is_async) pthread_mutex_unlock(&t->mu);
}

/* txn.c: drop a reference taken for an operation (frees the transaction after the last). */
void rl__txn_unref(rl_txn *t);
/* txn.c: the same with t->mu held (one lock round trip less on a completion): returns 1 when it
 * was the last reference; the caller then calls rl__txn_destroy once it has released t->mu and
 * never touches t otherwise. 0 (and nothing to do) for an inline backend's transaction. */
int rl__txn_unref_locked(rl_txn *t);
void rl__txn_destroy(rl_txn *t);
/* txn.c: the common precondition of every operation (cancelled, timed out, committing). */
int rl__txn_check_usable(rl_txn *t);
/* txn.c: the monotonic time (rl__clock_mono_ns) at which t's timeout elapses, 0 when it has
 * none: what its backend requests carry as deadline_ns (backend.h contract 7). Under t->mu. */
uint64_t rl__txn_deadline_ns(const rl_txn *t);
/* txn.c: append [b, e) (copied) to the read conflict ranges, counting its size; nothing when it
 * is empty. Under t->mu. */
int rl__txn_read_conflict(rl_txn *t, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);
/* txn.c: the read conflict range of one key, [k, k + "\x00"). Under t->mu. */
int rl__txn_read_conflict_key(rl_txn *t, const uint8_t *k, uint32_t kl);
/* txn_read.c: the read version arrived (err RL_OK) or failed: start or fail the waiters.
 * g: the finished request (its stats and event are charged to the waiters' futures), or NULL.
 * Called without t->mu. */
void rl__txn_rv_ready(rl_txn *t, uint64_t gen, int err, rl__version v, const rl__kv_grv *g);
/* txn_read.c: cancel every read in flight (their futures complete with err). Under t->mu. */
void rl__txn_cancel_ops(rl_txn *t, int err);
/* txn.c: detach the pending versionstamp future filled for err (the stamp when RL_OK); the
 * caller completes it with *out_err after releasing t->mu. NULL if there is none. Under t->mu. */
rl_future *rl__txn_take_versionstamp(rl_txn *t, int err, int *out_err);
/* Complete every future of a list rl__txn_take_versionstamp returned, with err. NULL ok. */
void rl__txn_complete_versionstamps(rl_future *list, int err);

/* ---- Watches (watch.c) ------------------------------------------------------------------- */

/* A watch (rl_txn_watch), living in its future's arena: pending on its transaction until the
 * commit, then registering (a read version and the key's value, if the transaction does not
 * know them), then registered with the backend until done. watch.c says who completes it. */
struct rl__watch {
    rl__kv_watch w; /* what the backend keeps (first: its done hands it back) */
    rl_future *f;   /* the future (one reference from creation until finished) */
    rl_db *db;
    rl_txn *owner;   /* pending: the transaction (under its mu); NULL once taken off */
    rl__watch *next; /* owner->watches */
    int kind;        /* watch.c: W_STORED, W_OWN (value known), W_OWN_UNKNOWN */
    uint8_t *key;    /* in f->arena */
    uint32_t key_len;
    int present; /* W_OWN: the value written */
    uint8_t *value;
    uint32_t value_len;
    int done;      /* atomic: finished (the future completed) */
    int counted;   /* atomic: counts in db->n_watches */
    int cancel;    /* atomic: rl_future_free asked to cancel */
    int reg;       /* atomic: 0, 1 registered with the backend, 2 cancelled before that */
    rl__kv_grv g;  /* registering: the read version */
    rl__kv_read r; /* registering: the key's value */
};

/* The write of [b, e) (e NULL: the key b) changed what t's pending watches saw: take those that
 * fire (a watch of a key the transaction wrote fires at once when its value changes, as
 * FoundationDB's); complete them with rl__watch_fire after releasing t->mu. Under t->mu. */
rl__watch *rl__watch_take_written(rl_txn *t, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);
void rl__watch_fire(rl__watch *list);
/* Take t's pending watches (under t->mu): the caller then calls rl__watch_committed after
 * releasing it, with the commit's outcome: err, or RL_OK with the read version (has_rv) and the
 * commit version (-1: nothing written). NULL if there is none. */
rl__watch *rl__watch_take(rl_txn *t);
void rl__watch_committed(rl__watch *list, int err, int has_rv, rl__version rv, int64_t cv);
/* rl_future_free of a watch's future: stop counting it and cancel it wherever it is. */
void rl__watch_cancel(rl__watch *w);

/* timer.c: call fn(ud) once at or after monotonic time deadline_ns, from the timer thread (one
 * per process, started on first use). RL_OK or RL_E_OUT_OF_MEMORY (fn is then never called). */
int rl__kv_timer_add(uint64_t deadline_ns, void (*fn)(void *ud), void *ud);

#endif
