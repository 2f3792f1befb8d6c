/* campaign_ops.c — one op of a campaign case (campaign_int.h): the reclayer query with a fetch
 * method, or the same query on the SQLite peer, reading every field of every row; the connection
 * they run on; and the counting wrapper of SQLite's allocator.
 *
 * One reclayer op: rl_txn_begin, rl_cursor_open(price_idx, limit, skip, reverse, fetch method),
 * rl_cursor_next until the end (each row's Order read field by field), the cursor's counters added
 * up, rl_cursor_free, rl_txn_free. One SQLite op: BEGIN; SELECT order_id, price, padding, customer,
 * quantity FROM orders ORDER BY price, order_id [DESC both] LIMIT n OFFSET skip (prepared once,
 * every column read); COMMIT. The index order of price_idx is (price, order_id), so both return the
 * same rows in the same order; the runner checks it for every case before timing (rows hash).
 *
 * The SQLite peer is opened read-only with a memory map of 256 MiB and a page cache of 256 MiB, so
 * after the warm-up it reads from memory like the embedded file: engine, which holds its data in
 * memory.
 */
#include <string.h>

#include "bench/campaign_int.h"
#include "order.pb-c.h"

/* ---- SQLite's allocations (process-global, as SQLite's allocator is) --------------------------- */

static sqlite3_mem_methods sq_base;
static uint64_t sq_allocs, sq_bytes;
static int sq_counting = -1; /* -1: not tried, 0: refused (SQLite already initialised), 1: counting */

static void *sq_malloc(int n) {
    sq_allocs++;
    sq_bytes += (uint64_t)(n > 0 ? n : 0);
    return sq_base.xMalloc(n);
}
static void sq_free(void *p) { sq_base.xFree(p); }
static void *sq_realloc(void *p, int n) {
    sq_allocs++;
    sq_bytes += (uint64_t)(n > 0 ? n : 0);
    return sq_base.xRealloc(p, n);
}
static int sq_size(void *p) { return sq_base.xSize(p); }
static int sq_roundup(int n) { return sq_base.xRoundup(n); }
static int sq_init(void *ud) {
    (void)ud;
    return sq_base.xInit(sq_base.pAppData);
}
static void sq_shutdown(void *ud) {
    (void)ud;
    sq_base.xShutdown(sq_base.pAppData);
}

int rl__camp_sqlite_count_install(void) {
    static sqlite3_mem_methods wrap = {sq_malloc, sq_free, sq_realloc, sq_size, sq_roundup, sq_init, sq_shutdown, NULL};
    if (sq_counting < 0)
        sq_counting = sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sq_base) == SQLITE_OK &&
                      sqlite3_config(SQLITE_CONFIG_MALLOC, &wrap) == SQLITE_OK;
    return sq_counting == 1;
}

void rl__camp_sqlite_counts(uint64_t *out_allocs, uint64_t *out_bytes) {
    *out_allocs = sq_allocs;
    *out_bytes = sq_bytes;
}

/* ---- The connection ---------------------------------------------------------------------------- */

void rl__camp_conn_close(rl__camp_conn *c) {
    for (int i = 0; i < 2; i++) sqlite3_finalize(c->sel[i]);
    sqlite3_finalize(c->begin);
    sqlite3_finalize(c->commit);
    sqlite3_close(c->sq);
    rl__tool_close(&c->t);
    memset(c, 0, sizeof *c);
}

int rl__camp_conn_open(rl__camp_conn *c, const char *url, const char *store, const char *sqlite_path,
                       rl__errdetail *err) {
    static const char *const sel[2] = {
        "SELECT order_id, price, padding, customer, quantity FROM orders ORDER BY price, order_id LIMIT ? OFFSET ?",
        "SELECT order_id, price, padding, customer, quantity FROM orders ORDER BY price DESC, order_id DESC"
        " LIMIT ? OFFSET ?"};
    int rc;
    memset(c, 0, sizeof *c);
    if ((rc = rl__tool_open(&c->t, url, store, 0, RL__TOOL_READ_ONLY))) {
        rl__errdetail_append(err, "cannot open %s %s: %s", url, store, rl__tool_errmsg(&c->t));
        return rc;
    }
    c->embedded = !strncmp(url, "file:", 5) || !strncmp(url, "mem:", 4);
    if (!sqlite_path) return RL_OK;
    if (sqlite3_open_v2(sqlite_path, &c->sq, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_exec(c->sq, "PRAGMA mmap_size=268435456; PRAGMA cache_size=-262144", NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->sq, sel[0], -1, &c->sel[0], NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->sq, sel[1], -1, &c->sel[1], NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->sq, "BEGIN", -1, &c->begin, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(c->sq, "COMMIT", -1, &c->commit, NULL) != SQLITE_OK) {
        rl__errdetail_append(err, "SQLite: cannot open %s: %s", sqlite_path,
                             c->sq ? sqlite3_errmsg(c->sq) : "out of memory");
        rl__camp_conn_close(c);
        return RL_E_IO_ERROR;
    }
    return RL_OK;
}

/* ---- One op ------------------------------------------------------------------------------------ */

/* What the ops read is summed here, so the compiler cannot drop the reads. */
static volatile uint64_t sink;

static uint64_t fold(uint64_t h, int64_t id) { return (h ^ (uint64_t)id) * 0x100000001b3ull; }

/* By arm (rl__camp_arm, the SQLite peer aside): the fetch method and the query's secondary
 * strategy (0: the database's, which the topology's secondary_reads set: `remote` is FoundationDB's
 * `individual` on the reports' topologies). ADAPTIVE reads with grouped secondaries, as
 * remote-grouped does — "it may use either" (docs/design.md §8.7) —, and is compared with the best
 * of the three (campaign_run.c). */
static const rl_fetch_method methods[RL_CAMP_SQLITE] = {RL_FETCH_SCAN_AND_FETCH, RL_FETCH_USE_REMOTE_FETCH,
                                                        RL_FETCH_USE_REMOTE_FETCH, RL_FETCH_ADAPTIVE};
static const int strategies[RL_CAMP_SQLITE] = {0, 0, RL_SECONDARY_GROUPED, RL_SECONDARY_GROUPED};

/* Requests, round trips and network bytes per op as the query layer reports them
 * (rl_query_counters' tracing figures, docs/design.md §7): client requests over the network (to
 * storage servers and the coordinator, the op's read version included), round trips on the
 * critical path, and the reply bytes received. The embedded backends send none: 0 is the truth
 * there; cluster: fills them. This is the one place the campaign takes them from. Returns 1 (they
 * are known). */
static int net_counters(const rl__camp_conn *c, const rl_query_counters *k, uint64_t *requests, uint64_t *round_trips,
                        uint64_t *bytes_received) {
    (void)c;
    *requests = k->requests;
    *round_trips = k->critical_round_trips;
    *bytes_received = k->bytes_received_client_storage + k->bytes_received_client_coordinator;
    return 1;
}

static int rl_op(rl__camp_conn *c, const rl__camp_case *k, rl__camp_arm arm, int depth, rl__camp_sums *s,
                 rl__errdetail *err) {
    rl_txn *t = NULL;
    rl_cursor *cur = NULL;
    rl_query_options qo;
    rl_query_counters kc;
    const rl_query_row *row;
    uint64_t n = 0, h = 0xcbf29ce484222325ull, sum = 0, req, rtt, nb;
    int rc;
    memset(&qo, 0, sizeof qo);
    qo.size = sizeof qo;
    qo.fetch = methods[arm];
    qo.secondary_strategy = strategies[arm];
    qo.limit = k->limit;
    qo.skip = k->skip;
    qo.reverse = k->reverse;
    qo.pipeline_depth = depth;
    if ((rc = rl_txn_begin(c->t.db, &t))) goto done;
    if ((rc = rl_cursor_open(c->t.s, t, "price_idx", &qo, &cur))) {
        rl__errdetail_append(err, "%s: %s", rl_error_name(rc), rl_store_errmsg(c->t.s));
        goto done;
    }
    while ((rc = rl_cursor_next(cur, &row)) == RL_OK && row) {
        const Reclayer__Order *o = (const Reclayer__Order *)row->record->msg;
        sum += (uint64_t)o->order_id + (uint64_t)o->price + (uint64_t)o->quantity + strlen(o->customer);
        if (o->padding.len) sum += o->padding.len + o->padding.data[0] + o->padding.data[o->padding.len - 1];
        h = fold(h, o->order_id);
        n++;
    }
    if (rc) {
        rl__errdetail_append(err, "%s: %s", rl_error_name(rc), rl_cursor_errmsg(cur));
        goto done;
    }
    rl_cursor_get_counters(cur, &kc);
    if (!net_counters(c, &kc, &req, &rtt, &nb)) s->net_uncounted = 1;
    s->index_entries += kc.index_entries_read;
    s->client_reads += kc.reads_get + kc.reads_range + kc.reads_mapped_range;
    s->mapped_requests += kc.mapped_range_requests;
    s->record_loads += kc.record_loads;
    s->kv_bytes += kc.kv_bytes_received;
    s->requests += req;
    s->round_trips += rtt;
    s->net_bytes_received += nb;
done:
    rl_cursor_free(cur);
    rl_txn_free(t);
    sink += sum;
    if (!rc) {
        s->ops++;
        s->rows += n;
        s->last_rows = n;
        s->hash = h;
    }
    return rc;
}

static int sq_op(rl__camp_conn *c, const rl__camp_case *k, rl__camp_sums *s, rl__errdetail *err) {
    sqlite3_stmt *st = c->sel[k->reverse];
    uint64_t n = 0, h = 0xcbf29ce484222325ull, sum = 0;
    int rc = RL_OK, e = SQLITE_DONE;
    if (!st) {
        rl__errdetail_append(err, "no SQLite peer in this topology");
        return RL_E_UNSUPPORTED_OPERATION;
    }
    if (sqlite3_step(c->begin) != SQLITE_DONE) rc = RL_E_IO_ERROR;
    sqlite3_reset(c->begin);
    sqlite3_bind_int(st, 1, k->limit);
    sqlite3_bind_int(st, 2, k->skip);
    while (rc == RL_OK && (e = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        sum += (uint64_t)id + (uint64_t)sqlite3_column_int64(st, 1) + (uint64_t)sqlite3_column_int64(st, 4);
        const unsigned char *pad = sqlite3_column_blob(st, 2);
        int pad_len = sqlite3_column_bytes(st, 2);
        if (pad && pad_len > 0) sum += (uint64_t)pad_len + pad[0] + pad[pad_len - 1];
        const unsigned char *cust = sqlite3_column_text(st, 3);
        if (cust) sum += strlen((const char *)cust);
        h = fold(h, id);
        n++;
    }
    if (rc == RL_OK && e != SQLITE_DONE) rc = RL_E_IO_ERROR;
    sqlite3_reset(st);
    if (sqlite3_step(c->commit) != SQLITE_DONE && !rc) rc = RL_E_IO_ERROR;
    sqlite3_reset(c->commit);
    sink += sum;
    if (rc) {
        rl__errdetail_append(err, "SQLite: %s", sqlite3_errmsg(c->sq));
        return rc;
    }
    s->ops++;
    s->rows += n;
    s->last_rows = n;
    s->hash = h;
    s->index_entries += n;
    return RL_OK;
}

int rl__camp_op(rl__camp_conn *c, const rl__camp_case *k, rl__camp_arm arm, int depth, rl__camp_sums *s,
                rl__errdetail *err) {
    if (arm == RL_CAMP_SQLITE) return sq_op(c, k, s, err);
    return rl_op(c, k, arm, depth, s, err);
}
