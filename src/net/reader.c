/* reader.c — rl__frame_reader: incremental frame splitting with memory that follows the bytes that
 * arrived (see reader.h for the invariants). */
#include "net/reader.h"

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "reclayer/error.h"

void rl__frame_reader_init(rl__frame_reader *r) {
    r->data = NULL;
    r->cap = r->start = r->end = 0;
    r->max_payload = RL_NET_MAX_PAYLOAD;
    r->failed = 0;
    r->why[0] = 0;
    r->own = NULL;
    r->own_got = 0;
    r->own_out = r->after_large = 0;
}

void rl__frame_reader_release(rl__frame_reader *r) {
    rl__free(r->data);
    rl__arena_block_free(r->own);
    rl__frame_reader_init(r);
}

void rl__frame_reader_set_max(rl__frame_reader *r, uint32_t max) {
    r->max_payload = max < 1 ? 1 : max > RL_NET_MAX_PAYLOAD ? RL_NET_MAX_PAYLOAD : max;
}

/* A frame being read into its own buffer (invariant 6), not handed out yet. */
static int own_open(const rl__frame_reader *r) { return r->own && !r->own_out; }

size_t rl__frame_reader_pending(const rl__frame_reader *r) {
    return r->end - r->start + (own_open(r) ? RL_FRAME_HEADER_LEN + r->own_got : 0);
}

uint8_t *rl__frame_reader_take(rl__frame_reader *r) {
    if (!r->own_out) return NULL;
    uint8_t *p = r->own;
    r->own = NULL;
    return p;
}

/* The raw payload length of the header at start (valid or not), clamped to the maximum + 1. */
static size_t raw_len(const uint8_t *p) {
    uint32_t l = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    return l > RL_NET_MAX_PAYLOAD ? (size_t)RL_NET_MAX_PAYLOAD + 1 : (size_t)l;
}

size_t rl__frame_reader_frame_len(const rl__frame_reader *r) {
    if (own_open(r)) return RL_FRAME_HEADER_LEN + (size_t)r->own_h.payload_len;
    if (r->end - r->start < RL_FRAME_HEADER_LEN) return 0;
    return RL_FRAME_HEADER_LEN + raw_len(r->data + r->start);
}

static size_t clamp(size_t v, size_t lo, size_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The capacity the buffer should have for `have` pending bytes whose first frame is `need` bytes
 * long (0: unknown yet), given the current capacity: enough for the frame and a read chunk, but
 * never beyond invariant 2's limit, nor beyond one frame of max_payload while that is small
 * (invariant 5). */
static size_t wanted_cap(size_t have, size_t need, size_t cap, uint32_t max_payload) {
    size_t want = need > RL_FRAME_READER_CHUNK ? need : RL_FRAME_READER_CHUNK;
    if (want <= have) want = have + 1; /* never below the pending bytes (a caller that did not drain) */
    if (cap < have + 4096 && want < have + RL_FRAME_READER_CHUNK) want = have + RL_FRAME_READER_CHUNK;
    size_t limit = have + clamp(have, RL_FRAME_READER_CHUNK, RL_FRAME_READER_MAX_AHEAD);
    if (max_payload < RL_FRAME_READER_CHUNK) {
        size_t small = RL_FRAME_HEADER_LEN + (size_t)max_payload;
        if (small <= have) small = have + 1;
        if (limit > small) limit = small;
    }
    return want < limit ? want : limit;
}

int rl__frame_reader_space(rl__frame_reader *r, uint8_t **out_ptr, size_t *out_len) {
    if (r->own_out) { /* the frame handed out from own is done with (invariant 3), or was taken */
        rl__arena_block_free(r->own);
        r->own = NULL;
        r->own_out = 0;
    }
    if (r->own) {                            /* the rest of the frame goes straight into its own buffer */
        if (r->cap > RL_FRAME_READER_KEEP) { /* invariant 2: the main buffer holds nothing now */
            uint8_t *p = rl__realloc(r->data, RL_FRAME_READER_KEEP);
            if (p) { /* a failed shrink leaves the larger buffer, harmless */
                r->data = p;
                r->cap = RL_FRAME_READER_KEEP;
            }
        }
        *out_ptr = r->own + r->own_got;
        *out_len = r->own_h.payload_len - r->own_got;
        return RL_OK;
    }
    size_t have = r->end - r->start;
    if (r->start > 0) { /* compact: pending bytes move to the front (at most one partial frame) */
        if (have) memmove(r->data, r->data + r->start, have);
        r->start = 0;
        r->end = have;
    }
    size_t need = have >= RL_FRAME_HEADER_LEN ? RL_FRAME_HEADER_LEN + raw_len(r->data) : 0;
    size_t cap = wanted_cap(have, need, r->cap, r->max_payload);
    /* Grow to cap when short of it; shrink a large idle buffer back (hysteresis: keep up to
     * RL_FRAME_READER_KEEP, or nothing beyond cap while frames are small: invariant 5). */
    int small = r->max_payload < RL_FRAME_READER_CHUNK;
    if (cap > r->cap || (r->cap > cap && (small || r->cap > RL_FRAME_READER_KEEP))) {
        uint8_t *p = rl__realloc(r->data, cap);
        if (!p) return RL_E_OUT_OF_MEMORY;
        r->data = p;
        r->cap = cap;
    }
    *out_ptr = r->data + r->end;
    *out_len = r->cap - r->end;
    if (r->after_large && have == 0) *out_len = RL_FRAME_HEADER_LEN; /* invariant 6 (cap >= a chunk) */
    return RL_OK;
}

void rl__frame_reader_commit(rl__frame_reader *r, size_t n) {
    if (own_open(r)) {
        if (n > r->own_h.payload_len - r->own_got) n = r->own_h.payload_len - r->own_got;
        r->own_got += n;
        return;
    }
    if (n > r->cap - r->end) n = r->cap - r->end; /* defensive: never beyond the buffer */
    r->end += n;
}

int rl__frame_reader_next(rl__frame_reader *r, rl__frame_header *out_h, const uint8_t **out_payload, int *out_ready) {
    *out_ready = 0;
    if (r->failed) return RL_E_MALFORMED_FRAME;
    if (own_open(r)) {
        if (r->own_got < r->own_h.payload_len) return RL_OK;
        *out_h = r->own_h;
        *out_payload = r->own;
        r->own_out = 1;
        r->after_large = 1;
        *out_ready = 1;
        return RL_OK;
    }
    size_t have = r->end - r->start;
    if (have < RL_FRAME_HEADER_LEN) return RL_OK;
    const uint8_t *p = r->data + r->start;
    rl__frame_header h;
    if (rl__frame_header_decode(p, &h) != 0) {
        r->failed = 1;
        if (h.flags & ~RL_FRAME_KNOWN_FLAGS)
            snprintf(r->why, sizeof r->why, "unknown flag bits 0x%x in a frame header (type %u, payload length %u)",
                     (unsigned)(h.flags & ~RL_FRAME_KNOWN_FLAGS), (unsigned)h.type, (unsigned)h.payload_len);
        else
            snprintf(r->why, sizeof r->why, "payload length %u exceeds the maximum %u (type %u)",
                     (unsigned)h.payload_len, (unsigned)RL_NET_MAX_PAYLOAD, (unsigned)h.type);
        return RL_E_MALFORMED_FRAME;
    }
    if (h.payload_len > r->max_payload) {
        r->failed = 1;
        snprintf(r->why, sizeof r->why, "payload length %u exceeds the %u bytes allowed here (type %u)",
                 (unsigned)h.payload_len, (unsigned)r->max_payload, (unsigned)h.type);
        return RL_E_MALFORMED_FRAME;
    }
    int large = h.payload_len >= RL_FRAME_READER_OWN_MIN && h.payload_len <= RL_FRAME_READER_OWN_MAX;
    if (have - RL_FRAME_HEADER_LEN < h.payload_len) {
        /* Invariant 6: a large frame still arriving moves to its own buffer (none while the one
         * handed out last is still held; without memory it stays here, as a small one). */
        if (large && !r->own && (r->own = rl__arena_block_alloc(h.payload_len)) != NULL) {
            r->own_h = h;
            r->own_got = have - RL_FRAME_HEADER_LEN;
            if (r->own_got) memcpy(r->own, p + RL_FRAME_HEADER_LEN, r->own_got);
            r->start = r->end = 0;
        }
        return RL_OK;
    }
    r->after_large = large;
    *out_h = h;
    *out_payload = p + RL_FRAME_HEADER_LEN;
    r->start += RL_FRAME_HEADER_LEN + h.payload_len;
    if (r->start == r->end) r->start = r->end = 0; /* at a boundary: reuse from the front */
    *out_ready = 1;
    return RL_OK;
}
