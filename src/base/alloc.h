/* alloc.h (internal) — the library's allocation entry points, all routed through the hook of
 * include/reclayer/alloc.h and counted per thread.
 *
 * Each block carries a 16-byte header holding its size, so rl__free needs no size argument and the
 * hook still sees Lua-style old/new sizes. Every function returns NULL on failure (including an
 * injected failure); the caller maps that to RL_E_OUT_OF_MEMORY. rl__free(NULL) is a no-op.
 */
#ifndef RL_BASE_ALLOC_H
#define RL_BASE_ALLOC_H

#include <stddef.h>
#include "reclayer/alloc.h"

void *rl__malloc(size_t n);
void *rl__calloc(size_t count, size_t size);
void *rl__realloc(void *p, size_t n);
void rl__free(void *p);
char *rl__strdup(const char *s);
void *rl__memdup(const void *p, size_t n);

/* rl__grow — make the array *pp (pp points at the array's pointer, any object pointer type; its
 * elements are elem bytes, *cap of them allocated) hold at least need elements. When need > *cap
 * it is reallocated (rl__realloc) to the largest of need, twice *cap and min_cap elements, and
 * *pp and *cap are updated; the elements already there are kept. Returns RL_OK, or
 * RL_E_OUT_OF_MEMORY (also when the size overflows) with *pp and *cap unchanged (the array still
 * owned by the caller). Use it through RL_GROW, which passes the element's size. */
int rl__grow(void *pp, size_t *cap, size_t need, size_t elem, size_t min_cap);
/* RL_GROW(arr, cap, need, min_cap): rl__grow for the array arr (an lvalue of type T *) and its
 * capacity cap (an lvalue of type size_t). */
#define RL_GROW(arr, cap, need, min_cap) rl__grow(&(arr), &(cap), (need), sizeof *(arr), (min_cap))

#endif
