/* ss_move.c — a storage server's side of shard moves (docs/design.md §8.4, Moves): fetching a
 * range the coordinator assigned to it, applying it after the log's later mutations, reporting
 * it complete (MOVE_SHARD), and refusing reads of a range that moved away. Loop thread only. A
 * part of the storage server (ss_int.h, "The files") that uses the core only: ss_coord.c hands it
 * PEEK changes and every version to apply; it asks for a sync through the core's maybe_sync hook.
 *
 * A fetch, from the PEEK reply that carries the assign change for range R (ending at E):
 *
 *   WAIT_MAP ──map at a version >= the change, naming R's source team──▶ FETCH
 *   FETCH: a connection of its own to one source member (HELLO role 2), GET_RANGE pages of R at
 *          the fixed fetch version F (= E at first) — transaction_too_old restarts the fetch at
 *          F = known; wrong_shard_server, errors and a silent source (5 s) try the next member
 *   READY: every page is here; the next engine version C this server applies (the next PEEK
 *          version above applied, or known when a reply leaves known > applied; the coordinator
 *          keeps versions advancing while a move waits) holds first: clear R, R's rows at F,
 *          every mutation of R the log sent with a version in (F, C) (kept in order while
 *          fetching), then C's own mutations ──▶ APPLIED: R is owned, readable from C on (reads
 *          of R below C are transaction_too_old)
 *   APPLIED ──a sync covers C──▶ MOVE_SHARD (R, C) to the coordinator; the fetch is done.
 *
 * While R is fetched the server's PEEK replies carry R's mutations (the coordinator's extra
 * range); they are applied to the engine like any other (R is not owned, so nothing reads
 * them, and the clear of R at C drops them) and their part in R is also kept for C.
 *
 * Invariants:
 *   1. R is not in `own` (nothing serves it) until its data at C is applied: the rows at F plus
 *      every mutation of R in (F, C], in version order, on top of a clear of R.
 *   2. A fetch is freed only when it has no connection and no connect in flight (dying: freed
 *      by the close or connect callback).
 *   3. A registration drops every fetch: the coordinator assigns the range again at the
 *      registration's version (coord_move.c invariant 4).
 *   4. DIR/moved-in lists the ranges moved in with their `since` ("x" + hex begin, "x" + hex
 *      end, since; one line each; replaced atomically: write, fsync, rename) and is written before
 *      MOVE_SHARD is sent, so after a restart the REGISTER reply's ranges get their `since` back
 *      (an owned range meeting a recorded one takes the larger since: conservative). Entries
 *      leave once since is older than the MVCC window.
 *   5. A range that moved away leaves `own` once its until is older than the window; its rows
 *      are then cleared in the next version this server applies (rl__ss_move_apply), unless it is assigned to this
 *      server again first (the pending drop is forgotten: the fetch clears it anyway).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/ss_int.h"
#include "storage/os.h"

#define FETCH_PAGE_BYTES (1L << 20)
#define FETCH_TIMEOUT_NS (5000000000ull)
#define FETCH_RETRY_NS (100000000ull)

enum { F_WAIT_MAP = 0, F_FETCH = 1, F_READY = 2, F_APPLIED = 3 };

typedef struct {
    rl__version v;
    rl__mutation m; /* keys in the fetch's arena */
} buffered;

struct ss_fetch {
    ss_fetch *next;
    rl__ss *ss;
    ss_range r;           /* heap keys */
    rl__version assigned; /* the change's version */
    rl__version fv;       /* the fetch version F */
    int state;
    int dying; /* freed by the connection's last callback (invariant 2) */
    int connecting;
    rl__conn *conn;
    uint64_t req_id, next_id;
    uint64_t sent_ns;
    uint64_t retry_ns; /* WAIT_MAP / a failed source: try again after this */
    uint32_t turn;     /* which source member to try */
    uint32_t src_id;
    rl_buf pos;         /* where the next page starts */
    rl_arena arena;     /* rows and buffered mutations */
    rl__mutation *rows; /* SETs */
    size_t n_rows, cap_rows;
    buffered *buf;
    size_t n_buf, cap_buf;
    rl__version complete; /* C */
};

static void fetch_restart(ss_fetch *f, rl__version fv);

/* n bytes of p copied into a (at least one byte allocated; p is not read when n is 0). */
static uint8_t *adup(rl_arena *a, const void *p, size_t n) {
    uint8_t *q = rl__arena_alloc(a, n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}
static void fetch_try(ss_fetch *f);

/* ---- Life cycle --------------------------------------------------------------------------------- */

static void fetch_free(ss_fetch *f) {
    rl__free(f->r.begin);
    rl__free(f->r.end);
    rl__buf_release(&f->pos);
    rl__arena_release(&f->arena);
    rl__free(f->rows);
    rl__free(f->buf);
    rl__free(f);
}

/* Take f off the list; free it now or when its connection is gone. */
static void fetch_drop(rl__ss *ss, ss_fetch *f) {
    for (ss_fetch **pp = &ss->fetches; *pp; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    f->next = NULL;
    if (f->conn || f->connecting) {
        f->dying = 1;
        if (f->conn) rl__conn_close(f->conn, 0);
        return;
    }
    fetch_free(f);
}

/* Close f's source connection (the next page goes to another member). */
static void fetch_disconnect(ss_fetch *f) {
    if (f->conn) rl__conn_close(f->conn, 0);
    f->req_id = 0;
}

/* ---- Source connection ---------------------------------------------------------------------------- */

static void send_page(ss_fetch *f) {
    rl__ss *ss = f->ss;
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_RANGE;
    m.u.get_range_req.version = f->fv;
    m.u.get_range_req.begin = (rl_key_selector){f->pos.data, (uint32_t)f->pos.len, 0, 1};
    m.u.get_range_req.end = (rl_key_selector){f->r.end, f->r.end_len, 0, 1};
    m.u.get_range_req.target_bytes = FETCH_PAGE_BYTES;
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__msg_encode(&b, &m, NULL);
    f->req_id = ++f->next_id;
    f->sent_ns = rl__clock_mono_ns();
    if (rc == RL_OK) rc = rl__conn_send(f->conn, RL_MSG_GET_RANGE, 0, f->req_id, b.data, b.len);
    rl__buf_release(&b);
    if (rc != RL_OK) {
        rl__log(RL_LOG_WARN, "storage server %u: cannot send a fetch page request: %s", ss->o.id, rl_error_name(rc));
        fetch_disconnect(f);
    }
}

static void on_src_close(rl__conn *conn, int err, void *ud) {
    ss_fetch *f = ud;
    (void)err;
    if (f->conn == conn) f->conn = NULL;
    rl__conn_release(conn);
    if (f->dying) {
        fetch_free(f);
        return;
    }
    f->req_id = 0;
    if (f->state == F_FETCH) {
        f->state = F_WAIT_MAP;
        f->turn++;
        f->retry_ns = rl__clock_mono_ns() + FETCH_RETRY_NS;
    }
}

/* Copy a key range part [b, e) of mutation m into f's buffer at version v. */
static int keep(ss_fetch *f, rl__version v, const rl__mutation *m) {
    if (RL_GROW(f->buf, f->cap_buf, f->n_buf + 1, 64)) return RL_E_OUT_OF_MEMORY;
    rl__mutation c = *m;
    c.p1 = adup(&f->arena, m->p1, m->len1);
    c.p2 = adup(&f->arena, m->p2, m->len2);
    if (!c.p1 || !c.p2) return RL_E_OUT_OF_MEMORY;
    f->buf[f->n_buf++] = (buffered){v, c};
    return RL_OK;
}

static void on_src_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    ss_fetch *f = ud;
    rl__ss *ss = f->ss;
    if (f->dying || !rl__conn_is_open(conn)) return;
    if (h->type == RL_MSG_HELLO && !(h->flags & RL_FRAME_ERROR)) return;
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_decode(h->type, h->flags, payload, h->payload_len, &a, &m, &why);
    if (rc != RL_OK || !(h->flags & RL_FRAME_REPLY) || (h->type != RL_MSG_GET_RANGE && h->type != RL_MSG_HELLO)) {
        rl__log(RL_LOG_WARN, "storage server %u: closing the fetch connection to %u: %s", ss->o.id, f->src_id,
                rc != RL_OK ? rl__errdetail_get(&why) : "an unexpected frame");
        rl__arena_release(&a);
        fetch_disconnect(f);
        return;
    }
    if (h->type == RL_MSG_HELLO || h->id != f->req_id) { /* a refused HELLO, or stale */
        rl__arena_release(&a);
        if (h->type == RL_MSG_HELLO) fetch_disconnect(f);
        return;
    }
    f->req_id = 0;
    if (h->flags & RL_FRAME_ERROR) {
        int code = m.u.error.code;
        rl__log(RL_LOG_INFO,
                "storage server %u: fetching a range at version %" PRIu64 " from "
                "%u: %s",
                ss->o.id, f->fv, f->src_id, rl_error_name(code));
        rl__arena_release(&a);
        if (code == RL_E_TRANSACTION_TOO_OLD) {
            fetch_restart(f, atomic_load(&ss->known)); /* a newer F, same source */
            send_page(f);
        } else if (code == RL_E_FUTURE_VERSION) {
            send_page(f); /* the source was still catching up */
        } else {
            rl__ss_want_map(ss);
            fetch_disconnect(f); /* the next member after a pause */
        }
        return;
    }
    const rl__msg_get_range_reply *g = &m.u.get_range_reply;
    for (uint32_t i = 0; i < g->n_kvs && rc == RL_OK; i++) {
        if ((rc = RL_GROW(f->rows, f->cap_rows, f->n_rows + 1, 256))) break;
        const rl_keyvalue *kv = &g->kvs[i];
        uint8_t *k = adup(&f->arena, kv->key, kv->key_len);
        uint8_t *v = adup(&f->arena, kv->value, kv->value_len);
        if (!k || !v) {
            rc = RL_E_OUT_OF_MEMORY;
            break;
        }
        f->rows[f->n_rows++] = (rl__mutation){RL_MUT_SET, k, kv->key_len, v, kv->value_len};
    }
    if (rc != RL_OK) {
        rl__arena_release(&a);
        rl__ss_fatal(ss, rc, "fetching a moved range");
        return;
    }
    atomic_fetch_add(&ss->n_fetched_rows, g->n_kvs);
    if (g->status != RL_RANGE_OK) {
        rl__log(RL_LOG_WARN, "storage server %u: a fetch page was unresolved; asking again", ss->o.id);
        rl__arena_release(&a);
        send_page(f);
        return;
    }
    int next = 0;
    rl__buf_reset(&f->pos);
    if (g->more && g->n_kvs) {
        const rl_keyvalue *last = &g->kvs[g->n_kvs - 1];
        rl__buf_append(&f->pos, last->key, last->key_len);
        rl__buf_append_byte(&f->pos, 0);
        next = 1;
    } else if (!g->more && g->read_through_len &&
               rl__bytes_cmp(g->read_through, g->read_through_len, f->r.end, f->r.end_len) < 0) {
        rl__buf_append(&f->pos, g->read_through, g->read_through_len); /* the source's next range */
        next = 1;
    }
    rl__arena_release(&a);
    if (rl__buf_error(&f->pos)) {
        rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "fetching a moved range");
        return;
    }
    if (next) {
        send_page(f);
        return;
    }
    f->state = F_READY;
    rl__log(RL_LOG_INFO,
            "storage server %u: fetched %zu rows of a moved range at version %" PRIu64
            " from storage server %u (%zu later mutations kept)",
            ss->o.id, f->n_rows, f->fv, f->src_id, f->n_buf);
    fetch_disconnect(f);
    rl__ss_move_after_peek(ss);
    rl__ss_maybe_sync(ss);
}

static void on_src_connect(rl__conn *conn, int err, void *ud) {
    ss_fetch *f = ud;
    rl__ss *ss = f->ss;
    f->connecting = 0;
    if (err != RL_OK || f->dying || atomic_load(&ss->stopping)) {
        if (conn) {
            rl__conn_close(conn, 0);
            rl__conn_release(conn);
        }
        if (f->dying) {
            fetch_free(f);
            return;
        }
        f->state = F_WAIT_MAP;
        f->turn++;
        f->retry_ns = rl__clock_mono_ns() + FETCH_RETRY_NS;
        return;
    }
    f->conn = conn;
    rl__conn_set_callbacks(conn, on_src_frame, on_src_close, f);
    rl__ss_send_hello(ss, conn);
    send_page(f);
}

/* Start (or restart) fetching at version fv: rows are dropped, kept mutations at or below fv
 * too (the source's data at fv holds them). */
static void fetch_restart(ss_fetch *f, rl__version fv) {
    rl_arena na;
    rl__arena_init(&na, 0);
    size_t n = 0;
    for (size_t i = 0; i < f->n_buf; i++) {
        if (f->buf[i].v <= fv) continue;
        rl__mutation c = f->buf[i].m;
        c.p1 = adup(&na, c.p1, c.len1);
        c.p2 = adup(&na, c.p2, c.len2);
        if (!c.p1 || !c.p2) {
            rl__arena_release(&na);
            rl__ss_fatal(f->ss, RL_E_OUT_OF_MEMORY, "restarting a fetch");
            return;
        }
        f->buf[n++] = (buffered){f->buf[i].v, c};
    }
    f->n_buf = n;
    rl__arena_release(&f->arena);
    f->arena = na;
    f->n_rows = 0;
    f->fv = fv;
    rl__buf_reset(&f->pos);
    rl__buf_append(&f->pos, f->r.begin, f->r.begin_len);
}

/* WAIT_MAP: find R's source team in the map and connect to one member. */
static void fetch_try(ss_fetch *f) {
    rl__ss *ss = f->ss;
    if (f->state != F_WAIT_MAP || f->conn || f->connecting || f->dying) return;
    if (rl__clock_mono_ns() < f->retry_ns) return;
    const ss_map *map = ss->map;
    if (!map || map->version < f->assigned) {
        rl__ss_want_map(ss);
        return;
    }
    const ss_shard *sh = NULL;
    for (uint32_t i = 0; i < map->n_shards; i++)
        if (rl__bytes_cmp(map->shards[i].r.begin, map->shards[i].r.begin_len, f->r.begin, f->r.begin_len) <= 0 &&
            rl__bytes_cmp(f->r.begin, f->r.begin_len, map->shards[i].r.end, map->shards[i].r.end_len) < 0)
            sh = &map->shards[i];
    uint32_t cand[RL_PROTO_MAX_TEAM], n = 0;
    for (uint32_t t = 0; sh && t < sh->n_team; t++)
        if (sh->team[t] != ss->o.id) cand[n++] = sh->team[t];
    const ss_server *src = NULL;
    for (uint32_t k = 0; k < n && !src; k++) {
        uint32_t id = cand[(f->turn + k) % n];
        for (uint32_t j = 0; j < map->n_servers; j++)
            if (map->servers[j].id == id && map->servers[j].port) src = &map->servers[j];
    }
    if (!src) {
        rl__log(RL_LOG_DEBUG, "storage server %u: no source for a moved range in the map yet", ss->o.id);
        rl__ss_want_map(ss);
        f->retry_ns = rl__clock_mono_ns() + FETCH_RETRY_NS;
        return;
    }
    f->src_id = src->id;
    f->state = F_FETCH;
    f->connecting = 1;
    if (f->fv == 0) fetch_restart(f, f->assigned);
    int rc = rl__connect(ss->loop, src->addr, src->port, ss->o.connect_timeout_ms, on_src_connect, f, NULL);
    if (rc != RL_OK) {
        f->connecting = 0;
        f->state = F_WAIT_MAP;
        f->turn++;
        f->retry_ns = rl__clock_mono_ns() + FETCH_RETRY_NS;
    }
}

/* ---- DIR/moved-in (invariant 4) ----------------------------------------------------------------- */

static void moved_path(const rl__ss *ss, char *p, size_t cap, const char *suffix) {
    snprintf(p, cap, "%s/moved-in%s", ss->dir, suffix);
}

/* Rewrite DIR/moved-in from ss->moved_in (rl__os_write_file_atomic). RL_OK or the mapped error
 * (logged). */
static int moved_write(rl__ss *ss) {
    char path[4200];
    moved_path(ss, path, sizeof path, "");
    rl_buf b;
    rl__buf_init(&b);
    for (uint32_t i = 0; i < ss->n_moved_in; i++) {
        const ss_range *r = &ss->moved_in[i];
        rl__buf_append_byte(&b, 'x'); /* so an empty key is still a field */
        rl__buf_append_hex(&b, r->begin, r->begin_len);
        rl__buf_append_str(&b, " x");
        rl__buf_append_hex(&b, r->end, r->end_len);
        rl__buf_printf(&b, " %" PRIu64 "\n", r->since);
    }
    int rc = rl__buf_error(&b);
    if (rc == RL_OK) rc = rl__os_write_file_atomic(path, b.data, b.len, ss->o.no_sync, "storage server", NULL);
    rl__buf_release(&b);
    return rc;
}

/* Load DIR/moved-in once (a missing file is an empty list; a bad line is skipped, logged). */
static void moved_load(rl__ss *ss) {
    if (ss->moved_in_loaded) return;
    ss->moved_in_loaded = 1;
    char path[4200];
    moved_path(ss, path, sizeof path, "");
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[2 * RL_PROTO_MAX_KEY * 2 + 64];
    while (fgets(line, sizeof line, f)) {
        char *b = strtok(line, " \n"), *e = strtok(NULL, " \n"), *v = strtok(NULL, " \n");
        rl_buf kb, ke;
        rl__buf_init(&kb);
        rl__buf_init(&ke);
        ss_range *a = b && e && v ? rl__realloc(ss->moved_in, (ss->n_moved_in + 1) * sizeof *a) : NULL;
        if (a) ss->moved_in = a;
        if (!a || *b != 'x' || *e != 'x' || rl__bytes_from_hex(&kb, b + 1, strlen(b + 1)) ||
            rl__bytes_from_hex(&ke, e + 1, strlen(e + 1))) {
            rl__log(RL_LOG_WARN, "storage server %u: skipping a bad line of %s", ss->o.id, path);
        } else {
            ss_range *r = &a[ss->n_moved_in];
            memset(r, 0, sizeof *r);
            r->begin = rl__ss_memdup(kb.data, kb.len);
            r->end = rl__ss_memdup(ke.data, ke.len);
            r->begin_len = (uint32_t)kb.len;
            r->end_len = (uint32_t)ke.len;
            r->since = strtoull(v, NULL, 10);
            if (r->begin && r->end) ss->n_moved_in++;
        }
        rl__buf_release(&kb);
        rl__buf_release(&ke);
    }
    fclose(f);
}

/* Record range k as moved in at since (replacing what it overlaps) and drop entries that left
 * the window; then rewrite the file. */
static int moved_add(rl__ss *ss, const ss_range *k, rl__version since) {
    moved_load(ss);
    rl__version known = atomic_load(&ss->known), w = ss->o.window_versions;
    uint32_t n = 0;
    for (uint32_t i = 0; i < ss->n_moved_in; i++) {
        ss_range *r = &ss->moved_in[i];
        int overlaps = rl__bytes_cmp(r->begin, r->begin_len, k->end, k->end_len) < 0 &&
                       rl__bytes_cmp(k->begin, k->begin_len, r->end, r->end_len) < 0;
        if (overlaps || (known > w && r->since < known - w)) {
            rl__free(r->begin);
            rl__free(r->end);
            continue;
        }
        ss->moved_in[n++] = *r;
    }
    ss->n_moved_in = n;
    ss_range *a = rl__realloc(ss->moved_in, (n + 1) * sizeof *a);
    if (!a) return RL_E_OUT_OF_MEMORY;
    ss->moved_in = a;
    memset(&a[n], 0, sizeof a[n]);
    a[n].begin = rl__ss_memdup(k->begin, k->begin_len);
    a[n].end = rl__ss_memdup(k->end, k->end_len);
    a[n].begin_len = k->begin_len;
    a[n].end_len = k->end_len;
    a[n].since = since;
    if (!a[n].begin || !a[n].end) return RL_E_OUT_OF_MEMORY;
    ss->n_moved_in++;
    return moved_write(ss);
}

/* ---- Dropping moved-out rows ------------------------------------------------------------------- */

static int overlaps(const ss_range *r, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    return rl__bytes_cmp(r->begin, r->begin_len, e, el) < 0 && rl__bytes_cmp(b, bl, r->end, r->end_len) < 0;
}

/* Forget pending drops that meet [b, e) (the range is ours again: never clear it). */
static void drops_forget(rl__ss *ss, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < ss->n_drops; i++) {
        if (overlaps(&ss->drops[i], b, bl, e, el)) {
            rl__free(ss->drops[i].begin);
            rl__free(ss->drops[i].end);
            continue;
        }
        ss->drops[n++] = ss->drops[i];
    }
    ss->n_drops = n;
}

/* ---- Hooks of ss_coord.c ------------------------------------------------------------------------ */

void rl__ss_move_assign(rl__ss *ss, const rl__keyrange *k, rl__version v, rl__version end) {
    /* A range assigned again (a retry after a registration, or overlapping an older fetch)
     * starts over. */
    for (ss_fetch *f = ss->fetches, *next; f; f = next) {
        next = f->next;
        if (rl__bytes_cmp(f->r.begin, f->r.begin_len, k->end, k->end_len) < 0 &&
            rl__bytes_cmp(k->begin, k->begin_len, f->r.end, f->r.end_len) < 0)
            fetch_drop(ss, f);
    }
    rl__ss_own_remove(ss, k); /* not served until fetched (invariant 1) */
    drops_forget(ss, k->begin, k->begin_len, k->end, k->end_len);
    ss_fetch *f = rl__calloc(1, sizeof *f);
    if (f) {
        f->r.begin = rl__ss_memdup(k->begin, k->begin_len);
        f->r.end = rl__ss_memdup(k->end, k->end_len);
    }
    if (!f || !f->r.begin || !f->r.end) {
        if (f) fetch_free(f);
        rl__ss_fatal(ss, RL_E_OUT_OF_MEMORY, "starting a fetch");
        return;
    }
    f->ss = ss;
    f->r.begin_len = k->begin_len;
    f->r.end_len = k->end_len;
    f->assigned = end; /* F: this reply's versions are all <= end (the source's data at end) */
    rl__buf_init(&f->pos);
    rl__arena_init(&f->arena, 0);
    f->next = ss->fetches;
    ss->fetches = f;
    rl__log(RL_LOG_INFO,
            "storage server %u: assigned a range at version %" PRIu64 "; fetching "
            "it at %" PRIu64,
            ss->o.id, v, end);
    rl__ss_want_map(ss);
    fetch_try(f);
}

void rl__ss_move_remove(rl__ss *ss, const rl__keyrange *k, rl__version v) {
    for (ss_fetch *f = ss->fetches, *next; f; f = next) {
        next = f->next;
        if (rl__bytes_cmp(f->r.begin, f->r.begin_len, k->end, k->end_len) < 0 &&
            rl__bytes_cmp(k->begin, k->begin_len, f->r.end, f->r.end_len) < 0)
            fetch_drop(ss, f);
    }
    int i = rl__ss_own_find(ss, k->begin, k->begin_len, 0);
    rl__version since = i >= 0 ? ss->own[i].since : 0;
    if (i < 0) return; /* not held (e.g. dropped by a registration) */
    rl__ss_own_assign(ss, k, since);
    if (atomic_load(&ss->fatal)) return;
    i = rl__ss_own_find(ss, k->begin, k->begin_len, 0);
    if (i >= 0) {
        pthread_mutex_lock(&ss->map_mu);
        ss->own[i].until = v;
        pthread_mutex_unlock(&ss->map_mu);
    }
    rl__ss_want_map(ss);
}

void rl__ss_move_buffer(rl__ss *ss, const rl__msg_peek_version *pv) {
    for (ss_fetch *f = ss->fetches; f; f = f->next) {
        if (f->state == F_APPLIED || pv->version <= (f->fv ? f->fv : f->assigned)) continue;
        for (uint32_t i = 0; i < pv->n_muts; i++) {
            rl__mutation m = pv->muts[i];
            int rc = RL_OK;
            if (m.type == RL_MUT_CLEAR_RANGE) {
                if (rl__bytes_cmp(m.p1, m.len1, f->r.begin, f->r.begin_len) < 0)
                    m.p1 = f->r.begin, m.len1 = f->r.begin_len;
                if (rl__bytes_cmp(m.p2, m.len2, f->r.end, f->r.end_len) > 0) m.p2 = f->r.end, m.len2 = f->r.end_len;
                if (rl__bytes_cmp(m.p1, m.len1, m.p2, m.len2) < 0) rc = keep(f, pv->version, &m);
            } else if (rl__bytes_cmp(m.p1, m.len1, f->r.begin, f->r.begin_len) >= 0 &&
                       rl__bytes_cmp(m.p1, m.len1, f->r.end, f->r.end_len) < 0) {
                rc = keep(f, pv->version, &m);
            }
            if (rc != RL_OK) {
                rl__ss_fatal(ss, rc, "keeping a moving range's mutations");
                return;
            }
        }
    }
}

/* See ss_int.h: one engine version v holding, in order, the clears of pending drops, each
 * ready fetch's clear of R + rows at F + kept mutations (all below v), then muts (v's own, which
 * come after: invariant 1). Ready fetches become owned from v; the others keep v's part in R. */
int rl__ss_move_apply(rl__ss *ss, rl__version v, const rl__mutation *muts, uint32_t n_muts) {
    size_t pre = ss->n_drops;
    for (ss_fetch *f = ss->fetches; f; f = f->next)
        if (f->state == F_READY) pre += 1 + f->n_rows + f->n_buf;
    rl__msg_peek_version pv = {v, muts, n_muts};
    if (pre == 0) {
        rl__ss_move_buffer(ss, &pv);
        return atomic_load(&ss->fatal) ? RL_E_OUT_OF_MEMORY : rl__storage_apply(ss->st, v, muts, n_muts);
    }
    rl__mutation *all = rl__malloc((pre + n_muts) * sizeof *all);
    if (!all) return RL_E_OUT_OF_MEMORY;
    size_t k = 0;
    for (uint32_t i = 0; i < ss->n_drops; i++)
        all[k++] = (rl__mutation){RL_MUT_CLEAR_RANGE, ss->drops[i].begin, ss->drops[i].begin_len, ss->drops[i].end,
                                  ss->drops[i].end_len};
    for (ss_fetch *f = ss->fetches; f; f = f->next) {
        if (f->state != F_READY) continue;
        all[k++] = (rl__mutation){RL_MUT_CLEAR_RANGE, f->r.begin, f->r.begin_len, f->r.end, f->r.end_len};
        if (f->n_rows) memcpy(all + k, f->rows, f->n_rows * sizeof *all);
        k += f->n_rows;
        for (size_t i = 0; i < f->n_buf; i++) all[k++] = f->buf[i].m;
    }
    if (n_muts) memcpy(all + k, muts, n_muts * sizeof *all);
    int rc = rl__storage_apply(ss->st, v, all, k + n_muts);
    rl__free(all);
    if (rc != RL_OK) return rc;
    if (ss->n_drops) {
        atomic_fetch_add(&ss->n_dropped, ss->n_drops);
        rl__log(RL_LOG_INFO,
                "storage server %u: dropped the rows of %u moved-out ranges at "
                "version %" PRIu64,
                ss->o.id, ss->n_drops, v);
        rl__ss_ranges_free(ss->drops, ss->n_drops);
        ss->drops = NULL;
        ss->n_drops = 0;
    }
    for (ss_fetch *f = ss->fetches; f; f = f->next) {
        if (f->state != F_READY) continue;
        rl__keyrange r = {f->r.begin, f->r.begin_len, f->r.end, f->r.end_len};
        rl__ss_own_assign(ss, &r, v);
        if (atomic_load(&ss->fatal)) return RL_E_OUT_OF_MEMORY;
        f->complete = v;
        f->state = F_APPLIED;
        rl__log(RL_LOG_INFO,
                "storage server %u: a moved range is applied at version %" PRIu64 " (%zu rows at %" PRIu64
                ", %zu later mutations)",
                ss->o.id, v, f->n_rows, f->fv, f->n_buf);
        rl__arena_reset(&f->arena);
        f->n_rows = f->n_buf = 0;
    }
    rl__ss_move_buffer(ss, &pv); /* the fetches still running keep v's part */
    return atomic_load(&ss->fatal) ? RL_E_OUT_OF_MEMORY : RL_OK;
}

void rl__ss_move_after_peek(rl__ss *ss) {
    /* Nothing of this reply's versions carried them: a version known but not applied does. */
    rl__version known = atomic_load(&ss->known), applied = atomic_load(&ss->applied);
    int waiting = ss->n_drops > 0;
    for (ss_fetch *f = ss->fetches; f && !waiting; f = f->next) waiting = f->state == F_READY;
    if (!waiting || known <= applied) return; /* the next version comes (coord_move.c inv. 3) */
    int rc = rl__ss_move_apply(ss, known, NULL, 0);
    if (rc != RL_OK) {
        rl__ss_fatal(ss, rc, "applying a moved range");
        return;
    }
    atomic_store(&ss->applied, known);
    rl__ss_maybe_sync(ss);
}

void rl__ss_move_on_durable(rl__ss *ss) {
    rl__version d = atomic_load(&ss->durable);
    for (ss_fetch *f = ss->fetches, *next; f; f = next) {
        next = f->next;
        if (f->state != F_APPLIED || d < f->complete) continue;
        if (moved_add(ss, &f->r, f->complete) != RL_OK) {
            rl__ss_fatal(ss, RL_E_IO_ERROR, "recording a moved range");
            return;
        }
        rl__msg m;
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_MOVE_SHARD;
        m.u.move_shard_req.storage_id = ss->o.id;
        m.u.move_shard_req.range = (rl__keyrange){f->r.begin, f->r.begin_len, f->r.end, f->r.end_len};
        m.u.move_shard_req.version = f->complete;
        if (rl__ss_co_send(ss, &m, NULL) != RL_OK)
            rl__log(RL_LOG_WARN,
                    "storage server %u: cannot report a moved range (the "
                    "coordinator assigns it again after the reconnection)",
                    ss->o.id);
        atomic_fetch_add(&ss->n_fetches_done, 1);
        fetch_drop(ss, f);
    }
}

void rl__ss_move_on_map(rl__ss *ss) {
    for (ss_fetch *f = ss->fetches; f; f = f->next) fetch_try(f);
}

void rl__ss_move_on_register(rl__ss *ss) {
    while (ss->fetches) fetch_drop(ss, ss->fetches);
    for (uint32_t i = 0; i < ss->n_own; i++) /* ranges the coordinator says are ours stay */
        drops_forget(ss, ss->own[i].begin, ss->own[i].begin_len, ss->own[i].end, ss->own[i].end_len);
    /* The ranges that moved here keep refusing reads below their since (invariant 4). */
    moved_load(ss);
    pthread_mutex_lock(&ss->map_mu);
    for (uint32_t i = 0; i < ss->n_own; i++)
        for (uint32_t j = 0; j < ss->n_moved_in; j++) {
            const ss_range *m = &ss->moved_in[j];
            ss_range *o = &ss->own[i];
            if (rl__bytes_cmp(m->begin, m->begin_len, o->end, o->end_len) < 0 &&
                rl__bytes_cmp(o->begin, o->begin_len, m->end, m->end_len) < 0 && m->since > o->since)
                o->since = m->since;
        }
    pthread_mutex_unlock(&ss->map_mu);
}

void rl__ss_move_tick(rl__ss *ss) {
    uint64_t now = rl__clock_mono_ns();
    for (ss_fetch *f = ss->fetches; f; f = f->next) {
        if (f->state == F_FETCH && f->req_id && now - f->sent_ns > FETCH_TIMEOUT_NS) {
            rl__log(RL_LOG_WARN,
                    "storage server %u: storage server %u did not answer a fetch "
                    "page in time; trying another member",
                    ss->o.id, f->src_id);
            fetch_disconnect(f);
        }
        fetch_try(f);
    }
    /* A range that moved away is dropped from `own` once no read inside the window can ask
     * for a version below its move (its rows stay in the engine until a clear reaches them). */
    rl__version known = atomic_load(&ss->known);
    for (uint32_t i = 0; i < ss->n_own; i++) {
        const ss_range *r = &ss->own[i];
        if (r->until && known > ss->o.window_versions && r->until < known - ss->o.window_versions) {
            rl__keyrange k = {r->begin, r->begin_len, r->end, r->end_len};
            rl__keyrange copy;
            uint8_t *b = rl__ss_memdup(k.begin, k.begin_len), *e = rl__ss_memdup(k.end, k.end_len);
            if (!b || !e) {
                rl__free(b);
                rl__free(e);
                return;
            }
            copy = (rl__keyrange){b, k.begin_len, e, k.end_len};
            rl__ss_own_remove(ss, &copy);
            ss_range *d = rl__realloc(ss->drops, (ss->n_drops + 1) * sizeof *d);
            if (d) { /* its rows go at the next version (drops_apply) */
                ss->drops = d;
                d[ss->n_drops++] = (ss_range){b, copy.begin_len, e, copy.end_len, 0, 0};
            } else {
                rl__free(b);
                rl__free(e);
            }
            return; /* one per tick: own changed */
        }
    }
}

void rl__ss_move_free(rl__ss *ss) {
    while (ss->fetches) fetch_drop(ss, ss->fetches);
    rl__ss_ranges_free(ss->moved_in, ss->n_moved_in);
    ss->moved_in = NULL;
    ss->n_moved_in = 0;
    rl__ss_ranges_free(ss->drops, ss->n_drops);
    ss->drops = NULL;
    ss->n_drops = 0;
}

uint32_t rl__ss_move_count(const rl__ss *ss) {
    uint32_t n = 0;
    for (const ss_fetch *f = ss->fetches; f; f = f->next) n++;
    return n;
}
