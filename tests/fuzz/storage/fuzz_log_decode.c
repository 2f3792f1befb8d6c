/* fuzz_log_decode.c — libFuzzer target: the write-ahead log record decoder on arbitrary bytes.
 *
 * Checks, beyond "no crash, no out-of-bounds read": a decoded record stays inside the input, its
 * mutations iterate to exactly count entries that end at the payload's end, and re-encoding the
 * decoded mutations gives back the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "reclayer/error.h"
#include "storage/wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decode every record of data[0..size) in sequence and check the properties above. */
static void decode_all(const uint8_t *data, size_t size) {
    size_t off = 0;
    while (off < size) {
        rl__wal_record r;
        if (rl__wal_decode(data + off, size - off, &r) != RL_OK) break;
        if (r.record_len > size - off || r.record_len < RL_WAL_HEADER) abort();
        rl__mutation *m = rl__malloc((size_t)(r.count ? r.count : 1) * sizeof *m);
        if (!m) break;
        rl__wal_iter it;
        size_t n = 0;
        rl__wal_iter_init(&it, &r);
        while (n < r.count && rl__wal_iter_next(&it, &m[n])) {
            if (m[n].p2 + m[n].len2 > r.payload + r.payload_len) abort();
            n++;
        }
        if (n != r.count || it.p != r.payload + r.payload_len) abort();
        rl_buf b;
        rl__buf_init(&b);
        if (rl__wal_encode(&b, r.version, m, n) != RL_OK) abort();
        if (b.len != r.record_len || memcmp(b.data, data + off, b.len) != 0) abort();
        rl__buf_release(&b);
        rl__free(m);
        off += r.record_len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    decode_all(data, size);
    /* Checksums stop almost every mutated input at the header; also try the input with the
     * first record's checksum made right, so the structural checks of the payload get fuzzed. */
    if (size >= RL_WAL_HEADER) {
        uint8_t *copy = rl__memdup(data, size);
        if (!copy) return 0;
        uint32_t len = rl__le32(copy + 8);
        if (len <= size - RL_WAL_HEADER) {
            rl__put_le32(copy, RL_WAL_MAGIC);
            rl__put_le32(copy + 4, rl__checksum32(copy + 8, (size_t)RL_WAL_HEADER - 8 + len));
            decode_all(copy, size);
        }
        rl__free(copy);
    }
    return 0;
}
