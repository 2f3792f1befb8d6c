/* conn.c — connections and listeners of the loop: accept, connect, frame reading, the thread-safe
 * send path, injected delay, and closing (loop.h gives the contract).
 *
 * CONNECTION STATES (conn->state, changed under send_lock, read atomically):
 *
 *   rl__connect ──► CONNECTING ──established──► OPEN ◄── accepted (listener_on_event)
 *                      │                         │  │
 *                      │ refused / timeout /     │  └─ rl__conn_close(RL_CONN_CLOSE_FLUSH) ──► FLUSHING
 *                      │ loop freed              │     with frames queued                       │
 *                      ▼                         │                              queue drained,  │
 *                   CLOSED ◄─ on_connect(NULL)   │ rl__conn_close, EOF, socket  flush timeout,  │
 *                                                │ error, malformed frame,      error           │
 *                                                ▼ loop freed                                   ▼
 *                                             CLOSING ◄─────────────────────────────────────────┘
 *                                                │ do_close (loop thread, at a safe point)
 *                                                ▼
 *                                             CLOSED ─► on_close(conn, err) once; loop's ref dropped
 *
 *   transition                       function
 *   (none) → CONNECTING              rl__connect, then connect_register on the loop
 *   CONNECTING → OPEN                connected
 *   CONNECTING → CLOSED              fail_connect (refused: on_connect_event; timeout: connect_timeout;
 *                                    loop freed: rl__net_close_all / connect_register)
 *   OPEN → FLUSHING / CLOSING        rl__conn_close, request_close_locked (errors, EOF)
 *   FLUSHING → CLOSING               flush (drained), flush_timeout, request_close_locked
 *   CLOSING → CLOSED                 do_close, from handle_close_request at a safe point
 *
 * THE HANDSHAKE (conn->hs, loop context; only on a loop with credentials, loop.h). The connection
 * is OPEN at the socket level while it runs, but its owner does not know it yet: on_accept /
 * on_connect are called when it completes, and a failure before that never reaches on_close (a
 * connect's failure reaches on_connect(NULL, err) instead, from do_close).
 *
 *   accepted:  HS_ACCEPT ──AUTH request, proof good: AUTH reply, on_accept──▶ HS_DONE
 *              (the AUTH_CHALLENGE went out at accept; a bad proof: error reply, flush, close)
 *   connected: HS_CHALLENGE ──AUTH_CHALLENGE: send AUTH──▶ HS_REPLY ──AUTH reply, server's proof
 *              good: on_connect(conn, RL_OK)──▶ HS_DONE (an error reply or a bad proof: close)
 *
 *   transition                       function
 *   accept → HS_ACCEPT               start_accept_handshake (from rl__listener_on_event)
 *   HS_ACCEPT → HS_DONE              hs_accept_frame → finish_accept
 *   connected → HS_CHALLENGE         connected
 *   HS_CHALLENGE → HS_REPLY          hs_challenge_frame
 *   HS_REPLY → HS_DONE               hs_reply_frame → finish_connect
 *   any HS_* → closed                close_error (bad frame, bad proof), hs_timeout / connect_timeout,
 *                                    eviction (start_accept_handshake), the listener closing
 *
 * INVARIANTS.
 *   1. Everything under "send side" in struct rl__conn is read and written only under send_lock;
 *      state changes only under send_lock. A thread that finds state == OPEN under the lock may use
 *      fd and loop until it unlocks: do_close sets CLOSED under the lock before it closes the fd.
 *   2. Frames leave in queue order; the queue's head is the only frame that may be partly written.
 *      The direct write (by the sending thread) happens only when the queue is empty and no delay is
 *      set, so it can never overtake a queued frame.
 *   3. Whenever the queue is non-empty, the loop has a pending reason to flush it: EPOLLOUT armed
 *      (socket full), a release timer for the head (delay), or a queued wake post.
 *   4. Delayed frames have non-decreasing release times (release = max(call time + delay + jitter,
 *      previous release)).
 *   5. The loop holds one reference from registration until the pass in which do_close (or
 *      fail_connect) ran has ended; queued posts and pending-close entries hold one each. So every
 *      pointer the loop, a post or an epoll event holds is valid.
 *   6. on_frame is called only in state OPEN, on the loop thread, and never after on_close; payloads
 *      point into the receive buffer, which is not moved or freed until the callback has returned.
 *   7. Receive memory follows the bytes that arrived (reader.h invariant 2).
 *   8. Until the handshake is done (hs != HS_DONE) the reader refuses frames over
 *      RL_NET_HANDSHAKE_MAX_PAYLOAD and no owner callback runs; the only frames sent are the
 *      runtime's own (challenge, AUTH, error reply). A handshaking accepted connection is on its
 *      listener's hs list, which the listener empties (closing them) before it goes away.
 *   9. An accepted connection is read only while its send queue holds at most max_queued bytes
 *      (rx_paused otherwise, EPOLLIN off): a peer that stops reading cannot make the server
 *      queue without bound. Connects are never paused (two paused ends could wait on each other).
 */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/sync.h"
#include "net/auth.h"
#include "net/loop_int.h"
#include "net/proto.h"
#include "net/reader.h"
#include "reclayer/error.h"

#define RD_BUDGET (4u << 20)       /* bytes read from one connection per readiness event */
#define ACCEPT_BATCH 64            /* connections accepted per readiness event */
#define ACCEPT_PAUSE_NS 100000000u /* listener pause after fd exhaustion (100 ms) */
#define MAX_IOV 256                /* iovecs per sendmsg: a burst of small frames goes in few calls */
#define MAX_DELAY_US 10000000u
#define IN_EVENTS (EPOLLIN | EPOLLRDHUP)

enum { ST_CONNECTING, ST_OPEN, ST_FLUSHING, ST_CLOSING, ST_CLOSED };
enum { HS_DONE = 0, HS_ACCEPT, HS_CHALLENGE, HS_REPLY };

/* A frame in the send queue: one allocation holding the header and (unless owns_payload) the
 * payload copy — then header and payload lie together in data[], so the frame is one iovec of
 * a batched write. */
typedef struct out_frame {
    struct out_frame *next;
    uint64_t release_ns; /* write no earlier than this monotonic time (0: as soon as possible) */
    size_t len;          /* header + payload bytes */
    size_t off;          /* bytes already written (only the queue head may have off > 0) */
    uint8_t *payload;    /* the payload: data[] + header or a buffer taken from rl__conn_send_buf */
    int owns_payload;    /* 1: payload is a separate allocation, freed with the frame */
    int is_delayed;      /* 1: sent under a delay; lateness recorded when its first byte goes */
    int spare;           /* 1: data[] holds a header and SPARE_CAP payload bytes: reusable
                            through c->spares */
    uint8_t hdr[RL_FRAME_HEADER_LEN];
    uint8_t data[];
} out_frame;

/* Small frames (requests, short replies) are recycled per connection instead of going back to
 * malloc: a burst of queued requests then costs no allocation per frame, and the frame freed by
 * the loop thread is not a cross-thread free. A connection keeps at most SPARE_MAX of them
 * (about 190 KB) once a burst of that many frames was queued on it at once: enough for a burst of
 * 1,000 reads (at 512, half of such a burst went to malloc on the calling thread and back to free
 * on the loop thread, ~540 instructions a frame). */
#define SPARE_CAP 96
#define SPARE_MAX 1024

struct rl__conn {
    rl__io io;      /* RL__IO_CONN; first member (epoll data.ptr) */
    rl__loop *loop; /* valid while state != CLOSED */
    atomic_int refs;
    atomic_int state; /* ST_* */
    int fd;
    char peer[32]; /* "127.0.0.1:PORT" of the remote end (the target while connecting) */
    char local[32];

    /* Loop context. */
    rl_frame_fn on_frame;
    rl_close_fn on_close;
    void *ud;
    rl_connect_fn on_connect; /* while CONNECTING */
    void *connect_ud;
    int connect_state; /* rl__net_connect_socket's result: 0 done, 1 in progress, or an error */
    int timeout_ms;
    uint64_t connect_timer; /* timer ids, 0 when none */
    uint64_t flush_timer;
    uint64_t release_timer; /* releases the queue head (delay) */
    uint64_t release_timer_at;
    int in_epoll, in_list;
    /* The handshake and the limits (loop context). */
    int hs;                            /* HS_*: HS_DONE once through it, or on a loop without it */
    int auth_class;                    /* rl__auth_class established (rl__conn_auth_class) */
    uint8_t snonce[RL_AUTH_NONCE_LEN]; /* the challenge's nonce */
    uint8_t cnonce[RL_AUTH_NONCE_LEN]; /* the AUTH request's nonce */
    uint64_t hs_timer;                 /* accepted: the handshake timeout */
    rl__listener *hs_listener;         /* accepted and handshaking: its listener (invariant 8) */
    rl__conn *hs_prev, *hs_next;       /* the listener's hs list, oldest first */
    int is_accepted;                   /* counted in loop->n_accepted */
    uint64_t max_queued;               /* accepted: the read pause threshold (invariant 9); 0: none */
    int rx_paused;                     /* reading stopped until the queue drains (invariant 9) */
    int rx_resume_posted;              /* resume_node is queued */
    rl__post_node resume_node;         /* delivers what the reader holds after a pause */
    int close_done;                    /* do_close / fail_connect ran */
    int close_queued;                  /* on loop->pending_close */
    rl__conn *lprev, *lnext;           /* loop->conns */
    rl__conn *close_next;              /* loop->pending_close */
    rl__conn *zombie_next;             /* loop->zombies */
    rl__frame_reader rd;
    rl__post_node reg_node;   /* connect registration */
    rl__post_node wake_node;  /* flush request from another thread (guarded by wake_pending) */
    rl__post_node close_node; /* close request from another thread (guarded by close_posted) */

    /* Send side: under send_lock. */
    pthread_mutex_t send_lock;
    out_frame *q_head, *q_tail;
    out_frame *spares; /* written frames kept for reuse (next-linked), at most SPARE_MAX */
    int n_spares;
    uint64_t queued_frames, queued_bytes, queued_bytes_max;
    int epollout_armed;
    int writing; /* 1 while the loop writes the queue without the lock: the
                                 counters do not include that write yet (settled_lock) */
    int wake_pending;
    int close_posted;
    uint32_t delay_us, jitter_us;
    uint64_t rng;             /* jitter PRNG state (splitmix64) */
    uint64_t last_release_ns; /* release time of the last delayed frame */
    uint64_t frames_sent, bytes_sent, frames_direct, delayed_frames;
    rl__lat_hist late; /* lateness of delayed frames */
    int close_err;     /* set when leaving OPEN */
    int close_quiet;   /* 1: log the close at info (local close, clean EOF) */
    char close_reason[160];

    /* Receive counters: written by the loop thread, read by anyone. */
    atomic_uint_fast64_t frames_received, bytes_received, rx_cap;
    atomic_uint_fast64_t queued_mirror; /* queued_bytes, for the read pause check without the lock */
};

struct rl__listener {
    rl__io io; /* RL__IO_LISTENER; first member */
    rl__loop *loop;
    int fd;
    uint16_t port;
    char addr[32];
    rl_accept_fn on_accept;
    void *ud;
    int in_epoll, in_list, closed, paused;
    uint64_t pause_timer;
    rl__listener *lprev, *lnext; /* loop->listeners */
    rl__listener *dead_next;     /* loop->dead_listeners */
    rl__post_node reg_node, close_node;
    rl__conn *hs_head, *hs_tail; /* accepted connections in the handshake, oldest first */
    uint32_t n_hs;               /* their number */
};

static void flush(rl__conn *c);
static void hs_unlink(rl__conn *c);
static void start_accept_handshake(rl__listener *l, rl__conn *c);
static void resume_reading_locked(rl__conn *c);
static void close_error(rl__conn *c, int err, int quiet, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ============================================================================================
 * Objects and references
 * ========================================================================================== */

/* A fresh connection object in CONNECTING with the loop's reference; NULL when out of memory. */
static rl__conn *conn_new(rl__loop *loop) {
    rl__conn *c = rl__calloc(1, sizeof *c);
    if (!c) return NULL;
    rl__mutex_init_adaptive(&c->send_lock);
    c->io.kind = RL__IO_CONN;
    c->loop = loop;
    c->fd = -1;
    atomic_init(&c->refs, 1); /* the loop's */
    atomic_init(&c->state, ST_CONNECTING);
    rl__frame_reader_init(&c->rd);
    return c;
}

/* Free a queued frame and the payload it owns. */
static void free_frame(out_frame *f) {
    if (f->owns_payload) rl__free(f->payload);
    rl__free(f);
}

/* A written frame: kept for reuse when it is a small one and there is room, else freed. Send
 * lock held. */
static void retire_frame_locked(rl__conn *c, out_frame *f) {
    if (f->spare && c->n_spares < SPARE_MAX) {
        f->next = c->spares;
        c->spares = f;
        c->n_spares++;
        return;
    }
    free_frame(f);
}

/* Free everything of c (the last reference is gone; any thread). */
static void conn_free(rl__conn *c) {
    for (out_frame *f = c->q_head, *next; f; f = next) {
        next = f->next;
        free_frame(f);
    }
    for (out_frame *f = c->spares, *next; f; f = next) {
        next = f->next;
        free_frame(f);
    }
    rl__frame_reader_release(&c->rd);
    if (c->fd >= 0) close(c->fd);
    pthread_mutex_destroy(&c->send_lock);
    rl__free(c);
}

void rl__conn_retain(rl__conn *c) { atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); }

void rl__conn_release(rl__conn *c) {
    if (!c) return;
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) conn_free(c);
}

static int state_of(const rl__conn *c) { return atomic_load_explicit(&((rl__conn *)c)->state, memory_order_acquire); }
static void set_state(rl__conn *c, int s) { atomic_store_explicit(&c->state, s, memory_order_release); }

const char *rl__conn_peer(const rl__conn *c) { return c->peer; }
const char *rl__conn_local(const rl__conn *c) { return c->local; }
uint8_t *rl__conn_take_payload(rl__conn *c) { return rl__frame_reader_take(&c->rd); }
int rl__conn_is_open(const rl__conn *c) { return c && state_of(c) == ST_OPEN; }
int rl__conn_auth_class(const rl__conn *c) { return c ? c->auth_class : RL_AUTH_NONE; }
const char *rl__conn_close_reason(const rl__conn *c) { return c->close_reason; }

/* Link c into loop->conns / unlink it (loop context). */
static void list_add(rl__conn *c) {
    rl__loop *loop = c->loop;
    c->lprev = NULL;
    c->lnext = loop->conns;
    if (loop->conns) loop->conns->lprev = c;
    loop->conns = c;
    c->in_list = 1;
}

static void list_remove(rl__conn *c) {
    if (!c->in_list) return;
    if (c->lprev) c->lprev->lnext = c->lnext;
    else c->loop->conns = c->lnext;
    if (c->lnext) c->lnext->lprev = c->lprev;
    c->lprev = c->lnext = NULL;
    c->in_list = 0;
}

/* The loop drops its reference at the end of this pass (invariant 5). */
static void make_zombie(rl__conn *c) {
    c->zombie_next = c->loop->zombies;
    c->loop->zombies = c;
}

/* ============================================================================================
 * Closing
 * ========================================================================================== */

static void close_post_fn(rl__loop *loop, void *ud);

/* Have the loop run handle_close_request for c at its next safe point. Send lock held. */
static void schedule_close_locked(rl__conn *c) {
    rl__loop *loop = c->loop;
    if (rl__tls_loop == loop) {
        if (c->close_queued) return;
        c->close_queued = 1;
        rl__conn_retain(c);
        c->close_next = loop->pending_close;
        loop->pending_close = c;
    } else {
        if (c->close_posted) return;
        c->close_posted = 1;
        rl__conn_retain(c);
        c->close_node.fn = close_post_fn;
        c->close_node.ud = c;
        c->close_node.is_heap = 0;
        rl__loop_post_node(loop, &c->close_node);
    }
}

/* Move c to CLOSING (or FLUSHING when to == ST_FLUSHING and it is OPEN) with err and a reason, and
 * schedule the close. The first reason that leaves OPEN is kept, except that an error during a
 * flush replaces the flush's own. Send lock held. Returns 1 if the state changed. */
static int request_close_locked(rl__conn *c, int to, int err, int quiet, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int request_close_locked(rl__conn *c, int to, int err, int quiet, const char *fmt, ...) {
    int st = state_of(c);
    if (st != ST_OPEN && st != ST_FLUSHING) return 0;
    if (st == ST_FLUSHING && to == ST_FLUSHING) return 0;
    if (st == ST_OPEN || err != RL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->close_reason, sizeof c->close_reason, fmt, ap);
        va_end(ap);
        c->close_err = err;
        c->close_quiet = quiet;
    }
    set_state(c, to);
    schedule_close_locked(c);
    return 1;
}

/* The end of a connection (loop thread, at a safe point): CLOSED, queue dropped, fd closed, one
 * log line, on_close once, then the loop's reference goes at pass end. */
static void do_close(rl__conn *c) {
    if (c->close_done) return;
    c->close_done = 1;
    rl__loop *loop = c->loop;
    pthread_mutex_lock(&c->send_lock);
    if (c->close_reason[0] == 0) snprintf(c->close_reason, sizeof c->close_reason, "closed");
    set_state(c, ST_CLOSED);
    for (out_frame *f = c->q_head, *next; f; f = next) {
        next = f->next;
        free_frame(f);
    }
    c->q_head = c->q_tail = NULL;
    c->queued_frames = c->queued_bytes = 0;
    atomic_store_explicit(&c->queued_mirror, 0, memory_order_relaxed);
    int fd = c->fd, err = c->close_err, quiet = c->close_quiet;
    c->fd = -1;
    pthread_mutex_unlock(&c->send_lock);
    if (c->release_timer) rl__loop_timer_cancel(loop, c->release_timer);
    if (c->flush_timer) rl__loop_timer_cancel(loop, c->flush_timer);
    if (c->connect_timer) rl__loop_timer_cancel(loop, c->connect_timer);
    if (c->hs_timer) rl__loop_timer_cancel(loop, c->hs_timer);
    c->release_timer = c->flush_timer = c->connect_timer = c->hs_timer = 0;
    hs_unlink(c);
    if (c->is_accepted) {
        c->is_accepted = 0;
        loop->n_accepted--;
        atomic_store_explicit(&loop->st_accepted_now, loop->n_accepted, memory_order_relaxed);
    }
    if (c->in_epoll) (void)rl__loop_ctl(loop, EPOLL_CTL_DEL, fd, 0, &c->io);
    c->in_epoll = 0;
    list_remove(c);
    if (fd >= 0) close(fd);
    rl__frame_reader_release(&c->rd);
    atomic_store_explicit(&c->rx_cap, 0, memory_order_relaxed);
    rl__log(quiet ? RL_LOG_INFO : RL_LOG_WARN, "net: connection %s (local %s) closed: %s (%s)", c->peer, c->local,
            c->close_reason, rl_error_name(err));
    rl_close_fn cb = c->on_close;
    void *ud = c->ud;
    c->on_frame = NULL;
    c->on_close = NULL;
    rl_connect_fn ccb = c->on_connect; /* a connect that ended in its handshake: its owner never had it */
    c->on_connect = NULL;
    if (ccb) {
        make_zombie(c);
        ccb(NULL, err != RL_OK ? err : RL_E_CONNECTION_FAILED, c->connect_ud);
        return;
    }
    if (cb) cb(c, err, ud);
    make_zombie(c);
}

/* RL_CONN_CLOSE_FLUSH did not drain in time: close anyway with RL_E_TIMED_OUT (timer callback). */
static void flush_timeout_fn(rl__loop *loop, void *ud) {
    (void)loop;
    rl__conn *c = ud;
    c->flush_timer = 0;
    pthread_mutex_lock(&c->send_lock);
    if (state_of(c) == ST_FLUSHING)
        request_close_locked(c, ST_CLOSING, RL_E_TIMED_OUT, 0, "queued frames not flushed within %d ms",
                             RL_CONN_FLUSH_TIMEOUT_MS);
    pthread_mutex_unlock(&c->send_lock);
}

/* Act on a requested close (loop thread, safe point). */
static void handle_close_request(rl__conn *c) {
    if (c->close_done) return;
    int st = state_of(c);
    if (st == ST_CLOSING) {
        do_close(c);
        return;
    }
    if (st != ST_FLUSHING) return;
    pthread_mutex_lock(&c->send_lock);
    int empty = c->q_head == NULL;
    if (empty) set_state(c, ST_CLOSING);
    pthread_mutex_unlock(&c->send_lock);
    if (empty) {
        do_close(c);
        return;
    }
    if (!c->flush_timer) {
        uint64_t at = rl__clock_mono_ns() + (uint64_t)RL_CONN_FLUSH_TIMEOUT_MS * 1000000u;
        if (rl__loop_timer_add(c->loop, at, flush_timeout_fn, c, &c->flush_timer) != RL_OK) {
            pthread_mutex_lock(&c->send_lock);
            request_close_locked(c, ST_CLOSING, RL_E_OUT_OF_MEMORY, 0, "out of memory for the flush timer");
            pthread_mutex_unlock(&c->send_lock);
            return;
        }
    }
    flush(c);
}

/* A close requested from another thread (posted; holds a reference). */
static void close_post_fn(rl__loop *loop, void *ud) {
    (void)loop;
    rl__conn *c = ud;
    pthread_mutex_lock(&c->send_lock);
    c->close_posted = 0;
    pthread_mutex_unlock(&c->send_lock);
    handle_close_request(c);
    rl__conn_release(c);
}

void rl__net_process_pending(rl__loop *loop) {
    while (loop->pending_close) {
        rl__conn *c = loop->pending_close;
        loop->pending_close = c->close_next;
        c->close_next = NULL;
        c->close_queued = 0;
        handle_close_request(c);
        rl__conn_release(c);
    }
}

void rl__net_release_zombies(rl__loop *loop) {
    while (loop->zombies) {
        rl__conn *c = loop->zombies;
        loop->zombies = c->zombie_next;
        rl__conn_release(c);
    }
    while (loop->dead_listeners) {
        rl__listener *l = loop->dead_listeners;
        loop->dead_listeners = l->dead_next;
        rl__free(l);
    }
}

void rl__conn_close(rl__conn *c, unsigned flags) {
    if (!c) return;
    pthread_mutex_lock(&c->send_lock);
    int st = state_of(c);
    if (st == ST_OPEN && (flags & RL_CONN_CLOSE_FLUSH) && c->q_head)
        request_close_locked(c, ST_FLUSHING, RL_OK, 1, "closed locally (after flushing)");
    else if (st == ST_OPEN || (st == ST_FLUSHING && !(flags & RL_CONN_CLOSE_FLUSH)))
        request_close_locked(c, ST_CLOSING, RL_OK, 1, "closed locally");
    pthread_mutex_unlock(&c->send_lock);
}

/* ============================================================================================
 * Connecting
 * ========================================================================================== */

/* A connect that ends without a connection (loop thread). on_connect(NULL, err) once. */
static void fail_connect(rl__conn *c, int err, const char *why) {
    if (c->close_done) return;
    c->close_done = 1;
    pthread_mutex_lock(&c->send_lock);
    set_state(c, ST_CLOSED);
    snprintf(c->close_reason, sizeof c->close_reason, "connect failed: %s", why);
    c->close_err = err;
    int fd = c->fd;
    c->fd = -1;
    pthread_mutex_unlock(&c->send_lock);
    if (c->connect_timer) rl__loop_timer_cancel(c->loop, c->connect_timer);
    c->connect_timer = 0;
    if (c->in_epoll) (void)rl__loop_ctl(c->loop, EPOLL_CTL_DEL, fd, 0, &c->io);
    c->in_epoll = 0;
    list_remove(c);
    if (fd >= 0) close(fd);
    rl__log(RL_LOG_INFO, "net: connect to %s failed: %s (%s)", c->peer, why, rl_error_name(err));
    rl_connect_fn cb = c->on_connect;
    c->on_connect = NULL;
    make_zombie(c);
    if (cb) cb(NULL, err, c->connect_ud);
}

/* The connection is established (loop thread): OPEN, reading, then on_connect with the owner's
 * reference — or, on a loop with credentials, the handshake first (HS_CHALLENGE: the connect
 * timer keeps running until it is done). */
static void connected(rl__conn *c) {
    int handshake = c->loop->has_auth;
    if (c->connect_timer && !handshake) {
        rl__loop_timer_cancel(c->loop, c->connect_timer);
        c->connect_timer = 0;
    }
    char peer[32];
    rl__net_sock_names(c->fd, c->local, peer, sizeof peer);
    if (peer[0]) memcpy(c->peer, peer, sizeof peer);
    int e = rl__loop_ctl(c->loop, c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, IN_EVENTS, &c->io);
    if (e) {
        fail_connect(c, RL_E_CONNECTION_FAILED, strerror(e));
        return;
    }
    c->in_epoll = 1;
    if (!c->in_list) list_add(c);
    pthread_mutex_lock(&c->send_lock);
    set_state(c, ST_OPEN);
    pthread_mutex_unlock(&c->send_lock);
    rl__log(RL_LOG_DEBUG, "net: connected %s -> %s", c->local, c->peer);
    if (handshake) {
        c->hs = HS_CHALLENGE; /* the server speaks first */
        rl__frame_reader_set_max(&c->rd, RL_NET_HANDSHAKE_MAX_PAYLOAD);
        return;
    }
    rl__conn_retain(c); /* the owner's */
    rl_connect_fn cb = c->on_connect;
    c->on_connect = NULL;
    cb(c, RL_OK, c->connect_ud);
}

/* The connect timeout fired (timer callback). */
static void connect_timeout(rl__loop *loop, void *ud) {
    (void)loop;
    rl__conn *c = ud;
    c->connect_timer = 0;
    if (state_of(c) == ST_CONNECTING) {
        char why[64];
        snprintf(why, sizeof why, "not established within %d ms", c->timeout_ms);
        fail_connect(c, RL_E_TIMED_OUT, why);
    } else if (c->hs != HS_DONE) {
        close_error(c, RL_E_TIMED_OUT, 0, "handshake not completed within %d ms (%s)", c->timeout_ms,
                    c->hs == HS_CHALLENGE ? "no AUTH_CHALLENGE from the server" : "no AUTH reply from the server");
    }
}

/* The connecting socket became writable or failed: finish the connect either way (loop thread). */
static void on_connect_event(rl__conn *c, uint32_t events) {
    (void)events;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) soerr = errno;
    if (soerr == 0) {
        connected(c);
        return;
    }
    int err = rl__net_map_errno(soerr, RL_E_CONNECTION_FAILED);
    if (err == RL_E_TIMED_OUT || err == RL_E_OUT_OF_MEMORY) err = RL_E_CONNECTION_FAILED;
    fail_connect(c, err, strerror(soerr));
}

/* The posted second half of rl__connect (loop thread). Holds the loop's reference. */
static void connect_register(rl__loop *loop, void *ud) {
    rl__conn *c = ud;
    if (atomic_load(&loop->closing)) {
        fail_connect(c, RL_E_OPERATION_CANCELLED, "the loop was freed");
        return;
    }
    list_add(c);
    if (c->connect_state == 0) {
        connected(c);
        return;
    }
    if (c->connect_state != 1) {
        fail_connect(c, c->connect_state, "refused at once");
        return;
    }
    int e = rl__loop_ctl(loop, EPOLL_CTL_ADD, c->fd, EPOLLOUT, &c->io);
    if (e) {
        fail_connect(c, RL_E_CONNECTION_FAILED, strerror(e));
        return;
    }
    c->in_epoll = 1;
    uint64_t at = rl__clock_mono_ns() + (uint64_t)c->timeout_ms * 1000000u;
    if (rl__loop_timer_add(loop, at, connect_timeout, c, &c->connect_timer) != RL_OK)
        fail_connect(c, RL_E_OUT_OF_MEMORY, "out of memory for the connect timer");
}

int rl__connect(rl__loop *loop, const char *ip, uint16_t port, int timeout_ms, rl_connect_fn on_connect, void *ud,
                rl__errdetail *d) {
    if (!loop || !on_connect || timeout_ms <= 0) {
        rl__errdetail_set(d, "rl__connect: needs a loop, a callback and a timeout > 0 (got %d ms)", timeout_ms);
        return RL_E_INVALID_ARGUMENT;
    }
    struct sockaddr_in sa;
    int rc = rl__net_loopback_addr(ip, port, &sa, d);
    if (rc) return rc;
    if (port == 0) {
        rl__errdetail_set(d, "rl__connect: port 0");
        return RL_E_INVALID_ARGUMENT;
    }
    rl__conn *c = conn_new(loop);
    if (!c) return RL_E_OUT_OF_MEMORY;
    rl__net_format_addr(&sa, c->peer, sizeof c->peer);
    rc = rl__net_connect_socket(&sa, &c->fd, &c->connect_state, d);
    if (rc) {
        conn_free(c);
        return rc;
    }
    c->on_connect = on_connect;
    c->connect_ud = ud;
    c->timeout_ms = timeout_ms;
    c->reg_node.fn = connect_register;
    c->reg_node.ud = c;
    c->reg_node.is_heap = 0;
    rl__loop_post_node(loop, &c->reg_node); /* always posted: on_connect never runs in this call */
    return RL_OK;
}

/* ============================================================================================
 * Listening
 * ========================================================================================== */

/* Unlink l from loop->listeners (loop context). */
static void listener_unlink(rl__listener *l) {
    if (!l->in_list) return;
    if (l->lprev) l->lprev->lnext = l->lnext;
    else l->loop->listeners = l->lnext;
    if (l->lnext) l->lnext->lprev = l->lprev;
    l->in_list = 0;
}

/* Close a listener (loop context): it is freed at the end of the pass. */
static void do_listener_close(rl__listener *l) {
    if (l->closed) return;
    l->closed = 1;
    while (l->hs_head) { /* invariant 8: nothing may point at l once it is freed */
        rl__conn *c = l->hs_head;
        hs_unlink(c);
        close_error(c, RL_E_OPERATION_CANCELLED, 1, "the listener closed during the handshake");
    }
    if (l->pause_timer) rl__loop_timer_cancel(l->loop, l->pause_timer);
    l->pause_timer = 0;
    if (l->in_epoll) (void)rl__loop_ctl(l->loop, EPOLL_CTL_DEL, l->fd, 0, &l->io);
    l->in_epoll = 0;
    close(l->fd);
    l->fd = -1;
    int was_registered = l->in_list;
    listener_unlink(l);
    rl__log(RL_LOG_INFO, "net: stopped listening on %s", l->addr);
    if (was_registered) { /* else the pending registration post frees it */
        l->dead_next = l->loop->dead_listeners;
        l->loop->dead_listeners = l;
    }
}

/* Start watching a listener (loop context; posted by rl__listen from other threads). A listener
 * closed before this ran is freed here; one registered while the loop is being freed is closed. */
static void listener_register(rl__loop *loop, void *ud) {
    rl__listener *l = ud;
    if (l->closed) { /* closed before it was registered */
        rl__free(l);
        return;
    }
    int e = rl__loop_ctl(loop, EPOLL_CTL_ADD, l->fd, EPOLLIN, &l->io);
    if (e) rl__log(RL_LOG_ERROR, "net: cannot watch listener %s: %s", l->addr, strerror(e));
    l->in_epoll = e == 0;
    l->lprev = NULL;
    l->lnext = loop->listeners;
    if (loop->listeners) loop->listeners->lprev = l;
    loop->listeners = l;
    l->in_list = 1;
    if (atomic_load(&loop->closing)) do_listener_close(l);
}

/* A close posted from another thread. Its registration, posted earlier, has run (posts are FIFO). */
static void listener_close_fn(rl__loop *loop, void *ud) {
    (void)loop;
    do_listener_close(ud);
}

int rl__listen(rl__loop *loop, const char *ip, uint16_t port, rl_accept_fn on_accept, void *ud, rl__listener **out,
               rl__errdetail *d) {
    if (!loop || !on_accept || !out) {
        rl__errdetail_set(d, "rl__listen: needs a loop, a callback and an out pointer");
        return RL_E_INVALID_ARGUMENT;
    }
    struct sockaddr_in sa;
    int rc = rl__net_loopback_addr(ip, port, &sa, d);
    if (rc) return rc;
    int fd;
    uint16_t bound;
    rc = rl__net_listen_socket(&sa, &fd, &bound, d);
    if (rc) return rc;
    rl__listener *l = rl__calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return RL_E_OUT_OF_MEMORY;
    }
    l->io.kind = RL__IO_LISTENER;
    l->loop = loop;
    l->fd = fd;
    l->port = bound;
    sa.sin_port = htons(bound);
    rl__net_format_addr(&sa, l->addr, sizeof l->addr);
    l->on_accept = on_accept;
    l->ud = ud;
    if (rl__tls_loop == loop) {
        listener_register(loop, l);
    } else {
        l->reg_node.fn = listener_register;
        l->reg_node.ud = l;
        rl__loop_post_node(loop, &l->reg_node);
    }
    rl__log(RL_LOG_INFO, "net: listening on %s", l->addr);
    *out = l;
    return RL_OK;
}

uint16_t rl__listener_port(const rl__listener *l) { return l->port; }

void rl__listener_close(rl__listener *l) {
    if (!l) return;
    if (rl__tls_loop == l->loop) {
        do_listener_close(l);
        return;
    }
    l->close_node.fn = listener_close_fn;
    l->close_node.ud = l;
    l->close_node.is_heap = 0;
    rl__loop_post_node(l->loop, &l->close_node);
}

/* The pause after descriptor exhaustion is over: watch the listener again (timer callback). */
static void listener_resume(rl__loop *loop, void *ud) {
    rl__listener *l = ud;
    l->pause_timer = 0;
    if (l->closed || !l->paused) return;
    l->paused = 0;
    (void)rl__loop_ctl(loop, EPOLL_CTL_MOD, l->fd, EPOLLIN, &l->io);
}

void rl__listener_on_event(rl__listener *l, uint32_t events) {
    (void)events;
    rl__loop *loop = l->loop;
    for (int i = 0; i < ACCEPT_BATCH && !l->closed; i++) {
        int fd, e = 0;
        int rc = rl__net_accept(l->fd, &fd, &e);
        if (rc == RL_E_NOT_FOUND) break;
        if (rc != RL_OK) { /* out of descriptors: stop watching for a while instead of spinning */
            rl__log(RL_LOG_WARN, "net: accept on %s: %s; pausing the listener for 100 ms", l->addr, strerror(e));
            l->paused = 1;
            (void)rl__loop_ctl(loop, EPOLL_CTL_MOD, l->fd, 0, &l->io);
            if (rl__loop_timer_add(loop, rl__clock_mono_ns() + ACCEPT_PAUSE_NS, listener_resume, l, &l->pause_timer) !=
                RL_OK)
                listener_resume(loop, l);
            break;
        }
        if (loop->n_accepted >= loop->limits.max_conns) { /* refused at once: the kernel's queue stays short */
            atomic_fetch_add_explicit(&loop->st_refused, 1, memory_order_relaxed);
            uint64_t now = rl__clock_mono_ns();
            if (now - loop->refuse_logged_ns >= 1000000000ull || !loop->refuse_logged_ns) {
                loop->refuse_logged_ns = now;
                rl__log(RL_LOG_WARN, "net: %s has %u connections open (the limit): refusing new ones", l->addr,
                        loop->n_accepted);
            }
            close(fd);
            continue;
        }
        rl__conn *c = conn_new(loop);
        if (!c) {
            rl__log(RL_LOG_WARN, "net: accept on %s: out of memory; connection dropped", l->addr);
            close(fd);
            continue;
        }
        c->fd = fd;
        rl__net_sock_names(fd, c->local, c->peer, sizeof c->peer);
        int err = rl__loop_ctl(loop, EPOLL_CTL_ADD, fd, IN_EVENTS, &c->io);
        if (err) {
            rl__log(RL_LOG_WARN, "net: accept on %s: cannot watch %s: %s", l->addr, c->peer, strerror(err));
            conn_free(c); /* closes fd */
            continue;
        }
        c->in_epoll = 1;
        list_add(c);
        set_state(c, ST_OPEN);
        c->is_accepted = 1;
        c->max_queued = loop->limits.max_queued_bytes;
        loop->n_accepted++;
        atomic_store_explicit(&loop->st_accepted_now, loop->n_accepted, memory_order_relaxed);
        rl__log(RL_LOG_DEBUG, "net: accepted %s on %s", c->peer, l->addr);
        if (loop->has_auth) {
            start_accept_handshake(l, c);
            continue;
        }
        rl__conn_retain(c); /* the callee's */
        l->on_accept(l, c, l->ud);
    }
}

/* ============================================================================================
 * Reading
 * ========================================================================================== */

int rl__conn_set_callbacks(rl__conn *c, rl_frame_fn on_frame, rl_close_fn on_close, void *ud) {
    if (!c) return RL_E_INVALID_ARGUMENT;
    if (state_of(c) == ST_CLOSED) return RL_OK; /* never called again; the loop may be gone */
    if (!rl__loop_context(c->loop)) return RL_E_CLIENT_INVALID_OPERATION;
    c->on_frame = on_frame;
    c->on_close = on_close;
    c->ud = ud;
    return RL_OK;
}

/* Close from the loop thread because of what the socket or the peer did. */
static void close_error(rl__conn *c, int err, int quiet, const char *fmt, ...) {
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->send_lock);
    request_close_locked(c, ST_CLOSING, err, quiet, "%s", why);
    pthread_mutex_unlock(&c->send_lock);
}

/* Stop reading c: its send queue is over max_queued (invariant 9). Loop thread. */
static void pause_reading(rl__conn *c) {
    pthread_mutex_lock(&c->send_lock);
    int st = state_of(c);
    if (!c->rx_paused && (st == ST_OPEN || st == ST_FLUSHING)) {
        c->rx_paused = 1;
        int e = rl__loop_ctl(c->loop, EPOLL_CTL_MOD, c->fd, c->epollout_armed ? EPOLLOUT : 0, &c->io);
        if (e)
            request_close_locked(c, ST_CLOSING, rl__net_map_errno(e, RL_E_CONNECTION_FAILED), 0,
                                 "cannot pause reading: epoll_ctl: %s", strerror(e));
        atomic_fetch_add_explicit(&c->loop->st_reads_paused, 1, memory_order_relaxed);
        rl__log(RL_LOG_INFO,
                "net: %s: %llu bytes queued for a peer that does not read them; not reading its requests "
                "until they drain",
                c->peer, (unsigned long long)c->queued_bytes);
    }
    pthread_mutex_unlock(&c->send_lock);
}

/* Hand out every complete frame: to the handshake while it runs, then to on_frame. Returns 1 when
 * the connection stops reading (closing, failed, or paused: invariant 9). */
static void hs_frame(rl__conn *c, const rl__frame_header *h, const uint8_t *payload);
static int deliver(rl__conn *c) {
    for (;;) {
        if (c->max_queued && atomic_load_explicit(&c->queued_mirror, memory_order_relaxed) > c->max_queued) {
            pause_reading(c);
            return 1;
        }
        rl__frame_header h;
        const uint8_t *payload;
        int ready;
        if (rl__frame_reader_next(&c->rd, &h, &payload, &ready) != RL_OK) {
            if (c->hs != HS_DONE) atomic_fetch_add_explicit(&c->loop->st_hs_failed, 1, memory_order_relaxed);
            close_error(c, RL_E_MALFORMED_FRAME, 0, "malformed frame%s: %s",
                        c->hs != HS_DONE ? " in the handshake" : "", c->rd.why);
            return 1;
        }
        if (!ready) return 0;
        atomic_fetch_add_explicit(&c->frames_received, 1, memory_order_relaxed);
        int st = state_of(c);
        if (st == ST_FLUSHING) continue; /* closing after a flush: input is dropped */
        if (st != ST_OPEN) return 1;
        if (c->hs != HS_DONE) hs_frame(c, &h, payload);
        else if (c->on_frame) c->on_frame(c, &h, payload, c->ud);
        st = state_of(c);
        if (st != ST_OPEN && st != ST_FLUSHING) return 1;
    }
}

/* Read what the socket has (up to RD_BUDGET per event, for fairness between connections), hand
 * out the frames, and turn EOF or an error into a close (loop thread, state OPEN or FLUSHING). */
static void on_readable(rl__conn *c) {
    if (c->rx_paused) return;
    size_t budget = RD_BUDGET;
    for (;;) {
        uint8_t *p;
        size_t room;
        if (rl__frame_reader_space(&c->rd, &p, &room) != RL_OK) {
            close_error(c, RL_E_OUT_OF_MEMORY, 0, "out of memory for the receive buffer (%zu bytes pending)",
                        rl__frame_reader_pending(&c->rd));
            return;
        }
        atomic_store_explicit(&c->rx_cap, c->rd.cap, memory_order_relaxed);
        ssize_t n = read(c->fd, p, room);
        if (n > 0) {
            rl__frame_reader_commit(&c->rd, (size_t)n);
            atomic_fetch_add_explicit(&c->bytes_received, (uint64_t)n, memory_order_relaxed);
            if (deliver(c)) return;
            if ((size_t)n < room || budget <= (size_t)n) return; /* drained, or fair share used */
            budget -= (size_t)n;
            continue;
        }
        if (n == 0) {
            size_t pending = rl__frame_reader_pending(&c->rd), flen = rl__frame_reader_frame_len(&c->rd);
            if (pending == 0) close_error(c, RL_E_CONNECTION_FAILED, 1, "peer closed the connection");
            else if (flen == 0) /* a truncated frame is a lost connection (what a crash looks like) */
                close_error(c, RL_E_CONNECTION_FAILED, 0,
                            "peer closed in the middle of a frame header (%zu of %d bytes received)", pending,
                            RL_FRAME_HEADER_LEN);
            else
                close_error(c, RL_E_CONNECTION_FAILED, 0,
                            "peer closed in the middle of a frame (%zu of %zu bytes received)", pending, flen);
            return;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        int e = errno;
        close_error(c,
                    rl__net_map_errno(e, RL_E_CONNECTION_FAILED) == RL_E_OUT_OF_MEMORY ? RL_E_OUT_OF_MEMORY
                                                                                       : RL_E_CONNECTION_FAILED,
                    0, "read: %s", strerror(e));
        return;
    }
}

void rl__conn_on_event(rl__conn *c, uint32_t events) {
    if (c->close_done) return; /* closed earlier in this pass (a zombie) */
    int st = state_of(c);
    if (st == ST_CONNECTING) {
        on_connect_event(c, events);
        return;
    }
    if (st != ST_OPEN && st != ST_FLUSHING) return;
    if (events & EPOLLOUT) flush(c);
    st = state_of(c);
    if ((st == ST_OPEN || st == ST_FLUSHING) && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) on_readable(c);
}

/* ============================================================================================
 * Writing
 * ========================================================================================== */

/* splitmix64: the jitter PRNG (deterministic per seed). */
static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Arm or disarm EPOLLOUT to match `want`. If arming fails nothing would ever flush the queue
 * (invariant 3), so the connection is closed instead. Send lock held, state OPEN or FLUSHING. */
static void set_out_interest_locked(rl__conn *c, int want) {
    if (c->epollout_armed == want) return;
    int e = rl__loop_ctl(c->loop, EPOLL_CTL_MOD, c->fd, (c->rx_paused ? 0 : IN_EVENTS) | (want ? EPOLLOUT : 0), &c->io);
    if (e == 0) c->epollout_armed = want;
    else if (want)
        request_close_locked(c, ST_CLOSING, rl__net_map_errno(e, RL_E_CONNECTION_FAILED), 0,
                             "cannot wait for the socket to drain: epoll_ctl: %s", strerror(e));
}

/* Append the unwritten part of f (header rest, payload rest) to iov[*niov..]: at most 2 entries. */
static void iov_of(out_frame *f, struct iovec *iov, int *niov) {
    if (!f->owns_payload) { /* header and payload together in data[] */
        iov[*niov].iov_base = f->data + f->off;
        iov[(*niov)++].iov_len = f->len - f->off;
        return;
    }
    size_t plen = f->len - RL_FRAME_HEADER_LEN;
    if (f->off < RL_FRAME_HEADER_LEN) {
        iov[*niov].iov_base = f->hdr + f->off;
        iov[(*niov)++].iov_len = RL_FRAME_HEADER_LEN - f->off;
        if (plen) {
            iov[*niov].iov_base = f->payload;
            iov[(*niov)++].iov_len = plen;
        }
    } else {
        size_t done = f->off - RL_FRAME_HEADER_LEN;
        iov[*niov].iov_base = f->payload + done;
        iov[(*niov)++].iov_len = plen - done;
    }
}

/* One non-blocking sendmsg without SIGPIPE, retried on EINTR. Returns bytes written or -1/errno. */
static ssize_t send_iov(int fd, struct iovec *iov, int niov) {
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = iov;
    msg.msg_iovlen = (size_t)niov;
    ssize_t n;
    do n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n;
}

/* Write the due frames at the head of the queue (release <= now) in as few sendmsg calls as
 * possible. *out_blocked = 1 when the socket took less than offered. Returns 0, or the errno of a
 * failed write. Send lock held. */
static int write_due_locked(rl__conn *c, int *out_blocked) {
    *out_blocked = 0;
    for (;;) {
        struct iovec iov[MAX_IOV];
        int niov = 0;
        size_t offered = 0;
        uint64_t now = rl__clock_mono_ns();
        for (out_frame *f = c->q_head; f && niov + 2 <= MAX_IOV && f->release_ns <= now; f = f->next) {
            iov_of(f, iov, &niov);
            offered += f->len - f->off;
        }
        if (niov == 0) return 0;
        /* The write itself runs without the lock, so a sender on another thread never waits
         * for it: the frames offered stay at the head of the queue meanwhile, senders queue
         * behind them (no direct write while the queue is non-empty: invariant 2), only the
         * loop thread — this one — takes frames off the head or closes the fd (do_close), and
         * a sender only appends at the tail. */
        c->writing = 1;
        pthread_mutex_unlock(&c->send_lock);
        ssize_t n = send_iov(c->fd, iov, niov);
        int e = n < 0 ? errno : 0;
        pthread_mutex_lock(&c->send_lock);
        c->writing = 0; /* the accounting below is done before the lock goes again */
        if (n < 0) {
            if (e == EAGAIN || e == EWOULDBLOCK) {
                *out_blocked = 1;
                return 0;
            }
            return e;
        }
        size_t left = (size_t)n;
        while (left && c->q_head) {
            out_frame *f = c->q_head;
            if (f->off == 0 && f->is_delayed) {
                rl__lat_hist_add(&c->late, now > f->release_ns ? now - f->release_ns : 0);
                c->delayed_frames++;
            }
            size_t take = f->len - f->off < left ? f->len - f->off : left;
            f->off += take;
            left -= take;
            c->queued_bytes -= take;
            atomic_store_explicit(&c->queued_mirror, c->queued_bytes, memory_order_relaxed);
            if (f->off < f->len) break;
            c->q_head = f->next;
            if (!c->q_head) c->q_tail = NULL;
            c->queued_frames--;
            c->frames_sent++;
            c->bytes_sent += f->len;
            retire_frame_locked(c, f);
        }
        if ((size_t)n < offered) {
            *out_blocked = 1;
            return 0;
        }
        int st = state_of(c); /* a close requested while the lock was dropped: stop writing */
        if (st != ST_OPEN && st != ST_FLUSHING) return 0;
    }
}

/* Deliver what the reader holds and read again after a pause (posted by resume_reading_locked:
 * never inside flush, which may run inside on_frame). */
static void resume_post_fn(rl__loop *loop, void *ud) {
    (void)loop;
    rl__conn *c = ud;
    c->rx_resume_posted = 0;
    int st = state_of(c);
    if (!c->close_done && !c->rx_paused && (st == ST_OPEN || st == ST_FLUSHING) && !deliver(c)) on_readable(c);
    rl__conn_release(c);
}

/* The queue drained below half of max_queued: read again (invariant 9). Send lock held, loop
 * thread. */
static void resume_reading_locked(rl__conn *c) {
    c->rx_paused = 0;
    int e = rl__loop_ctl(c->loop, EPOLL_CTL_MOD, c->fd, IN_EVENTS | (c->epollout_armed ? EPOLLOUT : 0), &c->io);
    if (e) {
        request_close_locked(c, ST_CLOSING, rl__net_map_errno(e, RL_E_CONNECTION_FAILED), 0,
                             "cannot resume reading: epoll_ctl: %s", strerror(e));
        return;
    }
    if (c->rx_resume_posted) return;
    c->rx_resume_posted = 1;
    rl__conn_retain(c);
    c->resume_node.fn = resume_post_fn;
    c->resume_node.ud = c;
    c->resume_node.is_heap = 0;
    rl__loop_post_node(c->loop, &c->resume_node);
}

/* The queue head's release time has come (timer callback). */
static void release_timer_fn(rl__loop *loop, void *ud) {
    (void)loop;
    rl__conn *c = ud;
    c->release_timer = 0;
    flush(c);
}

/* Flush the queue (loop thread): write what is due, then arm EPOLLOUT (socket full) or a release
 * timer (head not due yet) — invariant 3 — or finish a flushing close. */
static void flush(rl__conn *c) {
    pthread_mutex_lock(&c->send_lock);
    int st = state_of(c);
    if (st != ST_OPEN && st != ST_FLUSHING) {
        pthread_mutex_unlock(&c->send_lock);
        return;
    }
    int blocked;
    int e = write_due_locked(c, &blocked);
    if (e) {
        request_close_locked(c, ST_CLOSING, RL_E_CONNECTION_FAILED, 0, "write: %s", strerror(e));
        pthread_mutex_unlock(&c->send_lock);
        return;
    }
    set_out_interest_locked(c, blocked);
    uint64_t release_at = !blocked && c->q_head ? c->q_head->release_ns : 0;
    if (!c->q_head && st == ST_FLUSHING) request_close_locked(c, ST_CLOSING, RL_OK, 1, "closed locally (flushed)");
    int resume = c->rx_paused && c->queued_bytes <= c->max_queued / 2 && state_of(c) == ST_OPEN;
    if (resume) resume_reading_locked(c);
    pthread_mutex_unlock(&c->send_lock);
    if (c->release_timer && c->release_timer_at != release_at) {
        rl__loop_timer_cancel(c->loop, c->release_timer);
        c->release_timer = 0;
    }
    if (release_at && !c->release_timer) {
        if (rl__loop_timer_add(c->loop, release_at, release_timer_fn, c, &c->release_timer) != RL_OK) {
            close_error(c, RL_E_OUT_OF_MEMORY, 0, "out of memory for a release timer");
            return;
        }
        c->release_timer_at = release_at;
    }
}

/* A sender on another thread queued the first frame of an empty queue (posted; holds a reference). */
static void wake_post_fn(rl__loop *loop, void *ud) {
    (void)loop;
    rl__conn *c = ud;
    pthread_mutex_lock(&c->send_lock);
    c->wake_pending = 0;
    pthread_mutex_unlock(&c->send_lock);
    flush(c);
    rl__conn_release(c);
}

/* A queue entry for a frame: the payload copied inline, or `owned` adopted (not on failure: then
 * the caller still owns it); a small copied frame comes from c's spares when there is one. NULL
 * when out of memory. Send lock held. */
static out_frame *make_frame(rl__conn *c, const uint8_t hdr[RL_FRAME_HEADER_LEN], const void *payload, size_t len,
                             const void *more, size_t more_len, uint8_t *owned) {
    size_t total = len + more_len;
    int small = !owned && total <= SPARE_CAP;
    out_frame *f;
    if (small && c->spares) {
        f = c->spares;
        c->spares = f->next;
        c->n_spares--;
    } else {
        f = rl__malloc(sizeof *f + (owned ? 0 : RL_FRAME_HEADER_LEN + (small ? SPARE_CAP : total)));
        if (!f) return NULL;
    }
    f->spare = small;
    f->next = NULL;
    f->release_ns = 0;
    f->len = RL_FRAME_HEADER_LEN + total;
    f->off = 0;
    f->is_delayed = 0;
    memcpy(f->hdr, hdr, RL_FRAME_HEADER_LEN);
    if (owned) {
        f->payload = owned;
        f->owns_payload = 1;
    } else {
        memcpy(f->data, hdr, RL_FRAME_HEADER_LEN);
        f->payload = f->data + RL_FRAME_HEADER_LEN;
        f->owns_payload = 0;
        if (len) memcpy(f->payload, payload, len);
        if (more_len) memcpy(f->payload + len, more, more_len);
    }
    return f;
}

/* Append f to the send queue and count its unwritten bytes. Send lock held. */
static void enqueue_locked(rl__conn *c, out_frame *f) {
    if (c->q_tail) c->q_tail->next = f;
    else c->q_head = f;
    c->q_tail = f;
    c->queued_frames++;
    c->queued_bytes += f->len - f->off;
    atomic_store_explicit(&c->queued_mirror, c->queued_bytes, memory_order_relaxed);
    if (c->queued_bytes > c->queued_bytes_max) c->queued_bytes_max = c->queued_bytes;
}

/* The send path shared by rl__conn_send (owned == NULL) and rl__conn_send_buf (owned: the payload,
 * taken by this call in every case); queue_only (rl__conn_send_queued): never write from this
 * call — queue the frame and let the loop thread's next pass flush the queue. */
static int send_frame(rl__conn *c, uint16_t type, uint16_t flags, uint64_t id, const void *payload, size_t len,
                      const void *more, size_t more_len, uint8_t *owned, int queue_only) {
    int rc;
    if (!c || (flags & ~RL_FRAME_KNOWN_FLAGS) || len > RL_NET_MAX_PAYLOAD || more_len > RL_NET_MAX_PAYLOAD - len ||
        (len && !payload) || (more_len && !more)) {
        rl__free(owned);
        return RL_E_INVALID_ARGUMENT;
    }
    rl__frame_header h = {(uint32_t)(len + more_len), type, flags, id};
    uint8_t hdr[RL_FRAME_HEADER_LEN];
    rl__frame_header_encode(&h, hdr);
    int kick = 0;
    pthread_mutex_lock(&c->send_lock);
    if (state_of(c) != ST_OPEN) {
        rc = RL_E_CONNECTION_FAILED;
        goto fail;
    }
    int delayed = c->delay_us || c->jitter_us;
    if (!delayed && !c->q_head && !queue_only) { /* direct: the calling thread writes */
        struct iovec iov[3] = {{hdr, RL_FRAME_HEADER_LEN}, {(void *)payload, len}, {(void *)more, more_len}};
        ssize_t n = send_iov(c->fd, iov, more_len ? 3 : len ? 2 : 1);
        size_t total = RL_FRAME_HEADER_LEN + len + more_len;
        if (n >= 0 && (size_t)n == total) {
            c->frames_sent++;
            c->frames_direct++;
            c->bytes_sent += total;
            pthread_mutex_unlock(&c->send_lock);
            rl__free(owned);
            return RL_OK;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            int e = errno;
            request_close_locked(c, ST_CLOSING, RL_E_CONNECTION_FAILED, 0, "write: %s", strerror(e));
            rc = RL_E_CONNECTION_FAILED;
            goto fail;
        }
        size_t written = n > 0 ? (size_t)n : 0;
        out_frame *f = make_frame(c, hdr, payload, len, more, more_len, owned);
        if (!f) {
            if (written) /* half a frame is on the wire: the stream cannot continue */
                request_close_locked(c, ST_CLOSING, RL_E_OUT_OF_MEMORY, 0, "out of memory queueing a frame");
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        f->off = written;
        enqueue_locked(c, f);
        set_out_interest_locked(c, 1);
        pthread_mutex_unlock(&c->send_lock);
        return RL_OK;
    }
    out_frame *f = make_frame(c, hdr, payload, len, more, more_len, owned);
    if (!f) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    if (delayed) {
        uint64_t rel = rl__clock_mono_ns() + (uint64_t)c->delay_us * 1000u; /* the clock only when delayed */
        if (c->jitter_us) rel += next_rand(&c->rng) % ((uint64_t)c->jitter_us * 1000u + 1);
        if (rel < c->last_release_ns) rel = c->last_release_ns;
        c->last_release_ns = rel;
        f->release_ns = rel;
        f->is_delayed = 1;
    }
    int was_empty = c->q_head == NULL;
    enqueue_locked(c, f);
    if (was_empty) { /* invariant 3: nothing will flush this queue yet */
        if (rl__tls_loop == c->loop && !queue_only) {
            kick = 1;
        } else if (!c->wake_pending) { /* queue_only on the loop thread: flushed in the next pass */
            c->wake_pending = 1;
            rl__conn_retain(c);
            c->wake_node.fn = wake_post_fn;
            c->wake_node.ud = c;
            c->wake_node.is_heap = 0;
            rl__loop_post_node(c->loop, &c->wake_node);
        }
    }
    pthread_mutex_unlock(&c->send_lock);
    if (kick) flush(c);
    return RL_OK;
fail:
    pthread_mutex_unlock(&c->send_lock);
    rl__free(owned); /* make_frame does not take owned when it fails */
    return rc;
}

int rl__conn_send(rl__conn *c, uint16_t type, uint16_t flags, uint64_t id, const void *payload, size_t len) {
    return send_frame(c, type, flags, id, payload, len, NULL, 0, NULL, 0);
}

int rl__conn_send_queued(rl__conn *c, uint16_t type, uint16_t flags, uint64_t id, const void *payload, size_t len) {
    return send_frame(c, type, flags, id, payload, len, NULL, 0, NULL, 1);
}

int rl__conn_send2(rl__conn *c, uint16_t type, uint16_t flags, uint64_t id, const void *head, size_t head_len,
                   const void *body, size_t body_len, int queued) {
    return send_frame(c, type, flags, id, head, head_len, body, body_len, NULL, queued != 0);
}

int rl__conn_send_buf(rl__conn *c, uint16_t type, uint16_t flags, uint64_t id, rl_buf *payload) {
    if (!payload) return RL_E_INVALID_ARGUMENT;
    if (rl__buf_error(payload)) {
        rl__buf_release(payload);
        return RL_E_OUT_OF_MEMORY;
    }
    size_t len;
    uint8_t *bytes = rl__buf_detach(payload, &len);
    if (!bytes) return send_frame(c, type, flags, id, NULL, 0, NULL, 0, NULL, 0);
    return send_frame(c, type, flags, id, bytes, len, NULL, 0, bytes, 0);
}

int rl__conn_set_delay(rl__conn *c, uint32_t delay_us, uint32_t jitter_us, uint64_t seed) {
    if (!c || delay_us > MAX_DELAY_US || jitter_us > MAX_DELAY_US) {
        return RL_E_INVALID_ARGUMENT;
    }
    int rc = RL_OK;
    pthread_mutex_lock(&c->send_lock);
    if (state_of(c) != ST_OPEN) {
        rc = RL_E_CONNECTION_FAILED;
    } else {
        c->delay_us = delay_us;
        c->jitter_us = jitter_us;
        c->rng = seed;
    }
    pthread_mutex_unlock(&c->send_lock);
    return rc;
}

/* ============================================================================================
 * The handshake (docs/protocol.md §2; the state diagram is in this file's header)
 * ========================================================================================== */

void rl__net_fill_limits(rl__net_limits *out, const rl__net_limits *given) {
    rl__net_limits g = {0};
    if (given) g = *given;
    out->max_conns = g.max_conns ? g.max_conns : RL_NET_DEFAULT_MAX_CONNS;
    out->max_handshakes = g.max_handshakes ? g.max_handshakes : RL_NET_DEFAULT_MAX_HANDSHAKES;
    out->handshake_timeout_ms = g.handshake_timeout_ms ? g.handshake_timeout_ms : RL_NET_DEFAULT_HANDSHAKE_TIMEOUT_MS;
    out->max_queued_bytes = g.max_queued_bytes ? g.max_queued_bytes : RL_NET_DEFAULT_MAX_QUEUED_BYTES;
}

int rl__loop_set_auth(rl__loop *loop, const rl__net_auth *auth) {
    if (!loop || !auth) return RL_E_INVALID_ARGUMENT;
    if (!rl__loop_context(loop)) return RL_E_CLIENT_INVALID_OPERATION;
    loop->auth = *auth;
    loop->has_auth = 1;
    return RL_OK;
}

int rl__loop_set_limits(rl__loop *loop, const rl__net_limits *limits) {
    if (!loop) return RL_E_INVALID_ARGUMENT;
    if (!rl__loop_context(loop)) return RL_E_CLIENT_INVALID_OPERATION;
    rl__net_fill_limits(&loop->limits, limits);
    for (rl__conn *c = loop->conns; c; c = c->lnext)
        if (c->is_accepted) c->max_queued = loop->limits.max_queued_bytes;
    return RL_OK;
}

void rl__loop_get_limits(rl__loop *loop, rl__net_limits *out) { *out = loop->limits; }

void rl__loop_get_net_stats(rl__loop *loop, rl__net_stats *out) {
    memset(out, 0, sizeof *out);
#define G(f) atomic_load_explicit(&loop->f, memory_order_relaxed)
    out->accepted_now = G(st_accepted_now);
    out->handshaking_now = G(st_handshaking_now);
    out->handshakes_ok = G(st_hs_ok);
    out->handshakes_failed = G(st_hs_failed);
    out->handshakes_timed_out = G(st_hs_timed_out);
    out->handshakes_evicted = G(st_hs_evicted);
    out->conns_refused = G(st_refused);
    out->reads_paused = G(st_reads_paused);
#undef G
}

void rl__net_status_json(rl_buf *j, rl__loop *loop) {
    rl__net_stats st;
    rl__net_limits lim;
    rl__loop_get_net_stats(loop, &st);
    rl__loop_get_limits(loop, &lim);
    rl__buf_printf(j,
                   ",\"net\":{\"authenticated\":%s,\"max_conns\":%u,\"max_handshakes\":%u,"
                   "\"handshake_timeout_ms\":%u,\"max_queued_bytes\":%llu,\"accepted_now\":%llu,"
                   "\"handshaking_now\":%llu,\"handshakes_ok\":%llu,\"handshakes_failed\":%llu,"
                   "\"handshakes_timed_out\":%llu,\"handshakes_evicted\":%llu,\"conns_refused\":%llu,"
                   "\"reads_paused\":%llu}",
                   loop->has_auth ? "true" : "false", lim.max_conns, lim.max_handshakes, lim.handshake_timeout_ms,
                   (unsigned long long)lim.max_queued_bytes, (unsigned long long)st.accepted_now,
                   (unsigned long long)st.handshaking_now, (unsigned long long)st.handshakes_ok,
                   (unsigned long long)st.handshakes_failed, (unsigned long long)st.handshakes_timed_out,
                   (unsigned long long)st.handshakes_evicted, (unsigned long long)st.conns_refused,
                   (unsigned long long)st.reads_paused);
}

/* Take c off its listener's hs list (a no-op when it is not on one). Loop context. */
static void hs_unlink(rl__conn *c) {
    rl__listener *l = c->hs_listener;
    if (!l) return;
    if (c->hs_prev) c->hs_prev->hs_next = c->hs_next;
    else l->hs_head = c->hs_next;
    if (c->hs_next) c->hs_next->hs_prev = c->hs_prev;
    else l->hs_tail = c->hs_prev;
    c->hs_prev = c->hs_next = NULL;
    c->hs_listener = NULL;
    l->n_hs--;
    c->loop->n_handshakes--;
    atomic_store_explicit(&c->loop->st_handshaking_now, c->loop->n_handshakes, memory_order_relaxed);
}

/* Send an error reply (type, id 0 or the frame's) with code and a message, then close after the
 * flush: how the handshake refuses a peer that can be told why. */
static void hs_refuse(rl__conn *c, uint16_t type, uint64_t id, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void hs_refuse(rl__conn *c, uint16_t type, uint64_t id, int code, const char *fmt, ...) {
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    atomic_fetch_add_explicit(&c->loop->st_hs_failed, 1, memory_order_relaxed);
    rl__msg_error m = {code, (const uint8_t *)why, (uint32_t)strlen(why)};
    rl_buf b;
    rl__buf_init(&b);
    if (rl__msg_error_encode(&b, &m, NULL) == RL_OK)
        (void)send_frame(c, type, RL_FRAME_REPLY | RL_FRAME_ERROR, id, b.data, b.len, NULL, 0, NULL, 0);
    rl__buf_release(&b);
    pthread_mutex_lock(&c->send_lock);
    if (state_of(c) == ST_OPEN) {
        c->close_err = code; /* the flush keeps this reason and code */
        snprintf(c->close_reason, sizeof c->close_reason, "handshake refused (%s): %.110s", rl_error_name(code), why);
        c->close_quiet = 0;
        set_state(c, c->q_head ? ST_FLUSHING : ST_CLOSING);
        schedule_close_locked(c);
    }
    pthread_mutex_unlock(&c->send_lock);
}

/* The accepted connection's handshake did not finish in time (timer callback). */
static void hs_timeout(rl__loop *loop, void *ud) {
    rl__conn *c = ud;
    c->hs_timer = 0;
    if (c->hs == HS_DONE) return;
    atomic_fetch_add_explicit(&loop->st_hs_timed_out, 1, memory_order_relaxed);
    hs_unlink(c);
    close_error(c, RL_E_TIMED_OUT, 0, "handshake not completed within %u ms", loop->limits.handshake_timeout_ms);
}

/* An accepted connection on a loop with credentials: on l's hs list (evicting the oldest when
 * full), frames limited to the handshake's size, the challenge sent, the timeout armed. */
static void start_accept_handshake(rl__listener *l, rl__conn *c) {
    rl__loop *loop = c->loop;
    if (loop->n_handshakes >= loop->limits.max_handshakes && l->hs_head) {
        rl__conn *old = l->hs_head;
        hs_unlink(old);
        atomic_fetch_add_explicit(&loop->st_hs_evicted, 1, memory_order_relaxed);
        close_error(old, RL_E_TIMED_OUT, 0,
                    "closed in the handshake: %u connections were in it (the limit), it was the oldest",
                    loop->limits.max_handshakes);
    }
    c->hs = HS_ACCEPT;
    c->hs_listener = l;
    c->hs_prev = l->hs_tail;
    if (l->hs_tail) l->hs_tail->hs_next = c;
    else l->hs_head = c;
    l->hs_tail = c;
    l->n_hs++;
    loop->n_handshakes++;
    atomic_store_explicit(&loop->st_handshaking_now, loop->n_handshakes, memory_order_relaxed);
    rl__frame_reader_set_max(&c->rd, RL_NET_HANDSHAKE_MAX_PAYLOAD);
    rl__msg_auth_challenge ch;
    memset(&ch, 0, sizeof ch);
    ch.magic = RL_PROTOCOL_MAGIC;
    ch.protocol_version = RL_PROTOCOL_VERSION;
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__auth_random(c->snonce, sizeof c->snonce);
    memcpy(ch.nonce, c->snonce, sizeof ch.nonce);
    if (rc == RL_OK) rc = rl__msg_auth_challenge_encode(&b, &ch, NULL);
    if (rc == RL_OK) rc = rl__conn_send(c, RL_MSG_AUTH_CHALLENGE, 0, 0, b.data, b.len);
    rl__buf_release(&b);
    if (rc == RL_OK) {
        uint64_t at = rl__clock_mono_ns() + (uint64_t)loop->limits.handshake_timeout_ms * 1000000ull;
        rc = rl__loop_timer_add(loop, at, hs_timeout, c, &c->hs_timer);
    }
    if (rc != RL_OK) {
        hs_unlink(c);
        close_error(c, rc, 0, "cannot start the handshake: %s", rl_error_name(rc));
    }
}

/* The accepted side's handshake is through: reply with our proof, full frames from now on, the
 * owner gets the connection (on_accept) and with it every frame after this one. */
static void finish_accept(rl__conn *c, uint64_t id, int cls, const uint8_t proof[RL_AUTH_PROOF_LEN]) {
    rl__listener *l = c->hs_listener;
    rl__msg_auth_reply r;
    memcpy(r.proof, proof, sizeof r.proof);
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__msg_auth_reply_encode(&b, &r, NULL);
    if (rc == RL_OK) rc = rl__conn_send(c, RL_MSG_AUTH, RL_FRAME_REPLY, id, b.data, b.len);
    rl__buf_release(&b);
    if (rc != RL_OK) {
        close_error(c, rc, 0, "cannot answer the AUTH: %s", rl_error_name(rc));
        return;
    }
    hs_unlink(c);
    if (c->hs_timer) rl__loop_timer_cancel(c->loop, c->hs_timer);
    c->hs_timer = 0;
    c->hs = HS_DONE;
    c->auth_class = cls;
    rl__frame_reader_set_max(&c->rd, RL_NET_MAX_PAYLOAD);
    atomic_fetch_add_explicit(&c->loop->st_hs_ok, 1, memory_order_relaxed);
    rl__log(RL_LOG_DEBUG, "net: %s proved the %s key", c->peer, rl__auth_class_name(cls));
    rl__conn_retain(c); /* the callee's */
    l->on_accept(l, c, l->ud);
}

/* HS_ACCEPT: the connecting side's AUTH request. */
static void hs_accept_frame(rl__conn *c, const rl__frame_header *h, const uint8_t *payload) {
    if (h->type != RL_MSG_AUTH || h->flags != 0) {
        if (h->type == RL_MSG_HELLO && h->flags == 0) /* a peer of protocol version 1 */
            hs_refuse(c, h->type, h->id, RL_E_INCOMPATIBLE_PROTOCOL_VERSION,
                      "this server speaks protocol version %u: its first frame is AUTH_CHALLENGE, to be answered "
                      "with AUTH before HELLO",
                      RL_PROTOCOL_VERSION);
        else {
            atomic_fetch_add_explicit(&c->loop->st_hs_failed, 1, memory_order_relaxed);
            close_error(c, RL_E_MALFORMED_FRAME, 0, "first frame is %s (type %u, flags 0x%x), not an AUTH request",
                        rl__msg_type_name(h->type), h->type, h->flags);
        }
        return;
    }
    rl__msg_auth_req m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_auth_req_decode(payload, h->payload_len, NULL, &m, &why);
    if (rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION) {
        hs_refuse(c, h->type, h->id, rc,
                  "this server speaks protocol version %u (magic 0x%08x); the AUTH had %u (0x%08x)",
                  RL_PROTOCOL_VERSION, RL_PROTOCOL_MAGIC, m.protocol_version, m.magic);
        return;
    }
    if (rc != RL_OK) {
        atomic_fetch_add_explicit(&c->loop->st_hs_failed, 1, memory_order_relaxed);
        close_error(c, RL_E_MALFORMED_FRAME, 0, "malformed AUTH: %s", rl__errdetail_get(&why));
        return;
    }
    rc = rl__auth_verify(&c->loop->auth, m.auth_class, 'C', c->snonce, m.nonce, m.proof);
    if (rc == RL_E_INVALID_CLUSTER_ID) {
        hs_refuse(c, h->type, h->id, rc,
                  "the client's proof does not match this cluster's name: its cluster file names another "
                  "cluster (description:ID)");
        return;
    }
    if (rc == RL_E_UNAUTHORIZED_ATTEMPT) {
        hs_refuse(c, h->type, h->id, rc,
                  "the peer claimed to be a member of this cluster, but its proof does not match the cluster's "
                  "key file");
        return;
    }
    uint8_t proof[RL_AUTH_PROOF_LEN];
    if (rc == RL_OK) rc = rl__auth_proof(&c->loop->auth, m.auth_class, 'S', c->snonce, m.nonce, proof);
    if (rc != RL_OK) {
        hs_refuse(c, h->type, h->id, rc, "cannot check the AUTH: %s", rl_error_name(rc));
        return;
    }
    finish_accept(c, h->id, m.auth_class, proof);
}

/* The connecting side's handshake is through: full frames, the owner's reference, on_connect. */
static void finish_connect(rl__conn *c, int cls) {
    if (c->connect_timer) rl__loop_timer_cancel(c->loop, c->connect_timer);
    c->connect_timer = 0;
    c->hs = HS_DONE;
    c->auth_class = cls;
    rl__frame_reader_set_max(&c->rd, RL_NET_MAX_PAYLOAD);
    atomic_fetch_add_explicit(&c->loop->st_hs_ok, 1, memory_order_relaxed);
    rl__conn_retain(c); /* the owner's */
    rl_connect_fn cb = c->on_connect;
    c->on_connect = NULL;
    cb(c, RL_OK, c->connect_ud);
}

/* HS_CHALLENGE: the server's challenge; answer with our class, nonce and proof. */
static void hs_challenge_frame(rl__conn *c, const rl__frame_header *h, const uint8_t *payload) {
    if (h->type != RL_MSG_AUTH_CHALLENGE || h->flags != 0) {
        close_error(c, h->type == RL_MSG_HELLO ? RL_E_INCOMPATIBLE_PROTOCOL_VERSION : RL_E_MALFORMED_FRAME, 0,
                    "the server's first frame is %s (type %u, flags 0x%x), not AUTH_CHALLENGE",
                    rl__msg_type_name(h->type), h->type, h->flags);
        return;
    }
    rl__msg_auth_challenge ch;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_auth_challenge_decode(payload, h->payload_len, NULL, &ch, &why);
    if (rc != RL_OK) {
        close_error(c, rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION ? rc : RL_E_MALFORMED_FRAME, 0, "AUTH_CHALLENGE: %s",
                    rl__errdetail_get(&why));
        return;
    }
    memcpy(c->snonce, ch.nonce, sizeof c->snonce);
    rl__msg_auth_req m;
    rc = rl__msg_auth_req_make(&c->loop->auth, c->snonce, &m);
    memcpy(c->cnonce, m.nonce, sizeof c->cnonce);
    rl_buf b;
    rl__buf_init(&b);
    if (rc == RL_OK) rc = rl__msg_auth_req_encode(&b, &m, NULL);
    if (rc == RL_OK) rc = rl__conn_send(c, RL_MSG_AUTH, 0, 0, b.data, b.len);
    rl__buf_release(&b);
    if (rc != RL_OK) {
        close_error(c, rc, 0, "cannot answer the AUTH_CHALLENGE: %s", rl_error_name(rc));
        return;
    }
    c->hs = HS_REPLY;
}

/* HS_REPLY: the server's AUTH reply (its proof) or its refusal. */
static void hs_reply_frame(rl__conn *c, const rl__frame_header *h, const uint8_t *payload) {
    if (h->type != RL_MSG_AUTH || !(h->flags & RL_FRAME_REPLY)) {
        close_error(c, RL_E_MALFORMED_FRAME, 0, "expected the AUTH reply, got %s (type %u, flags 0x%x)",
                    rl__msg_type_name(h->type), h->type, h->flags);
        return;
    }
    rl__msg msg;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_decode(h->type, h->flags, payload, h->payload_len, NULL, &msg, &why);
    if (rc != RL_OK) {
        close_error(c, RL_E_MALFORMED_FRAME, 0, "malformed AUTH reply: %s", rl__errdetail_get(&why));
        return;
    }
    int cls = rl__auth_connect_class(&c->loop->auth);
    if (h->flags & RL_FRAME_ERROR) {
        int code = msg.u.error.code;
        close_error(c, code, 0, "the server refused the handshake: %s (%d): %.*s", rl_error_name(code), code,
                    (int)msg.u.error.message_len, (const char *)msg.u.error.message);
        return;
    }
    rc = rl__auth_verify(&c->loop->auth, cls, 'S', c->snonce, c->cnonce, msg.u.auth_reply.proof);
    if (rc != RL_OK) {
        close_error(c, rc == RL_E_UNAUTHORIZED_ATTEMPT ? rc : RL_E_INVALID_CLUSTER_ID, 0,
                    "the server did not prove it knows this cluster's %s (a process of another cluster on this "
                    "address?)",
                    cls == RL_AUTH_MEMBER ? "key file" : "name (description:ID)");
        return;
    }
    finish_connect(c, cls);
}

static void hs_frame(rl__conn *c, const rl__frame_header *h, const uint8_t *payload) {
    switch (c->hs) {
    case HS_ACCEPT: hs_accept_frame(c, h, payload); break;
    case HS_CHALLENGE: hs_challenge_frame(c, h, payload); break;
    case HS_REPLY: hs_reply_frame(c, h, payload); break;
    default: break;
    }
}

/* ============================================================================================
 * Statistics, and the loop's teardown
 * ========================================================================================== */

/* Take the send lock once no write of the loop's is between its sendmsg and its accounting, so
 * the counters read include every frame the peer may already have (what they always meant). */
static void settled_lock(rl__conn *c) {
    pthread_mutex_lock(&c->send_lock);
    while (c->writing) {
        pthread_mutex_unlock(&c->send_lock);
        sched_yield();
        pthread_mutex_lock(&c->send_lock);
    }
}

void rl__conn_get_stats(rl__conn *c, rl__conn_stats *out) {
    memset(out, 0, sizeof *out);
    settled_lock(c);
    out->frames_sent = c->frames_sent;
    out->bytes_sent = c->bytes_sent;
    out->frames_direct = c->frames_direct;
    out->queued_frames = c->queued_frames;
    out->queued_bytes = c->queued_bytes;
    out->queued_bytes_max = c->queued_bytes_max;
    out->delay_us = c->delay_us;
    out->jitter_us = c->jitter_us;
    out->delayed_frames = c->delayed_frames;
    out->late_min_ns = c->late.min_ns;
    out->late_p50_ns = rl__lat_hist_quantile(&c->late, 0.50);
    out->late_p99_ns = rl__lat_hist_quantile(&c->late, 0.99);
    out->late_max_ns = c->late.max_ns;
    pthread_mutex_unlock(&c->send_lock);
    out->frames_received = atomic_load_explicit(&c->frames_received, memory_order_relaxed);
    out->bytes_received = atomic_load_explicit(&c->bytes_received, memory_order_relaxed);
    out->rx_buffer_cap = atomic_load_explicit(&c->rx_cap, memory_order_relaxed);
}

void rl__conn_get_lateness(rl__conn *c, rl__lat_hist *out, unsigned flags) {
    settled_lock(c);
    *out = c->late;
    if (flags & RL_STATS_RESET) rl__lat_hist_reset(&c->late);
    pthread_mutex_unlock(&c->send_lock);
}

void rl__net_close_all(rl__loop *loop) {
    while (loop->listeners) do_listener_close(loop->listeners);
    while (loop->conns) {
        rl__conn *c = loop->conns;
        if (state_of(c) == ST_CONNECTING) {
            fail_connect(c, RL_E_OPERATION_CANCELLED, "the loop was freed");
            continue;
        }
        pthread_mutex_lock(&c->send_lock);
        int st = state_of(c);
        if (st == ST_OPEN || st == ST_FLUSHING) {
            snprintf(c->close_reason, sizeof c->close_reason, "the loop was freed");
            c->close_err = RL_E_OPERATION_CANCELLED;
            c->close_quiet = 1;
            set_state(c, ST_CLOSING);
        }
        pthread_mutex_unlock(&c->send_lock);
        do_close(c);
    }
}

int rl__net_has_objects(rl__loop *loop) {
    return loop->conns || loop->listeners || loop->pending_close || loop->zombies || loop->dead_listeners;
}
