/* sample.h (internal) — the byte sample: a deterministic sample of the key-value pairs present
 * at the latest version, weighted by size, from which the storage layer estimates the bytes of a
 * key range and cuts a range into chunks of about a given size (FoundationDB's storage-server byte
 * sample; docs/design.md §4, "Size estimates").
 *
 * Membership (FoundationDB's rule, its constants): a pair with key k (kl bytes) and a value of vl
 * bytes has size s = kl + vl and is in the sample with probability p = min(1, s / D), where
 * D = RL_SAMPLE_FACTOR * (kl + RL_SAMPLE_OVERHEAD); the coin is the high 32 bits of a hash of the
 * key alone, so membership is a function of the key and the size — the same after a restart, a
 * rebuild from the data, or on another server holding the pair. A sampled pair stands for
 * s / p = max(s, D) bytes (its weight), so a sum of weights is an unbiased estimate of the bytes
 * the pairs take, with variance sum(s * D * (1 - p)) <= B * D_max for B bytes (kv.h states the
 * bound the public calls promise).
 *
 * Structure: the sampled keys in key order, each with its weight, in chunks of up to
 * BS_CHUNK entries, each chunk keeping the sum of its weights, behind one sorted array of chunk
 * pointers. A change of a pair that is in the sample neither before nor after costs one hash and
 * two multiplications (rl__bsample_note), which is every write but about 1 in 250 bytes.
 *
 * Invariants:
 *   1. Entries are strictly ascending by key across chunks in order; every chunk holds
 *      1..BS_CHUNK entries; chunk->sum is the sum of its entries' weights; total and count are the
 *      sums over all chunks.
 *   2. An entry exists for key k exactly when the pair k holds at the latest version is in the
 *      sample, and its weight is that pair's weight.
 *
 * Threads: none of its own; the storage engine's lock guards it (writes under the write lock,
 * sums and splits under the read lock).
 */
#ifndef RL_STORAGE_SAMPLE_H
#define RL_STORAGE_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "reclayer/common.h"

#define RL_SAMPLE_FACTOR 250   /* FoundationDB's BYTE_SAMPLING_FACTOR: about 1/250 of the bytes sampled */
#define RL_SAMPLE_OVERHEAD 100 /* FoundationDB's BYTE_SAMPLING_OVERHEAD: bytes added to a key's length */

typedef struct bs_chunk bs_chunk;

typedef struct {
    bs_chunk **c;   /* heap: chunks in key order (invariant 1) */
    size_t n, cap;  /* chunks used, allocated */
    int64_t total;  /* sum of every weight (bytes) */
    uint64_t count; /* entries */
} rl__bsample;

/* Initialise an empty sample (no allocation). */
void rl__bsample_init(rl__bsample *s);
/* Free every entry and chunk; the sample is empty (and usable) afterwards. */
void rl__bsample_release(rl__bsample *s);

/* The weight of the pair (k, a value of vl bytes) if it is in the sample, else 0. Pure. */
int64_t rl__bsample_weight(const uint8_t *k, uint32_t kl, uint64_t vl);

/* rl__bsample_note — the pair of key k changed from (old_present, old_len value bytes) to
 * (new_present, new_len): add, reweigh or drop its entry as invariant 2 requires. Copies k.
 * RL_OK or RL_E_OUT_OF_MEMORY (the sample is then unchanged). */
int rl__bsample_note(rl__bsample *s, const uint8_t *k, uint32_t kl, int old_present, uint32_t old_len, int new_present,
                     uint32_t new_len);
/* Drop every entry with a key in [b, e) (a range clear). Allocates nothing. */
void rl__bsample_clear_range(rl__bsample *s, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);
/* Add the entry of key k with weight w, k absent from the sample (a rebuild, or a test).
 * RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__bsample_put(rl__bsample *s, const uint8_t *k, uint32_t kl, int64_t w);

/* The sum of the weights of the entries with keys in [b, e) (e NULL: to the end). */
int64_t rl__bsample_sum(const rl__bsample *s, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);

/* rl__bsample_split — the keys strictly inside (b, e) at which [b, e) is cut into chunks of about
 * chunk bytes (chunk > 0), in ascending order: walking the entries from b, the next cut is the
 * entry whose weight carries the running sum since the previous cut past chunk (so each chunk
 * but the last weighs at most chunk and more than chunk less one entry's weight; FoundationDB's
 * getSplitPoints). *out (n_out slices, keys copied) is in arena a; NULL when there are none.
 * RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__bsample_split(const rl__bsample *s, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, int64_t chunk,
                      rl_arena *a, rl_slice **out, int *out_n);

#endif
