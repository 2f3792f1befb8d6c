/* test_reuse.c — query_4: memory reuse on the read path of split records (docs/benchmarks.md,
 * query section): a query after the first one allocates no large block (the decoder's scratch
 * and chunk buffer are parked per thread by rl_cursor_free, the KV layer's cached futures keep
 * their result arenas), rows stay correct byte for byte while memory is reused, two cursors
 * alive at once never share memory, and every allocation failing in turn with parked memory
 * present still gives RL_E_OUT_OF_MEMORY or the right rows (no leaks under ASan), and a parked
 * cursor (cursor.c invariant 11) starts clean.
 *
 * Test IDs: query_4_*. Seeded by rl_test_seed() (printed).
 */
#include "qtest.h"
#include "reclayer/alloc.h"

static const rl_fetch_method METHODS[] = {RL_FETCH_SCAN_AND_FETCH, RL_FETCH_USE_REMOTE_FETCH,
                                          RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK};

/* n records, every one split (pad 150,000 + a seeded few bytes: two chunks of different sizes),
 * distinct prices. */
static void load_split(qt_env *e, uint64_t *rs, int n) {
    e->n = n;
    rl_txn *t = qt_begin(e);
    for (int i = 0; i < n; i++) {
        qt_rec *r = &e->r[i];
        r->id = 10 + i * 3;
        r->price = 1000 - i * 7;
        r->cust = i % 3;
        r->pad = 150000 + (size_t)rl_test_rand_below(rs, 5000);
        r->present = 1;
        qt_save(e, t, r);
        if (i % 4 == 3) {
            qt_commit(t);
            t = qt_begin(e);
        }
    }
    qt_commit(t);
}

/* The row matches the model, padding bytes included (qt_save's pattern). */
static void check_row_bytes(const rl_query_row *row, const qt_rec *r) {
    qt_check_row(row, r);
    const Reclayer__Order *o = (const Reclayer__Order *)row->record->msg;
    for (size_t i = 0; i < r->pad; i += 997)
        if (o->padding.data[i] != (uint8_t)(r->id * 31 + (int64_t)i))
            fail_msg("record %lld: padding byte %zu differs", (long long)r->id, i);
    ASSERT_EQ(o->padding.data[r->pad - 1], (uint8_t)(r->id * 31 + (int64_t)(r->pad - 1)));
}

static rl_query_options opts(rl_fetch_method m, int reverse, int limit) {
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.fetch = m;
    o.reverse = reverse;
    o.limit = limit;
    return o;
}

/* Run one query in its own transaction, checking every row against want. Returns the rows. */
static int run(qt_env *e, const rl_query_options *o, const qt_rec *const *want, int n_want) {
    rl_txn *t = qt_begin(e);
    rl_cursor *c = NULL;
    const rl_query_row *row;
    int rc, got = 0;
    ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", o, &c));
    while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) {
        ASSERT_TRUE(got < n_want);
        check_row_bytes(row, want[got]);
        got++;
    }
    ASSERT_OK(rc);
    rl_cursor_free(c);
    rl_txn_free(t);
    return got;
}

/* query_4_1: after warm-up queries, repeating it allocates far less than one record per query
 * (before this work each query allocated about 3 x 150 KB: the read's arena block, the chunk
 * buffer and protobuf-c's copy of the padding), for every method, direction and limit. */
TEST(query_4_1_split_steady_state_reuses_memory) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q41");
    load_split(&e, &rs, 12);
    for (int mi = 0; mi < 3; mi++) {
        for (int rev = 0; rev < 2; rev++) {
            for (int li = 0; li < 3; li++) {
                static const int LIMITS[] = {1, 5, 0};
                qt_query q = {0};
                q.reverse = rev;
                const qt_rec *want[QT_MAX];
                int n_want = qt_model(&e, &q, want);
                rl_query_options o = opts(METHODS[mi], rev, LIMITS[li]);
                if (LIMITS[li] && LIMITS[li] < n_want) n_want = LIMITS[li];
                /* Warm-up: records differ in size and a result arena's kept block grows to a
                 * cycle's total over two or three cycles (rl__arena_alloc), so a few runs. */
                for (int w = 0; w < 5; w++) ASSERT_EQ(run(&e, &o, want, n_want), n_want);
                rl_alloc_stats a0, a1;
                rl_alloc_get_stats(&a0);
                for (int rep = 0; rep < 3; rep++) ASSERT_EQ(run(&e, &o, want, n_want), n_want);
                rl_alloc_get_stats(&a1);
                uint64_t per_query = (a1.bytes - a0.bytes) / 3;
                if (per_query > 64 * 1024)
                    fail_msg("method %d reverse %d limit %d: %llu bytes allocated per query", mi, rev, LIMITS[li],
                             (unsigned long long)per_query);
            }
        }
    }
    qt_close(&e);
}

/* query_4_2: two cursors alive at once in one thread, rows interleaved: each keeps its own
 * memory (a parked block is handed to one decoder only), and rows read from one are intact
 * after the other one moved. Then both are freed and a third query reuses what they parked. */
TEST(query_4_2_two_live_cursors_do_not_share) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q42");
    load_split(&e, &rs, 8);
    qt_query qf = {0}, qr = {0};
    qr.reverse = 1;
    const qt_rec *wf[QT_MAX], *wr[QT_MAX];
    int nf = qt_model(&e, &qf, wf), nr = qt_model(&e, &qr, wr);
    ASSERT_EQ(nf, nr);
    for (int mi = 0; mi < 3; mi++) {
        rl_query_options of = opts(METHODS[mi], 0, 0), orv = opts(METHODS[mi], 1, 0);
        ASSERT_EQ(run(&e, &of, wf, nf), nf); /* something is parked */
        rl_txn *t = qt_begin(&e);
        rl_cursor *a = NULL, *b = NULL;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &of, &a));
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &orv, &b));
        for (int i = 0; i < nf; i++) {
            const rl_query_row *ra, *rb;
            ASSERT_OK(rl_cursor_next(a, &ra));
            ASSERT_NOT_NULL(ra);
            ASSERT_OK(rl_cursor_next(b, &rb));
            ASSERT_NOT_NULL(rb);
            check_row_bytes(rb, wr[i]);
            check_row_bytes(ra, wf[i]); /* still valid after b's decode */
        }
        const rl_query_row *end;
        ASSERT_OK(rl_cursor_next(a, &end));
        ASSERT_NULL(end);
        ASSERT_OK(rl_cursor_next(b, &end));
        ASSERT_NULL(end);
        rl_cursor_free(a);
        rl_cursor_free(b);
        rl_txn_free(t);
        ASSERT_EQ(run(&e, &orv, wr, nr), nr);
    }
    qt_close(&e);
}

/* query_4_3: with memory parked by earlier queries, every allocation of a query failing in turn
 * gives RL_E_OUT_OF_MEMORY (or protobuf-c's OOM reported as a parse failure) or exactly the
 * model's rows; the next query without injection is right again. */
TEST(query_4_3_out_of_memory_with_parked_memory) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q43");
    load_split(&e, &rs, 6);
    qt_query q = {0};
    const qt_rec *want[QT_MAX];
    int n_want = qt_model(&e, &q, want);
    for (int v = 0; v < 6; v++) {
        /* Odd v: a cursor held open takes what the last query parked (the cursor and the
         * decoder's memory: invariant 11), so the injected query allocates its own; even v: it
         * finds them parked and may allocate nothing at all. */
        int mi = v / 2, hold = v % 2;
        rl_query_options o = opts(METHODS[mi], 0, 0);
        o.index_batch = 2;
        int finished = 0, failures = 0;
        for (long n = 0; !finished && n < 100000; n++) {
            ASSERT_EQ(run(&e, &o, want, n_want), n_want); /* parks memory; leaves futures cached */
            rl_txn *t = qt_begin(&e);
            rl_cursor *c = NULL, *held = NULL;
            if (hold) ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &held));
            int got = 0;
            rl_alloc_fail_after(n);
            int rc = rl_cursor_open(e.s, t, "price_idx", &o, &c);
            if (rc == RL_OK) {
                const rl_query_row *row;
                while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) {
                    ASSERT_TRUE(got < n_want);
                    got++;
                    if (got == n_want) break;
                }
                if (rc == RL_OK && row) rc = rl_cursor_next(c, &row);
            }
            rl_alloc_fail_after(-1);
            if (rc == RL_OK) {
                ASSERT_EQ(got, n_want);
                finished = 1;
            } else if (rc == RL_E_RECORD_PARSE_FAILED || rc == RL_E_FALLBACK_FAILED) {
                int cause = rc == RL_E_FALLBACK_FAILED ? rl_cursor_error_cause(c) : rc;
                if (cause != RL_E_OUT_OF_MEMORY && cause != RL_E_RECORD_PARSE_FAILED)
                    fail_msg("allocation %ld: fallback cause %s", n, rl_error_name(cause));
                failures++;
            } else if (rc != RL_E_OUT_OF_MEMORY) {
                fail_msg("allocation %ld: %s", n, rl_error_name(rc));
            } else {
                failures++;
            }
            rl_cursor_free(c);
            rl_cursor_free(held);
            rl_txn_free(t);
        }
        ASSERT_TRUE(finished);
        if (hold) ASSERT_TRUE(failures > 0);
    }
    qt_close(&e);
}

/* query_4_4: the parked cursor (cursor.c invariant 11). A cursor taken from the park after a
 * remote-fetch scan of split records and one stopped by an error carries nothing over: a
 * SCAN_AND_FETCH query in the other direction returns the model's rows with counters of its own
 * (no mapped reads, rows and entries of this query only) and no error; and a repeated limit-1
 * query allocates at most 8 times (19 before cursors were parked: the cursor, its buffers, its
 * queue). */
TEST(query_4_4_parked_cursor_starts_clean) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q44");
    load_split(&e, &rs, 10);
    qt_query qf = {0}, qr = {0};
    qr.reverse = 1;
    const qt_rec *wf[QT_MAX], *wr[QT_MAX];
    int nf = qt_model(&e, &qf, wf), nr = qt_model(&e, &qr, wr);
    for (int round = 0; round < 3; round++) {
        rl_query_options o = opts(RL_FETCH_USE_REMOTE_FETCH, 0, 0);
        ASSERT_EQ(run(&e, &o, wf, nf), nf); /* parks a cursor that read mapped pages */
        if (round == 1) {                   /* ... or one that failed */
            rl_txn *t = qt_begin(&e);
            rl_cursor *c = NULL;
            rl_query_options bad = opts(RL_FETCH_SCAN_AND_FETCH, 0, 0);
            bad.continuation = "not a continuation";
            bad.continuation_len = 18;
            ASSERT_EQ(rl_cursor_open(e.s, t, "price_idx", &bad, &c), RL_E_CONTINUATION_INVALID);
            ASSERT_NULL(c);
            rl_txn_free(t);
        }
        rl_query_options so = opts(RL_FETCH_SCAN_AND_FETCH, 1, 4);
        rl_txn *t = qt_begin(&e);
        rl_cursor *c = NULL;
        const rl_query_row *row;
        int rc, got = 0;
        ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &so, &c));
        while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) check_row_bytes(row, wr[got++]);
        ASSERT_OK(rc);
        ASSERT_EQ(got, 4 < nr ? 4 : nr);
        ASSERT_EQ(rl_cursor_error_cause(c), RL_OK);
        rl_query_counters k;
        rl_cursor_get_counters(c, &k);
        ASSERT_EQ(k.reads_mapped_range, 0);
        ASSERT_EQ(k.mapped_range_requests, 0);
        ASSERT_EQ(k.entries_early, 0);
        ASSERT_EQ(k.rows_returned, (uint64_t)got);
        rl_cursor_free(c);
        rl_txn_free(t);
    }
    rl_query_options one = opts(RL_FETCH_SCAN_AND_FETCH, 0, 1);
    for (int w = 0; w < 3; w++) ASSERT_EQ(run(&e, &one, wf, 1), 1);
    rl_alloc_stats a0, a1;
    rl_alloc_get_stats(&a0);
    for (int rep = 0; rep < 10; rep++) ASSERT_EQ(run(&e, &one, wf, 1), 1);
    rl_alloc_get_stats(&a1);
    uint64_t per_query = (a1.allocs - a0.allocs) / 10;
    printf("limit-1 query: %llu allocations\n", (unsigned long long)per_query);
    ASSERT_TRUE(per_query <= 8);
    qt_close(&e);
}

RL_TEST_MAIN(T(query_4_1_split_steady_state_reuses_memory), T(query_4_2_two_live_cursors_do_not_share),
             T(query_4_3_out_of_memory_with_parked_memory), T(query_4_4_parked_cursor_starts_clean))
