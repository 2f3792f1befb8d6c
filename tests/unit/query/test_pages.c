/* test_pages.c — query_14: how USE_REMOTE_FETCH sizes its mapped pages (src/query/cursor.c
 * invariant 8): EXACT with the rows a return or scan limit allows, WANT_ALL for a full scan,
 * FoundationDB's growing ITERATOR pages only with index_batch or a byte or time limit, EXACT and
 * WANT_ALL pages of at most 8 MiB, the next of them asked for as soon as one arrives; and how an
 * ADAPTIVE remote page reads (query_14_4), and deferred secondaries (query_14_5). The
 * counters' reads_mapped_range counts the mapped requests; rows must equal the model's in both
 * directions whatever the page size. Runs on rl_test_url() (mem:, defer:, and the clusters, where
 * tests/cluster_splits.txt puts this store's index and records on different servers).
 *
 * Test IDs: query_14_*. Seeded by rl_test_seed() (printed).
 */
#include "qtest.h"
#include "query/query_int.h"

#define N_RECS 400

/* Run price_idx with options o (fetch set to remote here), checking every row against the model
 * (first `limit` rows when limit > 0); its counters in *k. */
static void run_k(qt_env *e, rl_query_options o, int limit, rl_query_counters *k) {
    qt_query q = {0};
    q.reverse = o.reverse;
    const qt_rec *want[QT_MAX];
    int n_want = qt_model(e, &q, want), got = 0;
    if (limit > 0 && limit < n_want) n_want = limit;
    o.fetch = RL_FETCH_USE_REMOTE_FETCH;
    rl_txn *t = qt_begin(e);
    rl_cursor *c;
    ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", &o, &c));
    ASSERT_OK(qt_drain(c, want, n_want, &got));
    ASSERT_EQ(got, n_want);
    rl_cursor_get_counters(c, k);
    ASSERT_EQ(k->rows_returned, (uint64_t)n_want);
    rl_cursor_free(c);
    rl_txn_free(t);
}

/* run_k's mapped requests. */
static uint64_t run(qt_env *e, rl_query_options o, int limit) {
    rl_query_counters k;
    run_k(e, o, limit, &k);
    return k.reads_mapped_range;
}

static rl_query_options opts(int reverse) {
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.reverse = reverse;
    return o;
}

/* query_14_1: 400 small records, both directions. A limit covering every row, a limit of 50, a
 * scan limit of 60, and a full scan each take ONE mapped request (ITERATOR took 6 here: its
 * 4 KB first page grows x1.5); a byte limit above the whole scan keeps ITERATOR's growing pages
 * (several requests, the same rows); index_batch 7 takes one request per 7 entries. */
TEST(query_14_1_mapped_page_sizing) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "qp1");
    qt_load(&e, &rs, N_RECS, 2000, 0);
    for (int rev = 0; rev < 2; rev++) {
        rl_query_options o = opts(rev);
        o.limit = N_RECS;
        ASSERT_EQ(run(&e, o, N_RECS), 1);
        o.limit = 50;
        ASSERT_EQ(run(&e, o, 50), 1);
        o = opts(rev);
        ASSERT_EQ(run(&e, o, 0), 1); /* full scan: WANT_ALL */
        o.scan_limit = 60;
        ASSERT_EQ(run(&e, o, 60), 1);
        o = opts(rev);
        o.limit = 30;
        o.scan_limit = 500; /* the smaller of the two bounds the page */
        ASSERT_EQ(run(&e, o, 30), 1);
        o = opts(rev);
        o.byte_limit = 1 << 30; /* never reached: only the page sizing differs */
        uint64_t it = run(&e, o, 0);
        if (it < 4)
            fail_msg("reverse %d: a byte limit took %llu mapped requests (ITERATOR: want >= 4)", rev,
                     (unsigned long long)it);
        o = opts(rev);
        o.index_batch = 7;
        o.limit = 100;
        ASSERT_EQ(run(&e, o, 100), (100 + 6) / 7);
    }
    qt_close(&e);
}

/* query_14_2: a limit met partly on each of several pages: orphans skipped (RL_ORPHAN_SKIP) make
 * a page of `limit` entries return fewer rows, so the cursor asks again for exactly what is left
 * (EXACT pages, never more entries than rows still allowed): rows equal the model's without the
 * orphans, and each request asked for no more than the rows left. */
TEST(query_14_2_exact_pages_with_orphans) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "qp2");
    qt_load(&e, &rs, 120, 500, 0);
    for (int i = 0; i < 120; i += 3) qt_orphan(&e, i); /* every third record removed */
    qt_query q = {0};
    const qt_rec *all[QT_MAX], *want[QT_MAX];
    int n_all = qt_model(&e, &q, all), n_want = 0;
    for (int i = 0; i < n_all; i++)
        if (all[i]->present) want[n_want++] = all[i];
    int limit = n_want / 2;
    rl_query_options o = opts(0);
    o.fetch = RL_FETCH_USE_REMOTE_FETCH;
    o.orphans = RL_ORPHAN_SKIP;
    o.limit = limit;
    rl_txn *t = qt_begin(&e);
    rl_cursor *c;
    ASSERT_OK(rl_cursor_open(e.s, t, "price_idx", &o, &c));
    int got = 0;
    ASSERT_OK(qt_drain(c, want, limit, &got)); /* at most the limit */
    ASSERT_EQ(got, limit);
    rl_query_counters k;
    rl_cursor_get_counters(c, &k);
    /* The first page (limit entries) holds about a third orphans, so more pages follow, each
     * asking only for what is left: the entries read never exceed the limit plus the orphans. */
    if (k.reads_mapped_range < 2)
        fail_msg("%llu mapped requests (want >= 2)", (unsigned long long)k.reads_mapped_range);
    if (k.index_entries_read > (uint64_t)(limit + k.orphans))
        fail_msg("%llu index entries read for %d rows and %llu orphans", (unsigned long long)k.index_entries_read,
                 limit, (unsigned long long)k.orphans);
    rl_cursor_free(c);
    rl_txn_free(t);
    qt_close(&e);
}

/* Read one row of a remote full scan (or with a byte limit: ITERATOR) and close: the mapped
 * requests issued by then. */
static uint64_t one_row(qt_env *e, int64_t byte_limit) {
    rl_query_options o = opts(0);
    o.fetch = RL_FETCH_USE_REMOTE_FETCH;
    o.byte_limit = byte_limit;
    o.secondary_strategy = RL_SECONDARY_INDIVIDUAL; /* as query_14_3's pages */
    rl_txn *t = qt_begin(e);
    rl_cursor *c;
    ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", &o, &c));
    const rl_query_row *row;
    ASSERT_OK(rl_cursor_next(c, &row));
    ASSERT_TRUE(row != NULL);
    rl_query_counters k;
    rl_cursor_get_counters(c, &k);
    /* A streamed page (cluster) hands rows up before it is complete (entries_early), and the
     * next page is asked for when it completes: read on until a row comes from the complete page. */
    for (uint64_t early = k.entries_early; early > 0 && row; early = k.entries_early) {
        ASSERT_OK(rl_cursor_next(c, &row));
        rl_cursor_get_counters(c, &k);
        if (k.entries_early == early) break;
    }
    rl_cursor_free(c);
    rl_txn_free(t);
    return k.reads_mapped_range;
}

/* Padding bytes of the first k rows of price_idx in direction rev (the model's order): a lower
 * bound of the bytes a mapped page charges for them (index entries and keys add more). */
static size_t pads_first(qt_env *e, int rev, int k) {
    qt_query q = {0};
    q.reverse = rev;
    const qt_rec *want[QT_MAX];
    int n = qt_model(e, &q, want);
    size_t b = 0;
    for (int i = 0; i < k && i < n; i++) b += want[i]->pad;
    return b;
}

/* query_14_3: 80 records, most of them split (150 KB: about 11 MB in all): a full scan's WANT_ALL
 * pages return the model's rows in both directions, and end at the 8 MiB target at a batch
 * boundary: the mapped read checks its byte budget before each batch of 10 entries and keeps a
 * started batch whole (FoundationDB's STRICTLY_ENFORCE_BYTE_LIMIT = false, src/storage/mapped.c),
 * so when the first 70 rows in scan order already carry 8 MiB the page ends by then and a second
 * request follows; when they do not, the eighth batch may take the last 10 rows into the same
 * page (seed 130052846316, reverse: 80 rows, 9.6 MB, one request) and the count is only printed.
 * The page after the first is asked for as soon as the first arrives (one row read — on a
 * streamed cluster, rows until one comes from the complete first page — then the cursor closed:
 * two requests issued), but not with ITERATOR pages (a byte limit: one request). */
TEST(query_14_3_bounded_pages_read_ahead) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "qp3");
    qt_load(&e, &rs, 80, 400, 160);
    int n_split = 0;
    for (int i = 0; i < e.n; i++) n_split += e.r[i].pad > 100000;
    if (n_split < 60) fail_msg("only %d split records (want >= 60: more than 8 MiB)", n_split);
    for (int rev = 0; rev < 2; rev++) {
        /* `individual`: the page carries every record (a `grouped` page may leave the records
         * other servers hold to the cursor: RL_MAPPED_DEFER_REMOTE, query_14_5). */
        rl_query_options o = opts(rev);
        o.secondary_strategy = RL_SECONDARY_INDIVIDUAL;
        uint64_t n = run(&e, o, 0);
        size_t first70 = pads_first(&e, rev, 70);
        printf("reverse %d: %llu mapped requests; the first 70 rows carry %zu padding bytes\n", rev,
               (unsigned long long)n, first70);
        if (first70 >= (size_t)8 << 20 && n < 2)
            fail_msg("reverse %d: one mapped request, though the first 70 rows carry %zu bytes (> 8 MiB)", rev,
                     first70);
        ASSERT_TRUE(n >= 1);
    }
    /* The read-ahead: a first page that says more rows remain is followed at once by the next
     * request — when the first 70 rows reach 8 MiB the first page cannot hold them all (seed
     * 140117552645: the forward scan fit in one page, and only one request is right). */
    uint64_t ra = one_row(&e, 0);
    if (pads_first(&e, 0, 70) >= (size_t)8 << 20) ASSERT_EQ(ra, 2);
    else ASSERT_TRUE(ra >= 1 && ra <= 2);
    ASSERT_EQ(one_row(&e, (int64_t)1 << 40), 1);
    qt_close(&e);
}

/* ADAPTIVE in the test mode with pages of N_RECS entries (the first page of every cursor runs
 * remote fetch): the rows of run()'s query, and its mapped requests. */
static uint64_t run_adaptive(qt_env *e, rl_query_options o, int limit) {
    qt_query q = {0};
    q.reverse = o.reverse;
    const qt_rec *want[QT_MAX];
    int n_want = qt_model(e, &q, want), got = 0;
    if (limit > 0 && limit < n_want) n_want = limit;
    o.fetch = RL_FETCH_ADAPTIVE;
    rl__query_adaptive_test(N_RECS);
    rl_txn *t = qt_begin(e);
    rl_cursor *c;
    ASSERT_OK(rl_cursor_open(e->s, t, "price_idx", &o, &c));
    ASSERT_OK(qt_drain(c, want, n_want, &got));
    ASSERT_EQ(got, n_want);
    rl_query_counters k;
    rl_cursor_get_counters(c, &k);
    ASSERT_EQ(k.pages_remote_fetch, 1);
    rl_cursor_free(c);
    rl_txn_free(t);
    rl__query_adaptive_test(0);
    return k.reads_mapped_range;
}

/* 1 when the test's database is across a network: a cluster, or fdb: over one (the library's
 * RL_FDBC_URL unset: its cluster file; or a cluster: URL). */
static int networked(void) {
    const char *u = rl_test_url(), *f = getenv("RL_FDBC_URL");
    return rl_test_is_cluster(u) || (rl_test_is_fdb(u) && (!f || !strncmp(f, "cluster:", 8)));
}

/* query_14_4: an ADAPTIVE remote page reads its entries in one mapped request when they are
 * small (embedded: EXACT with the page's entries, as remote fetch reads them, not ITERATOR's
 * growing pages; networked: WANT_ALL). Split records (40 of 150 KB): in remote fetch's pages —
 * embedded, reads of at most 1 MiB (4+ requests: 8 MiB result arenas, above malloc's mmap
 * threshold, made an embedded page 2-3x slower, the fixed method's too until it took 1 MiB pages
 * as well); networked, 8 MiB pages, whose replies stream. */
TEST(query_14_4_adaptive_remote_pages) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "qp4");
    qt_load(&e, &rs, N_RECS, 2000, 0);
    for (int rev = 0; rev < 2; rev++) {
        rl_query_options o = opts(rev);
        o.limit = N_RECS;
        ASSERT_EQ(run_adaptive(&e, o, N_RECS), 1);
        o = opts(rev);
        ASSERT_EQ(run_adaptive(&e, o, 0), 1);
    }
    qt_close(&e);
    qt_open(&e, "qp4s");
    qt_load(&e, &rs, N_RECS, 2000, 40);
    rl_query_options o = opts(0);
    o.limit = N_RECS;
    uint64_t ad = run_adaptive(&e, o, N_RECS), rf = run(&e, o, N_RECS);
    printf("split records: ADAPTIVE %llu mapped requests, remote fetch %llu\n", (unsigned long long)ad,
           (unsigned long long)rf);
    ASSERT_EQ(ad, rf);
    if (!networked()) ASSERT_TRUE(ad >= 4);
    qt_close(&e);
}

/* One remote fetch of price_idx (strategy s, the first `limit` rows: 0 all) checked against the
 * model; its counters in *k. */
static void run_counted(qt_env *e, rl_secondary_strategy s, int rev, int limit, rl_query_counters *k) {
    rl_query_options o = opts(rev);
    o.secondary_strategy = s;
    o.limit = limit;
    run_k(e, o, limit, k);
}

/* query_14_5: deferred secondaries (cursor.c invariant 12, RL_MAPPED_DEFER_REMOTE). 60 records,
 * every one split (150 KB), read by remote fetch in both directions. `grouped`: the first cursor
 * learns the records' size; the later ones ask the servers to leave the records other servers
 * hold to the cursor, so on a cluster (tests/cluster_splits.txt puts most of this store's records
 * off its index's server) those come unread and the cursor reads each from its owner: the
 * completions are exactly the entries no server read (secondary_local + completions = rows,
 * secondary_remote 0: the counters count what the servers read), and they are pipelined —
 * the critical round trips stay well under one per completion; a page of three records is
 * relayed all the same (too few bytes to defer). `individual` (FoundationDB's)
 * and an embedded database defer nothing: every record comes in the page. Rows equal the
 * model's every time, byte for byte (qt_drain). */
TEST(query_14_5_deferred_secondaries) {
    qt_env e;
    uint64_t rs = rl_test_seed();
    qt_open(&e, "qp5");
    qt_load(&e, &rs, 60, 400, 60);
    rl_query_counters k, ki;
    for (int rev = 0; rev < 2; rev++) {
        run_counted(&e, RL_SECONDARY_INDIVIDUAL, rev, 0, &ki); /* where each record lies */
        ASSERT_EQ(ki.secondary_completions, 0);
        run_counted(&e, RL_SECONDARY_GROUPED, rev, 0, &k); /* learns (or, on the second pass, defers) */
        run_counted(&e, RL_SECONDARY_GROUPED, rev, 0, &k);
        printf("reverse %d: individual %llu local, %llu remote; grouped %llu local, %llu remote, %llu completed, "
               "%llu critical round trips\n",
               rev, (unsigned long long)ki.secondary_local, (unsigned long long)ki.secondary_remote,
               (unsigned long long)k.secondary_local, (unsigned long long)k.secondary_remote,
               (unsigned long long)k.secondary_completions, (unsigned long long)k.critical_round_trips);
        if (rl_test_is_cluster(rl_test_url())) {
            ASSERT_EQ(k.secondary_remote, 0);
            ASSERT_EQ(k.secondary_local, ki.secondary_local);
            ASSERT_EQ(k.secondary_completions, ki.secondary_remote); /* three servers: 50 of 60 */
            if (k.secondary_completions >= 20 && k.critical_round_trips * 2 > k.secondary_completions)
                fail_msg("%llu critical round trips for %llu completions: not pipelined",
                         (unsigned long long)k.critical_round_trips, (unsigned long long)k.secondary_completions);
        } else {
            ASSERT_EQ(k.secondary_completions, 0);
        }
        /* Three records (450 KB) are too few to defer (DEFER_PAGE_BYTES): the page relays them. */
        run_counted(&e, RL_SECONDARY_GROUPED, rev, 3, &k);
        ASSERT_EQ(k.secondary_completions, 0);
    }
    qt_close(&e);
}

RL_TEST_MAIN(T(query_14_1_mapped_page_sizing), T(query_14_2_exact_pages_with_orphans),
             T(query_14_3_bounded_pages_read_ahead), T(query_14_4_adaptive_remote_pages),
             T(query_14_5_deferred_secondaries))
