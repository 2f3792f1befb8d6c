/* bytes.h (internal) — byte-string helpers: hex, FoundationDB's printable escape form, compare. */
#ifndef RL_BASE_BYTES_H
#define RL_BASE_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"

/* Append FoundationDB's printable form of p[0..n): printable ASCII except backslash as is,
 * backslash as "\\\\", every other byte as "\\xNN" (lower-case hex). */
void rl__bytes_printable(rl_buf *out, const void *p, size_t n);
/* Parse the printable form back (accepts \xNN in either case and \\). Returns RL_OK or
 * RL_E_INVALID_ARGUMENT on a bad escape. */
int rl__bytes_unprintable(rl_buf *out, const char *s);
/* As rl__bytes_unprintable; on a bad escape, *bad_at (if not NULL) is the byte offset in s of its
 * backslash (out then holds the bytes before it). rl__args_unescape words the message. */
int rl__bytes_unprintable_at(rl_buf *out, const char *s, size_t *bad_at);
/* The value of the hex digit c (either case), or -1. */
int rl__hex_digit(int c);
/* Parse hex (even length, either case) into out. RL_OK or RL_E_INVALID_ARGUMENT. */
int rl__bytes_from_hex(rl_buf *out, const char *s, size_t n);
/* Lexicographic byte compare, shorter prefix first: <0, 0, >0. */
int rl__bytes_cmp(const void *a, size_t alen, const void *b, size_t blen);

/* The first 8 bytes of k as a big-endian integer, zero-padded. For two keys whose prefixes
 * differ, the prefixes compare as the keys do (a shorter key padded with zeros is smaller than
 * any longer key it prefixes unless the rest is zeros, and then the prefixes are equal); only
 * equal prefixes need the bytes. The ordered structures that pack prefixes beside their pointers
 * (the storage B+tree, the write map's index) compare these first. */
static inline uint64_t rl__bytes_prefix64(const uint8_t *k, size_t kl) {
    if (kl >= 8) {
        uint64_t p;
        memcpy(&p, k, 8);
        return __builtin_bswap64(p);
    }
    if (kl >= 4) { /* two overlapping 4-byte loads: bytes 0..3 and kl-4..kl-1 (the same bytes
                    * where they overlap), no byte loop */
        uint32_t hi, lo;
        memcpy(&hi, k, 4);
        memcpy(&lo, k + kl - 4, 4);
        return (uint64_t)__builtin_bswap32(hi) << 32 | (uint64_t)__builtin_bswap32(lo) << (64 - 8 * kl);
    }
    if (kl == 0) return 0;
    /* 1..3 bytes: the first, middle and last (repeats OR the same byte into the same place). */
    return (uint64_t)k[0] << 56 | (uint64_t)k[kl / 2] << (56 - 8 * (kl / 2)) |
           (uint64_t)k[kl - 1] << (56 - 8 * (kl - 1));
}

#endif
