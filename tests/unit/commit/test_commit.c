/* test_commit.c — the committer (commit-3.x): group commit over a recording sink (a fixture for
 * the sink contract: it keeps a copy of every apply and counts syncs), write skew, batching with
 * threads, versionstamps, sink failures, fresh read versions and tick requests. */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "commit/commit.h"

/* ---- The recording sink ------------------------------------------------------------------ */

typedef struct {
    rl__version v;
    uint8_t type;
    uint8_t k[64];
    size_t klen;
    uint8_t val[64];
    size_t vlen;
} rec_mut;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rec_mut *muts; /* every mutation applied, in order */
    size_t n, cap;
    rl__version applies[4096]; /* version of each apply */
    size_t n_apply, n_sync;
    int fail_apply_at; /* 1-based apply number that fails with RL_E_IO_ERROR; 0 = never */
    int fail_sync_at;  /* same for sync */
    int gate_closed;   /* apply blocks while set */
    int in_apply;      /* an apply is blocked at the gate */
    uint64_t sync_sleep_us;
} rec_sink;

/* A hand-advanced clock for the sequencer (rl__committer_set_clock): ud is an _Atomic uint64_t
 * of nanoseconds. */
static uint64_t test_clock(void *ud) { return atomic_load((_Atomic uint64_t *)ud); }

static int rec_apply(void *ctx, rl__version v, const rl__mutation *m, size_t n) {
    rec_sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->in_apply = 1;
    pthread_cond_broadcast(&s->cv);
    while (s->gate_closed) pthread_cond_wait(&s->cv, &s->mu);
    s->in_apply = 0;
    s->n_apply++;
    if (s->fail_apply_at && (int)s->n_apply == s->fail_apply_at) {
        pthread_mutex_unlock(&s->mu);
        return RL_E_IO_ERROR;
    }
    if (s->n_apply <= 4096) s->applies[s->n_apply - 1] = v;
    for (size_t i = 0; i < n; i++) {
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 256;
            s->muts = realloc(s->muts, s->cap * sizeof *s->muts);
        }
        rec_mut *r = &s->muts[s->n++];
        r->v = v;
        r->type = m[i].type;
        r->klen = m[i].len1 < 64 ? m[i].len1 : 64;
        memcpy(r->k, m[i].p1, r->klen);
        r->vlen = m[i].len2 < 64 ? m[i].len2 : 64;
        if (r->vlen) memcpy(r->val, m[i].p2, r->vlen);
    }
    pthread_mutex_unlock(&s->mu);
    return RL_OK;
}

static int rec_sync(void *ctx) {
    rec_sink *s = ctx;
    if (s->sync_sleep_us) rl__clock_sleep_us(s->sync_sleep_us);
    pthread_mutex_lock(&s->mu);
    s->n_sync++;
    int fail = s->fail_sync_at && (int)s->n_sync == s->fail_sync_at;
    pthread_mutex_unlock(&s->mu);
    return fail ? RL_E_IO_ERROR : RL_OK;
}

static void rec_init(rec_sink *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void rec_release(rec_sink *s) {
    free(s->muts);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static rl__log_sink sink_of(rec_sink *s) {
    rl__log_sink k = {s, rec_apply, rec_sync};
    return k;
}

static rl__keyrange kr(const char *b, const char *e) {
    rl__keyrange r = {(const uint8_t *)b, (uint32_t)strlen(b), (const uint8_t *)e, (uint32_t)strlen(e)};
    return r;
}

static rl__mutation set_mut(const char *k, const char *v) {
    rl__mutation m = {RL_MUT_SET, (const uint8_t *)k, (uint32_t)strlen(k), (const uint8_t *)v, (uint32_t)strlen(v)};
    return m;
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}

/* commit-3.1: one commit: a version above the recovered one, one apply, one sync, read version. */
TEST(commit_3_1_single_commit) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 5000, &c));
    ASSERT_EQ(rl__committer_read_version(c), 5000);
    ASSERT_EQ(rl__committer_oldest_version(c), 5000); /* the floor: nothing known before */
    rl__mutation m = set_mut("k", "v");
    rl__keyrange w = kr("k", "k\x01");
    rl__commit_request req = {.read_version = 5000, .writes = &w, .n_writes = 1, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &req));
    ASSERT_EQ(req.result, RL_OK);
    ASSERT_TRUE(req.commit_version > 5000);
    ASSERT_EQ(req.batch_order, 0);
    ASSERT_EQ(s.n_apply, 1);
    ASSERT_EQ(s.n_sync, 1);
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.muts[0].v, req.commit_version);
    ASSERT_MEM_EQ(s.muts[0].k, s.muts[0].klen, "k", 1);
    ASSERT_MEM_EQ(s.muts[0].val, s.muts[0].vlen, "v", 1);
    ASSERT_EQ(rl__committer_read_version(c), req.commit_version);
    /* A read older than the recovered version is too old. */
    rl__commit_request old = {.read_version = 4999, .reads = &w, .n_reads = 1, .writes = &w, .n_writes = 1};
    ASSERT_RC(rl__committer_commit(c, &old), RL_E_TRANSACTION_TOO_OLD);
    /* A read version never handed out is a future version. */
    rl__commit_request fut = {.read_version = req.commit_version + 1, .writes = &w, .n_writes = 1};
    ASSERT_RC(rl__committer_commit(c, &fut), RL_E_FUTURE_VERSION);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.batches, 1);
    ASSERT_EQ(st.committed, 1);
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.2: read-only requests commit trivially without a version and never conflict. */
TEST(commit_3_2_read_only) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    rl__version rv = rl__committer_read_version(c);
    rl__mutation m = set_mut("x", "1");
    rl__keyrange wx = kr("x", "x\x01");
    rl__commit_request w = {.read_version = rv, .writes = &wx, .n_writes = 1, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &w));
    /* Read x at the old version: a conflict if it wrote, but read-only transactions commit. */
    rl__commit_request ro = {.read_version = rv, .reads = &wx, .n_reads = 1};
    ASSERT_OK(rl__committer_commit(c, &ro));
    ASSERT_EQ(ro.commit_version, 0);
    ASSERT_EQ(s.n_apply, 1);
    ASSERT_EQ(s.n_sync, 1);
    /* With a write range it conflicts. */
    rl__commit_request rw = {.read_version = rv, .reads = &wx, .n_reads = 1, .writes = &wx, .n_writes = 1};
    ASSERT_RC(rl__committer_commit(c, &rw), RL_E_NOT_COMMITTED);
    ASSERT_EQ(rw.commit_version, 0);
    ASSERT_EQ(s.n_apply, 1); /* nothing committed: no apply */
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.3: write skew across batches: T1 and T2 both read x and y at the same version, T1
 * writes x, T2 writes y: the second to commit fails. */
TEST(commit_3_3_write_skew_sequential) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    rl__version rv = rl__committer_read_version(c);
    rl__keyrange reads[2] = {kr("x", "x\x01"), kr("y", "y\x01")};
    rl__mutation mx = set_mut("x", "from-t1"), my = set_mut("y", "from-t2");
    rl__commit_request t1 = {
        .read_version = rv, .reads = reads, .n_reads = 2, .writes = &reads[0], .n_writes = 1, .muts = &mx, .n_muts = 1};
    rl__commit_request t2 = {
        .read_version = rv, .reads = reads, .n_reads = 2, .writes = &reads[1], .n_writes = 1, .muts = &my, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &t1));
    ASSERT_RC(rl__committer_commit(c, &t2), RL_E_NOT_COMMITTED);
    /* Retried at the new read version, it commits. */
    t2.read_version = rl__committer_read_version(c);
    ASSERT_OK(rl__committer_commit(c, &t2));
    ASSERT_TRUE(t2.commit_version > t1.commit_version);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.conflicts, 1);
    ASSERT_EQ(st.committed, 2);
    rl__committer_free(c);
    rec_release(&s);
}

/* ---- Threads ------------------------------------------------------------------------------ */

typedef struct {
    rl__committer *c;
    rl__commit_request *req;
} commit_arg;

static void *commit_thread(void *p) {
    commit_arg *a = p;
    rl__committer_commit(a->c, a->req);
    return NULL;
}

static void wait_queued(rl__committer *c, uint64_t n) {
    uint64_t t0 = rl__clock_mono_ns();
    for (;;) {
        rl__committer_stats st;
        rl__committer_get_stats(c, &st);
        if (st.queued >= n) return;
        if (rl__clock_mono_ns() - t0 > 10000000000ull) fail_msg("%llu requests never queued", (unsigned long long)n);
        rl__clock_sleep_us(200);
    }
}

static void wait_in_apply(rec_sink *s) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    while (!s->in_apply && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0) {}
    int in = s->in_apply;
    pthread_mutex_unlock(&s->mu);
    if (!in) fail_msg("no apply reached the gate");
}

static void open_gate(rec_sink *s) {
    pthread_mutex_lock(&s->mu);
    s->gate_closed = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* commit-3.4: write skew inside one batch: T1 and T2 queue behind a running batch and form the
 * next one; T1 (first) commits at order 0 and its write conflicts with T2's read. */
TEST(commit_3_4_write_skew_same_batch) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    rl__version rv = rl__committer_read_version(c);
    rl__keyrange reads[2] = {kr("x", "x\x01"), kr("y", "y\x01")};
    rl__keyrange wz = kr("z", "z\x01");
    rl__mutation mz = set_mut("z", "0"), mx = set_mut("x", "1"), my = set_mut("y", "2");
    rl__commit_request t0 = {.read_version = rv, .writes = &wz, .n_writes = 1, .muts = &mz, .n_muts = 1};
    rl__commit_request t1 = {
        .read_version = rv, .reads = reads, .n_reads = 2, .writes = &reads[0], .n_writes = 1, .muts = &mx, .n_muts = 1};
    rl__commit_request t2 = {
        .read_version = rv, .reads = reads, .n_reads = 2, .writes = &reads[1], .n_writes = 1, .muts = &my, .n_muts = 1};
    commit_arg a0 = {c, &t0}, a1 = {c, &t1}, a2 = {c, &t2};
    pthread_t th0, th1, th2;
    s.gate_closed = 1;
    ASSERT_EQ(pthread_create(&th0, NULL, commit_thread, &a0), 0);
    wait_in_apply(&s);
    ASSERT_EQ(pthread_create(&th1, NULL, commit_thread, &a1), 0);
    wait_queued(c, 1);
    ASSERT_EQ(pthread_create(&th2, NULL, commit_thread, &a2), 0);
    wait_queued(c, 2);
    open_gate(&s);
    pthread_join(th0, NULL);
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    ASSERT_EQ(t0.result, RL_OK);
    ASSERT_EQ(t1.result, RL_OK);
    ASSERT_EQ(t1.batch_order, 0);
    ASSERT_EQ(t2.result, RL_E_NOT_COMMITTED);
    ASSERT_EQ(t2.batch_order, 1);
    ASSERT_TRUE(t1.commit_version > t0.commit_version);
    ASSERT_EQ(s.n_apply, 2); /* t0's batch, then t1+t2's batch */
    ASSERT_EQ(s.n_sync, 2);
    ASSERT_EQ(s.n, 2);
    ASSERT_MEM_EQ(s.muts[1].k, s.muts[1].klen, "x", 1);
    rl__committer_free(c);
    rec_release(&s);
}

#define NT 8
#define PER 150

typedef struct {
    rl__committer *c;
    int id;
    rl__version versions[PER];
    uint16_t orders[PER];
    int results[PER];
} worker;

/* Each commit writes key "t<id>-<i>" with a SET_VERSIONSTAMPED_VALUE whose value is
 * "vs" + 10 placeholder bytes + offset 2, and reads its own key (no cross-thread conflicts). */
static void *worker_main(void *p) {
    worker *w = p;
    for (int i = 0; i < PER; i++) {
        char key[32];
        snprintf(key, sizeof key, "t%d-%03d", w->id, i);
        uint8_t val[16] = {'v', 's', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
        rl__mutation m = {RL_MUT_SET_VERSIONSTAMPED_VALUE, (const uint8_t *)key, (uint32_t)strlen(key), val, 16};
        rl__keyrange r = {(const uint8_t *)key, (uint32_t)strlen(key), (const uint8_t *)key, (uint32_t)strlen(key) + 1};
        rl__commit_request req = {.read_version = rl__committer_read_version(w->c),
                                  .reads = &r,
                                  .n_reads = 1,
                                  .writes = &r,
                                  .n_writes = 1,
                                  .muts = &m,
                                  .n_muts = 1};
        w->results[i] = rl__committer_commit(w->c, &req);
        w->versions[i] = req.commit_version;
        w->orders[i] = req.batch_order;
    }
    return NULL;
}

/* commit-3.5: N threads commit concurrently: batches form; versions strictly increase per batch;
 * orders are unique within a batch; versionstamps are unique and increase in commit order; each
 * request's (version, order) is the stamp written into its value. */
TEST(commit_3_5_batching_threads) {
    rec_sink s;
    rec_init(&s);
    s.sync_sleep_us = 300; /* a slow sync lets more batches form */
    s.gate_closed = 1;     /* the first batch waits at the gate until others queued behind it */
    rl__committer *c;
    rl__committer_options o = {0, 64};
    ASSERT_OK(rl__committer_new(&o, sink_of(&s), 100, &c));
    static worker ws[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        ws[i].c = c;
        ws[i].id = i;
        ASSERT_EQ(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0);
    }
    wait_in_apply(&s);
    wait_queued(c, 2); /* so the next batch holds at least two requests (arranged, not hoped for) */
    open_gate(&s);
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    ASSERT_EQ(s.n, NT * PER);
    ASSERT_EQ(s.n_apply, s.n_sync);
    ASSERT_TRUE(s.n_apply < NT * PER); /* some batch held more than one request */
    for (size_t i = 1; i < s.n_apply; i++) ASSERT_TRUE(s.applies[i] > s.applies[i - 1]);
    /* Stamps in log order: strictly increasing (version, order), version == the apply's. */
    for (size_t i = 0; i < s.n; i++) {
        const rec_mut *m = &s.muts[i];
        ASSERT_EQ(m->type, RL_MUT_SET);
        ASSERT_EQ(m->vlen, 12);
        ASSERT_MEM_EQ(m->val, 2, "vs", 2);
        ASSERT_EQ(be64(m->val + 2), m->v);
        if (i > 0) ASSERT_TRUE(memcmp(m->val + 2, s.muts[i - 1].val + 2, 10) > 0);
    }
    /* Each request's result matches the stamp recorded for its key. */
    for (int t = 0; t < NT; t++) {
        for (int i = 0; i < PER; i++) {
            ASSERT_EQ(ws[t].results[i], RL_OK);
            char key[32];
            snprintf(key, sizeof key, "t%d-%03d", t, i);
            size_t j = 0;
            while (j < s.n && (s.muts[j].klen != strlen(key) || memcmp(s.muts[j].k, key, strlen(key)) != 0)) j++;
            ASSERT_TRUE(j < s.n);
            ASSERT_EQ(be64(s.muts[j].val + 2), ws[t].versions[i]);
            ASSERT_EQ((s.muts[j].val[10] << 8) | s.muts[j].val[11], ws[t].orders[i]);
            if (i > 0) ASSERT_TRUE(ws[t].versions[i] > ws[t].versions[i - 1]);
        }
    }
    ASSERT_EQ(rl__committer_read_version(c), s.applies[s.n_apply - 1]);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.committed, NT * PER);
    ASSERT_EQ(st.batches, s.n_apply);
    ASSERT_EQ(st.queued, 0);
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.6: rl__versionstamp_substitute edge cases. */
TEST(commit_3_6_versionstamp_substitute) {
    rl_buf out;
    rl__buf_init(&out);
    const rl__version v = 0x0102030405060708ull;
    const uint8_t stamp[10] = {1, 2, 3, 4, 5, 6, 7, 8, 0xab, 0xcd};
    /* Offset 0, exactly 10 bytes. */
    uint8_t p0[14] = {0};
    ASSERT_OK(rl__versionstamp_substitute(p0, 14, v, 0xabcd, &out));
    ASSERT_MEM_EQ(out.data, out.len, stamp, 10);
    /* The last offset that fits: prefix "ab", stamp at 2..12 of a 12-byte body. */
    uint8_t p1[16] = {'a', 'b', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
    rl__buf_reset(&out);
    ASSERT_OK(rl__versionstamp_substitute(p1, 16, v, 0xabcd, &out));
    ASSERT_EQ(out.len, 12);
    ASSERT_MEM_EQ(out.data, 2, "ab", 2);
    ASSERT_MEM_EQ(out.data + 2, 10, stamp, 10);
    /* Suffix kept after the stamp. */
    uint8_t p2[17] = {'a', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'y', 'z', 1, 0, 0, 0};
    rl__buf_reset(&out);
    ASSERT_OK(rl__versionstamp_substitute(p2, 17, v, 0xabcd, &out));
    ASSERT_EQ(out.len, 13);
    ASSERT_EQ(out.data[0], 'a');
    ASSERT_MEM_EQ(out.data + 1, 10, stamp, 10);
    ASSERT_MEM_EQ(out.data + 11, 2, "yz", 2);
    /* One past the last offset that fits. */
    uint8_t p3[16] = {'a', 'b', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0};
    rl__buf_reset(&out);
    ASSERT_RC(rl__versionstamp_substitute(p3, 16, v, 0, &out), RL_E_CLIENT_INVALID_OPERATION);
    /* Huge offsets (no wrap-around), little-endian decoding (0x00000100 = 256). */
    uint8_t p4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    ASSERT_RC(rl__versionstamp_substitute(p4, 16, v, 0, &out), RL_E_CLIENT_INVALID_OPERATION);
    uint8_t p5[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
    ASSERT_RC(rl__versionstamp_substitute(p5, 16, v, 0, &out), RL_E_CLIENT_INVALID_OPERATION);
    /* Too short for the offset, too short for the stamp. */
    ASSERT_RC(rl__versionstamp_substitute(p0, 3, v, 0, &out), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_RC(rl__versionstamp_substitute(p0, 0, v, 0, &out), RL_E_CLIENT_INVALID_OPERATION);
    uint8_t p6[13] = {0};
    ASSERT_RC(rl__versionstamp_substitute(p6, 13, v, 0, &out), RL_E_CLIENT_INVALID_OPERATION);
    rl__buf_release(&out);
}

/* commit-3.7: versionstamped key and value through the committer; a bad offset fails only its
 * own request and poisons nothing. */
TEST(commit_3_7_versionstamp_commit) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    uint8_t key[15] = {'k', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    uint8_t bad[15] = {'k', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0};
    rl__mutation mk = {RL_MUT_SET_VERSIONSTAMPED_KEY, key, 15, (const uint8_t *)"val", 3};
    rl__mutation mb[2] = {set_mut("other", "x"), {RL_MUT_SET_VERSIONSTAMPED_KEY, bad, 15, (const uint8_t *)"val", 3}};
    rl__keyrange wr = kr("k", "l");
    rl__commit_request good = {.read_version = 0, .writes = &wr, .n_writes = 1, .muts = &mk, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &good));
    ASSERT_EQ(s.n, 1);
    ASSERT_EQ(s.muts[0].type, RL_MUT_SET);
    ASSERT_EQ(s.muts[0].klen, 11);
    ASSERT_EQ(s.muts[0].k[0], 'k');
    ASSERT_EQ(be64(s.muts[0].k + 1), good.commit_version);
    ASSERT_EQ(s.muts[0].k[9], 0);
    ASSERT_EQ(s.muts[0].k[10], 0);
    ASSERT_MEM_EQ(s.muts[0].val, s.muts[0].vlen, "val", 3);
    rl__commit_request req = {.read_version = 0, .writes = &wr, .n_writes = 1, .muts = mb, .n_muts = 2};
    ASSERT_RC(rl__committer_commit(c, &req), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_EQ(s.n, 1); /* neither mutation of the failed request reached the sink */
    /* Its write range was not remembered either: a read of [k, l) at the good version commits. */
    rl__commit_request after = {.read_version = good.commit_version,
                                .reads = &wr,
                                .n_reads = 1,
                                .writes = &wr,
                                .n_writes = 1,
                                .muts = &mk,
                                .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &after));
    ASSERT_EQ(s.n, 2);
    /* An unknown mutation type and an inverted clear are refused per request. */
    rl__mutation unk = {99, (const uint8_t *)"a", 1, NULL, 0};
    rl__commit_request ru = {.read_version = 0, .muts = &unk, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &ru), RL_E_INVALID_MUTATION_TYPE);
    rl__mutation inv = {RL_MUT_CLEAR_RANGE, (const uint8_t *)"b", 1, (const uint8_t *)"a", 1};
    rl__commit_request ri = {.read_version = 0, .muts = &inv, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &ri), RL_E_INVERTED_RANGE);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.poisoned, 0);
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.8: a failed apply or sync fails the whole batch and poisons the committer: later
 * commits fail without reaching the sink and the read version stays where it was. */
static void poison_case(int fail_apply) {
    rec_sink s;
    rec_init(&s);
    if (fail_apply) s.fail_apply_at = 2;
    else s.fail_sync_at = 2;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    rl__mutation m = set_mut("a", "1");
    rl__commit_request r1 = {.read_version = 0, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &r1));
    rl__version rv = rl__committer_read_version(c);
    ASSERT_EQ(rv, r1.commit_version);
    /* The next batch fails; the one after never reaches the sink. */
    rl__commit_request r2 = {.read_version = rv, .muts = &m, .n_muts = 1};
    rl__commit_request r3 = {.read_version = rv, .muts = &m, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &r2), RL_E_COMMIT_UNKNOWN_RESULT);
    ASSERT_EQ(r2.commit_version, 0);
    size_t applies = s.n_apply, syncs = s.n_sync;
    ASSERT_RC(rl__committer_commit(c, &r3), RL_E_IO_ERROR);
    ASSERT_EQ(s.n_apply, applies);
    ASSERT_EQ(s.n_sync, syncs);
    ASSERT_EQ(rl__committer_read_version(c), rv);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.poisoned, 1);
    rl__committer_free(c);
    rec_release(&s);
}

TEST(commit_3_8_sink_apply_failure_poisons) { poison_case(1); }

TEST(commit_3_9_sink_sync_failure_poisons) { poison_case(0); }

/* commit-3.10: a sink failure fails every request of its batch, including queued ones. */
TEST(commit_3_10_sink_failure_fails_whole_batch) {
    rec_sink s;
    rec_init(&s);
    s.fail_apply_at = 2;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    rl__mutation ma = set_mut("a", "1"), mb = set_mut("b", "1"), mc = set_mut("c", "1");
    rl__commit_request t0 = {.muts = &ma, .n_muts = 1}, t1 = {.muts = &mb, .n_muts = 1},
                       t2 = {.muts = &mc, .n_muts = 1};
    commit_arg a0 = {c, &t0}, a1 = {c, &t1}, a2 = {c, &t2};
    pthread_t th0, th1, th2;
    s.gate_closed = 1;
    ASSERT_EQ(pthread_create(&th0, NULL, commit_thread, &a0), 0);
    wait_in_apply(&s);
    ASSERT_EQ(pthread_create(&th1, NULL, commit_thread, &a1), 0);
    ASSERT_EQ(pthread_create(&th2, NULL, commit_thread, &a2), 0);
    wait_queued(c, 2);
    open_gate(&s);
    pthread_join(th0, NULL);
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    ASSERT_EQ(t0.result, RL_OK);
    ASSERT_EQ(t1.result, RL_E_COMMIT_UNKNOWN_RESULT);
    ASSERT_EQ(t2.result, RL_E_COMMIT_UNKNOWN_RESULT);
    ASSERT_EQ(s.n_apply, 2);
    ASSERT_EQ(s.n_sync, 1);
    ASSERT_EQ(rl__committer_read_version(c), t0.commit_version);
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.11: the window: a read version more than window_versions behind the newest commit is
 * too old (with reads); a blind write with the same read version commits. */
TEST(commit_3_11_too_old) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    rl__committer_options o = {1000, 0};
    ASSERT_OK(rl__committer_new(&o, sink_of(&s), 0, &c));
    _Atomic uint64_t now = 1000000000; /* the sequencer's clock: advanced by hand, never slept */
    rl__committer_set_clock(c, test_clock, &now);
    rl__mutation m = set_mut("a", "1");
    rl__keyrange ra = kr("a", "a\x01");
    rl__commit_request r1 = {.read_version = 0, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &r1));
    rl__version rv = r1.commit_version;
    /* Inside the window: not too old. */
    now += 500000; /* 500 versions */
    rl__commit_request young = {.read_version = rv, .reads = &ra, .n_reads = 1, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &young));
    ASSERT_EQ(young.commit_version, 500); /* the clock, not the wall: 0 + 500 us of versions */
    now += 5000000;                       /* 5,000 versions later: rv fell out of the 1,000-version window */
    rl__commit_request old = {.read_version = rv, .reads = &ra, .n_reads = 1, .muts = &m, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &old), RL_E_TRANSACTION_TOO_OLD);
    ASSERT_TRUE(rl__committer_oldest_version(c) > rv);
    rl__commit_request blind = {.read_version = rv, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &blind));
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.12: bad options. */
TEST(commit_3_12_bad_options) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c = NULL;
    rl__committer_options o = {0, -1};
    ASSERT_RC(rl__committer_new(&o, sink_of(&s), 0, &c), RL_E_INVALID_ARGUMENT);
    rl__log_sink none = {NULL, NULL, NULL};
    ASSERT_RC(rl__committer_new(NULL, none, 0, &c), RL_E_INVALID_ARGUMENT);
    ASSERT_NULL(c);
    rl__committer_free(NULL);
    rec_release(&s);
}

/* commit-3.13: fresh read versions (the embedded backend's): with nothing committing,
 * rl__committer_fresh_read_version follows the sequencer's clock instead of staying at the newest
 * durable batch, so after an idle spell longer than the window a read-then-write transaction at
 * it commits, and a transaction too old for the window gets a newer version when it asks again.
 * Reserving consumes no version and no batch; a read version above every version handed out is
 * still future_version; while a batch runs or once poisoned, nothing is reserved. */
TEST(commit_3_13_fresh_read_version) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    rl__committer_options o = {1000, 0}; /* a window of 1,000 versions (1 ms) */
    ASSERT_OK(rl__committer_new(&o, sink_of(&s), 0, &c));
    _Atomic uint64_t now = 1000000000; /* the sequencer's clock: advanced by hand, never slept */
    rl__committer_set_clock(c, test_clock, &now);
    rl__mutation m = set_mut("a", "1");
    rl__keyrange ra = kr("a", "a\x01");
    rl__commit_request r1 = {.read_version = 0, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &r1));
    rl__version c1 = r1.commit_version;
    ASSERT_EQ(rl__committer_fresh_read_version(c), c1); /* the clock has not moved: no newer version */
    /* Idle for ten windows: the durable version stays, a fresh read version follows the clock. */
    rl__version stale = rl__committer_read_version(c);
    now += 10000000; /* 10,000 versions */
    rl__version rv = rl__committer_fresh_read_version(c);
    ASSERT_TRUE(rv >= c1 + 9999);
    ASSERT_EQ(rl__committer_read_version(c), c1); /* nothing was committed or synced */
    ASSERT_EQ(rl__committer_read_ceiling(c), rv);
    ASSERT_EQ(rl__committer_fresh_read_version(c), rv); /* the same microsecond: shared, not consumed */
    ASSERT_EQ(s.n_apply, 1);
    ASSERT_EQ(s.n_sync, 1);
    /* The stale read version is too old for a read-then-write transaction; the fresh one commits,
     * above it. */
    rl__commit_request old = {.read_version = stale, .reads = &ra, .n_reads = 1, .muts = &m, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &old), RL_E_TRANSACTION_TOO_OLD);
    rl__commit_request young = {.read_version = rv, .reads = &ra, .n_reads = 1, .muts = &m, .n_muts = 1};
    ASSERT_OK(rl__committer_commit(c, &young));
    ASSERT_TRUE(young.commit_version > rv);
    ASSERT_EQ(rl__committer_read_version(c), young.commit_version);
    ASSERT_EQ(rl__committer_read_ceiling(c), young.commit_version);
    /* Above every version handed out: future_version, as before. */
    rl__commit_request fut = {
        .read_version = young.commit_version + 1, .reads = &ra, .n_reads = 1, .muts = &m, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &fut), RL_E_FUTURE_VERSION);
    /* While a batch runs, the newest version handed out, not a reservation (the clock moved). */
    rl__version before = rl__committer_read_ceiling(c);
    rl__commit_request t0 = {.read_version = 0, .muts = &m, .n_muts = 1};
    commit_arg a0 = {c, &t0};
    pthread_t th0;
    s.gate_closed = 1;
    ASSERT_EQ(pthread_create(&th0, NULL, commit_thread, &a0), 0);
    wait_in_apply(&s);
    now += 10000000;
    ASSERT_EQ(rl__committer_fresh_read_version(c), before);
    open_gate(&s);
    pthread_join(th0, NULL);
    ASSERT_EQ(t0.result, RL_OK);
    ASSERT_EQ(rl__committer_read_ceiling(c), t0.commit_version);
    /* Poisoned (a failed sync): nothing is reserved any more, however far the clock moves. */
    s.fail_sync_at = (int)s.n_sync + 1;
    rl__commit_request bad = {.read_version = 0, .muts = &m, .n_muts = 1};
    ASSERT_RC(rl__committer_commit(c, &bad), RL_E_COMMIT_UNKNOWN_RESULT);
    now += 10000000;
    ASSERT_EQ(rl__committer_fresh_read_version(c), t0.commit_version);
    rl__committer_free(c);
    rec_release(&s);
}

/* commit-3.14: a tick request (is_tick; the coordinator's version tick) commits an empty batch:
 * it gets a version, reaches the sink (one apply of no mutation, one sync) and advances the
 * durable version, counted in ticks, not committed; the same request without is_tick is
 * read-only and gets no version. */
TEST(commit_3_14_tick) {
    rec_sink s;
    rec_init(&s);
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 100, &c));
    rl__commit_request plain = {.read_version = 0};
    ASSERT_OK(rl__committer_commit(c, &plain));
    ASSERT_EQ(plain.commit_version, 0);
    ASSERT_EQ(s.n_apply, 0);
    rl__commit_request tick = {.read_version = 0, .is_tick = 1};
    ASSERT_OK(rl__committer_commit(c, &tick));
    ASSERT_TRUE(tick.commit_version > 100);
    ASSERT_EQ(s.n_apply, 1);
    ASSERT_EQ(s.n_sync, 1);
    ASSERT_EQ(s.n, 0); /* no mutation */
    ASSERT_EQ(s.applies[0], tick.commit_version);
    ASSERT_EQ(rl__committer_read_version(c), tick.commit_version);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.batches, 1);
    ASSERT_EQ(st.ticks, 1);
    ASSERT_EQ(st.committed, 0);
    rl__committer_free(c);
    rec_release(&s);
}

RL_TEST_MAIN(T(commit_3_1_single_commit), T(commit_3_2_read_only), T(commit_3_3_write_skew_sequential),
             T(commit_3_4_write_skew_same_batch), T(commit_3_5_batching_threads), T(commit_3_6_versionstamp_substitute),
             T(commit_3_7_versionstamp_commit), T(commit_3_8_sink_apply_failure_poisons),
             T(commit_3_9_sink_sync_failure_poisons), T(commit_3_10_sink_failure_fails_whole_batch),
             T(commit_3_11_too_old), T(commit_3_12_bad_options), T(commit_3_13_fresh_read_version), T(commit_3_14_tick))
