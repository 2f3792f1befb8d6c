/* tuple.c — FoundationDB's tuple encoding: decoder/iterator, packers, ranges, subspaces, and
 * the human (print) form. The contract, including what "valid" means, is in tuple.h.
 *
 * Integer layout (FoundationDB's tuple spec), n = magnitude length in bytes:
 *   0x14                      zero
 *   0x14+n, magnitude         positive, 1 <= n <= 8
 *   0x14-n, ~magnitude        negative, 1 <= n <= 8 (one's complement of the n-byte magnitude)
 *   0x1d, n, magnitude        positive, 9 <= n <= 255
 *   0x0b, ~n, ~magnitude      negative, 9 <= n <= 255
 * Floats and doubles are stored big-endian after an order-preserving transform: a value with
 * the sign bit set has every bit flipped, any other value has only the sign bit flipped.
 *
 * Invariants of the decoder:
 *   1. It never reads p[i] unless p + i < end (every length is checked before it is used).
 *   2. It never recurses: a nested tuple's extent is found by one linear scan that keeps a depth
 *      counter, validating every inner element on the way (scan_nested).
 *   3. On error the iterator does not move, so it stays at the failing element.
 */
#include "tuple/tuple.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "reclayer/error.h"

/* scan_nested's private result for the nesting limit; rl__tuple_iter_next reports it as
 * RL_E_TUPLE_MALFORMED with it->too_deep set. */
enum { SCAN_TOO_DEEP = -1 };

#define TOO_DEEP_DETAIL "tuples nest at most %d levels deep (RL_TUPLE_MAX_DEPTH)"

void rl__tuple_detail(rl__errdetail *d, const rl__tuple_iter *it, int rc) {
    if (rc && it->too_deep) rl__errdetail_set(d, TOO_DEEP_DETAIL, RL_TUPLE_MAX_DEPTH);
}

/* ============================================================================================
 * Decoding
 * ========================================================================================== */

/* Check that s[0..n) is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF). Returns 1 if it is. */
static int utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i < len) return 0;
        for (size_t j = 1; j < len; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

/* Find the end of an escaped byte string starting at p (just after its type code): the first
 * 0x00 not followed by 0xff. Sets *out_end to that terminator and *out_has_escapes.
 * RL_OK or RL_E_TUPLE_TRUNCATED. */
static int scan_string(const uint8_t *p, const uint8_t *end, const uint8_t **out_end, int *out_has_escapes) {
    int esc = 0;
    for (;;) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        if (!z) return RL_E_TUPLE_TRUNCATED;
        if (z + 1 < end && z[1] == 0xff) {
            esc = 1;
            p = z + 2;
            continue;
        }
        *out_end = z;
        *out_has_escapes = esc;
        return RL_OK;
    }
}

/* Big-endian value of p[0..n), n <= 8. */
static uint64_t load_be(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
    return v;
}

/* Decode one element that is not a nested tuple and not a null (the callers handle 0x00 and
 * 0x05 because their meaning depends on nesting). p points at the type code, p < end.
 * Fills *e (already zeroed) and sets *out_next past the element. RL_OK or a decoding error. */
static int decode_scalar(const uint8_t *p, const uint8_t *end, rl__tuple_elem *e, const uint8_t **out_next) {
    uint8_t code = p[0];
    const uint8_t *q = p + 1;
    size_t avail = (size_t)(end - q);
    int rc;

    if (code == 0x01 || code == 0x02) {
        const uint8_t *z;
        rc = scan_string(q, end, &z, &e->has_escapes);
        if (rc) return rc;
        e->type = code == 0x01 ? RL_TT_BYTES : RL_TT_STRING;
        e->payload = q;
        e->payload_len = (size_t)(z - q);
        if (code == 0x02) {
            /* An escaped NUL (0x00 0xff) is U+0000 followed by 0xff, which is never valid
             * UTF-8 on its own; validate the unescaped form piecewise. */
            const uint8_t *s = q;
            while (s < z) {
                const uint8_t *nul = memchr(s, 0, (size_t)(z - s));
                const uint8_t *stop = nul ? nul : z;
                if (!utf8_valid(s, (size_t)(stop - s))) return RL_E_TUPLE_MALFORMED;
                s = nul ? nul + 2 : z;
            }
        }
        *out_next = z + 1;
        return RL_OK;
    }
    if (code >= 0x0b && code <= 0x1d) {
        size_t n;
        int neg = code < 0x14;
        const uint8_t *m;
        if (code == 0x14) {
            e->type = RL_TT_INT;
            e->fits_i64 = 1;
            e->payload = q;
            *out_next = q;
            return RL_OK;
        }
        if (code == 0x1d || code == 0x0b) {
            if (avail < 1) return RL_E_TUPLE_TRUNCATED;
            n = neg ? (uint8_t)~q[0] : q[0];
            m = q + 1;
            if (avail - 1 < n) return RL_E_TUPLE_TRUNCATED;
            if (n <= 8) return RL_E_TUPLE_MALFORMED; /* not the shortest form */
        } else {
            n = neg ? (size_t)(0x14 - code) : (size_t)(code - 0x14);
            m = q;
            if (avail < n) return RL_E_TUPLE_TRUNCATED;
        }
        /* Leading magnitude byte zero (0xff in one's complement) is not minimal. */
        if (m[0] == (neg ? 0xff : 0x00)) return RL_E_TUPLE_MALFORMED;
        e->type = RL_TT_INT;
        e->is_negative = neg;
        e->payload = m;
        e->payload_len = n;
        if (n <= 8) {
            uint64_t v = load_be(m, n);
            if (neg) {
                uint64_t mag = n == 8 ? ~v : ((UINT64_C(1) << (8 * n)) - 1) - v;
                if (mag <= (UINT64_C(1) << 63)) {
                    e->fits_i64 = 1;
                    e->i = mag == (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)mag;
                }
            } else if (v <= (uint64_t)INT64_MAX) {
                e->fits_i64 = 1;
                e->i = (int64_t)v;
            }
        }
        *out_next = m + n;
        return RL_OK;
    }
    switch (code) {
    case 0x20: {
        if (avail < 4) return RL_E_TUPLE_TRUNCATED;
        uint32_t bits = (uint32_t)load_be(q, 4);
        bits = (bits & UINT32_C(0x80000000)) ? bits ^ UINT32_C(0x80000000) : ~bits;
        memcpy(&e->f, &bits, 4);
        e->d = (double)e->f;
        e->type = RL_TT_FLOAT;
        e->payload = q;
        e->payload_len = 4;
        *out_next = q + 4;
        return RL_OK;
    }
    case 0x21: {
        if (avail < 8) return RL_E_TUPLE_TRUNCATED;
        uint64_t bits = load_be(q, 8);
        bits = (bits & (UINT64_C(1) << 63)) ? bits ^ (UINT64_C(1) << 63) : ~bits;
        memcpy(&e->d, &bits, 8);
        e->type = RL_TT_DOUBLE;
        e->payload = q;
        e->payload_len = 8;
        *out_next = q + 8;
        return RL_OK;
    }
    case 0x26:
    case 0x27:
        e->type = RL_TT_BOOL;
        e->b = code == 0x27;
        *out_next = q;
        return RL_OK;
    case 0x30:
        if (avail < 16) return RL_E_TUPLE_TRUNCATED;
        e->type = RL_TT_UUID;
        e->uuid = e->payload = q;
        e->payload_len = 16;
        *out_next = q + 16;
        return RL_OK;
    case 0x33:
        if (avail < 12) return RL_E_TUPLE_TRUNCATED;
        e->type = RL_TT_VERSIONSTAMP;
        e->versionstamp = e->payload = q;
        e->payload_len = 12;
        *out_next = q + 12;
        return RL_OK;
    default: return RL_E_TUPLE_UNSUPPORTED_TYPE;
    }
}

/* Find the extent of a nested tuple whose content starts at p (just after its 0x05), validating
 * every element inside, without recursion. depth0 is the nesting depth of that tuple (1 for a
 * tuple inside a top-level one). Sets *out_end to its terminating 0x00. RL_OK, SCAN_TOO_DEEP when
 * tuples nest deeper than RL_TUPLE_MAX_DEPTH, or a decoding error. */
static int scan_nested(const uint8_t *p, const uint8_t *end, int depth0, const uint8_t **out_end) {
    int depth = 1;
    rl__tuple_elem tmp;
    if (depth0 > RL_TUPLE_MAX_DEPTH) goto too_deep;
    for (;;) {
        if (p >= end) return RL_E_TUPLE_TRUNCATED;
        if (p[0] == 0x00) {
            if (p + 1 < end && p[1] == 0xff) { /* a null inside */
                p += 2;
                continue;
            }
            if (--depth == 0) {
                *out_end = p;
                return RL_OK;
            }
            p++;
            continue;
        }
        if (p[0] == 0x05) {
            if (depth0 + depth > RL_TUPLE_MAX_DEPTH) goto too_deep;
            depth++;
            p++;
            continue;
        }
        memset(&tmp, 0, sizeof tmp);
        int rc = decode_scalar(p, end, &tmp, &p);
        if (rc) return rc;
    }
too_deep:
    return SCAN_TOO_DEEP;
}

void rl__tuple_iter_init(rl__tuple_iter *it, const void *data, size_t len) {
    it->p = data;
    it->end = it->p + len;
    it->nested = 0;
    it->too_deep = 0;
}

void rl__tuple_iter_init_nested(rl__tuple_iter *it, const rl__tuple_elem *nested) {
    it->p = nested->payload;
    it->end = it->p + nested->payload_len;
    /* The depth rides in the flag (>= 1) so that deeper tuples stay bounded. */
    it->nested = nested->depth > 0 ? nested->depth : 1;
    it->too_deep = 0;
}

/* Decode the element at it->p; see tuple.h. */
int rl__tuple_iter_next(rl__tuple_iter *it, rl__tuple_elem *out) {
    const uint8_t *p = it->p, *end = it->end, *next;
    int rc;
    memset(out, 0, sizeof *out);
    if (p >= end) return RL_E_NOT_FOUND;
    if (p[0] == 0x00) {
        out->type = RL_TT_NULL;
        out->raw = p;
        if (it->nested) {
            /* Inside a nested payload a bare 0x00 would have ended the tuple. */
            if (p + 1 >= end || p[1] != 0xff) return RL_E_TUPLE_MALFORMED;
            out->raw_len = 2;
        } else {
            out->raw_len = 1;
        }
        it->p = p + out->raw_len;
        return RL_OK;
    }
    if (p[0] == 0x05) {
        const uint8_t *z;
        int depth = it->nested + 1;
        rc = scan_nested(p + 1, end, depth, &z);
        if (rc == SCAN_TOO_DEEP) {
            it->too_deep = 1;
            return RL_E_TUPLE_MALFORMED;
        }
        if (rc) return rc;
        out->type = RL_TT_NESTED;
        out->payload = p + 1;
        out->payload_len = (size_t)(z - (p + 1));
        out->depth = depth;
        next = z + 1;
    } else {
        rc = decode_scalar(p, end, out, &next);
        if (rc) {
            memset(out, 0, sizeof *out);
            return rc;
        }
    }
    out->raw = p;
    out->raw_len = (size_t)(next - p);
    it->p = next;
    return RL_OK;
}

int rl__tuple_validate(const void *data, size_t len, size_t *out_count) {
    rl__tuple_iter it;
    rl__tuple_elem e;
    size_t count = 0;
    int rc;
    rl__tuple_iter_init(&it, data, len);
    while ((rc = rl__tuple_iter_next(&it, &e)) == RL_OK) count++;
    if (rc != RL_E_NOT_FOUND) return rc;
    if (out_count) *out_count = count;
    return RL_OK;
}

int rl__tuple_get(const void *data, size_t len, size_t index, rl__tuple_elem *out) {
    rl__tuple_iter it;
    int rc;
    rl__tuple_iter_init(&it, data, len);
    for (size_t i = 0;; i++) {
        rc = rl__tuple_iter_next(&it, out);
        if (rc) return rc;
        if (i == index) return RL_OK;
    }
}

void rl__tuple_elem_unescape(const rl__tuple_elem *e, rl_buf *out) {
    const uint8_t *p = e->payload, *end = p + e->payload_len;
    if (!e->has_escapes) {
        rl__buf_append(out, p, e->payload_len);
        return;
    }
    while (p < end) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        if (!z) {
            rl__buf_append(out, p, (size_t)(end - p));
            break;
        }
        rl__buf_append(out, p, (size_t)(z - p) + 1); /* the bytes and the NUL */
        p = z + 2;                                   /* skip the 0xff */
    }
}

void rl__tuple_elem_bigint(const rl__tuple_elem *e, int *out_negative, rl_buf *mag) {
    *out_negative = e->is_negative;
    for (size_t i = 0; i < e->payload_len; i++)
        rl__buf_append_byte(mag, e->is_negative ? (uint8_t)~e->payload[i] : e->payload[i]);
}

/* ============================================================================================
 * Packing
 * ========================================================================================== */

void rl__tuple_packer_init(rl__tuple_packer *pk, rl_buf *out) {
    memset(pk, 0, sizeof *pk);
    pk->out = out;
}

int rl__tuple_packer_error(const rl__tuple_packer *pk) { return pk->err ? pk->err : rl__buf_error(pk->out); }

void rl__tuple_pack_null(rl__tuple_packer *pk) {
    if (pk->depth > 0) rl__buf_append(pk->out, "\x00\xff", 2);
    else rl__buf_append_byte(pk->out, 0x00);
}

/* Append code, p[0..n) with each 0x00 escaped as 0x00 0xff, and the 0x00 terminator. */
static void pack_escaped(rl__tuple_packer *pk, uint8_t code, const uint8_t *p, size_t n) {
    const uint8_t *end = p + n;
    rl__buf_append_byte(pk->out, code);
    while (p < end) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        if (!z) {
            rl__buf_append(pk->out, p, (size_t)(end - p));
            break;
        }
        rl__buf_append(pk->out, p, (size_t)(z - p));
        rl__buf_append(pk->out, "\x00\xff", 2);
        p = z + 1;
    }
    rl__buf_append_byte(pk->out, 0x00);
}

void rl__tuple_pack_bytes(rl__tuple_packer *pk, const void *p, size_t n) { pack_escaped(pk, 0x01, p, n); }

void rl__tuple_pack_string(rl__tuple_packer *pk, const char *s, size_t n) {
    pack_escaped(pk, 0x02, (const uint8_t *)s, n);
}

void rl__tuple_pack_bigint(rl__tuple_packer *pk, int negative, const uint8_t *mag, size_t n) {
    while (n > 0 && mag[0] == 0) mag++, n--;
    if (n == 0) {
        rl__buf_append_byte(pk->out, 0x14);
        return;
    }
    if (n > RL_TUPLE_MAX_INT_LEN) {
        if (!pk->err) pk->err = RL_E_TUPLE_VALUE_OVERFLOW;
        return;
    }
    if (n <= 8) rl__buf_append_byte(pk->out, (uint8_t)(negative ? 0x14 - n : 0x14 + n));
    else {
        rl__buf_append_byte(pk->out, negative ? 0x0b : 0x1d);
        rl__buf_append_byte(pk->out, (uint8_t)(negative ? ~n : n));
    }
    if (rl__buf_reserve(pk->out, n)) return;
    for (size_t i = 0; i < n; i++) rl__buf_append_byte(pk->out, negative ? (uint8_t)~mag[i] : mag[i]);
}

void rl__tuple_pack_uint(rl__tuple_packer *pk, uint64_t v) {
    uint8_t m[8];
    for (int i = 7; i >= 0; i--, v >>= 8) m[i] = (uint8_t)v;
    rl__tuple_pack_bigint(pk, 0, m, 8);
}

void rl__tuple_pack_int(rl__tuple_packer *pk, int64_t v) {
    uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    uint8_t m[8];
    for (int i = 7; i >= 0; i--, mag >>= 8) m[i] = (uint8_t)mag;
    rl__tuple_pack_bigint(pk, v < 0, m, 8);
}

void rl__tuple_pack_float(rl__tuple_packer *pk, float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    bits = (bits & UINT32_C(0x80000000)) ? ~bits : bits ^ UINT32_C(0x80000000);
    rl__buf_append_byte(pk->out, 0x20);
    rl__buf_append_u32be(pk->out, bits);
}

void rl__tuple_pack_double(rl__tuple_packer *pk, double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    bits = (bits & (UINT64_C(1) << 63)) ? ~bits : bits ^ (UINT64_C(1) << 63);
    rl__buf_append_byte(pk->out, 0x21);
    rl__buf_append_u64be(pk->out, bits);
}

void rl__tuple_pack_bool(rl__tuple_packer *pk, int v) { rl__buf_append_byte(pk->out, v ? 0x27 : 0x26); }

void rl__tuple_pack_uuid(rl__tuple_packer *pk, const uint8_t uuid[16]) {
    rl__buf_append_byte(pk->out, 0x30);
    rl__buf_append(pk->out, uuid, 16);
}

void rl__tuple_pack_versionstamp(rl__tuple_packer *pk, const uint8_t vs[12]) {
    rl__buf_append_byte(pk->out, 0x33);
    rl__buf_append(pk->out, vs, 12);
}

void rl__tuple_pack_incomplete_versionstamp(rl__tuple_packer *pk, uint16_t user_version) {
    static const uint8_t ff[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    rl__buf_append_byte(pk->out, 0x33);
    if (pk->n_incomplete == 0) pk->incomplete_vs_offset = pk->out->len;
    pk->n_incomplete++;
    rl__buf_append(pk->out, ff, 10);
    rl__buf_append_u16be(pk->out, user_version);
}

void rl__tuple_pack_nested_begin(rl__tuple_packer *pk) {
    rl__buf_append_byte(pk->out, 0x05);
    pk->depth++;
}

void rl__tuple_pack_nested_end(rl__tuple_packer *pk) {
    assert(pk->depth > 0);
    rl__buf_append_byte(pk->out, 0x00);
    pk->depth--;
}

void rl__tuple_pack_raw(rl__tuple_packer *pk, const rl__tuple_elem *elem) {
    if (elem->type == RL_TT_NULL) {
        rl__tuple_pack_null(pk);
        return;
    }
    rl__buf_append(pk->out, elem->raw, elem->raw_len);
}

int rl__tuple_versionstamp_suffix(rl__tuple_packer *pk) {
    if (pk->n_incomplete == 0) return RL_E_TUPLE_NO_INCOMPLETE_VERSIONSTAMP;
    if (pk->n_incomplete > 1) return RL_E_TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS;
    size_t off = pk->incomplete_vs_offset;
    if (off > UINT32_MAX) return RL_E_INVALID_ARGUMENT;
    uint8_t le[4] = {(uint8_t)off, (uint8_t)(off >> 8), (uint8_t)(off >> 16), (uint8_t)(off >> 24)};
    rl__buf_append(pk->out, le, 4);
    return rl__buf_error(pk->out);
}

/* ============================================================================================
 * Ranges and subspaces
 * ========================================================================================== */

void rl__tuple_range(const void *prefix, size_t n, rl_buf *begin, rl_buf *end) {
    rl__buf_append(begin, prefix, n);
    rl__buf_append_byte(begin, 0x00);
    rl__buf_append(end, prefix, n);
    rl__buf_append_byte(end, 0xff);
}

int rl__strinc(const void *key, size_t n, rl_buf *out) {
    const uint8_t *k = key;
    while (n > 0 && k[n - 1] == 0xff) n--;
    if (n == 0) return RL_E_INVALID_ARGUMENT;
    rl__buf_append(out, k, n - 1);
    rl__buf_append_byte(out, (uint8_t)(k[n - 1] + 1));
    return rl__buf_error(out);
}

int rl__subspace_init(rl__subspace *sub, const void *prefix, size_t n) {
    sub->len = n;
    sub->prefix = rl__malloc(n ? n : 1);
    if (!sub->prefix) {
        sub->len = 0;
        return RL_E_OUT_OF_MEMORY;
    }
    if (n) memcpy(sub->prefix, prefix, n);
    return RL_OK;
}

void rl__subspace_release(rl__subspace *sub) {
    if (!sub) return;
    rl__free(sub->prefix);
    sub->prefix = NULL;
    sub->len = 0;
}

void rl__subspace_pack_begin(const rl__subspace *sub, rl_buf *out, rl__tuple_packer *pk) {
    rl__buf_reset(out);
    rl__buf_append(out, sub->prefix, sub->len);
    rl__tuple_packer_init(pk, out);
}

int rl__subspace_contains(const rl__subspace *sub, const void *key, size_t n) {
    return n >= sub->len && (sub->len == 0 || memcmp(key, sub->prefix, sub->len) == 0);
}

int rl__subspace_unpack(const rl__subspace *sub, const void *key, size_t n, rl__tuple_iter *it) {
    if (!rl__subspace_contains(sub, key, n)) return RL_E_INVALID_ARGUMENT;
    rl__tuple_iter_init(it, (const uint8_t *)key + sub->len, n - sub->len);
    return RL_OK;
}

void rl__subspace_range(const rl__subspace *sub, rl_buf *begin, rl_buf *end) {
    rl__tuple_range(sub->prefix, sub->len, begin, end);
}

/* ============================================================================================
 * Decimal conversion of big integers
 * ========================================================================================== */

int rl__tuple_mag_to_dec(int negative, const uint8_t *mag, size_t n, rl_buf *out) {
    while (n > 0 && mag[0] == 0) mag++, n--;
    if (n == 0) {
        rl__buf_append_byte(out, '0');
        return rl__buf_error(out);
    }
    /* Repeated division of a scratch copy by 10^9, collecting 9-digit groups low to high. */
    size_t ngroups_max = n * 8 / 29 + 2; /* 10^9 > 2^29 */
    uint8_t *w = rl__malloc(n + ngroups_max * sizeof(uint32_t));
    if (!w) return RL_E_OUT_OF_MEMORY;
    uint32_t *groups = (uint32_t *)(void *)(w + n);
    size_t ng = 0, start = 0;
    memcpy(w, mag, n);
    while (start < n) {
        uint64_t rem = 0;
        for (size_t i = start; i < n; i++) {
            uint64_t cur = (rem << 8) | w[i];
            w[i] = (uint8_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        uint32_t g = (uint32_t)rem;
        memcpy((uint8_t *)groups + ng * sizeof(uint32_t), &g, sizeof g);
        ng++;
        while (start < n && w[start] == 0) start++;
    }
    if (negative) rl__buf_append_byte(out, '-');
    for (size_t k = ng; k-- > 0;) {
        uint32_t g;
        memcpy(&g, (uint8_t *)groups + k * sizeof(uint32_t), sizeof g);
        if (k == ng - 1) rl__buf_printf(out, "%u", (unsigned)g);
        else rl__buf_printf(out, "%09u", (unsigned)g);
    }
    rl__free(w);
    return rl__buf_error(out);
}

int rl__tuple_dec_to_mag(const char *s, size_t n, int *out_negative, rl_buf *mag) {
    int neg = 0;
    size_t i = 0;
    if (n > 0 && s[0] == '-') neg = 1, i = 1;
    if (i == n) return RL_E_INVALID_ARGUMENT;
    for (size_t j = i; j < n; j++)
        if (s[j] < '0' || s[j] > '9') return RL_E_INVALID_ARGUMENT;
    while (i < n && s[i] == '0') i++;
    size_t nd = n - i;
    if (nd > 620) return RL_E_TUPLE_VALUE_OVERFLOW; /* 10^620 > 2^2040 * ... surely > 255 bytes */
    /* Multiply-add into a fixed little-endian scratch array of RL_TUPLE_MAX_INT_LEN + 8 bytes. */
    uint8_t w[RL_TUPLE_MAX_INT_LEN + 8];
    size_t used = 0; /* bytes of w in use, little-endian */
    for (; i < n; i++) {
        uint32_t carry = (uint32_t)(s[i] - '0');
        for (size_t k = 0; k < used; k++) {
            uint32_t v = (uint32_t)w[k] * 10u + carry;
            w[k] = (uint8_t)v;
            carry = v >> 8;
        }
        if (carry) {
            if (used == sizeof w) return RL_E_TUPLE_VALUE_OVERFLOW;
            w[used++] = (uint8_t)carry;
        }
    }
    if (used > RL_TUPLE_MAX_INT_LEN) return RL_E_TUPLE_VALUE_OVERFLOW;
    *out_negative = neg && used > 0;
    for (size_t k = used; k-- > 0;) rl__buf_append_byte(mag, w[k]);
    return rl__buf_error(mag);
}

/* ============================================================================================
 * The human form
 * ========================================================================================== */

/* Append the shortest decimal text of v that reads back exactly (is_float: as a float). */
static void print_real(rl_buf *out, double v, int is_float) {
    if (isnan(v)) {
        rl__buf_append_str(out, "nan");
        return;
    }
    if (isinf(v)) {
        rl__buf_append_str(out, v < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (is_float ? strtof(tmp, NULL) == (float)v : strtod(tmp, NULL) == v) break;
    }
    rl__buf_append_str(out, tmp);
    /* Keep it recognisably real, as Python does: "1" -> "1.0". */
    if (!strpbrk(tmp, ".eEn")) rl__buf_append_str(out, ".0");
}

/* Append p[0..n) in quotes: '"' and '\' escaped; for bytes every non-printable-ASCII byte as
 * \xNN, for strings only control bytes (UTF-8 sequences stay as they are). */
static void print_quoted(rl_buf *out, const uint8_t *p, size_t n, int is_bytes) {
    rl__buf_append_str(out, is_bytes ? "b\"" : "\"");
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\') {
            rl__buf_append_byte(out, '\\');
            rl__buf_append_byte(out, c);
        } else if (c < 0x20 || c == 0x7f || (is_bytes && c >= 0x80)) {
            rl__buf_printf(out, "\\x%02x", c);
        } else {
            rl__buf_append_byte(out, c);
        }
    }
    rl__buf_append_byte(out, '"');
}

/* Print the elements of *it as "(a, b)" ("(a,)" for one). Recursion depth is bounded by
 * RL_TUPLE_MAX_DEPTH, which the iterator enforces. */
static int print_tuple(rl__tuple_iter *it, rl_buf *out) {
    rl__tuple_elem e;
    rl_buf tmp;
    size_t count = 0;
    int rc;
    rl__buf_init(&tmp);
    rl__buf_append_byte(out, '(');
    while ((rc = rl__tuple_iter_next(it, &e)) == RL_OK) {
        if (count++) rl__buf_append_str(out, ", ");
        switch (e.type) {
        case RL_TT_NULL: rl__buf_append_str(out, "None"); break;
        case RL_TT_BYTES:
        case RL_TT_STRING:
            rl__buf_reset(&tmp);
            rl__tuple_elem_unescape(&e, &tmp);
            if ((rc = rl__buf_error(&tmp))) goto fail; /* before the next reset clears it */
            print_quoted(out, tmp.data, tmp.len, e.type == RL_TT_BYTES);
            break;
        case RL_TT_NESTED: {
            rl__tuple_iter sub;
            rl__tuple_iter_init_nested(&sub, &e);
            rc = print_tuple(&sub, out);
            if (rc) goto fail;
            break;
        }
        case RL_TT_INT:
            if (e.fits_i64) {
                rl__buf_printf(out, "%lld", (long long)e.i);
            } else {
                int neg;
                rl__buf_reset(&tmp);
                rl__tuple_elem_bigint(&e, &neg, &tmp);
                rc = rl__buf_error(&tmp);
                if (!rc) rc = rl__tuple_mag_to_dec(neg, tmp.data, tmp.len, out);
                if (rc) goto fail;
            }
            break;
        case RL_TT_FLOAT:
            rl__buf_append_str(out, "float(");
            print_real(out, e.d, 1);
            rl__buf_append_byte(out, ')');
            break;
        case RL_TT_DOUBLE: print_real(out, e.d, 0); break;
        case RL_TT_BOOL: rl__buf_append_str(out, e.b ? "True" : "False"); break;
        case RL_TT_UUID: {
            const uint8_t *u = e.uuid;
            rl__buf_append_str(out, "UUID(\"");
            rl__buf_append_hex(out, u, 4);
            rl__buf_append_byte(out, '-');
            rl__buf_append_hex(out, u + 4, 2);
            rl__buf_append_byte(out, '-');
            rl__buf_append_hex(out, u + 6, 2);
            rl__buf_append_byte(out, '-');
            rl__buf_append_hex(out, u + 8, 2);
            rl__buf_append_byte(out, '-');
            rl__buf_append_hex(out, u + 10, 6);
            rl__buf_append_str(out, "\")");
            break;
        }
        case RL_TT_VERSIONSTAMP: {
            const uint8_t *v = e.versionstamp;
            static const uint8_t ff[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
            rl__buf_append_str(out, "Versionstamp(");
            if (!memcmp(v, ff, 10)) {
                rl__buf_append_str(out, "<incomplete>");
            } else {
                rl__buf_append_byte(out, '"');
                rl__buf_append_hex(out, v, 10);
                rl__buf_append_byte(out, '"');
            }
            rl__buf_printf(out, ", %u)", (unsigned)((v[10] << 8) | v[11]));
            break;
        }
        }
    }
    if (rc != RL_E_NOT_FOUND) goto fail;
    rl__buf_append_str(out, count == 1 ? ",)" : ")");
    rc = rl__buf_error(out);
    if (!rc) rc = rl__buf_error(&tmp);
fail:
    rl__buf_release(&tmp);
    return rc;
}

int rl__tuple_print(const void *data, size_t len, rl_buf *out, rl__errdetail *detail) {
    rl__tuple_iter it;
    rl__tuple_iter_init(&it, data, len);
    int rc = print_tuple(&it, out);
    rl__tuple_detail(detail, &it, rc);
    return rc;
}
