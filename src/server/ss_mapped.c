/* ss_mapped.c — the storage server's mapped reads and storage-to-storage reads: the worker pool
 * that runs GET_MAPPED_RANGE, the batch hook that reads each batch's secondaries locally or from
 * the storage servers that hold them (GET_MULTI over connections kept to the peers), and the
 * serving side of GET_MULTI. A part of the storage server (ss_int.h, "The files") that uses the
 * core only: ss_serve.c hands it the requests, ss_coord.c tells it of a new map.
 *
 * A mapped read:
 *
 *   loop thread: version and shard checked (ss_serve.c) ──▶ job queue
 *   worker: decode, resolve the selectors within the shard, rl__storage_get_mapped_range with
 *           mapped_hook ──▶ for each batch:
 *             1. split every item into pieces, one per shard its keys touch (a point read is one
 *                piece; a prefix range inside one shard is one piece), under map_mu: a piece
 *                inside a range this server owns is local, any other goes to a member of the
 *                team the shard map names for it (an item wholly inside a range this server
 *                holds — the usual case — is not split at all: item_local);
 *             2. hand the items wholly inside this server's shards back to mapped.c (read_here:
 *                it reads them under one engine read lock per batch, as without a hook), and
 *                read the local pieces of items that cross shards;
 *             3. build the GET_MULTI requests — `individual` (FoundationDB's): one request per
 *                remote piece; `grouped`: one request per owner with all its pieces of the batch
 *                — and send them all at once: the worker itself on peers already connected (no
 *                thread hop), the loop thread for the others (it connects first, or waits for a
 *                shard map that has the peer's address); the worker waits on the batch's
 *                condition variable (in slices, so a stop is seen), woken once when every reply
 *                came, or gives up at the timeout (s2s_timeout_ms);
 *             4. merge each item's pieces in key order under its row and byte limits.
 *           encode the reply (entries, more, status, read_through, resolved bounds, stats) and
 *           send it from the worker (rl__conn_send is thread-safe).
 *
 * A streamed mapped read (GET_MAPPED_STREAM, docs/design.md §8.4) runs the same steps with an
 * emitter (stream_emit): each batch's entries, once read, are encoded into the chunk being
 * gathered, which goes out (MAPPED_CHUNK) whenever it reaches the chunk size and the client's
 * window has room for it (stream_flush waits for MAPPED_CREDIT, rl__ss_stream_credit on the loop
 * thread); the batch's rows are then dropped (its arena is reset), and the final reply carries the
 * tail: more, status, bounds and stats. A `grouped` stream sizes its rounds once it has taken
 * remote items (ask_items: as many items as their mean size fits in the batch and in what is
 * left of the page's target), and asks for the next round before it returns each batch to be
 * sent (pf_issue: the next call takes it when mapped.c hands it the items asked for, else drops
 * it), so the peers read and send round n+1 while round n is encoded and goes to the client.
 *
 * A `grouped` read with RL_MAPPED_DEFER_REMOTE (docs/design.md §8.4, "Deferred secondaries")
 * answers every range item with a piece on another server unread after step 1 (defer_items: no
 * rows, more, not local; the client reads it from its owners): nothing is asked of a peer, and
 * only this server's own secondaries are read.
 *
 * Invariants:
 *   1. Remote reads use the request's own version (not the local engine version it was clamped
 *      to: another server's data at that version may differ), so the whole reply is one snapshot.
 *   2. An error of any secondary — a peer's item error, an error reply, a lost connection, a
 *      peer that does not answer in time — fails the whole mapped read (FoundationDB's rule),
 *      with a message naming the peer.
 *   3. A batch (ss_batch) is reference counted: the worker's reference and one per request the
 *      loop thread has not finished. The loop thread writes results into the worker's arena only
 *      under the batch mutex and only while the worker has not given up (cancelled), so a late
 *      reply never touches memory the worker reused; and the worker allocates nothing from a
 *      batch's arena between sending its requests and waiting for them or dropping it (an arena
 *      is not thread-safe: a prefetched round's bookkeeping is allocated before it is sent —
 *      allocating it after corrupted rows under load, seen as a MAPPED_CHUNK the codec refused).
 *   4. Every request sent to a peer sits in exactly one list (its peer's waiting or pending list,
 *      under peers_mu) until it is finished exactly once, by whoever takes it out of the list: its
 *      reply, its connection's close, a failed send, its deadline (rl__ss_s2s_tick), or
 *      shutdown. A request is put into pending before its frame is sent, so its reply always
 *      finds it.
 *   5. Reply sizes are bounded: the index budget is at most SS_REPLY_BYTES; `individual`'s
 *      batches at most SS_MAX_BATCH entries, each secondary at most SS_MAPPED_SECONDARY_BUDGET /
 *      batch bytes; `grouped`'s page (one batch) at SS_MAPPED_SECONDARY_BUDGET of secondaries
 *      plus one entry, each secondary at most a tenth of it (a secondary cut off is marked more;
 *      the client completes it; a streamed page's later rounds, sized by ask_items, give each
 *      owner the batch's whole budget); GET_MULTI replies at max_bytes plus one item, or their first
 *      SS_MULTI_MIN_ITEMS items below SS_MULTI_REPLY_BYTES; so every reply stays well inside the
 *      64 MiB frame limit.
 *   6. A streamed read (its page's budget SS_STREAM_REPLY_BYTES, not SS_REPLY_BYTES; its frames
 *      are chunks of about the chunk size) has at most its window of chunk bytes sent and not
 *      credited back (one chunk when none are), and holds one batch of rows (about
 *      SS_STREAM_BATCH_BYTES; a grouped round sized on records smaller than the ones it meets at
 *      most one such budget per owner; grouped, the next round's too: two batches in two arenas,
 *      each reset only after the batch that used it was sent) plus the chunk being gathered,
 *      whatever its page — besides the
 *      page's index entries (a fifth of its budget at most); its ss_stream is on ss->streams from
 *      its start to its end, so a credit or cancel finds it only while it runs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/ss_int.h"

/* ==== peers and GET_MULTI requests (loop thread) ============================================ */

static void batch_unref(ss_batch *b) {
    if (atomic_fetch_sub(&b->refs, 1) != 1) return;
    for (int i = 0; i < b->n_reqs; i++) {
        rl__buf_release(&b->reqs[i].payload);
        rl__free(b->reqs[i].pieces);
    }
    rl__free(b->reqs);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    rl__free(b);
}

/* Finish a request that failed as a whole (transport error: fails the mapped read). The
 * request is no longer in any list. */
static void req_fail(ss_s2s_req *q, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void req_fail(ss_s2s_req *q, int code, const char *fmt, ...) {
    ss_batch *b = q->b;
    pthread_mutex_lock(&b->mu);
    if (!b->cancelled && !q->done) {
        if (!b->error) {
            va_list ap;
            va_start(ap, fmt);
            rl__errdetail_vset(&b->err, fmt, ap);
            va_end(ap);
            b->error = code;
        }
    }
    if (!b->cancelled && !q->done) b->bytes_received += q->reply_bytes;
    if (!q->done) {
        q->done = 1;
        if (--b->outstanding == 0) pthread_cond_signal(&b->cv); /* wake the worker once */
    }
    pthread_mutex_unlock(&b->mu);
    batch_unref(b);
}

/* Copy one GET_MULTI result into piece p (in arena a). */
static void copy_result(ss_piece *p, const rl__msg_read_result *r, rl_arena *a) {
    p->error = r->error;
    p->more = r->more;
    p->unread = r->error == RL_OK && r->n_kvs == 0 && r->more; /* the peer's budget was spent */
    p->n_kvs = 0;
    p->kvs = NULL;
    if (r->error != RL_OK || r->n_kvs == 0) return;
    rl_keyvalue *kv = rl__arena_alloc(a, (size_t)r->n_kvs * sizeof *kv);
    if (!kv) {
        p->error = RL_E_OUT_OF_MEMORY;
        return;
    }
    for (uint32_t i = 0; i < r->n_kvs; i++) {
        kv[i].key = rl__arena_memdup(a, r->kvs[i].key, r->kvs[i].key_len);
        kv[i].key_len = r->kvs[i].key_len;
        kv[i].value = rl__arena_memdup(a, r->kvs[i].value, r->kvs[i].value_len);
        kv[i].value_len = r->kvs[i].value_len;
        if (!kv[i].key || !kv[i].value) {
            p->error = RL_E_OUT_OF_MEMORY;
            return;
        }
    }
    p->kvs = kv;
    p->n_kvs = (int)r->n_kvs;
}

/* Finish a request with its reply (or error reply: every piece gets the code). */
static void req_reply(ss_s2s_req *q, const rl__msg_get_multi_reply *r, int err_code) {
    ss_batch *b = q->b;
    int want_map = err_code == RL_E_WRONG_SHARD_SERVER;
    pthread_mutex_lock(&b->mu);
    if (!b->cancelled && !q->done) {
        for (int k = 0; k < q->n_pieces; k++) {
            ss_piece *p = &b->pieces[q->pieces[k]];
            if (err_code) {
                p->error = err_code;
                p->n_kvs = 0;
                p->more = 0;
            } else {
                copy_result(p, &r->results[k], b->a);
                if (r->results[k].error == RL_E_WRONG_SHARD_SERVER) want_map = 1;
            }
        }
    }
    if (!b->cancelled && !q->done) b->bytes_received += q->reply_bytes;
    if (!q->done) {
        q->done = 1;
        if (--b->outstanding == 0) pthread_cond_signal(&b->cv); /* wake the worker once */
    }
    pthread_mutex_unlock(&b->mu);
    if (want_map) rl__ss_want_map(b->ss);
    batch_unref(b);
}

/* ---- Peer records (ss_int.h invariant 1: under peers_mu). Whoever takes a request out of a
 * peer's lists finishes it, after dropping peers_mu (req_fail / req_reply lock the batch). ---- */

static ss_s2s_req *list_take(ss_s2s_req **head, uint64_t id) {
    for (ss_s2s_req **pp = head; *pp; pp = &(*pp)->next)
        if ((*pp)->req_id == id) {
            ss_s2s_req *q = *pp;
            *pp = q->next;
            q->next = NULL;
            return q;
        }
    return NULL;
}

/* Prepend chain `add` to *chain. */
static void chain_add(ss_s2s_req **chain, ss_s2s_req *add) {
    while (add) {
        ss_s2s_req *n = add->next;
        add->next = *chain;
        *chain = add;
        add = n;
    }
}

/* Take every request of p out of its lists (peers_mu held). */
static ss_s2s_req *peer_detach_all(ss_peer *p) {
    ss_s2s_req *chain = NULL;
    chain_add(&chain, p->pending);
    chain_add(&chain, p->waiting);
    p->pending = p->waiting = NULL;
    return chain;
}

/* Fail every request of a chain (peers_mu not held). */
static void fail_chain(ss_s2s_req *q, int code, const char *why) {
    for (ss_s2s_req *n; q; q = n) {
        n = q->next;
        q->next = NULL;
        req_fail(q, code, "%s", why);
    }
}

/* Send q on p's connection (peers_mu held, p->conn set): into pending, then the frame. On a
 * failed send q is taken out again and returned in *failed for the caller to finish. */
static void peer_send_locked(ss_peer *p, ss_s2s_req *q, ss_s2s_req **failed) {
    q->next = p->pending;
    p->pending = q;
    int rc = rl__conn_send(p->conn, RL_MSG_GET_MULTI, 0, q->req_id, q->payload.data, q->payload.len);
    if (rc != RL_OK && list_take(&p->pending, q->req_id)) {
        q->next = *failed;
        *failed = q;
    }
}

static void on_peer_close(rl__conn *conn, int err, void *ud) {
    ss_peer *p = ud;
    char why[400];
    pthread_mutex_lock(&p->ss->peers_mu);
    snprintf(why, sizeof why, "storage server %u (%s:%u): connection lost (%s: %s)", p->id, p->addr, p->port,
             rl_error_name(err), rl__conn_close_reason(conn));
    ss_s2s_req *chain = NULL;
    if (p->conn == conn && p->delayed) rl__ss_delay_closed(p->ss, conn);
    if (p->conn == conn) {
        p->conn = NULL;
        chain = peer_detach_all(p);
    }
    pthread_mutex_unlock(&p->ss->peers_mu);
    fail_chain(chain, RL_E_SERVER_UNAVAILABLE, why);
    rl__conn_release(conn);
}

static void on_peer_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    ss_peer *p = ud;
    rl__ss *ss = p->ss;
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    if (!rl__conn_is_open(conn)) return;
    if (!(h->flags & RL_FRAME_REPLY) || (h->type != RL_MSG_HELLO && h->type != RL_MSG_GET_MULTI)) {
        rl__log(RL_LOG_WARN,
                "storage server %u: closing the connection to storage server %u "
                "(%s): unexpected %s frame (flags %u)",
                ss->o.id, p->id, rl__conn_peer(conn), rl__msg_type_name(h->type), h->flags);
        rl__conn_close(conn, 0);
        return;
    }
    rl__arena_reset(&ss->s2s_arena);
    int rc = rl__msg_decode(h->type, h->flags, payload, h->payload_len, &ss->s2s_arena, &m, &why);
    if (rc != RL_OK) {
        rl__log(RL_LOG_WARN,
                "storage server %u: closing the connection to storage server %u "
                "(%s): %s",
                ss->o.id, p->id, rl__conn_peer(conn),
                rc == RL_E_OUT_OF_MEMORY ? "out of memory" : rl__errdetail_get(&why));
        rl__conn_close(conn, 0);
        return;
    }
    if (h->type == RL_MSG_HELLO) {
        if (h->flags & RL_FRAME_ERROR) {
            rl__log(RL_LOG_WARN, "storage server %u: storage server %u (%s) refused HELLO: %s", ss->o.id, p->id,
                    rl__conn_peer(conn), rl_error_name(m.u.error.code));
            rl__conn_close(conn, 0);
        }
        return;
    }
    pthread_mutex_lock(&ss->peers_mu);
    ss_s2s_req *q = list_take(&p->pending, h->id);
    pthread_mutex_unlock(&ss->peers_mu);
    if (!q) return; /* finished already (its deadline passed) */
    q->reply_bytes = (uint32_t)(RL_FRAME_HEADER_LEN + h->payload_len);
    if (h->flags & RL_FRAME_ERROR) {
        req_reply(q, NULL, m.u.error.code > 0 ? m.u.error.code : RL_E_INTERNAL_ERROR);
        return;
    }
    if (m.u.get_multi_reply.n_results != (uint32_t)q->n_pieces) {
        req_fail(q, RL_E_INTERNAL_ERROR, "storage server %u answered %u results for %d reads", p->id,
                 m.u.get_multi_reply.n_results, q->n_pieces);
        return;
    }
    req_reply(q, &m.u.get_multi_reply, RL_OK);
}

static void on_peer_connect(rl__conn *conn, int err, void *ud) {
    ss_peer *p = ud;
    rl__ss *ss = p->ss;
    ss_s2s_req *failed = NULL;
    char why[200];
    pthread_mutex_lock(&ss->peers_mu);
    p->connecting = 0;
    snprintf(why, sizeof why, "storage server %u (%s:%u): cannot connect: %s", p->id, p->addr, p->port,
             rl_error_name(err));
    if (err != RL_OK || atomic_load(&ss->stopping)) {
        failed = peer_detach_all(p);
        pthread_mutex_unlock(&ss->peers_mu);
        if (err == RL_OK) {
            rl__conn_close(conn, 0);
            rl__conn_release(conn);
            fail_chain(failed, RL_E_OPERATION_CANCELLED, "the storage server is stopping");
        } else {
            fail_chain(failed, RL_E_SERVER_UNAVAILABLE, why);
            rl__ss_want_map(ss);
        }
        return;
    }
    p->conn = conn;
    rl__conn_set_callbacks(conn, on_peer_frame, on_peer_close, p);
    if (p->delayed) rl__ss_delay_conn(ss, conn); /* before the HELLO: the first frame */
    rl__ss_send_hello(ss, conn);
    /* The waiting requests, oldest first (the list is newest first). */
    ss_s2s_req *w = NULL;
    chain_add(&w, p->waiting);
    p->waiting = NULL;
    for (ss_s2s_req *q = w, *n; q; q = n) {
        n = q->next;
        q->next = NULL;
        peer_send_locked(p, q, &failed);
    }
    snprintf(why, sizeof why, "storage server %u (%s:%u): send failed", p->id, p->addr, p->port);
    pthread_mutex_unlock(&ss->peers_mu);
    fail_chain(failed, RL_E_SERVER_UNAVAILABLE, why);
}

/* The peer record of server id (peers_mu held); created on first use when create. */
static ss_peer *peer_find(rl__ss *ss, uint32_t id, int create) {
    ss_peer *p = ss->peers;
    for (; p; p = p->next)
        if (p->id == id) return p;
    if (!create) return NULL;
    p = rl__calloc(1, sizeof *p);
    if (!p) return NULL;
    p->id = id;
    p->ss = ss;
    p->next = ss->peers;
    ss->peers = p;
    return p;
}

/* Start connecting p to sv's address (peers_mu held; loop thread). If the connect cannot even
 * start, p's waiting requests are moved to *failed. */
static void peer_connect_locked(rl__ss *ss, ss_peer *p, const ss_server *sv, ss_s2s_req **failed) {
    memcpy(p->addr, sv->addr, sizeof p->addr);
    p->port = sv->port;
    p->delayed = !sv->same_host;
    p->connecting = 1;
    int rc = rl__connect(ss->loop, p->addr, p->port, ss->o.connect_timeout_ms, on_peer_connect, p, NULL);
    if (rc != RL_OK) {
        p->connecting = 0;
        chain_add(failed, peer_detach_all(p));
    }
}

void rl__ss_peers_delay(rl__ss *ss, int set, rl__lat_hist *late) {
    rl__lat_hist h;
    pthread_mutex_lock(&ss->peers_mu);
    for (ss_peer *p = ss->peers; p; p = p->next) {
        if (!p->conn || !p->delayed) continue;
        if (set) (void)rl__netem_set(p->conn, ss->delay_us, ss->jitter_us, ss->delay_salt++);
        if (late) rl__conn_get_lateness(p->conn, &h, 0), rl__lat_hist_merge(late, &h);
    }
    pthread_mutex_unlock(&ss->peers_mu);
}

/* The server list entry of id in the shard map (loop thread: reads the map without map_mu). */
static const ss_server *map_server(const rl__ss *ss, uint32_t id) {
    if (!ss->map) return NULL;
    for (uint32_t i = 0; i < ss->map->n_servers; i++)
        if (ss->map->servers[i].id == id) return &ss->map->servers[i];
    return NULL;
}

/* On the loop thread: send request q, or queue it until its peer is connected (connecting it,
 * or waiting for a shard map that has its address). */
static void s2s_issue(rl__ss *ss, ss_s2s_req *q) {
    ss_s2s_req *failed = NULL;
    if (atomic_load(&ss->stopping) || rl__loop_is_closing(ss->loop)) {
        req_fail(q, RL_E_OPERATION_CANCELLED, "the storage server is stopping");
        return;
    }
    pthread_mutex_lock(&ss->peers_mu);
    ss_peer *p = peer_find(ss, q->server, 1);
    if (!p) {
        pthread_mutex_unlock(&ss->peers_mu);
        req_fail(q, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    q->req_id = ++ss->s2s_next_id;
    if (p->conn) {
        peer_send_locked(p, q, &failed);
    } else {
        q->next = p->waiting;
        p->waiting = q;
        if (!p->connecting) {
            const ss_server *sv = map_server(ss, q->server);
            if (sv) peer_connect_locked(ss, p, sv, &failed);
            else /* not registered when the map was fetched: wait for a newer map */ rl__ss_want_map(ss);
        }
    }
    pthread_mutex_unlock(&ss->peers_mu);
    fail_chain(failed, RL_E_SERVER_UNAVAILABLE, "a storage-to-storage request could not be sent");
}

void rl__ss_peers_on_map(rl__ss *ss) {
    ss_s2s_req *failed = NULL;
    pthread_mutex_lock(&ss->peers_mu);
    for (ss_peer *p = ss->peers; p; p = p->next) {
        if (!p->waiting || p->conn || p->connecting) continue;
        const ss_server *sv = map_server(ss, p->id);
        if (sv) peer_connect_locked(ss, p, sv, &failed);
    }
    pthread_mutex_unlock(&ss->peers_mu);
    fail_chain(failed, RL_E_SERVER_UNAVAILABLE, "cannot connect to a storage server");
}

/* Posted by a worker: issue the requests of a batch it could not send itself. The post carries
 * one reference of the batch. */
static void on_s2s_start(rl__loop *loop, void *ud) {
    (void)loop;
    ss_batch *b = ud;
    for (int i = 0; i < b->n_reqs; i++)
        if (!b->reqs[i].sent) s2s_issue(b->ss, &b->reqs[i]);
    batch_unref(b); /* the post's own reference */
}

/* On a worker: send what can go directly (the peer is connected), post the rest to the loop.
 * Returns RL_OK, or RL_E_OUT_OF_MEMORY when the post failed (the unsent requests are failed). */
static int s2s_send(rl__ss *ss, ss_batch *b) {
    ss_s2s_req *failed = NULL;
    int post = 0;
    pthread_mutex_lock(&ss->peers_mu);
    for (int i = 0; i < b->n_reqs; i++) {
        ss_s2s_req *q = &b->reqs[i];
        ss_peer *p = peer_find(ss, q->server, 0);
        if (p && p->conn && rl__conn_is_open(p->conn) && !atomic_load(&ss->stopping)) {
            q->req_id = ++ss->s2s_next_id;
            q->sent = 1;
            peer_send_locked(p, q, &failed);
        } else {
            post = 1;
        }
    }
    pthread_mutex_unlock(&ss->peers_mu);
    fail_chain(failed, RL_E_SERVER_UNAVAILABLE, "a storage-to-storage request could not be sent");
    if (!post) return RL_OK;
    atomic_fetch_add(&b->refs, 1);
    if (rl__loop_post(ss->loop, on_s2s_start, b) == RL_OK) return RL_OK;
    atomic_fetch_sub(&b->refs, 1);
    for (int i = 0; i < b->n_reqs; i++)
        if (!b->reqs[i].sent) req_fail(&b->reqs[i], RL_E_OUT_OF_MEMORY, "out of memory");
    return RL_E_OUT_OF_MEMORY;
}

void rl__ss_s2s_tick(rl__ss *ss) {
    uint64_t now = rl__clock_mono_ns();
    ss_s2s_req *expired = NULL;
    pthread_mutex_lock(&ss->peers_mu);
    for (ss_peer *p = ss->peers; p; p = p->next) {
        ss_s2s_req **lists[2] = {&p->pending, &p->waiting};
        for (int l = 0; l < 2; l++) {
            ss_s2s_req **pp = lists[l];
            while (*pp) {
                ss_s2s_req *q = *pp;
                if (q->deadline_ns > now) {
                    pp = &q->next;
                    continue;
                }
                *pp = q->next;
                q->next = expired;
                expired = q;
            }
        }
    }
    pthread_mutex_unlock(&ss->peers_mu);
    for (ss_s2s_req *n; expired; expired = n) {
        n = expired->next;
        expired->next = NULL;
        req_fail(expired, RL_E_TIMED_OUT, "storage server %u did not answer in time", expired->server);
    }
}

void rl__ss_peers_free(rl__ss *ss) {
    pthread_mutex_lock(&ss->peers_mu);
    ss_peer *p = ss->peers, *next;
    ss->peers = NULL;
    pthread_mutex_unlock(&ss->peers_mu);
    for (; p; p = next) {
        next = p->next;
        fail_chain(peer_detach_all(p), RL_E_OPERATION_CANCELLED, "the storage server is stopping");
        if (p->conn) {
            rl__conn_set_callbacks(p->conn, NULL, NULL, NULL);
            rl__conn_close(p->conn, 0);
            rl__conn_release(p->conn);
        }
        rl__free(p);
    }
}

/* ==== the batch hook (worker threads) ======================================================= */

/* A growable array of pieces in the arena. */
typedef struct {
    ss_piece *v;
    int n, cap;
} pieces_t;

/* One mapped read's context for its hook. */
typedef struct {
    rl__ss *ss;
    rl__version version; /* the request's version (invariant 1) */
    int strategy;        /* RL_FETCH_INDIVIDUAL or RL_FETCH_GROUPED */
    int owners;          /* grouped: GET_MULTI requests of the round being encoded */
    long page_target;    /* grouped: the page's byte target (> 0); streamed: a batch's */
    int streamed;        /* GET_MAPPED_STREAM: an unread item ends a batch, not the page */
    int defer;           /* grouped: RL_MAPPED_DEFER_REMOTE, remote range secondaries left unread */
    uint64_t seen_bytes; /* grouped, streamed: key + value bytes of the remote items taken */
    uint64_t seen_items; /* ... and their number (the mean sizes the next round: ask_items) */
    long page_bytes;     /* grouped, streamed: the page's own target (the request's) */
    int kept;            /* grouped: entries the page's rounds kept so far */
    /* grouped, streamed: the next round, asked for before this batch is sent (prefetch) */
    ss_batch *pf_b; /* its requests (NULL: none in flight) */
    pieces_t pf_ps; /* its pieces, first and count (pf_arena[pf_slot]) */
    int *pf_first, *pf_count;
    int pf_n;                     /* its items */
    rl__secondary_item *pf_items; /* copies of its items (bounds in the read's arena: stable) */
    int pf_slot, pf_used;         /* the arena it lives in; arenas initialised */
    rl_arena pf_arena[2];         /* a round's rows live until the batch after it is sent */
    int batches;                  /* hook calls so far */
    uint32_t local, remote;       /* secondaries the reply carries, by where they were read (run_job) */
    uint32_t s2s_requests, s2s_round_trips;
    uint64_t s2s_bytes_sent, s2s_bytes_received;
    rl__msg_s2s_peer peer_stats[RL_PROTO_MAX_PEER_STATS]; /* the first peers, in first-use order */
    uint32_t n_peer_stats;
    uint32_t n_peers;       /* distinct peers read from (all of them, beyond the table too) */
    uint32_t overflow[256]; /* ids of peers beyond the table, to count them once (bounded) */
    uint32_t n_overflow;
    rl__errdetail err; /* why the mapped read fails */
} mctx;

/* The per-peer entry of peer id (counted as a new distinct peer on first use), or NULL when the
 * table is full (the peer is still counted in n_peers). */
static rl__msg_s2s_peer *peer_entry(mctx *c, uint32_t id) {
    for (uint32_t i = 0; i < c->n_peer_stats; i++)
        if (c->peer_stats[i].server_id == id) return &c->peer_stats[i];
    if (c->n_peer_stats < RL_PROTO_MAX_PEER_STATS) {
        rl__msg_s2s_peer *p = &c->peer_stats[c->n_peer_stats++];
        memset(p, 0, sizeof *p);
        p->server_id = id;
        c->n_peers++;
        return p;
    }
    for (uint32_t i = 0; i < c->n_overflow; i++)
        if (c->overflow[i] == id) return NULL;
    if (c->n_overflow < 256) c->overflow[c->n_overflow++] = id;
    c->n_peers++;
    return NULL;
}

static ss_piece *piece_add(pieces_t *ps, rl_arena *a) {
    if (ps->n == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 16;
        ss_piece *v = rl__arena_alloc(a, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        if (ps->n) memcpy(v, ps->v, (size_t)ps->n * sizeof *v);
        ps->v = v;
        ps->cap = cap;
    }
    ss_piece *p = &ps->v[ps->n++];
    memset(p, 0, sizeof *p);
    return p;
}

/* The team member to ask for a shard: the first healthy storage server other than this one,
 * else the first other one. 0 when none. */
static uint32_t pick_owner(const rl__ss *ss, const ss_shard *sh) {
    uint32_t fallback = 0;
    for (uint32_t t = 0; t < sh->n_team; t++) {
        uint32_t id = sh->team[t];
        if (id == ss->o.id || id == 0) continue;
        if (!fallback) fallback = id;
        for (uint32_t i = 0; i < ss->map->n_servers; i++)
            if (ss->map->servers[i].id == id && ss->map->servers[i].healthy) return id;
    }
    return fallback;
}

/* The index of the map's shard holding key, or -1. */
static int map_find(const ss_map *m, const uint8_t *k, uint32_t kl) {
    uint32_t lo = 0, hi = m->n_shards;
    while (lo < hi) { /* shards are sorted and contiguous: the last with begin <= k */
        uint32_t mid = (lo + hi) / 2;
        if (rl__bytes_cmp(m->shards[mid].r.begin, m->shards[mid].r.begin_len, k, kl) <= 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1;
    const ss_shard *s = &m->shards[lo - 1];
    return rl__bytes_cmp(k, kl, s->r.end, s->r.end_len) < 0 ? (int)lo - 1 : -1;
}

/* Split item i into pieces (caller holds map_mu). Returns RL_OK or the item's error (message
 * in c->err). */
static int split_item(mctx *c, const rl__secondary_item *it, int i, pieces_t *ps, rl_arena *a) {
    rl__ss *ss = c->ss;
    const uint8_t *cur = it->begin, *end = it->end;
    uint32_t cur_len = it->begin_len, end_len = it->end_len;
    if (!it->is_range) end = it->end, end_len = it->end_len; /* one key: [P, P + \0) */
    int first = 1;
    do {
        ss_piece *p = piece_add(ps, a);
        if (!p) return RL_E_OUT_OF_MEMORY;
        p->item = i;
        p->is_range = it->is_range;
        int k = rl__ss_own_find(ss, cur, cur_len, 0), moved_out = 0;
        if (k >= 0 && rl__ss_own_version(ss, k, c->version) != RL_OK) { /* moving (ss_move.c) */
            moved_out = rl__ss_own_version(ss, k, c->version) == RL_E_WRONG_SHARD_SERVER;
            k = -1;
        }
        const uint8_t *pe;
        uint32_t pel;
        if (k >= 0) {
            p->local = 1;
            pe = ss->own[k].end, pel = ss->own[k].end_len;
        } else {
            int s = ss->map ? map_find(ss->map, cur, cur_len) : -1;
            if (s < 0 || !(p->owner = pick_owner(ss, &ss->map->shards[s]))) {
                rl__ss_want_map(ss);
                if (moved_out) { /* the map predates the move: the client retries shortly */
                    rl__errdetail_set(&c->err,
                                      "storage server %u: a secondary's range "
                                      "moved away and its shard map is older than the move",
                                      ss->o.id);
                    return RL_E_WRONG_SHARD_SERVER;
                }
                rl__errdetail_set(&c->err,
                                  "storage server %u knows no storage server holding a secondary key "
                                  "(shard map %s)",
                                  ss->o.id, ss->map ? "has no owner" : "not fetched yet");
                rl__ss_want_map(ss);
                return RL_E_SERVER_UNAVAILABLE;
            }
            pe = ss->map->shards[s].r.end, pel = ss->map->shards[s].r.end_len;
            /* Stop where a range of this server starts, so that part is read locally. */
            for (uint32_t j = 0; j < ss->n_own; j++)
                if (rl__bytes_cmp(ss->own[j].begin, ss->own[j].begin_len, cur, cur_len) > 0 &&
                    rl__bytes_cmp(ss->own[j].begin, ss->own[j].begin_len, pe, pel) < 0)
                    pe = ss->own[j].begin, pel = ss->own[j].begin_len;
        }
        if (!it->is_range || rl__bytes_cmp(end, end_len, pe, pel) <= 0) {
            /* The rest of the item lies in this piece. */
            p->begin = first ? it->begin : rl__arena_memdup(a, cur, cur_len);
            p->begin_len = cur_len;
            p->end = end;
            p->end_len = end_len;
            return p->begin ? RL_OK : RL_E_OUT_OF_MEMORY;
        }
        p->begin = first ? it->begin : rl__arena_memdup(a, cur, cur_len);
        p->begin_len = cur_len;
        p->end = rl__arena_memdup(a, pe, pel);
        p->end_len = pel;
        if (!p->begin || !p->end) return RL_E_OUT_OF_MEMORY;
        cur = p->end;
        cur_len = pel;
        first = 0;
    } while (1);
}

/* 1 if item it lies wholly inside one range this server holds at the read's version (what
 * split_item would make one local piece of): the range the previous item fell in (*kp) is tried
 * first, so a page of secondaries in one shard costs three key comparisons each and no piece.
 * Caller holds map_mu. Owned ranges are disjoint (ss_int.h), so the range found is the one
 * rl__ss_own_find would return. */
static int item_local(const rl__ss *ss, const rl__secondary_item *it, rl__version v, int *kp) {
    int k = *kp;
    if (k < 0 || (uint32_t)k >= ss->n_own ||
        rl__bytes_cmp(it->begin, it->begin_len, ss->own[k].begin, ss->own[k].begin_len) < 0 ||
        rl__bytes_cmp(it->begin, it->begin_len, ss->own[k].end, ss->own[k].end_len) >= 0) {
        if ((k = rl__ss_own_find(ss, it->begin, it->begin_len, 0)) < 0) return 0;
        *kp = k;
    }
    if (rl__ss_own_version(ss, k, v) != RL_OK) return 0; /* moving: split_item decides */
    return !it->is_range || rl__bytes_cmp(it->end, it->end_len, ss->own[k].end, ss->own[k].end_len) <= 0;
}

/* Read a local piece at the engine version v. */
static void read_local_piece(rl__ss *ss, rl__version v, const rl__secondary_item *it, ss_piece *p, rl_arena *a) {
    if (!p->is_range) {
        int present = 0;
        const uint8_t *val = NULL;
        uint32_t vl = 0;
        p->error = rl__storage_get(ss->st, v, p->begin, p->begin_len, a, &present, &val, &vl);
        if (p->error == RL_OK && present) {
            p->kvs = rl__arena_alloc(a, sizeof *p->kvs);
            if (!p->kvs) {
                p->error = RL_E_OUT_OF_MEMORY;
                return;
            }
            p->kvs->key = p->begin;
            p->kvs->key_len = p->begin_len;
            p->kvs->value = val ? val : p->begin;
            p->kvs->value_len = vl;
            p->n_kvs = 1;
        }
        return;
    }
    p->error = rl__storage_get_range(ss->st, v, p->begin, p->begin_len, p->end, p->end_len, it->row_limit,
                                     it->byte_limit, 0, a, &p->kvs, &p->n_kvs, &p->more);
}

/* Encode request q's GET_MULTI (its pieces, at the request's version). */
static int encode_req(mctx *c, ss_batch *b, ss_s2s_req *q, const rl__secondary_item *items) {
    rl__msg m;
    rl__msg_read_item stack[16], *its = stack;
    if (q->n_pieces > 16) {
        its = rl__malloc((size_t)q->n_pieces * sizeof *its);
        if (!its) return RL_E_OUT_OF_MEMORY;
    }
    for (int k = 0; k < q->n_pieces; k++) {
        const ss_piece *p = &b->pieces[q->pieces[k]];
        its[k].is_range = (uint8_t)p->is_range;
        its[k].begin = p->begin;
        its[k].begin_len = p->begin_len;
        its[k].end = p->end;
        its[k].end_len = p->end_len;
        its[k].row_limit = p->is_range ? items[p->item].row_limit : 1;
        its[k].byte_limit = items[p->item].byte_limit;
    }
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_MULTI;
    m.u.get_multi_req.version = c->version;
    m.u.get_multi_req.items = its;
    m.u.get_multi_req.n_items = (uint32_t)q->n_pieces;
    /* grouped: the owners share the page's byte target (each still reads its first
     * SS_MULTI_MIN_ITEMS items: what a batch of individual's would), so a round fetches about
     * what the page keeps (it ends at the first unread item). */
    if (c->strategy == RL_FETCH_GROUPED) {
        long share = c->page_target / (c->owners > 0 ? c->owners : 1);
        /* a sized round (ask_items) asks for what it keeps: any owner may hold all of it */
        if (c->streamed && c->seen_items > 0) share = c->page_target;
        m.u.get_multi_req.max_bytes = (uint64_t)(share > 1 ? share : 1);
    }
    rl__buf_init(&q->payload);
    int rc = rl__msg_encode(&q->payload, &m, &c->err);
    if (its != stack) rl__free(its);
    return rc;
}

/* Send the remote pieces of a batch (step 3 of the file header): *out gets the batch in flight
 * (NULL when no piece is remote), which remote_wait or remote_drop finishes. Returns RL_OK, or
 * an error (nothing in flight). */
static int remote_issue(mctx *c, pieces_t *ps, const rl__secondary_item *items, rl_arena *a, ss_batch **out) {
    rl__ss *ss = c->ss;
    int n_remote = 0;
    *out = NULL;
    for (int i = 0; i < ps->n; i++) n_remote += !ps->v[i].local;
    if (n_remote == 0) return RL_OK;
    ss_batch *b = rl__calloc(1, sizeof *b);
    if (!b) return RL_E_OUT_OF_MEMORY;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    rl__errdetail_init(&b->err, NULL); /* written under b->mu */
    atomic_store(&b->refs, 1);
    b->ss = ss;
    b->a = a;
    b->pieces = ps->v;
    b->n_pieces = ps->n;
    int rc = RL_OK;
    /* Requests: one per remote piece (individual), or one per owner (grouped). */
    b->reqs = rl__calloc((size_t)n_remote, sizeof *b->reqs);
    if (!b->reqs) {
        batch_unref(b);
        return RL_E_OUT_OF_MEMORY;
    }
    for (int i = 0; i < ps->n; i++) {
        const ss_piece *p = &ps->v[i];
        if (p->local) continue;
        ss_s2s_req *q = NULL;
        if (c->strategy == RL_FETCH_GROUPED)
            for (int r = 0; r < b->n_reqs; r++)
                if (b->reqs[r].server == p->owner) q = &b->reqs[r];
        if (!q) {
            q = &b->reqs[b->n_reqs++];
            q->b = b;
            q->server = p->owner;
            q->pieces = rl__malloc((size_t)n_remote * sizeof *q->pieces);
            rl__buf_init(&q->payload);
            if (!q->pieces) rc = RL_E_OUT_OF_MEMORY;
        }
        if (q->pieces) q->pieces[q->n_pieces++] = i;
    }
    c->owners = b->n_reqs;
    for (int r = 0; rc == RL_OK && r < b->n_reqs; r++) {
        rl__buf_release(&b->reqs[r].payload);
        rc = encode_req(c, b, &b->reqs[r], items);
    }
    if (rc != RL_OK) {
        batch_unref(b);
        return rc;
    }
    uint64_t t0 = rl__clock_mono_ns();
    uint64_t deadline = t0 + (uint64_t)ss->o.s2s_timeout_ms * 1000000u;
    for (int r = 0; r < b->n_reqs; r++) b->reqs[r].deadline_ns = deadline;
    b->outstanding = b->n_reqs;
    atomic_fetch_add(&b->refs, b->n_reqs); /* one per request until it is finished */
    c->s2s_requests += (uint32_t)b->n_reqs;
    c->s2s_round_trips++;
    for (int r = 0; r < b->n_reqs; r++) {
        uint64_t fb = RL_FRAME_HEADER_LEN + b->reqs[r].payload.len;
        c->s2s_bytes_sent += fb;
        rl__msg_s2s_peer *pe = peer_entry(c, b->reqs[r].server);
        if (pe) pe->requests++, pe->items += (uint32_t)b->reqs[r].n_pieces, pe->bytes_sent += fb;
    }
    s2s_send(ss, b); /* what it cannot send is failed, and seen by remote_wait */
    *out = b;
    return RL_OK;
}

/* Give up batch b (issued, not waited for): its late replies write nothing (invariant 3). */
static void remote_drop(ss_batch *b) {
    pthread_mutex_lock(&b->mu);
    b->cancelled = 1;
    pthread_mutex_unlock(&b->mu);
    batch_unref(b);
}

/* Wait for batch b's replies (or its deadline, or a stop) and release it. Returns RL_OK, or the
 * error that fails the mapped read (message in c->err). */
static int remote_wait(mctx *c, ss_batch *b) {
    rl__ss *ss = c->ss;
    int rc = RL_OK;
    uint64_t deadline = b->n_reqs ? b->reqs[0].deadline_ns : rl__clock_mono_ns();
    /* Wait (in slices, so a stop is seen), invariant 3. */
    pthread_mutex_lock(&b->mu);
    while (b->outstanding > 0 && !atomic_load(&ss->stopping)) {
        uint64_t now = rl__clock_mono_ns();
        if (now >= deadline) break;
        uint64_t slice = deadline - now;
        if (slice > 50000000u) slice = 50000000u;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)(slice / 1000000000u);
        ts.tv_nsec += (long)(slice % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    if (b->outstanding > 0) {
        uint32_t late = 0;
        for (int r = 0; r < b->n_reqs; r++)
            if (!b->reqs[r].done) late = b->reqs[r].server;
        b->cancelled = 1;
        if (atomic_load(&ss->stopping)) {
            rc = RL_E_OPERATION_CANCELLED;
            rl__errdetail_set(&c->err, "storage server %u is stopping", ss->o.id);
        } else {
            rc = RL_E_TIMED_OUT;
            rl__errdetail_set(&c->err,
                              "storage server %u did not answer a storage-to-storage GET_MULTI from "
                              "storage server %u within %d ms",
                              late, ss->o.id, ss->o.s2s_timeout_ms);
        }
    } else if (b->error) {
        rc = b->error;
        rl__errdetail_set(&c->err, "a storage-to-storage read failed: %s", rl__errdetail_get(&b->err));
    }
    c->s2s_bytes_received += b->bytes_received;
    for (int r = 0; r < b->n_reqs; r++) /* the replies that came in time (as bytes_received) */
        if (b->reqs[r].done && b->reqs[r].reply_bytes) {
            rl__msg_s2s_peer *pe = peer_entry(c, b->reqs[r].server);
            if (pe) pe->bytes_received += b->reqs[r].reply_bytes;
        }
    pthread_mutex_unlock(&b->mu);
    batch_unref(b);
    return rc;
}

/* Run the remote pieces of a batch (step 3 of the file header). Returns RL_OK, or the error that
 * fails the mapped read (message in c->err). */
static int run_remote(mctx *c, pieces_t *ps, const rl__secondary_item *items, rl_arena *a) {
    ss_batch *b = NULL;
    int rc = remote_issue(c, ps, items, a, &b);
    return rc != RL_OK || !b ? rc : remote_wait(c, b);
}

/* Merge item it's pieces ps[first .. first + cnt) (key order) into the item's result under its
 * limits: the rows in order until the row limit or the byte limit (the row that crosses it
 * included); a piece cut off by its own limits ends the merge there (what follows it is not
 * known), and `more` says whether anything was left out. */
static int merge_item(rl__secondary_item *it, const ss_piece *ps, int cnt, rl_arena *a) {
    int all_local = 1, total = 0;
    for (int k = 0; k < cnt; k++) {
        if (ps[k].error) return ps[k].error;
        all_local &= ps[k].local;
        total += ps[k].n_kvs;
    }
    it->served_locally = all_local;
    if (cnt == 1) {
        it->kvs = ps[0].kvs;
        it->n_kvs = ps[0].n_kvs;
        it->more = ps[0].more;
        return RL_OK;
    }
    rl_keyvalue *out = total ? rl__arena_alloc(a, (size_t)total * sizeof *out) : NULL;
    if (total && !out) return RL_E_OUT_OF_MEMORY;
    int n = 0, more = 0, stop = 0;
    long bytes = 0;
    for (int k = 0; k < cnt && !stop; k++) {
        for (int j = 0; j < ps[k].n_kvs; j++) {
            if (n >= it->row_limit || bytes >= it->byte_limit) {
                more = 1;
                stop = 1;
                break;
            }
            out[n++] = ps[k].kvs[j];
            bytes += (long)ps[k].kvs[j].key_len + (long)ps[k].kvs[j].value_len;
        }
        if (!stop && ps[k].more) {
            more = 1;
            stop = 1;
        }
    }
    if (!stop && (n >= it->row_limit || bytes >= it->byte_limit)) {
        /* Limits reached at the very end: rows may remain only if a piece said so. */
        for (int k = 0; k < cnt; k++) more |= ps[k].more;
    }
    it->kvs = out;
    it->n_kvs = n;
    it->more = more;
    return RL_OK;
}

/* Merge item it's pieces; 0, or 1 with the item's error recorded (the hook stops, mapped.c fails
 * the read with it). The secondaries are counted from the entries the reply carries (run_job). */
static int take_item(mctx *c, rl__secondary_item *it, const ss_piece *ps, int cnt, rl_arena *a) {
    int e = merge_item(it, ps, cnt, a);
    if (e != RL_OK) {
        it->error = e;
        if (!rl__errdetail_len(&c->err)) rl__errdetail_set(&c->err, "a secondary read failed: %s", rl_error_name(e));
        return 1;
    }
    return 0;
}

/* `grouped` (the file header's steps 2–4 for a whole page): the batch is the page (up to
 * SS_GROUPED_MAX_BATCH entries; the index scan's byte budget, a fifth of the page's target,
 * already sizes it to the request). Items wholly in this server's shards go back to mapped.c
 * (read_here: zero-copy, one read lock), local pieces of the others are read here, and every
 * remote piece of the page goes out in one round — one GET_MULTI per owner, every owner at
 * once, the owners sharing SS_MAPPED_SECONDARY_BUDGET (max_bytes). The page ends (items unread)
 * before the first item with a piece a peer's budget did not reach, and mapped.c ends it after
 * the entry that brings the page's secondaries to SS_MAPPED_SECONDARY_BUDGET
 * (batch_secondary_bytes); the client's next page starts there. So a page costs one
 * storage-to-storage round trip and its reply's secondaries hold at most 24 MiB plus one entry. */
static int grouped_batch(mctx *c, rl__secondary_item *items, int n, pieces_t *ps, const int *first, const int *count,
                         rl__version v, rl_arena *a, ss_batch *issued) {
    int first_batch = c->batches++ == 0;
    for (int i = 0; i < n; i++)
        if (!items[i].deferred && (count[i] == 0 || (count[i] == 1 && ps->v[first[i]].local))) items[i].read_here = 1;
    for (int i = 0; i < ps->n; i++)
        if (ps->v[i].local && !items[ps->v[i].item].read_here)
            read_local_piece(c->ss, v, &items[ps->v[i].item], &ps->v[i], a);
    int rc = issued ? remote_wait(c, issued) : run_remote(c, ps, items, a);
    if (rc != RL_OK) return rc;
    for (int i = 0; i < n; i++) {
        int unread = 0;
        for (int k = first[i]; k < first[i] + count[i]; k++) unread |= ps->v[k].unread;
        if (unread) {
            if (i == 0 && first_batch) { /* cannot happen: a reply always reaches its first item */
                rl__errdetail_set(&c->err, "a peer left the page's first secondary unread");
                return RL_E_INTERNAL_ERROR;
            }
            for (int j = i; j < n; j++) items[j].unread = 1;
            c->kept += i;
            return RL_OK;
        }
        if (items[i].read_here || items[i].deferred) continue;
        if (take_item(c, &items[i], &ps->v[first[i]], count[i], a)) return RL_OK;
        if (c->streamed) {
            for (int j = 0; j < items[i].n_kvs; j++)
                c->seen_bytes += (uint64_t)items[i].kvs[j].key_len + items[i].kvs[j].value_len;
            c->seen_items++;
        }
    }
    c->kept += n;
    return RL_OK;
}

/* The items of n a sized round fits (ask_items), 0 when the page's target is spent. */
static int ask_fit(const mctx *c, int n) {
    double mean = (double)c->seen_bytes / (double)c->seen_items;
    if (mean < 1) mean = 1;
    double fit = (double)c->page_target / mean;
    if (c->page_bytes > 0) {
        double left = ((double)c->page_bytes - (double)c->seen_bytes) / mean;
        long end = c->kept + (long)(left > 0 ? left + 0.999 : 0);
        end = (end + SS_DEFAULT_BATCH - 1) / SS_DEFAULT_BATCH * SS_DEFAULT_BATCH;
        if ((double)(end - c->kept) < fit) fit = (double)(end - c->kept);
    }
    return fit >= n ? n : fit < 1 ? 0 : (int)fit;
}

/* `grouped`, streamed: the items of the next round, n at most. The first round asks for every
 * item and the owners share the batch's budget (max_bytes), so whatever lies past the first item a
 * peer did not reach is read and dropped — about as much again as is kept when records are large
 * and few make a batch. Once remote items have been taken, their mean size says how many fit the
 * batch's budget, and how many are left before the page's own target is spent (the page ends at
 * the next multiple of SS_DEFAULT_BATCH entries then: mapped.h's batch_step): the round asks for
 * the fewer of the two (at least one) and keeps about all of it; the others are left unread, and
 * the next batch starts with them (mapped.h). */
static int ask_items(const mctx *c, int n) {
    if (c->strategy != RL_FETCH_GROUPED || !c->streamed || c->seen_items == 0) return n;
    int k = ask_fit(c, n);
    return k < 1 ? 1 : k;
}

/* Step 1 for items[0..n): first[i] and count[i] of each item's pieces in ps (count 0: wholly in
 * this server's shards, read_here set), pieces in arena a. Caller holds map_mu. */
static int split_items(mctx *c, rl__secondary_item *items, int n, pieces_t *ps, int *first, int *count, rl_arena *a) {
    int k_last = -1, rc = RL_OK;
    for (int i = 0; i < n && rc == RL_OK; i++) {
        first[i] = ps->n;
        if (item_local(c->ss, &items[i], c->version, &k_last)) {
            items[i].read_here = 1; /* no piece: mapped.c reads it (count 0, local) */
            count[i] = 0;
            continue;
        }
        rc = split_item(c, &items[i], i, ps, a);
        count[i] = ps->n - first[i];
    }
    return rc;
}

/* Drop the prefetched round, if any (its replies write nothing more). */
static void pf_drop(mctx *c) {
    if (c->pf_b) remote_drop(c->pf_b);
    c->pf_b = NULL;
    c->pf_n = 0;
}

/* `grouped`, streamed, sized rounds: ask now for the round after this batch — items[0..n) are the
 * page's items after the ones this batch keeps, as mapped.c will hand them to the next call — so
 * that its GET_MULTIs travel and the peers read while this batch is encoded and sent. Its pieces
 * and rows go to the arena the round before last used (whose batch has been sent). The next call
 * takes it when its first item is this one's (mapped.c did not end the batch earlier), else drops
 * it. Nothing is asked when the page's target is spent or an error stops it (the next call asks
 * again). Caller holds nothing. */
static void pf_issue(mctx *c, rl__secondary_item *items, int n) {
    rl__ss *ss = c->ss;
    int k = n > 0 && !c->defer ? ask_fit(c, n) : 0; /* defer: every remote item is left unread */
    if (k < 1) return;
    if (!c->pf_used) {
        rl__arena_init(&c->pf_arena[0], 0);
        rl__arena_init(&c->pf_arena[1], 0);
        c->pf_used = 1;
    }
    c->pf_slot ^= 1;
    rl_arena *a = &c->pf_arena[c->pf_slot];
    rl__arena_reset(a);
    c->pf_ps.v = NULL, c->pf_ps.n = c->pf_ps.cap = 0;
    /* Everything this round needs from arena a is taken before its requests go out: from then on
     * the loop thread copies the peers' replies into a (under the batch's mutex, invariant 3), and
     * an arena takes one allocator at a time. */
    c->pf_first = rl__arena_alloc(a, (size_t)k * 2 * sizeof *c->pf_first);
    c->pf_items = rl__arena_alloc(a, (size_t)k * sizeof *c->pf_items);
    if (!c->pf_first || !c->pf_items) return;
    c->pf_count = c->pf_first + k;
    pthread_mutex_lock(&ss->map_mu);
    int rc = ss->map ? split_items(c, items, k, &c->pf_ps, c->pf_first, c->pf_count, a) : RL_E_INTERNAL_ERROR;
    pthread_mutex_unlock(&ss->map_mu);
    for (int i = 0; i < k; i++) items[i].read_here = 0; /* the next call's items are fresh */
    memcpy(c->pf_items, items, (size_t)k * sizeof *items);
    if (rc != RL_OK || remote_issue(c, &c->pf_ps, items, a, &c->pf_b) != RL_OK || !c->pf_b) {
        c->pf_b = NULL; /* nothing remote (or a failure): the next call asks itself */
        return;
    }
    c->pf_n = k; /* a is the loop thread's now, until this round is taken or dropped */
}

/* 1 when the prefetched round read exactly items[0..pf_n): the same bounds and limits, item for
 * item (mapped.c builds the bounds again for each call: compared by content). */
static int pf_matches(const mctx *c, const rl__secondary_item *items, int n) {
    if (!c->pf_b || n < c->pf_n) return 0;
    for (int i = 0; i < c->pf_n; i++) {
        const rl__secondary_item *x = &c->pf_items[i], *y = &items[i];
        if (x->is_range != y->is_range || x->row_limit != y->row_limit || x->byte_limit != y->byte_limit ||
            rl__bytes_cmp(x->begin, x->begin_len, y->begin, y->begin_len) ||
            rl__bytes_cmp(x->end, x->end_len, y->end, y->end_len))
            return 0;
    }
    return 1;
}

/* `grouped` with defer (RL_MAPPED_DEFER_REMOTE, docs/design.md §8.4 "Deferred secondaries"):
 * every range item with a piece on another server is answered unread — no rows, more, not local
 * (the client reads it from its owners) — and its pieces are taken out of ps, so nothing of it is
 * read here or asked of a peer. first/count are rebuilt for the pieces kept. */
static void defer_items(rl__secondary_item *items, int n, pieces_t *ps, int *first, int *count) {
    int w = 0;
    for (int i = 0; i < n; i++) {
        int remote = 0, f = first[i];
        for (int k = f; k < f + count[i]; k++) remote |= !ps->v[k].local;
        first[i] = w;
        if (remote && items[i].is_range) {
            items[i].kvs = NULL, items[i].n_kvs = 0, items[i].more = 1, items[i].served_locally = 0;
            items[i].deferred = 1;
            count[i] = 0;
            continue;
        }
        for (int k = f; k < f + count[i]; k++) ps->v[w++] = ps->v[k];
        count[i] = w - first[i];
    }
    ps->n = w;
}

/* rl_secondary_batch_fn of the storage server (the file header's steps 1–4). */
static int mapped_hook(void *vctx, rl__version v, rl__secondary_item *items, int n, rl_arena *a) {
    mctx *c = vctx;
    rl__ss *ss = c->ss;
    pieces_t ps = {NULL, 0, 0};
    int *first = rl__arena_alloc(a, (size_t)n * 2 * sizeof *first);
    if (!first) return RL_E_OUT_OF_MEMORY;
    int *count = first + n;
    int rc = RL_OK;
    pthread_mutex_lock(&ss->map_mu);
    if (!ss->map) {
        /* The shard map is fetched right after registering; a mapped read in that window
         * waits for it (bounded by the storage-to-storage timeout). */
        uint64_t deadline = rl__clock_mono_ns() + (uint64_t)ss->o.s2s_timeout_ms * 1000000u;
        rl__ss_want_map(ss);
        while (!ss->map && !atomic_load(&ss->stopping) && rl__clock_mono_ns() < deadline) {
            pthread_mutex_unlock(&ss->map_mu);
            rl__clock_sleep_us(5000);
            pthread_mutex_lock(&ss->map_mu);
        }
    }
    int n_all = n;
    ss_batch *issued = NULL;
    if (pf_matches(c, items, n)) { /* the round asked for already */
        issued = c->pf_b;
        n = c->pf_n;
        ps = c->pf_ps;
        first = c->pf_first, count = c->pf_count;
        c->pf_b = NULL, c->pf_n = 0;
    } else {
        pf_drop(c);
        n = ask_items(c, n);
        rc = split_items(c, items, n, &ps, first, count, a);
    }
    for (int i = n; i < n_all; i++) items[i].unread = 1;
    pthread_mutex_unlock(&ss->map_mu);
    if (rc != RL_OK) {
        if (issued) remote_drop(issued);
        return rc;
    }
    if (c->strategy == RL_FETCH_GROUPED) {
        if (c->defer && !issued) defer_items(items, n, &ps, first, count);
        rc = grouped_batch(c, items, n, &ps, first, count, v, a, issued);
        if (rc != RL_OK || !c->streamed || c->seen_items == 0) return rc;
        int kept = 0;
        while (kept < n && !items[kept].unread && items[kept].error == RL_OK) kept++;
        if (kept == n) {
            for (int i = n; i < n_all; i++) items[i].unread = 0; /* as mapped.c will hand them */
            pf_issue(c, &items[n], n_all - n);
            for (int i = n; i < n_all; i++) items[i].unread = 1;
        }
        return RL_OK;
    }
    c->batches++;
    /* An item wholly inside one of this server's shards goes back to mapped.c, which reads all
     * such items of the batch under one engine read lock (as without a hook); the local pieces of
     * items that cross shards are read here. */
    for (int i = 0; i < n; i++)
        if (count[i] == 1 && ps.v[first[i]].local) items[i].read_here = 1;
    for (int i = 0; i < ps.n; i++)
        if (ps.v[i].local && !items[ps.v[i].item].read_here) read_local_piece(ss, v, &items[ps.v[i].item], &ps.v[i], a);
    if ((rc = run_remote(c, &ps, items, a)) != RL_OK) return rc;
    for (int i = 0; i < n; i++) {
        if (items[i].read_here) continue;
        if (take_item(c, &items[i], &ps.v[first[i]], count[i], a))
            return RL_OK; /* mapped.c fails the read with the first item error */
    }
    return RL_OK;
}

/* ==== mapped reads (workers) ================================================================ */

int rl__ss_mapped_submit(rl__ss *ss, ss_client *cl, uint16_t type, uint64_t id, const uint8_t *payload, size_t len,
                         uint64_t t0_ns, int shard) {
    ss_job *j = rl__malloc(sizeof *j + len);
    if (!j) return RL_E_OUT_OF_MEMORY;
    memset(j, 0, sizeof *j);
    j->shard.begin = rl__ss_memdup(ss->own[shard].begin, ss->own[shard].begin_len);
    j->shard.end = rl__ss_memdup(ss->own[shard].end, ss->own[shard].end_len);
    if (!j->shard.begin || !j->shard.end) {
        rl__free(j->shard.begin);
        rl__free(j->shard.end);
        rl__free(j);
        return RL_E_OUT_OF_MEMORY;
    }
    j->shard.begin_len = ss->own[shard].begin_len;
    j->shard.end_len = ss->own[shard].end_len;
    j->conn = cl->conn;
    rl__conn_retain(j->conn);
    j->id = id;
    j->type = type;
    j->t0_ns = t0_ns;
    j->len = len;
    if (len) memcpy(j->payload, payload, len);
    pthread_mutex_lock(&ss->job_mu);
    if (ss->jobs_tail) ss->jobs_tail->next = j;
    else ss->jobs = j;
    ss->jobs_tail = j;
    atomic_fetch_add(&ss->mapped_queued, 1);
    pthread_cond_signal(&ss->job_cv);
    pthread_mutex_unlock(&ss->job_mu);
    return RL_OK;
}

static void job_free(ss_job *j) {
    rl__conn_release(j->conn);
    rl__free(j->shard.begin);
    rl__free(j->shard.end);
    rl__free(j);
}

/* ==== streamed mapped reads (GET_MAPPED_STREAM) ============================================== */

/* One streamed read's sending side (worker): the chunk being gathered and its flow control. */
typedef struct {
    rl__ss *ss;
    ss_stream st;           /* on ss->streams while the read runs */
    uint32_t chunk;         /* a chunk is sent once its entries reach this many bytes */
    rl_buf pend;            /* the chunk being gathered: 4 bytes for its count, then its entries encoded
                             * (the buffer becomes the frame's: stream_open_chunk starts the next) */
    uint32_t n_pend;        /* ... how many */
    uint32_t local, remote; /* secondaries sent, by where they were read */
    rl__errdetail *err;     /* why the stream failed */
} sstream;

void rl__ss_stream_credit(rl__ss *ss, rl__conn *conn, uint64_t id, const rl__msg_mapped_credit *m) {
    pthread_mutex_lock(&ss->stream_mu);
    for (ss_stream *st = ss->streams; st; st = st->next)
        if (st->conn == conn && st->id == id) {
            st->credited += m->bytes;
            if (m->cancel) st->cancelled = 1;
            pthread_cond_broadcast(&ss->stream_cv);
            break;
        }
    pthread_mutex_unlock(&ss->stream_mu);
}

static void stream_link(rl__ss *ss, ss_stream *st) {
    pthread_mutex_lock(&ss->stream_mu);
    st->prev = NULL;
    st->next = ss->streams;
    if (ss->streams) ss->streams->prev = st;
    ss->streams = st;
    pthread_mutex_unlock(&ss->stream_mu);
}

static void stream_unlink(rl__ss *ss, ss_stream *st) {
    pthread_mutex_lock(&ss->stream_mu);
    if (st->prev) st->prev->next = st->next;
    else ss->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    pthread_mutex_unlock(&ss->stream_mu);
}

/* Start gathering a chunk in x->pend (empty): room for a chunk's worth of entries, and its count's
 * 4 bytes, filled in when it is sent. An allocation failure is the buffer's sticky error. */
static void stream_open_chunk(sstream *x) {
    x->n_pend = 0;
    (void)rl__buf_reserve(&x->pend, (size_t)x->chunk + 4096);
    rl__buf_append(&x->pend, "\0\0\0\0", 4);
}

/* The bytes of the entries gathered in x->pend (after its count's 4; 0 after an allocation
 * failure left it empty). */
static size_t pend_entry_bytes(const sstream *x) { return x->pend.len > 4 ? x->pend.len - 4 : 0; }

/* Send the gathered chunk once the window has room for it (or nothing is outstanding): waits
 * for credit in slices, so a stop, a closed connection, a cancel and the credit deadline
 * (stream_credit_ms) are seen. RL_OK (sent, or nothing to send); RL_E_OPERATION_CANCELLED (the
 * client cancelled, or the server stops), RL_E_CONNECTION_FAILED, RL_E_TIMED_OUT. */
static int stream_flush(sstream *x) {
    rl__ss *ss = x->ss;
    ss_stream *st = &x->st;
    if (!x->n_pend) return RL_OK;
    if (rl__buf_error(&x->pend)) return RL_E_OUT_OF_MEMORY;
    uint64_t len = x->pend.len; /* the chunk's payload: count, entries */
    uint64_t deadline = rl__clock_mono_ns() + (uint64_t)ss->o.stream_credit_ms * 1000000u, out = 0;
    int rc = RL_OK, waited = 0;
    pthread_mutex_lock(&ss->stream_mu);
    for (;;) {
        out = st->sent > st->credited ? st->sent - st->credited : 0;
        if (st->cancelled) {
            rc = RL_E_OPERATION_CANCELLED;
            rl__errdetail_set(x->err, "the client cancelled the stream");
            break;
        }
        if (out == 0 || out + len <= st->window) break;
        uint64_t now = rl__clock_mono_ns();
        if (atomic_load(&ss->stopping)) {
            rc = RL_E_OPERATION_CANCELLED;
            rl__errdetail_set(x->err, "storage server %u is stopping", ss->o.id);
            break;
        }
        if (!rl__conn_is_open(st->conn)) {
            rc = RL_E_CONNECTION_FAILED;
            break;
        }
        if (now >= deadline) {
            rc = RL_E_TIMED_OUT;
            rl__errdetail_set(x->err, "no credit from the client for %d ms (window %u bytes)", ss->o.stream_credit_ms,
                              st->window);
            break;
        }
        if (!waited) waited = 1, atomic_fetch_add(&ss->streams_waiting, 1);
        uint64_t slice = deadline - now > 20000000u ? 20000000u : deadline - now;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)slice;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&ss->stream_cv, &ss->stream_mu, &ts);
    }
    if (rc == RL_OK) {
        st->sent += len;
        out += len;
    }
    pthread_mutex_unlock(&ss->stream_mu);
    if (waited) atomic_fetch_sub(&ss->streams_waiting, 1);
    if (rc != RL_OK) return rc;
    uint64_t mx = atomic_load(&ss->stream_unacked_max);
    while (out > mx && !atomic_compare_exchange_weak(&ss->stream_unacked_max, &mx, out)) {}
    uint8_t *head = x->pend.data;
    for (int b = 0; b < 4; b++) head[b] = (uint8_t)(x->n_pend >> (8 * b));
    /* The connection takes the bytes (a delayed or queued frame is not copied again). */
    if (rl__conn_send_buf(st->conn, RL_MSG_MAPPED_CHUNK, 0, st->id, &x->pend) != RL_OK) return RL_E_CONNECTION_FAILED;
    atomic_fetch_add(&ss->n_stream_chunks, 1);
    atomic_fetch_add(&ss->n_stream_bytes, len);
    stream_open_chunk(x);
    return RL_OK;
}

/* The wire size of one entry in a chunk (proto.c's entry encoding). */
static size_t entry_wire_len(const rl_mapped_keyvalue *e) {
    size_t n = 4 + (size_t)e->index.key_len + 4 + (size_t)e->index.value_len + 1 + 4 + (size_t)e->begin_len + 4 +
               (size_t)e->end_len + 4 + 1 + 1 + (e->index_omitted ? 4 : 0);
    for (int j = 0; j < e->n_kvs; j++) n += 8 + (size_t)e->kvs[j].key_len + (size_t)e->kvs[j].value_len;
    return n;
}

/* The mapped read's emitter (rl__mapped_options.emit): count the secondaries, encode the
 * entries into the gathered chunk, and send it each time it reaches the chunk size. */
static int stream_emit(void *ctx, const rl_mapped_keyvalue *ents, int n) {
    sstream *x = ctx;
    int i = 0;
    while (i < n) {
        size_t have = pend_entry_bytes(x), room = have < x->chunk ? x->chunk - have : 1, run = 0;
        int j = i;
        while (j < n && run < room) run += entry_wire_len(&ents[j++]);
        for (int k = i; k < j; k++) {
            if (ents[k].served_locally) x->local++;
            else if (!(ents[k].more && ents[k].n_kvs == 0)) x->remote++; /* not a deferred one */
        }
        int rc = rl__msg_mapped_entries_append(&x->pend, &ents[i], (uint32_t)(j - i), x->err);
        if (rc != RL_OK) return rc;
        x->n_pend += (uint32_t)(j - i);
        if (pend_entry_bytes(x) >= x->chunk && (rc = stream_flush(x)) != RL_OK) return rc;
        i = j;
    }
    return RL_OK;
}

/* Encode the mapped reply m into out and send it on conn from this worker thread (a direct
 * write: a queued send, rl__ss_send_msg's, would wait for the loop thread to wake up and copy
 * the ~226 KB of a 1,000-row reply into its queue first). The frame is queued only when the
 * socket does not take it all, or the connection is delayed (netem). A reply the codec refuses
 * (a bug) is logged and answered with internal_error, as rl__ss_send_msg does. */
static void send_mapped_reply(rl__conn *conn, uint16_t type, uint64_t id, const rl__msg *m, rl_buf *out) {
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__buf_reset(out);
    int rc = rl__msg_encode(out, m, &why);
    if (rc == RL_OK && out->len > RL_NET_MAX_PAYLOAD) rc = RL_E_INVALID_ARGUMENT;
    if (rc != RL_OK) {
        rl__log(RL_LOG_ERROR, "storage server: cannot encode a %s reply for %s: %s (%s)", rl__msg_type_name(type),
                rl__conn_peer(conn), rl_error_name(rc), rc == RL_E_INVALID_ARGUMENT ? rl__errdetail_get(&why) : "");
        rl__ss_send_error(conn, type, id, RL_E_INTERNAL_ERROR, "the server could not encode its %s reply",
                          rl__msg_type_name(type));
    } else {
        rl__conn_send(conn, m->type, m->flags, id, out->data, out->len);
    }
    if (out->cap > (4u << 20)) { /* do not keep a huge buffer around */
        rl__buf_release(out);
        rl__buf_init(out);
    }
}

/* Count the secondaries of the entries a reply carries (what was read and returned, not what
 * the batches were handed: a page may end before the end of its batch). */
static void count_secondaries(const rl__mapped_entry *ents, int n, uint32_t *local, uint32_t *remote) {
    for (int i = 0; i < n; i++) {
        if (ents[i].served_locally) (*local)++;
        else if (!(ents[i].more && ents[i].n_kvs == 0)) (*remote)++; /* not a deferred one */
    }
}

/* Run one mapped read and send its reply: GET_MAPPED_RANGE's whole, or GET_MAPPED_STREAM's as
 * chunks then the final reply (sa: the secondaries' arena of a stream, reset per batch). */
static void run_job(rl__ss *ss, ss_job *j, rl_arena *a, rl_arena *sa, rl_buf *out) {
    rl__msg_get_mapped_range_req r;
    rl__msg_get_mapped_stream_req sr;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__version readv;
    const int streamed = j->type == RL_MSG_GET_MAPPED_STREAM;
    int rc = streamed ? rl__msg_get_mapped_stream_req_decode(j->payload, j->len, a, &sr, &why)
                      : rl__msg_get_mapped_range_req_decode(j->payload, j->len, a, &r, &why);
    if (rc != RL_OK) { /* decoded once on the loop already: only memory can fail here */
        rl__ss_send_error(j->conn, j->type, j->id, rc, "decoding failed");
        return;
    }
    if (streamed) r = sr.r;
    if ((rc = rl__ss_read_version(ss, r.version, &readv)) != RL_OK) {
        rl__ss_send_error(j->conn, j->type, j->id, rc, "version %" PRIu64 " at storage server %u", r.version, ss->o.id);
        return;
    }
    rl__mapper *mp = NULL;
    if ((rc = rl__mapper_parse(r.mapper, r.mapper_len, a, &mp)) != RL_OK) {
        rl__ss_send_error(j->conn, j->type, j->id, rc, "bad mapper");
        return;
    }
    const ss_range *sh = &j->shard;
    int hi_max = sh->end_len == 1 && sh->end[0] == 0xff;
    rl__range_bounds bd;
    rc = rl__storage_range_bounds(ss->st, readv, &r.begin, &r.end, sh->begin, sh->begin_len, sh->begin_len == 0,
                                  sh->end, sh->end_len, hi_max, r.reverse, a, &bd);
    if (rc != RL_OK) {
        rl__ss_send_error(j->conn, j->type, j->id, rc, "resolving the selectors at version %" PRIu64, readv);
        return;
    }
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = j->type; /* GET_MAPPED_STREAM's final reply is GET_MAPPED_RANGE's payload */
    m.flags = RL_FRAME_REPLY;
    rl__msg_get_mapped_range_reply *g = &m.u.get_mapped_range_reply;
    mctx c;
    memset(&c, 0, sizeof c);
    rl__errdetail_init(&c.err, NULL);
    c.ss = ss;
    c.version = r.version;
    c.strategy = r.strategy == RL_FETCH_DEFAULT ? SS_DEFAULT_STRATEGY : r.strategy;
    c.defer = c.strategy == RL_FETCH_GROUPED && r.defer_remote;
    sstream x;
    memset(&x, 0, sizeof x);
    rl__buf_init(&x.pend);
    x.ss = ss;
    x.err = &c.err;
    if (streamed) {
        x.st.conn = j->conn;
        x.st.id = j->id;
        uint32_t w = sr.window_bytes ? sr.window_bytes : SS_DEFAULT_STREAM_WINDOW;
        uint32_t ch = sr.chunk_bytes ? sr.chunk_bytes : SS_DEFAULT_STREAM_CHUNK;
        x.st.window = w < SS_STREAM_MAX_WINDOW ? w : SS_STREAM_MAX_WINDOW;
        x.chunk = ch < x.st.window ? ch : x.st.window;
        stream_open_chunk(&x);
        stream_link(ss, &x.st);
        atomic_fetch_add(&ss->n_streams, 1);
    }
    if (bd.unresolved) {
        g->status = RL_RANGE_SELECTOR_UNRESOLVED;
    } else if (rl__bytes_cmp(bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len) < 0) {
        rl__mapped_options o;
        memset(&o, 0, sizeof o);
        o.limit = r.limit;
        long page = streamed ? SS_STREAM_REPLY_BYTES : SS_REPLY_BYTES;
        o.target_bytes = r.target_bytes > 0 && r.target_bytes < page ? (long)r.target_bytes : page;
        o.reverse = r.reverse;
        o.omit_index = r.omit_index;
        int batch = r.batch ? (int)r.batch : SS_DEFAULT_BATCH;
        if (c.strategy == RL_FETCH_GROUPED) batch = SS_GROUPED_MAX_BATCH; /* the whole page */
        else if (batch > SS_MAX_BATCH) batch = SS_MAX_BATCH;
        o.batch = batch;
        if (c.strategy == RL_FETCH_GROUPED) { /* the page individual's batches would map */
            o.batch_secondary_bytes = SS_MAPPED_SECONDARY_BUDGET;
            o.batch_step = SS_DEFAULT_BATCH;
            c.page_target = o.target_bytes;
        }
        if (streamed) { /* batches of about a MiB, each sent as it is read (mapped.h) */
            o.emit = stream_emit;
            o.emit_ctx = &x;
            c.streamed = 1;
            c.page_bytes = o.target_bytes;
            o.sec_arena = sa;
            if (c.strategy == RL_FETCH_GROUPED) o.batch_secondary_bytes = c.page_target = SS_STREAM_BATCH_BYTES;
        }
        o.secondary_row_limit = r.secondary_row_limit ? r.secondary_row_limit : SS_DEFAULT_SECONDARY_ROWS;
        long sb = r.secondary_byte_limit ? (long)r.secondary_byte_limit : SS_DEFAULT_SECONDARY_BYTES;
        /* Per secondary: a share of the batch's budget (individual), or of ten entries'
         * (grouped, whose page ends at its byte budget: grouped_batch). */
        int shares = c.strategy == RL_FETCH_GROUPED ? SS_DEFAULT_BATCH : batch;
        if (sb > SS_MAPPED_SECONDARY_BUDGET / shares) sb = SS_MAPPED_SECONDARY_BUDGET / shares;
        o.secondary_byte_limit = sb;
        rl__mapped_entry *ents = NULL;
        int n = 0, more = 0;
        rc = rl__storage_get_mapped_range(ss->st, readv, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len, mp, &o,
                                          mapped_hook, &c, a, &ents, &n, &more);
        pf_drop(&c); /* a round asked for past the page's end */
        if (c.pf_used) rl__arena_release(&c.pf_arena[0]), rl__arena_release(&c.pf_arena[1]);
        if (rc == RL_OK && streamed) rc = stream_flush(&x); /* the last chunk */
        if (rc != RL_OK) {
            if (rc == RL_E_OPERATION_CANCELLED && streamed) atomic_fetch_add(&ss->n_stream_cancels, 1);
            if (rc == RL_E_INVALID_ARGUMENT || rc == RL_E_INTERNAL_ERROR) /* ours to fix: say where */
                rl__log(RL_LOG_ERROR, "storage server %u: a mapped read for %s failed: %s: %s", ss->o.id,
                        rl__conn_peer(j->conn), rl_error_name(rc),
                        rl__errdetail_len(&c.err) ? rl__errdetail_get(&c.err) : "(no detail)");
            rl__ss_send_error(j->conn, j->type, j->id, rc, "%s",
                              rl__errdetail_len(&c.err) ? rl__errdetail_get(&c.err) : "the mapped read failed");
            atomic_fetch_add(&ss->n_s2s_requests, c.s2s_requests);
            atomic_fetch_add(&ss->n_s2s_round_trips, c.s2s_round_trips);
            atomic_fetch_add(&ss->n_s2s_bytes_sent, c.s2s_bytes_sent);
            atomic_fetch_add(&ss->n_s2s_bytes_received, c.s2s_bytes_received);
            goto done;
        }
        if (streamed) {
            c.local = x.local, c.remote = x.remote; /* the entries went in chunks */
        } else {
            g->entries = ents;
            g->n_entries = (uint32_t)n;
            c.local = c.remote = 0;
            count_secondaries(ents, n, &c.local, &c.remote);
        }
        g->more = more ? 1 : 0;
        if (!more && bd.read_through) {
            g->read_through = r.reverse ? sh->begin : sh->end;
            g->read_through_len = r.reverse ? sh->begin_len : sh->end_len;
        }
        g->resolved_begin = bd.rbegin;
        g->resolved_begin_len = bd.rbegin_len;
        g->resolved_end = bd.rend;
        g->resolved_end_len = bd.rend_len;
    } else {
        g->resolved_begin = bd.rbegin;
        g->resolved_begin_len = bd.rbegin_len;
        g->resolved_end = bd.rend;
        g->resolved_end_len = bd.rend_len;
    }
    g->stats.secondaries_local = c.local;
    g->stats.secondaries_remote = c.remote;
    g->stats.s2s_requests = c.s2s_requests;
    g->stats.s2s_round_trips = c.s2s_round_trips;
    g->stats.s2s_bytes_sent = c.s2s_bytes_sent;
    g->stats.s2s_bytes_received = c.s2s_bytes_received;
    g->stats.s2s_peers = c.n_peers;
    g->stats.n_peer_stats = c.n_peer_stats;
    g->stats.peer_stats = c.peer_stats;
    atomic_fetch_add(&ss->n_s2s_bytes_sent, c.s2s_bytes_sent);
    atomic_fetch_add(&ss->n_s2s_bytes_received, c.s2s_bytes_received);
    g->stats.server_ns = rl__clock_mono_ns() - j->t0_ns;
    atomic_fetch_add(&ss->n_mapped_ns, g->stats.server_ns);
    atomic_fetch_add(&ss->n_sec_local, c.local);
    atomic_fetch_add(&ss->n_sec_remote, c.remote);
    atomic_fetch_add(&ss->n_s2s_requests, c.s2s_requests);
    atomic_fetch_add(&ss->n_s2s_round_trips, c.s2s_round_trips);
    send_mapped_reply(j->conn, j->type, j->id, &m, out);
done:
    if (streamed) stream_unlink(ss, &x.st);
    rl__buf_release(&x.pend);
}

static void *worker_main(void *arg) {
    rl__ss *ss = arg;
    rl_arena a, sa;
    rl_buf out;
    rl__arena_init(&a, 0);
    rl__arena_init(&sa, 0);
    rl__buf_init(&out);
    pthread_mutex_lock(&ss->job_mu);
    for (;;) {
        while (!ss->jobs && !ss->jobs_quit) pthread_cond_wait(&ss->job_cv, &ss->job_mu);
        if (!ss->jobs) break;
        ss_job *j = ss->jobs;
        ss->jobs = j->next;
        if (!ss->jobs) ss->jobs_tail = NULL;
        atomic_fetch_sub(&ss->mapped_queued, 1);
        atomic_fetch_add(&ss->mapped_running, 1);
        pthread_mutex_unlock(&ss->job_mu);
        if (atomic_load(&ss->stopping))
            rl__ss_send_error(j->conn, j->type, j->id, RL_E_OPERATION_CANCELLED, "storage server %u is stopping",
                              ss->o.id);
        else run_job(ss, j, &a, &sa, &out);
        job_free(j);
        atomic_fetch_sub(&ss->mapped_running, 1);
        rl__arena_reset(&a);
        rl__arena_reset(&sa);
        pthread_mutex_lock(&ss->job_mu);
    }
    pthread_mutex_unlock(&ss->job_mu);
    rl__arena_release(&a);
    rl__arena_release(&sa);
    rl__buf_release(&out);
    return NULL;
}

int rl__ss_workers_start(rl__ss *ss) {
    for (int i = 0; i < ss->o.workers; i++) {
        if (pthread_create(&ss->workers[i], NULL, worker_main, ss) != 0) return RL_E_OPERATION_FAILED;
        ss->n_workers++;
    }
    return RL_OK;
}

void rl__ss_workers_stop(rl__ss *ss) {
    pthread_mutex_lock(&ss->job_mu);
    ss->jobs_quit = 1;
    pthread_cond_broadcast(&ss->job_cv);
    pthread_mutex_unlock(&ss->job_mu);
    for (int i = 0; i < ss->n_workers; i++) pthread_join(ss->workers[i], NULL);
    ss->n_workers = 0;
    while (ss->jobs) {
        ss_job *j = ss->jobs;
        ss->jobs = j->next;
        atomic_fetch_sub(&ss->mapped_queued, 1);
        job_free(j);
    }
    ss->jobs_tail = NULL;
}

/* ==== GET_MULTI (the serving side, loop thread) ============================================= */

void rl__ss_get_multi(rl__ss *ss, ss_client *cl, uint64_t id, const rl__msg_get_multi_req *r, rl__version readv) {
    rl_arena *a = &ss->req_arena;
    rl__msg_read_result *res = rl__arena_alloc(a, (size_t)(r->n_items ? r->n_items : 1) * sizeof *res);
    if (!res) {
        rl__ss_send_error(cl->conn, RL_MSG_GET_MULTI, id, RL_E_OUT_OF_MEMORY, "out of memory");
        return;
    }
    long budget = SS_MULTI_REPLY_BYTES, spent = 0;
    if (r->max_bytes > 0 && r->max_bytes < (uint64_t)budget) budget = (long)r->max_bytes;
    for (uint32_t i = 0; i < r->n_items; i++) {
        const rl__msg_read_item *it = &r->items[i];
        rl__msg_read_result *o = &res[i];
        memset(o, 0, sizeof *o);
        /* Unread (no rows, more: docs/protocol.md, GET_MULTI) once the budget is spent, except
         * the first SS_MULTI_MIN_ITEMS while the reply is under SS_MULTI_REPLY_BYTES. */
        if (spent >= budget && (i >= SS_MULTI_MIN_ITEMS || spent >= SS_MULTI_REPLY_BYTES)) {
            o->more = 1;
            continue;
        }
        int k = rl__ss_own_find(ss, it->begin, it->begin_len, 0);
        if (k >= 0 && rl__ss_own_version(ss, k, r->version) != RL_OK) k = -1; /* moving */
        if (k < 0 || (it->is_range && rl__bytes_cmp(it->end, it->end_len, ss->own[k].end, ss->own[k].end_len) > 0)) {
            o->error = RL_E_WRONG_SHARD_SERVER;
            continue;
        }
        if (!it->is_range) {
            int present = 0;
            const uint8_t *val = NULL;
            uint32_t vl = 0;
            int rc = rl__storage_get(ss->st, readv, it->begin, it->begin_len, a, &present, &val, &vl);
            if (rc != RL_OK) {
                o->error = rc;
                continue;
            }
            if (present) {
                rl_keyvalue *kv = rl__arena_alloc(a, sizeof *kv);
                if (!kv) {
                    o->error = RL_E_OUT_OF_MEMORY;
                    continue;
                }
                kv->key = it->begin;
                kv->key_len = it->begin_len;
                kv->value = val;
                kv->value_len = vl;
                o->kvs = kv;
                o->n_kvs = 1;
                spent += (long)it->begin_len + (long)vl;
            }
            continue;
        }
        /* An item is read whole under its own limits (its more is its own), or not at all once
         * the reply's budget is spent: so a requester that groups several entries' secondaries
         * in one request gets the same result per entry as from separate requests. */
        long bl = it->byte_limit > 0 ? (long)it->byte_limit : (budget - spent > 1 ? budget - spent : 1);
        if (bl < 1) bl = 1;
        rl_keyvalue *kvs = NULL;
        int n = 0, more = 0;
        int rc = rl__storage_get_range(ss->st, readv, it->begin, it->begin_len, it->end, it->end_len, it->row_limit, bl,
                                       0, a, &kvs, &n, &more);
        if (rc != RL_OK) {
            o->error = rc;
            continue;
        }
        o->kvs = kvs;
        o->n_kvs = (uint32_t)n;
        o->more = more ? 1 : 0;
        for (int j = 0; j < n; j++) spent += (long)kvs[j].key_len + (long)kvs[j].value_len;
    }
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_MULTI;
    m.flags = RL_FRAME_REPLY;
    m.u.get_multi_reply.results = res;
    m.u.get_multi_reply.n_results = r->n_items;
    rl__ss_send_msg(cl->conn, id, &m, &ss->reply);
}
