/* continuation.c — the byte form of index-scan continuations (layout in query_int.h).
 *
 * A continuation names a position in one scan: the last index key the cursor consumed, as the
 * suffix after the index subspace (Java's KeyValueCursor continuation), wrapped in a magic
 * number, a version, the hash of the scan it belongs to and a checksum. The checksum catches
 * tampering and truncation; the hash catches use with another index, other bounds or the other
 * direction. Decoding checks every field before trusting any length.
 */
#include <string.h>

#include "base/hash.h"
#include "query/query_int.h"
#include "reclayer/error.h"

static const uint8_t MAGIC[4] = {'R', 'L', 'q', 'c'};

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) << 32 | get_u32(p + 4); }

uint64_t rl__qcont_scan_hash(const uint8_t *begin, size_t begin_len, const uint8_t *end, size_t end_len, int reverse) {
    /* Chain the parts through the seed so that (begin, end) boundaries cannot be confused. */
    uint64_t h = rl__hash64("reclayer-query-scan", 19, (uint64_t)begin_len);
    h = rl__hash64(begin, begin_len, h);
    h = rl__hash64(end, end_len, h ^ (uint64_t)end_len);
    return rl__hash64(reverse ? "r" : "f", 1, h);
}

void rl__qcont_encode(uint64_t h, int has_key, const uint8_t *suffix, size_t suffix_len, rl_buf *out) {
    uint8_t hdr[18];
    if (!has_key) suffix_len = 0;
    memcpy(hdr, MAGIC, 4);
    hdr[4] = RL__QCONT_VERSION;
    hdr[5] = has_key ? 1 : 0;
    put_u32(hdr + 6, (uint32_t)(h >> 32));
    put_u32(hdr + 10, (uint32_t)h);
    put_u32(hdr + 14, (uint32_t)suffix_len);
    rl__buf_reset(out);
    rl__buf_append(out, hdr, sizeof hdr);
    if (suffix_len) rl__buf_append(out, suffix, suffix_len);
    if (rl__buf_error(out)) return;
    rl__buf_append_u32be(out, rl__checksum32(out->data, out->len));
}

int rl__qcont_decode(const uint8_t *p, size_t len, uint64_t h, int *out_has_key, const uint8_t **out_suffix,
                     size_t *out_suffix_len, const char **out_why) {
    const char *why = NULL;
    uint32_t n;
    *out_has_key = 0;
    *out_suffix = NULL;
    *out_suffix_len = 0;
    if (!p || len < RL__QCONT_OVERHEAD) {
        why = "continuation is truncated";
    } else if (memcmp(p, MAGIC, 4) != 0) {
        why = "continuation has a bad magic number (not a reclayer index-scan continuation)";
    } else if (p[4] != RL__QCONT_VERSION) {
        why = "continuation has an unknown version";
    } else if ((n = get_u32(p + 14)) != len - RL__QCONT_OVERHEAD) {
        why = "continuation length does not match its contents (truncated or extended)";
    } else if (get_u32(p + len - 4) != rl__checksum32(p, len - 4)) {
        why = "continuation checksum mismatch (tampered or corrupted)";
    } else if ((p[5] & ~1u) != 0 || (!(p[5] & 1) && n != 0)) {
        why = "continuation has unknown flags";
    } else if (get_u64(p + 6) != h) {
        why = "continuation belongs to another scan (other index, bounds or direction)";
    }
    if (out_why) *out_why = why;
    if (why) return RL_E_CONTINUATION_INVALID;
    *out_has_key = p[5] & 1;
    *out_suffix = p + 18;
    *out_suffix_len = n;
    return RL_OK;
}
