/* ryw.c — the write map of a transaction: what its uncommitted writes say about every key, so
 * reads can merge them with the snapshot (read-your-writes).
 *
 * Representation (kv_int.h rl__wmap):
 *   - point entries, sorted by key, unique: WM_VALUE (known value), WM_CLEARED (known absent),
 *     WM_ATOMIC (atomic operations stacked on the unknown stored value), WM_UNREADABLE (a pending
 *     SET_VERSIONSTAMPED_VALUE, possibly with operations on top);
 *   - cleared ranges, sorted, disjoint and merged when they touch.
 *
 * Invariants:
 *   1. A point entry overrides the cleared ranges; a key in a cleared range with no point entry is
 *      absent.
 *   2. clear_range(b, e) removes every point entry in [b, e) and merges [b, e) into the ranges, so
 *      later writes in the range become point entries again.
 *   3. An atomic operation on a key whose value is known (a WM_VALUE/WM_CLEARED point, or a
 *      cleared range) is applied at once with rl__atomic_apply, so WM_ATOMIC only ever stacks on
 *      a value the transaction has not determined.
 *   4. Keys, values and operands live in the transaction's arena; the two arrays are heap memory
 *      owned by the map.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "kv/kv_int.h"

void rl__wmap_init(rl__wmap *w, rl_arena *a) {
    memset(w, 0, sizeof *w);
    w->arena = a;
}

void rl__wmap_release(rl__wmap *w) {
    rl__free(w->pts);
    rl__free(w->clears);
    memset(w, 0, sizeof *w);
}

void rl__wmap_reset(rl__wmap *w) {
    w->n_pts = 0;
    w->n_clears = 0;
}

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

size_t rl__wmap_lower(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    size_t lo = 0, hi = w->n_pts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kcmp(w->pts[mid].key, w->pts[mid].key_len, k, kl) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Index of the first cleared range whose end is > k. */
static size_t clear_lower(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    size_t lo = 0, hi = w->n_clears;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kcmp(w->clears[mid].end, w->clears[mid].end_len, k, kl) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

int rl__wmap_in_clear(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    size_t i = clear_lower(w, k, kl);
    return i < w->n_clears && kcmp(w->clears[i].begin, w->clears[i].begin_len, k, kl) <= 0;
}

int rl__wmap_overlaps(const rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (kcmp(b, bl, e, el) >= 0) return 0;
    size_t i = rl__wmap_lower(w, b, bl);
    if (i < w->n_pts && kcmp(w->pts[i].key, w->pts[i].key_len, e, el) < 0) return 1;
    size_t j = clear_lower(w, b, bl);
    if (j < w->n_clears && kcmp(w->clears[j].begin, w->clears[j].begin_len, e, el) < 0) return 1;
    return 0;
}

/* Find or insert the point entry for k (a fresh one has kind WM_ATOMIC with no ops and must be
 * set by the caller). *out_is_new says which. NULL on OOM. */
static rl__wm_point *point_at(rl__wmap *w, const uint8_t *k, uint32_t kl, int *out_is_new) {
    size_t i = rl__wmap_lower(w, k, kl);
    if (i < w->n_pts && kcmp(w->pts[i].key, w->pts[i].key_len, k, kl) == 0) {
        *out_is_new = 0;
        return &w->pts[i];
    }
    if (RL_GROW(w->pts, w->cap_pts, w->n_pts + 1, 16)) return NULL;
    uint8_t *kc = rl__arena_memdup(w->arena, k, kl);
    if (!kc) return NULL;
    memmove(&w->pts[i + 1], &w->pts[i], (w->n_pts - i) * sizeof *w->pts);
    w->n_pts++;
    rl__wm_point *p = &w->pts[i];
    memset(p, 0, sizeof *p);
    p->key = kc;
    p->key_len = kl;
    p->kind = WM_ATOMIC;
    *out_is_new = 1;
    return p;
}

int rl__wmap_set(rl__wmap *w, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl) {
    uint8_t *vc = rl__arena_memdup(w->arena, v, vl);
    if (!vc) return RL_E_OUT_OF_MEMORY;
    int is_new;
    rl__wm_point *p = point_at(w, k, kl, &is_new);
    if (!p) return RL_E_OUT_OF_MEMORY;
    p->kind = WM_VALUE;
    p->value = vc;
    p->value_len = vl;
    p->ops = p->ops_tail = NULL;
    return RL_OK;
}

int rl__wmap_clear(rl__wmap *w, const uint8_t *k, uint32_t kl) {
    int is_new;
    rl__wm_point *p = point_at(w, k, kl, &is_new);
    if (!p) return RL_E_OUT_OF_MEMORY;
    p->kind = WM_CLEARED;
    p->value = NULL;
    p->value_len = 0;
    p->ops = p->ops_tail = NULL;
    return RL_OK;
}

int rl__wmap_clear_range(rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (kcmp(b, bl, e, el) >= 0) return RL_OK;
    /* Merge with every range that overlaps or touches [b, e). */
    size_t i = 0;
    while (i < w->n_clears && kcmp(w->clears[i].end, w->clears[i].end_len, b, bl) < 0) i++;
    size_t j = i;
    const uint8_t *nb = b, *ne = e;
    uint32_t nbl = bl, nel = el;
    while (j < w->n_clears && kcmp(w->clears[j].begin, w->clears[j].begin_len, e, el) <= 0) {
        if (kcmp(w->clears[j].begin, w->clears[j].begin_len, nb, nbl) < 0) {
            nb = w->clears[j].begin;
            nbl = w->clears[j].begin_len;
        }
        if (kcmp(w->clears[j].end, w->clears[j].end_len, ne, nel) > 0) {
            ne = w->clears[j].end;
            nel = w->clears[j].end_len;
        }
        j++;
    }
    /* Copy the new bounds when they come from the caller. */
    if (nb == b) {
        nb = rl__arena_memdup(w->arena, b, bl);
        if (!nb) return RL_E_OUT_OF_MEMORY;
    }
    if (ne == e) {
        ne = rl__arena_memdup(w->arena, e, el);
        if (!ne) return RL_E_OUT_OF_MEMORY;
    }
    if (j == i) {
        if (RL_GROW(w->clears, w->cap_clears, w->n_clears + 1, 8)) return RL_E_OUT_OF_MEMORY;
        memmove(&w->clears[i + 1], &w->clears[i], (w->n_clears - i) * sizeof *w->clears);
        w->n_clears++;
    } else if (j > i + 1) {
        memmove(&w->clears[i + 1], &w->clears[j], (w->n_clears - j) * sizeof *w->clears);
        w->n_clears -= j - i - 1;
    }
    w->clears[i].begin = nb;
    w->clears[i].begin_len = nbl;
    w->clears[i].end = ne;
    w->clears[i].end_len = nel;
    /* Drop the point entries inside [b, e). */
    size_t pb = rl__wmap_lower(w, b, bl), pe = rl__wmap_lower(w, e, el);
    if (pe > pb) {
        memmove(&w->pts[pb], &w->pts[pe], (w->n_pts - pe) * sizeof *w->pts);
        w->n_pts -= pe - pb;
    }
    return RL_OK;
}

/* Apply one operation to a known value in place (result in the arena). */
static int apply_known(rl__wmap *w, rl__wm_point *p, int base_present, int type, const uint8_t *op, uint32_t opl) {
    rl_buf out;
    rl__buf_init(&out);
    int present = 0;
    int rc = rl__atomic_apply(type, base_present, p->value, p->value_len, op, opl, &out, &present);
    if (rc == RL_OK) rc = rl__buf_error(&out);
    if (rc == RL_OK) {
        if (present) {
            uint8_t *vc = rl__arena_memdup(w->arena, out.data, out.len);
            if (!vc) {
                rc = RL_E_OUT_OF_MEMORY;
            } else {
                p->kind = WM_VALUE;
                p->value = vc;
                p->value_len = (uint32_t)out.len;
            }
        } else {
            p->kind = WM_CLEARED;
            p->value = NULL;
            p->value_len = 0;
        }
    }
    rl__buf_release(&out);
    return rc;
}

int rl__wmap_atomic(rl__wmap *w, const uint8_t *k, uint32_t kl, int type, const uint8_t *op, uint32_t opl) {
    uint8_t *oc = rl__arena_memdup(w->arena, op, opl);
    if (!oc) return RL_E_OUT_OF_MEMORY;
    int was_cleared = rl__wmap_in_clear(w, k, kl);
    int is_new;
    rl__wm_point *p = point_at(w, k, kl, &is_new);
    if (!p) return RL_E_OUT_OF_MEMORY;
    if (type == RL_MUT_SET_VERSIONSTAMPED_VALUE) {
        p->kind = WM_UNREADABLE;
        p->value = NULL;
        p->value_len = 0;
        p->ops = p->ops_tail = NULL;
        return RL_OK;
    }
    if (is_new && was_cleared) {
        p->kind = WM_CLEARED;
        is_new = 0;
    }
    if (!is_new && (p->kind == WM_VALUE || p->kind == WM_CLEARED)) {
        int rc = apply_known(w, p, p->kind == WM_VALUE, type, oc, opl);
        return rc;
    }
    rl__wm_op *o = rl__arena_alloc(w->arena, sizeof *o);
    if (!o) return RL_E_OUT_OF_MEMORY;
    o->type = (uint8_t)type;
    o->operand = oc;
    o->len = opl;
    o->next = NULL;
    if (p->ops_tail) p->ops_tail->next = o;
    else p->ops = o;
    p->ops_tail = o;
    return RL_OK;
}

/* The value of p over the stored (base_present, base). */
int rl__wmap_resolve(const rl__wm_point *p, int base_present, const uint8_t *base, uint32_t base_len, rl_arena *a,
                     int *out_present, const uint8_t **out_v, uint32_t *out_len) {
    switch (p->kind) {
    case WM_VALUE:
        *out_present = 1;
        *out_v = p->value;
        *out_len = p->value_len;
        return RL_OK;
    case WM_CLEARED:
        *out_present = 0;
        *out_v = NULL;
        *out_len = 0;
        return RL_OK;
    case WM_UNREADABLE: return RL_E_ACCESSED_UNREADABLE;
    default: break;
    }
    int present = base_present;
    rl_buf cur, next;
    rl__buf_init(&cur);
    rl__buf_init(&next);
    if (present) rl__buf_append(&cur, base, base_len);
    int rc = RL_OK;
    for (const rl__wm_op *o = p->ops; o && rc == RL_OK; o = o->next) {
        rl__buf_reset(&next);
        int np = 0;
        rc = rl__atomic_apply(o->type, present, cur.data, cur.len, o->operand, o->len, &next, &np);
        if (rc == RL_OK) rc = rl__buf_error(&next);
        if (rc == RL_OK) {
            rl_buf t = cur;
            cur = next;
            next = t;
            present = np;
        }
    }
    if (rc == RL_OK) {
        *out_present = present;
        *out_len = present ? (uint32_t)cur.len : 0;
        *out_v = NULL;
        if (present) {
            uint8_t *v = rl__arena_memdup(a, cur.data, cur.len);
            if (!v) rc = RL_E_OUT_OF_MEMORY;
            else *out_v = v;
        }
    }
    rl__buf_release(&cur);
    rl__buf_release(&next);
    return rc;
}

/* Copy into a the part of w a read of [b, e) can see: the point entries in [b, e) and the
 * cleared ranges that meet it (e == NULL: to the end of the keyspace), with each atomic entry's
 * operation chain copied too, so later writes to w (which append to those chains, replace
 * values and remove points) never change the copy. Keys, values and operands are shared with w:
 * they live in the transaction's arena, which changes only by appending until the transaction
 * is reset (and a reset cancels every read that holds a copy). The copy's arrays live in a and
 * it has no arena of its own (read-only). RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__wmap_copy_slice(const rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, rl_arena *a,
                        rl__wmap *out) {
    memset(out, 0, sizeof *out);
    size_t pb = rl__wmap_lower(w, b, bl), pe = e ? rl__wmap_lower(w, e, el) : w->n_pts;
    if (pe > pb) {
        rl__wm_point *pts = rl__arena_alloc(a, (pe - pb) * sizeof *pts);
        if (!pts) return RL_E_OUT_OF_MEMORY;
        for (size_t i = pb; i < pe; i++) {
            rl__wm_point *p = &pts[i - pb];
            *p = w->pts[i];
            p->ops = p->ops_tail = NULL;
            for (const rl__wm_op *o = w->pts[i].ops; o; o = o->next) {
                rl__wm_op *c = rl__arena_alloc(a, sizeof *c);
                if (!c) return RL_E_OUT_OF_MEMORY;
                *c = *o;
                c->next = NULL;
                if (p->ops_tail) p->ops_tail->next = c;
                else p->ops = c;
                p->ops_tail = c;
            }
        }
        out->pts = pts;
        out->n_pts = out->cap_pts = pe - pb;
    }
    size_t cb = clear_lower(w, b, bl), ce = cb;
    while (ce < w->n_clears && (!e || kcmp(w->clears[ce].begin, w->clears[ce].begin_len, e, el) < 0)) ce++;
    if (ce > cb) {
        rl__wm_range *cl = rl__arena_memdup(a, &w->clears[cb], (ce - cb) * sizeof *cl);
        if (!cl) return RL_E_OUT_OF_MEMORY;
        out->clears = cl;
        out->n_clears = out->cap_clears = ce - cb;
    }
    return RL_OK;
}
