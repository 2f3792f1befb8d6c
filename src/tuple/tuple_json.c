/* tuple_json.c — tuples to and from JSON arrays (see tuple_json.h for the element form).
 *
 * Both directions recurse once per nesting level; the decoder bounds nesting at
 * RL_TUPLE_MAX_DEPTH, and JSON input is bounded the same way here (deeper arrays are
 * RL_E_INVALID_ARGUMENT), so the stack stays small. jansson objects are allocated by jansson.
 */
#include "tuple/tuple_json.h"

#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "reclayer/error.h"

/* ---- Encoding -> JSON ------------------------------------------------------------------- */

/* Make {"key": hex(p[0..n))}. NULL on OOM. */
static json_t *hex_obj(const char *key, const uint8_t *p, size_t n, rl_buf *tmp) {
    rl__buf_reset(tmp);
    rl__buf_append_hex(tmp, p, n);
    if (rl__buf_error(tmp)) return NULL;
    return json_pack("{s:s#}", key, (const char *)tmp->data, (int)tmp->len);
}

/* Append the elements of *it to arr (borrowed). tmp is scratch. RL_OK or an error. */
static int elems_to_json(rl__tuple_iter *it, json_t *arr, rl_buf *tmp) {
    rl__tuple_elem e;
    int rc;
    while ((rc = rl__tuple_iter_next(it, &e)) == RL_OK) {
        json_t *o = NULL;
        switch (e.type) {
        case RL_TT_NULL: o = json_pack("{s:b}", "null", 1); break;
        case RL_TT_BOOL: o = json_pack("{s:b}", "bool", e.b); break;
        case RL_TT_BYTES:
        case RL_TT_STRING:
            rl__buf_reset(tmp);
            rl__tuple_elem_unescape(&e, tmp);
            if (rl__buf_error(tmp)) return RL_E_OUT_OF_MEMORY;
            if (e.type == RL_TT_STRING) {
                /* Valid UTF-8 (checked by the decoder), possibly with NULs: json_stringn. */
                json_t *s = json_stringn((const char *)tmp->data, tmp->len);
                if (s) {
                    o = json_object();
                    if (o && json_object_set_new(o, "string", s)) {
                        json_decref(o);
                        o = NULL;
                    } else if (!o) {
                        json_decref(s);
                    }
                }
            } else {
                size_t n = tmp->len;
                uint8_t *copy = NULL;
                /* hex_obj reuses tmp, so hex from a detached copy. */
                copy = rl__buf_detach(tmp, &n);
                o = hex_obj("bytes", copy ? copy : (const uint8_t *)"", n, tmp);
                rl__free(copy);
            }
            break;
        case RL_TT_NESTED: {
            rl__tuple_iter sub;
            json_t *inner = json_array();
            if (!inner) return RL_E_OUT_OF_MEMORY;
            rl__tuple_iter_init_nested(&sub, &e);
            rc = elems_to_json(&sub, inner, tmp);
            if (rc) {
                json_decref(inner);
                return rc;
            }
            o = json_pack("{s:o}", "tuple", inner); /* steals inner, even on failure */
            break;
        }
        case RL_TT_INT: {
            int neg;
            rl_buf dec;
            rl__buf_init(&dec);
            rl__buf_reset(tmp);
            rl__tuple_elem_bigint(&e, &neg, tmp);
            rc = rl__buf_error(tmp);
            if (!rc) rc = rl__tuple_mag_to_dec(neg, tmp->data, tmp->len, &dec);
            if (!rc) o = json_pack("{s:s}", "int", (const char *)dec.data);
            rl__buf_release(&dec);
            if (rc) return rc;
            break;
        }
        case RL_TT_FLOAT:
        case RL_TT_DOUBLE: {
            /* Undo the order-preserving transform on the stored bytes (exact, NaN payloads
             * included). */
            uint8_t bits[8];
            size_t n = e.payload_len;
            int flip_all = !(e.payload[0] & 0x80);
            for (size_t i = 0; i < n; i++) bits[i] = flip_all ? (uint8_t)~e.payload[i] : e.payload[i];
            if (!flip_all) bits[0] ^= 0x80;
            o = hex_obj(e.type == RL_TT_FLOAT ? "float" : "double", bits, n, tmp);
            break;
        }
        case RL_TT_UUID: o = hex_obj("uuid", e.uuid, 16, tmp); break;
        case RL_TT_VERSIONSTAMP: o = hex_obj("versionstamp", e.versionstamp, 12, tmp); break;
        }
        if (!o || json_array_append_new(arr, o)) return RL_E_OUT_OF_MEMORY;
    }
    return rc == RL_E_NOT_FOUND ? RL_OK : rc;
}

int rl__tuple_to_json(const void *data, size_t len, json_t **out, rl__errdetail *detail) {
    rl__tuple_iter it;
    rl_buf tmp;
    int rc;
    json_t *arr = json_array();
    *out = NULL;
    if (!arr) return RL_E_OUT_OF_MEMORY;
    rl__buf_init(&tmp);
    rl__tuple_iter_init(&it, data, len);
    rc = elems_to_json(&it, arr, &tmp);
    rl__buf_release(&tmp);
    rl__tuple_detail(detail, &it, rc);
    if (rc) goto fail;
    *out = arr;
    return RL_OK;
fail:
    json_decref(arr);
    return rc;
}

/* ---- JSON -> encoding ------------------------------------------------------------------- */

/* Parse the hex string value v into tmp (reset first), requiring want bytes (0: any length).
 * RL_OK or RL_E_INVALID_ARGUMENT. */
static int hex_value(const json_t *v, size_t want, rl_buf *tmp) {
    if (!json_is_string(v)) return RL_E_INVALID_ARGUMENT;
    rl__buf_reset(tmp);
    int rc = rl__bytes_from_hex(tmp, json_string_value(v), json_string_length(v));
    if (rc) return rc == RL_E_OUT_OF_MEMORY ? rc : RL_E_INVALID_ARGUMENT;
    if (want && tmp->len != want) return RL_E_INVALID_ARGUMENT;
    return RL_OK;
}

static int pack_elems(rl__tuple_packer *pk, const json_t *arr, rl_buf *tmp, rl__errdetail *d);

/* Pack one element object {"kind": value}. d: NULL or where a failure's detail goes. */
static int pack_elem(rl__tuple_packer *pk, const json_t *o, rl_buf *tmp, rl__errdetail *d) {
    const char *key;
    json_t *v;
    int rc;
    if (!json_is_object(o) || json_object_size(o) != 1) {
        rl__errdetail_set(d, "an element must be an object with one key, e.g. {\"int\":\"1\"}");
        return RL_E_INVALID_ARGUMENT;
    }
    void *iter = json_object_iter((json_t *)o);
    key = json_object_iter_key(iter);
    v = json_object_iter_value(iter);
    if (!key || !v) return RL_E_INVALID_ARGUMENT;
    if (!strcmp(key, "null")) {
        if (!json_is_true(v)) return RL_E_INVALID_ARGUMENT;
        rl__tuple_pack_null(pk);
    } else if (!strcmp(key, "bool")) {
        if (!json_is_boolean(v)) return RL_E_INVALID_ARGUMENT;
        rl__tuple_pack_bool(pk, json_is_true(v));
    } else if (!strcmp(key, "bytes")) {
        if ((rc = hex_value(v, 0, tmp))) return rc;
        rl__tuple_pack_bytes(pk, tmp->data, tmp->len);
    } else if (!strcmp(key, "string")) {
        if (!json_is_string(v)) return RL_E_INVALID_ARGUMENT;
        rl__tuple_pack_string(pk, json_string_value(v), json_string_length(v));
    } else if (!strcmp(key, "int")) {
        int neg;
        if (!json_is_string(v)) return RL_E_INVALID_ARGUMENT;
        rl__buf_reset(tmp);
        rc = rl__tuple_dec_to_mag(json_string_value(v), json_string_length(v), &neg, tmp);
        if (rc) return rc;
        rl__tuple_pack_bigint(pk, neg, tmp->data, tmp->len);
    } else if (!strcmp(key, "float") || !strcmp(key, "double")) {
        int is_float = key[0] == 'f';
        if ((rc = hex_value(v, is_float ? 4 : 8, tmp))) return rc;
        uint8_t *b = tmp->data;
        int flip_all = (b[0] & 0x80) != 0;
        rl__buf_append_byte(pk->out, is_float ? 0x20 : 0x21);
        if (!flip_all) b[0] ^= 0x80;
        for (size_t i = 0; i < tmp->len; i++) rl__buf_append_byte(pk->out, flip_all ? (uint8_t)~b[i] : b[i]);
    } else if (!strcmp(key, "uuid")) {
        if ((rc = hex_value(v, 16, tmp))) return rc;
        rl__tuple_pack_uuid(pk, tmp->data);
    } else if (!strcmp(key, "versionstamp")) {
        static const uint8_t ff[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        if ((rc = hex_value(v, 12, tmp))) return rc;
        if (!memcmp(tmp->data, ff, 10))
            rl__tuple_pack_incomplete_versionstamp(pk, (uint16_t)((tmp->data[10] << 8) | tmp->data[11]));
        else rl__tuple_pack_versionstamp(pk, tmp->data);
    } else if (!strcmp(key, "tuple")) {
        if (pk->depth >= RL_TUPLE_MAX_DEPTH) {
            rl__errdetail_set(d, "tuples nest at most %d levels deep (RL_TUPLE_MAX_DEPTH)", RL_TUPLE_MAX_DEPTH);
            return RL_E_INVALID_ARGUMENT;
        }
        if (!json_is_array(v)) return RL_E_INVALID_ARGUMENT;
        rl__tuple_pack_nested_begin(pk);
        if ((rc = pack_elems(pk, v, tmp, d))) return rc;
        rl__tuple_pack_nested_end(pk);
    } else {
        rl__errdetail_set(d,
                          "unknown element kind \"%.40s\" (null, bool, int, bytes, string, float, double, "
                          "uuid, versionstamp, tuple)",
                          key);
        return RL_E_INVALID_ARGUMENT;
    }
    return rl__tuple_packer_error(pk);
}

static int pack_elems(rl__tuple_packer *pk, const json_t *arr, rl_buf *tmp, rl__errdetail *d) {
    size_t i;
    json_t *o;
    int rc;
    json_array_foreach(arr, i, o) {
        if ((rc = pack_elem(pk, o, tmp, d))) return rc;
    }
    return RL_OK;
}

int rl__tuple_pack_json(rl__tuple_packer *pk, const json_t *arr, rl__errdetail *detail) {
    rl_buf tmp;
    int rc;
    if (!json_is_array(arr)) return RL_E_INVALID_ARGUMENT;
    rl__buf_init(&tmp);
    rc = pack_elems(pk, arr, &tmp, detail);
    if (!rc) rc = rl__buf_error(&tmp);
    rl__buf_release(&tmp);
    if (!rc) rc = rl__tuple_packer_error(pk);
    return rc;
}

int rl__tuple_from_json(const json_t *arr, rl_buf *out, rl__errdetail *detail) {
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, out);
    return rl__tuple_pack_json(&pk, arr, detail);
}
