/* mapped.h (internal) — FoundationDB's mapper (getMappedRange) and its execution at a storage
 * engine: parse the mapper tuple, build each index entry's secondary key, read the index range
 * and join each entry to its secondary read at the same version.
 *
 * Mapper semantics follow FoundationDB exactly (docs/design.md §3), with
 * the deliberate differences of docs/design.md §3:
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

typedef struct rl__mapper rl__mapper;

/* Parse a packed mapper tuple. The result lives in arena a (and borrows nothing from mapper).
 * Errors: RL_E_MAPPER_NOT_TUPLE, RL_E_MAPPER_BAD_RANGE_DESCRIPTOR, RL_E_MAPPER_BAD_INDEX
 * (a malformed placeholder index), RL_E_OUT_OF_MEMORY. */
int rl__mapper_parse(const void *mapper, size_t len, rl_arena *a, rl__mapper **out);
/* 1 if the mapper ends with "{...}" (range mode). */
int rl__mapper_is_range(const rl__mapper *m);
/* Build the secondary key P for one index entry, appended to out. Errors: RL_E_MAPPER_BAD_INDEX
 * (index past the end), RL_E_KEY_NOT_TUPLE, RL_E_VALUE_NOT_TUPLE. */
int rl__mapper_construct(const rl__mapper *m, const void *key, size_t key_len, const void *value, size_t value_len,
                         rl_buf *out);

/* The bytes every secondary key of m begins with: its leading literal elements, tuple-encoded
 * (*out_len 0 when m begins with a placeholder: its keys may lie anywhere). Borrowed from m. */
void rl__mapper_prefix(const rl__mapper *m, const uint8_t **out, size_t *out_len);

/* One mapped entry: the public rl_mapped_keyvalue (index key-value and its secondary read). All
 * pointers live in the arena given to the read. */
typedef rl_mapped_keyvalue rl__mapped_entry;

/* rl__mapped_entry_unread — *ent for the index entry index as a storage server's `grouped` read
 * with RL_MAPPED_DEFER_REMOTE answers an entry whose secondary another server holds: the index
 * key-value (borrowed from index), the secondary's bounds exactly as a mapped read builds them
 * (in arena a), no rows, more 1, served_locally 0. m must be a range mapper ("{...}"). Errors:
 * those of rl__mapper_construct, RL_E_INVALID_ARGUMENT (m not a range mapper, or a P of only
 * 0xff bytes), RL_E_OUT_OF_MEMORY. */
int rl__mapped_entry_unread(const rl__mapper *m, const rl_keyvalue *index, rl_arena *a, rl__mapped_entry *ent);

typedef struct {
    int limit;                 /* index entries; 0 = unlimited */
    long target_bytes;         /* budget over index entries + secondaries; 0 = unlimited */
    int reverse;               /* index scanned in descending order (secondaries always ascend) */
    int batch;                 /* secondary lookups issued per batch; 0 = 10 */
    int secondary_row_limit;   /* rows per secondary range; 0 = 2000 */
    long secondary_byte_limit; /* bytes per secondary range; 0 = 10,000,000 */
    /* With a hook, for batches larger than the page needs (the storage server's `grouped`
     * strategy, whose batch is the whole page): a batch ends — and the page with it, more —
     * after the entry whose secondaries bring the batch's to batch_secondary_bytes key + value
     * bytes (0: no such bound), and, with a target_bytes, after the first multiple of
     * batch_step entries (0: none) at which the target is spent: the entries batches of
     * batch_step would have mapped. */
    long batch_secondary_bytes;
    int batch_step;
    /* Streaming (with a hook only; the storage server's GET_MAPPED_STREAM): when emit is set,
     * each batch's entries, once final, are handed to emit(emit_ctx, ents, n) in scan order and
     * not returned (*out is NULL, *out_n the number emitted); a batch cut short by
     * batch_secondary_bytes (with a batch_step, only after a multiple of batch_step entries
     * counted from the page's start) or an unread item no longer ends the page — the next batch
     * starts after its last entry (a batch that maps nothing still ends it) —, so the page is
     * bounded by limit and target_bytes only, and ends at the entry a whole page would (the
     * target's rule), unread items apart. The secondaries' rows and the hook's allocations come from
     * sec_arena (NULL: the read's arena), which is reset after every emit: one batch's rows are
     * held at a time. The entries given to emit are valid during the call only. emit returns
     * RL_OK, or an error that fails the read (returned as is). */
    int (*emit)(void *ctx, const rl_mapped_keyvalue *ents, int n);
    void *emit_ctx;
    rl_arena *sec_arena;
    /* RL_MAPPED_OMIT_INDEX (docs/design.md §3, "Omitted index entries"): 1 leaves out the index
     * key and value of every entry but the page's first and last (rl__mapped_omit_index); when
     * streaming, of every entry but the page's first and each emitted batch's last (the page's
     * last is not known before the read ends). The byte budget counts them whole all the same,
     * so the page ends where it would without. */
    int omit_index;
} rl__mapped_options;

/* One secondary read of a batch handed to a rl_secondary_batch_fn. mapped.c fills the inputs
 * (every pointer lives in the read's arena and stays valid for the whole mapped read); the hook
 * fills the outputs. */
typedef struct {
    /* Inputs. */
    int is_range;         /* 1: the prefix range [begin, end); 0: a point read of begin */
    const uint8_t *begin; /* the secondary key P (range: the range's begin) */
    uint32_t begin_len;
    const uint8_t *end; /* range: strinc(P) ("\xff" for an empty P); point: P + "\x00" */
    uint32_t end_len;
    int row_limit;   /* rows at most (> 0; a point read: 1) */
    long byte_limit; /* about this many key + value bytes (> 0; the row that crosses it is
                              included, as rl__storage_get_range) */
    /* Outputs (zeroed by mapped.c before the call). */
    rl_keyvalue *kvs; /* the rows in ascending key order, copied into the arena given to
                              the hook (point: at most one, whose key equals begin) */
    int n_kvs;
    int more;           /* 1: rows remain that the limits cut off (range reads only) */
    int served_locally; /* 1: read from this engine / server's own shards */
    int error;          /* RL_OK, or this item's error: fails the whole mapped read */
    int read_here;      /* 1: the hook did not read it; mapped.c reads it from the engine it
                              was given, at v, after the hook returns (all of a batch's such
                              items under one read lock), and sets served_locally; the other
                              outputs are then ignored */
    int unread;         /* 1: the hook did not read it and the mapped read's page ends before
                              it (the reply's byte budget is spent): mapped.c returns the entries
                              before the first unread item, with more; what follows it is ignored.
                              The first item of a mapped read's first batch must not be unread
                              (RL_E_INTERNAL_ERROR: the page would make no progress) */
    int deferred;       /* 1: the hook left this range item unread for the caller to read
                              (RL_MAPPED_DEFER_REMOTE): no rows, more set; it is the hook's
                              own mark, mapped.c reads the outputs as for any item */
} rl__secondary_item;

/* rl__mapped_omit_index — leave out the index key-value of ev[i] for every i in [from, to): its
 * index becomes empty (key and value "", borrowed static bytes), index_omitted 1 and
 * index_omitted_len the bytes left out. Entries already omitted are left as they are. Cannot fail. */
void rl__mapped_omit_index(rl_mapped_keyvalue *ev, int from, int to);

/* The batch hook of a mapped read: read the n secondaries items[0..n) at version v and fill each
 * item's outputs (results copied into arena a, the mapped read's arena; a is used by the calling
 * thread only, so a hook that lets other threads write into it must hand it over and take it back
 * with proper synchronisation). Called once per batch of the mapped read (rl__mapped_options.batch
 * entries, the last batch possibly shorter), on the thread that called
 * rl__storage_get_mapped_range, with no engine lock held (it may block on the network). Return
 * RL_OK, or an error that fails the whole mapped read; an item's error does too (the first in item
 * order is returned). NULL as the hook means "read from the same engine". Used by the storage
 * server (src/server), whose records may live on other storage servers. */
typedef int (*rl_secondary_batch_fn)(void *ctx, rl__version v, rl__secondary_item *items, int n, rl_arena *a);

/* Mapped range read of the index range [begin, end) at version v. Row limit counts index
 * entries; the byte budget covers index entries and secondaries (FoundationDB's accounting,
 * see mapped.c: the index scan gets target_bytes * 0.2, then batches of o->batch entries start
 * while the full budget, charged key+value bytes of index entries and secondary rows, is not
 * exhausted). o may be NULL (all defaults). On RL_OK *out holds *out_n entries in scan order,
 * every pointer in arena a; *out_more is 1 if index entries remain in [begin, end) (resume after
 * the last entry's index key, or before it in reverse). fn (may be NULL: local reads) is the
 * batch hook for the secondaries (rl_secondary_batch_fn). An error from any secondary read, or
 * from building a secondary key, fails the whole call (outputs empty). Also
 * RL_E_RANGE_LIMITS_INVALID for a negative limit and RL_E_INVALID_ARGUMENT for NULL handles. */
int rl__storage_get_mapped_range(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                                 size_t end_len, const rl__mapper *m, const rl__mapped_options *o,
                                 rl_secondary_batch_fn fn, void *fn_ctx, rl_arena *a, rl__mapped_entry **out,
                                 int *out_n, int *out_more);

#endif
