/* engine.h (private to src/storage) — the durable-engine interface: what the versioned map
 * (storage.c: the MVCC window, the B+tree, reads, apply, GC) asks of the engine that keeps its
 * data on disk, and what the map offers the engines in return.
 *
 * Two engines implement it:
 *   memory (memory.c)  everything in the map; a write-ahead log plus periodic checkpoints of
 *                       the whole state; recovery loads the checkpoint and replays the log.
 *   ssd    (ssd.c)      versions older than the last flush live in LMDB (the "base"); the map
 *                       holds the window above it, made durable by the same write-ahead log
 *                       until a flush writes it to LMDB; recovery replays the log over LMDB's
 *                       last committed state.
 * Without a directory ("mem:") there is no engine (st->eng == NULL).
 *
 * Locking: every engine call is made with the engine lock (st->lock) held exclusively, except
 * sync_fd (no lock: sync_mu only) and the base_* reads (the lock held shared, or exclusively by
 * a writer). Errors are include/reclayer/error.h codes; an engine that may have left its files
 * in an unknown state poisons the map (st->poisoned) before returning.
 */
#ifndef RL_STORAGE_ENGINE_H
#define RL_STORAGE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "storage/storage.h"

struct rl__storage;

/* A cursor over the base (the engine's rows below the window), in key order. Opaque. */
typedef struct rl__base_cur rl__base_cur;

typedef struct rl__engine_ops {
    const char *name; /* "memory" or "ssd": the directory's ENGINE file and status */
    /* Open the directory and recover into the (empty) map. err names the file on corruption.
     * The engine's state is released by close, which is also called after a failed open. */
    int (*open)(struct rl__storage *st, const rl__storage_options *o, rl__errdetail *err);
    void (*close)(struct rl__storage *st);
    /* Queue the log record of one version (before the map applies it). */
    int (*log)(struct rl__storage *st, rl__version v, const rl__mutation *muts, size_t n);
    /* After a version was applied: write, checkpoint or flush when due (errors poison). */
    int (*after_apply)(struct rl__storage *st);
    /* The sync in three steps (storage.c, rl__storage_sync): begin and end under the lock,
     * sync_fd without it. begin returns the version covered and a descriptor to fsync (-1: none
     * needed, published already); end closes it and publishes or poisons. */
    int (*sync_begin)(struct rl__storage *st, rl__version *out_target, int *out_fd, uint64_t *out_seq);
    int (*sync_fd)(struct rl__storage *st, int fd, uint64_t seq);
    int (*sync_end)(struct rl__storage *st, rl__version target, int fd, int sync_rc);
    /* Checkpoint (memory) or flush to the base (ssd) now, then start a new log. */
    int (*checkpoint)(struct rl__storage *st);
    /* The engine's part of the status: log bytes, checkpoint version and count, recovery. */
    void (*status)(struct rl__storage *st, rl__storage_status *out);

    /* ---- the base: NULL for engines without one (memory) ---------------------------------- */
    /* Point read of the base (the state at st->base_version). The value is copied into arena a
     * when a is not NULL, else into buf (reset first; valid until buf changes). */
    int (*base_get)(struct rl__storage *st, const uint8_t *k, uint32_t kl, rl_arena *a, rl_buf *buf, int *out_present,
                    const uint8_t **out_val, uint32_t *out_len);
    /* A cursor; *out NULL on error. Pointers returned by cur_get stay valid until the cursor
     * moves or closes. cur_close(NULL) is a no-op. */
    int (*cur_open)(struct rl__storage *st, rl__base_cur **out);
    void (*cur_close)(rl__base_cur *c);
    /* Position at the first key >= k (> k with strict), or at the last key < k (<= k with
     * or_equal: seek_lt). */
    int (*cur_seek_ge)(rl__base_cur *c, const uint8_t *k, uint32_t kl, int strict);
    int (*cur_seek_lt)(rl__base_cur *c, const uint8_t *k, uint32_t kl, int or_equal);
    int (*cur_next)(rl__base_cur *c);
    int (*cur_prev)(rl__base_cur *c);
    /* 1 and the current row, or 0 when the cursor is past either end. */
    int (*cur_get)(rl__base_cur *c, const uint8_t **k, uint32_t *kl, const uint8_t **v, uint32_t *vl);
    /* Optional (NULL: storage.c walks a cursor): a range read of the base alone, for a range
     * the map has no row in — rl__storage_get_range's contract for [b, e) (limit, target_bytes,
     * reverse, the rows and *out_more), the rows copied into arena a. */
    int (*base_range)(struct rl__storage *st, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, int limit,
                      long target_bytes, int reverse, rl_arena *a, rl_keyvalue **out_kvs, int *out_n, int *out_more);
} rl__engine_ops;

extern const rl__engine_ops rl__engine_memory; /* memory.c */
extern const rl__engine_ops rl__engine_ssd;    /* ssd.c */

/* ---- what the map offers the engines (storage.c; engine lock held) ------------------------ */

/* The latest state, in key order: cb for every present key (value bytes valid during the call
 * only). Stops at and returns the first non-RL_OK result of cb. */
typedef int (*rl_map_each_cb)(void *ctx, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl);
int rl__storage_map_each(struct rl__storage *st, rl_map_each_cb cb, void *ctx);

/* The rows changed after version `since` (head version > since), in key order: cb gets the
 * latest state (v NULL and is_clear 1 for a deleted key). Stops at the first error of cb. */
typedef int (*rl_map_changed_cb)(void *ctx, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl, int is_clear);
int rl__storage_map_changed(struct rl__storage *st, rl__version since, rl_map_changed_cb cb, void *ctx);

/* Before the base moves to the latest version (a flush): every row changed since the base's
 * version whose chain has no entry at or below the oldest readable version gets one there that
 * holds the base's current value (or a tombstone), so reads in the window never fall through to
 * the base's new state. Errors: RL_E_OUT_OF_MEMORY (the rows pinned so far stay correct), the
 * base's read errors. */
int rl__storage_map_pin(struct rl__storage *st);
/* After the base holds the state at st->base_version: drop the rows whose only version is at or
 * below both the oldest readable version and the base's (the base answers for them). */
void rl__storage_map_evict(struct rl__storage *st);

/* ---- the log directory, shared by both engines (memory.c) -------------------------------- */

/* Copy the directory, check it, take LOCK (exclusive, shared when read-only). */
int rl__logdir_open(struct rl__storage *st, const rl__storage_options *o, rl__errdetail *err);
/* Replay log-SEQ into the map, skipping records at or below skip_upto (already in the base);
 * the tail rules of memory.c; a missing file is an empty log. */
int rl__logdir_replay(struct rl__storage *st, uint64_t seq, rl__version skip_upto, rl__errdetail *err);
/* Writable: open log-SEQ for appending (creating it) and fsync the directory. */
int rl__logdir_open_log(struct rl__storage *st, uint64_t seq, rl__errdetail *err);
/* Write the pending records (no fsync); a failure poisons. */
int rl__logdir_flush_pending(struct rl__storage *st);
/* The after_apply policy both engines share: when the log (written and queued) reaches
 * checkpoint_log_bytes, run checkpoint (the engine's: a memory checkpoint, an ssd flush; one that
 * ran out of memory without poisoning is retried after a later apply, not an error of this one);
 * else write the queue out once it holds 1 MiB. Returns RL_OK or the I/O error that poisoned. */
int rl__logdir_after_apply(struct rl__storage *st, int (*checkpoint)(struct rl__storage *st));
/* After the state up to the latest version is durable elsewhere (checkpoint next, or the base):
 * create log-next, switch to it, fsync the directory, delete the older logs and checkpoints. */
int rl__logdir_switch(struct rl__storage *st, uint64_t next);
/* fsync a file / the directory (no-ops with no_sync); errors logged and mapped. */
int rl__logdir_sync_dir(struct rl__storage *st);
void rl__logdir_close(struct rl__storage *st);
/* The engine to open o->dir with: the one its ENGINE file names (a directory without one holds
 * a memory database, or none yet), checked against o->engine (RL_ENGINE_AUTO: whatever it holds,
 * memory for a new one). A mismatch is RL_E_INVALID_ARGUMENT naming both; an unknown name
 * RL_E_CORRUPT_DATA naming the file. A missing directory picks o->engine (open reports it). */
int rl__logdir_pick_engine(const rl__storage_options *o, const rl__engine_ops **out, rl__errdetail *err);
/* Writable open: create DIR/ENGINE naming the engine if it is missing (written, fsynced,
 * renamed into place, directory fsynced; through storage/os.h). */
int rl__logdir_record_engine(struct rl__storage *st, const char *name, rl__errdetail *err);
int rl__logdir_poison(struct rl__storage *st, int rc);
/* The memory engine's steps that ssd shares as they are. */
int rl__memory_log(struct rl__storage *st, rl__version v, const rl__mutation *muts, size_t n);
int rl__memory_sync_begin(struct rl__storage *st, rl__version *out_target, int *out_fd, uint64_t *out_seq);
int rl__memory_sync_fd(struct rl__storage *st, int fd, uint64_t seq);
int rl__memory_sync_end(struct rl__storage *st, rl__version target, int fd, int sync_rc);
void rl__memory_status(struct rl__storage *st, rl__storage_status *out);

#endif
