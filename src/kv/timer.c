/* timer.c — one timer thread per process for the transaction layer's delays (the backoff of
 * rl_txn_on_error): a min-heap of deadlines, a mutex and a condition variable on the monotonic
 * clock. Millisecond precision is plenty for backoff; network delays have their own precise
 * timers in src/net/.
 *
 * Invariants:
 *   1. The thread starts on the first rl__kv_timer_add and lives as long as the process (it is
 *      detached and idle when the heap is empty); the heap is reachable from a static, so leak
 *      checkers do not report it.
 *   2. A callback runs once, on the timer thread, without the lock held, at or after its
 *      deadline; entries with equal deadlines run in the order they were added.
 */
#include <pthread.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "kv/kv_int.h"

typedef struct {
    uint64_t deadline;
    uint64_t seq; /* tie-break: insertion order */
    void (*fn)(void *ud);
    void *ud;
} timer_ent;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int started;
static timer_ent *heap;
static size_t n_heap, cap_heap;
static uint64_t next_seq;

static int before(const timer_ent *a, const timer_ent *b) {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->seq < b->seq);
}

static void sift_up(size_t i) {
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&heap[i], &heap[p])) break;
        timer_ent t = heap[i];
        heap[i] = heap[p];
        heap[p] = t;
        i = p;
    }
}

static void sift_down(size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n_heap && before(&heap[l], &heap[m])) m = l;
        if (r < n_heap && before(&heap[r], &heap[m])) m = r;
        if (m == i) break;
        timer_ent t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

static void *run(void *unused) {
    (void)unused;
    pthread_mutex_lock(&mu);
    for (;;) {
        if (n_heap == 0) {
            pthread_cond_wait(&cv, &mu);
            continue;
        }
        uint64_t now = rl__clock_mono_ns();
        if (heap[0].deadline > now) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            uint64_t wait = heap[0].deadline - now;
            uint64_t ns = (uint64_t)ts.tv_nsec + wait % 1000000000ull;
            ts.tv_sec += (time_t)(wait / 1000000000ull + ns / 1000000000ull);
            ts.tv_nsec = (long)(ns % 1000000000ull);
            pthread_cond_timedwait(&cv, &mu, &ts);
            continue;
        }
        timer_ent e = heap[0];
        heap[0] = heap[--n_heap];
        sift_down(0);
        pthread_mutex_unlock(&mu);
        e.fn(e.ud);
        pthread_mutex_lock(&mu);
    }
    return NULL;
}

int rl__kv_timer_add(uint64_t deadline_ns, void (*fn)(void *ud), void *ud) {
    int rc = RL_OK;
    pthread_mutex_lock(&mu);
    if (!started) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&cv, &ca);
        pthread_condattr_destroy(&ca);
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, run, NULL) != 0) rc = RL_E_OUT_OF_MEMORY;
        pthread_attr_destroy(&at);
        if (rc) {
            pthread_cond_destroy(&cv);
            goto out;
        }
        started = 1;
    }
    if ((rc = RL_GROW(heap, cap_heap, n_heap + 1, 16))) goto out;
    heap[n_heap] = (timer_ent){deadline_ns, next_seq++, fn, ud};
    sift_up(n_heap++);
    pthread_cond_signal(&cv);
out:
    pthread_mutex_unlock(&mu);
    return rc;
}
