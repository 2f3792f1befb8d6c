/* test_check.c — record layer, part 3: the integrity checker. A clean store reports
 * integrity_ok = true; every defect, made either by rl_store_inject_defect or by raw KV writes
 * built by hand here, is reported with its kind, key and fixed message.
 *
 * Test IDs: record_4_*.
 */
#include <stdlib.h>

#include "test.h"

#include "order.pb-c.h"
#include "record/record_int.h"
#include "app/tool.h"

static const uint8_t P[] = {0x02, 'c', 'h', 'k', 0x00};

static size_t enc_int(uint8_t *o, int64_t v) {
    uint64_t m = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    int n = 0;
    for (uint64_t t = m; t; t >>= 8) n++;
    if (v < 0) m = ~m;
    o[0] = (uint8_t)(v < 0 ? 0x14 - n : 0x14 + n);
    for (int i = 0; i < n; i++) o[1 + i] = (uint8_t)(m >> (8 * (n - 1 - i)));
    return (size_t)n + 1;
}

typedef struct {
    rl_db *db;
    rl_metadata *md;
    rl_store *s;
} fixture;

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

/* A store with 8 orders: ids 0..7, price 10*id; ids 3 and 5 are split (250,000 bytes). */
static void setup(fixture *fx, uint32_t flags) {
    ASSERT_OK(rl_test_db_open(rl_test_url(), NULL, &fx->db));
    { /* Start empty whatever the backend (a file: database outlives a test). */
        rl_txn *t0 = begin(fx->db);
        ASSERT_OK(rl_txn_clear_range(t0, "", 0, "\xff", 1));
        commit(t0);
    }
    ASSERT_OK(rl__order_metadata(&fx->md));
    ASSERT_OK(rl_store_new(fx->md, P, sizeof P, flags, &fx->s));
    uint8_t *pad = calloc(1, 250000);
    rl_txn *t = begin(fx->db);
    ASSERT_OK(rl_store_open(fx->s, t));
    for (int i = 0; i < 8; i++) {
        Reclayer__Order o = RECLAYER__ORDER__INIT;
        o.has_order_id = 1, o.order_id = i;
        o.has_price = 1, o.price = 10 * i;
        if (i == 3 || i == 5) o.has_padding = 1, o.padding.data = pad, o.padding.len = 250000;
        ASSERT_OK(rl_store_save(fx->s, t, &o.base, NULL));
    }
    commit(t);
    free(pad);
}

static void teardown(fixture *fx) {
    rl_store_free(fx->s);
    rl_metadata_free(fx->md);
    rl_db_close(fx->db);
}

static void check(fixture *fx, rl_check_report *r) {
    rl_txn *t = begin(fx->db);
    ASSERT_OK(rl_store_check(fx->s, t, r));
    rl_txn_free(t);
}

/* The report must hold exactly these (kind, key, message) defects, in any order. */
static void expect(const rl_check_report *r, int n, const char *const want[][3]) {
    if (r->n_defects != n) {
        rl_check_report_print(r, stdout);
        fail_msg("%d defects, expected %d", r->n_defects, n);
    }
    for (int i = 0; i < n; i++) {
        int hit = 0;
        for (int j = 0; j < r->n_defects; j++)
            if (!strcmp(r->defects[j].kind, want[i][0]) && !strcmp(r->defects[j].key, want[i][1]) &&
                !strcmp(r->defects[j].message, want[i][2]))
                hit = 1;
        if (!hit) {
            rl_check_report_print(r, stdout);
            fail_msg("missing defect %s key=%s %s", want[i][0], want[i][1], want[i][2]);
        }
    }
}

static void inject(fixture *fx, int64_t id, rl_defect_kind kind, int flags, int want_rc) {
    uint8_t pk[16];
    size_t n = enc_int(pk, id);
    rl_txn *t = begin(fx->db);
    ASSERT_RC(rl_store_inject_defect(fx->s, t, pk, n, kind, flags), want_rc);
    if (want_rc == RL_OK) commit(t);
    else rl_txn_free(t);
}

static void raw_set(fixture *fx, const uint8_t *k, size_t kl, const void *v, size_t vl) {
    rl_txn *t = begin(fx->db);
    ASSERT_OK(rl_txn_set(t, k, kl, v, vl));
    commit(t);
}

static void raw_clear(fixture *fx, const uint8_t *k, size_t kl) {
    rl_txn *t = begin(fx->db);
    ASSERT_OK(rl_txn_clear(t, k, kl));
    commit(t);
}

static size_t rec_key(uint8_t *o, int64_t pk, int64_t suffix) {
    size_t n = sizeof P;
    memcpy(o, P, n);
    n += enc_int(o + n, 1);
    n += enc_int(o + n, pk);
    n += enc_int(o + n, suffix);
    return n;
}

static size_t idx_key(uint8_t *o, int64_t price, int64_t pk) {
    size_t n = sizeof P;
    memcpy(o, P, n);
    n += enc_int(o + n, 2);
    memcpy(o + n, "\x02price_idx\x00", 11);
    n += 11;
    n += enc_int(o + n, price);
    n += enc_int(o + n, pk);
    return n;
}

TEST(record_4_1_clean_store) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS);
    rl_check_report r;
    check(&fx, &r);
    ASSERT_EQ(r.n_defects, 0);
    ASSERT_EQ(r.records, 8);
    ASSERT_EQ(r.index_entries, 8);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rl_check_report_print(&r, f);
    fclose(f);
    ASSERT_TRUE(strstr(text, "integrity_ok = true\n") != NULL);
    free(text);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_2_delete_chunk) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_ALLOW_DEFECTS);
    inject(&fx, 3, RL_DEFECT_DELETE_CHUNK, 0, RL_OK);
    rl_check_report r;
    check(&fx, &r);
    static const char *const want[][3] = {
        {"delete-chunk", "(1, 3, 2)", "Found split record without start"},
        {"orphan-index-entry", "(2, \"price_idx\", 30, 3)", "Record not found for index entry"},
    };
    expect(&r, 2, want);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    rl_check_report_print(&r, f);
    fclose(f);
    ASSERT_TRUE(strstr(text, "defect delete-chunk key=(1, 3, 2) Found split record without start\n") != NULL);
    ASSERT_TRUE(strstr(text, "integrity_ok = false\n") != NULL);
    free(text);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_3_stray_suffix) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_ALLOW_DEFECTS);
    inject(&fx, 4, RL_DEFECT_STRAY_SUFFIX, 0, RL_OK);
    rl_check_report r;
    check(&fx, &r);
    static const char *const want[][3] = {
        {"stray-suffix", "(1, 4, \"stray\") (not a number)", "Invalid record split number"},
    };
    expect(&r, 1, want);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_4_version_key) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS | RL_STORE_ALLOW_DEFECTS);
    inject(&fx, 5, RL_DEFECT_VERSION_KEY, 0, RL_OK);
    rl_check_report r;
    check(&fx, &r);
    static const char *const want[][3] = {
        {"version-key", "(1, 5, -1)", "Found record version without record"},
        {"orphan-index-entry", "(2, \"price_idx\", 50, 5)", "Record not found for index entry"},
    };
    expect(&r, 2, want);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_5_split_order_and_multiple_unsplit) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS);
    uint8_t k[64];
    raw_clear(&fx, k, rec_key(k, 3, 2));       /* gap: chunks 1, 3 */
    raw_set(&fx, k, rec_key(k, 5, 0), "x", 1); /* suffix 0 beside chunks 1..3 */
    rl_check_report r;
    check(&fx, &r);
    static const char *const want[][3] = {
        {"split-order", "(1, 3, 3)", "Split record segments out of order"},
        {"orphan-index-entry", "(2, \"price_idx\", 30, 3)", "Record not found for index entry"},
        {"multiple-unsplit", "(1, 5, 1)", "More than one unsplit value."},
        {"orphan-index-entry", "(2, \"price_idx\", 50, 5)", "Record not found for index entry"},
    };
    expect(&r, 4, want);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_6_unparsable_record) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS);
    uint8_t k[64];
    raw_set(&fx, k, rec_key(&k[0], 1, 0), "\x0a\x03\xff\xff\xff", 5);
    rl_check_report r;
    check(&fx, &r);
    static const char *const want[][3] = {
        {"unparsable-record", "(1, 1, 0) (record (1,): record of type reclayer.Order does not parse)",
         "Record does not parse"},
        {"orphan-index-entry", "(2, \"price_idx\", 10, 1)", "Record not found for index entry"},
    };
    expect(&r, 2, want);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_7_index_defects) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS);
    uint8_t k[64];
    raw_clear(&fx, k, idx_key(k, 20, 2));       /* record 2 misses its entry */
    raw_set(&fx, k, idx_key(k, 99, 4), "", 0);  /* record 4 does not produce this one */
    raw_set(&fx, k, idx_key(k, 77, 77), "", 0); /* no record 77 */
    rl_check_report r;
    check(&fx, &r);
    static const char *const want[][3] = {
        {"missing-index-entry", "(2, \"price_idx\", 20, 2)", "Index entry missing for record"},
        {"stale-index-entry", "(2, \"price_idx\", 99, 4)", "Index entry does not match its record"},
        {"orphan-index-entry", "(2, \"price_idx\", 77, 77)", "Record not found for index entry"},
    };
    expect(&r, 3, want);
    ASSERT_EQ(r.index_entries, 9);
    rl_check_report_release(&r);
    teardown(&fx);
}

TEST(record_4_8_inject_needs_permission) {
    fixture fx;
    setup(&fx, RL_STORE_SPLIT_LONG_RECORDS);
    inject(&fx, 3, RL_DEFECT_DELETE_CHUNK, 0, RL_E_CLIENT_INVALID_OPERATION);
    inject(&fx, 99, RL_DEFECT_DELETE_CHUNK, RL_DEFECT_FORCE, RL_E_NOT_FOUND);
    rl_check_report r;
    check(&fx, &r);
    ASSERT_EQ(r.n_defects, 0);
    rl_check_report_release(&r);
    inject(&fx, 2, RL_DEFECT_DELETE_CHUNK, RL_DEFECT_FORCE, RL_OK); /* unsplit: clears suffix 0 */
    check(&fx, &r);
    static const char *const want[][3] = {
        {"orphan-index-entry", "(2, \"price_idx\", 20, 2)", "Record not found for index entry"},
    };
    expect(&r, 1, want);
    rl_check_report_release(&r);
    teardown(&fx);
}

RL_TEST_MAIN(T(record_4_1_clean_store), T(record_4_2_delete_chunk), T(record_4_3_stray_suffix),
             T(record_4_4_version_key), T(record_4_5_split_order_and_multiple_unsplit), T(record_4_6_unparsable_record),
             T(record_4_7_index_defects), T(record_4_8_inject_needs_permission))
