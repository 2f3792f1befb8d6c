/* loop_int.h (internal to src/net/) — what loop.c, conn.c and sock.c share: the loop's layout,
 * the epoll registration handles, intrusive posts, and the socket helpers. Nothing outside
 * src/net/ includes this (tests may, to look at invariants).
 */
#ifndef RL_NET_LOOP_INT_H
#define RL_NET_LOOP_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "net/loop.h"

/* What an epoll event's data.ptr points at: the first member of every registered object. */
enum { RL__IO_WAKE = 1, RL__IO_TIMERFD, RL__IO_LISTENER, RL__IO_CONN };
typedef struct {
    int kind; /* RL__IO_* */
} rl__io;

/* A queued post. Nodes from rl__loop_post are heap-allocated and freed after running; internal
 * users embed a node in their object (rl__loop_post_node) and guard its reuse themselves. */
typedef struct rl__post_node {
    struct rl__post_node *next;
    rl_loop_fn fn;
    void *ud;
    int is_heap; /* 1: allocated by rl__loop_post */
} rl__post_node;

/* A timer slot. Slots are reused; gen changes at every reuse so a stale id never matches. */
typedef struct {
    uint64_t deadline; /* ns, monotonic */
    uint64_t seq;      /* add order, the tie-break */
    rl_loop_fn cb;
    void *ud;
    uint32_t gen;       /* generation: id = gen << 32 | (slot + 1) */
    uint32_t heap_pos;  /* index in heap[], or UINT32_MAX when the slot is free */
    uint32_t next_free; /* free list link (slot index + 1; 0 ends it) */
} rl__timer_slot;

#define RL__LATE_RING 128 /* wake-up lateness samples kept for the margin */

struct rl__loop {
    int epfd;        /* the epoll instance */
    int wakefd;      /* eventfd written by posts and stop */
    int timerfd;     /* -1 unless sleeping through the timerfd fallback */
    rl__io wake_io;  /* epoll handle of wakefd */
    rl__io timer_io; /* epoll handle of timerfd */
    int use_pwait2;  /* 1: epoll_pwait2 is available and used */

    pthread_mutex_t post_lock; /* guards post_head/post_tail */
    rl__post_node *post_head;  /* FIFO of posts */
    rl__post_node *post_tail;
    atomic_int has_posts;      /* 1 when post_head may be non-NULL (skip the lock when 0) */
    atomic_int waiting;        /* 1 while the loop thread waits for events (wait_events):
                                    only then does a post need the eventfd (loop.c invariant 2) */
    atomic_int stop_requested; /* counts stops not yet consumed by rl__loop_run */
    atomic_int running;        /* 1 while a thread is inside rl__loop_run */
    atomic_int closing;        /* 1 while rl__loop_free closes everything */

    /* Timers (loop context only): a binary min-heap of slot indices ordered by (deadline, seq). */
    rl__timer_slot *slots;
    uint32_t nslots;    /* slots allocated */
    uint32_t free_slot; /* head of the free list (slot index + 1; 0: empty) */
    uint32_t *heap;
    uint32_t heap_len, heap_cap;
    uint64_t timer_seq;

    /* Timer precision (loop context only): see "Timer precision" in loop.c. */
    uint64_t margin_ns;                    /* sleep until deadline - margin_ns, then spin */
    uint64_t margin_min_ns, margin_max_ns; /* its bounds (rl__loop_set_margin_bounds) */
    uint64_t late_ring[RL__LATE_RING];     /* recent wake-up lateness samples (ns) */
    uint32_t late_n;                       /* samples in the ring (<= RL__LATE_RING) */
    uint32_t late_pos;                     /* next slot to overwrite */
    uint32_t late_since_update;            /* samples since margin_ns was recomputed */

    /* Registries (loop context only). */
    rl__conn *conns;              /* every registered connection (doubly linked, conn.c) */
    rl__listener *listeners;      /* every registered listener (doubly linked, conn.c) */
    rl__conn *pending_close;      /* closes requested in loop context, done at the next safe point */
    rl__conn *zombies;            /* closed this pass; the loop's reference is dropped at pass end */
    rl__listener *dead_listeners; /* closed this pass; freed at pass end */

    /* The handshake and limits (conn.c). auth and limits are set in loop context before use. */
    rl__net_auth auth;
    int has_auth;              /* 1: every connection runs the handshake */
    rl__net_limits limits;     /* defaults filled in */
    uint32_t n_accepted;       /* accepted connections not yet closed (loop context) */
    uint32_t n_handshakes;     /* of them, in the handshake (loop context) */
    uint64_t refuse_logged_ns; /* when a refusal at max_conns was last logged (one line a second) */
    atomic_uint_fast64_t st_accepted_now, st_handshaking_now, st_hs_ok, st_hs_failed, st_hs_timed_out, st_hs_evicted,
        st_refused, st_reads_paused;

    /* Statistics: written by the loop thread, read by anyone. */
    atomic_uint_fast64_t st_iterations, st_sleeps, st_timers_fired, st_posts_run, st_spin_ns;
    atomic_uint_fast64_t st_margin_ns, st_wake_p50_ns, st_wake_p99_ns;
    pthread_mutex_t stats_lock; /* guards timer_late */
    rl__lat_hist timer_late;
};

/* The loop the calling thread is running (inside rl__loop_run or rl__loop_free), else NULL. */
extern _Thread_local rl__loop *rl__tls_loop;

/* 1 if the caller may use the loop's loop-context structures: it is the loop thread, or no thread
 * runs the loop (the owner's responsibility, see loop.h). */
static inline int rl__loop_context(rl__loop *loop) {
    return rl__tls_loop == loop || !atomic_load_explicit(&loop->running, memory_order_acquire);
}

/* Queue an embedded post node (fn/ud set by the caller; the node must not be queued already).
 * Never fails. [any] */
void rl__loop_post_node(rl__loop *loop, rl__post_node *node);

/* epoll_ctl on loop's instance with data.ptr = io. Returns 0 or errno. [any] */
int rl__loop_ctl(rl__loop *loop, int op, int fd, uint32_t events, rl__io *io);

/* conn.c, called by loop.c on the loop thread. */
void rl__conn_on_event(rl__conn *conn, uint32_t events);
void rl__listener_on_event(rl__listener *listener, uint32_t events);
/* Close everything requested since the last safe point (on_close callbacks run here). */
void rl__net_process_pending(rl__loop *loop);
/* Drop the loop's references to connections and listeners closed this pass. */
void rl__net_release_zombies(rl__loop *loop);
/* The limits of given with every 0 field replaced by its default (given NULL: all defaults). */
void rl__net_fill_limits(rl__net_limits *out, const rl__net_limits *given);
/* rl__loop_free: close every listener and connection with RL_E_OPERATION_CANCELLED. */
void rl__net_close_all(rl__loop *loop);
/* 1 if the loop still has registered connections or listeners. */
int rl__net_has_objects(rl__loop *loop);

/* sock.c: socket helpers (the one place for socket #ifdefs). */
/* Parse ip (dotted IPv4 inside 127.0.0.0/8) and port into *out; RL_E_INVALID_ARGUMENT with the
 * reason in d otherwise. In these helpers d is NULL or where a failure's detail goes. */
int rl__net_loopback_addr(const char *ip, uint16_t port, struct sockaddr_in *out, rl__errdetail *d);
/* "A.B.C.D:PORT" into buf (at least 24 bytes). */
void rl__net_format_addr(const struct sockaddr_in *sa, char *buf, size_t cap);
/* Map an errno of a socket call to an error code (dflt for anything without a better match). */
int rl__net_map_errno(int e, int dflt);
/* A listening socket bound to *sa (non-blocking, close-on-exec, SO_REUSEADDR); the bound port
 * in *out_port. Returns RL_OK, RL_E_ADDRESS_IN_USE, RL_E_BIND_FAILED or RL_E_OUT_OF_MEMORY. */
int rl__net_listen_socket(const struct sockaddr_in *sa, int *out_fd, uint16_t *out_port, rl__errdetail *d);
/* Start a non-blocking connect to *sa. *out_fd is the socket (TCP_NODELAY set) and *out_state
 * 0: connected at once, 1: in progress, or an error code (refused, …) with the socket still open.
 * Returns RL_OK, or an error when no socket could be made (then no fd). */
int rl__net_connect_socket(const struct sockaddr_in *sa, int *out_fd, int *out_state, rl__errdetail *d);
/* Accept one connection: RL_OK with *out_fd (non-blocking, TCP_NODELAY), RL_E_NOT_FOUND when none
 * is waiting (or a transient error), RL_E_OPERATION_FAILED on fd exhaustion (*out_errno set). */
int rl__net_accept(int lfd, int *out_fd, int *out_errno);
/* Local and peer addresses of a connected socket as "A.B.C.D:PORT" (empty on failure). */
void rl__net_sock_names(int fd, char *local, char *peer, size_t cap);

#endif
