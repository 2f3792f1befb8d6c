/* ryw.c — the write map of a transaction: what its uncommitted writes say about every key, so
 * reads can merge them with the snapshot (read-your-writes).
 *
 * Representation (kv_int.h rl__wmap): two ordered indexes (keyidx.h: a B+tree of node pointers
 * with packed key prefixes, over a linked list), so that every write costs O(log n) in the writes
 * the transaction already made (FoundationDB keeps its write map in a balanced tree; a
 * transaction may hold 10 MB of mutations, about 200,000 small ones):
 *   - point entries by key, unique: WM_VALUE (known value), WM_CLEARED (known absent),
 *     WM_ATOMIC (atomic operations stacked on the unknown stored value), WM_UNREADABLE (a pending
 *     SET_VERSIONSTAMPED_VALUE, possibly with operations on top);
 *   - cleared ranges by begin, disjoint and merged when they touch.
 * Next and previous are O(1) (the index's list). The skip lists this replaced cost about ten
 * dependent cache misses per search at 100,000 entries (docs/benchmarks.md, `txn-writes`).
 *
 * Invariants:
 *   1. A point entry overrides the cleared ranges; a key in a cleared range with no point entry is
 *      absent.
 *   2. clear_range(b, e) removes every point entry in [b, e) and merges [b, e) into the ranges, so
 *      later writes in the range become point entries again. Each entry is removed at most once,
 *      so a clear_range costs O(log n) plus the entries it removes.
 *   3. An atomic operation on a key whose value is known (a WM_VALUE/WM_CLEARED point, or a
 *      cleared range) is applied at once with rl__atomic_apply, so WM_ATOMIC only ever stacks on
 *      a value the transaction has not determined.
 *   4. Keys, values, operands, the nodes and the index pages live in the map's arena (the
 *      transaction's): removing an entry unlinks it and frees nothing (its key may stay an index
 *      separator: keyidx.h); a reset of the transaction frees it all.
 *   5. A write that fails with RL_E_OUT_OF_MEMORY leaves the map as it was: everything it
 *      allocates — copies, nodes, index pages (rl__kx_reserve) — is taken before it changes the
 *      map.
 */
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "kv/kv_int.h"

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

/* ---- Nodes ------------------------------------------------------------------------------- */

typedef struct {
    rl__kx_node kx;
    rl__wm_point pt;
} pnode;

typedef struct {
    rl__kx_node kx;
    rl__wm_range r;
} cnode;

#define PNODE(p) ((pnode *)((char *)(p)-offsetof(pnode, pt)))

/* ---- The map ------------------------------------------------------------------------------ */

void rl__wmap_init(rl__wmap *w, rl_arena *a) {
    memset(w, 0, sizeof *w);
    w->arena = a;
    rl__kx_init(&w->pts, a);
    rl__kx_init(&w->clears, a);
}

void rl__wmap_release(rl__wmap *w) { rl__wmap_init(w, NULL); /* everything is in the arena */ }

void rl__wmap_reset(rl__wmap *w) { /* the arena (pages included) is reset by the caller */
    rl__kx_init(&w->pts, w->arena);
    rl__kx_init(&w->clears, w->arena);
}

int rl__wmap_empty(const rl__wmap *w) { return w->pts.n == 0 && w->clears.n == 0; }

const rl__wm_point *rl__wmap_seek(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    rl__kx_node *n = rl__kx_seek(&w->pts, k, kl);
    return n ? &((pnode *)n)->pt : NULL;
}

const rl__wm_point *rl__wmap_find(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    const rl__wm_point *p = rl__wmap_seek(w, k, kl);
    return p && kcmp(p->key, p->key_len, k, kl) == 0 ? p : NULL;
}

const rl__wm_point *rl__wmap_seek_before(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    rl__kx_node *n = rl__kx_seek(&w->pts, k, kl);
    rl__kx_node *b = n ? n->prev : w->pts.last;
    return b ? &((pnode *)b)->pt : NULL;
}

const rl__wm_point *rl__wmap_next(const rl__wm_point *p) {
    rl__kx_node *n = PNODE(p)->kx.next;
    return n ? &((pnode *)n)->pt : NULL;
}

const rl__wm_point *rl__wmap_prev(const rl__wm_point *p) {
    rl__kx_node *n = PNODE(p)->kx.prev;
    return n ? &((pnode *)n)->pt : NULL;
}

/* The first cleared range whose end is > k (NULL: none). Ranges are disjoint and sorted, so it
 * is the last one beginning before k when that one reaches past k, else the next one. */
static cnode *clear_lower(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    rl__kx_node *n = rl__kx_seek(&w->clears, k, kl);
    rl__kx_node *b = n ? n->prev : w->clears.last;
    if (b && kcmp(((cnode *)b)->r.end, ((cnode *)b)->r.end_len, k, kl) > 0) return (cnode *)b;
    return (cnode *)n;
}

int rl__wmap_in_clear(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    cnode *c = clear_lower(w, k, kl);
    return c && kcmp(c->r.begin, c->r.begin_len, k, kl) <= 0;
}

const rl__wm_range *rl__wmap_clear_at(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    cnode *c = clear_lower(w, k, kl);
    return c && kcmp(c->r.begin, c->r.begin_len, k, kl) <= 0 ? &c->r : NULL;
}

const rl__wm_range *rl__wmap_clear_below(const rl__wmap *w, const uint8_t *e, uint32_t el) {
    rl__kx_node *n = rl__kx_seek(&w->clears, e, el); /* the first range beginning at or after e */
    cnode *c = (cnode *)(n ? n->prev : w->clears.last);
    return c && kcmp(c->r.end, c->r.end_len, e, el) >= 0 ? &c->r : NULL;
}

int rl__wmap_overlaps(const rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (kcmp(b, bl, e, el) >= 0) return 0;
    const rl__wm_point *p = rl__wmap_seek(w, b, bl);
    if (p && kcmp(p->key, p->key_len, e, el) < 0) return 1;
    cnode *c = clear_lower(w, b, bl);
    return c && kcmp(c->r.begin, c->r.begin_len, e, el) < 0;
}

/* Find or insert the point entry for k (a fresh one has kind WM_ATOMIC with no ops and must be
 * set by the caller). *out_is_new says which. NULL on OOM. */
static rl__wm_point *point_at(rl__wmap *w, const uint8_t *k, uint32_t kl, int *out_is_new) {
    rl__kx_pos pos;
    rl__kx_node *n = rl__kx_locate(&w->pts, k, kl, &pos);
    if (n && kcmp(n->key, n->key_len, k, kl) == 0) {
        *out_is_new = 0;
        return &((pnode *)n)->pt;
    }
    uint8_t *kc = rl__arena_memdup(w->arena, k, kl);
    pnode *pn = kc || !kl ? rl__arena_alloc(w->arena, sizeof *pn) : NULL;
    if (!pn) return NULL;
    memset(pn, 0, sizeof *pn);
    pn->pt.key = kc;
    pn->pt.key_len = kl;
    rl__kx_set_key(&pn->kx, kc, kl);
    pn->pt.kind = WM_ATOMIC;
    if (rl__kx_insert_at(&w->pts, &pos, &pn->kx)) return NULL; /* out of memory: unchanged */
    *out_is_new = 1;
    return &pn->pt;
}

int rl__wmap_set(rl__wmap *w, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl) {
    uint8_t *vc = rl__arena_memdup(w->arena, v, vl);
    if (!vc && vl) return RL_E_OUT_OF_MEMORY;
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
    /* Everything this may need first (invariant 5): the new range's node and bounds, and the
     * index pages its insert may take. */
    uint8_t *bc = rl__arena_memdup(w->arena, b, bl), *ec = rl__arena_memdup(w->arena, e, el);
    cnode *cn = rl__arena_alloc(w->arena, sizeof *cn);
    if ((!bc && bl) || (!ec && el) || !cn || rl__kx_reserve(&w->clears)) return RL_E_OUT_OF_MEMORY;
    memset(cn, 0, sizeof *cn);
    /* Merge with every range that overlaps or touches [b, e): from the last one beginning before
     * b (when it reaches b) through the last one beginning at or before e. */
    const uint8_t *nb = bc, *ne = ec;
    uint32_t nbl = bl, nel = el;
    rl__kx_node *c = rl__kx_seek(&w->clears, b, bl);
    rl__kx_node *before = c ? c->prev : w->clears.last;
    if (before && kcmp(((cnode *)before)->r.end, ((cnode *)before)->r.end_len, b, bl) >= 0) c = before;
    while (c && kcmp(((cnode *)c)->r.begin, ((cnode *)c)->r.begin_len, e, el) <= 0) {
        cnode *t = (cnode *)c;
        if (kcmp(t->r.begin, t->r.begin_len, nb, nbl) < 0) nb = t->r.begin, nbl = t->r.begin_len;
        if (kcmp(t->r.end, t->r.end_len, ne, nel) > 0) ne = t->r.end, nel = t->r.end_len;
        rl__kx_node *after = c->next;
        rl__kx_remove(&w->clears, c);
        c = after;
    }
    cn->r.begin = nb;
    cn->r.begin_len = nbl;
    cn->r.end = ne;
    cn->r.end_len = nel;
    rl__kx_set_key(&cn->kx, nb, nbl);
    (void)rl__kx_insert(&w->clears, &cn->kx); /* cannot fail: reserved above */
    /* Drop the point entries inside [b, e). */
    rl__kx_node *p = rl__kx_seek(&w->pts, b, bl);
    while (p && kcmp(p->key, p->key_len, e, el) < 0) {
        rl__kx_node *after = p->next;
        rl__kx_remove(&w->pts, p);
        p = after;
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
 * is reset (and a reset cancels every read that holds a copy). The copy's nodes live in a; it is
 * only read. RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__wmap_copy_slice(const rl__wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, rl_arena *a,
                        rl__wmap *out) {
    rl__wmap_init(out, a);
    for (const rl__wm_point *q = rl__wmap_seek(w, b, bl); q && (!e || kcmp(q->key, q->key_len, e, el) < 0);
         q = rl__wmap_next(q)) {
        pnode *pn = rl__arena_alloc(a, sizeof *pn);
        if (!pn) return RL_E_OUT_OF_MEMORY;
        memset(pn, 0, sizeof *pn);
        pn->pt = *q;
        rl__kx_set_key(&pn->kx, q->key, q->key_len);
        pn->pt.ops = pn->pt.ops_tail = NULL;
        for (const rl__wm_op *o = q->ops; o; o = o->next) {
            rl__wm_op *c = rl__arena_alloc(a, sizeof *c);
            if (!c) return RL_E_OUT_OF_MEMORY;
            *c = *o;
            c->next = NULL;
            if (pn->pt.ops_tail) pn->pt.ops_tail->next = c;
            else pn->pt.ops = c;
            pn->pt.ops_tail = c;
        }
        if (rl__kx_insert(&out->pts, &pn->kx)) return RL_E_OUT_OF_MEMORY; /* appended: in key order */
    }
    for (cnode *c = clear_lower(w, b, bl); c && (!e || kcmp(c->r.begin, c->r.begin_len, e, el) < 0);
         c = (cnode *)c->kx.next) {
        cnode *cn = rl__arena_alloc(a, sizeof *cn);
        if (!cn) return RL_E_OUT_OF_MEMORY;
        memset(cn, 0, sizeof *cn);
        cn->r = c->r;
        rl__kx_set_key(&cn->kx, c->r.begin, c->r.begin_len);
        if (rl__kx_insert(&out->clears, &cn->kx)) return RL_E_OUT_OF_MEMORY;
    }
    return RL_OK;
}
