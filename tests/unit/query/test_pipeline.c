/* test_pipeline.c — query_7: SCAN_AND_FETCH keeps pipeline_depth record loads outstanding across
 * index pages (not only within one), and an index entry whose load cannot be issued surfaces its
 * error only when it reaches the head of the queue, so the rows before it are returned whatever
 * the depth. Runs on rl_test_url() (ctest also runs it on the deferred backend, where loads really
 * are outstanding while the cursor works).
 *
 * Test IDs: query_7_*. Seeded by rl_test_seed() (printed).
 */
#include "qtest.h"

/* query_7_1: 120 records in index pages of 7 entries (index_batch), depths 1, 3, 10 and 25: the
 * rows equal the model, every load taken had min(depth, entries left) loads outstanding (no
 * stall: the old cursor drained its queue at every page, 17 times here), and the most in flight
 * is the depth. */
TEST(query_7_1_pipeline_across_pages) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q71");
    qt_load(&e, &rs, 120, 400, 3);
    static const int depths[] = {1, 3, 10, 25};
    for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++)
        for (int rev = 0; rev < 2; rev++) {
            qt_query q = {0};
            q.reverse = rev;
            const qt_rec *want[QT_MAX];
            int n_want = qt_model(&e, &q, want);
            rl_query_options o;
            memset(&o, 0, sizeof o);
            o.size = sizeof o;
            o.reverse = rev;
            o.index_batch = 7;
            o.pipeline_depth = depths[di];
            rl_txn *t = qt_begin(&e);
            rl_cursor *c;
            ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
            int got = 0;
            ASSERT_OK(qt_drain(c, want, n_want, &got));
            ASSERT_EQ(got, n_want);
            rl_query_counters k;
            rl_cursor_get_counters(c, &k);
            if (k.pipeline_stalls != 0)
                fail_msg("depth %d reverse %d: %llu loads taken with fewer than %d outstanding", depths[di], rev,
                         (unsigned long long)k.pipeline_stalls, depths[di]);
            ASSERT_EQ(k.max_loads_in_flight, (uint64_t)(depths[di] < n_want ? depths[di] : n_want));
            ASSERT_TRUE(k.reads_range >= (uint64_t)(n_want / 7)); /* many index pages */
            rl_cursor_free(c);
            qt_commit(t);
        }
    qt_close(&e);
}

/* An index entry of price_idx that is not (price, order_id): three elements after the index
 * subspace, at a price above every record's. */
static void put_bad_entry(qt_env *e) {
    rl_buf k;
    rl__tuple_packer pk;
    rl_slice p = rl_store_prefix(e->s);
    rl__buf_init(&k);
    rl__buf_append(&k, p.data, p.len);
    rl__tuple_packer_init(&pk, &k);
    rl__tuple_pack_int(&pk, 2);
    rl__tuple_pack_string(&pk, "price_idx", 9);
    rl__tuple_pack_int(&pk, 100000);
    rl__tuple_pack_int(&pk, 1);
    rl__tuple_pack_int(&pk, 2);
    rl_txn *t = qt_begin(e);
    ASSERT_OK(rl_txn_set(t, k.data, k.len, "", 0));
    qt_commit(t);
    rl__buf_release(&k);
}

/* query_7_2: 20 good entries, then a corrupt one: every method returns the 20 rows, then
 * corrupt_data, at depths 1, 3, 9 and 27 and page sizes 0 (streaming) and 4 (the review found
 * 20, 18, 12 and 0 rows before the error with SCAN_AND_FETCH). */
TEST(query_7_2_corrupt_entry_at_the_head) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "q72");
    qt_load(&e, &rs, 20, 50, 2);
    put_bad_entry(&e);
    static const int depths[] = {1, 3, 9, 27};
    static const rl_fetch_method methods[] = {RL_FETCH_SCAN_AND_FETCH, RL_FETCH_USE_REMOTE_FETCH};
    for (size_t mi = 0; mi < 2; mi++)
        for (size_t di = 0; di < sizeof depths / sizeof depths[0]; di++)
            for (int batch = 0; batch <= 4; batch += 4) {
                rl_query_options o;
                memset(&o, 0, sizeof o);
                o.size = sizeof o;
                o.fetch = methods[mi];
                o.pipeline_depth = depths[di];
                o.index_batch = batch;
                rl_txn *t = qt_begin(&e);
                rl_cursor *c;
                ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
                const rl_query_row *row;
                int got = 0, rc;
                while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) got++;
                if (got != 20 || rc != RL_E_CORRUPT_DATA)
                    fail_msg("%s depth %d batch %d: %d rows then %s (want 20 then corrupt_data)",
                             rl_fetch_method_name(methods[mi]), depths[di], batch, got, rl_error_name(rc));
                ASSERT_TRUE(strstr(rl_cursor_errmsg(c), "index entry") != NULL);
                rl_cursor_free(c);
                rl_txn_free(t);
            }
    qt_close(&e);
}

RL_TEST_MAIN(T(query_7_1_pipeline_across_pages), T(query_7_2_corrupt_entry_at_the_head))
