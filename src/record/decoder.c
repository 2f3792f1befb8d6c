/* decoder.c — reusable record decoding for scans (rl__record_decoder, declared in record_int.h).
 *
 * The query cursor decodes one record per row. rl_store_decode_record is the strict, general
 * decoder, but it copies every key-value into an unsplitter, allocates the unsplitter's buffers,
 * a primary-key copy and every protobuf field afresh for each record. This decoder serves the
 * same contract for a stream of records with no allocation in steady state:
 *
 *   1. Fast path: when the key-values are exactly the common layout of primary key pk — an
 *      optional valid version key (pk, -1) followed by either one (pk, 0) or the chunks (pk, 1),
 *      (pk, 2), ... without a gap — the record's bytes are taken in place (suffix 0) or
 *      concatenated into a reused buffer (chunks), and parsed with a scratch allocator.
 *   2. Anything else (defects, strays, a longer primary key inside the range, a record that does
 *      not parse) goes to rl_store_decode_record, so results, error codes and detail messages
 *      are exactly the strict decoder's. Only RL_E_OUT_OF_MEMORY is decided by the fast path.
 *   3. Scratch memory: one block, bump-allocated; what does not fit is allocated separately and
 *      chained (`big`). At the next decode the chain is freed and the block regrown to what the
 *      last record needed, so after the largest record has been seen, decoding allocates
 *      nothing. Decoded messages are never freed one by one (the allocator's free is a no-op).
 *   4. Across decoders (one per query cursor, so a new one per query): rl__decoder_recycle
 *      parks the scratch block and the chunk buffer in a per-thread slot (`park`), first
 *      growing the block to what the last record needed, and rl__decoder_init takes them back.
 *      A query of split records (100 KB chunks) then allocates neither its reassembly buffer
 *      nor the memory protobuf-c copies the bytes field into, query after query, instead of
 *      allocating and freeing blocks that glibc returns to the kernel. The slot holds at most
 *      one block and one buffer of at most PARK_MAX bytes each, and is freed when its thread
 *      exits (rl__thread_at_exit). A parked block holds no live record: what a decoder
 *      handed out is invalid once it is recycled, exactly as after rl__decoder_release.
 *   5. The fast path unpacks flat messages itself (rl__pb_unpack_flat: singular scalar, enum,
 *      string and bytes fields, each at most once, all known) into the scratch, without
 *      protobuf-c's generic two-pass unpack (its cost was ~10 % of a small-record scan); a split
 *      record's bytes fields point into the reassembly buffer (d->data, which lives exactly as
 *      long as the decoded record: both until the next decode) instead of being copied again —
 *      of a 100 KB record's three copies (the read's, the reassembly's, this one) one is left
 *      out. rl__decoder_decode_in_place (a caller whose key-values outlive the record: the query
 *      cursor) leaves out the reassembly too when the chunks lie end to end (a range read lays
 *      large values so: storage.c range_merged), and an unsplit record's bytes stay in its value.
 *      It
 *      declines everything else, and anything doubtful (unknown or repeated field numbers,
 *      wire type mismatches, truncation, over-long varints), and protobuf-c decides those as
 *      before; what it accepts, protobuf-c accepts with the same message (test record_9_7).
 */
#include <stdint.h>
#include <string.h>

#include "base/alloc.h"
#include "base/thread_exit.h"
#include "record/pbwire.h"
#include "record/record_int.h"

#define PARK_MAX ((size_t)4 << 20) /* largest scratch block or chunk buffer parked (bytes) */

/* The per-thread slot of invariant 4. mem is NULL / data's cap is 0 when empty. */
static _Thread_local struct {
    uint8_t *mem;
    size_t mem_cap;
    rl_buf data;
    int registered; /* park_drain runs at this thread's exit (rl__thread_at_exit) */
} park;

/* Thread exit: free the parked memory. */
static void park_drain(void) {
    rl__free(park.mem);
    park.mem = NULL;
    park.mem_cap = 0;
    if (park.data.cap) rl__buf_release(&park.data);
    park.registered = 0;
}

struct rl__scratch_big {
    rl__scratch_big *next;
    _Alignas(16) unsigned char mem[];
};

#define NOT_COMMON (-1) /* fast_decode: not the common layout; use the strict path */

/* The scratch allocator (protobuf-c's alloc): 16-byte aligned, from the block if it fits. */
static void *scratch_alloc(void *ud, size_t n) {
    rl__record_decoder *d = ud;
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) { /* n near SIZE_MAX */
        d->oom = 1;
        return NULL;
    }
    if (need == 0) need = 16;
    d->want += need;
    if (d->mem && d->mem_cap - d->mem_used >= need) {
        void *p = d->mem + d->mem_used;
        d->mem_used += need;
        return p;
    }
    if (need > SIZE_MAX - sizeof(rl__scratch_big)) {
        d->oom = 1;
        return NULL;
    }
    rl__scratch_big *b = rl__malloc(sizeof *b + need);
    if (!b) {
        d->oom = 1;
        return NULL;
    }
    b->next = d->big;
    d->big = b;
    return b->mem;
}

static void scratch_free(void *ud, void *p) {
    (void)ud;
    (void)p;
}

static void free_chain(rl__record_decoder *d) {
    while (d->big) {
        rl__scratch_big *n = d->big->next;
        rl__free(d->big);
        d->big = n;
    }
}

/* Recycle the scratch for the next record: free the overflow chain and, if the last record
 * needed more than the block holds, replace the block by a larger one (keeping the old block if
 * that allocation fails: the overflow chain still serves). */
static void scratch_reset(rl__record_decoder *d) {
    free_chain(d);
    if (d->want > d->mem_cap) {
        size_t cap = d->want + d->want / 4 + 256;
        uint8_t *m = cap > d->want ? rl__malloc(cap) : NULL;
        if (m) {
            rl__free(d->mem);
            d->mem = m;
            d->mem_cap = cap;
        }
    }
    d->mem_used = 0;
    d->want = 0;
    d->oom = 0;
}

/* Start empty, or with the memory parked by this thread (invariant 4). Cannot fail. */
void rl__decoder_init(rl__record_decoder *d) {
    memset(d, 0, sizeof *d);
    rl__buf_init(&d->data);
    d->mem = park.mem;
    d->mem_cap = park.mem_cap;
    park.mem = NULL;
    park.mem_cap = 0;
    if (park.data.cap) {
        d->data = park.data; /* a move: the slot forgets it */
        rl__buf_init(&park.data);
        rl__buf_reset(&d->data);
    }
    d->pa.alloc = scratch_alloc;
    d->pa.free = scratch_free;
    d->pa.allocator_data = d;
}

void rl__decoder_release(rl__record_decoder *d) {
    free_chain(d); /* not scratch_reset: it could grow the block just to free it */
    rl__free(d->mem);
    rl__buf_release(&d->data);
    rl_record_release(&d->slow);
    memset(d, 0, sizeof *d);
}

/* Release d, parking its memory for this thread's next decoder (invariant 4). The block is first
 * grown to what the last record needed (one allocation, made only while the slot is free and the
 * size within PARK_MAX; on failure the old block is parked). What does not fit the slot is freed. */
void rl__decoder_recycle(rl__record_decoder *d) {
    if (!park.registered) park.registered = rl__thread_at_exit(park_drain);
    if (park.registered && !park.mem && d->want <= PARK_MAX) {
        free_chain(d);
        if (d->want > d->mem_cap) scratch_reset(d); /* grows the block (or keeps the old one) */
        if (d->mem_cap <= PARK_MAX) {
            park.mem = d->mem;
            park.mem_cap = d->mem_cap;
            d->mem = NULL;
            d->mem_cap = 0;
        }
    }
    if (park.registered && !park.data.cap && d->data.cap && d->data.cap <= PARK_MAX) {
        park.data = d->data;
        rl__buf_init(&d->data);
    }
    rl__decoder_release(d);
}

/* ---- Flat protobuf messages (rl__pb_unpack_flat) ------------------------------------------ */

/* Varints: rl__pb_varint (pbwire.h), shared with the record union framing. protobuf-c reads
 * values with up to 10 bytes, but tags and length prefixes with up to 5 (fuzz_pb_flat found the
 * difference). */
static inline int pb_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    return rl__pb_varint(p, n, i, v, 10);
}

/* Tags and length prefixes: at most 5 bytes, as protobuf-c reads them. */
static inline int pb_varint5(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    return rl__pb_varint(p, n, i, v, 5);
}

ProtobufCMessage *rl__pb_unpack_flat(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                                     const uint8_t *p, size_t n, int borrow_bytes) {
    uint64_t seen = 0;
    size_t i = 0;
    if (desc->n_fields > 64) return NULL;
    ProtobufCMessage *m = alloc->alloc(alloc->allocator_data, desc->sizeof_message);
    if (!m) return NULL;
    desc->message_init(m);
    uint8_t *base = (uint8_t *)m;
    while (i < n) {
        uint64_t tag, v = 0;
        if (pb_varint5(p, n, &i, &tag) || tag > 0xffffffffu) return NULL;
        uint32_t id = (uint32_t)(tag >> 3), wt = (uint32_t)(tag & 7);
        unsigned f = 0;
        while (f < desc->n_fields && desc->fields[f].id != id) f++;
        if (f == desc->n_fields || (seen >> f) & 1) return NULL;
        seen |= (uint64_t)1 << f;
        const ProtobufCFieldDescriptor *fd = &desc->fields[f];
        if (fd->label == PROTOBUF_C_LABEL_REPEATED || (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) return NULL;
        void *dst = base + fd->offset;
        switch (fd->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_ENUM:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_BOOL: {
            if (wt != 0 || pb_varint(p, n, &i, &v)) return NULL;
            uint32_t v32 = (uint32_t)v;
            if (fd->type == PROTOBUF_C_TYPE_SINT32) {
                uint32_t z = (v32 >> 1) ^ (0u - (v32 & 1));
                memcpy(dst, &z, 4);
            } else if (fd->type == PROTOBUF_C_TYPE_SINT64) {
                uint64_t z = (v >> 1) ^ (0u - (v & 1));
                memcpy(dst, &z, 8);
            } else if (fd->type == PROTOBUF_C_TYPE_BOOL) {
                protobuf_c_boolean b = v != 0;
                memcpy(dst, &b, sizeof b);
            } else if (fd->type == PROTOBUF_C_TYPE_INT64 || fd->type == PROTOBUF_C_TYPE_UINT64) {
                memcpy(dst, &v, 8);
            } else {
                memcpy(dst, &v32, 4);
            }
            break;
        }
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
            if (wt != 5 || n - i < 4) return NULL;
            memcpy(dst, p + i, 4); /* little-endian host (x86-64, aarch64) */
            i += 4;
            break;
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
            if (wt != 1 || n - i < 8) return NULL;
            memcpy(dst, p + i, 8);
            i += 8;
            break;
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_BYTES: {
            if (wt != 2 || pb_varint5(p, n, &i, &v) || v > 0xffffffffu || v > n - i) return NULL;
            size_t len = (size_t)v;
            if (fd->type == PROTOBUF_C_TYPE_STRING) {
                char *c = alloc->alloc(alloc->allocator_data, len + 1);
                if (!c) return NULL;
                if (len) memcpy(c, p + i, len);
                c[len] = 0;
                memcpy(dst, &c, sizeof c);
            } else {
                ProtobufCBinaryData bd = {len, NULL};
                if (len && borrow_bytes) {
                    bd.data = (uint8_t *)(uintptr_t)(p + i);
                } else if (len) {
                    bd.data = alloc->alloc(alloc->allocator_data, len);
                    if (!bd.data) return NULL;
                    memcpy(bd.data, p + i, len);
                }
                memcpy(dst, &bd, sizeof bd);
            }
            i += len;
            break;
        }
        default: return NULL; /* messages (and anything newer) */
        }
        if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->quantifier_offset && fd->type != PROTOBUF_C_TYPE_STRING) {
            protobuf_c_boolean t = 1;
            memcpy(base + fd->quantifier_offset, &t, sizeof t);
        }
    }
    for (unsigned f = 0; f < desc->n_fields; f++)
        if (desc->fields[f].label == PROTOBUF_C_LABEL_REQUIRED && !((seen >> f) & 1)) return NULL;
    return m;
}

/* The record union of stored bytes p[0..n) (as rl__record_parse_with reads it) unpacked by
 * rl__pb_unpack_flat (borrow: its bytes fields point into p): RL_OK with *out_type / *out_msg, or
 * NOT_COMMON (anything it declines, so
 * the caller takes rl__record_parse_with, which decides every error). */
static int parse_flat(const rl_metadata *md, const uint8_t *p, size_t n, ProtobufCAllocator *pa, int borrow,
                      int *out_type, ProtobufCMessage **out_msg) {
    size_t i = 0;
    uint64_t tag, len;
    if (pb_varint(p, n, &i, &tag) || (tag & 7) != 2 || pb_varint(p, n, &i, &len) || len != n - i) return NOT_COMMON;
    int t = -1;
    for (int k = 0; k < md->n_types; k++)
        if (md->types[k].union_field == tag >> 3) t = k;
    if (t < 0) return NOT_COMMON;
    ProtobufCMessage *m = rl__pb_unpack_flat(md->types[t].desc, pa, p + i, (size_t)len, borrow);
    if (!m) return NOT_COMMON;
    *out_type = t;
    *out_msg = m;
    return RL_OK;
}

/* The suffix of kv's key if the key is exactly records prefix + pk + one integer element.
 * Returns 0 and sets *out, or -1. The suffixes the common layout uses (-1, 0 and 1..255) have
 * one- and two-byte encodings (0x13 0xfe, 0x14, 0x15 n with n != 0), recognised directly;
 * anything else takes the tuple decoder, which accepts exactly the same keys (test record_9_6). */
static int suffix_of(const rl_store *s, const uint8_t *pk, size_t pk_len, const rl_keyvalue *kv, int64_t *out) {
    size_t pre = s->rec_prefix_len;
    rl__tuple_iter it;
    rl__tuple_elem e;
    if (kv->key_len <= pre + pk_len || memcmp(kv->key + pre, pk, pk_len) != 0 ||
        memcmp(kv->key, s->rec_prefix, pre) != 0)
        return -1;
    const uint8_t *x = kv->key + pre + pk_len;
    size_t xl = kv->key_len - pre - pk_len;
    if (xl == 1 && x[0] == 0x14) {
        *out = 0;
        return 0;
    }
    if (xl == 2 && x[0] == 0x15 && x[1] != 0) {
        *out = x[1];
        return 0;
    }
    if (xl == 2 && x[0] == 0x13 && x[1] == 0xfe) {
        *out = -1;
        return 0;
    }
    rl__tuple_iter_init(&it, x, xl);
    if (rl__tuple_iter_next(&it, &e) != RL_OK || e.type != RL_TT_INT || !e.fits_i64) return -1;
    *out = e.i; /* before the next call, which may overwrite e */
    if (rl__tuple_iter_next(&it, &e) != RL_E_NOT_FOUND) return -1;
    return 0;
}

/* Invariant 1. Returns RL_OK (out filled from the scratch), RL_E_OUT_OF_MEMORY or NOT_COMMON. */
static int fast_decode(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len,
                       const rl_keyvalue *kvs, int n, int stable, rl_record *out) {
    int i = 0, chunks = 0, t;
    int64_t sfx;
    const uint8_t *data;
    size_t len;
    ProtobufCMessage *m = NULL;
    if (n < 1 || suffix_of(s, pk, pk_len, &kvs[0], &sfx)) return NOT_COMMON;
    if (sfx == RL__SUFFIX_VERSION) {
        if (kvs[0].value_len != 13 || kvs[0].value[0] != 0x33) return NOT_COMMON;
        out->has_version = 1;
        memcpy(out->version, kvs[0].value + 1, 12);
        i = 1;
        if (i >= n || suffix_of(s, pk, pk_len, &kvs[i], &sfx)) return NOT_COMMON;
    }
    if (sfx == RL__SUFFIX_UNSPLIT) {
        if (i + 1 != n) return NOT_COMMON;
        data = kvs[i].value;
        len = kvs[i].value_len;
    } else if (sfx == RL__SUFFIX_FIRST_CHUNK) {
        int64_t expect = RL__SUFFIX_FIRST_CHUNK;
        size_t total = 0;
        int first = i, apart = !stable; /* the chunks lie end to end (stable kvs only) */
        for (int j = i; j < n; j++, expect++) {
            if (suffix_of(s, pk, pk_len, &kvs[j], &sfx) || sfx != expect) return NOT_COMMON;
            if (j > first && (!kvs[j - 1].value || kvs[j - 1].value + kvs[j - 1].value_len != kvs[j].value)) apart = 1;
            total += kvs[j].value_len;
        }
        if (!apart) {
            data = kvs[first].value;
            len = total;
        } else {
            rl__buf_reset(&d->data);
            if (rl__buf_reserve(&d->data, total)) return RL_E_OUT_OF_MEMORY; /* one allocation, not doublings */
            for (int j = first; j < n; j++) rl__buf_append(&d->data, kvs[j].value, kvs[j].value_len);
            if (rl__buf_error(&d->data)) return RL_E_OUT_OF_MEMORY;
            data = d->data.data;
            len = d->data.len;
        }
        chunks = (int)(expect - RL__SUFFIX_FIRST_CHUNK);
    } else {
        return NOT_COMMON;
    }
    /* Flat messages (every record type of the benchmarks) without protobuf-c's generic
     * two-pass unpack; the rest, and any doubt, through protobuf-c. A declined attempt leaves
     * only scratch memory behind (reset with the next record). */
    if (parse_flat(s->md, data, len, &d->pa, stable || chunks > 0, &t, &m) != RL_OK) {
        if (d->oom) return RL_E_OUT_OF_MEMORY;
        if (rl__record_parse_with(s->md, data, len, &d->pa, &t, &m, NULL) != RL_OK)
            return d->oom ? RL_E_OUT_OF_MEMORY : NOT_COMMON;
    }
    uint8_t *pkc = scratch_alloc(d, pk_len ? pk_len : 1);
    if (!pkc) return RL_E_OUT_OF_MEMORY;
    memcpy(pkc, pk, pk_len);
    out->type = s->md->types[t].desc;
    out->msg = m;
    out->pk = pkc;
    out->pk_len = pk_len;
    out->stored_len = len;
    out->n_chunks = chunks;
    return RL_OK;
}

static int decode(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len, const rl_keyvalue *kvs,
                  int n, int stable, rl_record *out, rl__errdetail *err) {
    memset(out, 0, sizeof *out);
    rl_record_release(&d->slow);
    scratch_reset(d);
    int rc = fast_decode(d, s, pk, pk_len, kvs, n, stable, out);
    if (rc != NOT_COMMON) {
        if (rc) memset(out, 0, sizeof *out);
        return rc;
    }
    memset(out, 0, sizeof *out);
    if ((rc = rl__store_decode(s, kvs, n, &d->slow, err))) return rc;
    *out = d->slow;
    return RL_OK;
}

int rl__decoder_decode(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len,
                       const rl_keyvalue *kvs, int n, rl_record *out, rl__errdetail *err) {
    return decode(d, s, pk, pk_len, kvs, n, 0, out, err);
}

int rl__decoder_decode_in_place(rl__record_decoder *d, const rl_store *s, const uint8_t *pk, size_t pk_len,
                                const rl_keyvalue *kvs, int n, rl_record *out, rl__errdetail *err) {
    return decode(d, s, pk, pk_len, kvs, n, 1, out, err);
}
