/* tuple_json.h (internal) — tuples as JSON arrays (jansson), in the element form of
 * tests/data/tuple/README.md:
 *
 *   {"null":true}  {"bool":true}  {"int":"-123"}   integers as decimal strings of any size
 *   {"bytes":"00ff"}  {"string":"text"}             bytes as lower-case hex, strings as UTF-8
 *   {"float":"3f800000"}  {"double":"3ff0000000000000"}   IEEE bits, big-endian hex
 *   {"uuid":HEX32}  {"versionstamp":HEX24}          16 and 12 bytes
 *   {"tuple":[...]}                                  a nested tuple
 *
 * Conversion is exact both ways: rl__tuple_from_json(rl__tuple_to_json(b)) == b for every valid
 * encoding b (the decoder accepts only canonical encodings, see tuple.h).
 */
#ifndef RL_TUPLE_TUPLE_JSON_H
#define RL_TUPLE_TUPLE_JSON_H

#include <stddef.h>

#include <jansson.h>

#include "tuple/tuple.h"

/* Decode the tuple data[0..len) into a new JSON array (*out, a new reference the caller
 * json_decref()s; NULL on error). RL_OK, a decoding error, or RL_E_OUT_OF_MEMORY.
 *
 * detail, in all three: NULL, or where a failure's detail goes (tuple.h, "Error details"). */
int rl__tuple_to_json(const void *data, size_t len, json_t **out, rl__errdetail *detail);

/* Encode the JSON array arr (borrowed) as a tuple appended to out. A versionstamp whose first 10
 * bytes are all 0xff is packed as an incomplete one (same bytes, counted by the packer).
 * RL_E_INVALID_ARGUMENT if arr is not an array of elements in the form above (wrong key, hex of
 * the wrong length, bad decimal ...), RL_E_TUPLE_VALUE_OVERFLOW for an integer longer than 255
 * bytes, RL_E_OUT_OF_MEMORY. out may hold a partial encoding after an error. */
int rl__tuple_from_json(const json_t *arr, rl_buf *out, rl__errdetail *detail);

/* Encode into an existing packer (at its current depth), for callers building a larger key. */
int rl__tuple_pack_json(rl__tuple_packer *pk, const json_t *arr, rl__errdetail *detail);

#endif
