/* record.h — reclayer's record layer: metadata, record stores, the integrity checker.
 *
 * Records are protobuf messages (protobuf-c). Metadata lists the record types (their generated
 * ProtobufCMessageDescriptor), a primary key per type (one or more top-level scalar fields) and
 * VALUE indexes (one or more top-level scalar fields each). A record store keeps records and their
 * index entries under a tuple-encoded key prefix, with the Java Record Layer's layout
 * (docs/file-format.md (Record store layout), docs/design.md §6):
 *
 *   (0,)                       store header (StoreHeader of proto/record_store.proto)
 *   (1, pk..., -1)             record version: tuple(versionstamp), when the store keeps versions
 *   (1, pk..., 0)              the record's bytes, when at most 100,000 bytes
 *   (1, pk..., 1..n)           100,000-byte chunks of a longer record (split long records)
 *   (2, subspace_key, v..., pk...) VALUE index entry (primary-key columns already among the indexed
 *                              values left out), empty value
 *   (4,)                       record count, 8-byte little-endian, updated with atomic ADD
 *   (5, index_name)            index state; no key while the index is readable
 *
 * A stored record is the encoding of the union message of the metadata (the Java Record Layer's
 * RecordTypeUnion): one length-delimited field whose number is the record type's position in the
 * metadata (from 1) and whose payload is the record's own encoding.
 *
 * Primary keys cross this API as packed FoundationDB tuples (bytes): pack them with the tuple
 * layer, or take them from rl_record.pk.
 *
 * Every store operation takes an rl_txn: the caller runs it in rl_db_run or in its own
 * transaction, and nothing is written unless that transaction commits. Threads: a built
 * rl_metadata and an opened rl_store are read-only and may be shared by threads; each rl_txn is
 * used by one thread at a time (kv.h).
 *
 * Errors: the codes of reclayer/error.h. The record layer's own are RL_E_RECORD_* (3500–3506);
 * rl_store_errmsg(s) gives the detail message of the last failed call on the store s, and
 * rl_metadata_errmsg(md) that of the metadata (the rules are in reclayer/error.h).
 */
#ifndef RECLAYER_RECORD_H
#define RECLAYER_RECORD_H

#include <protobuf-c/protobuf-c.h>

#include "reclayer/common.h"
#include "reclayer/error.h"
#include "reclayer/kv.h"

typedef struct rl_metadata rl_metadata;
typedef struct rl_store rl_store;

/* Records longer than this (serialized) are split into chunks of this size (Java's
 * SPLIT_RECORD_SIZE). */
#define RL_RECORD_SPLIT_SIZE 100000
/* The store format this library writes in the header (refuses newer ones). */
#define RL_STORE_FORMAT_VERSION 1

/* ---- Metadata ---------------------------------------------------------------------------- */

/* rl_metadata_new — an empty metadata builder (metadata version 0).
 * [out] out: free with rl_metadata_free. RL_OK or RL_E_OUT_OF_MEMORY. */
RL_API int rl_metadata_new(rl_metadata **out);
/* rl_metadata_free — free the metadata. Stores opened with it must be freed first. NULL ok. */
RL_API void rl_metadata_free(rl_metadata *md);

/* rl_metadata_add_type — add a record type.
 * [in] desc: the type's generated descriptor; borrowed, must outlive the metadata (generated
 *      descriptors are static). [in] pk_fields, n_pk: names of the primary-key fields, in key
 *      order (copied).
 * The type's union field number is its position among the types (first type: 1).
 * Errors: RL_E_RECORD_METADATA_INVALID with a detail (rl_metadata_errmsg) naming the problem:
 * no primary key, an unknown field, a repeated or nested-message field in the key, a type added
 * twice, metadata already built; RL_E_OUT_OF_MEMORY. A failed call changes nothing. */
RL_API int rl_metadata_add_type(rl_metadata *md, const ProtobufCMessageDescriptor *desc, const char *const *pk_fields,
                                int n_pk);

/* rl_metadata_add_value_index — add a VALUE index on fields of a record type.
 * [in] type_name: the type's full protobuf name ("reclayer.Order") or short name ("Order").
 * [in] index_name: unique among the metadata's indexes. [in] fields, n_fields: indexed fields in
 * order. [in] subspace_key: the index's subspace key (a string tuple element), NULL for the name.
 * All strings are copied. Errors: RL_E_RECORD_METADATA_INVALID (unknown type or field, repeated or
 * nested-message field, duplicate index name or subspace key, no fields, already built) with a
 * detail; RL_E_OUT_OF_MEMORY. A failed call changes nothing. */
RL_API int rl_metadata_add_value_index(rl_metadata *md, const char *type_name, const char *index_name,
                                       const char *const *fields, int n_fields, const char *subspace_key);

/* rl_metadata_set_version — the metadata version recorded in (and checked against) store
 * headers. */
RL_API void rl_metadata_set_version(rl_metadata *md, int version);
RL_API int rl_metadata_version(const rl_metadata *md);

/* rl_metadata_build — validate and freeze: at least one record type. After RL_OK the metadata
 * is read-only (further add calls fail) and may be given to stores. RL_E_RECORD_METADATA_INVALID
 * with a detail otherwise. */
RL_API int rl_metadata_build(rl_metadata *md);

/* rl_metadata_errmsg — the detail of the last failed call on md, or of a failed rl_store_new
 * given md ("" if none has failed); owned by md, valid until the next call on it (error.h). */
RL_API const char *rl_metadata_errmsg(const rl_metadata *md);

/* ---- Stores ------------------------------------------------------------------------------ */

/* Store flags, used when rl_store_open creates the store; an existing store's header decides. */
#define RL_STORE_SPLIT_LONG_RECORDS 0x1 /* records > 100,000 bytes are split (else refused) */
#define RL_STORE_RECORD_VERSIONS 0x2    /* each save writes the record's versionstamp */
#define RL_STORE_ALLOW_DEFECTS 0x4      /* the header allows deliberate corruption (tests, rl) */

/* A loaded record. Caller-owned struct: initialise with {0}; rl_record_release frees what the
 * library put in it. */
typedef struct {
    const ProtobufCMessageDescriptor *type; /* the record's type (borrowed from the metadata) */
    ProtobufCMessage *msg;                  /* the decoded record (owned) */
    uint8_t *pk;                            /* packed primary-key tuple (owned) */
    size_t pk_len;
    int has_version;     /* a version key was present */
    uint8_t version[12]; /* 10-byte global (commit version, batch order) + 2-byte local */
    size_t stored_len;   /* bytes of the stored union encoding */
    int n_chunks;        /* 0: stored whole at suffix 0; n: split in n chunks */
} rl_record;

/* rl_record_release — free the contents of r and zero it. NULL and zeroed records are fine. */
RL_API void rl_record_release(rl_record *r);

/* rl_store_new — a store handle for the key prefix prefix[0..prefix_len) (a packed tuple, e.g.
 * ("bench", "orders")) with the built metadata md (borrowed: must outlive the store).
 * flags: RL_STORE_* bits, used if the store is created. Unknown bits: RL_E_INVALID_ARGUMENT.
 * The handle is not usable until rl_store_open succeeds. [out] out: free with rl_store_free.
 * Errors: RL_E_INVALID_ARGUMENT (metadata not built, prefix not a valid tuple or empty, bad
 * flags), RL_E_OUT_OF_MEMORY; the detail is on md (rl_metadata_errmsg), there being no store. */
RL_API int rl_store_new(const rl_metadata *md, const void *prefix, size_t prefix_len, uint32_t flags, rl_store **out);
RL_API void rl_store_free(rl_store *s);

/* rl_store_open — read the store header at (0,) in txn. Absent: write a new header (format
 * version, metadata version, the flags given to rl_store_new). Present: check it and adopt its
 * flags. Call once (not from several threads at once); the handle then serves any transaction.
 * Errors: RL_E_STORE_METADATA_MISMATCH (header of a newer format, or a metadata version other
 * than md's), RL_E_CORRUPT_DATA (header does not parse), and the transaction's errors. */
RL_API int rl_store_open(rl_store *s, rl_txn *txn);
/* rl_store_flags — the store's effective RL_STORE_* flags (after rl_store_open). */
RL_API uint32_t rl_store_flags(const rl_store *s);
/* rl_store_prefix — the store's key prefix (borrowed from s). */
RL_API rl_slice rl_store_prefix(const rl_store *s);
/* rl_store_metadata — the metadata given to rl_store_new. */
RL_API const rl_metadata *rl_store_metadata(const rl_store *s);

/* rl_store_save — insert or replace msg (its type must be in the metadata). Replacing removes
 * the old version's index entries and every key of the old record first. With record versions,
 * the record's versionstamp is written through SET_VERSIONSTAMPED_VALUE.
 * [out] out_existed: may be NULL; 1 if a record with that primary key was replaced.
 * Errors (nothing is written): RL_E_RECORD_TYPE_UNKNOWN, RL_E_RECORD_PK_MISSING,
 * RL_E_KEY_TOO_LARGE (a record or index key over 10,000 bytes), RL_E_RECORD_TOO_LARGE (over
 * 100,000 bytes without split long records), RL_E_RECORD_PARSE_FAILED /
 * RL_E_RECORD_SPLIT_CORRUPT (the old record is corrupt), transaction errors. */
RL_API int rl_store_save(rl_store *s, rl_txn *txn, const ProtobufCMessage *msg, int *out_existed);

/* rl_store_load — load the record with primary key pk (packed tuple).
 * [out] out: filled on RL_OK (release with rl_record_release); zeroed otherwise.
 * Returns RL_OK, RL_E_NOT_FOUND (expected outcome), RL_E_RECORD_SPLIT_CORRUPT (bad chunks or
 * version key), RL_E_RECORD_PARSE_FAILED, RL_E_RECORD_TYPE_UNKNOWN (union field of no type), or
 * transaction errors. */
RL_API int rl_store_load(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len, rl_record *out);

/* rl_store_load_many — load n records, issuing all reads before waiting for any (pipelined).
 * [out] out[0..n): out[i].msg is NULL when pk i has no record. Returns RL_OK or the first error
 * (then every out[i] is released). */
RL_API int rl_store_load_many(rl_store *s, rl_txn *txn, const rl_slice *pks, int n, rl_record *out);

/* rl_store_exists — RL_OK if a record with primary key pk exists, RL_E_NOT_FOUND if not. Reads
 * the record's keys without parsing them. */
RL_API int rl_store_exists(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len);

/* rl_store_delete — delete the record with primary key pk and its index entries.
 * RL_OK, RL_E_NOT_FOUND (nothing to delete; an expected outcome), or load's errors. */
RL_API int rl_store_delete(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len);

/* rl_store_count — the record count kept at (4,). */
RL_API int rl_store_count(rl_store *s, rl_txn *txn, int64_t *out);

/* One page of a record scan. Caller-owned: zero it; rl_record_page_release frees it. */
typedef struct {
    rl_record *records; /* n records in scan order (owned) */
    int n;
    uint8_t *continuation; /* NULL/0 when the range is exhausted; else pass to the next call */
    size_t continuation_len;
} rl_record_page;
RL_API void rl_record_page_release(rl_record_page *p);

/* rl_store_scan — records whose record keys lie in [low, high): low and high are packed
 * primary-key tuples (NULL = unbounded); a primary key that extends high is excluded.
 * flags: RL_REVERSE, RL_SNAPSHOT. limit: records per page (0 = all). continuation: from the
 * previous page of the same scan (NULL/0 for the first page).
 * [out] out: the page (release with rl_record_page_release).
 * Errors: RL_E_CONTINUATION_INVALID (not a primary key inside the bounds),
 * RL_E_RECORD_SPLIT_CORRUPT, RL_E_RECORD_PARSE_FAILED, transaction errors. */
RL_API int rl_store_scan(rl_store *s, rl_txn *txn, const void *low, size_t low_len, const void *high, size_t high_len,
                         int flags, int limit, const void *continuation, size_t continuation_len, rl_record_page *out);

/* rl_store_decode_record — assemble one record from the key-values of its record range (the
 * version key and chunks of one primary key, ascending, e.g. a mapped-range secondary result).
 * [out] out as rl_store_load. Returns RL_OK, RL_E_NOT_FOUND (no data key), or the corruption
 * errors of rl_store_load. Never reads outside the given arrays. */
RL_API int rl_store_decode_record(const rl_store *s, const rl_keyvalue *kvs, int n, rl_record *out);

/* rl_store_errmsg — the detail of the last failed call on s ("" if none has failed): every
 * rl_store_* call above that fails, rl_store_check, rl_store_inject_defect and a failed
 * rl_cursor_open on s. Owned by s, valid until the next call on s; a success leaves it. When
 * threads share s, read it from the thread whose call failed (reclayer/error.h). "" for NULL. */
RL_API const char *rl_store_errmsg(const rl_store *s);

/* ---- Integrity checker ------------------------------------------------------------------- */

/* One defect found by the checker. Strings are owned by the report. */
typedef struct {
    const char *kind;    /* delete-chunk, split-order, multiple-unsplit, stray-suffix, version-key,
                          * bad-version, unparsable-record, orphan-index-entry,
                          * stale-index-entry, missing-index-entry, bad-key */
    char *key;           /* the key's printable tuple form (after the store prefix) */
    const char *message; /* fixed text, e.g. "Found split record without start" */
} rl_defect;

/* The checker's findings. Caller-owned: zero it; rl_check_report_release frees it. */
typedef struct {
    rl_defect *defects;
    int n_defects;
    int64_t records;       /* records read whole (parsed or not) */
    int64_t index_entries; /* index entries read */
} rl_check_report;
RL_API void rl_check_report_release(rl_check_report *r);
/* rl_check_report_print — one line per defect, "defect <kind> key=<key> <message>", then
 * "records = N", "index_entries = N" and "integrity_ok = true|false". [in] file: a FILE *. */
RL_API void rl_check_report_print(const rl_check_report *r, void *file);

/* rl_store_check — walk the whole store in txn (records, then every index) and list every
 * defect: split record without its first chunk (delete-chunk, "Found split record without
 * start"), chunks with a gap (split-order, "Split record segments out of order"), an unsplit
 * value beside chunks (multiple-unsplit, "More than one unsplit value."), a key with a suffix
 * that is not -1, 0 or a chunk number (stray-suffix), a version key without its record
 * (version-key), a record that does not parse (unparsable-record), an index entry whose record
 * is missing (orphan-index-entry) or does not produce it (stale-index-entry), a record missing
 * an index entry (missing-index-entry).
 * [out] out: the report (release with rl_check_report_release). Returns RL_OK when the walk
 * completed, whatever it found, or a transaction error / RL_E_OUT_OF_MEMORY. */
RL_API int rl_store_check(rl_store *s, rl_txn *txn, rl_check_report *out);

/* Defects that rl_record_inject_defect can make (CLI `rl inject-defect`). */
typedef enum {
    RL_DEFECT_DELETE_CHUNK = 1, /* clear the first chunk (suffix 1, or 0 when stored whole) */
    RL_DEFECT_STRAY_SUFFIX = 2, /* add a key (1, pk..., "stray") */
    RL_DEFECT_VERSION_KEY = 3,  /* replace the record by a lone version key */
} rl_defect_kind;

/* rl_store_inject_defect — corrupt the record pk on purpose. Refused with
 * RL_E_CLIENT_INVALID_OPERATION unless the store allows defects or force is RL_DEFECT_FORCE.
 * RL_E_NOT_FOUND if there is no such record. */
#define RL_DEFECT_FORCE 0x1
RL_API int rl_store_inject_defect(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len, rl_defect_kind kind,
                                  int flags);

#endif
