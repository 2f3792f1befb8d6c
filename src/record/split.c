/* split.c — split records: how many chunks a record takes, and the unsplitter that assembles
 * records from the key-values of a records range and names every malformed layout it meets.
 *
 * Layout (Java's SplitHelper, docs/file-format.md (Record store layout)): under the records prefix R = prefix+(1,)
 *   R + pk + (-1)      version: tuple(versionstamp), 13 bytes (0x33 + 12)
 *   R + pk + (0)       the whole record, when it is at most 100,000 bytes
 *   R + pk + (1..n)    100,000-byte chunks, concatenated in order, when it is longer
 * The primary key of a key is every tuple element after R but the last; the last is the suffix.
 *
 * Invariants of the unsplitter:
 *   1. It never reads outside the keys and values it is given and copies what it keeps, so the
 *      caller may free a page of results after feeding it.
 *   2. A group (the keys of one primary key) is assembled only when it is complete: when a key of
 *      another primary key arrives or at finish. Parts are kept in ascending key order (a
 *      reverse scan's group is reversed first), so forward and reverse scans assemble the same
 *      records and report the same defects.
 *   3. Per group it reports, in order: each stray key, a bad version value, then either the
 *      record or the one defect that prevents assembling it.
 */
#include <string.h>

#include "base/alloc.h"
#include "record/record_int.h"

int rl__split_chunks(size_t len) {
    if (len <= RL_RECORD_SPLIT_SIZE) return 0;
    return (int)((len + RL_RECORD_SPLIT_SIZE - 1) / RL_RECORD_SPLIT_SIZE);
}

const char *rl__unsplit_kind_name(rl__unsplit_event_kind k) {
    switch (k) {
    case RL__EV_RECORD: return "record";
    case RL__EV_DELETE_CHUNK: return "delete-chunk";
    case RL__EV_SPLIT_ORDER: return "split-order";
    case RL__EV_MULTIPLE_UNSPLIT: return "multiple-unsplit";
    case RL__EV_STRAY_SUFFIX: return "stray-suffix";
    case RL__EV_VERSION_KEY: return "version-key";
    case RL__EV_BAD_VERSION: return "bad-version";
    case RL__EV_BAD_KEY: return "bad-key";
    }
    return "unknown";
}

const char *rl__unsplit_kind_message(rl__unsplit_event_kind k) {
    switch (k) {
    case RL__EV_RECORD: return "";
    case RL__EV_DELETE_CHUNK: return "Found split record without start";
    case RL__EV_SPLIT_ORDER: return "Split record segments out of order";
    case RL__EV_MULTIPLE_UNSPLIT: return "More than one unsplit value.";
    case RL__EV_STRAY_SUFFIX: return "Invalid record split number";
    case RL__EV_VERSION_KEY: return "Found record version without record";
    case RL__EV_BAD_VERSION: return "Record version is not a versionstamp tuple";
    case RL__EV_BAD_KEY: return "Key under records is not (primary key..., suffix)";
    }
    return "";
}

void rl__unsplitter_init(rl__unsplitter *u, const uint8_t *prefix, size_t prefix_len, int reverse) {
    memset(u, 0, sizeof *u);
    u->prefix = prefix;
    u->prefix_len = prefix_len;
    u->reverse = reverse;
    rl__buf_init(&u->pk);
    rl__buf_init(&u->bytes);
    rl__buf_init(&u->data);
}

void rl__unsplitter_release(rl__unsplitter *u) {
    rl__buf_release(&u->pk);
    rl__buf_release(&u->bytes);
    rl__buf_release(&u->data);
    rl__free(u->parts);
    memset(u, 0, sizeof *u);
}

void rl__unsplitter_reset(rl__unsplitter *u) {
    u->has_group = 0;
    u->n_parts = 0;
    rl__buf_reset(&u->pk);
    rl__buf_reset(&u->bytes);
}

/* Report a defect of kind k at key[0..klen). */
static int report(rl__unsplitter *u, rl__unsplit_event_kind k, const uint8_t *key, size_t klen, const char *detail,
                  rl__unsplit_fn fn, void *ud) {
    rl__unsplit_event ev = {0};
    ev.kind = k;
    ev.key = key;
    ev.key_len = klen;
    ev.pk = u->has_group ? u->pk.data : NULL;
    ev.pk_len = u->has_group ? u->pk.len : 0;
    ev.detail = detail ? detail : "";
    return fn(ud, &ev);
}

/* Assemble the current group (invariant 3) and forget it. */
static int flush_group(rl__unsplitter *u, rl__unsplit_fn fn, void *ud) {
    int rc = RL_OK;
    if (!u->has_group) return RL_OK;
    if (rl__buf_error(&u->bytes) || rl__buf_error(&u->pk)) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    if (u->reverse) {
        for (size_t i = 0, j = u->n_parts ? u->n_parts - 1 : 0; i < j; i++, j--) {
            rl__split_part t = u->parts[i];
            u->parts[i] = u->parts[j];
            u->parts[j] = t;
        }
    }
    const uint8_t *B = u->bytes.data;
    rl__unsplit_event ev = {0};
    ev.kind = RL__EV_RECORD;
    ev.pk = u->pk.data;
    ev.pk_len = u->pk.len;
    ev.detail = "";
    const rl__split_part *version = NULL;
    size_t first_data = u->n_parts, n_data = 0;
    for (size_t i = 0; i < u->n_parts; i++) {
        const rl__split_part *p = &u->parts[i];
        if (p->is_stray) {
            rc = report(u, RL__EV_STRAY_SUFFIX, B + p->koff, p->klen, p->stray_detail, fn, ud);
            if (rc) goto done;
        } else if (p->suffix == RL__SUFFIX_VERSION) {
            version = p;
        } else {
            if (first_data == u->n_parts) first_data = i;
            n_data++;
        }
    }
    if (version) {
        const uint8_t *v = B + version->voff;
        if (version->vlen == 13 && v[0] == 0x33) {
            ev.has_version = 1;
            memcpy(ev.version, v + 1, 12);
        } else {
            rc = report(u, RL__EV_BAD_VERSION, B + version->koff, version->klen, "", fn, ud);
            if (rc) goto done;
        }
    }
    if (n_data == 0) {
        if (version) rc = report(u, RL__EV_VERSION_KEY, B + version->koff, version->klen, "", fn, ud);
        goto done;
    }
    /* Data parts are contiguous in ascending order after the version; strays (non-integer
     * suffixes) sort after them and are skipped. */
    const rl__split_part *first = &u->parts[first_data];
    ev.key = B + first->koff;
    ev.key_len = first->klen;
    if (first->suffix == RL__SUFFIX_UNSPLIT) {
        if (n_data > 1) {
            const rl__split_part *second = NULL;
            for (size_t i = first_data + 1; i < u->n_parts && !second; i++)
                if (!u->parts[i].is_stray && u->parts[i].suffix >= 0) second = &u->parts[i];
            rc = report(u, RL__EV_MULTIPLE_UNSPLIT, B + second->koff, second->klen, "", fn, ud);
            goto done;
        }
        ev.data = B + first->voff;
        ev.data_len = first->vlen;
        ev.n_chunks = 0;
        rc = fn(ud, &ev);
        goto done;
    }
    if (first->suffix != RL__SUFFIX_FIRST_CHUNK) {
        rc = report(u, RL__EV_DELETE_CHUNK, B + first->koff, first->klen, "", fn, ud);
        goto done;
    }
    rl__buf_reset(&u->data);
    int64_t expect = RL__SUFFIX_FIRST_CHUNK;
    for (size_t i = first_data; i < u->n_parts; i++) {
        const rl__split_part *p = &u->parts[i];
        if (p->is_stray || p->suffix < 0) continue;
        if (p->suffix != expect) {
            rc = report(u, RL__EV_SPLIT_ORDER, B + p->koff, p->klen, "", fn, ud);
            goto done;
        }
        rl__buf_append(&u->data, B + p->voff, p->vlen);
        expect++;
    }
    if (rl__buf_error(&u->data)) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    ev.data = u->data.data;
    ev.data_len = u->data.len;
    ev.n_chunks = (int)(expect - RL__SUFFIX_FIRST_CHUNK);
    rc = fn(ud, &ev);
done:
    rl__unsplitter_reset(u);
    return rc;
}

int rl__unsplitter_feed(rl__unsplitter *u, const uint8_t *key, size_t klen, const uint8_t *value, size_t vlen,
                        rl__unsplit_fn fn, void *ud) {
    int rc;
    if (klen < u->prefix_len || memcmp(key, u->prefix, u->prefix_len) != 0) {
        rc = flush_group(u, fn, ud);
        if (rc) return rc;
        return report(u, RL__EV_BAD_KEY, key, klen, "key outside the records subspace", fn, ud);
    }
    /* Split the rest into primary key (all elements but the last) and suffix. */
    const uint8_t *rest = key + u->prefix_len;
    size_t rest_len = klen - u->prefix_len;
    rl__tuple_iter it;
    rl__tuple_elem e, last = {0};
    size_t count = 0;
    rl__tuple_iter_init(&it, rest, rest_len);
    while ((rc = rl__tuple_iter_next(&it, &e)) == RL_OK) {
        last = e;
        count++;
    }
    if (rc != RL_E_NOT_FOUND || count < 2) {
        rc = flush_group(u, fn, ud);
        if (rc) return rc;
        return report(u, RL__EV_BAD_KEY, key, klen, count < 2 ? "no primary key before the suffix" : "not a tuple", fn,
                      ud);
    }
    size_t pk_len = (size_t)(last.raw - rest);
    if (u->has_group && (pk_len != u->pk.len || memcmp(rest, u->pk.data, pk_len) != 0)) {
        rc = flush_group(u, fn, ud);
        if (rc) return rc;
    }
    if (!u->has_group) {
        rl__buf_reset(&u->pk);
        rl__buf_append(&u->pk, rest, pk_len);
        u->has_group = 1;
    }
    if (RL_GROW(u->parts, u->cap_parts, u->n_parts + 1, 8)) return RL_E_OUT_OF_MEMORY;
    rl__split_part *p = &u->parts[u->n_parts++];
    memset(p, 0, sizeof *p);
    if (last.type != RL_TT_INT || !last.fits_i64) {
        p->is_stray = 1;
        p->stray_detail = "not a number";
    } else if (last.i < RL__SUFFIX_VERSION) {
        p->is_stray = 1;
        p->stray_detail = "negative suffix below -1";
    }
    p->suffix = p->is_stray ? 0 : last.i;
    p->koff = u->bytes.len;
    p->klen = klen;
    rl__buf_append(&u->bytes, key, klen);
    p->voff = u->bytes.len;
    p->vlen = vlen;
    rl__buf_append(&u->bytes, value, vlen);
    return rl__buf_error(&u->bytes);
}

int rl__unsplitter_finish(rl__unsplitter *u, rl__unsplit_fn fn, void *ud) { return flush_group(u, fn, ud); }
