/* test_mapped_stream.c — streamed mapped reads (GET_MAPPED_STREAM, docs/protocol.md "Streamed
 * mapped reads", docs/design.md §8.4) against real clusters: the same entries whatever the chunk
 * and window sizes (tiny ones cross every boundary) and as a scan then fetch of each record; the
 * secondaries counted are the ones returned; a read abandoned mid-stream (what closing a cursor
 * does: its future is freed) cancels the stream on the server; a storage server killed with
 * kill -9 mid-stream fails the read over to the other member of its team; transaction_too_old met
 * mid-stream reaches the caller as the read's error; a client that does not credit its chunks
 * holds the server to the window (the server's own counters); RL_MAPPED_OMIT_INDEX whole and
 * streamed (stream-1.7); a stream's entries reach the read's future as they arrive (stream-1.10).
 *
 * Data: index entries ("i", price, pk) -> "" and records ("r", pk, sub) with 0-3 keys of 1 byte
 * to 30 KB (stream-1.1, seeded: RL_SEED=N replays), or one key of a fixed size (the others). The
 * slow tests inject a 20 ms one-way delay between the client and the servers so that a stream
 * with a one-byte window (one chunk in flight, each waiting for its credit) lasts seconds: the
 * test acts while it runs, and every wait is a bounded poll on a STATUS counter or a future.
 */
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "mapped_read.h"
#include "kv/cluster/cluster.h"
#include "kv/kv_int.h"
#include "kv/kv_stats.h"
#include "net/frame.h"
#include "net_fixture.h"
#include "net/proto.h"
#include "test.h"
#include "tuple/tuple.h"

#define MAXPK 150
#define ROUNDS 40

static rl_test_cluster g_cluster; /* static: the exit hook stops it after a failed assertion */

typedef struct {
    int present[MAXPK + 1];
    int price[MAXPK + 1];
    int nsub[MAXPK + 1];
} model;

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint16_t port_of(rl_test_cluster *c, uint32_t id) {
    int pid = 0;
    uint16_t port = 0;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__cluster_pid(c->dir, id, &pid, &port, &msg));
    return port;
}

/* Wait (at most ms) until STATUS field of server id is at least want; returns its last value. */
static long long wait_status_at_least(rl_test_cluster *c, uint32_t id, const char *field, long long want, int ms) {
    int64_t end = mono_ms() + ms;
    long long v = -1;
    for (;;) {
        v = rl_test_status_num(c, port_of(c, id), field);
        if (v >= want || mono_ms() >= end) return v;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
}

/* Load n index entries and their records: random (rng non-NULL: 0-3 keys, sizes 1 to 30,000
 * bytes) or one key of size bytes each, price = pk. In transactions of about 2 MB. */
static void load(rl_db *db, model *m, uint64_t *rng, int n, int size) {
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    memset(m, 0, sizeof *m);
    rl_txn *t = NULL;
    long bytes = 0;
    for (int pk = 1; pk <= n; pk++) {
        if (!t) ASSERT_OK(rl_txn_begin(db, &t));
        if (rng && rl_test_rand_below(rng, 5) == 0) continue; /* no index entry */
        m->present[pk] = 1;
        m->price[pk] = rng ? (int)rl_test_rand_below(rng, 50) : pk;
        m->nsub[pk] = rng ? (int)rl_test_rand_below(rng, 4) : 1;
        pack_index(&k, m->price[pk], pk);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, "", 0));
        for (int s = 0; s < m->nsub[pk]; s++) {
            pack_record(&k, pk, s);
            size_t vl =
                rng ? (rl_test_rand_below(rng, 8) == 0 ? 30000 : 1 + rl_test_rand_below(rng, 300)) : (size_t)size;
            rl__buf_reset(&v);
            for (size_t i = 0; i < vl; i++) rl__buf_append_byte(&v, (uint8_t)('a' + (pk + s + i) % 26));
            ASSERT_OK(rl_txn_set(t, k.data, k.len, v.data, v.len));
            bytes += (long)vl;
        }
        if (bytes > (2L << 20) || pk == n) {
            rl_future *f = rl_txn_commit(t);
            ASSERT_OK(rl_future_wait(f));
            rl_future_free(f);
            rl_txn_free(t);
            t = NULL;
            bytes = 0;
        }
    }
    if (t) {
        rl_future *f = rl_txn_commit(t);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
        rl_txn_free(t);
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
}

/* The entries' records read back one by one (scan, then fetch each record: SCAN_AND_FETCH's
 * reads) in transaction t: each entry's rows must be its record's. */
static void same_as_fetch(rl_txn *t, const rl_mapped_keyvalue *e, int n, const char *what) {
    for (int i = 0; i < n; i++) {
        rl_future *f =
            rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(e[i].begin, e[i].begin_len),
                             RL_FIRST_GREATER_OR_EQUAL(e[i].end, e[i].end_len), 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
        ASSERT_OK(rl_future_wait(f));
        const rl_keyvalue *kv;
        int nk, more;
        ASSERT_OK(rl_future_get_keyvalue_array(f, &kv, &nk, &more));
        if (nk != e[i].n_kvs) fail_msg("%s: entry %d has %d rows, its record %d", what, i, e[i].n_kvs, nk);
        for (int j = 0; j < nk; j++) {
            ASSERT_MEM_EQ(kv[j].key, kv[j].key_len, e[i].kvs[j].key, e[i].kvs[j].key_len);
            ASSERT_MEM_EQ(kv[j].value, kv[j].value_len, e[i].kvs[j].value, e[i].kvs[j].value_len);
        }
        rl_future_free(f);
    }
}

static void open_url(rl_test_cluster *c, const char *params, rl_db **out) {
    char url[4400];
    snprintf(url, sizeof url, "%s%s", c->url, params);
    ASSERT_OK(rl_db_open(url, NULL, out));
}

/* stream-1.1: whole replies (stream=0), tiny chunks and windows (chunk=1&window=1: an entry per
 * chunk, one chunk in flight), small ones and the defaults return the same entries over random
 * bounds, directions, limits, byte targets and strategies, with records local and remote to the
 * index's server; and the same rows as a scan then fetch of each record. */
TEST(stream_1_1_equivalence) {
    rl_test_cluster *c = &g_cluster;
    /* ("i", ...) and ("r", 1..69) on storage 1; ("r", 70..) on storage 2. */
    const char *keys[] = {"\\x02j", "\\x02r\\x00\\x15\\x46"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.split = keys;
    o.n_split = 2;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    static const char *const params[] = {"?stream=0", "?chunk=1&window=1", "?chunk=700&window=3000", ""};
    enum { N_DB = 4 };
    rl_db *db[N_DB];
    for (int i = 0; i < N_DB; i++) open_url(c, params[i], &db[i]);
    uint64_t rng = rl_test_seed();
    model m;
    load(db[0], &m, &rng, MAXPK, 0);
    long long chunks0 = rl_test_status_num(c, port_of(c, 1), "stream_chunks");
    for (int round = 0; round < ROUNDS; round++) {
        int lo = (int)rl_test_rand_below(&rng, 50), hi = lo + 1 + (int)rl_test_rand_below(&rng, 50);
        int rev = (int)rl_test_rand_below(&rng, 2);
        int limit = rl_test_rand_below(&rng, 3) == 0 ? 0 : 1 + (int)rl_test_rand_below(&rng, 60);
        int target = rl_test_rand_below(&rng, 3) == 0 ? 2000 + (int)rl_test_rand_below(&rng, 60000) : 0;
        int strat = (int)rl_test_rand_below(&rng, 3);
        int fl = (rev ? RL_REVERSE : 0) | (strat == 1 ? RL_MAPPED_INDIVIDUAL : strat == 2 ? RL_MAPPED_GROUPED : 0);
        rl_txn *t[N_DB];
        rl_future *f[N_DB];
        const rl_mapped_keyvalue *e[N_DB];
        int n[N_DB], more[N_DB];
        for (int i = 0; i < N_DB; i++) {
            ASSERT_OK(rl_txn_begin(db[i], &t[i]));
            f[i] = mapped(t[i], lo, hi, limit, target, fl);
        }
        for (int i = 0; i < N_DB; i++) {
            ASSERT_OK(rl_future_wait(f[i]));
            ASSERT_OK(rl_future_get_mapped_keyvalue_array(f[i], &e[i], &n[i], &more[i]));
        }
        int want = 0;
        for (int pk = 1; pk <= MAXPK; pk++) want += m.present[pk] && m.price[pk] >= lo && m.price[pk] < hi;
        for (int i = 0; i < N_DB; i++) {
            char what[200];
            snprintf(what, sizeof what, "round %d (prices [%d, %d), %s, limit %d, target %d, strategy %d) %s", round,
                     lo, hi, rev ? "reverse" : "forward", limit, target, strat, params[i]);
            if (i > 0) same_entries(e[0], n[0], more[0], e[i], n[i], more[i], target != 0, what);
            if (limit == 0 && target == 0) ASSERT_EQ(n[i], want);
            else ASSERT_TRUE(n[i] <= want && (n[i] > 0 || want == 0));
            if (limit > 0 && target == 0) ASSERT_EQ(n[i], limit < want ? limit : want);
            same_as_fetch(t[i], e[i], n[i], what);
        }
        for (int i = 0; i < N_DB; i++) {
            rl_future_free(f[i]);
            rl_txn_free(t[i]);
        }
    }
    /* The streams ran, an entry per chunk at least for the tiny handle's reads. */
    long long chunks = rl_test_status_num(c, port_of(c, 1), "stream_chunks") - chunks0;
    ASSERT_TRUE(chunks >= ROUNDS);
    ASSERT_TRUE(rl_test_status_num(c, port_of(c, 1), "streams") >= 3 * ROUNDS);
    /* Never more outstanding than the largest window (the defaults': 4 MiB). */
    ASSERT_TRUE(rl_test_status_num(c, port_of(c, 1), "stream_unacked_max") <= (long long)RL_CLUSTER_STREAM_WINDOW);
    for (int i = 0; i < N_DB; i++) rl_db_close(db[i]);
    rl_test_cluster_stop(c);
}

/* stream-1.2: secondaries_local counts the secondaries a reply carries — on one server, reads cut
 * by a byte target (pages of fewer entries than their batch) add exactly their entries to the
 * server's secondaries_local, whole and streamed, individual and grouped. */
TEST(stream_1_2_counters) {
    rl_test_cluster *c = &g_cluster;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db[2];
    open_url(c, "?stream=0", &db[0]);
    open_url(c, "", &db[1]);
    model m;
    load(db[0], &m, NULL, 100, 20000);
    uint16_t port = port_of(c, 1);
    static const int flags[] = {0, RL_MAPPED_INDIVIDUAL, RL_MAPPED_GROUPED};
    static const int targets[] = {50000, 300000, 0};
    for (int d = 0; d < 2; d++)
        for (int fi = 0; fi < 3; fi++)
            for (int ti = 0; ti < 3; ti++) {
                long long before = rl_test_status_num(c, port, "secondaries_local");
                long long remote = rl_test_status_num(c, port, "secondaries_remote");
                rl_txn *t;
                ASSERT_OK(rl_txn_begin(db[d], &t));
                rl_future *f = mapped(t, 0, 1000, 0, targets[ti], flags[fi]);
                ASSERT_OK(rl_future_wait(f));
                const rl_mapped_keyvalue *e;
                int n, more;
                ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
                if (targets[ti]) ASSERT_TRUE(n < 100 && more);
                else ASSERT_EQ(n, 100);
                long long after = rl_test_status_num(c, port, "secondaries_local");
                if (after - before != n)
                    fail_msg("%s, flags %d, target %d: %d entries returned, secondaries_local grew by %lld",
                             d ? "streamed" : "whole", flags[fi], targets[ti], n, after - before);
                ASSERT_EQ(rl_test_status_num(c, port, "secondaries_remote"), remote);
                rl_future_free(f);
                rl_txn_free(t);
            }
    for (int d = 0; d < 2; d++) rl_db_close(db[d]);
    rl_test_cluster_stop(c);
}

/* Start a streamed read of every entry on db (chunk=1&window=1 and a 20 ms delay: seconds long)
 * in a new transaction. */
static rl_future *start_slow_read(rl_db *db, rl_txn **out_t) {
    ASSERT_OK(rl_txn_begin(db, out_t));
    return mapped(*out_t, 0, 1000, 0, 0, 0);
}

/* stream-1.3: a read abandoned mid-stream (its future freed, as a closed cursor frees its page's)
 * cancels the stream on the server: the server counts the cancel, sends no more chunks, and its
 * worker is free again. */
TEST(stream_1_3_abandoned) {
    rl_test_cluster *c = &g_cluster;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    o.delay_us = 20000;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db, *slow;
    open_url(c, "", &db);
    open_url(c, "?chunk=1&window=1", &slow);
    model m;
    load(db, &m, NULL, 150, 20000); /* 150 chunks of 40 ms: 6 s */
    rl_txn *t;
    rl_future *f = start_slow_read(slow, &t);
    ASSERT_TRUE(wait_status_at_least(c, 1, "stream_chunks", 2, 20000) >= 2);
    ASSERT_FALSE(rl_future_is_ready(f));
    rl_future_free(f); /* what rl_cursor_close does to its page's read */
    ASSERT_EQ(wait_status_at_least(c, 1, "stream_cancels", 1, 20000), 1);
    long long sent = rl_test_status_num(c, port_of(c, 1), "stream_chunks");
    ASSERT_TRUE(sent < 150);
    int64_t end = mono_ms() + 20000;
    while (rl_test_status_num(c, port_of(c, 1), "mapped_running") != 0 && mono_ms() < end) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    ASSERT_EQ(rl_test_status_num(c, port_of(c, 1), "mapped_running"), 0);
    ASSERT_EQ(rl_test_status_num(c, port_of(c, 1), "stream_chunks"), sent);
    rl_txn_free(t);
    /* The database still reads. */
    rl_txn *t2;
    ASSERT_OK(rl_txn_begin(db, &t2));
    rl_future *f2 = mapped(t2, 0, 1000, 0, 0, 0);
    ASSERT_OK(rl_future_wait(f2));
    const rl_mapped_keyvalue *e;
    int n, more;
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f2, &e, &n, &more));
    ASSERT_EQ(n, 150);
    rl_future_free(f2);
    rl_txn_free(t2);
    rl_db_close(slow);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* stream-1.4: the storage server streaming a read is killed (kill -9 by pid) mid-stream: the
 * read fails over to the other member of the team and returns every entry, whole and right. */
TEST(stream_1_4_killed) {
    rl_test_cluster *c = &g_cluster;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.replication = 2;
    o.delay_us = 20000;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db, *slow;
    open_url(c, "", &db);
    open_url(c, "?chunk=1&window=1", &slow);
    model m;
    load(db, &m, NULL, 60, 20000); /* 60 chunks of 40 ms: 2.4 s, well inside the 5 s window */
    rl_txn *t;
    rl_future *f = start_slow_read(slow, &t);
    uint32_t victim = 0;
    int64_t end = mono_ms() + 20000;
    while (!victim && mono_ms() < end) {
        for (uint32_t id = 1; id <= 2 && !victim; id++)
            if (rl_test_status_num(c, port_of(c, id), "stream_chunks") >= 2) victim = id;
    }
    ASSERT_TRUE(victim != 0);
    ASSERT_FALSE(rl_future_is_ready(f));
    int pid = rl_test_cluster_pid(c, victim);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    ASSERT_OK(rl_future_wait(f));
    const rl_mapped_keyvalue *e;
    int n, more;
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
    ASSERT_EQ(n, 60);
    ASSERT_EQ(more, 0);
    for (int i = 0; i < n; i++) {
        ASSERT_EQ(e[i].n_kvs, 1);
        ASSERT_EQ(e[i].kvs[0].value_len, 20000);
    }
    rl_txn *t2; /* the data does not change: a fresh transaction (t may be near the window's end) */
    ASSERT_OK(rl_txn_begin(db, &t2));
    same_as_fetch(t2, e, n, "after the kill");
    rl_txn_free(t2);
    ASSERT_TRUE(rl_test_status_num(c, port_of(c, 3 - victim), "streams") >= 1);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(slow);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* stream-1.5: versions pass the servers' window (300 ms) while a stream runs: its next batch
 * fails with transaction_too_old, which the read returns (no partial result), and the
 * transaction's retry (rl_txn_on_error) reads everything. */
TEST(stream_1_5_too_old) {
    rl_test_cluster *c = &g_cluster;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    o.delay_us = 20000;
    o.window_versions = 300000;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db, *slow;
    open_url(c, "", &db);
    open_url(c, "?chunk=1&window=1", &slow);
    model m;
    load(db, &m, NULL, 120, 20000); /* 2.4 MB: three batches of about a MiB */
    rl_txn *t;
    rl_future *f = start_slow_read(slow, &t);
    int64_t end = mono_ms() + 60000;
    int writes = 0;
    while (!rl_future_is_ready(f) && mono_ms() < end) { /* commits move the versions on */
        rl_txn *w;
        ASSERT_OK(rl_txn_begin(db, &w));
        ASSERT_OK(rl_txn_set(w, "w", 1, "x", 1));
        rl_future *cf = rl_txn_commit(w);
        ASSERT_OK(rl_future_wait(cf));
        rl_future_free(cf);
        rl_txn_free(w);
        writes++;
    }
    ASSERT_TRUE(rl_future_is_ready(f));
    ASSERT_RC(rl_future_wait(f), RL_E_TRANSACTION_TOO_OLD);
    ASSERT_TRUE(rl_test_status_num(c, port_of(c, 1), "stream_chunks") >= 2); /* it failed mid-stream */
    rl_future *oe = rl_txn_on_error(t, RL_E_TRANSACTION_TOO_OLD);
    ASSERT_OK(rl_future_wait(oe));
    rl_future_free(oe);
    rl_future_free(f);
    rl_txn_free(t);
    ASSERT_OK(rl_txn_begin(db, &t));
    f = mapped(t, 0, 1000, 0, 0, 0);
    ASSERT_OK(rl_future_wait(f));
    const rl_mapped_keyvalue *e;
    int n, more;
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
    ASSERT_EQ(n, 120);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(slow);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* ---- A client that does not credit (raw protocol) ------------------------------------------- */

static void send_msg(int fd, uint64_t id, const rl__msg *m) {
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__msg_frame_encode(&b, id, m, NULL));
    ASSERT_EQ(rl_test_raw_send(fd, b.data, b.len), 0);
    rl__buf_release(&b);
}

/* stream-1.6: a client that stops crediting: the server stops sending at the window (64 KiB of
 * chunks of about 16 KiB) and waits (its streams_waiting gauge), having sent no more than the
 * window (stream_unacked_max); the client then credits each chunk it reads and gets every entry,
 * the window holding to the end. */
TEST(stream_1_6_slow_consumer) {
    rl_test_cluster *c = &g_cluster;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db;
    open_url(c, "", &db);
    model m;
    load(db, &m, NULL, 50, 20000);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl_future *vf = rl_txn_get_read_version(t);
    int64_t rv;
    ASSERT_OK(rl_future_wait(vf));
    ASSERT_OK(rl_future_get_int64(vf, &rv));
    rl_future_free(vf);
    rl_txn_free(t);

    const uint32_t window = 64u << 10;
    int fd = rl_test_raw_open("127.0.0.1", port_of(c, 1), &c->key.auth);
    rl__msg m1;
    memset(&m1, 0, sizeof m1);
    m1.type = RL_MSG_HELLO;
    m1.u.hello_req.magic = RL_PROTOCOL_MAGIC;
    m1.u.hello_req.protocol_version = RL_PROTOCOL_VERSION;
    m1.u.hello_req.role = RL_ROLE_CLIENT;
    m1.u.hello_req.host = (const uint8_t *)"client";
    m1.u.hello_req.host_len = 6;
    send_msg(fd, 1, &m1);
    size_t cap = 8u << 20;
    uint8_t *payload = malloc(cap);
    ASSERT_NOT_NULL(payload);
    rl__frame_header h;
    ASSERT_OK(rl_test_raw_recv_frame(fd, &h, payload, cap, 5000));
    ASSERT_EQ(h.type, RL_MSG_HELLO);

    rl_buf b, e, mp;
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__buf_init(&mp);
    pack_index(&b, 0, 0);
    pack_index(&e, 1000, 0);
    mapper(&mp);
    memset(&m1, 0, sizeof m1);
    m1.type = RL_MSG_GET_MAPPED_STREAM;
    rl__msg_get_mapped_stream_req *r = &m1.u.get_mapped_stream_req;
    r->r.version = (rl__version)rv;
    r->r.begin = RL_FIRST_GREATER_OR_EQUAL(b.data, b.len);
    r->r.end = RL_FIRST_GREATER_OR_EQUAL(e.data, e.len);
    r->r.mapper = mp.data;
    r->r.mapper_len = (uint32_t)mp.len;
    r->chunk_bytes = 16u << 10;
    r->window_bytes = window;
    send_msg(fd, 2, &m1);

    /* The server fills the window and waits. */
    ASSERT_EQ(wait_status_at_least(c, 1, "streams_waiting", 1, 20000), 1);
    long long sent = rl_test_status_num(c, port_of(c, 1), "stream_bytes");
    ASSERT_TRUE(sent > 0 && sent <= window);
    ASSERT_TRUE(rl_test_status_num(c, port_of(c, 1), "stream_unacked_max") <= window);
    long long got = 0;
    int entries = 0, done = 0;
    rl_arena a;
    rl__arena_init(&a, 0);
    while (got < sent) { /* what was sent is on its way */
        ASSERT_OK(rl_test_raw_recv_frame(fd, &h, payload, cap, 5000));
        ASSERT_EQ(h.type, RL_MSG_MAPPED_CHUNK);
        ASSERT_EQ(h.id, 2);
        got += h.payload_len;
        rl__msg_mapped_chunk ch;
        ASSERT_OK(rl__msg_mapped_chunk_decode(payload, h.payload_len, &a, &ch, NULL));
        entries += (int)ch.n_entries;
    }
    ASSERT_EQ(got, sent);
    ASSERT_EQ(rl_test_status_num(c, port_of(c, 1), "streams_waiting"), 1); /* still waiting */
    /* Credit what arrived, then each chunk as it comes. */
    memset(&m1, 0, sizeof m1);
    m1.type = RL_MSG_MAPPED_CREDIT;
    m1.u.mapped_credit.bytes = (uint32_t)got;
    send_msg(fd, 2, &m1);
    while (!done) {
        ASSERT_OK(rl_test_raw_recv_frame(fd, &h, payload, cap, 10000));
        ASSERT_EQ(h.id, 2);
        if (h.type == RL_MSG_MAPPED_CHUNK && h.flags == 0) {
            rl__msg_mapped_chunk ch;
            ASSERT_OK(rl__msg_mapped_chunk_decode(payload, h.payload_len, &a, &ch, NULL));
            for (uint32_t i = 0; i < ch.n_entries; i++) {
                ASSERT_EQ(ch.entries[i].n_kvs, 1);
                ASSERT_EQ(ch.entries[i].kvs[0].value_len, 20000);
            }
            entries += (int)ch.n_entries;
            m1.u.mapped_credit.bytes = h.payload_len;
            send_msg(fd, 2, &m1);
        } else {
            ASSERT_EQ(h.type, RL_MSG_GET_MAPPED_STREAM);
            ASSERT_EQ(h.flags, RL_FRAME_REPLY);
            rl__msg_get_mapped_stream_reply fin;
            ASSERT_OK(rl__msg_get_mapped_stream_reply_decode(payload, h.payload_len, &a, &fin, NULL));
            entries += (int)fin.n_entries;
            ASSERT_EQ(fin.more, 0);
            ASSERT_EQ(fin.stats.secondaries_local, 50);
            done = 1;
        }
        rl__arena_reset(&a);
    }
    ASSERT_EQ(entries, 50);
    ASSERT_TRUE(rl_test_status_num(c, port_of(c, 1), "stream_unacked_max") <= window);
    ASSERT_EQ(rl_test_status_num(c, port_of(c, 1), "streams_waiting"), 0);
    rl__arena_release(&a);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__buf_release(&mp);
    free(payload);
    close(fd);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* stream-1.7: RL_MAPPED_OMIT_INDEX over whole replies (stream=0) and streams (tiny chunks, small
 * ones, the defaults), both strategies, with records local and remote to the index's server: the
 * same entries, more and secondaries as without it; an omitted entry has an empty index and
 * index_omitted_len its bytes, and is never the first or last. A whole reply (the index is on one
 * server) omits every other entry; a stream keeps at most its first and each batch's last (batches
 * of multiples of 10 entries). */
TEST(stream_1_7_omit_index) {
    rl_test_cluster *c = &g_cluster;
    const char *keys[] = {"\\x02j", "\\x02r\\x00\\x15\\x46"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.split = keys;
    o.n_split = 2;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    static const char *const params[] = {"?stream=0", "?chunk=1&window=1", "?chunk=700&window=3000", ""};
    enum { N_DB = 4 };
    rl_db *db[N_DB];
    for (int i = 0; i < N_DB; i++) open_url(c, params[i], &db[i]);
    uint64_t rng = rl_test_seed() ^ 0x6f6d6974;
    model m;
    load(db[0], &m, &rng, MAXPK, 0);
    long omitted = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int lo = (int)rl_test_rand_below(&rng, 50), hi = lo + 1 + (int)rl_test_rand_below(&rng, 50);
        int rev = (int)rl_test_rand_below(&rng, 2);
        int limit = rl_test_rand_below(&rng, 3) == 0 ? 0 : 1 + (int)rl_test_rand_below(&rng, 60);
        int target = rl_test_rand_below(&rng, 3) == 0 ? 2000 + (int)rl_test_rand_below(&rng, 60000) : 0;
        int strat = (int)rl_test_rand_below(&rng, 3);
        int fl = (rev ? RL_REVERSE : 0) | (strat == 1 ? RL_MAPPED_INDIVIDUAL : strat == 2 ? RL_MAPPED_GROUPED : 0);
        for (int i = 0; i < N_DB; i++) {
            rl_txn *t;
            ASSERT_OK(rl_txn_begin(db[i], &t));
            rl_future *fa = mapped(t, lo, hi, limit, target, fl);
            rl_future *fb = mapped(t, lo, hi, limit, target, fl | RL_MAPPED_OMIT_INDEX);
            const rl_mapped_keyvalue *a, *b;
            int na, nb, ma, mb;
            ASSERT_OK(rl_future_wait(fa));
            ASSERT_OK(rl_future_wait(fb));
            ASSERT_OK(rl_future_get_mapped_keyvalue_array(fa, &a, &na, &ma));
            ASSERT_OK(rl_future_get_mapped_keyvalue_array(fb, &b, &nb, &mb));
            char what[200];
            snprintf(what, sizeof what, "round %d (prices [%d, %d), %s, limit %d, target %d, strategy %d) %s", round,
                     lo, hi, rev ? "reverse" : "forward", limit, target, strat, params[i]);
            if (na != nb || ma != mb) fail_msg("%s: %d entries, more %d against %d, more %d", what, na, ma, nb, mb);
            /* Whole copies of b's entries, with a's index where b omitted it, compare as a's. */
            rl_mapped_keyvalue *w = na ? malloc((size_t)na * sizeof *w) : NULL;
            int kept = 0;
            for (int j = 0; j < na; j++) {
                ASSERT_EQ(a[j].index_omitted, 0);
                w[j] = b[j];
                if (!b[j].index_omitted) {
                    kept++;
                    ASSERT_EQ(b[j].index_omitted_len, 0);
                    continue;
                }
                if (j == 0 || j == na - 1) fail_msg("%s: entry %d of %d omitted", what, j, na);
                ASSERT_EQ(b[j].index.key_len + b[j].index.value_len, 0);
                ASSERT_EQ(b[j].index_omitted_len, a[j].index.key_len + a[j].index.value_len);
                omitted += b[j].index_omitted_len;
                w[j].index = a[j].index;
                w[j].index_omitted = 0;
                w[j].index_omitted_len = 0;
            }
            same_entries(a, na, ma, w, nb, mb, 0, what);
            free(w);
            if (i == 0 && na >= 2) ASSERT_EQ(kept, 2);
            if (i > 0 && na >= 2 && kept > 2 + (na + 9) / 10) fail_msg("%s: %d of %d entries whole", what, kept, na);
            rl_future_free(fa);
            rl_future_free(fb);
            rl_future *cf = rl_txn_commit(t); /* read-only: the conflict ranges were fine */
            ASSERT_OK(rl_future_wait(cf));
            rl_future_free(cf);
            rl_txn_free(t);
        }
    }
    ASSERT_TRUE(omitted > 0);
    for (int i = 0; i < N_DB; i++) rl_db_close(db[i]);
    rl_test_cluster_stop(c);
}

/* Load index entries 1..n (price = pk) and one record key each of lo..hi bytes (seeded sizes), on
 * db, in transactions of about 2 MB; *total gets the records' value bytes. */
static void load_sized(rl_db *db, model *m, uint64_t *rng, int n, int lo, int hi, long *total) {
    rl_buf k, v;
    rl__buf_init(&k);
    rl__buf_init(&v);
    memset(m, 0, sizeof *m);
    *total = 0;
    rl_txn *t = NULL;
    long bytes = 0;
    for (int pk = 1; pk <= n; pk++) {
        if (!t) ASSERT_OK(rl_txn_begin(db, &t));
        m->present[pk] = 1, m->price[pk] = pk, m->nsub[pk] = 1;
        pack_index(&k, pk, pk);
        ASSERT_OK(rl_txn_set(t, k.data, k.len, "", 0));
        pack_record(&k, pk, 0);
        size_t vl = (size_t)lo + (size_t)rl_test_rand_below(rng, (uint64_t)(hi - lo + 1));
        rl__buf_reset(&v);
        for (size_t i = 0; i < vl; i++) rl__buf_append_byte(&v, (uint8_t)('a' + (pk + i) % 26));
        ASSERT_OK(rl_txn_set(t, k.data, k.len, v.data, v.len));
        bytes += (long)vl, *total += (long)vl;
        if (bytes > (2L << 20) || pk == n) {
            rl_future *f = rl_txn_commit(t);
            ASSERT_OK(rl_future_wait(f));
            rl_future_free(f);
            rl_txn_free(t);
            t = NULL;
            bytes = 0;
        }
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
}

/* stream-1.8: bulk records on other servers (index on storage 1, records of 20-60 KB on 2 and 3:
 * every secondary remote, several grouped batches a page, each round sized from the records seen
 * so far): whole replies and streams with default, small and tiny chunks, individual and
 * grouped, return the same entries over random limits and byte targets, and the same rows as a
 * scan then fetch of each record; a whole grouped stream of every record reads from the peers at
 * most a quarter more than it returns (a round asks for what its batch keeps, not again what an
 * earlier round read and dropped). */
TEST(stream_1_8_grouped_bulk) {
    rl_test_cluster *c = &g_cluster;
    const char *keys[] = {"\\x02j", "\\x02r\\x00\\x15\\x46"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    o.split = keys;
    o.n_split = 2;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    static const char *const params[] = {"?stream=0", "", "?chunk=700&window=3000", "?chunk=1&window=1"};
    enum { N_DB = 4 };
    rl_db *db[N_DB];
    for (int i = 0; i < N_DB; i++) open_url(c, params[i], &db[i]);
    uint64_t rng = rl_test_seed();
    model m;
    long total = 0;
    load_sized(db[0], &m, &rng, MAXPK, 20000, 60000, &total);
    uint16_t port1 = port_of(c, 1);
    for (int round = 0; round < 8; round++) {
        /* round 0: everything, whole and grouped stream, the peers' bytes measured */
        int lo = round ? (int)rl_test_rand_below(&rng, 100) : 0;
        int hi = round ? lo + 1 + (int)rl_test_rand_below(&rng, 100) : 1000;
        int limit = round && rl_test_rand_below(&rng, 2) ? 1 + (int)rl_test_rand_below(&rng, 120) : 0;
        int target = round && rl_test_rand_below(&rng, 2) ? 100000 + (int)rl_test_rand_below(&rng, 3000000) : 0;
        const rl_mapped_keyvalue *e0;
        int n0, more0;
        rl_txn *t0;
        ASSERT_OK(rl_txn_begin(db[0], &t0));
        rl_future *f0 = mapped(t0, lo, hi, limit, target, RL_MAPPED_INDIVIDUAL);
        ASSERT_OK(rl_future_wait(f0));
        ASSERT_OK(rl_future_get_mapped_keyvalue_array(f0, &e0, &n0, &more0));
        for (int i = 0; i < N_DB; i++)
            for (int g = 0; g < 2; g++) {
                char what[200];
                snprintf(what, sizeof what, "round %d (prices [%d, %d), limit %d, target %d) %s %s", round, lo, hi,
                         limit, target, g ? "grouped" : "individual", params[i]);
                if (i == N_DB - 1 && round > 1) continue; /* the tiny chunks: two rounds (slow) */
                long long rx0 = rl_test_status_num(c, port1, "s2s_bytes_received");
                rl_txn *t;
                ASSERT_OK(rl_txn_begin(db[i], &t));
                rl_future *f = mapped(t, lo, hi, limit, target, g ? RL_MAPPED_GROUPED : RL_MAPPED_INDIVIDUAL);
                ASSERT_OK(rl_future_wait(f));
                const rl_mapped_keyvalue *e;
                int n, more;
                ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
                same_entries(e0, n0, more0, e, n, more, target != 0, what);
                same_as_fetch(t, e, n, what);
                long long rx = rl_test_status_num(c, port1, "s2s_bytes_received") - rx0;
                if (round == 0) {
                    ASSERT_EQ(n, MAXPK);
                    for (int k = 0; k < n; k++) ASSERT_FALSE(e[k].served_locally);
                    if (g && i == 1) {
                        print_message("stream-1.8: a grouped stream of %ld record bytes read %lld from the peers\n",
                                      total, rx);
                        if (rx > total + total / 4) fail_msg("%s: %lld bytes from the peers for %ld", what, rx, total);
                    }
                }
                rl_future_free(f);
                rl_txn_free(t);
            }
        rl_future_free(f0);
        rl_txn_free(t0);
    }
    for (int i = 0; i < N_DB; i++) rl_db_close(db[i]);
    rl_test_cluster_stop(c);
}

/* stream-1.9: the storage server a grouped stream reads its remote records from is killed (kill -9
 * by its pid) after the stream's first round (four servers, double replication, the index and
 * the two record shards each on a team of its own; a 20 ms delay and one chunk in flight keep the stream
 * seconds long): the read, retried as a transaction retries (rl_txn_on_error), returns every
 * entry, right, from the surviving members. */
TEST(stream_1_9_peer_killed) {
    rl_test_cluster *c = &g_cluster;
    const char *keys[] = {"\\x02j", "\\x02r\\x00\\x15\\x46"};
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 4;
    o.replication = 2;
    o.split = keys;
    o.n_split = 2;
    o.delay_us = 20000;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *db, *slow;
    open_url(c, "", &db);
    open_url(c, "?chunk=1&window=1", &slow);
    model m;
    uint64_t rng = rl_test_seed();
    long total = 0;
    load_sized(db, &m, &rng, 100, 20000, 30000, &total); /* 2-3 MB: several grouped batches */
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(slow, &t));
    rl_future *f = mapped(t, 0, 1000, 0, 0, RL_MAPPED_GROUPED);
    /* wait until the stream runs on an index server */
    uint32_t reader = 0;
    int64_t end = mono_ms() + 20000;
    while (!reader && mono_ms() < end)
        for (uint32_t id = 1; id <= 2 && !reader; id++)
            if (rl_test_status_num(c, port_of(c, id), "stream_chunks") >= 2) reader = id;
    ASSERT_TRUE(reader != 0);
    ASSERT_FALSE(rl_future_is_ready(f));
    /* the peer the reader's first round read from (the first other member of a record team) */
    uint32_t victim = 0;
    for (uint32_t id = 4; id >= 1 && !victim; id--)
        if (id != reader && rl_test_status_num(c, port_of(c, id), "get_multi_served") > 0) victim = id;
    ASSERT_TRUE(victim != 0);
    long long items = rl_test_status_num(c, port_of(c, victim), "get_multi_items_served");
    print_message("stream-1.9: reader %u, victim %u (%lld items served)\n", reader, victim, items);
    ASSERT_TRUE(items > 0 && items < 100); /* a round read from it, more to come */
    int pid = rl_test_cluster_pid(c, victim);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    const rl_mapped_keyvalue *e = NULL;
    int n = 0, more = 0, rc, tries = 0;
    end = mono_ms() + 60000;
    while ((rc = rl_future_wait(f)) != RL_OK || (rc = rl_future_get_error(f)) != RL_OK) {
        ASSERT_TRUE(mono_ms() < end && ++tries < 50);
        print_message("stream-1.9: try %d: %s, retried\n", tries, rl_error_name(rc));
        rl_future *oe = rl_txn_on_error(t, rc);
        ASSERT_OK(rl_future_wait(oe));
        ASSERT_OK(rl_future_get_error(oe));
        rl_future_free(oe);
        rl_future_free(f);
        f = mapped(t, 0, 1000, 0, 0, RL_MAPPED_GROUPED);
    }
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
    ASSERT_EQ(n, 100);
    ASSERT_EQ(more, 0);
    rl_txn *t2; /* the data does not change: a fresh transaction */
    ASSERT_OK(rl_txn_begin(db, &t2));
    same_as_fetch(t2, e, n, "after the kill");
    rl_txn_free(t2);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(slow);
    rl_db_close(db);
    rl_test_cluster_stop(c);
}

/* stream-1.10: a slow stream's entries (an entry per chunk, each a credit round trip of 40 ms
 * after the one before) reach the read's future as they arrive: rl__future_mapped_wait hands up
 * longer and longer prefixes — the right index keys and records, the earlier ones unchanged —
 * several times before the read completes, and the result then begins with every entry handed
 * up. A read of whole replies (?stream=0) hands up nothing before it completes. */
TEST(stream_1_10_early_entries) {
    enum { ROWS = 40, SIZE = 2000 };
    rl_test_cluster *c = &g_cluster;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    o.delay_us = 20000;
    ASSERT_OK(rl_test_cluster_start(c, &o));
    rl_db *whole, *slow;
    open_url(c, "?stream=0", &whole);
    open_url(c, "?chunk=1&window=1", &slow);
    model m;
    load(whole, &m, NULL, ROWS, SIZE);
    rl_buf k;
    rl__buf_init(&k);
    rl_txn *t;
    rl_future *f = start_slow_read(slow, &t);
    const rl_mapped_keyvalue *pe = NULL, *first = NULL;
    int have = 0, pn = 0, steps = 0;
    while (!rl__future_mapped_wait(f, have, &pe, &pn)) {
        ASSERT_TRUE(pn > have && pn <= ROWS);
        if (!first) first = pe;
        for (int i = have; i < pn; i++) { /* price = pk = i + 1, one record row of SIZE bytes */
            pack_index(&k, i + 1, i + 1);
            ASSERT_MEM_EQ(pe[i].index.key, pe[i].index.key_len, k.data, k.len);
            ASSERT_EQ(pe[i].n_kvs, 1);
            ASSERT_EQ(pe[i].kvs[0].value_len, SIZE);
        }
        ASSERT_TRUE(pe[0].index.key == first[0].index.key); /* handed-up entries never change */
        have = pn;
        steps++;
    }
    print_message("stream-1.10: %d entries handed up in %d steps before the read completed\n", have, steps);
    ASSERT_TRUE(steps >= 2);
    ASSERT_OK(rl_future_get_error(f));
    const rl_mapped_keyvalue *e;
    int n, more;
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
    ASSERT_EQ(n, ROWS);
    ASSERT_FALSE(more);
    for (int i = 0; i < have; i++) {
        ASSERT_MEM_EQ(e[i].index.key, e[i].index.key_len, pe[i].index.key, pe[i].index.key_len);
        ASSERT_TRUE(e[i].kvs[0].value == pe[i].kvs[0].value); /* the same bytes, not a copy */
    }
    rl_future_free(f);
    rl_txn_free(t);
    /* Whole replies: nothing before the end. */
    ASSERT_OK(rl_txn_begin(whole, &t));
    f = mapped(t, 0, 1000, 0, 0, 0);
    ASSERT_EQ(rl__future_mapped_wait(f, 0, &pe, &pn), 1);
    ASSERT_OK(rl_future_get_mapped_keyvalue_array(f, &e, &n, &more));
    ASSERT_EQ(n, ROWS);
    rl_future_free(f);
    rl_txn_free(t);
    rl__buf_release(&k);
    rl_db_close(slow);
    rl_db_close(whole);
    rl_test_cluster_stop(c);
}

RL_TEST_MAIN(T(stream_1_1_equivalence), T(stream_1_2_counters), T(stream_1_3_abandoned), T(stream_1_4_killed),
             T(stream_1_5_too_old), T(stream_1_6_slow_consumer), T(stream_1_7_omit_index), T(stream_1_8_grouped_bulk),
             T(stream_1_9_peer_killed), T(stream_1_10_early_entries))
