/* arena.h (internal) — rl_arena, a bump allocator for request- and transaction-scoped
 * temporaries, freed or reset as a whole.
 *
 * Memory comes in blocks (default 4 KiB, larger for larger requests) from the allocation hook.
 * rl__arena_alloc returns 16-byte-aligned memory valid until rl__arena_reset or rl__arena_release
 * of the same arena; it returns NULL on allocation failure. A new block is sized to hold at least
 * everything handed out since the last reset too (up to 4 MiB), and a reset keeps the largest
 * block (up to 4 MiB) — or, when the cycle spilled over several blocks, replaces them by one
 * block of the cycle's total (up to 4 MiB; one allocation, skipped if it fails) — so a reused
 * arena serving the same work again allocates nothing.
 */
#ifndef RL_BASE_ARENA_H
#define RL_BASE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct rl__arena_block rl__arena_block;

typedef struct {
    rl__arena_block *head; /* current block; older blocks chain behind it */
    size_t block_size;     /* default size of a new block, bytes */
    size_t used;           /* total bytes handed out since the last reset */
} rl_arena;

void rl__arena_init(rl_arena *a, size_t block_size);
void rl__arena_release(rl_arena *a);
void rl__arena_reset(rl_arena *a);
void *rl__arena_alloc(rl_arena *a, size_t n);
/* n bytes with no alignment, right after the block's last allocation when they fit: consecutive
 * packed allocations with nothing allocated between them are contiguous (a range read lays large
 * values end to end this way, so a split record's chunks are one run of bytes). NULL on failure. */
void *rl__arena_alloc_packed(rl_arena *a, size_t n);
/* Copy n bytes into the arena (NULL on failure; a valid pointer for n == 0). */
void *rl__arena_memdup(rl_arena *a, const void *p, size_t n);
/* The key right after k[0..n) in key order, k + "\x00", copied into the arena (n + 1 bytes;
 * NULL on failure). */
uint8_t *rl__arena_key_after(rl_arena *a, const void *k, size_t n);
/* Payload bytes held in the arena's blocks (used or not): what a cache that keeps the arena
 * retains. Walks the block chain (one block right after a reset). */
size_t rl__arena_capacity(const rl_arena *a);

/* Memory filled outside any arena and then handed to one without a copy (a network frame read
 * straight into its own buffer, then kept by the read it answers). rl__arena_block_alloc returns
 * n bytes (16-byte aligned; NULL when out of memory) owned by the caller, who either frees them
 * with rl__arena_block_free or gives them to an arena with rl__arena_adopt: the arena then frees
 * them with its other blocks (release or reset), and the bytes stay valid until then. An adopted
 * block serves no later rl__arena_alloc (a reset may keep it for reuse, as any block). */
void *rl__arena_block_alloc(size_t n);
void rl__arena_block_free(void *p);
void rl__arena_adopt(rl_arena *a, void *p);

#endif
