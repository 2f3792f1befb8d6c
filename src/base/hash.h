/* hash.h (internal) — checksums and hashes (xxHash from Debian's libxxhash). */
#ifndef RL_BASE_HASH_H
#define RL_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit XXH3 of p[0..n) with a seed. */
uint64_t rl__hash64(const void *p, size_t n, uint64_t seed);
/* 32-bit checksum (low bits of XXH3-64) used by log records and checkpoints. */
uint32_t rl__checksum32(const void *p, size_t n);

#endif
