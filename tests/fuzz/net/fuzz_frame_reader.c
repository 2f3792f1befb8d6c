/* fuzz_frame_reader.c — libFuzzer target: the incremental frame reader (src/net/reader.h) on
 * arbitrary byte streams cut into arbitrary pieces.
 *
 * Input: byte 0 picks how the stream is cut (0: one piece, 1: single bytes, otherwise pieces of
 * byte0 bytes, capped at what the reader offers); the rest is the stream. Checks, beyond "no
 * crash, no out-of-bounds access, no undefined behaviour":
 *   - the frames delivered are exactly those of a direct parse of the stream (header fields and
 *     payload bytes), in order, up to the first invalid header;
 *   - the reader reports RL_E_MALFORMED_FRAME exactly when that parse meets an invalid complete
 *     header, with a reason, and stays failed;
 *   - otherwise the bytes left pending equal the parse's unconsumed tail;
 *   - after every space call the buffer is within invariant 2 of reader.h.
 * The unit test loop_5_2 runs the same checks on generated corruptions in every ctest run.
 */
#include <stdlib.h>
#include <string.h>

#include "net/reader.h"
#include "reclayer/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t bound_for(size_t pending) {
    size_t ahead = pending < RL_FRAME_READER_CHUNK       ? RL_FRAME_READER_CHUNK
                   : pending > RL_FRAME_READER_MAX_AHEAD ? RL_FRAME_READER_MAX_AHEAD
                                                         : pending;
    size_t lim = pending + ahead;
    return lim > RL_FRAME_READER_KEEP ? lim : RL_FRAME_READER_KEEP;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned cut = data[0];
    const uint8_t *s = data + 1;
    size_t n = size - 1;
    /* The direct parse: off after each whole frame. */
    size_t moff = 0;
    int m_malformed = 0;
    rl__frame_reader r;
    rl__frame_reader_init(&r);
    size_t pos = 0;
    int failed = 0;
    while (pos < n && !failed) {
        uint8_t *p;
        size_t room;
        if (rl__frame_reader_space(&r, &p, &room) != RL_OK) abort();
        if (room == 0 || r.cap > bound_for(rl__frame_reader_pending(&r))) abort();
        size_t k = cut == 0 ? room : cut == 1 ? 1 : cut;
        if (k > room) k = room;
        if (k > n - pos) k = n - pos;
        memcpy(p, s + pos, k);
        rl__frame_reader_commit(&r, k);
        pos += k;
        for (;;) {
            rl__frame_header h;
            const uint8_t *payload;
            int ready;
            int rc = rl__frame_reader_next(&r, &h, &payload, &ready);
            if (rc == RL_E_MALFORMED_FRAME) {
                if (!r.why[0]) abort();
                if (rl__frame_reader_next(&r, &h, &payload, &ready) != RL_E_MALFORMED_FRAME) abort();
                failed = 1;
                break;
            }
            if (rc != RL_OK) abort();
            if (!ready) break;
            /* The parse must hold the same frame at moff. */
            rl__frame_header mh;
            if (n - moff < RL_FRAME_HEADER_LEN || rl__frame_header_decode(s + moff, &mh) != 0) abort();
            if (mh.payload_len != h.payload_len || mh.type != h.type || mh.flags != h.flags || mh.id != h.id) abort();
            if (n - moff - RL_FRAME_HEADER_LEN < mh.payload_len) abort();
            if (mh.payload_len && memcmp(payload, s + moff + RL_FRAME_HEADER_LEN, mh.payload_len) != 0) abort();
            moff += RL_FRAME_HEADER_LEN + mh.payload_len;
        }
    }
    /* What the parse says comes after the frames delivered. */
    if (n - moff >= RL_FRAME_HEADER_LEN) {
        rl__frame_header mh;
        if (rl__frame_header_decode(s + moff, &mh) != 0) m_malformed = 1;
        else if (n - moff - RL_FRAME_HEADER_LEN >= mh.payload_len)
            abort(); /* a complete valid frame was not delivered */
    }
    if (failed != m_malformed) abort();
    if (!failed && rl__frame_reader_pending(&r) != n - moff) abort();
    rl__frame_reader_release(&r);
    return 0;
}
