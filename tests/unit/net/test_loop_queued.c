/* test_loop_queued.c — loop_7_*: rl__conn_send_queued (src/net/loop.h), the send that never writes
 * from the calling thread: frames arrive whole and in the order of the send calls, mixed with
 * rl__conn_send from several threads and from the loop thread itself; a burst is written with far
 * fewer sendmsg calls than frames; sends on a closed connection fail; rl__conn_send2 gathers two
 * parts into one frame. */
#include "looptest.h"

/* loop-7.1: 20,000 frames from one thread, alternating queued and direct sends in runs, arrive in
 * order with their payloads; most went through the queue (few direct writes). */
TEST(loop_7_1_order_and_batching) {
    lt_loop l;
    lt_loop_start(&l, 0);
    lt_server s;
    lt_server_start(&s, l.loop, 0, 1);
    lt_peer *c = lt_connect(l.loop, s.port, 0, 0);
    lt_peer *srv = lt_server_peer(&s, 1);
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        char p[32];
        int n = snprintf(p, sizeof p, "frame-%d", i);
        int rc = (i / 100) % 3 == 2 ? rl__conn_send(c->conn, 7, 0, (uint64_t)i + 1, p, (size_t)n)
                                    : rl__conn_send_queued(c->conn, 7, 0, (uint64_t)i + 1, p, (size_t)n);
        ASSERT_OK(rc);
    }
    ASSERT_TRUE(lt_wait_count(&srv->frame_count, N, LT_WAIT_MS));
    pthread_mutex_lock(&srv->mu);
    for (int i = 0; i < N; i++) {
        char p[32];
        int n = snprintf(p, sizeof p, "frame-%d", i);
        ASSERT_EQ(srv->frames[i].h.id, (uint64_t)i + 1);
        ASSERT_MEM_EQ(srv->frames[i].payload, srv->frames[i].h.payload_len, p, (size_t)n);
    }
    pthread_mutex_unlock(&srv->mu);
    rl__conn_stats st;
    rl__conn_get_stats(c->conn, &st);
    ASSERT_EQ(st.frames_sent, N);
    ASSERT_TRUE(st.frames_direct < N / 2); /* the queued two thirds never wrote directly */
    printf("frames %d, written directly %llu\n", N, (unsigned long long)st.frames_direct);
    lt_loop_finish(&l);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

typedef struct {
    rl__conn *conn;
    int thread;
} sender;

static void *send_many(void *ud) {
    sender *sd = ud;
    for (int i = 0; i < 5000; i++) {
        uint64_t id = ((uint64_t)sd->thread << 32) | (uint64_t)i;
        uint8_t b[8];
        for (int k = 0; k < 8; k++) b[k] = (uint8_t)(id >> (8 * k));
        int rc = i % 7 == 0 ? rl__conn_send(sd->conn, 9, 0, id, b, 8) : rl__conn_send_queued(sd->conn, 9, 0, id, b, 8);
        LT_BG_CHECK(rc == RL_OK);
    }
    return NULL;
}

/* Echo with queued replies from the loop thread: the reply is flushed in a later pass. */
static void queued_echo(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    lt_peer *p = ud;
    int rc = rl__conn_send_queued(conn, h->type, RL_FRAME_REPLY, h->id, payload, h->payload_len);
    LT_BG_CHECK(rc == RL_OK || rc == RL_E_CONNECTION_FAILED);
    atomic_fetch_add(&p->frame_count, 1);
}

static void set_queued_echo(rl__loop *loop, void *ud) {
    (void)loop;
    lt_peer *p = ud;
    LT_BG_CHECK(rl__conn_set_callbacks(p->conn, queued_echo, lt_on_close, p) == RL_OK);
}

/* loop-7.2: four threads mixing queued and direct sends: each thread's frames arrive in its order;
 * a server that answers every frame with a queued send from the loop thread answers all of them;
 * after close, queued sends fail with connection_failed. */
TEST(loop_7_2_threads_and_loop_thread) {
    lt_loop l;
    lt_loop_start(&l, 0);
    lt_server s;
    lt_server_start(&s, l.loop, 0, 1);
    lt_peer *c = lt_connect(l.loop, s.port, 0, 1);
    lt_peer *srv = lt_server_peer(&s, 1);
    lt_call(l.loop, set_queued_echo, srv);
    sender sd[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        sd[i] = (sender){c->conn, i};
        pthread_create(&th[i], NULL, send_many, &sd[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    ASSERT_TRUE(lt_wait_count(&srv->frame_count, 20000, LT_WAIT_MS));
    ASSERT_TRUE(lt_wait_count(&c->frame_count, 20000, LT_WAIT_MS));
    /* Per thread, ids arrive increasing at the client (echoed in order). */
    int64_t last[4] = {-1, -1, -1, -1};
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nframes; i++) {
        uint64_t id = c->frames[i].h.id;
        int t = (int)(id >> 32);
        ASSERT_TRUE(t >= 0 && t < 4);
        ASSERT_TRUE((int64_t)(id & 0xffffffffu) > last[t]);
        last[t] = (int64_t)(id & 0xffffffffu);
        ASSERT_TRUE(c->frames[i].h.flags & RL_FRAME_REPLY);
    }
    pthread_mutex_unlock(&c->mu);
    for (int t = 0; t < 4; t++) ASSERT_EQ(last[t], 4999);
    rl__conn_close(c->conn, 0);
    ASSERT_TRUE(lt_wait_flag(&c->closed, LT_WAIT_MS));
    ASSERT_RC(rl__conn_send_queued(c->conn, 9, 0, 1, "x", 1), RL_E_CONNECTION_FAILED);
    ASSERT_RC(rl__conn_send_queued(c->conn, 9, 0x10, 1, "x", 1), RL_E_INVALID_ARGUMENT);
    lt_loop_finish(&l);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

/* loop-7.3: rl__conn_send2 gathers head and body into one frame — direct and queued, parts of
 * 0 to 300 bytes (a spare frame's size and larger), NULL parts of length 0 — arriving in order as
 * head then body; a payload over RL_NET_MAX_PAYLOAD in total, or a NULL part with a length, is
 * refused and sends nothing. */
TEST(loop_7_3_send2_gathers) {
    lt_loop l;
    lt_loop_start(&l, 0);
    lt_server s;
    lt_server_start(&s, l.loop, 0, 1);
    lt_peer *c = lt_connect(l.loop, s.port, 0, 0);
    lt_peer *srv = lt_server_peer(&s, 1);
    static uint8_t bytes[600];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)(i * 13 + 1);
    enum { N = 3000 };
    for (int i = 0; i < N; i++) {
        size_t hl = (size_t)(i * 7) % 301, bl = (size_t)(i * 11) % 299;
        ASSERT_OK(rl__conn_send2(c->conn, 7, 0, (uint64_t)i + 1, hl ? bytes : NULL, hl, bl ? bytes + 300 : NULL, bl,
                                 i % 5 != 0));
    }
    ASSERT_EQ(rl__conn_send2(c->conn, 7, 0, 1, bytes, 10, NULL, 1, 1), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(rl__conn_send2(c->conn, 7, 0, 1, bytes, 1, bytes, RL_NET_MAX_PAYLOAD, 0), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(lt_wait_count(&srv->frame_count, N, LT_WAIT_MS));
    pthread_mutex_lock(&srv->mu);
    ASSERT_EQ(srv->frame_count, N);
    uint8_t want[600];
    for (int i = 0; i < N; i++) {
        size_t hl = (size_t)(i * 7) % 301, bl = (size_t)(i * 11) % 299;
        memcpy(want, bytes, hl);
        memcpy(want + hl, bytes + 300, bl);
        ASSERT_EQ(srv->frames[i].h.id, (uint64_t)i + 1);
        ASSERT_MEM_EQ(srv->frames[i].payload, srv->frames[i].h.payload_len, want, hl + bl);
    }
    pthread_mutex_unlock(&srv->mu);
    lt_loop_finish(&l);
    lt_peer_free(c);
    lt_server_free_peers(&s);
    LT_ASSERT_NO_BG_ERRORS();
}

RL_TEST_MAIN(T(loop_7_1_order_and_batching), T(loop_7_2_threads_and_loop_thread), T(loop_7_3_send2_gathers))
