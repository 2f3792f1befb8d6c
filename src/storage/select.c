/* select.c — the bounds of a range read given as two key selectors, resolved within a key
 * interval [lo, hi): the whole readable keyspace of an embedded database, or one shard of a
 * storage server. Shared by the embedded backend and rlkvd's storage role, so a selector with an
 * offset (how a query's skip is pushed down) is resolved where the data is, in the same request.
 *
 * Rules (FoundationDB's, docs/design.md §3):
 *   1. A selector's anchor is its key, or key + "\x00" with or_equal; offset 1 means "the first
 *      key >= anchor". As a range bound that is the anchor itself, so an offset of 1 resolves
 *      without reading (any anchor, inside the interval or not).
 *   2. Any other offset is resolved by rl__storage_select within [lo, hi); if its anchor lies
 *      outside [lo, hi], or the walk reaches a bound that is not the keyspace's own end, the
 *      bounds are `unresolved` and the caller resolves the selector itself (FoundationDB's
 *      client falls back to getKey requests the same way).
 *   3. The resolved range [rbegin, rend) is clipped to [lo, hi) for the read; read_through says
 *      the range goes on past the interval in the direction of the scan (forward: rend > hi;
 *      reverse: rbegin < lo), so the caller continues on the next shard.
 */
#include <string.h>

#include "base/bytes.h"
#include "storage/storage.h"

/* The anchor of sel in arena a (NULL on OOM). */
static const uint8_t *anchor(const rl_key_selector *sel, rl_arena *a, uint32_t *out_len) {
    const uint8_t *k = sel->key ? sel->key : (const uint8_t *)"";
    uint32_t kl = sel->key_len;
    if (!sel->or_equal) { /* the key itself (the selector's key outlives the bounds) */
        *out_len = kl;
        return k;
    }
    uint8_t *p = rl__arena_alloc(a, (size_t)kl + 1);
    if (!p) return NULL;
    if (kl) memcpy(p, k, kl);
    p[kl++] = 0;
    *out_len = kl;
    return p;
}

/* Resolve one bound (rules 1, 2). *out_unresolved = 1 when it cannot be resolved here. */
static int resolve_bound(rl__storage *st, rl__version v, const rl_key_selector *sel, const uint8_t *lo, uint32_t lol,
                         int lo_is_min, const uint8_t *hi, uint32_t hil, int hi_is_max, rl_arena *a,
                         const uint8_t **out, uint32_t *out_len, int *out_unresolved) {
    *out_unresolved = 0;
    if (sel->offset == 1) {
        *out = anchor(sel, a, out_len);
        return *out ? RL_OK : RL_E_OUT_OF_MEMORY;
    }
    rl__select_result r;
    int rc = rl__storage_select(st, v, sel, lo, lol, lo_is_min, hi, hil, hi_is_max, a, &r);
    if (rc == RL_E_WRONG_SHARD_SERVER || (rc == RL_OK && !r.resolved)) {
        *out_unresolved = 1;
        return RL_OK;
    }
    if (rc) return rc;
    *out = r.key;
    *out_len = r.key_len;
    return RL_OK;
}

int rl__storage_range_bounds(rl__storage *st, rl__version v, const rl_key_selector *begin, const rl_key_selector *end,
                             const uint8_t *lo, uint32_t lo_len, int lo_is_min, const uint8_t *hi, uint32_t hi_len,
                             int hi_is_max, int reverse, rl_arena *a, rl__range_bounds *out) {
    memset(out, 0, sizeof *out);
    int ub = 0, ue = 0;
    int rc = resolve_bound(st, v, begin, lo, lo_len, lo_is_min, hi, hi_len, hi_is_max, a, &out->rbegin,
                           &out->rbegin_len, &ub);
    if (rc == RL_OK)
        rc =
            resolve_bound(st, v, end, lo, lo_len, lo_is_min, hi, hi_len, hi_is_max, a, &out->rend, &out->rend_len, &ue);
    if (rc) return rc;
    if (ub || ue) {
        out->unresolved = 1;
        return RL_OK;
    }
    /* Clip to [lo, hi) (rule 3); nothing is below an empty lo. */
    out->cbegin = out->rbegin, out->cbegin_len = out->rbegin_len;
    out->cend = out->rend, out->cend_len = out->rend_len;
    if (lo_len > 0 && rl__bytes_cmp(out->cbegin, out->cbegin_len, lo, lo_len) < 0) {
        out->cbegin = lo, out->cbegin_len = lo_len;
        if (reverse) out->read_through = 1;
    }
    if (rl__bytes_cmp(out->cend, out->cend_len, hi, hi_len) > 0) {
        out->cend = hi, out->cend_len = hi_len;
        if (!reverse) out->read_through = 1;
    }
    /* An empty resolved range reads nothing and goes nowhere else. */
    if (rl__bytes_cmp(out->rbegin, out->rbegin_len, out->rend, out->rend_len) >= 0) out->read_through = 0;
    return RL_OK;
}
