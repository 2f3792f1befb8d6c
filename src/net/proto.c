/* proto.c — encoders and decoders of the wire protocol's payloads (proto.h, docs/protocol.md).
 *
 * Each payload is described once, by a "transfer" function x_<name>(io *s, rl_msg_<name> *m)
 * that walks the fields in wire order through io_* helpers. The same walk encodes (the helpers
 * read m and append to a buffer) or decodes (they read the payload and fill m), so the two
 * directions cannot disagree about the layout, and every validation rule — written once, after
 * the field it checks, against the value in m — holds on both sides. That is what makes
 * decode-then-encode the identity (proto.h invariant 2).
 *
 * Invariants of the walk:
 *   1. Encoding never stores through m (the encoders' const promise): the helpers assign to the
 *      struct only when s->decoding. The const is cast away in one place, run_encode_mode.
 *   2. The first failure wins: it sets s->failed, s->rc and the reason; every helper is a no-op
 *      once s->failed is set, and loops stop at it.
 *   3. Decoding checks each count against the bytes left (count x the smallest encoding of one
 *      element) before it allocates the array, so allocations stay below a small multiple of
 *      the payload length.
 *   4. Decoded byte strings point into the payload; arrays come from the arena.
 *
 * Reasons name the field by path: arrays and sub-structs push a path level (enter/leave) and
 * fail() formats "MSG request: level[i].level.field problem".
 */
#include "net/proto.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "reclayer/error.h"

_Static_assert(sizeof(int) == 4, "selector offsets and entry counts are int32 on the wire");

/* ---- The transfer state ------------------------------------------------------------------ */

#define IO_DEPTH 4
#define NO_INDEX UINT32_MAX

typedef struct {
    int decoding;               /* 1: payload -> struct; 0: struct -> buffer */
    const uint8_t *p;           /* decoding: next byte */
    size_t left;                /* decoding: bytes left */
    rl_arena *arena;            /* decoding: where arrays go (may be NULL) */
    rl_buf *out;                /* encoding: where bytes go */
    const char *msg;            /* "COMMIT request": the start of every reason */
    const char *path[IO_DEPTH]; /* enclosing arrays / structs, outermost first */
    uint32_t ix[IO_DEPTH];      /* their current element (NO_INDEX for a struct) */
    int depth;
    int failed;         /* sticky: a rule failed, memory ran out or the version is foreign */
    int rc;             /* the error to return once failed */
    rl__errdetail *err; /* may be NULL */
    int no_fast;        /* 1: the mapped reply's entries take the io_entry walk (tests) */
} io;

/* Record the first failure: rc and, when the caller wants it, "MSG: path.field <problem>". */
static void fail_rc(io *s, int rc, const char *field, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail_rc(io *s, int rc, const char *field, const char *fmt, ...) {
    if (s->failed) return;
    s->failed = 1;
    s->rc = rc;
    if (!s->err) return;
    rl__errdetail *d = s->err;
    rl__errdetail_set(d, "%s: ", s->msg);
    for (int i = 0; i < s->depth && i < IO_DEPTH; i++) {
        if (s->ix[i] == NO_INDEX) rl__errdetail_append(d, "%s.", s->path[i]);
        else rl__errdetail_append(d, "%s[%u].", s->path[i], s->ix[i]);
    }
    size_t n = rl__errdetail_len(d);
    if (field) {
        rl__errdetail_append(d, "%s ", field);
    } else if (n > 0 && rl__errdetail_get(d)[n - 1] == '.') {
        rl__errdetail_truncate(d, n - 1); /* the failure is about the enclosing element itself */
        rl__errdetail_append(d, " ");
    }
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vappend(d, fmt, ap);
    va_end(ap);
}

#define BAD_RC(s) ((s)->decoding ? RL_E_MALFORMED_FRAME : RL_E_INVALID_ARGUMENT)
/* A rule failed: the payload is malformed (decoding) or the struct invalid (encoding). */
#define bad(s, field, ...) fail_rc((s), BAD_RC(s), (field), __VA_ARGS__)

/* Enter an array element (index i) or a sub-struct (NO_INDEX) named name; leave it again. */
static void enter(io *s, const char *name, uint32_t i) {
    if (s->depth < IO_DEPTH) {
        s->path[s->depth] = name;
        s->ix[s->depth] = i;
    }
    s->depth++;
}
static void at(io *s, uint32_t i) {
    if (s->depth <= IO_DEPTH) s->ix[s->depth - 1] = i;
}
static void leave(io *s) { s->depth--; }

/* ---- Scalars ----------------------------------------------------------------------------- */

/* Take n bytes of the payload into b (decoding), or append b[0..n) (encoding). Returns 1, or 0
 * when failed (now or before). */
static int xfer(io *s, uint8_t *b, size_t n, const char *field) {
    if (s->failed) return 0;
    if (s->decoding) {
        if (s->left < n) {
            bad(s, field, "is truncated");
            return 0;
        }
        memcpy(b, s->p, n);
        s->p += n;
        s->left -= n;
    } else {
        rl__buf_append(s->out, b, n);
    }
    return 1;
}

static void io_u8(io *s, uint8_t *v, const char *field) {
    uint8_t b = s->decoding ? 0 : *v;
    if (xfer(s, &b, 1, field) && s->decoding) *v = b;
}

static void io_u16(io *s, uint16_t *v, const char *field) {
    uint8_t b[2];
    if (!s->decoding) b[0] = (uint8_t)*v, b[1] = (uint8_t)(*v >> 8);
    if (xfer(s, b, 2, field) && s->decoding) *v = (uint16_t)(b[0] | b[1] << 8);
}

static uint32_t get32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static void put32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static void io_u32(io *s, uint32_t *v, const char *field) {
    uint8_t b[4];
    if (!s->decoding) put32(b, *v);
    if (xfer(s, b, 4, field) && s->decoding) *v = get32(b);
}

static void io_u64(io *s, uint64_t *v, const char *field) {
    uint8_t b[8];
    if (!s->decoding) put32(b, (uint32_t)*v), put32(b + 4, (uint32_t)(*v >> 32));
    if (xfer(s, b, 8, field) && s->decoding) *v = (uint64_t)get32(b) | (uint64_t)get32(b + 4) << 32;
}

/* Two's complement both ways, without implementation-defined conversions. */
static int32_t to_i32(uint32_t u) { return u <= INT32_MAX ? (int32_t)u : -(int32_t)(~u) - 1; }
static int64_t to_i64(uint64_t u) { return u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1; }

static void io_i32(io *s, int32_t *v, const char *field) {
    uint32_t u = s->decoding ? 0 : (uint32_t)*v;
    io_u32(s, &u, field);
    if (!s->failed && s->decoding) *v = to_i32(u);
}

static void io_i64(io *s, int64_t *v, const char *field) {
    uint64_t u = s->decoding ? 0 : (uint64_t)*v;
    io_u64(s, &u, field);
    if (!s->failed && s->decoding) *v = to_i64(u);
}

/* An i32 that must be >= 0. */
static void io_nonneg32(io *s, int32_t *v, const char *field) {
    io_i32(s, v, field);
    if (!s->failed && *v < 0) bad(s, field, "is negative (%d)", (int)*v);
}

static void io_nonneg64(io *s, int64_t *v, const char *field) {
    io_i64(s, v, field);
    if (!s->failed && *v < 0) bad(s, field, "is negative (%lld)", (long long)*v);
}

/* A u8 boolean: 0 or 1. */
static void io_bool8(io *s, uint8_t *v, const char *field) {
    io_u8(s, v, field);
    if (!s->failed && *v > 1) bad(s, field, "is %u, not 0 or 1", (unsigned)*v);
}

/* A u8 boolean into an int field of a public struct. */
static void io_bool_int(io *s, int *v, const char *field) {
    if (!s->decoding && *v != 0 && *v != 1) {
        bad(s, field, "is %d, not 0 or 1", *v);
        return;
    }
    uint8_t b = s->decoding ? 0 : (uint8_t)*v;
    io_u8(s, &b, field);
    if (s->failed) return;
    if (b > 1) {
        bad(s, field, "is %u, not 0 or 1", (unsigned)b);
        return;
    }
    if (s->decoding) *v = b;
}

/* A u8 enum with values lo..hi. */
static void io_enum8(io *s, uint8_t *v, unsigned lo, unsigned hi, const char *field) {
    io_u8(s, v, field);
    if (!s->failed && (*v < lo || *v > hi)) bad(s, field, "has unknown value %u", (unsigned)*v);
}

/* ---- Byte strings, counts, arrays -------------------------------------------------------- */

/* bytes: u32 length <= max, then the bytes. Decoding points *p into the payload. */
static void io_bytes(io *s, const uint8_t **p, uint32_t *len, uint32_t max, const char *field) {
    if (s->failed) return;
    if (s->decoding) {
        if (s->left < 4) {
            bad(s, field, "is truncated");
            return;
        }
        uint32_t n = get32(s->p);
        if (n > max) {
            bad(s, field, "is %u bytes, longer than the limit %u", n, max);
            return;
        }
        if (n > s->left - 4) {
            bad(s, field, "is truncated (%u bytes, %zu left)", n, s->left - 4);
            return;
        }
        *len = n;
        *p = s->p + 4;
        s->p += 4 + (size_t)n;
        s->left -= 4 + (size_t)n;
    } else {
        if (*len > max) {
            bad(s, field, "is %u bytes, longer than the limit %u", *len, max);
            return;
        }
        if (!*p && *len) {
            bad(s, field, "is NULL with length %u", *len);
            return;
        }
        uint8_t b[4];
        put32(b, *len);
        rl__buf_append(s->out, b, 4);
        if (*len) rl__buf_append(s->out, *p, *len);
    }
}

/* A count of elements whose smallest encoding is min_each bytes: decoding refuses a count the
 * bytes left cannot hold (before anything is allocated for it). */
static void io_count(io *s, uint32_t *n, size_t min_each, const char *field) {
    io_u32(s, n, field);
    if (s->failed || !s->decoding) return;
    if ((uint64_t)*n * min_each > s->left)
        bad(s, field, "count %u needs at least %llu bytes, %zu left", *n, (unsigned long long)((uint64_t)*n * min_each),
            s->left);
}

/* The array of n elements of size bytes: decoding allocates it from the arena (NULL for n == 0);
 * encoding returns cur (cast: only read, invariant 1), refusing NULL for n > 0. */
static void *io_array(io *s, const void *cur, uint32_t n, size_t size, const char *field) {
    if (s->failed) return NULL;
    if (!s->decoding) {
        if (n && !cur) bad(s, field, "is NULL with count %u", n);
        return (void *)cur;
    }
    if (n == 0) return NULL;
    if (!s->arena) {
        fail_rc(s, RL_E_INVALID_ARGUMENT, field, "needs an arena");
        return NULL;
    }
    void *q = (size_t)n > SIZE_MAX / size ? NULL : rl__arena_alloc(s->arena, (size_t)n * size);
    if (!q) fail_rc(s, RL_E_OUT_OF_MEMORY, field, "is out of memory");
    return q;
}

static int cmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

/* ---- Composite fields -------------------------------------------------------------------- */

/* Smallest encodings, for io_count. */
enum {
    MIN_BYTES = 4,
    MIN_KV = 8,
    MIN_RANGE = 8,
    MIN_MUTATION = 9,
    MIN_SERVER = 4 + 1 + 4 + 2 + 4 + 1,
    MIN_SHARD = 4 + 4 + 4 + 4, /* a team has at least one id */
    MIN_PEEK_VERSION = 8 + 4,
    MIN_CHANGE = 8 + 1 + 8,
    MIN_ENTRY = 8 + 1 + 4 + 4 + 4 + 1 + 1,
    MIN_ITEM = 1 + 4 + 4 + 4 + 8,
    MIN_RESULT = 4 + 4 + 1,
    MIN_PEER_STAT = 4 + 4 + 4 + 8 + 8,
};

/* selector: bytes key, u8 or_equal, i32 offset. */
static void io_selector(io *s, rl_key_selector *sel, const char *name) {
    enter(s, name, NO_INDEX);
    io_bytes(s, &sel->key, &sel->key_len, RL_PROTO_MAX_KEY, "key");
    io_bool_int(s, &sel->or_equal, "or_equal");
    int32_t off = s->decoding ? 0 : sel->offset;
    io_i32(s, &off, "offset");
    if (!s->failed && off == INT32_MIN) bad(s, "offset", "is INT32_MIN");
    if (!s->failed && s->decoding) sel->offset = off;
    leave(s);
}

static void io_kv(io *s, rl_keyvalue *kv) {
    io_bytes(s, &kv->key, &kv->key_len, RL_PROTO_MAX_KEY, "key");
    io_bytes(s, &kv->value, &kv->value_len, RL_PROTO_MAX_VALUE, "value");
}

/* A kv array: count then elements, under path level name. */
static void io_kvs(io *s, const rl_keyvalue **kvs, uint32_t *n, const char *name) {
    io_count(s, n, MIN_KV, name);
    rl_keyvalue *v = io_array(s, *kvs, *n, sizeof *v, name);
    if (s->failed) return;
    enter(s, name, 0);
    for (uint32_t i = 0; i < *n && !s->failed; i++) {
        at(s, i);
        io_kv(s, &v[i]);
    }
    leave(s);
    if (s->decoding) *kvs = v;
}

/* range: bytes begin, bytes end, begin <= end. */
static void io_range(io *s, rl__keyrange *r) {
    io_bytes(s, &r->begin, &r->begin_len, RL_PROTO_MAX_KEY, "begin");
    io_bytes(s, &r->end, &r->end_len, RL_PROTO_MAX_KEY, "end");
    if (!s->failed && cmp(r->begin, r->begin_len, r->end, r->end_len) > 0) bad(s, NULL, "is inverted (begin > end)");
}

/* A range array. */
static void io_ranges(io *s, const rl__keyrange **rs, uint32_t *n, const char *name) {
    io_count(s, n, MIN_RANGE, name);
    rl__keyrange *v = io_array(s, *rs, *n, sizeof *v, name);
    if (s->failed) return;
    enter(s, name, 0);
    for (uint32_t i = 0; i < *n && !s->failed; i++) {
        at(s, i);
        io_range(s, &v[i]);
    }
    leave(s);
    if (s->decoding) *rs = v;
}

/* mutation: u8 type, bytes p1, bytes p2, with the per-type limits of proto.h (COMMIT). */
static void io_mutation(io *s, rl__mutation *m, int storage_only) {
    io_u8(s, &m->type, "type");
    if (s->failed) return;
    if (!rl__mutation_type_ok(m->type, storage_only)) {
        if (rl__mutation_type_ok(m->type, 0))
            bad(s, "type", "is %u, a versionstamped mutation (never sent to storage)", (unsigned)m->type);
        else bad(s, "type", "is %u, not a mutation type", (unsigned)m->type);
        return;
    }
    uint32_t max1 = m->type == RL_MUT_SET_VERSIONSTAMPED_KEY ? RL_PROTO_MAX_MUT_KEY : RL_PROTO_MAX_KEY;
    uint32_t max2 = m->type == RL_MUT_CLEAR         ? 0
                    : m->type == RL_MUT_CLEAR_RANGE ? RL_PROTO_MAX_KEY
                                                    : RL_PROTO_MAX_MUT_PARAM;
    io_bytes(s, &m->p1, &m->len1, max1, "p1");
    io_bytes(s, &m->p2, &m->len2, max2, "p2");
    if (!s->failed && m->type == RL_MUT_CLEAR_RANGE && cmp(m->p1, m->len1, m->p2, m->len2) > 0)
        bad(s, NULL, "is an inverted CLEAR_RANGE (p1 > p2)");
}

/* A mutation array; *total accumulates p1 + p2 bytes. */
static void io_mutations(io *s, const rl__mutation **ms, uint32_t *n, int storage_only, uint64_t *total,
                         const char *name) {
    io_count(s, n, MIN_MUTATION, name);
    rl__mutation *v = io_array(s, *ms, *n, sizeof *v, name);
    if (s->failed) return;
    enter(s, name, 0);
    for (uint32_t i = 0; i < *n && !s->failed; i++) {
        at(s, i);
        io_mutation(s, &v[i], storage_only);
        *total += (uint64_t)v[i].len1 + v[i].len2;
    }
    leave(s);
    if (s->decoding) *ms = v;
}

/* Dotted IPv4 text: four decimal parts 0-255 without leading zeros, three dots. */
static int ipv4_ok(const uint8_t *p, uint32_t n) {
    uint32_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= n || p[i] != '.') return 0;
            i++;
        }
        uint32_t start = i, v = 0;
        while (i < n && p[i] >= '0' && p[i] <= '9' && i - start < 3) v = v * 10 + (p[i++] - '0');
        if (i == start || v > 255 || (p[start] == '0' && i - start > 1)) return 0;
    }
    return i == n;
}

static void io_address(io *s, const uint8_t **p, uint32_t *len, const char *field) {
    io_bytes(s, p, len, RL_PROTO_MAX_STRING, field);
    if (!s->failed && !ipv4_ok(*p, *len)) bad(s, field, "is not dotted IPv4 text");
}

static void io_port(io *s, uint16_t *port, const char *field) {
    io_u16(s, port, field);
    if (!s->failed && *port == 0) bad(s, field, "is 0");
}

/* ---- Messages ---------------------------------------------------------------------------- */

static void x_empty(io *s, rl__msg_empty *m) {
    (void)s;
    (void)m;
}

/* Magic and version of a handshake frame: a foreign pair fails with
 * RL_E_INCOMPATIBLE_PROTOCOL_VERSION (decoding), the fields kept (run_decode_mode). */
static void io_magic_version(io *s, uint32_t *magic, uint32_t *version) {
    io_u32(s, magic, "magic");
    io_u32(s, version, "protocol_version");
    if (!s->failed && s->decoding && (*magic != RL_PROTOCOL_MAGIC || *version != RL_PROTOCOL_VERSION))
        fail_rc(s, RL_E_INCOMPATIBLE_PROTOCOL_VERSION, NULL, "magic 0x%08x version %u, expected 0x%08x version %u",
                *magic, *version, RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION);
}

static void x_auth_challenge(io *s, rl__msg_auth_challenge *m) {
    io_magic_version(s, &m->magic, &m->protocol_version);
    xfer(s, m->nonce, sizeof m->nonce, "nonce");
}

static void x_auth_req(io *s, rl__msg_auth_req *m) {
    io_magic_version(s, &m->magic, &m->protocol_version);
    io_enum8(s, &m->auth_class, RL_AUTH_CLIENT, RL_AUTH_MEMBER, "auth_class");
    xfer(s, m->nonce, sizeof m->nonce, "nonce");
    xfer(s, m->proof, sizeof m->proof, "proof");
}

static void x_auth_reply(io *s, rl__msg_auth_reply *m) { xfer(s, m->proof, sizeof m->proof, "proof"); }

static void x_hello_req(io *s, rl__msg_hello_req *m) {
    io_magic_version(s, &m->magic, &m->protocol_version);
    io_enum8(s, &m->role, RL_ROLE_CLIENT, RL_ROLE_ADMIN, "role");
    io_u32(s, &m->id, "id");
    if (!s->failed && m->role == RL_ROLE_CLIENT && m->id != 0) bad(s, "id", "is %u for a client (must be 0)", m->id);
    io_bytes(s, &m->host, &m->host_len, RL_PROTO_MAX_STRING, "host");
}

static void x_hello_reply(io *s, rl__msg_hello_reply *m) {
    io_u32(s, &m->protocol_version, "protocol_version");
    if (!s->failed && s->decoding && m->protocol_version != RL_PROTOCOL_VERSION) {
        fail_rc(s, RL_E_INCOMPATIBLE_PROTOCOL_VERSION, NULL, "version %u, expected %u", m->protocol_version,
                RL_PROTOCOL_VERSION);
        return;
    }
    io_enum8(s, &m->role, RL_ROLE_CLIENT, RL_ROLE_ADMIN, "role");
    io_u32(s, &m->id, "id");
    if (!s->failed && m->role == RL_ROLE_CLIENT && m->id != 0) bad(s, "id", "is %u for a client (must be 0)", m->id);
    io_bytes(s, &m->host, &m->host_len, RL_PROTO_MAX_STRING, "host");
}

static void x_ping_req(io *s, rl__msg_ping_req *m) {
    io_bytes(s, &m->payload, &m->payload_len, RL_PROTO_MAX_STRING, "payload");
}

static void x_ping_reply(io *s, rl__msg_ping_reply *m) {
    io_bytes(s, &m->payload, &m->payload_len, RL_PROTO_MAX_STRING, "payload");
    io_u64(s, &m->server_mono_ns, "server_mono_ns");
}

static void x_error(io *s, rl__msg_error *m) {
    io_i32(s, &m->code, "code");
    if (!s->failed && m->code <= 0) bad(s, "code", "is %d, not an error code", (int)m->code);
    io_bytes(s, &m->message, &m->message_len, RL_PROTO_MAX_STRING, "message");
}

static void x_get_read_version_req(io *s, rl__msg_get_read_version_req *m) {
    io_u32(s, &m->flags, "flags");
    if (!s->failed && m->flags != 0) bad(s, "flags", "has unknown bits 0x%x", m->flags);
}

static void x_get_read_version_reply(io *s, rl__msg_get_read_version_reply *m) { io_u64(s, &m->version, "version"); }

static void x_commit_req(io *s, rl__msg_commit_req *m) {
    uint64_t total = 0;
    io_u64(s, &m->read_version, "read_version");
    io_ranges(s, &m->reads, &m->n_reads, "reads");
    for (uint32_t i = 0; i < m->n_reads && !s->failed; i++)
        total += (uint64_t)m->reads[i].begin_len + m->reads[i].end_len;
    io_ranges(s, &m->writes, &m->n_writes, "writes");
    for (uint32_t i = 0; i < m->n_writes && !s->failed; i++)
        total += (uint64_t)m->writes[i].begin_len + m->writes[i].end_len;
    io_mutations(s, &m->muts, &m->n_muts, 0, &total, "mutations");
    if (!s->failed && total > RL_PROTO_MAX_COMMIT_BYTES)
        bad(s, NULL, "holds %llu bytes of mutations and ranges, more than %u", (unsigned long long)total,
            (unsigned)RL_PROTO_MAX_COMMIT_BYTES);
}

static void x_commit_reply(io *s, rl__msg_commit_reply *m) {
    io_i32(s, &m->result, "result");
    if (!s->failed && m->result < 0) bad(s, "result", "is negative (%d)", (int)m->result);
    io_u64(s, &m->commit_version, "commit_version");
    io_u16(s, &m->batch_order, "batch_order");
}

static void x_get_shard_map_req(io *s, rl__msg_get_shard_map_req *m) { io_u64(s, &m->min_version, "min_version"); }

static void io_server(io *s, rl__msg_server *v) {
    io_u32(s, &v->id, "id");
    io_enum8(s, &v->role, RL_ROLE_COORDINATOR, RL_ROLE_STORAGE, "role");
    io_address(s, &v->address, &v->address_len, "address");
    io_port(s, &v->port, "port");
    io_bytes(s, &v->host, &v->host_len, RL_PROTO_MAX_STRING, "host");
    io_bool8(s, &v->healthy, "healthy");
}

static void io_shard(io *s, rl__msg_shard *v, const rl__msg_shard *prev) {
    io_bytes(s, &v->begin, &v->begin_len, RL_PROTO_MAX_KEY, "begin");
    io_bytes(s, &v->end, &v->end_len, RL_PROTO_MAX_KEY, "end");
    if (s->failed) return;
    if (cmp(v->begin, v->begin_len, v->end, v->end_len) >= 0) {
        bad(s, NULL, "is empty or inverted (begin >= end)");
        return;
    }
    if (prev && cmp(prev->end, prev->end_len, v->begin, v->begin_len) != 0) {
        bad(s, "begin", "is not the previous shard's end");
        return;
    }
    io_count(s, &v->n_team, 4, "team");
    if (s->failed) return;
    if (v->n_team == 0 || v->n_team > RL_PROTO_MAX_TEAM) {
        bad(s, "team", "has %u members (1 to %d)", v->n_team, RL_PROTO_MAX_TEAM);
        return;
    }
    uint32_t *team = io_array(s, v->team, v->n_team, sizeof *team, "team");
    for (uint32_t j = 0; j < v->n_team && !s->failed; j++) {
        io_u32(s, &team[j], "team");
        for (uint32_t k = 0; k < j && !s->failed; k++)
            if (team[k] == team[j]) bad(s, "team", "holds id %u twice", team[j]);
    }
    if (!s->failed && s->decoding) v->team = team;
}

static void x_get_shard_map_reply(io *s, rl__msg_get_shard_map_reply *m) {
    io_u64(s, &m->version, "version");
    io_count(s, &m->n_servers, MIN_SERVER, "servers");
    rl__msg_server *sv = io_array(s, m->servers, m->n_servers, sizeof *sv, "servers");
    if (s->failed) return;
    enter(s, "servers", 0);
    for (uint32_t i = 0; i < m->n_servers && !s->failed; i++) {
        at(s, i);
        io_server(s, &sv[i]);
        if (!s->failed && i > 0 && sv[i].id <= sv[i - 1].id)
            bad(s, "id", "is %u, not above the previous server's %u", sv[i].id, sv[i - 1].id);
    }
    leave(s);
    if (s->failed) return;
    if (s->decoding) m->servers = sv;
    io_count(s, &m->n_shards, MIN_SHARD, "shards");
    rl__msg_shard *sh = io_array(s, m->shards, m->n_shards, sizeof *sh, "shards");
    if (s->failed) return;
    enter(s, "shards", 0);
    for (uint32_t i = 0; i < m->n_shards && !s->failed; i++) {
        at(s, i);
        io_shard(s, &sh[i], i > 0 ? &sh[i - 1] : NULL);
    }
    leave(s);
    if (!s->failed && s->decoding) m->shards = sh;
    io_u32(s, &m->delay_us, "delay_us");
    io_u32(s, &m->jitter_us, "jitter_us");
}

static void x_set_delay_req(io *s, rl__msg_set_delay_req *m) {
    io_u32(s, &m->delay_us, "delay_us");
    io_u32(s, &m->jitter_us, "jitter_us");
}

static void x_register_storage_req(io *s, rl__msg_register_storage_req *m) {
    io_u32(s, &m->id, "id");
    io_address(s, &m->address, &m->address_len, "address");
    io_port(s, &m->port, "port");
    io_bytes(s, &m->host, &m->host_len, RL_PROTO_MAX_STRING, "host");
    io_u64(s, &m->durable_version, "durable_version");
}

static void x_register_storage_reply(io *s, rl__msg_register_storage_reply *m) {
    io_u64(s, &m->start_version, "start_version");
    io_ranges(s, &m->ranges, &m->n_ranges, "ranges");
    if (s->failed) return;
    enter(s, "ranges", 0);
    for (uint32_t i = 0; i < m->n_ranges && !s->failed; i++) {
        const rl__keyrange *r = &m->ranges[i];
        at(s, i);
        if (cmp(r->begin, r->begin_len, r->end, r->end_len) == 0) bad(s, NULL, "is empty");
        else if (i > 0 && cmp(m->ranges[i - 1].end, m->ranges[i - 1].end_len, r->begin, r->begin_len) > 0)
            bad(s, "begin", "is below the previous range's end (overlap or out of order)");
    }
    leave(s);
}

static void x_peek_req(io *s, rl__msg_peek_req *m) {
    io_u32(s, &m->storage_id, "storage_id");
    io_u64(s, &m->after_version, "after_version");
    io_u32(s, &m->max_bytes, "max_bytes");
    io_u32(s, &m->max_wait_ms, "max_wait_ms");
}

static void x_peek_reply(io *s, rl__msg_peek_reply *m) {
    io_u64(s, &m->end_version, "end_version");
    io_count(s, &m->n_versions, MIN_PEEK_VERSION, "versions");
    rl__msg_peek_version *pv = io_array(s, m->versions, m->n_versions, sizeof *pv, "versions");
    if (s->failed) return;
    enter(s, "versions", 0);
    for (uint32_t i = 0; i < m->n_versions && !s->failed; i++) {
        uint64_t ignored = 0;
        at(s, i);
        io_u64(s, &pv[i].version, "version");
        if (s->failed) break;
        if (pv[i].version > m->end_version)
            bad(s, "version", "is %llu, above end_version %llu", (unsigned long long)pv[i].version,
                (unsigned long long)m->end_version);
        else if (i > 0 && pv[i].version <= pv[i - 1].version)
            bad(s, "version", "is %llu, not above the previous %llu", (unsigned long long)pv[i].version,
                (unsigned long long)pv[i - 1].version);
        io_mutations(s, &pv[i].muts, &pv[i].n_muts, 1, &ignored, "mutations");
    }
    leave(s);
    if (s->failed) return;
    if (s->decoding) m->versions = pv;
    io_count(s, &m->n_changes, MIN_CHANGE, "changes");
    rl__msg_shard_change *ch = io_array(s, m->changes, m->n_changes, sizeof *ch, "changes");
    if (s->failed) return;
    enter(s, "changes", 0);
    for (uint32_t i = 0; i < m->n_changes && !s->failed; i++) {
        at(s, i);
        io_u64(s, &ch[i].version, "version");
        if (s->failed) break;
        if (ch[i].version > m->end_version)
            bad(s, "version", "is %llu, above end_version %llu", (unsigned long long)ch[i].version,
                (unsigned long long)m->end_version);
        else if (i > 0 && ch[i].version < ch[i - 1].version)
            bad(s, "version", "is %llu, below the previous %llu", (unsigned long long)ch[i].version,
                (unsigned long long)ch[i - 1].version);
        io_enum8(s, &ch[i].kind, RL_SHARD_ASSIGN, RL_SHARD_REMOVE, "kind");
        enter(s, "range", NO_INDEX);
        io_range(s, &ch[i].range);
        if (!s->failed && cmp(ch[i].range.begin, ch[i].range.begin_len, ch[i].range.end, ch[i].range.end_len) == 0)
            bad(s, NULL, "is empty");
        leave(s);
    }
    leave(s);
    if (!s->failed && s->decoding) m->changes = ch;
}

static void x_pop_req(io *s, rl__msg_pop_req *m) {
    io_u32(s, &m->storage_id, "storage_id");
    io_u64(s, &m->durable_version, "durable_version");
}

static void x_status_reply(io *s, rl__msg_status_reply *m) {
    io_bytes(s, &m->json, &m->json_len, RL_PROTO_MAX_JSON, "json");
}

static void x_get_req(io *s, rl__msg_get_req *m) {
    io_u64(s, &m->version, "version");
    io_bytes(s, &m->key, &m->key_len, RL_PROTO_MAX_KEY, "key");
}

static void x_get_reply(io *s, rl__msg_get_reply *m) {
    io_bool8(s, &m->present, "present");
    io_bytes(s, &m->value, &m->value_len, RL_PROTO_MAX_VALUE, "value");
    if (!s->failed && !m->present && m->value_len) bad(s, "value", "has %u bytes but present is 0", m->value_len);
}

static void x_watch_value_req(io *s, rl__msg_watch_value_req *m) {
    io_u64(s, &m->version, "version");
    io_bytes(s, &m->key, &m->key_len, RL_PROTO_MAX_KEY, "key");
    io_bool8(s, &m->present, "present");
    io_bytes(s, &m->value, &m->value_len, RL_PROTO_MAX_VALUE, "value");
    if (!s->failed && !m->present && m->value_len) bad(s, "value", "has %u bytes but present is 0", m->value_len);
    io_u32(s, &m->hold_ms, "hold_ms");
    if (!s->failed && (m->hold_ms == 0 || m->hold_ms > RL_PROTO_MAX_WATCH_HOLD_MS))
        bad(s, "hold_ms", "is %u, not 1..%u", m->hold_ms, (unsigned)RL_PROTO_MAX_WATCH_HOLD_MS);
}

static void x_watch_value_reply(io *s, rl__msg_watch_value_reply *m) {
    io_bool8(s, &m->changed, "changed");
    io_u64(s, &m->version, "version");
}

static void x_get_key_req(io *s, rl__msg_get_key_req *m) {
    io_u64(s, &m->version, "version");
    io_selector(s, &m->sel, "sel");
}

static void x_get_key_reply(io *s, rl__msg_get_key_reply *m) {
    io_bool8(s, &m->resolved, "resolved");
    io_selector(s, &m->sel, "sel");
    if (!s->failed && m->resolved && (m->sel.or_equal != 0 || m->sel.offset != 1))
        bad(s, "sel", "is resolved but not firstGreaterOrEqual (or_equal %d, offset %d)", m->sel.or_equal,
            m->sel.offset);
}

static void x_get_range_req(io *s, rl__msg_get_range_req *m) {
    io_u64(s, &m->version, "version");
    io_selector(s, &m->begin, "begin");
    io_selector(s, &m->end, "end");
    io_nonneg32(s, &m->limit, "limit");
    io_nonneg64(s, &m->target_bytes, "target_bytes");
    io_bool8(s, &m->reverse, "reverse");
}

/* The tail GET_RANGE and GET_MAPPED_RANGE replies share: more, status, three keys, and the rule
 * that an unresolved selector comes with no rows. */
static void io_range_tail(io *s, uint8_t *more, uint8_t *status, uint32_t n_rows, const uint8_t **rt, uint32_t *rt_len,
                          const uint8_t **rb, uint32_t *rb_len, const uint8_t **re, uint32_t *re_len) {
    io_bool8(s, more, "more");
    io_enum8(s, status, RL_RANGE_OK, RL_RANGE_SELECTOR_UNRESOLVED, "status");
    if (!s->failed && *status == RL_RANGE_SELECTOR_UNRESOLVED && (n_rows || *more))
        bad(s, "status", "is selector_unresolved but rows or more are set");
    io_bytes(s, rt, rt_len, RL_PROTO_MAX_KEY, "read_through");
    io_bytes(s, rb, rb_len, RL_PROTO_MAX_KEY, "resolved_begin");
    io_bytes(s, re, re_len, RL_PROTO_MAX_KEY, "resolved_end");
}

static void x_get_range_reply(io *s, rl__msg_get_range_reply *m) {
    io_kvs(s, &m->kvs, &m->n_kvs, "kvs");
    io_range_tail(s, &m->more, &m->status, m->n_kvs, &m->read_through, &m->read_through_len, &m->resolved_begin,
                  &m->resolved_begin_len, &m->resolved_end, &m->resolved_end_len);
}

static void x_get_metrics_req(io *s, rl__msg_get_metrics_req *m) {
    io_enum8(s, &m->op, RL_METRICS_ESTIMATE, RL_METRICS_SPLIT, "op");
    enter(s, "range", NO_INDEX);
    io_range(s, &m->range);
    if (!s->failed && cmp(m->range.begin, m->range.begin_len, m->range.end, m->range.end_len) == 0)
        bad(s, NULL, "is empty");
    leave(s);
    io_nonneg64(s, &m->chunk, "chunk");
    if (!s->failed && (m->op == RL_METRICS_SPLIT) != (m->chunk > 0))
        bad(s, "chunk", "is %lld (positive for a split, 0 for an estimate)", (long long)m->chunk);
}

static void x_get_metrics_reply(io *s, rl__msg_get_metrics_reply *m) {
    io_nonneg64(s, &m->bytes, "bytes");
    io_count(s, &m->n_cuts, MIN_BYTES, "cuts");
    rl_slice *v = io_array(s, m->cuts, m->n_cuts, sizeof *v, "cuts");
    if (s->failed) return;
    enter(s, "cuts", 0);
    for (uint32_t i = 0; i < m->n_cuts && !s->failed; i++) {
        at(s, i);
        const uint8_t *p = s->decoding ? NULL : v[i].data;
        uint32_t l = 0;
        if (!s->decoding) {
            if (v[i].len > RL_PROTO_MAX_KEY) {
                bad(s, NULL, "is %zu bytes, longer than the limit %u", v[i].len, RL_PROTO_MAX_KEY);
                break;
            }
            l = (uint32_t)v[i].len;
        }
        io_bytes(s, &p, &l, RL_PROTO_MAX_KEY, "key");
        if (s->failed) break;
        if (s->decoding) v[i].data = p, v[i].len = l;
        if (i > 0 && cmp(v[i - 1].data, (uint32_t)v[i - 1].len, p, l) >= 0)
            bad(s, NULL, "is not above the previous cut");
    }
    leave(s);
    if (s->failed) return;
    if (s->decoding) m->cuts = v;
    io_bytes(s, &m->read_through, &m->read_through_len, RL_PROTO_MAX_KEY, "read_through");
}

static void x_get_mapped_range_req(io *s, rl__msg_get_mapped_range_req *m) {
    io_u64(s, &m->version, "version");
    io_selector(s, &m->begin, "begin");
    io_selector(s, &m->end, "end");
    io_bytes(s, &m->mapper, &m->mapper_len, RL_PROTO_MAX_MAPPER, "mapper");
    io_nonneg32(s, &m->limit, "limit");
    io_nonneg64(s, &m->target_bytes, "target_bytes");
    /* reverse (bit 0), omit_index (bit 1) and defer_remote (bit 2) share a byte: without the
     * last two, the byte of the request before them. */
    if (!s->decoding && (m->reverse > 1 || m->omit_index > 1 || m->defer_remote > 1)) {
        const char *f = m->reverse > 1 ? "reverse" : m->omit_index > 1 ? "omit_index" : "defer_remote";
        bad(s, f, "is %u, not 0 or 1",
            (unsigned)(m->reverse > 1      ? m->reverse
                       : m->omit_index > 1 ? m->omit_index
                                           : m->defer_remote));
        return;
    }
    uint8_t fl = s->decoding ? 0 : (uint8_t)(m->reverse | m->omit_index << 1 | m->defer_remote << 2);
    io_u8(s, &fl, "reverse");
    if (!s->failed && fl > 7)
        bad(s, "reverse", "is %u, not 0 or 1 (reverse) plus 0 or 2 (omit_index) plus 0 or 4 (defer_remote)",
            (unsigned)fl);
    if (!s->failed && s->decoding) m->reverse = fl & 1, m->omit_index = (fl >> 1) & 1, m->defer_remote = fl >> 2;
    io_nonneg32(s, &m->secondary_row_limit, "secondary_row_limit");
    io_nonneg64(s, &m->secondary_byte_limit, "secondary_byte_limit");
    io_enum8(s, &m->strategy, RL_FETCH_DEFAULT, RL_FETCH_GROUPED, "strategy");
    io_u32(s, &m->batch, "batch");
    if (!s->failed && m->batch > RL_PROTO_MAX_BATCH)
        bad(s, "batch", "is %u, above the limit %d", m->batch, RL_PROTO_MAX_BATCH);
}

/* An entry's is_range byte carries is_range (bit 0) and index_omitted (bit 1); an omitted
 * entry's index key and value are empty and index_omitted_len (u32) follows the byte. */
static void io_entry_kind(io *s, rl_mapped_keyvalue *e) {
    if (!s->decoding) {
        if (e->is_range != 0 && e->is_range != 1) {
            bad(s, "is_range", "is %d, not 0 or 1", e->is_range);
            return;
        }
        if (e->index_omitted != 0 && e->index_omitted != 1) {
            bad(s, "index_omitted", "is %d, not 0 or 1", e->index_omitted);
            return;
        }
    }
    uint8_t b = s->decoding ? 0 : (uint8_t)(e->is_range | e->index_omitted << 1);
    io_u8(s, &b, "is_range");
    if (s->failed) return;
    if (b > 3) {
        bad(s, "is_range", "is %u, not 0 or 1 plus 0 or 2 (index_omitted)", (unsigned)b);
        return;
    }
    if ((b & 2) && (e->index.key_len || e->index.value_len)) {
        bad(s, "index", "is omitted but not empty");
        return;
    }
    uint32_t ol = (b & 2) && !s->decoding ? e->index_omitted_len : 0;
    if (b & 2) io_u32(s, &ol, "index_omitted_len");
    if (!s->failed && s->decoding) e->is_range = b & 1, e->index_omitted = b >> 1, e->index_omitted_len = ol;
}

static void io_entry(io *s, rl_mapped_keyvalue *e) {
    enter(s, "index", NO_INDEX);
    io_kv(s, &e->index);
    leave(s);
    io_entry_kind(s, e);
    io_bytes(s, &e->begin, &e->begin_len, RL_PROTO_MAX_KEY, "begin");
    io_bytes(s, &e->end, &e->end_len, RL_PROTO_MAX_KEY, "end");
    if (s->failed) return;
    if (!s->decoding && e->n_kvs < 0) {
        bad(s, "kvs", "has a negative count %d", e->n_kvs);
        return;
    }
    uint32_t n = s->decoding ? 0 : (uint32_t)e->n_kvs;
    const rl_keyvalue *kvs = e->kvs;
    io_kvs(s, &kvs, &n, "kvs");
    if (s->failed) return;
    if (n > INT_MAX) { /* cannot happen below 16 GiB of payload */
        bad(s, "kvs", "has %u rows, more than an int holds", n);
        return;
    }
    if (!e->is_range && n > 1) {
        bad(s, "kvs", "has %u rows for a point read", n);
        return;
    }
    if (s->decoding) e->kvs = kvs, e->n_kvs = (int)n;
    io_bool_int(s, &e->more, "more");
    io_bool_int(s, &e->served_locally, "served_locally");
}

/* ---- The mapped reply's entries, fast paths ----------------------------------------------
 *
 * A 1,000-entry mapped reply is ~226 KB in ~10,000 fields; through the io_* walk (a call, a
 * failure check and a buffer append per field) its encoding cost the storage server about as
 * much as the mapped read itself. The entries are therefore encoded in two passes — one that
 * checks every rule io_entry checks and adds up the exact size, one that writes into the room
 * reserved once — and decoded by one straight walk. Both are exact shortcuts of the io_entry
 * walk: where a rule is broken (or memory is short) the io_entry walk takes over — for all the
 * entries when encoding, from the entry concerned when decoding — and fails with its usual
 * reason (or, memory permitting, succeeds). So
 * bytes, decoded structs and error messages are those of the walk (tests: net_5_1 compares the
 * two on random and broken replies; fuzz_proto checks every decoded mapped reply against it). */

/* Bytes of a byte string that io_bytes would accept when encoding (<= max, no NULL with data);
 * 0 when it would refuse. */
static inline int bytes_ok(const uint8_t *p, uint32_t n, uint32_t max) { return n <= max && (p || !n); }

static inline uint8_t *put_bytes(uint8_t *o, const uint8_t *p, uint32_t n) {
    put32(o, n);
    if (n) memcpy(o + 4, p, n);
    return o + 4 + n;
}

/* Encode ev[0..n) as the io_entry walk would: 1 done, or 0 with nothing written (a rule is
 * broken, or memory is short: the walk then encodes them, or fails with its reason). */
static int entries_encode_fast(io *s, const rl_mapped_keyvalue *ev, uint32_t n) {
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        const rl_mapped_keyvalue *e = &ev[i];
        if (!bytes_ok(e->index.key, e->index.key_len, RL_PROTO_MAX_KEY) ||
            !bytes_ok(e->index.value, e->index.value_len, RL_PROTO_MAX_VALUE) ||
            (e->is_range != 0 && e->is_range != 1) || (e->index_omitted != 0 && e->index_omitted != 1) ||
            (e->index_omitted && (e->index.key_len || e->index.value_len)) ||
            !bytes_ok(e->begin, e->begin_len, RL_PROTO_MAX_KEY) || !bytes_ok(e->end, e->end_len, RL_PROTO_MAX_KEY) ||
            e->n_kvs < 0 || (e->n_kvs && !e->kvs) || (!e->is_range && e->n_kvs > 1) || (e->more != 0 && e->more != 1) ||
            (e->served_locally != 0 && e->served_locally != 1))
            return 0;
        total += 4 + (size_t)e->index.key_len + 4 + (size_t)e->index.value_len + 1 + 4 + (size_t)e->begin_len + 4 +
                 (size_t)e->end_len + 4 + 1 + 1 + (e->index_omitted ? 4 : 0);
        for (int j = 0; j < e->n_kvs; j++) {
            const rl_keyvalue *kv = &e->kvs[j];
            if (!bytes_ok(kv->key, kv->key_len, RL_PROTO_MAX_KEY) ||
                !bytes_ok(kv->value, kv->value_len, RL_PROTO_MAX_VALUE))
                return 0;
            total += 8 + (size_t)kv->key_len + (size_t)kv->value_len;
        }
    }
    if (rl__buf_reserve(s->out, total) != RL_OK) return 0;
    uint8_t *o = s->out->data + s->out->len;
    for (uint32_t i = 0; i < n; i++) {
        const rl_mapped_keyvalue *e = &ev[i];
        o = put_bytes(o, e->index.key, e->index.key_len);
        o = put_bytes(o, e->index.value, e->index.value_len);
        *o++ = (uint8_t)(e->is_range | e->index_omitted << 1);
        if (e->index_omitted) put32(o, e->index_omitted_len), o += 4;
        o = put_bytes(o, e->begin, e->begin_len);
        o = put_bytes(o, e->end, e->end_len);
        put32(o, (uint32_t)e->n_kvs);
        o += 4;
        for (int j = 0; j < e->n_kvs; j++) {
            o = put_bytes(o, e->kvs[j].key, e->kvs[j].key_len);
            o = put_bytes(o, e->kvs[j].value, e->kvs[j].value_len);
        }
        *o++ = (uint8_t)e->more;
        *o++ = (uint8_t)e->served_locally;
    }
    s->out->len += total; /* the room reserve made (buf.h: data[len] stays 0) */
    s->out->data[s->out->len] = 0;
    return 1;
}

/* Take a byte string as io_bytes decodes it; 0 when io_bytes would fail. */
static inline int take_bytes(const uint8_t **pp, size_t *left, const uint8_t **b, uint32_t *len, uint32_t max) {
    if (*left < 4) return 0;
    uint32_t n = get32(*pp);
    if (n > max || n > *left - 4) return 0;
    *b = *pp + 4;
    *len = n;
    *pp += 4 + (size_t)n;
    *left -= 4 + (size_t)n;
    return 1;
}

/* Take a u8 boolean into an int as io_bool_int decodes it; 0 when it would fail. */
static inline int take_bool(const uint8_t **pp, size_t *left, int *v) {
    if (*left < 1 || **pp > 1) return 0;
    *v = **pp;
    (*pp)++;
    (*left)--;
    return 1;
}

/* Take an entry's is_range byte (and index_omitted_len) as io_entry_kind decodes them, the
 * index already taken; 0 when it would fail. */
static inline int take_kind(const uint8_t **pp, size_t *left, rl_mapped_keyvalue *e) {
    if (*left < 1 || **pp > 3) return 0;
    uint8_t b = **pp;
    if (b & 2) {
        if (e->index.key_len || e->index.value_len || *left < 5) return 0;
        e->index_omitted_len = get32(*pp + 1);
        *pp += 5;
        *left -= 5;
    } else {
        e->index_omitted_len = 0;
        (*pp)++;
        (*left)--;
    }
    e->is_range = b & 1;
    e->index_omitted = b >> 1;
    return 1;
}

/* Decode entries into ev[0..n) as the io_entry walk would, as far as the walk would succeed
 * (and memory lasts): returns how many, s advanced past them. The walk takes over from the
 * first entry not done (so its reason names that entry, and nothing is allocated twice but
 * that entry's rows). */
static uint32_t entries_decode_fast(io *s, rl_mapped_keyvalue *ev, uint32_t n) {
    const uint8_t *p = s->p;
    size_t left = s->left;
    uint32_t i = 0;
    for (; i < n; i++) {
        rl_mapped_keyvalue *e = &ev[i];
        const uint8_t *q = p; /* entry i starts here */
        size_t ql = left;
        uint32_t nk;
        rl_keyvalue *kv = NULL;
        if (!take_bytes(&p, &left, &e->index.key, &e->index.key_len, RL_PROTO_MAX_KEY) ||
            !take_bytes(&p, &left, &e->index.value, &e->index.value_len, RL_PROTO_MAX_VALUE) ||
            !take_kind(&p, &left, e) || !take_bytes(&p, &left, &e->begin, &e->begin_len, RL_PROTO_MAX_KEY) ||
            !take_bytes(&p, &left, &e->end, &e->end_len, RL_PROTO_MAX_KEY) || left < 4)
            goto stop;
        nk = get32(p);
        p += 4;
        left -= 4;
        if ((uint64_t)nk * MIN_KV > left || nk > INT_MAX || (!e->is_range && nk > 1)) goto stop;
        if (nk) {
            kv = rl__arena_alloc(s->arena, (size_t)nk * sizeof *kv);
            if (!kv) goto stop;
            for (uint32_t j = 0; j < nk; j++)
                if (!take_bytes(&p, &left, &kv[j].key, &kv[j].key_len, RL_PROTO_MAX_KEY) ||
                    !take_bytes(&p, &left, &kv[j].value, &kv[j].value_len, RL_PROTO_MAX_VALUE))
                    goto stop;
        }
        e->kvs = kv;
        e->n_kvs = (int)nk;
        if (!take_bool(&p, &left, &e->more) || !take_bool(&p, &left, &e->served_locally)) goto stop;
        continue;
    stop:
        p = q, left = ql;
        break;
    }
    s->p = p;
    s->left = left;
    return i;
}

static void x_get_mapped_range_reply(io *s, rl__msg_get_mapped_range_reply *m) {
    io_count(s, &m->n_entries, MIN_ENTRY, "entries");
    rl_mapped_keyvalue *ev = io_array(s, m->entries, m->n_entries, sizeof *ev, "entries");
    if (s->failed) return;
    /* The fast paths, then the walk for whatever they left (everything, or nothing). */
    uint32_t done = 0;
    if (!s->no_fast && m->n_entries)
        done = s->decoding                                ? entries_decode_fast(s, ev, m->n_entries)
               : entries_encode_fast(s, ev, m->n_entries) ? m->n_entries
                                                          : 0;
    enter(s, "entries", 0);
    for (uint32_t i = done; i < m->n_entries && !s->failed; i++) {
        at(s, i);
        io_entry(s, &ev[i]);
    }
    leave(s);
    if (s->failed) return;
    if (s->decoding) m->entries = ev;
    io_range_tail(s, &m->more, &m->status, m->n_entries, &m->read_through, &m->read_through_len, &m->resolved_begin,
                  &m->resolved_begin_len, &m->resolved_end, &m->resolved_end_len);
    enter(s, "stats", NO_INDEX);
    io_u32(s, &m->stats.secondaries_local, "secondaries_local");
    io_u32(s, &m->stats.secondaries_remote, "secondaries_remote");
    io_u32(s, &m->stats.s2s_requests, "s2s_requests");
    io_u32(s, &m->stats.s2s_round_trips, "s2s_round_trips");
    io_u64(s, &m->stats.server_ns, "server_ns");
    io_u64(s, &m->stats.s2s_bytes_sent, "s2s_bytes_sent");
    io_u64(s, &m->stats.s2s_bytes_received, "s2s_bytes_received");
    io_u32(s, &m->stats.s2s_peers, "s2s_peers");
    io_count(s, &m->stats.n_peer_stats, MIN_PEER_STAT, "peer_stats");
    if (!s->failed && m->stats.n_peer_stats > RL_PROTO_MAX_PEER_STATS)
        bad(s, "peer_stats", "has %u entries (at most %d)", m->stats.n_peer_stats, RL_PROTO_MAX_PEER_STATS);
    rl__msg_s2s_peer *ps = io_array(s, m->stats.peer_stats, m->stats.n_peer_stats, sizeof *ps, "peer_stats");
    for (uint32_t i = 0; i < m->stats.n_peer_stats && !s->failed; i++) {
        io_u32(s, &ps[i].server_id, "server_id");
        if (!s->failed && ps[i].server_id == 0) bad(s, "peer_stats", "names server 0 (the coordinator)");
        for (uint32_t k = 0; k < i && !s->failed; k++)
            if (ps[k].server_id == ps[i].server_id) bad(s, "peer_stats", "names server %u twice", ps[i].server_id);
        io_u32(s, &ps[i].requests, "requests");
        io_u32(s, &ps[i].items, "items");
        io_u64(s, &ps[i].bytes_sent, "bytes_sent");
        io_u64(s, &ps[i].bytes_received, "bytes_received");
    }
    if (!s->failed && s->decoding) m->stats.peer_stats = ps;
    leave(s);
}

static void x_get_mapped_stream_req(io *s, rl__msg_get_mapped_stream_req *m) {
    x_get_mapped_range_req(s, &m->r);
    io_u32(s, &m->chunk_bytes, "chunk_bytes");
    io_u32(s, &m->window_bytes, "window_bytes");
}

static void x_mapped_chunk(io *s, rl__msg_mapped_chunk *m) {
    io_count(s, &m->n_entries, MIN_ENTRY, "entries");
    rl_mapped_keyvalue *ev = io_array(s, m->entries, m->n_entries, sizeof *ev, "entries");
    if (s->failed) return;
    uint32_t done = 0;
    if (!s->no_fast)
        done = s->decoding                                ? entries_decode_fast(s, ev, m->n_entries)
               : entries_encode_fast(s, ev, m->n_entries) ? m->n_entries
                                                          : 0;
    enter(s, "entries", 0);
    for (uint32_t i = done; i < m->n_entries && !s->failed; i++) {
        at(s, i);
        io_entry(s, &ev[i]);
    }
    leave(s);
    if (!s->failed && s->decoding) m->entries = ev;
}

static void x_mapped_credit(io *s, rl__msg_mapped_credit *m) {
    io_u32(s, &m->bytes, "bytes");
    io_bool8(s, &m->cancel, "cancel");
}

static void x_get_multi_req(io *s, rl__msg_get_multi_req *m) {
    io_u64(s, &m->version, "version");
    io_count(s, &m->n_items, MIN_ITEM, "items");
    rl__msg_read_item *it = io_array(s, m->items, m->n_items, sizeof *it, "items");
    if (s->failed) return;
    enter(s, "items", 0);
    for (uint32_t i = 0; i < m->n_items && !s->failed; i++) {
        at(s, i);
        io_bool8(s, &it[i].is_range, "is_range");
        io_bytes(s, &it[i].begin, &it[i].begin_len, RL_PROTO_MAX_KEY, "begin");
        io_bytes(s, &it[i].end, &it[i].end_len, RL_PROTO_MAX_KEY, "end");
        if (!s->failed && it[i].is_range && cmp(it[i].begin, it[i].begin_len, it[i].end, it[i].end_len) > 0)
            bad(s, NULL, "is an inverted range (begin > end)");
        io_nonneg32(s, &it[i].row_limit, "row_limit");
        io_nonneg64(s, &it[i].byte_limit, "byte_limit");
    }
    leave(s);
    if (!s->failed && s->decoding) m->items = it;
    io_u64(s, &m->max_bytes, "max_bytes");
}

static void x_get_multi_reply(io *s, rl__msg_get_multi_reply *m) {
    io_count(s, &m->n_results, MIN_RESULT, "results");
    rl__msg_read_result *rv = io_array(s, m->results, m->n_results, sizeof *rv, "results");
    if (s->failed) return;
    enter(s, "results", 0);
    for (uint32_t i = 0; i < m->n_results && !s->failed; i++) {
        at(s, i);
        io_i32(s, &rv[i].error, "error");
        if (!s->failed && rv[i].error < 0) bad(s, "error", "is negative (%d)", (int)rv[i].error);
        io_kvs(s, &rv[i].kvs, &rv[i].n_kvs, "kvs");
        io_bool8(s, &rv[i].more, "more");
        if (!s->failed && rv[i].error && (rv[i].n_kvs || rv[i].more))
            bad(s, "error", "is %d but rows or more are set", (int)rv[i].error);
    }
    leave(s);
    if (!s->failed && s->decoding) m->results = rv;
}

/* ---- Drivers ----------------------------------------------------------------------------- */

typedef void (*xfer_fn)(io *s, void *m);

/* Encode m with x, appending to out; on failure truncate out back (invariant 1: m is only read,
 * so the const cast of the callers is safe). */
static int run_encode_mode(const char *msg, xfer_fn x, rl_buf *out, const void *m, rl__errdetail *err, int no_fast) {
    io s;
    memset(&s, 0, sizeof s);
    s.no_fast = no_fast;
    s.out = out;
    s.msg = msg;
    s.err = err;
    rl__errdetail_clear(err);
    size_t start = out->len;
    if (rl__buf_error(out) != RL_OK) {
        fail_rc(&s, RL_E_OUT_OF_MEMORY, NULL, "the buffer is out of memory");
        return s.rc;
    }
    x(&s, (void *)m);
    if (!s.failed && rl__buf_error(out) != RL_OK) fail_rc(&s, RL_E_OUT_OF_MEMORY, NULL, "the buffer is out of memory");
    if (s.failed) {
        rl__buf_truncate(out, out->len < start ? out->len : start);
        return s.rc;
    }
    return RL_OK;
}

static int run_encode(const char *msg, xfer_fn x, rl_buf *out, const void *m, rl__errdetail *err) {
    return run_encode_mode(msg, x, out, m, err, 0);
}

/* The entries of a MAPPED_CHUNK without their count, appended (x_mapped_chunk's entries). */
static void x_entries_only(io *s, void *vm) {
    const rl__msg_mapped_chunk *m = vm;
    if (entries_encode_fast(s, m->entries, m->n_entries)) return;
    enter(s, "entries", 0);
    for (uint32_t i = 0; i < m->n_entries && !s->failed; i++) {
        at(s, i);
        io_entry(s, (rl_mapped_keyvalue *)&m->entries[i]);
    }
    leave(s);
}

int rl__msg_mapped_entries_append(rl_buf *out, const rl_mapped_keyvalue *ev, uint32_t n, rl__errdetail *err) {
    rl__msg_mapped_chunk m = {ev, n};
    return run_encode_mode("MAPPED_CHUNK", x_entries_only, out, &m, err, 0);
}

/* ---- Placement (30-32) ---- */

static void x_split_shard_req(io *s, rl__msg_split_shard_req *m) {
    io_bytes(s, &m->key, &m->key_len, RL_PROTO_MAX_KEY, "key");
}

static void x_split_shard_reply(io *s, rl__msg_split_shard_reply *m) {
    io_u64(s, &m->version, "version");
    io_bool8(s, &m->split, "split");
}

/* A non-empty range (begin < end). */
static void io_nonempty_range(io *s, rl__keyrange *r, const char *name) {
    enter(s, name, NO_INDEX);
    io_range(s, r);
    if (!s->failed && cmp(r->begin, r->begin_len, r->end, r->end_len) == 0) bad(s, NULL, "is empty");
    leave(s);
}

static void x_assign_shard_req(io *s, rl__msg_assign_shard_req *m) {
    io_nonempty_range(s, &m->range, "range");
    io_count(s, &m->n_team, 4, "team");
    if (s->failed) return;
    if (m->n_team == 0 || m->n_team > RL_PROTO_MAX_TEAM) {
        bad(s, "team", "has %u members (1 to %d)", m->n_team, RL_PROTO_MAX_TEAM);
        return;
    }
    uint32_t *team = io_array(s, m->team, m->n_team, sizeof *team, "team");
    for (uint32_t j = 0; j < m->n_team && !s->failed; j++) {
        io_u32(s, &team[j], "team");
        for (uint32_t k = 0; k < j && !s->failed; k++)
            if (team[k] == team[j]) bad(s, "team", "holds id %u twice", team[j]);
    }
    if (!s->failed && s->decoding) m->team = team;
    io_u32(s, &m->timeout_ms, "timeout_ms");
}

static void x_assign_shard_reply(io *s, rl__msg_assign_shard_reply *m) {
    io_u64(s, &m->version, "version");
    io_u32(s, &m->moved, "moved");
}

static void x_move_shard_req(io *s, rl__msg_move_shard_req *m) {
    io_u32(s, &m->storage_id, "storage_id");
    io_nonempty_range(s, &m->range, "range");
    io_u64(s, &m->version, "version");
}

/* Decode payload[0..len) into m (size bytes, zeroed first and again on failure) with x. */
static int run_decode_mode(const char *msg, xfer_fn x, const uint8_t *payload, size_t len, rl_arena *a, void *m,
                           size_t size, rl__errdetail *err, int no_fast) {
    io s;
    memset(&s, 0, sizeof s);
    s.no_fast = no_fast;
    s.decoding = 1;
    s.p = payload;
    s.left = payload ? len : 0;
    s.arena = a;
    s.msg = msg;
    s.err = err;
    rl__errdetail_clear(err);
    memset(m, 0, size);
    if (!payload && len) {
        fail_rc(&s, RL_E_INVALID_ARGUMENT, NULL, "payload is NULL with length %zu", len);
        return s.rc;
    }
    x(&s, m);
    if (!s.failed && s.left) bad(&s, NULL, "has %zu trailing bytes", s.left);
    if (s.failed) {
        /* Keep the two fields a foreign HELLO, AUTH_CHALLENGE or AUTH was refused for (proto.h). */
        if (s.rc != RL_E_INCOMPATIBLE_PROTOCOL_VERSION) memset(m, 0, size);
        return s.rc;
    }
    return RL_OK;
}

static int run_decode(const char *msg, xfer_fn x, const uint8_t *payload, size_t len, rl_arena *a, void *m, size_t size,
                      rl__errdetail *err) {
    return run_decode_mode(msg, x, payload, len, a, m, size, err, 0);
}

/* ---- Message types -------------------------------------------------------------------------- */

/* Every message's name and flags by type (a type given twice in messages.def is a duplicate
 * initializer: -Werror=override-init). */
static const struct {
    const char *name; /* NULL: not a message */
    unsigned flags;   /* RL_MSGF_* */
} MESSAGES[RL_MSG_TYPE_LIMIT] = {
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) [TYPE] = {#NAME, FLAGS},
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) [TYPE] = {#NAME, FLAGS},
#include "net/messages.def"
#undef RL_MSG
#undef RL_MSG_ONE_WAY
};

const char *rl__msg_type_name(int type) {
    if (type >= 0 && type < RL_MSG_TYPE_LIMIT && MESSAGES[type].name) return MESSAGES[type].name;
    if (type >= RL_MSG_RESERVED_ADMIN_FIRST && type <= RL_MSG_RESERVED_ADMIN_LAST) return "ADMIN_RESERVED";
    if (type >= RL_MSG_RESERVED_DELAY_FIRST && type <= RL_MSG_RESERVED_DELAY_LAST) return "DELAY_RESERVED";
    return "UNKNOWN";
}

int rl__msg_type_known(int type) { return type >= 0 && type < RL_MSG_TYPE_LIMIT && MESSAGES[type].name != NULL; }

unsigned rl__msg_type_flags(int type) { return rl__msg_type_known(type) ? MESSAGES[type].flags : 0; }

/* ---- Payloads and dispatch ------------------------------------------------------------------- */

/* Every payload, as X(struct suffix, transfer function suffix, frame type, direction (0 request,
 * 1 reply, 2 error reply), the label its reasons start with): the error reply's, then those of
 * messages.def — two per message, one for a one-way message. A site that lists them defines X,
 * writes the error reply's row and includes messages.def, then undefines X. Generates the
 * per-message functions and the dispatch table. */
#define RL_MSG(NAME, TYPE, FLAGS, REQ, REQ_X, REP, REP_X) \
    X(REQ, REQ_X, RL_MSG_##NAME, 0, #NAME " request")     \
    X(REP, REP_X, RL_MSG_##NAME, 1, #NAME " reply")
#define RL_MSG_ONE_WAY(NAME, TYPE, FLAGS, REQ, REQ_X) X(REQ, REQ_X, RL_MSG_##NAME, 0, #NAME)
/* Adapters from the typed transfer functions to xfer_fn (no function pointer casts). */
#define X(name, xname, type, dir, label) \
    static void xv_##name(io *s, void *m) { x_##xname(s, (rl__msg_##name *)m); }
X(error, error, 0, 2, "error reply")
#include "net/messages.def"
#undef X

/* The public per-message functions. */
#define X(name, xname, type, dir, label)                                                              \
    int rl__msg_##name##_encode(rl_buf *out, const rl__msg_##name *m, rl__errdetail *err) {           \
        return run_encode(label, xv_##name, out, m, err);                                             \
    }                                                                                                 \
    int rl__msg_##name##_decode(const uint8_t *payload, size_t len, rl_arena *a, rl__msg_##name *out, \
                                rl__errdetail *err) {                                                 \
        return run_decode(label, xv_##name, payload, len, a, out, sizeof *out, err);                  \
    }
X(error, error, 0, 2, "error reply")
#include "net/messages.def"
#undef X

int rl__msg_get_mapped_range_reply_encode_walk(rl_buf *out, const rl__msg_get_mapped_range_reply *m,
                                               rl__errdetail *err) {
    return run_encode_mode("GET_MAPPED_RANGE reply", xv_get_mapped_range_reply, out, m, err, 1);
}

int rl__msg_get_mapped_range_reply_decode_walk(const uint8_t *payload, size_t len, rl_arena *a,
                                               rl__msg_get_mapped_range_reply *out, rl__errdetail *err) {
    return run_decode_mode("GET_MAPPED_RANGE reply", xv_get_mapped_range_reply, payload, len, a, out, sizeof *out, err,
                           1);
}

int rl__msg_peek_reply_check(const rl__msg_peek_reply *r, rl__version after, rl__errdetail *err) {
    io s;
    memset(&s, 0, sizeof s);
    s.decoding = 1;
    s.msg = "PEEK reply";
    s.err = err;
    rl__errdetail_clear(err);
    if (r->end_version < after) {
        bad(&s, "end_version", "is %llu, below the request's after_version %llu", (unsigned long long)r->end_version,
            (unsigned long long)after);
    } else if (r->n_versions && r->versions[0].version <= after) {
        /* Versions increase, so the first is the only one to check. */
        enter(&s, "versions", 0);
        bad(&s, "version", "is %llu, not above the request's after_version %llu",
            (unsigned long long)r->versions[0].version, (unsigned long long)after);
    } else if (r->n_changes && r->changes[0].version <= after) {
        enter(&s, "changes", 0);
        bad(&s, "version", "is %llu, not above the request's after_version %llu",
            (unsigned long long)r->changes[0].version, (unsigned long long)after);
    }
    return s.failed ? s.rc : RL_OK;
}

/* The payload table: what rl__msg_decode and rl__msg_encode dispatch on. */

typedef struct {
    uint16_t type;
    uint8_t dir; /* 0 request, 1 reply, 2 error reply */
    const char *label;
    xfer_fn x;
    size_t size; /* of the union member */
} payload_info;

static const payload_info PAYLOADS[] = {
#define X(name, xname, type, dir, label) {type, dir, label, xv_##name, sizeof(rl__msg_##name)},
    X(error, error, 0, 2, "error reply")
#include "net/messages.def"
#undef X
};

/* PAYLOADS' positions by name (the switch below maps (type, direction) to them in O(1); two
 * entries with one (type, direction) would be duplicate case labels: a compile error). */
enum {
#define X(name, xname, type, dir, label) PI_##name,
    X(error, error, 0, 2, "error reply")
#include "net/messages.def"
#undef X
        PI_COUNT
};

/* The payload of (type, dir) for a request or reply direction (0, 1); NULL when none. */
static const payload_info *payload_at(uint16_t type, int dir) {
    switch ((uint32_t)type * 2u + (uint32_t)dir) {
#define X(name, xname, type, dir, label) \
    case (dir) == 2 ? 0xffffffffu - PI_##name: (uint32_t)(type) * 2u + (uint32_t)(dir) : return &PAYLOADS[PI_##name];
        X(error, error, 0, 2, "error reply")
#include "net/messages.def"
#undef X
    default: return NULL;
    }
}

/* The payload of (type, flags), or NULL with the reason in *what. */
static const payload_info *find_payload(uint16_t type, uint16_t flags, const char **what) {
    int dir;
    if (flags == 0) dir = 0;
    else if (flags == RL_FRAME_REPLY) dir = 1;
    else if (flags == (RL_FRAME_REPLY | RL_FRAME_ERROR)) return &PAYLOADS[PI_error]; /* any type */
    else {
        *what = (flags & RL_FRAME_ERROR) && !(flags & RL_FRAME_REPLY) ? "flags: ERROR without REPLY"
                                                                      : "flags: unknown bits";
        return NULL;
    }
    const payload_info *pi = payload_at(type, dir);
    if (!pi) *what = "type: not a message of this protocol version";
    return pi;
}

#undef RL_MSG
#undef RL_MSG_ONE_WAY

/* ---- Fast paths of the most frequent messages -------------------------------------------------
 * A GET request and its reply (a pipelined client sends thousands a millisecond) are encoded and
 * decoded by hand when they are well formed: the same bytes and structs as the generic walk
 * (x_get_req, x_get_reply), which still handles everything else — so every malformed input gets
 * the walk's error and reason. rl__msg_decode_walk / rl__msg_encode_walk skip the fast paths
 * (tests compare the two). Each returns 1 when it did the work. */

static int get_req_decode_fast(const uint8_t *p, size_t len, rl__msg_get_req *m) {
    if (!p || len < 12) return 0;
    uint32_t n = get32(p + 8);
    if (n > RL_PROTO_MAX_KEY || n != len - 12) return 0;
    m->version = (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
    m->key = p + 12;
    m->key_len = n;
    return 1;
}

static int get_reply_decode_fast(const uint8_t *p, size_t len, rl__msg_get_reply *m) {
    if (!p || len < 5 || p[0] > 1) return 0;
    uint32_t n = get32(p + 1);
    if (n > RL_PROTO_MAX_VALUE || n != len - 5 || (p[0] == 0 && n != 0)) return 0;
    m->present = p[0];
    m->value = p + 5;
    m->value_len = n;
    return 1;
}

/* Append one header and body (the body may be NULL when n is 0); 0 (nothing appended) when the
 * buffer runs out of memory: the walk then reports it. */
static int append_fast(rl_buf *out, const uint8_t *h, size_t hn, const uint8_t *body, uint32_t n) {
    size_t start = out->len;
    rl__buf_append(out, h, hn);
    if (n) rl__buf_append(out, body, n);
    if (rl__buf_error(out) == RL_OK) return 1;
    rl__buf_truncate(out, start);
    return 0;
}

int rl__msg_get_req_head(const rl__msg_get_req *m, uint8_t out[RL_MSG_GET_REQ_HEAD]) {
    if (m->key_len > RL_PROTO_MAX_KEY || (!m->key && m->key_len)) return 0;
    put32(out, (uint32_t)m->version);
    put32(out + 4, (uint32_t)(m->version >> 32));
    put32(out + 8, m->key_len);
    return 1;
}

int rl__msg_get_reply_head(const rl__msg_get_reply *m, uint8_t out[RL_MSG_GET_REPLY_HEAD]) {
    if (m->present > 1 || m->value_len > RL_PROTO_MAX_VALUE || (!m->value && m->value_len) ||
        (!m->present && m->value_len))
        return 0;
    out[0] = m->present;
    put32(out + 1, m->value_len);
    return 1;
}

static int get_req_encode_fast(rl_buf *out, const rl__msg_get_req *m) {
    uint8_t h[RL_MSG_GET_REQ_HEAD];
    return rl__buf_error(out) == RL_OK && rl__msg_get_req_head(m, h) &&
           append_fast(out, h, sizeof h, m->key, m->key_len);
}

static int get_reply_encode_fast(rl_buf *out, const rl__msg_get_reply *m) {
    uint8_t h[RL_MSG_GET_REPLY_HEAD];
    return rl__buf_error(out) == RL_OK && rl__msg_get_reply_head(m, h) &&
           append_fast(out, h, sizeof h, m->value, m->value_len);
}

static int decode_common(uint16_t type, uint16_t flags, const uint8_t *payload, size_t len, rl_arena *a, rl__msg *out,
                         rl__errdetail *err, int walk) {
    if (!walk && type == RL_MSG_GET && (flags == 0 || flags == RL_FRAME_REPLY)) {
        memset(out, 0, sizeof *out);
        int ok = flags == 0 ? get_req_decode_fast(payload, len, &out->u.get_req)
                            : get_reply_decode_fast(payload, len, &out->u.get_reply);
        if (ok) { /* (a refused payload wrote nothing: the walk decodes it, for its error) */
            out->type = type;
            out->flags = flags;
            rl__errdetail_clear(err);
            return RL_OK;
        }
    }
    const char *what = NULL;
    const payload_info *pi = find_payload(type, flags, &what);
    memset(out, 0, sizeof *out);
    out->type = type;
    out->flags = flags;
    if (!pi) {
        rl__errdetail_set(err, "frame of type %u (%s), flags 0x%x: %s", (unsigned)type, rl__msg_type_name(type),
                          (unsigned)flags, what);
        return RL_E_MALFORMED_FRAME;
    }
    return run_decode(pi->label, pi->x, payload, len, a, &out->u, pi->size, err);
}

int rl__msg_decode(uint16_t type, uint16_t flags, const uint8_t *payload, size_t len, rl_arena *a, rl__msg *out,
                   rl__errdetail *err) {
    return decode_common(type, flags, payload, len, a, out, err, 0);
}

int rl__msg_decode_walk(uint16_t type, uint16_t flags, const uint8_t *payload, size_t len, rl_arena *a, rl__msg *out,
                        rl__errdetail *err) {
    return decode_common(type, flags, payload, len, a, out, err, 1);
}

static int encode_common(rl_buf *out, const rl__msg *m, rl__errdetail *err, int walk) {
    if (!walk && m->type == RL_MSG_GET &&
        (m->flags == 0 ? get_req_encode_fast(out, &m->u.get_req)
                       : m->flags == RL_FRAME_REPLY && get_reply_encode_fast(out, &m->u.get_reply))) {
        rl__errdetail_clear(err);
        return RL_OK;
    }
    const char *what = NULL;
    const payload_info *pi = find_payload(m->type, m->flags, &what);
    if (!pi) {
        rl__errdetail_set(err, "message of type %u (%s), flags 0x%x: %s", (unsigned)m->type, rl__msg_type_name(m->type),
                          (unsigned)m->flags, what);
        return RL_E_INVALID_ARGUMENT;
    }
    return run_encode(pi->label, pi->x, out, &m->u, err);
}

int rl__msg_encode(rl_buf *out, const rl__msg *m, rl__errdetail *err) { return encode_common(out, m, err, 0); }

int rl__msg_encode_walk(rl_buf *out, const rl__msg *m, rl__errdetail *err) { return encode_common(out, m, err, 1); }

int rl__msg_frame_encode(rl_buf *out, uint64_t id, const rl__msg *m, rl__errdetail *err) {
    size_t start = out->len;
    uint8_t hdr[RL_FRAME_HEADER_LEN];
    rl__frame_header h = {0, m->type, m->flags, id};
    rl__errdetail_clear(err);
    rl__frame_header_encode(&h, hdr);
    rl__buf_append(out, hdr, sizeof hdr);
    int rc = rl__msg_encode(out, m, err);
    if (rc == RL_OK && out->len - start - RL_FRAME_HEADER_LEN > RL_NET_MAX_PAYLOAD) {
        rl__errdetail_set(err, "%s payload of %zu bytes exceeds the frame limit", rl__msg_type_name(m->type),
                          out->len - start - RL_FRAME_HEADER_LEN);
        rc = RL_E_INVALID_ARGUMENT;
    }
    if (rc != RL_OK) {
        rl__buf_truncate(out, out->len < start ? out->len : start);
        return rc;
    }
    h.payload_len = (uint32_t)(out->len - start - RL_FRAME_HEADER_LEN);
    rl__frame_header_encode(&h, out->data + start);
    return RL_OK;
}
