/* loop.c — the event loop: epoll, thread-safe posts, and microsecond-precise timers (loop.h).
 *
 * WHY NOT LIBUV. libuv's timers have millisecond resolution (uv_timer_start takes ms and the loop
 * rounds its timeout to ms), and injected network delay must be precise to tens of microseconds
 * (docs/design.md §8.1). So the loop is our own; it is small: one epoll instance, one
 * eventfd for posts and stop, a binary heap of timers.
 *
 * ONE PASS of rl__loop_run:
 *
 *     ┌─► run posts ─► pending closes ─► fire due timers ─► pending closes ─► drop zombies
 *     │                                                                      │ stop? → return
 *     │      ┌───────────── no timer ─────────────► epoll_wait(∞)            │
 *     │      │      next deadline − now > margin ─► sleep until deadline − margin
 *     │      │                                      (epoll_pwait2 ns timeout, or timerfd)
 *     │      │      otherwise ────────────────────► spin until the deadline, polling epoll
 *     │      │                                      with a zero timeout every 4 µs
 *     └── dispatch events (each followed by pending closes) ◄────────────────┘
 *
 * TIMER PRECISION. Measured on these machines, a 250 µs sleep in epoll/timerfd/clock_nanosleep
 * wakes 50–90 µs late at p50 (timer slack plus the scheduler's wake-up); PR_SET_TIMERSLACK = 1 ns
 * (set while the loop runs) removes the slack but not the wake-up. So the loop sleeps until
 * (deadline − margin), then spins on CLOCK_MONOTONIC with a pause instruction until the deadline,
 * polling the sockets (and the post eventfd) with epoll_wait(…, 0) every RL__SPIN_POLL_NS so
 * incoming frames are not starved. A timer therefore fires 0–2 µs after its deadline whenever the
 * wake-up was less late than the margin, and never early (fire time >= deadline, checked on the
 * monotonic clock before the callback).
 *   The margin adapts: every timed sleep that ends by timeout yields a sample (actual wake time −
 * requested wake time); the last RL__LATE_RING (128) samples are kept, and every 8 samples the
 * margin becomes p99(samples) + max(p99 / 4, 10 µs), clamped to [RL__MARGIN_MIN, RL__MARGIN_MAX]
 * = [20, 200] µs by default (100 µs until 8 samples exist; rl__loop_set_margin_bounds changes the
 * bounds, e.g. max 0 for a loop that must never spin). The pad above p99 is there because a margin of
 * exactly p99 would, by definition, leave 1% of timers late. The clamp bounds the CPU a timer may
 * burn spinning (≤ 200 µs per deadline) on a noisy machine; wake-ups later than the margin make
 * that timer late by the difference (preemption while spinning, too).
 *   epoll_pwait2 (Linux 5.11) takes a nanosecond timeout; the loop checks for it at creation (it
 * may be missing or blocked by seccomp: ENOSYS/EPERM) and otherwise arms a CLOCK_MONOTONIC timerfd
 * with the absolute wake time and blocks in epoll_wait.
 *
 * INVARIANTS.
 *   1. Loop-context structures (timer heap, registries, pending lists, margin) are touched only by
 *      the thread inside rl__loop_run / rl__loop_free, or the owner while no thread runs it.
 *   2. post_head..post_tail is a FIFO under post_lock; has_posts is 1 whenever it is non-empty; the
 *      eventfd is written whenever a post makes it non-empty while the loop thread waits for events
 *      (`waiting`), so a sleeping loop always wakes; a running loop looks at has_posts before it
 *      waits again (both sides store their flag, then load the other's, sequentially consistent),
 *      so a burst of posts to a busy loop costs no system call.
 *   3. heap[0..heap_len) is a min-heap of live slot indices by (deadline, seq); slot.heap_pos is
 *      its index; free slots have heap_pos == UINT32_MAX and sit on the free list.
 *   4. A timer id is gen << 32 | (slot + 1); gen changes whenever a slot is freed, so a stale id
 *      never cancels a newer timer.
 *   5. Objects closed during a pass stay allocated until the pass ends (zombies), so an epoll event
 *      of the same batch that names one is recognised and skipped, never a use after free.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/sync.h"
#include "net/loop_int.h"
#include "reclayer/error.h"

#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441 /* the same number on every architecture since Linux 5.11 */
#endif

#define RL__MAX_EVENTS 64
#define RL__SPIN_POLL_NS 4000u     /* poll the sockets this often while spinning */
#define RL__MIN_SLEEP_NS 3000u     /* shorter sleeps are spun */
#define RL__MARGIN_INIT_NS 100000u /* margin until enough samples exist */
#define RL__MARGIN_MIN_NS 20000u
#define RL__MARGIN_MAX_NS 200000u
#define RL__MARGIN_PAD_NS 10000u /* at least this much above p99 */
#define RL__MARGIN_EVERY 8u      /* recompute the margin every this many samples */

_Thread_local rl__loop *rl__tls_loop;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

static void stat_add(atomic_uint_fast64_t *s, uint64_t v) { atomic_fetch_add_explicit(s, v, memory_order_relaxed); }
static void stat_set(atomic_uint_fast64_t *s, uint64_t v) { atomic_store_explicit(s, v, memory_order_relaxed); }
static uint64_t stat_get(atomic_uint_fast64_t *s) { return atomic_load_explicit(s, memory_order_relaxed); }

/* epoll_pwait2 through syscall(2), so that an old C library does not matter. */
static int pwait2(int epfd, struct epoll_event *ev, int max, uint64_t timeout_ns) {
    struct {
        int64_t tv_sec;
        int64_t tv_nsec;
    } ts = {(int64_t)(timeout_ns / 1000000000u), (int64_t)(timeout_ns % 1000000000u)};
    return (int)syscall(SYS_epoll_pwait2, epfd, ev, max, &ts, NULL, (size_t)0);
}

int rl__loop_ctl(rl__loop *loop, int op, int fd, uint32_t events, rl__io *io) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.ptr = io;
    return epoll_ctl(loop->epfd, op, fd, &ev) == 0 ? 0 : errno;
}

/* ============================================================================================
 * Creation and destruction
 * ========================================================================================== */

int rl__loop_new(unsigned flags, rl__loop **out, rl__errdetail *d) {
    if (!out || (flags & ~(unsigned)RL_LOOP_KNOWN_FLAGS)) {
        rl__errdetail_set(d, "rl__loop_new: unknown flags 0x%x or no out pointer", flags);
        return RL_E_INVALID_ARGUMENT;
    }
    int rc;
    rl__loop *loop = rl__calloc(1, sizeof *loop);
    if (!loop) return RL_E_OUT_OF_MEMORY;
    loop->epfd = loop->wakefd = loop->timerfd = -1;
    rl__net_fill_limits(&loop->limits, NULL);
    int locks = 0;
    rl__mutex_init_adaptive(&loop->post_lock);
    locks = 1;
    if (pthread_mutex_init(&loop->stats_lock, NULL) != 0) {
        rc = RL_E_OPERATION_FAILED;
        goto fail;
    }
    locks = 2;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) {
        rl__errdetail_set(d, "epoll_create1: %s", strerror(errno));
        rc = rl__net_map_errno(errno, RL_E_OPERATION_FAILED);
        goto fail;
    }
    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->wakefd < 0) {
        rl__errdetail_set(d, "eventfd: %s", strerror(errno));
        rc = rl__net_map_errno(errno, RL_E_OPERATION_FAILED);
        goto fail;
    }
    loop->wake_io.kind = RL__IO_WAKE;
    loop->timer_io.kind = RL__IO_TIMERFD;
    int e = rl__loop_ctl(loop, EPOLL_CTL_ADD, loop->wakefd, EPOLLIN, &loop->wake_io);
    if (e) {
        rl__errdetail_set(d, "epoll_ctl(eventfd): %s", strerror(e));
        rc = rl__net_map_errno(e, RL_E_OPERATION_FAILED);
        goto fail;
    }
    if (!(flags & RL_LOOP_FORCE_TIMERFD)) {
        struct epoll_event ev;
        loop->use_pwait2 = pwait2(loop->epfd, &ev, 1, 0) >= 0;
    }
    if (!loop->use_pwait2) {
        loop->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (loop->timerfd < 0) {
            rl__errdetail_set(d, "timerfd_create: %s", strerror(errno));
            rc = rl__net_map_errno(errno, RL_E_OPERATION_FAILED);
            goto fail;
        }
        e = rl__loop_ctl(loop, EPOLL_CTL_ADD, loop->timerfd, EPOLLIN, &loop->timer_io);
        if (e) {
            rl__errdetail_set(d, "epoll_ctl(timerfd): %s", strerror(e));
            rc = rl__net_map_errno(e, RL_E_OPERATION_FAILED);
            goto fail;
        }
    }
    loop->margin_min_ns = RL__MARGIN_MIN_NS;
    loop->margin_max_ns = RL__MARGIN_MAX_NS;
    loop->margin_ns = RL__MARGIN_INIT_NS;
    stat_set(&loop->st_margin_ns, loop->margin_ns);
    *out = loop;
    return RL_OK;
fail:
    if (loop->timerfd >= 0) close(loop->timerfd);
    if (loop->wakefd >= 0) close(loop->wakefd);
    if (loop->epfd >= 0) close(loop->epfd);
    if (locks >= 2) pthread_mutex_destroy(&loop->stats_lock);
    if (locks >= 1) pthread_mutex_destroy(&loop->post_lock);
    rl__free(loop);
    return rc;
}

static void run_posts(rl__loop *loop);

void rl__loop_free(rl__loop *loop) {
    if (!loop) return;
    rl__loop *prev = rl__tls_loop;
    rl__tls_loop = loop;
    atomic_store(&loop->closing, 1);
    /* Posts first (their ud may be released), then everything open; repeat while callbacks
     * create more work. */
    for (;;) {
        run_posts(loop);
        rl__net_close_all(loop);
        rl__net_process_pending(loop);
        rl__net_release_zombies(loop);
        if (!atomic_load(&loop->has_posts) && !rl__net_has_objects(loop)) break;
    }
    rl__free(loop->slots);
    rl__free(loop->heap);
    if (loop->timerfd >= 0) close(loop->timerfd);
    close(loop->wakefd);
    close(loop->epfd);
    pthread_mutex_destroy(&loop->stats_lock);
    pthread_mutex_destroy(&loop->post_lock);
    rl__free(loop);
    rl__tls_loop = prev;
}

int rl__loop_in_loop_thread(const rl__loop *loop) { return loop && rl__tls_loop == loop; }

int rl__loop_is_closing(const rl__loop *loop) { return atomic_load(&((rl__loop *)loop)->closing); }

/* ============================================================================================
 * Posts
 * ========================================================================================== */

/* Make a sleeping loop return from epoll (eventfd write). [any] */
static void wake(rl__loop *loop) {
    uint64_t one = 1;
    ssize_t r;
    do r = write(loop->wakefd, &one, sizeof one);
    while (r < 0 && errno == EINTR);
    /* EAGAIN: the counter is saturated, so the loop is awake anyway. */
}

void rl__loop_post_node(rl__loop *loop, rl__post_node *node) {
    node->next = NULL;
    pthread_mutex_lock(&loop->post_lock);
    int was_empty = loop->post_head == NULL;
    if (loop->post_tail) loop->post_tail->next = node;
    else loop->post_head = node;
    loop->post_tail = node;
    atomic_store(&loop->has_posts, 1); /* seq_cst: before the load of waiting (invariant 2) */
    pthread_mutex_unlock(&loop->post_lock);
    if (was_empty && atomic_load(&loop->waiting)) wake(loop);
}

int rl__loop_post(rl__loop *loop, rl_loop_fn fn, void *ud) {
    if (!loop || !fn) return RL_E_INVALID_ARGUMENT;
    rl__post_node *n = rl__malloc(sizeof *n);
    if (!n) return RL_E_OUT_OF_MEMORY;
    n->fn = fn;
    n->ud = ud;
    n->is_heap = 1;
    rl__loop_post_node(loop, n);
    return RL_OK;
}

/* Run every post queued now (posts made by them run in a later pass). */
static void run_posts(rl__loop *loop) {
    if (!atomic_load_explicit(&loop->has_posts, memory_order_acquire)) return;
    pthread_mutex_lock(&loop->post_lock);
    rl__post_node *n = loop->post_head;
    loop->post_head = loop->post_tail = NULL;
    atomic_store_explicit(&loop->has_posts, 0, memory_order_relaxed);
    pthread_mutex_unlock(&loop->post_lock);
    uint64_t count = 0;
    while (n) {
        rl__post_node *next = n->next; /* read first: fn may re-queue an embedded node */
        rl_loop_fn fn = n->fn;
        void *ud = n->ud;
        if (n->is_heap) rl__free(n);
        fn(loop, ud);
        count++;
        n = next;
    }
    stat_add(&loop->st_posts_run, count);
}

void rl__loop_stop(rl__loop *loop) {
    if (!loop) return;
    atomic_fetch_add(&loop->stop_requested, 1);
    wake(loop);
}

/* ============================================================================================
 * Timers
 * ========================================================================================== */

/* Heap order: (deadline, seq). */
static int slot_less(const rl__loop *loop, uint32_t a, uint32_t b) {
    const rl__timer_slot *x = &loop->slots[a], *y = &loop->slots[b];
    return x->deadline < y->deadline || (x->deadline == y->deadline && x->seq < y->seq);
}

static void heap_set(rl__loop *loop, uint32_t pos, uint32_t slot) {
    loop->heap[pos] = slot;
    loop->slots[slot].heap_pos = pos;
}

static void sift_up(rl__loop *loop, uint32_t pos) {
    uint32_t slot = loop->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!slot_less(loop, slot, loop->heap[parent])) break;
        heap_set(loop, pos, loop->heap[parent]);
        pos = parent;
    }
    heap_set(loop, pos, slot);
}

static void sift_down(rl__loop *loop, uint32_t pos) {
    uint32_t slot = loop->heap[pos], n = loop->heap_len;
    for (;;) {
        uint32_t child = 2 * pos + 1;
        if (child >= n) break;
        if (child + 1 < n && slot_less(loop, loop->heap[child + 1], loop->heap[child])) child++;
        if (!slot_less(loop, loop->heap[child], slot)) break;
        heap_set(loop, pos, loop->heap[child]);
        pos = child;
    }
    heap_set(loop, pos, slot);
}

/* Remove the heap entry at pos and put its slot back on the free list (gen changes). */
static void heap_remove(rl__loop *loop, uint32_t pos) {
    uint32_t slot = loop->heap[pos];
    uint32_t last = loop->heap[--loop->heap_len];
    if (pos < loop->heap_len) {
        heap_set(loop, pos, last);
        if (pos > 0 && slot_less(loop, last, loop->heap[(pos - 1) / 2])) sift_up(loop, pos);
        else sift_down(loop, pos);
    }
    rl__timer_slot *s = &loop->slots[slot];
    s->heap_pos = UINT32_MAX;
    s->gen++;
    s->cb = NULL;
    s->ud = NULL;
    s->next_free = loop->free_slot;
    loop->free_slot = slot + 1;
}

int rl__loop_timer_add(rl__loop *loop, uint64_t deadline_ns, rl_loop_fn cb, void *ud, uint64_t *out_id) {
    if (!loop || !cb) return RL_E_INVALID_ARGUMENT;
    if (!rl__loop_context(loop)) return RL_E_CLIENT_INVALID_OPERATION;
    if (loop->free_slot == 0) {
        uint32_t n = loop->nslots ? loop->nslots * 2 : 64;
        rl__timer_slot *s = rl__realloc(loop->slots, (size_t)n * sizeof *s);
        if (!s) return RL_E_OUT_OF_MEMORY;
        loop->slots = s;
        for (uint32_t i = n; i-- > loop->nslots;) {
            s[i].heap_pos = UINT32_MAX;
            s[i].gen = 1;
            s[i].cb = NULL;
            s[i].ud = NULL;
            s[i].next_free = loop->free_slot;
            loop->free_slot = i + 1;
        }
        loop->nslots = n;
    }
    if (loop->heap_len == loop->heap_cap) {
        uint32_t n = loop->heap_cap ? loop->heap_cap * 2 : 64;
        uint32_t *h = rl__realloc(loop->heap, (size_t)n * sizeof *h);
        if (!h) return RL_E_OUT_OF_MEMORY;
        loop->heap = h;
        loop->heap_cap = n;
    }
    uint32_t slot = loop->free_slot - 1;
    rl__timer_slot *s = &loop->slots[slot];
    loop->free_slot = s->next_free;
    s->deadline = deadline_ns;
    s->seq = loop->timer_seq++;
    s->cb = cb;
    s->ud = ud;
    loop->heap[loop->heap_len] = slot;
    s->heap_pos = loop->heap_len++;
    sift_up(loop, s->heap_pos);
    if (out_id) *out_id = (uint64_t)s->gen << 32 | (uint64_t)(slot + 1);
    return RL_OK;
}

int rl__loop_timer_cancel(rl__loop *loop, uint64_t id) {
    if (!loop) return RL_E_INVALID_ARGUMENT;
    if (!rl__loop_context(loop)) return RL_E_CLIENT_INVALID_OPERATION;
    uint32_t low = (uint32_t)id, gen = (uint32_t)(id >> 32);
    if (low == 0 || low > loop->nslots) return RL_E_NOT_FOUND;
    rl__timer_slot *s = &loop->slots[low - 1];
    if (s->heap_pos == UINT32_MAX || s->gen != gen) return RL_E_NOT_FOUND;
    heap_remove(loop, s->heap_pos);
    return RL_OK;
}

/* Fire every timer due now that existed when the pass started, in (deadline, seq) order. */
static void fire_timers(rl__loop *loop) {
    if (loop->heap_len == 0) return;
    uint64_t now = rl__clock_mono_ns();
    uint64_t limit = loop->timer_seq, fired = 0;
    while (loop->heap_len) {
        rl__timer_slot *s = &loop->slots[loop->heap[0]];
        if (s->deadline > now || s->seq >= limit) break;
        rl_loop_fn cb = s->cb;
        void *ud = s->ud;
        uint64_t deadline = s->deadline;
        heap_remove(loop, 0);
        uint64_t t = rl__clock_mono_ns();
        pthread_mutex_lock(&loop->stats_lock);
        rl__lat_hist_add(&loop->timer_late, t - deadline);
        pthread_mutex_unlock(&loop->stats_lock);
        fired++;
        cb(loop, ud);
    }
    stat_add(&loop->st_timers_fired, fired);
}

/* ============================================================================================
 * Waiting: sleep, then spin (see TIMER PRECISION above)
 * ========================================================================================== */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Record how late a timed sleep woke and, every RL__MARGIN_EVERY samples, recompute the margin. */
static void sample_lateness(rl__loop *loop, uint64_t late_ns) {
    loop->late_ring[loop->late_pos] = late_ns;
    loop->late_pos = (loop->late_pos + 1) % RL__LATE_RING;
    if (loop->late_n < RL__LATE_RING) loop->late_n++;
    if (++loop->late_since_update < RL__MARGIN_EVERY) return;
    loop->late_since_update = 0;
    uint64_t sorted[RL__LATE_RING];
    uint32_t n = loop->late_n;
    memcpy(sorted, loop->late_ring, n * sizeof sorted[0]);
    qsort(sorted, n, sizeof sorted[0], cmp_u64);
    uint32_t i99 = (uint32_t)((n * 99u + 99u) / 100u); /* ceil(0.99 n) */
    uint64_t p99 = sorted[i99 ? i99 - 1 : 0], p50 = sorted[(n - 1) / 2];
    uint64_t pad = p99 / 4 > RL__MARGIN_PAD_NS ? p99 / 4 : RL__MARGIN_PAD_NS;
    uint64_t m = p99 + pad;
    if (m < loop->margin_min_ns) m = loop->margin_min_ns;
    if (m > loop->margin_max_ns) m = loop->margin_max_ns;
    loop->margin_ns = m;
    stat_set(&loop->st_margin_ns, m);
    stat_set(&loop->st_wake_p50_ns, p50);
    stat_set(&loop->st_wake_p99_ns, p99);
}

/* Block until an event or until the monotonic time `target` (> now). Returns the number of events
 * in ev (the timerfd's own event removed); *timed_out is 1 when the wait ended by its timeout. */
static int sleep_until(rl__loop *loop, struct epoll_event *ev, int max, uint64_t target, uint64_t now, int *timed_out) {
    *timed_out = 0;
    int n;
    if (loop->use_pwait2) {
        n = pwait2(loop->epfd, ev, max, target - now);
        if (n == 0) *timed_out = 1;
        return n < 0 ? 0 : n;
    }
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)(target / 1000000000u);
    its.it_value.tv_nsec = (long)(target % 1000000000u);
    if (timerfd_settime(loop->timerfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) {
        /* Cannot arm: fall back to a millisecond epoll timeout (rounded up, never early). */
        n = epoll_wait(loop->epfd, ev, max, (int)((target - now + 999999u) / 1000000u));
        if (n == 0) *timed_out = 1;
        return n < 0 ? 0 : n;
    }
    n = epoll_wait(loop->epfd, ev, max, -1);
    if (n < 0) n = 0;
    int kept = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].data.ptr == &loop->timer_io) {
            uint64_t expirations;
            ssize_t r = read(loop->timerfd, &expirations, sizeof expirations);
            (void)r;
            *timed_out = 1;
        } else {
            ev[kept++] = ev[i];
        }
    }
    if (!*timed_out) { /* woken by I/O: disarm so a stale expiry does not wake us later */
        memset(&its, 0, sizeof its);
        timerfd_settime(loop->timerfd, 0, &its, NULL);
    }
    return kept;
}

/* Spin until the monotonic clock reaches deadline, polling epoll every RL__SPIN_POLL_NS. Returns
 * the events found (0 when the deadline came first). */
static int spin_until(rl__loop *loop, struct epoll_event *ev, int max, uint64_t deadline) {
    uint64_t t0 = rl__clock_mono_ns(), last_poll = t0, t;
    int n = 0;
    while ((t = rl__clock_mono_ns()) < deadline) {
        if (t - last_poll >= RL__SPIN_POLL_NS) {
            n = epoll_wait(loop->epfd, ev, max, 0);
            last_poll = rl__clock_mono_ns();
            if (n > 0) break;
            n = 0;
        }
        cpu_relax();
    }
    stat_add(&loop->st_spin_ns, rl__clock_mono_ns() - t0);
    return n;
}

/* Wait for events or the next timer, whichever first. Returns the events in ev. */
static int wait_events_inner(rl__loop *loop, struct epoll_event *ev, int max) {
    if (atomic_load(&loop->has_posts)) {
        int n = epoll_wait(loop->epfd, ev, max, 0);
        return n < 0 ? 0 : n;
    }
    if (loop->heap_len == 0) {
        stat_add(&loop->st_sleeps, 1);
        int n = epoll_wait(loop->epfd, ev, max, -1);
        return n < 0 ? 0 : n;
    }
    uint64_t deadline = loop->slots[loop->heap[0]].deadline;
    uint64_t now = rl__clock_mono_ns();
    if (deadline <= now) {
        int n = epoll_wait(loop->epfd, ev, max, 0); /* timers are due: just look at the sockets */
        return n < 0 ? 0 : n;
    }
    if (deadline - now > loop->margin_ns + RL__MIN_SLEEP_NS) {
        uint64_t target = deadline - loop->margin_ns;
        int timed_out;
        stat_add(&loop->st_sleeps, 1);
        int n = sleep_until(loop, ev, max, target, now, &timed_out);
        if (timed_out) {
            uint64_t t = rl__clock_mono_ns();
            sample_lateness(loop, t > target ? t - target : 0);
        }
        return n;
    }
    return spin_until(loop, ev, max, deadline);
}

/* wait_events_inner with `waiting` set around it (invariant 2). */
static int wait_events(rl__loop *loop, struct epoll_event *ev, int max) {
    atomic_store(&loop->waiting, 1); /* seq_cst: before the load of has_posts (invariant 2) */
    int n = wait_events_inner(loop, ev, max);
    atomic_store_explicit(&loop->waiting, 0, memory_order_relaxed);
    return n;
}

/* Hand each event to its object; closes requested by a handler are done right after it. */
static void dispatch(rl__loop *loop, struct epoll_event *ev, int n) {
    for (int i = 0; i < n; i++) {
        rl__io *io = ev[i].data.ptr;
        switch (io->kind) {
        case RL__IO_WAKE: {
            uint64_t v;
            ssize_t r = read(loop->wakefd, &v, sizeof v); /* reset; posts run at the pass start */
            (void)r;
            break;
        }
        case RL__IO_TIMERFD: {
            uint64_t v;
            ssize_t r = read(loop->timerfd, &v, sizeof v);
            (void)r;
            break;
        }
        case RL__IO_LISTENER: rl__listener_on_event((rl__listener *)io, ev[i].events); break;
        case RL__IO_CONN: rl__conn_on_event((rl__conn *)io, ev[i].events); break;
        default: break;
        }
        rl__net_process_pending(loop);
    }
}

int rl__loop_run(rl__loop *loop) {
    if (!loop) return RL_E_INVALID_ARGUMENT;
    if (rl__tls_loop == loop) return RL_E_CLIENT_INVALID_OPERATION;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&loop->running, &expected, 1)) return RL_E_CLIENT_INVALID_OPERATION;
    rl__loop *prev = rl__tls_loop;
    rl__tls_loop = loop;
    int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    struct epoll_event ev[RL__MAX_EVENTS];
    for (;;) {
        stat_add(&loop->st_iterations, 1);
        run_posts(loop);
        rl__net_process_pending(loop);
        fire_timers(loop);
        rl__net_process_pending(loop);
        rl__net_release_zombies(loop);
        if (atomic_load(&loop->stop_requested)) break;
        int n = wait_events(loop, ev, RL__MAX_EVENTS);
        dispatch(loop, ev, n);
        rl__net_release_zombies(loop);
    }
    atomic_store(&loop->stop_requested, 0);
    if (old_slack > 0) (void)prctl(PR_SET_TIMERSLACK, (unsigned long)old_slack, 0, 0, 0);
    rl__tls_loop = prev;
    atomic_store_explicit(&loop->running, 0, memory_order_release);
    return RL_OK;
}

int rl__loop_set_margin_bounds(rl__loop *loop, uint32_t min_us, uint32_t max_us) {
    if (!loop || min_us > max_us || max_us > 10000u) return RL_E_INVALID_ARGUMENT;
    if (!rl__loop_context(loop)) return RL_E_CLIENT_INVALID_OPERATION;
    loop->margin_min_ns = (uint64_t)min_us * 1000u;
    loop->margin_max_ns = (uint64_t)max_us * 1000u;
    uint64_t m = loop->margin_ns;
    if (m < loop->margin_min_ns) m = loop->margin_min_ns;
    if (m > loop->margin_max_ns) m = loop->margin_max_ns;
    loop->margin_ns = m;
    stat_set(&loop->st_margin_ns, m);
    return RL_OK;
}

void rl__loop_get_stats(rl__loop *loop, rl__loop_stats *out) {
    memset(out, 0, sizeof *out);
    out->iterations = stat_get(&loop->st_iterations);
    out->sleeps = stat_get(&loop->st_sleeps);
    out->timers_fired = stat_get(&loop->st_timers_fired);
    out->posts_run = stat_get(&loop->st_posts_run);
    out->spin_ns = stat_get(&loop->st_spin_ns);
    out->margin_ns = stat_get(&loop->st_margin_ns);
    out->wake_late_p50_ns = stat_get(&loop->st_wake_p50_ns);
    out->wake_late_p99_ns = stat_get(&loop->st_wake_p99_ns);
    out->uses_pwait2 = loop->use_pwait2;
    pthread_mutex_lock(&loop->stats_lock);
    out->timer_late = loop->timer_late;
    pthread_mutex_unlock(&loop->stats_lock);
}
