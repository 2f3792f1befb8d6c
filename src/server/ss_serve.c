/* ss_serve.c — the storage server's accepted connections (clients and peer storage servers): the
 * HELLO, the request table (ss_requests.def) and what net/messages.def says of each message, the
 * reads served on the loop thread (GET, GET_KEY, GET_RANGE, GET_MULTI), parked reads, STATUS,
 * PING and SET_DELAY. A part of the storage server (ss_int.h, "The files"); mapped reads are
 * handed to ss_mapped.c's workers.
 *
 * A request's path on the loop thread:
 *
 *   frame ──▶ on_client_frame: REPLY flag? ─yes─▶ close (a client sends requests only)
 *               │ first frame must be HELLO (bad magic/version: error reply 2100, close); a
 *               │ second HELLO, an unknown or reserved type: close
 *               ▼
 *             dispatch: decode (malformed: log + close) ──▶ RL_MSGF_READ: version check
 *               │ v > known: park (ss_parked: the payload is kept; dispatched again when the
 *               │            version arrives, future_version 1009 at the deadline)
 *               │ v < known − window: transaction_too_old 1007
 *               ▼
 *             the table: no line (COMMIT, PEEK, …): protocol_unexpected_message 3031, close;
 *             RL_MSGF_ADMIN without an admin HELLO: unauthorized_attempt 6001
 *               ▼
 *             the handler: ownership — the shard (owned range) that holds the key / anchor,
 *             else wrong_shard_server 1001 ──▶ read at min(v, applied) ──▶ reply
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
#include "reclayer/error.h"
#include "server/ss_int.h"

/* A request of an accepted connection on its way to its handler (loop thread; valid for the
 * call). */
typedef struct {
    uint16_t type;
    uint64_t id;
    const uint8_t *payload; /* the frame's, or a parked read's copy */
    size_t len;
    uint64_t t0_ns;    /* arrival (a parked read keeps its own) */
    const rl__msg *m;  /* decoded, in ss->req_arena */
    rl__version readv; /* RL_MSGF_READ: the engine version to read at (rl__ss_read_version) */
} ss_req;

/* A handler of the request table (ss_requests.def): answers q on cl's connection. [loop] */
typedef void ss_handler(ss_client *cl, const ss_req *q);

/* ==== small helpers ========================================================================= */

/* Send the error of a read at version v in owned range i that its version rule refuses (1), or
 * nothing (0). */
static int refuse_version(rl__ss *ss, ss_client *cl, uint16_t type, uint64_t id, int i, rl__version v) {
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

/* Log why conn is closed (with its peer) and close it. */
static void close_bad(rl__conn *conn, unsigned flags, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void close_bad(rl__conn *conn, unsigned flags, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rl__log(RL_LOG_WARN, "storage server: closing connection from %s: %s", rl__conn_peer(conn), msg);
    rl__conn_close(conn, flags);
}

/* ==== status ================================================================================ */

static void json_hex(rl_buf *out, const uint8_t *p, uint32_t n) {
    rl__buf_append(out, "\"", 1);
    rl__buf_append_hex(out, p, n);
    rl__buf_append(out, "\"", 1);
}

/* Every delayed connection, with (set) the current setting; their lateness merged into *late
 * (may be NULL) together with that of the closed ones. [loop] */
static void delay_sweep(rl__ss *ss, int set, rl__lat_hist *late) {
    if (late) *late = ss->closed_late;
    rl__lat_hist h;
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

/* See ss_int.h. */
void rl__ss_status(rl__ss *ss, rl_buf *out) {
    rl__storage_status s;
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
                   ",\"mapped_running\":%" PRId64 ",\"mapped_workers\":%d,\"parked_now\":%" PRId64
                   ",\"streams\":%" PRIu64 ",\"stream_chunks\":%" PRIu64 ",\"stream_bytes\":%" PRIu64
                   ",\"stream_cancels\":%" PRIu64 ",\"stream_unacked_max\":%" PRIu64 ",\"streams_waiting\":%" PRId64,
                   (uint64_t)atomic_load(&ss->n_gets), (uint64_t)atomic_load(&ss->n_get_keys),
                   (uint64_t)atomic_load(&ss->n_get_ranges), (uint64_t)atomic_load(&ss->n_get_multi_served),
                   (uint64_t)atomic_load(&ss->n_get_multi_items), (uint64_t)atomic_load(&ss->n_s2s_bytes_sent),
                   (uint64_t)atomic_load(&ss->n_s2s_bytes_received), (int64_t)atomic_load(&ss->mapped_queued),
                   (int64_t)atomic_load(&ss->mapped_running), ss->o.workers, (int64_t)atomic_load(&ss->parked_now),
                   (uint64_t)atomic_load(&ss->n_streams), (uint64_t)atomic_load(&ss->n_stream_chunks),
                   (uint64_t)atomic_load(&ss->n_stream_bytes), (uint64_t)atomic_load(&ss->n_stream_cancels),
                   (uint64_t)atomic_load(&ss->stream_unacked_max), (int64_t)atomic_load(&ss->streams_waiting));
    rl__lat_hist late;
    delay_sweep(ss, 0, &late);
    rl__buf_append_str(out, ",");
    rl__netem_status_json(out, ss->delay_us, ss->jitter_us, &late);
    rl__net_status_json(out, ss->loop);
    uint32_t fetching = rl__ss_move_count(ss);
    rl__buf_printf(out,
                   ",\"moves_in\":%" PRIu64 ",\"fetched_rows\":%" PRIu64 ",\"fetching\":%u"
                   ",\"dropped_ranges\":%" PRIu64 ",\"watches_now\":%" PRId64 ",\"watches\":%" PRIu64
                   ",\"watches_fired\":%" PRIu64 "}",
                   (uint64_t)atomic_load(&ss->n_fetches_done), (uint64_t)atomic_load(&ss->n_fetched_rows), fetching,
                   (uint64_t)atomic_load(&ss->n_dropped), (int64_t)atomic_load(&ss->watches_now),
                   (uint64_t)atomic_load(&ss->n_watches), (uint64_t)atomic_load(&ss->n_watches_fired));
}

/* ==== parked reads ========================================================================== */

static void dispatch(rl__ss *ss, ss_client *cl, uint16_t type, uint64_t id, const uint8_t *payload, size_t len,
                     uint64_t t0_ns, int may_park);

static void parked_unlink(rl__ss *ss, ss_parked *p) {
    if (p->prev) p->prev->next = p->next;
    else ss->parked = p->next;
    if (p->next) p->next->prev = p->prev;
    p->prev = p->next = NULL;
    atomic_fetch_sub(&ss->parked_now, 1);
}

/* The deadline of a parked read: answer future_version. */
static void on_park_deadline(rl__loop *loop, void *ud) {
    (void)loop;
    ss_parked *p = ud;
    rl__ss *ss = p->cl->ss;
    parked_unlink(ss, p);
    atomic_fetch_add(&ss->n_future, 1);
    rl__ss_send_error(p->cl->conn, p->type, p->id, RL_E_FUTURE_VERSION,
                      "version %" PRIu64 " is not known to storage server %u after %d ms "
                      "(known %" PRIu64 ")",
                      p->version, ss->o.id, ss->o.future_wait_ms, (uint64_t)atomic_load(&ss->known));
    rl__free(p);
}

/* Park a request at version v (its payload copied). */
static void park(rl__ss *ss, ss_client *cl, uint16_t type, uint64_t id, rl__version v, const uint8_t *payload,
                 size_t len, uint64_t t0_ns) {
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

/* See ss_int.h: the wake_parked hook (ss_life.c sets it; ss_coord.c calls it through
 * rl__ss_wake_parked when known advanced). */
void rl__ss_serve_wake_parked(rl__ss *ss) {
    rl__version known = atomic_load(&ss->known);
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
static void drop_parked_of(rl__ss *ss, ss_client *cl) {
    ss_parked *p = ss->parked, *next;
    for (; p; p = next) {
        next = p->next;
        if (p->cl != cl) continue;
        parked_unlink(ss, p);
        rl__loop_timer_cancel(ss->loop, p->timer);
        rl__free(p);
    }
}

typedef struct ss_watch ss_watch;
static void watch_unlink(rl__ss *ss, ss_watch *w);
static void watch_free(ss_watch *w);

/* See ss_int.h. */
void rl__ss_serve_free_parked(rl__ss *ss) {
    while (ss->parked) {
        ss_parked *p = ss->parked;
        parked_unlink(ss, p);
        rl__free(p);
    }
    while (ss->watches) {
        ss_watch *w = ss->watches;
        watch_unlink(ss, w);
        watch_free(w);
    }
}

/* ==== watches (docs/design.md §8.4, "Watches") ============================================== */

/* A WATCH_VALUE request waiting for a change of its key: answered changed when a version this
 * server applies leaves another value (rl__ss_serve_watch_applied), unchanged at its hold
 * timer, wrong_shard_server when its range moves away; dropped with its client. Loop thread. */
struct ss_watch {
    struct ss_watch *prev, *next;
    ss_client *cl;
    uint64_t id;
    uint64_t timer; /* the hold timer's id */
    uint8_t *key;   /* heap copies */
    uint32_t key_len;
    int present;
    uint8_t *value;
    uint32_t value_len;
};

static void watch_unlink(rl__ss *ss, ss_watch *w) {
    if (w->prev) w->prev->next = w->next;
    else ss->watches = w->next;
    if (w->next) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    atomic_fetch_sub(&ss->watches_now, 1);
}

static void watch_free(ss_watch *w) {
    rl__free(w->key);
    rl__free(w->value);
    rl__free(w);
}

static void watch_reply(rl__ss *ss, ss_client *cl, uint64_t id, int changed, rl__version v) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_WATCH_VALUE;
    m.flags = RL_FRAME_REPLY;
    m.u.watch_value_reply.changed = changed ? 1 : 0;
    m.u.watch_value_reply.version = v;
    if (changed) atomic_fetch_add(&ss->n_watches_fired, 1);
    rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}

/* Take w out (its timer too: cancel_timer 1) and answer it. */
static void watch_end(rl__ss *ss, ss_watch *w, int cancel_timer, int changed, rl__version v) {
    watch_unlink(ss, w);
    if (cancel_timer) rl__loop_timer_cancel(ss->loop, w->timer);
    watch_reply(ss, w->cl, w->id, changed, v);
    watch_free(w);
}

static void on_watch_hold(rl__loop *loop, void *ud) {
    (void)loop;
    ss_watch *w = ud;
    rl__ss *ss = w->cl->ss;
    watch_end(ss, w, 0, 0, atomic_load(&ss->applied));
}

static void drop_watches_of(rl__ss *ss, ss_client *cl) {
    for (ss_watch *w = ss->watches, *next; w; w = next) {
        next = w->next;
        if (w->cl != cl) continue;
        watch_unlink(ss, w);
        rl__loop_timer_cancel(ss->loop, w->timer);
        watch_free(w);
    }
}

/* WATCH_VALUE: a version not known yet waits as a parked read; the key's shard must be held at
 * the version (a range moved in after it is checked from its move on: what came before was the
 * old owner's to report); a change already in the window (rl__storage_watch_changed: the value
 * now or any version above the request's) answers at once, otherwise the request waits. */
static void do_watch_value(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    const rl__msg_watch_value_req *r = &q->m->u.watch_value_req;
    if (r->version > atomic_load(&ss->known)) {
        park(ss, cl, q->type, q->id, r->version, q->payload, q->len, q->t0_ns);
        return;
    }
    int oi = rl__ss_own_find(ss, r->key, r->key_len, 0);
    rl__version after = r->version;
    int rc = oi < 0 ? RL_E_WRONG_SHARD_SERVER : rl__ss_own_version(ss, oi, r->version);
    if (rc == RL_E_TRANSACTION_TOO_OLD) after = ss->own[oi].since, rc = RL_OK;
    if (rc == RL_OK && ss->own[oi].until) rc = RL_E_WRONG_SHARD_SERVER; /* moving away: ask the next owner */
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_WATCH_VALUE, q->id, rc, "storage server %u does not hold the key", ss->o.id);
        return;
    }
    atomic_fetch_add(&ss->n_watches, 1);
    int changed = 0;
    rl__version through = 0;
    rc = rl__storage_watch_changed(ss->st, after, r->key, r->key_len, r->present, r->value, r->value_len, &changed,
                                   &through);
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_WATCH_VALUE, q->id, rc, "cannot check the watch");
        return;
    }
    if (changed) {
        watch_reply(ss, cl, q->id, 1, through);
        return;
    }
    ss_watch *w = rl__calloc(1, sizeof *w);
    if (w) {
        w->key = rl__ss_memdup(r->key, r->key_len);
        w->value = rl__ss_memdup(r->value, r->value_len);
    }
    if (!w || !w->key || !w->value ||
        rl__loop_timer_add(ss->loop, q->t0_ns + (uint64_t)r->hold_ms * 1000000u, on_watch_hold, w, &w->timer) !=
            RL_OK) {
        if (w) watch_free(w);
        rl__ss_send_error(cl->conn, RL_MSG_WATCH_VALUE, q->id, RL_E_OUT_OF_MEMORY, "cannot keep the watch");
        return;
    }
    w->cl = cl;
    w->id = q->id;
    w->key_len = r->key_len;
    w->present = r->present;
    w->value_len = r->value_len;
    w->next = ss->watches;
    if (w->next) w->next->prev = w;
    ss->watches = w;
    atomic_fetch_add(&ss->watches_now, 1);
}

/* 1 when mutation m writes key k. */
static int mut_touches(const rl__mutation *m, const uint8_t *k, uint32_t kl) {
    if (m->type == RL_MUT_CLEAR_RANGE)
        return rl__bytes_cmp(k, kl, m->p1, m->len1) >= 0 && rl__bytes_cmp(k, kl, m->p2, m->len2) < 0;
    return !rl__bytes_cmp(k, kl, m->p1, m->len1);
}

/* See ss_int.h: every watch whose key version v wrote with another value is answered changed. */
void rl__ss_serve_watch_applied(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n) {
    for (ss_watch *w = ss->watches, *next; w; w = next) {
        next = w->next;
        int touched = 0;
        for (uint32_t i = 0; i < n && !touched; i++) touched = mut_touches(&muts[i], w->key, w->key_len);
        if (!touched) continue;
        int present = 0, differs = 1;
        const uint8_t *val = NULL;
        uint32_t vl = 0;
        rl__arena_reset(&ss->req_arena);
        if (rl__storage_get(ss->st, v, w->key, w->key_len, &ss->req_arena, &present, &val, &vl) == RL_OK)
            differs = present != w->present || (present && (vl != w->value_len || (vl && memcmp(val, w->value, vl))));
        if (differs) watch_end(ss, w, 1, 1, v);
    }
}

/* See ss_int.h: the watches of a range that moved away go to its next owner (the client's
 * retry after wrong_shard_server, with the map refreshed). */
void rl__ss_serve_watch_moved(rl__ss *ss, const rl__keyrange *k) {
    for (ss_watch *w = ss->watches, *next; w; w = next) {
        next = w->next;
        if (rl__bytes_cmp(w->key, w->key_len, k->begin, k->begin_len) < 0 ||
            rl__bytes_cmp(w->key, w->key_len, k->end, k->end_len) >= 0)
            continue;
        watch_unlink(ss, w);
        rl__loop_timer_cancel(ss->loop, w->timer);
        rl__ss_send_error(w->cl->conn, RL_MSG_WATCH_VALUE, w->id, RL_E_WRONG_SHARD_SERVER,
                          "storage server %u: the range moved away", ss->o.id);
        watch_free(w);
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

/* GET: the value at the read version, sent gathered (no encoding buffer) in the common case. */
static void do_get(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    uint64_t id = q->id;
    const rl__msg_get_req *r = &q->m->u.get_req;
    rl__version readv = q->readv;
    atomic_fetch_add(&ss->n_reads, 1);
    atomic_fetch_add(&ss->n_gets, 1);
    rl__msg m;
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

/* GET_KEY: the selector resolved in the shard that holds it (invariant 4). */
static void do_get_key(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    uint64_t id = q->id;
    const rl__msg_get_key_req *r = &q->m->u.get_key_req;
    rl__version readv = q->readv;
    atomic_fetch_add(&ss->n_reads, 1);
    atomic_fetch_add(&ss->n_get_keys, 1);
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
    rl__select_result s;
    int rc = rl__storage_select(ss->st, readv, &r->sel, sh->begin, sh->begin_len, sh->begin_len == 0, sh->end,
                                sh->end_len, is_ff(sh->end, sh->end_len), &ss->req_arena, &s);
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_KEY, id, rc, "selector at version %" PRIu64 " failed", readv);
        return;
    }
    rl__msg m;
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
static int range_shard(rl__ss *ss, const rl_key_selector *begin, const rl_key_selector *end, int reverse, rl_arena *a,
                       int *out_oom) {
    uint32_t al;
    const uint8_t *an = sel_anchor(reverse ? end : begin, a, &al);
    *out_oom = an == NULL;
    if (!an) return -1;
    return rl__ss_own_find(ss, an, al, reverse);
}

/* GET_RANGE: rows of the shard the range runs in (invariant 4). */
static void do_get_range(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    uint64_t id = q->id;
    const rl__msg_get_range_req *r = &q->m->u.get_range_req;
    rl__version readv = q->readv;
    atomic_fetch_add(&ss->n_reads, 1);
    atomic_fetch_add(&ss->n_get_ranges, 1);
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
    rl__range_bounds bd;
    int rc = rl__storage_range_bounds(ss->st, readv, &r->begin, &r->end, sh->begin, sh->begin_len, sh->begin_len == 0,
                                      sh->end, sh->end_len, hi_max, r->reverse, &ss->req_arena, &bd);
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_RANGE;
    m.flags = RL_FRAME_REPLY;
    rl__msg_get_range_reply *g = &m.u.get_range_reply;
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

/* GET_METRICS: the byte sample's estimate or cuts of the range clipped to the owned range
 * holding its begin (docs/design.md §4, "Size estimates"), with read_through where the range goes
 * on past it. An owned range that moved away, or moved here after the latest applied version,
 * is wrong_shard_server: the client refreshes its map and asks again. */
static void do_get_metrics(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    uint64_t id = q->id;
    const rl__msg_get_metrics_req *r = &q->m->u.get_metrics_req;
    int i = rl__ss_own_find(ss, r->range.begin, r->range.begin_len, 0);
    if (i < 0 || rl__ss_own_version(ss, i, rl__storage_latest_version(ss->st)) != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_METRICS, id, RL_E_WRONG_SHARD_SERVER,
                          "storage server %u does not hold the range's begin", ss->o.id);
        return;
    }
    const ss_range *sh = &ss->own[i];
    const uint8_t *end = r->range.end;
    uint32_t end_len = r->range.end_len;
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_METRICS;
    m.flags = RL_FRAME_REPLY;
    rl__msg_get_metrics_reply *g = &m.u.get_metrics_reply;
    if (rl__bytes_cmp(end, end_len, sh->end, sh->end_len) > 0) { /* the range goes on past this shard */
        end = sh->end;
        end_len = sh->end_len;
        g->read_through = sh->end;
        g->read_through_len = sh->end_len;
    }
    int rc = RL_OK;
    if (r->op == RL_METRICS_ESTIMATE) {
        rc = rl__storage_estimate_bytes(ss->st, r->range.begin, r->range.begin_len, end, end_len, &g->bytes);
    } else {
        rl_slice *cuts = NULL;
        int n = 0;
        rc = rl__storage_split_points(ss->st, r->range.begin, r->range.begin_len, end, end_len, r->chunk,
                                      &ss->req_arena, &cuts, &n);
        g->cuts = cuts;
        g->n_cuts = (uint32_t)n;
    }
    if (rc != RL_OK) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_METRICS, id, rc, "size estimate failed");
        return;
    }
    rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}

/* GET_MULTI (from a peer storage server's mapped read): local reads only (ss_mapped.c). */
static void do_get_multi(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    atomic_fetch_add(&ss->n_reads, 1);
    atomic_fetch_add(&ss->n_get_multi_served, 1);
    atomic_fetch_add(&ss->n_get_multi_items, q->m->u.get_multi_req.n_items);
    rl__ss_get_multi(ss, cl, q->id, &q->m->u.get_multi_req, q->readv);
}

/* GET_MAPPED_RANGE: checked against the shard it runs in here, then queued for a worker with a
 * copy of its payload (ss_mapped.c). */
static void do_get_mapped_range(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    const rl__msg_get_mapped_range_req *r =
        q->type == RL_MSG_GET_MAPPED_STREAM ? &q->m->u.get_mapped_stream_req.r : &q->m->u.get_mapped_range_req;
    int oom = 0;
    int i = range_shard(ss, &r->begin, &r->end, r->reverse, &ss->req_arena, &oom);
    if (i < 0) {
        rl__ss_send_error(cl->conn, q->type, q->id, oom ? RL_E_OUT_OF_MEMORY : RL_E_WRONG_SHARD_SERVER,
                          "storage server %u does not hold the range's %s anchor", ss->o.id,
                          r->reverse ? "end" : "begin");
        return;
    }
    if (refuse_version(ss, cl, q->type, q->id, i, r->version)) return;
    atomic_fetch_add(&ss->n_mapped, 1);
    int rc = rl__ss_mapped_submit(ss, cl, q->type, q->id, q->payload, q->len, q->t0_ns, i);
    if (rc != RL_OK) rl__ss_send_error(cl->conn, q->type, q->id, rc, "cannot queue the mapped read");
}

/* GET_MAPPED_STREAM: as GET_MAPPED_RANGE (its first fields are that request's). */
static void do_get_mapped_stream(ss_client *cl, const ss_req *q) { do_get_mapped_range(cl, q); }

/* MAPPED_CREDIT (one way: no reply): the flow control of a stream this client runs. */
static void do_mapped_credit(ss_client *cl, const ss_req *q) {
    rl__ss_stream_credit(cl->ss, cl->conn, q->id, &q->m->u.mapped_credit);
}

/* ==== PING, STATUS, SET_DELAY ================================================================ */

/* PING: the payload back, with this process's monotonic clock. */
static void do_ping(ss_client *cl, const ss_req *q) {
    rl__msg r;
    memset(&r, 0, sizeof r);
    r.type = RL_MSG_PING;
    r.flags = RL_FRAME_REPLY;
    r.u.ping_reply.payload = q->m->u.ping_req.payload;
    r.u.ping_reply.payload_len = q->m->u.ping_req.payload_len;
    r.u.ping_reply.server_mono_ns = rl__clock_mono_ns();
    rl__ss_send_msg(cl->conn, q->id, &r, &cl->ss->reply);
}

/* STATUS: the JSON of rl__ss_status. */
static void do_status(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    rl_buf js;
    rl__buf_init(&js);
    rl__ss_status(ss, &js);
    rl__msg r;
    memset(&r, 0, sizeof r);
    r.type = RL_MSG_STATUS;
    r.flags = RL_FRAME_REPLY;
    r.u.status_reply.json = js.data;
    r.u.status_reply.json_len = (uint32_t)js.len;
    if (rl__buf_error(&js)) rl__ss_send_error(cl->conn, q->type, q->id, RL_E_OUT_OF_MEMORY, "status: out of memory");
    else rl__ss_send_msg(cl->conn, q->id, &r, &ss->reply);
    rl__buf_release(&js);
}

/* SET_DELAY (an admin connection: dispatch checked): check the range, then give every delayed
 * connection the new setting. */
static void do_set_delay(ss_client *cl, const ss_req *q) {
    rl__ss *ss = cl->ss;
    rl__errdetail dwhy;
    rl__errdetail_init(&dwhy, NULL);
    const rl__msg_set_delay_req *r = &q->m->u.set_delay_req;
    if (rl__netem_check(r->delay_us, r->jitter_us, &dwhy) != RL_OK) {
        rl__ss_send_error(cl->conn, q->type, q->id, RL_E_INVALID_ARGUMENT, "SET_DELAY: %s", rl__errdetail_get(&dwhy));
        return;
    }
    ss->delay_us = r->delay_us;
    ss->jitter_us = r->jitter_us;
    delay_sweep(ss, 1, NULL); /* queued frames keep their release times: no reordering */
    rl__log(RL_LOG_INFO, "storage server %u: injected delay now %u us (jitter %u us), asked by %s", ss->o.id,
            r->delay_us, r->jitter_us, rl__conn_peer(cl->conn));
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rep.type = RL_MSG_SET_DELAY;
    rep.flags = RL_FRAME_REPLY;
    rl__ss_send_msg(cl->conn, q->id, &rep, &ss->reply);
}

/* ==== the request table ====================================================================== */

/* One line of ss_requests.def. */
typedef struct {
    ss_handler *handler; /* NULL: the storage server does not answer the message */
    unsigned flags;      /* the message's RL_MSGF_* */
    size_t version_at;   /* RL_MSGF_READ: the offset in rl__msg of the read version */
} ss_request;

/* What the storage server answers after HELLO, by message type. */
static const ss_request REQUESTS[RL_MSG_TYPE_LIMIT] = {
#define SS_FIRST_FRAME(NAME)
#define SS_REQUEST(NAME, HANDLER) [RL_MSG_##NAME] = {HANDLER, RL_MSGF_OF_##NAME, 0},
#define SS_READ(NAME, HANDLER, VERSION) [RL_MSG_##NAME] = {HANDLER, RL_MSGF_OF_##NAME, offsetof(rl__msg, u.VERSION)},
#include "server/ss_requests.def"
#undef SS_FIRST_FRAME
#undef SS_REQUEST
#undef SS_READ
};

/* The table agrees with messages.def: every line is a storage server message, READ exactly where
 * it says so (with a version), HELLO the first frame ... */
#define SS_FIRST_FRAME(NAME) \
    _Static_assert(RL_MSG_##NAME == RL_MSG_HELLO && (RL_MSGF_OF_##NAME & RL_MSGF_STORAGE), #NAME ": not HELLO");
#define SS_REQUEST(NAME, HANDLER)                                                             \
    _Static_assert((RL_MSGF_OF_##NAME & (RL_MSGF_STORAGE | RL_MSGF_READ)) == RL_MSGF_STORAGE, \
                   #NAME ": not a storage server request in net/messages.def, or a read (SS_READ)");
#define SS_READ(NAME, HANDLER, VERSION)                                                                        \
    _Static_assert((RL_MSGF_OF_##NAME & (RL_MSGF_STORAGE | RL_MSGF_READ)) == (RL_MSGF_STORAGE | RL_MSGF_READ), \
                   #NAME ": not a storage server read in net/messages.def");                                   \
    _Static_assert(sizeof(((rl__msg *)0)->u.VERSION) == sizeof(rl__version), #NAME ": the version is a u64");
#include "server/ss_requests.def"
#undef SS_FIRST_FRAME
#undef SS_REQUEST
#undef SS_READ
/* ... and every storage server message has a line. */
#define SS_FIRST_FRAME(NAME) +1
#define SS_REQUEST(NAME, HANDLER) +1
#define SS_READ(NAME, HANDLER, VERSION) +1
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) +((FLAGS)&RL_MSGF_STORAGE ? 1 : 0)
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) +((FLAGS)&RL_MSGF_STORAGE ? 1 : 0)
_Static_assert(0
#include "server/ss_requests.def"
                   == 0
#include "net/messages.def"
               ,
               "a storage server message of net/messages.def has no line in ss_requests.def");
#undef SS_FIRST_FRAME
#undef SS_REQUEST
#undef SS_READ
#undef RL_MSG
#undef RL_MSG_ONE_WAY

/* Handle one request of an accepted connection (after HELLO): decode, the read version
 * (RL_MSGF_READ), the table, the admin check, the handler. may_park: a read at a version not known
 * yet waits (0 when dispatched again from the parked list, whose versions are known now). */
static void dispatch(rl__ss *ss, ss_client *cl, uint16_t type, uint64_t id, const uint8_t *payload, size_t len,
                     uint64_t t0_ns, int may_park) {
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__arena_reset(&ss->req_arena);
    int rc = rl__msg_decode(type, 0, payload, len, &ss->req_arena, &m, &why);
    if (rc == RL_E_OUT_OF_MEMORY) {
        rl__ss_send_error(cl->conn, type, id, rc, "out of memory decoding the request");
        return;
    }
    if (rc != RL_OK) {
        close_bad(cl->conn, 0, "%s", rl__errdetail_get(&why));
        return;
    }
    const ss_request *rq = &REQUESTS[type]; /* decoded: a message, so below RL_MSG_TYPE_LIMIT */
    ss_req q = {type, id, payload, len, t0_ns, &m, 0};
    if (rq->flags & RL_MSGF_READ) {
        rl__version v;
        memcpy(&v, (const uint8_t *)&m + rq->version_at, sizeof v);
        rc = rl__ss_read_version(ss, v, &q.readv);
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
    if (!rq->handler) {
        /* A valid message this role does not answer (COMMIT, PEEK, …): say so, then close. */
        rl__ss_send_error(cl->conn, type, id, RL_E_PROTOCOL_UNEXPECTED_MESSAGE, "a storage server does not answer %s",
                          rl__msg_type_name(type));
        close_bad(cl->conn, RL_CONN_CLOSE_FLUSH, "%s request sent to a storage server", rl__msg_type_name(type));
        return;
    }
    if ((rq->flags & RL_MSGF_ADMIN) && cl->role != RL_ROLE_ADMIN) {
        rl__ss_send_error(cl->conn, type, id, RL_E_UNAUTHORIZED_ATTEMPT,
                          "%s is an admin request (HELLO role 3, with the cluster's key file); this connection's "
                          "HELLO said role %u",
                          rl__msg_type_name(type), cl->role);
        return;
    }
    rq->handler(cl, &q);
}

/* ==== accepted connections ================================================================== */

/* A client closed: its lateness (if delayed) and parked reads go, then the client. */
static void on_client_close(rl__conn *conn, int err, void *ud) {
    (void)err;
    ss_client *cl = ud;
    rl__ss *ss = cl->ss;
    if (cl->delayed) rl__ss_delay_closed(ss, conn);
    drop_parked_of(ss, cl);
    drop_watches_of(ss, cl);
    if (cl->prev) cl->prev->next = cl->next;
    else ss->clients = cl->next;
    if (cl->next) cl->next->prev = cl->prev;
    rl__conn_release(cl->conn);
    rl__free(cl);
}

/* The HELLO of an accepted connection (its first frame; ss_requests.def's SS_FIRST_FRAME). */
static void client_hello(rl__ss *ss, ss_client *cl, uint64_t id, const uint8_t *payload, size_t len) {
    rl__msg_hello_req h;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_hello_req_decode(payload, len, NULL, &h, &why);
    if (rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION) {
        rl__ss_send_error(cl->conn, RL_MSG_HELLO, id, rc,
                          "this server speaks protocol %u (magic 0x%08x); got version %u magic "
                          "0x%08x",
                          RL_PROTOCOL_VERSION, RL_PROTOCOL_MAGIC, h.protocol_version, h.magic);
        close_bad(cl->conn, RL_CONN_CLOSE_FLUSH, "incompatible HELLO: %s", rl__errdetail_get(&why));
        return;
    }
    if (rc != RL_OK) {
        close_bad(cl->conn, 0, "%s", rl__errdetail_get(&why));
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
    rl__msg m;
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

/* A frame of an accepted connection: the framing rules (a request; HELLO first and once; a known
 * type), then dispatch. */
static void on_client_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    ss_client *cl = ud;
    rl__ss *ss = cl->ss;
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

/* See ss_int.h: a client per accepted connection, on ss->clients until it closes. */
void rl__ss_on_accept(rl__listener *lis, rl__conn *conn, void *ud) {
    (void)lis;
    rl__ss *ss = ud;
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
