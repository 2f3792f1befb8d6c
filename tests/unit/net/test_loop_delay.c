/* test_loop_delay.c — injected network delay (rl__conn_set_delay): every frame's
 * measured one-way latency (the sender's monotonic timestamp in the payload vs the receiver's
 * clock, same machine) is at least the delay, frames stay in order with jitter, the delay can
 * change on a live connection, and the per-frame lateness stats are printed (test IDs loop_4_*).
 *
 * Only lower bounds (latency >= delay) and generous upper bounds are asserted; the printed figures
 * are the measurement.
 */
#include "looptest.h"

typedef struct {
    lt_loop srv, cli;
    lt_server s;
    lt_peer *c;  /* client side */
    lt_peer *sp; /* server side of the same connection */
} dl_env;

static void dl_start(dl_env *e, int echo) {
    memset(e, 0, sizeof *e);
    lt_loop_start(&e->srv, 0);
    lt_loop_start(&e->cli, 0);
    lt_server_start(&e->s, e->srv.loop, echo, 1);
    e->c = lt_connect(e->cli.loop, e->s.port, 0, 1);
    e->sp = lt_server_peer(&e->s, 1);
}

static void dl_finish(dl_env *e) {
    lt_loop_finish(&e->cli);
    lt_loop_finish(&e->srv);
    lt_peer_free(e->c);
    lt_server_free_peers(&e->s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* Send a frame whose payload starts with (send time, seq), padded to len bytes. */
static void dl_send(rl__conn *conn, uint32_t seq, size_t len) {
    uint8_t buf[64];
    uint8_t *p = len > sizeof buf ? calloc(1, len) : buf;
    if (len <= sizeof buf) memset(buf, 0, sizeof buf);
    uint64_t t = rl__clock_mono_ns();
    memcpy(p, &t, 8);
    memcpy(p + 8, &seq, 4);
    ASSERT_OK(rl__conn_send(conn, 1, 0, seq, p, len < 12 ? 12 : len));
    if (p != buf) free(p);
}

/* One-way latencies of the frames recorded by p from index `from`, checked >= min_us and in
 * order (seq increasing); returns how many. Fills lat[] (ns). */
static size_t dl_latencies(lt_peer *p, size_t from, uint64_t *lat, uint64_t min_us, uint32_t *next_seq) {
    size_t n = 0;
    pthread_mutex_lock(&p->mu);
    for (size_t i = from; i < p->nframes; i++) {
        lt_frame *f = &p->frames[i];
        uint64_t t;
        uint32_t seq;
        memcpy(&t, f->payload, 8);
        memcpy(&seq, f->payload + 8, 4);
        if (seq != *next_seq) fail_msg("frame %zu: seq %u, expected %u (reordered)", i, seq, *next_seq);
        (*next_seq)++;
        lat[n] = f->recv_ns - t;
        if (lat[n] < min_us * 1000u)
            fail_msg("frame %zu (seq %u): one-way latency %.1f us < delay %llu us", i, seq, lat[n] / 1e3,
                     (unsigned long long)min_us);
        n++;
    }
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void dl_print(const char *label, uint64_t *lat, size_t n, rl__conn *sender) {
    lt_sort(lat, n);
    rl__lat_hist h;
    rl__conn_get_lateness(sender, &h, RL_STATS_RESET);
    printf("%s: %zu frames, one-way latency min %.1f p50 %.1f p99 %.1f max %.1f us; "
           "release lateness (%llu frames) min %.1f p50 %.1f p99 %.1f max %.1f us\n",
           label, n, lat[0] / 1e3, lt_pct(lat, n, 0.5) / 1e3, lt_pct(lat, n, 0.99) / 1e3, lat[n - 1] / 1e3,
           (unsigned long long)h.count, h.min_ns / 1e3, rl__lat_hist_quantile(&h, 0.5) / 1e3,
           rl__lat_hist_quantile(&h, 0.99) / 1e3, h.max_ns / 1e3);
}

/* 250 µs of delay: every frame (spaced and in bursts) takes >= 250 µs one way; lateness is small. */
TEST(loop_4_1_delay_250us) {
    dl_env e;
    dl_start(&e, 0);
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 250, 0, 1));
    uint32_t seq = 0;
    for (int i = 0; i < 200; i++) {
        dl_send(e.c->conn, seq++, 16);
        rl__clock_sleep_us(300 + (uint64_t)(i % 7) * 100);
    }
    for (int i = 0; i < 100; i++) dl_send(e.c->conn, seq++, 16 + (size_t)i * 10); /* a burst */
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 300, LT_WAIT_MS));
    uint64_t lat[300];
    uint32_t next = 0;
    size_t n = dl_latencies(e.sp, 0, lat, 250, &next);
    ASSERT_EQ(n, 300);
    rl__conn_stats st;
    rl__conn_get_stats(e.c->conn, &st);
    ASSERT_EQ(st.delayed_frames, 300);
    ASSERT_EQ(st.frames_direct, 0);
    ASSERT_EQ(st.delay_us, 250);
    printf("loop_4_1 stats: lateness min %.1f p50 %.1f p99 %.1f max %.1f us\n", st.late_min_ns / 1e3,
           st.late_p50_ns / 1e3, st.late_p99_ns / 1e3, st.late_max_ns / 1e3);
    /* On time at the median: 100 µs, or 20 ms on a busy machine (rl_test_machine_busy). */
    ASSERT_TRUE(st.late_p50_ns < (rl_test_machine_busy() ? 20000000u : 100000u));
    dl_print("loop_4_1 delay 250us", lat, n, e.c->conn);
    dl_finish(&e);
}

typedef struct {
    rl__conn *conn;
    uint32_t tid;
    int n;
} jt_arg;

static void *jt_main(void *arg) {
    jt_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        uint8_t buf[16];
        uint64_t t = rl__clock_mono_ns();
        uint32_t s = (uint32_t)i;
        memcpy(buf, &t, 8);
        memcpy(buf + 8, &s, 4);
        memcpy(buf + 12, &a->tid, 4);
        LT_BG_CHECK(rl__conn_send(a->conn, 2, 0, (uint64_t)a->tid << 32 | s, buf, sizeof buf) == RL_OK);
        if (i % 16 == 0) rl__clock_sleep_us(50);
    }
    return NULL;
}

/* Jitter (100 µs + up to 400 µs): frames from one thread, then from three threads at once, all
 * arrive in send order (per thread), each no earlier than the fixed delay. */
TEST(loop_4_2_jitter_keeps_order) {
    dl_env e;
    dl_start(&e, 0);
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 100, 400, rl_test_seed()));
    uint32_t seq = 0;
    for (int i = 0; i < 2000; i++) {
        dl_send(e.c->conn, seq++, 12);
        if (i % 8 == 0) rl__clock_sleep_us(20);
    }
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 2000, LT_WAIT_MS));
    uint64_t *lat = calloc(2000, sizeof *lat);
    uint32_t next = 0;
    size_t n = dl_latencies(e.sp, 0, lat, 100, &next);
    ASSERT_EQ(n, 2000);
    dl_print("loop_4_2 delay 100us jitter 400us", lat, n, e.c->conn);
    /* Three threads. */
    jt_arg args[3];
    pthread_t th[3];
    for (uint32_t i = 0; i < 3; i++) {
        args[i] = (jt_arg){e.c->conn, i, 1000};
        ASSERT_EQ(pthread_create(&th[i], NULL, jt_main, &args[i]), 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 5000, LT_WAIT_MS));
    uint32_t nexts[3] = {0};
    for (size_t i = 2000; i < e.sp->nframes; i++) {
        lt_frame *f = &e.sp->frames[i];
        uint64_t t;
        uint32_t s, tid;
        memcpy(&t, f->payload, 8);
        memcpy(&s, f->payload + 8, 4);
        memcpy(&tid, f->payload + 12, 4);
        ASSERT_TRUE(tid < 3);
        ASSERT_EQ(s, nexts[tid]);
        nexts[tid]++;
        ASSERT_TRUE(f->recv_ns - t >= 100000u);
    }
    for (int i = 0; i < 3; i++) ASSERT_EQ(nexts[i], 1000);
    free(lat);
    dl_finish(&e);
}

/* Wait until the sender's queue is empty. */
static void dl_drain(rl__conn *c) {
    uint64_t end = rl__clock_mono_ns() + 10000000000ull;
    rl__conn_stats st;
    do {
        rl__clock_sleep_us(100);
        rl__conn_get_stats(c, &st);
    } while (st.queued_frames && rl__clock_mono_ns() < end);
    ASSERT_EQ(st.queued_frames, 0);
}

/* The delay changes on a live connection: 0 -> 500 µs -> 100 µs (while 500 µs frames are still
 * queued: no overtaking) -> 0 (queued frames still first; then direct sends again). */
TEST(loop_4_3_change_delay_live) {
    dl_env e;
    dl_start(&e, 0);
    uint64_t lat[200];
    uint32_t seq = 0, next = 0;
    size_t seen = 0;
    /* Phase A: no delay. */
    for (int i = 0; i < 100; i++) {
        dl_send(e.c->conn, seq++, 12);
        rl__clock_sleep_us(200);
    }
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 100, LT_WAIT_MS));
    size_t n = dl_latencies(e.sp, seen, lat, 0, &next);
    seen += n;
    lt_sort(lat, n);
    rl__conn_stats st;
    rl__conn_get_stats(e.c->conn, &st);
    printf("loop_4_3 no delay: one-way p50 %.1f us p99 %.1f us, %llu of 100 written directly\n",
           lt_pct(lat, n, 0.5) / 1e3, lt_pct(lat, n, 0.99) / 1e3, (unsigned long long)st.frames_direct);
    ASSERT_EQ(st.frames_direct, 100);
    /* Phase B: 500 µs, spaced. */
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 500, 0, 7));
    for (int i = 0; i < 100; i++) {
        dl_send(e.c->conn, seq++, 12);
        rl__clock_sleep_us(150);
    }
    /* Phase C: 100 µs right away, while the last 500 µs frames are queued. */
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 100, 0, 7));
    rl__conn_get_stats(e.c->conn, &st);
    printf("loop_4_3 at the switch to 100 us: %llu frames queued\n", (unsigned long long)st.queued_frames);
    for (int i = 0; i < 100; i++) dl_send(e.c->conn, seq++, 12);
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 300, LT_WAIT_MS));
    n = dl_latencies(e.sp, seen, lat, 0, &next); /* order across the switch */
    ASSERT_EQ(n, 200);
    seen += n;
    for (size_t i = 0; i < 100; i++) ASSERT_TRUE(lat[i] >= 500000u);
    for (size_t i = 100; i < 200; i++) ASSERT_TRUE(lat[i] >= 100000u);
    dl_print("loop_4_3 500us then 100us", lat, 200, e.c->conn);
    /* Phase D: 0/0 while frames are queued. */
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 1000, 0, 7));
    for (int i = 0; i < 20; i++) dl_send(e.c->conn, seq++, 12);
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 0, 0, 0));
    rl__conn_get_stats(e.c->conn, &st);
    uint64_t direct_before = st.frames_direct;
    ASSERT_TRUE(st.queued_frames > 0);
    for (int i = 0; i < 20; i++) dl_send(e.c->conn, seq++, 12); /* queued behind the delayed ones */
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 340, LT_WAIT_MS));
    n = dl_latencies(e.sp, seen, lat, 0, &next);
    ASSERT_EQ(n, 40);
    seen += n;
    for (size_t i = 0; i < 40; i++) ASSERT_TRUE(lat[i] >= 1000000u); /* nothing overtook */
    dl_drain(e.c->conn);
    rl__conn_get_stats(e.c->conn, &st);
    ASSERT_EQ(st.frames_direct, direct_before); /* the 20 went through the queue */
    for (int i = 0; i < 20; i++) dl_send(e.c->conn, seq++, 12);
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 360, LT_WAIT_MS));
    rl__conn_get_stats(e.c->conn, &st);
    ASSERT_EQ(st.frames_direct, direct_before + 20); /* direct again after the drain */
    n = dl_latencies(e.sp, seen, lat, 0, &next);
    ASSERT_EQ(n, 20);
    dl_finish(&e);
}

/* Delay on both directions, the reply sent from the server's loop thread: ping-pong round trips
 * are >= 2 x 250 µs. */
TEST(loop_4_4_delay_both_directions_rtt) {
    dl_env e;
    dl_start(&e, 1);
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 250, 0, 1));
    ASSERT_OK(rl__conn_set_delay(e.sp->conn, 250, 0, 2));
    uint64_t rtt[200];
    for (int i = 0; i < 200; i++) {
        uint64_t t0 = rl__clock_mono_ns();
        dl_send(e.c->conn, (uint32_t)i, 12);
        ASSERT_TRUE(lt_wait_count(&e.c->frame_count, i + 1, LT_WAIT_MS));
        rtt[i] = e.c->frames[i].recv_ns - t0;
        ASSERT_TRUE(rtt[i] >= 500000u);
    }
    lt_sort(rtt, 200);
    rl__conn_stats a, b;
    rl__conn_get_stats(e.c->conn, &a);
    rl__conn_get_stats(e.sp->conn, &b);
    printf("loop_4_4 250us each way: RTT min %.1f p50 %.1f p99 %.1f max %.1f us; lateness p50/p99 client "
           "%.1f/%.1f server %.1f/%.1f us\n",
           rtt[0] / 1e3, lt_pct(rtt, 200, 0.5) / 1e3, lt_pct(rtt, 200, 0.99) / 1e3, rtt[199] / 1e3, a.late_p50_ns / 1e3,
           a.late_p99_ns / 1e3, b.late_p50_ns / 1e3, b.late_p99_ns / 1e3);
    ASSERT_EQ(b.delayed_frames, 200);
    dl_finish(&e);
}

/* Large frames under delay (the socket fills, EPOLLOUT and release timers interleave): all arrive
 * whole, in order, no earlier than the delay. */
TEST(loop_4_5_delay_large_frames) {
    dl_env e;
    dl_start(&e, 0);
    ASSERT_OK(rl__conn_set_delay(e.c->conn, 250, 50, 3));
    for (uint32_t i = 0; i < 24; i++) dl_send(e.c->conn, i, (size_t)1 << 20);
    ASSERT_TRUE(lt_wait_count(&e.sp->frame_count, 24, 30000));
    uint64_t lat[24];
    uint32_t next = 0;
    ASSERT_EQ(dl_latencies(e.sp, 0, lat, 250, &next), 24);
    for (int i = 0; i < 24; i++) ASSERT_EQ(e.sp->frames[i].h.payload_len, 1u << 20);
    dl_print("loop_4_5 1 MiB frames, 250us + 50us jitter", lat, 24, e.c->conn);
    dl_finish(&e);
}

RL_TEST_MAIN(T(loop_4_1_delay_250us), T(loop_4_2_jitter_keeps_order), T(loop_4_3_change_delay_live),
             T(loop_4_4_delay_both_directions_rtt), T(loop_4_5_delay_large_frames))
