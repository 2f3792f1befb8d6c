/* query_micro.c — the query micro-benchmark (see query_micro.h for the datasets, the cases and
 * the design).
 *
 * Every system reads the same records in the same order: the cross-check (check_group) compares
 * each reclayer case's sequence of order_ids with SQLite's before anything is timed.
 */
#include "bench/query_micro.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/campaign_int.h"
#include "bench/tcp_floor.h"
#include "order.pb-c.h"
#include "reclayer/alloc.h"
#include "reclayer/query.h"
#include "reclayer/record.h"
#include "app/tool.h"
#include "tuple/tuple.h"

enum { R_LIMIT1, R_ROWS10, R_ROWS1000, R_COUNT };
static const char *rnames[R_COUNT] = {"limit1", "rows10", "rows1000"};
static const int rlimits[R_COUNT] = {1, 10, 1000};

/* Systems: the four fetch methods, then SQLite. */
enum { S_SCAN, S_REMOTE, S_FALLBACK, S_ADAPTIVE, S_SQLITE, S_COUNT };
static const char *snames[S_COUNT] = {"scan", "remote", "remote-fallback", "adaptive", "sqlite"};
static const rl_fetch_method smethods[S_SQLITE] = {RL_FETCH_SCAN_AND_FETCH, RL_FETCH_USE_REMOTE_FETCH,
                                                   RL_FETCH_USE_REMOTE_FETCH_WITH_FALLBACK, RL_FETCH_ADAPTIVE};

enum { D_SMALL, D_SPLIT, D_COUNT };
static const char *dnames[D_COUNT] = {"small", "split"};

static const char *dirnames[2] = {"forward", "reverse"};

#define MAX_ROUNDS RL__QUERY_MICRO_REPEATS_MAX

/* One loaded dataset: the reclayer store and the SQLite table with the same records. */
typedef struct {
    rl_db *db;
    int db_borrowed; /* db is the run's shared database (--db), not this dataset's */
    rl_metadata *md;
    rl_store *st;
    sqlite3 *sq;
    sqlite3_stmt *sel[2]; /* ORDER BY price ASC / DESC, LIMIT ? */
    sqlite3_stmt *begin, *commit;
    int padding; /* bytes of padding per record */
    int loaded;
    int secondary; /* rl_query_options.secondary_strategy of the ops */
} dataset;

/* The rounds of one case. */
typedef struct {
    double ns[MAX_ROUNDS];     /* ns per op */
    double allocs[MAX_ROUNDS]; /* allocations per op (< 0: not counted) */
    double bytes[MAX_ROUNDS];  /* bytes allocated per op (< 0: not counted) */
    int n;
    double rows; /* rows per op */
    int selected, failed;
    int err;   /* the error when failed */
    int has_k; /* o->stats: k holds one untimed op's counters */
    rl_query_counters k;
} result;

/* What the ops read is summed here, so the compiler cannot drop the reads. */
static volatile uint64_t sink;

/* ---- SQLite's allocations ----------------------------------------------------------------
 * SQLite's allocator is process-global, so its counting wrapper is too: the campaign's
 * (rl__camp_sqlite_count_install, campaign_ops.c), one per process whichever part installs it.
 * It is installed once, before SQLite initialises; if SQLite was initialised already,
 * sqlite3_config refuses and SQLite's allocations are reported as n/a. sq_counting: -1 until
 * tried, then 1 when counting, 0 when refused. */
static int sq_counting = -1;

/* ---- Loading ----------------------------------------------------------------------------- */

typedef struct {
    rl_store *st;
    int first, n, records;
    const uint8_t *pad;
    size_t pad_len;
} load_batch;

/* Fill o with record id (customer points into buf, 32 bytes). */
static void make_order(Reclayer__Order *o, int id, int records, char *buf, const uint8_t *pad, size_t pad_len) {
    Reclayer__Order init = RECLAYER__ORDER__INIT;
    *o = init;
    o->has_order_id = 1, o->order_id = id;
    o->has_price = 1, o->price = ((int64_t)id * 7919) % records;
    o->has_quantity = 1, o->quantity = 1 + id % 10;
    snprintf(buf, 32, "customer-%03d", id % 100);
    o->customer = buf;
    if (pad_len) o->has_padding = 1, o->padding.data = (uint8_t *)pad, o->padding.len = pad_len;
}

static int load_fn(rl_txn *txn, void *ud) {
    load_batch *b = ud;
    char buf[32];
    for (int id = b->first; id < b->first + b->n; id++) {
        Reclayer__Order o;
        make_order(&o, id, b->records, buf, b->pad, b->pad_len);
        int rc = rl_store_save(b->st, txn, &o.base, NULL);
        if (rc) return rc;
    }
    return RL_OK;
}

static int sq_exec(sqlite3 *db, const char *sql) {
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? RL_OK : RL_E_IO_ERROR;
}

/* Load `records` Orders with `padding` bytes of padding into a new mem: store and a new
 * in-memory SQLite database. On failure d holds what was opened (dataset_release frees it). */
static int dataset_load(dataset *d, rl_db *shared, const char *name, int records, int padding) {
    static const uint8_t prefix[] = {0x02, 'b', 'e', 'n', 'c', 'h', 0x00, 0x02, 'o', 'r', 'd', 'e', 'r', 's', 0x00};
    uint8_t pfx[64];
    size_t pfx_len = sizeof prefix;
    uint8_t *pad = NULL;
    rl_txn *t = NULL;
    sqlite3_stmt *ins = NULL;
    int rc;
    d->padding = padding;
    memcpy(pfx, prefix, sizeof prefix);
    if (shared) { /* a shared database: one store per dataset, ("bench", "orders", name) */
        size_t nl = strlen(name);
        pfx[pfx_len++] = 0x02;
        memcpy(pfx + pfx_len, name, nl);
        pfx_len += nl;
        pfx[pfx_len++] = 0x00;
        d->db = shared;
        d->db_borrowed = 1;
    } else if ((rc = rl_db_open("mem:", NULL, &d->db))) {
        goto done;
    }
    if ((rc = rl__order_metadata(&d->md)) ||
        (rc = rl_store_new(d->md, pfx, pfx_len, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, &d->st)))
        goto done;
    if ((rc = rl_txn_begin(d->db, &t))) goto done;
    if (shared) { /* start from an empty store: an earlier run's rows would change the answers */
        uint8_t end[64];
        memcpy(end, pfx, pfx_len);
        end[pfx_len - 1] = 0x01; /* the prefix ends with the string's 0x00 terminator */
        if ((rc = rl_txn_clear_range(t, pfx, pfx_len, end, pfx_len))) goto done;
    }
    if ((rc = rl_store_open(d->st, t))) goto done;
    rl_future *f = rl_txn_commit(t);
    rc = rl_future_wait(f);
    rl_future_free(f);
    if (rc) goto done;
    if (padding > 0) {
        if (!(pad = rl__malloc((size_t)padding))) {
            rc = RL_E_OUT_OF_MEMORY;
            goto done;
        }
        for (int i = 0; i < padding; i++) pad[i] = (uint8_t)('a' + i % 26);
    }
    int per = 4000000 / (padding + 200);
    per = per < 1 ? 1 : per > 500 ? 500 : per;
    for (int first = 1; first <= records; first += per) {
        load_batch b = {d->st,   first, records - first + 1 < per ? records - first + 1 : per,
                        records, pad,   (size_t)padding};
        if ((rc = rl_db_run(d->db, load_fn, &b))) goto done;
    }
    /* SQLite: the same rows. */
    if (sqlite3_open(":memory:", &d->sq) != SQLITE_OK) {
        rc = RL_E_IO_ERROR;
        goto done;
    }
    if ((rc = sq_exec(d->sq, "CREATE TABLE orders(order_id INTEGER PRIMARY KEY, price INTEGER,"
                             " padding BLOB, customer TEXT, quantity INTEGER);"
                             "CREATE INDEX price_idx ON orders(price); BEGIN")))
        goto done;
    if (sqlite3_prepare_v2(d->sq, "INSERT INTO orders VALUES(?,?,?,?,?)", -1, &ins, NULL)) {
        rc = RL_E_IO_ERROR;
        goto done;
    }
    for (int id = 1; id <= records; id++) {
        Reclayer__Order o;
        char buf[32];
        make_order(&o, id, records, buf, pad, (size_t)padding);
        sqlite3_bind_int64(ins, 1, o.order_id);
        sqlite3_bind_int64(ins, 2, o.price);
        if (o.has_padding) sqlite3_bind_blob(ins, 3, o.padding.data, (int)o.padding.len, SQLITE_STATIC);
        else sqlite3_bind_null(ins, 3);
        sqlite3_bind_text(ins, 4, o.customer, -1, SQLITE_STATIC);
        sqlite3_bind_int64(ins, 5, o.quantity);
        int e = sqlite3_step(ins);
        sqlite3_reset(ins);
        if (e != SQLITE_DONE) {
            rc = RL_E_IO_ERROR;
            goto done;
        }
    }
    if ((rc = sq_exec(d->sq, "COMMIT; ANALYZE"))) goto done;
    if (sqlite3_prepare_v2(d->sq,
                           "SELECT order_id, price, padding, customer, quantity FROM orders"
                           " ORDER BY price LIMIT ?",
                           -1, &d->sel[0], NULL) ||
        sqlite3_prepare_v2(d->sq,
                           "SELECT order_id, price, padding, customer, quantity FROM orders"
                           " ORDER BY price DESC LIMIT ?",
                           -1, &d->sel[1], NULL) ||
        sqlite3_prepare_v2(d->sq, "BEGIN", -1, &d->begin, NULL) ||
        sqlite3_prepare_v2(d->sq, "COMMIT", -1, &d->commit, NULL)) {
        rc = RL_E_IO_ERROR;
        goto done;
    }
    d->loaded = 1;
done:
    sqlite3_finalize(ins);
    rl_txn_free(t);
    rl__free(pad);
    return rc;
}

static void dataset_release(dataset *d) {
    for (int i = 0; i < 2; i++) sqlite3_finalize(d->sel[i]);
    sqlite3_finalize(d->begin);
    sqlite3_finalize(d->commit);
    sqlite3_close(d->sq);
    rl_store_free(d->st);
    rl_metadata_free(d->md);
    if (!d->db_borrowed) rl_db_close(d->db);
    memset(d, 0, sizeof *d);
}

/* ---- The ops ----------------------------------------------------------------------------- */

/* Fold one returned row into the sequence hash h (order_ids in order). */
static uint64_t fold(uint64_t h, int64_t id) { return (h ^ (uint64_t)id) * 0x100000001b3ull; }

/* One reclayer op: the query with fetch method m, reading every field of every record.
 * [out] out_rows: rows returned; out_hash: fold of their order_ids. */
static int rl_op(dataset *d, rl_fetch_method m, int limit, int reverse, uint64_t *out_rows, uint64_t *out_hash,
                 rl_query_counters *out_k) {
    rl_txn *t = NULL;
    rl_cursor *c = NULL;
    rl_query_options qo;
    const rl_query_row *row;
    uint64_t n = 0, h = 0xcbf29ce484222325ull, s = 0;
    int rc;
    memset(&qo, 0, sizeof qo);
    qo.size = sizeof qo;
    qo.fetch = m;
    qo.limit = limit;
    qo.reverse = reverse;
    qo.secondary_strategy = d->secondary;
    if ((rc = rl_txn_begin(d->db, &t)) || (rc = rl_cursor_open(d->st, t, "price_idx", &qo, &c))) goto done;
    while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) {
        const Reclayer__Order *o = (const Reclayer__Order *)row->record->msg;
        s += (uint64_t)o->order_id + (uint64_t)o->price + (uint64_t)o->quantity + strlen(o->customer);
        if (o->padding.len) s += o->padding.len + o->padding.data[0] + o->padding.data[o->padding.len - 1];
        h = fold(h, o->order_id);
        n++;
    }
    if (out_k && c) rl_cursor_get_counters(c, out_k);
done:
    rl_cursor_free(c);
    rl_txn_free(t);
    sink += s;
    *out_rows = n;
    *out_hash = h;
    return rc;
}

/* One SQLite op: BEGIN, the prepared query with every column read, COMMIT. */
static int sq_op(dataset *d, int limit, int reverse, uint64_t *out_rows, uint64_t *out_hash) {
    sqlite3_stmt *st = d->sel[reverse];
    uint64_t n = 0, h = 0xcbf29ce484222325ull, s = 0;
    int rc = RL_OK, e;
    if (sqlite3_step(d->begin) != SQLITE_DONE) rc = RL_E_IO_ERROR;
    sqlite3_reset(d->begin);
    if (rc) return rc;
    sqlite3_bind_int(st, 1, limit);
    while ((e = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        s += (uint64_t)id + (uint64_t)sqlite3_column_int64(st, 1) + (uint64_t)sqlite3_column_int64(st, 4);
        const uint8_t *pad = sqlite3_column_blob(st, 2);
        int pad_len = sqlite3_column_bytes(st, 2);
        if (pad && pad_len > 0) s += (uint64_t)pad_len + pad[0] + pad[pad_len - 1];
        const unsigned char *cust = sqlite3_column_text(st, 3);
        if (cust) s += strlen((const char *)cust);
        h = fold(h, id);
        n++;
    }
    if (e != SQLITE_DONE) rc = RL_E_IO_ERROR;
    sqlite3_reset(st);
    if (sqlite3_step(d->commit) != SQLITE_DONE && !rc) rc = RL_E_IO_ERROR;
    sqlite3_reset(d->commit);
    sink += s;
    *out_rows = n;
    *out_hash = h;
    return rc;
}

static int run_op(dataset *d, int sys, int limit, int reverse, uint64_t *out_rows, uint64_t *out_hash) {
    if (sys == S_SQLITE) return sq_op(d, limit, reverse, out_rows, out_hash);
    return rl_op(d, smethods[sys], limit, reverse, out_rows, out_hash, NULL);
}

/* ---- Measuring --------------------------------------------------------------------------- */

/* Run the case for about `seconds` (at least 3 ops) and add one round to res. */
static int measure(dataset *d, int sys, int limit, int reverse, double seconds, result *res) {
    uint64_t budget = (uint64_t)(seconds * 1e9), ops = 0, rows = 0, n, h;
    uint64_t sa0, sb0;
    rl_alloc_stats a0, a1;
    /* One op outside the clock, so the round starts warm. */
    int rc = run_op(d, sys, limit, reverse, &n, &h);
    if (rc) return rc;
    rl_alloc_get_stats(&a0);
    rl__camp_sqlite_counts(&sa0, &sb0);
    uint64_t t0 = rl__clock_mono_ns(), t1;
    do {
        if ((rc = run_op(d, sys, limit, reverse, &n, &h))) return rc;
        rows += n;
        ops++;
        t1 = rl__clock_mono_ns();
    } while (t1 - t0 < budget || ops < 3);
    rl_alloc_get_stats(&a1);
    uint64_t sa1, sb1;
    rl__camp_sqlite_counts(&sa1, &sb1);
    if (res->n >= MAX_ROUNDS) return RL_OK;
    int i = res->n++;
    res->ns[i] = (double)(t1 - t0) / (double)ops;
    if (sys == S_SQLITE) {
        res->allocs[i] = sq_counting == 1 ? (double)(sa1 - sa0) / (double)ops : -1;
        res->bytes[i] = sq_counting == 1 ? (double)(sb1 - sb0) / (double)ops : -1;
    } else {
        res->allocs[i] = (double)(a1.allocs - a0.allocs) / (double)ops;
        res->bytes[i] = (double)(a1.bytes - a0.bytes) / (double)ops;
    }
    res->rows = (double)rows / (double)ops;
    return RL_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double tmp[MAX_ROUNDS];
    if (n <= 0) return 0;
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* Check that every selected reclayer system of the group returns SQLite's rows, in order. */
static int check_group(dataset *d, int limit, int reverse, const char *group, result *res) {
    uint64_t n0, h0, n, h;
    int rc = sq_op(d, limit, reverse, &n0, &h0);
    if (rc) {
        fprintf(stderr, "query: %s/sqlite failed: %s\n", group, rl_error_name(rc));
        return rc;
    }
    for (int s = 0; s < S_SQLITE; s++) {
        if (!res[s].selected) continue;
        if ((rc = rl_op(d, smethods[s], limit, reverse, &n, &h, NULL))) {
            fprintf(stderr, "query: %s/%s failed: %s\n", group, snames[s], rl_error_name(rc));
            return rc;
        }
        if (n != n0 || h != h0) {
            fprintf(stderr, "query: %s/%s returned %llu rows, not SQLite's %llu rows (or another order)\n", group,
                    snames[s], (unsigned long long)n, (unsigned long long)n0);
            return RL_E_INTERNAL_ERROR;
        }
    }
    return RL_OK;
}

/* ---- The run ----------------------------------------------------------------------------- */

static void print_count(FILE *out, double v, int width) {
    if (v < 0) fprintf(out, " %*s", width, "n/a");
    else if (v < 100) fprintf(out, " %*.2f", width, v);
    else fprintf(out, " %*.0f", width, v);
}

int rl__bench_query_micro_check(const rl__query_micro_options *o, rl__errdetail *err) {
    char name[128];
    if (o->records < 1 || o->records > RL__QUERY_MICRO_RECORDS_MAX) {
        rl__errdetail_set(err, "--records: %d is out of range [1, %d]", o->records, RL__QUERY_MICRO_RECORDS_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (o->padding < 0 || o->padding > RL__TOOL_PADDING_MAX) {
        rl__errdetail_set(err, "--padding: %d is out of range [0, %d]", o->padding, RL__TOOL_PADDING_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!isfinite(o->seconds) || o->seconds < RL__QUERY_MICRO_SECONDS_MIN || o->seconds > RL__QUERY_MICRO_SECONDS_MAX) {
        rl__errdetail_set(err, "--seconds: %g is out of range [%g, %g]", o->seconds, RL__QUERY_MICRO_SECONDS_MIN,
                          RL__QUERY_MICRO_SECONDS_MAX);
        return RL_E_INVALID_ARGUMENT;
    }
    if (o->repeats < 1 || o->repeats > MAX_ROUNDS) {
        rl__errdetail_set(err, "--repeats: %d is out of range [1, %d]", o->repeats, MAX_ROUNDS);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!o->only) return RL_OK;
    for (int d = 0; d < D_COUNT; d++)
        for (int r = 0; r < R_COUNT; r++)
            for (int dir = 0; dir < 2; dir++)
                for (int s = 0; s < S_COUNT; s++) {
                    snprintf(name, sizeof name, "%s/%s/%s/%s", dnames[d], rnames[r], dirnames[dir], snames[s]);
                    if (strstr(name, o->only)) return RL_OK;
                }
    rl__errdetail_set(
        err,
        "--only: no case name contains '%.64s' (names are DATASET/ROWS/DIRECTION/SYSTEM of %s|%s, %s|%s|%s, "
        "%s|%s, %s|%s|%s|%s|%s, e.g. small/rows1000/forward/remote)",
        o->only, dnames[0], dnames[1], rnames[0], rnames[1], rnames[2], dirnames[0], dirnames[1], snames[0], snames[1],
        snames[2], snames[3], snames[4]);
    return RL_E_INVALID_ARGUMENT;
}

/* Mark every selected, not yet failed result of the n in g failed with e. */
static void fail_all(result *g, int n, int e) {
    for (int s = 0; s < n; s++)
        if (g[s].selected && !g[s].failed) g[s].failed = 1, g[s].err = e;
}

/* The raw-TCP floor of one remote case: one untimed remote op counts the bytes it received, then
 * `repeats` rounds move them over the loopback connection *tf (opened on first use); *out_ns is
 * their median. An error is the run's (printed). */
static int measure_floor(dataset *d, int limit, int reverse, const rl__query_micro_options *o, rl__tcp_floor **tf,
                         uint64_t *out_bytes, double *out_ns) {
    rl_query_counters k;
    memset(&k, 0, sizeof k);
    k.size = sizeof k;
    uint64_t n, h;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = rl_op(d, RL_FETCH_USE_REMOTE_FETCH, limit, reverse, &n, &h, &k);
    uint64_t bytes = k.bytes_received_client_storage + k.bytes_received_client_coordinator;
    if (rc == RL_OK && !bytes) return RL_OK; /* nothing crossed a network: no floor */
    if (rc == RL_OK && !*tf) rc = rl__tcp_floor_open(tf, &err);
    double ns[MAX_ROUNDS];
    int i = 0;
    for (; rc == RL_OK && i < o->repeats && i < MAX_ROUNDS; i++)
        rc = rl__tcp_floor_measure(*tf, bytes, o->seconds, &ns[i], &err);
    if (rc) {
        fprintf(stderr, "query: the raw TCP floor failed: %s %s\n", rl_error_name(rc), rl__errdetail_get(&err));
        return rc;
    }
    *out_bytes = bytes;
    *out_ns = median(ns, i);
    return RL_OK;
}

int rl__bench_query_micro_run(const rl__query_micro_options *o, FILE *out, rl_buf *json) {
    char name[128];
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__bench_query_micro_check(o, &msg);
    if (rc) {
        fprintf(stderr, "query: %s\n", rl__errdetail_get(&msg));
        return rc;
    }
    result(*res)[R_COUNT][2][S_COUNT] = rl__calloc(D_COUNT, sizeof *res);
    dataset ds[D_COUNT];
    const int repeats = o->repeats;
    memset(ds, 0, sizeof ds);
    for (int d = 0; d < D_COUNT; d++) ds[d].secondary = o->secondary;
    if (!res) return RL_E_OUT_OF_MEMORY;
    rl_db *shared = NULL; /* --db: one handle for both datasets */
    /* On a cluster, the raw-TCP floor of each remote case (tcp_floor.h): the bytes the remote arm
     * received per op, moved over one plain loopback connection, median of `repeats` rounds. */
    double(*floor_ns)[R_COUNT][2] = rl__calloc(D_COUNT, sizeof *floor_ns);
    uint64_t floor_bytes[D_COUNT][R_COUNT][2];
    memset(floor_bytes, 0, sizeof floor_bytes);
    rl__tcp_floor *tf = NULL;
    if (!floor_ns) {
        rl__free(res);
        return RL_E_OUT_OF_MEMORY;
    }
    if (o->db && (rc = rl_db_open(o->db, NULL, &shared))) {
        fprintf(stderr, "query: cannot open %s: %s %s\n", o->db, rl_error_name(rc), rl_last_error_detail());
        rl__free(res);
        return rc;
    }
    sq_counting = rl__camp_sqlite_count_install();
    /* Select the cases; a dataset is loaded only if one of its cases is selected. */
    int need[D_COUNT] = {0, 0};
    for (int d = 0; d < D_COUNT; d++)
        for (int r = 0; r < R_COUNT; r++)
            for (int dir = 0; dir < 2; dir++)
                for (int s = 0; s < S_COUNT; s++) {
                    snprintf(name, sizeof name, "%s/%s/%s/%s", dnames[d], rnames[r], dirnames[dir], snames[s]);
                    if (o->only && !strstr(name, o->only)) continue;
                    res[d][r][dir][s].selected = 1;
                    need[d] = 1;
                }
    for (int d = 0; d < D_COUNT && rc == RL_OK; d++) {
        if (!need[d]) continue;
        int pad = d == D_SPLIT ? o->padding : 0;
        fprintf(stderr, "query: loading %d %s Orders (padding %d) into %s and SQLite\n", o->records, dnames[d], pad,
                o->db ? o->db : "mem:");
        if ((rc = dataset_load(&ds[d], shared, dnames[d], o->records, pad))) {
            fprintf(stderr, "query: loading %s failed: %s\n", dnames[d], rl_error_name(rc));
            for (int r = 0; r < R_COUNT; r++)
                for (int dir = 0; dir < 2; dir++) fail_all(res[d][r][dir], S_COUNT, rc);
        }
    }
    /* Cross-check, then measure, group by group. */
    for (int d = 0; d < D_COUNT && rc == RL_OK; d++) {
        if (!need[d]) continue;
        for (int r = 0; r < R_COUNT && rc == RL_OK; r++) {
            for (int dir = 0; dir < 2 && rc == RL_OK; dir++) {
                result *g = res[d][r][dir];
                int any = 0;
                for (int s = 0; s < S_COUNT; s++) any |= g[s].selected;
                if (!any) continue;
                snprintf(name, sizeof name, "%s/%s/%s", dnames[d], rnames[r], dirnames[dir]);
                if ((rc = check_group(&ds[d], rlimits[r], dir, name, g))) {
                    fail_all(g, S_COUNT, rc);
                    break;
                }
                for (int round = 0; round < repeats && rc == RL_OK; round++) {
                    for (int j = 0; j < S_COUNT; j++) {
                        int s = (round % 2) ? S_COUNT - 1 - j : j; /* alternate the order */
                        if (!g[s].selected || g[s].failed) continue;
                        int e = measure(&ds[d], s, rlimits[r], dir, o->seconds, &g[s]);
                        if (e) {
                            fprintf(stderr, "query: %s/%s failed: %s\n", name, snames[s], rl_error_name(e));
                            g[s].failed = 1;
                            g[s].err = e;
                            rc = rc ? rc : e;
                        }
                    }
                }
                for (int s = 0; o->stats && rc == RL_OK && s < S_SQLITE; s++) {
                    uint64_t n1, h1;
                    if (!g[s].selected || g[s].failed) continue;
                    g[s].k.size = sizeof g[s].k;
                    if (rl_op(&ds[d], smethods[s], rlimits[r], dir, &n1, &h1, &g[s].k) == RL_OK) g[s].has_k = 1;
                }
                if (rc == RL_OK && o->db && !strncmp(o->db, "cluster:", 8) && g[S_REMOTE].n && !g[S_REMOTE].failed)
                    rc = measure_floor(&ds[d], rlimits[r], dir, o, &tf, &floor_bytes[d][r][dir], &floor_ns[d][r][dir]);
                fprintf(stderr, "query: %s done (%d rounds)\n", name, repeats);
            }
        }
    }
    /* The table: medians of the rounds. */
    fprintf(out,
            "\nquery micro-benchmark: %d Orders per dataset, split padding %d B, %d rounds x %.2f s, "
            "median of rounds; SQLite allocations %s\n",
            o->records, o->padding, repeats, o->seconds,
            sq_counting == 1 ? "counted by a wrapper of its allocator (lookaside not counted)" : "n/a");
    fprintf(out, "%-7s %-9s %-8s %-16s %12s %10s %12s %8s %9s %9s\n", "dataset", "rows", "dir", "system", "ns/op",
            "allocs/op", "B/op", "rows/op", "ns/row", "x sqlite");
    if (json)
        rl__buf_printf(json,
                       "{\"records\":%d,\"padding\":%d,\"seconds\":%g,\"repeats\":%d,"
                       "\"sqlite_allocs_counted\":%s,\"results\":[",
                       o->records, o->padding, o->seconds, repeats, sq_counting == 1 ? "true" : "false");
    int first = 1;
    for (int d = 0; d < D_COUNT; d++)
        for (int r = 0; r < R_COUNT; r++)
            for (int dir = 0; dir < 2; dir++) {
                result *g = res[d][r][dir];
                int sq_ok = g[S_SQLITE].n && !g[S_SQLITE].failed;
                double sq_ns = sq_ok ? median(g[S_SQLITE].ns, g[S_SQLITE].n) : 0;
                for (int s = 0; s < S_COUNT; s++) {
                    result *x = &g[s];
                    if (!x->selected) continue;
                    fprintf(out, "%-7s %-9s %-8s %-16s", dnames[d], rnames[r], dirnames[dir], snames[s]);
                    if (x->failed || !x->n) {
                        if (x->failed)
                            fprintf(out, " %12s  %s (%s)\n", "failed", rl_error_name(x->err), rl_error_message(x->err));
                        else fprintf(out, " %12s  (an earlier case failed)\n", "not run");
                        if (json) {
                            rl__buf_printf(json,
                                           "%s{\"dataset\":\"%s\",\"rows\":\"%s\",\"direction\":\"%s\","
                                           "\"system\":\"%s\",\"failed\":%s,\"error\":",
                                           first ? "" : ",", dnames[d], rnames[r], dirnames[dir], snames[s],
                                           x->failed ? "true" : "false");
                            if (x->failed) rl__buf_printf(json, "\"%s\"}", rl_error_name(x->err));
                            else rl__buf_append_str(json, "null,\"not_run\":true}");
                            first = 0;
                        }
                        continue;
                    }
                    double ns = median(x->ns, x->n), al = median(x->allocs, x->n), by = median(x->bytes, x->n);
                    fprintf(out, " %12.0f", ns);
                    print_count(out, al, 10);
                    print_count(out, by, 12);
                    fprintf(out, " %8.0f %9.0f", x->rows, x->rows > 0 ? ns / x->rows : 0);
                    if (sq_ok) fprintf(out, " %9.2f\n", ns / sq_ns);
                    else fprintf(out, " %9s\n", "n/a");
                    if (json) {
                        rl__buf_printf(json,
                                       "%s{\"dataset\":\"%s\",\"rows\":\"%s\",\"direction\":\"%s\","
                                       "\"system\":\"%s\",\"failed\":false,\"rows_per_op\":%.1f,\"ns_per_op\":[",
                                       first ? "" : ",", dnames[d], rnames[r], dirnames[dir], snames[s], x->rows);
                        first = 0;
                        for (int k = 0; k < x->n; k++) rl__buf_printf(json, "%s%.1f", k ? "," : "", x->ns[k]);
                        rl__buf_printf(json, "],\"median_ns_per_op\":%.1f", ns);
                        if (al >= 0) rl__buf_printf(json, ",\"allocs_per_op\":%.2f,\"bytes_per_op\":%.1f", al, by);
                        else rl__buf_append_str(json, ",\"allocs_per_op\":null,\"bytes_per_op\":null");
                        if (sq_ok) rl__buf_printf(json, ",\"ratio_to_sqlite\":%.3f", ns / sq_ns);
                        else rl__buf_append_str(json, ",\"ratio_to_sqlite\":null");
                        if (x->has_k)
                            rl__buf_printf(
                                json,
                                ",\"trace\":{\"requests\":%llu,\"requests_client_storage\":%llu,"
                                "\"requests_client_coordinator\":%llu,\"requests_storage_storage\":%llu,"
                                "\"round_trips\":%llu,\"critical_round_trips\":%llu,"
                                "\"s2s_round_trips\":%llu,\"bytes_sent\":%llu,\"bytes_received\":%llu,"
                                "\"bytes_storage_storage\":%llu}",
                                (unsigned long long)x->k.requests, (unsigned long long)x->k.requests_client_storage,
                                (unsigned long long)x->k.requests_client_coordinator,
                                (unsigned long long)x->k.requests_storage_storage, (unsigned long long)x->k.round_trips,
                                (unsigned long long)x->k.critical_round_trips, (unsigned long long)x->k.s2s_round_trips,
                                (unsigned long long)(x->k.bytes_sent_client_storage +
                                                     x->k.bytes_sent_client_coordinator),
                                (unsigned long long)(x->k.bytes_received_client_storage +
                                                     x->k.bytes_received_client_coordinator),
                                (unsigned long long)(x->k.bytes_sent_storage_storage +
                                                     x->k.bytes_received_storage_storage));
                        rl__buf_append_str(json, "}");
                    }
                }
            }
    int any_floor = 0;
    for (int d = 0; d < D_COUNT; d++)
        for (int r = 0; r < R_COUNT; r++)
            for (int dir = 0; dir < 2; dir++) any_floor |= floor_bytes[d][r][dir] > 0;
    if (any_floor) {
        fprintf(out,
                "\nraw TCP floor: the remote arm's bytes received per op, moved over one loopback TCP "
                "connection (no framing, no injected delay), median of %d rounds\n",
                repeats);
        fprintf(out, "%-7s %-9s %-8s %12s %12s %12s %12s\n", "dataset", "rows", "dir", "bytes/op", "floor ns/op",
                "remote ns/op", "remote/floor");
        if (json) rl__buf_append_str(json, "],\"tcp_floor\":[");
        int ffirst = 1;
        for (int d = 0; d < D_COUNT; d++)
            for (int r = 0; r < R_COUNT; r++)
                for (int dir = 0; dir < 2; dir++) {
                    if (!floor_bytes[d][r][dir]) continue;
                    const result *x = &res[d][r][dir][S_REMOTE];
                    double rns = median(x->ns, x->n), fns = floor_ns[d][r][dir];
                    fprintf(out, "%-7s %-9s %-8s %12llu %12.0f %12.0f %12.2f\n", dnames[d], rnames[r], dirnames[dir],
                            (unsigned long long)floor_bytes[d][r][dir], fns, rns, fns > 0 ? rns / fns : 0);
                    if (json)
                        rl__buf_printf(json,
                                       "%s{\"dataset\":\"%s\",\"rows\":\"%s\",\"direction\":\"%s\","
                                       "\"bytes_per_op\":%llu,\"floor_ns_per_op\":%.1f,\"remote_ns_per_op\":%.1f}",
                                       ffirst ? "" : ",", dnames[d], rnames[r], dirnames[dir],
                                       (unsigned long long)floor_bytes[d][r][dir], fns, rns);
                    ffirst = 0;
                }
    }
    /* Allocations per returned row: constant in steady state means the marginal cost of a row
     * (rows1000 minus rows10, per extra row) matches the per-row figure at 10 rows. */
    fprintf(out, "\nallocations per returned row (allocs/op / rows/op; marginal = extra allocs per extra row "
                 "from rows10 to rows1000)\n");
    fprintf(out, "%-7s %-8s %-16s %10s %10s %10s %10s\n", "dataset", "dir", "system", "limit1", "rows10", "rows1000",
            "marginal");
    for (int d = 0; d < D_COUNT; d++)
        for (int dir = 0; dir < 2; dir++)
            for (int s = 0; s < S_COUNT; s++) {
                double per[R_COUNT], al[R_COUNT], rows[R_COUNT];
                int have = 0;
                for (int r = 0; r < R_COUNT; r++) {
                    result *x = &res[d][r][dir][s];
                    int ok = x->n > 0 && !x->failed;
                    al[r] = ok ? median(x->allocs, x->n) : -1;
                    rows[r] = x->rows;
                    per[r] = ok && al[r] >= 0 && x->rows > 0 ? al[r] / x->rows : -1;
                    have |= ok;
                }
                if (!have) continue;
                fprintf(out, "%-7s %-8s %-16s", dnames[d], dirnames[dir], snames[s]);
                for (int r = 0; r < R_COUNT; r++) print_count(out, per[r], 10);
                if (al[R_ROWS10] >= 0 && al[R_ROWS1000] >= 0 && rows[R_ROWS1000] > rows[R_ROWS10])
                    print_count(out, (al[R_ROWS1000] - al[R_ROWS10]) / (rows[R_ROWS1000] - rows[R_ROWS10]), 10);
                else fprintf(out, " %10s", "-");
                fprintf(out, "\n");
            }
    if (o->stats) {
        /* The trace summary: one untimed op per case after its rounds (its own transaction, so
         * the read version it waits for is in it). */
        fprintf(out, "\ntrace summary per op (one untimed op after the rounds; c->s client to storage, c->c "
                     "client to coordinator, s->s storage to storage; bytes are frames with headers)\n");
        fprintf(out, "%-7s %-9s %-8s %-16s %8s %8s %6s %7s %8s %8s %7s %10s %10s %10s\n", "dataset", "rows", "dir",
                "system", "requests", "c->s", "c->c", "s->s", "rtt", "critical", "s2s rtt", "sent B", "recv B",
                "s->s B");
        for (int d = 0; d < D_COUNT; d++)
            for (int r = 0; r < R_COUNT; r++)
                for (int dir = 0; dir < 2; dir++)
                    for (int s = 0; s < S_SQLITE; s++) {
                        const result *x = &res[d][r][dir][s];
                        if (!x->has_k) continue;
                        const rl_query_counters *k = &x->k;
                        fprintf(
                            out,
                            "%-7s %-9s %-8s %-16s %8llu %8llu %6llu %7llu %8llu %8llu %7llu %10llu %10llu %10llu\n",
                            dnames[d], rnames[r], dirnames[dir], snames[s], (unsigned long long)k->requests,
                            (unsigned long long)k->requests_client_storage,
                            (unsigned long long)k->requests_client_coordinator,
                            (unsigned long long)k->requests_storage_storage, (unsigned long long)k->round_trips,
                            (unsigned long long)k->critical_round_trips, (unsigned long long)k->s2s_round_trips,
                            (unsigned long long)(k->bytes_sent_client_storage + k->bytes_sent_client_coordinator),
                            (unsigned long long)(k->bytes_received_client_storage +
                                                 k->bytes_received_client_coordinator),
                            (unsigned long long)(k->bytes_sent_storage_storage + k->bytes_received_storage_storage));
                    }
    }
    if (json) rl__buf_append_str(json, "]}");
    rl__tcp_floor_close(tf);
    rl__free(floor_ns);
    for (int d = 0; d < D_COUNT; d++) dataset_release(&ds[d]);
    rl_db_close(shared);
    rl__free(res);
    return rc;
}
