/* committer.c — group commit: batches concurrent commit requests, gives each batch one version,
 * resolves its requests in order, substitutes versionstamps and hands the batch's mutations to
 * the log sink with one apply and one sync.
 *
 * Threads. Every caller of rl__committer_commit blocks. Callers queue their request (a waiter on
 * their own stack) under the mutex; whichever waiting caller finds no batch running becomes the
 * *leader*: it takes up to max_batch waiters from the head of the queue, releases the mutex, runs
 * the batch (sequencer, resolver, sink: only the leader touches them, so they need no lock of
 * their own), retakes the mutex, publishes the new read version, marks the batch's waiters done
 * and broadcasts. Callers that arrive while a batch runs queue up behind it and form the next
 * batch: the longer the sync, the larger the batches.
 *
 * Asynchronous submits (rl__committer_submit, for rlkvd's coordinator, whose event loop must
 * never block) queue a heap waiter that carries a done callback. The first submit starts the
 * committer's thread, and from then on only that thread leads (blocking callers queue and wait on
 * cv like before, but never lead), so every done callback runs on it: after a batch is published
 * the thread drops the mutex, calls the callbacks of the batch's asynchronous waiters and frees
 * them, and takes the next batch. A batch may also be bounded in mutation bytes
 * (rl__committer_set_max_batch_bytes) so that one version always fits a log record.
 *
 * Read versions. rl__committer_read_version is the newest durable batch (durable). A committer
 * whose sink is read in-process (the embedded backend) asks rl__committer_fresh_read_version
 * instead: with no batch running or queued it reserves a version from the sequencer
 * (rl__sequencer_reserve) under the mutex — the sequencer is otherwise the leader's, and with
 * leading == 0 nobody else touches it — so read versions follow the clock and are never older
 * than the window at the next commit, however long nothing committed (docs/design.md §5). The
 * coordinator never reserves (its storage servers learn versions only from the log); it keeps
 * versions moving with tick requests (is_tick): an empty batch that the sink logs and syncs.
 * granted is the newest version handed out either way, and the future-version check and the
 * sink's readers (rl__committer_read_ceiling) go by it.
 *
 * The committer:
 *
 *                 commit() finds no leader                 sink apply/sync failed
 *     +------+  ---------------------------->  +---------+  ------------------->  +----------+
 *     | IDLE |                                 | LEADING |                        | POISONED |
 *     +------+  <----------------------------  +---------+                        +----------+
 *                 batch done, broadcast                        (final: every commit fails)
 *
 * One request (waiter):
 *
 *     QUEUED --(leader takes it)--> IN_BATCH --(batch done)--> DONE (result set)
 *
 *     transition                         function              under the mutex
 *     ---------------------------------  --------------------  ---------------
 *     read-only request: DONE at once    rl__committer_commit  no (nothing shared)
 *     IDLE: reserve a read version       rl__committer_fresh_read_version (yes; no batch
 *                                        running or queued)
 *     enqueue: QUEUED                    rl__committer_commit  yes
 *     IDLE -> LEADING, QUEUED->IN_BATCH  lead_batch            yes
 *     resolve, stamp, apply, sync        run_batch             no (leader only)
 *     LEADING -> IDLE, IN_BATCH -> DONE  lead_batch            yes (broadcast cv)
 *     LEADING -> POISONED                lead_batch            yes
 *     async DONE: done callback called   lead_batch            no (committer thread)
 *
 * Invariants:
 *   1. At most one batch runs at a time (leading == 1); batches get strictly increasing versions.
 *   2. durable (the coordinator's read version) only advances after the sink's sync of the batch
 *      that has that version returned success, so readers never see un-synced data.
 *   2a. granted >= durable is the newest version handed out as a read version: a batch's version
 *      once it is durable, or a version reserved from the sequencer while no batch ran, none was
 *      queued and the committer was not poisoned. Every batch taken after a reservation gets a
 *      greater version (sequencer invariant 1), so no version in (durable, granted] is ever
 *      applied after granted was published: the snapshot at any v <= granted is the sink's at
 *      min(v, what it holds), and final. Not reserving while poisoned keeps invariant 2: a failed
 *      sync may have left a batch applied in the sink but not durable, which a reserved version
 *      above it would expose. granted is written under the mutex (an atomic store) and read
 *      without it (rl__committer_read_ceiling).
 *   3. Inside a batch, requests are resolved in queue order; a committed request's write ranges
 *      are added to the resolver at the batch version before the next request is checked, so they
 *      conflict with later requests of the same batch (whose read versions are all < the batch
 *      version).
 *   4. batch_order is the request's index in its batch (committed or not), so (version, order)
 *      — the versionstamp — is unique and increases in commit order.
 *   5. Once poisoned, nothing reaches the sink again.
 *
 * Results of a request: RL_OK (commit_version, batch_order set), RL_E_NOT_COMMITTED,
 * RL_E_TRANSACTION_TOO_OLD, RL_E_FUTURE_VERSION (read version newer than any version handed
 * out: granted), RL_E_INVALID_MUTATION_TYPE, RL_E_INVERTED_RANGE (a clear-range with
 * begin > end), RL_E_CLIENT_INVALID_OPERATION (a versionstamp offset that does not fit),
 * RL_E_OUT_OF_MEMORY, RL_E_COMMIT_UNKNOWN_RESULT (1021) for the requests of a batch whose sink
 * call failed: the log may or may not hold the batch (a write that reached the disk before a
 * failed fsync survives a restart), exactly FoundationDB's "may or may not have committed"; the
 * committer is then poisoned and every later commit fails with the sink's own error
 * (RL_E_IO_ERROR, RL_E_NO_SPACE, RL_E_OUT_OF_MEMORY …): those certainly did not commit.
 * A request that fails for its own reasons does not affect the others of its batch.
 */
#include "commit/commit.h"

#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/sync.h"
#include "storage/wal.h"

#define CM_DEFAULT_BATCH 256
#define CM_MAX_BATCH 65536 /* batch_order is 16 bits */

typedef struct cm_waiter {
    rl__commit_request *req;
    struct cm_waiter *next; /* queue link; after the batch, the list of callbacks to call */
    int done;               /* set by the leader under the mutex */
    rl_commit_done_fn fn;   /* asynchronous waiter (heap, freed after fn): called when done;
                               NULL: a blocking caller waits for done on its own stack */
    void *ud;               /* fn's */
    uint64_t bytes;         /* the request's mutation bytes (mutation_bytes), for the byte bound */
} cm_waiter;

struct rl__committer {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* broadcast when a batch finishes */
    pthread_cond_t work_cv; /* signalled when work arrives for the thread (monotonic clock) */
    rl__log_sink sink;
    int max_batch;            /* 1..CM_MAX_BATCH */
    uint64_t max_batch_bytes; /* 0: no bound; else a batch's mutation bytes stay <= this
                                 (always at least one request) */
    /* The committer thread (started by the first rl__committer_submit). Under mu. */
    pthread_t thread;
    int has_thread; /* 1 once started: only the thread leads batches */
    int stopping;   /* rl__committer_free asked the thread to finish and exit */
    /* Under mu. */
    cm_waiter *q_head; /* FIFO of QUEUED waiters */
    cm_waiter *q_tail;
    int leading;         /* a batch is running */
    int poisoned;        /* a sink call failed: every commit fails */
    int poison_rc;       /* the sink's error that poisoned it (RL_E_IO_ERROR, RL_E_NO_SPACE, …) */
    rl__version durable; /* newest synced batch version (the coordinator's read version) */
    rl__version granted; /* newest version handed out as a read version, >= durable (invariant
                           2a); stored atomically under mu, loaded without it */
    rl__version oldest;  /* the resolver's oldest version after the last batch */
    uint64_t queued;     /* waiters in the queue */
    uint64_t batches;    /* batches that reached the sink successfully */
    uint64_t committed;  /* requests committed */
    uint64_t conflicts;  /* requests failed with RL_E_NOT_COMMITTED */
    uint64_t ticks;      /* tick requests committed */
    /* Leader only (leading == 1), no lock needed. */
    rl__sequencer seq;
    rl__resolver *res;
    cm_waiter **batch;  /* max_batch slots */
    rl__mutation *muts; /* the batch's mutations, muts_cap slots */
    size_t muts_cap;
    rl_arena arena; /* substituted versionstamp keys/values of the batch */
    rl_buf scratch; /* one substitution at a time */
};

/* ---- Versionstamps ------------------------------------------------------------------------- */

/* See commit.h. The param is borrowed; the result (param without its 4 offset bytes, with the 10
 * versionstamp bytes written at the offset) is appended to out. Errors:
 * RL_E_CLIENT_INVALID_OPERATION (param shorter than 4 bytes or offset + 10 past the end of the
 * param without its offset bytes), RL_E_OUT_OF_MEMORY (out is then in its sticky error state). */
int rl__versionstamp_substitute(const uint8_t *param, size_t len, rl__version v, uint16_t order, rl_buf *out) {
    if (len < 4) return RL_E_CLIENT_INVALID_OPERATION;
    size_t body = len - 4;
    const uint8_t *o = param + body;
    uint32_t off = (uint32_t)o[0] | (uint32_t)o[1] << 8 | (uint32_t)o[2] << 16 | (uint32_t)o[3] << 24;
    if (body < 10 || off > body - 10) return RL_E_CLIENT_INVALID_OPERATION;
    rl__buf_append(out, param, off);
    rl__buf_append_u64be(out, v);
    rl__buf_append_u16be(out, order);
    rl__buf_append(out, param + off + 10, body - off - 10);
    return rl__buf_error(out);
}

/* ---- The batch (leader only) --------------------------------------------------------------- */

/* A mutation type the committer accepts: every type storage logs, plus the versionstamped
 * operations it resolves itself. */
static int mutation_type_known(uint8_t t) {
    return rl__wal_type_ok(t) || t == RL_MUT_SET_VERSIONSTAMPED_KEY || t == RL_MUT_SET_VERSIONSTAMPED_VALUE;
}

/* Substitute one versionstamp param into the batch arena: *out_p and *out_len get the copy. */
static int stamp(rl__committer *c, const uint8_t *p, uint32_t len, rl__version v, uint16_t order, const uint8_t **out_p,
                 uint32_t *out_len) {
    rl__buf_reset(&c->scratch);
    int rc = rl__versionstamp_substitute(p, len, v, order, &c->scratch);
    if (rc != RL_OK) return rc;
    uint8_t *copy = rl__arena_memdup(&c->arena, c->scratch.data, c->scratch.len);
    if (!copy) return RL_E_OUT_OF_MEMORY;
    *out_p = copy;
    *out_len = (uint32_t)c->scratch.len;
    return RL_OK;
}

/* Append req's mutations (validated, versionstamps substituted) to c->muts[*nm..]. On error
 * *nm is unchanged (the request's partial mutations are dropped). */
static int stage_mutations(rl__committer *c, const rl__commit_request *req, rl__version v, uint16_t order, size_t *nm) {
    size_t need = *nm + req->n_muts;
    if (need > c->muts_cap) {
        size_t cap = c->muts_cap ? c->muts_cap : 64;
        while (cap < need) cap *= 2;
        rl__mutation *m = rl__realloc(c->muts, cap * sizeof *m);
        if (!m) return RL_E_OUT_OF_MEMORY;
        c->muts = m;
        c->muts_cap = cap;
    }
    for (size_t i = 0; i < req->n_muts; i++) {
        rl__mutation m = req->muts[i];
        int rc = RL_OK;
        if (!mutation_type_known(m.type)) {
            rc = RL_E_INVALID_MUTATION_TYPE;
        } else if (m.type == RL_MUT_CLEAR_RANGE && rl__bytes_cmp(m.p1, m.len1, m.p2, m.len2) > 0) {
            rc = RL_E_INVERTED_RANGE;
        } else if (m.type == RL_MUT_SET_VERSIONSTAMPED_KEY) {
            rc = stamp(c, m.p1, m.len1, v, order, &m.p1, &m.len1);
            m.type = RL_MUT_SET;
        } else if (m.type == RL_MUT_SET_VERSIONSTAMPED_VALUE) {
            rc = stamp(c, m.p2, m.len2, v, order, &m.p2, &m.len2);
            m.type = RL_MUT_SET;
        }
        if (rc != RL_OK) return rc;
        c->muts[*nm + i] = m;
    }
    *nm = need;
    return RL_OK;
}

/* Run one batch of n waiters (invariants 1–5). known: the newest version handed out as a read
 * version (granted); poisoned: the committer was poisoned when the batch was taken. Sets every
 * request's result. Returns RL_OK with *out_v the batch version when something committed and is
 * durable, RL_E_NOT_FOUND (expected: nothing committed, nothing new is readable), or
 * RL_E_IO_ERROR (the sink failed: poison; the batch's committed requests get
 * RL_E_COMMIT_UNKNOWN_RESULT and *out_sink_err is the sink's own error, which every later request
 * gets). poisoned: 0, or the error a poisoned committer returns. */
static int run_batch(rl__committer *c, cm_waiter **batch, int n, rl__version known, int poisoned, rl__version *out_v,
                     int *out_sink_err) {
    if (poisoned) {
        for (int i = 0; i < n; i++) batch[i]->req->result = poisoned;
        return RL_E_NOT_FOUND;
    }
    rl__version v = rl__sequencer_next(&c->seq);
    /* Advance the window to v first, so every request of the batch meets the same oldest. */
    rl__resolver_add(c->res, v, NULL, 0);
    rl__arena_reset(&c->arena);
    size_t nm = 0;
    int committed = 0;
    for (int i = 0; i < n; i++) {
        rl__commit_request *req = batch[i]->req;
        uint16_t order = (uint16_t)i;
        req->batch_order = order;
        int rc = RL_OK;
        if (req->read_version > known) rc = RL_E_FUTURE_VERSION;
        if (rc == RL_OK) rc = rl__resolver_check(c->res, req->read_version, req->reads, req->n_reads);
        size_t nm_before = nm;
        if (rc == RL_OK) rc = stage_mutations(c, req, v, order, &nm);
        if (rc == RL_OK) rc = rl__resolver_add(c->res, v, req->writes, req->n_writes);
        if (rc != RL_OK) {
            nm = nm_before;
            req->result = rc;
            continue;
        }
        req->result = RL_OK;
        req->commit_version = v;
        committed++;
    }
    if (!committed) return RL_E_NOT_FOUND;
    int rc = c->sink.apply(c->sink.ctx, v, c->muts, nm);
    if (rc == RL_OK) rc = c->sink.sync(c->sink.ctx);
    if (rc != RL_OK) {
        for (int i = 0; i < n; i++) {
            rl__commit_request *req = batch[i]->req;
            if (req->result == RL_OK) {
                req->result = RL_E_COMMIT_UNKNOWN_RESULT;
                req->commit_version = 0;
            }
        }
        *out_sink_err = rc;
        return RL_E_IO_ERROR;
    }
    *out_v = v;
    return RL_OK;
}

/* A request that commits without a batch: no mutations and no write ranges, and not a tick. */
static int is_read_only(const rl__commit_request *req) {
    return req->n_muts == 0 && req->n_writes == 0 && !req->is_tick;
}

/* Called with the mutex held and no batch running: take a batch from the queue head (up to
 * max_batch requests and max_batch_bytes; read-only asynchronous requests are done at once
 * without a slot), run it without the mutex, then publish its outcome, wake every blocking
 * waiter and call the asynchronous waiters' callbacks (without the mutex, then free them).
 * Returns with the mutex held. */
static void lead_batch(rl__committer *c) {
    int n = 0;
    uint64_t bytes = 0;
    cm_waiter *fin = NULL, **fin_tail = &fin; /* asynchronous waiters to call back, in order */
    c->leading = 1;
    while (c->q_head && n < c->max_batch) {
        cm_waiter *w = c->q_head;
        int ro = is_read_only(w->req);
        if (!ro && n > 0 && c->max_batch_bytes && bytes + w->bytes > c->max_batch_bytes) break;
        c->q_head = w->next;
        c->queued--;
        w->next = NULL;
        if (ro) { /* only asynchronous waiters are queued read-only: done now, no version */
            w->done = 1;
            *fin_tail = w;
            fin_tail = &w->next;
            continue;
        }
        c->batch[n++] = w;
        bytes += w->bytes;
    }
    if (!c->q_head) c->q_tail = NULL;
    if (n == 0) { /* only read-only requests were taken */
        c->leading = 0;
        goto callbacks;
    }
    rl__version known = c->granted;
    int poisoned = c->poisoned ? c->poison_rc : 0;
    pthread_mutex_unlock(&c->mu);

    rl__version v = 0;
    int sink_err = RL_E_IO_ERROR;
    int rc = run_batch(c, c->batch, n, known, poisoned, &v, &sink_err);
    rl__version oldest = rl__resolver_oldest(c->res);

    pthread_mutex_lock(&c->mu);
    if (rc == RL_OK) {
        c->durable = v;
        __atomic_store_n(&c->granted, v, __ATOMIC_RELEASE); /* v > granted (invariant 2a) */
        c->batches++;
    }
    if (rc == RL_E_IO_ERROR) {
        c->poisoned = 1;
        c->poison_rc = sink_err;
    }
    c->oldest = oldest;
    for (int i = 0; i < n; i++) {
        cm_waiter *w = c->batch[i];
        int r = w->req->result;
        if (r == RL_OK && w->req->is_tick) c->ticks++;
        else if (r == RL_OK) c->committed++;
        if (r == RL_E_NOT_COMMITTED) c->conflicts++;
        w->done = 1; /* a blocking waiter may return (and its waiter vanish) from here on */
        if (w->fn) {
            *fin_tail = w;
            fin_tail = &w->next;
        }
    }
    c->leading = 0;
    pthread_cond_broadcast(&c->cv);
callbacks:
    if (c->has_thread) pthread_cond_signal(&c->work_cv);
    if (!fin) return;
    pthread_mutex_unlock(&c->mu);
    while (fin) {
        cm_waiter *w = fin;
        fin = w->next;
        w->fn(w->req, w->ud);
        rl__free(w);
    }
    pthread_mutex_lock(&c->mu);
}

/* The committer thread: lead a batch whenever requests are queued and none runs; exit once
 * stopping is set and the queue is empty. Waits are bounded (1 s) and re-check their condition. */
static void *committer_thread(void *arg) {
    rl__committer *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (c->q_head && !c->leading) {
            lead_batch(c);
            continue;
        }
        if (c->stopping && !c->q_head && !c->leading) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&c->work_cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- API ----------------------------------------------------------------------------------- */

/* See commit.h. o may be NULL (defaults). The sink is copied; its ctx is borrowed for the
 * committer's life. Errors: RL_E_INVALID_ARGUMENT (missing sink functions, negative max_batch),
 * RL_E_OUT_OF_MEMORY. *out is set only on RL_OK. */
int rl__committer_new(const rl__committer_options *o, rl__log_sink sink, rl__version recovered, rl__committer **out) {
    rl__committer_options def = {0, 0};
    if (!o) o = &def;
    if (!sink.apply || !sink.sync || o->max_batch < 0) return RL_E_INVALID_ARGUMENT;
    int rc = RL_E_OUT_OF_MEMORY;
    rl__committer *c = rl__calloc(1, sizeof *c);
    if (!c) return RL_E_OUT_OF_MEMORY;
    int has_mu = 0, has_cv = 0;
    c->sink = sink;
    c->max_batch = o->max_batch == 0 ? CM_DEFAULT_BATCH : o->max_batch > CM_MAX_BATCH ? CM_MAX_BATCH : o->max_batch;
    c->durable = recovered;
    c->granted = recovered;
    rl__sequencer_init(&c->seq, recovered);
    rl__arena_init(&c->arena, 0);
    rl__buf_init(&c->scratch);
    rc = rl__resolver_new(o->window_versions, &c->res);
    if (rc != RL_OK) goto fail;
    rl__resolver_set_floor(c->res, recovered);
    c->oldest = rl__resolver_oldest(c->res);
    rc = RL_E_OUT_OF_MEMORY;
    c->batch = rl__calloc((size_t)c->max_batch, sizeof *c->batch);
    if (!c->batch) goto fail;
    if (pthread_mutex_init(&c->mu, NULL) != 0) goto fail;
    has_mu = 1;
    if (pthread_cond_init(&c->cv, NULL) != 0) goto fail;
    has_cv = 1;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) goto fail;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int wrc = pthread_cond_init(&c->work_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (wrc != 0) goto fail;
    *out = c;
    return RL_OK;
fail:
    if (has_cv) pthread_cond_destroy(&c->cv);
    if (has_mu) pthread_mutex_destroy(&c->mu);
    rl__free(c->batch);
    rl__resolver_free(c->res);
    rl__arena_release(&c->arena);
    rl__buf_release(&c->scratch);
    rl__free(c);
    return rc;
}

/* Free the committer (see commit.h): the thread, if started, first completes every queued
 * request, then exits and is joined. NULL is a no-op. The sink is not closed. */
void rl__committer_free(rl__committer *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    int joined = c->has_thread;
    c->stopping = 1;
    if (joined) pthread_cond_signal(&c->work_cv);
    pthread_mutex_unlock(&c->mu);
    if (joined) pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->work_cv);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    rl__free(c->batch);
    rl__free(c->muts);
    rl__resolver_free(c->res);
    rl__arena_release(&c->arena);
    rl__buf_release(&c->scratch);
    rl__free(c);
}

/* The bytes a request adds to a batch: every mutation's log record size (len1 + len2 + its
 * 9-byte header, as storage/wal.h encodes it and as a PEEK reply carries it). */
static uint64_t mutation_bytes(const rl__commit_request *req) {
    uint64_t b = 0;
    for (size_t i = 0; i < req->n_muts; i++) b += (uint64_t)req->muts[i].len1 + req->muts[i].len2 + RL_WAL_MUT_HEADER;
    return b;
}

/* Append w to the queue (mutex held) and tell the thread, if there is one. */
static void enqueue(rl__committer *c, cm_waiter *w) {
    if (c->q_tail) c->q_tail->next = w;
    else c->q_head = w;
    c->q_tail = w;
    c->queued++;
    if (c->has_thread) pthread_cond_signal(&c->work_cv);
}

/* See commit.h and the file header. req is borrowed (with everything it points to) until the
 * call returns; its result fields are written. A read-only request (no mutations, no write
 * ranges, not a tick) commits at once without a version, as in FoundationDB: result RL_OK,
 * commit_version 0, batch_order 0. */
int rl__committer_commit(rl__committer *c, rl__commit_request *req) {
    req->commit_version = 0;
    req->batch_order = 0;
    req->result = RL_OK;
    if (is_read_only(req)) return RL_OK;

    cm_waiter w = {req, NULL, 0, NULL, NULL, mutation_bytes(req)};
    pthread_mutex_lock(&c->mu);
    if (c->poisoned) {
        int rc = c->poison_rc;
        pthread_mutex_unlock(&c->mu);
        req->result = rc;
        return rc;
    }
    enqueue(c, &w);
    while (!w.done) {
        if (!c->leading && !c->has_thread) lead_batch(c);
        else pthread_cond_wait(&c->cv, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return req->result;
}

/* See commit.h. The waiter is heap-allocated here and freed by the thread after done. */
int rl__committer_submit(rl__committer *c, rl__commit_request *req, rl_commit_done_fn done, void *ud) {
    if (!c || !req || !done) return RL_E_INVALID_ARGUMENT;
    req->commit_version = 0;
    req->batch_order = 0;
    req->result = RL_OK;
    cm_waiter *w = rl__malloc(sizeof *w);
    if (!w) return RL_E_OUT_OF_MEMORY;
    w->req = req;
    w->next = NULL;
    w->done = 0;
    w->fn = done;
    w->ud = ud;
    w->bytes = mutation_bytes(req);
    pthread_mutex_lock(&c->mu);
    if (!c->has_thread) {
        if (pthread_create(&c->thread, NULL, committer_thread, c) != 0) {
            pthread_mutex_unlock(&c->mu);
            rl__free(w);
            return RL_E_OPERATION_FAILED;
        }
        pthread_setname_np(c->thread, "rl-committer");
        c->has_thread = 1;
    }
    enqueue(c, w);
    pthread_mutex_unlock(&c->mu);
    return RL_OK;
}

/* The sequencer is the leader's; with no commit in progress (the caller's promise) no leader
 * exists, and the next one takes mu before it leads, so setting it under mu is safe. */
void rl__committer_set_clock(rl__committer *c, rl_seq_clock_fn fn, void *ud) {
    pthread_mutex_lock(&c->mu);
    rl__sequencer_set_clock(&c->seq, fn, ud);
    pthread_mutex_unlock(&c->mu);
}

void rl__committer_set_max_batch_bytes(rl__committer *c, uint64_t bytes) {
    pthread_mutex_lock(&c->mu);
    c->max_batch_bytes = bytes;
    pthread_mutex_unlock(&c->mu);
}

rl__version rl__committer_read_version(rl__committer *c) { return rl__locked_u64(&c->mu, &c->durable); }

/* See commit.h and invariant 2a: reserve when idle, else the newest version handed out. The
 * queue test matters only to blocking callers between a batch's broadcast and the next leader's
 * wake-up; reserving then would be as correct, but the batch about to run advances durable
 * anyway. */
rl__version rl__committer_fresh_read_version(rl__committer *c) {
    pthread_mutex_lock(&c->mu);
    rl__version v = c->granted;
    if (!c->leading && !c->q_head && !c->poisoned) {
        v = rl__sequencer_reserve(&c->seq);
        __atomic_store_n(&c->granted, v, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&c->mu);
    return v;
}

rl__version rl__committer_read_ceiling(rl__committer *c) { return __atomic_load_n(&c->granted, __ATOMIC_ACQUIRE); }

rl__version rl__committer_oldest_version(rl__committer *c) { return rl__locked_u64(&c->mu, &c->oldest); }

void rl__committer_get_stats(rl__committer *c, rl__committer_stats *out) {
    pthread_mutex_lock(&c->mu);
    out->batches = c->batches;
    out->committed = c->committed;
    out->conflicts = c->conflicts;
    out->ticks = c->ticks;
    out->queued = c->queued;
    out->poisoned = c->poisoned;
    pthread_mutex_unlock(&c->mu);
}
