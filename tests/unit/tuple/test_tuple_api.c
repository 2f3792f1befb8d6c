/* test_tuple_api.c — the public tuple API (reclayer/tuple.h): packing every type with the
 * builder against FoundationDB's encodings, unpacking and the accessors, versionstamped keys,
 * the text forms and the thread's error detail, and every allocation failure.
 *
 * IDs: tuple-9.1 builder encodings, tuple-9.2 unpack and accessors, tuple-9.3 wrong types and
 * bounds, tuple-9.4 versionstamped keys, tuple-9.5 text forms and details, tuple-9.6 builder
 * misuse, tuple-9.7 out of memory everywhere. */
#include "test.h"

#include <math.h>
#include <stdlib.h>

#include "reclayer/alloc.h"
#include "reclayer/tuple.h"

/* The hex of the builder's bytes (static buffer). */
static const char *hex_of(const uint8_t *p, size_t n) {
    static char h[1024];
    for (size_t i = 0; i < n && i < 500; i++) snprintf(h + 2 * i, 3, "%02x", p[i]);
    h[n < 500 ? 2 * n : 1000] = 0;
    return h;
}

static void expect_result(rl_tuple_builder *b, const char *want) {
    const uint8_t *p;
    size_t n;
    ASSERT_OK(rl_tuple_builder_result(b, &p, &n));
    ASSERT_STR_EQ(hex_of(p, n), want);
}

/* tuple-9.1: each type packs to FoundationDB's bytes (the same vectors as the codec's). */
TEST(tuple_9_1_builder_encodings) {
    rl_tuple_builder *b;
    ASSERT_OK(rl_tuple_builder_new(&b));
    expect_result(b, "");
    rl_tuple_add_null(b);
    expect_result(b, "00");
    rl_tuple_builder_clear(b);
    rl_tuple_add_bytes(b, "a\0b", 3);
    expect_result(b, "016100ff6200");
    rl_tuple_builder_clear(b);
    rl_tuple_add_string(b, "hi", 2);
    rl_tuple_add_int(b, 0);
    rl_tuple_add_int(b, -1);
    rl_tuple_add_int(b, 300);
    expect_result(b, "02686900"
                     "14"
                     "13fe"
                     "16012c");
    rl_tuple_builder_clear(b);
    rl_tuple_add_uint(b, UINT64_MAX);
    expect_result(b, "1cffffffffffffffff");
    rl_tuple_builder_clear(b);
    rl_tuple_add_bool(b, 0);
    rl_tuple_add_bool(b, 7);
    rl_tuple_add_float(b, 1.0f);
    rl_tuple_add_double(b, -1.0);
    expect_result(b, "2627"
                     "20bf800000"
                     "21400fffffffffffff");
    rl_tuple_builder_clear(b);
    rl_tuple_nested_begin(b);
    rl_tuple_add_null(b);
    rl_tuple_add_int(b, 1);
    rl_tuple_nested_end(b);
    expect_result(b, "0500ff150100");
    rl_tuple_builder_clear(b);
    rl_tuple_add_raw(b, "\x02pre\x00", 5);
    rl_tuple_add_int(b, 1);
    expect_result(b, "0270726500"
                     "1501");
    rl_tuple_builder_free(b);
    rl_tuple_builder_free(NULL);
}

/* tuple-9.2: unpack copies, and each accessor gives back what was packed. */
TEST(tuple_9_2_unpack_accessors) {
    static const uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const uint8_t vs[12] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 3};
    rl_tuple_builder *b;
    ASSERT_OK(rl_tuple_builder_new(&b));
    rl_tuple_add_null(b);
    rl_tuple_add_bytes(b, "\0\0", 2);
    rl_tuple_add_string(b, "héllo", strlen("héllo"));
    rl_tuple_add_int(b, INT64_MIN);
    rl_tuple_add_uint(b, UINT64_MAX);
    rl_tuple_add_float(b, 2.5f);
    rl_tuple_add_double(b, -0.0);
    rl_tuple_add_bool(b, 1);
    rl_tuple_add_uuid(b, uuid);
    rl_tuple_add_versionstamp(b, vs);
    rl_tuple_nested_begin(b);
    rl_tuple_add_int(b, 42);
    rl_tuple_nested_begin(b);
    rl_tuple_nested_end(b);
    rl_tuple_nested_end(b);
    const uint8_t *p;
    size_t n;
    ASSERT_OK(rl_tuple_builder_result(b, &p, &n));
    uint8_t *copy = malloc(n);
    memcpy(copy, p, n);
    rl_tuple *t;
    ASSERT_OK(rl_tuple_unpack(copy, n, &t));
    memset(copy, 0xee, n); /* the tuple must not point into its input */
    free(copy);
    rl_tuple_builder_free(b);

    ASSERT_EQ(rl_tuple_count(t), 11);
    static const rl_tuple_type types[] = {RL_TUPLE_NULL, RL_TUPLE_BYTES,        RL_TUPLE_STRING, RL_TUPLE_INT,
                                          RL_TUPLE_INT,  RL_TUPLE_FLOAT,        RL_TUPLE_DOUBLE, RL_TUPLE_BOOL,
                                          RL_TUPLE_UUID, RL_TUPLE_VERSIONSTAMP, RL_TUPLE_NESTED};
    for (size_t i = 0; i < 11; i++) ASSERT_EQ(rl_tuple_type_at(t, i), types[i]);
    ASSERT_EQ((int)rl_tuple_type_at(t, 11), -1);
    const uint8_t *d;
    size_t dl;
    ASSERT_OK(rl_tuple_get_bytes(t, 1, &d, &dl));
    ASSERT_EQ(dl, 2);
    ASSERT_EQ(d[0] | d[1], 0);
    ASSERT_OK(rl_tuple_get_bytes(t, 2, &d, &dl));
    ASSERT_EQ(dl, strlen("héllo"));
    ASSERT_TRUE(!memcmp(d, "héllo", dl));
    int64_t v;
    uint64_t u;
    ASSERT_OK(rl_tuple_get_int(t, 3, &v));
    ASSERT_TRUE(v == INT64_MIN);
    ASSERT_EQ(rl_tuple_get_uint(t, 3, &u), RL_E_TUPLE_VALUE_OVERFLOW); /* negative */
    ASSERT_EQ(rl_tuple_get_int(t, 4, &v), RL_E_TUPLE_VALUE_OVERFLOW);  /* above INT64_MAX */
    ASSERT_OK(rl_tuple_get_uint(t, 4, &u));
    ASSERT_TRUE(u == UINT64_MAX);
    float f;
    double dd;
    ASSERT_OK(rl_tuple_get_float(t, 5, &f));
    ASSERT_TRUE(f == 2.5f);
    ASSERT_OK(rl_tuple_get_double(t, 5, &dd)); /* a float widens */
    ASSERT_TRUE(dd == 2.5);
    ASSERT_OK(rl_tuple_get_double(t, 6, &dd));
    ASSERT_TRUE(dd == 0.0 && signbit(dd));
    int bo = 0;
    ASSERT_OK(rl_tuple_get_bool(t, 7, &bo));
    ASSERT_EQ(bo, 1);
    ASSERT_OK(rl_tuple_get_uuid(t, 8, &d));
    ASSERT_TRUE(!memcmp(d, uuid, 16));
    ASSERT_OK(rl_tuple_get_versionstamp(t, 9, &d));
    ASSERT_TRUE(!memcmp(d, vs, 12));
    const rl_tuple *sub, *sub2;
    ASSERT_OK(rl_tuple_get_nested(t, 10, &sub));
    ASSERT_EQ(rl_tuple_count(sub), 2);
    ASSERT_OK(rl_tuple_get_int(sub, 0, &v));
    ASSERT_EQ(v, 42);
    ASSERT_OK(rl_tuple_get_nested(sub, 1, &sub2));
    ASSERT_EQ(rl_tuple_count(sub2), 0);
    rl_tuple_free(t);
    rl_tuple_free(NULL);

    ASSERT_OK(rl_tuple_unpack(NULL, 0, &t)); /* the empty tuple */
    ASSERT_EQ(rl_tuple_count(t), 0);
    rl_tuple_free(t);
}

/* tuple-9.3: an accessor of the wrong type or past the end says invalid_argument and leaves
 * *out alone; decoding errors come back with their codes. */
TEST(tuple_9_3_wrong_types_bounds) {
    rl_tuple *t;
    ASSERT_OK(rl_tuple_unpack("\x15\x01", 2, &t));
    int64_t v = 77;
    const uint8_t *d = NULL;
    size_t dl;
    ASSERT_EQ(rl_tuple_get_int(t, 1, &v), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(v, 77);
    ASSERT_EQ(rl_tuple_get_bytes(t, 0, &d, &dl), RL_E_INVALID_ARGUMENT);
    ASSERT_NULL(d);
    double dd;
    ASSERT_EQ(rl_tuple_get_double(t, 0, &dd), RL_E_INVALID_ARGUMENT);
    const rl_tuple *sub;
    ASSERT_EQ(rl_tuple_get_nested(t, 0, &sub), RL_E_INVALID_ARGUMENT);
    rl_tuple_free(t);

    t = (rl_tuple *)1;
    ASSERT_EQ(rl_tuple_unpack("\x15", 1, &t), RL_E_TUPLE_TRUNCATED);
    ASSERT_NULL(t);
    ASSERT_EQ(rl_tuple_unpack("\x02"
                              "a",
                              2, &t),
              RL_E_TUPLE_TRUNCATED);
    ASSERT_EQ(rl_tuple_unpack("\x15\x00", 2, &t), RL_E_TUPLE_MALFORMED); /* non-canonical integer */
    ASSERT_EQ(rl_tuple_unpack("\x7f", 1, &t), RL_E_TUPLE_UNSUPPORTED_TYPE);
    ASSERT_EQ(rl_tuple_unpack("\x05\x15\x01", 3, &t), RL_E_TUPLE_TRUNCATED); /* nested, unended */
    ASSERT_EQ(rl_tuple_unpack(NULL, 3, &t), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl_tuple_type_name(RL_TUPLE_VERSIONSTAMP), "versionstamp");
    ASSERT_STR_EQ(rl_tuple_type_name((rl_tuple_type)99), "unknown");
}

/* tuple-9.4: a versionstamped key gets the offset of its one incomplete versionstamp. */
TEST(tuple_9_4_versionstamp_key) {
    rl_tuple_builder *b;
    ASSERT_OK(rl_tuple_builder_new(&b));
    const uint8_t *p;
    size_t n;
    rl_tuple_add_string(b, "q", 1);
    ASSERT_EQ(rl_tuple_builder_versionstamp_key(b, &p, &n), RL_E_TUPLE_NO_INCOMPLETE_VERSIONSTAMP);
    rl_tuple_builder_clear(b);
    rl_tuple_add_string(b, "q", 1);
    rl_tuple_add_incomplete_versionstamp(b, 7);
    ASSERT_OK(rl_tuple_builder_versionstamp_key(b, &p, &n));
    ASSERT_STR_EQ(hex_of(p, n), "027100"
                                "33ffffffffffffffffffff0007"
                                "04000000");
    rl_tuple_builder_clear(b);
    rl_tuple_add_incomplete_versionstamp(b, 1);
    rl_tuple_add_incomplete_versionstamp(b, 2);
    ASSERT_EQ(rl_tuple_builder_versionstamp_key(b, &p, &n), RL_E_TUPLE_MANY_INCOMPLETE_VERSIONSTAMPS);
    rl_tuple_builder_free(b);
}

/* tuple-9.5: the human form, JSON both ways, and the detail left for the thread. */
TEST(tuple_9_5_text_and_detail) {
    char *s = NULL;
    ASSERT_OK(rl_tuple_print("\x15\x01\x02"
                             "a\x00\x01\x00\xff\x00\x00",
                             10, &s));
    ASSERT_STR_EQ(s, "(1, \"a\", b\"\\x00\", None)");
    rl_free(s);
    ASSERT_OK(rl_tuple_print(NULL, 0, &s));
    ASSERT_STR_EQ(s, "()");
    rl_free(s);
    ASSERT_OK(rl_tuple_to_json("\x15\x01", 2, &s));
    ASSERT_STR_EQ(s, "[{\"int\":\"1\"}]");
    rl_free(s);
    uint8_t *enc = NULL;
    size_t n = 9;
    ASSERT_OK(rl_tuple_from_json("[]", &enc, &n));
    ASSERT_NULL(enc);
    ASSERT_EQ(n, 0);
    ASSERT_OK(rl_tuple_from_json("[{\"string\":\"a\"},{\"tuple\":[{\"null\":true}]}]", &enc, &n));
    ASSERT_STR_EQ(hex_of(enc, n), "026100"
                                  "0500ff00");
    rl_free(enc);

    ASSERT_EQ(rl_tuple_from_json("[1]", &enc, &n), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "an element must be an object") != NULL);
    ASSERT_EQ(rl_tuple_from_json("{", &enc, &n), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "bad JSON") != NULL);
    ASSERT_EQ(rl_tuple_from_json("{}", &enc, &n), RL_E_INVALID_ARGUMENT);
    ASSERT_STR_EQ(rl_last_error_detail(), "expected a JSON array of elements");
    ASSERT_OK(rl_tuple_print("\x14", 1, &s)); /* a success clears the detail */
    ASSERT_STR_EQ(rl_last_error_detail(), "");
    rl_free(s);

    /* Nesting deeper than the decoder's limit: the detail says so. */
    size_t depth = 1001, len = 2 * depth;
    uint8_t *deep = malloc(len);
    memset(deep, 0x05, depth);
    memset(deep + depth, 0x00, depth);
    rl_tuple *t = NULL;
    ASSERT_EQ(rl_tuple_unpack(deep, len, &t), RL_E_TUPLE_MALFORMED);
    ASSERT_TRUE(strstr(rl_last_error_detail(), "1000") != NULL);
    ASSERT_EQ(rl_tuple_print(deep, len, &s), RL_E_TUPLE_MALFORMED);
    ASSERT_NULL(s);
    free(deep);
}

/* tuple-9.6: builder misuse is an error at the result, not a crash. */
TEST(tuple_9_6_builder_misuse) {
    rl_tuple_builder *b;
    ASSERT_OK(rl_tuple_builder_new(&b));
    const uint8_t *p;
    size_t n;
    rl_tuple_nested_end(b);
    ASSERT_EQ(rl_tuple_builder_result(b, &p, &n), RL_E_INVALID_ARGUMENT);
    rl_tuple_builder_clear(b);
    rl_tuple_nested_begin(b);
    ASSERT_EQ(rl_tuple_builder_result(b, &p, &n), RL_E_INVALID_ARGUMENT); /* still open */
    rl_tuple_nested_end(b);
    expect_result(b, "0500");
    rl_tuple_builder_free(b);
}

/* tuple-9.7: every allocation of every call may fail: RL_E_OUT_OF_MEMORY, nothing leaked (ASan),
 * never a crash. */
TEST(tuple_9_7_out_of_memory) {
    static const char json[] = "[{\"string\":\"abc\"},{\"tuple\":[{\"bytes\":\"00ff\"},{\"int\":\"-5\"}]}]";
    int done = 0;
    for (long k = 0; !done && k < 200; k++) {
        rl_tuple_builder *b = NULL;
        rl_tuple *t = NULL;
        uint8_t *enc = NULL;
        char *s = NULL;
        size_t n;
        const uint8_t *p;
        rl_alloc_fail_after(k);
        int rc = rl_tuple_from_json(json, &enc, &n);
        if (rc == RL_OK) rc = rl_tuple_unpack(enc, n, &t);
        if (rc == RL_OK) rc = rl_tuple_print(enc, n, &s);
        if (rc == RL_OK) rc = rl_tuple_builder_new(&b);
        if (rc == RL_OK) {
            for (int i = 0; i < 100; i++) rl_tuple_add_string(b, "0123456789abcdef", 16);
            rc = rl_tuple_builder_result(b, &p, &n);
        }
        rl_alloc_fail_after(-1);
        if (rc == RL_OK) done = 1;
        else ASSERT_EQ(rc, RL_E_OUT_OF_MEMORY);
        rl_tuple_builder_free(b);
        rl_tuple_free(t);
        rl_free(enc);
        rl_free(s);
    }
    ASSERT_TRUE(done);
}

RL_TEST_MAIN(T(tuple_9_1_builder_encodings), T(tuple_9_2_unpack_accessors), T(tuple_9_3_wrong_types_bounds),
             T(tuple_9_4_versionstamp_key), T(tuple_9_5_text_and_detail), T(tuple_9_6_builder_misuse),
             T(tuple_9_7_out_of_memory))
