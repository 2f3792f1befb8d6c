/* ssd.c — the `ssd` durable engine: versions older than the last flush live in LMDB (the base);
 * the map above it (storage.c) holds the MVCC window, made durable by the memory engine's
 * write-ahead log (memory.c) until a flush writes it to LMDB in one transaction. Formats in
 * docs/file-format.md ("The ssd engine").
 *
 * Directory contents (beside LOCK and the log files of memory.c):
 *   ENGINE      "ssd\n": the engine this directory was created with (written once, fsynced)
 *   data.mdb    one LMDB environment (MDB_NOSUBDIR is not used: the directory is the env), two
 *               named databases: "data" (the rows, encoded below) and "meta" (key "state":
 *               format u32, flushed version u64, log sequence u64, live keys u64, live bytes u64,
 *               all little-endian)
 *   log-S       the log of the versions after the flushed version (S = the meta's sequence);
 *               older log-T are leftovers of a flush interrupted before it deleted them
 *
 * Flush (the engine's checkpoint; engine lock held; every checkpoint_log_bytes of log or on
 * rl__storage_checkpoint):
 *   pin the window's history (rl__storage_map_pin) -> one LMDB write transaction: every row
 *   changed since the last flush (put or delete) and meta {latest, S+1, counts} -> commit (LMDB
 *   fsyncs data and meta unless no_sync) -> create log-(S+1), fsync dir, delete log-S
 *   (rl__logdir_switch) -> evict the rows the base now answers for (rl__storage_map_evict).
 *   A crash before the commit leaves the old meta and log-S (replayed); after it, meta names
 *   S+1: log-(S+1) is replayed if it exists (it holds only versions after the flush) and log-S
 *   is ignored (every record of it is in LMDB) until the next flush deletes it.
 *
 * Recovery: take LOCK, open LMDB, read meta (none: an empty database at version 0), then
 * replay log-S over it (records at or below the flushed version are skipped), with the tail
 * rules of the memory engine.
 *
 * Keys (docs/file-format.md): LMDB keys are at most 511 bytes, reclayer keys up to 10,000. A key
 * K of at most RL_SSD_SHORT (480) bytes is stored under 0x00 K. A longer key is stored under
 * 0x00 P H where P is its first 480 bytes and H the big-endian 64-bit hash of the whole key, its
 * value prefixed with the rest of the key (u32 LE length, the bytes). An LMDB key's length tells
 * which kind it is (<= 481 short, 489 long). Encoded keys sort as the keys do, except that the
 * long keys sharing one P (a group) sort by hash: cursors read a group whole and sort it by key.
 * Two long keys with the same P and H (a 64-bit collision) cannot both be stored: the flush
 * fails with RL_E_ENGINE_KEY_TOO_LARGE and poisons (never seen; documented).
 *
 * Concurrency: LMDB is opened with MDB_NOLOCK and MDB_NOTLS: the engine lock already keeps
 * reads (shared) apart from the flush's write transaction (exclusive), which is what MDB_NOLOCK
 * asks of its caller, and no read transaction outlives a read (they are reset into a small
 * pool). So there is no lock.mdb.
 *
 * Faults: LMDB does its own I/O (pwrite, fdatasync, msync), outside storage/os.h, so the fault
 * layer cannot fail it; its errors are mapped (MDB_MAP_FULL, ENOSPC: RL_E_NO_SPACE; EIO and
 * others: RL_E_IO_ERROR; MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID: RL_E_CORRUPT_DATA naming
 * data.mdb) and any failed flush poisons the engine. The log and ENGINE go through os.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/hash.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "storage/engine.h"
#include "storage/ssd.h"
#include "storage/storage_int.h"
#include "storage/wal.h"

#define RL_SSD_SHORT 480u                      /* longest key stored as it is */
#define RL_SSD_LONG_KEY (1 + RL_SSD_SHORT + 8) /* LMDB key of a long key */
#define SSD_MAP_SIZE (1ull << 40)              /* 1 TiB of address space (the file grows as needed) */
#define SSD_POOL 32                            /* idle read cursors kept for reuse */
#define SSD_META_FORMAT 1u
#define DEFAULT_FLUSH_BYTES (16ull << 20) /* flush every 16 MiB of log (docs/benchmarks.md) */

struct rl__base_cur;

typedef struct {
    MDB_env *env;
    MDB_dbi data, meta;
    char path[4200]; /* DIR/data.mdb, for messages */
    pthread_mutex_t pool_mu;
    struct rl__base_cur *pool[SSD_POOL]; /* idle cursors, each with its read transaction */
    int npool;
    uint64_t gen;                /* bumped by every flush (engine lock held exclusively) */
    unsigned psize;              /* LMDB's page size */
    atomic_int walk;             /* range reads walk LMDB's leaf pages (see "range reads off ...") */
    atomic_uint_fast64_t walked; /* leaf pages walked (rl__ssd_page_walk) */
    rl_buf kbuf;                 /* the flush's encoded key and long-key value */
} ssd_env;

static ssd_env *ssd_of(rl__storage *st) { return st->eng_priv; }

/* Map an LMDB result to an error code, logging what failed and the file. */
static int mdb_fail(ssd_env *s, const char *op, int e) {
    if (e == 0) return RL_OK;
    rl__log(RL_LOG_ERROR, "storage: ssd %s on %s failed: %s", op, s->path, mdb_strerror(e));
    switch (e) {
    case MDB_MAP_FULL:
    case ENOSPC:
    case EDQUOT: return RL_E_NO_SPACE;
    case ENOMEM: return RL_E_OUT_OF_MEMORY;
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
    case MDB_VERSION_MISMATCH:
    case MDB_BAD_TXN: return RL_CORRUPT(RL_E_CORRUPT_DATA);
    case ENOENT: return RL_E_FILE_NOT_FOUND;
    default: return RL_E_IO_ERROR;
    }
}

/* ---- keys -------------------------------------------------------------------------------- */

/* The LMDB key of k into out (at most RL_SSD_LONG_KEY bytes). Returns its length. */
static size_t enc_key(const uint8_t *k, uint32_t kl, uint8_t *out) {
    out[0] = 0;
    if (kl <= RL_SSD_SHORT) {
        if (kl) memcpy(out + 1, k, kl);
        return (size_t)kl + 1;
    }
    memcpy(out + 1, k, RL_SSD_SHORT);
    uint64_t h = rl__hash64(k, kl, 0x5353445f4b455931ull);
    for (int i = 0; i < 8; i++) out[1 + RL_SSD_SHORT + i] = (uint8_t)(h >> (56 - 8 * i));
    return RL_SSD_LONG_KEY;
}

static int is_long(const MDB_val *k) { return k->mv_size == RL_SSD_LONG_KEY; }

/* A long entry's value: u32 LE suffix length, the suffix, the value. 0 if malformed. */
static int long_split(const MDB_val *v, const uint8_t **suf, uint32_t *sl, const uint8_t **val, uint32_t *vl) {
    if (v->mv_size < 4) return 0;
    const uint8_t *p = v->mv_data;
    uint32_t n = rl__le32(p);
    if ((size_t)n > v->mv_size - 4) return 0;
    *suf = p + 4;
    *sl = n;
    *val = p + 4 + n;
    *vl = (uint32_t)(v->mv_size - 4 - n);
    return 1;
}

/* ---- read transactions ------------------------------------------------------------------- *
 * Reads take an idle cursor from the pool (a read transaction with a cursor on "data"). The
 * transaction stays open while idle: if no flush happened since (gen unchanged), the next read
 * uses it as it is, skipping mdb_txn_renew and the reload of the named database's record that a
 * renewed transaction does on first use; after a flush it is reset and renewed first. This is
 * safe with MDB_NOLOCK because an idle transaction is never read after a flush without renewal,
 * and no read runs during one (engine lock). */

struct rl__base_cur;
typedef struct rl__base_cur base_cur;
static int cur_take(ssd_env *s, base_cur **out);
static void cur_give(ssd_env *s, base_cur *c);
static MDB_txn *cur_txn(base_cur *c);

/* ---- point reads ------------------------------------------------------------------------- */

/* Look k up in txn: *present, and the value's bytes (pointing into the map). */
static int lookup(ssd_env *s, MDB_txn *t, const uint8_t *k, uint32_t kl, int *present, const uint8_t **val,
                  uint32_t *vl) {
    uint8_t ek[RL_SSD_LONG_KEY];
    MDB_val key = {enc_key(k, kl, ek), ek}, v;
    *present = 0;
    int e = mdb_get(t, s->data, &key, &v);
    if (e == MDB_NOTFOUND) return RL_OK;
    if (e) return mdb_fail(s, "get", e);
    if (kl <= RL_SSD_SHORT) {
        *present = 1;
        *val = v.mv_data;
        *vl = (uint32_t)v.mv_size;
        return RL_OK;
    }
    const uint8_t *suf;
    uint32_t sl;
    if (!long_split(&v, &suf, &sl, val, vl)) {
        rl__log(RL_LOG_ERROR, "storage: ssd %s: malformed long-key entry", s->path);
        return RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
    *present = sl == kl - RL_SSD_SHORT && memcmp(suf, k + RL_SSD_SHORT, sl) == 0;
    return RL_OK;
}

static int ssd_base_get(rl__storage *st, const uint8_t *k, uint32_t kl, rl_arena *a, rl_buf *buf, int *out_present,
                        const uint8_t **out_val, uint32_t *out_len) {
    ssd_env *s = ssd_of(st);
    base_cur *c;
    const uint8_t *v = NULL;
    uint32_t vl = 0;
    *out_present = 0;
    *out_val = NULL;
    *out_len = 0;
    int rc = cur_take(s, &c);
    if (rc != RL_OK) return rc;
    rc = lookup(s, cur_txn(c), k, kl, out_present, &v, &vl);
    if (rc == RL_OK && *out_present) {
        if (a) {
            uint8_t *p = rl__arena_memdup(a, vl ? v : (const uint8_t *)"", vl ? vl : 1);
            if (!p) rc = RL_E_OUT_OF_MEMORY;
            *out_val = p;
        } else {
            rl__buf_reset(buf);
            rl__buf_append(buf, v, vl);
            rc = rl__buf_error(buf);
            *out_val = buf->data;
        }
        *out_len = vl;
        if (rc != RL_OK) *out_present = 0;
    }
    cur_give(s, c);
    return rc;
}

/* ---- cursors ----------------------------------------------------------------------------- */

typedef struct {
    uint32_t koff, kl; /* the full key in cur->gkeys */
    const uint8_t *v;  /* the value (in the map) */
    uint32_t vl;
} grp_ent;

enum { POS_BEGIN = 0, POS_END, POS_SHORT, POS_GROUP };

struct rl__base_cur {
    ssd_env *s;
    MDB_txn *txn;
    MDB_cursor *c;
    int pos;      /* POS_*: before the first row, past the last, at a short or group row */
    MDB_val k, v; /* POS_SHORT: the entry */
    rl_buf gkeys; /* POS_GROUP: the group's full keys */
    grp_ent *g;   /* POS_GROUP: the group sorted by key */
    size_t gn, gcap, gi;
    uint8_t gp[1 + RL_SSD_SHORT]; /* the group's encoded prefix 0x00 P */
    int gafter;                   /* the LMDB cursor is at the entry after the group (else past the end) */
    uint64_t gen;                 /* the flush generation txn was (re)started in */
};

static const rl_buf *g_keys_for_sort;

static int grp_cmp(const void *a, const void *b) {
    const grp_ent *x = a, *y = b;
    const uint8_t *base = g_keys_for_sort->data;
    return rl__bytes_cmp(base + x->koff, x->kl, base + y->koff, y->kl);
}

static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

/* Load the group whose encoded prefix is pfx (0x00 P) with the LMDB cursor anywhere; leaves it
 * at the entry after the group (gafter) and the group sorted, gi = 0. */
static int load_group(rl__base_cur *c, const uint8_t *pfx) {
    ssd_env *s = c->s;
    uint8_t ek[RL_SSD_LONG_KEY];
    memcpy(ek, pfx, 1 + RL_SSD_SHORT);
    memset(ek + 1 + RL_SSD_SHORT, 0, 8);
    memcpy(c->gp, pfx, 1 + RL_SSD_SHORT);
    MDB_val k = {RL_SSD_LONG_KEY, ek}, v;
    rl__buf_reset(&c->gkeys);
    c->gn = c->gi = 0;
    int e = mdb_cursor_get(c->c, &k, &v, MDB_SET_RANGE);
    while (e == 0 && is_long(&k) && memcmp(k.mv_data, pfx, 1 + RL_SSD_SHORT) == 0) {
        const uint8_t *suf, *val;
        uint32_t sl, vl;
        if (!long_split(&v, &suf, &sl, &val, &vl)) {
            rl__log(RL_LOG_ERROR, "storage: ssd %s: malformed long-key entry", s->path);
            return RL_CORRUPT(RL_E_CORRUPT_DATA);
        }
        if (RL_GROW(c->g, c->gcap, c->gn + 1, 16)) return RL_E_OUT_OF_MEMORY;
        grp_ent *g = &c->g[c->gn++];
        g->koff = (uint32_t)c->gkeys.len;
        g->kl = RL_SSD_SHORT + sl;
        g->v = val;
        g->vl = vl;
        rl__buf_append(&c->gkeys, pfx + 1, RL_SSD_SHORT);
        rl__buf_append(&c->gkeys, suf, sl);
        e = mdb_cursor_get(c->c, &k, &v, MDB_NEXT);
    }
    if (e && e != MDB_NOTFOUND) return mdb_fail(s, "cursor", e);
    if (rl__buf_error(&c->gkeys)) return RL_E_OUT_OF_MEMORY;
    c->gafter = e == 0;
    pthread_mutex_lock(&sort_mu); /* qsort has no context argument in C11 */
    g_keys_for_sort = &c->gkeys;
    qsort(c->g, c->gn, sizeof *c->g, grp_cmp);
    pthread_mutex_unlock(&sort_mu);
    c->pos = c->gn ? POS_GROUP : POS_END;
    return RL_OK;
}

/* The LMDB cursor is at entry (k, v) (e == 0) or ran off an end (MDB_NOTFOUND): make that the
 * position; a long entry loads its group, at its first (forward) or last row. */
static int land(rl__base_cur *c, int e, MDB_val *k, MDB_val *v, int forward) {
    if (e == MDB_NOTFOUND) {
        c->pos = forward ? POS_END : POS_BEGIN;
        return RL_OK;
    }
    if (e) return mdb_fail(c->s, "cursor", e);
    if (!is_long(k)) {
        c->pos = POS_SHORT;
        c->k = *k;
        c->v = *v;
        return RL_OK;
    }
    uint8_t pfx[1 + RL_SSD_SHORT];
    memcpy(pfx, k->mv_data, sizeof pfx);
    int rc = load_group(c, pfx);
    if (rc == RL_OK && c->pos == POS_GROUP && !forward) c->gi = c->gn - 1;
    return rc;
}

/* Leave the group forward (to the entry after it) or backward (to the entry before it). */
static int leave_group(rl__base_cur *c, int forward) {
    MDB_val k, v;
    int e;
    if (forward) {
        if (!c->gafter) {
            c->pos = POS_END;
            return RL_OK;
        }
        e = mdb_cursor_get(c->c, &k, &v, MDB_GET_CURRENT);
        return land(c, e, &k, &v, 1);
    }
    uint8_t ek[RL_SSD_LONG_KEY];
    memcpy(ek, c->gp, 1 + RL_SSD_SHORT);
    memset(ek + 1 + RL_SSD_SHORT, 0, 8);
    k.mv_size = RL_SSD_LONG_KEY;
    k.mv_data = ek;
    e = mdb_cursor_get(c->c, &k, &v, MDB_SET_RANGE);
    if (e == 0) e = mdb_cursor_get(c->c, &k, &v, MDB_PREV);
    else if (e == MDB_NOTFOUND) e = mdb_cursor_get(c->c, &k, &v, MDB_LAST);
    return land(c, e, &k, &v, 0);
}

static MDB_txn *cur_txn(base_cur *c) { return c->txn; }

static void cur_destroy(base_cur *c) {
    if (c->c) mdb_cursor_close(c->c);
    if (c->txn) mdb_txn_abort(c->txn);
    rl__buf_release(&c->gkeys);
    rl__free(c->g);
    rl__free(c);
}

/* An idle cursor from the pool (renewed when a flush happened since it was used), or a new one. */
static int cur_take(ssd_env *s, base_cur **out) {
    base_cur *c = NULL;
    int e = 0;
    *out = NULL;
    pthread_mutex_lock(&s->pool_mu);
    if (s->npool) c = s->pool[--s->npool];
    pthread_mutex_unlock(&s->pool_mu);
    if (c && c->gen != s->gen) {
        mdb_txn_reset(c->txn);
        e = mdb_txn_renew(c->txn);
        if (e == 0) e = mdb_cursor_renew(c->txn, c->c);
        if (e) {
            cur_destroy(c);
            return mdb_fail(s, "read transaction", e);
        }
        c->gen = s->gen;
    }
    if (!c) {
        if (!(c = rl__calloc(1, sizeof *c))) return RL_E_OUT_OF_MEMORY;
        c->s = s;
        c->gen = s->gen;
        rl__buf_init(&c->gkeys);
        e = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &c->txn);
        if (e == 0) e = mdb_cursor_open(c->txn, s->data, &c->c);
        if (e) {
            cur_destroy(c);
            return mdb_fail(s, "read transaction", e);
        }
    }
    c->pos = POS_END;
    *out = c;
    return RL_OK;
}

static void cur_give(ssd_env *s, base_cur *c) {
    if (!c) return;
    rl__buf_reset(&c->gkeys);
    c->gn = 0;
    pthread_mutex_lock(&s->pool_mu);
    if (s->npool < SSD_POOL) {
        s->pool[s->npool++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&s->pool_mu);
    if (c) cur_destroy(c);
}

static int ssd_cur_open(rl__storage *st, rl__base_cur **out) { return cur_take(ssd_of(st), out); }

static void ssd_cur_close(rl__base_cur *c) {
    if (c) cur_give(c->s, c);
}

/* The current row's key (POS_SHORT or POS_GROUP). */
static void cur_key(const rl__base_cur *c, const uint8_t **k, uint32_t *kl) {
    if (c->pos == POS_SHORT) {
        *k = (const uint8_t *)c->k.mv_data + 1;
        *kl = (uint32_t)c->k.mv_size - 1;
    } else {
        *k = c->gkeys.data + c->g[c->gi].koff;
        *kl = c->g[c->gi].kl;
    }
}

static int ssd_cur_next(rl__base_cur *c);

static int ssd_cur_seek_ge(rl__base_cur *c, const uint8_t *k, uint32_t kl, int strict) {
    uint8_t ek[RL_SSD_LONG_KEY];
    size_t n = enc_key(k, kl, ek);
    if (kl > RL_SSD_SHORT) memset(ek + 1 + RL_SSD_SHORT, 0, 8); /* the start of k's group */
    MDB_val key = {n, ek}, v;
    int e = mdb_cursor_get(c->c, &key, &v, MDB_SET_RANGE);
    int rc = land(c, e, &key, &v, 1);
    /* Step over rows below k (within a group, or k itself with strict). */
    while (rc == RL_OK && (c->pos == POS_SHORT || c->pos == POS_GROUP)) {
        const uint8_t *ck;
        uint32_t ckl;
        cur_key(c, &ck, &ckl);
        int cmp = rl__bytes_cmp(ck, ckl, k, kl);
        if (cmp > 0 || (cmp == 0 && !strict)) break;
        rc = ssd_cur_next(c);
    }
    return rc;
}

static int ssd_cur_next(rl__base_cur *c) {
    MDB_val k, v;
    int e;
    switch (c->pos) {
    case POS_END: return RL_OK;
    case POS_BEGIN: e = mdb_cursor_get(c->c, &k, &v, MDB_FIRST); return land(c, e, &k, &v, 1);
    case POS_SHORT:
        e = mdb_cursor_get(c->c, &k, &v, MDB_NEXT);
        if (e == 0 && !is_long(&k)) { /* the usual step: short key to short key */
            c->k = k;
            c->v = v;
            return RL_OK;
        }
        return land(c, e, &k, &v, 1);
    default:
        if (++c->gi < c->gn) return RL_OK;
        return leave_group(c, 1);
    }
}

static int ssd_cur_prev(rl__base_cur *c) {
    MDB_val k, v;
    int e;
    switch (c->pos) {
    case POS_BEGIN: return RL_OK;
    case POS_END: e = mdb_cursor_get(c->c, &k, &v, MDB_LAST); return land(c, e, &k, &v, 0);
    case POS_SHORT: e = mdb_cursor_get(c->c, &k, &v, MDB_PREV); return land(c, e, &k, &v, 0);
    default:
        if (c->gi > 0) {
            c->gi--;
            return RL_OK;
        }
        return leave_group(c, 0);
    }
}

static int ssd_cur_seek_lt(rl__base_cur *c, const uint8_t *k, uint32_t kl, int or_equal) {
    int rc = ssd_cur_seek_ge(c, k, kl, or_equal);
    return rc == RL_OK ? ssd_cur_prev(c) : rc;
}

static int ssd_cur_get(rl__base_cur *c, const uint8_t **k, uint32_t *kl, const uint8_t **v, uint32_t *vl) {
    if (c->pos == POS_SHORT) {
        cur_key(c, k, kl);
        *v = c->v.mv_data;
        *vl = (uint32_t)c->v.mv_size;
        return 1;
    }
    if (c->pos == POS_GROUP) {
        cur_key(c, k, kl);
        *v = c->g[c->gi].v;
        *vl = c->g[c->gi].vl;
        return 1;
    }
    return 0;
}

/* ---- range reads off LMDB's leaf pages --------------------------------------------------- *
 * A range the window has no row in (the usual case for data older than the window: storage.c
 * calls base_range then) is read here. LMDB's cursor costs about 140 instructions a row
 * (MDB_NEXT); instead the rows of each leaf page are read straight off the page, and the cursor
 * only moves from page to page: MDB_SET on the page's last key (first, backward), which LMDB
 * answers from the cursor's current page, then MDB_NEXT (MDB_PREV) onto the next page. The end
 * key is compared only on a page whose last key (first, backward) is not inside the range, and
 * key and value, which are adjacent in LMDB's node as in the result, are copied in one memcpy.
 *
 * The page layout is LMDB's file format (mdb.c of 0.9: MDB_page, a 16-byte header with flags
 * at 10, lower at 12 and upper at 14, then lower-16 bytes of u16 node offsets; MDB_node, u16
 * data size low and high halves, u16 flags, u16 key size, the key, the value), stable across
 * 0.9 since the file format is. Every page is checked before it is read: it must be a plain
 * leaf page and hold the node LMDB's cursor returned, with the same key and value pointers and
 * sizes; a page that does not turns the walk off for the environment (logged) and the cursor
 * functions above read everything from then on. Every node is bounds-checked within its page.
 * Rows the walk does not read itself (long keys and their groups, values on overflow pages)
 * go through the cursor functions one row at a time. Pointers into the page are only used
 * while the read transaction is open, like the cursor's. RL_SSD_PAGE_WALK=0 in the
 * environment turns the walk off at open (tests and benchmarks compare the two). */

#define LP_HDR 16u
#define LP_LEAF 0x02u
#define LP_TYPES 0x6fu /* P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2 | P_SUBP */
#define LN_HDR 8u

static inline unsigned lp_u16(const uint8_t *p) {
    uint16_t x;
    memcpy(&x, p, 2);
    return x;
}

typedef struct {
    const uint8_t *pg; /* the page */
    unsigned n;        /* its nodes */
} lpage;

typedef struct {
    const uint8_t *key; /* the encoded key (0x00 K for a short key) */
    uint32_t ks, ds;    /* key and data sizes */
    const uint8_t *data;
    int simple; /* a short key with its value on the page */
} lnode;

/* Node i of p (i < p->n), bounds-checked: 0 if it does not fit in the page. */
static inline int lp_node(const ssd_env *s, const lpage *p, unsigned i, lnode *out) {
    unsigned off = lp_u16(p->pg + LP_HDR + 2 * i);
    if (off < LP_HDR + 2 * p->n || off + LN_HDR > s->psize) return 0;
    const uint8_t *nd = p->pg + off;
    unsigned flags = lp_u16(nd + 4);
    out->ks = lp_u16(nd + 6);
    out->ds = (uint32_t)lp_u16(nd) | (uint32_t)lp_u16(nd + 2) << 16;
    out->key = nd + LN_HDR;
    out->data = out->key + out->ks;
    size_t dsz = flags & 0x01 /* F_BIGDATA: a page number */ ? sizeof(uint64_t) : out->ds;
    if ((size_t)off + LN_HDR + out->ks + dsz > s->psize) return 0;
    out->simple = flags == 0 && out->ks >= 1 && out->ks <= 1 + RL_SSD_SHORT;
    return 1;
}

/* The leaf page of the cursor's current entry (POS_SHORT) and its index there: 1; 2 when the
 * entry is not one the walk reads (its value on an overflow page); 0 when the page does not
 * look like LMDB 0.9's leaf page holding that entry (the caller turns the walk off). last: try
 * the page's last node first (else its first: where MDB_NEXT / MDB_PREV land on a page). */
static int lp_find(const ssd_env *s, const rl__base_cur *c, int last, lpage *p, unsigned *idx) {
    const uint8_t *k = c->k.mv_data;
    p->pg = (const uint8_t *)((uintptr_t)k & ~(uintptr_t)(s->psize - 1));
    if (k - p->pg < (ptrdiff_t)(LP_HDR + LN_HDR)) return 0;
    unsigned flags = lp_u16(p->pg + 10), lower = lp_u16(p->pg + 12), upper = lp_u16(p->pg + 14);
    if ((flags & LP_TYPES) != LP_LEAF || lower < LP_HDR || lower > upper || upper > s->psize) return 0;
    p->n = (lower - LP_HDR) / 2;
    if (p->n == 0) return 0;
    unsigned want = (unsigned)(k - p->pg) - LN_HDR, i = last ? p->n - 1 : 0;
    if (lp_u16(p->pg + LP_HDR + 2 * i) != want)
        for (i = 0; i < p->n && lp_u16(p->pg + LP_HDR + 2 * i) != want; i++) {}
    lnode nd;
    if (i == p->n || !lp_node(s, p, i, &nd) || nd.ks != c->k.mv_size) return 0;
    if (lp_u16(p->pg + want + 4) & 0x01) return 2; /* F_BIGDATA */
    if (!nd.simple || nd.data != c->v.mv_data || nd.ds != c->v.mv_size) return 0;
    *idx = i;
    return 1;
}

/* The rows of a range read, copied into the arena (the layout of storage.c's range reads:
 * key and value adjacent, in chunks of 512 bytes doubling up to 16 KiB). */
typedef struct {
    rl_arena *a;
    rl_keyvalue *kvs;
    int n, cap, limit;
    long bytes, target;
    uint8_t *chunk;
    size_t room, chunk_size;
    uint64_t pages; /* leaf pages walked */
} rows_out;

static inline int rows_full(const rows_out *o) {
    return (o->limit && o->n >= o->limit) || (o->target && o->bytes >= o->target);
}

/* Append a row of key kl and value vl bytes: *dst is where to copy them (key then value; NULL
 * for an empty row at the start). 0 when out of memory. */
static inline int rows_add(rows_out *o, uint32_t kl, uint32_t vl, uint8_t **dst) {
    if (o->n == o->cap) {
        int ncap = o->cap * 4;
        rl_keyvalue *nk = rl__arena_alloc(o->a, (size_t)ncap * sizeof *nk);
        if (!nk) return 0;
        memcpy(nk, o->kvs, (size_t)o->n * sizeof *nk);
        o->kvs = nk;
        o->cap = ncap;
    }
    size_t need = (size_t)kl + vl;
    if (need > o->room) {
        size_t room = need > o->chunk_size ? need : o->chunk_size;
        if (o->chunk_size < 16384) o->chunk_size *= 2;
        if (!(o->chunk = rl__arena_alloc(o->a, room))) return 0;
        o->room = room;
    }
    uint8_t *p = *dst = o->chunk;
    o->chunk += need;
    o->room -= need;
    o->kvs[o->n].key = p;
    o->kvs[o->n].key_len = kl;
    o->kvs[o->n].value = p + kl;
    o->kvs[o->n].value_len = vl;
    o->n++;
    o->bytes += (long)need;
    return 1;
}

enum { WALK_STOP, WALK_MOVED, WALK_SLOW };

/* Put the LMDB cursor on node nd of the current page (MDB_SET: LMDB finds it on the cursor's
 * page without a search) and step past it in the walk's direction. */
static int walk_step_past(rl__base_cur *c, const lnode *nd, int reverse) {
    MDB_val k = {nd->ks, (void *)nd->key}, v;
    int e = mdb_cursor_get(c->c, &k, &v, MDB_SET);
    if (e) return mdb_fail(c->s, "cursor", e == MDB_NOTFOUND ? MDB_CORRUPTED : e);
    return reverse ? ssd_cur_prev(c) : ssd_cur_next(c);
}

/* Read the rows of the cursor's page from its entry (POS_SHORT) on, in the walk's direction,
 * into o, bounded by [b, e). WALK_STOP: the range ended (*more: a row was left over) or *rc
 * failed; WALK_MOVED: the cursor moved past the rows read (to the next page, or to a row the
 * walk does not read); WALK_SLOW: the cursor's entry is for ssd_cur_get (not one to walk). */
static int walk_page(ssd_env *s, rl__base_cur *c, rows_out *o, const uint8_t *b, uint32_t bl, const uint8_t *e,
                     uint32_t el, int reverse, int *more, int *rc) {
    lpage p;
    unsigned i;
    *rc = RL_OK;
    int f = lp_find(s, c, reverse, &p, &i);
    if (f == 2) return WALK_SLOW;
    if (f == 0) {
        rl__log(RL_LOG_WARN,
                "storage: ssd %s: an LMDB leaf page is not laid out as expected; range reads use "
                "the cursor from now on",
                s->path);
        atomic_store_explicit(&s->walk, 0, memory_order_relaxed);
        return WALK_SLOW;
    }
    o->pages++;
    /* Compare with the bound only on a page that reaches it. */
    lnode nd;
    int check = 1;
    if (lp_node(s, &p, reverse ? 0 : p.n - 1, &nd) && nd.simple)
        check = reverse ? rl__bytes_cmp(nd.key + 1, nd.ks - 1, b, bl) < 0
                        : rl__bytes_cmp(nd.key + 1, nd.ks - 1, e, el) >= 0;
    lnode prev = {0};
    for (unsigned j = i; j < p.n; j = reverse ? j - 1 : j + 1) { /* j wraps past 0 backward */
        if (!lp_node(s, &p, j, &nd) || !nd.simple) {
            /* Not a row to read here (or not one that fits the page: LMDB judges): the cursor
             * goes past the last row read, onto it, and ssd_cur_get reads it. */
            *rc = walk_step_past(c, &prev, reverse);
            return *rc == RL_OK ? WALK_MOVED : WALK_STOP;
        }
        uint32_t kl = nd.ks - 1;
        if (check && (reverse ? rl__bytes_cmp(nd.key + 1, kl, b, bl) < 0 : rl__bytes_cmp(nd.key + 1, kl, e, el) >= 0))
            return WALK_STOP;
        if (rows_full(o)) {
            *more = 1;
            return WALK_STOP;
        }
        uint8_t *dst;
        if (!rows_add(o, kl, nd.ds, &dst)) {
            *rc = RL_E_OUT_OF_MEMORY;
            return WALK_STOP;
        }
        if (kl + nd.ds) memcpy(dst, nd.key + 1, (size_t)kl + nd.ds);
        prev = nd;
    }
    *rc = walk_step_past(c, &prev, reverse);
    return *rc == RL_OK ? WALK_MOVED : WALK_STOP;
}

/* The engine's base_range (engine.h): a range of the base alone, by walk_page where the walk is
 * on and the row is one it reads, else by the cursor functions. Rows copied into a; errors are
 * the cursor's (LMDB's, mapped by mdb_fail) and RL_E_OUT_OF_MEMORY. */
static int ssd_base_range(rl__storage *st, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, int limit,
                          long target_bytes, int reverse, rl_arena *a, rl_keyvalue **out_kvs, int *out_n,
                          int *out_more) {
    ssd_env *s = ssd_of(st);
    base_cur *c;
    int more = 0, rc = cur_take(s, &c);
    if (rc != RL_OK) return rc;
    /* Room for the rows up front: the limit when it is at most 1,024, else 64, growing 4x (a
     * mapped read's secondaries, limited to 2,000 rows, are usually one row each). */
    rows_out o = {a, NULL, 0, limit > 0 && limit <= 1024 ? limit : 64, limit, 0, target_bytes, NULL, 0, 512, 0};
    if (!(o.kvs = rl__arena_alloc(a, (size_t)o.cap * sizeof *o.kvs))) rc = RL_E_OUT_OF_MEMORY;
    if (rc == RL_OK) rc = reverse ? ssd_cur_seek_lt(c, e, el, 0) : ssd_cur_seek_ge(c, b, bl, 0);
    while (rc == RL_OK) {
        if (c->pos == POS_SHORT && atomic_load_explicit(&s->walk, memory_order_relaxed)) {
            int w = walk_page(s, c, &o, b, bl, e, el, reverse, &more, &rc);
            if (w == WALK_STOP) break;
            if (w == WALK_MOVED) continue;
        }
        const uint8_t *k, *v;
        uint32_t kl, vl;
        if (!ssd_cur_get(c, &k, &kl, &v, &vl)) break;
        if (reverse ? rl__bytes_cmp(k, kl, b, bl) < 0 : rl__bytes_cmp(k, kl, e, el) >= 0) break;
        if (rows_full(&o)) {
            more = 1;
            break;
        }
        uint8_t *dst;
        if (!rows_add(&o, kl, vl, &dst)) {
            rc = RL_E_OUT_OF_MEMORY;
            break;
        }
        if (kl) memcpy(dst, k, kl);
        if (vl) memcpy(dst + kl, v, vl);
        rc = reverse ? ssd_cur_prev(c) : ssd_cur_next(c);
    }
    cur_give(s, c);
    if (o.pages) atomic_fetch_add_explicit(&s->walked, o.pages, memory_order_relaxed);
    if (rc != RL_OK) return rc;
    *out_kvs = o.kvs;
    *out_n = o.n;
    *out_more = more;
    return RL_OK;
}

int rl__ssd_page_walk(rl__storage *st, uint64_t *pages) {
    ssd_env *s = st && st->eng == &rl__engine_ssd ? ssd_of(st) : NULL;
    if (pages) *pages = s ? atomic_load(&s->walked) : 0;
    return s ? atomic_load(&s->walk) : 0;
}

/* ---- meta -------------------------------------------------------------------------------- */

typedef struct {
    rl__version version;
    uint64_t seq, keys, bytes;
} ssd_meta;

static int meta_read(ssd_env *s, ssd_meta *m, int *found, rl__errdetail *err) {
    base_cur *c;
    MDB_val k = {5, "state"}, v;
    memset(m, 0, sizeof *m);
    *found = 0;
    int rc = cur_take(s, &c);
    if (rc != RL_OK) return rc;
    int e = mdb_get(cur_txn(c), s->meta, &k, &v);
    if (e == 0) {
        const uint8_t *p = v.mv_data;
        if (v.mv_size != 36 || rl__le32(p) != SSD_META_FORMAT) {
            rl__errdetail_append(err, "%s: the meta record is malformed or of an unknown format", s->path);
            rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
        } else {
            m->version = rl__le64(p + 4);
            m->seq = rl__le64(p + 12);
            m->keys = rl__le64(p + 20);
            m->bytes = rl__le64(p + 28);
            *found = 1;
        }
    } else if (e != MDB_NOTFOUND) {
        rc = mdb_fail(s, "meta get", e);
    }
    cur_give(s, c);
    return rc;
}

static int meta_put(ssd_env *s, MDB_txn *t, const ssd_meta *m) {
    uint8_t p[36];
    rl__put_le32(p, SSD_META_FORMAT);
    rl__put_le64(p + 4, m->version);
    rl__put_le64(p + 12, m->seq);
    rl__put_le64(p + 20, m->keys);
    rl__put_le64(p + 28, m->bytes);
    MDB_val k = {5, "state"}, v = {sizeof p, p};
    return mdb_put(t, s->meta, &k, &v, 0);
}

/* ---- open / close ------------------------------------------------------------------------ */

static void ssd_close(rl__storage *st) {
    ssd_env *s = ssd_of(st);
    if (s) {
        for (int i = 0; i < s->npool; i++) cur_destroy(s->pool[i]);
        if (s->env) mdb_env_close(s->env);
        pthread_mutex_destroy(&s->pool_mu);
        rl__buf_release(&s->kbuf);
        rl__free(s);
        st->eng_priv = NULL;
    }
    rl__logdir_close(st);
}

static int ssd_open(rl__storage *st, const rl__storage_options *o, rl__errdetail *err) {
    int rc, e;
    ssd_meta m;
    int found;
    if ((rc = rl__logdir_open(st, o, err)) != RL_OK) return rc;
    if (!st->read_only && (rc = rl__logdir_record_engine(st, "ssd", err)) != RL_OK) return rc;
    ssd_env *s = rl__calloc(1, sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    pthread_mutex_init(&s->pool_mu, NULL);
    rl__buf_init(&s->kbuf);
    st->eng_priv = s;
    snprintf(s->path, sizeof s->path, "%s/data.mdb", st->f.dir);
    if (!o->checkpoint_log_bytes) st->f.checkpoint_log_bytes = DEFAULT_FLUSH_BYTES;
    unsigned flags = MDB_NOTLS | MDB_NOLOCK | MDB_NORDAHEAD;
    if (st->read_only) flags |= MDB_RDONLY;
    if (st->f.no_sync) flags |= MDB_NOSYNC;
    if (st->read_only && access(s->path, F_OK) != 0) {
        /* A read-only open of a database never flushed: the log holds everything. */
        rl__errdetail_append(err, "%s does not exist yet: open the database once to write", s->path);
        return RL_E_FILE_NOT_FOUND;
    }
    /* The map is address space only (the file grows as needed); where 1 TiB cannot be mapped
     * (a sanitizer's layout, a ulimit -v), smaller reservations down to 4 GiB are tried. */
    for (uint64_t size = SSD_MAP_SIZE;; size /= 4) {
        if ((e = mdb_env_create(&s->env)) != 0) return mdb_fail(s, "env create", e);
        mdb_env_set_mapsize(s->env, size);
        mdb_env_set_maxdbs(s->env, 4);
        e = mdb_env_open(s->env, st->f.dir, flags, 0644);
        if ((e != ENOMEM && e != EINVAL) || size <= (4ull << 30)) break; /* EINVAL: valgrind */
        mdb_env_close(s->env);
        s->env = NULL;
    }
    if (e == 0) {
        MDB_stat ms;
        const char *w = getenv("RL_SSD_PAGE_WALK");
        long os_page = sysconf(_SC_PAGESIZE);
        e = mdb_env_stat(s->env, &ms);
        s->psize = e == 0 ? ms.ms_psize : 0;
        /* The walk finds a node's page by rounding its address down to the page size: only when
         * LMDB's pages are the OS's (the map starts on an OS page); little-endian node fields. */
        int le = 1;
        atomic_init(&s->walk, e == 0 && os_page > 0 && s->psize == (unsigned)os_page &&
                                  (s->psize & (s->psize - 1)) == 0 && *(const char *)&le == 1 &&
                                  !(w && strcmp(w, "0") == 0));
        atomic_init(&s->walked, 0);
    }
    if (e != 0) {
        rc = mdb_fail(s, "open", e);
        rl__errdetail_append(err, "cannot open %s: %s%s", s->path, mdb_strerror(e),
                             rc == RL_E_CORRUPT_DATA ? " (not an LMDB file, or corrupt)" : "");
        return rc;
    }
    MDB_txn *t;
    if ((e = mdb_txn_begin(s->env, NULL, st->read_only ? MDB_RDONLY : 0, &t)) != 0) return mdb_fail(s, "begin", e);
    unsigned dflags = st->read_only ? 0 : MDB_CREATE;
    e = mdb_dbi_open(t, "data", dflags, &s->data);
    if (e == 0) e = mdb_dbi_open(t, "meta", dflags, &s->meta);
    if (e == MDB_NOTFOUND && st->read_only) {
        mdb_txn_abort(t);
        rl__errdetail_append(err, "%s holds no reclayer data", s->path);
        return RL_E_FILE_NOT_FOUND;
    }
    if (e) {
        mdb_txn_abort(t);
        rc = mdb_fail(s, "dbi open", e);
        rl__errdetail_append(err, "cannot open the databases of %s: %s", s->path, mdb_strerror(e));
        return rc;
    }
    if ((e = mdb_txn_commit(t)) != 0) return mdb_fail(s, "commit", e);
    if ((rc = meta_read(s, &m, &found, err)) != RL_OK) return rc;
    st->has_base = 1;
    st->base_version = m.version;
    st->latest = st->oldest = st->durable = m.version;
    st->live_keys = m.keys;
    st->live_bytes = m.bytes;
    st->f.seq = m.seq;
    st->f.ckpt_version = m.version;
    /* The byte sample of the base, before the log's writes change it (docs/design.md §4). */
    if ((rc = rl__storage_sample_base(st)) != RL_OK) return rc;
    if ((rc = rl__logdir_replay(st, m.seq, m.version, err)) != RL_OK) return rc;
    st->durable = st->latest;
    if (st->read_only) return RL_OK;
    return rl__logdir_open_log(st, m.seq, err);
}

/* ---- flush ------------------------------------------------------------------------------- */

typedef struct {
    ssd_env *s;
    MDB_txn *t;
    int mdb_err;
    int collision;
} flush_ctx;

static int flush_row(void *ctx, const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl, int is_clear) {
    flush_ctx *f = ctx;
    uint8_t ek[RL_SSD_LONG_KEY];
    MDB_val key = {enc_key(k, kl, ek), ek}, val;
    int e;
    if (kl > RL_SSD_SHORT) {
        /* A long key: check the slot holds no other key (a hash collision). */
        MDB_val cur;
        e = mdb_get(f->t, f->s->data, &key, &cur);
        if (e == 0) {
            const uint8_t *suf, *ov;
            uint32_t sl, ol;
            if (!long_split(&cur, &suf, &sl, &ov, &ol)) return RL_CORRUPT(RL_E_CORRUPT_DATA);
            if (sl != kl - RL_SSD_SHORT || memcmp(suf, k + RL_SSD_SHORT, sl) != 0) {
                f->collision = 1;
                return RL_E_ENGINE_KEY_TOO_LARGE;
            }
        } else if (e != MDB_NOTFOUND) {
            f->mdb_err = e;
            return RL_E_IO_ERROR;
        }
    }
    if (is_clear) {
        e = mdb_del(f->t, f->s->data, &key, NULL);
        if (e == MDB_NOTFOUND) e = 0;
    } else if (kl <= RL_SSD_SHORT) {
        val.mv_size = vl;
        val.mv_data = (void *)(vl ? v : (const uint8_t *)"");
        e = mdb_put(f->t, f->s->data, &key, &val, 0);
    } else {
        uint32_t sl = kl - RL_SSD_SHORT;
        val.mv_size = (size_t)4 + sl + vl;
        val.mv_data = NULL;
        e = mdb_put(f->t, f->s->data, &key, &val, MDB_RESERVE);
        if (e == 0) {
            uint8_t *p = val.mv_data;
            rl__put_le32(p, sl);
            memcpy(p + 4, k + RL_SSD_SHORT, sl);
            if (vl) memcpy(p + 4 + sl, v, vl);
        }
    }
    if (e) {
        f->mdb_err = e;
        return RL_E_IO_ERROR;
    }
    return RL_OK;
}

/* Flush the window to LMDB (see the top of the file). OOM before the commit changes nothing
 * durable and does not poison; any other failure poisons. */
static int ssd_flush(rl__storage *st) {
    ssd_env *s = ssd_of(st);
    int rc, e;
    if (st->poisoned) return st->poisoned;
    if (st->latest == st->base_version && st->f.log_bytes + st->f.pending.len == 0) return RL_OK;
    if ((rc = rl__storage_map_pin(st)) != RL_OK) return rc == RL_E_OUT_OF_MEMORY ? rc : rl__logdir_poison(st, rc);
    MDB_txn *t;
    s->gen++; /* idle read transactions are renewed before their next use */
    if ((e = mdb_txn_begin(s->env, NULL, 0, &t)) != 0) return rl__logdir_poison(st, mdb_fail(s, "begin", e));
    flush_ctx f = {s, t, 0, 0};
    rc = rl__storage_map_changed(st, st->base_version, flush_row, &f);
    if (rc == RL_OK) {
        ssd_meta m = {st->latest, st->f.seq + 1, st->live_keys, st->live_bytes};
        if ((e = meta_put(s, t, &m)) != 0) f.mdb_err = e, rc = RL_E_IO_ERROR;
    }
    if (rc != RL_OK) {
        mdb_txn_abort(t);
        if (f.mdb_err) rc = mdb_fail(s, "write", f.mdb_err);
        if (f.collision) rl__log(RL_LOG_ERROR, "storage: ssd %s: two long keys share a prefix and a hash", s->path);
        return rl__logdir_poison(st, rc);
    }
    if ((e = mdb_txn_commit(t)) != 0) return rl__logdir_poison(st, mdb_fail(s, "commit", e));
    /* LMDB holds every version up to latest: the pending log records are redundant. */
    rl__buf_reset(&st->f.pending);
    st->base_version = st->latest;
    if ((rc = rl__logdir_switch(st, st->f.seq + 1)) != RL_OK) return rl__logdir_poison(st, rc);
    rl__storage_map_evict(st);
    return RL_OK;
}

static int ssd_after_apply(rl__storage *st) { return rl__logdir_after_apply(st, ssd_flush); }

const rl__engine_ops rl__engine_ssd = {
    .name = "ssd",
    .open = ssd_open,
    .close = ssd_close,
    .log = rl__memory_log,
    .after_apply = ssd_after_apply,
    .sync_begin = rl__memory_sync_begin,
    .sync_fd = rl__memory_sync_fd,
    .sync_end = rl__memory_sync_end,
    .checkpoint = ssd_flush,
    .status = rl__memory_status,
    .base_get = ssd_base_get,
    .cur_open = ssd_cur_open,
    .cur_close = ssd_cur_close,
    .cur_seek_ge = ssd_cur_seek_ge,
    .cur_seek_lt = ssd_cur_seek_lt,
    .cur_next = ssd_cur_next,
    .cur_prev = ssd_cur_prev,
    .cur_get = ssd_cur_get,
    .base_range = ssd_base_range,
};
