/* commitlog.h (internal) — the coordinator's durable commit log: one checksummed record per
 * commit batch version, in append-only segment files, kept in memory for PEEK until every
 * storage server that owns a shard has popped it.
 *
 * Model:
 *   - The writer (the committer's sink, one thread at a time) appends the record of a version
 *     (rl__commitlog_append: encoded into a pending buffer, nothing written yet), then syncs
 *     (rl__commitlog_sync: write the pending records to the active segment, one fdatasync for all
 *     of them — group commit — then publish them). Only published records are durable and only
 *     they are visible to readers (rl__commitlog_read, the coordinator's PEEK).
 *   - Records use the write-ahead log record format of the storage engine (src/storage/wal.h,
 *     docs/file-format.md): magic, checksum, payload length, mutation count, version, mutations.
 *     Versions strictly increase across the whole log. A record may hold no mutation (a batch
 *     whose transactions wrote only conflict ranges still consumes its version, so the version
 *     survives a restart and is never handed out twice).
 *   - Segments: LOGDIR/seg-BBBBBBBBBBBBBBBB.log (16 lower-case hex digits), where B, the segment's
 *     base, is the last version of the segment before it (0 for the first): every record of the
 *     segment has a version > B, and every version <= B lives in older segments or was truncated.
 *     The newest segment is the active one; the writer moves to a new segment once the active one
 *     holds segment_bytes. Truncation deletes whole segments whose last version is <= a version
 *     (the minimum popped version), never the active one; so the oldest segment's base is the
 *     truncation point: a reader asking for versions after an older version gets
 *     RL_E_PROCESS_BEHIND (its data would have a hole).
 *   - Recovery (rl__commitlog_open) replays every segment in base order into memory. A record
 *     that does not decode at the end of the newest segment, with no valid record after it, is a
 *     torn or damaged tail: its bytes are copied to a side file
 *     "seg-B.log.discarded-OFF[.N]" (fsynced, never overwritten) and the segment is truncated
 *     before it, as src/storage/memory.c does with its log; the open reports it (log warning and
 *     rl__commitlog_status). Any other damage — a bad record followed by valid ones, a bad record
 *     in an older segment, versions that do not increase or do not fit the segment's base — fails
 *     the open with RL_E_LOG_CORRUPT and a message naming the file and the byte offset, changing
 *     no file. Open never deletes a file.
 *   - LOGDIR/LOCK is flock()ed exclusively for the life of the handle (a second open, even in the
 *     same process, is RL_E_DATABASE_LOCKED_BY_PROCESS).
 *   - Errors while writing: every call that changes files goes through src/storage/os.h (fault
 *     injection). A failed write or fdatasync poisons the log: that sync and every later append
 *     and sync fail with the same error (RL_E_IO_ERROR or RL_E_NO_SPACE); records published
 *     before stay readable, so nothing acknowledged is lost. A failed segment roll-over is logged
 *     and retried at the next sync (the active segment just grows).
 *
 * Threads: one writer thread calls append and sync (the committer's); readers (read, truncate,
 * the version and status getters) may run on any thread at the same time. An internal mutex
 * guards the in-memory segments; rl__commitlog_read calls its visitor with the mutex held.
 */
#ifndef RL_SERVER_COMMITLOG_H
#define RL_SERVER_COMMITLOG_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "base/kvtypes.h"
#include "storage/wal.h"

typedef struct rl__commitlog rl__commitlog;

typedef struct {
    const char *dir;        /* the log directory; created (one level) if missing */
    int no_sync;            /* skip fdatasync/fsync (benchmarks only) */
    uint64_t segment_bytes; /* start a new segment once the active one holds this; 0 = 8 MiB */
} rl__commitlog_options;

typedef struct {
    rl__version durable_version;  /* newest published (durable) version; the base when empty */
    rl__version appended_version; /* newest appended version (>= durable_version) */
    rl__version base_version;     /* every version <= this is truncated (the oldest base) */
    rl__version first_version;    /* oldest record held (0 when none) */
    uint64_t records;             /* records held (in memory and in the segments) */
    uint64_t bytes;               /* bytes of the segment files held */
    uint64_t segments;            /* segment files held (>= 1 once open) */
    uint64_t segments_deleted;    /* segments truncation deleted since open */
    int poisoned;                 /* 0, or the error that poisoned the log */
    /* What recovery found at the end of the newest segment (rl__tail_kind of storage.h): when
     * not RL_TAIL_CLEAN, recovery_tail_bytes bytes from recovery_tail_offset of recovery_segment
     * were moved to recovery_moved_to. Strings owned by the log, valid until close; NULL when
     * the tail was clean. */
    int recovery_tail;
    uint64_t recovery_tail_offset;
    uint64_t recovery_tail_bytes;
    const char *recovery_segment;
    const char *recovery_moved_to;
} rl__commitlog_status;

/* rl__commitlog_open — open (creating it if needed) and recover the log in o->dir.
 * [in] o       borrowed for the call (dir is copied).
 * [out] out    the log (rl__commitlog_close); set only on RL_OK.
 * [out] err may be NULL; on failure a message naming the file (and byte offset) is appended.
 * Errors: RL_E_INVALID_ARGUMENT, RL_E_DATABASE_LOCKED_BY_PROCESS, RL_E_LOG_CORRUPT,
 * RL_E_IO_ERROR (also: a discarded tail could not be saved or cut), RL_E_NO_SPACE,
 * RL_E_OUT_OF_MEMORY. [any] */
int rl__commitlog_open(const rl__commitlog_options *o, rl__commitlog **out, rl__errdetail *err);

/* rl__commitlog_close — release everything (NULL is a no-op). Pending (unsynced) records are
 * dropped: they were never durable. No other call may be running. */
void rl__commitlog_close(rl__commitlog *log);

/* rl__commitlog_append — encode the record of version v with muts[0..n) (storage mutation types
 * only: versionstamps already substituted) into the pending buffer. Nothing is written and
 * nothing becomes visible until rl__commitlog_sync. [in] muts borrowed for the call.
 * Errors (nothing appended): RL_E_VERSION_INVALID (v <= the last appended version),
 * RL_E_INVALID_MUTATION_TYPE, RL_E_TRANSACTION_TOO_LARGE (over the record limits of wal.h),
 * RL_E_OUT_OF_MEMORY, or the error that poisoned the log. [writer] */
int rl__commitlog_append(rl__commitlog *log, rl__version v, const rl__mutation *muts, size_t n);

/* rl__commitlog_sync — write the pending records to the active segment, fdatasync it (unless
 * no_sync) and publish them: from then on they are durable and readable. With nothing pending it
 * returns RL_OK at once. Then, if the active segment holds segment_bytes, start a new one.
 * Errors: RL_E_IO_ERROR / RL_E_NO_SPACE (the log is poisoned: the pending records are not
 * published, and may or may not be on disk), or the error that poisoned it earlier. [writer] */
int rl__commitlog_sync(rl__commitlog *log);

/* rl__commitlog_durable_version — the newest durable version (the base when the log holds no
 * record). [any] */
rl__version rl__commitlog_durable_version(rl__commitlog *log);

/* rl__commitlog_base_version — every version <= this has been truncated away. [any] */
rl__version rl__commitlog_base_version(rl__commitlog *log);

/* Called for each durable record by rl__commitlog_read, in version order, with the log's mutex
 * held: rec (and the bytes it points to) is valid only during the call. Return 0 to go on, 1 to
 * stop after this record. It must not call back into the log. */
typedef int (*rl_commitlog_visit_fn)(void *ud, const rl__wal_record *rec);

/* rl__commitlog_read — visit the durable records with version > after, oldest first, until fn
 * returns 1 or the records end. [out] out_durable (may be NULL): the durable version when the
 * visit ran (every record <= it was offered, unless fn stopped early).
 * Returns RL_OK, or RL_E_PROCESS_BEHIND when after < rl__commitlog_base_version (records after
 * it were truncated; fn is not called). [any] */
int rl__commitlog_read(rl__commitlog *log, rl__version after, rl_commitlog_visit_fn fn, void *ud,
                       rl__version *out_durable);

/* rl__commitlog_truncate — delete every segment, oldest first, whose records all have versions
 * <= v (never the active segment), and free their memory. A segment whose file cannot be deleted
 * is kept (logged; retried next time). [out] out_deleted (may be NULL): segments deleted.
 * Returns RL_OK. [any] */
int rl__commitlog_truncate(rl__commitlog *log, rl__version v, uint64_t *out_deleted);

/* rl__commitlog_get_status — copy the counters (a consistent snapshot). [any] */
void rl__commitlog_get_status(rl__commitlog *log, rl__commitlog_status *out);

#endif
