/* test_storage_server.c — the storage server role (src/server/storage_server.h) run in-process on
 * its own thread, driven over real loopback sockets by a fake coordinator and clients that speak
 * the real protocol (ss_test.h): registration, reads at versions (applied, applied-but-empty,
 * parked then woken, future_version after the wait, transaction_too_old), ownership
 * (wrong_shard_server), selectors across a shard boundary (unresolved, read_through), sync and
 * POP, reconnecting to a restarted coordinator, STATUS and PING, GET_MULTI, and bad input.
 *
 * Test ids: ss-1.x (versions and replication), ss-2.x (ownership and selectors), ss-3.x (bad
 * input and status). Mapped reads across two servers are in test_storage_server_mapped.c.
 */
#include <jansson.h>

#include "server/storage_server.h"
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

/* Start a storage server (id, coordinator port; o may override knobs) on its own thread. */
static void srv_start(srv *s, uint32_t id, uint16_t coord_port, const rl__ss_options *o, const char *dir) {
    rl__ss_options opt;
    if (o) opt = *o;
    else memset(&opt, 0, sizeof opt);
    memset(s, 0, sizeof *s);
    s->dir = dir ? strdup(dir) : rl_test_tmpdir("ss");
    opt.dir = s->dir;
    opt.id = id;
    opt.coordinator_ip = "127.0.0.1";
    opt.coordinator_port = coord_port;
    if (!opt.future_wait_ms) opt.future_wait_ms = 300;
    opt.auth = sst_auth();
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = rl__ss_new(&opt, &s->ss, &err);
    if (rc != RL_OK) fail_msg("rl__ss_new: %s: %s", rl_error_name(rc), rl__errdetail_get(&err));
    ASSERT_EQ(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_stop(srv *s, int keep_dir) {
    rl__ss_stop(s->ss);
    pthread_join(s->th, NULL);
    rl__ss_free(s->ss);
    ASSERT_EQ(s->rc, RL_OK);
    if (!keep_dir) rl_test_rmtree(s->dir);
    free(s->dir);
}

static const rl__keyrange ALL[] = {{(const uint8_t *)"", 0, (const uint8_t *)"\xff", 1}};

/* ss-1.1: registration, reads at versions: applied versions, a version known but empty for this
 * server (served from the newest applied one), a future version that arrives while the read is
 * parked (woken), one that never arrives (future_version after the wait), and too old. */
TEST(ss_1_1_versions) {
    sst_fc fc;
    sst_fc_init(&fc);
    rl__ss_options o;
    memset(&o, 0, sizeof o);
    o.window_versions = 1000;
    srv s;
    srv_start(&s, 7, fc.port, &o, NULL);
    sst_fc_accept_register(&fc, 0, ALL, 1);
    ASSERT_EQ(fc.storage_id, 7);
    ASSERT_EQ(fc.reg_durable, 0);
    ASSERT_EQ(fc.reg_port, rl__ss_port(s.ss));
    ASSERT_EQ(fc.m.u.peek_req.after_version, 0);
    ASSERT_EQ(fc.m.u.peek_req.storage_id, 7);

    rl__mutation v10[] = {sst_set("a", "1"), sst_set("b", "2")};
    rl__mutation v20[] = {sst_set("a", "3"), sst_set("c", "4")};
    rl__msg_peek_version pv[] = {{10, v10, 2}, {20, v20, 2}};
    sst_fc_peek_reply(&fc, pv, 2, 30);

    sst_client c;
    sst_client_open(&c, rl__ss_port(s.ss), RL_ROLE_CLIENT, 0);
    int present = 0;
    rl_buf val;
    rl__buf_init(&val);
    ASSERT_EQ(sst_get(&c, 10, "a", 1, &present, &val), 0);
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(val.data, val.len, "1", 1);
    ASSERT_EQ(sst_get(&c, 15, "c", 1, &present, &val), 0);
    ASSERT_FALSE(present);
    ASSERT_EQ(sst_get(&c, 25, "a", 1, &present, &val), 0); /* known, nothing new after 20 */
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(val.data, val.len, "3", 1);
    ASSERT_EQ(sst_get(&c, 30, "c", 1, &present, &val), 0);
    ASSERT_TRUE(present);

    /* A future version that never comes: future_version after ~300 ms. */
    uint64_t t0 = sst_now_ms();
    ASSERT_EQ(sst_get(&c, 31, "a", 1, &present, &val), RL_E_FUTURE_VERSION);
    uint64_t waited = sst_now_ms() - t0;
    ASSERT_TRUE(waited >= 280 && waited < 3000);

    /* A parked read woken by the version's arrival (sent before the PEEK reply). */
    rl__msg q = sst_req(RL_MSG_GET), r;
    q.u.get_req.version = 40;
    q.u.get_req.key = (const uint8_t *)"d";
    q.u.get_req.key_len = 1;
    sst_send(c.fd, 999, &q);
    rl__mutation v40[] = {sst_set("d", "5")};
    rl__msg_peek_version pv2[] = {{40, v40, 1}};
    sst_fc_peek_reply(&fc, pv2, 1, 45);
    rl__frame_header h;
    ASSERT_EQ(sst_read_frame(c.fd, &h, &c.pl, SS_T_WAIT_MS), 1);
    ASSERT_EQ(h.id, 999);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    ASSERT_OK(rl__msg_get_reply_decode(c.pl.data, c.pl.len, NULL, &r.u.get_reply, NULL));
    ASSERT_EQ(r.u.get_reply.present, 1);

    /* The background sync makes 45 durable and POPs it (45 had nothing: an empty version). */
    sst_fc_wait_pop(&fc, 45);
    rl__ss_stats st;
    rl__ss_get_stats(s.ss, &st);
    ASSERT_EQ(st.known_version, 45);
    ASSERT_EQ(st.applied_version, 45);
    ASSERT_TRUE(st.durable_version >= 45);
    ASSERT_TRUE(st.parked_reads >= 2);
    ASSERT_TRUE(st.future_version_errors >= 1);

    /* Too old: the window is 1000 versions. */
    rl__mutation v5000[] = {sst_set("e", "6")};
    rl__msg_peek_version pv3[] = {{5000, v5000, 1}};
    sst_fc_peek_reply(&fc, pv3, 1, 5000);
    ASSERT_EQ(sst_get(&c, 3999, "a", 1, &present, &val), RL_E_TRANSACTION_TOO_OLD);
    ASSERT_EQ(sst_get(&c, 4000, "a", 1, &present, &val), 0);
    ASSERT_EQ(sst_get(&c, 5000, "e", 1, &present, &val), 0);
    ASSERT_TRUE(present);

    rl__buf_release(&val);
    sst_client_close(&c);
    srv_stop(&s, 0);
    sst_fc_release(&fc);
}

/* ss-1.2: the coordinator goes away and comes back: the server reconnects, registers again with
 * its durable version, and peeks after what it knows; a version sent again is applied once. */
TEST(ss_1_2_reconnect) {
    sst_fc fc;
    sst_fc_init(&fc);
    srv s;
    srv_start(&s, 3, fc.port, NULL, NULL);
    sst_fc_accept_register(&fc, 0, ALL, 1);
    rl__mutation v10[] = {{RL_MUT_ADD, (const uint8_t *)"n", 1, (const uint8_t *)"\x01", 1}};
    rl__msg_peek_version pv[] = {{10, v10, 1}};
    sst_fc_peek_reply(&fc, pv, 1, 12);
    sst_fc_wait_pop(&fc, 12);
    sst_fc_drop(&fc); /* the coordinator "restarts" */
    sst_fc_accept_register(&fc, 12, ALL, 1);
    ASSERT_EQ(fc.reg_durable, 12);
    ASSERT_EQ(fc.m.u.peek_req.after_version, 12);
    /* A coordinator may resend a version: the server must not apply it twice (ADD). */
    rl__msg_peek_version pv2[] = {{10, v10, 1}, {20, v10, 1}};
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rep.u.peek_reply.end_version = 20;
    rep.u.peek_reply.versions = &pv2[1];
    rep.u.peek_reply.n_versions = 1;
    sst_fc_reply(&fc, RL_MSG_PEEK, fc.h.id, &rep);
    ASSERT_EQ(sst_fc_wait(&fc, RL_MSG_PEEK, SS_T_WAIT_MS), 1);
    sst_client c;
    sst_client_open(&c, rl__ss_port(s.ss), RL_ROLE_CLIENT, 0);
    int present;
    rl_buf val;
    rl__buf_init(&val);
    ASSERT_EQ(sst_get(&c, 20, "n", 1, &present, &val), 0);
    ASSERT_MEM_EQ(val.data, val.len, "\x02", 1);
    ASSERT_EQ(sst_get(&c, 15, "n", 1, &present, &val), 0);
    ASSERT_MEM_EQ(val.data, val.len, "\x01", 1);
    rl__ss_stats st;
    rl__ss_get_stats(s.ss, &st);
    ASSERT_EQ(st.registrations, 2);
    rl__buf_release(&val);
    sst_client_close(&c);
    /* Restart the server itself on the same directory: it recovers 20 (after a sync). */
    sst_fc_wait_pop(&fc, 20);
    char *dir = strdup(s.dir);
    srv_stop(&s, 1);
    sst_fc_drop(&fc);
    srv_start(&s, 3, fc.port, NULL, dir);
    free(dir);
    sst_fc_accept_register(&fc, 20, ALL, 1);
    ASSERT_EQ(fc.reg_durable, 20);
    ASSERT_EQ(fc.m.u.peek_req.after_version, 20);
    sst_client_open(&c, rl__ss_port(s.ss), RL_ROLE_CLIENT, 0);
    rl__buf_init(&val);
    ASSERT_EQ(sst_get(&c, 20, "n", 1, &present, &val), 0);
    ASSERT_MEM_EQ(val.data, val.len, "\x02", 1);
    rl__buf_release(&val);
    sst_client_close(&c);
    srv_stop(&s, 0);
    sst_fc_release(&fc);
}

/* ss-1.3: a coordinator that stops answering (it takes the PEEK and never replies, or never
 * answers REGISTER_STORAGE) is dropped after the reply timeout and the server connects again. */
TEST(ss_1_3_silent_coordinator) {
    sst_fc fc;
    sst_fc_init(&fc);
    rl__ss_options o;
    memset(&o, 0, sizeof o);
    o.co_timeout_ms = 300;
    o.peek_wait_ms = 100;
    srv s;
    srv_start(&s, 5, fc.port, &o, NULL);
    sst_fc_accept_register(&fc, 0, ALL, 1); /* the PEEK is never answered */
    uint64_t t0 = sst_now_ms();
    ASSERT_EQ(sst_fc_wait(&fc, 0, SS_T_WAIT_MS), 0); /* the server closes */
    uint64_t took = sst_now_ms() - t0;
    ASSERT_TRUE(took >= 350 && took < 5000);
    sst_fc_drop(&fc);
    /* It reconnects; this time REGISTER_STORAGE is never answered: dropped again. */
    fc.fd = sst_accept(fc.lfd, SS_T_WAIT_MS);
    ASSERT_TRUE(fc.fd >= 0);
    ASSERT_EQ(sst_fc_wait(&fc, RL_MSG_REGISTER_STORAGE, SS_T_WAIT_MS), 1);
    ASSERT_EQ(sst_fc_wait(&fc, 0, SS_T_WAIT_MS), 0);
    sst_fc_drop(&fc);
    /* And a third time, answered: registered. */
    sst_fc_accept_register(&fc, 0, ALL, 1);
    rl__ss_stats st;
    rl__ss_get_stats(s.ss, &st);
    ASSERT_EQ(st.registrations, 2);
    srv_stop(&s, 0);
    sst_fc_release(&fc);
}

/* Range read helper: returns 0 or the error; fills *out. */
static int range(sst_client *c, rl__version v, rl_key_selector b, rl_key_selector e, int limit, int reverse,
                 rl__msg *out) {
    rl__msg q = sst_req(RL_MSG_GET_RANGE);
    q.u.get_range_req.version = v;
    q.u.get_range_req.begin = b;
    q.u.get_range_req.end = e;
    q.u.get_range_req.limit = limit;
    q.u.get_range_req.reverse = (uint8_t)reverse;
    return sst_call(c, &q, out);
}

static void expect_keys(const rl__msg_get_range_reply *g, const char *keys) {
    /* keys: one character per row */
    ASSERT_EQ(g->n_kvs, strlen(keys));
    for (uint32_t i = 0; i < g->n_kvs; i++) ASSERT_MEM_EQ(g->kvs[i].key, g->kvs[i].key_len, &keys[i], 1);
}

/* ss-2.1: ownership and selectors across the shard boundary. Server 1 holds ["", "m"), server
 * 2 holds ["m", "\xff"); reads of keys elsewhere are wrong_shard_server; a range that continues on
 * the other shard says read_through; a selector that leaves the shard is unresolved (GET_KEY:
 * resolved = 0 with the selector to continue with). */
TEST(ss_2_1_shards_and_selectors) {
    sst_fc f1, f2;
    sst_fc_init(&f1);
    sst_fc_init(&f2);
    srv s1, s2;
    srv_start(&s1, 1, f1.port, NULL, NULL);
    srv_start(&s2, 2, f2.port, NULL, NULL);
    rl__keyrange r1[] = {sst_range("", 0, "m", 1)}, r2[] = {sst_range("m", 1, "\xff", 1)};
    sst_fc_accept_register(&f1, 0, r1, 1);
    sst_fc_accept_register(&f2, 0, r2, 1);
    rl__mutation m1[] = {sst_set("a", "1"), sst_set("b", "1"), sst_set("c", "1")};
    rl__mutation m2[] = {sst_set("x", "1"), sst_set("y", "1")};
    rl__msg_peek_version p1[] = {{5, m1, 3}}, p2[] = {{5, m2, 2}};
    sst_fc_peek_reply(&f1, p1, 1, 5);
    sst_fc_peek_reply(&f2, p2, 1, 5);
    sst_client c1, c2;
    sst_client_open(&c1, rl__ss_port(s1.ss), RL_ROLE_CLIENT, 0);
    sst_client_open(&c2, rl__ss_port(s2.ss), RL_ROLE_CLIENT, 0);
    int present;
    rl__msg r;

    ASSERT_EQ(sst_get(&c1, 5, "x", 1, &present, NULL), RL_E_WRONG_SHARD_SERVER);
    ASSERT_EQ(sst_get(&c2, 5, "x", 1, &present, NULL), 0);
    ASSERT_TRUE(present);
    ASSERT_EQ(sst_get(&c2, 5, "\xff\x01", 2, &present, NULL), RL_E_WRONG_SHARD_SERVER);

    /* Forward [a, z) on server 1: a b c, then read_through m. */
    ASSERT_EQ(range(&c1, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("z", 1), 0, 0, &r), 0);
    expect_keys(&r.u.get_range_reply, "abc");
    ASSERT_EQ(r.u.get_range_reply.more, 0);
    ASSERT_MEM_EQ(r.u.get_range_reply.read_through, r.u.get_range_reply.read_through_len, "m", 1);
    ASSERT_MEM_EQ(r.u.get_range_reply.resolved_end, r.u.get_range_reply.resolved_end_len, "z", 1);
    /* With a limit inside the shard: more, no read_through. */
    ASSERT_EQ(range(&c1, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("z", 1), 2, 0, &r), 0);
    expect_keys(&r.u.get_range_reply, "ab");
    ASSERT_EQ(r.u.get_range_reply.more, 1);
    ASSERT_EQ(r.u.get_range_reply.read_through_len, 0);
    /* Forward [a, z) sent to server 2: the begin anchor is not its. */
    ASSERT_EQ(range(&c2, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("z", 1), 0, 0, &r),
              RL_E_WRONG_SHARD_SERVER);
    /* Reverse [a, z) goes to the shard below z (server 2): y x, read_through m. */
    ASSERT_EQ(range(&c2, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("z", 1), 0, 1, &r), 0);
    expect_keys(&r.u.get_range_reply, "yx");
    ASSERT_MEM_EQ(r.u.get_range_reply.read_through, r.u.get_range_reply.read_through_len, "m", 1);
    ASSERT_EQ(range(&c1, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("z", 1), 0, 1, &r),
              RL_E_WRONG_SHARD_SERVER);
    /* Reverse [a, m) on server 1: c b a, the shard starts at "": nothing below. */
    ASSERT_EQ(range(&c1, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), RL_FIRST_GREATER_OR_EQUAL("m", 1), 0, 1, &r), 0);
    expect_keys(&r.u.get_range_reply, "cba");
    ASSERT_EQ(r.u.get_range_reply.read_through_len, 0);
    /* An end selector that resolves past the shard: unresolved. */
    rl_key_selector e = RL_FIRST_GREATER_OR_EQUAL("c", 1);
    e.offset = 3;
    ASSERT_EQ(range(&c1, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), e, 0, 0, &r), 0);
    ASSERT_EQ(r.u.get_range_reply.status, RL_RANGE_SELECTOR_UNRESOLVED);
    ASSERT_EQ(r.u.get_range_reply.n_kvs, 0);
    /* ... one that resolves inside: firstGreaterOrEqual(a) + 2 = c, so [a, c). */
    e = RL_FIRST_GREATER_OR_EQUAL("a", 1);
    e.offset = 3;
    ASSERT_EQ(range(&c1, 5, RL_FIRST_GREATER_OR_EQUAL("a", 1), e, 0, 0, &r), 0);
    ASSERT_EQ(r.u.get_range_reply.status, RL_RANGE_OK);
    expect_keys(&r.u.get_range_reply, "ab");
    ASSERT_MEM_EQ(r.u.get_range_reply.resolved_end, r.u.get_range_reply.resolved_end_len, "c", 1);

    /* GET_KEY: firstGreaterOrEqual(b) + 3 runs past m on server 1: continue with (m, 0, 2). */
    rl__msg q = sst_req(RL_MSG_GET_KEY);
    q.u.get_key_req.version = 5;
    q.u.get_key_req.sel = RL_FIRST_GREATER_OR_EQUAL("b", 1);
    q.u.get_key_req.sel.offset = 4;
    ASSERT_EQ(sst_call(&c1, &q, &r), 0);
    ASSERT_EQ(r.u.get_key_reply.resolved, 0);
    ASSERT_MEM_EQ(r.u.get_key_reply.sel.key, r.u.get_key_reply.sel.key_len, "m", 1);
    ASSERT_EQ(r.u.get_key_reply.sel.offset, 2);
    /* ... which server 2 resolves: the second key >= m is y. */
    q.u.get_key_req.sel = (rl_key_selector){(const uint8_t *)"m", 1, 0, 2};
    ASSERT_EQ(sst_call(&c2, &q, &r), 0);
    ASSERT_EQ(r.u.get_key_reply.resolved, 1);
    ASSERT_MEM_EQ(r.u.get_key_reply.sel.key, r.u.get_key_reply.sel.key_len, "y", 1);
    /* lastLessThan(x) on server 2 runs below m: continue with (m, 0, 0) on server 1 = c. */
    q.u.get_key_req.sel = RL_LAST_LESS_THAN("x", 1);
    ASSERT_EQ(sst_call(&c2, &q, &r), 0);
    ASSERT_EQ(r.u.get_key_reply.resolved, 0);
    ASSERT_MEM_EQ(r.u.get_key_reply.sel.key, r.u.get_key_reply.sel.key_len, "m", 1);
    ASSERT_EQ(r.u.get_key_reply.sel.offset, 0);
    q.u.get_key_req.sel = r.u.get_key_reply.sel;
    q.u.get_key_req.sel.key = (const uint8_t *)"m";
    ASSERT_EQ(sst_call(&c1, &q, &r), 0);
    ASSERT_EQ(r.u.get_key_reply.resolved, 1);
    ASSERT_MEM_EQ(r.u.get_key_reply.sel.key, r.u.get_key_reply.sel.key_len, "c", 1);
    /* Past the end of the keyspace: clamped to \xff (the last shard ends there). */
    q.u.get_key_req.sel = RL_FIRST_GREATER_THAN("y", 1);
    ASSERT_EQ(sst_call(&c2, &q, &r), 0);
    ASSERT_EQ(r.u.get_key_reply.resolved, 1);
    ASSERT_MEM_EQ(r.u.get_key_reply.sel.key, r.u.get_key_reply.sel.key_len, "\xff", 1);

    /* GET_MULTI: per-item errors for keys elsewhere, ranges must stay in one shard. */
    rl__msg_read_item items[] = {
        {0, (const uint8_t *)"a", 1, (const uint8_t *)"a\0", 2, 1, 0},
        {1, (const uint8_t *)"a", 1, (const uint8_t *)"c", 1, 0, 0},
        {0, (const uint8_t *)"x", 1, (const uint8_t *)"x\0", 2, 1, 0},
        {1, (const uint8_t *)"b", 1, (const uint8_t *)"n", 1, 0, 0},
        {1, (const uint8_t *)"a", 1, (const uint8_t *)"m", 1, 1, 0},
    };
    q = sst_req(RL_MSG_GET_MULTI);
    q.u.get_multi_req.version = 5;
    q.u.get_multi_req.items = items;
    q.u.get_multi_req.n_items = 5;
    ASSERT_EQ(sst_call(&c1, &q, &r), 0);
    ASSERT_EQ(r.u.get_multi_reply.n_results, 5);
    const rl__msg_read_result *res = r.u.get_multi_reply.results;
    ASSERT_EQ(res[0].error, 0);
    ASSERT_EQ(res[0].n_kvs, 1);
    ASSERT_EQ(res[1].n_kvs, 2);
    ASSERT_EQ(res[1].more, 0);
    ASSERT_EQ(res[2].error, RL_E_WRONG_SHARD_SERVER);
    ASSERT_EQ(res[3].error, RL_E_WRONG_SHARD_SERVER);
    ASSERT_EQ(res[4].n_kvs, 1);
    ASSERT_EQ(res[4].more, 1);

    sst_client_close(&c1);
    sst_client_close(&c2);
    srv_stop(&s1, 0);
    srv_stop(&s2, 0);
    sst_fc_release(&f1);
    sst_fc_release(&f2);
}

/* ss-3.1: bad input closes that one connection (never the server): garbage, a request before
 * HELLO, a wrong magic or version (error reply 2100, then close), an unknown or reserved type, a
 * reply frame, an undecodable payload, a second HELLO, a coordinator-only request, a header
 * claiming a 64 MiB + 1 payload, a frame cut short; a good client keeps being answered. */
TEST(ss_3_1_bad_input) {
    sst_fc fc;
    sst_fc_init(&fc);
    srv s;
    srv_start(&s, 1, fc.port, NULL, NULL);
    sst_fc_accept_register(&fc, 0, ALL, 1);
    rl__mutation m[] = {sst_set("k", "v")};
    rl__msg_peek_version pv[] = {{9, m, 1}};
    sst_fc_peek_reply(&fc, pv, 1, 9);
    uint16_t port = rl__ss_port(s.ss);
    sst_client good;
    sst_client_open(&good, port, RL_ROLE_CLIENT, 0);
    int present;
    for (int k = 0; k < 11; k++) {
        int fd = sst_connect(port);
        uint8_t hdr[RL_FRAME_HEADER_LEN];
        rl__frame_header h = {0, 0, 0, 1};
        rl__msg q;
        int expect_error_reply = 0;
        switch (k) {
        case 0: sst_write_all(fd, "this is not a frame at all, just text....", 40); break;
        case 1:
            q = sst_req(RL_MSG_PING);
            sst_send(fd, 1, &q);
            break; /* before HELLO */
        case 2: {  /* wrong magic */
            q = sst_req(RL_MSG_HELLO);
            q.u.hello_req = (rl__msg_hello_req){0x12345678, RL_PROTOCOL_VERSION, 0, 0, NULL, 0};
            sst_send(fd, 1, &q);
            expect_error_reply = RL_E_INCOMPATIBLE_PROTOCOL_VERSION;
            break;
        }
        case 3: { /* wrong version */
            q = sst_req(RL_MSG_HELLO);
            q.u.hello_req = (rl__msg_hello_req){RL_PROTOCOL_MAGIC, 99, 0, 0, NULL, 0};
            sst_send(fd, 1, &q);
            expect_error_reply = RL_E_INCOMPATIBLE_PROTOCOL_VERSION;
            break;
        }
        case 4:
            sst_send_hello(fd, 0, 0);
            h.type = 77;
            rl__frame_header_encode(&h, hdr);
            sst_write_all(fd, hdr, sizeof hdr);
            break;
        case 5:
            sst_send_hello(fd, 0, 0);
            h.type = RL_MSG_RESERVED_ADMIN_FIRST + 3;
            rl__frame_header_encode(&h, hdr);
            sst_write_all(fd, hdr, sizeof hdr);
            break;
        case 6:
            sst_send_hello(fd, 0, 0);
            h.type = RL_MSG_GET;
            h.flags = RL_FRAME_REPLY;
            h.payload_len = 0;
            rl__frame_header_encode(&h, hdr);
            sst_write_all(fd, hdr, sizeof hdr);
            break;
        case 7:
            sst_send_hello(fd, 0, 0);
            h.type = RL_MSG_GET;
            h.payload_len = 3;
            rl__frame_header_encode(&h, hdr);
            sst_write_all(fd, hdr, sizeof hdr);
            sst_write_all(fd, "abc", 3);
            break;
        case 8:
            sst_send_hello(fd, 0, 0);
            sst_send_hello(fd, 0, 0);
            break;
        case 9: { /* a coordinator-only request: error reply, then close */
            sst_send_hello(fd, 0, 0);
            q = sst_req(RL_MSG_GET_READ_VERSION);
            sst_send(fd, 2, &q);
            expect_error_reply = RL_E_PROTOCOL_UNEXPECTED_MESSAGE;
            break;
        }
        case 10:
            sst_send_hello(fd, 0, 0);
            h.type = RL_MSG_GET;
            h.payload_len = RL_NET_MAX_PAYLOAD + 1;
            rl__frame_header_encode(&h, hdr);
            sst_write_all(fd, hdr, sizeof hdr);
            break;
        }
        if (expect_error_reply) {
            rl_buf pl;
            rl__buf_init(&pl);
            rl__frame_header rh;
            do /* skip the HELLO reply of the cases that sent a good HELLO */
                ASSERT_EQ(sst_read_frame(fd, &rh, &pl, SS_T_WAIT_MS), 1);
            while (!(rh.flags & RL_FRAME_ERROR));
            ASSERT_EQ(rh.flags, RL_FRAME_REPLY | RL_FRAME_ERROR);
            rl__msg_error e;
            ASSERT_OK(rl__msg_error_decode(pl.data, pl.len, NULL, &e, NULL));
            ASSERT_EQ(e.code, expect_error_reply);
            rl__buf_release(&pl);
        }
        if (!sst_wait_closed(fd, SS_T_WAIT_MS)) fail_msg("case %d: the server kept the connection open", k);
        close(fd);
        ASSERT_EQ(sst_get(&good, 9, "k", 1, &present, NULL), 0);
        ASSERT_TRUE(present);
    }
    /* A frame cut short by the peer's close, and a peer that closes right after HELLO. */
    int fd = sst_connect(port);
    sst_send_hello(fd, 0, 0);
    sst_write_all(fd, "\x20\x00\x00\x00\x14\x00", 6);
    close(fd);
    ASSERT_EQ(sst_get(&good, 9, "k", 1, &present, NULL), 0);
    /* Random bytes after a good HELLO, seeded. */
    uint64_t seed = rl_test_seed();
    for (int round = 0; round < 30; round++) {
        fd = sst_connect(port);
        sst_send_hello(fd, 0, 0);
        uint8_t junk[256];
        size_t n = 16 + rl_test_rand_below(&seed, sizeof junk - 16);
        for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)rl_test_rand(&seed);
        if (round % 2) { /* a plausible header: a known type, a small length */
            junk[0] = (uint8_t)(n - 16), junk[1] = junk[2] = junk[3] = 0;
            junk[4] = (uint8_t)(20 + round % 5), junk[5] = 0, junk[6] = junk[7] = 0;
        }
        sst_write_all(fd, junk, n);
        close(fd);
    }
    ASSERT_EQ(sst_get(&good, 9, "k", 1, &present, NULL), 0);
    ASSERT_TRUE(present);
    sst_client_close(&good);
    srv_stop(&s, 0);
    sst_fc_release(&fc);
}

/* ss-3.2: STATUS is the contracts' JSON; PING echoes with the server's clock. */
TEST(ss_3_2_status_ping) {
    sst_fc fc;
    sst_fc_init(&fc);
    srv s;
    srv_start(&s, 4, fc.port, NULL, NULL);
    rl__keyrange rs[] = {sst_range("a", 1, "m", 1)};
    sst_fc_accept_register(&fc, 0, rs, 1);
    rl__mutation m[] = {sst_set("b", "v"), sst_set("c", "w")};
    rl__msg_peek_version pv[] = {{9, m, 2}};
    sst_fc_peek_reply(&fc, pv, 1, 11);
    sst_client c;
    sst_client_open(&c, rl__ss_port(s.ss), RL_ROLE_CLIENT, 0);
    int present;
    ASSERT_EQ(sst_get(&c, 11, "b", 1, &present, NULL), 0);
    rl__msg q = sst_req(RL_MSG_PING), r;
    q.u.ping_req.payload = (const uint8_t *)"hi";
    q.u.ping_req.payload_len = 2;
    ASSERT_EQ(sst_call(&c, &q, &r), 0);
    ASSERT_MEM_EQ(r.u.ping_reply.payload, r.u.ping_reply.payload_len, "hi", 2);
    ASSERT_TRUE(r.u.ping_reply.server_mono_ns > 0);
    q = sst_req(RL_MSG_STATUS);
    ASSERT_EQ(sst_call(&c, &q, &r), 0);
    json_error_t je;
    json_t *j = json_loadb((const char *)r.u.status_reply.json, r.u.status_reply.json_len, 0, &je);
    if (!j) fail_msg("STATUS is not JSON: %s: %.*s", je.text, (int)r.u.status_reply.json_len, r.u.status_reply.json);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "role")), "storage");
    ASSERT_EQ(json_integer_value(json_object_get(j, "id")), 4);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "host")), "host1");
    ASSERT_EQ(json_integer_value(json_object_get(j, "pid")), getpid());
    /* 9, or 11 once the background sync recorded the empty version 11 (ss_coord.c inv. 4). */
    json_int_t applied = json_integer_value(json_object_get(j, "applied_version"));
    ASSERT_TRUE(applied == 9 || applied == 11);
    ASSERT_EQ(json_integer_value(json_object_get(j, "known_version")), 11);
    ASSERT_TRUE(json_is_integer(json_object_get(j, "durable_version")));
    json_t *sh = json_object_get(j, "shards");
    ASSERT_EQ(json_array_size(sh), 1);
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(sh, 0), "begin")), "61");
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(sh, 0), "end")), "6d");
    ASSERT_EQ(json_integer_value(json_object_get(j, "keys")), 2);
    ASSERT_TRUE(json_integer_value(json_object_get(j, "reads")) >= 1);
    ASSERT_TRUE(json_is_integer(json_object_get(j, "mapped_reads")));
    ASSERT_TRUE(json_is_integer(json_object_get(j, "secondaries_local")));
    ASSERT_TRUE(json_is_integer(json_object_get(j, "secondaries_remote")));
    ASSERT_TRUE(json_is_integer(json_object_get(j, "s2s_requests")));
    ASSERT_TRUE(json_is_integer(json_object_get(j, "s2s_round_trips")));
    ASSERT_TRUE(json_is_integer(json_object_get(j, "mapped_server_ns")));
    ASSERT_TRUE(json_is_boolean(json_object_get(j, "registered")));
    json_decref(j);
    sst_client_close(&c);
    srv_stop(&s, 0);
    sst_fc_release(&fc);
}

RL_TEST_MAIN(T(ss_1_1_versions), T(ss_1_2_reconnect), T(ss_1_3_silent_coordinator), T(ss_2_1_shards_and_selectors),
             T(ss_3_1_bad_input), T(ss_3_2_status_ping))
