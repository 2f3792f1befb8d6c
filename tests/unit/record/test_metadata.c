/* test_metadata.c — record layer, part 1 (no database): metadata validation, generic field
 * reading into tuples checked against hand-encoded FoundationDB tuple bytes, the union encoding
 * checked against protoc-c's own RecordTypeUnion, and the split/unsplit logic over key-value
 * arrays (boundaries, forward and reverse, every defect).
 *
 * Test IDs: record_1_* metadata and fields, record_2_* split records.
 */
#include <stdlib.h>

#include "test.h"

#include "base/alloc.h"
#include "order.pb-c.h"
#include "record/record_int.h"
#include "app/tool.h"
#include "record_test.pb-c.h"

/* ---- Independent tuple encodings (the spec, by hand) ------------------------------------- */

/* Append an integer element (FoundationDB tuple spec, |v| < 2^63). */
static size_t enc_int(uint8_t *o, int64_t v) {
    uint64_t m = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    int n = 0;
    for (uint64_t t = m; t; t >>= 8) n++;
    if (v < 0) m = ~m;
    o[0] = (uint8_t)(v < 0 ? 0x14 - n : 0x14 + n);
    for (int i = 0; i < n; i++) o[1 + i] = (uint8_t)(m >> (8 * (n - 1 - i)));
    return (size_t)n + 1;
}

static size_t enc_str(uint8_t *o, uint8_t code, const char *s, size_t n) {
    size_t j = 0;
    o[j++] = code;
    for (size_t i = 0; i < n; i++) {
        o[j++] = (uint8_t)s[i];
        if (s[i] == 0) o[j++] = 0xff;
    }
    o[j++] = 0;
    return j;
}

static rl_metadata *alltypes_md(void) {
    rl_metadata *md;
    static const char *const pk[] = {"id"};
    ASSERT_OK(rl_metadata_new(&md));
    ASSERT_OK(rl_metadata_add_type(md, &reclayer__test__all_types__descriptor, pk, 1));
    return md;
}

TEST(record_1_1_order_metadata) {
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    ASSERT_EQ(rl_metadata_version(md), 1);
    ASSERT_EQ(md->n_types, 1);
    ASSERT_EQ(md->n_indexes, 1);
    ASSERT_STR_EQ(md->indexes[0].name, "price_idx");
    ASSERT_STR_EQ(md->indexes[0].subspace_key, "price_idx");
    /* Built metadata refuses changes. */
    static const char *const f[] = {"price"};
    ASSERT_RC(rl_metadata_add_value_index(md, "Order", "x", f, 1, NULL), RL_E_RECORD_METADATA_INVALID);
    rl_metadata_free(md);
}

TEST(record_1_2_invalid_metadata) {
    rl_metadata *md = alltypes_md();
    static const char *const bad[] = {"nope"};
    static const char *const rep[] = {"f_repeated"};
    static const char *const nest[] = {"f_inner"};
    static const char *const ok[] = {"f_int32"};
    static const char *const cpk[] = {"region", "seq"};
    /* No primary key. */
    ASSERT_RC(rl_metadata_add_type(md, &reclayer__test__composite__descriptor, NULL, 0), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "no primary key") != NULL);
    /* Unknown field in a primary key. */
    ASSERT_RC(rl_metadata_add_type(md, &reclayer__test__composite__descriptor, bad, 1), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "'nope'") != NULL);
    /* Type added twice. */
    static const char *const pk[] = {"id"};
    ASSERT_RC(rl_metadata_add_type(md, &reclayer__test__all_types__descriptor, pk, 1), RL_E_RECORD_METADATA_INVALID);
    /* Index: unknown field, repeated, nested message, unknown type, duplicate name. */
    ASSERT_RC(rl_metadata_add_value_index(md, "AllTypes", "i1", bad, 1, NULL), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "'nope'") != NULL);
    ASSERT_RC(rl_metadata_add_value_index(md, "AllTypes", "i1", rep, 1, NULL), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "repeated") != NULL);
    ASSERT_RC(rl_metadata_add_value_index(md, "AllTypes", "i1", nest, 1, NULL), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "nested message") != NULL);
    ASSERT_RC(rl_metadata_add_value_index(md, "Nope", "i1", ok, 1, NULL), RL_E_RECORD_METADATA_INVALID);
    ASSERT_OK(rl_metadata_add_value_index(md, "reclayer.test.AllTypes", "i1", ok, 1, NULL));
    ASSERT_RC(rl_metadata_add_value_index(md, "AllTypes", "i1", ok, 1, "other"), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "duplicate index name 'i1'") != NULL);
    ASSERT_RC(rl_metadata_add_value_index(md, "AllTypes", "i2", ok, 1, "i1"), RL_E_RECORD_METADATA_INVALID);
    ASSERT_RC(rl_metadata_add_value_index(md, "AllTypes", "i2", ok, 0, NULL), RL_E_RECORD_METADATA_INVALID);
    /* Repeated field in a primary key. */
    ASSERT_RC(rl_metadata_add_type(md, &reclayer__test__composite__descriptor, rep, 1), RL_E_RECORD_METADATA_INVALID);
    /* Failed calls changed nothing. */
    ASSERT_EQ(md->n_types, 1);
    ASSERT_EQ(md->n_indexes, 1);
    ASSERT_OK(rl_metadata_add_type(md, &reclayer__test__composite__descriptor, cpk, 2));
    ASSERT_OK(rl_metadata_build(md));
    rl_metadata_free(md);
    /* No record types at all. */
    ASSERT_OK(rl_metadata_new(&md));
    ASSERT_RC(rl_metadata_build(md), RL_E_RECORD_METADATA_INVALID);
    ASSERT_TRUE(strstr(rl_metadata_errmsg(md), "no record types") != NULL);
    rl_metadata_free(md);
}

/* Pack the one-field index entry of field name for msg, through the library. */
static void entry_of(rl_metadata *md, const char *field, const ProtobufCMessage *msg, rl_buf *out) {
    const char *f[] = {field};
    ASSERT_OK(rl_metadata_add_value_index(md, "AllTypes", field, f, 1, NULL));
    rl__tuple_packer pk;
    rl__buf_reset(out);
    rl__tuple_packer_init(&pk, out);
    ASSERT_OK(rl__md_pack_index_entry(md, rl__md_index_named(md, field), msg, &pk, NULL));
    ASSERT_OK(rl__buf_error(out));
}

TEST(record_1_3_field_tuples) {
    rl_metadata *md = alltypes_md();
    Reclayer__Test__AllTypes m = RECLAYER__TEST__ALL_TYPES__INIT;
    m.has_id = 1, m.id = 1;
    m.has_f_int32 = 1, m.f_int32 = -5;
    m.has_f_int64 = 1, m.f_int64 = 300;
    m.has_f_uint32 = 1, m.f_uint32 = 4000000000u;
    m.has_f_uint64 = 1, m.f_uint64 = UINT64_MAX;
    m.has_f_sint32 = 1, m.f_sint32 = -1;
    m.has_f_sint64 = 1, m.f_sint64 = -256;
    m.has_f_fixed32 = 1, m.f_fixed32 = 255;
    m.has_f_fixed64 = 1, m.f_fixed64 = 65536;
    m.has_f_sfixed32 = 1, m.f_sfixed32 = -2147483647 - 1;
    m.has_f_sfixed64 = 1, m.f_sfixed64 = 0;
    m.has_f_bool = 1, m.f_bool = 1;
    m.has_f_double = 1, m.f_double = 1.5;
    m.has_f_float = 1, m.f_float = -1.5f;
    m.f_string = "a\0b"; /* strlen stops at the NUL: "a" */
    static uint8_t raw[] = {0x00, 0x01};
    m.has_f_bytes = 1, m.f_bytes.data = raw, m.f_bytes.len = 2;
    m.has_f_enum = 1, m.f_enum = RECLAYER__TEST__COLOR__BLUE;
    struct {
        const char *field;
        uint8_t want[16];
        size_t n;
    } cases[] = {
        {"f_int32", {0x13, 0xfa}, 2},
        {"f_int64", {0x16, 0x01, 0x2c}, 3},
        {"f_uint32", {0x18, 0xee, 0x6b, 0x28, 0x00}, 5},
        {"f_uint64", {0x1c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 9},
        {"f_sint32", {0x13, 0xfe}, 2},
        {"f_sint64", {0x12, 0xfe, 0xff}, 3},
        {"f_fixed32", {0x15, 0xff}, 2},
        {"f_fixed64", {0x17, 0x01, 0x00, 0x00}, 4},
        {"f_sfixed32", {0x10, 0x7f, 0xff, 0xff, 0xff}, 5},
        {"f_sfixed64", {0x14}, 1},
        {"f_bool", {0x27}, 1},
        {"f_double", {0x21, 0xbf, 0xf8, 0, 0, 0, 0, 0, 0}, 9},
        {"f_float", {0x20, 0x40, 0x3f, 0xff, 0xff}, 5},
        {"f_string", {0x02, 'a', 0x00}, 3},
        {"f_bytes", {0x01, 0x00, 0xff, 0x01, 0x00}, 5},
        {"f_enum", {0x15, 0x07}, 2},
    };
    rl_buf got;
    rl__buf_init(&got);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t want[32];
        memcpy(want, cases[i].want, cases[i].n);
        size_t n = cases[i].n + enc_int(want + cases[i].n, 1); /* the pk is appended */
        entry_of(md, cases[i].field, &m.base, &got);
        ASSERT_MEM_EQ(got.data, got.len, want, n);
    }
    rl__buf_release(&got);
    rl_metadata_free(md);
}

TEST(record_1_4_absent_fields) {
    rl_metadata *md = alltypes_md();
    Reclayer__Test__AllTypes m = RECLAYER__TEST__ALL_TYPES__INIT;
    m.has_id = 1, m.id = 9;
    rl_buf got;
    rl__buf_init(&got);
    /* Absent indexed values are null; the pk still ends the entry. */
    entry_of(md, "f_int32", &m.base, &got);
    ASSERT_MEM_EQ(got.data, got.len, "\x00\x15\x09", 3);
    entry_of(md, "f_string", &m.base, &got);
    ASSERT_MEM_EQ(got.data, got.len, "\x00\x15\x09", 3);
    /* A missing primary-key field is an error. */
    m.has_id = 0;
    rl__tuple_packer pk;
    rl__buf_reset(&got);
    rl__tuple_packer_init(&pk, &got);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    ASSERT_RC(rl__md_pack_pk(md, 0, &m.base, &pk, &why), RL_E_RECORD_PK_MISSING);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "'id'") != NULL);
    rl__buf_reset(&got);
    rl__tuple_packer_init(&pk, &got);
    ASSERT_RC(rl__md_pack_index_entry(md, 0, &m.base, &pk, NULL), RL_E_RECORD_PK_MISSING);
    rl__buf_release(&got);
    rl_metadata_free(md);
}

TEST(record_1_5_union_encoding) {
    rl_metadata *md;
    ASSERT_OK(rl__order_metadata(&md));
    Reclayer__Order o = RECLAYER__ORDER__INIT;
    o.has_order_id = 1, o.order_id = 42;
    o.has_price = 1, o.price = 1999;
    o.customer = "zoe";
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__record_serialize(md, 0, &o.base, &b));
    /* protoc-c's own union message reads the same bytes. */
    Reclayer__RecordTypeUnion *u = reclayer__record_type_union__unpack(NULL, b.len, b.data);
    ASSERT_NOT_NULL(u);
    ASSERT_NOT_NULL(u->_order);
    ASSERT_EQ(u->_order->order_id, 42);
    ASSERT_EQ(u->_order->price, 1999);
    ASSERT_STR_EQ(u->_order->customer, "zoe");
    /* And the union it writes is what we write. */
    uint8_t again[256];
    size_t n = reclayer__record_type_union__pack(u, again);
    ASSERT_MEM_EQ(again, n, b.data, b.len);
    reclayer__record_type_union__free_unpacked(u, NULL);
    /* Parse back. */
    int t;
    ProtobufCMessage *m;
    ASSERT_OK(rl__record_parse(md, b.data, b.len, &t, &m, NULL));
    ASSERT_EQ(t, 0);
    ASSERT_EQ(((Reclayer__Order *)m)->price, 1999);
    protobuf_c_message_free_unpacked(m, &rl__record_allocator);
    /* Bad framing, unknown union field, truncated message. */
    ASSERT_RC(rl__record_parse(md, b.data, 0, &t, &m, NULL), RL_E_RECORD_PARSE_FAILED);
    ASSERT_RC(rl__record_parse(md, b.data, b.len - 1, &t, &m, NULL), RL_E_RECORD_PARSE_FAILED);
    uint8_t other[] = {(2 << 3) | 2, 0};
    ASSERT_RC(rl__record_parse(md, other, 2, &t, &m, NULL), RL_E_RECORD_TYPE_UNKNOWN);
    uint8_t junk[] = {(1 << 3) | 2, 2, 0x08, 0x80}; /* varint cut short inside the message */
    ASSERT_RC(rl__record_parse(md, junk, 4, &t, &m, NULL), RL_E_RECORD_PARSE_FAILED);
    uint8_t wire0[] = {(1 << 3) | 0, 1};
    ASSERT_RC(rl__record_parse(md, wire0, 2, &t, &m, NULL), RL_E_RECORD_PARSE_FAILED);
    rl__buf_release(&b);
    rl_metadata_free(md);
}

TEST(record_1_6_pk_positions) {
    rl_metadata *md;
    static const char *const pk[] = {"region", "seq"};
    static const char *const f[] = {"region", "score"};
    ASSERT_OK(rl_metadata_new(&md));
    ASSERT_OK(rl_metadata_add_type(md, &reclayer__test__composite__descriptor, pk, 2));
    ASSERT_OK(rl_metadata_add_value_index(md, "Composite", "by_score", f, 2, "S"));
    ASSERT_OK(rl_metadata_build(md));
    ASSERT_EQ(md->indexes[0].pk_pos[0], 0);
    ASSERT_EQ(md->indexes[0].pk_pos[1], -1);
    Reclayer__Test__Composite c = RECLAYER__TEST__COMPOSITE__INIT;
    c.region = "eu";
    c.has_seq = 1, c.seq = 5;
    c.has_score = 1, c.score = -3;
    rl_buf got;
    rl__tuple_packer tp;
    rl__buf_init(&got);
    rl__tuple_packer_init(&tp, &got);
    ASSERT_OK(rl__md_pack_index_entry(md, 0, &c.base, &tp, NULL));
    uint8_t want[32];
    size_t n = enc_str(want, 0x02, "eu", 2);
    n += enc_int(want + n, -3);
    n += enc_int(want + n, 5);
    ASSERT_MEM_EQ(got.data, got.len, want, n);
    /* Primary key (region, seq). */
    rl__buf_reset(&got);
    rl__tuple_packer_init(&tp, &got);
    ASSERT_OK(rl__md_pack_pk(md, 0, &c.base, &tp, NULL));
    n = enc_str(want, 0x02, "eu", 2);
    n += enc_int(want + n, 5);
    ASSERT_MEM_EQ(got.data, got.len, want, n);
    rl__buf_release(&got);
    rl_metadata_free(md);
}

/* ---- Split records ------------------------------------------------------------------------ */

TEST(record_2_1_chunk_counts) {
    ASSERT_EQ(rl__split_chunks(0), 0);
    ASSERT_EQ(rl__split_chunks(99999), 0);
    ASSERT_EQ(rl__split_chunks(100000), 0);
    ASSERT_EQ(rl__split_chunks(100001), 2);
    ASSERT_EQ(rl__split_chunks(200000), 2);
    ASSERT_EQ(rl__split_chunks(300000), 3);
    ASSERT_EQ(rl__split_chunks(300001), 4);
}

/* A key-value list made by hand under the records prefix R = ("s", 1). */
typedef struct {
    uint8_t keys[16][64];
    size_t klen[16];
    const uint8_t *val[16];
    size_t vlen[16];
    int n;
} kvlist;

static const uint8_t R[] = {0x02, 's', 0x00, 0x15, 0x01};

/* Add key R + (pk, suffix) with a value; suffix_str non-NULL makes a string suffix. */
static void kv_add(kvlist *l, int64_t pk, int64_t suffix, const char *suffix_str, const void *v, size_t vn) {
    uint8_t *k = l->keys[l->n];
    size_t n = sizeof R;
    memcpy(k, R, n);
    n += enc_int(k + n, pk);
    if (suffix_str) n += enc_str(k + n, 0x02, suffix_str, strlen(suffix_str));
    else n += enc_int(k + n, suffix);
    l->klen[l->n] = n;
    l->val[l->n] = v;
    l->vlen[l->n] = vn;
    l->n++;
}

typedef struct {
    int kinds[32];
    char data[32][64];
    int64_t suffix_key[32];
    int has_version[32];
    int n_chunks[32];
    int n;
} events;

static int collect(void *ud, const rl__unsplit_event *ev) {
    events *e = ud;
    assert_true(e->n < 32);
    e->kinds[e->n] = ev->kind;
    size_t n = ev->data_len < 63 ? ev->data_len : 63;
    if (ev->kind == RL__EV_RECORD) memcpy(e->data[e->n], ev->data, n);
    e->data[e->n][ev->kind == RL__EV_RECORD ? n : 0] = 0;
    e->has_version[e->n] = ev->has_version;
    e->n_chunks[e->n] = ev->n_chunks;
    e->n++;
    return RL_OK;
}

/* Feed l forward or reverse, one call per kv (as if every kv were its own page). */
static void run(const kvlist *l, int reverse, events *e) {
    rl__unsplitter u;
    memset(e, 0, sizeof *e);
    rl__unsplitter_init(&u, R, sizeof R, reverse);
    for (int i = 0; i < l->n; i++) {
        int j = reverse ? l->n - 1 - i : i;
        ASSERT_OK(rl__unsplitter_feed(&u, l->keys[j], l->klen[j], l->val[j], l->vlen[j], collect, e));
    }
    ASSERT_OK(rl__unsplitter_finish(&u, collect, e));
    rl__unsplitter_release(&u);
}

static const uint8_t VS[13] = {0x33, 0, 0, 0, 0, 0, 0, 0, 5, 0, 1, 0, 2};

TEST(record_2_2_unsplit_good) {
    kvlist l = {0};
    kv_add(&l, 1, -1, NULL, VS, 13);
    kv_add(&l, 1, 0, NULL, "one", 3);
    kv_add(&l, 2, 1, NULL, "tw", 2);
    kv_add(&l, 2, 2, NULL, "o!", 2);
    kv_add(&l, 2, 3, NULL, "!", 1);
    kv_add(&l, 3, 0, NULL, "three", 5);
    for (int rev = 0; rev < 2; rev++) {
        events e;
        run(&l, rev, &e);
        ASSERT_EQ(e.n, 3);
        int a = rev ? 2 : 0, c = rev ? 0 : 2;
        ASSERT_EQ(e.kinds[a], RL__EV_RECORD);
        ASSERT_STR_EQ(e.data[a], "one");
        ASSERT_EQ(e.has_version[a], 1);
        ASSERT_EQ(e.n_chunks[a], 0);
        ASSERT_STR_EQ(e.data[1], "two!!");
        ASSERT_EQ(e.n_chunks[1], 3);
        ASSERT_EQ(e.has_version[1], 0);
        ASSERT_STR_EQ(e.data[c], "three");
    }
}

/* Each defect, forward and reverse: the kinds reported, in order. */
static void expect_kinds(const kvlist *l, const int *want, int n) {
    for (int rev = 0; rev < 2; rev++) {
        events e;
        run(l, rev, &e);
        if (e.n != n) fail_msg("reverse=%d: %d events, expected %d", rev, e.n, n);
        for (int i = 0; i < n; i++)
            if (e.kinds[i] != want[i])
                fail_msg("reverse=%d event %d: %s, expected %s", rev, i, rl__unsplit_kind_name(e.kinds[i]),
                         rl__unsplit_kind_name(want[i]));
    }
}

TEST(record_2_3_unsplit_defects) {
    { /* First chunk missing. */
        kvlist l = {0};
        kv_add(&l, 1, 2, NULL, "b", 1);
        kv_add(&l, 1, 3, NULL, "c", 1);
        int want[] = {RL__EV_DELETE_CHUNK};
        expect_kinds(&l, want, 1);
        ASSERT_STR_EQ(rl__unsplit_kind_message(RL__EV_DELETE_CHUNK), "Found split record without start");
    }
    { /* A gap. */
        kvlist l = {0};
        kv_add(&l, 1, 1, NULL, "a", 1);
        kv_add(&l, 1, 3, NULL, "c", 1);
        kv_add(&l, 2, 0, NULL, "ok", 2);
        int want[] = {RL__EV_SPLIT_ORDER, RL__EV_RECORD};
        /* Reverse order of groups: pk 2 first. */
        events e;
        run(&l, 0, &e);
        ASSERT_EQ(e.n, 2);
        ASSERT_EQ(e.kinds[0], want[0]);
        ASSERT_EQ(e.kinds[1], want[1]);
        run(&l, 1, &e);
        ASSERT_EQ(e.n, 2);
        ASSERT_EQ(e.kinds[0], RL__EV_RECORD);
        ASSERT_EQ(e.kinds[1], RL__EV_SPLIT_ORDER);
        ASSERT_STR_EQ(rl__unsplit_kind_message(RL__EV_SPLIT_ORDER), "Split record segments out of order");
    }
    { /* Unsplit value beside chunks. */
        kvlist l = {0};
        kv_add(&l, 1, 0, NULL, "x", 1);
        kv_add(&l, 1, 1, NULL, "a", 1);
        int want[] = {RL__EV_MULTIPLE_UNSPLIT};
        expect_kinds(&l, want, 1);
        ASSERT_STR_EQ(rl__unsplit_kind_message(RL__EV_MULTIPLE_UNSPLIT), "More than one unsplit value.");
    }
    { /* Version key alone. */
        kvlist l = {0};
        kv_add(&l, 1, -1, NULL, VS, 13);
        int want[] = {RL__EV_VERSION_KEY};
        expect_kinds(&l, want, 1);
    }
    { /* Stray suffixes (a string, and an integer below -1) do not hide the record. */
        kvlist l = {0};
        kv_add(&l, 1, -2, NULL, "?", 1);
        kv_add(&l, 1, 0, NULL, "rec", 3);
        kv_add(&l, 1, 0, "stray", "?", 1);
        int want[] = {RL__EV_STRAY_SUFFIX, RL__EV_STRAY_SUFFIX, RL__EV_RECORD};
        expect_kinds(&l, want, 3);
    }
    { /* A bad version value, then the record. */
        kvlist l = {0};
        kv_add(&l, 1, -1, NULL, "bad", 3);
        kv_add(&l, 1, 0, NULL, "rec", 3);
        int want[] = {RL__EV_BAD_VERSION, RL__EV_RECORD};
        expect_kinds(&l, want, 2);
    }
    { /* Keys that are not (pk, suffix): only one element, not a tuple, another prefix. */
        rl__unsplitter u;
        events e = {0};
        rl__unsplitter_init(&u, R, sizeof R, 0);
        uint8_t k1[] = {0x02, 's', 0x00, 0x15, 0x01, 0x15, 0x01};
        uint8_t k2[] = {0x02, 's', 0x00, 0x15, 0x01, 0x15};
        uint8_t k3[] = {0x02, 't', 0x00};
        ASSERT_OK(rl__unsplitter_feed(&u, k1, sizeof k1, (const uint8_t *)"", 0, collect, &e));
        ASSERT_OK(rl__unsplitter_feed(&u, k2, sizeof k2, (const uint8_t *)"", 0, collect, &e));
        ASSERT_OK(rl__unsplitter_feed(&u, k3, sizeof k3, (const uint8_t *)"", 0, collect, &e));
        ASSERT_OK(rl__unsplitter_finish(&u, collect, &e));
        rl__unsplitter_release(&u);
        ASSERT_EQ(e.n, 3);
        for (int i = 0; i < 3; i++) ASSERT_EQ(e.kinds[i], RL__EV_BAD_KEY);
    }
}

/* A randomized model check: random records split at random chunk sizes, fed in random page
 * sizes forward and reverse, come back byte for byte. */
TEST(record_2_4_unsplit_random) {
    uint64_t seed = rl_test_seed(), st = seed;
    for (int round = 0; round < 200; round++) {
        kvlist l = {0};
        char bodies[5][16];
        int nrec = 1 + (int)rl_test_rand_below(&st, 4), nk = 0, added = 0;
        for (int r = 0; r < nrec; r++) {
            int len = 1 + (int)rl_test_rand_below(&st, 12);
            for (int i = 0; i < len; i++) bodies[r][i] = (char)('a' + rl_test_rand_below(&st, 26));
            bodies[r][len] = 0;
            int chunks = (int)rl_test_rand_below(&st, 3); /* 0 = whole */
            if (chunks > len) chunks = len;
            if (nk + chunks + 2 > 16) break;
            if (rl_test_rand_below(&st, 2)) kv_add(&l, r, -1, NULL, VS, 13), nk++;
            if (!chunks) {
                kv_add(&l, r, 0, NULL, bodies[r], (size_t)len), nk++;
            } else {
                int per = (len + chunks - 1) / chunks, off = 0, c = 1;
                while (off < len) {
                    int n = len - off < per ? len - off : per;
                    kv_add(&l, r, c++, NULL, bodies[r] + off, (size_t)n), nk++;
                    off += n;
                }
            }
            added++;
        }
        (void)seed;
        for (int rev = 0; rev < 2; rev++) {
            events e;
            run(&l, rev, &e);
            int recs = added;
            ASSERT_EQ(e.n, recs);
            for (int i = 0; i < e.n; i++) {
                int r = rev ? recs - 1 - i : i;
                ASSERT_EQ(e.kinds[i], RL__EV_RECORD);
                ASSERT_STR_EQ(e.data[i], bodies[r]);
            }
        }
    }
}

RL_TEST_MAIN(T(record_1_1_order_metadata), T(record_1_2_invalid_metadata), T(record_1_3_field_tuples),
             T(record_1_4_absent_fields), T(record_1_5_union_encoding), T(record_1_6_pk_positions),
             T(record_2_1_chunk_counts), T(record_2_2_unsplit_good), T(record_2_3_unsplit_defects),
             T(record_2_4_unsplit_random))
