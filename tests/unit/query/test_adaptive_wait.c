/* test_adaptive_wait.c — the ADAPTIVE method observes a page's time without the wait for the
 * transaction's read version (both methods pay it, so it tells the model nothing and
 * its noise flips short queries' choice). Pure: rl__adaptive_less_wait on synthetic timelines, and
 * the model (src/query/adaptive.h) fed the same noisy pages with the wait in and taken out.
 *
 *   adaptive-3.1  rl__adaptive_less_wait: the time of a call outside the wait, for a wait before,
 *                 after, around, inside or across the call, one still running (ready 0), none
 *                 (asked 0); summed over the calls of a page it is the page less the wait's part
 *                 in it, whatever the cut into calls
 *   adaptive-3.2  a stream of limit-1 queries on a synthetic cluster whose first page pays a
 *                 read-version wait of one round trip with heavy upward noise (another process,
 *                 a queue at the coordinator): the model fed each page's timeline through
 *                 rl__adaptive_less_wait makes exactly the decisions of a model fed the pages'
 *                 own times (no wait at all), settles on the truly cheaper method and keeps to it
 *                 except for bounded explorations (and rechecks after a burst of slow pages, the
 *                 pages' own noise); the model fed the raw times (wait included) is printed
 *                 beside it for comparison
 *   adaptive-3.3  the calibration's own log and exp (no libm call per observation) agree with
 *                 libm's to 1e-9 over the factors' range
 *   adaptive-3.4  slow spells that slow both methods alike (the machine, not the method): fresh
 *                 models of ~110 pages each (a campaign's process of 1,000-row queries, remote
 *                 fetch 1.23x cheaper) through spells of 5-40 pages at 1.3-2x: the model keeps
 *                 the cheaper method through them — a recheck that finds the method that lost
 *                 the lead no slower than the leader's page of the same spell gives it back
 *                 (rl__adaptive_observe) — so the pages cost within 1.5 % of always-best
 *   adaptive-3.5  the spell rule raises the leader's estimate to its page of the spell, and it
 *                 stays so until that method runs again: a real change 30 pages after the spell
 *                 that makes that method the cheaper by 1.16x is still followed within a few
 *                 pages (the other method's own slower pages cost it the lead), not left to a
 *                 probe 500 pages later. (Lowering the raised estimate back when the other
 *                 method's pages showed the spell over was tried: it changed nothing here and
 *                 doubled adaptive-3.4's wrong pages in spells, 2.8 % to 5.7 %.)
 *   adaptive-3.6  embedded short pages (10 small rows, ~5 µs, remote fetch 1.07x cheaper) with
 *                 what such pages meet: a hiccup now and then (an interrupt or a preemption makes
 *                 one page 3-200x slower) and short slow spells. Observed as the cursor observes
 *                 them (out->observe). No method is locked out: every process runs the cheaper
 *                 method on nearly all its pages, with no run of the slower one longer than a
 *                 few thousand pages (the embedded campaigns of 2026-12-06 had processes on
 *                 SCAN_AND_FETCH for whole 1.5-3 s repeats: a hiccup taken as a spell's level
 *                 put remote fetch past every exploration bound)
 */
#include <math.h>
#include <stdlib.h>

#include "test.h"

#include "query/adaptive.h"

#define US 1000.0

/* adaptive-3.1 */
TEST(adaptive_3_1_less_wait) {
    /* No wait: the whole call. */
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 0, 0), 100);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 0, 150), 100); /* asked 0: nothing to take out */
    /* A wait that ended before the call, or starts after it. */
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 10, 90), 100);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 10, 100), 100);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 200, 300), 100);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 250, 0), 100);
    /* Inside, across the start, across the end, around. */
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 120, 170), 50);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 50, 130), 70);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 180, 260), 80);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 50, 260), 0);
    /* Still waiting at the call's end: the wait runs to it. */
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 140, 0), 40);
    ASSERT_EQ(rl__adaptive_less_wait(100, 200, 90, 0), 0);
    /* An empty or inverted call. */
    ASSERT_EQ(rl__adaptive_less_wait(200, 200, 0, 0), 0);
    ASSERT_EQ(rl__adaptive_less_wait(300, 200, 0, 0), 0);
    /* Over a page's calls (the cursor sums them; between calls the caller's time is not the
     * page's): random cuts of [0, 10000) into calls with gaps, a random wait. */
    uint64_t rs = rl_test_seed();
    for (int it = 0; it < 2000; it++) {
        uint64_t asked = 1 + rl_test_rand_below(&rs, 12000),
                 /* 0 would be "no wait" */ ready = asked + 1 + rl_test_rand_below(&rs, 6000);
        uint64_t t = 0, sum = 0, want = 0;
        while (t < 10000) {
            uint64_t t0 = t, t1 = t0 + 1 + rl_test_rand_below(&rs, 3000);
            if (t1 > 10000) t1 = 10000;
            /* The call's view of the wait: not arrived yet when ready is after its end. */
            uint64_t seen_ready = ready <= t1 ? ready : 0, seen_asked = asked < t1 ? asked : 0;
            sum += rl__adaptive_less_wait(t0, t1, seen_asked, seen_ready);
            for (uint64_t x = t0; x < t1; x++) want += !(x >= asked && x < ready);
            t = t1 + rl_test_rand_below(&rs, 500); /* the caller's time between calls */
        }
        if (sum != want)
            fail_msg("wait [%llu, %llu): %llu outside it, want %llu", (unsigned long long)asked,
                     (unsigned long long)ready, (unsigned long long)sum, (unsigned long long)want);
    }
}

/* A limit-1 page on one server at a 0.55 ms round trip, as rl__adaptive_inputs. */
static rl__adaptive_inputs limit1_page(void) {
    rl__adaptive_inputs in = {
        .rows = 1,
        .bytes_per_row = 60,
        .kvs_per_record = 1,
        .pipeline_depth = 10,
        .index_page_rows = 1,
        .mapped_page_bytes = 1 << 20,
        .rtt_index_ns = 550 * US,
        .rtt_records_ns = 550 * US,
        .rtt_s2s_ns = 550 * US,
        .frac_remote = 0,
        .strategy = RL__ADAPTIVE_GROUPED,
        .s2s_batch = 10,
    };
    return in;
}

/* Upward-only noise of a loaded machine: most pages within 5 %, some 1.2-2x, a few 2-4x. */
static double noise(uint64_t *rs) {
    uint64_t r = rl_test_rand_below(rs, 100);
    if (r < 80) return 1.0 + (double)rl_test_rand_below(rs, 50) / 1000.0;
    if (r < 95) return 1.2 + (double)rl_test_rand_below(rs, 800) / 1000.0;
    return 2.0 + (double)rl_test_rand_below(rs, 2000) / 1000.0;
}

/* adaptive-3.2 */
TEST(adaptive_3_2_converges_without_the_wait) {
    /* The synthetic truth: both methods' own page work is off the model by a factor (the model
     * is a model), remote fetch 1.25x cheaper — close, as short queries' methods are; the read
     * version costs one round trip, its noise heavier than the pages' (a queue at the
     * coordinator, another process). */
    const double work[2] = {1.4 * 1100 * US, 1.12 * 1100 * US}; /* SF, RF */
    const int best = RL__ADAPTIVE_RF;
    rl__adaptive_model taken_out, none, raw;
    rl__adaptive_init(&taken_out, NULL);
    rl__adaptive_init(&none, NULL);
    rl__adaptive_init(&raw, NULL);
    uint64_t rs = rl_test_seed();
    int n = 2000, warm = 40, wrong_taken = 0, wrong_raw = 0, explored_taken = 0, differ = 0;
    double spent_taken = 0, spent_raw = 0, best_total = 0;
    for (int q = 0; q < n; q++) {
        rl__adaptive_inputs in = limit1_page();
        rl__adaptive_decision dt, dn, dr;
        rl__adaptive_decide(&taken_out, &in, &dt);
        rl__adaptive_decide(&none, &in, &dn);
        rl__adaptive_decide(&raw, &in, &dr);
        differ += dt.method != dn.method;
        /* The page's timeline (ns from the page's start): its first read waits for the read
         * version, asked at 2 µs and arriving one noisy round trip later; then the method's own
         * work, with the page's noise. One call for the whole page (limit 1). */
        double w = 550 * US * noise(&rs) * noise(&rs);
        uint64_t asked = 2000, ready = asked + (uint64_t)w;
        double nz = noise(&rs), own_t = work[dt.method] * nz, own_r = work[dr.method] * nz;
        uint64_t end_t = ready + (uint64_t)own_t, end_r = ready + (uint64_t)own_r;
        double obs_t = (double)rl__adaptive_less_wait(0, end_t, asked, ready);
        ASSERT_TRUE(fabs(obs_t - (double)((uint64_t)own_t + asked)) < 1.0); /* the work, exactly */
        rl__adaptive_observe(&taken_out, &dt, obs_t);
        rl__adaptive_observe(&none, &dn, (double)((uint64_t)own_t + asked)); /* the same page, no wait */
        rl__adaptive_observe(&raw, &dr, (double)end_r);
        if (q >= warm) {
            wrong_taken += dt.method != best && !dt.explored;
            wrong_raw += dr.method != best && !dr.explored;
            explored_taken += dt.explored;
            spent_taken += own_t + w;
            spent_raw += own_r + w;
            best_total += work[best] * nz + w; /* the same page with the best method */
        }
    }
    int m = n - warm;
    printf("after %d queries: wait taken out: %d wrong choices, %d explorations, time %.4f of always-best; "
           "wait included: %d wrong choices, time %.4f\n",
           warm, wrong_taken, explored_taken, spent_taken / best_total, wrong_raw, spent_raw / best_total);
    ASSERT_EQ(differ, 0); /* taking the wait out = never having had it */
    /* Settled on the cheaper method: typically under 1 % of the pages wrong. A burst of slow
     * pages can leave it past the exploration bound until a probe: before the spell rule's bounds
     * (adaptive.h) the rule itself did so when the leader's page was a hiccup, 23-38 % wrong in 3
     * seeds of 100 (19, 47, 89: this assertion failed); with them 2 seeds in 400 still did (174,
     * 257: 22 %: a hiccup of the leader right after it won the lead taken for a spell; the other
     * method left at its spell page past the bound). With the rule's two mends of 2026-12-06
     * (adaptive.h) none of 2,000 seeds fails: 6.5 wrong on average, at most 230 (seed 1991). */
    ASSERT_TRUE(wrong_taken <= m / 5);
    /* Explorations: the periodic ones, the probes, and rechecks after a burst cost a method the
     * lead (at most 4 per change of lead; a few changes in 2,000 noisy pages). */
    ASSERT_TRUE(explored_taken <= m / RL__ADAPTIVE_EXPLORE_EVERY + m / RL__ADAPTIVE_PROBE_EVERY + m / 100);
    ASSERT_TRUE(spent_taken / best_total <= 1.04);
}

/* adaptive-3.3: the calibration's own log and exp agree with libm's over the factors' range. */
TEST(adaptive_3_3_log_exp) {
    double worst = 0;
    for (double x = 1e-6; x < 1e6; x *= 1.0137) {
        double e = fabs(rl__adaptive_log(x) - log(x)) / fmax(1e-3, fabs(log(x)));
        if (e > worst) worst = e;
        ASSERT_TRUE(e < 1e-9);
    }
    for (double x = -30; x < 30; x += 0.00731) {
        double e = fabs(rl__adaptive_exp(x) / exp(x) - 1);
        if (e > worst) worst = e;
        ASSERT_TRUE(e < 1e-9);
    }
    ASSERT_TRUE(fabs(rl__adaptive_log(1.0)) < 1e-15);
    ASSERT_TRUE(rl__adaptive_exp(0.0) == 1.0);
    ASSERT_TRUE(rl__adaptive_exp(NAN) > 0 && rl__adaptive_exp(1e9) > 1e300);
    printf("worst relative error %.3g\n", worst);
}

/* A 1,000-row page with every record on another server (grouped), on limit1_page's network. */
static rl__adaptive_inputs rows1000_remote_page(void) {
    rl__adaptive_inputs in = limit1_page();
    in.rows = 1000;
    in.index_page_rows = 1000;
    in.frac_remote = 1;
    return in;
}

/* adaptive-3.4 */
TEST(adaptive_3_4_common_spells) {
    /* The multi topology's skip3-rows1000 case: one 1,000-row page a query, every record on
     * another server (grouped), SCAN_AND_FETCH 86 ms and remote fetch 70 ms — each off the
     * model's prior by its own factor. */
    rl__adaptive_inputs in = rows1000_remote_page();
    const double work[2] = {86000 * US, 70000 * US}; /* SF, RF */
    const int best = RL__ADAPTIVE_RF;
    uint64_t rs = rl_test_seed();
    int procs = 300, pages = 110, warm = 10;
    long wrong_in = 0, wrong_out = 0, in_spell = 0, out_spell = 0, explored = 0, spells_seen = 0, undone = 0;
    double spent = 0, best_total = 0, worst_proc = 0;
    for (int p = 0; p < procs; p++) {
        rl__adaptive_model m;
        rl__adaptive_init(&m, NULL);
        int spell_left = 0;
        double slow = 1;
        double proc_spent = 0, proc_best = 0;
        for (int q = 0; q < pages; q++) {
            if (spell_left == 0 && rl_test_rand_below(&rs, 100) < 3) { /* a spell starts */
                spell_left = 5 + (int)rl_test_rand_below(&rs, 36);
                slow = 1.3 + (double)rl_test_rand_below(&rs, 700) / 1000.0;
                spells_seen++;
            }
            double s = spell_left > 0 ? slow : 1.0;
            rl__adaptive_decision d;
            rl__adaptive_decide(&m, &in, &d);
            double nz = 1.0 + (double)rl_test_rand_below(&rs, 50) / 1000.0; /* 0-5 % */
            double t = work[d.method] * s * nz;
            rl__adaptive_observe(&m, &d, t);
            if (q >= warm) {
                int wrong = d.method != best && !d.explored;
                if (spell_left > 0) {
                    wrong_in += wrong;
                    in_spell++;
                } else {
                    wrong_out += wrong;
                    out_spell++;
                }
                explored += d.explored;
                proc_spent += t;
                proc_best += work[best] * s * nz;
            }
            if (spell_left > 0) spell_left--;
        }
        spent += proc_spent;
        best_total += proc_best;
        undone += (long)m.spells;
        if (proc_spent / proc_best > worst_proc) worst_proc = proc_spent / proc_best;
    }
    printf("%ld spells; wrong choices: %ld of %ld pages in spells, %ld of %ld outside; %ld explorations; "
           "%ld changes of lead undone by the spell rule; time %.4f of always-best, worst process %.4f\n",
           spells_seen, wrong_in, in_spell, wrong_out, out_spell, explored, undone, spent / best_total, worst_proc);
    /* Without the spell rule (the model before it, over seeds 1-4): 10 % of the pages in spells
     * and 3.5-6.6 % after them wrong, 1.024-1.027 of always-best, single processes at 1.13-1.20.
     * With it, over 31 seeds: 2.6-3.0 % and under 0.6 %, 1.0076-1.0086, processes at most 1.11.
     * With its bounds of 2026-12-06 (adaptive.h), over 150 seeds: at most 3.3 % and 0.72 %,
     * 1.0074-1.0089, processes at most 1.144. */
    ASSERT_TRUE(spells_seen > procs / 2);   /* the simulation has spells to weather */
    ASSERT_TRUE(undone > 0);                /* ... and the rule met them */
    ASSERT_TRUE(wrong_in <= in_spell / 20); /* the cheaper method kept through them */
    ASSERT_TRUE(wrong_out <= out_spell / 100);
    ASSERT_TRUE(spent / best_total <= 1.015);
}

/* adaptive-3.5 */
TEST(adaptive_3_5_real_change_after_a_spell) {
    rl__adaptive_inputs in = rows1000_remote_page();
    uint64_t rs = rl_test_seed();
    /* 200 fresh models: 30 pages as before (SF 86 ms, RF 70 ms), a spell of 20 pages at 1.5x,
     * 30 pages as before, then RF becomes 100 ms for 300 pages (SF the cheaper by 1.16x). */
    int procs = 200, late = 0, undone = 0, worst = 0;
    for (int p = 0; p < procs; p++) {
        rl__adaptive_model m;
        rl__adaptive_init(&m, NULL);
        int wrong_after = 0;
        for (int q = 0; q < 380; q++) {
            double work[2] = {86000 * US, q >= 80 ? 100000 * US : 70000 * US};
            double s = q >= 30 && q < 50 ? 1.5 : 1.0;
            rl__adaptive_decision d;
            rl__adaptive_decide(&m, &in, &d);
            double nz = 1.0 + (double)rl_test_rand_below(&rs, 50) / 1000.0;
            rl__adaptive_observe(&m, &d, work[d.method] * s * nz);
            if (q >= 100 && d.method == RL__ADAPTIVE_RF && !d.explored) wrong_after++;
        }
        undone += (int)m.spells;
        late += wrong_after;
        if (wrong_after > worst) worst = wrong_after;
    }
    printf("%d changes of lead undone by the spell rule; after the change (from 20 pages on): %d RF pages "
           "of %d, worst process %d of 280\n",
           undone, late, procs * 280, worst);
    ASSERT_TRUE(undone >= procs / 2); /* the spell rule met the spell in most processes */
    /* Measured: 0.16-0.22 % of the pages, at most 6 in a process. */
    ASSERT_TRUE(late <= procs * 280 / 100);
    ASSERT_TRUE(worst <= 28);
}

/* adaptive-3.6 */
TEST(adaptive_3_6_hiccups_lock_nothing_out) {
    /* small-rows10-reverse on embedded: SCAN_AND_FETCH 5.2 µs, remote fetch 4.85 µs a page. */
    rl__adaptive_costs costs = rl__adaptive_embedded_costs();
    rl__adaptive_inputs in = limit1_page();
    in.rows = in.index_page_rows = 10;
    in.bytes_per_row = 111;
    in.rtt_index_ns = in.rtt_records_ns = in.rtt_s2s_ns = 0; /* no network */
    const double work[2] = {5.2 * US, 4.85 * US};            /* SF, RF */
    const int best = RL__ADAPTIVE_RF;
    uint64_t rs = rl_test_seed();
    int procs = 24, pages = 200000, warm = 100;
    long wrong = 0, counted = 0, hiccups = 0, spells = 0, longest = 0;
    double spent = 0, best_total = 0, worst_proc = 0;
    for (int p = 0; p < procs; p++) {
        rl__adaptive_model m;
        rl__adaptive_init(&m, &costs);
        int spell_left = 0;
        long run = 0;
        double slow = 1, proc_spent = 0, proc_best = 0;
        for (int q = 0; q < pages; q++) {
            if (spell_left == 0 && rl_test_rand_below(&rs, 10000) < 2) { /* a spell: 20-400 pages */
                spell_left = 20 + (int)rl_test_rand_below(&rs, 381);
                slow = 1.5 + (double)rl_test_rand_below(&rs, 1500) / 1000.0;
                spells++;
            }
            double s = spell_left > 0 ? slow : 1.0;
            if (spell_left > 0) spell_left--;
            if (rl_test_rand_below(&rs, 1000) < 5) { /* a hiccup: this page alone */
                s *= 3.0 + (double)rl_test_rand_below(&rs, 197);
                hiccups++;
            }
            rl__adaptive_decision d;
            rl__adaptive_decide(&m, &in, &d);
            double nz = 1.0 + (double)rl_test_rand_below(&rs, 80) / 1000.0; /* 0-8 % */
            double t = work[d.method] * s * nz;
            if (d.observe) rl__adaptive_observe(&m, &d, t);
            if (q < warm) continue;
            int w = d.method != best && !d.explored;
            wrong += w;
            counted++;
            run = w ? run + 1 : 0;
            if (run > longest) longest = run;
            proc_spent += t;
            proc_best += work[best] * s * nz;
        }
        spent += proc_spent;
        best_total += proc_best;
        if (proc_spent / proc_best > worst_proc) worst_proc = proc_spent / proc_best;
    }
    printf("%ld hiccups, %ld spells; wrong choices: %ld of %ld pages (%.2f %%), longest run %ld; time %.4f of "
           "always-best, worst process %.4f\n",
           hiccups, spells, wrong, counted, 100.0 * (double)wrong / (double)counted, longest, spent / best_total,
           worst_proc);
    /* Before the probe beyond PROBE_MAX and the spell rule's bound (seed 535880779019): 9.1 %
     * wrong, a process on SCAN_AND_FETCH for all its 199,900 pages, 1.0094 of always-best, worst
     * process 1.072. With them, over 400 seeds: 0.02-0.08 %, longest runs 30-893, 1.0035-1.0036,
     * worst process at most 1.0043. */
    ASSERT_TRUE(hiccups > procs * 500 && spells > procs * 10); /* the simulation has them */
    ASSERT_TRUE(wrong <= counted / 200);
    ASSERT_TRUE(longest <= 5000);
    ASSERT_TRUE(worst_proc <= 1.02);
    ASSERT_TRUE(spent / best_total <= 1.01);
}

RL_TEST_MAIN(T(adaptive_3_1_less_wait), T(adaptive_3_2_converges_without_the_wait), T(adaptive_3_3_log_exp),
             T(adaptive_3_4_common_spells), T(adaptive_3_5_real_change_after_a_spell),
             T(adaptive_3_6_hiccups_lock_nothing_out))
