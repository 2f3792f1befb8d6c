/* test_loop_bench.c — benchmarks, not timed tests (loop_6_1, loop_6_2): the loopback ping-pong round trip
 * of 24-byte frames (16-byte header + 8) through the runtime, next to a plain blocking-socket
 * ping-pong, with and without 250 µs of injected delay per direction. It prints min/p50/p99/max
 * and asserts only that every ping came back.
 *
 *   build-loop/unit_net_test_loop_bench              (quick: 3000 / 500 round trips)
 *   RL_LOOP_BENCH_N=20000 build-loop/unit_net_test_loop_bench
 *
 * Cases:
 *   blocking      two threads, blocking send/recv on a TCP_NODELAY loopback socket (the floor)
 *   app-thread    the client's application thread sends directly (rl__conn_send, no loop wake-up),
 *                 the server loop echoes from its thread, the client loop's on_frame signals the
 *                 application thread through a condition variable (the cluster client's path)
 *   app-spin      the same, but the application thread spins instead of sleeping (isolates the
 *                 cost of waking it)
 *   loop-to-loop  the client loop's on_frame sends the next ping itself (no application thread)
 * "+delay" runs the case with rl__conn_set_delay(250 µs) on both ends (expected >= 500 µs).
 *
 * loop_6_2 prints timer lateness (fire time − deadline) of chained 250 µs and 1 ms timers.
 */
#include "looptest.h"

/* The number of round trips: dflt, or RL_LOOP_BENCH_N / div when that is set. */
static int bench_n(int dflt, int div) {
    const char *e = getenv("RL_LOOP_BENCH_N");
    int n = e ? atoi(e) / div : 0;
    return n > 0 ? n : dflt;
}

static void print_case(const char *name, uint64_t *rtt, int n) {
    lt_sort(rtt, (size_t)n);
    printf("loop_6_1 %-22s n=%-6d RTT min %7.1f  p50 %7.1f  p99 %7.1f  max %8.1f us\n", name, n, rtt[0] / 1e3,
           lt_pct(rtt, (size_t)n, 0.5) / 1e3, lt_pct(rtt, (size_t)n, 0.99) / 1e3, rtt[n - 1] / 1e3);
}

/* ---- blocking sockets ---- */

static void *blocking_echo(void *arg) {
    int fd = *(int *)arg;
    uint8_t buf[24];
    while (lt_raw_read(fd, buf, sizeof buf)) lt_raw_write(fd, buf, sizeof buf);
    return NULL;
}

static void bench_blocking(int n) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    ASSERT_EQ(listen(lfd, 4), 0);
    socklen_t len = sizeof sa;
    ASSERT_EQ(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    int cfd = lt_raw_connect(ntohs(sa.sin_port));
    int sfd = accept(lfd, NULL, NULL);
    ASSERT_TRUE(sfd >= 0);
    int one = 1;
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t th;
    ASSERT_EQ(pthread_create(&th, NULL, blocking_echo, &sfd), 0);
    uint64_t *rtt = calloc((size_t)n, sizeof *rtt);
    uint8_t buf[24] = {0};
    for (int i = -100; i < n; i++) {
        uint64_t t0 = rl__clock_mono_ns();
        lt_raw_write(cfd, buf, sizeof buf);
        ASSERT_TRUE(lt_raw_read(cfd, buf, sizeof buf));
        if (i >= 0) rtt[i] = rl__clock_mono_ns() - t0;
    }
    print_case("blocking", rtt, n);
    shutdown(cfd, SHUT_WR);
    pthread_join(th, NULL);
    close(cfd);
    close(sfd);
    close(lfd);
    free(rtt);
}

/* ---- through the loop ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_long replies;
    int use_cv;
    /* loop-to-loop mode */
    int self_drive, n, i;
    uint64_t t0;
    uint64_t *rtt;
    atomic_int done;
    rl__conn *conn;
} bench_client;

static void bench_on_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    (void)h;
    (void)payload;
    bench_client *b = ud;
    if (b->self_drive) {
        uint64_t t = rl__clock_mono_ns();
        if (b->i >= 0) b->rtt[b->i] = t - b->t0;
        if (++b->i == b->n) {
            atomic_store(&b->done, 1);
            return;
        }
        b->t0 = rl__clock_mono_ns();
        LT_BG_CHECK(rl__conn_send(conn, 1, 0, 0, &b->t0, 8) == RL_OK);
        return;
    }
    if (b->use_cv) {
        pthread_mutex_lock(&b->mu);
        atomic_fetch_add(&b->replies, 1);
        pthread_cond_signal(&b->cv);
        pthread_mutex_unlock(&b->mu);
    } else {
        atomic_fetch_add(&b->replies, 1);
    }
}

static void bench_on_close(rl__conn *conn, int err, void *ud) {
    (void)conn;
    (void)err;
    (void)ud;
}

typedef struct {
    bench_client *b;
    atomic_int done;
    atomic_int err;
    rl__conn *conn;
} bench_connect_ctx;

static void bench_on_connect(rl__conn *conn, int err, void *ud) {
    bench_connect_ctx *c = ud;
    if (err == RL_OK) {
        c->conn = conn;
        LT_BG_CHECK(rl__conn_set_callbacks(conn, bench_on_frame, bench_on_close, c->b) == RL_OK);
    }
    atomic_store(&c->err, err);
    atomic_store(&c->done, 1);
}

static void kick_self_drive(rl__loop *loop, void *ud) {
    (void)loop;
    bench_client *b = ud;
    b->t0 = rl__clock_mono_ns();
    LT_BG_CHECK(rl__conn_send(b->conn, 1, 0, 0, &b->t0, 8) == RL_OK);
}

static void bench_loop_case(const char *name, int n, int mode /* 0 cv, 1 spin, 2 loop-to-loop */, uint32_t delay_us) {
    lt_loop srv, cli;
    lt_loop_start(&srv, 0);
    lt_loop_start(&cli, 0);
    lt_server s;
    lt_server_start(&s, srv.loop, 1, 0);
    bench_client *b = calloc(1, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->use_cv = mode == 0;
    b->self_drive = mode == 2;
    b->n = n;
    b->i = -100; /* warm-up */
    b->rtt = calloc((size_t)n, sizeof *b->rtt);
    bench_connect_ctx cc;
    memset(&cc, 0, sizeof cc);
    cc.b = b;
    ASSERT_OK(rl__connect(cli.loop, "127.0.0.1", s.port, 5000, bench_on_connect, &cc, NULL));
    ASSERT_TRUE(lt_wait_flag(&cc.done, LT_WAIT_MS));
    ASSERT_OK(atomic_load(&cc.err));
    b->conn = cc.conn;
    lt_peer *sp = lt_server_peer(&s, 1);
    if (delay_us) {
        ASSERT_OK(rl__conn_set_delay(b->conn, delay_us, 0, 1));
        ASSERT_OK(rl__conn_set_delay(sp->conn, delay_us, 0, 2));
    }
    if (mode == 2) {
        ASSERT_OK(rl__loop_post(cli.loop, kick_self_drive, b));
        ASSERT_TRUE(lt_wait_flag(&b->done, 120000));
    } else {
        uint64_t ts = 0;
        for (int i = -100; i < n; i++) {
            long want = atomic_load(&b->replies) + 1;
            uint64_t t0 = rl__clock_mono_ns();
            ASSERT_OK(rl__conn_send(b->conn, 1, 0, (uint64_t)i, &ts, 8));
            if (mode == 0) {
                pthread_mutex_lock(&b->mu);
                while (atomic_load(&b->replies) < want) {
                    struct timespec dl;
                    clock_gettime(CLOCK_REALTIME, &dl);
                    dl.tv_sec += 10;
                    if (pthread_cond_timedwait(&b->cv, &b->mu, &dl) != 0) break;
                }
                pthread_mutex_unlock(&b->mu);
                ASSERT_TRUE(atomic_load(&b->replies) >= want);
            } else {
                uint64_t end = t0 + 10000000000ull;
                while (atomic_load(&b->replies) < want && rl__clock_mono_ns() < end) {}
                ASSERT_TRUE(atomic_load(&b->replies) >= want);
            }
            if (i >= 0) b->rtt[i] = rl__clock_mono_ns() - t0;
        }
    }
    print_case(name, b->rtt, n);
    if (delay_us) {
        rl__conn_stats a, c;
        rl__conn_get_stats(b->conn, &a);
        rl__conn_get_stats(sp->conn, &c);
        rl__loop_stats ls;
        rl__loop_get_stats(cli.loop, &ls);
        printf("loop_6_1 %-22s release lateness p50/p99/max: client %.1f/%.1f/%.1f server %.1f/%.1f/%.1f us; "
               "client loop margin %.1f us, spun %.1f ms\n",
               "", a.late_p50_ns / 1e3, a.late_p99_ns / 1e3, a.late_max_ns / 1e3, c.late_p50_ns / 1e3,
               c.late_p99_ns / 1e3, c.late_max_ns / 1e3, ls.margin_ns / 1e3, ls.spin_ns / 1e6);
    }
    lt_loop_finish(&cli);
    lt_loop_finish(&srv);
    rl__conn_release(b->conn);
    lt_server_free_peers(&s);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b->rtt);
    free(b);
}

/* ---- timer precision ---- */

typedef struct {
    int n, want;
    uint64_t deadline, period_ns;
    uint64_t *late;
    atomic_int done;
} tp_ctx;

static void tp_cb(rl__loop *loop, void *ud) {
    tp_ctx *t = ud;
    uint64_t now = rl__clock_mono_ns();
    LT_BG_CHECK(now >= t->deadline);
    t->late[t->n++] = now - t->deadline;
    if (t->n == t->want) {
        atomic_store(&t->done, 1);
        return;
    }
    t->deadline = rl__clock_mono_ns() + t->period_ns;
    LT_BG_CHECK(rl__loop_timer_add(loop, t->deadline, tp_cb, t, NULL) == RL_OK);
}

static void tp_start(rl__loop *loop, void *ud) {
    tp_ctx *t = ud;
    t->deadline = rl__clock_mono_ns() + t->period_ns;
    LT_BG_CHECK(rl__loop_timer_add(loop, t->deadline, tp_cb, t, NULL) == RL_OK);
}

static void bench_timers(const char *name, unsigned flags, int n, uint64_t period_ns) {
    tp_ctx t;
    memset(&t, 0, sizeof t);
    t.want = n;
    t.period_ns = period_ns;
    t.late = calloc((size_t)n, sizeof *t.late);
    lt_loop l;
    lt_loop_start(&l, flags);
    lt_call(l.loop, tp_start, &t);
    ASSERT_TRUE(lt_wait_flag(&t.done, 120000));
    rl__loop_stats st;
    rl__loop_get_stats(l.loop, &st);
    lt_loop_finish(&l);
    lt_sort(t.late, (size_t)n);
    printf("loop_6_2 %-18s n=%-5d lateness p50 %6.1f  p90 %6.1f  p99 %7.1f  p99.9 %7.1f  max %7.1f us; "
           "margin %.1f us, sleep wake-up lateness p50 %.1f p99 %.1f us, spun %.1f%% of the time\n",
           name, n, lt_pct(t.late, (size_t)n, 0.5) / 1e3, lt_pct(t.late, (size_t)n, 0.9) / 1e3,
           lt_pct(t.late, (size_t)n, 0.99) / 1e3, lt_pct(t.late, (size_t)n, 0.999) / 1e3, t.late[n - 1] / 1e3,
           st.margin_ns / 1e3, st.wake_late_p50_ns / 1e3, st.wake_late_p99_ns / 1e3,
           100.0 * (double)st.spin_ns / ((double)n * (double)period_ns));
    free(t.late);
}

/* Timer lateness over many 250 µs timers, each armed by the previous one's callback (the delay
 * path's pattern), through epoll_pwait2 and through the timerfd fallback. Printed only. */
TEST(loop_6_2_timer_precision_bench) {
    int n = bench_n(2000, 1);
    bench_timers("250us pwait2", 0, n, 250000);
    bench_timers("250us timerfd", RL_LOOP_FORCE_TIMERFD, n, 250000);
    bench_timers("1ms pwait2", 0, n / 4 > 0 ? n / 4 : 1, 1000000);
    LT_ASSERT_NO_BG_ERRORS();
}

TEST(loop_6_1_pingpong_bench) {
    int n = bench_n(3000, 1), nd = bench_n(500, 6);
    bench_blocking(n);
    bench_loop_case("app-thread", n, 0, 0);
    bench_loop_case("app-spin", n, 1, 0);
    bench_loop_case("loop-to-loop", n, 2, 0);
    bench_loop_case("app-thread +delay", nd, 0, 250);
    bench_loop_case("loop-to-loop +delay", nd, 2, 250);
    LT_ASSERT_NO_BG_ERRORS();
}

RL_TEST_MAIN(T(loop_6_1_pingpong_bench), T(loop_6_2_timer_precision_bench))
