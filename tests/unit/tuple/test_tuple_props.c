/* test_tuple_props.c — randomized properties of the tuple codec (seeds printed; replay with
 * RL_SEED=N):
 *   tuple-7.1  decode(encode(x)) == x and encode(decode(b)) == b for random tuples of every type
 *   tuple-7.2  integer order: byte order of encodings == numeric order, every width up to 40 bytes
 *   tuple-7.3  float/double order: -NaN < -inf < ... < -0.0 < +0.0 < ... < inf < NaN
 *   tuple-7.4  byte and unicode strings with embedded NULs: encoded order == byte order
 *   tuple-7.5  nested tuples with nulls: encoded order == element-wise tuple order
 * The expected orders come from small models written here (C comparisons, memcmp), not from the
 * encoder. */
#include "test.h"

#include <math.h>
#include <stdlib.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

static int sgn(int v) { return (v > 0) - (v < 0); }

/* ---- tuple-7.1 --------------------------------------------------------------------------- */

static json_t *hex_elem(const char *key, uint64_t *st, size_t n) {
    char hex[2 * 64 + 1];
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)rl_test_rand(st);
        hex[2 * i] = digits[b >> 4];
        hex[2 * i + 1] = digits[b & 15];
    }
    hex[2 * n] = 0;
    return json_pack("{s:s}", key, hex);
}

/* A random element in the JSON model form; depth bounds nesting. */
static json_t *rand_elem(uint64_t *st, int depth) {
    switch (rl_test_rand_below(st, depth > 0 ? 11 : 10)) {
    case 0: return json_pack("{s:b}", "null", 1);
    case 1: return json_pack("{s:b}", "bool", (int)rl_test_rand_below(st, 2));
    case 2: return hex_elem("bytes", st, rl_test_rand_below(st, 6));
    case 3: {
        static const char *parts[] = {"a", "", "\xc3\xa9", "\xf0\x9f\x98\x80", "z"};
        char s[32];
        size_t n = 0, k = rl_test_rand_below(st, 5);
        for (size_t i = 0; i < k; i++) {
            size_t r = rl_test_rand_below(st, 6);
            if (r == 5) {
                s[n++] = 0; /* embedded NUL */
            } else {
                memcpy(s + n, parts[r], strlen(parts[r]));
                n += strlen(parts[r]);
            }
        }
        return json_pack("{s:s#}", "string", s, (int)n);
    }
    case 4: {
        /* A random integer of random width: decimal of a random magnitude. */
        uint8_t mag[40];
        size_t n = rl_test_rand_below(st, 41);
        rl_buf d;
        for (size_t i = 0; i < n; i++) mag[i] = (uint8_t)rl_test_rand(st);
        rl__buf_init(&d);
        rl__tuple_mag_to_dec((int)rl_test_rand_below(st, 2), mag, n, &d);
        json_t *o = json_pack("{s:s}", "int", (const char *)d.data);
        rl__buf_release(&d);
        return o;
    }
    case 5: return hex_elem("float", st, 4);
    case 6: return hex_elem("double", st, 8);
    case 7: return hex_elem("uuid", st, 16);
    case 8: return hex_elem("versionstamp", st, 12);
    case 9: {
        char buf[24];
        snprintf(buf, sizeof buf, "%lld", (long long)(int64_t)rl_test_rand(st) >> rl_test_rand_below(st, 64));
        return json_pack("{s:s}", "int", buf);
    }
    default: {
        json_t *arr = json_array();
        size_t k = rl_test_rand_below(st, 4);
        for (size_t i = 0; i < k; i++) json_array_append_new(arr, rand_elem(st, depth - 1));
        return json_pack("{s:o}", "tuple", arr);
    }
    }
}

TEST(tuple_7_1_roundtrip) {
    uint64_t st = rl_test_seed();
    rl_buf enc, re, txt;
    rl__buf_init(&enc);
    rl__buf_init(&re);
    rl__buf_init(&txt);
    for (int iter = 0; iter < 3000; iter++) {
        json_t *t = json_array();
        size_t k = rl_test_rand_below(&st, 6);
        for (size_t i = 0; i < k; i++) json_array_append_new(t, rand_elem(&st, 3));
        rl__buf_reset(&enc);
        ASSERT_OK(rl__tuple_from_json(t, &enc, NULL));
        size_t count = 0;
        ASSERT_OK(rl__tuple_validate(enc.data, enc.len, &count));
        ASSERT_EQ(count, k);
        json_t *back = NULL;
        ASSERT_OK(rl__tuple_to_json(enc.data, enc.len, &back, NULL));
        if (!json_equal(back, t)) {
            char *a = json_dumps(t, JSON_COMPACT), *b = json_dumps(back, JSON_COMPACT);
            fail_msg("round trip: %s -> %s", a, b);
        }
        rl__buf_reset(&re);
        ASSERT_OK(rl__tuple_from_json(back, &re, NULL));
        ASSERT_MEM_EQ(re.data, re.len, enc.data, enc.len);
        rl__buf_reset(&txt);
        ASSERT_OK(rl__tuple_print(enc.data, enc.len, &txt, NULL));
        /* Every proper prefix of a valid encoding is either valid (ends between elements) or
         * refused as truncated; never accepted with different content. */
        for (size_t cut = 0; cut < enc.len; cut++) {
            int rc = rl__tuple_validate(enc.data, cut, NULL);
            ASSERT_TRUE(rc == RL_OK || rc == RL_E_TUPLE_TRUNCATED || rc == RL_E_TUPLE_MALFORMED);
        }
        json_decref(back);
        json_decref(t);
    }
    rl__buf_release(&enc);
    rl__buf_release(&re);
    rl__buf_release(&txt);
}

/* ---- tuple-7.2 --------------------------------------------------------------------------- */

typedef struct {
    int neg;
    uint8_t mag[40]; /* big-endian, no leading zeros, n bytes */
    size_t n;
    uint8_t enc[64];
    size_t enc_len;
} int_case;

/* Numeric compare of the model. */
static int int_cmp(const int_case *a, const int_case *b) {
    int az = a->n == 0, bz = b->n == 0;
    int as = az ? 0 : a->neg ? -1 : 1, bs = bz ? 0 : b->neg ? -1 : 1;
    if (as != bs) return as < bs ? -1 : 1;
    if (as == 0) return 0;
    int mc; /* magnitude compare */
    if (a->n != b->n) mc = a->n < b->n ? -1 : 1;
    else mc = sgn(memcmp(a->mag, b->mag, a->n));
    return as > 0 ? mc : -mc;
}

TEST(tuple_7_2_int_order) {
    uint64_t st = rl_test_seed();
    enum { N = 400 };
    static int_case c[N];
    rl_buf b, m;
    rl__buf_init(&b);
    rl__buf_init(&m);
    for (int i = 0; i < N; i++) {
        /* Widths cluster at the 8/9-byte boundary and small sizes; the first byte is varied
         * near its extremes so that neighbouring widths meet. */
        static const size_t widths[] = {0, 1, 2, 3, 7, 8, 8, 9, 9, 10, 16, 33, 40};
        size_t n = widths[rl_test_rand_below(&st, sizeof widths / sizeof widths[0])];
        c[i].neg = (int)rl_test_rand_below(&st, 2);
        c[i].n = n;
        for (size_t j = 0; j < n; j++) {
            uint64_t r = rl_test_rand_below(&st, 4);
            c[i].mag[j] = r == 0 ? 0xff : r == 1 ? 0x00 : (uint8_t)rl_test_rand(&st);
        }
        if (n && c[i].mag[0] == 0) c[i].mag[0] = rl_test_rand_below(&st, 2) ? 1 : 0x80;
        rl__tuple_packer pk;
        rl__buf_reset(&b);
        rl__tuple_packer_init(&pk, &b);
        /* Feed with random leading zero padding: the packer must strip it. */
        uint8_t padded[48] = {0};
        size_t pad = rl_test_rand_below(&st, 3);
        memcpy(padded + pad, c[i].mag, n);
        rl__tuple_pack_bigint(&pk, c[i].neg, padded, n + pad);
        ASSERT_OK(rl__tuple_packer_error(&pk));
        memcpy(c[i].enc, b.data, b.len);
        c[i].enc_len = b.len;
        /* Decoding gives the same sign and magnitude, and int64 values when they fit. */
        rl__tuple_elem e;
        int neg;
        ASSERT_OK(rl__tuple_get(b.data, b.len, 0, &e));
        ASSERT_EQ(e.raw_len, b.len);
        rl__buf_reset(&m);
        rl__tuple_elem_bigint(&e, &neg, &m);
        ASSERT_MEM_EQ(m.data, m.len, c[i].mag, n);
        if (n) ASSERT_EQ(neg, c[i].neg);
        if (n <= 8) {
            uint64_t v = 0;
            for (size_t j = 0; j < n; j++) v = (v << 8) | c[i].mag[j];
            int fits = c[i].neg ? v <= (UINT64_C(1) << 63) : v <= (uint64_t)INT64_MAX;
            ASSERT_EQ(e.fits_i64, fits);
            if (fits) {
                int64_t want = c[i].neg ? (int64_t)(0 - v) : (int64_t)v;
                ASSERT_EQ(e.i, want);
                /* pack_int agrees with pack_bigint. */
                rl__buf_reset(&m);
                rl__tuple_packer_init(&pk, &m);
                rl__tuple_pack_int(&pk, want);
                ASSERT_MEM_EQ(m.data, m.len, b.data, b.len);
            }
        } else {
            ASSERT_FALSE(e.fits_i64);
        }
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            int want = int_cmp(&c[i], &c[j]);
            int got = sgn(rl__bytes_cmp(c[i].enc, c[i].enc_len, c[j].enc, c[j].enc_len));
            if (want != got) fail_msg("int order: case %d vs %d: model %d, bytes %d", i, j, want, got);
        }
    rl__buf_release(&b);
    rl__buf_release(&m);
}

/* ---- tuple-7.3 --------------------------------------------------------------------------- */

/* Model order of doubles (FoundationDB's total order): NaNs by sign at the two ends, -0.0 before
 * +0.0, otherwise numeric. Two NaNs of the same sign compare by their payload bits. */
static int real_cmp(double a, double b) {
    int an = isnan(a), bn = isnan(b);
    int asg = signbit(a) != 0, bsg = signbit(b) != 0;
    if (an || bn) {
        int ar = an ? (asg ? -2 : 2) : 0, br = bn ? (bsg ? -2 : 2) : 0;
        if (ar != br) return ar < br ? -1 : 1;
        uint64_t x, y; /* same-signed NaNs: by payload, reversed for negative ones */
        memcpy(&x, &a, 8);
        memcpy(&y, &b, 8);
        if (x == y) return 0;
        return (x < y) == !asg ? -1 : 1;
    }
    if (a == 0 && b == 0) return asg == bsg ? 0 : asg ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
}

TEST(tuple_7_3_float_order) {
    uint64_t st = rl_test_seed();
    enum { N = 300 };
    static double v[N];
    static uint8_t enc_d[N][9], enc_f[N][5];
    static const double specials[] = {0.0,  -0.0,   1.0,     -1.0,  INFINITY, -INFINITY, NAN,
                                      -NAN, 5e-324, -5e-324, 1e308, -1e308,   1.5,       -1.5};
    size_t ns = sizeof specials / sizeof specials[0];
    for (int i = 0; i < N; i++) {
        if ((size_t)i < ns) {
            v[i] = specials[i];
        } else if (rl_test_rand_below(&st, 2)) {
            uint64_t bits = rl_test_rand(&st);
            memcpy(&v[i], &bits, 8);
        } else {
            v[i] = ((double)(int64_t)rl_test_rand(&st)) / (double)(1 + rl_test_rand_below(&st, 1000));
        }
    }
    for (int i = 0; i < N; i++) {
        rl_buf b;
        rl__tuple_packer pk;
        rl__tuple_elem e;
        rl__buf_init(&b);
        rl__tuple_packer_init(&pk, &b);
        rl__tuple_pack_double(&pk, v[i]);
        ASSERT_EQ(b.len, 9);
        memcpy(enc_d[i], b.data, 9);
        ASSERT_OK(rl__tuple_get(b.data, b.len, 0, &e));
        ASSERT_EQ(e.type, RL_TT_DOUBLE);
        ASSERT_MEM_EQ(&e.d, 8, &v[i], 8); /* bit-exact, NaN payloads included */
        rl__buf_reset(&b);
        rl__tuple_packer_init(&pk, &b);
        float f = (float)v[i];
        rl__tuple_pack_float(&pk, f);
        ASSERT_EQ(b.len, 5);
        memcpy(enc_f[i], b.data, 5);
        ASSERT_OK(rl__tuple_get(b.data, b.len, 0, &e));
        ASSERT_EQ(e.type, RL_TT_FLOAT);
        ASSERT_MEM_EQ(&e.f, 4, &f, 4);
        rl__buf_release(&b);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            int want = real_cmp(v[i], v[j]);
            int got = sgn(memcmp(enc_d[i], enc_d[j], 9));
            if (want != got) fail_msg("double order %a vs %a: model %d bytes %d", v[i], v[j], want, got);
            float fi = (float)v[i], fj = (float)v[j];
            if (!isnan(fi) && !isnan(fj)) { /* float NaN payloads are not preserved by the cast */
                want = real_cmp(fi, fj);
                got = sgn(memcmp(enc_f[i], enc_f[j], 5));
                if (want != got) fail_msg("float order %a vs %a: model %d bytes %d", (double)fi, (double)fj, want, got);
            }
        }
    /* The ends: -NaN < -inf and inf < NaN; -0.0 < +0.0. */
    ASSERT_TRUE(real_cmp(-NAN, -INFINITY) < 0 && memcmp(enc_d[7], enc_d[5], 9) < 0);
    ASSERT_TRUE(memcmp(enc_d[4], enc_d[6], 9) < 0);
    ASSERT_TRUE(memcmp(enc_d[1], enc_d[0], 9) < 0);
}

/* ---- tuple-7.4 --------------------------------------------------------------------------- */

TEST(tuple_7_4_string_order) {
    uint64_t st = rl_test_seed();
    enum { N = 300 };
    static uint8_t raw[N][8];
    static size_t rlen[N];
    static uint8_t enc[N][24];
    static size_t elen[N];
    static const uint8_t alphabet[] = {0x00, 0x01, 0x7f, 'a', 0xff};
    for (int kind = 0; kind < 2; kind++) {
        for (int i = 0; i < N; i++) {
            rlen[i] = rl_test_rand_below(&st, 8);
            for (size_t j = 0; j < rlen[i]; j++) /* strings stay ASCII, so valid UTF-8 */
                raw[i][j] = alphabet[rl_test_rand_below(&st, kind ? 4 : 5)];
            rl_buf b, u;
            rl__tuple_packer pk;
            rl__tuple_elem e;
            rl__buf_init(&b);
            rl__buf_init(&u);
            rl__tuple_packer_init(&pk, &b);
            if (kind) rl__tuple_pack_string(&pk, (const char *)raw[i], rlen[i]);
            else rl__tuple_pack_bytes(&pk, raw[i], rlen[i]);
            memcpy(enc[i], b.data, b.len);
            elen[i] = b.len;
            ASSERT_OK(rl__tuple_get(b.data, b.len, 0, &e));
            ASSERT_EQ(e.type, kind ? RL_TT_STRING : RL_TT_BYTES);
            rl__tuple_elem_unescape(&e, &u);
            ASSERT_MEM_EQ(u.data, u.len, raw[i], rlen[i]);
            rl__buf_release(&b);
            rl__buf_release(&u);
        }
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                int want = sgn(rl__bytes_cmp(raw[i], rlen[i], raw[j], rlen[j]));
                int got = sgn(rl__bytes_cmp(enc[i], elen[i], enc[j], elen[j]));
                if (want != got) fail_msg("string order kind %d: %d vs %d", kind, i, j);
            }
    }
}

/* ---- tuple-7.5 --------------------------------------------------------------------------- */

/* Model tuples: elements are null, a small int, a byte string from a few with NULs, or a nested
 * model tuple. */
typedef struct mtuple mtuple;
typedef struct {
    int kind; /* 0 null, 1 bytes, 5 nested, 20 int: the order of FoundationDB's type codes */
    int ival;
    int sidx;
    mtuple *sub;
} melem;
struct mtuple {
    size_t n;
    melem e[3];
};

static const char *const mstrings[] = {"", "\0", "\0\0", "a", "a\0"};
static const size_t mstrlen[] = {0, 1, 2, 1, 2};

static int mtuple_cmp(const mtuple *a, const mtuple *b);

static int melem_cmp(const melem *a, const melem *b) {
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    switch (a->kind) {
    case 1: return sgn(rl__bytes_cmp(mstrings[a->sidx], mstrlen[a->sidx], mstrings[b->sidx], mstrlen[b->sidx]));
    case 5: return mtuple_cmp(a->sub, b->sub);
    case 20: return a->ival < b->ival ? -1 : a->ival > b->ival;
    default: return 0;
    }
}

static int mtuple_cmp(const mtuple *a, const mtuple *b) {
    for (size_t i = 0; i < a->n && i < b->n; i++) {
        int c = melem_cmp(&a->e[i], &b->e[i]);
        if (c) return c;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

static mtuple pool[4000];
static size_t pool_used;

static mtuple *rand_mtuple(uint64_t *st, int depth) {
    mtuple *t = &pool[pool_used++];
    t->n = rl_test_rand_below(st, 4);
    for (size_t i = 0; i < t->n; i++) {
        melem *e = &t->e[i];
        uint64_t r = rl_test_rand_below(st, depth > 0 ? 4 : 3);
        e->kind = r == 0 ? 0 : r == 1 ? 1 : r == 2 ? 20 : 5;
        e->ival = (int)rl_test_rand_below(st, 5) - 2;
        e->sidx = (int)rl_test_rand_below(st, 5);
        e->sub = e->kind == 5 ? rand_mtuple(st, depth - 1) : NULL;
    }
    return t;
}

static void pack_mtuple(rl__tuple_packer *pk, const mtuple *t) {
    for (size_t i = 0; i < t->n; i++) {
        const melem *e = &t->e[i];
        switch (e->kind) {
        case 0: rl__tuple_pack_null(pk); break;
        case 1: rl__tuple_pack_bytes(pk, mstrings[e->sidx], mstrlen[e->sidx]); break;
        case 20: rl__tuple_pack_int(pk, e->ival); break;
        default:
            rl__tuple_pack_nested_begin(pk);
            pack_mtuple(pk, e->sub);
            rl__tuple_pack_nested_end(pk);
        }
    }
}

TEST(tuple_7_5_nested_order) {
    uint64_t st = rl_test_seed();
    enum { N = 250 };
    static mtuple *t[N];
    static rl_buf enc[N];
    pool_used = 0;
    for (int i = 0; i < N; i++) {
        rl__tuple_packer pk;
        t[i] = rand_mtuple(&st, 2);
        rl__buf_init(&enc[i]);
        rl__tuple_packer_init(&pk, &enc[i]);
        /* Half of them wrapped in one more nesting level, compared among themselves below. */
        pack_mtuple(&pk, t[i]);
        ASSERT_OK(rl__tuple_packer_error(&pk));
        size_t count;
        ASSERT_OK(rl__tuple_validate(enc[i].data, enc[i].len, &count));
        ASSERT_EQ(count, t[i]->n);
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            int want = mtuple_cmp(t[i], t[j]);
            int got = sgn(rl__bytes_cmp(enc[i].data, enc[i].len, enc[j].data, enc[j].len));
            if (want != got) fail_msg("tuple order %d vs %d: model %d bytes %d", i, j, want, got);
        }
    /* The same tuples each wrapped as one nested element: same order. */
    for (int i = 0; i < N; i++) {
        rl_buf w;
        rl__tuple_packer pk;
        rl__buf_init(&w);
        rl__tuple_packer_init(&pk, &w);
        rl__tuple_pack_nested_begin(&pk);
        pack_mtuple(&pk, t[i]);
        rl__tuple_pack_nested_end(&pk);
        rl__buf_release(&enc[i]);
        enc[i] = w;
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            int want = mtuple_cmp(t[i], t[j]);
            int got = sgn(rl__bytes_cmp(enc[i].data, enc[i].len, enc[j].data, enc[j].len));
            if (want != got) fail_msg("nested order %d vs %d: model %d bytes %d", i, j, want, got);
        }
    for (int i = 0; i < N; i++) rl__buf_release(&enc[i]);
}

RL_TEST_MAIN(T(tuple_7_1_roundtrip), T(tuple_7_2_int_order), T(tuple_7_3_float_order), T(tuple_7_4_string_order),
             T(tuple_7_5_nested_order))
