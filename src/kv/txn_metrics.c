/* txn_metrics.c — the size estimates of a transaction (rl_txn_get_estimated_range_size_bytes,
 * rl_txn_get_range_split_points): argument checks, one backend request (backend.h,
 * rl__kv_metrics) filling the future, and the split-point list the local backends share.
 *
 * As FoundationDB's, these reads take no read version and add no conflict range; they answer from
 * the storage servers' byte samples at their latest state and ignore the transaction's own
 * writes (docs/design.md §4, "Size estimates"). The request block lives in the future's arena,
 * and the future holds a reference for the backend until done runs; the transaction is not
 * referenced (nothing of it is touched after the start), so a reset or a free of the
 * transaction leaves a request in flight to complete its future.
 */
#include <string.h>

#include "base/bytes.h"
#include "kv/kv_int.h"

static const uint8_t key_ff[] = {0xff};
static const uint8_t key_ffff[] = {0xff, 0xff};

/* The backend's answer: fill the future and drop the backend's reference (any thread). */
static void metrics_done(rl__kv_metrics *m, int err) {
    rl_future *f = m->ud;
    if (err == RL_OK) {
        if (m->op == RL_KV_ESTIMATE) {
            f->i64 = m->bytes < 0 ? 0 : m->bytes;
        } else {
            f->keys = m->keys;
            f->count = m->n_keys;
        }
    }
    rl__future_complete_unref(f, err);
}

/* Clamp k to "\xff\xff" (nothing is stored beyond: the special-key space). */
static void clamp(const uint8_t **k, uint32_t *kl) {
    if (rl__bytes_cmp(*k, *kl, key_ffff, 2) > 0) {
        *k = key_ffff;
        *kl = 2;
    }
}

/* Start one request for f (kind RL_FUT_INT64 or RL_FUT_KEYS) after the common checks: a NULL
 * transaction or key pointer (invalid_argument), an inverted range (inverted_range, 2005), the
 * transaction's state (rl__txn_check_usable), for split points a key beyond the readable keyspace
 * (key_outside_legal_range, 2004, FoundationDB's rule: begin or end above "\xff", or "\xff\xff"
 * with ACCESS_SYSTEM_KEYS) and chunk_size <= 0 (client_invalid_operation, 2000). */
static rl_future *metrics_start(rl_txn *t, int op, const void *begin, size_t begin_len, const void *end, size_t end_len,
                                int64_t chunk) {
    int kind = op == RL_KV_ESTIMATE ? RL_FUT_INT64 : RL_FUT_KEYS;
    if (!t || (!begin && begin_len) || (!end && end_len)) return rl__future_error(kind, RL_E_INVALID_ARGUMENT);
    if (rl__bytes_cmp(begin, begin_len, end, end_len) > 0) return rl__future_error(kind, RL_E_INVERTED_RANGE);
    rl_future *f = rl__future_new(kind);
    if (f->is_static) return f;
    rl__txn_lock(t);
    int rc = rl__txn_check_usable(t);
    if (rc == RL_OK && op == RL_KV_SPLIT) {
        const uint8_t *mk = t->access_system_keys ? key_ffff : key_ff;
        uint32_t mkl = t->access_system_keys ? 2 : 1;
        if (rl__bytes_cmp(begin, begin_len, mk, mkl) > 0 || rl__bytes_cmp(end, end_len, mk, mkl) > 0)
            rc = RL_E_KEY_OUTSIDE_LEGAL_RANGE;
        else if (chunk <= 0) rc = RL_E_CLIENT_INVALID_OPERATION;
    }
    rl__kv_backend *be = t->db->be;
    uint64_t deadline = rl__txn_deadline_ns(t);
    rl__txn_unlock(t);
    if (rc == RL_OK && !be->vt->metrics) rc = RL_E_UNSUPPORTED_OPERATION;
    rl__kv_metrics *m = NULL;
    if (rc == RL_OK) {
        m = rl__arena_alloc(&f->arena, sizeof *m);
        uint8_t *bc = begin_len ? rl__arena_memdup(&f->arena, begin, begin_len) : NULL;
        uint8_t *ec = end_len ? rl__arena_memdup(&f->arena, end, end_len) : NULL;
        if (!m || (begin_len && !bc) || (end_len && !ec)) {
            rc = RL_E_OUT_OF_MEMORY;
        } else {
            memset(m, 0, sizeof *m);
            m->op = op;
            m->begin = bc ? bc : (const uint8_t *)"";
            m->begin_len = (uint32_t)begin_len;
            m->end = ec ? ec : (const uint8_t *)"";
            m->end_len = (uint32_t)end_len;
            clamp(&m->begin, &m->begin_len);
            clamp(&m->end, &m->end_len);
            m->chunk = chunk;
            m->arena = &f->arena;
            m->done = metrics_done;
            m->ud = f;
            m->deadline_ns = deadline;
        }
    }
    if (rc != RL_OK) {
        rl__future_complete_unseen(f, rc);
        return f;
    }
    rl__future_ref(f); /* the backend's, dropped by metrics_done */
    be->vt->metrics(be, m);
    return f;
}

rl_future *rl_txn_get_estimated_range_size_bytes(rl_txn *txn, const void *begin, size_t begin_len, const void *end,
                                                 size_t end_len) {
    return metrics_start(txn, RL_KV_ESTIMATE, begin, begin_len, end, end_len, 0);
}

rl_future *rl_txn_get_range_split_points(rl_txn *txn, const void *begin, size_t begin_len, const void *end,
                                         size_t end_len, int64_t chunk_size) {
    return metrics_start(txn, RL_KV_SPLIT, begin, begin_len, end, end_len, chunk_size);
}

int rl__kv_split_list(rl_arena *a, const uint8_t *begin, uint32_t begin_len, const rl_slice *cuts, int n_cuts,
                      const uint8_t *end, uint32_t end_len, rl_slice **out, int *out_n) {
    int has_end = rl__bytes_cmp(begin, begin_len, end, end_len) != 0;
    int n = 1 + n_cuts + has_end;
    rl_slice *v = rl__arena_alloc(a, (size_t)n * sizeof *v);
    if (!v) return RL_E_OUT_OF_MEMORY;
    v[0].data = begin;
    v[0].len = begin_len;
    for (int i = 0; i < n_cuts; i++) v[1 + i] = cuts[i];
    if (has_end) {
        v[n - 1].data = end;
        v[n - 1].len = end_len;
    }
    *out = v;
    *out_n = n;
    return RL_OK;
}
