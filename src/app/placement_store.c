/* placement_store.c — `rl placement place` and `show` over a record store (placement_store.h):
 * the record layer names the store's record and index ranges (rl__tool_placement_ranges) and
 * maps index entries to their records (rl__tool_index_entry_record); src/app/placement.h
 * moves shards and computes the fractions and the receipt. docs/design.md §8.6 (rl placement).
 * It lives in bench, the lowest layer that may use both the record layer and the server's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "app/placement_store.h"
#include "app/tool.h"
#include "app/placement.h"
#include "tuple/tuple.h"

/* Keys (and values) read from one range, copied. */
typedef struct {
    rl_buf bytes;
    size_t *off; /* per row: key offset, key length, value offset, value length */
    size_t n, cap;
} rows_t;

static void rows_free(rows_t *r) {
    rl__buf_release(&r->bytes);
    rl__free(r->off);
    memset(r, 0, sizeof *r);
}

static int rows_add(rows_t *r, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        size_t *o = rl__realloc(r->off, cap * 4 * sizeof *o);
        if (!o) return RL_E_OUT_OF_MEMORY;
        r->off = o;
        r->cap = cap;
    }
    size_t *o = &r->off[r->n * 4];
    o[0] = r->bytes.len, o[1] = kl;
    rl__buf_append(&r->bytes, k, kl);
    o[2] = r->bytes.len, o[3] = vl;
    rl__buf_append(&r->bytes, v, vl);
    r->n++;
    return rl__buf_error(&r->bytes);
}

/* Read every row of [b, e) in txn into r. */
static int read_all(rl_txn *txn, const uint8_t *b, size_t bl, const uint8_t *e, size_t el, rows_t *r) {
    rl_buf cur;
    rl__buf_init(&cur);
    rl__buf_append(&cur, b, bl);
    int rc = rl__buf_error(&cur);
    for (int it = 1; rc == RL_OK; it++) {
        rl_future *f = rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(cur.data, cur.len),
                                        RL_FIRST_GREATER_OR_EQUAL(e, el), 0, 0, RL_STREAMING_WANT_ALL, it, 0);
        const rl_keyvalue *kvs;
        int n = 0, more = 0;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more);
        for (int i = 0; rc == RL_OK && i < n; i++)
            rc = rows_add(r, kvs[i].key, kvs[i].key_len, kvs[i].value, kvs[i].value_len);
        if (rc == RL_OK && more && n) {
            rl__buf_reset(&cur);
            rl__buf_append(&cur, kvs[n - 1].key, kvs[n - 1].key_len);
            rl__buf_append_byte(&cur, 0);
            rc = rl__buf_error(&cur);
        }
        rl_future_free(f);
        if (!more || !n) break;
    }
    rl__buf_release(&cur);
    return rc;
}

static rl_keyvalue *rows_kvs(const rows_t *r) {
    rl_keyvalue *kv = rl__calloc(r->n + 1, sizeof *kv);
    for (size_t i = 0; kv && i < r->n; i++) {
        const size_t *o = &r->off[i * 4];
        kv[i] = (rl_keyvalue){r->bytes.data + o[0], (uint32_t)o[1], r->bytes.data + o[2], (uint32_t)o[3]};
    }
    return kv;
}

typedef struct {
    const rl_store *s;
    const char *index;
    rl_buf rec_b, rec_e, idx_b, idx_e;
    rows_t ks, sl, idx;
    rl_buf rec_keys; /* record keys of the index entries, concatenated */
    int64_t read_version;
    int with_index; /* read the index entries (show) */
} snap_ctx;

/* One transaction (one read version): the shard map rows and the index entries. */
static int snap_fn(rl_txn *txn, void *ud) {
    snap_ctx *c = ud;
    rows_free(&c->ks);
    rows_free(&c->sl);
    rows_free(&c->idx);
    rl__buf_init(&c->ks.bytes);
    rl__buf_init(&c->sl.bytes);
    rl__buf_init(&c->idx.bytes);
    int rc = rl_txn_set_option(txn, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
    static const uint8_t ksb[] = "\xff/keyServers/", kse[] = "\xff/keyServers0";
    static const uint8_t slb[] = "\xff/serverList/", sle[] = "\xff/serverList0";
    if (rc == RL_OK) rc = read_all(txn, ksb, sizeof ksb - 1, kse, sizeof kse - 1, &c->ks);
    if (rc == RL_OK) rc = read_all(txn, slb, sizeof slb - 1, sle, sizeof sle - 1, &c->sl);
    if (rc == RL_OK && c->with_index)
        rc = read_all(txn, c->idx_b.data, c->idx_b.len, c->idx_e.data, c->idx_e.len, &c->idx);
    if (rc == RL_OK) {
        rl_future *f = rl_txn_get_read_version(txn);
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_int64(f, &c->read_version);
        rl_future_free(f);
    }
    return rc;
}

static int cmp_pair(const void *a, const void *b) {
    const rl__pl_pair *x = a, *y = b;
    int c = rl__bytes_cmp(x->record_key, (uint32_t)x->record_len, y->record_key, (uint32_t)y->record_len);
    if (c) return c;
    return rl__bytes_cmp(x->index_key, (uint32_t)x->index_len, y->index_key, (uint32_t)y->index_len);
}

static void snap_release(snap_ctx *c) {
    rl__buf_release(&c->rec_b);
    rl__buf_release(&c->rec_e);
    rl__buf_release(&c->idx_b);
    rl__buf_release(&c->idx_e);
    rows_free(&c->ks);
    rows_free(&c->sl);
    rows_free(&c->idx);
    rl__buf_release(&c->rec_keys);
}

/* See placement_store.h. */
int rl__tool_placement_show(const char *url, const char *store, const char *index, const rl__tool_wait *w, json_t **out,
                            rl__errdetail *err) {
    *out = NULL;
    rl__tool t;
    int rc = rl__tool_open_with(&t, url, store, 0, RL__TOOL_READ_ONLY, w);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "%s", rl__tool_errmsg(&t));
        return rc;
    }
    snap_ctx c;
    memset(&c, 0, sizeof c);
    c.s = t.s;
    c.index = index;
    c.with_index = 1;
    rl__pl_map m;
    memset(&m, 0, sizeof m);
    rl__pl_pair *pairs = NULL;
    rl_keyvalue *kks = NULL, *skv = NULL;
    rc = rl__tool_placement_ranges(t.s, index, &c.rec_b, &c.rec_e, &c.idx_b, &c.idx_e);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "%s", rl_store_errmsg(t.s));
        goto out;
    }
    if ((rc = rl_db_run(t.db, snap_fn, &c)) != RL_OK) {
        rl__errdetail_append(err, "reading the shard map and the index failed: %s %s", rl_error_name(rc),
                             rl_last_error_detail());
        goto out;
    }
    kks = rows_kvs(&c.ks);
    skv = rows_kvs(&c.sl);
    pairs = rl__calloc(c.idx.n + 1, sizeof *pairs);
    if (!kks || !skv || !pairs) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    if ((rc = rl__pl_map_parse(kks, (int)c.ks.n, skv, (int)c.sl.n, &m, err)) != RL_OK) goto out;
    /* The record each entry points to (offsets first: the buffer grows). */
    size_t *roff = rl__calloc(c.idx.n + 1, 2 * sizeof *roff);
    rl_buf one;
    rl__buf_init(&one);
    size_t np = 0;
    for (size_t i = 0; roff && i < c.idx.n; i++) {
        const size_t *o = &c.idx.off[i * 4];
        if (rl__tool_index_entry_record(t.s, index, c.idx.bytes.data + o[0], o[1], &one) != RL_OK) continue;
        roff[np * 2] = c.rec_keys.len;
        roff[np * 2 + 1] = one.len;
        rl__buf_append(&c.rec_keys, one.data, one.len);
        pairs[np].index_key = c.idx.bytes.data + o[0];
        pairs[np].index_len = o[1];
        np++;
    }
    rl__buf_release(&one);
    if (!roff || rl__buf_error(&c.rec_keys)) {
        rl__free(roff);
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < np; i++) {
        pairs[i].record_key = c.rec_keys.data + roff[i * 2];
        pairs[i].record_len = roff[i * 2 + 1];
    }
    rl__free(roff);
    qsort(pairs, np, sizeof *pairs, cmp_pair);
    json_t *r = rl__pl_receipt(&m, c.idx_b.data, c.idx_b.len, c.idx_e.data, c.idx_e.len, c.rec_b.data, c.rec_b.len,
                               c.rec_e.data, c.rec_e.len, pairs, np);
    json_t *o = r ? json_pack("{s:o,s:I}", "receipt", r, "read_version", (json_int_t)c.read_version) : NULL;
    if (!o) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    *out = o;
out:
    rl__free(pairs);
    rl__free(kks);
    rl__free(skv);
    rl__pl_map_free(&m);
    snap_release(&c);
    rl__tool_close(&t);
    return rc;
}

typedef struct {
    rl_buf b, e;
    rows_t rows;
} recs_ctx;

static int recs_fn(rl_txn *txn, void *ud) {
    recs_ctx *c = ud;
    rows_free(&c->rows);
    rl__buf_init(&c->rows.bytes);
    return read_all(txn, c->b.data, c->b.len, c->e.data, c->e.len, &c->rows);
}

/* See placement_store.h. */
int rl__tool_placement_place(const char *url, const char *key_file, const char *store, const char *index,
                             const uint32_t *index_team, uint32_t n_index_team, const uint32_t *const *rec_teams,
                             const uint32_t *n_rec_team, uint32_t n_rec_teams, int timeout_ms, const rl__tool_wait *w,
                             rl__errdetail *err) {
    return rl__tool_placement_place_runs(url, key_file, store, index, index_team, n_index_team, rec_teams, n_rec_team,
                                         n_rec_teams, NULL, 0, timeout_ms, w, err);
}

/* See placement_store.h. */
int rl__tool_placement_place_runs(const char *url, const char *key_file, const char *store, const char *index,
                                  const uint32_t *index_team, uint32_t n_index_team, const uint32_t *const *rec_teams,
                                  const uint32_t *n_rec_team, uint32_t n_rec_teams, const uint32_t *team_of,
                                  size_t n_team_of, int timeout_ms, const rl__tool_wait *w, rl__errdetail *err) {
    rl__tool t;
    int rc = rl__tool_open_with(&t, url, store, 0, RL__TOOL_READ_ONLY, w);
    if (rc != RL_OK) {
        rl__errdetail_append(err, "%s", rl__tool_errmsg(&t));
        return rc;
    }
    rl_buf ib, ie;
    recs_ctx c;
    memset(&c, 0, sizeof c);
    rl__buf_init(&ib);
    rl__buf_init(&ie);
    rl_buf starts; /* the first key of each record, concatenated */
    size_t *soff = NULL, ns = 0;
    rl__buf_init(&starts);
    if ((rc = rl__tool_placement_ranges(t.s, index, &c.b, &c.e, &ib, &ie)) != RL_OK) {
        rl__errdetail_append(err, "%s", rl_store_errmsg(t.s));
        goto out;
    }
    /* 1. The index to its team. */
    if ((rc = rl__placement_assign(url, key_file, ib.data, ib.len, ie.data, ie.len, index_team, n_index_team,
                                   timeout_ms, NULL, NULL, err)) != RL_OK)
        goto out;
    /* 2. The records, split evenly by record into one contiguous range per team. */
    if ((rc = rl_db_run(t.db, recs_fn, &c)) != RL_OK) {
        rl__errdetail_append(err, "reading the records failed: %s", rl_error_name(rc));
        goto out;
    }
    soff = rl__calloc(c.rows.n + 1, 2 * sizeof *soff);
    if (!soff) {
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    for (size_t i = 0; i < c.rows.n; i++) {
        const uint8_t *k = c.rows.bytes.data + c.rows.off[i * 4];
        size_t kl = c.rows.off[i * 4 + 1];
        /* The record's first key: the key without its last tuple element (the split suffix). */
        rl__tuple_iter it;
        rl__tuple_elem el;
        size_t body = c.b.len, last = c.b.len;
        rl__tuple_iter_init(&it, k + c.b.len, kl - c.b.len);
        while (rl__tuple_iter_next(&it, &el) == RL_OK) {
            last = body;
            body = (size_t)(el.raw - k) + el.raw_len;
        }
        if (ns && soff[(ns - 1) * 2 + 1] == last && memcmp(starts.data + soff[(ns - 1) * 2], k, last) == 0) continue;
        soff[ns * 2] = starts.len;
        soff[ns * 2 + 1] = last;
        rl__buf_append(&starts, k, last);
        ns++;
    }
    if (team_of && n_team_of != ns) {
        rl__errdetail_append(err, "the placement names the teams of %zu records, the store holds %zu", n_team_of, ns);
        rc = RL_E_INVALID_ARGUMENT;
        goto out;
    }
    for (size_t i = 0; team_of && i < ns; i++)
        if (team_of[i] >= n_rec_teams) {
            rl__errdetail_append(err, "record %zu: team %u of %u", i, team_of[i], n_rec_teams);
            rc = RL_E_INVALID_ARGUMENT;
            goto out;
        }
    /* The ranges: points[j] is the record where range j + 1 starts, team[j] the team of range j. */
    size_t *points = rl__calloc(ns + n_rec_teams + 1, sizeof *points);
    uint32_t *team = rl__calloc(ns + n_rec_teams + 1, sizeof *team);
    if (!points || !team || rl__buf_error(&starts)) {
        rl__free(points);
        rl__free(team);
        rc = RL_E_OUT_OF_MEMORY;
        goto out;
    }
    size_t np;
    if (team_of) { /* runs of records with the same team */
        np = 0;
        team[0] = ns ? team_of[0] : 0;
        for (size_t i = 1; i < ns; i++)
            if (team_of[i] != team_of[i - 1]) points[np] = i, team[++np] = team_of[i];
    } else {
        np = rl__pl_split_points(ns, n_rec_teams, points);
        for (size_t j = 0; j <= np; j++) team[j] = (uint32_t)j;
    }
    for (size_t j = 0; j <= np && rc == RL_OK; j++) {
        const uint8_t *b = j == 0 ? c.b.data : starts.data + soff[points[j - 1] * 2];
        size_t bl = j == 0 ? c.b.len : soff[points[j - 1] * 2 + 1];
        const uint8_t *e = j == np ? c.e.data : starts.data + soff[points[j] * 2];
        size_t el = j == np ? c.e.len : soff[points[j] * 2 + 1];
        rc = rl__placement_assign(url, key_file, b, bl, e, el, rec_teams[team[j]], n_rec_team[team[j]], timeout_ms,
                                  NULL, NULL, err);
    }
    rl__free(points);
    rl__free(team);
out:
    rl__free(soff);
    rl__buf_release(&starts);
    rl__buf_release(&ib);
    rl__buf_release(&ie);
    rl__buf_release(&c.b);
    rl__buf_release(&c.e);
    rows_free(&c.rows);
    rl__tool_close(&t);
    return rc;
}
