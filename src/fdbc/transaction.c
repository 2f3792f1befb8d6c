/* transaction.c — FDBTransaction over rl_txn: every read and write of FoundationDB's C API,
 * options, read versions, commit, versionstamps, on_error, reset and cancel.
 *
 * Semantics follow FoundationDB's client (its RYW transaction) where reclayer's rl_txn already
 * does the same (read-your-writes, conflict ranges, selectors, limits and streaming modes,
 * mapped ranges and 2039, versionstamps, the retry loop); this file adds what the C API shape
 * needs:
 *   1. Void calls (set, clear, clear_range, atomic_op, set_read_version) cannot return an error:
 *      the first one's error is kept (deferred_err) and every later read and the commit fail with
 *      it until reset or on_error, as FoundationDB's deferred errors do. Negative lengths and NULL
 *      pointers with a length are client_invalid_operation (FoundationDB leaves them undefined).
 *   2. Range limits: 0 and -1 mean unlimited, other negative values are range_limits_invalid
 *      (FoundationDB's GetRangeLimits).
 *   3. get_mapped_range needs serializable reads and read-your-writes enabled, else
 *      unsupported_operation (FoundationDB's rule).
 *   4. fdb_transaction_reset restores every option to the database's defaults (FoundationDB's
 *      reset is a new transaction); an option rl_txn_reset cannot undo (access/read system keys,
 *      read-your-writes disabled) makes the reset recreate the rl_txn. on_error keeps every
 *      option (FoundationDB keeps only timeout, retry limit, max retry delay and size limit: a
 *      program that sets options inside its retry loop, as FoundationDB recommends, sees no
 *      difference).
 *   5. on_error retries what FoundationDB's predicate calls retryable; a retryable code reclayer
 *      does not know is retried as not_committed (or commit_unknown_result when it may have
 *      committed), and the future reports the caller's code if the retry limit is reached.
 *      A non-retryable code gives a future holding it and leaves the transaction as it is.
 *   6. READ_SYSTEM_KEYS alone allows reading \xff keys but not writing them (key_outside_legal_range),
 *      ACCESS_SYSTEM_KEYS allows both.
 *   7. Every call takes tr->mu: a transaction may be used from several threads (FoundationDB's
 *      are thread-safe). No call waits for anything but that mutex.
 */
#include <stdlib.h>
#include <string.h>

#include "fdbc/fdbc.h"

#define DEFAULT_MAX_RETRY_DELAY_MS 1000

/* ---- Creation, defaults, reset ----------------------------------------------------------- */

/* Apply the database's transaction defaults (or the built-in ones) to tr->txn. */
static void apply_defaults(FDBTransaction *tr, int force) {
    FDBDatabase *d = tr->d;
    pthread_mutex_lock(&d->mu);
    int has = d->has_defaults;
    int64_t to = d->def_timeout_ms, rl = d->def_retry_limit, md = d->def_max_retry_delay_ms, sz = d->def_size_limit;
    pthread_mutex_unlock(&d->mu);
    if (!has && !force) return;
    rl_txn_set_option(tr->txn, RL_TXN_OPT_TIMEOUT_MS, to);
    rl_txn_set_option(tr->txn, RL_TXN_OPT_RETRY_LIMIT, rl);
    rl_txn_set_option(tr->txn, RL_TXN_OPT_MAX_RETRY_DELAY_MS, md ? md : DEFAULT_MAX_RETRY_DELAY_MS);
    rl_txn_set_option(tr->txn, RL_TXN_OPT_SIZE_LIMIT, sz ? sz : RL_TXN_SIZE_LIMIT);
}

FDBC_API fdb_error_t fdb_database_create_transaction(FDBDatabase *d, FDBTransaction **out) {
    if (!d || !out) return FDBC_E_CLIENT_INVALID_OPERATION;
    *out = NULL;
    FDBTransaction *tr = calloc(1, sizeof *tr);
    if (!tr) return FDBC_E_LARGE_ALLOC_FAILED;
    int rc = rl_txn_begin(d->db, &tr->txn);
    if (rc) {
        free(tr);
        return fdbc_err(rc);
    }
    pthread_mutex_init(&tr->mu, NULL);
    pthread_mutex_lock(&d->mu);
    d->refs++;
    pthread_mutex_unlock(&d->mu);
    tr->d = d;
    apply_defaults(tr, 0);
    *out = tr;
    return 0;
}

/* Forget the shim's per-attempt state (what reset and on_error clear). Under tr->mu. */
static void forget_state(FDBTransaction *tr) {
    tr->deferred_err = 0;
    tr->used = 0;
    tr->has_rv = 0;
    tr->approx_size = 0;
}

FDBC_API void fdb_transaction_reset(FDBTransaction *tr) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    forget_state(tr);
    if (tr->sticky || !tr->txn) { /* invariant 4: a new rl_txn */
        rl_txn_free(tr->txn);
        tr->txn = NULL;
        int rc = rl_txn_begin(tr->d->db, &tr->txn);
        if (rc) tr->deferred_err = fdbc_err(rc);
        else apply_defaults(tr, 0);
        tr->sticky = tr->access_system_keys = tr->read_system_keys = tr->ryw_disabled = tr->include_port = 0;
    } else {
        rl_txn_reset(tr->txn);
        apply_defaults(tr, 1);
    }
    pthread_mutex_unlock(&tr->mu);
}

FDBC_API void fdb_transaction_destroy(FDBTransaction *tr) {
    if (!tr) return;
    rl_txn_free(tr->txn); /* reads in flight complete with transaction_cancelled */
    FDBDatabase *d = tr->d;
    pthread_mutex_destroy(&tr->mu);
    free(tr);
    fdbc_database_unref(d);
}

FDBC_API void fdb_transaction_cancel(FDBTransaction *tr) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    rl_txn_cancel(tr->txn);
    pthread_mutex_unlock(&tr->mu);
}

/* ---- Options ----------------------------------------------------------------------------- */

FDBC_API fdb_error_t fdb_transaction_set_option(FDBTransaction *tr, int option, const uint8_t *value,
                                                int value_length) {
    if (!tr) return FDBC_E_CLIENT_INVALID_OPERATION;
    if (value_length < 0) return FDBC_E_INVALID_OPTION_VALUE;
    int64_t v = 0;
    int rc = 0;
    pthread_mutex_lock(&tr->mu);
    if (!tr->txn) {
        rc = tr->deferred_err;
        goto out;
    }
    switch (option) {
    case 500: /* timeout */
    case 501: /* retry_limit */
    case 502: /* max_retry_delay */
    case 503: /* size_limit */
        if ((rc = fdbc_int_param(value, value_length, &v))) goto out;
        if (v > 2147483647 || (option == 501 ? v < -1 : v < 0)) {
            rc = FDBC_E_INVALID_OPTION_VALUE;
            goto out;
        }
        rc = rl_txn_set_option(tr->txn,
                               option == 500   ? RL_TXN_OPT_TIMEOUT_MS
                               : option == 501 ? RL_TXN_OPT_RETRY_LIMIT
                               : option == 502 ? RL_TXN_OPT_MAX_RETRY_DELAY_MS
                                               : RL_TXN_OPT_SIZE_LIMIT,
                               v);
        break;
    case 301: /* access_system_keys */
    case 302: /* read_system_keys */
        rc = rl_txn_set_option(tr->txn, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 1);
        if (rc == 0) {
            if (option == 301) tr->access_system_keys = 1;
            else tr->read_system_keys = 1;
            tr->sticky = 1;
        }
        break;
    case 51: /* read_your_writes_disable */
        rc = rl_txn_set_option(tr->txn, RL_TXN_OPT_READ_YOUR_WRITES_DISABLE, 1);
        if (rc == 0) tr->ryw_disabled = tr->sticky = 1;
        break;
    case 30: /* next_write_no_write_conflict_range */
        rc = rl_txn_set_option(tr->txn, RL_TXN_OPT_NEXT_WRITE_NO_WRITE_CONFLICT_RANGE, 1);
        break;
    /* Accepted, no effect: hints, priorities, logging and tracing, tags, locks (a reclayer
     * database is never locked), proxies, GRV caching, authorization (no tenants). */
    case 23: /* include_port_in_address: the default from API version 630 */
        tr->include_port = 1;
        tr->sticky = 1;
        break;
    case 10:
    case 20:
    case 21: /* causal_write_risky, causal_read_risky, causal_read_disable */
    case 40:
    case 50:
    case 52: /* commit_on_first_proxy, check_writes, read_ahead */
    case 110:
    case 120:
    case 130: /* durability_* */
    case 200:
    case 201:
    case 202: /* priority_* */
    case 300:
    case 303: /* initialize_new_database, raw_access */
    case 400:
    case 401:
    case 402:
    case 403: /* debug and logging */
    case 404:
    case 405:
    case 406:
    case 600: /* snapshot_ryw_enable (the default) */
    case 700:
    case 701:
    case 702: /* lock_aware, used_during_commit_..., read_lock_aware */
    case 710:
    case 711:
    case 713:
    case 720: /* first_in_batch, provisional proxies, relaxed */
    case 800:
    case 801: /* tag, auto_throttle_tag */
    case 900:
    case 1000: /* span_parent, expensive_clear_cost_estimation */
    case 1101:
    case 1102: /* use_grv_cache, skip_grv_cache */
    case 2000: /* authorization_token */ break;
    /* Documented, but their meaning cannot be honoured over reclayer. */
    case 601: /* snapshot_ryw_disable: reclayer's snapshot reads always see the writes */
    case 712: /* report_conflicting_keys: no \xff\xff/transaction/conflicting_keys/ */
    case 714: /* special_key_space_enable_writes: no special-key space */
    case 1100: /* bypass_unreadable */ rc = FDBC_E_UNSUPPORTED_OPERATION; break;
    default: rc = FDBC_E_INVALID_OPTION; break;
    }
out:
    pthread_mutex_unlock(&tr->mu);
    return fdbc_err(rc);
}

/* ---- Reads ------------------------------------------------------------------------------- */

/* 1 if [p, p + len) is not a valid byte string argument. */
static int bad_bytes(const uint8_t *p, int len) { return len < 0 || (!p && len > 0); }

/* The common prologue of a read: NULL transaction, bad arguments, deferred errors. Returns a
 * FoundationDB code (0: go on). Under tr->mu. */
static int read_check(FDBTransaction *tr) {
    if (tr->deferred_err) return tr->deferred_err;
    if (!tr->txn) return FDBC_E_LARGE_ALLOC_FAILED;
    return 0;
}

/* Start a read: f is new (NULL: out of memory), inner the rl future when rc is 0. */
static FDBFuture *finish_read(FDBTransaction *tr, FDBFuture *f, int rc, rl_future *inner) {
    (void)tr;
    if (!f) {
        rl_future_free(inner);
        return fdbc_future_error(FK_NONE, FDBC_E_LARGE_ALLOC_FAILED);
    }
    if (rc) {
        fdbc_future_complete(f, rc);
        return f;
    }
    return fdbc_future_attach(f, inner);
}

FDBC_API FDBFuture *fdb_transaction_get_read_version(FDBTransaction *tr) {
    if (!tr) return fdbc_future_error(FK_INT64, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_INT64);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) {
        in = rl_txn_get_read_version(tr->txn);
        tr->used = 1;
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

FDBC_API void fdb_transaction_set_read_version(FDBTransaction *tr, int64_t version) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    int rc = 0;
    /* FoundationDB refuses versions <= 0 (version_invalid). A reclayer database's versions start
     * near 0 but advance with time as FoundationDB's do, so no read version it hands out is 0. */
    if (version <= 0) rc = FDBC_E_VERSION_INVALID;
    else if (tr->used || tr->has_rv) rc = FDBC_E_READ_VERSION_ALREADY_SET;
    else if (tr->txn) {
        rl_txn_set_read_version(tr->txn, version);
        tr->has_rv = 1;
    }
    if (rc && !tr->deferred_err) tr->deferred_err = rc;
    pthread_mutex_unlock(&tr->mu);
}

FDBC_API FDBFuture *fdb_transaction_get(FDBTransaction *tr, const uint8_t *key, int key_length, fdb_bool_t snapshot) {
    if (!tr) return fdbc_future_error(FK_VALUE, FDBC_E_CLIENT_INVALID_OPERATION);
    if (bad_bytes(key, key_length)) return fdbc_future_error(FK_VALUE, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_VALUE);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) {
        in = rl_txn_get(tr->txn, key, (size_t)key_length, snapshot ? RL_SNAPSHOT : 0);
        tr->used = 1;
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

FDBC_API FDBFuture *fdb_transaction_get_key(FDBTransaction *tr, const uint8_t *key, int key_length, fdb_bool_t or_equal,
                                            int offset, fdb_bool_t snapshot) {
    if (!tr) return fdbc_future_error(FK_KEY, FDBC_E_CLIENT_INVALID_OPERATION);
    if (bad_bytes(key, key_length)) return fdbc_future_error(FK_KEY, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_KEY);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) {
        rl_key_selector s = {key, (uint32_t)key_length, or_equal ? 1 : 0, offset};
        in = rl_txn_get_key(tr->txn, s, snapshot ? RL_SNAPSHOT : 0);
        tr->used = 1;
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

/* Range limits (invariant 2): 0 / -1 unlimited (0 for rl_txn), other negatives invalid. */
static int range_limit(int *v) {
    if (*v == -1) *v = 0;
    return *v < 0 ? FDBC_E_RANGE_LIMITS_INVALID : 0;
}

FDBC_API FDBFuture *fdb_transaction_get_range(FDBTransaction *tr, const uint8_t *bk, int bkl, fdb_bool_t b_or_equal,
                                              int b_offset, const uint8_t *ek, int ekl, fdb_bool_t e_or_equal,
                                              int e_offset, int limit, int target_bytes, int mode, int iteration,
                                              fdb_bool_t snapshot, fdb_bool_t reverse) {
    if (!tr) return fdbc_future_error(FK_KVS, FDBC_E_CLIENT_INVALID_OPERATION);
    if (bad_bytes(bk, bkl) || bad_bytes(ek, ekl)) return fdbc_future_error(FK_KVS, FDBC_E_CLIENT_INVALID_OPERATION);
    int rc = range_limit(&limit);
    if (rc == 0) rc = range_limit(&target_bytes);
    if (rc) return fdbc_future_error(FK_KVS, rc);
    FDBFuture *f = fdbc_future_new(FK_KVS);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    rc = read_check(tr);
    if (rc == 0 && f) {
        rl_key_selector b = {bk, (uint32_t)bkl, b_or_equal ? 1 : 0, b_offset};
        rl_key_selector e = {ek, (uint32_t)ekl, e_or_equal ? 1 : 0, e_offset};
        in = rl_txn_get_range(tr->txn, b, e, limit, target_bytes, (rl_streaming_mode)mode, iteration,
                              (snapshot ? RL_SNAPSHOT : 0) | (reverse ? RL_REVERSE : 0));
        tr->used = 1;
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

FDBC_API FDBFuture *fdb_transaction_get_mapped_range(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                     fdb_bool_t b_or_equal, int b_offset, const uint8_t *ek, int ekl,
                                                     fdb_bool_t e_or_equal, int e_offset, const uint8_t *mapper,
                                                     int mapper_length, int limit, int target_bytes, int mode,
                                                     int iteration, fdb_bool_t snapshot, fdb_bool_t reverse) {
    if (!tr) return fdbc_future_error(FK_MAPPED, FDBC_E_CLIENT_INVALID_OPERATION);
    if (bad_bytes(bk, bkl) || bad_bytes(ek, ekl) || bad_bytes(mapper, mapper_length))
        return fdbc_future_error(FK_MAPPED, FDBC_E_CLIENT_INVALID_OPERATION);
    int rc = range_limit(&limit);
    if (rc == 0) rc = range_limit(&target_bytes);
    if (rc) return fdbc_future_error(FK_MAPPED, rc);
    FDBFuture *f = fdbc_future_new(FK_MAPPED);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    rc = read_check(tr);
    if (rc == 0 && (snapshot || tr->ryw_disabled)) rc = FDBC_E_UNSUPPORTED_OPERATION; /* invariant 3 */
    if (rc == 0 && f) {
        rl_key_selector b = {bk, (uint32_t)bkl, b_or_equal ? 1 : 0, b_offset};
        rl_key_selector e = {ek, (uint32_t)ekl, e_or_equal ? 1 : 0, e_offset};
        in = rl_txn_get_mapped_range(tr->txn, b, e, mapper, (size_t)mapper_length, limit, target_bytes,
                                     (rl_streaming_mode)mode, iteration, reverse ? RL_REVERSE : 0);
        tr->used = 1;
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

/* ---- Writes (void: errors are deferred, invariant 1) ------------------------------------- */

/* Record the first error of a void call. Under tr->mu. */
static void defer(FDBTransaction *tr, int rc) {
    if (rc && !tr->deferred_err) tr->deferred_err = fdbc_err(rc);
}

/* Invariant 6: \xff keys are writable only with ACCESS_SYSTEM_KEYS. */
static int system_write_check(FDBTransaction *tr, const uint8_t *key, int len) {
    if (len > 0 && key[0] == 0xff && tr->read_system_keys && !tr->access_system_keys)
        return FDBC_E_KEY_OUTSIDE_LEGAL_RANGE;
    return 0;
}

FDBC_API void fdb_transaction_set(FDBTransaction *tr, const uint8_t *key, int key_length, const uint8_t *value,
                                  int value_length) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    int rc = bad_bytes(key, key_length) || bad_bytes(value, value_length) ? FDBC_E_CLIENT_INVALID_OPERATION : 0;
    if (rc == 0 && !tr->txn) rc = FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0) rc = system_write_check(tr, key, key_length);
    if (rc == 0) rc = rl_txn_set(tr->txn, key, (size_t)key_length, value, (size_t)value_length);
    if (rc == 0) tr->approx_size += 2 * (int64_t)key_length + value_length + 1;
    defer(tr, rc);
    pthread_mutex_unlock(&tr->mu);
}

FDBC_API void fdb_transaction_clear(FDBTransaction *tr, const uint8_t *key, int key_length) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    int rc = bad_bytes(key, key_length) ? FDBC_E_CLIENT_INVALID_OPERATION : 0;
    if (rc == 0 && !tr->txn) rc = FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0) rc = system_write_check(tr, key, key_length);
    if (rc == 0) rc = rl_txn_clear(tr->txn, key, (size_t)key_length);
    if (rc == 0) tr->approx_size += 3 * (int64_t)key_length + 1;
    defer(tr, rc);
    pthread_mutex_unlock(&tr->mu);
}

FDBC_API void fdb_transaction_clear_range(FDBTransaction *tr, const uint8_t *bk, int bkl, const uint8_t *ek, int ekl) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    int rc = bad_bytes(bk, bkl) || bad_bytes(ek, ekl) ? FDBC_E_CLIENT_INVALID_OPERATION : 0;
    if (rc == 0 && !tr->txn) rc = FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0) rc = system_write_check(tr, bk, bkl);
    if (rc == 0) rc = system_write_check(tr, ek, ekl);
    if (rc == 0) rc = rl_txn_clear_range(tr->txn, bk, (size_t)bkl, ek, (size_t)ekl);
    if (rc == 0) tr->approx_size += 2 * ((int64_t)bkl + ekl);
    defer(tr, rc);
    pthread_mutex_unlock(&tr->mu);
}

/* Mutation types are FoundationDB's numbers, which rl_atomic_op shares; others (and the
 * deprecated aliases FoundationDB no longer accepts) are invalid_mutation_type, deferred. */
FDBC_API void fdb_transaction_atomic_op(FDBTransaction *tr, const uint8_t *key, int key_length, const uint8_t *param,
                                        int param_length, int operation_type) {
    if (!tr) return;
    pthread_mutex_lock(&tr->mu);
    int rc = bad_bytes(key, key_length) || bad_bytes(param, param_length) ? FDBC_E_CLIENT_INVALID_OPERATION : 0;
    if (rc == 0 && !tr->txn) rc = FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0) rc = system_write_check(tr, key, key_length);
    if (rc == 0)
        rc = rl_txn_atomic_op(tr->txn, key, (size_t)key_length, param, (size_t)param_length,
                              (rl_atomic_op)operation_type);
    if (rc == 0) tr->approx_size += 2 * (int64_t)key_length + param_length + 1;
    defer(tr, rc);
    pthread_mutex_unlock(&tr->mu);
}

FDBC_API fdb_error_t fdb_transaction_add_conflict_range(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                        const uint8_t *ek, int ekl, int type) {
    if (!tr || bad_bytes(bk, bkl) || bad_bytes(ek, ekl)) return FDBC_E_CLIENT_INVALID_OPERATION;
    if (type != FDBC_CONFLICT_READ && type != FDBC_CONFLICT_WRITE) return FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_lock(&tr->mu);
    int rc = tr->txn ? 0 : FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0)
        rc = rl_txn_add_conflict_range(tr->txn, bk, (size_t)bkl, ek, (size_t)ekl,
                                       type == FDBC_CONFLICT_READ ? RL_CONFLICT_READ : RL_CONFLICT_WRITE);
    if (rc == 0) tr->approx_size += (int64_t)bkl + ekl;
    pthread_mutex_unlock(&tr->mu);
    return fdbc_err(rc);
}

/* ---- Commit, versions, retries ----------------------------------------------------------- */

FDBC_API FDBFuture *fdb_transaction_commit(FDBTransaction *tr) {
    if (!tr) return fdbc_future_error(FK_NONE, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_NONE);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) in = rl_txn_commit(tr->txn);
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

/* The committed version: -1 for a read-only commit and before any commit (FoundationDB's
 * invalidVersion). */
FDBC_API fdb_error_t fdb_transaction_get_committed_version(FDBTransaction *tr, int64_t *out) {
    if (!tr || !out) return FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_lock(&tr->mu);
    if (!tr->txn || rl_txn_get_committed_version(tr->txn, out) != RL_OK) *out = -1;
    pthread_mutex_unlock(&tr->mu);
    return 0;
}

FDBC_API FDBFuture *fdb_transaction_get_versionstamp(FDBTransaction *tr) {
    if (!tr) return fdbc_future_error(FK_KEY, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_KEY);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = tr->txn ? 0 : FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0 && f) in = rl_txn_get_versionstamp(tr->txn);
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

/* Approximate size: the bytes of mutations and conflict ranges given so far. */
FDBC_API FDBFuture *fdb_transaction_get_approximate_size(FDBTransaction *tr) {
    if (!tr) return fdbc_future_error(FK_INT64, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_INT64);
    if (!f) return fdbc_future_error(FK_INT64, FDBC_E_LARGE_ALLOC_FAILED);
    pthread_mutex_lock(&tr->mu);
    f->i64 = tr->approx_size;
    pthread_mutex_unlock(&tr->mu);
    fdbc_future_complete(f, 0);
    return f;
}

/* FoundationDB 7.3's throttling and cost reports: reclayer throttles nothing. */
FDBC_API FDBFuture *fdb_transaction_get_tag_throttled_duration(FDBTransaction *tr) {
    if (!tr) return fdbc_future_error(FK_DOUBLE, FDBC_E_CLIENT_INVALID_OPERATION);
    return fdbc_future_error(FK_DOUBLE, 0); /* ready, 0.0 seconds */
}

FDBC_API FDBFuture *fdb_transaction_get_total_cost(FDBTransaction *tr) {
    return fdb_transaction_get_approximate_size(tr);
}

/* The retry step (invariant 5). */
FDBC_API FDBFuture *fdb_transaction_on_error(FDBTransaction *tr, fdb_error_t error) {
    if (!tr) return fdbc_future_error(FK_NONE, FDBC_E_CLIENT_INVALID_OPERATION);
    if (!fdbc_pred(FDBC_PRED_RETRYABLE, error)) return fdbc_future_error(FK_NONE, error);
    int sub = error;
    if (!rl_error_retryable(error))
        sub = fdbc_pred(FDBC_PRED_MAYBE_COMMITTED, error) ? RL_E_COMMIT_UNKNOWN_RESULT : RL_E_NOT_COMMITTED;
    FDBFuture *f = fdbc_future_new(FK_NONE);
    if (!f) return fdbc_future_error(FK_NONE, FDBC_E_LARGE_ALLOC_FAILED);
    f->on_error_code = error;
    f->on_error_sub = sub;
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = tr->txn ? 0 : FDBC_E_LARGE_ALLOC_FAILED;
    if (rc == 0) {
        in = rl_txn_on_error(tr->txn, sub);
        forget_state(tr);
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

/* ---- Not served by reclayer -------------------------------------------------------------- */

/* A watch (rl_txn_watch): registered at the commit, ready once the key's value changes;
 * fdb_future_cancel / fdb_future_destroy of a pending one cancels it (the inner future's free). */
FDBC_API FDBFuture *fdb_transaction_watch(FDBTransaction *tr, const uint8_t *key, int key_length) {
    if (!tr) return fdbc_future_error(FK_NONE, FDBC_E_CLIENT_INVALID_OPERATION);
    if (bad_bytes(key, key_length)) return fdbc_future_error(FK_NONE, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_NONE);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) {
        in = rl_txn_watch(tr->txn, key, (size_t)key_length);
        tr->used = 1;
    }
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

/* The storage servers holding key, as "IP:PORT" strings (fdb_future_get_string_array). Over a
 * cluster: the team of the key's shard in the shard map ("\xff/keyServers/" at or before the key,
 * whose value lists the team's ids) and each member's address from the server list, both read on
 * a transaction of the future's own at a fresh read version (FoundationDB reads the location at
 * the transaction's; the user's transaction gains no read or conflict range either way). A key in
 * the system keyspace gives the coordinator's address (it serves "\xff"). Over an embedded
 * database there is no storage server to name: unsupported_operation (a FoundationDB client is
 * always networked, so no answer of its would fit). */
FDBC_API FDBFuture *fdb_transaction_get_addresses_for_key(FDBTransaction *tr, const uint8_t *key, int key_length) {
    if (!tr || key_length < 0 || (!key && key_length))
        return fdbc_future_error(FK_STRINGS, FDBC_E_CLIENT_INVALID_OPERATION);
    if (!tr->d->is_cluster) return fdbc_future_error(FK_STRINGS, FDBC_E_UNSUPPORTED_OPERATION);
    pthread_mutex_lock(&tr->d->mu);
    int with_port = fdbc_api_version() >= 630 || tr->include_port || tr->d->def_include_port;
    pthread_mutex_unlock(&tr->d->mu);
    size_t pl = sizeof FDBC_KEYSERVERS - 1, kl = (size_t)key_length;
    uint8_t *end = malloc(pl + kl + 1);
    FDBFuture *f = fdbc_future_new(FK_STRINGS);
    if (f) f->addr_no_port = !with_port;
    rl_txn *aux = NULL;
    int rc = end && f ? rl_txn_begin(tr->d->db, &aux) : RL_E_OUT_OF_MEMORY;
    if (!rc) rc = rl_txn_set_option(aux, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 1);
    if (rc) {
        free(end);
        rl_txn_free(aux);
        if (f) {
            fdbc_future_complete(f, fdbc_err(rc));
            return f;
        }
        return fdbc_future_error(FK_STRINGS, fdbc_err(rc));
    }
    /* The last boundary at or before the key: a reverse read of [prefix, prefix + key + "\x00"). */
    memcpy(end, FDBC_KEYSERVERS, pl);
    if (kl) memcpy(end + pl, key, kl);
    end[pl + kl] = 0;
    rl_future *ks = rl_txn_get_range(aux, RL_FIRST_GREATER_OR_EQUAL(FDBC_KEYSERVERS, pl),
                                     RL_FIRST_GREATER_OR_EQUAL(end, pl + kl + 1), 1, 0, RL_STREAMING_EXACT, 1,
                                     RL_SNAPSHOT | RL_REVERSE);
    rl_future *sl = rl_txn_get_range(aux, RL_FIRST_GREATER_OR_EQUAL(FDBC_SERVERLIST, sizeof FDBC_SERVERLIST - 1),
                                     RL_FIRST_GREATER_OR_EQUAL("\xff/serverList0", sizeof FDBC_SERVERLIST - 1), 0, 0,
                                     RL_STREAMING_WANT_ALL, 1, RL_SNAPSHOT);
    free(end);
    return fdbc_future_attach_addresses(f, ks, sl, aux, tr->d);
}

/* Size estimates (docs/design.md §4, "Size estimates"): rl_txn's, which check the range
 * (inverted_range), the readable keyspace and chunk_size (split points) as FoundationDB does.
 * They take no read version: a later set_read_version is still allowed. */
FDBC_API FDBFuture *fdb_transaction_get_estimated_range_size_bytes(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                                   const uint8_t *ek, int ekl) {
    if (!tr || bkl < 0 || ekl < 0 || (!bk && bkl) || (!ek && ekl))
        return fdbc_future_error(FK_INT64, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_INT64);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) in = rl_txn_get_estimated_range_size_bytes(tr->txn, bk, (size_t)bkl, ek, (size_t)ekl);
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}

FDBC_API FDBFuture *fdb_transaction_get_range_split_points(FDBTransaction *tr, const uint8_t *bk, int bkl,
                                                           const uint8_t *ek, int ekl, int64_t chunk_size) {
    if (!tr || bkl < 0 || ekl < 0 || (!bk && bkl) || (!ek && ekl))
        return fdbc_future_error(FK_KEYS, FDBC_E_CLIENT_INVALID_OPERATION);
    FDBFuture *f = fdbc_future_new(FK_KEYS);
    rl_future *in = NULL;
    pthread_mutex_lock(&tr->mu);
    int rc = read_check(tr);
    if (rc == 0 && f) in = rl_txn_get_range_split_points(tr->txn, bk, (size_t)bkl, ek, (size_t)ekl, chunk_size);
    pthread_mutex_unlock(&tr->mu);
    return finish_read(tr, f, rc, in);
}
