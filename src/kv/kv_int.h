/* kv_int.h (internal) — the private structures shared by the files of src/kv: the database
 * handle, the future, the write map (ryw.c) and the transaction.
 *
 * Ownership at a glance:
 *   rl_db      owns its backend; transactions borrow the db (close it last).
 *   rl_txn     owns its write map, mutation log, conflict ranges (all in txn->arena, reset as a
 *              whole by rl_txn_reset) and, weakly, its pending versionstamp future.
 *   rl_future  owns an arena holding its results; borrowed pointers handed to the user live
 *              until rl_future_free.
 */
#ifndef RL_KV_INT_H
#define RL_KV_INT_H

#include <pthread.h>

#include "kv/backend.h"

/* ---- Database ---------------------------------------------------------------------------- */

struct rl_db {
    rl_kv_backend *be;      /* owned */
    uint64_t seed;          /* backoff jitter state (guarded by mu) */
    pthread_mutex_t mu;
};

/* ---- Futures ----------------------------------------------------------------------------- */

typedef enum {
    RL_FUT_NONE = 0,   /* no value: commit, on_error */
    RL_FUT_INT64 = 1,  /* read version */
    RL_FUT_VALUE = 2,  /* get */
    RL_FUT_KEY = 3,    /* get_key, versionstamp */
    RL_FUT_KVS = 4,    /* get_range */
    RL_FUT_MAPPED = 5, /* get_mapped_range */
} rl_future_kind;

typedef struct {
    void (*cb)(rl_future *f, void *ud);
    void *ud;
} rl_future_cb;

struct rl_future {
    int kind;            /* rl_future_kind */
    int is_static;       /* the shared out-of-memory future: never freed */
    int ready;           /* guarded by mu; once 1 never changes */
    int error;           /* valid when ready */
    rl_arena arena;      /* results live here */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rl_future_cb *cbs;   /* callbacks waiting for ready (heap, n_cbs entries) */
    int n_cbs;
    /* Results (by kind). */
    int64_t i64;
    int present;
    const uint8_t *data; /* value or key */
    uint32_t len;
    rl_keyvalue *kvs;
    rl_mapped_keyvalue *mkvs;
    int count;
    int more;
    rl_txn *vs_owner;    /* versionstamp future: the transaction that will complete it */
};

/* A new pending future of the given kind, or the shared out-of-memory future (never NULL). */
rl_future *rl__future_new(int kind);
/* A ready future holding err (RL_OK for a value-less success). Never NULL. */
rl_future *rl__future_error(int kind, int err);
/* Mark f ready with err (RL_OK: the result fields are filled) and run its callbacks. */
void rl__future_complete(rl_future *f, int err);

/* ---- Write map (ryw.c) ------------------------------------------------------------------- */

typedef enum {
    WM_VALUE = 0,      /* key known to hold value */
    WM_CLEARED = 1,    /* key known absent */
    WM_ATOMIC = 2,     /* atomic ops stacked on the unknown stored value */
    WM_UNREADABLE = 3, /* a versionstamped value (or ops on one): reads fail with 1036 */
} rl_wm_kind;

typedef struct rl_wm_op {
    uint8_t type;            /* rl_mutation_type */
    const uint8_t *operand;  /* in the txn arena */
    uint32_t len;
    struct rl_wm_op *next;   /* application order */
} rl_wm_op;

typedef struct {
    const uint8_t *key; /* in the txn arena */
    uint32_t key_len;
    int kind;           /* rl_wm_kind */
    const uint8_t *value;
    uint32_t value_len;
    rl_wm_op *ops, *ops_tail; /* WM_ATOMIC / WM_UNREADABLE */
} rl_wm_point;

typedef struct {
    const uint8_t *begin, *end; /* in the txn arena */
    uint32_t begin_len, end_len;
} rl_wm_range;

/* The write map: point entries sorted by key, plus sorted disjoint cleared ranges. A point entry
 * overrides a cleared range; a key in a cleared range without a point entry is absent. */
typedef struct {
    rl_wm_point *pts; /* heap array, sorted, unique keys */
    size_t n_pts, cap_pts;
    rl_wm_range *clears; /* heap array, sorted, disjoint, non-adjacent-merged */
    size_t n_clears, cap_clears;
    rl_arena *arena;  /* the transaction's arena (borrowed) */
} rl_wmap;

void rl__wmap_init(rl_wmap *w, rl_arena *a);
void rl__wmap_release(rl_wmap *w);
/* Forget every entry (the arena is reset by the caller). */
void rl__wmap_reset(rl_wmap *w);
int rl__wmap_set(rl_wmap *w, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl);
int rl__wmap_clear(rl_wmap *w, const uint8_t *k, uint32_t kl);
int rl__wmap_clear_range(rl_wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el);
/* Stack or apply an atomic op (type: rl_mutation_type, never SET_VERSIONSTAMPED_KEY). */
int rl__wmap_atomic(rl_wmap *w, const uint8_t *k, uint32_t kl, int type, const uint8_t *p,
                    uint32_t pl);
/* Index of the first point with key >= k. */
size_t rl__wmap_lower(const rl_wmap *w, const uint8_t *k, uint32_t kl);
/* 1 if k lies in a cleared range. */
int rl__wmap_in_clear(const rl_wmap *w, const uint8_t *k, uint32_t kl);
/* 1 if [b, e) contains a point entry or meets a cleared range. */
int rl__wmap_overlaps(const rl_wmap *w, const uint8_t *b, uint32_t bl, const uint8_t *e,
                      uint32_t el);
/* The value of point p over a stored base (present/base): applies its ops. Result in arena a.
 * RL_E_ACCESSED_UNREADABLE for WM_UNREADABLE. */
int rl__wmap_resolve(const rl_wm_point *p, int base_present, const uint8_t *base,
                     uint32_t base_len, rl_arena *a, int *out_present, const uint8_t **out_v,
                     uint32_t *out_len);

/* ---- Transactions ------------------------------------------------------------------------ */

typedef struct {
    rl_keyrange *v; /* heap array; bytes in the txn arena */
    size_t n, cap;
} rl_rangelist;

struct rl_txn {
    rl_db *db;
    rl_arena arena;          /* write map keys/values, mutations, conflict ranges */
    rl_wmap wm;
    rl_mutation *muts;       /* heap array, in order */
    size_t n_muts, cap_muts;
    rl_rangelist reads, writes;
    size_t size;             /* bytes of mutations + conflict ranges */
    int has_rv;
    rl_version rv;
    int cancelled;
    int committing;          /* a commit is running (threads misuse guard) */
    int committed;           /* committed successfully: further use is an error until reset */
    int64_t committed_version; /* -1 until commit / read-only */
    uint8_t versionstamp[10];
    int commit_error;        /* outcome of the last commit (for the versionstamp future) */
    rl_future *vs_future;    /* pending versionstamp future (weak) */
    int has_vs_key;          /* a SET_VERSIONSTAMPED_KEY is pending (ranges read unreadable) */
    /* Options (kept across reset). */
    int64_t timeout_ms;
    int64_t retry_limit;     /* -1 unlimited */
    int64_t max_retry_delay_ms;
    int64_t size_limit;
    int access_system_keys;
    int ryw_disabled;
    /* Retry state (kept across on_error resets, cleared by rl_txn_reset). */
    uint64_t start_ns;       /* timeout clock start */
    int64_t retries;
    int64_t backoff_ms;
};

#endif
