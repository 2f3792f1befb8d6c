/* keyidx.h (internal) — an ordered index of caller-owned nodes by key, for the write map (ryw.c):
 * a B+tree whose pages hold node pointers next to the first 8 bytes of each node's key, over a
 * doubly linked list of the nodes in key order. A search costs a few page visits (binary searches
 * over packed 8-byte prefixes, the key's bytes read only on a tie) instead of the ~10 dependent
 * node loads of a skip list at 100,000 entries; next and previous are one pointer.
 *
 * Memory: pages come from the index's arena and are never freed one by one (a page left empty is
 * unlinked and forgotten; the arena goes with the transaction). Nodes, and the key bytes they
 * point to, are the caller's and must stay valid and unchanged while indexed — and afterwards
 * too, as long as the index lives: a removed node's key may remain a page separator (a lower
 * bound, still correct), so the key bytes must outlive the index (the write map's live in the
 * transaction's arena).
 *
 * Invariants:
 *   1. The list first..last (next/prev) holds the indexed nodes in strictly ascending key order
 *      (rl__bytes_cmp), n of them; the leaves, left to right, hold the same pointers in the same
 *      order, each leaf 1..RL__KX_FAN of them (the root leaf of an empty index: 0).
 *   2. An inner page's child i (i >= 1) holds only keys >= the key of sep[i], and child i - 1 only
 *      keys below it; every leaf is at depth `depth`; an inner page has 1..RL__KX_FAN children,
 *      the root at least 2 (a root left with one child is replaced by it).
 *   3. kpre[i] is rl__bytes_prefix64 of the key its slot names (leaf: v[i]'s; inner: sep[i]'s).
 *
 * Not thread-safe: the owner serializes (the transaction's lock).
 */
#ifndef RL_KV_KEYIDX_H
#define RL_KV_KEYIDX_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"

#define RL__KX_FAN 32 /* slots per page */
#define RL__KX_MAX_DEPTH 16

/* The index's part of a node: embed it in the caller's node. */
typedef struct rl__kx_node {
    uint64_t kpre;      /* rl__bytes_prefix64(key) (rl__kx_set_key) */
    const uint8_t *key; /* the sort key: the caller's bytes */
    uint32_t key_len;
    struct rl__kx_node *prev, *next; /* the list, in key order (NULL at the ends) */
} rl__kx_node;

typedef struct rl__kx_page rl__kx_page;

typedef struct {
    rl__kx_page *root; /* NULL until the first insert */
    uint32_t depth;    /* inner levels above the leaves */
    rl__kx_node *first, *last;
    size_t n;
    rl_arena *arena;    /* pages */
    rl__kx_page *spare; /* pages taken ahead (rl__kx_reserve), linked through child[0] */
    uint32_t n_spare;
} rl__keyidx;

/* Where a key is, or would go (rl__kx_locate): the path from the root, valid until the index
 * changes. */
typedef struct {
    rl__kx_page *page[RL__KX_MAX_DEPTH + 1];
    int slot[RL__KX_MAX_DEPTH + 1];
} rl__kx_pos;

/* Set node n's key (borrowed) and its prefix (rl__bytes_prefix64). */
void rl__kx_set_key(rl__kx_node *n, const uint8_t *k, uint32_t kl);

/* rl__kx_init — an empty index whose pages go to arena a (may be NULL for an index that stays
 * empty). No allocation. */
void rl__kx_init(rl__keyidx *x, rl_arena *a);
/* rl__kx_seek — the first node with key >= k, or NULL. */
rl__kx_node *rl__kx_seek(const rl__keyidx *x, const uint8_t *k, uint32_t kl);
/* rl__kx_locate — rl__kx_seek, recording in *pos where a node with key k goes (for
 * rl__kx_insert_at while the index is unchanged). */
rl__kx_node *rl__kx_locate(const rl__keyidx *x, const uint8_t *k, uint32_t kl, rl__kx_pos *pos);
/* rl__kx_insert_at — index node n (its key set, not in the index: rl__kx_locate of that key
 * returned another node or NULL) at pos, from rl__kx_locate of n's key with no change since.
 * RL_OK, or RL_E_OUT_OF_MEMORY with the index unchanged. */
int rl__kx_insert_at(rl__keyidx *x, rl__kx_pos *pos, rl__kx_node *n);
/* rl__kx_reserve — take ahead the pages one insert may need (depth + 2), so that the next
 * rl__kx_insert or rl__kx_insert_at cannot fail. RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__kx_reserve(rl__keyidx *x);
/* rl__kx_insert — locate and insert n (its key not in the index). RL_OK or RL_E_OUT_OF_MEMORY
 * (unchanged). */
int rl__kx_insert(rl__keyidx *x, rl__kx_node *n);
/* rl__kx_remove — take node n (in the index) out; never allocates. */
void rl__kx_remove(rl__keyidx *x, rl__kx_node *n);

#endif
