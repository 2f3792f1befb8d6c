/* sha256.h (internal) — SHA-256 (FIPS 180-4), for the benchmark campaign's receipts: the SHA-256
 * of its protocol file and of the binaries it ran, recorded in results.json and manifest.json.
 *
 * A small implementation of our own: OpenSSL's libcrypto (or nettle, libgcrypt) is not in the
 * machine image the project builds on, and one digest for a handful of files a run does not
 * justify another build dependency. Checked against the FIPS 180-2 examples and NIST's
 * short/long message vectors (tests/unit/base/test_sha256.c).
 *
 * Use: rl__sha256_init, any number of rl__sha256_update, rl__sha256_final; or rl__sha256 for one
 * buffer, rl__sha256_file for a file. Nothing is allocated; the context is the caller's.
 * Thread rules: none (no shared state).
 */
#ifndef RL_BASE_SHA256_H
#define RL_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define RL_SHA256_LEN 32     /* bytes of a digest */
#define RL_SHA256_HEX_LEN 64 /* hex digits of a digest (the string form adds a NUL) */

/* The running state of one digest. Caller-owned; initialise with rl__sha256_init. */
typedef struct {
    uint32_t h[8];   /* chaining value */
    uint64_t len;    /* bytes hashed so far */
    uint8_t buf[64]; /* a partial block */
    size_t buf_len;  /* bytes in buf, < 64 */
} rl__sha256_ctx;

/* Start a digest. */
void rl__sha256_init(rl__sha256_ctx *c);
/* Hash n more bytes of p (p may be NULL when n is 0). */
void rl__sha256_update(rl__sha256_ctx *c, const void *p, size_t n);
/* Finish: write the 32-byte digest to out. c must be initialised again before reuse. */
void rl__sha256_final(rl__sha256_ctx *c, uint8_t out[RL_SHA256_LEN]);
/* The digest of p[0..n) in one call. */
void rl__sha256(const void *p, size_t n, uint8_t out[RL_SHA256_LEN]);
/* The 64 lowercase hex digits of a digest, NUL-terminated, into hex (65 bytes). */
void rl__sha256_hex(const uint8_t d[RL_SHA256_LEN], char hex[RL_SHA256_HEX_LEN + 1]);
/* The digest of the file at path, as hex into hex (65 bytes). RL_OK, RL_E_FILE_NOT_FOUND (no such
 * file), RL_E_IO_ERROR (cannot open or read it). */
int rl__sha256_file(const char *path, char hex[RL_SHA256_HEX_LEN + 1]);

#endif
