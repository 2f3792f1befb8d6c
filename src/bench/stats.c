/* stats.c — the campaign's statistics (see stats.h for the exact bootstrap procedure).
 *
 * Sorting is qsort over doubles with a total order that puts NaN last (inputs never hold NaN on
 * the paths that sort; the order only keeps qsort well-defined if one slips in).
 */
#include "bench/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "reclayer/error.h"

/* ---- PRNG -------------------------------------------------------------------------------- */

uint64_t rl__stats_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rl__stats_rng_seed(rl__stats_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = rl__stats_splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rl__stats_rng_next(rl__stats_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t rl__stats_rng_below(rl__stats_rng *r, uint64_t n) {
    uint64_t threshold = (0 - n) % n, x;
    do x = rl__stats_rng_next(r);
    while (x < threshold);
    return x % n;
}

/* ---- Descriptive statistics --------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return x < y ? -1 : x > y;
}

double rl__stats_median(const double *v, size_t n, double *tmp) {
    if (n == 0) return NAN;
    memcpy(tmp, v, n * sizeof *v);
    qsort(tmp, n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

double rl__stats_quantile_sorted(const double *s, size_t n, double p) {
    if (n == 0 || !(p >= 0 && p <= 1)) return NAN;
    double h = (double)(n - 1) * p;
    size_t lo = (size_t)floor(h);
    if (lo >= n - 1) return s[n - 1];
    return s[lo] + (h - (double)lo) * (s[lo + 1] - s[lo]);
}

double rl__stats_min(const double *v, size_t n) {
    if (n == 0) return NAN;
    double m = v[0];
    for (size_t i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

double rl__stats_max(const double *v, size_t n) {
    if (n == 0) return NAN;
    double m = v[0];
    for (size_t i = 1; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

double rl__stats_geomean(const double *v, size_t n) {
    double sum = 0;
    if (n == 0) return NAN;
    for (size_t i = 0; i < n; i++) {
        if (!(v[i] > 0) || !isfinite(v[i])) return NAN;
        sum += log(v[i]);
    }
    return exp(sum / (double)n);
}

/* ---- Ratios ------------------------------------------------------------------------------ */

rl__stats_ratio_status rl__stats_ratio(double num, double den, double *out) {
    *out = NAN;
    if (!isfinite(num) || !isfinite(den) || num < 0 || den < 0) return RL_STATS_RATIO_UNDEFINED;
    if (num == 0 && den == 0) return RL_STATS_RATIO_ZERO_ZERO;
    if (num == 0 || den == 0) return RL_STATS_RATIO_UNDEFINED;
    double r = num / den;
    if (!isfinite(r) || !(r > 0)) return RL_STATS_RATIO_UNDEFINED;
    *out = r;
    return RL_STATS_RATIO_OK;
}

/* ---- The block bootstrap ----------------------------------------------------------------- */

int rl__stats_bootstrap_geomean(const double *x, size_t n, int resamples, uint64_t seed, double level, double *out_low,
                                double *out_high) {
    double *logs = NULL, *stat = NULL;
    rl__stats_rng r;
    int rc = RL_OK;
    *out_low = *out_high = NAN;
    if (n == 0 || resamples < 1 || !(level > 0 && level < 1)) return RL_E_INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (!(x[i] > 0) || !isfinite(x[i])) return RL_E_INVALID_ARGUMENT;
    if (!(logs = rl__malloc(n * sizeof *logs)) || !(stat = rl__malloc((size_t)resamples * sizeof *stat))) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    for (size_t i = 0; i < n; i++) logs[i] = log(x[i]);
    rl__stats_rng_seed(&r, seed);
    for (int k = 0; k < resamples; k++) {
        double sum = 0;
        for (size_t j = 0; j < n; j++) sum += logs[rl__stats_rng_below(&r, n)];
        stat[k] = exp(sum / (double)n);
    }
    qsort(stat, (size_t)resamples, sizeof *stat, cmp_double);
    *out_low = rl__stats_quantile_sorted(stat, (size_t)resamples, (1 - level) / 2);
    *out_high = rl__stats_quantile_sorted(stat, (size_t)resamples, (1 + level) / 2);
done:
    rl__free(logs);
    rl__free(stat);
    return rc;
}

int rl__stats_summarise(const double *num, const double *den, size_t n, int resamples, uint64_t seed, double level,
                        double *block_ratios, rl__stats_summary *out) {
    double *r = NULL;
    size_t n_ok = 0, n_zz = 0;
    int rc = RL_OK;
    out->n_blocks = 0;
    out->ratio = out->ci_low = out->ci_high = NAN;
    out->status = RL_STATS_RATIO_UNDEFINED;
    if (n == 0) return RL_OK;
    if (!(r = rl__malloc(n * sizeof *r))) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        rl__stats_ratio_status st = rl__stats_ratio(num[i], den[i], &r[i]);
        if (block_ratios) block_ratios[i] = r[i];
        n_ok += st == RL_STATS_RATIO_OK;
        n_zz += st == RL_STATS_RATIO_ZERO_ZERO;
    }
    if (n_zz == n) {
        out->status = RL_STATS_RATIO_ZERO_ZERO;
        out->n_blocks = (int)n;
        goto done;
    }
    if (n_ok != n) goto done;
    out->n_blocks = (int)n;
    out->ratio = rl__stats_geomean(r, n);
    if ((rc = rl__stats_bootstrap_geomean(r, n, resamples, seed, level, &out->ci_low, &out->ci_high))) goto done;
    out->status = RL_STATS_RATIO_OK;
done:
    rl__free(r);
    return rc;
}

/* ---- Latency histogram --------------------------------------------------------------------------- */

static int msb64(uint64_t v) { return 63 - __builtin_clzll(v); }

int rl__stats_hist_index(uint64_t v) {
    if (v < 64) return (int)v;
    int sh = msb64(v) - 5; /* v >> sh in [32, 63] */
    return 64 + (sh - 1) * 32 + (int)((v >> sh) - 32);
}

void rl__stats_hist_range(int i, uint64_t *out_lo, uint64_t *out_width) {
    if (i < 64) {
        *out_lo = (uint64_t)i, *out_width = 1;
        return;
    }
    int sh = (i - 64) / 32 + 1;
    *out_lo = (uint64_t)(32 + (i - 64) % 32) << sh;
    *out_width = (uint64_t)1 << sh;
}

double rl__stats_hist_quantile(const uint64_t *counts, double p) {
    uint64_t total = 0, seen = 0;
    for (int i = 0; i < RL_STATS_HIST_BUCKETS; i++) total += counts[i];
    if (!total) return NAN;
    uint64_t rank = (uint64_t)ceil(p * (double)total);
    if (rank < 1) rank = 1;
    for (int i = 0; i < RL_STATS_HIST_BUCKETS; i++) {
        seen += counts[i];
        if (seen >= rank) {
            uint64_t lo, w;
            rl__stats_hist_range(i, &lo, &w);
            return (double)lo + (double)(w - 1) / 2;
        }
    }
    return NAN;
}
