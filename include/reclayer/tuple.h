/* tuple.h — FoundationDB tuples: pack, unpack, print. The encoding is FoundationDB's tuple layer,
 * byte for byte, so keys packed here sort as FoundationDB's bindings sort them and are read by
 * them; record.h and query.h take primary keys and index values as packed tuples.
 *
 * Types (rl_tuple_type): null, byte strings, unicode strings (UTF-8, not checked), nested tuples,
 * integers (any size on the wire; 64-bit here), 32-bit floats and doubles, booleans, UUIDs (16
 * bytes) and versionstamps (12 bytes: 10 of the committing transaction's version, 2 of user
 * version). An *incomplete* versionstamp (its 10 bytes 0xff) is filled in at commit by a
 * versionstamped-key or -value mutation (kv.h, RL_MUT_SET_VERSIONSTAMPED_KEY/VALUE), which takes
 * the packed tuple followed by the 4-byte little-endian offset rl_tuple_builder_versionstamp_key
 * appends.
 *
 *   rl_tuple_builder *b;                     rl_tuple *t;
 *   rl_tuple_builder_new(&b);                rl_tuple_unpack(key, key_len, &t);
 *   rl_tuple_add_string(b, "order", 5);      int64_t id;
 *   rl_tuple_add_int(b, 42);                 rl_tuple_get_int(t, 1, &id);
 *   rl_tuple_builder_result(b, &key, &n);    rl_tuple_free(t);
 *   ... rl_txn_set(txn, key, n, ...) ...
 *   rl_tuple_builder_free(b);
 *
 * Lifetimes: a builder owns its bytes; rl_tuple_builder_result lends them until the builder's
 * next change or its free. rl_tuple_unpack copies what it decodes: the rl_tuple is independent of
 * the input, and every pointer an accessor lends stays valid until rl_tuple_free. Strings the
 * library returns (rl_tuple_print, rl_tuple_to_json, rl_tuple_from_json) are the caller's, freed
 * with rl_free.
 *
 * Errors: decoding never reads past its input — RL_E_TUPLE_TRUNCATED (input ends inside an
 * element), RL_E_TUPLE_MALFORMED (not a canonical encoding), RL_E_TUPLE_UNSUPPORTED_TYPE (a type
 * code this library does not know); RL_E_INVALID_ARGUMENT (an index past the end, the wrong type
 * for an accessor, a nesting mistake in a builder), RL_E_TUPLE_VALUE_OVERFLOW (an integer that
 * does not fit the accessor), RL_E_OUT_OF_MEMORY. The calls that have more to say than the code
 * (rl_tuple_unpack, rl_tuple_print, rl_tuple_to_json, rl_tuple_from_json) leave a message in
 * rl_last_error_detail(), per thread, valid until the thread's next such call.
 *
 * Threads: a builder or an rl_tuple is used by one thread at a time; different ones are
 * independent.
 */
#ifndef RECLAYER_TUPLE_H
#define RECLAYER_TUPLE_H

#include "reclayer/alloc.h"
#include "reclayer/common.h"
#include "reclayer/error.h"

typedef enum {
    RL_TUPLE_NULL = 0,
    RL_TUPLE_BYTES,
    RL_TUPLE_STRING,
    RL_TUPLE_NESTED,
    RL_TUPLE_INT,
    RL_TUPLE_FLOAT,
    RL_TUPLE_DOUBLE,
    RL_TUPLE_BOOL,
    RL_TUPLE_UUID,
    RL_TUPLE_VERSIONSTAMP,
} rl_tuple_type;

/* rl_tuple_type_name — "null", "bytes", "string", "nested", "int", "float", "double", "bool",
 * "uuid", "versionstamp"; "unknown" for anything else. Static string. */
RL_API const char *rl_tuple_type_name(rl_tuple_type t);

/* ---- Packing ----------------------------------------------------------------------------- */

typedef struct rl_tuple_builder rl_tuple_builder;

/* rl_tuple_builder_new — an empty builder. [out] out: free with rl_tuple_builder_free.
 * RL_OK or RL_E_OUT_OF_MEMORY. */
RL_API int rl_tuple_builder_new(rl_tuple_builder **out);
/* rl_tuple_builder_free — free the builder and its bytes. NULL ok. */
RL_API void rl_tuple_builder_free(rl_tuple_builder *b);
/* rl_tuple_builder_clear — empty the builder (and forget a sticky error), keeping its memory. */
RL_API void rl_tuple_builder_clear(rl_tuple_builder *b);

/* Append one element. They never fail on the spot: an error (out of memory, an integer too long,
 * an unbalanced nested_end) is kept and returned by rl_tuple_builder_result. Strings and bytes
 * are copied (p may be NULL when n is 0). */
RL_API void rl_tuple_add_null(rl_tuple_builder *b);
RL_API void rl_tuple_add_bytes(rl_tuple_builder *b, const void *p, size_t n);
RL_API void rl_tuple_add_string(rl_tuple_builder *b, const char *s, size_t n); /* UTF-8 */
RL_API void rl_tuple_add_int(rl_tuple_builder *b, int64_t v);
RL_API void rl_tuple_add_uint(rl_tuple_builder *b, uint64_t v); /* above INT64_MAX too */
RL_API void rl_tuple_add_float(rl_tuple_builder *b, float v);
RL_API void rl_tuple_add_double(rl_tuple_builder *b, double v);
RL_API void rl_tuple_add_bool(rl_tuple_builder *b, int v); /* 0 false, anything else true */
RL_API void rl_tuple_add_uuid(rl_tuple_builder *b, const uint8_t uuid[16]);
RL_API void rl_tuple_add_versionstamp(rl_tuple_builder *b, const uint8_t vs[12]);
/* An incomplete versionstamp with the given user version (see the top of this file). */
RL_API void rl_tuple_add_incomplete_versionstamp(rl_tuple_builder *b, uint16_t user_version);
/* A nested tuple: the elements added between begin and end are its elements. */
RL_API void rl_tuple_nested_begin(rl_tuple_builder *b);
RL_API void rl_tuple_nested_end(rl_tuple_builder *b);
/* Append bytes as they are — e.g. a subspace's prefix before the tuple, or another packed tuple
 * (whose elements then follow). Not checked. */
RL_API void rl_tuple_add_raw(rl_tuple_builder *b, const void *p, size_t n);

/* rl_tuple_builder_result — the bytes packed so far. [out] out, out_len: lent until the builder's
 * next change or free (out may be NULL when out_len is 0). Errors: the first kept error —
 * RL_E_OUT_OF_MEMORY, RL_E_TUPLE_VALUE_OVERFLOW, RL_E_INVALID_ARGUMENT (nested_end without
 * begin, or a nested tuple still open). */
RL_API int rl_tuple_builder_result(const rl_tuple_builder *b, const uint8_t **out, size_t *out_len);

/* rl_tuple_builder_versionstamp_key — finish a key for RL_MUT_SET_VERSIONSTAMPED_KEY: append the
 * 4-byte little-endian offset of the builder's one incomplete versionstamp, then behave as
 * rl_tuple_builder_result. Errors: RL_E_TUPLE_NO_INCOMPLETE_VERSIONSTAMP,
 * RL_E_TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS, and those of rl_tuple_builder_result. Add nothing
 * after it. */
RL_API int rl_tuple_builder_versionstamp_key(rl_tuple_builder *b, const uint8_t **out, size_t *out_len);

/* ---- Unpacking --------------------------------------------------------------------------- */

typedef struct rl_tuple rl_tuple;

/* rl_tuple_unpack — decode the packed tuple data[0..len) (borrowed; copied). [out] out: free with
 * rl_tuple_free; NULL on error. Errors: the decoding errors above, RL_E_OUT_OF_MEMORY. */
RL_API int rl_tuple_unpack(const void *data, size_t len, rl_tuple **out);
/* rl_tuple_free — free the tuple and everything it lent. NULL ok. */
RL_API void rl_tuple_free(rl_tuple *t);
/* rl_tuple_count — the number of elements (of this level; a nested tuple counts as one). */
RL_API size_t rl_tuple_count(const rl_tuple *t);
/* rl_tuple_type_at — the type of element i; -1 (cast) when i is past the end. */
RL_API rl_tuple_type rl_tuple_type_at(const rl_tuple *t, size_t i);

/* Accessors: RL_OK, or RL_E_INVALID_ARGUMENT (i past the end or another type; *out unchanged). */
/* An integer within int64 (RL_E_TUPLE_VALUE_OVERFLOW beyond it). */
RL_API int rl_tuple_get_int(const rl_tuple *t, size_t i, int64_t *out);
/* A non-negative integer within uint64 (RL_E_TUPLE_VALUE_OVERFLOW for negative or larger). */
RL_API int rl_tuple_get_uint(const rl_tuple *t, size_t i, uint64_t *out);
/* A double, or a float widened. */
RL_API int rl_tuple_get_double(const rl_tuple *t, size_t i, double *out);
RL_API int rl_tuple_get_float(const rl_tuple *t, size_t i, float *out);
RL_API int rl_tuple_get_bool(const rl_tuple *t, size_t i, int *out);
/* A byte string or a unicode string (its UTF-8), unescaped; lent by t. Not NUL-terminated. */
RL_API int rl_tuple_get_bytes(const rl_tuple *t, size_t i, const uint8_t **out, size_t *out_len);
RL_API int rl_tuple_get_uuid(const rl_tuple *t, size_t i, const uint8_t **out16);
RL_API int rl_tuple_get_versionstamp(const rl_tuple *t, size_t i, const uint8_t **out12);
/* A nested tuple, lent by t (do not free it). */
RL_API int rl_tuple_get_nested(const rl_tuple *t, size_t i, const rl_tuple **out);

/* ---- Text -------------------------------------------------------------------------------- */

/* rl_tuple_print — FoundationDB's human form of a packed tuple, as its Python binding prints it:
 * (1, "a", b"\x00", None, (2,), UUID("..."), Versionstamp("...", 7)). [out] out: NUL-terminated,
 * free with rl_free. Errors: the decoding errors, RL_E_OUT_OF_MEMORY. */
RL_API int rl_tuple_print(const void *data, size_t len, char **out);

/* rl_tuple_to_json / rl_tuple_from_json — a packed tuple as a JSON array and back, exactly, in
 * the element form of `rl tuple`: {"null":true} {"bool":true} {"int":"-123"} {"bytes":"00ff"}
 * {"string":"text"} {"float":"3f800000"} {"double":"3ff0000000000000"} {"uuid":HEX32}
 * {"versionstamp":HEX24} {"tuple":[...]}. [out] out: free with rl_free. from_json errors:
 * RL_E_INVALID_ARGUMENT (not such an array; the detail names the element and the problem),
 * RL_E_TUPLE_VALUE_OVERFLOW, RL_E_OUT_OF_MEMORY. */
RL_API int rl_tuple_to_json(const void *data, size_t len, char **out);
RL_API int rl_tuple_from_json(const char *json, uint8_t **out, size_t *out_len);

#endif
