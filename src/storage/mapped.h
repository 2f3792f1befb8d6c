/* mapped.h (internal) — FoundationDB's mapper (getMappedRange) and its execution at a storage
 * engine: parse the mapper tuple, build each index entry's secondary key, read the index range
 * and join each entry to its secondary read at the same version.
 *
 * Mapper semantics follow FoundationDB exactly (shared/reference/fdb-mapped-range.md §2), with
 * the deliberate differences of DESIGN §3:
 *   - the mapper must be a tuple (else RL_E_MAPPER_NOT_TUPLE, 2043);
 *   - only byte/unicode string elements are inspected, other elements are literals;
 *   - an element containing "{{" or "}}" is a literal with them unescaped, re-emitted as bytes;
 *   - "{K[i]}" / "{V[i]}" splice element i of the index key / value tuple raw (i counts the
 *     whole key, subspace prefix included). Strict parsing: the index must be one or more decimal
 *     digits and fit an int ("{K[1x]}" is RL_E_MAPPER_BAD_INDEX, 2030, where FoundationDB reads
 *     1; "{K[]}", five characters, is 2030 where FoundationDB keeps it as a literal; "{K[-1]}" is
 *     2030 in both); out of range is 2030 (when the entry is mapped); a key / value that does
 *     not parse as a tuple when referenced is 2041 / 2042;
 *   - "{...}" must be last (else 2032) and makes the read a prefix range [P, strinc(P)) that
 *     includes P itself; without it the read is a point get of P and a missing key is an empty
 *     result, not an error.
 */
#ifndef RL_STORAGE_MAPPED_H
#define RL_STORAGE_MAPPED_H

#include "storage/storage.h"

typedef struct rl_mapper rl_mapper;

/* Parse a packed mapper tuple. The result lives in arena a (and borrows nothing from mapper).
 * Errors: RL_E_MAPPER_NOT_TUPLE, RL_E_MAPPER_BAD_RANGE_DESCRIPTOR, RL_E_MAPPER_BAD_INDEX
 * (a malformed placeholder index), RL_E_OUT_OF_MEMORY. */
int rl__mapper_parse(const void *mapper, size_t len, rl_arena *a, rl_mapper **out);
/* 1 if the mapper ends with "{...}" (range mode). */
int rl__mapper_is_range(const rl_mapper *m);
/* Build the secondary key P for one index entry, appended to out. Errors: RL_E_MAPPER_BAD_INDEX
 * (index past the end), RL_E_KEY_NOT_TUPLE, RL_E_VALUE_NOT_TUPLE. */
int rl__mapper_construct(const rl_mapper *m, const void *key, size_t key_len, const void *value,
                         size_t value_len, rl_buf *out);

/* One mapped entry: the public rl_mapped_keyvalue (index key-value and its secondary read). All
 * pointers live in the arena given to the read. */
typedef rl_mapped_keyvalue rl_mapped_entry;

typedef struct {
    int limit;                 /* index entries; 0 = unlimited */
    long target_bytes;         /* budget over index entries + secondaries; 0 = unlimited */
    int reverse;               /* index scanned in descending order (secondaries always ascend) */
    int batch;                 /* secondary lookups issued per batch; 0 = 10 */
    int secondary_row_limit;   /* rows per secondary range; 0 = 2000 */
    long secondary_byte_limit; /* bytes per secondary range; 0 = 10,000,000 */
} rl_mapped_options;

/* Reads one secondary (point or range) at version v for the mapped read. Used by a storage
 * server whose records live elsewhere; NULL means "read from the same storage engine". Must copy
 * results into a. Sets *out_served_locally. */
typedef int (*rl_secondary_fn)(void *ctx, rl_version v, int is_range, const uint8_t *begin,
                               uint32_t begin_len, const uint8_t *end, uint32_t end_len,
                               int row_limit, long byte_limit, rl_arena *a, rl_kvpair **out_kvs,
                               int *out_n, int *out_more, int *out_served_locally);

/* Mapped range read of the index range [begin, end) at version v. Row limit counts index
 * entries; the byte budget covers index entries and secondaries (FoundationDB's accounting,
 * see mapped.c: the index scan gets target_bytes * 0.2, then batches of o->batch entries start
 * while the full budget, charged key+value bytes of index entries and secondary rows, is not
 * exhausted). o may be NULL (all defaults). On RL_OK *out holds *out_n entries in scan order,
 * every pointer in arena a; *out_more is 1 if index entries remain in [begin, end) (resume after
 * the last entry's index key, or before it in reverse). An error from any secondary read, or
 * from building a secondary key, fails the whole call (outputs empty). Also
 * RL_E_RANGE_LIMITS_INVALID for a negative limit and RL_E_INVALID_ARGUMENT for NULL handles. */
int rl__storage_get_mapped_range(rl_storage *st, rl_version v, const void *begin, size_t begin_len,
                                 const void *end, size_t end_len, const rl_mapper *m,
                                 const rl_mapped_options *o, rl_secondary_fn fn, void *fn_ctx,
                                 rl_arena *a, rl_mapped_entry **out, int *out_n, int *out_more);

#endif
