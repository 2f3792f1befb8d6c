/* txn.c — rl_txn: the generic transaction layer above a backend (backend.h): lifecycle, options,
 * writes with their limits, conflict ranges, the versionstamp future and the retry step. Reads,
 * the read version and the commit — everything that goes to the backend and completes later —
 * are in txn_op.c.
 *
 * Invariants:
 *   1. Every write is validated completely (sizes, system keys, the transaction size limit)
 *      before anything changes, so a failed write changes nothing.
 *   2. The mutation log (txn->muts) keeps every write in issue order; it is what the backend
 *      commits. The write map (txn->wm) is only for reads.
 *   3. Non-snapshot reads add read conflict ranges covering everything their result depended on
 *      in the snapshot (txn_op.c says how); they are added when the read completes.
 *   4. Results handed out live in the future's arena, never in the transaction's (which a reset
 *      frees while futures may still be alive).
 *   5. Keys readable by users are < "\xff" ("\xff\xff" with ACCESS_SYSTEM_KEYS); a selector or key
 *      beyond is key_outside_legal_range (2004). Writes agree: a "\xff" key without
 *      ACCESS_SYSTEM_KEYS is system_key_write, and a key at or above "\xff\xff" (FoundationDB's
 *      special-key space, never stored) is key_outside_legal_range even with it.
 *   6. With an asynchronous backend every public function holds t->mu while it looks at or
 *      changes the transaction (never while running a user callback), and the transaction's
 *      memory lives until its last reference (the user's, and one per operation in flight) is
 *      dropped (rl__txn_unref), so a completion arriving after rl_txn_free finds it still there
 *      and merely drops its reference. rl_txn_reset and rl_txn_free first cancel every read in
 *      flight: their futures complete with transaction_cancelled and their late completions
 *      change nothing (the generation t->gen moved on).
 *   7. A transaction's memory, once its last reference is dropped, is parked for its thread's next
 *      rl_txn_begin (txn_take / txn_put: one transaction per thread, at most TXN_PARK_BYTES; freed
 *      at the thread's exit): its arena's kept block and its mutation and conflict-range arrays,
 *      so a short transaction (a read, a query) allocates nothing of its own query after query.
 *      Every field but that memory is zeroed when it is taken, the arena reset, the mutex new.
 *
 * Lifecycle:
 *
 *   begin ──▶ [open] ──commit──▶ [committed] ──reset / on_error──▶ [open]
 *                │ cancel                  (commit error) ──on_error(retryable)──▶ [open]
 *                ▼
 *            [cancelled] ──reset──▶ [open]
 *
 *   begin: rl_txn_begin; commit: rl_txn_commit; reset: rl_txn_reset; on_error: rl_txn_on_error;
 *   cancel: rl_txn_cancel. A timed-out transaction fails every operation with 1031 until reset.
 */
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/sync.h"
#include "base/thread_exit.h"
#include "kv/kv_int.h"

#define DEFAULT_MAX_RETRY_DELAY_MS 1000
#define INITIAL_BACKOFF_MS 10

static const uint8_t key_ff[] = {0xff};
static const uint8_t key_ffff[] = {0xff, 0xff};

/* ---- Small helpers ----------------------------------------------------------------------- */

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

/* The exclusive upper bound of readable keys. */
static void max_key(const rl_txn *t, const uint8_t **k, uint32_t *kl) {
    if (t->access_system_keys) {
        *k = key_ffff;
        *kl = 2;
    } else {
        *k = key_ff;
        *kl = 1;
    }
}

/* Timeouts above this many ms (about 31 years) count as this: the deadline stays far from
 * overflowing the clock. */
#define TIMEOUT_MS_CAP 1000000000000ll

uint64_t rl__txn_deadline_ns(const rl_txn *t) {
    if (t->timeout_ms <= 0) return 0;
    int64_t ms = t->timeout_ms < TIMEOUT_MS_CAP ? t->timeout_ms : TIMEOUT_MS_CAP;
    return t->start_ns + (uint64_t)ms * 1000000ull;
}

/* 1 once t's timeout has elapsed. */
static int timed_out(const rl_txn *t) {
    uint64_t dl = rl__txn_deadline_ns(t);
    return dl && rl__clock_mono_ns() >= dl;
}

int rl__txn_check_usable(rl_txn *t) {
    if (t->cancelled) return RL_E_TRANSACTION_CANCELLED;
    if (t->committing) return RL_E_USED_DURING_COMMIT;
    if (timed_out(t)) return RL_E_TRANSACTION_TIMED_OUT;
    return RL_OK;
}

/* Append [b, e) to list l without copying: both must already live in the txn arena (or be
 * static). Counts its size. */
static int range_add_owned(rl_txn *t, rl__rangelist *l, const uint8_t *bc, uint32_t bl, const uint8_t *ec,
                           uint32_t el) {
    if (RL_GROW(l->v, l->cap, l->n + 1, 16)) return RL_E_OUT_OF_MEMORY;
    l->v[l->n].begin = bc;
    l->v[l->n].begin_len = bl;
    l->v[l->n].end = ec;
    l->v[l->n].end_len = el;
    l->n++;
    t->size += (size_t)bl + el;
    return RL_OK;
}

/* Append a copy of [b, e) to list l (both keys in one txn arena allocation) and count its
 * size. When e starts with b (a single key: [k, k + "\x00")), one copy serves both ends. */
static int range_add(rl_txn *t, rl__rangelist *l, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (el == bl + 1 && e[bl] == 0 && (bl == 0 || !memcmp(b, e, bl))) {
        uint8_t *c = rl__arena_key_after(&t->arena, b, bl);
        if (!c) return RL_E_OUT_OF_MEMORY;
        return range_add_owned(t, l, c, bl, c, el);
    }
    uint8_t *bc = rl__arena_alloc(&t->arena, (size_t)bl + el + 1);
    if (!bc) return RL_E_OUT_OF_MEMORY;
    uint8_t *ec = bc + bl;
    if (bl) memcpy(bc, b, bl);
    if (el) memcpy(ec, e, el);
    return range_add_owned(t, l, bc, bl, ec, el);
}

int rl__txn_read_conflict_key(rl_txn *t, const uint8_t *k, uint32_t kl) {
    uint8_t *e = rl__arena_key_after(&t->arena, k, kl); /* one copy serves both ends: [k, k + "\x00") */
    if (!e) return RL_E_OUT_OF_MEMORY;
    return range_add_owned(t, &t->reads, e, kl, e, kl + 1);
}

int rl__txn_read_conflict(rl_txn *t, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (kcmp(b, bl, e, el) >= 0) return RL_OK;
    return range_add(t, &t->reads, b, bl, e, el);
}

/* ---- Transactions: lifecycle and options ------------------------------------------------- */

/* ---- The parked transaction (invariant 7) ---------------------------------------------------- */

#define TXN_PARK_BYTES ((size_t)256 << 10) /* a transaction holding more memory is freed */

static _Thread_local struct {
    rl_txn *t;      /* the parked transaction, or NULL */
    int registered; /* tpark_drain runs at this thread's exit (rl__thread_at_exit) */
} tpark;

/* Free t's memory (its mutex destroyed already). */
static void txn_free_mem(rl_txn *t) {
    rl__arena_release(&t->arena);
    rl__free(t->muts);
    rl__free(t->reads.v);
    rl__free(t->writes.v);
    rl__free(t);
}

/* Thread exit: free the parked transaction. */
static void tpark_drain(void) {
    if (tpark.t) txn_free_mem(tpark.t);
    tpark.t = NULL;
    tpark.registered = 0;
}

/* A zeroed transaction with an empty arena and a new mutex: this thread's parked one (its memory
 * kept) or a new one. NULL on out of memory. */
static rl_txn *txn_take(void) {
    rl_txn *t = tpark.t;
    if (!t) {
        if (!(t = rl__calloc(1, sizeof *t))) return NULL;
        rl__arena_init(&t->arena, 4096);
    } else {
        tpark.t = NULL;
        rl_arena arena = t->arena;
        rl__mutation *muts = t->muts;
        size_t cap_muts = t->cap_muts;
        rl__rangelist reads = t->reads, writes = t->writes;
        memset(t, 0, sizeof *t);
        t->arena = arena; /* reset when parked */
        t->muts = muts;
        t->cap_muts = cap_muts;
        t->reads.v = reads.v;
        t->reads.cap = reads.cap;
        t->writes.v = writes.v;
        t->writes.cap = writes.cap;
    }
    rl__mutex_init_adaptive(&t->mu);
    return t;
}

/* Park t's memory for this thread's next transaction, or free it (one is parked already, it holds
 * more than TXN_PARK_BYTES, or the thread-exit destructor could not be set). Its mutex is
 * destroyed and its write map released already. */
static void txn_put(rl_txn *t) {
    rl__arena_reset(&t->arena);
    size_t held = rl__arena_capacity(&t->arena) + t->cap_muts * sizeof *t->muts +
                  (t->reads.cap + t->writes.cap) * sizeof(rl__keyrange);
    if (!tpark.registered) tpark.registered = rl__thread_at_exit(tpark_drain);
    if (tpark.registered && !tpark.t && held <= TXN_PARK_BYTES) tpark.t = t;
    else txn_free_mem(t);
}

int rl_txn_begin(rl_db *db, rl_txn **out) {
    if (!db || !out) return RL_E_INVALID_ARGUMENT;
    rl_txn *t = txn_take(); /* invariant 7 */
    if (!t) return RL_E_OUT_OF_MEMORY;
    t->db = db;
    t->is_async = !db->be->vt->completes_inline;
    t->refs = 1;
    rl__wmap_init(&t->wm, &t->arena);
    t->retry_limit = -1;
    t->timeout_ms = db->txn_timeout_ms; /* FoundationDB's transaction_timeout database option */
    t->max_retry_delay_ms = DEFAULT_MAX_RETRY_DELAY_MS;
    t->size_limit = RL_TXN_SIZE_LIMIT;
    t->committed_version = -1;
    t->start_ns = rl__clock_mono_ns();
    t->backoff_ms = INITIAL_BACKOFF_MS;
    *out = t;
    return RL_OK;
}

/* Detach the pending versionstamp futures (a list linked by vs_next), each filled for err (the
 * stamp when err is RL_OK); the caller completes them with *out_err once it holds no lock
 * (rl__txn_complete_versionstamps). NULL if there is none. */
static rl_future *take_versionstamp(rl_txn *t, int err, int *out_err) {
    rl_future *list = t->vs_future;
    if (!list) return NULL;
    t->vs_future = NULL;
    for (rl_future *f = list; f; f = f->vs_next) {
        f->vs_owner = NULL;
        if (err == RL_OK) {
            uint8_t *p = rl__arena_memdup(&f->arena, t->versionstamp, 10);
            if (!p) {
                err = RL_E_OUT_OF_MEMORY; /* then every one of them fails alike */
            } else {
                f->data = p;
                f->len = 10;
            }
        }
    }
    *out_err = err;
    return list;
}

void rl__txn_complete_versionstamps(rl_future *list, int err) {
    while (list) {
        rl_future *next = list->vs_next;
        list->vs_next = NULL;
        rl__future_complete(list, err);
        list = next;
    }
}

rl_future *rl__txn_take_versionstamp(rl_txn *t, int err, int *out_err) { return take_versionstamp(t, err, out_err); }

/* Forget reads, writes and the read version (not options or retry state); cancel every read in
 * flight. Under t->mu; returns the versionstamp future to complete with *out_err (or NULL) and
 * the pending watches to fail (*out_watches, rl__watch_committed with transaction_cancelled). */
static rl_future *reset_state(rl_txn *t, int *out_err, rl__watch **out_watches) {
    rl__txn_cancel_ops(t, RL_E_TRANSACTION_CANCELLED);
    *out_watches = rl__watch_take(t); /* FoundationDB: an uncommitted transaction's reset cancels them */
    rl_future *vs = take_versionstamp(t, RL_E_TRANSACTION_CANCELLED, out_err);
    t->gen++;
    rl__wmap_reset(&t->wm);
    rl__arena_reset(&t->arena);
    t->n_muts = 0;
    t->reads.n = 0;
    t->writes.n = 0;
    t->size = 0;
    t->has_rv = 0;
    t->rv = 0;
    t->grv = NULL; /* a request in flight is of the old generation: its answer is dropped */
    __atomic_store_n(&t->rv_asked_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&t->rv_ready_ns, 0, __ATOMIC_RELAXED);
    t->commit_waiting = NULL;
    t->cancelled = 0;
    t->committing = 0;
    t->committed = 0;
    t->committed_version = -1;
    t->commit_error = 0;
    t->next_write_no_wcr = 0;
    return vs;
}

static void complete_vs(rl_future *vs, int err) { rl__txn_complete_versionstamps(vs, err); }

/* Fail watches taken off a transaction that did not commit (no lock held). */
static void cancel_watches(rl__watch *wl) { rl__watch_committed(wl, RL_E_TRANSACTION_CANCELLED, 0, 0, -1); }

/* Release the transaction's memory (its last reference is gone). */
static void destroy(rl_txn *t) {
    rl__wmap_release(&t->wm);
    pthread_mutex_destroy(&t->mu);
    txn_put(t); /* invariant 7 */
}

void rl__txn_unref(rl_txn *t) {
    if (!t->is_async) return; /* inline: only the user's reference ever exists */
    pthread_mutex_lock(&t->mu);
    int last = --t->refs == 0;
    pthread_mutex_unlock(&t->mu);
    if (last) destroy(t);
}

int rl__txn_unref_locked(rl_txn *t) { return t->is_async && --t->refs == 0; }

void rl__txn_destroy(rl_txn *t) { destroy(t); }

void rl_txn_free(rl_txn *t) {
    if (!t) return;
    int err = 0;
    rl__txn_lock(t);
    rl__txn_cancel_ops(t, RL_E_TRANSACTION_CANCELLED);
    rl_future *vs = take_versionstamp(t, RL_E_TRANSACTION_CANCELLED, &err);
    rl__watch *wl = rl__watch_take(t);
    t->gen++;
    t->user_freed = 1;
    t->grv = NULL;
    int last = --t->refs == 0;
    rl__txn_unlock(t);
    complete_vs(vs, err);
    cancel_watches(wl);
    if (last) destroy(t);
}

void rl_txn_reset(rl_txn *t) {
    if (!t) return;
    int err = 0;
    rl__watch *wl = NULL;
    rl__txn_lock(t);
    rl_future *vs = reset_state(t, &err, &wl);
    t->retries = 0;
    t->backoff_ms = INITIAL_BACKOFF_MS;
    t->start_ns = rl__clock_mono_ns();
    rl__txn_unlock(t);
    complete_vs(vs, err);
    cancel_watches(wl);
}

void rl_txn_cancel(rl_txn *t) {
    if (!t) return;
    int err = 0;
    rl__txn_lock(t);
    t->cancelled = 1;
    rl__txn_cancel_ops(t, RL_E_TRANSACTION_CANCELLED);
    rl_future *vs = take_versionstamp(t, RL_E_TRANSACTION_CANCELLED, &err);
    rl__watch *wl = t->committed ? NULL : rl__watch_take(t);
    rl__txn_unlock(t);
    complete_vs(vs, err);
    cancel_watches(wl);
}

static int set_option(rl_txn *t, rl_txn_option opt, int64_t value) {
    switch (opt) {
    case RL_TXN_OPT_TIMEOUT_MS:
        if (value < 0) return RL_E_INVALID_OPTION_VALUE;
        t->timeout_ms = value;
        return RL_OK;
    case RL_TXN_OPT_RETRY_LIMIT:
        if (value < -1) return RL_E_INVALID_OPTION_VALUE;
        t->retry_limit = value;
        return RL_OK;
    case RL_TXN_OPT_MAX_RETRY_DELAY_MS:
        if (value < 0) return RL_E_INVALID_OPTION_VALUE;
        t->max_retry_delay_ms = value;
        return RL_OK;
    case RL_TXN_OPT_SIZE_LIMIT:
        if (value < 32 || value > RL_TXN_SIZE_LIMIT) return RL_E_INVALID_OPTION_VALUE;
        t->size_limit = value;
        return RL_OK;
    case RL_TXN_OPT_ACCESS_SYSTEM_KEYS: t->access_system_keys = 1; return RL_OK;
    case RL_TXN_OPT_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE: t->next_write_no_wcr = 1; return RL_OK;
    case RL_TXN_OPT_READ_YOUR_WRITES_DISABLE:
        if (t->n_muts || t->reads.n || t->n_ops) return RL_E_CLIENT_INVALID_OPERATION;
        t->ryw_disabled = 1;
        return RL_OK;
    }
    return RL_E_INVALID_OPTION;
}

int rl_txn_set_option(rl_txn *t, rl_txn_option opt, int64_t value) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = set_option(t, opt, value);
    rl__txn_unlock(t);
    return rc;
}

void rl_txn_set_read_version(rl_txn *t, int64_t v) {
    if (!t) return;
    rl__txn_lock(t);
    t->rv = (rl__version)v;
    t->has_rv = 1;
    rl__txn_unlock(t);
}

/* ---- Writes ------------------------------------------------------------------------------ */

/* Room for one more mutation. */
static int reserve_mut(rl_txn *t) { return RL_GROW(t->muts, t->cap_muts, t->n_muts + 1, 32); }

/* Log a mutation (copies in the txn arena). */
static int log_mut(rl_txn *t, int type, const void *p1, size_t l1, const void *p2, size_t l2) {
    int rc = reserve_mut(t);
    if (rc) return rc;
    uint8_t *c1 = rl__arena_memdup(&t->arena, p1, l1);
    uint8_t *c2 = rl__arena_memdup(&t->arena, p2, l2);
    if (!c1 || !c2) return RL_E_OUT_OF_MEMORY;
    rl__mutation *m = &t->muts[t->n_muts++];
    m->type = (uint8_t)type;
    m->p1 = c1;
    m->len1 = (uint32_t)l1;
    m->p2 = c2;
    m->len2 = (uint32_t)l2;
    t->size += l1 + l2;
    return RL_OK;
}

/* Validate a write of key (and value) before changing anything; `extra` is the bytes the write
 * will add to the transaction size. */
static int check_write(rl_txn *t, const void *key, size_t key_len, size_t value_len, int has_value, size_t extra) {
    int rc = rl__txn_check_usable(t);
    if (rc) return rc;
    if (t->committed) return RL_E_USED_DURING_COMMIT;
    if (!key && key_len) return RL_E_INVALID_ARGUMENT;
    if (key_len > RL_KEY_SIZE_LIMIT) return RL_E_KEY_TOO_LARGE;
    if (has_value && value_len > RL_VALUE_SIZE_LIMIT) return RL_E_VALUE_TOO_LARGE;
    if (key_len && ((const uint8_t *)key)[0] == 0xff) {
        if (!t->access_system_keys) return RL_E_SYSTEM_KEY_WRITE;
        /* "\xff\xff" and above is FoundationDB's special-key space: nothing is stored there,
         * so a write is refused as reads of it are (invariant 5). */
        if (key_len >= 2 && ((const uint8_t *)key)[1] == 0xff) return RL_E_KEY_OUTSIDE_LEGAL_RANGE;
    }
    (void)extra; /* the size limit is checked at commit, as FoundationDB does (txn_op.c) */
    return RL_OK;
}

/* Add the write conflict range of one key. */
static int write_conflict_key(rl_txn *t, const uint8_t *k, uint32_t kl) {
    uint8_t *e = rl__arena_key_after(&t->arena, k, kl);
    if (!e) return RL_E_OUT_OF_MEMORY;
    return range_add_owned(t, &t->writes, e, kl, e, kl + 1);
}

/* Where a write started, so that a write failing half way (out of memory) can be undone: the
 * mutation log, the write conflict ranges and the size go back; the write map is changed last and
 * a failing write-map call leaves at most an atomic entry with no operations (which reads as the
 * stored value, i.e. as if absent) and unused arena bytes. */
typedef struct {
    size_t n_muts, n_writes, size;
} write_mark;

static write_mark mark(const rl_txn *t) {
    write_mark m = {t->n_muts, t->writes.n, t->size};
    return m;
}

static int undo(rl_txn *t, write_mark m, int rc) {
    if (rc) {
        t->n_muts = m.n_muts;
        t->writes.n = m.n_writes;
        t->size = m.size;
    } else {
        t->next_write_no_wcr = 0; /* NEXT_WRITE_NO_WRITE_CONFLICT_RANGE covers one write */
    }
    return rc;
}

static int do_set(rl_txn *t, const void *key, size_t key_len, const void *value, size_t value_len) {
    if (!t || (!value && value_len)) return RL_E_INVALID_ARGUMENT;
    int rc = check_write(t, key, key_len, value_len, 1, 3 * key_len + 1 + value_len);
    if (rc) return rc;
    write_mark m = mark(t);
    rc = log_mut(t, RL_MUT_SET, key, key_len, value, value_len);
    if (rc == RL_OK && !t->next_write_no_wcr) rc = write_conflict_key(t, key, (uint32_t)key_len);
    if (rc == RL_OK) rc = rl__wmap_set(&t->wm, key, (uint32_t)key_len, value, (uint32_t)value_len);
    return undo(t, m, rc);
}

static int do_clear(rl_txn *t, const void *key, size_t key_len) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    int rc = check_write(t, key, key_len, 0, 0, 3 * key_len + 1);
    if (rc) return rc;
    write_mark m = mark(t);
    rc = log_mut(t, RL_MUT_CLEAR, key, key_len, NULL, 0);
    if (rc == RL_OK && !t->next_write_no_wcr) rc = write_conflict_key(t, key, (uint32_t)key_len);
    if (rc == RL_OK) rc = rl__wmap_clear(&t->wm, key, (uint32_t)key_len);
    return undo(t, m, rc);
}

static int do_clear_range(rl_txn *t, const void *begin, size_t begin_len, const void *end, size_t end_len) {
    if (!t || (!begin && begin_len) || (!end && end_len)) return RL_E_INVALID_ARGUMENT;
    int rc = check_write(t, begin, begin_len, 0, 0, 2 * (begin_len + end_len));
    if (rc) return rc;
    if (end_len > RL_KEY_SIZE_LIMIT + 1) return RL_E_KEY_TOO_LARGE;
    const uint8_t *mk;
    uint32_t mkl;
    max_key(t, &mk, &mkl);
    if (kcmp(end, (uint32_t)end_len, mk, mkl) > 0)
        return t->access_system_keys ? RL_E_KEY_OUTSIDE_LEGAL_RANGE : RL_E_SYSTEM_KEY_WRITE;
    int c = kcmp(begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    if (c > 0) return RL_E_INVERTED_RANGE;
    if (c == 0) return RL_OK;
    write_mark m = mark(t);
    rc = log_mut(t, RL_MUT_CLEAR_RANGE, begin, begin_len, end, end_len);
    if (rc == RL_OK && !t->next_write_no_wcr)
        rc = range_add(t, &t->writes, begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    if (rc == RL_OK) rc = rl__wmap_clear_range(&t->wm, begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    return undo(t, m, rc);
}

/* The 4-byte little-endian placeholder offset at the end of p, if the 10-byte placeholder fits
 * before it; -1 otherwise. */
static long vs_offset(const uint8_t *p, size_t n) {
    if (n < 4) return -1;
    uint32_t off = (uint32_t)p[n - 4] | (uint32_t)p[n - 3] << 8 | (uint32_t)p[n - 2] << 16 | (uint32_t)p[n - 1] << 24;
    if ((uint64_t)off + 10 > n - 4) return -1;
    return (long)off;
}

static int do_atomic_op(rl_txn *t, const void *key, size_t key_len, const void *param, size_t param_len,
                        rl_atomic_op op) {
    if (!t || (!param && param_len) || (!key && key_len)) return RL_E_INVALID_ARGUMENT;
    switch (op) {
    case RL_ATOMIC_ADD:
    case RL_ATOMIC_BIT_AND:
    case RL_ATOMIC_BIT_OR:
    case RL_ATOMIC_BIT_XOR:
    case RL_ATOMIC_APPEND_IF_FITS:
    case RL_ATOMIC_MAX:
    case RL_ATOMIC_MIN:
    case RL_ATOMIC_SET_VERSIONSTAMPED_KEY:
    case RL_ATOMIC_SET_VERSIONSTAMPED_VALUE:
    case RL_ATOMIC_BYTE_MIN:
    case RL_ATOMIC_BYTE_MAX:
    case RL_ATOMIC_COMPARE_AND_CLEAR: break;
    default: return RL_E_INVALID_MUTATION_TYPE;
    }
    int rc;
    if (op == RL_ATOMIC_SET_VERSIONSTAMPED_KEY) {
        /* The key is unknown until commit: it conflicts over every key it could become. */
        rc = check_write(t, key, key_len >= 4 ? key_len - 4 : key_len, param_len, 1, 3 * key_len + 1 + param_len);
        if (rc) return rc;
        long off = vs_offset(key, key_len);
        if (off < 0) return RL_E_CLIENT_INVALID_OPERATION;
        size_t kl = key_len - 4;
        uint8_t *lo = rl__arena_alloc(&t->arena, kl);
        uint8_t *hi = rl__arena_alloc(&t->arena, kl + 1);
        if (!lo || !hi) return RL_E_OUT_OF_MEMORY;
        memcpy(lo, key, kl);
        memcpy(hi, key, kl);
        memset(lo + off, 0x00, 10);
        memset(hi + off, 0xff, 10);
        hi[kl] = 0;
        write_mark m = mark(t);
        rc = log_mut(t, RL_MUT_SET_VERSIONSTAMPED_KEY, key, key_len, param, param_len);
        if (rc == RL_OK && !t->next_write_no_wcr) rc = range_add(t, &t->writes, lo, (uint32_t)kl, hi, (uint32_t)kl + 1);
        return undo(t, m, rc);
    }
    size_t vlen = param_len;
    if (op == RL_ATOMIC_SET_VERSIONSTAMPED_VALUE) {
        if (vs_offset(param, param_len) < 0) {
            rc = check_write(t, key, key_len, param_len, 1, 0);
            return rc ? rc : RL_E_CLIENT_INVALID_OPERATION;
        }
        vlen = param_len - 4;
    }
    rc = check_write(t, key, key_len, vlen, 1, 3 * key_len + 1 + param_len);
    if (rc) return rc;
    write_mark m = mark(t);
    rc = log_mut(t, (int)op, key, key_len, param, param_len);
    if (rc == RL_OK && !t->next_write_no_wcr) rc = write_conflict_key(t, key, (uint32_t)key_len);
    if (rc == RL_OK) rc = rl__wmap_atomic(&t->wm, key, (uint32_t)key_len, (int)op, param, (uint32_t)param_len);
    return undo(t, m, rc);
}

static int do_add_conflict_range(rl_txn *t, const void *begin, size_t begin_len, const void *end, size_t end_len,
                                 rl_conflict_type type) {
    if (!t || (!begin && begin_len) || (!end && end_len)) return RL_E_INVALID_ARGUMENT;
    if (type != RL_CONFLICT_READ && type != RL_CONFLICT_WRITE) return RL_E_INVALID_ARGUMENT;
    int rc = rl__txn_check_usable(t);
    if (rc) return rc;
    if (begin_len > RL_KEY_SIZE_LIMIT + 1 || end_len > RL_KEY_SIZE_LIMIT + 1) return RL_E_KEY_TOO_LARGE;
    int c = kcmp(begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    if (c > 0) return RL_E_INVERTED_RANGE;
    if (c == 0) return RL_OK;
    return range_add(t, type == RL_CONFLICT_READ ? &t->reads : &t->writes, begin, (uint32_t)begin_len, end,
                     (uint32_t)end_len);
}

/* ---- Writes: the public entry points (invariant 6: under t->mu when asynchronous) ---------- */

int rl_txn_set(rl_txn *t, const void *key, size_t key_len, const void *value, size_t value_len) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = do_set(t, key, key_len, value, value_len);
    rl__watch *fired = rc == RL_OK && t->watches ? rl__watch_take_written(t, key, (uint32_t)key_len, NULL, 0) : NULL;
    rl__txn_unlock(t);
    rl__watch_fire(fired);
    return rc;
}

int rl_txn_clear(rl_txn *t, const void *key, size_t key_len) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = do_clear(t, key, key_len);
    rl__watch *fired = rc == RL_OK && t->watches ? rl__watch_take_written(t, key, (uint32_t)key_len, NULL, 0) : NULL;
    rl__txn_unlock(t);
    rl__watch_fire(fired);
    return rc;
}

int rl_txn_clear_range(rl_txn *t, const void *begin, size_t begin_len, const void *end, size_t end_len) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = do_clear_range(t, begin, begin_len, end, end_len);
    rl__watch *fired = rc == RL_OK && t->watches
                           ? rl__watch_take_written(t, begin, (uint32_t)begin_len, end, (uint32_t)end_len)
                           : NULL;
    rl__txn_unlock(t);
    rl__watch_fire(fired);
    return rc;
}

int rl_txn_atomic_op(rl_txn *t, const void *key, size_t key_len, const void *param, size_t param_len, rl_atomic_op op) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = do_atomic_op(t, key, key_len, param, param_len, op);
    rl__watch *fired = rc == RL_OK && t->watches ? rl__watch_take_written(t, key, (uint32_t)key_len, NULL, 0) : NULL;
    rl__txn_unlock(t);
    rl__watch_fire(fired);
    return rc;
}

int rl_txn_add_conflict_range(rl_txn *t, const void *begin, size_t begin_len, const void *end, size_t end_len,
                              rl_conflict_type type) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = do_add_conflict_range(t, begin, begin_len, end, end_len, type);
    rl__txn_unlock(t);
    return rc;
}

/* ---- Versionstamps and the committed version --------------------------------------------- */

int rl_txn_get_committed_version(rl_txn *t, int64_t *out) {
    if (!t || !out) return RL_E_INVALID_ARGUMENT;
    rl__txn_lock(t);
    int rc = t->committed ? RL_OK : RL_E_CLIENT_INVALID_OPERATION;
    if (rc == RL_OK) *out = t->committed_version;
    rl__txn_unlock(t);
    return rc;
}

rl_future *rl_txn_get_versionstamp(rl_txn *t) {
    if (!t) return rl__future_error(RL_FUT_KEY, RL_E_INVALID_ARGUMENT);
    rl_future *f = rl__future_new(RL_FUT_KEY);
    if (f->is_static) return f;
    int rc = RL_OK;
    rl__txn_lock(t);
    if (t->committed) {
        if (t->committed_version < 0) {
            rc = RL_E_NO_COMMIT_VERSION;
        } else {
            uint8_t *p = rl__arena_memdup(&f->arena, t->versionstamp, 10);
            if (p) {
                f->data = p;
                f->len = 10;
            } else {
                rc = RL_E_OUT_OF_MEMORY;
            }
        }
    } else { /* pending until the commit; FoundationDB allows any number of them */
        f->vs_owner = t;
        f->vs_next = t->vs_future;
        t->vs_future = f;
        rl__txn_unlock(t);
        return f;
    }
    rl__txn_unlock(t);
    rl__future_complete(f, rc);
    return f;
}

/* ---- The retry step ---------------------------------------------------------------------- */

/* The backoff timer fired: the on_error future is ready. */
static void backoff_done(void *ud) {
    rl_future *f = ud;
    rl__future_complete(f, RL_OK);
    rl__future_unref(f);
}

rl_future *rl_txn_on_error(rl_txn *t, int error) {
    if (!t) return rl__future_error(RL_FUT_NONE, RL_E_INVALID_ARGUMENT);
    if (!rl_error_retryable(error)) return rl__future_error(RL_FUT_NONE, error);
    rl__txn_lock(t);
    int rc = RL_OK;
    if (t->retry_limit >= 0 && t->retries >= t->retry_limit) rc = error;
    else if (timed_out(t)) rc = RL_E_TRANSACTION_TIMED_OUT;
    if (rc) {
        rl__txn_unlock(t);
        return rl__future_error(RL_FUT_NONE, rc);
    }
    /* Backoff: a random delay in [backoff/2, backoff], then double up to max_retry_delay. */
    int64_t cap = t->max_retry_delay_ms;
    int64_t backoff = t->backoff_ms < cap ? t->backoff_ms : cap;
    pthread_mutex_lock(&t->db->mu);
    uint64_t z = (t->db->seed += 0x9e3779b97f4a7c15ull);
    pthread_mutex_unlock(&t->db->mu);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 31;
    uint64_t us = (uint64_t)backoff * 1000;
    if (us) us = us / 2 + z % (us / 2 + 1);
    t->backoff_ms = backoff * 2 < cap ? backoff * 2 : cap;
    if (t->backoff_ms < 1) t->backoff_ms = 1;
    t->retries++;
    int vs_err = 0;
    rl__watch *wl = NULL;
    rl_future *vs = reset_state(t, &vs_err, &wl);
    rl__txn_unlock(t);
    complete_vs(vs, vs_err);
    cancel_watches(wl);
    /* The transaction is usable again at once; the future becomes ready after the delay, on the
     * timer thread (the caller waits on it, or registers a callback). */
    rl_future *f = rl__future_new(RL_FUT_NONE);
    if (f->is_static) return f;
    if (us == 0) {
        rl__future_complete(f, RL_OK);
        return f;
    }
    rl__future_ref(f);
    if (rl__kv_timer_add(rl__clock_mono_ns() + us * 1000, backoff_done, f) != RL_OK) {
        rl__future_unref(f);
        rl__clock_sleep_us(us); /* no timer: wait here rather than not at all */
        rl__future_complete(f, RL_OK);
    }
    return f;
}
