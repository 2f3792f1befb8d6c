/* test_sha256.c — SHA-256 (src/base/sha256.c) against published vectors.
 *
 *   sha256_1_1  FIPS 180-2 appendix B: "abc", the 448-bit two-block message, one million 'a'
 *   sha256_1_2  the empty message and messages of every length 0..200 around the block and
 *               padding boundaries, fed whole and byte by byte and in odd pieces (same digest)
 *   sha256_1_3  a file's digest equals the buffer's; a missing file is file_not_found
 */
#include <stdlib.h>
#include <unistd.h>

#include "base/sha256.h"
#include "test.h"

static void hex_of(const void *p, size_t n, char *hex) {
    uint8_t d[RL_SHA256_LEN];
    rl__sha256(p, n, d);
    rl__sha256_hex(d, hex);
}

TEST(sha256_1_1_fips_vectors) {
    char hex[65];
    hex_of("abc", 3, hex);
    ASSERT_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m2, strlen(m2), hex);
    ASSERT_STR_EQ(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    rl__sha256_ctx c;
    uint8_t d[RL_SHA256_LEN], a[1000];
    memset(a, 'a', sizeof a);
    rl__sha256_init(&c);
    for (int i = 0; i < 1000; i++) rl__sha256_update(&c, a, sizeof a);
    rl__sha256_final(&c, d);
    rl__sha256_hex(d, hex);
    ASSERT_STR_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* NIST short-message vector: one byte 0xbd. */
    uint8_t bd = 0xbd;
    hex_of(&bd, 1, hex);
    ASSERT_STR_EQ(hex, "68325720aabd7c82f30f554b313d0570c95accbb7dc4b5aae11204c08ffe732b");
}

TEST(sha256_1_2_lengths_and_pieces) {
    char hex[65], hex2[65];
    hex_of(NULL, 0, hex);
    ASSERT_STR_EQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    uint8_t msg[200];
    for (int i = 0; i < 200; i++) msg[i] = (uint8_t)(i * 37 + 11);
    for (size_t n = 0; n <= sizeof msg; n++) {
        hex_of(msg, n, hex);
        rl__sha256_ctx c;
        uint8_t d[RL_SHA256_LEN];
        rl__sha256_init(&c);
        for (size_t i = 0; i < n; i++) rl__sha256_update(&c, msg + i, 1);
        rl__sha256_final(&c, d);
        rl__sha256_hex(d, hex2);
        ASSERT_STR_EQ(hex, hex2);
        rl__sha256_init(&c);
        for (size_t i = 0, step = 1; i < n; i += step, step = step * 2 + 1)
            rl__sha256_update(&c, msg + i, i + step <= n ? step : n - i);
        rl__sha256_final(&c, d);
        rl__sha256_hex(d, hex2);
        ASSERT_STR_EQ(hex, hex2);
    }
}

TEST(sha256_1_3_file) {
    char *dir = rl_test_tmpdir("sha256");
    char path[512], hex[65], want[65];
    snprintf(path, sizeof path, "%s/f", dir);
    FILE *f = fopen(path, "wb");
    ASSERT_NOT_NULL(f);
    uint8_t big[150000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i ^ (i >> 8));
    ASSERT_EQ(fwrite(big, 1, sizeof big, f), sizeof big);
    fclose(f);
    ASSERT_OK(rl__sha256_file(path, hex));
    hex_of(big, sizeof big, want);
    ASSERT_STR_EQ(hex, want);
    snprintf(path, sizeof path, "%s/missing", dir);
    ASSERT_RC(rl__sha256_file(path, hex), RL_E_FILE_NOT_FOUND);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(sha256_1_1_fips_vectors), T(sha256_1_2_lengths_and_pieces), T(sha256_1_3_file))
