/* txn.c — rl_txn: the generic transaction layer above a backend (backend.h): read version,
 * writes with their limits, read-your-writes reads (merging the write map of ryw.c with the
 * snapshot), key selectors over the merged view, conflict ranges, commit, the retry step and
 * get_mapped_range's client rules.
 *
 * Invariants:
 *   1. Every write is validated completely (sizes, system keys, the transaction size limit)
 *      before anything changes, so a failed write changes nothing.
 *   2. The mutation log (txn->muts) keeps every write in issue order; it is what the backend
 *      commits. The write map (txn->wm) is only for reads.
 *   3. Non-snapshot reads add read conflict ranges covering everything their result depended on
 *      in the snapshot: a get whose answer the write map fully determines adds none (FoundationDB);
 *      a range adds [begin, end), trimmed to the key after the last row when a limit cut it off;
 *      a selector adds the span from its anchor to the key it resolved to.
 *   4. Results handed out live in the future's arena, never in the transaction's (which a reset
 *      frees while futures may still be alive).
 *   5. Keys readable by users are < "\xff" ("\xff\xff" with ACCESS_SYSTEM_KEYS); a selector or key
 *      beyond is key_outside_legal_range (2004). Writes agree: a "\xff" key without
 *      ACCESS_SYSTEM_KEYS is system_key_write, and a key at or above "\xff\xff" (FoundationDB's
 *      special-key space, never stored) is key_outside_legal_range even with it.
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
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "kv/kv_int.h"

#define DEFAULT_MAX_RETRY_DELAY_MS 1000
#define INITIAL_BACKOFF_MS 10
#define SERIAL_BYTES 80000

static const uint8_t key_ff[] = {0xff};
static const uint8_t key_ffff[] = {0xff, 0xff};

/* ---- Small helpers ----------------------------------------------------------------------- */

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    return rl__bytes_cmp(a, al, b, bl);
}

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

/* kcmp(k, kl, max key) > 0 (or >= 0 with or_equal), i.e. k lies above (at or above) the
 * readable range. Every max key starts with 0xff, so a key that is empty or starts below 0xff
 * is decided by its first byte without the general compare (most keys: record and index keys
 * of user subspaces). */
static int past_max(const rl_txn *t, const uint8_t *k, uint32_t kl, int or_equal) {
    if (kl == 0 || k[0] != 0xff) return 0;
    const uint8_t *mk;
    uint32_t mkl;
    max_key(t, &mk, &mkl);
    int c = kcmp(k, kl, mk, mkl);
    return or_equal ? c >= 0 : c > 0;
}

/* k + "\x00" in arena a (NULL on OOM). */
static uint8_t *key_after(rl_arena *a, const uint8_t *k, uint32_t kl) {
    uint8_t *p = rl__arena_alloc(a, (size_t)kl + 1);
    if (!p) return NULL;
    if (kl) memcpy(p, k, kl);
    p[kl] = 0;
    return p;
}

static void reset_state(rl_txn *t);

/* The common precondition of every operation: not cancelled, not timed out, no commit running. */
static int check_usable(rl_txn *t) {
    if (t->cancelled) return RL_E_TRANSACTION_CANCELLED;
    if (t->committing) return RL_E_USED_DURING_COMMIT;
    if (t->timeout_ms > 0 &&
        rl__clock_mono_ns() - t->start_ns >= (uint64_t)t->timeout_ms * 1000000ull)
        return RL_E_TRANSACTION_TIMED_OUT;
    return RL_OK;
}

static int ensure_rv(rl_txn *t) {
    if (t->has_rv) return RL_OK;
    rl_version v;
    int rc = t->db->be->vt->get_read_version(t->db->be, &v);
    if (rc) return rc;
    t->rv = v;
    t->has_rv = 1;
    return RL_OK;
}

/* Append [b, e) to list l without copying: both must already live in the txn arena (or be
 * static). Counts its size. */
static int range_add_owned(rl_txn *t, rl_rangelist *l, const uint8_t *bc, uint32_t bl,
                           const uint8_t *ec, uint32_t el) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        rl_keyrange *nv = rl__realloc(l->v, nc * sizeof *nv);
        if (!nv) return RL_E_OUT_OF_MEMORY;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n].begin = bc;
    l->v[l->n].begin_len = bl;
    l->v[l->n].end = ec;
    l->v[l->n].end_len = el;
    l->n++;
    t->size += (size_t)bl + el;
    return RL_OK;
}

/* Append a copy of [b, e) to list l (both keys in one txn arena allocation) and count its
 * size. */
static int range_add(rl_txn *t, rl_rangelist *l, const uint8_t *b, uint32_t bl, const uint8_t *e,
                     uint32_t el) {
    uint8_t *bc = rl__arena_alloc(&t->arena, (size_t)bl + el + 1);
    if (!bc) return RL_E_OUT_OF_MEMORY;
    uint8_t *ec = bc + bl;
    if (bl) memcpy(bc, b, bl);
    if (el) memcpy(ec, e, el);
    return range_add_owned(t, l, bc, bl, ec, el);
}

/* Add the read conflict range [b, e) (copied); nothing when it is empty. */
static int read_conflict(rl_txn *t, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (kcmp(b, bl, e, el) >= 0) return RL_OK;
    return range_add(t, &t->reads, b, bl, e, el);
}

/* The single-key range [k, k + "\x00"): one copy serves as both ends (begin is a prefix of
 * end). */
static int read_conflict_key(rl_txn *t, const uint8_t *k, uint32_t kl) {
    uint8_t *e = key_after(&t->arena, k, kl);
    if (!e) return RL_E_OUT_OF_MEMORY;
    return range_add_owned(t, &t->reads, e, kl, e, kl + 1);
}

/* ---- Transactions: lifecycle and options ------------------------------------------------- */

int rl_txn_begin(rl_db *db, rl_txn **out) {
    if (!db || !out) return RL_E_INVALID_ARGUMENT;
    rl_txn *t = rl__calloc(1, sizeof *t);
    if (!t) return RL_E_OUT_OF_MEMORY;
    t->db = db;
    rl__arena_init(&t->arena, 4096);
    rl__wmap_init(&t->wm, &t->arena);
    t->retry_limit = -1;
    t->max_retry_delay_ms = DEFAULT_MAX_RETRY_DELAY_MS;
    t->size_limit = RL_TXN_SIZE_LIMIT;
    t->committed_version = -1;
    t->start_ns = rl__clock_mono_ns();
    t->backoff_ms = INITIAL_BACKOFF_MS;
    *out = t;
    return RL_OK;
}

/* Complete a pending versionstamp future with err (or the stamp when err is RL_OK). */
static void finish_versionstamp(rl_txn *t, int err) {
    rl_future *f = t->vs_future;
    if (!f) return;
    t->vs_future = NULL;
    f->vs_owner = NULL;
    if (err == RL_OK) {
        uint8_t *p = rl__arena_memdup(&f->arena, t->versionstamp, 10);
        if (!p) {
            err = RL_E_OUT_OF_MEMORY;
        } else {
            f->data = p;
            f->len = 10;
        }
    }
    rl__future_complete(f, err);
}

/* Forget reads, writes and the read version (not options or retry state). */
static void reset_state(rl_txn *t) {
    finish_versionstamp(t, RL_E_TRANSACTION_CANCELLED);
    rl__wmap_reset(&t->wm);
    rl__arena_reset(&t->arena);
    t->n_muts = 0;
    t->reads.n = 0;
    t->writes.n = 0;
    t->size = 0;
    t->has_rv = 0;
    t->rv = 0;
    t->cancelled = 0;
    t->committing = 0;
    t->committed = 0;
    t->committed_version = -1;
    t->commit_error = 0;
}

void rl_txn_free(rl_txn *t) {
    if (!t) return;
    finish_versionstamp(t, RL_E_TRANSACTION_CANCELLED);
    rl__wmap_release(&t->wm);
    rl__arena_release(&t->arena);
    rl__free(t->muts);
    rl__free(t->reads.v);
    rl__free(t->writes.v);
    rl__free(t);
}

void rl_txn_reset(rl_txn *t) {
    if (!t) return;
    reset_state(t);
    t->retries = 0;
    t->backoff_ms = INITIAL_BACKOFF_MS;
    t->start_ns = rl__clock_mono_ns();
}

void rl_txn_cancel(rl_txn *t) {
    if (!t) return;
    t->cancelled = 1;
    finish_versionstamp(t, RL_E_TRANSACTION_CANCELLED);
}

int rl_txn_set_option(rl_txn *t, rl_txn_option opt, int64_t value) {
    if (!t) return RL_E_INVALID_ARGUMENT;
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
    case RL_TXN_OPT_ACCESS_SYSTEM_KEYS:
        t->access_system_keys = 1;
        return RL_OK;
    case RL_TXN_OPT_READ_YOUR_WRITES_DISABLE:
        if (t->n_muts || t->reads.n) return RL_E_CLIENT_INVALID_OPERATION;
        t->ryw_disabled = 1;
        return RL_OK;
    }
    return RL_E_INVALID_OPTION;
}

void rl_txn_set_read_version(rl_txn *t, int64_t v) {
    if (!t) return;
    t->rv = (rl_version)v;
    t->has_rv = 1;
}

rl_future *rl_txn_get_read_version(rl_txn *t) {
    int rc = check_usable(t);
    if (rc == RL_OK) rc = ensure_rv(t);
    if (rc) return rl__future_error(RL_FUT_INT64, rc);
    rl_future *f = rl__future_new(RL_FUT_INT64);
    if (f->is_static) return f;
    f->i64 = (int64_t)t->rv;
    rl__future_complete(f, RL_OK);
    return f;
}

/* ---- Writes ------------------------------------------------------------------------------ */

/* Room for one more mutation. */
static int reserve_mut(rl_txn *t) {
    if (t->n_muts < t->cap_muts) return RL_OK;
    size_t nc = t->cap_muts ? t->cap_muts * 2 : 32;
    rl_mutation *nm = rl__realloc(t->muts, nc * sizeof *nm);
    if (!nm) return RL_E_OUT_OF_MEMORY;
    t->muts = nm;
    t->cap_muts = nc;
    return RL_OK;
}

/* Log a mutation (copies in the txn arena). */
static int log_mut(rl_txn *t, int type, const void *p1, size_t l1, const void *p2, size_t l2) {
    int rc = reserve_mut(t);
    if (rc) return rc;
    uint8_t *c1 = rl__arena_memdup(&t->arena, p1, l1);
    uint8_t *c2 = rl__arena_memdup(&t->arena, p2, l2);
    if (!c1 || !c2) return RL_E_OUT_OF_MEMORY;
    rl_mutation *m = &t->muts[t->n_muts++];
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
static int check_write(rl_txn *t, const void *key, size_t key_len, size_t value_len, int has_value,
                       size_t extra) {
    int rc = check_usable(t);
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
    if (t->size + extra > (size_t)t->size_limit) return RL_E_TRANSACTION_TOO_LARGE;
    return RL_OK;
}

/* Add the write conflict range of one key. */
static int write_conflict_key(rl_txn *t, const uint8_t *k, uint32_t kl) {
    uint8_t *e = key_after(&t->arena, k, kl);
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
    }
    return rc;
}

int rl_txn_set(rl_txn *t, const void *key, size_t key_len, const void *value, size_t value_len) {
    if (!t || (!value && value_len)) return RL_E_INVALID_ARGUMENT;
    int rc = check_write(t, key, key_len, value_len, 1, 3 * key_len + 1 + value_len);
    if (rc) return rc;
    write_mark m = mark(t);
    rc = log_mut(t, RL_MUT_SET, key, key_len, value, value_len);
    if (rc == RL_OK) rc = write_conflict_key(t, key, (uint32_t)key_len);
    if (rc == RL_OK) rc = rl__wmap_set(&t->wm, key, (uint32_t)key_len, value, (uint32_t)value_len);
    return undo(t, m, rc);
}

int rl_txn_clear(rl_txn *t, const void *key, size_t key_len) {
    if (!t) return RL_E_INVALID_ARGUMENT;
    int rc = check_write(t, key, key_len, 0, 0, 3 * key_len + 1);
    if (rc) return rc;
    write_mark m = mark(t);
    rc = log_mut(t, RL_MUT_CLEAR, key, key_len, NULL, 0);
    if (rc == RL_OK) rc = write_conflict_key(t, key, (uint32_t)key_len);
    if (rc == RL_OK) rc = rl__wmap_clear(&t->wm, key, (uint32_t)key_len);
    return undo(t, m, rc);
}

int rl_txn_clear_range(rl_txn *t, const void *begin, size_t begin_len, const void *end,
                       size_t end_len) {
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
    if (rc == RL_OK)
        rc = range_add(t, &t->writes, begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    if (rc == RL_OK)
        rc = rl__wmap_clear_range(&t->wm, begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    return undo(t, m, rc);
}

/* The 4-byte little-endian placeholder offset at the end of p, if the 10-byte placeholder fits
 * before it; -1 otherwise. */
static long vs_offset(const uint8_t *p, size_t n) {
    if (n < 4) return -1;
    uint32_t off = (uint32_t)p[n - 4] | (uint32_t)p[n - 3] << 8 | (uint32_t)p[n - 2] << 16 |
                   (uint32_t)p[n - 1] << 24;
    if ((uint64_t)off + 10 > n - 4) return -1;
    return (long)off;
}

int rl_txn_atomic_op(rl_txn *t, const void *key, size_t key_len, const void *param,
                     size_t param_len, rl_atomic_op op) {
    if (!t || (!param && param_len) || (!key && key_len)) return RL_E_INVALID_ARGUMENT;
    switch (op) {
    case RL_ATOMIC_ADD: case RL_ATOMIC_BIT_AND: case RL_ATOMIC_BIT_OR: case RL_ATOMIC_BIT_XOR:
    case RL_ATOMIC_APPEND_IF_FITS: case RL_ATOMIC_MAX: case RL_ATOMIC_MIN:
    case RL_ATOMIC_SET_VERSIONSTAMPED_KEY: case RL_ATOMIC_SET_VERSIONSTAMPED_VALUE:
    case RL_ATOMIC_BYTE_MIN: case RL_ATOMIC_BYTE_MAX: case RL_ATOMIC_COMPARE_AND_CLEAR:
        break;
    default:
        return RL_E_INVALID_MUTATION_TYPE;
    }
    int rc;
    if (op == RL_ATOMIC_SET_VERSIONSTAMPED_KEY) {
        /* The key is unknown until commit: it conflicts over every key it could become. */
        rc = check_write(t, key, key_len >= 4 ? key_len - 4 : key_len, param_len, 1,
                         3 * key_len + 1 + param_len);
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
        if (rc == RL_OK) rc = range_add(t, &t->writes, lo, (uint32_t)kl, hi, (uint32_t)kl + 1);
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
    if (rc == RL_OK) rc = write_conflict_key(t, key, (uint32_t)key_len);
    if (rc == RL_OK)
        rc = rl__wmap_atomic(&t->wm, key, (uint32_t)key_len, (int)op, param, (uint32_t)param_len);
    return undo(t, m, rc);
}

int rl_txn_add_conflict_range(rl_txn *t, const void *begin, size_t begin_len, const void *end,
                              size_t end_len, rl_conflict_type type) {
    if (!t || (!begin && begin_len) || (!end && end_len)) return RL_E_INVALID_ARGUMENT;
    if (type != RL_CONFLICT_READ && type != RL_CONFLICT_WRITE) return RL_E_INVALID_ARGUMENT;
    int rc = check_usable(t);
    if (rc) return rc;
    if (begin_len > RL_KEY_SIZE_LIMIT + 1 || end_len > RL_KEY_SIZE_LIMIT + 1)
        return RL_E_KEY_TOO_LARGE;
    int c = kcmp(begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    if (c > 0) return RL_E_INVERTED_RANGE;
    if (c == 0) return RL_OK;
    if (t->size + begin_len + end_len > (size_t)t->size_limit) return RL_E_TRANSACTION_TOO_LARGE;
    return range_add(t, type == RL_CONFLICT_READ ? &t->reads : &t->writes, begin,
                     (uint32_t)begin_len, end, (uint32_t)end_len);
}

/* ---- Merged reads ------------------------------------------------------------------------ */

typedef struct {
    rl_keyvalue *v; /* heap */
    int n, cap;
} kvvec;

static int kvvec_push(kvvec *x, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl) {
    if (x->n == x->cap) {
        int nc = x->cap ? x->cap * 2 : 16;
        rl_keyvalue *nv = rl__realloc(x->v, (size_t)nc * sizeof *nv);
        if (!nv) return RL_E_OUT_OF_MEMORY;
        x->v = nv;
        x->cap = nc;
    }
    x->v[x->n].key = k;
    x->v[x->n].key_len = kl;
    x->v[x->n].value = v;
    x->v[x->n].value_len = vl;
    x->n++;
    return RL_OK;
}

/* State of one merged range read: stop after `limit` rows / `target` bytes, then look for one more
 * row to set `more`. */
typedef struct {
    int limit;
    long target;
    long bytes;
    int done;
    int more;
    kvvec *out;
} merge_state;

/* Offer one merged row; returns 1 when the read is over. */
static int offer(merge_state *m, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl,
                 int *rc) {
    if (m->done) {
        m->more = 1;
        return 1;
    }
    *rc = kvvec_push(m->out, k, kl, v, vl);
    if (*rc) return 1;
    m->bytes += (long)kl + vl;
    if ((m->limit > 0 && m->out->n >= m->limit) || (m->target > 0 && m->bytes >= m->target))
        m->done = 1;
    return 0;
}

/* Read [b, e) at the read version merged with the write map (unless ignore_writes), in key order
 * or reverse, into out (rows in arena a). *out_more: rows remain beyond those returned. Adds no
 * conflict ranges. */
static int merged_range(rl_txn *t, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el,
                        int limit, long target, int reverse, int ignore_writes, rl_arena *a,
                        kvvec *out, int *out_more) {
    rl_kv_backend *be = t->db->be;
    int rc = ensure_rv(t);
    if (rc) return rc;
    *out_more = 0;
    if (kcmp(b, bl, e, el) >= 0) return RL_OK;
    if (ignore_writes || t->ryw_disabled || (t->wm.n_pts == 0 && t->wm.n_clears == 0)) {
        rl_keyvalue *kvs = NULL;
        int n = 0;
        rc = be->vt->get_range(be, t->rv, b, bl, e, el, limit, target, reverse, a, &kvs, &n,
                               out_more);
        for (int i = 0; rc == RL_OK && i < n; i++)
            rc = kvvec_push(out, kvs[i].key, kvs[i].key_len, kvs[i].value, kvs[i].value_len);
        return rc;
    }
    merge_state m = {limit, target, 0, 0, 0, out};
    const uint8_t *cb = b, *ce = e; /* the part of the range not merged yet */
    uint32_t cbl = bl, cel = el;
    int batch = 64;
    while (kcmp(cb, cbl, ce, cel) < 0) {
        rl_keyvalue *rows = NULL;
        int n = 0, smore = 0;
        /* Ask for what the limit still needs plus one (for `more`), at least a batch. */
        long need = limit > 0 ? (long)limit - out->n + 2 : 0;
        if (need > 0 && need < batch) need = batch;
        if (need > 1000000000L) need = 0; /* effectively unlimited */
        int want = limit > 0 ? (int)need : (target > 0 ? batch : 0);
        rc = be->vt->get_range(be, t->rv, cb, cbl, ce, cel, want, 0, reverse, a, &rows, &n, &smore);
        if (rc) return rc;
        batch = batch < 4096 ? batch * 2 : batch;
        /* The window of keys this batch fully describes. */
        const uint8_t *wb = cb, *we = ce;
        uint32_t wbl = cbl, wel = cel;
        if (smore && n > 0) {
            const rl_keyvalue *last = &rows[n - 1];
            if (!reverse) {
                we = key_after(a, last->key, last->key_len);
                if (!we) return RL_E_OUT_OF_MEMORY;
                wel = last->key_len + 1;
            } else {
                wb = last->key;
                wbl = last->key_len;
            }
        }
        size_t pb = rl__wmap_lower(&t->wm, wb, wbl), pe = rl__wmap_lower(&t->wm, we, wel);
        /* Merge rows[] and pts[pb, pe) in the scan direction. */
        int i = 0;
        size_t j = 0, np = pe - pb;
        int over = 0;
        while (!over && (i < n || j < np)) {
            const rl_wm_point *p = NULL;
            const rl_keyvalue *r = NULL;
            if (j < np) p = &t->wm.pts[reverse ? pe - 1 - j : pb + j];
            if (i < n) r = &rows[i];
            int c;
            if (p && r) {
                c = kcmp(p->key, p->key_len, r->key, r->key_len);
                if (reverse) c = -c;
            } else {
                c = p ? -1 : 1;
            }
            if (c == 0 || c < 0) {
                int present = 0;
                const uint8_t *v = NULL;
                uint32_t vl = 0;
                if (c == 0)
                    rc = rl__wmap_resolve(p, 1, r->value, r->value_len, a, &present, &v, &vl);
                else
                    rc = rl__wmap_resolve(p, 0, NULL, 0, a, &present, &v, &vl);
                if (rc) return rc;
                j++;
                if (c == 0) i++;
                if (present) {
                    const uint8_t *kc = rl__arena_memdup(a, p->key, p->key_len);
                    const uint8_t *vc = p->kind == WM_VALUE ? rl__arena_memdup(a, v, vl) : v;
                    if (!kc || (!vc && vl)) return RL_E_OUT_OF_MEMORY;
                    over = offer(&m, kc, p->key_len, vc, vl, &rc);
                }
            } else {
                i++;
                if (!rl__wmap_in_clear(&t->wm, r->key, r->key_len))
                    over = offer(&m, r->key, r->key_len, r->value, r->value_len, &rc);
            }
            if (rc) return rc;
        }
        if (over) break;
        if (!smore || n == 0) break;
        if (!reverse) {
            cb = we;
            cbl = wel;
        } else {
            ce = wb;
            cel = wbl;
        }
    }
    *out_more = m.more;
    return RL_OK;
}

/* Resolve selector sel over the merged view (ignore_writes: the snapshot only). When for_range,
 * firstGreaterOrEqual / firstGreaterThan resolve without reading (equivalent as range bounds).
 * The result lies in ["", max_key]; *lo / *hi receive the span the answer depended on (for the
 * read conflict range); both in arena a. */
static int resolve_sel(rl_txn *t, const rl_key_selector *sel, int for_range, int ignore_writes,
                       rl_arena *a, const uint8_t **out_k, uint32_t *out_kl, const uint8_t **lo,
                       uint32_t *lol, const uint8_t **hi, uint32_t *hil) {
    const uint8_t *mk;
    uint32_t mkl;
    max_key(t, &mk, &mkl);
    const uint8_t *k = sel->key ? sel->key : (const uint8_t *)"";
    uint32_t kl = sel->key_len;
    if (past_max(t, k, kl, 0)) return RL_E_KEY_OUTSIDE_LEGAL_RANGE;
    const uint8_t *anchor = k; /* exclusive end of "keys <= anchor" side */
    uint32_t anchor_l = kl;
    if (sel->or_equal) {
        anchor = key_after(a, k, kl);
        if (!anchor) return RL_E_OUT_OF_MEMORY;
        anchor_l = kl + 1;
        if (past_max(t, anchor, anchor_l, 0)) {
            anchor = mk;
            anchor_l = mkl;
        }
    }
    if (for_range && sel->offset == 1) {
        *out_k = *lo = *hi = anchor;
        *out_kl = *lol = *hil = anchor_l;
        return RL_OK;
    }
    kvvec v = {0};
    int more = 0, rc;
    if (sel->offset >= 1) {
        rc = merged_range(t, anchor, anchor_l, mk, mkl, sel->offset, 0, 0, ignore_writes, a, &v,
                          &more);
        if (rc) goto done;
        *lo = anchor;
        *lol = anchor_l;
        if (v.n == sel->offset) {
            *out_k = v.v[v.n - 1].key;
            *out_kl = v.v[v.n - 1].key_len;
            *hi = key_after(a, *out_k, *out_kl);
            if (!*hi) rc = RL_E_OUT_OF_MEMORY;
            *hil = *out_kl + 1;
        } else {
            *out_k = *hi = mk;
            *out_kl = *hil = mkl;
        }
    } else {
        long want = 1 - (long)sel->offset;
        if (want > 1000000000L) want = 1000000000L;
        rc = merged_range(t, (const uint8_t *)"", 0, anchor, anchor_l, (int)want, 0, 1,
                          ignore_writes, a, &v, &more);
        if (rc) goto done;
        *hi = anchor;
        *hil = anchor_l;
        if (v.n == want) {
            *out_k = *lo = v.v[v.n - 1].key;
            *out_kl = *lol = v.v[v.n - 1].key_len;
        } else {
            *out_k = *lo = (const uint8_t *)"";
            *out_kl = *lol = 0;
        }
    }
done:
    rl__free(v.v);
    return rc;
}

/* ---- Read API ---------------------------------------------------------------------------- */

static int check_flags(int flags, int allowed) {
    return (flags & ~allowed) ? RL_E_INVALID_ARGUMENT : RL_OK;
}

rl_future *rl_txn_get(rl_txn *t, const void *key, size_t key_len, int flags) {
    if (!t || (!key && key_len)) return rl__future_error(RL_FUT_VALUE, RL_E_INVALID_ARGUMENT);
    int rc = check_flags(flags, RL_SNAPSHOT);
    if (rc == RL_OK) rc = check_usable(t);
    if (rc) return rl__future_error(RL_FUT_VALUE, rc);
    if (past_max(t, key, (uint32_t)key_len, 1))
        return rl__future_error(RL_FUT_VALUE, RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future *f = rl__future_new(RL_FUT_VALUE);
    if (f->is_static) return f;
    if (key_len > RL_KEY_SIZE_LIMIT) { /* nothing can be stored there */
        rl__future_complete(f, RL_OK);
        return f;
    }
    const rl_wm_point *p = NULL;
    int present = 0;
    const uint8_t *v = NULL;
    uint32_t vl = 0;
    int from_writes = 0;
    if (!t->ryw_disabled) {
        size_t i = rl__wmap_lower(&t->wm, key, (uint32_t)key_len);
        if (i < t->wm.n_pts && kcmp(t->wm.pts[i].key, t->wm.pts[i].key_len, key,
                                    (uint32_t)key_len) == 0)
            p = &t->wm.pts[i];
        if (p && p->kind == WM_UNREADABLE) {
            rc = RL_E_ACCESSED_UNREADABLE;
            goto out;
        }
        if (p && (p->kind == WM_VALUE || p->kind == WM_CLEARED)) {
            from_writes = 1;
            if (p->kind == WM_VALUE) {
                present = 1;
                v = rl__arena_memdup(&f->arena, p->value, p->value_len);
                vl = p->value_len;
                if (!v) rc = RL_E_OUT_OF_MEMORY;
            }
        } else if (!p && rl__wmap_in_clear(&t->wm, key, (uint32_t)key_len)) {
            from_writes = 1;
        }
    }
    if (!from_writes) {
        rc = ensure_rv(t);
        if (rc == RL_OK)
            rc = t->db->be->vt->get(t->db->be, t->rv, key, (uint32_t)key_len, &f->arena, &present,
                                    &v, &vl);
        if (rc == RL_OK && p)
            rc = rl__wmap_resolve(p, present, v, vl, &f->arena, &present, &v, &vl);
        if (rc == RL_OK && !(flags & RL_SNAPSHOT)) rc = read_conflict_key(t, key, (uint32_t)key_len);
    }
out:
    if (rc == RL_OK) {
        f->present = present;
        f->data = v;
        f->len = vl;
    }
    rl__future_complete(f, rc);
    return f;
}

rl_future *rl_txn_get_key(rl_txn *t, rl_key_selector sel, int flags) {
    if (!t || (!sel.key && sel.key_len)) return rl__future_error(RL_FUT_KEY, RL_E_INVALID_ARGUMENT);
    int rc = check_flags(flags, RL_SNAPSHOT);
    if (rc == RL_OK) rc = check_usable(t);
    if (rc) return rl__future_error(RL_FUT_KEY, rc);
    rl_future *f = rl__future_new(RL_FUT_KEY);
    if (f->is_static) return f;
    const uint8_t *k, *lo, *hi;
    uint32_t kl, lol, hil;
    rc = resolve_sel(t, &sel, 0, 0, &f->arena, &k, &kl, &lo, &lol, &hi, &hil);
    if (rc == RL_OK && !(flags & RL_SNAPSHOT)) rc = read_conflict(t, lo, lol, hi, hil);
    if (rc == RL_OK) {
        f->data = k;
        f->len = kl;
    }
    rl__future_complete(f, rc);
    return f;
}

/* FoundationDB's limit rules: resolve mode and target bytes. */
static int range_limits(int limit, int target_bytes, rl_streaming_mode mode, int iteration,
                        int *out_limit, long *out_target) {
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

/* Resolve both selectors of a range read into [*rb, *re) (*re == *rb when the range is empty).
 * Conflict span of the selectors in *clo / *chi. *out_empty: 1 when both the range and the
 * conflict span are empty, 0 when both are non-empty, -1 when not known without a compare (only
 * the firstGreaterOrEqual/firstGreaterThan shortcut knows: there the span is the range). */
static int resolve_range(rl_txn *t, const rl_key_selector *begin, const rl_key_selector *end,
                         int ignore_writes, rl_arena *a, const uint8_t **rb, uint32_t *rbl,
                         const uint8_t **re, uint32_t *rel, const uint8_t **clo, uint32_t *clol,
                         const uint8_t **chi, uint32_t *chil, int *out_empty) {
    *out_empty = -1;
    if ((!begin->key && begin->key_len) || (!end->key && end->key_len))
        return RL_E_INVALID_ARGUMENT;
    const uint8_t *lo1, *hi1, *lo2, *hi2;
    uint32_t lo1l, hi1l, lo2l, hi2l;
    int rc;
    if (begin->offset == 1 && end->offset == 1) {
        /* firstGreaterOrEqual / firstGreaterThan at both ends (what scans and record loads
         * use): each resolves to its anchor without reading, and the span it depended on is
         * the anchor itself, so the conflict span is [rb, re) with no further compares. */
        rc = resolve_sel(t, begin, 1, ignore_writes, a, rb, rbl, &lo1, &lo1l, &hi1, &hi1l);
        if (rc == RL_OK)
            rc = resolve_sel(t, end, 1, ignore_writes, a, re, rel, &lo2, &lo2l, &hi2, &hi2l);
        if (rc) return rc;
        *clo = *rb, *clol = *rbl;
        *chi = *re, *chil = *rel;
        int c = kcmp(*rb, *rbl, *re, *rel);
        if (c > 0) {
            *re = *rb;
            *rel = *rbl;
        }
        *out_empty = c >= 0;
        return RL_OK;
    }
    rc = resolve_sel(t, begin, 1, ignore_writes, a, rb, rbl, &lo1, &lo1l, &hi1, &hi1l);
    if (rc == RL_OK)
        rc = resolve_sel(t, end, 1, ignore_writes, a, re, rel, &lo2, &lo2l, &hi2, &hi2l);
    if (rc) return rc;
    *clo = kcmp(lo1, lo1l, *rb, *rbl) < 0 ? lo1 : *rb;
    *clol = *clo == lo1 ? lo1l : *rbl;
    *chi = kcmp(hi2, hi2l, *re, *rel) > 0 ? hi2 : *re;
    *chil = *chi == hi2 ? hi2l : *rel;
    if (kcmp(*rb, *rbl, *re, *rel) > 0) {
        *re = *rb;
        *rel = *rbl;
    }
    return RL_OK;
}

rl_future *rl_txn_get_range(rl_txn *t, rl_key_selector begin, rl_key_selector end, int limit,
                            int target_bytes, rl_streaming_mode mode, int iteration, int flags) {
    if (!t) return rl__future_error(RL_FUT_KVS, RL_E_INVALID_ARGUMENT);
    int lim = 0;
    long tb = 0;
    int rc = check_flags(flags, RL_SNAPSHOT | RL_REVERSE);
    if (rc == RL_OK) rc = check_usable(t);
    if (rc == RL_OK) rc = range_limits(limit, target_bytes, mode, iteration, &lim, &tb);
    if (rc) return rl__future_error(RL_FUT_KVS, rc);
    rl_future *f = rl__future_new(RL_FUT_KVS);
    if (f->is_static) return f;
    int reverse = (flags & RL_REVERSE) != 0;
    kvvec v = {0};
    int more = 0;
    const uint8_t *rb, *re, *clo, *chi;
    uint32_t rbl, rel, clol, chil;
    int direct = 0; /* v.v is the backend's array in f->arena (no writes to merge) */
    int empty;      /* range and span both empty (1), both not (0), unknown (-1) */
    rc = resolve_range(t, &begin, &end, 0, &f->arena, &rb, &rbl, &re, &rel, &clo, &clol, &chi,
                       &chil, &empty);
    if (rc == RL_OK && (t->ryw_disabled || (t->wm.n_pts == 0 && t->wm.n_clears == 0))) {
        /* Nothing to merge: the backend's rows are the answer, used in place. */
        direct = 1;
        rc = ensure_rv(t);
        if (rc == RL_OK && (empty >= 0 ? !empty : kcmp(rb, rbl, re, rel) < 0))
            rc = t->db->be->vt->get_range(t->db->be, t->rv, rb, rbl, re, rel, lim, tb, reverse,
                                          &f->arena, &v.v, &v.n, &more);
    } else if (rc == RL_OK) {
        rc = merged_range(t, rb, rbl, re, rel, lim, tb, reverse, 0, &f->arena, &v, &more);
    }
    if (rc == RL_OK && !(flags & RL_SNAPSHOT)) {
        if (more && v.n > 0) {
            const rl_keyvalue *last = &v.v[v.n - 1];
            if (!reverse) {
                uint8_t *e = key_after(&f->arena, last->key, last->key_len);
                rc = e ? read_conflict(t, clo, clol, e, last->key_len + 1) : RL_E_OUT_OF_MEMORY;
            } else {
                rc = read_conflict(t, last->key, last->key_len, chi, chil);
            }
        } else if (empty < 0) {
            rc = read_conflict(t, clo, clol, chi, chil);
        } else if (!empty) { /* the span is known non-empty: no second compare */
            rc = range_add(t, &t->reads, clo, clol, chi, chil);
        }
    }
    if (rc == RL_OK && v.n > 0) {
        f->kvs = direct ? v.v : rl__arena_memdup(&f->arena, v.v, (size_t)v.n * sizeof *v.v);
        if (!f->kvs) rc = RL_E_OUT_OF_MEMORY;
    }
    if (rc == RL_OK) {
        f->count = v.n;
        f->more = more;
    }
    if (!direct) rl__free(v.v);
    rl__future_complete(f, rc);
    return f;
}

/* getMappedRange's client side (reference fdb-mapped-range.md §5): read at the read version
 * without merging writes, add conflict ranges for the primary range and every secondary, and
 * fail with 2039 if any of them meets a write of this transaction. */
rl_future *rl_txn_get_mapped_range(rl_txn *t, rl_key_selector begin, rl_key_selector end,
                                   const void *mapper, size_t mapper_len, int limit,
                                   int target_bytes, rl_streaming_mode mode, int iteration,
                                   int flags) {
    if (!t || (!mapper && mapper_len)) return rl__future_error(RL_FUT_MAPPED, RL_E_INVALID_ARGUMENT);
    int lim = 0;
    long tb = 0;
    int rc = check_flags(flags, RL_SNAPSHOT | RL_REVERSE);
    if (rc == RL_OK) rc = check_usable(t);
    if (rc == RL_OK && ((flags & RL_SNAPSHOT) || t->ryw_disabled)) rc = RL_E_UNSUPPORTED_OPERATION;
    if (rc == RL_OK) rc = range_limits(limit, target_bytes, mode, iteration, &lim, &tb);
    if (rc) return rl__future_error(RL_FUT_MAPPED, rc);
    rl_future *f = rl__future_new(RL_FUT_MAPPED);
    if (f->is_static) return f;
    int reverse = (flags & RL_REVERSE) != 0;
    rl_mapped_keyvalue *ents = NULL;
    int n = 0, more = 0;
    const uint8_t *rb, *re, *clo, *chi;
    uint32_t rbl, rel, clol, chil;
    size_t reads_before = t->reads.n, size_before = t->size;
    int empty_unused;
    rc = resolve_range(t, &begin, &end, 1, &f->arena, &rb, &rbl, &re, &rel, &clo, &clol, &chi,
                       &chil, &empty_unused);
    if (rc == RL_OK) rc = ensure_rv(t);
    if (rc == RL_OK)
        rc = t->db->be->vt->get_mapped_range(t->db->be, t->rv, rb, rbl, re, rel, mapper,
                                             mapper_len, lim, tb, reverse, &f->arena, &ents, &n,
                                             &more);
    if (rc) goto out;
    /* The primary range, as for get_range. */
    if (more && n > 0) {
        const rl_keyvalue *last = &ents[n - 1].index;
        if (!reverse) {
            uint8_t *e = key_after(&f->arena, last->key, last->key_len);
            if (!e) {
                rc = RL_E_OUT_OF_MEMORY;
                goto out;
            }
            rc = read_conflict(t, clo, clol, e, last->key_len + 1);
        } else {
            rc = read_conflict(t, last->key, last->key_len, chi, chil);
        }
    } else {
        rc = read_conflict(t, clo, clol, chi, chil);
    }
    /* Every secondary read. */
    for (int i = 0; rc == RL_OK && i < n; i++) {
        const rl_mapped_keyvalue *m = &ents[i];
        if (m->is_range && m->more && m->n_kvs > 0) {
            const rl_keyvalue *last = &m->kvs[m->n_kvs - 1];
            uint8_t *e = key_after(&f->arena, last->key, last->key_len);
            rc = e ? read_conflict(t, m->begin, m->begin_len, e, last->key_len + 1)
                   : RL_E_OUT_OF_MEMORY;
        } else {
            rc = read_conflict(t, m->begin, m->begin_len, m->end, m->end_len);
        }
    }
    if (rc) goto out;
    /* 2039: any of the ranges just added meets a write of this transaction. */
    for (size_t i = reads_before; i < t->reads.n; i++) {
        const rl_keyrange *r = &t->reads.v[i];
        if (rl__wmap_overlaps(&t->wm, r->begin, r->begin_len, r->end, r->end_len)) {
            rc = RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES;
            break;
        }
    }
out:
    if (rc) { /* a failed read adds no conflict ranges */
        t->reads.n = reads_before;
        t->size = size_before;
    } else {
        f->mkvs = ents;
        f->count = n;
        f->more = more;
    }
    rl__future_complete(f, rc);
    return f;
}

/* ---- Commit and retry -------------------------------------------------------------------- */

rl_future *rl_txn_commit(rl_txn *t) {
    if (!t) return rl__future_error(RL_FUT_NONE, RL_E_INVALID_ARGUMENT);
    int rc = check_usable(t);
    if (rc == RL_OK && t->committed) rc = RL_E_USED_DURING_COMMIT;
    if (rc) {
        t->commit_error = rc;
        finish_versionstamp(t, rc);
        return rl__future_error(RL_FUT_NONE, rc);
    }
    if (t->n_muts == 0 && t->writes.n == 0) { /* read-only: nothing to commit */
        t->committed = 1;
        t->committed_version = -1;
        finish_versionstamp(t, RL_E_NO_COMMIT_VERSION);
        return rl__future_error(RL_FUT_NONE, RL_OK);
    }
    if (t->size > (size_t)t->size_limit) rc = RL_E_TRANSACTION_TOO_LARGE;
    if (rc == RL_OK) rc = ensure_rv(t);
    if (rc == RL_OK) {
        rl_commit_request req;
        memset(&req, 0, sizeof req);
        req.read_version = t->rv;
        req.reads = t->reads.v;
        req.n_reads = t->reads.n;
        req.writes = t->writes.v;
        req.n_writes = t->writes.n;
        req.muts = t->muts;
        req.n_muts = t->n_muts;
        t->committing = 1;
        rc = t->db->be->vt->commit(t->db->be, &req);
        t->committing = 0;
        if (rc == RL_OK) {
            t->committed = 1;
            t->committed_version = (int64_t)req.commit_version;
            for (int i = 0; i < 8; i++)
                t->versionstamp[i] = (uint8_t)(req.commit_version >> (56 - 8 * i));
            t->versionstamp[8] = (uint8_t)(req.batch_order >> 8);
            t->versionstamp[9] = (uint8_t)req.batch_order;
        }
    }
    t->commit_error = rc;
    finish_versionstamp(t, rc);
    return rl__future_error(RL_FUT_NONE, rc);
}

int rl_txn_get_committed_version(rl_txn *t, int64_t *out) {
    if (!t || !out) return RL_E_INVALID_ARGUMENT;
    if (!t->committed) return RL_E_CLIENT_INVALID_OPERATION;
    *out = t->committed_version;
    return RL_OK;
}

rl_future *rl_txn_get_versionstamp(rl_txn *t) {
    if (!t) return rl__future_error(RL_FUT_KEY, RL_E_INVALID_ARGUMENT);
    if (t->committed) {
        if (t->committed_version < 0) return rl__future_error(RL_FUT_KEY, RL_E_NO_COMMIT_VERSION);
        rl_future *f = rl__future_new(RL_FUT_KEY);
        if (f->is_static) return f;
        uint8_t *p = rl__arena_memdup(&f->arena, t->versionstamp, 10);
        if (p) {
            f->data = p;
            f->len = 10;
        }
        rl__future_complete(f, p ? RL_OK : RL_E_OUT_OF_MEMORY);
        return f;
    }
    if (t->vs_future) /* one pending versionstamp future per transaction */
        return rl__future_error(RL_FUT_KEY, RL_E_CLIENT_INVALID_OPERATION);
    rl_future *f = rl__future_new(RL_FUT_KEY);
    if (f->is_static) return f;
    f->vs_owner = t;
    t->vs_future = f;
    return f;
}

rl_future *rl_txn_on_error(rl_txn *t, int error) {
    if (!t) return rl__future_error(RL_FUT_NONE, RL_E_INVALID_ARGUMENT);
    if (!rl_error_retryable(error)) return rl__future_error(RL_FUT_NONE, error);
    if (t->retry_limit >= 0 && t->retries >= t->retry_limit)
        return rl__future_error(RL_FUT_NONE, error);
    if (t->timeout_ms > 0 &&
        rl__clock_mono_ns() - t->start_ns >= (uint64_t)t->timeout_ms * 1000000ull)
        return rl__future_error(RL_FUT_NONE, RL_E_TRANSACTION_TIMED_OUT);
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
    rl__clock_sleep_us(us);
    t->backoff_ms = backoff * 2 < cap ? backoff * 2 : cap;
    if (t->backoff_ms < 1) t->backoff_ms = 1;
    t->retries++;
    reset_state(t);
    return rl__future_error(RL_FUT_NONE, RL_OK);
}
