/* fuzz_tuple_decode.c — libFuzzer target for the tuple decoder.
 *
 * For any input: validate must not crash or read out of bounds (ASan). When the input is valid:
 *   1. re-packing every element with rl__tuple_pack_raw reproduces the input;
 *   2. the JSON form converts back to exactly the input (valid encodings are canonical);
 *   3. every element decodes to fields consistent with its type, nested ones iterated too;
 *   4. the human form renders.
 * When it is invalid, the JSON form and the printer must refuse it with the same error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "reclayer/error.h"
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
