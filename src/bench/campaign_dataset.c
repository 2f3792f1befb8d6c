/* campaign_dataset.c — the campaign's dataset steps (campaign_int.h): loading the Orders through
 * the record layer (rl__tool_save_orders, the generator of `rl load`), the integrity checker, the
 * three defect controls on a scratch copy, the SQLite peer made from the loaded records, and the
 * embedded placement receipt (the layout of a store's keys).
 *
 * Everything goes through the library (src/record, include/reclayer), never through the rl binary.
 */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "bench/campaign_int.h"
#include "tuple/tuple.h"
#include "order.pb-c.h"

/* ---- Loading ----------------------------------------------------------------------------------- */

typedef struct {
    rl_store *s;
    int64_t first, n;
    uint64_t seed;
    const uint8_t *pad;
    size_t pad_len;
} load_batch;

static int load_fn(rl_txn *txn, void *ud) {
    load_batch *b = ud;
    return rl__tool_save_orders(b->s, txn, b->first, b->n, b->seed, b->pad, b->pad_len);
}

/* Padding bytes: a repeating alphabet (as rl load). NULL when padding is 0 or memory ran out
 * (*out_rc says which). */
static uint8_t *make_pad(int padding, int *out_rc) {
    *out_rc = RL_OK;
    if (padding <= 0) return NULL;
    uint8_t *pad = rl__malloc((size_t)padding);
    if (!pad) {
        *out_rc = RL_E_OUT_OF_MEMORY;
        return NULL;
    }
    for (int i = 0; i < padding; i++) pad[i] = (uint8_t)('a' + i % 26);
    return pad;
}

/* Save Orders first..first+n-1 into t's store in batches of about 4 MB. */
static int save_range(rl__tool *t, int64_t first, int64_t n, uint64_t seed, const uint8_t *pad, int padding) {
    int64_t per = 4000000 / (padding + 200);
    per = per < 1 ? 1 : per > 500 ? 500 : per;
    for (int64_t id = first; id < first + n; id += per) {
        load_batch b = {t->s, id, first + n - id < per ? first + n - id : per, seed, pad, (size_t)padding};
        int rc = rl_db_run(t->db, load_fn, &b);
        if (rc) return rc;
    }
    return RL_OK;
}

int rl__camp_load(const char *url, const char *store, const rl__camp_protocol *p, int padding, rl__errdetail *err) {
    rl__tool t;
    int rc;
    uint8_t *pad = make_pad(padding, &rc);
    if (rc) goto fail;
    if ((rc = rl__tool_open(&t, url, store, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, 0))) {
        rl__errdetail_append(err, "cannot open %s: %s", url, rl__tool_errmsg(&t));
        goto fail;
    }
    rc = save_range(&t, 1, p->records, p->data_seed, pad, padding);
    if (rc)
        rl__errdetail_append(err, "loading %d Orders into %s %s: %s %s", p->records, url, store, rl_error_name(rc),
                             rl_store_errmsg(t.s));
    rl__tool_close(&t);
fail:
    rl__free(pad);
    return rc;
}

/* ---- The integrity checker --------------------------------------------------------------------- */

/* Check t's store into *out (see rl__camp_integrity). */
static int check_store(rl__tool *t, json_t *out, int *out_ok, json_t *kinds, rl__errdetail *err) {
    rl_txn *txn = NULL;
    rl_check_report rep;
    int rc;
    memset(&rep, 0, sizeof rep);
    if ((rc = rl_txn_begin(t->db, &txn)) || (rc = rl_store_check(t->s, txn, &rep))) {
        rl__errdetail_append(err, "the integrity checker failed: %s %s", rl_error_name(rc), rl_store_errmsg(t->s));
        goto done;
    }
    json_t *defects = json_array();
    for (int i = 0; i < rep.n_defects; i++) {
        json_array_append_new(defects, json_pack("{s:s, s:s, s:s}", "kind", rep.defects[i].kind, "key",
                                                 rep.defects[i].key ? rep.defects[i].key : "", "message",
                                                 rep.defects[i].message ? rep.defects[i].message : ""));
        if (kinds) json_array_append_new(kinds, json_string(rep.defects[i].kind));
    }
    json_object_set_new(out, "records", json_integer(rep.records));
    json_object_set_new(out, "index_entries", json_integer(rep.index_entries));
    json_object_set_new(out, "integrity_ok", json_boolean(rep.n_defects == 0));
    json_object_set_new(out, "defects", defects);
    *out_ok = rep.n_defects == 0;
done:
    rl_check_report_release(&rep);
    rl_txn_free(txn);
    return rc;
}

int rl__camp_integrity(const char *url, const char *store, json_t **out, rl__errdetail *err) {
    rl__tool t;
    int ok = 0, rc;
    *out = NULL;
    if ((rc = rl__tool_open(&t, url, store, 0, RL__TOOL_READ_ONLY))) {
        rl__errdetail_append(err, "cannot open %s %s: %s", url, store, rl__tool_errmsg(&t));
        return rc;
    }
    json_t *o = json_pack("{s:s, s:s}", "url", url, "store", store);
    rc = check_store(&t, o, &ok, NULL, err);
    rl__tool_close(&t);
    if (rc) {
        json_decref(o);
        return rc;
    }
    *out = o;
    return RL_OK;
}

/* ---- Defect controls --------------------------------------------------------------------------- */

typedef struct {
    rl_store *s;
    const uint8_t *pk;
    size_t pk_len;
    rl_defect_kind kind;
} inject_ctx;

static int inject_fn(rl_txn *txn, void *ud) {
    inject_ctx *c = ud;
    return rl_store_inject_defect(c->s, txn, c->pk, c->pk_len, c->kind, RL_DEFECT_FORCE);
}

int rl__camp_defect_controls(const char *url, const rl__camp_protocol *p, json_t **out, int *out_passed,
                             rl__errdetail *err) {
    static const struct {
        const char *name;
        rl_defect_kind kind;
    } controls[3] = {{"delete-chunk", RL_DEFECT_DELETE_CHUNK},
                     {"stray-suffix", RL_DEFECT_STRAY_SUFFIX},
                     {"version-key", RL_DEFECT_VERSION_KEY}};
    int rc = RL_OK, n = p->records < 10 ? p->records : 10;
    uint8_t *pad = make_pad(p->split_padding, &rc);
    json_t *arr = json_array();
    rl_buf pk;
    rl__tuple_packer tp;
    rl__buf_init(&pk);
    rl__tuple_packer_init(&tp, &pk);
    rl__tuple_pack_int(&tp, n >= 3 ? 3 : 1);
    *out_passed = 1;
    *out = NULL;
    if (rc) goto done;
    for (int i = 0; i < 3; i++) {
        char store[64];
        rl__tool t;
        int clean = 0, ok_after = 1;
        snprintf(store, sizeof store, "[\"bench\",\"control\",\"%s\"]", controls[i].name);
        if ((rc = rl__tool_open(&t, url, store,
                                RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS | RL_STORE_ALLOW_DEFECTS, 0))) {
            rl__errdetail_append(err, "defect control %s: cannot open %s: %s", controls[i].name, url,
                                 rl__tool_errmsg(&t));
            goto done;
        }
        json_t *before = json_object(), *after = json_object(), *found = json_array();
        inject_ctx ic = {t.s, (const uint8_t *)pk.data, pk.len, controls[i].kind};
        if (!(rc = save_range(&t, 1, n, p->data_seed, pad, p->split_padding)) &&
            !(rc = check_store(&t, before, &clean, NULL, err)) && !(rc = rl_db_run(t.db, inject_fn, &ic)))
            rc = check_store(&t, after, &ok_after, found, err);
        if (rc && !rl__errdetail_len(err))
            rl__errdetail_append(err, "defect control %s: %s %s", controls[i].name, rl_error_name(rc),
                                 rl_store_errmsg(t.s));
        rl__tool_close(&t);
        int has = 0;
        for (size_t j = 0; j < json_array_size(found); j++)
            has |= !strcmp(json_string_value(json_array_get(found, j)), controls[i].name);
        int passed = !rc && clean && !ok_after && has;
        *out_passed &= passed;
        json_array_append_new(
            arr, json_pack("{s:s, s:s, s:i, s:b, s:b, s:o, s:s, s:b, s:o}", "defect", controls[i].name, "store", store,
                           "records", n, "clean_before", clean, "integrity_ok_after", ok_after, "found", found,
                           "expected", controls[i].name, "passed", passed, "defects_after",
                           json_incref(json_object_get(after, "defects") ? json_object_get(after, "defects")
                                                                         : json_array())));
        json_decref(before);
        json_decref(after);
        if (rc) goto done;
    }
done:
    if (rc) *out_passed = 0;
    *out = arr;
    rl__buf_release(&pk);
    rl__free(pad);
    return rc;
}

/* ---- The SQLite peer --------------------------------------------------------------------------- */

static int sq_exec(sqlite3 *db, const char *sql, rl__errdetail *err) {
    char *sq_err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &sq_err) == SQLITE_OK) return RL_OK;
    rl__errdetail_append(err, "SQLite: %s: %s", sql, sq_err ? sq_err : "error");
    sqlite3_free(sq_err);
    return RL_E_IO_ERROR;
}

int rl__camp_sqlite_peer(const char *url, const char *store, const char *path, rl__errdetail *err) {
    rl__tool t;
    sqlite3 *db = NULL;
    sqlite3_stmt *ins = NULL;
    rl_txn *txn = NULL;
    rl_record_page page;
    uint8_t *cont = NULL;
    size_t cont_len = 0;
    int rc;
    memset(&page, 0, sizeof page);
    if ((rc = rl__tool_open(&t, url, store, 0, RL__TOOL_READ_ONLY))) {
        rl__errdetail_append(err, "cannot open %s %s: %s", url, store, rl__tool_errmsg(&t));
        return rc;
    }
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
        rl__errdetail_append(err, "SQLite: cannot create %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        rc = RL_E_IO_ERROR;
        goto done;
    }
    if ((rc = sq_exec(db,
                      "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                      "CREATE TABLE orders(order_id INTEGER PRIMARY KEY, price INTEGER, padding BLOB,"
                      " customer TEXT, quantity INTEGER); CREATE INDEX price_idx ON orders(price); BEGIN",
                      err)))
        goto done;
    if (sqlite3_prepare_v2(db, "INSERT INTO orders VALUES(?,?,?,?,?)", -1, &ins, NULL) != SQLITE_OK) {
        rl__errdetail_append(err, "SQLite: %s", sqlite3_errmsg(db));
        rc = RL_E_IO_ERROR;
        goto done;
    }
    /* Read every record back through the store, a page of 50 per transaction. */
    do {
        if ((rc = rl_txn_begin(t.db, &txn)) ||
            (rc = rl_store_scan(t.s, txn, NULL, 0, NULL, 0, RL_SNAPSHOT, 50, cont, cont_len, &page))) {
            rl__errdetail_append(err, "reading %s %s: %s %s", url, store, rl_error_name(rc), rl_store_errmsg(t.s));
            goto done;
        }
        for (int i = 0; i < page.n; i++) {
            const Reclayer__Order *o = (const Reclayer__Order *)page.records[i].msg;
            sqlite3_bind_int64(ins, 1, o->order_id);
            sqlite3_bind_int64(ins, 2, o->price);
            if (o->has_padding) sqlite3_bind_blob(ins, 3, o->padding.data, (int)o->padding.len, SQLITE_STATIC);
            else sqlite3_bind_null(ins, 3);
            sqlite3_bind_text(ins, 4, o->customer ? o->customer : "", -1, SQLITE_STATIC);
            sqlite3_bind_int64(ins, 5, o->quantity);
            int e = sqlite3_step(ins);
            sqlite3_reset(ins);
            if (e != SQLITE_DONE) {
                rl__errdetail_append(err, "SQLite: insert into %s: %s", path, sqlite3_errmsg(db));
                rc = RL_E_IO_ERROR;
                goto done;
            }
        }
        rl__free(cont);
        cont = page.continuation ? rl__memdup(page.continuation, page.continuation_len) : NULL;
        cont_len = page.continuation_len;
        rl_record_page_release(&page);
        rl_txn_free(txn);
        txn = NULL;
        if (cont_len && !cont) {
            rc = RL_E_OUT_OF_MEMORY;
            goto done;
        }
    } while (cont);
    rc = sq_exec(db, "COMMIT; ANALYZE", err);
done:
    rl_record_page_release(&page);
    rl_txn_free(txn);
    rl__free(cont);
    sqlite3_finalize(ins);
    sqlite3_close(db);
    rl__tool_close(&t);
    return rc;
}

/* ---- The embedded placement receipt ------------------------------------------------------------ */

int rl__camp_layout_receipt(const char *url, const char *store, json_t **out, rl__errdetail *err) {
    rl__tool t;
    rl_txn *txn = NULL;
    rl_future *f = NULL;
    rl_buf begin, end;
    uint64_t keys = 0, key_bytes = 0, value_bytes = 0, rec = 0, idx = 0, other = 0, h = 0;
    int rc, more = 1;
    *out = NULL;
    if ((rc = rl__tool_open(&t, url, store, 0, RL__TOOL_READ_ONLY))) {
        rl__errdetail_append(err, "cannot open %s %s: %s", url, store, rl__tool_errmsg(&t));
        return rc;
    }
    rl_slice pre = rl_store_prefix(t.s);
    rl__buf_init(&begin);
    rl__buf_init(&end);
    rl__buf_append(&begin, pre.data, pre.len);
    rl__buf_append(&end, pre.data, pre.len);
    rl__buf_append_byte(&end, 0xff);
    if ((rc = rl__buf_error(&begin)) || (rc = rl__buf_error(&end)) || (rc = rl_txn_begin(t.db, &txn))) goto done;
    int first = 1;
    while (more) {
        const rl_keyvalue *kvs;
        int n;
        rl_key_selector b =
            first ? RL_FIRST_GREATER_OR_EQUAL(begin.data, begin.len) : RL_FIRST_GREATER_THAN(begin.data, begin.len);
        f = rl_txn_get_range(txn, b, RL_FIRST_GREATER_OR_EQUAL(end.data, end.len), 200, 0, RL_STREAMING_ITERATOR, 1,
                             RL_SNAPSHOT);
        if ((rc = rl_future_wait(f)) || (rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more))) goto done;
        for (int i = 0; i < n; i++) {
            const uint8_t *k = kvs[i].key + pre.len;
            size_t kl = kvs[i].key_len - pre.len;
            keys++;
            key_bytes += kvs[i].key_len;
            value_bytes += kvs[i].value_len;
            if (kl >= 2 && k[0] == 0x15 && k[1] == RL__KS_RECORD) rec++;
            else if (kl >= 2 && k[0] == 0x15 && k[1] == RL__KS_INDEX) idx++;
            else other++;
            h = rl__hash64(kvs[i].key, kvs[i].key_len, h ^ kvs[i].value_len);
        }
        if (n) {
            rl__buf_reset(&begin);
            rl__buf_append(&begin, kvs[n - 1].key, kvs[n - 1].key_len);
            first = 0;
        } else {
            more = 0;
        }
        rl_future_free(f);
        f = NULL;
        if ((rc = rl__buf_error(&begin))) goto done;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    *out = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s}", "kind", "layout", "url", url, "store", store,
                     "keys", (json_int_t)keys, "key_bytes", (json_int_t)key_bytes, "value_bytes",
                     (json_int_t)value_bytes, "record_keys", (json_int_t)rec, "index_entries", (json_int_t)idx,
                     "other_keys", (json_int_t)other, "keys_xxh64", hex);
done:
    if (rc) rl__errdetail_append(err, "reading the layout of %s %s: %s", url, store, rl_error_name(rc));
    rl_future_free(f);
    rl_txn_free(txn);
    rl__buf_release(&begin);
    rl__buf_release(&end);
    rl__tool_close(&t);
    return rc;
}

/* ---- The cluster's shard map ------------------------------------------------------------------- */

/* Count and hash the key-values of [begin, end) of the system keyspace into *n and *h. */
static int hash_system_range(rl_txn *txn, const char *begin, const char *end, uint64_t *n, uint64_t *h) {
    const rl_keyvalue *kvs;
    int count, more, rc;
    rl_future *f =
        rl_txn_get_range(txn, RL_FIRST_GREATER_OR_EQUAL(begin, strlen(begin)),
                         RL_FIRST_GREATER_OR_EQUAL(end, strlen(end)), 0, 0, RL_STREAMING_WANT_ALL, 1, RL_SNAPSHOT);
    if (!(rc = rl_future_wait(f)) && !(rc = rl_future_get_keyvalue_array(f, &kvs, &count, &more)))
        for (int i = 0; i < count; i++) {
            (*n)++;
            *h = rl__hash64(kvs[i].key, kvs[i].key_len, *h);
            *h = rl__hash64(kvs[i].value, kvs[i].value_len, *h);
        }
    rl_future_free(f);
    return rc;
}

int rl__camp_shard_receipt(const char *url, json_t *into, rl__errdetail *err) {
    rl_db *db = NULL;
    rl_txn *txn = NULL;
    uint64_t shards = 0, servers = 0, h = 0;
    int rc;
    if ((rc = rl_db_open(url, NULL, &db)) || (rc = rl_txn_begin(db, &txn)) ||
        (rc = rl_txn_set_option(txn, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 1)) ||
        (rc = hash_system_range(txn, "\xff/keyServers/", "\xff/keyServers0", &shards, &h)) ||
        (rc = hash_system_range(txn, "\xff/serverList/", "\xff/serverList0", &servers, &h))) {
        rl__errdetail_append(err, "reading the shard map of %s: %s %s", url, rl_error_name(rc), rl_last_error_detail());
        goto done;
    }
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    json_object_set_new(into, "shard_map_entries", json_integer((json_int_t)shards));
    json_object_set_new(into, "server_list_entries", json_integer((json_int_t)servers));
    json_object_set_new(into, "shard_map_xxh64", json_string(hex));
done:
    rl_txn_free(txn);
    rl_db_close(db);
    return rc;
}
