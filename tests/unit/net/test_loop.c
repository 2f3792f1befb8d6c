/* test_loop.c — the network runtime (src/net/loop.h): posts, stop, timers and their precision,
 * idle CPU, listen/connect/echo, pipelining, concurrent senders, closing from anywhere, the loop's
 * teardown, refused addresses, and peers that misbehave (test IDs loop_1_* … loop_3_*).
 *
 * Timing figures are printed, not asserted, beyond generous bounds (never early; p50 < 100 µs):
 * the machines are shared and noisy. Benchmarks live in test_loop_bench.c.
 */
#include <poll.h>
#include <sys/resource.h>

#include "looptest.h"

/* ============================================================================================
 * loop_1: posts, stop, timers
 * ========================================================================================== */

#define P_THREADS 4
#define P_PER 20000

static uint32_t *post_log;
static atomic_long post_n;

static void post_record(rl__loop *loop, void *ud) {
    (void)loop;
    long i = atomic_load(&post_n);
    post_log[i] = (uint32_t)(uintptr_t)ud;
    atomic_store(&post_n, i + 1);
}

typedef struct {
    rl__loop *loop;
    uint32_t tid;
} poster_arg;

static void *poster_main(void *arg) {
    poster_arg *a = arg;
    for (uint32_t s = 0; s < P_PER; s++) {
        int rc = rl__loop_post(a->loop, post_record, (void *)(uintptr_t)(a->tid << 24 | s));
        LT_BG_CHECK(rc == RL_OK);
    }
    return NULL;
}

static void post_then_post(rl__loop *loop, void *ud) {
    post_record(loop, ud);
    LT_BG_CHECK(rl__loop_post(loop, post_record, (void *)(uintptr_t)0xC) == RL_OK);
}

/* Posts from four threads all run, once, in each thread's order; posts made before the loop runs
 * wait for it and keep their order; a post made by a post runs after the ones already queued. */
TEST(loop_1_1_posts_fifo_from_threads) {
    post_log = calloc(P_THREADS * P_PER + 16, sizeof *post_log);
    atomic_store(&post_n, 0);
    lt_loop l;
    memset(&l, 0, sizeof l);
    ASSERT_OK(rl__loop_new(0, &l.loop, NULL));
    ASSERT_OK(rl__loop_post(l.loop, post_then_post, (void *)(uintptr_t)0xA));
    ASSERT_OK(rl__loop_post(l.loop, post_record, (void *)(uintptr_t)0xB));
    ASSERT_EQ(pthread_create(&l.thread, NULL, lt_loop_main, &l), 0);
    ASSERT_TRUE(lt_wait_count(&post_n, 3, LT_WAIT_MS));
    ASSERT_EQ(post_log[0], 0xA);
    ASSERT_EQ(post_log[1], 0xB);
    ASSERT_EQ(post_log[2], 0xC);

    atomic_store(&post_n, 0);
    pthread_t th[P_THREADS];
    poster_arg args[P_THREADS];
    for (uint32_t i = 0; i < P_THREADS; i++) {
        args[i] = (poster_arg){l.loop, i + 1};
        ASSERT_EQ(pthread_create(&th[i], NULL, poster_main, &args[i]), 0);
    }
    for (int i = 0; i < P_THREADS; i++) pthread_join(th[i], NULL);
    ASSERT_TRUE(lt_wait_count(&post_n, P_THREADS * P_PER, LT_WAIT_MS));
    lt_sync(l.loop);
    ASSERT_EQ(atomic_load(&post_n), P_THREADS * P_PER); /* none twice */
    uint32_t next[P_THREADS + 1] = {0};
    for (long i = 0; i < P_THREADS * P_PER; i++) {
        uint32_t tid = post_log[i] >> 24, seq = post_log[i] & 0xffffff;
        ASSERT_TRUE(tid >= 1 && tid <= P_THREADS);
        ASSERT_EQ(seq, next[tid]);
        next[tid]++;
    }
    rl__loop_stats st;
    rl__loop_get_stats(l.loop, &st);
    ASSERT_TRUE(st.posts_run >= P_THREADS * P_PER + 3);
    lt_loop_finish(&l);
    free(post_log);
    LT_ASSERT_NO_BG_ERRORS();
}

static atomic_int nested_rc;
static void try_nested_run(rl__loop *loop, void *ud) {
    (void)ud;
    atomic_store(&nested_rc, rl__loop_run(loop));
}

/* A stop before run makes run return after one pass; a second runner and a nested run are
 * refused; the loop runs again after a stop. */
TEST(loop_1_2_stop_and_run_rules) {
    rl__loop *loop;
    ASSERT_OK(rl__loop_new(0, &loop, NULL));
    ASSERT_RC(rl__loop_new(0x80, &loop, NULL), RL_E_INVALID_ARGUMENT);
    rl__loop_stop(loop);
    uint64_t t0 = rl__clock_mono_ns();
    ASSERT_OK(rl__loop_run(loop));
    ASSERT_TRUE(rl__clock_mono_ns() - t0 < 1000000000u);

    lt_loop l;
    memset(&l, 0, sizeof l);
    l.loop = loop;
    ASSERT_EQ(pthread_create(&l.thread, NULL, lt_loop_main, &l), 0);
    atomic_store(&nested_rc, -1);
    lt_call(loop, try_nested_run, NULL);
    ASSERT_EQ(atomic_load(&nested_rc), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_RC(rl__loop_run(loop), RL_E_CLIENT_INVALID_OPERATION); /* another thread runs it */
    ASSERT_FALSE(rl__loop_in_loop_thread(loop));
    lt_loop_join(&l);
    /* Runs again. */
    ASSERT_EQ(pthread_create(&l.thread, NULL, lt_loop_main, &l), 0);
    lt_call(loop, try_nested_run, NULL);
    lt_loop_finish(&l);
}

#define TM_N 300

typedef struct {
    uint64_t deadline;
    uint64_t id;
    int cancelled;
    uint64_t fired_ns; /* 0: not fired */
    int order;         /* position in firing order */
} tm_entry;

static tm_entry tm[TM_N];
static atomic_int tm_fired;
static int tm_order;
static atomic_int tm_due_added; /* a timer added from a callback with a past deadline */

static void tm_cb(rl__loop *loop, void *ud) {
    (void)loop;
    tm_entry *e = ud;
    e->fired_ns = rl__clock_mono_ns();
    e->order = tm_order++;          /* loop thread only */
    atomic_fetch_add(&tm_fired, 1); /* published after the writes above */
}

static void tm_due_cb(rl__loop *loop, void *ud) {
    (void)loop;
    (void)ud;
    atomic_store(&tm_due_added, 2);
}

/* The first timer to fire adds a timer that is already due: it fires in a later pass. */
static void tm_first_cb(rl__loop *loop, void *ud) {
    tm_cb(loop, ud);
    if (!atomic_load(&tm_due_added)) {
        atomic_store(&tm_due_added, 1);
        LT_BG_CHECK(rl__loop_timer_add(loop, 0, tm_due_cb, NULL, NULL) == RL_OK);
    }
}

static void tm_setup(rl__loop *loop, void *ud) {
    uint64_t *seed = ud;
    uint64_t now = rl__clock_mono_ns();
    for (int i = 0; i < TM_N; i++) {
        /* 0-20 ms ahead; every 7th shares the previous deadline (ties fire in add order). */
        tm[i].deadline = (i % 7 == 6 && i) ? tm[i - 1].deadline : now + rl_test_rand_below(seed, 20000000u);
        LT_BG_CHECK(rl__loop_timer_add(loop, tm[i].deadline, tm_first_cb, &tm[i], &tm[i].id) == RL_OK);
        LT_BG_CHECK(tm[i].id != 0);
    }
    for (int i = 0; i < TM_N; i += 3) {
        LT_BG_CHECK(rl__loop_timer_cancel(loop, tm[i].id) == RL_OK);
        LT_BG_CHECK(rl__loop_timer_cancel(loop, tm[i].id) == RL_E_NOT_FOUND);
        tm[i].cancelled = 1;
    }
}

static void tm_check_stale(rl__loop *loop, void *ud) {
    (void)ud;
    LT_BG_CHECK(rl__loop_timer_cancel(loop, tm[1].id) == RL_E_NOT_FOUND); /* fired */
    LT_BG_CHECK(rl__loop_timer_cancel(loop, 0) == RL_E_NOT_FOUND);
    LT_BG_CHECK(rl__loop_timer_cancel(loop, 0xdead00000001ull) == RL_E_NOT_FOUND);
    LT_BG_CHECK(rl__loop_timer_cancel(loop, 0xffffffffull) == RL_E_NOT_FOUND);
    /* A slot reused by a new timer does not answer to the old id. */
    uint64_t id;
    LT_BG_CHECK(rl__loop_timer_add(loop, rl__clock_mono_ns() + 1000000000u, tm_cb, &tm[1], &id) == RL_OK);
    LT_BG_CHECK(rl__loop_timer_cancel(loop, tm[0].id) == RL_E_NOT_FOUND);
    LT_BG_CHECK(rl__loop_timer_cancel(loop, id) == RL_OK);
}

/* Timers fire in (deadline, add order), never early; cancelled ones never; stale ids are not
 * found; timers are loop-context only. */
TEST(loop_1_3_timer_order_and_cancel) {
    uint64_t seed = rl_test_seed();
    memset(tm, 0, sizeof tm);
    atomic_store(&tm_fired, 0);
    tm_order = 0;
    atomic_store(&tm_due_added, 0);
    lt_loop l;
    lt_loop_start(&l, 0);
    lt_call(l.loop, tm_setup, &seed);
    int live = TM_N - (TM_N + 2) / 3;
    uint64_t end = rl__clock_mono_ns() + 10000000000ull;
    while (atomic_load(&tm_fired) < live && rl__clock_mono_ns() < end) rl__clock_sleep_us(200);
    ASSERT_EQ(atomic_load(&tm_fired), live);
    while (atomic_load(&tm_due_added) != 2 && rl__clock_mono_ns() < end) rl__clock_sleep_us(200);
    ASSERT_EQ(atomic_load(&tm_due_added), 2);
    /* Order: sort the fired ones by their firing order and check (deadline, index) increases. */
    int by_order[TM_N];
    for (int i = 0; i < TM_N; i++) {
        if (tm[i].cancelled) {
            ASSERT_EQ(tm[i].fired_ns, 0);
            continue;
        }
        ASSERT_TRUE(tm[i].fired_ns >= tm[i].deadline);
        by_order[tm[i].order] = i;
    }
    for (int k = 1; k < live; k++) {
        tm_entry *a = &tm[by_order[k - 1]], *b = &tm[by_order[k]];
        ASSERT_TRUE(a->deadline < b->deadline || (a->deadline == b->deadline && by_order[k - 1] < by_order[k]));
    }
    lt_call(l.loop, tm_check_stale, NULL);
    uint64_t id;
    ASSERT_RC(rl__loop_timer_add(l.loop, 0, tm_cb, &tm[0], &id), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_RC(rl__loop_timer_cancel(l.loop, tm[1].id), RL_E_CLIENT_INVALID_OPERATION);
    lt_loop_finish(&l);
    LT_ASSERT_NO_BG_ERRORS();
}

/* ---- precision ---- */

#define PREC_N 400

typedef struct {
    uint64_t deadline;
    int n, early;
    uint64_t late[PREC_N];
    uint64_t seed;
    int random_period;
    atomic_int done;
} prec_ctx;

static void prec_cb(rl__loop *loop, void *ud) {
    prec_ctx *p = ud;
    uint64_t t = rl__clock_mono_ns();
    if (t < p->deadline) p->early++;
    p->late[p->n++] = t > p->deadline ? t - p->deadline : 0;
    if (p->n == PREC_N) {
        atomic_store(&p->done, 1);
        return;
    }
    uint64_t period = p->random_period ? 20000u + rl_test_rand_below(&p->seed, 1000000u) : 250000u;
    p->deadline = rl__clock_mono_ns() + period;
    LT_BG_CHECK(rl__loop_timer_add(loop, p->deadline, prec_cb, p, NULL) == RL_OK);
}

static void prec_start(rl__loop *loop, void *ud) {
    prec_ctx *p = ud;
    p->deadline = rl__clock_mono_ns() + 250000u;
    LT_BG_CHECK(rl__loop_timer_add(loop, p->deadline, prec_cb, p, NULL) == RL_OK);
}

/* One measurement: returns p50 lateness (ns); *out_early counts timers that fired early. */
static uint64_t measure_precision(unsigned flags, int random_period, const char *label, int *out_early) {
    prec_ctx *p = calloc(1, sizeof *p);
    p->random_period = random_period;
    p->seed = 12345;
    lt_loop l;
    lt_loop_start(&l, flags);
    lt_call(l.loop, prec_start, p);
    int done = lt_wait_flag(&p->done, 30000);
    rl__loop_stats st;
    rl__loop_get_stats(l.loop, &st);
    lt_loop_finish(&l);
    ASSERT_TRUE(done);
    lt_sort(p->late, PREC_N);
    uint64_t p50 = lt_pct(p->late, PREC_N, 0.5);
    printf("%s (%s): %d timers, lateness p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us; "
           "margin %.1f us, wake-up lateness p50 %.1f us p99 %.1f us, spin %.1f ms\n",
           label, st.uses_pwait2 ? "epoll_pwait2" : "timerfd", PREC_N, p50 / 1e3, lt_pct(p->late, PREC_N, 0.9) / 1e3,
           lt_pct(p->late, PREC_N, 0.99) / 1e3, p->late[PREC_N - 1] / 1e3, st.margin_ns / 1e3,
           st.wake_late_p50_ns / 1e3, st.wake_late_p99_ns / 1e3, st.spin_ns / 1e6);
    *out_early = p->early;
    int fired = (int)st.timer_late.count, pwait2 = st.uses_pwait2;
    free(p);
    ASSERT_EQ(fired, PREC_N);
    ASSERT_EQ(pwait2, !(flags & RL_LOOP_FORCE_TIMERFD));
    return p50;
}

/* Never early, in every attempt; p50 < 100 µs in at least one of three attempts (the machine is
 * shared: an attempt can lose the CPU for milliseconds). */
static void run_precision(unsigned flags, int random_period, const char *label) {
    uint64_t best = UINT64_MAX;
    for (int attempt = 0; attempt < 3 && best >= 100000u; attempt++) {
        int early;
        uint64_t p50 = measure_precision(flags, random_period, label, &early);
        ASSERT_EQ(early, 0);
        if (p50 < best) best = p50;
        if (p50 >= 100000u) printf("  (p50 %.1f us: the machine is busy; measuring again)\n", p50 / 1e3);
    }
    ASSERT_TRUE(best < 100000u);
    LT_ASSERT_NO_BG_ERRORS();
}

/* Timer precision with epoll_pwait2: printed; asserted only never early and p50 < 100 µs. */
TEST(loop_1_4_timer_precision_pwait2) {
    run_precision(0, 0, "loop_1_4 250us timers");
    run_precision(0, 1, "loop_1_4 20us-1ms timers");
}

/* The same through the timerfd fallback. */
TEST(loop_1_5_timer_precision_timerfd) { run_precision(RL_LOOP_FORCE_TIMERFD, 0, "loop_1_5 250us timers"); }

static void far_timer_setup(rl__loop *loop, void *ud) {
    (void)ud;
    LT_BG_CHECK(rl__loop_timer_add(loop, rl__clock_mono_ns() + 60000000000ull, tm_cb, &tm[0], NULL) == RL_OK);
}

static uint64_t thread_cpu_ns(pthread_t t) {
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* An idle loop blocks: almost no CPU with no timer and with a far timer. */
TEST(loop_1_6_idle_uses_no_cpu) {
    lt_loop l;
    lt_loop_start(&l, 0);
    lt_sync(l.loop); /* past its start-up: blocked in epoll from here */
    uint64_t c0 = thread_cpu_ns(l.thread);
    rl__clock_sleep_us(200000);
    uint64_t c1 = thread_cpu_ns(l.thread);
    lt_call(l.loop, far_timer_setup, NULL);
    uint64_t c2 = thread_cpu_ns(l.thread);
    rl__clock_sleep_us(200000);
    uint64_t c3 = thread_cpu_ns(l.thread);
    printf("loop_1_6: idle loop thread CPU over 200 ms: %.3f ms (no timer), %.3f ms (a timer 60 s away)\n",
           (c1 - c0) / 1e6, (c3 - c2) / 1e6);
    ASSERT_TRUE(c1 - c0 < 10000000u);
    ASSERT_TRUE(c3 - c2 < 10000000u);
    lt_loop_finish(&l);
    LT_ASSERT_NO_BG_ERRORS();
}

static int free_log[4], free_n, free_closing[4];
static void free_post(rl__loop *loop, void *ud) {
    free_closing[free_n] = rl__loop_is_closing(loop);
    free_log[free_n++] = (int)(uintptr_t)ud;
}

/* Posts still queued when the loop is freed are run by rl__loop_free, in order, with
 * rl__loop_is_closing() true; pending timers are dropped. */
TEST(loop_1_7_free_runs_pending_posts) {
    rl__loop *loop;
    ASSERT_OK(rl__loop_new(RL_LOOP_FORCE_TIMERFD, &loop, NULL));
    free_n = 0;
    for (int i = 1; i <= 3; i++) ASSERT_OK(rl__loop_post(loop, free_post, (void *)(uintptr_t)i));
    ASSERT_OK(rl__loop_timer_add(loop, 0, free_post, (void *)(uintptr_t)9, NULL)); /* owner context */
    ASSERT_FALSE(rl__loop_is_closing(loop));
    rl__loop_free(loop);
    ASSERT_EQ(free_n, 3);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(free_log[i], i + 1);
        ASSERT_EQ(free_closing[i], 1);
    }
    rl__loop_free(NULL);
}

static void no_spin_setup(rl__loop *loop, void *ud) {
    LT_BG_CHECK(rl__loop_set_margin_bounds(loop, 0, 0) == RL_OK);
    prec_start(loop, ud);
}

/* With the margin bounded to 0 the loop never spins (timers fire with the kernel's wake-up
 * lateness, still never early); bad bounds and calls from other threads are refused. */
TEST(loop_1_8_margin_bounds) {
    rl__loop *loop;
    ASSERT_OK(rl__loop_new(0, &loop, NULL));
    ASSERT_RC(rl__loop_set_margin_bounds(loop, 50, 20), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__loop_set_margin_bounds(loop, 0, 10001), RL_E_INVALID_ARGUMENT);
    ASSERT_OK(rl__loop_set_margin_bounds(loop, 30, 60));
    rl__loop_stats st;
    rl__loop_get_stats(loop, &st);
    ASSERT_EQ(st.margin_ns, 60000);
    rl__loop_free(loop);

    prec_ctx *p = calloc(1, sizeof *p);
    lt_loop l;
    lt_loop_start(&l, 0);
    ASSERT_RC(rl__loop_set_margin_bounds(l.loop, 0, 0), RL_E_CLIENT_INVALID_OPERATION);
    lt_call(l.loop, no_spin_setup, p);
    ASSERT_TRUE(lt_wait_flag(&p->done, 30000));
    rl__loop_get_stats(l.loop, &st);
    lt_loop_finish(&l);
    lt_sort(p->late, PREC_N);
    printf("loop_1_8 no spinning: lateness p50 %.1f us p99 %.1f us; spun %.3f ms in all\n",
           lt_pct(p->late, PREC_N, 0.5) / 1e3, lt_pct(p->late, PREC_N, 0.99) / 1e3, st.spin_ns / 1e6);
    ASSERT_EQ(p->early, 0);
    ASSERT_EQ(st.margin_ns, 0);
    ASSERT_TRUE(st.spin_ns < (uint64_t)PREC_N * 5000u); /* at most the < 3 µs tails */
    free(p);
    LT_ASSERT_NO_BG_ERRORS();
}

/* ============================================================================================
 * loop_2: connections
 * ========================================================================================== */

static void fill_pattern(uint8_t *p, size_t n, uint32_t salt) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i * 131u + salt * 7u + (i >> 8)) & 0xff);
}

/* Listen on port 0, connect, echo frames of 0, 1, 16 KiB and 10 MiB; peers and headers match. */
TEST(loop_2_1_echo_sizes) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 1, 0);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 1);
    lt_peer *sp = lt_server_peer(&s, 1);
    char want_peer[32];
    snprintf(want_peer, sizeof want_peer, "127.0.0.1:%u", (unsigned)s.port);
    ASSERT_STR_EQ(rl__conn_peer(c->conn), want_peer);
    ASSERT_STR_EQ(rl__conn_peer(sp->conn), rl__conn_local(c->conn));
    ASSERT_STR_EQ(rl__conn_local(sp->conn), want_peer);
    ASSERT_TRUE(rl__conn_is_open(c->conn));
    ASSERT_STR_EQ(rl__conn_close_reason(c->conn), "");

    const size_t sizes[] = {0, 1, 16384, 10u << 20};
    uint8_t *buf = malloc(10u << 20);
    uint64_t bytes = 0;
    for (size_t k = 0; k < 4; k++) {
        fill_pattern(buf, sizes[k], (uint32_t)k);
        ASSERT_OK(rl__conn_send(c->conn, (uint16_t)(100 + k), 0, 1000 + k, sizes[k] ? buf : NULL, sizes[k]));
        bytes += RL_FRAME_HEADER_LEN + sizes[k];
        ASSERT_TRUE(lt_wait_count(&c->frame_count, (long)k + 1, LT_WAIT_MS));
        lt_frame *f = &c->frames[k];
        ASSERT_EQ(f->h.type, 100 + k);
        ASSERT_EQ(f->h.flags, RL_FRAME_REPLY);
        ASSERT_EQ(f->h.id, 1000 + k);
        ASSERT_MEM_EQ(f->payload, f->h.payload_len, buf, sizes[k]);
    }
    rl__conn_stats cs, ss;
    rl__conn_get_stats(c->conn, &cs);
    rl__conn_get_stats(sp->conn, &ss);
    ASSERT_EQ(cs.frames_sent, 4);
    ASSERT_EQ(cs.bytes_sent, bytes);
    ASSERT_EQ(cs.frames_received, 4);
    ASSERT_EQ(cs.bytes_received, bytes);
    ASSERT_EQ(ss.frames_received, 4);
    ASSERT_EQ(ss.bytes_received, bytes);
    ASSERT_EQ(ss.bytes_sent, bytes);
    ASSERT_EQ(cs.queued_bytes, 0);
    printf("loop_2_1: client frames_direct %llu of 4, server rx buffer now %llu bytes\n",
           (unsigned long long)cs.frames_direct, (unsigned long long)ss.rx_buffer_cap);
    free(buf);
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    ASSERT_EQ(atomic_load(&c->close_calls), 1);
    ASSERT_EQ(atomic_load(&c->close_err), RL_E_OPERATION_CANCELLED);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

#define PIPE_N 20000
#define PIPE_SRV_N 5000

typedef struct {
    rl__conn *conn;
    int n;
    uint16_t type;
    uint64_t seed;
    atomic_int done;
} pipe_sender;

static size_t pipe_size(uint64_t *seed) {
    uint64_t r = rl_test_rand_below(seed, 100);
    return r < 90 ? rl_test_rand_below(seed, 300) : rl_test_rand_below(seed, 40000);
}

static void *pipe_sender_main(void *arg) {
    pipe_sender *a = arg;
    uint8_t *buf = malloc(40000);
    for (int i = 0; i < a->n; i++) {
        size_t n = pipe_size(&a->seed);
        fill_pattern(buf, n, (uint32_t)i);
        int rc = rl__conn_send(a->conn, a->type, 0, (uint64_t)i, buf, n);
        LT_BG_CHECK(rc == RL_OK);
        if (rc) break;
    }
    free(buf);
    atomic_store(&a->done, 1);
    return NULL;
}

/* 20,000 frames pipelined client -> server (echoed back) while the server sends 5,000 of its own
 * from another thread: everything arrives whole and in order both ways. */
TEST(loop_2_2_pipelined_both_ways) {
    uint64_t seed = rl_test_seed();
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 1, 1);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 1);
    lt_peer *sp = lt_server_peer(&s, 1);
    pipe_sender a = {c->conn, PIPE_N, 1, seed, 0}, b = {sp->conn, PIPE_SRV_N, 2, seed ^ 0x55, 0};
    pthread_t ta, tb;
    ASSERT_EQ(pthread_create(&ta, NULL, pipe_sender_main, &a), 0);
    ASSERT_EQ(pthread_create(&tb, NULL, pipe_sender_main, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ASSERT_TRUE(lt_wait_count(&c->frame_count, PIPE_N + PIPE_SRV_N, 30000));
    uint64_t sa = seed, sb = seed ^ 0x55;
    int na = 0, nb = 0;
    uint8_t *want = malloc(40000);
    for (size_t i = 0; i < c->nframes; i++) {
        lt_frame *f = &c->frames[i];
        uint64_t *sd = f->h.type == 1 ? &sa : &sb;
        int *k = f->h.type == 1 ? &na : &nb;
        ASSERT_TRUE(f->h.type == 1 || f->h.type == 2);
        ASSERT_EQ(f->h.id, (uint64_t)*k);
        ASSERT_EQ(f->h.flags, f->h.type == 1 ? RL_FRAME_REPLY : 0);
        size_t n = pipe_size(sd);
        fill_pattern(want, n, (uint32_t)*k);
        ASSERT_MEM_EQ(f->payload, f->h.payload_len, want, n);
        (*k)++;
    }
    ASSERT_EQ(na, PIPE_N);
    ASSERT_EQ(nb, PIPE_SRV_N);
    rl__conn_stats cs;
    rl__conn_get_stats(c->conn, &cs);
    printf("loop_2_2: client sent %llu frames, %llu directly, queue high-water %llu bytes\n",
           (unsigned long long)cs.frames_sent, (unsigned long long)cs.frames_direct,
           (unsigned long long)cs.queued_bytes_max);
    free(want);
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

#define MT_THREADS 4
#define MT_PER 3000

typedef struct {
    rl__conn *conn;
    uint32_t tid;
    uint64_t seed;
} mt_arg;

static size_t mt_size(uint64_t *seed) {
    return 8 + (rl_test_rand_below(seed, 10) == 0 ? rl_test_rand_below(seed, 60000) : rl_test_rand_below(seed, 200));
}

static void *mt_main(void *arg) {
    mt_arg *a = arg;
    uint8_t *buf = malloc(70000);
    for (uint32_t s = 0; s < MT_PER; s++) {
        size_t n = mt_size(&a->seed);
        memcpy(buf, &a->tid, 4);
        memcpy(buf + 4, &s, 4);
        fill_pattern(buf + 8, n - 8, a->tid * 100000u + s);
        int rc = rl__conn_send(a->conn, 7, 0, (uint64_t)a->tid << 32 | s, buf, n);
        LT_BG_CHECK(rc == RL_OK);
        if (rc) break;
    }
    free(buf);
    return NULL;
}

/* Four threads send on one connection at once: every frame arrives whole, per thread in order. */
TEST(loop_2_3_four_threads_one_connection) {
    uint64_t seed = rl_test_seed();
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 0, 1);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 0);
    lt_peer *sp = lt_server_peer(&s, 1);
    pthread_t th[MT_THREADS];
    mt_arg args[MT_THREADS];
    for (uint32_t i = 0; i < MT_THREADS; i++) {
        args[i] = (mt_arg){c->conn, i, seed + i};
        ASSERT_EQ(pthread_create(&th[i], NULL, mt_main, &args[i]), 0);
    }
    for (int i = 0; i < MT_THREADS; i++) pthread_join(th[i], NULL);
    ASSERT_TRUE(lt_wait_count(&sp->frame_count, MT_THREADS * MT_PER, 30000));
    uint32_t next[MT_THREADS] = {0};
    uint64_t seeds[MT_THREADS];
    for (int i = 0; i < MT_THREADS; i++) seeds[i] = seed + (uint64_t)i;
    uint8_t *want = malloc(70000);
    for (size_t i = 0; i < sp->nframes; i++) {
        lt_frame *f = &sp->frames[i];
        uint32_t tid, sq;
        ASSERT_TRUE(f->h.payload_len >= 8);
        memcpy(&tid, f->payload, 4);
        memcpy(&sq, f->payload + 4, 4);
        ASSERT_TRUE(tid < MT_THREADS);
        ASSERT_EQ(sq, next[tid]);
        ASSERT_EQ(f->h.id, (uint64_t)tid << 32 | sq);
        size_t n = mt_size(&seeds[tid]);
        ASSERT_EQ(f->h.payload_len, n);
        fill_pattern(want, n - 8, tid * 100000u + sq);
        ASSERT_MEM_EQ(f->payload + 8, n - 8, want, n - 8);
        next[tid]++;
    }
    for (int i = 0; i < MT_THREADS; i++) ASSERT_EQ(next[i], MT_PER);
    rl__conn_stats cs;
    rl__conn_get_stats(c->conn, &cs);
    ASSERT_EQ(cs.frames_sent, MT_THREADS * MT_PER);
    printf("loop_2_3: %llu frames, %llu written directly by the senders, queue high-water %llu bytes\n",
           (unsigned long long)cs.frames_sent, (unsigned long long)cs.frames_direct,
           (unsigned long long)cs.queued_bytes_max);
    free(want);
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* rl__conn_send_buf takes the buffer; bad arguments are refused without closing anything. */
TEST(loop_2_4_send_buf_and_bad_arguments) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 1, 0);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 1);
    rl_buf b;
    rl__buf_init(&b);
    rl__buf_append_str(&b, "hello, frames");
    ASSERT_OK(rl__conn_send_buf(c->conn, 3, 0, 42, &b));
    ASSERT_EQ(b.len, 0);
    ASSERT_NOT_NULL(b.data);
    ASSERT_OK(rl__conn_send_buf(c->conn, 4, 0, 43, &b)); /* empty buffer: empty payload */
    for (int i = 0; i < 1000; i++) rl__buf_append_u32be(&b, (uint32_t)i);
    ASSERT_OK(rl__conn_send_buf(c->conn, 5, 0, 44, &b));
    ASSERT_TRUE(lt_wait_count(&c->frame_count, 3, LT_WAIT_MS));
    ASSERT_MEM_EQ(c->frames[0].payload, c->frames[0].h.payload_len, "hello, frames", 13);
    ASSERT_EQ(c->frames[1].h.payload_len, 0);
    ASSERT_EQ(c->frames[2].h.payload_len, 4000);
    ASSERT_EQ(c->frames[2].payload[3999], (uint8_t)999);

    uint8_t dummy[4] = {0};
    ASSERT_RC(rl__conn_send(c->conn, 1, 0x4, 1, dummy, 4), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__conn_send(c->conn, 1, 0, 1, dummy, (size_t)RL_NET_MAX_PAYLOAD + 1), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__conn_send(c->conn, 1, 0, 1, NULL, 4), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__conn_send(NULL, 1, 0, 1, NULL, 0), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__conn_set_delay(c->conn, 10000001, 0, 1), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__conn_set_callbacks(c->conn, lt_on_frame, lt_on_close, c), RL_E_CLIENT_INVALID_OPERATION);
    ASSERT_TRUE(rl__conn_is_open(c->conn));
    ASSERT_OK(rl__conn_send(c->conn, 6, RL_FRAME_REPLY | RL_FRAME_ERROR, 45, dummy, 4));
    ASSERT_TRUE(lt_wait_count(&c->frame_count, 4, LT_WAIT_MS));
    ASSERT_EQ(c->frames[3].h.flags, RL_FRAME_REPLY | RL_FRAME_ERROR);
    rl__buf_release(&b);
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* A port nobody listens on: the connect completes with connection_failed. */
TEST(loop_2_5_connect_refused) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0); /* port 0: reserve a free port */
    socklen_t len = sizeof sa;
    ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    uint16_t port = ntohs(sa.sin_port);
    lt_loop l;
    lt_loop_start(&l, 0);
    ASSERT_RC(lt_connect_err(l.loop, "127.0.0.1", port, 2000), RL_E_CONNECTION_FAILED); /* bound, not listening */
    close(fd);
    ASSERT_RC(lt_connect_err(l.loop, "127.0.0.1", port, 2000), RL_E_CONNECTION_FAILED);
    lt_loop_finish(&l);
    LT_ASSERT_NO_BG_ERRORS();
}

static int dummy_accept_called;
static void dummy_accept(rl__listener *l, rl__conn *c, void *ud) {
    (void)l;
    (void)ud;
    dummy_accept_called++;
    rl__conn_release(c);
}
static void dummy_connect(rl__conn *c, int err, void *ud) {
    (void)c;
    (void)err;
    (void)ud;
    LT_BG_CHECK(0);
}

/* Only 127.0.0.0/8 is accepted, for listening and for connecting; 127.0.0.2 works. */
TEST(loop_2_6_non_loopback_refused) {
    lt_loop l;
    lt_loop_start(&l, 0);
    const char *bad[] = {"10.0.0.1",    "0.0.0.0", "192.168.1.1", "128.0.0.1", "localhost", "::1",
                         "127.0.0.1.5", "",        NULL};
    rl__errdetail d;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl__listener *ls = (rl__listener *)0x1;
        rl__errdetail_init(&d, NULL);
        ASSERT_RC(rl__listen(l.loop, bad[i], 0, dummy_accept, NULL, &ls, &d), RL_E_INVALID_ARGUMENT);
        ASSERT_TRUE(ls == (rl__listener *)0x1);
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&d), "127.0.0.0/8"));
        rl__errdetail_init(&d, NULL);
        ASSERT_RC(rl__connect(l.loop, bad[i], 80, 1000, dummy_connect, NULL, &d), RL_E_INVALID_ARGUMENT);
        ASSERT_NOT_NULL(strstr(rl__errdetail_get(&d), "127.0.0.0/8"));
        /* NULL: no detail wanted, same refusal */
        ASSERT_RC(rl__connect(l.loop, bad[i], 80, 1000, dummy_connect, NULL, NULL), RL_E_INVALID_ARGUMENT);
    }
    rl__errdetail_init(&d, NULL);
    (void)rl__connect(l.loop, "10.0.0.1", 80, 1000, dummy_connect, NULL, &d);
    printf("loop_2_6: e.g. \"%s\"\n", rl__errdetail_get(&d));
    ASSERT_RC(rl__connect(l.loop, "127.0.0.1", 80, 0, dummy_connect, NULL, NULL), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__connect(l.loop, "127.0.0.1", 0, 1000, dummy_connect, NULL, NULL), RL_E_INVALID_ARGUMENT);
    /* 127.0.0.2 is loopback too. */
    lt_server s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    s.echo = 1;
    ASSERT_OK(rl__listen(l.loop, "127.0.0.2", 0, lt_on_accept, &s, &s.listener, NULL));
    lt_connect_ctx cc;
    memset(&cc, 0, sizeof cc);
    cc.peer = lt_peer_new(0, 1);
    ASSERT_OK(rl__connect(l.loop, "127.0.0.2", rl__listener_port(s.listener), 2000, lt_on_connect, &cc, NULL));
    ASSERT_TRUE(lt_wait_flag(&cc.done, LT_WAIT_MS));
    ASSERT_OK(atomic_load(&cc.err));
    ASSERT_OK(rl__conn_send(cc.peer->conn, 1, 0, 9, "x", 1));
    ASSERT_TRUE(lt_wait_count(&cc.peer->frame_count, 1, LT_WAIT_MS));
    char want[32];
    snprintf(want, sizeof want, "127.0.0.2:%u", (unsigned)rl__listener_port(s.listener));
    ASSERT_STR_EQ(rl__conn_peer(cc.peer->conn), want);
    lt_loop_finish(&l);
    lt_peer_free(cc.peer);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* A second listener on a bound port is address_in_use; closing a listener frees the port. */
TEST(loop_2_7_address_in_use) {
    lt_loop l;
    lt_loop_start(&l, 0);
    rl__listener *a, *b;
    ASSERT_OK(rl__listen(l.loop, "127.0.0.1", 0, dummy_accept, NULL, &a, NULL));
    uint16_t port = rl__listener_port(a);
    rl__errdetail d;
    rl__errdetail_init(&d, NULL);
    ASSERT_RC(rl__listen(l.loop, "127.0.0.1", port, dummy_accept, NULL, &b, &d), RL_E_ADDRESS_IN_USE);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&d), "bind 127.0.0.1:"));
    rl__listener_close(a); /* from another thread: posted */
    uint64_t end = rl__clock_mono_ns() + 5000000000ull;
    int rc;
    while ((rc = rl__listen(l.loop, "127.0.0.1", port, dummy_accept, NULL, &b, NULL)) == RL_E_ADDRESS_IN_USE &&
           rl__clock_mono_ns() < end)
        rl__clock_sleep_us(1000);
    ASSERT_OK(rc);
    rl__listener_close(b);
    lt_loop_finish(&l);
    ASSERT_EQ(dummy_accept_called, 0);
}

/* A listener whose accept queue is full drops SYNs: the connect times out with timed_out. */
TEST(loop_2_8_connect_timeout) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ASSERT_EQ(listen(lfd, 0), 0);
    socklen_t len = sizeof sa;
    ASSERT_EQ(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    /* Fill the accept queue (never accepted). */
    int fill[8], nfill = 0;
    for (; nfill < 8; nfill++) {
        fill[nfill] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        connect(fill[nfill], (struct sockaddr *)&sa, sizeof sa);
    }
    /* Full once the first is established (writable): a backlog of 0 holds one connection. */
    struct pollfd pf = {.fd = fill[0], .events = POLLOUT};
    ASSERT_EQ(poll(&pf, 1, LT_WAIT_MS), 1);
    lt_loop l;
    lt_loop_start(&l, 0);
    uint64_t t0 = rl__clock_mono_ns();
    int rc = lt_connect_err(l.loop, "127.0.0.1", ntohs(sa.sin_port), 300);
    uint64_t dt = rl__clock_mono_ns() - t0;
    printf("loop_2_8: connect to a full backlog: %s after %.1f ms\n", rl_error_name(rc), dt / 1e6);
    ASSERT_RC(rc, RL_E_TIMED_OUT);
    ASSERT_TRUE(dt >= 300000000u);
    lt_loop_finish(&l);
    for (int i = 0; i < nfill; i++) close(fill[i]);
    close(lfd);
    LT_ASSERT_NO_BG_ERRORS();
}

typedef struct {
    rl__conn *conn;
    atomic_long sent;
    atomic_int last_rc;
} spam_arg;

static void *spam_main(void *arg) {
    spam_arg *a = arg;
    uint8_t buf[1024];
    memset(buf, 0x5a, sizeof buf);
    uint64_t end = rl__clock_mono_ns() + 10000000000ull;
    int rc;
    while ((rc = rl__conn_send(a->conn, 1, 0, 0, buf, sizeof buf)) == RL_OK && rl__clock_mono_ns() < end)
        atomic_fetch_add(&a->sent, 1);
    atomic_store(&a->last_rc, rc);
    rl__conn_release(a->conn); /* each sender held its own reference */
    return NULL;
}

/* Closing from another thread while four threads send: the senders get connection_failed,
 * on_close runs once with RL_OK, the peer sees the close, and the other references stay valid. */
TEST(loop_2_9_close_while_sending) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 0, 0);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 0);
    lt_peer *sp = lt_server_peer(&s, 1);
    spam_arg args[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].conn = c->conn;
        rl__conn_retain(c->conn);
        ASSERT_EQ(pthread_create(&th[i], NULL, spam_main, &args[i]), 0);
    }
    /* Close while every sender is sending (each has sent a frame), not after a hopeful sleep. */
    for (uint64_t end = rl__clock_mono_ns() + 10000000000ull; rl__clock_mono_ns() < end;) {
        int all = 1;
        for (int i = 0; i < 4; i++) all &= atomic_load(&args[i].sent) > 0;
        if (all) break;
        rl__clock_sleep_us(100);
    }
    for (int i = 0; i < 4; i++) ASSERT_TRUE(atomic_load(&args[i].sent) > 0);
    rl__conn_close(c->conn, 0);
    rl__conn_close(c->conn, 0); /* twice: a no-op */
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    long total = 0;
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(atomic_load(&args[i].last_rc), RL_E_CONNECTION_FAILED);
        total += atomic_load(&args[i].sent);
    }
    ASSERT_TRUE(lt_wait_flag(&c->closed, LT_WAIT_MS));
    ASSERT_TRUE(lt_wait_flag(&sp->closed, LT_WAIT_MS));
    lt_sync(cli.loop);
    lt_sync(srv.loop);
    ASSERT_EQ(atomic_load(&c->close_calls), 1);
    ASSERT_EQ(atomic_load(&c->close_err), RL_OK);
    ASSERT_STR_EQ(rl__conn_close_reason(c->conn), "closed locally");
    ASSERT_EQ(atomic_load(&sp->close_calls), 1);
    ASSERT_EQ(atomic_load(&sp->close_err), RL_E_CONNECTION_FAILED);
    ASSERT_RC(rl__conn_send(c->conn, 1, 0, 0, NULL, 0), RL_E_CONNECTION_FAILED);
    ASSERT_FALSE(rl__conn_is_open(c->conn));
    printf("loop_2_9: %ld frames sent before the close; server got %ld\n", total, atomic_load(&sp->frame_count));
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    ASSERT_EQ(atomic_load(&c->close_calls), 1);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* Closing inside on_frame: no frame is delivered after it, on_close runs once with RL_OK. */
TEST(loop_2_10_close_inside_on_frame) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 0, 0);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 0);
    lt_peer *sp = lt_server_peer(&s, 1);
    /* The server side closes after its 3rd frame; the client sends 10 in one burst. */
    sp->close_after = 3;
    uint8_t batch[10 * (RL_FRAME_HEADER_LEN + 4)];
    for (int i = 0; i < 10; i++) {
        rl__frame_header h = {4, 1, 0, (uint64_t)i};
        rl__frame_header_encode(&h, batch + i * (RL_FRAME_HEADER_LEN + 4));
        memcpy(batch + i * (RL_FRAME_HEADER_LEN + 4) + RL_FRAME_HEADER_LEN, "abcd", 4);
    }
    int raw = lt_raw_connect(s.port);
    lt_peer *rp = lt_server_peer(&s, 2);
    rp->close_after = 3;
    lt_raw_write(raw, batch, sizeof batch); /* all ten frames in one write: one read on the server */
    ASSERT_TRUE(lt_wait_flag(&rp->closed, LT_WAIT_MS));
    lt_sync(srv.loop);
    ASSERT_EQ(atomic_load(&rp->frame_count), 3);
    ASSERT_EQ(atomic_load(&rp->close_calls), 1);
    ASSERT_EQ(atomic_load(&rp->close_err), RL_OK);
    ASSERT_EQ(atomic_load(&rp->frame_after_close), 0);
    ASSERT_TRUE(lt_raw_sees_eof(raw));
    close(raw);
    /* The first connection is unaffected. */
    for (int i = 0; i < 2; i++) ASSERT_OK(rl__conn_send(c->conn, 1, 0, (uint64_t)i, "abcd", 4));
    ASSERT_TRUE(lt_wait_count(&sp->frame_count, 2, LT_WAIT_MS));
    ASSERT_FALSE(atomic_load(&sp->closed));
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* RL_CONN_CLOSE_FLUSH writes the queued (delayed) frames first; a plain close drops them. */
TEST(loop_2_11_close_flush_and_drop) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 0, 0);
    for (int round = 0; round < 2; round++) {
        lt_peer *c = lt_connect(cli.loop, s.port, 0, 0);
        lt_peer *sp = lt_server_peer(&s, round + 1);
        ASSERT_OK(rl__conn_set_delay(c->conn, 200000, 0, 1)); /* 200 ms: still queued at the close */
        for (int i = 0; i < 50; i++) ASSERT_OK(rl__conn_send(c->conn, 1, 0, (uint64_t)i, "0123456789", 10));
        rl__conn_stats cs;
        rl__conn_get_stats(c->conn, &cs);
        ASSERT_EQ(cs.queued_frames, 50);
        ASSERT_EQ(cs.queued_bytes, 50 * 26);
        rl__conn_close(c->conn, round == 0 ? RL_CONN_CLOSE_FLUSH : 0);
        ASSERT_RC(rl__conn_send(c->conn, 1, 0, 99, "x", 1), RL_E_CONNECTION_FAILED);
        ASSERT_TRUE(lt_wait_flag(&c->closed, LT_WAIT_MS));
        ASSERT_TRUE(lt_wait_flag(&sp->closed, LT_WAIT_MS));
        ASSERT_EQ(atomic_load(&c->close_err), RL_OK);
        ASSERT_EQ(atomic_load(&sp->frame_count), round == 0 ? 50 : 0);
        ASSERT_EQ(atomic_load(&sp->close_err), RL_E_CONNECTION_FAILED);
        printf("loop_2_11: %s: peer got %ld frames; reason \"%s\"\n", round == 0 ? "flush" : "drop",
               atomic_load(&sp->frame_count), rl__conn_close_reason(c->conn));
        lt_peer_free(c);
    }
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

static atomic_int cancel_err = -1;
static void cancel_connect(rl__conn *c, int err, void *ud) {
    (void)ud;
    LT_BG_CHECK(c == NULL);
    atomic_store(&cancel_err, err);
}

/* Freeing the loop closes open connections (on_close cancelled), fails pending connects
 * (cancelled) and closes listeners; connections still referenced stay safe to call. */
TEST(loop_2_12_free_closes_everything) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 1, 0);
    lt_peer *c = lt_connect(cli.loop, s.port, 0, 0);
    lt_peer *sp = lt_server_peer(&s, 1);
    ASSERT_OK(rl__conn_set_delay(c->conn, 500000, 0, 1));
    ASSERT_OK(rl__conn_send(c->conn, 1, 0, 1, "queued", 6));
    lt_loop_join(&cli);
    /* Connect while the loop is stopped: the registration waits in the post queue. */
    ASSERT_OK(rl__connect(cli.loop, "127.0.0.1", s.port, 1000, cancel_connect, NULL, NULL));
    rl__loop_free(cli.loop);
    ASSERT_EQ(atomic_load(&cancel_err), RL_E_OPERATION_CANCELLED);
    ASSERT_EQ(atomic_load(&c->close_calls), 1);
    ASSERT_EQ(atomic_load(&c->close_err), RL_E_OPERATION_CANCELLED);
    ASSERT_RC(rl__conn_send(c->conn, 1, 0, 1, "x", 1), RL_E_CONNECTION_FAILED);
    ASSERT_RC(rl__conn_set_delay(c->conn, 0, 0, 0), RL_E_CONNECTION_FAILED);
    rl__conn_close(c->conn, 0);
    rl__conn_stats cs;
    rl__conn_get_stats(c->conn, &cs);
    ASSERT_EQ(cs.queued_frames, 0);
    ASSERT_TRUE(lt_wait_flag(&sp->closed, LT_WAIT_MS));
    ASSERT_EQ(atomic_load(&sp->frame_count), 0);
    lt_peer_free(c);
    /* The server loop: listener and connections go with it. */
    lt_loop_finish(&srv);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* ============================================================================================
 * loop_3: peers that misbehave; the other connection keeps working
 * ========================================================================================== */

typedef struct {
    lt_loop srv, cli;
    lt_server s;
    lt_peer *good;
    long good_sent;
    long accepted;
} bad_env;

static void bad_env_start(bad_env *e) {
    memset(e, 0, sizeof *e);
    lt_loop_start(&e->srv, 0);
    lt_loop_start(&e->cli, 0);
    lt_server_start(&e->s, e->srv.loop, 1, 0);
    e->good = lt_connect(e->cli.loop, e->s.port, 0, 1);
    e->accepted = 1;
    (void)lt_server_peer(&e->s, 1);
}

/* The good connection still echoes. */
static void bad_env_check_good(bad_env *e) {
    ASSERT_OK(rl__conn_send(e->good->conn, 1, 0, (uint64_t)e->good_sent, "ping", 4));
    e->good_sent++;
    ASSERT_TRUE(lt_wait_count(&e->good->frame_count, e->good_sent, LT_WAIT_MS));
    ASSERT_FALSE(atomic_load(&e->good->closed));
}

/* A raw peer connects; returns its fd and its server-side lt_peer. */
static int bad_env_raw(bad_env *e, lt_peer **out) {
    int fd = lt_raw_connect(e->s.port);
    *out = lt_server_peer(&e->s, ++e->accepted);
    return fd;
}

/* The server closed the raw peer's connection once with err, a reason containing `why`. */
static void bad_env_expect_closed(bad_env *e, int fd, lt_peer *p, int err, const char *why) {
    ASSERT_TRUE(lt_wait_flag(&p->closed, LT_WAIT_MS));
    ASSERT_TRUE(lt_raw_sees_eof(fd));
    close(fd);
    lt_sync(e->srv.loop);
    ASSERT_EQ(atomic_load(&p->close_calls), 1);
    ASSERT_RC(atomic_load(&p->close_err), err);
    const char *reason = rl__conn_close_reason(p->conn);
    printf("  closed: %s\n", reason);
    ASSERT_NOT_NULL(strstr(reason, why));
    bad_env_check_good(e);
}

static void bad_env_finish(bad_env *e) {
    lt_loop_finish(&e->cli);
    lt_loop_finish(&e->srv);
    lt_peer_free(e->good);
    lt_server_free_peers(&e->s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* Garbage bytes, an oversized length, a bad flag after a good frame: each closes that one
 * connection with malformed_frame, once, and the other connection keeps working. */
TEST(loop_3_1_garbage_oversized_bad_flag) {
    bad_env e;
    bad_env_start(&e);
    bad_env_check_good(&e);
    lt_peer *p;
    /* Garbage: a header whose flags are all ones. */
    int fd = bad_env_raw(&e, &p);
    uint8_t junk[64];
    memset(junk, 0xff, sizeof junk);
    lt_raw_write(fd, junk, sizeof junk);
    bad_env_expect_closed(&e, fd, p, RL_E_MALFORMED_FRAME, "unknown flag bits");
    /* Oversized. */
    fd = bad_env_raw(&e, &p);
    lt_raw_header(fd, RL_NET_MAX_PAYLOAD + 1, 1, 0, 1);
    bad_env_expect_closed(&e, fd, p, RL_E_MALFORMED_FRAME, "exceeds the maximum");
    /* A good frame (echoed to the raw peer), then a bad flag. */
    fd = bad_env_raw(&e, &p);
    lt_raw_header(fd, 3, 1, 0, 77);
    lt_raw_write(fd, "abc", 3);
    uint8_t back[RL_FRAME_HEADER_LEN + 3];
    ASSERT_TRUE(lt_raw_read(fd, back, sizeof back));
    rl__frame_header h;
    ASSERT_EQ(rl__frame_header_decode(back, &h), 0);
    ASSERT_EQ(h.id, 77);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    lt_raw_header(fd, 0, 1, 0x4, 78);
    bad_env_expect_closed(&e, fd, p, RL_E_MALFORMED_FRAME, "unknown flag bits 0x4");
    ASSERT_EQ(atomic_load(&p->frame_count), 1);
    bad_env_finish(&e);
}

/* A truncated frame or header then EOF closes with connection_failed (logged as a warning, with the
 * byte counts); EOF at a frame boundary too (logged at info); a reset likewise. */
TEST(loop_3_2_truncated_then_eof) {
    bad_env e;
    bad_env_start(&e);
    lt_peer *p;
    int fd = bad_env_raw(&e, &p);
    lt_raw_header(fd, 1000, 1, 0, 1);
    uint8_t half[500];
    memset(half, 1, sizeof half);
    lt_raw_write(fd, half, sizeof half);
    shutdown(fd, SHUT_WR);
    bad_env_expect_closed(&e, fd, p, RL_E_CONNECTION_FAILED, "middle of a frame (516 of 1016 bytes");
    fd = bad_env_raw(&e, &p);
    lt_raw_write(fd, half, 7);
    shutdown(fd, SHUT_WR);
    bad_env_expect_closed(&e, fd, p, RL_E_CONNECTION_FAILED, "middle of a frame header (7 of 16");
    fd = bad_env_raw(&e, &p);
    lt_raw_header(fd, 2, 1, 0, 5);
    lt_raw_write(fd, "ok", 2);
    uint8_t back[RL_FRAME_HEADER_LEN + 2];
    ASSERT_TRUE(lt_raw_read(fd, back, sizeof back));
    shutdown(fd, SHUT_WR);
    bad_env_expect_closed(&e, fd, p, RL_E_CONNECTION_FAILED, "peer closed the connection");
    /* A reset (SO_LINGER 0) mid-stream. */
    fd = bad_env_raw(&e, &p);
    lt_raw_header(fd, 100, 1, 0, 5);
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
    ASSERT_TRUE(lt_wait_flag(&p->closed, LT_WAIT_MS));
    printf("  closed: %s (%s)\n", rl__conn_close_reason(p->conn), rl_error_name(atomic_load(&p->close_err)));
    ASSERT_RC(atomic_load(&p->close_err), RL_E_CONNECTION_FAILED);
    bad_env_check_good(&e);
    bad_env_finish(&e);
}

static size_t reader_bound(size_t have) {
    size_t ahead = have < 65536 ? 65536 : have > (8u << 20) ? (8u << 20) : have;
    size_t lim = have + ahead;
    return lim > (1u << 20) ? lim : (1u << 20);
}

/* A peer announces a 64 MiB payload and trickles: the receive buffer grows with what arrived. */
TEST(loop_3_3_trickle_does_not_preallocate) {
    bad_env e;
    bad_env_start(&e);
    lt_peer *p;
    int fd = bad_env_raw(&e, &p);
    lt_raw_header(fd, RL_NET_MAX_PAYLOAD, 1, 0, 1);
    uint8_t chunk[8192];
    memset(chunk, 0x33, sizeof chunk);
    size_t sent = RL_FRAME_HEADER_LEN;
    uint64_t max_cap = 0;
    for (int i = 0; i < 384; i++) { /* 3 MiB */
        lt_raw_write(fd, chunk, sizeof chunk);
        sent += sizeof chunk;
        if (i % 32 == 31) {
            rl__conn_stats st;
            uint64_t end = rl__clock_mono_ns() + 5000000000ull;
            do rl__conn_get_stats(p->conn, &st);
            while (st.bytes_received < sent && rl__clock_mono_ns() < end);
            ASSERT_EQ(st.bytes_received, sent);
            if (st.rx_buffer_cap > max_cap) max_cap = st.rx_buffer_cap;
            ASSERT_TRUE(st.rx_buffer_cap <= reader_bound(sent));
        }
    }
    printf("loop_3_3: after %zu bytes of a 64 MiB frame the receive buffer is at most %llu bytes\n", sent,
           (unsigned long long)max_cap);
    bad_env_check_good(&e);
    close(fd);
    ASSERT_TRUE(lt_wait_flag(&p->closed, LT_WAIT_MS));
    ASSERT_RC(atomic_load(&p->close_err), RL_E_CONNECTION_FAILED);
    ASSERT_NOT_NULL(strstr(rl__conn_close_reason(p->conn), "middle of a frame"));
    bad_env_check_good(&e);
    bad_env_finish(&e);
}

RL_TEST_MAIN(T(loop_1_1_posts_fifo_from_threads), T(loop_1_2_stop_and_run_rules), T(loop_1_3_timer_order_and_cancel),
             T(loop_1_4_timer_precision_pwait2), T(loop_1_5_timer_precision_timerfd), T(loop_1_6_idle_uses_no_cpu),
             T(loop_1_7_free_runs_pending_posts), T(loop_1_8_margin_bounds), T(loop_2_1_echo_sizes),
             T(loop_2_2_pipelined_both_ways), T(loop_2_3_four_threads_one_connection),
             T(loop_2_4_send_buf_and_bad_arguments), T(loop_2_5_connect_refused), T(loop_2_6_non_loopback_refused),
             T(loop_2_7_address_in_use), T(loop_2_8_connect_timeout), T(loop_2_9_close_while_sending),
             T(loop_2_10_close_inside_on_frame), T(loop_2_11_close_flush_and_drop), T(loop_2_12_free_closes_everything),
             T(loop_3_1_garbage_oversized_bad_flag), T(loop_3_2_truncated_then_eof),
             T(loop_3_3_trickle_does_not_preallocate))
