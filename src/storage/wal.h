/* wal.h (internal) — the write-ahead log record codec of the storage engines (memory.c) and
 * the coordinator's commit log (src/server/commitlog.c): encode one version's mutations into a
 * record, a pure decoder (bytes in, record or error out) that the recovery code and the fuzzer
 * share, and the recovery of a log's damaged tail (classify it, move it to a side file, cut the
 * log) that both logs share.
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
 *                 0  1    type (rl__mutation_type: SET, CLEAR, CLEAR_RANGE or an atomic op)
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
#include "base/errdetail.h"
#include "storage/storage.h"

#define RL_WAL_MAGIC 0x474C4C52u
#define RL_WAL_HEADER 24
#define RL_WAL_MUT_HEADER 9
#define RL_WAL_MAX_PAYLOAD (256u << 20) /* 256 MiB: far above a transaction's 10 MB limit */
#define RL_WAL_MAX_PARAM (16u << 20)

/* A decoded record. payload points into the decoder's input and lives as long as it. */
typedef struct {
    rl__version version;
    uint32_t count;         /* mutations in payload */
    const uint8_t *payload; /* count encoded mutations */
    uint32_t payload_len;
    size_t record_len; /* header + payload: where the next record starts */
    int incomplete;    /* set on RL_E_LOG_CORRUPT when the input ends before the record */
} rl__wal_record;

/* Cursor over the mutations of a decoded (hence validated) record. */
typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} rl__wal_iter;

/* 1 if type is a mutation type that may reach storage (and thus the log). */
int rl__wal_type_ok(int type);

/* Append the record of version v with mutations muts[0..n) to out. Errors (nothing appended
 * that matters: the caller truncates on failure): RL_E_INVALID_MUTATION_TYPE,
 * RL_E_TRANSACTION_TOO_LARGE (payload or a parameter past the limits), RL_E_OUT_OF_MEMORY. */
int rl__wal_encode(rl_buf *out, rl__version v, const rl__mutation *muts, size_t n);

/* Decode the record at p[0..n). RL_OK fills *out. RL_E_LOG_CORRUPT when the bytes are not a
 * valid record; out->incomplete is then 1 if the bytes could be the start of a record that was
 * cut short (the header or the payload extends past n), 0 if they are definitely wrong.
 * Pure: reads only p[0..n), allocates nothing. */
int rl__wal_decode(const uint8_t *p, size_t n, rl__wal_record *out);

void rl__wal_iter_init(rl__wal_iter *it, const rl__wal_record *rec);
/* Next mutation of the record (pointers into the record's bytes): 1, or 0 at the end. */
int rl__wal_iter_next(rl__wal_iter *it, rl__mutation *out);

/* ---- A log's damaged tail (recovery) ------------------------------------------------------
 * A log is a file of records one after another; recovery decodes them in order. When a record
 * does not decode, the log ends there if no valid record starts anywhere after it (the tail:
 * normally an interrupted write); otherwise the file is corrupt. */

/* 1 if a valid record starts at some offset in p[from, n) (pure). */
int rl__wal_valid_record_after(const uint8_t *p, size_t n, size_t from);
/* The first offset in [from, n) where a valid record starts, or n (pure). */
size_t rl__wal_next_valid_record(const uint8_t *p, size_t n, size_t from);
/* What the unreadable bytes p[0..n) that end a log are (rl__wal_decode failed on them): an
 * rl__tail_kind of storage.h, RL_TAIL_TORN, RL_TAIL_BAD_CHECKSUM or RL_TAIL_BAD_RECORD (pure). */
int rl__wal_classify_tail(const uint8_t *p, size_t n);
/* The warning's words for a tail kind ("torn (short record)", ...; docs/file-format.md). */
const char *rl__wal_tail_words(int kind);

/* The log file whose tail is cut, for the messages and syncs of rl__wal_cut_tail. */
typedef struct {
    const char *who;  /* prefix of logged failures: "storage", "commit log" */
    const char *what; /* the file in err: "log", "commit log segment" */
    const char *dir;  /* the directory holding the log (fsynced after the side file appears) */
    int no_sync;      /* skip every fdatasync/fsync (tests) */
} rl__wal_file;

/* The log `path` ends in the n unreadable bytes p[0..n) from byte offset off: copy them into a
 * new side file "PATH.discarded-OFF" (then ".1", ".2", … when taken: never overwritten, O_EXCL),
 * fdatasync it and fsync the directory, then truncate the log at off and fdatasync it. On RL_OK
 * *out_side is the side file's path (heap, the caller's). Errors (err says which step, and
 * *out_side is NULL): a failed save (the partial side file is removed again; no file changed),
 * or a failed truncate (the bytes are saved in the side file, which the message names);
 * RL_E_OUT_OF_MEMORY. Every file call goes through os.h. */
int rl__wal_cut_tail(const rl__wal_file *f, const char *path, size_t off, const uint8_t *p, size_t n, char **out_side,
                     rl__errdetail *err);

/* Little-endian helpers shared by the storage files. */
static inline uint32_t rl__le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rl__le64(const uint8_t *p) { return (uint64_t)rl__le32(p) | (uint64_t)rl__le32(p + 4) << 32; }
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
