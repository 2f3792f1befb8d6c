/* sync.h (internal) — one-line critical sections: read or bump one field of an object under the
 * mutex that guards it, instead of writing lock / copy / unlock / return out each time.
 *
 * Each takes the mutex (which the caller must not hold), reads or updates *p, releases it and
 * returns the value read. p must point into memory that stays valid while the mutex is free
 * (a field of the locked object, not one reached through a pointer the lock guards — read those
 * inside an explicit critical section). None can fail.
 */
#ifndef RL_BASE_SYNC_H
#define RL_BASE_SYNC_H

#include <pthread.h>
#include <stdint.h>

static inline int rl__locked_int(pthread_mutex_t *mu, const int *p) {
    pthread_mutex_lock(mu);
    int v = *p;
    pthread_mutex_unlock(mu);
    return v;
}

static inline uint64_t rl__locked_u64(pthread_mutex_t *mu, const uint64_t *p) {
    pthread_mutex_lock(mu);
    uint64_t v = *p;
    pthread_mutex_unlock(mu);
    return v;
}

/* *p += d under mu. */
static inline void rl__locked_add_u64(pthread_mutex_t *mu, uint64_t *p, uint64_t d) {
    pthread_mutex_lock(mu);
    *p += d;
    pthread_mutex_unlock(mu);
}

/* Initialize mu as an adaptive mutex (glibc's PTHREAD_MUTEX_ADAPTIVE_NP): a thread that finds it
 * held spins a little before it sleeps in the kernel. For the short critical sections that an
 * application thread and a network thread both enter per request (a transaction's, a future's, a
 * connection's), where a sleep and a wake-up cost far more than the section itself. Falls back to
 * a default mutex if the attribute is refused; cannot fail otherwise (the glibc initializer does
 * not). */
static inline void rl__mutex_init_adaptive(pthread_mutex_t *mu) {
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a) == 0 && pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) == 0) {
        pthread_mutex_init(mu, &a);
        pthread_mutexattr_destroy(&a);
        return;
    }
    pthread_mutex_init(mu, NULL);
}

#endif
