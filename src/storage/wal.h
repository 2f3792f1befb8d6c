/* wal.h (internal) — the write-ahead log record codec of the `memory` storage engine: encode one
 * version's mutations into a record, and a pure decoder (bytes in, record or error out) that the
 * recovery code and the fuzzer share.
 *
 * Log record (all integers little-endian; mirrored in docs/file-format.md):
 *
 *   OFFSET SIZE DESCRIPTION
 *   0      4    magic 0x474C4C52 ("RLLG" in file order)
 *   4      4    checksum: rl__checksum32 of bytes [8, 24 + payload_len)
 *   8      4    payload_len: bytes of mutations that follow the header (<= RL_WAL_MAX_PAYLOAD)
 *   12     4    count: number of mutations in the payload
 *   16     8    version: the commit version these mutations belong to
 *   24     ...  payload: count mutations, each:
 *                 0  1    type (rl_mutation_type: SET, CLEAR, CLEAR_RANGE or an atomic op)
 *                 1  4    len1: bytes of p1 (key or range begin), <= RL_WAL_MAX_PARAM
 *                 5  4    len2: bytes of p2 (value, operand or range end), <= RL_WAL_MAX_PARAM
 *                 9  len1 p1
 *                 .. len2 p2
 *
 * The decoder validates everything: magic, payload length bound, checksum, that the mutations
 * fill the payload exactly, every type is a storage mutation type (never the versionstamped
 * ones) and a CLEAR has no p2. Nothing is allocated; decoded mutations point into the input.
 */
#ifndef RL_STORAGE_WAL_H
#define RL_STORAGE_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "storage/storage.h"

#define RL_WAL_MAGIC 0x474C4C52u
#define RL_WAL_HEADER 24
#define RL_WAL_MUT_HEADER 9
#define RL_WAL_MAX_PAYLOAD (256u << 20) /* 256 MiB: far above a transaction's 10 MB limit */
#define RL_WAL_MAX_PARAM (16u << 20)

/* A decoded record. payload points into the decoder's input and lives as long as it. */
typedef struct {
    rl_version version;
    uint32_t count;          /* mutations in payload */
    const uint8_t *payload;  /* count encoded mutations */
    uint32_t payload_len;
    size_t record_len;       /* header + payload: where the next record starts */
    int incomplete;          /* set on RL_E_LOG_CORRUPT when the input ends before the record */
} rl_wal_record;

/* Cursor over the mutations of a decoded (hence validated) record. */
typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} rl_wal_iter;

/* 1 if type is a mutation type that may reach storage (and thus the log). */
int rl__wal_type_ok(int type);

/* Append the record of version v with mutations muts[0..n) to out. Errors (nothing appended
 * that matters: the caller truncates on failure): RL_E_INVALID_MUTATION_TYPE,
 * RL_E_TRANSACTION_TOO_LARGE (payload or a parameter past the limits), RL_E_OUT_OF_MEMORY. */
int rl__wal_encode(rl_buf *out, rl_version v, const rl_mutation *muts, size_t n);

/* Decode the record at p[0..n). RL_OK fills *out. RL_E_LOG_CORRUPT when the bytes are not a
 * valid record; out->incomplete is then 1 if the bytes could be the start of a record that was
 * cut short (the header or the payload extends past n), 0 if they are definitely wrong.
 * Pure: reads only p[0..n), allocates nothing. */
int rl__wal_decode(const uint8_t *p, size_t n, rl_wal_record *out);

void rl__wal_iter_init(rl_wal_iter *it, const rl_wal_record *rec);
/* Next mutation of the record (pointers into the record's bytes): 1, or 0 at the end. */
int rl__wal_iter_next(rl_wal_iter *it, rl_mutation *out);

/* Little-endian helpers shared by the storage files. */
static inline uint32_t rl__le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rl__le64(const uint8_t *p) {
    return (uint64_t)rl__le32(p) | (uint64_t)rl__le32(p + 4) << 32;
}
static inline void rl__put_le32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void rl__put_le64(uint8_t *p, uint64_t v) {
    rl__put_le32(p, (uint32_t)v);
    rl__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
