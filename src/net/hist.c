/* hist.c — rl__lat_hist, a fixed-size log-linear latency histogram (loop.h).
 *
 * Bucket i < 32 holds exactly the value i (ns). Above, value v with e = floor(log2 v) (5 <= e <= 40)
 * goes to bucket 32 + (e - 5) * 16 + ((v >> (e - 4)) & 15): 16 buckets per power of two, each
 * 2^(e-4) wide, so a bucket's width is at most 1/16 of its lower bound. Values of 2^41 ns and more
 * land in the last bucket. Quantiles report the bucket middle, clamped to the exact min and max.
 */
#include <string.h>

#include "net/loop.h"

static unsigned bucket_of(uint64_t v) {
    if (v < 32) return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v);
    if (e > 40) return RL_LAT_BUCKETS - 1;
    return 32u + (e - 5u) * 16u + (unsigned)((v >> (e - 4u)) & 15u);
}

/* The [lo, hi] values of bucket i. */
static void bucket_range(unsigned i, uint64_t *lo, uint64_t *hi) {
    if (i < 32) {
        *lo = *hi = i;
        return;
    }
    unsigned e = (i - 32u) / 16u + 5u, sub = (i - 32u) % 16u;
    *lo = (uint64_t)(16u + sub) << (e - 4u);
    *hi = *lo + ((uint64_t)1 << (e - 4u)) - 1;
}

void rl__lat_hist_reset(rl__lat_hist *h) { memset(h, 0, sizeof *h); }

void rl__lat_hist_add(rl__lat_hist *h, uint64_t ns) {
    if (h->count == 0 || ns < h->min_ns) h->min_ns = ns;
    if (ns > h->max_ns) h->max_ns = ns;
    h->count++;
    h->sum_ns += ns;
    h->bucket[bucket_of(ns)]++;
}

uint64_t rl__lat_hist_quantile(const rl__lat_hist *h, double q) {
    if (h->count == 0) return 0;
    if (q <= 0) return h->min_ns;
    if (q >= 1) return h->max_ns;
    uint64_t rank = (uint64_t)(q * (double)h->count);
    if ((double)rank < q * (double)h->count) rank++;
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < RL_LAT_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t lo, hi;
            bucket_range(i, &lo, &hi);
            uint64_t mid = lo + (hi - lo) / 2;
            if (mid < h->min_ns) mid = h->min_ns;
            if (mid > h->max_ns) mid = h->max_ns;
            return mid;
        }
    }
    return h->max_ns;
}

void rl__lat_hist_merge(rl__lat_hist *dst, const rl__lat_hist *src) {
    if (src->count == 0) return;
    if (dst->count == 0 || src->min_ns < dst->min_ns) dst->min_ns = src->min_ns;
    if (src->max_ns > dst->max_ns) dst->max_ns = src->max_ns;
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    for (unsigned i = 0; i < RL_LAT_BUCKETS; i++) dst->bucket[i] += src->bucket[i];
}
