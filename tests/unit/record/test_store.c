/* test_store.c — record layer, part 2: the record store over the KV API (backend from
 * rl_test_url(), default mem:). Round trips for every field type, the on-disk layout compared
 * with hand-built tuple encodings, index maintenance against a model, split records at the
 * boundaries, record versions against the commits' versionstamps, exact counts under concurrent
 * transactions, scans with limits and continuations, size limits and bad input.
 *
 * Test IDs: record_3_* (record_3_11: rl__range_drain, the paging loop shared with the cursor).
 */
#include <pthread.h>
#include <stdlib.h>

#include "test.h"

#include "order.pb-c.h"
#include "record/record_int.h"
#include "app/tool.h"
#include "record_store.pb-c.h"
#include "record_test.pb-c.h"

/* ("test", "orders") by hand. */
static const uint8_t P[] = {0x02, 't', 'e', 's', 't', 0x00, 0x02, 'o', 'r', 'd', 'e', 'r', 's', 0x00};

static size_t enc_int(uint8_t *o, int64_t v) {
    uint64_t m = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    int n = 0;
    for (uint64_t t = m; t; t >>= 8) n++;
    if (v < 0) m = ~m;
    o[0] = (uint8_t)(v < 0 ? 0x14 - n : 0x14 + n);
    for (int i = 0; i < n; i++) o[1 + i] = (uint8_t)(m >> (8 * (n - 1 - i)));
    return (size_t)n + 1;
}

static size_t enc_str(uint8_t *o, const char *s) {
    size_t j = 0, n = strlen(s);
    o[j++] = 0x02;
    memcpy(o + j, s, n);
    j += n;
    o[j++] = 0;
    return j;
}

/* The packed tuple (v,). */
static size_t pk_int(uint8_t *o, int64_t v) { return enc_int(o, v); }

static rl_db *open_db(void) {
    rl_db *db;
    ASSERT_OK(rl_test_db_open(rl_test_url(), NULL, &db));
    /* Start empty whatever the backend (a file: database outlives a test). */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_clear_range(t, "", 0, "\xff", 1));
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    return db;
}

static rl_txn *begin(rl_db *db) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    return t;
}

static void commit(rl_txn *t) {
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
}

/* A store on P with md, opened in its own transaction. */
static rl_store *open_store(rl_db *db, const rl_metadata *md, uint32_t flags) {
    rl_store *s;
    ASSERT_OK(rl_store_new(md, P, sizeof P, flags, &s));
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_open(s, t));
    commit(t);
    return s;
}

/* All raw key-values under prefix[0..n) (copied into a fresh list). */
typedef struct {
    uint8_t *k[64];
    size_t kl[64];
    uint8_t *v[64];
    size_t vl[64];
    int n;
} rawlist;

static void raw_read(rl_db *db, const uint8_t *prefix, size_t n, rawlist *out) {
    uint8_t b[256], e[256];
    memcpy(b, prefix, n);
    memcpy(e, prefix, n);
    b[n] = 0x00;
    e[n] = 0xff;
    rl_txn *t = begin(db);
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(b, n + 1), RL_FIRST_GREATER_OR_EQUAL(e, n + 1), 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, 0);
    const rl_keyvalue *kvs;
    int cnt, more;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &cnt, &more));
    ASSERT_TRUE(cnt <= 64);
    memset(out, 0, sizeof *out);
    for (int i = 0; i < cnt; i++) {
        out->k[i] = malloc(kvs[i].key_len);
        memcpy(out->k[i], kvs[i].key, kvs[i].key_len);
        out->kl[i] = kvs[i].key_len;
        out->v[i] = malloc(kvs[i].value_len + 1);
        memcpy(out->v[i], kvs[i].value, kvs[i].value_len);
        out->vl[i] = kvs[i].value_len;
    }
    out->n = cnt;
    rl_future_free(f);
    rl_txn_free(t);
}

static void raw_free(rawlist *l) {
    for (int i = 0; i < l->n; i++) free(l->k[i]), free(l->v[i]);
    l->n = 0;
}

static void raw_set(rl_db *db, const uint8_t *k, size_t kl, const void *v, size_t vl) {
    rl_txn *t = begin(db);
    ASSERT_OK(rl_txn_set(t, k, kl, v, vl));
    commit(t);
}

/* Key P + (1, pk, suffix). */
static size_t rec_key(uint8_t *o, int64_t pk, int64_t suffix) {
    size_t n = sizeof P;
    memcpy(o, P, n);
    n += enc_int(o + n, 1);
    n += enc_int(o + n, pk);
    n += enc_int(o + n, suffix);
    return n;
}

static Reclayer__Order order(int64_t id, int64_t price) {
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_order_id = 1, o.order_id = id;
    o.has_price = 1, o.price = price;
    return o;
}

static void save(rl_db *db, rl_store *s, const ProtobufCMessage *m) {
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_save(s, t, m, NULL));
    commit(t);
}

static int64_t count_of(rl_db *db, rl_store *s) {
    int64_t c;
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_count(s, t, &c));
    rl_txn_free(t);
    return c;
}

/* ------------------------------------------------------------------------------------------ */

TEST(record_3_1_roundtrip_all_types) {
    rl_db *db = open_db();
    rl_metadata *md;
    static const char *const pk[] = {"id"};
    static const char *const f[] = {"f_string", "f_int32"};
    ASSERT_OK(rl_metadata_new(&md));
    ASSERT_OK(rl_metadata_add_type(md, &reclayer__test__all_types__descriptor, pk, 1));
    ASSERT_OK(rl_metadata_add_value_index(md, "AllTypes", "by_s", f, 2, NULL));
    ASSERT_OK(rl_metadata_build(md));
    rl_store *s = open_store(db, md, 0);
    uint64_t seed = rl_test_seed(), st = seed;
    static uint8_t bytes[8] = {0, 1, 2, 0xff, 0, 3, 4, 5};
    for (int i = 0; i < 20; i++) {
        Reclayer__Test__AllTypes m = RECLAYER__TEST__ALL_TYPES__INIT;
        char str[32];
        snprintf(str, sizeof str, "s%llu", (unsigned long long)rl_test_rand(&st));
        m.has_id = 1, m.id = i;
        m.has_f_int32 = 1, m.f_int32 = (int32_t)rl_test_rand(&st);
        m.has_f_int64 = 1, m.f_int64 = (int64_t)rl_test_rand(&st);
        m.has_f_uint32 = 1, m.f_uint32 = (uint32_t)rl_test_rand(&st);
        m.has_f_uint64 = 1, m.f_uint64 = rl_test_rand(&st);
        m.has_f_sint32 = 1, m.f_sint32 = (int32_t)rl_test_rand(&st);
        m.has_f_sint64 = 1, m.f_sint64 = (int64_t)rl_test_rand(&st);
        m.has_f_fixed32 = 1, m.f_fixed32 = (uint32_t)rl_test_rand(&st);
        m.has_f_fixed64 = 1, m.f_fixed64 = rl_test_rand(&st);
        m.has_f_sfixed32 = 1, m.f_sfixed32 = (int32_t)rl_test_rand(&st);
        m.has_f_sfixed64 = 1, m.f_sfixed64 = (int64_t)rl_test_rand(&st);
        m.has_f_bool = 1, m.f_bool = (int)(rl_test_rand(&st) & 1);
        m.has_f_double = 1, m.f_double = (double)(int64_t)rl_test_rand(&st) / 7.0;
        m.has_f_float = 1, m.f_float = (float)(int32_t)rl_test_rand(&st) / 3.0f;
        m.f_string = str;
        m.has_f_bytes = 1, m.f_bytes.data = bytes, m.f_bytes.len = 1 + rl_test_rand_below(&st, 8);
        m.has_f_enum = 1, m.f_enum = RECLAYER__TEST__COLOR__BLUE;
        save(db, s, &m.base);
        uint8_t k[16];
        size_t kn = pk_int(k, i);
        rl_record r = {0};
        rl_txn *t = begin(db);
        ASSERT_OK(rl_store_exists(s, t, k, kn));
        ASSERT_OK(rl_store_load(s, t, k, kn, &r));
        rl_txn_free(t);
        ASSERT_TRUE(r.type == &reclayer__test__all_types__descriptor);
        ASSERT_MEM_EQ(r.pk, r.pk_len, k, kn);
        Reclayer__Test__AllTypes *g = (Reclayer__Test__AllTypes *)r.msg;
        ASSERT_EQ(g->id, m.id);
        ASSERT_EQ(g->f_int32, m.f_int32);
        ASSERT_TRUE(g->f_int64 == m.f_int64);
        ASSERT_TRUE(g->f_uint32 == m.f_uint32);
        ASSERT_TRUE(g->f_uint64 == m.f_uint64);
        ASSERT_EQ(g->f_sint32, m.f_sint32);
        ASSERT_TRUE(g->f_sint64 == m.f_sint64);
        ASSERT_TRUE(g->f_fixed32 == m.f_fixed32);
        ASSERT_TRUE(g->f_fixed64 == m.f_fixed64);
        ASSERT_EQ(g->f_sfixed32, m.f_sfixed32);
        ASSERT_TRUE(g->f_sfixed64 == m.f_sfixed64);
        ASSERT_EQ(g->f_bool, m.f_bool);
        ASSERT_TRUE(g->f_double == m.f_double);
        ASSERT_TRUE(g->f_float == m.f_float);
        ASSERT_STR_EQ(g->f_string, str);
        ASSERT_MEM_EQ(g->f_bytes.data, g->f_bytes.len, bytes, m.f_bytes.len);
        ASSERT_EQ(g->f_enum, RECLAYER__TEST__COLOR__BLUE);
        ASSERT_EQ(r.n_chunks, 0);
        ASSERT_FALSE(r.has_version);
        rl_record_release(&r);
    }
    ASSERT_EQ(count_of(db, s), 20);
    /* Delete: gone, count down, second delete is NOT_FOUND. */
    uint8_t k[16];
    size_t kn = pk_int(k, 3);
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_delete(s, t, k, kn));
    ASSERT_RC(rl_store_delete(s, t, k, kn), RL_E_NOT_FOUND);
    commit(t);
    rl_record r;
    t = begin(db);
    ASSERT_RC(rl_store_load(s, t, k, kn, &r), RL_E_NOT_FOUND);
    ASSERT_NULL(r.msg);
    ASSERT_RC(rl_store_exists(s, t, k, kn), RL_E_NOT_FOUND);
    rl_txn_free(t);
    ASSERT_EQ(count_of(db, s), 19);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

TEST(record_3_2_layout) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, RL_STORE_RECORD_VERSIONS);
    Reclayer__Order o = order(42, 7);
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_save(s, t, &o.base, NULL));
    rl_future *vsf = rl_txn_get_versionstamp(t);
    commit(t);
    const uint8_t *vs;
    int vsn;
    ASSERT_OK(rl_future_wait(vsf));
    ASSERT_OK(rl_future_get_key(vsf, &vs, &vsn));
    ASSERT_EQ(vsn, 10);
    uint8_t want_vs[10];
    memcpy(want_vs, vs, 10);
    rl_future_free(vsf);

    rawlist l;
    raw_read(db, P, sizeof P, &l);
    uint8_t k[5][64];
    size_t kn[5], n;
    /* (0,) header */
    memcpy(k[0], P, sizeof P), n = sizeof P, n += enc_int(k[0] + n, 0), kn[0] = n;
    /* (1, 42, -1) version, (1, 42, 0) record */
    kn[1] = rec_key(k[1], 42, -1);
    kn[2] = rec_key(k[2], 42, 0);
    /* (2, "price_idx", 7, 42) */
    memcpy(k[3], P, sizeof P), n = sizeof P;
    n += enc_int(k[3] + n, 2);
    n += enc_str(k[3] + n, "price_idx");
    n += enc_int(k[3] + n, 7);
    n += enc_int(k[3] + n, 42);
    kn[3] = n;
    /* (4,) count */
    memcpy(k[4], P, sizeof P), n = sizeof P, n += enc_int(k[4] + n, 4), kn[4] = n;
    ASSERT_EQ(l.n, 5);
    for (int i = 0; i < 5; i++) ASSERT_MEM_EQ(l.k[i], l.kl[i], k[i], kn[i]);
    /* Header: the StoreHeader message. */
    Reclayer__StoreHeader *h = reclayer__store_header__unpack(NULL, l.vl[0], l.v[0]);
    ASSERT_NOT_NULL(h);
    ASSERT_EQ(h->format_version, RL_STORE_FORMAT_VERSION);
    ASSERT_EQ(h->meta_data_version, 1);
    ASSERT_TRUE(h->store_record_versions);
    ASSERT_FALSE(h->split_long_records);
    reclayer__store_header__free_unpacked(h, NULL);
    /* Version: tuple(versionstamp) = 0x33 + the commit's 10 bytes + user version 2 bytes. */
    ASSERT_EQ(l.vl[1], 13);
    ASSERT_EQ(l.v[1][0], 0x33);
    ASSERT_MEM_EQ(l.v[1] + 1, 10, want_vs, 10);
    /* Record: the union message with Order in field 1. */
    Reclayer__RecordTypeUnion *u = reclayer__record_type_union__unpack(NULL, l.vl[2], l.v[2]);
    ASSERT_NOT_NULL(u);
    ASSERT_NOT_NULL(u->_order);
    ASSERT_EQ(u->_order->order_id, 42);
    ASSERT_EQ(u->_order->price, 7);
    reclayer__record_type_union__free_unpacked(u, NULL);
    /* Index entry: empty value. Count: 8-byte little-endian 1. */
    ASSERT_EQ(l.vl[3], 0);
    ASSERT_MEM_EQ(l.v[4], l.vl[4], "\x01\x00\x00\x00\x00\x00\x00\x00", 8);
    raw_free(&l);
    /* load returns the same version. */
    rl_record r;
    uint8_t pk[16];
    size_t pkn = pk_int(pk, 42);
    t = begin(db);
    ASSERT_OK(rl_store_load(s, t, pk, pkn, &r));
    rl_txn_free(t);
    ASSERT_TRUE(r.has_version);
    ASSERT_MEM_EQ(r.version, 10, want_vs, 10);
    rl_record_release(&r);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

/* Index entries of price_idx as (price, id) pairs, read raw. */
static int read_price_index(rl_db *db, int64_t (*out)[2], int max) {
    uint8_t pre[64];
    size_t n = sizeof P;
    memcpy(pre, P, n);
    n += enc_int(pre + n, 2);
    n += enc_str(pre + n, "price_idx");
    uint8_t b[80], e[80];
    memcpy(b, pre, n), b[n] = 0;
    memcpy(e, pre, n), e[n] = 0xff;
    rl_txn *t = begin(db);
    rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(b, n + 1), RL_FIRST_GREATER_OR_EQUAL(e, n + 1), 0, 0,
                                    RL_STREAMING_WANT_ALL, 0, 0);
    const rl_keyvalue *kvs;
    int cnt, more;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &cnt, &more));
    ASSERT_TRUE(cnt <= max);
    for (int i = 0; i < cnt; i++) {
        rl__tuple_elem a, c;
        ASSERT_OK(rl__tuple_get(kvs[i].key + n, kvs[i].key_len - n, 0, &a));
        ASSERT_OK(rl__tuple_get(kvs[i].key + n, kvs[i].key_len - n, 1, &c));
        out[i][0] = a.i;
        out[i][1] = c.i;
    }
    rl_future_free(f);
    rl_txn_free(t);
    return cnt;
}

static int pair_cmp(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

TEST(record_3_3_replace_keeps_indexes_exact) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, 0);
    uint64_t seed = rl_test_seed(), st = seed;
    int64_t model[40]; /* price per id, -1 = absent */
    for (int i = 0; i < 40; i++) model[i] = -1;
    for (int step = 0; step < 300; step++) {
        int id = (int)rl_test_rand_below(&st, 40);
        rl_txn *t = begin(db);
        if (rl_test_rand_below(&st, 4) == 0) {
            uint8_t k[16];
            size_t kn = pk_int(k, id);
            ASSERT_RC(rl_store_delete(s, t, k, kn), model[id] >= 0 ? RL_OK : RL_E_NOT_FOUND);
            model[id] = -1;
        } else {
            int64_t price = (int64_t)rl_test_rand_below(&st, 10); /* duplicates on purpose */
            Reclayer__Order o = order(id, price);
            int existed;
            ASSERT_OK(rl_store_save(s, t, &o.base, &existed));
            ASSERT_EQ(existed, model[id] >= 0);
            model[id] = price;
        }
        commit(t);
    }
    int64_t want[40][2], got[64][2];
    int nw = 0;
    for (int i = 0; i < 40; i++)
        if (model[i] >= 0) want[nw][0] = model[i], want[nw][1] = i, nw++;
    qsort(want, (size_t)nw, sizeof want[0], pair_cmp);
    int ng = read_price_index(db, got, 64);
    ASSERT_EQ(ng, nw);
    for (int i = 0; i < nw; i++) {
        ASSERT_EQ(got[i][0], want[i][0]);
        ASSERT_EQ(got[i][1], want[i][1]);
    }
    ASSERT_EQ(count_of(db, s), nw);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

/* An Order whose stored (union) encoding is exactly target bytes. */
static Reclayer__Order sized_order(const rl_metadata *md, int64_t id, size_t target, uint8_t *pad) {
    Reclayer__Order o = order(id, 1);
    o.has_padding = 1;
    o.padding.data = pad;
    rl_buf b;
    rl__buf_init(&b);
    for (size_t p = target > 20 ? target - 20 : 0; p <= target; p++) {
        o.padding.len = p;
        rl__buf_reset(&b);
        ASSERT_OK(rl__record_serialize(md, 0, &o.base, &b));
        if (b.len == target) break;
    }
    ASSERT_EQ(b.len, target);
    rl__buf_release(&b);
    return o;
}

/* Suffixes of the raw keys under (1, id). */
static int raw_suffixes(rl_db *db, int64_t id, int64_t *out) {
    uint8_t pre[64];
    size_t n = sizeof P;
    memcpy(pre, P, n);
    n += enc_int(pre + n, 1);
    n += enc_int(pre + n, id);
    rawlist l;
    raw_read(db, pre, n, &l);
    for (int i = 0; i < l.n; i++) {
        rl__tuple_elem e;
        ASSERT_OK(rl__tuple_get(l.k[i] + n, l.kl[i] - n, 0, &e));
        out[i] = e.i;
        if (e.i >= 1) ASSERT_TRUE(l.vl[i] <= RL_RECORD_SPLIT_SIZE);
    }
    int c = l.n;
    raw_free(&l);
    return c;
}

TEST(record_3_4_split_boundaries) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, RL_STORE_SPLIT_LONG_RECORDS);
    uint8_t *pad = malloc(300000);
    for (int i = 0; i < 300000; i++) pad[i] = (uint8_t)(i * 7 + 3);
    struct {
        size_t size;
        int chunks;
    } cases[] = {{99999, 0}, {100000, 0}, {100001, 2}, {300000, 3}, {200000, 2}, {10, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Reclayer__Order o = sized_order(md, 1, cases[c].size, pad);
        save(db, s, &o.base); /* replaces the previous size each round */
        int64_t suf[8];
        int ns = raw_suffixes(db, 1, suf);
        if (cases[c].chunks == 0) {
            ASSERT_EQ(ns, 1);
            ASSERT_EQ(suf[0], 0);
        } else {
            ASSERT_EQ(ns, cases[c].chunks);
            for (int i = 0; i < ns; i++) ASSERT_EQ(suf[i], i + 1);
        }
        rl_record r;
        uint8_t k[16];
        size_t kn = pk_int(k, 1);
        rl_txn *t = begin(db);
        ASSERT_OK(rl_store_load(s, t, k, kn, &r));
        rl_txn_free(t);
        ASSERT_EQ(r.n_chunks, cases[c].chunks);
        ASSERT_EQ(r.stored_len, cases[c].size);
        Reclayer__Order *g = (Reclayer__Order *)r.msg;
        ASSERT_MEM_EQ(g->padding.data, g->padding.len, pad, o.padding.len);
        rl_record_release(&r);
    }
    ASSERT_EQ(count_of(db, s), 1);
    rl_store_free(s);
    /* Without split long records: refused, nothing written. */
    static const uint8_t P2[] = {0x02, 'n', 'o', 's', 'p', 'l', 'i', 't', 0x00};
    ASSERT_OK(rl_store_new(md, P2, sizeof P2, 0, &s));
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_open(s, t));
    Reclayer__Order o = sized_order(md, 5, 100001, pad);
    ASSERT_RC(rl_store_save(s, t, &o.base, NULL), RL_E_RECORD_TOO_LARGE);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), "split_long_records") != NULL);
    o = sized_order(md, 5, 100000, pad);
    ASSERT_OK(rl_store_save(s, t, &o.base, NULL));
    commit(t);
    rawlist l;
    raw_read(db, P2, sizeof P2, &l);
    ASSERT_EQ(l.n, 4); /* header, record, index entry, count */
    raw_free(&l);
    rl_store_free(s);
    free(pad);
    rl_metadata_free(md);
    rl_db_close(db);
}

TEST(record_3_5_versions_follow_commit_order) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, RL_STORE_RECORD_VERSIONS | RL_STORE_SPLIT_LONG_RECORDS);
    int ids[] = {1, 2, 1, 3, 2};
    uint8_t prev[12] = {0};
    for (int i = 0; i < 5; i++) {
        Reclayer__Order o = order(ids[i], i);
        rl_txn *t = begin(db);
        ASSERT_OK(rl_store_save(s, t, &o.base, NULL));
        rl_future *vsf = rl_txn_get_versionstamp(t);
        commit(t);
        const uint8_t *vs;
        int vsn;
        ASSERT_OK(rl_future_wait(vsf));
        ASSERT_OK(rl_future_get_key(vsf, &vs, &vsn));
        rl_record r;
        uint8_t k[16];
        size_t kn = pk_int(k, ids[i]);
        t = begin(db);
        ASSERT_OK(rl_store_load(s, t, k, kn, &r));
        rl_txn_free(t);
        ASSERT_TRUE(r.has_version);
        ASSERT_MEM_EQ(r.version, 10, vs, 10);
        ASSERT_TRUE(memcmp(r.version, prev, 12) > 0);
        memcpy(prev, r.version, 12);
        rl_future_free(vsf);
        rl_record_release(&r);
    }
    /* Two saves in one transaction: same global version, increasing local versions. */
    rl_txn *t = begin(db);
    Reclayer__Order a = order(10, 1), b = order(11, 1);
    ASSERT_OK(rl_store_save(s, t, &a.base, NULL));
    ASSERT_OK(rl_store_save(s, t, &b.base, NULL));
    commit(t);
    rl_record ra, rb;
    uint8_t k[16];
    t = begin(db);
    ASSERT_OK(rl_store_load(s, t, k, pk_int(k, 10), &ra));
    ASSERT_OK(rl_store_load(s, t, k, pk_int(k, 11), &rb));
    rl_txn_free(t);
    ASSERT_MEM_EQ(ra.version, 10, rb.version, 10);
    ASSERT_TRUE(memcmp(ra.version + 10, rb.version + 10, 2) < 0);
    ASSERT_TRUE(memcmp(ra.version, prev, 12) > 0);
    rl_record_release(&ra);
    rl_record_release(&rb);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

typedef struct {
    rl_store *s;
    int thread;
    int i;
    int del;
} conc_ctx;

static int conc_fn(rl_txn *t, void *ud) {
    conc_ctx *c = ud;
    if (c->del) {
        uint8_t k[16];
        return rl_store_delete(c->s, t, k, pk_int(k, c->thread * 1000 + c->i));
    }
    Reclayer__Order o = order(c->thread * 1000 + c->i, c->i % 3);
    return rl_store_save(c->s, t, &o.base, NULL);
}

typedef struct {
    rl_db *db;
    rl_store *s;
    int thread;
    int rc;
} thr_arg;

static void *conc_thread(void *p) {
    thr_arg *a = p;
    for (int i = 0; i < 25 && !a->rc; i++) {
        conc_ctx c = {a->s, a->thread, i, 0};
        a->rc = rl_db_run(a->db, conc_fn, &c);
    }
    for (int i = 0; i < 25 && !a->rc; i += 5) {
        conc_ctx c = {a->s, a->thread, i, 1};
        a->rc = rl_db_run(a->db, conc_fn, &c);
    }
    return NULL;
}

TEST(record_3_6_concurrent_counts) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, 0);
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thr_arg){db, s, i, 0};
        ASSERT_EQ(pthread_create(&th[i], NULL, conc_thread, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ASSERT_OK(args[i].rc);
    }
    ASSERT_EQ(count_of(db, s), 4 * 20);
    rl_record_page pg;
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_scan(s, t, NULL, 0, NULL, 0, 0, 0, NULL, 0, &pg));
    rl_txn_free(t);
    ASSERT_EQ(pg.n, 80);
    ASSERT_NULL(pg.continuation);
    rl_record_page_release(&pg);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

TEST(record_3_7_scan_limits_continuations) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS);
    uint64_t seed = rl_test_seed(), st = seed;
    uint8_t *pad = calloc(1, 150000);
    for (int i = 0; i < 30; i++) {
        Reclayer__Order o = order(i, 100 - i);
        if (rl_test_rand_below(&st, 5) == 0) o.has_padding = 1, o.padding.data = pad, o.padding.len = 150000;
        save(db, s, &o.base);
    }
    free(pad);
    for (int rev = 0; rev < 2; rev++) {
        for (int limit = 0; limit <= 7; limit += 7) {
            /* Bounds [5, 23): 18 records, in pages of limit. */
            uint8_t lo[16], hi[16], cont[32];
            size_t lon = pk_int(lo, 5), hin = pk_int(hi, 23), contn = 0;
            int seen = 0;
            for (int page = 0; page < 10; page++) {
                rl_record_page pg;
                rl_txn *t = begin(db);
                ASSERT_OK(rl_store_scan(s, t, lo, lon, hi, hin, rev ? RL_REVERSE : 0, limit, contn ? cont : NULL, contn,
                                        &pg));
                rl_txn_free(t);
                for (int i = 0; i < pg.n; i++) {
                    int want = rev ? 22 - seen : 5 + seen;
                    Reclayer__Order *g = (Reclayer__Order *)pg.records[i].msg;
                    ASSERT_EQ(g->order_id, want);
                    ASSERT_EQ(g->price, 100 - want);
                    ASSERT_TRUE(pg.records[i].has_version);
                    seen++;
                }
                if (limit) ASSERT_TRUE(pg.n <= limit);
                contn = pg.continuation_len;
                if (contn) memcpy(cont, pg.continuation, contn);
                rl_record_page_release(&pg);
                if (!contn) break;
            }
            ASSERT_EQ(seen, 18);
        }
    }
    /* A continuation outside the bounds, or not a tuple. */
    rl_record_page pg;
    uint8_t lo[16], bad[16];
    size_t lon = pk_int(lo, 5), badn = pk_int(bad, 2);
    rl_txn *t = begin(db);
    ASSERT_RC(rl_store_scan(s, t, lo, lon, NULL, 0, 0, 3, bad, badn, &pg), RL_E_CONTINUATION_INVALID);
    ASSERT_RC(rl_store_scan(s, t, lo, lon, NULL, 0, 0, 3, "\x15", 1, &pg), RL_E_CONTINUATION_INVALID);
    rl_txn_free(t);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

TEST(record_3_8_size_limits_write_nothing) {
    rl_db *db = open_db();
    rl_metadata *md;
    static const char *const pk[] = {"region", "seq"};
    static const char *const f[] = {"note"};
    ASSERT_OK(rl_metadata_new(&md));
    ASSERT_OK(rl_metadata_add_type(md, &reclayer__test__composite__descriptor, pk, 2));
    ASSERT_OK(rl_metadata_add_value_index(md, "Composite", "by_note", f, 1, NULL));
    ASSERT_OK(rl_metadata_build(md));
    rl_store *s = open_store(db, md, RL_STORE_SPLIT_LONG_RECORDS);
    char *big = malloc(10001);
    memset(big, 'x', 10000);
    big[10000] = 0;
    Reclayer__Test__Composite c = RECLAYER__TEST__COMPOSITE__INIT;
    c.region = big; /* record key over 10,000 bytes */
    c.has_seq = 1, c.seq = 1;
    c.note = "n";
    rl_txn *t = begin(db);
    ASSERT_RC(rl_store_save(s, t, &c.base, NULL), RL_E_KEY_TOO_LARGE);
    big[9950] = 0;       /* record key fits, index entry (note + pk) does not */
    c.note = big + 9000; /* 950 bytes */
    c.region = big;
    ASSERT_RC(rl_store_save(s, t, &c.base, NULL), RL_E_KEY_TOO_LARGE);
    commit(t);
    rawlist l;
    raw_read(db, P, sizeof P, &l);
    ASSERT_EQ(l.n, 1); /* only the header */
    raw_free(&l);
    free(big);
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

TEST(record_3_9_bad_input) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, 0);
    rl_txn *t = begin(db);
    /* Unknown record type. */
    Reclayer__Test__Composite c = RECLAYER__TEST__COMPOSITE__INIT;
    ASSERT_RC(rl_store_save(s, t, &c.base, NULL), RL_E_RECORD_TYPE_UNKNOWN);
    /* Missing primary key field. */
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_price = 1, o.price = 5;
    ASSERT_RC(rl_store_save(s, t, &o.base, NULL), RL_E_RECORD_PK_MISSING);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), "order_id") != NULL);
    /* Not a packed tuple as a primary key. */
    rl_record r;
    ASSERT_RC(rl_store_load(s, t, "\x15", 1, &r), RL_E_INVALID_ARGUMENT);
    rl_txn_free(t);
    /* Records that do not parse from disk: junk bytes, an unknown union field, a lone chunk. */
    uint8_t k[64];
    raw_set(db, k, rec_key(k, 5, 0), "\x0a\x05junk!", 7);
    raw_set(db, k, rec_key(k, 6, 0), "\x12\x00", 2);
    raw_set(db, k, rec_key(k, 7, 2), "\x0a\x00", 2);
    uint8_t pk[16];
    t = begin(db);
    ASSERT_RC(rl_store_load(s, t, pk, pk_int(pk, 5), &r), RL_E_RECORD_PARSE_FAILED);
    ASSERT_NULL(r.msg);
    ASSERT_RC(rl_store_load(s, t, pk, pk_int(pk, 6), &r), RL_E_RECORD_TYPE_UNKNOWN);
    ASSERT_RC(rl_store_load(s, t, pk, pk_int(pk, 7), &r), RL_E_RECORD_SPLIT_CORRUPT);
    ASSERT_TRUE(strstr(rl_store_errmsg(s), "Found split record without start") != NULL);
    /* Saving over a corrupt record refuses (it cannot know the old index entries). */
    Reclayer__Order o5 = order(5, 1);
    ASSERT_RC(rl_store_save(s, t, &o5.base, NULL), RL_E_RECORD_PARSE_FAILED);
    rl_record_page pg;
    ASSERT_RC(rl_store_scan(s, t, NULL, 0, NULL, 0, 0, 0, NULL, 0, &pg), RL_E_RECORD_PARSE_FAILED);
    rl_txn_free(t);
    rl_store_free(s);
    /* Opening with another metadata version. */
    rl_metadata *md2;
    ASSERT_OK(rl__order_metadata(&md2));
    md2->version = 2;
    ASSERT_OK(rl_store_new(md2, P, sizeof P, 0, &s));
    t = begin(db);
    ASSERT_RC(rl_store_open(s, t), RL_E_STORE_METADATA_MISMATCH);
    rl_txn_free(t);
    rl_store_free(s);
    /* A header that does not parse. */
    raw_set(db, (const uint8_t *)"\x02t\x00\x14", 4, "\xff\xff", 2);
    static const uint8_t P3[] = {0x02, 't', 0x00};
    ASSERT_OK(rl_store_new(md, P3, sizeof P3, 0, &s));
    t = begin(db);
    ASSERT_RC(rl_store_open(s, t), RL_E_CORRUPT_DATA);
    rl_txn_free(t);
    rl_store_free(s);
    /* The header's flags win over the handle's: a store created with versions keeps them when
     * opened by a handle that asked for none, and rl_store_flags says so. */
    static const uint8_t P4[] = {0x02, 'f', 0x00};
    ASSERT_OK(rl_store_new(md, P4, sizeof P4, RL_STORE_RECORD_VERSIONS | RL_STORE_SPLIT_LONG_RECORDS, &s));
    ASSERT_EQ(rl_store_flags(s), RL_STORE_RECORD_VERSIONS | RL_STORE_SPLIT_LONG_RECORDS);
    t = begin(db);
    ASSERT_OK(rl_store_open(s, t));
    commit(t);
    rl_store_free(s);
    ASSERT_OK(rl_store_new(md, P4, sizeof P4, RL_STORE_ALLOW_DEFECTS, &s));
    t = begin(db);
    ASSERT_OK(rl_store_open(s, t));
    rl_txn_free(t);
    ASSERT_EQ(rl_store_flags(s), RL_STORE_RECORD_VERSIONS | RL_STORE_SPLIT_LONG_RECORDS);
    rl_store_free(s);
    ASSERT_RC(rl_store_new(md, "\x15", 1, 0, &s), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl_store_new(md, P, sizeof P, 0x80, &s), RL_E_INVALID_ARGUMENT);
    rl_metadata_free(md2);
    rl_metadata_free(md);
    rl_db_close(db);
}

TEST(record_3_10_load_many) {
    rl_db *db = open_db();
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    rl_store *s = open_store(db, md, 0);
    for (int i = 0; i < 10; i += 1) {
        Reclayer__Order o = order(i * 2, i);
        save(db, s, &o.base);
    }
    uint8_t keys[12][16];
    rl_slice pks[12];
    rl_record out[12];
    for (int i = 0; i < 12; i++) pks[i] = (rl_slice){keys[i], pk_int(keys[i], i)};
    rl_txn *t = begin(db);
    ASSERT_OK(rl_store_load_many(s, t, pks, 12, out));
    rl_txn_free(t);
    for (int i = 0; i < 12; i++) {
        if (i % 2 == 0 && i < 20) {
            ASSERT_NOT_NULL(out[i].msg);
            ASSERT_EQ(((Reclayer__Order *)out[i].msg)->price, i / 2);
        } else {
            ASSERT_NULL(out[i].msg);
        }
        rl_record_release(&out[i]);
    }
    rl_store_free(s);
    rl_metadata_free(md);
    rl_db_close(db);
}

/* rl__range_drain (record/layout.h), shared by the store and the query cursor: every key of a
 * range paged past a first page cut by its row limit, in either direction, with the bounds
 * advanced and the iterations counted up; a callback's stop code ends it. */
typedef struct {
    int n, pages, stop_at, bad_order;
    char prev[16];
    int reverse;
} drain_seen;

static int drain_t_wait(void *ud, rl_future *f, int page) {
    drain_seen *d = ud;
    if (page != d->pages) d->bad_order = 1;
    d->pages++;
    return rl_future_wait(f);
}

static int drain_t_kv(void *ud, const rl_keyvalue *kv) {
    drain_seen *d = ud;
    char k[16] = {0};
    memcpy(k, kv->key, kv->key_len < 15 ? kv->key_len : 15);
    if (d->n > 0 && (d->reverse ? strcmp(k, d->prev) >= 0 : strcmp(k, d->prev) <= 0)) d->bad_order = 1;
    memcpy(d->prev, k, sizeof k);
    if (++d->n == d->stop_at) return 12345;
    return 0;
}

TEST(record_3_11_range_drain) {
    rl_db *db = open_db();
    enum { N = 300 };
    char val[200];
    memset(val, 'v', sizeof val);
    rl_txn *t = begin(db);
    for (int i = 0; i < N; i++) {
        char k[16];
        int kl = snprintf(k, sizeof k, "d%04d", i);
        ASSERT_OK(rl_txn_set(t, k, (size_t)kl, val, sizeof val));
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    for (int reverse = 0; reverse < 2; reverse++) {
        for (int stop = 0; stop < 2; stop++) {
            rl_buf b, e;
            rl__buf_init(&b);
            rl__buf_init(&e);
            rl__buf_append(&b, "d", 1);
            rl__buf_append(&e, "e", 1);
            drain_seen d = {.stop_at = stop ? 250 : 0, .reverse = reverse};
            t = begin(db);
            int flags = reverse ? RL_REVERSE : 0;
            f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len), RL_FIRST_GREATER_OR_EQUAL(e.data, e.len),
                                 7, 0, RL_STREAMING_WANT_ALL, 0, flags);
            int rc = rl__range_drain(t, &b, &e, flags, 0, f, drain_t_wait, drain_t_kv, &d);
            ASSERT_EQ(rc, stop ? 12345 : RL_OK);
            ASSERT_EQ(d.n, stop ? 250 : N);
            ASSERT_FALSE(d.bad_order);
            /* A first page of 7 rows, then ITERATOR pages of 4 KiB and more (~19 rows first). */
            ASSERT_TRUE(d.pages >= 3);
            ASSERT_STR_EQ(d.prev, stop ? (reverse ? "d0050" : "d0249") : (reverse ? "d0000" : "d0299"));
            /* The moving bound was advanced past page 0 (7 rows); the other one kept. */
            if (reverse) {
                ASSERT_EQ(b.len, 1);
                ASSERT_TRUE(e.len == 5 && memcmp(e.data, "d0293", 5) <= 0 && memcmp(e.data, d.prev, 5) > 0);
            } else {
                ASSERT_EQ(e.len, 1);
                ASSERT_TRUE(b.len == 6 && b.data[5] == 0 && memcmp(b.data, "d0006", 5) >= 0 &&
                            memcmp(b.data, d.prev, 5) < 0);
            }
            rl_txn_free(t);
            rl__buf_release(&b);
            rl__buf_release(&e);
        }
    }
    /* With the NULL wait (rl_future_wait) and a read that fails: its error comes back. */
    t = begin(db);
    rl_buf b, e;
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__buf_append(&b, "e", 1);
    rl__buf_append(&e, "d", 1);
    f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len), RL_FIRST_GREATER_OR_EQUAL(e.data, e.len), -1, 0,
                         RL_STREAMING_WANT_ALL, 0, 0);
    drain_seen d = {0};
    ASSERT_EQ(rl__range_drain(t, &b, &e, 0, 0, f, NULL, drain_t_kv, &d), RL_E_RANGE_LIMITS_INVALID);
    ASSERT_EQ(d.n, 0);
    rl_txn_free(t);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl_db_close(db);
}

RL_TEST_MAIN(T(record_3_1_roundtrip_all_types), T(record_3_2_layout), T(record_3_3_replace_keeps_indexes_exact),
             T(record_3_4_split_boundaries), T(record_3_5_versions_follow_commit_order),
             T(record_3_6_concurrent_counts), T(record_3_7_scan_limits_continuations),
             T(record_3_8_size_limits_write_nothing), T(record_3_9_bad_input), T(record_3_10_load_many),
             T(record_3_11_range_drain))
