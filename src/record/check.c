/* check.c — the integrity checker (rl_store_check) and deliberate corruption for tests and
 * `rl inject-defect` (rl_store_inject_defect).
 *
 * The checker makes two passes in one transaction:
 *   1. Records: the whole records range (1, ...) through the unsplitter in reporting mode. Every
 *      defect it names becomes a report line; every assembled record is parsed (a failure is an
 *      unparsable-record defect), its primary key is remembered and the index keys it should
 *      have are added to the expected set.
 *   2. Indexes: the whole index range (2, ...). Each entry is looked up in the expected set; an
 *      entry nobody expects is an orphan (its primary key has no record) or stale (the record
 *      exists but does not produce that entry). Expected keys never seen are missing entries.
 * Lookups are binary searches over sorted arrays, so the check is O(n log n) in memory
 * proportional to the number of records and index entries.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "record/record_int.h"

typedef struct {
    const uint8_t *p;
    size_t len;
    int seen;
} key_ref;

/* A growable set of byte strings: bytes appended to one buffer, refs built once at the end. */
typedef struct {
    rl_buf bytes;
    size_t *offs; /* start of each key in bytes; its end is the next start */
    size_t n, cap;
    key_ref *refs;
} key_set;

static void set_init(key_set *k) {
    memset(k, 0, sizeof *k);
    rl__buf_init(&k->bytes);
}

static void set_release(key_set *k) {
    rl__buf_release(&k->bytes);
    rl__free(k->offs);
    rl__free(k->refs);
}

static int set_add(key_set *k, const uint8_t *p, size_t len) {
    if (RL_GROW(k->offs, k->cap, k->n + 2, 64)) return RL_E_OUT_OF_MEMORY; /* + the end offset */
    k->offs[k->n++] = k->bytes.len;
    rl__buf_append(&k->bytes, p, len);
    return rl__buf_error(&k->bytes);
}

static int ref_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    return rl__bytes_cmp(x->p, x->len, y->p, y->len);
}

/* Freeze the set: build and sort refs. */
static int set_seal(key_set *k) {
    k->refs = rl__calloc(k->n ? k->n : 1, sizeof *k->refs);
    if (!k->refs) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < k->n; i++) {
        size_t end = i + 1 < k->n ? k->offs[i + 1] : k->bytes.len;
        k->refs[i] = (key_ref){k->bytes.data + k->offs[i], end - k->offs[i], 0};
    }
    if (k->n) qsort(k->refs, k->n, sizeof *k->refs, ref_cmp);
    return RL_OK;
}

static key_ref *set_find(key_set *k, const uint8_t *p, size_t len) {
    key_ref want = {p, len, 0};
    return k->n ? bsearch(&want, k->refs, k->n, sizeof *k->refs, ref_cmp) : NULL;
}

typedef struct {
    rl_store *s;
    rl_check_report *r;
    size_t cap;        /* r->defects allocated */
    key_set pks;       /* primary keys of assembled records */
    key_set expected;  /* index keys the records should have */
    rl__errdetail why; /* the detail of a record that does not parse or index (a defect's text) */
} check_ctx;

/* Add a defect: kind and message are static text; the key is printed after the store prefix. */
static int add_defect(check_ctx *c, const char *kind, const uint8_t *key, size_t klen, const char *message,
                      const char *detail) {
    rl_check_report *r = c->r;
    if (RL_GROW(r->defects, c->cap, (size_t)r->n_defects + 1, 16)) return RL_E_OUT_OF_MEMORY;
    rl_buf k;
    rl__buf_init(&k);
    size_t pl = c->s->prefix_len;
    if (klen >= pl && !memcmp(key, c->s->prefix, pl)) {
        if (rl__tuple_print(key + pl, klen - pl, &k, NULL) != RL_OK) {
            rl__buf_reset(&k);
            rl__bytes_printable(&k, key + pl, klen - pl);
        }
    } else {
        rl__bytes_printable(&k, key, klen);
    }
    if (detail && *detail) rl__buf_printf(&k, " (%s)", detail);
    if (rl__buf_error(&k)) {
        rl__buf_release(&k);
        return RL_E_OUT_OF_MEMORY;
    }
    size_t n;
    rl_defect *d = &r->defects[r->n_defects++];
    d->kind = kind;
    d->message = message;
    d->key = (char *)rl__buf_detach(&k, &n);
    if (!d->key) {
        d->key = rl__strdup("");
        if (!d->key) {
            r->n_defects--;
            return RL_E_OUT_OF_MEMORY;
        }
    }
    return RL_OK;
}

static int record_cb(void *ud, const rl__unsplit_event *ev) {
    check_ctx *c = ud;
    if (ev->kind != RL__EV_RECORD)
        return add_defect(c, rl__unsplit_kind_name(ev->kind), ev->key, ev->key_len, rl__unsplit_kind_message(ev->kind),
                          ev->detail);
    c->r->records++;
    rl_record rec;
    int rc = rl__record_from_event(c->s, ev, &rec, &c->why);
    if (rc == RL_E_OUT_OF_MEMORY) return rc;
    if (rc) return add_defect(c, "unparsable-record", ev->key, ev->key_len, "Record does not parse", c->why.msg);
    if ((rc = set_add(&c->pks, ev->pk, ev->pk_len))) goto done;
    rl__index_keys ik;
    rl__buf_init(&ik.bytes);
    rc = rl__store_index_keys(c->s, rl__md_type_of(c->s->md, rec.type), rec.msg, &ik, &c->why);
    if (rc == RL_OK) {
        size_t off = 0;
        for (int i = 0; i < ik.n && !rc; i++) {
            rc = set_add(&c->expected, ik.bytes.data + off, ik.lens[i]);
            off += ik.lens[i];
        }
    } else if (rc != RL_E_OUT_OF_MEMORY) {
        rc = add_defect(c, "unparsable-record", ev->key, ev->key_len, "Record cannot be indexed", c->why.msg);
    }
    rl__buf_release(&ik.bytes);
done:
    rl_record_release(&rec);
    return rc;
}

/* Rebuild the primary key of an index entry: entry is the tuple after (2, subspace_key). */
static int entry_pk(const rl_store *s, int ix, const uint8_t *entry, size_t n, rl_buf *pk_out) {
    const rl__index *x = &s->md->indexes[ix];
    const rl__rtype *rt = &s->md->types[x->type];
    rl__tuple_elem el[64];
    size_t count = 0;
    rl__tuple_iter it;
    rl__tuple_elem e;
    int rc;
    rl__tuple_iter_init(&it, entry, n);
    while ((rc = rl__tuple_iter_next(&it, &e)) == RL_OK) {
        if (count == 64) return RL_E_TUPLE_MALFORMED;
        el[count++] = e;
    }
    if (rc != RL_E_NOT_FOUND) return rc;
    size_t appended = 0;
    for (int k = 0; k < rt->n_pk; k++)
        if (x->pk_pos[k] < 0) appended++;
    if (count != (size_t)x->n_fields + appended) return RL_E_TUPLE_MALFORMED;
    size_t next = (size_t)x->n_fields;
    for (int k = 0; k < rt->n_pk; k++) {
        const rl__tuple_elem *src = x->pk_pos[k] >= 0 ? &el[x->pk_pos[k]] : &el[next++];
        rl__buf_append(pk_out, src->raw, src->raw_len);
    }
    return rl__buf_error(pk_out);
}

typedef struct {
    check_ctx *c;
    size_t idx_prefix_len; /* prefix + pack(2) */
    rl_buf pk;
} index_walk;

static int check_index_entry(index_walk *w, const uint8_t *key, size_t klen) {
    check_ctx *c = w->c;
    c->r->index_entries++;
    key_ref *hit = set_find(&c->expected, key, klen);
    if (hit) {
        hit->seen = 1;
        return RL_OK;
    }
    /* Whose entry is it? (2, subspace_key, values..., pk...) */
    rl__tuple_iter it;
    rl__tuple_elem sk;
    rl__tuple_iter_init(&it, key + w->idx_prefix_len, klen - w->idx_prefix_len);
    int ix = -1;
    if (rl__tuple_iter_next(&it, &sk) == RL_OK && sk.type == RL_TT_STRING) {
        rl_buf name;
        rl__buf_init(&name);
        rl__tuple_elem_unescape(&sk, &name);
        for (int i = 0; i < c->s->md->n_indexes && !rl__buf_error(&name); i++)
            if (!strcmp(c->s->md->indexes[i].subspace_key, (const char *)name.data)) ix = i;
        rl__buf_release(&name);
    }
    if (ix < 0) return add_defect(c, "bad-key", key, klen, "Index entry of no index in the metadata", "");
    rl__buf_reset(&w->pk);
    const uint8_t *entry = it.p;
    if (entry_pk(c->s, ix, entry, (size_t)(key + klen - entry), &w->pk) != RL_OK)
        return add_defect(c, "bad-key", key, klen, "Index entry does not have the index's columns", "");
    if (!set_find(&c->pks, w->pk.data, w->pk.len))
        return add_defect(c, "orphan-index-entry", key, klen, "Record not found for index entry", "");
    return add_defect(c, "stale-index-entry", key, klen, "Index entry does not match its record", "");
}

/* Unsplitter callback stand-in for the index pass: the index range is paged with the same
 * drain helper, so every key arrives as a bad-key event (the index prefix is not the records
 * prefix) and is checked here. */
static int index_cb(void *ud, const rl__unsplit_event *ev) { return check_index_entry(ud, ev->key, ev->key_len); }

static int store_check(rl_store *s, rl_txn *txn, rl_check_report *out) {
    int rc;
    check_ctx c;
    rl_buf b, e;
    rl__unsplitter u;
    index_walk w;
    rl__tuple_packer pk;
    memset(out, 0, sizeof *out);
    memset(&c, 0, sizeof c);
    c.s = s;
    c.r = out;
    rl__errdetail_init(&c.why, NULL);
    memset(&w, 0, sizeof w);
    w.c = &c;
    set_init(&c.pks);
    set_init(&c.expected);
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__buf_init(&w.pk);
    /* Pass 1: records. */
    rl__unsplitter_init(&u, s->rec_prefix, s->rec_prefix_len, 0);
    rl__store_record_range(s, NULL, 0, &b, &e); /* every record: R+0x00 .. R+0xff */
    if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) goto fail;
    rc = rl__store_drain(txn, &b, &e, RL_SNAPSHOT,
                         rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len),
                                          RL_FIRST_GREATER_OR_EQUAL(e.data, e.len), 0, 0, RL_STREAMING_WANT_ALL, 0,
                                          RL_SNAPSHOT),
                         &u, record_cb, &c);
    rl__unsplitter_release(&u);
    if (rc) goto fail;
    if ((rc = set_seal(&c.pks)) || (rc = set_seal(&c.expected))) goto fail;
    /* Pass 2: indexes. The unsplitter gets an impossible prefix, so every key is handed to
     * index_cb as it is. */
    rl__store_key(s, RL__KS_INDEX, &b, &pk);
    w.idx_prefix_len = b.len;
    rl__buf_reset(&e);
    rl__buf_append(&e, b.data, b.len);
    rl__buf_append_byte(&b, 0x00);
    rl__buf_append_byte(&e, 0xff);
    if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) goto fail;
    static const uint8_t never[] = {0xff, 0xff, 0xff, 0xff};
    rl__unsplitter_init(&u, never, sizeof never, 0);
    rc = rl__store_drain(txn, &b, &e, RL_SNAPSHOT,
                         rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len),
                                          RL_FIRST_GREATER_OR_EQUAL(e.data, e.len), 0, 0, RL_STREAMING_WANT_ALL, 0,
                                          RL_SNAPSHOT),
                         &u, index_cb, &w);
    rl__unsplitter_release(&u);
    if (rc) goto fail;
    /* Expected entries nobody found. Sorted order makes the report deterministic. */
    for (size_t i = 0; i < c.expected.n && !rc; i++)
        if (!c.expected.refs[i].seen)
            rc = add_defect(&c, "missing-index-entry", c.expected.refs[i].p, c.expected.refs[i].len,
                            "Index entry missing for record", "");
fail:
    if (rc) rl_check_report_release(out);
    set_release(&c.pks);
    set_release(&c.expected);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__buf_release(&w.pk);
    return rc;
}

int rl_store_check(rl_store *s, rl_txn *txn, rl_check_report *out) {
    unsigned mark = rl__errdetail_mark(&s->err);
    return rl__errdetail_finish(&s->err, mark, store_check(s, txn, out), "rl_store_check");
}

void rl_check_report_release(rl_check_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_defects; i++) rl__free(r->defects[i].key);
    rl__free(r->defects);
    memset(r, 0, sizeof *r);
}

void rl_check_report_print(const rl_check_report *r, void *file) {
    FILE *f = file;
    for (int i = 0; i < r->n_defects; i++)
        fprintf(f, "defect %s key=%s %s\n", r->defects[i].kind, r->defects[i].key, r->defects[i].message);
    fprintf(f, "records = %lld\nindex_entries = %lld\nintegrity_ok = %s\n", (long long)r->records,
            (long long)r->index_entries, r->n_defects ? "false" : "true");
}

/* ============================================================================================
 * Deliberate defects
 * ========================================================================================== */

static int inject_defect(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len, rl_defect_kind kind, int flags) {
    int rc;
    rl_record rec = {0};
    rl_buf k, b, e;
    rl__tuple_packer tp;
    rl__buf_init(&k);
    rl__buf_init(&b);
    rl__buf_init(&e);
    if (!(s->flags & RL_STORE_ALLOW_DEFECTS) && !(flags & RL_DEFECT_FORCE)) {
        rl__errdetail_set(&s->err, "the store was not created with allow-defects; use force to corrupt it anyway");
        rc = RL_E_CLIENT_INVALID_OPERATION;
        goto fail;
    }
    if ((rc = rl_store_load(s, txn, pk, pk_len, &rec))) goto fail;
    rl__buf_append(&k, s->rec_prefix, s->rec_prefix_len);
    rl__buf_append(&k, pk, pk_len);
    rl__tuple_packer_init(&tp, &k);
    switch (kind) {
    case RL_DEFECT_DELETE_CHUNK:
        rl__tuple_pack_int(&tp, rec.n_chunks ? RL__SUFFIX_FIRST_CHUNK : RL__SUFFIX_UNSPLIT);
        if (!(rc = rl__buf_error(&k))) rc = rl_txn_clear(txn, k.data, k.len);
        break;
    case RL_DEFECT_STRAY_SUFFIX:
        rl__tuple_pack_string(&tp, "stray", 5);
        if (!(rc = rl__buf_error(&k))) rc = rl_txn_set(txn, k.data, k.len, "stray", 5);
        break;
    case RL_DEFECT_VERSION_KEY: {
        /* Keep (or make) the version key, clear every data key: (pk, 0) .. (pk, +inf). */
        rl__store_record_range(s, pk, pk_len, &b, &e);
        rl__buf_truncate(&b, b.len - 1);
        rl__tuple_packer bp;
        rl__tuple_packer_init(&bp, &b);
        rl__tuple_pack_int(&bp, RL__SUFFIX_UNSPLIT);
        if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) break;
        if ((rc = rl_txn_clear_range(txn, b.data, b.len, e.data, e.len))) break;
        if (!rec.has_version) {
            uint8_t v[13] = {0x33, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
            rl__tuple_pack_int(&tp, RL__SUFFIX_VERSION);
            if (!(rc = rl__buf_error(&k))) rc = rl_txn_set(txn, k.data, k.len, v, sizeof v);
        }
        break;
    }
    default: rc = RL_E_INVALID_ARGUMENT; break;
    }
fail:
    rl_record_release(&rec);
    rl__buf_release(&k);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return rc;
}

int rl_store_inject_defect(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len, rl_defect_kind kind, int flags) {
    unsigned mark = rl__errdetail_mark(&s->err);
    return rl__errdetail_finish(&s->err, mark, inject_defect(s, txn, pk, pk_len, kind, flags),
                                "rl_store_inject_defect");
}
