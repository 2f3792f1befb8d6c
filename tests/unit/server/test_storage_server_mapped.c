/* test_storage_server_mapped.c — mapped reads on the storage server with local and remote
 * secondaries: two storage servers run in-process (each fed by its own fake coordinator over a
 * real socket, ss_test.h), the index and half of the records on server 1, the other half on
 * server 2, with the boundary inside one record's chunks. Every reply must hold exactly the rows
 * the embedded engine's mapped read (rl__storage_get_mapped_range on one local engine holding
 * all the rows) gives for the same arguments, with served_locally telling where each secondary
 * was read and the stats block counting the storage-to-storage requests and round trips of the
 * strategy. A peer that never answers fails the mapped read with timed_out naming it.
 *
 * Test ids: ssm-1.x.
 */
#include "server/storage_server.h"
#include "storage/mapped.h"
#include "storage/storage.h"
#include "base/bytes.h"
#include "unit/server/ss_test.h"

typedef struct {
    rl__ss *ss;
    pthread_t th;
    int rc;
    char *dir;
} srv;

static void *srv_main(void *arg) {
    srv *s = arg;
    s->rc = rl__ss_run(s->ss);
    return NULL;
}

static void srv_start(srv *s, uint32_t id, uint16_t coord_port, int s2s_timeout_ms) {
    rl__ss_options o;
    memset(&o, 0, sizeof o);
    memset(s, 0, sizeof *s);
    s->dir = rl_test_tmpdir("ssm");
    o.dir = s->dir;
    o.id = id;
    o.coordinator_ip = "127.0.0.1";
    o.coordinator_port = coord_port;
    o.future_wait_ms = 300;
    o.s2s_timeout_ms = s2s_timeout_ms;
    o.no_sync = 1;
    o.auth = sst_auth();
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = rl__ss_new(&o, &s->ss, &err);
    if (rc != RL_OK) fail_msg("rl__ss_new: %s: %s", rl_error_name(rc), rl__errdetail_get(&err));
    ASSERT_EQ(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_stop(srv *s) {
    rl__ss_stop(s->ss);
    pthread_join(s->th, NULL);
    rl__ss_free(s->ss);
    ASSERT_EQ(s->rc, RL_OK);
    rl_test_rmtree(s->dir);
    free(s->dir);
}

/* ---- the data: NREC records of 1-3 chunks, an index on a price ---- */

#define NREC 100
#define SPLIT_PK 50 /* the shard boundary is ("st", 1, 50, 1): inside record 50 */

static void record_key(rl_buf *b, int64_t pk, int64_t suffix, int with_suffix) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "st", 2);
    rl__tuple_pack_int(&p, 1);
    rl__tuple_pack_int(&p, pk);
    if (with_suffix) rl__tuple_pack_int(&p, suffix);
}

static void index_key(rl_buf *b, int64_t price, int64_t pk) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "st", 2);
    rl__tuple_pack_string(&p, "idx", 3);
    rl__tuple_pack_int(&p, price);
    rl__tuple_pack_int(&p, pk);
}

static int64_t price_of(int64_t pk) { return (pk * 37) % 41; }
static int chunks_of(int64_t pk) { return 1 + (int)(pk % 3); }

/* Every mutation of the dataset (keys and values in bufs, which the caller releases). */
typedef struct {
    rl_buf k[NREC * 4 + NREC], v[NREC * 4 + NREC];
    rl__mutation m[NREC * 4 + NREC];
    int n;
} dataset;

static void dataset_build(dataset *d) {
    d->n = 0;
    for (int64_t pk = 0; pk < NREC; pk++) {
        for (int s = 0; s < chunks_of(pk); s++) {
            rl__buf_init(&d->k[d->n]);
            rl__buf_init(&d->v[d->n]);
            record_key(&d->k[d->n], pk, s, 1);
            rl__buf_printf(&d->v[d->n], "record %lld chunk %d ", (long long)pk, s);
            for (int i = 0; i < (int)((pk * 13 + s * 7) % 200); i++)
                rl__buf_append_byte(&d->v[d->n], (uint8_t)('a' + i % 26));
            d->n++;
        }
        rl__buf_init(&d->k[d->n]);
        rl__buf_init(&d->v[d->n]);
        index_key(&d->k[d->n], price_of(pk), pk);
        d->n++;
    }
    for (int i = 0; i < d->n; i++)
        d->m[i] = (rl__mutation){RL_MUT_SET, d->k[i].data, (uint32_t)d->k[i].len, d->v[i].data, (uint32_t)d->v[i].len};
}

static void dataset_release(dataset *d) {
    for (int i = 0; i < d->n; i++) {
        rl__buf_release(&d->k[i]);
        rl__buf_release(&d->v[i]);
    }
}

static rl_buf g_split;

/* The mutations of d that fall in [lo, hi) (hi NULL: no upper bound) into out. */
static int filter(const dataset *d, const rl_buf *lo, const rl_buf *hi, rl__mutation *out) {
    int n = 0;
    for (int i = 0; i < d->n; i++) {
        const rl__mutation *m = &d->m[i];
        if (lo && rl__bytes_cmp(m->p1, m->len1, lo->data, lo->len) < 0) continue;
        if (hi && rl__bytes_cmp(m->p1, m->len1, hi->data, hi->len) >= 0) continue;
        out[n++] = *m;
    }
    return n;
}

/* The two servers and their coordinators, loaded with the dataset at version 10. */
typedef struct {
    sst_fc f1, f2;
    srv s1, s2;
    dataset d;
    rl__storage *local; /* the embedded reference: every row */
    rl__msg_server servers[3];
    rl__msg_shard shards[3];
    uint32_t team0[1], team1[1], team2[1];
    rl__keyrange r1[1], r2[1];
} cluster2;

static rl__mutation g_part[NREC * 5];

static void cluster2_up_map(cluster2 *c, uint16_t fake_port2, int s2s_timeout_ms, int n_servers1) {
    memset(c, 0, sizeof *c);
    rl__buf_init(&g_split);
    record_key(&g_split, SPLIT_PK, 1, 1);
    sst_fc_init(&c->f1);
    sst_fc_init(&c->f2);
    srv_start(&c->s1, 1, c->f1.port, s2s_timeout_ms);
    if (!fake_port2) srv_start(&c->s2, 2, c->f2.port, s2s_timeout_ms);
    uint16_t p2 = fake_port2 ? fake_port2 : rl__ss_port(c->s2.ss);
    c->servers[0] = (rl__msg_server){
        0, RL_ROLE_COORDINATOR, (const uint8_t *)"127.0.0.1", 9, c->f1.port, (const uint8_t *)"host1", 5, 1};
    c->servers[1] = (rl__msg_server){
        1, RL_ROLE_STORAGE, (const uint8_t *)"127.0.0.1", 9, rl__ss_port(c->s1.ss), (const uint8_t *)"host1", 5, 1};
    c->servers[2] =
        (rl__msg_server){2, RL_ROLE_STORAGE, (const uint8_t *)"127.0.0.1", 9, p2, (const uint8_t *)"host2", 5, 1};
    c->team0[0] = 0, c->team1[0] = 1, c->team2[0] = 2;
    c->shards[0] = (rl__msg_shard){(const uint8_t *)"", 0, g_split.data, (uint32_t)g_split.len, c->team1, 1};
    c->shards[1] = (rl__msg_shard){g_split.data, (uint32_t)g_split.len, (const uint8_t *)"\xff", 1, c->team2, 1};
    c->shards[2] = (rl__msg_shard){(const uint8_t *)"\xff", 1, (const uint8_t *)"\xff\xff", 2, c->team0, 1};
    rl__msg_get_shard_map_reply map = {1, c->servers, 3, c->shards, 3, 0, 0};
    c->f1.map = map;
    c->f1.map.n_servers = (uint32_t)n_servers1; /* 2: server 2 not registered yet */
    c->f2.map = map;
    c->r1[0] = sst_range("", 0, (const char *)g_split.data, g_split.len);
    c->r2[0] = sst_range((const char *)g_split.data, g_split.len, "\xff", 1);
    dataset_build(&c->d);
    sst_fc_accept_register(&c->f1, 0, c->r1, 1);
    rl__msg_peek_version pv;
    pv.version = 10;
    pv.muts = g_part;
    pv.n_muts = (uint32_t)filter(&c->d, NULL, &g_split, g_part);
    sst_fc_peek_reply(&c->f1, &pv, 1, 10);
    if (!fake_port2) {
        sst_fc_accept_register(&c->f2, 0, c->r2, 1);
        pv.n_muts = (uint32_t)filter(&c->d, &g_split, NULL, g_part);
        sst_fc_peek_reply(&c->f2, &pv, 1, 10);
    }
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    ASSERT_OK(rl__storage_open(&so, &c->local, NULL));
    ASSERT_OK(rl__storage_apply(c->local, 10, c->d.m, (size_t)c->d.n));
}

static void cluster2_up(cluster2 *c, uint16_t fake_port2, int s2s_timeout_ms) {
    cluster2_up_map(c, fake_port2, s2s_timeout_ms, 3);
}

static void cluster2_down(cluster2 *c, int fake2) {
    srv_stop(&c->s1);
    if (!fake2) srv_stop(&c->s2);
    sst_fc_release(&c->f1);
    sst_fc_release(&c->f2);
    rl__storage_close(c->local);
    dataset_release(&c->d);
    rl__buf_release(&g_split);
}

static const char MAPPER_RANGE[] = "\x02st\x00\x15\x01\x02{K[3]}\x00\x02{...}\x00";
static const char MAPPER_POINT[] = "\x02st\x00\x15\x01\x02{K[3]}\x00\x14";

/* The pk of an index entry (its last tuple element). */
static int64_t entry_pk(const rl_mapped_keyvalue *e) {
    rl__tuple_iter it;
    rl__tuple_elem el;
    int64_t pk = -1;
    rl__tuple_iter_init(&it, e->index.key, e->index.key_len);
    while (rl__tuple_iter_next(&it, &el) == RL_OK)
        if (el.type == RL_TT_INT) pk = el.i;
    return pk;
}

/* One mapped read through server 1 vs the local reference; checks rows, served_locally and the
 * stats of the strategy. */
static void check_mapped(cluster2 *c, sst_client *cl, const char *mapper, size_t mapper_len, int limit, int reverse,
                         int strategy, uint32_t batch) {
    rl_buf b, e;
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__tuple_packer p;
    rl__tuple_packer_init(&p, &b);
    rl__tuple_pack_string(&p, "st", 2);
    rl__tuple_pack_string(&p, "idx", 3);
    rl__buf_append(&e, b.data, b.len);
    rl__buf_append_byte(&e, 0xff);

    rl__msg q = sst_req(RL_MSG_GET_MAPPED_RANGE), r;
    rl__msg_get_mapped_range_req *g = &q.u.get_mapped_range_req;
    g->version = 10;
    g->begin = RL_FIRST_GREATER_OR_EQUAL(b.data, b.len);
    g->end = RL_FIRST_GREATER_OR_EQUAL(e.data, e.len);
    g->mapper = (const uint8_t *)mapper;
    g->mapper_len = (uint32_t)mapper_len;
    g->limit = limit;
    g->reverse = (uint8_t)reverse;
    g->strategy = (uint8_t)strategy;
    g->batch = batch;
    int rc = sst_call(cl, &q, &r);
    if (rc) fail_msg("mapped read failed: %s: %.*s", rl_error_name(rc), (int)r.u.error.message_len, r.u.error.message);
    const rl__msg_get_mapped_range_reply *mr = &r.u.get_mapped_range_reply;

    rl_arena a;
    rl__arena_init(&a, 0);
    rl__mapper *m = NULL;
    ASSERT_OK(rl__mapper_parse(mapper, mapper_len, &a, &m));
    rl__mapped_options o;
    memset(&o, 0, sizeof o);
    o.limit = limit;
    o.reverse = reverse;
    o.batch = (int)batch;
    rl__mapped_entry *ents = NULL;
    int n = 0, more = 0;
    ASSERT_OK(rl__storage_get_mapped_range(c->local, 10, b.data, b.len, e.data, e.len, m, &o, NULL, NULL, &a, &ents, &n,
                                           &more));
    ASSERT_EQ(mr->n_entries, (uint32_t)n);
    ASSERT_TRUE(n > 0);
    ASSERT_EQ(mr->more, more);
    ASSERT_EQ(mr->status, RL_RANGE_OK);
    ASSERT_EQ(mr->read_through_len, 0); /* the index lies inside server 1's shard */
    uint32_t local = 0, remote = 0, batches_remote = 0, remote_items = 0;
    /* grouped takes the whole page as one batch (whatever batch says); individual batches. */
    int grouped = strategy != RL_FETCH_INDIVIDUAL; /* the servers' default is grouped */
    int bsz = grouped ? n : batch ? (int)batch : 10, in_batch_remote = 0;
    for (int i = 0; i < n; i++) {
        const rl_mapped_keyvalue *x = &mr->entries[i], *y = &ents[i];
        ASSERT_MEM_EQ(x->index.key, x->index.key_len, y->index.key, y->index.key_len);
        ASSERT_MEM_EQ(x->index.value, x->index.value_len, y->index.value, y->index.value_len);
        ASSERT_EQ(x->is_range, y->is_range);
        ASSERT_MEM_EQ(x->begin, x->begin_len, y->begin, y->begin_len);
        ASSERT_MEM_EQ(x->end, x->end_len, y->end, y->end_len);
        ASSERT_EQ(x->n_kvs, y->n_kvs);
        ASSERT_EQ(x->more, y->more);
        for (int j = 0; j < x->n_kvs; j++) {
            ASSERT_MEM_EQ(x->kvs[j].key, x->kvs[j].key_len, y->kvs[j].key, y->kvs[j].key_len);
            ASSERT_MEM_EQ(x->kvs[j].value, x->kvs[j].value_len, y->kvs[j].value, y->kvs[j].value_len);
        }
        int64_t pk = entry_pk(x);
        /* A range secondary of record 50 straddles the boundary (read remotely, in part);
         * a point read of (st, 1, 50, 0) is local. */
        int want_local = pk < SPLIT_PK || (pk == SPLIT_PK && !x->is_range);
        if (x->served_locally != want_local)
            fail_msg("entry %d (pk %lld): served_locally %d", i, (long long)pk, x->served_locally);
        if (want_local) local++;
        else remote++, remote_items++, in_batch_remote = 1;
        if ((i + 1) % bsz == 0 || i == n - 1) {
            batches_remote += (uint32_t)in_batch_remote;
            in_batch_remote = 0;
        }
    }
    ASSERT_EQ(mr->stats.secondaries_local, local);
    ASSERT_EQ(mr->stats.secondaries_remote, remote);
    ASSERT_EQ(mr->stats.s2s_round_trips, batches_remote);
    if (grouped) ASSERT_EQ(mr->stats.s2s_requests, batches_remote); /* one owner: one request per batch */
    else ASSERT_EQ(mr->stats.s2s_requests, remote_items);
    ASSERT_TRUE(mr->stats.server_ns > 0);
    /* The s2s bytes: every GET_MULTI frame each way (at least a header and an item / a result),
     * and the one peer. */
    if (mr->stats.s2s_requests > 0) {
        ASSERT_TRUE(mr->stats.s2s_bytes_sent >= 16ull * mr->stats.s2s_requests + 8);
        ASSERT_TRUE(mr->stats.s2s_bytes_received >= 16ull * mr->stats.s2s_requests);
        ASSERT_EQ(mr->stats.s2s_peers, 1);
        ASSERT_EQ(mr->stats.n_peer_stats, 1);
        const rl__msg_s2s_peer *pe = &mr->stats.peer_stats[0];
        ASSERT_EQ(pe->server_id, 2);
        ASSERT_EQ(pe->requests, mr->stats.s2s_requests);
        ASSERT_TRUE(pe->items >= remote_items);
        ASSERT_EQ(pe->bytes_sent, mr->stats.s2s_bytes_sent);
        ASSERT_EQ(pe->bytes_received, mr->stats.s2s_bytes_received);
    } else {
        ASSERT_EQ(mr->stats.n_peer_stats, 0);
        ASSERT_EQ(mr->stats.s2s_bytes_sent, 0);
        ASSERT_EQ(mr->stats.s2s_bytes_received, 0);
        ASSERT_EQ(mr->stats.s2s_peers, 0);
    }
    rl__arena_release(&a);
    rl__buf_release(&b);
    rl__buf_release(&e);
}

/* ssm-1.1: mapped reads across two storage servers equal the embedded engine's, forward and
 * reverse, range and point mappers, with limits, both strategies and several batch sizes. */
TEST(ssm_1_1_two_servers) {
    cluster2 c;
    cluster2_up(&c, 0, 0);
    sst_client cl;
    sst_client_open(&cl, rl__ss_port(c.s1.ss), RL_ROLE_CLIENT, 0);
    const int limits[] = {0, 1, 7, 25};
    for (int li = 0; li < 4; li++)
        for (int rev = 0; rev < 2; rev++)
            for (int pt = 0; pt < 2; pt++)
                for (int st = RL_FETCH_DEFAULT; st <= RL_FETCH_GROUPED; st++) {
                    const char *mp = pt ? MAPPER_POINT : MAPPER_RANGE;
                    size_t ml = (pt ? sizeof MAPPER_POINT : sizeof MAPPER_RANGE) - 1;
                    check_mapped(&c, &cl, mp, ml, limits[li], rev, st, 0);
                    check_mapped(&c, &cl, mp, ml, limits[li], rev, st, 3);
                }
    /* Server 2 holds no index entry in the index range: its begin anchor is not server 2's. */
    sst_client c2;
    sst_client_open(&c2, rl__ss_port(c.s2.ss), RL_ROLE_CLIENT, 0);
    rl__msg q = sst_req(RL_MSG_GET_MAPPED_RANGE), r;
    q.u.get_mapped_range_req.version = 10;
    q.u.get_mapped_range_req.begin = RL_FIRST_GREATER_OR_EQUAL("\x02st\x00\x02idx", 9);
    q.u.get_mapped_range_req.end = RL_FIRST_GREATER_OR_EQUAL("\x02st\x00\x02idy", 9);
    q.u.get_mapped_range_req.mapper = (const uint8_t *)MAPPER_RANGE;
    q.u.get_mapped_range_req.mapper_len = sizeof MAPPER_RANGE - 1;
    ASSERT_EQ(sst_call(&c2, &q, &r), RL_E_WRONG_SHARD_SERVER);
    /* A mapper that is not a tuple: its error comes back as an error reply. */
    q.u.get_mapped_range_req.mapper = (const uint8_t *)"\x02zz";
    q.u.get_mapped_range_req.mapper_len = 3;
    ASSERT_EQ(sst_call(&cl, &q, &r), RL_E_MAPPER_NOT_TUPLE);
    rl__ss_stats st1;
    rl__ss_get_stats(c.s1.ss, &st1);
    ASSERT_TRUE(st1.mapped_reads >= 64);
    ASSERT_TRUE(st1.secondaries_remote > 0 && st1.secondaries_local > 0);
    ASSERT_TRUE(st1.s2s_requests >= st1.s2s_round_trips);
    /* STATUS's tracing counters: server 2 served every GET_MULTI server 1 sent; no mapped read is
     * queued or running now, no read parked. */
    rl__ss_stats st2;
    rl__ss_get_stats(c.s2.ss, &st2);
    ASSERT_EQ(st2.get_multi_served, st1.s2s_requests);
    ASSERT_TRUE(st2.get_multi_items_served >= st1.secondaries_remote);
    ASSERT_TRUE(st1.s2s_bytes_sent > 0 && st1.s2s_bytes_received > 0);
    /* A worker counts itself out just after its reply is sent: wait for it (bounded). */
    for (int i = 0; i < 200 && (st1.mapped_running || st1.mapped_queued); i++) {
        usleep(10000);
        rl__ss_get_stats(c.s1.ss, &st1);
    }
    ASSERT_EQ(st1.mapped_queued, 0);
    ASSERT_EQ(st1.mapped_running, 0);
    ASSERT_EQ(st1.parked_now, 0);
    sst_client_close(&c2);
    sst_client_close(&cl);
    cluster2_down(&c, 0);
}

/* ssm-1.2: concurrent mapped reads from several clients (pipelined on each connection) while
 * plain reads keep being answered: every reply right. */
TEST(ssm_1_2_concurrent) {
    cluster2 c;
    cluster2_up(&c, 0, 0);
    enum { NC = 4 };
    sst_client cl[NC];
    for (int i = 0; i < NC; i++) sst_client_open(&cl[i], rl__ss_port(c.s1.ss), RL_ROLE_CLIENT, 0);
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < NC; i++)
            check_mapped(&c, &cl[i], MAPPER_RANGE, sizeof MAPPER_RANGE - 1, 0, (round + i) % 2, RL_FETCH_INDIVIDUAL, 0);
    for (int i = 0; i < NC; i++) sst_client_close(&cl[i]);
    cluster2_down(&c, 0);
}

/* ssm-1.3: the peer holding the records accepts connections but never answers: the mapped read
 * fails with timed_out within the timeout, naming the peer, and the server goes on serving. */
TEST(ssm_1_3_silent_peer) {
    uint16_t silent_port;
    int lfd = sst_listen(&silent_port);
    cluster2 c;
    cluster2_up(&c, silent_port, 300);
    sst_client cl;
    sst_client_open(&cl, rl__ss_port(c.s1.ss), RL_ROLE_CLIENT, 0);
    rl__msg q = sst_req(RL_MSG_GET_MAPPED_RANGE), r;
    q.u.get_mapped_range_req.version = 10;
    q.u.get_mapped_range_req.begin = RL_FIRST_GREATER_OR_EQUAL("\x02st\x00\x02idx", 9);
    q.u.get_mapped_range_req.end = RL_FIRST_GREATER_OR_EQUAL("\x02st\x00\x02idy", 9);
    q.u.get_mapped_range_req.mapper = (const uint8_t *)MAPPER_RANGE;
    q.u.get_mapped_range_req.mapper_len = sizeof MAPPER_RANGE - 1;
    uint64_t t0 = sst_now_ms();
    ASSERT_EQ(sst_call(&cl, &q, &r), RL_E_TIMED_OUT);
    uint64_t took = sst_now_ms() - t0;
    ASSERT_TRUE(took >= 250 && took < 5000);
    char msg[512];
    snprintf(msg, sizeof msg, "%.*s", (int)r.u.error.message_len, (const char *)r.u.error.message);
    if (!strstr(msg, "storage server 2")) fail_msg("the error does not name the peer: %s", msg);
    /* Still serving. */
    int present;
    rl_buf k;
    rl__buf_init(&k);
    record_key(&k, 3, 0, 1);
    ASSERT_EQ(sst_get(&cl, 10, (const char *)k.data, k.len, &present, NULL), 0);
    ASSERT_TRUE(present);
    /* A peer that refuses connections: server_unavailable, at once. */
    close(lfd);
    t0 = sst_now_ms();
    int rc;
    do rc = sst_call(&cl, &q, &r);
    while (rc == RL_E_TIMED_OUT && sst_now_ms() - t0 < 5000); /* the old connection times out */
    ASSERT_EQ(rc, RL_E_SERVER_UNAVAILABLE);
    rl__buf_release(&k);
    sst_client_close(&cl);
    cluster2_down(&c, 1);
}

/* ssm-1.4: server 1 fetched its shard map before server 2 registered (the map names server 2 in
 * a team but has no address for it): a mapped read needing server 2 waits for a newer map, which
 * server 1 asks for at once, then completes normally. */
TEST(ssm_1_4_map_without_peer) {
    cluster2 c;
    cluster2_up_map(&c, 0, 0, 2);
    sst_client cl;
    sst_client_open(&cl, rl__ss_port(c.s1.ss), RL_ROLE_CLIENT, 0);
    rl__msg q = sst_req(RL_MSG_GET_MAPPED_RANGE), r;
    q.u.get_mapped_range_req.version = 10;
    q.u.get_mapped_range_req.begin = RL_FIRST_GREATER_OR_EQUAL("\x02st\x00\x02idx", 9);
    q.u.get_mapped_range_req.end = RL_FIRST_GREATER_OR_EQUAL("\x02st\x00\x02idy", 9);
    q.u.get_mapped_range_req.mapper = (const uint8_t *)MAPPER_RANGE;
    q.u.get_mapped_range_req.mapper_len = sizeof MAPPER_RANGE - 1;
    sst_send(cl.fd, 7, &q);
    /* Server 1 asks for the map again (the incomplete one makes it ask within 200 ms). */
    ASSERT_EQ(sst_fc_wait(&c.f1, RL_MSG_GET_SHARD_MAP, SS_T_WAIT_MS), 1);
    c.f1.map.n_servers = 3;
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rep.u.get_shard_map_reply = c.f1.map;
    sst_fc_reply(&c.f1, RL_MSG_GET_SHARD_MAP, c.f1.h.id, &rep);
    rl__frame_header h;
    ASSERT_EQ(sst_read_frame(cl.fd, &h, &cl.pl, SS_T_WAIT_MS), 1);
    ASSERT_EQ(h.id, 7);
    if (h.flags != RL_FRAME_REPLY) {
        rl__msg_error e;
        ASSERT_OK(rl__msg_error_decode(cl.pl.data, cl.pl.len, NULL, &e, NULL));
        fail_msg("mapped read failed: %s: %.*s", rl_error_name(e.code), (int)e.message_len, e.message);
    }
    ASSERT_OK(rl__msg_get_mapped_range_reply_decode(cl.pl.data, cl.pl.len, &cl.a, &r.u.get_mapped_range_reply, NULL));
    ASSERT_EQ(r.u.get_mapped_range_reply.n_entries, NREC);
    ASSERT_TRUE(r.u.get_mapped_range_reply.stats.secondaries_remote > 0);
    /* The next read runs on the connection made meanwhile. */
    check_mapped(&c, &cl, MAPPER_RANGE, sizeof MAPPER_RANGE - 1, 0, 0, RL_FETCH_INDIVIDUAL, 0);
    sst_client_close(&cl);
    cluster2_down(&c, 0);
}

RL_TEST_MAIN(T(ssm_1_1_two_servers), T(ssm_1_2_concurrent), T(ssm_1_3_silent_peer), T(ssm_1_4_map_without_peer))
