/* test_tuple.c — the tuple codec against the reference vectors (tests/data/tuple, made by an
 * independent implementation), plus unit tests of the iterator, packers, ranges, strinc,
 * subspaces, versionstamps, decimal conversion and the human form.
 *
 * IDs: tuple-1.x vectors, tuple-2.x decoder/iterator, tuple-3.x packers, tuple-4.x ranges and
 * subspaces, tuple-5.x versionstamps, tuple-6.x text forms. */
#include "test.h"

#include <math.h>
#include <stdlib.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* Decode hex text into a fresh buffer (asserts it is valid hex). */
static void hex_to(rl_buf *b, const char *hex) {
    rl__buf_reset(b);
    ASSERT_OK(rl__bytes_from_hex(b, hex, strlen(hex)));
}

/* Compare an encoding with expected hex. */
static void assert_hex(const rl_buf *b, const char *want) {
    rl_buf h;
    rl__buf_init(&h);
    rl__buf_append_hex(&h, b->data, b->len);
    if (strcmp((const char *)h.data, want)) fail_msg("got %s, want %s", (const char *)h.data, want);
    rl__buf_release(&h);
}

/* Run fn over every line of a data file; fails if the file is missing. Returns the line count. */
static size_t for_each_line(const char *rel, void (*fn)(json_t *obj, size_t lineno)) {
    const char *path = rl_test_data_path(rel);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("missing test vectors %s", path);
    char *line = NULL;
    size_t cap = 0, n = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) > 0) {
        json_error_t err;
        json_t *o = json_loadb(line, (size_t)got, JSON_ALLOW_NUL, &err);
        if (!o) fail_msg("%s:%zu: bad JSON: %s", rel, n + 1, err.text);
        fn(o, ++n);
        json_decref(o);
    }
    free(line);
    fclose(f);
    return n;
}

/* ---- tuple-1: vectors -------------------------------------------------------------------- */

static void check_encode_line(json_t *o, size_t lineno) {
    json_t *tuple = json_object_get(o, "tuple");
    const char *packed = json_string_value(json_object_get(o, "packed"));
    rl_buf enc, want;
    json_t *back = NULL;
    if (!tuple || !packed) fail_msg("encode.jsonl:%zu: missing fields", lineno);
    rl__buf_init(&enc);
    rl__buf_init(&want);
    /* Encoding equals `packed`. */
    ASSERT_OK(rl__tuple_from_json(tuple, &enc, NULL));
    hex_to(&want, packed);
    if (enc.len != want.len || memcmp(enc.data, want.data, enc.len))
        fail_msg("encode.jsonl:%zu: encoding differs from %s", lineno, packed);
    /* Decoding gives back `tuple`. */
    ASSERT_OK(rl__tuple_to_json(want.data, want.len, &back, NULL));
    if (!json_equal(back, tuple)) {
        char *s = json_dumps(back, JSON_COMPACT);
        fail_msg("encode.jsonl:%zu: decoded %s", lineno, s);
    }
    /* The human form renders every valid tuple. */
    rl__buf_reset(&enc);
    ASSERT_OK(rl__tuple_print(want.data, want.len, &enc, NULL));
    ASSERT_TRUE(enc.len >= 2 && enc.data[0] == '(' && enc.data[enc.len - 1] == ')');
    json_decref(back);
    rl__buf_release(&enc);
    rl__buf_release(&want);
}

/* tuple-1.1: all 400 encode vectors: encoding, decoding, printing. */
TEST(tuple_1_1_encode_vectors) {
    size_t n = for_each_line("tuple/encode.jsonl", check_encode_line);
    ASSERT_EQ(n, 400);
}

static size_t n_valid, n_invalid;

static void check_decode_line(json_t *o, size_t lineno) {
    const char *packed = json_string_value(json_object_get(o, "packed"));
    json_t *valid = json_object_get(o, "valid");
    rl_buf in, re;
    json_t *got = NULL;
    size_t count = 0;
    if (!packed || !json_is_boolean(valid)) fail_msg("decode.jsonl:%zu: missing fields", lineno);
    rl__buf_init(&in);
    rl__buf_init(&re);
    hex_to(&in, packed);
    /* Copy to an exact-size heap block so ASan catches any read past the end. */
    uint8_t *exact = malloc(in.len ? in.len : 1);
    memcpy(exact, in.data, in.len);
    int rc = rl__tuple_to_json(exact, in.len, &got, NULL);
    int vrc = rl__tuple_validate(exact, in.len, &count);
    if (json_is_true(valid)) {
        n_valid++;
        if (rc) fail_msg("decode.jsonl:%zu: %s refused: %s", lineno, packed, rl_error_name(rc));
        ASSERT_OK(vrc);
        ASSERT_EQ(count, json_array_size(got));
        if (!json_equal(got, json_object_get(o, "tuple")))
            fail_msg("decode.jsonl:%zu: %s decoded differently", lineno, packed);
        /* Valid encodings are canonical: they re-encode to the same bytes. */
        ASSERT_OK(rl__tuple_from_json(got, &re, NULL));
        ASSERT_MEM_EQ(re.data, re.len, in.data, in.len);
    } else {
        n_invalid++;
        if (rc == RL_OK) fail_msg("decode.jsonl:%zu: %s accepted", lineno, packed);
        ASSERT_NULL(got);
        ASSERT_TRUE(rc == RL_E_TUPLE_TRUNCATED || rc == RL_E_TUPLE_MALFORMED || rc == RL_E_TUPLE_UNSUPPORTED_TYPE);
        ASSERT_EQ(vrc, rc);
        rl__buf_reset(&re);
        ASSERT_EQ(rl__tuple_print(exact, in.len, &re, NULL), rc);
    }
    json_decref(got);
    free(exact);
    rl__buf_release(&in);
    rl__buf_release(&re);
}

/* tuple-1.2: all 706 decode vectors: valid ones decode to `tuple`, invalid ones are refused. */
TEST(tuple_1_2_decode_vectors) {
    n_valid = n_invalid = 0;
    size_t n = for_each_line("tuple/decode.jsonl", check_decode_line);
    ASSERT_EQ(n, 706);
    ASSERT_EQ(n_valid + n_invalid, 706);
    ASSERT_EQ(n_invalid, 415);
}

/* ---- tuple-2: decoder -------------------------------------------------------------------- */

/* Decode hex and expect rc from validate. */
static int validate_hex(const char *hex) {
    rl_buf b;
    rl__buf_init(&b);
    hex_to(&b, hex);
    uint8_t *exact = malloc(b.len ? b.len : 1);
    memcpy(exact, b.data, b.len);
    int rc = rl__tuple_validate(exact, b.len, NULL);
    free(exact);
    rl__buf_release(&b);
    return rc;
}

/* tuple-2.1: non-canonical and malformed encodings are refused with the right code. */
TEST(tuple_2_1_refusals) {
    ASSERT_OK(validate_hex(""));
    ASSERT_OK(validate_hex("1501"));
    ASSERT_RC(validate_hex("1500"), RL_E_TUPLE_MALFORMED); /* leading zero */
    ASSERT_RC(validate_hex("13ff"), RL_E_TUPLE_MALFORMED); /* negative zero */
    ASSERT_RC(validate_hex("1d0801"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("1d080102030405060708"), RL_E_TUPLE_MALFORMED); /* short: use 0x1c */
    ASSERT_RC(validate_hex("1d09000102030405060708"), RL_E_TUPLE_MALFORMED);
    ASSERT_OK(validate_hex("1d09010102030405060708"));
    ASSERT_OK(validate_hex("0bf6fefefdfcfbfaf9f8f7"));
    ASSERT_RC(validate_hex("0bf6fffefdfcfbfaf9f8f7"), RL_E_TUPLE_MALFORMED);
    ASSERT_RC(validate_hex("0b"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("0161"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("016100"), RL_OK);
    ASSERT_RC(validate_hex("0200ff"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("02c000"), RL_E_TUPLE_MALFORMED);       /* overlong UTF-8 */
    ASSERT_RC(validate_hex("02eda08000"), RL_E_TUPLE_MALFORMED);   /* surrogate */
    ASSERT_RC(validate_hex("02f490808000"), RL_E_TUPLE_MALFORMED); /* > U+10FFFF */
    ASSERT_OK(validate_hex("02f09f988000"));
    ASSERT_RC(validate_hex("05"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("0500ff"), RL_E_TUPLE_TRUNCATED);
    ASSERT_OK(validate_hex("0500ff00"));
    ASSERT_RC(validate_hex("00ff"), RL_E_TUPLE_UNSUPPORTED_TYPE);
    ASSERT_RC(validate_hex("20000000"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("21"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("30"), RL_E_TUPLE_TRUNCATED);
    ASSERT_RC(validate_hex("33ffffffffffffffffffffff"), RL_E_TUPLE_TRUNCATED);
    for (int c = 0; c < 256; c++) {
        int known = c == 0 || c == 1 || c == 2 || c == 5 || (c >= 0x0b && c <= 0x1d) || c == 0x20 || c == 0x21 ||
                    c == 0x26 || c == 0x27 || c == 0x30 || c == 0x33;
        uint8_t b = (uint8_t)c;
        int rc = rl__tuple_validate(&b, 1, NULL);
        if (!known) ASSERT_RC(rc, RL_E_TUPLE_UNSUPPORTED_TYPE);
        else ASSERT_NE(rc, RL_E_TUPLE_UNSUPPORTED_TYPE);
    }
}

/* tuple-2.2: iterating: element fields, nested iteration, the iterator stays at an error. */
TEST(tuple_2_2_iterate) {
    rl_buf b, u;
    rl__tuple_iter it, sub;
    rl__tuple_elem e, n;
    rl__buf_init(&b);
    rl__buf_init(&u);
    /* (1, b"a\0b", ("x", None), -1, None) then a bad byte */
    hex_to(&b, "1501016100ff620005027800"
               "00ff"
               "00"
               "00"
               "13fe"
               "ee");
    rl__tuple_iter_init(&it, b.data, b.len);
    ASSERT_OK(rl__tuple_iter_next(&it, &e));
    ASSERT_EQ(e.type, RL_TT_INT);
    ASSERT_TRUE(e.fits_i64);
    ASSERT_EQ(e.i, 1);
    ASSERT_EQ(e.raw_len, 2);
    ASSERT_OK(rl__tuple_iter_next(&it, &e));
    ASSERT_EQ(e.type, RL_TT_BYTES);
    ASSERT_TRUE(e.has_escapes);
    rl__tuple_elem_unescape(&e, &u);
    ASSERT_MEM_EQ(u.data, u.len, "a\0b", 3);
    ASSERT_OK(rl__tuple_iter_next(&it, &e));
    ASSERT_EQ(e.type, RL_TT_NESTED);
    ASSERT_EQ(e.raw_len, 7);
    rl__tuple_iter_init_nested(&sub, &e);
    ASSERT_OK(rl__tuple_iter_next(&sub, &n));
    ASSERT_EQ(n.type, RL_TT_STRING);
    ASSERT_FALSE(n.has_escapes);
    ASSERT_MEM_EQ(n.payload, n.payload_len, "x", 1);
    ASSERT_OK(rl__tuple_iter_next(&sub, &n));
    ASSERT_EQ(n.type, RL_TT_NULL);
    ASSERT_EQ(n.raw_len, 2);
    ASSERT_RC(rl__tuple_iter_next(&sub, &n), RL_E_NOT_FOUND);
    ASSERT_OK(rl__tuple_iter_next(&it, &e));
    ASSERT_EQ(e.type, RL_TT_NULL);
    ASSERT_EQ(e.raw_len, 1);
    ASSERT_OK(rl__tuple_iter_next(&it, &e));
    ASSERT_EQ(e.i, -1);
    ASSERT_TRUE(e.is_negative);
    const uint8_t *at = it.p;
    ASSERT_RC(rl__tuple_iter_next(&it, &e), RL_E_TUPLE_UNSUPPORTED_TYPE);
    ASSERT_TRUE(it.p == at);
    ASSERT_RC(rl__tuple_iter_next(&it, &e), RL_E_TUPLE_UNSUPPORTED_TYPE);
    /* rl__tuple_get */
    ASSERT_OK(rl__tuple_get(b.data, b.len, 3, &e));
    ASSERT_EQ(e.type, RL_TT_NULL);
    ASSERT_RC(rl__tuple_get(b.data, b.len - 1, 9, &e), RL_E_NOT_FOUND);
    rl__buf_release(&b);
    rl__buf_release(&u);
}

/* tuple-2.3: integer edges: int64/uint64 limits, fits_i64, bigint magnitudes. */
TEST(tuple_2_3_int_edges) {
    static const struct {
        const char *hex;
        int fits;
        int64_t v;
        int neg;
        const char *mag;
    } cases[] = {
        {"14", 1, 0, 0, ""},
        {"1c7fffffffffffffff", 1, INT64_MAX, 0, "7fffffffffffffff"},
        {"1c8000000000000000", 0, 0, 0, "8000000000000000"},
        {"1cffffffffffffffff", 0, 0, 0, "ffffffffffffffff"},
        {"0c7fffffffffffffff", 1, INT64_MIN, 1, "8000000000000000"},
        {"0c7ffffffffffffffe", 0, 0, 1, "8000000000000001"},
        {"0c0000000000000000", 0, 0, 1, "ffffffffffffffff"},
        {"1d09010000000000000000", 0, 0, 0, "010000000000000000"},
        {"0bf6fefffffffffffffffe", 0, 0, 1, "010000000000000001"},
        {"12feff", 1, -256, 1, "0100"},
        {"1300", 1, -255, 1, "ff"},
    };
    rl_buf b, m;
    rl__buf_init(&b);
    rl__buf_init(&m);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl__tuple_elem e;
        int neg;
        hex_to(&b, cases[i].hex);
        ASSERT_OK(rl__tuple_get(b.data, b.len, 0, &e));
        ASSERT_EQ(e.type, RL_TT_INT);
        ASSERT_EQ(e.fits_i64, cases[i].fits);
        if (cases[i].fits) ASSERT_EQ(e.i, cases[i].v);
        ASSERT_EQ(e.is_negative, cases[i].neg);
        rl__buf_reset(&m);
        rl__tuple_elem_bigint(&e, &neg, &m);
        ASSERT_EQ(neg, cases[i].neg);
        assert_hex(&m, cases[i].mag);
    }
    rl__buf_release(&b);
    rl__buf_release(&m);
}

/* tuple-2.4: nesting deeper than RL_TUPLE_MAX_DEPTH is refused; at the limit it is accepted. */
TEST(tuple_2_4_depth_limit) {
    rl_buf b;
    rl__buf_init(&b);
    for (int d = RL_TUPLE_MAX_DEPTH; d <= RL_TUPLE_MAX_DEPTH + 1; d++) {
        rl__buf_reset(&b);
        for (int i = 0; i < d; i++) rl__buf_append_byte(&b, 0x05);
        for (int i = 0; i < d; i++) rl__buf_append_byte(&b, 0x00);
        int rc = rl__tuple_validate(b.data, b.len, NULL);
        if (d <= RL_TUPLE_MAX_DEPTH) ASSERT_OK(rc);
        else ASSERT_RC(rc, RL_E_TUPLE_MALFORMED);
    }
    rl__buf_reset(&b);
    rl__buf_reset(&b);
    for (int i = 0; i < RL_TUPLE_MAX_DEPTH; i++) rl__buf_append_byte(&b, 0x05);
    for (int i = 0; i < RL_TUPLE_MAX_DEPTH; i++) rl__buf_append_byte(&b, 0x00);
    rl_buf out;
    rl__buf_init(&out);
    ASSERT_OK(rl__tuple_print(b.data, b.len, &out, NULL));
    json_t *j = NULL;
    ASSERT_OK(rl__tuple_to_json(b.data, b.len, &j, NULL));
    rl_buf re;
    rl__buf_init(&re);
    ASSERT_OK(rl__tuple_from_json(j, &re, NULL));
    ASSERT_MEM_EQ(re.data, re.len, b.data, b.len);
    json_decref(j);
    /* One level deeper: print and to_json fail with the nesting limit in the caller's detail;
     * a detail given to a call that succeeds, or that fails for another reason, is left alone. */
    rl__buf_reset(&b);
    for (int i = 0; i <= RL_TUPLE_MAX_DEPTH; i++) rl__buf_append_byte(&b, 0x05);
    for (int i = 0; i <= RL_TUPLE_MAX_DEPTH; i++) rl__buf_append_byte(&b, 0x00);
    rl__errdetail d;
    rl__errdetail_init(&d, NULL);
    rl__buf_reset(&out);
    ASSERT_RC(rl__tuple_print(b.data, b.len, &out, &d), RL_E_TUPLE_MALFORMED);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "tuples nest at most 1000 levels deep (RL_TUPLE_MAX_DEPTH)");
    rl__errdetail_init(&d, NULL);
    j = NULL;
    ASSERT_RC(rl__tuple_to_json(b.data, b.len, &j, &d), RL_E_TUPLE_MALFORMED);
    ASSERT_NULL(j);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "tuples nest at most 1000 levels deep (RL_TUPLE_MAX_DEPTH)");
    ASSERT_RC(rl__tuple_print(b.data, b.len, &out, NULL), RL_E_TUPLE_MALFORMED); /* NULL: no detail */
    rl__errdetail_init(&d, NULL);
    static const uint8_t truncated[] = {0x05, 0x15};
    ASSERT_RC(rl__tuple_print(truncated, sizeof truncated, &out, &d), RL_E_TUPLE_TRUNCATED);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "");
    ASSERT_OK(rl__tuple_print(b.data + 1, b.len - 2, &out, &d));
    ASSERT_STR_EQ(rl__errdetail_get(&d), "");
    /* The JSON side: too deep, and an unknown element kind, each with its detail. */
    json_t *deep = json_array(), *inner = deep;
    for (int i = 0; i <= RL_TUPLE_MAX_DEPTH; i++) {
        json_t *arr = json_array();
        json_array_append_new(inner, json_pack("{s:o}", "tuple", arr));
        inner = arr;
    }
    rl__buf_reset(&re);
    ASSERT_RC(rl__tuple_from_json(deep, &re, &d), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl__errdetail_get(&d), "tuples nest at most 1000 levels deep (RL_TUPLE_MAX_DEPTH)");
    json_decref(deep);
    json_t *odd = json_loads("[{\"integer\":\"1\"}]", 0, NULL);
    ASSERT_RC(rl__tuple_from_json(odd, &re, &d), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&d), "unknown element kind \"integer\""));
    json_decref(odd);
    rl__buf_release(&re);
    rl__buf_release(&out);
    rl__buf_release(&b);
}

/* ---- tuple-3: packers -------------------------------------------------------------------- */

/* tuple-3.1: each packer against hand-computed encodings from the tuple spec. */
TEST(tuple_3_1_packers) {
    rl_buf b;
    rl__tuple_packer pk;
    rl__buf_init(&b);
#define CASE(stmt, want)                        \
    do {                                        \
        rl__buf_reset(&b);                      \
        rl__tuple_packer_init(&pk, &b);         \
        stmt;                                   \
        ASSERT_OK(rl__tuple_packer_error(&pk)); \
        assert_hex(&b, want);                   \
    } while (0)
    CASE(rl__tuple_pack_null(&pk), "00");
    CASE(rl__tuple_pack_bytes(&pk, "a\0b", 3), "016100ff6200");
    CASE(rl__tuple_pack_string(&pk, "\xc3\xa9", 2), "02c3a900");
    CASE(rl__tuple_pack_int(&pk, 0), "14");
    CASE(rl__tuple_pack_int(&pk, 1), "1501");
    CASE(rl__tuple_pack_int(&pk, -1), "13fe");
    CASE(rl__tuple_pack_int(&pk, 255), "15ff");
    CASE(rl__tuple_pack_int(&pk, 256), "160100");
    CASE(rl__tuple_pack_int(&pk, -255), "1300");
    CASE(rl__tuple_pack_int(&pk, -256), "12feff");
    CASE(rl__tuple_pack_int(&pk, INT64_MIN), "0c7fffffffffffffff");
    CASE(rl__tuple_pack_int(&pk, INT64_MAX), "1c7fffffffffffffff");
    CASE(rl__tuple_pack_uint(&pk, UINT64_MAX), "1cffffffffffffffff");
    CASE(rl__tuple_pack_bigint(&pk, 1, (const uint8_t *)"\0\0", 2), "14");
    CASE(rl__tuple_pack_bigint(&pk, 0, (const uint8_t *)"\x01\0\0\0\0\0\0\0\0", 9), "1d09010000000000000000");
    CASE(rl__tuple_pack_bigint(&pk, 1, (const uint8_t *)"\x01\0\0\0\0\0\0\0\0", 9), "0bf6feffffffffffffffff");
    CASE(rl__tuple_pack_float(&pk, 1.0f), "20bf800000");
    CASE(rl__tuple_pack_float(&pk, -1.0f), "20407fffff");
    CASE(rl__tuple_pack_double(&pk, 0.0), "218000000000000000");
    CASE(rl__tuple_pack_double(&pk, -0.0), "217fffffffffffffff");
    CASE(rl__tuple_pack_bool(&pk, 0), "26");
    CASE(rl__tuple_pack_bool(&pk, 7), "27");
    CASE(rl__tuple_pack_uuid(&pk, (const uint8_t *)"0123456789abcdef"), "3030313233343536373839616263646566");
    CASE(rl__tuple_pack_versionstamp(&pk, (const uint8_t *)"\1\2\3\4\5\6\7\x08\x09\x0a\0\x05"), "33010203040506070809"
                                                                                                "0a0005");
    CASE((rl__tuple_pack_nested_begin(&pk), rl__tuple_pack_null(&pk), rl__tuple_pack_int(&pk, 1),
          rl__tuple_pack_nested_end(&pk), rl__tuple_pack_null(&pk)),
         "0500ff150100"
         "00");
#undef CASE
    /* An over-long integer is a sticky error and appends nothing. */
    uint8_t big[256];
    memset(big, 1, sizeof big);
    rl__buf_reset(&b);
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_bigint(&pk, 0, big, 256);
    ASSERT_RC(rl__tuple_packer_error(&pk), RL_E_TUPLE_VALUE_OVERFLOW);
    ASSERT_EQ(b.len, 0);
    rl__tuple_pack_bigint(&pk, 0, big, 255);
    ASSERT_EQ(b.len, 257);
    rl__buf_release(&b);
}

/* tuple-3.2: pack_raw re-emits elements, turning nulls into the form of the target depth. */
TEST(tuple_3_2_pack_raw) {
    rl_buf in, out;
    rl__tuple_packer pk;
    rl__tuple_iter it, sub;
    rl__tuple_elem e, n;
    rl__buf_init(&in);
    rl__buf_init(&out);
    hex_to(&in, "00"
                "0500ff1501"
                "00"
                "02610000"); /* (None, (None, 1), "a", None) */
    rl__tuple_packer_init(&pk, &out);
    rl__tuple_iter_init(&it, in.data, in.len);
    rl__tuple_pack_nested_begin(&pk);
    while (rl__tuple_iter_next(&it, &e) == RL_OK) {
        rl__tuple_pack_raw(&pk, &e);
        if (e.type == RL_TT_NESTED) { /* splice the nested elements at top level afterwards */
            rl__tuple_pack_nested_end(&pk);
            rl__tuple_iter_init_nested(&sub, &e);
            while (rl__tuple_iter_next(&sub, &n) == RL_OK) rl__tuple_pack_raw(&pk, &n);
            rl__tuple_pack_nested_begin(&pk);
        }
    }
    rl__tuple_pack_nested_end(&pk);
    ASSERT_OK(rl__tuple_packer_error(&pk));
    /* ((None, (None, 1)), None, 1, ("a", None)) */
    assert_hex(&out, "0500ff0500ff150100"
                     "00"
                     "00"
                     "1501"
                     "05026100"
                     "00ff"
                     "00");
    ASSERT_OK(rl__tuple_validate(out.data, out.len, NULL));
    rl__buf_release(&in);
    rl__buf_release(&out);
}

/* ---- tuple-4: ranges, strinc, subspaces --------------------------------------------------- */

/* tuple-4.1: strinc and range. */
TEST(tuple_4_1_strinc_range) {
    rl_buf o, e;
    rl__buf_init(&o);
    rl__buf_init(&e);
    ASSERT_OK(rl__strinc("ab", 2, &o));
    ASSERT_MEM_EQ(o.data, o.len, "ac", 2);
    rl__buf_reset(&o);
    ASSERT_OK(rl__strinc("a\xff\xff", 3, &o));
    ASSERT_MEM_EQ(o.data, o.len, "b", 1);
    rl__buf_reset(&o);
    ASSERT_OK(rl__strinc("\x01\xfe\xff", 3, &o));
    ASSERT_MEM_EQ(o.data, o.len, "\x01\xff", 2);
    rl__buf_reset(&o);
    ASSERT_RC(rl__strinc("", 0, &o), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__strinc("\xff\xff", 2, &o), RL_E_INVALID_ARGUMENT);
    rl__buf_reset(&o);
    rl__tuple_range("\x15\x01", 2, &o, &e);
    ASSERT_MEM_EQ(o.data, o.len, "\x15\x01\x00", 3);
    ASSERT_MEM_EQ(e.data, e.len, "\x15\x01\xff", 3);
    rl__buf_release(&o);
    rl__buf_release(&e);
}

/* tuple-4.2: subspaces: pack, contains, unpack, range; every packed key sorts inside range. */
TEST(tuple_4_2_subspace) {
    rl__subspace sub;
    rl_buf key, b, e;
    rl__tuple_packer pk;
    rl__tuple_iter it;
    rl__tuple_elem el;
    rl__buf_init(&key);
    rl__buf_init(&b);
    rl__buf_init(&e);
    ASSERT_OK(rl__subspace_init(&sub,
                                "\x02"
                                "app\x00"
                                "\x15\x02",
                                7));
    rl__buf_append_str(&key, "junk");
    rl__subspace_pack_begin(&sub, &key, &pk);
    rl__tuple_pack_int(&pk, 42);
    rl__tuple_pack_string(&pk, "x", 1);
    ASSERT_OK(rl__tuple_packer_error(&pk));
    assert_hex(&key, "0261707000150215"
                     "2a"
                     "027800");
    ASSERT_TRUE(rl__subspace_contains(&sub, key.data, key.len));
    ASSERT_FALSE(rl__subspace_contains(&sub, key.data, 6));
    ASSERT_FALSE(rl__subspace_contains(&sub,
                                       "\x02"
                                       "apq",
                                       4));
    ASSERT_OK(rl__subspace_unpack(&sub, key.data, key.len, &it));
    ASSERT_OK(rl__tuple_iter_next(&it, &el));
    ASSERT_EQ(el.i, 42);
    ASSERT_OK(rl__tuple_iter_next(&it, &el));
    ASSERT_EQ(el.type, RL_TT_STRING);
    ASSERT_RC(rl__tuple_iter_next(&it, &el), RL_E_NOT_FOUND);
    ASSERT_RC(rl__subspace_unpack(&sub,
                                  "\x02"
                                  "apq",
                                  4, &it),
              RL_E_INVALID_ARGUMENT);
    rl__subspace_range(&sub, &b, &e);
    ASSERT_TRUE(rl__bytes_cmp(b.data, b.len, key.data, key.len) < 0);
    ASSERT_TRUE(rl__bytes_cmp(key.data, key.len, e.data, e.len) < 0);
    ASSERT_TRUE(rl__bytes_cmp(b.data, b.len, sub.prefix, sub.len) > 0); /* prefix itself excluded */
    rl__subspace_release(&sub);
    rl__subspace_release(&sub); /* idempotent */
    ASSERT_OK(rl__subspace_init(&sub, "", 0));
    ASSERT_TRUE(rl__subspace_contains(&sub, "", 0));
    rl__subspace_release(&sub);
    rl__buf_release(&key);
    rl__buf_release(&b);
    rl__buf_release(&e);
}

/* ---- tuple-5: versionstamps -------------------------------------------------------------- */

/* tuple-5.1: the suffix for 0, 1 and 2 incomplete versionstamps, with and without a prefix. */
TEST(tuple_5_1_versionstamp_suffix) {
    rl_buf b;
    rl__tuple_packer pk;
    rl__tuple_elem e;
    rl__buf_init(&b);
    /* none */
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_int(&pk, 1);
    rl__tuple_pack_versionstamp(&pk, (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\0\0");
    ASSERT_RC(rl__tuple_versionstamp_suffix(&pk), RL_E_TUPLE_NO_INCOMPLETE_VERSIONSTAMP);
    /* one, after a 3-byte prefix and an element */
    rl__buf_reset(&b);
    rl__buf_append(&b, "pfx", 3);
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_string(&pk, "a", 1);
    rl__tuple_pack_nested_begin(&pk);
    rl__tuple_pack_incomplete_versionstamp(&pk, 0x0102);
    rl__tuple_pack_nested_end(&pk);
    ASSERT_OK(rl__tuple_versionstamp_suffix(&pk));
    /* pfx(3) 02 61 00 (3) 05 (1) 33 (1) -> placeholder at 8 */
    assert_hex(&b, "706678"
                   "026100"
                   "05"
                   "33ffffffffffffffffffff0102"
                   "00"
                   "08000000");
    ASSERT_OK(rl__tuple_get(b.data + 3, b.len - 3 - 4, 1, &e));
    ASSERT_EQ(e.type, RL_TT_NESTED);
    /* two */
    rl__buf_reset(&b);
    rl__tuple_packer_init(&pk, &b);
    rl__tuple_pack_incomplete_versionstamp(&pk, 0);
    rl__tuple_pack_incomplete_versionstamp(&pk, 1);
    size_t len = b.len;
    ASSERT_RC(rl__tuple_versionstamp_suffix(&pk), RL_E_TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS);
    ASSERT_EQ(b.len, len);
    /* at offset 0 of a packer started at a subspace with a 300-byte prefix: two-byte offset */
    rl__subspace sub;
    uint8_t pre[300];
    memset(pre, 0x07, sizeof pre);
    ASSERT_OK(rl__subspace_init(&sub, pre, sizeof pre));
    rl__subspace_pack_begin(&sub, &b, &pk);
    rl__tuple_pack_incomplete_versionstamp(&pk, 9);
    ASSERT_OK(rl__tuple_versionstamp_suffix(&pk));
    ASSERT_EQ(b.len, 300 + 13 + 4);
    ASSERT_MEM_EQ(b.data + b.len - 4, 4, "\x2d\x01\x00\x00", 4); /* 301 */
    rl__subspace_release(&sub);
    rl__buf_release(&b);
}

/* ---- tuple-6: text forms ----------------------------------------------------------------- */

static void assert_print(const char *hex, const char *want) {
    rl_buf b, o;
    rl__buf_init(&b);
    rl__buf_init(&o);
    hex_to(&b, hex);
    ASSERT_OK(rl__tuple_print(b.data, b.len, &o, NULL));
    if (strcmp((const char *)o.data, want)) fail_msg("%s printed %s, want %s", hex, (const char *)o.data, want);
    rl__buf_release(&b);
    rl__buf_release(&o);
}

/* tuple-6.1: the human form of every type. */
TEST(tuple_6_1_print) {
    assert_print("", "()");
    assert_print("1501", "(1,)");
    assert_print("1501"
                 "026100"
                 "0100ff00"
                 "00",
                 "(1, \"a\", b\"\\x00\", None)");
    assert_print("0500ff"
                 "0500"
                 "00"
                 "26"
                 "27",
                 "((None, ()), False, True)");
    assert_print("1d09010000000000000000", "(18446744073709551616,)");
    assert_print("0bf6feffffffffffffffff", "(-18446744073709551616,)");
    assert_print("1cffffffffffffffff", "(18446744073709551615,)");
    assert_print("13fe", "(-1,)");
    assert_print("21bff8000000000000"
                 "217fffffffffffffff"
                 "20bf800000",
                 "(1.5, -0.0, float(1.0))");
    assert_print("21fff0000000000000"
                 "21000fffffffffffff"
                 "21fff8000000000000",
                 "(inf, -inf, nan)");
    assert_print("21bfb999999999999a", "(0.1,)");
    assert_print("01225c7fe900"
                 "02225c0ac3a900",
                 "(b\"\\\"\\\\\\x7f\\xe9\", \"\\\"\\\\\\x0a\xc3\xa9\")");
    assert_print("3000112233445566778899aabbccddeeff", "(UUID(\"00112233-4455-6677-8899-aabbccddeeff\"),)");
    assert_print("33000000000000000001000002"
                 "33ffffffffffffffffffff0007",
                 "(Versionstamp(\"00000000000000000100\", 2), Versionstamp(<incomplete>, 7))");
}

/* tuple-6.2: decimal <-> magnitude conversion against known values and round trips. */
TEST(tuple_6_2_decimal) {
    rl_buf m, d;
    int neg;
    rl__buf_init(&m);
    rl__buf_init(&d);
    static const struct {
        const char *dec, *mag, *canon;
        int neg;
    } cases[] = {
        {"0", "", "0", 0},
        {"-0", "", "0", 0},
        {"007", "07", "7", 0},
        {"255", "ff", "255", 0},
        {"256", "0100", "256", 0},
        {"-1000000000", "3b9aca00", "-1000000000", 1},
        {"18446744073709551616", "010000000000000000", "18446744073709551616", 0},
        {"340282366920938463463374607431768211455", "ffffffffffffffffffffffffffffffff",
         "340282366920938463463374607431768211455", 0},
        {"-1000000000000000000000000000", "033b2e3c9fd0803ce8000000", "-1000000000000000000000000000", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rl__buf_reset(&m);
        rl__buf_reset(&d);
        ASSERT_OK(rl__tuple_dec_to_mag(cases[i].dec, strlen(cases[i].dec), &neg, &m));
        ASSERT_EQ(neg, cases[i].neg);
        assert_hex(&m, cases[i].mag);
        ASSERT_OK(rl__tuple_mag_to_dec(neg, m.data, m.len, &d));
        ASSERT_STR_EQ((const char *)d.data, cases[i].canon);
    }
    ASSERT_RC(rl__tuple_dec_to_mag("", 0, &neg, &m), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__tuple_dec_to_mag("-", 1, &neg, &m), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__tuple_dec_to_mag("+1", 2, &neg, &m), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(rl__tuple_dec_to_mag("1x", 2, &neg, &m), RL_E_INVALID_ARGUMENT);
    /* The largest encodable magnitude (255 bytes of 0xff) round-trips; one more overflows. */
    uint8_t ff[256];
    memset(ff, 0xff, sizeof ff);
    rl__buf_reset(&d);
    ASSERT_OK(rl__tuple_mag_to_dec(0, ff, 255, &d));
    rl__buf_reset(&m);
    ASSERT_OK(rl__tuple_dec_to_mag((const char *)d.data, d.len, &neg, &m));
    ASSERT_MEM_EQ(m.data, m.len, ff, 255);
    rl__buf_reset(&d);
    ASSERT_OK(rl__tuple_mag_to_dec(0, ff, 256, &d));
    ASSERT_RC(rl__tuple_dec_to_mag((const char *)d.data, d.len, &neg, &m), RL_E_TUPLE_VALUE_OVERFLOW);
    rl__buf_release(&m);
    rl__buf_release(&d);
}

/* tuple-6.3: JSON input errors are refused with invalid_argument / value_overflow. */
TEST(tuple_6_3_json_errors) {
    static const char *bad[] = {
        "{}",
        "[1]",
        "[{}]",
        "[{\"int\":1}]",
        "[{\"int\":\"1.5\"}]",
        "[{\"bytes\":\"0\"}]",
        "[{\"bytes\":\"zz\"}]",
        "[{\"float\":\"00\"}]",
        "[{\"double\":\"3ff0\"}]",
        "[{\"uuid\":\"00\"}]",
        "[{\"versionstamp\":\"00\"}]",
        "[{\"tuple\":1}]",
        "[{\"null\":false}]",
        "[{\"bool\":1}]",
        "[{\"string\":2}]",
        "[{\"int\":\"1\",\"bool\":true}]",
        "[{\"what\":1}]",
        "[{\"tuple\":[{\"tuple\":[1]}]}]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        rl_buf b;
        ASSERT_NOT_NULL(j);
        rl__buf_init(&b);
        int rc = rl__tuple_from_json(j, &b, NULL);
        if (rc != RL_E_INVALID_ARGUMENT) fail_msg("%s gave %s", bad[i], rl_error_name(rc));
        rl__buf_release(&b);
        json_decref(j);
    }
    json_t *j = json_pack(
        "[{s:s}]", "int",
        "1"
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000000000000000000000");
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_RC(rl__tuple_from_json(j, &b, NULL), RL_E_TUPLE_VALUE_OVERFLOW);
    rl__buf_release(&b);
    json_decref(j);
}

RL_TEST_MAIN(T(tuple_1_1_encode_vectors), T(tuple_1_2_decode_vectors), T(tuple_2_1_refusals), T(tuple_2_2_iterate),
             T(tuple_2_3_int_edges), T(tuple_2_4_depth_limit), T(tuple_3_1_packers), T(tuple_3_2_pack_raw),
             T(tuple_4_1_strinc_range), T(tuple_4_2_subspace), T(tuple_5_1_versionstamp_suffix), T(tuple_6_1_print),
             T(tuple_6_2_decimal), T(tuple_6_3_json_errors))
