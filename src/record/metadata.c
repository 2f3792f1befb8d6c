/* metadata.c — record metadata: the builder, generic field reading through protobuf-c
 * descriptors, primary-key and index-entry tuples, and the union encoding of stored records.
 *
 * Invariants:
 *   1. Every field named in a key (primary key or index) is a top-level, non-repeated scalar
 *      field (integers of every protobuf kind, bool, float, double, string, bytes, enum); the
 *      builder refuses anything else, so the readers below never meet a message or repeated
 *      field.
 *   2. After rl_metadata_build the metadata never changes, so stores and threads share it.
 *   3. A failed builder call leaves the metadata as it was (it validates before it appends).
 *
 * Field values map to tuple elements as the Java Record Layer maps them: signed integers (int32,
 * int64, sint*, sfixed*) and enums (their number) as integers, unsigned ones (uint*, fixed*) as
 * non-negative integers, bool, float (0x20), double (0x21), string (0x02), bytes (0x01). An
 * absent optional field is null in an index entry and an error in a primary key.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "record/pbwire.h"
#include "record/record_int.h"

/* ============================================================================================
 * Builder
 * ========================================================================================== */

static int md_fail(rl_metadata *md, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record a detail message on md and return RL_E_RECORD_METADATA_INVALID. */
static int md_fail(rl_metadata *md, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vset(&md->err, fmt, ap);
    va_end(ap);
    return RL_E_RECORD_METADATA_INVALID;
}

/* Record that an allocation failed (every failure leaves a message: errdetail.h, rule 1). */
static int md_oom(rl_metadata *md) {
    rl__errdetail_set(&md->err, "out of memory");
    return RL_E_OUT_OF_MEMORY;
}

int rl_metadata_new(rl_metadata **out) {
    *out = rl__calloc(1, sizeof **out);
    if (!*out) return RL_E_OUT_OF_MEMORY;
    pthread_mutex_init(&(*out)->err_mu, NULL);
    rl__errdetail_init(&(*out)->err, &(*out)->err_mu);
    return RL_OK;
}

void rl_metadata_free(rl_metadata *md) {
    if (!md) return;
    for (int i = 0; i < md->n_types; i++) rl__free(md->types[i].pk);
    for (int i = 0; i < md->n_indexes; i++) {
        rl__free(md->indexes[i].name);
        rl__free(md->indexes[i].subspace_key);
        rl__free(md->indexes[i].fields);
        rl__free(md->indexes[i].pk_pos);
    }
    rl__free(md->types);
    rl__free(md->indexes);
    pthread_mutex_destroy(&md->err_mu);
    rl__free(md);
}

const char *rl_metadata_errmsg(const rl_metadata *md) { return md ? rl__errdetail_get(&md->err) : ""; }
void rl_metadata_set_version(rl_metadata *md, int version) { md->version = version; }
int rl_metadata_version(const rl_metadata *md) { return md->version; }

/* Find and check a key field of desc by name; on failure set md's detail and return NULL.
 * what: "primary key" or "index NAME", for the message. */
static const ProtobufCFieldDescriptor *key_field(rl_metadata *md, const ProtobufCMessageDescriptor *desc,
                                                 const char *name, const char *what, int *rc) {
    const ProtobufCFieldDescriptor *fd = name ? protobuf_c_message_descriptor_get_field_by_name(desc, name) : NULL;
    if (!fd) {
        *rc = md_fail(md, "%s: unknown field '%s' in record type %s", what, name ? name : "(null)", desc->name);
        return NULL;
    }
    if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
        *rc = md_fail(md, "%s: field '%s' of %s is repeated; key fields must be singular", what, name, desc->name);
        return NULL;
    }
    if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
        *rc = md_fail(md, "%s: field '%s' of %s is a nested message; only scalar fields can be key fields", what, name,
                      desc->name);
        return NULL;
    }
    return fd;
}

int rl__md_type_of(const rl_metadata *md, const ProtobufCMessageDescriptor *desc) {
    if (!desc) return -1;
    for (int i = 0; i < md->n_types; i++)
        if (md->types[i].desc == desc) return i;
    for (int i = 0; i < md->n_types; i++)
        if (desc->name && !strcmp(md->types[i].desc->name, desc->name)) return i;
    return -1;
}

/* Find a type by full ("reclayer.Order") or short ("Order") name; -1 if absent. */
static int type_named(const rl_metadata *md, const char *name) {
    for (int i = 0; i < md->n_types; i++) {
        const ProtobufCMessageDescriptor *d = md->types[i].desc;
        if (!strcmp(d->name, name) || (d->short_name && !strcmp(d->short_name, name))) return i;
    }
    return -1;
}

int rl__md_index_named(const rl_metadata *md, const char *name) {
    for (int i = 0; i < md->n_indexes; i++)
        if (!strcmp(md->indexes[i].name, name)) return i;
    return -1;
}

int rl__md_index_layout(const rl_metadata *md, const char *name, rl__index_layout *out) {
    int i = rl__md_index_named(md, name);
    if (i < 0) return RL_E_INDEX_UNKNOWN;
    const rl__index *ix = &md->indexes[i];
    const rl__rtype *rt = &md->types[ix->type];
    if (rt->n_pk > RL__INDEX_MAX_COLS || ix->n_fields + rt->n_pk > RL__INDEX_MAX_COLS)
        return RL_E_UNSUPPORTED_OPERATION;
    out->name = ix->name;
    out->subspace_key = ix->subspace_key;
    out->n_fields = ix->n_fields;
    out->n_pk = rt->n_pk;
    for (int k = 0; k < rt->n_pk; k++) out->pk_pos[k] = ix->pk_pos[k];
    out->rebuildable = 1; /* indexed fields are single-valued scalars (key_field refuses the rest) */
    return RL_OK;
}

int rl_metadata_add_type(rl_metadata *md, const ProtobufCMessageDescriptor *desc, const char *const *pk_fields,
                         int n_pk) {
    int rc = RL_OK;
    const ProtobufCFieldDescriptor **pk = NULL;
    if (md->built) return md_fail(md, "metadata is already built");
    if (!desc || desc->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
        return md_fail(md, "record type: not a protobuf-c message descriptor");
    if (n_pk <= 0 || !pk_fields) return md_fail(md, "record type %s has no primary key", desc->name);
    if (rl__md_type_of(md, desc) >= 0) return md_fail(md, "record type %s added twice", desc->name);
    pk = rl__calloc((size_t)n_pk, sizeof *pk);
    if (!pk) return md_oom(md);
    for (int i = 0; i < n_pk; i++) {
        pk[i] = key_field(md, desc, pk_fields[i], "primary key", &rc);
        if (!pk[i]) goto fail;
        for (int j = 0; j < i; j++)
            if (pk[j] == pk[i]) {
                rc = md_fail(md, "primary key of %s names field '%s' twice", desc->name, pk_fields[i]);
                goto fail;
            }
    }
    rl__rtype *types = rl__realloc(md->types, (size_t)(md->n_types + 1) * sizeof *types);
    if (!types) {
        rc = md_oom(md);
        goto fail;
    }
    md->types = types;
    md->types[md->n_types] = (rl__rtype){desc, (uint32_t)md->n_types + 1, pk, n_pk};
    md->n_types++;
    return RL_OK;
fail:
    rl__free(pk);
    return rc;
}

int rl_metadata_add_value_index(rl_metadata *md, const char *type_name, const char *index_name,
                                const char *const *fields, int n_fields, const char *subspace_key) {
    int rc = RL_OK;
    rl__index ix = {0};
    if (md->built) return md_fail(md, "metadata is already built");
    if (!index_name || !*index_name) return md_fail(md, "index has no name");
    int t = type_name ? type_named(md, type_name) : -1;
    if (t < 0) return md_fail(md, "index %s: unknown record type '%s'", index_name, type_name ? type_name : "(null)");
    if (n_fields <= 0 || !fields) return md_fail(md, "index %s has no fields", index_name);
    if (rl__md_index_named(md, index_name) >= 0) return md_fail(md, "duplicate index name '%s'", index_name);
    const char *sk = subspace_key ? subspace_key : index_name;
    for (int i = 0; i < md->n_indexes; i++)
        if (!strcmp(md->indexes[i].subspace_key, sk))
            return md_fail(md, "index %s: subspace key '%s' already used by index %s", index_name, sk,
                           md->indexes[i].name);
    const rl__rtype *rt = &md->types[t];
    char what[160];
    snprintf(what, sizeof what, "index %s", index_name);
    ix.type = t;
    ix.n_fields = n_fields;
    ix.fields = rl__calloc((size_t)n_fields, sizeof *ix.fields);
    ix.pk_pos = rl__calloc((size_t)rt->n_pk, sizeof *ix.pk_pos);
    ix.name = rl__strdup(index_name);
    ix.subspace_key = rl__strdup(sk);
    if (!ix.fields || !ix.pk_pos || !ix.name || !ix.subspace_key) {
        rc = md_oom(md);
        goto fail;
    }
    for (int i = 0; i < n_fields; i++) {
        ix.fields[i] = key_field(md, rt->desc, fields[i], what, &rc);
        if (!ix.fields[i]) goto fail;
    }
    /* Java's buildPrimaryKeyComponentPositions: each pk column's position among the indexed
     * values, or -1 when it must be appended. */
    for (int k = 0; k < rt->n_pk; k++) {
        ix.pk_pos[k] = -1;
        for (int i = 0; i < n_fields; i++)
            if (ix.fields[i] == rt->pk[k]) {
                ix.pk_pos[k] = i;
                break;
            }
    }
    rl__index *arr = rl__realloc(md->indexes, (size_t)(md->n_indexes + 1) * sizeof *arr);
    if (!arr) {
        rc = md_oom(md);
        goto fail;
    }
    md->indexes = arr;
    md->indexes[md->n_indexes++] = ix;
    return RL_OK;
fail:
    rl__free(ix.fields);
    rl__free(ix.pk_pos);
    rl__free(ix.name);
    rl__free(ix.subspace_key);
    return rc;
}

int rl_metadata_build(rl_metadata *md) {
    if (md->built) return RL_OK;
    if (md->n_types == 0) return md_fail(md, "metadata has no record types");
    md->built = 1;
    return RL_OK;
}

/* ============================================================================================
 * Field reading
 * ========================================================================================== */

/* Whether field fd is set in msg (protobuf-c's presence rules). */
static int field_present(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd) {
    const char *base = (const char *)msg;
    const void *member = base + fd->offset;
    if (fd->label == PROTOBUF_C_LABEL_REQUIRED) return 1;
    if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) return *(const uint32_t *)(base + fd->quantifier_offset) == fd->id;
    if (fd->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = *(char *const *)member;
        if (fd->label == PROTOBUF_C_LABEL_NONE) return s != NULL;
        return s != NULL && s != (const char *)fd->default_value;
    }
    if (fd->label == PROTOBUF_C_LABEL_NONE) return 1;
    if (fd->quantifier_offset) return *(const protobuf_c_boolean *)(base + fd->quantifier_offset) != 0;
    return 1;
}

void rl__md_pack_field(rl__tuple_packer *pk, const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *fd,
                       int *out_present) {
    const void *m = (const char *)msg + fd->offset;
    *out_present = field_present(msg, fd);
    if (!*out_present) return;
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32: rl__tuple_pack_int(pk, *(const int32_t *)m); break;
    case PROTOBUF_C_TYPE_ENUM: rl__tuple_pack_int(pk, *(const int *)m); break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64: rl__tuple_pack_int(pk, *(const int64_t *)m); break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: rl__tuple_pack_uint(pk, *(const uint32_t *)m); break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64: rl__tuple_pack_uint(pk, *(const uint64_t *)m); break;
    case PROTOBUF_C_TYPE_BOOL: rl__tuple_pack_bool(pk, *(const protobuf_c_boolean *)m != 0); break;
    case PROTOBUF_C_TYPE_FLOAT: rl__tuple_pack_float(pk, *(const float *)m); break;
    case PROTOBUF_C_TYPE_DOUBLE: rl__tuple_pack_double(pk, *(const double *)m); break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)m;
        rl__tuple_pack_string(pk, s, strlen(s));
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = m;
        rl__tuple_pack_bytes(pk, b->data, b->len);
        break;
    }
    default: /* messages are refused by the builder (invariant 1) */ rl__tuple_pack_null(pk); break;
    }
}

int rl__md_pack_pk(const rl_metadata *md, int t, const ProtobufCMessage *msg, rl__tuple_packer *pk,
                   rl__errdetail *err) {
    const rl__rtype *rt = &md->types[t];
    for (int i = 0; i < rt->n_pk; i++) {
        int present;
        rl__md_pack_field(pk, msg, rt->pk[i], &present);
        if (!present) {
            rl__errdetail_set(err, "record of type %s has no value for primary-key field '%s'", rt->desc->name,
                              rt->pk[i]->name);
            return RL_E_RECORD_PK_MISSING;
        }
    }
    return RL_OK;
}

int rl__md_pack_index_entry(const rl_metadata *md, int ix, const ProtobufCMessage *msg, rl__tuple_packer *pk,
                            rl__errdetail *err) {
    const rl__index *x = &md->indexes[ix];
    const rl__rtype *rt = &md->types[x->type];
    for (int i = 0; i < x->n_fields; i++) {
        int present;
        rl__md_pack_field(pk, msg, x->fields[i], &present);
        if (!present) rl__tuple_pack_null(pk);
    }
    for (int k = 0; k < rt->n_pk; k++) {
        int present;
        if (x->pk_pos[k] >= 0) {
            if (!field_present(msg, rt->pk[k])) goto missing;
            continue;
        }
        rl__md_pack_field(pk, msg, rt->pk[k], &present);
        if (!present) goto missing;
    }
    return RL_OK;
missing:
    rl__errdetail_set(err, "record of type %s has no value for a primary-key field", rt->desc->name);
    return RL_E_RECORD_PK_MISSING;
}

/* ============================================================================================
 * Union encoding of stored records
 * ========================================================================================== */

static void *pb_alloc(void *ud, size_t n) {
    (void)ud;
    return rl__malloc(n ? n : 1);
}

static void pb_free(void *ud, void *p) {
    (void)ud;
    rl__free(p);
}

ProtobufCAllocator rl__record_allocator = {pb_alloc, pb_free, NULL};

int rl__record_serialize(const rl_metadata *md, int t, const ProtobufCMessage *msg, rl_buf *out) {
    size_t len = protobuf_c_message_get_packed_size(msg);
    rl__pb_put_varint(out, ((uint64_t)md->types[t].union_field << 3) | 2);
    rl__pb_put_varint(out, len);
    if (rl__buf_reserve(out, len) != RL_OK) return RL_E_OUT_OF_MEMORY;
    size_t packed = protobuf_c_message_pack(msg, out->data + out->len);
    if (packed != len) return RL_E_INTERNAL_ERROR;
    out->len += len;
    out->data[out->len] = 0;
    return rl__buf_error(out);
}

int rl__record_parse(const rl_metadata *md, const uint8_t *p, size_t n, int *out_type, ProtobufCMessage **out_msg,
                     rl__errdetail *err) {
    return rl__record_parse_with(md, p, n, &rl__record_allocator, out_type, out_msg, err);
}

int rl__record_parse_with(const rl_metadata *md, const uint8_t *p, size_t n, ProtobufCAllocator *alloc, int *out_type,
                          ProtobufCMessage **out_msg, rl__errdetail *err) {
    size_t i = 0;
    uint64_t tag, len;
    *out_msg = NULL;
    *out_type = -1;
    if (rl__pb_varint(p, n, &i, &tag, 10) || (tag & 7) != 2) {
        rl__errdetail_set(err, "record union: bad or missing length-delimited tag");
        return RL_E_RECORD_PARSE_FAILED;
    }
    if (rl__pb_varint(p, n, &i, &len, 10) || len != n - i) {
        rl__errdetail_set(err, "record union: field length does not match the stored bytes");
        return RL_E_RECORD_PARSE_FAILED;
    }
    uint64_t field = tag >> 3;
    int t = -1;
    for (int k = 0; k < md->n_types; k++)
        if (md->types[k].union_field == field) t = k;
    if (t < 0) {
        rl__errdetail_set(err, "record union field %llu names no record type", (unsigned long long)field);
        return RL_E_RECORD_TYPE_UNKNOWN;
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(md->types[t].desc, alloc, (size_t)len, p + i);
    if (!m) {
        rl__errdetail_set(err, "record of type %s does not parse", md->types[t].desc->name);
        return RL_E_RECORD_PARSE_FAILED;
    }
    *out_type = t;
    *out_msg = m;
    return RL_OK;
}
