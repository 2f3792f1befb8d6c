/* fuzz_tuple_decode.c — libFuzzer target for the tuple decoder.
 *
 * For any input: validate must not crash or read out of bounds (ASan). When the input is valid:
 *   1. re-packing every element with rl__tuple_pack_raw reproduces the input;
 *   2. the JSON form converts back to exactly the input (valid encodings are canonical);
 *   3. every element decodes to fields consistent with its type, nested ones iterated too;
 *   4. the human form renders;
 *   5. the public API (reclayer/tuple.h) unpacks it to the same number of elements, and packing
 *      them again with its builder reproduces the input (unless an integer is beyond 64 bits,
 *      which its accessors do not hand out).
 * When it is invalid, the JSON form, the printer and rl_tuple_unpack must refuse it with the same
 * error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reclayer/error.h"
#include "reclayer/tuple.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

/* Walk the elements of *it, re-packing each into pk; nested ones are walked too (checking that
 * their content is iterable), up to the decoder's depth bound. */
static void walk(rl__tuple_iter *it, rl__tuple_packer *pk) {
    rl__tuple_elem e;
    int rc;
    while ((rc = rl__tuple_iter_next(it, &e)) == RL_OK) {
        rl__tuple_pack_raw(pk, &e);
        if (e.type == RL_TT_NESTED) {
            rl__tuple_iter sub;
            rl_buf scratch;
            rl__tuple_packer spk;
            rl__buf_init(&scratch);
            rl__tuple_packer_init(&spk, &scratch);
            spk.depth = 1;
            rl__tuple_iter_init_nested(&sub, &e);
            walk(&sub, &spk);
            if (scratch.len != e.payload_len || memcmp(scratch.data, e.payload, e.payload_len)) abort();
            rl__buf_release(&scratch);
        } else if (e.type == RL_TT_BYTES || e.type == RL_TT_STRING) {
            rl_buf u;
            rl__buf_init(&u);
            rl__tuple_elem_unescape(&e, &u);
            if (u.len > e.payload_len) abort();
            rl__buf_release(&u);
        }
    }
    if (rc != RL_E_NOT_FOUND) abort(); /* validated input must iterate cleanly */
}

/* Pack the elements of t into b through the public builder. 0 when an integer is beyond 64 bits
 * (nothing to compare then), 1 otherwise. */
static int repack(const rl_tuple *t, rl_tuple_builder *b) {
    for (size_t i = 0; i < rl_tuple_count(t); i++) {
        int64_t v;
        uint64_t u;
        double d;
        float f;
        int bo;
        const uint8_t *p;
        size_t n;
        const rl_tuple *sub;
        switch (rl_tuple_type_at(t, i)) {
        case RL_TUPLE_NULL: rl_tuple_add_null(b); break;
        case RL_TUPLE_BYTES:
            if (rl_tuple_get_bytes(t, i, &p, &n)) abort();
            rl_tuple_add_bytes(b, p, n);
            break;
        case RL_TUPLE_STRING:
            if (rl_tuple_get_bytes(t, i, &p, &n)) abort();
            rl_tuple_add_string(b, (const char *)p, n);
            break;
        case RL_TUPLE_NESTED:
            if (rl_tuple_get_nested(t, i, &sub)) abort();
            rl_tuple_nested_begin(b);
            if (!repack(sub, b)) return 0;
            rl_tuple_nested_end(b);
            break;
        case RL_TUPLE_INT:
            if (rl_tuple_get_int(t, i, &v) == RL_OK) rl_tuple_add_int(b, v);
            else if (rl_tuple_get_uint(t, i, &u) == RL_OK) rl_tuple_add_uint(b, u);
            else return 0;
            break;
        case RL_TUPLE_FLOAT:
            if (rl_tuple_get_float(t, i, &f)) abort();
            rl_tuple_add_float(b, f);
            break;
        case RL_TUPLE_DOUBLE:
            if (rl_tuple_get_double(t, i, &d)) abort();
            rl_tuple_add_double(b, d);
            break;
        case RL_TUPLE_BOOL:
            if (rl_tuple_get_bool(t, i, &bo)) abort();
            rl_tuple_add_bool(b, bo);
            break;
        case RL_TUPLE_UUID:
            if (rl_tuple_get_uuid(t, i, &p)) abort();
            rl_tuple_add_uuid(b, p);
            break;
        case RL_TUPLE_VERSIONSTAMP:
            if (rl_tuple_get_versionstamp(t, i, &p)) abort();
            rl_tuple_add_versionstamp(b, p);
            break;
        default: abort();
        }
    }
    return 1;
}

/* Property 5. */
static void check_public(const uint8_t *data, size_t size, int rc, size_t count) {
    rl_tuple *t = NULL;
    int urc = rl_tuple_unpack(data, size, &t);
    if (urc != rc && urc != RL_E_OUT_OF_MEMORY) abort();
    if (urc != RL_OK) {
        if (t) abort();
        return;
    }
    if (rl_tuple_count(t) != count) abort();
    rl_tuple_builder *b = NULL;
    if (rl_tuple_builder_new(&b) == RL_OK) {
        const uint8_t *p;
        size_t n;
        if (repack(t, b) && rl_tuple_builder_result(b, &p, &n) == RL_OK && (n != size || (n && memcmp(p, data, n))))
            abort();
        rl_tuple_builder_free(b);
    }
    rl_tuple_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t count = 0;
    int rc = rl__tuple_validate(data, size, &count);
    json_t *j = NULL;
    int jrc = rl__tuple_to_json(data, size, &j, NULL);
    rl_buf txt;
    rl__buf_init(&txt);
    int prc = rl__tuple_print(data, size, &txt, NULL);
    rl__buf_release(&txt);
    if (jrc != rc || prc != rc) abort();
    check_public(data, size, rc, count);
    if (rc != RL_OK) {
        if (rc != RL_E_TUPLE_TRUNCATED && rc != RL_E_TUPLE_MALFORMED && rc != RL_E_TUPLE_UNSUPPORTED_TYPE) abort();
        return 0;
    }
    if (json_array_size(j) != count) abort();

    rl_buf out;
    rl__tuple_packer pk;
    rl__tuple_iter it;
    rl__buf_init(&out);
    rl__tuple_packer_init(&pk, &out);
    rl__tuple_iter_init(&it, data, size);
    walk(&it, &pk);
    if (out.len != size || memcmp(out.data, data, size)) abort();

    rl__buf_reset(&out);
    if (rl__tuple_from_json(j, &out, NULL) != RL_OK) abort();
    if (out.len != size || memcmp(out.data, data, size)) abort();
    rl__buf_release(&out);
    json_decref(j);
    return 0;
}
