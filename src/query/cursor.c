/* cursor.c — index scan cursors over a record store: bounds, skip pushdown, limits,
 * continuations, and the fetch methods SCAN_AND_FETCH, USE_REMOTE_FETCH and
 * USE_REMOTE_FETCH_WITH_FALLBACK (include/reclayer/query.h states the contract).
 *
 * Structure. A cursor owns one *source* at a time, which yields index entries in scan order, each
 * with the key-values of its record already read (SCAN_AND_FETCH: a pipelined range read of
 * (1, pk...) per entry; remote fetch: the secondary result of a mapped range read). The cursor
 * decides what to do with each entry (limits, orphans, rows) and remembers the last entry it
 * consumed; the fallback replaces the remote source by a scan source started after that entry.
 *
 *   open ──next──> [source read] ──row──> (caller) ──next──> ...
 *                      │ error (remote, with fallback, first time)
 *                      └──> scan source after the last consumed entry ──> ...
 *   any limit / end ──> ENDED (same reason forever)      error ──> FAILED (same error forever)
 *
 * Invariants:
 *   1. c->last_key is the last index key consumed (returned, or skipped as an orphan); every
 *      source starts strictly after it (forward: firstGreaterThan(last); reverse: the exclusive
 *      end firstGreaterOrEqual(last)), or at the scan's start when nothing was consumed, so a
 *      switch of source never repeats or loses an entry.
 *   2. An entry is consumed only after its record was read and decoded (or found missing and the
 *      orphan behaviour allows it), so a failure leaves it for the fallback to read again.
 *   3. Skip is added to the start selector's offset only for a source that starts at the scan's
 *      start and had no continuation; after the first read a source continues from the last key
 *      it received, with no offset.
 *   4. The out-of-band limits are checked before each entry except the cursor's first, so each
 *      page makes progress; the return limit is checked first.
 *   5. Index reads ask for at most the rows still allowed by the return limit, so a limited page
 *      loads (or has the server map) no more records than it can return.
 *   6. Memory per row (rlbench query, docs/benchmarks.md): a record's key-values are used in
 *      place — from the held one-page load (SCAN_AND_FETCH) or from the mapped page c->mf —
 *      and copied into c->kvs only when the range took more than one read. The record is
 *      decoded by c->dec (rl__record_decoder), whose memory is reused from row to row, so
 *      c->rec is borrowed from it and is zeroed, never released; it may point into the record's
 *      key-values (rl__decoder_decode_in_place: a split record's chunks lying end to end in a
 *      local read's result are parsed where they are), so those — a held load, the mapped page,
 *      c->kvs — are kept until the next entry is fetched; rl_cursor_free recycles the
 *      decoder, so the thread's next cursor starts with its memory (a split record's chunk
 *      buffer and scratch block are not allocated again per query). Queued index keys and their
 *      primary keys share one buffer (c->qbytes), reset per index page. In steady state the
 *      cursor itself allocates nothing per row; what remains is the KV layer's (futures,
 *      result arenas).
 *   7. Tracing counters (rl_query_counters' network figures) come from each read the cursor takes
 *      (take_read: the backend's per-read stats, kv_stats.h), and from reads it drops that are
 *      complete (src_release), so the counters and the trace's events always describe the same
 *      reads. Critical round trips: every read records the critical depth D at its issue (d0);
 *      taking its result sets D = max(D, d0 + its read-version wait + its sequential round trips
 *      + its servers' s2s round trips). A read issued after the cursor took another's result is
 *      thus behind it, reads issued together overlap, and a read dropped unused adds nothing.
 *      It is a count in a model where round trips cost and CPU is free (the same on any
 *      machine load), not a timing; `waits` counts the real blocking.
 *   8. Mapped pages (remote fetch) are sized by what the query says it will read (mapped_mode):
 *      EXACT with the rows a return or scan limit still allows, WANT_ALL for a full scan of the
 *      bounds, FoundationDB's growing ITERATOR pages only when the stop is unknown (index_batch,
 *      byte or time limits). EXACT and WANT_ALL pages carry a byte target (page_bytes): on a
 *      networked database MAPPED_PAGE_BYTES (8 MiB of index entries and records: one round trip
 *      moves a lot), on a local one AD_READ_BYTES (1 MiB: a page costs no round trip, and a result
 *      arena above malloc's mmap threshold is faulted in afresh on every read — 8 MiB pages made
 *      an embedded remote fetch of 1,000 split records 2-3x slower than SCAN_AND_FETCH), so a page
 *      costs memory only up to it. An EXACT or
 *      WANT_ALL page that ends with more to read has the next one asked for as soon as it
 *      arrives (c->mf_next, for at most the rows the limits leave beyond the page's entries), so
 *      the server reads page n+1 while the cursor decodes page n; at most two pages are held.
 *      Index pages of SCAN_AND_FETCH stay ITERATOR (its loads start from the first page, so a
 *      small first page starts them sooner).
 *   9. Mapped pages ask for RL_MAPPED_OMIT_INDEX when the index's entries can be rebuilt from
 *      their records (rl__index_layout.rebuildable) and keep_index_entries is 0. An entry that
 *      comes without its index key takes its primary key from its record range (the mapper's
 *      P = records prefix + primary key) and, once its record is decoded, its key from the index
 *      definition (rl__store_index_entry); a key that does not follow the last consumed one, or
 *      an entry without a record (an orphan), is read from the index instead (the entry right
 *      after the last consumed one). So cur_key — and with it rows, last_key, continuations,
 *      byte limits — is what the whole entry would have given. A page's first and last entries
 *      always come whole, so the next page starts where it would have.
 *  10. Early entries (streamed remote pages, kv_stats.h rl__future_mapped_wait): while a mapped
 *      page is pending (mpart) and the transaction holds no write (rl__txn_wrote: a page's 2039
 *      check is made at its completion, so rows no write of the transaction can touch are the
 *      only ones that may go first), the cursor consumes the entries the backend says are final,
 *      all but the last one handed up — so the page's last entry, which moves the source
 *      (src_advance) and must come whole (invariant 9), is consumed only once the page is
 *      complete. The complete page must begin with the entries consumed (checked on the last of
 *      them); its figures, the source's move and the read-ahead happen at completion, as for a
 *      page taken whole. ADAPTIVE pages on a networked database too (their time is what their rows
 *      took through next(), early or not).
 *  11. A freed cursor's memory is parked for its thread's next cursor (cursor_take / cursor_put:
 *      one cursor per thread, at most CURSOR_PARK_BYTES of buffers), as a prepared statement
 *      keeps its own: the cursor, its 18 buffers, its entry queue and its key-value list are
 *      then not allocated again query after query (a limit-1 query made 19 allocations, 12 of
 *      them these). A parked cursor holds no data of the query before: every field but that
 *      memory is zeroed when it is taken, every buffer reset. Freed at the thread's exit.
 *  12. Completions (remote fetch): an entry that comes with `more` — its secondary cut off by the
 *      server's limits, or left unread (RL_MAPPED_DEFER_REMOTE: no rows) — has the rest of its
 *      record range read by the cursor, and those reads are pipelined as SCAN_AND_FETCH's loads:
 *      complete_ahead keeps up to load_depth of them in flight for the page's entries ahead
 *      (c->q, key_off = the entry's index in the page; c->mlook the next entry to look at), in
 *      entry order, so the entry consumed next is the queue's head. They never outlive their page
 *      (the page is consumed before the next one). On a networked database the cursor asks for
 *      RL_MAPPED_DEFER_REMOTE when the index's records average DEFER_RECORD_BYTES or more and
 *      the page's come to DEFER_PAGE_BYTES (defer_flags: this cursor's records, else the mean
 *      its index's earlier cursors left in ad_scan.rec_bytes): a `grouped` server then leaves the records other servers hold to the
 *      cursor, which reads each from its owner once, instead of through the index's server.
 */
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/thread_exit.h"
#include "base/hash.h"
#include "kv/kv_stats.h"
#include "query/adaptive.h"
#include "query/query_int.h"
#include "reclayer/alloc.h"
#include "reclayer/query.h"
#include "record/layout.h"
#include "tuple/tuple.h"

#define DEFAULT_PIPELINE 10
/* The byte target of EXACT and WANT_ALL mapped pages (invariant 8): index entries plus their
 * records, as the storage layer counts them (src/storage/mapped.c); the size of the storage
 * server's own reply budget (SS_REPLY_BYTES), so a page the server would cut anyway ends here. */
#define MAPPED_PAGE_BYTES (8 << 20)
#define MAX_ENTRY_COLS 64
/* ADAPTIVE: a page is at most this many entries (and no more than the return limit leaves).
 * One size for every page of a long scan, so its pages fall in one size class of the model and
 * each page's observation calibrates the next decision (doubling pages would visit a fresh class
 * every time). */
#define AD_PAGE_ROWS 1024
#define AD_READ_BYTES (1 << 20) /* bytes per read of a page (stream_bytes; embedded: remote pages, page_bytes) */
#define AD_TEST_ENV "RL_QUERY_ADAPTIVE_TEST"
#define AD_EWMA 0.25 /* weight of a page in the database's bytes-per-row and remote share */
/* Remote fetch on a networked database asks for RL_MAPPED_DEFER_REMOTE (invariant 12) when the
 * index's records average at least this many bytes: a record that size costs more to relay
 * through the index's server than to read from its owner in the cursor's pipeline. */
#define DEFER_RECORD_BYTES (32 << 10)
/* ... and when the page's records come to at least this many bytes: with a few records the
 * relayed page is as fast (one round trip from the client, the servers' one beside it) and the
 * client makes one request instead of two (multi, split records of 100 kB: limit 1 relayed 0.93
 * of SCAN_AND_FETCH's time, deferred 1.07; 10 rows 1.09 and 1.06-1.07; 1,000 rows 1.24-1.29 and
 * 0.98-1.02). */
#define DEFER_PAGE_BYTES (512 << 10)

/* What earlier pages of one scanned index (of one store) taught: EWMAs over its pages. */
#define AD_SCANS 16
typedef struct {
    uint64_t key;          /* rl__hash64 of the index prefix (store prefix + index subspace) */
    uint64_t used;         /* ad_state.tick when last used (the least recent is replaced) */
    double bytes_per_row;  /* 0: none yet */
    double kvs_per_record; /* 0: none yet */
    double frac_remote;    /* remote pages' share of records read elsewhere */
    double rec_bytes;      /* networked: mean key + value bytes of a record (defer_flags); 0: none */
    int have_frac;
} ad_scan;

/* A local backend's lease on the decision of a cursor's first page (page_decide): page_inputs
 * gives the same inputs to every first page of the same index, page size and options while the
 * model and the index's ad_scan are unchanged (gen). */
#define AD_LEASES 4
typedef struct {
    uint64_t gen; /* ad_state.gen at the grant (0: none) */
    uint64_t key; /* ad_key */
    int64_t rows;
    int pipeline_depth, index_batch, strategy; /* the options page_inputs reads */
    rl__adaptive_lease l;
} ad_lease;

/* The ADAPTIVE method's state per database (rl__db_slot): the model and what earlier pages
 * taught per index, guarded by lock (ad_lock: decisions and observations of concurrent cursors). */
typedef struct {
    int lock; /* 1 while held (ad_lock) */
    rl__adaptive_model m;
    ad_scan scans[AD_SCANS];
    uint64_t tick;
    uint64_t gen; /* bumped whenever m or scans change other than by a decision (ad_lease) */
    ad_lease leases[AD_LEASES];
    int costs_set; /* the priors were chosen for the backend (networked or not) */
    int networked; /* the backend is networked (rl__kv_locality.networked) */
} ad_state;

static void ad_state_init(void *p) {
    ad_state *a = p;
    a->lock = 0;
    a->gen = 1; /* above every empty lease's 0 */
    rl__adaptive_init(&a->m, NULL);
}

/* The state's lock: a spinlock that yields the CPU after 64 tries. It is held for well under a
 * microsecond (a decision, an observation, a table lookup), twice per page; a pthread mutex pair
 * was ~55 instructions each time, 0.5 % of a limit-1 query on embedded (docs/benchmarks.md). */
static void ad_lock(ad_state *a) {
    for (int n = 0; __atomic_exchange_n(&a->lock, 1, __ATOMIC_ACQUIRE); n++) {
        if (n >= 64) sched_yield();
    }
}

static void ad_unlock(ad_state *a) { __atomic_store_n(&a->lock, 0, __ATOMIC_RELEASE); }

/* The entry of the index with key k (found, or the least recently used one reset). Under ad_lock. */
static ad_scan *ad_scan_of(ad_state *a, uint64_t k) {
    ad_scan *lru = &a->scans[0];
    a->tick++;
    for (int i = 0; i < AD_SCANS; i++) {
        if (a->scans[i].key == k && a->scans[i].used) {
            a->scans[i].used = a->tick;
            return &a->scans[i];
        }
        if (a->scans[i].used < lru->used) lru = &a->scans[i];
    }
    memset(lru, 0, sizeof *lru);
    a->gen++; /* the replaced index's leases */
    lru->key = k;
    lru->used = a->tick;
    return lru;
}

/* The database's state (created at its first ADAPTIVE or remote fetch cursor, with the priors of
 * its kind of backend: rl__adaptive_embedded_costs when it is not networked; remote fetch reads
 * only `networked`). NULL on out of memory. */
static ad_state *ad_state_of(rl_db *db) {
    ad_state *a = rl__db_slot(db, sizeof(ad_state), ad_state_init, NULL);
    if (!a) return NULL;
    if (__atomic_load_n(&a->costs_set, __ATOMIC_ACQUIRE)) return a; /* networked is set before */
    ad_lock(a);
    if (!a->costs_set) {
        rl__kv_locality l;
        rl__db_locality(db, (const uint8_t *)"", 0, &l);
        if (!l.networked) a->m.costs = rl__adaptive_embedded_costs();
        a->networked = l.networked;
        a->gen++;
        __atomic_store_n(&a->costs_set, 1, __ATOMIC_RELEASE);
    }
    ad_unlock(a);
    return a;
}

/* The test mode (query_int.h rl__query_adaptive_test): 0 off, N > 0 alternate with pages of N.
 * -1 until the first ADAPTIVE cursor reads AD_TEST_ENV (once per process: a getenv per cursor
 * was 1.3 % of a limit-1 query). */
static int ad_test_rows_g = -1;

static int ad_test_mode(void) {
    int v = __atomic_load_n(&ad_test_rows_g, __ATOMIC_ACQUIRE);
    if (v >= 0) return v;
    const char *t = getenv(AD_TEST_ENV); /* "alternate" or "alternate:N" (tests only) */
    v = 0;
    if (t && !strncmp(t, "alternate", 9)) {
        v = t[9] == ':' ? atoi(t + 10) : 3;
        if (v < 1) v = 3;
    }
    int unset = -1; /* a concurrent rl__query_adaptive_test wins */
    __atomic_compare_exchange_n(&ad_test_rows_g, &unset, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&ad_test_rows_g, __ATOMIC_ACQUIRE);
}

void rl__query_adaptive_test(int alternate_rows) {
    __atomic_store_n(&ad_test_rows_g, alternate_rows > 0 ? alternate_rows : 0, __ATOMIC_RELEASE);
}

int rl__query_adaptive_with(rl_db *db, void (*fn)(rl__adaptive_model *m, void *ud), void *ud) {
    ad_state *a = ad_state_of(db);
    if (!a) return RL_E_OUT_OF_MEMORY;
    ad_lock(a);
    fn(&a->m, ud);
    a->gen++;
    ad_unlock(a);
    return RL_OK;
}

/* A list of key-values copied out of futures (a record's range, across pages). */
typedef struct {
    rl_buf bytes;
    size_t *off; /* per key-value: key offset, key length, value offset, value length */
    int n, cap;
    rl_keyvalue *view; /* built by kvl_view, pointing into bytes */
} kvlist;

/* An index entry waiting in the scan source's queue. */
typedef struct {
    size_t key_off; /* its index key: qbytes.data[key_off .. key_off + key_len) */
    size_t key_len;
    size_t pk_off, pk_len; /* its primary key in qbytes, set when the load is issued */
    rl_future *f;          /* the issued load of its record (NULL until issued) */
    unsigned issued : 1;   /* its load was issued (f), or issuing it failed (err) */
    unsigned d0 : 31;      /* the critical depth when its load was issued (invariant 7; saturates;
                          * a bit-field keeps qent at 48 bytes: the queue holds a page of them) */
    int err;               /* why its load could not be issued: surfaces when it reaches the head */
} qent;

typedef enum { SRC_NONE = 0, SRC_SCAN, SRC_REMOTE } src_kind;

struct rl_cursor {
    rl_store *s;
    rl_txn *txn;
    rl__index_layout ix;
    rl_query_options o;         /* copy; the borrowed pointers are cleared */
    rl_buf ixprefix;            /* store prefix + (2, subspace_key) */
    rl_buf recprefix;           /* store prefix + (1,) */
    rl_buf range_b, range_e;    /* index keys selected by the bounds: [range_b, range_e) */
    int is_empty;               /* range_b >= range_e */
    int pk_pos[MAX_ENTRY_COLS]; /* per primary-key column: its position in the entry tuple */
    int n_pk, n_entry;          /* primary-key columns; elements of an entry tuple */
    rl_buf mapper;              /* the remote-fetch mapper */
    int mapper_rc;              /* RL_OK, or why remote fetch cannot run on this store */
    int skip;                   /* 0 when opened with a continuation */
    int has_last;               /* invariant 1 */
    rl_buf last_key;
    /* The source. */
    src_kind src;
    int fell_back;
    rl_buf sb, se; /* current begin / end selector keys */
    int sb_oreq, sb_off, se_oreq, se_off;
    int iteration; /* of the streaming mode, from 1 */
    int exhausted; /* the index range has no entries beyond those received */
    qent *q;       /* SRC_SCAN: entries received, not yet taken */
    int qn, qcap, qhead;
    int q_issued;          /* SRC_SCAN: entries of [qhead, qn) whose load is issued */
    rl_buf qbytes;         /* SRC_SCAN: the index keys of the queued entries */
    rl_buf qspare;         /* SRC_SCAN: qbytes' other half while the queue is compacted */
    rl_future *pf;         /* SRC_SCAN: the next index page, requested ahead (or NULL) */
    uint64_t pf_d0, mf_d0; /* critical depth when pf / mf was issued (invariant 7) */
    rl_buf tb, te;         /* scratch begin / end keys of completions (paged records) */
    rl_buf lb, le;         /* begin / end keys of record loads (rl__store_record_range) */
    rl_future *mf;         /* SRC_REMOTE: the current page */
    rl_future *mf_next;    /* SRC_REMOTE: the next page, asked for when mf arrived (or NULL) */
    uint64_t mf_next_d0;   /* critical depth when mf_next was issued (invariant 7) */
    const rl_mapped_keyvalue *ments;
    int mn, mi;
    int mpart;                 /* mf is pending: ments[0..mn) are its entries final so far but the last (inv. 10) */
    int mcounted;              /* entries of mf already in the counters (count_entries) */
    int mlook;                 /* entries of mf looked at for completions to issue (complete_ahead) */
    uint64_t rec_bytes, rec_n; /* key + value bytes of the records read, and their number */
    double ad_rec_bytes;       /* remote fetch, networked: the index's learned mean record size */
    int mblocked;              /* mf was still in flight when the cursor first wanted its entries */
    int omit;                  /* mapped reads ask for RL_MAPPED_OMIT_INDEX (invariant 9) */
    int networked;             /* remote fetch on a networked database (ad_state.networked): page_bytes */
    int cur_omitted;           /* the entry being looked at came without its index key: rebuild_key */
    /* The entry being looked at. */
    rl_buf cur_key, cur_pk;
    kvlist kvs;              /* the record's key-values when they had to be copied */
    const rl_keyvalue *rkvs; /* the record's key-values: into hold, mf or kvs.view */
    int rn;
    rl_future *hold;        /* SRC_SCAN: the one-page load that rkvs points into */
    rl__record_decoder dec; /* decodes rec; reuses its memory across rows */
    rl_record rec;          /* borrowed from dec: zero it, never rl_record_release it */
    rl_query_row row;
    /* State. */
    int64_t consumed, rows, bytes_scanned;
    uint64_t t0_ns;
    int done;
    rl_no_next_reason reason;
    int err, cause;
    rl__errdetail detail; /* rl_cursor_errmsg (base/errdetail.h) */
    unsigned row_mark;    /* rl__errdetail_mark(&detail) when the current entry's fetch began */
    rl_buf cont;
    rl_query_counters k;
    /* Tracing (invariant 7). */
    uint64_t depth;           /* the critical path so far, in round trips */
    uint64_t tr_t0;           /* rl__clock_mono_ns() at open: events' time origin */
    rl_query_trace_event *tr; /* o.trace: the timeline, ordered by start */
    size_t *tr_poff;          /* per event: its first entry in tr_peers (pointers are set by
                               * rl_cursor_get_trace: tr_peers moves as it grows) */
    size_t tr_n, tr_cap;
    rl_query_s2s_peer *tr_peers; /* every event's per-peer stats */
    size_t tr_np, tr_pcap;
    int tr_oom; /* an event could not be kept (the counters stay exact) */
    int tr_on;  /* rl__txn_trace(txn, 1) was called (free undoes it) */
    /* ADAPTIVE (the file comment's "ADAPTIVE pages"). */
    int adaptive;                        /* o.fetch == RL_FETCH_ADAPTIVE */
    ad_state *ad;                        /* the database's model */
    int ad_sf_only;                      /* remote fetch cannot run here (mapper, snapshot, a remote error) */
    int ad_test_alt;                     /* test knob (AD_TEST_ENV): alternate the method page by page */
    int ad_test_rows;                    /* ... with pages of this many entries */
    int page_on;                         /* a page is running */
    int page_full;                       /* its sources received page_quota entries */
    int64_t page_quota;                  /* entries the page may read */
    int64_t page_recv;                   /* entries its reads received */
    int64_t page_consumed0, page_bytes0; /* c->consumed / bytes_scanned at its start */
    uint64_t page_kvs, page_recs;        /* record key-values and records decoded in it */
    uint64_t page_ns;                    /* time spent inside rl_cursor_next on it, less the read-version
                               * wait (page_add) */
    uint64_t page_wait_ns;               /* ... the read-version wait taken out of it */
    uint64_t in_t0;                      /* rl__clock_mono_ns() when the current call (or page) started;
                               * valid while in_call and page_on */
    int in_call;                         /* inside rl_cursor_next (its time counts) */
    int ad_rv_done;                      /* the transaction's read-version wait is behind every page now
                               * (or there is none to take out: a local backend) */
    rl__adaptive_decision ad_dec;        /* the running page's decision */
    int ad_sampled;                      /* a local backend: a page's time is its span less the caller's
                               * time between calls, estimated from sampled gaps (page_span) */
    int page_timed;                      /* the running page is timed and observed: always on a networked
                               * backend; on a local one when its decision says so (ad_dec.observe)
                               * or explain is on — an untimed page reads no clock */
    uint64_t page_t0;                    /* ad_sampled: rl__clock_mono_ns() at the page's start */
    uint64_t gap_t;                      /* ad_sampled: when the last call returned, if the gap after it
                               * is sampled (else 0) */
    uint64_t gap_ns, gap_est_ns;         /* ad_sampled: the sampled gaps' time; the page's estimated
                               * caller time (taken out of page_ns) */
    uint32_t gap_n, gaps;                /* ad_sampled: gaps sampled / all gaps between the page's calls */
    uint32_t gap_skip;                   /* ad_sampled: calls to return before the next sampled gap */
    uint32_t gap_rng;                    /* ad_sampled: xorshift32 state choosing the sampled gaps */
    uint64_t cur_local, cur_remote;      /* the page's mapped entries read locally / elsewhere */
    uint64_t ad_key;                     /* rl__hash64 of ixprefix: its ad_scan entry */
    rl_buf explain;                      /* o.explain: one line per page */
};

/* ============================================================================================
 * Small helpers
 * ========================================================================================== */

static void kvl_init(kvlist *l) {
    memset(l, 0, sizeof *l);
    rl__buf_init(&l->bytes);
}

static void kvl_reset(kvlist *l) {
    rl__buf_reset(&l->bytes);
    l->n = 0;
}

static void kvl_release(kvlist *l) {
    rl__buf_release(&l->bytes);
    rl__free(l->off);
    rl__free(l->view);
    memset(l, 0, sizeof *l);
}

static int kvl_add(kvlist *l, const rl_keyvalue *kv) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        size_t *no = rl__realloc(l->off, (size_t)cap * 4 * sizeof *no);
        if (!no) return RL_E_OUT_OF_MEMORY;
        l->off = no;
        rl_keyvalue *nv = rl__realloc(l->view, (size_t)cap * sizeof *nv);
        if (!nv) return RL_E_OUT_OF_MEMORY;
        l->view = nv;
        l->cap = cap;
    }
    size_t *o = l->off + 4 * l->n;
    o[0] = l->bytes.len, o[1] = kv->key_len;
    rl__buf_append(&l->bytes, kv->key, kv->key_len);
    o[2] = l->bytes.len, o[3] = kv->value_len;
    rl__buf_append(&l->bytes, kv->value, kv->value_len);
    l->n++;
    return rl__buf_error(&l->bytes);
}

/* Point l->view at the bytes (after the last kvl_add). */
static void kvl_view(kvlist *l) {
    for (int i = 0; i < l->n; i++) {
        const size_t *o = l->off + 4 * i;
        l->view[i] = (rl_keyvalue){l->bytes.data + o[0], (uint32_t)o[1], l->bytes.data + o[2], (uint32_t)o[3]};
    }
}

/* ---- The parked cursor (invariant 11) ------------------------------------------------------ */

#define CURSOR_PARK_BYTES ((size_t)256 << 10) /* a cursor holding more buffer memory is freed */

/* The cursor's buffers, by offset: what a parked cursor keeps. */
static const size_t cursor_bufs[] = {
    offsetof(rl_cursor, ixprefix), offsetof(rl_cursor, recprefix), offsetof(rl_cursor, range_b),
    offsetof(rl_cursor, range_e),  offsetof(rl_cursor, mapper),    offsetof(rl_cursor, last_key),
    offsetof(rl_cursor, sb),       offsetof(rl_cursor, se),        offsetof(rl_cursor, cur_key),
    offsetof(rl_cursor, cur_pk),   offsetof(rl_cursor, cont),      offsetof(rl_cursor, qbytes),
    offsetof(rl_cursor, qspare),   offsetof(rl_cursor, tb),        offsetof(rl_cursor, te),
    offsetof(rl_cursor, lb),       offsetof(rl_cursor, le),        offsetof(rl_cursor, explain)};
#define N_CURSOR_BUFS (sizeof cursor_bufs / sizeof cursor_bufs[0])

static rl_buf *cursor_buf(rl_cursor *c, size_t i) { return (rl_buf *)((char *)c + cursor_bufs[i]); }

static _Thread_local struct {
    rl_cursor *c;   /* the parked cursor, or NULL */
    int registered; /* cpark_drain runs at this thread's exit (rl__thread_at_exit) */
} cpark;

/* Free c's memory: its buffers, its key-value list, its entry queue and itself. */
static void cursor_destroy(rl_cursor *c) {
    for (size_t i = 0; i < N_CURSOR_BUFS; i++) rl__buf_release(cursor_buf(c, i));
    kvl_release(&c->kvs);
    rl__free(c->q);
    rl__free(c);
}

/* Thread exit: free the parked cursor. */
static void cpark_drain(void) {
    if (cpark.c) cursor_destroy(cpark.c);
    cpark.c = NULL;
    cpark.registered = 0;
}

/* A zeroed cursor with its buffers initialised and its key-value list empty: this thread's
 * parked one (its memory kept) or a new one. NULL on out of memory. */
static rl_cursor *cursor_take(void) {
    rl_cursor *c = cpark.c;
    if (!c) {
        if (!(c = rl__calloc(1, sizeof *c))) return NULL;
        for (size_t i = 0; i < N_CURSOR_BUFS; i++) rl__buf_init(cursor_buf(c, i));
        kvl_init(&c->kvs);
        return c;
    }
    cpark.c = NULL;
    rl_buf keep[N_CURSOR_BUFS];
    for (size_t i = 0; i < N_CURSOR_BUFS; i++) keep[i] = *cursor_buf(c, i);
    kvlist kvs = c->kvs;
    qent *q = c->q;
    int qcap = c->qcap;
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_CURSOR_BUFS; i++) {
        *cursor_buf(c, i) = keep[i];
        rl__buf_reset(cursor_buf(c, i));
    }
    c->kvs = kvs;
    kvl_reset(&c->kvs);
    c->q = q;
    c->qcap = qcap;
    return c;
}

/* Park c's memory for this thread's next cursor, or free it (a cursor is parked already, the
 * buffers are above CURSOR_PARK_BYTES, or the thread-exit destructor could not be set). c's other
 * resources are released already. */
static void cursor_put(rl_cursor *c) {
    size_t held = c->kvs.bytes.cap + (size_t)c->kvs.cap * (4 * sizeof(size_t) + sizeof(rl_keyvalue)) +
                  (size_t)c->qcap * sizeof(qent);
    for (size_t i = 0; i < N_CURSOR_BUFS; i++) held += cursor_buf(c, i)->cap;
    if (!cpark.registered) cpark.registered = rl__thread_at_exit(cpark_drain);
    if (cpark.registered && !cpark.c && held <= CURSOR_PARK_BYTES) cpark.c = c;
    else cursor_destroy(c);
}

static void set_msg(rl_cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_msg(rl_cursor *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vset(&c->detail, fmt, ap);
    va_end(ap);
}

/* The printable tuple form of key (or its hex if it is not a tuple) into out. */
static void print_key(const uint8_t *key, size_t len, rl_buf *out) {
    if (rl__tuple_print(key, len, out, NULL) != RL_OK) {
        rl__buf_reset(out);
        rl__buf_append_str(out, "x'");
        rl__buf_append_hex(out, key, len);
        rl__buf_append_str(out, "'");
    }
}

static uint64_t now_ns(const rl_cursor *c) {
    return c->o.clock_ns ? c->o.clock_ns(c->o.clock_ud) : rl__clock_mono_ns();
}

/* ---- Tracing (invariant 7) ------------------------------------------------------------------- */

/* Append the event e to the timeline, keeping it ordered by start (events arrive mostly in
 * order: the insertion walks back from the end). */
static void trace_add(rl_cursor *c, const rl__kv_trace_event *e) {
    if (c->tr_n == c->tr_cap) {
        size_t cap = c->tr_cap ? c->tr_cap * 2 : 64;
        rl_query_trace_event *v = rl__realloc(c->tr, cap * sizeof *v);
        if (v) c->tr = v;
        size_t *po = v ? rl__realloc(c->tr_poff, cap * sizeof *po) : NULL;
        if (!po) {
            c->tr_oom = 1;
            return;
        }
        c->tr_poff = po;
        c->tr_cap = cap;
    }
    size_t poff = c->tr_np, np = e->n_peers;
    if (np > 0 && c->tr_np + np > c->tr_pcap) {
        if (RL_GROW(c->tr_peers, c->tr_pcap, c->tr_np + np, 64)) {
            c->tr_oom = 1;
            np = 0;
        }
    }
    for (size_t j = 0; j < np; j++) {
        const rl__kv_s2s_peer *p = &e->peers[j];
        c->tr_peers[c->tr_np++] =
            (rl_query_s2s_peer){p->server_id, p->requests, p->items, p->bytes_sent, p->bytes_received};
    }
    rl_query_trace_event t;
    memset(&t, 0, sizeof t);
    t.start_ns = (int64_t)(e->start_ns - c->tr_t0);
    t.latency_ns = (int64_t)(e->end_ns - e->start_ns);
    t.type = rl__kv_trace_type_name(e->type);
    t.link = e->link == RL_KV_LINK_CLIENT_COORDINATOR ? "client-coordinator" : "client-storage";
    t.server_id = e->server_id;
    memcpy(t.address, e->address, sizeof t.address);
    t.address[sizeof t.address - 1] = 0;
    t.port = e->port;
    memcpy(t.host, e->host, sizeof t.host);
    t.host[sizeof t.host - 1] = 0;
    t.bytes_sent = e->bytes_sent;
    t.bytes_received = e->bytes_received;
    t.error = e->err;
    t.secondaries_local = e->secondaries_local;
    t.secondaries_remote = e->secondaries_remote;
    t.s2s_requests = e->s2s_requests;
    t.s2s_round_trips = e->s2s_round_trips;
    t.s2s_peers = e->s2s_peers;
    t.s2s_bytes_sent = e->s2s_bytes_sent;
    t.s2s_bytes_received = e->s2s_bytes_received;
    t.server_ns = (int64_t)e->server_ns;
    t.n_s2s_by_peer = np;
    size_t i = c->tr_n++;
    while (i > 0 && c->tr[i - 1].start_ns > t.start_ns) {
        c->tr[i] = c->tr[i - 1];
        c->tr_poff[i] = c->tr_poff[i - 1];
        i--;
    }
    c->tr[i] = t;
    c->tr_poff[i] = poff;
}

/* Take the network figures of the ready read f (issued at critical depth d0; NO_DEPTH: dropped
 * unused, no effect on the critical path). was_ready: f was complete before the cursor asked
 * (else the cursor blocked on it). Embedded reads report nothing and cost one test. */
#define NO_DEPTH UINT64_MAX
static void take_read(rl_cursor *c, const rl_future *f, uint64_t d0, int was_ready) {
    const rl__kv_read_stats *s = rl__future_read_stats(f);
    if (s->requests == 0 && s->grv_waits == 0) return;
    rl_query_counters *k = &c->k;
    k->requests += s->requests;
    k->requests_get += s->req_get;
    k->requests_get_key += s->req_get_key;
    k->requests_get_range += s->req_get_range;
    k->requests_get_mapped_range += s->req_get_mapped;
    k->requests_get_read_version += s->grv_requests;
    k->requests_get_multi += s->s2s_requests;
    k->requests_client_coordinator += s->coord_requests;
    k->requests_client_storage += s->requests - s->coord_requests;
    k->requests_storage_storage += s->s2s_requests;
    k->bytes_sent_client_coordinator += s->coord_bytes_sent;
    k->bytes_received_client_coordinator += s->coord_bytes_received;
    k->bytes_sent_client_storage += s->bytes_sent - s->coord_bytes_sent;
    k->bytes_received_client_storage += s->bytes_received - s->coord_bytes_received;
    k->bytes_sent_storage_storage += s->s2s_bytes_sent;
    k->bytes_received_storage_storage += s->s2s_bytes_received;
    k->round_trips += s->round_trips + s->grv_requests;
    k->s2s_round_trips += s->s2s_round_trips;
    if (s->s2s_peers > k->s2s_peers_max) k->s2s_peers_max = s->s2s_peers;
    if (d0 != NO_DEPTH) {
        uint64_t end = d0 + s->grv_waits + s->round_trips + s->s2s_round_trips;
        if (end > c->depth) c->depth = end;
        k->critical_round_trips = c->depth;
        if (!was_ready && s->requests > 0) k->waits++;
    }
    if (c->o.trace)
        for (const rl__kv_trace_event *e = rl__future_trace(f); e; e = e->next) trace_add(c, e);
}

/* A read the cursor drops: its figures count when it is complete (invariant 7). */
static void drop_read(rl_cursor *c, rl_future *f) {
    if (f && rl_future_is_ready(f)) take_read(c, f, NO_DEPTH, 1);
    rl_future_free(f);
}

/* Wait for the read f issued at depth d0 and take its figures. Returns its error. */
static int wait_read(rl_cursor *c, rl_future *f, uint64_t d0) {
    int was_ready = rl_future_is_ready(f);
    int rc = rl_future_wait(f);
    take_read(c, f, d0, was_ready);
    return rc;
}

static int read_flags(const rl_cursor *c) {
    return (c->o.reverse ? RL_REVERSE : 0) | (c->o.snapshot ? RL_SNAPSHOT : 0);
}

/* Rows the next index read may ask for (0: unlimited), invariant 5. */
static int read_limit(const rl_cursor *c) {
    int lim = 0;
    if (c->o.limit > 0) lim = (int)(c->o.limit - c->rows);
    if (lim < 1 && c->o.limit > 0) lim = 1;
    if (c->o.index_batch > 0 && (lim == 0 || c->o.index_batch < lim)) lim = c->o.index_batch;
    if (c->page_on) { /* ADAPTIVE: no read beyond the page (page_left() > 0 when reading) */
        int64_t left = c->page_quota - c->page_recv;
        if (left < 1) left = 1;
        if (lim == 0 || left < lim) lim = (int)left;
    }
    return lim;
}

/* The byte target of the fixed method's EXACT and WANT_ALL mapped pages (invariant 8). */
static int page_bytes(const rl_cursor *c) { return c->networked ? MAPPED_PAGE_BYTES : AD_READ_BYTES; }

/* The streaming mode and row limit of the next mapped page (remote fetch), invariant 8:
 *   - index_batch, a byte limit or a time limit: ITERATOR (FoundationDB's default; pages start
 *     small and grow x1.5, because where the query stops is not known from the entry count);
 *   - a return limit or a scan limit: EXACT with the entries still allowed (the smaller of
 *     read_limit and the scan limit's remainder), so 1,000 rows with a limit of 1,000 are one
 *     page (the server still ends a page at its byte budgets: the rest is the next page, EXACT
 *     again with what is left);
 *   - neither (a full scan of the bounds): WANT_ALL.
 * EXACT and WANT_ALL pages carry a byte target, page_bytes (otherwise a backend would gather the
 * whole range into one result: the cluster client continues past the servers' cut-offs until the
 * limits are met).
 * `ahead` entries already received are not consumed yet (the page read ahead: invariant 8); a
 * return value < 0 means the limits leave nothing to ask for beyond them.
 * [out] out_lim: the row limit to pass (0: none). */
static int mapped_mode(const rl_cursor *c, int ahead, int *out_lim) {
    int lim = read_limit(c);
    *out_lim = lim;
    if (c->o.index_batch > 0 || c->o.byte_limit > 0 || c->o.time_limit_ms > 0)
        return ahead ? -1 : RL_STREAMING_ITERATOR;
    if (c->o.limit > 0 && ahead) {
        int64_t left = c->o.limit - c->rows - ahead;
        if (left < 1) return -1;
        lim = (int)left;
    }
    if (c->o.scan_limit > 0) {
        int64_t left = c->o.scan_limit - c->consumed - ahead;
        if (left < 1 && ahead) return -1;
        if (left < 1) left = 1;
        if (lim == 0 || left < lim) lim = (int)left;
    }
    *out_lim = lim;
    return lim > 0 ? RL_STREAMING_EXACT : RL_STREAMING_WANT_ALL;
}

/* The RL_MAPPED_* flag of the cursor's secondary strategy (0: the database's). */
/* RL_MAPPED_OMIT_INDEX when the cursor rebuilds omitted entries (invariant 9). */
static int omit_flags(const rl_cursor *c) { return c->omit ? RL_MAPPED_OMIT_INDEX : 0; }

/* RL_MAPPED_DEFER_REMOTE for a mapped page of at most lim entries (0: no limit) on a networked
 * database when the index's records are large and the page's are many (invariant 12): their
 * mean size so far in this cursor, else the one learned from the index's earlier cursors
 * (ad_scan.rec_bytes), at least DEFER_RECORD_BYTES, and lim of them at least DEFER_PAGE_BYTES. */
static int defer_flags(const rl_cursor *c, int lim) {
    if (!c->networked) return 0;
    double mean = c->rec_n ? (double)c->rec_bytes / (double)c->rec_n : c->ad_rec_bytes;
    if (mean < DEFER_RECORD_BYTES || (lim > 0 && (double)lim * mean < DEFER_PAGE_BYTES)) return 0;
    return RL_MAPPED_DEFER_REMOTE;
}

static int strategy_flags(const rl_cursor *c) {
    return c->o.secondary_strategy == RL_SECONDARY_GROUPED      ? RL_MAPPED_GROUPED
           : c->o.secondary_strategy == RL_SECONDARY_INDIVIDUAL ? RL_MAPPED_INDIVIDUAL
                                                                : 0;
}

/* The streaming mode of index and mapped reads: ITERATOR (small first reads, growing), except in
 * an ADAPTIVE page on a networked database, whose size is known: WANT_ALL with the page's limit
 * (read_limit), so a page is one read (one round trip) unless the servers' reply cap cuts it —
 * what the cost model assumes. Embedded, SCAN_AND_FETCH pages keep ITERATOR, their iteration
 * continuing across pages (page_begin), as the fixed method reads; remote pages are EXACT with
 * the page's entries (mapped_mode) in reads of at most AD_READ_BYTES: one read per 1,000 small
 * rows, as remote fetch makes, where ITERATOR took 7-8 and 14 more allocations; and no 8 MiB
 * result arenas for split records (the fixed method's MAPPED_PAGE_BYTES: above malloc's mmap
 * threshold, fresh pages faulted in every read; an embedded remote page of 1,000 split rows
 * took 2.3x SCAN_AND_FETCH's time with them, about the same with 1 MiB). */
static rl_streaming_mode stream_mode(const rl_cursor *c) {
    return c->page_on && c->ad->networked ? RL_STREAMING_WANT_ALL : RL_STREAMING_ITERATOR;
}

/* The byte target of those WANT_ALL reads: AD_READ_BYTES (replies of several MB cost more than
 * proportionally: 8 MB mapped replies of split records took 3x the time of the same bytes in
 * 1 MB ones on a delayed link); 0 (the mode's) otherwise. */
static int stream_bytes(const rl_cursor *c) { return c->page_on && c->ad->networked ? AD_READ_BYTES : 0; }

/* The byte target of an ADAPTIVE page's mapped reads on a networked database: the fixed method's
 * MAPPED_PAGE_BYTES. Mapped replies stream (docs/design.md §8.5), so a large one no longer costs
 * more than its bytes, and 1 MiB reads made 1,000 split records 100 sequential round trips. */
static int ad_mapped_bytes(const rl_cursor *c) { return c->ad->networked ? MAPPED_PAGE_BYTES : AD_READ_BYTES; }

/* ADAPTIVE: 1 when the page's reads received all its entries (its sources read no more). */
static int page_done_reading(const rl_cursor *c) { return c->page_on && c->page_recv >= c->page_quota; }

/* The next top-level element of it: its raw bytes in *raw / *raw_len. RL_OK, RL_E_NOT_FOUND at
 * the end, or a decoding error. Integers of up to 8 magnitude bytes (codes 0x0c..0x1c, what
 * index entries mostly hold) are delimited here with exactly rl__tuple_iter_next's checks
 * (enough bytes; no leading zero magnitude byte, 0xff for negatives), without decoding the
 * value; every other element goes to rl__tuple_iter_next. Tested by query_5_*. */
static int next_raw(rl__tuple_iter *it, const uint8_t **raw, size_t *raw_len) {
    const uint8_t *p = it->p;
    if (p < it->end && p[0] >= 0x0c && p[0] <= 0x1c) {
        int neg = p[0] < 0x14;
        size_t n = neg ? (size_t)(0x14 - p[0]) : (size_t)(p[0] - 0x14);
        if ((size_t)(it->end - p) - 1 < n) return RL_E_TUPLE_TRUNCATED;
        if (n > 0 && p[1] == (neg ? 0xff : 0x00)) return RL_E_TUPLE_MALFORMED;
        *raw = p;
        *raw_len = n + 1;
        it->p = p + n + 1;
        return RL_OK;
    }
    rl__tuple_elem e;
    int rc = rl__tuple_iter_next(it, &e);
    if (rc == RL_OK) *raw = e.raw, *raw_len = e.raw_len;
    return rc;
}

/* Split the index entry key[0..len) into the columns of (values..., primary key...): raw[i] /
 * raw_len[i] for each of its c->n_entry elements. RL_OK or RL_E_CORRUPT_DATA (with the detail
 * message) when it is not such an entry of this index. */
static int split_entry(rl_cursor *c, const uint8_t *key, size_t len, const uint8_t **raw, size_t *raw_len) {
    rl__tuple_iter it;
    const uint8_t *r;
    size_t rl;
    int n = 0, rc;
    if (len < c->ixprefix.len || memcmp(key, c->ixprefix.data, c->ixprefix.len) != 0) goto bad;
    rl__tuple_iter_init(&it, key + c->ixprefix.len, len - c->ixprefix.len);
    while ((rc = next_raw(&it, &r, &rl)) == RL_OK) {
        if (n == c->n_entry) goto bad;
        raw[n] = r, raw_len[n] = rl;
        n++;
    }
    if (rc != RL_E_NOT_FOUND || n != c->n_entry) goto bad;
    return RL_OK;
bad:;
    rl_buf k;
    rl__buf_init(&k);
    print_key(key, len, &k);
    set_msg(c, "index entry %s of %s is not (values..., primary key...)", k.data, c->ix.name);
    rl__buf_release(&k);
    return RL_CORRUPT(RL_E_CORRUPT_DATA);
}

/* Extract the primary key of the index entry key[0..len) into c->cur_pk. */
static int entry_pk(rl_cursor *c, const uint8_t *key, size_t len) {
    const uint8_t *raw[MAX_ENTRY_COLS];
    size_t raw_len[MAX_ENTRY_COLS];
    int rc = split_entry(c, key, len, raw, raw_len);
    if (rc) return rc;
    rl__buf_reset(&c->cur_pk);
    for (int i = 0; i < c->n_pk; i++) rl__buf_append(&c->cur_pk, raw[c->pk_pos[i]], raw_len[c->pk_pos[i]]);
    return rl__buf_error(&c->cur_pk);
}

/* drain_range's context: the cursor, its list, and whether page 0's figures were taken. */
typedef struct {
    rl_cursor *c;
    kvlist *l;
    int first_taken;
} drain_ctx;

static int drain_wait(void *ud, rl_future *f, int page) {
    drain_ctx *d = ud;
    if (page == 0 && d->first_taken) return rl_future_wait(f);
    if (page > 0) d->c->k.reads_range++;
    return wait_read(d->c, f, d->c->depth); /* issued at the current depth (nothing ran since) */
}

static int drain_kv(void *ud, const rl_keyvalue *kv) {
    drain_ctx *d = ud;
    d->c->k.kv_bytes_received += kv->key_len + kv->value_len;
    return kvl_add(d->l, kv);
}

/* Read the rest of a range whose first page was the future f (taken, freed here): every
 * key-value of [begin, end) goes to l. begin is updated as pages are read (rl__range_drain).
 * first_taken: the caller already took f's figures (wait_read); otherwise f was issued at the
 * current depth. */
static int drain_range(rl_cursor *c, rl_future *f, int first_taken, rl_buf *begin, rl_buf *end, kvlist *l) {
    drain_ctx d = {c, l, first_taken};
    return rl__range_drain(c->txn, begin, end, 0, 1, f, drain_wait, drain_kv, &d);
}

/* ============================================================================================
 * Sources
 * ========================================================================================== */

static void src_release(rl_cursor *c) {
    for (int i = c->qhead; i < c->qn; i++) drop_read(c, c->q[i].f);
    c->qn = c->qhead = c->q_issued = 0;
    rl__buf_reset(&c->qbytes);
    drop_read(c, c->pf);
    c->pf = NULL;
    rl_future_free(c->hold);
    c->hold = NULL;
    c->rkvs = NULL;
    c->rn = 0;
    rl_future_free(c->mf);
    c->mf = NULL;
    drop_read(c, c->mf_next);
    c->mf_next = NULL;
    c->ments = NULL;
    c->mn = c->mi = c->mcounted = c->mlook = 0;
    c->mpart = 0;
    c->src = SRC_NONE;
}

/* Start a source of kind k at the position of invariant 1 (and 3). */
static int src_start(rl_cursor *c, src_kind k) {
    src_release(c);
    c->src = k;
    c->iteration = 1;
    c->exhausted = c->is_empty;
    rl__buf_reset(&c->sb);
    rl__buf_append(&c->sb, c->range_b.data, c->range_b.len);
    c->sb_oreq = 0, c->sb_off = 1;
    rl__buf_reset(&c->se);
    rl__buf_append(&c->se, c->range_e.data, c->range_e.len);
    c->se_oreq = 0, c->se_off = 1;
    if (c->has_last) {
        rl_buf *b = c->o.reverse ? &c->se : &c->sb;
        rl__buf_reset(b);
        rl__buf_append(b, c->last_key.data, c->last_key.len);
        if (c->o.reverse) c->se_oreq = 0, c->se_off = 1; /* end: firstGreaterOrEqual(last) */
        else c->sb_oreq = 1, c->sb_off = 1;              /* begin: firstGreaterThan(last) */
    } else if (c->skip > 0) {
        if (c->o.reverse) c->se_off -= c->skip;
        else c->sb_off += c->skip;
    }
    if (rl__buf_error(&c->sb) || rl__buf_error(&c->se)) return RL_E_OUT_OF_MEMORY;
    return RL_OK;
}

/* After a read that returned entries up to last: continue strictly after it (invariant 3). */
static int src_advance(rl_cursor *c, const uint8_t *last, size_t last_len, int more) {
    rl_buf *b = c->o.reverse ? &c->se : &c->sb;
    rl__buf_reset(b);
    rl__buf_append(b, last, last_len);
    if (c->o.reverse) c->se_oreq = 0, c->se_off = 1;
    else c->sb_oreq = 1, c->sb_off = 1;
    if (!more) c->exhausted = 1;
    return rl__buf_error(b);
}

static rl_key_selector sel_b(const rl_cursor *c) {
    return (rl_key_selector){c->sb.data, (uint32_t)c->sb.len, c->sb_oreq, c->sb_off};
}

static rl_key_selector sel_e(const rl_cursor *c) {
    return (rl_key_selector){c->se.data, (uint32_t)c->se.len, c->se_oreq, c->se_off};
}

/* The record loads a cursor keeps in flight: SCAN_AND_FETCH's, and remote fetch's completions. */
static int load_depth(const rl_cursor *c) { return c->o.pipeline_depth > 0 ? c->o.pipeline_depth : DEFAULT_PIPELINE; }

/* Issue the load of one record: a range read of (1, pk...) = [R+pk+0x00, R+pk+0xff), WANT_ALL,
 * serializable (Java's loadWithSplit). The entry's primary key is located in qbytes: when its
 * columns are adjacent and in order in the entry (the usual (values..., pk...)), it is the slice
 * of the queued key itself; otherwise it is assembled after the queued keys. The bounds are built
 * in c->lb and c->le (rl__store_record_range), which keep their memory from load to load. */
static int issue_load(rl_cursor *c, qent *e) {
    const uint8_t *raw[MAX_ENTRY_COLS];
    size_t raw_len[MAX_ENTRY_COLS];
    int rc = split_entry(c, c->qbytes.data + e->key_off, e->key_len, raw, raw_len);
    if (rc) return rc;
    int adjacent = 1;
    size_t pk_len = 0;
    for (int i = 0; i < c->n_pk; i++) {
        if (i > 0 && raw[c->pk_pos[i]] != raw[c->pk_pos[i - 1]] + raw_len[c->pk_pos[i - 1]]) adjacent = 0;
        pk_len += raw_len[c->pk_pos[i]];
    }
    if (adjacent && c->n_pk > 0) {
        e->pk_off = (size_t)(raw[c->pk_pos[0]] - c->qbytes.data);
    } else {
        e->pk_off = c->qbytes.len;
        for (int i = 0; i < c->n_pk; i++) rl__buf_append(&c->qbytes, raw[c->pk_pos[i]], raw_len[c->pk_pos[i]]);
        if ((rc = rl__buf_error(&c->qbytes))) return rc;
    }
    e->pk_len = pk_len;
    const uint8_t *pk = c->qbytes.data + e->pk_off;
    rl_buf *b = &c->lb, *en = &c->le;
    rl__store_record_range(c->s, pk, pk_len, b, en);
    if ((rc = rl__buf_error(b)) || (rc = rl__buf_error(en))) return rc;
    c->k.reads_range++;
    c->k.record_loads++;
    e->d0 = c->depth < 0x7fffffffu ? (unsigned)c->depth : 0x7fffffffu;
    e->f = rl_txn_get_range(c->txn, RL_FIRST_GREATER_OR_EQUAL(b->data, b->len),
                            RL_FIRST_GREATER_OR_EQUAL(en->data, en->len), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
    return RL_OK;
}

/* Request the next index page (one at a time: its begin is the last key of the one before),
 * asking for at most the rows the return limit still allows beyond the entries already queued
 * (invariant 5). Returns 0 when the limit leaves nothing to ask for while entries are queued. */
static int request_page(rl_cursor *c) {
    if (page_done_reading(c)) return 0;
    int lim = read_limit(c), queued = c->qn - c->qhead;
    if (c->o.limit > 0 && queued > 0) {
        int64_t left = c->o.limit - c->rows - queued;
        if (left <= 0) return 0;
        if (left < lim) lim = (int)left;
    }
    c->k.reads_range++;
    c->pf_d0 = c->depth;
    c->pf = rl_txn_get_range(c->txn, sel_b(c), sel_e(c), lim, stream_bytes(c), stream_mode(c), c->iteration++,
                             read_flags(c));
    return 1;
}

/* Append the entries of the page c->pf (waiting for it) to the queue, compacting the queue
 * first so qbytes holds only entries not yet taken. */
static int take_page(rl_cursor *c) {
    int rc, n, more;
    const rl_keyvalue *kvs;
    rl_future *f = c->pf;
    c->pf = NULL;
    if ((rc = wait_read(c, f, c->pf_d0)) || (rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more))) goto done;
    /* Compact: the entries left move to the front, their bytes into qspare (then swapped). */
    int left = c->qn - c->qhead;
    rl__buf_reset(&c->qspare);
    for (int i = 0; i < left; i++) {
        qent e = c->q[c->qhead + i];
        size_t key_off = c->qspare.len;
        rl__buf_append(&c->qspare, c->qbytes.data + e.key_off, e.key_len);
        if (e.issued && !e.err) {
            if (e.pk_off >= e.key_off && e.pk_off + e.pk_len <= e.key_off + e.key_len) {
                e.pk_off = key_off + (e.pk_off - e.key_off);
            } else {
                size_t pk_off = c->qspare.len;
                rl__buf_append(&c->qspare, c->qbytes.data + e.pk_off, e.pk_len);
                e.pk_off = pk_off;
            }
        }
        e.key_off = key_off;
        c->q[i] = e;
    }
    rl_buf tmp = c->qbytes;
    c->qbytes = c->qspare;
    c->qspare = tmp;
    c->qhead = 0;
    c->qn = left;
    if ((rc = rl__buf_error(&c->qbytes))) goto done;
    if (left + n > c->qcap) {
        int cap = left + n > 2 * c->qcap ? left + n : 2 * c->qcap;
        qent *nq = rl__realloc(c->q, (size_t)cap * sizeof *nq);
        if (!nq) {
            rc = RL_E_OUT_OF_MEMORY;
            goto done;
        }
        c->q = nq;
        c->qcap = cap;
    }
    c->page_recv += n;
    for (int i = 0; i < n; i++) {
        c->k.index_entries_read++;
        c->k.kv_bytes_received += kvs[i].key_len + kvs[i].value_len;
        qent *q = &c->q[c->qn];
        memset(q, 0, sizeof *q);
        q->key_off = c->qbytes.len;
        q->key_len = kvs[i].key_len;
        rl__buf_append(&c->qbytes, kvs[i].key, kvs[i].key_len);
        c->qn++;
    }
    if ((rc = rl__buf_error(&c->qbytes))) goto done;
    if (n == 0) {
        c->exhausted = 1;
        goto done;
    }
    rc = src_advance(c, kvs[n - 1].key, kvs[n - 1].key_len, more);
done:
    rl_future_free(f);
    return rc;
}

/* SCAN_AND_FETCH: the next entry with its record's key-values in c->kvs. *out_has 0: none left.
 *
 * The pipeline runs across index pages: the next page is requested as soon as the queue holds
 * no more entries than the pipeline is deep, and appended (waiting for it if need be) before
 * the loads in flight would drop below the depth, so pipeline_depth loads stay outstanding
 * until the scan's last entries. An entry whose load cannot be issued (not an entry of this
 * index) keeps its error until it reaches the head of the queue, so the rows before it are
 * returned whatever the depth. */
static int scan_next(rl_cursor *c, int *out_has) {
    int rc = RL_OK, n, more;
    const rl_keyvalue *kvs;
    int depth = load_depth(c);
    *out_has = 0;
    for (;;) {
        /* Keep up to pipeline_depth loads outstanding, in index order. */
        for (int i = c->qhead + c->q_issued; i < c->qn && c->q_issued < depth; i++) {
            qent *e = &c->q[i];
            e->issued = 1;
            e->err = issue_load(c, e);
            c->q_issued++;
        }
        int queued = c->qn - c->qhead;
        if (!c->pf && !c->exhausted && queued <= depth) (void)request_page(c);
        if (!c->pf) break;
        /* Take the page when the loads in flight are fewer than the depth (waiting for it if
         * need be: the loads already issued run meanwhile), or when it is already here. */
        if (c->q_issued == depth && queued > 0 && !rl_future_is_ready(c->pf)) break;
        if ((rc = take_page(c))) return rc;
    }
    if (c->qhead == c->qn) return RL_OK; /* exhausted */
    if ((uint64_t)c->q_issued > c->k.max_loads_in_flight) c->k.max_loads_in_flight = (uint64_t)c->q_issued;
    if (c->q_issued < depth && !(c->exhausted && !c->pf && c->q_issued == c->qn - c->qhead)) c->k.pipeline_stalls++;
    qent *q = &c->q[c->qhead++];
    c->q_issued--;
    if (q->err) { /* its turn: say why now (the message of an earlier row was overwritten) */
        const uint8_t *raw[MAX_ENTRY_COLS];
        size_t raw_len[MAX_ENTRY_COLS];
        int src = split_entry(c, c->qbytes.data + q->key_off, q->key_len, raw, raw_len);
        return src ? src : q->err;
    }
    rl_future *lf = q->f;
    q->f = NULL;
    rl__buf_reset(&c->cur_key);
    rl__buf_append(&c->cur_key, c->qbytes.data + q->key_off, q->key_len);
    rl__buf_reset(&c->cur_pk);
    rl__buf_append(&c->cur_pk, c->qbytes.data + q->pk_off, q->pk_len);
    if ((rc = rl__buf_error(&c->cur_key)) || (rc = rl__buf_error(&c->cur_pk))) {
        rl_future_free(lf);
        return rc;
    }
    /* A load whose first page is the whole record range is used in place (held until the
     * record is decoded); a longer one is copied page by page. */
    if ((rc = wait_read(c, lf, q->d0)) || (rc = rl_future_get_keyvalue_array(lf, &kvs, &n, &more))) {
        rl_future_free(lf);
        return rc;
    }
    if (!more || n == 0) {
        for (int i = 0; i < n; i++) c->k.kv_bytes_received += kvs[i].key_len + kvs[i].value_len;
        c->hold = lf;
        c->rkvs = kvs;
        c->rn = n;
        *out_has = 1;
        return RL_OK;
    }
    /* Rebuild the range bounds for paging (the load's begin is advanced by drain_range). */
    rl__store_record_range(c->s, c->cur_pk.data, c->cur_pk.len, &c->tb, &c->te);
    if ((rc = rl__buf_error(&c->tb)) || (rc = rl__buf_error(&c->te))) {
        rl_future_free(lf);
        return rc;
    }
    kvl_reset(&c->kvs);
    if ((rc = drain_range(c, lf, 1, &c->tb, &c->te, &c->kvs))) return rc;
    kvl_view(&c->kvs);
    c->rkvs = c->kvs.view;
    c->rn = c->kvs.n;
    *out_has = 1;
    return RL_OK;
}

/* Count the entries of the current mapped page received so far, ents[0..n) (the complete page, or
 * those handed up before it completed: invariant 10), that were not counted yet (c->mcounted). */
static void count_entries(rl_cursor *c, const rl_mapped_keyvalue *ents, int n) {
    for (; c->mcounted < n; c->mcounted++) {
        const rl_mapped_keyvalue *m = &ents[c->mcounted];
        c->k.index_entries_read++;
        c->k.kv_bytes_received += m->index.key_len + m->index.value_len;
        c->k.index_bytes_omitted += m->index_omitted_len;
        for (int j = 0; j < m->n_kvs; j++) c->k.kv_bytes_received += m->kvs[j].key_len + m->kvs[j].value_len;
        if (m->more && m->n_kvs == 0) continue; /* not read by the server (deferred): completed here */
        if (m->served_locally > 0) c->k.secondary_local++, c->cur_local++;
        else if (m->served_locally == 0) c->k.secondary_remote++, c->cur_remote++;
        else c->k.secondary_unknown++; /* -1: the backend cannot tell (fdb:) */
    }
}

/* 1 if mapped entries a and b are the same entry (its index key, or its record range when the
 * index key was omitted). */
static int same_entry(const rl_mapped_keyvalue *a, const rl_mapped_keyvalue *b) {
    if (a->index_omitted != b->index_omitted) return 0;
    if (!a->index_omitted) return !rl__bytes_cmp(a->index.key, a->index.key_len, b->index.key, b->index.key_len);
    return !rl__bytes_cmp(a->begin, a->begin_len, b->begin, b->begin_len);
}

/* The mapped page c->mf is complete: wait for it, take its entries and figures, move the source
 * past it and ask for the next page ahead (invariant 8). c->mi entries may have been consumed
 * already from its early entries (invariant 10): the final array must begin with them, checked
 * on the last one (was, NULL when none). Returns with c->mn 0 when the index has no more. */
static int page_complete(rl_cursor *c, const rl_mapped_keyvalue *was) {
    int more, was_ready = rl_future_is_ready(c->mf) && !c->mblocked;
    int rc = rl_future_wait(c->mf);
    take_read(c, c->mf, c->mf_d0, was_ready);
    if (rc || (rc = rl_future_get_mapped_keyvalue_array(c->mf, &c->ments, &c->mn, &more))) return rc;
    if (c->mi > c->mn || (was && !same_entry(was, &c->ments[c->mi - 1]))) {
        set_msg(c, "a mapped page's entries differ from the %d it handed up before it completed", c->mi);
        return RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
    c->page_recv += c->mn;
    count_entries(c, c->ments, c->mn);
    if (c->mn == 0) {
        c->exhausted = 1;
        return RL_OK;
    }
    const rl_keyvalue *last = &c->ments[c->mn - 1].index;
    if ((rc = src_advance(c, last->key, last->key_len, more))) return rc;
    /* Read ahead (invariant 8): the next page's start is known now, so ask for it while this
     * one is consumed — only for EXACT and WANT_ALL pages, whose rows the query will read. */
    /* Ahead: the page's entries not consumed yet (c->mi of them went up early: invariant 10, and
     * are in c->rows and c->consumed already). */
    int lim, mode = c->exhausted || c->page_on ? -1 : mapped_mode(c, c->mn - c->mi, &lim); /* not in ADAPTIVE pages */
    if (mode == RL_STREAMING_EXACT || mode == RL_STREAMING_WANT_ALL) {
        c->k.reads_mapped_range++;
        c->k.mapped_range_requests++;
        c->mf_next_d0 = c->depth;
        c->mf_next = rl_txn_get_mapped_range(c->txn, sel_b(c), sel_e(c), c->mapper.data, c->mapper.len, lim,
                                             page_bytes(c), (rl_streaming_mode)mode, c->iteration++,
                                             read_flags(c) | strategy_flags(c) | omit_flags(c) | defer_flags(c, lim));
    }
    return RL_OK;
}

/* The bounds of what mapped entry m's secondary still lacks: [after its last row, end), or its
 * whole range when it came with none. */
static int rest_bounds(const rl_mapped_keyvalue *m, rl_buf *b, rl_buf *en) {
    rl__buf_reset(b);
    if (m->n_kvs > 0) {
        rl__buf_append(b, m->kvs[m->n_kvs - 1].key, m->kvs[m->n_kvs - 1].key_len);
        rl__buf_append_byte(b, 0x00);
    } else {
        rl__buf_append(b, m->begin, m->begin_len);
    }
    rl__buf_reset(en);
    rl__buf_append(en, m->end, m->end_len);
    int rc = rl__buf_error(b);
    return rc ? rc : rl__buf_error(en);
}

/* Remote fetch: issue the read of the rest of the page's entry idx (m, cut off or deferred:
 * invariant 12) — [after its last row, end), or its whole range when it came with none —, queued
 * in c->q with key_off = idx. */
static int issue_completion(rl_cursor *c, const rl_mapped_keyvalue *m, int idx) {
    if (c->qn == c->qcap && c->qhead > 0) { /* compact: the queue holds the loads in flight only */
        memmove(c->q, c->q + c->qhead, (size_t)(c->qn - c->qhead) * sizeof *c->q);
        c->qn -= c->qhead;
        c->qhead = 0;
    }
    if (c->qn == c->qcap) {
        int cap = c->qcap ? 2 * c->qcap : 16;
        qent *nq = rl__realloc(c->q, (size_t)cap * sizeof *nq);
        if (!nq) return RL_E_OUT_OF_MEMORY;
        c->q = nq;
        c->qcap = cap;
    }
    rl_buf *b = &c->lb, *en = &c->le;
    int rc = rest_bounds(m, b, en);
    if (rc) return rc;
    c->k.secondary_completions++;
    c->k.reads_range++;
    c->k.record_loads += m->n_kvs == 0; /* deferred: the whole record */
    qent *e = &c->q[c->qn++];
    memset(e, 0, sizeof *e);
    e->key_off = (size_t)idx;
    e->issued = 1;
    e->d0 = c->depth < 0x7fffffffu ? (unsigned)c->depth : 0x7fffffffu;
    e->f = rl_txn_get_range(c->txn, RL_FIRST_GREATER_OR_EQUAL(b->data, b->len),
                            RL_FIRST_GREATER_OR_EQUAL(en->data, en->len), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
    return RL_OK;
}

/* Remote fetch: issue the completions of the page's entries [c->mlook, avail) that came with
 * `more`, while fewer than load_depth are in flight (invariant 12). */
static int complete_ahead(rl_cursor *c, int avail) {
    if (c->mlook < c->mi - 1) c->mlook = c->mi - 1; /* the entries before the current one are consumed */
    for (; c->mlook < avail && c->qn - c->qhead < load_depth(c); c->mlook++) {
        const rl_mapped_keyvalue *m = &c->ments[c->mlook];
        int rc = m->more ? issue_completion(c, m, c->mlook) : RL_OK;
        if (rc) return rc;
    }
    return RL_OK;
}

/* Remote fetch: the record of entry m (the page's c->mi - 1), which came with `more`, completed
 * by its read in c->q (issued now if the look-ahead did not reach it): in place when the entry
 * had no rows and the read took the whole range in one page, else copied into c->kvs. */
static int take_completion(rl_cursor *c, const rl_mapped_keyvalue *m) {
    int idx = c->mi - 1, rc, n, more;
    const rl_keyvalue *kvs;
    if ((rc = complete_ahead(c, idx + 1))) return rc;
    if (c->qhead == c->qn || c->q[c->qhead].key_off != (size_t)idx) {
        set_msg(c, "the completion of mapped entry %d is not the next one in flight", idx);
        return RL_E_INTERNAL_ERROR;
    }
    qent *q = &c->q[c->qhead++];
    rl_future *f = q->f;
    q->f = NULL;
    if (c->qhead == c->qn) c->qhead = c->qn = 0;
    if ((rc = wait_read(c, f, q->d0)) || (rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more))) {
        rl_future_free(f);
        return rc;
    }
    if (m->n_kvs == 0 && (!more || n == 0)) {
        for (int i = 0; i < n; i++) c->k.kv_bytes_received += kvs[i].key_len + kvs[i].value_len;
        c->hold = f;
        c->rkvs = kvs;
        c->rn = n;
        return RL_OK;
    }
    kvl_reset(&c->kvs);
    for (int j = 0; j < m->n_kvs; j++)
        if ((rc = kvl_add(&c->kvs, &m->kvs[j]))) {
            rl_future_free(f);
            return rc;
        }
    rl_buf *b = &c->tb, *en = &c->te;
    if ((rc = rest_bounds(m, b, en))) {
        rl_future_free(f);
        return rc;
    }
    if ((rc = drain_range(c, f, 1, b, en, &c->kvs))) return rc;
    kvl_view(&c->kvs);
    c->rkvs = c->kvs.view;
    c->rn = c->kvs.n;
    return RL_OK;
}

static int build_mapper(rl_cursor *c);

/* USE_REMOTE_FETCH: the next entry with its secondary result (completed) in c->kvs. */
static int remote_next(rl_cursor *c, int *out_has) {
    int rc = RL_OK;
    *out_has = 0;
    if (c->mapper_rc) return c->mapper_rc;
    if (!c->mapper.len && (rc = build_mapper(c))) return rc;
    for (;;) {
        if (c->mf && c->mi < c->mn) break;
        if (c->mf && c->mpart) { /* invariant 10: the page's entries final so far, all but its last */
            const rl_mapped_keyvalue *pe;
            int pn;
            /* A page already complete (every embedded one) goes straight on: no lock taken. */
            if (!rl_future_is_ready(c->mf) && !rl__txn_wrote(c->txn) &&
                !rl__future_mapped_wait(c->mf, c->mi + 1, &pe, &pn)) {
                count_entries(c, pe, pn);
                c->ments = pe;
                c->mn = pn - 1;
                break;
            }
            const rl_mapped_keyvalue *was = c->mi > 0 ? &c->ments[c->mi - 1] : NULL;
            c->mpart = 0;
            if ((rc = page_complete(c, was))) return rc;
            if (c->mn == 0) return RL_OK;
            continue;
        }
        rl_future_free(c->mf);
        c->mf = NULL;
        c->ments = NULL;
        c->mn = c->mi = c->mcounted = c->mlook = 0;
        for (int i = c->qhead; i < c->qn; i++) drop_read(c, c->q[i].f); /* none: all were taken */
        c->qhead = c->qn = 0;
        if (c->mf_next) { /* asked for when the page before arrived */
            c->mf = c->mf_next;
            c->mf_d0 = c->mf_next_d0;
            c->mf_next = NULL;
        } else {
            if (c->exhausted || page_done_reading(c)) return RL_OK;
            c->k.reads_mapped_range++;
            c->k.mapped_range_requests++;
            c->mf_d0 = c->depth;
            /* An ADAPTIVE page on a networked database reads exactly the page it decided on
             * (stream_mode); otherwise the page is sized by what the query will read (mapped_mode,
             * invariant 8; in an ADAPTIVE page read_limit stops at the page's entries), and an
             * embedded ADAPTIVE page's reads stop at AD_READ_BYTES, not MAPPED_PAGE_BYTES (see
             * stream_mode). */
            int lim, mode;
            long bytes;
            if (c->page_on && c->ad->networked) {
                lim = read_limit(c);
                mode = stream_mode(c);
                bytes = ad_mapped_bytes(c);
            } else {
                mode = mapped_mode(c, 0, &lim);
                bytes = mode == RL_STREAMING_ITERATOR ? 0 : c->page_on ? AD_READ_BYTES : page_bytes(c);
            }
            c->mf = rl_txn_get_mapped_range(c->txn, sel_b(c), sel_e(c), c->mapper.data, c->mapper.len, lim, bytes,
                                            (rl_streaming_mode)mode, c->iteration++,
                                            read_flags(c) | strategy_flags(c) | omit_flags(c) | defer_flags(c, lim));
        }
        /* Early entries (invariant 10) — also in an ADAPTIVE page on a networked database: the
         * page's time is the time its rows took to come through next(), early or not, which is
         * what remote fetch costs now that replies stream (its embedded pages complete at once). */
        c->mpart = !c->page_on || c->ad->networked;
        c->mblocked = c->mpart && !rl_future_is_ready(c->mf); /* `waits` counts the page once */
        if (!c->mpart) {
            if ((rc = page_complete(c, NULL))) return rc;
            if (c->mn == 0) return RL_OK;
        }
    }
    const rl_mapped_keyvalue *m = &c->ments[c->mi++];
    c->k.entries_early += c->mpart; /* invariant 10 */
    rl__buf_reset(&c->cur_key);
    if (m->index_omitted) {
        /* Invariant 9: the primary key from the record's range (the mapper's P), the index key
         * once the record is decoded (fetch_entry). */
        if (!c->omit || c->mi == 1 || (!c->mpart && c->mi == c->mn)) {
            set_msg(c, "a mapped read returned entry %d of %d without its index key", c->mi - 1, c->mn);
            return RL_CORRUPT(RL_E_CORRUPT_DATA);
        }
        if (m->begin_len < c->recprefix.len || memcmp(m->begin, c->recprefix.data, c->recprefix.len) != 0) {
            set_msg(c, "a mapped entry's record range is outside the store's records");
            return RL_CORRUPT(RL_E_CORRUPT_DATA);
        }
        c->cur_omitted = 1;
        rl__buf_reset(&c->cur_pk);
        rl__buf_append(&c->cur_pk, m->begin + c->recprefix.len, m->begin_len - c->recprefix.len);
        if ((rc = rl__buf_error(&c->cur_pk))) return rc;
    } else {
        rl__buf_append(&c->cur_key, m->index.key, m->index.key_len);
        if ((rc = rl__buf_error(&c->cur_key)) || (rc = entry_pk(c, c->cur_key.data, c->cur_key.len))) return rc;
    }
    /* Keep the completions of the entries ahead in flight (invariant 12). */
    if ((rc = complete_ahead(c, c->mn))) return rc;
    if (!m->more) {
        /* The whole secondary result is here: use it in place (it lives as long as c->mf). */
        c->rkvs = m->kvs;
        c->rn = m->n_kvs;
        *out_has = 1;
        return RL_OK;
    }
    /* The server cut this record's range off, or left it to us: read the rest ourselves. */
    if ((rc = take_completion(c, m))) return rc;
    *out_has = 1;
    return RL_OK;
}

/* ============================================================================================
 * ADAPTIVE pages
 * ========================================================================================== */

/* Errors of a remote page that a SCAN_AND_FETCH page would not meet (the mapper's codes, remote
 * fetch refused): ADAPTIVE then runs SCAN_AND_FETCH for the rest of the cursor. */
static int remote_specific(int rc) { return (rc >= 2030 && rc <= 2043) || rc == RL_E_UNSUPPORTED_OPERATION; }

/* The model's inputs for a page of rows entries, from what the cursor, the database's state and
 * the client's locality figures say (docs/design.md §7, ADAPTIVE). Called under ad_lock(c->ad). */
static void page_inputs(rl_cursor *c, int64_t rows, rl__adaptive_inputs *in) {
    rl_db *db = rl__txn_db(c->txn);
    rl__kv_locality li, lr;
    if (!c->ad->networked) { /* a local backend's figures are all zero (kv_stats.h) */
        memset(&li, 0, sizeof li);
        lr = li;
    } else {
        const rl_buf *ik = c->has_last ? &c->last_key : &c->range_b;
        rl__db_locality(db, ik->data, ik->len, &li);
        /* The records' servers: those of the last record read, else of the records' first key. */
        rl__buf_reset(&c->tb);
        rl__buf_append(&c->tb, c->recprefix.data, c->recprefix.len);
        rl__buf_append(&c->tb, c->cur_pk.data, c->cur_pk.len);
        if (rl__buf_error(&c->tb)) memset(&lr, 0, sizeof lr);
        else rl__db_locality(db, c->tb.data, c->tb.len, &lr);
    }
    ad_scan *sc = ad_scan_of(c->ad, c->ad_key);
    memset(in, 0, sizeof *in);
    in->rows = (double)rows;
    if (c->consumed > 0 && c->bytes_scanned > 0) in->bytes_per_row = (double)c->bytes_scanned / (double)c->consumed;
    else in->bytes_per_row = sc->bytes_per_row > 0 ? sc->bytes_per_row : 200;
    in->kvs_per_record = sc->kvs_per_record >= 1 ? sc->kvs_per_record : 1;
    in->pipeline_depth = c->o.pipeline_depth > 0 ? c->o.pipeline_depth : DEFAULT_PIPELINE;
    in->index_page_rows = c->o.index_batch > 0 ? c->o.index_batch : (double)(rows > 0 ? rows : 1);
    in->mapped_page_bytes = ad_mapped_bytes(c); /* remote_next */
    if (c->o.index_batch > 0 && c->o.index_batch * in->bytes_per_row < in->mapped_page_bytes)
        in->mapped_page_bytes = c->o.index_batch * in->bytes_per_row;
    in->rtt_index_ns = li.rtt_ns;
    in->rtt_records_ns = lr.rtt_ns > 0 ? lr.rtt_ns : li.rtt_ns;
    in->rtt_s2s_ns = in->rtt_records_ns; /* the client cannot measure it: the same network */
    if (c->cur_local + c->cur_remote > 0) {
        in->frac_remote = (double)c->cur_remote / (double)(c->cur_local + c->cur_remote);
    } else if (sc->have_frac) {
        in->frac_remote = sc->frac_remote;
    } else if (li.n_team > 0 && lr.n_team > 0) {
        /* The mapped read goes to one of the index shard's team: its records are local when
         * that server also holds the records' shard. */
        uint32_t away = 0;
        for (uint32_t i = 0; i < li.n_team; i++) {
            int in_r = 0;
            for (uint32_t j = 0; j < lr.n_team; j++) in_r |= li.team[i] == lr.team[j];
            away += !in_r;
        }
        in->frac_remote = (double)away / li.n_team;
    }
    /* The query's strategy, else the database's, else the servers' default (grouped since
     * docs/design.md §8.4). */
    int st = c->o.secondary_strategy == RL_SECONDARY_INDIVIDUAL ? 1
             : c->o.secondary_strategy == RL_SECONDARY_GROUPED  ? 2
                                                                : li.strategy;
    in->strategy = st == 1 ? RL__ADAPTIVE_INDIVIDUAL : RL__ADAPTIVE_GROUPED;
    in->s2s_batch = li.s2s_batch > 0 ? li.s2s_batch : 10;
}

/* Add the page's time from c->in_t0 to t (inside rl_cursor_next) to c->page_ns, less its overlap
 * with the transaction's wait for its read version (kv_stats.h rl__txn_rv_wait): the first page's
 * first read waits for it whatever the method, and on a cluster it is a round trip of its own —
 * as much as a short page's work, and as noisy. Measured by the transaction layer, not modelled;
 * once the version has arrived before a call's end no later call can overlap it, so the loads
 * stop (ad_rv_done; set at open for a local backend, whose version is known at once). */
static void page_add(rl_cursor *c, uint64_t t) {
    uint64_t span = t > c->in_t0 ? t - c->in_t0 : 0, kept = span;
    if (!c->ad_rv_done) {
        uint64_t asked, ready;
        rl__txn_rv_wait(c->txn, &asked, &ready);
        kept = rl__adaptive_less_wait(c->in_t0, t, asked, ready);
        if ((ready && ready <= t) || (!asked && c->consumed > 0)) c->ad_rv_done = 1;
    }
    c->page_ns += kept;
    c->page_wait_ns += span - kept;
    c->in_t0 = t;
}

/* A local backend's page timing (ad_sampled). Reading the clock at both ends of every
 * rl_cursor_next call, as page_add's callers do, cost two clock reads per row: 30-70 ns each on
 * this project's VMs, 10-20 % of a row of a 1,000-row page on embedded, where the row itself is
 * 0.5-0.6 µs (docs/benchmarks.md, "The clock and the exploration on embedded"). There a page's
 * time is its span, from after its decision to its end, less the caller's time between calls,
 * estimated from a sample of those gaps: the first gap of each page and then one every 1-32 calls
 * (xorshift32: no stride a caller's own period could alias with) are timed, and the page's gaps
 * count as many times their mean. The reads, the loads and the decoding of every row stay inside
 * the span whatever call they fall in; only the caller's time is estimated. A local backend has no
 * read-version wait to take out (ad_rv_done is set at open). */
static uint32_t gap_stride(rl_cursor *c) {
    uint32_t x = c->gap_rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c->gap_rng = x;
    return 1 + x % 32;
}

/* ad_sampled: the gap since the last call returned, now that the caller is back (t) or the page
 * ends outside a call: counted, and timed when it was sampled. */
static void gap_close(rl_cursor *c, uint64_t t) {
    c->gaps++;
    if (!c->gap_t) return;
    c->gap_ns += t > c->gap_t ? t - c->gap_t : 0;
    c->gap_n++;
    c->gap_t = 0;
}

/* ad_sampled: c->page_ns at t = the page's span less its estimated caller time. */
static void page_span(rl_cursor *c, uint64_t t) {
    uint64_t span = t > c->page_t0 ? t - c->page_t0 : 0;
    uint64_t caller = c->gap_n ? (uint64_t)((double)c->gap_ns * c->gaps / c->gap_n) : 0;
    c->gap_est_ns = caller < span ? caller : span;
    c->page_ns = span - c->gap_est_ns;
}

/* End the running page: its time so far, and (unless it failed, ran in the test mode or
 * switched methods) the model's observation of it and the database's learned sizes. */
static void page_end(rl_cursor *c) {
    if (!c->page_on) return;
    if (!c->page_timed) { /* a short page left untimed (page_begin): nothing to observe */
        c->page_on = 0;
        return;
    }
    if (c->ad_sampled) {
        uint64_t t = rl__clock_mono_ns();
        if (!c->in_call) gap_close(c, t); /* freed between calls: the caller had the last gap */
        page_span(c, t);
    } else if (c->in_call) {
        page_add(c, rl__clock_mono_ns());
    }
    c->page_on = 0;
    int64_t rows = c->consumed - c->page_consumed0;
    if (c->o.explain && rows > 0 && c->explain.len && c->explain.data[c->explain.len - 1] == '\n') {
        /* The page's own line (the last one) ends with what was observed. */
        rl__buf_truncate(&c->explain, c->explain.len - 1);
        rl__buf_printf(&c->explain, "; observed %.1f µs (read-version wait %.1f µs taken out", (double)c->page_ns / 1e3,
                       (double)c->page_wait_ns / 1e3);
        if (c->ad_sampled)
            rl__buf_printf(&c->explain, "; the caller's time between calls, %.1f µs, from %u of %u gaps timed",
                           (double)c->gap_est_ns / 1e3, c->gap_n, c->gaps);
        rl__buf_append_str(&c->explain, ")\n");
    }
    if (rows <= 0 || c->err || c->ad_test_alt || c->ad_dec.in.rows < 0) return;
    rl__adaptive_decision *d = &c->ad_dec; /* the page is over: observed in place */
    double bpr = (double)(c->bytes_scanned - c->page_bytes0) / (double)rows;
    d->in.rows = (double)rows;
    if (bpr > 0) d->in.bytes_per_row = bpr;
    d->size_class = rl__adaptive_size_class((double)rows, d->in.bytes_per_row);
    ad_lock(c->ad);
    c->ad->gen++;
    double raw[2];
    rl__adaptive_raw(&c->ad->m, &d->in, raw);
    d->raw_ns[d->method] = raw[d->method];
    rl__adaptive_observe(&c->ad->m, d, (double)c->page_ns);
    ad_scan *a = ad_scan_of(c->ad, c->ad_key);
    a->bytes_per_row = a->bytes_per_row > 0 ? (1 - AD_EWMA) * a->bytes_per_row + AD_EWMA * bpr : bpr;
    if (c->page_recs > 0) {
        double k = (double)c->page_kvs / (double)c->page_recs;
        a->kvs_per_record = a->kvs_per_record > 0 ? (1 - AD_EWMA) * a->kvs_per_record + AD_EWMA * k : k;
    }
    if (d->method == RL__ADAPTIVE_RF && c->cur_local + c->cur_remote > 0) {
        double f = (double)c->cur_remote / (double)(c->cur_local + c->cur_remote);
        a->frac_remote = a->have_frac ? (1 - AD_EWMA) * a->frac_remote + AD_EWMA * f : f;
        a->have_frac = 1;
    }
    ad_unlock(c->ad);
}

/* The lease slot of a first page of rows entries on a local backend, or NULL when page_inputs
 * reads more than the slot's key (a networked backend's locality, a later page's own sizes). */
static ad_lease *ad_lease_slot(rl_cursor *c, int64_t rows) {
    if (c->ad->networked || c->consumed > 0 || c->cur_local + c->cur_remote > 0) return NULL;
    return &c->ad->leases[(c->ad_key ^ (uint64_t)rows) % AD_LEASES];
}

/* Decide the page of rows entries (under ad_lock): from the lease of an alike first page when
 * it still answers (rl__adaptive_lease_take: exactly rl__adaptive_decide's decision, without
 * page_inputs and the model's arithmetic: 1-2 % of a limit-1 query on embedded), else in full,
 * leaving a lease for the next alike page when the model grants one. (A leased page does not
 * touch its index's ad_scan entry; the observed pages, at least one in OBSERVE_EVERY, keep it
 * recent.) */
static void page_decide(rl_cursor *c, int64_t rows) {
    ad_state *a = c->ad;
    ad_lease *ls = ad_lease_slot(c, rows);
    int same = ls && ls->gen == a->gen && ls->key == c->ad_key && ls->rows == rows &&
               ls->pipeline_depth == c->o.pipeline_depth && ls->index_batch == c->o.index_batch &&
               ls->strategy == (int)c->o.secondary_strategy;
    if (same && rl__adaptive_lease_take(&a->m, &ls->l, &c->ad_dec)) return;
    rl__adaptive_inputs in;
    page_inputs(c, rows, &in);
    rl__adaptive_decide(&a->m, &in, &c->ad_dec);
    if (!ls) return;
    ls->gen = rl__adaptive_lease_grant(&a->m, &c->ad_dec, &ls->l) ? a->gen : 0;
    ls->key = c->ad_key;
    ls->rows = rows;
    ls->pipeline_depth = c->o.pipeline_depth;
    ls->index_batch = c->o.index_batch;
    ls->strategy = (int)c->o.secondary_strategy;
}

/* Start the next page: decide its method (page_decide under the database's lock), count and
 * explain the decision, and start that method's source after the last consumed entry. */
static int page_begin(rl_cursor *c) {
    int64_t rows = c->ad_test_rows > 0 ? c->ad_test_rows : AD_PAGE_ROWS;
    if (c->o.limit > 0 && c->o.limit - c->rows < rows) rows = c->o.limit - c->rows;
    if (rows < 1) rows = 1;
    ad_lock(c->ad);
    page_decide(c, rows);
    ad_unlock(c->ad);
    const char *why = NULL;
    if (c->ad_sf_only) {
        c->ad_dec.method = RL__ADAPTIVE_SF;
        c->ad_dec.explored = 0;
        why = "remote fetch cannot run here";
    } else if (c->ad_test_alt) {
        c->ad_dec.method =
            (c->k.pages_scan_and_fetch + c->k.pages_remote_fetch) % 2 ? RL__ADAPTIVE_SF : RL__ADAPTIVE_RF;
        c->ad_dec.explored = 0;
        why = "test mode: alternating";
    }
    if (c->ad_dec.method == RL__ADAPTIVE_RF) c->k.pages_remote_fetch++;
    else c->k.pages_scan_and_fetch++;
    if (c->ad_dec.explored) c->k.adaptive_explorations++;
    if (c->o.explain) {
        rl__buf_printf(&c->explain, "page %" PRIu64 ": ", c->k.pages_scan_and_fetch + c->k.pages_remote_fetch);
        if (why) rl__buf_printf(&c->explain, "[%s] ", why);
        rl__adaptive_explain(&c->ad_dec, &c->explain);
    }
    c->page_on = 1;
    c->page_quota = rows;
    c->page_recv = 0;
    c->page_consumed0 = c->consumed;
    c->page_bytes0 = c->bytes_scanned;
    c->page_kvs = c->page_recs = 0;
    c->page_ns = c->page_wait_ns = 0;
    /* A local backend times a page only when the model asks (rl__adaptive_decide's observe: its
     * explorations, its warm-up, long pages and a sample of short ones; a test-mode page is not
     * observed at all), or to explain it. */
    c->page_timed = !c->ad_sampled || c->o.explain || (c->ad_dec.observe && !c->ad_test_alt);
    c->in_t0 = c->page_timed ? rl__clock_mono_ns() : 0; /* the page's time starts after its decision */
    c->page_t0 = c->in_t0;
    c->gap_t = c->gap_ns = c->gap_est_ns = 0;
    c->gap_n = c->gaps = 0;
    c->gap_skip = 1; /* ad_sampled: the page's first gap is timed */
    c->cur_local = c->cur_remote = 0;
    int iteration = c->iteration > 0 ? c->iteration : 1; /* ITERATOR's growth goes on */
    int rc = src_start(c, c->ad_dec.method == RL__ADAPTIVE_RF ? SRC_REMOTE : SRC_SCAN);
    c->iteration = iteration;
    return rc;
}

/* ============================================================================================
 * Opening
 * ========================================================================================== */

static int check_tuple(const void *p, size_t n, const char *what, rl__errdetail *err) {
    if (!p && n) goto bad;
    if (!p) return RL_OK;
    if (rl__tuple_validate(p, n, NULL) != RL_OK) goto bad;
    return RL_OK;
bad:
    rl__errdetail_set(err, "query bound %s is not a packed tuple", what);
    return RL_E_INVALID_ARGUMENT;
}

/* Build the mapper: records subspace elements, "{K[i]}" per primary-key column, "{...}". Built
 * at the first remote page (remote_next): a cursor that only scans never needs it. */
static int build_mapper(rl_cursor *c) {
    size_t n_prefix;
    int braces;
    rl__store_prefix_shape(c->s, &n_prefix, &braces);
    rl__tuple_packer pk;
    rl__buf_append(&c->mapper, c->recprefix.data, c->recprefix.len);
    rl__tuple_packer_init(&pk, &c->mapper);
    for (int i = 0; i < c->n_pk; i++) {
        char ph[32];
        int len = snprintf(ph, sizeof ph, "{K[%d]}", (int)n_prefix + 2 + c->pk_pos[i]);
        rl__tuple_pack_string(&pk, ph, (size_t)len);
    }
    rl__tuple_pack_string(&pk, "{...}", 5);
    return rl__buf_error(&c->mapper);
}

/* Turn the bounds of o into the key range [range_b, range_e). */
static int build_range(rl_cursor *c, const rl_query_options *o) {
    rl_buf *base = &c->tb; /* scratch (parked with the cursor: invariant 11) */
    rl__buf_reset(base);
    rl__buf_append(base, c->ixprefix.data, c->ixprefix.len);
    if (o->eq) rl__buf_append(base, o->eq, o->eq_len);
    rl__buf_append(&c->range_b, base->data, base->len);
    if (!o->low) {
        rl__buf_append_byte(&c->range_b, 0x00);
    } else {
        rl__buf_append(&c->range_b, o->low, o->low_len);
        if (o->low_exclusive) rl__buf_append_byte(&c->range_b, 0xff);
    }
    rl__buf_append(&c->range_e, base->data, base->len);
    if (!o->high) {
        rl__buf_append_byte(&c->range_e, 0xff);
    } else {
        rl__buf_append(&c->range_e, o->high, o->high_len);
        if (!o->high_exclusive) rl__buf_append_byte(&c->range_e, 0xff);
    }
    int rc = rl__buf_error(base);
    rl__buf_reset(base);
    if (!rc) rc = rl__buf_error(&c->range_b);
    if (!rc) rc = rl__buf_error(&c->range_e);
    if (rc) return rc;
    c->is_empty = rl__bytes_cmp(c->range_b.data, c->range_b.len, c->range_e.data, c->range_e.len) >= 0;
    return RL_OK;
}

/* rl__qcont_scan_hash of the scan's range and direction: what a continuation is checked against
 * (hashed only when a continuation is read or made). */
static uint64_t scan_hash(const rl_cursor *c) {
    return rl__qcont_scan_hash(c->range_b.data, c->range_b.len, c->range_e.data, c->range_e.len, c->o.reverse != 0);
}

/* Adopt the continuation of o: the last key, checked against the scan's hash and range. */
static int adopt_continuation(rl_cursor *c, const rl_query_options *o) {
    int has_key;
    const uint8_t *suf;
    size_t suf_len;
    const char *why;
    int rc = rl__qcont_decode(o->continuation, o->continuation_len, scan_hash(c), &has_key, &suf, &suf_len, &why);
    if (rc) {
        rl__errdetail_set(rl__store_err(c->s), "%s", why);
        return rc;
    }
    c->skip = 0; /* skip applies to the first page only */
    if (!has_key) return RL_OK;
    rl__buf_append(&c->last_key, c->ixprefix.data, c->ixprefix.len);
    rl__buf_append(&c->last_key, suf, suf_len);
    if ((rc = rl__buf_error(&c->last_key))) return rc;
    if (rl__bytes_cmp(c->last_key.data, c->last_key.len, c->range_b.data, c->range_b.len) < 0 ||
        rl__bytes_cmp(c->last_key.data, c->last_key.len, c->range_e.data, c->range_e.len) >= 0) {
        rl__errdetail_set(rl__store_err(c->s), "continuation key lies outside the scan's bounds");
        return RL_E_CONTINUATION_INVALID;
    }
    c->has_last = 1;
    return RL_OK;
}

static void add_alloc_delta(rl_cursor *c, const rl_alloc_stats *before) {
    rl_alloc_stats now;
    rl_alloc_get_stats(&now);
    c->k.allocs += now.allocs - before->allocs;
    c->k.alloc_bytes += now.bytes - before->bytes;
}

/* rl_cursor_open's work; its details go on the store (err: rl__store_err(s), or NULL). */
static int cursor_open(rl_store *s, rl_txn *txn, const char *index_name, const rl_query_options *opts, rl_cursor **out,
                       rl__errdetail *err) {
    rl_alloc_stats before;
    rl_query_options o;
    rl_cursor *c = NULL;
    int rc;
    rl_alloc_get_stats(&before);
    *out = NULL;
    memset(&o, 0, sizeof o);
    if (opts) {
        if (opts->size < sizeof o) {
            rl__errdetail_set(err, "rl_query_options.size must be sizeof(rl_query_options)");
            return RL_E_INVALID_ARGUMENT;
        }
        o = *opts;
    }
    o.size = sizeof o;
    if (!s || !txn || !index_name) return RL_E_INVALID_ARGUMENT;
    if (o.skip < 0 || o.limit < 0 || o.scan_limit < 0 || o.byte_limit < 0 || o.time_limit_ms < 0 ||
        o.pipeline_depth < 0 || o.index_batch < 0 || (unsigned)o.orphans > RL_ORPHAN_RETURN ||
        (unsigned)o.fetch > RL_FETCH_ADAPTIVE || (!o.continuation && o.continuation_len) ||
        (unsigned)o.secondary_strategy > RL_SECONDARY_GROUPED) {
        rl__errdetail_set(err, "query options out of range");
        return RL_E_INVALID_ARGUMENT;
    }
    if (o.skip > RL_QUERY_MAX_SKIP) {
        /* The skip becomes a key-selector offset of 1 + skip (forward) or 1 - skip (reverse),
         * an int: anything larger would wrap. */
        rl__errdetail_set(err, "skip %d is out of range [0, %d]", o.skip, RL_QUERY_MAX_SKIP);
        return RL_E_INVALID_ARGUMENT;
    }
    if ((rc = check_tuple(o.eq, o.eq_len, "eq", err)) || (rc = check_tuple(o.low, o.low_len, "low", err)) ||
        (rc = check_tuple(o.high, o.high_len, "high", err)))
        return rc;
    rl__index_layout lay;
    if ((rc = rl__md_index_layout(rl_store_metadata(s), index_name, &lay))) {
        if (rc == RL_E_INDEX_UNKNOWN) rl__errdetail_set(err, "no index named %s in the metadata", index_name);
        else rl__errdetail_set(err, "index %s has too many columns", index_name);
        return rc;
    }
    c = cursor_take(); /* invariant 11 */
    if (!c) return RL_E_OUT_OF_MEMORY;
    c->s = s;
    c->txn = txn;
    rl__errdetail_init(&c->detail, NULL);
    c->ix = lay;
    c->omit = lay.rebuildable && !o.keep_index_entries; /* invariant 9 */
    c->o = o;
    c->skip = o.skip;
    rl__decoder_init(&c->dec);
    c->k.size = sizeof c->k;
    /* Entry layout: the indexed values, then the primary-key columns not among them. */
    c->n_pk = c->ix.n_pk;
    c->n_entry = c->ix.n_fields;
    if (c->ix.n_fields + c->n_pk > MAX_ENTRY_COLS) {
        rl__errdetail_set(err, "index %s has too many columns", index_name);
        rc = RL_E_UNSUPPORTED_OPERATION;
        goto fail;
    }
    for (int i = 0; i < c->n_pk; i++) c->pk_pos[i] = c->ix.pk_pos[i] >= 0 ? c->ix.pk_pos[i] : c->n_entry++;
    /* Bounds name the entry's columns in order: eq values, then one column bounded by low/high.
     * More than the entry has could never match (the scan would silently return nothing). */
    size_t n_eq = 0;
    if (o.eq) (void)rl__tuple_validate(o.eq, o.eq_len, &n_eq);
    if (n_eq + (o.low || o.high ? 1 : 0) > (size_t)c->n_entry) {
        rl__errdetail_set(err,
                          "the bounds name %zu columns (%zu eq values%s) but index %s has %d "
                          "(%d indexed values, then the primary key)",
                          n_eq + (o.low || o.high ? 1 : 0), n_eq, o.low || o.high ? " and a low/high bound" : "",
                          index_name, c->n_entry, c->ix.n_fields);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    /* Prefixes. */
    rl__store_index_prefix(s, c->ix.subspace_key, &c->ixprefix);
    rl__store_records_prefix(s, &c->recprefix);
    if ((rc = rl__buf_error(&c->ixprefix)) || (rc = rl__buf_error(&c->recprefix))) goto fail;
    if ((rc = build_range(c, &o))) goto fail;
    size_t n_prefix;
    int braces;
    rl__store_prefix_shape(s, &n_prefix, &braces);
    /* The mapper would read such an element as a placeholder or re-emit it as bytes. */
    if (braces) c->mapper_rc = RL_E_UNSUPPORTED_OPERATION;
    if (o.continuation && o.continuation_len && (rc = adopt_continuation(c, &o))) goto fail;
    c->o.eq = c->o.low = c->o.high = c->o.continuation = NULL;
    if (o.time_limit_ms > 0) c->t0_ns = now_ns(c);
    if (o.trace) {
        c->tr_t0 = rl__clock_mono_ns();
        rl__txn_trace(txn, 1);
        c->tr_on = 1;
    }
    if (o.fetch == RL_FETCH_ADAPTIVE) {
        /* The first page's method is decided at the first rl_cursor_next. */
        c->adaptive = 1;
        c->ad_sf_only = c->mapper_rc != RL_OK || o.snapshot;
        c->ad_key = rl__hash64(c->ixprefix.data, c->ixprefix.len, 0x6164);
        if (!(c->ad = ad_state_of(rl__txn_db(txn)))) {
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        c->networked = c->ad->networked;
        c->ad_rv_done = !c->ad->networked; /* a local backend never waits for a version */
        c->ad_sampled = !c->ad->networked; /* page_span */
        c->gap_rng = (uint32_t)c->ad_key | 1;
        int alt = ad_test_mode();
        if (alt > 0) {
            c->ad_test_alt = 1;
            c->ad_test_rows = alt;
        }
    } else {
        if (o.fetch != RL_FETCH_SCAN_AND_FETCH) { /* page_bytes: the database's kind, asked once */
            ad_state *a = ad_state_of(rl__txn_db(txn));
            if (!a) {
                rc = RL_E_OUT_OF_MEMORY;
                goto fail;
            }
            c->networked = a->networked;
            if (c->networked) { /* defer_flags: what the index's earlier cursors saw */
                c->ad = a;
                c->ad_key = rl__hash64(c->ixprefix.data, c->ixprefix.len, 0x6164);
            }
        }
        if ((rc = src_start(c, o.fetch == RL_FETCH_SCAN_AND_FETCH ? SRC_SCAN : SRC_REMOTE))) goto fail;
    }
    if (c->ad && c->networked) { /* defer_flags */
        ad_lock(c->ad);
        c->ad_rec_bytes = ad_scan_of(c->ad, c->ad_key)->rec_bytes;
        ad_unlock(c->ad);
    }
    add_alloc_delta(c, &before);
    *out = c;
    return RL_OK;
fail:
    if (c && rl__errdetail_get(&c->detail)[0]) rl__errdetail_copy(err, rl__errdetail_get(&c->detail));
    rl_cursor_free(c);
    return rc;
}

int rl_cursor_open(rl_store *s, rl_txn *txn, const char *index_name, const rl_query_options *opts, rl_cursor **out) {
    /* No cursor yet: the detail of a failure goes on the store (errdetail.h, rule 3). */
    rl__errdetail *err = s ? rl__store_err(s) : NULL;
    unsigned mark = rl__errdetail_mark(err);
    return rl__errdetail_finish(err, mark, cursor_open(s, txn, index_name, opts, out, err), "rl_cursor_open");
}

void rl_cursor_free(rl_cursor *c) {
    if (!c) return;
    if (c->adaptive) page_end(c);
    if (c->ad && c->networked && c->rec_n) { /* defer_flags of the index's next cursors */
        double mean = (double)c->rec_bytes / (double)c->rec_n;
        ad_lock(c->ad);
        ad_scan *sc = ad_scan_of(c->ad, c->ad_key);
        sc->rec_bytes = sc->rec_bytes > 0 ? (1 - AD_EWMA) * sc->rec_bytes + AD_EWMA * mean : mean;
        ad_unlock(c->ad);
    }
    src_release(c);
    if (c->tr_on) rl__txn_trace(c->txn, -1);
    rl__free(c->tr);
    rl__free(c->tr_poff);
    rl__free(c->tr_peers);
    memset(&c->rec, 0, sizeof c->rec); /* borrowed from dec */
    rl__decoder_recycle(&c->dec);
    cursor_put(c); /* invariant 11: the buffers, the queue and the key-value list */
}

/* ============================================================================================
 * Iteration
 * ========================================================================================== */

static int end_with(rl_cursor *c, rl_no_next_reason r) {
    if (c->adaptive) page_end(c);
    c->done = 1;
    c->reason = r;
    src_release(c);
    return RL_OK;
}

/* 1 if c->cur_key lies strictly past the last consumed key in the scan's direction and inside the
 * range: where the entry after it must be. */
static int key_follows(const rl_cursor *c) {
    const rl_buf *k = &c->cur_key;
    if (!c->has_last) return 0;
    if (!c->o.reverse)
        return rl__bytes_cmp(k->data, k->len, c->last_key.data, c->last_key.len) > 0 &&
               rl__bytes_cmp(k->data, k->len, c->range_e.data, c->range_e.len) < 0;
    return rl__bytes_cmp(k->data, k->len, c->last_key.data, c->last_key.len) < 0 &&
           rl__bytes_cmp(k->data, k->len, c->range_b.data, c->range_b.len) >= 0;
}

/* The key of an omitted entry read from the index (rebuild_key's fallback): the entry right after
 * the last consumed one in the scan's direction, at the transaction's read version — the page's
 * entries are consecutive there and this one follows the one consumed last. Its primary key must
 * be the one the entry's record range named (c->tb holds it). */
static int read_entry_key(rl_cursor *c) {
    int rc, n, more;
    const rl_keyvalue *kv;
    if (!c->has_last) return RL_E_INTERNAL_ERROR; /* a page's first entry is never omitted */
    rl_key_selector b = RL_FIRST_GREATER_THAN(c->last_key.data, c->last_key.len);
    rl_key_selector e = RL_FIRST_GREATER_OR_EQUAL(c->range_e.data, c->range_e.len);
    if (c->o.reverse) {
        b = RL_FIRST_GREATER_OR_EQUAL(c->range_b.data, c->range_b.len);
        e = RL_FIRST_GREATER_OR_EQUAL(c->last_key.data, c->last_key.len);
    }
    c->k.reads_range++;
    c->k.index_keys_read_back++;
    rl_future *f = rl_txn_get_range(c->txn, b, e, 1, 0, RL_STREAMING_EXACT, 0, read_flags(c));
    if ((rc = wait_read(c, f, c->depth)) || (rc = rl_future_get_keyvalue_array(f, &kv, &n, &more))) {
        rl_future_free(f);
        return rc;
    }
    if (n == 1) {
        c->k.kv_bytes_received += kv[0].key_len + kv[0].value_len;
        rl__buf_reset(&c->cur_key);
        rl__buf_append(&c->cur_key, kv[0].key, kv[0].key_len);
    }
    rl_future_free(f);
    if (n != 1) {
        set_msg(c, "the index entry a mapped read left out is gone");
        return RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
    if ((rc = rl__buf_error(&c->cur_key)) || (rc = entry_pk(c, c->cur_key.data, c->cur_key.len))) return rc;
    if (rl__bytes_cmp(c->cur_pk.data, c->cur_pk.len, c->tb.data, c->tb.len) != 0) {
        set_msg(c, "the index entry a mapped read left out names another record");
        return RL_CORRUPT(RL_E_CORRUPT_DATA);
    }
    return RL_OK;
}

/* Invariant 9: the key of an omitted entry into c->cur_key, rebuilt from its record (found: just
 * decoded into c->rec) by the index definition, and accepted when it follows the last consumed
 * key (key_follows) and names the entry's primary key; otherwise — an orphan, a record of another
 * type, an index that does not match its records — read from the index (read_entry_key). */
static int rebuild_key(rl_cursor *c, int found) {
    int rc;
    c->cur_omitted = 0;
    rl__buf_reset(&c->tb);
    rl__buf_append(&c->tb, c->cur_pk.data, c->cur_pk.len);
    if ((rc = rl__buf_error(&c->tb))) return rc;
    if (found) {
        rl__buf_reset(&c->cur_key);
        rl__buf_append(&c->cur_key, c->ixprefix.data, c->ixprefix.len);
        rc = rl__store_index_entry(c->s, c->ix.name, &c->rec, &c->cur_key, NULL);
        if (rc == RL_E_OUT_OF_MEMORY) return rc;
        if (rc == RL_OK && key_follows(c) && entry_pk(c, c->cur_key.data, c->cur_key.len) == RL_OK &&
            rl__bytes_cmp(c->cur_pk.data, c->cur_pk.len, c->tb.data, c->tb.len) == 0)
            return RL_OK;
    }
    return read_entry_key(c);
}

/* Take the next entry from the source and decode its record into c->rec.
 * [out] out_has: 0 when the source has no more; out_found: 0 for an orphan; out_bytes: bytes of
 * the entry and its record. */
static int fetch_entry(rl_cursor *c, int *out_has, int *out_found, int64_t *out_bytes) {
    rl_future_free(c->hold); /* the last record, which may point into it, is done with */
    c->hold = NULL;
    c->rkvs = NULL;
    c->rn = 0;
    int rc = c->src == SRC_SCAN ? scan_next(c, out_has) : remote_next(c, out_has);
    *out_found = 0;
    *out_bytes = 0;
    if (rc || !*out_has) return rc;
    for (int i = 0; i < c->rn; i++) *out_bytes += (int64_t)c->rkvs[i].key_len + c->rkvs[i].value_len;
    if (c->rn > 0) c->page_kvs += (uint64_t)c->rn, c->page_recs++, c->rec_n++, c->rec_bytes += (uint64_t)*out_bytes;
    memset(&c->rec, 0, sizeof c->rec);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    /* The key-values stay until the next entry is fetched (a held load, the mapped page, c->kvs),
     * as long as the record: it may point into them (invariant 6). */
    rc = rl__decoder_decode_in_place(&c->dec, c->s, c->cur_pk.data, c->cur_pk.len, c->rkvs, c->rn, &c->rec, &why);
    c->rkvs = NULL;
    c->rn = 0;
    if (c->cur_omitted && (rc == RL_OK || rc == RL_E_NOT_FOUND)) {
        int rc2 = rebuild_key(c, rc == RL_OK);
        if (rc2) return rc2;
    }
    *out_bytes += (int64_t)c->cur_key.len;
    if (rc == RL_E_NOT_FOUND) return RL_OK;
    if (rc) {
        rl_buf k;
        rl__buf_init(&k);
        print_key(c->cur_key.data, c->cur_key.len, &k);
        set_msg(c, "record of index entry %s: %s", k.data, why.msg[0] ? why.msg : rl_error_message(rc));
        rl__buf_release(&k);
        return rc;
    }
    *out_found = 1;
    return RL_OK;
}

/* A failure of the source: fall back once (remote with fallback), else fail for good. */
static int source_failed(rl_cursor *c, int rc) {
    if (c->adaptive && c->src == SRC_REMOTE && !c->ad_sf_only && remote_specific(rc)) {
        /* ADAPTIVE: this page (and the rest) with SCAN_AND_FETCH, after the last consumed entry;
         * the page is not observed (dec.in.rows < 0). Later errors are reported as they are. */
        c->ad_sf_only = 1;
        c->k.fallbacks = 1;
        c->k.fallback_error = rc;
        c->ad_dec.method = RL__ADAPTIVE_SF;
        c->ad_dec.in.rows = -1;
        c->k.pages_scan_and_fetch++;
        c->page_recv = c->consumed - c->page_consumed0;
        int rc2 = src_start(c, SRC_SCAN);
        if (rc2 == RL_OK) return RL_OK;
        rc = rc2;
    }
    if (c->src == SRC_REMOTE && c->o.fetch == RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK && !c->fell_back) {
        c->fell_back = 1;
        c->k.fallbacks = 1;
        c->k.fallback_error = rc;
        int rc2 = src_start(c, SRC_SCAN);
        if (rc2 == RL_OK) return RL_OK;
        rc = rc2;
    }
    c->cause = rc;
    if (c->fell_back) {
        if (rl__errdetail_mark(&c->detail) == c->row_mark) set_msg(c, "fallback scan failed: %s", rl_error_name(rc));
        rc = RL_E_FALLBACK_FAILED;
    }
    c->err = rc;
    src_release(c);
    return rc;
}

static int next_row(rl_cursor *c, const rl_query_row **out) {
    int rc, has, found;
    int64_t bytes;
    *out = NULL;
    if (c->err) return c->err;
    if (c->done) return RL_OK;
    memset(&c->rec, 0, sizeof c->rec); /* borrowed from dec */
    for (;;) {
        if (c->o.limit > 0 && c->rows >= c->o.limit) return end_with(c, RL_NO_NEXT_RETURN_LIMIT_REACHED);
        if (c->adaptive && !c->page_on && (rc = page_begin(c))) return source_failed(c, rc);
        if (c->consumed > 0) { /* invariant 4 */
            if (c->o.scan_limit > 0 && c->consumed >= c->o.scan_limit)
                return end_with(c, RL_NO_NEXT_SCAN_LIMIT_REACHED);
            if (c->o.byte_limit > 0 && c->bytes_scanned >= c->o.byte_limit)
                return end_with(c, RL_NO_NEXT_BYTE_LIMIT_REACHED);
            if (c->o.time_limit_ms > 0 && now_ns(c) - c->t0_ns >= (uint64_t)c->o.time_limit_ms * 1000000u)
                return end_with(c, RL_NO_NEXT_TIME_LIMIT_REACHED);
        }
        c->row_mark = rl__errdetail_mark(&c->detail);
        rc = fetch_entry(c, &has, &found, &bytes);
        if (rc == RL_OK && has && !found) {
            c->k.orphans++;
            if (c->o.orphans == RL_ORPHAN_ERROR) {
                rl_buf k;
                rl__buf_init(&k);
                print_key(c->cur_key.data, c->cur_key.len, &k);
                set_msg(c, "record not found for index entry %s", k.data);
                rl__buf_release(&k);
                rc = RL_E_INDEX_ORPHAN_ENTRY;
            }
        }
        if (rc) {
            if ((rc = source_failed(c, rc))) return rc;
            continue;
        }
        if (!has && c->adaptive && !c->exhausted && page_done_reading(c)) {
            page_end(c); /* the page's entries are all consumed: the next page decides again */
            continue;
        }
        if (!has) return end_with(c, RL_NO_NEXT_SOURCE_EXHAUSTED);
        /* Consume the entry (invariant 2). */
        rl__buf_reset(&c->last_key);
        rl__buf_append(&c->last_key, c->cur_key.data, c->cur_key.len);
        if ((rc = rl__buf_error(&c->last_key))) return source_failed(c, rc);
        c->has_last = 1;
        c->consumed++;
        c->bytes_scanned += bytes;
        if (!found && c->o.orphans == RL_ORPHAN_SKIP) continue;
        c->rows++;
        c->k.rows_returned++;
        if (c->adaptive && c->o.limit > 0 && c->rows >= c->o.limit) page_end(c); /* its last row */
        if (found) c->k.records_returned++;
        c->row.index_key = c->cur_key.data;
        c->row.index_key_len = c->cur_key.len;
        c->row.entry = c->cur_key.data + c->ixprefix.len;
        c->row.entry_len = c->cur_key.len - c->ixprefix.len;
        c->row.pk = c->cur_pk.data;
        c->row.pk_len = c->cur_pk.len;
        c->row.record = found ? &c->rec : NULL;
        *out = &c->row;
        return RL_OK;
    }
}

int rl_cursor_next(rl_cursor *c, const rl_query_row **out) {
    rl_alloc_stats before;
    rl_alloc_get_stats(&before);
    if (c->err) return c->err; /* sticky: the detail stays the first failure's */
    unsigned mark = rl__errdetail_mark(&c->detail);
    if (c->adaptive) {
        /* A running page's time starts now; otherwise page_begin starts the next page's clock
         * after its decision (or the call only ends the cursor): one clock read saved. A local
         * backend's page only closes the caller's gap, timed 1 time in 1-32 (page_span). */
        if (c->ad_sampled) {
            if (c->page_on && c->page_timed) gap_close(c, c->gap_t ? rl__clock_mono_ns() : 0);
        } else if (c->page_on) {
            c->in_t0 = rl__clock_mono_ns();
        }
        c->in_call = 1;
    }
    int rc = next_row(c, out);
    if (c->adaptive) {
        if (c->ad_sampled) {
            if (c->page_on && c->page_timed && --c->gap_skip == 0) {
                c->gap_t = rl__clock_mono_ns();
                c->gap_skip = gap_stride(c);
            }
        } else if (c->page_on) {
            page_add(c, rl__clock_mono_ns());
        }
        c->in_call = 0;
    }
    add_alloc_delta(c, &before);
    return rl__errdetail_finish(&c->detail, mark, rc, "rl_cursor_next");
}

rl_no_next_reason rl_cursor_no_next_reason(const rl_cursor *c) { return c->done ? c->reason : RL_NO_NEXT_NONE; }

int rl_cursor_continuation(rl_cursor *c, const uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    if (c->done && c->reason == RL_NO_NEXT_SOURCE_EXHAUSTED) return RL_OK;
    rl__qcont_encode(scan_hash(c), c->has_last, c->last_key.data + c->ixprefix.len,
                     c->has_last ? c->last_key.len - c->ixprefix.len : 0, &c->cont);
    int rc = rl__buf_error(&c->cont);
    if (rc) return rc;
    *out = c->cont.data;
    *out_len = c->cont.len;
    return RL_OK;
}

void rl_cursor_get_counters(const rl_cursor *c, rl_query_counters *out) { *out = c->k; }

const char *rl_cursor_explain(const rl_cursor *c) {
    return c->explain.len && !rl__buf_error(&c->explain) ? (const char *)c->explain.data : "";
}

void rl_cursor_get_trace(rl_cursor *c, const rl_query_trace_event **out, size_t *out_n) {
    for (size_t i = 0; i < c->tr_n; i++)
        c->tr[i].s2s_by_peer = c->tr[i].n_s2s_by_peer ? c->tr_peers + c->tr_poff[i] : NULL;
    *out = c->tr_n ? c->tr : NULL;
    *out_n = c->tr_n;
}

int rl_cursor_error_cause(const rl_cursor *c) { return c->cause ? c->cause : c->err; }

const char *rl_cursor_errmsg(const rl_cursor *c) { return c ? rl__errdetail_get(&c->detail) : ""; }

const char *rl_fetch_method_name(rl_fetch_method m) {
    switch (m) {
    case RL_FETCH_SCAN_AND_FETCH: return "scan";
    case RL_FETCH_USE_REMOTE_FETCH: return "remote";
    case RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK: return "remote-fallback";
    case RL_FETCH_ADAPTIVE: return "adaptive";
    }
    return "unknown";
}

const char *rl_no_next_reason_name(rl_no_next_reason r) {
    switch (r) {
    case RL_NO_NEXT_NONE: return "none";
    case RL_NO_NEXT_SOURCE_EXHAUSTED: return "source_exhausted";
    case RL_NO_NEXT_RETURN_LIMIT_REACHED: return "return_limit_reached";
    case RL_NO_NEXT_SCAN_LIMIT_REACHED: return "scan_limit_reached";
    case RL_NO_NEXT_BYTE_LIMIT_REACHED: return "byte_limit_reached";
    case RL_NO_NEXT_TIME_LIMIT_REACHED: return "time_limit_reached";
    }
    return "unknown";
}
