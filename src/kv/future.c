/* future.c — rl_future: the handle every read and commit returns.
 *
 * Invariants:
 *   1. A future is created pending (rl__future_new) and made ready exactly once
 *      (rl__future_complete); after that its error and results never change.
 *   2. Results (keys, values, arrays) live in the future's own arena and are freed with it.
 *   3. Embedded futures are completed before the call that created them returns. A network
 *      backend completes them from its I/O thread: ready is guarded by mu, waiters sleep on cv,
 *      and callbacks registered before completion run once, in the completing thread — unless
 *      the user freed the future first: then they never run.
 *   3a. A future is reference counted (refs): the user's handle, plus one for each backend
 *      operation that may still write its results into the arena. rl_future_free drops the
 *      user's reference; the memory is recycled only when the last reference goes, so a late
 *      reply never writes into a future that was handed out again.
 *   4. Out of memory while creating a future yields the shared static future `oom_future`, which
 *      holds RL_E_OUT_OF_MEMORY and which rl_future_free ignores, so no API returns NULL.
 *   5. `ready` is written (0 -> 1) only under mu, with a release store after the error and the
 *      results; readers that find it set with an acquire load may read them without the lock
 *      (the fast path of wait / get_error / is_ready, two lock round trips less per read).
 *   5a. rl_future_wait sleeps on `ready` itself (a futex), not on cv under mu: it counts itself
 *      in n_waiting, then sleeps while ready is 0; the completer stores ready, then wakes the
 *      futex if n_waiting > 0 (both sequentially consistent, so one of the two sees the other:
 *      no lost wake-up). The wake comes after the unlock and after the completer's reference is
 *      gone, so f may be recycled by then: a wake of a recycled future's futex only makes its
 *      waiters (if any) look at `ready` again. With cv and mu, a woken waiter found the mutex
 *      still held by the completer and slept on it again, and its unlock then made a futile
 *      futex wake (glibc leaves a mutex taken after a wait marked contended): four system calls
 *      and two wake-ups where one wake does.
 *   6. Freed futures are recycled through a per-thread cache (at most CACHE_MAX): a read
 *      then costs no allocation in steady state. Each cached future keeps its arena's largest
 *      block (rl__arena_reset keeps one of at most 4 MiB), as long as the blocks kept by the
 *      thread's cached futures total at most CACHE_BYTES_MAX; past that budget the future is
 *      cached with an empty arena. So reads of large values (split records of 100 KB chunks)
 *      reuse their result memory op after op instead of allocating and freeing blocks that
 *      glibc would return to the kernel and fault in again. cache_bytes is exactly the sum of
 *      rl__arena_capacity over the cached futures. A cached future is pending-free: its results are cleared,
 *      its arena reset, its mutex and condition variable stay initialized (unlocked, no
 *      waiters). The cache is emptied when its thread exits (a pthread key destructor). Users
 *      never see the difference: rl_future_free still ends the future's life, and a pointer to a
 *      freed future was already invalid. All memory still comes from the allocation hook, so
 *      rl_alloc_set_hook must be called before the first allocation (as for every other object).
 *   7. Early entries of a mapped read (rl__future_mapped_publish / rl__future_mapped_wait): the
 *      backend publishes (p_mkvs, p_count) under mu while f is pending, growing only; each publish
 *      and the completion change pseq under mu, and wake its futex when n_pwait > 0. A waiter
 *      reads pseq under mu after finding neither ready nor new entries, counts itself in n_pwait
 *      before unlocking, and sleeps while pseq still holds what it read: a publish or completion
 *      after its unlock changes pseq and sees n_pwait, so no wake-up is lost. The published
 *      array is in f's arena and stays valid until f is freed; the result the completion sets
 *      begins with the same entries.
 */
#include <limits.h>
#include <string.h>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/sync.h"
#include "kv/kv_int.h"
#include "kv/kv_stats.h"
#include "net/proto.h"

static rl_future oom_future = {
    .kind = RL_FUT_NONE,
    .is_static = 1,
    .ready = 1,
    .error = RL_E_OUT_OF_MEMORY,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
};

/* ---- The per-thread cache of freed futures (invariant 6) --------------------------------- */

enum { CACHE_MAX = 1024 };                /* a SCAN_AND_FETCH page or a burst of pipelined gets fits */
#define CACHE_BYTES_MAX ((size_t)8 << 20) /* arena bytes the cached futures of a thread keep */

static _Thread_local rl_future *cache[CACHE_MAX];
static _Thread_local int n_cache;
static _Thread_local size_t cache_bytes;   /* sum of rl__arena_capacity over cache[0..n_cache) */
static _Thread_local int cache_registered; /* the key below holds a value for this thread */
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* The futexes of 5a and 7 (private to the process). A wait returns at once when *p no longer
 * holds val, on a wake, or spuriously (EINTR): the caller looks at *p again. */
static void futex_wait_while(int *p, int val) { (void)syscall(SYS_futex, p, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0); }

static void futex_wake_all(int *p) { (void)syscall(SYS_futex, p, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0); }

/* Release a future for good (its arena, lock, condition variable and memory). */
static void destroy(rl_future *f) {
    rl__arena_release(&f->arena);
    rl__free(f->cbs);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    rl__free(f);
}

/* Thread exit: free the futures cached by this thread. */
static void cache_drain(void *unused) {
    (void)unused;
    while (n_cache > 0) destroy(cache[--n_cache]);
    cache_bytes = 0;
    cache_registered = 0;
}

static void cache_key_create(void) {
    if (pthread_key_create(&cache_key, cache_drain) != 0) cache_key = (pthread_key_t)-1;
}

/* Keep f for reuse by this thread; 0 if the cache cannot take it (the caller destroys it).
 * The arena is reset (keeping its largest block) and emptied if its block would take the
 * thread's cached arena bytes past CACHE_BYTES_MAX (invariant 6). */
static int cache_put(rl_future *f) {
    if (n_cache == CACHE_MAX || f->n_cbs) return 0;
    if (!cache_registered) {
        pthread_once(&cache_once, cache_key_create);
        if (cache_key == (pthread_key_t)-1 || pthread_setspecific(cache_key, cache) != 0) return 0;
        cache_registered = 1;
    }
    rl__arena_reset(&f->arena);
    size_t cap = rl__arena_capacity(&f->arena);
    if (cap > CACHE_BYTES_MAX - cache_bytes) {
        rl__arena_release(&f->arena);
        cap = 0;
    }
    cache_bytes += cap;
    cache[n_cache++] = f;
    return 1;
}

/* Allocate a pending future of `kind` (from the cache when it has one); the shared OOM future
 * on failure. */
rl_future *rl__future_new(int kind) {
    rl_future *f;
    if (n_cache > 0) {
        f = cache[--n_cache];
        cache_bytes -= rl__arena_capacity(&f->arena);
        f->is_static = 0;
        f->ready = 0;
        f->error = 0;
        f->user_freed = 0;
        f->cb_running = 0;
        f->free_in_cb = 0;
        memset(&f->stats, 0, sizeof f->stats);
        f->trace_head = f->trace_tail = NULL;
        f->cbs = NULL;
        f->n_cbs = 0;
        f->i64 = 0;
        f->present = 0;
        f->data = NULL;
        f->len = 0;
        f->kvs = NULL;
        f->mkvs = NULL;
        f->count = 0;
        f->more = 0;
        f->vs_owner = NULL;
        f->vs_next = NULL;
        f->keys = NULL;
        f->watch = NULL;
        f->p_mkvs = NULL;
        f->p_count = 0;
    } else {
        f = rl__calloc(1, sizeof *f);
        if (!f) return &oom_future;
        rl__arena_init(&f->arena, 1024);
        rl__mutex_init_adaptive(&f->mu);
        pthread_cond_init(&f->cv, NULL);
    }
    f->kind = kind;
    f->refs = 1;
    return f;
}

rl_future *rl__future_error(int kind, int err) {
    rl_future *f = rl__future_new(kind);
    rl__future_complete_unseen(f, err);
    return f;
}

/* Complete f with err (unless it is already ready), optionally dropping one reference, and run
 * the callbacks registered so far outside the lock (invariant 3). The reference is dropped under
 * the lock before waiters wake: a waiter that frees f right away then drops the last reference
 * itself, so f goes back to the cache of the thread that uses it (invariant 6) instead of the
 * completing thread's. While callbacks run, cb_running holds rl_future_free (from any other
 * thread) until they are over, so f outlives them; a callback that frees its own future leaves
 * the reference for the completer to drop afterwards. */
static void complete(rl_future *f, int err, int drop_ref) {
    if (f->is_static) return;
    pthread_mutex_lock(&f->mu);
    rl__future_cb *cbs = NULL;
    int n = 0, wake = 0, pwake = 0;
    if (!f->ready) {
        f->error = err;
        __atomic_store_n(&f->ready, 1, __ATOMIC_SEQ_CST);  /* a release, and ordered before n_waiting's load */
        __atomic_add_fetch(&f->pseq, 1, __ATOMIC_SEQ_CST); /* invariant 7 */
        pwake = __atomic_load_n(&f->n_pwait, __ATOMIC_SEQ_CST) > 0;
        cbs = f->cbs;
        n = f->user_freed ? 0 : f->n_cbs;
        f->cbs = NULL;
        f->n_cbs = 0;
        if (n > 0) {
            f->cb_running = 1;
            f->cb_thread = pthread_self();
        }
        wake = __atomic_load_n(&f->n_waiting, __ATOMIC_SEQ_CST) > 0; /* after the store: 5a */
    }
    int last = drop_ref && __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0;
    pthread_mutex_unlock(&f->mu);
    if (wake) futex_wake_all(&f->ready);
    if (pwake) futex_wake_all(&f->pseq);
    if (n > 0) {
        for (int i = 0; i < n; i++) cbs[i].cb(f, cbs[i].ud);
        pthread_mutex_lock(&f->mu);
        f->cb_running = 0;
        int freed_inside = f->free_in_cb;
        f->free_in_cb = 0;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        if (freed_inside) rl__future_unref(f);
    }
    rl__free(cbs);
    if (last && !cache_put(f)) destroy(f);
}

void rl__future_complete_unref(rl_future *f, int err) { complete(f, err, 1); }

void rl__future_complete(rl_future *f, int err) { complete(f, err, 0); }

void rl__future_complete_unseen(rl_future *f, int err) {
    if (f->is_static) return;
    f->error = err;
    __atomic_store_n(&f->ready, 1, __ATOMIC_RELEASE); /* invariant 5: the release publishes it */
}

int rl_future_wait(rl_future *f) {
    if (!f) return RL_E_INVALID_ARGUMENT;
    if (__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE)) return f->error;
    __atomic_add_fetch(&f->n_waiting, 1, __ATOMIC_SEQ_CST); /* before the load of ready: 5a */
    while (!__atomic_load_n(&f->ready, __ATOMIC_SEQ_CST)) futex_wait_while(&f->ready, 0);
    __atomic_sub_fetch(&f->n_waiting, 1, __ATOMIC_RELAXED);
    return f->error;
}

void rl__future_mapped_publish(rl_future *f, const rl_mapped_keyvalue *ents, int n) {
    if (f->is_static) return;
    pthread_mutex_lock(&f->mu);
    int wake = 0;
    if (!f->ready && n > f->p_count) {
        f->p_mkvs = ents;
        f->p_count = n;
        __atomic_add_fetch(&f->pseq, 1, __ATOMIC_SEQ_CST);
        wake = __atomic_load_n(&f->n_pwait, __ATOMIC_SEQ_CST) > 0;
    }
    pthread_mutex_unlock(&f->mu);
    if (wake) futex_wake_all(&f->pseq);
}

int rl__future_mapped_wait(rl_future *f, int have, const rl_mapped_keyvalue **out, int *out_n) {
    for (;;) {
        if (__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE)) return 1;
        pthread_mutex_lock(&f->mu);
        if (f->ready) {
            pthread_mutex_unlock(&f->mu);
            return 1;
        }
        if (f->p_count > have) {
            *out = f->p_mkvs;
            *out_n = f->p_count;
            pthread_mutex_unlock(&f->mu);
            return 0;
        }
        int seq = __atomic_load_n(&f->pseq, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&f->n_pwait, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&f->mu);
        futex_wait_while(&f->pseq, seq);
        __atomic_sub_fetch(&f->n_pwait, 1, __ATOMIC_SEQ_CST);
    }
}

int rl_future_is_ready(rl_future *f) {
    if (!f) return 0;
    if (__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE)) return 1;
    return rl__locked_int(&f->mu, &f->ready);
}

int rl_future_get_error(rl_future *f) {
    if (!f) return RL_E_INVALID_ARGUMENT;
    if (__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE)) return f->error;
    pthread_mutex_lock(&f->mu);
    int err = f->ready ? f->error : RL_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_unlock(&f->mu);
    return err;
}

/* Register cb; if f is already ready, call it now in this thread. RL_OK, RL_E_OUT_OF_MEMORY
 * (then cb is never called), RL_E_INVALID_ARGUMENT. */
int rl_future_set_callback(rl_future *f, void (*cb)(rl_future *f, void *ud), void *ud) {
    if (!f || !cb) return RL_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&f->mu);
    if (!f->ready) {
        rl__future_cb *n = rl__realloc(f->cbs, (size_t)(f->n_cbs + 1) * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&f->mu);
            return RL_E_OUT_OF_MEMORY;
        }
        f->cbs = n;
        f->cbs[f->n_cbs].cb = cb;
        f->cbs[f->n_cbs].ud = ud;
        f->n_cbs++;
        pthread_mutex_unlock(&f->mu);
        return RL_OK;
    }
    pthread_mutex_unlock(&f->mu);
    cb(f, ud);
    return RL_OK;
}

/* Common check of the typed getters: ready, no error, right kind. */
static int check(rl_future *f, int kind) {
    if (!f) return RL_E_INVALID_ARGUMENT;
    int err = rl_future_get_error(f);
    if (err) return err;
    if (f->kind != kind) return RL_E_CLIENT_INVALID_OPERATION;
    return RL_OK;
}

int rl_future_get_int64(rl_future *f, int64_t *out) {
    int rc = check(f, RL_FUT_INT64);
    if (rc == RL_OK && out) *out = f->i64;
    return rc;
}

int rl_future_get_key_array(rl_future *f, const rl_slice **out_keys, int *out_count) {
    int rc = check(f, RL_FUT_KEYS);
    if (rc) return rc;
    if (out_keys) *out_keys = f->keys;
    if (out_count) *out_count = f->count;
    return RL_OK;
}

int rl_future_get_value(rl_future *f, int *out_present, const uint8_t **out_value, int *out_len) {
    int rc = check(f, RL_FUT_VALUE);
    if (rc) return rc;
    if (out_present) *out_present = f->present;
    if (out_value) *out_value = f->present ? f->data : NULL;
    if (out_len) *out_len = f->present ? (int)f->len : 0;
    return RL_OK;
}

int rl_future_get_key(rl_future *f, const uint8_t **out_key, int *out_len) {
    int rc = check(f, RL_FUT_KEY);
    if (rc) return rc;
    if (out_key) *out_key = f->data ? f->data : (const uint8_t *)"";
    if (out_len) *out_len = (int)f->len;
    return RL_OK;
}

int rl_future_get_keyvalue_array(rl_future *f, const rl_keyvalue **out_kvs, int *out_count, int *out_more) {
    int rc = check(f, RL_FUT_KVS);
    if (rc) return rc;
    if (out_kvs) *out_kvs = f->kvs;
    if (out_count) *out_count = f->count;
    if (out_more) *out_more = f->more;
    return RL_OK;
}

int rl_future_get_mapped_keyvalue_array(rl_future *f, const rl_mapped_keyvalue **out, int *out_count, int *out_more) {
    int rc = check(f, RL_FUT_MAPPED);
    if (rc) return rc;
    if (out) *out = f->mkvs;
    if (out_count) *out_count = f->count;
    if (out_more) *out_more = f->more;
    return RL_OK;
}

void rl__future_ref(rl_future *f) {
    if (!f->is_static) __atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
}

void rl__future_unref(rl_future *f) {
    if (f->is_static) return;
    if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (!cache_put(f)) destroy(f);
}

int rl__future_is_abandoned(rl_future *f) {
    return f->is_static ? 0 : __atomic_load_n(&f->user_freed, __ATOMIC_ACQUIRE);
}

/* Free the user's handle of f: no callback runs after this, a pending versionstamp future
 * detaches from its transaction, a watch is cancelled (watch.c), and the memory goes when no operation holds f any more
 * (invariant 3a). */
void rl_future_free(rl_future *f) {
    if (!f || f->is_static) return;
    rl_txn *owner = f->vs_owner;
    if (owner) {
        rl__txn_lock(owner);
        for (rl_future **pp = &owner->vs_future; *pp; pp = &(*pp)->vs_next)
            if (*pp == f) { /* still pending: unlink it */
                *pp = f->vs_next;
                break;
            }
        f->vs_owner = NULL;
        f->vs_next = NULL;
        rl__txn_unlock(owner);
    }
    pthread_mutex_lock(&f->mu);
    __atomic_store_n(&f->user_freed, 1, __ATOMIC_RELEASE);
    rl__free(f->cbs);
    f->cbs = NULL;
    f->n_cbs = 0;
    if (f->cb_running && pthread_equal(f->cb_thread, pthread_self())) {
        /* Freed by its own callback: the completer drops the reference when they are over. */
        f->free_in_cb = 1;
        pthread_mutex_unlock(&f->mu);
        if (f->watch) rl__watch_cancel(f->watch); /* the completer's reference keeps it */
        return;
    }
    while (f->cb_running) pthread_cond_wait(&f->cv, &f->mu); /* a callback on another thread */
    pthread_mutex_unlock(&f->mu);
    /* A watch is cancelled once no callback can run, under the user's reference (watch.c
     * invariant 1). */
    if (f->watch) rl__watch_cancel(f->watch);
    rl__future_unref(f);
}

/* ---- Network figures (kv_stats.h) ------------------------------------------------------------ */

const char *rl__kv_trace_type_name(uint16_t type) {
    switch (type) {
    case RL_MSG_GET: return "get";
    case RL_MSG_GET_KEY: return "get_key";
    case RL_MSG_GET_RANGE: return "get_range";
    case RL_MSG_GET_MAPPED_RANGE: return "get_mapped_range";
    case RL_MSG_GET_MAPPED_STREAM: return "get_mapped_range"; /* streamed: the same read */
    case RL_MSG_GET_READ_VERSION: return "get_read_version";
    default: return "other";
    }
}

const rl__kv_read_stats *rl__future_read_stats(const rl_future *f) {
    static const rl__kv_read_stats zero;
    if (!f || !__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE)) return &zero;
    return &f->stats;
}

const rl__kv_trace_event *rl__future_trace(const rl_future *f) {
    if (!f || !__atomic_load_n(&f->ready, __ATOMIC_ACQUIRE)) return NULL;
    return f->trace_head;
}

void rl__txn_trace(rl_txn *t, int delta) {
    if (t) __atomic_fetch_add(&t->trace_on, delta, __ATOMIC_RELAXED);
}
