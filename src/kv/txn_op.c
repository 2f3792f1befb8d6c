/* txn_op.c — the operations of a transaction that go to the backend and complete later: the read
 * version, get, get_key, get_range, get_mapped_range and commit. Each is an *operation* (txn_op)
 * living in the arena of the future it fills; a small driver runs it step by step, issuing one
 * backend request at a time and continuing from the request's completion, on whichever thread
 * completes it.
 *
 * Read your writes. A read the write map cannot affect goes to the backend as it is, selectors
 * and all (the backend resolves an offset where the data is: one request for a skip). Otherwise
 * the read merges the backend's rows with the write map: the part of the write map the read can
 * see is copied when the read is issued (asynchronous backends), so writes issued after it never
 * show through, and selectors are resolved over the merged view by reading rows in batches. A
 * batch skips the keys at its front the transaction cleared; one with nothing left to read is
 * answered without the backend (op->local), so a read the writes fully determine is never too old.
 *
 * Conflict ranges (FoundationDB's rules) are added when the read completes:
 *   - a get adds its key, unless the write map fully answered it (then no backend read at all);
 *   - a range adds [begin span, end span) from the selectors' anchors and resolved keys, trimmed
 *     after the last row when a limit cut it off (before it in reverse);
 *   - a selector adds the span from its anchor to the key it resolved to;
 *   - a mapped range adds its primary range and every secondary read, and fails with 2039 when
 *     one of them meets a write of the transaction (checked against the write map at
 *     completion, as FoundationDB does).
 *   A failed read adds nothing.
 *
 * Operation states:
 *
 *     issue ──(no read version yet)──▶ WAITING_RV ──version arrives──▶ RUNNING
 *       │                                   │ reset/free/cancel             │ step: request ─▶ (backend)
 *       └────────(version known)──────────────────────────────────────────▶ │ ◀── completion
 *                                           ▼                               ▼
 *                                       CANCELLED ◀──reset/free/cancel── DONE (future ready)
 *
 *     transition                           function            thread
 *     -----------------------------------  ------------------  ------------------------------
 *     issue, WAITING_RV or RUNNING         op_start            caller
 *     WAITING_RV -> RUNNING                rl__txn_rv_ready    whoever completes the version
 *     RUNNING: one step, maybe a request   op_drive / op_step  caller, then the completer's
 *     RUNNING -> DONE                      op_finish           same
 *     * -> CANCELLED                       rl__txn_cancel_ops  the caller of reset/free/cancel
 *
 * Invariants:
 *   1. An operation holds one reference to its future and (asynchronous backends) one to its
 *      transaction from op_start until it ends: DONE, or CANCELLED with no request outstanding.
 *      A cancelled operation whose request is outstanding ends when the request completes.
 *   2. With an asynchronous backend every step runs under t->mu (so a step never races the
 *      user's writes, a reset or another completion); the lock is never held while a future
 *      completes (user callbacks may call into the transaction), nor during a read's backend
 *      call (its inputs are the operation's own: invariant 4), only during a commit's (which
 *      borrows the transaction's mutations and ranges).
 *   3. A backend request completes either inside the call that starts it or later; op->io says
 *      which (an atomic hand-off), so an inline completion continues the loop of the driver that
 *      issued it instead of recursing, and a late one drives the operation itself.
 *   4. Inputs (keys, selectors, the mapper) are copied into the future's arena at issue: callers
 *      such as the query cursor reuse their buffers at once.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "kv/kv_int.h"

#define SERIAL_BYTES 80000

static const uint8_t key_ff[] = {0xff};
static const uint8_t key_ffff[] = {0xff, 0xff};

enum { OP_RV = 1, OP_GET, OP_GET_KEY, OP_RANGE, OP_MAPPED, OP_COMMIT };
enum { IO_IDLE = 0, IO_ISSUING, IO_WAITING, IO_DONE };
enum { ST_WAITING_RV = 1, ST_RUNNING, ST_WAITING_COMMIT, ST_DONE, ST_CANCELLED };
enum { STEP_DONE = 0, STEP_READ, STEP_COMMIT, STEP_PARK };

/* ---- Merged reads: a range over the snapshot merged with a write map, in batches ---------- */

typedef struct {
    rl_keyvalue *v; /* heap */
    int n;
    size_t cap;
} kvvec;

typedef struct {
    /* The range and its limits. */
    const uint8_t *b, *e;
    uint32_t bl, el;
    int limit;
    long target;
    int reverse;
    /* Progress. */
    const uint8_t *cb, *ce; /* the part not merged yet */
    uint32_t cbl, cel;
    int batch;
    long bytes;
    int over; /* the limit is reached: one more row only sets `more` */
    int more;
    kvvec out;
} mrange;

/* A selector being resolved over the merged view. */
typedef struct {
    rl_key_selector sel;
    const uint8_t *key, *lo, *hi; /* result and its conflict span */
    uint32_t key_len, lo_len, hi_len;
} msel;

struct txn_op {
    rl_txn *t;
    rl_future *f;
    uint64_t gen;        /* the transaction's generation at issue */
    txn_op *next, *prev; /* t->ops while RUNNING; t->rv_waiters (next) while WAITING_RV */
    int kind;            /* OP_* */
    int state;           /* ST_*, under t->mu */
    int linked;          /* in t->ops (reads only; under t->mu) */
    int io;              /* IO_*, atomic (invariant 3) */
    int io_err;
    int snapshot, reverse;
    int stage;  /* of a merged read */
    int direct; /* the backend's result is the answer (no merge) */
    int local;  /* the request set up in r reads only keys the write map cleared: no backend call */
    /* Inputs (copies in f->arena). */
    const uint8_t *key;
    uint32_t key_len;
    rl_key_selector sb, se;
    int limit;
    long target;
    const uint8_t *mapper;
    size_t mapper_len;
    int sec_strategy;  /* OP_MAPPED: rl_secondary_strategy from the flags */
    int omit_index;    /* OP_MAPPED: RL_MAPPED_OMIT_INDEX */
    int defer_remote;  /* OP_MAPPED: RL_MAPPED_DEFER_REMOTE */
    const uint8_t *mk; /* the readable keyspace's end */
    uint32_t mk_len;
    /* The write map as the read sees it (t->wm itself when the backend completes inline). */
    const rl__wmap *wm;
    const rl__wm_point *pt; /* OP_GET: the write map's point over an unknown stored value */
    /* The request in flight. */
    rl__kv_read r;
    /* Not zeroed by op_new (each is set before use; mr.out.v is cleared there). */
    rl__wmap wm_copy;
    rl__wm_point pt_copy;
    msel rs[2]; /* merged reads: the selectors being resolved */
    mrange mr;  /* merged reads: the range being merged */
    rl__kv_commit c;
};

/* ---- Small helpers ----------------------------------------------------------------------- */

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

static void max_key(const rl_txn *t, const uint8_t **k, uint32_t *kl) {
    if (t->access_system_keys) *k = key_ffff, *kl = 2;
    else *k = key_ff, *kl = 1;
}

/* kcmp(k, max key) > 0 (>= 0 with or_equal). Every max key starts with 0xff, so most keys are
 * decided by their first byte. */
static int past_max(const rl_txn *t, const uint8_t *k, uint32_t kl, int or_equal) {
    if (kl == 0 || k[0] != 0xff) return 0;
    const uint8_t *mk;
    uint32_t mkl;
    max_key(t, &mk, &mkl);
    int c = kcmp(k, kl, mk, mkl);
    return or_equal ? c >= 0 : c > 0;
}

static int check_flags(int flags, int allowed) { return (flags & ~allowed) ? RL_E_INVALID_ARGUMENT : RL_OK; }

/* The anchor of sel (the first key >= it is offset 1), clamped to the max key, in arena a. */
static const uint8_t *sel_anchor(const rl_txn *t, const rl_key_selector *sel, rl_arena *a, uint32_t *out_len) {
    const uint8_t *mk;
    uint32_t mkl;
    max_key(t, &mk, &mkl);
    if (!sel->or_equal) {
        *out_len = sel->key_len;
        return sel->key;
    }
    const uint8_t *an = rl__arena_key_after(a, sel->key, sel->key_len);
    if (!an) return NULL;
    *out_len = sel->key_len + 1;
    if (past_max(t, an, *out_len, 0)) {
        *out_len = mkl;
        return mk;
    }
    return an;
}

/* Copy a selector's key into arena a; normalise an or_equal anchor past the max key to the max
 * key itself (the same selector). */
static int copy_sel(const rl_txn *t, const rl_key_selector *in, rl_arena *a, rl_key_selector *out) {
    if (!in->key && in->key_len) return RL_E_INVALID_ARGUMENT;
    if (past_max(t, in->key ? in->key : (const uint8_t *)"", in->key_len, 0)) return RL_E_KEY_OUTSIDE_LEGAL_RANGE;
    *out = *in;
    if (!in->key) out->key = (const uint8_t *)"";
    else if (t->is_async) /* invariant 4 (an inline read is over before the caller returns) */
        out->key = rl__arena_memdup(a, in->key, in->key_len);
    if (!out->key) return RL_E_OUT_OF_MEMORY;
    if (in->or_equal && past_max(t, out->key, out->key_len, 1)) {
        const uint8_t *mk;
        uint32_t mkl;
        max_key(t, &mk, &mkl);
        out->key = mk;
        out->key_len = mkl;
        out->or_equal = 0;
    }
    return RL_OK;
}

static int kvvec_push(kvvec *x, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl) {
    if (RL_GROW(x->v, x->cap, (size_t)x->n + 1, 16)) return RL_E_OUT_OF_MEMORY;
    x->v[x->n].key = k;
    x->v[x->n].key_len = kl;
    x->v[x->n].value = v;
    x->v[x->n].value_len = vl;
    x->n++;
    return RL_OK;
}

/* FoundationDB's limit rules: resolve mode and target bytes. */
static int range_limits(int limit, int target_bytes, rl_streaming_mode mode, int iteration, int *out_limit,
                        long *out_target) {
    if (limit < 0 || target_bytes < 0) return RL_E_RANGE_LIMITS_INVALID;
    long mode_bytes;
    switch (mode) {
    case RL_STREAMING_WANT_ALL: mode_bytes = 0; break;
    case RL_STREAMING_EXACT:
        if (limit == 0 && target_bytes == 0) return RL_E_EXACT_MODE_WITHOUT_LIMITS;
        mode_bytes = 0;
        break;
    case RL_STREAMING_ITERATOR: {
        if (iteration < 1) return RL_E_CLIENT_INVALID_OPERATION;
        double b = 4096;
        for (int i = 1; i < iteration && b < SERIAL_BYTES; i++) b *= 1.5;
        mode_bytes = b > SERIAL_BYTES ? SERIAL_BYTES : (long)b;
        break;
    }
    case RL_STREAMING_SMALL: mode_bytes = 256; break;
    case RL_STREAMING_MEDIUM: mode_bytes = 1000; break;
    case RL_STREAMING_LARGE: mode_bytes = 4096; break;
    case RL_STREAMING_SERIAL: mode_bytes = SERIAL_BYTES; break;
    default: return RL_E_CLIENT_INVALID_OPERATION;
    }
    long tb = target_bytes;
    if (mode_bytes) tb = tb ? (tb < mode_bytes ? tb : mode_bytes) : mode_bytes;
    *out_limit = limit;
    *out_target = tb;
    return RL_OK;
}

/* Set up op->r for a read. */
static void req_init(txn_op *op, int rop) {
    rl__kv_read *r = &op->r;
    r->op = rop;
    r->version = op->t->rv;
    r->key = NULL, r->key_len = 0;
    r->max_key = op->mk, r->max_key_len = op->mk_len;
    r->limit = 0, r->target_bytes = 0, r->reverse = 0;
    r->mapper = NULL, r->mapper_len = 0;
    r->secondary_strategy = 0;
    r->omit_index = 0;
    r->defer_remote = 0;
    r->arena = &op->f->arena;
    r->present = 0, r->value = NULL, r->value_len = 0;
    r->rbegin = r->rend = NULL, r->rbegin_len = r->rend_len = 0;
    r->kvs = NULL, r->mkvs = NULL, r->n = 0, r->more = 0;
    memset(&r->stats, 0, sizeof r->stats);
    r->trace = __atomic_load_n(&op->t->trace_on, __ATOMIC_RELAXED) > 0;
    r->trace_head = r->trace_tail = NULL;
    r->deadline_ns = rl__txn_deadline_ns(op->t); /* backend.h contract 7 */
    r->abandoned = NULL;
    r->progress = NULL;
    r->began_ns = op->t->start_ns;
}

/* Add counters a onto s (every field: they are all sums, except s2s_peers, a maximum). */
static void stats_add(rl__kv_read_stats *s, const rl__kv_read_stats *a) {
    s->requests += a->requests;
    s->round_trips += a->round_trips;
    s->bytes_sent += a->bytes_sent;
    s->bytes_received += a->bytes_received;
    s->s2s_requests += a->s2s_requests;
    s->s2s_round_trips += a->s2s_round_trips;
    s->req_get += a->req_get;
    s->req_get_key += a->req_get_key;
    s->req_get_range += a->req_get_range;
    s->req_get_mapped += a->req_get_mapped;
    s->coord_requests += a->coord_requests;
    s->coord_bytes_sent += a->coord_bytes_sent;
    s->coord_bytes_received += a->coord_bytes_received;
    s->s2s_bytes_sent += a->s2s_bytes_sent;
    s->s2s_bytes_received += a->s2s_bytes_received;
    if (a->s2s_peers > s->s2s_peers) s->s2s_peers = a->s2s_peers;
    s->grv_requests += a->grv_requests;
    s->grv_waits += a->grv_waits;
}

/* Append one event list (in f's arena) to f's. */
static void trace_move(rl_future *f, rl__kv_trace_event *head, rl__kv_trace_event *tail) {
    if (!head) return;
    if (f->trace_tail) f->trace_tail->next = head;
    else f->trace_head = head;
    f->trace_tail = tail;
}

/* Add the backend's counters (and events) of the request just completed to the future's. */
static void add_stats(txn_op *op) {
    stats_add(&op->f->stats, &op->r.stats);
    trace_move(op->f, op->r.trace_head, op->r.trace_tail);
    op->r.trace_head = op->r.trace_tail = NULL;
}

/* ---- Merged range: step by step --------------------------------------------------------- */

static void mr_init(mrange *m, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, int limit, long target,
                    int reverse) {
    memset(m, 0, sizeof *m);
    m->b = m->cb = b, m->bl = m->cbl = bl;
    m->e = m->ce = e, m->el = m->cel = el;
    m->limit = limit;
    m->target = target;
    m->reverse = reverse;
    m->batch = 64;
}

/* Offer one merged row; 1 when the read is over. */
static int mr_offer(mrange *m, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl, int *rc) {
    if (m->over) {
        m->more = 1;
        return 1;
    }
    *rc = kvvec_push(&m->out, k, kl, v, vl);
    if (*rc) return 1;
    m->bytes += (long)kl + vl;
    if ((m->limit > 0 && m->out.n >= m->limit) || (m->target > 0 && m->bytes >= m->target)) m->over = 1;
    return 0;
}

/* Set up the next batch's backend read of the unmerged part [cb, ce). The part's first keys in
 * the read's direction that the write map cleared are left out of the request (their stored rows
 * would be hidden anyway; the merge still walks the write map's points there); when that is all
 * of it, the request is answered locally with no rows (op->local): a read the transaction's
 * writes fully determine never reaches the backend, as in FoundationDB's read-your-writes, so it
 * cannot fail with transaction_too_old. */
static void mr_request(txn_op *op, mrange *m) {
    long need = m->limit > 0 ? (long)m->limit - m->out.n + 2 : 0;
    if (need > 0 && need < m->batch) need = m->batch;
    if (need > 1000000000L) need = 0;
    int want = m->limit > 0 ? (int)need : (m->target > 0 ? m->batch : 0);
    const uint8_t *rb = m->cb, *re = m->ce;
    uint32_t rbl = m->cbl, rel = m->cel;
    const rl__wm_range *c = m->reverse ? rl__wmap_clear_below(op->wm, re, rel) : rl__wmap_clear_at(op->wm, rb, rbl);
    if (c && !m->reverse) rb = c->end, rbl = c->end_len;
    else if (c) re = c->begin, rel = c->begin_len;
    op->local = kcmp(rb, rbl, re, rel) >= 0;
    req_init(op, RL_KV_GET_RANGE);
    op->r.begin = RL_FIRST_GREATER_OR_EQUAL(rb, rbl);
    op->r.end = RL_FIRST_GREATER_OR_EQUAL(re, rel);
    op->r.limit = want;
    op->r.reverse = m->reverse;
    m->batch = m->batch < 4096 ? m->batch * 2 : m->batch;
}

/* 1 if the write map's point p lies in [b, e). */
static int pt_within(const rl__wm_point *p, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    return kcmp(p->key, p->key_len, b, bl) >= 0 && kcmp(p->key, p->key_len, e, el) < 0;
}

/* Merge the rows of the batch just read (op->r) into m. *out_again: another batch is needed
 * (set up in op->r). */
static int mr_merge(txn_op *op, mrange *m, int *out_again) {
    const rl__wmap *wm = op->wm;
    rl_arena *a = &op->f->arena;
    const rl_keyvalue *rows = op->r.kvs;
    int n = op->r.n, smore = op->r.more, rc = RL_OK;
    *out_again = 0;
    /* The window of keys this batch fully describes. */
    const uint8_t *wb = m->cb, *we = m->ce;
    uint32_t wbl = m->cbl, wel = m->cel;
    if (smore && n > 0) {
        const rl_keyvalue *last = &rows[n - 1];
        if (!m->reverse) {
            we = rl__arena_key_after(a, last->key, last->key_len);
            if (!we) return RL_E_OUT_OF_MEMORY;
            wel = last->key_len + 1;
        } else {
            wb = last->key;
            wbl = last->key_len;
        }
    }
    /* p walks the write map's points in [wb, we), in the read's direction. */
    const rl__wm_point *p = m->reverse ? rl__wmap_seek_before(wm, we, wel) : rl__wmap_seek(wm, wb, wbl);
    if (p && !pt_within(p, wb, wbl, we, wel)) p = NULL;
    int i = 0, over = 0;
    while (!over && (i < n || p)) {
        const rl_keyvalue *r = NULL;
        if (i < n) r = &rows[i];
        int c;
        if (p && r) {
            c = kcmp(p->key, p->key_len, r->key, r->key_len);
            if (m->reverse) c = -c;
        } else {
            c = p ? -1 : 1;
        }
        if (c <= 0) {
            int present = 0;
            const uint8_t *v = NULL;
            uint32_t vl = 0;
            if (c == 0) rc = rl__wmap_resolve(p, 1, r->value, r->value_len, a, &present, &v, &vl);
            else rc = rl__wmap_resolve(p, 0, NULL, 0, a, &present, &v, &vl);
            if (rc) return rc;
            if (c == 0) i++;
            if (present) {
                const uint8_t *kc = rl__arena_memdup(a, p->key, p->key_len);
                const uint8_t *vc = p->kind == WM_VALUE ? rl__arena_memdup(a, v, vl) : v;
                if (!kc || (!vc && vl)) return RL_E_OUT_OF_MEMORY;
                over = mr_offer(m, kc, p->key_len, vc, vl, &rc);
            }
            p = m->reverse ? rl__wmap_prev(p) : rl__wmap_next(p);
            if (p && !pt_within(p, wb, wbl, we, wel)) p = NULL;
        } else {
            i++;
            if (!rl__wmap_in_clear(wm, r->key, r->key_len))
                over = mr_offer(m, r->key, r->key_len, r->value, r->value_len, &rc);
        }
        if (rc) return rc;
    }
    if (over || !smore || n == 0) return RL_OK;
    if (!m->reverse) m->cb = we, m->cbl = wel;
    else m->ce = wb, m->cel = wbl;
    mr_request(op, m);
    *out_again = 1;
    return RL_OK;
}

/* Start m: RL_OK with *out_again 1 (a request is set up) or 0 (nothing to read). */
static int mr_start(txn_op *op, mrange *m, int *out_again) {
    *out_again = 0;
    if (kcmp(m->b, m->bl, m->e, m->el) >= 0) return RL_OK;
    mr_request(op, m);
    *out_again = 1;
    return RL_OK;
}

/* ---- Selectors over the merged view ----------------------------------------------------- */

static int msel_finish(txn_op *op, msel *s);

/* Prepare the merged read that resolves s (for_range: offset 1 resolves to its anchor without
 * reading). *out_read 0 when s is already resolved. */
static int msel_start(txn_op *op, msel *s, int for_range, int *out_read) {
    rl_txn *t = op->t;
    rl_arena *a = &op->f->arena;
    uint32_t anl;
    const uint8_t *an = sel_anchor(t, &s->sel, a, &anl);
    if (!an) return RL_E_OUT_OF_MEMORY;
    *out_read = 0;
    if (for_range && s->sel.offset == 1) {
        s->key = s->lo = s->hi = an;
        s->key_len = s->lo_len = s->hi_len = anl;
        return RL_OK;
    }
    if (s->sel.offset >= 1) {
        s->lo = an, s->lo_len = anl;
        mr_init(&op->mr, an, anl, op->mk, op->mk_len, s->sel.offset, 0, 0);
    } else {
        s->hi = an, s->hi_len = anl;
        long want = 1 - (long)s->sel.offset;
        if (want > 1000000000L) want = 1000000000L;
        mr_init(&op->mr, (const uint8_t *)"", 0, an, anl, (int)want, 0, 1);
    }
    int rc = mr_start(op, &op->mr, out_read);
    if (rc == RL_OK && !*out_read) rc = msel_finish(op, s); /* nothing to read: answered */
    return rc;
}

/* The merged read of s is over (op->mr): take its answer. */
static int msel_finish(txn_op *op, msel *s) {
    mrange *m = &op->mr;
    rl_arena *a = &op->f->arena;
    int rc = RL_OK;
    if (s->sel.offset >= 1) {
        if (m->out.n == s->sel.offset) {
            s->key = m->out.v[m->out.n - 1].key;
            s->key_len = m->out.v[m->out.n - 1].key_len;
            s->hi = rl__arena_key_after(a, s->key, s->key_len);
            s->hi_len = s->key_len + 1;
            if (!s->hi) rc = RL_E_OUT_OF_MEMORY;
        } else {
            s->key = s->hi = op->mk;
            s->key_len = s->hi_len = op->mk_len;
        }
    } else {
        long want = 1 - (long)s->sel.offset;
        if (want > 1000000000L) want = 1000000000L;
        if (m->out.n == want) {
            s->key = s->lo = m->out.v[m->out.n - 1].key;
            s->key_len = s->lo_len = m->out.v[m->out.n - 1].key_len;
        } else {
            s->key = s->lo = (const uint8_t *)"";
            s->key_len = s->lo_len = 0;
        }
    }
    rl__free(m->out.v);
    memset(&m->out, 0, sizeof m->out);
    return rc;
}

/* The conflict span of a selector the backend resolved to key (rules of the file comment). */
static void backend_span(txn_op *op, const rl_key_selector *sel, const uint8_t *key, uint32_t kl, const uint8_t *an,
                         uint32_t anl, int for_range, const uint8_t **lo, uint32_t *lol, const uint8_t **hi,
                         uint32_t *hil, int *out_oom) {
    *out_oom = 0;
    if (for_range && sel->offset == 1) {
        *lo = *hi = an;
        *lol = *hil = anl;
    } else if (sel->offset >= 1) {
        *lo = an, *lol = anl;
        if (kcmp(key, kl, op->mk, op->mk_len) < 0) {
            *hi = rl__arena_key_after(&op->f->arena, key, kl);
            *hil = kl + 1;
            if (!*hi) *out_oom = 1;
        } else {
            *hi = op->mk, *hil = op->mk_len;
        }
    } else {
        *lo = key, *lol = kl;
        *hi = an, *hil = anl;
    }
}

/* ---- Conflict ranges of a completed range read (under t->mu) ----------------------------- */

/* The primary range's conflict: [clo, chi) trimmed by a limit that cut the rows off. */
static int range_conflict(rl_txn *t, txn_op *op, const uint8_t *clo, uint32_t clol, const uint8_t *chi, uint32_t chil,
                          const rl_keyvalue *last, int more) {
    if (more && last) {
        if (!op->reverse) {
            uint8_t *e = rl__arena_key_after(&op->f->arena, last->key, last->key_len);
            return e ? rl__txn_read_conflict(t, clo, clol, e, last->key_len + 1) : RL_E_OUT_OF_MEMORY;
        }
        return rl__txn_read_conflict(t, last->key, last->key_len, chi, chil);
    }
    return rl__txn_read_conflict(t, clo, clol, chi, chil);
}

/* The conflict span of a range the backend resolved (direct path). */
static int direct_span(txn_op *op, const uint8_t **clo, uint32_t *clol, const uint8_t **chi, uint32_t *chil) {
    if (op->sb.offset == 1 && op->se.offset == 1 && !op->sb.or_equal && !op->se.or_equal) {
        /* firstGreaterOrEqual at both ends (scans, record loads): the span is the range. */
        *clo = op->r.rbegin, *clol = op->r.rbegin_len;
        *chi = op->r.rend, *chil = op->r.rend_len;
        return RL_OK;
    }
    rl_arena *a = &op->f->arena;
    uint32_t abl, ael;
    const uint8_t *ab = sel_anchor(op->t, &op->sb, a, &abl);
    const uint8_t *ae = sel_anchor(op->t, &op->se, a, &ael);
    if (!ab || !ae) return RL_E_OUT_OF_MEMORY;
    const uint8_t *lo1, *hi1, *lo2, *hi2;
    uint32_t lo1l, hi1l, lo2l, hi2l;
    int oom1, oom2;
    backend_span(op, &op->sb, op->r.rbegin, op->r.rbegin_len, ab, abl, 1, &lo1, &lo1l, &hi1, &hi1l, &oom1);
    backend_span(op, &op->se, op->r.rend, op->r.rend_len, ae, ael, 1, &lo2, &lo2l, &hi2, &hi2l, &oom2);
    if (oom1 || oom2) return RL_E_OUT_OF_MEMORY;
    const uint8_t *rb = op->r.rbegin, *re = op->r.rend;
    uint32_t rbl = op->r.rbegin_len, rel = op->r.rend_len;
    *clo = kcmp(lo1, lo1l, rb, rbl) < 0 ? lo1 : rb;
    *clol = *clo == lo1 ? lo1l : rbl;
    *chi = kcmp(hi2, hi2l, re, rel) > 0 ? hi2 : re;
    *chil = *chi == hi2 ? hi2l : rel;
    return RL_OK;
}

/* ---- The steps of each kind of operation ------------------------------------------------- */

/* What a step needs next; or STEP_DONE with the future's result fields set and the conflict
 * ranges added (op->io_err holds the outcome). Under t->mu. */
static int step_get(txn_op *op) {
    rl_txn *t = op->t;
    rl_future *f = op->f;
    if (op->stage == 0) {
        op->stage = 1;
        req_init(op, RL_KV_GET);
        op->r.key = op->key;
        op->r.key_len = op->key_len;
        return STEP_READ;
    }
    int rc = op->io_err, present = op->r.present;
    const uint8_t *v = op->r.value;
    uint32_t vl = op->r.value_len;
    if (rc == RL_OK && op->pt) rc = rl__wmap_resolve(op->pt, present, v, vl, &f->arena, &present, &v, &vl);
    if (rc == RL_OK && !op->snapshot) rc = rl__txn_read_conflict_key(t, op->key, op->key_len);
    if (rc == RL_OK) {
        f->present = present;
        f->data = v;
        f->len = vl;
    }
    op->io_err = rc;
    return STEP_DONE;
}

static int step_get_key(txn_op *op) {
    rl_txn *t = op->t;
    rl_future *f = op->f;
    msel *s = &op->rs[0];
    int rc = RL_OK, again = 0;
    if (op->stage == 0) {
        op->stage = 1;
        if (op->direct) {
            req_init(op, RL_KV_GET_KEY);
            op->r.begin = op->sb;
            return STEP_READ;
        }
        s->sel = op->sb;
        if ((rc = msel_start(op, s, 0, &again))) goto out;
        if (again) return STEP_READ;
    } else if ((rc = op->io_err) != RL_OK) {
        goto out;
    } else if (op->direct) {
        uint32_t anl;
        const uint8_t *an = sel_anchor(t, &op->sb, &f->arena, &anl);
        int oom = 0;
        if (!an) {
            rc = RL_E_OUT_OF_MEMORY;
            goto out;
        }
        s->key = op->r.rbegin, s->key_len = op->r.rbegin_len;
        backend_span(op, &op->sb, s->key, s->key_len, an, anl, 0, &s->lo, &s->lo_len, &s->hi, &s->hi_len, &oom);
        if (oom) rc = RL_E_OUT_OF_MEMORY;
    } else {
        if ((rc = mr_merge(op, &op->mr, &again))) goto out;
        if (again) return STEP_READ;
        rc = msel_finish(op, s);
    }
    if (rc == RL_OK && !op->snapshot) rc = rl__txn_read_conflict(t, s->lo, s->lo_len, s->hi, s->hi_len);
    if (rc == RL_OK) {
        f->data = s->key;
        f->len = s->key_len;
    }
out:
    rl__free(op->mr.out.v);
    op->mr.out.v = NULL;
    op->io_err = rc;
    return STEP_DONE;
}

/* Finish a range read: rows in kvs/n (kvs in f->arena, or copied there when heap), conflict
 * span [clo, chi). */
static int range_finish(txn_op *op, rl_keyvalue *kvs, int n, int more, int copy, const uint8_t *clo, uint32_t clol,
                        const uint8_t *chi, uint32_t chil) {
    rl_future *f = op->f;
    int rc = RL_OK;
    if (!op->snapshot) rc = range_conflict(op->t, op, clo, clol, chi, chil, n > 0 ? &kvs[n - 1] : NULL, more);
    if (rc == RL_OK && n > 0) {
        f->kvs = copy ? rl__arena_memdup(&f->arena, kvs, (size_t)n * sizeof *kvs) : kvs;
        if (!f->kvs) rc = RL_E_OUT_OF_MEMORY;
    }
    if (rc == RL_OK) {
        f->count = n;
        f->more = more;
    }
    return rc;
}

static int step_range(txn_op *op) {
    int rc = RL_OK, again = 0;
    if (op->direct) {
        if (op->stage == 0) {
            op->stage = 1;
            req_init(op, RL_KV_GET_RANGE);
            op->r.begin = op->sb;
            op->r.end = op->se;
            op->r.limit = op->limit;
            op->r.target_bytes = op->target;
            op->r.reverse = op->reverse;
            return STEP_READ;
        }
        if ((rc = op->io_err) == RL_OK) {
            const uint8_t *clo, *chi;
            uint32_t clol, chil;
            rc = direct_span(op, &clo, &clol, &chi, &chil);
            if (rc == RL_OK) rc = range_finish(op, op->r.kvs, op->r.n, op->r.more, 0, clo, clol, chi, chil);
        }
        op->io_err = rc;
        return STEP_DONE;
    }
    /* Merged: resolve the begin selector (stage 0-1), the end selector (2-3), read (4-5). */
    for (;;) {
        switch (op->stage) {
        case 0:
            op->rs[0].sel = op->sb;
            op->stage = 1;
            if ((rc = msel_start(op, &op->rs[0], 1, &again))) goto out;
            if (again) return STEP_READ;
            op->stage = 2;
            continue;
        case 1:
            if ((rc = op->io_err) || (rc = mr_merge(op, &op->mr, &again))) goto out;
            if (again) return STEP_READ;
            if ((rc = msel_finish(op, &op->rs[0]))) goto out;
            op->stage = 2;
            continue;
        case 2:
            op->rs[1].sel = op->se;
            op->stage = 3;
            if ((rc = msel_start(op, &op->rs[1], 1, &again))) goto out;
            if (again) return STEP_READ;
            op->stage = 4;
            continue;
        case 3:
            if ((rc = op->io_err) || (rc = mr_merge(op, &op->mr, &again))) goto out;
            if (again) return STEP_READ;
            if ((rc = msel_finish(op, &op->rs[1]))) goto out;
            op->stage = 4;
            continue;
        case 4: {
            msel *b = &op->rs[0], *e = &op->rs[1];
            op->stage = 5;
            mr_init(&op->mr, b->key, b->key_len, e->key, e->key_len, op->limit, op->target, op->reverse);
            if ((rc = mr_start(op, &op->mr, &again))) goto out;
            if (again) return STEP_READ;
            op->stage = 6;
            continue;
        }
        case 5:
            if ((rc = op->io_err) || (rc = mr_merge(op, &op->mr, &again))) goto out;
            if (again) return STEP_READ;
            op->stage = 6;
            continue;
        default: {
            msel *b = &op->rs[0], *e = &op->rs[1];
            const uint8_t *clo = kcmp(b->lo, b->lo_len, b->key, b->key_len) < 0 ? b->lo : b->key;
            uint32_t clol = clo == b->lo ? b->lo_len : b->key_len;
            const uint8_t *chi = kcmp(e->hi, e->hi_len, e->key, e->key_len) > 0 ? e->hi : e->key;
            uint32_t chil = chi == e->hi ? e->hi_len : e->key_len;
            rc = range_finish(op, op->mr.out.v, op->mr.out.n, op->mr.more, 1, clo, clol, chi, chil);
            goto out;
        }
        }
    }
out:
    rl__free(op->mr.out.v);
    op->mr.out.v = NULL;
    op->io_err = rc;
    return STEP_DONE;
}

static int step_mapped(txn_op *op) {
    rl_txn *t = op->t;
    rl_future *f = op->f;
    if (op->stage == 0) {
        op->stage = 1;
        req_init(op, RL_KV_GET_MAPPED);
        op->r.begin = op->sb;
        op->r.end = op->se;
        op->r.limit = op->limit;
        op->r.target_bytes = op->target;
        op->r.reverse = op->reverse;
        op->r.mapper = op->mapper;
        op->r.mapper_len = op->mapper_len;
        op->r.secondary_strategy = op->sec_strategy;
        op->r.omit_index = op->omit_index;
        op->r.defer_remote = op->defer_remote;
        return STEP_READ;
    }
    int rc = op->io_err;
    size_t reads_before = t->reads.n, size_before = t->size;
    const rl_mapped_keyvalue *ents = op->r.mkvs;
    int n = op->r.n, more = op->r.more;
    if (rc == RL_OK) {
        const uint8_t *clo, *chi;
        uint32_t clol, chil;
        rc = direct_span(op, &clo, &clol, &chi, &chil);
        if (rc == RL_OK) rc = range_conflict(t, op, clo, clol, chi, chil, n > 0 ? &ents[n - 1].index : NULL, more);
    }
    for (int i = 0; rc == RL_OK && i < n; i++) {
        const rl_mapped_keyvalue *m = &ents[i];
        if (m->is_range && m->more && m->n_kvs > 0) {
            const rl_keyvalue *last = &m->kvs[m->n_kvs - 1];
            uint8_t *e = rl__arena_key_after(&f->arena, last->key, last->key_len);
            rc = e ? rl__txn_read_conflict(t, m->begin, m->begin_len, e, last->key_len + 1) : RL_E_OUT_OF_MEMORY;
        } else {
            rc = rl__txn_read_conflict(t, m->begin, m->begin_len, m->end, m->end_len);
        }
    }
    /* 2039: any of the ranges just added meets a write of this transaction. */
    for (size_t i = reads_before; rc == RL_OK && i < t->reads.n; i++) {
        const rl__keyrange *r = &t->reads.v[i];
        if (rl__wmap_overlaps(&t->wm, r->begin, r->begin_len, r->end, r->end_len))
            rc = RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES;
    }
    if (rc) { /* a failed read adds no conflict ranges */
        t->reads.n = reads_before;
        t->size = size_before;
    } else {
        f->mkvs = op->r.mkvs;
        f->count = n;
        f->more = more;
    }
    op->io_err = rc;
    return STEP_DONE;
}

/* The commit: wait for the reads in flight, send, take the outcome. */
static int range_cmp(const void *a, const void *b) {
    const rl__keyrange *x = a, *y = b;
    int c = kcmp(x->begin, x->begin_len, y->begin, y->begin_len);
    return c ? c : kcmp(x->end, x->end_len, y->end, y->end_len);
}

/* Sort the ranges of l and merge those that overlap or touch, in place (the bytes stay where they
 * are, in the transaction's arena). Returns the key bytes of what is left. */
static size_t coalesce(rl__rangelist *l) {
    if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, range_cmp);
    size_t out = 0, bytes = 0;
    for (size_t i = 0; i < l->n; i++) {
        rl__keyrange *r = &l->v[i];
        if (out > 0 && kcmp(r->begin, r->begin_len, l->v[out - 1].end, l->v[out - 1].end_len) <= 0) {
            rl__keyrange *p = &l->v[out - 1];
            if (kcmp(r->end, r->end_len, p->end, p->end_len) > 0) p->end = r->end, p->end_len = r->end_len;
        } else {
            l->v[out++] = *r;
        }
    }
    l->n = out;
    for (size_t i = 0; i < out; i++) bytes += (size_t)l->v[i].begin_len + l->v[i].end_len;
    return bytes;
}

/* What the commit sends, sized as FoundationDB sizes a transaction at commit (and only then):
 * the mutations' keys and values plus the conflict ranges, coalesced. */
static size_t committed_size(rl_txn *t) {
    size_t n = coalesce(&t->reads) + coalesce(&t->writes);
    for (size_t i = 0; i < t->n_muts; i++) n += (size_t)t->muts[i].len1 + t->muts[i].len2;
    return n;
}

static int step_commit(txn_op *op) {
    rl_txn *t = op->t;
    if (op->stage == 0) {
        if (t->n_ops > 0) { /* FoundationDB commits after the reads in flight (their ranges) */
            op->state = ST_WAITING_COMMIT;
            t->commit_waiting = op;
            return STEP_PARK;
        }
        /* A commit that waited for reads (or for the read version) past the transaction's
         * timeout is not sent: it fails as every operation does then. */
        uint64_t dl = rl__txn_deadline_ns(t);
        if (dl && rl__clock_mono_ns() >= dl) {
            if (op->gen == t->gen) {
                t->committing = 0;
                t->commit_error = RL_E_TRANSACTION_TIMED_OUT;
            }
            op->io_err = RL_E_TRANSACTION_TIMED_OUT;
            return STEP_DONE;
        }
        if (committed_size(t) > (size_t)t->size_limit) { /* the only place the limit is checked */
            if (op->gen == t->gen) {
                t->committing = 0;
                t->commit_error = RL_E_TRANSACTION_TOO_LARGE;
            }
            op->io_err = RL_E_TRANSACTION_TOO_LARGE;
            return STEP_DONE;
        }
        op->stage = 1;
        memset(&op->c, 0, sizeof op->c);
        op->c.deadline_ns = dl;
        op->c.began_ns = t->start_ns;
        op->c.read_version = t->rv;
        op->c.reads = t->reads.v;
        op->c.n_reads = t->reads.n;
        op->c.writes = t->writes.v;
        op->c.n_writes = t->writes.n;
        op->c.muts = t->muts;
        op->c.n_muts = t->n_muts;
        return STEP_COMMIT;
    }
    int rc = op->io_err;
    if (op->gen != t->gen) return STEP_DONE; /* reset or freed meanwhile: the outcome is only the future's */
    t->committing = 0;
    if (rc == RL_OK) {
        t->committed = 1;
        t->committed_version = (int64_t)op->c.commit_version;
        for (int i = 0; i < 8; i++) t->versionstamp[i] = (uint8_t)(op->c.commit_version >> (56 - 8 * i));
        t->versionstamp[8] = (uint8_t)(op->c.batch_order >> 8);
        t->versionstamp[9] = (uint8_t)op->c.batch_order;
    }
    t->commit_error = rc;
    return STEP_DONE;
}

static int op_step(txn_op *op) {
    switch (op->kind) {
    case OP_RV:
        op->f->i64 = (int64_t)op->t->rv;
        op->io_err = RL_OK;
        return STEP_DONE;
    case OP_GET: return step_get(op);
    case OP_GET_KEY: return step_get_key(op);
    case OP_RANGE: return step_range(op);
    case OP_MAPPED: return step_mapped(op);
    case OP_COMMIT: return step_commit(op);
    }
    op->io_err = RL_E_INTERNAL_ERROR;
    return STEP_DONE;
}

/* ---- The driver --------------------------------------------------------------------------- */

static void op_drive(txn_op *op, int locked);

static void on_read_done(rl__kv_read *r, int err) {
    txn_op *op = r->ud;
    op->io_err = err;
    if (__atomic_exchange_n(&op->io, IO_DONE, __ATOMIC_ACQ_REL) == IO_ISSUING) return;
    add_stats(op); /* a late completion: the driver that issued the request has returned */
    op_drive(op, 0);
}

static void on_commit_done(rl__kv_commit *c, int err) {
    txn_op *op = c->ud;
    op->io_err = err;
    if (__atomic_exchange_n(&op->io, IO_DONE, __ATOMIC_ACQ_REL) == IO_ISSUING) return;
    op_drive(op, 0);
}

static void link_op(rl_txn *t, txn_op *op) {
    op->prev = NULL;
    op->next = t->ops;
    if (t->ops) t->ops->prev = op;
    t->ops = op;
    t->n_ops++;
    op->linked = 1;
}

static void unlink_op(rl_txn *t, txn_op *op) {
    if (!op->linked) return;
    op->linked = 0;
    if (op->prev) op->prev->next = op->next;
    else t->ops = op->next;
    if (op->next) op->next->prev = op->prev;
    op->next = op->prev = NULL;
    t->n_ops--;
}

/* End an operation: drop its references (invariant 1). Without t->mu. */
static void op_end(txn_op *op) {
    rl_txn *t = op->t;
    rl_future *f = op->f;
    rl__future_unref(f);
    rl__txn_unref(t);
}

/* rl__kv_read.abandoned of an operation's read: cancelled, or its future freed by its user. */
static int read_abandoned(const rl__kv_read *r) {
    const txn_op *op = r->ud;
    return __atomic_load_n(&op->state, __ATOMIC_RELAXED) == ST_CANCELLED || rl__future_is_abandoned(op->f);
}

/* rl__kv_read.progress of a mapped read: its first entries, final before it completes, go to its
 * future (rl__future_mapped_publish; the operation holds a reference to it: invariant 1). */
static void read_progress(rl__kv_read *r, const rl_mapped_keyvalue *ents, int n) {
    const txn_op *op = r->ud;
    rl__future_mapped_publish(op->f, ents, n);
}

/* Run op until it needs a backend request that completes later, or finishes (invariants 2, 3).
 * locked: the caller holds t->mu. Returns with t->mu released. */
static void op_drive(txn_op *op, int locked) {
    rl_txn *t = op->t;
    rl__kv_backend *be = t->db->be;
    if (!locked) rl__txn_lock(t);
    for (;;) {
        if (op->state == ST_CANCELLED) { /* its future was completed by the canceller */
            rl__txn_unlock(t);
            op_end(op);
            return;
        }
        int st = op_step(op);
        if (st == STEP_PARK) {
            rl__txn_unlock(t);
            return;
        }
        if (st == STEP_DONE) break;
        if (st == STEP_READ && op->local) { /* answered by the write map: no rows (mr_request) */
            op->local = 0;
            op->io_err = RL_OK;
            continue;
        }
        __atomic_store_n(&op->io, IO_ISSUING, __ATOMIC_RELAXED);
        if (st == STEP_READ) {
            /* The request's inputs are the operation's own (invariant 4), so the backend call
             * runs without t->mu (invariant 2): completions of the transaction's other reads on
             * the backend's thread never wait for this one's planning, routing and sending. */
            op->r.done = on_read_done;
            op->r.ud = op;
            op->r.abandoned = read_abandoned;
            op->r.progress = op->r.op == RL_KV_GET_MAPPED ? read_progress : NULL;
            rl__txn_unlock(t);
            be->vt->read(be, &op->r);
            if (__atomic_exchange_n(&op->io, IO_WAITING, __ATOMIC_ACQ_REL) != IO_DONE) return;
            rl__txn_lock(t);
            add_stats(op);
            continue;
        }
        /* A commit borrows the transaction's mutations and conflict ranges during the call:
         * under t->mu. */
        op->c.done = on_commit_done;
        op->c.ud = op;
        be->vt->commit(be, &op->c);
        if (__atomic_exchange_n(&op->io, IO_WAITING, __ATOMIC_ACQ_REL) == IO_DONE) continue;
        rl__txn_unlock(t);
        return;
    }
    /* DONE. */
    int rc = op->io_err;
    rl_future *vs = NULL;
    int vs_err = 0;
    rl__watch *wl = NULL; /* the commit's watches: registered or failed once t->mu is released */
    int wl_has_rv = t->has_rv;
    rl__version wl_rv = t->rv;
    int64_t wl_cv = t->committed_version;
    if (op->kind == OP_COMMIT) {
        if (op->gen == t->gen) {
            vs = rl__txn_take_versionstamp(t, rc, &vs_err);
            wl = rl__watch_take(t);
        }
    } else {
        unlink_op(t, op);
    }
    op->state = ST_DONE;
    txn_op *commit = NULL;
    if (t->n_ops == 0 && t->commit_waiting) {
        commit = t->commit_waiting;
        t->commit_waiting = NULL;
    }
    /* The operation's reference to t (invariant 1), dropped under the lock already held; a
     * waiting commit holds its own, so `last` is 0 when there is one. t is not touched after
     * the unlock but to destroy it. */
    int last = rl__txn_unref_locked(t);
    if (commit) {
        commit->state = ST_RUNNING;
        op_drive(commit, 1); /* releases the lock */
    } else {
        rl__txn_unlock(t);
    }
    rl__txn_complete_versionstamps(vs, vs_err);
    rl__watch_committed(wl, rc, wl_has_rv, wl_rv, wl_cv);
    rl__future_complete_unref(op->f, rc); /* the operation's reference (invariant 1) */
    if (last) rl__txn_destroy(t);
}

/* ---- Starting and cancelling -------------------------------------------------------------- */

struct txn_grv {
    rl__kv_grv g; /* first: the backend's done hands it back */
    rl_txn *t;
    uint64_t gen;
};

static void on_grv_done(rl__kv_grv *g, int err) {
    txn_grv *q = (txn_grv *)g;
    rl_txn *t = q->t;
    uint64_t gen = q->gen;
    rl__version v = g->version;
    int heap = t->is_async;              /* read before: rl__txn_rv_ready may free t */
    rl__txn_rv_ready(t, gen, err, v, g); /* charges g's stats and event to a waiting read */
    if (heap) rl__free(q);
}

/* A backend that completes inline: ask for t's read version on a request on the stack, which
 * completes before the call returns (rl__txn_rv_ready, running any waiters). */
static void grv_now(rl_txn *t) {
    rl__kv_backend *be = t->db->be;
    txn_grv q;
    memset(&q, 0, sizeof q);
    q.t = t;
    q.gen = t->gen;
    q.g.done = on_grv_done;
    t->grv = &q;
    be->vt->get_read_version(be, &q.g);
    if (t->grv == &q) t->grv = NULL; /* rl__txn_rv_ready clears it unless a reset came first */
}

/* Allocate an operation of kind in f's arena (NULL on OOM). */
static txn_op *op_new(rl_txn *t, rl_future *f, int kind) {
    txn_op *op = rl__arena_alloc(&f->arena, sizeof *op);
    if (!op) return NULL;
    memset(op, 0, offsetof(txn_op, wm_copy));
    op->mr.out.v = NULL;
    op->t = t;
    op->f = f;
    op->kind = kind;
    max_key(t, &op->mk, &op->mk_len);
    return op;
}

/* Start op (inputs set; t->mu held): wait for the read version, or run. Takes the operation's
 * references (invariant 1). Returns with t->mu released. */
static void op_start(txn_op *op) {
    rl_txn *t = op->t;
    rl__future_ref(op->f);
    if (t->is_async) t->refs++;
    op->gen = t->gen;
    if (!t->has_rv) {
        op->state = ST_WAITING_RV;
        op->next = NULL;
        if (t->rv_waiters_tail) t->rv_waiters_tail->next = op;
        else t->rv_waiters = op;
        t->rv_waiters_tail = op;
        if (t->grv) { /* already asked */
            rl__txn_unlock(t);
            return;
        }
        rl__kv_backend *be = t->db->be;
        if (!t->is_async) {
            grv_now(t); /* completes here, running the waiters */
            return;
        }
        txn_grv *q = rl__calloc(1, sizeof *q);
        if (!q) {
            t->refs++; /* as the request would hold: rl__txn_rv_ready drops it */
            uint64_t gen = t->gen;
            rl__txn_unlock(t);
            rl__txn_rv_ready(t, gen, RL_E_OUT_OF_MEMORY, 0, NULL);
            return;
        }
        q->t = t;
        q->gen = t->gen;
        q->g.done = on_grv_done;
        q->g.trace = __atomic_load_n(&t->trace_on, __ATOMIC_RELAXED) > 0;
        q->g.deadline_ns = rl__txn_deadline_ns(t); /* backend.h contract 7 */
        q->g.began_ns = t->start_ns;
        t->grv = q;
        t->refs++;
        __atomic_store_n(&t->rv_ready_ns, 0, __ATOMIC_RELAXED); /* kv_stats.h rl__txn_rv_wait */
        __atomic_store_n(&t->rv_asked_ns, rl__clock_mono_ns(), __ATOMIC_RELEASE);
        rl__txn_unlock(t);
        be->vt->get_read_version(be, &q->g);
        return;
    }
    if (op->kind != OP_COMMIT && op->kind != OP_RV) link_op(t, op);
    op->state = ST_RUNNING;
    op_drive(op, 1);
}

void rl__txn_rv_ready(rl_txn *t, uint64_t gen, int err, rl__version v, const rl__kv_grv *g) {
    int async = t->is_async;
    rl__txn_lock(t);
    if (gen != t->gen || t->user_freed) { /* a reset came first: the waiters were cancelled */
        rl__txn_unlock(t);
        if (async) rl__txn_unref(t);
        return;
    }
    t->grv = NULL;
    if (err == RL_OK) {
        t->rv = v;
        t->has_rv = 1;
        if (async) __atomic_store_n(&t->rv_ready_ns, rl__clock_mono_ns(), __ATOMIC_RELEASE);
    }
    /* One waiter at a time, leaving the rest in the list: a callback that resets the
     * transaction while one runs cancels them (and starts a new generation). */
    txn_op *w;
    int charged = 0; /* the request's counters and event go to the first waiting read */
    while (gen == t->gen && (w = t->rv_waiters)) {
        t->rv_waiters = w->next;
        if (!t->rv_waiters) t->rv_waiters_tail = NULL;
        w->next = NULL;
        if (g && g->stats.requests > 0 && w->kind != OP_COMMIT && w->kind != OP_RV) {
            w->f->stats.grv_waits = 1;
            if (!charged) {
                charged = 1;
                rl__kv_read_stats gs = g->stats;
                gs.grv_requests = gs.requests;
                gs.round_trips = 0; /* grv_waits says it: round_trips stay the read's own */
                stats_add(&w->f->stats, &gs);
                if (g->has_ev) {
                    rl__kv_trace_event *ev = rl__arena_alloc(&w->f->arena, sizeof *ev);
                    if (ev) {
                        *ev = g->ev;
                        ev->next = NULL;
                        trace_move(w->f, ev, ev);
                    }
                }
            }
        }
        if (err) {
            rl_future *vs = NULL;
            int vs_err = 0;
            rl__watch *wl = NULL;
            if (w->kind == OP_COMMIT) {
                t->committing = 0;
                t->commit_error = err;
                vs = rl__txn_take_versionstamp(t, err, &vs_err);
                wl = rl__watch_take(t);
            }
            w->state = ST_DONE;
            rl__txn_unlock(t);
            rl__txn_complete_versionstamps(vs, vs_err);
            rl__watch_committed(wl, err, 0, 0, -1);
            rl__future_complete_unref(w->f, err);
            if (async) rl__txn_unref(t);
        } else {
            if (w->kind != OP_COMMIT && w->kind != OP_RV) link_op(t, w);
            w->state = ST_RUNNING;
            op_drive(w, 1); /* releases the lock */
        }
        rl__txn_lock(t);
    }
    rl__txn_unlock(t);
    if (async) rl__txn_unref(t); /* the request's reference */
}

void rl__txn_cancel_ops(rl_txn *t, int err) {
    /* Reads in flight: their futures complete now; each ends when its request completes. */
    txn_op *cancelled = NULL;
    while (t->ops) {
        txn_op *op = t->ops;
        unlink_op(t, op);
        op->state = ST_CANCELLED;
        op->next = cancelled;
        cancelled = op;
        /* Once the lock is released below, the request's completion may end op (op_drive sees
         * ST_CANCELLED) and drop its future's last reference, which frees op with the future's
         * arena: this reference keeps both until the loop below is done with them. */
        rl__future_ref(op->f);
    }
    /* Operations waiting for the read version: they end now. */
    txn_op *w = t->rv_waiters;
    t->rv_waiters = t->rv_waiters_tail = NULL;
    /* A commit waiting for the reads. */
    if (t->commit_waiting) {
        txn_op *c = t->commit_waiting;
        t->commit_waiting = NULL;
        c->state = ST_DONE;
        c->next = w;
        w = c;
        t->committing = 0;
    }
    if (!cancelled && !w) return;
    /* Complete outside the lock (invariant 2): the caller holds it, so hand the work to a
     * list the caller's unlock does not need; futures here are not touched by anyone else. */
    int async = t->is_async;
    if (async) pthread_mutex_unlock(&t->mu);
    for (txn_op *op = cancelled, *next; op; op = next) {
        next = op->next;
        rl_future *f = op->f;
        rl__future_complete(f, err);
        rl__future_unref(f); /* may free op */
    }
    while (w) {
        txn_op *next = w->next;
        w->state = ST_DONE;
        rl__future_complete_unref(w->f, err);
        if (async) rl__txn_unref(t);
        w = next;
    }
    if (async) pthread_mutex_lock(&t->mu);
}

/* ---- The inline fast path -------------------------------------------------------------------
 *
 * With a backend that completes inline and a read version already known, a read that needs one
 * backend request runs on an operation on the stack: the same steps, no arena allocation, no
 * references, no driver (the embedded backend's cost stays what it was before completions were
 * asynchronous). */

static void inline_done(rl__kv_read *r, int err) { *(int *)r->ud = err; }

/* A transaction of a backend that completes inline, with no read version yet and nothing
 * waiting for one: take it now, as op_start's request would (the same backend call and
 * rl__txn_rv_ready, which has no waiter to run), so that the transaction's first read takes the
 * inline fast path too instead of an operation parked for the version. On failure t still has no
 * version, and the read goes the general way (which asks again and fails its future). */
static void rv_inline(rl_txn *t) {
    if (t->is_async || t->has_rv || t->grv || t->rv_waiters) return;
    grv_now(t);
}

/* Run the one-request operation op (stage 0) to its end; its outcome is op->io_err. */
static void run_inline(txn_op *op) {
    rl__kv_backend *be = op->t->db->be;
    if (op_step(op) == STEP_READ) {
        op->r.done = inline_done;
        op->r.ud = &op->io_err;
        be->vt->read(be, &op->r);
        (void)op_step(op);
    }
}

/* A stack operation: the fields the one-request steps read, nothing else. */
static void stack_op(txn_op *op, rl_txn *t, rl_future *f, int kind) {
    op->t = t;
    op->f = f;
    op->kind = kind;
    op->stage = 0;
    op->direct = 1;
    op->snapshot = op->reverse = 0;
    op->pt = NULL;
    op->wm = NULL;
    op->mr.out.v = NULL;
    max_key(t, &op->mk, &op->mk_len);
}

/* ---- The API ------------------------------------------------------------------------------ */

/* The write map can change what a read sees (read your writes on, and something written). */
static int has_writes(const rl_txn *t) { return !t->ryw_disabled && !rl__wmap_empty(&t->wm); }

rl_future *rl_txn_get_read_version(rl_txn *t) {
    if (!t) return rl__future_error(RL_FUT_INT64, RL_E_INVALID_ARGUMENT);
    rl_future *f = rl__future_new(RL_FUT_INT64);
    if (f->is_static) return f;
    rl__txn_lock(t);
    int rc = rl__txn_check_usable(t);
    txn_op *op = rc ? NULL : op_new(t, f, OP_RV);
    if (!rc && !op) rc = RL_E_OUT_OF_MEMORY;
    if (rc) {
        rl__txn_unlock(t);
        rl__future_complete_unseen(f, rc);
        return f;
    }
    op_start(op);
    return f;
}

rl_future *rl_txn_get(rl_txn *t, const void *key, size_t key_len, int flags) {
    if (!t || (!key && key_len)) return rl__future_error(RL_FUT_VALUE, RL_E_INVALID_ARGUMENT);
    int rc = check_flags(flags, RL_SNAPSHOT);
    if (rc) return rl__future_error(RL_FUT_VALUE, rc);
    rl_future *f = rl__future_new(RL_FUT_VALUE);
    if (f->is_static) return f;
    rl__txn_lock(t);
    if ((rc = rl__txn_check_usable(t))) goto now;
    if (rl__special_key(t->db, key, (uint32_t)key_len)) { /* computed, not stored (special.c) */
        rl_db *db = t->db;
        rl__txn_unlock(t);
        rl__special_start(db, key, (uint32_t)key_len, f);
        return f;
    }
    if (past_max(t, key, (uint32_t)key_len, 1) && !rl__special_forwarded(t->db, key, (uint32_t)key_len)) {
        rc = RL_E_KEY_OUTSIDE_LEGAL_RANGE;
        goto now;
    }
    if (key_len > RL_KEY_SIZE_LIMIT) goto now; /* nothing can be stored there */
    const rl__wm_point *p = NULL;
    if (has_writes(t)) {
        p = rl__wmap_find(&t->wm, key, (uint32_t)key_len);
        if (p && p->kind == WM_UNREADABLE) {
            rc = RL_E_ACCESSED_UNREADABLE;
            goto now;
        }
        if (p && (p->kind == WM_VALUE || p->kind == WM_CLEARED)) { /* the write map answers */
            if (p->kind == WM_VALUE) {
                f->present = 1;
                f->data = rl__arena_memdup(&f->arena, p->value, p->value_len);
                f->len = p->value_len;
                if (!f->data) rc = RL_E_OUT_OF_MEMORY;
            }
            goto now;
        }
        if (!p && rl__wmap_in_clear(&t->wm, key, (uint32_t)key_len)) goto now;
    }
    rv_inline(t);
    if (!t->is_async && t->has_rv) {
        /* The inline fast path, by hand for the most frequent read (step_get's work): the
         * backend's get_now when it has one (no request block, no done callback). */
        rl__kv_backend *be = t->db->be;
        int present = 0;
        const uint8_t *v = NULL;
        uint32_t vl = 0;
        if (be->vt->get_now) {
            rc = be->vt->get_now(be, t->rv, (const uint8_t *)key, (uint32_t)key_len, &f->arena, &present, &v, &vl);
        } else {
            rl__kv_read r;
            r.op = RL_KV_GET;
            r.version = t->rv;
            r.key = (const uint8_t *)key;
            r.key_len = (uint32_t)key_len;
            r.arena = &f->arena;
            r.present = 0;
            r.value = NULL;
            r.value_len = 0;
            r.done = inline_done;
            r.ud = &rc;
            be->vt->read(be, &r);
            present = r.present;
            v = r.value;
            vl = r.value_len;
        }
        if (rc == RL_OK && p) rc = rl__wmap_resolve(p, present, v, vl, &f->arena, &present, &v, &vl);
        if (rc == RL_OK && !(flags & RL_SNAPSHOT))
            rc = rl__txn_read_conflict_key(t, (const uint8_t *)key, (uint32_t)key_len);
        if (rc == RL_OK) {
            f->present = present;
            f->data = v;
            f->len = vl;
        }
        goto now;
    }
    txn_op *op = op_new(t, f, OP_GET);
    if (op) op->key = t->is_async ? rl__arena_memdup(&f->arena, key, key_len) : (const uint8_t *)key;
    if (!op || (!op->key && key_len)) {
        rc = RL_E_OUT_OF_MEMORY;
        goto now;
    }
    op->key_len = (uint32_t)key_len;
    op->snapshot = (flags & RL_SNAPSHOT) != 0;
    if (p && t->is_async) { /* the atomic ops as they are now (the file comment) */
        rl__wmap one;
        const rl__wm_point *q = NULL;
        const uint8_t *after = rl__arena_key_after(&f->arena, p->key, p->key_len); /* [key, key + \0) */
        if (after && rl__wmap_copy_slice(&t->wm, p->key, p->key_len, after, p->key_len + 1, &f->arena, &one) == RL_OK)
            q = rl__wmap_seek(&one, p->key, p->key_len);
        if (!q) {
            rc = RL_E_OUT_OF_MEMORY;
            goto now;
        }
        op->pt_copy = *q;
        p = &op->pt_copy;
    }
    op->pt = p;
    op_start(op);
    return f;
now: /* f is not handed out yet: no one else can see it */
    rl__txn_unlock(t);
    rl__future_complete_unseen(f, rc);
    return f;
}

/* Point op->wm at the write map the read sees: t->wm itself (inline), else a copy of the part
 * [b, e) (e NULL: all of it). */
static int view_writes(txn_op *op, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    rl_txn *t = op->t;
    if (!t->is_async) {
        op->wm = &t->wm;
        return RL_OK;
    }
    int rc = rl__wmap_copy_slice(&t->wm, b, bl, e, el, &op->f->arena, &op->wm_copy);
    op->wm = &op->wm_copy;
    return rc;
}

rl_future *rl_txn_get_key(rl_txn *t, rl_key_selector sel, int flags) {
    if (!t || (!sel.key && sel.key_len)) return rl__future_error(RL_FUT_KEY, RL_E_INVALID_ARGUMENT);
    int rc = check_flags(flags, RL_SNAPSHOT);
    if (rc) return rl__future_error(RL_FUT_KEY, rc);
    rl_future *f = rl__future_new(RL_FUT_KEY);
    if (f->is_static) return f;
    rl__txn_lock(t);
    txn_op *op = NULL;
    if ((rc = rl__txn_check_usable(t))) goto now;
    if (!(op = op_new(t, f, OP_GET_KEY))) {
        rc = RL_E_OUT_OF_MEMORY;
        goto now;
    }
    if ((rc = copy_sel(t, &sel, &f->arena, &op->sb))) goto now;
    op->snapshot = (flags & RL_SNAPSHOT) != 0;
    op->direct = !has_writes(t);
    if (!op->direct && (rc = view_writes(op, (const uint8_t *)"", 0, NULL, 0))) goto now;
    op_start(op);
    return f;
now: /* f is not handed out yet: no one else can see it */
    rl__txn_unlock(t);
    rl__future_complete_unseen(f, rc);
    return f;
}

/* The common part of get_range and get_mapped_range: inputs, limits, the direct decision. */
static int range_setup(rl_txn *t, txn_op *op, const rl_key_selector *begin, const rl_key_selector *end, int limit,
                       int target_bytes, rl_streaming_mode mode, int iteration, int flags, int may_merge) {
    int rc;
    rl_future *f = op->f;
    if ((rc = range_limits(limit, target_bytes, mode, iteration, &op->limit, &op->target))) return rc;
    if ((rc = copy_sel(t, begin, &f->arena, &op->sb)) || (rc = copy_sel(t, end, &f->arena, &op->se))) return rc;
    op->snapshot = (flags & RL_SNAPSHOT) != 0;
    op->reverse = (flags & RL_REVERSE) != 0;
    op->direct = 1;
    if (!may_merge || !has_writes(t)) return RL_OK;
    if (op->sb.offset == 1 && op->se.offset == 1) {
        /* Both ends resolve to their anchors: the write map matters only inside them. */
        uint32_t bl, el;
        const uint8_t *b = sel_anchor(t, &op->sb, &f->arena, &bl);
        const uint8_t *e = sel_anchor(t, &op->se, &f->arena, &el);
        if (!b || !e) return RL_E_OUT_OF_MEMORY;
        if (!rl__wmap_overlaps(&t->wm, b, bl, e, el)) return RL_OK;
        op->direct = 0;
        return view_writes(op, b, bl, e, el);
    }
    op->direct = 0;
    return view_writes(op, (const uint8_t *)"", 0, NULL, 0);
}

rl_future *rl_txn_get_range(rl_txn *t, rl_key_selector begin, rl_key_selector end, int limit, int target_bytes,
                            rl_streaming_mode mode, int iteration, int flags) {
    if (!t) return rl__future_error(RL_FUT_KVS, RL_E_INVALID_ARGUMENT);
    int rc = check_flags(flags, RL_SNAPSHOT | RL_REVERSE);
    if (rc) return rl__future_error(RL_FUT_KVS, rc);
    rl_future *f = rl__future_new(RL_FUT_KVS);
    if (f->is_static) return f;
    rl__txn_lock(t);
    txn_op *op = NULL;
    if ((rc = rl__txn_check_usable(t))) goto now;
    rv_inline(t);
    if (!t->is_async && t->has_rv && begin.offset == 1 && end.offset == 1 && !begin.or_equal && !end.or_equal &&
        !has_writes(t) && (begin.key || !begin.key_len) && (end.key || !end.key_len) &&
        !past_max(t, begin.key, begin.key_len, 0) && !past_max(t, end.key, end.key_len, 0)) {
        /* The inline fast path by hand for firstGreaterOrEqual at both ends and nothing to merge
         * (index pages and record loads: step_range's direct work, the span being the range). */
        int lim;
        long tb;
        if ((rc = range_limits(limit, target_bytes, mode, iteration, &lim, &tb))) goto now;
        rl__kv_read r;
        r.op = RL_KV_GET_RANGE;
        r.version = t->rv;
        r.begin = begin;
        r.end = end;
        if (!r.begin.key) r.begin.key = (const uint8_t *)"";
        if (!r.end.key) r.end.key = (const uint8_t *)"";
        max_key(t, &r.max_key, &r.max_key_len);
        r.limit = lim;
        r.target_bytes = tb;
        r.reverse = (flags & RL_REVERSE) != 0;
        r.arena = &f->arena;
        r.kvs = NULL;
        r.n = r.more = 0;
        r.done = inline_done;
        r.ud = &rc;
        t->db->be->vt->read(t->db->be, &r);
        if (rc == RL_OK && !(flags & RL_SNAPSHOT)) {
            const rl_keyvalue *last = r.n > 0 ? &r.kvs[r.n - 1] : NULL;
            if (r.more && last && !r.reverse) {
                uint8_t *e = rl__arena_key_after(&f->arena, last->key, last->key_len);
                rc = e ? rl__txn_read_conflict(t, r.begin.key, r.begin.key_len, e, last->key_len + 1)
                       : RL_E_OUT_OF_MEMORY;
            } else if (r.more && last) {
                rc = rl__txn_read_conflict(t, last->key, last->key_len, r.end.key, r.end.key_len);
            } else {
                rc = rl__txn_read_conflict(t, r.begin.key, r.begin.key_len, r.end.key, r.end.key_len);
            }
        }
        if (rc == RL_OK) {
            f->kvs = r.kvs;
            f->count = r.n;
            f->more = r.more;
        }
        goto now;
    }
    if (!t->is_async && t->has_rv) {
        txn_op so;
        stack_op(&so, t, f, OP_RANGE);
        if ((rc = range_setup(t, &so, &begin, &end, limit, target_bytes, mode, iteration, flags, 1))) goto now;
        if (so.direct) {
            run_inline(&so);
            rc = so.io_err;
            goto now;
        }
    }
    if (!(op = op_new(t, f, OP_RANGE))) {
        rc = RL_E_OUT_OF_MEMORY;
        goto now;
    }
    if ((rc = range_setup(t, op, &begin, &end, limit, target_bytes, mode, iteration, flags, 1))) goto now;
    op_start(op);
    return f;
now: /* f is not handed out yet: no one else can see it */
    rl__txn_unlock(t);
    rl__future_complete_unseen(f, rc);
    return f;
}

rl_future *rl_txn_get_mapped_range(rl_txn *t, rl_key_selector begin, rl_key_selector end, const void *mapper,
                                   size_t mapper_len, int limit, int target_bytes, rl_streaming_mode mode,
                                   int iteration, int flags) {
    if (!t || (!mapper && mapper_len)) return rl__future_error(RL_FUT_MAPPED, RL_E_INVALID_ARGUMENT);
    int rc = check_flags(flags, RL_SNAPSHOT | RL_REVERSE | RL_MAPPED_INDIVIDUAL | RL_MAPPED_GROUPED |
                                    RL_MAPPED_OMIT_INDEX | RL_MAPPED_DEFER_REMOTE);
    if (rc) return rl__future_error(RL_FUT_MAPPED, rc);
    if ((flags & RL_MAPPED_INDIVIDUAL) && (flags & RL_MAPPED_GROUPED))
        return rl__future_error(RL_FUT_MAPPED, RL_E_INVALID_ARGUMENT);
    int sec = flags & RL_MAPPED_GROUPED      ? RL_SECONDARY_GROUPED
              : flags & RL_MAPPED_INDIVIDUAL ? RL_SECONDARY_INDIVIDUAL
                                             : RL_SECONDARY_DEFAULT;
    rl_future *f = rl__future_new(RL_FUT_MAPPED);
    if (f->is_static) return f;
    rl__txn_lock(t);
    txn_op *op = NULL;
    if ((rc = rl__txn_check_usable(t))) goto now;
    if ((flags & RL_SNAPSHOT) || t->ryw_disabled) {
        rc = RL_E_UNSUPPORTED_OPERATION;
        goto now;
    }
    if (!t->is_async && t->has_rv) {
        txn_op so;
        stack_op(&so, t, f, OP_MAPPED);
        if ((rc = range_setup(t, &so, &begin, &end, limit, target_bytes, mode, iteration, flags, 0))) goto now;
        so.mapper = mapper;
        so.mapper_len = mapper_len;
        so.sec_strategy = sec;
        so.omit_index = (flags & RL_MAPPED_OMIT_INDEX) != 0;
        so.defer_remote = (flags & RL_MAPPED_DEFER_REMOTE) != 0;
        run_inline(&so);
        rc = so.io_err;
        goto now;
    }
    if (!(op = op_new(t, f, OP_MAPPED))) {
        rc = RL_E_OUT_OF_MEMORY;
        goto now;
    }
    /* Selectors resolve over committed data only (FoundationDB reads through at snapshot). */
    if ((rc = range_setup(t, op, &begin, &end, limit, target_bytes, mode, iteration, flags, 0))) goto now;
    op->mapper = t->is_async ? rl__arena_memdup(&f->arena, mapper, mapper_len) : mapper;
    if (!op->mapper && mapper_len) {
        rc = RL_E_OUT_OF_MEMORY;
        goto now;
    }
    op->mapper_len = mapper_len;
    op->sec_strategy = sec;
    op->omit_index = (flags & RL_MAPPED_OMIT_INDEX) != 0;
    op->defer_remote = (flags & RL_MAPPED_DEFER_REMOTE) != 0;
    op_start(op);
    return f;
now: /* f is not handed out yet: no one else can see it */
    rl__txn_unlock(t);
    rl__future_complete_unseen(f, rc);
    return f;
}

rl_future *rl_txn_commit(rl_txn *t) {
    if (!t) return rl__future_error(RL_FUT_NONE, RL_E_INVALID_ARGUMENT);
    rl_future *f = rl__future_new(RL_FUT_NONE);
    if (f->is_static) return f;
    rl__txn_lock(t);
    int rc = rl__txn_check_usable(t);
    if (rc == RL_OK && t->committed) rc = RL_E_USED_DURING_COMMIT;
    if (rc == RL_OK && t->n_muts == 0 && t->writes.n == 0) { /* read-only: nothing to commit */
        t->committed = 1;
        t->committed_version = -1;
        rc = RL_E_NO_COMMIT_VERSION; /* for the versionstamp; the commit itself succeeds */
    }
    txn_op *op = rc ? NULL : op_new(t, f, OP_COMMIT);
    if (rc == RL_OK && !op) rc = RL_E_OUT_OF_MEMORY;
    if (rc) {
        int vs_err = 0;
        if (rc != RL_E_NO_COMMIT_VERSION) t->commit_error = rc;
        rl_future *vs = rl__txn_take_versionstamp(t, rc, &vs_err);
        /* The watches of a read-only commit register now (FoundationDB's too); a commit that
         * fails at once fails them (but a second commit leaves them to the running one). */
        int ro = rc == RL_E_NO_COMMIT_VERSION;
        rl__watch *wl = rc != RL_E_USED_DURING_COMMIT ? rl__watch_take(t) : NULL;
        int has_rv = t->has_rv;
        rl__version rv = t->rv;
        rl__txn_unlock(t);
        rl__txn_complete_versionstamps(vs, vs_err);
        rl__watch_committed(wl, ro ? RL_OK : rc, has_rv, rv, -1);
        rl__future_complete(f, rc == RL_E_NO_COMMIT_VERSION ? RL_OK : rc);
        return f;
    }
    t->committing = 1;
    op_start(op);
    return f;
}
