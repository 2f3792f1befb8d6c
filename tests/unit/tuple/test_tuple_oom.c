/* test_tuple_oom.c — allocation behaviour of the tuple module (tuple-9.x):
 *   9.1 iterating and validating allocate nothing;
 *   9.2 failing the Nth allocation of print, JSON conversion, decimal conversion, subspaces,
 *       strinc and packing gives RL_E_OUT_OF_MEMORY (never a crash, a leak under ASan, or a
 *       wrong success), and once enough allocations succeed the result is the reference one. */
#include "test.h"

#include <jansson.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "reclayer/alloc.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

/* (1, "a\0b", (None, b"\xff"), -18446744073709551616, 1.5, True, UUID, Versionstamp) */
static const char *sample_hex = "1501"
                                "026100ff6200"
                                "0500ff01ff0000"
                                "0bf6feffffffffffffffff"
                                "21bff8000000000000"
                                "27"
                                "3000112233445566778899aabbccddeeff"
                                "33000000000000000001000002";

static void sample(rl_buf *b) {
    rl__buf_init(b);
    ASSERT_OK(rl__bytes_from_hex(b, sample_hex, strlen(sample_hex)));
}

/* tuple-9.1: no allocation while iterating, nested tuples included. */
TEST(tuple_9_1_iterate_allocates_nothing) {
    rl_buf b;
    rl_alloc_stats st;
    size_t count;
    sample(&b);
    rl_alloc_reset_stats();
    ASSERT_OK(rl__tuple_validate(b.data, b.len, &count));
    rl__tuple_iter it, sub;
    rl__tuple_elem e, n;
    rl__tuple_iter_init(&it, b.data, b.len);
    while (rl__tuple_iter_next(&it, &e) == RL_OK)
        if (e.type == RL_TT_NESTED) {
            rl__tuple_iter_init_nested(&sub, &e);
            while (rl__tuple_iter_next(&sub, &n) == RL_OK) {}
        }
    rl_alloc_get_stats(&st);
    ASSERT_EQ(st.allocs, 0);
    ASSERT_EQ(count, 8);
    rl__buf_release(&b);
}

/* Run one operation with the nth allocation failing; returns its rc and the output in out. */
typedef int (*op_fn)(const rl_buf *in, rl_buf *out);

static int op_print(const rl_buf *in, rl_buf *out) { return rl__tuple_print(in->data, in->len, out, NULL); }

static int op_json(const rl_buf *in, rl_buf *out) {
    json_t *j = NULL;
    int rc = rl__tuple_to_json(in->data, in->len, &j, NULL);
    if (rc) return rc;
    rc = rl__tuple_from_json(j, out, NULL);
    json_decref(j);
    return rc;
}

static int op_decimal(const rl_buf *in, rl_buf *out) {
    (void)in;
    uint8_t mag[64];
    memset(mag, 0xab, sizeof mag);
    rl_buf m;
    int neg, rc;
    rl__buf_init(&m);
    rc = rl__tuple_mag_to_dec(1, mag, sizeof mag, out);
    if (!rc) rc = rl__tuple_dec_to_mag((const char *)out->data, out->len, &neg, &m);
    if (!rc && (m.len != sizeof mag || memcmp(m.data, mag, sizeof mag) || !neg)) rc = RL_E_INTERNAL_ERROR;
    rl__buf_release(&m);
    return rc;
}

static int op_subspace(const rl_buf *in, rl_buf *out) {
    rl__subspace sub;
    rl__tuple_packer pk;
    rl_buf b, e;
    int rc = rl__subspace_init(&sub, in->data, in->len);
    if (rc) return rc;
    rl__buf_init(&b);
    rl__buf_init(&e);
    rl__subspace_pack_begin(&sub, out, &pk);
    rl__tuple_pack_incomplete_versionstamp(&pk, 3);
    rc = rl__tuple_versionstamp_suffix(&pk);
    if (!rc) rc = rl__tuple_packer_error(&pk);
    rl__subspace_range(&sub, &b, &e);
    if (!rc) rc = rl__buf_error(&b);
    if (!rc) rc = rl__buf_error(&e);
    if (!rc) rc = rl__strinc(in->data, in->len, &b);
    rl__buf_release(&b);
    rl__buf_release(&e);
    rl__subspace_release(&sub);
    return rc;
}

/* tuple-9.2: every allocation failure point of each operation. */
TEST(tuple_9_2_oom) {
    static const op_fn ops[] = {op_print, op_json, op_decimal, op_subspace};
    rl_buf in;
    sample(&in);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        rl_buf want;
        rl__buf_init(&want);
        ASSERT_OK(ops[k](&in, &want));
        int ok_seen = 0;
        for (long n = 0; n < 200 && !ok_seen; n++) {
            rl_buf out;
            rl__buf_init(&out);
            rl_alloc_fail_after(n);
            int rc = ops[k](&in, &out);
            rl_alloc_fail_after(-1);
            if (rc == RL_OK) {
                ok_seen = 1;
                if (out.len != want.len || memcmp(out.data, want.data, out.len))
                    fail_msg("op %zu, failing allocation %ld: wrong output %s", k, n, (const char *)out.data);
            } else if (rc != RL_E_OUT_OF_MEMORY) {
                fail_msg("op %zu, failing allocation %ld: %s", k, n, rl_error_name(rc));
            }
            rl__buf_release(&out);
        }
        ASSERT_TRUE(ok_seen);
        rl__buf_release(&want);
    }
    rl__buf_release(&in);
}

RL_TEST_MAIN(T(tuple_9_1_iterate_allocates_nothing), T(tuple_9_2_oom))
