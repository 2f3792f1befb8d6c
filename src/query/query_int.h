/* query_int.h (internal) — the query module's shared internals: the continuation codec, kept
 * apart from the cursor so that tests and the fuzz target can drive it directly, and the test
 * hook on a database's ADAPTIVE model.
 *
 * Continuation layout (all integers big-endian):
 *
 *   OFFSET  SIZE  DESCRIPTION
 *   0       4     magic "RLqc"
 *   4       1     version (RL__QCONT_VERSION)
 *   5       1     flags: bit 0 = a last key follows (else: resume at the scan's start);
 *                 other bits must be 0
 *   6       8     scan hash: rl__hash64 of the scan's range keys and direction
 *                 (rl__qcont_scan_hash), so a continuation of another index, other bounds or the
 *                 other direction is refused
 *   14      4     n: length of the key suffix (0 when flag bit 0 is clear)
 *   18      n     the last consumed index key after the index subspace prefix
 *   18+n    4     rl__checksum32 of bytes [0, 18+n)
 *
 * Nothing else: a continuation is exactly 22 + n bytes. Skip is not recorded (it applies to the
 * first page only).
 */
#ifndef RL_QUERY_QUERY_INT_H
#define RL_QUERY_QUERY_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "query/adaptive.h"
#include "reclayer/kv.h"

#define RL__QCONT_VERSION 1
#define RL__QCONT_OVERHEAD 22 /* bytes around the key suffix */

/* The hash binding a continuation to one scan: the range [begin, end) of index keys its bounds
 * select (which starts with the index subspace) and the direction. */
uint64_t rl__qcont_scan_hash(const uint8_t *begin, size_t begin_len, const uint8_t *end, size_t end_len, int reverse);

/* Append the continuation for scan hash h to out (after resetting it). has_key 0: resume at the
 * scan's start (suffix ignored). Errors are sticky in out (RL_E_OUT_OF_MEMORY). */
void rl__qcont_encode(uint64_t h, int has_key, const uint8_t *suffix, size_t suffix_len, rl_buf *out);

/* Decode p[0..len) as a continuation of the scan with hash h. On RL_OK *out_has_key says whether
 * a key suffix is present, and *out_suffix / *out_suffix_len point into p (borrowed).
 * RL_E_CONTINUATION_INVALID for anything else (bad magic, version, flags, length, checksum, or
 * another scan's hash), with a fixed reason in *out_why (static text; may be NULL). Never reads
 * outside p[0..len). */
int rl__qcont_decode(const uint8_t *p, size_t len, uint64_t h, int *out_has_key, const uint8_t **out_suffix,
                     size_t *out_suffix_len, const char **out_why);

/* rl__query_adaptive_with — run fn(model, ud) under the lock of db's ADAPTIVE state (created if
 * need be), e.g. for a test to seed a wrong prior or read the calibration. RL_OK or
 * RL_E_OUT_OF_MEMORY. */
int rl__query_adaptive_with(rl_db *db, void (*fn)(rl__adaptive_model *m, void *ud), void *ud);

/* rl__query_adaptive_test — tests only: from now on every ADAPTIVE cursor opened in this process
 * runs pages of alternate_rows entries alternating USE_REMOTE_FETCH and SCAN_AND_FETCH, without
 * observing them (docs/design.md §7, test mode); 0 (or less) turns it off. Overrides the
 * RL_QUERY_ADAPTIVE_TEST environment variable, which is read once, at the first ADAPTIVE cursor.
 * Thread-safe. */
void rl__query_adaptive_test(int alternate_rows);

#endif
