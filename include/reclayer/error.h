/* error.h — the one error table of reclayer: codes, names, messages, retryability.
 *
 * Every function of the library that can fail returns an int: RL_OK (0) on success, or one of the
 * positive codes below. The table is an X-macro so that the enum, the names, the messages and the
 * retryable flags are generated from one list and cannot drift apart.
 *
 * Numbering (docs/design.md §2):
 *   1000–2999  FoundationDB's own numbers, for the conditions FoundationDB has (and 4100, 6000–6005,
 *              its internal and authorization errors). The FoundationDB backend passes
 *              FoundationDB's codes through unchanged.
 *   3000–3499  reclayer: base, tuple, storage, commit, network and KV conditions FoundationDB lacks.
 *   3500–3799  reclayer: record layer and queries.
 *   3800–3999  reclayer: tools (rl, rlkvd, rlbench).
 *
 * "Expected outcomes" (RL_NOT_FOUND, RL_ALREADY_EXISTS) are codes too; callers must not log them
 * as failures.
 *
 * Error details. Beyond its code, a failure leaves a detail message (file names, offsets, the
 * field or key at fault) on the handle the call was made on, read with that handle's errmsg
 * function: rl_metadata_errmsg(md), rl_store_errmsg(s), rl_cursor_errmsg(c). The same rules hold
 * for every handle:
 *   - Every failed call on a handle sets its message; a call that succeeds or returns an expected
 *     outcome leaves it as it was, and so does any call on another handle.
 *   - The string is owned by the handle and stays valid until the next call on that handle (the
 *     pointer until the handle is freed). Copy it to keep it.
 *   - Before a handle exists: a call that creates a handle and fails leaves its detail on the
 *     parent handle it was given — rl_store_new's on the metadata, rl_cursor_open's on the store.
 *     rl_db_open has no parent: its detail is per thread, rl_last_error_detail() (below), valid
 *     until the thread's next rl_db_open; so is that of the tuple functions (tuple.h).
 *   - Handles shared by threads (a built metadata, an open store) serialise the writes of their
 *     message; read the detail of a call from the thread that made it, before another thread's
 *     call on the handle can fail (otherwise the message may be that other call's).
 */
#ifndef RECLAYER_ERROR_H
#define RECLAYER_ERROR_H

#include "reclayer/common.h"

/* X(ENUM_SUFFIX, code, "name", "message", retryable) */
#define RL_ERR_MAP(X)                                                                                                  \
    /* FoundationDB's numbers. */                                                                                      \
    X(OPERATION_FAILED, 1000, "operation_failed", "Operation failed", 0)                                               \
    X(WRONG_SHARD_SERVER, 1001, "wrong_shard_server", "Shard is not available from this server", 1)                    \
    X(TIMED_OUT, 1004, "timed_out", "Operation timed out", 0)                                                          \
    X(TRANSACTION_TOO_OLD, 1007, "transaction_too_old", "Transaction is too old to perform reads or be committed", 1)  \
    X(FUTURE_VERSION, 1009, "future_version", "Request for future version", 1)                                         \
    X(NOT_COMMITTED, 1020, "not_committed", "Transaction not committed due to conflict with another transaction", 1)   \
    X(COMMIT_UNKNOWN_RESULT, 1021, "commit_unknown_result", "Transaction may or may not have committed", 1)            \
    X(TRANSACTION_CANCELLED, 1025, "transaction_cancelled", "Operation aborted because the transaction was cancelled", \
      0)                                                                                                               \
    X(TRANSACTION_TIMED_OUT, 1031, "transaction_timed_out", "Operation aborted because the transaction timed out", 0)  \
    X(TOO_MANY_WATCHES, 1032, "too_many_watches", "Too many watches currently set", 0)                                 \
    X(WATCHES_DISABLED, 1034, "watches_disabled", "Watches cannot be set if read your writes is disabled", 0)          \
    X(ACCESSED_UNREADABLE, 1036, "accessed_unreadable", "Read or wrote an unreadable key", 0)                          \
    X(PROCESS_BEHIND, 1037, "process_behind", "Storage process does not have recent mutations", 1)                     \
    /* Retryable conditions of a FoundationDB cluster that reach reclayer through the fdb:        \
     * backend (FoundationDB's retryable predicate; reclayer's own backends never produce them). */                    \
    X(DATABASE_LOCKED, 1038, "database_locked", "Database is locked", 1)                                               \
    X(CLUSTER_VERSION_CHANGED, 1039, "cluster_version_changed", "The protocol version of the cluster has changed", 1)  \
    X(COMMIT_PROXY_MEMORY_LIMIT_EXCEEDED, 1042, "commit_proxy_memory_limit_exceeded",                                  \
      "CommitProxy commit memory limit exceeded", 1)                                                                   \
    X(BATCH_TRANSACTION_THROTTLED, 1051, "batch_transaction_throttled", "Batch GRV request rate limit exceeded", 1)    \
    X(GRV_PROXY_MEMORY_LIMIT_EXCEEDED, 1078, "grv_proxy_memory_limit_exceeded",                                        \
      "GetReadVersion proxy memory limit exceeded", 1)                                                                 \
    X(TAG_THROTTLED, 1213, "tag_throttled", "Transaction tag is being throttled", 1)                                   \
    X(INVALID_CLUSTER_ID, 1217, "invalid_cluster_id", "Attempted to join cluster with a different cluster ID", 0)      \
    X(PROXY_TAG_THROTTLED, 1223, "proxy_tag_throttled", "Exceeded maximum proxy tag throttling duration", 1)           \
    X(TRANSACTION_THROTTLED_HOT_SHARD, 1235, "transaction_throttled_hot_shard",                                        \
      "Transaction throttled due to hot shard", 1)                                                                     \
    X(OPERATION_CANCELLED, 1101, "operation_cancelled", "Asynchronous operation cancelled", 0)                         \
    X(IO_ERROR, 1510, "io_error", "Disk i/o operation failed", 0)                                                      \
    X(FILE_NOT_FOUND, 1511, "file_not_found", "File not found", 0)                                                     \
    X(BIND_FAILED, 1512, "bind_failed", "Unable to bind to network", 0)                                                \
    X(CONNECTION_FAILED, 1026, "connection_failed", "Network connection failed", 1)                                    \
    X(CLIENT_INVALID_OPERATION, 2000, "client_invalid_operation", "Invalid API call", 0)                               \
    X(KEY_OUTSIDE_LEGAL_RANGE, 2004, "key_outside_legal_range", "Key outside legal range", 0)                          \
    X(INVERTED_RANGE, 2005, "inverted_range", "Range begin key larger than end key", 0)                                \
    X(INVALID_OPTION_VALUE, 2006, "invalid_option_value", "Option set with an invalid value", 0)                       \
    X(INVALID_OPTION, 2007, "invalid_option", "Option not valid in this context", 0)                                   \
    X(READ_VERSION_ALREADY_SET, 2010, "read_version_already_set", "Transaction already has a read version set", 0)     \
    X(VERSION_INVALID, 2011, "version_invalid", "Version not valid", 0)                                                \
    X(RANGE_LIMITS_INVALID, 2012, "range_limits_invalid", "Range limits not valid", 0)                                 \
    X(USED_DURING_COMMIT, 2017, "used_during_commit", "Operation issued while a commit was outstanding", 0)            \
    X(INVALID_MUTATION_TYPE, 2018, "invalid_mutation_type", "Unrecognized atomic mutation type", 0)                    \
    X(TRANSACTION_INVALID_VERSION, 2020, "transaction_invalid_version",                                                \
      "Transaction does not have a valid commit version", 0)                                                           \
    X(NO_COMMIT_VERSION, 2021, "no_commit_version",                                                                    \
      "Transaction is read-only and therefore does not have a commit version", 0)                                      \
    X(MAPPER_BAD_INDEX, 2030, "mapper_bad_index", "The index in K[] or V[] is not a valid number or out of range", 0)  \
    X(MAPPER_NO_SUCH_KEY, 2031, "mapper_no_such_key", "A mapped key is not set in database", 0)                        \
    X(MAPPER_BAD_RANGE_DESCRIPTOR, 2032, "mapper_bad_range_decriptor",                                                 \
      "\"{...}\" must be the last element of the mapper tuple", 0)                                                     \
    X(QUICK_GET_KEY_VALUES_HAS_MORE, 2033, "quick_get_key_values_has_more",                                            \
      "One of the mapped range queries is too large", 0)                                                               \
    X(QUICK_GET_VALUE_MISS, 2034, "quick_get_value_miss", "Found a mapped key that is not served in the same SS", 0)   \
    X(QUICK_GET_KEY_VALUES_MISS, 2035, "quick_get_key_values_miss",                                                    \
      "Found a mapped range that is not served in the same SS", 0)                                                     \
    X(GET_MAPPED_KEY_VALUES_HAS_MORE, 2038, "get_mapped_key_values_has_more",                                          \
      "getMappedRange does not support continuation for now", 0)                                                       \
    X(GET_MAPPED_RANGE_READS_YOUR_WRITES, 2039, "get_mapped_range_reads_your_writes",                                  \
      "getMappedRange tries to read data that were previously written in the transaction", 0)                          \
    X(KEY_NOT_TUPLE, 2041, "key_not_tuple", "The key cannot be parsed as a tuple", 0)                                  \
    X(VALUE_NOT_TUPLE, 2042, "value_not_tuple", "The value cannot be parsed as a tuple", 0)                            \
    X(MAPPER_NOT_TUPLE, 2043, "mapper_not_tuple", "The mapper cannot be parsed as a tuple", 0)                         \
    X(INCOMPATIBLE_PROTOCOL_VERSION, 2100, "incompatible_protocol_version", "Incompatible protocol version", 0)        \
    X(TRANSACTION_TOO_LARGE, 2101, "transaction_too_large", "Transaction exceeds byte limit", 0)                       \
    X(KEY_TOO_LARGE, 2102, "key_too_large", "Key length exceeds limit", 0)                                             \
    X(VALUE_TOO_LARGE, 2103, "value_too_large", "Value length exceeds limit", 0)                                       \
    X(CONNECTION_STRING_INVALID, 2104, "connection_string_invalid", "Connection string invalid", 0)                    \
    X(ADDRESS_IN_USE, 2105, "address_in_use", "Local address in use", 0)                                               \
    X(UNSUPPORTED_OPERATION, 2108, "unsupported_operation", "Operation is not supported", 0)                           \
    X(EXACT_MODE_WITHOUT_LIMITS, 2210, "exact_mode_without_limits",                                                    \
      "EXACT streaming mode requires limits, but none were given", 0)                                                  \
    X(INTERNAL_ERROR, 4100, "internal_error", "An internal error occurred", 0)                                         \
    X(PERMISSION_DENIED, 6000, "permission_denied", "Client tried to access unauthorized data", 0)                     \
    X(UNAUTHORIZED_ATTEMPT, 6001, "unauthorized_attempt",                                                              \
      "A untrusted client tried to send a message to a private endpoint", 0)                                           \
    /* reclayer: base, tuple, storage, commit, network, KV. */                                                         \
    X(INVALID_ARGUMENT, 3000, "invalid_argument", "Invalid argument", 0)                                               \
    X(OUT_OF_MEMORY, 3001, "out_of_memory", "Out of memory", 0)                                                        \
    X(CORRUPT_DATA, 3002, "corrupt_data", "Stored data is corrupt", 0)                                                 \
    X(NOT_FOUND, 3003, "not_found", "Not found (an expected outcome)", 0)                                              \
    X(ALREADY_EXISTS, 3004, "already_exists", "Already exists (an expected outcome)", 0)                               \
    X(NO_SPACE, 3005, "no_space", "No space left on device", 0)                                                        \
    X(DATABASE_LOCKED_BY_PROCESS, 3006, "database_locked_by_process",                                                  \
      "The database directory is locked by another process", 0)                                                        \
    X(BAD_URL, 3007, "bad_url", "Database URL not understood (expected mem:, file:DIR, cluster:FILE or fdb:FILE)", 0)  \
    X(READ_ONLY_DATABASE, 3008, "read_only_database", "The database was opened read-only", 0)                          \
    X(TUPLE_TRUNCATED, 3010, "tuple_truncated", "Encoded tuple ends in the middle of an element", 0)                   \
    X(TUPLE_MALFORMED, 3011, "tuple_malformed", "Encoded tuple is malformed", 0)                                       \
    X(TUPLE_UNSUPPORTED_TYPE, 3012, "tuple_unsupported_type", "Tuple element type code is not supported", 0)           \
    X(TUPLE_VALUE_OVERFLOW, 3013, "tuple_value_overflow", "Tuple integer does not fit the requested type", 0)          \
    X(TUPLE_NO_INCOMPLETE_VERSIONSTAMP, 3014, "tuple_no_incomplete_versionstamp",                                      \
      "Tuple has no incomplete versionstamp", 0)                                                                       \
    X(TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS, 3015, "tuple_many_incomplete_versionstamps",                                \
      "Tuple has more than one incomplete versionstamp", 0)                                                            \
    X(LOG_CORRUPT, 3020, "log_corrupt", "Write-ahead log record is corrupt", 0)                                        \
    X(CHECKPOINT_CORRUPT, 3021, "checkpoint_corrupt", "Checkpoint file is corrupt", 0)                                 \
    X(ENGINE_KEY_TOO_LARGE, 3022, "engine_key_too_large", "Key is longer than the storage engine accepts", 0)          \
    X(MALFORMED_FRAME, 3030, "malformed_frame", "Malformed protocol frame", 0)                                         \
    X(PROTOCOL_UNEXPECTED_MESSAGE, 3031, "protocol_unexpected_message", "Unexpected protocol message", 0)              \
    X(SERVER_UNAVAILABLE, 3032, "server_unavailable", "No server of the team answered", 1)                             \
    X(SYSTEM_KEY_WRITE, 3040, "system_key_write",                                                                      \
      "Keys beginning with \\xff are written only through admin operations", 0)                                        \
    /* reclayer: record layer and queries. */                                                                          \
    X(RECORD_METADATA_INVALID, 3500, "record_metadata_invalid", "Record metadata is invalid", 0)                       \
    X(RECORD_TYPE_UNKNOWN, 3501, "record_type_unknown", "Unknown record type", 0)                                      \
    X(RECORD_PK_MISSING, 3502, "record_pk_missing", "Record is missing a primary key field", 0)                        \
    X(RECORD_PARSE_FAILED, 3503, "record_parse_failed", "Stored record does not parse", 0)                             \
    X(RECORD_TOO_LARGE, 3504, "record_too_large", "Record is too large for this store", 0)                             \
    X(RECORD_SPLIT_CORRUPT, 3505, "record_split_corrupt", "Split record is malformed", 0)                              \
    X(STORE_METADATA_MISMATCH, 3506, "store_metadata_mismatch", "Store header does not match the metadata", 0)         \
    X(INDEX_ORPHAN_ENTRY, 3520, "index_orphan_entry", "Record not found for index entry", 0)                           \
    X(CONTINUATION_INVALID, 3521, "continuation_invalid", "Continuation is invalid for this scan", 0)                  \
    X(FALLBACK_FAILED, 3522, "fallback_failed", "Fallback cursor failed, cannot fall back again", 0)                   \
    X(INDEX_UNKNOWN, 3523, "index_unknown", "Unknown index", 0)                                                        \
    /* reclayer: tools. */                                                                                             \
    X(USAGE, 3800, "usage", "Command-line usage error", 0)                                                             \
    X(INTEGRITY_DEFECTS, 3801, "integrity_defects", "The integrity checker found defects", 0)

/* The enum: RL_OK is 0, every other member is RL_E_<suffix> = code. */
enum {
    RL_OK = 0,
#define RL__ERR_ENUM(suffix, code, name, msg, retry) RL_E_##suffix = code,
    RL_ERR_MAP(RL__ERR_ENUM)
#undef RL__ERR_ENUM
};

/* rl_error_name — the short snake_case name of an error code ("not_committed").
 * [in] rc  any int. Returns static text; "success" for RL_OK and "unknown_error" for codes not in
 * the table. Never NULL. Thread-safe. */
RL_API const char *rl_error_name(int rc);

/* rl_error_message — the one-line human message of an error code. Returns static text, never NULL;
 * "Success" for RL_OK, "Unknown error" for codes not in the table. Thread-safe. */
RL_API const char *rl_error_message(int rc);

/* rl_error_retryable — 1 if a transaction that failed with rc may be retried from the start
 * (what rl_txn_on_error retries), else 0. RL_OK and unknown codes are not retryable. */
RL_API int rl_error_retryable(int rc);

/* rl_error_is_known — 1 if rc is RL_OK or a code in the table, else 0. */
RL_API int rl_error_is_known(int rc);

/* rl_error_count / rl_error_at — iterate the table (for tests and `rl errors`): entry i in
 * [0, rl_error_count()) has code rl_error_at(i). */
RL_API int rl_error_count(void);
RL_API int rl_error_at(int i);

/* rl_last_error_detail — the detail of the last failure, in this thread, of a call that has no
 * handle to leave it on: rl_db_open (file names, offsets) and the tuple functions of
 * reclayer/tuple.h that say so; "" if none. Each such call clears it when it starts. Valid until
 * the thread's next such call. (Every other call's detail is on its handle: see the top of this
 * file.) */
RL_API const char *rl_last_error_detail(void);

#endif
