/* store.c — the record store: header, save (insert or replace, keeping indexes and the record
 * count exact), load (one or many, pipelined), exists, delete, count, scans by primary-key range,
 * and decoding a record from the key-values of its range.
 *
 * Every operation works inside the caller's transaction; nothing here commits or retries.
 *
 * Invariants:
 *   1. A save or delete reads the record's whole range (1, pk...) first, so it knows the old
 *      version's index entries and whether the count changes, and it clears that whole range
 *      before writing, so no stale chunk, version or stray key of the old record survives.
 *   2. Every limit (key size, record size without splitting) is checked before the first write,
 *      so a refused save writes nothing.
 *   3. The record count at (4,) changes only by atomic ADD of 8-byte little-endian +1/-1, so
 *      concurrent inserts of different records never conflict on it.
 *   4. Reads of one record are one range read over (1, pk...), as in the Java Record Layer;
 *      rl_store_load_many issues every read before waiting on any.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "record/record_int.h"
#include "record_store.pb-c.h"

#define STOP_CODE 1 /* returned by callbacks to stop an unsplitter early; not an error code */

rl__errdetail *rl__store_err(const rl_store *s) { return (rl__errdetail *)&s->err; }

const char *rl_store_errmsg(const rl_store *s) { return s ? rl__errdetail_get(&s->err) : ""; }

int rl__record_defect_error(const rl__unsplit_event *ev, rl__errdetail *err) {
    rl_buf k;
    rl__buf_init(&k);
    rl__tuple_print(ev->key, ev->key_len, &k, NULL);
    rl__errdetail_set(err, "%s%s%s at key %s", rl__unsplit_kind_message(ev->kind), *ev->detail ? ": " : "", ev->detail,
                      k.data);
    rl__buf_release(&k);
    return RL_CORRUPT(RL_E_RECORD_SPLIT_CORRUPT);
}

void rl__store_key(const rl_store *s, int64_t kid, rl_buf *b, rl__tuple_packer *pk) {
    rl__buf_reset(b);
    rl__buf_append(b, s->prefix, s->prefix_len);
    rl__tuple_packer_init(pk, b);
    rl__tuple_pack_int(pk, kid);
}

void rl__store_index_prefix(const rl_store *s, const char *subspace_key, rl_buf *b) {
    const rl_metadata *md = s->md;
    if (s->ix_prefix) /* an index of the store's metadata: the prefix made with the store */
        for (int i = 0; i < md->n_indexes; i++)
            if (md->indexes[i].subspace_key == subspace_key) {
                rl__buf_append(b, s->ix_prefix[i].data, s->ix_prefix[i].len);
                return;
            }
    rl__tuple_packer pk;
    rl__buf_append(b, s->prefix, s->prefix_len);
    rl__tuple_packer_init(&pk, b);
    rl__tuple_pack_int(&pk, RL__KS_INDEX);
    rl__tuple_pack_string(&pk, subspace_key, strlen(subspace_key));
}

void rl__store_records_prefix(const rl_store *s, rl_buf *b) { rl__buf_append(b, s->rec_prefix, s->rec_prefix_len); }

void rl__store_prefix_shape(const rl_store *s, size_t *out_elems, int *out_braces) {
    *out_elems = s->prefix_elems;
    *out_braces = s->prefix_braces;
}

/* The store's per-index prefixes and its prefix's shape (rl_store_new). RL_OK or
 * RL_E_OUT_OF_MEMORY. */
static int store_precompute(rl_store *s) {
    rl__tuple_iter it;
    rl__tuple_elem e;
    rl__tuple_iter_init(&it, s->prefix, s->prefix_len);
    while (rl__tuple_iter_next(&it, &e) == RL_OK) { /* validated by rl_store_new */
        s->prefix_elems++;
        if ((e.type == RL_TT_BYTES || e.type == RL_TT_STRING) &&
            (memchr(e.payload, '{', e.payload_len) || memchr(e.payload, '}', e.payload_len)))
            s->prefix_braces = 1;
    }
    int n = s->md->n_indexes;
    if (n == 0) return RL_OK;
    rl_slice *ix = rl__calloc((size_t)n, sizeof *ix);
    if (!ix) return RL_E_OUT_OF_MEMORY;
    int rc = RL_OK;
    for (int i = 0; i < n && rc == RL_OK; i++) {
        rl_buf b;
        rl__buf_init(&b);
        rl__store_index_prefix(s, s->md->indexes[i].subspace_key, &b); /* s->ix_prefix is still NULL */
        if ((rc = rl__buf_error(&b)) == RL_OK) {
            size_t len;
            ix[i].data = rl__buf_detach(&b, &len);
            ix[i].len = len;
        }
        rl__buf_release(&b);
    }
    s->ix_prefix = ix;
    return rc;
}

/* ============================================================================================
 * Handles and the header
 * ========================================================================================== */

int rl_store_new(const rl_metadata *md, const void *prefix, size_t prefix_len, uint32_t flags, rl_store **out) {
    rl_store *s = NULL;
    size_t n = 0;
    /* No store yet: the detail goes on the metadata (the parent; errdetail.h, rule 3). */
    rl__errdetail *err = md ? (rl__errdetail *)&md->err : NULL;
    *out = NULL;
    if (!md || !md->built || !prefix || prefix_len == 0) {
        rl__errdetail_set(err, "rl_store_new: %s",
                          !md || !md->built ? "the metadata is not built" : "the store prefix is empty");
        return RL_E_INVALID_ARGUMENT;
    }
    if (flags & ~(uint32_t)(RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS | RL_STORE_ALLOW_DEFECTS)) {
        rl__errdetail_set(err, "rl_store_new: unknown flags 0x%x", (unsigned)flags);
        return RL_E_INVALID_ARGUMENT;
    }
    if (rl__tuple_validate(prefix, prefix_len, &n) != RL_OK || n == 0) {
        rl__errdetail_set(err, "store prefix is not a packed tuple");
        return RL_E_INVALID_ARGUMENT;
    }
    s = rl__calloc(1, sizeof *s);
    if (!s) {
        rl__errdetail_set(err, "rl_store_new: out of memory");
        return RL_E_OUT_OF_MEMORY;
    }
    pthread_mutex_init(&s->err_mu, NULL);
    rl__errdetail_init(&s->err, &s->err_mu);
    s->md = md;
    s->flags = flags;
    s->prefix = rl__memdup(prefix, prefix_len);
    s->prefix_len = prefix_len;
    rl_buf b;
    rl__tuple_packer pk;
    rl__buf_init(&b);
    rl__store_key(s, RL__KS_RECORD, &b, &pk);
    if (!s->prefix || rl__buf_error(&b)) {
        rl__buf_release(&b);
        rl_store_free(s);
        rl__errdetail_set(err, "rl_store_new: out of memory");
        return RL_E_OUT_OF_MEMORY;
    }
    s->rec_prefix = rl__buf_detach(&b, &s->rec_prefix_len);
    if (store_precompute(s) != RL_OK) {
        rl_store_free(s);
        rl__errdetail_set(err, "rl_store_new: out of memory");
        return RL_E_OUT_OF_MEMORY;
    }
    atomic_init(&s->user_version, 0);
    *out = s;
    return RL_OK;
}

void rl_store_free(rl_store *s) {
    if (!s) return;
    rl__free(s->prefix);
    rl__free(s->rec_prefix);
    if (s->ix_prefix)
        for (int i = 0; i < s->md->n_indexes; i++) rl__free((void *)s->ix_prefix[i].data);
    rl__free(s->ix_prefix);
    pthread_mutex_destroy(&s->err_mu);
    rl__free(s);
}

uint32_t rl_store_flags(const rl_store *s) { return s->flags; }
rl_slice rl_store_prefix(const rl_store *s) { return (rl_slice){s->prefix, s->prefix_len}; }
const rl_metadata *rl_store_metadata(const rl_store *s) { return s->md; }

static int store_open(rl_store *s, rl_txn *txn) {
    int rc, present = 0, vlen = 0;
    const uint8_t *v = NULL;
    rl_buf key, val;
    rl__tuple_packer pk;
    rl_future *f = NULL;
    Reclayer__StoreHeader *h = NULL;
    rl__buf_init(&key);
    rl__buf_init(&val);
    rl__store_key(s, RL__KS_STORE_INFO, &key, &pk);
    if ((rc = rl__buf_error(&key))) goto fail;
    f = rl_txn_get(txn, key.data, key.len, 0);
    if ((rc = rl_future_wait(f)) || (rc = rl_future_get_value(f, &present, &v, &vlen))) goto fail;
    if (!present) {
        Reclayer__StoreHeader nh = RECLAYER__STORE_HEADER__INIT;
        nh.has_format_version = 1, nh.format_version = RL_STORE_FORMAT_VERSION;
        nh.has_meta_data_version = 1, nh.meta_data_version = s->md->version;
        nh.has_last_update_time = 1, nh.last_update_time = rl__clock_wall_us();
        nh.has_split_long_records = 1, nh.split_long_records = !!(s->flags & RL_STORE_SPLIT_LONG_RECORDS);
        nh.has_store_record_versions = 1, nh.store_record_versions = !!(s->flags & RL_STORE_RECORD_VERSIONS);
        nh.has_allow_defects = 1, nh.allow_defects = !!(s->flags & RL_STORE_ALLOW_DEFECTS);
        size_t n = reclayer__store_header__get_packed_size(&nh);
        if ((rc = rl__buf_reserve(&val, n))) goto fail;
        val.len = reclayer__store_header__pack(&nh, val.data);
        if ((rc = rl_txn_set(txn, key.data, key.len, val.data, val.len))) goto fail;
        s->is_open = 1;
        goto done;
    }
    h = reclayer__store_header__unpack(&rl__record_allocator, (size_t)vlen, v);
    if (!h) {
        rl__errdetail_set(&s->err, "store header at (0,) does not parse");
        rc = RL_CORRUPT(RL_E_CORRUPT_DATA);
        goto fail;
    }
    if (h->format_version > RL_STORE_FORMAT_VERSION) {
        rl__errdetail_set(&s->err, "store format version %d is newer than this library's %d", h->format_version,
                          RL_STORE_FORMAT_VERSION);
        rc = RL_E_STORE_METADATA_MISMATCH;
        goto fail;
    }
    if (h->meta_data_version != s->md->version) {
        rl__errdetail_set(&s->err, "store has metadata version %d, the metadata given is version %d",
                          h->meta_data_version, s->md->version);
        rc = RL_E_STORE_METADATA_MISMATCH;
        goto fail;
    }
    s->flags = (h->split_long_records ? RL_STORE_SPLIT_LONG_RECORDS : 0) |
               (h->store_record_versions ? RL_STORE_RECORD_VERSIONS : 0) |
               (h->allow_defects ? RL_STORE_ALLOW_DEFECTS : 0);
    s->is_open = 1;
done:
    rc = RL_OK;
fail:
    if (h) reclayer__store_header__free_unpacked(h, &rl__record_allocator);
    rl_future_free(f);
    rl__buf_release(&key);
    rl__buf_release(&val);
    return rc;
}

/* Every public call on a store ends here: a failure that set no detail still leaves one
 * (errdetail.h, rule 1). */
#define STORE_CALL(s, what, call)                                             \
    do {                                                                      \
        unsigned mark_ = rl__errdetail_mark(&(s)->err);                       \
        return rl__errdetail_finish(rl__store_err(s), mark_, (call), (what)); \
    } while (0)

int rl_store_open(rl_store *s, rl_txn *txn) { STORE_CALL(s, "rl_store_open", store_open(s, txn)); }

/* ============================================================================================
 * Records from key-values
 * ========================================================================================== */

void rl_record_release(rl_record *r) {
    if (!r) return;
    if (r->msg) protobuf_c_message_free_unpacked(r->msg, &rl__record_allocator);
    rl__free(r->pk);
    memset(r, 0, sizeof *r);
}

void rl_record_page_release(rl_record_page *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) rl_record_release(&p->records[i]);
    rl__free(p->records);
    rl__free(p->continuation);
    memset(p, 0, sizeof *p);
}

int rl__record_from_event(const rl_store *s, const rl__unsplit_event *ev, rl_record *out, rl__errdetail *d) {
    int t, rc;
    rl__errdetail err;
    memset(out, 0, sizeof *out);
    rl__errdetail_init(&err, NULL);
    rc = rl__record_parse(s->md, ev->data, ev->data_len, &t, &out->msg, &err);
    if (rc) {
        rl_buf k;
        rl__buf_init(&k);
        rl__tuple_print(ev->pk, ev->pk_len, &k, NULL);
        rl__errdetail_set(d, "record %s: %s", k.data, rl__errdetail_get(&err));
        rl__buf_release(&k);
        return rc;
    }
    out->type = s->md->types[t].desc;
    out->pk = rl__memdup(ev->pk, ev->pk_len);
    if (!out->pk) {
        rl_record_release(out);
        return RL_E_OUT_OF_MEMORY;
    }
    out->pk_len = ev->pk_len;
    out->has_version = ev->has_version;
    memcpy(out->version, ev->version, 12);
    out->stored_len = ev->data_len;
    out->n_chunks = ev->n_chunks;
    return RL_OK;
}

/* Collects the record of one primary key, strictly: any defect is an error. */
typedef struct {
    const rl_store *s;
    const uint8_t *pk; /* the wanted primary key (NULL: the first record met) */
    size_t pk_len;
    int parse; /* 0: only note that a record exists */
    int found;
    rl_record *out;
    rl__errdetail *err; /* where a defect's detail goes (NULL: nowhere) */
} one_ctx;

static int one_cb(void *ud, const rl__unsplit_event *ev) {
    one_ctx *c = ud;
    if (c->pk && (ev->pk_len != c->pk_len || !ev->pk || memcmp(ev->pk, c->pk, c->pk_len) != 0))
        return RL_OK; /* a longer primary key that extends ours: not this record */
    if (ev->kind != RL__EV_RECORD) return rl__record_defect_error(ev, c->err);
    if (c->found) return RL_OK;
    c->found = 1;
    if (!c->parse) return RL_OK;
    return rl__record_from_event(c->s, ev, c->out, c->err);
}

/* Begin and end keys of the records range of pk: R + pk + 0x00 .. R + pk + 0xff. */
void rl__store_record_range(const rl_store *s, const uint8_t *pk, size_t pk_len, rl_buf *b, rl_buf *e) {
    rl__buf_reset(b);
    rl__buf_append(b, s->rec_prefix, s->rec_prefix_len);
    rl__buf_append(b, pk, pk_len);
    rl__buf_reset(e);
    rl__buf_append(e, b->data, b->len);
    rl__buf_append_byte(b, 0x00);
    rl__buf_append_byte(e, 0xff);
}

static rl_future *read_page(rl_txn *txn, const rl_buf *b, const rl_buf *e, int flags, int iteration) {
    return rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(b->data, b->len), RL_FIRST_GREATER_OR_EQUAL(e->data, e->len),
                            0, 0, iteration ? RL_STREAMING_ITERATOR : RL_STREAMING_WANT_ALL, iteration, flags);
}

int rl__range_drain(rl_txn *txn, rl_buf *b, rl_buf *e, int flags, int iteration, rl_future *f,
                    int (*wait)(void *ud, rl_future *f, int page), int (*kv)(void *ud, const rl_keyvalue *kv),
                    void *ud) {
    int rc, n, more;
    const rl_keyvalue *kvs;
    for (int page = 0;; page++) {
        if ((rc = wait ? wait(ud, f, page) : rl_future_wait(f)) ||
            (rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more)))
            break;
        for (int i = 0; i < n && !rc; i++) rc = kv(ud, &kvs[i]);
        if (rc || !more || n == 0) break;
        if (flags & RL_REVERSE) {
            rl__buf_reset(e);
            rl__buf_append(e, kvs[n - 1].key, kvs[n - 1].key_len);
        } else {
            rl__buf_reset(b);
            rl__buf_append(b, kvs[n - 1].key, kvs[n - 1].key_len);
            rl__buf_append_byte(b, 0x00);
        }
        rl_future_free(f);
        f = NULL;
        if ((rc = rl__buf_error(b)) || (rc = rl__buf_error(e))) break;
        f = rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(b->data, b->len),
                             RL_FIRST_GREATER_OR_EQUAL(e->data, e->len), 0, 0, RL_STREAMING_ITERATOR, ++iteration,
                             flags);
    }
    rl_future_free(f);
    return rc;
}

typedef struct {
    rl__unsplitter *u;
    rl__unsplit_fn fn;
    void *ud;
} drain_ctx;

static int drain_kv(void *ud, const rl_keyvalue *kv) {
    drain_ctx *d = ud;
    return rl__unsplitter_feed(d->u, kv->key, kv->key_len, kv->value, kv->value_len, d->fn, d->ud);
}

/* Feed the whole range [b, e) to u, starting from the already-issued future f (taken), then
 * finish the unsplitter. */
int rl__store_drain(rl_txn *txn, rl_buf *b, rl_buf *e, int flags, rl_future *f, rl__unsplitter *u, rl__unsplit_fn fn,
                    void *ud) {
    drain_ctx d = {u, fn, ud};
    int rc = rl__range_drain(txn, b, e, flags, 0, f, NULL, drain_kv, &d);
    return rc ? rc : rl__unsplitter_finish(u, fn, ud);
}

/* Read and assemble the record pk (strict). parse: 0 to only learn whether it exists.
 * Returns RL_OK (out filled when parse), RL_E_NOT_FOUND, corruption or transaction errors. */
int rl__store_read_record(rl_store *s, rl_txn *txn, const uint8_t *pk, size_t pk_len, int parse, rl_future *f0,
                          rl_record *out) {
    int rc;
    rl_buf b, e;
    rl__unsplitter u;
    one_ctx c = {s, pk, pk_len, parse, 0, out, &s->err};
    if (out) memset(out, 0, sizeof *out);
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__unsplitter_init(&u, s->rec_prefix, s->rec_prefix_len, 0);
    rl__store_record_range(s, pk, pk_len, &b, &e);
    if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) {
        rl_future_free(f0);
        goto done;
    }
    if (!f0) f0 = read_page(txn, &b, &e, 0, 0);
    rc = rl__store_drain(txn, &b, &e, 0, f0, &u, one_cb, &c);
    if (rc == RL_OK && !c.found) rc = RL_E_NOT_FOUND;
done:
    if (rc && out) rl_record_release(out);
    rl__unsplitter_release(&u);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return rc;
}

/* Check that pk is one complete packed tuple (the detail on s). */
static int check_pk(rl_store *s, const void *pk, size_t pk_len) {
    size_t n = 0;
    if (!pk || pk_len == 0 || rl__tuple_validate(pk, pk_len, &n) != RL_OK || n == 0) {
        rl__errdetail_set(&s->err, "primary key is not a packed tuple");
        return RL_E_INVALID_ARGUMENT;
    }
    return RL_OK;
}

static int store_load(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len, rl_record *out) {
    int rc = check_pk(s, pk, pk_len);
    if (rc) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    return rl__store_read_record(s, txn, pk, pk_len, 1, NULL, out);
}

int rl_store_load(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len, rl_record *out) {
    STORE_CALL(s, "rl_store_load", store_load(s, txn, pk, pk_len, out));
}

static int store_exists(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len) {
    int rc = check_pk(s, pk, pk_len);
    if (rc) return rc;
    return rl__store_read_record(s, txn, pk, pk_len, 0, NULL, NULL);
}

int rl_store_exists(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len) {
    STORE_CALL(s, "rl_store_exists", store_exists(s, txn, pk, pk_len));
}

static int store_load_many(rl_store *s, rl_txn *txn, const rl_slice *pks, int n, rl_record *out) {
    int rc = RL_OK, i;
    rl_future **fs = NULL;
    rl_buf b, e;
    rl__buf_init(&b);
    rl__buf_init(&e);
    for (i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
    if (n <= 0) return RL_OK;
    fs = rl__calloc((size_t)n, sizeof *fs);
    if (!fs) return RL_E_OUT_OF_MEMORY;
    for (i = 0; i < n; i++) {
        if ((rc = check_pk(s, pks[i].data, pks[i].len))) goto fail;
        rl__store_record_range(s, pks[i].data, pks[i].len, &b, &e);
        if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) goto fail;
        fs[i] = read_page(txn, &b, &e, 0, 0);
    }
    for (i = 0; i < n; i++) {
        rl_future *f = fs[i];
        fs[i] = NULL;
        rc = rl__store_read_record(s, txn, pks[i].data, pks[i].len, 1, f, &out[i]);
        if (rc == RL_E_NOT_FOUND) rc = RL_OK;
        if (rc) goto fail;
    }
fail:
    for (i = 0; i < n; i++) rl_future_free(fs[i]);
    if (rc)
        for (i = 0; i < n; i++) rl_record_release(&out[i]);
    rl__free(fs);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return rc;
}

int rl_store_load_many(rl_store *s, rl_txn *txn, const rl_slice *pks, int n, rl_record *out) {
    STORE_CALL(s, "rl_store_load_many", store_load_many(s, txn, pks, n, out));
}

int rl__store_decode(const rl_store *s, const rl_keyvalue *kvs, int n, rl_record *out, rl__errdetail *err) {
    int rc = RL_OK;
    rl__unsplitter u;
    one_ctx c = {s, NULL, 0, 1, 0, out, err};
    memset(out, 0, sizeof *out);
    rl__unsplitter_init(&u, s->rec_prefix, s->rec_prefix_len, 0);
    for (int i = 0; i < n && !rc; i++)
        rc = rl__unsplitter_feed(&u, kvs[i].key, kvs[i].key_len, kvs[i].value, kvs[i].value_len, one_cb, &c);
    if (!rc) rc = rl__unsplitter_finish(&u, one_cb, &c);
    if (!rc && !c.found) rc = RL_E_NOT_FOUND;
    if (rc) rl_record_release(out);
    rl__unsplitter_release(&u);
    return rc;
}

int rl_store_decode_record(const rl_store *s, const rl_keyvalue *kvs, int n, rl_record *out) {
    STORE_CALL(s, "rl_store_decode_record", rl__store_decode(s, kvs, n, out, rl__store_err(s)));
}

/* ============================================================================================
 * Writes
 * ========================================================================================== */

/* Build the index keys of msg (type t) into ik. RL_OK, RL_E_KEY_TOO_LARGE, RL_E_RECORD_PK_MISSING,
 * RL_E_OUT_OF_MEMORY. */
int rl__store_index_keys(const rl_store *s, int t, const ProtobufCMessage *msg, rl__index_keys *ik,
                         rl__errdetail *err) {
    rl_buf k;
    rl__tuple_packer pk;
    int rc = RL_OK;
    rl__buf_init(&k);
    ik->n = 0;
    for (int i = 0; i < s->md->n_indexes; i++) {
        const rl__index *x = &s->md->indexes[i];
        if (x->type != t) continue;
        if (ik->n == (int)(sizeof ik->lens / sizeof ik->lens[0])) {
            rc = RL_E_UNSUPPORTED_OPERATION;
            rl__errdetail_set(err, "more than 64 indexes on one record type");
            goto done;
        }
        rl__store_key(s, RL__KS_INDEX, &k, &pk);
        rl__tuple_pack_string(&pk, x->subspace_key, strlen(x->subspace_key));
        if ((rc = rl__md_pack_index_entry(s->md, i, msg, &pk, err))) goto done;
        if ((rc = rl__buf_error(&k))) goto done;
        if (k.len > RL_KEY_SIZE_LIMIT) {
            rl__errdetail_set(err, "index entry of %s is %zu bytes, over the key limit of %d", x->name, k.len,
                              RL_KEY_SIZE_LIMIT);
            rc = RL_E_KEY_TOO_LARGE;
            goto done;
        }
        rl__buf_append(&ik->bytes, k.data, k.len);
        ik->lens[ik->n++] = k.len;
    }
    rc = rl__buf_error(&ik->bytes);
done:
    rl__buf_release(&k);
    return rc;
}

int rl__store_index_entry(const rl_store *s, const char *name, const rl_record *rec, rl_buf *b, rl__errdetail *err) {
    int i = rl__md_index_named(s->md, name);
    if (i < 0) return RL_E_INDEX_UNKNOWN;
    const rl__index *x = &s->md->indexes[i];
    if (!rec || !rec->msg || !rec->type || rl__md_type_of(s->md, rec->type) != x->type) {
        rl__errdetail_set(err, "the record is not of index %s's record type", x->name);
        return RL_E_NOT_FOUND;
    }
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, b);
    int rc = rl__md_pack_index_entry(s->md, i, rec->msg, &pk, err);
    return rc ? rc : rl__buf_error(b);
}

/* Apply op (set with empty value, or clear) to every key of ik. */
static int apply_index_keys(rl_txn *txn, const rl__index_keys *ik, int is_set) {
    size_t off = 0;
    for (int i = 0; i < ik->n; i++) {
        const uint8_t *k = ik->bytes.data + off;
        int rc = is_set ? rl_txn_set(txn, k, ik->lens[i], "", 0) : rl_txn_clear(txn, k, ik->lens[i]);
        if (rc) return rc;
        off += ik->lens[i];
    }
    return RL_OK;
}

static int add_count(rl_store *s, rl_txn *txn, int64_t delta) {
    rl_buf k;
    rl__tuple_packer pk;
    uint8_t le[8];
    uint64_t u = (uint64_t)delta;
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(u >> (8 * i));
    rl__buf_init(&k);
    rl__store_key(s, RL__KS_RECORD_COUNT, &k, &pk);
    int rc = rl__buf_error(&k);
    if (!rc) rc = rl_txn_atomic_op(txn, k.data, k.len, le, 8, RL_ATOMIC_ADD);
    rl__buf_release(&k);
    return rc;
}

/* Remove the old record's index entries (from its parsed message). */
static int clear_old_indexes(rl_store *s, rl_txn *txn, const rl_record *old) {
    rl__index_keys ik;
    rl__buf_init(&ik.bytes);
    int t = rl__md_type_of(s->md, old->type);
    int rc = t < 0 ? RL_OK : rl__store_index_keys(s, t, old->msg, &ik, &s->err);
    if (!rc) rc = apply_index_keys(txn, &ik, 0);
    rl__buf_release(&ik.bytes);
    return rc;
}

static int store_save(rl_store *s, rl_txn *txn, const ProtobufCMessage *msg, int *out_existed) {
    int rc, t, existed = 0;
    rl_buf pkb, val, key, b, e;
    rl__tuple_packer pk;
    rl__index_keys ik;
    rl_record old = {0};
    rl__buf_init(&pkb);
    rl__buf_init(&val);
    rl__buf_init(&key);
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__buf_init(&ik.bytes);
    if (out_existed) *out_existed = 0;
    if (!msg || (t = rl__md_type_of(s->md, msg->descriptor)) < 0) {
        rl__errdetail_set(&s->err, "record type %s is not in the metadata",
                          msg && msg->descriptor ? msg->descriptor->name : "(none)");
        rc = RL_E_RECORD_TYPE_UNKNOWN;
        goto fail;
    }
    /* Everything that can be refused is checked before the first write (invariant 2). */
    rl__tuple_packer_init(&pk, &pkb);
    if ((rc = rl__md_pack_pk(s->md, t, msg, &pk, &s->err)) || (rc = rl__buf_error(&pkb))) goto fail;
    if (s->rec_prefix_len + pkb.len + 10 > RL_KEY_SIZE_LIMIT) {
        rl__errdetail_set(&s->err, "record key of %zu bytes is over the key limit of %d", s->rec_prefix_len + pkb.len,
                          RL_KEY_SIZE_LIMIT);
        rc = RL_E_KEY_TOO_LARGE;
        goto fail;
    }
    if ((rc = rl__record_serialize(s->md, t, msg, &val))) goto fail;
    if (val.len > RL_RECORD_SPLIT_SIZE && !(s->flags & RL_STORE_SPLIT_LONG_RECORDS)) {
        rl__errdetail_set(&s->err,
                          "Record is too long to be stored in a single value (%zu bytes); consider "
                          "split_long_records",
                          val.len);
        rc = RL_E_RECORD_TOO_LARGE;
        goto fail;
    }
    if ((rc = rl__store_index_keys(s, t, msg, &ik, &s->err))) goto fail;
    /* The old version (invariant 1). */
    rc = rl__store_read_record(s, txn, pkb.data, pkb.len, 1, NULL, &old);
    if (rc == RL_OK) {
        existed = 1;
        if ((rc = clear_old_indexes(s, txn, &old))) goto fail;
    } else if (rc != RL_E_NOT_FOUND) {
        goto fail;
    }
    rl__store_record_range(s, pkb.data, pkb.len, &b, &e);
    if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) goto fail;
    if ((rc = rl_txn_clear_range(txn, b.data, b.len, e.data, e.len))) goto fail;
    int chunks = rl__split_chunks(val.len);
    for (int i = 0; i <= chunks; i++) {
        if (chunks && i == 0) continue;
        rl__buf_reset(&key);
        rl__buf_append(&key, s->rec_prefix, s->rec_prefix_len);
        rl__buf_append(&key, pkb.data, pkb.len);
        rl__tuple_packer_init(&pk, &key);
        rl__tuple_pack_int(&pk, i);
        if ((rc = rl__buf_error(&key))) goto fail;
        size_t off = chunks ? (size_t)(i - 1) * RL_RECORD_SPLIT_SIZE : 0;
        size_t len = chunks ? val.len - off : val.len;
        if (len > RL_RECORD_SPLIT_SIZE) len = RL_RECORD_SPLIT_SIZE;
        if ((rc = rl_txn_set(txn, key.data, key.len, val.data + off, len))) goto fail;
    }
    if (s->flags & RL_STORE_RECORD_VERSIONS) {
        rl_buf vv;
        rl__tuple_packer vp;
        rl__buf_reset(&key);
        rl__buf_append(&key, s->rec_prefix, s->rec_prefix_len);
        rl__buf_append(&key, pkb.data, pkb.len);
        rl__tuple_packer_init(&pk, &key);
        rl__tuple_pack_int(&pk, RL__SUFFIX_VERSION);
        rl__buf_init(&vv);
        rl__tuple_packer_init(&vp, &vv);
        unsigned uv = atomic_fetch_add(&s->user_version, 1u);
        rl__tuple_pack_incomplete_versionstamp(&vp, (uint16_t)uv);
        rc = rl__tuple_versionstamp_suffix(&vp);
        if (!rc) rc = rl__buf_error(&vv);
        if (!rc) rc = rl__buf_error(&key);
        if (!rc) rc = rl_txn_atomic_op(txn, key.data, key.len, vv.data, vv.len, RL_ATOMIC_SET_VERSIONSTAMPED_VALUE);
        rl__buf_release(&vv);
        if (rc) goto fail;
    }
    if ((rc = apply_index_keys(txn, &ik, 1))) goto fail;
    if (!existed && (rc = add_count(s, txn, 1))) goto fail;
    if (out_existed) *out_existed = existed;
fail:
    rl_record_release(&old);
    rl__buf_release(&pkb);
    rl__buf_release(&val);
    rl__buf_release(&key);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__buf_release(&ik.bytes);
    return rc;
}

int rl_store_save(rl_store *s, rl_txn *txn, const ProtobufCMessage *msg, int *out_existed) {
    STORE_CALL(s, "rl_store_save", store_save(s, txn, msg, out_existed));
}

static int store_delete(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len) {
    int rc;
    rl_record old = {0};
    rl_buf b, e;
    rl__buf_init(&b);
    rl__buf_init(&e);
    if ((rc = check_pk(s, pk, pk_len))) goto fail;
    if ((rc = rl__store_read_record(s, txn, pk, pk_len, 1, NULL, &old))) goto fail;
    if ((rc = clear_old_indexes(s, txn, &old))) goto fail;
    rl__store_record_range(s, pk, pk_len, &b, &e);
    if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) goto fail;
    if ((rc = rl_txn_clear_range(txn, b.data, b.len, e.data, e.len))) goto fail;
    rc = add_count(s, txn, -1);
fail:
    rl_record_release(&old);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return rc;
}

int rl_store_delete(rl_store *s, rl_txn *txn, const void *pk, size_t pk_len) {
    STORE_CALL(s, "rl_store_delete", store_delete(s, txn, pk, pk_len));
}

static int store_count(rl_store *s, rl_txn *txn, int64_t *out) {
    int rc, present = 0, vlen = 0;
    const uint8_t *v = NULL;
    rl_buf k;
    rl__tuple_packer pk;
    rl_future *f = NULL;
    *out = 0;
    rl__buf_init(&k);
    rl__store_key(s, RL__KS_RECORD_COUNT, &k, &pk);
    if ((rc = rl__buf_error(&k))) goto fail;
    f = rl_txn_get(txn, k.data, k.len, 0);
    if ((rc = rl_future_wait(f)) || (rc = rl_future_get_value(f, &present, &v, &vlen))) goto fail;
    if (present) {
        uint64_t u = 0;
        for (int i = 0; i < vlen && i < 8; i++) u |= (uint64_t)v[i] << (8 * i);
        *out = (int64_t)u;
    }
fail:
    rl_future_free(f);
    rl__buf_release(&k);
    return rc;
}

int rl_store_count(rl_store *s, rl_txn *txn, int64_t *out) {
    STORE_CALL(s, "rl_store_count", store_count(s, txn, out));
}

/* ============================================================================================
 * Scans
 * ========================================================================================== */

typedef struct {
    const rl_store *s;
    rl_record_page *page;
    size_t cap; /* page->records allocated */
    int limit;
} scan_ctx;

static int scan_cb(void *ud, const rl__unsplit_event *ev) {
    scan_ctx *c = ud;
    if (ev->kind != RL__EV_RECORD) return rl__record_defect_error(ev, rl__store_err(c->s));
    if (RL_GROW(c->page->records, c->cap, (size_t)c->page->n + 1, 16)) return RL_E_OUT_OF_MEMORY;
    int rc = rl__record_from_event(c->s, ev, &c->page->records[c->page->n], rl__store_err(c->s));
    if (rc) return rc;
    c->page->n++;
    return (c->limit > 0 && c->page->n >= c->limit) ? STOP_CODE : RL_OK;
}

static int store_scan(rl_store *s, rl_txn *txn, const void *low, size_t low_len, const void *high, size_t high_len,
                      int flags, int limit, const void *continuation, size_t continuation_len, rl_record_page *out) {
    int rc = RL_OK;
    rl_buf b, e;
    rl__unsplitter u;
    scan_ctx c = {s, out, 0, limit};
    memset(out, 0, sizeof *out);
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__unsplitter_init(&u, s->rec_prefix, s->rec_prefix_len, (flags & RL_REVERSE) != 0);
    if (flags & ~(RL_REVERSE | RL_SNAPSHOT)) {
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    rl__buf_append(&b, s->rec_prefix, s->rec_prefix_len);
    if (low) rl__buf_append(&b, low, low_len);
    else rl__buf_append_byte(&b, 0x00);
    rl__buf_append(&e, s->rec_prefix, s->rec_prefix_len);
    if (high) rl__buf_append(&e, high, high_len);
    else rl__buf_append_byte(&e, 0xff);
    if (continuation && continuation_len) {
        /* The continuation is the last returned primary key: resume strictly after it
         * (forward: after every key of that pk; reverse: before them). */
        rl_buf ck;
        rl__buf_init(&ck);
        rl__buf_append(&ck, s->rec_prefix, s->rec_prefix_len);
        rl__buf_append(&ck, continuation, continuation_len);
        int ok = check_pk(s, continuation, continuation_len) == RL_OK && !rl__buf_error(&ck) &&
                 rl__bytes_cmp(ck.data, ck.len, b.data, b.len) >= 0 &&
                 rl__bytes_cmp(ck.data, ck.len, e.data, e.len) < 0;
        if (ok) {
            if (flags & RL_REVERSE) {
                rl__buf_reset(&e);
                rl__buf_append(&e, ck.data, ck.len);
            } else {
                rl__buf_reset(&b);
                rl__buf_append(&b, ck.data, ck.len);
                rl__buf_append_byte(&b, 0xff);
            }
        }
        rl__buf_release(&ck);
        if (!ok) {
            rl__errdetail_set(&s->err, "continuation is not a primary key inside the scan's bounds");
            rc = RL_E_CONTINUATION_INVALID;
            goto fail;
        }
    }
    if ((rc = rl__buf_error(&b)) || (rc = rl__buf_error(&e))) goto fail;
    if (rl__bytes_cmp(b.data, b.len, e.data, e.len) >= 0) goto fail; /* empty range */
    {
        /* Page through the range with ITERATOR mode so a limited scan reads little. */
        rl_future *f =
            rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(b.data, b.len), RL_FIRST_GREATER_OR_EQUAL(e.data, e.len), 0,
                             0, RL_STREAMING_ITERATOR, 1, flags);
        rc = rl__store_drain(txn, &b, &e, flags, f, &u, scan_cb, &c);
    }
    if (rc == STOP_CODE) {
        rc = RL_OK;
        const rl_record *last = &out->records[out->n - 1];
        out->continuation = rl__memdup(last->pk, last->pk_len);
        if (!out->continuation) {
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        out->continuation_len = last->pk_len;
    }
fail:
    if (rc) rl_record_page_release(out);
    rl__unsplitter_release(&u);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return rc;
}

int rl_store_scan(rl_store *s, rl_txn *txn, const void *low, size_t low_len, const void *high, size_t high_len,
                  int flags, int limit, const void *continuation, size_t continuation_len, rl_record_page *out) {
    STORE_CALL(s, "rl_store_scan",
               store_scan(s, txn, low, low_len, high, high_len, flags, limit, continuation, continuation_len, out));
}
