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

#endif
