/* hash.c — thin wrappers over xxHash. */
#include "base/hash.h"

#include <xxhash.h>

uint64_t rl__hash64(const void *p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }

uint32_t rl__checksum32(const void *p, size_t n) { return (uint32_t)XXH3_64bits(p, n); }
