/* net_fixture.h — test helpers for the wire protocol's handshake (docs/protocol.md §2): a fixed
 * test cluster's credentials, and the handshake on a raw blocking socket, so tests that speak the
 * protocol byte by byte (bad input, hand-made peers) can get past it — or fail it on purpose.
 *
 * Linked into every test program of the modules from net up (CMakeLists.txt: rl_testnet).
 */
#ifndef RL_TEST_NET_FIXTURE_H
#define RL_TEST_NET_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "net/auth.h"
#include "net/proto.h"

/* The fixed test cluster "test:TESTCLUSTER…" (an ID of RL_AUTH_ID_MIN characters) and its member
 * secret. other != 0 gives another cluster's credentials (another ID and secret): what a client
 * with the wrong cluster file, or an impostor, holds. */
void rl_test_auth_member(rl__net_auth *out, int other);
void rl_test_auth_client(rl__net_auth *out, int other);
/* The test cluster's name "test:ID" (other: the other cluster's), for cluster files. Static. */
const char *rl_test_cluster_name(int other);
/* Write the test cluster's key file (server/keyfile.h's format, mode 0600) to path; fails the
 * test when it cannot. For tests that start rlkvd themselves (--key-file). */
void rl_test_write_keyfile(const char *path);

/* rl_test_raw_connect — a blocking TCP connection to ip:port with TCP_NODELAY; fails the test when
 * the connect fails. */
int rl_test_raw_connect(const char *ip, uint16_t port);

enum {
    RL_TEST_HS_BAD_PROOF = 0x1, /* send a proof with one bit flipped */
};

/* rl_test_raw_handshake — the connecting side of the handshake on fd (blocking): read the
 * server's AUTH_CHALLENGE, send AUTH claiming class cls (RL_AUTH_CLIENT or RL_AUTH_MEMBER) with a
 * proof made with auth's key for it (a MEMBER claim with a client's auth sends a proof made with
 * the cluster key instead: what a stranger could do), read the reply and check the server's
 * proof. Returns RL_OK; the code of the server's error reply (RL_E_INVALID_CLUSTER_ID,
 * RL_E_UNAUTHORIZED_ATTEMPT, …); RL_E_INVALID_CLUSTER_ID when the server's proof is wrong;
 * RL_E_MALFORMED_FRAME / RL_E_PROTOCOL_UNEXPECTED_MESSAGE for anything else it sends;
 * RL_E_CONNECTION_FAILED (closed) or RL_E_TIMED_OUT (nothing for timeout_ms). */
int rl_test_raw_handshake(int fd, const rl__net_auth *auth, int cls, unsigned flags, int timeout_ms);

/* rl_test_raw_serve_handshake — the accepting side of the handshake on fd (blocking), for a
 * hand-made server: send AUTH_CHALLENGE, read the AUTH, check its proof with auth (either class),
 * answer with this side's proof. Returns RL_OK with *out_class the proven class (may be NULL), or
 * the error (the peer then got an error reply): RL_E_INVALID_CLUSTER_ID, RL_E_UNAUTHORIZED_ATTEMPT,
 * RL_E_PROTOCOL_UNEXPECTED_MESSAGE, RL_E_MALFORMED_FRAME, RL_E_CONNECTION_FAILED, RL_E_TIMED_OUT. */
int rl_test_raw_serve_handshake(int fd, const rl__net_auth *auth, int timeout_ms, int *out_class);

/* rl_test_raw_open — rl_test_raw_connect, then rl_test_raw_handshake as
 * rl__auth_connect_class(auth); fails the test unless the handshake succeeds. */
int rl_test_raw_open(const char *ip, uint16_t port, const rl__net_auth *auth);

/* rl_test_raw_recv_frame — read one whole frame from fd into *h and payload (cap bytes; a longer
 * payload fails the test) within timeout_ms. Returns RL_OK, RL_E_CONNECTION_FAILED (closed before
 * a whole frame), RL_E_TIMED_OUT. */
int rl_test_raw_recv_frame(int fd, rl__frame_header *h, uint8_t *payload, size_t cap, int timeout_ms);

/* rl_test_raw_send — write all of p (n bytes); 0, or -1 when the peer has closed. */
int rl_test_raw_send(int fd, const void *p, size_t n);

#endif
