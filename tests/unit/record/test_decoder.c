/* test_decoder.c — record layer, part 9: the reusable record decoder of scans
 * (rl__record_decoder, src/record/decoder.c) against the strict decoder rl_store_decode_record
 * as the model: same records for every valid layout (unsplit, split, with and without versions),
 * the same error code and detail for every defect, random mutations of valid layouts, no
 * allocation in steady state, and every allocation failing in turn.
 *
 * Test IDs: record_9_*.
 */
#include <stdio.h>
#include <stdlib.h>

#include "test.h"

#include "base/alloc.h"
#include "order.pb-c.h"
#include "record_test.pb-c.h"
#include "reclayer/alloc.h"
#include "record/pbwire.h"
#include "record/record_int.h"
#include "app/tool.h"

/* ("test", "orders") by hand. */
static const uint8_t P[] = {0x02, 't', 'e', 's', 't', 0x00, 0x02, 'o', 'r', 'd', 'e', 'r', 's', 0x00};

static size_t enc_int(uint8_t *o, int64_t v) {
    uint64_t m = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    int n = 0;
    for (uint64_t t = m; t; t >>= 8) n++;
    if (v < 0) m = ~m;
    o[0] = (uint8_t)(v < 0 ? 0x14 - n : 0x14 + n);
    for (int i = 0; i < n; i++) o[1 + i] = (uint8_t)(m >> (8 * (n - 1 - i)));
    return (size_t)n + 1;
}

#define MAX_KV 16

/* A record range built by hand: keys records prefix + pk + suffix element. */
typedef struct {
    uint8_t keys[MAX_KV][64];
    uint8_t *vals[MAX_KV];
    rl_keyvalue kv[MAX_KV];
    int n;
} layout;

static void lay_add(layout *l, const rl_store *s, const uint8_t *pk, size_t pk_len, const uint8_t *suffix,
                    size_t suffix_len, const uint8_t *v, size_t vlen) {
    ASSERT_TRUE(l->n < MAX_KV);
    uint8_t *k = l->keys[l->n];
    memcpy(k, s->rec_prefix, s->rec_prefix_len);
    memcpy(k + s->rec_prefix_len, pk, pk_len);
    memcpy(k + s->rec_prefix_len + pk_len, suffix, suffix_len);
    l->vals[l->n] = malloc(vlen ? vlen : 1);
    if (vlen) memcpy(l->vals[l->n], v, vlen);
    l->kv[l->n] = (rl_keyvalue){k, (uint32_t)(s->rec_prefix_len + pk_len + suffix_len), l->vals[l->n], (uint32_t)vlen};
    l->n++;
}

static void lay_add_int(layout *l, const rl_store *s, const uint8_t *pk, size_t pk_len, int64_t sfx, const uint8_t *v,
                        size_t vlen) {
    uint8_t e[10];
    lay_add(l, s, pk, pk_len, e, enc_int(e, sfx), v, vlen);
}

static void lay_free(layout *l) {
    for (int i = 0; i < l->n; i++) free(l->vals[i]);
    l->n = 0;
}

/* The valid layout of an Order with `padding` bytes: optional version, then suffix 0 or the
 * 100,000-byte chunks. */
static void lay_order(layout *l, const rl_store *s, int64_t id, size_t padding, int with_version, uint8_t *pk,
                      size_t *pk_len) {
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    uint8_t *pad = malloc(padding ? padding : 1);
    for (size_t i = 0; i < padding; i++) pad[i] = (uint8_t)(i * 7 + (size_t)id);
    o.has_order_id = 1, o.order_id = id;
    o.has_price = 1, o.price = id * 3;
    o.customer = "customer-x";
    o.has_quantity = 1, o.quantity = 4;
    if (padding) o.has_padding = 1, o.padding.data = pad, o.padding.len = padding;
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__record_serialize(s->md, 0, &o.base, &b));
    *pk_len = enc_int(pk, id);
    l->n = 0;
    if (with_version) {
        uint8_t v[13] = {0x33, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, (uint8_t)id};
        lay_add_int(l, s, pk, *pk_len, -1, v, sizeof v);
    }
    int chunks = rl__split_chunks(b.len);
    if (chunks == 0) {
        lay_add_int(l, s, pk, *pk_len, 0, b.data, b.len);
    } else {
        for (int c = 0; c < chunks; c++) {
            size_t off = (size_t)c * RL_RECORD_SPLIT_SIZE;
            size_t n = b.len - off < RL_RECORD_SPLIT_SIZE ? b.len - off : RL_RECORD_SPLIT_SIZE;
            lay_add_int(l, s, pk, *pk_len, c + 1, b.data + off, n);
        }
    }
    rl__buf_release(&b);
    free(pad);
}

static void same_record(const rl_record *a, const rl_record *b) {
    assert_ptr_equal(a->type, b->type);
    ASSERT_MEM_EQ(a->pk, a->pk_len, b->pk, b->pk_len);
    ASSERT_EQ(a->has_version, b->has_version);
    if (a->has_version) ASSERT_MEM_EQ(a->version, 12, b->version, 12);
    ASSERT_EQ(a->stored_len, b->stored_len);
    ASSERT_EQ(a->n_chunks, b->n_chunks);
    size_t la = protobuf_c_message_get_packed_size(a->msg), lb = protobuf_c_message_get_packed_size(b->msg);
    uint8_t *pa = malloc(la + 1), *pb = malloc(lb + 1);
    protobuf_c_message_pack(a->msg, pa);
    protobuf_c_message_pack(b->msg, pb);
    ASSERT_MEM_EQ(pa, la, pb, lb);
    free(pa);
    free(pb);
}

/* Decode l with the decoder and with the strict decoder: same code, same detail, same record. */
static int check_same(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len, const layout *l) {
    rl_record strict = {0}, fast;
    char msg[1024];
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc_strict = rl_store_decode_record(s, l->kv, l->n, &strict);
    snprintf(msg, sizeof msg, "%s", rc_strict ? rl_store_errmsg(s) : "");
    int rc = rl__decoder_decode(d, s, pk, pk_len, l->kv, l->n, &fast, &why);
    if (rc != rc_strict) fail_msg("decoder %s, strict decoder %s", rl_error_name(rc), rl_error_name(rc_strict));
    if (rc) {
        if (rc != RL_E_NOT_FOUND) ASSERT_STR_EQ(rl__errdetail_get(&why), msg);
    } else {
        same_record(&fast, &strict);
    }
    rl_record_release(&strict);
    return rc;
}

static void setup(rl_metadata **md, rl_store **s) {
    ASSERT_OK(rl__order_metadata(md));
    ASSERT_OK(rl_store_new(*md, P, sizeof P, RL_STORE_SPLIT_LONG_RECORDS | RL_STORE_RECORD_VERSIONS, s));
}

TEST(record_9_1_valid_layouts_match_strict) {
    static const size_t pads[] = {0, 10, 99980, 99990, 100000, 150000, 200000, 250001};
    rl_metadata *md;
    rl_store *s;
    rl__record_decoder d;
    setup(&md, &s);
    rl__decoder_init(&d);
    for (size_t i = 0; i < sizeof pads / sizeof pads[0]; i++) {
        for (int v = 0; v < 2; v++) {
            layout l = {0};
            uint8_t pk[16];
            size_t pk_len;
            lay_order(&l, s, 1000 + (int64_t)i, pads[i], v, pk, &pk_len);
            ASSERT_OK(check_same(&d, s, pk, pk_len, &l));
            ASSERT_NULL(d.slow.msg); /* taken by the fast path */
            lay_free(&l);
        }
    }
    rl__decoder_release(&d);
    rl_store_free(s);
    rl_metadata_free(md);
}

TEST(record_9_2_defects_match_strict) {
    rl_metadata *md;
    rl_store *s;
    rl__record_decoder d;
    setup(&md, &s);
    rl__decoder_init(&d);
    uint8_t pk[16], pk2[16];
    size_t pk_len, pk2_len;
    layout l = {0}, base = {0};
    const uint8_t bad_version[5] = {0x33, 1, 2, 3, 4};
    const uint8_t junk[3] = {0xff, 0xff, 0xff};
    const uint8_t other_union[4] = {0x12, 0x02, 0x08, 0x01}; /* union field 2: no such type */
    const uint8_t stray[3] = {0x02, 'x', 0x00};
    int cases = 0, errors = 0;
    for (int k = 0; k < 11; k++) {
        lay_order(&base, s, 7, 250001, 1, pk, &pk_len); /* version + 3 chunks */
        l.n = 0;
        switch (k) {
        case 0: /* gap: chunks 1, 3 */
            lay_add_int(&l, s, pk, pk_len, 1, base.kv[1].value, base.kv[1].value_len);
            lay_add_int(&l, s, pk, pk_len, 3, base.kv[3].value, base.kv[3].value_len);
            break;
        case 1: /* no first chunk */
            lay_add_int(&l, s, pk, pk_len, 2, base.kv[2].value, base.kv[2].value_len);
            lay_add_int(&l, s, pk, pk_len, 3, base.kv[3].value, base.kv[3].value_len);
            break;
        case 2: /* unsplit value beside chunks */
            lay_add_int(&l, s, pk, pk_len, 0, junk, sizeof junk);
            lay_add_int(&l, s, pk, pk_len, 1, base.kv[1].value, base.kv[1].value_len);
            break;
        case 3: /* a stray suffix after the data */
            lay_add_int(&l, s, pk, pk_len, 0, other_union, sizeof other_union);
            lay_add(&l, s, pk, pk_len, stray, sizeof stray, junk, 1);
            break;
        case 4: /* a bad version value */
            lay_add_int(&l, s, pk, pk_len, -1, bad_version, sizeof bad_version);
            lay_add_int(&l, s, pk, pk_len, 1, base.kv[1].value, base.kv[1].value_len);
            break;
        case 5: /* a version key alone */
            lay_add_int(&l, s, pk, pk_len, -1, base.kv[0].value, base.kv[0].value_len);
            break;
        case 6: /* nothing at all */ break;
        case 7: /* record bytes that do not parse */ lay_add_int(&l, s, pk, pk_len, 0, junk, sizeof junk); break;
        case 8: /* a union field of no type */
            lay_add_int(&l, s, pk, pk_len, 0, other_union, sizeof other_union);
            break;
        case 9: /* a suffix below -1 */
            lay_add_int(&l, s, pk, pk_len, -2, junk, 1);
            lay_add_int(&l, s, pk, pk_len, 0, other_union, sizeof other_union);
            break;
        case 10: { /* a longer primary key (pk, 5) inside the range, after our record */
            const uint8_t *whole = NULL;
            lay_free(&base);
            lay_order(&base, s, 7, 0, 0, pk, &pk_len);
            whole = base.kv[0].value;
            lay_add_int(&l, s, pk, pk_len, 0, whole, base.kv[0].value_len);
            memcpy(pk2, pk, pk_len);
            pk2_len = pk_len + enc_int(pk2 + pk_len, 5);
            lay_add_int(&l, s, pk2, pk2_len, 0, whole, base.kv[0].value_len);
            break;
        }
        }
        int rc = check_same(&d, s, pk, pk_len, &l);
        cases++;
        errors += rc != RL_OK;
        lay_free(&l);
        lay_free(&base);
    }
    ASSERT_EQ(cases, 11);
    ASSERT_TRUE(errors >= 9); /* all but the longer-key case (and perhaps the stray) fail */
    rl__decoder_release(&d);
    rl_store_free(s);
    rl_metadata_free(md);
}

TEST(record_9_3_random_mutations_match_strict) {
    static const size_t pads[] = {0, 50, 100000, 250001};
    uint64_t seed = rl_test_seed(), st = seed;
    rl_metadata *md;
    rl_store *s;
    rl__record_decoder d;
    setup(&md, &s);
    rl__decoder_init(&d);
    int ok = 0;
    for (int iter = 0; iter < 600; iter++) {
        layout l = {0};
        uint8_t pk[16];
        size_t pk_len;
        lay_order(&l, s, (int64_t)rl_test_rand_below(&st, 100000), pads[rl_test_rand_below(&st, 4)],
                  (int)rl_test_rand_below(&st, 2), pk, &pk_len);
        int muts = (int)rl_test_rand_below(&st, 3);
        for (int m = 0; m < muts && l.n > 0; m++) {
            int i = (int)rl_test_rand_below(&st, (uint64_t)l.n);
            switch (rl_test_rand_below(&st, 5)) {
            case 0: /* drop key-value i */
                free(l.vals[i]);
                memmove(&l.keys[i], &l.keys[i + 1], (size_t)(l.n - i - 1) * sizeof l.keys[0]);
                memmove(&l.vals[i], &l.vals[i + 1], (size_t)(l.n - i - 1) * sizeof l.vals[0]);
                memmove(&l.kv[i], &l.kv[i + 1], (size_t)(l.n - i - 1) * sizeof l.kv[0]);
                l.n--;
                for (int j = 0; j < l.n; j++) l.kv[j].key = l.keys[j], l.kv[j].value = l.vals[j];
                break;
            case 1: /* change its suffix (the last key byte); an earlier mutation may have
                     * truncated the key to nothing */
                if (l.kv[i].key_len) l.keys[i][l.kv[i].key_len - 1] ^= (uint8_t)(1 + rl_test_rand_below(&st, 3));
                break;
            case 2: /* flip a value byte */
                if (l.kv[i].value_len) l.vals[i][rl_test_rand_below(&st, l.kv[i].value_len)] ^= 0x41;
                break;
            case 3: /* truncate the value */
                l.kv[i].value_len = (uint32_t)rl_test_rand_below(&st, l.kv[i].value_len + 1);
                break;
            default: /* truncate the key */
                l.kv[i].key_len = (uint32_t)rl_test_rand_below(&st, l.kv[i].key_len + 1);
                break;
            }
        }
        ok += check_same(&d, s, pk, pk_len, &l) == RL_OK;
        lay_free(&l);
    }
    ASSERT_TRUE(ok > 100); /* unmutated layouts (about a third) decode */
    rl__decoder_release(&d);
    rl_store_free(s);
    rl_metadata_free(md);
}

TEST(record_9_4_steady_state_allocates_nothing) {
    rl_metadata *md;
    rl_store *s;
    rl__record_decoder d;
    layout big = {0}, small = {0};
    uint8_t pk1[16], pk2[16];
    size_t pk1_len, pk2_len;
    rl_record r;
    rl_alloc_stats a0, a1;
    setup(&md, &s);
    rl__decoder_init(&d);
    lay_order(&big, s, 1, 250001, 1, pk1, &pk1_len);
    lay_order(&small, s, 2, 0, 1, pk2, &pk2_len);
    /* Warm-up: the scratch grows to the largest record. */
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(rl__decoder_decode(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL));
        ASSERT_OK(rl__decoder_decode(&d, s, pk2, pk2_len, small.kv, small.n, &r, NULL));
    }
    rl_alloc_get_stats(&a0);
    for (int i = 0; i < 10; i++) {
        ASSERT_OK(rl__decoder_decode(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL));
        ASSERT_EQ(r.n_chunks, 3);
        ASSERT_EQ(((Reclayer__Order *)r.msg)->padding.len, 250001);
        ASSERT_OK(rl__decoder_decode(&d, s, pk2, pk2_len, small.kv, small.n, &r, NULL));
        ASSERT_EQ(((Reclayer__Order *)r.msg)->order_id, 2);
    }
    rl_alloc_get_stats(&a1);
    ASSERT_EQ(a1.allocs - a0.allocs, 0);
    lay_free(&big);
    lay_free(&small);
    rl__decoder_release(&d);
    rl_store_free(s);
    rl_metadata_free(md);
}

TEST(record_9_5_out_of_memory) {
    rl_metadata *md;
    rl_store *s;
    layout big = {0}, small = {0};
    uint8_t pk1[16], pk2[16];
    size_t pk1_len, pk2_len;
    rl_alloc_stats a0, a1;
    setup(&md, &s);
    lay_order(&big, s, 1, 250001, 1, pk1, &pk1_len);
    lay_order(&small, s, 2, 0, 0, pk2, &pk2_len);
    /* Count the allocations of a session: big, small, big. */
    rl__record_decoder d;
    rl_record r;
    rl_alloc_get_stats(&a0);
    rl__decoder_init(&d);
    ASSERT_OK(rl__decoder_decode(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL));
    ASSERT_OK(rl__decoder_decode(&d, s, pk2, pk2_len, small.kv, small.n, &r, NULL));
    ASSERT_OK(rl__decoder_decode(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL));
    rl__decoder_release(&d);
    rl_alloc_get_stats(&a1);
    long total = (long)(a1.allocs - a0.allocs);
    ASSERT_TRUE(total > 0);
    int ooms = 0;
    for (long n = 0; n < total; n++) {
        rl__decoder_init(&d);
        rl_alloc_fail_after(n);
        int rc1 = rl__decoder_decode(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL);
        if (rc1 == RL_OK) ASSERT_EQ(((Reclayer__Order *)r.msg)->padding.len, 250001);
        int rc2 = rl__decoder_decode(&d, s, pk2, pk2_len, small.kv, small.n, &r, NULL);
        if (rc2 == RL_OK) ASSERT_EQ(((Reclayer__Order *)r.msg)->order_id, 2);
        int rc3 = rl__decoder_decode(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL);
        if (rc3 == RL_OK) ASSERT_EQ(((Reclayer__Order *)r.msg)->order_id, 1);
        rl_alloc_fail_after(-1);
        ASSERT_TRUE(rc1 == RL_OK || rc1 == RL_E_OUT_OF_MEMORY);
        ASSERT_TRUE(rc2 == RL_OK || rc2 == RL_E_OUT_OF_MEMORY);
        ASSERT_TRUE(rc3 == RL_OK || rc3 == RL_E_OUT_OF_MEMORY);
        ooms += rc1 != RL_OK || rc2 != RL_OK || rc3 != RL_OK;
        rl__decoder_release(&d);
    }
    ASSERT_TRUE(ooms > 0);
    lay_free(&big);
    lay_free(&small);
    rl_store_free(s);
    rl_metadata_free(md);
}

/* The decoder's direct recognition of the suffixes -1, 0 and 1..255 against the strict decoder:
 * record ranges whose suffix elements are random short byte strings from an alphabet of the
 * integer codes and their neighbours (non-minimal forms such as 0x15 0x00, truncated ones, two
 * elements, other types) mixed with valid suffixes, so both the direct path and the tuple
 * decoder's path are taken. */
TEST(record_9_6_suffix_bytes_match_strict) {
    static const uint8_t alpha[] = {0x00, 0x01, 0x02, 0x05, 0x12, 0x13, 0x14, 0x15, 0x16, 0xfe, 0xff};
    static const struct {
        uint8_t b[3];
        size_t n;
    } near[] = {{{0x15, 0x00}, 2},
                {{0x13, 0xff}, 2},
                {{0x14, 0x00}, 2},
                {{0x15}, 1},
                {{0x13}, 1},
                {{0x16, 0x00, 0x01}, 3},
                {{0x12, 0xff, 0xfe}, 3},
                {{0x15, 0x01, 0x14}, 3},
                {{0x13, 0xfe, 0x00}, 3},
                {{0x0c}, 1},
                {{0x1c}, 1}};
    uint64_t seed = rl_test_seed(), st = seed;
    rl_metadata *md;
    rl_store *s;
    rl__record_decoder d;
    setup(&md, &s);
    rl__decoder_init(&d);
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_order_id = 1, o.order_id = 77;
    o.customer = "customer-y";
    rl_buf rec;
    rl__buf_init(&rec);
    ASSERT_OK(rl__record_serialize(s->md, 0, &o.base, &rec));
    ASSERT_TRUE(rec.len >= 4);
    int ok = 0;
    for (int iter = 0; iter < 3000; iter++) {
        layout l = {0};
        uint8_t pk[16];
        size_t pk_len = enc_int(pk, (int64_t)rl_test_rand_below(&st, 1000));
        int n = 1 + (int)rl_test_rand_below(&st, 4);
        int has_version = n > 1 && rl_test_rand_below(&st, 2);
        int n_data = n - has_version; /* one value (suffix 0) or n_data chunks of rec */
        int64_t next = has_version ? -1 : (n_data == 1 ? 0 : 1);
        for (int i = 0; i < n; i++) {
            uint8_t sfx[4];
            size_t sl;
            uint64_t pick = rl_test_rand_below(&st, 6);
            if (pick < 4) {
                sl = enc_int(sfx, next);
            } else if (pick == 4) {
                size_t k = rl_test_rand_below(&st, sizeof near / sizeof near[0]);
                sl = near[k].n;
                memcpy(sfx, near[k].b, sl);
            } else {
                sl = rl_test_rand_below(&st, 4);
                for (size_t j = 0; j < sl; j++)
                    sfx[j] = rl_test_rand_below(&st, 4) ? alpha[rl_test_rand_below(&st, sizeof alpha)]
                                                        : (uint8_t)rl_test_rand_below(&st, 256);
            }
            if (next == -1) {
                uint8_t v[13] = {0x33, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, 1};
                lay_add(&l, s, pk, pk_len, sfx, sl, v, sizeof v);
                next = n_data == 1 ? 0 : 1;
            } else {
                size_t part = rec.len / (size_t)n_data, c = (size_t)(i - has_version);
                size_t off = c * part, len = c + 1 == (size_t)n_data ? rec.len - off : part;
                lay_add(&l, s, pk, pk_len, sfx, sl, rec.data + off, len);
                next++;
            }
        }
        ok += check_same(&d, s, pk, pk_len, &l) == RL_OK;
        lay_free(&l);
    }
    if (ok <= 100) fail_msg("only %d of 3000 decoded", ok);
    rl__buf_release(&rec);
    rl__decoder_release(&d);
    rl_store_free(s);
    rl_metadata_free(md);
}

/* ---- record-9.7: rl__pb_unpack_flat against protobuf-c ------------------------------------ */

/* An allocator that remembers its blocks, to free them after each comparison. */
typedef struct {
    void *b[256];
    int n;
} blocks;
static void *blk_alloc(void *ud, size_t n) {
    blocks *bl = ud;
    if (bl->n == 256) return NULL;
    void *p = malloc(n ? n : 1);
    if (p) bl->b[bl->n++] = p;
    return p;
}
static void blk_free(void *ud, void *p) {
    (void)ud;
    (void)p;
}
static void blk_drop(blocks *bl) {
    while (bl->n) free(bl->b[--bl->n]);
}

/* v as a varint padded to exactly len bytes (non-minimal when longer than needed), len <= 10. */
static size_t put_var_padded(uint8_t *o, uint64_t v, size_t len) {
    for (size_t k = 0; k + 1 < len; k++) {
        o[k] = (uint8_t)((v & 0x7f) | 0x80);
        v >>= 7;
    }
    o[len - 1] = (uint8_t)(v & 0x7f);
    return len;
}

static size_t put_var(uint8_t *o, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        o[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    o[n++] = (uint8_t)v;
    return n;
}

/* One random field of desc (or an unknown / repeated / nested one now and then), appended at
 * o; the wire type is usually the field's own. Values: small, large, negative, 10-byte and
 * non-minimal varints, strings with NULs. */
static size_t rand_field(uint64_t *rs, const ProtobufCMessageDescriptor *desc, uint8_t *o) {
    size_t n = 0;
    unsigned f = (unsigned)rl_test_rand_below(rs, desc->n_fields);
    uint32_t id = desc->fields[f].id;
    if (rl_test_rand_below(rs, 25) == 0) id = 40 + (uint32_t)rl_test_rand_below(rs, 5);
    int wt;
    switch (desc->fields[f].type) {
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT: wt = 5; break;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: wt = 1; break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: wt = 2; break;
    default: wt = 0;
    }
    if (rl_test_rand_below(rs, 30) == 0) wt = (int)rl_test_rand_below(rs, 6);
    if (rl_test_rand_below(rs, 30) == 0) /* a tag in 5..10 bytes (protobuf-c reads up to 5) */
        n += put_var_padded(o + n, ((uint64_t)id << 3) | (uint64_t)wt, 5 + rl_test_rand_below(rs, 6));
    else n += put_var(o + n, ((uint64_t)id << 3) | (uint64_t)wt);
    switch (wt) {
    case 0: {
        uint64_t v;
        switch (rl_test_rand_below(rs, 5)) {
        case 0: v = rl_test_rand_below(rs, 128); break;
        case 1: v = (uint64_t) - (int64_t)rl_test_rand_below(rs, 1000); break;
        case 2: v = rl_test_rand_below(rs, 1ull << 40) << rl_test_rand_below(rs, 24); break;
        case 3: v = 0; break;
        default: v = rl_test_rand_below(rs, 300) + 0xffffff00ull;
        }
        if (rl_test_rand_below(rs, 10) == 0) { /* non-minimal, or a 10-byte form with odd high bits */
            uint64_t x = v;
            for (int k = 0; k < 9; k++) {
                o[n++] = (uint8_t)((x & 0x7f) | 0x80);
                x >>= 7;
            }
            o[n++] = (uint8_t)(rl_test_rand_below(rs, 2) ? (x & 1) : rl_test_rand_below(rs, 128));
        } else {
            n += put_var(o + n, v);
        }
        break;
    }
    case 1:
    case 5:
        for (int k = 0; k < (wt == 1 ? 8 : 4); k++) o[n++] = (uint8_t)rl_test_rand_below(rs, 256);
        break;
    case 2: {
        size_t len = rl_test_rand_below(rs, 4) ? rl_test_rand_below(rs, 12) : 0;
        if (rl_test_rand_below(rs, 20) == 0) /* a length prefix in 4..10 bytes */
            n += put_var_padded(o + n, len, 4 + rl_test_rand_below(rs, 7));
        else n += put_var(o + n, len);
        for (size_t k = 0; k < len; k++)
            o[n++] =
                (uint8_t)(rl_test_rand_below(rs, 4) ? 'a' + rl_test_rand_below(rs, 26) : rl_test_rand_below(rs, 256));
        break;
    }
    default: break; /* groups / reserved wire types: no payload */
    }
    return n;
}

/* Whatever rl__pb_unpack_flat accepts, protobuf-c accepts with the same message (same packed
 * bytes: values, has_ flags, strings and bytes), for AllTypes (every scalar type, a nested
 * and a repeated field) and Order; and it accepts most well-formed inputs. */
TEST(record_9_7_flat_unpack_matches_protobuf_c) {
    uint64_t rs = rl_test_seed();
    const ProtobufCMessageDescriptor *descs[2] = {&reclayer__test__all_types__descriptor, &reclayer__order__descriptor};
    uint8_t in[2048], pa[4096], pb[4096];
    blocks bl = {{0}, 0};
    ProtobufCAllocator al = {blk_alloc, blk_free, &bl};
    int handled = 0, declined_ok = 0, both_fail = 0;
    for (int iter = 0; iter < 30000; iter++) {
        const ProtobufCMessageDescriptor *desc = descs[iter & 1];
        size_t n = 0;
        int nf = (int)rl_test_rand_below(&rs, 8);
        for (int k = 0; k < nf; k++) n += rand_field(&rs, desc, in + n);
        if (n && rl_test_rand_below(&rs, 20) == 0) n = rl_test_rand_below(&rs, n); /* truncate */
        if (n && rl_test_rand_below(&rs, 20) == 0)
            in[rl_test_rand_below(&rs, n)] ^= (uint8_t)(1u << rl_test_rand_below(&rs, 8));
        ProtobufCMessage *r = protobuf_c_message_unpack(desc, NULL, n, in);
        int borrow = (int)(iter & 2) >> 1; /* bytes copied or pointing into in: the same message */
        ProtobufCMessage *f = rl__pb_unpack_flat(desc, &al, in, n, borrow);
        if (f) {
            if (!r) fprintf(stderr, "iter %d: flat accepted what protobuf-c refuses\n", iter);
            ASSERT_NOT_NULL(r);
            size_t la = protobuf_c_message_get_packed_size(f), lb = protobuf_c_message_get_packed_size(r);
            ASSERT_TRUE(la <= sizeof pa && lb <= sizeof pb);
            ASSERT_MEM_EQ(pa, protobuf_c_message_pack(f, pa), pb, protobuf_c_message_pack(r, pb));
            handled++;
        } else if (r) {
            declined_ok++;
        } else {
            both_fail++;
        }
        if (r) protobuf_c_message_free_unpacked(r, NULL);
        blk_drop(&bl);
    }
    fprintf(stderr, "handled %d, declined (protobuf-c accepts) %d, both refuse %d\n", handled, declined_ok, both_fail);
    ASSERT_TRUE(handled > 10000);
    ASSERT_TRUE(declined_ok > 500);
    ASSERT_TRUE(both_fail > 500);
}

/* The one varint reader (pbwire.h) that the union framing and the flat decoder share: the
 * boundaries of its acceptance rule, and the writer's output read back. */
TEST(record_9_8_varint_acceptance) {
    static const struct {
        uint8_t in[12];
        size_t n;
        unsigned max;
        int ok;
        uint64_t v;
    } cases[] = {
        {{0x00}, 1, 10, 1, 0},
        {{0x7f}, 1, 1, 1, 127},
        {{0x80, 0x01}, 2, 10, 1, 128},
        {{0x80, 0x01}, 2, 1, 0, 0}, /* longer than max */
        {{0x80}, 1, 10, 0, 0},      /* truncated */
        {{0}, 0, 10, 0, 0},         /* empty */
        {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10, 10, 1, UINT64_MAX},
        {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 10, 10, 0, 0}, /* bit 64 */
        {{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 11, 10, 0, 0},
        {{0xff, 0xff, 0xff, 0xff, 0x0f}, 5, 5, 1, 0xffffffffu},
        {{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 6, 5, 0, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t i = 0;
        uint64_t v = 0;
        int rc = rl__pb_varint(cases[k].in, cases[k].n, &i, &v, cases[k].max);
        if ((rc == 0) != cases[k].ok) fprintf(stderr, "case %zu\n", k);
        assert_int_equal(rc == 0, cases[k].ok);
        if (cases[k].ok) ASSERT_TRUE(v == cases[k].v);
    }
    rl_buf b;
    rl__buf_init(&b);
    uint64_t vals[] = {0, 1, 127, 128, 300, 0xffffffffu, (uint64_t)1 << 63, UINT64_MAX};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) rl__pb_put_varint(&b, vals[k]);
    assert_int_equal(rl__buf_error(&b), RL_OK);
    size_t i = 0;
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        uint64_t v = 0;
        assert_int_equal(rl__pb_varint(b.data, b.len, &i, &v, 10), 0);
        ASSERT_TRUE(v == vals[k]);
    }
    ASSERT_TRUE(i == b.len);
    rl__buf_release(&b);
}

/* 1 if p lies inside [b, b + n). */
static int inside(const void *p, const void *b, size_t n) {
    return (uintptr_t)p >= (uintptr_t)b && (uintptr_t)p < (uintptr_t)b + n;
}

/* The padding of r is lay_order's pattern for id, len bytes. */
static void check_padding(const rl_record *r, int64_t id, size_t len) {
    const Reclayer__Order *o = (const Reclayer__Order *)r->msg;
    ASSERT_EQ(o->order_id, id);
    ASSERT_EQ(o->padding.len, len);
    for (size_t i = 0; i < len; i++)
        if (o->padding.data[i] != (uint8_t)(i * 7 + (size_t)id)) fail_msg("padding byte %zu differs", i);
}

/* record_9_9: rl__decoder_decode_in_place. A split record whose chunks lie end to end in memory
 * is parsed where it is (its padding points into the chunks), one whose chunks lie apart is
 * joined first, an unsplit record's padding points into its value; the copying decoder never
 * points into the key-values. Every record equals the one serialized. */
TEST(record_9_9_decode_in_place) {
    rl_metadata *md;
    rl_store *s;
    rl__record_decoder d;
    layout big = {0}, small = {0};
    uint8_t pk1[16], pk2[16];
    size_t pk1_len, pk2_len;
    rl_record r;
    setup(&md, &s);
    rl__decoder_init(&d);
    lay_order(&big, s, 1, 250001, 1, pk1, &pk1_len);
    lay_order(&small, s, 2, 1000, 0, pk2, &pk2_len);
    /* Apart (lay_order's values are separate allocations). */
    ASSERT_OK(rl__decoder_decode_in_place(&d, s, pk1, pk1_len, big.kv, big.n, &r, NULL));
    ASSERT_EQ(r.n_chunks, 3);
    check_padding(&r, 1, 250001);
    for (int i = 0; i < big.n; i++)
        ASSERT_FALSE(inside(((Reclayer__Order *)r.msg)->padding.data, big.kv[i].value, big.kv[i].value_len));
    /* End to end: the chunks' values copied into one buffer, the key-values pointing into it. */
    size_t total = 0;
    for (int i = 1; i < big.n; i++) total += big.kv[i].value_len;
    uint8_t *run = malloc(total);
    rl_keyvalue kv[MAX_KV];
    memcpy(kv, big.kv, (size_t)big.n * sizeof *kv);
    size_t off = 0;
    for (int i = 1; i < big.n; i++) {
        memcpy(run + off, big.kv[i].value, big.kv[i].value_len);
        kv[i].value = run + off;
        off += big.kv[i].value_len;
    }
    ASSERT_OK(rl__decoder_decode_in_place(&d, s, pk1, pk1_len, kv, big.n, &r, NULL));
    check_padding(&r, 1, 250001);
    ASSERT_TRUE(inside(((Reclayer__Order *)r.msg)->padding.data, run, total));
    ASSERT_OK(rl__decoder_decode(&d, s, pk1, pk1_len, kv, big.n, &r, NULL));
    check_padding(&r, 1, 250001);
    ASSERT_FALSE(inside(((Reclayer__Order *)r.msg)->padding.data, run, total));
    /* Unsplit. */
    ASSERT_OK(rl__decoder_decode_in_place(&d, s, pk2, pk2_len, small.kv, small.n, &r, NULL));
    check_padding(&r, 2, 1000);
    ASSERT_TRUE(inside(((Reclayer__Order *)r.msg)->padding.data, small.kv[0].value, small.kv[0].value_len));
    ASSERT_OK(rl__decoder_decode(&d, s, pk2, pk2_len, small.kv, small.n, &r, NULL));
    check_padding(&r, 2, 1000);
    ASSERT_FALSE(inside(((Reclayer__Order *)r.msg)->padding.data, small.kv[0].value, small.kv[0].value_len));
    free(run);
    lay_free(&big);
    lay_free(&small);
    rl__decoder_release(&d);
    rl_store_free(s);
    rl_metadata_free(md);
}

RL_TEST_MAIN(T(record_9_1_valid_layouts_match_strict), T(record_9_2_defects_match_strict),
             T(record_9_3_random_mutations_match_strict), T(record_9_4_steady_state_allocates_nothing),
             T(record_9_5_out_of_memory), T(record_9_6_suffix_bytes_match_strict),
             T(record_9_7_flat_unpack_matches_protobuf_c), T(record_9_8_varint_acceptance),
             T(record_9_9_decode_in_place))
