/* test_stats.c — the campaign's statistics (src/bench/stats.c) on data with known answers.
 *
 *   stats_1_1  PRNG: splitmix64's published first outputs from 0; xoshiro256** from the state
 *              {1, 2, 3, 4} (outputs worked out by hand: 11520, 0, 1509978240); below(n) stays
 *              below n, below(1) is 0, and 60,000 draws below 6 are uniform (chi-square < 25)
 *   stats_1_2  median, quantiles (R type 7), min/max, geometric mean: hand-computed cases and
 *              the undefined ones (empty, zero, negative, infinite)
 *   stats_1_3  ratios: ordinary, 0/0, x/0, 0/x, negative and non-finite inputs
 *   stats_1_4  bootstrap, hand-computed: one block gives [r, r]; equal blocks give [r, r]; two
 *              blocks {1, 4} give [1, 4]; logs {0, 1, 2} give [1, e^2] (P(all three draws equal
 *              0) = 1/27 > 2.5 %); {1, 1, 1, 16} give [1, 8] (P(k = 4) = 1/256 < 2.5 % <
 *              P(k >= 3) = 13/256, where k counts the 16s drawn: 16^(3/4) = 8)
 *   stats_1_5  bootstrap properties: same seed same interval; low <= high; min <= low and
 *              high <= max; scaling every ratio by c scales the interval by c; the interval holds
 *              the geometric mean of the data for typical data; coverage of the true geometric
 *              mean for lognormal samples of 6 blocks is plausible (between 75 % and 99 % of 300)
 *   stats_1_6  summarise: geometric mean and interval of num/den; all 0/0 is ZERO_ZERO; one
 *              undefined block makes the summary undefined; bad arguments refused
 *   stats_1_7  the latency histogram: values below 64 have their own bucket; every value lies in
 *              its bucket's range, whose width is at most 1/32 of its lower bound; bucket indices
 *              never decrease with the value and stay below RL_STATS_HIST_BUCKETS up to 2^64 - 1; quantiles
 *              of known counts (1..100 µs: p50 near 50 µs, p99 near 99 µs, within 1.6 %), of one
 *              value, and NaN of none
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stats.h"
#include "test.h"

#define NEAR(a, b, tol)                                                \
    do {                                                               \
        double a_ = (a), b_ = (b);                                     \
        if (!(fabs(a_ - b_) <= (tol) * (fabs(b_) > 1 ? fabs(b_) : 1))) \
            fail_msg("%s = %.17g, expected %.17g", #a, a_, b_);        \
    } while (0)

TEST(stats_1_1_prng) {
    uint64_t x = 0;
    ASSERT_TRUE(rl__stats_splitmix64(&x) == 0xe220a8397b1dcdafull);
    ASSERT_TRUE(rl__stats_splitmix64(&x) == 0x6e789e6aa1b965f4ull);
    ASSERT_TRUE(rl__stats_splitmix64(&x) == 0x06c45d188009454full);
    rl__stats_rng r = {{1, 2, 3, 4}};
    ASSERT_TRUE(rl__stats_rng_next(&r) == 11520);
    ASSERT_TRUE(rl__stats_rng_next(&r) == 0);
    ASSERT_TRUE(rl__stats_rng_next(&r) == 1509978240);
    rl__stats_rng_seed(&r, 42);
    int counts[6] = {0};
    for (int i = 0; i < 60000; i++) {
        uint64_t v = rl__stats_rng_below(&r, 6);
        ASSERT_TRUE(v < 6);
        counts[v]++;
    }
    double chi = 0;
    for (int i = 0; i < 6; i++) chi += (counts[i] - 10000.0) * (counts[i] - 10000.0) / 10000.0;
    if (chi >= 25) fail_msg("chi-square %g over 5 degrees of freedom", chi);
    for (int i = 0; i < 100; i++) ASSERT_TRUE(rl__stats_rng_below(&r, 1) == 0);
    for (uint64_t n = 2; n < 1000; n = n * 3 + 1)
        for (int i = 0; i < 100; i++) ASSERT_TRUE(rl__stats_rng_below(&r, n) < n);
    ASSERT_TRUE(rl__stats_rng_below(&r, UINT64_MAX) < UINT64_MAX);
}

TEST(stats_1_2_descriptive) {
    double tmp[8];
    double a[] = {3, 1, 2}, b[] = {4, 1, 3, 2}, c[] = {7};
    NEAR(rl__stats_median(a, 3, tmp), 2, 0);
    NEAR(rl__stats_median(b, 4, tmp), 2.5, 0);
    NEAR(rl__stats_median(c, 1, tmp), 7, 0);
    ASSERT_TRUE(isnan(rl__stats_median(a, 0, tmp)));
    ASSERT_TRUE(a[0] == 3 && a[1] == 1); /* the input is not sorted in place */
    double s[] = {1, 2, 3, 4, 5};
    NEAR(rl__stats_quantile_sorted(s, 5, 0), 1, 0);
    NEAR(rl__stats_quantile_sorted(s, 5, 0.25), 2, 1e-15);
    NEAR(rl__stats_quantile_sorted(s, 5, 0.1), 1.4, 1e-15);
    NEAR(rl__stats_quantile_sorted(s, 5, 0.975), 4.9, 1e-15);
    NEAR(rl__stats_quantile_sorted(s, 5, 1), 5, 0);
    NEAR(rl__stats_quantile_sorted(c, 1, 0.3), 7, 0);
    ASSERT_TRUE(isnan(rl__stats_quantile_sorted(s, 0, 0.5)));
    ASSERT_TRUE(isnan(rl__stats_quantile_sorted(s, 5, 1.5)));
    NEAR(rl__stats_min(b, 4), 1, 0);
    NEAR(rl__stats_max(b, 4), 4, 0);
    ASSERT_TRUE(isnan(rl__stats_min(b, 0)) && isnan(rl__stats_max(b, 0)));
    double g1[] = {1, 4}, g2[] = {2, 8}, g3[] = {1, 10, 100}, g4[] = {0.5, 0.5, 0.5, 0.5};
    NEAR(rl__stats_geomean(g1, 2), 2, 1e-15);
    NEAR(rl__stats_geomean(g2, 2), 4, 1e-15);
    NEAR(rl__stats_geomean(g3, 3), 10, 1e-14);
    NEAR(rl__stats_geomean(g4, 4), 0.5, 1e-15);
    double z[] = {1, 0}, neg[] = {1, -2}, inf[] = {1, INFINITY};
    ASSERT_TRUE(isnan(rl__stats_geomean(z, 2)));
    ASSERT_TRUE(isnan(rl__stats_geomean(neg, 2)));
    ASSERT_TRUE(isnan(rl__stats_geomean(inf, 2)));
    ASSERT_TRUE(isnan(rl__stats_geomean(g1, 0)));
}

TEST(stats_1_3_ratios) {
    double r;
    ASSERT_EQ(rl__stats_ratio(3, 4, &r), RL_STATS_RATIO_OK);
    NEAR(r, 0.75, 0);
    ASSERT_EQ(rl__stats_ratio(0, 0, &r), RL_STATS_RATIO_ZERO_ZERO);
    ASSERT_TRUE(isnan(r));
    ASSERT_EQ(rl__stats_ratio(1, 0, &r), RL_STATS_RATIO_UNDEFINED);
    ASSERT_EQ(rl__stats_ratio(0, 1, &r), RL_STATS_RATIO_UNDEFINED);
    ASSERT_EQ(rl__stats_ratio(-1, 1, &r), RL_STATS_RATIO_UNDEFINED);
    ASSERT_EQ(rl__stats_ratio(NAN, 1, &r), RL_STATS_RATIO_UNDEFINED);
    ASSERT_EQ(rl__stats_ratio(1, INFINITY, &r), RL_STATS_RATIO_UNDEFINED);
    ASSERT_TRUE(isnan(r));
}

TEST(stats_1_4_bootstrap_known) {
    double lo, hi;
    double one[] = {0.79};
    ASSERT_OK(rl__stats_bootstrap_geomean(one, 1, 20000, 1, 0.95, &lo, &hi));
    NEAR(lo, 0.79, 0);
    NEAR(hi, 0.79, 0);
    double eq[] = {1.25, 1.25, 1.25, 1.25, 1.25, 1.25};
    ASSERT_OK(rl__stats_bootstrap_geomean(eq, 6, 20000, 391706, 0.95, &lo, &hi));
    NEAR(lo, 1.25, 1e-14);
    NEAR(hi, 1.25, 1e-14);
    double two[] = {1, 4};
    ASSERT_OK(rl__stats_bootstrap_geomean(two, 2, 20000, 492817, 0.95, &lo, &hi));
    NEAR(lo, 1, 1e-15);
    NEAR(hi, 4, 1e-15);
    double three[] = {1, exp(1.0), exp(2.0)};
    ASSERT_OK(rl__stats_bootstrap_geomean(three, 3, 20000, 7, 0.95, &lo, &hi));
    NEAR(lo, 1, 1e-14);
    NEAR(hi, exp(2.0), 1e-14);
    double four[] = {1, 1, 1, 16};
    for (uint64_t seed = 1; seed <= 5; seed++) {
        ASSERT_OK(rl__stats_bootstrap_geomean(four, 4, 20000, seed, 0.95, &lo, &hi));
        NEAR(lo, 1, 1e-14);
        NEAR(hi, 8, 1e-14);
    }
}

TEST(stats_1_5_bootstrap_properties) {
    uint64_t seed = rl_test_seed(), st = seed;
    for (int trial = 0; trial < 50; trial++) {
        size_t n = 1 + rl_test_rand_below(&st, 10);
        double x[16], y[16], lo, hi, lo2, hi2, lo3, hi3;
        double c = 0.01 + (double)rl_test_rand_below(&st, 1000) / 10.0;
        for (size_t i = 0; i < n; i++) {
            x[i] = 0.05 + (double)rl_test_rand_below(&st, 100000) / 10000.0;
            y[i] = x[i] * c;
        }
        uint64_t bs = rl_test_rand(&st);
        ASSERT_OK(rl__stats_bootstrap_geomean(x, n, 2000, bs, 0.95, &lo, &hi));
        ASSERT_OK(rl__stats_bootstrap_geomean(x, n, 2000, bs, 0.95, &lo2, &hi2));
        ASSERT_TRUE(lo == lo2 && hi == hi2);
        ASSERT_TRUE(lo <= hi);
        ASSERT_TRUE(lo >= rl__stats_min(x, n) * (1 - 1e-12));
        ASSERT_TRUE(hi <= rl__stats_max(x, n) * (1 + 1e-12));
        ASSERT_OK(rl__stats_bootstrap_geomean(y, n, 2000, bs, 0.95, &lo3, &hi3));
        NEAR(lo3, lo * c, 1e-9);
        NEAR(hi3, hi * c, 1e-9);
        double g = rl__stats_geomean(x, n);
        if (n >= 3) ASSERT_TRUE(lo <= g * (1 + 1e-12) || hi >= g);
    }
    /* Coverage: 300 campaigns of 6 lognormal block ratios around a true geometric mean of 0.8. */
    int covered = 0;
    for (int sim = 0; sim < 300; sim++) {
        double x[6], lo, hi;
        for (int i = 0; i < 6; i++) {
            double u1 = ((double)rl_test_rand_below(&st, 1u << 30) + 0.5) / (double)(1u << 30);
            double u2 = ((double)rl_test_rand_below(&st, 1u << 30) + 0.5) / (double)(1u << 30);
            double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
            x[i] = 0.8 * exp(0.05 * z);
        }
        ASSERT_OK(rl__stats_bootstrap_geomean(x, 6, 2000, (uint64_t)sim, 0.95, &lo, &hi));
        covered += lo <= 0.8 && 0.8 <= hi;
    }
    if (covered < 225 || covered > 297) fail_msg("covered %d of 300", covered);
}

TEST(stats_1_6_summarise) {
    double num[] = {2, 3, 4}, den[] = {4, 4, 4}, br[3];
    rl__stats_summary s;
    ASSERT_OK(rl__stats_summarise(num, den, 3, 5000, 3, 0.95, br, &s));
    ASSERT_EQ(s.status, RL_STATS_RATIO_OK);
    ASSERT_EQ(s.n_blocks, 3);
    NEAR(br[0], 0.5, 0);
    NEAR(br[2], 1, 0);
    NEAR(s.ratio, cbrt(0.5 * 0.75 * 1.0), 1e-14);
    double lo, hi, r3[] = {0.5, 0.75, 1};
    ASSERT_OK(rl__stats_bootstrap_geomean(r3, 3, 5000, 3, 0.95, &lo, &hi));
    ASSERT_TRUE(s.ci_low == lo && s.ci_high == hi);
    double zn[] = {0, 0}, zd[] = {0, 0};
    ASSERT_OK(rl__stats_summarise(zn, zd, 2, 5000, 3, 0.95, NULL, &s));
    ASSERT_EQ(s.status, RL_STATS_RATIO_ZERO_ZERO);
    ASSERT_TRUE(isnan(s.ratio));
    double mn[] = {1, 0}, md[] = {1, 0};
    ASSERT_OK(rl__stats_summarise(mn, md, 2, 5000, 3, 0.95, br, &s));
    ASSERT_EQ(s.status, RL_STATS_RATIO_UNDEFINED);
    ASSERT_TRUE(isnan(s.ratio) && isnan(s.ci_low));
    NEAR(br[0], 1, 0);
    ASSERT_TRUE(isnan(br[1]));
    double un[] = {1, 5}, ud[] = {1, 0};
    ASSERT_OK(rl__stats_summarise(un, ud, 2, 5000, 3, 0.95, NULL, &s));
    ASSERT_EQ(s.status, RL_STATS_RATIO_UNDEFINED);
    ASSERT_OK(rl__stats_summarise(un, ud, 0, 5000, 3, 0.95, NULL, &s));
    ASSERT_EQ(s.status, RL_STATS_RATIO_UNDEFINED);
    ASSERT_EQ(s.n_blocks, 0);
    ASSERT_RC(rl__stats_summarise(num, den, 3, 0, 3, 0.95, NULL, &s), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__stats_summarise(num, den, 3, 10, 3, 1.0, NULL, &s), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__stats_bootstrap_geomean(num, 0, 10, 3, 0.95, &lo, &hi), RL_E_INVALID_ARGUMENT);
    double bad[] = {1, -1};
    ASSERT_RC(rl__stats_bootstrap_geomean(bad, 2, 10, 3, 0.95, &lo, &hi), RL_E_INVALID_ARGUMENT);
}

TEST(stats_1_7_histogram) {
    uint64_t lo, w;
    for (uint64_t v = 0; v < 64; v++) ASSERT_EQ(rl__stats_hist_index(v), (int)v);
    int prev = -1;
    uint64_t vals[] = {
        64, 65, 100, 127, 128, 1000, 4095, 4096, 123456, 1ull << 40, (1ull << 40) + 12345, UINT64_MAX / 3, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        int b = rl__stats_hist_index(vals[i]);
        ASSERT_TRUE(b >= prev); /* never decreasing (64 and 65 share a bucket of width 2) */
        ASSERT_TRUE(b >= 0 && b < RL_STATS_HIST_BUCKETS);
        rl__stats_hist_range(b, &lo, &w);
        ASSERT_TRUE(lo <= vals[i] && vals[i] - lo < w);
        ASSERT_TRUE(w == 1 || w * 32 <= lo);
        prev = b;
    }
    for (uint64_t v = 1; v < 1000000; v = v * 3 + 1) { /* neighbouring buckets meet */
        int b = rl__stats_hist_index(v);
        rl__stats_hist_range(b, &lo, &w);
        ASSERT_EQ(rl__stats_hist_index(lo + w), b + 1);
    }
    uint64_t *h = calloc(RL_STATS_HIST_BUCKETS, sizeof *h);
    ASSERT_NOT_NULL(h);
    ASSERT_TRUE(isnan(rl__stats_hist_quantile(h, 0.5)));
    for (int us = 1; us <= 100; us++) h[rl__stats_hist_index((uint64_t)us * 1000)]++;
    NEAR(rl__stats_hist_quantile(h, 0.50), 50000, 0.016);
    NEAR(rl__stats_hist_quantile(h, 0.99), 99000, 0.016);
    NEAR(rl__stats_hist_quantile(h, 0), 1000, 0.016);
    memset(h, 0, RL_STATS_HIST_BUCKETS * sizeof *h);
    h[rl__stats_hist_index(7)] = 5;
    NEAR(rl__stats_hist_quantile(h, 0.99), 7, 0);
    free(h);
}

RL_TEST_MAIN(T(stats_1_1_prng), T(stats_1_2_descriptive), T(stats_1_3_ratios), T(stats_1_4_bootstrap_known),
             T(stats_1_5_bootstrap_properties), T(stats_1_6_summarise), T(stats_1_7_histogram))
