/* test_mapped.c — the mapper (parse, construct) and the mapped range read of a storage engine.
 *
 * mapped-1.x: the mapper against hand-written byte vectors of the tuple encoding (so the expected
 *             secondary keys do not come from the code under test).
 * mapped-2.x: mapped reads over a real in-memory storage engine holding a record-layer-like
 *             layout, compared with an expectation the test builds from the data it wrote.
 */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/arena.h"
#include "reclayer/alloc.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "storage/mapped.h"
#include "storage/storage.h"
#include "tuple/tuple.h"

/* ==== Helpers ================================================================================ */

/* A growable list of tuple elements packed into a buf (thin wrapper for readability). */
typedef struct {
    rl_buf b;
    rl__tuple_packer pk;
} tup;

static void tup_init(tup *t) {
    rl__buf_init(&t->b);
    rl__tuple_packer_init(&t->pk, &t->b);
}
static void tup_free(tup *t) { rl__buf_release(&t->b); }
static void tup_s(tup *t, const char *s) { rl__tuple_pack_string(&t->pk, s, strlen(s)); }
static void tup_b(tup *t, const char *s) { rl__tuple_pack_bytes(&t->pk, s, strlen(s)); }

/* Parse mapper bytes m[0..n), construct P for (key, value); returns the construct/parse rc and
 * leaves P in out. */
static int map_one(const void *m, size_t n, const void *k, size_t kl, const void *v, size_t vl, rl_buf *out) {
    rl_arena a;
    rl__mapper *mp = NULL;
    int rc;
    rl__arena_init(&a, 0);
    rc = rl__mapper_parse(m, n, &a, &mp);
    if (rc == RL_OK) rc = rl__mapper_construct(mp, k, kl, v, vl, out);
    rl__arena_release(&a);
    return rc;
}

static int parse_rc(const void *m, size_t n) {
    rl_arena a;
    rl__mapper *mp = NULL;
    int rc;
    rl__arena_init(&a, 0);
    rc = rl__mapper_parse(m, n, &a, &mp);
    if (rc == RL_OK) ASSERT_NOT_NULL(mp);
    rl__arena_release(&a);
    return rc;
}

#define LIT(s) (const uint8_t *)(s), (sizeof(s) - 1)

/* ==== mapped-1: the mapper =================================================================== */

/* mapped-1.1: a mapper that is not a tuple is mapper_not_tuple (2043). */
TEST(mapped_1_1_not_tuple) {
    ASSERT_RC(parse_rc(LIT("\x02"
                           "abc")),
              RL_E_MAPPER_NOT_TUPLE);                        /* no terminator */
    ASSERT_RC(parse_rc(LIT("\xff")), RL_E_MAPPER_NOT_TUPLE); /* unknown type code */
    ASSERT_RC(parse_rc(LIT("\x15")), RL_E_MAPPER_NOT_TUPLE); /* truncated int */
    ASSERT_RC(parse_rc(LIT("\x05\x01"
                           "a")),
              RL_E_MAPPER_NOT_TUPLE); /* open nested tuple */
    ASSERT_EQ(RL_E_MAPPER_NOT_TUPLE, 2043);
    /* The empty tuple is a valid mapper: P is empty, a point read. */
    rl_arena a;
    rl__mapper *m = NULL;
    rl_buf out;
    rl__arena_init(&a, 0);
    rl__buf_init(&out);
    ASSERT_OK(rl__mapper_parse("", 0, &a, &m));
    ASSERT_FALSE(rl__mapper_is_range(m));
    ASSERT_OK(rl__mapper_construct(m, "\xff", 1, "\xff", 1, &out));
    ASSERT_EQ(out.len, 0);
    rl__buf_release(&out);
    rl__arena_release(&a);
}

/* mapped-1.2: malformed placeholder indexes are mapper_bad_index (2030) at parse time — strict,
 * unlike FoundationDB's stoi. Strings of either type. */
TEST(mapped_1_2_bad_index_parse) {
    static const char *bad[] = {"{K[1x]}", "{K[]}",    "{K[-1]}",          "{V[a]}",          "{K[ 1]}", "{V[+1]}",
                                "{K[1 ]}", "{K[0x1]}", "{K[99999999999]}", "{V[2147483648]}", "{K[1.0]}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tup t;
        tup_init(&t);
        tup_s(&t, "rec");
        tup_s(&t, bad[i]);
        ASSERT_RC(parse_rc(t.b.data, t.b.len), RL_E_MAPPER_BAD_INDEX);
        rl__buf_reset(&t.b);
        tup_b(&t, bad[i]);
        ASSERT_RC(parse_rc(t.b.data, t.b.len), RL_E_MAPPER_BAD_INDEX);
        tup_free(&t);
    }
    ASSERT_EQ(RL_E_MAPPER_BAD_INDEX, 2030);
}

/* mapped-1.3: an index past the end of the key / value is mapper_bad_index at construct time. */
TEST(mapped_1_3_bad_index_out_of_range) {
    rl_buf out;
    rl__buf_init(&out);
    /* key ("a", 1, 2): three elements. */
    static const uint8_t key[] = {0x02, 'a', 0x00, 0x15, 0x01, 0x15, 0x02};
    static const uint8_t val[] = {0x15, 0x07};
    ASSERT_RC(map_one(LIT("\x02{K[3]}\x00"), key, sizeof key, val, sizeof val, &out), RL_E_MAPPER_BAD_INDEX);
    ASSERT_EQ(out.len, 0); /* nothing left behind on error */
    ASSERT_RC(map_one(LIT("\x02{V[1]}\x00"), key, sizeof key, val, sizeof val, &out), RL_E_MAPPER_BAD_INDEX);
    ASSERT_RC(map_one(LIT("\x02{V[0]}\x00"), key, sizeof key, "", 0, &out), RL_E_MAPPER_BAD_INDEX);
    /* The last valid index works; output keeps what was there before. */
    rl__buf_append(&out, "pre", 3);
    ASSERT_OK(map_one(LIT("\x02{K[2]}\x00"), key, sizeof key, val, sizeof val, &out));
    ASSERT_MEM_EQ(out.data, out.len, "pre\x15\x02", 5);
    ASSERT_RC(map_one(LIT("\x01x\x00\x02{K[9]}\x00"), key, sizeof key, val, sizeof val, &out), RL_E_MAPPER_BAD_INDEX);
    ASSERT_MEM_EQ(out.data, out.len, "pre\x15\x02", 5);
    rl__buf_release(&out);
}

/* mapped-1.4: "{...}" must be the last element (2032); as last it makes a range mapper. */
TEST(mapped_1_4_range_descriptor) {
    rl_arena a;
    rl__mapper *m = NULL;
    rl_buf out;
    rl__arena_init(&a, 0);
    rl__buf_init(&out);
    ASSERT_RC(parse_rc(LIT("\x02{...}\x00\x02x\x00")), RL_E_MAPPER_BAD_RANGE_DESCRIPTOR);
    ASSERT_RC(parse_rc(LIT("\x01{...}\x00\x15\x01")), RL_E_MAPPER_BAD_RANGE_DESCRIPTOR);
    ASSERT_RC(parse_rc(LIT("\x02{...}\x00\x02{...}\x00")), RL_E_MAPPER_BAD_RANGE_DESCRIPTOR);
    ASSERT_EQ(RL_E_MAPPER_BAD_RANGE_DESCRIPTOR, 2032);

    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00\x02{...}\x00"), &a, &m));
    ASSERT_TRUE(rl__mapper_is_range(m));
    ASSERT_OK(rl__mapper_construct(m, "", 0, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x02r\x00", 3); /* "{...}" is not part of P */
    /* Byte-string marker too; a lone marker gives an empty P. */
    ASSERT_OK(rl__mapper_parse(LIT("\x01{...}\x00"), &a, &m));
    ASSERT_TRUE(rl__mapper_is_range(m));
    rl__buf_reset(&out);
    ASSERT_OK(rl__mapper_construct(m, "\xff", 1, "\xff", 1, &out));
    ASSERT_EQ(out.len, 0);
    /* Near misses are plain literals. */
    ASSERT_OK(rl__mapper_parse(LIT("\x02{....}\x00"), &a, &m));
    ASSERT_FALSE(rl__mapper_is_range(m));
    rl__buf_release(&out);
    rl__arena_release(&a);
}

/* mapped-1.5: a referenced key / value that is not a tuple: key_not_tuple (2041) /
 * value_not_tuple (2042); an unreferenced one does not matter. */
TEST(mapped_1_5_key_value_not_tuple) {
    rl_buf out;
    rl__buf_init(&out);
    static const uint8_t good[] = {0x02, 'a', 0x00};
    ASSERT_RC(map_one(LIT("\x02{K[0]}\x00"), "\xff", 1, good, 3, &out), RL_E_KEY_NOT_TUPLE);
    ASSERT_RC(map_one(LIT("\x02{K[0]}\x00"),
                      "\x02"
                      "ab",
                      3, good, 3, &out),
              RL_E_KEY_NOT_TUPLE);
    ASSERT_RC(map_one(LIT("\x02{V[0]}\x00"), good, 3, "\xff", 1, &out), RL_E_VALUE_NOT_TUPLE);
    /* The first invalid tuple anywhere in the key fails even if the referenced element is
     * before it (FoundationDB unpacks the whole key). */
    ASSERT_RC(map_one(LIT("\x02{K[0]}\x00"),
                      "\x02"
                      "a\x00\xff",
                      4, good, 3, &out),
              RL_E_KEY_NOT_TUPLE);
    ASSERT_EQ(out.len, 0);
    /* Only the value is referenced: a bad key is fine. */
    ASSERT_OK(map_one(LIT("\x02{V[0]}\x00"), "\xff", 1, good, 3, &out));
    ASSERT_MEM_EQ(out.data, out.len, good, 3);
    rl__buf_reset(&out);
    ASSERT_OK(map_one(LIT("\x02{K[0]}\x00"), good, 3, "\xff", 1, &out));
    ASSERT_MEM_EQ(out.data, out.len, good, 3);
    ASSERT_EQ(RL_E_KEY_NOT_TUPLE, 2041);
    ASSERT_EQ(RL_E_VALUE_NOT_TUPLE, 2042);
    rl__buf_release(&out);
}

/* mapped-1.6: escapes. "{{escaped}}" -> literal bytes "{escaped}"; "{{{{}}" -> "{{}"; a unicode
 * element with escapes comes back as a byte string; an escaped placeholder is a literal. */
TEST(mapped_1_6_escapes) {
    rl_buf out;
    rl__buf_init(&out);
    ASSERT_OK(map_one(LIT("\x02{{escaped}}\x00"), "\xff", 1, "\xff", 1, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x01{escaped}\x00", 11);
    rl__buf_reset(&out);
    ASSERT_OK(map_one(LIT("\x01{{{{}}\x00"), "", 0, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x01{{}\x00", 5);
    rl__buf_reset(&out);
    ASSERT_OK(map_one(LIT("\x02{{K[1]}}\x00"), "\xff", 1, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x01{K[1]}\x00", 8);
    rl__buf_reset(&out);
    /* Only "}}": still escaped; "}}}" -> "}}" (non-overlapping, left to right). */
    ASSERT_OK(map_one(LIT("\x02"
                          "a}}}\x00"),
                      "", 0, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len,
                  "\x01"
                  "a}}\x00",
                  5);
    rl__buf_reset(&out);
    /* "{{...}}" is a literal "{...}", not the range marker, and need not be last. */
    rl_arena a;
    rl__mapper *m = NULL;
    rl__arena_init(&a, 0);
    ASSERT_OK(rl__mapper_parse(LIT("\x02{{...}}\x00\x15\x01"), &a, &m));
    ASSERT_FALSE(rl__mapper_is_range(m));
    ASSERT_OK(rl__mapper_construct(m, "", 0, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x01{...}\x00\x15\x01", 9);
    rl__arena_release(&a);
    rl__buf_reset(&out);
    /* Embedded NUL in an escaped element survives re-encoding (0x00 -> 0x00 0xff). */
    ASSERT_OK(map_one(LIT("\x01{{\x00\xff}}\x00"), "", 0, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x01{\x00\xff}\x00", 6);
    rl__buf_release(&out);
}

/* mapped-1.7: a literal-only mapper works whatever the key and value hold ("\xff"). */
TEST(mapped_1_7_literal_only_ignores_key_value) {
    rl_buf out;
    rl__buf_init(&out);
    ASSERT_OK(map_one(LIT("\x02"
                          "a\x00\x15\x01\x01"
                          "b\x00"),
                      "\xff", 1, "\xff", 1, &out));
    ASSERT_MEM_EQ(out.data, out.len,
                  "\x02"
                  "a\x00\x15\x01\x01"
                  "b\x00",
                  8);
    rl__buf_release(&out);
}

/* mapped-1.8: "abc{K[1]}" and other near-placeholders are literals copied raw (type kept). */
TEST(mapped_1_8_embedded_placeholder_is_literal) {
    static const char *lits[] = {"abc{K[1]}", "{K[1]}x", "{X[1]}", "{K(1)}", "{K[1]", "K[1]}", "{k[1]}"};
    for (size_t i = 0; i < sizeof lits / sizeof lits[0]; i++) {
        rl_buf want, out;
        rl__buf_init(&want);
        rl__buf_init(&out);
        rl__buf_append_byte(&want, 0x02);
        rl__buf_append_str(&want, lits[i]);
        rl__buf_append_byte(&want, 0x00);
        ASSERT_OK(map_one(want.data, want.len, "\xff", 1, "\xff", 1, &out));
        ASSERT_MEM_EQ(out.data, out.len, want.data, want.len);
        rl__buf_release(&want);
        rl__buf_release(&out);
    }
}

/* mapped-1.9: non-string elements are copied verbatim, including nested tuples whose strings
 * look like placeholders (nested tuples are not inspected). */
TEST(mapped_1_9_non_strings_verbatim) {
    static const uint8_t m[] = {
        0x15, 0x2a,                                                                            /* 42 */
        0x13, 0xfe,                                                                            /* -1 */
        0x00,                                                                                  /* null */
        0x27,                                                                                  /* true */
        0x05, 0x02, '{',  'K', '[', '0', ']', '}', 0x00, 0x00, 0xff, 0x00,                     /* ("{K[0]}", None) */
        0x21, 0xbf, 0xf0, 0,   0,   0,   0,   0,   0,                                          /* double 1.0 */
        0x30, 1,    2,    3,   4,   5,   6,   7,   8,    9,    10,   11,   12, 13, 14, 15, 16, /* UUID */
        0x33, 1,    2,    3,   4,   5,   6,   7,   8,    9,    10,   0,    1,                  /* versionstamp */
    };
    rl_buf out;
    rl__buf_init(&out);
    ASSERT_OK(map_one(m, sizeof m, "\xff", 1, "\xff", 1, &out));
    ASSERT_MEM_EQ(out.data, out.len, m, sizeof m);
    rl__buf_release(&out);
}

/* mapped-1.10: {K[i]} and {V[i]} splice raw: an int stays an int, a unicode string stays
 * unicode, bytes stay bytes, a nested tuple and a null stay as encoded; indexes count the whole
 * key (subspace prefix included). */
TEST(mapped_1_10_raw_splicing) {
    /* key: ("st", "idx", 42, b"pk\x00", (1, None), None) */
    static const uint8_t key[] = {0x02, 's',  't',  0x00,             /* 0 "st" */
                                  0x02, 'i',  'd',  'x',  0x00,       /* 1 "idx" */
                                  0x15, 0x2a,                         /* 2 42 */
                                  0x01, 'p',  'k',  0x00, 0xff, 0x00, /* 3 b"pk\0" */
                                  0x05, 0x15, 0x01, 0x00, 0xff, 0x00, /* 4 (1, None) */
                                  0x00};                              /* 5 None */
    /* value: (-300, "v") */
    static const uint8_t val[] = {0x12, 0xfe, 0xd3, 0x02, 'v', 0x00};
    /* mapper: ("{K[0]}", 1, "{K[3]}", "{K[2]}", "{V[1]}", "{V[0]}", "{K[4]}", "{K[5]}") */
    rl_buf m, out;
    rl__buf_init(&m);
    rl__buf_init(&out);
    rl__buf_append(&m, LIT("\x02{K[0]}\x00\x15\x01\x02{K[3]}\x00\x01{K[2]}\x00"));
    rl__buf_append(&m, LIT("\x02{V[1]}\x00\x02{V[0]}\x00\x02{K[4]}\x00\x02{K[5]}\x00"));
    ASSERT_OK(map_one(m.data, m.len, key, sizeof key, val, sizeof val, &out));
    static const uint8_t want[] = {0x02, 's', 't',  0x00, 0x15, 0x01, 0x01, 'p',  'k',  0x00, 0xff, 0x00, 0x15, 0x2a,
                                   0x02, 'v', 0x00, 0x12, 0xfe, 0xd3, 0x05, 0x15, 0x01, 0x00, 0xff, 0x00, 0x00};
    ASSERT_MEM_EQ(out.data, out.len, want, sizeof want);
    /* The same placeholder twice. */
    rl__buf_reset(&out);
    ASSERT_OK(map_one(LIT("\x02{K[2]}\x00\x02{K[2]}\x00"), key, sizeof key, val, sizeof val, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x15\x2a\x15\x2a", 4);
    rl__buf_release(&m);
    rl__buf_release(&out);
}

/* mapped-1.11: the parsed mapper borrows nothing from the mapper bytes. */
TEST(mapped_1_11_mapper_owns_its_bytes) {
    rl_arena a;
    rl__mapper *m = NULL;
    rl_buf out;
    uint8_t bytes[] = "\x02r\x00\x02{K[0]}\x00\x15\x05";
    rl__arena_init(&a, 0);
    rl__buf_init(&out);
    ASSERT_OK(rl__mapper_parse(bytes, sizeof bytes - 1, &a, &m));
    memset(bytes, 0xee, sizeof bytes);
    ASSERT_OK(rl__mapper_construct(m, "\x15\x09", 2, "", 0, &out));
    ASSERT_MEM_EQ(out.data, out.len, "\x02r\x00\x15\x09\x15\x05", 7);
    rl__buf_release(&out);
    rl__arena_release(&a);
}

/* mapped-1.12: every allocation failure in parse and construct gives RL_E_OUT_OF_MEMORY (never a
 * crash, a leak or a wrong result); once enough allocations succeed, the result is right. */
TEST(mapped_1_12_allocation_failures) {
    static const uint8_t key[] = {0x02, 's', 't', 0x00, 0x15, 0x2a, 0x01, 'p', 'k', 0x00};
    static const uint8_t want[] = {0x02, 's',  't', 0x00, 0x15, 0x01, 0x01, 'p', 'k',
                                   0x00, 0x01, '{', 'x',  '}',  0x00, 0x15, 0x2a};
    int ok_seen = 0;
    for (long n = 0; n < 200 && !ok_seen; n++) {
        rl_arena a;
        rl__mapper *m = NULL;
        rl_buf out;
        int rc;
        rl__arena_init(&a, 64);
        rl__buf_init(&out);
        rl_alloc_fail_after(n);
        rc = rl__mapper_parse(LIT("\x02st\x00\x15\x01\x02{K[2]}\x00\x02{{x}}\x00\x02{K[1]}\x00"), &a, &m);
        if (rc == RL_OK) rc = rl__mapper_construct(m, key, sizeof key, "", 0, &out);
        rl_alloc_fail_after(-1);
        if (rc == RL_OK) {
            ASSERT_MEM_EQ(out.data, out.len, want, sizeof want);
            ok_seen = 1;
        } else {
            ASSERT_RC(rc, RL_E_OUT_OF_MEMORY);
        }
        rl__buf_release(&out);
        rl__arena_release(&a);
    }
    ASSERT_TRUE(ok_seen);
}

/* mapped-1.13: the one-walk construct (placeholder indexes < 32) and the general path (larger
 * indexes) against a reference built here from rl__tuple_validate and rl__tuple_get, on random
 * keys and values: valid tuples of mixed elements (nested ones included), and corrupted ones
 * (truncated, a byte changed, random bytes) that may or may not still be tuples. Random mappers
 * of plain literals and placeholders "{K[i]}" / "{V[i]}" with i up to 44. The bytes and the
 * error must match, and out must keep its earlier contents on error. Prints its seed. */
static uint64_t rnd13(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static void random_tuple(uint64_t *rs, rl_buf *b) {
    rl__tuple_packer pk;
    int n = (int)(rnd13(rs) % 45);
    rl__buf_reset(b);
    rl__tuple_packer_init(&pk, b);
    for (int i = 0; i < n; i++) {
        char s[16];
        switch (rnd13(rs) % 7) {
        case 0: rl__tuple_pack_int(&pk, (int64_t)(rnd13(rs) % 100000) - 50000); break;
        case 1: rl__tuple_pack_string(&pk, s, (size_t)snprintf(s, sizeof s, "s%d", (int)(rnd13(rs) % 1000))); break;
        case 2: rl__tuple_pack_bytes(&pk, "a\0b", 3); break;
        case 3: rl__tuple_pack_null(&pk); break;
        case 4: rl__tuple_pack_double(&pk, (double)(rnd13(rs) % 1000) / 7.0); break;
        case 5: rl__tuple_pack_bool(&pk, (int)(rnd13(rs) & 1)); break;
        default:
            rl__tuple_pack_nested_begin(&pk);
            rl__tuple_pack_int(&pk, 7);
            rl__tuple_pack_null(&pk);
            rl__tuple_pack_nested_end(&pk);
        }
    }
    ASSERT_OK(rl__buf_error(b));
    unsigned how = (unsigned)(rnd13(rs) % 10);
    if (how == 7 && b->len) {
        rl__buf_truncate(b, (size_t)(rnd13(rs) % b->len)); /* truncated */
    } else if (how == 8 && b->len) {
        b->data[rnd13(rs) % b->len] = (uint8_t)rnd13(rs); /* one byte changed */
    } else if (how == 9) {
        size_t len = (size_t)(rnd13(rs) % 12);
        rl__buf_reset(b);
        for (size_t i = 0; i < len; i++) rl__buf_append_byte(b, (uint8_t)rnd13(rs));
    }
}

/* The reference: what FoundationDB's constructMappedKey does, from the tuple primitives. */
static int reference_p(const int *kind, const size_t *idx, const rl_buf *lits, int n_el, const rl_buf *k,
                       const rl_buf *v, rl_buf *out) {
    int uses_k = 0, uses_v = 0;
    for (int i = 0; i < n_el; i++) {
        uses_k |= kind[i] == 1;
        uses_v |= kind[i] == 2;
    }
    if (uses_k && rl__tuple_validate(k->data, k->len, NULL) != RL_OK) return RL_E_KEY_NOT_TUPLE;
    if (uses_v && rl__tuple_validate(v->data, v->len, NULL) != RL_OK) return RL_E_VALUE_NOT_TUPLE;
    for (int i = 0; i < n_el; i++) {
        rl__tuple_elem e;
        if (kind[i] == 0) {
            rl__buf_append(out, lits[i].data, lits[i].len);
            continue;
        }
        const rl_buf *src = kind[i] == 1 ? k : v;
        int rc = rl__tuple_get(src->data, src->len, idx[i], &e);
        if (rc == RL_E_NOT_FOUND) return RL_E_MAPPER_BAD_INDEX;
        ASSERT_OK(rc);
        rl__buf_append(out, e.raw, e.raw_len);
    }
    return RL_OK;
}

TEST(mapped_1_13_one_walk_construct_vs_reference) {
    uint64_t seed = rl_test_seed(), rs = seed | 1;
    rl_buf k, v, mp, got, want, lits[8];
    rl__buf_init(&k);
    rl__buf_init(&v);
    rl__buf_init(&mp);
    rl__buf_init(&got);
    rl__buf_init(&want);
    for (int i = 0; i < 8; i++) rl__buf_init(&lits[i]);
    int seen_ok = 0, seen_key_err = 0, seen_val_err = 0, seen_bad_index = 0, seen_big = 0;
    for (int iter = 0; iter < 20000; iter++) {
        int kind[8];
        size_t idx[8];
        int n_el = 1 + (int)(rnd13(&rs) % 6), big = 0;
        rl__tuple_packer pk;
        rl__buf_reset(&mp);
        rl__tuple_packer_init(&pk, &mp);
        for (int i = 0; i < n_el; i++) {
            rl__tuple_packer lp;
            char s[32];
            rl__buf_reset(&lits[i]);
            rl__tuple_packer_init(&lp, &lits[i]);
            unsigned r = (unsigned)(rnd13(&rs) % 5);
            if (r < 2) {
                kind[i] = 0;
                if (r == 0) rl__tuple_pack_int(&lp, (int64_t)(rnd13(&rs) % 300));
                else rl__tuple_pack_string(&lp, "lit", 3);
                rl__buf_append(&mp, lits[i].data, lits[i].len);
            } else {
                kind[i] = r == 4 ? 2 : 1;
                idx[i] = rnd13(&rs) % 4 == 0 ? (size_t)(rnd13(&rs) % 45) : (size_t)(rnd13(&rs) % 6);
                big |= idx[i] >= 32;
                int len = snprintf(s, sizeof s, "{%c[%zu]}", kind[i] == 1 ? 'K' : 'V', idx[i]);
                rl__tuple_pack_string(&pk, s, (size_t)len);
            }
        }
        random_tuple(&rs, &k);
        random_tuple(&rs, &v);
        rl__buf_reset(&want);
        rl__buf_append(&want, "pre", 3);
        int wrc = reference_p(kind, idx, lits, n_el, &k, &v, &want);
        if (wrc != RL_OK) rl__buf_truncate(&want, 3);
        rl__buf_reset(&got);
        rl__buf_append(&got, "pre", 3);
        int grc = map_one(mp.data, mp.len, k.data, k.len, v.data, v.len, &got);
        if (grc != wrc)
            fprintf(stderr, "iter %d: got %s want %s (seed %llu)\n", iter, rl_error_name(grc), rl_error_name(wrc),
                    (unsigned long long)seed);
        ASSERT_RC(grc, wrc);
        ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
        seen_ok += wrc == RL_OK;
        seen_key_err += wrc == RL_E_KEY_NOT_TUPLE;
        seen_val_err += wrc == RL_E_VALUE_NOT_TUPLE;
        seen_bad_index += wrc == RL_E_MAPPER_BAD_INDEX;
        seen_big += big && wrc == RL_OK;
    }
    /* Every outcome was exercised. */
    ASSERT_TRUE(seen_ok > 100 && seen_key_err > 100 && seen_val_err > 10 && seen_bad_index > 100);
    ASSERT_TRUE(seen_big > 10);
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__buf_release(&mp);
    rl__buf_release(&got);
    rl__buf_release(&want);
    for (int i = 0; i < 8; i++) rl__buf_release(&lits[i]);
}

/* mapped-1.15: the key walk's quick element kinds (integers of up to 8 bytes, byte strings and
 * ASCII strings, mapped.c quick_elem_end) at their edges, against the same reference: keys made
 * of integer codes 0x0b..0x1d followed by 0..10 bytes (leading 0x00 / 0xff: not minimal),
 * strings with escaped NULs, bytes >= 0x80 (valid and invalid UTF-8, surrogates), unterminated
 * ones, nulls and other codes, so that every element is accepted or refused exactly as
 * rl__tuple_iter_next does. Prints its seed. */
TEST(mapped_1_15_quick_elements_vs_reference) {
    uint64_t seed = rl_test_seed(), rs = seed | 1;
    static const uint8_t str_bytes[] = {0x00, 0xff, 'a',  'z',  0x7f, 0x80, 0xbf, 0xc2, 0xc3, 0xa9, 0xe2,
                                        0x82, 0xac, 0xed, 0xa0, 0xf0, 0x9f, 0x98, 0x80, 0xf4, 0x90, 0xc0};
    rl_buf k, mp, got, want, lits[8];
    rl__buf_init(&k);
    rl__buf_init(&mp);
    rl__buf_init(&got);
    rl__buf_init(&want);
    for (int i = 0; i < 8; i++) rl__buf_init(&lits[i]);
    int seen_ok = 0, seen_err = 0;
    for (int iter = 0; iter < 30000; iter++) {
        rl__buf_reset(&k);
        int n_frag = 1 + (int)(rnd13(&rs) % 5);
        for (int f = 0; f < n_frag; f++) {
            unsigned r = (unsigned)(rnd13(&rs) % 10);
            if (r < 4) { /* an integer code and 0..10 bytes */
                rl__buf_append_byte(&k, (uint8_t)(0x0b + rnd13(&rs) % 19));
                int n = (int)(rnd13(&rs) % 11);
                for (int j = 0; j < n; j++) {
                    unsigned b = (unsigned)(rnd13(&rs) % 4);
                    rl__buf_append_byte(&k, j == 0 && b == 0 ? 0x00 : j == 0 && b == 1 ? 0xff : (uint8_t)rnd13(&rs));
                }
            } else if (r < 8) { /* a string, mostly terminated */
                rl__buf_append_byte(&k, rnd13(&rs) % 2 ? 0x01 : 0x02);
                int n = (int)(rnd13(&rs) % 7);
                for (int j = 0; j < n; j++)
                    rl__buf_append_byte(&k, rnd13(&rs) % 3 ? 'a' + (uint8_t)(rnd13(&rs) % 26)
                                                           : str_bytes[rnd13(&rs) % sizeof str_bytes]);
                if (rnd13(&rs) % 8) rl__buf_append_byte(&k, 0x00);
            } else if (r == 8) {
                rl__buf_append_byte(&k, 0x00);
            } else { /* any other code, with a few bytes */
                rl__buf_append_byte(&k, (uint8_t)rnd13(&rs));
                for (int j = (int)(rnd13(&rs) % 5); j > 0; j--) rl__buf_append_byte(&k, (uint8_t)rnd13(&rs));
            }
        }
        if (rnd13(&rs) % 10 == 0 && k.len) rl__buf_truncate(&k, (size_t)(rnd13(&rs) % k.len));
        /* A mapper of 1..3 key placeholders (and a literal). */
        int kind[8];
        size_t idx[8];
        int n_el = 1 + (int)(rnd13(&rs) % 3);
        rl__tuple_packer pk;
        rl__buf_reset(&mp);
        rl__tuple_packer_init(&pk, &mp);
        for (int i = 0; i < n_el; i++) {
            char t[32];
            rl__buf_reset(&lits[i]);
            if (i == 0 && rnd13(&rs) % 2) {
                rl__tuple_packer lp;
                rl__tuple_packer_init(&lp, &lits[i]);
                rl__tuple_pack_string(&lp, "lit", 3);
                rl__buf_append(&mp, lits[i].data, lits[i].len);
                kind[i] = 0;
                continue;
            }
            kind[i] = 1;
            idx[i] = (size_t)(rnd13(&rs) % 6);
            int len = snprintf(t, sizeof t, "{K[%zu]}", idx[i]);
            rl__tuple_pack_string(&pk, t, (size_t)len);
        }
        rl__buf_reset(&want);
        rl__buf_append(&want, "pre", 3);
        int wrc = reference_p(kind, idx, lits, n_el, &k, &k, &want);
        if (wrc != RL_OK) rl__buf_truncate(&want, 3);
        rl__buf_reset(&got);
        rl__buf_append(&got, "pre", 3);
        int grc = map_one(mp.data, mp.len, k.data, k.len, "", 0, &got);
        if (grc != wrc)
            fprintf(stderr, "iter %d: got %s want %s (seed %llu)\n", iter, rl_error_name(grc), rl_error_name(wrc),
                    (unsigned long long)seed);
        ASSERT_RC(grc, wrc);
        ASSERT_MEM_EQ(got.data, got.len, want.data, want.len);
        seen_ok += wrc == RL_OK;
        seen_err += wrc == RL_E_KEY_NOT_TUPLE;
    }
    ASSERT_TRUE(seen_ok > 1000 && seen_err > 1000);
    rl__buf_release(&k);
    rl__buf_release(&mp);
    rl__buf_release(&got);
    rl__buf_release(&want);
    for (int i = 0; i < 8; i++) rl__buf_release(&lits[i]);
}

/* ==== mapped-2: mapped reads over a storage engine =========================================== */

/* The model: records of a store under prefix ("st",), keyspace 1, with a VALUE index "idx" on
 * price: index key ("st", "idx", price, pk) -> "", records at ("st", 1, pk, 0) when whole, or
 * ("st", 1, pk, 1..n) when split, and the version at ("st", 1, pk, -1) when kept. */
enum { MAXREC = 64 };
typedef struct {
    int64_t pk, price;
    int chunks;      /* 0: stored whole at suffix 0; n > 0: split at 1..n */
    int has_version; /* a key at suffix -1 */
    int has_record;  /* 0: orphan index entry (no record keys at all) */
    int gen;         /* value generation (changes with rewrites) */
} mrec;

typedef struct {
    mrec r[MAXREC];
    int n;
} model;

static void index_key(rl_buf *b, int64_t price, int64_t pk) {
    rl__tuple_packer pk_;
    rl__buf_reset(b);
    rl__tuple_packer_init(&pk_, b);
    rl__tuple_pack_string(&pk_, "st", 2);
    rl__tuple_pack_string(&pk_, "idx", 3);
    rl__tuple_pack_int(&pk_, price);
    rl__tuple_pack_int(&pk_, pk);
}

static void record_key(rl_buf *b, int64_t pk, int64_t suffix) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_string(&p, "st", 2);
    rl__tuple_pack_int(&p, 1);
    rl__tuple_pack_int(&p, pk);
    rl__tuple_pack_int(&p, suffix);
}

/* The value of a record key: deterministic in (pk, suffix, gen), variable length. */
static void record_value(rl_buf *b, int64_t pk, int64_t suffix, int gen) {
    rl__buf_reset(b);
    rl__buf_printf(b, "rec%lld/%lld/g%d:", (long long)pk, (long long)suffix, gen);
    for (int64_t i = 0; i < (pk * 7 + suffix + 3) % 40; i++) rl__buf_append_byte(b, (uint8_t)('a' + i % 26));
}

/* Suffixes of a record's keys, ascending by encoding (-1 < 0 < 1 < ...); returns the count. */
static int record_suffixes(const mrec *r, int64_t *out) {
    int n = 0;
    if (!r->has_record) return 0;
    if (r->has_version) out[n++] = -1;
    if (r->chunks == 0) out[n++] = 0;
    else
        for (int i = 1; i <= r->chunks; i++) out[n++] = i;
    return n;
}

/* A batch of mutations with owned bytes. */
typedef struct {
    rl__mutation m[4096];
    rl_buf keys[4096], vals[4096];
    size_t n;
} mutbatch;

static void mb_init(mutbatch *mb) { mb->n = 0; }
static void mb_set(mutbatch *mb, const rl_buf *k, const rl_buf *v) {
    size_t i = mb->n++;
    assert_true(i < 4096);
    rl__buf_init(&mb->keys[i]);
    rl__buf_init(&mb->vals[i]);
    rl__buf_append(&mb->keys[i], k->data, k->len);
    rl__buf_append(&mb->vals[i], v->data, v->len);
    mb->m[i].type = RL_MUT_SET;
    mb->m[i].p1 = mb->keys[i].data;
    mb->m[i].len1 = (uint32_t)k->len;
    mb->m[i].p2 = mb->vals[i].data;
    mb->m[i].len2 = (uint32_t)v->len;
}
static void mb_clear_range(mutbatch *mb, const rl_buf *b, const rl_buf *e) {
    size_t i = mb->n++;
    assert_true(i < 4096);
    rl__buf_init(&mb->keys[i]);
    rl__buf_init(&mb->vals[i]);
    rl__buf_append(&mb->keys[i], b->data, b->len);
    rl__buf_append(&mb->vals[i], e->data, e->len);
    mb->m[i].type = RL_MUT_CLEAR_RANGE;
    mb->m[i].p1 = mb->keys[i].data;
    mb->m[i].len1 = (uint32_t)b->len;
    mb->m[i].p2 = mb->vals[i].data;
    mb->m[i].len2 = (uint32_t)e->len;
}
static void mb_apply(mutbatch *mb, rl__storage *st, rl__version v) {
    ASSERT_OK(rl__storage_apply(st, v, mb->m, mb->n));
    for (size_t i = 0; i < mb->n; i++) {
        rl__buf_release(&mb->keys[i]);
        rl__buf_release(&mb->vals[i]);
    }
    mb->n = 0;
}

/* Write one record (index entry and record keys) into mb. */
static void write_record(mutbatch *mb, const mrec *r) {
    rl_buf k, v;
    int64_t suf[MAXREC];
    rl__buf_init(&k);
    rl__buf_init(&v);
    index_key(&k, r->price, r->pk);
    mb_set(mb, &k, &v); /* empty value */
    int ns = record_suffixes(r, suf);
    for (int i = 0; i < ns; i++) {
        record_key(&k, r->pk, suf[i]);
        record_value(&v, r->pk, suf[i], r->gen);
        mb_set(mb, &k, &v);
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
}

/* Remove a record's keys (index entry and the whole record range) in mb. */
static void delete_record(mutbatch *mb, const mrec *r) {
    rl_buf b, e;
    rl__tuple_packer p;
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_key(&b, r->price, r->pk);
    rl__buf_append(&e, b.data, b.len);
    rl__buf_append_byte(&e, 0);
    mb_clear_range(mb, &b, &e);
    rl__buf_reset(&b);
    rl__tuple_packer_init(&p, &b);
    rl__tuple_pack_string(&p, "st", 2);
    rl__tuple_pack_int(&p, 1);
    rl__tuple_pack_int(&p, r->pk);
    rl__buf_reset(&e);
    ASSERT_OK(rl__strinc(b.data, b.len, &e));
    mb_clear_range(mb, &b, &e);
    rl__buf_release(&b);
    rl__buf_release(&e);
}

static rl__storage *open_mem(void) {
    rl__storage_options so;
    rl__storage *st = NULL;
    memset(&so, 0, sizeof so);
    ASSERT_OK(rl__storage_open(&so, &st, NULL));
    return st;
}

/* The index range of the store: ("st", "idx") + 0x00 .. + 0xff. */
static void index_range(rl_buf *b, rl_buf *e) {
    rl_buf p;
    rl__tuple_packer pk;
    rl__buf_init(&p);
    rl__tuple_packer_init(&pk, &p);
    rl__tuple_pack_string(&pk, "st", 2);
    rl__tuple_pack_string(&pk, "idx", 3);
    rl__buf_reset(b);
    rl__buf_reset(e);
    rl__tuple_range(p.data, p.len, b, e);
    rl__buf_release(&p);
}

/* Mappers: range ("st", 1, "{K[3]}", "{...}") and point ("st", 1, "{K[3]}", 0). */
static rl__mapper *mapper_range(rl_arena *a) {
    rl__mapper *m = NULL;
    ASSERT_OK(rl__mapper_parse(LIT("\x02st\x00\x15\x01\x02{K[3]}\x00\x02{...}\x00"), a, &m));
    return m;
}
static rl__mapper *mapper_point(rl_arena *a) {
    rl__mapper *m = NULL;
    ASSERT_OK(rl__mapper_parse(LIT("\x02st\x00\x15\x01\x02{K[3]}\x00\x14"), a, &m));
    return m;
}

static int cmp_rec(const void *x, const void *y) {
    const mrec *a = x, *b = y;
    if (a->price != b->price) return a->price < b->price ? -1 : 1;
    if (a->pk != b->pk) return a->pk < b->pk ? -1 : 1;
    return 0;
}

/* The model's records in index order (ascending, or descending when reverse). */
static int model_order(const model *md, int reverse, mrec *out) {
    memcpy(out, md->r, (size_t)md->n * sizeof *out);
    qsort(out, (size_t)md->n, sizeof *out, cmp_rec);
    if (reverse)
        for (int i = 0, j = md->n - 1; i < j; i++, j--) {
            mrec t = out[i];
            out[i] = out[j];
            out[j] = t;
        }
    return md->n;
}

/* Check one entry against the model record r: index key, secondary begin/end, and the kvs.
 * In point mode the record's suffix-0 key; in range mode all its keys (the first row_cap of
 * them when cut off, in which case more must be 1). */
static void check_entry(const rl__mapped_entry *e, const mrec *r, int is_range, int row_cap) {
    rl_buf k, v, p;
    rl__tuple_packer pk;
    int64_t suf[MAXREC];
    rl__buf_init(&k);
    rl__buf_init(&v);
    rl__buf_init(&p);
    index_key(&k, r->price, r->pk);
    ASSERT_MEM_EQ(e->index.key, e->index.key_len, k.data, k.len);
    ASSERT_EQ(e->index.value_len, 0);
    ASSERT_EQ(e->is_range, is_range);
    ASSERT_EQ(e->served_locally, 1);
    rl__tuple_packer_init(&pk, &p);
    rl__tuple_pack_string(&pk, "st", 2);
    rl__tuple_pack_int(&pk, 1);
    rl__tuple_pack_int(&pk, r->pk);
    if (is_range) {
        ASSERT_MEM_EQ(e->begin, e->begin_len, p.data, p.len);
        /* strinc(P) by hand: drop trailing 0xff bytes, increment the last. */
        size_t pl = p.len;
        while (pl > 0 && p.data[pl - 1] == 0xff) pl--;
        assert_true(pl > 0);
        p.data[pl - 1]++;
        rl__buf_truncate(&p, pl);
        ASSERT_MEM_EQ(e->end, e->end_len, p.data, p.len);
        int ns = record_suffixes(r, suf);
        int want = ns < row_cap ? ns : row_cap;
        ASSERT_EQ(e->n_kvs, want);
        ASSERT_EQ(e->more, ns > row_cap ? 1 : 0);
        for (int i = 0; i < want; i++) {
            record_key(&k, r->pk, suf[i]);
            record_value(&v, r->pk, suf[i], r->gen);
            ASSERT_MEM_EQ(e->kvs[i].key, e->kvs[i].key_len, k.data, k.len);
            ASSERT_MEM_EQ(e->kvs[i].value, e->kvs[i].value_len, v.data, v.len);
        }
    } else {
        rl__tuple_pack_int(&pk, 0);
        ASSERT_MEM_EQ(e->begin, e->begin_len, p.data, p.len);
        rl__buf_append_byte(&p, 0);
        ASSERT_MEM_EQ(e->end, e->end_len, p.data, p.len);
        ASSERT_EQ(e->more, 0);
        if (r->has_record && r->chunks == 0) {
            ASSERT_EQ(e->n_kvs, 1);
            record_key(&k, r->pk, 0);
            record_value(&v, r->pk, 0, r->gen);
            ASSERT_MEM_EQ(e->kvs[0].key, e->kvs[0].key_len, k.data, k.len);
            ASSERT_MEM_EQ(e->kvs[0].value, e->kvs[0].value_len, v.data, v.len);
        } else {
            ASSERT_EQ(e->n_kvs, 0);
        }
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__buf_release(&p);
}

/* A fixed dataset: 12 records with whole, split, versioned and orphan entries, duplicate
 * prices, negative and large primary keys. Written at version 10. */
static void fixed_model(model *md) {
    static const mrec rs[] = {
        {1, 50, 0, 1, 1, 0},    {2, 20, 2, 1, 1, 0},  {3, 20, 0, 0, 1, 0},  {4, 70, 3, 0, 1, 0},
        {5, 10, 0, 1, 0, 0},    {6, 90, 0, 0, 1, 0},  {7, 30, 5, 1, 1, 0},  {-8, 30, 0, 1, 1, 0},
        {300, 40, 1, 0, 1, 0},  {10, -5, 0, 0, 1, 0}, {11, 60, 0, 1, 0, 0}, {70000, 60, 2, 1, 1, 0},
        {-256, 25, 2, 1, 1, 0}, /* P ends in 0xff: strinc drops it */
    };
    md->n = (int)(sizeof rs / sizeof rs[0]);
    memcpy(md->r, rs, sizeof rs);
}

static mutbatch g_mb; /* large: keep off the stack */

static rl__storage *load_model(const model *md, rl__version v) {
    rl__storage *st = open_mem();
    mb_init(&g_mb);
    for (int i = 0; i < md->n; i++) write_record(&g_mb, &md->r[i]);
    /* Neighbours outside the index range and between records, which must never show up. */
    rl_buf k, val;
    rl__buf_init(&k);
    rl__buf_init(&val);
    rl__buf_append(&k, LIT("\x02st\x00\x02idw\x00"));
    rl__buf_append(&val, "x", 1);
    mb_set(&g_mb, &k, &val);
    rl__buf_release(&k);
    rl__buf_release(&val);
    mb_apply(&g_mb, st, v);
    return st;
}

/* Run one mapped read over the whole index range and check every entry against the model. */
static void run_full(rl__storage *st, rl__version v, const model *md, const rl__mapper *m, const rl__mapped_options *o,
                     int row_cap) {
    rl_arena a;
    rl_buf b, e;
    rl__mapped_entry *ents = NULL;
    int n = -1, more = -1;
    mrec ord[MAXREC];
    rl__arena_init(&a, 0);
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    ASSERT_OK(
        rl__storage_get_mapped_range(st, v, b.data, b.len, e.data, e.len, m, o, NULL, NULL, &a, &ents, &n, &more));
    int nm = model_order(md, o ? o->reverse : 0, ord);
    ASSERT_EQ(n, nm);
    ASSERT_EQ(more, 0);
    for (int i = 0; i < n; i++) check_entry(&ents[i], &ord[i], rl__mapper_is_range(m), row_cap);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__arena_release(&a);
}

/* mapped-2.1: range mode: every index entry gets all its record keys, ascending (version key,
 * then the whole record or its chunks), orphans get none; nothing outside the prefix leaks. */
TEST(mapped_2_1_range_mode) {
    model md;
    rl_arena a;
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    run_full(st, 10, &md, mapper_range(&a), NULL, 1 << 30);
    rl__mapped_options o = {0};
    o.batch = 1;
    run_full(st, 10, &md, mapper_range(&a), &o, 1 << 30);
    o.batch = 1000;
    run_full(st, 10, &md, mapper_range(&a), &o, 1 << 30);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.2: point mode: the key P is read; a missing key is an empty result, not an error. */
TEST(mapped_2_2_point_mode) {
    model md;
    rl_arena a;
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    run_full(st, 10, &md, mapper_point(&a), NULL, 0);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.3: reverse: entries in descending index order, secondaries still ascending. */
TEST(mapped_2_3_reverse) {
    model md;
    rl_arena a;
    rl__mapped_options o = {0};
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    o.reverse = 1;
    run_full(st, 10, &md, mapper_range(&a), &o, 1 << 30);
    run_full(st, 10, &md, mapper_point(&a), &o, 0);
    o.batch = 3;
    run_full(st, 10, &md, mapper_range(&a), &o, 1 << 30);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.4: per-entry secondary limits: rows and bytes cut a secondary off and set its more. */
TEST(mapped_2_4_secondary_limits) {
    model md;
    rl_arena a;
    rl__mapped_options o = {0};
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    o.secondary_row_limit = 2;
    run_full(st, 10, &md, mapper_range(&a), &o, 2);
    o.secondary_row_limit = 1;
    o.reverse = 1;
    run_full(st, 10, &md, mapper_range(&a), &o, 1);

    /* A byte limit of 1: every non-empty secondary returns its first row only (the row that
     * crosses the target is included) and is marked more when it has others. */
    rl_buf b, e;
    rl__mapped_entry *ents = NULL;
    int n = 0, more = 0;
    mrec ord[MAXREC];
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    memset(&o, 0, sizeof o);
    o.secondary_byte_limit = 1;
    ASSERT_OK(rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, mapper_range(&a), &o, NULL, NULL, &a,
                                           &ents, &n, &more));
    ASSERT_EQ(n, model_order(&md, 0, ord));
    for (int i = 0; i < n; i++) {
        int64_t suf[MAXREC];
        int ns = record_suffixes(&ord[i], suf);
        ASSERT_EQ(ents[i].n_kvs, ns ? 1 : 0);
        ASSERT_EQ(ents[i].more, ns > 1 ? 1 : 0);
    }
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* Bytes an entry costs from the model alone: index key + value, plus key + value of each
 * secondary row returned (capped at row_cap rows in range mode). */
static long model_cost(const mrec *r, int is_range, int row_cap, long *out_index) {
    rl_buf k, v;
    int64_t suf[MAXREC];
    long c;
    rl__buf_init(&k);
    rl__buf_init(&v);
    index_key(&k, r->price, r->pk);
    c = (long)k.len;
    *out_index = c;
    if (is_range) {
        int ns = record_suffixes(r, suf);
        for (int i = 0; i < ns && i < row_cap; i++) {
            record_key(&k, r->pk, suf[i]);
            record_value(&v, r->pk, suf[i], r->gen);
            c += (long)(k.len + v.len);
        }
    } else if (r->has_record && r->chunks == 0) {
        record_key(&k, r->pk, 0);
        record_value(&v, r->pk, 0, r->gen);
        c += (long)(k.len + v.len);
    }
    rl__buf_release(&k);
    rl__buf_release(&v);
    return c;
}

/* The number of entries a page starting at ord[got] must hold, by FoundationDB's accounting
 * (computed from the model): the index scan takes rows up to the row limit and until its
 * key+value bytes reach target*0.2 (the crossing row included); then batches of `batch` start
 * while the full target is not exhausted. */
static int expected_page(const mrec *ord, int total, int got, const rl__mapped_options *o, int is_range) {
    int batch = o->batch ? o->batch : 10, row_cap = o->secondary_row_limit ? o->secondary_row_limit : 2000;
    long ib = 0, sum = 0, cost[MAXREC], ik;
    int k = 0, m = 0;
    if (o->target_bytes) {
        ib = (long)((double)o->target_bytes * 0.2);
        if (ib < 1) ib = 1;
    }
    while (got + k < total && (o->limit == 0 || k < o->limit) && (ib == 0 || sum < ib)) {
        cost[k] = model_cost(&ord[got + k], is_range, row_cap, &ik);
        sum += ik;
        k++;
    }
    long remaining = o->target_bytes;
    while (m < k) {
        if (o->target_bytes && remaining <= 0) break;
        int stop = m + batch < k ? m + batch : k;
        for (int i = m; i < stop; i++) remaining -= cost[i];
        m = stop;
    }
    return m;
}

/* Read the whole index range in pages with options o (row limit / byte budget), resuming after
 * the last returned entry; check the concatenation equals the model, and the budget rule of
 * each page. Returns the number of pages. */
static int run_paged(rl__storage *st, rl__version v, const model *md, const rl__mapper *m,
                     const rl__mapped_options *o) {
    rl_buf b, e;
    mrec ord[MAXREC];
    int total = model_order(md, o->reverse, ord), got = 0, pages = 0;
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    for (;;) {
        rl_arena a;
        rl__mapped_entry *ents = NULL;
        int n = -1, more = -1;
        rl__arena_init(&a, 0);
        ASSERT_OK(
            rl__storage_get_mapped_range(st, v, b.data, b.len, e.data, e.len, m, o, NULL, NULL, &a, &ents, &n, &more));
        pages++;
        ASSERT_TRUE(pages <= total + 1);
        ASSERT_TRUE(got + n <= total);
        if (got < total) ASSERT_TRUE(n >= 1); /* progress */
        if (o->limit) ASSERT_TRUE(n <= o->limit);
        ASSERT_EQ(n, expected_page(ord, total, got, o, rl__mapper_is_range(m)));
        for (int i = 0; i < n; i++)
            check_entry(&ents[i], &ord[got + i], rl__mapper_is_range(m),
                        o->secondary_row_limit ? o->secondary_row_limit : 2000);
        got += n;
        ASSERT_EQ(more, got < total ? 1 : 0);
        if (!more) {
            rl__arena_release(&a);
            break;
        }
        if (o->limit == 0 && o->target_bytes == 0) fail_msg("more without any limit");
        if (o->target_bytes == 0) ASSERT_EQ(n, o->limit);
        /* Resume: forward after the last key, reverse before it. */
        const rl__mapped_entry *last = &ents[n - 1];
        if (o->reverse) {
            rl__buf_reset(&e);
            rl__buf_append(&e, last->index.key, last->index.key_len);
        } else {
            rl__buf_reset(&b);
            rl__buf_append(&b, last->index.key, last->index.key_len);
            rl__buf_append_byte(&b, 0);
        }
        rl__arena_release(&a);
    }
    ASSERT_EQ(got, total);
    rl__buf_release(&b);
    rl__buf_release(&e);
    return pages;
}

/* mapped-2.5: row limits: pages of `limit` entries, more set until the end, resumable. */
TEST(mapped_2_5_row_limits) {
    model md;
    rl_arena a;
    rl__mapped_options o = {0};
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    for (int lim = 1; lim <= 13; lim += 4) {
        for (int rev = 0; rev < 2; rev++) {
            o.limit = lim;
            o.reverse = rev;
            int pages = run_paged(st, 10, &md, mapper_range(&a), &o);
            ASSERT_EQ(pages, (md.n + lim - 1) / lim);
            run_paged(st, 10, &md, mapper_point(&a), &o);
        }
    }
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.6: byte budgets: a small target stops after the batch that exhausts it, more is set
 * and the read resumes; target 1 still makes progress; bigger batches overshoot by at most a
 * batch. */
TEST(mapped_2_6_byte_budget) {
    model md;
    rl_arena a;
    rl__mapped_options o = {0};
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    static const long targets[] = {1, 50, 120, 400, 1000, 5000};
    static const int batches[] = {1, 2, 10};
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (size_t bi = 0; bi < 3; bi++)
            for (int rev = 0; rev < 2; rev++) {
                o.target_bytes = targets[t];
                o.batch = batches[bi];
                o.reverse = rev;
                int pages = run_paged(st, 10, &md, mapper_range(&a), &o);
                if (targets[t] == 1) ASSERT_EQ(pages, md.n); /* one entry per page */
                if (targets[t] == 400 && batches[bi] == 1) ASSERT_TRUE(pages > 2);
            }
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.7: MVCC: a read at an older version sees the old records and index entries. */
TEST(mapped_2_7_mvcc) {
    model v1, v2;
    rl_arena a;
    fixed_model(&v1);
    rl__storage *st = load_model(&v1, 10);
    /* Version 20: rewrite record 1 (gen 1, now split), delete record 3, move record 6 to a new
     * price, add record 99. */
    v2 = v1;
    mb_init(&g_mb);
    for (int i = 0; i < v2.n; i++) {
        mrec *r = &v2.r[i];
        if (r->pk == 1) {
            delete_record(&g_mb, r);
            r->gen = 1;
            r->chunks = 3;
            write_record(&g_mb, r);
        } else if (r->pk == 3) {
            delete_record(&g_mb, r);
            v2.r[i] = v2.r[--v2.n];
            i--;
        } else if (r->pk == 6) {
            delete_record(&g_mb, r);
            r->price = 15;
            r->gen = 2;
            write_record(&g_mb, r);
        }
    }
    mrec add = {99, 45, 0, 1, 1, 3};
    v2.r[v2.n++] = add;
    write_record(&g_mb, &add);
    mb_apply(&g_mb, st, 20);

    rl__arena_init(&a, 0);
    run_full(st, 10, &v1, mapper_range(&a), NULL, 1 << 30);
    run_full(st, 15, &v1, mapper_point(&a), NULL, 0);
    run_full(st, 20, &v2, mapper_range(&a), NULL, 1 << 30);
    run_full(st, 20, &v2, mapper_point(&a), NULL, 0);
    /* Reads outside the window fail the whole call with the storage error. */
    rl_buf b, e;
    rl__mapped_entry *ents = NULL;
    int n = 0, more = 0;
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    ASSERT_RC(rl__storage_get_mapped_range(st, 21, b.data, b.len, e.data, e.len, mapper_range(&a), NULL, NULL, NULL, &a,
                                           &ents, &n, &more),
              RL_E_FUTURE_VERSION);
    ASSERT_EQ(n, 0);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* A secondary batch hook standing for another storage server: reads a second engine, counts
 * its items and batches, can fail the Nth item (an item error, after which it stops). */
typedef struct {
    rl__storage *remote;
    int calls, fail_at, points, ranges, batches, max_batch;
} remote_ctx;

static int remote_read(void *ctx, rl__version v, rl__secondary_item *items, int n, rl_arena *a) {
    remote_ctx *rc = ctx;
    rc->batches++;
    if (n > rc->max_batch) rc->max_batch = n;
    for (int i = 0; i < n; i++) {
        rl__secondary_item *it = &items[i];
        rc->calls++;
        if (rc->fail_at && rc->calls == rc->fail_at) {
            it->error = RL_E_TIMED_OUT;
            return RL_OK;
        }
        it->served_locally = 0;
        if (it->is_range) rc->ranges++;
        else rc->points++;
        if (!it->is_range) {
            /* The contract: end = begin + "\x00", one row at most. */
            ASSERT_EQ(it->end_len, it->begin_len + 1);
            ASSERT_EQ(it->end[it->begin_len], 0);
            ASSERT_EQ(it->row_limit, 1);
        }
        int rcode = rl__storage_get_range(rc->remote, v, it->begin, it->begin_len, it->end, it->end_len, it->row_limit,
                                          it->byte_limit, 0, a, &it->kvs, &it->n_kvs, &it->more);
        if (rcode != RL_OK) return rcode;
    }
    return RL_OK;
}

/* mapped-2.8: secondary reads through a batch hook (records on another storage engine): same
 * results, served_locally = 0, one hook call per batch of 10 (the default); an error of any
 * secondary read fails the whole call. */
TEST(mapped_2_8_secondary_fn) {
    model md, empty;
    rl_arena a;
    rl_buf b, e;
    fixed_model(&md);
    rl__storage *records = load_model(&md, 10);
    empty.n = 0;
    rl__storage *index_only = load_model(&empty, 10);
    /* The index engine holds only the index entries. */
    mb_init(&g_mb);
    for (int i = 0; i < md.n; i++) {
        rl_buf k, v;
        rl__buf_init(&k);
        rl__buf_init(&v);
        index_key(&k, md.r[i].price, md.r[i].pk);
        mb_set(&g_mb, &k, &v);
        rl__buf_release(&k);
        rl__buf_release(&v);
    }
    mb_apply(&g_mb, index_only, 11);
    mb_init(&g_mb);
    rl__buf_init(&b);
    rl__buf_append(&b, "zz", 2);
    mb_set(&g_mb, &b, &b); /* bump the records engine to version 11 */
    mb_apply(&g_mb, records, 11);

    rl__arena_init(&a, 0);
    rl__buf_init(&e);
    index_range(&b, &e);
    for (int mode = 0; mode < 2; mode++) {
        remote_ctx rc = {records, 0, 0, 0, 0, 0, 0};
        rl__mapped_entry *ents = NULL;
        int n = 0, more = 0;
        mrec ord[MAXREC];
        const rl__mapper *m = mode ? mapper_point(&a) : mapper_range(&a);
        ASSERT_OK(rl__storage_get_mapped_range(index_only, 11, b.data, b.len, e.data, e.len, m, NULL, remote_read, &rc,
                                               &a, &ents, &n, &more));
        ASSERT_EQ(n, model_order(&md, 0, ord));
        ASSERT_EQ(rc.calls, n);
        ASSERT_EQ(mode ? rc.points : rc.ranges, n);
        ASSERT_EQ(rc.batches, (n + 9) / 10);
        ASSERT_EQ(rc.max_batch, n < 10 ? n : 10);
        for (int i = 0; i < n; i++) {
            ASSERT_EQ(ents[i].served_locally, 0);
            rl__mapped_entry copy = ents[i];
            copy.served_locally = 1; /* check_entry expects local; the rest must match */
            check_entry(&copy, &ord[i], !mode, 2000);
        }
        /* Without the fn the index engine finds no records. */
        ASSERT_OK(rl__storage_get_mapped_range(index_only, 11, b.data, b.len, e.data, e.len, m, NULL, NULL, NULL, &a,
                                               &ents, &n, &more));
        for (int i = 0; i < n; i++) {
            ASSERT_EQ(ents[i].n_kvs, 0);
            ASSERT_EQ(ents[i].served_locally, 1);
        }
        /* A failing secondary read (the 5th) fails the whole call. */
        remote_ctx bad = {records, 0, 5, 0, 0, 0, 0};
        ASSERT_RC(rl__storage_get_mapped_range(index_only, 11, b.data, b.len, e.data, e.len, m, NULL, remote_read, &bad,
                                               &a, &ents, &n, &more),
                  RL_E_TIMED_OUT);
        ASSERT_EQ(n, 0);
        ASSERT_EQ(bad.calls, 5);
    }
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__arena_release(&a);
    rl__storage_close(records);
    rl__storage_close(index_only);
}

/* A batch hook that hands every other item back (read_here) and reads the rest from the same
 * engine itself, as a storage server does with secondaries in its own shards. */
typedef struct {
    int calls;
    rl__storage *st;
} here_ctx;

static int half_here(void *ctx, rl__version v, rl__secondary_item *items, int n, rl_arena *a) {
    here_ctx *hc = ctx;
    for (int i = 0; i < n; i++) {
        rl__secondary_item *it = &items[i];
        if (hc->calls++ % 2 == 0) {
            it->read_here = 1;
            it->n_kvs = 77; /* ignored when read_here */
            continue;
        }
        it->served_locally = 0;
        int rc = rl__storage_get_range(hc->st, v, it->begin, it->begin_len, it->end, it->end_len, it->row_limit,
                                       it->byte_limit, 0, a, &it->kvs, &it->n_kvs, &it->more);
        if (rc != RL_OK) return rc;
    }
    return RL_OK;
}

/* mapped-2.15: items a hook hands back with read_here are read from the engine by mapped.c: the
 * rows equal a read without a hook, for several limits and both mappers, with served_locally 1
 * for those and the hook's 0 for the others. */
TEST(mapped_2_15_hook_read_here) {
    model md;
    rl_arena a;
    rl_buf b, e;
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    for (int mode = 0; mode < 2; mode++)
        for (int lim = 0; lim < 4; lim++) {
            const rl__mapper *m = mode ? mapper_point(&a) : mapper_range(&a);
            rl__mapped_options o;
            memset(&o, 0, sizeof o);
            o.limit = lim * 4;
            o.batch = 3;
            o.secondary_row_limit = 1 + lim;
            rl__mapped_entry *x = NULL, *y = NULL;
            int nx = 0, ny = 0, mx = 0, my = 0;
            ASSERT_OK(rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, NULL, NULL, &a, &x, &nx,
                                                   &mx));
            here_ctx hc = {0, st};
            ASSERT_OK(rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, half_here, &hc, &a, &y,
                                                   &ny, &my));
            ASSERT_TRUE(nx > 0);
            ASSERT_EQ(nx, ny);
            ASSERT_EQ(mx, my);
            for (int i = 0; i < nx; i++) {
                ASSERT_MEM_EQ(x[i].begin, x[i].begin_len, y[i].begin, y[i].begin_len);
                ASSERT_EQ(x[i].n_kvs, y[i].n_kvs);
                ASSERT_EQ(x[i].more, y[i].more);
                for (int j = 0; j < x[i].n_kvs; j++) {
                    ASSERT_MEM_EQ(x[i].kvs[j].key, x[i].kvs[j].key_len, y[i].kvs[j].key, y[i].kvs[j].key_len);
                    ASSERT_MEM_EQ(x[i].kvs[j].value, x[i].kvs[j].value_len, y[i].kvs[j].value, y[i].kvs[j].value_len);
                }
                ASSERT_EQ(y[i].served_locally, i % 2 == 0);
            }
        }
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* A hook that reads everything itself (as half_here's odd items) and leaves item unread_at of
 * its first call, and every later one, unread. */
typedef struct {
    rl__storage *st;
    int unread_at; /* -1: none */
    int calls;
} unread_ctx;

static int unread_hook(void *ctx, rl__version v, rl__secondary_item *items, int n, rl_arena *a) {
    unread_ctx *uc = ctx;
    int first = uc->calls++ == 0;
    for (int i = 0; i < n; i++) {
        rl__secondary_item *it = &items[i];
        if (first && uc->unread_at >= 0 && i >= uc->unread_at) {
            it->unread = 1;
            continue;
        }
        int rc = rl__storage_get_range(uc->st, v, it->begin, it->begin_len, it->end, it->end_len, it->row_limit,
                                       it->byte_limit, 0, a, &it->kvs, &it->n_kvs, &it->more);
        if (rc != RL_OK) return rc;
    }
    return RL_OK;
}

/* mapped-2.16: the page-ending outputs and options of a hook's batch (the storage server's
 * `grouped`): an unread item ends the page before it (more); the first item of the first batch
 * unread is internal_error (no progress); batch_step with a target maps exactly the entries that
 * batches of batch_step would; batch_secondary_bytes ends the batch after the entry whose
 * secondaries reach it. */
TEST(mapped_2_16_hook_page_end) {
    model md;
    rl_arena a;
    rl_buf b, e;
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__arena_init(&a, 0);
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    const rl__mapper *m = mapper_range(&a);
    rl__mapped_options o;
    memset(&o, 0, sizeof o);
    rl__mapped_entry *x = NULL, *y = NULL;
    int nx = 0, ny = 0, mx = 0, my = 0;
    ASSERT_OK(rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, NULL, NULL, &a, &x, &nx, &mx));
    ASSERT_TRUE(nx >= 6);
    ASSERT_EQ(mx, 0);
    /* Unread at 4 of a whole-page batch: 4 entries, more. */
    o.batch = 1000;
    unread_ctx uc = {st, 4, 0};
    ASSERT_OK(
        rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, unread_hook, &uc, &a, &y, &ny, &my));
    ASSERT_EQ(ny, 4);
    ASSERT_EQ(my, 1);
    for (int i = 0; i < ny; i++) ASSERT_EQ(x[i].n_kvs, y[i].n_kvs);
    uc = (unread_ctx){st, 0, 0};
    ASSERT_RC(
        rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, unread_hook, &uc, &a, &y, &ny, &my),
        RL_E_INTERNAL_ERROR);
    /* batch_step: the same entries as batches of that size, for several targets. */
    for (long target = 1; target < 4000; target = target * 3 + 1) {
        rl__mapped_options r;
        memset(&r, 0, sizeof r);
        r.batch = 3;
        r.target_bytes = target;
        ASSERT_OK(
            rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &r, NULL, NULL, &a, &x, &nx, &mx));
        rl__mapped_options g = r;
        g.batch = 1000;
        g.batch_step = 3;
        uc = (unread_ctx){st, -1, 0};
        ASSERT_OK(rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &g, unread_hook, &uc, &a, &y,
                                               &ny, &my));
        if (nx != ny || mx != my)
            fail_msg("target %ld: %d entries (more %d) against batches' %d (more %d)", target, ny, my, nx, mx);
    }
    /* batch_secondary_bytes: the batch ends after the entry whose secondaries reach it. */
    memset(&o, 0, sizeof o);
    ASSERT_OK(rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, NULL, NULL, &a, &x, &nx, &mx));
    long sec = 0;
    int want = nx;
    for (int i = 0; i < nx; i++) {
        for (int j = 0; j < x[i].n_kvs; j++) sec += (long)x[i].kvs[j].key_len + (long)x[i].kvs[j].value_len;
        if (sec >= 20 && i + 1 < nx) {
            want = i + 1;
            break;
        }
    }
    o.batch = 1000;
    o.batch_secondary_bytes = 20;
    uc = (unread_ctx){st, -1, 0};
    ASSERT_OK(
        rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, &o, unread_hook, &uc, &a, &y, &ny, &my));
    ASSERT_EQ(ny, want);
    ASSERT_EQ(my, want < nx);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.9: mapper errors during the read fail the whole call: an index key that is not a
 * tuple (2041), a value that is not a tuple (2042), an index past the end (2030). */
TEST(mapped_2_9_mapper_errors_in_read) {
    rl__storage *st = open_mem();
    rl_arena a;
    rl__mapper *m = NULL;
    rl__mapped_entry *ents = NULL;
    int n = 0, more = 0;
    rl_buf k, v;
    rl__arena_init(&a, 0);
    rl__buf_init(&k);
    rl__buf_init(&v);
    mb_init(&g_mb);
    rl__buf_append(&k, LIT("\x15\x01"));
    rl__buf_append(&v, LIT("\x15\x02"));
    mb_set(&g_mb, &k, &v); /* (1) -> (2) */
    rl__buf_reset(&k);
    rl__buf_reset(&v);
    rl__buf_append(&k, LIT("\x15\x05\xff"));
    rl__buf_append(&v, LIT("\xff"));
    mb_set(&g_mb, &k, &v); /* not a tuple -> not a tuple */
    mb_apply(&g_mb, st, 5);

    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00\x02{K[0]}\x00"), &a, &m));
    ASSERT_OK(
        rl__storage_get_mapped_range(st, 5, "\x15\x01", 2, "\x15\x02", 2, m, NULL, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 1);
    ASSERT_RC(rl__storage_get_mapped_range(st, 5, "", 0, "\xff", 1, m, NULL, NULL, NULL, &a, &ents, &n, &more),
              RL_E_KEY_NOT_TUPLE);
    ASSERT_EQ(n, 0);
    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00\x02{V[0]}\x00"), &a, &m));
    ASSERT_RC(rl__storage_get_mapped_range(st, 5, "", 0, "\xff", 1, m, NULL, NULL, NULL, &a, &ents, &n, &more),
              RL_E_VALUE_NOT_TUPLE);
    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00\x02{K[1]}\x00"), &a, &m));
    ASSERT_RC(
        rl__storage_get_mapped_range(st, 5, "\x15\x01", 2, "\x15\x02", 2, m, NULL, NULL, NULL, &a, &ents, &n, &more),
        RL_E_MAPPER_BAD_INDEX);
    /* A literal-only mapper maps the bad entries fine: P = ("r"), missing. */
    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00"), &a, &m));
    ASSERT_OK(rl__storage_get_mapped_range(st, 5, "", 0, "\xff", 1, m, NULL, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(ents[1].n_kvs, 0);
    ASSERT_MEM_EQ(ents[1].begin, ents[1].begin_len, "\x02r\x00", 3);
    /* Negative limits are refused. */
    rl__mapped_options o = {0};
    o.limit = -1;
    ASSERT_RC(rl__storage_get_mapped_range(st, 5, "", 0, "\xff", 1, m, &o, NULL, NULL, &a, &ents, &n, &more),
              RL_E_RANGE_LIMITS_INVALID);
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.11: the prefix range includes the key P itself (unlike a tuple range()) and stops
 * before strinc(P); the secondary begin/end are P and strinc(P). */
TEST(mapped_2_11_range_includes_prefix_key) {
    rl__storage *st = open_mem();
    rl_arena a;
    rl__mapper *m = NULL;
    rl__mapped_entry *ents = NULL;
    int n = 0, more = 0;
    rl_buf k, v;
    rl__arena_init(&a, 0);
    rl__buf_init(&k);
    rl__buf_init(&v);
    mb_init(&g_mb);
    static const struct {
        const char *k;
        size_t n;
    } keys[] = {{"\x02q\xff", 3},         {"\x02r", 2},     {"\x02r\x00", 3}, {"\x02r\x00\x15\x01", 5},
                {"\x02r\x00\xff\xff", 5}, {"\x02r\x01", 3}, {"\x15\x01", 2}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        rl__buf_reset(&k);
        rl__buf_reset(&v);
        rl__buf_append(&k, keys[i].k, keys[i].n);
        rl__buf_printf(&v, "v%zu", i);
        mb_set(&g_mb, &k, &v);
    }
    mb_apply(&g_mb, st, 3);
    /* Index: the single key (1); mapper ("r", "{...}"): P = 02 72 00. */
    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00\x02{...}\x00"), &a, &m));
    ASSERT_OK(rl__storage_get_mapped_range(st, 3, "\x15", 1, "\x16", 1, m, NULL, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(more, 0);
    ASSERT_MEM_EQ(ents[0].begin, ents[0].begin_len, "\x02r\x00", 3);
    ASSERT_MEM_EQ(ents[0].end, ents[0].end_len, "\x02r\x01", 3);
    ASSERT_EQ(ents[0].n_kvs, 3);
    ASSERT_MEM_EQ(ents[0].kvs[0].key, ents[0].kvs[0].key_len, "\x02r\x00", 3);
    ASSERT_MEM_EQ(ents[0].kvs[0].value, ents[0].kvs[0].value_len, "v2", 2);
    ASSERT_MEM_EQ(ents[0].kvs[1].key, ents[0].kvs[1].key_len, "\x02r\x00\x15\x01", 5);
    ASSERT_MEM_EQ(ents[0].kvs[2].key, ents[0].kvs[2].key_len, "\x02r\x00\xff\xff", 5);
    ASSERT_MEM_EQ(ents[0].index.value, ents[0].index.value_len, "v6", 2);
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.12: the budget boundary: a batch starts only while remaining > 0, so a target equal
 * to the first entry's cost maps exactly one entry and one byte more maps two. And a mapper
 * whose P is empty reads the whole normal keyspace ["", "\xff"). */
TEST(mapped_2_12_budget_boundary_and_empty_prefix) {
    rl__storage *st = open_mem();
    rl_arena a;
    rl__mapper *m = NULL;
    rl__mapped_entry *ents = NULL;
    int n = 0, more = 0;
    rl_buf k, v;
    rl__mapped_options o = {0};
    rl__arena_init(&a, 0);
    rl__buf_init(&k);
    rl__buf_init(&v);
    mb_init(&g_mb);
    /* Index entries (1)..(3) -> "", records ("r", i) -> 1000 bytes. */
    for (int i = 1; i <= 3; i++) {
        rl__buf_reset(&k);
        rl__buf_reset(&v);
        rl__buf_append_byte(&k, 0x15);
        rl__buf_append_byte(&k, (uint8_t)i);
        mb_set(&g_mb, &k, &v);
        rl__buf_reset(&k);
        rl__buf_append(&k, LIT("\x02r\x00\x15"));
        rl__buf_append_byte(&k, (uint8_t)i);
        for (int j = 0; j < 1000; j++) rl__buf_append_byte(&v, (uint8_t)j);
        mb_set(&g_mb, &k, &v);
    }
    mb_apply(&g_mb, st, 4);
    ASSERT_OK(rl__mapper_parse(LIT("\x02r\x00\x02{K[0]}\x00"), &a, &m));
    const long c0 = 2 + 5 + 1000; /* index key + record key + record value */
    o.batch = 1;
    o.target_bytes = c0;
    ASSERT_OK(rl__storage_get_mapped_range(st, 4, "\x15", 1, "\x16", 1, m, &o, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(more, 1);
    ASSERT_EQ(ents[0].n_kvs, 1);
    o.target_bytes = c0 + 1;
    ASSERT_OK(rl__storage_get_mapped_range(st, 4, "\x15", 1, "\x16", 1, m, &o, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(more, 1);
    o.target_bytes = 2 * c0 + 1;
    ASSERT_OK(rl__storage_get_mapped_range(st, 4, "\x15", 1, "\x16", 1, m, &o, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 3);
    ASSERT_EQ(more, 0);
    /* Batch 2 with target c0: the first batch maps two entries (overshoot), then stops. */
    o.batch = 2;
    o.target_bytes = c0;
    ASSERT_OK(rl__storage_get_mapped_range(st, 4, "\x15", 1, "\x16", 1, m, &o, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 2);
    ASSERT_EQ(more, 1);

    /* Empty P, range mode: every key below \xff, the index entries included. */
    ASSERT_OK(rl__mapper_parse(LIT("\x02{...}\x00"), &a, &m));
    ASSERT_OK(
        rl__storage_get_mapped_range(st, 4, "\x15\x02", 2, "\x15\x03", 2, m, NULL, NULL, NULL, &a, &ents, &n, &more));
    ASSERT_EQ(n, 1);
    ASSERT_EQ(ents[0].begin_len, 0);
    ASSERT_MEM_EQ(ents[0].end, ents[0].end_len, "\xff", 1);
    ASSERT_EQ(ents[0].n_kvs, 6);
    ASSERT_MEM_EQ(ents[0].kvs[0].key, ents[0].kvs[0].key_len, "\x02r\x00\x15\x01", 5);
    ASSERT_MEM_EQ(ents[0].kvs[5].key, ents[0].kvs[5].key_len, "\x15\x03", 2);
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__arena_release(&a);
    rl__storage_close(st);
}

/* mapped-2.13: allocation failures during a mapped read give RL_E_OUT_OF_MEMORY and leak
 * nothing; with enough memory the result matches the model. */
TEST(mapped_2_13_allocation_failures) {
    model md;
    rl_buf b, e;
    mrec ord[MAXREC];
    int ok_seen = 0;
    fixed_model(&md);
    rl__storage *st = load_model(&md, 10);
    rl__buf_init(&b);
    rl__buf_init(&e);
    index_range(&b, &e);
    for (long n = 0; n < 5000 && !ok_seen; n++) {
        rl_arena a, ma;
        rl__mapped_entry *ents = NULL;
        int cnt = 0, more = 0, rc;
        rl__arena_init(&a, 256);
        rl__arena_init(&ma, 0);
        rl__mapper *m = mapper_range(&ma);
        rl_alloc_fail_after(n);
        rc = rl__storage_get_mapped_range(st, 10, b.data, b.len, e.data, e.len, m, NULL, NULL, NULL, &a, &ents, &cnt,
                                          &more);
        rl_alloc_fail_after(-1);
        if (rc == RL_OK) {
            ASSERT_EQ(cnt, model_order(&md, 0, ord));
            for (int i = 0; i < cnt; i++) check_entry(&ents[i], &ord[i], 1, 1 << 30);
            ok_seen = 1;
        } else {
            ASSERT_RC(rc, RL_E_OUT_OF_MEMORY);
            ASSERT_EQ(cnt, 0);
        }
        rl__arena_release(&a);
        rl__arena_release(&ma);
    }
    ASSERT_TRUE(ok_seen);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__storage_close(st);
}

/* mapped-2.10: randomized: random records, limits, budgets, batches, directions and secondary
 * row limits, paged to the end and compared with the model. Prints its seed. */
TEST(mapped_2_10_randomized) {
    uint64_t seed = rl_test_seed(), rs = seed;
    for (int round = 0; round < 20; round++) {
        model md;
        md.n = 1 + (int)rl_test_rand_below(&rs, MAXREC - 1);
        for (int i = 0; i < md.n; i++) {
            mrec *r = &md.r[i];
            r->pk = (int64_t)i * 37 - 200 + (int64_t)rl_test_rand_below(&rs, 30);
            r->price = (int64_t)rl_test_rand_below(&rs, 20) - 5;
            r->chunks = rl_test_rand_below(&rs, 3) ? 0 : 1 + (int)rl_test_rand_below(&rs, 6);
            r->has_version = (int)rl_test_rand_below(&rs, 2);
            r->has_record = rl_test_rand_below(&rs, 8) != 0;
            r->gen = (int)rl_test_rand_below(&rs, 5);
        }
        rl__storage *st = load_model(&md, 100);
        rl_arena a;
        rl__mapped_options o = {0};
        rl__arena_init(&a, 0);
        o.limit = (int)rl_test_rand_below(&rs, 3) ? 0 : 1 + (int)rl_test_rand_below(&rs, 20);
        o.target_bytes = rl_test_rand_below(&rs, 2) ? 0 : 1 + (long)rl_test_rand_below(&rs, 3000);
        o.batch = (int)rl_test_rand_below(&rs, 12);
        o.reverse = (int)rl_test_rand_below(&rs, 2);
        o.secondary_row_limit = (int)rl_test_rand_below(&rs, 8);
        run_paged(st, 100, &md, rl_test_rand_below(&rs, 2) ? mapper_range(&a) : mapper_point(&a), &o);
        rl__arena_release(&a);
        rl__storage_close(st);
    }
}

/* mapped-2.14: the key memo (the leading elements every key of one read shares, walked once):
 * keys made of elements whose encodings are prefixes of one another or end with the bytes
 * that decide where an element ends (escaped nulls in strings and nested tuples, truncated
 * and invalid codes), read over random ranges whose bounds share a prefix that cuts inside,
 * at and one byte past element ends. Each read must equal the reference built per key with
 * rl__mapper_construct (the plain walk): the same P for every entry, or the same first
 * error. */
TEST(mapped_2_14_shared_prefix_memo) {
    static const struct {
        const char *b;
        size_t n;
    } pal[] = {
        {"\x02"
         "ab\x00",
         4},
        {"\x02"
         "ab\x00\xff\x00",
         6},
        {"\x02"
         "ab\x00\xff"
         "c\x00",
         7},
        {"\x02"
         "a\x00",
         3},
        {"\x01\x00", 2},
        {"\x05\x15\x01\x00", 4},
        {"\x05\x00\xff\x00", 4},
        {"\x05\x02x\x00\x00", 5},
        {"\x15\x01", 2},
        {"\x15\x02", 2},
        {"\x16\x01\x00", 3},
        {"\x00", 1},
        {"\x02"
         "ab",
         3},
        {"\x99", 1},
        {"\x15", 1},
        {"\x02"
         "ab\x00\xff",
         5},
    };
    const size_t npal = sizeof pal / sizeof pal[0];
    uint64_t seed = rl_test_seed(), rs = seed | 1;
    rl_buf keys[64], k, v, bb, eb, mp;
    for (int i = 0; i < 64; i++) rl__buf_init(&keys[i]);
    rl__buf_init(&k);
    rl__buf_init(&v);
    rl__buf_init(&bb);
    rl__buf_init(&eb);
    rl__buf_init(&mp);
    int seen_ok = 0, seen_err = 0, seen_long_shared = 0;
    for (int round = 0; round < 150; round++) {
        rl__storage *st = open_mem();
        mb_init(&g_mb);
        /* A common head for most keys, so ranges share whole elements. */
        int head = (int)rl_test_rand_below(&rs, (uint64_t)npal);
        for (int i = 0; i < 64; i++) {
            rl__buf_reset(&keys[i]);
            if (rl_test_rand_below(&rs, 4)) rl__buf_append(&keys[i], pal[head].b, pal[head].n);
            int ne = 1 + (int)rl_test_rand_below(&rs, 4);
            for (int j = 0; j < ne; j++) {
                /* Mostly valid elements; invalid ones now and then. */
                size_t x =
                    rl_test_rand_below(&rs, 10) ? rl_test_rand_below(&rs, 12) : rl_test_rand_below(&rs, (uint64_t)npal);
                rl__buf_append(&keys[i], pal[x].b, pal[x].n);
            }
            rl__buf_reset(&v);
            rl__buf_append(&v, "\x15\x01", 2);
            mb_set(&g_mb, &keys[i], &v);
        }
        mb_apply(&g_mb, st, 5);
        /* The mapper: ("r", {K[i]}..., maybe {...}). */
        rl_arena ma;
        rl__mapper *m = NULL;
        rl__tuple_packer pk;
        rl__arena_init(&ma, 0);
        rl__buf_reset(&mp);
        rl__tuple_packer_init(&pk, &mp);
        rl__tuple_pack_string(&pk, "r", 1);
        int nph = 1 + (int)rl_test_rand_below(&rs, 2);
        for (int j = 0; j < nph; j++) {
            char ph[16];
            int len = snprintf(ph, sizeof ph, "{K[%d]}", (int)rl_test_rand_below(&rs, 5));
            rl__tuple_pack_string(&pk, ph, (size_t)len);
        }
        if (rl_test_rand_below(&rs, 2)) rl__tuple_pack_string(&pk, "{...}", 5);
        ASSERT_OK(rl__mapper_parse(mp.data, mp.len, &ma, &m));
        for (int q = 0; q < 20; q++) {
            /* Bounds: stored keys, cut at a random length or extended by a byte. */
            rl_buf *bnd[2] = {&bb, &eb};
            for (int j = 0; j < 2; j++) {
                const rl_buf *src = &keys[rl_test_rand_below(&rs, 64)];
                rl__buf_reset(bnd[j]);
                size_t cut = src->len;
                int how = (int)rl_test_rand_below(&rs, 3);
                if (how == 1) cut = (size_t)rl_test_rand_below(&rs, src->len + 1);
                rl__buf_append(bnd[j], src->data, cut);
                if (how == 2) rl__buf_append_byte(bnd[j], (uint8_t)rl_test_rand_below(&rs, 256));
            }
            if (rl__bytes_cmp(bb.data, bb.len, eb.data, eb.len) > 0) {
                rl_buf t = bb;
                bb = eb;
                eb = t;
            }
            int reverse = (int)rl_test_rand_below(&rs, 2);
            /* Reference: the range's keys, each mapped on its own. */
            rl_arena ra, ga;
            rl__arena_init(&ra, 0);
            rl__arena_init(&ga, 0);
            rl_keyvalue *kvs = NULL;
            int nk = 0, more = 0;
            ASSERT_OK(
                rl__storage_get_range(st, 5, bb.data, bb.len, eb.data, eb.len, 0, 0, reverse, &ra, &kvs, &nk, &more));
            int wrc = RL_OK;
            size_t shared = 0;
            while (shared < bb.len && shared < eb.len && bb.data[shared] == eb.data[shared]) shared++;
            if (shared > 4 && nk > 1) seen_long_shared++;
            rl__mapped_entry *ents = NULL;
            int n = 0;
            int grc = rl__storage_get_mapped_range(st, 5, bb.data, bb.len, eb.data, eb.len, m,
                                                   &(rl__mapped_options){.reverse = reverse}, NULL, NULL, &ga, &ents,
                                                   &n, &more);
            for (int i = 0; i < nk && wrc == RL_OK; i++) {
                rl__buf_reset(&k);
                wrc = rl__mapper_construct(m, kvs[i].key, kvs[i].key_len, kvs[i].value, kvs[i].value_len, &k);
                if (wrc == RL_OK && grc == RL_OK) {
                    ASSERT_TRUE(i < n);
                    ASSERT_MEM_EQ(ents[i].begin, ents[i].begin_len, k.data, k.len);
                }
            }
            if (grc != wrc)
                fprintf(stderr, "round %d q %d: got %s want %s (seed %llu)\n", round, q, rl_error_name(grc),
                        rl_error_name(wrc), (unsigned long long)seed);
            ASSERT_RC(grc, wrc);
            if (grc == RL_OK) {
                ASSERT_EQ(n, nk);
                seen_ok++;
            } else {
                seen_err++;
            }
            rl__arena_release(&ra);
            rl__arena_release(&ga);
        }
        rl__arena_release(&ma);
        rl__storage_close(st);
    }
    /* The generator must reach both outcomes and bounds sharing whole elements. */
    ASSERT_TRUE(seen_ok > 100);
    ASSERT_TRUE(seen_err > 100);
    ASSERT_TRUE(seen_long_shared > 100);
    for (int i = 0; i < 64; i++) rl__buf_release(&keys[i]);
    rl__buf_release(&k);
    rl__buf_release(&v);
    rl__buf_release(&bb);
    rl__buf_release(&eb);
    rl__buf_release(&mp);
}

RL_TEST_MAIN(T(mapped_1_1_not_tuple), T(mapped_1_2_bad_index_parse), T(mapped_1_3_bad_index_out_of_range),
             T(mapped_1_4_range_descriptor), T(mapped_1_5_key_value_not_tuple), T(mapped_1_6_escapes),
             T(mapped_1_7_literal_only_ignores_key_value), T(mapped_1_8_embedded_placeholder_is_literal),
             T(mapped_1_9_non_strings_verbatim), T(mapped_1_10_raw_splicing), T(mapped_1_11_mapper_owns_its_bytes),
             T(mapped_1_12_allocation_failures), T(mapped_1_13_one_walk_construct_vs_reference),
             T(mapped_1_15_quick_elements_vs_reference), T(mapped_2_1_range_mode), T(mapped_2_2_point_mode),
             T(mapped_2_3_reverse), T(mapped_2_4_secondary_limits), T(mapped_2_5_row_limits), T(mapped_2_6_byte_budget),
             T(mapped_2_7_mvcc), T(mapped_2_8_secondary_fn), T(mapped_2_9_mapper_errors_in_read),
             T(mapped_2_10_randomized), T(mapped_2_11_range_includes_prefix_key),
             T(mapped_2_12_budget_boundary_and_empty_prefix), T(mapped_2_13_allocation_failures),
             T(mapped_2_14_shared_prefix_memo), T(mapped_2_15_hook_read_here), T(mapped_2_16_hook_page_end))
