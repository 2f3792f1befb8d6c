/* ss_coord.c — the storage server's side of the coordinator: its connection (HELLO,
 * REGISTER_STORAGE, GET_SHARD_MAP), the PEEK long-poll loop that applies its shards' mutations,
 * the background sync and POP, and reconnection with backoff. Everything here runs on the loop
 * thread except sync_main (the sync thread). A part of the storage server (ss_int.h, "The
 * files"): it drives ss_move.c (every version goes to the engine through rl__ss_move_apply, PEEK
 * changes to rl__ss_move_assign / _remove) and tells ss_mapped.c of a new map; parked reads
 * (ss_serve.c) are woken through the core's wake_parked hook; ss_move.c asks for a sync through
 * the maybe_sync hook (rl__ss_repl_maybe_sync).
 *
 * State of the coordinator connection (ss->co_state):
 *
 *   DOWN ──co_connect──▶ CONNECTING ──on_co_connect ok: send HELLO + REGISTER_STORAGE──▶ HELLO
 *    ▲                        │ connect failed                                          │
 *    │◀── retry timer ◀───────┘ (backoff 50 ms doubling to 1 s)                         │
 *    │                                                                                   ▼
 *    └◀── on_co_close (backoff) ◀── READY ◀── REGISTER reply: owned ranges, GET_SHARD_MAP,
 *                                     │       first PEEK, POP(durable)
 *                                     └── PEEK reply: apply, known = end_version, next PEEK
 *
 * Invariants:
 *   1. Versions are applied in increasing order, each exactly once: a PEEK asks for versions
 *      after `known`, and a version <= applied is skipped (after a reconnect, or a reply the
 *      coordinator sent twice).
 *   2. known only grows; after a PEEK reply known = max(known, end_version): every mutation of
 *      this server's shards up to known is applied.
 *   3. At most one PEEK is outstanding (co_peek_id); a reply with another id is stale and dropped.
 *   4. Sync: at most one at a time (sync_busy), at most one start per sync_interval_ms. Before a
 *      sync starts, a known version the engine has not seen (versions with nothing for this
 *      server) is applied as an empty version, so the engine's durable version — what
 *      REGISTER_STORAGE reports after a restart, and what POP tells the log it may drop —
 *      covers everything known. POP is sent only after the sync that covers it succeeded.
 *   5. A failed apply or sync is fatal (rl__ss_fatal): the server stops rather than serve or
 *      acknowledge from an engine that lost writes.
 *   6. Every wait on the coordinator has a timeout (rl__ss_repl_tick; co_timeout_ms, 5 s): no
 *      REGISTER_STORAGE reply in time, or no PEEK reply within max_wait_ms plus that, drops the
 *      connection (and reconnects); a GET_SHARD_MAP unanswered that long may be sent again.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/ss_int.h"

static void co_connect(rl__ss *ss);
static void maybe_sync(rl__ss *ss);

/* ==== the shard map ========================================================================= */

/* A heap copy of a decoded GET_SHARD_MAP reply (NULL on OOM or an address that does not fit). */
static ss_map *map_copy(const rl__msg_get_shard_map_reply *r, const char *own_host) {
    ss_map *m = rl__calloc(1, sizeof *m);
    if (!m) return NULL;
    m->version = r->version;
    m->servers = rl__calloc(r->n_servers ? r->n_servers : 1, sizeof *m->servers);
    m->shards = rl__calloc(r->n_shards ? r->n_shards : 1, sizeof *m->shards);
    if (!m->servers || !m->shards) goto fail;
    for (uint32_t i = 0; i < r->n_servers; i++) {
        const rl__msg_server *s = &r->servers[i];
        ss_server *d = &m->servers[i];
        if (s->address_len >= sizeof d->addr) goto fail;
        d->id = s->id;
        d->role = s->role;
        memcpy(d->addr, s->address, s->address_len);
        d->addr[s->address_len] = 0;
        d->port = s->port;
        d->healthy = s->healthy;
        d->same_host = !rl__netem_applies(own_host, strlen(own_host), s->host, s->host_len, s->role);
        m->n_servers++;
    }
    for (uint32_t i = 0; i < r->n_shards; i++) {
        const rl__msg_shard *s = &r->shards[i];
        ss_shard *d = &m->shards[i];
        d->r.begin = rl__ss_memdup(s->begin, s->begin_len);
        d->r.end = rl__ss_memdup(s->end, s->end_len);
        m->n_shards++;
        if (!d->r.begin || !d->r.end) goto fail;
        d->r.begin_len = s->begin_len;
        d->r.end_len = s->end_len;
        d->n_team = s->n_team;
        memcpy(d->team, s->team, s->n_team * sizeof s->team[0]);
    }
    return m;
fail:
    rl__ss_map_free(m);
    return NULL;
}

/* ==== sending to the coordinator ============================================================ */

static void send_peek(rl__ss *ss) {
    if (ss->co_state != SS_CO_READY || ss->co_peek_id || atomic_load(&ss->stopping)) return;
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_PEEK;
    m.u.peek_req.storage_id = ss->o.id;
    m.u.peek_req.after_version = atomic_load(&ss->known);
    m.u.peek_req.max_bytes = 0;
    m.u.peek_req.max_wait_ms = (uint32_t)ss->o.peek_wait_ms;
    ss->co_peek_after = m.u.peek_req.after_version;
    ss->co_peek_sent_ns = rl__clock_mono_ns();
    if (rl__ss_co_send(ss, &m, &ss->co_peek_id) != RL_OK) ss->co_peek_id = 0;
}

static void send_map_request(rl__ss *ss) {
    if (ss->co_state != SS_CO_READY || ss->co_map_id) return;
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_SHARD_MAP;
    m.u.get_shard_map_req.min_version = 0;
    atomic_store(&ss->map_refresh_wanted, 0);
    ss->last_map_ns = rl__clock_mono_ns();
    if (rl__ss_co_send(ss, &m, &ss->co_map_id) != RL_OK) ss->co_map_id = 0;
}

static void send_pop(rl__ss *ss) {
    if (ss->co_state != SS_CO_READY) return;
    rl__version d = atomic_load(&ss->durable);
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_POP;
    m.u.pop_req.storage_id = ss->o.id;
    m.u.pop_req.durable_version = d;
    if (rl__ss_co_send(ss, &m, NULL) == RL_OK) atomic_store(&ss->popped, d);
}

/* ==== connecting ============================================================================ */

static void on_retry(rl__loop *loop, void *ud) {
    (void)loop;
    rl__ss *ss = ud;
    ss->co_retry_timer = 0;
    co_connect(ss);
}

static void schedule_retry(rl__ss *ss) {
    if (atomic_load(&ss->stopping) || ss->co_retry_timer) return;
    uint32_t b = ss->co_backoff_ms ? ss->co_backoff_ms * 2 : 50;
    if (b > 1000) b = 1000;
    ss->co_backoff_ms = b;
    if (rl__loop_timer_add(ss->loop, rl__clock_mono_ns() + (uint64_t)b * 1000000u, on_retry, ss, &ss->co_retry_timer) !=
        RL_OK)
        ss->co_retry_timer = 0;
}

/* Close the coordinator connection after a protocol error (on_co_close reconnects). */
static void co_bad(rl__ss *ss, const char *what) {
    rl__log(RL_LOG_WARN, "storage server %u: closing the coordinator connection (%s): %s", ss->o.id,
            ss->co ? rl__conn_peer(ss->co) : "?", what);
    if (ss->co) rl__conn_close(ss->co, 0);
}

static void on_co_close(rl__conn *conn, int err, void *ud) {
    rl__ss *ss = ud;
    if (ss->co == conn && ss->co_delayed) rl__ss_delay_closed(ss, conn);
    if (ss->co == conn) {
        if (!atomic_load(&ss->stopping))
            rl__log(atomic_load(&ss->registered) ? RL_LOG_WARN : RL_LOG_INFO,
                    "storage server %u: lost the coordinator connection (%s: %s); reconnecting", ss->o.id,
                    rl_error_name(err), rl__conn_close_reason(conn));
        ss->co = NULL;
        ss->co_state = SS_CO_DOWN;
        ss->co_peek_id = ss->co_reg_id = ss->co_map_id = 0;
        atomic_store(&ss->registered, 0);
        schedule_retry(ss);
    }
    rl__conn_release(conn);
}

/* REGISTER_STORAGE reply: the ranges this server owns and where to peek from. */
static void on_register(rl__ss *ss, const rl__msg_register_storage_reply *r) {
    ss_range *own = rl__calloc(r->n_ranges ? r->n_ranges : 1, sizeof *own);
    uint32_t n = 0;
    if (!own) {
        co_bad(ss, "out of memory for the owned ranges");
        return;
    }
    for (; n < r->n_ranges; n++) {
        own[n].begin = rl__ss_memdup(r->ranges[n].begin, r->ranges[n].begin_len);
        own[n].end = rl__ss_memdup(r->ranges[n].end, r->ranges[n].end_len);
        own[n].begin_len = r->ranges[n].begin_len;
        own[n].end_len = r->ranges[n].end_len;
        if (!own[n].begin || !own[n].end) {
            rl__ss_ranges_free(own, n + 1);
            co_bad(ss, "out of memory for the owned ranges");
            return;
        }
    }
    pthread_mutex_lock(&ss->map_mu);
    ss_range *old = ss->own;
    uint32_t n_old = ss->n_own;
    ss->own = own;
    ss->n_own = n;
    pthread_mutex_unlock(&ss->map_mu);
    rl__ss_ranges_free(old, n_old);
    rl__ss_move_on_register(ss); /* the coordinator assigns moving ranges again */

    rl__version known = atomic_load(&ss->known);
    if (r->start_version > known) {
        /* The coordinator says nothing of this server's shards lies in (known, start]. */
        rl__log(RL_LOG_INFO,
                "storage server %u: the coordinator starts it at version %" PRIu64 " (it knew %" PRIu64 ")", ss->o.id,
                r->start_version, known);
        atomic_store(&ss->known, r->start_version);
    }
    ss->co_state = SS_CO_READY;
    ss->co_backoff_ms = 0;
    atomic_store(&ss->registered, 1);
    atomic_fetch_add(&ss->registrations, 1);
    rl__log(RL_LOG_INFO,
            "storage server %u: registered with the coordinator %s:%u (%u ranges, "
            "start version %" PRIu64 ", applied %" PRIu64 ")",
            ss->o.id, ss->coord_ip, ss->o.coordinator_port, n, r->start_version, (uint64_t)atomic_load(&ss->applied));
    send_map_request(ss);
    send_peek(ss);
    if (atomic_load(&ss->durable) > 0) send_pop(ss);
    rl__ss_wake_parked(ss);
    maybe_sync(ss);
}

/* PEEK reply: apply every new version in order, then the ownership changes; known moves to
 * end_version (invariants 1, 2). */
static void on_peek(rl__ss *ss, const rl__msg_peek_reply *r) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    if (rl__msg_peek_reply_check(r, ss->co_peek_after, &why) != RL_OK) {
        co_bad(ss, rl__errdetail_get(&why));
        return;
    }
    for (uint32_t i = 0; i < r->n_versions; i++) {
        const rl__msg_peek_version *pv = &r->versions[i];
        if (pv->version <= atomic_load(&ss->applied)) continue;
        int rc = rl__ss_move_apply(ss, pv->version, pv->muts, pv->n_muts); /* ss_move.c */
        if (rc != RL_OK) {
            char what[96];
            snprintf(what, sizeof what, "applying version %" PRIu64, pv->version);
            rl__ss_fatal(ss, rc, what);
            return;
        }
        atomic_store(&ss->applied, pv->version);
        if (pv->version > atomic_load(&ss->known)) atomic_store(&ss->known, pv->version);
        rl__ss_watch_applied(ss, pv->version, pv->muts, pv->n_muts); /* the watches it changes */
    }
    for (uint32_t i = 0; i < r->n_changes; i++) {
        const rl__msg_shard_change *c = &r->changes[i];
        rl__log(RL_LOG_INFO, "storage server %u: %s a range at version %" PRIu64, ss->o.id,
                c->kind == RL_SHARD_ASSIGN ? "assigned" : "removed", c->version);
        /* A moved-in range is fetched first (ss_move.c); a moved-out one is refused from the
         * change's version on and still served below it. */
        if (c->kind == RL_SHARD_ASSIGN) rl__ss_move_assign(ss, &c->range, c->version, r->end_version);
        else {
            rl__ss_move_remove(ss, &c->range, c->version);
            rl__ss_watch_moved(ss, &c->range); /* their clients ask the new owner */
        }
        if (atomic_load(&ss->fatal)) return;
    }
    if (r->end_version > atomic_load(&ss->known)) atomic_store(&ss->known, r->end_version);
    if (r->n_changes) {      /* the map changed with them: mapped reads need the new one */
        rl__ss_want_map(ss); /* again after a request already in flight */
        send_map_request(ss);
    }
    rl__ss_move_after_peek(ss);
    if (atomic_load(&ss->fatal)) return;
    atomic_fetch_add(&ss->n_peeks, 1);
    ss->co_peek_id = 0;
    send_peek(ss);
    rl__ss_wake_parked(ss);
    maybe_sync(ss);
}

static void on_map(rl__ss *ss, const rl__msg_get_shard_map_reply *r) {
    ss_map *m = map_copy(r, ss->host);
    if (!m) {
        rl__log(RL_LOG_WARN,
                "storage server %u: cannot keep the shard map (out of memory or a "
                "bad address); retrying later",
                ss->o.id);
        return;
    }
    /* Servers register one by one: a map fetched early may name team members it has no
     * address for yet. Ask again soon until it is complete (rl__ss_repl_tick). */
    int incomplete = 0;
    for (uint32_t i = 0; i < m->n_shards && !incomplete; i++)
        for (uint32_t t = 0; t < m->shards[i].n_team; t++) {
            uint32_t id = m->shards[i].team[t];
            int found = 0;
            for (uint32_t j = 0; j < m->n_servers; j++) found |= m->servers[j].id == id;
            if (!found) incomplete = 1;
        }
    ss->map_incomplete = incomplete;
    pthread_mutex_lock(&ss->map_mu);
    ss_map *old = ss->map;
    ss->map = m;
    pthread_mutex_unlock(&ss->map_mu);
    rl__ss_map_free(old);
    rl__ss_peers_on_map(ss);
    rl__ss_move_on_map(ss);
}

static void on_peek_retry(rl__loop *loop, void *ud) {
    (void)loop;
    send_peek(ud);
}

static void on_co_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    rl__ss *ss = ud;
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    char what[256];
    if (conn != ss->co || !rl__conn_is_open(conn)) return;
    if (!(h->flags & RL_FRAME_REPLY)) {
        snprintf(what, sizeof what, "the coordinator sent a %s request", rl__msg_type_name(h->type));
        co_bad(ss, what);
        return;
    }
    rl__arena_reset(&ss->co_arena);
    int rc = rl__msg_decode(h->type, h->flags, payload, h->payload_len, &ss->co_arena, &m, &why);
    if (rc != RL_OK) {
        co_bad(ss, rc == RL_E_MALFORMED_FRAME || rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION ? rl__errdetail_get(&why)
                                                                                          : rl_error_name(rc));
        return;
    }
    if (h->flags & RL_FRAME_ERROR) {
        snprintf(what, sizeof what, "%s refused: %s (%d): %.*s", rl__msg_type_name(h->type),
                 rl_error_name(m.u.error.code), m.u.error.code, (int)m.u.error.message_len,
                 (const char *)m.u.error.message);
        if (h->type == RL_MSG_HELLO || h->type == RL_MSG_REGISTER_STORAGE) {
            co_bad(ss, what); /* reconnects with backoff */
        } else if (h->type == RL_MSG_PEEK && h->id == ss->co_peek_id) {
            rl__log(RL_LOG_WARN, "storage server %u: %s; peeking again in 100 ms", ss->o.id, what);
            ss->co_peek_id = 0;
            rl__loop_timer_add(ss->loop, rl__clock_mono_ns() + 100000000u, on_peek_retry, ss, NULL);
        } else {
            if (h->type == RL_MSG_GET_SHARD_MAP && h->id == ss->co_map_id) ss->co_map_id = 0;
            rl__log(RL_LOG_WARN, "storage server %u: %s", ss->o.id, what);
        }
        return;
    }
    switch (h->type) {
    case RL_MSG_HELLO:
        if (ss->co_state != SS_CO_HELLO) {
            co_bad(ss, "an unexpected HELLO reply");
            break;
        }
        /* The coordinator's label is known now: on the same host, stop delaying (the frames
         * already queued keep their release times). */
        if (!ss->coord_host && ss->co_delayed &&
            !rl__netem_applies(ss->host, strlen(ss->host), m.u.hello_reply.host, m.u.hello_reply.host_len,
                               m.u.hello_reply.role)) {
            ss->co_delayed = 0;
            if (ss->delay_us || ss->jitter_us) (void)rl__conn_set_delay(conn, 0, 0, 0);
        }
        break;
    case RL_MSG_REGISTER_STORAGE:
        if (ss->co_state != SS_CO_HELLO || h->id != ss->co_reg_id) {
            co_bad(ss, "an unexpected REGISTER_STORAGE reply");
            break;
        }
        ss->co_reg_id = 0;
        on_register(ss, &m.u.register_storage_reply);
        break;
    case RL_MSG_PEEK:
        if (h->id != ss->co_peek_id) break; /* stale (invariant 3) */
        on_peek(ss, &m.u.peek_reply);
        break;
    case RL_MSG_GET_SHARD_MAP:
        if (h->id == ss->co_map_id) ss->co_map_id = 0;
        on_map(ss, &m.u.get_shard_map_reply);
        break;
    case RL_MSG_POP:
    case RL_MSG_MOVE_SHARD: break;
    default:
        snprintf(what, sizeof what, "an unexpected %s reply", rl__msg_type_name(h->type));
        co_bad(ss, what);
        break;
    }
}

static void on_co_connect(rl__conn *conn, int err, void *ud) {
    rl__ss *ss = ud;
    if (err != RL_OK) {
        rl__log(RL_LOG_DEBUG, "storage server %u: cannot reach the coordinator %s:%u: %s", ss->o.id, ss->coord_ip,
                ss->o.coordinator_port, rl_error_name(err));
        ss->co_state = SS_CO_DOWN;
        schedule_retry(ss);
        return;
    }
    if (atomic_load(&ss->stopping)) {
        rl__conn_close(conn, 0);
        rl__conn_release(conn);
        ss->co_state = SS_CO_DOWN;
        return;
    }
    ss->co = conn;
    ss->co_state = SS_CO_HELLO;
    ss->co_since_ns = rl__clock_mono_ns();
    rl__conn_set_callbacks(conn, on_co_frame, on_co_close, ss);
    /* The coordinator's host label is the one the options name (rl cluster passes it), else it
     * comes with its HELLO reply and until then counts as another host (netem.h): no frame to
     * it goes out undelayed for want of the label. */
    ss->co_delayed = !ss->coord_host || rl__netem_applies(ss->host, strlen(ss->host), (const uint8_t *)ss->coord_host,
                                                          strlen(ss->coord_host), RL_ROLE_COORDINATOR);
    if (ss->co_delayed) rl__ss_delay_conn(ss, conn);
    rl__msg m;
    rl__ss_hello(ss, &m);
    rl__ss_co_send(ss, &m, NULL);
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_REGISTER_STORAGE;
    m.u.register_storage_req.id = ss->o.id;
    m.u.register_storage_req.address = (const uint8_t *)ss->listen_ip;
    m.u.register_storage_req.address_len = (uint32_t)strlen(ss->listen_ip);
    m.u.register_storage_req.port = ss->port;
    m.u.register_storage_req.host = (const uint8_t *)ss->host;
    m.u.register_storage_req.host_len = (uint32_t)strlen(ss->host);
    m.u.register_storage_req.durable_version = atomic_load(&ss->durable);
    if (rl__ss_co_send(ss, &m, &ss->co_reg_id) != RL_OK) co_bad(ss, "cannot send REGISTER_STORAGE");
}

static void co_connect(rl__ss *ss) {
    if (atomic_load(&ss->stopping) || ss->co_state != SS_CO_DOWN) return;
    ss->co_state = SS_CO_CONNECTING;
    rl__errdetail nd;
    rl__errdetail_init(&nd, NULL);
    int rc =
        rl__connect(ss->loop, ss->coord_ip, ss->o.coordinator_port, ss->o.connect_timeout_ms, on_co_connect, ss, &nd);
    if (rc != RL_OK) {
        rl__log(RL_LOG_WARN, "storage server %u: cannot connect to %s:%u: %s (%s)", ss->o.id, ss->coord_ip,
                ss->o.coordinator_port, rl_error_name(rc), rl__errdetail_get(&nd));
        ss->co_state = SS_CO_DOWN;
        schedule_retry(ss);
    }
}

/* ==== sync ================================================================================== */

/* The result of a background sync, on the loop thread: publish, POP, maybe sync again. */
static void on_sync_done(rl__loop *loop, void *ud) {
    rl__ss *ss = ud;
    pthread_mutex_lock(&ss->sync_mu);
    int rc = ss->sync_rc;
    rl__version target = ss->sync_done_target;
    pthread_mutex_unlock(&ss->sync_mu);
    ss->sync_busy = 0;
    if (rc != RL_OK) {
        rl__ss_fatal(ss, rc, "syncing the engine");
        return;
    }
    if (target > atomic_load(&ss->durable)) atomic_store(&ss->durable, target);
    if (rl__loop_is_closing(loop)) return;
    send_pop(ss);
    rl__ss_move_on_durable(ss);
    maybe_sync(ss);
}

static void *sync_main(void *arg) {
    rl__ss *ss = arg;
    pthread_mutex_lock(&ss->sync_mu);
    for (;;) {
        while (!ss->sync_want && !ss->sync_quit) pthread_cond_wait(&ss->sync_cv, &ss->sync_mu);
        if (!ss->sync_want) break;
        ss->sync_want = 0;
        rl__version target = ss->sync_target;
        pthread_mutex_unlock(&ss->sync_mu);
        int rc = rl__storage_sync(ss->st);
        pthread_mutex_lock(&ss->sync_mu);
        ss->sync_rc = rc;
        ss->sync_done_target = target;
        if (rl__loop_post(ss->loop, on_sync_done, ss) != RL_OK)
            rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "reporting a sync");
    }
    pthread_mutex_unlock(&ss->sync_mu);
    return NULL;
}

int rl__ss_sync_start(rl__ss *ss) {
    if (pthread_create(&ss->sync_thread, NULL, sync_main, ss) != 0) return RL_E_OPERATION_FAILED;
    ss->sync_started = 1;
    return RL_OK;
}

void rl__ss_sync_stop(rl__ss *ss) {
    if (!ss->sync_started) return;
    pthread_mutex_lock(&ss->sync_mu);
    ss->sync_quit = 1;
    pthread_cond_signal(&ss->sync_cv);
    pthread_mutex_unlock(&ss->sync_mu);
    pthread_join(ss->sync_thread, NULL);
    ss->sync_started = 0;
}

static void on_sync_timer(rl__loop *loop, void *ud) {
    (void)loop;
    rl__ss *ss = ud;
    ss->sync_timer = 0;
    maybe_sync(ss);
}

/* See ss_int.h: the maybe_sync hook (ss_life.c sets it), for ss_move.c. */
void rl__ss_repl_maybe_sync(rl__ss *ss) { maybe_sync(ss); }

/* Start a background sync if something known is not durable (invariant 4). */
static void maybe_sync(rl__ss *ss) {
    if (ss->sync_busy || ss->sync_timer || atomic_load(&ss->stopping) || atomic_load(&ss->fatal)) return;
    rl__version known = atomic_load(&ss->known);
    if (known <= atomic_load(&ss->durable)) return;
    uint64_t now = rl__clock_mono_ns();
    uint64_t due = ss->last_sync_ns + (uint64_t)ss->o.sync_interval_ms * 1000000u;
    if (ss->last_sync_ns && now < due) {
        if (rl__loop_timer_add(ss->loop, due, on_sync_timer, ss, &ss->sync_timer) != RL_OK) ss->sync_timer = 0;
        return;
    }
    if (known > atomic_load(&ss->applied)) {
        int rc = rl__ss_move_apply(ss, known, NULL, 0); /* with what waits for a version */
        if (rc != RL_OK) {
            rl__ss_fatal(ss, rc, "applying an empty version");
            return;
        }
        atomic_store(&ss->applied, known);
    }
    ss->sync_busy = 1;
    ss->last_sync_ns = now;
    pthread_mutex_lock(&ss->sync_mu);
    ss->sync_target = atomic_load(&ss->applied);
    ss->sync_want = 1;
    pthread_cond_signal(&ss->sync_cv);
    pthread_mutex_unlock(&ss->sync_mu);
}

/* ==== housekeeping ========================================================================== */

static void on_tick(rl__loop *loop, void *ud) {
    rl__ss *ss = ud;
    ss->tick_timer = 0;
    if (atomic_load(&ss->stopping)) return;
    rl__ss_repl_tick(ss);
    rl__ss_s2s_tick(ss);
    rl__ss_move_tick(ss);
    rl__loop_timer_add(loop, rl__clock_mono_ns() + (uint64_t)SS_TICK_MS * 1000000u, on_tick, ss, &ss->tick_timer);
}

void rl__ss_repl_tick(rl__ss *ss) {
    uint64_t now = rl__clock_mono_ns(), limit = (uint64_t)ss->o.co_timeout_ms * 1000000u;
    /* Every wait on the coordinator has a timeout: a coordinator that took the connection but
     * does not answer (hung, or stopped with SIGSTOP) is dropped and reconnected. */
    if (ss->co_state == SS_CO_HELLO && now - ss->co_since_ns > limit) {
        co_bad(ss, "no REGISTER_STORAGE reply in time");
        return;
    }
    if (ss->co_state != SS_CO_READY) return;
    if (ss->co_peek_id && now - ss->co_peek_sent_ns > limit + (uint64_t)ss->o.peek_wait_ms * 1000000u) {
        co_bad(ss, "no PEEK reply within max_wait_ms plus the reply timeout");
        return;
    }
    if (ss->co_map_id && now - ss->last_map_ns > limit) ss->co_map_id = 0;
    uint64_t period = ss->map_incomplete ? 200000000u : (uint64_t)ss->o.map_refresh_ms * 1000000u;
    if (atomic_load(&ss->map_refresh_wanted) || now - ss->last_map_ns >= period) send_map_request(ss);
}

void rl__ss_repl_start(rl__ss *ss) {
    co_connect(ss);
    rl__loop_timer_add(ss->loop, rl__clock_mono_ns() + (uint64_t)SS_TICK_MS * 1000000u, on_tick, ss, &ss->tick_timer);
}
