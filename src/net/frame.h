/* frame.h (internal) — the frame of reclayer's wire protocol (docs/protocol.md): every message on
 * a connection is one frame, a fixed 16-byte header followed by its payload.
 *
 *   OFFSET SIZE DESCRIPTION
 *   0      4    payload_len: bytes after the header, little-endian, at most RL_NET_MAX_PAYLOAD
 *   4      2    type: the message type (rl__msg_type in proto.h), little-endian
 *   6      2    flags: RL_FRAME_REPLY (a reply to the request with the same id), RL_FRAME_ERROR
 *                 (an error reply: the payload is an rl__msg_error), other bits must be 0
 *   8      8    request id, little-endian: chosen by the sender of a request (unique among its
 *                 outstanding requests on the connection); a reply echoes it
 *   16     payload_len  the payload
 *
 * The header is decoded by a pure function; a header that fails it (unknown flag bits, a payload
 * longer than the maximum) makes the receiver close that one connection with a logged error.
 */
#ifndef RL_NET_FRAME_H
#define RL_NET_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define RL_FRAME_HEADER_LEN 16
/* The largest payload a frame may carry (64 MiB): replies are cut off well below it (servers
 * bound every reply's bytes and mark it `more`). */
#define RL_NET_MAX_PAYLOAD (64u << 20)
/* The largest payload either side may send before the handshake is done (docs/protocol.md §2): a
 * HELLO-sized frame (the AUTH payloads are 24, 57 and 32 bytes; an error reply carries at most
 * 4,096 bytes of message). A longer declared length closes the connection before anything is
 * buffered. */
#define RL_NET_HANDSHAKE_MAX_PAYLOAD 4200u

enum {
    RL_FRAME_REPLY = 0x1, /* a reply to the request with the same id */
    RL_FRAME_ERROR = 0x2, /* an error reply (with RL_FRAME_REPLY): payload is rl__msg_error */
};
#define RL_FRAME_KNOWN_FLAGS 0x3

typedef struct {
    uint32_t payload_len;
    uint16_t type;
    uint16_t flags;
    uint64_t id;
} rl__frame_header;

/* Write h into out[0..16). */
static inline void rl__frame_header_encode(const rl__frame_header *h, uint8_t out[RL_FRAME_HEADER_LEN]) {
    uint32_t l = h->payload_len;
    uint64_t id = h->id;
    out[0] = (uint8_t)l, out[1] = (uint8_t)(l >> 8), out[2] = (uint8_t)(l >> 16), out[3] = (uint8_t)(l >> 24);
    out[4] = (uint8_t)h->type, out[5] = (uint8_t)(h->type >> 8);
    out[6] = (uint8_t)h->flags, out[7] = (uint8_t)(h->flags >> 8);
    for (int i = 0; i < 8; i++) out[8 + i] = (uint8_t)(id >> (8 * i));
}

/* Decode a header from in[0..16). Returns 0, or -1 when it is not valid (unknown flag bits or a
 * payload longer than RL_NET_MAX_PAYLOAD): the connection must then be closed. */
static inline int rl__frame_header_decode(const uint8_t in[RL_FRAME_HEADER_LEN], rl__frame_header *h) {
    h->payload_len = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 | (uint32_t)in[3] << 24;
    h->type = (uint16_t)(in[4] | in[5] << 8);
    h->flags = (uint16_t)(in[6] | in[7] << 8);
    h->id = 0;
    for (int i = 0; i < 8; i++) h->id |= (uint64_t)in[8 + i] << (8 * i);
    if (h->flags & ~RL_FRAME_KNOWN_FLAGS) return -1;
    if (h->payload_len > RL_NET_MAX_PAYLOAD) return -1;
    return 0;
}

#endif
