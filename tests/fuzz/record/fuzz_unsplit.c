/* fuzz_unsplit.c — libFuzzer target: assembling records from arbitrary key-values (the
 * unsplitter, forward and reverse, in arbitrary pages) and decoding them must never crash, leak
 * or read out of bounds; every outcome is a record or an error code.
 *
 * Input: byte 0 selects reverse (bit 0) and whether keys get the records prefix (bit 1); then
 * records of [1-byte key length][key][2-byte little-endian value length][value] until the end.
 */
#include <stdint.h>
#include <string.h>

#include "order.pb-c.h"
#include "record/record_int.h"
#include "app/tool.h"

static int on_event(void *ud, const rl__unsplit_event *ev) {
    const rl_store *s = ud;
    if (ev->kind != RL__EV_RECORD) return RL_OK;
    rl_record r;
    if (rl__record_from_event(s, ev, &r, NULL) == RL_OK) rl_record_release(&r);
    return RL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static rl_metadata *md;
    static rl_store *s;
    static const uint8_t prefix[] = {0x02, 'f', 0x00};
    if (!md) {
        if (rl__order_metadata(&md) || rl_store_new(md, prefix, sizeof prefix, RL_STORE_SPLIT_LONG_RECORDS, &s))
            return 0;
    }
    if (size < 1) return 0;
    int reverse = data[0] & 1, add_prefix = data[0] & 2;
    size_t i = 1;
    rl_keyvalue kvs[64];
    uint8_t keys[64][300];
    int n = 0;
    while (i < size && n < 64) {
        size_t kl = data[i++];
        if (size - i < kl) break;
        size_t off = 0;
        if (add_prefix) {
            memcpy(keys[n], s->rec_prefix, s->rec_prefix_len);
            off = s->rec_prefix_len;
        }
        memcpy(keys[n] + off, data + i, kl);
        i += kl;
        if (size - i < 2) break;
        size_t vl = (size_t)data[i] | ((size_t)data[i + 1] << 8);
        i += 2;
        if (size - i < vl) vl = size - i;
        kvs[n] = (rl_keyvalue){keys[n], (uint32_t)(off + kl), data + i, (uint32_t)vl};
        i += vl;
        n++;
    }
    rl__unsplitter u;
    rl__unsplitter_init(&u, s->rec_prefix, s->rec_prefix_len, reverse);
    for (int j = 0; j < n; j++) {
        int k = reverse ? n - 1 - j : j;
        if (rl__unsplitter_feed(&u, kvs[k].key, kvs[k].key_len, kvs[k].value, kvs[k].value_len, on_event, s)) break;
    }
    rl__unsplitter_finish(&u, on_event, s);
    rl__unsplitter_release(&u);
    rl_record r;
    if (rl_store_decode_record(s, kvs, n, &r) == RL_OK) rl_record_release(&r);
    return 0;
}
