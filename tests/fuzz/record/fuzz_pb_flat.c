/* fuzz_pb_flat.c — libFuzzer target for rl__pb_unpack_flat (src/record/decoder.c), the record
 * decoder's own unpack of flat protobuf messages. Must never crash or read out of bounds, and
 * (the oracle) whatever it accepts protobuf-c must accept with the same message: the packed
 * bytes of both must be equal. Byte 0 chooses the message type (AllTypes: every scalar type,
 * a nested and a repeated field; or Order), the rest is the encoded message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "order.pb-c.h"
#include "record/record_int.h"
#include "record_test.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A bump allocator over malloc'd blocks, freed after each input. */
typedef struct {
    void *b[512];
    int n;
} blocks;

static void *blk_alloc(void *ud, size_t n) {
    blocks *bl = ud;
    if (bl->n == 512) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) bl->b[bl->n++] = p;
    return p;
}

static void blk_free(void *ud, void *p) {
    (void)ud;
    (void)p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const ProtobufCMessageDescriptor *desc =
        data[0] & 1 ? &reclayer__order__descriptor : &reclayer__test__all_types__descriptor;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    blocks bl;
    bl.n = 0;
    ProtobufCAllocator al = {blk_alloc, blk_free, &bl};
    ProtobufCMessage *f = rl__pb_unpack_flat(desc, &al, p, n, (int)(data[0] >> 1) & 1);
    if (f) {
        ProtobufCMessage *r = protobuf_c_message_unpack(desc, NULL, n, p);
        if (!r) abort();
        size_t la = protobuf_c_message_get_packed_size(f);
        size_t lb = protobuf_c_message_get_packed_size(r);
        if (la != lb) abort();
        uint8_t *pa = malloc(la ? la : 1), *pb = malloc(lb ? lb : 1);
        if (!pa || !pb) abort();
        if (protobuf_c_message_pack(f, pa) != la || protobuf_c_message_pack(r, pb) != lb || memcmp(pa, pb, la) != 0)
            abort();
        free(pa);
        free(pb);
        protobuf_c_message_free_unpacked(r, NULL);
    }
    while (bl.n) free(bl.b[--bl.n]);
    return 0;
}
