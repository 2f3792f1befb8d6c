/* coordinator.c — the core of the coordinator role of rlkvd (coord_int.h, "The files"): its
 * state, recovery, the cluster layout (shard map and server list) in the system keyspace, the
 * commit sink, sending replies, the operations handed to the committer and their completions, and
 * the version tick. The life cycle is coord_life.c, the connections and request handlers
 * coord_net.c, placement coord_move.c; docs/design.md §8.3 is the design.
 *
 *   clients ──COMMIT──▶ loop thread ──submit──▶ committer thread (sequencer, resolver, batches)
 *                           ▲                        │ sink.apply: split, append to the log
 *                           │ completion queue       │ sink.sync: write + fdatasync the log,
 *                           └────────────────────────┘   then apply + sync the system keyspace
 *   storage ──PEEK/POP──▶ loop thread ──read──▶ commit log (in memory, durable records only)
 *   clients ──GET*(\xff)──▶ loop thread ──read──▶ system keyspace engine (DIR/sys)
 *
 * Directory (DIR): log/ (the commit log, commitlog.h), sys/ (a memory-engine rl__storage holding
 * the system keyspace ["\xff", "\xff\xff"): WAL and checkpoints).
 *
 * The system keyspace (what clients can read with ordinary reads):
 *   \xff/keyServers/<begin>   packed tuple of the team's storage ids, one per shard; the shard
 *                             ends where the next begins; the last, \xff/keyServers/\xff -> (0),
 *                             is the system shard ["\xff", "\xff\xff") held by the coordinator
 *   \xff/serverList/<id>      <id> is 4 bytes big-endian; packed tuple (address, port, host,
 *                             role): address a string, port an integer, host a string (a byte
 *                             string when the label is not printable ASCII), role 1 or 2
 *   \xff/conf/storage         packed tuple of the configured storage ids (--init "storage")
 *   anything else under \xff  clients' own system keys (ACCESS_SYSTEM_KEYS)
 * Clients may not write \xff/keyServers/ or \xff/serverList/ (system_key_write, checked before a
 * commit is submitted: rl__co_check_mutations); the coordinator writes them itself through the
 * same committer (internal transactions: the layout at the first start, its own server entry,
 * registrations), so they are versioned, logged and replayed like any commit.
 *
 * Invariants:
 *   1. Every committed batch is one commit log record at the batch's version, holding ALL its
 *      mutations (clear ranges that span "\xff" split in two), even when empty: the log is the
 *      one source of truth for what committed, and a version is never handed out twice across
 *      restarts (the sequencer starts after max(log durable, system keyspace latest)).
 *   2. sink.sync makes the log durable first and only then applies the batch's system-keyspace
 *      mutations to DIR/sys (and syncs it): a crash in between is repaired by recovery, which
 *      replays the log's system mutations newer than DIR/sys into it. A batch is acknowledged
 *      (and its version readable or peekable) only after both.
 *   3. Storage servers never own "\xff" keys, so PEEK's range filter never hands them system
 *      mutations.
 *   4. The layout (shards, teams) changes only through placement transactions (coord_move.c:
 *      splits, a move's start and switch), committed like any batch and installed in memory on
 *      the loop thread once durable; the server list changes with registrations, which are
 *      committed before they are answered.
 *   5. Only durable, logged versions are handed out (GET_READ_VERSION is the committer's durable
 *      version): storage servers learn versions only from the log. Versions still advance while
 *      nothing commits: the loop thread's version tick (below) commits an empty batch
 *      through the same committer whenever none became durable for rl__co_tick_interval (500 ms,
 *      at most a quarter of the window), so a read version is never older than about one
 *      interval plus one fdatasync (docs/design.md §8.3, Durability, recovery and versions).
 *   6. Every operation submitted to the committer (co_op: a client COMMIT, a registration, a
 *      placement transaction, a tick) carries its submitter's finish; the committer's callback
 *      queues it and rl__co_flush runs the finishes on the loop thread in completion order, then
 *      wakes parked PEEKs through the wake_parked hook. The core never names a part.
 *
 * The version tick (docs/design.md §8.3, FoundationDB's MAX_COMMIT_BATCH_INTERVAL): when no
 * batch became durable for an interval (rl__co_tick_interval: 500 ms, at most a quarter of the
 * MVCC window, 100 ms while a move waits), the tick timer submits a tick request
 * (rl__commit_request.is_tick) through the same committer: an empty batch that is logged and
 * fdatasynced like any other, gets a version, wakes parked PEEKs, and so advances the durable
 * version (GET_READ_VERSION) and the storage servers' known versions. Read versions are thus
 * never older than about an interval plus one fdatasync, always well inside the window, however
 * long nothing committed. Only durable, logged versions are ever handed out. Idle cost per
 * interval: one 24-byte log record and one fdatasync here, and on every storage server one empty
 * version applied and synced, then a POP.
 */
#include "server/coordinator.h"

#include "server/coord_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "net/netem.h"
#include "storage/os.h"
#include "tuple/tuple.h"

static const uint8_t k_ff[1] = {0xff};
static const uint8_t k_ffff[2] = {0xff, 0xff};

#define CO_POOL_MAX 512 /* free operations kept ... */
#define CO_POOL_KEEP_BYTES \
    (1u << 20)                       /* ... only when their payload buffer and arena are this
                                            small (a pooled op keeps both for reuse) */
#define CO_SEND_BUF_MIN (256u << 10) /* replies this large are handed over, not copied */

/* ---- Mutation checks and the keyspace split --------------------------------------------- */

/* 1 if key k is in the system keyspace (>= "\xff"). */
static int is_sys_key(const uint8_t *k, uint32_t len) { return len > 0 && k[0] == 0xff; }

/* 1 if [b, e) meets [p, p + "last byte + 1") (the keys with prefix p). */
static int range_meets_prefix(const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, const char *p,
                              uint32_t pl) {
    uint8_t pe[32];
    memcpy(pe, p, pl);
    pe[pl - 1]++;
    return rl__bytes_cmp(b, bl, pe, pl) < 0 && rl__bytes_cmp(e, el, p, pl) > 0;
}

/* 1 if key k starts with prefix p. */
static int key_has_prefix(const uint8_t *k, uint32_t kl, const char *p, uint32_t pl) {
    return kl >= pl && memcmp(k, p, pl) == 0;
}

/* A SET_VERSIONSTAMPED_KEY parameter (key, 10 placeholder bytes at the offset, then the 4-byte
 * offset): 1 if the final key could have prefix p (the placeholder bytes could be anything but
 * the first, which is 0). */
static int stamped_key_may_have_prefix(const uint8_t *param, uint32_t len, const char *p, uint32_t pl) {
    if (len < 4) return 0;
    uint32_t body = len - 4;
    uint32_t off = (uint32_t)param[body] | (uint32_t)param[body + 1] << 8 | (uint32_t)param[body + 2] << 16 |
                   (uint32_t)param[body + 3] << 24;
    if (body < pl) return 0;
    for (uint32_t i = 0; i < pl; i++) {
        /* The stamp's first byte is the version's most significant, 0 below 2^56 (see
         * stamped_key_outside), and no protected prefix holds a 0 byte. */
        if (i == off && p[i] != 0) return 0;
        if (i >= off && i - off < 10) continue;
        if (param[i] != (uint8_t)p[i]) return 0;
    }
    return 1;
}

/* A SET_VERSIONSTAMPED_KEY parameter: 1 if the final key is at or above "\xff\xff". The stamp's
 * first byte is the version's most significant byte, 0 for every version below 2^56 (over two
 * thousand years of versions), so a stamp at offset 0 or 1 never makes the key start with
 * "\xff\xff"; at offset >= 2 the key's first two bytes are the caller's. (An offset that does not
 * fit is refused by the committer.) */
static int stamped_key_outside(const uint8_t *param, uint32_t len) {
    if (len < 4) return 0;
    uint32_t body = len - 4;
    uint32_t off = (uint32_t)param[body] | (uint32_t)param[body + 1] << 8 | (uint32_t)param[body + 2] << 16 |
                   (uint32_t)param[body + 3] << 24;
    return off >= 2 && body >= 2 && param[0] == 0xff && param[1] == 0xff;
}

/* See coord_int.h: the first mutation that touches a protected prefix or lies at or above
 * "\xff\xff" decides the result. */
int rl__co_check_mutations(const rl__mutation *muts, size_t n, size_t *out_index) {
    for (size_t i = 0; i < n; i++) {
        const rl__mutation *m = &muts[i];
        int refused = 0, outside = 0;
        if (m->type == RL_MUT_CLEAR_RANGE) {
            refused = range_meets_prefix(m->p1, m->len1, m->p2, m->len2, CO_KEYSERVERS, CO_KEYSERVERS_LEN) ||
                      range_meets_prefix(m->p1, m->len1, m->p2, m->len2, CO_SERVERLIST, CO_SERVERLIST_LEN) ||
                      range_meets_prefix(m->p1, m->len1, m->p2, m->len2, CO_MOVEKEYS, CO_MOVEKEYS_LEN);
            outside = rl__bytes_cmp(m->p2, m->len2, k_ffff, 2) > 0;
        } else if (m->type == RL_MUT_SET_VERSIONSTAMPED_KEY) {
            refused = stamped_key_may_have_prefix(m->p1, m->len1, CO_KEYSERVERS, CO_KEYSERVERS_LEN) ||
                      stamped_key_may_have_prefix(m->p1, m->len1, CO_SERVERLIST, CO_SERVERLIST_LEN) ||
                      stamped_key_may_have_prefix(m->p1, m->len1, CO_MOVEKEYS, CO_MOVEKEYS_LEN);
            outside = stamped_key_outside(m->p1, m->len1);
        } else {
            refused = key_has_prefix(m->p1, m->len1, CO_KEYSERVERS, CO_KEYSERVERS_LEN) ||
                      key_has_prefix(m->p1, m->len1, CO_SERVERLIST, CO_SERVERLIST_LEN) ||
                      key_has_prefix(m->p1, m->len1, CO_MOVEKEYS, CO_MOVEKEYS_LEN);
            outside = rl__bytes_cmp(m->p1, m->len1, k_ffff, 2) >= 0;
        }
        if (refused || outside) {
            if (out_index) *out_index = i;
            return outside ? RL_E_KEY_OUTSIDE_LEGAL_RANGE : RL_E_SYSTEM_KEY_WRITE;
        }
    }
    return RL_OK;
}

/* ---- The commit sink (committer thread) ------------------------------------------------- */

/* Grow a mutation array to hold need elements. */
static int grow_muts(rl__mutation **a, size_t *cap, size_t need) {
    if (need <= *cap) return RL_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    rl__mutation *m = rl__realloc(*a, c * sizeof *m);
    if (!m) return RL_E_OUT_OF_MEMORY;
    *a = m;
    *cap = c;
    return RL_OK;
}

/* sink.apply: split clear ranges that span "\xff", append the batch's record (every mutation,
 * invariant 1) and keep its system mutations for sync. The mutations are the committer's, valid
 * until its next batch (sync of this batch comes first). */
static int sink_apply(void *ctx, rl__version v, const rl__mutation *muts, size_t n) {
    rl__coordinator *co = ctx;
    int rc = grow_muts(&co->sink.split, &co->sink.cap_split, 2 * n + 1);
    if (rc == RL_OK) rc = grow_muts(&co->sink.sys, &co->sink.cap_sys, 2 * n + 1);
    if (rc != RL_OK) return rc;
    size_t ns = 0, nsys = 0;
    for (size_t i = 0; i < n; i++) {
        rl__mutation m = muts[i];
        if (m.type == RL_MUT_CLEAR_RANGE && !is_sys_key(m.p1, m.len1) && rl__bytes_cmp(m.p2, m.len2, k_ff, 1) > 0) {
            rl__mutation lo = m, hi = m;
            lo.p2 = k_ff, lo.len2 = 1;
            hi.p1 = k_ff, hi.len1 = 1;
            co->sink.split[ns++] = lo;
            co->sink.split[ns++] = hi;
            co->sink.sys[nsys++] = hi;
            continue;
        }
        co->sink.split[ns++] = m;
        if (is_sys_key(m.p1, m.len1)) co->sink.sys[nsys++] = m;
    }
    rc = rl__commitlog_append(co->log, v, co->sink.split, ns);
    if (rc != RL_OK) return rc;
    co->sink.v = v;
    co->sink.n_sys = nsys;
    return RL_OK;
}

/* sink.sync: the log first, then the system keyspace (invariant 2). */
static int sink_sync(void *ctx) {
    rl__coordinator *co = ctx;
    int rc = rl__commitlog_sync(co->log);
    if (rc != RL_OK) return rc;
    if (co->sink.n_sys) {
        size_t n = co->sink.n_sys;
        co->sink.n_sys = 0;
        rc = rl__storage_apply(co->sys, co->sink.v, co->sink.sys, n);
        if (rc == RL_OK) rc = rl__storage_sync(co->sys);
        if (rc != RL_OK)
            rl__log(RL_LOG_ERROR,
                    "coordinator: the system keyspace failed at version %" PRIu64
                    " (%s): the commit log holds the batch, a restart replays it",
                    co->sink.v, rl_error_name(rc));
    }
    return rc;
}

/* See coord_int.h. */
rl__version rl__co_durable(rl__coordinator *co) { return rl__committer_read_version(co->cm); }

/* ---- Recovery of the system keyspace from the log ---------------------------------------- */

typedef struct {
    rl__storage *sys;
    rl__mutation *m;
    size_t cap;
    int rc;
    uint64_t applied;
} sys_replay;

/* Visitor: apply a record's system mutations to sys (versions > sys's latest). */
static int replay_visit(void *ud, const rl__wal_record *rec) {
    sys_replay *r = ud;
    if (rec->version <= rl__storage_latest_version(r->sys)) return 0;
    if ((r->rc = grow_muts(&r->m, &r->cap, rec->count + 1)) != RL_OK) return 1;
    rl__wal_iter it;
    rl__mutation m;
    size_t k = 0;
    rl__wal_iter_init(&it, rec);
    while (rl__wal_iter_next(&it, &m))
        if (is_sys_key(m.p1, m.len1)) r->m[k++] = m;
    if (k == 0) return 0;
    if ((r->rc = rl__storage_apply(r->sys, rec->version, r->m, k)) != RL_OK) return 1;
    r->applied++;
    return 0;
}

/* Recovery step: bring DIR/sys up to the log (invariant 2) and sync it if anything was applied.
 * err gets the reason on failure. */
static int replay_sys(rl__coordinator *co, rl__errdetail *err) {
    sys_replay r = {co->sys, NULL, 0, RL_OK, 0};
    rl__version after = rl__storage_latest_version(co->sys), base = rl__commitlog_base_version(co->log);
    if (after < base) after = base;
    int rc = rl__commitlog_read(co->log, after, replay_visit, &r, NULL);
    rl__free(r.m);
    if (rc == RL_OK) rc = r.rc;
    if (rc == RL_OK && r.applied) rc = rl__storage_sync(co->sys);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "replaying the commit log into the system keyspace %s/sys failed: %s", co->dir,
                             rl_error_name(rc));
        return rc;
    }
    if (r.applied)
        rl__log(RL_LOG_INFO,
                "coordinator: replayed %" PRIu64 " versions of system mutations "
                "from the commit log",
                r.applied);
    return RL_OK;
}

/* ---- Internal transactions -------------------------------------------------------------- */

/* Commit muts (SETs of system keys, built in a) through the committer and wait: the writes get
 * write conflict ranges, so a client transaction that read the keys conflicts. Blocking: used
 * before the loop runs (open). */
static int commit_blocking(rl__coordinator *co, const rl__mutation *muts, size_t n, rl_arena *a, rl__errdetail *err) {
    rl__keyrange *w = rl__arena_alloc(a, n * sizeof *w + 1);
    if (!w) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        uint8_t *e = rl__arena_alloc(a, (size_t)muts[i].len1 + 1);
        if (!e) return RL_E_OUT_OF_MEMORY;
        memcpy(e, muts[i].p1, muts[i].len1);
        e[muts[i].len1] = 0;
        w[i] = (rl__keyrange){muts[i].p1, muts[i].len1, e, muts[i].len1 + 1};
    }
    rl__commit_request req;
    memset(&req, 0, sizeof req);
    req.read_version = rl__co_durable(co);
    req.writes = w;
    req.n_writes = n;
    req.muts = muts;
    req.n_muts = n;
    int rc = rl__committer_commit(co->cm, &req);
    if (rc != RL_OK) rl__errdetail_append(err, "writing the system keyspace failed: %s", rl_error_name(rc));
    return rc;
}

/* Append the \xff/serverList/<id> key for id to b. */
static void serverlist_key(rl_buf *b, uint32_t id) {
    rl__buf_append(b, CO_SERVERLIST, CO_SERVERLIST_LEN);
    rl__buf_append_u32be(b, id);
}

/* 1 if the host label can be packed as a tuple string (printable ASCII). */
static int printable(const uint8_t *p, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e) return 0;
    return 1;
}

/* Append the packed server list value (address, port, host, role) to b. */
static void serverlist_value(rl_buf *b, const char *address, uint16_t port, const uint8_t *host, uint32_t host_len,
                             int role) {
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, b);
    rl__tuple_pack_string(&pk, address, strlen(address));
    rl__tuple_pack_int(&pk, port);
    if (printable(host, host_len)) rl__tuple_pack_string(&pk, (const char *)host, host_len);
    else rl__tuple_pack_bytes(&pk, host, host_len);
    rl__tuple_pack_int(&pk, role);
}

/* A SET mutation whose key and value are copied into a. */
static int make_set(rl_arena *a, const rl_buf *k, const rl_buf *v, rl__mutation *out) {
    uint8_t *kc = rl__arena_memdup(a, k->data, k->len), *vc = rl__arena_memdup(a, v->data, v->len);
    if (!kc || !vc || rl__buf_error(k) || rl__buf_error(v)) return RL_E_OUT_OF_MEMORY;
    *out = (rl__mutation){RL_MUT_SET, kc, (uint32_t)k->len, vc, (uint32_t)v->len};
    return RL_OK;
}

/* See coord_int.h. */
int rl__co_build_register(rl__coordinator *co, co_op *op) {
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    char addr[16];
    uint32_t al = op->reg.address_len < 15 ? op->reg.address_len : 15;
    memcpy(addr, op->reg.address, al);
    addr[al] = 0;
    serverlist_key(&k, op->reg.id);
    serverlist_value(&v, addr, op->reg.port, op->reg.host, op->reg.host_len, RL_ROLE_STORAGE);
    rl__mutation *m = rl__arena_alloc(&op->arena, sizeof *m);
    rl__keyrange *w = rl__arena_alloc(&op->arena, sizeof *w);
    uint8_t *e = rl__arena_alloc(&op->arena, k.len + 1);
    int rc = m && w && e ? make_set(&op->arena, &k, &v, m) : RL_E_OUT_OF_MEMORY;
    if (rc == RL_OK) {
        memcpy(e, k.data, k.len);
        e[k.len] = 0;
        *w = (rl__keyrange){m->p1, m->len1, e, m->len1 + 1};
        memset(&op->req, 0, sizeof op->req);
        op->req.read_version = rl__co_durable(co);
        op->req.writes = w;
        op->req.n_writes = 1;
        op->req.muts = m;
        op->req.n_muts = 1;
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
    return rc;
}

/* ---- The layout: --init, and the shard map in the system keyspace ----------------------- */

typedef struct {
    uint32_t *storage; /* configured storage ids */
    uint32_t n_storage;
    co_shard *shards; /* user shards "" .. "\xff" */
    uint32_t n_shards;
} co_layout;

/* Free a layout's arrays and zero it (NULL-safe fields). */
static void layout_release(co_layout *l) {
    for (uint32_t i = 0; i < l->n_shards; i++) {
        rl__free(l->shards[i].begin);
        rl__free(l->shards[i].end);
    }
    rl__free(l->shards);
    rl__free(l->storage);
    memset(l, 0, sizeof *l);
}

/* A heap copy of p[0..n) (at least one byte allocated) in *out: RL_OK or RL_E_OUT_OF_MEMORY. */
static int dup_bytes(const void *p, size_t n, uint8_t **out) {
    *out = rl__malloc(n ? n : 1);
    if (!*out) return RL_E_OUT_OF_MEMORY;
    if (n) memcpy(*out, p, n);
    return RL_OK;
}

/* Check a layout's rules (the contracts' --init format) and say what is wrong. */
static int layout_check(const co_layout *l, const char *what, rl__errdetail *err) {
    if (l->n_storage == 0) {
        rl__errdetail_append(err, "%s: \"storage\" lists no storage server", what);
        return RL_E_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < l->n_storage; i++)
        for (uint32_t j = 0; j < i; j++)
            if (l->storage[i] == l->storage[j]) {
                rl__errdetail_append(err, "%s: storage id %u is listed twice", what, l->storage[i]);
                return RL_E_INVALID_ARGUMENT;
            }
    if (l->n_shards == 0) {
        rl__errdetail_append(err, "%s: \"shards\" is empty (they must cover \"\" to \"ff\")", what);
        return RL_E_INVALID_ARGUMENT;
    }
    for (uint32_t i = 0; i < l->n_shards; i++) {
        const co_shard *s = &l->shards[i];
        if (i == 0 && s->begin_len != 0) {
            rl__errdetail_append(err, "%s: shards[0].begin must be \"\"", what);
            return RL_E_INVALID_ARGUMENT;
        }
        if (i > 0 && rl__bytes_cmp(s->begin, s->begin_len, l->shards[i - 1].end, l->shards[i - 1].end_len) != 0) {
            rl__errdetail_append(err,
                                 "%s: shards[%u].begin is not shards[%u].end (shards must be "
                                 "sorted and contiguous)",
                                 what, i, i - 1);
            return RL_E_INVALID_ARGUMENT;
        }
        if (rl__bytes_cmp(s->begin, s->begin_len, s->end, s->end_len) >= 0) {
            rl__errdetail_append(err, "%s: shards[%u] is empty or inverted (begin >= end)", what, i);
            return RL_E_INVALID_ARGUMENT;
        }
        if (rl__bytes_cmp(s->end, s->end_len, k_ff, 1) > 0) {
            rl__errdetail_append(err,
                                 "%s: shards[%u].end is beyond \"ff\" (the system keyspace is "
                                 "the coordinator's)",
                                 what, i);
            return RL_E_INVALID_ARGUMENT;
        }
        if (s->n_team == 0 || s->n_team > CO_MAX_TEAM) {
            rl__errdetail_append(err, "%s: shards[%u].team must list 1 to %d storage ids", what, i, CO_MAX_TEAM);
            return RL_E_INVALID_ARGUMENT;
        }
        for (uint32_t t = 0; t < s->n_team; t++) {
            int known = 0;
            for (uint32_t j = 0; j < l->n_storage; j++) known |= l->storage[j] == s->team[t];
            if (!known) {
                rl__errdetail_append(err,
                                     "%s: shards[%u].team names storage id %u, which is not in "
                                     "\"storage\"",
                                     what, i, s->team[t]);
                return RL_E_INVALID_ARGUMENT;
            }
            for (uint32_t u = 0; u < t; u++)
                if (s->team[u] == s->team[t]) {
                    rl__errdetail_append(err, "%s: shards[%u].team lists storage id %u twice", what, i, s->team[t]);
                    return RL_E_INVALID_ARGUMENT;
                }
        }
    }
    if (rl__bytes_cmp(l->shards[l->n_shards - 1].end, l->shards[l->n_shards - 1].end_len, k_ff, 1) != 0) {
        rl__errdetail_append(err, "%s: the last shard must end at \"ff\"", what);
        return RL_E_INVALID_ARGUMENT;
    }
    return RL_OK;
}

/* A storage id from JSON: an integer in [1, 2^32 - 1]. */
static int json_id(json_t *j, uint32_t *out) {
    if (!json_is_integer(j)) return 0;
    json_int_t v = json_integer_value(j);
    if (v < 1 || v > (json_int_t)UINT32_MAX) return 0;
    *out = (uint32_t)v;
    return 1;
}

/* Hex text of a JSON string into a heap byte string. */
static int json_hex(json_t *j, uint8_t **out, uint32_t *out_len) {
    const char *s = json_string_value(j);
    if (!s) return RL_E_INVALID_ARGUMENT;
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__bytes_from_hex(&b, s, strlen(s));
    if (rc == RL_OK && b.len > RL_KEY_SIZE_LIMIT) rc = RL_E_INVALID_ARGUMENT;
    if (rc == RL_OK) rc = dup_bytes(b.data, b.len, out);
    *out_len = (uint32_t)b.len;
    rl__buf_release(&b);
    return rc;
}

/* Parse the --init file (the contracts' format). */
static int parse_init(const char *path, co_layout *l, rl__errdetail *err) {
    json_error_t je;
    int rc = RL_E_INVALID_ARGUMENT;
    memset(l, 0, sizeof *l);
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        rl__errdetail_append(err, "--init %s: %s (line %d, column %d)", path, je.text, je.line, je.column);
        return RL_E_INVALID_ARGUMENT;
    }
    json_t *st = json_object_get(root, "storage"), *sh = json_object_get(root, "shards");
    if (!json_is_object(root) || !json_is_array(st) || !json_is_array(sh)) {
        rl__errdetail_append(err, "--init %s: expected {\"storage\": [ids], \"shards\": [...]}", path);
        goto out;
    }
    size_t ns = json_array_size(st), nh = json_array_size(sh);
    if (ns > 100000 || nh > 100000) {
        rl__errdetail_append(err, "--init %s: too many storage servers or shards", path);
        goto out;
    }
    l->storage = rl__calloc(ns + 1, sizeof *l->storage);
    l->shards = rl__calloc(nh + 1, sizeof *l->shards);
    if (!l->storage || !l->shards) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < ns; i++) {
        if (!json_id(json_array_get(st, i), &l->storage[i])) {
            rl__errdetail_append(err, "--init %s: storage[%zu] is not an id in 1..4294967295", path, i);
            goto out;
        }
        l->n_storage++;
    }
    for (size_t i = 0; i < nh; i++) {
        json_t *s = json_array_get(sh, i), *team = json_object_get(s, "team");
        co_shard *d = &l->shards[i];
        l->n_shards++; /* layout_release frees what this shard got so far */
        if (!json_is_object(s) || json_hex(json_object_get(s, "begin"), &d->begin, &d->begin_len) ||
            json_hex(json_object_get(s, "end"), &d->end, &d->end_len)) {
            rl__errdetail_append(err,
                                 "--init %s: shards[%zu] needs \"begin\" and \"end\" as hex "
                                 "strings of keys (at most %d bytes)",
                                 path, i, RL_KEY_SIZE_LIMIT);
            goto out;
        }
        if (!json_is_array(team) || json_array_size(team) > CO_MAX_TEAM) {
            rl__errdetail_append(err,
                                 "--init %s: shards[%zu].team must be an array of 1 to %d "
                                 "storage ids",
                                 path, i, CO_MAX_TEAM);
            goto out;
        }
        for (size_t t = 0; t < json_array_size(team); t++) {
            if (!json_id(json_array_get(team, t), &d->team[t])) {
                rl__errdetail_append(err,
                                     "--init %s: shards[%zu].team[%zu] is not an id in "
                                     "1..4294967295",
                                     path, i, t);
                goto out;
            }
            d->n_team++;
        }
    }
    char what[4200];
    snprintf(what, sizeof what, "--init %s", path);
    rc = layout_check(l, what, err);
out:
    json_decref(root);
    if (rc != RL_OK) layout_release(l);
    return rc;
}

/* The layout of a fresh cluster without --init: one shard on storage server 1. */
static int default_layout(co_layout *l) {
    memset(l, 0, sizeof *l);
    l->storage = rl__calloc(1, sizeof *l->storage);
    l->shards = rl__calloc(1, sizeof *l->shards);
    if (!l->storage || !l->shards || dup_bytes("", 0, &l->shards[0].begin) || dup_bytes(k_ff, 1, &l->shards[0].end)) {
        layout_release(l);
        return RL_E_OUT_OF_MEMORY;
    }
    l->storage[0] = 1;
    l->n_storage = 1;
    l->shards[0].end_len = 1;
    l->shards[0].team[0] = 1;
    l->shards[0].n_team = 1;
    l->n_shards = 1;
    return RL_OK;
}

/* See coord_int.h. */
void rl__co_pack_ids(rl_buf *b, const uint32_t *ids, uint32_t n) {
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, b);
    for (uint32_t i = 0; i < n; i++) rl__tuple_pack_int(&pk, ids[i]);
}

/* Write a fresh cluster's layout at one version (an internal transaction). */
static int write_layout(rl__coordinator *co, const co_layout *l, rl__errdetail *err) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    int rc = RL_E_OUT_OF_MEMORY;
    size_t n = 0;
    rl__mutation *m = rl__arena_alloc(&a, (l->n_shards + 2) * sizeof *m);
    if (!m) goto out;
    for (uint32_t i = 0; i <= l->n_shards; i++) {
        rl__buf_reset(&k);
        rl__buf_reset(&v);
        rl__buf_append(&k, CO_KEYSERVERS, CO_KEYSERVERS_LEN);
        if (i < l->n_shards) {
            rl__buf_append(&k, l->shards[i].begin, l->shards[i].begin_len);
            rl__co_pack_ids(&v, l->shards[i].team, l->shards[i].n_team);
        } else { /* the system shard */
            uint32_t zero = 0;
            rl__buf_append(&k, k_ff, 1);
            rl__co_pack_ids(&v, &zero, 1);
        }
        if ((rc = make_set(&a, &k, &v, &m[n++])) != RL_OK) goto out;
    }
    rl__buf_reset(&k);
    rl__buf_reset(&v);
    rl__buf_append(&k, CO_CONF_STORAGE, CO_CONF_STORAGE_LEN);
    rl__co_pack_ids(&v, l->storage, l->n_storage);
    if ((rc = make_set(&a, &k, &v, &m[n++])) != RL_OK) goto out;
    rc = commit_blocking(co, m, n, &a, err);
out:
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__arena_release(&a);
    return rc;
}

/* Read [prefix, prefix + 1) of the system keyspace at its latest version into a. */
static int sys_scan(rl__coordinator *co, const char *prefix, uint32_t pl, rl_arena *a, rl_keyvalue **kvs, int *n) {
    uint8_t end[32];
    memcpy(end, prefix, pl);
    end[pl - 1]++;
    int more = 0;
    return rl__storage_get_range(co->sys, rl__storage_latest_version(co->sys), prefix, pl, end, pl, 0, 0, 0, a, kvs, n,
                                 &more);
}

/* See coord_int.h: a tuple of storage ids (integers 0..2^32-1) into ids[0..cap). */
int rl__co_unpack_ids(const uint8_t *p, uint32_t len, uint32_t *ids, uint32_t cap, uint32_t *n) {
    rl__tuple_iter it;
    rl__tuple_elem e;
    int rc;
    *n = 0;
    rl__tuple_iter_init(&it, p, len);
    while ((rc = rl__tuple_iter_next(&it, &e)) == RL_OK) {
        if (e.type != RL_TT_INT || !e.fits_i64 || e.i < 0 || e.i > (int64_t)UINT32_MAX || *n >= cap)
            return RL_E_CORRUPT_DATA;
        ids[(*n)++] = (uint32_t)e.i;
    }
    return rc == RL_E_NOT_FOUND ? RL_OK : RL_E_CORRUPT_DATA;
}

/* Add a server with this id (kept sorted by id) unless known. */
static int add_server(rl__coordinator *co, uint32_t id, co_server **out) {
    uint32_t i = 0;
    while (i < co->n_servers && co->servers[i].id < id) i++;
    if (i < co->n_servers && co->servers[i].id == id) {
        if (out) *out = &co->servers[i];
        return RL_OK;
    }
    co_server *s = rl__realloc(co->servers, (co->n_servers + 1) * sizeof *s);
    if (!s) return RL_E_OUT_OF_MEMORY;
    co->servers = s;
    memmove(&s[i + 1], &s[i], (co->n_servers - i) * sizeof *s);
    memset(&s[i], 0, sizeof *s);
    s[i].id = id;
    co->n_servers++;
    if (out) *out = &s[i];
    return RL_OK;
}

/* See coord_int.h (binary search: servers are sorted by id). */
co_server *rl__co_server(rl__coordinator *co, uint32_t id) {
    uint32_t lo = 0, hi = co->n_servers;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (co->servers[mid].id < id) lo = mid + 1;
        else if (co->servers[mid].id > id) hi = mid;
        else return &co->servers[mid];
    }
    return NULL;
}

/* See coord_int.h. */
int rl__co_server_healthy(const rl__coordinator *co, const co_server *srv, uint64_t now_ns) {
    (void)co;
    if (!srv->peek_conn || !rl__conn_is_open(srv->peek_conn)) return 0;
    return srv->parked > 0 || now_ns - srv->last_peek_ns < CO_HEALTH_NS;
}

/* Load the shard map, the configured ids and the server list from the system keyspace.
 * RL_E_NOT_FOUND (expected: a fresh directory) when there is no shard map yet. */
static int load_layout(rl__coordinator *co, rl__errdetail *err) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs = NULL;
    int n = 0, rc = sys_scan(co, CO_KEYSERVERS, CO_KEYSERVERS_LEN, &a, &kvs, &n);
    const char *why = NULL;
    if (rc != RL_OK) goto out;
    if (n == 0) {
        rc = RL_E_NOT_FOUND;
        goto out;
    }
    co->shards = rl__calloc((size_t)n, sizeof *co->shards);
    if (!co->shards) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    for (int i = 0; i < n; i++) {
        co_shard *s = &co->shards[i];
        const uint8_t *b = kvs[i].key + CO_KEYSERVERS_LEN;
        uint32_t bl = kvs[i].key_len - CO_KEYSERVERS_LEN;
        int is_sys = i == n - 1;
        const uint8_t *e = is_sys ? k_ffff : kvs[i + 1].key + CO_KEYSERVERS_LEN;
        uint32_t el = is_sys ? 2 : kvs[i + 1].key_len - CO_KEYSERVERS_LEN;
        if ((rc = dup_bytes(b, bl, &s->begin)) || (rc = dup_bytes(e, el, &s->end))) goto out;
        s->begin_len = bl;
        s->end_len = el;
        co->n_shards++;
        if (rl__co_unpack_ids(kvs[i].value, kvs[i].value_len, s->team, CO_MAX_TEAM, &s->n_team) || s->n_team == 0) {
            why = "a team that is not a tuple of 1 to 16 ids";
            goto corrupt;
        }
        if (i == 0 && bl != 0) {
            why = "no shard begins at \"\"";
            goto corrupt;
        }
        if (is_sys != (bl == 1 && b[0] == 0xff) || (is_sys && (s->n_team != 1 || s->team[0]))) {
            why = "the system shard (\\xff, team (0)) is missing or not last";
            goto corrupt;
        }
        for (uint32_t t = 0; !is_sys && t < s->n_team; t++) {
            co_server *srv;
            if (s->team[t] == 0) {
                why = "a user shard on the coordinator's id 0";
                goto corrupt;
            }
            if ((rc = add_server(co, s->team[t], &srv)) != RL_OK) goto out;
        }
    }
    /* The configured ids (servers that own no shard are still listed by STATUS). */
    rl__arena_reset(&a);
    rc = sys_scan(co, CO_CONF_STORAGE, CO_CONF_STORAGE_LEN, &a, &kvs, &n);
    if (rc != RL_OK) goto out;
    for (int i = 0; i < n; i++) {
        if (kvs[i].key_len != CO_CONF_STORAGE_LEN) continue;
        uint32_t ids[1024], ni = 0;
        if (rl__co_unpack_ids(kvs[i].value, kvs[i].value_len, ids, 1024, &ni) == RL_OK)
            for (uint32_t j = 0; j < ni; j++)
                if (ids[j] && (rc = add_server(co, ids[j], NULL)) != RL_OK) goto out;
    }
    /* The server list. */
    rl__arena_reset(&a);
    rc = sys_scan(co, CO_SERVERLIST, CO_SERVERLIST_LEN, &a, &kvs, &n);
    if (rc != RL_OK) goto out;
    for (int i = 0; i < n; i++) {
        if (kvs[i].key_len != CO_SERVERLIST_LEN + 4) continue;
        const uint8_t *ik = kvs[i].key + CO_SERVERLIST_LEN;
        uint32_t id = (uint32_t)ik[0] << 24 | (uint32_t)ik[1] << 16 | (uint32_t)ik[2] << 8 | ik[3];
        if (id == 0) continue; /* the coordinator's own entry */
        rl__tuple_elem el[4];
        int ok = 1;
        for (size_t j = 0; j < 4 && ok; j++) ok = rl__tuple_get(kvs[i].value, kvs[i].value_len, j, &el[j]) == RL_OK;
        if (!ok || el[0].type != RL_TT_STRING || el[1].type != RL_TT_INT ||
            (el[2].type != RL_TT_STRING && el[2].type != RL_TT_BYTES) || el[0].payload_len > 15 || el[0].has_escapes ||
            el[1].i < 1 || el[1].i > 65535) {
            rl__log(RL_LOG_WARN, "coordinator: ignoring a malformed server list entry for id %u", id);
            continue;
        }
        co_server *srv;
        if ((rc = add_server(co, id, &srv)) != RL_OK) goto out;
        rl_buf h;
        rl__buf_init(&h);
        rl__tuple_elem_unescape(&el[2], &h);
        rc = rl__buf_error(&h);
        if (rc == RL_OK) rc = dup_bytes(h.data, h.len, &srv->host);
        srv->host_len = (uint32_t)h.len;
        rl__buf_release(&h);
        if (rc != RL_OK) goto out;
        memcpy(srv->address, el[0].payload, el[0].payload_len);
        srv->address[el[0].payload_len] = 0;
        srv->port = (uint16_t)el[1].i;
        srv->has_address = 1;
    }
    rc = RL_OK;
    goto out;
corrupt:
    rl__errdetail_append(err, "the shard map in %s/sys is corrupt: %s", co->dir, why);
    rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
out:
    rl__arena_release(&a);
    return rc;
}

/* See coord_int.h: each server's owned ranges (and merged ranges) from the shard map; the old
 * arrays are freed first. */
int rl__co_compute_ownership(rl__coordinator *co) {
    for (uint32_t i = 0; i < co->n_servers; i++) {
        co_server *srv = &co->servers[i];
        rl__free(srv->owned);
        rl__free(srv->merged);
        srv->owned = srv->merged = NULL;
        srv->n_owned = srv->n_merged = 0;
        uint32_t n = 0;
        for (uint32_t s = 0; s + 1 < co->n_shards; s++)
            for (uint32_t t = 0; t < co->shards[s].n_team; t++) n += co->shards[s].team[t] == srv->id;
        srv->owns_shard = n > 0;
        srv->owned = rl__calloc(n + 1, sizeof *srv->owned);
        srv->merged = rl__calloc(n + 1, sizeof *srv->merged);
        if (!srv->owned || !srv->merged) return RL_E_OUT_OF_MEMORY;
        for (uint32_t s = 0; s + 1 < co->n_shards; s++) {
            const co_shard *sh = &co->shards[s];
            int mine = 0;
            for (uint32_t t = 0; t < sh->n_team; t++) mine |= sh->team[t] == srv->id;
            if (!mine) continue;
            rl__keyrange r = {sh->begin, sh->begin_len, sh->end, sh->end_len};
            srv->owned[srv->n_owned++] = r;
            rl__keyrange *last = srv->n_merged ? &srv->merged[srv->n_merged - 1] : NULL;
            if (last && rl__bytes_cmp(last->end, last->end_len, r.begin, r.begin_len) == 0) {
                last->end = r.end;
                last->end_len = r.end_len;
            } else {
                srv->merged[srv->n_merged++] = r;
            }
        }
    }
    return RL_OK;
}

/* Write the coordinator's own server list entry when it changed (address or host). */
static int publish_self(rl__coordinator *co, rl__errdetail *err) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    serverlist_key(&k, 0);
    serverlist_value(&v, co->listen_ip, co->port, (const uint8_t *)co->host, co->host_len, RL_ROLE_COORDINATOR);
    int present = 0, rc;
    const uint8_t *old = NULL;
    uint32_t old_len = 0;
    rc = rl__buf_error(&k) ? RL_E_OUT_OF_MEMORY : rl__buf_error(&v);
    if (rc == RL_OK)
        rc = rl__storage_get(co->sys, rl__storage_latest_version(co->sys), k.data, k.len, &a, &present, &old, &old_len);
    if (rc == RL_OK && !(present && rl__bytes_cmp(old, old_len, v.data, v.len) == 0)) {
        rl__mutation m;
        rc = make_set(&a, &k, &v, &m);
        if (rc == RL_OK) rc = commit_blocking(co, &m, 1, &a, err);
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__arena_release(&a);
    return rc;
}

/* Write "PORT\n" to path atomically (rl__os_write_file_atomic). */
static int write_port_file(const char *path, uint16_t port, rl__errdetail *err) {
    char text[16];
    int len = snprintf(text, sizeof text, "%u\n", port);
    return rl__os_write_file_atomic(path, text, (size_t)len, 0, "coordinator", err);
}

/* mkdir path unless it is a directory already. */
static int ensure_dir(const char *path, rl__errdetail *err) {
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) return RL_OK;
        rl__errdetail_append(err, "%s is not a directory", path);
        return RL_E_INVALID_ARGUMENT;
    }
    if (mkdir(path, 0755) != 0) {
        rl__errdetail_append(err, "cannot create directory %s: %s", path, strerror(errno));
        return errno == ENOENT ? RL_E_FILE_NOT_FOUND : RL_E_IO_ERROR;
    }
    return RL_OK;
}

/* ---- Sending replies ---------------------------------------------------------------------- */

/* Encode m (a reply of type `type`) into co->out and send it on conn. A failure to encode is a
 * bug of this file: it is logged and answered with internal_error. */
static void send_msg(rl__coordinator *co, rl__conn *conn, uint16_t type, uint16_t flags, uint64_t id, rl__msg *m) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    m->type = type;
    m->flags = flags;
    rl__buf_reset(&co->out);
    int rc = rl__msg_encode(&co->out, m, &why);
    if (rc == RL_OK && co->out.len > RL_NET_MAX_PAYLOAD) {
        rl__errdetail_set(&why, "%s reply of %zu bytes exceeds the frame limit", rl__msg_type_name(type), co->out.len);
        rc = RL_E_INTERNAL_ERROR;
    }
    if (rc != RL_OK) {
        rl__log(RL_LOG_ERROR, "coordinator: cannot encode a %s reply to %s: %s (%s)", rl__msg_type_name(type),
                rl__conn_peer(conn), rl_error_name(rc), rl__errdetail_get(&why));
        if (flags & RL_FRAME_ERROR) return;
        rl__msg e;
        memset(&e, 0, sizeof e);
        e.u.error.code = rc == RL_E_OUT_OF_MEMORY ? RL_E_OUT_OF_MEMORY : RL_E_INTERNAL_ERROR;
        e.u.error.message = (const uint8_t *)rl__errdetail_get(&why);
        e.u.error.message_len = (uint32_t)strlen(rl__errdetail_get(&why));
        send_msg(co, conn, type, RL_FRAME_REPLY | RL_FRAME_ERROR, id, &e);
        return;
    }
    if (co->out.len >= CO_SEND_BUF_MIN) rc = rl__conn_send_buf(conn, type, flags, id, &co->out);
    else rc = rl__conn_send(conn, type, flags, id, co->out.data, co->out.len);
    if (rc != RL_OK && rc != RL_E_CONNECTION_FAILED)
        rl__log(RL_LOG_WARN, "coordinator: sending a %s reply to %s failed: %s", rl__msg_type_name(type),
                rl__conn_peer(conn), rl_error_name(rc));
}

/* See coord_int.h: a reply (flags RL_FRAME_REPLY) of type with id; see send_msg. */
void rl__co_send_reply(rl__coordinator *co, rl__conn *conn, uint16_t type, uint64_t id, rl__msg *m) {
    send_msg(co, conn, type, RL_FRAME_REPLY, id, m);
}

/* See coord_int.h: an error reply with code and a printf-formatted message (cut at 1,023 bytes). */
void rl__co_send_error(rl__coordinator *co, rl__conn *conn, uint16_t type, uint64_t id, int code, const char *fmt,
                       ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    rl__msg e;
    memset(&e, 0, sizeof e);
    e.u.error.code = code;
    e.u.error.message = (const uint8_t *)text;
    e.u.error.message_len = (uint32_t)strlen(text);
    send_msg(co, conn, type, RL_FRAME_REPLY | RL_FRAME_ERROR, id, &e);
}

/* ---- Operations: the committer's requests and their completions -------------------------- */

/* See coord_int.h: from the pool when possible. */
co_op *rl__co_op_get(rl__coordinator *co, size_t len) {
    co_op *op = co->pool;
    if (op) {
        co->pool = op->next;
        co->n_pool--;
    } else {
        op = rl__calloc(1, sizeof *op);
        if (!op) return NULL;
        op->co = co;
        rl__arena_init(&op->arena, 0);
    }
    op->next = NULL;
    if (op->payload_cap < len) {
        uint8_t *p = rl__realloc(op->payload, len ? len : 1);
        if (!p) {
            rl__arena_release(&op->arena);
            rl__free(op->payload);
            rl__free(op);
            return NULL;
        }
        op->payload = p;
        op->payload_cap = len;
    }
    return op;
}

/* See coord_int.h: back to the pool (or freed); drops its connection reference. */
void rl__co_op_put(rl__coordinator *co, co_op *op) {
    rl__conn_release(op->conn);
    op->conn = NULL;
    op->srv = NULL;
    rl__arena_reset(&op->arena);
    if (co->n_pool >= CO_POOL_MAX || op->payload_cap > CO_POOL_KEEP_BYTES ||
        rl__arena_capacity(&op->arena) > CO_POOL_KEEP_BYTES) {
        rl__arena_release(&op->arena);
        rl__free(op->payload);
        rl__free(op);
        return;
    }
    op->next = co->pool;
    co->pool = op;
    co->n_pool++;
}

/* See coord_int.h. */
void rl__co_free_pool(rl__coordinator *co) {
    while (co->pool) {
        co_op *op = co->pool;
        co->pool = op->next;
        rl__arena_release(&op->arena);
        rl__free(op->payload);
        rl__free(op);
    }
    co->n_pool = 0;
}

/* A posted flush (rl__co_op_done posts it when the completion queue was empty). */
static void flush_post(rl__loop *loop, void *ud) {
    (void)loop;
    rl__co_flush(ud);
}

/* Committer thread: queue the finished operation for the loop; post a flush when the queue was
 * empty (a failed post is caught by the housekeeping timer). */
void rl__co_op_done(rl__commit_request *req, void *ud) {
    (void)req;
    co_op *op = ud;
    rl__coordinator *co = op->co;
    pthread_mutex_lock(&co->done_mu);
    int was_empty = co->done_head == NULL;
    if (co->done_tail) co->done_tail->next = op;
    else co->done_head = op;
    co->done_tail = op;
    pthread_mutex_unlock(&co->done_mu);
    if (was_empty && co->loop && rl__loop_post(co->loop, flush_post, co) != RL_OK)
        rl__log(RL_LOG_WARN, "coordinator: could not post commit replies (out of memory); the "
                             "housekeeping timer sends them");
}

/* See coord_int.h: each finished operation's finish in completion order, then parked PEEKs woken
 * by the new durable version. Runs on the loop thread (and once more by close after the loop is
 * freed). */
void rl__co_flush(rl__coordinator *co) {
    pthread_mutex_lock(&co->done_mu);
    co_op *op = co->done_head;
    co->done_head = co->done_tail = NULL;
    pthread_mutex_unlock(&co->done_mu);
    while (op) {
        co_op *next = op->next;
        op->finish(co, op); /* a placement transaction's may answer parked PEEKs itself */
        rl__co_op_put(co, op);
        op = next;
    }
    if (!co->log) return; /* closing after a failed open */
    rl__version d = rl__commitlog_durable_version(co->log);
    if (d > co->notified) {
        co->notified = d;
        /* A batch of a tick's own leaves the tick's schedule as it was (it counts from the
         * tick's submission); any other batch puts the next tick an interval away. */
        if (d != co->tick_version) co->last_version_ns = rl__clock_mono_ns();
        if (co->wake_parked) co->wake_parked(co, d);
    }
}

/* See coord_int.h. */
void rl__co_wake_peeks(rl__coordinator *co) {
    rl__version d = rl__commitlog_durable_version(co->log);
    co->notified = d;
    if (co->wake_parked) co->wake_parked(co, d);
}

/* ---- The version tick ---------------------------------------------------------------------- */

/* See coord_int.h. The window is in versions, about microseconds. */
uint64_t rl__co_tick_interval(const rl__coordinator *co) {
    uint64_t window = co->window_versions ? co->window_versions : 5000000;
    uint64_t ns = window / 4 * 1000;
    if (ns > CO_TICK_NS) ns = CO_TICK_NS;
    if (co->mv.active && co->mv.n_pending && ns > CO_HOUSEKEEPING_NS) ns = CO_HOUSEKEEPING_NS;
    if (ns < CO_TICK_MIN_NS) ns = CO_TICK_MIN_NS;
    return ns;
}

/* A tick's batch is durable (or failed): count it (its finish, run by rl__co_flush). */
static void tick_done(rl__coordinator *co, co_op *op) {
    co->tick_busy = 0;
    if (op->req.result == RL_OK) {
        co->ticks++;
        co->tick_version = op->req.commit_version;
    }
}

/* Submit one tick: an empty batch through the committer (finished by tick_done). A failure (out
 * of memory) is retried at the next check. */
static void submit_tick(rl__coordinator *co) {
    co_op *op = rl__co_op_get(co, 0);
    if (!op) return;
    memset(&op->req, 0, sizeof op->req);
    op->req.is_tick = 1;
    op->finish = tick_done;
    op->conn = NULL;
    if (rl__committer_submit(co->cm, &op->req, rl__co_op_done, op) != RL_OK) {
        rl__co_op_put(co, op);
        return;
    }
    co->tick_busy = 1;
}

/* The tick timer fired. */
static void tick_timer_fired(rl__loop *loop, void *ud) {
    (void)loop;
    rl__coordinator *co = ud;
    co->tick_timer = 0;
    rl__co_tick_check(co);
}

/* See coord_int.h. A tick still in the committer (an fdatasync longer than the interval) is
 * waited for: the check comes again an interval later. */
void rl__co_tick_check(rl__coordinator *co) {
    uint64_t now = rl__clock_mono_ns(), iv = rl__co_tick_interval(co);
    if (!co->tick_busy && now - co->last_version_ns >= iv) {
        submit_tick(co);
        co->last_version_ns = now;
    }
    uint64_t due = co->last_version_ns + iv;
    if (due <= now) due = now + iv;
    if (co->tick_timer && co->tick_deadline_ns <= due) return; /* that one checks again */
    if (co->tick_timer) rl__loop_timer_cancel(co->loop, co->tick_timer);
    co->tick_timer = 0;
    if (rl__loop_timer_add(co->loop, due, tick_timer_fired, co, &co->tick_timer) == RL_OK) co->tick_deadline_ns = due;
    else co->tick_timer = 0; /* out of memory: the housekeeping timer checks again */
}

/* See coord_int.h. */
void rl__co_margin_for_delay(rl__coordinator *co) {
    if (co->delay_us || co->jitter_us) rl__loop_set_margin_bounds(co->loop, 20, 200);
    else rl__loop_set_margin_bounds(co->loop, 0, 0);
}

/* ---- Creating and freeing the core -------------------------------------------------------- */

/* See coord_int.h: the coordinator's state from o, then recovery — the directory, the commit log,
 * the system keyspace replayed from it, the committer after every version either has seen — and
 * the layout, written first for a fresh directory (steps 1-3 of rl__coordinator_open). */
int rl__co_new(const struct rl__coordinator_options *o, rl__coordinator **out, rl__errdetail *err) {
    char path[4200];
    if (!o || !o->dir || !*o->dir || strlen(o->dir) > 4000 || !out) {
        rl__errdetail_append(err, "a coordinator needs --dir");
        return RL_E_INVALID_ARGUMENT;
    }
    if (!o->auth || !o->auth->has_member_key) {
        rl__errdetail_append(err, "a coordinator needs the cluster's key file (--key-file)");
        return RL_E_INVALID_ARGUMENT;
    }
    int rc = RL_E_OUT_OF_MEMORY;
    co_layout lay;
    memset(&lay, 0, sizeof lay);
    rl__coordinator *co = rl__calloc(1, sizeof *co);
    if (!co) goto fail_early;
    co->start_ns = rl__clock_mono_ns();
    rl__arena_init(&co->scratch, 0);
    rl__buf_init(&co->out);
    if (pthread_mutex_init(&co->done_mu, NULL) != 0) {
        rl__free(co);
        co = NULL;
        goto fail_early;
    }
    co->no_sync = o->no_sync;
    co->window_versions = o->window_versions;
    co->delay_us = o->delay_us;
    co->jitter_us = o->jitter_us;
    co->delay_salt = (uint64_t)getpid() << 32;
    rl__lat_hist_reset(&co->closed_late);
    {
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        if ((rc = rl__netem_check(o->delay_us, o->jitter_us, &why)) != RL_OK) {
            rl__errdetail_append(err, "--delay-us / --jitter-us: %s", rl__errdetail_get(&why));
            goto fail;
        }
    }
    const char *host = o->host ? o->host : "host1";
    if (!(co->dir = rl__strdup(o->dir)) || !(co->listen_ip = rl__strdup(o->listen_ip ? o->listen_ip : "127.0.0.1")) ||
        !(co->host = rl__strdup(host)) || (o->port_file && !(co->port_file = rl__strdup(o->port_file))))
        goto fail;
    co->host_len = (uint32_t)strlen(co->host);
    if (co->host_len > RL_PROTO_MAX_STRING) {
        rl__errdetail_append(err, "--host is longer than %d bytes", RL_PROTO_MAX_STRING);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }

    /* 1. The directory, the commit log, the system keyspace; replay the log into it. */
    if ((rc = ensure_dir(co->dir, err)) != RL_OK) goto fail;
    snprintf(path, sizeof path, "%s/log", co->dir);
    rl__commitlog_options lo = {path, o->no_sync, o->segment_bytes};
    if ((rc = rl__commitlog_open(&lo, &co->log, err)) != RL_OK) goto fail;
    snprintf(path, sizeof path, "%s/sys", co->dir);
    if ((rc = ensure_dir(path, err)) != RL_OK) goto fail;
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    so.engine = RL_ENGINE_MEMORY;
    so.dir = path;
    so.no_sync = o->no_sync;
    so.window_versions = o->window_versions;
    if ((rc = rl__storage_open(&so, &co->sys, err)) != RL_OK) goto fail;
    if ((rc = replay_sys(co, err)) != RL_OK) goto fail;

    /* 2. The committer, after every version the log or the system keyspace has seen. */
    rl__version recovered = rl__commitlog_durable_version(co->log);
    if (rl__storage_latest_version(co->sys) > recovered) recovered = rl__storage_latest_version(co->sys);
    rl__committer_options cmo = {o->window_versions, 0};
    rl__log_sink sink = {co, sink_apply, sink_sync};
    if ((rc = rl__committer_new(&cmo, sink, recovered, &co->cm)) != RL_OK) {
        rl__errdetail_append(err, "cannot create the committer: %s", rl_error_name(rc));
        goto fail;
    }
    rl__committer_set_max_batch_bytes(co->cm, CO_BATCH_BYTES);

    /* 3. The layout: recovered, or written now for a fresh directory. */
    rc = load_layout(co, err);
    if (rc == RL_E_NOT_FOUND) {
        if (o->init_file) rc = parse_init(o->init_file, &lay, err);
        else if ((rc = default_layout(&lay)) == RL_OK)
            rl__log(RL_LOG_INFO, "coordinator: no --init: one shard [\"\", \"\\xff\") on storage 1");
        if (rc == RL_OK) rc = write_layout(co, &lay, err);
        if (rc == RL_OK) rc = load_layout(co, err);
    } else if (rc == RL_OK && o->init_file) {
        rl__log(RL_LOG_INFO, "coordinator: %s already holds a cluster; --init %s is not read", co->dir, o->init_file);
    }
    if (rc != RL_OK) goto fail;
    if ((rc = rl__co_compute_ownership(co)) != RL_OK) goto fail;
    layout_release(&lay);
    *out = co;
    return RL_OK;
fail:
    layout_release(&lay);
    rl__co_free(co);
fail_early:
    return rc;
}

/* See coord_int.h. */
int rl__co_publish(rl__coordinator *co, rl__errdetail *err) {
    int rc = publish_self(co, err);
    if (rc == RL_OK && co->port_file) rc = write_port_file(co->port_file, co->port, err);
    return rc;
}

/* See coord_int.h: what rl__coordinator_close leaves to the core, once the listener, the committer,
 * the loop and the parts are gone. Copes with a partly built coordinator (a failed open). */
void rl__co_free(rl__coordinator *co) {
    if (!co) return;
    rl__committer_free(co->cm); /* NULL unless open failed before the loop existed */
    co->cm = NULL;
    rl__co_flush(co); /* completions a failed post left behind */
    rl__co_free_pool(co);
    for (uint32_t i = 0; i < co->n_servers; i++) {
        rl__conn_release(co->servers[i].peek_conn);
        rl__free(co->servers[i].host);
        rl__free(co->servers[i].owned);
        rl__free(co->servers[i].merged);
    }
    rl__free(co->servers);
    for (uint32_t i = 0; i < co->n_shards; i++) {
        rl__free(co->shards[i].begin);
        rl__free(co->shards[i].end);
    }
    rl__free(co->shards);
    rl__commitlog_close(co->log);
    rl__storage_close(co->sys);
    rl__free(co->sink.sys);
    rl__free(co->sink.split);
    rl__free(co->pk_versions);
    rl__free(co->pk_muts);
    rl__arena_release(&co->scratch);
    rl__buf_release(&co->out);
    pthread_mutex_destroy(&co->done_mu);
    rl__free(co->dir);
    rl__free(co->listen_ip);
    rl__free(co->host);
    rl__free(co->port_file);
    rl__free(co);
}
