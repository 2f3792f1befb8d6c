/* stats.h (internal) — the statistics of the benchmark campaign (docs/design.md §8.7):
 * medians, quantiles, geometric means, ratios with their zero cases, a seeded PRNG and the
 * block-bootstrap percentile interval of a geometric mean of block ratios.
 *
 * Every function is pure (no global state, no I/O); the only one that allocates is
 * rl__stats_bootstrap_geomean (its resample array). The bootstrap is specified exactly, so that
 * another implementation (a test, a script reading results.json) reproduces it bit for bit:
 *
 *   1. PRNG: the state s[0..3] is four successive outputs of splitmix64 started at the seed
 *      (z = (x += 0x9e3779b97f4a7c15); z = (z ^ z>>30) * 0xbf58476d1ce4e5b9;
 *      z = (z ^ z>>27) * 0x94d049bb133111eb; z ^ z>>31); outputs are xoshiro256**
 *      (rotl(s[1] * 5, 7) * 9, then the xoshiro256 state update).
 *   2. A uniform index below n (rl__stats_rng_below): draw x until x >= (2^64 - n) mod n, then
 *      x mod n (rejection, no bias).
 *   3. Resample k (k = 0 .. resamples-1): n indexes i_0..i_{n-1} drawn in turn; its statistic is
 *      exp((log x[i_0] + ... + log x[i_{n-1}]) / n), the sum taken left to right.
 *   4. The interval: the resample statistics sorted ascending, then the quantiles (1 - level) / 2
 *      and (1 + level) / 2 by linear interpolation between order statistics (R's type 7:
 *      h = (m - 1) p, value = s[floor h] + (h - floor h) (s[floor h + 1] - s[floor h])).
 *   Every summary of a campaign restarts the PRNG at the protocol's seed.
 *
 * NaN means "undefined" throughout (an empty input, a non-positive value under a log).
 */
#ifndef RL_BENCH_STATS_H
#define RL_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>

/* ---- PRNG -------------------------------------------------------------------------------- */

/* xoshiro256** state, seeded by splitmix64 (see the file comment). Caller-owned. */
typedef struct {
    uint64_t s[4];
} rl__stats_rng;

/* Seed r from seed (any value, 0 included). */
void rl__stats_rng_seed(rl__stats_rng *r, uint64_t seed);
/* The next 64-bit output. */
uint64_t rl__stats_rng_next(rl__stats_rng *r);
/* A uniform integer in [0, n) without bias; n >= 1 (n == 1 gives 0 and still draws once). */
uint64_t rl__stats_rng_below(rl__stats_rng *r, uint64_t n);
/* One splitmix64 step on *x (what seeds the state; exposed for tests). */
uint64_t rl__stats_splitmix64(uint64_t *x);

/* ---- Descriptive statistics --------------------------------------------------------------- */

/* The median of v[0..n): the middle value of the sorted copy, or the mean of the two middle
 * values when n is even. tmp: scratch of n doubles (the caller's; may alias nothing in v).
 * NaN when n == 0. */
double rl__stats_median(const double *v, size_t n, double *tmp);
/* The p-quantile (0 <= p <= 1) of sorted[0..n) (ascending), R's type 7. NaN when n == 0. */
double rl__stats_quantile_sorted(const double *sorted, size_t n, double p);
/* Smallest / largest of v[0..n); NaN when n == 0. */
double rl__stats_min(const double *v, size_t n);
double rl__stats_max(const double *v, size_t n);
/* The geometric mean exp(mean(log v)); NaN when n == 0 or any value is <= 0 or not finite. */
double rl__stats_geomean(const double *v, size_t n);

/* ---- Ratios ------------------------------------------------------------------------------ */

/* What rl__stats_ratio found. */
typedef enum {
    RL_STATS_RATIO_OK = 0,    /* *out = num / den, finite and > 0 */
    RL_STATS_RATIO_ZERO_ZERO, /* both 0 (e.g. round trips on embedded): no ratio, *out NaN */
    RL_STATS_RATIO_UNDEFINED, /* den 0 with num > 0, num 0 with den > 0, a negative or non-finite
                               * input: no positive finite ratio, *out NaN */
} rl__stats_ratio_status;

/* num / den with the zero cases named (a geometric mean needs positive ratios). */
rl__stats_ratio_status rl__stats_ratio(double num, double den, double *out);

/* ---- The block bootstrap ----------------------------------------------------------------- */

/* rl__stats_bootstrap_geomean — the percentile interval of the geometric mean of x[0..n) (block
 * ratios, all > 0 and finite) by resampling the n blocks with replacement `resamples` times, as
 * the file comment specifies. [in] level: e.g. 0.95. [out] out_low, out_high.
 * Returns RL_OK, RL_E_INVALID_ARGUMENT (n == 0, resamples < 1, level not in (0, 1), a value of x
 * <= 0 or not finite), RL_E_OUT_OF_MEMORY. With n == 1 the interval is [x[0], x[0]]. */
int rl__stats_bootstrap_geomean(const double *x, size_t n, int resamples, uint64_t seed, double level, double *out_low,
                                double *out_high);

/* The summary of one comparison (arm / baseline) of one metric over the blocks of a case. */
typedef struct {
    int n_blocks;  /* block ratios that entered the summary */
    double ratio;  /* geometric mean of the block ratios (NaN: none) */
    double ci_low; /* the bootstrap interval (NaN: none) */
    double ci_high;
    rl__stats_ratio_status status; /* OK; ZERO_ZERO when every block was 0/0; else UNDEFINED when
                                   * some block had no positive finite ratio or no block had any */
} rl__stats_summary;

/* rl__stats_summarise — summarise n paired block values: block i contributes num[i] / den[i]
 * (rl__stats_ratio). If every block is 0/0 the status is ZERO_ZERO; if any block is UNDEFINED (or
 * n == 0, or a mix of 0/0 and real ratios) the summary is UNDEFINED (no ratio: a geometric mean
 * over the blocks that happen to be defined would hide the others); else ratio = geometric mean
 * and [ci_low, ci_high] = rl__stats_bootstrap_geomean. [out] block_ratios (n doubles, may be
 * NULL): each block's ratio or NaN. Returns RL_OK or RL_E_OUT_OF_MEMORY / RL_E_INVALID_ARGUMENT
 * from the bootstrap (bad resamples or level). */
int rl__stats_summarise(const double *num, const double *den, size_t n, int resamples, uint64_t seed, double level,
                        double *block_ratios, rl__stats_summary *out);

/* ---- Latency histogram (the throughput phase) ---------------------------------------------
 * Log-linear buckets of nanoseconds: values below 64 have their own bucket; above, each power of
 * two is cut into 32 equal buckets, so a bucket's width is at most 1/32 of its lower bound and the
 * value a quantile reports (the bucket's middle) is within 1.6 % of every value in it. Buckets
 * cover 0 .. 2^63 ns. Counts from several processes merge by adding bucket by bucket. */
#define RL_STATS_HIST_BUCKETS (64 + 58 * 32)

/* The bucket of v ns. Pure. */
int rl__stats_hist_index(uint64_t v);
/* The lowest value of bucket i and its width: [lo, lo + width). Pure. */
void rl__stats_hist_range(int i, uint64_t *out_lo, uint64_t *out_width);
/* The p-quantile (0 <= p <= 1) of the counts (RL_STATS_HIST_BUCKETS of them): the middle of the
 * bucket holding the ceil(p x total)-th value (at least the first); NaN when total is 0. Pure. */
double rl__stats_hist_quantile(const uint64_t *counts, double p);

#endif
