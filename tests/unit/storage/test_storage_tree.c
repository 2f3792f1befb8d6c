/* test_storage_tree.c — the storage engine's B+tree layout (storage.c): leaf splits and merges
 * at their boundaries, deletes that empty leaves, scans in both directions across leaf edges,
 * GC shrinking history, and random operations against a model with a printed seed. After each
 * phase a checker walks the tree itself (storage_int.h) and verifies the layout invariants:
 * key order, prefix caches, separator bounds, equal leaf depth, leaf list links.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "storage/storage.h"
#include "storage/storage_int.h"
#include "test.h"

static rl__storage *open_mem(uint64_t window) {
    rl__storage_options o = {0};
    rl__storage *st = NULL;
    o.window_versions = window;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    return st;
}

/* ---- the invariant checker -------------------------------------------------------------- */

static uint64_t prefix_of(const uint8_t *k, size_t kl) {
    uint64_t p = 0;
    for (size_t i = 0; i < kl && i < 8; i++) p |= (uint64_t)k[i] << (56 - 8 * i);
    return p;
}

typedef struct {
    const bt_leaf *prev; /* the leaf visited before (in-order) */
    size_t rows;
} walk;

/* Check the subtree x at height h (0 = leaf) holds keys in [lo, hi) (NULL: unbounded). */
static void check_node(const void *x, int h, const bt_sep *lo, const bt_sep *hi, int is_root, walk *w) {
    if (h == 0) {
        const bt_leaf *l = x;
        ASSERT_TRUE(l->n <= BT_LEAF);
        if (!is_root) ASSERT_TRUE(l->n >= 1);
        ASSERT_TRUE(l->prev == w->prev);
        if (w->prev) ASSERT_TRUE(w->prev->next == l);
        for (uint32_t i = 0; i < l->n; i++) {
            const bt_row *r = l->rows[i];
            ASSERT_TRUE(l->off <= BT_PFX && r->klen >= l->off);
            ASSERT_TRUE(memcmp(r->key, l->pfx, l->off) == 0);
            ASSERT_TRUE(l->kpre[i] == prefix_of(r->key + l->off, r->klen - l->off));
            ASSERT_NOT_NULL(r->chain);
            for (const st_ver *e = r->chain; e->older; e = e->older) ASSERT_TRUE(e->v > e->older->v);
            if (i) ASSERT_TRUE(rl__bytes_cmp(l->rows[i - 1]->key, l->rows[i - 1]->klen, r->key, r->klen) < 0);
            if (lo) ASSERT_TRUE(rl__bytes_cmp(r->key, r->klen, lo->key, lo->klen) >= 0);
            if (hi) ASSERT_TRUE(rl__bytes_cmp(r->key, r->klen, hi->key, hi->klen) < 0);
        }
        if (w->prev && w->prev->n && l->n) {
            const bt_row *a = w->prev->rows[w->prev->n - 1], *b = l->rows[0];
            ASSERT_TRUE(rl__bytes_cmp(a->key, a->klen, b->key, b->klen) < 0);
        }
        w->prev = l;
        w->rows += l->n;
        return;
    }
    const bt_inner *in = x;
    ASSERT_TRUE(in->n >= (is_root ? 2u : 1u) && in->n <= BT_FAN);
    for (uint32_t j = 1; j < in->n; j++) {
        const bt_sep *s = in->sep[j];
        ASSERT_TRUE(in->off <= BT_PFX && s->klen >= in->off);
        ASSERT_TRUE(memcmp(s->key, in->pfx, in->off) == 0);
        ASSERT_TRUE(in->kpre[j] == prefix_of(s->key + in->off, s->klen - in->off));
        if (j > 1)
            ASSERT_TRUE(rl__bytes_cmp(in->sep[j - 1]->key, in->sep[j - 1]->klen, in->sep[j]->key, in->sep[j]->klen) <
                        0);
    }
    for (uint32_t j = 0; j < in->n; j++)
        check_node(in->child[j], h - 1, j ? in->sep[j] : lo, j + 1 < in->n ? in->sep[j + 1] : hi, 0, w);
}

/* Verify invariants 1-3 of storage.c; returns the number of rows (live or not). */
static size_t check_tree(rl__storage *st) {
    walk w = {NULL, 0};
    check_node(st->root, st->depth, NULL, NULL, 1, &w);
    ASSERT_TRUE(w.prev == st->last);
    ASSERT_TRUE(st->last->next == NULL);
    ASSERT_TRUE(st->first->prev == NULL);
    ASSERT_EQ(w.rows, st->hcount);
    return w.rows;
}

/* ---- the model ---------------------------------------------------------------------------- */

#define NKEYS 3000
#define MAXH 64

typedef struct {
    rl__version v;
    int val; /* -1: absent (tombstone) */
} mver;

typedef struct {
    char key[96];
    uint32_t klen;
    mver h[MAXH]; /* ascending versions */
    int nh;
} mkey;

static mkey *keys; /* sorted by rl__bytes_cmp */

static uint64_t rnd(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static int mkey_cmp(const void *a, const void *b) {
    const mkey *x = a, *y = b;
    return rl__bytes_cmp(x->key, x->klen, y->key, y->klen);
}

/* Shape 0: keys of three shapes: short ones, ones sharing their first 8 bytes (prefix ties),
 * and ones shorter than 8 bytes that prefix others. Shape 1 (the nodes' shared-prefix caches,
 * invariant 12): subspace-like keys under a few long common prefixes, some longer than BT_PFX,
 * some a prefix of others, some that differ from the rest inside the first bytes, so that
 * nodes form with long shared prefixes and inserts at their edges break them. */
static const char *const PREFIXES[] = {
    "\x02"
    "bench\x00\x02"
    "orders\x00\x15\x01",
    "\x02"
    "bench\x00\x02"
    "orders\x00\x15\x02\x02"
    "price_idx\x00",
    "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL", /* 60 > BT_PFX */
    "LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL",              /* 47 */
};
static const size_t PREFIX_LENS[] = {17, 28, 60, 47};

/* Every key is distinct: a prefix group, then the decimal i (or, for i < 4, the bare prefix). */
static void make_keys(int shape) {
    keys = calloc(NKEYS, sizeof *keys);
    for (int i = 0; i < NKEYS; i++) {
        if (shape == 1) {
            size_t pl = PREFIX_LENS[i % 4];
            char *k = keys[i].key;
            memcpy(k, PREFIXES[i % 4], pl);
            if (i < 4) {
                keys[i].klen = (uint32_t)pl; /* the bare prefix of its group */
                continue;
            }
            if (i % 13 == 0) pl = 1; /* a short key that differs in the shared bytes */
            else if (i % 4 == 0 && i % 3 == 0) k[pl - 1] = (char)(3 + i % 5); /* differs in the prefix's last byte */
            keys[i].klen = (uint32_t)(pl + (size_t)snprintf(k + pl, sizeof keys[i].key - pl, "%d", i));
            continue;
        }
        if (i % 3 == 0) snprintf(keys[i].key, sizeof keys[i].key, "k%d", i);
        else if (i % 3 == 1) snprintf(keys[i].key, sizeof keys[i].key, "samepref%06d", i);
        else snprintf(keys[i].key, sizeof keys[i].key, "k%d\x01z", i);
        keys[i].klen = (uint32_t)strlen(keys[i].key);
    }
    qsort(keys, NKEYS, sizeof *keys, mkey_cmp);
    for (int i = 1; i < NKEYS; i++) ASSERT_TRUE(mkey_cmp(&keys[i - 1], &keys[i]) < 0);
    ASSERT_EQ(strlen(PREFIXES[2]), PREFIX_LENS[2]);
    ASSERT_EQ(strlen(PREFIXES[3]), PREFIX_LENS[3]);
}

static int model_at(const mkey *k, rl__version v) {
    for (int i = k->nh - 1; i >= 0; i--)
        if (k->h[i].v <= v) return k->h[i].val;
    return -1;
}

static void model_write(mkey *k, rl__version v, int val) {
    if (k->nh && k->h[k->nh - 1].v == v) {
        k->h[k->nh - 1].val = val;
        return;
    }
    if (k->nh == MAXH) { /* forget the oldest (tests read only recent versions of busy keys) */
        memmove(&k->h[0], &k->h[1], (MAXH - 1) * sizeof k->h[0]);
        k->nh--;
    }
    k->h[k->nh].v = v;
    k->h[k->nh].val = val;
    k->nh++;
}

/* The oldest version whose state the model still knows for every key. */
static rl__version model_floor(void) {
    rl__version f = 0;
    for (int i = 0; i < NKEYS; i++)
        if (keys[i].nh == MAXH && keys[i].h[0].v > f) f = keys[i].h[0].v;
    return f;
}

/* ---- checks against the model ------------------------------------------------------------ */

static void check_get(rl__storage *st, rl__version v, int i, rl_arena *a) {
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_OK(rl__storage_get(st, v, keys[i].key, keys[i].klen, a, &present, &val, &len));
    int m = model_at(&keys[i], v);
    ASSERT_EQ(present, m >= 0);
    if (m >= 0) {
        char buf[32];
        int bl = snprintf(buf, sizeof buf, "v%d", m);
        ASSERT_MEM_EQ(val, len, buf, (size_t)bl);
    }
}

/* Range [keys[b], keys[e]) at v with a limit, either direction. */
static void check_range(rl__storage *st, rl__version v, int b, int e, int limit, int reverse, rl_arena *a) {
    rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl__storage_get_range(st, v, keys[b].key, keys[b].klen, keys[e].key, keys[e].klen, limit, 0, reverse, a,
                                    &kvs, &n, &more));
    int got = 0, exp_more = 0;
    for (int k = 0; k < e - b; k++) {
        int i = reverse ? e - 1 - k : b + k;
        int m = model_at(&keys[i], v);
        if (m < 0) continue;
        if (limit && got == limit) {
            exp_more = 1;
            break;
        }
        ASSERT_TRUE(got < n);
        ASSERT_MEM_EQ(kvs[got].key, kvs[got].key_len, keys[i].key, keys[i].klen);
        char buf[32];
        int bl = snprintf(buf, sizeof buf, "v%d", m);
        ASSERT_MEM_EQ(kvs[got].value, kvs[got].value_len, buf, (size_t)bl);
        got++;
    }
    ASSERT_EQ(n, got);
    ASSERT_EQ(more, exp_more);
}

/* Selector (keys[i], or_equal, offset) at v against the model. */
static void check_selector(rl__storage *st, rl__version v, int i, int or_equal, int offset, rl_arena *a) {
    rl_key_selector sel = {(const uint8_t *)keys[i].key, (int)keys[i].klen, or_equal, offset};
    const uint8_t *k;
    uint32_t kl;
    ASSERT_OK(rl__storage_get_key(st, v, &sel, a, &k, &kl));
    /* base: the first index >= key (> key with or_equal). */
    int j = or_equal ? i + 1 : i;
    const char *ek = "";
    size_t ekl = 0;
    if (offset >= 1) {
        int steps = offset;
        for (; j < NKEYS; j++)
            if (model_at(&keys[j], v) >= 0 && --steps == 0) break;
        if (j < NKEYS) {
            ek = keys[j].key;
            ekl = keys[j].klen;
        } else {
            ek = "\xff\xff";
            ekl = 2;
        }
    } else {
        int steps = -offset + 1;
        for (j = j - 1; j >= 0; j--)
            if (model_at(&keys[j], v) >= 0 && --steps == 0) break;
        if (j >= 0) {
            ek = keys[j].key;
            ekl = keys[j].klen;
        }
    }
    ASSERT_MEM_EQ(k, kl, ek, ekl);
}

static rl__mutation set_of(int i, int val, char *buf) {
    int bl = snprintf(buf, 32, "v%d", val);
    rl__mutation m = {RL_MUT_SET, (const uint8_t *)keys[i].key, keys[i].klen, (const uint8_t *)buf, (uint32_t)bl};
    return m;
}

/* ---- storage-6: the tree ------------------------------------------------------------------ */

/* Ascending loads (the last leaf splits at its end), then clears that empty whole leaves and
 * make the GC remove them, then reverse scans across every leaf edge. */
TEST(storage_6_1_ascending_splits_and_emptied_leaves) {
    make_keys(0);
    rl__storage *st = open_mem(1);
    rl_arena a;
    rl__arena_init(&a, 0);
    char buf[32];
    rl__version v = 1;
    for (int i = 0; i < NKEYS; i++, v++) {
        rl__mutation m = set_of(i, i, buf);
        ASSERT_OK(rl__storage_apply(st, v, &m, 1));
        model_write(&keys[i], v, i);
    }
    ASSERT_EQ(check_tree(st), NKEYS);
    ASSERT_TRUE(st->depth >= 1);
    /* In-order loading keeps leaves full: about NKEYS / BT_LEAF of them. */
    size_t leaves = 0;
    for (const bt_leaf *l = st->first; l; l = l->next) leaves++;
    ASSERT_TRUE(leaves <= NKEYS / BT_LEAF + 2);
    /* Every leaf edge, both directions, small limits that end exactly at an edge. */
    for (int b = 0; b + 1 < NKEYS; b += BT_LEAF / 2) {
        check_range(st, v - 1, b, NKEYS - 1, BT_LEAF, 0, &a);
        check_range(st, v - 1, 0, b + 1, BT_LEAF, 1, &a);
        rl__arena_reset(&a);
    }
    /* Clear keys [100, 900) one by one: whole leaves empty, neighbours merge. */
    for (int i = 100; i < 900; i++, v++) {
        rl__mutation m = {RL_MUT_CLEAR, (const uint8_t *)keys[i].key, keys[i].klen, NULL, 0};
        ASSERT_OK(rl__storage_apply(st, v, &m, 1));
        model_write(&keys[i], v, -1);
    }
    /* Then a clear range over [1500, 2900) in one version. */
    rl__mutation cr = {RL_MUT_CLEAR_RANGE, (const uint8_t *)keys[1500].key, keys[1500].klen,
                       (const uint8_t *)keys[2900].key, keys[2900].klen};
    ASSERT_OK(rl__storage_apply(st, v, &cr, 1));
    for (int i = 1500; i < 2900; i++) model_write(&keys[i], v, -1);
    v++;
    rl__mutation touch = set_of(0, 7, buf);
    ASSERT_OK(rl__storage_apply(st, v, &touch, 1)); /* moves oldest past the clears */
    model_write(&keys[0], v, 7);
    rl__storage_collect(st);
    ASSERT_EQ(check_tree(st), NKEYS - 800 - 1400);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.keys, NKEYS - 800 - 1400);
    for (int b = 0; b + 1 < NKEYS; b += 37) {
        check_range(st, v, b, NKEYS - 1, 50, 0, &a);
        check_range(st, v, 0, b + 1, 50, 1, &a);
        check_range(st, v, b, NKEYS - 1, 0, 1, &a);
        rl__arena_reset(&a);
    }
    for (int i = 0; i < NKEYS; i += 7) {
        check_selector(st, v, i, i & 1, (i % 7) - 3, &a);
        check_get(st, v, i, &a);
    }
    /* Clear everything: the tree returns to one empty root leaf. */
    v++;
    rl__mutation all = {RL_MUT_CLEAR_RANGE, (const uint8_t *)"", 0, (const uint8_t *)"\xff", 1};
    ASSERT_OK(rl__storage_apply(st, v, &all, 1));
    for (int i = 0; i < NKEYS; i++) model_write(&keys[i], v, -1);
    v++;
    ASSERT_OK(rl__storage_apply(st, v, NULL, 0));
    rl__storage_collect(st);
    ASSERT_EQ(check_tree(st), 0);
    ASSERT_EQ(st->depth, 0);
    check_range(st, v, 0, NKEYS - 1, 0, 0, &a);
    check_range(st, v, 0, NKEYS - 1, 0, 1, &a);
    check_selector(st, v, 10, 0, 1, &a);
    check_selector(st, v, 10, 1, 0, &a);
    rl__arena_release(&a);
    rl__storage_close(st);
    free(keys);
}

/* Random sets, clears, clear ranges and atomic adds (of "v%d"-shaped values only: sets) in
 * random key order, with a small window so GC keeps removing rows and leaves keep splitting
 * and merging; reads at random versions in the window against the model. */
static void random_vs_model(int shape) {
    uint64_t seed = rl_test_seed(), rng = seed | 1;
    make_keys(shape);
    const uint64_t window = 40;
    rl__storage *st = open_mem(window);
    rl_arena a;
    rl__arena_init(&a, 0);
    char bufs[16][32];
    rl__version v = 0;
    for (int round = 0; round < 1500; round++) {
        v += 1 + rnd(&rng) % 3;
        rl__mutation muts[16];
        int nm = 1 + (int)(rnd(&rng) % 16);
        /* Phases: grow, shrink, churn, so leaves split and merge repeatedly. */
        int phase = (round / 250) % 3;
        for (int j = 0; j < nm; j++) {
            int i = (int)(rnd(&rng) % NKEYS);
            unsigned op = (unsigned)(rnd(&rng) % 100);
            int set_pct = phase == 0 ? 90 : phase == 1 ? 15 : 55;
            if (op < (unsigned)set_pct) {
                int val = (int)(rnd(&rng) % 100000);
                muts[j] = set_of(i, val, bufs[j]);
                model_write(&keys[i], v, val);
            } else if (op < 97 || phase == 0) {
                rl__mutation m = {RL_MUT_CLEAR, (const uint8_t *)keys[i].key, keys[i].klen, NULL, 0};
                muts[j] = m;
                model_write(&keys[i], v, -1);
            } else {
                int e = i + (int)(rnd(&rng) % 200);
                if (e >= NKEYS) e = NKEYS - 1;
                rl__mutation m = {RL_MUT_CLEAR_RANGE, (const uint8_t *)keys[i].key, keys[i].klen,
                                  (const uint8_t *)keys[e].key, keys[e].klen};
                muts[j] = m;
                for (int k = i; k < e; k++) model_write(&keys[k], v, -1);
            }
        }
        ASSERT_OK(rl__storage_apply(st, v, muts, (size_t)nm));
        if (round % 50 == 49) check_tree(st);
        /* Reads at a random version in the window (and the model's horizon). */
        rl__version oldest = rl__storage_oldest_version(st), fl = model_floor();
        if (fl > oldest) oldest = fl;
        if (oldest > v) continue;
        for (int q = 0; q < 4; q++) {
            rl__version rv = oldest + rnd(&rng) % (v - oldest + 1);
            int b = (int)(rnd(&rng) % NKEYS), e = (int)(rnd(&rng) % NKEYS);
            if (b > e) {
                int t = b;
                b = e;
                e = t;
            }
            int limit = rnd(&rng) % 3 ? (int)(rnd(&rng) % 150) : 0;
            check_range(st, rv, b, e, limit, (int)(rnd(&rng) & 1), &a);
            check_get(st, rv, (int)(rnd(&rng) % NKEYS), &a);
            check_selector(st, rv, (int)(rnd(&rng) % NKEYS), (int)(rnd(&rng) & 1), (int)(rnd(&rng) % 9) - 4, &a);
        }
        rl__arena_reset(&a);
    }
    ASSERT_RC(rl__storage_get_range(st, rl__storage_oldest_version(st) - 1, "", 0, "\xff", 1, 0, 0, 0, &a,
                                    &(rl_keyvalue *){NULL}, &(int){0}, &(int){0}),
              RL_E_TRANSACTION_TOO_OLD);
    /* GC shrinks history: after a full collect past the window every chain is one entry
     * (no tombstones remain) and the row count equals the live keys. */
    v += window + 1;
    ASSERT_OK(rl__storage_apply(st, v, NULL, 0));
    rl__storage_collect(st);
    size_t rows = check_tree(st);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(rows, s.keys);
    size_t live = 0;
    for (int i = 0; i < NKEYS; i++) live += model_at(&keys[i], v) >= 0;
    ASSERT_EQ(live, s.keys);
    for (const bt_leaf *l = st->first; l; l = l->next)
        for (uint32_t i = 0; i < l->n; i++) {
            ASSERT_NULL(l->rows[i]->chain->older);
            ASSERT_FALSE(l->rows[i]->chain->is_clear);
        }
    check_range(st, v, 0, NKEYS - 1, 0, 0, &a);
    check_range(st, v, 0, NKEYS - 1, 0, 1, &a);
    rl__arena_release(&a);
    rl__storage_close(st);
    free(keys);
}

TEST(storage_6_2_random_vs_model) { random_vs_model(0); }

/* The same against keys with long shared prefixes (invariant 12's caches and their upkeep). */
TEST(storage_6_3_shared_prefix_keys_vs_model) { random_vs_model(1); }

/* storage-6.4: forward range reads whose bounds are arbitrary byte strings (not keys) —
 * prefix ranges [P, strinc(P)), [P, P + "\0") and random ends, as a mapped read's secondaries
 * are — against a sorted model, over keys of a small alphabet (long shared prefixes, short
 * tails, equal cached prefixes), with limits. Covers leaf_bound_from's gallop at every
 * position of a leaf. Prints its seed. */
static int cmp_str(const void *x, const void *y) {
    const char *const *a = x, *const *b = y;
    return rl__bytes_cmp((const uint8_t *)*a, strlen(*a), (const uint8_t *)*b, strlen(*b));
}

TEST(storage_6_4_prefix_ranges_vs_model) {
    uint64_t seed = rl_test_seed(), rng = seed | 1;
    enum { N = 3000 };
    static char pool[N][16];
    const char *ks[N];
    rl__storage *st = open_mem(0);
    rl_arena a;
    rl__arena_init(&a, 0);
    int n = 0;
    static rl__mutation m[N];
    for (int i = 0; i < N; i++) {
        int len = 1 + (int)(rnd(&rng) % 12);
        for (int j = 0; j < len; j++) pool[i][j] = "abc\x01\x7f\xfe"[rnd(&rng) % (j < 4 ? 2 : 6)];
        pool[i][len] = 0;
        m[i] = (rl__mutation){RL_MUT_SET, (const uint8_t *)pool[i], (uint32_t)len, (const uint8_t *)"v", 1};
    }
    ASSERT_OK(rl__storage_apply(st, 1, m, N));
    /* The model: the distinct keys, sorted. */
    for (int i = 0; i < N; i++) ks[i] = pool[i];
    qsort(ks, N, sizeof ks[0], cmp_str);
    for (int i = 0; i < N; i++)
        if (n == 0 || strcmp(ks[n - 1], ks[i]) != 0) ks[n++] = ks[i];
    for (int q = 0; q < 20000; q++) {
        uint8_t b[20], e[20];
        size_t bl, el;
        const char *base = ks[rnd(&rng) % (uint64_t)n];
        bl = strlen(base);
        if (rnd(&rng) % 3 == 0 && bl > 1) bl = 1 + (size_t)(rnd(&rng) % (bl - 1)); /* a prefix of a key */
        memcpy(b, base, bl);
        unsigned how = (unsigned)(rnd(&rng) % 3);
        if (how == 0) { /* strinc(P) */
            el = bl;
            memcpy(e, b, el);
            while (el > 0 && e[el - 1] == 0xff) el--;
            if (el == 0) continue;
            e[el - 1]++;
        } else if (how == 1) { /* P + "\0" */
            memcpy(e, b, bl);
            e[bl] = 0;
            el = bl + 1;
        } else { /* any end at or after P */
            const char *o = ks[rnd(&rng) % (uint64_t)n];
            el = strlen(o);
            memcpy(e, o, el);
            if (rl__bytes_cmp(e, el, b, bl) < 0) continue;
        }
        int limit = rnd(&rng) % 4 == 0 ? 1 + (int)(rnd(&rng) % 5) : 0;
        rl_keyvalue *kvs;
        int got, more;
        ASSERT_OK(rl__storage_get_range(st, 1, b, bl, e, el, limit, 0, 0, &a, &kvs, &got, &more));
        int want = 0, want_more = 0;
        for (int i = 0; i < n; i++) {
            size_t kl = strlen(ks[i]);
            if (rl__bytes_cmp((const uint8_t *)ks[i], kl, b, bl) < 0) continue;
            if (rl__bytes_cmp((const uint8_t *)ks[i], kl, e, el) >= 0) break;
            if (limit && want == limit) {
                want_more = 1;
                break;
            }
            if (want >= got) fail_msg("query %d: %d rows, expected more (seed %llu)", q, got, (unsigned long long)seed);
            ASSERT_MEM_EQ(kvs[want].key, kvs[want].key_len, ks[i], kl);
            want++;
        }
        if (got != want || more != want_more)
            fail_msg("query %d: %d rows (more %d), expected %d (more %d) (seed %llu)", q, got, more, want, want_more,
                     (unsigned long long)seed);
        rl__arena_reset(&a);
    }
    rl__arena_release(&a);
    rl__storage_close(st);
}

RL_TEST_MAIN(T(storage_6_1_ascending_splits_and_emptied_leaves), T(storage_6_2_random_vs_model),
             T(storage_6_3_shared_prefix_keys_vs_model), T(storage_6_4_prefix_ranges_vs_model))
