/* looptest.h — helpers shared by the tests of the network runtime (tests/unit/net/test_loop*.c):
 * a loop running on its own thread, waiting with timeouts, running a function on the loop
 * thread, an echo server, a frame collector, and raw blocking sockets for misbehaving peers.
 *
 * Every wait here has a timeout (LT_WAIT_MS unless given), so a broken runtime fails a test instead
 * of hanging it.
 */
#ifndef RL_LOOPTEST_H
#define RL_LOOPTEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "net/loop.h"
#include "test.h"

#define LT_WAIT_MS 10000

/* Checks in callbacks that run on a loop thread cannot use cmocka's asserts (they longjmp into the
 * test's thread); they count failures here and the test asserts the count is 0. */
static atomic_int lt_bg_errors;
#define LT_BG_CHECK(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "%s:%d: background check failed: %s\n", __FILE__, __LINE__, #cond); \
            atomic_fetch_add(&lt_bg_errors, 1);                                                 \
        }                                                                                       \
    } while (0)
#define LT_ASSERT_NO_BG_ERRORS() ASSERT_EQ(atomic_load(&lt_bg_errors), 0)

/* ---- a loop on its own thread ---- */

typedef struct {
    rl__loop *loop;
    pthread_t thread;
    atomic_int run_rc;
} lt_loop;

static void *lt_loop_main(void *arg) {
    lt_loop *l = arg;
    atomic_store(&l->run_rc, rl__loop_run(l->loop));
    return NULL;
}

static void lt_started(rl__loop *loop, void *ud) {
    (void)loop;
    atomic_store((atomic_int *)ud, 1);
}

/* Create a loop and run it on a new thread; returns once the loop is running. */
static inline void lt_loop_start(lt_loop *l, unsigned flags) {
    memset(l, 0, sizeof *l);
    ASSERT_OK(rl__loop_new(flags, &l->loop, NULL));
    atomic_int started = 0;
    ASSERT_OK(rl__loop_post(l->loop, lt_started, &started));
    ASSERT_EQ(pthread_create(&l->thread, NULL, lt_loop_main, l), 0);
    uint64_t end = rl__clock_mono_ns() + 10000000000ull;
    while (!atomic_load(&started) && rl__clock_mono_ns() < end) rl__clock_sleep_us(50);
    ASSERT_TRUE(atomic_load(&started));
}

/* Stop the loop thread and join it (the loop stays allocated). */
static inline void lt_loop_join(lt_loop *l) {
    rl__loop_stop(l->loop);
    pthread_join(l->thread, NULL);
    ASSERT_OK(atomic_load(&l->run_rc));
}

static inline void lt_loop_finish(lt_loop *l) {
    lt_loop_join(l);
    rl__loop_free(l->loop);
    l->loop = NULL;
}

/* Waits poll with a sleep that starts at 20 µs and doubles to 1 ms, so that a waiting test thread
 * neither adds much latency nor steals the CPU from the loop threads it measures. */
static inline void lt_backoff(uint64_t *us) {
    rl__clock_sleep_us(*us);
    if (*us < 1000) *us *= 2;
}

/* Wait until *flag becomes nonzero; returns 1, or 0 after timeout_ms. */
static inline int lt_wait_flag(atomic_int *flag, int timeout_ms) {
    uint64_t end = rl__clock_mono_ns() + (uint64_t)timeout_ms * 1000000u, us = 20;
    while (!atomic_load(flag)) {
        if (rl__clock_mono_ns() > end) return 0;
        lt_backoff(&us);
    }
    return 1;
}

/* Wait until *counter >= want; returns 1, or 0 after timeout_ms. */
static inline int lt_wait_count(atomic_long *counter, long want, int timeout_ms) {
    uint64_t end = rl__clock_mono_ns() + (uint64_t)timeout_ms * 1000000u, us = 20;
    while (atomic_load(counter) < want) {
        if (rl__clock_mono_ns() > end) return 0;
        lt_backoff(&us);
    }
    return 1;
}

/* Run fn(loop, ud) on the loop thread and wait for it to return. */
typedef struct {
    rl_loop_fn fn;
    void *ud;
    atomic_int done;
} lt_call_ctx;

static void lt_call_fn(rl__loop *loop, void *ud) {
    lt_call_ctx *c = ud;
    c->fn(loop, c->ud);
    atomic_store(&c->done, 1);
}

static inline void lt_call(rl__loop *loop, rl_loop_fn fn, void *ud) {
    lt_call_ctx c = {fn, ud, 0};
    ASSERT_OK(rl__loop_post(loop, lt_call_fn, &c));
    ASSERT_TRUE(lt_wait_flag(&c.done, LT_WAIT_MS));
}

static void lt_nop(rl__loop *loop, void *ud) {
    (void)loop;
    (void)ud;
}

/* A barrier instead of a sleep: post nothing-to-do to loop and wait until it has run. Posts run
 * in order (FIFO across threads), so everything posted to loop before this call has run, and the
 * loop thread has come round to its posts at least once since. Checks that something did NOT
 * happen (a callback twice, a frame after a close) wait for this, not for time to pass. */
static inline void lt_sync(rl__loop *loop) { lt_call(loop, lt_nop, NULL); }

/* ---- recorded frames and connection events ---- */

typedef struct {
    rl__frame_header h;
    uint8_t *payload; /* malloc'd copy */
    uint64_t recv_ns; /* rl__clock_mono_ns when on_frame ran */
} lt_frame;

/* Per-connection state for a recording or echoing peer. Created on the loop thread. */
typedef struct lt_peer {
    rl__conn *conn;
    int echo; /* 1: echo every frame back (flags |= RL_FRAME_REPLY) */
    pthread_mutex_t mu;
    lt_frame *frames; /* recorded frames (when record is set) */
    size_t nframes, cap;
    int record;
    long close_after;        /* > 0: rl__conn_close after this many frames (from on_frame) */
    atomic_long frame_count; /* frames seen */
    atomic_int closed;       /* on_close ran */
    atomic_int close_calls;  /* how many times (must be 1) */
    atomic_int close_err;
    atomic_int frame_after_close; /* on_frame after on_close (must stay 0) */
    struct lt_peer *next;
} lt_peer;

static void lt_on_frame(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud) {
    lt_peer *p = ud;
    if (atomic_load(&p->closed)) atomic_store(&p->frame_after_close, 1);
    if (p->record) {
        pthread_mutex_lock(&p->mu);
        if (p->nframes == p->cap) {
            p->cap = p->cap ? p->cap * 2 : 256;
            p->frames = realloc(p->frames, p->cap * sizeof *p->frames);
        }
        lt_frame *f = &p->frames[p->nframes++];
        f->h = *h;
        f->recv_ns = rl__clock_mono_ns();
        f->payload = malloc(h->payload_len ? h->payload_len : 1);
        memcpy(f->payload, payload, h->payload_len);
        pthread_mutex_unlock(&p->mu);
    }
    if (p->echo) {
        int rc = rl__conn_send(conn, h->type, (uint16_t)(h->flags | RL_FRAME_REPLY), h->id, payload, h->payload_len);
        LT_BG_CHECK(rc == RL_OK || rc == RL_E_CONNECTION_FAILED);
    }
    long seen = atomic_fetch_add(&p->frame_count, 1) + 1;
    if (p->close_after > 0 && seen == p->close_after) rl__conn_close(conn, 0);
}

static void lt_on_close(rl__conn *conn, int err, void *ud) {
    lt_peer *p = ud;
    LT_BG_CHECK(p->conn == NULL || p->conn == conn);
    atomic_store(&p->close_err, err);
    atomic_fetch_add(&p->close_calls, 1);
    atomic_store(&p->closed, 1);
}

static inline lt_peer *lt_peer_new(int echo, int record) {
    lt_peer *p = calloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->echo = echo;
    p->record = record;
    return p;
}

/* Free a peer (after its connection closed or the loop was freed) and drop its reference. */
static inline void lt_peer_free(lt_peer *p) {
    if (!p) return;
    for (size_t i = 0; i < p->nframes; i++) free(p->frames[i].payload);
    free(p->frames);
    pthread_mutex_destroy(&p->mu);
    rl__conn_release(p->conn);
    free(p);
}

/* ---- a server: every accepted connection gets an lt_peer (echoing and/or recording) ---- */

typedef struct {
    rl__listener *listener;
    uint16_t port;
    int echo, record;
    pthread_mutex_t mu;
    lt_peer *peers; /* newest first */
    atomic_long accepted;
} lt_server;

static void lt_on_accept(rl__listener *l, rl__conn *conn, void *ud) {
    (void)l;
    lt_server *s = ud;
    lt_peer *p = lt_peer_new(s->echo, s->record);
    p->conn = conn;
    LT_BG_CHECK(rl__conn_set_callbacks(conn, lt_on_frame, lt_on_close, p) == RL_OK);
    pthread_mutex_lock(&s->mu);
    p->next = s->peers;
    s->peers = p;
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add(&s->accepted, 1);
}

static inline void lt_server_start(lt_server *s, rl__loop *loop, int echo, int record) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->echo = echo;
    s->record = record;
    ASSERT_OK(rl__listen(loop, "127.0.0.1", 0, lt_on_accept, s, &s->listener, NULL));
    s->port = rl__listener_port(s->listener);
    ASSERT_TRUE(s->port != 0);
}

/* The newest accepted peer after at least n accepts (waits). */
static inline lt_peer *lt_server_peer(lt_server *s, long n) {
    ASSERT_TRUE(lt_wait_count(&s->accepted, n, LT_WAIT_MS));
    pthread_mutex_lock(&s->mu);
    lt_peer *p = s->peers;
    pthread_mutex_unlock(&s->mu);
    return p;
}

/* Free the server's peers (after the loop was freed or they all closed). */
static inline void lt_server_free_peers(lt_server *s) {
    for (lt_peer *p = s->peers, *next; p; p = next) {
        next = p->next;
        lt_peer_free(p);
    }
    s->peers = NULL;
    pthread_mutex_destroy(&s->mu);
}

/* ---- a client connection made through rl__connect ---- */

typedef struct {
    lt_peer *peer; /* set up before connecting */
    atomic_int done;
    atomic_int err;
} lt_connect_ctx;

static void lt_on_connect(rl__conn *conn, int err, void *ud) {
    lt_connect_ctx *c = ud;
    if (err == RL_OK) {
        c->peer->conn = conn;
        LT_BG_CHECK(rl__conn_set_callbacks(conn, lt_on_frame, lt_on_close, c->peer) == RL_OK);
    }
    atomic_store(&c->err, err);
    atomic_store(&c->done, 1);
}

/* Connect to 127.0.0.1:port; returns the client's peer (conn set), fails the test otherwise. */
static inline lt_peer *lt_connect(rl__loop *loop, uint16_t port, int echo, int record) {
    lt_connect_ctx c;
    memset(&c, 0, sizeof c);
    c.peer = lt_peer_new(echo, record);
    ASSERT_OK(rl__connect(loop, "127.0.0.1", port, 5000, lt_on_connect, &c, NULL));
    ASSERT_TRUE(lt_wait_flag(&c.done, LT_WAIT_MS));
    ASSERT_OK(atomic_load(&c.err));
    return c.peer;
}

/* Connect and return only the error code (the callback's). */
static inline int lt_connect_err(rl__loop *loop, const char *ip, uint16_t port, int timeout_ms) {
    lt_connect_ctx c;
    memset(&c, 0, sizeof c);
    c.peer = lt_peer_new(0, 0);
    int rc = rl__connect(loop, ip, port, timeout_ms, lt_on_connect, &c, NULL);
    if (rc == RL_OK) {
        ASSERT_TRUE(lt_wait_flag(&c.done, timeout_ms + LT_WAIT_MS));
        rc = atomic_load(&c.err);
        if (rc == RL_OK) {
            rl__conn_close(c.peer->conn, 0);
            ASSERT_TRUE(lt_wait_flag(&c.peer->closed, LT_WAIT_MS));
        }
    }
    lt_peer_free(c.peer);
    return rc;
}

/* ---- raw blocking sockets (for peers that misbehave) ---- */

static inline int lt_raw_connect(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(fd >= 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct timeval tv = {10, 0}; /* every blocking read has a timeout */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return fd;
}

static inline void lt_raw_write(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        ASSERT_TRUE(k > 0);
        b += k;
        n -= (size_t)k;
    }
}

/* Read exactly n bytes; returns 1, or 0 on EOF/error/timeout. */
static inline int lt_raw_read(int fd, void *p, size_t n) {
    uint8_t *b = p;
    while (n) {
        ssize_t k = recv(fd, b, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return 0;
        b += k;
        n -= (size_t)k;
    }
    return 1;
}

/* Write a frame header (raw fields) to fd. */
static inline void lt_raw_header(int fd, uint32_t len, uint16_t type, uint16_t flags, uint64_t id) {
    rl__frame_header h = {len, type, flags, id};
    uint8_t b[RL_FRAME_HEADER_LEN];
    rl__frame_header_encode(&h, b);
    lt_raw_write(fd, b, sizeof b);
}

/* 1 if the peer closed fd (recv returns 0 or an error) within the socket timeout. */
static inline int lt_raw_sees_eof(int fd) {
    uint8_t b[4096];
    for (;;) {
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (k <= 0) return 1;
    }
}

/* Percentile of a sorted array of n values. */
static inline uint64_t lt_pct(const uint64_t *sorted, size_t n, double q) {
    if (!n) return 0;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return sorted[i < n ? i : n - 1];
}

static int lt_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline void lt_sort(uint64_t *v, size_t n) { qsort(v, n, sizeof *v, lt_cmp_u64); }

#endif
