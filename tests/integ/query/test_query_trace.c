/* test_query_trace.c — the query tracing counters and timeline (rl_query_counters' network
 * figures, rl_cursor_get_trace, `rl query --stats --trace`) and the storage servers' STATUS
 * counters, on real clusters (tests/cluster_fixture.h) and on the embedded backend.
 *
 * Data: `rl load`'s Order store ("bench","orders") with N small records (price_idx on price).
 *
 *   trace-1.1  one storage server: a fresh database's first get (over a connection still being
 *              opened) is one GET plus its charged read version; a remote fetch of 10 rows in one page is exactly one
 *              client->storage GET_MAPPED_RANGE, 1 critical round trip (the read version was
 *              known), every secondary local, no storage->storage traffic; the same query in a
 *              fresh transaction adds the GET_READ_VERSION on the client->coordinator link and
 *              one critical round trip; a full remote fetch has one critical round trip per
 *              mapped page; SCAN_AND_FETCH of 100 records with depth 10 has 100 record loads and
 *              between 10 and 10 + index pages + 2 critical round trips (1,000 records: 100 +
 *              pages + 2; depth 1: one per record); untraced, the same counters and no events;
 *              in every case the bytes
 *              are > 0 and equal the sums of the trace's events, the events name server 1 on
 *              host1 with its address and port, in start order.
 *   trace-1.2  three storage servers, the records on server 2 and the index on server 3: a remote
 *              fetch of 10 rows is one mapped request to server 3 with 10 remote secondaries, the
 *              servers' GET_MULTI requests and bytes on the storage->storage link and critical
 *              round trips 1 + s2s round trips; server 3's STATUS counts one more mapped read, 10
 *              more remote secondaries and its s2s requests, server 2's the GET_MULTI it served;
 *              SCAN_AND_FETCH sends its index pages to server 3 and its loads to server 2.
 *   trace-1.3  embedded (file:): every network figure is 0 and the trace is empty.
 *   trace-1.4  `rl query --stats --trace` on the cluster: every line parses, the trace lines
 *              carry their fields, and their bytes add up to the stats line's.
 *   trace-1.5  early entries: a remote fetch streamed an entry per chunk (one-byte chunks and
 *              window) with a 20 ms delay — each entry a credit round trip after the one before —
 *              gives the cursor its page's rows as they arrive: entries_early between 1 and all
 *              but the page's last; the same rows, each with its record, as whole replies
 *              (?stream=0, entries_early 0), and as SCAN_AND_FETCH (0).
 *   trace-1.6  pages read ahead after early entries: 600 rows of 40 kB records with a limit of
 *              600 are three mapped pages of 8 MiB (the next page asks for what the limit leaves
 *              beyond the entries not yet consumed, not beyond the whole page: the rows a page
 *              handed up early are counted once), with entries_early > 0.
 */
#include <stdlib.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster_fixture.h"
#include "kv/kv_stats.h"
#include "reclayer/query.h"
#include "record/record_int.h"
#include "app/tool.h"
#include "test.h"
#include "tuple/tuple.h"

#define N 100

/* The printable form (every byte as \xNN) of the store's prefix followed by the tuple (ks). */
static void split_key(int ks, char *out, size_t cap) {
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__tool_store_prefix("[\"bench\",\"orders\"]", &b, NULL));
    rl__tuple_packer p;
    rl__tuple_packer_init(&p, &b);
    rl__tuple_pack_int(&p, ks);
    ASSERT_OK(rl__buf_error(&b));
    ASSERT_TRUE(b.len * 4 < cap);
    for (size_t i = 0; i < b.len; i++) snprintf(out + 4 * i, 5, "\\x%02x", b.data[i]);
    rl__buf_release(&b);
}

static void load_n(const char *url, const char *store_opt, int n) {
    char *out;
    int rc = rl_test_rl(&out, "load --db %s %s --count %d --seed 7", url, store_opt, n);
    if (rc) fail_msg("rl load failed (%d): %s", rc, out);
    free(out);
}

static void load(const char *url) { load_n(url, "", N); }

typedef struct {
    rl_query_counters k;
    uint64_t ev_sent, ev_received; /* sums over the trace's events */
    uint64_t ev_s2s_requests, ev_s2s_bytes;
    size_t n_events;
    int n_mapped_events, rows;
    uint32_t servers_seen;               /* bit per server id of the events */
    uint32_t page_servers, load_servers; /* SCAN_AND_FETCH: servers of index pages / of loads */
    rl_query_s2s_peer peer[4];           /* the mapped events' per-peer stats, summed by server id (< 4) */
    uint64_t n_peer_entries;
} run;

/* Run one traced query on db/s; with known_rv the transaction's read version is read first. */
static void query_traced(rl__tool *t, rl_fetch_method m, int limit, int depth, int known_rv, int trace, run *out) {
    rl_txn *txn;
    rl_cursor *c;
    const rl_query_row *row;
    rl_query_options o;
    memset(out, 0, sizeof *out);
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.fetch = m;
    o.limit = limit;
    o.pipeline_depth = depth;
    o.trace = trace;
    ASSERT_OK(rl_txn_begin(t->db, &txn));
    if (known_rv) {
        rl_future *f = rl_txn_get_read_version(txn);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
    }
    ASSERT_OK(rl_cursor_open(t->s, txn, "price_idx", &o, &c));
    int rc;
    while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) out->rows++;
    ASSERT_OK(rc);
    rl_cursor_get_counters(c, &out->k);
    const rl_query_trace_event *ev;
    size_t n;
    rl_cursor_get_trace(c, &ev, &n);
    out->n_events = n;
    for (size_t i = 0; i < n; i++) {
        const rl_query_trace_event *e = &ev[i];
        if (i > 0) ASSERT_TRUE(e->start_ns >= ev[i - 1].start_ns);
        ASSERT_TRUE(e->start_ns >= 0 && e->latency_ns > 0);
        ASSERT_EQ(e->error, 0);
        ASSERT_STR_EQ(e->address, "127.0.0.1");
        ASSERT_TRUE(e->port > 0);
        ASSERT_STR_EQ(e->host, "host1");
        out->ev_sent += e->bytes_sent;
        out->ev_received += e->bytes_received;
        out->ev_s2s_requests += e->s2s_requests;
        out->ev_s2s_bytes += e->s2s_bytes_sent + e->s2s_bytes_received;
        out->servers_seen |= 1u << e->server_id;
        if (!strcmp(e->type, "get_mapped_range")) out->n_mapped_events++;
        for (size_t j = 0; j < e->n_s2s_by_peer; j++) {
            const rl_query_s2s_peer *p = &e->s2s_by_peer[j];
            ASSERT_TRUE(p->server_id > 0 && p->server_id < 4);
            rl_query_s2s_peer *x = &out->peer[p->server_id];
            x->server_id = p->server_id;
            x->requests += p->requests, x->items += p->items;
            x->bytes_sent += p->bytes_sent, x->bytes_received += p->bytes_received;
            out->n_peer_entries++;
        }
        if (!strcmp(e->type, "get_read_version")) {
            ASSERT_EQ(e->server_id, 0);
            ASSERT_STR_EQ(e->link, "client-coordinator");
        } else {
            ASSERT_TRUE(e->server_id > 0);
            ASSERT_STR_EQ(e->link, "client-storage");
        }
        /* Record loads ask for a record's range (one row here); index pages for many. */
        if (!strcmp(e->type, "get_range")) {
            if (e->bytes_received > 1000) out->page_servers |= 1u << e->server_id;
            else out->load_servers |= 1u << e->server_id;
        }
    }
    rl_cursor_free(c);
    rl_txn_free(txn);
}

static void query(rl__tool *t, rl_fetch_method m, int limit, int depth, int known_rv, run *out) {
    query_traced(t, m, limit, depth, known_rv, 1, out);
}

/* What every traced cluster run satisfies: bytes > 0, equal to the events' sums; the sums of the
 * types and links equal the total. */
static void check_consistent(const run *r) {
    const rl_query_counters *k = &r->k;
    ASSERT_TRUE(k->requests > 0);
    ASSERT_EQ(r->n_events, k->requests);
    ASSERT_EQ(k->requests, k->requests_client_storage + k->requests_client_coordinator);
    ASSERT_EQ(k->requests, k->requests_get + k->requests_get_key + k->requests_get_range +
                               k->requests_get_mapped_range + k->requests_get_read_version);
    ASSERT_EQ(k->requests_storage_storage, k->requests_get_multi);
    uint64_t sent = k->bytes_sent_client_storage + k->bytes_sent_client_coordinator;
    uint64_t recv = k->bytes_received_client_storage + k->bytes_received_client_coordinator;
    ASSERT_TRUE(sent > 0 && recv > 0);
    ASSERT_EQ(sent, r->ev_sent);
    ASSERT_EQ(recv, r->ev_received);
    ASSERT_EQ(k->requests_get_multi, r->ev_s2s_requests);
    ASSERT_EQ(k->bytes_sent_storage_storage + k->bytes_received_storage_storage, r->ev_s2s_bytes);
    ASSERT_TRUE(k->critical_round_trips <= k->round_trips + k->s2s_round_trips);
    ASSERT_TRUE(k->critical_round_trips >= 1);
}

static void print_run(const char *what, const run *r) {
    const rl_query_counters *k = &r->k;
    printf("%s: requests %llu (c->s %llu, c->c %llu, s->s %llu), round trips %llu, s2s %llu, critical %llu, "
           "waits %llu, bytes c->s %llu/%llu s->s %llu/%llu\n",
           what, (unsigned long long)k->requests, (unsigned long long)k->requests_client_storage,
           (unsigned long long)k->requests_client_coordinator, (unsigned long long)k->requests_storage_storage,
           (unsigned long long)k->round_trips, (unsigned long long)k->s2s_round_trips,
           (unsigned long long)k->critical_round_trips, (unsigned long long)k->waits,
           (unsigned long long)k->bytes_sent_client_storage, (unsigned long long)k->bytes_received_client_storage,
           (unsigned long long)k->bytes_sent_storage_storage, (unsigned long long)k->bytes_received_storage_storage);
}

TEST(trace_1_1_one_server) {
    static rl_test_cluster c;
    rl__cluster_up_opts o = {.n_storage = 1};
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    load(c.url);
    /* A fresh database: its first read to the storage server waits for the connection, and is
     * still one request (counted when it is actually sent), its read version one more. */
    rl_db *db;
    rl_txn *txn;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    ASSERT_OK(rl_txn_begin(db, &txn));
    rl_future *f = rl_txn_get(txn, "k", 1, 0);
    ASSERT_OK(rl_future_wait(f));
    const rl__kv_read_stats *ks = rl__future_read_stats(f);
    ASSERT_EQ(ks->requests, 2);
    ASSERT_EQ(ks->req_get, 1);
    ASSERT_EQ(ks->grv_requests, 1);
    ASSERT_EQ(ks->coord_requests, 1);
    ASSERT_EQ(ks->grv_waits, 1);
    ASSERT_EQ(ks->round_trips, 1);
    ASSERT_TRUE(ks->bytes_sent > ks->coord_bytes_sent && ks->bytes_received > ks->coord_bytes_received);
    rl_future_free(f);
    rl_txn_free(txn);
    rl_db_close(db);

    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, c.url, NULL, 0, RL__TOOL_READ_ONLY));
    run r;

    /* Remote fetch of 10 rows, read version known: one mapped request, one round trip. */
    query(&t, RL_FETCH_USE_REMOTE_FETCH, 10, 0, 1, &r);
    print_run("remote 10", &r);
    ASSERT_EQ(r.rows, 10);
    check_consistent(&r);
    ASSERT_EQ(r.k.requests, 1);
    ASSERT_EQ(r.k.requests_get_mapped_range, 1);
    ASSERT_EQ(r.k.requests_client_storage, 1);
    ASSERT_EQ(r.k.requests_client_coordinator, 0);
    ASSERT_EQ(r.k.requests_get_multi, 0);
    ASSERT_EQ(r.k.s2s_round_trips, 0);
    ASSERT_EQ(r.k.critical_round_trips, 1);
    ASSERT_EQ(r.k.round_trips, 1);
    ASSERT_EQ(r.k.secondary_local, 10);
    ASSERT_EQ(r.n_mapped_events, 1);
    ASSERT_EQ(r.servers_seen, 1u << 1);

    /* The same in a fresh transaction: the read version it waited for is charged to it. */
    query(&t, RL_FETCH_USE_REMOTE_FETCH, 10, 0, 0, &r);
    print_run("remote 10, fresh txn", &r);
    check_consistent(&r);
    ASSERT_EQ(r.k.requests, 2);
    ASSERT_EQ(r.k.requests_get_read_version, 1);
    ASSERT_EQ(r.k.requests_client_coordinator, 1);
    ASSERT_TRUE(r.k.bytes_sent_client_coordinator > 0 && r.k.bytes_received_client_coordinator > 0);
    ASSERT_EQ(r.k.critical_round_trips, 2);
    ASSERT_EQ(r.servers_seen, (1u << 0) | (1u << 1));

    /* A full remote fetch: one critical round trip per mapped page (all local). */
    query(&t, RL_FETCH_USE_REMOTE_FETCH, 0, 0, 1, &r);
    print_run("remote all", &r);
    ASSERT_EQ(r.rows, N);
    check_consistent(&r);
    ASSERT_EQ(r.k.requests_get_mapped_range, 1); /* a full scan reads WANT_ALL pages (cursor.c inv. 8) */
    ASSERT_EQ(r.k.critical_round_trips, r.k.requests_get_mapped_range);
    ASSERT_EQ(r.k.secondary_local, N);

    /* SCAN_AND_FETCH of 100 records with pipeline depth 10. */
    query(&t, RL_FETCH_SCAN_AND_FETCH, N, 10, 1, &r);
    print_run("scan 100 depth 10", &r);
    ASSERT_EQ(r.rows, N);
    check_consistent(&r);
    ASSERT_EQ(r.k.record_loads, N);
    uint64_t pages = r.k.requests_get_range - N;
    ASSERT_TRUE(pages >= 1);
    ASSERT_EQ(r.k.requests_get_mapped_range, 0);
    ASSERT_TRUE(r.k.critical_round_trips >= N / 10);
    ASSERT_TRUE(r.k.critical_round_trips <= N / 10 + pages + 2);
    ASSERT_EQ(r.k.round_trips, r.k.requests);
    /* Depth 1: every load waits for the one before. */
    query(&t, RL_FETCH_SCAN_AND_FETCH, N, 1, 1, &r);
    print_run("scan 100 depth 1", &r);
    check_consistent(&r);
    ASSERT_TRUE(r.k.critical_round_trips >= N);
    ASSERT_TRUE(r.k.critical_round_trips <= N + (r.k.requests_get_range - N) + 2);
    /* Not traced: the same counters, no timeline. */
    run u;
    query_traced(&t, RL_FETCH_SCAN_AND_FETCH, N, 10, 1, 0, &u);
    ASSERT_EQ(u.n_events, 0);
    ASSERT_EQ(u.k.requests, r.k.requests);
    ASSERT_EQ(u.k.bytes_received_client_storage, r.k.bytes_received_client_storage);
    rl__tool_close(&t);

    /* 1,000 records: SCAN_AND_FETCH at depth 10 is about 100 round trips plus the index pages;
     * a remote fetch (all local) one per mapped page. */
    load_n(c.url, "--store '[\"bench\",\"big\"]'", 1000);
    ASSERT_OK(rl__tool_open(&t, c.url, "[\"bench\",\"big\"]", 0, RL__TOOL_READ_ONLY));
    query(&t, RL_FETCH_SCAN_AND_FETCH, 0, 10, 1, &r);
    print_run("scan 1000 depth 10", &r);
    ASSERT_EQ(r.rows, 1000);
    check_consistent(&r);
    pages = r.k.requests_get_range - 1000;
    ASSERT_TRUE(r.k.critical_round_trips >= 100 && r.k.critical_round_trips <= 100 + pages + 2);
    query(&t, RL_FETCH_USE_REMOTE_FETCH, 0, 0, 1, &r);
    print_run("remote 1000", &r);
    ASSERT_EQ(r.rows, 1000);
    check_consistent(&r);
    ASSERT_EQ(r.k.critical_round_trips, r.k.requests_get_mapped_range);
    ASSERT_EQ(r.k.requests_get_mapped_range, 1); /* 1,000 small rows: one WANT_ALL page */
    ASSERT_EQ(r.k.secondary_local, 1000);
    rl__tool_close(&t);
    rl_test_cluster_stop(&c);
}

/* One storage server's STATUS from the database's status JSON. */
static json_t *storage_status(rl_db *db, int id) {
    char *js;
    ASSERT_OK(rl_db_status_json(db, &js));
    json_error_t err;
    json_t *j = json_loads(js, 0, &err);
    rl_free(js);
    ASSERT_NOT_NULL(j);
    size_t i;
    json_t *s, *found = NULL;
    json_array_foreach(json_object_get(j, "storage"), i, s) {
        if (json_integer_value(json_object_get(s, "id")) == id) found = json_incref(s);
    }
    json_decref(j);
    if (!found) fail_msg("no STATUS of storage server %d", id);
    return found;
}

static long long ji(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v)) fail_msg("STATUS has no integer %s", k);
    return json_integer_value(v);
}

TEST(trace_1_2_records_elsewhere) {
    static rl_test_cluster c;
    char k1[256], k2[256];
    split_key(1, k1, sizeof k1); /* the records: [prefix+(1), prefix+(2)) on server 2 */
    split_key(2, k2, sizeof k2); /* the index and the rest: server 3 */
    const char *split[] = {k1, k2};
    rl__cluster_up_opts o = {.n_storage = 3, .split = split, .n_split = 2};
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    load(c.url);
    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, c.url, NULL, 0, RL__TOOL_READ_ONLY));
    json_t *s3a = storage_status(t.db, 3), *s2a = storage_status(t.db, 2);
    run r;
    query(&t, RL_FETCH_USE_REMOTE_FETCH, 10, 0, 1, &r);
    print_run("3 servers: remote 10", &r);
    json_t *s3b = storage_status(t.db, 3), *s2b = storage_status(t.db, 2);
    ASSERT_EQ(r.rows, 10);
    check_consistent(&r);
    ASSERT_EQ(r.k.requests, 1);
    ASSERT_EQ(r.k.requests_get_mapped_range, 1);
    ASSERT_EQ(r.servers_seen, 1u << 3);
    ASSERT_EQ(r.k.secondary_remote, 10);
    ASSERT_EQ(r.k.secondary_local, 0);
    ASSERT_TRUE(r.k.requests_get_multi >= 1 && r.k.requests_get_multi <= 10);
    ASSERT_TRUE(r.k.s2s_round_trips >= 1);
    ASSERT_EQ(r.k.s2s_peers_max, 1);
    ASSERT_TRUE(r.k.bytes_sent_storage_storage > 0 && r.k.bytes_received_storage_storage > 0);
    ASSERT_EQ(r.k.critical_round_trips, 1 + r.k.s2s_round_trips);
    /* The per-peer stats: every GET_MULTI went to server 2, the records' server. */
    ASSERT_EQ(r.n_peer_entries, 1);
    ASSERT_EQ(r.peer[2].requests, r.k.requests_get_multi);
    ASSERT_EQ(r.peer[2].items, 10);
    ASSERT_EQ(r.peer[2].bytes_sent, r.k.bytes_sent_storage_storage);
    ASSERT_EQ(r.peer[2].bytes_received, r.k.bytes_received_storage_storage);
    /* The servers' counters moved by exactly this query. */
    ASSERT_EQ(ji(s3b, "mapped_reads") - ji(s3a, "mapped_reads"), 1);
    ASSERT_EQ(ji(s3b, "secondaries_remote") - ji(s3a, "secondaries_remote"), 10);
    ASSERT_EQ(ji(s3b, "s2s_requests") - ji(s3a, "s2s_requests"), (long long)r.k.requests_get_multi);
    ASSERT_EQ(ji(s3b, "s2s_bytes_sent") - ji(s3a, "s2s_bytes_sent"), (long long)r.k.bytes_sent_storage_storage);
    ASSERT_EQ(ji(s3b, "s2s_bytes_received") - ji(s3a, "s2s_bytes_received"),
              (long long)r.k.bytes_received_storage_storage);
    ASSERT_EQ(ji(s2b, "get_multi_served") - ji(s2a, "get_multi_served"), (long long)r.k.requests_get_multi);
    ASSERT_EQ(ji(s2b, "get_multi_items_served") - ji(s2a, "get_multi_items_served"), 10);
    ASSERT_TRUE(ji(s3b, "mapped_workers") >= 1);
    ASSERT_EQ(ji(s3b, "parked_now"), 0);
    /* The gauges: the worker counts itself out just after sending its reply (wait, bounded). */
    for (int i = 0; i < 100 && (ji(s3b, "mapped_running") || ji(s3b, "mapped_queued")); i++) {
        usleep(20000);
        json_decref(s3b);
        s3b = storage_status(t.db, 3);
    }
    ASSERT_EQ(ji(s3b, "mapped_queued"), 0);
    ASSERT_EQ(ji(s3b, "mapped_running"), 0);
    json_decref(s3a), json_decref(s3b), json_decref(s2a), json_decref(s2b);

    /* SCAN_AND_FETCH: index pages from server 3, record loads from server 2. */
    s2a = storage_status(t.db, 2);
    query(&t, RL_FETCH_SCAN_AND_FETCH, N, 10, 1, &r);
    print_run("3 servers: scan 100 depth 10", &r);
    s2b = storage_status(t.db, 2);
    check_consistent(&r);
    ASSERT_EQ(r.k.record_loads, N);
    ASSERT_EQ(r.page_servers, 1u << 3);
    ASSERT_EQ(r.load_servers, 1u << 2);
    ASSERT_EQ(r.k.requests_storage_storage, 0);
    ASSERT_EQ(ji(s2b, "get_ranges") - ji(s2a, "get_ranges"), N);
    uint64_t pages = r.k.requests_get_range - N;
    ASSERT_TRUE(r.k.critical_round_trips >= N / 10 && r.k.critical_round_trips <= N / 10 + pages + 2);
    json_decref(s2a), json_decref(s2b);
    rl__tool_close(&t);
    rl_test_cluster_stop(&c);
}

TEST(trace_1_3_embedded_zero) {
    char *dir = rl_test_tmpdir("qtrace"), url[600];
    snprintf(url, sizeof url, "file:%s", dir);
    load(url);
    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, url, NULL, 0, RL__TOOL_READ_ONLY));
    for (int m = 0; m < 2; m++) {
        run r;
        query(&t, m ? RL_FETCH_USE_REMOTE_FETCH : RL_FETCH_SCAN_AND_FETCH, 0, 0, 0, &r);
        ASSERT_EQ(r.rows, N);
        const rl_query_counters *k = &r.k;
        ASSERT_EQ(r.n_events, 0);
        uint64_t net = k->requests + k->requests_get + k->requests_get_key + k->requests_get_range +
                       k->requests_get_mapped_range + k->requests_get_read_version + k->requests_get_multi +
                       k->requests_client_storage + k->requests_client_coordinator + k->requests_storage_storage +
                       k->bytes_sent_client_storage + k->bytes_received_client_storage +
                       k->bytes_sent_client_coordinator + k->bytes_received_client_coordinator +
                       k->bytes_sent_storage_storage + k->bytes_received_storage_storage + k->round_trips +
                       k->s2s_round_trips + k->s2s_peers_max + k->critical_round_trips + k->waits + k->entries_early;
        ASSERT_EQ(net, 0);
        ASSERT_TRUE(k->kv_bytes_received > 0);
    }
    rl__tool_close(&t);
    rl_test_rmtree(dir);
    free(dir);
}

static uint64_t jpath(json_t *o, const char *a, const char *b, const char *c) {
    json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    if (c) v = json_object_get(v, c);
    if (!json_is_integer(v)) fail_msg("no integer %s.%s.%s", a, b ? b : "", c ? c : "");
    return (uint64_t)json_integer_value(v);
}

TEST(trace_1_4_cli) {
    static rl_test_cluster c;
    rl__cluster_up_opts o = {.n_storage = 1};
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    load(c.url);
    const char *fetch[] = {"remote", "scan"};
    for (int f = 0; f < 2; f++) {
        char *out;
        ASSERT_EQ(
            rl_test_rl(&out, "query --db %s --index price_idx --fetch %s --limit 20 --stats --trace", c.url, fetch[f]),
            0);
        int rows = 0, traces = 0, stats = 0;
        uint64_t sent = 0, recv = 0;
        double last_start = -1;
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            json_error_t err;
            json_t *j = json_loads(line, 0, &err);
            if (!j) fail_msg("not JSON: %.300s", line);
            json_t *tr = json_object_get(j, "trace"), *st = json_object_get(j, "stats");
            if (tr) {
                ASSERT_EQ(stats, 0);
                traces++;
                double s0 = json_number_value(json_object_get(tr, "start_us"));
                ASSERT_TRUE(s0 >= last_start);
                last_start = s0;
                ASSERT_TRUE(json_number_value(json_object_get(tr, "latency_us")) > 0);
                const char *type = json_string_value(json_object_get(tr, "type"));
                ASSERT_NOT_NULL(type);
                ASSERT_NOT_NULL(json_string_value(json_object_get(tr, "address")));
                ASSERT_STR_EQ(json_string_value(json_object_get(tr, "host")), "host1");
                const char *link = json_string_value(json_object_get(tr, "link"));
                ASSERT_STR_EQ(link, strcmp(type, "get_read_version") ? "client-storage" : "client-coordinator");
                ASSERT_TRUE(jpath(tr, "port", NULL, NULL) > 0);
                if (!strcmp(type, "get_mapped_range")) ASSERT_EQ(jpath(tr, "secondaries_local", NULL, NULL) > 0, 1);
                sent += jpath(tr, "bytes_sent", NULL, NULL);
                recv += jpath(tr, "bytes_received", NULL, NULL);
            } else if (st) {
                stats++;
                json_t *net = json_object_get(st, "net");
                ASSERT_EQ(jpath(net, "requests", "total", NULL), (uint64_t)traces);
                ASSERT_EQ(jpath(net, "requests", "by_link", "client_coordinator"), 1);
                ASSERT_EQ(jpath(net, "requests", "by_type", "get_read_version"), 1);
                ASSERT_EQ(jpath(net, "bytes", "client_storage", "sent") +
                              jpath(net, "bytes", "client_coordinator", "sent"),
                          sent);
                ASSERT_EQ(jpath(net, "bytes", "client_storage", "received") +
                              jpath(net, "bytes", "client_coordinator", "received"),
                          recv);
                ASSERT_TRUE(jpath(net, "round_trips", "critical", NULL) >= 2);
                ASSERT_EQ(jpath(net, "bytes", "storage_storage", "sent"), 0);
            } else {
                ASSERT_EQ(traces, 0);
                rows++;
            }
            json_decref(j);
        }
        ASSERT_EQ(rows, 20);
        ASSERT_EQ(stats, 1);
        ASSERT_TRUE(traces >= 2);
        free(out);
    }
    rl_test_cluster_stop(&c);
}

/* The rows of a full price_idx scan by method m on url: their index keys and records' packed
 * bytes, one line each, in out; the counters in k. */
static void scan_rows(const char *url, rl_fetch_method m, rl_buf *out, rl_query_counters *k) {
    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, url, NULL, 0, RL__TOOL_READ_ONLY));
    rl_txn *txn;
    rl_cursor *c;
    const rl_query_row *row;
    rl_query_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.fetch = m;
    ASSERT_OK(rl_txn_begin(t.db, &txn));
    ASSERT_OK(rl_cursor_open(t.s, txn, "price_idx", &o, &c));
    int rc;
    rl__buf_reset(out);
    while ((rc = rl_cursor_next(c, &row)) == RL_OK && row) {
        ASSERT_NOT_NULL(row->record);
        rl__buf_append(out, row->index_key, row->index_key_len);
        rl__buf_append_byte(out, '|');
        rl__buf_append(out, row->pk, row->pk_len);
        rl__buf_append_byte(out, '\n');
    }
    ASSERT_OK(rc);
    ASSERT_OK(rl__buf_error(out));
    rl_cursor_get_counters(c, k);
    rl_cursor_free(c);
    rl_txn_free(txn);
    rl__tool_close(&t);
}

TEST(trace_1_5_early_entries) {
    enum { ROWS = 30 };
    static rl_test_cluster c;
    rl__cluster_up_opts o = {.n_storage = 1, .delay_us = 20000};
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    load_n(c.url, "", ROWS);
    char url[4400];
    static const char *const params[] = {"?chunk=1&window=1", "?stream=0", ""};
    rl_buf rows[4];
    rl_query_counters k[4];
    for (int i = 0; i < 4; i++) {
        rl__buf_init(&rows[i]);
        snprintf(url, sizeof url, "%s%s", c.url, params[i < 3 ? i : 2]);
        scan_rows(url, i < 3 ? RL_FETCH_USE_REMOTE_FETCH : RL_FETCH_SCAN_AND_FETCH, &rows[i], &k[i]);
        print_message("trace-1.5: %s %s: %llu index entries, entries_early %llu\n", i < 3 ? "remote" : "scan",
                      params[i < 3 ? i : 2], (unsigned long long)k[i].index_entries_read,
                      (unsigned long long)k[i].entries_early);
    }
    ASSERT_EQ(k[0].index_entries_read, ROWS); /* one page */
    ASSERT_TRUE(k[0].entries_early >= 1 && k[0].entries_early <= ROWS - 1);
    ASSERT_EQ(k[1].entries_early, 0);
    ASSERT_EQ(k[3].entries_early, 0);
    for (int i = 1; i < 4; i++) ASSERT_MEM_EQ(rows[0].data, rows[0].len, rows[i].data, rows[i].len);
    ASSERT_EQ(rows[0].len > 0, 1);
    for (int i = 0; i < 4; i++) rl__buf_release(&rows[i]);
    rl_test_cluster_stop(&c);
}

TEST(trace_1_6_read_ahead_after_early_entries) {
    enum { ROWS = 600 };
    static rl_test_cluster c;
    rl__cluster_up_opts o = {.n_storage = 1, .delay_us = 1000};
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    char *out;
    int rc = rl_test_rl(&out, "load --db %s --count %d --padding 40000 --seed 7", c.url, ROWS);
    if (rc) fail_msg("rl load failed (%d): %s", rc, out);
    free(out);
    rl__tool t;
    ASSERT_OK(rl__tool_open(&t, c.url, NULL, 0, RL__TOOL_READ_ONLY));
    rl_txn *txn;
    rl_cursor *cur;
    const rl_query_row *row;
    rl_query_options qo;
    memset(&qo, 0, sizeof qo);
    qo.size = sizeof qo;
    qo.fetch = RL_FETCH_USE_REMOTE_FETCH;
    qo.limit = ROWS;
    ASSERT_OK(rl_txn_begin(t.db, &txn));
    ASSERT_OK(rl_cursor_open(t.s, txn, "price_idx", &qo, &cur));
    int n = 0;
    while ((rc = rl_cursor_next(cur, &row)) == RL_OK && row) n++;
    ASSERT_OK(rc);
    ASSERT_EQ(n, ROWS);
    rl_query_counters k;
    rl_cursor_get_counters(cur, &k);
    print_message("trace-1.6: %d rows in %llu mapped pages, entries_early %llu\n", n,
                  (unsigned long long)k.mapped_range_requests, (unsigned long long)k.entries_early);
    ASSERT_TRUE(k.entries_early > 0);
    ASSERT_EQ(k.mapped_range_requests, 3);
    rl_cursor_free(cur);
    rl_txn_free(txn);
    rl__tool_close(&t);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(trace_1_1_one_server), T(trace_1_2_records_elsewhere), T(trace_1_3_embedded_zero), T(trace_1_4_cli),
             T(trace_1_5_early_entries), T(trace_1_6_read_ahead_after_early_entries))
