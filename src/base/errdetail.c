/* errdetail.c — the detail message kept by a handle about its last failed call (errdetail.h). */
#include "base/errdetail.h"

#include <stdio.h>
#include <string.h>

#include "reclayer/error.h"

void rl__errdetail_init(rl__errdetail *d, pthread_mutex_t *mu) {
    d->mu = mu;
    atomic_init(&d->n_set, 0);
    d->msg[0] = 0;
}

void rl__errdetail_vset(rl__errdetail *d, const char *fmt, va_list ap) {
    if (!d) return;
    if (d->mu) pthread_mutex_lock(d->mu);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    atomic_fetch_add_explicit(&d->n_set, 1, memory_order_relaxed);
    if (d->mu) pthread_mutex_unlock(d->mu);
}

void rl__errdetail_set(rl__errdetail *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vset(d, fmt, ap);
    va_end(ap);
}

void rl__errdetail_copy(rl__errdetail *d, const char *msg) { rl__errdetail_set(d, "%s", msg ? msg : ""); }

const char *rl__errdetail_get(const rl__errdetail *d) { return d ? d->msg : ""; }

unsigned rl__errdetail_mark(const rl__errdetail *d) {
    return d ? atomic_load_explicit(&((rl__errdetail *)d)->n_set, memory_order_relaxed) : 0;
}

int rl__errdetail_finish(rl__errdetail *d, unsigned mark, int rc, const char *what) {
    if (!d || rc == RL_OK || rc == RL_E_NOT_FOUND || rc == RL_E_ALREADY_EXISTS) return rc;
    if (rl__errdetail_mark(d) == mark) rl__errdetail_set(d, "%s: %s", what, rl_error_message(rc));
    return rc;
}
