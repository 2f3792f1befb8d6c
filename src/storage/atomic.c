/* atomic.c — FoundationDB's atomic operations as one pure function, shared by the storage engine
 * (applied against the value at the previous version) and the read-your-writes layer.
 *
 * The rules follow FoundationDB's fdbclient/Atomic.h (current API version):
 *   ADD, BIT_OR, BIT_XOR, MAX: a missing or empty old value gives the operand; an empty operand
 *     gives the (empty) operand; otherwise the result has the operand's length, the old value
 *     zero-extended or truncated to it. ADD is little-endian with carries, overflow dropped.
 *   BIT_AND (AndV2), MIN (MinV2): a missing old value gives the operand; a present (even empty)
 *     old value is zero-extended / truncated to the operand's length.
 *   MAX / MIN compare the (extended / truncated) values as little-endian unsigned integers.
 *   BYTE_MIN / BYTE_MAX: missing gives the operand; otherwise the lexicographically smaller /
 *     larger of the two, whole.
 *   APPEND_IF_FITS: missing or empty gives the operand; an empty operand keeps the old value; the
 *     old value is kept when the result would exceed 100,000 bytes.
 *   COMPARE_AND_CLEAR: clears the key when the old value equals the operand; else unchanged.
 */
#include <string.h>

#include "base/bytes.h"
#include "reclayer/error.h"
#include "storage/storage.h"

#define VALUE_SIZE_LIMIT 100000

/* Copy old[0..old_len) into out extended with zeros / truncated to n bytes. */
static void put_resized(rl_buf *out, const uint8_t *old, size_t old_len, size_t n) {
    size_t k = old_len < n ? old_len : n;
    if (k) rl__buf_append(out, old, k);
    for (; k < n; k++) rl__buf_append_byte(out, 0);
}

/* Little-endian compare of old (resized to operand_len) against operand: <0, 0, >0. */
static int cmp_le(const uint8_t *old, size_t old_len, const uint8_t *op, size_t op_len) {
    for (size_t i = op_len; i-- > 0;) {
        uint8_t a = i < old_len ? old[i] : 0;
        if (a != op[i]) return a < op[i] ? -1 : 1;
    }
    return 0;
}

int rl__atomic_apply(int type, int present, const uint8_t *old, size_t old_len, const uint8_t *operand,
                     size_t operand_len, rl_buf *out, int *out_present) {
    size_t i;
    rl__buf_reset(out);
    *out_present = 1;
    if (!present) old_len = 0;
    switch (type) {
    case RL_MUT_ADD:
    case RL_MUT_BIT_OR:
    case RL_MUT_BIT_XOR:
        if (old_len == 0 || operand_len == 0) goto operand;
        if (rl__buf_reserve(out, operand_len) != RL_OK) return RL_E_OUT_OF_MEMORY;
        if (type == RL_MUT_ADD) {
            unsigned carry = 0;
            for (i = 0; i < operand_len; i++) {
                unsigned s = (i < old_len ? old[i] : 0) + (unsigned)operand[i] + carry;
                rl__buf_append_byte(out, (uint8_t)s);
                carry = s >> 8;
            }
        } else {
            for (i = 0; i < operand_len; i++) {
                uint8_t a = i < old_len ? old[i] : 0;
                rl__buf_append_byte(out, type == RL_MUT_BIT_OR ? (uint8_t)(a | operand[i]) : (uint8_t)(a ^ operand[i]));
            }
        }
        break;
    case RL_MUT_BIT_AND:
        if (!present || operand_len == 0) goto operand;
        if (rl__buf_reserve(out, operand_len) != RL_OK) return RL_E_OUT_OF_MEMORY;
        for (i = 0; i < operand_len; i++) rl__buf_append_byte(out, (uint8_t)((i < old_len ? old[i] : 0) & operand[i]));
        break;
    case RL_MUT_MAX:
        if (old_len == 0 || operand_len == 0) goto operand;
        if (cmp_le(old, old_len, operand, operand_len) > 0) put_resized(out, old, old_len, operand_len);
        else goto operand;
        break;
    case RL_MUT_MIN:
        if (!present || operand_len == 0) goto operand;
        if (cmp_le(old, old_len, operand, operand_len) < 0) put_resized(out, old, old_len, operand_len);
        else goto operand;
        break;
    case RL_MUT_BYTE_MIN:
    case RL_MUT_BYTE_MAX: {
        if (!present) goto operand;
        int c = rl__bytes_cmp(old, old_len, operand, operand_len);
        if ((type == RL_MUT_BYTE_MIN && c < 0) || (type == RL_MUT_BYTE_MAX && c > 0)) goto old_value;
        goto operand;
    }
    case RL_MUT_APPEND_IF_FITS:
        if (old_len == 0) goto operand;
        if (operand_len == 0 || old_len + operand_len > VALUE_SIZE_LIMIT) goto old_value;
        rl__buf_append(out, old, old_len);
        rl__buf_append(out, operand, operand_len);
        break;
    case RL_MUT_COMPARE_AND_CLEAR:
        if (!present) {
            *out_present = 0;
            break;
        }
        if (old_len == operand_len && (old_len == 0 || memcmp(old, operand, old_len) == 0)) {
            *out_present = 0;
            break;
        }
        goto old_value;
    default: return RL_E_INVALID_MUTATION_TYPE;
    }
    return rl__buf_error(out);
operand:
    if (operand_len) rl__buf_append(out, operand, operand_len);
    return rl__buf_error(out);
old_value:
    if (old_len) rl__buf_append(out, old, old_len);
    return rl__buf_error(out);
}
