/* auth.c — key derivation, nonces and the handshake's proofs over OpenSSL's libcrypto (auth.h
 * gives the model; docs/protocol.md §2 the messages that carry them).
 *
 *   cluster_key = HMAC-SHA256(key "reclayer cluster key 1", name)
 *   member_key  = HMAC-SHA256(key secret, "reclayer member key 1" || name)
 *   proof       = HMAC-SHA256(key of the class, "RLKV-AUTH-1" || dir || class || server nonce ||
 *                             client nonce)
 *
 * The labels keep the three uses apart (a key is never an input of another use), dir keeps the
 * two directions apart (a proof cannot be reflected back), and the class is inside the proof so a
 * client proof can never pass as a member's even if the keys were equal.
 */
#include "net/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>

#include "net/proto.h"
#include "reclayer/error.h"

#define CLUSTER_LABEL "reclayer cluster key 1"
#define MEMBER_LABEL "reclayer member key 1"
#define PROOF_LABEL "RLKV-AUTH-1"

/* libcrypto, initialised without its exit-time cleanup: otherwise the first use registers an
 * atexit handler that tears libcrypto down before handlers registered earlier run, and such a
 * handler that still closes a database or stops a cluster (authenticating as it goes: a test
 * fixture's stop at exit did) crashes inside HMAC. Without the cleanup libcrypto's memory is
 * simply left to the exit. When the application initialised libcrypto first, its choice stands. */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static void crypto_init(void) { (void)OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL); }

/* HMAC-SHA256 of the concatenation of up to three parts (NULL parts are skipped). */
static int hmac3(const uint8_t *key, size_t key_len, const void *p1, size_t n1, const void *p2, size_t n2,
                 const void *p3, size_t n3, uint8_t out[RL_AUTH_KEY_LEN]) {
    uint8_t stack[512];
    size_t n = n1 + n2 + n3;
    if (n > sizeof stack) return RL_E_INVALID_ARGUMENT;
    pthread_once(&crypto_once, crypto_init);
    size_t off = 0;
    if (n1) memcpy(stack + off, p1, n1), off += n1;
    if (n2) memcpy(stack + off, p2, n2), off += n2;
    if (n3) memcpy(stack + off, p3, n3), off += n3;
    unsigned int out_len = 0;
    unsigned char *r = HMAC(EVP_sha256(), key, (int)key_len, stack, n, out, &out_len);
    OPENSSL_cleanse(stack, n);
    return r && out_len == RL_AUTH_KEY_LEN ? RL_OK : RL_E_INTERNAL_ERROR;
}

int rl__auth_init(rl__net_auth *out, const char *name, size_t name_len, const uint8_t *secret, size_t secret_len) {
    memset(out, 0, sizeof *out);
    if (!name || name_len == 0 || name_len > 256) return RL_E_INVALID_ARGUMENT;
    if (secret && secret_len != RL_AUTH_SECRET_LEN) return RL_E_INVALID_ARGUMENT;
    int rc = hmac3((const uint8_t *)CLUSTER_LABEL, strlen(CLUSTER_LABEL), name, name_len, NULL, 0, NULL, 0,
                   out->cluster_key);
    if (rc == RL_OK && secret) {
        rc = hmac3(secret, secret_len, MEMBER_LABEL, strlen(MEMBER_LABEL), name, name_len, NULL, 0, out->member_key);
        out->has_member_key = rc == RL_OK;
    }
    if (rc != RL_OK) OPENSSL_cleanse(out, sizeof *out);
    return rc;
}

int rl__auth_random(void *out, size_t n) {
    if (n == 0) return RL_OK;
    pthread_once(&crypto_once, crypto_init);
    return RAND_bytes(out, (int)n) == 1 ? RL_OK : RL_E_INTERNAL_ERROR;
}

int rl__auth_random_id(char *out, size_t len) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    size_t i = 0;
    while (i < len) {
        uint8_t b[64];
        if (rl__auth_random(b, sizeof b) != RL_OK) return RL_E_INTERNAL_ERROR;
        /* 62 letters and digits: bytes >= 248 (4 x 62) are dropped so every character is equally
         * likely. */
        for (size_t j = 0; j < sizeof b && i < len; j++)
            if (b[j] < 248) out[i++] = alphabet[b[j] % 62];
    }
    out[len] = 0;
    return RL_OK;
}

int rl__auth_id_ok(const char *id, size_t len) {
    if (len < RL_AUTH_ID_MIN) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return 0;
    }
    return 1;
}

int rl__auth_proof(const rl__net_auth *a, int cls, char dir, const uint8_t server_nonce[RL_AUTH_NONCE_LEN],
                   const uint8_t client_nonce[RL_AUTH_NONCE_LEN], uint8_t out[RL_AUTH_PROOF_LEN]) {
    memset(out, 0, RL_AUTH_PROOF_LEN);
    if ((cls != RL_AUTH_CLIENT && cls != RL_AUTH_MEMBER) || (dir != 'C' && dir != 'S')) return RL_E_INVALID_ARGUMENT;
    if (cls == RL_AUTH_MEMBER && !a->has_member_key) return RL_E_UNAUTHORIZED_ATTEMPT;
    const uint8_t *key = cls == RL_AUTH_MEMBER ? a->member_key : a->cluster_key;
    uint8_t head[sizeof PROOF_LABEL - 1 + 2];
    memcpy(head, PROOF_LABEL, sizeof PROOF_LABEL - 1);
    head[sizeof head - 2] = (uint8_t)dir;
    head[sizeof head - 1] = (uint8_t)cls;
    return hmac3(key, RL_AUTH_KEY_LEN, head, sizeof head, server_nonce, RL_AUTH_NONCE_LEN, client_nonce,
                 RL_AUTH_NONCE_LEN, out);
}

int rl__auth_verify(const rl__net_auth *a, int cls, char dir, const uint8_t server_nonce[RL_AUTH_NONCE_LEN],
                    const uint8_t client_nonce[RL_AUTH_NONCE_LEN], const uint8_t proof[RL_AUTH_PROOF_LEN]) {
    uint8_t want[RL_AUTH_PROOF_LEN];
    int rc = rl__auth_proof(a, cls, dir, server_nonce, client_nonce, want);
    if (rc == RL_OK && CRYPTO_memcmp(want, proof, RL_AUTH_PROOF_LEN) != 0)
        rc = cls == RL_AUTH_MEMBER ? RL_E_UNAUTHORIZED_ATTEMPT : RL_E_INVALID_CLUSTER_ID;
    OPENSSL_cleanse(want, sizeof want);
    return rc;
}

const char *rl__auth_class_name(int cls) {
    switch (cls) {
    case RL_AUTH_CLIENT: return "client";
    case RL_AUTH_MEMBER: return "member";
    default: return "none";
    }
}

int rl__msg_auth_req_make(const rl__net_auth *a, const uint8_t snonce[RL_AUTH_NONCE_LEN], rl__msg_auth_req *out) {
    memset(out, 0, sizeof *out);
    out->magic = RL_PROTOCOL_MAGIC;
    out->protocol_version = RL_PROTOCOL_VERSION;
    out->auth_class = (uint8_t)rl__auth_connect_class(a);
    int rc = rl__auth_random(out->nonce, sizeof out->nonce);
    if (rc == RL_OK) rc = rl__auth_proof(a, out->auth_class, 'C', snonce, out->nonce, out->proof);
    return rc;
}
