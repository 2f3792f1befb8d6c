/* test_kv_mapped.c — KV conformance, part 4: get_mapped_range through the public API: point and
 * range mappers, split-record-style prefixes, {V[i]}, escapes, every mapper error, missing
 * secondaries, reverse, limits, conflict ranges (1020) and get_mapped_range_reads_your_writes
 * (2039), RL_MAPPED_OMIT_INDEX. Keys are built with the tuple packer of src/tuple; expectations come from how the test
 * wrote the data. */
#include "kvtest.h"
#include "tuple/tuple.h"

typedef struct {
    rl_buf b;
    rl__tuple_packer pk;
} tup;

static void tup_init(tup *t) {
    rl__buf_init(&t->b);
    rl__tuple_packer_init(&t->pk, &t->b);
}
static void tup_free(tup *t) { rl__buf_release(&t->b); }
static void tup_s(tup *t, const char *s) { rl__tuple_pack_string(&t->pk, s, strlen(s)); }
static void tup_i(tup *t, int64_t i) { rl__tuple_pack_int(&t->pk, i); }

/* Data: records ("rec", pk, suffix) for pk 1..6: pk even is split in chunks 1..2, odd whole at
 * suffix 0, except pk 5 which is missing (an orphan index entry). Index ("idx", price, pk) with
 * price = 100 - pk (so index order is descending pk), value (pk). Escaped records ("{lit}", pk). */
enum { NPK = 6 };

static void put_tuple_kv(rl_txn *t, tup *k, const char *v) {
    ASSERT_OK(rl_txn_set(t, k->b.data, k->b.len, v, strlen(v)));
}

static void load(rl_db *db) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    for (int pk = 1; pk <= NPK; pk++) {
        char v[32];
        if (pk != 5) {
            int chunks = pk % 2 == 0 ? 2 : 1;
            for (int c = 0; c < chunks; c++) {
                tup k;
                tup_init(&k);
                tup_s(&k, "rec");
                tup_i(&k, pk);
                tup_i(&k, pk % 2 == 0 ? c + 1 : 0);
                snprintf(v, sizeof v, "r%d.%d", pk, pk % 2 == 0 ? c + 1 : 0);
                put_tuple_kv(t, &k, v);
                tup_free(&k);
            }
        }
        tup k, val;
        tup_init(&k);
        tup_s(&k, "idx");
        tup_i(&k, 100 - pk);
        tup_i(&k, pk);
        tup_init(&val);
        tup_i(&val, pk);
        ASSERT_OK(rl_txn_set(t, k.b.data, k.b.len, val.b.data, val.b.len));
        tup_free(&k);
        tup_free(&val);
        tup_init(&k);
        rl__tuple_pack_bytes(&k.pk, "{lit}", 5); /* unescaped literals come back as bytes */
        tup_i(&k, pk);
        snprintf(v, sizeof v, "lit%d", pk);
        put_tuple_kv(t, &k, v);
        tup_free(&k);
    }
    /* A key under "bad" that is not a tuple, and one whose value is not a tuple. */
    tup k;
    tup_init(&k);
    tup_s(&k, "bad");
    rl__buf_append(&k.b,
                   "\x02"
                   "a",
                   2); /* an unterminated string */
    ASSERT_OK(rl_txn_set(t, k.b.data, k.b.len, "\x15\x01", 2));
    tup_free(&k);
    tup_init(&k);
    tup_s(&k, "badv");
    tup_i(&k, 1);
    ASSERT_OK(rl_txn_set(t, k.b.data, k.b.len, "\xff\xff", 2));
    tup_free(&k);
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
}

/* The index range of prefix ("name",) as selectors over bufs b / e. */
static void prefix_range(const char *name, rl_buf *b, rl_buf *e) {
    tup p;
    tup_init(&p);
    tup_s(&p, name);
    rl__tuple_range(p.b.data, p.b.len, b, e);
    tup_free(&p);
}

/* Mapper from string elements; "#n" packs integer n. */
static void mapper(rl_buf *out, const char *const *els, int n) {
    rl__tuple_packer pk;
    rl__buf_init(out);
    rl__tuple_packer_init(&pk, out);
    for (int i = 0; i < n; i++) {
        if (els[i][0] == '#') rl__tuple_pack_int(&pk, atoi(els[i] + 1));
        else rl__tuple_pack_string(&pk, els[i], strlen(els[i]));
    }
}

static rl_future *mapped(rl_txn *t, const char *index, const rl_buf *m, int limit, int flags) {
    rl_buf b, e;
    rl__buf_init(&b);
    rl__buf_init(&e);
    prefix_range(index, &b, &e);
    rl_future *f = rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len),
                                           RL_FIRST_GREATER_OR_EQUAL(e.data, e.len), m->data, m->len, limit, 0,
                                           limit ? RL_STREAMING_EXACT : RL_STREAMING_WANT_ALL, 0, flags);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return f;
}

/* The pk of an index entry (its last element). */
static int entry_pk(const rl_mapped_keyvalue *m) {
    rl__tuple_elem el;
    ASSERT_OK(rl__tuple_get(m->index.key, m->index.key_len, 2, &el));
    return (int)el.i;
}

static void check_values(const rl_mapped_keyvalue *m, int pk, int is_range) {
    int want_n = pk == 5 ? 0 : (is_range ? (pk % 2 == 0 ? 2 : 1) : (pk % 2 == 0 ? 0 : 1));
    if (m->n_kvs != want_n) fail_msg("pk %d: %d secondary rows, expected %d", pk, m->n_kvs, want_n);
    ASSERT_EQ(m->is_range, is_range);
    for (int i = 0; i < m->n_kvs; i++) {
        char v[32];
        snprintf(v, sizeof v, "r%d.%d", pk, pk % 2 == 0 ? i + 1 : 0);
        ASSERT_MEM_EQ(m->kvs[i].value, m->kvs[i].value_len, v, strlen(v));
    }
}

/* kv-7.1: range mapper (split-record prefixes), point mapper, {V[0]}, reverse, limits. */
TEST(kv_7_1_mapped_modes) {
    kvt_env e;
    kvt_open(&e);
    load(e.db);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    static const char *const range_m[] = {"rec", "{K[2]}", "{...}"};
    static const char *const point_m[] = {"rec", "{K[2]}", "#0"};
    static const char *const value_m[] = {"rec", "{V[0]}", "{...}"};
    struct {
        const char *const *els;
        int n, is_range, limit, reverse;
    } cases[] = {
        {range_m, 3, 1, 0, 0}, {point_m, 3, 0, 0, 0}, {value_m, 3, 1, 0, 0},
        {range_m, 3, 1, 0, 1}, {point_m, 3, 0, 2, 0}, {range_m, 3, 1, 4, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rl_buf m;
        mapper(&m, cases[c].els, cases[c].n);
        rl_future *f = mapped(t, "idx", &m, cases[c].limit, cases[c].reverse ? RL_REVERSE : 0);
        const rl_mapped_keyvalue *ents;
        int n, more;
        (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &ents, &n, &more));
        int want = cases[c].limit ? cases[c].limit : NPK;
        ASSERT_EQ(n, want);
        ASSERT_EQ(more, cases[c].limit && cases[c].limit < NPK);
        for (int i = 0; i < n; i++) {
            /* Index order is ascending price = descending pk. */
            int pk = cases[c].reverse ? 1 + i : NPK - i;
            ASSERT_EQ(entry_pk(&ents[i]), pk);
            check_values(&ents[i], pk, cases[c].is_range);
        }
        rl_future_free(f);
        rl__buf_release(&m);
    }
    /* Escapes: "{{lit}}" is the literal "{lit}". */
    static const char *const esc_m[] = {"{{lit}}", "{K[2]}"};
    rl_buf m;
    mapper(&m, esc_m, 2);
    rl_future *f = mapped(t, "idx", &m, 0, 0);
    const rl_mapped_keyvalue *ents;
    int n, more;
    (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &ents, &n, &more));
    ASSERT_EQ(n, NPK);
    for (int i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof v, "lit%d", NPK - i);
        ASSERT_EQ(ents[i].n_kvs, 1);
        ASSERT_MEM_EQ(ents[i].kvs[0].value, ents[i].kvs[0].value_len, v, strlen(v));
    }
    rl_future_free(f);
    rl__buf_release(&m);
    rl_txn_free(t);
    kvt_close(&e);
}

/* kv-7.2: every error code. */
TEST(kv_7_2_mapped_errors) {
    kvt_env e;
    kvt_open(&e);
    load(e.db);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    static const char *const bad_index[] = {"rec", "{K[9]}"};
    static const char *const bad_index2[] = {"rec", "{K[1x]}"};
    static const char *const not_last[] = {"rec", "{...}", "{K[2]}"};
    static const char *const k_ref[] = {"rec", "{K[1]}"};
    static const char *const v_ref[] = {"rec", "{V[0]}"};
    struct {
        const char *const *els;
        int n;
        const char *index;
        int want;
    } cases[] = {
        {bad_index, 2, "idx", RL_E_MAPPER_BAD_INDEX},
        {bad_index2, 2, "idx", RL_E_MAPPER_BAD_INDEX},
        {not_last, 3, "idx", RL_E_MAPPER_BAD_RANGE_DESCRIPTOR},
        {k_ref, 2, "bad", RL_E_KEY_NOT_TUPLE},
        {v_ref, 2, "badv", RL_E_VALUE_NOT_TUPLE},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rl_buf m;
        mapper(&m, cases[c].els, cases[c].n);
        rl_future *f = mapped(t, cases[c].index, &m, 0, 0);
        int rc = rl_future_wait(f);
        if (rc != cases[c].want)
            fail_msg("case %zu: %s, expected %s", c, rl_error_name(rc), rl_error_name(cases[c].want));
        rl_future_free(f);
        rl__buf_release(&m);
    }
    rl_buf m;
    rl__buf_init(&m);
    rl__buf_append(&m, "\x02rec", 4); /* unterminated string: not a tuple */
    rl_future *f = mapped(t, "idx", &m, 0, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_MAPPER_NOT_TUPLE);
    rl_future_free(f);
    rl__buf_release(&m);
    static const char *const ok[] = {"rec", "{K[2]}", "{...}"};
    mapper(&m, ok, 3);
    f = mapped(t, "idx", &m, 0, RL_SNAPSHOT);
    ASSERT_RC(rl_future_wait(f), RL_E_UNSUPPORTED_OPERATION);
    rl_future_free(f);
    f = mapped(t, "idx", &m, 0, 0x40);
    ASSERT_RC(rl_future_wait(f), RL_E_INVALID_ARGUMENT);
    rl_future_free(f);
    rl__buf_release(&m);
    rl_txn_free(t);
    kvt_close(&e);
}

/* The key of record (pk, suffix). */
static void rec_key(tup *k, int pk, int suffix) {
    tup_init(k);
    tup_s(k, "rec");
    tup_i(k, pk);
    tup_i(k, suffix);
}

/* kv-7.3: conflict ranges of a mapped read (1020) and reads-your-writes (2039). */
TEST(kv_7_3_mapped_conflicts) {
    kvt_env e;
    kvt_open(&e);
    load(e.db);
    static const char *const range_m[] = {"rec", "{K[2]}", "{...}"};
    rl_buf m;
    mapper(&m, range_m, 3);
    rl_txn *t, *u;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_begin(e.db, &u));
    /* Another transaction changes a record read through the mapped range: 1020. */
    for (int pass = 0; pass < 3; pass++) {
        rl_txn_reset(t);
        rl_txn_reset(u);
        rl_future *f = mapped(t, "idx", &m, 3, 0); /* pk 6, 5, 4 */
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
        ASSERT_OK(rl_txn_set(t, "other", 5, "1", 1));
        tup k;
        /* pass 0: chunk of record 4 (read); 1: record 2 (not read: beyond the limit);
         * 2: a new chunk of orphan pk 5 (its empty range was read). */
        rec_key(&k, pass == 0 ? 4 : pass == 1 ? 2 : 5, 7);
        ASSERT_OK(rl_txn_set(u, k.b.data, k.b.len, "x", 1));
        tup_free(&k);
        ASSERT_OK(kvt_commit(u));
        if (pass == 1) ASSERT_OK(kvt_commit(t));
        else ASSERT_RC(kvt_commit(t), RL_E_NOT_COMMITTED);
    }
    /* 2039: a write inside a secondary range, inside the index range; a write elsewhere is fine. */
    for (int pass = 0; pass < 3; pass++) {
        rl_txn_reset(t);
        tup k;
        if (pass == 0) {
            rec_key(&k, 3, 0);
        } else if (pass == 1) {
            tup_init(&k);
            tup_s(&k, "idx");
            tup_i(&k, 50);
        } else {
            rec_key(&k, 99, 0);
        }
        ASSERT_OK(rl_txn_set(t, k.b.data, k.b.len, "w", 1));
        tup_free(&k);
        rl_future *f = mapped(t, "idx", &m, 0, 0);
        if (pass < 2) ASSERT_RC(rl_future_wait(f), RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES);
        else ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
    }
    /* A clear range over a record also counts. */
    rl_txn_reset(t);
    tup k1, k2;
    rec_key(&k1, 1, 0);
    rec_key(&k2, 1, 1);
    ASSERT_OK(rl_txn_clear_range(t, k1.b.data, k1.b.len, k2.b.data, k2.b.len));
    rl_future *f = mapped(t, "idx", &m, 0, 0);
    ASSERT_RC(rl_future_wait(f), RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES);
    rl_future_free(f);
    tup_free(&k1);
    tup_free(&k2);
    rl__buf_release(&m);
    rl_txn_free(t);
    rl_txn_free(u);
    kvt_close(&e);
}

/* kv-7.4: a secondary range cut off by the per-entry row limit (2000) is marked more, and its
 * read conflict range ends after the last row returned. */
TEST(kv_7_4_mapped_secondary_more) {
    kvt_env e;
    kvt_open(&e);
    enum { CHUNKS = 2100 };
    rl_txn *t, *u;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    for (int c = 0; c < CHUNKS; c++) {
        tup k;
        rec_key(&k, 1000, c);
        ASSERT_OK(rl_txn_set(t, k.b.data, k.b.len, "c", 1));
        tup_free(&k);
    }
    tup ik;
    tup_init(&ik);
    tup_s(&ik, "idx");
    tup_i(&ik, 1);
    tup_i(&ik, 1000);
    ASSERT_OK(rl_txn_set(t, ik.b.data, ik.b.len, "", 0));
    tup_free(&ik);
    ASSERT_OK(kvt_commit(t));
    static const char *const range_m[] = {"rec", "{K[2]}", "{...}"};
    rl_buf m;
    mapper(&m, range_m, 3);
    ASSERT_OK(rl_txn_begin(e.db, &u));
    for (int pass = 0; pass < 2; pass++) {
        rl_txn_reset(t);
        rl_txn_reset(u);
        rl_future *f = mapped(t, "idx", &m, 0, 0);
        const rl_mapped_keyvalue *ents;
        int n, more;
        (void)rl_future_wait(f); /* futures may complete later (RL_TEST_URL=defer:, cluster:) */
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &ents, &n, &more));
        ASSERT_EQ(n, 1);
        ASSERT_EQ(more, 0);
        ASSERT_EQ(ents[0].is_range, 1);
        ASSERT_EQ(ents[0].more, 1);
        ASSERT_EQ(ents[0].n_kvs, 2000);
        rl_future_free(f);
        ASSERT_OK(rl_txn_set(t, "other", 5, "1", 1));
        tup k;
        rec_key(&k, 1000, pass == 0 ? 2050 : 1999); /* beyond the cut, then the last row read */
        ASSERT_OK(rl_txn_set(u, k.b.data, k.b.len, "x", 1));
        tup_free(&k);
        ASSERT_OK(kvt_commit(u));
        if (pass == 0) ASSERT_OK(kvt_commit(t));
        else ASSERT_RC(kvt_commit(t), RL_E_NOT_COMMITTED);
    }
    rl__buf_release(&m);
    rl_txn_free(t);
    rl_txn_free(u);
    kvt_close(&e);
}

/* kv-7.5: RL_MAPPED_OMIT_INDEX. The same reads with and without it (range and point mappers,
 * forward and reverse, every limit): the same entries, more and secondaries; an omitted entry has
 * an empty index and index_omitted_len its bytes, and is never the first or last. Embedded
 * backends omit every other entry; a cluster may keep more (each reply's and batch's boundaries);
 * fdb: omits none (FoundationDB has no such option). */
TEST(kv_7_5_mapped_omit_index) {
    kvt_env e;
    kvt_open(&e);
    load(e.db);
    int is_fdb = !strncmp(e.url, "fdb:", 4), is_cluster = !strncmp(e.url, "cluster:", 8);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    static const char *const range_m[] = {"rec", "{K[2]}", "{...}"};
    static const char *const point_m[] = {"rec", "{K[2]}", "#0"};
    const char *const *mappers[] = {range_m, point_m};
    int omitted_total = 0;
    for (int mi = 0; mi < 2; mi++) {
        rl_buf m;
        mapper(&m, mappers[mi], 3);
        for (int rev = 0; rev < 2; rev++) {
            for (int limit = 0; limit <= NPK; limit++) {
                int fl = rev ? RL_REVERSE : 0;
                rl_future *f = mapped(t, "idx", &m, limit, fl);
                rl_future *g = mapped(t, "idx", &m, limit, fl | RL_MAPPED_OMIT_INDEX);
                const rl_mapped_keyvalue *a, *b;
                int na, nb, ma, mb;
                (void)rl_future_wait(f);
                (void)rl_future_wait(g);
                ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &a, &na, &ma));
                ASSERT_OK(rl_future_get_mapped_keyvalue_array(g, &b, &nb, &mb));
                ASSERT_EQ(na, nb);
                ASSERT_EQ(ma, mb);
                for (int i = 0; i < na; i++) {
                    ASSERT_EQ(a[i].index_omitted, 0);
                    if (b[i].index_omitted) {
                        omitted_total++;
                        if (is_fdb || i == 0 || i == na - 1)
                            fail_msg("mapper %d rev %d limit %d: entry %d of %d omitted", mi, rev, limit, i, na);
                        ASSERT_EQ(b[i].index.key_len, 0);
                        ASSERT_EQ(b[i].index.value_len, 0);
                        ASSERT_EQ(b[i].index_omitted_len, a[i].index.key_len + a[i].index.value_len);
                    } else {
                        if (!is_fdb && !is_cluster && i > 0 && i < na - 1)
                            fail_msg("mapper %d rev %d limit %d: entry %d of %d whole", mi, rev, limit, i, na);
                        ASSERT_EQ(b[i].index_omitted_len, 0);
                        ASSERT_MEM_EQ(b[i].index.key, b[i].index.key_len, a[i].index.key, a[i].index.key_len);
                        ASSERT_MEM_EQ(b[i].index.value, b[i].index.value_len, a[i].index.value, a[i].index.value_len);
                    }
                    ASSERT_EQ(b[i].is_range, a[i].is_range);
                    ASSERT_EQ(b[i].more, a[i].more);
                    ASSERT_MEM_EQ(b[i].begin, b[i].begin_len, a[i].begin, a[i].begin_len);
                    ASSERT_MEM_EQ(b[i].end, b[i].end_len, a[i].end, a[i].end_len);
                    ASSERT_EQ(b[i].n_kvs, a[i].n_kvs);
                    for (int j = 0; j < a[i].n_kvs; j++) {
                        ASSERT_MEM_EQ(b[i].kvs[j].key, b[i].kvs[j].key_len, a[i].kvs[j].key, a[i].kvs[j].key_len);
                        ASSERT_MEM_EQ(b[i].kvs[j].value, b[i].kvs[j].value_len, a[i].kvs[j].value,
                                      a[i].kvs[j].value_len);
                    }
                }
                rl_future_free(f);
                rl_future_free(g);
            }
        }
        rl__buf_release(&m);
    }
    if (!is_fdb && !is_cluster && omitted_total == 0) fail_msg("no entry omitted");
    /* The transaction still commits (the conflict ranges came from whole first / last entries). */
    ASSERT_OK(rl_txn_set(t, "other", 5, "1", 1));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
    kvt_close(&e);
}

RL_TEST_MAIN(T(kv_7_1_mapped_modes), T(kv_7_2_mapped_errors), T(kv_7_3_mapped_conflicts),
             T(kv_7_4_mapped_secondary_more), T(kv_7_5_mapped_omit_index))
