/* auth.h (internal) — the cluster's credentials and the proofs of the connection handshake
 * (docs/protocol.md §2, docs/design.md §8.2 "Access"): who may talk to a cluster, and how each
 * side of a connection shows the other that it knows the cluster's secrets without sending them.
 *
 * Two secrets, two classes of peer:
 *
 *   secret                         held by                               proves the class
 *   -----------------------------  ------------------------------------  ----------------------
 *   the cluster name               the cluster file (clients), the key   RL_AUTH_CLIENT: read,
 *   "description:ID" (ID: >= 32    file (the cluster's processes and     write, GRV, status,
 *   random letters and digits)     its operator)                          ping
 *   the member secret (32 random   the key file only                     RL_AUTH_MEMBER: the
 *   bytes, 64 hex digits)                                                 above, and serve as a
 *                                                                         storage server, PEEK
 *                                                                         and POP the log, admin
 *
 * Each is turned into a 32-byte HMAC-SHA256 key (rl__auth_init): cluster_key from the name,
 * member_key from the secret and the name (so a secret is bound to its cluster). The handshake
 * is a challenge and response both ways: the accepting side sends a fresh 16-byte nonce, the
 * connecting side answers with its own nonce and proof = HMAC(key of its class, "C" ...), the
 * accepting side answers with HMAC(the same key, "S" ...) over both nonces (rl__auth_proof gives
 * the exact input). Neither secret, nor anything from which it could be computed without
 * breaking HMAC-SHA256, crosses the wire; a recorded handshake cannot be replayed (a new nonce
 * each time), and a proof for one direction is never valid for the other.
 *
 * HMAC-SHA256, the nonces and the constant-time comparison come from OpenSSL's libcrypto.
 * Thread rules: none (no shared state; libcrypto's RAND_bytes is thread-safe).
 */
#ifndef RL_NET_AUTH_H
#define RL_NET_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define RL_AUTH_NONCE_LEN 16
#define RL_AUTH_PROOF_LEN 32
#define RL_AUTH_KEY_LEN 32
#define RL_AUTH_SECRET_LEN 32 /* bytes of a member secret (64 hex digits in the key file) */
#define RL_AUTH_ID_MIN 32     /* characters of a cluster ID at least ([A-Za-z0-9], > 128 bits) */

/* The class a peer proved in the handshake (the wire's u8 class: 1 or 2). */
typedef enum {
    RL_AUTH_NONE = 0,   /* no handshake (a loop without credentials: the runtime's own tests) */
    RL_AUTH_CLIENT = 1, /* knows the cluster name */
    RL_AUTH_MEMBER = 2, /* knows the member secret too: a process of the cluster, or its operator */
} rl__auth_class;

/* A process's credentials. Caller-owned value; copied by rl__loop_set_auth. */
typedef struct {
    uint8_t cluster_key[RL_AUTH_KEY_LEN]; /* from the cluster name */
    uint8_t member_key[RL_AUTH_KEY_LEN];  /* from the member secret; zero unless has_member_key */
    int has_member_key;                   /* 1: this process proves RL_AUTH_MEMBER when it connects
                                             and can check members' proofs when it accepts */
} rl__net_auth;

/* rl__auth_init — derive the keys.
 * [in] name        the cluster name "description:ID" (name_len bytes, not NUL-terminated needed).
 * [in] secret      NULL (a client), or the member secret's secret_len bytes (RL_AUTH_SECRET_LEN).
 * [out] out        filled on RL_OK; zeroed on failure.
 * Returns RL_OK, RL_E_INVALID_ARGUMENT (an empty name, a secret of another length) or
 * RL_E_INTERNAL_ERROR (libcrypto failed). */
int rl__auth_init(rl__net_auth *out, const char *name, size_t name_len, const uint8_t *secret, size_t secret_len);

/* rl__auth_random — fill out[0..n) with cryptographically strong random bytes (nonces, secrets,
 * cluster IDs). Returns RL_OK or RL_E_INTERNAL_ERROR (the generator failed). */
int rl__auth_random(void *out, size_t n);

/* rl__auth_random_id — a new cluster ID: len random characters of [A-Za-z0-9] (len >= 1) and a
 * NUL into out (len + 1 bytes). Returns as rl__auth_random. */
int rl__auth_random_id(char *out, size_t len);

/* rl__auth_id_ok — 1 if id (len bytes) is a cluster ID the cluster's processes accept: at least
 * RL_AUTH_ID_MIN characters of [A-Za-z0-9]; else 0. */
int rl__auth_id_ok(const char *id, size_t len);

/* rl__auth_proof — the proof of one side of a handshake:
 *   HMAC-SHA256(key of cls, "RLKV-AUTH-1" || dir || cls || server_nonce || client_nonce)
 * dir is 'C' for the connecting side's proof, 'S' for the accepting side's. cls is RL_AUTH_CLIENT
 * or RL_AUTH_MEMBER (the class the connecting side claims; both sides use that class's key).
 * Returns RL_OK, RL_E_UNAUTHORIZED_ATTEMPT (cls is MEMBER and a has no member key; out zeroed),
 * RL_E_INVALID_ARGUMENT (another cls or dir) or RL_E_INTERNAL_ERROR. */
int rl__auth_proof(const rl__net_auth *a, int cls, char dir, const uint8_t server_nonce[RL_AUTH_NONCE_LEN],
                   const uint8_t client_nonce[RL_AUTH_NONCE_LEN], uint8_t out[RL_AUTH_PROOF_LEN]);

/* rl__auth_verify — check a peer's proof in constant time. Returns RL_OK when it matches; for a
 * mismatch RL_E_INVALID_CLUSTER_ID (cls CLIENT: the peer holds another cluster name) or
 * RL_E_UNAUTHORIZED_ATTEMPT (cls MEMBER: it does not hold this cluster's member secret); or as
 * rl__auth_proof. */
int rl__auth_verify(const rl__net_auth *a, int cls, char dir, const uint8_t server_nonce[RL_AUTH_NONCE_LEN],
                    const uint8_t client_nonce[RL_AUTH_NONCE_LEN], const uint8_t proof[RL_AUTH_PROOF_LEN]);

/* The class a process with credentials a proves when it connects: MEMBER if it has the member
 * key, else CLIENT. */
static inline int rl__auth_connect_class(const rl__net_auth *a) {
    return a->has_member_key ? RL_AUTH_MEMBER : RL_AUTH_CLIENT;
}

/* The class's name for messages: "client", "member", "none". */
const char *rl__auth_class_name(int cls);

#endif
