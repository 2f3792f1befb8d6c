/* coord_move.c — the coordinator's placement: shard splits (SPLIT_SHARD), shard moves
 * (ASSIGN_SHARD) and destinations' "fetch complete" reports (MOVE_SHARD). docs/design.md §8.3
 * (Placement) is the design, docs/protocol.md §7/§9 the wire behaviour. A part of the
 * coordinator (coord_int.h, "The files"): it uses the core only — its transactions are
 * operations whose finish is rl__co_move_done, and it answers parked PEEKs when the barrier
 * lifts through rl__co_wake_peeks.
 *
 * Admin requests queue (mv.head) and run one at a time on the loop thread. An ASSIGN of
 * [begin, end) to team D:
 *
 *   1. SPLIT: one transaction adds \xff/keyServers/ boundaries at begin and end (same team both
 *      halves) when they are not boundaries yet.
 *   2. For each shard S of [begin, end) whose team T is not D, one move, FoundationDB-style:
 *      START  a transaction at V writes \xff/moveKeys/<S.begin> -> (S.end, D...) (durable: a
 *             restarted coordinator resumes the move, rl__co_move_load). Once durable, every
 *             destination d in D \ T gets an ownership change (assign, V) in its PEEK replies and
 *             S's mutations from V on (an extra PEEK range [V, ∞)); it fetches S at a version F
 *             from a member of T, applies it with the log's later mutations, syncs, and sends
 *             MOVE_SHARD (S, C): it serves S from C on.
 *      SWITCH when every destination reported, a transaction at W sets \xff/keyServers/<S.begin>
 *             -> D and clears the move record. Once durable, the map says D; every source in
 *             T \ D gets (remove, W) and S's mutations below W only (an extra range [0, W)).
 *   3. The reply (version W of the last switch, shards moved) when every shard is on D, or
 *      timed_out at the request's deadline naming the pending destinations (the move goes on).
 *
 * Invariants:
 *   1. The PEEK barrier: while a START or SWITCH transaction is being committed, PEEK replies
 *      stop at the durable version of the moment it was submitted (rl__co_peek_cap), so no server
 *      is sent a version >= V (W) before the change at V (W) and its extra range are installed —
 *      a change's version is always above the after_version of the PEEK that carries it.
 *   2. The shard map in memory changes only here, on the loop thread, after the transaction
 *      that wrote it to \xff/keyServers/ is durable; owned/merged ranges are recomputed then.
 *   3. While a move waits for destinations, the coordinator's version tick runs every
 *      housekeeping interval instead of its usual one (rl__co_tick_interval, coordinator.c): an
 *      empty batch keeps versions advancing (a destination applies its fetched data at a version
 *      it has not applied yet, which must come even on an idle cluster).
 *   4. A destination that registers again (restart, reconnection) is assigned the range again
 *      at its registration's version and must report again: its REGISTER reply holds the map's
 *      ranges only, so it dropped the range.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/coord_int.h"
#include "tuple/tuple.h"

#define MV_DEFAULT_TIMEOUT_MS 60000u

enum { STEP_SPLIT = 1, STEP_START = 2, STEP_SWITCH = 3 };

static const uint8_t k_ff[1] = {0xff};

/* A queued admin request (or a move resumed at open: conn NULL). */
struct co_admin {
    co_admin *next;
    uint16_t type;  /* RL_MSG_SPLIT_SHARD or RL_MSG_ASSIGN_SHARD */
    rl__conn *conn; /* a reference; NULL: nobody waits */
    uint64_t req_id;
    uint8_t *begin, *end; /* heap; SPLIT: begin is the key */
    uint32_t begin_len, end_len;
    uint32_t team[CO_MAX_TEAM], n_team;
    uint64_t deadline_ns;
    int replied;
    uint32_t moved;
    rl__version version; /* of the last transaction */
};

/* ---- Small helpers ------------------------------------------------------------------------- */

static uint8_t *dupk(const uint8_t *p, uint32_t n) {
    uint8_t *q = rl__malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

static int has_id(const uint32_t *ids, uint32_t n, uint32_t id) {
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* 1 if the teams hold the same ids in the same order. */
static int same_team(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb) {
    if (na != nb) return 0;
    for (uint32_t i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* The index of the user shard holding key (key < "\xff"). */
static uint32_t shard_of(const rl__coordinator *co, const uint8_t *k, uint32_t kl) {
    uint32_t i = 0;
    while (i + 1 < co->n_shards && rl__bytes_cmp(co->shards[i].end, co->shards[i].end_len, k, kl) <= 0) i++;
    return i;
}

static int is_boundary(const rl__coordinator *co, const uint8_t *k, uint32_t kl) {
    uint32_t i = shard_of(co, k, kl);
    return rl__bytes_cmp(co->shards[i].begin, co->shards[i].begin_len, k, kl) == 0;
}

/* Split the in-memory map at k (not a boundary, below "\xff"). */
static int map_split(rl__coordinator *co, const uint8_t *k, uint32_t kl) {
    if (is_boundary(co, k, kl) || rl__bytes_cmp(k, kl, k_ff, 1) >= 0) return RL_OK;
    uint32_t i = shard_of(co, k, kl);
    co_shard *a = rl__realloc(co->shards, (co->n_shards + 1) * sizeof *a);
    if (!a) return RL_E_OUT_OF_MEMORY;
    co->shards = a;
    uint8_t *k1 = dupk(k, kl), *k2 = dupk(k, kl);
    if (!k1 || !k2) {
        rl__free(k1);
        rl__free(k2);
        return RL_E_OUT_OF_MEMORY;
    }
    memmove(&a[i + 2], &a[i + 1], (co->n_shards - i - 1) * sizeof *a);
    a[i + 1] = a[i];
    a[i].end = k1; /* [begin, k) keeps the old begin; [k, end) takes the old end */
    a[i].end_len = kl;
    a[i + 1].begin = k2;
    a[i + 1].begin_len = kl;
    co->n_shards++;
    return RL_OK;
}

/* ---- Per-server changes and extra ranges ------------------------------------------------------ */

static void change_free(co_change *c) {
    rl__free(c->begin);
    rl__free(c->end);
}

static void extra_free(co_extra *e) {
    rl__free(e->begin);
    rl__free(e->end);
}

/* Add a change (kept in version order). */
static int add_change(co_server *srv, rl__version v, uint8_t kind, const uint8_t *b, uint32_t bl, const uint8_t *e,
                      uint32_t el) {
    co_change *a = rl__realloc(srv->changes, (srv->n_changes + 1) * sizeof *a);
    if (!a) return RL_E_OUT_OF_MEMORY;
    srv->changes = a;
    co_change c = {v, kind, dupk(b, bl), dupk(e, el), bl, el};
    if (!c.begin || !c.end) {
        change_free(&c);
        return RL_E_OUT_OF_MEMORY;
    }
    uint32_t i = srv->n_changes;
    while (i > 0 && a[i - 1].version > v) {
        a[i] = a[i - 1];
        i--;
    }
    a[i] = c;
    srv->n_changes++;
    return RL_OK;
}

static int add_extra(co_server *srv, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el, rl__version from,
                     rl__version to) {
    co_extra *a = rl__realloc(srv->extras, (srv->n_extras + 1) * sizeof *a);
    if (!a) return RL_E_OUT_OF_MEMORY;
    srv->extras = a;
    co_extra x = {dupk(b, bl), dupk(e, el), bl, el, from, to};
    if (!x.begin || !x.end) {
        extra_free(&x);
        return RL_E_OUT_OF_MEMORY;
    }
    a[srv->n_extras++] = x;
    return RL_OK;
}

/* Drop srv's open-ended extra ranges equal to [b, e) (a destination after the switch). */
static void drop_extras_of(co_server *srv, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < srv->n_extras; i++) {
        co_extra *x = &srv->extras[i];
        if (x->to == 0 && rl__bytes_cmp(x->begin, x->begin_len, b, bl) == 0 &&
            rl__bytes_cmp(x->end, x->end_len, e, el) == 0) {
            extra_free(x);
            continue;
        }
        srv->extras[n++] = *x;
    }
    srv->n_extras = n;
}

/* See coord_int.h. */
void rl__co_move_prune(co_server *srv, rl__version after) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < srv->n_changes; i++) {
        if (srv->changes[i].version <= after) {
            change_free(&srv->changes[i]);
            continue;
        }
        srv->changes[n++] = srv->changes[i];
    }
    srv->n_changes = n;
    n = 0;
    for (uint32_t i = 0; i < srv->n_extras; i++) {
        if (srv->extras[i].to && srv->extras[i].to <= after) {
            extra_free(&srv->extras[i]);
            continue;
        }
        srv->extras[n++] = srv->extras[i];
    }
    srv->n_extras = n;
}

static void server_reset(co_server *srv) {
    for (uint32_t i = 0; i < srv->n_changes; i++) change_free(&srv->changes[i]);
    for (uint32_t i = 0; i < srv->n_extras; i++) extra_free(&srv->extras[i]);
    rl__free(srv->changes);
    rl__free(srv->extras);
    srv->changes = NULL;
    srv->extras = NULL;
    srv->n_changes = srv->n_extras = 0;
}

/* ---- Requests and replies --------------------------------------------------------------------- */

static void admin_free(co_admin *a) {
    if (!a) return;
    rl__conn_release(a->conn);
    rl__free(a->begin);
    rl__free(a->end);
    rl__free(a);
}

/* Reply to the running request (once; a request nobody waits for is not answered). */
static void admin_reply(rl__coordinator *co, co_admin *a) {
    if (a->replied || !a->conn) return;
    a->replied = 1;
    rl__msg m;
    memset(&m, 0, sizeof m);
    if (a->type == RL_MSG_SPLIT_SHARD) {
        m.u.split_shard_reply.version = a->version ? a->version : rl__co_durable(co);
        m.u.split_shard_reply.split = a->moved ? 1 : 0;
    } else {
        m.u.assign_shard_reply.version = a->version ? a->version : rl__co_durable(co);
        m.u.assign_shard_reply.moved = a->moved;
    }
    rl__co_send_reply(co, a->conn, a->type, a->req_id, &m);
}

static void admin_fail(rl__coordinator *co, co_admin *a, int code, const char *what) {
    if (a->replied || !a->conn) return;
    a->replied = 1;
    rl__co_send_error(co, a->conn, a->type, a->req_id, code, "%s", what);
}

/* Take the running request off the queue and free it. */
static void admin_pop(rl__coordinator *co) {
    co_admin *a = co->mv.head;
    if (!a) return;
    co->mv.head = a->next;
    if (!co->mv.head) co->mv.tail = NULL;
    admin_free(a);
}

/* ---- Placement transactions ------------------------------------------------------------------- */

/* Submit a placement transaction: the mutations in op->arena, a write conflict range per key
 * (none: a tick request, so the transaction still gets a version). barrier: hold PEEKs at the
 * current durable version until it is installed (invariant 1). */
static int submit(rl__coordinator *co, co_op *op, rl__mutation *muts, size_t n, int step, int barrier) {
    rl__keyrange *w = rl__arena_alloc(&op->arena, (n ? n : 1) * sizeof *w);
    if (!w) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        uint8_t *e = rl__arena_alloc(&op->arena, (size_t)muts[i].len1 + 1);
        if (!e) return RL_E_OUT_OF_MEMORY;
        memcpy(e, muts[i].p1, muts[i].len1);
        e[muts[i].len1] = 0;
        w[i] = (rl__keyrange){muts[i].p1, muts[i].len1, e, muts[i].len1 + 1};
    }
    memset(&op->req, 0, sizeof op->req);
    op->req.read_version = rl__co_durable(co);
    op->req.writes = w;
    op->req.n_writes = n;
    op->req.muts = muts;
    op->req.n_muts = n;
    op->req.is_tick = n == 0;
    op->finish = rl__co_move_done;
    op->move_step = step;
    op->conn = NULL;
    co->mv.txn = 1;
    if (barrier) {
        co->mv.barrier = 1;
        co->mv.barrier_version = rl__co_durable(co);
    }
    int rc = rl__committer_submit(co->cm, &op->req, rl__co_op_done, op);
    if (rc != RL_OK) {
        co->mv.txn = 0;
        if (barrier) co->mv.barrier = 0;
    }
    return rc;
}

/* A SET in arena a of prefix + key -> value. */
static int mk_set(rl_arena *a, const char *prefix, uint32_t pl, const uint8_t *k, uint32_t kl, const rl_buf *v,
                  rl__mutation *out) {
    uint8_t *key = rl__arena_alloc(a, (size_t)pl + kl + 1);
    uint8_t *val = rl__arena_alloc(a, v->len + 1);
    if (!key || !val || rl__buf_error(v)) return RL_E_OUT_OF_MEMORY;
    memcpy(key, prefix, pl);
    if (kl) memcpy(key + pl, k, kl);
    if (v->len) memcpy(val, v->data, v->len);
    *out = (rl__mutation){RL_MUT_SET, key, pl + kl, val, (uint32_t)v->len};
    return RL_OK;
}

/* A new operation with room for n mutations, or NULL. */
static co_op *new_op(rl__coordinator *co, size_t n, rl__mutation **muts) {
    co_op *op = rl__co_op_get(co, 0);
    if (!op) return NULL;
    *muts = rl__arena_alloc(&op->arena, (n ? n : 1) * sizeof **muts);
    if (!*muts) {
        rl__co_op_put(co, op);
        return NULL;
    }
    return op;
}

/* Commit boundaries at keys[0..nk) (those not boundaries yet). */
static int submit_split(rl__coordinator *co, const uint8_t *const *keys, const uint32_t *lens, int nk) {
    rl__mutation *muts;
    co_op *op = new_op(co, (size_t)nk, &muts);
    if (!op) return RL_E_OUT_OF_MEMORY;
    size_t n = 0;
    int rc = RL_OK;
    rl_buf v;
    rl__buf_init(&v);
    for (int i = 0; i < nk && rc == RL_OK; i++) {
        if (is_boundary(co, keys[i], lens[i]) || rl__bytes_cmp(keys[i], lens[i], k_ff, 1) >= 0) continue;
        if (i == 1 && n == 1 && rl__bytes_cmp(keys[0], lens[0], keys[1], lens[1]) == 0) continue;
        const co_shard *s = &co->shards[shard_of(co, keys[i], lens[i])];
        rl__buf_reset(&v);
        rl__co_pack_ids(&v, s->team, s->n_team);
        rc = mk_set(&op->arena, CO_KEYSERVERS, CO_KEYSERVERS_LEN, keys[i], lens[i], &v, &muts[n++]);
    }
    rl__buf_release(&v);
    if (rc == RL_OK) rc = submit(co, op, muts, n, STEP_SPLIT, 0);
    if (rc != RL_OK) rl__co_op_put(co, op);
    return rc;
}

/* The move record's value: (end bytes, dest ids...). */
static void move_value(rl_buf *v, const uint8_t *end, uint32_t el, const uint32_t *d, uint32_t nd) {
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, v);
    rl__tuple_pack_bytes(&pk, end, el);
    for (uint32_t i = 0; i < nd; i++) rl__tuple_pack_int(&pk, d[i]);
}

/* Start moving shard s to the running request's team. */
static int submit_start(rl__coordinator *co, uint32_t s, const co_admin *a) {
    co_placement *mv = &co->mv;
    const co_shard *sh = &co->shards[s];
    rl__free(mv->begin);
    rl__free(mv->end);
    mv->begin = dupk(sh->begin, sh->begin_len);
    mv->end = dupk(sh->end, sh->end_len);
    if (!mv->begin || !mv->end) return RL_E_OUT_OF_MEMORY;
    mv->begin_len = sh->begin_len;
    mv->end_len = sh->end_len;
    memcpy(mv->dest, a->team, a->n_team * sizeof a->team[0]);
    mv->n_dest = a->n_team;
    memcpy(mv->src, sh->team, sh->n_team * sizeof sh->team[0]);
    mv->n_src = sh->n_team;
    mv->n_pending = 0;
    for (uint32_t i = 0; i < mv->n_dest; i++)
        if (!has_id(mv->src, mv->n_src, mv->dest[i])) mv->pending[mv->n_pending++] = mv->dest[i];
    rl__mutation *muts;
    co_op *op = new_op(co, 1, &muts);
    if (!op) return RL_E_OUT_OF_MEMORY;
    rl_buf v;
    rl__buf_init(&v);
    move_value(&v, mv->end, mv->end_len, mv->dest, mv->n_dest);
    int rc = mk_set(&op->arena, CO_MOVEKEYS, CO_MOVEKEYS_LEN, mv->begin, mv->begin_len, &v, &muts[0]);
    rl__buf_release(&v);
    if (rc == RL_OK) rc = submit(co, op, muts, 1, STEP_START, 1);
    if (rc != RL_OK) rl__co_op_put(co, op);
    return rc;
}

/* Switch the move's shard to its destination team. */
static int submit_switch(rl__coordinator *co) {
    co_placement *mv = &co->mv;
    rl__mutation *muts;
    co_op *op = new_op(co, 2, &muts);
    if (!op) return RL_E_OUT_OF_MEMORY;
    rl_buf v;
    rl__buf_init(&v);
    rl__co_pack_ids(&v, mv->dest, mv->n_dest);
    int rc = mk_set(&op->arena, CO_KEYSERVERS, CO_KEYSERVERS_LEN, mv->begin, mv->begin_len, &v, &muts[0]);
    rl__buf_reset(&v);
    if (rc == RL_OK) rc = mk_set(&op->arena, CO_MOVEKEYS, CO_MOVEKEYS_LEN, mv->begin, mv->begin_len, &v, &muts[1]);
    rl__buf_release(&v);
    if (rc == RL_OK) {
        muts[1].type = RL_MUT_CLEAR;
        muts[1].p2 = NULL;
        muts[1].len2 = 0;
        rc = submit(co, op, muts, 2, STEP_SWITCH, 1);
    }
    if (rc != RL_OK) rl__co_op_put(co, op);
    return rc;
}

/* Run the queue: start the next step of the running request (nothing while a transaction is in
 * flight or a move waits for its destinations). */
static void kick(rl__coordinator *co) {
    co_placement *mv = &co->mv;
    while (mv->head && !mv->txn && !mv->active) {
        co_admin *a = mv->head;
        int rc;
        if (a->type == RL_MSG_SPLIT_SHARD) {
            if (a->moved || is_boundary(co, a->begin, a->begin_len)) {
                admin_reply(co, a);
                admin_pop(co);
                continue;
            }
            const uint8_t *keys[1] = {a->begin};
            uint32_t lens[1] = {a->begin_len};
            if ((rc = submit_split(co, keys, lens, 1)) == RL_OK) return;
        } else {
            if (!is_boundary(co, a->begin, a->begin_len) || !is_boundary(co, a->end, a->end_len)) {
                const uint8_t *keys[2] = {a->begin, a->end};
                uint32_t lens[2] = {a->begin_len, a->end_len};
                if ((rc = submit_split(co, keys, lens, 2)) == RL_OK) return;
            } else {
                uint32_t s = shard_of(co, a->begin, a->begin_len);
                while (s + 1 < co->n_shards &&
                       rl__bytes_cmp(co->shards[s].begin, co->shards[s].begin_len, a->end, a->end_len) < 0 &&
                       same_team(co->shards[s].team, co->shards[s].n_team, a->team, a->n_team))
                    s++;
                if (s + 1 >= co->n_shards ||
                    rl__bytes_cmp(co->shards[s].begin, co->shards[s].begin_len, a->end, a->end_len) >= 0) {
                    admin_reply(co, a); /* every shard of the range is on the team */
                    admin_pop(co);
                    continue;
                }
                if ((rc = submit_start(co, s, a)) == RL_OK) return;
            }
        }
        char what[160];
        snprintf(what, sizeof what, "cannot submit the placement transaction: %s", rl_error_name(rc));
        admin_fail(co, a, rc, what);
        admin_pop(co);
    }
}

/* After a START is installed or a destination reported: switch once none is pending. */
static void maybe_switch(rl__coordinator *co) {
    co_placement *mv = &co->mv;
    if (!mv->active || mv->txn || mv->n_pending) return;
    int rc = submit_switch(co);
    if (rc != RL_OK)
        rl__log(RL_LOG_WARN,
                "coordinator: cannot submit a move's switch (%s); retrying at the "
                "next tick",
                rl_error_name(rc));
}

/* See coord_int.h. */
void rl__co_move_done(rl__coordinator *co, co_op *op) {
    co_placement *mv = &co->mv;
    int step = op->move_step, rc = op->req.result;
    rl__version v = op->req.commit_version;
    mv->txn = 0;
    co_admin *a = mv->head;
    if (rc != RL_OK) {
        mv->barrier = 0;
        rl__co_wake_peeks(co);
        rl__log(RL_LOG_WARN, "coordinator: a placement transaction failed: %s", rl_error_name(rc));
        if (step == STEP_SWITCH) return; /* retried by the tick: the move stays active */
        if (a) {
            char what[160];
            snprintf(what, sizeof what, "the placement transaction failed: %s", rl_error_name(rc));
            admin_fail(co, a, rc, what);
            admin_pop(co);
        }
        kick(co);
        return;
    }
    int orc = RL_OK;
    if (step == STEP_SPLIT) {
        for (size_t i = 0; i < op->req.n_muts && orc == RL_OK; i++)
            orc = map_split(co, op->req.muts[i].p1 + CO_KEYSERVERS_LEN, op->req.muts[i].len1 - CO_KEYSERVERS_LEN);
        if (orc == RL_OK) orc = rl__co_compute_ownership(co);
        mv->splits_done += op->req.n_muts;
        if (a) {
            a->version = v;
            if (a->type == RL_MSG_SPLIT_SHARD) a->moved = (uint32_t)op->req.n_muts;
        }
        rl__log(RL_LOG_INFO, "coordinator: %zu shard boundaries added at version %" PRIu64, op->req.n_muts, v);
    } else if (step == STEP_START) {
        mv->active = 1;
        mv->start_version = v;
        for (uint32_t i = 0; i < mv->n_pending && orc == RL_OK; i++) {
            co_server *srv = rl__co_server(co, mv->pending[i]);
            if (!srv) continue;
            orc = add_change(srv, v, RL_SHARD_ASSIGN, mv->begin, mv->begin_len, mv->end, mv->end_len);
            if (orc == RL_OK) orc = add_extra(srv, mv->begin, mv->begin_len, mv->end, mv->end_len, v, 0);
        }
        rl__log(RL_LOG_INFO,
                "coordinator: move started at version %" PRIu64 " (%u destinations "
                "to fetch)",
                v, mv->n_pending);
    } else if (step == STEP_SWITCH) {
        uint32_t s = shard_of(co, mv->begin, mv->begin_len);
        co_shard *sh = &co->shards[s];
        memcpy(sh->team, mv->dest, mv->n_dest * sizeof mv->dest[0]);
        sh->n_team = mv->n_dest;
        orc = rl__co_compute_ownership(co);
        for (uint32_t i = 0; i < mv->n_src && orc == RL_OK; i++) {
            if (has_id(mv->dest, mv->n_dest, mv->src[i])) continue;
            co_server *srv = rl__co_server(co, mv->src[i]);
            if (!srv) continue;
            orc = add_extra(srv, mv->begin, mv->begin_len, mv->end, mv->end_len, 0, v);
            if (orc == RL_OK) orc = add_change(srv, v, RL_SHARD_REMOVE, mv->begin, mv->begin_len, mv->end, mv->end_len);
        }
        for (uint32_t i = 0; i < mv->n_dest; i++) {
            co_server *srv = rl__co_server(co, mv->dest[i]);
            if (srv) drop_extras_of(srv, mv->begin, mv->begin_len, mv->end, mv->end_len);
        }
        mv->active = 0;
        mv->moves_done++;
        if (a) {
            a->version = v;
            a->moved++;
        }
        rl__log(RL_LOG_INFO, "coordinator: move switched at version %" PRIu64, v);
    }
    if (orc != RL_OK) /* out of memory installing a durable change: the restart replays it */
        rl__log(RL_LOG_ERROR, "coordinator: installing a placement change failed (%s)", rl_error_name(orc));
    mv->barrier = 0;
    rl__co_wake_peeks(co);
    if (step == STEP_START) maybe_switch(co);
    kick(co);
}

/* ---- Requests ------------------------------------------------------------------------------- */

/* Queue an admin request (copies what it needs). */
static void enqueue(rl__coordinator *co, co_conn *cc, const rl__frame_header *h, const uint8_t *b, uint32_t bl,
                    const uint8_t *e, uint32_t el, const uint32_t *team, uint32_t nt, uint32_t timeout_ms) {
    co_admin *a = rl__calloc(1, sizeof *a);
    if (a) {
        a->begin = dupk(b, bl);
        a->end = dupk(e, el);
    }
    if (!a || !a->begin || !a->end) {
        admin_free(a);
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    a->type = h->type;
    rl__conn_retain(cc->conn);
    a->conn = cc->conn;
    a->req_id = h->id;
    a->begin_len = bl;
    a->end_len = el;
    if (nt) memcpy(a->team, team, nt * sizeof *team);
    a->n_team = nt;
    a->deadline_ns = rl__clock_mono_ns() + (uint64_t)(timeout_ms ? timeout_ms : MV_DEFAULT_TIMEOUT_MS) * 1000000ull;
    if (co->mv.tail) co->mv.tail->next = a;
    else co->mv.head = a;
    co->mv.tail = a;
    kick(co);
}

/* A key an admin request may name: below "\xff". */
static int user_key(const uint8_t *k, uint32_t kl) { return rl__bytes_cmp(k, kl, k_ff, 1) < 0; }

/* See coord_int.h: SPLIT_SHARD (an admin connection: on_frame checked). */
void rl__co_split_shard(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m) {
    rl__coordinator *co = cc->co;
    const rl__msg_split_shard_req *r = &m->u.split_shard_req;
    (void)payload;
    if (r->key_len == 0 || !user_key(r->key, r->key_len)) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT,
                          "SPLIT_SHARD: the key must be above \"\" and below \\xff (the "
                          "system keyspace is the coordinator's)");
        return;
    }
    enqueue(co, cc, h, r->key, r->key_len, r->key, r->key_len, NULL, 0, 0);
}

/* See coord_int.h: ASSIGN_SHARD (an admin connection: on_frame checked). */
void rl__co_assign_shard(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m) {
    rl__coordinator *co = cc->co;
    const rl__msg_assign_shard_req *r = &m->u.assign_shard_req;
    (void)payload;
    if (rl__bytes_cmp(r->range.end, r->range.end_len, k_ff, 1) > 0) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT,
                          "ASSIGN_SHARD: the range must end at or below \\xff (the system "
                          "keyspace is the coordinator's)");
        return;
    }
    for (uint32_t i = 0; i < r->n_team; i++)
        if (r->team[i] == 0 || !rl__co_server(co, r->team[i])) {
            rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT,
                              "ASSIGN_SHARD: storage id %u is not a storage server of this "
                              "cluster",
                              r->team[i]);
            return;
        }
    enqueue(co, cc, h, r->range.begin, r->range.begin_len, r->range.end, r->range.end_len, r->team, r->n_team,
            r->timeout_ms);
}

/* See coord_int.h: MOVE_SHARD, a destination's fetch is complete (from the storage server it
 * names: on_frame checked). */
void rl__co_move_shard(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m) {
    rl__coordinator *co = cc->co;
    const rl__msg_move_shard_req *r = &m->u.move_shard_req;
    co_placement *mv = &co->mv;
    (void)payload;
    int match = mv->active && rl__bytes_cmp(r->range.begin, r->range.begin_len, mv->begin, mv->begin_len) == 0 &&
                rl__bytes_cmp(r->range.end, r->range.end_len, mv->end, mv->end_len) == 0;
    uint32_t n = 0, found = 0;
    for (uint32_t i = 0; match && i < mv->n_pending; i++) {
        if (mv->pending[i] == r->storage_id) {
            found = 1;
            continue;
        }
        mv->pending[n++] = mv->pending[i];
    }
    if (match) mv->n_pending = n;
    rl__log(found ? RL_LOG_INFO : RL_LOG_DEBUG,
            "coordinator: storage server %u holds a moved "
            "range from version %" PRIu64 "%s",
            r->storage_id, r->version, found ? "" : " (not a pending destination of the move in flight: ignored)");
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rl__co_send_reply(co, cc->conn, RL_MSG_MOVE_SHARD, h->id, &rep);
    if (found) maybe_switch(co);
}

/* See coord_int.h. */
void rl__co_move_on_register(rl__coordinator *co, co_server *srv, rl__version cv) {
    co_placement *mv = &co->mv;
    server_reset(srv);
    if (!mv->active || !has_id(mv->dest, mv->n_dest, srv->id) || has_id(mv->src, mv->n_src, srv->id)) return;
    if (!has_id(mv->pending, mv->n_pending, srv->id)) mv->pending[mv->n_pending++] = srv->id;
    if (add_change(srv, cv, RL_SHARD_ASSIGN, mv->begin, mv->begin_len, mv->end, mv->end_len) != RL_OK ||
        add_extra(srv, mv->begin, mv->begin_len, mv->end, mv->end_len, cv, 0) != RL_OK)
        rl__log(RL_LOG_ERROR,
                "coordinator: out of memory assigning a moving range to storage "
                "server %u",
                srv->id);
}

/* See coord_int.h. */
rl__version rl__co_peek_cap(const rl__coordinator *co) { return co->mv.barrier ? co->mv.barrier_version : 0; }

/* See coord_int.h. */
void rl__co_move_tick(rl__coordinator *co) {
    co_placement *mv = &co->mv;
    uint64_t now = rl__clock_mono_ns();
    co_admin *a = mv->head;
    if (a && !a->replied && a->conn && now > a->deadline_ns) {
        char what[400];
        int k = snprintf(what, sizeof what, "%s did not finish in time; ", rl__msg_type_name(a->type));
        if (mv->active) {
            k += snprintf(what + k, sizeof what - (size_t)k, "a move waits for destinations");
            for (uint32_t i = 0; i < mv->n_pending && k < 300; i++)
                k += snprintf(what + k, sizeof what - (size_t)k, " %u", mv->pending[i]);
            snprintf(what + k, sizeof what - (size_t)k, " to fetch (it goes on)");
        } else {
            snprintf(what + k, sizeof what - (size_t)k, "a placement transaction is pending");
        }
        admin_fail(co, a, RL_E_TIMED_OUT, what);
    }
    if (mv->active && !mv->txn && mv->n_pending == 0) maybe_switch(co);
    kick(co);
}

/* See coord_int.h: the record \xff/moveKeys/<begin> -> (end, dest...) of a move that had started
 * and not switched. */
int rl__co_move_load(rl__coordinator *co, rl__errdetail *err) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_keyvalue *kvs = NULL;
    int n = 0, more = 0;
    uint8_t end[CO_MOVEKEYS_LEN];
    memcpy(end, CO_MOVEKEYS, CO_MOVEKEYS_LEN);
    end[CO_MOVEKEYS_LEN - 1]++;
    int rc = rl__storage_get_range(co->sys, rl__storage_latest_version(co->sys), CO_MOVEKEYS, CO_MOVEKEYS_LEN, end,
                                   CO_MOVEKEYS_LEN, 0, 0, 0, &a, &kvs, &n, &more);
    const char *why = NULL;
    rl_buf eb;
    rl__buf_init(&eb);
    for (int i = 0; rc == RL_OK && i < n && !why; i++) {
        const uint8_t *b = kvs[i].key + CO_MOVEKEYS_LEN;
        uint32_t bl = kvs[i].key_len - CO_MOVEKEYS_LEN;
        rl__tuple_iter it;
        rl__tuple_elem e;
        rl__tuple_iter_init(&it, kvs[i].value, kvs[i].value_len);
        co_placement *mv = &co->mv;
        if (mv->active) {
            why = "two moves are recorded in flight";
            break;
        }
        if (rl__tuple_iter_next(&it, &e) != RL_OK || e.type != RL_TT_BYTES) {
            why = "a move record without its end key";
            break;
        }
        rl__buf_reset(&eb);
        rl__tuple_elem_unescape(&e, &eb);
        mv->n_dest = 0;
        int trc;
        while ((trc = rl__tuple_iter_next(&it, &e)) == RL_OK && mv->n_dest < CO_MAX_TEAM && e.type == RL_TT_INT &&
               e.fits_i64 && e.i > 0 && e.i <= (int64_t)UINT32_MAX)
            mv->dest[mv->n_dest++] = (uint32_t)e.i;
        uint32_t s = shard_of(co, b, bl);
        const co_shard *sh = &co->shards[s];
        if (trc != RL_E_NOT_FOUND || mv->n_dest == 0 || rl__buf_error(&eb) ||
            rl__bytes_cmp(sh->begin, sh->begin_len, b, bl) != 0 ||
            rl__bytes_cmp(sh->end, sh->end_len, eb.data, eb.len) != 0) {
            why = "a move record that does not match a shard and a team";
            break;
        }
        mv->begin = dupk(b, bl);
        mv->end = dupk(eb.data, (uint32_t)eb.len);
        co_admin *ad = rl__calloc(1, sizeof *ad);
        if (ad) {
            ad->begin = dupk(b, bl);
            ad->end = dupk(eb.data, (uint32_t)eb.len);
        }
        if (!mv->begin || !mv->end || !ad || !ad->begin || !ad->end) {
            admin_free(ad);
            rc = RL_E_OUT_OF_MEMORY;
            break;
        }
        mv->begin_len = bl;
        mv->end_len = (uint32_t)eb.len;
        memcpy(mv->src, sh->team, sh->n_team * sizeof sh->team[0]);
        mv->n_src = sh->n_team;
        mv->n_pending = 0;
        for (uint32_t d = 0; d < mv->n_dest; d++)
            if (!has_id(mv->src, mv->n_src, mv->dest[d])) mv->pending[mv->n_pending++] = mv->dest[d];
        mv->start_version = rl__storage_latest_version(co->sys);
        mv->active = 1;
        ad->type = RL_MSG_ASSIGN_SHARD;
        ad->begin_len = bl;
        ad->end_len = (uint32_t)eb.len;
        memcpy(ad->team, mv->dest, mv->n_dest * sizeof mv->dest[0]);
        ad->n_team = mv->n_dest;
        ad->deadline_ns = UINT64_MAX;
        mv->head = mv->tail = ad;
        rl__log(RL_LOG_INFO,
                "coordinator: resuming a shard move recorded in %s/sys (%u "
                "destinations to fetch once they register)",
                co->dir, mv->n_pending);
    }
    rl__buf_release(&eb);
    rl__arena_release(&a);
    if (rc == RL_OK && why) {
        rl__errdetail_append(err, "the move records in %s/sys are corrupt: %s", co->dir, why);
        rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
    } else if (rc != RL_OK && rl__errdetail_len(err) == 0) {
        rl__errdetail_append(err, "loading the move records failed: %s", rl_error_name(rc));
    }
    return rc;
}

/* See coord_int.h. */
void rl__co_move_free(rl__coordinator *co) {
    while (co->mv.head) admin_pop(co);
    rl__free(co->mv.begin);
    rl__free(co->mv.end);
    co->mv.begin = co->mv.end = NULL;
    for (uint32_t i = 0; i < co->n_servers; i++) server_reset(&co->servers[i]);
}

/* See coord_int.h. */
void rl__co_move_status(rl__coordinator *co, rl_buf *j) {
    const co_placement *mv = &co->mv;
    uint32_t queued = 0;
    for (const co_admin *a = mv->head; a; a = a->next) queued++;
    rl__buf_printf(j, ",\"placement\":{\"moving\":%s", mv->active ? "true" : "false");
    if (mv->active) {
        rl__buf_printf(j, ",\"begin\":\"");
        rl__buf_append_hex(j, mv->begin, mv->begin_len);
        rl__buf_printf(j, "\",\"end\":\"");
        rl__buf_append_hex(j, mv->end, mv->end_len);
        rl__buf_printf(j, "\",\"start_version\":%" PRIu64 ",\"pending\":[", mv->start_version);
        for (uint32_t i = 0; i < mv->n_pending; i++) rl__buf_printf(j, "%s%u", i ? "," : "", mv->pending[i]);
        rl__buf_printf(j, "]");
    }
    rl__buf_printf(j, ",\"queued\":%u,\"moves\":%" PRIu64 ",\"splits\":%" PRIu64 "}", queued, mv->moves_done,
                   mv->splits_done);
}
