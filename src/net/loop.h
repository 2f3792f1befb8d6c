/* loop.h (internal) — the network runtime: an epoll event loop with microsecond timers and
 * thread-safe posts, loopback TCP connections that carry frames (frame.h), and injected delay.
 *
 * The model (FoundationDB's): a process runs ONE loop thread for all its sockets. rlkvd runs it
 * in main() plus a few worker threads (fsync, …) that hand results back with rl__loop_post; the
 * cluster client runs one network thread per rl_db while application threads send requests
 * directly (rl__conn_send is thread-safe) and wait on futures that the loop thread completes.
 *
 * Why our own loop and not libuv: libuv's timers have millisecond resolution, and injected delay
 * must be precise to tens of microseconds. A plain sleep is not precise enough
 * either: a 250 µs wait in epoll/timerfd/clock_nanosleep wakes 50–90 µs late at p50 here (timer
 * slack plus scheduler wake-up), while a loopback round trip is ~9 µs. So the loop sleeps until
 * (deadline − margin) and spins on the monotonic clock for the rest, polling the sockets every
 * few µs so frames are not starved; the margin tracks ~p99 of the measured wake-up lateness
 * (loop.c explains it). Idle (no timer pending) it blocks in epoll and uses no CPU.
 *
 * THREAD RULES. Every function below is tagged:
 *   [any]   callable from any thread at any time while its object is valid;
 *   [loop]  callable only in LOOP CONTEXT: on the thread inside rl__loop_run (from a callback or a
 *           posted function), or, while no thread runs the loop, by its owner thread;
 *   [owner] the owner thread while no thread runs the loop.
 * All callbacks (posts, timers, on_accept, on_connect, on_frame, on_close) run on the loop
 * thread — or, for what is pending when the loop is freed, on the thread calling rl__loop_free —
 * and never from inside the API call that registered them.
 *
 * LIFETIMES.
 *   - rl__loop: created by rl__loop_new, freed by rl__loop_free, which closes every listener and
 *     connection (on_close with RL_E_OPERATION_CANCELLED), fails pending connects the same way,
 *     runs the posts still queued, and drops pending timers without calling them.
 *   - rl__conn is reference counted. The owner gets one reference from on_accept / on_connect and
 *     drops it with rl__conn_release (at any time, also inside on_close); the loop holds its own
 *     reference while the connection is registered and drops it after on_close has returned. So a
 *     thread that sends while another closes never touches freed memory, as long as it holds a
 *     reference (take one with rl__conn_retain for each extra thread that keeps the pointer).
 *     Releasing does not close: an open connection whose owner released it stays open (its
 *     callbacks keep running) until it is closed. A connection's functions stay safe after its
 *     loop was freed (they see it closed); only rl__conn_release frees its memory.
 *   - rl__listener: owned by the caller of rl__listen until rl__listener_close (or rl__loop_free).
 *
 * CLOSING. A connection is closed exactly once, by rl__conn_close (err RL_OK), the peer's EOF
 * (RL_E_CONNECTION_FAILED; also when it closes in the middle of a frame, which is what a crashed
 * peer looks like), a socket error (RL_E_CONNECTION_FAILED), a malformed header (bad flags, a
 * payload over 64 MiB: RL_E_MALFORMED_FRAME), memory (RL_E_OUT_OF_MEMORY), or the loop being freed
 * (RL_E_OPERATION_CANCELLED). Each logs one line naming the peer and why (warn, or info for local
 * closes and EOFs at a frame boundary), calls on_close(conn, err, ud) once on the loop thread, and
 * never calls a callback of that connection after it. Closing never affects other connections.
 * A close that drops a partly written frame leaves the peer a truncated frame. There is no
 * half-close: the peer's shutdown(SHUT_WR) closes the connection.
 *
 * ERRORS. Codes of include/reclayer/error.h, never errno: RL_E_INVALID_ARGUMENT (bad arguments,
 * an address outside 127.0.0.0/8), RL_E_OUT_OF_MEMORY, RL_E_ADDRESS_IN_USE, RL_E_BIND_FAILED,
 * RL_E_CONNECTION_FAILED (refused, reset, peer gone, send on a closed connection), RL_E_TIMED_OUT
 * (connect timeout), RL_E_MALFORMED_FRAME, RL_E_OPERATION_CANCELLED (loop freed),
 * RL_E_CLIENT_INVALID_OPERATION (a [loop] function called from the wrong thread),
 * RL_E_OPERATION_FAILED (an OS resource could not be created). The calls that can say more than
 * their code (rl__loop_new, rl__listen, rl__connect) take the caller's rl__errdetail
 * (base/errdetail.h) or NULL: a failure with more to say sets it ("address 10.0.0.1 is outside
 * 127.0.0.0/8 …", "bind 127.0.0.1:5000: Address already in use"); a success leaves it alone.
 */
#ifndef RL_NET_LOOP_H
#define RL_NET_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "net/auth.h"
#include "net/frame.h"

typedef struct rl__loop rl__loop;
typedef struct rl__conn rl__conn;
typedef struct rl__listener rl__listener;

/* A posted function or timer callback: runs on the loop thread with the ud given at post/add. */
typedef void (*rl_loop_fn)(rl__loop *loop, void *ud);
/* A complete frame: h and payload (h->payload_len bytes, never NULL) are valid only during the
 * call; copy what must outlive it. */
typedef void (*rl_frame_fn)(rl__conn *conn, const rl__frame_header *h, const uint8_t *payload, void *ud);
/* The connection closed (err: RL_OK after rl__conn_close, otherwise why). The last callback of
 * conn; the owner's reference is still held (release it here or later). */
typedef void (*rl_close_fn)(rl__conn *conn, int err, void *ud);
/* A connection was accepted: conn carries one reference for the callee. Set its callbacks here
 * (rl__conn_set_callbacks); reading starts when this returns. */
typedef void (*rl_accept_fn)(rl__listener *listener, rl__conn *conn, void *ud);
/* A connect finished: err == RL_OK and conn carries one reference for the callee (set its
 * callbacks here), or err != RL_OK and conn is NULL. Called exactly once. */
typedef void (*rl_connect_fn)(rl__conn *conn, int err, void *ud);

/* ---------------------------------------------------------------------------------------------
 * Latency histogram (used for delay lateness; also handy for ping tools and tests)
 * ------------------------------------------------------------------------------------------ */

/* Log-linear buckets over nanoseconds: exact below 32 ns, then 16 buckets per power of two (≤ 6.25%
 * relative error) up to 2^41 ns (~36 min); larger values land in the last bucket. */
#define RL_LAT_BUCKETS (32 + 36 * 16)
typedef struct {
    uint64_t count;                  /* samples */
    uint64_t sum_ns;                 /* sum of samples */
    uint64_t min_ns, max_ns;         /* exact extremes (0 when count == 0) */
    uint32_t bucket[RL_LAT_BUCKETS]; /* samples per bucket */
} rl__lat_hist;

/* Empty h. [any, on a caller-owned histogram] */
void rl__lat_hist_reset(rl__lat_hist *h);
/* Add one sample of ns nanoseconds. */
void rl__lat_hist_add(rl__lat_hist *h, uint64_t ns);
/* The q-quantile (0 <= q <= 1) in ns: the middle of the bucket holding the ceil(q*count)-th
 * smallest sample, clamped to [min_ns, max_ns]; 0 when empty. */
uint64_t rl__lat_hist_quantile(const rl__lat_hist *h, double q);
/* Add every sample of src to dst. */
void rl__lat_hist_merge(rl__lat_hist *dst, const rl__lat_hist *src);

/* ---------------------------------------------------------------------------------------------
 * The loop
 * ------------------------------------------------------------------------------------------ */

enum {
    /* rl__loop_new flag: sleep with a timerfd even if the kernel has epoll_pwait2 (tests). */
    RL_LOOP_FORCE_TIMERFD = 0x1,
};
#define RL_LOOP_KNOWN_FLAGS 0x1

typedef struct {
    uint64_t iterations;       /* passes of the loop */
    uint64_t sleeps;           /* blocking waits (epoll with a timeout or forever) */
    uint64_t timers_fired;     /* timer callbacks called */
    uint64_t posts_run;        /* posted functions called */
    uint64_t spin_ns;          /* time spent spinning before deadlines */
    uint64_t margin_ns;        /* the current sleep margin (see loop.c) */
    uint64_t wake_late_p50_ns; /* over the recent window of timed sleeps: how late they woke */
    uint64_t wake_late_p99_ns;
    int uses_pwait2;         /* 1: epoll_pwait2 (ns timeouts); 0: timerfd fallback */
    rl__lat_hist timer_late; /* for every timer fired: fire time − deadline */
} rl__loop_stats;

/* rl__loop_new — create a loop (epoll instance, wake-up eventfd; checks whether the kernel has
 * epoll_pwait2 and falls back to a timerfd).
 * [in] flags  0 or RL_LOOP_FORCE_TIMERFD; other bits are RL_E_INVALID_ARGUMENT.
 * [out] out   the loop, owned by the caller (rl__loop_free). Untouched on error.
 * Returns RL_OK, RL_E_INVALID_ARGUMENT, RL_E_OUT_OF_MEMORY or RL_E_OPERATION_FAILED. [any] */
int rl__loop_new(unsigned flags, rl__loop **out, rl__errdetail *detail);

/* rl__loop_free — close everything and free the loop (NULL is a no-op). Order: posts still queued
 * are run (FIFO, on this thread, rl__loop_is_closing() true) so their ud can be released; then
 * listeners are closed, pending connects complete with RL_E_OPERATION_CANCELLED, open connections
 * close with RL_E_OPERATION_CANCELLED (on_close called here); posts made meanwhile are run too;
 * pending timers are dropped without being called (their ud is the caller's). [owner]: no thread
 * may run the loop (stop it and join first) and no other thread may call a loop function during or
 * after this call; connections still referenced elsewhere stay safe to call (they are closed). */
void rl__loop_free(rl__loop *loop);

/* rl__loop_run — run the loop on the calling thread until rl__loop_stop. Returns RL_OK after a
 * stop (the stop is consumed: a later run runs again), RL_E_CLIENT_INVALID_OPERATION if another
 * thread is running it (or it is called from inside itself). A stop requested before the call
 * makes it return after one pass. Sets the thread's timer slack to 1 ns while it runs. [any, one
 * thread at a time] */
int rl__loop_run(rl__loop *loop);

/* rl__loop_stop — ask rl__loop_run to return after the current pass. Never blocks. [any] */
void rl__loop_stop(rl__loop *loop);

/* rl__loop_post — run fn(loop, ud) on the loop thread soon (the loop wakes through an eventfd).
 * Posts run in the order they were made (FIFO across all threads, as ordered by an internal
 * mutex), each exactly once, never inside this call; a post from a posted function runs in a later
 * pass. Posts made while no thread runs the loop wait for rl__loop_run (or rl__loop_free, which
 * runs them). Returns RL_OK or RL_E_OUT_OF_MEMORY (then fn is never called). [any] */
int rl__loop_post(rl__loop *loop, rl_loop_fn fn, void *ud);

/* rl__loop_in_loop_thread — 1 if the calling thread is the one inside rl__loop_run (or inside
 * rl__loop_free) of loop, else 0. [any] */
int rl__loop_in_loop_thread(const rl__loop *loop);

/* rl__loop_is_closing — 1 while rl__loop_free is closing loop (for posted functions and on_close
 * callbacks that want to know), else 0. [any] */
int rl__loop_is_closing(const rl__loop *loop);

/* rl__loop_timer_add — call cb(loop, ud) on the loop thread once, no earlier than deadline_ns
 * (rl__clock_mono_ns's clock) and typically 1–20 µs after it (see the precision design in loop.c).
 * A deadline in the past fires in the next pass. Timers fire in deadline order, ties in the order
 * added; a timer added by a timer callback with an already due deadline fires in the next pass.
 * [out] out_id  (may be NULL) a nonzero id for rl__loop_timer_cancel, unique for the loop's life.
 * Returns RL_OK, RL_E_OUT_OF_MEMORY, RL_E_INVALID_ARGUMENT (cb NULL) or
 * RL_E_CLIENT_INVALID_OPERATION (not loop context). [loop] — from other threads, post. */
int rl__loop_timer_add(rl__loop *loop, uint64_t deadline_ns, rl_loop_fn cb, void *ud, uint64_t *out_id);

/* rl__loop_timer_cancel — cancel a pending timer: RL_OK (cb will not be called),
 * RL_E_NOT_FOUND (an expected outcome: it already fired, was cancelled, or id is 0/unknown), or
 * RL_E_CLIENT_INVALID_OPERATION. [loop] */
int rl__loop_timer_cancel(rl__loop *loop, uint64_t id);

/* rl__loop_set_margin_bounds — bound the adaptive sleep margin (default [20, 200] µs; loop.c):
 * the most a timer spins before its deadline, i.e. the CPU a precise timer may cost. max_us 0:
 * never spin (timers then fire with the kernel's wake-up lateness, ~50–90 µs here). Returns
 * RL_OK, RL_E_INVALID_ARGUMENT (min > max, max > 10,000) or RL_E_CLIENT_INVALID_OPERATION. [loop] */
int rl__loop_set_margin_bounds(rl__loop *loop, uint32_t min_us, uint32_t max_us);

/* rl__loop_get_stats — copy the loop's counters (each read atomically; the set is not a snapshot
 * except in loop context). [any] */
void rl__loop_get_stats(rl__loop *loop, rl__loop_stats *out);

/* ---------------------------------------------------------------------------------------------
 * The handshake and the limits (docs/protocol.md §2, docs/design.md §8.2 "Access")
 *
 * A loop given credentials (rl__loop_set_auth) runs the AUTH handshake on every connection
 * before the owner sees it: an accepted connection reaches on_accept, a connect reaches
 * on_connect(conn, RL_OK), only once the peer has proved it knows the cluster's secrets (and, for
 * a connect, the server has proved it too). Until then the connection belongs to the runtime:
 * it accepts at most one frame of RL_NET_HANDSHAKE_MAX_PAYLOAD bytes (a longer declared length
 * closes it before anything is buffered), and it is closed if the handshake is not done within
 * the handshake timeout (accepted) or the connect's timeout_ms (connects). A connect whose
 * handshake fails completes with on_connect(NULL, err): RL_E_INVALID_CLUSTER_ID (the server does
 * not know our cluster name, or could not prove it knows it), RL_E_UNAUTHORIZED_ATTEMPT (we
 * claimed membership and the server does not accept our member key),
 * RL_E_INCOMPATIBLE_PROTOCOL_VERSION, RL_E_TIMED_OUT, RL_E_CONNECTION_FAILED. A loop without
 * credentials runs no handshake (the runtime's own tests); the servers and the cluster client
 * always set them.
 * ------------------------------------------------------------------------------------------ */

/* Limits of a loop's accepted connections (rl__loop_set_limits); 0 in a field means its default. */
typedef struct {
    uint32_t max_conns;            /* accepted connections open at once (handshaking or not), over all
                                      the loop's listeners; one more is closed at once. Default 1,024 */
    uint32_t max_handshakes;       /* accepted connections still in the handshake; one more makes the
                                      oldest of them close. Default 64 */
    uint32_t handshake_timeout_ms; /* an accepted connection not through the handshake by then is
                                      closed. Default 5,000 */
    uint64_t max_queued_bytes;     /* an accepted connection whose send queue holds more than this is
                                      not read (no new requests) until the queue is below half of
                                      it. Default 128 MiB (two largest frames) */
} rl__net_limits;

#define RL_NET_DEFAULT_MAX_CONNS 1024u
#define RL_NET_DEFAULT_MAX_HANDSHAKES 64u
#define RL_NET_DEFAULT_HANDSHAKE_TIMEOUT_MS 5000u
#define RL_NET_DEFAULT_MAX_QUEUED_BYTES (128ull << 20)

/* Counters of the handshake and the limits (rl__loop_get_net_stats). */
typedef struct {
    uint64_t accepted_now;         /* accepted connections open now (handshaking included) */
    uint64_t handshaking_now;      /* of them, still in the handshake */
    uint64_t handshakes_ok;        /* handshakes completed (accepted and connected) */
    uint64_t handshakes_failed;    /* refused: a bad proof, a wrong first frame, a frame too long */
    uint64_t handshakes_timed_out; /* accepted connections closed by the handshake timeout */
    uint64_t handshakes_evicted;   /* closed to make room under max_handshakes */
    uint64_t conns_refused;        /* accepted and closed at once: max_conns reached */
    uint64_t reads_paused;         /* times a connection stopped being read (max_queued_bytes) */
} rl__net_stats;

/* rl__loop_set_auth — give the loop its process's credentials: from now on every connection it
 * accepts or makes runs the handshake (see above). auth is copied. Call before the loop's first
 * rl__listen / rl__connect. Returns RL_OK, RL_E_INVALID_ARGUMENT (NULL) or
 * RL_E_CLIENT_INVALID_OPERATION (not loop context). [loop] */
int rl__loop_set_auth(rl__loop *loop, const rl__net_auth *auth);

/* rl__loop_set_limits — set the limits of the loop's accepted connections (0 fields: defaults).
 * Applies to connections accepted from now on (max_conns, max_handshakes, the timeout) and to
 * every accepted connection's next read (max_queued_bytes). Returns RL_OK or
 * RL_E_CLIENT_INVALID_OPERATION. [loop] */
int rl__loop_set_limits(rl__loop *loop, const rl__net_limits *limits);

/* rl__loop_get_limits — the limits in force (defaults filled in). [any] */
void rl__loop_get_limits(rl__loop *loop, rl__net_limits *out);

/* rl__loop_get_net_stats — copy the handshake and limit counters (each read atomically). [any] */
void rl__loop_get_net_stats(rl__loop *loop, rl__net_stats *out);

/* rl__net_status_json — append ',"net":{…}' to j: the limits in force and rl__net_stats, for the
 * servers' STATUS (docs/protocol.md §9). [any] */
void rl__net_status_json(rl_buf *j, rl__loop *loop);

/* ---------------------------------------------------------------------------------------------
 * Listening and connecting (IPv4 loopback only: 127.0.0.0/8)
 * ------------------------------------------------------------------------------------------ */

/* rl__listen — bind a TCP listener to ip:port (port 0: an ephemeral port) and accept on the loop.
 * [in] ip         dotted IPv4 text inside 127.0.0.0/8 ("127.0.0.1"); anything else — 0.0.0.0,
 *                 10.0.0.1, names, IPv6 — is RL_E_INVALID_ARGUMENT (servers bind loopback only).
 * [in] on_accept  called on the loop thread for each accepted connection (see rl_accept_fn).
 * [out] out       the listener (rl__listener_close); its port is known on return.
 * Binding happens in this call (errors: RL_E_ADDRESS_IN_USE, RL_E_BIND_FAILED, RL_E_OUT_OF_MEMORY,
 * RL_E_INVALID_ARGUMENT); accepting starts in the loop's next pass (posted when called from
 * another thread). SO_REUSEADDR is set; accepted sockets get TCP_NODELAY. [any] */
int rl__listen(rl__loop *loop, const char *ip, uint16_t port, rl_accept_fn on_accept, void *ud, rl__listener **out,
               rl__errdetail *detail);

/* rl__listener_port — the bound port (host order). [any] */
uint16_t rl__listener_port(const rl__listener *listener);

/* rl__listener_close — stop accepting and free the listener (NULL is a no-op). On the loop thread
 * it closes at once and on_accept is never called after this returns; from any other thread
 * (also the owner's before rl__loop_run) the close is posted: the listener stops in the loop's
 * next pass (or in rl__loop_free). Either way the pointer must not be used again. Connections it
 * accepted are unaffected. [any] */
void rl__listener_close(rl__listener *listener);

/* rl__connect — non-blocking TCP connect to ip:port (loopback only, as rl__listen).
 * [in] timeout_ms  > 0: the connect fails with RL_E_TIMED_OUT if not established by then.
 * [in] on_connect  called exactly once on the loop thread, never inside this call: RL_OK with a
 *                  connection (TCP_NODELAY set), RL_E_CONNECTION_FAILED (refused, unreachable),
 *                  RL_E_TIMED_OUT, or RL_E_OPERATION_CANCELLED (loop freed first).
 * Returns RL_OK, or RL_E_INVALID_ARGUMENT / RL_E_OUT_OF_MEMORY / RL_E_CONNECTION_FAILED (no socket
 * could be made), in which case on_connect is never called. [any] */
int rl__connect(rl__loop *loop, const char *ip, uint16_t port, int timeout_ms, rl_connect_fn on_connect, void *ud,
                rl__errdetail *detail);

/* ---------------------------------------------------------------------------------------------
 * Connections
 * ------------------------------------------------------------------------------------------ */

/* rl__conn_set_callbacks — set (or replace) the frame and close callbacks and their ud. Frames
 * that arrive while on_frame is NULL are dropped. Usually called in on_accept / on_connect.
 * Returns RL_OK, or RL_E_CLIENT_INVALID_OPERATION outside loop context. [loop] */
int rl__conn_set_callbacks(rl__conn *conn, rl_frame_fn on_frame, rl_close_fn on_close, void *ud);

/* rl__conn_send — send one frame: a header (payload_len = len, type, flags, id) and len bytes of
 * payload (copied: the caller may reuse its buffer at once; payload may be NULL when len == 0).
 * With no delay configured and nothing queued, the calling thread writes to the socket itself
 * under the connection's send lock (no wake-up of the loop thread); what the socket does not take
 * is queued and the loop flushes it (EPOLLOUT). With a delay, the frame is queued with a release
 * time (rl__conn_set_delay) and the loop writes it then. Frames of a connection are never
 * interleaved or reordered: they go out in the order the send calls took the send lock.
 * The send queue is unbounded; its size is in rl__conn_stats (queued_frames, queued_bytes) and the
 * caller applies backpressure (e.g. bound its outstanding requests).
 * [in] flags  bits of RL_FRAME_KNOWN_FLAGS only; [in] len <= RL_NET_MAX_PAYLOAD.
 * Returns RL_OK (written or queued; a socket error found later closes the connection),
 * RL_E_CONNECTION_FAILED (the connection is closed or closing, or the write failed — the
 * connection is then being closed), RL_E_INVALID_ARGUMENT, RL_E_OUT_OF_MEMORY. [any] */
int rl__conn_send(rl__conn *conn, uint16_t type, uint16_t flags, uint64_t id, const void *payload, size_t len);

/* rl__conn_send_queued — as rl__conn_send, but the calling thread never writes to the socket: the
 * frame joins the send queue, and the loop thread writes the queue in its next pass (on the loop
 * thread: after the callbacks of the current pass), as many frames per sendmsg as are queued. For
 * pipelining senders: a burst of frames costs one wake-up of the loop thread and a few writes
 * instead of one write each (send the first frame of a burst with rl__conn_send: the direct write
 * has the lowest latency). Frames keep the order of the send calls, mixed with rl__conn_send
 * (a direct write happens only while the queue is empty). Returns as rl__conn_send. [any] */
int rl__conn_send_queued(rl__conn *conn, uint16_t type, uint16_t flags, uint64_t id, const void *payload, size_t len);

/* rl__conn_send2 — one frame whose payload is head then body, gathered without an intermediate
 * buffer (a hand-coded message: its fixed fields, then the key or value they describe); queued 0
 * sends as rl__conn_send, 1 as rl__conn_send_queued. head_len + body_len <= RL_NET_MAX_PAYLOAD;
 * either part may be NULL when its length is 0. Returns as rl__conn_send. [any] */
int rl__conn_send2(rl__conn *conn, uint16_t type, uint16_t flags, uint64_t id, const void *head, size_t head_len,
                   const void *body, size_t body_len, int queued);

/* rl__conn_send_buf — as rl__conn_send, but takes payload's bytes (no copy when they must be
 * queued): on return, in every case, *payload is empty and re-initialised (rl__buf_init state) and
 * the bytes are the connection's (freed when written or when the connection closes). A buffer
 * with a sticky allocation error is RL_E_OUT_OF_MEMORY. [any] */
int rl__conn_send_buf(rl__conn *conn, uint16_t type, uint16_t flags, uint64_t id, rl_buf *payload);

/* rl__conn_set_delay — inject a one-way delay on this connection's sends, like `tc netem delay`
 * on the sending side: every frame sent after this call is released to the socket no earlier than
 * (time of its send call + delay_us + a uniform sample in [0, jitter_us]), and never before the
 * frame sent before it (release = max(that, previous release)), so frames are never reordered.
 * The loop releases delayed frames with its precise timers and records, per frame, how late it
 * actually went out (rl__conn_get_lateness). Frames already queued keep their release times.
 * 0/0 returns to direct sends once the queue has drained. The jitter sequence is a PRNG seeded
 * with seed (deterministic per connection).
 * Returns RL_OK, RL_E_INVALID_ARGUMENT (delay_us or jitter_us above 10,000,000), or
 * RL_E_CONNECTION_FAILED (closed). [any] */
int rl__conn_set_delay(rl__conn *conn, uint32_t delay_us, uint32_t jitter_us, uint64_t seed);

enum {
    /* rl__conn_close flag: first write what is queued (delays respected), then close; new sends
     * are refused at once and received frames are dropped. If the queue has not drained within
     * RL_CONN_FLUSH_TIMEOUT_MS, the connection closes anyway with RL_E_TIMED_OUT. */
    RL_CONN_CLOSE_FLUSH = 0x1,
};
#define RL_CONN_FLUSH_TIMEOUT_MS 1000

/* rl__conn_close — close the connection (NULL and an already closed or closing connection are
 * no-ops). Sends fail at once with RL_E_CONNECTION_FAILED; unless RL_CONN_CLOSE_FLUSH, queued
 * frames are dropped. From the loop thread, no callback of conn runs after this returns except
 * on_close (err RL_OK), which runs in the same pass, after the current callback returns; from
 * another thread the close is posted and on_frame may still be running or be called until the
 * loop takes it. Does not release the caller's reference. [any] */
void rl__conn_close(rl__conn *conn, unsigned flags);

/* rl__conn_retain / rl__conn_release — take / drop a reference. The last release frees the
 * connection (it must be closed by then, which holds automatically: an open connection is
 * referenced by its loop). NULL is a no-op for release. [any] */
void rl__conn_retain(rl__conn *conn);
void rl__conn_release(rl__conn *conn);

/* rl__conn_take_payload — inside on_frame (loop thread), for the frame being handed to it: its
 * payload, now the caller's, when the connection read it into a buffer of its own (payloads of
 * 64 KiB to 1 MiB that did not arrive with their header: reader.h invariant 6) — memory from
 * rl__arena_block_alloc, to free with rl__arena_block_free or give to an arena (rl__arena_adopt);
 * it is the very bytes on_frame was given. NULL otherwise: the payload stays the connection's,
 * valid only during on_frame. */
uint8_t *rl__conn_take_payload(rl__conn *conn);

/* rl__conn_peer / rl__conn_local — "127.0.0.1:PORT" of the remote / local end. The string lives
 * as long as the connection object. [any] */
const char *rl__conn_peer(const rl__conn *conn);
const char *rl__conn_local(const rl__conn *conn);

/* rl__conn_auth_class — the class the handshake established (rl__auth_class): for an accepted
 * connection the class its peer proved, for a connect the class this side proved;
 * RL_AUTH_NONE on a loop without credentials. [any] */
int rl__conn_auth_class(const rl__conn *conn);

/* rl__conn_is_open — 1 until a close is requested or happens, else 0. [any] */
int rl__conn_is_open(const rl__conn *conn);

/* rl__conn_close_reason — why the connection closed ("peer closed the connection", "payload length
 * 67108865 exceeds the maximum 67108864", …), "" while open. Stable once on_close has been
 * called; lives as long as the connection object. [any after on_close] */
const char *rl__conn_close_reason(const rl__conn *conn);

typedef struct {
    uint64_t frames_sent;      /* frames completely written to the socket */
    uint64_t bytes_sent;       /* their bytes, headers included */
    uint64_t frames_direct;    /* of frames_sent, written whole by the sending thread itself */
    uint64_t frames_received;  /* frames delivered (or dropped for want of on_frame) */
    uint64_t bytes_received;   /* bytes read from the socket */
    uint64_t queued_frames;    /* frames in the send queue now (unwritten or partly written) */
    uint64_t queued_bytes;     /* their unwritten bytes */
    uint64_t queued_bytes_max; /* high-water mark of queued_bytes */
    uint64_t rx_buffer_cap;    /* bytes allocated for the receive buffer now */
    uint32_t delay_us;         /* the current delay setting */
    uint32_t jitter_us;
    uint64_t delayed_frames; /* frames sent with a delay (the lateness samples) */
    uint64_t late_min_ns;    /* lateness of delayed frames: first byte written − release time */
    uint64_t late_p50_ns;
    uint64_t late_p99_ns;
    uint64_t late_max_ns;
} rl__conn_stats;

/* rl__conn_get_stats — copy the connection's counters (send side under the send lock; receive
 * counters read atomically). Valid at any time, also after close. [any] */
void rl__conn_get_stats(rl__conn *conn, rl__conn_stats *out);

enum { RL_STATS_RESET = 0x1 };

/* rl__conn_get_lateness — copy the histogram of delayed frames' lateness (first byte written −
 * release time) to *out; with RL_STATS_RESET, empty it afterwards (e.g. after a delay change).
 * [any] */
void rl__conn_get_lateness(rl__conn *conn, rl__lat_hist *out, unsigned flags);

#endif
