/* fuzz_mapper.c — libFuzzer target for the mapper: parse arbitrary mapper bytes and build the
 * secondary key for arbitrary index key / value bytes. Must never crash, leak or read out of
 * bounds.
 *
 * Input layout: byte 0 and byte 1 choose the split points: mapper = the next (b0 % rest) bytes,
 * key = the next (b1 % rest) bytes, value = whatever remains. Oracles besides the sanitizers:
 * parse and construct return only their documented codes, and a constructed P is always a
 * valid tuple (it is a concatenation of valid tuple elements).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/buf.h"
#include "reclayer/error.h"
#include "storage/mapped.h"
#include "tuple/tuple.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rl_arena a;
    rl__mapper *m = NULL;
    rl_buf out;
    size_t rest, ml, kl;
    int rc;

    if (size < 2) return 0;
    rest = size - 2;
    ml = rest ? data[0] % (rest + 1) : 0;
    kl = (rest - ml) ? data[1] % (rest - ml + 1) : 0;
    const uint8_t *mp = data + 2, *kp = mp + ml, *vp = kp + kl;
    size_t vl = rest - ml - kl;

    rl__arena_init(&a, 0);
    rl__buf_init(&out);
    rc = rl__mapper_parse(mp, ml, &a, &m);
    if (rc != RL_OK) {
        if (rc != RL_E_MAPPER_NOT_TUPLE && rc != RL_E_MAPPER_BAD_INDEX && rc != RL_E_MAPPER_BAD_RANGE_DESCRIPTOR &&
            rc != RL_E_OUT_OF_MEMORY)
            abort();
        goto done;
    }
    (void)rl__mapper_is_range(m);
    rc = rl__mapper_construct(m, kp, kl, vp, vl, &out);
    if (rc == RL_OK) {
        if (rl__tuple_validate(out.data, out.len, NULL) != RL_OK) abort();
    } else if (rc != RL_E_MAPPER_BAD_INDEX && rc != RL_E_KEY_NOT_TUPLE && rc != RL_E_VALUE_NOT_TUPLE &&
               rc != RL_E_OUT_OF_MEMORY) {
        abort();
    } else if (out.len != 0) {
        abort(); /* nothing left behind on error */
    }
    /* Constructing twice gives the same bytes (the mapper is not changed by construct). */
    if (rc == RL_OK) {
        rl_buf again;
        rl__buf_init(&again);
        if (rl__mapper_construct(m, kp, kl, vp, vl, &again) != RL_OK) abort();
        if (again.len != out.len || (out.len && memcmp(again.data, out.data, out.len))) abort();
        rl__buf_release(&again);
    }
done:
    rl__buf_release(&out);
    rl__arena_release(&a);
    return 0;
}
