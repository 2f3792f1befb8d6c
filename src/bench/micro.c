/* micro.c — the KV micro-benchmark (see micro.h for the workloads, the design and the files).
 *
 * Each system implements the same five operations over the same keys. Keys are built once with
 * the tuple packer so every system stores byte-identical keys and values. The durable systems
 * write only inside the run's scratch directory (scratch.h), which the run removes at its end.
 */
#include "bench/micro.h"

#include <lmdb.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/scratch.h"
#include "reclayer/alloc.h"
#include "reclayer/kv.h"
#include "tuple/tuple.h"

enum { W_POINT, W_RANGE, W_MAPPED, W_COMMIT, W_COUNT };
static const char *wnames[W_COUNT] = {"point", "range1000", "mapped1000", "commit100"};
static const char *wunits[W_COUNT] = {"ns/read", "ns/range", "ns/op", "ns/commit"};

#define POINT_BATCH 1000
#define RANGE_ROWS 1000
/* The write-path growth check: set and clear_range calls in one uncommitted transaction on mem:,
 * at a small and a large count (random 16-byte keys); the figure is ns per call at each count,
 * and the growth is their ratio (O(log n) per call keeps it near 1; a linear cost per call makes
 * it ~100). */
#define TXN_WRITES "txn-writes"
#define TXN_SMALL 1000
#define TXN_LARGE 100000

typedef struct sys sys;
struct sys {
    const char *name;
    int (*setup)(sys *s, const rl__micro_options *o);
    int (*op)(sys *s, int w, uint64_t *rng);
    void (*teardown)(sys *s);
    void *h;  /* system handle */
    void *h2; /* second handle (LMDB dbi / SQLite statements) */
    char path[1024];
    int keys;
    int value_len;
    double samples[W_COUNT][RL__MICRO_REPEATS_MAX]; /* ns/op per round */
    double allocs[W_COUNT][RL__MICRO_REPEATS_MAX];  /* allocations per op per round */
    int n_samples[W_COUNT];
    int failed;     /* set once a setup or a workload failed; the system runs nothing more */
    int err;        /* its error */
    int err_w;      /* where: -1 setup, else the workload */
    uint64_t check; /* sum over every byte read (see touch): every system reads what it returns */
};

/* Sum the bytes at p: every system touches each key and value it reads, the way a caller would,
 * so a zero-copy system (LMDB) and a copying one (reclayer, SQLite) are compared doing the same
 * work. */
static uint64_t touch(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t sum = 0, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { /* word at a time: cheap, so it dilutes the ratios little */
        memcpy(&w, b + i, 8);
        sum += w;
    }
    for (; i < n; i++) sum += b[i];
    return sum;
}

/* ---- Dataset ----------------------------------------------------------------------------- */

static uint64_t rnd(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* price of record pk: a fixed permutation so index order differs from record order. */
static int64_t price_of(int64_t pk, int keys) { return (pk * 7919) % keys; }

static void record_key(rl_buf *b, int64_t pk) {
    rl__tuple_packer pk_;
    rl__buf_reset(b);
    rl__tuple_packer_init(&pk_, b);
    rl__tuple_pack_string(&pk_, "r", 1);
    rl__tuple_pack_int(&pk_, pk);
    rl__tuple_pack_int(&pk_, 0);
}

static void index_key(rl_buf *b, int64_t price, int64_t pk) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "i", 1);
    rl__tuple_pack_int(&p, price);
    rl__tuple_pack_int(&p, pk);
}

static void index_prefix(rl_buf *b, int64_t price) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "i", 1);
    rl__tuple_pack_int(&p, price);
}

static void fill_value(uint8_t *v, int n, int64_t pk) {
    for (int i = 0; i < n; i++) v[i] = (uint8_t)('a' + (pk + i) % 26);
}

/* ---- reclayer ---------------------------------------------------------------------------- */

typedef struct {
    rl_db *db;
    rl_buf k1, k2, mapper;
} rl__sys;

static int rl_load(rl_db *db, int keys, int vlen) {
    rl_buf k;
    rl__buf_init(&k);
    uint8_t *v = rl__malloc((size_t)vlen);
    int rc = v ? RL_OK : RL_E_OUT_OF_MEMORY;
    /* Batches far below the transaction limit whatever the value length. */
    int per = 4000000 / (vlen + 100);
    per = per < 1 ? 1 : per > 1000 ? 1000 : per;
    for (int start = 0; rc == RL_OK && start < keys; start += per) {
        rl_txn *t = NULL;
        rc = rl_txn_begin(db, &t);
        for (int pk = start; rc == RL_OK && pk < keys && pk < start + per; pk++) {
            fill_value(v, vlen, pk);
            record_key(&k, pk);
            rc = rl_txn_set(t, k.data, k.len, v, (size_t)vlen);
            if (rc == RL_OK) {
                index_key(&k, price_of(pk, keys), pk);
                rc = rl_txn_set(t, k.data, k.len, "", 0);
            }
        }
        if (rc == RL_OK) {
            rl_future *f = rl_txn_commit(t);
            rc = rl_future_wait(f);
            rl_future_free(f);
        }
        rl_txn_free(t);
    }
    rl__free(v);
    rl__buf_release(&k);
    return rc;
}

static int rl_setup_url(sys *s, const rl__micro_options *o, const char *url) {
    rl__sys *r = rl__calloc(1, sizeof *r);
    if (!r) return RL_E_OUT_OF_MEMORY;
    rl__buf_init(&r->k1);
    rl__buf_init(&r->k2);
    rl__buf_init(&r->mapper);
    s->h = r;
    int rc = rl_db_open(url, NULL, &r->db);
    if (rc) return rc;
    rl__tuple_packer p;
    rl__tuple_packer_init(&p, &r->mapper);
    rl__tuple_pack_string(&p, "r", 1);
    rl__tuple_pack_string(&p, "{K[2]}", 6);
    rl__tuple_pack_string(&p, "{...}", 5);
    return rl_load(r->db, o->keys, o->value_len);
}

static int rl_setup_mem(sys *s, const rl__micro_options *o) { return rl_setup_url(s, o, "mem:"); }

static int rl_setup_file(sys *s, const rl__micro_options *o) {
    snprintf(s->path, sizeof s->path, "%s/reclayer", o->dir);
    mkdir(s->path, 0755);
    char url[1100];
    snprintf(url, sizeof url, "file:%s", s->path);
    return rl_setup_url(s, o, url);
}

/* reclayer on the ssd engine: loaded with a 1 MiB flush threshold, then closed and reopened
 * (with the default threshold), so the rows are read from LMDB (only the log after the last
 * flush is replayed into the window). */
static int rl_setup_ssd(sys *s, const rl__micro_options *o) {
    snprintf(s->path, sizeof s->path, "%s/reclayer-ssd", o->dir);
    mkdir(s->path, 0755);
    char url[1200];
    snprintf(url, sizeof url, "file:%s?engine=ssd&checkpoint_bytes=1048576", s->path);
    int rc = rl_setup_url(s, o, url);
    if (rc) return rc;
    rl__sys *r = s->h;
    rl_db_close(r->db);
    r->db = NULL;
    /* Reopened with the default flush threshold (64 MiB), as a database would run. */
    snprintf(url, sizeof url, "file:%s?engine=ssd", s->path);
    return rl_db_open(url, NULL, &r->db);
}

static int wait_free(rl_future *f) {
    int rc = rl_future_wait(f);
    rl_future_free(f);
    return rc;
}

static int rl_op(sys *s, int w, uint64_t *rng) {
    rl__sys *r = s->h;
    rl_txn *t = NULL;
    int rc = rl_txn_begin(r->db, &t);
    if (rc) return rc;
    if (w == W_POINT) {
        for (int i = 0; i < POINT_BATCH && rc == RL_OK; i++) {
            record_key(&r->k1, (int64_t)(rnd(rng) % (uint64_t)s->keys));
            rl_future *f = rl_txn_get(t, r->k1.data, r->k1.len, 0);
            rc = rl_future_wait(f);
            int present = 0, len = 0;
            const uint8_t *v;
            if (rc == RL_OK) rc = rl_future_get_value(f, &present, &v, &len);
            if (rc == RL_OK && !present) rc = RL_E_INTERNAL_ERROR;
            if (rc == RL_OK) s->check += touch(v, (size_t)len);
            rl_future_free(f);
        }
    } else if (w == W_RANGE) {
        int64_t start = (int64_t)(rnd(rng) % (uint64_t)(s->keys - RANGE_ROWS));
        record_key(&r->k1, start);
        record_key(&r->k2, start + RANGE_ROWS);
        rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(r->k1.data, r->k1.len),
                                        RL_FIRST_GREATER_OR_EQUAL(r->k2.data, r->k2.len), RANGE_ROWS, 0,
                                        RL_STREAMING_WANT_ALL, 0, 0);
        rc = rl_future_wait(f);
        const rl_keyvalue *kvs;
        int n = 0, more = 0;
        if (rc == RL_OK) rc = rl_future_get_keyvalue_array(f, &kvs, &n, &more);
        if (rc == RL_OK && n != RANGE_ROWS) rc = RL_E_INTERNAL_ERROR;
        for (int i = 0; rc == RL_OK && i < n; i++)
            s->check += touch(kvs[i].key, (size_t)kvs[i].key_len) + touch(kvs[i].value, (size_t)kvs[i].value_len);
        rl_future_free(f);
    } else if (w == W_MAPPED) {
        int64_t start = (int64_t)(rnd(rng) % (uint64_t)(s->keys - RANGE_ROWS));
        index_prefix(&r->k1, start);
        index_prefix(&r->k2, start + RANGE_ROWS);
        rl_future *f = rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(r->k1.data, r->k1.len),
                                               RL_FIRST_GREATER_OR_EQUAL(r->k2.data, r->k2.len), r->mapper.data,
                                               r->mapper.len, RANGE_ROWS, 0, RL_STREAMING_WANT_ALL, 0, 0);
        rc = rl_future_wait(f);
        const rl_mapped_keyvalue *m;
        int n = 0, more = 0;
        if (rc == RL_OK) rc = rl_future_get_mapped_keyvalue_array(f, &m, &n, &more);
        if (rc == RL_OK && (n != RANGE_ROWS || m[0].n_kvs != 1)) rc = RL_E_INTERNAL_ERROR;
        for (int i = 0; rc == RL_OK && i < n; i++) {
            s->check += touch(m[i].index.key, (size_t)m[i].index.key_len);
            for (int j = 0; j < m[i].n_kvs; j++)
                s->check += touch(m[i].kvs[j].key, (size_t)m[i].kvs[j].key_len) +
                            touch(m[i].kvs[j].value, (size_t)m[i].kvs[j].value_len);
        }
        rl_future_free(f);
    } else {
        uint8_t v[16];
        for (int i = 0; i < 100 && rc == RL_OK; i++) {
            rl__buf_reset(&r->k1);
            rl__buf_printf(&r->k1, "w%016llx", (unsigned long long)rnd(rng));
            memcpy(v, r->k1.data, sizeof v);
            rc = rl_txn_set(t, r->k1.data, r->k1.len, v, sizeof v);
        }
        if (rc == RL_OK) rc = wait_free(rl_txn_commit(t));
    }
    rl_txn_free(t);
    return rc;
}

static void rl_teardown(sys *s) {
    rl__sys *r = s->h;
    if (!r) return;
    rl_db_close(r->db);
    rl__buf_release(&r->k1);
    rl__buf_release(&r->k2);
    rl__buf_release(&r->mapper);
    rl__free(r);
    s->h = NULL;
}

/* ---- LMDB -------------------------------------------------------------------------------- */

typedef struct {
    MDB_env *env;
    MDB_dbi dbi;
    rl_buf k1, k2;
} lm_sys;

static int lm_setup(sys *s, const rl__micro_options *o) {
    lm_sys *l = rl__calloc(1, sizeof *l);
    if (!l) return RL_E_OUT_OF_MEMORY;
    rl__buf_init(&l->k1);
    rl__buf_init(&l->k2);
    s->h = l;
    snprintf(s->path, sizeof s->path, "%s/lmdb", o->dir);
    mkdir(s->path, 0755);
    if (mdb_env_create(&l->env) || mdb_env_set_mapsize(l->env, (size_t)8 << 30) ||
        mdb_env_open(l->env, s->path, 0, 0644))
        return RL_E_IO_ERROR;
    MDB_txn *t;
    if (mdb_txn_begin(l->env, NULL, 0, &t) || mdb_dbi_open(t, NULL, 0, &l->dbi)) return RL_E_IO_ERROR;
    uint8_t *v = rl__malloc((size_t)o->value_len);
    if (!v) return RL_E_OUT_OF_MEMORY;
    for (int pk = 0; pk < o->keys; pk++) {
        fill_value(v, o->value_len, pk);
        record_key(&l->k1, pk);
        MDB_val k = {l->k1.len, l->k1.data}, d = {(size_t)o->value_len, v};
        if (mdb_put(t, l->dbi, &k, &d, 0)) goto fail;
        index_key(&l->k1, price_of(pk, o->keys), pk);
        MDB_val k2 = {l->k1.len, l->k1.data}, e = {0, (void *)""};
        if (mdb_put(t, l->dbi, &k2, &e, 0)) goto fail;
    }
    rl__free(v);
    return mdb_txn_commit(t) ? RL_E_IO_ERROR : RL_OK;
fail:
    rl__free(v);
    mdb_txn_abort(t);
    return RL_E_IO_ERROR;
}

static int lm_op(sys *s, int w, uint64_t *rng) {
    lm_sys *l = s->h;
    MDB_txn *t;
    int rc = RL_OK;
    if (w == W_COMMIT) {
        if (mdb_txn_begin(l->env, NULL, 0, &t)) return RL_E_IO_ERROR;
        for (int i = 0; i < 100; i++) {
            rl__buf_reset(&l->k1);
            rl__buf_printf(&l->k1, "w%016llx", (unsigned long long)rnd(rng));
            MDB_val k = {l->k1.len, l->k1.data}, d = {16, l->k1.data};
            if (mdb_put(t, l->dbi, &k, &d, 0)) {
                mdb_txn_abort(t);
                return RL_E_IO_ERROR;
            }
        }
        return mdb_txn_commit(t) ? RL_E_IO_ERROR : RL_OK;
    }
    if (mdb_txn_begin(l->env, NULL, MDB_RDONLY, &t)) return RL_E_IO_ERROR;
    if (w == W_POINT) {
        for (int i = 0; i < POINT_BATCH && rc == RL_OK; i++) {
            record_key(&l->k1, (int64_t)(rnd(rng) % (uint64_t)s->keys));
            MDB_val k = {l->k1.len, l->k1.data}, d;
            if (mdb_get(t, l->dbi, &k, &d)) rc = RL_E_INTERNAL_ERROR;
            else s->check += touch(d.mv_data, d.mv_size);
        }
    } else {
        MDB_cursor *c;
        if (mdb_cursor_open(t, l->dbi, &c)) {
            mdb_txn_abort(t);
            return RL_E_IO_ERROR;
        }
        int64_t start = (int64_t)(rnd(rng) % (uint64_t)(s->keys - RANGE_ROWS));
        if (w == W_RANGE) record_key(&l->k1, start);
        else index_prefix(&l->k1, start);
        MDB_val k = {l->k1.len, l->k1.data}, d;
        int n = 0;
        int e = mdb_cursor_get(c, &k, &d, MDB_SET_RANGE);
        while (e == 0 && n < RANGE_ROWS) {
            if (w == W_MAPPED) {
                /* Decode the primary key (element 2) and read its record. */
                rl__tuple_elem el;
                if (rl__tuple_get(k.mv_data, k.mv_size, 2, &el) || el.type != RL_TT_INT) {
                    rc = RL_E_INTERNAL_ERROR;
                    break;
                }
                record_key(&l->k2, el.i);
                MDB_val rk = {l->k2.len, l->k2.data}, rd;
                if (mdb_get(t, l->dbi, &rk, &rd)) {
                    rc = RL_E_INTERNAL_ERROR;
                    break;
                }
                s->check += touch(k.mv_data, k.mv_size) + touch(rk.mv_data, rk.mv_size) + touch(rd.mv_data, rd.mv_size);
            } else {
                s->check += touch(k.mv_data, k.mv_size) + touch(d.mv_data, d.mv_size);
            }
            n++;
            e = mdb_cursor_get(c, &k, &d, MDB_NEXT);
        }
        if (rc == RL_OK && n != RANGE_ROWS) rc = RL_E_INTERNAL_ERROR;
        mdb_cursor_close(c);
    }
    mdb_txn_abort(t);
    return rc;
}

static void lm_teardown(sys *s) {
    lm_sys *l = s->h;
    if (!l) return;
    if (l->env) mdb_env_close(l->env);
    rl__buf_release(&l->k1);
    rl__buf_release(&l->k2);
    rl__free(l);
    s->h = NULL;
}

/* ---- SQLite ------------------------------------------------------------------------------ */

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *get, *range, *mapped, *put, *begin, *commit;
    rl_buf k1, k2;
} sq_sys;

static int sq_exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? RL_OK : RL_E_IO_ERROR;
}

static int sq_setup(sys *s, const rl__micro_options *o) {
    sq_sys *q = rl__calloc(1, sizeof *q);
    if (!q) return RL_E_OUT_OF_MEMORY;
    rl__buf_init(&q->k1);
    rl__buf_init(&q->k2);
    s->h = q;
    snprintf(s->path, sizeof s->path, "%s/sqlite.db", o->dir);
    remove(s->path);
    if (sqlite3_open(s->path, &q->db) != SQLITE_OK) return RL_E_IO_ERROR;
    int rc = sq_exec(q->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                            "CREATE TABLE kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID;"
                            "CREATE TABLE orders(pk INTEGER PRIMARY KEY, price INTEGER, v BLOB);"
                            "CREATE INDEX price_idx ON orders(price);");
    if (rc) return rc;
    sqlite3_stmt *ins, *ino;
    if (sqlite3_prepare_v2(q->db, "INSERT INTO kv VALUES(?,?)", -1, &ins, NULL) ||
        sqlite3_prepare_v2(q->db, "INSERT INTO orders VALUES(?,?,?)", -1, &ino, NULL))
        return RL_E_IO_ERROR;
    uint8_t *v = rl__malloc((size_t)o->value_len);
    if (!v) return RL_E_OUT_OF_MEMORY;
    sq_exec(q->db, "BEGIN");
    for (int pk = 0; pk < o->keys && rc == RL_OK; pk++) {
        fill_value(v, o->value_len, pk);
        record_key(&q->k1, pk);
        sqlite3_bind_blob(ins, 1, q->k1.data, (int)q->k1.len, SQLITE_STATIC);
        sqlite3_bind_blob(ins, 2, v, o->value_len, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) rc = RL_E_IO_ERROR;
        sqlite3_reset(ins);
        sqlite3_bind_int64(ino, 1, pk);
        sqlite3_bind_int64(ino, 2, price_of(pk, o->keys));
        sqlite3_bind_blob(ino, 3, v, o->value_len, SQLITE_STATIC);
        if (sqlite3_step(ino) != SQLITE_DONE) rc = RL_E_IO_ERROR;
        sqlite3_reset(ino);
    }
    if (rc == RL_OK) rc = sq_exec(q->db, "COMMIT");
    rl__free(v);
    sqlite3_finalize(ins);
    sqlite3_finalize(ino);
    if (rc) return rc;
    if (sqlite3_prepare_v2(q->db, "SELECT v FROM kv WHERE k=?", -1, &q->get, NULL) ||
        sqlite3_prepare_v2(q->db, "SELECT k, v FROM kv WHERE k>=? AND k<? ORDER BY k LIMIT 1000", -1, &q->range,
                           NULL) ||
        sqlite3_prepare_v2(q->db, "SELECT pk, v FROM orders WHERE price>=? ORDER BY price LIMIT 1000", -1, &q->mapped,
                           NULL) ||
        sqlite3_prepare_v2(q->db, "INSERT OR REPLACE INTO kv VALUES(?,?)", -1, &q->put, NULL) ||
        sqlite3_prepare_v2(q->db, "BEGIN", -1, &q->begin, NULL) ||
        sqlite3_prepare_v2(q->db, "COMMIT", -1, &q->commit, NULL))
        return RL_E_IO_ERROR;
    return RL_OK;
}

static int sq_step_all(sys *s, sqlite3_stmt *st, int want) {
    int n = 0, e;
    while ((e = sqlite3_step(st)) == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) == SQLITE_INTEGER) { /* mapped: the primary key */
            s->check += (uint64_t)sqlite3_column_int64(st, 0);
        } else {
            const void *c0 = sqlite3_column_blob(st, 0);
            if (c0) s->check += touch(c0, (size_t)sqlite3_column_bytes(st, 0));
        }
        const void *c1 = sqlite3_column_blob(st, 1);
        if (c1) s->check += touch(c1, (size_t)sqlite3_column_bytes(st, 1));
        n++;
    }
    sqlite3_reset(st);
    return (e == SQLITE_DONE && (want < 0 || n == want)) ? RL_OK : RL_E_INTERNAL_ERROR;
}

static int sq_op(sys *s, int w, uint64_t *rng) {
    sq_sys *q = s->h;
    int rc = RL_OK;
    if (w == W_COMMIT) {
        if (sqlite3_step(q->begin) != SQLITE_DONE) rc = RL_E_IO_ERROR;
        sqlite3_reset(q->begin);
        for (int i = 0; i < 100 && rc == RL_OK; i++) {
            rl__buf_reset(&q->k1);
            rl__buf_printf(&q->k1, "w%016llx", (unsigned long long)rnd(rng));
            sqlite3_bind_blob(q->put, 1, q->k1.data, (int)q->k1.len, SQLITE_STATIC);
            sqlite3_bind_blob(q->put, 2, q->k1.data, 16, SQLITE_STATIC);
            if (sqlite3_step(q->put) != SQLITE_DONE) rc = RL_E_IO_ERROR;
            sqlite3_reset(q->put);
        }
        if (sqlite3_step(q->commit) != SQLITE_DONE) rc = RL_E_IO_ERROR;
        sqlite3_reset(q->commit);
        return rc;
    }
    /* Reads run inside one read transaction, like the other systems. */
    if (sqlite3_step(q->begin) != SQLITE_DONE) return RL_E_IO_ERROR;
    sqlite3_reset(q->begin);
    if (w == W_POINT) {
        for (int i = 0; i < POINT_BATCH && rc == RL_OK; i++) {
            record_key(&q->k1, (int64_t)(rnd(rng) % (uint64_t)s->keys));
            sqlite3_bind_blob(q->get, 1, q->k1.data, (int)q->k1.len, SQLITE_STATIC);
            if (sqlite3_step(q->get) != SQLITE_ROW) rc = RL_E_INTERNAL_ERROR;
            const void *c0 = sqlite3_column_blob(q->get, 0);
            if (c0) s->check += touch(c0, (size_t)sqlite3_column_bytes(q->get, 0));
            sqlite3_reset(q->get);
        }
    } else if (w == W_RANGE) {
        int64_t start = (int64_t)(rnd(rng) % (uint64_t)(s->keys - RANGE_ROWS));
        record_key(&q->k1, start);
        record_key(&q->k2, start + RANGE_ROWS);
        sqlite3_bind_blob(q->range, 1, q->k1.data, (int)q->k1.len, SQLITE_STATIC);
        sqlite3_bind_blob(q->range, 2, q->k2.data, (int)q->k2.len, SQLITE_STATIC);
        rc = sq_step_all(s, q->range, RANGE_ROWS);
    } else {
        int64_t start = (int64_t)(rnd(rng) % (uint64_t)(s->keys - RANGE_ROWS));
        sqlite3_bind_int64(q->mapped, 1, start);
        rc = sq_step_all(s, q->mapped, RANGE_ROWS);
    }
    if (sqlite3_step(q->commit) != SQLITE_DONE) rc = RL_E_IO_ERROR;
    sqlite3_reset(q->commit);
    return rc;
}

static void sq_teardown(sys *s) {
    sq_sys *q = s->h;
    if (!q) return;
    sqlite3_finalize(q->get);
    sqlite3_finalize(q->range);
    sqlite3_finalize(q->mapped);
    sqlite3_finalize(q->put);
    sqlite3_finalize(q->begin);
    sqlite3_finalize(q->commit);
    sqlite3_close(q->db);
    rl__buf_release(&q->k1);
    rl__buf_release(&q->k2);
    rl__free(q);
    s->h = NULL;
}

/* ---- The run ----------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double tmp[RL__MICRO_REPEATS_MAX];
    if (n <= 0) return 0;
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* Run workload w on s for about `seconds`; record ns/op and allocs/op. */
static int measure(sys *s, int w, double seconds, uint64_t *rng) {
    uint64_t budget = (uint64_t)(seconds * 1e9), ops = 0;
    rl_alloc_stats a0, a1;
    rl_alloc_get_stats(&a0);
    uint64_t t0 = rl__clock_mono_ns(), t1;
    do {
        int rc = s->op(s, w, rng);
        if (rc) return rc;
        ops++;
        t1 = rl__clock_mono_ns();
    } while (t1 - t0 < budget || ops < 3);
    rl_alloc_get_stats(&a1);
    double per = w == W_POINT ? (double)(ops * POINT_BATCH) : (double)ops;
    int i = s->n_samples[w]++;
    s->samples[w][i] = (double)(t1 - t0) / per;
    s->allocs[w][i] = (double)(a1.allocs - a0.allocs) / per;
    return RL_OK;
}

int rl__bench_micro_check(const rl__micro_options *o, rl__errdetail *err) {
    if (o->keys < RL__MICRO_KEYS_MIN || o->keys > RL__MICRO_KEYS_MAX) {
        rl__errdetail_set(err, "--keys: %d is out of range [%d, %d]", o->keys, RL__MICRO_KEYS_MIN, RL__MICRO_KEYS_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (o->value_len < 1 || o->value_len > RL__MICRO_VALUE_LEN_MAX) {
        rl__errdetail_set(err, "--value-len: %d is out of range [1, %d]", o->value_len, RL__MICRO_VALUE_LEN_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!isfinite(o->seconds) || o->seconds < RL__MICRO_SECONDS_MIN || o->seconds > RL__MICRO_SECONDS_MAX) {
        rl__errdetail_set(err, "--seconds: %g is out of range [%g, %g]", o->seconds, RL__MICRO_SECONDS_MIN,
                          RL__MICRO_SECONDS_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (o->repeats < 1 || o->repeats > RL__MICRO_REPEATS_MAX) {
        rl__errdetail_set(err, "--repeats: %d is out of range [1, %d]", o->repeats, RL__MICRO_REPEATS_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (o->dir && !*o->dir) {
        rl__errdetail_set(err, "--dir must not be empty");
        return RL_E_INVALID_ARGUMENT;
    }
    if (o->only) {
        for (int w = 0; w < W_COUNT; w++)
            if (!strcmp(o->only, wnames[w])) return RL_OK;
        if (!strcmp(o->only, TXN_WRITES)) return RL_OK;
        rl__errdetail_set(err, "--only: '%.64s' is not a workload (%s, %s, %s, %s, %s)", o->only, wnames[0], wnames[1],
                          wnames[2], wnames[3], TXN_WRITES);
        return RL_E_INVALID_ARGUMENT;
    }
    return RL_OK;
}

/* Mark s failed with error e at workload w (-1: setup) and say so on stderr. */
static void set_failed(sys *s, int e, int w) {
    fprintf(stderr, "micro: %s %s failed: %s (%s)\n", s->name, w < 0 ? "setup" : wnames[w], rl_error_name(e),
            rl_error_message(e));
    s->failed = 1;
    s->err = e;
    s->err_w = w;
}

/* 1 if s has a median for workload w that a ratio may use. */
static int has_result(const sys *s, int w) { return s->n_samples[w] > 0 && !(s->failed && s->err_w <= w); }

/* Print the cell of system s for workload w: its median, "failed", or "-" (not run). */
static void print_cell(FILE *out, const sys *s, int w) {
    if (s->failed && s->err_w <= w) fprintf(out, " %14s", "failed");
    else if (s->n_samples[w]) fprintf(out, " %14.0f", median(s->samples[w], s->n_samples[w]));
    else fprintf(out, " %14s", "-");
}

/* Print "label = a/b" or "label = n/a" when either has no result. */
static void print_ratio(FILE *out, const char *label, const sys *a, const sys *b, int w) {
    if (has_result(a, w) && has_result(b, w))
        fprintf(out, "  %s = %.2f", label,
                median(a->samples[w], a->n_samples[w]) / median(b->samples[w], b->n_samples[w]));
    else fprintf(out, "  %s = n/a", label);
}

/* ns per call of n set (clear_range: 0) calls with random keys in one fresh transaction of db. */
static int txn_writes_once(rl_db *db, int clear_range, int n, uint64_t *rng, double *out_ns) {
    rl_txn *t;
    int rc = rl_txn_begin(db, &t);
    if (rc) return rc;
    uint64_t t0 = rl__clock_mono_ns();
    for (int i = 0; i < n && rc == RL_OK; i++) {
        uint8_t k[17];
        uint64_t a = rnd(rng), b = rnd(rng);
        memcpy(k, &a, 8);
        memcpy(k + 8, &b, 8);
        k[0] = 't'; /* below the system keys */
        if (clear_range) {
            k[16] = 0; /* [k, k + "\x00"): FoundationDB's clear of one key as a range */
            rc = rl_txn_clear_range(t, k, 16, k, 17);
        } else {
            rc = rl_txn_set(t, k, 16, "vvvv", 4);
        }
    }
    *out_ns = (double)(rl__clock_mono_ns() - t0) / n;
    rl_txn_free(t);
    return rc;
}

/* The txn-writes table: per operation, ns per call at TXN_SMALL and TXN_LARGE and the growth. */
static int txn_writes(const rl__micro_options *o, FILE *out, rl_buf *json, uint64_t *rng) {
    static const char *ops[2] = {"set", "clear_range"};
    static const int counts[2] = {TXN_SMALL, TXN_LARGE};
    double ns[2][2][RL__MICRO_REPEATS_MAX];
    rl_db *db;
    int rc = rl_db_open("mem:", NULL, &db);
    if (rc) return rc;
    for (int r = 0; r < o->repeats && rc == RL_OK; r++)
        for (int op = 0; op < 2 && rc == RL_OK; op++)
            for (int c = 0; c < 2 && rc == RL_OK; c++) rc = txn_writes_once(db, op, counts[c], rng, &ns[op][c][r]);
    rl_db_close(db);
    if (rc) return rc;
    fprintf(out, "\n%-12s %-10s %14s %14s %10s   (one transaction on mem:, random 16-byte keys)\n", TXN_WRITES, "unit",
            "at 1,000", "at 100,000", "growth");
    if (json) rl__buf_printf(json, ",\"%s\":[", TXN_WRITES);
    for (int op = 0; op < 2; op++) {
        double small = median(ns[op][0], o->repeats), large = median(ns[op][1], o->repeats);
        fprintf(out, "%-12s %-10s %14.1f %14.1f %9.2fx\n", ops[op], "ns/call", small, large, large / small);
        if (json)
            rl__buf_printf(json,
                           "%s{\"op\":\"%s\",\"ns_per_call_1000\":%.1f,\"ns_per_call_100000\":%.1f,\"growth\":%.3f}",
                           op ? "," : "", ops[op], small, large, large / small);
    }
    if (json) rl__buf_append_str(json, "]");
    return RL_OK;
}

int rl__bench_micro_run(const rl__micro_options *o, FILE *out, rl_buf *json) {
    sys systems[] = {
        {.name = "reclayer-mem", .setup = rl_setup_mem, .op = rl_op, .teardown = rl_teardown},
        {.name = "reclayer-file", .setup = rl_setup_file, .op = rl_op, .teardown = rl_teardown},
        {.name = "lmdb", .setup = lm_setup, .op = lm_op, .teardown = lm_teardown},
        {.name = "sqlite", .setup = sq_setup, .op = sq_op, .teardown = sq_teardown},
        {.name = "reclayer-ssd", .setup = rl_setup_ssd, .op = rl_op, .teardown = rl_teardown},
    };
    const int ns = (int)(sizeof systems / sizeof systems[0]);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl_buf scratch;
    rl__micro_options oo = *o;
    int rc = rl__bench_micro_check(o, &msg);
    if (rc) {
        fprintf(stderr, "micro: %s\n", rl__errdetail_get(&msg));
        return rc;
    }
    const int repeats = o->repeats;
    uint64_t rng = o->seed;
    rl__buf_init(&scratch);
    if ((rc = rl__bench_scratch_create(o->dir, "micro", &scratch, &msg))) {
        fprintf(stderr, "micro: %s\n", rl__errdetail_get(&msg));
        rl__buf_release(&scratch);
        return rc;
    }
    oo.dir = (const char *)scratch.data;
    fprintf(stderr, "micro: seed %llu, scratch %s (removed at the end)\n", o->seed, oo.dir);
    for (int i = 0; i < ns; i++) {
        systems[i].keys = o->keys;
        systems[i].value_len = o->value_len;
        fprintf(stderr, "micro: loading %d records into %s\n", o->keys, systems[i].name);
        int e = o->fail_setup && !strcmp(o->fail_setup, systems[i].name) ? RL_E_IO_ERROR
                                                                         : systems[i].setup(&systems[i], &oo);
        if (e) {
            set_failed(&systems[i], e, -1);
            rc = rc ? rc : e;
        }
    }
    for (int w = 0; w < W_COUNT; w++) {
        if (o->only && strcmp(o->only, wnames[w])) continue;
        for (int r = 0; r < repeats; r++) {
            for (int j = 0; j < ns; j++) {
                int i = (r % 2) ? ns - 1 - j : j; /* alternate the order between rounds */
                if (systems[i].failed) continue;
                int e = measure(&systems[i], w, o->seconds, &rng);
                if (e) {
                    set_failed(&systems[i], e, w);
                    rc = rc ? rc : e;
                }
            }
            fprintf(stderr, "micro: %s round %d/%d done\n", wnames[w], r + 1, repeats);
        }
    }
    /* Report: medians, and ratios against LMDB (reads) and SQLite (commits). */
    fprintf(out, "\n%-12s %-10s", "workload", "unit");
    for (int i = 0; i < ns; i++) fprintf(out, " %14s", systems[i].name);
    fprintf(out, "   ratios (median of rounds)\n");
    if (json)
        rl__buf_printf(json, "{\"keys\":%d,\"value_len\":%d,\"seconds\":%g,\"repeats\":%d,\"results\":[", o->keys,
                       o->value_len, o->seconds, repeats);
    int first = 1;
    for (int w = 0; w < W_COUNT; w++) {
        if (o->only && strcmp(o->only, wnames[w])) continue;
        fprintf(out, "%-12s %-10s", wnames[w], wunits[w]);
        for (int i = 0; i < ns; i++) {
            print_cell(out, &systems[i], w);
            if (json) {
                const sys *x = &systems[i];
                int bad = x->failed && x->err_w <= w;
                rl__buf_printf(json, "%s{\"workload\":\"%s\",\"system\":\"%s\",\"ns_per_op\":[", first ? "" : ",",
                               wnames[w], x->name);
                first = 0;
                for (int k = 0; k < x->n_samples[w]; k++)
                    rl__buf_printf(json, "%s%.1f", k ? "," : "", x->samples[w][k]);
                if (has_result(x, w))
                    rl__buf_printf(json, "],\"median_ns_per_op\":%.1f,\"allocs_per_op\":%.3f",
                                   median(x->samples[w], x->n_samples[w]), median(x->allocs[w], x->n_samples[w]));
                else rl__buf_append_str(json, "],\"median_ns_per_op\":null,\"allocs_per_op\":null");
                if (bad) rl__buf_printf(json, ",\"failed\":true,\"error\":\"%s\"}", rl_error_name(x->err));
                else rl__buf_append_str(json, ",\"failed\":false}");
            }
        }
        fprintf(out, " ");
        if (w == W_COMMIT) {
            print_ratio(out, "reclayer-file/sqlite", &systems[1], &systems[3], w);
            print_ratio(out, "reclayer-ssd/sqlite", &systems[4], &systems[3], w);
        } else {
            print_ratio(out, "mem/lmdb", &systems[0], &systems[2], w);
            print_ratio(out, "file/lmdb", &systems[1], &systems[2], w);
            print_ratio(out, "ssd/lmdb", &systems[4], &systems[2], w);
        }
        fprintf(out, "\n");
    }
    fprintf(out, "\nallocations per op (reclayer-mem):");
    for (int w = 0; w < W_COUNT; w++)
        if (has_result(&systems[0], w))
            fprintf(out, " %s %.2f", wnames[w], median(systems[0].allocs[w], systems[0].n_samples[w]));
    fprintf(out, "\n");
    for (int i = 0; i < ns; i++)
        if (systems[i].failed)
            fprintf(out, "failed: %s in %s: %s (%s)\n", systems[i].name,
                    systems[i].err_w < 0 ? "setup" : wnames[systems[i].err_w], rl_error_name(systems[i].err),
                    rl_error_message(systems[i].err));
    if (json) rl__buf_append_str(json, "]");
    if (!o->only || !strcmp(o->only, TXN_WRITES)) {
        int e = txn_writes(o, out, json, &rng);
        if (e) {
            fprintf(stderr, "micro: %s failed: %s\n", TXN_WRITES, rl_error_name(e));
            rc = rc ? rc : e;
        }
    }
    if (json) rl__buf_append_str(json, "}");
    for (int i = 0; i < ns; i++) systems[i].teardown(&systems[i]);
    if (rl__bench_scratch_remove(oo.dir, &msg)) {
        fprintf(stderr, "micro: %s\n", rl__errdetail_get(&msg));
        rc = rc ? rc : RL_E_IO_ERROR;
    }
    rl__buf_release(&scratch);
    return rc;
}
