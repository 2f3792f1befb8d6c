/* net_fixture.c — the handshake on raw sockets for tests (net_fixture.h). */
#include "net_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "base/buf.h"
#include "base/clock.h"
#include "test.h"

#define TEST_NAME "test:TESTCLUSTER0123456789abcdefghijklmn"
#define OTHER_NAME "test:OTHERCLUSTER0123456789abcdefghijklm"

static void make(rl__net_auth *out, int other, int member) {
    uint8_t secret[RL_AUTH_SECRET_LEN];
    memset(secret, other ? 0x5a : 0xa5, sizeof secret);
    const char *name = other ? OTHER_NAME : TEST_NAME;
    ASSERT_OK(rl__auth_init(out, name, strlen(name), member ? secret : NULL, member ? sizeof secret : 0));
}

void rl_test_auth_member(rl__net_auth *out, int other) { make(out, other, 1); }
void rl_test_auth_client(rl__net_auth *out, int other) { make(out, other, 0); }
const char *rl_test_cluster_name(int other) { return other ? OTHER_NAME : TEST_NAME; }

void rl_test_write_keyfile(const char *path) {
    (void)unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) fail_msg("cannot create %s: %s", path, strerror(errno));
    rl_buf b;
    rl__buf_init(&b);
    rl__buf_printf(&b, "# the test cluster's key file (tests/net_fixture.c)\ncluster %s\nsecret ", TEST_NAME);
    for (int i = 0; i < RL_AUTH_SECRET_LEN; i++) rl__buf_printf(&b, "a5");
    rl__buf_append_str(&b, "\n");
    ASSERT_EQ(write(fd, b.data, b.len), (ssize_t)b.len);
    rl__buf_release(&b);
    close(fd);
}

int rl_test_raw_connect(const char *ip, uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    ASSERT_EQ(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        fail_msg("connect to %s:%u: %s", ip, port, strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int rl_test_raw_send(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read exactly n bytes before the deadline (monotonic ns). */
static int recv_exact(int fd, uint8_t *p, size_t n, uint64_t deadline) {
    while (n > 0) {
        uint64_t now = rl__clock_mono_ns();
        if (now >= deadline) return RL_E_TIMED_OUT;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)((deadline - now) / 1000000u) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) return RL_E_TIMED_OUT;
        ssize_t got = recv(fd, p, n, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return RL_E_CONNECTION_FAILED;
        p += got;
        n -= (size_t)got;
    }
    return RL_OK;
}

int rl_test_raw_recv_frame(int fd, rl__frame_header *h, uint8_t *payload, size_t cap, int timeout_ms) {
    uint64_t deadline = rl__clock_mono_ns() + (uint64_t)timeout_ms * 1000000u;
    uint8_t hb[RL_FRAME_HEADER_LEN];
    int rc = recv_exact(fd, hb, sizeof hb, deadline);
    if (rc) return rc;
    if (rl__frame_header_decode(hb, h) != 0) return RL_E_MALFORMED_FRAME;
    if (h->payload_len > cap)
        fail_msg("a frame of %u bytes (type %u) where at most %zu were expected", h->payload_len, h->type, cap);
    return recv_exact(fd, payload, h->payload_len, deadline);
}

int rl_test_raw_handshake(int fd, const rl__net_auth *auth, int cls, unsigned flags, int timeout_ms) {
    rl__frame_header h;
    uint8_t pl[RL_NET_HANDSHAKE_MAX_PAYLOAD];
    int rc = rl_test_raw_recv_frame(fd, &h, pl, sizeof pl, timeout_ms);
    if (rc) return rc;
    rl__msg m;
    if (h.type != RL_MSG_AUTH_CHALLENGE || h.flags != 0) return RL_E_PROTOCOL_UNEXPECTED_MESSAGE;
    if ((rc = rl__msg_decode(h.type, h.flags, pl, h.payload_len, NULL, &m, NULL))) return rc;
    uint8_t snonce[RL_AUTH_NONCE_LEN];
    memcpy(snonce, m.u.auth_challenge.nonce, sizeof snonce);
    rl__msg req;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_AUTH;
    rl__msg_auth_req *a = &req.u.auth_req;
    a->magic = RL_PROTOCOL_MAGIC;
    a->protocol_version = RL_PROTOCOL_VERSION;
    a->auth_class = (uint8_t)cls;
    ASSERT_OK(rl__auth_random(a->nonce, sizeof a->nonce));
    /* A MEMBER claim without the member key: the best a stranger can do is sign with what it has. */
    int key_cls = cls == RL_AUTH_MEMBER && !auth->has_member_key ? RL_AUTH_CLIENT : cls;
    rl__net_auth as = *auth;
    if (key_cls != cls) memcpy(as.member_key, as.cluster_key, sizeof as.member_key), as.has_member_key = 1;
    ASSERT_OK(rl__auth_proof(&as, cls, 'C', snonce, a->nonce, a->proof));
    if (flags & RL_TEST_HS_BAD_PROOF) a->proof[7] ^= 0x10;
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__msg_frame_encode(&b, 0, &req, NULL));
    int sent = rl_test_raw_send(fd, b.data, b.len);
    rl__buf_release(&b);
    if (sent) return RL_E_CONNECTION_FAILED;
    if ((rc = rl_test_raw_recv_frame(fd, &h, pl, sizeof pl, timeout_ms))) return rc;
    if (h.type != RL_MSG_AUTH || !(h.flags & RL_FRAME_REPLY)) return RL_E_PROTOCOL_UNEXPECTED_MESSAGE;
    rl__msg r;
    if ((rc = rl__msg_decode(h.type, h.flags, pl, h.payload_len, NULL, &r, NULL))) return rc;
    if (h.flags & RL_FRAME_ERROR) return r.u.error.code;
    return rl__auth_verify(&as, cls, 'S', snonce, a->nonce, r.u.auth_reply.proof) == RL_OK ? RL_OK
                                                                                           : RL_E_INVALID_CLUSTER_ID;
}

/* Send m as a frame with id; 0 or -1. */
static int send_msg(int fd, uint64_t id, const rl__msg *m) {
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__msg_frame_encode(&b, id, m, NULL));
    int r = rl_test_raw_send(fd, b.data, b.len);
    rl__buf_release(&b);
    return r;
}

int rl_test_raw_serve_handshake(int fd, const rl__net_auth *auth, int timeout_ms, int *out_class) {
    rl__msg ch;
    memset(&ch, 0, sizeof ch);
    ch.type = RL_MSG_AUTH_CHALLENGE;
    ch.u.auth_challenge.magic = RL_PROTOCOL_MAGIC;
    ch.u.auth_challenge.protocol_version = RL_PROTOCOL_VERSION;
    ASSERT_OK(rl__auth_random(ch.u.auth_challenge.nonce, RL_AUTH_NONCE_LEN));
    if (send_msg(fd, 0, &ch)) return RL_E_CONNECTION_FAILED;
    rl__frame_header h;
    uint8_t pl[RL_NET_HANDSHAKE_MAX_PAYLOAD];
    int rc = rl_test_raw_recv_frame(fd, &h, pl, sizeof pl, timeout_ms);
    if (rc) return rc;
    if (h.type != RL_MSG_AUTH || h.flags != 0) return RL_E_PROTOCOL_UNEXPECTED_MESSAGE;
    rl__msg m;
    if ((rc = rl__msg_decode(h.type, h.flags, pl, h.payload_len, NULL, &m, NULL))) return rc;
    const rl__msg_auth_req *a = &m.u.auth_req;
    rc = rl__auth_verify(auth, a->auth_class, 'C', ch.u.auth_challenge.nonce, a->nonce, a->proof);
    rl__msg r;
    memset(&r, 0, sizeof r);
    r.type = RL_MSG_AUTH;
    if (rc) {
        r.flags = RL_FRAME_REPLY | RL_FRAME_ERROR;
        r.u.error.code = rc;
        (void)send_msg(fd, h.id, &r);
        return rc;
    }
    r.flags = RL_FRAME_REPLY;
    ASSERT_OK(rl__auth_proof(auth, a->auth_class, 'S', ch.u.auth_challenge.nonce, a->nonce, r.u.auth_reply.proof));
    if (send_msg(fd, h.id, &r)) return RL_E_CONNECTION_FAILED;
    if (out_class) *out_class = a->auth_class;
    return RL_OK;
}

int rl_test_raw_open(const char *ip, uint16_t port, const rl__net_auth *auth) {
    int fd = rl_test_raw_connect(ip, port);
    ASSERT_OK(rl_test_raw_handshake(fd, auth, rl__auth_connect_class(auth), 0, 5000));
    return fd;
}
