/* fuzz_proto.c — libFuzzer target: the wire protocol's payload decoders (src/net/proto.h) on
 * arbitrary bytes.
 *
 * Input: byte 0 picks the payload (index into PAYLOADS below, modulo its size: every request,
 * reply and the error reply), the rest is the payload; byte 0 = 0xff instead takes the frame's
 * type and flags raw from bytes 1-4 (little-endian u16 each), so unknown types and bad flags
 * reach the dispatcher too. Checks, beyond "no crash, no
 * out-of-bounds read, no undefined behaviour":
 *   - the decoder returns RL_OK, RL_E_MALFORMED_FRAME, or (the HELLO, AUTH_CHALLENGE and AUTH
 *     requests only) RL_E_INCOMPATIBLE_PROTOCOL_VERSION, and names the failure;
 *   - a decoded payload re-encodes to exactly the input (the decoder is canonical, and the
 *     encoder accepts everything the decoder does);
 *   - decoding allocates at most 10 x the payload length plus two arena blocks: arrays take at
 *     most ~4.2 bytes per payload byte (counts are checked against the bytes left before anything
 *     is allocated), and the arena's doubling blocks at most twice that;
 *   - a decoded PEEK reply can be checked against an after_version without faults;
 *   - a GET_MAPPED_RANGE reply decodes exactly as the field-by-field walk decodes it (the codec's
 *     fast entry paths, proto.c): the same result, reason, entries and re-encoding;
 *   - every payload decodes with rl__msg_decode exactly as with rl__msg_decode_walk (the hand-coded
 *     GET request and reply), and re-encodes to the same bytes with rl__msg_encode_walk.
 * Seeds: tests/fuzz/corpus/fuzz_proto/, one valid encoding of each payload (named after it).
 */
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "net/proto.h"
#include "reclayer/alloc.h"
#include "reclayer/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The order is part of the corpus format (byte 0); append only. */
static const struct {
    uint16_t type, flags;
} PAYLOADS[] = {
    {RL_MSG_HELLO, 0},
    {RL_MSG_HELLO, RL_FRAME_REPLY},
    {RL_MSG_PING, 0},
    {RL_MSG_PING, RL_FRAME_REPLY},
    {RL_MSG_GET, RL_FRAME_REPLY | RL_FRAME_ERROR},
    {RL_MSG_GET_READ_VERSION, 0},
    {RL_MSG_GET_READ_VERSION, RL_FRAME_REPLY},
    {RL_MSG_COMMIT, 0},
    {RL_MSG_COMMIT, RL_FRAME_REPLY},
    {RL_MSG_GET_SHARD_MAP, 0},
    {RL_MSG_GET_SHARD_MAP, RL_FRAME_REPLY},
    {RL_MSG_REGISTER_STORAGE, 0},
    {RL_MSG_REGISTER_STORAGE, RL_FRAME_REPLY},
    {RL_MSG_PEEK, 0},
    {RL_MSG_PEEK, RL_FRAME_REPLY},
    {RL_MSG_POP, 0},
    {RL_MSG_POP, RL_FRAME_REPLY},
    {RL_MSG_STATUS, 0},
    {RL_MSG_STATUS, RL_FRAME_REPLY},
    {RL_MSG_GET, 0},
    {RL_MSG_GET, RL_FRAME_REPLY},
    {RL_MSG_GET_KEY, 0},
    {RL_MSG_GET_KEY, RL_FRAME_REPLY},
    {RL_MSG_GET_RANGE, 0},
    {RL_MSG_GET_RANGE, RL_FRAME_REPLY},
    {RL_MSG_GET_MAPPED_RANGE, 0},
    {RL_MSG_GET_MAPPED_RANGE, RL_FRAME_REPLY},
    {RL_MSG_GET_MULTI, 0},
    {RL_MSG_GET_MULTI, RL_FRAME_REPLY},
    {RL_MSG_SET_DELAY, 0},
    {RL_MSG_SET_DELAY, RL_FRAME_REPLY},
    {RL_MSG_SPLIT_SHARD, 0},
    {RL_MSG_SPLIT_SHARD, RL_FRAME_REPLY},
    {RL_MSG_ASSIGN_SHARD, 0},
    {RL_MSG_ASSIGN_SHARD, RL_FRAME_REPLY},
    {RL_MSG_MOVE_SHARD, 0},
    {RL_MSG_MOVE_SHARD, RL_FRAME_REPLY},
    {RL_MSG_AUTH_CHALLENGE, 0},
    {RL_MSG_AUTH, 0},
    {RL_MSG_AUTH, RL_FRAME_REPLY},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    size_t n_payloads = sizeof PAYLOADS / sizeof PAYLOADS[0], skip = 1;
    uint16_t type = PAYLOADS[data[0] % n_payloads].type;
    uint16_t flags = PAYLOADS[data[0] % n_payloads].flags;
    if (data[0] == 0xff) {
        if (size < 5) return 0;
        type = (uint16_t)(data[1] | data[2] << 8);
        flags = (uint16_t)(data[3] | data[4] << 8);
        skip = 5;
    }
    /* An exact copy, so that a read one byte past the payload is caught. */
    size_t len = size - skip;
    uint8_t *p = malloc(len ? len : 1);
    if (!p) return 0;
    memcpy(p, data + skip, len);

    rl_arena a;
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl_alloc_stats st;
    rl__arena_init(&a, 0);
    rl_alloc_reset_stats();
    int rc = rl__msg_decode(type, flags, len ? p : NULL, len, &a, &m, &why);
    rl_alloc_get_stats(&st);
    if (st.bytes > 10 * (uint64_t)len + 8192) abort();
    if (rc == RL_OK) {
        rl_buf b;
        rl__buf_init(&b);
        if (rl__msg_encode(&b, &m, &why) != RL_OK) abort();
        if (b.len != len || (len && memcmp(b.data, p, len) != 0)) abort();
        rl__buf_release(&b);
        if (type == RL_MSG_PEEK && flags == RL_FRAME_REPLY) {
            rl__version after = m.u.peek_reply.n_versions ? m.u.peek_reply.versions[0].version : 0;
            int c0 = rl__msg_peek_reply_check(&m.u.peek_reply, 0, &why);
            int c1 = rl__msg_peek_reply_check(&m.u.peek_reply, after, &why);
            if (c0 != RL_OK && c0 != RL_E_MALFORMED_FRAME) abort();
            if (m.u.peek_reply.n_versions && c1 != RL_E_MALFORMED_FRAME) abort();
            if (m.u.peek_reply.end_version < UINT64_MAX &&
                rl__msg_peek_reply_check(&m.u.peek_reply, m.u.peek_reply.end_version + 1, &why) != RL_E_MALFORMED_FRAME)
                abort();
        }
    } else {
        int versioned = type == RL_MSG_HELLO || ((type == RL_MSG_AUTH_CHALLENGE || type == RL_MSG_AUTH) && flags == 0);
        if (rc != RL_E_MALFORMED_FRAME &&
            !(rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION && versioned && flags != (RL_FRAME_REPLY | RL_FRAME_ERROR)))
            abort();
        if (rl__errdetail_get(&why)[0] == 0) abort();
    }
    if (type == RL_MSG_GET) { /* the fast paths of rl__msg_decode / rl__msg_encode against the walk */
        rl_arena a3;
        rl__msg w3;
        rl__errdetail why3;
        rl__errdetail_init(&why3, NULL);
        rl__arena_init(&a3, 0);
        int rc3 = rl__msg_decode_walk(type, flags, len ? p : NULL, len, &a3, &w3, &why3);
        if (rc3 != rc || (rc != RL_OK && strcmp(rl__errdetail_get(&why), rl__errdetail_get(&why3)) != 0)) abort();
        if (rc == RL_OK && flags == 0 &&
            (m.u.get_req.version != w3.u.get_req.version || m.u.get_req.key != w3.u.get_req.key ||
             m.u.get_req.key_len != w3.u.get_req.key_len))
            abort();
        if (rc == RL_OK && flags == RL_FRAME_REPLY &&
            (m.u.get_reply.present != w3.u.get_reply.present || m.u.get_reply.value_len != w3.u.get_reply.value_len ||
             (m.u.get_reply.value_len && m.u.get_reply.value != w3.u.get_reply.value)))
            abort();
        if (rc == RL_OK) {
            rl_buf b3;
            rl__buf_init(&b3);
            if (rl__msg_encode_walk(&b3, &w3, NULL) != RL_OK || b3.len != len || (len && memcmp(b3.data, p, len) != 0))
                abort();
            rl__buf_release(&b3);
        }
        rl__arena_release(&a3);
    }
    if (type == RL_MSG_GET_MAPPED_RANGE && flags == RL_FRAME_REPLY) {
        rl_arena a2;
        rl__msg_get_mapped_range_reply w;
        rl__errdetail why2;
        rl__errdetail_init(&why2, NULL);
        rl__arena_init(&a2, 0);
        int rc2 = rl__msg_get_mapped_range_reply_decode_walk(len ? p : NULL, len, &a2, &w, &why2);
        if (rc2 != rc) abort();
        if (rc != RL_OK && strcmp(rl__errdetail_get(&why), rl__errdetail_get(&why2)) != 0) abort();
        if (rc == RL_OK) {
            const rl__msg_get_mapped_range_reply *f = &m.u.get_mapped_range_reply;
            if (f->n_entries != w.n_entries) abort();
            for (uint32_t i = 0; i < w.n_entries; i++) {
                const rl_mapped_keyvalue *x = &f->entries[i], *y = &w.entries[i];
                if (x->index.key != y->index.key || x->index.key_len != y->index.key_len ||
                    x->index.value != y->index.value || x->index.value_len != y->index.value_len ||
                    x->is_range != y->is_range || x->begin != y->begin || x->begin_len != y->begin_len ||
                    x->end != y->end || x->end_len != y->end_len || x->n_kvs != y->n_kvs || x->more != y->more ||
                    x->served_locally != y->served_locally || x->index_omitted != y->index_omitted ||
                    x->index_omitted_len != y->index_omitted_len)
                    abort();
                for (int j = 0; j < x->n_kvs; j++)
                    if (x->kvs[j].key != y->kvs[j].key || x->kvs[j].key_len != y->kvs[j].key_len ||
                        x->kvs[j].value != y->kvs[j].value || x->kvs[j].value_len != y->kvs[j].value_len)
                        abort();
            }
            rl_buf b1, b2;
            rl__buf_init(&b1);
            rl__buf_init(&b2);
            if (rl__msg_get_mapped_range_reply_encode(&b1, f, NULL) != RL_OK ||
                rl__msg_get_mapped_range_reply_encode_walk(&b2, &w, NULL) != RL_OK || b1.len != b2.len ||
                memcmp(b1.data, b2.data, b1.len) != 0)
                abort();
            rl__buf_release(&b1);
            rl__buf_release(&b2);
        }
        rl__arena_release(&a2);
    }
    rl__arena_release(&a);
    free(p);
    return 0;
}
