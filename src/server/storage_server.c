/* storage_server.c — `rlkvd storage`: life cycle, inbound connections (clients and peer storage
 * servers), the reads served on the loop thread (GET, GET_KEY, GET_RANGE, GET_MULTI), parked
 * reads, STATUS and PING. Replication is in ss_repl.c, mapped reads and storage-to-storage reads
 * in ss_mapped.c; the shared structures and their thread rules in ss_int.h.
 *
 * A request's path on the loop thread:
 *
 *   frame ──▶ on_client_frame: REPLY flag? ─yes─▶ close (a client sends requests only)
 *               │ first frame must be HELLO (bad magic/version: error reply 2100, close)
 *               ▼
 *             dispatch: decode (malformed: log + close) ──▶ version check
 *               │ v > known: park (ss_parked: the payload is kept; dispatched again when the
 *               │            version arrives, future_version 1009 at the deadline)
 *               │ v < known − window: transaction_too_old 1007
 *               ▼
 *             ownership: the shard (owned range) that holds the key / anchor, else
 *             wrong_shard_server 1001 ──▶ read at min(v, applied) ──▶ reply
 *
 * Invariants (besides ss_int.h's):
 *   1. Every request gets exactly one reply or error reply, or its connection is closed
 *      (malformed input, a wrong handshake, an unexpected message: logged with the peer).
 *   2. Bad input on one connection never affects another: every failure path closes only the
 *      connection it came from.
 *   3. A parked read holds no engine state and no reference beyond its client, which removes its
 *      parked reads when it closes; each parked read has a deadline timer.
 *   4. Selectors resolve within the shard that holds the request (rl__storage_select /
 *      rl__storage_range_bounds with lo/hi = the shard's bounds, lo_is_min = lo == "", hi_is_max
 *      = hi == "\xff"): forward reads in the shard holding the begin anchor, reverse reads in the
 *      shard holding the key just below the end anchor, GET_KEY in the shard holding the anchor
 *      (offset >= 1) or the key below it (offset <= 0).
 */
#include "server/storage_server.h"

#include <errno.h>
#include <inttypes.h>
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
#include "server/ss_int.h"

/* ==== small helpers ========================================================================= */

uint8_t *rl__ss_memdup(const void *p, size_t len) {
    uint8_t *q = rl__malloc(len ? len : 1);
    if (q && len) memcpy(q, p, len);
    return q;
}

void rl__ss_ranges_free(ss_range *r, uint32_t n) {
    if (!r) return;
    for (uint32_t i = 0; i < n; i++) {
        rl__free(r[i].begin);
        rl__free(r[i].end);
    }
    rl__free(r);
}

int rl__ss_own_find(const rl_ss *ss, const uint8_t *key, uint32_t len, int below) {
    for (uint32_t i = 0; i < ss->n_own; i++) {
        const ss_range *r = &ss->own[i];
        int cb = rl__bytes_cmp(key, len, r->begin, r->begin_len);
        int ce = rl__bytes_cmp(key, len, r->end, r->end_len);
        if (!below) {
            if (cb >= 0 && ce < 0) return (int)i;
        } else {
            if ((cb > 0 || (len == 0 && r->begin_len == 0)) && ce <= 0) return (int)i;
        }
    }
    return -1;
}

int rl__ss_own_version(const rl_ss *ss, int i, rl_version v) {
    const ss_range *r = &ss->own[i];
    if (r->until && v >= r->until) return RL_E_WRONG_SHARD_SERVER;
    if (r->since && v < r->since) return RL_E_TRANSACTION_TOO_OLD;
    return RL_OK;
}

/* Send the error of a read at version v in owned range i that its version rule refuses (1), or
 * nothing (0). */
static int refuse_version(rl_ss *ss, ss_client *cl, uint16_t type, uint64_t id, int i, rl_version v) {
    int rc = rl__ss_own_version(ss, i, v);
    if (rc == RL_OK) return 0;
    if (rc == RL_E_WRONG_SHARD_SERVER)
        rl__ss_send_error(cl->conn, type, id, rc,
                          "storage server %u no longer holds the range "
                          "at version %" PRIu64 " (it moved away at %" PRIu64 ")",
                          ss->o.id, v, ss->own[i].until);
    else
        rl__ss_send_error(cl->conn, type, id, rc,
                          "storage server %u holds the range from "
                          "version %" PRIu64 " on (it moved here), not at %" PRIu64,
                          ss->o.id, ss->own[i].since, v);
    return 1;
}

void rl__ss_fatal(rl_ss *ss, int rc, const char *what) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&ss->fatal, &expected, rc ? rc : RL_E_INTERNAL_ERROR)) {
        snprintf(ss->fatal_what, sizeof ss->fatal_what, "%s", what);
        atomic_store_explicit(&ss->fatal_what_set, 1, memory_order_release);
        rl__log(RL_LOG_ERROR, "storage server %u: fatal: %s: %s (%d); stopping", ss->o.id, what, rl_error_name(rc), rc);
    }
    rl__loop_stop(ss->loop);
}

const char *rl__ss_fatal_what(const rl_ss *ss) {
    return atomic_load_explicit(&ss->fatal_what_set, memory_order_acquire) ? ss->fatal_what : "";
}

int rl__ss_send_msg(rl_conn *conn, uint64_t id, const rl_msg *m, rl_buf *buf) {
    rl_proto_why why;
    rl__buf_reset(buf);
    int rc = rl__msg_encode(buf, m, &why);
    if (rc == RL_OK && buf->len > RL_NET_MAX_PAYLOAD) rc = RL_E_INVALID_ARGUMENT;
    if (rc != RL_OK) {
        rl__log(RL_LOG_ERROR, "storage server: cannot encode a %s reply for %s: %s (%s)", rl__msg_type_name(m->type),
                rl__conn_peer(conn), rl_error_name(rc), rc == RL_E_INVALID_ARGUMENT ? why.text : "");
        rl__ss_send_error(conn, m->type, id, RL_E_INTERNAL_ERROR,
                          "the server could not encode "
                          "its %s reply",
                          rl__msg_type_name(m->type));
        return rc;
    }
    /* Queued: the loop thread writes every reply of a pass in a few sendmsg calls (a pipelined
     * client's burst of 1,000 gets took 12 ms with one write per reply, 2.1-2.6 ms queued; a
     * single reply's latency is the same). */
    rc = rl__conn_send_queued(conn, m->type, m->flags, id, buf->data, buf->len);
    if (buf->cap > (4u << 20)) { /* do not keep a huge buffer around */
        rl__buf_release(buf);
        rl__buf_init(buf);
    }
    return rc;
}

void rl__ss_send_error(rl_conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...) {
    char msg[RL_PROTO_MAX_STRING];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = (int)sizeof msg - 1;
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    m.flags = RL_FRAME_REPLY | RL_FRAME_ERROR;
    m.u.error.code = code;
    m.u.error.message = (const uint8_t *)msg;
    m.u.error.message_len = (uint32_t)n;
    uint8_t tmp[RL_PROTO_MAX_STRING + 64];
    rl_buf b;
    rl__buf_init(&b);
    if (rl__msg_encode(&b, &m, NULL) == RL_OK && b.len <= sizeof tmp) {
        memcpy(tmp, b.data, b.len);
        rl__conn_send(conn, type, m.flags, id, tmp, b.len);
    }
    rl__buf_release(&b);
}

/* Log why conn is closed (with its peer) and close it. */
static void close_bad(rl_conn *conn, unsigned flags, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void close_bad(rl_conn *conn, unsigned flags, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rl__log(RL_LOG_WARN, "storage server: closing connection from %s: %s", rl__conn_peer(conn), msg);
    rl__conn_close(conn, flags);
}

int rl__ss_read_version(rl_ss *ss, rl_version v, rl_version *out_readv) {
    rl_version known = atomic_load(&ss->known), applied = atomic_load(&ss->applied);
    uint64_t window = ss->o.window_versions;
    if (v > known) return RL_E_FUTURE_VERSION;
    if (known > window && v < known - window) return RL_E_TRANSACTION_TOO_OLD;
    *out_readv = v < applied ? v : applied;
    return RL_OK;
}

/* ==== status ================================================================================ */

static void json_hex(rl_buf *out, const uint8_t *p, uint32_t n) {
    rl__buf_append(out, "\"", 1);
    rl__buf_append_hex(out, p, n);
    rl__buf_append(out, "\"", 1);
}

void rl__ss_delay_conn(rl_ss *ss, rl_conn *conn) {
    if (ss->delay_us || ss->jitter_us) (void)rl__netem_set(conn, ss->delay_us, ss->jitter_us, ss->delay_salt++);
}

void rl__ss_hello(const rl_ss *ss, rl_msg *m) {
    memset(m, 0, sizeof *m);
    m->type = RL_MSG_HELLO;
    m->u.hello_req.magic = RL_PROTOCOL_MAGIC;
    m->u.hello_req.protocol_version = RL_PROTOCOL_VERSION;
    m->u.hello_req.role = RL_ROLE_STORAGE;
    m->u.hello_req.id = ss->o.id;
    m->u.hello_req.host = (const uint8_t *)ss->host;
    m->u.hello_req.host_len = (uint32_t)strlen(ss->host);
}

void rl__ss_send_hello(const rl_ss *ss, rl_conn *conn) {
    rl_msg m;
    rl__ss_hello(ss, &m);
    rl_buf b;
    rl__buf_init(&b);
    if (rl__msg_encode(&b, &m, NULL) == RL_OK) rl__conn_send(conn, RL_MSG_HELLO, 0, 0, b.data, b.len);
    rl__buf_release(&b);
}

void rl__ss_delay_closed(rl_ss *ss, rl_conn *conn) {
    rl_lat_hist h;
    rl__conn_get_lateness(conn, &h, 0);
    rl__lat_hist_merge(&ss->closed_late, &h);
}

/* Every delayed connection, with (set) the current setting; their lateness merged into *late
 * (may be NULL) together with that of the closed ones. [loop] */
static void delay_sweep(rl_ss *ss, int set, rl_lat_hist *late) {
    if (late) *late = ss->closed_late;
    rl_lat_hist h;
    for (ss_client *c = ss->clients; c; c = c->next) {
        if (!c->delayed) continue;
        if (set) (void)rl__netem_set(c->conn, ss->delay_us, ss->jitter_us, ss->delay_salt++);
        if (late) rl__conn_get_lateness(c->conn, &h, 0), rl__lat_hist_merge(late, &h);
    }
    if (ss->co && ss->co_delayed) {
        if (set) (void)rl__netem_set(ss->co, ss->delay_us, ss->jitter_us, ss->delay_salt++);
        if (late) rl__conn_get_lateness(ss->co, &h, 0), rl__lat_hist_merge(late, &h);
    }
    rl__ss_peers_delay(ss, set, late);
}

void rl__ss_status(rl_ss *ss, rl_buf *out) {
    rl_storage_status s;
    memset(&s, 0, sizeof s);
    rl__storage_get_status(ss->st, &s);
    rl__buf_printf(out, "{\"role\":\"storage\",\"id\":%u,\"host\":", ss->o.id);
    rl__buf_append_json_str(out, ss->host, strlen(ss->host));
    rl__buf_printf(out,
                   ",\"pid\":%ld,\"applied_version\":%" PRIu64 ",\"known_version\":%" PRIu64
                   ",\"durable_version\":%" PRIu64 ",\"shards\":[",
                   (long)getpid(), (uint64_t)atomic_load(&ss->applied), (uint64_t)atomic_load(&ss->known),
                   (uint64_t)atomic_load(&ss->durable));
    for (uint32_t i = 0; i < ss->n_own; i++) {
        rl__buf_append_str(out, i ? ",{\"begin\":" : "{\"begin\":");
        json_hex(out, ss->own[i].begin, ss->own[i].begin_len);
        rl__buf_append_str(out, ",\"end\":");
        json_hex(out, ss->own[i].end, ss->own[i].end_len);
        if (ss->own[i].since) rl__buf_printf(out, ",\"since\":%" PRIu64, ss->own[i].since);
        if (ss->own[i].until) rl__buf_printf(out, ",\"until\":%" PRIu64, ss->own[i].until);
        rl__buf_append_str(out, "}");
    }
    rl__buf_printf(out,
                   "],\"keys\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"mapped_reads\":%" PRIu64
                   ",\"secondaries_local\":%" PRIu64 ",\"secondaries_remote\":%" PRIu64 ",\"s2s_requests\":%" PRIu64
                   ",\"s2s_round_trips\":%" PRIu64 ",\"mapped_server_ns\":%" PRIu64 ",\"popped_version\":%" PRIu64
                   ",\"registered\":%s,\"peeks\":%" PRIu64 ",\"parked_reads\":%" PRIu64
                   ",\"future_version_errors\":%" PRIu64 ",\"address\":",
                   s.keys, (uint64_t)atomic_load(&ss->n_reads), (uint64_t)atomic_load(&ss->n_mapped),
                   (uint64_t)atomic_load(&ss->n_sec_local), (uint64_t)atomic_load(&ss->n_sec_remote),
                   (uint64_t)atomic_load(&ss->n_s2s_requests), (uint64_t)atomic_load(&ss->n_s2s_round_trips),
                   (uint64_t)atomic_load(&ss->n_mapped_ns), (uint64_t)atomic_load(&ss->popped),
                   atomic_load(&ss->registered) ? "true" : "false", (uint64_t)atomic_load(&ss->n_peeks),
                   (uint64_t)atomic_load(&ss->n_parked), (uint64_t)atomic_load(&ss->n_future));
    rl__buf_append_json_str(out, ss->listen_ip, strlen(ss->listen_ip));
    rl__buf_printf(out, ",\"port\":%u,\"no_sync\":%s,\"window_versions\":%" PRIu64 ",\"engine\":\"%s\"", ss->port,
                   ss->o.no_sync ? "true" : "false", ss->o.window_versions, s.engine ? s.engine : "memory");
    /* Tracing counters (docs/protocol.md §9): reads by type, GET_MULTI served for peers, the
     * storage-to-storage bytes of this server's mapped reads, and the gauges. */
    rl__buf_printf(out,
                   ",\"gets\":%" PRIu64 ",\"get_keys\":%" PRIu64 ",\"get_ranges\":%" PRIu64
                   ",\"get_multi_served\":%" PRIu64 ",\"get_multi_items_served\":%" PRIu64
                   ",\"s2s_bytes_sent\":%" PRIu64 ",\"s2s_bytes_received\":%" PRIu64 ",\"mapped_queued\":%" PRId64
                   ",\"mapped_running\":%" PRId64 ",\"mapped_workers\":%d,\"parked_now\":%" PRId64,
                   (uint64_t)atomic_load(&ss->n_gets), (uint64_t)atomic_load(&ss->n_get_keys),
                   (uint64_t)atomic_load(&ss->n_get_ranges), (uint64_t)atomic_load(&ss->n_get_multi_served),
                   (uint64_t)atomic_load(&ss->n_get_multi_items), (uint64_t)atomic_load(&ss->n_s2s_bytes_sent),
                   (uint64_t)atomic_load(&ss->n_s2s_bytes_received), (int64_t)atomic_load(&ss->mapped_queued),
                   (int64_t)atomic_load(&ss->mapped_running), ss->o.workers, (int64_t)atomic_load(&ss->parked_now));
    rl_lat_hist late;
    delay_sweep(ss, 0, &late);
    rl__buf_append_str(out, ",");
    rl__netem_status_json(out, ss->delay_us, ss->jitter_us, &late);
    rl__net_status_json(out, ss->loop);
    uint32_t fetching = rl__ss_move_count(ss);
    rl__buf_printf(out,
                   ",\"moves_in\":%" PRIu64 ",\"fetched_rows\":%" PRIu64 ",\"fetching\":%u"
                   ",\"dropped_ranges\":%" PRIu64 "}",
                   (uint64_t)atomic_load(&ss->n_fetches_done), (uint64_t)atomic_load(&ss->n_fetched_rows), fetching,
                   (uint64_t)atomic_load(&ss->n_dropped));
}

void rl__ss_get_stats(rl_ss *ss, rl_ss_stats *out) {
    memset(out, 0, sizeof *out);
    out->applied_version = atomic_load(&ss->applied);
    out->known_version = atomic_load(&ss->known);
    out->durable_version = atomic_load(&ss->durable);
    out->popped_version = atomic_load(&ss->popped);
    out->reads = atomic_load(&ss->n_reads);
    out->mapped_reads = atomic_load(&ss->n_mapped);
    out->secondaries_local = atomic_load(&ss->n_sec_local);
    out->secondaries_remote = atomic_load(&ss->n_sec_remote);
    out->s2s_requests = atomic_load(&ss->n_s2s_requests);
    out->s2s_round_trips = atomic_load(&ss->n_s2s_round_trips);
    out->peeks = atomic_load(&ss->n_peeks);
    out->parked_reads = atomic_load(&ss->n_parked);
    out->future_version_errors = atomic_load(&ss->n_future);
    out->gets = atomic_load(&ss->n_gets);
    out->get_keys = atomic_load(&ss->n_get_keys);
    out->get_ranges = atomic_load(&ss->n_get_ranges);
    out->get_multi_served = atomic_load(&ss->n_get_multi_served);
    out->get_multi_items_served = atomic_load(&ss->n_get_multi_items);
    out->s2s_bytes_sent = atomic_load(&ss->n_s2s_bytes_sent);
    out->s2s_bytes_received = atomic_load(&ss->n_s2s_bytes_received);
    out->mapped_queued = atomic_load(&ss->mapped_queued);
    out->mapped_running = atomic_load(&ss->mapped_running);
    out->parked_now = atomic_load(&ss->parked_now);
    out->registered = atomic_load(&ss->registered);
    out->registrations = atomic_load(&ss->registrations);
}

/* ==== parked reads ========================================================================== */

static void dispatch(rl_ss *ss, ss_client *cl, uint16_t type, uint64_t id, const uint8_t *payload, size_t len,
                     uint64_t t0_ns, int may_park);

static void parked_unlink(rl_ss *ss, ss_parked *p) {
    if (p->prev) p->prev->next = p->next;
    else ss->parked = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    atomic_fetch_sub(&ss->parked_now, 1);
}

/* The deadline of a parked read: answer future_version. */
static void on_park_deadline(rl_loop *loop, void *ud) {
    (void)loop;
    ss_parked *p = ud;
    rl_ss *ss = p->cl->ss;
    parked_unlink(ss, p);
    atomic_fetch_add(&ss->n_future, 1);
    rl__ss_send_error(p->cl->conn, p->type, p->id, RL_E_FUTURE_VERSION,
                      "version %" PRIu64 " is not known to storage server %u after %d ms "
                      "(known %" PRIu64 ")",
                      p->version, ss->o.id, ss->o.future_wait_ms, (uint64_t)atomic_load(&ss->known));
    rl__free(p);
}

/* Park a request at version v (its payload copied). */
static void park(rl_ss *ss, ss_client *cl, uint16_t type, uint64_t id, rl_version v, const uint8_t *payload, size_t len,
                 uint64_t t0_ns) {
    ss_parked *p = rl__malloc(sizeof *p + len);
    if (!p) {
        rl__ss_send_error(cl->conn, type, id, RL_E_OUT_OF_MEMORY, "cannot park the read");
        return;
    }
    memset(p, 0, sizeof *p);
    p->cl = cl;
    p->type = type;
    p->id = id;
    p->version = v;
    p->t0_ns = t0_ns;
    p->len = len;
    if (len) memcpy(p->payload, payload, len);
    uint64_t deadline = t0_ns + (uint64_t)ss->o.future_wait_ms * 1000000u;
    if (rl__loop_timer_add(ss->loop, deadline, on_park_deadline, p, &p->timer) != RL_OK) {
        rl__free(p);
        rl__ss_send_error(cl->conn, type, id, RL_E_OUT_OF_MEMORY, "cannot park the read");
        return;
    }
    p->next = ss->parked;
    if (p->next) p->next->prev = p;
    ss->parked = p;
    atomic_fetch_add(&ss->n_parked, 1);
    atomic_fetch_add(&ss->parked_now, 1);
}

void rl__ss_wake_parked(rl_ss *ss) {
    rl_version known = atomic_load(&ss->known);
    ss_parked *ready = NULL, *p = ss->parked, *next;
    for (; p; p = next) {
        next = p->next;
        if (p->version > known) continue;
        parked_unlink(ss, p);
        rl__loop_timer_cancel(ss->loop, p->timer);
        p->next = ready; /* dispatched below, in arrival order: reverse the reversed list */
        ready = p;
    }
    /* ss->parked is newest first, so `ready` is oldest first. */
    for (p = ready; p; p = next) {
        next = p->next;
        dispatch(ss, p->cl, p->type, p->id, p->payload, p->len, p->t0_ns, 0);
        rl__free(p);
    }
}

/* Drop the parked reads of a closing client. */
static void drop_parked_of(rl_ss *ss, ss_client *cl) {
    ss_parked *p = ss->parked, *next;
    for (; p; p = next) {
        next = p->next;
        if (p->cl != cl) continue;
        parked_unlink(ss, p);
        rl__loop_timer_cancel(ss->loop, p->timer);
        rl__free(p);
    }
}

/* ==== the reads ============================================================================= */

/* The anchor of a selector (its key, or key + "\x00" with or_equal) in arena a. */
static const uint8_t *sel_anchor(const rl_key_selector *s, rl_arena *a, uint32_t *out_len) {
    const uint8_t *k = s->key ? s->key : (const uint8_t *)"";
    if (!s->or_equal) {
        *out_len = s->key_len;
        return k;
    }
    uint8_t *p = rl__arena_alloc(a, (size_t)s->key_len + 1);
    if (!p) return NULL;
    if (s->key_len) memcpy(p, k, s->key_len);
    p[s->key_len] = 0;
    *out_len = s->key_len + 1;
    return p;
}

static int is_ff(const uint8_t *k, uint32_t n) { return n == 1 && k[0] == 0xff; }

/* Reply to a GET. */
static void do_get(rl_ss *ss, ss_client *cl, uint64_t id, const rl_msg_get_req *r, rl_version readv) {
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET;
    m.flags = RL_FRAME_REPLY;
    int oi = rl__ss_own_find(ss, r->key, r->key_len, 0);
    if (oi < 0) {
        rl__ss_send_error(cl->conn, RL_MSG_GET, id, RL_E_WRONG_SHARD_SERVER, "storage server %u does not hold the key",
                          ss->o.id);
        return;
    }
    if (refuse_version(ss, cl, RL_MSG_GET, id, oi, r->version)) return;
    int present = 0;
    const uint8_t *val = NULL;
    uint32_t vl = 0;
    int rc = rl__storage_get(ss->st, readv, r->key, r->key_len, &ss->req_arena, &present, &val, &vl);
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_GET, id, rc, "read at version %" PRIu64 " failed", readv);
        return;
    }
    m.u.get_reply.present = present ? 1 : 0;
    m.u.get_reply.value = present ? val : NULL;
    m.u.get_reply.value_len = present ? vl : 0;
    uint8_t head[RL_MSG_GET_REPLY_HEAD]; /* queued, gathered: no encoding buffer (the common case) */
    if (rl__msg_get_reply_head(&m.u.get_reply, head))
        (void)rl__conn_send2(cl->conn, RL_MSG_GET, RL_FRAME_REPLY, id, head, sizeof head, m.u.get_reply.value,
                             m.u.get_reply.value_len, 1);
    else rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}

/* Reply to a GET_KEY (invariant 4). */
static void do_get_key(rl_ss *ss, ss_client *cl, uint64_t id, const rl_msg_get_key_req *r, rl_version readv) {
    uint32_t al;
    const uint8_t *an = sel_anchor(&r->sel, &ss->req_arena, &al);
    if (!an) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_KEY, id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    int below = r->sel.offset <= 0;
    int i = rl__ss_own_find(ss, an, al, below);
    if (i < 0) i = rl__ss_own_find(ss, an, al, !below);
    if (i < 0) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_KEY, id, RL_E_WRONG_SHARD_SERVER,
                          "storage server %u does not hold the selector's anchor", ss->o.id);
        return;
    }
    if (refuse_version(ss, cl, RL_MSG_GET_KEY, id, i, r->version)) return;
    const ss_range *sh = &ss->own[i];
    rl_select_result s;
    int rc = rl__storage_select(ss->st, readv, &r->sel, sh->begin, sh->begin_len, sh->begin_len == 0, sh->end,
                                sh->end_len, is_ff(sh->end, sh->end_len), &ss->req_arena, &s);
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_KEY, id, rc, "selector at version %" PRIu64 " failed", readv);
        return;
    }
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_KEY;
    m.flags = RL_FRAME_REPLY;
    m.u.get_key_reply.resolved = s.resolved ? 1 : 0;
    m.u.get_key_reply.sel.key = s.key;
    m.u.get_key_reply.sel.key_len = s.key_len;
    m.u.get_key_reply.sel.or_equal = 0;
    m.u.get_key_reply.sel.offset = s.resolved ? 1 : s.offset;
    rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}

/* The owned range a range read runs in (invariant 4), or -1. */
static int range_shard(rl_ss *ss, const rl_key_selector *begin, const rl_key_selector *end, int reverse, rl_arena *a,
                       int *out_oom) {
    uint32_t al;
    const uint8_t *an = sel_anchor(reverse ? end : begin, a, &al);
    *out_oom = an == NULL;
    if (!an) return -1;
    return rl__ss_own_find(ss, an, al, reverse);
}

/* Reply to a GET_RANGE. */
static void do_get_range(rl_ss *ss, ss_client *cl, uint64_t id, const rl_msg_get_range_req *r, rl_version readv) {
    int oom = 0;
    int i = range_shard(ss, &r->begin, &r->end, r->reverse, &ss->req_arena, &oom);
    if (i < 0) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_RANGE, id, oom ? RL_E_OUT_OF_MEMORY : RL_E_WRONG_SHARD_SERVER,
                          "storage server %u does not hold the range's %s anchor", ss->o.id,
                          r->reverse ? "end" : "begin");
        return;
    }
    if (refuse_version(ss, cl, RL_MSG_GET_RANGE, id, i, r->version)) return;
    const ss_range *sh = &ss->own[i];
    int hi_max = is_ff(sh->end, sh->end_len);
    rl_range_bounds bd;
    int rc = rl__storage_range_bounds(ss->st, readv, &r->begin, &r->end, sh->begin, sh->begin_len, sh->begin_len == 0,
                                      sh->end, sh->end_len, hi_max, r->reverse, &ss->req_arena, &bd);
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_RANGE;
    m.flags = RL_FRAME_REPLY;
    rl_msg_get_range_reply *g = &m.u.get_range_reply;
    if (rc == RL_OK && bd.unresolved) {
        g->status = RL_RANGE_SELECTOR_UNRESOLVED;
        rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
        return;
    }
    rl_keyvalue *kvs = NULL;
    int n = 0, more = 0;
    if (rc == RL_OK && rl__bytes_cmp(bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len) < 0) {
        long target = r->target_bytes > 0 && r->target_bytes < SS_REPLY_BYTES ? (long)r->target_bytes : SS_REPLY_BYTES;
        rc = rl__storage_get_range(ss->st, readv, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len, r->limit, target,
                                   r->reverse, &ss->req_arena, &kvs, &n, &more);
    }
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_RANGE, id, rc, "range read at version %" PRIu64 " failed", readv);
        return;
    }
    g->kvs = kvs;
    g->n_kvs = (uint32_t)n;
    g->more = more ? 1 : 0;
    g->status = RL_RANGE_OK;
    if (!more && bd.read_through) {
        g->read_through = r->reverse ? sh->begin : sh->end;
        g->read_through_len = r->reverse ? sh->begin_len : sh->end_len;
    }
    g->resolved_begin = bd.rbegin;
    g->resolved_begin_len = bd.rbegin_len;
    g->resolved_end = bd.rend;
    g->resolved_end_len = bd.rend_len;
    rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}

/* A request's version, for the version check (0 when the type has none). */
static rl_version msg_version(const rl_msg *m, int *has) {
    *has = 1;
    switch (m->type) {
    case RL_MSG_GET: return m->u.get_req.version;
    case RL_MSG_GET_KEY: return m->u.get_key_req.version;
    case RL_MSG_GET_RANGE: return m->u.get_range_req.version;
    case RL_MSG_GET_MAPPED_RANGE: return m->u.get_mapped_range_req.version;
    case RL_MSG_GET_MULTI: return m->u.get_multi_req.version;
    default: *has = 0; return 0;
    }
}

/* Handle one request of an accepted connection (after HELLO). may_park: a read at a version not
 * known yet waits (0 when re-dispatched from the parked list, whose versions are known now). */
static void dispatch(rl_ss *ss, ss_client *cl, uint16_t type, uint64_t id, const uint8_t *payload, size_t len,
                     uint64_t t0_ns, int may_park) {
    rl_msg m;
    rl_proto_why why;
    rl__arena_reset(&ss->req_arena);
    int rc = rl__msg_decode(type, 0, payload, len, &ss->req_arena, &m, &why);
    if (rc == RL_E_OUT_OF_MEMORY) {
        rl__ss_send_error(cl->conn, type, id, rc, "out of memory decoding the request");
        return;
    }
    if (rc != RL_OK) {
        close_bad(cl->conn, 0, "%s", why.text);
        return;
    }
    int has_v;
    rl_version v = msg_version(&m, &has_v), readv = 0;
    if (has_v) {
        rc = rl__ss_read_version(ss, v, &readv);
        if (rc == RL_E_FUTURE_VERSION && may_park) {
            park(ss, cl, type, id, v, payload, len, t0_ns);
            return;
        }
        if (rc != RL_OK) {
            if (rc == RL_E_FUTURE_VERSION) atomic_fetch_add(&ss->n_future, 1);
            rl__ss_send_error(cl->conn, type, id, rc,
                              "version %" PRIu64 " at storage server %u (known %" PRIu64 ", window %" PRIu64 ")", v,
                              ss->o.id, (uint64_t)atomic_load(&ss->known), ss->o.window_versions);
            return;
        }
    }
    switch (type) {
    case RL_MSG_PING: {
        rl_msg r;
        memset(&r, 0, sizeof r);
        r.type = RL_MSG_PING;
        r.flags = RL_FRAME_REPLY;
        r.u.ping_reply.payload = m.u.ping_req.payload;
        r.u.ping_reply.payload_len = m.u.ping_req.payload_len;
        r.u.ping_reply.server_mono_ns = rl__clock_mono_ns();
        rl__ss_send_msg(cl->conn, id, &r, &ss->reply);
        break;
    }
    case RL_MSG_STATUS: {
        rl_buf js;
        rl__buf_init(&js);
        rl__ss_status(ss, &js);
        rl_msg r;
        memset(&r, 0, sizeof r);
        r.type = RL_MSG_STATUS;
        r.flags = RL_FRAME_REPLY;
        r.u.status_reply.json = js.data;
        r.u.status_reply.json_len = (uint32_t)js.len;
        if (rl__buf_error(&js)) rl__ss_send_error(cl->conn, type, id, RL_E_OUT_OF_MEMORY, "status: out of memory");
        else rl__ss_send_msg(cl->conn, id, &r, &ss->reply);
        rl__buf_release(&js);
        break;
    }
    case RL_MSG_SET_DELAY: {
        char dwhy[160];
        const rl_msg_set_delay_req *r = &m.u.set_delay_req;
        if (cl->role != RL_ROLE_ADMIN) {
            rl__ss_send_error(cl->conn, type, id, RL_E_UNAUTHORIZED_ATTEMPT,
                              "SET_DELAY is an admin request (HELLO role 3, with the cluster's key file); this "
                              "connection's HELLO said role %u",
                              cl->role);
            break;
        }
        if (rl__netem_check(r->delay_us, r->jitter_us, dwhy, sizeof dwhy) != RL_OK) {
            rl__ss_send_error(cl->conn, type, id, RL_E_INVALID_ARGUMENT, "SET_DELAY: %s", dwhy);
            break;
        }
        ss->delay_us = r->delay_us;
        ss->jitter_us = r->jitter_us;
        delay_sweep(ss, 1, NULL); /* queued frames keep their release times: no reordering */
        rl__log(RL_LOG_INFO, "storage server %u: injected delay now %u us (jitter %u us), asked by %s", ss->o.id,
                r->delay_us, r->jitter_us, rl__conn_peer(cl->conn));
        rl_msg rep;
        memset(&rep, 0, sizeof rep);
        rep.type = RL_MSG_SET_DELAY;
        rep.flags = RL_FRAME_REPLY;
        rl__ss_send_msg(cl->conn, id, &rep, &ss->reply);
        break;
    }
    case RL_MSG_GET:
        atomic_fetch_add(&ss->n_reads, 1);
        atomic_fetch_add(&ss->n_gets, 1);
        do_get(ss, cl, id, &m.u.get_req, readv);
        break;
    case RL_MSG_GET_KEY:
        atomic_fetch_add(&ss->n_reads, 1);
        atomic_fetch_add(&ss->n_get_keys, 1);
        do_get_key(ss, cl, id, &m.u.get_key_req, readv);
        break;
    case RL_MSG_GET_RANGE:
        atomic_fetch_add(&ss->n_reads, 1);
        atomic_fetch_add(&ss->n_get_ranges, 1);
        do_get_range(ss, cl, id, &m.u.get_range_req, readv);
        break;
    case RL_MSG_GET_MULTI:
        atomic_fetch_add(&ss->n_reads, 1);
        atomic_fetch_add(&ss->n_get_multi_served, 1);
        atomic_fetch_add(&ss->n_get_multi_items, m.u.get_multi_req.n_items);
        rl__ss_get_multi(ss, cl, id, &m.u.get_multi_req, readv);
        break;
    case RL_MSG_GET_MAPPED_RANGE: {
        const rl_msg_get_mapped_range_req *r = &m.u.get_mapped_range_req;
        int oom = 0;
        int i = range_shard(ss, &r->begin, &r->end, r->reverse, &ss->req_arena, &oom);
        if (i < 0) {
            rl__ss_send_error(cl->conn, type, id, oom ? RL_E_OUT_OF_MEMORY : RL_E_WRONG_SHARD_SERVER,
                              "storage server %u does not hold the range's %s anchor", ss->o.id,
                              r->reverse ? "end" : "begin");
            break;
        }
        if (refuse_version(ss, cl, type, id, i, r->version)) break;
        atomic_fetch_add(&ss->n_mapped, 1);
        rc = rl__ss_mapped_submit(ss, cl, id, payload, len, t0_ns, i);
        if (rc != RL_OK) rl__ss_send_error(cl->conn, type, id, rc, "cannot queue the mapped read");
        break;
    }
    default:
        /* A valid message this role does not answer (COMMIT, PEEK, …): say so, then close. */
        rl__ss_send_error(cl->conn, type, id, RL_E_PROTOCOL_UNEXPECTED_MESSAGE, "a storage server does not answer %s",
                          rl__msg_type_name(type));
        close_bad(cl->conn, RL_CONN_CLOSE_FLUSH, "%s request sent to a storage server", rl__msg_type_name(type));
        break;
    }
}

/* ==== accepted connections ================================================================== */

static void on_client_close(rl_conn *conn, int err, void *ud) {
    (void)err;
    ss_client *cl = ud;
    rl_ss *ss = cl->ss;
    if (cl->delayed) rl__ss_delay_closed(ss, conn);
    drop_parked_of(ss, cl);
    if (cl->prev) cl->prev->next = cl->next;
    else ss->clients = cl->next;
    if (cl->next) cl->next->prev = cl->prev;
    rl__conn_release(cl->conn);
    rl__free(cl);
}

/* The HELLO of an accepted connection. */
static void client_hello(rl_ss *ss, ss_client *cl, uint64_t id, const uint8_t *payload, size_t len) {
    rl_msg_hello_req h;
    rl_proto_why why;
    int rc = rl__msg_hello_req_decode(payload, len, NULL, &h, &why);
    if (rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION) {
        rl__ss_send_error(cl->conn, RL_MSG_HELLO, id, rc,
                          "this server speaks protocol %u (magic 0x%08x); got version %u magic "
                          "0x%08x",
                          RL_PROTOCOL_VERSION, RL_PROTOCOL_MAGIC, h.protocol_version, h.magic);
        close_bad(cl->conn, RL_CONN_CLOSE_FLUSH, "incompatible HELLO: %s", why.text);
        return;
    }
    if (rc != RL_OK) {
        close_bad(cl->conn, 0, "%s", why.text);
        return;
    }
    if (h.role != RL_ROLE_CLIENT && rl__conn_auth_class(cl->conn) != RL_AUTH_MEMBER) {
        rl__ss_send_error(cl->conn, RL_MSG_HELLO, id, RL_E_UNAUTHORIZED_ATTEMPT,
                          "role %u (storage server or admin) needs the cluster's key file; this connection proved "
                          "only the cluster file",
                          h.role);
        close_bad(cl->conn, RL_CONN_CLOSE_FLUSH, "HELLO with role %u from a connection with the client key only",
                  h.role);
        return;
    }
    cl->hello = 1;
    cl->role = h.role;
    cl->peer_id = h.id;
    /* A peer on another host gets the delay from the HELLO reply on (the first frame we send). */
    cl->delayed = rl__netem_applies(ss->host, strlen(ss->host), h.host, h.host_len, h.role);
    if (cl->delayed) rl__ss_delay_conn(ss, cl->conn);
    rl_msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.flags = RL_FRAME_REPLY;
    m.u.hello_reply.protocol_version = RL_PROTOCOL_VERSION;
    m.u.hello_reply.role = RL_ROLE_STORAGE;
    m.u.hello_reply.id = ss->o.id;
    m.u.hello_reply.host = (const uint8_t *)ss->host;
    m.u.hello_reply.host_len = (uint32_t)strlen(ss->host);
    rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}

static void on_client_frame(rl_conn *conn, const rl_frame_header *h, const uint8_t *payload, void *ud) {
    ss_client *cl = ud;
    rl_ss *ss = cl->ss;
    if (!rl__conn_is_open(conn)) return;
    if (h->flags != 0) {
        close_bad(conn, 0,
                  "unexpected %s frame (flags %u): this connection carries requests "
                  "only",
                  rl__msg_type_name(h->type), h->flags);
        return;
    }
    if (!cl->hello) {
        if (h->type != RL_MSG_HELLO) {
            close_bad(conn, 0, "first frame is %s (type %u), not HELLO", rl__msg_type_name(h->type), h->type);
            return;
        }
        client_hello(ss, cl, h->id, payload, h->payload_len);
        return;
    }
    if (h->type == RL_MSG_HELLO) {
        close_bad(conn, 0, "a second HELLO");
        return;
    }
    if (!rl__msg_type_known(h->type)) {
        close_bad(conn, 0, "unknown message type %u (%s)", h->type, rl__msg_type_name(h->type));
        return;
    }
    dispatch(ss, cl, h->type, h->id, payload, h->payload_len, rl__clock_mono_ns(), 1);
}

static void on_accept(rl_listener *lis, rl_conn *conn, void *ud) {
    (void)lis;
    rl_ss *ss = ud;
    ss_client *cl = rl__calloc(1, sizeof *cl);
    if (!cl || atomic_load(&ss->stopping)) {
        rl__free(cl);
        rl__conn_close(conn, 0);
        rl__conn_release(conn);
        return;
    }
    cl->ss = ss;
    cl->conn = conn;
    cl->next = ss->clients;
    if (cl->next) cl->next->prev = cl;
    ss->clients = cl;
    rl__conn_set_callbacks(conn, on_client_frame, on_client_close, cl);
}

/* ==== life cycle ============================================================================ */

static char *str_dup(const char *s) {
    size_t n = strlen(s);
    char *p = rl__malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

static void errf(rl_buf *errmsg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void errf(rl_buf *errmsg, const char *fmt, ...) {
    if (!errmsg) return;
    va_list ap;
    va_start(ap, fmt);
    rl__buf_vprintf(errmsg, fmt, ap);
    va_end(ap);
}

int rl__ss_new(const rl_ss_options *o, rl_ss **out, rl_buf *errmsg) {
    int rc;
    if (!o || !out || !o->dir || !o->dir[0] || o->id == 0 || !o->coordinator_ip || o->coordinator_port == 0) {
        errf(errmsg, "storage server: --dir, --id (>= 1) and --coordinator are required");
        return RL_E_INVALID_ARGUMENT;
    }
    if (!o->auth || !o->auth->has_member_key) {
        errf(errmsg, "storage server: the cluster's key file (--key-file) is required");
        return RL_E_INVALID_ARGUMENT;
    }
    char dwhy[160];
    if (rl__netem_check(o->delay_us, o->jitter_us, dwhy, sizeof dwhy) != RL_OK) {
        errf(errmsg, "storage server: --delay-us / --jitter-us: %s", dwhy);
        return RL_E_INVALID_ARGUMENT;
    }
    rl_ss *ss = rl__calloc(1, sizeof *ss);
    if (!ss) return RL_E_OUT_OF_MEMORY;
    ss->o = *o;
    ss->delay_us = o->delay_us;
    ss->jitter_us = o->jitter_us;
    ss->delay_salt = (uint64_t)getpid() << 32 | (uint64_t)o->id << 20;
    rl__lat_hist_reset(&ss->closed_late);
    ss->dir = str_dup(o->dir);
    ss->host = str_dup(o->host ? o->host : "host1");
    ss->coord_ip = str_dup(o->coordinator_ip);
    ss->coord_host = o->coordinator_host ? str_dup(o->coordinator_host) : NULL;
    ss->listen_ip = str_dup(o->listen_ip ? o->listen_ip : "127.0.0.1");
    pthread_mutex_init(&ss->map_mu, NULL);
    pthread_mutex_init(&ss->peers_mu, NULL);
    pthread_mutex_init(&ss->sync_mu, NULL);
    pthread_cond_init(&ss->sync_cv, NULL);
    pthread_mutex_init(&ss->job_mu, NULL);
    pthread_cond_init(&ss->job_cv, NULL);
    rl__arena_init(&ss->req_arena, 0);
    rl__arena_init(&ss->s2s_arena, 0);
    rl__arena_init(&ss->co_arena, 0);
    rl__buf_init(&ss->reply);
    rl__buf_init(&ss->co_buf);
    if (!ss->dir || !ss->host || !ss->coord_ip || !ss->listen_ip || (o->coordinator_host && !ss->coord_host)) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    if (strlen(ss->host) > RL_PROTO_MAX_STRING) {
        errf(errmsg, "storage server: the host label is longer than %d bytes", RL_PROTO_MAX_STRING);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    ss->o.dir = ss->dir;
    ss->o.host = ss->host;
    ss->o.coordinator_ip = ss->coord_ip;
    ss->o.listen_ip = ss->listen_ip;
    if (ss->o.workers <= 0) ss->o.workers = SS_DEFAULT_WORKERS;
    if (ss->o.workers > SS_MAX_WORKERS) ss->o.workers = SS_MAX_WORKERS;
    if (ss->o.future_wait_ms <= 0) ss->o.future_wait_ms = SS_DEFAULT_FUTURE_WAIT_MS;
    if (ss->o.s2s_timeout_ms <= 0) ss->o.s2s_timeout_ms = SS_DEFAULT_S2S_TIMEOUT_MS;
    if (ss->o.peek_wait_ms <= 0) ss->o.peek_wait_ms = SS_DEFAULT_PEEK_WAIT_MS;
    if (ss->o.sync_interval_ms <= 0) ss->o.sync_interval_ms = SS_DEFAULT_SYNC_INTERVAL_MS;
    if (ss->o.map_refresh_ms <= 0) ss->o.map_refresh_ms = SS_DEFAULT_MAP_REFRESH_MS;
    if (ss->o.connect_timeout_ms <= 0) ss->o.connect_timeout_ms = SS_DEFAULT_CONNECT_TIMEOUT_MS;
    if (ss->o.co_timeout_ms <= 0) ss->o.co_timeout_ms = SS_DEFAULT_CO_TIMEOUT_MS;
    if (ss->o.window_versions == 0) ss->o.window_versions = 5000000;

    /* The directory: created if missing (one level). */
    if (mkdir(ss->dir, 0755) != 0 && errno != EEXIST) {
        errf(errmsg, "storage server: cannot create %s: %s", ss->dir, strerror(errno));
        rc = RL_E_IO_ERROR;
        goto fail;
    }
    rl_storage_options so;
    memset(&so, 0, sizeof so);
    so.engine = !o->engine                     ? RL_ENGINE_AUTO
                : !strcmp(o->engine, "ssd")    ? RL_ENGINE_SSD
                : !strcmp(o->engine, "memory") ? RL_ENGINE_MEMORY
                                               : -1;
    if (so.engine < 0) {
        errf(errmsg, "storage server: unknown engine '%s' (memory or ssd)", o->engine);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    so.dir = ss->dir;
    so.no_sync = o->no_sync;
    so.window_versions = ss->o.window_versions;
    so.checkpoint_log_bytes = o->checkpoint_log_bytes;
    if ((rc = rl__storage_open(&so, &ss->st, errmsg)) != RL_OK) {
        errf(errmsg, "%sstorage server: cannot open the engine in %s: %s", errmsg && errmsg->len ? "; " : "", ss->dir,
             rl_error_name(rc));
        goto fail;
    }
    rl_storage_status s;
    rl__storage_get_status(ss->st, &s);
    atomic_store(&ss->applied, s.latest_version);
    atomic_store(&ss->known, s.latest_version);
    atomic_store(&ss->durable, s.durable_version);
    if (s.recovery_tail != RL_TAIL_CLEAN)
        rl__log(RL_LOG_WARN, "storage server %u: recovery cut a %s log tail of %" PRIu64 " bytes from %s (moved to %s)",
                o->id, rl__storage_tail_name(s.recovery_tail), s.recovery_tail_bytes,
                s.recovery_log ? s.recovery_log : "?", s.recovery_moved_to ? s.recovery_moved_to : "(left in place)");

    rl__errdetail nd;
    rl__errdetail_init(&nd, NULL);
    if ((rc = rl__loop_new(0, &ss->loop, &nd)) != RL_OK) {
        errf(errmsg, "storage server: cannot create the event loop: %s", rl__errdetail_get(&nd));
        goto fail;
    }
    /* Every connection, accepted or made (coordinator, peers, fetches), runs the handshake; this
     * process proves membership (loop.h). The loop keeps its own copy of the credentials. */
    if ((rc = rl__loop_set_auth(ss->loop, o->auth)) != RL_OK ||
        (rc = rl__loop_set_limits(ss->loop, o->limits)) != RL_OK)
        goto fail;
    ss->o.auth = NULL;
    ss->o.limits = NULL;
    rc = rl__listen(ss->loop, ss->listen_ip, o->listen_port, on_accept, ss, &ss->lis, &nd);
    if (rc != RL_OK) {
        errf(errmsg, "storage server: cannot listen on %s:%u: %s (%s)", ss->listen_ip, o->listen_port,
             rl_error_name(rc), rl__errdetail_get(&nd));
        goto fail;
    }
    ss->port = rl__listener_port(ss->lis);
    if ((rc = rl__ss_sync_start(ss)) != RL_OK) goto fail;
    if ((rc = rl__ss_workers_start(ss)) != RL_OK) goto fail;
    rl__log(RL_LOG_INFO, "storage server %u: %s:%u, dir %s, version %" PRIu64 "%s", o->id, ss->listen_ip, ss->port,
            ss->dir, s.latest_version, o->no_sync ? ", no sync" : "");
    *out = ss;
    return RL_OK;
fail:
    rl__ss_free(ss);
    return rc;
}

uint16_t rl__ss_port(const rl_ss *ss) { return ss->port; }

/* Started on the loop thread by rl__ss_run. */
static void on_start(rl_loop *loop, void *ud) {
    (void)loop;
    rl__ss_repl_start(ud);
}

int rl__ss_run(rl_ss *ss) {
    if (atomic_load(&ss->stopping)) return atomic_load(&ss->fatal);
    int rc = rl__loop_post(ss->loop, on_start, ss);
    if (rc != RL_OK) return rc;
    rc = rl__loop_run(ss->loop);
    atomic_store(&ss->stopping, 1);
    int f = atomic_load(&ss->fatal);
    return f ? f : rc;
}

void rl__ss_stop(rl_ss *ss) {
    atomic_store(&ss->stopping, 1);
    rl__loop_stop(ss->loop);
}

void rl__ss_free(rl_ss *ss) {
    if (!ss) return;
    atomic_store(&ss->stopping, 1);
    rl__ss_workers_stop(ss); /* workers waiting for peers see `stopping` within a slice */
    rl__ss_sync_stop(ss);
    if (ss->loop) {
        rl__listener_close(ss->lis);
        ss->lis = NULL;
        /* Parked reads: their clients close below; drop them and their timers first. */
        while (ss->parked) {
            ss_parked *p = ss->parked;
            parked_unlink(ss, p);
            rl__free(p);
        }
        rl__ss_peers_free(ss);
        rl__ss_move_free(ss);    /* fetch connections close in rl__loop_free */
        rl__loop_free(ss->loop); /* closes clients (on_client_close frees them) and the
                                    coordinator connection */
        ss->loop = NULL;
    }
    rl__storage_close(ss->st);
    pthread_mutex_lock(&ss->map_mu);
    rl__ss_ranges_free(ss->own, ss->n_own);
    rl__ss_map_free(ss->map);
    pthread_mutex_unlock(&ss->map_mu);
    rl__arena_release(&ss->req_arena);
    rl__arena_release(&ss->s2s_arena);
    rl__arena_release(&ss->co_arena);
    rl__buf_release(&ss->reply);
    rl__buf_release(&ss->co_buf);
    pthread_mutex_destroy(&ss->map_mu);
    pthread_mutex_destroy(&ss->peers_mu);
    pthread_mutex_destroy(&ss->sync_mu);
    pthread_cond_destroy(&ss->sync_cv);
    pthread_mutex_destroy(&ss->job_mu);
    pthread_cond_destroy(&ss->job_cv);
    rl__free(ss->dir);
    rl__free(ss->host);
    rl__free(ss->coord_ip);
    rl__free(ss->coord_host);
    rl__free(ss->listen_ip);
    rl__free(ss);
}
