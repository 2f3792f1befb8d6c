/* keyidx.c — the write map's ordered index (keyidx.h): a B+tree of node pointers with packed
 * 8-byte key prefixes, over the nodes' doubly linked list.
 *
 * A page is a leaf (slots: the nodes, in key order) or an inner page (slot i: child i and, for
 * i >= 1, the node whose key is child i's lower bound — sep[i] — with its prefix; slot 0's node
 * is kept only as the promoted separator of a page that came from a split, and never searched).
 * A descent binary-searches each page's prefix array, reading a key's bytes only when two
 * prefixes tie. Inserts split a full page in two (an append at a page's end keeps the left page
 * full, so keys arriving in order pack pages); removals never merge: a page left empty is taken
 * out of its parent and a root left with one child is replaced by it (keyidx.h, invariants).
 * Pages for a split come from a spare list that rl__kx_reserve fills ahead, so a caller can make
 * an insert that cannot fail before it changes anything else.
 */
#include <string.h>

#include "base/bytes.h"
#include "kv/keyidx.h"
#include "reclayer/error.h"

struct rl__kx_page {
    uint32_t n;    /* slots in use */
    uint32_t leaf; /* 1: v[] holds the nodes; 0: child[] the pages, v[i >= 1] their separators */
    uint64_t kpre[RL__KX_FAN];
    rl__kx_node *v[RL__KX_FAN];
    rl__kx_page *child[RL__KX_FAN]; /* inner pages; a spare page links the next through child[0] */
};

void rl__kx_set_key(rl__kx_node *n, const uint8_t *k, uint32_t kl) {
    n->key = k;
    n->key_len = kl;
    n->kpre = rl__bytes_prefix64(k, kl);
}

void rl__kx_init(rl__keyidx *x, rl_arena *a) {
    memset(x, 0, sizeof *x);
    x->arena = a;
}

/* Slot key (prefix kp, node v) against (k, kl, p): <0, 0, >0. */
static inline int scmp(uint64_t kp, const rl__kx_node *v, const uint8_t *k, uint32_t kl, uint64_t p) {
    if (kp != p) return kp < p ? -1 : 1;
    return rl__bytes_cmp(v->key, v->key_len, k, kl);
}

/* Leaf: the first slot whose key is >= k (n when none). */
static int leaf_lower(const rl__kx_page *g, const uint8_t *k, uint32_t kl, uint64_t p) {
    int lo = 0, hi = (int)g->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (scmp(g->kpre[mid], g->v[mid], k, kl, p) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Inner page: the child whose range holds k — the last i >= 1 with sep[i] <= k, else 0. */
static int inner_child(const rl__kx_page *g, const uint8_t *k, uint32_t kl, uint64_t p) {
    int lo = 1, hi = (int)g->n; /* the first i in [1, n) with sep[i] > k */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (scmp(g->kpre[mid], g->v[mid], k, kl, p) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

rl__kx_node *rl__kx_locate(const rl__keyidx *x, const uint8_t *k, uint32_t kl, rl__kx_pos *pos) {
    rl__kx_page *g = x->root;
    if (!g) {
        pos->page[0] = NULL;
        pos->slot[0] = 0;
        return NULL;
    }
    uint64_t p = rl__bytes_prefix64(k, kl);
    for (uint32_t d = 0; d < x->depth; d++) {
        int c = inner_child(g, k, kl, p);
        pos->page[d] = g;
        pos->slot[d] = c;
        g = g->child[c];
    }
    int i = leaf_lower(g, k, kl, p);
    pos->page[x->depth] = g;
    pos->slot[x->depth] = i;
    if (i < (int)g->n) return g->v[i];
    return g->n ? g->v[g->n - 1]->next : NULL; /* the next leaf's first (invariant 1) */
}

rl__kx_node *rl__kx_seek(const rl__keyidx *x, const uint8_t *k, uint32_t kl) {
    rl__kx_pos pos;
    return rl__kx_locate(x, k, kl, &pos);
}

/* A fresh page: from the spare list, else the arena. NULL on out of memory. */
static rl__kx_page *page_new(rl__keyidx *x, int leaf) {
    rl__kx_page *g = x->spare;
    if (g) {
        x->spare = g->child[0];
        x->n_spare--;
    } else if (!(g = rl__arena_alloc(x->arena, sizeof *g))) {
        return NULL;
    }
    g->n = 0;
    g->leaf = (uint32_t)leaf;
    return g;
}

int rl__kx_reserve(rl__keyidx *x) {
    while (x->n_spare < x->depth + 2) {
        rl__kx_page *g = rl__arena_alloc(x->arena, sizeof *g);
        if (!g) return RL_E_OUT_OF_MEMORY;
        g->child[0] = x->spare;
        x->spare = g;
        x->n_spare++;
    }
    return RL_OK;
}

/* Put (kp, v, c) into page g (not full) at slot i. */
static void page_put(rl__kx_page *g, int i, uint64_t kp, rl__kx_node *v, rl__kx_page *c) {
    size_t m = g->n - (uint32_t)i;
    memmove(&g->kpre[i + 1], &g->kpre[i], m * sizeof g->kpre[0]);
    memmove(&g->v[i + 1], &g->v[i], m * sizeof g->v[0]);
    if (!g->leaf) memmove(&g->child[i + 1], &g->child[i], m * sizeof g->child[0]);
    g->kpre[i] = kp;
    g->v[i] = v;
    if (!g->leaf) g->child[i] = c;
    g->n++;
}

/* g is full: put (kp, v, c) at slot i and move the upper part into r (fresh, g's kind). The left
 * page keeps half, or all of its slots when the new one goes at the end (keys in order). */
static void page_split_put(rl__kx_page *g, rl__kx_page *r, int i, uint64_t kp, rl__kx_node *v, rl__kx_page *c) {
    enum { T = RL__KX_FAN + 1 };
    uint64_t tk[T];
    rl__kx_node *tv[T];
    rl__kx_page *tc[T];
    for (int s = 0, d = 0; d < T; d++) {
        if (d == i) {
            tk[d] = kp, tv[d] = v, tc[d] = c;
            continue;
        }
        tk[d] = g->kpre[s], tv[d] = g->v[s], tc[d] = g->leaf ? NULL : g->child[s];
        s++;
    }
    int h = i == RL__KX_FAN ? RL__KX_FAN : T / 2;
    g->n = (uint32_t)h;
    r->n = (uint32_t)(T - h);
    r->leaf = g->leaf;
    memcpy(g->kpre, tk, (size_t)h * sizeof tk[0]);
    memcpy(g->v, tv, (size_t)h * sizeof tv[0]);
    memcpy(r->kpre, tk + h, (size_t)(T - h) * sizeof tk[0]);
    memcpy(r->v, tv + h, (size_t)(T - h) * sizeof tv[0]);
    if (!g->leaf) {
        memcpy(g->child, tc, (size_t)h * sizeof tc[0]);
        memcpy(r->child, tc + h, (size_t)(T - h) * sizeof tc[0]);
    }
}

int rl__kx_insert_at(rl__keyidx *x, rl__kx_pos *pos, rl__kx_node *n) {
    if (!x->root) {
        rl__kx_page *g = page_new(x, 1);
        if (!g) return RL_E_OUT_OF_MEMORY;
        x->root = g;
        x->depth = 0;
        pos->page[0] = g;
        pos->slot[0] = 0;
    }
    /* Pages a split cascade needs, all taken before anything changes (the index is then left as
     * it was on out of memory). */
    uint32_t need = 0;
    int d = (int)x->depth;
    while (d >= 0 && pos->page[d]->n == RL__KX_FAN) need++, d--;
    if (d < 0) need++; /* a new root */
    if (x->depth + (d < 0) > RL__KX_MAX_DEPTH) return RL_E_OUT_OF_MEMORY;
    rl__kx_page *spare[RL__KX_MAX_DEPTH + 2];
    for (uint32_t j = 0; j < need; j++) {
        if (!(spare[j] = page_new(x, 0))) {
            while (j-- > 0) { /* back to the spare list */
                spare[j]->child[0] = x->spare;
                x->spare = spare[j];
                x->n_spare++;
            }
            return RL_E_OUT_OF_MEMORY;
        }
    }
    /* The list: n goes before the node at its slot (or after the leaf's last). */
    rl__kx_page *leaf = pos->page[x->depth];
    int i = pos->slot[x->depth];
    rl__kx_node *succ = i < (int)leaf->n ? leaf->v[i] : leaf->n ? leaf->v[leaf->n - 1]->next : NULL;
    rl__kx_node *pred = succ ? succ->prev : x->last;
    n->prev = pred;
    n->next = succ;
    if (pred) pred->next = n;
    else x->first = n;
    if (succ) succ->prev = n;
    else x->last = n;
    x->n++;
    /* The pages, from the leaf up. */
    uint64_t kp = n->kpre;
    rl__kx_node *v = n;
    rl__kx_page *c = NULL;
    uint32_t used = 0;
    for (d = (int)x->depth;; d--) {
        rl__kx_page *g = pos->page[d];
        int s = d == (int)x->depth ? i : pos->slot[d] + 1;
        if (g->n < RL__KX_FAN) {
            page_put(g, s, kp, v, c);
            break;
        }
        rl__kx_page *r = spare[used++];
        page_split_put(g, r, s, kp, v, c);
        kp = r->kpre[0], v = r->v[0], c = r; /* r's lower bound goes up */
        if (d == 0) {
            rl__kx_page *root = spare[used++];
            root->leaf = 0;
            root->n = 2;
            root->kpre[0] = g->kpre[0], root->v[0] = g->v[0], root->child[0] = g;
            root->kpre[1] = kp, root->v[1] = v, root->child[1] = r;
            x->root = root;
            x->depth++;
            break;
        }
    }
    return RL_OK;
}

int rl__kx_insert(rl__keyidx *x, rl__kx_node *n) {
    rl__kx_pos pos;
    rl__kx_locate(x, n->key, n->key_len, &pos);
    return rl__kx_insert_at(x, &pos, n);
}

/* Take slot i out of page g. */
static void page_del(rl__kx_page *g, int i) {
    size_t m = g->n - (uint32_t)i - 1;
    memmove(&g->kpre[i], &g->kpre[i + 1], m * sizeof g->kpre[0]);
    memmove(&g->v[i], &g->v[i + 1], m * sizeof g->v[0]);
    if (!g->leaf) memmove(&g->child[i], &g->child[i + 1], m * sizeof g->child[0]);
    g->n--;
}

void rl__kx_remove(rl__keyidx *x, rl__kx_node *n) {
    rl__kx_pos pos;
    rl__kx_node *at = rl__kx_locate(x, n->key, n->key_len, &pos);
    if (at != n) return; /* not indexed (keyidx.h forbids it; nothing to do) */
    if (n->prev) n->prev->next = n->next;
    else x->first = n->next;
    if (n->next) n->next->prev = n->prev;
    else x->last = n->prev;
    n->prev = n->next = NULL;
    x->n--;
    if (x->n == 0) { /* the index is empty: forget its pages */
        x->root = NULL;
        x->depth = 0;
        return;
    }
    /* Out of its leaf; a page left empty goes out of its parent (n > 0: never the root). */
    for (int d = (int)x->depth; d >= 0; d--) {
        rl__kx_page *g = pos.page[d];
        page_del(g, pos.slot[d]);
        if (g->n > 0) break;
    }
    while (x->depth > 0 && x->root->n == 1) { /* a root with one child: the child */
        x->root = x->root->child[0];
        x->depth--;
    }
}
