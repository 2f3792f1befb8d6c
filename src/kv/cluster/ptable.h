/* ptable.h (internal) — the cluster client's table of requests outstanding on a connection: request
 * id -> request, open addressing with linear probing and backward-shift deletion (no tombstones),
 * header-only so the tests can check it against a model.
 *
 * Invariants:
 *   1. cap is 0 or a power of two, and n * 2 <= cap after every insertion (the table grows first),
 *      so probes are short and an empty slot always exists.
 *   2. Id 0 marks an empty slot: ids are never 0 (the client's counter starts at 1).
 *   3. Every id sits at its home slot (pt_home) or after it with no empty slot in between, so a
 *      lookup stops at the first empty slot; deletion shifts later entries back to keep this.
 * Not thread-safe: the caller locks (the connection's mutex).
 */
#ifndef RL_KV_CLUSTER_PTABLE_H
#define RL_KV_CLUSTER_PTABLE_H

#include <stdint.h>

#include "base/alloc.h"
#include "reclayer/error.h"

typedef struct {
    uint64_t id; /* 0: empty */
    void *q;     /* the request */
} pslot;

typedef struct {
    pslot *v;
    uint32_t cap; /* 0 or a power of two */
    uint32_t n;   /* entries */
} ptable;

/* The home slot of id in a table of cap (a power of two) slots. Ids are taken in sequence, so
 * they are scrambled first (Fibonacci hashing): as plain indexes, 1,000 requests in flight would
 * fill one run of slots, and every deletion would walk the whole run. */
static inline uint32_t pt_home(uint64_t id, uint32_t cap) {
    return (uint32_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* Insert id (not 0, not present) -> q. RL_OK or RL_E_OUT_OF_MEMORY (nothing changed). */
static inline int pt_put(ptable *t, uint64_t id, void *q) {
    if ((t->n + 1) * 2 > t->cap) {
        uint32_t nc = t->cap ? t->cap * 2 : 64;
        pslot *nv = rl__calloc(nc, sizeof *nv);
        if (!nv) return RL_E_OUT_OF_MEMORY;
        for (uint32_t i = 0; i < t->cap; i++) {
            if (!t->v[i].id) continue;
            uint32_t j = pt_home(t->v[i].id, nc);
            while (nv[j].id) j = (j + 1) & (nc - 1);
            nv[j] = t->v[i];
        }
        rl__free(t->v);
        t->v = nv;
        t->cap = nc;
    }
    uint32_t j = pt_home(id, t->cap);
    while (t->v[j].id) j = (j + 1) & (t->cap - 1);
    t->v[j].id = id;
    t->v[j].q = q;
    t->n++;
    return RL_OK;
}

/* Remove the entry in slot i and shift the rest of its run back (invariant 3). An entry of the
 * run that was not yet visited by a caller scanning upwards from i stays at or after i. */
static inline void pt_remove_at(ptable *t, uint32_t i) {
    uint32_t m = t->cap - 1, j = i;
    t->v[i].id = 0;
    t->n--;
    for (;;) {
        j = (j + 1) & m;
        if (!t->v[j].id) return;
        uint32_t home = pt_home(t->v[j].id, t->cap);
        /* Move j into the hole i when its home is not in (i, j] (cyclically). */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            t->v[i] = t->v[j];
            t->v[j].id = 0;
            i = j;
        }
    }
}

/* The request of id, left in the table; NULL when it is not there. */
static inline void *pt_find(const ptable *t, uint64_t id) {
    if (!t->cap) return NULL;
    uint32_t j = pt_home(id, t->cap);
    while (t->v[j].id) {
        if (t->v[j].id == id) return t->v[j].q;
        j = (j + 1) & (t->cap - 1);
    }
    return NULL;
}

/* Remove id and return its request, or NULL when it is not there. */
static inline void *pt_take(ptable *t, uint64_t id) {
    if (!t->cap) return NULL;
    uint32_t j = pt_home(id, t->cap);
    while (t->v[j].id) {
        if (t->v[j].id == id) {
            void *q = t->v[j].q;
            pt_remove_at(t, j);
            return q;
        }
        j = (j + 1) & (t->cap - 1);
    }
    return NULL;
}

/* Free the slots (the requests are the caller's). */
static inline void pt_release(ptable *t) {
    rl__free(t->v);
    t->v = NULL;
    t->cap = t->n = 0;
}

#endif
