/* pbwire.h (internal to src/record/) — protobuf wire-format varints, the one reader and writer
 * that the record union framing (metadata.c) and the flat-message decoder (decoder.c) share, so
 * both accept exactly the same bytes.
 */
#ifndef RL_RECORD_PBWIRE_H
#define RL_RECORD_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* rl__pb_varint — read a varint of at most max (1..10) bytes at p[*i..n) into *v, advancing *i.
 * Returns 0, or -1 when it is truncated, longer than max bytes, or carries bits beyond 64 (a
 * 10th byte above 1); *i is then unspecified. protobuf-c reads values with up to 10 bytes and
 * tags and length prefixes with up to 5. Pure. */
static inline int rl__pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v, unsigned max) {
    uint64_t r = 0;
    if (*i < n && p[*i] < 0x80) { /* one byte: tags, small integers, short lengths */
        *v = p[(*i)++];
        return 0;
    }
    for (unsigned k = 0; k < max; k++) {
        if (*i >= n) return -1;
        uint8_t b = p[(*i)++];
        if (k == 9 && b > 1) return -1;
        r |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* rl__pb_put_varint — append v as a varint (1..10 bytes) to b (errors stay in b). */
static inline void rl__pb_put_varint(rl_buf *b, uint64_t v) {
    while (v >= 0x80) {
        rl__buf_append_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    rl__buf_append_byte(b, (uint8_t)v);
}

#endif
