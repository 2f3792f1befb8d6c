/* storage_int.h (private to src/storage) — the structures shared by storage.c (the versioned
 * map, reads, apply, GC) and the durable engines behind engine.h: memory.c (memory: lock file,
 * log, checkpoints, recovery) and ssd.c (LMDB below the window). The engines touch the map only
 * through engine.h's functions, except the version fields (latest, oldest, durable, poisoned,
 * base_version, live counts) that recovery and flushes set.
 */
#ifndef RL_STORAGE_STORAGE_INT_H
#define RL_STORAGE_STORAGE_INT_H

#include <pthread.h>
#include <stdint.h>

#include "base/buf.h"
#include "storage/sample.h"
#include "storage/storage.h"

#define BT_LEAF 64      /* rows per leaf (a leaf is about 1 KiB) */
#define BT_FAN 64       /* children per inner node */
#define BT_MAX_DEPTH 16 /* inner levels; reaching it takes about 32^16 inserts */
#define BT_PFX 48       /* longest common key prefix a node keeps (its kpre start after it) */

/* One version of a key: a value or a tombstone. Chains run newest first. */
typedef struct st_ver {
    struct st_ver *older; /* next older version, NULL at the end */
    rl__version v;        /* the version that wrote it */
    uint32_t len;         /* value bytes (0 for a tombstone) */
    uint8_t is_clear;     /* 1: tombstone */
    uint8_t data[];       /* the value */
} st_ver;

/* One key (a row): one allocation holding this header, the key bytes and, 8-byte aligned after
 * them, the version the row was created with (storage.c, invariant 8). Rows never move: the
 * hash index, the GC ring and the leaves point at them. */
typedef struct bt_row {
    st_ver *chain;    /* newest version first; never NULL for a row in the tree */
    uint32_t klen;    /* key bytes */
    uint8_t in_dirty; /* 1 while queued for GC */
    uint8_t key[];    /* klen bytes, then the inline version */
} bt_row;

/* A leaf: a run of consecutive rows in key order, with their key prefixes in a parallel array
 * so that searches and scans read two packed arrays. Leaves form a doubly linked list.
 * Every row's key starts with pfx[0..off) (a prefix the leaf's keys share, storage.c
 * invariant 12), and kpre[i] caches the 8 bytes of rows[i]'s key after it, so that keys with a
 * long common prefix (a subspace) still compare as integers. */
typedef struct bt_leaf {
    uint32_t n;                  /* rows, 1..BT_LEAF (0 only for an empty tree's root) */
    uint32_t off;                /* bytes of the shared prefix, 0..BT_PFX */
    struct bt_leaf *prev, *next; /* neighbours in key order, NULL at the ends */
    uint8_t pfx[BT_PFX];         /* the shared prefix (off bytes used) */
    uint64_t kpre[BT_LEAF];      /* key_prefix(rows[i]->key + off, rows[i]->klen - off) */
    bt_row *rows[BT_LEAF];       /* strictly ascending keys */
} bt_leaf;

/* A separator key of an inner node: an owned copy (rows may be freed, separators stay). */
typedef struct bt_sep {
    uint32_t klen;
    uint8_t key[];
} bt_sep;

/* An inner node: child[j] holds the keys k with sep[j] <= k < sep[j + 1] (sep[0] is unused:
 * the bound comes from the ancestors). Separators 1..n-1 start with pfx[0..off); kpre[j]
 * caches the 8 bytes of sep[j] after that prefix. */
typedef struct bt_inner {
    uint32_t n;            /* children, 1..BT_FAN (>= 2 at the root) */
    uint32_t off;          /* bytes of the separators' shared prefix, 0..BT_PFX */
    uint8_t pfx[BT_PFX];   /* the shared prefix (off bytes used) */
    uint64_t kpre[BT_FAN]; /* kpre[j] for j >= 1: key_prefix(sep[j]->key + off, ...) */
    bt_sep *sep[BT_FAN];
    void *child[BT_FAN]; /* bt_inner one level up from the leaves, bt_leaf at the last */
} bt_inner;

/* A slot of the point-read hash: h is the key's hash with bit 0 set; r NULL when empty. */
typedef struct st_hslot {
    uint64_t h;
    bt_row *r;
} st_hslot;

/* The files of a durable engine's directory that both engines share (memory.c: the lock file,
 * the write-ahead log, what recovery found at its end) plus the memory engine's checkpoint
 * counters. Only the engines (memory.c, ssd.c) read or write it. */
typedef struct {
    char *dir;           /* owned copy of the directory */
    int lock_fd, log_fd; /* -1 when closed */
    uint64_t seq;        /* sequence of the current checkpoint (ssd: flush) / log pair */
    uint64_t log_bytes;  /* bytes of records in the current log file: where the next one goes */
    uint64_t log_alloc;  /* the log file's size: records, then zeros written ahead (memory.c L1) */
    rl_buf pending;      /* encoded records not yet written */
    int no_sync;
    uint64_t checkpoint_log_bytes;
    rl__version ckpt_version; /* version of the last checkpoint (ssd: of the last flush) */
    uint64_t checkpoints;     /* checkpoints (ssd: flushes) since open */
    int replaying;            /* recovery: apply without logging */
    int lockless;             /* a read-only memory handle: takes no lock (memory.c, Readers) */
    int raced;                /* set by such an open when a writer checkpointed during it */
    /* What recovery found at the end of the log (rl__storage_status.recovery_*). */
    int tail_kind;        /* rl__tail_kind */
    uint64_t tail_offset; /* byte offset of the discarded bytes in tail_log */
    uint64_t tail_bytes;  /* bytes discarded (0 when clean) */
    char *tail_log;       /* heap: the log's path; NULL when clean */
    char *tail_moved_to;  /* heap: the side file holding them; NULL when clean or read-only */
} rl__logdir;

struct rl__storage {
    pthread_rwlock_t lock;   /* readers shared; apply/collect/checkpoint exclusive; sync takes it
                              exclusively only to write the log and to publish (see sync_mu) */
    pthread_mutex_t sync_mu; /* serialises rl__storage_sync calls: one fsync at a time, so a
                                failed fsync poisons the engine before any later sync can
                                publish a durable version (storage.c, rl__storage_sync) */
    void *root;              /* a bt_leaf when depth == 0, else a bt_inner */
    int depth;               /* inner levels above the leaves, 0..BT_MAX_DEPTH */
    bt_leaf *first, *last;   /* ends of the leaf list (the root leaf when depth == 0) */
    rl__version latest;      /* newest applied version */
    rl__version oldest;      /* oldest readable version (monotonic) */
    rl__version durable;     /* newest version known durable */
    uint64_t window;         /* MVCC window in versions */
    uint64_t live_keys;      /* keys present at latest */
    uint64_t live_bytes;     /* key + value bytes present at latest */
    struct st_hslot *htab;   /* open-addressing hash of every row (point reads) */
    size_t hcap, hcount;     /* hcap a power of two (or 0), hcount <= hcap / 2 */
    bt_row **dirty;          /* ring of rows with history or a tombstone (the GC queue) */
    size_t dirty_head, dirty_n, dirty_cap;
    uint64_t touched; /* rows changed by the current apply (GC budget) */
    rl_buf scratch;   /* atomic op results */
    rl_buf base_buf;  /* a writer's base reads (has_base) */
    int poisoned;     /* RL_OK, or the error that stopped writes for good */

    /* The read ceiling (rl__storage_set_read_ceiling): NULL, or reads above latest and at or
     * below ceiling(ceiling_ud) are served at latest. Set by the owner before the first read. */
    rl_read_ceiling_fn ceiling;
    void *ceiling_ud;

    /* The durable engine (NULL without a directory: "mem:", nothing touches the disk). The map
     * calls it only through eng (engine.h); eng_priv and f belong to the engine. */
    const struct rl__engine_ops *eng;
    void *eng_priv;           /* the engine's own state (ssd: the LMDB environment) */
    int has_base;             /* 1: keys not in the map may hold a value below the window
                              (eng->base_*); the map then keeps the rules of storage.c, "Base" */
    rl__version base_version; /* has_base: the base holds the state at this version */
    int read_only;            /* opened read-only: apply and checkpoint refused, no file touched */
    rl__logdir f;             /* the log directory's files (engine state; memory.c and ssd.c) */
    rl__bsample sample;       /* the byte sample of the pairs present at latest (sample.h): kept
                               * by apply and checkpoint loads, and by rl__storage_sample_base for
                               * the base (docs/design.md §4, "Size estimates") */
};

/* storage.c */
int rl__storage_map_init(rl__storage *st);
void rl__storage_map_release(rl__storage *st);
/* Apply one version to the map (no logging, lock held). */
int rl__storage_map_apply(rl__storage *st, rl__version v, const rl__mutation *muts, size_t n);
/* Append a key at the end of the map with one version (checkpoint load; keys ascending). */
int rl__storage_map_load(rl__storage *st, rl__version v, const uint8_t *k, uint32_t kl, const uint8_t *val,
                         uint32_t vl);
/* Reads under a read lock the caller already holds (rl__storage_read_lock): a mapped read takes
 * the lock once for its index scan and all its secondaries. Never call them without the lock,
 * and never take the lock twice in one thread (a waiting writer would deadlock it). Same
 * contracts as rl__storage_get / rl__storage_get_range otherwise. */
void rl__storage_read_lock(rl__storage *st);
void rl__storage_read_unlock(rl__storage *st);
int rl__storage_get_nolock(rl__storage *st, rl__version v, const void *key, size_t key_len, rl_arena *a,
                           int *out_present, const uint8_t **out_value, uint32_t *out_len);
int rl__storage_get_range_nolock(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                                 size_t end_len, int limit, long target_bytes, int reverse, rl_arena *a,
                                 rl_keyvalue **out_kvs, int *out_n, int *out_more);
/* Add every pair of the base (has_base) to the byte sample: the ssd engine's open, before it
 * replays the log, rebuilds the sample from LMDB (one pass over its keys). RL_OK or the base
 * cursor's error, RL_E_OUT_OF_MEMORY. */
int rl__storage_sample_base(rl__storage *st);
#include "storage/engine.h"

#endif
