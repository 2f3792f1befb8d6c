/* tuple_api.c — the public tuple API (reclayer/tuple.h) over the internal codec (tuple.h,
 * tuple_json.h): a builder around a packer, an unpacked tuple that owns copies of its elements,
 * and the text forms as heap strings. Failures with more to say than their code leave it in the
 * thread's detail (rl_last_error_detail). */
#include "reclayer/tuple.h"

#include <string.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "tuple/tuple.h"
#include "tuple/tuple_json.h"

const char *rl_tuple_type_name(rl_tuple_type t) {
    switch (t) {
    case RL_TUPLE_NULL: return "null";
    case RL_TUPLE_BYTES: return "bytes";
    case RL_TUPLE_STRING: return "string";
    case RL_TUPLE_NESTED: return "nested";
    case RL_TUPLE_INT: return "int";
    case RL_TUPLE_FLOAT: return "float";
    case RL_TUPLE_DOUBLE: return "double";
    case RL_TUPLE_BOOL: return "bool";
    case RL_TUPLE_UUID: return "uuid";
    case RL_TUPLE_VERSIONSTAMP: return "versionstamp";
    }
    return "unknown";
}

/* ---- Builder ------------------------------------------------------------------------------ */

struct rl_tuple_builder {
    rl_buf out;
    rl__tuple_packer pk;
    int err; /* sticky: RL_E_INVALID_ARGUMENT for an unbalanced nested_end */
};

int rl_tuple_builder_new(rl_tuple_builder **out) {
    *out = NULL;
    rl_tuple_builder *b = rl__calloc(1, sizeof *b);
    if (!b) return RL_E_OUT_OF_MEMORY;
    rl__buf_init(&b->out);
    rl__tuple_packer_init(&b->pk, &b->out);
    *out = b;
    return RL_OK;
}

void rl_tuple_builder_free(rl_tuple_builder *b) {
    if (!b) return;
    rl__buf_release(&b->out);
    rl__free(b);
}

void rl_tuple_builder_clear(rl_tuple_builder *b) {
    rl__buf_reset(&b->out);
    rl__tuple_packer_init(&b->pk, &b->out);
    b->err = RL_OK;
}

void rl_tuple_add_null(rl_tuple_builder *b) { rl__tuple_pack_null(&b->pk); }
void rl_tuple_add_bytes(rl_tuple_builder *b, const void *p, size_t n) { rl__tuple_pack_bytes(&b->pk, p, n); }
void rl_tuple_add_string(rl_tuple_builder *b, const char *s, size_t n) { rl__tuple_pack_string(&b->pk, s, n); }
void rl_tuple_add_int(rl_tuple_builder *b, int64_t v) { rl__tuple_pack_int(&b->pk, v); }
void rl_tuple_add_uint(rl_tuple_builder *b, uint64_t v) { rl__tuple_pack_uint(&b->pk, v); }
void rl_tuple_add_float(rl_tuple_builder *b, float v) { rl__tuple_pack_float(&b->pk, v); }
void rl_tuple_add_double(rl_tuple_builder *b, double v) { rl__tuple_pack_double(&b->pk, v); }
void rl_tuple_add_bool(rl_tuple_builder *b, int v) { rl__tuple_pack_bool(&b->pk, v != 0); }
void rl_tuple_add_uuid(rl_tuple_builder *b, const uint8_t uuid[16]) { rl__tuple_pack_uuid(&b->pk, uuid); }
void rl_tuple_add_versionstamp(rl_tuple_builder *b, const uint8_t vs[12]) { rl__tuple_pack_versionstamp(&b->pk, vs); }
void rl_tuple_add_incomplete_versionstamp(rl_tuple_builder *b, uint16_t user_version) {
    rl__tuple_pack_incomplete_versionstamp(&b->pk, user_version);
}
void rl_tuple_nested_begin(rl_tuple_builder *b) { rl__tuple_pack_nested_begin(&b->pk); }
void rl_tuple_nested_end(rl_tuple_builder *b) {
    if (b->pk.depth == 0) {
        if (!b->err) b->err = RL_E_INVALID_ARGUMENT;
        return;
    }
    rl__tuple_pack_nested_end(&b->pk);
}
void rl_tuple_add_raw(rl_tuple_builder *b, const void *p, size_t n) { rl__buf_append(&b->out, p, n); }

int rl_tuple_builder_result(const rl_tuple_builder *b, const uint8_t **out, size_t *out_len) {
    int rc = b->err ? b->err : rl__tuple_packer_error(&b->pk);
    if (rc == RL_OK && b->pk.depth != 0) rc = RL_E_INVALID_ARGUMENT; /* a nested tuple still open */
    if (rc != RL_OK) return rc;
    *out = b->out.len ? b->out.data : NULL;
    *out_len = b->out.len;
    return RL_OK;
}

int rl_tuple_builder_versionstamp_key(rl_tuple_builder *b, const uint8_t **out, size_t *out_len) {
    int rc = b->err ? b->err : rl__tuple_packer_error(&b->pk);
    if (rc == RL_OK && b->pk.depth != 0) rc = RL_E_INVALID_ARGUMENT;
    if (rc == RL_OK) rc = rl__tuple_versionstamp_suffix(&b->pk);
    if (rc != RL_OK) return rc;
    return rl_tuple_builder_result(b, out, out_len);
}

/* ---- Unpacked tuples ---------------------------------------------------------------------- */

typedef struct {
    rl_tuple_type type;
    int negative; /* INT: sign */
    int fits_i64; /* INT: i holds the value */
    int fits_u64; /* INT: u holds the value (non-negative, at most 64 bits) */
    int64_t i;
    uint64_t u;
    double d;      /* DOUBLE, and FLOAT widened */
    float f;       /* FLOAT */
    int b;         /* BOOL */
    uint8_t *data; /* BYTES, STRING: unescaped copy (NULL when empty) */
    size_t len;
    uint8_t fixed[16]; /* UUID (16), VERSIONSTAMP (12) */
    rl_tuple *nested;  /* NESTED */
} elem;

struct rl_tuple {
    size_t n;
    elem *e;
};

void rl_tuple_free(rl_tuple *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) {
        rl__free(t->e[i].data);
        rl_tuple_free(t->e[i].nested);
    }
    rl__free(t->e);
    rl__free(t);
}

static int copy_elem(const rl__tuple_elem *src, elem *dst, rl_buf *tmp);

/* Decode the elements of the iterator into a new tuple. Recursion is bounded by the decoder's
 * RL_TUPLE_MAX_DEPTH. */
static int decode(rl__tuple_iter *it, rl_tuple **out, rl_buf *tmp) {
    rl_tuple *t = rl__calloc(1, sizeof *t);
    if (!t) return RL_E_OUT_OF_MEMORY;
    size_t cap = 0;
    rl__tuple_elem src;
    int rc;
    while ((rc = rl__tuple_iter_next(it, &src)) == RL_OK) {
        if (rl__grow(&t->e, &cap, t->n + 1, sizeof *t->e, 4) != RL_OK) {
            rc = RL_E_OUT_OF_MEMORY;
            break;
        }
        memset(&t->e[t->n], 0, sizeof t->e[t->n]);
        rc = copy_elem(&src, &t->e[t->n], tmp);
        t->n++; /* counted even on failure, so that rl_tuple_free frees what was copied */
        if (rc != RL_OK) break;
    }
    if (rc == RL_E_NOT_FOUND) rc = RL_OK;
    if (rc == RL_OK) {
        *out = t;
    } else {
        rl__tuple_detail(rl__thread_detail(), it, rc);
        rl_tuple_free(t);
    }
    return rc;
}

static int copy_elem(const rl__tuple_elem *src, elem *dst, rl_buf *tmp) {
    switch (src->type) {
    case RL_TT_NULL: dst->type = RL_TUPLE_NULL; return RL_OK;
    case RL_TT_BYTES:
    case RL_TT_STRING:
        dst->type = src->type == RL_TT_BYTES ? RL_TUPLE_BYTES : RL_TUPLE_STRING;
        rl__buf_reset(tmp);
        rl__tuple_elem_unescape(src, tmp);
        if (rl__buf_error(tmp)) return RL_E_OUT_OF_MEMORY;
        if (tmp->len && !(dst->data = rl__memdup(tmp->data, tmp->len))) return RL_E_OUT_OF_MEMORY;
        dst->len = tmp->len;
        return RL_OK;
    case RL_TT_NESTED: {
        dst->type = RL_TUPLE_NESTED;
        rl__tuple_iter sub;
        rl__tuple_iter_init_nested(&sub, src);
        return decode(&sub, &dst->nested, tmp);
    }
    case RL_TT_INT:
        dst->type = RL_TUPLE_INT;
        dst->negative = src->is_negative;
        dst->fits_i64 = src->fits_i64;
        dst->i = src->i;
        if (src->fits_i64 && src->i >= 0) {
            dst->fits_u64 = 1;
            dst->u = (uint64_t)src->i;
        } else if (!src->is_negative) {
            int neg;
            rl__buf_reset(tmp);
            rl__tuple_elem_bigint(src, &neg, tmp);
            if (rl__buf_error(tmp)) return RL_E_OUT_OF_MEMORY;
            if (tmp->len <= 8) {
                dst->fits_u64 = 1;
                for (size_t k = 0; k < tmp->len; k++) dst->u = dst->u << 8 | tmp->data[k];
            }
        }
        return RL_OK;
    case RL_TT_FLOAT:
        dst->type = RL_TUPLE_FLOAT;
        dst->f = src->f;
        dst->d = src->d;
        return RL_OK;
    case RL_TT_DOUBLE:
        dst->type = RL_TUPLE_DOUBLE;
        dst->d = src->d;
        return RL_OK;
    case RL_TT_BOOL:
        dst->type = RL_TUPLE_BOOL;
        dst->b = src->b;
        return RL_OK;
    case RL_TT_UUID:
        dst->type = RL_TUPLE_UUID;
        memcpy(dst->fixed, src->uuid, 16);
        return RL_OK;
    case RL_TT_VERSIONSTAMP:
        dst->type = RL_TUPLE_VERSIONSTAMP;
        memcpy(dst->fixed, src->versionstamp, 12);
        return RL_OK;
    }
    return RL_E_TUPLE_UNSUPPORTED_TYPE;
}

int rl_tuple_unpack(const void *data, size_t len, rl_tuple **out) {
    *out = NULL;
    rl__errdetail_init(rl__thread_detail(), NULL);
    if (!data && len) return RL_E_INVALID_ARGUMENT;
    rl__tuple_iter it;
    rl__tuple_iter_init(&it, data, len);
    rl_buf tmp;
    rl__buf_init(&tmp);
    int rc = decode(&it, out, &tmp);
    rl__buf_release(&tmp);
    return rc;
}

size_t rl_tuple_count(const rl_tuple *t) { return t->n; }

rl_tuple_type rl_tuple_type_at(const rl_tuple *t, size_t i) { return i < t->n ? t->e[i].type : (rl_tuple_type)-1; }

/* The element i if it has type ty (or ty2), else NULL. */
static const elem *at(const rl_tuple *t, size_t i, rl_tuple_type ty, rl_tuple_type ty2) {
    if (i >= t->n || (t->e[i].type != ty && t->e[i].type != ty2)) return NULL;
    return &t->e[i];
}

int rl_tuple_get_int(const rl_tuple *t, size_t i, int64_t *out) {
    const elem *e = at(t, i, RL_TUPLE_INT, RL_TUPLE_INT);
    if (!e) return RL_E_INVALID_ARGUMENT;
    if (!e->fits_i64) return RL_E_TUPLE_VALUE_OVERFLOW;
    *out = e->i;
    return RL_OK;
}

int rl_tuple_get_uint(const rl_tuple *t, size_t i, uint64_t *out) {
    const elem *e = at(t, i, RL_TUPLE_INT, RL_TUPLE_INT);
    if (!e) return RL_E_INVALID_ARGUMENT;
    if (!e->fits_u64) return RL_E_TUPLE_VALUE_OVERFLOW;
    *out = e->u;
    return RL_OK;
}

int rl_tuple_get_double(const rl_tuple *t, size_t i, double *out) {
    const elem *e = at(t, i, RL_TUPLE_DOUBLE, RL_TUPLE_FLOAT);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out = e->d;
    return RL_OK;
}

int rl_tuple_get_float(const rl_tuple *t, size_t i, float *out) {
    const elem *e = at(t, i, RL_TUPLE_FLOAT, RL_TUPLE_FLOAT);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out = e->f;
    return RL_OK;
}

int rl_tuple_get_bool(const rl_tuple *t, size_t i, int *out) {
    const elem *e = at(t, i, RL_TUPLE_BOOL, RL_TUPLE_BOOL);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out = e->b;
    return RL_OK;
}

int rl_tuple_get_bytes(const rl_tuple *t, size_t i, const uint8_t **out, size_t *out_len) {
    const elem *e = at(t, i, RL_TUPLE_BYTES, RL_TUPLE_STRING);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out = e->data;
    *out_len = e->len;
    return RL_OK;
}

int rl_tuple_get_uuid(const rl_tuple *t, size_t i, const uint8_t **out16) {
    const elem *e = at(t, i, RL_TUPLE_UUID, RL_TUPLE_UUID);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out16 = e->fixed;
    return RL_OK;
}

int rl_tuple_get_versionstamp(const rl_tuple *t, size_t i, const uint8_t **out12) {
    const elem *e = at(t, i, RL_TUPLE_VERSIONSTAMP, RL_TUPLE_VERSIONSTAMP);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out12 = e->fixed;
    return RL_OK;
}

int rl_tuple_get_nested(const rl_tuple *t, size_t i, const rl_tuple **out) {
    const elem *e = at(t, i, RL_TUPLE_NESTED, RL_TUPLE_NESTED);
    if (!e) return RL_E_INVALID_ARGUMENT;
    *out = e->nested;
    return RL_OK;
}

/* ---- Text --------------------------------------------------------------------------------- */

/* Hand a text buffer to the caller as a heap string (rl_free), or fail with rc / OOM. */
static int hand_out(rl_buf *b, int rc, char **out) {
    if (rc == RL_OK && rl__buf_error(b)) rc = RL_E_OUT_OF_MEMORY;
    if (rc == RL_OK) {
        size_t n;
        uint8_t *p = rl__buf_detach(b, &n);
        if (!p) p = (uint8_t *)rl__strdup(""); /* an empty buffer owns no memory */
        if (!p) rc = RL_E_OUT_OF_MEMORY;
        *out = (char *)p;
    }
    rl__buf_release(b);
    return rc;
}

int rl_tuple_print(const void *data, size_t len, char **out) {
    *out = NULL;
    rl__errdetail_init(rl__thread_detail(), NULL);
    if (!data && len) return RL_E_INVALID_ARGUMENT;
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__tuple_print(data, len, &b, rl__thread_detail());
    return hand_out(&b, rc, out);
}

int rl_tuple_to_json(const void *data, size_t len, char **out) {
    *out = NULL;
    rl__errdetail_init(rl__thread_detail(), NULL);
    if (!data && len) return RL_E_INVALID_ARGUMENT;
    json_t *arr = NULL;
    int rc = rl__tuple_to_json(data, len, &arr, rl__thread_detail());
    if (rc != RL_OK) return rc;
    char *s = json_dumps(arr, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(arr);
    if (!s) return RL_E_OUT_OF_MEMORY;
    rl_buf b;
    rl__buf_init(&b);
    rl__buf_append(&b, s, strlen(s));
    free(s); /* jansson's allocator */
    return hand_out(&b, RL_OK, out);
}

int rl_tuple_from_json(const char *json, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    rl__errdetail_init(rl__thread_detail(), NULL);
    if (!json) return RL_E_INVALID_ARGUMENT;
    json_error_t je;
    json_t *arr = json_loads(json, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
    if (!arr) {
        rl__errdetail_set(rl__thread_detail(), "bad JSON: %s (column %d)", je.text, je.column);
        return RL_E_INVALID_ARGUMENT;
    }
    if (!json_is_array(arr)) {
        json_decref(arr);
        rl__errdetail_set(rl__thread_detail(), "expected a JSON array of elements");
        return RL_E_INVALID_ARGUMENT;
    }
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__tuple_from_json(arr, &b, rl__thread_detail());
    json_decref(arr);
    if (rc == RL_OK && rl__buf_error(&b)) rc = RL_E_OUT_OF_MEMORY;
    if (rc == RL_OK) {
        size_t n;
        *out = rl__buf_detach(&b, &n); /* NULL for the empty tuple */
        *out_len = n;
    }
    rl__buf_release(&b);
    return rc;
}
