/* reader.h (internal) — rl__frame_reader, the incremental frame splitter of a connection's receive
 * side: bytes go in as they arrive from the socket, whole frames (frame.h) come out.
 *
 * It is a pure data structure (no I/O), so it can be fuzzed alone (tests/unit/net/test_loop_reader.c,
 * tests/fuzz/net/fuzz_frame_reader.c). Use:
 *
 *     rl__frame_reader_space(r, &p, &n);   // room for at least one more byte
 *     k = read(fd, p, n);
 *     rl__frame_reader_commit(r, k);
 *     while ((rc = rl__frame_reader_next(r, &h, &payload, &ready)) == RL_OK && ready) use(h, payload);
 *
 * Invariants:
 *   1. 0 <= start <= end <= cap; bytes [start, end) are received and not yet consumed.
 *   2. Memory follows what arrived, not what a header claims: right after rl__frame_reader_space,
 *      cap <= max(RL_FRAME_READER_KEEP, pending + clamp(pending, RL_FRAME_READER_CHUNK,
 *      RL_FRAME_READER_MAX_AHEAD)) where pending = end - start. A peer that announces a 64 MiB
 *      payload and trickles it makes the buffer grow with the bytes it really sent (at most twice
 *      them, plus 64 KiB, and never more than 8 MiB ahead of them). Geometric growth keeps the
 *      copying linear for honest large frames.
 *   3. A payload handed out by rl__frame_reader_next stays valid until the next
 *      rl__frame_reader_space or rl__frame_reader_release (next itself never moves memory).
 *   4. After RL_E_MALFORMED_FRAME the reader stays failed (sticky) and why[] says why.
 *   5. A frame longer than max_payload is refused at its header, before any of its payload is
 *      buffered, and the buffer never grows beyond RL_FRAME_HEADER_LEN + max_payload while
 *      max_payload is below RL_FRAME_READER_CHUNK (a connection still in its handshake holds at
 *      most one small frame: rl__frame_reader_set_max).
 *   6. Large frames are read into a buffer of their own: a frame whose payload is
 *      RL_FRAME_READER_OWN_MIN to RL_FRAME_READER_OWN_MAX bytes and has not all arrived with its
 *      header gets one (rl__arena_block_alloc memory, allocated at the header: at most
 *      RL_FRAME_READER_OWN_MAX ahead of the bytes that arrived), which takes what came after the
 *      header and then the rest straight from the socket (space returns it). After such a frame,
 *      or any frame of that size, the next space offers only a header's bytes, so a stream of
 *      large frames is read header, payload, header, ... and never copied out of the buffer it
 *      was read into. The consumer may keep the payload without copying it
 *      (rl__frame_reader_take); otherwise the buffer is freed at the next space.
 */
#ifndef RL_NET_READER_H
#define RL_NET_READER_H

#include <stddef.h>
#include <stdint.h>

#include "net/frame.h"

#define RL_FRAME_READER_CHUNK (64u * 1024)           /* the smallest buffer and read chunk */
#define RL_FRAME_READER_MAX_AHEAD (8u * 1024 * 1024) /* the most allocated ahead of arrived bytes */
#define RL_FRAME_READER_KEEP (1u * 1024 * 1024)      /* a buffer up to this size is kept when idle */
#define RL_FRAME_READER_OWN_MIN (64u * 1024)         /* invariant 6: payloads read into their own buffer */
#define RL_FRAME_READER_OWN_MAX (1u * 1024 * 1024)

typedef struct {
    uint8_t *data;        /* NULL until the first rl__frame_reader_space */
    size_t cap;           /* bytes allocated at data */
    size_t start;         /* first unconsumed byte */
    size_t end;           /* one past the last received byte */
    uint32_t max_payload; /* frames declaring more are refused (invariant 5); RL_NET_MAX_PAYLOAD
                             after init */
    int failed;           /* sticky: a header was refused */
    uint8_t *own;         /* invariant 6: the payload of own_h (rl__arena_block_alloc), or NULL */
    rl__frame_header own_h;
    size_t own_got;  /* its bytes received */
    int own_out;     /* own's frame was handed out (own freed at the next space unless taken) */
    int after_large; /* the last frame handed out was of own's size: read the next header alone */
    char why[128];   /* after a refusal: the reason, for the log line */
} rl__frame_reader;

/* Initialise r (no allocation). */
void rl__frame_reader_init(rl__frame_reader *r);
/* Free r's buffer; r is then as after init (max_payload too). */
void rl__frame_reader_release(rl__frame_reader *r);
/* Refuse frames whose payload exceeds max (1..RL_NET_MAX_PAYLOAD; clamped into it) from the next
 * header on (invariant 5). A buffer larger than the new bound shrinks at the next
 * rl__frame_reader_space that finds it idle. */
void rl__frame_reader_set_max(rl__frame_reader *r, uint32_t max);

/* rl__frame_reader_space — make room for more bytes (growing or shrinking the buffer per
 * invariant 2; may move the pending bytes) and return it: *out_ptr, *out_len >= 1.
 * Returns RL_OK or RL_E_OUT_OF_MEMORY (r unchanged). */
int rl__frame_reader_space(rl__frame_reader *r, uint8_t **out_ptr, size_t *out_len);

/* rl__frame_reader_commit — n bytes were written at the pointer of the last space call
 * (n <= the length it returned). */
void rl__frame_reader_commit(rl__frame_reader *r, size_t n);

/* rl__frame_reader_next — split off the next complete frame.
 * [out] out_ready  1: *out_h and *out_payload (h.payload_len bytes, never NULL) hold a frame
 *                  (invariant 3); 0: more bytes are needed.
 * Returns RL_OK, or RL_E_MALFORMED_FRAME when the next header is invalid (unknown flag bits, a
 * payload over RL_NET_MAX_PAYLOAD or over max_payload): the connection must be closed; r->why
 * says why. */
int rl__frame_reader_next(rl__frame_reader *r, rl__frame_header *out_h, const uint8_t **out_payload, int *out_ready);

/* rl__frame_reader_take — the payload of the frame rl__frame_reader_next just handed out, when it
 * was read into its own buffer (invariant 6): the caller then owns it (rl__arena_block_free, or
 * rl__arena_adopt) and it stays valid after the next space. NULL otherwise (the payload stays the
 * reader's, valid until the next space). */
uint8_t *rl__frame_reader_take(rl__frame_reader *r);

/* Bytes received and not consumed (0 at a frame boundary). */
size_t rl__frame_reader_pending(const rl__frame_reader *r);
/* Bytes of the frame being assembled, header included, once its header has arrived; else 0. */
size_t rl__frame_reader_frame_len(const rl__frame_reader *r);

#endif
