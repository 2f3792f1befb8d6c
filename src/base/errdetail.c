/* errdetail.c — the one internal error-detail type: a fixed buffer of text about a failed call
 * (errdetail.h). */
#include "base/errdetail.h"

#include <stdio.h>
#include <string.h>

#include "reclayer/error.h"

void rl__errdetail_init(rl__errdetail *d, pthread_mutex_t *mu) {
    d->mu = mu;
    atomic_init(&d->n_set, 0);
    d->msg[0] = 0;
}

/* Write fmt's text at d->msg + at (at <= strlen(d->msg); the end when at is (size_t)-1), cut to
 * fit, and count a set. The text is formatted aside first, so arguments may point into d->msg. */
static void put(rl__errdetail *d, size_t at, const char *fmt, va_list ap) {
    char text[RL__ERRDETAIL_CAP];
    if (d->mu) pthread_mutex_lock(d->mu);
    if (at == (size_t)-1) at = strlen(d->msg);
    if (at < sizeof d->msg - 1) {
        vsnprintf(text, sizeof d->msg - at, fmt, ap);
        memcpy(d->msg + at, text, strlen(text) + 1);
    }
    atomic_fetch_add_explicit(&d->n_set, 1, memory_order_relaxed);
    if (d->mu) pthread_mutex_unlock(d->mu);
}

void rl__errdetail_vset(rl__errdetail *d, const char *fmt, va_list ap) {
    if (d) put(d, 0, fmt, ap);
}

void rl__errdetail_set(rl__errdetail *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vset(d, fmt, ap);
    va_end(ap);
}

void rl__errdetail_vappend(rl__errdetail *d, const char *fmt, va_list ap) {
    if (d) put(d, (size_t)-1, fmt, ap);
}

void rl__errdetail_append(rl__errdetail *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vappend(d, fmt, ap);
    va_end(ap);
}

void rl__errdetail_copy(rl__errdetail *d, const char *msg) { rl__errdetail_set(d, "%s", msg ? msg : ""); }

const char *rl__errdetail_get(const rl__errdetail *d) { return d ? d->msg : ""; }

size_t rl__errdetail_len(const rl__errdetail *d) { return d ? strlen(d->msg) : 0; }

void rl__errdetail_truncate(rl__errdetail *d, size_t len) {
    if (!d) return;
    if (d->mu) pthread_mutex_lock(d->mu);
    if (len < strlen(d->msg)) d->msg[len] = 0;
    if (d->mu) pthread_mutex_unlock(d->mu);
}

void rl__errdetail_clear(rl__errdetail *d) { rl__errdetail_truncate(d, 0); }

unsigned rl__errdetail_mark(const rl__errdetail *d) {
    return d ? atomic_load_explicit(&((rl__errdetail *)d)->n_set, memory_order_relaxed) : 0;
}

int rl__errdetail_finish(rl__errdetail *d, unsigned mark, int rc, const char *what) {
    if (!d || rc == RL_OK || rc == RL_E_NOT_FOUND || rc == RL_E_ALREADY_EXISTS) return rc;
    if (rl__errdetail_mark(d) == mark) rl__errdetail_set(d, "%s: %s", what, rl_error_message(rc));
    return rc;
}
