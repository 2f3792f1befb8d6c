/* mapped.c — FoundationDB's mapped range (getMappedRange) at a storage engine: the mapper parser,
 * the secondary-key constructor and the mapped read itself (see mapped.h for the contract).
 *
 * ---- The mapper ------------------------------------------------------------------------------
 *
 * rl__mapper_parse turns the mapper tuple into a short list of segments, kept in the caller's
 * arena:
 *
 *     LITERAL  bytes already tuple-encoded, copied into P as they are (adjacent literals merged)
 *     KEY i    splice element i of the index key, raw (its original encoding)
 *     VALUE i  splice element i of the index value, raw
 *
 * plus is_range (the mapper ended with "{...}"). Each string element (byte or unicode) of the
 * mapper is classified in FoundationDB's order, on its unescaped contents:
 *   1. it contains "{{" or "}}": every "{{" becomes "{", then every "}}" becomes "}", and the
 *      result is a literal re-encoded as a BYTE string (even if the element was unicode);
 *   2. it looks like "{K[...]}" or "{V[...]}" (at least 5 characters, "{K[" or "{V[" first,
 *      "]}" last): a placeholder. The index must be one or more decimal digits and fit an int,
 *      else RL_E_MAPPER_BAD_INDEX. Differences from FoundationDB (which takes std::stoi of the
 *      middle and only treats strings longer than 5 characters as placeholders): "{K[1x]}",
 *      "{K[-1]}", "{K[ 1]}" and "{K[]}" are all RL_E_MAPPER_BAD_INDEX here instead of index 1,
 *      a bad index, an error, or a literal respectively;
 *   3. it is exactly "{...}": the range marker, which must be the last element
 *      (else RL_E_MAPPER_BAD_RANGE_DESCRIPTOR);
 *   4. anything else is a literal, copied raw (so "abc{K[1]}" is just a string).
 * Every other element type (integers, nested tuples, versionstamps, ...) is a raw literal.
 *
 * rl__mapper_construct builds P for one index entry. The key and value are only checked as tuples
 * when some placeholder refers to them (a literal-only mapper works whatever they hold). The
 * parse records the largest key and value index and the literals' total length, so that per
 * entry one walk of the key (and one of the value, if referenced) both validates the whole tuple
 * (an error anywhere is RL_E_KEY_NOT_TUPLE / RL_E_VALUE_NOT_TUPLE, as with FoundationDB's full
 * unpack) and records the spans of the elements the placeholders need (find_spans); P's exact
 * size is then known before it is written. The walk measures the common elements itself
 * (integers, byte strings and ASCII strings: quick_elem_end, accepting exactly what the tuple
 * decoder accepts; test mapped_1_15) and asks rl__tuple_iter_next for any other element, well
 * formed or not. Placeholder indexes >= MAX_SPANS (32) take the
 * general path (validate, then rl__tuple_get per placeholder); both give identical bytes and
 * errors (test mapped_1_13).
 * Within one mapped read every index key lies in [begin, end), so all of them start with the
 * same lcp(begin, end) bytes (a key differing earlier, or shorter, would sort outside). The
 * leading elements of the first key walked that end strictly before that many bytes (the byte
 * after an element is shared too: a string's or nested tuple's end is decided by looking one
 * byte past its terminator) parse identically in every key: the same bytes, the same
 * validation outcome, the same spans. So does one ending exactly at that many bytes in every key
 * whose next byte is not 0xff (or that ends there): such keys use the memo with it (a subspace
 * prefix's last string, e.g. the index name, is not walked per key), others walk in full. A
 * key_memo records them once; later keys take their spans from the memo (re-based on the key)
 * and walk only the rest (the subspace's strings are the costly part of the walk). Test
 * mapped_2_14 compares with the plain walk.
 *
 * ---- The mapped read and its accounting ------------------------------------------------------
 *
 * rl__storage_get_mapped_range follows FoundationDB's storage server (getMappedKeyValuesQ and
 * mapKeyValues, reference §4):
 *   1. Scan the index range [begin, end) at version v with the row limit, in the requested
 *      direction, with a byte budget of target_bytes * 0.2 (FRACTION_INDEX_BYTELIMIT_PREFETCH;
 *      at least 1 byte when target_bytes > 0, so one index entry is always read). The index
 *      byte budget counts key + value bytes, like rl__storage_get_range.
 *   2. remaining = target_bytes. Walk the scanned entries in batches of `batch` (default 10,
 *      MAX_PARALLEL_QUICK_GET_VALUE). Before a batch starts, if target_bytes > 0 and
 *      remaining <= 0, stop. Every entry of a started batch is mapped and kept (FoundationDB's
 *      default STRICTLY_ENFORCE_BYTE_LIMIT = false), so a reply can overshoot the budget by up to
 *      batch - 1 entries.
 *   3. After a batch, each entry is charged: index key + value bytes, plus the key + value bytes
 *      of every secondary key-value it returned. (FoundationDB also adds a constant per
 *      KeyValueRef; we charge payload bytes only, which is what rl__storage_get_range counts.)
 *   4. *out_more = 1 if the index scan said more rows remain, or if some scanned entries were
 *      not mapped because the budget ran out. The caller resumes after the last returned index
 *      key (before the first one in reverse).
 * Secondary reads: range mode reads [P, strinc(P)) (which includes P itself; for an empty P the
 * whole normal keyspace ["", "\xff")) with at most secondary_row_limit rows (default 2000,
 * QUICK_GET_KEY_VALUES_LIMIT) and secondary_byte_limit bytes (default 1e7,
 * QUICK_GET_KEY_VALUES_LIMIT_BYTES); a cut-off sets the entry's `more`. Point mode reads P; a
 * missing key is an entry with n_kvs = 0. With a batch hook (rl_secondary_batch_fn) each batch's
 * secondaries are built first and handed to the hook in one call (it reads them, e.g. locally and
 * from other storage servers in parallel, and reports served_locally per item); without one they
 * are local reads of the same engine at the same version (served_locally = 1), issued one after
 * another: within a process a local read has nothing to overlap, so the batch size then only sets
 * how often the byte budget is checked, exactly as in FoundationDB. Any error of a secondary read
 * (or of building P) fails the whole call.
 *
 * ---- Cost ------------------------------------------------------------------------------------
 *
 * Local reads (fn == NULL) take the engine's read lock once for the index scan and every
 * secondary, so the whole reply is one consistent walk at v (it is anyway: v is fixed) and pays
 * one lock round trip instead of one per entry. P is written straight into the arena with room
 * for its end key (strinc(P), or P + "\0" for a point read) behind it: one arena allocation per
 * entry, no intermediate buffer (construct_in_arena). The arena's block size grows
 * geometrically while the reply grows, so a 1,000-entry reply costs a few dozen allocations
 * rather than two per entry. The caller's block size is restored at the end. With a batch hook
 * no lock is held while it runs (it may block on the network): the index scan holds the read
 * lock, then each batch takes it once more for the items the hook hands back to be read here
 * (rl__secondary_item.read_here: a storage server's secondaries in its own shards), so local
 * secondaries cost what they cost without a hook.
 */
#include "storage/mapped.h"

#include <limits.h>
#include <string.h>

#include "base/alloc.h"
#include "reclayer/error.h"
#include "storage/storage_int.h"
#include "tuple/tuple.h"

/* ==== The mapper ============================================================================ */

enum { SEG_LITERAL = 0, SEG_KEY = 1, SEG_VALUE = 2 };

typedef struct {
    int kind;           /* SEG_LITERAL, SEG_KEY or SEG_VALUE */
    const uint8_t *lit; /* SEG_LITERAL: tuple-encoded bytes (in the arena) */
    size_t lit_len;
    size_t index; /* SEG_KEY / SEG_VALUE: element index */
} mapper_seg;

struct rl__mapper {
    mapper_seg *segs; /* n_segs segments, in order (in the arena) */
    size_t n_segs;
    int is_range;     /* the mapper ended with "{...}" */
    int uses_key;     /* some segment is SEG_KEY: the key must parse as a tuple */
    int uses_value;   /* some segment is SEG_VALUE */
    size_t max_key;   /* uses_key: the largest SEG_KEY index */
    size_t max_value; /* uses_value: the largest SEG_VALUE index */
    size_t lit_len;   /* bytes of all literal segments together */
};

/* Element spans found by one walk of an index key or value (span_walk): raw[i], raw_len[i] for
 * elements 0..n-1, n <= MAX_SPANS. Placeholders with larger indexes take the general path. */
enum { MAX_SPANS = 32 };
typedef struct {
    const uint8_t *raw[MAX_SPANS];
    size_t raw_len[MAX_SPANS];
    size_t n; /* elements recorded (min(count, want)) */
} elem_spans;

/* Replace every non-overlapping occurrence (left to right) of the two-byte pattern `pat` with
 * its first byte, in place on s[0..*len). Returns 1 if anything was replaced. */
static int unescape_pair(uint8_t *s, size_t *len, uint8_t c) {
    size_t r = 0, w = 0, n = *len;
    int changed = 0;
    while (r < n) {
        if (r + 1 < n && s[r] == c && s[r + 1] == c) {
            s[w++] = c;
            r += 2;
            changed = 1;
        } else {
            s[w++] = s[r++];
        }
    }
    *len = w;
    return changed;
}

/* Parse the decimal index of a placeholder body s[0..n) (the part between "{K[" and "]}").
 * Strict: one or more digits, value <= INT_MAX. RL_OK or RL_E_MAPPER_BAD_INDEX. */
static int parse_index(const uint8_t *s, size_t n, size_t *out) {
    size_t v = 0;
    if (n == 0) return RL_E_MAPPER_BAD_INDEX;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return RL_E_MAPPER_BAD_INDEX;
        v = v * 10 + (size_t)(s[i] - '0');
        if (v > 2147483647u) return RL_E_MAPPER_BAD_INDEX;
    }
    *out = v;
    return RL_OK;
}

/* Move the pending literal bytes lit[0..len) into a new SEG_LITERAL segment in arena a, then
 * empty lit. No-op when lit is empty. RL_OK or RL_E_OUT_OF_MEMORY. */
static int flush_literal(rl__mapper *m, rl_buf *lit, rl_arena *a) {
    if (rl__buf_error(lit))
        return RL_E_OUT_OF_MEMORY; /* before the length: a failed append
                                                          leaves it 0 */
    if (lit->len == 0) return RL_OK;
    uint8_t *p = rl__arena_memdup(a, lit->data, lit->len);
    if (!p) return RL_E_OUT_OF_MEMORY;
    mapper_seg *s = &m->segs[m->n_segs++];
    s->kind = SEG_LITERAL;
    s->lit = p;
    s->lit_len = lit->len;
    m->lit_len += lit->len;
    s->index = 0;
    rl__buf_reset(lit);
    return RL_OK;
}

/* Parse a mapper (see the file header). On RL_OK *out points into arena a; nothing is borrowed
 * from mapper. Errors: RL_E_MAPPER_NOT_TUPLE, RL_E_MAPPER_BAD_INDEX,
 * RL_E_MAPPER_BAD_RANGE_DESCRIPTOR, RL_E_OUT_OF_MEMORY, RL_E_INVALID_ARGUMENT (NULL arguments). */
int rl__mapper_parse(const void *mapper, size_t len, rl_arena *a, rl__mapper **out) {
    rl_buf lit, str;
    rl__tuple_iter it;
    rl__tuple_elem e;
    size_t count = 0, i;
    rl__mapper *m;
    int rc;

    if (!a || !out || (!mapper && len)) return RL_E_INVALID_ARGUMENT;
    *out = NULL;
    if (len == 0) mapper = "";
    if (rl__tuple_validate(mapper, len, &count) != RL_OK) return RL_E_MAPPER_NOT_TUPLE;
    if (count > ((size_t)-1) / (2 * sizeof(mapper_seg)) - 1) return RL_E_MAPPER_NOT_TUPLE;

    m = rl__arena_alloc(a, sizeof *m);
    if (!m) return RL_E_OUT_OF_MEMORY;
    memset(m, 0, sizeof *m);
    /* At most one placeholder and one literal run before it per element, plus a final literal. */
    m->segs = rl__arena_alloc(a, (2 * count + 1) * sizeof(mapper_seg));
    if (!m->segs) return RL_E_OUT_OF_MEMORY;

    rl__buf_init(&lit);
    rl__buf_init(&str);
    rl__tuple_iter_init(&it, mapper, len);
    for (i = 0; i < count; i++) {
        rc = rl__tuple_iter_next(&it, &e);
        if (rc != RL_OK) {
            rc = RL_E_MAPPER_NOT_TUPLE; /* validate said otherwise: treat as not a tuple */
            goto fail;
        }
        if (e.type != RL_TT_BYTES && e.type != RL_TT_STRING) {
            rl__buf_append(&lit, e.raw, e.raw_len);
            continue;
        }
        rl__buf_reset(&str);
        rl__tuple_elem_unescape(&e, &str);
        if (rl__buf_error(&str)) {
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        const uint8_t *s = str.data;
        size_t n = str.len;
        int has_open = 0, has_close = 0;
        for (size_t j = 0; j + 1 < n; j++) {
            if (s[j] == '{' && s[j + 1] == '{') has_open = 1;
            if (s[j] == '}' && s[j + 1] == '}') has_close = 1;
        }
        if (has_open || has_close) {
            /* 1. Escapes: a literal, re-emitted as a byte string. */
            size_t nl = n;
            rl__tuple_packer pk;
            unescape_pair(str.data, &nl, '{');
            unescape_pair(str.data, &nl, '}');
            rl__tuple_packer_init(&pk, &lit);
            rl__tuple_pack_bytes(&pk, str.data, nl);
        } else if (n >= 5 && s[0] == '{' && (s[1] == 'K' || s[1] == 'V') && s[2] == '[' && s[n - 2] == ']' &&
                   s[n - 1] == '}') {
            /* 2. A placeholder. */
            size_t idx;
            rc = parse_index(s + 3, n - 5, &idx);
            if (rc != RL_OK) goto fail;
            rc = flush_literal(m, &lit, a);
            if (rc != RL_OK) goto fail;
            mapper_seg *sg = &m->segs[m->n_segs++];
            sg->kind = s[1] == 'K' ? SEG_KEY : SEG_VALUE;
            sg->lit = NULL;
            sg->lit_len = 0;
            sg->index = idx;
            if (s[1] == 'K') {
                if (!m->uses_key || idx > m->max_key) m->max_key = idx;
                m->uses_key = 1;
            } else {
                if (!m->uses_value || idx > m->max_value) m->max_value = idx;
                m->uses_value = 1;
            }
        } else if (n == 5 && memcmp(s, "{...}", 5) == 0) {
            /* 3. The range marker: last element only. */
            if (i != count - 1) {
                rc = RL_E_MAPPER_BAD_RANGE_DESCRIPTOR;
                goto fail;
            }
            m->is_range = 1;
        } else {
            /* 4. A plain literal string, kept in its own type. */
            rl__buf_append(&lit, e.raw, e.raw_len);
        }
    }
    rc = flush_literal(m, &lit, a);
    if (rc != RL_OK) goto fail;
    rl__buf_release(&lit);
    rl__buf_release(&str);
    *out = m;
    return RL_OK;

fail:
    rl__buf_release(&lit);
    rl__buf_release(&str);
    return rc;
}

int rl__mapper_is_range(const rl__mapper *m) { return m ? m->is_range : 0; }

/* The end of the top-level tuple element at p (p < end) when it is one of the common kinds —
 * an integer of 0..8 bytes (codes 0x0c..0x1c), a byte string or an ASCII string without an
 * escaped NUL — and well formed, exactly as rl__tuple_iter_next would accept it; NULL for every
 * other element, well formed or not (the caller then asks rl__tuple_iter_next, which decides
 * and names the error). Index keys are made of such elements, and rl__tuple_iter_next's general
 * decoding (the value, the element struct) was most of what building P cost. */
static inline const uint8_t *quick_elem_end(const uint8_t *p, const uint8_t *end) {
    uint8_t c = p[0];
    if (c >= 0x0c && c <= 0x1c) {
        if (c == 0x14) return p + 1;
        size_t n = c > 0x14 ? (size_t)(c - 0x14) : (size_t)(0x14 - c);
        if ((size_t)(end - p) - 1 < n || p[1] == (c < 0x14 ? 0xff : 0x00)) return NULL;
        return p + 1 + n; /* minimal (no leading zero magnitude byte), not truncated */
    }
    if (c == 0x01 || c == 0x02) {
        for (const uint8_t *q = p + 1; q < end; q++) {
            if (*q == 0) return q + 1 < end && q[1] == 0xff ? NULL : q + 1;
            if (*q >= 0x80 && c == 0x02) return NULL; /* UTF-8 beyond ASCII: the decoder checks */
        }
        return NULL; /* unterminated */
    }
    return NULL;
}

/* The next top-level element of the walk at *pp (< end): its bytes in *raw / *raw_len, *pp
 * past it. RL_OK, RL_E_NOT_FOUND at the end, or rl__tuple_iter_next's decoding error. */
static inline int walk_next(const uint8_t **pp, const uint8_t *end, const uint8_t **raw, size_t *raw_len) {
    const uint8_t *p = *pp, *z;
    if (p >= end) return RL_E_NOT_FOUND;
    if (!(z = quick_elem_end(p, end))) {
        rl__tuple_iter it;
        rl__tuple_elem e;
        rl__tuple_iter_init(&it, p, (size_t)(end - p)); /* top level: the state is the position */
        int rc = rl__tuple_iter_next(&it, &e);
        if (rc != RL_OK) return rc;
        z = p + e.raw_len;
    }
    *raw = p;
    *raw_len = (size_t)(z - p);
    *pp = z;
    return RL_OK;
}

/* Walk the whole tuple data[0..len) once (so that any encoding error anywhere is found, as
 * rl__tuple_validate would) and record the spans of its first `want` elements (want <=
 * MAX_SPANS). RL_OK, or the decoding error. */
static int span_walk(const void *data, size_t len, size_t want, elem_spans *out) {
    const uint8_t *p = data, *end = p + len, *raw;
    size_t raw_len;
    int rc;
    out->n = 0;
    while ((rc = walk_next(&p, end, &raw, &raw_len)) == RL_OK) {
        if (out->n < want) {
            out->raw[out->n] = raw;
            out->raw_len[out->n] = raw_len;
            out->n++;
        }
    }
    return rc == RL_E_NOT_FOUND ? RL_OK : rc;
}

/* The leading elements shared by every index key of one mapped read (see the file header).
 * Offsets, not pointers, so it applies to any key of the read. set == 0 until a key's whole
 * walk succeeded. */
typedef struct {
    size_t shared; /* every key of the read starts with the same `shared` bytes */
    int set;
    size_t count;  /* elements ending at or before byte `shared` (of the key the memo was taken
                      from) */
    size_t resume; /* where element `count` starts */
    int edge;      /* the last of them ends exactly at `shared`: a string's or nested tuple's end
                      is decided by the byte after its 0x00 (0xff continues it), so the memo
                      serves only keys whose byte `shared` is not 0xff (or that end there) */
    size_t n;      /* spans recorded among them: min(count, want) */
    size_t off[MAX_SPANS], len[MAX_SPANS];
} key_memo;

/* span_walk of an index key with memo km (NULL: a plain span_walk). Once km is set, the
 * first km->count elements come from it and the walk starts at km->resume; otherwise a full
 * walk that, on success, sets km. Same result and errors as span_walk for every key that
 * starts with the km->shared bytes the memo's key started with. */
static int span_walk_key(const uint8_t *data, size_t len, size_t want, elem_spans *out, key_memo *km) {
    const uint8_t *p, *end = data + len, *raw;
    size_t skip = 0, count = 0, resume = 0, raw_len;
    int rc;
    if (!km) return span_walk(data, len, want, out);
    out->n = 0;
    if (km->set && km->edge && len > km->shared && data[km->shared] == 0xff)
        return span_walk(data, len, want, out); /* the memo's last element may not end here */
    if (km->set) {
        for (size_t i = 0; i < km->n; i++) {
            out->raw[i] = data + km->off[i];
            out->raw_len[i] = km->len[i];
        }
        out->n = km->n;
        skip = km->resume;
    }
    p = data + skip;
    while ((rc = walk_next(&p, end, &raw, &raw_len)) == RL_OK) {
        if (out->n < want) {
            out->raw[out->n] = raw;
            out->raw_len[out->n] = raw_len;
            out->n++;
        }
        if (!km->set && (size_t)(raw - data) + raw_len <= km->shared) {
            count++;
            resume = (size_t)(raw - data) + raw_len;
        }
    }
    if (rc != RL_E_NOT_FOUND) return rc;
    if (!km->set) {
        km->set = 1;
        km->count = count;
        km->resume = resume;
        km->edge = count > 0 && resume == km->shared;
        km->n = count < out->n ? count : out->n;
        for (size_t i = 0; i < km->n; i++) {
            km->off[i] = (size_t)(out->raw[i] - data);
            km->len[i] = out->raw_len[i];
        }
    }
    return RL_OK;
}

/* Find every placeholder's bytes for one index entry: one walk of the key and one of the value
 * (only those some placeholder refers to) instead of a validation plus one rl__tuple_get walk
 * per placeholder. On RL_OK *out_len is P's length. Errors as rl__mapper_construct, in its
 * order: the key not a tuple, the value not a tuple, then the first placeholder (in mapper
 * order) whose index is past the end. Only for mappers whose indexes are < MAX_SPANS. */
static int find_spans(const rl__mapper *m, const void *key, size_t key_len, const void *value, size_t value_len,
                      key_memo *km, elem_spans *ks, elem_spans *vs, size_t *out_len) {
    size_t len = m->lit_len;
    ks->n = vs->n = 0;
    if (m->uses_key && span_walk_key(key, key_len, m->max_key + 1, ks, km) != RL_OK) return RL_E_KEY_NOT_TUPLE;
    if (m->uses_value && span_walk(value, value_len, m->max_value + 1, vs) != RL_OK) return RL_E_VALUE_NOT_TUPLE;
    for (size_t i = 0; i < m->n_segs; i++) {
        const mapper_seg *sg = &m->segs[i];
        const elem_spans *sp = sg->kind == SEG_KEY ? ks : vs;
        if (sg->kind == SEG_LITERAL) continue;
        if (sg->index >= sp->n) return RL_E_MAPPER_BAD_INDEX;
        len += sp->raw_len[sg->index];
    }
    *out_len = len;
    return RL_OK;
}

/* Write P (out_len bytes from find_spans) to dst. */
static void write_p(const rl__mapper *m, const elem_spans *ks, const elem_spans *vs, uint8_t *dst) {
    for (size_t i = 0; i < m->n_segs; i++) {
        const mapper_seg *sg = &m->segs[i];
        const uint8_t *src;
        size_t n;
        if (sg->kind == SEG_LITERAL) {
            src = sg->lit;
            n = sg->lit_len;
        } else {
            const elem_spans *sp = sg->kind == SEG_KEY ? ks : vs;
            src = sp->raw[sg->index];
            n = sp->raw_len[sg->index];
        }
        if (n) memcpy(dst, src, n);
        dst += n;
    }
}

/* 1 if the span fast path covers m (every placeholder index < MAX_SPANS). */
static int spans_fit(const rl__mapper *m) {
    return (!m->uses_key || m->max_key < MAX_SPANS) && (!m->uses_value || m->max_value < MAX_SPANS);
}

/* The general path: validate, then one rl__tuple_get per placeholder (any index). */
static int construct_general(const rl__mapper *m, const void *key, size_t key_len, const void *value, size_t value_len,
                             rl_buf *out) {
    size_t start = out->len;
    int rc = RL_OK;
    if (m->uses_key && rl__tuple_validate(key, key_len, NULL) != RL_OK) return RL_E_KEY_NOT_TUPLE;
    if (m->uses_value && rl__tuple_validate(value, value_len, NULL) != RL_OK) return RL_E_VALUE_NOT_TUPLE;

    for (size_t i = 0; i < m->n_segs; i++) {
        const mapper_seg *sg = &m->segs[i];
        rl__tuple_elem e;
        if (sg->kind == SEG_LITERAL) {
            rl__buf_append(out, sg->lit, sg->lit_len);
            continue;
        }
        if (sg->kind == SEG_KEY) rc = rl__tuple_get(key, key_len, sg->index, &e);
        else rc = rl__tuple_get(value, value_len, sg->index, &e);
        if (rc == RL_E_NOT_FOUND) {
            rc = RL_E_MAPPER_BAD_INDEX;
            goto fail;
        }
        if (rc != RL_OK) {
            rc = sg->kind == SEG_KEY ? RL_E_KEY_NOT_TUPLE : RL_E_VALUE_NOT_TUPLE;
            goto fail;
        }
        rl__buf_append(out, e.raw, e.raw_len);
    }
    if (rl__buf_error(out)) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    return RL_OK;

fail:
    if (!rl__buf_error(out)) rl__buf_truncate(out, start);
    return rc;
}

/* Build P for one index entry (see mapped.h), appended to out. On error out is truncated back
 * to its length on entry. Mappers with placeholder indexes below MAX_SPANS (every real one)
 * find all their elements in one walk of the key and of the value (find_spans); others take
 * construct_general. Both give the same bytes and errors (test mapped_1_13). Errors:
 * RL_E_MAPPER_BAD_INDEX (index past the end), RL_E_KEY_NOT_TUPLE, RL_E_VALUE_NOT_TUPLE,
 * RL_E_OUT_OF_MEMORY, RL_E_INVALID_ARGUMENT. */
int rl__mapper_construct(const rl__mapper *m, const void *key, size_t key_len, const void *value, size_t value_len,
                         rl_buf *out) {
    elem_spans ks, vs;
    size_t len;
    int rc;

    if (!m || !out || (!key && key_len) || (!value && value_len)) return RL_E_INVALID_ARGUMENT;
    if (!key) key = "";
    if (!value) value = "";
    if (!spans_fit(m)) return construct_general(m, key, key_len, value, value_len, out);
    rc = find_spans(m, key, key_len, value, value_len, NULL, &ks, &vs, &len);
    if (rc != RL_OK) return rc;
    if (rl__buf_reserve(out, len) != RL_OK) return RL_E_OUT_OF_MEMORY;
    for (size_t i = 0; i < m->n_segs; i++) {
        const mapper_seg *sg = &m->segs[i];
        const elem_spans *sp = sg->kind == SEG_KEY ? &ks : &vs;
        if (sg->kind == SEG_LITERAL) rl__buf_append(out, sg->lit, sg->lit_len);
        else rl__buf_append(out, sp->raw[sg->index], sp->raw_len[sg->index]);
    }
    return RL_OK; /* the appends fit in what was reserved */
}

/* Build P for one index entry straight into arena a, in one allocation of 2 * len + 1 bytes:
 * P, then room for the secondary's end key (strinc(P) or P + "\0", secondary_bounds). On RL_OK
 * *out_p holds P (*out_len bytes). scratch is used only by the general path; km (the read's
 * key memo, or NULL) only by the span path. Errors as rl__mapper_construct. */
static int construct_in_arena(const rl__mapper *m, const void *key, size_t key_len, const void *value, size_t value_len,
                              key_memo *km, rl_arena *a, rl_buf *scratch, uint8_t **out_p, size_t *out_len) {
    elem_spans ks, vs;
    const uint8_t *src;
    size_t len;
    uint8_t *p;
    int rc;
    if (!key) key = "";
    if (!value) value = "";
    if (spans_fit(m)) {
        rc = find_spans(m, key, key_len, value, value_len, km, &ks, &vs, &len);
        if (rc != RL_OK) return rc;
        src = NULL;
    } else {
        rl__buf_reset(scratch);
        rc = construct_general(m, key, key_len, value, value_len, scratch);
        if (rc != RL_OK) return rc;
        src = (const uint8_t *)scratch->data;
        len = scratch->len;
    }
    if (len > UINT32_MAX - 1) return RL_E_INVALID_ARGUMENT;
    p = rl__arena_alloc(a, 2 * len + 1);
    if (!p) return RL_E_OUT_OF_MEMORY;
    if (src) {
        if (len) memcpy(p, src, len);
    } else {
        write_p(m, &ks, &vs, p);
    }
    *out_p = p;
    *out_len = len;
    return RL_OK;
}

/* ==== The mapped read ======================================================================= */

enum {
    DEFAULT_BATCH = 10,            /* MAX_PARALLEL_QUICK_GET_VALUE */
    DEFAULT_SECONDARY_ROWS = 2000, /* QUICK_GET_KEY_VALUES_LIMIT */
};
#define DEFAULT_SECONDARY_BYTES 10000000L /* QUICK_GET_KEY_VALUES_LIMIT_BYTES */
#define INDEX_BYTE_FRACTION 0.2           /* FRACTION_INDEX_BYTELIMIT_PREFETCH */
#define MAX_BLOCK ((size_t)256 << 10)     /* largest arena block a mapped read asks for */

/* Set *ent's secondary bounds for P = p[0..n) (ent->index is already set). p is in arena a with
 * room for n + 1 more bytes after it (construct_in_arena), where the end key is built: strinc(P)
 * (rl__strinc's rule: drop trailing 0xff bytes, increment the last one; an all-0xff P is
 * RL_E_INVALID_ARGUMENT), "\xff" for an empty P, or P + "\0" for a point read. */
static int secondary_bounds(int is_range, uint8_t *p, size_t n, rl__mapped_entry *ent) {
    uint8_t *end = p + n;
    size_t end_len;
    if (n > UINT32_MAX - 1) return RL_E_INVALID_ARGUMENT;
    if (is_range) {
        size_t m = n;
        while (m > 0 && p[m - 1] == 0xff) m--;
        if (n > 0 && m == 0) return RL_E_INVALID_ARGUMENT;
        end_len = n == 0 ? 1 : m;
        if (n == 0) {
            end[0] = 0xff;
        } else {
            memcpy(end, p, m);
            end[m - 1]++;
        }
    } else {
        end_len = n + 1;
        if (n) memcpy(end, p, n);
        end[n] = 0;
    }
    ent->is_range = is_range;
    ent->begin = p;
    ent->begin_len = (uint32_t)n;
    ent->end = end;
    ent->end_len = (uint32_t)end_len;
    return RL_OK;
}

void rl__mapper_prefix(const rl__mapper *m, const uint8_t **out, size_t *out_len) {
    *out = (const uint8_t *)"";
    *out_len = 0;
    if (m && m->n_segs > 0 && m->segs[0].kind == SEG_LITERAL) *out = m->segs[0].lit, *out_len = m->segs[0].lit_len;
}

int rl__mapped_entry_unread(const rl__mapper *m, const rl_keyvalue *index, rl_arena *a, rl__mapped_entry *ent) {
    if (!m || !m->is_range || !index) return RL_E_INVALID_ARGUMENT;
    rl_buf scratch;
    uint8_t *p;
    size_t n;
    rl__buf_init(&scratch);
    memset(ent, 0, sizeof *ent);
    ent->index = *index;
    int rc =
        construct_in_arena(m, index->key, index->key_len, index->value, index->value_len, NULL, a, &scratch, &p, &n);
    rl__buf_release(&scratch);
    if (rc == RL_OK) rc = secondary_bounds(1, p, n, ent);
    ent->more = 1;
    return rc;
}

/* Read *ent's secondary (bounds set by secondary_bounds) from the same engine at version v; the
 * caller holds the engine's read lock. Results are copied into a. Errors: those of the storage
 * read, RL_E_OUT_OF_MEMORY. */
static int read_local(rl__storage *st, rl__version v, int row_limit, long byte_limit, rl_arena *a,
                      rl__mapped_entry *ent) {
    rl_keyvalue *kvs = NULL;
    int n_kvs = 0, more = 0, rc;
    if (ent->is_range) {
        rc = rl__storage_get_range_nolock(st, v, ent->begin, ent->begin_len, ent->end, ent->end_len, row_limit,
                                          byte_limit, 0, a, &kvs, &n_kvs, &more);
        if (rc != RL_OK) return rc;
    } else {
        int present = 0;
        const uint8_t *val = NULL;
        uint32_t val_len = 0;
        rc = rl__storage_get_nolock(st, v, ent->begin, ent->begin_len, a, &present, &val, &val_len);
        if (rc != RL_OK) return rc;
        if (present) {
            kvs = rl__arena_alloc(a, sizeof *kvs);
            if (!kvs) return RL_E_OUT_OF_MEMORY;
            kvs->key = ent->begin;
            kvs->key_len = ent->begin_len;
            kvs->value = val ? val : ent->begin; /* an empty value still needs a valid pointer */
            kvs->value_len = val_len;
            n_kvs = 1;
        }
    }
    ent->kvs = kvs;
    ent->n_kvs = n_kvs;
    ent->more = more ? 1 : 0;
    ent->served_locally = 1;
    return RL_OK;
}

/* Run the batch hook over ents[0..n) (bounds set) with the item array items (room for n), then
 * copy each item's outputs into its entry; the items the hook handed back (read_here) are read
 * from st under one read lock. The first item error in order fails the batch; a hook that
 * breaks the output contract (negative count, rows without a pointer, a point read with more
 * than one row) is RL_E_INTERNAL_ERROR. ents[0] is the page's entry off: the step of the target
 * rule counts from the page's start, and with align the budget cuts a batch only there too (a
 * streamed read, whose batches are not its page, so its page ends where a whole one would). The
 * rows and the hook's work go to sa, the rest to a. */
static int read_batch(rl__storage *st, rl_secondary_batch_fn fn, void *fn_ctx, rl__version v, int row_limit,
                      long byte_limit, long budget, long target_left, int step, int off, int align,
                      rl__secondary_item *items, rl__mapped_entry *ents, int n, rl_arena *a, rl_arena *sa,
                      int *out_read) {
    int rc, here = 0;
    *out_read = n;
    for (int i = 0; i < n; i++) {
        rl__secondary_item *it = &items[i];
        memset(it, 0, sizeof *it);
        it->is_range = ents[i].is_range;
        it->begin = ents[i].begin;
        it->begin_len = ents[i].begin_len;
        it->end = ents[i].end;
        it->end_len = ents[i].end_len;
        it->row_limit = ents[i].is_range ? row_limit : 1;
        it->byte_limit = byte_limit;
    }
    rc = fn(fn_ctx, v, items, n, sa);
    if (rc != RL_OK) return rc;
    for (int i = 0; i < n; i++) /* the page ends before the first unread item */
        if (items[i].unread) {
            n = *out_read = i;
            break;
        }
    /* In order: the items handed back read from st (under one read lock for the batch), the
     * hook's outputs for the others; the batch ends after the entry that brings its secondary
     * bytes to budget, or after a multiple of step entries with the target spent
     * (mapped.h). The first item error in order fails the batch. */
    for (int i = 0; i < n; i++) here |= items[i].read_here && items[i].error == RL_OK;
    if (here) rl__storage_read_lock(st);
    long bytes = 0;
    for (int i = 0; i < n && rc == RL_OK; i++) {
        const rl__secondary_item *it = &items[i];
        if (it->error != RL_OK) {
            rc = it->error;
            break;
        }
        /* A batch can be a whole page: grow the arena's blocks with it (Cost). */
        if (i % DEFAULT_BATCH == 0 && a->used > 2 * a->block_size && a->block_size < MAX_BLOCK) a->block_size *= 2;
        if (it->read_here) {
            rc = read_local(st, v, it->row_limit, byte_limit, sa, &ents[i]);
        } else if (it->n_kvs < 0 || (it->n_kvs > 0 && !it->kvs) || (!it->is_range && it->n_kvs > 1)) {
            rc = RL_E_INTERNAL_ERROR;
        } else {
            ents[i].kvs = it->n_kvs ? it->kvs : NULL;
            ents[i].n_kvs = it->n_kvs;
            ents[i].more = it->is_range && it->more ? 1 : 0;
            ents[i].served_locally = it->served_locally ? 1 : 0;
        }
        if (rc != RL_OK || (budget <= 0 && step <= 0)) continue;
        long sec = 0;
        for (int j = 0; j < ents[i].n_kvs; j++) sec += (long)ents[i].kvs[j].key_len + (long)ents[i].kvs[j].value_len;
        bytes += sec;
        target_left -= sec + (long)ents[i].index.key_len + (long)ents[i].index.value_len;
        int at_step = step > 0 && (off + i + 1) % step == 0; /* counted from the page's start */
        if (i + 1 < n &&
            ((budget > 0 && bytes >= budget && (!align || step <= 0 || at_step)) || (at_step && target_left <= 0)))
            *out_read = i + 1, n = i + 1;
    }
    if (here) rl__storage_read_unlock(st);
    return rc;
}

/* The bytes entries ents[from..to) count against target_bytes (step 2 of the file header): each
 * one's index key and value and every key and value of its secondaries. */
static long entries_cost(const rl__mapped_entry *ents, int from, int to) {
    long cost = 0;
    for (int i = from; i < to; i++) {
        cost += (long)ents[i].index.key_len + (long)ents[i].index.value_len;
        for (int j = 0; j < ents[i].n_kvs; j++) cost += (long)ents[i].kvs[j].key_len + (long)ents[i].kvs[j].value_len;
    }
    return cost;
}

void rl__mapped_omit_index(rl_mapped_keyvalue *ev, int from, int to) {
    for (int i = from; i < to; i++) {
        rl_mapped_keyvalue *e = &ev[i];
        if (e->index_omitted) continue;
        e->index_omitted = 1;
        e->index_omitted_len = e->index.key_len + e->index.value_len;
        e->index.key = e->index.value = (const uint8_t *)"";
        e->index.key_len = e->index.value_len = 0;
    }
}

/* Streaming (mapped.h): hand ents[from..to) to the emitter, then drop their rows (sec_arena sa,
 * when it is not the read's own arena a). With omit_index, every entry but the page's first
 * (ents[0]) and the batch's last goes without its index key-value. */
static int emit_batch(const rl__mapped_options *o, rl_arena *sa, rl_arena *a, rl__mapped_entry *ents, int from,
                      int to) {
    if (o->omit_index) rl__mapped_omit_index(ents, from > 0 ? from : 1, to - 1);
    int rc = to > from ? o->emit(o->emit_ctx, &ents[from], to - from) : RL_OK;
    if (sa != a) rl__arena_reset(sa);
    return rc;
}

/* The mapped read (see mapped.h and the file header for the accounting). On RL_OK *out holds
 * *out_n entries in index-scan order, all in arena a. On error the outputs are empty/zero and
 * whatever was allocated stays in a (released with it). Errors: RL_E_INVALID_ARGUMENT,
 * RL_E_RANGE_LIMITS_INVALID (a negative limit), those of the index and secondary reads
 * (RL_E_TRANSACTION_TOO_OLD, RL_E_FUTURE_VERSION, ...), of building P (RL_E_MAPPER_BAD_INDEX,
 * RL_E_KEY_NOT_TUPLE, RL_E_VALUE_NOT_TUPLE) and RL_E_OUT_OF_MEMORY. */
int rl__storage_get_mapped_range(rl__storage *st, rl__version v, const void *begin, size_t begin_len, const void *end,
                                 size_t end_len, const rl__mapper *m, const rl__mapped_options *o,
                                 rl_secondary_batch_fn fn, void *fn_ctx, rl_arena *a, rl__mapped_entry **out,
                                 int *out_n, int *out_more) {
    rl__mapped_options opt;
    size_t block_size0;
    int locked = 0;
    rl_keyvalue *idx = NULL;
    rl__mapped_entry *ents = NULL;
    rl__secondary_item *items = NULL;
    int n_idx = 0, scan_more = 0, mapped = 0, rc;
    long index_bytes = 0, remaining;
    rl_buf p;
    key_memo km;

    if (out) *out = NULL;
    if (out_n) *out_n = 0;
    if (out_more) *out_more = 0;
    if (!st || !m || !a || !out || !out_n || !out_more) return RL_E_INVALID_ARGUMENT;
    if ((!begin && begin_len) || (!end && end_len)) return RL_E_INVALID_ARGUMENT;
    if (o) opt = *o;
    else memset(&opt, 0, sizeof opt);
    if (opt.limit < 0 || opt.target_bytes < 0 || opt.batch < 0 || opt.secondary_row_limit < 0 ||
        opt.secondary_byte_limit < 0)
        return RL_E_RANGE_LIMITS_INVALID;
    if (opt.emit && !fn) return RL_E_INVALID_ARGUMENT;
    rl_arena *sa = opt.emit && opt.sec_arena ? opt.sec_arena : a;
    if (opt.batch == 0) opt.batch = DEFAULT_BATCH;
    if (opt.secondary_row_limit == 0) opt.secondary_row_limit = DEFAULT_SECONDARY_ROWS;
    if (opt.secondary_byte_limit == 0) opt.secondary_byte_limit = DEFAULT_SECONDARY_BYTES;
    if (opt.target_bytes > 0) {
        index_bytes = (long)((double)opt.target_bytes * INDEX_BYTE_FRACTION);
        if (index_bytes < 1) index_bytes = 1;
    }

    /* 1. The index scan, under the read lock (which local secondaries share when there is no
     *    hook; with a hook it is dropped before the hook runs, and taken again per batch for the
     *    items the hook hands back to be read here). */
    block_size0 = a->block_size;
    rl__buf_init(&p);
    rl__storage_read_lock(st);
    locked = 1;
    rc = rl__storage_get_range_nolock(st, v, begin ? begin : "", begin_len, end ? end : "", end_len, opt.limit,
                                      index_bytes, opt.reverse, a, &idx, &n_idx, &scan_more);
    if (fn) {
        rl__storage_read_unlock(st);
        locked = 0;
    }
    if (rc != RL_OK) goto fail;
    if (n_idx > 0) {
        ents = rl__arena_alloc(a, (size_t)n_idx * sizeof *ents);
        if (!ents) {
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        /* Not zeroed: every field of an entry that is returned is written (the index, the
         * bounds by secondary_bounds, the rows by read_local or from the hook's item). */
        if (fn) {
            size_t n_items = (size_t)(opt.batch < n_idx ? opt.batch : n_idx);
            items = rl__arena_alloc(a, n_items * sizeof *items);
            if (!items) {
                rc = RL_E_OUT_OF_MEMORY;
                goto fail;
            }
        }
    }

    /* 2–3. Map in batches against the byte budget. Every index key starts with the bytes
     * begin and end share (see the key memo in the file header). */
    km.set = 0;
    km.edge = 0;
    km.shared = 0;
    {
        const uint8_t *b = begin, *e = end;
        size_t lim = begin_len < end_len ? begin_len : end_len;
        while (km.shared < lim && b[km.shared] == e[km.shared]) km.shared++;
    }
    remaining = opt.target_bytes;
    while (mapped < n_idx) {
        int stop;
        if (opt.target_bytes > 0 && remaining <= 0) break;
        /* Grow the arena's blocks with the reply (see Cost in the file header). */
        if (a->used > 2 * a->block_size && a->block_size < MAX_BLOCK) a->block_size *= 2;
        stop = mapped + opt.batch < n_idx ? mapped + opt.batch : n_idx;
        for (int i = mapped; i < stop; i++) {
            rl__mapped_entry *ent = &ents[i];
            uint8_t *pk;
            size_t pk_len;
            ent->index = idx[i];
            ent->index_omitted = 0;
            ent->index_omitted_len = 0;
            rc = construct_in_arena(m, idx[i].key, idx[i].key_len, idx[i].value, idx[i].value_len, &km, a, &p, &pk,
                                    &pk_len);
            if (rc != RL_OK) goto fail;
            rc = secondary_bounds(m->is_range, pk, pk_len, ent);
            if (rc != RL_OK) goto fail;
            if (!fn) {
                rc = read_local(st, v, m->is_range ? opt.secondary_row_limit : 1, opt.secondary_byte_limit, a, ent);
                if (rc != RL_OK) goto fail;
            }
        }
        if (fn) {
            int got = 0;
            rc = read_batch(st, fn, fn_ctx, v, opt.secondary_row_limit, opt.secondary_byte_limit,
                            opt.batch_secondary_bytes, opt.target_bytes > 0 ? remaining : LONG_MAX, opt.batch_step,
                            mapped, opt.emit != NULL, items, &ents[mapped], stop - mapped, a, sa, &got);
            if (rc != RL_OK) goto fail;
            if (got == 0 && mapped == 0) {
                rc = RL_E_INTERNAL_ERROR; /* no progress (mapped.h: unread) */
                goto fail;
            }
            if (got < stop - mapped) {             /* the batch ends here: entries [mapped + got, ...) left */
                int ended = !opt.emit || got == 0; /* streaming goes on with the next batch */
                stop = mapped + got;
                remaining -= entries_cost(ents, mapped, stop);
                if (opt.emit && got > 0 && (rc = emit_batch(&opt, sa, a, ents, mapped, stop)) != RL_OK) goto fail;
                mapped = stop;
                if (ended) break;
                continue;
            }
        }
        remaining -= entries_cost(ents, mapped, stop);
        if (opt.emit && (rc = emit_batch(&opt, sa, a, ents, mapped, stop)) != RL_OK) goto fail;
        mapped = stop;
    }
    if (locked) rl__storage_read_unlock(st);
    a->block_size = block_size0;
    rl__buf_release(&p);

    if (opt.omit_index && !opt.emit) rl__mapped_omit_index(ents, 1, mapped - 1);
    *out = opt.emit ? NULL : ents;
    *out_n = mapped;
    *out_more = (scan_more || mapped < n_idx) ? 1 : 0;
    return RL_OK;

fail:
    if (locked) rl__storage_read_unlock(st);
    a->block_size = block_size0;
    rl__buf_release(&p);
    return rc;
}
