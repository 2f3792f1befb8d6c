/* test_adaptive.c — the ADAPTIVE method's cost model (src/query/adaptive.h) on synthetic inputs
 * with known answers: the formulas, the decision in each regime of the reference reports (one
 * server at 0.5 ms, records on other servers with each strategy, split records, limit 1, skip 3),
 * calibration converging after a deliberately wrong prior, and exploration bounded in cost (and
 * rarer the slower the other method is estimated: adaptive-1.6).
 * Pure: no database (adaptive-1.x).
 */
#include <math.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "query/adaptive.h"

#define US 1000.0
#define NEAR(a, b) (fabs((a) - (b)) <= 1e-6 * fmax(1.0, fabs(b)))

/* A page as the reports' benchmark reads it: Orders, pipeline depth 10, 0.5 ms RTT. */
static rl__adaptive_inputs page(double rows, double bytes_per_row, double frac_remote, int strategy) {
    rl__adaptive_inputs in = {
        .rows = rows,
        .bytes_per_row = bytes_per_row,
        .kvs_per_record = bytes_per_row > 100000 ? 2 : 1,
        .pipeline_depth = 10,
        .index_page_rows = 1000,
        .mapped_page_bytes = 8.0 * 1024 * 1024,
        .rtt_index_ns = 500 * US,
        .rtt_records_ns = 500 * US,
        .rtt_s2s_ns = 500 * US,
        .frac_remote = frac_remote,
        .strategy = strategy,
        .s2s_batch = 10,
    };
    return in;
}

/* adaptive-1.1: the estimates are the documented formulas. */
TEST(adaptive_1_1_formulas) {
    rl__adaptive_costs c = {.client_per_record = 8000,
                            .client_per_byte = 0.5,
                            .server_per_entry = 700,
                            .server_per_remote = 2000,
                            .server_per_byte = 1};
    rl__adaptive_inputs in = page(1000, 100, 0.5, RL__ADAPTIVE_INDIVIDUAL);
    double sf = 1 * 500 * US + 100 * 500 * US + 1000 * 8000 + 1000 * 100 * 0.5;
    double rf = 1 * 500 * US + 50 * 500 * US + 1000 * 700 + 500 * 2000 + 1000 * 100 * (1 + 0.5);
    ASSERT_TRUE(NEAR(rl__adaptive_estimate(&c, &in, RL__ADAPTIVE_SF), sf));
    ASSERT_TRUE(NEAR(rl__adaptive_estimate(&c, &in, RL__ADAPTIVE_RF), rf));
    in.strategy = RL__ADAPTIVE_GROUPED; /* one s2s round per mapped page */
    rf = 1 * 500 * US + 1 * 500 * US + 1000 * 700 + 500 * 2000 + 1000 * 100 * 1.5;
    ASSERT_TRUE(NEAR(rl__adaptive_estimate(&c, &in, RL__ADAPTIVE_RF), rf));
    /* 100 KB rows: 100 MB in 8 MiB pages is 12 mapped pages; SCAN_AND_FETCH's index page is one. */
    in = page(1000, 100000, 0, RL__ADAPTIVE_INDIVIDUAL);
    rf = 12 * 500 * US + 1000 * 700 + 1000 * 100000 * 1.5;
    ASSERT_TRUE(NEAR(rl__adaptive_estimate(&c, &in, RL__ADAPTIVE_RF), rf));
    /* Garbage is clamped to something finite and non-negative. */
    rl__adaptive_inputs bad = {
        .rows = -5, .bytes_per_row = NAN, .pipeline_depth = -1, .frac_remote = 7, .rtt_index_ns = -1, .s2s_batch = 0};
    for (int k = 0; k < 2; k++) {
        double e = rl__adaptive_estimate(&c, &bad, k);
        ASSERT_TRUE(isfinite(e) && e >= 0);
    }
    ASSERT_EQ(rl__adaptive_class_of(0), 0);
    ASSERT_EQ(rl__adaptive_class_of(1), 0);
    ASSERT_EQ(rl__adaptive_class_of(2), 1);
    ASSERT_EQ(rl__adaptive_class_of(10), 3);
    ASSERT_EQ(rl__adaptive_class_of(1000), 9);
    ASSERT_EQ(rl__adaptive_class_of(1e9), RL__ADAPTIVE_CLASSES - 1);
}

static int decide(rl__adaptive_inputs in) {
    rl__adaptive_model m;
    rl__adaptive_init(&m, NULL);
    rl__adaptive_decision d;
    rl__adaptive_decide(&m, &in, &d);
    ASSERT_FALSE(d.explored); /* a fresh model never explores on its first decision */
    return d.method;
}

/* adaptive-1.2: with the priors, each regime of the reports picks the method that won there. */
TEST(adaptive_1_2_regimes) {
    /* C3: one server, 0.5 ms, 1,000 small rows: remote fetch (reports: 0.224). */
    ASSERT_EQ(decide(page(1000, 60, 0, RL__ADAPTIVE_INDIVIDUAL)), RL__ADAPTIVE_RF);
    /* C3: 1,000 split rows (100 KB): remote fetch, whose streamed reply overlaps the server's
     * work with the transfer (the reports, without streaming: remote 1.053, slower; here 0.90). */
    ASSERT_EQ(decide(page(1000, 100060, 0, RL__ADAPTIVE_INDIVIDUAL)), RL__ADAPTIVE_RF);
    /* limit 1 on the index's own server: one round trip instead of two. */
    ASSERT_EQ(decide(page(1, 60, 0, RL__ADAPTIVE_INDIVIDUAL)), RL__ADAPTIVE_RF);
    /* M2: records on other servers, grouped: one s2s round per page instead of 100 loads. */
    ASSERT_EQ(decide(page(1000, 60, 1, RL__ADAPTIVE_GROUPED)), RL__ADAPTIVE_RF);
    /* M2skip: skip 3, 10 rows, records elsewhere: one s2s batch against one pipelined wave. */
    ASSERT_EQ(decide(page(10, 60, 1, RL__ADAPTIVE_INDIVIDUAL)), RL__ADAPTIVE_RF);
    /* No network at all (embedded): the server-side join costs less CPU than client loads. */
    rl__adaptive_inputs emb = page(1000, 60, 0, RL__ADAPTIVE_INDIVIDUAL);
    emb.rtt_index_ns = emb.rtt_records_ns = emb.rtt_s2s_ns = 0;
    ASSERT_EQ(decide(emb), RL__ADAPTIVE_RF);
    /* A slow storage-to-storage link with individual batches: 100 sequential s2s rounds of 2 ms
     * lose to 100 pipelined client rounds of 0.5 ms. */
    rl__adaptive_inputs far = page(1000, 60, 1, RL__ADAPTIVE_INDIVIDUAL);
    far.rtt_s2s_ns = 2000 * US;
    ASSERT_EQ(decide(far), RL__ADAPTIVE_SF);
}

/* The "true" cost of a page on a synthetic system: the model with other costs and a fixed
 * overhead on remote fetch (what the reports saw on M2: the index server serialising). */
static double truth(const rl__adaptive_inputs *in, int method) {
    rl__adaptive_costs t = rl__adaptive_default_costs();
    double v = rl__adaptive_estimate(&t, in, method);
    return method == RL__ADAPTIVE_RF ? v * 2.5 : v * 0.8;
}

/* adaptive-1.3: a deliberately wrong prior (remote fetch 100x too cheap) is corrected within a
 * few pages: the model settles on the truly faster method and stays there. */
TEST(adaptive_1_3_calibration_converges) {
    rl__adaptive_costs wrong = rl__adaptive_default_costs();
    wrong.server_per_entry /= 100;
    wrong.server_per_remote /= 100;
    wrong.server_per_byte /= 100;
    rl__adaptive_model m;
    rl__adaptive_init(&m, &wrong);
    rl__adaptive_inputs in = page(1000, 60, 1, RL__ADAPTIVE_INDIVIDUAL);
    int best = truth(&in, RL__ADAPTIVE_SF) < truth(&in, RL__ADAPTIVE_RF) ? RL__ADAPTIVE_SF : RL__ADAPTIVE_RF;
    ASSERT_EQ(best, RL__ADAPTIVE_SF); /* the synthetic system makes remote fetch lose */
    int first_right = -1, wrong_after = 0;
    for (int p = 0; p < 200; p++) {
        rl__adaptive_decision d;
        rl__adaptive_decide(&m, &in, &d);
        if (p == 0) ASSERT_EQ(d.method, RL__ADAPTIVE_RF); /* the wrong prior's choice */
        if (d.method == best && !d.explored && first_right < 0) first_right = p;
        if (first_right >= 0 && d.method != best && !d.explored) wrong_after++;
        rl__adaptive_observe(&m, &d, truth(&in, d.method));
    }
    printf("first right decision at page %d, wrong non-exploring decisions after it %d\n", first_right, wrong_after);
    ASSERT_TRUE(first_right >= 1 && first_right <= 3);
    ASSERT_EQ(wrong_after, 0);
    /* The chosen method's calibrated estimate now matches the truth closely (the synthetic truth
     * is the model times a constant, so the factor converges to it exactly). */
    rl__adaptive_decision d;
    rl__adaptive_decide(&m, &in, &d);
    for (int k = 0; k < 2; k++)
        printf("method %d: estimate %.0f ns, truth %.0f ns, %u observations\n", k, d.est_ns[k], truth(&in, k),
               m.cls[d.size_class].observed[k]);
    ASSERT_TRUE(fabs(d.est_ns[best] / truth(&in, best) - 1) < 0.10);
    /* The loser's estimate stays above the winner's: its one (bounded) observation put it past
     * the exploration bound, so it is not observed again — the bound keeps exploration cheap. */
    ASSERT_TRUE(d.est_ns[1 - best] > d.est_ns[best]);
    /* The explanation names both estimates and the choice. */
    rl_buf b;
    rl__buf_init(&b);
    rl__adaptive_explain(&d, &b);
    ASSERT_OK(rl__buf_error(&b));
    ASSERT_NOT_NULL(strstr((char *)b.data, "SCAN_AND_FETCH"));
    ASSERT_NOT_NULL(strstr((char *)b.data, "USE_REMOTE_FETCH"));
    ASSERT_NOT_NULL(strstr((char *)b.data, "->"));
    printf("%s", (char *)b.data);
    rl__buf_release(&b);
}

/* adaptive-1.4: exploration is bounded: over many pages of random sizes on a stationary system,
 * the explored pages are few and the total time stays within a few percent of always choosing
 * the truly faster method. */
TEST(adaptive_1_4_exploration_bounded) {
    uint64_t rs = rl_test_seed();
    rl__adaptive_model m;
    rl__adaptive_init(&m, NULL);
    double spent = 0, best_total = 0;
    int explored = 0, n = 5000;
    for (int p = 0; p < n; p++) {
        double rows = (double)(1 + rl_test_rand_below(&rs, 1000));
        rl__adaptive_inputs in = page(rows, 60, (double)rl_test_rand_below(&rs, 2), RL__ADAPTIVE_INDIVIDUAL);
        rl__adaptive_decision d;
        rl__adaptive_decide(&m, &in, &d);
        explored += d.explored;
        double t = truth(&in, d.method);
        spent += t;
        best_total += fmin(truth(&in, RL__ADAPTIVE_SF), truth(&in, RL__ADAPTIVE_RF));
        rl__adaptive_observe(&m, &d, t);
    }
    printf("explored %d of %d pages; time %.4f of always-best\n", explored, n, spent / best_total);
    ASSERT_TRUE(explored <= n / RL__ADAPTIVE_EXPLORE_EVERY + n / RL__ADAPTIVE_PROBE_EVERY + 2 * RL__ADAPTIVE_CLASSES);
    ASSERT_TRUE(spent / best_total <= 1.05);
    ASSERT_TRUE(m.explorations == (uint64_t)explored && m.decisions == (uint64_t)n);
}

/* adaptive-1.5: a method is never explored when it is estimated more than EXPLORE_MAX slower. */
TEST(adaptive_1_5_no_costly_exploration) {
    rl__adaptive_model m;
    rl__adaptive_init(&m, NULL);
    rl__adaptive_inputs in = page(1000, 60, 0, RL__ADAPTIVE_INDIVIDUAL); /* RF ~50x cheaper */
    for (int p = 0; p < 500; p++) {
        rl__adaptive_decision d;
        rl__adaptive_decide(&m, &in, &d);
        ASSERT_EQ(d.method, RL__ADAPTIVE_RF);
        ASSERT_FALSE(d.explored);
        rl__adaptive_observe(&m, &d, d.raw_ns[d.method]);
    }
    ASSERT_TRUE(m.explorations == 0);
}

/* adaptive-1.6: exploration is cost-bounded. On a stationary system where the other method is
 * truly g times slower (embedded priors, 1,000 small rows, no round trips), once its window is
 * full it is explored every max(EXPLORE_EVERY, ceil((g - 1) / EXPLORE_BUDGET)) decisions: so
 * exploring costs at most EXPLORE_BUDGET of the always-best time, plus the long-period probes. At
 * g = 1.3 (SCAN_AND_FETCH against remote fetch of 1,000 small rows on embedded) every 60th
 * decision, where the fixed period of 20 spent 1.5 %. Deterministic: no noise, no seed. */
TEST(adaptive_1_6_exploration_cost_bounded) {
    const double gs[] = {1.05, 1.3, 1.45};
    const int n = 6000, warm = 200;
    for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
        double g = gs[gi];
        rl__adaptive_costs costs = rl__adaptive_embedded_costs();
        rl__adaptive_model m;
        rl__adaptive_init(&m, &costs);
        rl__adaptive_inputs in = page(1000, 60, 0, RL__ADAPTIVE_INDIVIDUAL);
        in.rtt_index_ns = in.rtt_records_ns = in.rtt_s2s_ns = 0;
        double t[2];
        t[RL__ADAPTIVE_RF] = rl__adaptive_estimate(&costs, &in, RL__ADAPTIVE_RF);
        t[RL__ADAPTIVE_SF] = g * t[RL__ADAPTIVE_RF]; /* the truth: remote fetch is the faster */
        int explored = 0, periodic = 0, last = -1;
        double spent = 0, best = 0;
        for (int p = 0; p < n; p++) {
            rl__adaptive_decision d;
            rl__adaptive_decide(&m, &in, &d);
            if (p >= warm) {
                ASSERT_EQ(d.method == RL__ADAPTIVE_SF, d.explored); /* the choice is right */
                spent += t[d.method];
                best += t[RL__ADAPTIVE_RF];
                if (d.explored) {
                    explored++;
                    periodic += (p + 1) % RL__ADAPTIVE_PROBE_EVERY != 0; /* not the probe */
                    if (last >= 0 && (p + 1) % RL__ADAPTIVE_PROBE_EVERY != 0) ASSERT_TRUE(p - last >= 20);
                    last = p;
                }
            }
            rl__adaptive_observe(&m, &d, t[d.method]);
        }
        int every = g - 1 > RL__ADAPTIVE_EXPLORE_BUDGET * RL__ADAPTIVE_EXPLORE_EVERY
                        ? (int)ceil((g - 1) / RL__ADAPTIVE_EXPLORE_BUDGET - 1e-9)
                        : RL__ADAPTIVE_EXPLORE_EVERY;
        printf("g %.2f: explored %d of %d pages (%d periodic, every %d); time %.4f of always-best\n", g, explored,
               n - warm, periodic, every, spent / best);
        /* (a probe restarts the period: up to one period fewer per probe) */
        ASSERT_TRUE(periodic >= (n - warm) / every - n / RL__ADAPTIVE_PROBE_EVERY - 2);
        ASSERT_TRUE(periodic <= (n - warm) / every + 1);
        ASSERT_TRUE(explored <= periodic + n / RL__ADAPTIVE_PROBE_EVERY);
        ASSERT_TRUE(spent / best <= 1 + RL__ADAPTIVE_EXPLORE_BUDGET + (g - 1) / RL__ADAPTIVE_PROBE_EVERY + 1e-6);
    }
}

/* adaptive-1.7: the observation rule (rl__adaptive_decide's observe). A short page (embedded, one
 * row: well under RL__ADAPTIVE_OBSERVE_ALL_NS) is observed while the chosen method's window
 * warms up, whenever it explores, and otherwise one decision in RL__ADAPTIVE_OBSERVE_EVERY; a
 * long page is always observed. With only the observed pages fed back (as the cursor does on a
 * local backend), a wrong prior is still corrected within a few observations and the choice
 * stays right. */
TEST(adaptive_1_7_observation_sampled) {
    rl__adaptive_costs wrong = rl__adaptive_embedded_costs();
    wrong.server_per_entry /= 4; /* the prior: remote fetch looks 4x cheaper per entry */
    rl__adaptive_model m;
    rl__adaptive_init(&m, &wrong);
    rl__adaptive_inputs in = page(1, 200, 0, RL__ADAPTIVE_INDIVIDUAL);
    in.rtt_index_ns = in.rtt_records_ns = in.rtt_s2s_ns = 0;
    rl__adaptive_costs truth_c = rl__adaptive_embedded_costs();
    double t[2];
    t[RL__ADAPTIVE_SF] = rl__adaptive_estimate(&truth_c, &in, RL__ADAPTIVE_SF);
    t[RL__ADAPTIVE_RF] = 1.3 * t[RL__ADAPTIVE_SF]; /* the truth: SCAN_AND_FETCH is the faster */
    ASSERT_TRUE(t[RL__ADAPTIVE_RF] < RL__ADAPTIVE_OBSERVE_ALL_NS);
    const int n = 4000, warm = 100;
    int observed = 0, explored = 0, wrong_choice = 0;
    for (int p = 0; p < n; p++) {
        rl__adaptive_decision d;
        rl__adaptive_decide(&m, &in, &d);
        if (d.explored) {
            ASSERT_TRUE(d.observe); /* an exploration is never wasted */
            explored++;
        }
        if (p >= warm && !d.explored && d.method != RL__ADAPTIVE_SF) wrong_choice++;
        if (d.observe) {
            observed++;
            rl__adaptive_observe(&m, &d, t[d.method]);
        }
    }
    printf("observed %d of %d short pages (%d explorations), %d wrong choices after %d\n", observed, n, explored,
           wrong_choice, warm);
    ASSERT_EQ(wrong_choice, 0);
    ASSERT_TRUE(observed >= n / RL__ADAPTIVE_OBSERVE_EVERY);
    ASSERT_TRUE(observed <= n / RL__ADAPTIVE_OBSERVE_EVERY + explored + 2 * RL__ADAPTIVE_WINDOW + 1);
    /* A long page (1,000 split records: far above OBSERVE_ALL_NS) is observed every time. */
    rl__adaptive_inputs big = page(1000, 100000, 0, RL__ADAPTIVE_INDIVIDUAL);
    big.rtt_index_ns = big.rtt_records_ns = big.rtt_s2s_ns = 0;
    for (int p = 0; p < 64; p++) {
        rl__adaptive_decision d;
        rl__adaptive_decide(&m, &big, &d);
        ASSERT_TRUE(d.est_ns[d.method] >= RL__ADAPTIVE_OBSERVE_ALL_NS);
        ASSERT_TRUE(d.observe);
        rl__adaptive_observe(&m, &d, d.raw_ns[d.method]);
    }
}

/* adaptive-1.8: a lease (rl__adaptive_lease_grant/_take) answers exactly as rl__adaptive_decide
 * would: two models see the same stream of short pages (four inputs, two of them in one class;
 * most pages of one; noisy times, spells in which the leader changes, sampled observations and a few extra ones, as
 * --explain makes), one deciding every page in full, the other from a lease per input whenever
 * one answers and dropping them all at each observation (as the cursor's gen does). Every decision
 * and, at the end, every class's state are the same, also across the class's decision count's
 * wrap; and most decisions came from a lease. */
TEST(adaptive_1_8_lease_exact) {
    uint64_t rs = rl_test_seed();
    rl__adaptive_costs ec = rl__adaptive_embedded_costs();
    rl__adaptive_model a, b;
    rl__adaptive_init(&a, &ec);
    rl__adaptive_init(&b, &ec);
    rl__adaptive_inputs in[4] = {page(1, 60, 0, RL__ADAPTIVE_GROUPED), page(1, 90, 0, RL__ADAPTIVE_GROUPED),
                                 page(10, 60, 0, RL__ADAPTIVE_GROUPED), page(3, 60, 0, RL__ADAPTIVE_GROUPED)};
    double truth_ns[4][2];
    for (int i = 0; i < 4; i++) {
        in[i].rtt_index_ns = in[i].rtt_records_ns = in[i].rtt_s2s_ns = 0;
        truth_ns[i][RL__ADAPTIVE_SF] = rl__adaptive_estimate(&ec, &in[i], RL__ADAPTIVE_SF);
        truth_ns[i][RL__ADAPTIVE_RF] = (i % 2 ? 0.9 : 1.15) * truth_ns[i][RL__ADAPTIVE_SF];
    }
    rl__adaptive_lease lease[4];
    int have[4] = {0}, taken = 0;
    const int n = 200000;
    for (int p = 0; p < n; p++) {
        if (p == n / 2) /* the wrap of the class's uint32_t decision count, mid-stream */
            for (int k = 0; k < RL__ADAPTIVE_ALL_CLASSES; k++)
                a.cls[k].decisions = b.cls[k].decisions = UINT32_MAX - 3000;
        int i = rl_test_rand_below(&rs, 10) ? 0 : 1 + (int)rl_test_rand_below(&rs, 3); /* mostly one query */
        rl__adaptive_decision da, db;
        rl__adaptive_decide(&a, &in[i], &da);
        if (have[i] && rl__adaptive_lease_take(&b, &lease[i], &db)) {
            taken++;
        } else {
            rl__adaptive_decide(&b, &in[i], &db);
            have[i] = rl__adaptive_lease_grant(&b, &db, &lease[i]);
        }
        ASSERT_EQ(da.method, db.method);
        ASSERT_EQ(da.explored, db.explored);
        ASSERT_EQ(da.observe, db.observe);
        ASSERT_EQ(da.size_class, db.size_class);
        ASSERT_TRUE(da.est_ns[0] == db.est_ns[0] && da.est_ns[1] == db.est_ns[1]);
        if (da.observe || rl_test_rand_below(&rs, 100) == 0) {
            /* Spells of 2,000 pages every 10,000 in which the methods trade places; 1 % hiccups. */
            int spell = p % 10000 >= 8000;
            double t = truth_ns[i][spell ? 1 - da.method : da.method];
            t *= 0.9 + 0.2 * (double)rl_test_rand_below(&rs, 1000) / 1000.0;
            if (rl_test_rand_below(&rs, 100) == 0) t *= 20;
            rl__adaptive_observe(&a, &da, t);
            rl__adaptive_observe(&b, &db, t);
            memset(have, 0, sizeof have);
        }
    }
    printf("%d of %d decisions from a lease; %" PRIu64 " explorations\n", taken, n, a.explorations);
    ASSERT_TRUE(memcmp(a.cls, b.cls, sizeof a.cls) == 0);
    ASSERT_TRUE(a.decisions == b.decisions && a.explorations == b.explorations && a.observe_asked == b.observe_asked &&
                a.spells == b.spells);
    ASSERT_TRUE(a.explorations > 100);
    ASSERT_TRUE(taken > n / 2);
}

RL_TEST_MAIN(T(adaptive_1_1_formulas), T(adaptive_1_2_regimes), T(adaptive_1_3_calibration_converges),
             T(adaptive_1_4_exploration_bounded), T(adaptive_1_5_no_costly_exploration),
             T(adaptive_1_6_exploration_cost_bounded), T(adaptive_1_7_observation_sampled), T(adaptive_1_8_lease_exact))
