/* storage.h (internal) — the storage engine: a versioned ordered map (the MVCC window) over a
 * durable engine, with reads at a version.
 *
 * Model (docs/design.md §4):
 *   - Versions are uint64, applied in strictly increasing order by one writer at a time
 *     (rl__storage_apply). A read at version V sees exactly the mutations of versions <= V.
 *   - The window: versions newer than (latest - window_versions) keep their history; anything
 *     older is collapsed to its latest value. A read below rl__storage_oldest_version fails with
 *     RL_E_TRANSACTION_TOO_OLD; a read above rl__storage_latest_version fails with
 *     RL_E_FUTURE_VERSION, unless the owner installed a read ceiling that covers it
 *     (rl__storage_set_read_ceiling): then it reads at the latest version.
 *   - Durability (the `memory` engine with a directory): rl__storage_apply appends the version's
 *     mutations to a checksummed write-ahead log; rl__storage_sync makes everything applied so far
 *     durable (one fsync covers many versions: group commit). Checkpoints are written every
 *     checkpoint_log_bytes of log. Recovery loads the last checkpoint and replays the log after it;
 *     an unreadable last record ends the log (its bytes moved to a side file, or left in place
 *     by a read-only open), any other damage — corruption elsewhere, a corrupt newest checkpoint,
 *     a missing checkpoint — fails open with RL_E_LOG_CORRUPT or RL_E_CHECKPOINT_CORRUPT and a
 *     message naming the file, changing no file (memory.c, Recovery; docs/file-format.md).
 *   - Read-only (rl__storage_options.read_only): recovery into memory that changes no file;
 *     apply and checkpoint return RL_E_READ_ONLY_DATABASE.
 *   - The ssd engine (rl__storage_options.engine; engine.h, ssd.c): the same log, but instead of
 *     checkpoints a flush writes the window to LMDB every checkpoint_log_bytes; reads merge
 *     the window with LMDB; recovery replays the log over LMDB's last committed state.
 *   - Without a directory ("mem:"), nothing touches the disk.
 *
 * Mutations reaching storage are already resolved: versionstamped operations have had their
 * versionstamps substituted by the commit path; atomic operations (ADD, MAX, …) are applied here
 * against the value at the previous version.
 *
 * Threads: any number of concurrent readers and one writer at a time; the engine locks inside.
 * Results of reads are copied into the caller's arena and stay valid as long as that arena.
 */
#ifndef RL_STORAGE_STORAGE_H
#define RL_STORAGE_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "base/kvtypes.h"
#include "reclayer/kv.h"

/* Reads return the public rl_keyvalue (both pointers into the caller's arena) and take the
 * public rl_key_selector (FoundationDB's or_equal/offset pair) of reclayer/kv.h. */

/* The durable engine (engine.h). A directory records its engine when it is created (ssd: the
 * file ENGINE; a directory without one holds a memory database); opening it with another engine
 * fails with RL_E_INVALID_ARGUMENT naming both. RL_ENGINE_AUTO opens what the directory holds
 * (memory for a new one). */
enum { RL_ENGINE_MEMORY = 0, RL_ENGINE_SSD = 1, RL_ENGINE_AUTO = 2 };

typedef struct {
    int engine;                    /* RL_ENGINE_MEMORY, RL_ENGINE_SSD or RL_ENGINE_AUTO */
    const char *dir;               /* NULL: in memory only, nothing durable */
    int no_sync;                   /* skip fsync (benchmarks say so when they use it) */
    uint64_t window_versions;      /* MVCC window; 0 = default 5,000,000 */
    uint64_t checkpoint_log_bytes; /* checkpoint (ssd: flush) when the log grows past this;
                                    * 0 = 64 MiB (ssd: 16 MiB) */
    int read_only;                 /* 1: recover into memory, change no file, refuse writes */
} rl__storage_options;

typedef struct rl__storage rl__storage;

typedef struct {
    const char *engine;             /* "memory" or "ssd" (static text) */
    rl__version latest_version;     /* newest applied version */
    rl__version durable_version;    /* newest version known durable */
    rl__version oldest_version;     /* oldest readable version */
    uint64_t keys;                  /* live keys at latest_version */
    uint64_t bytes;                 /* key + value bytes at latest_version */
    uint64_t log_bytes;             /* bytes in the current log file */
    rl__version checkpoint_version; /* version of the last checkpoint (ssd: flush; 0 if none) */
    uint64_t checkpoints;           /* checkpoints (ssd: flushes to LMDB) written since open */
    uint64_t window_rows;           /* rows held in memory (ssd: the window above LMDB) */
    int read_only;                  /* 1 if opened read-only */
    /* What the open's recovery found at the end of the log (rl__tail_kind). When it is not
     * RL_TAIL_CLEAN, the log ended in recovery_tail_bytes unreadable bytes from byte offset
     * recovery_tail_offset of recovery_log, which were moved to recovery_moved_to (NULL when
     * read-only: the bytes were left in the log). Both strings are owned by the engine and valid
     * until rl__storage_close; both are NULL when the tail was clean. */
    int recovery_tail;
    uint64_t recovery_tail_offset;
    uint64_t recovery_tail_bytes;
    const char *recovery_log;
    const char *recovery_moved_to;
} rl__storage_status;

/* The end of a log as recovery found it (rl__storage_status.recovery_tail). */
typedef enum {
    RL_TAIL_CLEAN = 0,        /* the log ends at a record boundary */
    RL_TAIL_TORN = 1,         /* a short record: the file ends inside its header or payload */
    RL_TAIL_BAD_CHECKSUM = 2, /* a complete record (its length fits the file), checksum wrong */
    RL_TAIL_BAD_RECORD = 3,   /* not a record: bad magic, impossible length, malformed payload */
} rl__tail_kind;

/* "clean", "torn", "bad_checksum" or "bad_record" (static text; "unknown" otherwise). */
const char *rl__storage_tail_name(int kind);

/* Open (and recover) a storage engine. *out is set only on RL_OK. On failure a message naming
 * the file and offset (for corruption) is appended to err when err is not NULL.
 * Errors: RL_E_DATABASE_LOCKED_BY_PROCESS (a writer has the directory, or any handle when
 * opening to write), RL_E_FILE_NOT_FOUND (dir missing), RL_E_IO_ERROR (also: the discarded
 * tail could not be saved to its side file), RL_E_LOG_CORRUPT, RL_E_CHECKPOINT_CORRUPT (also:
 * a corrupt newest or a missing checkpoint), RL_E_OUT_OF_MEMORY, RL_E_INVALID_ARGUMENT. */
int rl__storage_open(const rl__storage_options *opts, rl__storage **out, rl__errdetail *err);
/* Close; flushes nothing that was not synced. NULL is a no-op. */
void rl__storage_close(rl__storage *st);

/* Apply the mutations of one version (v > latest_version), in order, logging them when durable.
 * The new version is readable at once; it is durable after rl__storage_sync. Errors:
 * RL_E_READ_ONLY_DATABASE (opened read-only; nothing applied), RL_E_VERSION_INVALID (v not
 * increasing), RL_E_IO_ERROR (the engine is then poisoned: every later write fails),
 * RL_E_OUT_OF_MEMORY. */
int rl__storage_apply(rl__storage *st, rl__version v, const rl__mutation *muts, size_t n);
/* Make every version applied before the call durable (fsync unless no_sync). The engine lock is
 * held only to write the buffered log bytes and to publish the durable version, not during the
 * fsync, so readers (and applies, whose versions the call may then not cover) go on meanwhile;
 * concurrent calls run one at a time. RL_OK (always when read-only),
 * RL_E_IO_ERROR or RL_E_NO_SPACE (the engine is then poisoned), or the error that poisoned it
 * earlier. */
int rl__storage_sync(rl__storage *st);
/* Write a checkpoint now and truncate the log (also done automatically); once it is durable,
 * every older checkpoint and log is deleted. RL_E_READ_ONLY_DATABASE when read-only. */
int rl__storage_checkpoint(rl__storage *st);
/* Drop history older than the window (also done automatically on apply). */
void rl__storage_collect(rl__storage *st);
void rl__storage_get_status(rl__storage *st, rl__storage_status *out);
rl__version rl__storage_latest_version(rl__storage *st);
rl__version rl__storage_oldest_version(rl__storage *st);

/* The read ceiling's source (rl__storage_set_read_ceiling): a version through which nothing
 * beyond what the engine holds will ever be applied. Called under the engine's read lock, only
 * for reads above the latest version; it must be cheap and must not call into the engine. */
typedef rl__version (*rl_read_ceiling_fn)(void *ud);

/* rl__storage_set_read_ceiling — from now on a read at a version v above the latest applied
 * version is served at the latest version when v <= fn(ud), and fails with RL_E_FUTURE_VERSION
 * otherwise (fn NULL: always, the default). The owner promises that no version in
 * (latest, fn(ud)] will ever be applied, so the data at v is the data at latest — the embedded
 * backend passes its committer's newest handed-out read version (rl__committer_read_ceiling),
 * which may be a version reserved while nothing committed. The check and the clamp happen under
 * the read lock, together with the read, so an apply cannot slip in between. A storage server
 * or the coordinator's system keyspace never sets one: they learn versions from the log.
 * Call before the first read; ud must outlive every read. [owner] */
void rl__storage_set_read_ceiling(rl__storage *st, rl_read_ceiling_fn fn, void *ud);

/* Point read at version v. On RL_OK, *out_present says whether the key exists and, if so,
 * *out_value / *out_len hold a copy in arena a. Errors: RL_E_TRANSACTION_TOO_OLD,
 * RL_E_FUTURE_VERSION, RL_E_OUT_OF_MEMORY. */
int rl__storage_get(rl__storage *st, rl__version v, const void *key, size_t key_len, rl_arena *a, int *out_present,
                    const uint8_t **out_value, uint32_t *out_len);

/* rl__storage_watch_changed — a watch's check (docs/design.md §2, "Watches"): *out_changed = 1
 * when the key's value at some version after `after` (within the window; a version below it
 * counts as the oldest) differs from (present, value) — the value at the latest version, or any
 * version of the key's history above `after` (so a change away and back counts) — else 0.
 * *out_through (may be NULL): the latest version the check covered. Takes the read lock.
 * RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__storage_watch_changed(rl__storage *st, rl__version after, const void *key, size_t key_len, int present,
                              const uint8_t *value, uint32_t value_len, int *out_changed, rl__version *out_through);
/* Resolve a key selector at version v. The result is clamped to [min_key, max_key] where
 * min_key is "" and max_key is "\xff\xff" (FoundationDB's rule for the resolved key of a
 * selector that runs off either end). The key is copied into a. */
int rl__storage_get_key(rl__storage *st, rl__version v, const rl_key_selector *sel, rl_arena *a,
                        const uint8_t **out_key, uint32_t *out_len);

/* The outcome of resolving a selector within bounds (rl__storage_select). */
typedef struct {
    int resolved;       /* 1: key is the selector's key; 0: the walk reached a bound first */
    const uint8_t *key; /* resolved: the key (in [lo, hi]); else the bound reached (lo or hi) */
    uint32_t key_len;
    int offset; /* !resolved: continue with {key, or_equal 0, offset} on the shard
                          * beyond the bound (offset >= 1 forward past hi, <= 0 backward from
                          * lo); resolved: 1 */
} rl__select_result;

/* Resolve selector sel at version v over the rows of [lo, hi) only — a storage server's shard,
 * or the whole readable keyspace ["", max_key) of an embedded database. When the walk reaches hi
 * (forward) or lo (backward) with offset left, the result is the bound itself if hi_is_max (lo_is_min)
 * says that bound is the end of the keyspace (FoundationDB's clamping: off the end is max_key,
 * off the front is ""), and otherwise an unresolved result with the selector to continue with.
 * The selector's anchor (its key) must lie in [lo, hi] (not at hi with or_equal): else
 * RL_E_WRONG_SHARD_SERVER. The key is copied into a. Other errors as rl__storage_get. */
int rl__storage_select(rl__storage *st, rl__version v, const rl_key_selector *sel, const uint8_t *lo, uint32_t lo_len,
                       int lo_is_min, const uint8_t *hi, uint32_t hi_len, int hi_is_max, rl_arena *a,
                       rl__select_result *out);

/* The bounds of a range read given as selectors, resolved within [lo, hi) (select.c states the
 * rules). Every pointer lives in arena a or is lo / hi. */
typedef struct {
    int unresolved;        /* a selector could not be resolved within [lo, hi): nothing else set */
    const uint8_t *rbegin; /* the resolved range [rbegin, rend) (may be empty or inverted) */
    uint32_t rbegin_len;
    const uint8_t *rend;
    uint32_t rend_len;
    const uint8_t *cbegin; /* [cbegin, cend): the resolved range clipped to [lo, hi) */
    uint32_t cbegin_len;
    const uint8_t *cend;
    uint32_t cend_len;
    int read_through; /* the range continues past the interval in the scan's direction */
} rl__range_bounds;

/* Resolve begin and end within [lo, hi) (lo_is_min / hi_is_max as for rl__storage_select) and
 * clip. Errors: RL_E_OUT_OF_MEMORY and those of rl__storage_select other than
 * RL_E_WRONG_SHARD_SERVER (an anchor outside the interval makes the bounds unresolved). */
int rl__storage_range_bounds(rl__storage *st, rl__version v, const rl_key_selector *begin, const rl_key_selector *end,
                             const uint8_t *lo, uint32_t lo_len, int lo_is_min, const uint8_t *hi, uint32_t hi_len,
                             int hi_is_max, int reverse, rl_arena *a, rl__range_bounds *out);

/* Range read of [begin, end) at version v: at most limit rows (0 = unlimited) and about
 * target_bytes of keys+values (0 = unlimited; the row that crosses the target is included), in
 * key order or reverse. Rows are copied into a; *out_more is 1 if rows remain in the range.
 * Errors as rl__storage_get. */
int rl__storage_get_range(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                          size_t end_len, int limit, long target_bytes, int reverse, rl_arena *a, rl_keyvalue **out_kvs,
                          int *out_n, int *out_more);

/* ---- Size estimates (the byte sample: sample.h; docs/design.md §4, "Size estimates") ------- */

/* rl__storage_estimate_bytes — *out: the byte sample's estimate of the key + value bytes of the
 * pairs in [begin, end) at the latest version (end NULL: to the end of the keyspace; an empty or
 * inverted range: 0). The sample follows every applied write and is rebuilt from the data at
 * open, so the estimate after a restart is the one before. Unbiased; kv.h states its error
 * bound. Takes the read lock. RL_OK. */
int rl__storage_estimate_bytes(rl__storage *st, const void *begin, size_t begin_len, const void *end, size_t end_len,
                               int64_t *out);
/* rl__storage_split_points — the keys strictly inside (begin, end) that cut it into chunks of
 * about chunk bytes by the byte sample (rl__bsample_split: ascending, each chunk but the last
 * weighing at most chunk in the sample), copied into arena a: *out (NULL when none), *out_n.
 * chunk <= 0 or an empty range: none. Takes the read lock. RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__storage_split_points(rl__storage *st, const void *begin, size_t begin_len, const void *end, size_t end_len,
                             int64_t chunk, rl_arena *a, rl_slice **out, int *out_n);
/* rl__storage_sample_stats — the byte sample's entries and total weight (tests, status). */
void rl__storage_sample_stats(rl__storage *st, uint64_t *out_entries, int64_t *out_bytes);

/* Apply one atomic operation to an existing value (present = 0 when the key is absent),
 * FoundationDB's semantics. Writes the result into out; *out_present = 0 means the key is
 * cleared (COMPARE_AND_CLEAR). Pure function, shared with the read-your-writes layer. */
int rl__atomic_apply(int type, int present, const uint8_t *old, size_t old_len, const uint8_t *operand,
                     size_t operand_len, rl_buf *out, int *out_present);

#endif
