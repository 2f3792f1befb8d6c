/* test_storage.c — the versioned map of the storage engine (in memory): reads at past versions
 * against a model, window errors, the read ceiling, GC, atomic operations (FoundationDB's
 * documented rules) and key selector resolution.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "storage/storage.h"
#include "test.h"

static rl__storage *open_mem(uint64_t window) {
    rl__storage_options o = {0};
    rl__storage *st = NULL;
    o.window_versions = window;
    ASSERT_OK(rl__storage_open(&o, &st, NULL));
    return st;
}

static rl__mutation mset(const char *k, const char *v) {
    rl__mutation m = {RL_MUT_SET, (const uint8_t *)k, (uint32_t)strlen(k), (const uint8_t *)v, (uint32_t)strlen(v)};
    return m;
}
static rl__mutation mclear(const char *k) {
    rl__mutation m = {RL_MUT_CLEAR, (const uint8_t *)k, (uint32_t)strlen(k), NULL, 0};
    return m;
}
static rl__mutation mrange(const char *b, const char *e) {
    rl__mutation m = {RL_MUT_CLEAR_RANGE, (const uint8_t *)b, (uint32_t)strlen(b), (const uint8_t *)e,
                      (uint32_t)strlen(e)};
    return m;
}

/* Value of k at v as a NUL-terminated arena string, or NULL if absent. */
static const char *get_str(rl__storage *st, rl__version v, const char *k, rl_arena *a) {
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_OK(rl__storage_get(st, v, k, strlen(k), a, &present, &val, &len));
    if (!present) return NULL;
    char *s = rl__arena_alloc(a, len + 1);
    memcpy(s, val, len);
    s[len] = 0;
    return s;
}

/* ---- storage-1: basic versioned reads --------------------------------------------------- */

TEST(storage_1_1_versions) {
    rl__storage *st = open_mem(0);
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__mutation m1[] = {mset("a", "1"), mset("b", "1")};
    rl__mutation m2[] = {mset("a", "2"), mclear("b")};
    rl__mutation m3[] = {mset("c", "3"), mrange("a", "c")};
    ASSERT_OK(rl__storage_apply(st, 10, m1, 2));
    ASSERT_OK(rl__storage_apply(st, 20, m2, 2));
    ASSERT_OK(rl__storage_apply(st, 30, m3, 2));
    ASSERT_RC(rl__storage_apply(st, 30, m1, 1), RL_E_VERSION_INVALID);
    ASSERT_NULL(get_str(st, 5, "a", &a));
    ASSERT_STR_EQ(get_str(st, 10, "a", &a), "1");
    ASSERT_STR_EQ(get_str(st, 15, "b", &a), "1");
    ASSERT_STR_EQ(get_str(st, 20, "a", &a), "2");
    ASSERT_NULL(get_str(st, 20, "b", &a));
    ASSERT_NULL(get_str(st, 30, "a", &a));
    ASSERT_STR_EQ(get_str(st, 30, "c", &a), "3");
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_RC(rl__storage_get(st, 31, "a", 1, &a, &present, &val, &len), RL_E_FUTURE_VERSION);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.latest_version, 30);
    ASSERT_EQ(s.keys, 1);
    ASSERT_EQ(s.bytes, 2);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* Several writes to one key in one version: the last wins, atomics see the earlier ones. */
TEST(storage_1_2_same_version) {
    rl__storage *st = open_mem(0);
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__mutation add = {RL_MUT_ADD, (const uint8_t *)"n", 1, (const uint8_t *)"\x01", 1};
    rl__mutation m[] = {mset("n", "\x05"), add, add, mset("x", "1"), mclear("x")};
    ASSERT_OK(rl__storage_apply(st, 1, m, 5));
    ASSERT_STR_EQ(get_str(st, 1, "n", &a), "\x07");
    ASSERT_NULL(get_str(st, 1, "x", &a));
    rl__storage_collect(st);
    ASSERT_NULL(get_str(st, 1, "x", &a));
    rl__arena_release(&a);
    rl__storage_close(st);
}

TEST(storage_1_3_window) {
    rl__storage *st = open_mem(100);
    rl_arena a;
    rl__arena_init(&a, 0);
    for (rl__version v = 1; v <= 500; v++) {
        char val[16];
        snprintf(val, sizeof val, "%llu", (unsigned long long)v);
        rl__mutation m[] = {mset("k", val), v % 7 == 0 ? mclear("t") : mset("t", val)};
        ASSERT_OK(rl__storage_apply(st, v, m, 2));
    }
    ASSERT_EQ(rl__storage_oldest_version(st), 400);
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_RC(rl__storage_get(st, 399, "k", 1, &a, &present, &val, &len), RL_E_TRANSACTION_TOO_OLD);
    rl__storage_collect(st);
    for (rl__version v = 400; v <= 500; v++) {
        char want[16];
        snprintf(want, sizeof want, "%llu", (unsigned long long)v);
        ASSERT_STR_EQ(get_str(st, v, "k", &a), want);
        const char *t = get_str(st, v, "t", &a);
        if (v % 7 == 0) ASSERT_NULL(t);
        else ASSERT_STR_EQ(t, want);
    }
    rl_keyvalue *kvs;
    int n, more;
    ASSERT_RC(rl__storage_get_range(st, 1, "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more), RL_E_TRANSACTION_TOO_OLD);
    ASSERT_RC(rl__storage_get_range(st, 501, "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more), RL_E_FUTURE_VERSION);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* GC drops dead keys entirely: a clear_range of many keys leaves nothing once out of window. */
TEST(storage_1_4_gc_drops_tombstones) {
    rl__storage *st = open_mem(10);
    rl_arena a;
    rl__arena_init(&a, 0);
    char k[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(k, sizeof k, "k%04d", i);
        rl__mutation m = mset(k, "v");
        ASSERT_OK(rl__storage_apply(st, (rl__version)i + 1, &m, 1));
    }
    rl__mutation r = mrange("k", "l");
    ASSERT_OK(rl__storage_apply(st, 2000, &r, 1));
    for (rl__version v = 2001; v < 2100; v++) ASSERT_OK(rl__storage_apply(st, v, NULL, 0));
    rl__storage_collect(st);
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    ASSERT_EQ(s.keys, 0);
    rl_key_selector sel = RL_FIRST_GREATER_OR_EQUAL("", 0);
    const uint8_t *key;
    uint32_t kl;
    ASSERT_OK(rl__storage_get_key(st, 2099, &sel, &a, &key, &kl));
    ASSERT_MEM_EQ(key, kl, "\xff\xff", 2);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* The read ceiling of storage-1.5: ud is an _Atomic rl__version. */
static rl__version ceiling_of(void *ud) { return atomic_load((_Atomic rl__version *)ud); }

/* storage-1.5: the read ceiling (rl__storage_set_read_ceiling, the embedded backend's reserved
 * read versions): without one a read above the latest version is future_version; with
 * one, a read at v in (latest, ceiling] is served at latest — points, ranges, selectors — and a
 * read above the ceiling is still future_version; once something newer is applied, reads at v
 * see exactly v's data again. */
TEST(storage_1_5_read_ceiling) {
    rl__storage *st = open_mem(100);
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__mutation m1[] = {mset("a", "1"), mset("b", "2")};
    ASSERT_OK(rl__storage_apply(st, 10, m1, 2));
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_RC(rl__storage_get(st, 20, "a", 1, &a, &present, &val, &len), RL_E_FUTURE_VERSION);
    _Atomic rl__version ceiling = 50;
    rl__storage_set_read_ceiling(st, ceiling_of, &ceiling);
    ASSERT_STR_EQ(get_str(st, 20, "a", &a), "1");
    ASSERT_STR_EQ(get_str(st, 50, "b", &a), "2");
    ASSERT_RC(rl__storage_get(st, 51, "a", 1, &a, &present, &val, &len), RL_E_FUTURE_VERSION);
    rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl__storage_get_range(st, 30, "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_RC(rl__storage_get_range(st, 60, "", 0, "\xff", 1, 0, 0, 0, &a, &kvs, &n, &more), RL_E_FUTURE_VERSION);
    const uint8_t *k;
    uint32_t kl;
    rl_key_selector sel = RL_FIRST_GREATER_THAN("a", 1);
    ASSERT_OK(rl__storage_get_key(st, 40, &sel, &a, &k, &kl));
    ASSERT_MEM_EQ(k, kl, "b", 1);
    rl__select_result sr;
    ASSERT_OK(rl__storage_select(st, 40, &sel, (const uint8_t *)"", 0, 1, (const uint8_t *)"\xff", 1, 1, &a, &sr));
    ASSERT_TRUE(sr.resolved);
    ASSERT_MEM_EQ(sr.key, sr.key_len, "b", 1);
    ASSERT_RC(rl__storage_get_key(st, 51, &sel, &a, &k, &kl), RL_E_FUTURE_VERSION);
    /* A newer version applied: reads below it are exact again, reads up to the ceiling see it. */
    rl__mutation m2[] = {mset("a", "3")};
    ASSERT_OK(rl__storage_apply(st, 40, m2, 1));
    ASSERT_STR_EQ(get_str(st, 30, "a", &a), "1");
    ASSERT_STR_EQ(get_str(st, 45, "a", &a), "3");
    /* The window still counts from the latest version applied. */
    ASSERT_OK(rl__storage_apply(st, 200, m2, 1));
    atomic_store(&ceiling, 300);
    ASSERT_STR_EQ(get_str(st, 250, "a", &a), "3");
    ASSERT_RC(rl__storage_get(st, 99, "a", 1, &a, &present, &val, &len), RL_E_TRANSACTION_TOO_OLD);
    rl__storage_set_read_ceiling(st, NULL, NULL);
    ASSERT_RC(rl__storage_get(st, 250, "a", 1, &a, &present, &val, &len), RL_E_FUTURE_VERSION);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* ---- storage-2: randomized against a model ----------------------------------------------- */

#define NK 40
#define VMAX 64
typedef struct {
    int16_t len[NK]; /* -1: absent */
    uint8_t val[NK][VMAX];
} snap;

static uint8_t keys[NK][4];
static int klen[NK];

static int cmp_key_idx(const void *x, const void *y) {
    int i = *(const int *)x, j = *(const int *)y;
    return rl__bytes_cmp(keys[i], (size_t)klen[i], keys[j], (size_t)klen[j]);
}

static void make_keys(uint64_t *rng) {
    static const uint8_t alphabet[] = {0x00, 0x01, 'a', 'b', 0x7f, 0xfe, 0xff};
    uint8_t tk[NK][4];
    int tl[NK], n = 0;
    while (n < NK) {
        int l = 1 + (int)rl_test_rand_below(rng, 3);
        uint8_t k[4];
        for (int i = 0; i < l; i++) k[i] = alphabet[rl_test_rand_below(rng, sizeof alphabet)];
        int dup = 0;
        for (int j = 0; j < n; j++)
            if (tl[j] == l && memcmp(tk[j], k, (size_t)l) == 0) dup = 1;
        if (dup) continue;
        memcpy(tk[n], k, (size_t)l);
        tl[n++] = l;
    }
    int idx[NK];
    for (int i = 0; i < NK; i++) idx[i] = i;
    memcpy(keys, tk, sizeof keys);
    memcpy(klen, tl, sizeof klen);
    qsort(idx, NK, sizeof idx[0], cmp_key_idx);
    for (int i = 0; i < NK; i++) {
        memcpy(keys[i], tk[idx[i]], 4);
        klen[i] = tl[idx[i]];
    }
}

/* Model: the value of every key after each applied version. */
typedef struct {
    rl__version *vers;
    snap *snaps;
    int n;
} model;

static const snap *model_at(const model *m, rl__version v) {
    const snap *s = NULL;
    for (int i = 0; i < m->n && m->vers[i] <= v; i++) s = &m->snaps[i];
    return s;
}

static int key_cmp_bytes(int i, const uint8_t *k, size_t kl) { return rl__bytes_cmp(keys[i], (size_t)klen[i], k, kl); }

static void check_range(rl__storage *st, const snap *s, rl__version v, uint64_t *rng, rl_arena *a) {
    uint8_t b[4], e[4];
    int bl = (int)rl_test_rand_below(rng, 3), el = (int)rl_test_rand_below(rng, 4);
    int bi = (int)rl_test_rand_below(rng, NK), ei = (int)rl_test_rand_below(rng, NK);
    memcpy(b, keys[bi], 4);
    memcpy(e, keys[ei], 4);
    if (rl_test_rand_below(rng, 2)) bl = klen[bi];
    if (rl_test_rand_below(rng, 2)) el = klen[ei];
    if (rl_test_rand_below(rng, 8) == 0) {
        memset(e, 0xff, 4);
        el = 4;
    }
    int limit = (int)rl_test_rand_below(rng, 6);
    long target = rl_test_rand_below(rng, 3) == 0 ? (long)rl_test_rand_below(rng, 40) : 0;
    int reverse = (int)rl_test_rand_below(rng, 2);
    rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl__storage_get_range(st, v, b, (size_t)bl, e, (size_t)el, limit, target, reverse, a, &kvs, &n, &more));
    /* Model rows in order. */
    int rows[NK], nr = 0;
    for (int j = 0; j < NK; j++) {
        int i = reverse ? NK - 1 - j : j;
        if (s->len[i] < 0) continue;
        if (key_cmp_bytes(i, b, (size_t)bl) < 0 || key_cmp_bytes(i, e, (size_t)el) >= 0) continue;
        rows[nr++] = i;
    }
    int want = 0;
    long bytes = 0;
    while (want < nr && !(limit && want >= limit) && !(target && bytes >= target)) {
        bytes += klen[rows[want]] + s->len[rows[want]];
        want++;
    }
    ASSERT_EQ(n, want);
    ASSERT_EQ(more, want < nr);
    for (int j = 0; j < n; j++) {
        ASSERT_MEM_EQ(kvs[j].key, kvs[j].key_len, keys[rows[j]], (size_t)klen[rows[j]]);
        ASSERT_MEM_EQ(kvs[j].value, kvs[j].value_len, s->val[rows[j]], (size_t)s->len[rows[j]]);
    }
}

static void check_selector(rl__storage *st, const snap *s, rl__version v, uint64_t *rng, rl_arena *a) {
    int ki = (int)rl_test_rand_below(rng, NK);
    rl_key_selector sel = {keys[ki], (uint32_t)klen[ki], (int)rl_test_rand_below(rng, 2),
                           (int)rl_test_rand_below(rng, 9) - 4};
    if (rl_test_rand_below(rng, 4) == 0) sel.key_len = (uint32_t)rl_test_rand_below(rng, (uint64_t)klen[ki] + 1);
    /* Model: index of the last present key < (<=) sel.key among present keys, plus offset. */
    int present[NK], np = 0, base = -1;
    for (int i = 0; i < NK; i++)
        if (s->len[i] >= 0) present[np++] = i;
    for (int j = 0; j < np; j++) {
        int c = key_cmp_bytes(present[j], sel.key, sel.key_len);
        if (c < 0 || (sel.or_equal && c == 0)) base = j;
    }
    long pos = base + sel.offset;
    const uint8_t *wk;
    size_t wl;
    if (pos < 0) {
        wk = (const uint8_t *)"";
        wl = 0;
    } else if (pos >= np) {
        wk = (const uint8_t *)"\xff\xff";
        wl = 2;
    } else {
        wk = keys[present[pos]];
        wl = (size_t)klen[present[pos]];
        if (rl__bytes_cmp(wk, wl, "\xff\xff", 2) > 0) {
            wk = (const uint8_t *)"\xff\xff";
            wl = 2;
        }
    }
    const uint8_t *k;
    uint32_t kl;
    ASSERT_OK(rl__storage_get_key(st, v, &sel, a, &k, &kl));
    ASSERT_MEM_EQ(k, kl, wk, wl);
}

TEST(storage_2_1_model) {
    uint64_t seed = rl_test_seed(), rng = seed;
    make_keys(&rng);
    const uint64_t window = 60;
    rl__storage *st = open_mem(window);
    model m = {rl__malloc(2000 * sizeof(rl__version)), rl__malloc(2000 * sizeof(snap)), 0};
    snap cur;
    memset(&cur, 0, sizeof cur);
    for (int i = 0; i < NK; i++) cur.len[i] = -1;
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_buf res;
    rl__buf_init(&res);
    static const int atomics[] = {
        RL_MUT_ADD, RL_MUT_BIT_AND, RL_MUT_BIT_OR,   RL_MUT_BIT_XOR,  RL_MUT_APPEND_IF_FITS,
        RL_MUT_MAX, RL_MUT_MIN,     RL_MUT_BYTE_MIN, RL_MUT_BYTE_MAX, RL_MUT_COMPARE_AND_CLEAR};
    rl__version v = 0;
    for (int step = 0; step < 2000; step++) {
        v += 1 + rl_test_rand_below(&rng, 3);
        rl__mutation muts[6];
        uint8_t vals[6][8];
        int nm = (int)rl_test_rand_below(&rng, 6);
        for (int j = 0; j < nm; j++) {
            int ki = (int)rl_test_rand_below(&rng, NK), kj = (int)rl_test_rand_below(&rng, NK);
            uint32_t vl = (uint32_t)rl_test_rand_below(&rng, 9);
            for (uint32_t x = 0; x < vl; x++) vals[j][x] = (uint8_t)rl_test_rand_below(&rng, 4);
            int kind = (int)rl_test_rand_below(&rng, 10);
            rl__mutation *mu = &muts[j];
            mu->p1 = keys[ki];
            mu->len1 = (uint32_t)klen[ki];
            mu->p2 = vals[j];
            mu->len2 = vl;
            if (kind < 4) {
                mu->type = RL_MUT_SET;
                cur.len[ki] = (int16_t)vl;
                memcpy(cur.val[ki], vals[j], vl);
            } else if (kind < 5) {
                mu->type = RL_MUT_CLEAR;
                mu->len2 = 0;
                cur.len[ki] = -1;
            } else if (kind < 6) {
                int lo = ki < kj ? ki : kj, hi = ki < kj ? kj : ki;
                mu->type = RL_MUT_CLEAR_RANGE;
                mu->p1 = keys[lo];
                mu->len1 = (uint32_t)klen[lo];
                mu->p2 = keys[hi];
                mu->len2 = (uint32_t)klen[hi];
                for (int i = lo; i < hi; i++) cur.len[i] = -1;
            } else {
                mu->type = (uint8_t)atomics[rl_test_rand_below(&rng, 10)];
                if (mu->type == RL_MUT_APPEND_IF_FITS && cur.len[ki] + (int)vl > VMAX) {
                    mu->type = RL_MUT_SET;
                    cur.len[ki] = (int16_t)vl;
                    memcpy(cur.val[ki], vals[j], vl);
                    continue;
                }
                int present;
                ASSERT_OK(rl__atomic_apply(mu->type, cur.len[ki] >= 0, cur.val[ki],
                                           cur.len[ki] < 0 ? 0 : (size_t)cur.len[ki], vals[j], vl, &res, &present));
                cur.len[ki] = present ? (int16_t)res.len : -1;
                if (present) memcpy(cur.val[ki], res.data, res.len);
            }
        }
        ASSERT_OK(rl__storage_apply(st, v, muts, (size_t)nm));
        m.vers[m.n] = v;
        m.snaps[m.n++] = cur;
        if (rl_test_rand_below(&rng, 50) == 0) rl__storage_collect(st);
        /* Read at a few random versions of the window. */
        rl__version oldest = rl__storage_oldest_version(st);
        ASSERT_EQ(oldest, v > window ? v - window : 0);
        for (int r = 0; r < 3; r++) {
            rl__version rv = oldest + rl_test_rand_below(&rng, v - oldest + 1);
            const snap *s = model_at(&m, rv);
            snap empty;
            if (!s) {
                for (int i = 0; i < NK; i++) empty.len[i] = -1;
                s = &empty;
            }
            int ki = (int)rl_test_rand_below(&rng, NK), present;
            const uint8_t *val;
            uint32_t len;
            ASSERT_OK(rl__storage_get(st, rv, keys[ki], (size_t)klen[ki], &a, &present, &val, &len));
            ASSERT_EQ(present, s->len[ki] >= 0);
            if (present) ASSERT_MEM_EQ(val, len, s->val[ki], (size_t)s->len[ki]);
            check_range(st, s, rv, &rng, &a);
            check_selector(st, s, rv, &rng, &a);
            rl__arena_reset(&a);
        }
        if (oldest > 0) {
            int present;
            const uint8_t *val;
            uint32_t len;
            ASSERT_RC(rl__storage_get(st, oldest - 1, keys[0], (size_t)klen[0], &a, &present, &val, &len),
                      RL_E_TRANSACTION_TOO_OLD);
        }
    }
    rl__storage_status s;
    rl__storage_get_status(st, &s);
    uint64_t live = 0, bytes = 0;
    for (int i = 0; i < NK; i++)
        if (cur.len[i] >= 0) {
            live++;
            bytes += (uint64_t)klen[i] + (uint64_t)cur.len[i];
        }
    ASSERT_EQ(s.keys, live);
    ASSERT_EQ(s.bytes, bytes);
    rl__buf_release(&res);
    rl__arena_release(&a);
    rl__free(m.vers);
    rl__free(m.snaps);
    rl__storage_close(st);
}

/* ---- storage-3: atomic operations --------------------------------------------------------- */

typedef struct {
    int type;
    int present;
    const char *old;
    size_t old_len;
    const char *op;
    size_t op_len;
    int want_present;
    const char *want;
    size_t want_len;
} atomic_case;

#define B(s) s, sizeof(s) - 1

TEST(storage_3_1_atomic_table) {
    static const atomic_case cases[] = {
        /* ADD: little-endian, result has the operand's length, missing = operand. */
        {RL_MUT_ADD, 1, B("\x01\x00"), B("\x02\x00"), 1, B("\x03\x00")},
        {RL_MUT_ADD, 1, B("\xff\x00"), B("\x01\x00"), 1, B("\x00\x01")},
        {RL_MUT_ADD, 1, B("\xff\xff"), B("\x01\x00"), 1, B("\x00\x00")},
        {RL_MUT_ADD, 1, B("\x01\x02\x03"), B("\x01"), 1, B("\x02")},
        {RL_MUT_ADD, 1, B("\xff"), B("\x01\x00\x00"), 1, B("\x00\x01\x00")},
        {RL_MUT_ADD, 0, B(""), B("\x05"), 1, B("\x05")},
        {RL_MUT_ADD, 1, B("\x05"), B(""), 1, B("")},
        /* AND (AndV2): missing = operand; present (even empty) zero-extended. */
        {RL_MUT_BIT_AND, 0, B(""), B("\x0f"), 1, B("\x0f")},
        {RL_MUT_BIT_AND, 1, B("\xff\x0f"), B("\x0f"), 1, B("\x0f")},
        {RL_MUT_BIT_AND, 1, B("\x0f"), B("\xff\xff"), 1, B("\x0f\x00")},
        {RL_MUT_BIT_AND, 1, B(""), B("\xff"), 1, B("\x00")},
        /* OR / XOR. */
        {RL_MUT_BIT_OR, 1, B("\x01"), B("\x02\x04"), 1, B("\x03\x04")},
        {RL_MUT_BIT_OR, 0, B(""), B("\x02"), 1, B("\x02")},
        {RL_MUT_BIT_XOR, 1, B("\x03\x03"), B("\x01"), 1, B("\x02")},
        {RL_MUT_BIT_XOR, 1, B("\x03"), B("\x01\x01"), 1, B("\x02\x01")},
        /* MAX / MIN: little-endian unsigned over the operand's length. */
        {RL_MUT_MAX, 1, B("\x05\x00"), B("\x03\x00"), 1, B("\x05\x00")},
        {RL_MUT_MAX, 1, B("\x05"), B("\x00\x01"), 1, B("\x00\x01")},
        {RL_MUT_MAX, 1, B("\x05\x00\x01"), B("\x03\x00"), 1, B("\x05\x00")},
        {RL_MUT_MAX, 1, B("\x05"), B("\x03\x00"), 1, B("\x05\x00")},
        {RL_MUT_MAX, 0, B(""), B("\x03"), 1, B("\x03")},
        {RL_MUT_MIN, 0, B(""), B("\x03"), 1, B("\x03")},
        {RL_MUT_MIN, 1, B("\x05"), B("\x03\x00"), 1, B("\x03\x00")},
        {RL_MUT_MIN, 1, B("\x02"), B("\x03\x00"), 1, B("\x02\x00")},
        {RL_MUT_MIN, 1, B(""), B("\x03"), 1, B("\x00")},
        {RL_MUT_MIN, 1, B("\x01\x00\x01"), B("\x02\x00"), 1, B("\x01\x00")},
        /* BYTE_MIN / BYTE_MAX: lexicographic, whole values. */
        {RL_MUT_BYTE_MIN, 1, B("abc"), B("abd"), 1, B("abc")},
        {RL_MUT_BYTE_MIN, 1, B("abc"), B("ab"), 1, B("ab")},
        {RL_MUT_BYTE_MIN, 0, B(""), B("zz"), 1, B("zz")},
        {RL_MUT_BYTE_MAX, 1, B("ab"), B("abc"), 1, B("abc")},
        {RL_MUT_BYTE_MAX, 1, B("b"), B("abc"), 1, B("b")},
        {RL_MUT_BYTE_MAX, 0, B(""), B(""), 1, B("")},
        /* APPEND_IF_FITS. */
        {RL_MUT_APPEND_IF_FITS, 1, B("ab"), B("cd"), 1, B("abcd")},
        {RL_MUT_APPEND_IF_FITS, 0, B(""), B("cd"), 1, B("cd")},
        {RL_MUT_APPEND_IF_FITS, 1, B("ab"), B(""), 1, B("ab")},
        /* COMPARE_AND_CLEAR. */
        {RL_MUT_COMPARE_AND_CLEAR, 1, B("x"), B("x"), 0, B("")},
        {RL_MUT_COMPARE_AND_CLEAR, 1, B("x"), B("y"), 1, B("x")},
        {RL_MUT_COMPARE_AND_CLEAR, 0, B(""), B("x"), 0, B("")},
        {RL_MUT_COMPARE_AND_CLEAR, 1, B(""), B(""), 0, B("")},
    };
    rl_buf out;
    rl__buf_init(&out);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const atomic_case *c = &cases[i];
        int present = -1;
        ASSERT_OK(rl__atomic_apply(c->type, c->present, (const uint8_t *)c->old, c->old_len, (const uint8_t *)c->op,
                                   c->op_len, &out, &present));
        if (present != c->want_present) fail_msg("case %zu: present %d", i, present);
        if (present) ASSERT_MEM_EQ(out.data, out.len, c->want, c->want_len);
    }
    int present;
    ASSERT_RC(rl__atomic_apply(RL_MUT_SET_VERSIONSTAMPED_KEY, 0, NULL, 0, (const uint8_t *)"x", 1, &out, &present),
              RL_E_INVALID_MUTATION_TYPE);
    rl__buf_release(&out);
}

TEST(storage_3_2_append_limit) {
    rl_buf out;
    rl__buf_init(&out);
    uint8_t *big = rl__calloc(1, 100000);
    int present;
    ASSERT_OK(rl__atomic_apply(RL_MUT_APPEND_IF_FITS, 1, big, 99998, (const uint8_t *)"xy", 2, &out, &present));
    ASSERT_EQ(out.len, 100000);
    ASSERT_OK(rl__atomic_apply(RL_MUT_APPEND_IF_FITS, 1, big, 99999, (const uint8_t *)"xy", 2, &out, &present));
    ASSERT_EQ(out.len, 99999);
    rl__free(big);
    rl__buf_release(&out);
}

/* Atomics in storage apply against the value at the previous version; history is kept. */
TEST(storage_3_3_atomic_in_storage) {
    rl__storage *st = open_mem(0);
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__mutation add = {RL_MUT_ADD, (const uint8_t *)"c", 1, (const uint8_t *)"\x01\x00", 2};
    for (rl__version v = 1; v <= 300; v++) ASSERT_OK(rl__storage_apply(st, v, &add, 1));
    int present;
    const uint8_t *val;
    uint32_t len;
    ASSERT_OK(rl__storage_get(st, 300, "c", 1, &a, &present, &val, &len));
    ASSERT_MEM_EQ(val, len, "\x2c\x01", 2);
    ASSERT_OK(rl__storage_get(st, 256, "c", 1, &a, &present, &val, &len));
    ASSERT_MEM_EQ(val, len, "\x00\x01", 2);
    rl__mutation cac = {RL_MUT_COMPARE_AND_CLEAR, (const uint8_t *)"c", 1, (const uint8_t *)"\x2c\x01", 2};
    ASSERT_OK(rl__storage_apply(st, 301, &cac, 1));
    ASSERT_OK(rl__storage_get(st, 301, "c", 1, &a, &present, &val, &len));
    ASSERT_EQ(present, 0);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* ---- storage-4: key selectors ------------------------------------------------------------ */

static void expect_key(rl__storage *st, rl__version v, rl_key_selector sel, const char *want, size_t wl) {
    rl_arena a;
    rl__arena_init(&a, 0);
    const uint8_t *k;
    uint32_t kl;
    ASSERT_OK(rl__storage_get_key(st, v, &sel, &a, &k, &kl));
    ASSERT_MEM_EQ(k, kl, want, wl);
    rl__arena_release(&a);
}

TEST(storage_4_1_selectors) {
    rl__storage *st = open_mem(0);
    rl__mutation m1[] = {mset("a", "1"), mset("b", "2"), mset("c", "3"), mset("d", "4")};
    rl__mutation m2[] = {mclear("b")};
    ASSERT_OK(rl__storage_apply(st, 1, m1, 4));
    ASSERT_OK(rl__storage_apply(st, 2, m2, 1));
    expect_key(st, 1, RL_FIRST_GREATER_OR_EQUAL("", 0), B("a"));
    expect_key(st, 1, RL_FIRST_GREATER_OR_EQUAL("b", 1), B("b"));
    expect_key(st, 2, RL_FIRST_GREATER_OR_EQUAL("b", 1), B("c"));
    expect_key(st, 2, RL_FIRST_GREATER_THAN("a", 1), B("c"));
    expect_key(st, 2, RL_LAST_LESS_OR_EQUAL("c", 1), B("c"));
    expect_key(st, 2, RL_LAST_LESS_THAN("c", 1), B("a"));
    expect_key(st, 1, RL_LAST_LESS_THAN("c", 1), B("b"));
    expect_key(st, 2, RL_LAST_LESS_THAN("a", 1), B(""));
    expect_key(st, 2, RL_FIRST_GREATER_THAN("d", 1), B("\xff\xff"));
    expect_key(st, 2, RL_FIRST_GREATER_OR_EQUAL("\xff", 1), B("\xff\xff"));
    rl_key_selector s = RL_FIRST_GREATER_OR_EQUAL("a", 1);
    s.offset = 3; /* a, c, d: third */
    expect_key(st, 2, s, B("d"));
    s.offset = 4;
    expect_key(st, 2, s, B("\xff\xff"));
    s.offset = 100;
    expect_key(st, 2, s, B("\xff\xff"));
    s = RL_LAST_LESS_OR_EQUAL("d", 1);
    s.offset = -1;
    expect_key(st, 2, s, B("c"));
    s.offset = -2;
    expect_key(st, 2, s, B("a"));
    s.offset = -3;
    expect_key(st, 2, s, B(""));
    s.offset = -1000;
    expect_key(st, 2, s, B(""));
    s = RL_FIRST_GREATER_OR_EQUAL("", 0);
    s.offset = 0; /* last key < "": nothing */
    expect_key(st, 2, s, B(""));
    /* Keys above \xff\xff are clamped to it. */
    rl__mutation m3[] = {mset("\xff\xff\x01", "x")};
    ASSERT_OK(rl__storage_apply(st, 3, m3, 1));
    expect_key(st, 3, RL_FIRST_GREATER_THAN("d", 1), B("\xff\xff"));
    expect_key(st, 3, RL_LAST_LESS_OR_EQUAL("\xff\xff\xff", 3), B("\xff\xff"));
    rl__storage_close(st);
}

TEST(storage_4_2_range_limits) {
    rl__storage *st = open_mem(0);
    rl__mutation m[] = {mset("a", "11"), mset("b", "22"), mset("c", "33"), mset("d", "44")};
    ASSERT_OK(rl__storage_apply(st, 1, m, 4));
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl__storage_get_range(st, 1, "a", 1, "d", 1, 2, 0, 1, &a, &kvs, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(more, 1);
    ASSERT_MEM_EQ(kvs[0].key, kvs[0].key_len, "c", 1);
    ASSERT_MEM_EQ(kvs[1].key, kvs[1].key_len, "b", 1);
    /* target_bytes: the row crossing the target is included. */
    ASSERT_OK(rl__storage_get_range(st, 1, "", 0, "\xff", 1, 0, 4, 0, &a, &kvs, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(more, 1);
    ASSERT_OK(rl__storage_get_range(st, 1, "", 0, "\xff", 1, 4, 0, 0, &a, &kvs, &n, &more));
    ASSERT_EQ(n, 4);
    ASSERT_EQ(more, 0);
    ASSERT_OK(rl__storage_get_range(st, 1, "c", 1, "a", 1, 0, 0, 0, &a, &kvs, &n, &more));
    ASSERT_EQ(n, 0);
    ASSERT_RC(rl__storage_get_range(st, 1, "", 0, "\xff", 1, -1, 0, 0, &a, &kvs, &n, &more), RL_E_RANGE_LIMITS_INVALID);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* ---- storage-5: threads ------------------------------------------------------------------- */

/* Every version v writes keys a and b with the same 8-byte value v; readers at the latest
 * version must always see them equal (a read never observes half a version). */
typedef struct {
    rl__storage *st;
    _Atomic int stop;
    _Atomic int bad;
} conc_ctx;

static void *reader(void *arg) {
    conc_ctx *c = arg;
    rl_arena a;
    long reads = 0;
    rl__arena_init(&a, 0);
    while (!c->stop) {
        rl__version v = rl__storage_latest_version(c->st);
        rl_keyvalue *kvs;
        int n, more;
        if (rl__storage_get_range(c->st, v, "a", 1, "c", 1, 0, 0, (int)(reads & 1), &a, &kvs, &n, &more) != RL_OK) {
            c->bad++;
        } else if (v > 0 && (n != 2 || kvs[0].value_len != 8 || memcmp(kvs[0].value, kvs[1].value, 8) != 0)) {
            c->bad++;
        }
        reads++;
        rl__arena_reset(&a);
    }
    rl__arena_release(&a);
    return NULL;
}

TEST(storage_5_1_concurrent_readers) {
    conc_ctx c = {open_mem(1000), 0, 0};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) ASSERT_EQ(pthread_create(&th[i], NULL, reader, &c), 0);
    for (rl__version v = 1; v <= 5000; v++) {
        rl__mutation m[] = {{RL_MUT_SET, (const uint8_t *)"a", 1, (const uint8_t *)&v, 8},
                            {RL_MUT_SET, (const uint8_t *)"b", 1, (const uint8_t *)&v, 8}};
        ASSERT_OK(rl__storage_apply(c.st, v, m, 2));
    }
    c.stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    ASSERT_EQ(c.bad, 0);
    rl__storage_close(c.st);
}

/* storage-4.3: a range read lays the values of the rows it returns end to end, in key order, in
 * both of its forms (up to 4 rows in one pass, more window by window), so a split record's chunks
 * are one run of bytes the record decoder parses in place (rl__decoder_decode_in_place). */
TEST(storage_4_3_values_end_to_end) {
    rl__storage *st = open_mem(100);
    rl_arena a;
    rl__arena_init(&a, 0);
    static char vals[40][3000];
    char ks[40][8];
    rl__mutation m[40];
    for (int i = 0; i < 40; i++) {
        snprintf(ks[i], sizeof ks[i], "k%03d", i);
        memset(vals[i], 'a' + i % 26, sizeof vals[i] - 1 - (size_t)i);
        vals[i][sizeof vals[i] - 1 - (size_t)i] = 0;
        m[i] = mset(ks[i], vals[i]);
    }
    ASSERT_OK(rl__storage_apply(st, 10, m, 40));
    static const int COUNTS[] = {3, 40};
    for (int c = 0; c < 2; c++) {
        rl_keyvalue *kvs;
        int n, more;
        ASSERT_OK(rl__storage_get_range(st, 10, "k", 1, ks[COUNTS[c] - 1], 4, 0, 0, 0, &a, &kvs, &n, &more));
        ASSERT_EQ(n, COUNTS[c] - 1);
        for (int i = 0; i < n; i++) {
            ASSERT_MEM_EQ(kvs[i].value, kvs[i].value_len, vals[i], strlen(vals[i]));
            if (i > 0) ASSERT_TRUE(kvs[i - 1].value + kvs[i - 1].value_len == kvs[i].value);
        }
        rl__arena_reset(&a);
    }
    rl__arena_release(&a);
    rl__storage_close(st);
}

RL_TEST_MAIN(T(storage_1_1_versions), T(storage_1_2_same_version), T(storage_1_3_window),
             T(storage_1_4_gc_drops_tombstones), T(storage_1_5_read_ceiling), T(storage_2_1_model),
             T(storage_3_1_atomic_table), T(storage_3_2_append_limit), T(storage_3_3_atomic_in_storage),
             T(storage_4_1_selectors), T(storage_4_2_range_limits), T(storage_4_3_values_end_to_end),
             T(storage_5_1_concurrent_readers))
