/* test_cut_off.c — query_6: USE_REMOTE_FETCH when the server cuts a record's secondary range off.
 *
 * The embedded backend is opened with small mapped-range secondary limits
 * (rl_db_options.mapped_secondary_row_limit / _byte_limit), so the mapped read returns each
 * record's range marked `more` after its first key-value(s) or bytes, and the cursor must complete
 * every such record with its own range read. Rows must still equal the model's (and
 * SCAN_AND_FETCH's), in both directions, across pages, and the counters must show one completion
 * per cut-off record.
 *
 * Test IDs: query_6_*. Seeded by rl_test_seed() (printed).
 */
#include "qtest.h"

static rl_query_options opts_of(rl_fetch_method m, int reverse, int limit) {
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.fetch = m;
    o.reverse = reverse;
    o.limit = limit;
    return o;
}

/* Run the whole query page by page (pages of `page` rows), checking every row against the model;
 * returns the summed counters. */
static rl_query_counters run_pages(qt_env *e, rl_fetch_method m, int reverse, int page) {
    qt_query q = {0};
    q.reverse = reverse;
    const qt_rec *want[QT_MAX];
    int n_want = qt_model(e, &q, want), got = 0;
    rl_query_counters sum;
    memset(&sum, 0, sizeof sum);
    uint8_t *cont = NULL;
    size_t cont_len = 0;
    for (int pages = 0; pages < 1000; pages++) {
        rl_query_options o = opts_of(m, reverse, page);
        o.continuation = cont;
        o.continuation_len = cont_len;
        rl_txn *t = qt_begin(e);
        rl_cursor *c;
        ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", &o, &c));
        ASSERT_OK(qt_drain(c, want, n_want, &got));
        rl_query_counters k;
        rl_cursor_get_counters(c, &k);
        sum.records_returned += k.records_returned;
        sum.secondary_completions += k.secondary_completions;
        sum.reads_range += k.reads_range;
        sum.reads_mapped_range += k.reads_mapped_range;
        const uint8_t *p;
        size_t len;
        ASSERT_OK(rl_cursor_continuation(c, &p, &len));
        free(cont);
        cont = NULL;
        cont_len = len;
        if (len) {
            cont = malloc(len);
            memcpy(cont, p, len);
        }
        rl_cursor_free(c);
        qt_commit(t);
        if (!len) break;
    }
    free(cont);
    ASSERT_EQ(got, n_want);
    return sum;
}

/* query_6_1: a one-row secondary limit cuts every record (version key + data): each is completed
 * by the client; rows equal the model's for both directions and page sizes. */
TEST(query_6_1_row_limit_cut_off_completed) {
    uint64_t rs = rl_test_seed();
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    dbo.mapped_secondary_row_limit = 1;
    qt_env e;
    qt_open_with(&e, "q61", &dbo);
    qt_load(&e, &rs, 40, 25, 3);
    for (int rev = 0; rev < 2; rev++)
        for (int page = 0; page <= 7; page += 7) {
            rl_query_counters k = run_pages(&e, RL_FETCH_USE_REMOTE_FETCH, rev, page);
            ASSERT_EQ(k.records_returned, 40);
            /* Every record has a version key and at least one data key: all are cut off. */
            ASSERT_EQ(k.secondary_completions, 40);
            ASSERT_EQ(k.reads_range, 40);
            ASSERT_TRUE(k.reads_mapped_range >= 1);
            rl_query_counters s = run_pages(&e, RL_FETCH_SCAN_AND_FETCH, rev, page);
            ASSERT_EQ(s.secondary_completions, 0);
        }
    qt_close(&e);
}

/* query_6_2: a byte limit cuts only the large (split) records, after their first chunk; the
 * small ones come back whole. */
TEST(query_6_2_byte_limit_cuts_split_records) {
    uint64_t rs = rl_test_seed();
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    dbo.mapped_secondary_byte_limit = 50000;
    qt_env e;
    qt_open_with(&e, "q62", &dbo);
    qt_load(&e, &rs, 30, 20, 4);
    int n_split = 0;
    for (int i = 0; i < e.n; i++) n_split += e.r[i].pad > 100000;
    ASSERT_TRUE(n_split >= 1);
    for (int rev = 0; rev < 2; rev++) {
        rl_query_counters k = run_pages(&e, RL_FETCH_USE_REMOTE_FETCH, rev, 0);
        ASSERT_EQ(k.records_returned, 30);
        ASSERT_EQ(k.secondary_completions, (uint64_t)n_split);
    }
    qt_close(&e);
}

/* query_6_3: negative limits are refused at open. */
TEST(query_6_3_negative_limits_refused) {
    rl_db_options dbo;
    memset(&dbo, 0, sizeof dbo);
    dbo.size = sizeof dbo;
    dbo.mapped_secondary_row_limit = -1;
    rl_db *db = NULL;
    if (strncmp(rl_test_url(), "mem:", 4) == 0) {
        ASSERT_RC(rl_db_open("mem:", &dbo, &db), RL_E_INVALID_ARGUMENT);
        ASSERT_NULL(db);
    }
}

RL_TEST_MAIN(T(query_6_1_row_limit_cut_off_completed), T(query_6_2_byte_limit_cuts_split_records),
             T(query_6_3_negative_limits_refused))
