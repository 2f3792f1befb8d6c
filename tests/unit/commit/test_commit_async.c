/* test_commit_async.c — the committer's asynchronous API (rl__committer_submit), commit-4.x:
 * done callbacks on the committer's own thread, group commit while a sync runs, the byte bound,
 * read-only requests, conflicts inside a batch, blocking commits beside submits, sink failures,
 * free with requests queued, and tick requests. The sink records each apply, can sleep in sync,
 * and can hold its first sync until the test opens a gate (so "requests that arrive while a sync
 * runs" is arranged, not hoped for from a sleep). */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "base/clock.h"
#include "commit/commit.h"

typedef struct {
    pthread_mutex_t mu;
    size_t applies;          /* apply calls */
    size_t batch_muts[1024]; /* mutations per apply */
    rl__version versions[1024];
    size_t syncs;
    uint64_t sync_sleep_us;
    int fail_sync_at;  /* 1-based sync that fails with RL_E_IO_ERROR; 0: never */
    pthread_cond_t cv; /* the gate's (with mu) */
    int gate;          /* 1: the first sync waits for gate_open (gate_wait_held, gate_release) */
    int gate_held;     /* the first sync is waiting at the gate */
    int gate_open;
} sink_rec;

static int rec_apply(void *ctx, rl__version v, const rl__mutation *m, size_t n) {
    (void)m;
    sink_rec *s = ctx;
    pthread_mutex_lock(&s->mu);
    if (s->applies < 1024) {
        s->batch_muts[s->applies] = n;
        s->versions[s->applies] = v;
    }
    s->applies++;
    pthread_mutex_unlock(&s->mu);
    return RL_OK;
}

static int rec_sync(void *ctx) {
    sink_rec *s = ctx;
    if (s->sync_sleep_us) rl__clock_sleep_us(s->sync_sleep_us);
    pthread_mutex_lock(&s->mu);
    if (s->gate && !s->gate_held) {
        /* Held until the test opens the gate (at most 30 s, then the sync goes on: the test's
         * own wait fails first). */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 30;
        s->gate_held = 1;
        pthread_cond_broadcast(&s->cv);
        while (!s->gate_open && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0) {}
    }
    int fail = s->fail_sync_at && (int)++s->syncs == s->fail_sync_at;
    if (!s->fail_sync_at) s->syncs++;
    pthread_mutex_unlock(&s->mu);
    return fail ? RL_E_IO_ERROR : RL_OK;
}

static rl__log_sink sink_of(sink_rec *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    rl__log_sink k = {s, rec_apply, rec_sync};
    return k;
}

/* One submitted transaction: a SET of key k (and its write range), optionally a read of r. */
typedef struct {
    rl__commit_request req;
    char k[16], kend[17], r[16], rend[17];
    rl__mutation m;
    rl__keyrange w, rd;
    atomic_int done;  /* times done was called */
    pthread_t thread; /* where done ran */
} job;

static void job_init(job *j, const char *key, const char *read_key, rl__version rv) {
    memset(j, 0, sizeof *j);
    snprintf(j->k, sizeof j->k, "%s", key);
    size_t kl = strlen(j->k);
    memcpy(j->kend, j->k, kl + 1);
    j->kend[kl] = 0;
    j->m = (rl__mutation){RL_MUT_SET, (const uint8_t *)j->k, (uint32_t)kl, (const uint8_t *)"v", 1};
    j->w = (rl__keyrange){(const uint8_t *)j->k, (uint32_t)kl, (const uint8_t *)j->kend, (uint32_t)kl + 1};
    j->req.read_version = rv;
    j->req.muts = &j->m;
    j->req.n_muts = 1;
    j->req.writes = &j->w;
    j->req.n_writes = 1;
    if (read_key) {
        snprintf(j->r, sizeof j->r, "%s", read_key);
        size_t rl = strlen(j->r);
        memcpy(j->rend, j->r, rl + 1);
        j->rd = (rl__keyrange){(const uint8_t *)j->r, (uint32_t)rl, (const uint8_t *)j->rend, (uint32_t)rl + 1};
        j->req.reads = &j->rd;
        j->req.n_reads = 1;
    }
}

static void on_done(rl__commit_request *req, void *ud) {
    job *j = ud;
    (void)req;
    j->thread = pthread_self();
    atomic_fetch_add(&j->done, 1);
}

/* Wait (bounded: 10 s) until every job of js[0..n) is done. */
/* Wait (at most 10 s) until the first sync is held at the gate: its batch is syncing. */
static void gate_wait_held(sink_rec *s) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    while (!s->gate_held && pthread_cond_timedwait(&s->cv, &s->mu, &dl) == 0) {}
    int held = s->gate_held;
    pthread_mutex_unlock(&s->mu);
    if (!held) fail_msg("the first sync never started");
}

/* Let the held sync finish. */
static void gate_release(sink_rec *s) {
    pthread_mutex_lock(&s->mu);
    s->gate_open = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void wait_jobs(job *js, int n) {
    uint64_t t0 = rl__clock_mono_ns();
    for (int i = 0; i < n; i++)
        while (atomic_load(&js[i].done) == 0) {
            if (rl__clock_mono_ns() - t0 > 10000000000ull) fail_msg("job %d never completed", i);
            rl__clock_sleep_us(200);
        }
}

/* commit-4.1: every submit is done exactly once, on one thread that is not the submitter's, with
 * increasing versions and unique (version, order) pairs. */
TEST(commit_4_1_submit_done_on_committer_thread) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 100, &c));
    enum { N = 300 };
    job *js = calloc(N, sizeof *js);
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%03d", i);
        job_init(&js[i], k, NULL, 100);
        ASSERT_OK(rl__committer_submit(c, &js[i].req, on_done, &js[i]));
    }
    wait_jobs(js, N);
    pthread_t t = js[0].thread;
    ASSERT_FALSE(pthread_equal(t, pthread_self()));
    for (int i = 0; i < N; i++) {
        ASSERT_EQ(atomic_load(&js[i].done), 1);
        ASSERT_TRUE(pthread_equal(js[i].thread, t));
        ASSERT_OK(js[i].req.result);
        ASSERT_TRUE(js[i].req.commit_version > 100);
        if (i > 0) {
            const rl__commit_request *a = &js[i - 1].req, *b = &js[i].req;
            ASSERT_TRUE(a->commit_version < b->commit_version ||
                        (a->commit_version == b->commit_version && a->batch_order < b->batch_order));
        }
    }
    ASSERT_EQ(rl__committer_read_version(c), js[N - 1].req.commit_version);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.committed, N);
    printf("%d submits in %llu batches\n", N, (unsigned long long)st.batches);
    rl__committer_free(c);
    free(js);
}

/* commit-4.2: requests that arrive while a sync runs form the next batch (group commit); with a
 * byte bound a batch holds at most what fits (at least one request). */
TEST(commit_4_2_group_commit_and_byte_bound) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    s.gate = 1;
    enum { N = 40 };
    job js[N + 1];
    job_init(&js[0], "first", NULL, 0);
    ASSERT_OK(rl__committer_submit(c, &js[0].req, on_done, &js[0]));
    gate_wait_held(&s); /* the first batch is syncing now */
    for (int i = 1; i <= N; i++) {
        char k[16];
        snprintf(k, sizeof k, "g%02d", i);
        job_init(&js[i], k, NULL, 0);
        ASSERT_OK(rl__committer_submit(c, &js[i].req, on_done, &js[i]));
    }
    gate_release(&s);
    wait_jobs(js, N + 1);
    ASSERT_EQ(s.applies, 2);
    ASSERT_EQ(s.batch_muts[0], 1);
    ASSERT_EQ(s.batch_muts[1], N);
    for (int i = 2; i <= N; i++) ASSERT_EQ(js[i].req.commit_version, js[1].req.commit_version);
    rl__committer_free(c);

    /* Each mutation is SET "gNN" = "v": 3 + 1 + 9 = 13 bytes as a log record; a bound of 30 bytes
     * takes two per batch. */
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    rl__committer_set_max_batch_bytes(c, 30);
    s.gate = 1;
    job_init(&js[0], "first", NULL, 0); /* alone in its batch anyway */
    ASSERT_OK(rl__committer_submit(c, &js[0].req, on_done, &js[0]));
    gate_wait_held(&s);
    for (int i = 1; i <= 6; i++) {
        char k[16];
        snprintf(k, sizeof k, "g%02d", i);
        job_init(&js[i], k, NULL, 0);
        ASSERT_OK(rl__committer_submit(c, &js[i].req, on_done, &js[i]));
    }
    gate_release(&s);
    wait_jobs(js, 7);
    ASSERT_EQ(s.applies, 4);
    for (size_t b = 1; b < 4; b++) ASSERT_EQ(s.batch_muts[b], 2);
    rl__committer_free(c);
}

/* commit-4.3: read-only requests are done without a batch; inside one batch a committed write
 * conflicts with a later read of the same key (not_committed); a too-new read version is
 * future_version. */
TEST(commit_4_3_read_only_conflicts_future) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 50, &c));
    s.gate = 1;
    job ro, a, b, blocker, fut;
    job_init(&blocker, "z", NULL, 50);
    ASSERT_OK(rl__committer_submit(c, &blocker.req, on_done, &blocker));
    gate_wait_held(&s);          /* a, b, fut and ro arrive while the blocker's batch syncs */
    job_init(&a, "x", NULL, 50); /* writes x */
    job_init(&b, "y", "x", 50);  /* read x at 50: conflicts with a in the same batch */
    job_init(&fut, "w", "w", 1u << 30);
    job_init(&ro, "r", "r", 50);
    ro.req.n_muts = 0;
    ro.req.n_writes = 0;
    ASSERT_OK(rl__committer_submit(c, &a.req, on_done, &a));
    ASSERT_OK(rl__committer_submit(c, &b.req, on_done, &b));
    ASSERT_OK(rl__committer_submit(c, &fut.req, on_done, &fut));
    ASSERT_OK(rl__committer_submit(c, &ro.req, on_done, &ro));
    gate_release(&s);
    wait_jobs(&blocker, 1);
    wait_jobs(&a, 1);
    wait_jobs(&b, 1);
    wait_jobs(&fut, 1);
    wait_jobs(&ro, 1);
    ASSERT_OK(a.req.result);
    ASSERT_RC(b.req.result, RL_E_NOT_COMMITTED);
    ASSERT_RC(fut.req.result, RL_E_FUTURE_VERSION);
    ASSERT_OK(ro.req.result);
    ASSERT_EQ(ro.req.commit_version, 0);
    ASSERT_EQ(s.applies, 2); /* the blocker's batch and a's: the read-only one took none */
    rl__committer_free(c);
}

typedef struct {
    rl__committer *c;
    int n;
    int failures;
} blocking_arg;

static void *blocking_thread(void *p) {
    blocking_arg *b = p;
    for (int i = 0; i < b->n; i++) {
        job j;
        char k[16];
        snprintf(k, sizeof k, "b%p%d", (void *)b, i);
        job_init(&j, k, NULL, 0);
        if (rl__committer_commit(b->c, &j.req) != RL_OK) b->failures++;
    }
    return NULL;
}

/* commit-4.4: blocking commits from threads beside submits: all succeed, the blocking callers
 * never lead once the thread runs, versions stay unique per (version, order). */
TEST(commit_4_4_blocking_beside_submits) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    s.sync_sleep_us = 200;
    enum { N = 200 };
    job *js = calloc(N, sizeof *js);
    job_init(&js[0], "s000", NULL, 0);
    ASSERT_OK(rl__committer_submit(c, &js[0].req, on_done, &js[0]));
    pthread_t th[3];
    blocking_arg ba[3];
    for (int t = 0; t < 3; t++) {
        ba[t] = (blocking_arg){c, 50, 0};
        ASSERT_EQ(pthread_create(&th[t], NULL, blocking_thread, &ba[t]), 0);
    }
    for (int i = 1; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "s%03d", i);
        job_init(&js[i], k, NULL, 0);
        ASSERT_OK(rl__committer_submit(c, &js[i].req, on_done, &js[i]));
    }
    for (int t = 0; t < 3; t++) {
        pthread_join(th[t], NULL);
        ASSERT_EQ(ba[t].failures, 0);
    }
    wait_jobs(js, N);
    for (int i = 0; i < N; i++) {
        ASSERT_OK(js[i].req.result);
        ASSERT_TRUE(pthread_equal(js[i].thread, js[0].thread));
    }
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.committed, N + 150);
    rl__committer_free(c);
    free(js);
}

/* commit-4.5: a failed sync gives its batch commit_unknown_result and poisons the committer: later
 * submits are done with the sink's error (still on the committer thread). */
TEST(commit_4_5_sink_failure_poisons) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    s.fail_sync_at = 2;
    job a, b, d;
    job_init(&a, "a", NULL, 0);
    ASSERT_OK(rl__committer_submit(c, &a.req, on_done, &a));
    wait_jobs(&a, 1);
    ASSERT_OK(a.req.result);
    job_init(&b, "b", NULL, 0);
    ASSERT_OK(rl__committer_submit(c, &b.req, on_done, &b));
    wait_jobs(&b, 1);
    ASSERT_RC(b.req.result, RL_E_COMMIT_UNKNOWN_RESULT);
    job_init(&d, "d", NULL, 0);
    ASSERT_OK(rl__committer_submit(c, &d.req, on_done, &d));
    wait_jobs(&d, 1);
    ASSERT_RC(d.req.result, RL_E_IO_ERROR);
    ASSERT_RC(rl__committer_submit(c, NULL, on_done, &d), RL_E_INVALID_ARGUMENT);
    rl__committer_free(c);
}

/* commit-4.6: freeing the committer with requests queued completes every one of them first. */
TEST(commit_4_6_free_completes_queue) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 0, &c));
    s.sync_sleep_us = 5000;
    enum { N = 100 };
    job *js = calloc(N, sizeof *js);
    for (int i = 0; i < N; i++) {
        char k[16];
        snprintf(k, sizeof k, "f%03d", i);
        job_init(&js[i], k, NULL, 0);
        ASSERT_OK(rl__committer_submit(c, &js[i].req, on_done, &js[i]));
    }
    rl__committer_free(c);
    for (int i = 0; i < N; i++) {
        ASSERT_EQ(atomic_load(&js[i].done), 1);
        ASSERT_OK(js[i].req.result);
    }
    free(js);
}

/* commit-4.7: a submitted tick request (the coordinator's version tick) is done on the
 * committer's thread with a version, as an empty batch: one apply of no mutation and one sync;
 * a tick queued behind a batch shares the next batch with whatever else queued. */
TEST(commit_4_7_tick) {
    sink_rec s;
    rl__committer *c;
    ASSERT_OK(rl__committer_new(NULL, sink_of(&s), 100, &c));
    job tick;
    memset(&tick, 0, sizeof tick);
    tick.req.is_tick = 1;
    ASSERT_OK(rl__committer_submit(c, &tick.req, on_done, &tick));
    wait_jobs(&tick, 1);
    ASSERT_OK(tick.req.result);
    ASSERT_TRUE(tick.req.commit_version > 100);
    ASSERT_FALSE(pthread_equal(tick.thread, pthread_self()));
    pthread_mutex_lock(&s.mu);
    ASSERT_EQ(s.applies, 1);
    ASSERT_EQ(s.batch_muts[0], 0);
    ASSERT_EQ(s.versions[0], tick.req.commit_version);
    ASSERT_EQ(s.syncs, 1);
    pthread_mutex_unlock(&s.mu);
    ASSERT_EQ(rl__committer_read_version(c), tick.req.commit_version);
    /* Behind a held sync: the next tick and a transaction form one batch. */
    s.gate = 1;
    job first, t2, tick2;
    job_init(&first, "x", NULL, 0);
    job_init(&t2, "y", NULL, 0);
    memset(&tick2, 0, sizeof tick2);
    tick2.req.is_tick = 1;
    ASSERT_OK(rl__committer_submit(c, &first.req, on_done, &first));
    gate_wait_held(&s);
    ASSERT_OK(rl__committer_submit(c, &tick2.req, on_done, &tick2));
    ASSERT_OK(rl__committer_submit(c, &t2.req, on_done, &t2));
    gate_release(&s);
    wait_jobs(&first, 1);
    wait_jobs(&tick2, 1);
    wait_jobs(&t2, 1);
    ASSERT_OK(tick2.req.result);
    ASSERT_OK(t2.req.result);
    ASSERT_EQ(tick2.req.commit_version, t2.req.commit_version);
    ASSERT_TRUE(tick2.req.commit_version > first.req.commit_version);
    rl__committer_stats st;
    rl__committer_get_stats(c, &st);
    ASSERT_EQ(st.ticks, 2);
    ASSERT_EQ(st.committed, 2);
    ASSERT_EQ(st.batches, 3);
    rl__committer_free(c);
}

RL_TEST_MAIN(T(commit_4_1_submit_done_on_committer_thread), T(commit_4_2_group_commit_and_byte_bound),
             T(commit_4_3_read_only_conflicts_future), T(commit_4_4_blocking_beside_submits),
             T(commit_4_5_sink_failure_poisons), T(commit_4_6_free_completes_queue), T(commit_4_7_tick))
