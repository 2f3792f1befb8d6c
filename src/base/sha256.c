/* sha256.c — SHA-256 as FIPS 180-4 §6.2 specifies it (see sha256.h for why it is our own).
 *
 * The message is processed in 64-byte blocks; the last block is padded with 0x80, zeros and the
 * message length in bits as a 64-bit big-endian integer (§5.1.1). Straightforward code: the
 * campaign hashes a protocol and a few binaries per run, so speed does not matter.
 */
#include "base/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "reclayer/error.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* Process one 64-byte block into the chaining value (§6.2.2). */
static void compress(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64], a, b, c, d, e, f, g, k;
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void rl__sha256_init(rl__sha256_ctx *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->len = 0;
    c->buf_len = 0;
}

void rl__sha256_update(rl__sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->len += n;
    if (c->buf_len) {
        size_t take = 64 - c->buf_len < n ? 64 - c->buf_len : n;
        memcpy(c->buf + c->buf_len, p, take);
        c->buf_len += take, p += take, n -= take;
        if (c->buf_len < 64) return;
        compress(c->h, c->buf);
        c->buf_len = 0;
    }
    for (; n >= 64; p += 64, n -= 64) compress(c->h, p);
    if (n) memcpy(c->buf, p, n), c->buf_len = n;
}

void rl__sha256_final(rl__sha256_ctx *c, uint8_t out[RL_SHA256_LEN]) {
    uint64_t bits = c->len * 8;
    uint8_t pad[72] = {0x80};
    size_t npad = (c->buf_len < 56 ? 56 : 120) - c->buf_len;
    for (int i = 0; i < 8; i++) pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
    rl__sha256_update(c, pad, npad + 8);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (uint8_t)(c->h[i] >> (24 - 8 * j));
}

void rl__sha256(const void *p, size_t n, uint8_t out[RL_SHA256_LEN]) {
    rl__sha256_ctx c;
    rl__sha256_init(&c);
    rl__sha256_update(&c, p, n);
    rl__sha256_final(&c, out);
}

void rl__sha256_hex(const uint8_t d[RL_SHA256_LEN], char hex[RL_SHA256_HEX_LEN + 1]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < RL_SHA256_LEN; i++) hex[2 * i] = digits[d[i] >> 4], hex[2 * i + 1] = digits[d[i] & 15];
    hex[RL_SHA256_HEX_LEN] = 0;
}

int rl__sha256_file(const char *path, char hex[RL_SHA256_HEX_LEN + 1]) {
    uint8_t buf[65536], d[RL_SHA256_LEN];
    rl__sha256_ctx c;
    size_t n;
    int rc = RL_OK;
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? RL_E_FILE_NOT_FOUND : RL_E_IO_ERROR;
    rl__sha256_init(&c);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) rl__sha256_update(&c, buf, n);
    if (ferror(f)) rc = RL_E_IO_ERROR;
    fclose(f);
    if (rc) return rc;
    rl__sha256_final(&c, d);
    rl__sha256_hex(d, hex);
    return RL_OK;
}
