/* fdb_backend.c — the fdb: backend: reclayer's backend interface (kv/backend.h) over a
 * FoundationDB database, through the client library of fdb_client.c.
 *
 * Design (docs/design.md §8.8.2 argues it): reclayer's generic transaction layer stays above this
 * backend and keeps doing read-your-writes, conflict ranges, selectors over the write map,
 * versionstamp bookkeeping and the retry loop; FoundationDB is used as what backend.h asks for —
 * reads at an explicit version and commits of fully formed transactions:
 *
 *   read at version V   a FoundationDB transaction with set_read_version(V), snapshot reads,
 *                       read-your-writes disabled (nothing to merge: the layer above does it)
 *   mapped read at V    a transaction with read-your-writes enabled and a serializable
 *                       get_mapped_range (FoundationDB's requirement), never committed
 *   read version        get_read_version on a fresh transaction, which is then kept for the
 *                       reads at that version
 *   commit              a fresh transaction: set_read_version(read version), the read conflict
 *                       ranges, every mutation with NEXT_WRITE_NO_WRITE_CONFLICT_RANGE (the
 *                       layer above already lists the write conflict ranges, versionstamped keys
 *                       included), the write conflict ranges, get_versionstamp, commit
 *
 * Invariants:
 *   1. Every completion comes from a FoundationDB callback (FoundationDB's network thread, or the
 *      starting thread when the future is already ready) and calls the request's done exactly
 *      once, after the backend has stopped touching the request (futures destroyed, transaction
 *      handed back): the caller may free the request inside done.
 *   2. FoundationDB's error codes pass through unchanged (reclayer's table uses its numbers).
 *   3. Reads borrow a pooled transaction ("slot"): the active table keeps one slot per (kind,
 *      read version, system keys) that many reads share at once — a query's reads all run on
 *      one FoundationDB transaction — and idle slots are reset before they serve another version.
 *      A plain read slot accumulates nothing (snapshot reads, no read-your-writes cache); a
 *      mapped slot accumulates conflict ranges and cache, so it is retired after
 *      MAPPED_USES_MAX reads. Slots are guarded by be->mu; FoundationDB calls on a slot's
 *      transaction are made outside it (they never block).
 *   4. Selectors go to FoundationDB as they are (an offset is resolved where the data is). A
 *      range's resolved ends (rl__kv_read.rbegin / rend, which the layer above needs for
 *      conflict ranges) follow storage/select.c's rules: a selector with offset 1 resolves to
 *      its anchor (the key, or key + "\x00" with or_equal) without reading; any other offset
 *      comes from a get_key of the selector at the same version, issued alongside the range read.
 *   5. A range read with neither a row nor a byte limit returns every row: when FoundationDB
 *      answers with `more`, the backend continues after the last row at the same version
 *      (reclayer's other backends return unlimited reads whole, and its callers rely on that).
 *   6. Mapped results: FoundationDB's C struct can describe only range-mode secondaries, so a
 *      point-mode mapper (no trailing "{...}") is sent with "{...}" appended, and the point
 *      result is the first row of that prefix range when its key is the mapped key (the prefix
 *      range of P begins with P itself). What FoundationDB cannot give is recorded as unknown,
 *      never invented: served_locally is -1; a secondary's `more` is read where the C++ layout
 *      keeps it (fdb_int.h) and, when that byte is not a bool or the variant is not a range,
 *      reported as 1 ("cut off or unknown": the caller completes the secondary with its own
 *      read); a point entry with no row and such a `more` has no rows and more = 1.
 *   7. reclayer's bounded fan-out (rl_db_options.mapped_secondary_row_limit / _byte_limit,
 *      default 2,000 rows and 10,000,000 bytes, FoundationDB's own quick-get limits) is applied to
 *      each secondary range as it is converted: rows beyond the limits (the row that crosses the
 *      byte limit is kept) are dropped and the entry marked `more`, as the embedded engine does.
 *   8. close() waits for the requests still in flight: the transaction layer may free a
 *      transaction (and then the database) while its read version or a read is outstanding,
 *      and the late completion still calls into the backend and, inside done, the layer above
 *      still reads the database. A request counts until its done has returned. A close called
 *      from inside a completion of this backend (a callback that closes the database) cannot
 *      wait for it: the backend is then left allocated, like one FoundationDB never answers.
 *   9. Locality (rl__kv_locality, for ADAPTIVE) comes from what the client library says and what
 *      this backend measures, never from a wait on the network: open asks
 *      fdb_transaction_get_addresses_for_key("") and waits for the answer at most
 *      LOC_PROBE_WAIT_S; unsupported_operation (reclayer's libfdb_c.so over an embedded
 *      database) makes the backend local (every figure 0, as the embedded backends), any other
 *      outcome networked (FoundationDB is). The team of a key is the last answer for that key, else
 *      for the cached key sharing the longest prefix with it (shards are ranges), its
 *      "IP:PORT" strings interned as ids 1, 2, ...; a key with no exact answer starts one lookup
 *      in the background (one at a time, at most one per LOC_REFRESH_NS, each given up after
 *      LOC_TIMEOUT_MS so that close never waits longer for it). The round trip is an
 *      EWMA (weight RTT_ALPHA) of this backend's own reads' latency — point reads, get_key and
 *      range rounds of at most RTT_MAX_BYTES, from the call to FoundationDB to its callback — the
 *      same for every team (the C API does not say which server answered): a read's latency,
 *      server work included, not a network ping.
 *  10. Watches are FoundationDB's (docs/design.md §8.8.2): a transaction of the watch's own at
 *      the watch's version (where FoundationDB reads the same value the layer above saw), its
 *      fdb_transaction_watch, its commit; a version FoundationDB no longer holds
 *      (transaction_too_old) is retried on a fresh transaction whose value is compared with the
 *      watch's first (a difference fires it at once). A watch counts as an operation in flight
 *      until its done returned; a cancel is FoundationDB's future_cancel, made outside mu with
 *      the watch's objects pinned (w_release waits for the pins); close cancels the watches
 *      still registered before it waits.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "kv/fdb/fdb.h"
#include "kv/fdb/fdb_int.h"
#include "storage/mapped.h"

enum { K_READ = 0, K_MAPPED = 1, K_COMMIT = 2, N_KINDS = 3 };
enum { ACTIVE_MAX = 16, IDLE_MAX = 32, MAPPED_USES_MAX = 64 };

/* Locality (invariant 9). */
enum { LOC_ENTRIES = 32, LOC_KEY_MAX = 256, LOC_ADDRS = 64 };
enum { LOC_UNKNOWN = 0, LOC_NETWORKED = 1, LOC_LOCAL = 2 };
#define LOC_REFRESH_NS 100000000ull /* at most one background lookup per 100 ms */
#define LOC_PROBE_WAIT_S 2          /* open waits this long for the first answer */
#define RTT_ALPHA 0.125             /* the EWMA's weight, as the cluster client's */
#define RTT_MAX_BYTES 16384         /* reads returning more are not round-trip samples */
#define LOC_TIMEOUT_MS 5000         /* a lookup gives up after this (close waits for it) */

/* One answer of get_addresses_for_key. */
typedef struct {
    uint8_t key[LOC_KEY_MAX];
    uint32_t key_len;                       /* bytes kept (at most LOC_KEY_MAX) */
    int whole;                              /* key_len is the whole key (an exact match is possible) */
    uint32_t team[RL_KV_LOCALITY_MAX_TEAM]; /* interned address ids (1-based) */
    uint32_t n_team;
    uint64_t used; /* loc_tick when last used (LRU) */
} loc_entry;

/* A pooled FoundationDB transaction (invariant 3). */
typedef struct slot {
    FDBTransaction *tr;
    int kind;            /* K_* */
    int sys;             /* READ_SYSTEM_KEYS set (reads of "\xff" keys) */
    rl__version version; /* the read version set on tr; valid when has_version */
    int has_version;
    int refs;          /* reads in flight (under be->mu) */
    uint32_t uses;     /* reads issued since the last reset */
    int active;        /* in be->active (under be->mu) */
    int dirty;         /* must be reset before it serves something else */
    struct slot *next; /* idle list */
} slot;

typedef struct {
    rl__kv_backend base; /* must be first */
    const rl__fdb_api *api;
    FDBDatabase *db;
    char *cluster_file; /* heap copy; NULL: FoundationDB's default */
    int read_only;
    int secondary_row_limit; /* bounded fan-out of mapped reads (rl_db_options; invariant 7) */
    long secondary_byte_limit;
    pthread_mutex_t mu;
    slot *active[ACTIVE_MAX];
    slot *idle[N_KINDS];
    int n_idle[N_KINDS];
    atomic_int inflight; /* operations started and not yet done (invariant 8) */
    pthread_cond_t idle_cv;
    /* Locality (invariant 9), under loc_mu. */
    pthread_mutex_t loc_mu;
    pthread_cond_t loc_cv; /* a lookup answered */
    int loc_kind;          /* LOC_*: what the library's answers say */
    int loc_busy;          /* a lookup is in flight */
    uint64_t loc_last_ns;  /* when the last lookup started */
    uint64_t loc_tick;
    loc_entry loc[LOC_ENTRIES];
    int n_loc;
    char *addrs[LOC_ADDRS]; /* interned "IP:PORT" strings; id = index + 1 (heap) */
    int n_addrs;
    uint64_t rtt_ns;      /* EWMA of reads' latency, ns (0: no sample yet) */
    uint32_t rtt_n;       /* samples behind it */
    struct wctx *watches; /* watches in FoundationDB (invariant 10), under mu */
} fdbbe;

/* Operations in flight (invariant 8): counted from the start call until done returned. The
 * increment needs no lock (no close can run then); the decrement is made under mu, so a close
 * that sees 0 under mu knows the last op_end has let go of the backend. */
static void op_begin(fdbbe *be) { atomic_fetch_add(&be->inflight, 1); }

static void op_end(fdbbe *be) {
    pthread_mutex_lock(&be->mu);
    if (atomic_fetch_sub(&be->inflight, 1) == 1) pthread_cond_broadcast(&be->idle_cv);
    pthread_mutex_unlock(&be->mu);
}

/* Completions running on this thread (invariant 8: close() inside one cannot wait). */
static _Thread_local int tl_in_done;

/* Complete a request; it stops counting once done returned (the layer above may still use the
 * database inside done, so close waits for that too). */
static void grv_done(fdbbe *be, rl__kv_grv *g, int rc) {
    tl_in_done++;
    g->done(g, rc);
    tl_in_done--;
    op_end(be);
}

static void read_done(fdbbe *be, rl__kv_read *r, int rc) {
    tl_in_done++;
    r->done(r, rc);
    tl_in_done--;
    op_end(be);
}

static void commit_done(fdbbe *be, rl__kv_commit *c, int rc) {
    tl_in_done++;
    c->done(c, rc);
    tl_in_done--;
    op_end(be);
}

/* ---- Slots ------------------------------------------------------------------------------- */

static void slot_destroy(fdbbe *be, slot *s) {
    if (!s) return;
    be->api->transaction_destroy(s->tr);
    rl__free(s);
}

/* Make s ready to serve kind (reset it if it served before, set the kind's options). */
static int slot_prepare(fdbbe *be, slot *s, int kind, int sys) {
    const rl__fdb_api *a = be->api;
    if (s->dirty) a->transaction_reset(s->tr);
    s->dirty = 1;
    s->kind = kind;
    s->sys = sys;
    s->has_version = 0;
    s->uses = 0;
    int rc = 0;
    if (kind == K_READ) rc = a->transaction_set_option(s->tr, RL_FDB_TR_READ_YOUR_WRITES_DISABLE, NULL, 0);
    if (rc == 0 && sys && kind != K_COMMIT) rc = a->transaction_set_option(s->tr, RL_FDB_TR_READ_SYSTEM_KEYS, NULL, 0);
    return rc;
}

/* A fresh slot of kind (from the idle list or new), prepared, with one reference. */
static int slot_fresh(fdbbe *be, int kind, int sys, slot **out) {
    pthread_mutex_lock(&be->mu);
    slot *s = be->idle[kind];
    if (s) {
        be->idle[kind] = s->next;
        be->n_idle[kind]--;
    }
    pthread_mutex_unlock(&be->mu);
    if (!s) {
        s = rl__calloc(1, sizeof *s);
        if (!s) return RL_E_OUT_OF_MEMORY;
        int rc = be->api->database_create_transaction(be->db, &s->tr);
        if (rc) {
            rl__free(s);
            return rc;
        }
    }
    int rc = slot_prepare(be, s, kind, sys);
    if (rc) {
        slot_destroy(be, s);
        return rc;
    }
    s->refs = 1;
    s->next = NULL;
    s->active = 0;
    *out = s;
    return RL_OK;
}

/* Put s into the active table (an idle entry of it may be evicted to the idle list). Under
 * be->mu. Returns a slot to destroy outside the lock, or NULL. */
static slot *activate(fdbbe *be, slot *s) {
    int free_i = -1;
    for (int i = 0; i < ACTIVE_MAX; i++) {
        if (!be->active[i]) {
            free_i = i;
            break;
        }
    }
    if (free_i < 0) { /* evict the unused slot with the oldest version */
        for (int i = 0; i < ACTIVE_MAX; i++)
            if (be->active[i]->refs == 0 && (free_i < 0 || be->active[i]->version < be->active[free_i]->version))
                free_i = i;
        if (free_i < 0) return NULL; /* all busy: s stays private */
        slot *old = be->active[free_i];
        old->active = 0;
        be->active[free_i] = NULL;
        if (be->n_idle[old->kind] < IDLE_MAX) {
            old->next = be->idle[old->kind];
            be->idle[old->kind] = old;
            be->n_idle[old->kind]++;
        } else {
            be->active[free_i] = s;
            s->active = 1;
            return old;
        }
    }
    be->active[free_i] = s;
    s->active = 1;
    return NULL;
}

/* The slot that serves reads of kind at version v (invariant 3), with one more reference. */
static int slot_for_read(fdbbe *be, int kind, int sys, rl__version v, slot **out) {
    uint32_t max_uses = kind == K_MAPPED ? MAPPED_USES_MAX : UINT32_MAX;
    pthread_mutex_lock(&be->mu);
    for (int i = 0; i < ACTIVE_MAX; i++) {
        slot *s = be->active[i];
        if (s && s->kind == kind && s->sys == sys && s->has_version && s->version == v && s->uses < max_uses) {
            s->refs++;
            s->uses++;
            pthread_mutex_unlock(&be->mu);
            *out = s;
            return RL_OK;
        }
    }
    pthread_mutex_unlock(&be->mu);
    slot *s;
    int rc = slot_fresh(be, kind, sys, &s);
    if (rc) return rc;
    be->api->transaction_set_read_version(s->tr, (int64_t)v);
    s->version = v;
    s->has_version = 1;
    s->uses = 1;
    pthread_mutex_lock(&be->mu);
    slot *drop = activate(be, s);
    pthread_mutex_unlock(&be->mu);
    slot_destroy(be, drop);
    *out = s;
    return RL_OK;
}

/* Drop one reference; an unused slot that is not active (or is worn out) goes idle. */
static void slot_release(fdbbe *be, slot *s) {
    slot *drop = NULL;
    pthread_mutex_lock(&be->mu);
    s->refs--;
    int worn = s->kind == K_MAPPED && s->uses >= MAPPED_USES_MAX;
    if (s->refs == 0 && (!s->active || worn || s->kind == K_COMMIT)) {
        if (s->active) {
            for (int i = 0; i < ACTIVE_MAX; i++)
                if (be->active[i] == s) be->active[i] = NULL;
            s->active = 0;
        }
        if (be->n_idle[s->kind] < IDLE_MAX) {
            s->next = be->idle[s->kind];
            be->idle[s->kind] = s;
            be->n_idle[s->kind]++;
        } else {
            drop = s;
        }
    }
    pthread_mutex_unlock(&be->mu);
    slot_destroy(be, drop);
}

/* ---- Locality (invariant 9) --------------------------------------------------------------- */

/* One round-trip sample of ns. */
static void rtt_note(fdbbe *be, uint64_t ns) {
    pthread_mutex_lock(&be->loc_mu);
    be->rtt_ns = be->rtt_n == 0 ? ns : (uint64_t)((1 - RTT_ALPHA) * (double)be->rtt_ns + RTT_ALPHA * (double)ns);
    if (be->rtt_n < UINT32_MAX) be->rtt_n++;
    pthread_mutex_unlock(&be->loc_mu);
}

/* The id of address s (interned on first sight; 0 when the table is full). Under loc_mu. */
static uint32_t addr_id(fdbbe *be, const char *s) {
    for (int i = 0; i < be->n_addrs; i++)
        if (!strcmp(be->addrs[i], s)) return (uint32_t)i + 1;
    if (be->n_addrs >= LOC_ADDRS) return 0;
    char *c = rl__strdup(s);
    if (!c) return 0;
    be->addrs[be->n_addrs++] = c;
    return (uint32_t)be->n_addrs;
}

/* Take a lookup's outcome: rc (FoundationDB's code) and, when 0, the n addresses of key's team. */
static void loc_record(fdbbe *be, const uint8_t *key, uint32_t len, int rc, const char **strs, int n) {
    pthread_mutex_lock(&be->loc_mu);
    be->loc_busy = 0;
    if (rc == 2108) be->loc_kind = LOC_LOCAL; /* unsupported_operation: no storage server to name */
    else if (be->loc_kind == LOC_UNKNOWN) be->loc_kind = LOC_NETWORKED;
    if (rc == 0) {
        loc_entry *e = NULL;
        uint32_t kept = len < LOC_KEY_MAX ? len : LOC_KEY_MAX;
        for (int i = 0; i < be->n_loc && !e; i++)
            if (be->loc[i].whole && be->loc[i].key_len == len && len <= LOC_KEY_MAX &&
                !memcmp(be->loc[i].key, key, len))
                e = &be->loc[i];
        if (!e && be->n_loc < LOC_ENTRIES) e = &be->loc[be->n_loc++];
        if (!e) { /* the least recently used */
            e = &be->loc[0];
            for (int i = 1; i < LOC_ENTRIES; i++)
                if (be->loc[i].used < e->used) e = &be->loc[i];
        }
        if (kept) memcpy(e->key, key, kept);
        e->key_len = kept;
        e->whole = kept == len;
        e->n_team = 0;
        for (int i = 0; i < n && e->n_team < RL_KV_LOCALITY_MAX_TEAM; i++) {
            uint32_t id = strs[i] ? addr_id(be, strs[i]) : 0;
            if (id) e->team[e->n_team++] = id;
        }
        e->used = ++be->loc_tick;
    }
    pthread_cond_broadcast(&be->loc_cv);
    pthread_mutex_unlock(&be->loc_mu);
}

typedef struct {
    fdbbe *be;
    FDBTransaction *tr;
    uint32_t key_len;
    uint8_t key[]; /* the key looked up */
} loc_ctx;

static void on_loc(FDBFuture *f, void *ud) {
    loc_ctx *x = ud;
    fdbbe *be = x->be;
    const rl__fdb_api *a = be->api;
    const char **strs = NULL;
    int n = 0, rc = a->future_get_error(f);
    if (rc == 0) rc = a->future_get_string_array(f, &strs, &n);
    loc_record(be, x->key, x->key_len, rc, strs, n);
    a->future_destroy(f);
    a->transaction_destroy(x->tr);
    rl__free(x);
    op_end(be);
}

/* Ask the library where key is (the caller set loc_busy). Counts as an operation in flight
 * (invariant 8); the answer goes to loc_record, on FoundationDB's thread or inline. */
static void loc_lookup(fdbbe *be, const uint8_t *key, uint32_t len) {
    const rl__fdb_api *a = be->api;
    op_begin(be);
    loc_ctx *x = rl__calloc(1, sizeof *x + len + 1);
    int rc = x ? a->database_create_transaction(be->db, &x->tr) : RL_E_OUT_OF_MEMORY;
    if (rc == 0) {
        uint8_t ms[8];
        for (int i = 0; i < 8; i++) ms[i] = (uint8_t)((uint64_t)LOC_TIMEOUT_MS >> (8 * i)); /* little-endian */
        (void)a->transaction_set_option(x->tr, RL_FDB_TR_TIMEOUT, ms, 8); /* advisory: a bound, not needed */
        x->be = be;
        x->key_len = len;
        if (len) memcpy(x->key, key, len);
        FDBFuture *f = a->transaction_get_addresses_for_key(x->tr, key, (int)len);
        rc = a->future_set_callback(f, on_loc, x);
        if (rc == 0) return;
        a->future_destroy(f);
        a->transaction_destroy(x->tr);
    }
    rl__free(x);
    loc_record(be, key, len, rc, NULL, 0);
    op_end(be);
}

static uint32_t common_prefix(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    uint32_t n = al < bl ? al : bl, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* backend.h's locality (invariant 9): never waits for the network, never fails. */
static void be_locality(rl__kv_backend *b, const uint8_t *key, uint32_t key_len, rl__kv_locality *out) {
    fdbbe *be = (fdbbe *)b;
    int issue = 0, exact = 0;
    uint64_t now = rl__clock_mono_ns();
    pthread_mutex_lock(&be->loc_mu);
    if (be->loc_kind == LOC_LOCAL) {
        pthread_mutex_unlock(&be->loc_mu);
        return;
    }
    out->networked = 1;
    out->rtt_ns = (double)be->rtt_ns;
    out->rtt_samples = be->rtt_n;
    loc_entry *best = NULL;
    uint32_t best_cp = 0;
    for (int i = 0; i < be->n_loc && !exact; i++) {
        loc_entry *e = &be->loc[i];
        uint32_t cp = common_prefix(e->key, e->key_len, key, key_len);
        exact = e->whole && e->key_len == key_len && cp == key_len;
        if (exact || !best || cp > best_cp || (cp == best_cp && e->used > best->used)) best = e, best_cp = cp;
    }
    if (best) {
        out->n_team = best->n_team;
        memcpy(out->team, best->team, best->n_team * sizeof *best->team);
        best->used = ++be->loc_tick;
    }
    if (!exact && !be->loc_busy && now - be->loc_last_ns >= LOC_REFRESH_NS) {
        be->loc_busy = 1;
        be->loc_last_ns = now;
        issue = 1;
    }
    pthread_mutex_unlock(&be->loc_mu);
    if (issue) loc_lookup(be, key, key_len);
}

/* ---- Read version ------------------------------------------------------------------------ */

typedef struct {
    fdbbe *be;
    rl__kv_grv *g;
    slot *s;
    FDBFuture *f;
} grv_ctx;

static void on_grv(FDBFuture *f, void *ud) {
    grv_ctx *x = ud;
    fdbbe *be = x->be;
    rl__kv_grv *g = x->g;
    int64_t v = 0;
    int rc = be->api->future_get_error(f);
    if (rc == 0) rc = be->api->future_get_int64(f, &v);
    be->api->future_destroy(f);
    slot *s = x->s, *drop = NULL;
    if (rc == 0) { /* keep the transaction for the reads at this version */
        s->version = (rl__version)v;
        s->has_version = 1;
        pthread_mutex_lock(&be->mu);
        drop = activate(be, s);
        pthread_mutex_unlock(&be->mu);
        g->version = (rl__version)v;
    }
    slot_destroy(be, drop);
    slot_release(be, s);
    rl__free(x);
    grv_done(be, g, rc);
}

static void be_grv(rl__kv_backend *b, rl__kv_grv *g) {
    fdbbe *be = (fdbbe *)b;
    op_begin(be);
    grv_ctx *x = rl__calloc(1, sizeof *x);
    if (!x) {
        grv_done(be, g, RL_E_OUT_OF_MEMORY);
        return;
    }
    x->be = be;
    x->g = g;
    int rc = slot_fresh(be, K_READ, 0, &x->s);
    if (rc) {
        rl__free(x);
        grv_done(be, g, rc);
        return;
    }
    x->f = be->api->transaction_get_read_version(x->s->tr);
    rc = be->api->future_set_callback(x->f, on_grv, x);
    if (rc) {
        be->api->future_destroy(x->f);
        slot_release(be, x->s);
        rl__free(x);
        grv_done(be, g, rc);
    }
}

/* ---- Reads ------------------------------------------------------------------------------- */

typedef struct {
    fdbbe *be;
    rl__kv_read *r;
    slot *s;
    FDBFuture *f[3];    /* 0: the read, 1 / 2: get_key of the begin / end selector */
    atomic_int pending; /* callbacks still to come this round (+1 while registering) */
    atomic_int err;     /* the first error of the round */
    int round;
    int is_point; /* mapped: a point-mode mapper sent with "{...}" appended */
    const uint8_t *mapper;
    int mapper_len;
    rl_key_selector b, e; /* this round's selectors */
    int unlimited;        /* no row or byte limit: read to the end (invariant 5) */
    rl_keyvalue *kvs;     /* rows so far (arena) */
    rl_mapped_keyvalue *mkvs;
    int n, cap;
    uint64_t t0; /* when this round was issued (round-trip samples, invariant 9) */
} rd_ctx;

/* 1 if a range bound given as s resolves without reading: offset 1 (invariant 4). */
static int trivial(const rl_key_selector *s) { return s->offset == 1; }

static const uint8_t *dup(rl_arena *a, const uint8_t *p, int n) {
    static const uint8_t empty[1];
    if (n <= 0) return empty;
    return rl__arena_memdup(a, p, (size_t)n);
}

/* The anchor of an offset-1 selector as a range bound: its key, or key + "\x00" with or_equal
 * (storage/select.c rule 1). NULL on OOM. */
static const uint8_t *anchor(rl_arena *a, const rl_key_selector *s, uint32_t *out_len) {
    if (!s->or_equal) {
        *out_len = s->key_len;
        return s->key ? s->key : (const uint8_t *)"";
    }
    uint8_t *p = rl__arena_alloc(a, (size_t)s->key_len + 1);
    if (!p) return NULL;
    if (s->key_len) memcpy(p, s->key, s->key_len);
    p[s->key_len] = 0;
    *out_len = s->key_len + 1;
    return p;
}

static void read_finish(rd_ctx *x, int rc) {
    fdbbe *be = x->be;
    rl__kv_read *r = x->r;
    for (int i = 0; i < 3; i++)
        if (x->f[i]) be->api->future_destroy(x->f[i]), x->f[i] = NULL;
    slot_release(be, x->s);
    read_done(be, r, rc); /* invariant 1: last */
}

static void read_issue(rd_ctx *x);

/* Room for `more` entries in the arrays of x. */
static int grow(rd_ctx *x, int more, size_t elem) {
    if (x->n + more <= x->cap) return RL_OK;
    int nc = x->cap ? x->cap * 2 : 16;
    while (nc < x->n + more) nc *= 2;
    void *old = elem == sizeof(rl_keyvalue) ? (void *)x->kvs : (void *)x->mkvs;
    void *nv = rl__arena_alloc(x->r->arena, (size_t)nc * elem);
    if (!nv) return RL_E_OUT_OF_MEMORY;
    if (x->n) memcpy(nv, old, (size_t)x->n * elem);
    if (elem == sizeof(rl_keyvalue)) x->kvs = nv;
    else x->mkvs = nv;
    x->cap = nc;
    return RL_OK;
}

/* Copy n rows into arena a: every key and value in one block (FoundationDB's memory belongs to
 * its future, which is destroyed before done). */
static int copy_rows(rl_arena *a, const FDBKeyValue *in, int n, rl_keyvalue *out) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)in[i].key_length + (size_t)in[i].value_length;
    uint8_t *p = rl__arena_alloc(a, total ? total : 1);
    if (!p) return RL_E_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++) {
        size_t kl = (size_t)in[i].key_length, vl = (size_t)in[i].value_length;
        if (kl) memcpy(p, in[i].key, kl);
        out[i].key = p, out[i].key_len = (uint32_t)kl, p += kl;
        if (vl) memcpy(p, in[i].value, vl);
        out[i].value = p, out[i].value_len = (uint32_t)vl, p += vl;
    }
    return RL_OK;
}

/* Convert one mapped entry (invariant 6). */
static int convert_entry(rd_ctx *x, const FDBMappedKeyValue *e, rl_mapped_keyvalue *m) {
    rl_arena *a = x->r->arena;
    memset(m, 0, sizeof *m);
    m->index.key = dup(a, e->key.key, e->key.key_length);
    m->index.key_len = (uint32_t)e->key.key_length;
    m->index.value = dup(a, e->value.key, e->value.key_length);
    m->index.value_len = (uint32_t)e->value.key_length;
    unsigned char mb = e->buffer[RL_FDB_MKV_MORE];
    int known = mb <= 1 && e->buffer[RL_FDB_MKV_VARIANT] == 1;
    int smore = known ? mb : 1;
    const FDBGetRangeReqAndResult *g = &e->getRange;
    const FDBKey *p = &g->begin.key;
    m->begin = dup(a, p->key, p->key_length);
    m->begin_len = (uint32_t)p->key_length;
    m->served_locally = -1;
    int n = g->m_size > 0 ? g->m_size : 0;
    if (!x->is_point) {
        m->is_range = 1;
        m->end = dup(a, g->end.key.key, g->end.key.key_length);
        m->end_len = (uint32_t)g->end.key.key_length;
        int keep = 0; /* invariant 7 */
        long bytes = 0;
        while (keep < n && keep < x->be->secondary_row_limit && bytes < x->be->secondary_byte_limit) {
            bytes += (long)g->data[keep].key_length + g->data[keep].value_length;
            keep++;
        }
        rl_keyvalue *kv = keep ? rl__arena_alloc(a, (size_t)keep * sizeof *kv) : NULL;
        if (keep && (!kv || copy_rows(a, g->data, keep, kv))) return RL_E_OUT_OF_MEMORY;
        m->kvs = kv;
        m->n_kvs = keep;
        m->more = smore || keep < n;
    } else {
        m->is_range = 0;
        uint8_t *end = rl__arena_alloc(a, (size_t)p->key_length + 1);
        if (!end) return RL_E_OUT_OF_MEMORY;
        if (p->key_length) memcpy(end, p->key, (size_t)p->key_length);
        end[p->key_length] = 0;
        m->end = end;
        m->end_len = (uint32_t)p->key_length + 1;
        if (n > 0 && rl__bytes_cmp(g->data[0].key, (size_t)g->data[0].key_length, p->key, (size_t)p->key_length) == 0) {
            rl_keyvalue *kv = rl__arena_alloc(a, sizeof *kv);
            if (!kv || copy_rows(a, g->data, 1, kv)) return RL_E_OUT_OF_MEMORY;
            m->kvs = kv;
            m->n_kvs = 1;
        }
        m->more = n == 0 && smore;
    }
    if (!m->index.key || !m->index.value || !m->begin || !m->end) return RL_E_OUT_OF_MEMORY;
    return RL_OK;
}

/* All callbacks of a round arrived: take the results, continue or finish. */
static void read_process(rd_ctx *x) {
    fdbbe *be = x->be;
    const rl__fdb_api *a = be->api;
    rl__kv_read *r = x->r;
    rl_arena *ar = r->arena;
    int rc = atomic_load(&x->err);
    uint64_t dt = rl__clock_mono_ns() - x->t0; /* this round's latency (invariant 9) */
    if (rc) {
        read_finish(x, rc);
        return;
    }
    switch (r->op) {
    case RL_KV_GET: {
        fdb_bool_t present = 0;
        const uint8_t *v = NULL;
        int vl = 0;
        rc = a->future_get_value(x->f[0], &present, &v, &vl);
        if (rc == 0 && vl <= RTT_MAX_BYTES) rtt_note(be, dt);
        if (rc == 0) {
            r->present = present != 0;
            r->value = present ? dup(ar, v, vl) : NULL;
            r->value_len = present ? (uint32_t)vl : 0;
            if (present && !r->value) rc = RL_E_OUT_OF_MEMORY;
        }
        break;
    }
    case RL_KV_GET_KEY: {
        const uint8_t *k;
        int kl;
        rc = a->future_get_key(x->f[0], &k, &kl);
        if (rc == 0) rtt_note(be, dt);
        if (rc == 0) {
            r->rbegin = dup(ar, k, kl);
            r->rbegin_len = (uint32_t)kl;
            if (!r->rbegin) rc = RL_E_OUT_OF_MEMORY;
        }
        break;
    }
    case RL_KV_GET_RANGE:
    case RL_KV_GET_MAPPED: {
        if (x->round == 0) { /* the resolved ends (invariant 4) */
            const uint8_t *k;
            int kl;
            if (x->f[1]) {
                if ((rc = a->future_get_key(x->f[1], &k, &kl))) break;
                r->rbegin = dup(ar, k, kl), r->rbegin_len = (uint32_t)kl;
            } else {
                r->rbegin = anchor(ar, &r->begin, &r->rbegin_len);
            }
            if (x->f[2]) {
                if ((rc = a->future_get_key(x->f[2], &k, &kl))) break;
                r->rend = dup(ar, k, kl), r->rend_len = (uint32_t)kl;
            } else {
                r->rend = anchor(ar, &r->end, &r->rend_len);
            }
            if (!r->rbegin || !r->rend) {
                rc = RL_E_OUT_OF_MEMORY;
                break;
            }
        }
        int n = 0;
        fdb_bool_t more = 0;
        const uint8_t *last = NULL;
        int last_len = 0;
        if (r->op == RL_KV_GET_RANGE) {
            const FDBKeyValue *kv;
            if ((rc = a->future_get_keyvalue_array(x->f[0], &kv, &n, &more))) break;
            if ((rc = grow(x, n, sizeof(rl_keyvalue))) || (rc = copy_rows(ar, kv, n, x->kvs + x->n))) break;
            long bytes = 0;
            for (int i = 0; i < n; i++) bytes += (long)kv[i].key_length + kv[i].value_length;
            if (bytes <= RTT_MAX_BYTES) rtt_note(be, dt);
            x->n += n;
            if (n) last = x->kvs[x->n - 1].key, last_len = (int)x->kvs[x->n - 1].key_len;
        } else {
            const FDBMappedKeyValue *mkv;
            if ((rc = a->future_get_mappedkeyvalue_array(x->f[0], &mkv, &n, &more))) break;
            if ((rc = grow(x, n, sizeof(rl_mapped_keyvalue)))) break;
            for (int i = 0; i < n && rc == 0; i++) rc = convert_entry(x, &mkv[i], &x->mkvs[x->n + i]);
            if (rc) break;
            x->n += n;
            if (n) last = x->mkvs[x->n - 1].index.key, last_len = (int)x->mkvs[x->n - 1].index.key_len;
        }
        if (x->unlimited && more && n > 0) { /* invariant 5: go on after the last row */
            for (int i = 0; i < 3; i++)
                if (x->f[i]) a->future_destroy(x->f[i]), x->f[i] = NULL;
            if (!r->reverse) {
                x->b = RL_FIRST_GREATER_THAN(last, last_len);
                x->e = RL_FIRST_GREATER_OR_EQUAL(r->rend, r->rend_len);
            } else {
                x->b = RL_FIRST_GREATER_OR_EQUAL(r->rbegin, r->rbegin_len);
                x->e = RL_FIRST_GREATER_OR_EQUAL(last, last_len);
            }
            x->round++;
            read_issue(x);
            return;
        }
        r->n = x->n;
        r->more = more != 0;
        if (r->op == RL_KV_GET_RANGE) r->kvs = x->kvs;
        else r->mkvs = x->mkvs;
        break;
    }
    default: rc = RL_E_INTERNAL_ERROR;
    }
    read_finish(x, rc);
}

static void on_read(FDBFuture *f, void *ud) {
    rd_ctx *x = ud;
    int rc = x->be->api->future_get_error(f);
    if (rc) {
        int zero = 0;
        atomic_compare_exchange_strong(&x->err, &zero, rc);
    }
    if (atomic_fetch_sub(&x->pending, 1) == 1) read_process(x);
}

/* Issue this round's futures and register their callbacks. */
static void read_issue(rd_ctx *x) {
    const rl__fdb_api *a = x->be->api;
    rl__kv_read *r = x->r;
    FDBTransaction *tr = x->s->tr;
    x->t0 = rl__clock_mono_ns();
    int mode = (r->limit > 0 || r->target_bytes > 0) ? RL_FDB_STREAMING_EXACT : RL_FDB_STREAMING_WANT_ALL;
    int tb = r->target_bytes > 0x7fffffffL ? 0x7fffffff : (int)r->target_bytes;
    int nf = 0;
    switch (r->op) {
    case RL_KV_GET: x->f[nf++] = a->transaction_get(tr, r->key, (int)r->key_len, 1); break;
    case RL_KV_GET_KEY:
        x->f[nf++] =
            a->transaction_get_key(tr, r->begin.key, (int)r->begin.key_len, r->begin.or_equal, r->begin.offset, 1);
        break;
    case RL_KV_GET_RANGE:
    case RL_KV_GET_MAPPED:
        if (r->op == RL_KV_GET_RANGE)
            x->f[0] = a->transaction_get_range(tr, x->b.key, (int)x->b.key_len, x->b.or_equal, x->b.offset, x->e.key,
                                               (int)x->e.key_len, x->e.or_equal, x->e.offset, r->limit, tb, mode, 0, 1,
                                               r->reverse);
        else
            x->f[0] = a->transaction_get_mapped_range(tr, x->b.key, (int)x->b.key_len, x->b.or_equal, x->b.offset,
                                                      x->e.key, (int)x->e.key_len, x->e.or_equal, x->e.offset,
                                                      x->mapper, x->mapper_len, r->limit, tb, mode, 0, 0, r->reverse);
        nf = 1;
        if (x->round == 0) {
            if (!trivial(&r->begin))
                x->f[1] = a->transaction_get_key(tr, r->begin.key, (int)r->begin.key_len, r->begin.or_equal,
                                                 r->begin.offset, 1);
            if (!trivial(&r->end))
                x->f[2] =
                    a->transaction_get_key(tr, r->end.key, (int)r->end.key_len, r->end.or_equal, r->end.offset, 1);
            nf = 3;
        }
        break;
    }
    int n_real = 0;
    for (int i = 0; i < nf; i++) n_real += x->f[i] != NULL;
    /* What the FoundationDB client is asked for (its own network requests, bytes and storage
     * servers are not visible through the C API: those figures stay 0). */
    r->stats.requests += (uint32_t)n_real;
    r->stats.round_trips++;
    if (x->f[0]) {
        if (r->op == RL_KV_GET) r->stats.req_get++;
        else if (r->op == RL_KV_GET_KEY) r->stats.req_get_key++;
        else if (r->op == RL_KV_GET_RANGE) r->stats.req_get_range++;
        else r->stats.req_get_mapped++;
    }
    r->stats.req_get_key += (uint32_t)((nf > 1 && x->f[1]) + (nf > 2 && x->f[2]));
    atomic_store(&x->pending, n_real + 1); /* +1: registering (see on_read) */
    for (int i = 0; i < nf; i++) {
        if (!x->f[i]) continue;
        int rc = a->future_set_callback(x->f[i], on_read, x);
        if (rc) { /* its callback will not come: count it here */
            int zero = 0;
            atomic_compare_exchange_strong(&x->err, &zero, rc);
            atomic_fetch_sub(&x->pending, 1);
        }
    }
    if (atomic_fetch_sub(&x->pending, 1) == 1) read_process(x);
}

/* The packed mapper with a trailing "{...}" element (invariant 6), in arena a. */
static const uint8_t *range_mapper(rl_arena *a, const uint8_t *m, size_t n, int *out_len) {
    static const uint8_t dots[] = {0x02, '{', '.', '.', '.', '}', 0x00};
    uint8_t *p = rl__arena_alloc(a, n + sizeof dots);
    if (!p) return NULL;
    if (n) memcpy(p, m, n);
    memcpy(p + n, dots, sizeof dots);
    *out_len = (int)(n + sizeof dots);
    return p;
}

static void be_read(rl__kv_backend *b, rl__kv_read *r) {
    fdbbe *be = (fdbbe *)b;
    op_begin(be);
    rd_ctx *x = rl__arena_alloc(r->arena, sizeof *x);
    if (!x) {
        read_done(be, r, RL_E_OUT_OF_MEMORY);
        return;
    }
    memset(x, 0, sizeof *x);
    x->be = be;
    x->r = r;
    x->b = r->begin;
    x->e = r->end;
    x->unlimited = r->limit == 0 && r->target_bytes == 0;
    int kind = K_READ;
    if (r->op == RL_KV_GET_MAPPED) {
        kind = K_MAPPED;
        x->mapper = r->mapper;
        x->mapper_len = (int)r->mapper_len;
        rl__mapper *m = NULL;
        /* A mapper that does not parse goes as it is: FoundationDB reports its error. */
        if (rl__mapper_parse(r->mapper, r->mapper_len, r->arena, &m) == RL_OK && !rl__mapper_is_range(m)) {
            x->mapper = range_mapper(r->arena, r->mapper, r->mapper_len, &x->mapper_len);
            if (!x->mapper) {
                read_done(be, r, RL_E_OUT_OF_MEMORY);
                return;
            }
            x->is_point = 1;
        }
    }
    int sys = r->max_key_len > 1; /* "\xff\xff": the transaction may read system keys */
    int rc = slot_for_read(be, kind, sys, r->version, &x->s);
    if (rc) {
        read_done(be, r, rc);
        return;
    }
    read_issue(x);
}

/* ---- Commits ----------------------------------------------------------------------------- */

typedef struct {
    fdbbe *be;
    rl__kv_commit *c;
    slot *s;
    FDBFuture *cf, *vf;
} cm_ctx;

static void commit_finish(cm_ctx *x, int rc) {
    fdbbe *be = x->be;
    rl__kv_commit *c = x->c;
    if (x->cf) be->api->future_destroy(x->cf);
    if (x->vf) be->api->future_destroy(x->vf);
    slot_release(be, x->s);
    rl__free(x);
    commit_done(be, c, rc); /* invariant 1: last */
}

static void on_versionstamp(FDBFuture *f, void *ud) {
    cm_ctx *x = ud;
    const rl__fdb_api *a = x->be->api;
    const uint8_t *vs;
    int n;
    if (a->future_get_error(f) == 0 && a->future_get_key(f, &vs, &n) == 0 && n == 10)
        x->c->batch_order = (uint16_t)(vs[8] << 8 | vs[9]);
    commit_finish(x, RL_OK);
}

static void on_commit(FDBFuture *f, void *ud) {
    cm_ctx *x = ud;
    const rl__fdb_api *a = x->be->api;
    int rc = a->future_get_error(f);
    if (rc) {
        commit_finish(x, rc);
        return;
    }
    int64_t cv = 0;
    a->transaction_get_committed_version(x->s->tr, &cv);
    x->c->commit_version = (rl__version)cv;
    x->c->batch_order = 0;
    if (a->future_set_callback(x->vf, on_versionstamp, x)) commit_finish(x, RL_OK);
}

/* 1 if a key (or a range end, is_end) lies in the system keyspace. */
static int sys_key(const uint8_t *k, uint32_t n, int is_end) { return n > (uint32_t)(is_end ? 1 : 0) && k[0] == 0xff; }

static void be_commit(rl__kv_backend *b, rl__kv_commit *c) {
    fdbbe *be = (fdbbe *)b;
    const rl__fdb_api *a = be->api;
    op_begin(be);
    if (be->read_only && (c->n_muts || c->n_writes)) {
        commit_done(be, c, RL_E_READ_ONLY_DATABASE);
        return;
    }
    cm_ctx *x = rl__calloc(1, sizeof *x);
    if (!x) {
        commit_done(be, c, RL_E_OUT_OF_MEMORY);
        return;
    }
    x->be = be;
    x->c = c;
    int rc = slot_fresh(be, K_COMMIT, 0, &x->s);
    if (rc) {
        rl__free(x);
        commit_done(be, c, rc);
        return;
    }
    FDBTransaction *tr = x->s->tr;
    int sys = 0;
    for (size_t i = 0; i < c->n_muts && !sys; i++)
        sys = sys_key(c->muts[i].p1, c->muts[i].len1, 0) ||
              (c->muts[i].type == RL_MUT_CLEAR_RANGE && sys_key(c->muts[i].p2, c->muts[i].len2, 1));
    for (size_t i = 0; i < c->n_reads && !sys; i++)
        sys = sys_key(c->reads[i].begin, c->reads[i].begin_len, 0) || sys_key(c->reads[i].end, c->reads[i].end_len, 1);
    for (size_t i = 0; i < c->n_writes && !sys; i++)
        sys = sys_key(c->writes[i].begin, c->writes[i].begin_len, 0) ||
              sys_key(c->writes[i].end, c->writes[i].end_len, 1);
    if (sys) rc = a->transaction_set_option(tr, RL_FDB_TR_ACCESS_SYSTEM_KEYS, NULL, 0);
    a->transaction_set_read_version(tr, (int64_t)c->read_version);
    for (size_t i = 0; rc == 0 && i < c->n_reads; i++)
        rc = a->transaction_add_conflict_range(tr, c->reads[i].begin, (int)c->reads[i].begin_len, c->reads[i].end,
                                               (int)c->reads[i].end_len, RL_FDB_CONFLICT_READ);
    for (size_t i = 0; rc == 0 && i < c->n_muts; i++) {
        const rl__mutation *m = &c->muts[i];
        rc = a->transaction_set_option(tr, RL_FDB_TR_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE, NULL, 0);
        if (rc) break;
        switch (m->type) {
        case RL_MUT_SET: a->transaction_set(tr, m->p1, (int)m->len1, m->p2, (int)m->len2); break;
        case RL_MUT_CLEAR: a->transaction_clear(tr, m->p1, (int)m->len1); break;
        case RL_MUT_CLEAR_RANGE: a->transaction_clear_range(tr, m->p1, (int)m->len1, m->p2, (int)m->len2); break;
        default: /* atomic operations: FoundationDB's mutation type numbers (kvtypes.h) */
            a->transaction_atomic_op(tr, m->p1, (int)m->len1, m->p2, (int)m->len2, m->type);
            break;
        }
    }
    for (size_t i = 0; rc == 0 && i < c->n_writes; i++)
        rc = a->transaction_add_conflict_range(tr, c->writes[i].begin, (int)c->writes[i].begin_len, c->writes[i].end,
                                               (int)c->writes[i].end_len, RL_FDB_CONFLICT_WRITE);
    if (rc) {
        commit_finish(x, rc);
        return;
    }
    /* Inputs are not used after this point (backend.h: borrowed during the start call only). */
    x->vf = a->transaction_get_versionstamp(tr);
    x->cf = a->transaction_commit(tr);
    rc = a->future_set_callback(x->cf, on_commit, x);
    if (rc) commit_finish(x, rc);
}

/* ---- Watches (invariant 10) ------------------------------------------------------------------ */

typedef struct wctx {
    fdbbe *be;
    rl__kv_watch *w;
    FDBTransaction *tr;
    FDBFuture *wf, *cf, *gf;  /* the watch, its commit, the fresh value (the too-old path) */
    int fresh;                /* on a fresh read version (the watch's own was too old) */
    int cancelled;            /* under be->mu */
    int pins;                 /* under be->mu: cancels calling future_cancel on wf right now */
    struct wctx *prev, *next; /* be->watches (under be->mu) */
} wctx;

static void w_on_watch(FDBFuture *f, void *ud);
static void w_on_get(FDBFuture *f, void *ud);

/* Drop the FoundationDB objects of x once no cancel is using them (be->mu held). */
static void w_release(wctx *x) {
    fdbbe *be = x->be;
    while (x->pins) pthread_cond_wait(&be->idle_cv, &be->mu);
    if (x->wf) be->api->future_destroy(x->wf);
    if (x->cf) be->api->future_destroy(x->cf);
    if (x->gf) be->api->future_destroy(x->gf);
    if (x->tr) be->api->transaction_destroy(x->tr);
    x->wf = x->cf = x->gf = NULL;
    x->tr = NULL;
}

static void w_finish(wctx *x, int rc) {
    fdbbe *be = x->be;
    pthread_mutex_lock(&be->mu);
    w_release(x);
    if (x->cancelled) rc = RL_E_OPERATION_CANCELLED;
    if (x->prev) x->prev->next = x->next;
    else be->watches = x->next;
    if (x->next) x->next->prev = x->prev;
    pthread_mutex_unlock(&be->mu);
    rl__kv_watch *w = x->w;
    rl__free(x);
    tl_in_done++;
    w->done(w, rc);
    tl_in_done--;
    op_end(be);
}

/* Watch on x->tr (read version set, or the fresh value checked) and commit it: FoundationDB
 * registers the watch at the commit. */
static void w_arm(wctx *x) {
    fdbbe *be = x->be;
    const rl__fdb_api *a = be->api;
    pthread_mutex_lock(&be->mu);
    int cancelled = x->cancelled; /* a cancel between two futures (the fresh value's and this) */
    if (!cancelled) {
        x->wf = a->transaction_watch(x->tr, x->w->key, (int)x->w->key_len);
        x->cf = a->transaction_commit(x->tr);
    }
    pthread_mutex_unlock(&be->mu);
    if (cancelled) {
        w_finish(x, RL_E_OPERATION_CANCELLED);
        return;
    }
    if (a->future_set_callback(x->wf, w_on_watch, x)) w_finish(x, RL_E_INTERNAL_ERROR);
}

/* Start on a new transaction: at the watch's version (FoundationDB reads the value the layer
 * above gave, at that version), or fresh: then the value is read and compared here first. */
static void w_start(wctx *x) {
    fdbbe *be = x->be;
    const rl__fdb_api *a = be->api;
    FDBTransaction *tr = NULL;
    int rc = a->database_create_transaction(be->db, &tr);
    if (rc == 0 && x->w->key_len && x->w->key[0] == 0xff)
        rc = a->transaction_set_option(tr, RL_FDB_TR_READ_SYSTEM_KEYS, NULL, 0);
    pthread_mutex_lock(&be->mu);
    x->tr = tr;
    pthread_mutex_unlock(&be->mu);
    if (rc) {
        w_finish(x, rc);
        return;
    }
    if (!x->fresh) {
        a->transaction_set_read_version(tr, (int64_t)x->w->version);
        w_arm(x);
        return;
    }
    pthread_mutex_lock(&be->mu);
    x->gf = a->transaction_get(tr, x->w->key, (int)x->w->key_len, 1);
    pthread_mutex_unlock(&be->mu);
    if (a->future_set_callback(x->gf, w_on_get, x)) w_finish(x, RL_E_INTERNAL_ERROR);
}

static void w_on_get(FDBFuture *f, void *ud) {
    wctx *x = ud;
    const rl__fdb_api *a = x->be->api;
    fdb_bool_t present = 0;
    const uint8_t *v = NULL;
    int vl = 0;
    int rc = a->future_get_error(f);
    if (rc == 0) rc = a->future_get_value(f, &present, &v, &vl);
    if (rc) {
        w_finish(x, rc);
        return;
    }
    const rl__kv_watch *w = x->w;
    int differs = (present != 0) != (w->present != 0) ||
                  (present && ((uint32_t)vl != w->value_len || (vl && memcmp(v, w->value, (size_t)vl))));
    if (differs) {
        w_finish(x, RL_OK);
        return;
    }
    w_arm(x);
}

static void w_on_watch(FDBFuture *f, void *ud) {
    wctx *x = ud;
    fdbbe *be = x->be;
    int rc = be->api->future_get_error(f);
    pthread_mutex_lock(&be->mu);
    int again = rc == RL_E_TRANSACTION_TOO_OLD && !x->fresh && !x->cancelled;
    if (again) {
        w_release(x);
        x->fresh = 1;
    }
    pthread_mutex_unlock(&be->mu);
    if (again) w_start(x); /* the version left FoundationDB's window: compare at a fresh one */
    else w_finish(x, rc);
}

static void be_watch(rl__kv_backend *b, rl__kv_watch *w) {
    fdbbe *be = (fdbbe *)b;
    op_begin(be);
    wctx *x = rl__calloc(1, sizeof *x);
    if (!x) {
        tl_in_done++;
        w->done(w, RL_E_OUT_OF_MEMORY);
        tl_in_done--;
        op_end(be);
        return;
    }
    x->be = be;
    x->w = w;
    pthread_mutex_lock(&be->mu);
    x->next = be->watches;
    if (x->next) x->next->prev = x;
    be->watches = x;
    pthread_mutex_unlock(&be->mu);
    w_start(x);
}

/* Cancel: FoundationDB's future_cancel of the watch, whose callback then finishes it. */
static void be_watch_cancel(rl__kv_backend *b, rl__kv_watch *w) {
    fdbbe *be = (fdbbe *)b;
    pthread_mutex_lock(&be->mu);
    wctx *x = be->watches;
    while (x && x->w != w) x = x->next;
    FDBFuture *wf = NULL;
    if (x && !x->cancelled) {
        x->cancelled = 1;
        wf = x->wf ? x->wf : x->gf;
        if (wf) x->pins++;
    }
    pthread_mutex_unlock(&be->mu);
    if (!wf) return; /* between futures: the next step sees `cancelled` at its end */
    be->api->future_cancel(wf);
    pthread_mutex_lock(&be->mu);
    x->pins--;
    pthread_cond_broadcast(&be->idle_cv);
    pthread_mutex_unlock(&be->mu);
}

/* ---- Status, close, open ----------------------------------------------------------------- */

/* A read version for the status: waited for at most 5 s (on FoundationDB's network thread the
 * wait cannot end early and times out: the status then says null). The waiter and the callback
 * share the block; the last to leave frees it. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs, done, rc;
    int64_t v;
    const rl__fdb_api *api;
} status_grv;

static void status_grv_unref(status_grv *w) {
    pthread_mutex_lock(&w->mu);
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last) return;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    rl__free(w);
}

static void on_status_grv(FDBFuture *f, void *ud) {
    status_grv *w = ud;
    int rc = w->api->future_get_error(f);
    int64_t v = 0;
    if (rc == 0) rc = w->api->future_get_int64(f, &v);
    w->api->future_destroy(f);
    pthread_mutex_lock(&w->mu);
    w->rc = rc;
    w->v = v;
    w->done = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    status_grv_unref(w);
}

static int status_read_version(fdbbe *be, int64_t *out) {
    status_grv *w = rl__calloc(1, sizeof *w);
    if (!w) return RL_E_OUT_OF_MEMORY;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->refs = 2;
    w->api = be->api;
    FDBTransaction *tr = NULL;
    int rc = be->api->database_create_transaction(be->db, &tr);
    if (rc == 0) {
        FDBFuture *f = be->api->transaction_get_read_version(tr);
        rc = be->api->future_set_callback(f, on_status_grv, w);
        if (rc) be->api->future_destroy(f), w->refs--;
    } else {
        w->refs--;
    }
    if (rc == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        pthread_mutex_lock(&w->mu);
        int wr = 0;
        while (!w->done && wr == 0) wr = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        rc = w->done ? w->rc : RL_E_TIMED_OUT;
        *out = w->v;
        pthread_mutex_unlock(&w->mu);
    }
    if (tr) be->api->transaction_destroy(tr);
    status_grv_unref(w);
    return rc;
}

static int be_status_json(rl__kv_backend *b, rl_buf *out) {
    fdbbe *be = (fdbbe *)b;
    int64_t rv = 0;
    int rv_rc = status_read_version(be, &rv);
    int active = 0, idle = 0;
    pthread_mutex_lock(&be->mu);
    for (int i = 0; i < ACTIVE_MAX; i++) active += be->active[i] != NULL;
    for (int k = 0; k < N_KINDS; k++) idle += be->n_idle[k];
    pthread_mutex_unlock(&be->mu);
    rl__buf_append_str(out, "{\"backend\": \"fdb\", \"library\": \"");
    rl__bytes_printable(out, be->api->path, strlen(be->api->path));
    rl__buf_append_str(out, "\", \"client_version\": \"");
    const char *cv = be->api->get_client_version();
    rl__bytes_printable(out, cv, strlen(cv));
    rl__buf_printf(out, "\", \"api_version\": %d, \"cluster_file\": ", be->api->api_version);
    if (be->cluster_file) {
        rl__buf_append_str(out, "\"");
        rl__bytes_printable(out, be->cluster_file, strlen(be->cluster_file));
        rl__buf_append_str(out, "\"");
    } else {
        rl__buf_append_str(out, "null");
    }
    if (rv_rc == 0) rl__buf_printf(out, ", \"read_version\": %lld", (long long)rv);
    else rl__buf_printf(out, ", \"read_version\": null, \"read_version_error\": %d", rv_rc);
    /* FoundationDB does not count keys cheaply: "keys" is null (as a cluster's unknown count). */
    rl__buf_printf(out,
                   ", \"keys\": null, \"pooled_transactions\": {\"active\": %d, \"idle\": %d}, "
                   "\"read_only\": %s",
                   active, idle, be->read_only ? "true" : "false");
    /* Locality (invariant 9): what get_addresses_for_key said, the servers seen, the read EWMA. */
    pthread_mutex_lock(&be->loc_mu);
    rl__buf_printf(out,
                   ", \"locality\": {\"networked\": %s, \"servers_seen\": %d, \"cached_keys\": %d, "
                   "\"read_rtt_ewma_us\": %.1f, \"read_rtt_samples\": %u}}",
                   be->loc_kind == LOC_LOCAL       ? "false"
                   : be->loc_kind == LOC_NETWORKED ? "true"
                                                   : "null",
                   be->n_addrs, be->n_loc, (double)be->rtt_ns / 1e3, be->rtt_n);
    pthread_mutex_unlock(&be->loc_mu);
    return rl__buf_error(out);
}

/* Close (invariant 8): wait for the operations still in flight — a transaction that is freed
 * with a read version or a read outstanding leaves its request running — at most 60 s; if
 * FoundationDB has not answered by then, the backend is left allocated (a late callback must
 * find it) and only the caller's handle goes away. */
static void be_close(rl__kv_backend *b) {
    fdbbe *be = (fdbbe *)b;
    if (tl_in_done) return; /* invariant 8: inside a completion; left allocated */
    /* Watches whose futures were never freed: cancelled, so that their callbacks end them. */
    for (;;) {
        pthread_mutex_lock(&be->mu);
        struct wctx *x = be->watches;
        while (x && x->cancelled) x = x->next;
        pthread_mutex_unlock(&be->mu);
        if (!x) break;
        be_watch_cancel(b, x->w);
    }
    pthread_mutex_lock(&be->mu);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    int wr = 0;
    while (atomic_load(&be->inflight) > 0 && wr == 0) wr = pthread_cond_timedwait(&be->idle_cv, &be->mu, &ts);
    int stuck = atomic_load(&be->inflight) > 0;
    pthread_mutex_unlock(&be->mu);
    if (stuck) return;
    for (int i = 0; i < ACTIVE_MAX; i++) slot_destroy(be, be->active[i]);
    for (int k = 0; k < N_KINDS; k++) {
        for (slot *s = be->idle[k], *n; s; s = n) {
            n = s->next;
            slot_destroy(be, s);
        }
    }
    be->api->database_destroy(be->db);
    for (int i = 0; i < be->n_addrs; i++) rl__free(be->addrs[i]);
    pthread_cond_destroy(&be->loc_cv);
    pthread_mutex_destroy(&be->loc_mu);
    pthread_cond_destroy(&be->idle_cv);
    pthread_mutex_destroy(&be->mu);
    rl__free(be->cluster_file);
    rl__free(be);
}

/* ---- Size estimates ---------------------------------------------------------------------- */

/* FoundationDB's own calls (docs/design.md §4, "Size estimates"; §8.8.2) on a fresh pooled
 * transaction: they take no read version. Keys are copied out of FoundationDB's future into the
 * request's arena before it is destroyed. */
typedef struct {
    fdbbe *be;
    rl__kv_metrics *m;
    slot *s;
} mt_ctx;

static void on_metrics(FDBFuture *f, void *ud) {
    mt_ctx *x = ud;
    fdbbe *be = x->be;
    rl__kv_metrics *m = x->m;
    int rc = be->api->future_get_error(f);
    if (rc == 0 && m->op == RL_KV_ESTIMATE) {
        int64_t v = 0;
        rc = be->api->future_get_int64(f, &v);
        m->bytes = v;
    } else if (rc == 0) {
        const FDBKey *keys = NULL;
        int n = 0;
        rc = be->api->future_get_key_array(f, &keys, &n);
        rl_slice *v = rc == 0 && n > 0 ? rl__arena_alloc(m->arena, (size_t)n * sizeof *v) : NULL;
        if (rc == 0 && n > 0 && !v) rc = RL_E_OUT_OF_MEMORY;
        for (int i = 0; rc == 0 && i < n; i++) {
            v[i].len = keys[i].key_length > 0 ? (size_t)keys[i].key_length : 0;
            v[i].data = dup(m->arena, keys[i].key, keys[i].key_length);
            if (!v[i].data) rc = RL_E_OUT_OF_MEMORY;
        }
        m->keys = v;
        m->n_keys = rc == 0 ? n : 0;
    }
    be->api->future_destroy(f);
    slot_release(be, x->s);
    rl__free(x);
    tl_in_done++;
    m->done(m, rc);
    tl_in_done--;
    op_end(be);
}

static void be_metrics(rl__kv_backend *b, rl__kv_metrics *m) {
    fdbbe *be = (fdbbe *)b;
    op_begin(be);
    mt_ctx *x = rl__calloc(1, sizeof *x);
    int sys = sys_key(m->begin, m->begin_len, 1) || sys_key(m->end, m->end_len, 1);
    int rc = x ? slot_fresh(be, K_READ, sys, &x->s) : RL_E_OUT_OF_MEMORY;
    if (rc == RL_OK) {
        x->be = be;
        x->m = m;
        FDBFuture *f = m->op == RL_KV_ESTIMATE
                           ? be->api->transaction_get_estimated_range_size_bytes(x->s->tr, m->begin, (int)m->begin_len,
                                                                                 m->end, (int)m->end_len)
                           : be->api->transaction_get_range_split_points(x->s->tr, m->begin, (int)m->begin_len, m->end,
                                                                         (int)m->end_len, m->chunk);
        rc = be->api->future_set_callback(f, on_metrics, x);
        if (rc == RL_OK) return; /* on_metrics completes it */
        be->api->future_destroy(f);
        slot_release(be, x->s);
    }
    rl__free(x);
    tl_in_done++;
    m->done(m, rc);
    tl_in_done--;
    op_end(be);
}

static const rl__kv_backend_vtable fdb_vt = {
    .name = "fdb",
    .completes_inline = 0,
    .close = be_close,
    .get_read_version = be_grv,
    .read = be_read,
    .commit = be_commit,
    .status_json = be_status_json,
    .locality = be_locality,
    .metrics = be_metrics,
    .watch = be_watch,
    .watch_cancel = be_watch_cancel,
};

int rl__kv_fdb_open(const char *cluster_file, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err) {
    const rl__fdb_api *api;
    int rc = rl__fdb_client(&api, err);
    if (rc) return rc;
    fdbbe *be = rl__calloc(1, sizeof *be);
    if (!be) return RL_E_OUT_OF_MEMORY;
    be->base.vt = &fdb_vt;
    be->api = api;
    if (cluster_file && *cluster_file) {
        be->cluster_file = rl__strdup(cluster_file);
        if (!be->cluster_file) {
            rl__free(be);
            return RL_E_OUT_OF_MEMORY;
        }
    }
    be->secondary_row_limit = 2000;
    be->secondary_byte_limit = 10000000;
    if (opts) {
        size_t have = opts->size ? opts->size : sizeof *opts;
        if (have >= offsetof(rl_db_options, mapped_secondary_byte_limit) + sizeof(long)) {
            if (opts->mapped_secondary_row_limit < 0 || opts->mapped_secondary_byte_limit < 0) {
                rl__errdetail_append(err, "mapped secondary limits must not be negative");
                rl__free(be->cluster_file);
                rl__free(be);
                return RL_E_INVALID_ARGUMENT;
            }
            if (opts->mapped_secondary_row_limit) be->secondary_row_limit = opts->mapped_secondary_row_limit;
            if (opts->mapped_secondary_byte_limit) be->secondary_byte_limit = opts->mapped_secondary_byte_limit;
        }
        if (have >= offsetof(rl_db_options, read_only) + sizeof(int)) be->read_only = opts->read_only != 0;
    }
    rc = api->create_database(be->cluster_file, &be->db);
    if (rc) {
        rl__errdetail_append(err, "FoundationDB's fdb_create_database(%s) failed: %d %s",
                             be->cluster_file ? be->cluster_file : "default cluster file", rc, api->get_error(rc));
        rl__free(be->cluster_file);
        rl__free(be);
        return rc;
    }
    pthread_mutex_init(&be->mu, NULL);
    pthread_cond_init(&be->idle_cv, NULL);
    pthread_mutex_init(&be->loc_mu, NULL);
    pthread_cond_init(&be->loc_cv, NULL);
    /* Invariant 9: is there a storage server to name? Asked once, waited for a little. */
    be->loc_busy = 1;
    be->loc_last_ns = rl__clock_mono_ns();
    loc_lookup(be, (const uint8_t *)"", 0);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += LOC_PROBE_WAIT_S;
    pthread_mutex_lock(&be->loc_mu);
    int wr = 0;
    while (be->loc_busy && wr == 0) wr = pthread_cond_timedwait(&be->loc_cv, &be->loc_mu, &ts);
    pthread_mutex_unlock(&be->loc_mu);
    *out = &be->base;
    return RL_OK;
}
