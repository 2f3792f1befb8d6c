/* alloc.h — the library's allocation hook and its per-thread counters.
 *
 * All heap memory the library takes goes through one Lua-style hook:
 *     void *hook(void *ud, void *ptr, size_t old_size, size_t new_size)
 * new_size == 0 frees ptr (returns NULL); ptr == NULL allocates; otherwise reallocates.
 * The default hook is the C library's realloc/free.
 *
 * Counters are per thread, so a benchmark or a query can read the allocations it caused without
 * locks: allocations (calls that returned new memory, reallocs included) and bytes requested.
 *
 * Tests can make the Nth allocation of the calling thread fail (the library then returns
 * RL_E_OUT_OF_MEMORY) to check every error path.
 */
#ifndef RECLAYER_ALLOC_H
#define RECLAYER_ALLOC_H

#include "reclayer/common.h"

typedef void *(*rl_alloc_fn)(void *ud, void *ptr, size_t old_size, size_t new_size);

typedef struct {
    uint64_t allocs; /* successful allocations and reallocations */
    uint64_t bytes;  /* bytes requested by them */
    uint64_t frees;  /* frees of non-NULL pointers */
} rl_alloc_stats;

/* rl_free — free memory the library handed to the caller (rl_db_status_json, rl_tuple_print, …)
 * through the hook. NULL ok. */
RL_API void rl_free(void *p);

/* rl_alloc_set_hook — replace the process-wide hook (NULL restores the default). Call it before
 * any other library call; memory allocated by one hook must be freed by the same hook. Not
 * thread-safe. */
RL_API void rl_alloc_set_hook(rl_alloc_fn fn, void *ud);

/* rl_alloc_get_stats — copy the calling thread's counters to *out. */
RL_API void rl_alloc_get_stats(rl_alloc_stats *out);

/* rl_alloc_reset_stats — zero the calling thread's counters. */
RL_API void rl_alloc_reset_stats(void);

/* rl_alloc_fail_after — make the calling thread's (n+1)th allocation from now fail (n = 0: the
 * next one); n < 0 turns failure injection off. Each injected failure happens once. */
RL_API void rl_alloc_fail_after(long n);

#endif
