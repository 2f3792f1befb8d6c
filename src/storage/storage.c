/* storage.c — the versioned ordered map of the storage engine (the MVCC window), its reads and
 * apply, and the garbage collector. The files live behind the durable-engine interface
 * (engine.h): memory.c (memory) and ssd.c (LMDB).
 *
 * Structure: a B+tree of rows. A row is one heap allocation per key (its key, its chain of
 * versions newest first, each a value or a tombstone, and the first version inline). Leaves hold
 * up to BT_LEAF row pointers in key order next to a packed array of the rows' key prefixes, and
 * are linked both ways; inner nodes hold up to BT_FAN children and owned copies of their
 * separator keys. A hash table over the rows serves point reads (one probe plus the row);
 * range reads and selectors descend the tree once (a few binary searches over packed prefix
 * arrays) and walk the leaves.
 *
 *                      root bt_inner [ . | s1 | s2 ]           separators: owned key copies
 *                               /        |      \
 *        bt_leaf [pfx | kpre[0..n) | rows[0..n)] <-> [ ... ] <-> [ ... ]  (prev/next list)
 *                               |   |
 *                  bt_row {chain, klen, key, inline st_ver + value} -> older st_ver ...
 *                               ^
 *                  htab[hash(key)] (point reads), dirty ring (GC)
 *
 * Why (docs/benchmarks.md, KV section): with the former skiplist a scan was a chain of
 * dependent loads, node to next node, each a likely cache miss. Here the next rows' addresses
 * sit in a packed array, so a scan prefetches rows several positions ahead and their misses
 * overlap; the end of a range is decided once per leaf (by its last key) instead of per row;
 * and a descent is about three binary searches over arrays instead of ~17 pointer hops.
 * The newest committed value stays inline in the row, so a read at a recent version touches
 * the row only; older versions and tombstones in the window hang off the row's chain and are
 * read only by older reads.
 *
 * Invariants:
 *   1. Rows in the leaf list are strictly ascending (rl__bytes_cmp order); leaves' prev/next
 *      mirror each other; first/last are the ends. Every leaf holds 1..BT_LEAF rows, except the
 *      root leaf of an empty tree (0 rows).
 *   2. An inner node's child j holds only keys k with sep[j] <= k < sep[j + 1] (missing bounds
 *      come from the ancestors); all leaves are at the same depth st->depth; an inner node has
 *      1..BT_FAN children, the root >= 2 (a root with one child is collapsed at once).
 *      Separators are owned copies, so freeing a row never leaves a dangling bound.
 *   3. Every row in the tree has a non-empty chain; versions in a chain strictly decrease.
 *   4. oldest <= latest; oldest never decreases; a read at V in [oldest, latest] returns, per
 *      key, the newest chain entry with version <= V (absent if none or a tombstone). A read at
 *      V > latest reads at latest when the owner's read ceiling covers V (nothing will ever be
 *      applied in (latest, V]: storage.h, rl__storage_set_read_ceiling), decided in check_version
 *      under the same read lock as the read; otherwise it is RL_E_FUTURE_VERSION.
 *   5. GC may only rewrite history at or below oldest: it keeps the newest entry <= oldest (and
 *      everything newer), and drops that entry too when it is a tombstone. So invariant 4 holds
 *      whether or not GC has run.
 *   6. Every row whose chain has more than one entry or a tombstone at its head is in the dirty
 *      ring (in_dirty = 1), exactly once. Rows are removed only by GC when popped from the
 *      ring, so the ring never holds a freed row.
 *   7. live_keys / live_bytes count the keys (and key + value bytes) present at latest.
 *   8. Every row is in the hash table htab exactly once (linear probing, backward-shift
 *      deletion, load <= 1/2); point reads and writes to existing keys use it, not the tree.
 *      Rows never move (leaves hold pointers), so the table survives splits and merges.
 *   9. Each row is one allocation holding its key and the version it was created with
 *      (inline_ver); that version is freed only with the row (ver_free skips it).
 *  10. Writes (apply, collect, checkpoint, sync) hold the write lock; reads hold the read lock
 *      and allocate nothing except their results, which they copy into the caller's arena.
 *  11. A tree change either completes or, on RL_E_OUT_OF_MEMORY, leaves the tree unchanged:
 *      bt_insert allocates every node a split cascade needs before touching the tree; removal
 *      and merges allocate nothing.
 *  12. Prefix caches: every key of a leaf (every separator 1..n-1 of an inner node) starts with
 *      the node's pfx[0..off), off <= BT_PFX, and kpre[i] is key_prefix of the bytes after it.
 *      A search compares the key with pfx once per node (below it: position 0; above: the
 *      end), then compares 8-byte integers and reads key bytes only on a tie. Keys under one
 *      subspace share their first 15-20 bytes, which made the former whole-key prefixes all
 *      equal (every compare a memcmp). Any off up to the true common prefix is valid, so
 *      removals keep it; inserts that break it, splits and merges recompute it (leaf_reprefix,
 *      inner_reprefix) from the node's first and last keys (sorted keys: their common prefix
 *      is everyone's).
 *
 * Base (st->has_base: the ssd engine, whose LMDB holds the state at st->base_version below the
 * map; docs/design.md §4):
 *   B1. A read at v takes the newest entry at or below v of the key's row (a value, or a
 *       tombstone that hides the base); when the row has none, or there is no row, the base's
 *       value stands. Ranges and selectors merge the map's rows with a base cursor (mcur).
 *   B2. A write to a key not in the map looks the key up in the base (live counts, atomic
 *       operations); a clear of a base key becomes a tombstone row, and a range clear gives
 *       every base key of the range not in the map a tombstone row first.
 *   B3. GC keeps the newest entry at or below oldest even when it is a tombstone, and removes a
 *       row once its only entry is at or below both oldest and base_version (the base answers).
 *   B4. Every row either has an entry at or below oldest or has all its entries after
 *       base_version (so the base holds the value before its oldest entry): rows created after
 *       the last flush have the second form; a flush pins the first form (rl__storage_map_pin)
 *       before the base moves, and GC keeps it (B3). So B1's fall-through to the base is
 *       always to the value the key had.
 *
 * Rebalancing: a leaf left with fewer than BT_LEAF/4 rows by a removal merges with a sibling
 * under the same parent when both fit in BT_LEAF/2; an empty leaf or inner node is unlinked.
 * Inner nodes do not otherwise merge (under-full inner nodes cost a little depth, never
 * correctness). A split of the last leaf at its end (keys loaded in order: a checkpoint
 * recovery, a bulk load) keeps the left leaf full instead of halving it.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/hash.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "storage/storage_int.h"
#include "storage/wal.h"

#define DEFAULT_WINDOW 5000000u

/* ---- point-read hash ---------------------------------------------------------------------- */

static inline uint64_t key_hash(const uint8_t *k, size_t kl) { return rl__hash64(k, kl, 0) | 1; }

/* The row with key k, or NULL. */
static bt_row *hfind(const rl__storage *st, const uint8_t *k, size_t kl) {
    if (!st->hcap) return NULL;
    uint64_t h = key_hash(k, kl);
    size_t mask = st->hcap - 1;
    for (size_t i = h & mask; st->htab[i].r; i = (i + 1) & mask) {
        const bt_row *r = st->htab[i].r;
        if (st->htab[i].h != h) continue;
        /* The row's next two lines (its value, read right after a hit) are asked for while its
         * first one (klen, the key) is awaited: the misses overlap instead of following. */
        __builtin_prefetch((const char *)r + 64);
        __builtin_prefetch((const char *)r + 128);
        if (r->klen == kl && (kl == 0 || memcmp(r->key, k, kl) == 0)) return st->htab[i].r;
    }
    return NULL;
}

static void hput(st_hslot *tab, size_t cap, uint64_t h, bt_row *r) {
    size_t i = h & (cap - 1);
    while (tab[i].r) i = (i + 1) & (cap - 1);
    tab[i].h = h;
    tab[i].r = r;
}

/* Make room for one more row (grows the table; RL_E_OUT_OF_MEMORY leaves it unchanged). */
static int hreserve(rl__storage *st) {
    if ((st->hcount + 1) * 2 <= st->hcap) return RL_OK;
    size_t cap = st->hcap ? st->hcap * 2 : 1024;
    st_hslot *t = rl__calloc(cap, sizeof *t);
    if (!t) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < st->hcap; i++)
        if (st->htab[i].r) hput(t, cap, st->htab[i].h, st->htab[i].r);
    rl__free(st->htab);
    st->htab = t;
    st->hcap = cap;
    return RL_OK;
}

static void hremove(rl__storage *st, const bt_row *r) {
    size_t mask = st->hcap - 1, i = key_hash(r->key, r->klen) & mask;
    while (st->htab[i].r != r) i = (i + 1) & mask;
    /* Backward-shift deletion keeps every probe chain unbroken. */
    for (size_t j = (i + 1) & mask; st->htab[j].r; j = (j + 1) & mask) {
        size_t home = st->htab[j].h & mask;
        int movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            st->htab[i] = st->htab[j];
            i = j;
        }
    }
    st->htab[i].r = NULL;
    st->hcount--;
}

/* ---- keys and rows ----------------------------------------------------------------------- */

/* The first 8 bytes of k as a big-endian integer, zero-padded (base/bytes.h). */
static inline uint64_t key_prefix(const uint8_t *k, size_t kl) { return rl__bytes_prefix64(k, kl); }

/* Compare key a (prefix ap) with key k (prefix kp): the prefixes decide unless equal. */
static inline int pcmp(uint64_t ap, const uint8_t *a, size_t al, uint64_t kp, const uint8_t *k, size_t kl) {
    if (ap != kp) return ap < kp ? -1 : 1;
    return rl__bytes_cmp(a, al, k, kl);
}

/* The length of the longest common prefix of a[0..al) and b[0..bl), at most cap. */
static size_t common_prefix(const uint8_t *a, size_t al, const uint8_t *b, size_t bl, size_t cap) {
    size_t m = al < bl ? al : bl, i = 0;
    if (m > cap) m = cap;
    while (i < m && a[i] == b[i]) i++;
    return i;
}

/* Where key k lies against a node's shared prefix pfx[0..off): -1 below every key of the node
 * (k sorts before the prefix, or is a proper prefix of it), 1 above every key, 0 if k starts
 * with the prefix (then only the bytes after it decide). */
static inline int prefix_side(const uint8_t *pfx, uint32_t off, const uint8_t *k, size_t kl) {
    if (off == 0) return 0;
    size_t m = kl < off ? kl : off;
    /* memcmp(k, pfx, m) inline, 8 bytes at a time as big-endian integers (m <= BT_PFX: a few
     * words; the call was a fifth of a record load's key compares); the last word overlaps the
     * one before, whose bytes are equal by then. */
    size_t i = 0;
    for (; i + 8 <= m; i += 8) {
        uint64_t a = key_prefix(k + i, 8), b = key_prefix(pfx + i, 8);
        if (a != b) return a < b ? -1 : 1;
    }
    if (i < m) {
        size_t at = m >= 8 ? m - 8 : 0, n = m >= 8 ? 8 : m; /* zero-padded alike when m < 8 */
        uint64_t a = key_prefix(k + at, n), b = key_prefix(pfx + at, n);
        if (a != b) return a < b ? -1 : 1;
    }
    return kl < off ? -1 : 0;
}

static int row_cmp(const bt_row *r, const uint8_t *k, size_t kl) { return rl__bytes_cmp(r->key, r->klen, k, kl); }

/* The version allocated inside row r (after its key, 8-byte aligned): every row is created with
 * its first value there, so a key written once (a loaded dataset) costs one allocation and one
 * miss (two or three adjacent lines) per row in a scan. It is freed with the row only. */
static inline st_ver *inline_ver(const bt_row *r) {
    uintptr_t p = (uintptr_t)(r->key + r->klen);
    return (st_ver *)((p + 7) & ~(uintptr_t)7);
}

static st_ver *ver_new(rl__version v, const uint8_t *val, uint32_t len, int is_clear) {
    st_ver *e = rl__malloc(sizeof *e + len);
    if (!e) return NULL;
    e->older = NULL;
    e->v = v;
    e->len = len;
    e->is_clear = (uint8_t)is_clear;
    if (len) memcpy(e->data, val, len);
    return e;
}

static void ver_free(const bt_row *r, st_ver *e) {
    if (e != inline_ver(r)) rl__free(e);
}

static void chain_free(const bt_row *r, st_ver *e) {
    while (e) {
        st_ver *o = e->older;
        ver_free(r, e);
        e = o;
    }
}

/* A new row for key k whose only version is (v, val). NULL on OOM. The caller owns it until it
 * is linked into the tree. */
static bt_row *row_new(const uint8_t *k, uint32_t kl, rl__version v, const uint8_t *val, uint32_t vl) {
    size_t keyend = sizeof(bt_row) + kl;
    bt_row *r = rl__malloc(((keyend + 7) & ~(size_t)7) + sizeof(st_ver) + vl);
    if (!r) return NULL;
    r->klen = kl;
    r->in_dirty = 0;
    if (kl) memcpy(r->key, k, kl);
    st_ver *e = inline_ver(r);
    e->older = NULL;
    e->v = v;
    e->len = vl;
    e->is_clear = 0;
    if (vl) memcpy(e->data, val, vl);
    r->chain = e;
    return r;
}

/* The entry visible at v: the newest with version <= v, or NULL if none or a tombstone. */
static inline const st_ver *visible(const bt_row *r, rl__version v) {
    const st_ver *e = r->chain;
    while (e && e->v > v) e = e->older;
    return e && !e->is_clear ? e : NULL;
}

/* The newest entry at or below v (a value or a tombstone), or NULL if none. */
static inline const st_ver *entry_at(const bt_row *r, rl__version v) {
    const st_ver *e = r->chain;
    while (e && e->v > v) e = e->older;
    return e;
}

/* ---- B+tree: search ---------------------------------------------------------------------- */

/* A position in the leaf list: row i of leaf l; l == NULL is past either end. */
typedef struct {
    bt_leaf *l;
    uint32_t i;
} cursor;

/* The inner nodes of a descent and the child index taken in each, root first. */
typedef struct {
    bt_inner *node[BT_MAX_DEPTH];
    uint32_t idx[BT_MAX_DEPTH];
} bt_path;

/* The child of in to descend into for key k: the last j with j == 0 or sep[j] <= k. The node's
 * shared prefix is compared once; the binary search then compares the cached 8 bytes after it
 * and reads separator bytes only on a tie (invariant 12). */
static inline uint32_t inner_pick(const bt_inner *in, const uint8_t *k, size_t kl) {
    if (in->n < 2) return 0;
    uint32_t off = in->off;
    int side = prefix_side(in->pfx, off, k, kl);
    if (side) return side < 0 ? 0 : in->n - 1;
    const uint8_t *ks = off ? k + off : k; /* k may be NULL when kl == 0 */
    size_t ksl = kl - off;
    uint64_t kp = key_prefix(ks, ksl);
    uint32_t lo = 1, hi = in->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        const bt_sep *s = in->sep[mid];
        if (pcmp(in->kpre[mid], s->key + off, s->klen - off, kp, ks, ksl) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

/* The index of the first row of l with key >= k (with strict: > k); l->n if none. Like
 * inner_pick, the leaf's shared prefix is compared once, then the cached bytes after it. */
static inline uint32_t leaf_search(const bt_leaf *l, const uint8_t *k, size_t kl, int strict) {
    if (l->n == 0) return 0;
    uint32_t off = l->off;
    int side = prefix_side(l->pfx, off, k, kl);
    if (side) return side < 0 ? 0 : l->n;
    const uint8_t *ks = off ? k + off : k; /* k may be NULL when kl == 0 */
    size_t ksl = kl - off;
    uint64_t kp = key_prefix(ks, ksl);
    uint32_t lo = 0, hi = l->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        const bt_row *r = l->rows[mid];
        int c = pcmp(l->kpre[mid], r->key + off, r->klen - off, kp, ks, ksl);
        if (c < 0 || (strict && c == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The leaf whose key interval holds k; records the path when path is not NULL. */
static bt_leaf *descend(const rl__storage *st, const uint8_t *k, size_t kl, bt_path *path) {
    void *x = st->root;
    for (int d = 0; d < st->depth; d++) {
        bt_inner *in = x;
        uint32_t j = inner_pick(in, k, kl);
        if (path) {
            path->node[d] = in;
            path->idx[d] = j;
        }
        x = in->child[j];
    }
    return x;
}

/* The first row with key >= k (with strict: > k). Every key of the leaves after the one k
 * descends to is >= its upper separator > k, so the answer is in that leaf or is the first row
 * of the next one (leaves are never empty, invariant 1). */
static cursor seek(const rl__storage *st, const uint8_t *k, size_t kl, int strict) {
    bt_leaf *l = descend(st, k, kl, NULL);
    cursor c = {l, leaf_search(l, k, kl, strict)};
    if (c.i == l->n) {
        c.l = l->next;
        c.i = 0;
    }
    return c;
}

static inline void cur_next(cursor *c) {
    if (++c->i == c->l->n) {
        c->l = c->l->next;
        c->i = 0;
    }
}

static inline void cur_prev(cursor *c) {
    if (c->i == 0) {
        c->l = c->l->prev;
        c->i = c->l ? c->l->n - 1 : 0;
    } else {
        c->i--;
    }
}

/* The position before c (c past the end: the last row). */
static cursor cur_before(const rl__storage *st, cursor c) {
    if (c.l) {
        cur_prev(&c);
    } else {
        c.l = st->last->n ? st->last : NULL;
        c.i = st->last->n ? st->last->n - 1 : 0;
    }
    return c;
}

static inline bt_row *cur_row(cursor c) { return c.l->rows[c.i]; }

/* ---- B+tree: insert ---------------------------------------------------------------------- */

static bt_sep *sep_new(const uint8_t *k, uint32_t kl) {
    bt_sep *s = rl__malloc(sizeof *s + kl);
    if (!s) return NULL;
    s->klen = kl;
    if (kl) memcpy(s->key, k, kl);
    return s;
}

/* Recompute l's shared prefix (that of its first and last keys, at most BT_PFX bytes) and
 * every cached kpre after it (invariant 12). Reads every row's key: used when a leaf is formed
 * (split, merge) or an insert at its edge breaks the prefix, not per insert. */
static void leaf_reprefix(bt_leaf *l) {
    uint32_t off = 0;
    if (l->n) {
        const bt_row *a = l->rows[0], *b = l->rows[l->n - 1];
        off = (uint32_t)common_prefix(a->key, a->klen, b->key, b->klen, BT_PFX);
        memcpy(l->pfx, a->key, off);
    }
    l->off = off;
    for (uint32_t i = 0; i < l->n; i++) l->kpre[i] = key_prefix(l->rows[i]->key + off, l->rows[i]->klen - off);
}

/* The same for an inner node's separators 1..n-1. */
static void inner_reprefix(bt_inner *in) {
    uint32_t off = 0;
    if (in->n >= 2) {
        const bt_sep *a = in->sep[1], *b = in->sep[in->n - 1];
        off = (uint32_t)common_prefix(a->key, a->klen, b->key, b->klen, BT_PFX);
        memcpy(in->pfx, a->key, off);
    }
    in->off = off;
    in->kpre[0] = 0;
    for (uint32_t j = 1; j < in->n; j++) in->kpre[j] = key_prefix(in->sep[j]->key + off, in->sep[j]->klen - off);
}

/* 1 if key k starts with the shared prefix pfx[0..off). */
static inline int has_prefix(const uint8_t *pfx, uint32_t off, const uint8_t *k, size_t kl) {
    return kl >= off && memcmp(k, pfx, off) == 0;
}

/* Insert row r at pos of l (room required); keeps invariant 12, shortening the leaf's shared
 * prefix if r does not start with it. */
static void leaf_put(bt_leaf *l, uint32_t pos, bt_row *r) {
    memmove(&l->rows[pos + 1], &l->rows[pos], (l->n - pos) * sizeof l->rows[0]);
    memmove(&l->kpre[pos + 1], &l->kpre[pos], (l->n - pos) * sizeof l->kpre[0]);
    l->rows[pos] = r;
    l->n++;
    if (has_prefix(l->pfx, l->off, r->key, r->klen)) l->kpre[pos] = key_prefix(r->key + l->off, r->klen - l->off);
    else leaf_reprefix(l);
}

/* Insert child c with lower bound s at index j >= 1 of in (room required); keeps invariant 12. */
static void inner_put(bt_inner *in, uint32_t j, bt_sep *s, void *c) {
    memmove(&in->child[j + 1], &in->child[j], (in->n - j) * sizeof in->child[0]);
    memmove(&in->sep[j + 1], &in->sep[j], (in->n - j) * sizeof in->sep[0]);
    memmove(&in->kpre[j + 1], &in->kpre[j], (in->n - j) * sizeof in->kpre[0]);
    in->child[j] = c;
    in->sep[j] = s;
    in->n++;
    if (in->n >= 3 && has_prefix(in->pfx, in->off, s->key, s->klen))
        in->kpre[j] = key_prefix(s->key + in->off, s->klen - in->off);
    else inner_reprefix(in);
}

/* Link row r (its key not in the tree) into the tree, splitting the leaf and as many ancestors
 * as are full. Every allocation happens first: RL_E_OUT_OF_MEMORY leaves the tree unchanged
 * (invariant 11). r stays owned by the caller on error, by the tree on success. */
static int bt_insert(rl__storage *st, bt_row *r) {
    bt_path p;
    bt_inner *spare[BT_MAX_DEPTH + 1];
    int nspare = 0, d;
    bt_leaf *l = descend(st, r->key, r->klen, &p);
    uint32_t pos = leaf_search(l, r->key, r->klen, 0);
    if (l->n < BT_LEAF) {
        leaf_put(l, pos, r);
        return RL_OK;
    }
    /* Split: a new leaf, a separator copy, one inner node per full ancestor, a new root if all
     * of them are full. Appending past the last row keeps the left leaf full. */
    int append = l == st->last && pos == l->n;
    uint32_t mid = append ? l->n : BT_LEAF / 2;
    const bt_row *srow = append ? r : l->rows[mid];
    int nfull = 0;
    for (d = st->depth - 1; d >= 0 && p.node[d]->n == BT_FAN; d--) nfull++;
    if (st->depth + (nfull == st->depth) > BT_MAX_DEPTH) return RL_E_OUT_OF_MEMORY;
    bt_leaf *nl = rl__malloc(sizeof *nl);
    bt_sep *sep = sep_new(srow->key, srow->klen);
    if (!nl || !sep) goto fail;
    for (nspare = 0; nspare < nfull + (nfull == st->depth); nspare++)
        if (!(spare[nspare] = rl__malloc(sizeof(bt_inner)))) goto fail;
    /* The leaf: rows [mid, n) move right, then r goes to its side. */
    nl->n = l->n - mid;
    memcpy(nl->rows, &l->rows[mid], nl->n * sizeof nl->rows[0]);
    l->n = mid;
    nl->off = 0; /* the halves get their own prefixes below */
    if (pos <= mid && !append) leaf_put(l, pos, r);
    else leaf_put(nl, pos - mid, r);
    leaf_reprefix(l);
    leaf_reprefix(nl);
    nl->prev = l;
    nl->next = l->next;
    if (l->next) l->next->prev = nl;
    else st->last = nl;
    l->next = nl;
    /* Up the path: insert (sep, child) at idx + 1; a full node splits at BT_FAN / 2 and
     * promotes its separator there. */
    void *child = nl;
    for (d = st->depth - 1; d >= 0; d--) {
        bt_inner *in = p.node[d];
        uint32_t j = p.idx[d] + 1;
        if (in->n < BT_FAN) {
            inner_put(in, j, sep, child);
            return RL_OK;
        }
        bt_inner *ri = spare[--nspare];
        uint32_t h = BT_FAN / 2;
        ri->n = in->n - h;
        memcpy(ri->child, &in->child[h], ri->n * sizeof ri->child[0]);
        memcpy(ri->sep, &in->sep[h], ri->n * sizeof ri->sep[0]);
        in->n = h;
        bt_sep *up = ri->sep[0];
        ri->sep[0] = NULL;
        inner_reprefix(in);
        inner_reprefix(ri);
        if (j <= h) inner_put(in, j, sep, child);
        else inner_put(ri, j - h, sep, child);
        sep = up;
        child = ri;
    }
    /* Every level split (or the root was a leaf): a new root over the two halves. */
    bt_inner *root = spare[--nspare];
    root->n = 2;
    root->child[0] = st->root;
    root->child[1] = child;
    root->sep[0] = NULL;
    root->sep[1] = sep;
    inner_reprefix(root);
    st->root = root;
    st->depth++;
    return RL_OK;
fail:
    while (nspare > 0) rl__free(spare[--nspare]);
    rl__free(sep);
    rl__free(nl);
    return RL_E_OUT_OF_MEMORY;
}

/* ---- B+tree: remove ---------------------------------------------------------------------- */

static void leaf_unlink(rl__storage *st, bt_leaf *l) {
    if (l->prev) l->prev->next = l->next;
    else st->first = l->next;
    if (l->next) l->next->prev = l->prev;
    else st->last = l->prev;
    rl__free(l);
}

/* Remove child p->idx[d] (already freed or merged away) from p->node[d] with its separator;
 * an inner node left empty is freed and removed from its parent in turn; a root left with one
 * child is collapsed (invariant 2). */
static void inner_drop(rl__storage *st, bt_path *p, int d) {
    bt_inner *in = p->node[d];
    uint32_t j = p->idx[d];
    if (j == 0) {
        /* Child 1 becomes child 0; its separator goes (the ancestors bound it already). */
        if (in->n > 1) {
            rl__free(in->sep[1]);
            in->child[0] = in->child[1];
            j = 1;
        }
    } else {
        rl__free(in->sep[j]);
    }
    if (j + 1 < in->n) {
        memmove(&in->child[j], &in->child[j + 1], (in->n - j - 1) * sizeof in->child[0]);
        memmove(&in->sep[j], &in->sep[j + 1], (in->n - j - 1) * sizeof in->sep[0]);
        memmove(&in->kpre[j], &in->kpre[j + 1], (in->n - j - 1) * sizeof in->kpre[0]);
    }
    in->n--;
    if (in->n == 0) {
        /* Never the root: a root has >= 2 children and collapses at 1. */
        rl__free(in);
        inner_drop(st, p, d - 1);
        return;
    }
    while (st->depth > 0 && ((bt_inner *)st->root)->n == 1) {
        bt_inner *old = st->root;
        st->root = old->child[0];
        st->depth--;
        rl__free(old);
    }
}

/* Move every row of b (the right neighbour of a) to the end of a; frees b. */
static void leaf_merge(rl__storage *st, bt_leaf *a, bt_leaf *b) {
    memcpy(&a->rows[a->n], b->rows, b->n * sizeof b->rows[0]);
    a->n += b->n;
    leaf_reprefix(a);
    leaf_unlink(st, b);
}

/* Unlink row r from the tree (not from the hash; r is not freed). Allocates nothing. */
static void bt_remove(rl__storage *st, const bt_row *r) {
    bt_path p;
    bt_leaf *l = descend(st, r->key, r->klen, &p);
    uint32_t i = leaf_search(l, r->key, r->klen, 0);
    assert(i < l->n && l->rows[i] == r);
    memmove(&l->rows[i], &l->rows[i + 1], (l->n - i - 1) * sizeof l->rows[0]);
    memmove(&l->kpre[i], &l->kpre[i + 1], (l->n - i - 1) * sizeof l->kpre[0]);
    l->n--;
    if (st->depth == 0 || l->n >= BT_LEAF / 4) return;
    int d = st->depth - 1;
    bt_inner *par = p.node[d];
    uint32_t j = p.idx[d];
    if (l->n == 0) {
        leaf_unlink(st, l);
        inner_drop(st, &p, d);
    } else if (j + 1 < par->n && l->n + ((bt_leaf *)par->child[j + 1])->n <= BT_LEAF / 2) {
        leaf_merge(st, l, par->child[j + 1]);
        p.idx[d] = j + 1;
        inner_drop(st, &p, d);
    } else if (j > 0 && ((bt_leaf *)par->child[j - 1])->n + l->n <= BT_LEAF / 2) {
        leaf_merge(st, par->child[j - 1], l);
        inner_drop(st, &p, d);
    }
}

/* Free inner node x at height h above the leaves (h >= 1) and its inner descendants. */
static void inner_free(bt_inner *x, int h) {
    for (uint32_t j = 0; j < x->n; j++) {
        if (j) rl__free(x->sep[j]);
        if (h > 1) inner_free(x->child[j], h - 1);
    }
    rl__free(x);
}

/* Unlink row r from the hash and the tree and free it with its chain. */
static void row_remove(rl__storage *st, bt_row *r) {
    hremove(st, r);
    bt_remove(st, r);
    chain_free(r, r->chain);
    rl__free(r);
}

/* ---- GC ---------------------------------------------------------------------------------- */

static int dirty_push(rl__storage *st, bt_row *r) {
    if (r->in_dirty) return RL_OK;
    if (st->dirty_n == st->dirty_cap) {
        size_t cap = st->dirty_cap ? st->dirty_cap * 2 : 256;
        bt_row **d = rl__malloc(cap * sizeof *d);
        if (!d) return RL_E_OUT_OF_MEMORY;
        for (size_t i = 0; i < st->dirty_n; i++) d[i] = st->dirty[(st->dirty_head + i) % st->dirty_cap];
        rl__free(st->dirty);
        st->dirty = d;
        st->dirty_cap = cap;
        st->dirty_head = 0;
    }
    st->dirty[(st->dirty_head + st->dirty_n) % st->dirty_cap] = r;
    st->dirty_n++;
    r->in_dirty = 1;
    return RL_OK;
}

static int needs_gc(const bt_row *r) { return r->chain->older != NULL || r->chain->is_clear; }

/* Collapse the history of r at or below oldest (invariant 5). Returns 1 if r was removed. */
static int collapse(rl__storage *st, bt_row *r) {
    st_ver **link = &r->chain;
    while (*link && (*link)->v > st->oldest) link = &(*link)->older;
    st_ver *e = *link;
    if (!e) return 0;
    chain_free(r, e->older);
    e->older = NULL;
    if (st->has_base) {
        /* Base rule B3: an entry at or below oldest is kept even when it is a tombstone (the
         * base may hold an older value, or a newer flushed one the entry hides); the row goes
         * once its only entry is in the base too. */
        if (e == r->chain && e->v <= st->base_version) {
            row_remove(st, r);
            return 1;
        }
        return 0;
    }
    if (e->is_clear) {
        ver_free(r, e);
        *link = NULL;
    }
    if (r->chain == NULL) {
        row_remove(st, r);
        return 1;
    }
    return 0;
}

/* Pop up to budget rows from the dirty ring, collapse them, requeue those still dirty. */
static void gc_steps(rl__storage *st, size_t budget) {
    while (budget-- > 0 && st->dirty_n > 0) {
        bt_row *r = st->dirty[st->dirty_head];
        st->dirty_head = (st->dirty_head + 1) % st->dirty_cap;
        st->dirty_n--;
        r->in_dirty = 0;
        if (!collapse(st, r) && needs_gc(r)) dirty_push(st, r); /* room: just popped one */
    }
}

void rl__storage_collect(rl__storage *st) {
    pthread_rwlock_wrlock(&st->lock);
    gc_steps(st, st->dirty_n);
    pthread_rwlock_unlock(&st->lock);
}

/* ---- apply ------------------------------------------------------------------------------- */

/* Link a new row for key k with one version (v, val) into the hash and the tree. The key must
 * be absent. RL_E_OUT_OF_MEMORY leaves both unchanged. */
static int row_insert_out(rl__storage *st, const uint8_t *k, uint32_t kl, rl__version v, const uint8_t *val,
                          uint32_t vl, bt_row **out) {
    if (hreserve(st) != RL_OK) return RL_E_OUT_OF_MEMORY;
    bt_row *r = row_new(k, kl, v, val, vl);
    if (out) *out = r;
    if (!r) return RL_E_OUT_OF_MEMORY;
    if (bt_insert(st, r) != RL_OK) {
        rl__free(r);
        return RL_E_OUT_OF_MEMORY;
    }
    hput(st->htab, st->hcap, key_hash(k, kl), r);
    st->hcount++;
    st->live_keys++;
    st->live_bytes += kl + vl;
    return RL_OK;
}

/* The same for a key absent from the state at latest (a new key; a checkpoint's load), which
 * the byte sample learns of. */
static int row_insert(rl__storage *st, const uint8_t *k, uint32_t kl, rl__version v, const uint8_t *val, uint32_t vl) {
    int rc = rl__bsample_note(&st->sample, k, kl, 0, 0, 1, vl);
    if (rc == RL_OK) rc = row_insert_out(st, k, kl, v, val, vl, NULL);
    return rc;
}

/* A new row for key k, which is not in the map but may be in the base (base_present, its value
 * base_len bytes): one entry at v, a value or (is_clear) a tombstone. Keeps the live counts of
 * the whole state. */
static int row_over_base(rl__storage *st, rl__version v, const uint8_t *k, uint32_t kl, const uint8_t *val, uint32_t vl,
                         int is_clear, int base_present, uint32_t base_len) {
    bt_row *r = NULL;
    int rc = rl__bsample_note(&st->sample, k, kl, base_present, base_len, !is_clear, vl);
    if (rc != RL_OK) return rc;
    rc = row_insert_out(st, k, kl, v, is_clear ? NULL : val, is_clear ? 0 : vl, &r);
    if (rc != RL_OK) return rc;
    st->touched++;
    if (base_present) {
        st->live_keys--;
        st->live_bytes -= kl + base_len;
    }
    if (is_clear) {
        r->chain->is_clear = 1;
        st->live_keys--;
        st->live_bytes -= kl;
        return dirty_push(st, r);
    }
    return RL_OK;
}

/* Point read of the base for a writer (value in st->base_buf). */
static int base_lookup(rl__storage *st, const uint8_t *k, uint32_t kl, int *present, const uint8_t **val,
                       uint32_t *vl) {
    *present = 0;
    *val = NULL;
    *vl = 0;
    if (!st->has_base) return RL_OK;
    return st->eng->base_get(st, k, kl, NULL, &st->base_buf, present, val, vl);
}

/* Write a value (or a tombstone when is_clear) for key k at version v. */
static int write_key(rl__storage *st, rl__version v, const uint8_t *k, uint32_t kl, const uint8_t *val, uint32_t vl,
                     int is_clear) {
    bt_row *r = hfind(st, k, kl);
    if (!r && st->has_base) {
        int bp;
        const uint8_t *bv;
        uint32_t bl;
        int rc = base_lookup(st, k, kl, &bp, &bv, &bl);
        if (rc != RL_OK) return rc;
        if (is_clear && !bp) return RL_OK; /* absent at every readable version already */
        return row_over_base(st, v, k, kl, val, vl, is_clear, bp, bl);
    }
    if (!r) {
        if (is_clear) return RL_OK; /* absent at every readable version already */
        int rc = row_insert(st, k, kl, v, val, vl);
        if (rc == RL_OK) st->touched++;
        return rc;
    }
    st_ver *head = r->chain;
    if (is_clear && head->is_clear) return RL_OK;
    if (rl__bsample_note(&st->sample, k, kl, !head->is_clear, head->len, !is_clear, vl) != RL_OK)
        return RL_E_OUT_OF_MEMORY;
    st_ver *e = ver_new(v, val, vl, is_clear);
    if (!e) return RL_E_OUT_OF_MEMORY;
    if (!head->is_clear) {
        st->live_keys--;
        st->live_bytes -= kl + head->len;
    }
    if (!is_clear) {
        st->live_keys++;
        st->live_bytes += kl + vl;
    }
    if (head->v == v) {
        e->older = head->older;
        ver_free(r, head);
    } else {
        e->older = head;
    }
    r->chain = e;
    st->touched++;
    if (needs_gc(r)) return dirty_push(st, r);
    return RL_OK;
}

static int clear_range(rl__storage *st, rl__version v, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    if (rl__bytes_cmp(b, bl, e, el) >= 0) return RL_OK;
    rl__bsample_clear_range(&st->sample, b, bl, e, el); /* every pair of the range goes */
    if (st->has_base) {
        /* Base rule B2: every base key of the range not in the map gets a tombstone row. */
        rl__base_cur *bc = NULL;
        const uint8_t *k, *val;
        uint32_t kl, vl;
        int rc = st->eng->cur_open(st, &bc);
        if (rc == RL_OK) rc = st->eng->cur_seek_ge(bc, b, bl, 0);
        while (rc == RL_OK && st->eng->cur_get(bc, &k, &kl, &val, &vl) && rl__bytes_cmp(k, kl, e, el) < 0) {
            if (!hfind(st, k, kl)) rc = row_over_base(st, v, k, kl, NULL, 0, 1, 1, vl);
            if (rc == RL_OK) rc = st->eng->cur_next(bc);
        }
        st->eng->cur_close(bc);
        if (rc != RL_OK) return rc;
    }
    for (cursor c = seek(st, b, bl, 0); c.l && row_cmp(cur_row(c), e, el) < 0; cur_next(&c)) {
        bt_row *r = cur_row(c);
        st_ver *head = r->chain;
        if (head->is_clear) continue;
        st_ver *t = ver_new(v, NULL, 0, 1);
        if (!t) return RL_E_OUT_OF_MEMORY;
        st->live_keys--;
        st->live_bytes -= r->klen + head->len;
        if (head->v == v) {
            t->older = head->older;
            ver_free(r, head);
        } else {
            t->older = head;
        }
        r->chain = t;
        st->touched++;
        if (dirty_push(st, r) != RL_OK) return RL_E_OUT_OF_MEMORY;
    }
    return RL_OK;
}

int rl__storage_map_apply(rl__storage *st, rl__version v, const rl__mutation *muts, size_t n) {
    int rc = RL_OK;
    st->touched = 0;
    for (size_t i = 0; i < n && rc == RL_OK; i++) {
        const rl__mutation *m = &muts[i];
        switch (m->type) {
        case RL_MUT_SET: rc = write_key(st, v, m->p1, m->len1, m->p2, m->len2, 0); break;
        case RL_MUT_CLEAR: rc = write_key(st, v, m->p1, m->len1, NULL, 0, 1); break;
        case RL_MUT_CLEAR_RANGE: rc = clear_range(st, v, m->p1, m->len1, m->p2, m->len2); break;
        default: {
            bt_row *x = hfind(st, m->p1, m->len1);
            const st_ver *old = x ? visible(x, v) : NULL;
            int present, bp = 0;
            const uint8_t *ov = old ? old->data : NULL;
            uint32_t ol = old ? old->len : 0;
            if (!x && st->has_base && (rc = base_lookup(st, m->p1, m->len1, &bp, &ov, &ol)) != RL_OK) break;
            rc = rl__atomic_apply(m->type, old != NULL || bp, ov, ol, m->p2, m->len2, &st->scratch, &present);
            if (rc == RL_OK)
                rc = write_key(st, v, m->p1, m->len1, st->scratch.data, (uint32_t)st->scratch.len, !present);
            break;
        }
        }
    }
    /* A version is published whole or not at all: on a failure (out of memory midway) the
     * entries already written at v stay in their chains, newer than every readable version and
     * so invisible, and the caller poisons the engine; v is never published. */
    if (rc != RL_OK) return rc;
    st->latest = v;
    if (v > st->window && v - st->window > st->oldest) st->oldest = v - st->window;
    gc_steps(st, 16 + 2 * st->touched);
    return rc;
}

int rl__storage_map_load(rl__storage *st, rl__version v, const uint8_t *k, uint32_t kl, const uint8_t *val,
                         uint32_t vl) {
    const bt_leaf *l = st->last;
    if (l->n && row_cmp(l->rows[l->n - 1], k, kl) >= 0)
        return RL_CORRUPT(RL_E_CHECKPOINT_CORRUPT); /* keys must arrive strictly ascending */
    return row_insert(st, k, kl, v, val, vl);
}

int rl__storage_apply(rl__storage *st, rl__version v, const rl__mutation *muts, size_t n) {
    int rc;
    pthread_rwlock_wrlock(&st->lock);
    if (st->read_only) {
        rc = RL_E_READ_ONLY_DATABASE;
        goto out;
    }
    if (st->poisoned) {
        rc = st->poisoned;
        goto out;
    }
    if (v <= st->latest) {
        rc = RL_E_VERSION_INVALID;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        if (!rl__wal_type_ok(muts[i].type)) {
            rc = RL_E_INVALID_MUTATION_TYPE;
            goto out;
        }
    }
    if (st->eng && (rc = st->eng->log(st, v, muts, n)) != RL_OK) goto out;
    rc = rl__storage_map_apply(st, v, muts, n);
    if (rc != RL_OK) {
        /* The log may already hold this version: memory and log would disagree. */
        st->poisoned = rc;
        goto out;
    }
    if (st->eng) rc = st->eng->after_apply(st);
out:
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

/* ---- what the engines use (engine.h) ------------------------------------------------------ */

int rl__storage_map_each(rl__storage *st, rl_map_each_cb cb, void *ctx) {
    for (const bt_leaf *l = st->first; l; l = l->next)
        for (uint32_t i = 0; i < l->n; i++) {
            const bt_row *r = l->rows[i];
            const st_ver *e = r->chain; /* the state at latest is the head of each chain */
            if (e->is_clear) continue;
            int rc = cb(ctx, r->key, r->klen, e->data, e->len);
            if (rc != RL_OK) return rc;
        }
    return RL_OK;
}

int rl__storage_map_changed(rl__storage *st, rl__version since, rl_map_changed_cb cb, void *ctx) {
    for (const bt_leaf *l = st->first; l; l = l->next)
        for (uint32_t i = 0; i < l->n; i++) {
            const bt_row *r = l->rows[i];
            const st_ver *e = r->chain;
            if (e->v <= since) continue;
            int rc = cb(ctx, r->key, r->klen, e->is_clear ? NULL : e->data, e->len, e->is_clear);
            if (rc != RL_OK) return rc;
        }
    return RL_OK;
}

int rl__storage_map_pin(rl__storage *st) {
    for (bt_leaf *l = st->first; l; l = l->next)
        for (uint32_t i = 0; i < l->n; i++) {
            bt_row *r = l->rows[i];
            if (r->chain->v <= st->base_version) continue;
            st_ver *tail = r->chain;
            while (tail->older) tail = tail->older;
            if (tail->v <= st->oldest) continue; /* the chain answers every readable version */
            int bp;
            const uint8_t *bv;
            uint32_t bl;
            int rc = base_lookup(st, r->key, r->klen, &bp, &bv, &bl);
            if (rc != RL_OK) return rc;
            st_ver *e = ver_new(st->oldest, bv, bp ? bl : 0, !bp);
            if (!e) return RL_E_OUT_OF_MEMORY;
            tail->older = e;
            if (dirty_push(st, r) != RL_OK) return RL_E_OUT_OF_MEMORY;
        }
    return RL_OK;
}

void rl__storage_map_evict(rl__storage *st) {
    /* Collect first: removals rebalance the leaves being walked. Rows queued for GC are left to
     * it (invariant 6: the ring never holds a freed row); collapse evicts them (rule B3). Out of
     * memory for the list evicts what was listed (eviction only bounds memory; the next flush
     * tries again). */
    bt_row **list = NULL;
    size_t n = 0, cap = 0;
    for (bt_leaf *l = st->first; l; l = l->next)
        for (uint32_t i = 0; i < l->n; i++) {
            bt_row *r = l->rows[i];
            if (r->in_dirty || r->chain->older || r->chain->v > st->oldest || r->chain->v > st->base_version) continue;
            if (RL_GROW(list, cap, n + 1, 1024)) goto remove;
            list[n++] = r;
        }
remove:
    for (size_t j = 0; j < n; j++) row_remove(st, list[j]);
    rl__free(list);
}

/* ---- the byte sample (sample.h; docs/design.md §4, "Size estimates") ---------------------- */

int rl__storage_sample_base(rl__storage *st) {
    rl__base_cur *bc = NULL;
    const uint8_t *k, *val;
    uint32_t kl, vl;
    int rc = st->eng->cur_open(st, &bc);
    if (rc == RL_OK) rc = st->eng->cur_seek_ge(bc, (const uint8_t *)"", 0, 0);
    while (rc == RL_OK && st->eng->cur_get(bc, &k, &kl, &val, &vl)) {
        rc = rl__bsample_note(&st->sample, k, kl, 0, 0, 1, vl);
        if (rc == RL_OK) rc = st->eng->cur_next(bc);
    }
    st->eng->cur_close(bc);
    return rc;
}

int rl__storage_estimate_bytes(rl__storage *st, const void *begin, size_t begin_len, const void *end, size_t end_len,
                               int64_t *out) {
    pthread_rwlock_rdlock(&st->lock);
    *out = rl__bsample_sum(&st->sample, begin, (uint32_t)begin_len, end, (uint32_t)end_len);
    pthread_rwlock_unlock(&st->lock);
    return RL_OK;
}

int rl__storage_split_points(rl__storage *st, const void *begin, size_t begin_len, const void *end, size_t end_len,
                             int64_t chunk, rl_arena *a, rl_slice **out, int *out_n) {
    pthread_rwlock_rdlock(&st->lock);
    int rc = rl__bsample_split(&st->sample, begin, (uint32_t)begin_len, end, (uint32_t)end_len, chunk, a, out, out_n);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

void rl__storage_sample_stats(rl__storage *st, uint64_t *out_entries, int64_t *out_bytes) {
    pthread_rwlock_rdlock(&st->lock);
    *out_entries = st->sample.count;
    *out_bytes = st->sample.total;
    pthread_rwlock_unlock(&st->lock);
}

/* ---- open / close / status --------------------------------------------------------------- */

int rl__storage_map_init(rl__storage *st) {
    bt_leaf *l = rl__calloc(1, sizeof *l);
    if (!l) return RL_E_OUT_OF_MEMORY;
    st->root = st->first = st->last = l;
    st->depth = 0;
    rl__buf_init(&st->scratch);
    rl__buf_init(&st->base_buf);
    rl__bsample_init(&st->sample);
    return RL_OK;
}

void rl__storage_map_release(rl__storage *st) {
    if (!st->root) return;
    if (st->depth > 0) inner_free(st->root, st->depth);
    bt_leaf *l = st->first;
    while (l) {
        bt_leaf *next = l->next;
        for (uint32_t i = 0; i < l->n; i++) {
            chain_free(l->rows[i], l->rows[i]->chain);
            rl__free(l->rows[i]);
        }
        rl__free(l);
        l = next;
    }
    st->root = st->first = st->last = NULL;
    rl__free(st->htab);
    rl__free(st->dirty);
    rl__buf_release(&st->scratch);
    rl__buf_release(&st->base_buf);
    rl__bsample_release(&st->sample);
}

static int open_once(const rl__storage_options *opts, rl__storage **out, rl__errdetail *err);

/* How many times a read-only open of the memory engine starts over when a writer in another
 * process checkpointed while it read (memory.c, Readers). Each attempt reads one checkpoint and
 * one log; a writer checkpoints every 64 MiB of log by default. */
#define READER_ATTEMPTS 16

int rl__storage_open(const rl__storage_options *opts, rl__storage **out, rl__errdetail *err) {
    size_t mark = rl__errdetail_len(err);
    for (int attempt = 1;; attempt++) {
        rl__storage *st = NULL;
        int rc = open_once(opts, &st, err); /* st is set on success, and on a raced failure */
        int raced = st && st->f.raced;
        if (raced && attempt < READER_ATTEMPTS) { /* a writer checkpointed meanwhile: read again */
            rl__storage_close(st);
            rl__errdetail_truncate(err, mark);
            continue;
        }
        if (raced)
            rl__log(RL_LOG_INFO, "storage: a writer checkpointed during each of %d read-only opens of %s", attempt,
                    opts->dir);
        if (rc != RL_OK) {
            rl__storage_close(st);
            return rc;
        }
        *out = st; /* raced at the last attempt: a consistent state, slightly older than the newest */
        return RL_OK;
    }
}

static int open_once(const rl__storage_options *opts, rl__storage **out, rl__errdetail *err) {
    rl__storage_options def;
    int rc;
    if (!opts) {
        memset(&def, 0, sizeof def);
        opts = &def;
    }
    if (!out || (opts->engine != RL_ENGINE_MEMORY && opts->engine != RL_ENGINE_SSD && opts->engine != RL_ENGINE_AUTO))
        return RL_E_INVALID_ARGUMENT;
    const rl__engine_ops *eng = NULL;
    if (opts->dir && (rc = rl__logdir_pick_engine(opts, &eng, err)) != RL_OK) return rc;
    if (!opts->dir && opts->engine == RL_ENGINE_SSD) {
        rl__errdetail_append(err, "the ssd engine needs a directory");
        return RL_E_INVALID_ARGUMENT;
    }
    rl__storage *st = rl__calloc(1, sizeof *st);
    if (!st) return RL_E_OUT_OF_MEMORY;
    st->f.lock_fd = st->f.log_fd = -1;
    rl__buf_init(&st->f.pending);
    st->window = opts->window_versions ? opts->window_versions : DEFAULT_WINDOW;
    st->read_only = opts->read_only != 0;
    /* Writers first: glibc's default prefers readers, and a stream of reads would starve apply. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int lrc = pthread_rwlock_init(&st->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (lrc != 0) {
        rl__free(st);
        return RL_E_OUT_OF_MEMORY;
    }
    if (pthread_mutex_init(&st->sync_mu, NULL) != 0) {
        pthread_rwlock_destroy(&st->lock);
        rl__free(st);
        return RL_E_OUT_OF_MEMORY;
    }
    if ((rc = rl__storage_map_init(st)) != RL_OK) goto fail;
    st->eng = eng;
    if (eng && (rc = eng->open(st, opts, err)) != RL_OK) goto fail;
    *out = st;
    return RL_OK;
fail:
    if (st->f.raced) { /* a reader that lost a race with a checkpoint: the caller tries again */
        *out = st;
        return rc;
    }
    rl__storage_close(st);
    return rc;
}

void rl__storage_close(rl__storage *st) {
    if (!st) return;
    if (st->eng) st->eng->close(st);
    rl__storage_map_release(st);
    rl__buf_release(&st->f.pending);
    rl__free(st->f.dir);
    pthread_rwlock_destroy(&st->lock);
    pthread_mutex_destroy(&st->sync_mu);
    rl__free(st);
}

/* Make everything applied durable without stalling readers for the fsync: under the write lock
 * only the buffered log bytes are written (flush) and a duplicate of the log descriptor taken;
 * the fsync runs with no engine lock held (readers and even apply proceed; versions applied
 * meanwhile are not covered and stay non-durable); the durable version is published under the
 * lock again. sync_mu keeps syncs one at a time, so a failed fsync has poisoned the engine before
 * another sync can publish anything (after an fsync error the kernel may report the next fsync
 * as successful although the earlier data was lost). */
int rl__storage_sync(rl__storage *st) {
    rl__version target = 0;
    uint64_t seq = 0;
    int fd = -1, rc;
    pthread_mutex_lock(&st->sync_mu);
    pthread_rwlock_wrlock(&st->lock);
    if (!st->eng || st->read_only) {
        /* Read-only: nothing was applied, so everything recovered is already durable. */
        if (!st->eng) st->durable = st->latest;
        pthread_rwlock_unlock(&st->lock);
        pthread_mutex_unlock(&st->sync_mu);
        return RL_OK;
    }
    rc = st->eng->sync_begin(st, &target, &fd, &seq);
    pthread_rwlock_unlock(&st->lock);
    if (rc == RL_OK && fd >= 0) {
        int sync_rc = st->eng->sync_fd(st, fd, seq);
        pthread_rwlock_wrlock(&st->lock);
        rc = st->eng->sync_end(st, target, fd, sync_rc);
        pthread_rwlock_unlock(&st->lock);
    }
    pthread_mutex_unlock(&st->sync_mu);
    return rc;
}

int rl__storage_checkpoint(rl__storage *st) {
    pthread_rwlock_wrlock(&st->lock);
    int rc = st->read_only ? RL_E_READ_ONLY_DATABASE : st->eng ? st->eng->checkpoint(st) : RL_OK;
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

void rl__storage_get_status(rl__storage *st, rl__storage_status *out) {
    pthread_rwlock_rdlock(&st->lock);
    memset(out, 0, sizeof *out);
    out->latest_version = st->latest;
    out->engine = st->eng ? st->eng->name : "memory";
    out->durable_version = st->eng ? st->durable : st->latest;
    out->oldest_version = st->oldest;
    out->keys = st->live_keys;
    out->bytes = st->live_bytes;
    out->read_only = st->read_only;
    out->window_rows = st->hcount;
    if (st->eng) st->eng->status(st, out);
    pthread_rwlock_unlock(&st->lock);
}

rl__version rl__storage_latest_version(rl__storage *st) {
    pthread_rwlock_rdlock(&st->lock);
    rl__version v = st->latest;
    pthread_rwlock_unlock(&st->lock);
    return v;
}

rl__version rl__storage_oldest_version(rl__storage *st) {
    pthread_rwlock_rdlock(&st->lock);
    rl__version v = st->oldest;
    pthread_rwlock_unlock(&st->lock);
    return v;
}

/* ---- reads ------------------------------------------------------------------------------- */
/* ---- reads ------------------------------------------------------------------------------- */

void rl__storage_set_read_ceiling(rl__storage *st, rl_read_ceiling_fn fn, void *ud) {
    st->ceiling = fn;
    st->ceiling_ud = ud;
}

/* Check the read version *v (read lock held) and clamp it to latest when the read ceiling covers
 * it (invariant 4). The ceiling is asked only for versions above latest, so a read at a version
 * the engine holds costs two compares, as before. */
static int check_version(const rl__storage *st, rl__version *v) {
    if (*v < st->oldest) return RL_E_TRANSACTION_TOO_OLD;
    if (*v > st->latest) {
        if (!st->ceiling || *v > st->ceiling(st->ceiling_ud)) return RL_E_FUTURE_VERSION;
        *v = st->latest;
    }
    return RL_OK;
}

void rl__storage_read_lock(rl__storage *st) { pthread_rwlock_rdlock(&st->lock); }

void rl__storage_read_unlock(rl__storage *st) { pthread_rwlock_unlock(&st->lock); }

int rl__storage_get(rl__storage *st, rl__version v, const void *key, size_t key_len, rl_arena *a, int *out_present,
                    const uint8_t **out_value, uint32_t *out_len) {
    pthread_rwlock_rdlock(&st->lock);
    int rc = rl__storage_get_nolock(st, v, key, key_len, a, out_present, out_value, out_len);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

int rl__storage_get_nolock(rl__storage *st, rl__version v, const void *key, size_t key_len, rl_arena *a,
                           int *out_present, const uint8_t **out_value, uint32_t *out_len) {
    int rc;
    *out_present = 0;
    *out_value = NULL;
    *out_len = 0;
    if ((rc = check_version(st, &v)) != RL_OK) goto out;
    bt_row *n = hfind(st, key, key_len);
    if (st->has_base && (!n || !entry_at(n, v))) {
        /* Rule B1: no entry at or below v in the window: the base answers. */
        rc = st->eng->base_get(st, key, (uint32_t)key_len, a, NULL, out_present, out_value, out_len);
        goto out;
    }
    if (n) {
        const st_ver *e = visible(n, v);
        if (e) {
            uint8_t *p = rl__arena_memdup(a, e->data, e->len);
            if (!p) {
                rc = RL_E_OUT_OF_MEMORY;
                goto out;
            }
            *out_present = 1;
            *out_value = p;
            *out_len = e->len;
        }
    }
out:
    return rc;
}

/* 1 when (p1, v1) and (p2, v2) are different values (absent counts as a value). */
static int value_differs(int p1, const uint8_t *v1, uint32_t l1, int p2, const uint8_t *v2, uint32_t l2) {
    if (p1 != p2) return 1;
    return p1 && (l1 != l2 || (l1 && memcmp(v1, v2, l1)));
}

int rl__storage_watch_changed(rl__storage *st, rl__version after, const void *key, size_t key_len, int present,
                              const uint8_t *value, uint32_t value_len, int *out_changed, rl__version *out_through) {
    rl_arena a;
    rl__arena_init(&a, 256);
    pthread_rwlock_rdlock(&st->lock);
    rl__version latest = st->latest;
    int now_present = 0, changed = 0;
    const uint8_t *now = NULL;
    uint32_t now_len = 0;
    int rc = rl__storage_get_nolock(st, latest, key, key_len, &a, &now_present, &now, &now_len);
    if (rc == RL_OK) changed = value_differs(now_present, now, now_len, present, value, value_len);
    if (rc == RL_OK && !changed) {
        /* The history above `after`: a change away and back shows as an entry in between. */
        bt_row *n = hfind(st, key, key_len);
        for (const st_ver *e = n ? n->chain : NULL; e && e->v > after && !changed; e = e->older)
            changed = value_differs(!e->is_clear, e->data, e->len, present, value, value_len);
    }
    pthread_rwlock_unlock(&st->lock);
    rl__arena_release(&a);
    *out_changed = changed;
    if (out_through) *out_through = latest;
    return rc;
}

static const uint8_t MAX_KEY[2] = {0xff, 0xff};

/* ---- reads over the window and the base (has_base: the ssd engine) ------------------------
 *
 * A merged cursor walks the map's rows and the base's rows together in one direction. At each
 * key the window decides when the row has an entry at or below v (a value, or a tombstone that
 * hides the base), else the base's value stands (rule B1). Moves are deferred to the next call,
 * so the pointers returned stay valid until then (the base cursor's until it moves). */
typedef struct {
    rl__storage *st;
    rl__version v;
    int reverse;
    cursor t;         /* the map's position */
    rl__base_cur *b;  /* the base's position */
    int adv_t, adv_b; /* moves owed from the last row returned */
} mcur;

static int m_open(mcur *m, rl__storage *st, rl__version v, int reverse) {
    memset(m, 0, sizeof *m);
    m->st = st;
    m->v = v;
    m->reverse = reverse;
    return st->eng->cur_open(st, &m->b);
}

static void m_close(mcur *m) {
    if (m->b) m->st->eng->cur_close(m->b);
    m->b = NULL;
}

/* Forward from the first key >= k (> k with strict). */
static int m_seek(mcur *m, const uint8_t *k, size_t kl, int strict) {
    m->t = seek(m->st, k, kl, strict);
    m->adv_t = m->adv_b = 0;
    return m->st->eng->cur_seek_ge(m->b, k, (uint32_t)kl, strict);
}

/* Backward from the last key < k (<= k with or_equal). */
static int m_seek_before(mcur *m, const uint8_t *k, size_t kl, int or_equal) {
    m->t = cur_before(m->st, seek(m->st, k, kl, or_equal));
    m->adv_t = m->adv_b = 0;
    return m->st->eng->cur_seek_lt(m->b, k, (uint32_t)kl, or_equal);
}

/* The next row visible at v: 1 with its key and value (valid until the next call), 0 at the
 * end, or an error code (negative is never used: errors are > 1, RL_E_*). *out_rc is set. */
static int m_next(mcur *m, const uint8_t **k, uint32_t *kl, const uint8_t **val, uint32_t *vl, int *out_rc) {
    const rl__engine_ops *eo = m->st->eng;
    *out_rc = RL_OK;
    for (;;) {
        if (m->adv_t && m->t.l) {
            if (m->reverse) cur_prev(&m->t);
            else cur_next(&m->t);
        }
        if (m->adv_b) {
            int rc = m->reverse ? eo->cur_prev(m->b) : eo->cur_next(m->b);
            if (rc != RL_OK) {
                *out_rc = rc;
                return 0;
            }
        }
        m->adv_t = m->adv_b = 0;
        const bt_row *r = m->t.l ? cur_row(m->t) : NULL;
        const uint8_t *bk, *bv;
        uint32_t bkl, bvl;
        int hb = eo->cur_get(m->b, &bk, &bkl, &bv, &bvl);
        if (!r && !hb) return 0;
        /* c < 0: the map's row comes first in the walk's direction; > 0: the base's. */
        int c;
        if (!r) c = 1;
        else if (!hb) c = -1;
        else {
            c = rl__bytes_cmp(r->key, r->klen, bk, bkl);
            if (m->reverse) c = -c;
        }
        if (c > 0) { /* a base row the window does not touch */
            m->adv_b = 1;
            *k = bk, *kl = bkl, *val = bv, *vl = bvl;
            return 1;
        }
        m->adv_t = 1;
        m->adv_b = c == 0;
        const st_ver *e = entry_at(r, m->v);
        if (e) {
            if (e->is_clear) continue;
            *k = r->key, *kl = r->klen, *val = e->data, *vl = e->len;
            return 1;
        }
        if (c == 0) {
            *k = bk, *kl = bkl, *val = bv, *vl = bvl;
            return 1;
        }
        /* A row created after v with nothing below it in the base: absent at v. */
    }
}

/* rl__storage_get_range_nolock over the window and the base. */
/* Values at least this large are laid end to end in a range read's result (range_merged). */
#define BIG_VALUE 4096

static int range_merged(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                        size_t end_len, int limit, long target_bytes, int reverse, rl_arena *a, rl_keyvalue **out_kvs,
                        int *out_n, int *out_more) {
    mcur m;
    if (st->eng->base_range) { /* the engine reads a range the map has no row in itself */
        cursor t = reverse ? cur_before(st, seek(st, end, end_len, 0)) : seek(st, begin, begin_len, 0);
        if (!t.l || (reverse ? row_cmp(cur_row(t), begin, begin_len) < 0 : row_cmp(cur_row(t), end, end_len) >= 0))
            return st->eng->base_range(st, begin, (uint32_t)begin_len, end, (uint32_t)end_len, limit, target_bytes,
                                       reverse, a, out_kvs, out_n, out_more);
    }
    int rc = m_open(&m, st, v, reverse), n = 0, cap = 0, more = 0, got;
    long bytes = 0;
    rl_keyvalue *kvs = NULL;
    const uint8_t *k, *val;
    uint32_t kl, vl;
    uint8_t *chunk = NULL; /* rows are copied into arena chunks, 512 B doubling up to 16 KiB */
    size_t room = 0, chunk_size = 512;
    if (rc == RL_OK) rc = reverse ? m_seek_before(&m, end, end_len, 0) : m_seek(&m, begin, begin_len, 0);
    /* No row of the map in the range (the usual case for data older than the window): walk the
     * base alone. */
    int base_only =
        !m.t.l || (reverse ? row_cmp(cur_row(m.t), begin, begin_len) < 0 : row_cmp(cur_row(m.t), end, end_len) >= 0);
    const rl__engine_ops *eo = st->eng;
    /* Room for the rows up front: the limit when it is at most 1,024, else 64, growing 4x (a
     * mapped read's secondaries, limited to 2,000 rows, are usually one row each). */
    if (rc == RL_OK) {
        cap = limit > 0 && limit <= 1024 ? limit : 64;
        if (!(kvs = rl__arena_alloc(a, (size_t)cap * sizeof *kvs))) rc = RL_E_OUT_OF_MEMORY;
    }
    while (rc == RL_OK && (base_only ? (got = eo->cur_get(m.b, &k, &kl, &val, &vl)) == 1
                                     : (got = m_next(&m, &k, &kl, &val, &vl, &rc)) == 1)) {
        if (reverse ? rl__bytes_cmp(k, kl, begin, begin_len) < 0 : rl__bytes_cmp(k, kl, end, end_len) >= 0) break;
        if ((limit && n >= limit) || (target_bytes && bytes >= target_bytes)) {
            more = 1;
            break;
        }
        if (n == cap) {
            int ncap = cap ? cap * 4 : 64;
            rl_keyvalue *nk = rl__arena_alloc(a, (size_t)ncap * sizeof *nk);
            if (!nk) {
                rc = RL_E_OUT_OF_MEMORY;
                break;
            }
            if (n) memcpy(nk, kvs, (size_t)n * sizeof *nk);
            kvs = nk;
            cap = ncap;
        }
        /* A large value (a split record's chunk) goes on its own, packed right after the last
         * one (rl__arena_alloc_packed), its key into the chunk: a record's chunks are then one
         * run of bytes, which the record decoder takes in place instead of joining them. */
        int apart = vl >= BIG_VALUE;
        size_t need = (size_t)kl + (apart ? 0 : vl);
        if (need > room) {
            room = need > chunk_size ? need : chunk_size;
            if (chunk_size < 16384) chunk_size *= 2;
            if (!(chunk = rl__arena_alloc(a, room))) {
                rc = RL_E_OUT_OF_MEMORY;
                break;
            }
        }
        uint8_t *p = chunk, *pv = p + kl;
        chunk += need;
        room -= need;
        if (apart && !(pv = rl__arena_alloc_packed(a, vl))) {
            rc = RL_E_OUT_OF_MEMORY;
            break;
        }
        if (kl) memcpy(p, k, kl);
        if (vl) memcpy(pv, val, vl);
        kvs[n].key = p;
        kvs[n].key_len = kl;
        kvs[n].value = pv;
        kvs[n].value_len = vl;
        n++;
        bytes += (long)kl + (long)vl;
        if (base_only) rc = reverse ? eo->cur_prev(m.b) : eo->cur_next(m.b);
    }
    m_close(&m);
    if (rc != RL_OK) return rc;
    *out_kvs = kvs;
    *out_n = n;
    *out_more = more;
    return RL_OK;
}

/* The walk of a selector over the window and the base (has_base), bounded by [lo, hi) when lo
 * / hi are not NULL: forward from the first key >= the anchor (> with or_equal) counting offset
 * visible keys, backward from the last key < the anchor (<= with or_equal) counting 1 - offset.
 * *found = 1 with the key copied into a, or 0 with *steps_left what remained at the bound. */
static int select_merged(rl__storage *st, rl__version v, const rl_key_selector *sel, const uint8_t *lo, uint32_t lo_len,
                         const uint8_t *hi, uint32_t hi_len, rl_arena *a, int *found, const uint8_t **out_key,
                         uint32_t *out_len, long *steps_left) {
    mcur m;
    const uint8_t *sk = sel->key ? sel->key : (const uint8_t *)"";
    int fwd = sel->offset >= 1, rc = m_open(&m, st, v, !fwd), got;
    long steps = fwd ? sel->offset : -(long)sel->offset + 1;
    const uint8_t *k, *val;
    uint32_t kl, vl;
    *found = 0;
    if (rc == RL_OK)
        rc = fwd ? m_seek(&m, sk, sel->key_len, sel->or_equal) : m_seek_before(&m, sk, sel->key_len, sel->or_equal);
    while (rc == RL_OK && (got = m_next(&m, &k, &kl, &val, &vl, &rc)) == 1) {
        if (fwd && hi && rl__bytes_cmp(k, kl, hi, hi_len) >= 0) break;
        if (!fwd && lo && rl__bytes_cmp(k, kl, lo, lo_len) < 0) break;
        if (--steps == 0) {
            uint8_t *p = rl__arena_memdup(a, k, kl);
            if (!p && kl) {
                rc = RL_E_OUT_OF_MEMORY;
                break;
            }
            *found = 1;
            *out_key = p ? p : (const uint8_t *)"";
            *out_len = kl;
            break;
        }
    }
    m_close(&m);
    *steps_left = steps;
    return rc;
}

int rl__storage_get_key(rl__storage *st, rl__version v, const rl_key_selector *sel, rl_arena *a,
                        const uint8_t **out_key, uint32_t *out_len) {
    int rc;
    const uint8_t *k = NULL;
    uint32_t kl = 0;
    *out_key = NULL;
    *out_len = 0;
    pthread_rwlock_rdlock(&st->lock);
    if ((rc = check_version(st, &v)) != RL_OK) goto out;
    if (st->has_base) {
        int found;
        long left;
        rc = select_merged(st, v, sel, NULL, 0, NULL, 0, a, &found, &k, &kl, &left);
        if (rc != RL_OK) goto out;
        if (!found) {
            k = sel->offset >= 1 ? MAX_KEY : NULL;
            kl = sel->offset >= 1 ? 2 : 0;
        }
        goto clamp;
    }
    /* The base: the first key >= key (> key with or_equal); offset 1 is the first visible key
     * from there on, offset 0 the last visible one before it, and so on. */
    cursor c = seek(st, sel->key, (size_t)sel->key_len, sel->or_equal);
    if (sel->offset >= 1) {
        long steps = sel->offset;
        for (; c.l; cur_next(&c))
            if (visible(cur_row(c), v) && --steps == 0) break;
        if (c.l) {
            k = cur_row(c)->key;
            kl = cur_row(c)->klen;
        } else {
            k = MAX_KEY;
            kl = 2;
        }
    } else {
        long steps = -(long)sel->offset + 1;
        for (c = cur_before(st, c); c.l; cur_prev(&c))
            if (visible(cur_row(c), v) && --steps == 0) break;
        if (c.l) {
            k = cur_row(c)->key;
            kl = cur_row(c)->klen;
        } /* else "" */
    }
clamp:
    if (rl__bytes_cmp(k, kl, MAX_KEY, 2) > 0) {
        k = MAX_KEY;
        kl = 2;
    }
    uint8_t *p = rl__arena_memdup(a, k, kl);
    if (!p) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    *out_key = p;
    *out_len = kl;
out:
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

/* See storage.h. The walk is rl__storage_get_key's, bounded by [lo, hi): forward it counts
 * visible rows from the first key >= the anchor up to hi, backward from the last key < the anchor
 * down to lo; what is left of the offset when a bound is reached becomes the selector to continue
 * with (or, at the keyspace's own ends, the clamped result). No row values are copied. */
int rl__storage_select(rl__storage *st, rl__version v, const rl_key_selector *sel, const uint8_t *lo, uint32_t lo_len,
                       int lo_is_min, const uint8_t *hi, uint32_t hi_len, int hi_is_max, rl_arena *a,
                       rl__select_result *out) {
    int rc;
    const uint8_t *k = NULL;
    uint32_t kl = 0;
    const uint8_t *sk = sel->key ? sel->key : (const uint8_t *)"";
    memset(out, 0, sizeof *out);
    /* The anchor (key, or key + "\x00" with or_equal: the first key >= it is the selector's
     * offset 1) must lie in [lo, hi]. */
    const uint8_t *an = sk;
    uint32_t anl = sel->key_len;
    if (sel->or_equal) {
        uint8_t *x = rl__arena_alloc(a, (size_t)anl + 1);
        if (!x) return RL_E_OUT_OF_MEMORY;
        if (anl) memcpy(x, sk, anl);
        x[anl++] = 0;
        an = x;
    }
    if (rl__bytes_cmp(an, anl, lo, lo_len) < 0 || rl__bytes_cmp(an, anl, hi, hi_len) > 0)
        return RL_E_WRONG_SHARD_SERVER;
    pthread_rwlock_rdlock(&st->lock);
    if ((rc = check_version(st, &v)) != RL_OK) goto out;
    if (st->has_base) {
        int found;
        long left;
        rc = select_merged(st, v, sel, lo, lo_len, hi, hi_len, a, &found, &k, &kl, &left);
        if (rc != RL_OK) goto out;
        if (found) {
            out->resolved = 1;
        } else if (sel->offset >= 1) {
            k = hi, kl = hi_len;
            out->resolved = hi_is_max;
            out->offset = (int)left;
        } else {
            k = lo, kl = lo_len;
            out->resolved = lo_is_min;
            out->offset = (int)(1 - left);
        }
        goto resolved;
    }
    cursor c = seek(st, sk, (size_t)sel->key_len, sel->or_equal);
    if (sel->offset >= 1) {
        long steps = sel->offset;
        for (; c.l; cur_next(&c)) {
            const bt_row *r = cur_row(c);
            if (rl__bytes_cmp(r->key, r->klen, hi, hi_len) >= 0) break;
            if (visible(r, v) && --steps == 0) break;
        }
        if (steps == 0) {
            k = cur_row(c)->key, kl = cur_row(c)->klen;
            out->resolved = 1;
        } else {
            k = hi, kl = hi_len;
            out->resolved = hi_is_max;
            out->offset = (int)steps;
        }
    } else {
        long steps = -(long)sel->offset + 1;
        for (c = cur_before(st, c); c.l; cur_prev(&c)) {
            const bt_row *r = cur_row(c);
            if (rl__bytes_cmp(r->key, r->klen, lo, lo_len) < 0) break;
            if (visible(r, v) && --steps == 0) break;
        }
        if (steps == 0) {
            k = cur_row(c)->key, kl = cur_row(c)->klen;
            out->resolved = 1;
        } else {
            k = lo, kl = lo_len;
            out->resolved = lo_is_min;
            out->offset = (int)(1 - steps);
        }
    }
resolved:
    if (out->resolved) out->offset = 1;
    uint8_t *p = rl__arena_memdup(a, k, kl);
    if (!p) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    out->key = p;
    out->key_len = kl;
out:
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

enum { RANGE_WINDOW = 256, RANGE_WINDOW_MAX = 65536, PREFETCH_AHEAD = 16 };

/* Start a prefetch of row r's first three lines (header, key, inline version and a 100-byte
 * value): rows are scattered, but their addresses are known ahead from the leaf, so the misses
 * of several rows overlap instead of forming a chain. */
static inline void prefetch_row(const bt_row *r) {
    const char *p = (const char *)r;
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128);
}

/* The bound of a scan of [begin, end) in leaf l: forward, the index of the first row >= end
 * (l->n if the whole leaf is below end); reverse, the index of the first row >= begin (0 if the
 * whole leaf is in range). One comparison with the leaf's last (first) key decides most
 * leaves; only the leaf where the range ends is searched. */
static uint32_t leaf_bound(const bt_leaf *l, const void *k, size_t kl, int reverse) {
    const bt_row *edge = reverse ? l->rows[0] : l->rows[l->n - 1];
    int c = rl__bytes_cmp(edge->key, edge->klen, k, kl);
    if (reverse ? c >= 0 : c < 0) return reverse ? 0 : l->n;
    return leaf_search(l, k, kl, 0);
}

/* Forward: the index of the first row of l >= k at or after row `from` (every row before it is
 * below k), l->n if the whole leaf is below k — leaf_bound's answer. When the range ends in this
 * leaf the search gallops from `from` (rows from, from + 1, from + 3, ... then a binary search
 * of the last step), so a range of a row or two (a mapped read's secondary) costs about three
 * comparisons of cached prefixes instead of a search of the whole leaf. */
static uint32_t leaf_bound_from(const bt_leaf *l, uint32_t from, const uint8_t *k, size_t kl) {
    const bt_row *edge = l->rows[l->n - 1];
    if (rl__bytes_cmp(edge->key, edge->klen, k, kl) < 0) return l->n;
    uint32_t off = l->off;
    int side = prefix_side(l->pfx, off, k, kl);
    if (side) return side < 0 ? 0 : l->n; /* as leaf_search (side > 0 cannot happen here) */
    const uint8_t *ks = off ? k + off : k;
    size_t ksl = kl - off;
    uint64_t kp = key_prefix(ks, ksl);
    uint32_t lo = from, hi = l->n - 1, step = 1; /* rows[hi] >= k (the edge) */
#define ROW_BELOW(i) (pcmp(l->kpre[i], l->rows[i]->key + off, l->rows[i]->klen - off, kp, ks, ksl) < 0)
    while (lo < hi) {
        uint32_t probe = lo + step - 1;
        if (probe >= hi) break;
        if (!ROW_BELOW(probe)) {
            hi = probe;
            break;
        }
        lo = probe + 1;
        step *= 2;
    }
    while (lo < hi) { /* the answer is in [lo, hi] */
        uint32_t mid = lo + (hi - lo) / 2;
        if (ROW_BELOW(mid)) lo = mid + 1;
        else hi = mid;
    }
#undef ROW_BELOW
    return lo;
}

#define SHORT_RANGE 4 /* rows a forward range read takes in its one-pass form (below) */

/* A key k placed against one leaf's shared prefix (invariant 12), so that rows of that leaf compare
 * with it through their cached prefixes (an integer compare; key bytes only on a tie) instead of
 * a memcmp of whole keys. */
typedef struct {
    const bt_leaf *l; /* the leaf it is placed against (NULL: none yet) */
    int side;         /* prefix_side: -1 k below every row, 1 above every row, 0 compare kp */
    uint64_t kp;      /* key_prefix of k after the leaf's prefix (side 0) */
} leaf_key;

/* rows[i] of leaf l against k: < 0, 0, > 0 as row_cmp(l->rows[i], k, kl). */
static inline int leaf_row_cmp(const bt_leaf *l, uint32_t i, const uint8_t *k, size_t kl, leaf_key *lk) {
    uint32_t off = l->off;
    if (lk->l != l) {
        lk->l = l;
        lk->side = prefix_side(l->pfx, off, k, kl);
        if (!lk->side) lk->kp = key_prefix(off ? k + off : k, kl - off);
    }
    if (lk->side) return -lk->side; /* k below every row: the row is above it */
    const bt_row *r = l->rows[i];
    return pcmp(l->kpre[i], r->key + off, r->klen - off, lk->kp, off ? k + off : k, kl - off);
}

/* Range reads copy rows window by window: pass 1 walks up to a window of rows counting them and
 * their bytes (prefetching rows PREFETCH_AHEAD positions ahead), then the result array grows
 * once (to at least the rows so far) and one arena allocation takes all the window's keys and
 * then its values, end to end, which pass 2 copies while the rows are still in cache. Windows double in size. The
 * end of the range is found once per leaf (leaf_bound), not per row. */
int rl__storage_get_range(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                          size_t end_len, int limit, long target_bytes, int reverse, rl_arena *a, rl_keyvalue **out_kvs,
                          int *out_n, int *out_more) {
    pthread_rwlock_rdlock(&st->lock);
    int rc = rl__storage_get_range_nolock(st, v, begin, begin_len, end, end_len, limit, target_bytes, reverse, a,
                                          out_kvs, out_n, out_more);
    pthread_rwlock_unlock(&st->lock);
    return rc;
}

int rl__storage_get_range_nolock(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                                 size_t end_len, int limit, long target_bytes, int reverse, rl_arena *a,
                                 rl_keyvalue **out_kvs, int *out_n, int *out_more) {
    int rc, n = 0, cap = 0, more = 0, done = 0, window = RANGE_WINDOW;
    long bytes = 0;
    rl_keyvalue *kvs = NULL;
    const bt_leaf *bl = NULL; /* the leaf whose bound is in bound */
    uint32_t bound = 0;
    *out_kvs = NULL;
    *out_n = 0;
    *out_more = 0;
    if (limit < 0 || target_bytes < 0) return RL_E_RANGE_LIMITS_INVALID;
    if ((rc = check_version(st, &v)) != RL_OK) goto out;
    if (rl__bytes_cmp(begin, begin_len, end, end_len) >= 0) goto out;
    if (st->has_base)
        return range_merged(st, v, begin, begin_len, end, end_len, limit, target_bytes, reverse, a, out_kvs, out_n,
                            out_more);
    const void *bk = reverse ? begin : end;
    size_t bkl = reverse ? begin_len : end_len;
    cursor c = reverse ? cur_before(st, seek(st, end, end_len, 0)) : seek(st, begin, begin_len, 0);
    if (!reverse) {
        /* A short forward range (a mapped read's secondary: usually one row) in one pass: each
         * row is compared with end directly, and the rows and bytes take one allocation. More
         * than SHORT_RANGE rows in range (or 2 x SHORT_RANGE rows walked, some invisible at v):
         * the window loop below reads the range from c. */
        const bt_row *sr[SHORT_RANGE];
        const st_ver *se[SHORT_RANGE];
        int sn = 0, smore = 0, fits = 0, walked = 0;
        long sbytes = 0, skeys = 0;
        leaf_key ek = {NULL, 0, 0};
        for (cursor y = c;; cur_next(&y)) {
            if (!y.l || leaf_row_cmp(y.l, y.i, end, end_len, &ek) >= 0) {
                fits = 1;
                break;
            }
            if (++walked > 2 * SHORT_RANGE) break; /* rows invisible at v: the loop below */
            const bt_row *r = cur_row(y);
            const st_ver *e = visible(r, v);
            if (!e) continue;
            if ((limit && sn >= limit) || (target_bytes && sbytes >= target_bytes)) {
                smore = fits = 1; /* as the window loop: more only when a row is left out */
                break;
            }
            if (sn == SHORT_RANGE) break;
            sr[sn] = r;
            se[sn] = e;
            sn++;
            sbytes += (long)r->klen + (long)e->len;
            skeys += (long)r->klen;
        }
        if (fits) {
            if (sn) {
                rl_keyvalue *kv = rl__arena_alloc(a, (size_t)sn * sizeof *kv + (size_t)sbytes);
                if (!kv) {
                    rc = RL_E_OUT_OF_MEMORY;
                    goto out;
                }
                /* The keys, then the values end to end (a split record's chunks are one run of
                 * bytes: rl__decoder_decode_in_place parses them where they are). */
                uint8_t *p = (uint8_t *)(kv + sn), *pv = p + skeys;
                for (int i = 0; i < sn; i++) {
                    memcpy(p, sr[i]->key, sr[i]->klen);
                    kv[i].key = p;
                    kv[i].key_len = sr[i]->klen;
                    p += sr[i]->klen;
                    if (se[i]->len) memcpy(pv, se[i]->data, se[i]->len);
                    kv[i].value = pv;
                    kv[i].value_len = se[i]->len;
                    pv += se[i]->len;
                }
                *out_kvs = kv;
            }
            *out_n = sn;
            *out_more = smore;
            goto out;
        }
    }
    while (c.l && !done) {
        /* Pass 1: count the window's rows and bytes. */
        cursor w0 = c;
        int wn = 0;
        size_t wbytes = 0, wkeys = 0;
        while (wn < window) {
            if (c.l != bl) {
                bl = c.l;
                bound = reverse ? leaf_bound(bl, bk, bkl, 1) : leaf_bound_from(bl, c.i, bk, bkl);
            }
            if (!reverse ? c.i >= bound : c.i < bound) {
                done = 1;
                break;
            }
            if (!reverse) {
                if (c.i + PREFETCH_AHEAD < c.l->n) prefetch_row(c.l->rows[c.i + PREFETCH_AHEAD]);
                else if (c.l->next && c.i + PREFETCH_AHEAD - c.l->n < c.l->next->n)
                    prefetch_row(c.l->next->rows[c.i + PREFETCH_AHEAD - c.l->n]);
            } else {
                if (c.i >= PREFETCH_AHEAD) prefetch_row(c.l->rows[c.i - PREFETCH_AHEAD]);
                else if (c.l->prev && c.l->prev->n + c.i >= PREFETCH_AHEAD)
                    prefetch_row(c.l->prev->rows[c.l->prev->n + c.i - PREFETCH_AHEAD]);
            }
            const bt_row *r = cur_row(c);
            const st_ver *e = visible(r, v);
            if (e) {
                if ((limit && n + wn >= limit) || (target_bytes && bytes >= target_bytes)) {
                    more = 1;
                    done = 1;
                    break;
                }
                wn++;
                wbytes += (size_t)r->klen + e->len;
                wkeys += r->klen;
                bytes += (long)r->klen + (long)e->len;
            }
            if (!reverse) cur_next(&c);
            else cur_prev(&c);
            if (!c.l) {
                done = 1;
                break;
            }
        }
        if (wn == 0) continue;
        /* Room for the rows, then pass 2: copy them. */
        uint8_t *p = NULL;
        if (n + wn > cap) {
            int ncap = cap * 2 > n + wn ? cap * 2 : n + wn;
            /* The first window's rows and bytes in one allocation (a short range's only one). */
            size_t extra = cap == 0 ? wbytes : 0;
            rl_keyvalue *nk = rl__arena_alloc(a, (size_t)ncap * sizeof *nk + extra);
            if (!nk) {
                rc = RL_E_OUT_OF_MEMORY;
                goto out;
            }
            if (n) memcpy(nk, kvs, (size_t)n * sizeof *nk);
            if (extra) p = (uint8_t *)(nk + ncap);
            kvs = nk;
            cap = ncap;
        }
        if (!p && !(p = rl__arena_alloc(a, wbytes))) {
            rc = RL_E_OUT_OF_MEMORY;
            goto out;
        }
        uint8_t *pv = p + wkeys; /* the window's keys, then its values end to end (as above) */
        for (cursor y = w0; wn > 0;) {
            const bt_row *r = cur_row(y);
            const st_ver *e = visible(r, v);
            if (!reverse) cur_next(&y);
            else cur_prev(&y);
            if (!e) continue;
            memcpy(p, r->key, r->klen);
            kvs[n].key = p;
            kvs[n].key_len = r->klen;
            p += r->klen;
            if (e->len) memcpy(pv, e->data, e->len);
            kvs[n].value = pv;
            kvs[n].value_len = e->len;
            pv += e->len;
            n++;
            wn--;
        }
        if (window < RANGE_WINDOW_MAX) window *= 2;
    }
    *out_kvs = kvs;
    *out_n = n;
    *out_more = more;
out:
    return rc;
}
