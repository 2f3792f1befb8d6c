/* coord_net.c — the coordinator's connections and request handlers (docs/protocol.md §9): a part
 * of the coordinator (coord_int.h, "The files").
 *
 * Every connection is served on the loop thread. A frame is handled in on_frame, through the
 * request table (coord_requests.def) and what net/messages.def says of each message:
 *
 *   flags != 0 (a reply or error reply)  -> protocol error: log, close the connection
 *   no HELLO yet and type != HELLO       -> protocol error
 *   CO_RAW (COMMIT)                      -> its handler, which decodes its own copy
 *   payload does not decode, unknown or
 *   reserved type                        -> protocol error (the decoder's reason is logged); a
 *                                           HELLO of a foreign magic/version gets an error reply
 *                                           incompatible_protocol_version, then close
 *   no line in the table                 -> storage servers' (RL_MSGF_STORAGE: GET_MAPPED_RANGE,
 *                                           GET_MAPPED_STREAM, MAPPED_CREDIT, GET_MULTI): error
 *                                           reply unsupported_operation, kept
 *                                           open; anything else (AUTH …): protocol error
 *   RL_MSGF_ADMIN, not an admin HELLO    -> error reply unauthorized_attempt, kept open
 *   RL_MSGF_FROM_STORAGE, not the HELLO
 *   of the storage server it names       -> error reply client_invalid_operation, kept open
 *   then the handler:
 *   HELLO (once)                         -> HELLO reply (a second HELLO: protocol error)
 *   GET_READ_VERSION, GET_SHARD_MAP, STATUS, PING, GET, GET_KEY, GET_RANGE, SET_DELAY
 *                                        -> answered at once
 *   COMMIT, REGISTER_STORAGE             -> an operation (co_op) goes to the committer; its
 *                                           finish (commit_done, finish_register) replies when
 *                                           rl__co_flush runs it
 *   PEEK                                 -> answered at once when the log holds versions after
 *                                           after_version (or max_wait_ms is 0), else parked
 *                                           until a batch is durable or max_wait_ms passes
 *   POP                                  -> recorded; the log is truncated when it can be
 *   SPLIT_SHARD, ASSIGN_SHARD, MOVE_SHARD
 *                                        -> placement (coord_move.c)
 * A protocol error closes only that connection (docs/protocol.md §8); it is counted in STATUS.
 *
 * Injected delay (netem.h): the HELLO tells whether the peer is on another host; if so the
 * connection gets the current delay before the HELLO reply, the first frame sent on it, and
 * every later SET_DELAY. Admin connections are never delayed.
 *
 * Operation life cycle (co_op, coordinator.c):
 *     FRAME --copy payload, decode, check--> SUBMITTED --committer done (committer thread)-->
 *     QUEUED (co->done_*) --rl__co_flush (loop): its finish--> REPLIED --> back to the pool
 * An operation holds a reference to its connection; a reply to a connection that closed in
 * the meantime is dropped (rl__conn_send fails), never sent elsewhere.
 *
 * Parked peeks (co_peek) are answered by exactly one of: rl__co_wake_parked (through the core's
 * wake_parked hook: rl__co_flush when durable advanced, rl__co_wake_peeks when the PEEK barrier
 * lifted), their timer (max_wait_ms), or dropped when their connection closes.
 */
#include "server/coord_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
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

#define CO_PEEK_KEEP (1u << 16) /* PEEK scratch arrays larger than this are freed after use */

/* A protocol error: log it with the peer, the frame and why, and close this connection only. */
static void bad_frame(co_conn *cc, const rl__frame_header *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void bad_frame(co_conn *cc, const rl__frame_header *h, const char *fmt, ...) {
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

/* ---- PEEK -------------------------------------------------------------------------------- */

/* The index of the first range of r[0..n) whose end > key (n if none). */
static uint32_t first_range_ending_after(const rl__keyrange *r, uint32_t n, const uint8_t *k, uint32_t kl) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (rl__bytes_cmp(r[mid].end, r[mid].end_len, k, kl) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

typedef struct {
    rl__coordinator *co;
    const co_server *srv;
    size_t nv, nm;  /* versions and mutations collected */
    uint64_t bytes; /* their encoded mutation bytes */
    uint32_t max_bytes;
    rl__version last; /* the last version visited */
    rl__version cap;  /* versions above it are not sent (0: none; rl__co_peek_cap) */
    int stopped;      /* stopped at max_bytes or the cap */
    int rc;
} peek_state;

/* Append one mutation to the peek's array (index-based: the array may move). */
static int peek_push(peek_state *s, const rl__mutation *m) {
    rl__coordinator *co = s->co;
    if (RL_GROW(co->pk_muts, co->pk_cap_muts, s->nm + 1, 256)) return RL_E_OUT_OF_MEMORY;
    co->pk_muts[s->nm++] = *m;
    s->bytes += 9 + (uint64_t)m->len1 + m->len2;
    return RL_OK;
}

/* Visitor (log mutex held): keep the mutations of rec that touch the server's ranges, clear
 * ranges clipped to them; a version with none is skipped (end_version still covers it). */
static int peek_visit(void *ud, const rl__wal_record *rec) {
    peek_state *s = ud;
    rl__coordinator *co = s->co;
    const rl__keyrange *r = s->srv->merged;
    uint32_t nr = s->srv->n_merged;
    size_t start = s->nm;
    rl__wal_iter it;
    rl__mutation m;
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
            rl__mutation c = m;
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
            rl__mutation c = m;
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
        rl__msg_peek_version *v = &co->pk_versions[s->nv++];
        v->version = rec->version;
        v->muts = (const rl__mutation *)(uintptr_t)start; /* an index until the array is final */
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
static void answer_peek(rl__coordinator *co, rl__conn *conn, uint64_t id, co_server *srv, rl__version after,
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
    rl__version durable = 0;
    int rc = rl__commitlog_read(co->log, after, peek_visit, &s, &durable);
    if (rc == RL_E_PROCESS_BEHIND) {
        rl__co_send_error(co, conn, RL_MSG_PEEK, id, rc,
                          "the commit log no longer holds the versions after %" PRIu64 " (it was "
                          "truncated through %" PRIu64 "): register again",
                          after, rl__commitlog_base_version(co->log));
        return;
    }
    if (rc == RL_OK) rc = s.rc;
    if (rc != RL_OK) {
        rl__co_send_error(co, conn, RL_MSG_PEEK, id, rc, "reading the commit log failed: %s", rl_error_name(rc));
        return;
    }
    for (size_t i = 0; i < s.nv; i++)
        co->pk_versions[i].muts = co->pk_muts + (size_t)(uintptr_t)co->pk_versions[i].muts;
    rl__msg m;
    memset(&m, 0, sizeof m);
    rl__version end = s.stopped ? s.last : durable;
    if (s.cap && end > s.cap) end = s.cap;
    m.u.peek_reply.end_version = end > after ? end : after;
    m.u.peek_reply.versions = co->pk_versions;
    m.u.peek_reply.n_versions = (uint32_t)s.nv;
    /* Ownership changes (coord_move.c) whose version this reply reaches. */
    rl__msg_shard_change *ch = srv->n_changes ? rl__arena_alloc(&co->scratch, srv->n_changes * sizeof *ch) : NULL;
    uint32_t nch = 0;
    for (uint32_t i = 0; ch && i < srv->n_changes; i++) {
        const co_change *c = &srv->changes[i];
        if (c->version <= after || c->version > m.u.peek_reply.end_version) continue;
        ch[nch++] = (rl__msg_shard_change){c->version, c->kind, {c->begin, c->begin_len, c->end, c->end_len}};
    }
    m.u.peek_reply.changes = ch;
    m.u.peek_reply.n_changes = nch;
    srv->peeks++;
    rl__co_send_reply(co, conn, RL_MSG_PEEK, id, &m);
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
static void unpark(rl__coordinator *co, co_peek *pk) {
    if (pk->prev) pk->prev->next = pk->next;
    else co->parked = pk->next;
    if (pk->next) pk->next->prev = pk->prev;
    pk->srv->parked--;
}

/* max_wait_ms passed: answer the parked peek (normally with no versions) and free it. */
static void peek_timeout(rl__loop *loop, void *ud) {
    (void)loop;
    co_peek *pk = ud;
    rl__coordinator *co = pk->cc->co;
    unpark(co, pk);
    answer_peek(co, pk->cc->conn, pk->req_id, pk->srv, pk->after, pk->max_bytes);
    rl__free(pk);
}

/* Answer every parked peek that has something new (durable > its after_version, and below the
 * PEEK cap). See coord_int.h (co->wake_parked: the core and coord_move.c call it through the core). */
void rl__co_wake_parked(rl__coordinator *co, rl__version durable) {
    rl__version cap = rl__co_peek_cap(co);
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

/* Drop the parked peeks of connection cc (all of them when cc is NULL), unanswered. */
static void drop_parked_of(rl__coordinator *co, co_conn *cc) {
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
void rl__co_drop_parked(rl__coordinator *co) { drop_parked_of(co, NULL); }

/* The storage server a PEEK/POP names if it has registered (on_frame checked that this
 * connection speaks for it: RL_MSGF_FROM_STORAGE); else an error reply and NULL. */
static co_server *registered_server(co_conn *cc, const rl__frame_header *h, uint32_t id) {
    rl__coordinator *co = cc->co;
    co_server *srv = rl__co_server(co, id);
    if (!srv || !srv->registered) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                          "storage server %u has not registered with this coordinator "
                          "(REGISTER_STORAGE first)",
                          id);
        return NULL;
    }
    return srv;
}

/* PEEK: record the server's peek (health), then answer now or park (docs/protocol.md §9). */
static void handle_peek(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m) {
    rl__coordinator *co = cc->co;
    const rl__msg_peek_req *p = &m->u.peek_req;
    (void)payload;
    co_server *srv = registered_server(cc, h, p->storage_id);
    if (!srv) return;
    if (srv->peek_conn != cc->conn) {
        rl__conn_release(srv->peek_conn);
        rl__conn_retain(cc->conn);
        srv->peek_conn = cc->conn;
    }
    srv->last_peek_ns = rl__clock_mono_ns();
    rl__version avail = rl__commitlog_durable_version(co->log), cap = rl__co_peek_cap(co);
    if (cap && avail > cap) avail = cap;
    if (p->after_version < avail || p->max_wait_ms == 0) {
        answer_peek(co, cc->conn, h->id, srv, p->after_version, p->max_bytes);
        return;
    }
    co_peek *pk = rl__calloc(1, sizeof *pk);
    if (!pk) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "cannot park the PEEK");
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
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "cannot park the PEEK");
        return;
    }
    pk->next = co->parked;
    if (co->parked) co->parked->prev = pk;
    co->parked = pk;
    srv->parked++;
}

/* POP: raise the server's popped version and truncate what every shard owner popped. */
static void handle_pop(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m) {
    rl__coordinator *co = cc->co;
    const rl__msg_pop_req *p = &m->u.pop_req;
    (void)payload;
    co_server *srv = registered_server(cc, h, p->storage_id);
    if (!srv) return;
    rl__version durable = rl__commitlog_durable_version(co->log);
    rl__version v = p->durable_version < durable ? p->durable_version : durable;
    if (v > srv->popped) srv->popped = v;
    /* The log keeps a version until every server that owns a shard popped it. */
    rl__version min = durable;
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
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rl__co_send_reply(co, cc->conn, RL_MSG_POP, h->id, &rep);
}

/* ---- REGISTER_STORAGE ---------------------------------------------------------------------- */

static void finish_register(rl__coordinator *co, co_op *op);

/* REGISTER_STORAGE (from the storage server it names: on_frame checked): the request is decoded
 * again from the operation's own copy of the payload, which lives until the registration is
 * committed; then the layout, a registration in flight and the log's base are checked. */
static void handle_register(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *m) {
    rl__coordinator *co = cc->co;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    (void)m;
    co_op *op = rl__co_op_get(co, h->payload_len);
    if (!op) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    memcpy(op->payload, payload, h->payload_len);
    int rc = rl__msg_register_storage_req_decode(op->payload, h->payload_len, &op->arena, &op->reg, &why);
    if (rc != RL_OK) {
        rl__co_op_put(co, op);
        if (rc == RL_E_MALFORMED_FRAME) bad_frame(cc, h, "%s", rl__errdetail_get(&why));
        else rl__co_send_error(co, cc->conn, h->type, h->id, rc, "%s", rl_error_name(rc));
        return;
    }
    const rl__msg_register_storage_req *r = &op->reg;
    co_server *srv = r->id ? rl__co_server(co, r->id) : NULL;
    rl__version base = rl__commitlog_base_version(co->log);
    if (!srv) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT,
                          "storage server id %u is not in this cluster's layout (%u storage servers "
                          "known; see STATUS)",
                          r->id, co->n_servers);
    } else if (srv->registering) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                          "a registration of storage server %u is already being committed", r->id);
    } else if (srv->owns_shard && r->durable_version < base) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_PROCESS_BEHIND,
                          "storage server %u is durable at version %" PRIu64 " but the commit log was "
                          "truncated through version %" PRIu64 ": its data would have a hole",
                          r->id, r->durable_version, base);
    } else if ((rc = rl__co_build_register(co, op)) != RL_OK) {
        rl__co_send_error(co, cc->conn, h->type, h->id, rc, "cannot build the registration: %s", rl_error_name(rc));
    } else {
        op->finish = finish_register;
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
        rl__co_send_error(co, cc->conn, h->type, h->id, rc, "cannot submit the registration: %s", rl_error_name(rc));
    }
    rl__co_op_put(co, op);
}

/* The loop's part of a finished REGISTER_STORAGE (its finish, run by rl__co_flush): record the
 * server, answer it. */
static void finish_register(rl__coordinator *co, co_op *op) {
    co_server *srv = op->srv;
    const rl__msg_register_storage_req *r = &op->reg;
    srv->registering = 0;
    if (op->req.result != RL_OK) {
        rl__co_send_error(co, op->conn, RL_MSG_REGISTER_STORAGE, op->req_id, op->req.result,
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
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.register_storage_reply.start_version = r->durable_version;
    m.u.register_storage_reply.ranges = srv->owned;
    m.u.register_storage_reply.n_ranges = srv->n_owned;
    rl__co_send_reply(co, op->conn, RL_MSG_REGISTER_STORAGE, op->req_id, &m);
}

/* ---- COMMIT ------------------------------------------------------------------------------- */

static void reply_commit_now(rl__coordinator *co, rl__conn *conn, uint64_t id, int result) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.commit_reply.result = result;
    rl__co_send_reply(co, conn, RL_MSG_COMMIT, id, &m);
}

/* A COMMIT's batch is durable (or failed): its reply (the operation's finish, run by
 * rl__co_flush). */
static void commit_done(rl__coordinator *co, co_op *op) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.commit_reply.result = op->req.result;
    m.u.commit_reply.commit_version = op->req.result == RL_OK ? op->req.commit_version : 0;
    m.u.commit_reply.batch_order = op->req.result == RL_OK ? op->req.batch_order : 0;
    if (op->req.result == RL_OK && op->req.commit_version) co->commits++;
    rl__co_send_reply(co, op->conn, RL_MSG_COMMIT, op->req_id, &m);
}

/* COMMIT (CO_RAW: m is NULL): copy the payload into an operation, decode it there, check its
 * system-key writes, submit it; the reply comes from commit_done (or now, for a refusal). */
static void handle_commit(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *unused) {
    rl__coordinator *co = cc->co;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__msg_commit_req m;
    (void)unused;
    co->commit_requests++;
    co_op *op = rl__co_op_get(co, h->payload_len);
    if (!op) {
        reply_commit_now(co, cc->conn, h->id, RL_E_OUT_OF_MEMORY);
        return;
    }
    if (h->payload_len) memcpy(op->payload, payload, h->payload_len);
    int rc = rl__msg_commit_req_decode(op->payload, h->payload_len, &op->arena, &m, &why);
    if (rc != RL_OK) {
        rl__co_op_put(co, op);
        if (rc == RL_E_MALFORMED_FRAME) bad_frame(cc, h, "%s", rl__errdetail_get(&why));
        else reply_commit_now(co, cc->conn, h->id, rc);
        return;
    }
    size_t bad = 0;
    if ((rc = rl__co_check_mutations(m.muts, m.n_muts, &bad)) != RL_OK) {
        if (rc == RL_E_SYSTEM_KEY_WRITE) co->refused_system_writes++;
        rl__co_op_put(co, op);
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
    op->finish = commit_done;
    op->req_id = h->id;
    rl__conn_retain(cc->conn);
    op->conn = cc->conn;
    if ((rc = rl__committer_submit(co->cm, &op->req, rl__co_op_done, op)) != RL_OK) {
        reply_commit_now(co, cc->conn, h->id, rc);
        rl__co_op_put(co, op);
    }
}

/* ---- Reads of the system keyspace ---------------------------------------------------------- */

/* The version of DIR/sys to read for a client's read version v (see the contracts: reads at
 * v <= durable see v's data, which the system engine holds at min(v, its latest)). */
static int sys_version(rl__coordinator *co, rl__version v, rl__version *out) {
    rl__version d = rl__co_durable(co);
    uint64_t w = co->window_versions ? co->window_versions : 5000000;
    if (v > d) return RL_E_FUTURE_VERSION;
    if (d > w && v < d - w) return RL_E_TRANSACTION_TOO_OLD;
    rl__version latest = rl__storage_latest_version(co->sys);
    *out = v < latest ? v : latest;
    return RL_OK;
}

/* An error reply for a failed read, with the request's version. */
static void read_error(rl__coordinator *co, co_conn *cc, const rl__frame_header *h, int rc, rl__version v) {
    if (rc == RL_E_FUTURE_VERSION || rc == RL_E_TRANSACTION_TOO_OLD)
        rl__co_send_error(co, cc->conn, h->type, h->id, rc,
                          "version %" PRIu64 " (the coordinator is "
                          "durable at %" PRIu64 ")",
                          v, rl__co_durable(co));
    else rl__co_send_error(co, cc->conn, h->type, h->id, rc, "%s", rl_error_message(rc));
}

/* The error reply for a read outside the system keyspace. */
static void wrong_shard(rl__coordinator *co, co_conn *cc, const rl__frame_header *h) {
    rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_WRONG_SHARD_SERVER,
                      "the coordinator holds only the system keyspace [\\xff, \\xff\\xff)");
}

/* GET of a system key at a version. */
static void handle_get(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    const rl__msg_get_req *g = &req->u.get_req;
    (void)payload;
    if (rl__bytes_cmp(g->key, g->key_len, k_ff, 1) < 0 || rl__bytes_cmp(g->key, g->key_len, k_ffff, 2) >= 0) {
        wrong_shard(co, cc, h);
        return;
    }
    rl__version sv;
    int rc = sys_version(co, g->version, &sv), present = 0;
    const uint8_t *val = NULL;
    uint32_t vl = 0;
    if (rc == RL_OK) rc = rl__storage_get(co->sys, sv, g->key, g->key_len, &co->scratch, &present, &val, &vl);
    if (rc != RL_OK) {
        read_error(co, cc, h, rc, g->version);
        return;
    }
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.get_reply.present = (uint8_t)present;
    m.u.get_reply.value = present ? val : NULL;
    m.u.get_reply.value_len = present ? vl : 0;
    rl__co_send_reply(co, cc->conn, RL_MSG_GET, h->id, &m);
}

/* GET_KEY: resolve the selector within ["\xff", "\xff\xff") (unresolved below "\xff"). */
static void handle_get_key(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    const rl__msg_get_key_req *g = &req->u.get_key_req;
    (void)payload;
    rl__version sv;
    rl__select_result r;
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
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.get_key_reply.resolved = (uint8_t)(r.resolved != 0);
    m.u.get_key_reply.sel.key = r.key;
    m.u.get_key_reply.sel.key_len = r.key_len;
    m.u.get_key_reply.sel.or_equal = 0;
    m.u.get_key_reply.sel.offset = r.resolved ? 1 : r.offset;
    rl__co_send_reply(co, cc->conn, RL_MSG_GET_KEY, h->id, &m);
}

/* Whether a range read belongs to the system shard: forward reads go to the shard holding the
 * begin selector's anchor (key, or key + "\x00" with or_equal), reverse reads to the shard
 * holding the key just below the end selector's anchor. For the shard ["\xff", "\xff\xff"):
 * anchor >= "\xff" iff key >= "\xff" (a key below "\xff" stays below with "\x00" appended);
 * anchor > "\xff" iff key > "\xff", or key >= "\xff" with or_equal. */
static int range_is_ours(const rl__msg_get_range_req *g) {
    if (!g->reverse) return rl__bytes_cmp(g->begin.key, g->begin.key_len, k_ff, 1) >= 0;
    int c = rl__bytes_cmp(g->end.key, g->end.key_len, k_ff, 1);
    return c > 0 || (c == 0 && g->end.or_equal);
}

/* GET_RANGE within the system shard: bounds resolved and clipped there, rows up to the limits
 * (and 8 MiB), read_through "\xff" when a reverse range goes on below it. */
static void handle_get_range(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    const rl__msg_get_range_req *g = &req->u.get_range_req;
    (void)payload;
    if (!range_is_ours(g)) {
        wrong_shard(co, cc, h);
        return;
    }
    rl__version sv;
    rl__range_bounds bd;
    int rc = sys_version(co, g->version, &sv);
    if (rc == RL_OK)
        rc = rl__storage_range_bounds(co->sys, sv, &g->begin, &g->end, k_ff, 1, 0, k_ffff, 2, 1, g->reverse,
                                      &co->scratch, &bd);
    if (rc != RL_OK) {
        read_error(co, cc, h, rc, g->version);
        return;
    }
    rl__msg m;
    memset(&m, 0, sizeof m);
    rl__msg_get_range_reply *r = &m.u.get_range_reply;
    if (bd.unresolved) {
        r->status = RL_RANGE_SELECTOR_UNRESOLVED;
        rl__co_send_reply(co, cc->conn, RL_MSG_GET_RANGE, h->id, &m);
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
    rl__co_send_reply(co, cc->conn, RL_MSG_GET_RANGE, h->id, &m);
}

/* ---- GET_SHARD_MAP, STATUS, HELLO, PING, GRV ---------------------------------------------- */

/* GET_SHARD_MAP: the map now (min_version is not waited for: docs/protocol.md §9). */
static void handle_shard_map(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    (void)payload;
    (void)req;
    uint64_t now = rl__clock_mono_ns();
    rl__msg_server *sv = rl__arena_alloc(&co->scratch, (co->n_servers + 1) * sizeof *sv);
    rl__msg_shard *sh = rl__arena_alloc(&co->scratch, (co->n_shards + 1) * sizeof *sh);
    if (!sv || !sh) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    uint32_t n = 0;
    sv[n++] = (rl__msg_server){0,
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
        sv[n++] = (rl__msg_server){s->id,
                                   RL_ROLE_STORAGE,
                                   (const uint8_t *)s->address,
                                   (uint32_t)strlen(s->address),
                                   s->port,
                                   s->host,
                                   s->host_len,
                                   (uint8_t)rl__co_server_healthy(co, s, now)};
    }
    for (uint32_t i = 0; i < co->n_shards; i++)
        sh[i] = (rl__msg_shard){co->shards[i].begin,   co->shards[i].begin_len, co->shards[i].end,
                                co->shards[i].end_len, co->shards[i].team,      co->shards[i].n_team};
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.get_shard_map_reply.version = rl__co_durable(co);
    m.u.get_shard_map_reply.servers = sv;
    m.u.get_shard_map_reply.n_servers = n;
    m.u.get_shard_map_reply.shards = sh;
    m.u.get_shard_map_reply.n_shards = co->n_shards;
    m.u.get_shard_map_reply.delay_us = co->delay_us; /* the client's links take the cluster's delay */
    m.u.get_shard_map_reply.jitter_us = co->jitter_us;
    rl__co_send_reply(co, cc->conn, RL_MSG_GET_SHARD_MAP, h->id, &m);
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
static void delay_lateness(rl__coordinator *co, rl__lat_hist *out) {
    *out = co->closed_late;
    for (co_conn *c = co->conns; c; c = c->next) {
        if (!c->delayed) continue;
        rl__lat_hist h;
        rl__conn_get_lateness(c->conn, &h, 0);
        rl__lat_hist_merge(out, &h);
    }
}

/* SET_DELAY (an admin connection: on_frame checked): check the range, then give every delayed connection (and later ones) the new
 * setting. Frames already queued keep their release times (loop.h), so nothing is reordered. */
static void handle_set_delay(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    const rl__msg_set_delay_req *r = &req->u.set_delay_req;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    (void)payload;
    if (rl__netem_check(r->delay_us, r->jitter_us, &why) != RL_OK) {
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_INVALID_ARGUMENT, "SET_DELAY: %s",
                          rl__errdetail_get(&why));
        return;
    }
    co->delay_us = r->delay_us;
    co->jitter_us = r->jitter_us;
    rl__co_margin_for_delay(co);
    for (co_conn *c = co->conns; c; c = c->next)
        if (c->delayed) (void)rl__netem_set(c->conn, co->delay_us, co->jitter_us, co->delay_salt++);
    rl__log(RL_LOG_INFO, "coordinator: injected delay now %u us (jitter %u us), asked by %s", r->delay_us, r->jitter_us,
            rl__conn_peer(cc->conn));
    rl__msg m;
    memset(&m, 0, sizeof m);
    rl__co_send_reply(co, cc->conn, RL_MSG_SET_DELAY, h->id, &m);
}

/* STATUS: the contract's JSON and the coordinator's own counters (docs/protocol.md §9). */
static void handle_status(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    (void)payload;
    (void)req;
    uint64_t now = rl__clock_mono_ns();
    rl__commitlog_status ls;
    rl__committer_stats cs;
    rl__storage_status ss;
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
    rl__lat_hist late;
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
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_OUT_OF_MEMORY, "out of memory");
    } else {
        rl__msg m;
        memset(&m, 0, sizeof m);
        m.u.status_reply.json = j.data;
        m.u.status_reply.json_len = (uint32_t)j.len;
        rl__co_send_reply(co, cc->conn, RL_MSG_STATUS, h->id, &m);
    }
    rl__buf_release(&j);
}

/* HELLO: remember the peer's role and id, answer with ours; a second HELLO is a protocol
 * error. */
static void handle_hello(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__coordinator *co = cc->co;
    const rl__msg_hello_req *hr = &req->u.hello_req;
    (void)payload;
    if (cc->hello) {
        bad_frame(cc, h, "a second HELLO");
        return;
    }
    if (hr->role != RL_ROLE_CLIENT && rl__conn_auth_class(cc->conn) != RL_AUTH_MEMBER) {
        /* Serving as a storage server, the log, admin requests: the key file's secret only. */
        rl__log(RL_LOG_WARN, "coordinator: %s asked for role %u with the client key only: refused",
                rl__conn_peer(cc->conn), hr->role);
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_UNAUTHORIZED_ATTEMPT,
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
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.u.hello_reply.protocol_version = RL_PROTOCOL_VERSION;
    m.u.hello_reply.role = RL_ROLE_COORDINATOR;
    m.u.hello_reply.id = 0;
    m.u.hello_reply.host = (const uint8_t *)co->host;
    m.u.hello_reply.host_len = co->host_len;
    rl__co_send_reply(co, cc->conn, RL_MSG_HELLO, h->id, &m);
}

/* ---- PING, GET_READ_VERSION ---------------------------------------------------------------- */

/* PING: the payload back, with this process's monotonic clock. */
static void handle_ping(co_conn *cc, const rl__frame_header *h, const uint8_t *payload, const rl__msg *req) {
    rl__msg r;
    (void)payload;
    memset(&r, 0, sizeof r);
    r.u.ping_reply.payload = req->u.ping_req.payload;
    r.u.ping_reply.payload_len = req->u.ping_req.payload_len;
    r.u.ping_reply.server_mono_ns = rl__clock_mono_ns();
    rl__co_send_reply(cc->co, cc->conn, RL_MSG_PING, h->id, &r);
}

/* GET_READ_VERSION: the durable version. */
static void handle_get_read_version(co_conn *cc, const rl__frame_header *h, const uint8_t *payload,
                                    const rl__msg *req) {
    rl__msg r;
    (void)payload;
    (void)req;
    memset(&r, 0, sizeof r);
    r.u.get_read_version_reply.version = rl__co_durable(cc->co);
    rl__co_send_reply(cc->co, cc->conn, RL_MSG_GET_READ_VERSION, h->id, &r);
}

/* ---- The request table --------------------------------------------------------------------- */

enum { CO_DECODED = 0, CO_RAW = 1 };

/* One line of coord_requests.def. */
typedef struct {
    co_handler *handler;  /* NULL: the coordinator does not answer the message */
    uint8_t how;          /* CO_DECODED or CO_RAW */
    unsigned flags;       /* the message's RL_MSGF_* */
    size_t storage_id_at; /* RL_MSGF_FROM_STORAGE: the offset in rl__msg of the storage id */
} co_request;

/* What the coordinator answers, by message type. */
static const co_request REQUESTS[RL_MSG_TYPE_LIMIT] = {
#define CO_REQUEST(NAME, HANDLER, HOW) [RL_MSG_##NAME] = {HANDLER, HOW, RL_MSGF_OF_##NAME, 0},
#define CO_STORAGE_REQUEST(NAME, HANDLER, ID) \
    [RL_MSG_##NAME] = {HANDLER, CO_DECODED, RL_MSGF_OF_##NAME, offsetof(rl__msg, u.ID)},
#include "server/coord_requests.def"
#undef CO_REQUEST
#undef CO_STORAGE_REQUEST
};

/* The table agrees with messages.def: every line is a coordinator message, FROM_STORAGE exactly
 * where it says so (with a 4-byte id; never raw, whose request is not decoded here) ... */
#define CO_REQUEST(NAME, HANDLER, HOW)                                                                    \
    _Static_assert((RL_MSGF_OF_##NAME & (RL_MSGF_COORD | RL_MSGF_FROM_STORAGE)) == RL_MSGF_COORD,         \
                   #NAME ": not a coordinator request in net/messages.def, or one from a storage server " \
                         "(CO_STORAGE_REQUEST)");
#define CO_STORAGE_REQUEST(NAME, HANDLER, ID)                                                      \
    _Static_assert((RL_MSGF_OF_##NAME & (RL_MSGF_COORD | RL_MSGF_FROM_STORAGE)) ==                 \
                       (RL_MSGF_COORD | RL_MSGF_FROM_STORAGE),                                     \
                   #NAME ": not a coordinator request from a storage server in net/messages.def"); \
    _Static_assert(sizeof(((rl__msg *)0)->u.ID) == sizeof(uint32_t), #NAME ": the storage id is a u32");
#include "server/coord_requests.def"
#undef CO_REQUEST
#undef CO_STORAGE_REQUEST
/* ... and every coordinator message has a line. */
#define CO_REQUEST(NAME, HANDLER, HOW) +1
#define CO_STORAGE_REQUEST(NAME, HANDLER, ID) +1
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) +((FLAGS)&RL_MSGF_COORD ? 1 : 0)
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) +((FLAGS)&RL_MSGF_COORD ? 1 : 0)
_Static_assert(0
#include "server/coord_requests.def"
                   == 0
#include "net/messages.def"
               ,
               "a coordinator message of net/messages.def has no line in coord_requests.def");
#undef CO_REQUEST
#undef CO_STORAGE_REQUEST
#undef RL_MSG
#undef RL_MSG_ONE_WAY

/* What messages.def says of a decoded request, checked before its handler: 1 if it may run,
 * else 0 after an error reply (the connection stays open). */
static int request_allowed(co_conn *cc, const rl__frame_header *h, const co_request *rq, const rl__msg *m) {
    if ((rq->flags & RL_MSGF_ADMIN) && cc->role != RL_ROLE_ADMIN) {
        rl__co_send_error(cc->co, cc->conn, h->type, h->id, RL_E_UNAUTHORIZED_ATTEMPT,
                          "%s is an admin request (HELLO role 3, with the cluster's key file); this connection's "
                          "HELLO said role %u",
                          rl__msg_type_name(h->type), cc->role);
        return 0;
    }
    if (rq->flags & RL_MSGF_FROM_STORAGE) {
        uint32_t id;
        memcpy(&id, (const uint8_t *)m + rq->storage_id_at, sizeof id);
        if (cc->role != RL_ROLE_STORAGE || cc->id != id) {
            rl__co_send_error(cc->co, cc->conn, h->type, h->id, RL_E_CLIENT_INVALID_OPERATION,
                              "%s for storage server %u on a connection whose HELLO said role %u id %u",
                              rl__msg_type_name(h->type), id, cc->role, cc->id);
            return 0;
        }
    }
    return 1;
}

/* ---- Connections ------------------------------------------------------------------------- */

/* A frame of an accepted connection: the framing rules (a request, HELLO first), then the
 * request table (coord_requests.def): decode, the checks of messages.def, the handler. */
static void on_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    co_conn *cc = ud;
    rl__coordinator *co = cc->co;
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
    const co_request *rq = h->type < RL_MSG_TYPE_LIMIT ? &REQUESTS[h->type] : NULL;
    if (rq && rq->how == CO_RAW) { /* decoded from its own copy (after HELLO: checked above) */
        rq->handler(cc, h, payload, NULL);
        return;
    }
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_decode(h->type, h->flags, payload, h->payload_len, &co->scratch, &m, &why);
    if (rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION && h->type == RL_MSG_HELLO) {
        rl__log(RL_LOG_WARN,
                "coordinator: refusing the handshake of %s: magic 0x%08x protocol "
                "version %u (this coordinator speaks 0x%08x version %u)",
                rl__conn_peer(cc->conn), m.u.hello_req.magic, m.u.hello_req.protocol_version, RL_PROTOCOL_MAGIC,
                RL_PROTOCOL_VERSION);
        rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_INCOMPATIBLE_PROTOCOL_VERSION,
                          "this coordinator speaks protocol version %u (magic 0x%08x); the HELLO had "
                          "magic 0x%08x version %u",
                          RL_PROTOCOL_VERSION, RL_PROTOCOL_MAGIC, m.u.hello_req.magic, m.u.hello_req.protocol_version);
        co->protocol_errors++;
        rl__conn_close(cc->conn, RL_CONN_CLOSE_FLUSH);
        return;
    }
    if (rc == RL_E_OUT_OF_MEMORY) {
        rl__co_send_error(co, cc->conn, h->type, h->id, rc, "out of memory decoding the request");
        return;
    }
    if (rc != RL_OK) {
        bad_frame(cc, h, "%s", rl__errdetail_get(&why));
        return;
    }
    /* rl__msg_decode accepts only known types, so rq is set. */
    if (!rq || !rq->handler) {
        if (rl__msg_type_flags(h->type) & RL_MSGF_STORAGE)
            rl__co_send_error(co, cc->conn, h->type, h->id, RL_E_UNSUPPORTED_OPERATION,
                              "%s is served by storage servers, not the coordinator", rl__msg_type_name(h->type));
        else bad_frame(cc, h, "a message the coordinator does not serve");
        return;
    }
    if (request_allowed(cc, h, rq, &m)) rq->handler(cc, h, payload, &m);
}

/* A connection closed: drop its parked peeks and its servers' health, free its state. */
static void on_close(rl__conn *conn, int err, void *ud) {
    co_conn *cc = ud;
    rl__coordinator *co = cc->co;
    (void)err;
    if (cc->delayed) {
        rl__lat_hist late;
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
void rl__co_on_accept(rl__listener *l, rl__conn *conn, void *ud) {
    (void)l;
    rl__coordinator *co = ud;
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
