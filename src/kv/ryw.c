/* ryw.c — the write map of a transaction: what its uncommitted writes say about every key, so
 * reads can merge them with the snapshot (read-your-writes).
 *
 * Representation (kv_int.h rl__wmap): two skip lists, so that every write costs O(log n) in the
 * writes the transaction already made (FoundationDB keeps its write map in a balanced tree; a
 * transaction may hold 10 MB of mutations, about 200,000 small ones):
 *   - point entries by key, unique: WM_VALUE (known value), WM_CLEARED (known absent),
 *     WM_ATOMIC (atomic operations stacked on the unknown stored value), WM_UNREADABLE (a pending
 *     SET_VERSIONSTAMPED_VALUE, possibly with operations on top);
 *   - cleared ranges by begin, disjoint and merged when they touch.
 * A node's level is 1 + the number of times a 1-in-4 draw succeeds (a per-map xorshift), at most
 * RL__SL_MAX; level 0 is doubly linked, so next and previous are O(1).
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
 *   4. Keys, values, operands and the nodes live in the map's arena (the transaction's): removing
 *      an entry unlinks it and frees nothing; a reset of the transaction frees it all.
 */
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "kv/kv_int.h"

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

/* ---- Skip lists --------------------------------------------------------------------------- */

typedef struct {
    rl__sl_node sl;
    rl__wm_point pt;
} pnode;

typedef struct {
    rl__sl_node sl;
    rl__wm_range r;
} cnode;

#define PNODE(p) ((pnode *)((char *)(p)-offsetof(pnode, pt)))

/* The first 8 bytes of k, big-endian, zero-padded: a < b as prefixes implies a < b as keys. */
static uint64_t kprefix(const uint8_t *k, uint32_t kl) {
    uint64_t v = 0;
    for (uint32_t i = 0; i < 8; i++) v = v << 8 | (i < kl ? k[i] : 0);
    return v;
}

/* Node key against (k, kl, kp = kprefix(k)): <0, 0, >0. */
static int ncmp(const rl__sl_node *n, const uint8_t *k, uint32_t kl, uint64_t kp) {
    if (n->kpre != kp) return n->kpre < kp ? -1 : 1;
    return kcmp(n->key, n->key_len, k, kl);
}

/* Set n's key (shared bytes) and its prefix. */
static void set_key(rl__sl_node *n, const uint8_t *k, uint32_t kl) {
    n->key = k;
    n->key_len = kl;
    n->kpre = kprefix(k, kl);
}

/* The next node after x at level i (x NULL: the head). */
static rl__sl_node *nx(const rl__skiplist *l, const rl__sl_node *x, uint32_t i) { return x ? x->next[i] : l->head[i]; }

/* Fill upd[i] with the last node at level i whose key is < k (NULL: the head) and return the
 * first node with key >= k (NULL: none). */
static rl__sl_node *preds(const rl__skiplist *l, const uint8_t *k, uint32_t kl, rl__sl_node **upd) {
    rl__sl_node *x = NULL;
    uint64_t kp = kprefix(k, kl);
    for (uint32_t i = l->levels; i < RL__SL_MAX; i++) upd[i] = NULL; /* above the top: the head */
    for (uint32_t i = l->levels; i-- > 0;) {
        rl__sl_node *y;
        while ((y = nx(l, x, i)) && ncmp(y, k, kl, kp) < 0) x = y;
        upd[i] = x;
    }
    return nx(l, x, 0);
}

/* The first node with key >= k, without recording predecessors. */
static rl__sl_node *seek(const rl__skiplist *l, const uint8_t *k, uint32_t kl) {
    rl__sl_node *x = NULL;
    uint64_t kp = kprefix(k, kl);
    for (uint32_t i = l->levels; i-- > 0;) {
        rl__sl_node *y;
        while ((y = nx(l, x, i)) && ncmp(y, k, kl, kp) < 0) x = y;
    }
    return nx(l, x, 0);
}

static uint32_t draw_level(uint64_t *rng) {
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    uint32_t lv = 1;
    while (lv < RL__SL_MAX && (x & 3) == 0) {
        lv++;
        x >>= 2;
    }
    return lv;
}

/* A node of size bytes (its sl header first) with a fresh level, in arena a. NULL on OOM. */
static rl__sl_node *node_new(rl_arena *a, uint64_t *rng, size_t size) {
    uint32_t lv = draw_level(rng);
    rl__sl_node *n = rl__arena_alloc(a, size + lv * sizeof(rl__sl_node *));
    if (!n) return NULL;
    memset(n, 0, size);
    n->level = lv;
    n->next = (rl__sl_node **)((char *)n + size);
    return n;
}

/* Link n after the predecessors upd (from preds for n's key). */
static void link_node(rl__skiplist *l, rl__sl_node **upd, rl__sl_node *n) {
    if (n->level > l->levels) l->levels = n->level;
    for (uint32_t i = 0; i < n->level; i++) {
        n->next[i] = nx(l, upd[i], i);
        if (upd[i]) upd[i]->next[i] = n;
        else l->head[i] = n;
    }
    n->prev = upd[0];
    if (n->next[0]) n->next[0]->prev = n;
    else l->last = n;
    l->n++;
}

/* Unlink n, the node right after the predecessors upd at level 0. upd stays valid for the node
 * after n (so consecutive nodes can be removed with one search). */
static void unlink_node(rl__skiplist *l, rl__sl_node **upd, rl__sl_node *n) {
    for (uint32_t i = 0; i < n->level; i++) {
        if (upd[i]) upd[i]->next[i] = n->next[i];
        else l->head[i] = n->next[i];
    }
    if (n->next[0]) n->next[0]->prev = upd[0];
    else l->last = upd[0];
    l->n--;
}

/* Appending in key order (copies): tails[i] is the last node at level i. */
static void append_node(rl__skiplist *l, rl__sl_node **tails, rl__sl_node *n) {
    rl__sl_node *upd[RL__SL_MAX];
    for (uint32_t i = 0; i < RL__SL_MAX; i++) upd[i] = i < l->levels ? tails[i] : NULL;
    link_node(l, upd, n);
    for (uint32_t i = 0; i < n->level; i++) tails[i] = n;
}

/* ---- The map ------------------------------------------------------------------------------ */

void rl__wmap_init(rl__wmap *w, rl_arena *a) {
    memset(w, 0, sizeof *w);
    w->arena = a;
    w->rng = 0x9e3779b97f4a7c15ull;
}

void rl__wmap_release(rl__wmap *w) { rl__wmap_init(w, NULL); /* everything is in the arena */ }

void rl__wmap_reset(rl__wmap *w) {
    memset(&w->pts, 0, sizeof w->pts);
    memset(&w->clears, 0, sizeof w->clears);
}

int rl__wmap_empty(const rl__wmap *w) { return w->pts.n == 0 && w->clears.n == 0; }

const rl__wm_point *rl__wmap_seek(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    rl__sl_node *n = seek(&w->pts, k, kl);
    return n ? &((pnode *)n)->pt : NULL;
}

const rl__wm_point *rl__wmap_find(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    const rl__wm_point *p = rl__wmap_seek(w, k, kl);
    return p && kcmp(p->key, p->key_len, k, kl) == 0 ? p : NULL;
}

const rl__wm_point *rl__wmap_seek_before(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    rl__sl_node *n = seek(&w->pts, k, kl);
    rl__sl_node *b = n ? n->prev : w->pts.last;
    return b ? &((pnode *)b)->pt : NULL;
}

const rl__wm_point *rl__wmap_next(const rl__wm_point *p) {
    rl__sl_node *n = PNODE(p)->sl.next[0];
    return n ? &((pnode *)n)->pt : NULL;
}

const rl__wm_point *rl__wmap_prev(const rl__wm_point *p) {
    rl__sl_node *n = PNODE(p)->sl.prev;
    return n ? &((pnode *)n)->pt : NULL;
}

/* The first cleared range whose end is > k (NULL: none). Ranges are disjoint and sorted, so it
 * is the last one beginning before k when that one reaches past k, else the next one. */
static cnode *clear_lower(const rl__wmap *w, const uint8_t *k, uint32_t kl) {
    rl__sl_node *n = seek(&w->clears, k, kl);
    rl__sl_node *b = n ? n->prev : w->clears.last;
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
    rl__sl_node *n = seek(&w->clears, e, el); /* the first range beginning at or after e */
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
    rl__sl_node *upd[RL__SL_MAX];
    rl__sl_node *n = preds(&w->pts, k, kl, upd);
    if (n && kcmp(n->key, n->key_len, k, kl) == 0) {
        *out_is_new = 0;
        return &((pnode *)n)->pt;
    }
    uint8_t *kc = rl__arena_memdup(w->arena, k, kl);
    pnode *pn = kc || !kl ? (pnode *)node_new(w->arena, &w->rng, sizeof(pnode)) : NULL;
    if (!pn) return NULL;
    pn->pt.key = kc;
    pn->pt.key_len = kl;
    set_key(&pn->sl, kc, kl);
    pn->pt.kind = WM_ATOMIC;
    link_node(&w->pts, upd, &pn->sl);
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
    rl__sl_node *upd[RL__SL_MAX];
    /* Merge with every range that overlaps or touches [b, e): the ranges from the last one
     * beginning before b (when it reaches b) through the last one beginning at or before e. */
    const uint8_t *nb = b, *ne = e;
    uint32_t nbl = bl, nel = el;
    rl__sl_node *c = preds(&w->clears, b, bl, upd);
    if (upd[0] && kcmp(((cnode *)upd[0])->r.end, ((cnode *)upd[0])->r.end_len, b, bl) >= 0) {
        /* The range before b touches it: search again from its begin, so it is removed too. */
        cnode *t = (cnode *)upd[0];
        c = preds(&w->clears, t->r.begin, t->r.begin_len, upd);
    }
    while (c && kcmp(((cnode *)c)->r.begin, ((cnode *)c)->r.begin_len, e, el) <= 0) {
        cnode *t = (cnode *)c;
        if (kcmp(t->r.begin, t->r.begin_len, nb, nbl) < 0) nb = t->r.begin, nbl = t->r.begin_len;
        if (kcmp(t->r.end, t->r.end_len, ne, nel) > 0) ne = t->r.end, nel = t->r.end_len;
        rl__sl_node *after = c->next[0];
        unlink_node(&w->clears, upd, c);
        c = after;
    }
    /* Copy the new bounds when they come from the caller. */
    if (nb == b && !(nb = rl__arena_memdup(w->arena, b, bl)) && bl) return RL_E_OUT_OF_MEMORY;
    if (ne == e && !(ne = rl__arena_memdup(w->arena, e, el)) && el) return RL_E_OUT_OF_MEMORY;
    cnode *cn = (cnode *)node_new(w->arena, &w->rng, sizeof(cnode));
    if (!cn) return RL_E_OUT_OF_MEMORY;
    cn->r.begin = nb;
    cn->r.begin_len = nbl;
    set_key(&cn->sl, nb, nbl);
    cn->r.end = ne;
    cn->r.end_len = nel;
    preds(&w->clears, nb, nbl, upd);
    link_node(&w->clears, upd, &cn->sl);
    /* Drop the point entries inside [b, e). */
    rl__sl_node *p = preds(&w->pts, b, bl, upd);
    while (p && kcmp(p->key, p->key_len, e, el) < 0) {
        rl__sl_node *after = p->next[0];
        unlink_node(&w->pts, upd, p);
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
    rl__sl_node *tails[RL__SL_MAX] = {0};
    for (const rl__wm_point *q = rl__wmap_seek(w, b, bl); q && (!e || kcmp(q->key, q->key_len, e, el) < 0);
         q = rl__wmap_next(q)) {
        pnode *pn = (pnode *)node_new(a, &out->rng, sizeof(pnode));
        if (!pn) return RL_E_OUT_OF_MEMORY;
        pn->pt = *q;
        set_key(&pn->sl, q->key, q->key_len);
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
        append_node(&out->pts, tails, &pn->sl);
    }
    memset(tails, 0, sizeof tails);
    for (cnode *c = clear_lower(w, b, bl); c && (!e || kcmp(c->r.begin, c->r.begin_len, e, el) < 0);
         c = (cnode *)c->sl.next[0]) {
        cnode *cn = (cnode *)node_new(a, &out->rng, sizeof(cnode));
        if (!cn) return RL_E_OUT_OF_MEMORY;
        cn->r = c->r;
        set_key(&cn->sl, c->r.begin, c->r.begin_len);
        append_node(&out->clears, tails, &cn->sl);
    }
    return RL_OK;
}
