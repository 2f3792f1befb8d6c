/* fuzz_continuation.c — libFuzzer target for the index-scan continuation decoder
 * (src/query/continuation.c).
 *
 * Each input is decoded against two scan hashes: a fixed one and the hash the input claims for
 * itself (bytes 6..14), so the fuzzer reaches past the hash check. Checks: decoding never reads
 * outside the input (ASan); an accepted input re-encodes to exactly the same bytes (the format
 * has one encoding per value); a suffix accepted points inside the input; and an encoding of the
 * decoded value under another hash is refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "query/query_int.h"
#include "reclayer/error.h"

static void check(const uint8_t *data, size_t size, uint64_t h) {
    int has_key;
    const uint8_t *suf;
    size_t n;
    const char *why;
    int rc = rl__qcont_decode(data, size, h, &has_key, &suf, &n, &why);
    if (rc != RL_OK) {
        if (rc != RL_E_CONTINUATION_INVALID || !why) abort();
        return;
    }
    if (suf < data || suf + n > data + size) abort();
    rl_buf b;
    rl__buf_init(&b);
    rl__qcont_encode(h, has_key, suf, n, &b);
    if (!rl__buf_error(&b) && (b.len != size || memcmp(b.data, data, size) != 0)) abort();
    if (!rl__buf_error(&b) && rl__qcont_decode(b.data, b.len, h ^ 1, &has_key, &suf, &n, &why) == RL_OK) abort();
    rl__buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check(data, size, 0x0123456789abcdefull);
    if (size >= 14) {
        uint64_t h = 0;
        for (int i = 6; i < 14; i++) h = h << 8 | data[i];
        check(data, size, h);
    }
    return 0;
}
