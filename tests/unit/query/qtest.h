/* qtest.h — what the query tests share: a database and an Order store with two VALUE indexes,
 * a model of the dataset kept in the test, the model's answer to a query (sorted by the test
 * itself), and a driver that runs a query page by page through cursors.
 *
 * Metadata: reclayer.Order, primary key order_id; price_idx on (price); cust_price on
 * (customer, price). Backend: rl_test_url().
 */
#ifndef RL_QTEST_H
#define RL_QTEST_H

#include <stdlib.h>

#include "test.h"

#include "order.pb-c.h"
#include "reclayer/query.h"
#include "tuple/tuple.h"

/* ("qtest", "orders") by hand. */
static const uint8_t QP[] = {0x02, 'q', 't', 'e', 's', 't', 0x00, 0x02, 'o', 'r', 'd', 'e', 'r', 's', 0x00};

#define QT_MAX 512

typedef struct {
    int64_t id;
    int64_t price;
    int cust;    /* customer "c<cust>" */
    size_t pad;  /* padding bytes (> 100,000: a split record) */
    int present; /* the record exists (an orphan's record is removed) */
} qt_rec;

typedef struct {
    rl_db *db;
    rl_metadata *md;
    rl_store *s;
    qt_rec r[QT_MAX];
    int n;
} qt_env;

__attribute__((unused)) static rl_txn *qt_begin(qt_env *e) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e->db, &t));
    return t;
}

__attribute__((unused)) static void qt_commit(rl_txn *t) {
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
}

/* Open the database (rl_test_url(), with opts, which may be NULL) and a store under tag. */
__attribute__((unused)) static void qt_open_with(qt_env *e, const char *tag, const rl_db_options *opts) {
    static const char *pkf[] = {"order_id"};
    static const char *f1[] = {"price"};
    static const char *f2[] = {"customer", "price"};
    memset(e, 0, sizeof *e);
    ASSERT_OK(rl_test_db_open(rl_test_url(), opts, &e->db));
    ASSERT_OK(rl_metadata_new(&e->md));
    ASSERT_OK(rl_metadata_add_type(e->md, &reclayer__order__descriptor, pkf, 1));
    ASSERT_OK(rl_metadata_add_value_index(e->md, "Order", "price_idx", f1, 1, NULL));
    ASSERT_OK(rl_metadata_add_value_index(e->md, "Order", "cust_price", f2, 2, NULL));
    ASSERT_OK(rl_metadata_build(e->md));
    /* A store per test under ("qtest", "orders", tag). */
    rl_buf p;
    rl__tuple_packer pk;
    rl__buf_init(&p);
    rl__buf_append(&p, QP, sizeof QP);
    rl__tuple_packer_init(&pk, &p);
    rl__tuple_pack_string(&pk, tag, strlen(tag));
    ASSERT_OK(rl_store_new(e->md, p.data, p.len, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, &e->s));
    rl__buf_release(&p);
    rl_txn *t = qt_begin(e);
    ASSERT_OK(rl_store_open(e->s, t));
    qt_commit(t);
}

__attribute__((unused)) static void qt_open(qt_env *e, const char *tag) { qt_open_with(e, tag, NULL); }

__attribute__((unused)) static void qt_close(qt_env *e) {
    rl_store_free(e->s);
    rl_metadata_free(e->md);
    rl_db_close(e->db);
}

__attribute__((unused)) static void qt_save(qt_env *e, rl_txn *t, const qt_rec *r) {
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    char cust[16];
    uint8_t *pad = NULL;
    o.has_order_id = 1, o.order_id = r->id;
    o.has_price = 1, o.price = r->price;
    snprintf(cust, sizeof cust, "c%d", r->cust);
    o.customer = cust;
    if (r->pad) {
        pad = malloc(r->pad);
        for (size_t i = 0; i < r->pad; i++) pad[i] = (uint8_t)(r->id * 31 + (int64_t)i);
        o.has_padding = 1;
        o.padding.data = pad;
        o.padding.len = r->pad;
    }
    ASSERT_OK(rl_store_save(e->s, t, &o.base, NULL));
    free(pad);
}

/* Load n records made from the seed: ids with gaps, prices in [0, price_range) (duplicates),
 * n_split of them split (two chunks). */
__attribute__((unused)) static void qt_load(qt_env *e, uint64_t *rs, int n, int price_range, int n_split) {
    int64_t id = 0;
    e->n = n;
    for (int i = 0; i < n; i++) {
        id += 1 + (int64_t)rl_test_rand_below(rs, 3);
        qt_rec *r = &e->r[i];
        r->id = id;
        r->price = (int64_t)rl_test_rand_below(rs, (uint64_t)price_range) - price_range / 4;
        r->cust = (int)rl_test_rand_below(rs, 3);
        r->pad = rl_test_rand_below(rs, 4) == 0 ? (size_t)rl_test_rand_below(rs, 200) : 0;
        r->present = 1;
    }
    for (int i = 0; i < n_split && n > 0; i++) e->r[rl_test_rand_below(rs, (uint64_t)n)].pad = 150000;
    rl_txn *t = qt_begin(e);
    for (int i = 0; i < n; i++) {
        qt_save(e, t, &e->r[i]);
        if (i % 25 == 24) {
            qt_commit(t);
            t = qt_begin(e);
        }
    }
    qt_commit(t);
}

/* Remove record i's keys (leaving its index entries: an orphan). */
__attribute__((unused)) static void qt_orphan(qt_env *e, int i) {
    rl_buf b, en;
    rl__tuple_packer pk;
    rl_slice p = rl_store_prefix(e->s);
    rl__buf_init(&b);
    rl__buf_init(&en);
    rl__buf_append(&b, p.data, p.len);
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_int(&pk, 1);
    rl__tuple_pack_int(&pk, e->r[i].id);
    rl__buf_append(&en, b.data, b.len);
    rl__buf_append_byte(&en, 0xff);
    rl_txn *t = qt_begin(e);
    ASSERT_OK(rl_txn_clear_range(t, b.data, b.len, en.data, en.len));
    qt_commit(t);
    rl__buf_release(&b);
    rl__buf_release(&en);
    e->r[i].present = 0;
}

/* ---- The model ------------------------------------------------------------------------- */

typedef struct {
    int index;  /* 0: price_idx, 1: cust_price */
    int has_eq; /* cust_price: customer == eq_cust */
    int eq_cust;
    int has_low, low_excl;
    int64_t low;
    int has_high, high_excl;
    int64_t high;
    int reverse;
    int skip;
} qt_query;

__attribute__((unused)) static const char *qt_index_name(const qt_query *q) {
    return q->index ? "cust_price" : "price_idx";
}

/* Sort key comparison: index values then primary key. */
__attribute__((unused)) static int qt_cmp(const qt_rec *a, const qt_rec *b, int index) {
    if (index == 1 && a->cust != b->cust) return a->cust < b->cust ? -1 : 1;
    if (a->price != b->price) return a->price < b->price ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int qt_sort_index;
__attribute__((unused)) static int qt_sort_cmp(const void *x, const void *y) {
    return qt_cmp(*(const qt_rec *const *)x, *(const qt_rec *const *)y, qt_sort_index);
}

/* The rows of q in order (skip applied; orphans included: the caller filters). Returns n. */
__attribute__((unused)) static int qt_model(const qt_env *e, const qt_query *q, const qt_rec **out) {
    int n = 0;
    for (int i = 0; i < e->n; i++) {
        const qt_rec *r = &e->r[i];
        /* Without an equality prefix on cust_price, bounds apply to the customer column:
         * the tests only bound price_idx, or cust_price with an equality prefix. */
        if (q->index == 1 && q->has_eq && r->cust != q->eq_cust) continue;
        if (q->has_low && (q->low_excl ? r->price <= q->low : r->price < q->low)) continue;
        if (q->has_high && (q->high_excl ? r->price >= q->high : r->price > q->high)) continue;
        out[n++] = r;
    }
    qt_sort_index = q->index;
    qsort(out, (size_t)n, sizeof *out, qt_sort_cmp);
    if (q->reverse)
        for (int i = 0; i < n / 2; i++) {
            const qt_rec *t = out[i];
            out[i] = out[n - 1 - i];
            out[n - 1 - i] = t;
        }
    int s = q->skip < n ? q->skip : n;
    memmove(out, out + s, (size_t)(n - s) * sizeof *out);
    return n - s;
}

/* Packed (v,) / ("c<k>",) into buf (static storage per slot). */
__attribute__((unused)) static size_t qt_pack_int(uint8_t *o, int64_t v) {
    rl_buf b;
    rl__tuple_packer pk;
    rl__buf_init(&b);
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_int(&pk, v);
    memcpy(o, b.data, b.len);
    size_t n = b.len;
    rl__buf_release(&b);
    return n;
}

__attribute__((unused)) static size_t qt_pack_cust(uint8_t *o, int cust) {
    char s[16];
    int l = snprintf(s, sizeof s, "c%d", cust);
    rl_buf b;
    rl__tuple_packer pk;
    rl__buf_init(&b);
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_string(&pk, s, (size_t)l);
    memcpy(o, b.data, b.len);
    size_t n = b.len;
    rl__buf_release(&b);
    return n;
}

/* Fill opts from q; the bound bytes live in bufs (3 x 32 bytes). */
__attribute__((unused)) static void qt_options(const qt_query *q, rl_query_options *o, uint8_t bufs[3][32]) {
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    if (q->index == 1 && q->has_eq) {
        o->eq = bufs[0];
        o->eq_len = qt_pack_cust(bufs[0], q->eq_cust);
    }
    if (q->has_low) {
        o->low = bufs[1];
        o->low_len = qt_pack_int(bufs[1], q->low);
        o->low_exclusive = q->low_excl;
    }
    if (q->has_high) {
        o->high = bufs[2];
        o->high_len = qt_pack_int(bufs[2], q->high);
        o->high_exclusive = q->high_excl;
    }
    o->reverse = q->reverse;
    o->skip = q->skip;
}

/* Check one returned row against the model's record r. */
__attribute__((unused)) static void qt_check_row(const rl_query_row *row, const qt_rec *r) {
    uint8_t pk[16];
    size_t pkl = qt_pack_int(pk, r->id);
    ASSERT_MEM_EQ(row->pk, row->pk_len, pk, pkl);
    if (!r->present) {
        ASSERT_NULL(row->record);
        return;
    }
    ASSERT_NOT_NULL(row->record);
    const Reclayer__Order *o = (const Reclayer__Order *)row->record->msg;
    if (o->order_id != r->id || o->price != r->price)
        fail_msg("row record (%lld, %lld) != model (%lld, %lld)", (long long)o->order_id, (long long)o->price,
                 (long long)r->id, (long long)r->price);
    ASSERT_EQ(o->has_padding ? o->padding.len : 0, r->pad);
    ASSERT_EQ(row->record->n_chunks, r->pad > 100000 ? 2 : 0);
    ASSERT_TRUE(row->record->has_version);
}

/* Read every row of c, checking each against the model: the rows must be want[*got],
 * want[*got + 1], ... (at most n_want in all; one more fails the test). *got counts the rows
 * read. Returns the cursor's final code (RL_OK at the end, or its error). */
__attribute__((unused)) static int qt_drain(rl_cursor *c, const qt_rec *const *want, int n_want, int *got) {
    const rl_query_row *row;
    int rc;
    while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) {
        if (*got >= n_want) fail_msg("more rows than the model's %d", n_want);
        qt_check_row(row, want[*got]);
        (*got)++;
    }
    return rc;
}

#endif
