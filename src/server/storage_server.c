/* storage_server.c — the core of `rlkvd storage` (ss_int.h, "The files"): what every part of the
 * storage server uses — ownership lookups and edits, the read version rule, the shard map's
 * upkeep, sending replies and requests to the coordinator, the HELLO it opens connections with,
 * the injected delay of new connections, a fatal error — and the two hooks through which one
 * part reaches another (wake_parked, maybe_sync). Its life cycle is ss_life.c; the accepted
 * connections and their reads ss_serve.c; replication ss_coord.c; mapped reads and
 * storage-to-storage reads ss_mapped.c; shard moves ss_move.c. The shared structures and their
 * thread rules are in ss_int.h.
 *
 * Invariants (besides ss_int.h's):
 *   1. This file calls no part by name: a part that needs another goes through a hook of rl__ss,
 *      set by ss_life.c before the loop runs.
 *   2. `own` changes only through rl__ss_own_remove / rl__ss_own_assign (and a registration's
 *      replacement in ss_coord.c), each a new array published under map_mu, so a worker that holds
 *      map_mu always sees a whole, sorted list.
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

int rl__ss_own_find(const rl__ss *ss, const uint8_t *key, uint32_t len, int below) {
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

int rl__ss_own_version(const rl__ss *ss, int i, rl__version v) {
    const ss_range *r = &ss->own[i];
    if (r->until && v >= r->until) return RL_E_WRONG_SHARD_SERVER;
    if (r->since && v < r->since) return RL_E_TRANSACTION_TOO_OLD;
    return RL_OK;
}

void rl__ss_fatal(rl__ss *ss, int rc, const char *what) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&ss->fatal, &expected, rc ? rc : RL_E_INTERNAL_ERROR)) {
        snprintf(ss->fatal_what, sizeof ss->fatal_what, "%s", what);
        atomic_store_explicit(&ss->fatal_what_set, 1, memory_order_release);
        rl__log(RL_LOG_ERROR, "storage server %u: fatal: %s: %s (%d); stopping", ss->o.id, what, rl_error_name(rc), rc);
    }
    rl__loop_stop(ss->loop);
}

const char *rl__ss_fatal_what(const rl__ss *ss) {
    return atomic_load_explicit(&ss->fatal_what_set, memory_order_acquire) ? ss->fatal_what : "";
}

int rl__ss_send_msg(rl__conn *conn, uint64_t id, const rl__msg *m, rl_buf *buf) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__buf_reset(buf);
    int rc = rl__msg_encode(buf, m, &why);
    if (rc == RL_OK && buf->len > RL_NET_MAX_PAYLOAD) rc = RL_E_INVALID_ARGUMENT;
    if (rc != RL_OK) {
        rl__log(RL_LOG_ERROR, "storage server: cannot encode a %s reply for %s: %s (%s)", rl__msg_type_name(m->type),
                rl__conn_peer(conn), rl_error_name(rc), rc == RL_E_INVALID_ARGUMENT ? rl__errdetail_get(&why) : "");
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

void rl__ss_send_error(rl__conn *conn, uint16_t type, uint64_t id, int code, const char *fmt, ...) {
    char msg[RL_PROTO_MAX_STRING];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof msg) n = (int)sizeof msg - 1;
    rl__msg m;
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

int rl__ss_read_version(rl__ss *ss, rl__version v, rl__version *out_readv) {
    rl__version known = atomic_load(&ss->known), applied = atomic_load(&ss->applied);
    uint64_t window = ss->o.window_versions;
    if (v > known) return RL_E_FUTURE_VERSION;
    if (known > window && v < known - window) return RL_E_TRANSACTION_TOO_OLD;
    *out_readv = v < applied ? v : applied;
    return RL_OK;
}

/* ==== ownership and the shard map ============================================================ */

/* See ss_int.h. */
void rl__ss_map_free(ss_map *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->n_shards; i++) {
        rl__free(m->shards[i].r.begin);
        rl__free(m->shards[i].r.end);
    }
    rl__free(m->shards);
    rl__free(m->servers);
    rl__free(m);
}

/* See ss_int.h. */
void rl__ss_want_map(rl__ss *ss) { atomic_store(&ss->map_refresh_wanted, 1); }

/* See ss_int.h: remove [b, e) from the owned ranges, splitting ranges it cuts (the pieces keep
 * their since/until). */
void rl__ss_own_remove(rl__ss *ss, const rl__keyrange *k) {
    ss_range *nw = rl__calloc((size_t)ss->n_own * 2 + 1, sizeof *nw);
    uint32_t n = 0;
    if (!nw) {
        rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "ownership change");
        return;
    }
    for (uint32_t i = 0; i < ss->n_own; i++) {
        const ss_range *r = &ss->own[i];
        /* The part below k->begin and the part above k->end survive. */
        if (rl__bytes_cmp(r->begin, r->begin_len, k->begin, k->begin_len) < 0) {
            const uint8_t *e = r->end;
            uint32_t el = r->end_len;
            if (rl__bytes_cmp(e, el, k->begin, k->begin_len) > 0) e = k->begin, el = k->begin_len;
            nw[n].begin = rl__ss_memdup(r->begin, r->begin_len);
            nw[n].begin_len = r->begin_len;
            nw[n].end = rl__ss_memdup(e, el);
            nw[n].end_len = el;
            nw[n].since = r->since;
            nw[n].until = r->until;
            n++;
        }
        if (rl__bytes_cmp(r->end, r->end_len, k->end, k->end_len) > 0) {
            const uint8_t *b = r->begin;
            uint32_t bl = r->begin_len;
            if (rl__bytes_cmp(b, bl, k->end, k->end_len) < 0) b = k->end, bl = k->end_len;
            nw[n].begin = rl__ss_memdup(b, bl);
            nw[n].begin_len = bl;
            nw[n].end = rl__ss_memdup(r->end, r->end_len);
            nw[n].end_len = r->end_len;
            nw[n].since = r->since;
            nw[n].until = r->until;
            n++;
        }
    }
    for (uint32_t i = 0; i < n; i++)
        if (!nw[i].begin || !nw[i].end) {
            rl__ss_ranges_free(nw, n);
            rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "ownership change");
            return;
        }
    pthread_mutex_lock(&ss->map_mu);
    ss_range *old = ss->own;
    uint32_t n_old = ss->n_own;
    ss->own = nw;
    ss->n_own = n;
    pthread_mutex_unlock(&ss->map_mu);
    rl__ss_ranges_free(old, n_old);
}

/* See ss_int.h: add [b, e) to the owned ranges (kept sorted; what it overlaps is removed first). */
void rl__ss_own_assign(rl__ss *ss, const rl__keyrange *k, rl__version since) {
    rl__ss_own_remove(ss, k);
    if (atomic_load(&ss->fatal)) return;
    ss_range *nw = rl__calloc((size_t)ss->n_own + 1, sizeof *nw);
    if (!nw) {
        rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "ownership change");
        return;
    }
    uint32_t n = 0, i = 0;
    for (; i < ss->n_own && rl__bytes_cmp(ss->own[i].begin, ss->own[i].begin_len, k->begin, k->begin_len) < 0; i++)
        nw[n++] = ss->own[i];
    nw[n].begin = rl__ss_memdup(k->begin, k->begin_len);
    nw[n].begin_len = k->begin_len;
    nw[n].end = rl__ss_memdup(k->end, k->end_len);
    nw[n].end_len = k->end_len;
    nw[n].since = since;
    if (!nw[n].begin || !nw[n].end) {
        rl__free(nw[n].begin);
        rl__free(nw[n].end);
        rl__free(nw);
        rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "ownership change");
        return;
    }
    n++;
    for (; i < ss->n_own; i++) nw[n++] = ss->own[i];
    pthread_mutex_lock(&ss->map_mu);
    ss_range *old = ss->own;
    ss->own = nw;
    ss->n_own = n;
    pthread_mutex_unlock(&ss->map_mu);
    rl__free(old); /* its keys moved into nw */
}

/* ==== the coordinator connection ============================================================= */

/* See ss_int.h. */
int rl__ss_co_send(rl__ss *ss, const rl__msg *m, uint64_t *out_id) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    if (!ss->co) return RL_E_CONNECTION_FAILED;
    uint64_t id = ++ss->co_next_id;
    rl__buf_reset(&ss->co_buf);
    int rc = rl__msg_encode(&ss->co_buf, m, &why);
    if (rc != RL_OK) {
        rl__log(RL_LOG_ERROR, "storage server %u: cannot encode %s for the coordinator: %s (%s)", ss->o.id,
                rl__msg_type_name(m->type), rl_error_name(rc), rl__errdetail_get(&why));
        return rc;
    }
    rc = rl__conn_send(ss->co, m->type, 0, id, ss->co_buf.data, ss->co_buf.len);
    if (out_id) *out_id = id;
    return rc;
}

/* ==== the hooks ============================================================================== */

/* See ss_int.h. */
void rl__ss_wake_parked(rl__ss *ss) {
    if (ss->wake_parked) ss->wake_parked(ss);
}

/* See ss_int.h. */
void rl__ss_watch_applied(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n) {
    if (ss->watch_applied && ss->watches) ss->watch_applied(ss, v, muts, n);
}

void rl__ss_watch_moved(rl__ss *ss, const rl__keyrange *k) {
    if (ss->watch_moved && ss->watches) ss->watch_moved(ss, k);
}

void rl__ss_maybe_sync(rl__ss *ss) {
    if (ss->maybe_sync) ss->maybe_sync(ss);
}

/* ==== the HELLO, the injected delay, statistics ============================================== */

void rl__ss_delay_conn(rl__ss *ss, rl__conn *conn) {
    if (ss->delay_us || ss->jitter_us) (void)rl__netem_set(conn, ss->delay_us, ss->jitter_us, ss->delay_salt++);
}

void rl__ss_hello(const rl__ss *ss, rl__msg *m) {
    memset(m, 0, sizeof *m);
    m->type = RL_MSG_HELLO;
    m->u.hello_req.magic = RL_PROTOCOL_MAGIC;
    m->u.hello_req.protocol_version = RL_PROTOCOL_VERSION;
    m->u.hello_req.role = RL_ROLE_STORAGE;
    m->u.hello_req.id = ss->o.id;
    m->u.hello_req.host = (const uint8_t *)ss->host;
    m->u.hello_req.host_len = (uint32_t)strlen(ss->host);
}

void rl__ss_send_hello(const rl__ss *ss, rl__conn *conn) {
    rl__msg m;
    rl__ss_hello(ss, &m);
    rl_buf b;
    rl__buf_init(&b);
    if (rl__msg_encode(&b, &m, NULL) == RL_OK) rl__conn_send(conn, RL_MSG_HELLO, 0, 0, b.data, b.len);
    rl__buf_release(&b);
}

void rl__ss_delay_closed(rl__ss *ss, rl__conn *conn) {
    rl__lat_hist h;
    rl__conn_get_lateness(conn, &h, 0);
    rl__lat_hist_merge(&ss->closed_late, &h);
}

void rl__ss_get_stats(rl__ss *ss, rl__ss_stats *out) {
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

uint16_t rl__ss_port(const rl__ss *ss) { return ss->port; }

void rl__ss_stop(rl__ss *ss) {
    atomic_store(&ss->stopping, 1);
    rl__loop_stop(ss->loop);
}
