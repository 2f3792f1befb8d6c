/* test_cluster_bad_input.c — bad input to each role of a real cluster (Tests: "Bad
 * input"). A test client sends random bytes, frames before the HELLO, wrong handshakes (magic,
 * version), truncated, oversized and undecodable frames, unknown and reserved types, bad flags,
 * replies where requests belong, and seeded random frame sequences, to the coordinator and to a
 * storage server. After every session the server must still be up (same pid) and answer a good
 * client correctly: PING echoes, STATUS is JSON of its role, and a value committed before the
 * attack reads back and new commits work.
 *
 * Where docs/protocol.md §8 says the connection closes (a header the frame decoder refuses, ERROR
 * without REPLY, an unknown or reserved type, a payload that does not decode, a first frame that
 * is not HELLO, a frame cut short by the end of the stream), the test also checks that the server
 * closed it; a wrong handshake must be answered with incompatible_protocol_version first.
 *
 * Each session first passes the AUTH handshake (docs/protocol.md §2) as a member of the cluster
 * (tests/net_fixture.h), except the sessions that attack the handshake itself: bytes before it, a
 * frame longer than a HELLO, a version-1 HELLO, a wrong or forged proof, another cluster's name.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>

#include "base/buf.h"
#include "cluster_fixture.h"
#include "net/frame.h"
#include "net_fixture.h"
#include "net/proto.h"
#include "test.h"

static int raw_connect(uint16_t port) { return rl_test_raw_connect("127.0.0.1", port); }

/* The server may already have closed: that is allowed. */
static void raw_send(int fd, const void *p, size_t n) { (void)rl_test_raw_send(fd, p, n); }

static void frame(rl_buf *out, uint16_t type, uint16_t flags, uint64_t id, const void *payload, uint32_t len) {
    uint8_t h[RL_FRAME_HEADER_LEN];
    rl__frame_header fh = {.payload_len = len, .type = type, .flags = flags, .id = id};
    rl__frame_header_encode(&fh, h);
    rl__buf_append(out, h, sizeof h);
    if (len) rl__buf_append(out, payload, len);
}

static void hello(rl_buf *out, uint32_t magic, uint32_t version) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.u.hello_req.magic = magic;
    m.u.hello_req.protocol_version = version;
    m.u.hello_req.role = RL_ROLE_CLIENT;
    m.u.hello_req.host = (const uint8_t *)"bad";
    m.u.hello_req.host_len = 3;
    ASSERT_OK(rl__msg_frame_encode(out, 1, &m, NULL));
}

/* Read what the server sends until it closes (1) or ms pass (0). Frames received are parsed: if
 * want_error is not 0, an error reply with that code must come before the close. */
static int expect_closed(int fd, int ms, int want_error) {
    uint8_t buf[65536];
    size_t have = 0;
    int saw_error = 0;
    for (int waited = 0; waited < ms;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, 50);
        if (r == 0) {
            waited += 50;
            continue;
        }
        ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (want_error && !saw_error) fail_msg("closed without the error reply %d", want_error);
            return 1;
        }
        have += (size_t)n;
        while (have >= RL_FRAME_HEADER_LEN) {
            rl__frame_header h;
            if (rl__frame_header_decode(buf, &h) != 0 || h.payload_len > sizeof buf - RL_FRAME_HEADER_LEN) {
                have = 0;
                break;
            }
            if (have < RL_FRAME_HEADER_LEN + h.payload_len) break;
            if ((h.flags & RL_FRAME_ERROR) && h.payload_len >= 4) {
                int32_t code = (int32_t)(buf[16] | buf[17] << 8 | buf[18] << 16 | (uint32_t)buf[19] << 24);
                if (code == want_error) saw_error = 1;
            }
            size_t used = RL_FRAME_HEADER_LEN + h.payload_len;
            memmove(buf, buf + used, have - used);
            have -= used;
        }
        if (have == sizeof buf) have = 0;
    }
    return 0;
}

typedef struct {
    rl_test_cluster c;
    int pids[3];
    rl_db *db; /* the good client's database on the cluster */
    int checks;
} bad_env;

/* The good client: the server on port still answers PING and STATUS correctly, its pid is the
 * same, and the committed data reads back and a new commit works. */
static void good_client(bad_env *e, uint32_t id, uint16_t port, const char *what) {
    for (int i = 0; i <= e->c.n_storage; i++)
        if (rl_test_cluster_pid(&e->c, (uint32_t)i) != e->pids[i])
            fail_msg("after %s: process %d (pid %d) is gone", what, i, e->pids[i]);
    rl__admin_conn *a = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__admin_conn_open(port, &e->c.key.auth, 3000, &a, &msg);
    if (rc) fail_msg("after %s: a good connection to process %u fails: %s", what, id, rl__errdetail_get(&msg));
    rl__msg req, rep;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_PING;
    char pl[32];
    snprintf(pl, sizeof pl, "ping-%d", e->checks);
    req.u.ping_req.payload = (const uint8_t *)pl;
    req.u.ping_req.payload_len = (uint32_t)strlen(pl);
    rc = rl__admin_conn_call(a, &req, &rep, 3000, &msg);
    if (rc) fail_msg("after %s: PING to process %u: %s", what, id, rl__errdetail_get(&msg));
    ASSERT_MEM_EQ(rep.u.ping_reply.payload, rep.u.ping_reply.payload_len, pl, strlen(pl));
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_STATUS;
    rc = rl__admin_conn_call(a, &req, &rep, 3000, &msg);
    if (rc) fail_msg("after %s: STATUS of process %u: %s", what, id, rl__errdetail_get(&msg));
    json_error_t je;
    json_t *j = json_loadb((const char *)rep.u.status_reply.json, rep.u.status_reply.json_len, 0, &je);
    ASSERT_NOT_NULL(j);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "role")), id == 0 ? "coordinator" : "storage");
    json_decref(j);
    rl__admin_conn_close(a);
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e->db, &t));
    int present = 0;
    rl_future *f = rl_txn_get(t, "bad/before", 10, 0);
    ASSERT_OK(rl_future_wait(f));
    const uint8_t *v;
    int vl;
    ASSERT_OK(rl_future_get_value(f, &present, &v, &vl));
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(v, (size_t)vl, "kept", 4);
    rl_future_free(f);
    char k[32];
    snprintf(k, sizeof k, "bad/after/%d", e->checks);
    ASSERT_OK(rl_txn_set(t, k, strlen(k), "ok", 2));
    f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    e->checks++;
}

/* One session: the handshake as a member (unless raw), then send bytes (then shut down our write
 * side), check the close rule. */
static void session_as(bad_env *e, uint32_t id, uint16_t port, const char *what, const rl_buf *bytes, int must_close,
                       int want_error, int raw) {
    int fd = raw_connect(port);
    if (!raw) ASSERT_OK(rl_test_raw_handshake(fd, &e->c.key.auth, RL_AUTH_MEMBER, 0, 5000));
    raw_send(fd, bytes->data, bytes->len);
    int closed;
    if (must_close) {
        /* Without our EOF: the server must close by itself for these. */
        closed = expect_closed(fd, 5000, want_error);
        if (!closed) fail_msg("%s to process %u: the server did not close the connection", what, id);
    } else {
        shutdown(fd, SHUT_WR);
        (void)expect_closed(fd, 2000, 0);
    }
    close(fd);
    good_client(e, id, port, what);
}

static void session(bad_env *e, uint32_t id, uint16_t port, const char *what, const rl_buf *bytes, int must_close,
                    int want_error) {
    session_as(e, id, port, what, bytes, must_close, want_error, 0);
}

/* The handshake attacked: every attempt is refused (the right error, or a close), and the server
 * lives on. */
static void attack_handshake(bad_env *e, uint32_t id, uint16_t port, uint64_t *rs) {
    rl_buf b;
    rl__buf_init(&b);
    /* A version-1 client: HELLO first. */
    hello(&b, RL_PROTOCOL_MAGIC, 1);
    session_as(e, id, port, "a HELLO before the handshake", &b, 1, RL_E_INCOMPATIBLE_PROTOCOL_VERSION, 1);
    rl__buf_reset(&b);
    frame(&b, RL_MSG_PING, 0, 1, "\x00\x00\x00\x00", 4);
    session_as(e, id, port, "PING before the handshake", &b, 1, 0, 1);
    /* A frame longer than a HELLO before the handshake: closed at its header. */
    rl__buf_reset(&b);
    {
        uint8_t h[RL_FRAME_HEADER_LEN];
        rl__frame_header fh = {
            .payload_len = RL_NET_HANDSHAKE_MAX_PAYLOAD + 1, .type = RL_MSG_AUTH, .flags = 0, .id = 0};
        rl__frame_header_encode(&fh, h);
        rl__buf_append(&b, h, sizeof h);
    }
    session_as(e, id, port, "an AUTH longer than a HELLO", &b, 1, 0, 1);
    for (int round = 0; round < 10; round++) {
        rl__buf_reset(&b);
        size_t n = 1 + rl_test_rand_below(rs, 200);
        for (size_t i = 0; i < n; i++) rl__buf_append_byte(&b, (uint8_t)rl_test_rand(rs));
        session_as(e, id, port, "random bytes before the handshake", &b, 0, 0, 1);
    }
    /* Proofs: a flipped bit, another cluster's name, a member claim with the client key only. */
    rl__net_auth other, client;
    rl_test_auth_member(&other, 1);
    rl_test_auth_client(&client, 0);
    memcpy(client.cluster_key, e->c.key.auth.cluster_key, sizeof client.cluster_key); /* this cluster's file */
    struct {
        const char *what;
        const rl__net_auth *auth;
        int cls;
        unsigned flags;
        int want;
    } cases[] = {
        {"a member proof with a flipped bit", &e->c.key.auth, RL_AUTH_MEMBER, RL_TEST_HS_BAD_PROOF,
         RL_E_UNAUTHORIZED_ATTEMPT},
        {"a client proof with a flipped bit", &e->c.key.auth, RL_AUTH_CLIENT, RL_TEST_HS_BAD_PROOF,
         RL_E_INVALID_CLUSTER_ID},
        {"another cluster's name", &other, RL_AUTH_CLIENT, 0, RL_E_INVALID_CLUSTER_ID},
        {"another cluster's member key", &other, RL_AUTH_MEMBER, 0, RL_E_UNAUTHORIZED_ATTEMPT},
        {"a member claim with the cluster file only", &client, RL_AUTH_MEMBER, 0, RL_E_UNAUTHORIZED_ATTEMPT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = raw_connect(port);
        int rc = rl_test_raw_handshake(fd, cases[i].auth, cases[i].cls, cases[i].flags, 5000);
        if (rc != cases[i].want)
            fail_msg("%s to process %u: %s, expected %s", cases[i].what, id, rl_error_name(rc),
                     rl_error_name(cases[i].want));
        if (!expect_closed(fd, 5000, 0)) fail_msg("%s to process %u: not closed after the refusal", cases[i].what, id);
        close(fd);
        good_client(e, id, port, cases[i].what);
    }
    /* The client key passes, but then asks for a member's role: refused at the HELLO. */
    {
        int fd = raw_connect(port);
        ASSERT_OK(rl_test_raw_handshake(fd, &client, RL_AUTH_CLIENT, 0, 5000));
        rl__buf_reset(&b);
        rl__msg m;
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_HELLO;
        m.u.hello_req.magic = RL_PROTOCOL_MAGIC;
        m.u.hello_req.protocol_version = RL_PROTOCOL_VERSION;
        m.u.hello_req.role = RL_ROLE_ADMIN;
        m.u.hello_req.host = (const uint8_t *)"rl";
        m.u.hello_req.host_len = 2;
        ASSERT_OK(rl__msg_frame_encode(&b, 1, &m, NULL));
        raw_send(fd, b.data, b.len);
        if (!expect_closed(fd, 5000, RL_E_UNAUTHORIZED_ATTEMPT))
            fail_msg("an admin HELLO with the client key to process %u: not closed", id);
        close(fd);
        good_client(e, id, port, "an admin HELLO with the client key");
    }
    rl__buf_release(&b);
}

static void attack(bad_env *e, uint32_t id, uint64_t *rs) {
    uint16_t port = 0;
    int pid = 0;
    rl_buf b;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__buf_init(&b);
    ASSERT_OK(rl__cluster_pid(e->c.dir, id, &pid, &port, &msg));
    printf("attacking process %u (pid %d, port %u)\n", id, pid, port);
    attack_handshake(e, id, port, rs);
    /* A frame before the HELLO. */
    rl__buf_reset(&b);
    frame(&b, RL_MSG_PING, 0, 1, "\x00\x00\x00\x00", 4);
    session(e, id, port, "PING before HELLO", &b, 1, 0);
    /* Wrong handshakes: answered with incompatible_protocol_version, then closed. */
    rl__buf_reset(&b);
    hello(&b, 0x12345678u, RL_PROTOCOL_VERSION);
    session(e, id, port, "HELLO with a wrong magic", &b, 1, RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION + 1);
    session(e, id, port, "HELLO with a wrong version", &b, 1, RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    /* Truncated HELLO payload (the stream ends inside the frame). */
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    b.len -= 3;
    session(e, id, port, "truncated HELLO", &b, 0, 0);
    /* After a good HELLO: oversized, unknown, reserved, bad flags, undecodable, truncated. */
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    {
        uint8_t h[RL_FRAME_HEADER_LEN];
        rl__frame_header fh = {.payload_len = RL_NET_MAX_PAYLOAD + 1, .type = RL_MSG_GET, .flags = 0, .id = 2};
        rl__frame_header_encode(&fh, h);
        rl__buf_append(&b, h, sizeof h);
    }
    session(e, id, port, "a frame over 64 MiB", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    frame(&b, 99, 0, 2, "x", 1);
    session(e, id, port, "unknown type 99", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    frame(&b, RL_MSG_RESERVED_ADMIN_FIRST + 3, 0, 2, NULL, 0);
    session(e, id, port, "reserved type 33", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    frame(&b, RL_MSG_PING, RL_FRAME_ERROR, 2, "\x00\x00\x00\x00", 4);
    session(e, id, port, "flags ERROR without REPLY", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    frame(&b, RL_MSG_PING, 0x80, 2, "\x00\x00\x00\x00", 4);
    session(e, id, port, "unknown flag bits", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    /* GET: version, then a key length of 1000 with 3 bytes behind it. */
    frame(&b, RL_MSG_GET, 0, 2,
          "\x01\x00\x00\x00\x00\x00\x00\x00\xe8\x03\x00\x00"
          "abc",
          15);
    session(e, id, port, "GET with a key longer than its payload", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    frame(&b, RL_MSG_STATUS, 0, 2, "junk", 4);
    session(e, id, port, "STATUS with trailing bytes", &b, 1, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    {
        uint8_t h[RL_FRAME_HEADER_LEN];
        rl__frame_header fh = {.payload_len = 100, .type = RL_MSG_GET, .flags = 0, .id = 2};
        rl__frame_header_encode(&fh, h);
        rl__buf_append(&b, h, sizeof h);
        rl__buf_append(&b, "0123456789", 10);
    }
    session(e, id, port, "a GET cut short by the end of the stream", &b, 0, 0);
    /* Out of order: a reply where a request belongs, a second HELLO (the rules for these are the
     * role's: only survival is required). */
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    frame(&b, RL_MSG_GET, RL_FRAME_REPLY, 7, "\x00\x00\x00\x00\x00", 5);
    session(e, id, port, "a GET reply sent as if a request", &b, 0, 0);
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    session(e, id, port, "HELLO twice", &b, 0, 0);
    /* Random bytes. */
    for (int round = 0; round < 20; round++) {
        rl__buf_reset(&b);
        size_t n = 1 + rl_test_rand_below(rs, 200);
        for (size_t i = 0; i < n; i++) rl__buf_append_byte(&b, (uint8_t)rl_test_rand(rs));
        session(e, id, port, "random bytes", &b, 0, 0);
    }
    /* Seeded random frame sequences after a good HELLO: known and unknown types, the three legal
     * flag values and others, random payloads (some of them truncated copies of real ones). */
    static const uint16_t types[] = {1, 2, 10, 11, 12, 13, 14, 15, 16, 20, 21, 22, 23, 24, 30, 40, 77};
    for (int round = 0; round < 40; round++) {
        rl__buf_reset(&b);
        hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
        int nf = 1 + (int)rl_test_rand_below(rs, 4);
        for (int f = 0; f < nf; f++) {
            uint8_t pl[96];
            uint32_t len = (uint32_t)rl_test_rand_below(rs, sizeof pl);
            for (uint32_t i = 0; i < len; i++) pl[i] = (uint8_t)rl_test_rand(rs);
            static const uint16_t flags[] = {0, 0, 0, 1, 3, 2};
            frame(&b, types[rl_test_rand_below(rs, sizeof types / sizeof types[0])], flags[rl_test_rand_below(rs, 6)],
                  rl_test_rand(rs), pl, len);
        }
        session(e, id, port, "random frames", &b, 0, 0);
    }
    /* Connections opened and dropped without a byte, many at once. */
    int fds[64];
    for (int i = 0; i < 64; i++) fds[i] = raw_connect(port);
    for (int i = 0; i < 64; i++) close(fds[i]);
    good_client(e, id, port, "64 silent connections");
    /* A HELLO trickled byte by byte still works. */
    rl__buf_reset(&b);
    hello(&b, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
    int fd = raw_connect(port);
    ASSERT_OK(rl_test_raw_handshake(fd, &e->c.key.auth, RL_AUTH_MEMBER, 0, 5000));
    for (size_t i = 0; i < b.len; i++) {
        raw_send(fd, b.data + i, 1);
        usleep(1000);
    }
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    ASSERT_EQ(poll(&pf, 1, 3000), 1);
    uint8_t h[RL_FRAME_HEADER_LEN];
    ASSERT_EQ(recv(fd, h, sizeof h, MSG_WAITALL), (ssize_t)sizeof h);
    rl__frame_header fh;
    ASSERT_EQ(rl__frame_header_decode(h, &fh), 0);
    ASSERT_EQ(fh.type, RL_MSG_HELLO);
    ASSERT_EQ(fh.flags, RL_FRAME_REPLY);
    close(fd);
    rl__buf_release(&b);
}

/* bad-1.1: every kind of bad input to the coordinator and to a storage server. */
TEST(bad_1_1_each_role_survives) {
    bad_env e;
    memset(&e, 0, sizeof e);
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    ASSERT_OK(rl_test_cluster_start(&e.c, &o));
    for (int i = 0; i <= 2; i++) e.pids[i] = rl_test_cluster_pid(&e.c, (uint32_t)i);
    ASSERT_OK(rl_db_open(e.c.url, NULL, &e.db));
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(e.db, &t));
    ASSERT_OK(rl_txn_set(t, "bad/before", 10, "kept", 4));
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    rl_txn_free(t);
    uint64_t seed = rl_test_seed(), rs = seed;
    attack(&e, 0, &rs);
    attack(&e, 1, &rs);
    printf("%d good-client checks after bad input\n", e.checks);
    rl_db_close(e.db);
    rl_test_cluster_stop(&e.c);
}

RL_TEST_MAIN(T(bad_1_1_each_role_survives))
