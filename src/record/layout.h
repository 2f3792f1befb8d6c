/* layout.h — the record layer's interface for the layers above it (the query layer, the benchmark,
 * the tools): the keyspace ids of a store, what a VALUE index entry holds (rl__index_layout), the
 * store's index and records prefixes, and the reusable record decoder that scans use. Everything
 * else about the record layer's internals stays in record_int.h (private to src/record/).
 *
 * Keyspace ids under a store's prefix (docs/design.md §6, Java's FDBRecordStoreKeyspace): see RL__KS_*
 * below and docs/file-format.md (Record store layout).
 */
#ifndef RL_RECORD_LAYOUT_H
#define RL_RECORD_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "reclayer/record.h"
#include "tuple/tuple.h"

/* Keyspace ids (first tuple element after the store prefix). */
enum {
    RL__KS_STORE_INFO = 0,
    RL__KS_RECORD = 1,
    RL__KS_INDEX = 2,
    RL__KS_RECORD_COUNT = 4,
    RL__KS_INDEX_STATE = 5,
};

/* Record key suffixes (Java's SplitHelper). */
#define RL__SUFFIX_VERSION (-1)
#define RL__SUFFIX_UNSPLIT 0
#define RL__SUFFIX_FIRST_CHUNK 1

/* ---- Index layout ------------------------------------------------------------------------ */

#define RL__INDEX_MAX_COLS 64 /* indexed fields + primary-key columns of one entry, at most */

/* What a VALUE index entry holds: key (2, subspace_key, values..., pk columns not among the
 * values...). Strings borrowed from the metadata (valid while it lives). */
typedef struct {
    const char *name;
    const char *subspace_key;
    int n_fields;                   /* indexed values */
    int n_pk;                       /* primary-key columns of the record type */
    int pk_pos[RL__INDEX_MAX_COLS]; /* per primary-key column: its position among the indexed
                                     * values, or -1 when it is appended after them */
    int rebuildable;                /* 1: a record has exactly one entry, a function of its fields and primary
                      * key (rl__store_index_entry): a VALUE index over single-valued fields —
                      * every index today */
} rl__index_layout;

/* rl__md_index_layout — the layout of index `name` of md into *out. RL_OK, RL_E_INDEX_UNKNOWN
 * (no such index), RL_E_UNSUPPORTED_OPERATION (more than RL__INDEX_MAX_COLS columns). Pure. */
int rl__md_index_layout(const rl_metadata *md, const char *name, rl__index_layout *out);

/* rl__store_index_entry — append to b the entry tuple (values..., primary-key columns not among
 * them...) that the store writes for record rec in the index `name` (the index key without the
 * prefix rl__store_index_prefix gives): how a mapped read's omitted index entries are rebuilt
 * (docs/design.md §7). rec is borrowed. RL_OK; RL_E_INDEX_UNKNOWN; RL_E_NOT_FOUND (an expected
 * outcome: rec is not of the index's record type, so it has no entry there); RL_E_RECORD_PK_MISSING;
 * RL_E_OUT_OF_MEMORY (also left in b). Details in err (may be NULL). */
int rl__store_index_entry(const rl_store *s, const char *name, const rl_record *rec, rl_buf *b, rl__errdetail *err);

/* rl__store_key — reset b to the store's prefix + pack(kid) and start *pk after it (a packer the
 * caller may append further elements with). Errors stay in b. */
void rl__store_key(const rl_store *s, int64_t kid, rl_buf *b, rl__tuple_packer *pk);

/* rl__md_pack_field — pack the value of field fd of msg as one tuple element (the record layer's
 * encoding of field values, docs/file-format.md "Field values"); *out_present says whether the
 * field is set (proto2 presence; proto3 scalars are always present), and nothing is packed when
 * it is not. */
void rl__md_pack_field(rl__tuple_packer *pk, const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd,
                       int *out_present);

/* rl__store_index_prefix — append the store's prefix + pack(RL__KS_INDEX, subspace_key) to b;
 * rl__store_records_prefix — append prefix + pack(RL__KS_RECORD). Errors stay in b
 * (rl__buf_error). */
void rl__store_index_prefix(const rl_store *s, const char *subspace_key, rl_buf *b);
void rl__store_records_prefix(const rl_store *s, rl_buf *b);

/* rl__store_prefix_shape — how many tuple elements the store's prefix has (*out_elems), and
 * whether a string or bytes element of it holds '{' or '}' (*out_braces: 1), which a remote-fetch
 * mapper would read as a placeholder. Computed once when the store is made. */
void rl__store_prefix_shape(const rl_store *s, size_t *out_elems, int *out_braces);
/* rl__store_record_range — reset b and e to the begin and end of the records range of pk (a
 * packed primary key, pk_len bytes; NULL, 0: every record): R+pk+0x00 .. R+pk+0xff, R the
 * records prefix. pk must not point into b or e. Errors stay in b and e (rl__buf_error). */
void rl__store_record_range(const rl_store *s, const uint8_t *pk, size_t pk_len, rl_buf *b, rl_buf *e);

/* rl__range_drain — read every key-value of the range [b, e) whose first page is the issued
 * future f (taken: freed here, whatever happens), handing each to kv(ud, kv) in the order read
 * (kv's pointers are valid only during the call; a nonzero return stops the drain and is
 * returned). While the page read says `more`, the next page is read from past its last key: b
 * becomes that key + 0x00 (e becomes that key with RL_REVERSE), so b and e (owned by the
 * caller) are updated as pages are read; the next pages use RL_STREAMING_ITERATOR, iterations
 * iteration+1, iteration+2, ... (iteration: the first page's), and flags (RL_REVERSE,
 * RL_SNAPSHOT). wait(ud, f, page) waits for page number `page` (0: f) and returns its error;
 * NULL waits with rl_future_wait. Returns RL_OK, a transaction or allocation error, or kv's
 * code. */
int rl__range_drain(rl_txn *txn, rl_buf *b, rl_buf *e, int flags, int iteration, rl_future *f,
                    int (*wait)(void *ud, rl_future *f, int page), int (*kv)(void *ud, const rl_keyvalue *kv),
                    void *ud);

/* rl__store_err — the store's detail message (rl_store_errmsg), for the calls that fail on it
 * and for rl_cursor_open's failures: the one mutable part of a const store (its writes are
 * serialised by the store's mutex; base/errdetail.h). */
rl__errdetail *rl__store_err(const rl_store *s);

/* rl__store_decode — rl_store_decode_record with its detail message in err (NULL: none) instead
 * of the store's: for decoders that keep the detail on their own handle (the query cursor). */
int rl__store_decode(const rl_store *s, const rl_keyvalue *kvs, int n, rl_record *out, rl__errdetail *err);

/* ---- Reusable record decoding for scans (decoder.c) -------------------------------------- */

/* A scratch block of the decoder: overflow allocations of one record chain behind it. */
typedef struct rl__scratch_big rl__scratch_big;

/* Decodes records one after another (the query cursor's rows) while reusing its memory: the
 * decoded message and primary key live in a scratch block that is recycled at the next decode,
 * and the block grows to the largest record seen, so decoding allocates nothing in steady state.
 * The common layouts (an optional version key, then suffix 0 or chunks 1..n) are assembled
 * directly from the key-values; anything else (and every failure) takes the strict path of
 * rl_store_decode_record, so results and errors are exactly that function's.
 * Not thread-safe; one decoder per cursor. */
typedef struct {
    uint8_t *mem; /* scratch block (owned), mem_cap bytes */
    size_t mem_cap, mem_used;
    size_t want;           /* bytes the current record asked for (sizes the block next time) */
    rl__scratch_big *big;  /* overflow allocations of the current record (owned) */
    int oom;               /* an overflow allocation failed during the current record */
    rl_buf data;           /* concatenated chunks of a split record */
    rl_record slow;        /* a record decoded by the strict path (owned) */
    ProtobufCAllocator pa; /* allocates from the scratch; its free is a no-op */
} rl__record_decoder;

/* Initialise d (cannot fail). It starts with the memory the thread's last recycled decoder
 * parked, if any, so a new decoder per query need not allocate its scratch again. */
void rl__decoder_init(rl__record_decoder *d);
/* Free everything d holds (what it handed out becomes invalid). */
void rl__decoder_release(rl__record_decoder *d);
/* As rl__decoder_release, but park d's scratch block and chunk buffer (each up to 4 MiB) in a
 * per-thread slot for the next rl__decoder_init of this thread; freed at thread exit. May
 * allocate once to size the parked block to the last record; never fails. */
void rl__decoder_recycle(rl__record_decoder *d);
/* Decode the record of primary key pk (packed) from kvs[0..n): the key-values of its records
 * range in ascending key order. [out] out: filled on RL_OK and BORROWED from d — valid until the
 * next decode or release of d; never pass it to rl_record_release (zero it instead). Returns
 * RL_OK, RL_E_NOT_FOUND, RL_E_OUT_OF_MEMORY, or the corruption errors of rl_store_decode_record
 * (with its detail message in err, which may be NULL). Never reads outside the given arrays. */
int rl__decoder_decode(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len,
                       const rl_keyvalue *kvs, int n, rl_record *out, rl__errdetail *err);
/* As rl__decoder_decode, for a caller that keeps the bytes kvs point to valid for as long as *out
 * (until its next decode): the record's bytes fields may then point into them — an unsplit
 * record's value, or a split record's chunks when they lie end to end in memory (a range read
 * lays large values so) — instead of being copied. */
int rl__decoder_decode_in_place(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len,
                                const rl_keyvalue *kvs, int n, rl_record *out, rl__errdetail *err);

#endif
