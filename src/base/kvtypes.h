/* kvtypes.h (internal) — the key-value types every layer from storage up shares: versions,
 * mutations and key ranges. Neutral on purpose: the transaction layer's backend interface
 * (src/kv/backend.h), the wire codecs (src/net/proto.h), the storage engine and the commit path
 * all speak these, so none of them has to include another's headers to exchange data.
 */
#ifndef RL_BASE_KVTYPES_H
#define RL_BASE_KVTYPES_H

#include <stdint.h>

typedef uint64_t rl__version;

/* Mutation types: FoundationDB's MutationRef numbers, plus RL_MUT_CLEAR (3) for a single-key
 * clear. They are part of the log format (docs/file-format.md) and of the wire protocol
 * (docs/protocol.md): never renumber. Atomic operations use FoundationDB's current semantics
 * (AND and MIN treat a missing value as the operand, like AndV2/MinV2). */
typedef enum {
    RL_MUT_SET = 0,         /* p1 = key, p2 = value */
    RL_MUT_CLEAR_RANGE = 1, /* p1 = begin, p2 = end (exclusive) */
    RL_MUT_ADD = 2,         /* p1 = key, p2 = operand: little-endian add, FoundationDB rules */
    RL_MUT_CLEAR = 3,       /* p1 = key */
    RL_MUT_BIT_AND = 6,
    RL_MUT_BIT_OR = 7,
    RL_MUT_BIT_XOR = 8,
    RL_MUT_APPEND_IF_FITS = 9,
    RL_MUT_MAX = 12, /* little-endian unsigned compare */
    RL_MUT_MIN = 13,
    /* Only in transactions, never in storage: the commit path turns them into RL_MUT_SET. */
    RL_MUT_SET_VERSIONSTAMPED_KEY = 14,
    RL_MUT_SET_VERSIONSTAMPED_VALUE = 15,
    RL_MUT_BYTE_MIN = 16, /* lexicographic */
    RL_MUT_BYTE_MAX = 17,
    RL_MUT_COMPARE_AND_CLEAR = 20,
} rl__mutation_type;

/* rl__mutation_type_ok — 1 if t is an rl__mutation_type; storage_only refuses the versionstamped
 * ones (which never reach storage: the commit path turns them into RL_MUT_SET). */
static inline int rl__mutation_type_ok(unsigned t, int storage_only) {
    switch (t) {
    case RL_MUT_SET:
    case RL_MUT_CLEAR_RANGE:
    case RL_MUT_ADD:
    case RL_MUT_CLEAR:
    case RL_MUT_BIT_AND:
    case RL_MUT_BIT_OR:
    case RL_MUT_BIT_XOR:
    case RL_MUT_APPEND_IF_FITS:
    case RL_MUT_MAX:
    case RL_MUT_MIN:
    case RL_MUT_BYTE_MIN:
    case RL_MUT_BYTE_MAX:
    case RL_MUT_COMPARE_AND_CLEAR: return 1;
    case RL_MUT_SET_VERSIONSTAMPED_KEY:
    case RL_MUT_SET_VERSIONSTAMPED_VALUE: return !storage_only;
    default: return 0;
    }
}

/* One mutation; the bytes are borrowed from whoever built it (a transaction's arena, a decoded
 * frame, a log record). */
typedef struct {
    uint8_t type; /* rl__mutation_type */
    const uint8_t *p1;
    uint32_t len1;
    const uint8_t *p2;
    uint32_t len2;
} rl__mutation;

/* A key range [begin, end); bytes borrowed. */
typedef struct {
    const uint8_t *begin;
    uint32_t begin_len;
    const uint8_t *end;
    uint32_t end_len;
} rl__keyrange;

#endif
