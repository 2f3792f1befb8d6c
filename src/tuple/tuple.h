/* tuple.h (internal) — FoundationDB's tuple encoding: iterate, pack, range, strinc, subspaces.
 *
 * The encoding is FoundationDB's (the tuple layer spec): every element starts with a type code.
 *   0x00 null (inside a nested tuple: 0x00 0xff)      0x01 byte string, 0x02 unicode string
 *   0x05 nested tuple, ended by 0x00                   0x0b–0x1d integers (0x14 is zero)
 *   0x20 float, 0x21 double (order-preserving bits)    0x26 false, 0x27 true
 *   0x30 UUID (16 bytes)                               0x33 versionstamp (12 bytes)
 * Byte and unicode strings escape 0x00 as 0x00 0xff and end with 0x00.
 *
 * Decoding never reads past the end of the input: truncated input gives RL_E_TUPLE_TRUNCATED,
 * anything else that is not a valid encoding RL_E_TUPLE_MALFORMED, an unknown type code
 * RL_E_TUPLE_UNSUPPORTED_TYPE. Iterating allocates nothing: elements point into the input.
 */
#ifndef RL_TUPLE_TUPLE_H
#define RL_TUPLE_TUPLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* The deepest nesting the decoder accepts (see rule 4 above). */
#define RL_TUPLE_MAX_DEPTH 1000
/* The longest integer magnitude the encoding can carry (0x1d/0x0b have a one-byte length). */
#define RL_TUPLE_MAX_INT_LEN 255

typedef enum {
    RL_TT_NULL = 0,
    RL_TT_BYTES,
    RL_TT_STRING,
    RL_TT_NESTED,
    RL_TT_INT,
    RL_TT_FLOAT,
    RL_TT_DOUBLE,
    RL_TT_BOOL,
    RL_TT_UUID,
    RL_TT_VERSIONSTAMP,
} rl__tuple_type;

/* One decoded element. Every pointer points into the input given to the iterator and is valid
 * as long as that input is. */
typedef struct {
    rl__tuple_type type;
    const uint8_t *raw; /* the element's whole encoding, type code included */
    size_t raw_len;
    /* RL_TT_BYTES / RL_TT_STRING: the payload still escaped (0x00 0xff for each 0x00), without
     * the type code and terminator; has_escapes says whether unescaping is needed
     * (rl__tuple_elem_unescape). RL_TT_NESTED: the nested encoding between 0x05 and its
     * terminator, to iterate with rl__tuple_iter_init_nested. */
    const uint8_t *payload;
    size_t payload_len;
    int has_escapes;
    /* RL_TT_INT: fits_i64 says whether i holds the value; otherwise (integers beyond 64 bits,
     * and uint64 values above INT64_MAX) read it with rl__tuple_elem_bigint. */
    int fits_i64;
    int64_t i;
    int is_negative;             /* RL_TT_INT: sign, valid whatever fits_i64 says */
    double d;                    /* RL_TT_DOUBLE, and RL_TT_FLOAT widened */
    float f;                     /* RL_TT_FLOAT */
    int b;                       /* RL_TT_BOOL */
    const uint8_t *uuid;         /* RL_TT_UUID: 16 bytes */
    const uint8_t *versionstamp; /* RL_TT_VERSIONSTAMP: 12 bytes (10 global + 2 user) */
    int depth;                   /* RL_TT_NESTED: this tuple's nesting depth (1 inside the top level) */
} rl__tuple_elem;

typedef struct {
    const uint8_t *p;   /* next byte */
    const uint8_t *end; /* one past the last byte */
    int nested;         /* 0 at top level; else the depth of the nested tuple iterated (then
                           0x00 0xff is null) */
    int too_deep;       /* set when rl__tuple_iter_next failed because a nested tuple passes
                           RL_TUPLE_MAX_DEPTH (RL_E_TUPLE_MALFORMED; see rl__tuple_detail) */
} rl__tuple_iter;

/* Iterate the elements of a top-level tuple encoding data[0..len). data is borrowed. */
void rl__tuple_iter_init(rl__tuple_iter *it, const void *data, size_t len);
/* Iterate the elements of a nested element's payload (elem->payload, elem->payload_len).
 * nested is borrowed; the iterator points into the same input. */
void rl__tuple_iter_init_nested(rl__tuple_iter *it, const rl__tuple_elem *nested);
/* Decode the next element into *out. Returns RL_OK, RL_E_NOT_FOUND at the end (an expected
 * outcome), or a decoding error (the iterator then stays at the failing element). */
int rl__tuple_iter_next(rl__tuple_iter *it, rl__tuple_elem *out);

/* Check that data[0..len) is a complete valid tuple; count its top-level elements into
 * *out_count (may be NULL). RL_OK or a decoding error. */
int rl__tuple_validate(const void *data, size_t len, size_t *out_count);
/* Find top-level element index (0-based) of data; RL_E_NOT_FOUND if there are fewer. */
int rl__tuple_get(const void *data, size_t len, size_t index, rl__tuple_elem *out);

/* Append the unescaped bytes of a RL_TT_BYTES/RL_TT_STRING element to out. */
void rl__tuple_elem_unescape(const rl__tuple_elem *e, rl_buf *out);
/* Integer as sign and big-endian magnitude (no leading zero bytes; zero is an empty magnitude),
 * appended to mag. Works for every integer width. */
void rl__tuple_elem_bigint(const rl__tuple_elem *e, int *out_negative, rl_buf *mag);

/* ---- Packing ---------------------------------------------------------------------------- */

/* A packer appends elements to a caller-owned rl_buf (which may already hold a prefix).
 * Errors (OOM) are sticky in the buffer; check rl__buf_error(out) once at the end. */
typedef struct {
    rl_buf *out;
    int depth;                   /* nesting depth: 0 at top level */
    size_t incomplete_vs_offset; /* offset in out of the first byte of the 10-byte placeholder */
    int n_incomplete;            /* incomplete versionstamps packed so far */
    int err;                     /* sticky non-OOM error (an integer longer than 255 bytes) */
} rl__tuple_packer;

void rl__tuple_packer_init(rl__tuple_packer *pk, rl_buf *out);
/* RL_OK, the packer's sticky error (RL_E_TUPLE_VALUE_OVERFLOW for an integer whose magnitude is
 * longer than RL_TUPLE_MAX_INT_LEN bytes; nothing was appended for it), or the buffer's
 * RL_E_OUT_OF_MEMORY. */
int rl__tuple_packer_error(const rl__tuple_packer *pk);
void rl__tuple_pack_null(rl__tuple_packer *pk);
void rl__tuple_pack_bytes(rl__tuple_packer *pk, const void *p, size_t n);
void rl__tuple_pack_string(rl__tuple_packer *pk, const char *s, size_t n); /* UTF-8 */
void rl__tuple_pack_int(rl__tuple_packer *pk, int64_t v);
void rl__tuple_pack_uint(rl__tuple_packer *pk, uint64_t v);
/* Any integer: sign and big-endian magnitude (leading zero bytes allowed; a negative zero is 0).
 * A magnitude longer than RL_TUPLE_MAX_INT_LEN bytes sets the packer's sticky error. */
void rl__tuple_pack_bigint(rl__tuple_packer *pk, int negative, const uint8_t *mag, size_t n);
void rl__tuple_pack_float(rl__tuple_packer *pk, float v);
void rl__tuple_pack_double(rl__tuple_packer *pk, double v);
void rl__tuple_pack_bool(rl__tuple_packer *pk, int v);
void rl__tuple_pack_uuid(rl__tuple_packer *pk, const uint8_t uuid[16]);
/* A complete versionstamp: 12 bytes (10-byte commit version and order, 2-byte user version). */
void rl__tuple_pack_versionstamp(rl__tuple_packer *pk, const uint8_t vs[12]);
/* An incomplete versionstamp: 10 bytes of 0xff then the user version; remembers its offset for
 * rl__tuple_versionstamp_suffix. */
void rl__tuple_pack_incomplete_versionstamp(rl__tuple_packer *pk, uint16_t user_version);
void rl__tuple_pack_nested_begin(rl__tuple_packer *pk);
void rl__tuple_pack_nested_end(rl__tuple_packer *pk);
/* Append an already-encoded element (elem->raw) as it is, at the packer's current depth
 * (a top-level null becomes 0x00 0xff when spliced into a nested tuple). */
void rl__tuple_pack_raw(rl__tuple_packer *pk, const rl__tuple_elem *elem);
/* For SET_VERSIONSTAMPED_KEY/VALUE: append the 4-byte little-endian offset of the single
 * incomplete versionstamp. RL_E_TUPLE_NO_INCOMPLETE_VERSIONSTAMP or
 * RL_E_TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS when there is not exactly one. */
int rl__tuple_versionstamp_suffix(rl__tuple_packer *pk);

/* ---- Ranges and subspaces --------------------------------------------------------------- */

/* range(prefix): begin = prefix + 0x00, end = prefix + 0xff, appended to begin/end. */
void rl__tuple_range(const void *prefix, size_t n, rl_buf *begin, rl_buf *end);
/* strinc: the first key after every key that starts with key: drop trailing 0xff bytes, then
 * increment the last byte. Appended to out. RL_E_INVALID_ARGUMENT if key is empty or all 0xff. */
int rl__strinc(const void *key, size_t n, rl_buf *out);

/* A subspace: a raw key prefix (usually a packed tuple). Owns its prefix. */
typedef struct {
    uint8_t *prefix;
    size_t len;
} rl__subspace;

/* Copy prefix into sub. RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__subspace_init(rl__subspace *sub, const void *prefix, size_t n);
void rl__subspace_release(rl__subspace *sub);
/* Start a key in out: reset it to the prefix and return a packer positioned after it. */
void rl__subspace_pack_begin(const rl__subspace *sub, rl_buf *out, rl__tuple_packer *pk);
int rl__subspace_contains(const rl__subspace *sub, const void *key, size_t n);
/* Iterate the tuple that follows the prefix in key. RL_E_INVALID_ARGUMENT if key is not in sub. */
int rl__subspace_unpack(const rl__subspace *sub, const void *key, size_t n, rl__tuple_iter *it);
/* The subspace's range(): prefix+0x00 .. prefix+0xff. */
void rl__subspace_range(const rl__subspace *sub, rl_buf *begin, rl_buf *end);

/* ---- Text forms ------------------------------------------------------------------------- */

/* Decimal text of an integer given as sign and big-endian magnitude (leading zeros allowed),
 * appended to out: "0", "123", "-98765432109876543210". RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__tuple_mag_to_dec(int negative, const uint8_t *mag, size_t n, rl_buf *out);
/* Parse decimal text s[0..n) ("-"? digits, leading zeros allowed, "-0" is zero) into sign and
 * big-endian magnitude without leading zero bytes (appended to mag; zero is empty).
 * RL_E_INVALID_ARGUMENT on bad text, RL_E_TUPLE_VALUE_OVERFLOW if the magnitude needs more than
 * RL_TUPLE_MAX_INT_LEN bytes, RL_E_OUT_OF_MEMORY. */
int rl__tuple_dec_to_mag(const char *s, size_t n, int *out_negative, rl_buf *mag);

/* Append FoundationDB's human form of the tuple data[0..len), e.g. (1, "a", b"\x00", None).
 * RL_OK or a decoding error (out then holds a partial rendering), or RL_E_OUT_OF_MEMORY.
 * The form, Python-like:
 *   ()  (1,)  (1, 2)        tuples, nested ones too; one element keeps Python's trailing comma
 *   None  True  False       null and booleans
 *   -12  123456789012345678901234567890    integers of any size, decimal
 *   1.5  -0.0  inf  -inf  nan              doubles, shortest text that reads back exactly
 *   float(1.5)                              floats (32-bit), marked so they differ from doubles
 *   "a\"b\\c"  b"\x00ab"                 strings (UTF-8 as is; '"', '\' and control bytes
 *                                           escaped) and bytes (printable ASCII as is, '"' and
 *                                           '\' escaped, the rest \xNN)
 *   UUID("01234567-89ab-cdef-0123-456789abcdef")
 *   Versionstamp("0123456789abcdef0123", 7)     10-byte transaction version (hex), user version
 *   Versionstamp(<incomplete>, 7)               when the 10 bytes are all 0xff
 * detail: NULL, or where a failure's detail goes ("Error details" below). */
int rl__tuple_print(const void *data, size_t len, rl_buf *out, rl__errdetail *detail);

/* Error details. The codec has no handle, so the calls whose failures have more to say than
 * their code (rl__tuple_print, rl__tuple_to_json, rl__tuple_from_json, rl__tuple_pack_json)
 * take the caller's rl__errdetail (base/errdetail.h), or NULL: a failure with a detail sets it
 * (e.g. "tuples nest at most 1000 levels deep (RL_TUPLE_MAX_DEPTH)"), a failure without one and
 * a success leave it as it was.
 *
 * rl__tuple_detail — for those calls: after rc failed on iterator it, set d's message when the
 * iterator knows more (the nesting limit). d NULL, rc RL_OK and no detail are no-ops. */
void rl__tuple_detail(rl__errdetail *d, const rl__tuple_iter *it, int rc);

#endif
