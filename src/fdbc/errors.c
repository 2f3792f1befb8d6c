/* errors.c — FoundationDB's error functions (fdb_get_error, fdb_error_predicate) and the mapping
 * of reclayer's codes onto FoundationDB's.
 *
 * Invariants:
 *   1. Every code this library hands out is a FoundationDB code. reclayer already uses
 *      FoundationDB's numbers for the conditions the two share (1000-2999, 4100), which pass
 *      unchanged; reclayer's own conditions (3000-3999) are mapped by fdbc_err to the nearest
 *      FoundationDB condition (table below, documented in docs/design.md §8.8.1, Errors).
 *   2. The predicates are FoundationDB's exactly (its fdb_c documents them): maybe_committed is
 *      commit_unknown_result and cluster_version_changed; retryable_not_committed is the list in
 *      fdbc_pred; retryable is either.
 *   3. fdb_get_error returns static text, never NULL: FoundationDB's message for every code
 *      either table knows, "An unknown error occurred" otherwise, "Success" for 0.
 */
#include <stddef.h>

#include "fdbc/fdbc.h"

/* Messages of FoundationDB codes that reclayer's table does not hold. */
static const struct {
    int code;
    const char *msg;
} extra_msgs[] = {
    {1038, "Database is locked"},
    {1039, "The protocol version of the cluster has changed"},
    {1042, "CommitProxy commit memory limit exceeded"},
    {1051, "Batch GRV request rate limit exceeded"},
    {1078, "GetReadVersion proxy memory limit exceeded"},
    {1102, "Future has been released"},
    {1213, "Transaction tag is being throttled"},
    {1223, "Exceeded maximum proxy tag throttling duration"},
    {1235, "Transaction throttled due to hot shard"},
    {1500, "Platform error"},
    {1501, "Large block allocation failed"},
    {1515, "No cluster file found in current directory or default location"},
    {1522, "A structurally corrupt data file was detected"},
    {2008, "Action not possible before the network is configured"},
    {2009, "Network can be configured only once"},
    {2015, "Future not ready"},
    {2016, "Future not an error"},
    {2023, "Attempted to commit a transaction specified as read-only"},
    {2025, "Network can only be started once"},
    {2026, "Detected a deadlock in a callback called from the network thread"},
    {2200, "API version is not set"},
    {2201, "API version may be set only once"},
    {2202, "API version not valid"},
    {2203, "API version not supported"},
    {2204, "Failed to load a required FDB API function."},
    {4000, "An unknown error occurred"},
};

FDBC_API const char *fdb_get_error(fdb_error_t code) {
    if (code == 0) return "Success";
    if (code < 3000 || code > 3999) {
        if (rl_error_is_known(code)) return rl_error_message(code);
    }
    for (size_t i = 0; i < sizeof extra_msgs / sizeof extra_msgs[0]; i++)
        if (extra_msgs[i].code == code) return extra_msgs[i].msg;
    return "An unknown error occurred";
}

int fdbc_pred(int predicate, int code) {
    switch (predicate) {
    case FDBC_PRED_RETRYABLE:
        return fdbc_pred(FDBC_PRED_MAYBE_COMMITTED, code) || fdbc_pred(FDBC_PRED_RETRYABLE_NOT_COMMITTED, code);
    case FDBC_PRED_MAYBE_COMMITTED:
        return code == 1021 /* commit_unknown_result */ || code == 1039 /* cluster_version_changed */;
    case FDBC_PRED_RETRYABLE_NOT_COMMITTED:
        switch (code) {
        case 1020: /* not_committed */
        case 1007: /* transaction_too_old */
        case 1009: /* future_version */
        case 1038: /* database_locked */
        case 1078: /* grv_proxy_memory_limit_exceeded */
        case 1042: /* commit_proxy_memory_limit_exceeded */
        case 1235: /* transaction_throttled_hot_shard */
        case 1051: /* batch_transaction_throttled */
        case 1037: /* process_behind */
        case 1213: /* tag_throttled */
        case 1223: /* proxy_tag_throttled */ return 1;
        }
        return 0;
    }
    return 0;
}

FDBC_API fdb_bool_t fdb_error_predicate(int predicate_test, fdb_error_t code) {
    return fdbc_pred(predicate_test, code);
}

/* reclayer's own codes (3000-3999) mapped to FoundationDB's (invariant 1). */
int fdbc_err(int rc) {
    if (rc == 0) return 0;
    if (rc < 3000 || rc > 3999) return rc;
    switch (rc) {
    case RL_E_INVALID_ARGUMENT: return FDBC_E_CLIENT_INVALID_OPERATION;
    case RL_E_OUT_OF_MEMORY: return FDBC_E_LARGE_ALLOC_FAILED;
    case RL_E_CORRUPT_DATA:
    case RL_E_LOG_CORRUPT:
    case RL_E_CHECKPOINT_CORRUPT: return FDBC_E_FILE_CORRUPT;
    case RL_E_NO_SPACE:
    case RL_E_DATABASE_LOCKED_BY_PROCESS: return FDBC_E_IO_ERROR;
    case RL_E_BAD_URL: return FDBC_E_CONNECTION_STRING_INVALID;
    case RL_E_READ_ONLY_DATABASE: return FDBC_E_TRANSACTION_READ_ONLY;
    case RL_E_ENGINE_KEY_TOO_LARGE: return RL_E_KEY_TOO_LARGE;
    case RL_E_MALFORMED_FRAME:
    case RL_E_PROTOCOL_UNEXPECTED_MESSAGE: return RL_E_CONNECTION_FAILED;
    case RL_E_SERVER_UNAVAILABLE: return RL_E_PROCESS_BEHIND; /* retryable, not committed */
    case RL_E_SYSTEM_KEY_WRITE: return FDBC_E_KEY_OUTSIDE_LEGAL_RANGE;
    case RL_E_TUPLE_TRUNCATED:
    case RL_E_TUPLE_MALFORMED:
    case RL_E_TUPLE_UNSUPPORTED_TYPE:
    case RL_E_TUPLE_VALUE_OVERFLOW:
    case RL_E_TUPLE_NO_INCOMPLETE_VERSIONSTAMP:
    case RL_E_TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS: return FDBC_E_CLIENT_INVALID_OPERATION;
    }
    return FDBC_E_INTERNAL_ERROR; /* not_found, record layer and tool codes: never expected here */
}
