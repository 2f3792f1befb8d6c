/* test_cursor.c — query_2: cursor behaviours other than plain equivalence: skip pushdown seen
 * through the counters, each out-of-band limit with its reason and a lossless resume, the
 * fallback of remote fetch (2039 before any row and after some rows, an orphan under ERROR),
 * orphan behaviours for every method, refused continuations, bad options.
 *
 * Test IDs: query_2_*. Seeded by rl_test_seed() (printed).
 */
#include <inttypes.h>

#include "qtest.h"
#include "kv/kv_stats.h"
#include "query/query_int.h"
#include "reclayer/alloc.h"

static const rl_fetch_method METHODS[] = {RL_FETCH_SCAN_AND_FETCH, RL_FETCH_USE_REMOTE_FETCH,
                                          RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK};

static rl_query_options base_opts(rl_fetch_method m, int reverse) {
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.fetch = m;
    o.reverse = reverse;
    return o;
}

static uint8_t *copy_cont(rl_cursor *c, size_t *len) {
    const uint8_t *p;
    ASSERT_OK(rl_cursor_continuation(c, &p, len));
    if (!p) return NULL;
    uint8_t *o = malloc(*len);
    memcpy(o, p, *len);
    return o;
}

/* query_2_1: skip is pushed down: entries read and records read equal the rows returned. */
TEST(query_2_1_skip_pushdown) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q21");
    qt_load(&e, &rs, 40, 30, 2);
    for (int mi = 0; mi < 3; mi++)
        for (int rev = 0; rev < 2; rev++)
            for (int lim = 0; lim <= 5; lim += 5) {
                qt_query q = {0};
                const qt_rec *want[QT_MAX];
                q.reverse = rev;
                q.skip = 3;
                int n_want = qt_model(&e, &q, want), got = 0;
                if (lim && n_want > lim) n_want = lim;
                rl_query_options o = base_opts(METHODS[mi], rev);
                o.skip = 3;
                o.limit = lim;
                rl_txn *t = qt_begin(&e);
                rl_cursor *c;
                ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
                ASSERT_OK(qt_drain(c, want, n_want, &got));
                ASSERT_EQ(got, n_want);
                rl_query_counters k;
                rl_cursor_get_counters(c, &k);
                ASSERT_EQ(k.index_entries_read, (uint64_t)got);
                ASSERT_EQ(k.records_returned, (uint64_t)got);
                if (METHODS[mi] == RL_FETCH_SCAN_AND_FETCH) {
                    ASSERT_EQ(k.record_loads, (uint64_t)got); /* records read by the client */
                    ASSERT_EQ(k.reads_mapped_range, 0);
                } else {
                    ASSERT_EQ(k.record_loads, 0);
                    ASSERT_EQ(k.secondary_local + k.secondary_remote + k.secondary_unknown,
                              (uint64_t)got); /* by the server (unknown where: fdb:) */
                    ASSERT_TRUE(k.reads_mapped_range >= 1);
                    ASSERT_EQ(k.fallbacks, 0);
                }
                ASSERT_TRUE(k.kv_bytes_received > 0);
                /* allocs counts the cursor's own: a cursor opened while c is alive cannot take
                 * the parked one (cursor.c invariant 11), so it allocates at least itself. */
                rl_cursor *c2;
                ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c2));
                rl_cursor_get_counters(c2, &k);
                ASSERT_TRUE(k.allocs > 0);
                rl_cursor_free(c2);
                rl_cursor_free(c);
                qt_commit(t);
            }
    qt_close(&e);
}

static uint64_t fake_now;
static uint64_t fake_clock(void *ud) {
    (void)ud;
    fake_now += 1000000; /* every reading of the clock is 1 ms later */
    return fake_now;
}

/* Run all rows of price_idx page by page with one out-of-band limit set by `set`; each page must
 * end with `reason` (or be the last) and the pages together must equal the model. */
static void limit_case(qt_env *e, rl_fetch_method m, int rev, void (*set)(rl_query_options *),
                       rl_no_next_reason reason) {
    qt_query q = {0};
    const qt_rec *want[QT_MAX];
    q.reverse = rev;
    int n_want = qt_model(e, &q, want), got = 0, pages = 0, limited = 0;
    uint8_t *cont = NULL;
    size_t cl = 0;
    rl_txn *t = qt_begin(e);
    for (;;) {
        rl_query_options o = base_opts(m, rev);
        set(&o);
        o.continuation = cont;
        o.continuation_len = cl;
        rl_cursor *c;
        ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", &o, &c));
        int before = got;
        ASSERT_OK(qt_drain(c, want, n_want, &got));
        rl_no_next_reason why = rl_cursor_no_next_reason(c);
        if (why != RL_NO_NEXT_SOURCE_EXHAUSTED) {
            ASSERT_EQ(why, reason);
            ASSERT_TRUE(got > before); /* the free initial pass: progress on every page */
            limited++;
        }
        free(cont);
        cont = copy_cont(c, &cl);
        rl_cursor_free(c);
        pages++;
        if (why == RL_NO_NEXT_SOURCE_EXHAUSTED) break;
        ASSERT_NOT_NULL(cont);
        ASSERT_TRUE(pages < 1000);
    }
    ASSERT_EQ(got, n_want);
    ASSERT_TRUE(limited > 0);
    free(cont);
    qt_commit(t);
}

static void set_scan(rl_query_options *o) { o->scan_limit = 4; }
static void set_bytes(rl_query_options *o) { o->byte_limit = 300; }
static void set_time(rl_query_options *o) {
    o->time_limit_ms = 5;
    o->clock_ns = fake_clock;
}
static void set_rows(rl_query_options *o) { o->limit = 7; }

/* query_2_2: each limit stops with its reason; continuations resume without loss or repetition. */
TEST(query_2_2_limits) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q22");
    qt_load(&e, &rs, 45, 20, 2);
    for (int mi = 0; mi < 3; mi++)
        for (int rev = 0; rev < 2; rev++) {
            limit_case(&e, METHODS[mi], rev, set_scan, RL_NO_NEXT_SCAN_LIMIT_REACHED);
            limit_case(&e, METHODS[mi], rev, set_bytes, RL_NO_NEXT_BYTE_LIMIT_REACHED);
            limit_case(&e, METHODS[mi], rev, set_time, RL_NO_NEXT_TIME_LIMIT_REACHED);
            limit_case(&e, METHODS[mi], rev, set_rows, RL_NO_NEXT_RETURN_LIMIT_REACHED);
        }
    /* Exactness of the scan limit: 4 entries per page. */
    rl_query_options o = base_opts(RL_FETCH_SCAN_AND_FETCH, 0);
    o.scan_limit = 4;
    rl_txn *t = qt_begin(&e);
    rl_cursor *c;
    const rl_query_row *row;
    int n = 0;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    while (rl_cursor_next(c, &row) == RL_OK && row) n++;
    ASSERT_EQ(n, 4);
    ASSERT_EQ(rl_cursor_no_next_reason(c), RL_NO_NEXT_SCAN_LIMIT_REACHED);
    rl_cursor_free(c);
    qt_commit(t);
    qt_close(&e);
}

/* Rewrite the record of e->r[i] with its own bytes in t: a write inside the mapped ranges that
 * changes nothing a scan sees. */
static void touch_record(qt_env *e, rl_txn *t, int64_t id) {
    rl_buf k;
    rl__tuple_packer pk;
    rl_slice p = rl_store_prefix(e->s);
    rl__buf_init(&k);
    rl__buf_append(&k, p.data, p.len);
    rl__tuple_packer_init(&pk, &k);
    rl__tuple_pack_int(&pk, 1);
    rl__tuple_pack_int(&pk, id);
    rl__tuple_pack_int(&pk, 0);
    rl_future *f = rl_txn_get(t, k.data, k.len, 0);
    int present, vl;
    const uint8_t *v;
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_value(f, &present, &v, &vl));
    ASSERT_TRUE(present);
    ASSERT_OK(rl_txn_set(t, k.data, k.len, v, (size_t)vl));
    rl_future_free(f);
    rl__buf_release(&k);
}

/* query_2_3: remote fetch fails with 2039 when the transaction wrote inside the ranges, before
 * any row; USE_REMOTE_FETCH fails, the fallback returns every row once, and so does ADAPTIVE
 * (its remote page resumed with SCAN_AND_FETCH). */
TEST(query_2_3_fallback_before_any_row) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q23");
    qt_load(&e, &rs, 30, 10, 0); /* small records: suffix 0 holds each */
    for (int rev = 0; rev < 2; rev++) {
        qt_query q = {0};
        const qt_rec *want[QT_MAX];
        q.reverse = rev;
        int n_want = qt_model(&e, &q, want), got = 0;
        rl_txn *t = qt_begin(&e);
        touch_record(&e, t, want[n_want / 2]->id);
        rl_query_options o = base_opts(RL_FETCH_USE_REMOTE_FETCH, rev);
        rl_cursor *c;
        const rl_query_row *row;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
        ASSERT_RC(rl_cursor_next(c, &row), RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES);
        ASSERT_RC(rl_cursor_next(c, &row), RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES); /* sticky */
        rl_cursor_free(c);
        o.fetch = RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
        ASSERT_OK(qt_drain(c, want, n_want, &got));
        ASSERT_EQ(got, n_want);
        rl_query_counters k;
        rl_cursor_get_counters(c, &k);
        ASSERT_EQ(k.fallbacks, 1);
        ASSERT_EQ(k.fallback_error, RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES);
        ASSERT_EQ(k.rows_returned, (uint64_t)n_want);
        rl_cursor_free(c);
        /* With skip, the fallback keeps the skip (no row was returned before it). */
        o.skip = 4;
        got = 0;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
        ASSERT_OK(qt_drain(c, want + 4, n_want - 4, &got));
        ASSERT_EQ(got, n_want - 4);
        rl_cursor_free(c);
        /* ADAPTIVE in the test mode (one page of 100 entries: a remote one): the page meets the
         * write (2039) and is resumed with SCAN_AND_FETCH; no error, every row. */
        rl__query_adaptive_test(100); /* RL_QUERY_ADAPTIVE_TEST=alternate:100 */
        for (int skip = 0; skip <= 4; skip += 4) {
            o.fetch = RL_FETCH_ADAPTIVE;
            o.skip = skip;
            got = 0;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            ASSERT_OK(qt_drain(c, want + skip, n_want - skip, &got));
            ASSERT_EQ(got, n_want - skip);
            rl_cursor_get_counters(c, &k);
            ASSERT_EQ(k.fallbacks, 1);
            ASSERT_EQ(k.fallback_error, RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES);
            ASSERT_EQ(k.pages_remote_fetch, 1);
            ASSERT_EQ(k.pages_scan_and_fetch, 1);
            rl_cursor_free(c);
        }
        rl__query_adaptive_test(0);
        rl_txn_free(t);
    }
    qt_close(&e);
}

/* query_2_4: 2039 after some rows (a write made between rows, beyond the page already read):
 * the fallback returns exactly the remaining rows. */
TEST(query_2_4_fallback_after_rows) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q24");
    qt_load(&e, &rs, 30, 10, 0);
    for (int rev = 0; rev < 2; rev++)
        for (int mi = 1; mi < 3; mi++) {
            qt_query q = {0};
            const qt_rec *want[QT_MAX];
            q.reverse = rev;
            q.skip = 1;
            int n_want = qt_model(&e, &q, want), got = 0;
            rl_txn *t = qt_begin(&e);
            rl_query_options o = base_opts(METHODS[mi], rev);
            o.index_batch = 3;
            o.skip = 1;
            rl_cursor *c;
            const rl_query_row *row;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            for (int i = 0; i < 4; i++) {
                ASSERT_OK(rl_cursor_next(c, &row));
                ASSERT_NOT_NULL(row);
                qt_check_row(row, want[got++]);
            }
            touch_record(&e, t, want[7]->id); /* read by the third request (rows 6..8) */
            int rc = qt_drain(c, want, n_want, &got);
            rl_query_counters k;
            rl_cursor_get_counters(c, &k);
            if (METHODS[mi] == RL_FETCH_USE_REMOTE_FETCH) {
                ASSERT_RC(rc, RL_E_GET_MAPPED_RANGE_READS_YOUR_WRITES);
                ASSERT_EQ(got, 6); /* the rows of the second request, then the failure */
            } else {
                ASSERT_OK(rc);
                ASSERT_EQ(got, n_want);
                ASSERT_EQ(k.fallbacks, 1);
                ASSERT_EQ(k.rows_returned, (uint64_t)n_want);
                ASSERT_EQ(k.record_loads, (uint64_t)(n_want - 6)); /* only the remaining rows */
            }
            rl_cursor_free(c);
            rl_txn_free(t);
        }
    qt_close(&e);
}

/* query_2_5: orphans under ERROR, SKIP and RETURN, the same for every method; under ERROR the
 * fallback method fails twice: RL_E_FALLBACK_FAILED with the orphan as its cause. */
TEST(query_2_5_orphans) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q25");
    qt_load(&e, &rs, 30, 10, 3);
    qt_query q = {0};
    const qt_rec *want[QT_MAX];
    int n_all = qt_model(&e, &q, want);
    int victim = -1;
    for (int i = 0; i < e.n; i++)
        if (want[n_all / 2] == &e.r[i]) victim = i;
    qt_orphan(&e, victim);
    for (int rev = 0; rev < 2; rev++)
        for (int mi = 0; mi < 3; mi++) {
            q.reverse = rev;
            int n_want = qt_model(&e, &q, want), pos = -1;
            for (int i = 0; i < n_want; i++)
                if (!want[i]->present) pos = i;
            ASSERT_TRUE(pos >= 0);
            rl_txn *t = qt_begin(&e);
            rl_cursor *c;
            int got = 0;
            /* RETURN: every entry, the orphan with no record. */
            rl_query_options o = base_opts(METHODS[mi], rev);
            o.orphans = RL_ORPHAN_RETURN;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            ASSERT_OK(qt_drain(c, want, n_want, &got));
            ASSERT_EQ(got, n_want);
            rl_query_counters k;
            rl_cursor_get_counters(c, &k);
            ASSERT_EQ(k.orphans, 1);
            ASSERT_EQ(k.records_returned, (uint64_t)n_want - 1);
            rl_cursor_free(c);
            /* SKIP: every entry but the orphan. */
            const qt_rec *kept[QT_MAX];
            int nk = 0;
            for (int i = 0; i < n_want; i++)
                if (i != pos) kept[nk++] = want[i];
            o.orphans = RL_ORPHAN_SKIP;
            got = 0;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            ASSERT_OK(qt_drain(c, kept, nk, &got));
            ASSERT_EQ(got, nk);
            rl_cursor_free(c);
            /* ERROR: the rows before it, then the error naming the entry. */
            o.orphans = RL_ORPHAN_ERROR;
            got = 0;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            int rc = qt_drain(c, want, pos, &got);
            ASSERT_EQ(got, pos);
            const rl_query_row *row;
            if (METHODS[mi] == RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK) {
                ASSERT_RC(rc, RL_E_FALLBACK_FAILED);
                ASSERT_EQ(rl_cursor_error_cause(c), RL_E_INDEX_ORPHAN_ENTRY);
                rl_cursor_get_counters(c, &k);
                ASSERT_EQ(k.fallback_error, RL_E_INDEX_ORPHAN_ENTRY);
            } else {
                ASSERT_RC(rc, RL_E_INDEX_ORPHAN_ENTRY);
            }
            char idtext[32];
            snprintf(idtext, sizeof idtext, "%lld)", (long long)want[pos]->id);
            if (!strstr(rl_cursor_errmsg(c), "price_idx") || !strstr(rl_cursor_errmsg(c), idtext))
                fail_msg("detail does not name the entry: %s", rl_cursor_errmsg(c));
            ASSERT_RC(rl_cursor_next(c, &row), rc); /* sticky */
            rl_cursor_free(c);
            qt_commit(t);
        }
    qt_close(&e);
}

/* query_2_6: continuations used with other bounds, another index, the other direction, or
 * tampered with or truncated are refused with RL_E_CONTINUATION_INVALID. */
TEST(query_2_6_continuations_refused) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q26");
    qt_load(&e, &rs, 20, 10, 0);
    rl_txn *t = qt_begin(&e);
    uint8_t lo[16];
    rl_query_options o = base_opts(RL_FETCH_SCAN_AND_FETCH, 0);
    o.low = lo;
    o.low_len = qt_pack_int(lo, 0);
    o.limit = 3;
    rl_cursor *c;
    const rl_query_row *row;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    for (int i = 0; i < 3; i++) {
        ASSERT_OK(rl_cursor_next(c, &row));
        ASSERT_NOT_NULL(row);
    }
    size_t cl;
    uint8_t *cont = copy_cont(c, &cl);
    ASSERT_NOT_NULL(cont);
    rl_cursor_free(c);
    /* Valid with the same bounds, any method. */
    o.continuation = cont;
    o.continuation_len = cl;
    for (int mi = 0; mi < 3; mi++) {
        o.fetch = METHODS[mi];
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
        rl_cursor_free(c);
    }
    o.fetch = RL_FETCH_SCAN_AND_FETCH;
    /* Every flipped bit of every byte, every truncation, one extra byte. */
    uint8_t *bad = malloc(cl + 1);
    for (size_t i = 0; i < cl; i++)
        for (int b = 0; b < 8; b++) {
            memcpy(bad, cont, cl);
            bad[i] ^= (uint8_t)(1u << b);
            o.continuation = bad;
            ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_CONTINUATION_INVALID);
            ASSERT_NULL(c);
        }
    for (size_t n = 0; n < cl; n++) {
        memcpy(bad, cont, cl);
        o.continuation = bad;
        o.continuation_len = n;
        ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), n ? RL_E_CONTINUATION_INVALID : RL_OK);
        rl_cursor_free(c);
    }
    memcpy(bad, cont, cl);
    bad[cl] = 0;
    o.continuation_len = cl + 1;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_CONTINUATION_INVALID);
    o.continuation = cont;
    o.continuation_len = cl;
    /* Other bounds, other direction, other index. */
    o.low_exclusive = 1;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_CONTINUATION_INVALID);
    if (!strstr(rl_store_errmsg(e.s), "another scan")) fail_msg("detail: %s", rl_store_errmsg(e.s));
    o.low_exclusive = 0;
    o.reverse = 1;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_CONTINUATION_INVALID);
    o.reverse = 0;
    ASSERT_RC(rl_cursor_open(e.s, t, "cust_price", &o, &c), RL_E_CONTINUATION_INVALID);
    o.low = NULL, o.low_len = 0;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_CONTINUATION_INVALID);
    free(bad);
    free(cont);
    qt_commit(t);
    qt_close(&e);
}

/* query_2_7: bad options: an unknown fetch method, unknown index, bounds that are not tuples,
 * negative limits; snapshot reads make remote fetch unsupported (and the fallback take over;
 * ADAPTIVE runs SCAN_AND_FETCH). */
TEST(query_2_7_options) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q27");
    qt_load(&e, &rs, 10, 5, 0);
    rl_txn *t = qt_begin(&e);
    rl_cursor *c = NULL;
    const rl_query_row *row;
    rl_query_options o = base_opts(RL_FETCH_ADAPTIVE, 0);
    o.fetch = (rl_fetch_method)4;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    o = base_opts(RL_FETCH_SCAN_AND_FETCH, 0);
    ASSERT_RC(rl_cursor_open(e.s, t, "nope", &o, &c), RL_E_INDEX_UNKNOWN);
    uint8_t junk[] = {0x15};
    o.low = junk, o.low_len = 1;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    o = base_opts(RL_FETCH_SCAN_AND_FETCH, 0);
    o.limit = -1;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    o = base_opts(RL_FETCH_SCAN_AND_FETCH, 0);
    o.size = 4;
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    /* NULL options: the whole index. */
    int n = 0;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", NULL, &c));
    while (rl_cursor_next(c, &row) == RL_OK && row) n++;
    ASSERT_EQ(n, 10);
    rl_cursor_free(c);
    /* Snapshot. */
    o = base_opts(RL_FETCH_USE_REMOTE_FETCH, 0);
    o.snapshot = 1;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    ASSERT_RC(rl_cursor_next(c, &row), RL_E_UNSUPPORTED_OPERATION);
    rl_cursor_free(c);
    o.fetch = RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK;
    n = 0;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    while (rl_cursor_next(c, &row) == RL_OK && row) n++;
    ASSERT_EQ(n, 10);
    rl_query_counters k;
    rl_cursor_get_counters(c, &k);
    ASSERT_EQ(k.fallback_error, RL_E_UNSUPPORTED_OPERATION);
    rl_cursor_free(c);
    /* ADAPTIVE under snapshot: SCAN_AND_FETCH pages only, no error, and it says why. */
    o.fetch = RL_FETCH_ADAPTIVE;
    o.explain = 1;
    n = 0;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    while (rl_cursor_next(c, &row) == RL_OK && row) n++;
    ASSERT_EQ(n, 10);
    rl_cursor_get_counters(c, &k);
    ASSERT_EQ(k.pages_remote_fetch, 0);
    ASSERT_EQ(k.pages_scan_and_fetch, 1);
    ASSERT_EQ(k.reads_mapped_range, 0);
    ASSERT_NOT_NULL(strstr(rl_cursor_explain(c), "remote fetch cannot run here"));
    ASSERT_NOT_NULL(strstr(rl_cursor_explain(c), "-> SCAN_AND_FETCH"));
    rl_cursor_free(c);
    ASSERT_STR_EQ(rl_fetch_method_name(RL_FETCH_ADAPTIVE), "adaptive");
    ASSERT_STR_EQ(rl_fetch_method_name(RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK), "remote-fallback");
    ASSERT_STR_EQ(rl_no_next_reason_name(RL_NO_NEXT_BYTE_LIMIT_REACHED), "byte_limit_reached");
    qt_commit(t);
    qt_close(&e);
}

/* query_2_8: every allocation of open + a whole paged scan fails once, in turn, for every
 * method: the result is either the full answer or RL_E_OUT_OF_MEMORY (sticky), never a wrong
 * row, a crash or a leak (ASan). */
TEST(query_2_8_out_of_memory) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q28");
    qt_load(&e, &rs, 12, 5, 1);
    qt_query q = {0};
    const qt_rec *want[QT_MAX];
    int n_want = qt_model(&e, &q, want);
    uint8_t pks[QT_MAX][16];
    size_t pkl[QT_MAX];
    for (int i = 0; i < n_want; i++) pkl[i] = qt_pack_int(pks[i], want[i]->id);
    for (int mi = 0; mi < 3; mi++) {
        int finished = 0;
        for (long n = 0; !finished && n < 100000; n++) {
            rl_txn *t = qt_begin(&e);
            rl_query_options o = base_opts(METHODS[mi], 0);
            o.orphans = RL_ORPHAN_RETURN;
            o.index_batch = 4;
            rl_cursor *c = NULL;
            int got = 0;
            rl_alloc_fail_after(n);
            int rc = rl_cursor_open(e.s, t, "price_idx", &o, &c);
            if (rc == RL_OK) {
                /* Compare primary keys packed before the injection (the helpers allocate). */
                const rl_query_row *row;
                while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) {
                    ASSERT_TRUE(got < n_want);
                    ASSERT_MEM_EQ(row->pk, row->pk_len, pks[got], pkl[got]);
                    got++;
                }
                const uint8_t *cb;
                size_t cl;
                if (rc == RL_OK) rc = rl_cursor_continuation(c, &cb, &cl);
            }
            rl_alloc_fail_after(-1);
            if (rc == RL_OK) {
                ASSERT_EQ(got, n_want);
                finished = 1;
            } else if (rc == RL_E_RECORD_PARSE_FAILED || rc == RL_E_FALLBACK_FAILED) {
                /* protobuf-c's unpack returns NULL on OOM, which the record layer reports as a
                 * parse failure (a record-layer limitation, not the cursor's). */
                int cause = rc == RL_E_FALLBACK_FAILED ? rl_cursor_error_cause(c) : rc;
                if (cause != RL_E_OUT_OF_MEMORY && cause != RL_E_RECORD_PARSE_FAILED)
                    fail_msg("allocation %ld: fallback cause %s", n, rl_error_name(cause));
            } else if (rc != RL_E_OUT_OF_MEMORY) {
                fail_msg("allocation %ld: %s", n, rl_error_name(rc));
            }
            rl_cursor_free(c);
            rl_txn_free(t);
        }
        ASSERT_TRUE(finished);
    }
    qt_close(&e);
}

/* query_2_9: the --eq defect. The largest skip (RL_QUERY_MAX_SKIP) skips
 * everything with every method and direction and reports no corruption (skip 2147483647 used to
 * wrap the selector offset and read outside the index); one more is refused. Bounds naming more
 * columns than the entry has (price, order_id) are refused instead of returning nothing. */
TEST(query_2_9_skip_edge_and_bounds_count) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q29");
    qt_load(&e, &rs, 12, 5, 2);
    rl_txn *t = qt_begin(&e);
    rl_cursor *c = NULL;
    const rl_query_row *row;
    for (int mi = 0; mi < 3; mi++)
        for (int rev = 0; rev < 2; rev++) {
            rl_query_options o = base_opts(METHODS[mi], rev);
            o.skip = RL_QUERY_MAX_SKIP;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            ASSERT_OK(rl_cursor_next(c, &row));
            ASSERT_NULL(row);
            ASSERT_EQ(rl_cursor_no_next_reason(c), RL_NO_NEXT_SOURCE_EXHAUSTED);
            rl_cursor_free(c);
            o.skip = 11; /* one row left */
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            int n = 0;
            while (rl_cursor_next(c, &row) == RL_OK && row) n++;
            ASSERT_EQ(n, 1);
            rl_cursor_free(c);
            o.skip = RL_QUERY_MAX_SKIP + 1;
            ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
            ASSERT_NULL(c);
        }
    uint8_t eq[64];
    size_t n1 = qt_pack_int(eq, 3);
    size_t n2 = n1 + qt_pack_int(eq + n1, 4);
    size_t n3 = n2 + qt_pack_int(eq + n2, 5);
    uint8_t lo[16];
    size_t lol = qt_pack_int(lo, 0);
    rl_query_options o = base_opts(RL_FETCH_SCAN_AND_FETCH, 0);
    o.eq = eq, o.eq_len = n2; /* price and order_id: the whole entry, allowed */
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    rl_cursor_free(c);
    o.eq_len = n3; /* three values, two columns */
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_store_errmsg(e.s), "columns") != NULL);
    o.eq_len = n2, o.low = lo, o.low_len = lol; /* two eq values and a bound: three */
    ASSERT_RC(rl_cursor_open(e.s, t, "price_idx", &o, &c), RL_E_INVALID_ARGUMENT);
    o.eq_len = n1; /* one eq value and a bound: two, allowed */
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    rl_cursor_free(c);
    rl_txn_free(t);
    qt_close(&e);
}

/* query_2_10: ADAPTIVE on a local backend times a page as its span less the caller's time
 * between calls, estimated from a sample of those gaps (cursor.c page_span), so it reads the
 * clock for a few rows, not twice per row: a 200-row page counts its 200 gaps (one after each
 * row) and times between 200 / 32 and a quarter of them; a 1-row page has none. The rows are
 * the model's either way. A networked backend keeps timing every call (no such part). */
TEST(query_2_10_adaptive_local_page_time) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q210");
    qt_load(&e, &rs, 200, 1000, 0);
    const char *url = rl_test_url();
    int local = !strncmp(url, "mem:", 4) || !strncmp(url, "defer:", 6) || !strncmp(url, "file:", 5);
    for (int lim = 0; lim <= 1; lim++) {
        qt_query q = {0};
        const qt_rec *want[QT_MAX];
        int n_want = qt_model(&e, &q, want), got = 0;
        if (lim && n_want > lim) n_want = lim;
        rl_query_options o = base_opts(RL_FETCH_ADAPTIVE, 0);
        o.explain = 1;
        o.limit = lim;
        rl_txn *t = qt_begin(&e);
        rl_cursor *c;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
        ASSERT_OK(qt_drain(c, want, n_want, &got));
        ASSERT_EQ(got, n_want);
        const char *ex = rl_cursor_explain(c), *g = strstr(ex, "gaps timed");
        printf("%s", ex);
        ASSERT_NOT_NULL(strstr(ex, "; observed "));
        if (local) ASSERT_NOT_NULL(g);
        if (g) {
            const char *f = strstr(ex, ", from ");
            ASSERT_NOT_NULL(f);
            unsigned timed = 0, gaps = 0;
            ASSERT_EQ(sscanf(f, ", from %u of %u gaps timed", &timed, &gaps), 2);
            if (lim == 1) {
                ASSERT_EQ(gaps, 0); /* the page ended with its only row */
                ASSERT_EQ(timed, 0);
            } else {
                ASSERT_EQ(gaps, 200);
                ASSERT_TRUE(timed >= gaps / 32 && timed <= gaps / 4);
            }
        }
        rl_cursor_free(c);
        qt_commit(t);
    }
    qt_close(&e);
}

typedef struct {
    uint64_t decisions, explorations, observed, asked;
} model_counts;

static void count_model(rl__adaptive_model *m, void *ud) {
    model_counts *k = ud;
    k->decisions = m->decisions;
    k->explorations = m->explorations;
    k->asked = m->observe_asked;
    k->observed = 0;
    for (int i = 0; i < RL__ADAPTIVE_ALL_CLASSES; i++) k->observed += m->cls[i].observed[0] + m->cls[i].observed[1];
}

/* query_2_11: on a local backend an ADAPTIVE page is timed and observed exactly when the model asks
 * (rl__adaptive_decide's observe: warm-up, explorations, pages estimated at
 * RL__ADAPTIVE_OBSERVE_ALL_NS or more, and one decision in RL__ADAPTIVE_OBSERVE_EVERY; the rule
 * itself is adaptive-1.7's), so most limit-1 queries read no clock for the method; a networked
 * backend observes every page. The rows are the model's either way. How many pages the model asks
 * for depends on how fast the backend is (defer: or a sanitizer build calibrate a limit-1 page near
 * or above the bound), so the count is checked against what it asked, not against n / 8. */
TEST(query_2_11_adaptive_short_pages_sampled) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q211");
    qt_load(&e, &rs, 40, 1000, 0);
    rl__kv_locality loc;
    rl__db_locality(e.db, (const uint8_t *)"", 0, &loc);
    model_counts k0, k1;
    ASSERT_OK(rl__query_adaptive_with(e.db, count_model, &k0));
    const int n = 400;
    for (int i = 0; i <= n; i++) {
        qt_query q = {0};
        const qt_rec *want[QT_MAX];
        int n_want = qt_model(&e, &q, want), got = 0;
        if (n_want > 1) n_want = 1;
        rl_query_options o = base_opts(RL_FETCH_ADAPTIVE, 0);
        o.limit = 1;
        o.explain = i == n; /* the last one, after the count: its estimates */
        if (i == n) ASSERT_OK(rl__query_adaptive_with(e.db, count_model, &k1));
        rl_txn *t = qt_begin(&e);
        rl_cursor *c;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
        ASSERT_OK(qt_drain(c, want, n_want, &got));
        ASSERT_EQ(got, n_want);
        if (i == n) {
            const char *ex = strstr(rl_cursor_explain(c), "; SCAN_AND_FETCH ");
            double r0, f0, e0, r1, f1, e1;
            ASSERT_NOT_NULL(ex);
            ASSERT_EQ(sscanf(ex, "; SCAN_AND_FETCH %lf µs x %lf = %lf µs, USE_REMOTE_FETCH %lf µs x %lf = %lf µs", &r0,
                             &f0, &e0, &r1, &f1, &e1),
                      6);
            double chosen_us = e0 < e1 ? e0 : e1;
            uint64_t d = k1.decisions - k0.decisions, x = k1.explorations - k0.explorations;
            uint64_t ob = k1.observed - k0.observed;
            printf("%s: %" PRIu64 " decisions, %" PRIu64 " explorations, %" PRIu64
                   " observed; the chosen estimate now %.1f µs\n",
                   rl_test_url(), d, x, ob, chosen_us);
            ASSERT_EQ(d, (uint64_t)n);
            uint64_t asked = k1.asked - k0.asked;
            printf("the model asked for %" PRIu64 " observations\n", asked);
            ASSERT_TRUE(asked <= (uint64_t)n);
            if (loc.networked) {
                /* every page is timed; one whose whole time was the read-version wait (taken
                 * out) would observe 0 and be ignored by the model, hence not == n */
                ASSERT_TRUE(ob >= (uint64_t)n - n / 10);
            } else {
                ASSERT_TRUE(asked >= (uint64_t)n / RL__ADAPTIVE_OBSERVE_EVERY);
                ASSERT_TRUE(ob <= asked);     /* no page it did not ask for */
                ASSERT_TRUE(ob + 2 >= asked); /* (a page of 0 ns would be ignored) */
                /* a fast backend (mem:, file: natively: ~1 µs a page) leaves most pages untimed */
                if (chosen_us < 2.0) ASSERT_TRUE(asked < (uint64_t)n / 2);
            }
        }
        rl_cursor_free(c);
        qt_commit(t);
    }
    qt_close(&e);
}

/* Count the rows of a whole-index query by method m on e's store; rc of the last next. */
static int count_rows(qt_env *e, rl_fetch_method m, int *n, rl_query_counters *k) {
    rl_txn *t = qt_begin(e);
    rl_cursor *c = NULL;
    const rl_query_row *row;
    rl_query_options o = base_opts(m, 0);
    int rc;
    *n = 0;
    ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", &o, &c));
    while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) (*n)++;
    rl_cursor_get_counters(c, k);
    rl_cursor_free(c);
    qt_commit(t);
    return rc;
}

/* query_2_12: the remote-fetch mapper is the cursor's store's: built at the first remote page
 * (a reused cursor never keeps another store's), and refused for a store whose prefix holds a
 * brace (which a mapper would read as a placeholder) while SCAN_AND_FETCH, the fallback and
 * ADAPTIVE still read it. */
TEST(query_2_12_mapper_per_store) {
    static qt_env a, b; /* large */
    uint64_t rs = rl_test_seed();
    rl_query_counters k;
    int n;
    qt_open(&a, "q212-a");
    qt_load(&a, &rs, 12, 6, 0);
    /* b: a second store of the same database and metadata, under ("qtest", "orders", "q212-{b}") */
    b = a;
    b.n = 0;
    rl_buf p;
    rl__tuple_packer pk;
    rl__buf_init(&p);
    rl__buf_append(&p, QP, sizeof QP);
    rl__tuple_packer_init(&pk, &p);
    rl__tuple_pack_string(&pk, "q212-{b}", 8);
    ASSERT_OK(rl_store_new(a.md, p.data, p.len, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, &b.s));
    rl__buf_release(&p);
    rl_txn *t = qt_begin(&b);
    ASSERT_OK(rl_store_open(b.s, t));
    qt_commit(t);
    qt_load(&b, &rs, 7, 3, 0);
    for (int round = 0; round < 2; round++) { /* a's cursor parked, then taken for b, and back */
        ASSERT_OK(count_rows(&a, RL_FETCH_USE_REMOTE_FETCH, &n, &k));
        ASSERT_EQ(n, 12);
        ASSERT_EQ(k.orphans, 0);
        ASSERT_RC(count_rows(&b, RL_FETCH_USE_REMOTE_FETCH, &n, &k), RL_E_UNSUPPORTED_OPERATION);
        ASSERT_EQ(n, 0);
        ASSERT_OK(count_rows(&b, RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK, &n, &k));
        ASSERT_EQ(n, 7);
        ASSERT_EQ(k.fallback_error, RL_E_UNSUPPORTED_OPERATION);
        ASSERT_OK(count_rows(&b, RL_FETCH_ADAPTIVE, &n, &k));
        ASSERT_EQ(n, 7);
        ASSERT_OK(count_rows(&b, RL_FETCH_SCAN_AND_FETCH, &n, &k));
        ASSERT_EQ(n, 7);
    }
    rl_store_free(b.s);
    qt_close(&a);
}

RL_TEST_MAIN(T(query_2_1_skip_pushdown), T(query_2_2_limits), T(query_2_3_fallback_before_any_row),
             T(query_2_4_fallback_after_rows), T(query_2_5_orphans), T(query_2_6_continuations_refused),
             T(query_2_7_options), T(query_2_8_out_of_memory), T(query_2_9_skip_edge_and_bounds_count),
             T(query_2_10_adaptive_local_page_time), T(query_2_11_adaptive_short_pages_sampled),
             T(query_2_12_mapper_per_store))
