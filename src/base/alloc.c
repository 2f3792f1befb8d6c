/* alloc.c — the allocation hook, size headers, per-thread counters and failure injection.
 *
 * Block layout:
 *   OFFSET SIZE DESCRIPTION
 *   0      8    requested size in bytes (size_t)
 *   8      8    padding, keeps the payload 16-byte aligned
 *   16     n    payload handed to the caller
 */
#include "base/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "reclayer/error.h"

#define HDR 16

static void *default_hook(void *ud, void *ptr, size_t old_size, size_t new_size) {
    (void)ud;
    (void)old_size;
    if (new_size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, new_size);
}

static rl_alloc_fn hook = default_hook;
static void *hook_ud = NULL;

static _Thread_local rl_alloc_stats stats;
static _Thread_local long fail_countdown = -1;

void rl_alloc_set_hook(rl_alloc_fn fn, void *ud) {
    hook = fn ? fn : default_hook;
    hook_ud = fn ? ud : NULL;
}

void rl_alloc_get_stats(rl_alloc_stats *out) { *out = stats; }

void rl_alloc_reset_stats(void) { memset(&stats, 0, sizeof stats); }

void rl_alloc_fail_after(long n) { fail_countdown = n < 0 ? -1 : n; }

/* should_fail — consume one step of the injected-failure countdown. */
static int should_fail(void) {
    if (fail_countdown < 0) return 0;
    if (fail_countdown == 0) {
        fail_countdown = -1;
        return 1;
    }
    fail_countdown--;
    return 0;
}

void *rl__realloc(void *p, size_t n) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX - HDR) return NULL;
    if (should_fail()) return NULL;
    char *base = p ? (char *)p - HDR : NULL;
    size_t old = base ? *(size_t *)base : 0;
    char *nb = hook(hook_ud, base, base ? old + HDR : 0, n + HDR);
    if (!nb) return NULL;
    *(size_t *)nb = n;
    stats.allocs++;
    stats.bytes += n;
    return nb + HDR;
}

void *rl__malloc(size_t n) { return rl__realloc(NULL, n); }

void *rl__calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = rl__malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void rl__free(void *p) {
    if (!p) return;
    char *base = (char *)p - HDR;
    size_t old = *(size_t *)base;
    hook(hook_ud, base, old + HDR, 0);
    stats.frees++;
}

char *rl__strdup(const char *s) { return rl__memdup(s, strlen(s) + 1); }

void *rl__memdup(const void *p, size_t n) {
    void *q = rl__malloc(n);
    if (q && n) memcpy(q, p, n);
    return q;
}

int rl__grow(void *pp, size_t *cap, size_t need, size_t elem, size_t min_cap) {
    if (need <= *cap) return RL_OK;
    size_t n = *cap > SIZE_MAX / 2 ? need : *cap * 2;
    if (n < need) n = need;
    if (n < min_cap) n = min_cap;
    if (elem && n > SIZE_MAX / elem) return RL_E_OUT_OF_MEMORY;
    /* The array's pointer is read and written as bytes: pp may point at any object pointer type
     * (all have void *'s representation on the platforms POSIX describes). */
    void *p;
    memcpy(&p, pp, sizeof p);
    void *np = rl__realloc(p, n * elem);
    if (!np) return RL_E_OUT_OF_MEMORY;
    memcpy(pp, &np, sizeof np);
    *cap = n;
    return RL_OK;
}

void rl_free(void *p) { rl__free(p); }
