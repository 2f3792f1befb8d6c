/* arena.c — rl_arena implementation (see arena.h). */
#include "base/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <pthread.h>

#include "base/alloc.h"

/* The largest block a reset keeps for reuse. */
#define ARENA_KEEP_MAX ((size_t)4 << 20)

struct rl__arena_block {
    rl__arena_block *next; /* older block */
    size_t cap;            /* payload bytes */
    size_t off;            /* bytes used in this block */
    int cached;            /* rl__arena_block_alloc's: freed into the block cache */
    _Alignas(16) unsigned char mem[];
};

void rl__arena_init(rl_arena *a, size_t block_size) {
    a->head = NULL;
    a->block_size = block_size ? block_size : 4096;
    a->used = 0;
}

static void block_free(rl__arena_block *b);

void rl__arena_release(rl_arena *a) {
    rl__arena_block *b = a->head;
    while (b) {
        rl__arena_block *n = b->next;
        block_free(b);
        b = n;
    }
    a->head = NULL;
    a->used = 0;
}

void rl__arena_reset(rl_arena *a) {
    /* Keep the largest block (up to ARENA_KEEP_MAX bytes), free the rest: a reused arena then
     * serves the same workload again without allocating, even when its results were large.
     * If the cycle handed out more than that block holds (it spilled into several blocks),
     * replace them by one block of the cycle's total, so the next identical cycle fits at once
     * (one allocation; if it fails, the largest block is kept as before). */
    rl__arena_block *b = a->head, *keep = NULL;
    for (; b; b = b->next)
        if (b->cap <= ARENA_KEEP_MAX && (!keep || b->cap > keep->cap)) keep = b;
    if (a->head && a->head->next && a->used <= ARENA_KEEP_MAX && (!keep || keep->cap < a->used)) {
        rl__arena_block *nb = rl__malloc(sizeof *nb + a->used);
        if (nb) {
            nb->cap = a->used;
            nb->cached = 0;
            keep = nb;
        }
    }
    b = a->head;
    while (b) {
        rl__arena_block *n = b->next;
        if (b != keep) block_free(b);
        b = n;
    }
    if (keep) {
        keep->off = 0;
        keep->next = NULL;
    }
    a->head = keep;
    a->used = 0;
}

/* need bytes at the head block's offset rounded up to align (1 or 16), a new block when they do
 * not fit. */
static void *arena_take(rl_arena *a, size_t need, size_t align) {
    rl__arena_block *b = a->head;
    size_t off = b ? (b->off + align - 1) & ~(align - 1) : 0;
    if (!b || off > b->cap || b->cap - off < need) {
        /* A new block also has room for everything handed out since the reset (while that
         * stays within what a reset keeps): the last block of a cycle is then the largest and
         * holds the whole cycle, so after a reset the same workload fits in the kept block. */
        size_t cap = need > a->block_size ? need : a->block_size;
        if (a->used <= ARENA_KEEP_MAX && need <= ARENA_KEEP_MAX - a->used && a->used + need > cap) cap = a->used + need;
        /* Above 64 KiB, up to the next eighth of its power of two (at most 12.5 % more): a
         * reused arena whose cycles vary by a little (records of 150,000 bytes and a few more)
         * then fits the next cycle in its kept block instead of allocating a block again. */
        if (cap > ((size_t)64 << 10) && cap <= ARENA_KEEP_MAX) {
            size_t step = (size_t)1 << 13;
            while (step * 16 <= cap) step <<= 1;
            cap = (cap + step - 1) / step * step;
        }
        rl__arena_block *nb = rl__malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->cap = cap;
        nb->off = 0;
        nb->cached = 0;
        nb->next = b;
        a->head = b = nb;
        off = 0;
    }
    void *p = b->mem + off;
    a->used += need + (off - b->off);
    b->off = off + need;
    return p;
}

void *rl__arena_alloc(rl_arena *a, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) return NULL;
    return arena_take(a, need, 16);
}

void *rl__arena_alloc_packed(rl_arena *a, size_t n) { return arena_take(a, n ? n : 1, 1); }

void *rl__arena_memdup(rl_arena *a, const void *p, size_t n) {
    void *q = rl__arena_alloc(a, n);
    if (q && n) memcpy(q, p, n);
    return q;
}

uint8_t *rl__arena_key_after(rl_arena *a, const void *k, size_t n) {
    if (n == SIZE_MAX) return NULL;
    uint8_t *p = rl__arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, k, n);
    p[n] = 0;
    return p;
}

size_t rl__arena_capacity(const rl_arena *a) {
    size_t n = 0;
    for (const rl__arena_block *b = a->head; b; b = b->next) n += b->cap;
    return n;
}

/* The block whose mem[] is p (rl__arena_block_alloc's memory). */
static rl__arena_block *block_of(void *p) {
    return (rl__arena_block *)((unsigned char *)p - offsetof(rl__arena_block, mem));
}

/* The block cache: rl__arena_block_alloc's memory comes back to it when freed (by an arena or by
 * rl__arena_block_free), up to BLOCK_CACHE_MAX blocks and BLOCK_CACHE_BYTES, so a stream of large network frames (each
 * read into a block of its own, kept by a read's arena, freed with it) reuses warm memory instead
 * of allocating every frame afresh — glibc returns a thread heap's freed top to the kernel, and
 * every frame's pages were then faulted in again (190 faults per 1 MB mapped read). Blocks are
 * sized in 16 KiB steps and reused for requests of at least half their size. */
#define BLOCK_CACHE_MAX 32
#define BLOCK_CACHE_BYTES ((size_t)8 << 20)
#define BLOCK_STEP ((size_t)16 << 10)
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static rl__arena_block *cache[BLOCK_CACHE_MAX];
static int n_cache;
static size_t cache_bytes;

static void block_free(rl__arena_block *b) {
    if (b->cached) {
        pthread_mutex_lock(&cache_mu);
        if (n_cache < BLOCK_CACHE_MAX && cache_bytes + b->cap <= BLOCK_CACHE_BYTES) {
            cache[n_cache++] = b;
            cache_bytes += b->cap;
            b = NULL;
        }
        pthread_mutex_unlock(&cache_mu);
    }
    rl__free(b);
}

void *rl__arena_block_alloc(size_t n) {
    if (n > SIZE_MAX - sizeof(rl__arena_block) - BLOCK_STEP) return NULL;
    rl__arena_block *b = NULL;
    pthread_mutex_lock(&cache_mu);
    for (int i = n_cache - 1; i >= 0; i--) /* the most recently freed that fits (warmest) */
        if (cache[i]->cap >= n && cache[i]->cap / 2 <= n) {
            b = cache[i];
            cache[i] = cache[--n_cache];
            cache_bytes -= b->cap;
            break;
        }
    pthread_mutex_unlock(&cache_mu);
    if (!b) {
        size_t cap = (n + BLOCK_STEP - 1) / BLOCK_STEP * BLOCK_STEP;
        if (!(b = rl__malloc(sizeof *b + cap))) return NULL;
        b->cap = cap;
        b->cached = 1;
    }
    b->next = NULL;
    b->off = b->cap; /* full: nothing more is handed out of it */
    return b->mem;
}

void rl__arena_block_free(void *p) {
    if (p) block_free(block_of(p));
}

void rl__arena_adopt(rl_arena *a, void *p) {
    rl__arena_block *b = block_of(p);
    if (a->head) { /* behind the current block, which keeps serving allocations */
        b->next = a->head->next;
        a->head->next = b;
    } else {
        b->next = NULL;
        a->head = b;
    }
}
