/* ss_test.h — helpers for the storage server's tests (tests/unit/server/test_storage_server*.c,
 * tests/integ/server/test_storage_server*.c): a fake coordinator and clients that speak the real
 * protocol over real loopback sockets with the real codecs (blocking sockets with poll
 * timeouts), and a storage server run in-process on its own thread.
 *
 * The fake coordinator (ss_fc) accepts the storage server's connection and answers what the test
 * tells it to: HELLO, REGISTER_STORAGE, PEEK (with versions of the test's choosing), POP (recorded)
 * and GET_SHARD_MAP (answered from ss_fc.map automatically while waiting for anything else).
 *
 * Every wait has a timeout (SS_T_WAIT_MS unless given); a broken server fails a test instead of
 * hanging it.
 */
#ifndef RL_SS_TEST_H
#define RL_SS_TEST_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "net_fixture.h"
#include <unistd.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/clock.h"
#include "net/frame.h"
#include "net/proto.h"
#include "test.h"
#include "tuple/tuple.h"

#define SS_T_WAIT_MS 10000

static inline uint64_t sst_now_ms(void) { return rl__clock_mono_ns() / 1000000u; }

/* ---- raw sockets ---- */

static inline int sst_listen(uint16_t *out_port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ASSERT_EQ(listen(fd, 16), 0);
    socklen_t sl = sizeof sa;
    ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    *out_port = ntohs(sa.sin_port);
    return fd;
}

/* The test cluster's member credentials (tests/net_fixture.h): the storage servers under test
 * get them (sst_auth), and the fake peers below prove them in the handshake. */
static inline const rl__net_auth *sst_auth(void) {
    static rl__net_auth a;
    static int done;
    if (!done) rl_test_auth_member(&a, 0), done = 1;
    return &a;
}

/* Accept one connection within timeout_ms and run the server side of the handshake on it (-1 on
 * timeout; a failed handshake fails the test). */
static inline int sst_accept(int lfd, int timeout_ms) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return -1;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ASSERT_OK(rl_test_raw_serve_handshake(fd, sst_auth(), timeout_ms, NULL));
    }
    return fd;
}

/* Connect to the server under test and pass the handshake as a member. */
static inline int sst_connect(uint16_t port) { return rl_test_raw_open("127.0.0.1", port, sst_auth()); }

static inline void sst_write_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* the peer closed: the test's next read notices */
        b += w;
        n -= (size_t)w;
    }
}

/* Read exactly n bytes within timeout_ms. 1 ok, 0 EOF, -1 timeout/error. */
static inline int sst_read_n(int fd, void *p, size_t n, int timeout_ms) {
    uint8_t *b = p;
    uint64_t end = sst_now_ms() + (uint64_t)timeout_ms;
    while (n) {
        uint64_t now = sst_now_ms();
        if (now >= end) return -1;
        struct pollfd pf = {fd, POLLIN, 0};
        int pr = poll(&pf, 1, (int)(end - now));
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return -1;
        ssize_t r = recv(fd, b, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return 0;
        if (r < 0) return -1;
        b += r;
        n -= (size_t)r;
    }
    return 1;
}

/* 1 if the peer closed fd within timeout_ms (reading and dropping whatever arrives). */
static inline int sst_wait_closed(int fd, int timeout_ms) {
    uint8_t buf[4096];
    uint64_t end = sst_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = sst_now_ms();
        if (now >= end) return 0;
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)(end - now)) <= 0) return 0;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) return 1;
    }
}

/* Read one frame: 1 ok (payload in *pl), 0 EOF, -1 timeout. */
static inline int sst_read_frame(int fd, rl__frame_header *h, rl_buf *pl, int timeout_ms) {
    uint8_t hdr[RL_FRAME_HEADER_LEN];
    int r = sst_read_n(fd, hdr, sizeof hdr, timeout_ms);
    if (r != 1) return r;
    ASSERT_EQ(rl__frame_header_decode(hdr, h), 0);
    rl__buf_reset(pl);
    ASSERT_OK(rl__buf_reserve(pl, h->payload_len + 1));
    if (h->payload_len) {
        r = sst_read_n(fd, pl->data, h->payload_len, timeout_ms);
        if (r != 1) return r;
    }
    pl->len = h->payload_len;
    pl->data[pl->len] = 0;
    return 1;
}

/* Send message m (type and flags from m) with id. */
static inline void sst_send(int fd, uint64_t id, const rl__msg *m) {
    rl_buf b;
    rl__buf_init(&b);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_frame_encode(&b, id, m, &why);
    if (rc != RL_OK) fail_msg("encode %s: %s", rl__msg_type_name(m->type), rl__errdetail_get(&why));
    sst_write_all(fd, b.data, b.len);
    rl__buf_release(&b);
}

static inline void sst_send_hello(int fd, uint8_t role, uint32_t id) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.u.hello_req = (rl__msg_hello_req){RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION, role, id, (const uint8_t *)"test", 4};
    sst_send(fd, 1, &m);
}

/* ---- a client ---- */

typedef struct {
    int fd;
    uint64_t next_id;
    rl_arena a; /* decoded replies (reset by each call) */
    rl_buf pl;  /* the last reply's payload */
} sst_client;

/* Connect and shake hands as `role` (a HELLO reply must come back). */
static inline void sst_client_open(sst_client *c, uint16_t port, uint8_t role, uint32_t id) {
    memset(c, 0, sizeof c[0]);
    c->fd = sst_connect(port);
    c->next_id = 100;
    rl__arena_init(&c->a, 0);
    rl__buf_init(&c->pl);
    sst_send_hello(c->fd, role, id);
    rl__frame_header h;
    ASSERT_EQ(sst_read_frame(c->fd, &h, &c->pl, SS_T_WAIT_MS), 1);
    ASSERT_EQ(h.type, RL_MSG_HELLO);
    ASSERT_EQ(h.flags, RL_FRAME_REPLY);
    rl__msg_hello_reply hr;
    ASSERT_OK(rl__msg_hello_reply_decode(c->pl.data, c->pl.len, NULL, &hr, NULL));
    ASSERT_EQ(hr.role, RL_ROLE_STORAGE);
}

static inline void sst_client_close(sst_client *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    rl__arena_release(&c->a);
    rl__buf_release(&c->pl);
}

/* Send request *req and wait for its reply into *out (decoded into c->a). Returns 0 for a
 * reply, or the error code of an error reply (out->u.error holds it). */
static inline int sst_call_t(sst_client *c, const rl__msg *req, rl__msg *out, int timeout_ms) {
    uint64_t id = ++c->next_id;
    sst_send(c->fd, id, req);
    for (;;) {
        rl__frame_header h;
        int r = sst_read_frame(c->fd, &h, &c->pl, timeout_ms);
        if (r != 1) fail_msg("no reply to %s (%s)", rl__msg_type_name(req->type), r ? "timeout" : "closed");
        if (h.id != id) continue;
        ASSERT_EQ(h.type, req->type);
        rl__arena_reset(&c->a);
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        int rc = rl__msg_decode(h.type, h.flags, c->pl.data, c->pl.len, &c->a, out, &why);
        if (rc != RL_OK)
            fail_msg("reply to %s does not decode: %s", rl__msg_type_name(h.type), rl__errdetail_get(&why));
        if (h.flags & RL_FRAME_ERROR) return out->u.error.code;
        return 0;
    }
}
static inline int sst_call(sst_client *c, const rl__msg *req, rl__msg *out) {
    return sst_call_t(c, req, out, SS_T_WAIT_MS);
}

static inline rl__msg sst_req(uint16_t type) {
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = type;
    return m;
}

/* GET key at v: returns 0 (present/absent in *present, value in *val), or the error code. */
static inline int sst_get(sst_client *c, rl__version v, const char *key, size_t kl, int *present, rl_buf *val) {
    rl__msg q = sst_req(RL_MSG_GET), r;
    q.u.get_req.version = v;
    q.u.get_req.key = (const uint8_t *)key;
    q.u.get_req.key_len = (uint32_t)kl;
    int rc = sst_call(c, &q, &r);
    if (rc) return rc;
    *present = r.u.get_reply.present;
    if (val) {
        rl__buf_reset(val);
        rl__buf_append(val, r.u.get_reply.value, r.u.get_reply.value_len);
    }
    return 0;
}

/* ---- the fake coordinator ---- */

typedef struct {
    int lfd, fd;
    uint16_t port;
    rl_arena a;
    rl_buf pl;
    rl__frame_header h;   /* the last frame received */
    rl__msg m;            /* ... decoded */
    rl__version last_pop; /* the newest POP received */
    int pops, maps, hellos;
    rl__msg_get_shard_map_reply map; /* answered to GET_SHARD_MAP (the test owns the arrays) */
    uint32_t storage_id;             /* the HELLO's id */
    rl__version reg_durable;         /* the last REGISTER_STORAGE's durable version */
    uint64_t reg_id;
    uint16_t reg_port;
} sst_fc;

static inline void sst_fc_init(sst_fc *f) {
    memset(f, 0, sizeof f[0]);
    f->lfd = sst_listen(&f->port);
    f->fd = -1;
    rl__arena_init(&f->a, 0);
    rl__buf_init(&f->pl);
}

static inline void sst_fc_drop(sst_fc *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}

static inline void sst_fc_release(sst_fc *f) {
    sst_fc_drop(f);
    if (f->lfd >= 0) close(f->lfd);
    f->lfd = -1;
    rl__arena_release(&f->a);
    rl__buf_release(&f->pl);
}

static inline void sst_fc_reply(sst_fc *f, uint16_t type, uint64_t id, rl__msg *m) {
    m->type = type;
    m->flags = RL_FRAME_REPLY;
    sst_send(f->fd, id, m);
}

/* Wait for a request of `type` (0: any) on the storage server's connection, answering HELLO,
 * POP and GET_SHARD_MAP by the way (unless that is the type waited for). Returns 1 with f->h /
 * f->m set, 0 if the connection closed, -1 on timeout. */
static inline int sst_fc_wait(sst_fc *f, uint16_t type, int timeout_ms) {
    uint64_t end = sst_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = sst_now_ms();
        if (now >= end) return -1;
        int r = sst_read_frame(f->fd, &f->h, &f->pl, (int)(end - now));
        if (r != 1) return r;
        rl__arena_reset(&f->a);
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        int rc = rl__msg_decode(f->h.type, f->h.flags, f->pl.data, f->pl.len, &f->a, &f->m, &why);
        if (rc != RL_OK) fail_msg("the storage server sent a frame that does not decode: %s", rl__errdetail_get(&why));
        if (f->h.flags != 0)
            fail_msg("the storage server sent a reply frame (%s) to the coordinator", rl__msg_type_name(f->h.type));
        if (type && f->h.type == type) return 1;
        rl__msg rep;
        memset(&rep, 0, sizeof rep);
        switch (f->h.type) {
        case RL_MSG_HELLO:
            f->hellos++;
            f->storage_id = f->m.u.hello_req.id;
            rep.u.hello_reply =
                (rl__msg_hello_reply){RL_PROTOCOL_VERSION, RL_ROLE_COORDINATOR, 0, (const uint8_t *)"host1", 5};
            sst_fc_reply(f, RL_MSG_HELLO, f->h.id, &rep);
            break;
        case RL_MSG_POP:
            f->pops++;
            ASSERT_TRUE(f->m.u.pop_req.durable_version >= f->last_pop);
            f->last_pop = f->m.u.pop_req.durable_version;
            sst_fc_reply(f, RL_MSG_POP, f->h.id, &rep);
            break;
        case RL_MSG_GET_SHARD_MAP:
            f->maps++;
            rep.u.get_shard_map_reply = f->map;
            sst_fc_reply(f, RL_MSG_GET_SHARD_MAP, f->h.id, &rep);
            break;
        default:
            if (!type) return 1;
            fail_msg("the storage server sent %s while the test waited for %s", rl__msg_type_name(f->h.type),
                     rl__msg_type_name(type));
        }
    }
}

/* Accept the storage server's connection and register it: HELLO, REGISTER_STORAGE answered with
 * start_version and the ranges; then the first PEEK is awaited (left in f->m for the test). */
static inline void sst_fc_accept_register(sst_fc *f, rl__version start_version, const rl__keyrange *ranges,
                                          uint32_t n_ranges) {
    f->fd = sst_accept(f->lfd, SS_T_WAIT_MS);
    ASSERT_TRUE(f->fd >= 0);
    ASSERT_EQ(sst_fc_wait(f, RL_MSG_REGISTER_STORAGE, SS_T_WAIT_MS), 1);
    f->reg_durable = f->m.u.register_storage_req.durable_version;
    f->reg_port = f->m.u.register_storage_req.port;
    ASSERT_EQ(f->m.u.register_storage_req.id, f->storage_id);
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rep.u.register_storage_reply.start_version = start_version;
    rep.u.register_storage_reply.ranges = ranges;
    rep.u.register_storage_reply.n_ranges = n_ranges;
    sst_fc_reply(f, RL_MSG_REGISTER_STORAGE, f->h.id, &rep);
    ASSERT_EQ(sst_fc_wait(f, RL_MSG_PEEK, SS_T_WAIT_MS), 1);
}

/* Answer the PEEK in f->m with these versions and end_version, then wait for the next PEEK
 * (left in f->m). */
static inline void sst_fc_peek_reply(sst_fc *f, const rl__msg_peek_version *vs, uint32_t n, rl__version end_version) {
    ASSERT_EQ(f->h.type, RL_MSG_PEEK);
    rl__msg rep;
    memset(&rep, 0, sizeof rep);
    rep.u.peek_reply.end_version = end_version;
    rep.u.peek_reply.versions = vs;
    rep.u.peek_reply.n_versions = n;
    sst_fc_reply(f, RL_MSG_PEEK, f->h.id, &rep);
    ASSERT_EQ(sst_fc_wait(f, RL_MSG_PEEK, SS_T_WAIT_MS), 1);
    ASSERT_EQ(f->m.u.peek_req.after_version, end_version);
}

/* Wait (answering POPs) until a POP of at least v arrived. The PEEK held in f->m is kept
 * pending: the frame after it must be a POP or GET_SHARD_MAP. */
static inline void sst_fc_wait_pop(sst_fc *f, rl__version v) {
    rl__frame_header h = f->h;
    uint64_t end = sst_now_ms() + SS_T_WAIT_MS;
    while (f->last_pop < v) {
        ASSERT_TRUE(sst_now_ms() < end);
        int r = sst_fc_wait(f, RL_MSG_PEEK, 200);
        ASSERT_TRUE(r != 0);
        if (r == 1) fail_msg("a second PEEK while one was outstanding");
    }
    f->h = h; /* the outstanding PEEK stays the one to answer */
}

/* ---- building mutations ---- */

static inline rl__mutation sst_set(const char *k, const char *v) {
    rl__mutation m = {RL_MUT_SET, (const uint8_t *)k, (uint32_t)strlen(k), (const uint8_t *)v, (uint32_t)strlen(v)};
    return m;
}

static inline rl__keyrange sst_range(const char *b, size_t bl, const char *e, size_t el) {
    rl__keyrange r = {(const uint8_t *)b, (uint32_t)bl, (const uint8_t *)e, (uint32_t)el};
    return r;
}

#endif
