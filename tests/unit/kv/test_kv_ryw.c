/* test_kv_ryw.c — KV conformance, part 2: read-your-writes against an independent model (every
 * write kind, get / get_key / get_range forward and reverse with limits), key selectors at the
 * edges of the keyspace, range limits, target bytes, streaming modes and `more`, atomic
 * operations and versionstamps. Public API only; any backend by RL_TEST_URL. */
#include "kvtest.h"

/* ---- The model: a small keyspace of string keys with byte values ------------------------- */

enum { NK = 24, MAXV = 16 };

typedef struct {
    int present[NK];
    uint8_t val[NK][MAXV];
    int len[NK];
} model;

static void key_name(int i, char *out) { snprintf(out, 8, "k%02d", (i % 100 + 100) % 100); }

static void model_add(uint8_t *v, int *len, int present, const uint8_t *op, int oplen) {
    uint8_t out[MAXV];
    unsigned carry = 0;
    for (int i = 0; i < oplen; i++) {
        unsigned a = (present && i < *len) ? v[i] : 0;
        unsigned s = a + op[i] + carry;
        out[i] = (uint8_t)s;
        carry = s >> 8;
    }
    memcpy(v, out, (size_t)oplen);
    *len = oplen;
}

static int bytes_cmp(const uint8_t *a, int al, const uint8_t *b, int bl) {
    int n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, (size_t)n) : 0;
    return c ? c : al - bl;
}

/* A selector key: an existing key name, a key between two (kNNa), "" or "\xff". */
typedef struct {
    char key[8];
    int key_len;
    int or_equal, offset;
} msel;

static void rand_sel(uint64_t *rs, msel *s) {
    int r = (int)rl_test_rand_below(rs, 20);
    if (r == 0) {
        s->key_len = 0;
    } else if (r == 1) {
        s->key[0] = (char)0xff;
        s->key_len = 1;
    } else {
        key_name((int)rl_test_rand_below(rs, NK), s->key);
        s->key_len = 3;
        if (rl_test_rand_below(rs, 3) == 0) s->key[s->key_len++] = 'a';
    }
    s->or_equal = (int)rl_test_rand_below(rs, 2);
    s->offset = (int)rl_test_rand_below(rs, 7) - 3;
}

/* Resolve in the model: returns -1 for "" (before everything), NK for "\xff", else a key index. */
static int model_resolve(const model *m, const msel *s) {
    int cnt = 0; /* number of present keys <= / < key */
    int idx[NK], n = 0;
    for (int i = 0; i < NK; i++)
        if (m->present[i]) idx[n++] = i;
    for (int i = 0; i < n; i++) {
        char k[8];
        key_name(idx[i], k);
        int c = bytes_cmp((const uint8_t *)k, 3, (const uint8_t *)s->key, s->key_len);
        if (c < 0 || (c == 0 && s->or_equal)) cnt++;
    }
    int pos = cnt + s->offset - 1;
    if (pos < 0) return -1;
    if (pos >= n) return NK;
    return idx[pos];
}

static void check_get_key(rl_txn *t, const model *m, const msel *s, int flags) {
    rl_key_selector sel = {(const uint8_t *)s->key, (uint32_t)s->key_len, s->or_equal, s->offset};
    rl_future *f = rl_txn_get_key(t, sel, flags);
    ASSERT_OK(rl_future_wait(f));
    const uint8_t *k;
    int kl;
    ASSERT_OK(rl_future_get_key(f, &k, &kl));
    int want = model_resolve(m, s);
    char wk[8];
    int wl;
    if (want < 0) {
        wl = 0;
    } else if (want >= NK) {
        wk[0] = (char)0xff;
        wl = 1;
    } else {
        key_name(want, wk);
        wl = 3;
    }
    if (kl != wl || (wl && memcmp(k, wk, (size_t)wl)))
        fail_msg("get_key(%.*s, or_equal %d, offset %d) = '%.*s', model '%.*s'", s->key_len, s->key, s->or_equal,
                 s->offset, kl, k, wl, wk);
    rl_future_free(f);
}

/* Compare get_range with the model. */
static void check_range(rl_txn *t, const model *m, const msel *b, const msel *e, int limit, int reverse, int flags) {
    rl_key_selector bs = {(const uint8_t *)b->key, (uint32_t)b->key_len, b->or_equal, b->offset};
    rl_key_selector es = {(const uint8_t *)e->key, (uint32_t)e->key_len, e->or_equal, e->offset};
    rl_future *f = rl_txn_get_range(t, bs, es, limit, 0, RL_STREAMING_WANT_ALL, 0, flags | (reverse ? RL_REVERSE : 0));
    ASSERT_OK(rl_future_wait(f));
    const rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
    /* Model rows: present keys with rb <= key < re, as indexes (-1 "" < keys < NK "\xff"). */
    int rb = model_resolve(m, b), re = model_resolve(m, e);
    int rows[NK], nr = 0;
    for (int i = 0; i < NK; i++)
        if (m->present[i] && i >= rb && i < re) rows[nr++] = i;
    int want_n = limit && nr > limit ? limit : nr;
    int want_more = nr > want_n;
    if (n != want_n || more != want_more)
        fail_msg("range [%.*s %d %d, %.*s %d %d) limit %d rev %d: %d rows more %d, model %d more %d", b->key_len,
                 b->key, b->or_equal, b->offset, e->key_len, e->key, e->or_equal, e->offset, limit, reverse, n, more,
                 want_n, want_more);
    for (int i = 0; i < n; i++) {
        int mi = reverse ? rows[nr - 1 - i] : rows[i];
        char k[8];
        key_name(mi, k);
        ASSERT_MEM_EQ(kvs[i].key, kvs[i].key_len, k, 3);
        ASSERT_MEM_EQ(kvs[i].value, kvs[i].value_len, m->val[mi], (size_t)m->len[mi]);
    }
    rl_future_free(f);
}

static void check_get(rl_txn *t, const model *m, int i, int flags) {
    char k[8];
    key_name(i, k);
    int present = 0, len = 0;
    char buf[64];
    ASSERT_OK(kvt_get(t, k, 3, flags, &present, buf, sizeof buf, &len));
    if (present != m->present[i]) fail_msg("get %s present %d, model %d", k, present, m->present[i]);
    if (present) ASSERT_MEM_EQ(buf, (size_t)len, m->val[i], (size_t)m->len[i]);
}

/* kv-3.1: random transactions mixing every write kind with reads, checked against the model
 * (committed state + the transaction's own writes). */
TEST(kv_3_1_ryw_random) {
    kvt_env e;
    kvt_open(&e);
    uint64_t rs = rl_test_seed();
    model committed;
    memset(&committed, 0, sizeof committed);
    for (int round = 0; round < 60; round++) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(e.db, &t));
        model m = committed;
        int ops = 10 + (int)rl_test_rand_below(&rs, 40);
        for (int op = 0; op < ops; op++) {
            int i = (int)rl_test_rand_below(&rs, NK);
            char k[8];
            key_name(i, k);
            int flags = rl_test_rand_below(&rs, 4) == 0 ? RL_SNAPSHOT : 0;
            switch (rl_test_rand_below(&rs, 11)) {
            case 0:
            case 1: { /* set */
                uint8_t v[MAXV];
                int vl = (int)rl_test_rand_below(&rs, 9);
                for (int j = 0; j < vl; j++) v[j] = (uint8_t)rl_test_rand(&rs);
                ASSERT_OK(rl_txn_set(t, k, 3, v, (size_t)vl));
                m.present[i] = 1;
                memcpy(m.val[i], v, (size_t)vl);
                m.len[i] = vl;
                break;
            }
            case 2: /* clear */
                ASSERT_OK(rl_txn_clear(t, k, 3));
                m.present[i] = 0;
                break;
            case 3: { /* clear range [ki, kj) */
                int j = i + (int)rl_test_rand_below(&rs, 6);
                char k2[8];
                if (j >= NK) j = NK;
                key_name(j, k2);
                ASSERT_OK(rl_txn_clear_range(t, k, 3, k2, j >= NK ? 3 : 3));
                for (int x = i; x < j; x++) m.present[x] = 0;
                break;
            }
            case 4: { /* ADD */
                uint8_t opd[4];
                int ol = 1 + (int)rl_test_rand_below(&rs, 4);
                for (int j = 0; j < ol; j++) opd[j] = (uint8_t)rl_test_rand(&rs);
                ASSERT_OK(rl_txn_atomic_op(t, k, 3, opd, (size_t)ol, RL_ATOMIC_ADD));
                model_add(m.val[i], &m.len[i], m.present[i], opd, ol);
                m.present[i] = 1;
                break;
            }
            case 5: { /* BYTE_MAX */
                uint8_t opd[3];
                int ol = (int)rl_test_rand_below(&rs, 4);
                for (int j = 0; j < ol; j++) opd[j] = (uint8_t)rl_test_rand(&rs);
                ASSERT_OK(rl_txn_atomic_op(t, k, 3, opd, (size_t)ol, RL_ATOMIC_BYTE_MAX));
                if (!m.present[i] || bytes_cmp(opd, ol, m.val[i], m.len[i]) > 0) {
                    memcpy(m.val[i], opd, (size_t)ol);
                    m.len[i] = ol;
                }
                m.present[i] = 1;
                break;
            }
            case 6: /* get */ check_get(t, &m, i, flags); break;
            case 7: { /* get_key */
                msel s;
                rand_sel(&rs, &s);
                check_get_key(t, &m, &s, flags);
                break;
            }
            default: { /* get_range */
                msel b, en;
                rand_sel(&rs, &b);
                rand_sel(&rs, &en);
                int limit = rl_test_rand_below(&rs, 2) ? 0 : 1 + (int)rl_test_rand_below(&rs, 5);
                check_range(t, &m, &b, &en, limit, (int)rl_test_rand_below(&rs, 2), flags);
                break;
            }
            }
        }
        if (rl_test_rand_below(&rs, 4) != 0) {
            ASSERT_OK(kvt_commit(t));
            committed = m;
        }
        rl_txn_free(t);
        /* A fresh transaction sees exactly the committed model. */
        ASSERT_OK(rl_txn_begin(e.db, &t));
        for (int i = 0; i < NK; i++) check_get(t, &committed, i, 0);
        msel all_b = {"", 0, 0, 1}, all_e = {"\xff", 1, 0, 1};
        check_range(t, &committed, &all_b, &all_e, 0, 0, 0);
        rl_txn_free(t);
    }
    kvt_close(&e);
}

/* kv-3.2: atomic operations stacked on unknown stored values read back through get and ranges;
 * COMPARE_AND_CLEAR; READ_YOUR_WRITES_DISABLE reads the snapshot only. */
TEST(kv_3_2_atomic_ryw) {
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "n", "\x05\x00", "c", "same", NULL);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_atomic_op(t, "n", 1, "\x03\x00", 2, RL_ATOMIC_ADD));
    ASSERT_OK(rl_txn_atomic_op(t, "n", 1, "\xff\x00", 2, RL_ATOMIC_ADD));
    kvt_expect(t, "n", "\x07\x01", 0);
    ASSERT_OK(rl_txn_atomic_op(t, "c", 1, "same", 4, RL_ATOMIC_COMPARE_AND_CLEAR));
    kvt_expect(t, "c", NULL, 0);
    ASSERT_OK(rl_txn_atomic_op(t, "m", 1, "\x09", 1, RL_ATOMIC_MAX));
    kvt_expect(t, "m", "\x09", 0);
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("", 0), RL_FIRST_GREATER_OR_EQUAL("z", 1), 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, RL_REVERSE);
    const rl_keyvalue *kvs;
    int n, more;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_MEM_EQ(kvs[0].key, kvs[0].key_len, "n", 1);
    ASSERT_MEM_EQ(kvs[0].value, kvs[0].value_len, "\x07\x01", 2);
    ASSERT_MEM_EQ(kvs[1].key, kvs[1].key_len, "m", 1);
    rl_future_free(f);
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(e.db, &t));
    kvt_expect(t, "n", "\x07\x01", 0);
    kvt_expect(t, "c", NULL, 0);
    rl_txn_free(t);
    /* RYW disabled: own writes are invisible to reads. */
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_READ_YOUR_WRITES_DISABLE, 0));
    ASSERT_OK(rl_txn_set(t, "n", 1, "x", 1));
    kvt_expect(t, "n", "\x07\x01", 0);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-4.1: selectors at the edges of the keyspace. */
TEST(kv_4_1_selector_edges) {
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "", "empty", "a", "1", "b", "2", NULL);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    struct {
        rl_key_selector s;
        const char *want;
        int want_len;
    } cases[] = {
        {RL_FIRST_GREATER_OR_EQUAL("", 0), "", 0},
        {RL_FIRST_GREATER_THAN("", 0), "a", 1},
        {RL_LAST_LESS_THAN("", 0), "", 0}, /* runs off the front */
        {RL_LAST_LESS_OR_EQUAL("", 0), "", 0},
        {RL_LAST_LESS_OR_EQUAL("a", 1), "a", 1},
        {RL_LAST_LESS_THAN("a", 1), "", 0},
        {RL_FIRST_GREATER_THAN("b", 1), "\xff", 1}, /* runs off the end */
        {RL_FIRST_GREATER_OR_EQUAL("\xff", 1), "\xff", 1},
        {RL_LAST_LESS_THAN("\xff", 1), "b", 1},
        {{(const uint8_t *)"", 0, 0, 3}, "b", 1},
        {{(const uint8_t *)"", 0, 0, 4}, "\xff", 1},
        {{(const uint8_t *)"b", 1, 1, -2}, "", 0},
        {{(const uint8_t *)"b", 1, 1, -3}, "", 0},
        {{(const uint8_t *)"zz", 2, 0, -1}, "a", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl_future *f = rl_txn_get_key(t, cases[i].s, 0);
        const uint8_t *k;
        int kl;
        (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
        ASSERT_OK(rl_future_get_key(f, &k, &kl));
        if (kl != cases[i].want_len || memcmp(k, cases[i].want, (size_t)kl)) fail_msg("case %zu: got '%.*s'", i, kl, k);
        rl_future_free(f);
    }
    /* With system keys the end of the keyspace is \xff\xff. */
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0));
    rl_future *f = rl_txn_get_key(t, RL_FIRST_GREATER_THAN("\xff\xf0", 2), 0);
    const uint8_t *k;
    int kl;
    (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
    ASSERT_OK(rl_future_get_key(f, &k, &kl));
    ASSERT_MEM_EQ(k, (size_t)kl, "\xff\xff", 2);
    rl_future_free(f);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-4.2: range limits, target bytes, streaming modes, `more`, invalid limits. */
TEST(kv_4_2_range_limits) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    char v[100];
    memset(v, 'v', sizeof v);
    for (int i = 0; i < 50; i++) {
        char k[8];
        snprintf(k, sizeof k, "r%02d", i);
        ASSERT_OK(rl_txn_set(t, k, 3, v, sizeof v)); /* 103 bytes a row */
    }
    ASSERT_OK(kvt_commit(t));
    rl_txn_reset(t);
    rl_key_selector b = RL_FIRST_GREATER_OR_EQUAL("r", 1), en = RL_FIRST_GREATER_OR_EQUAL("s", 1);
    struct {
        int limit, target;
        rl_streaming_mode mode;
        int iteration, flags;
        int want_n, want_more;
    } cases[] = {
        {0, 0, RL_STREAMING_WANT_ALL, 0, 0, 50, 0},       {10, 0, RL_STREAMING_WANT_ALL, 0, 0, 10, 1},
        {50, 0, RL_STREAMING_EXACT, 0, 0, 50, 0},         {49, 0, RL_STREAMING_EXACT, 0, RL_REVERSE, 49, 1},
        {0, 300, RL_STREAMING_WANT_ALL, 0, 0, 3, 1}, /* the crossing row is included */
        {0, 206, RL_STREAMING_WANT_ALL, 0, 0, 2, 1},      {0, 0, RL_STREAMING_SMALL, 0, 0, 3, 1}, /* 256 bytes */
        {0, 0, RL_STREAMING_MEDIUM, 0, 0, 10, 1},                                                 /* 1000 bytes */
        {0, 0, RL_STREAMING_LARGE, 0, RL_REVERSE, 40, 1},                                         /* 4096 bytes */
        {0, 0, RL_STREAMING_SERIAL, 0, 0, 50, 0},         {0, 0, RL_STREAMING_ITERATOR, 1, 0, 40, 1},
        {5, 0, RL_STREAMING_SMALL, 0, 0, 3, 1},           {2, 0, RL_STREAMING_SMALL, 0, 0, 2, 1},
    };
    /* Pass 0 reads the snapshot; pass 1 the same rows merged with uncommitted writes (rows
     * rewritten with values of the same size, a cleared range re-set), the same answers. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            if (pass == 1 && i == 0) {
                ASSERT_OK(rl_txn_clear_range(t, "r10", 3, "r20", 3));
                for (int j = 0; j < 50; j += 3) {
                    char k[16];
                    snprintf(k, sizeof k, "r%02d", j);
                    ASSERT_OK(rl_txn_set(t, k, 3, v, sizeof v));
                }
                for (int j = 10; j < 20; j++) {
                    char k[16];
                    snprintf(k, sizeof k, "r%02d", j);
                    ASSERT_OK(rl_txn_set(t, k, 3, v, sizeof v));
                }
            }
            rl_future *f = rl_txn_get_range(t, b, en, cases[i].limit, cases[i].target, cases[i].mode,
                                            cases[i].iteration, cases[i].flags);
            const rl_keyvalue *kvs;
            int n, more;
            (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
            ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
            if (n != cases[i].want_n || more != cases[i].want_more)
                fail_msg("pass %d case %zu: %d rows more %d, expected %d more %d", pass, i, n, more, cases[i].want_n,
                         cases[i].want_more);
            for (int j = 0; j < n; j++) {
                char k[16];
                int idx = (cases[i].flags & RL_REVERSE) ? 49 - j : j;
                snprintf(k, sizeof k, "r%02d", idx);
                ASSERT_MEM_EQ(kvs[j].key, kvs[j].key_len, k, 3);
            }
            if (n) {
                const char *first = (cases[i].flags & RL_REVERSE) ? "r49" : "r00";
                ASSERT_MEM_EQ(kvs[0].key, kvs[0].key_len, first, 3);
            }
            rl_future_free(f);
        }
    struct {
        int limit, target;
        rl_streaming_mode mode;
        int iteration, want;
    } bad[] = {
        {0, 0, RL_STREAMING_EXACT, 0, RL_E_EXACT_MODE_WITHOUT_LIMITS},
        {-5, 0, RL_STREAMING_WANT_ALL, 0, RL_E_RANGE_LIMITS_INVALID},
        {0, -1, RL_STREAMING_WANT_ALL, 0, RL_E_RANGE_LIMITS_INVALID},
        {0, 0, RL_STREAMING_ITERATOR, 0, RL_E_CLIENT_INVALID_OPERATION},
        {0, 0, (rl_streaming_mode)42, 0, RL_E_CLIENT_INVALID_OPERATION},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_future *f = rl_txn_get_range(t, b, en, bad[i].limit, bad[i].target, bad[i].mode, bad[i].iteration, 0);
        ASSERT_RC(rl_future_wait(f), bad[i].want);
        rl_future_free(f);
    }
    /* Selectors beyond the user keyspace. */
    rl_future *f = rl_txn_get_range(t, b, RL_FIRST_GREATER_OR_EQUAL("\xff\x00", 2), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_KEY_OUTSIDE_LEGAL_RANGE);
    rl_future_free(f);
    /* Inverted selectors give an empty range. */
    f = rl_txn_get_range(t, en, b, 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
    const rl_keyvalue *kvs;
    int n, more;
    (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
    ASSERT_EQ(n, 0);
    ASSERT_EQ(more, 0);
    rl_future_free(f);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-4.3: a limited range read conflicts only up to the last row returned. */
TEST(kv_4_3_range_conflicts) {
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "a", "1", "b", "2", "c", "3", "d", "4", NULL);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (int pass = 0; pass < 4; pass++) {
        int reverse = pass & 1, touch_inside = pass >> 1;
        rl_txn_reset(t);
        rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("e", 1), 2, 0,
                                        RL_STREAMING_EXACT, 0, reverse ? RL_REVERSE : 0);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
        ASSERT_OK(rl_txn_set(t, "z", 1, "1", 1));
        /* forward read a, b; reverse read d, c. */
        const char *k = touch_inside ? (reverse ? "c" : "b") : (reverse ? "b" : "c");
        kvt_put(e.db, k, "new", NULL);
        int rc = kvt_commit(t);
        if (touch_inside) ASSERT_RC(rc, RL_E_NOT_COMMITTED);
        else ASSERT_OK(rc);
    }
    /* get_key conflicts between the anchor and the result. */
    rl_txn_reset(t);
    rl_future *f = rl_txn_get_key(t, RL_FIRST_GREATER_THAN("a", 1), 0);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    ASSERT_OK(rl_txn_set(t, "z", 1, "1", 1));
    kvt_put(e.db, "a\x01", "x", NULL);
    ASSERT_RC(kvt_commit(t), RL_E_NOT_COMMITTED);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-4.4: range reads whose selectors are both firstGreaterOrEqual / firstGreaterThan (the
 * resolve_range shortcut) conflict exactly on [anchor(begin), anchor(end)), anchor(sel) = key or
 * key + "\x00" clamped to "\xff", against a model, for random keys (empty, equal, reversed
 * bounds, keys at "\xff"); a key above "\xff" is key_outside_legal_range. Seeded. */
static int bcmp_keys(const void *a, uint32_t al, const void *b, uint32_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

TEST(kv_4_4_offset_one_selectors_conflicts) {
    static const char *keys[] = {"", "a", "a\x00", "b", "c", "\xff", "\xff\x00"};
    static const uint32_t lens[] = {0, 1, 2, 1, 1, 1, 2};
    static const char *probe[] = {"a", "a\x01", "b", "b\x01", "c", "c\x01", "\x01"};
    uint64_t rs = rl_test_seed();
    kvt_env e;
    kvt_open(&e);
    kvt_put(e.db, "a", "1", "b", "2", "c", "3", NULL);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (int iter = 0; iter < 300; iter++) {
        int bi = (int)rl_test_rand_below(&rs, 7), ei = (int)rl_test_rand_below(&rs, 7);
        int bo = (int)rl_test_rand_below(&rs, 2), eo = (int)rl_test_rand_below(&rs, 2);
        int pi = (int)rl_test_rand_below(&rs, 7);
        rl_key_selector b = {(const uint8_t *)keys[bi], lens[bi], bo, 1};
        rl_key_selector en = {(const uint8_t *)keys[ei], lens[ei], eo, 1};
        /* The model's anchors. */
        uint8_t ab[4], ae[4];
        uint32_t abl = lens[bi], ael = lens[ei];
        memcpy(ab, keys[bi], abl);
        memcpy(ae, keys[ei], ael);
        if (bo) ab[abl++] = 0;
        if (eo) ae[ael++] = 0;
        int illegal = bcmp_keys(keys[bi], lens[bi], "\xff", 1) > 0 || bcmp_keys(keys[ei], lens[ei], "\xff", 1) > 0;
        if (bcmp_keys(ab, abl, "\xff", 1) > 0) abl = 1;
        if (bcmp_keys(ae, ael, "\xff", 1) > 0) ael = 1;
        rl_txn_reset(t);
        rl_future *f = rl_txn_get_range(t, b, en, 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
        int rc = rl_future_wait(f);
        rl_future_free(f);
        if (illegal) {
            ASSERT_RC(rc, RL_E_KEY_OUTSIDE_LEGAL_RANGE);
            continue;
        }
        ASSERT_OK(rc);
        ASSERT_OK(rl_txn_set(t, "z", 1, "1", 1));
        kvt_put(e.db, probe[pi], "new", NULL);
        uint32_t pl = (uint32_t)strlen(probe[pi]);
        int inside = bcmp_keys(ab, abl, probe[pi], pl) <= 0 && bcmp_keys(probe[pi], pl, ae, ael) < 0;
        rc = kvt_commit(t);
        if (inside) ASSERT_RC(rc, RL_E_NOT_COMMITTED);
        else ASSERT_OK(rc);
    }
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-5.1: versionstamps: unique, increasing with commit order, readable via get_versionstamp;
 * SET_VERSIONSTAMPED_KEY / _VALUE produce them; a pending versionstamped value is unreadable. */
TEST(kv_5_1_versionstamps) {
    kvt_env e;
    kvt_open(&e);
    uint8_t prev[10] = {0};
    for (int i = 0; i < 5; i++) {
        rl_txn *t;
        ASSERT_OK(rl_txn_begin(e.db, &t));
        uint8_t key[3 + 10 + 4] = {'v', 's', '/'};
        memset(key + 3, 0xee, 10);
        key[13] = 3; /* offset 3, little-endian */
        key[14] = key[15] = key[16] = 0;
        ASSERT_OK(rl_txn_atomic_op(t, key, sizeof key, "val", 3, RL_ATOMIC_SET_VERSIONSTAMPED_KEY));
        uint8_t val[2 + 10 + 4] = {'p', ':'};
        val[12] = 2;
        val[13] = val[14] = val[15] = 0;
        ASSERT_OK(rl_txn_atomic_op(t, "vv", 2, val, sizeof val, RL_ATOMIC_SET_VERSIONSTAMPED_VALUE));
        rl_future *g = rl_txn_get(t, "vv", 2, 0);
        ASSERT_RC(rl_future_wait(g), RL_E_ACCESSED_UNREADABLE);
        rl_future_free(g);
        rl_future *vf = rl_txn_get_versionstamp(t);
        ASSERT_FALSE(rl_future_is_ready(vf));
        ASSERT_OK(kvt_commit(t));
        const uint8_t *vs;
        int vl;
        ASSERT_OK(rl_future_get_key(vf, &vs, &vl));
        ASSERT_EQ(vl, 10);
        ASSERT_TRUE(memcmp(vs, prev, 10) > 0);
        int64_t cv;
        ASSERT_OK(rl_txn_get_committed_version(t, &cv));
        uint64_t be = 0;
        for (int j = 0; j < 8; j++) be = be << 8 | vs[j];
        ASSERT_TRUE(be == (uint64_t)cv);
        memcpy(prev, vs, 10);
        /* The key and the value carry the stamp. */
        rl_txn_reset(t);
        uint8_t want_key[13] = {'v', 's', '/'};
        memcpy(want_key + 3, vs, 10);
        int present = 0, len = 0;
        char buf[32];
        ASSERT_OK(kvt_get(t, (const char *)want_key, 13, 0, &present, buf, sizeof buf, &len));
        ASSERT_TRUE(present);
        ASSERT_MEM_EQ(buf, (size_t)len, "val", 3);
        ASSERT_OK(kvt_get(t, "vv", 2, 0, &present, buf, sizeof buf, &len));
        ASSERT_TRUE(present);
        ASSERT_EQ(len, 12);
        ASSERT_MEM_EQ(buf + 2, 10, vs, 10);
        rl_future_free(vf);
        rl_txn_free(t);
    }
    /* A bad placeholder offset is refused. */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_RC(rl_txn_atomic_op(t, "ab\x09\x00\x00\x00", 6, "v", 1, RL_ATOMIC_SET_VERSIONSTAMPED_KEY),
              RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_RC(rl_txn_atomic_op(t, "k", 1, "v", 1, RL_ATOMIC_SET_VERSIONSTAMPED_VALUE), RL_E_CLIENT_INVALID_OPERATION);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-5.2: versionstamp futures asked for before the commit, as FoundationDB allows: any number of
 * them (a binding asks once for its own baking and once for the caller), all ready after the
 * commit with the same stamp; one freed before the commit is simply gone; a reset cancels the
 * pending ones; a read-only commit fails them with no_commit_version. */
TEST(kv_5_2_versionstamp_futures_before_commit) {
    kvt_env e;
    kvt_open(&e);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    uint8_t key[3 + 10 + 4] = {'v', 'm', '/'};
    memset(key + 3, 0xee, 10);
    key[13] = 3;
    ASSERT_OK(rl_txn_atomic_op(t, key, sizeof key, "v", 1, RL_ATOMIC_SET_VERSIONSTAMPED_KEY));
    rl_future *a = rl_txn_get_versionstamp(t), *b = rl_txn_get_versionstamp(t), *gone = rl_txn_get_versionstamp(t),
              *c = rl_txn_get_versionstamp(t);
    rl_future_free(gone);
    ASSERT_FALSE(rl_future_is_ready(a) || rl_future_is_ready(b) || rl_future_is_ready(c));
    ASSERT_OK(kvt_commit(t));
    const uint8_t *va, *vb, *vc;
    int la, lb, lc;
    ASSERT_OK(rl_future_get_key(a, &va, &la));
    ASSERT_OK(rl_future_get_key(b, &vb, &lb));
    ASSERT_OK(rl_future_get_key(c, &vc, &lc));
    ASSERT_TRUE(la == 10 && lb == 10 && lc == 10 && !memcmp(va, vb, 10) && !memcmp(va, vc, 10));
    rl_future_free(a);
    rl_future_free(b);
    rl_future_free(c);
    rl_txn_reset(t);
    a = rl_txn_get_versionstamp(t);
    b = rl_txn_get_versionstamp(t);
    rl_txn_reset(t);
    ASSERT_RC(rl_future_wait(a), RL_E_TRANSACTION_CANCELLED);
    ASSERT_RC(rl_future_wait(b), RL_E_TRANSACTION_CANCELLED);
    rl_future_free(a);
    rl_future_free(b);
    a = rl_txn_get_versionstamp(t);
    b = rl_txn_get_versionstamp(t);
    ASSERT_OK(kvt_commit(t)); /* nothing written: read-only */
    ASSERT_RC(rl_future_wait(a), RL_E_NO_COMMIT_VERSION);
    ASSERT_RC(rl_future_wait(b), RL_E_NO_COMMIT_VERSION);
    rl_future_free(a);
    rl_future_free(b);
    rl_txn_free(t);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_3_1_ryw_random), T(kv_3_2_atomic_ryw), T(kv_4_1_selector_edges), T(kv_4_2_range_limits),
             T(kv_4_3_range_conflicts), T(kv_4_4_offset_one_selectors_conflicts), T(kv_5_1_versionstamps),
             T(kv_5_2_versionstamp_futures_before_commit))
