/* record_int.h (internal) — the record layer's shared internals: the metadata's layout, generic
 * field reading, key building, the union encoding of stored records, and the split/unsplit logic
 * over plain key-value arrays (split.c), so that each can be tested without a database.
 *
 * Private to src/record/: what the layers above need is in record/layout.h (the key layout, the
 * index layout, record decoding for scans) and app/tool.h (the commands of `rl` and the
 * benchmark's Order schema); the layer check (scripts/check-layers.sh) refuses this header
 * outside src/record/.
 */
#ifndef RL_RECORD_RECORD_INT_H
#define RL_RECORD_RECORD_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "reclayer/record.h"
#include "record/layout.h"
#include "tuple/tuple.h"

/* ---- Metadata ---------------------------------------------------------------------------- */

typedef struct {
    const ProtobufCMessageDescriptor *desc; /* borrowed (generated, static) */
    uint32_t union_field;                   /* field number in the union message, from 1 */
    const ProtobufCFieldDescriptor **pk;    /* n_pk primary-key fields (owned array) */
    int n_pk;
} rl__rtype;

typedef struct {
    char *name;                              /* owned */
    char *subspace_key;                      /* owned; the name unless given */
    int type;                                /* index into rl_metadata.types */
    const ProtobufCFieldDescriptor **fields; /* n_fields indexed fields (owned array) */
    int n_fields;
    int *pk_pos; /* per primary-key column: its position among fields, or -1 (appended) */
} rl__index;

struct rl_metadata {
    rl__rtype *types;
    int n_types;
    rl__index *indexes;
    int n_indexes;
    int version;
    int built;
    pthread_mutex_t err_mu; /* serialises writes of err (a built metadata is shared by threads) */
    rl__errdetail err;      /* rl_metadata_errmsg; also rl_store_new's failures (errdetail.h) */
};

/* Find a record type by descriptor (pointer or full name); -1 if absent. */
int rl__md_type_of(const rl_metadata *md, const ProtobufCMessageDescriptor *desc);
/* Find an index by name; -1 if absent. */
int rl__md_index_named(const rl_metadata *md, const char *name);

/* rl__md_pack_field: layout.h. */
/* Append the primary-key tuple of msg (of type t) to pk. RL_OK, RL_E_RECORD_PK_MISSING (the
 * detail in err, which may be NULL). */
int rl__md_pack_pk(const rl_metadata *md, int t, const ProtobufCMessage *msg, rl__tuple_packer *pk, rl__errdetail *err);
/* Append the index entry tuple (values..., pk columns not among them...) of msg for index ix
 * (msg must be of the index's type). Absent indexed values are packed as null; a missing
 * primary-key field is RL_E_RECORD_PK_MISSING (the detail in err, which may be NULL). */
int rl__md_pack_index_entry(const rl_metadata *md, int ix, const ProtobufCMessage *msg, rl__tuple_packer *pk,
                            rl__errdetail *err);

/* The protobuf-c allocator over rl__malloc/rl__free. */
extern ProtobufCAllocator rl__record_allocator;

/* Append the stored form of msg (type t): the union message encoding, i.e. the varint tag
 * (union_field << 3 | 2), the varint length, then msg's own encoding. RL_OK or
 * RL_E_OUT_OF_MEMORY. */
int rl__record_serialize(const rl_metadata *md, int t, const ProtobufCMessage *msg, rl_buf *out);
/* Parse a stored record. [out] out_type, out_msg (free with protobuf_c_message_free_unpacked(msg,
 * &rl__record_allocator)). RL_E_RECORD_PARSE_FAILED (bad union framing or message bytes; detail in
 * err if not NULL), RL_E_RECORD_TYPE_UNKNOWN (a union field of no type). */
int rl__record_parse(const rl_metadata *md, const uint8_t *p, size_t n, int *out_type, ProtobufCMessage **out_msg,
                     rl__errdetail *err);
/* rl__record_parse with the message allocated by alloc (borrowed; the caller frees the message
 * with the same allocator, or not at all for a scratch allocator whose free is a no-op). */
int rl__record_parse_with(const rl_metadata *md, const uint8_t *p, size_t n, ProtobufCAllocator *alloc, int *out_type,
                          ProtobufCMessage **out_msg, rl__errdetail *err);

/* ---- Split records (split.c) ------------------------------------------------------------- */

/* Number of chunks a record of len serialized bytes is stored in: 0 (whole, suffix 0) when
 * len <= RL_RECORD_SPLIT_SIZE, else ceil(len / RL_RECORD_SPLIT_SIZE). */
int rl__split_chunks(size_t len);

typedef enum {
    RL__EV_RECORD = 0,       /* a whole record */
    RL__EV_DELETE_CHUNK,     /* chunks without the first ("Found split record without start") */
    RL__EV_SPLIT_ORDER,      /* a gap in the chunks ("Split record segments out of order") */
    RL__EV_MULTIPLE_UNSPLIT, /* suffix 0 beside chunks ("More than one unsplit value.") */
    RL__EV_STRAY_SUFFIX,     /* a suffix that is not -1, 0 or >= 1 */
    RL__EV_VERSION_KEY,      /* a version key without data */
    RL__EV_BAD_VERSION,      /* a version value that is not tuple(versionstamp) */
    RL__EV_BAD_KEY,          /* a key that is not (pk..., suffix) */
} rl__unsplit_event_kind;

/* The checker's kind name and the fixed message of an event kind. */
const char *rl__unsplit_kind_name(rl__unsplit_event_kind k);
const char *rl__unsplit_kind_message(rl__unsplit_event_kind k);

/* What the unsplitter reports. Pointers are valid only during the callback. */
typedef struct {
    rl__unsplit_event_kind kind;
    const uint8_t *key; /* RL__EV_RECORD: the first data key; else the key at fault (full key) */
    size_t key_len;
    const uint8_t *pk; /* packed primary key (may be NULL for RL__EV_BAD_KEY) */
    size_t pk_len;
    const uint8_t *data; /* RL__EV_RECORD: the record's stored bytes */
    size_t data_len;
    int has_version;
    uint8_t version[12];
    int n_chunks;       /* 0 = stored whole */
    const char *detail; /* extra text for defects (may be "") */
} rl__unsplit_event;

/* Callback: return RL_OK to go on, anything else to stop (returned by feed/finish). */
typedef int (*rl__unsplit_fn)(void *ud, const rl__unsplit_event *ev);

typedef struct {
    size_t koff, klen, voff, vlen; /* into the group's byte store */
    int64_t suffix;
    int is_stray; /* the suffix is not a valid split number */
    const char *stray_detail;
} rl__split_part;

/* Assembles records from the key-values of a records range, forward or reverse, across pages:
 * consecutive keys with the same primary key (every tuple element but the last) form a group;
 * a group is assembled when the next primary key begins or at finish. Copies what it keeps. */
typedef struct {
    const uint8_t *prefix; /* records prefix: store prefix + pack(1); borrowed */
    size_t prefix_len;
    int reverse;
    int has_group;
    rl_buf pk;    /* the current group's primary key */
    rl_buf bytes; /* keys and values of the group's parts */
    rl__split_part *parts;
    size_t n_parts, cap_parts;
    rl_buf data; /* assembled chunks */
} rl__unsplitter;

void rl__unsplitter_init(rl__unsplitter *u, const uint8_t *prefix, size_t prefix_len, int reverse);
void rl__unsplitter_release(rl__unsplitter *u);
/* Forget the current group (e.g. after a stop). */
void rl__unsplitter_reset(rl__unsplitter *u);
/* Feed one key-value in scan order. Returns RL_OK, RL_E_OUT_OF_MEMORY, or the callback's stop
 * code. */
int rl__unsplitter_feed(rl__unsplitter *u, const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen,
                        rl__unsplit_fn fn, void *ud);
/* End of the range: assemble the last group. */
int rl__unsplitter_finish(rl__unsplitter *u, rl__unsplit_fn fn, void *ud);

/* ---- Store ------------------------------------------------------------------------------- */

struct rl_store {
    const rl_metadata *md;
    uint8_t *prefix; /* owned store prefix */
    size_t prefix_len;
    uint8_t *rec_prefix; /* owned: prefix + pack(1) */
    size_t rec_prefix_len;
    rl_slice *ix_prefix; /* owned: per index of md (md->indexes order), prefix + pack(2, subspace_key),
                          * each an owned allocation; what rl__store_index_prefix appends */
    size_t prefix_elems; /* elements of the store prefix (rl__store_prefix_shape) */
    int prefix_braces;   /* 1: a string or bytes element of it holds '{' or '}' */
    uint32_t flags;      /* RL_STORE_* */
    int is_open;
    atomic_uint user_version; /* local part of record versions (unique within a transaction) */
    pthread_mutex_t err_mu;   /* serialises writes of err (an open store is shared by threads) */
    rl__errdetail err;        /* rl_store_errmsg: the last failed call on the store, and
                               * rl_cursor_open's failures (errdetail.h); written through
                               * rl__store_err even when the store is const */
};

/* Index keys of one record: concatenated in bytes, lengths in lens. */
typedef struct {
    rl_buf bytes;
    size_t lens[64];
    int n;
} rl__index_keys;

/* Build the full index-entry keys of msg (type t) into ik (its bytes initialised by the caller).
 * RL_OK, RL_E_KEY_TOO_LARGE, RL_E_RECORD_PK_MISSING (detail in err), RL_E_OUT_OF_MEMORY. */
int rl__store_index_keys(const rl_store *s, int t, const ProtobufCMessage *msg, rl__index_keys *ik, rl__errdetail *err);
/* Feed every key-value of [b, e) (flags: RL_REVERSE, RL_SNAPSHOT) to u, starting with the
 * already-issued future f of its first page (taken; freed here), paging until the range is
 * exhausted, then finish u. b and e are updated as pages are read. Returns RL_OK, a transaction
 * error, or the callback's stop code. */
int rl__store_drain(rl_txn *txn, rl_buf *b, rl_buf *e, int flags, rl_future *f, rl__unsplitter *u, rl__unsplit_fn fn,
                    void *ud);
/* Read the record pk strictly (any defect is RL_E_RECORD_SPLIT_CORRUPT). parse 0: only learn
 * whether it exists (out may be NULL). f0: an issued read of the first page, or NULL. Returns
 * RL_OK, RL_E_NOT_FOUND, corruption or transaction errors. */
int rl__store_read_record(rl_store *s, rl_txn *txn, const uint8_t *pk, size_t pk_len, int parse, rl_future *f0,
                          rl_record *out);

/* rl__store_key: layout.h. */
/* Turn an unsplitter's defect into RL_E_RECORD_SPLIT_CORRUPT with a detail message in err. */
int rl__record_defect_error(const rl__unsplit_event *ev, rl__errdetail *err);
/* Fill rl_record from an assembled record event (parse, copy pk). RL_OK or parse errors (detail
 * in err, which may be NULL). */
int rl__record_from_event(const rl_store *s, const rl__unsplit_event *ev, rl_record *out, rl__errdetail *err);

/* protobuf_c_message_unpack for flat messages, or NULL ("not handled here", never an error):
 * handles inputs whose every field is known to desc, appears at most once, is a singular
 * (optional / required / proto3) scalar, enum, string or bytes field with its own wire type,
 * and that set every required field; anything else (repeated, nested or oneof fields, unknown
 * or repeated field numbers, wire type mismatches, truncation, over-long varints, desc with
 * more than 64 fields) returns NULL so the caller takes protobuf-c itself. For what it handles,
 * the message equals protobuf-c's (values, has_ flags, NUL-terminated string copies, bytes
 * copies; test record_9_7). Memory from alloc (message, strings, bytes); nothing is freed
 * on a NULL return (alloc's free is not called: for scratch allocators). borrow_bytes 1: bytes
 * fields point into p instead (no copy; the caller keeps p for as long as the message, and never
 * frees the message with protobuf-c, which would free them). */
ProtobufCMessage *rl__pb_unpack_flat(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                                     const uint8_t *p, size_t n, int borrow_bytes);

#endif
