/* deferred.c — the test backend "defer:URL": the embedded backend for URL behind a worker thread
 * that completes every operation later, from its own thread, in a shuffled order within a small
 * window — what a network backend does — so that asynchronous completion, callbacks, cross-thread
 * hand-offs, cancellation and pipelining are tested by the KV, record and query suites without a
 * network (RL_TEST_URL=defer:mem:).
 *
 * Invariants:
 *   1. Every started operation is queued and completed exactly once by the worker, never inside
 *      the call that started it (vt->completes_inline is 0) — but watches, which are the
 *      embedded backend's own (def_watch).
 *   2. The worker takes up to WINDOW queued operations at a time and runs them in a random order
 *      (a seeded xorshift, seed printed to the log at debug level), sometimes after a short
 *      pause, so completions overtake each other as replies from several servers do.
 *   3. A commit's inputs are copied when it is queued (backend.h: they are borrowed only during
 *      the start call); reads keep pointing at their caller's block, which lives until done.
 *   4. close() runs after every operation completed (backend.h contract 6); it stops and joins
 *      the worker.
 *   5. An operation whose deadline (backend.h contract 7) has passed when the worker takes it
 *      completes with transaction_timed_out without running; one that runs completes with its
 *      outcome (it never waits long: the engine is in process).
 */
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "kv/backend.h"

enum { WINDOW = 8 };
enum { Q_READ = 1, Q_GRV, Q_COMMIT };

typedef struct qitem {
    int kind;
    void *req; /* rl__kv_read / rl__kv_grv / commit_copy */
    struct qitem *next;
} qitem;

/* A commit with its own copy of the inputs (invariant 3). */
typedef struct {
    rl__kv_commit inner;  /* what the embedded backend runs */
    rl__kv_commit *outer; /* the caller's block */
    rl_arena arena;       /* the copied bytes */
} commit_copy;

typedef struct {
    rl__kv_backend base; /* must be first */
    rl__kv_backend *in;  /* the embedded backend */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    qitem *head, *tail; /* under mu */
    int stop;           /* under mu */
    uint64_t rng;       /* worker only */
    pthread_t worker;
} deferred;

static uint64_t next_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void enqueue(deferred *d, qitem *it) {
    pthread_mutex_lock(&d->mu);
    it->next = NULL;
    if (d->tail) d->tail->next = it;
    else d->head = it;
    d->tail = it;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void commit_inner_done(rl__kv_commit *c, int err) {
    commit_copy *cc = c->ud;
    rl__kv_commit *o = cc->outer;
    if (err == RL_OK) {
        o->commit_version = c->commit_version;
        o->batch_order = c->batch_order;
    }
    rl__arena_release(&cc->arena);
    rl__free(cc);
    o->done(o, err);
}

/* 1 when deadline (0: none) has passed (invariant 5). */
static int past(uint64_t deadline) { return deadline && rl__clock_mono_ns() >= deadline; }

static void run_item(deferred *d, qitem *it) {
    switch (it->kind) {
    case Q_READ: {
        rl__kv_read *r = it->req;
        if (past(r->deadline_ns)) r->done(r, RL_E_TRANSACTION_TIMED_OUT);
        else d->in->vt->read(d->in, r);
        break;
    }
    case Q_GRV: {
        rl__kv_grv *g = it->req;
        if (past(g->deadline_ns)) g->done(g, RL_E_TRANSACTION_TIMED_OUT);
        else d->in->vt->get_read_version(d->in, g);
        break;
    }
    case Q_COMMIT: {
        commit_copy *cc = it->req;
        if (past(cc->outer->deadline_ns)) commit_inner_done(&cc->inner, RL_E_TRANSACTION_TIMED_OUT);
        else d->in->vt->commit(d->in, &cc->inner);
        break;
    }
    }
    rl__free(it);
}

static void *work(void *ud) {
    deferred *d = ud;
    qitem *batch[WINDOW];
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (!d->head && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        if (!d->head && d->stop) {
            pthread_mutex_unlock(&d->mu);
            return NULL;
        }
        int n = 0;
        while (d->head && n < WINDOW) {
            batch[n++] = d->head;
            d->head = d->head->next;
        }
        if (!d->head) d->tail = NULL;
        pthread_mutex_unlock(&d->mu);
        /* Shuffle (invariant 2), sometimes pause first so callers pipeline more requests. */
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(next_rand(&d->rng) % (uint64_t)(i + 1));
            qitem *t = batch[i];
            batch[i] = batch[j];
            batch[j] = t;
        }
        if (next_rand(&d->rng) % 8 == 0) rl__clock_sleep_us(next_rand(&d->rng) % 50);
        for (int i = 0; i < n; i++) run_item(d, batch[i]);
    }
}

static void push(deferred *d, int kind, void *req, void (*fail)(void *req, int err)) {
    qitem *it = rl__malloc(sizeof *it);
    if (!it) {
        fail(req, RL_E_OUT_OF_MEMORY);
        return;
    }
    it->kind = kind;
    it->req = req;
    enqueue(d, it);
}

static void fail_read(void *req, int err) {
    rl__kv_read *r = req;
    r->done(r, err);
}

static void fail_grv(void *req, int err) {
    rl__kv_grv *g = req;
    g->done(g, err);
}

static void def_read(rl__kv_backend *b, rl__kv_read *r) { push((deferred *)b, Q_READ, r, fail_read); }

static void def_grv(rl__kv_backend *b, rl__kv_grv *g) { push((deferred *)b, Q_GRV, g, fail_grv); }

/* Copy [p, p + n) into arena a; *out NULL on OOM unless n == 0. */
static int dup(rl_arena *a, const uint8_t *p, uint32_t n, const uint8_t **out) {
    *out = rl__arena_memdup(a, p, n);
    return *out ? RL_OK : RL_E_OUT_OF_MEMORY;
}

static int copy_ranges(rl_arena *a, const rl__keyrange *in, size_t n, const rl__keyrange **out) {
    rl__keyrange *v = rl__arena_alloc(a, n * sizeof *v + 1);
    if (!v) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        v[i] = in[i];
        if (dup(a, in[i].begin, in[i].begin_len, &v[i].begin) || dup(a, in[i].end, in[i].end_len, &v[i].end))
            return RL_E_OUT_OF_MEMORY;
    }
    *out = v;
    return RL_OK;
}

static void def_commit(rl__kv_backend *b, rl__kv_commit *c) {
    commit_copy *cc = rl__calloc(1, sizeof *cc);
    if (!cc) {
        c->done(c, RL_E_OUT_OF_MEMORY);
        return;
    }
    rl__arena_init(&cc->arena, 4096);
    cc->outer = c;
    rl__kv_commit *in = &cc->inner;
    in->read_version = c->read_version;
    in->n_reads = c->n_reads;
    in->n_writes = c->n_writes;
    in->n_muts = c->n_muts;
    in->done = commit_inner_done;
    in->ud = cc;
    int rc = copy_ranges(&cc->arena, c->reads, c->n_reads, &in->reads);
    if (rc == RL_OK) rc = copy_ranges(&cc->arena, c->writes, c->n_writes, &in->writes);
    rl__mutation *m = rc ? NULL : rl__arena_alloc(&cc->arena, c->n_muts * sizeof *m + 1);
    if (rc == RL_OK && !m) rc = RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; rc == RL_OK && i < c->n_muts; i++) {
        m[i] = c->muts[i];
        if (dup(&cc->arena, c->muts[i].p1, c->muts[i].len1, &m[i].p1) ||
            dup(&cc->arena, c->muts[i].p2, c->muts[i].len2, &m[i].p2))
            rc = RL_E_OUT_OF_MEMORY;
    }
    in->muts = m;
    qitem *it = rc ? NULL : rl__malloc(sizeof *it);
    if (!it) {
        rl__arena_release(&cc->arena);
        rl__free(cc);
        c->done(c, rc ? rc : RL_E_OUT_OF_MEMORY);
        return;
    }
    it->kind = Q_COMMIT;
    it->req = cc;
    enqueue((deferred *)b, it);
}

static int def_status_json(rl__kv_backend *b, rl_buf *out) {
    deferred *d = (deferred *)b;
    rl__buf_append_str(out, "{\"backend\": \"deferred\", \"inner\": ");
    int rc = d->in->vt->status_json(d->in, out);
    rl__buf_append_str(out, "}");
    return rc ? rc : rl__buf_error(out);
}

static void def_close(rl__kv_backend *b) {
    deferred *d = (deferred *)b;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->worker, NULL);
    d->in->vt->close(d->in);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    rl__free(d);
}

/* The clock is the inner backend's (commits run there, on the worker, one at a time). */
static int def_set_clock(rl__kv_backend *b, uint64_t (*fn)(void *ud), void *ud) {
    deferred *d = (deferred *)b;
    return d->in->vt->set_clock ? d->in->vt->set_clock(d->in, fn, ud) : RL_E_UNSUPPORTED_OPERATION;
}

/* Size estimates run on the inner backend at once (they touch no transaction state, so nothing
 * is gained by deferring them). */
static void def_metrics(rl__kv_backend *b, rl__kv_metrics *m) {
    deferred *d = (deferred *)b;
    d->in->vt->metrics(d->in, m);
}

/* Watches are the inner backend's: a change fires them on the worker, where commits run (so
 * from another thread than the watcher's, as a network backend's); one that already changed
 * when it registers completes inside the call (backend.h allows it for watches). */
static void def_watch(rl__kv_backend *b, rl__kv_watch *w) {
    deferred *d = (deferred *)b;
    d->in->vt->watch(d->in, w);
}

static void def_watch_cancel(rl__kv_backend *b, rl__kv_watch *w) {
    deferred *d = (deferred *)b;
    d->in->vt->watch_cancel(d->in, w);
}

static const rl__kv_backend_vtable deferred_vt = {
    .name = "deferred",
    .completes_inline = 0,
    .close = def_close,
    .get_read_version = def_grv,
    .read = def_read,
    .commit = def_commit,
    .status_json = def_status_json,
    .set_clock = def_set_clock,
    .metrics = def_metrics,
    .watch = def_watch,
    .watch_cancel = def_watch_cancel,
};

int rl__kv_deferred_open(const char *inner_url, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err) {
    char *dir = NULL;
    rl_db_options fo;
    if (!strcmp(inner_url, "mem:")) {
        dir = NULL;
    } else if (!strncmp(inner_url, "file:", 5) && inner_url[5]) {
        int frc = rl__kv_file_url(inner_url + 5, opts, &dir, &fo, err);
        if (frc) return frc;
        opts = &fo;
    } else {
        rl__errdetail_append(err, "defer: wraps mem: or file:DIR, not '%.200s'", inner_url);
        return RL_E_BAD_URL;
    }
    deferred *d = rl__calloc(1, sizeof *d);
    if (!d) {
        rl__free(dir);
        return RL_E_OUT_OF_MEMORY;
    }
    d->base.vt = &deferred_vt;
    int rc = rl__kv_embedded_open(dir, opts, &d->in, err);
    rl__free(dir);
    if (rc) {
        rl__free(d);
        return rc;
    }
    d->rng = rl__clock_mono_ns() | 1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (pthread_create(&d->worker, NULL, work, d) != 0) {
        d->in->vt->close(d->in);
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->cv);
        rl__free(d);
        rl__errdetail_append(err, "cannot start the deferred backend's worker thread");
        return RL_E_OUT_OF_MEMORY;
    }
    *out = &d->base;
    return RL_OK;
}
