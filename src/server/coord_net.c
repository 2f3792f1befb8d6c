/* coord_net.c — the coordinator's connections and request handlers (docs/protocol.md §9).
 *
 * Every connection is served on the loop thread. A frame is handled in on_frame:
 *
 *   flags != 0 (a reply or error reply)  -> protocol error: log, close the connection
 *   no HELLO yet and type != HELLO       -> protocol error
 *   HELLO (once)                         -> HELLO reply; a foreign magic/version gets an error
 *                                           reply incompatible_protocol_version, then close
 *   payload does not decode, unknown or
 *   reserved type                        -> protocol error (the decoder's reason is logged)
 *   GET_READ_VERSION, GET_SHARD_MAP, STATUS, PING, GET, GET_KEY, GET_RANGE, SET_DELAY
 *                                        -> answered at once
 *   COMMIT, REGISTER_STORAGE             -> an operation (co_op) goes to the committer; its
 *                                           reply is sent by rl__co_flush when it is done
 *   PEEK                                 -> answered at once when the log holds versions after
 *                                           after_version (or max_wait_ms is 0), else parked
 *                                           until a batch is durable or max_wait_ms passes
 *   POP                                  -> recorded; the log is truncated when it can be
 *   SPLIT_SHARD, ASSIGN_SHARD            -> placement (coord_move.c): queued, answered when done
 *   MOVE_SHARD                           -> a move destination's "fetch complete": answered at once
 *   GET_MAPPED_RANGE, GET_MULTI          -> error reply unsupported_operation (storage only)
 * A protocol error closes only that connection (docs/protocol.md §8); it is counted in STATUS.
 *
 * Injected delay (netem.h): the HELLO tells whether the peer is on another host; if so the
 * connection gets the current delay before the HELLO reply, the first frame sent on it, and
 * every later SET_DELAY. Admin connections are never delayed.
 *
 * Operation life cycle (co_op):
 *     FRAME --copy payload, decode, check--> SUBMITTED --committer done (committer thread)-->
 *     QUEUED (co->done_*) --rl__co_flush (loop)--> REPLIED --> back to the pool
 * An operation holds a reference to its connection; a reply to a connection that closed in
 * the meantime is dropped (rl__conn_send fails), never sent elsewhere.
 *
 * Parked peeks (co_peek) are answered by exactly one of: rl__co_flush (durable advanced),
 * their timer (max_wait_ms), or dropped when their connection closes.
 *
 * The version tick (docs/design.md §8.3, FoundationDB's MAX_COMMIT_BATCH_INTERVAL): when no
 * batch became durable for an interval (rl__co_tick_interval: 500 ms, at most a quarter of the
 * MVCC window, 100 ms while a move waits), the tick timer submits a tick request (CO_OP_TICK,
 * rl_commit_request.is_tick) through the same committer: an empty batch that is logged and
 * fdatasynced like any other, gets a version, wakes parked PEEKs, and so advances the durable
 * version (GET_READ_VERSION) and the storage servers' known versions. Read versions are thus
 * never older than about an interval plus one fdatasync, always well inside the window, however
 * long nothing committed. Only durable, logged versions are ever handed out. Idle cost per
 * interval: one 24-byte log record and one fdatasync here, and on every storage server one empty
 * version applied and synced, then a POP.
 */
#include "server/coord_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "net/netem.h"
#include "reclayer/error.h"

static const uint8_t k_ff[1] = {0xff};
static const uint8_t k_ffff[2] = {0xff, 0xff};

#define CO_POOL_MAX 512 /* free operations kept */
#define CO_POOL_KEEP_BYTES \
    (1u << 20)                       /* ... only when their payload buffer and arena are this
                                         small (a pooled op keeps both for reuse) */
#define CO_PEEK_KEEP (1u << 16)      /* PEEK scratch arrays larger than this are freed after use */
#define CO_SEND_BUF_MIN (256u << 10) /* replies this large are handed over, not copied */

/* ---- Sending ------------------------------------------------------------------------------ */

/* Encode m (a reply of type `type`) into co->out and send it on conn. A failure to encode is a
 * bug of this file: it is logged and answered with internal_error. */
static void send_msg(rl_coordinator *co, rl_conn *conn, uint16_t type, uint16_t flags, uint64_t id, rl_msg *m) {
    rl_proto_why why;
    m->type = type;
    m->flags = flags;
    rl__buf_reset(&co->out);
    int rc = rl__msg_encode(&co->out, m, &why);
    if (rc == RL_OK && co->out.len > RL_NET_MAX_PAYLOAD) {
        snprintf(why.text, sizeof why.text, "%s reply of %zu bytes exceeds the frame limit", rl__msg_type_name(type),
                 co->out.len);
        rc = RL_E_INTERNAL_ERROR;
    }
    if (rc != RL_OK) {
        rl__log(RL_LOG_ERROR, "coordinator: cannot encode a %s reply to %s: %s (%s)", rl__msg_type_name(type),
                rl__conn_peer(conn), rl_error_name(rc), why.text);
        if (flags & RL_FRAME_ERROR) return;
        rl_msg e;
        memset(&e, 0, sizeof e);
        e.u.error.code = rc == RL_E_OUT_OF_MEMORY ? RL_E_OUT_OF_MEMORY : RL_E_INTERNAL_ERROR;
        e.u.error.message = (const uint8_t *)why.text;
        e.u.error.message_len = (uint32_t)strlen(why.text);
        send_msg(co, conn, type, RL_FRAME_REPLY | RL_FRAME_ERROR, id, &e);
        return;
    }
    if (co->out.len >= CO_SEND_BUF_MIN) rc = rl__conn_send_buf(conn, type, flags, id, &co->out);
    else rc = rl__conn_send(conn, type, flags, id, co->out.data, co->out.len);
    if (rc != RL_OK && rc != RL_E_CONNECTION_FAILED)
        rl__log(RL_LOG_WARN, "coordinator: sending a %s reply to %s failed: %s", rl__msg_type_name(type),
                rl__conn_peer(conn), rl_error_name(rc));
}

/* Send a reply (flags RL_FRAME_REPLY) of type with id; see send_msg. */
static void send_reply(rl_coordinator *co, rl_conn *conn, uint16_t type, uint64_t id, rl_msg *m) {
    send_msg(co, conn, type, RL_FRAME_REPLY, id, m);
}

/* An error reply with code and a printf-formatted message (cut at the protocol's limit). */
static void send_error(rl_coordinator *co, rl_conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void send_error(rl_coordinator *co, rl_conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    rl_msg e;
    memset(&e, 0, sizeof e);
    e.u.error.code = code;
    e.u.error.message = (const uint8_t *)text;
    e.u.error.message_len = (uint32_t)strlen(text);
    send_msg(co, conn, type, RL_FRAME_REPLY | RL_FRAME_ERROR, id, &e);
}

/* See coord_int.h. */
void rl__co_send_reply(rl_coordinator *co, rl_conn *conn, uint16_t type, uint64_t id, rl_msg *m) {
    send_reply(co, conn, type, id, m);
}

/* See coord_int.h. */
void rl__co_send_error(rl_coordinator *co, rl_conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...) {
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    send_error(co, conn, type, id, code, "%s", text);
}

/* A protocol error: log it with the peer, the frame and why, and close this connection only. */
static void bad_frame(co_conn *cc, const rl_frame_header *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad_frame(co_conn *cc, const rl_frame_header *h, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    rl__log(RL_LOG_WARN,
            "coordinator: closing the connection from %s: %s (frame type %u %s, "
            "flags 0x%x, id %" PRIu64 ", %u payload bytes)",
            rl__conn_peer(cc->conn), text, h->type, rl__msg_type_name(h->type), h->flags, h->id, h->payload_len);
    cc->co->protocol_errors++;
    rl__conn_close(cc->conn, 0);
}

/* ---- Operations (COMMIT, REGISTER_STORAGE) ------------------------------------------------ */

/* An operation with room for a payload of len bytes (from the pool when possible). NULL: OOM. */
static co_op *op_get(rl_coordinator *co, size_t len) {
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

/* Return op to the pool (or free it); drops its connection reference. */
static void op_put(rl_coordinator *co, co_op *op) {
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
co_op *rl__co_op_get(rl_coordinator *co, size_t len) { return op_get(co, len); }
void rl__co_op_put(rl_coordinator *co, co_op *op) { op_put(co, op); }

/* See coord_int.h. */
void rl__co_free_pool(rl_coordinator *co) {
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
static void flush_post(rl_loop *loop, void *ud) {
    (void)loop;
    rl__co_flush(ud);
}

/* Committer thread: queue the finished operation for the loop; post a flush when the queue was
 * empty (a failed post is caught by the housekeeping timer). */
void rl__co_op_done(rl_commit_request *req, void *ud) {
    (void)req;
    co_op *op = ud;
    rl_coordinator *co = op->co;
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

/* ---- PEEK -------------------------------------------------------------------------------- */

/* The index of the first range of r[0..n) whose end > key (n if none). */
static uint32_t first_range_ending_after(const rl_keyrange *r, uint32_t n, const uint8_t *k, uint32_t kl) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rl__bytes_cmp(r[mid].end, r[mid].end_len, k, kl) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

typedef struct {
    rl_coordinator *co;
    const co_server *srv;
    size_t nv, nm;  /* versions and mutations collected */
    uint64_t bytes; /* their encoded mutation bytes */
    uint32_t max_bytes;
    rl_version last; /* the last version visited */
    rl_version cap;  /* versions above it are not sent (0: none; rl__co_peek_cap) */
    int stopped;     /* stopped at max_bytes or the cap */
    int rc;
} peek_state;

/* Append one mutation to the peek's array (index-based: the array may move). */
static int peek_push(peek_state *s, const rl_mutation *m) {
    rl_coordinator *co = s->co;
    if (RL_GROW(co->pk_muts, co->pk_cap_muts, s->nm + 1, 256)) return RL_E_OUT_OF_MEMORY;
    co->pk_muts[s->nm++] = *m;
    s->bytes += 9 + (uint64_t)m->len1 + m->len2;
    return RL_OK;
}

/* Visitor (log mutex held): keep the mutations of rec that touch the server's ranges, clear
 * ranges clipped to them; a version with none is skipped (end_version still covers it). */
static int peek_visit(void *ud, const rl_wal_record *rec) {
    peek_state *s = ud;
    rl_coordinator *co = s->co;
    const rl_keyrange *r = s->srv->merged;
    uint32_t nr = s->srv->n_merged;
    size_t start = s->nm;
    rl_wal_iter it;
    rl_mutation m;
    if (s->cap && rec->version > s->cap) {
        s->stopped = 1;
        return 1;
    }
    rl__wal_iter_init(&it, rec);
    while (rl__wal_iter_next(&it, &m)) {
        /* A move's extra ranges (coord_move.c): the part of m inside each, for this version. */
        for (uint32_t x = 0; x < s->srv->n_extras; x++) {
            const co_extra *e = &s->srv->extras[x];
            if (rec->version < e->from || (e->to && rec->version >= e->to)) continue;
            if (m.type != RL_MUT_CLEAR_RANGE) {
                if (rl__bytes_cmp(m.p1, m.len1, e->begin, e->begin_len) >= 0 &&
                    rl__bytes_cmp(m.p1, m.len1, e->end, e->end_len) < 0) {
                    uint32_t i = first_range_ending_after(r, nr, m.p1, m.len1);
                    int in_merged = i < nr && rl__bytes_cmp(r[i].begin, r[i].begin_len, m.p1, m.len1) <= 0;
                    if (!in_merged && (s->rc = peek_push(s, &m)) != RL_OK) return 1;
                    break; /* a point goes once */
                }
                continue;
            }
            rl_mutation c = m;
            if (rl__bytes_cmp(c.p1, c.len1, e->begin, e->begin_len) < 0) c.p1 = e->begin, c.len1 = e->begin_len;
            if (rl__bytes_cmp(c.p2, c.len2, e->end, e->end_len) > 0) c.p2 = e->end, c.len2 = e->end_len;
            if (rl__bytes_cmp(c.p1, c.len1, c.p2, c.len2) < 0 && (s->rc = peek_push(s, &c)) != RL_OK) return 1;
        }
        if (m.type != RL_MUT_CLEAR_RANGE) {
            uint32_t i = first_range_ending_after(r, nr, m.p1, m.len1);
            if (i < nr && rl__bytes_cmp(r[i].begin, r[i].begin_len, m.p1, m.len1) <= 0 &&
                (s->rc = peek_push(s, &m)) != RL_OK)
                return 1;
            continue;
        }
        for (uint32_t i = first_range_ending_after(r, nr, m.p1, m.len1); i < nr; i++) {
            if (rl__bytes_cmp(r[i].begin, r[i].begin_len, m.p2, m.len2) >= 0) break;
            rl_mutation c = m;
            if (rl__bytes_cmp(c.p1, c.len1, r[i].begin, r[i].begin_len) < 0) c.p1 = r[i].begin, c.len1 = r[i].begin_len;
            if (rl__bytes_cmp(c.p2, c.len2, r[i].end, r[i].end_len) > 0) c.p2 = r[i].end, c.len2 = r[i].end_len;
            if (rl__bytes_cmp(c.p1, c.len1, c.p2, c.len2) >= 0) continue;
            if ((s->rc = peek_push(s, &c)) != RL_OK) return 1;
        }
    }
    if (s->nm > start) {
        if (RL_GROW(co->pk_versions, co->pk_cap_versions, s->nv + 1, 64)) {
            s->rc = RL_E_OUT_OF_MEMORY;
            return 1;
        }
        rl_msg_peek_version *v = &co->pk_versions[s->nv++];
        v->version = rec->version;
        v->muts = (const rl_mutation *)(uintptr_t)start; /* an index until the array is final */
        v->n_muts = (uint32_t)(s->nm - start);
    }
    s->last = rec->version;
    if (s->bytes >= s->max_bytes) {
        s->stopped = 1;
        return 1;
    }
    return 0;
}

/* Answer a PEEK now: the versions after `after` that the log holds, filtered for srv. */
static void answer_peek(rl_coordinator *co, rl_conn *conn, uint64_t id, co_server *srv, rl_version after,
                        uint32_t max_bytes) {
    peek_state s;
    memset(&s, 0, sizeof s);
    s.co = co;
    s.srv = srv;
    s.max_bytes = max_bytes == 0                  ? CO_PEEK_DEFAULT_BYTES
                  : max_bytes > CO_PEEK_MAX_BYTES ? CO_PEEK_MAX_BYTES
                                                  : max_bytes;
    s.cap = rl__co_peek_cap(co);
    rl__co_move_prune(srv, after);
    rl_version durable = 0;
    int rc = rl__commitlog_read(co->log, after, peek_visit, &s, &durable);
    if (rc == RL_E_PROCESS_BEHIND) {
        send_error(co, conn, RL_MSG_PEEK, id, rc,
                   "the commit log no longer holds the versions after %" PRIu64 " (it was "
                   "truncated through %" PRIu64 "): register again",
                   after, rl__commitlog_base_version(co->log));
        return;
    }
    if (rc == RL_OK) rc = s.rc;
    if (rc != RL_OK) {
        send_error(co, conn, RL_MSG_PEEK, id, rc, "reading the commit log failed: %s", rl_error_name(rc));
        return;
    }
    for (size_t i = 0; i < s.nv; i++)
        co->pk_versions[i].muts = co->pk_muts + (size_t)(uintptr_t)co->pk_versions[i].muts;
    rl_msg m;
    memset(&m, 0, sizeof m);
    rl_version end = s.stopped ? s.last : durable;
    if (s.cap && end > s.cap) end = s.cap;
    m.u.peek_reply.end_version = end > after ? end : after;
    m.u.peek_reply.versions = co->pk_versions;
    m.u.peek_reply.n_versions = (uint32_t)s.nv;
    /* Ownership changes (coord_move.c) whose version this reply reaches. */
    rl_msg_shard_change *ch = srv->n_changes ? rl__arena_alloc(&co->scratch, srv->n_changes * sizeof *ch) : NULL;
    uint32_t nch = 0;
    for (uint32_t i = 0; ch && i < srv->n_changes; i++) {
        const co_change *c = &srv->changes[i];
        if (c->version <= after || c->version > m.u.peek_reply.end_version) continue;
        ch[nch++] = (rl_msg_shard_change){c->version, c->kind, {c->begin, c->begin_len, c->end, c->end_len}};
    }
    m.u.peek_reply.changes = ch;
    m.u.peek_reply.n_changes = nch;
    srv->peeks++;
    send_reply(co, conn, RL_MSG_PEEK, id, &m);
    if (co->pk_cap_muts > CO_PEEK_KEEP || co->pk_cap_versions > CO_PEEK_KEEP) {
        /* A catching-up server's large reply: do not keep its scratch for ever. */
        rl__free(co->pk_muts);
        rl__free(co->pk_versions);
        co->pk_muts = NULL;
        co->pk_versions = NULL;
        co->pk_cap_muts = co->pk_cap_versions = 0;
    }
}

/* Take a parked peek off the coordinator's list (it is not freed here). */
static void unpark(rl_coordinator *co, co_peek *pk) {
    if (pk->prev) pk->prev->next = pk->next;
    else co->parked = pk->next;
    if (pk->next) pk->next->prev = pk->prev;
    pk->srv->parked--;
}

/* max_wait_ms passed: answer the parked peek (normally with no versions) and free it. */
static void peek_timeout(rl_loop *loop, void *ud) {
    (void)loop;
    co_peek *pk = ud;
    rl_coordinator *co = pk->cc->co;
    unpark(co, pk);
    answer_peek(co, pk->cc->conn, pk->req_id, pk->srv, pk->after, pk->max_bytes);
    rl__free(pk);
}

/* Answer every parked peek that has something new (durable > its after_version). */
static void wake_parked(rl_coordinator *co, rl_version durable) {
    rl_version cap = rl__co_peek_cap(co);
    if (cap && durable > cap) durable = cap;
    co_peek *pk = co->parked;
    while (pk) {
        co_peek *next = pk->next;
        if (durable > pk->after) {
            rl__loop_timer_cancel(co->loop, pk->timer_id);
            unpark(co, pk);
            answer_peek(co, pk->cc->conn, pk->req_id, pk->srv, pk->after, pk->max_bytes);
            rl__free(pk);
        }
        pk = next;
    }
}

/* See coord_int.h. */
void rl__co_wake_peeks(rl_coordinator *co) {
    rl_version d = rl__commitlog_durable_version(co->log);
    co->notified = d;
    wake_parked(co, d);
}

/* Drop the parked peeks of connection cc (all of them when cc is NULL), unanswered. */
static void drop_parked_of(rl_coordinator *co, co_conn *cc) {
    co_peek *pk = co->parked;
    while (pk) {
        co_peek *next = pk->next;
        if (!cc || pk->cc == cc) {
            if (co->loop) rl__loop_timer_cancel(co->loop, pk->timer_id);
            unpark(co, pk);
            rl__free(pk);
        }
        pk = next;
    }
}

/* See coord_int.h. */
void rl__co_drop_parked(rl_coordinator *co) { drop_parked_of(co, NULL); }

/* The storage server a PEEK/POP names, if this connection may speak for it (its HELLO said
 * storage with that id, and it has registered); else an error reply and NULL. */
static co_server *storage_peer(co_conn *cc, const rl_frame_header *h, uint32_t id) {
    rl_coordinator *co = cc->co;
    if (cc->role != RL_ROLE_STORAGE || cc->id != id) {
        send_error(co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                   "%s for storage server %u on a connection whose HELLO said role %u id %u",
                   rl__msg_type_name(h->type), id, cc->role, cc->id);
        return NULL;
    }
    co_server *srv = rl__co_server(co, id);
    if (!srv || !srv->registered) {
        send_error(co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                   "storage server %u has not registered with this coordinator "
                   "(REGISTER_STORAGE first)",
                   id);
        return NULL;
    }
    return srv;
}

/* PEEK: record the server's peek (health), then answer now or park (docs/protocol.md §9). */
static void handle_peek(co_conn *cc, const rl_frame_header *h, const rl_msg_peek_req *p) {
    rl_coordinator *co = cc->co;
    co_server *srv = storage_peer(cc, h, p->storage_id);
    if (!srv) return;
    if (srv->peek_conn != cc->conn) {
        rl__conn_release(srv->peek_conn);
        rl__conn_retain(cc->conn);
        srv->peek_conn = cc->conn;
    }
    srv->last_peek_ns = rl__clock_mono_ns();
    rl_version avail = rl__commitlog_durable_version(co->log), cap = rl__co_peek_cap(co);
    if (cap && avail > cap) avail = cap;
    if (p->after_version < avail || p->max_wait_ms == 0) {
        answer_peek(co, cc->conn, h->id, srv, p->after_version, p->max_bytes);
        return;
    }
    co_peek *pk = rl__calloc(1, sizeof *pk);
    if (!pk) {
        send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "cannot park the PEEK");
        return;
    }
    pk->cc = cc;
    pk->req_id = h->id;
    pk->srv = srv;
    pk->after = p->after_version;
    pk->max_bytes = p->max_bytes;
    uint64_t deadline = srv->last_peek_ns + (uint64_t)p->max_wait_ms * 1000000ull;
    if (rl__loop_timer_add(co->loop, deadline, peek_timeout, pk, &pk->timer_id) != RL_OK) {
        rl__free(pk);
        send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "cannot park the PEEK");
        return;
    }
    pk->next = co->parked;
    if (co->parked) co->parked->prev = pk;
    co->parked = pk;
    srv->parked++;
}

/* POP: raise the server's popped version and truncate what every shard owner popped. */
static void handle_pop(co_conn *cc, const rl_frame_header *h, const rl_msg_pop_req *p) {
    rl_coordinator *co = cc->co;
    co_server *srv = storage_peer(cc, h, p->storage_id);
    if (!srv) return;
    rl_version durable = rl__commitlog_durable_version(co->log);
    rl_version v = p->durable_version < durable ? p->durable_version : durable;
    if (v > srv->popped) srv->popped = v;
    /* The log keeps a version until every server that owns a shard popped it. */
    rl_version min = durable;
    for (uint32_t i = 0; i < co->n_servers; i++)
        if ((co->servers[i].owns_shard || co->servers[i].n_extras) && co->servers[i].popped < min)
            min = co->servers[i].popped; /* a move's destination or source counts too */
    uint64_t deleted = 0;
    rl__commitlog_truncate(co->log, min, &deleted);
    if (deleted)
        rl__log(RL_LOG_INFO,
                "coordinator: truncated %" PRIu64 " commit log segments (every "
                "storage server popped %" PRIu64 ")",
                deleted, min);
    rl_msg m;
    memset(&m, 0, sizeof m);
    send_reply(co, cc->conn, RL_MSG_POP, h->id, &m);
}

/* ---- REGISTER_STORAGE ---------------------------------------------------------------------- */

static void handle_register(co_conn *cc, const rl_frame_header *h, const uint8_t *payload) {
    rl_coordinator *co = cc->co;
    rl_proto_why why;
    co_op *op = op_get(co, h->payload_len);
    if (!op) {
        send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    memcpy(op->payload, payload, h->payload_len);
    int rc = rl__msg_register_storage_req_decode(op->payload, h->payload_len, &op->arena, &op->reg, &why);
    if (rc != RL_OK) {
        op_put(co, op);
        if (rc == RL_E_MALFORMED_FRAME) bad_frame(cc, h, "%s", why.text);
        else send_error(co, cc->conn, h->type, h->id, rc, "%s", rl_error_name(rc));
        return;
    }
    const rl_msg_register_storage_req *r = &op->reg;
    co_server *srv = r->id ? rl__co_server(co, r->id) : NULL;
    rl_version base = rl__commitlog_base_version(co->log);
    if (cc->role != RL_ROLE_STORAGE || cc->id != r->id) {
        send_error(co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                   "REGISTER_STORAGE for storage server %u on a connection whose HELLO said role "
                   "%u id %u",
                   r->id, cc->role, cc->id);
    } else if (!srv) {
        send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT,
                   "storage server id %u is not in this cluster's layout (%u storage servers "
                   "known; see STATUS)",
                   r->id, co->n_servers);
    } else if (srv->registering) {
        send_error(co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                   "a registration of storage server %u is already being committed", r->id);
    } else if (srv->owns_shard && r->durable_version < base) {
        send_error(co, cc->conn, h->type, h->id, RL_E_PROCESS_BEHIND,
                   "storage server %u is durable at version %" PRIu64 " but the commit log was "
                   "truncated through version %" PRIu64 ": its data would have a hole",
                   r->id, r->durable_version, base);
    } else if ((rc = rl__co_build_register(co, op)) != RL_OK) {
        send_error(co, cc->conn, h->type, h->id, rc, "cannot build the registration: %s", rl_error_name(rc));
    } else {
        op->kind = CO_OP_REGISTER;
        op->srv = srv;
        op->req_id = h->id;
        rl__conn_retain(cc->conn);
        op->conn = cc->conn;
        /* What the log must keep for it from now on (also lowers it: a server whose engine lost
         * data must get its versions again). */
        srv->popped = r->durable_version;
        srv->registering = 1;
        if ((rc = rl__committer_submit(co->cm, &op->req, rl__co_op_done, op)) == RL_OK) return;
        srv->registering = 0;
        send_error(co, cc->conn, h->type, h->id, rc, "cannot submit the registration: %s", rl_error_name(rc));
    }
    op_put(co, op);
}

/* The loop's part of a finished REGISTER_STORAGE: record the server, answer it. */
static void finish_register(rl_coordinator *co, co_op *op) {
    co_server *srv = op->srv;
    const rl_msg_register_storage_req *r = &op->reg;
    srv->registering = 0;
    if (op->req.result != RL_OK) {
        send_error(co, op->conn, RL_MSG_REGISTER_STORAGE, op->req_id, op->req.result,
                   "registering storage server %u failed: %s", r->id, rl_error_name(op->req.result));
        return;
    }
    uint8_t *host = rl__malloc(r->host_len ? r->host_len : 1);
    if (host) {
        if (r->host_len) memcpy(host, r->host, r->host_len);
        rl__free(srv->host);
        srv->host = host;
        srv->host_len = r->host_len;
    }
    uint32_t al = r->address_len < sizeof srv->address - 1 ? r->address_len : sizeof srv->address - 1;
    memcpy(srv->address, r->address, al);
    srv->address[al] = 0;
    srv->port = r->port;
    srv->has_address = 1;
    srv->registered = 1;
    srv->registered_durable = r->durable_version;
    rl__log(RL_LOG_INFO,
            "coordinator: storage server %u registered from %s:%u, durable at "
            "version %" PRIu64 ", %u shards",
            r->id, srv->address, srv->port, r->durable_version, srv->n_owned);
    rl__co_move_on_register(co, srv, op->req.commit_version);
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.u.register_storage_reply.start_version = r->durable_version;
    m.u.register_storage_reply.ranges = srv->owned;
    m.u.register_storage_reply.n_ranges = srv->n_owned;
    send_reply(co, op->conn, RL_MSG_REGISTER_STORAGE, op->req_id, &m);
}

/* See coord_int.h: replies in completion order, then parked peeks woken by the new durable
 * version. Runs on the loop thread (and once more by close after the loop is freed). */
void rl__co_flush(rl_coordinator *co) {
    pthread_mutex_lock(&co->done_mu);
    co_op *op = co->done_head;
    co->done_head = co->done_tail = NULL;
    pthread_mutex_unlock(&co->done_mu);
    while (op) {
        co_op *next = op->next;
        if (op->kind == CO_OP_COMMIT) {
            rl_msg m;
            memset(&m, 0, sizeof m);
            m.u.commit_reply.result = op->req.result;
            m.u.commit_reply.commit_version = op->req.result == RL_OK ? op->req.commit_version : 0;
            m.u.commit_reply.batch_order = op->req.result == RL_OK ? op->req.batch_order : 0;
            if (op->req.result == RL_OK && op->req.commit_version) co->commits++;
            send_reply(co, op->conn, RL_MSG_COMMIT, op->req_id, &m);
        } else if (op->kind == CO_OP_MOVE) {
            rl__co_move_done(co, op); /* may answer parked peeks itself */
        } else if (op->kind == CO_OP_TICK) {
            co->tick_busy = 0;
            if (op->req.result == RL_OK) {
                co->ticks++;
                co->tick_version = op->req.commit_version;
            }
        } else {
            finish_register(co, op);
        }
        op_put(co, op);
        op = next;
    }
    if (!co->log) return; /* closing after a failed open */
    rl_version d = rl__commitlog_durable_version(co->log);
    if (d > co->notified) {
        co->notified = d;
        /* A batch of a tick's own leaves the tick's schedule as it was (it counts from the
         * tick's submission); any other batch puts the next tick an interval away. */
        if (d != co->tick_version) co->last_version_ns = rl__clock_mono_ns();
        wake_parked(co, d);
    }
}

/* See coord_int.h: flush (a failed post may have left completions queued), placement, the
 * version tick (a move that started waiting shortens its interval), and re-arm. */
void rl__co_housekeeping(rl_loop *loop, void *ud) {
    rl_coordinator *co = ud;
    rl__co_flush(co);
    rl__co_move_tick(co);
    rl__co_tick_check(co);
    if (rl__loop_timer_add(loop, rl__clock_mono_ns() + CO_HOUSEKEEPING_NS, rl__co_housekeeping, co,
                           &co->housekeeping_timer) != RL_OK)
        co->housekeeping_timer = 0;
}

/* ---- The version tick ---------------------------------------------------------------------- */

/* See coord_int.h. The window is in versions, about microseconds. */
uint64_t rl__co_tick_interval(const rl_coordinator *co) {
    uint64_t window = co->window_versions ? co->window_versions : 5000000;
    uint64_t ns = window / 4 * 1000;
    if (ns > CO_TICK_NS) ns = CO_TICK_NS;
    if (co->mv.active && co->mv.n_pending && ns > CO_HOUSEKEEPING_NS) ns = CO_HOUSEKEEPING_NS;
    if (ns < CO_TICK_MIN_NS) ns = CO_TICK_MIN_NS;
    return ns;
}

/* Submit one tick: an empty batch through the committer (answered in rl__co_flush). A failure
 * (out of memory) is retried at the next check. */
static void submit_tick(rl_coordinator *co) {
    co_op *op = op_get(co, 0);
    if (!op) return;
    memset(&op->req, 0, sizeof op->req);
    op->req.is_tick = 1;
    op->kind = CO_OP_TICK;
    op->conn = NULL;
    if (rl__committer_submit(co->cm, &op->req, rl__co_op_done, op) != RL_OK) {
        op_put(co, op);
        return;
    }
    co->tick_busy = 1;
}

/* The tick timer fired. */
static void tick_timer_fired(rl_loop *loop, void *ud) {
    (void)loop;
    rl_coordinator *co = ud;
    co->tick_timer = 0;
    rl__co_tick_check(co);
}

/* See coord_int.h. A tick still in the committer (an fdatasync longer than the interval) is
 * waited for: the check comes again an interval later. */
void rl__co_tick_check(rl_coordinator *co) {
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

/* ---- COMMIT ------------------------------------------------------------------------------- */

static void reply_commit_now(rl_coordinator *co, rl_conn *conn, uint64_t id, int result) {
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.u.commit_reply.result = result;
    send_reply(co, conn, RL_MSG_COMMIT, id, &m);
}

/* COMMIT: copy the payload into an operation, decode it there, check its system-key writes,
 * submit it; the reply comes from rl__co_flush (or now, for a refusal). */
static void handle_commit(co_conn *cc, const rl_frame_header *h, const uint8_t *payload) {
    rl_coordinator *co = cc->co;
    rl_proto_why why;
    rl_msg_commit_req m;
    co->commit_requests++;
    co_op *op = op_get(co, h->payload_len);
    if (!op) {
        reply_commit_now(co, cc->conn, h->id, RL_E_OUT_OF_MEMORY);
        return;
    }
    if (h->payload_len) memcpy(op->payload, payload, h->payload_len);
    int rc = rl__msg_commit_req_decode(op->payload, h->payload_len, &op->arena, &m, &why);
    if (rc != RL_OK) {
        op_put(co, op);
        if (rc == RL_E_MALFORMED_FRAME) bad_frame(cc, h, "%s", why.text);
        else reply_commit_now(co, cc->conn, h->id, rc);
        return;
    }
    size_t bad = 0;
    if ((rc = rl__co_check_mutations(m.muts, m.n_muts, &bad)) != RL_OK) {
        if (rc == RL_E_SYSTEM_KEY_WRITE) co->refused_system_writes++;
        op_put(co, op);
        reply_commit_now(co, cc->conn, h->id, rc);
        return;
    }
    memset(&op->req, 0, sizeof op->req);
    op->req.read_version = m.read_version;
    op->req.reads = m.reads;
    op->req.n_reads = m.n_reads;
    op->req.writes = m.writes;
    op->req.n_writes = m.n_writes;
    op->req.muts = m.muts;
    op->req.n_muts = m.n_muts;
    op->kind = CO_OP_COMMIT;
    op->req_id = h->id;
    rl__conn_retain(cc->conn);
    op->conn = cc->conn;
    if ((rc = rl__committer_submit(co->cm, &op->req, rl__co_op_done, op)) != RL_OK) {
        reply_commit_now(co, cc->conn, h->id, rc);
        op_put(co, op);
    }
}

/* ---- Reads of the system keyspace ---------------------------------------------------------- */

/* The version of DIR/sys to read for a client's read version v (see the contracts: reads at
 * v <= durable see v's data, which the system engine holds at min(v, its latest)). */
static int sys_version(rl_coordinator *co, rl_version v, rl_version *out) {
    rl_version d = rl__co_durable(co);
    uint64_t w = co->window_versions ? co->window_versions : 5000000;
    if (v > d) return RL_E_FUTURE_VERSION;
    if (d > w && v < d - w) return RL_E_TRANSACTION_TOO_OLD;
    rl_version latest = rl__storage_latest_version(co->sys);
    *out = v < latest ? v : latest;
    return RL_OK;
}

/* An error reply for a failed read, with the request's version. */
static void read_error(rl_coordinator *co, co_conn *cc, const rl_frame_header *h, int rc, rl_version v) {
    if (rc == RL_E_FUTURE_VERSION || rc == RL_E_TRANSACTION_TOO_OLD)
        send_error(co, cc->conn, h->type, h->id, rc,
                   "version %" PRIu64 " (the coordinator is "
                   "durable at %" PRIu64 ")",
                   v, rl__co_durable(co));
    else send_error(co, cc->conn, h->type, h->id, rc, "%s", rl_error_message(rc));
}

/* The error reply for a read outside the system keyspace. */
static void wrong_shard(rl_coordinator *co, co_conn *cc, const rl_frame_header *h) {
    send_error(co, cc->conn, h->type, h->id, RL_E_WRONG_SHARD_SERVER,
               "the coordinator holds only the system keyspace [\\xff, \\xff\\xff)");
}

/* GET of a system key at a version. */
static void handle_get(co_conn *cc, const rl_frame_header *h, const rl_msg_get_req *g) {
    rl_coordinator *co = cc->co;
    if (rl__bytes_cmp(g->key, g->key_len, k_ff, 1) < 0 || rl__bytes_cmp(g->key, g->key_len, k_ffff, 2) >= 0) {
        wrong_shard(co, cc, h);
        return;
    }
    rl_version sv;
    int rc = sys_version(co, g->version, &sv), present = 0;
    const uint8_t *val = NULL;
    uint32_t vl = 0;
    if (rc == RL_OK) rc = rl__storage_get(co->sys, sv, g->key, g->key_len, &co->scratch, &present, &val, &vl);
    if (rc != RL_OK) {
        read_error(co, cc, h, rc, g->version);
        return;
    }
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.u.get_reply.present = (uint8_t)present;
    m.u.get_reply.value = present ? val : NULL;
    m.u.get_reply.value_len = present ? vl : 0;
    send_reply(co, cc->conn, RL_MSG_GET, h->id, &m);
}

/* GET_KEY: resolve the selector within ["\xff", "\xff\xff") (unresolved below "\xff"). */
static void handle_get_key(co_conn *cc, const rl_frame_header *h, const rl_msg_get_key_req *g) {
    rl_coordinator *co = cc->co;
    rl_version sv;
    rl_select_result r;
    int rc = sys_version(co, g->version, &sv);
    if (rc == RL_OK) rc = rl__storage_select(co->sys, sv, &g->sel, k_ff, 1, 0, k_ffff, 2, 1, &co->scratch, &r);
    if (rc == RL_E_WRONG_SHARD_SERVER) {
        wrong_shard(co, cc, h);
        return;
    }
    if (rc != RL_OK) {
        read_error(co, cc, h, rc, g->version);
        return;
    }
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.u.get_key_reply.resolved = (uint8_t)(r.resolved != 0);
    m.u.get_key_reply.sel.key = r.key;
    m.u.get_key_reply.sel.key_len = r.key_len;
    m.u.get_key_reply.sel.or_equal = 0;
    m.u.get_key_reply.sel.offset = r.resolved ? 1 : r.offset;
    send_reply(co, cc->conn, RL_MSG_GET_KEY, h->id, &m);
}

/* Whether a range read belongs to the system shard: forward reads go to the shard holding the
 * begin selector's anchor (key, or key + "\x00" with or_equal), reverse reads to the shard
 * holding the key just below the end selector's anchor. For the shard ["\xff", "\xff\xff"):
 * anchor >= "\xff" iff key >= "\xff" (a key below "\xff" stays below with "\x00" appended);
 * anchor > "\xff" iff key > "\xff", or key >= "\xff" with or_equal. */
static int range_is_ours(const rl_msg_get_range_req *g) {
    if (!g->reverse) return rl__bytes_cmp(g->begin.key, g->begin.key_len, k_ff, 1) >= 0;
    int c = rl__bytes_cmp(g->end.key, g->end.key_len, k_ff, 1);
    return c > 0 || (c == 0 && g->end.or_equal);
}

/* GET_RANGE within the system shard: bounds resolved and clipped there, rows up to the limits
 * (and 8 MiB), read_through "\xff" when a reverse range goes on below it. */
static void handle_get_range(co_conn *cc, const rl_frame_header *h, const rl_msg_get_range_req *g) {
    rl_coordinator *co = cc->co;
    if (!range_is_ours(g)) {
        wrong_shard(co, cc, h);
        return;
    }
    rl_version sv;
    rl_range_bounds bd;
    int rc = sys_version(co, g->version, &sv);
    if (rc == RL_OK)
        rc = rl__storage_range_bounds(co->sys, sv, &g->begin, &g->end, k_ff, 1, 0, k_ffff, 2, 1, g->reverse,
                                      &co->scratch, &bd);
    if (rc != RL_OK) {
        read_error(co, cc, h, rc, g->version);
        return;
    }
    rl_msg m;
    memset(&m, 0, sizeof m);
    rl_msg_get_range_reply *r = &m.u.get_range_reply;
    if (bd.unresolved) {
        r->status = RL_RANGE_SELECTOR_UNRESOLVED;
        send_reply(co, cc->conn, RL_MSG_GET_RANGE, h->id, &m);
        return;
    }
    r->resolved_begin = bd.rbegin;
    r->resolved_begin_len = bd.rbegin_len;
    r->resolved_end = bd.rend;
    r->resolved_end_len = bd.rend_len;
    int more = 0;
    if (rl__bytes_cmp(bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len) < 0) {
        long target =
            g->target_bytes == 0 || g->target_bytes > CO_READ_MAX_BYTES ? CO_READ_MAX_BYTES : (long)g->target_bytes;
        rl_keyvalue *kvs = NULL;
        int n = 0;
        rc = rl__storage_get_range(co->sys, sv, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len, g->limit, target,
                                   g->reverse, &co->scratch, &kvs, &n, &more);
        if (rc != RL_OK) {
            read_error(co, cc, h, rc, g->version);
            return;
        }
        r->kvs = kvs;
        r->n_kvs = (uint32_t)n;
    }
    r->more = (uint8_t)(more != 0);
    /* The range goes on below "\xff" (reverse) on the user shards: say where this one stopped.
     * Forward, the system shard ends the keyspace. */
    if (!more && bd.read_through && g->reverse) {
        r->read_through = k_ff;
        r->read_through_len = 1;
    }
    send_reply(co, cc->conn, RL_MSG_GET_RANGE, h->id, &m);
}

/* ---- GET_SHARD_MAP, STATUS, HELLO, PING, GRV ---------------------------------------------- */

static void handle_shard_map(co_conn *cc, const rl_frame_header *h) {
    rl_coordinator *co = cc->co;
    uint64_t now = rl__clock_mono_ns();
    rl_msg_server *sv = rl__arena_alloc(&co->scratch, (co->n_servers + 1) * sizeof *sv);
    rl_msg_shard *sh = rl__arena_alloc(&co->scratch, (co->n_shards + 1) * sizeof *sh);
    if (!sv || !sh) {
        send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    uint32_t n = 0;
    sv[n++] = (rl_msg_server){0,
                              RL_ROLE_COORDINATOR,
                              (const uint8_t *)co->listen_ip,
                              (uint32_t)strlen(co->listen_ip),
                              co->port,
                              (const uint8_t *)co->host,
                              co->host_len,
                              1};
    for (uint32_t i = 0; i < co->n_servers; i++) {
        const co_server *s = &co->servers[i];
        if (!s->has_address) continue;
        sv[n++] = (rl_msg_server){s->id,
                                  RL_ROLE_STORAGE,
                                  (const uint8_t *)s->address,
                                  (uint32_t)strlen(s->address),
                                  s->port,
                                  s->host,
                                  s->host_len,
                                  (uint8_t)rl__co_server_healthy(co, s, now)};
    }
    for (uint32_t i = 0; i < co->n_shards; i++)
        sh[i] = (rl_msg_shard){co->shards[i].begin,   co->shards[i].begin_len, co->shards[i].end,
                               co->shards[i].end_len, co->shards[i].team,      co->shards[i].n_team};
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.u.get_shard_map_reply.version = rl__co_durable(co);
    m.u.get_shard_map_reply.servers = sv;
    m.u.get_shard_map_reply.n_servers = n;
    m.u.get_shard_map_reply.shards = sh;
    m.u.get_shard_map_reply.n_shards = co->n_shards;
    m.u.get_shard_map_reply.delay_us = co->delay_us; /* the client's links take the cluster's delay */
    m.u.get_shard_map_reply.jitter_us = co->jitter_us;
    send_reply(co, cc->conn, RL_MSG_GET_SHARD_MAP, h->id, &m);
}

/* Append p[0..n) as a JSON string: quote, backslash and control bytes escaped, bytes >= 0x80 as
 * \u00XX (so the document is valid JSON whatever the label holds). */
static void json_bytes(rl_buf *b, const uint8_t *p, size_t n) {
    rl__buf_append_byte(b, '"');
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if (c == '"' || c == '\\') rl__buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) rl__buf_printf(b, "\\u%04x", c);
        else rl__buf_append_byte(b, c);
    }
    rl__buf_append_byte(b, '"');
}

/* The lateness of every delayed frame this process sent: the open connections' histograms plus
 * those of the connections that closed. */
static void delay_lateness(rl_coordinator *co, rl_lat_hist *out) {
    *out = co->closed_late;
    for (co_conn *c = co->conns; c; c = c->next) {
        if (!c->delayed) continue;
        rl_lat_hist h;
        rl__conn_get_lateness(c->conn, &h, 0);
        rl__lat_hist_merge(out, &h);
    }
}

void rl__co_margin_for_delay(rl_coordinator *co) {
    if (co->delay_us || co->jitter_us) rl__loop_set_margin_bounds(co->loop, 20, 200);
    else rl__loop_set_margin_bounds(co->loop, 0, 0);
}

/* SET_DELAY: check the range, then give every delayed connection (and later ones) the new
 * setting. Frames already queued keep their release times (loop.h), so nothing is reordered. */
static void handle_set_delay(co_conn *cc, const rl_frame_header *h, const rl_msg_set_delay_req *r) {
    rl_coordinator *co = cc->co;
    char why[160];
    if (cc->role != RL_ROLE_ADMIN) {
        send_error(co, cc->conn, h->type, h->id, RL_E_UNAUTHORIZED_ATTEMPT,
                   "SET_DELAY is an admin request (HELLO role 3, with the cluster's key file); this connection's "
                   "HELLO said role %u",
                   cc->role);
        return;
    }
    if (rl__netem_check(r->delay_us, r->jitter_us, why, sizeof why) != RL_OK) {
        send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT, "SET_DELAY: %s", why);
        return;
    }
    co->delay_us = r->delay_us;
    co->jitter_us = r->jitter_us;
    rl__co_margin_for_delay(co);
    for (co_conn *c = co->conns; c; c = c->next)
        if (c->delayed) (void)rl__netem_set(c->conn, co->delay_us, co->jitter_us, co->delay_salt++);
    rl__log(RL_LOG_INFO, "coordinator: injected delay now %u us (jitter %u us), asked by %s", r->delay_us, r->jitter_us,
            rl__conn_peer(cc->conn));
    rl_msg m;
    memset(&m, 0, sizeof m);
    send_reply(co, cc->conn, RL_MSG_SET_DELAY, h->id, &m);
}

/* STATUS: the contract's JSON and the coordinator's own counters (docs/protocol.md §9). */
static void handle_status(co_conn *cc, const rl_frame_header *h) {
    rl_coordinator *co = cc->co;
    uint64_t now = rl__clock_mono_ns();
    rl_commitlog_status ls;
    rl_committer_stats cs;
    rl_storage_status ss;
    rl__commitlog_get_status(co->log, &ls);
    rl__committer_get_stats(co->cm, &cs);
    rl__storage_get_status(co->sys, &ss);
    rl_buf j;
    rl__buf_init(&j);
    rl__buf_printf(&j, "{\"role\":\"coordinator\",\"id\":0,\"host\":");
    json_bytes(&j, (const uint8_t *)co->host, co->host_len);
    rl__buf_printf(&j,
                   ",\"pid\":%ld,\"address\":\"%s\",\"port\":%u,\"committed_version\":%" PRIu64
                   ",\"durable_version\":%" PRIu64 ",\"log_bytes\":%" PRIu64 ",\"log_records\":%" PRIu64
                   ",\"log_segments\":%" PRIu64 ",\"log_base_version\":%" PRIu64 ",\"log_poisoned\":%s"
                   ",\"system_version\":%" PRIu64 ",\"system_keys\":%" PRIu64 ",\"no_sync\":%s,\"uptime_s\":%.3f,",
                   (long)getpid(), co->listen_ip, co->port, ls.appended_version, rl__co_durable(co), ls.bytes,
                   ls.records, ls.segments, ls.base_version, ls.poisoned ? "true" : "false", ss.latest_version, ss.keys,
                   co->no_sync ? "true" : "false", (double)(now - co->start_ns) / 1e9);
    rl_lat_hist late;
    delay_lateness(co, &late);
    rl__netem_status_json(&j, co->delay_us, co->jitter_us, &late);
    rl__buf_printf(&j, ",\"servers\":[");
    for (uint32_t i = 0; i < co->n_servers; i++) {
        const co_server *s = &co->servers[i];
        rl__buf_printf(&j, "%s{\"id\":%u,\"address\":\"%s\",\"port\":%u,\"host\":", i ? "," : "", s->id,
                       s->has_address ? s->address : "", s->has_address ? s->port : 0);
        json_bytes(&j, s->host, s->host_len);
        rl__buf_printf(&j,
                       ",\"healthy\":%s,\"registered\":%s,\"popped_version\":%" PRIu64
                       ",\"registered_durable_version\":%" PRIu64 ",\"owns_shard\":%s"
                       ",\"peeks\":%" PRIu64 ",\"parked\":%u}",
                       rl__co_server_healthy(co, s, now) ? "true" : "false", s->registered ? "true" : "false",
                       s->popped, s->registered_durable, s->owns_shard ? "true" : "false", s->peeks, s->parked);
    }
    rl__buf_printf(&j, "],\"shards\":[");
    for (uint32_t i = 0; i < co->n_shards; i++) {
        const co_shard *s = &co->shards[i];
        rl__buf_printf(&j, "%s{\"begin\":\"", i ? "," : "");
        rl__buf_append_hex(&j, s->begin, s->begin_len);
        rl__buf_printf(&j, "\",\"end\":\"");
        rl__buf_append_hex(&j, s->end, s->end_len);
        rl__buf_printf(&j, "\",\"team\":[");
        for (uint32_t t = 0; t < s->n_team; t++) rl__buf_printf(&j, "%s%u", t ? "," : "", s->team[t]);
        rl__buf_printf(&j, "]}");
    }
    rl__buf_printf(&j,
                   "],\"commits\":%" PRIu64 ",\"conflicts\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"ticks\":%" PRIu64
                   ",\"tick_interval_us\":%" PRIu64 ",\"commit_requests\":%" PRIu64
                   ",\"refused_system_writes\":%" PRIu64 ",\"connections\":%u,\"protocol_errors\":%" PRIu64
                   ",\"committer_poisoned\":%s"
                   ",\"recovery\":{\"log_tail\":\"%s\"",
                   co->commits, cs.conflicts, cs.batches, co->ticks, rl__co_tick_interval(co) / 1000,
                   co->commit_requests, co->refused_system_writes, co->n_conns, co->protocol_errors,
                   cs.poisoned ? "true" : "false", rl__storage_tail_name(ls.recovery_tail));
    if (ls.recovery_tail != RL_TAIL_CLEAN) {
        rl__buf_printf(&j, ",\"segment\":");
        json_bytes(&j, (const uint8_t *)ls.recovery_segment, strlen(ls.recovery_segment));
        rl__buf_printf(&j, ",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"moved_to\":", ls.recovery_tail_offset,
                       ls.recovery_tail_bytes);
        json_bytes(&j, (const uint8_t *)ls.recovery_moved_to, strlen(ls.recovery_moved_to));
    }
    rl__buf_printf(&j, "}");
    rl__net_status_json(&j, co->loop);
    rl__co_move_status(co, &j);
    rl__buf_printf(&j, "}");
    if (rl__buf_error(&j) != RL_OK) {
        send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
    } else {
        rl_msg m;
        memset(&m, 0, sizeof m);
        m.u.status_reply.json = j.data;
        m.u.status_reply.json_len = (uint32_t)j.len;
        send_reply(co, cc->conn, RL_MSG_STATUS, h->id, &m);
    }
    rl__buf_release(&j);
}

/* HELLO: remember the peer's role and id, answer with ours; a second HELLO is a protocol
 * error. */
static void handle_hello(co_conn *cc, const rl_frame_header *h, const rl_msg_hello_req *hr) {
    rl_coordinator *co = cc->co;
    if (cc->hello) {
        bad_frame(cc, h, "a second HELLO");
        return;
    }
    if (hr->role != RL_ROLE_CLIENT && rl__conn_auth_class(cc->conn) != RL_AUTH_MEMBER) {
        /* Serving as a storage server, the log, admin requests: the key file's secret only. */
        rl__log(RL_LOG_WARN, "coordinator: %s asked for role %u with the client key only: refused",
                rl__conn_peer(cc->conn), hr->role);
        send_error(co, cc->conn, h->type, h->id, RL_E_UNAUTHORIZED_ATTEMPT,
                   "role %u (storage server or admin) needs the cluster's key file; this connection proved only "
                   "the cluster file",
                   hr->role);
        co->protocol_errors++;
        rl__conn_close(cc->conn, RL_CONN_CLOSE_FLUSH);
        return;
    }
    cc->hello = 1;
    cc->role = hr->role;
    cc->id = hr->id;
    /* A peer on another host gets the delay from this reply on (before the first frame we send). */
    cc->delayed = rl__netem_applies(co->host, co->host_len, hr->host, hr->host_len, hr->role);
    if (cc->delayed && (co->delay_us || co->jitter_us))
        (void)rl__netem_set(cc->conn, co->delay_us, co->jitter_us, co->delay_salt++);
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.u.hello_reply.protocol_version = RL_PROTOCOL_VERSION;
    m.u.hello_reply.role = RL_ROLE_COORDINATOR;
    m.u.hello_reply.id = 0;
    m.u.hello_reply.host = (const uint8_t *)co->host;
    m.u.hello_reply.host_len = co->host_len;
    send_reply(co, cc->conn, RL_MSG_HELLO, h->id, &m);
}

/* ---- Connections ------------------------------------------------------------------------- */

static void on_frame(rl_conn *conn, const rl_frame_header *h, const uint8_t *payload, void *ud) {
    co_conn *cc = ud;
    rl_coordinator *co = cc->co;
    (void)conn;
    rl__arena_reset(&co->scratch);
    if (h->flags != 0) {
        bad_frame(cc, h, "a reply where a request was expected");
        return;
    }
    if (!cc->hello && h->type != RL_MSG_HELLO) {
        bad_frame(cc, h, "a request before HELLO");
        return;
    }
    if (cc->hello && h->type == RL_MSG_COMMIT) { /* decoded from its own copy */
        handle_commit(cc, h, payload);
        return;
    }
    if (cc->hello && h->type == RL_MSG_REGISTER_STORAGE) {
        handle_register(cc, h, payload);
        return;
    }
    rl_msg m;
    rl_proto_why why;
    int rc = rl__msg_decode(h->type, h->flags, payload, h->payload_len, &co->scratch, &m, &why);
    if (rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION && h->type == RL_MSG_HELLO) {
        rl__log(RL_LOG_WARN,
                "coordinator: refusing the handshake of %s: magic 0x%08x protocol "
                "version %u (this coordinator speaks 0x%08x version %u)",
                rl__conn_peer(cc->conn), m.u.hello_req.magic, m.u.hello_req.protocol_version, RL_PROTOCOL_MAGIC,
                RL_PROTOCOL_VERSION);
        send_error(co, cc->conn, h->type, h->id, RL_E_INCOMPATIBLE_PROTOCOL_VERSION,
                   "this coordinator speaks protocol version %u (magic 0x%08x); the HELLO had "
                   "magic 0x%08x version %u",
                   RL_PROTOCOL_VERSION, RL_PROTOCOL_MAGIC, m.u.hello_req.magic, m.u.hello_req.protocol_version);
        co->protocol_errors++;
        rl__conn_close(cc->conn, RL_CONN_CLOSE_FLUSH);
        return;
    }
    if (rc == RL_E_OUT_OF_MEMORY) {
        send_error(co, cc->conn, h->type, h->id, rc, "out of memory decoding the request");
        return;
    }
    if (rc != RL_OK) {
        bad_frame(cc, h, "%s", why.text);
        return;
    }
    switch (h->type) {
    case RL_MSG_HELLO: handle_hello(cc, h, &m.u.hello_req); break;
    case RL_MSG_PING: {
        rl_msg r;
        memset(&r, 0, sizeof r);
        r.u.ping_reply.payload = m.u.ping_req.payload;
        r.u.ping_reply.payload_len = m.u.ping_req.payload_len;
        r.u.ping_reply.server_mono_ns = rl__clock_mono_ns();
        send_reply(co, cc->conn, RL_MSG_PING, h->id, &r);
        break;
    }
    case RL_MSG_GET_READ_VERSION: {
        rl_msg r;
        memset(&r, 0, sizeof r);
        r.u.get_read_version_reply.version = rl__co_durable(co);
        send_reply(co, cc->conn, RL_MSG_GET_READ_VERSION, h->id, &r);
        break;
    }
    case RL_MSG_GET_SHARD_MAP: handle_shard_map(cc, h); break;
    case RL_MSG_SET_DELAY: handle_set_delay(cc, h, &m.u.set_delay_req); break;
    case RL_MSG_PEEK: handle_peek(cc, h, &m.u.peek_req); break;
    case RL_MSG_POP: handle_pop(cc, h, &m.u.pop_req); break;
    case RL_MSG_STATUS: handle_status(cc, h); break;
    case RL_MSG_GET: handle_get(cc, h, &m.u.get_req); break;
    case RL_MSG_GET_KEY: handle_get_key(cc, h, &m.u.get_key_req); break;
    case RL_MSG_GET_RANGE: handle_get_range(cc, h, &m.u.get_range_req); break;
    case RL_MSG_SPLIT_SHARD:
    case RL_MSG_ASSIGN_SHARD:
        if (cc->role != RL_ROLE_ADMIN) {
            send_error(co, cc->conn, h->type, h->id, RL_E_UNAUTHORIZED_ATTEMPT,
                       "%s is an admin request (HELLO role 3, with the cluster's key file); this connection's "
                       "HELLO said role %u",
                       rl__msg_type_name(h->type), cc->role);
            break;
        }
        rl__co_move_request(co, cc, h, &m);
        break;
    case RL_MSG_MOVE_SHARD: rl__co_move_request(co, cc, h, &m); break;
    case RL_MSG_GET_MAPPED_RANGE:
    case RL_MSG_GET_MULTI:
        send_error(co, cc->conn, h->type, h->id, RL_E_UNSUPPORTED_OPERATION,
                   "%s is served by storage servers, not the coordinator", rl__msg_type_name(h->type));
        break;
    default: /* rl__msg_decode accepts only known types */
        bad_frame(cc, h, "a message the coordinator does not serve");
        break;
    }
}

/* A connection closed: drop its parked peeks and its servers' health, free its state. */
static void on_close(rl_conn *conn, int err, void *ud) {
    co_conn *cc = ud;
    rl_coordinator *co = cc->co;
    (void)err;
    if (cc->delayed) {
        rl_lat_hist late;
        rl__conn_get_lateness(conn, &late, 0);
        rl__lat_hist_merge(&co->closed_late, &late);
    }
    drop_parked_of(co, cc);
    for (uint32_t i = 0; i < co->n_servers; i++)
        if (co->servers[i].peek_conn == conn) {
            rl__conn_release(conn);
            co->servers[i].peek_conn = NULL;
        }
    if (cc->prev) cc->prev->next = cc->next;
    else co->conns = cc->next;
    if (cc->next) cc->next->prev = cc->prev;
    co->n_conns--;
    rl__conn_release(conn);
    rl__free(cc);
}

/* See coord_int.h: a co_conn per connection, on the coordinator's list until on_close. */
void rl__co_on_accept(rl_listener *l, rl_conn *conn, void *ud) {
    (void)l;
    rl_coordinator *co = ud;
    co_conn *cc = rl__calloc(1, sizeof *cc);
    if (!cc) {
        rl__log(RL_LOG_ERROR, "coordinator: out of memory accepting %s", rl__conn_peer(conn));
        rl__conn_close(conn, 0);
        rl__conn_release(conn);
        return;
    }
    cc->co = co;
    cc->conn = conn;
    cc->next = co->conns;
    if (co->conns) co->conns->prev = cc;
    co->conns = cc;
    co->n_conns++;
    rl__conn_set_callbacks(conn, on_frame, on_close, cc);
}
