/* test_proto.c — the wire protocol's message codecs (src/net/proto.h, docs/protocol.md).
 *
 * The tests lean on an independent writer of the documented layouts (tw_msg below, written from
 * docs/protocol.md's tables and never validating), so that:
 *   - a valid struct must encode to exactly tw_msg's bytes (the layout is the documented one),
 *     decode back, and re-encode to the same bytes (expect_good);
 *   - a struct that breaks one rule must be refused by the encoder (RL_E_INVALID_ARGUMENT, the
 *     buffer left as it was), and tw_msg's bytes for it by the decoder (RL_E_MALFORMED_FRAME)
 *     with a reason naming the field (expect_bad).
 * Golden hex pins a few encodings by hand. Every sample is also cut at every length, and
 * randomly damaged (seeded), and the decoders' allocations are measured against hostile counts.
 */
#include "test.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "base/arena.h"
#include "base/buf.h"
#include "net/proto.h"
#include "reclayer/alloc.h"

/* ---- The payload kinds ------------------------------------------------------------------- */

#define R RL_FRAME_REPLY
#define E (RL_FRAME_REPLY | RL_FRAME_ERROR)

typedef struct {
    uint16_t type;
    uint16_t flags;
    const char *name;
} kind_info;

static const kind_info KINDS[] = {
    {RL_MSG_HELLO, 0, "hello_req"},
    {RL_MSG_HELLO, R, "hello_reply"},
    {RL_MSG_PING, 0, "ping_req"},
    {RL_MSG_PING, R, "ping_reply"},
    {RL_MSG_GET, E, "error"},
    {RL_MSG_GET_READ_VERSION, 0, "get_read_version_req"},
    {RL_MSG_GET_READ_VERSION, R, "get_read_version_reply"},
    {RL_MSG_COMMIT, 0, "commit_req"},
    {RL_MSG_COMMIT, R, "commit_reply"},
    {RL_MSG_GET_SHARD_MAP, 0, "get_shard_map_req"},
    {RL_MSG_GET_SHARD_MAP, R, "get_shard_map_reply"},
    {RL_MSG_REGISTER_STORAGE, 0, "register_storage_req"},
    {RL_MSG_REGISTER_STORAGE, R, "register_storage_reply"},
    {RL_MSG_PEEK, 0, "peek_req"},
    {RL_MSG_PEEK, R, "peek_reply"},
    {RL_MSG_POP, 0, "pop_req"},
    {RL_MSG_POP, R, "pop_reply"},
    {RL_MSG_STATUS, 0, "status_req"},
    {RL_MSG_STATUS, R, "status_reply"},
    {RL_MSG_GET, 0, "get_req"},
    {RL_MSG_GET, R, "get_reply"},
    {RL_MSG_GET_KEY, 0, "get_key_req"},
    {RL_MSG_GET_KEY, R, "get_key_reply"},
    {RL_MSG_GET_RANGE, 0, "get_range_req"},
    {RL_MSG_GET_RANGE, R, "get_range_reply"},
    {RL_MSG_GET_MAPPED_RANGE, 0, "get_mapped_range_req"},
    {RL_MSG_GET_MAPPED_RANGE, R, "get_mapped_range_reply"},
    {RL_MSG_GET_MULTI, 0, "get_multi_req"},
    {RL_MSG_GET_MULTI, R, "get_multi_reply"},
    {RL_MSG_SET_DELAY, 0, "set_delay_req"},
    {RL_MSG_SET_DELAY, R, "set_delay_reply"},
    {RL_MSG_SPLIT_SHARD, 0, "split_shard_req"},
    {RL_MSG_SPLIT_SHARD, R, "split_shard_reply"},
    {RL_MSG_ASSIGN_SHARD, 0, "assign_shard_req"},
    {RL_MSG_ASSIGN_SHARD, R, "assign_shard_reply"},
    {RL_MSG_MOVE_SHARD, 0, "move_shard_req"},
    {RL_MSG_MOVE_SHARD, R, "move_shard_reply"},
    {RL_MSG_AUTH_CHALLENGE, 0, "auth_challenge"},
    {RL_MSG_AUTH, 0, "auth_req"},
    {RL_MSG_AUTH, R, "auth_reply"},
    {RL_MSG_GET_METRICS, 0, "get_metrics_req"},
    {RL_MSG_GET_METRICS, R, "get_metrics_reply"},
    {RL_MSG_WATCH_VALUE, 0, "watch_value_req"},
    {RL_MSG_WATCH_VALUE, R, "watch_value_reply"},
    {RL_MSG_GET_MAPPED_STREAM, 0, "get_mapped_stream_req"},
    {RL_MSG_GET_MAPPED_STREAM, R, "get_mapped_stream_reply"},
    {RL_MSG_MAPPED_CHUNK, 0, "mapped_chunk"},
    {RL_MSG_MAPPED_CREDIT, 0, "mapped_credit"},
};
#define N_KINDS ((int)(sizeof KINDS / sizeof KINDS[0]))

enum { V_TYPICAL = 0, V_EMPTY = 1, V_MAX = 2, N_VARIANTS = 3 };

/* ---- Building samples -------------------------------------------------------------------- */

#define LIT(s) (const uint8_t *)(s), (uint32_t)(sizeof(s) - 1)
#define SET(ptr, len, s) ((ptr) = (const uint8_t *)(s), (len) = (uint32_t)(sizeof(s) - 1))

/* n bytes of c from the arena (a distinct pattern per call does not matter here). */
static const uint8_t *fill(rl_arena *a, size_t n, uint8_t c) {
    uint8_t *p = rl__arena_alloc(a, n ? n : 1);
    assert_non_null(p);
    memset(p, c, n);
    return p;
}

static void *alloc0(rl_arena *a, size_t n) {
    void *p = rl__arena_alloc(a, n);
    assert_non_null(p);
    memset(p, 0, n);
    return p;
}

static rl_key_selector sel_of(const uint8_t *k, uint32_t kl, int or_equal, int offset) {
    rl_key_selector s = {k, kl, or_equal, offset};
    return s;
}

static rl_keyvalue kv_of(const uint8_t *k, uint32_t kl, const uint8_t *v, uint32_t vl) {
    rl_keyvalue x = {k, kl, v, vl};
    return x;
}

static rl__keyrange range_of(const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    rl__keyrange r = {b, bl, e, el};
    return r;
}

static rl__mutation mut_of(int type, const uint8_t *p1, uint32_t l1, const uint8_t *p2, uint32_t l2) {
    rl__mutation m = {(uint8_t)type, p1, l1, p2, l2};
    return m;
}

#define KMAX RL_PROTO_MAX_KEY
#define VMAX RL_PROTO_MAX_VALUE

/* Fill *m with sample `variant` of payload kind k; everything lives in a. */
static void sample(int k, int variant, rl_arena *a, rl__msg *m) {
    memset(m, 0, sizeof *m);
    m->type = KINDS[k].type;
    m->flags = KINDS[k].flags;
    int ty = variant == V_TYPICAL, mx = variant == V_MAX;
    const uint8_t *K1 = mx ? fill(a, KMAX, 'a') : NULL, *K2 = mx ? fill(a, KMAX, 'b') : NULL;
    const uint8_t *VV = mx ? fill(a, RL_PROTO_MAX_MUT_PARAM, 'v') : NULL;
    const uint8_t *S = mx ? fill(a, RL_PROTO_MAX_STRING, 's') : NULL;
    switch (k) {
    case 0: { /* hello_req */
        rl__msg_hello_req *h = &m->u.hello_req;
        h->magic = RL_PROTOCOL_MAGIC;
        h->protocol_version = RL_PROTOCOL_VERSION;
        if (ty) h->role = RL_ROLE_STORAGE, h->id = 7, SET(h->host, h->host_len, "host-a");
        if (mx) h->role = RL_ROLE_ADMIN, h->id = UINT32_MAX, h->host = S, h->host_len = RL_PROTO_MAX_STRING;
        break;
    }
    case 1: { /* hello_reply */
        rl__msg_hello_reply *h = &m->u.hello_reply;
        h->protocol_version = RL_PROTOCOL_VERSION;
        if (ty) h->role = RL_ROLE_COORDINATOR, h->id = 1, SET(h->host, h->host_len, "host-b");
        if (mx) h->role = RL_ROLE_STORAGE, h->id = UINT32_MAX, h->host = S, h->host_len = RL_PROTO_MAX_STRING;
        break;
    }
    case 2:
        if (ty) SET(m->u.ping_req.payload, m->u.ping_req.payload_len, "ping");
        if (mx) m->u.ping_req.payload = S, m->u.ping_req.payload_len = RL_PROTO_MAX_STRING;
        break;
    case 3:
        if (ty)
            SET(m->u.ping_reply.payload, m->u.ping_reply.payload_len, "ping"),
                m->u.ping_reply.server_mono_ns = 123456789;
        if (mx)
            m->u.ping_reply.payload = S, m->u.ping_reply.payload_len = RL_PROTO_MAX_STRING,
            m->u.ping_reply.server_mono_ns = UINT64_MAX;
        break;
    case 4:
        m->u.error.code = ty ? RL_E_WRONG_SHARD_SERVER : mx ? INT32_MAX : 1;
        if (ty) SET(m->u.error.message, m->u.error.message_len, "wrong shard");
        if (mx) m->u.error.message = S, m->u.error.message_len = RL_PROTO_MAX_STRING;
        break;
    case 5: break;
    case 6: m->u.get_read_version_reply.version = ty ? 1000 : mx ? UINT64_MAX : 0; break;
    case 7: { /* commit_req */
        rl__msg_commit_req *c = &m->u.commit_req;
        if (ty) {
            rl__keyrange *r = alloc0(a, 3 * sizeof *r);
            r[0] = range_of(LIT("a"), LIT("b"));
            r[1] = range_of(LIT("c"), LIT("c\0"));
            r[2] = range_of(LIT("k"), LIT("k\0"));
            rl__mutation *mu = alloc0(a, 5 * sizeof *mu);
            mu[0] = mut_of(RL_MUT_SET, LIT("k"), LIT("v"));
            mu[1] = mut_of(RL_MUT_CLEAR_RANGE, LIT("a"), LIT("b"));
            mu[2] = mut_of(RL_MUT_ADD, LIT("c"), LIT("\x01\0\0\0"));
            mu[3] = mut_of(RL_MUT_SET_VERSIONSTAMPED_KEY, LIT("p0123456789\x01\0\0\0"), LIT("x"));
            mu[4] = mut_of(RL_MUT_CLEAR, LIT("z"), NULL, 0);
            c->read_version = 500;
            c->reads = r, c->n_reads = 2;
            c->writes = r + 2, c->n_writes = 1;
            c->muts = mu, c->n_muts = 5;
        }
        if (mx) {
            rl__keyrange *r = alloc0(a, sizeof *r);
            r[0] = range_of(K1, KMAX, K2, KMAX);
            rl__mutation *mu = alloc0(a, 3 * sizeof *mu);
            mu[0] = mut_of(RL_MUT_SET_VERSIONSTAMPED_KEY, fill(a, RL_PROTO_MAX_MUT_KEY, 'k'), RL_PROTO_MAX_MUT_KEY, VV,
                           RL_PROTO_MAX_MUT_PARAM);
            mu[1] = mut_of(RL_MUT_SET_VERSIONSTAMPED_VALUE, K1, KMAX, VV, RL_PROTO_MAX_MUT_PARAM);
            mu[2] = mut_of(RL_MUT_CLEAR_RANGE, K1, KMAX, K1, KMAX);
            c->read_version = UINT64_MAX;
            c->reads = r, c->n_reads = 1;
            c->writes = r, c->n_writes = 1;
            c->muts = mu, c->n_muts = 3;
        }
        break;
    }
    case 8:
        if (ty) m->u.commit_reply.commit_version = 1234, m->u.commit_reply.batch_order = 3;
        if (mx)
            m->u.commit_reply.result = INT32_MAX, m->u.commit_reply.commit_version = UINT64_MAX,
            m->u.commit_reply.batch_order = UINT16_MAX;
        break;
    case 9: m->u.get_shard_map_req.min_version = ty ? 77 : mx ? UINT64_MAX : 0; break;
    case 10: { /* get_shard_map_reply */
        rl__msg_get_shard_map_reply *g = &m->u.get_shard_map_reply;
        if (ty) {
            rl__msg_server *sv = alloc0(a, 3 * sizeof *sv);
            sv[0] = (rl__msg_server){1, RL_ROLE_COORDINATOR, LIT("127.0.0.1"), 4500, LIT("h0"), 1};
            sv[1] = (rl__msg_server){2, RL_ROLE_STORAGE, LIT("127.0.0.1"), 4501, LIT("h1"), 1};
            sv[2] = (rl__msg_server){3, RL_ROLE_STORAGE, LIT("10.0.0.255"), 65535, LIT("h2"), 0};
            uint32_t *team = alloc0(a, 3 * sizeof *team);
            team[0] = 2, team[1] = 3, team[2] = 2;
            rl__msg_shard *sh = alloc0(a, 2 * sizeof *sh);
            sh[0] = (rl__msg_shard){LIT(""), LIT("m"), team, 1};
            sh[1] = (rl__msg_shard){LIT("m"), LIT("\xff"), team + 1, 2};
            g->version = 9;
            g->servers = sv, g->n_servers = 3;
            g->shards = sh, g->n_shards = 2;
            g->delay_us = 250, g->jitter_us = 20;
        }
        if (mx) {
            rl__msg_server *sv = alloc0(a, sizeof *sv);
            sv[0] =
                (rl__msg_server){UINT32_MAX, RL_ROLE_STORAGE, LIT("255.255.255.255"), 65535, S, RL_PROTO_MAX_STRING, 1};
            uint32_t *team = alloc0(a, RL_PROTO_MAX_TEAM * sizeof *team);
            for (int i = 0; i < RL_PROTO_MAX_TEAM; i++) team[i] = (uint32_t)(100 - i);
            rl__msg_shard *sh = alloc0(a, 2 * sizeof *sh);
            sh[0] = (rl__msg_shard){LIT(""), K1, KMAX, team, RL_PROTO_MAX_TEAM};
            sh[1] = (rl__msg_shard){K1, KMAX, K2, KMAX, team, RL_PROTO_MAX_TEAM};
            g->version = UINT64_MAX;
            g->servers = sv, g->n_servers = 1;
            g->shards = sh, g->n_shards = 2;
            g->delay_us = UINT32_MAX, g->jitter_us = UINT32_MAX;
        }
        break;
    }
    case 11: { /* register_storage_req */
        rl__msg_register_storage_req *r = &m->u.register_storage_req;
        if (ty)
            r->id = 5, SET(r->address, r->address_len, "127.0.0.1"), r->port = 4501, SET(r->host, r->host_len, "h1"),
            r->durable_version = 42;
        if (!ty && !mx) SET(r->address, r->address_len, "0.0.0.0"), r->port = 1;
        if (mx)
            r->id = UINT32_MAX, SET(r->address, r->address_len, "255.255.255.255"), r->port = 65535, r->host = S,
            r->host_len = RL_PROTO_MAX_STRING, r->durable_version = UINT64_MAX;
        break;
    }
    case 12: { /* register_storage_reply */
        rl__msg_register_storage_reply *r = &m->u.register_storage_reply;
        if (ty) {
            rl__keyrange *rs = alloc0(a, 3 * sizeof *rs);
            rs[0] = range_of(LIT("a"), LIT("c"));
            rs[1] = range_of(LIT("c"), LIT("f"));
            rs[2] = range_of(LIT("x"), LIT("y"));
            r->start_version = 41, r->ranges = rs, r->n_ranges = 3;
        }
        if (mx) {
            rl__keyrange *rs = alloc0(a, sizeof *rs);
            rs[0] = range_of(LIT(""), K2, KMAX);
            r->start_version = UINT64_MAX, r->ranges = rs, r->n_ranges = 1;
        }
        break;
    }
    case 13: {
        rl__msg_peek_req *p = &m->u.peek_req;
        if (ty) p->storage_id = 5, p->after_version = 100, p->max_bytes = 1u << 20, p->max_wait_ms = 500;
        if (mx)
            p->storage_id = UINT32_MAX, p->after_version = UINT64_MAX, p->max_bytes = UINT32_MAX,
            p->max_wait_ms = UINT32_MAX;
        break;
    }
    case 14: { /* peek_reply */
        rl__msg_peek_reply *p = &m->u.peek_reply;
        if (ty) {
            rl__mutation *mu = alloc0(a, 3 * sizeof *mu);
            mu[0] = mut_of(RL_MUT_SET, LIT("a"), LIT("1"));
            mu[1] = mut_of(RL_MUT_CLEAR_RANGE, LIT("b"), LIT("c"));
            mu[2] = mut_of(RL_MUT_ADD, LIT("k"), LIT("\x01"));
            rl__msg_peek_version *pv = alloc0(a, 3 * sizeof *pv);
            pv[0] = (rl__msg_peek_version){101, mu, 2};
            pv[1] = (rl__msg_peek_version){110, NULL, 0};
            pv[2] = (rl__msg_peek_version){120, mu + 2, 1};
            rl__msg_shard_change *ch = alloc0(a, 2 * sizeof *ch);
            ch[0] = (rl__msg_shard_change){105, RL_SHARD_ASSIGN, range_of(LIT("m"), LIT("n"))};
            ch[1] = (rl__msg_shard_change){105, RL_SHARD_REMOVE, range_of(LIT("a"), LIT("b"))};
            p->end_version = 120;
            p->versions = pv, p->n_versions = 3;
            p->changes = ch, p->n_changes = 2;
        }
        if (mx) {
            rl__mutation *mu = alloc0(a, 2 * sizeof *mu);
            mu[0] = mut_of(RL_MUT_SET, K1, KMAX, VV, RL_PROTO_MAX_MUT_PARAM);
            mu[1] = mut_of(RL_MUT_CLEAR_RANGE, K1, KMAX, K2, KMAX);
            rl__msg_peek_version *pv = alloc0(a, 2 * sizeof *pv);
            pv[0] = (rl__msg_peek_version){UINT64_MAX - 1, mu, 1};
            pv[1] = (rl__msg_peek_version){UINT64_MAX, mu + 1, 1};
            rl__msg_shard_change *ch = alloc0(a, sizeof *ch);
            ch[0] = (rl__msg_shard_change){UINT64_MAX, RL_SHARD_REMOVE, range_of(K1, KMAX - 1, K1, KMAX)};
            p->end_version = UINT64_MAX;
            p->versions = pv, p->n_versions = 2;
            p->changes = ch, p->n_changes = 1;
        }
        break;
    }
    case 15:
        if (ty) m->u.pop_req.storage_id = 5, m->u.pop_req.durable_version = 99;
        if (mx) m->u.pop_req.storage_id = UINT32_MAX, m->u.pop_req.durable_version = UINT64_MAX;
        break;
    case 16:
    case 17: break;
    case 18:
        if (ty) SET(m->u.status_reply.json, m->u.status_reply.json_len, "{\"ok\":true}");
        if (mx)
            m->u.status_reply.json = fill(a, RL_PROTO_MAX_JSON, ' '), m->u.status_reply.json_len = RL_PROTO_MAX_JSON;
        break;
    case 19:
        if (ty) m->u.get_req.version = 10, SET(m->u.get_req.key, m->u.get_req.key_len, "key");
        if (mx) m->u.get_req.version = UINT64_MAX, m->u.get_req.key = K1, m->u.get_req.key_len = KMAX;
        break;
    case 20:
        if (ty) m->u.get_reply.present = 1, SET(m->u.get_reply.value, m->u.get_reply.value_len, "value");
        if (mx) m->u.get_reply.present = 1, m->u.get_reply.value = VV, m->u.get_reply.value_len = VMAX;
        break;
    case 21:
        if (ty) m->u.get_key_req.version = 10, m->u.get_key_req.sel = RL_FIRST_GREATER_THAN("k", 1);
        if (!ty && !mx) m->u.get_key_req.sel = sel_of(NULL, 0, 0, 0);
        if (mx) m->u.get_key_req.version = UINT64_MAX, m->u.get_key_req.sel = sel_of(K1, KMAX, 1, INT32_MAX);
        break;
    case 22:
        if (ty) m->u.get_key_reply.resolved = 1, m->u.get_key_reply.sel = RL_FIRST_GREATER_OR_EQUAL("kk", 2);
        if (!ty && !mx) m->u.get_key_reply.sel = sel_of(NULL, 0, 0, 0);
        if (mx) m->u.get_key_reply.sel = sel_of(K1, KMAX, 1, INT32_MIN + 1);
        break;
    case 23: { /* get_range_req */
        rl__msg_get_range_req *g = &m->u.get_range_req;
        if (ty)
            g->version = 10, g->begin = RL_FIRST_GREATER_OR_EQUAL("a", 1), g->end = RL_FIRST_GREATER_OR_EQUAL("b", 1),
            g->limit = 100, g->target_bytes = 1 << 20, g->reverse = 1;
        if (mx)
            g->version = UINT64_MAX, g->begin = sel_of(K1, KMAX, 1, INT32_MAX),
            g->end = sel_of(K2, KMAX, 0, INT32_MIN + 1), g->limit = INT32_MAX, g->target_bytes = INT64_MAX,
            g->reverse = 1;
        break;
    }
    case 24: { /* get_range_reply */
        rl__msg_get_range_reply *g = &m->u.get_range_reply;
        if (ty) {
            rl_keyvalue *kv = alloc0(a, 3 * sizeof *kv);
            kv[0] = kv_of(LIT("a"), LIT("1"));
            kv[1] = kv_of(LIT("b"), LIT("2"));
            kv[2] = kv_of(LIT("c"), LIT(""));
            g->kvs = kv, g->n_kvs = 3, g->more = 1;
            SET(g->read_through, g->read_through_len, "m");
            SET(g->resolved_begin, g->resolved_begin_len, "a");
            SET(g->resolved_end, g->resolved_end_len, "c\0");
        }
        if (mx) {
            rl_keyvalue *kv = alloc0(a, 2 * sizeof *kv);
            kv[0] = kv_of(K1, KMAX, VV, VMAX);
            kv[1] = kv_of(K2, KMAX, VV, VMAX);
            g->kvs = kv, g->n_kvs = 2, g->more = 1;
            g->read_through = K1, g->read_through_len = KMAX;
            g->resolved_begin = K1, g->resolved_begin_len = KMAX;
            g->resolved_end = K2, g->resolved_end_len = KMAX;
        }
        break;
    }
    case 25: { /* get_mapped_range_req */
        rl__msg_get_mapped_range_req *g = &m->u.get_mapped_range_req;
        if (ty)
            g->version = 10, g->begin = RL_FIRST_GREATER_OR_EQUAL("i/", 2), g->end = RL_FIRST_GREATER_OR_EQUAL("i0", 2),
            SET(g->mapper, g->mapper_len, "\x02r\0\x02{K[1]}\0"), g->limit = 10, g->target_bytes = 0, g->reverse = 0,
            g->secondary_row_limit = 2000, g->secondary_byte_limit = 10000000, g->strategy = RL_FETCH_GROUPED,
            g->batch = 10;
        if (mx)
            g->version = UINT64_MAX, g->begin = sel_of(K1, KMAX, 1, INT32_MAX), g->end = sel_of(K2, KMAX, 1, INT32_MAX),
            g->mapper = VV, g->mapper_len = RL_PROTO_MAX_MAPPER, g->limit = INT32_MAX, g->target_bytes = INT64_MAX,
            g->reverse = 1, g->secondary_row_limit = INT32_MAX, g->secondary_byte_limit = INT64_MAX,
            g->strategy = RL_FETCH_INDIVIDUAL, g->batch = RL_PROTO_MAX_BATCH;
        break;
    }
    case 26: { /* get_mapped_range_reply */
        rl__msg_get_mapped_range_reply *g = &m->u.get_mapped_range_reply;
        if (ty) {
            rl_keyvalue *kv = alloc0(a, 3 * sizeof *kv);
            kv[0] = kv_of(LIT("r/1/a"), LIT("x"));
            kv[1] = kv_of(LIT("r/1/b"), LIT("y"));
            kv[2] = kv_of(LIT("r/3"), LIT("z"));
            rl_mapped_keyvalue *e = alloc0(a, 3 * sizeof *e);
            e[0] = (rl_mapped_keyvalue){kv_of(LIT("i/1"), LIT("")), 1, LIT("r/1"), LIT("r/1\xff"), kv, 2, 0, 1, 0, 0};
            e[1] = (rl_mapped_keyvalue){kv_of(LIT("i/2"), LIT("")), 0, LIT("r/2"), LIT("r/2\0"), NULL, 0, 0, 0, 0, 0};
            e[2] =
                (rl_mapped_keyvalue){kv_of(LIT("i/3"), LIT("v")), 0, LIT("r/3"), LIT("r/3\0"), kv + 2, 1, 1, 1, 0, 0};
            g->entries = e, g->n_entries = 3, g->more = 1;
            SET(g->resolved_begin, g->resolved_begin_len, "i/1");
            SET(g->resolved_end, g->resolved_end_len, "i/3\0");
            rl__msg_s2s_peer *ps = alloc0(a, sizeof *ps);
            ps[0] = (rl__msg_s2s_peer){3, 1, 1, 700, 900};
            g->stats = (rl__msg_mapped_stats){2, 1, 1, 1, 12345, 700, 900, 1, 1, ps};
        }
        if (mx) {
            rl_keyvalue *kv = alloc0(a, 2 * sizeof *kv);
            kv[0] = kv_of(K1, KMAX, VV, VMAX);
            kv[1] = kv_of(K2, KMAX, VV, VMAX);
            rl_mapped_keyvalue *e = alloc0(a, sizeof *e);
            e[0] = (rl_mapped_keyvalue){kv_of(K1, KMAX, VV, VMAX), 1, K1, KMAX, K2, KMAX, kv, 2, 1, 1, 0, 0};
            g->entries = e, g->n_entries = 1, g->more = 1;
            g->read_through = K1, g->read_through_len = KMAX;
            g->resolved_begin = K1, g->resolved_begin_len = KMAX;
            g->resolved_end = K2, g->resolved_end_len = KMAX;
            rl__msg_s2s_peer *ps = alloc0(a, RL_PROTO_MAX_PEER_STATS * sizeof *ps);
            for (uint32_t i = 0; i < RL_PROTO_MAX_PEER_STATS; i++)
                ps[i] = (rl__msg_s2s_peer){UINT32_MAX - i, UINT32_MAX, UINT32_MAX, UINT64_MAX, UINT64_MAX};
            g->stats = (rl__msg_mapped_stats){UINT32_MAX, UINT32_MAX, UINT32_MAX,
                                              UINT32_MAX, UINT64_MAX, UINT64_MAX,
                                              UINT64_MAX, UINT32_MAX, RL_PROTO_MAX_PEER_STATS,
                                              ps};
        }
        break;
    }
    case 27: { /* get_multi_req */
        rl__msg_get_multi_req *g = &m->u.get_multi_req;
        if (ty) {
            rl__msg_read_item *it = alloc0(a, 2 * sizeof *it);
            it[0] = (rl__msg_read_item){1, LIT("a"), LIT("b"), 10, 1000};
            it[1] = (rl__msg_read_item){0, LIT("k"), LIT("k\0"), 0, 0};
            g->version = 7, g->items = it, g->n_items = 2, g->max_bytes = 4096;
        }
        if (mx) {
            rl__msg_read_item *it = alloc0(a, sizeof *it);
            it[0] = (rl__msg_read_item){1, K1, KMAX, K2, KMAX, INT32_MAX, INT64_MAX};
            g->version = UINT64_MAX, g->items = it, g->n_items = 1, g->max_bytes = UINT64_MAX;
        }
        break;
    }
    case 28: { /* get_multi_reply */
        rl__msg_get_multi_reply *g = &m->u.get_multi_reply;
        if (ty) {
            rl_keyvalue *kv = alloc0(a, sizeof *kv);
            kv[0] = kv_of(LIT("a"), LIT("1"));
            rl__msg_read_result *r = alloc0(a, 3 * sizeof *r);
            r[0] = (rl__msg_read_result){0, kv, 1, 1};
            r[1] = (rl__msg_read_result){RL_E_FUTURE_VERSION, NULL, 0, 0};
            r[2] = (rl__msg_read_result){0, NULL, 0, 0};
            g->results = r, g->n_results = 3;
        }
        if (mx) {
            rl_keyvalue *kv = alloc0(a, 2 * sizeof *kv);
            kv[0] = kv_of(K1, KMAX, VV, VMAX);
            kv[1] = kv_of(K2, KMAX, VV, VMAX);
            rl__msg_read_result *r = alloc0(a, 2 * sizeof *r);
            r[0] = (rl__msg_read_result){0, kv, 2, 1};
            r[1] = (rl__msg_read_result){INT32_MAX, NULL, 0, 0};
            g->results = r, g->n_results = 2;
        }
        break;
    }
    case 29: /* set_delay_req */
        if (ty) m->u.set_delay_req.delay_us = 250, m->u.set_delay_req.jitter_us = 5;
        if (mx) m->u.set_delay_req.delay_us = UINT32_MAX, m->u.set_delay_req.jitter_us = UINT32_MAX;
        break;
    case 30: /* set_delay_reply: empty */ break;
    case 31: /* split_shard_req */
        if (ty) SET(m->u.split_shard_req.key, m->u.split_shard_req.key_len, "r/500");
        if (mx) m->u.split_shard_req.key = K1, m->u.split_shard_req.key_len = KMAX;
        break;
    case 32: /* split_shard_reply */
        if (ty) m->u.split_shard_reply.version = 77, m->u.split_shard_reply.split = 1;
        if (mx) m->u.split_shard_reply.version = UINT64_MAX, m->u.split_shard_reply.split = 1;
        break;
    case 33: { /* assign_shard_req */
        rl__msg_assign_shard_req *g = &m->u.assign_shard_req;
        uint32_t *team = alloc0(a, RL_PROTO_MAX_TEAM * sizeof *team);
        for (uint32_t i = 0; i < RL_PROTO_MAX_TEAM; i++) team[i] = mx ? UINT32_MAX - i : i + 1;
        g->team = team;
        g->n_team = mx ? RL_PROTO_MAX_TEAM : ty ? 2 : 1;
        g->range = ty ? range_of(LIT("a"), LIT("b")) : mx ? range_of(K1, KMAX, K2, KMAX) : range_of(LIT(""), LIT("\0"));
        g->timeout_ms = mx ? UINT32_MAX : ty ? 30000 : 0;
        break;
    }
    case 34: /* assign_shard_reply */
        if (ty) m->u.assign_shard_reply.version = 1234, m->u.assign_shard_reply.moved = 2;
        if (mx) m->u.assign_shard_reply.version = UINT64_MAX, m->u.assign_shard_reply.moved = UINT32_MAX;
        break;
    case 35: { /* move_shard_req */
        rl__msg_move_shard_req *g = &m->u.move_shard_req;
        g->range = ty ? range_of(LIT("a"), LIT("b")) : mx ? range_of(K1, KMAX, K2, KMAX) : range_of(LIT(""), LIT("\0"));
        if (ty) g->storage_id = 4, g->version = 99;
        if (mx) g->storage_id = UINT32_MAX, g->version = UINT64_MAX;
        break;
    }
    case 36: /* move_shard_reply */ break;
    case 37: { /* auth_challenge: fixed-length fields; "empty" is all zeros */
        rl__msg_auth_challenge *c = &m->u.auth_challenge;
        c->magic = RL_PROTOCOL_MAGIC;
        c->protocol_version = RL_PROTOCOL_VERSION;
        if (ty) memcpy(c->nonce, "challenge-nonce!", 16);
        if (mx) memset(c->nonce, 0xff, sizeof c->nonce);
        break;
    }
    case 38: { /* auth_req */
        rl__msg_auth_req *r = &m->u.auth_req;
        r->magic = RL_PROTOCOL_MAGIC;
        r->protocol_version = RL_PROTOCOL_VERSION;
        r->auth_class = ty || mx ? RL_AUTH_MEMBER : RL_AUTH_CLIENT;
        if (ty) memcpy(r->nonce, "client-nonce-01!", 16), memcpy(r->proof, "proof-0123456789abcdef0123456789", 32);
        if (mx) memset(r->nonce, 0xff, sizeof r->nonce), memset(r->proof, 0xff, sizeof r->proof);
        break;
    }
    case 39: /* auth_reply */
        if (ty) memcpy(m->u.auth_reply.proof, "server-proof-0123456789abcdefghi", 32);
        if (mx) memset(m->u.auth_reply.proof, 0xff, sizeof m->u.auth_reply.proof);
        break;
    case 40: { /* get_metrics_req */
        rl__msg_get_metrics_req *g = &m->u.get_metrics_req;
        g->op = RL_METRICS_ESTIMATE, g->range = range_of(LIT(""), LIT("\x00")); /* the smallest range */
        if (ty) g->op = RL_METRICS_SPLIT, g->range = range_of(LIT("a"), LIT("m")), g->chunk = 1000000;
        if (mx) g->op = RL_METRICS_SPLIT, g->range = range_of(K1, KMAX, K2, KMAX), g->chunk = INT64_MAX;
        break;
    }
    case 41: { /* get_metrics_reply */
        rl__msg_get_metrics_reply *g = &m->u.get_metrics_reply;
        if (ty) {
            rl_slice *c = alloc0(a, 2 * sizeof *c);
            c[0] = (rl_slice){(const uint8_t *)"c", 1}, c[1] = (rl_slice){(const uint8_t *)"f", 1};
            g->cuts = c, g->n_cuts = 2;
            SET(g->read_through, g->read_through_len, "h");
        }
        if (mx) {
            rl_slice *c = alloc0(a, 2 * sizeof *c);
            c[0] = (rl_slice){K1, KMAX}, c[1] = (rl_slice){K2, KMAX};
            g->bytes = INT64_MAX, g->cuts = c, g->n_cuts = 2;
            g->read_through = K2, g->read_through_len = KMAX;
        }
        break;
    }
    case 42: { /* watch_value_req: "empty" is version 0, key "", absent, the shortest hold */
        rl__msg_watch_value_req *w = &m->u.watch_value_req;
        w->hold_ms = 1;
        if (ty) w->version = 42, SET(w->key, w->key_len, "k"), w->present = 1, SET(w->value, w->value_len, "v");
        if (ty) w->hold_ms = 2000;
        if (mx) {
            w->version = UINT64_MAX, w->key = K1, w->key_len = KMAX, w->present = 1;
            w->value = VV, w->value_len = VMAX, w->hold_ms = RL_PROTO_MAX_WATCH_HOLD_MS;
        }
        break;
    }
    case 43: /* watch_value_reply */
        if (ty) m->u.watch_value_reply.changed = 1, m->u.watch_value_reply.version = 7;
        if (mx) m->u.watch_value_reply.changed = 1, m->u.watch_value_reply.version = UINT64_MAX;
        break;
    case 44: { /* get_mapped_stream_req: get_mapped_range_req's fields, then chunk and window */
        rl__msg t;
        sample(25, variant, a, &t);
        m->type = KINDS[k].type, m->flags = KINDS[k].flags;
        m->u.get_mapped_stream_req.r = t.u.get_mapped_range_req;
        if (ty) m->u.get_mapped_stream_req.chunk_bytes = 65536, m->u.get_mapped_stream_req.window_bytes = 4u << 20;
        if (mx)
            m->u.get_mapped_stream_req.chunk_bytes = UINT32_MAX, m->u.get_mapped_stream_req.window_bytes = UINT32_MAX;
        break;
    }
    case 45: { /* get_mapped_stream_reply: get_mapped_range_reply's */
        rl__msg t;
        sample(26, variant, a, &t);
        m->type = KINDS[k].type, m->flags = KINDS[k].flags;
        m->u.get_mapped_stream_reply = t.u.get_mapped_range_reply;
        break;
    }
    case 46: { /* mapped_chunk: get_mapped_range_reply's entries */
        rl__msg t;
        sample(26, variant, a, &t);
        m->type = KINDS[k].type, m->flags = KINDS[k].flags;
        m->u.mapped_chunk.entries = t.u.get_mapped_range_reply.entries;
        m->u.mapped_chunk.n_entries = t.u.get_mapped_range_reply.n_entries;
        break;
    }
    case 47: /* mapped_credit */
        if (ty) m->u.mapped_credit.bytes = 262144;
        if (mx) m->u.mapped_credit.bytes = UINT32_MAX, m->u.mapped_credit.cancel = 1;
        break;
    default: fail_msg("no sample for kind %d", k);
    }
}

/* ---- An independent writer of the documented layouts ------------------------------------- */

static void tw8(rl_buf *b, uint8_t v) { rl__buf_append_byte(b, v); }
static void tw16(rl_buf *b, uint16_t v) {
    tw8(b, (uint8_t)v);
    tw8(b, (uint8_t)(v >> 8));
}
static void tw32(rl_buf *b, uint32_t v) {
    tw16(b, (uint16_t)v);
    tw16(b, (uint16_t)(v >> 16));
}
static void tw64(rl_buf *b, uint64_t v) {
    tw32(b, (uint32_t)v);
    tw32(b, (uint32_t)(v >> 32));
}
static void twb(rl_buf *b, const uint8_t *p, uint32_t n) {
    tw32(b, n);
    if (n) rl__buf_append(b, p, n);
}
static void twsel(rl_buf *b, rl_key_selector s) {
    twb(b, s.key, s.key_len);
    tw8(b, (uint8_t)s.or_equal);
    tw32(b, (uint32_t)s.offset);
}
static void twkv(rl_buf *b, rl_keyvalue kv) {
    twb(b, kv.key, kv.key_len);
    twb(b, kv.value, kv.value_len);
}
static void twkvs(rl_buf *b, const rl_keyvalue *kv, uint32_t n) {
    tw32(b, n);
    for (uint32_t i = 0; i < n; i++) twkv(b, kv[i]);
}
static void twrange(rl_buf *b, rl__keyrange r) {
    twb(b, r.begin, r.begin_len);
    twb(b, r.end, r.end_len);
}
static void twranges(rl_buf *b, const rl__keyrange *r, uint32_t n) {
    tw32(b, n);
    for (uint32_t i = 0; i < n; i++) twrange(b, r[i]);
}
static void twmuts(rl_buf *b, const rl__mutation *m, uint32_t n) {
    tw32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        tw8(b, m[i].type);
        twb(b, m[i].p1, m[i].len1);
        twb(b, m[i].p2, m[i].len2);
    }
}
/* n raw bytes (the fixed-length fields: no length prefix). */
static void twfixed(rl_buf *b, const uint8_t *p, size_t n) { rl__buf_append(b, p, n); }
static void twtail(rl_buf *b, uint8_t more, uint8_t status, const uint8_t *rt, uint32_t rtl, const uint8_t *rb,
                   uint32_t rbl, const uint8_t *re, uint32_t rel) {
    tw8(b, more);
    tw8(b, status);
    twb(b, rt, rtl);
    twb(b, rb, rbl);
    twb(b, re, rel);
}

/* The handshake's fixed-length fields are the documented 16-byte nonces and 32-byte proofs. */
_Static_assert(sizeof(((rl__msg_auth_challenge *)0)->nonce) == 16, "AUTH_CHALLENGE nonce: 16 bytes");
_Static_assert(sizeof(((rl__msg_auth_req *)0)->nonce) == 16, "AUTH request nonce: 16 bytes");
_Static_assert(sizeof(((rl__msg_auth_req *)0)->proof) == 32, "AUTH request proof: 32 bytes");
_Static_assert(sizeof(((rl__msg_auth_reply *)0)->proof) == 32, "AUTH reply proof: 32 bytes");

/* Append m's payload as docs/protocol.md lays it out, without validating anything. */
static void tw_msg(rl_buf *b, const rl__msg *m) {
    const void *u = &m->u;
    if (m->flags == E) {
        const rl__msg_error *x = u;
        tw32(b, (uint32_t)x->code);
        twb(b, x->message, x->message_len);
        return;
    }
    int reply = m->flags == R;
    switch (m->type * 2 + reply) {
    case RL_MSG_AUTH_CHALLENGE * 2: {
        const rl__msg_auth_challenge *x = u;
        tw32(b, x->magic), tw32(b, x->protocol_version), twfixed(b, x->nonce, 16);
        break;
    }
    case RL_MSG_AUTH * 2: {
        const rl__msg_auth_req *x = u;
        tw32(b, x->magic), tw32(b, x->protocol_version), tw8(b, x->auth_class);
        twfixed(b, x->nonce, 16), twfixed(b, x->proof, 32);
        break;
    }
    case RL_MSG_AUTH * 2 + 1: twfixed(b, m->u.auth_reply.proof, 32); break;
    case RL_MSG_HELLO * 2: {
        const rl__msg_hello_req *x = u;
        tw32(b, x->magic), tw32(b, x->protocol_version), tw8(b, x->role), tw32(b, x->id);
        twb(b, x->host, x->host_len);
        break;
    }
    case RL_MSG_HELLO * 2 + 1: {
        const rl__msg_hello_reply *x = u;
        tw32(b, x->protocol_version), tw8(b, x->role), tw32(b, x->id), twb(b, x->host, x->host_len);
        break;
    }
    case RL_MSG_PING * 2: twb(b, m->u.ping_req.payload, m->u.ping_req.payload_len); break;
    case RL_MSG_PING * 2 + 1:
        twb(b, m->u.ping_reply.payload, m->u.ping_reply.payload_len);
        tw64(b, m->u.ping_reply.server_mono_ns);
        break;
    case RL_MSG_GET_READ_VERSION * 2: tw32(b, m->u.get_read_version_req.flags); break;
    case RL_MSG_GET_READ_VERSION * 2 + 1: tw64(b, m->u.get_read_version_reply.version); break;
    case RL_MSG_COMMIT * 2: {
        const rl__msg_commit_req *x = u;
        tw64(b, x->read_version);
        twranges(b, x->reads, x->n_reads);
        twranges(b, x->writes, x->n_writes);
        twmuts(b, x->muts, x->n_muts);
        break;
    }
    case RL_MSG_COMMIT * 2 + 1: {
        const rl__msg_commit_reply *x = u;
        tw32(b, (uint32_t)x->result), tw64(b, x->commit_version), tw16(b, x->batch_order);
        break;
    }
    case RL_MSG_GET_SHARD_MAP * 2: tw64(b, m->u.get_shard_map_req.min_version); break;
    case RL_MSG_GET_SHARD_MAP * 2 + 1: {
        const rl__msg_get_shard_map_reply *x = u;
        tw64(b, x->version);
        tw32(b, x->n_servers);
        for (uint32_t i = 0; i < x->n_servers; i++) {
            const rl__msg_server *s = &x->servers[i];
            tw32(b, s->id), tw8(b, s->role), twb(b, s->address, s->address_len), tw16(b, s->port);
            twb(b, s->host, s->host_len), tw8(b, s->healthy);
        }
        tw32(b, x->n_shards);
        for (uint32_t i = 0; i < x->n_shards; i++) {
            const rl__msg_shard *s = &x->shards[i];
            twb(b, s->begin, s->begin_len), twb(b, s->end, s->end_len), tw32(b, s->n_team);
            for (uint32_t j = 0; j < s->n_team; j++) tw32(b, s->team[j]);
        }
        tw32(b, x->delay_us), tw32(b, x->jitter_us);
        break;
    }
    case RL_MSG_REGISTER_STORAGE * 2: {
        const rl__msg_register_storage_req *x = u;
        tw32(b, x->id), twb(b, x->address, x->address_len), tw16(b, x->port);
        twb(b, x->host, x->host_len), tw64(b, x->durable_version);
        break;
    }
    case RL_MSG_REGISTER_STORAGE * 2 + 1:
        tw64(b, m->u.register_storage_reply.start_version);
        twranges(b, m->u.register_storage_reply.ranges, m->u.register_storage_reply.n_ranges);
        break;
    case RL_MSG_PEEK * 2: {
        const rl__msg_peek_req *x = u;
        tw32(b, x->storage_id), tw64(b, x->after_version), tw32(b, x->max_bytes), tw32(b, x->max_wait_ms);
        break;
    }
    case RL_MSG_PEEK * 2 + 1: {
        const rl__msg_peek_reply *x = u;
        tw64(b, x->end_version);
        tw32(b, x->n_versions);
        for (uint32_t i = 0; i < x->n_versions; i++)
            tw64(b, x->versions[i].version), twmuts(b, x->versions[i].muts, x->versions[i].n_muts);
        tw32(b, x->n_changes);
        for (uint32_t i = 0; i < x->n_changes; i++)
            tw64(b, x->changes[i].version), tw8(b, x->changes[i].kind), twrange(b, x->changes[i].range);
        break;
    }
    case RL_MSG_POP * 2: tw32(b, m->u.pop_req.storage_id), tw64(b, m->u.pop_req.durable_version); break;
    case RL_MSG_POP * 2 + 1:
    case RL_MSG_STATUS * 2: break;
    case RL_MSG_STATUS * 2 + 1: twb(b, m->u.status_reply.json, m->u.status_reply.json_len); break;
    case RL_MSG_GET * 2: tw64(b, m->u.get_req.version), twb(b, m->u.get_req.key, m->u.get_req.key_len); break;
    case RL_MSG_GET * 2 + 1:
        tw8(b, m->u.get_reply.present), twb(b, m->u.get_reply.value, m->u.get_reply.value_len);
        break;
    case RL_MSG_GET_KEY * 2: tw64(b, m->u.get_key_req.version), twsel(b, m->u.get_key_req.sel); break;
    case RL_MSG_GET_KEY * 2 + 1: tw8(b, m->u.get_key_reply.resolved), twsel(b, m->u.get_key_reply.sel); break;
    case RL_MSG_GET_RANGE * 2: {
        const rl__msg_get_range_req *x = u;
        tw64(b, x->version), twsel(b, x->begin), twsel(b, x->end), tw32(b, (uint32_t)x->limit);
        tw64(b, (uint64_t)x->target_bytes), tw8(b, x->reverse);
        break;
    }
    case RL_MSG_GET_RANGE * 2 + 1: {
        const rl__msg_get_range_reply *x = u;
        twkvs(b, x->kvs, x->n_kvs);
        twtail(b, x->more, x->status, x->read_through, x->read_through_len, x->resolved_begin, x->resolved_begin_len,
               x->resolved_end, x->resolved_end_len);
        break;
    }
    case RL_MSG_GET_MAPPED_STREAM * 2: {
        const rl__msg_get_mapped_stream_req *y = u;
        const rl__msg_get_mapped_range_req *x = &y->r;
        tw64(b, x->version), twsel(b, x->begin), twsel(b, x->end), twb(b, x->mapper, x->mapper_len);
        tw32(b, (uint32_t)x->limit), tw64(b, (uint64_t)x->target_bytes);
        tw8(b, (uint8_t)(x->reverse | x->omit_index << 1 | x->defer_remote << 2));
        tw32(b, (uint32_t)x->secondary_row_limit), tw64(b, (uint64_t)x->secondary_byte_limit);
        tw8(b, x->strategy), tw32(b, x->batch);
        tw32(b, y->chunk_bytes), tw32(b, y->window_bytes);
        break;
    }
    case RL_MSG_MAPPED_CHUNK * 2: {
        const rl__msg_mapped_chunk *x = u;
        tw32(b, x->n_entries);
        for (uint32_t i = 0; i < x->n_entries; i++) {
            const rl_mapped_keyvalue *e = &x->entries[i];
            twkv(b, e->index), tw8(b, (uint8_t)(e->is_range | e->index_omitted << 1));
            if (e->index_omitted) tw32(b, e->index_omitted_len);
            twb(b, e->begin, e->begin_len);
            twb(b, e->end, e->end_len), twkvs(b, e->kvs, (uint32_t)e->n_kvs);
            tw8(b, (uint8_t)e->more), tw8(b, (uint8_t)e->served_locally);
        }
        break;
    }
    case RL_MSG_MAPPED_CREDIT * 2: tw32(b, m->u.mapped_credit.bytes), tw8(b, m->u.mapped_credit.cancel); break;
    case RL_MSG_GET_MAPPED_RANGE * 2: {
        const rl__msg_get_mapped_range_req *x = u;
        tw64(b, x->version), twsel(b, x->begin), twsel(b, x->end), twb(b, x->mapper, x->mapper_len);
        tw32(b, (uint32_t)x->limit), tw64(b, (uint64_t)x->target_bytes);
        tw8(b, (uint8_t)(x->reverse | x->omit_index << 1 | x->defer_remote << 2));
        tw32(b, (uint32_t)x->secondary_row_limit), tw64(b, (uint64_t)x->secondary_byte_limit);
        tw8(b, x->strategy), tw32(b, x->batch);
        break;
    }
    case RL_MSG_GET_MAPPED_STREAM * 2 + 1:
    case RL_MSG_GET_MAPPED_RANGE * 2 + 1: {
        const rl__msg_get_mapped_range_reply *x = u;
        tw32(b, x->n_entries);
        for (uint32_t i = 0; i < x->n_entries; i++) {
            const rl_mapped_keyvalue *e = &x->entries[i];
            twkv(b, e->index), tw8(b, (uint8_t)(e->is_range | e->index_omitted << 1));
            if (e->index_omitted) tw32(b, e->index_omitted_len);
            twb(b, e->begin, e->begin_len);
            twb(b, e->end, e->end_len), twkvs(b, e->kvs, (uint32_t)e->n_kvs);
            tw8(b, (uint8_t)e->more), tw8(b, (uint8_t)e->served_locally);
        }
        twtail(b, x->more, x->status, x->read_through, x->read_through_len, x->resolved_begin, x->resolved_begin_len,
               x->resolved_end, x->resolved_end_len);
        tw32(b, x->stats.secondaries_local), tw32(b, x->stats.secondaries_remote);
        tw32(b, x->stats.s2s_requests), tw32(b, x->stats.s2s_round_trips), tw64(b, x->stats.server_ns);
        tw64(b, x->stats.s2s_bytes_sent), tw64(b, x->stats.s2s_bytes_received), tw32(b, x->stats.s2s_peers);
        tw32(b, x->stats.n_peer_stats);
        for (uint32_t i = 0; i < x->stats.n_peer_stats; i++) {
            const rl__msg_s2s_peer *p = &x->stats.peer_stats[i];
            tw32(b, p->server_id), tw32(b, p->requests), tw32(b, p->items);
            tw64(b, p->bytes_sent), tw64(b, p->bytes_received);
        }
        break;
    }
    case RL_MSG_GET_MULTI * 2: {
        const rl__msg_get_multi_req *x = u;
        tw64(b, x->version), tw32(b, x->n_items);
        for (uint32_t i = 0; i < x->n_items; i++) {
            const rl__msg_read_item *it = &x->items[i];
            tw8(b, it->is_range), twb(b, it->begin, it->begin_len), twb(b, it->end, it->end_len);
            tw32(b, (uint32_t)it->row_limit), tw64(b, (uint64_t)it->byte_limit);
        }
        tw64(b, x->max_bytes);
        break;
    }
    case RL_MSG_SPLIT_SHARD * 2: twb(b, m->u.split_shard_req.key, m->u.split_shard_req.key_len); break;
    case RL_MSG_SPLIT_SHARD * 2 + 1:
        tw64(b, m->u.split_shard_reply.version), tw8(b, m->u.split_shard_reply.split);
        break;
    case RL_MSG_ASSIGN_SHARD * 2: {
        const rl__msg_assign_shard_req *x = u;
        twrange(b, x->range), tw32(b, x->n_team);
        for (uint32_t i = 0; i < x->n_team; i++) tw32(b, x->team[i]);
        tw32(b, x->timeout_ms);
        break;
    }
    case RL_MSG_ASSIGN_SHARD * 2 + 1:
        tw64(b, m->u.assign_shard_reply.version), tw32(b, m->u.assign_shard_reply.moved);
        break;
    case RL_MSG_MOVE_SHARD * 2:
        tw32(b, m->u.move_shard_req.storage_id), twrange(b, m->u.move_shard_req.range);
        tw64(b, m->u.move_shard_req.version);
        break;
    case RL_MSG_MOVE_SHARD * 2 + 1: break;
    case RL_MSG_GET_MULTI * 2 + 1: {
        const rl__msg_get_multi_reply *x = u;
        tw32(b, x->n_results);
        for (uint32_t i = 0; i < x->n_results; i++) {
            const rl__msg_read_result *r = &x->results[i];
            tw32(b, (uint32_t)r->error), twkvs(b, r->kvs, r->n_kvs), tw8(b, r->more);
        }
        break;
    }
    case RL_MSG_SET_DELAY * 2: tw32(b, m->u.set_delay_req.delay_us), tw32(b, m->u.set_delay_req.jitter_us); break;
    case RL_MSG_SET_DELAY * 2 + 1: break;
    case RL_MSG_GET_METRICS * 2: {
        const rl__msg_get_metrics_req *x = u;
        tw8(b, x->op), twrange(b, x->range), tw64(b, (uint64_t)x->chunk);
        break;
    }
    case RL_MSG_GET_METRICS * 2 + 1: {
        const rl__msg_get_metrics_reply *x = u;
        tw64(b, (uint64_t)x->bytes), tw32(b, x->n_cuts);
        for (uint32_t i = 0; i < x->n_cuts; i++) twb(b, x->cuts[i].data, (uint32_t)x->cuts[i].len);
        twb(b, x->read_through, x->read_through_len);
        break;
    }
    case RL_MSG_WATCH_VALUE * 2: {
        const rl__msg_watch_value_req *x = u;
        tw64(b, x->version), twb(b, x->key, x->key_len), tw8(b, x->present), twb(b, x->value, x->value_len);
        tw32(b, x->hold_ms);
        break;
    }
    case RL_MSG_WATCH_VALUE * 2 + 1:
        tw8(b, m->u.watch_value_reply.changed), tw64(b, m->u.watch_value_reply.version);
        break;
    default: fail_msg("tw_msg: no layout for type %u flags %u", m->type, m->flags);
    }
}

/* ---- Checks ------------------------------------------------------------------------------ */

/* m is valid: it encodes to tw_msg's bytes, decodes, and re-encodes to the same bytes, through
 * both the per-message dispatcher and a frame. */
static void expect_good(const rl__msg *m) {
    rl_buf enc, want, again;
    rl_arena a;
    rl__msg d;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__buf_init(&enc);
    rl__buf_init(&want);
    rl__buf_init(&again);
    rl__arena_init(&a, 0);
    tw_msg(&want, m);
    int rc = rl__msg_encode(&enc, m, &why);
    if (rc != RL_OK)
        fail_msg("encode type %u flags %u: %s (%s)", m->type, m->flags, rl_error_name(rc), rl__errdetail_get(&why));
    ASSERT_MEM_EQ(enc.data, enc.len, want.data, want.len);
    rc = rl__msg_decode(m->type, m->flags, enc.data, enc.len, &a, &d, &why);
    if (rc != RL_OK)
        fail_msg("decode type %u flags %u: %s (%s)", m->type, m->flags, rl_error_name(rc), rl__errdetail_get(&why));
    ASSERT_EQ(d.type, m->type);
    ASSERT_EQ(d.flags, m->flags);
    ASSERT_OK(rl__msg_encode(&again, &d, NULL));
    ASSERT_MEM_EQ(again.data, again.len, enc.data, enc.len);
    rl__buf_release(&enc);
    rl__buf_release(&want);
    rl__buf_release(&again);
    rl__arena_release(&a);
}

/* m breaks a rule: the encoder refuses it (RL_E_INVALID_ARGUMENT, the buffer unchanged) and the
 * decoder refuses its bytes (want_rc, RL_E_MALFORMED_FRAME by default), both naming `field`. */
static void expect_bad_rc(const rl__msg *m, const char *field, int want_rc) {
    rl_buf enc, raw;
    rl_arena a;
    rl__msg d;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__buf_init(&enc);
    rl__buf_init(&raw);
    rl__arena_init(&a, 0);
    rl__buf_append(&enc, "pre", 3);
    int rc = rl__msg_encode(&enc, m, &why);
    if (want_rc == RL_E_MALFORMED_FRAME) {
        if (rc != RL_E_INVALID_ARGUMENT) fail_msg("encode of a bad %s returned %s", field, rl_error_name(rc));
        ASSERT_MEM_EQ(enc.data, enc.len, "pre", 3);
        if (!strstr(rl__errdetail_get(&why), field))
            fail_msg("encode reason '%s' does not name '%s'", rl__errdetail_get(&why), field);
    }
    tw_msg(&raw, m);
    rc = rl__msg_decode(m->type, m->flags, raw.data, raw.len, &a, &d, &why);
    if (rc != want_rc)
        fail_msg("decode of a bad %s returned %s, expected %s (%s)", field, rl_error_name(rc), rl_error_name(want_rc),
                 rl__errdetail_get(&why));
    if (!strstr(rl__errdetail_get(&why), field))
        fail_msg("decode reason '%s' does not name '%s'", rl__errdetail_get(&why), field);
    rl__buf_release(&enc);
    rl__buf_release(&raw);
    rl__arena_release(&a);
}

static void expect_bad(const rl__msg *m, const char *field) { expect_bad_rc(m, field, RL_E_MALFORMED_FRAME); }

/* Make e an omitted entry (RL_MAPPED_OMIT_INDEX) that had len index bytes. */
static void omit_entry(rl_mapped_keyvalue *e, uint32_t len) {
    e->index.key = e->index.value = NULL;
    e->index.key_len = e->index.value_len = 0;
    e->index_omitted = 1;
    e->index_omitted_len = len;
}

/* Encode m into b (which is reset first). */
static void encode_into(rl_buf *b, const rl__msg *m) {
    rl__buf_reset(b);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    int rc = rl__msg_encode(b, m, &why);
    if (rc != RL_OK) fail_msg("encode %s: %s", rl_error_name(rc), rl__errdetail_get(&why));
}

static int kind_of(uint16_t type, uint16_t flags) {
    for (int k = 0; k < N_KINDS; k++)
        if (KINDS[k].type == type && KINDS[k].flags == flags) return k;
    return -1;
}

/* ---- net_1: message types ---------------------------------------------------------------- */

/* net_1_1: names and known-ness of every type number; reserved ranges are named, not known. */
TEST(net_1_1_type_names) {
    int known = 0;
    for (int t = 0; t <= 0xffff; t++) {
        int is_known = rl__msg_type_known(t);
        known += is_known;
        const char *n = rl__msg_type_name(t);
        ASSERT_NOT_NULL(n);
        if (is_known) ASSERT_TRUE(strcmp(n, "UNKNOWN") != 0 && !strstr(n, "RESERVED"));
        if (t >= 33 && t <= 49 && t != RL_MSG_SET_DELAY) {
            ASSERT_FALSE(is_known);
            ASSERT_TRUE(strcmp(n, "UNKNOWN") != 0);
        }
    }
    ASSERT_EQ(known, 25);
    for (int k = 0; k < N_KINDS; k++) ASSERT_TRUE(rl__msg_type_known(KINDS[k].type));
    ASSERT_STR_EQ(rl__msg_type_name(RL_MSG_GET_RANGE), "GET_RANGE");
    ASSERT_STR_EQ(rl__msg_type_name(RL_MSG_HELLO), "HELLO");
    ASSERT_STR_EQ(rl__msg_type_name(3), "AUTH_CHALLENGE");
    ASSERT_STR_EQ(rl__msg_type_name(4), "AUTH");
    ASSERT_STR_EQ(rl__msg_type_name(RL_MSG_GET_MAPPED_RANGE), "GET_MAPPED_RANGE");
    ASSERT_STR_EQ(rl__msg_type_name(30), "SPLIT_SHARD");
    ASSERT_STR_EQ(rl__msg_type_name(32), "MOVE_SHARD");
    ASSERT_STR_EQ(rl__msg_type_name(35), "ADMIN_RESERVED");
    ASSERT_STR_EQ(rl__msg_type_name(40), "SET_DELAY");
    ASSERT_STR_EQ(rl__msg_type_name(49), "DELAY_RESERVED");
    ASSERT_STR_EQ(rl__msg_type_name(0), "UNKNOWN");
    ASSERT_STR_EQ(rl__msg_type_name(5), "UNKNOWN");
    ASSERT_STR_EQ(rl__msg_type_name(9), "UNKNOWN");
    ASSERT_STR_EQ(rl__msg_type_name(-1), "UNKNOWN");
    ASSERT_STR_EQ(rl__msg_type_name(50), "UNKNOWN");
}

/* ---- net_2: round trips and layout ------------------------------------------------------- */

/* net_2_1: every payload with typical fields matches the documented layout and round-trips;
 * the per-message functions agree with the dispatcher. */
TEST(net_2_1_round_trip_typical) {
    rl_arena a;
    rl__arena_init(&a, 0);
    for (int k = 0; k < N_KINDS; k++) {
        rl__msg m;
        sample(k, V_TYPICAL, &a, &m);
        expect_good(&m);
    }
    /* Spot checks through the typed functions: the decoded fields are the sample's. */
    rl__msg m;
    rl_buf b;
    rl__buf_init(&b);
    sample(kind_of(RL_MSG_COMMIT, 0), V_TYPICAL, &a, &m);
    ASSERT_OK(rl__msg_commit_req_encode(&b, &m.u.commit_req, NULL));
    rl__msg_commit_req c;
    ASSERT_OK(rl__msg_commit_req_decode(b.data, b.len, &a, &c, NULL));
    ASSERT_EQ(c.read_version, 500);
    ASSERT_EQ(c.n_reads, 2);
    ASSERT_EQ(c.n_writes, 1);
    ASSERT_EQ(c.n_muts, 5);
    ASSERT_MEM_EQ(c.reads[1].end, c.reads[1].end_len, "c\0", 2);
    ASSERT_EQ(c.muts[3].type, RL_MUT_SET_VERSIONSTAMPED_KEY);
    ASSERT_EQ(c.muts[4].len2, 0);
    /* Zero-copy: byte strings point into the payload. */
    ASSERT_TRUE(c.muts[0].p1 > b.data && c.muts[0].p1 < b.data + b.len);

    sample(kind_of(RL_MSG_GET_MAPPED_RANGE, R), V_TYPICAL, &a, &m);
    encode_into(&b, &m);
    rl__msg_get_mapped_range_reply g;
    ASSERT_OK(rl__msg_get_mapped_range_reply_decode(b.data, b.len, &a, &g, NULL));
    ASSERT_EQ(g.n_entries, 3);
    ASSERT_EQ(g.entries[0].n_kvs, 2);
    ASSERT_EQ(g.entries[0].is_range, 1);
    ASSERT_EQ(g.entries[0].served_locally, 1);
    ASSERT_MEM_EQ(g.entries[0].kvs[1].key, g.entries[0].kvs[1].key_len, "r/1/b", 5);
    ASSERT_EQ(g.entries[1].n_kvs, 0);
    ASSERT_EQ(g.entries[2].more, 1);
    ASSERT_EQ(g.stats.server_ns, 12345);
    ASSERT_EQ(g.stats.s2s_bytes_sent, 700);
    ASSERT_EQ(g.stats.s2s_bytes_received, 900);
    ASSERT_EQ(g.stats.s2s_peers, 1);
    ASSERT_EQ(g.stats.n_peer_stats, 1);
    ASSERT_EQ(g.stats.peer_stats[0].server_id, 3);
    ASSERT_EQ(g.stats.peer_stats[0].bytes_received, 900);
    ASSERT_EQ(g.more, 1);

    sample(kind_of(RL_MSG_GET_KEY, 0), V_TYPICAL, &a, &m);
    encode_into(&b, &m);
    rl__msg_get_key_req gk;
    ASSERT_OK(rl__msg_get_key_req_decode(b.data, b.len, NULL, &gk, NULL)); /* no arrays: no arena */
    ASSERT_EQ(gk.sel.or_equal, 1);
    ASSERT_EQ(gk.sel.offset, 1);

    /* The handshake's payloads through their typed functions: fixed fields, no arena needed. */
    sample(kind_of(RL_MSG_AUTH_CHALLENGE, 0), V_TYPICAL, &a, &m);
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_auth_challenge_encode(&b, &m.u.auth_challenge, NULL));
    ASSERT_EQ(b.len, 24);
    rl__msg_auth_challenge ac;
    ASSERT_OK(rl__msg_auth_challenge_decode(b.data, b.len, NULL, &ac, NULL));
    ASSERT_EQ(ac.magic, RL_PROTOCOL_MAGIC);
    ASSERT_EQ(ac.protocol_version, RL_PROTOCOL_VERSION);
    ASSERT_MEM_EQ(ac.nonce, 16, "challenge-nonce!", 16);
    sample(kind_of(RL_MSG_AUTH, 0), V_TYPICAL, &a, &m);
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_auth_req_encode(&b, &m.u.auth_req, NULL));
    ASSERT_EQ(b.len, 57);
    rl__msg_auth_req ar;
    ASSERT_OK(rl__msg_auth_req_decode(b.data, b.len, NULL, &ar, NULL));
    ASSERT_EQ(ar.magic, RL_PROTOCOL_MAGIC);
    ASSERT_EQ(ar.protocol_version, RL_PROTOCOL_VERSION);
    ASSERT_EQ(ar.auth_class, RL_AUTH_MEMBER);
    ASSERT_MEM_EQ(ar.nonce, 16, "client-nonce-01!", 16);
    ASSERT_MEM_EQ(ar.proof, 32, "proof-0123456789abcdef0123456789", 32);
    sample(kind_of(RL_MSG_AUTH, R), V_TYPICAL, &a, &m);
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_auth_reply_encode(&b, &m.u.auth_reply, NULL));
    ASSERT_EQ(b.len, 32);
    rl__msg_auth_reply ap;
    ASSERT_OK(rl__msg_auth_reply_decode(b.data, b.len, NULL, &ap, NULL));
    ASSERT_MEM_EQ(ap.proof, 32, "server-proof-0123456789abcdefghi", 32);
    rl__buf_release(&b);
    rl__arena_release(&a);
}

/* net_2_2: every payload with empty fields (zero counts, empty strings) round-trips. */
TEST(net_2_2_round_trip_empty) {
    rl_arena a;
    rl__arena_init(&a, 0);
    for (int k = 0; k < N_KINDS; k++) {
        rl__msg m;
        sample(k, V_EMPTY, &a, &m);
        expect_good(&m);
    }
    /* The empty payloads are empty, and refuse a byte. */
    rl__msg d;
    uint8_t one = 0;
    ASSERT_OK(rl__msg_decode(RL_MSG_STATUS, 0, NULL, 0, &a, &d, NULL));
    ASSERT_OK(rl__msg_decode(RL_MSG_POP, R, NULL, 0, &a, &d, NULL));
    ASSERT_RC(rl__msg_decode(RL_MSG_STATUS, 0, &one, 1, &a, &d, NULL), RL_E_MALFORMED_FRAME);
    ASSERT_RC(rl__msg_pop_reply_decode(&one, 1, &a, &d.u.pop_reply, NULL), RL_E_MALFORMED_FRAME);
    rl__arena_release(&a);
}

/* net_2_3: every payload with its fields at their maximum sizes (keys 10,001, values 100,000,
 * mutation parameters 100,004 and 10,005, strings 4,096, JSON 16 MiB, teams of 16) round-trips. */
TEST(net_2_3_round_trip_max) {
    rl_arena a;
    rl__arena_init(&a, 0);
    for (int k = 0; k < N_KINDS; k++) {
        rl__msg m;
        sample(k, V_MAX, &a, &m);
        expect_good(&m);
        rl__arena_reset(&a);
    }
    rl__arena_release(&a);
}

/* net_2_4: golden bytes, computed by hand from docs/protocol.md. */
TEST(net_2_4_golden_bytes) {
    rl_buf b;
    rl__buf_init(&b);
    rl__msg m;

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_PING;
    SET(m.u.ping_req.payload, m.u.ping_req.payload_len, "hi");
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len, "\x02\0\0\0hi", 6);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_HELLO;
    m.u.hello_req = (rl__msg_hello_req){RL_PROTOCOL_MAGIC, RL_PROTOCOL_VERSION, RL_ROLE_STORAGE, 7, LIT("h1")};
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len, "RLKV\x02\0\0\0\x02\x07\0\0\0\x02\0\0\0h1", 19);

    /* The handshake: AUTH_CHALLENGE (as the frame it travels in: flags 0, id 0), the AUTH request
     * and its reply. Nonces and proofs are raw bytes, without a length. */
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_AUTH_CHALLENGE;
    m.u.auth_challenge.magic = RL_PROTOCOL_MAGIC;
    m.u.auth_challenge.protocol_version = RL_PROTOCOL_VERSION;
    for (int i = 0; i < 16; i++) m.u.auth_challenge.nonce[i] = (uint8_t)i;
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len,
                  "RLKV\x02\0\0\0"                                                    /* magic, version */
                  "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", /* nonce */
                  24);
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_frame_encode(&b, 0, &m, NULL));
    ASSERT_MEM_EQ(b.data, b.len,
                  "\x18\0\0\0\x03\0\0\0\0\0\0\0\0\0\0\0" /* 24 bytes, type 3, flags 0, id 0 */
                  "RLKV\x02\0\0\0"
                  "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
                  40);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_AUTH;
    m.u.auth_req.magic = RL_PROTOCOL_MAGIC;
    m.u.auth_req.protocol_version = RL_PROTOCOL_VERSION;
    m.u.auth_req.auth_class = RL_AUTH_MEMBER;
    for (int i = 0; i < 16; i++) m.u.auth_req.nonce[i] = (uint8_t)(0x10 + i);
    for (int i = 0; i < 32; i++) m.u.auth_req.proof[i] = (uint8_t)(0xe0 + i);
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len,
                  "RLKV\x02\0\0\0"                                                   /* magic, version */
                  "\x02"                                                             /* auth_class: member */
                  "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f" /* nonce */
                  "\xe0\xe1\xe2\xe3\xe4\xe5\xe6\xe7\xe8\xe9\xea\xeb\xec\xed\xee\xef" /* proof */
                  "\xf0\xf1\xf2\xf3\xf4\xf5\xf6\xf7\xf8\xf9\xfa\xfb\xfc\xfd\xfe\xff",
                  57);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_AUTH;
    m.flags = R;
    memset(m.u.auth_reply.proof, 0x5a, 32);
    m.u.auth_reply.proof[0] = 0x01, m.u.auth_reply.proof[31] = 0x80;
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len,
                  "\x01ZZZZZZZZZZZZZZZ"
                  "ZZZZZZZZZZZZZZZ\x80",
                  32);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET;
    m.u.get_req.version = 0x0102030405060708ull;
    SET(m.u.get_req.key, m.u.get_req.key_len, "k");
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len, "\x08\x07\x06\x05\x04\x03\x02\x01\x01\0\0\0k", 13);

    /* The same GET as a frame with request id 9. */
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_frame_encode(&b, 9, &m, NULL));
    ASSERT_MEM_EQ(b.data, b.len,
                  "\x0d\0\0\0\x14\0\0\0\x09\0\0\0\0\0\0\0"
                  "\x08\x07\x06\x05\x04\x03\x02\x01\x01\0\0\0k",
                  29);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET;
    m.flags = E;
    m.u.error.code = 1001;
    SET(m.u.error.message, m.u.error.message_len, "no");
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len, "\xe9\x03\0\0\x02\0\0\0no", 10);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_KEY;
    m.u.get_key_req.version = 5;
    m.u.get_key_req.sel = sel_of((const uint8_t *)"a", 1, 1, -2);
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len, "\x05\0\0\0\0\0\0\0\x01\0\0\0a\x01\xfe\xff\xff\xff", 18);

    rl__keyrange r = range_of(LIT("a"), LIT("b"));
    rl__mutation mu = mut_of(RL_MUT_SET, LIT("k"), LIT("v"));
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_COMMIT;
    m.u.commit_req = (rl__msg_commit_req){0x10, &r, 1, NULL, 0, &mu, 1};
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len,
                  "\x10\0\0\0\0\0\0\0"        /* read_version */
                  "\x01\0\0\0"                /* 1 read range */
                  "\x01\0\0\0a\x01\0\0\0b"    /* [a, b) */
                  "\0\0\0\0"                  /* 0 write ranges */
                  "\x01\0\0\0"                /* 1 mutation */
                  "\0\x01\0\0\0k\x01\0\0\0v", /* SET k v */
                  41);

    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_RANGE;
    m.flags = R;
    m.u.get_range_reply.status = RL_RANGE_SELECTOR_UNRESOLVED;
    SET(m.u.get_range_reply.resolved_begin, m.u.get_range_reply.resolved_begin_len, "x");
    encode_into(&b, &m);
    ASSERT_MEM_EQ(b.data, b.len, "\0\0\0\0\0\x01\0\0\0\0\x01\0\0\0x\0\0\0\0", 19);
    rl__buf_release(&b);
}

/* net_2_5: the frame encoder writes a header rl__frame_header_decode accepts, and refuses a
 * payload over RL_NET_MAX_PAYLOAD without appending anything. */
TEST(net_2_5_frame_encode) {
    rl_arena a;
    rl_buf b;
    rl__arena_init(&a, 0);
    rl__buf_init(&b);
    for (int k = 0; k < N_KINDS; k++) {
        rl__msg m, d;
        sample(k, V_TYPICAL, &a, &m);
        rl__buf_reset(&b);
        rl__buf_append(&b, "x", 1);
        ASSERT_OK(rl__msg_frame_encode(&b, 0x1122334455667788ull + (uint64_t)k, &m, NULL));
        rl__frame_header h;
        ASSERT_EQ(rl__frame_header_decode(b.data + 1, &h), 0);
        ASSERT_EQ(h.type, m.type);
        ASSERT_EQ(h.flags, m.flags);
        ASSERT_TRUE(h.id == 0x1122334455667788ull + (uint64_t)k);
        ASSERT_EQ(h.payload_len, b.len - 1 - RL_FRAME_HEADER_LEN);
        ASSERT_OK(rl__msg_decode(h.type, h.flags, b.data + 1 + RL_FRAME_HEADER_LEN, h.payload_len, &a, &d, NULL));
    }
    /* A mapped reply of 700 entries of 100,000-byte values: 70 MB > 64 MiB. */
    enum { N = 700 };
    const uint8_t *v = fill(&a, VMAX, 'v');
    rl_mapped_keyvalue *e = alloc0(&a, N * sizeof *e);
    for (int i = 0; i < N; i++) e[i].index = kv_of(LIT("k"), v, VMAX);
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_MAPPED_RANGE;
    m.flags = R;
    m.u.get_mapped_range_reply.entries = e;
    m.u.get_mapped_range_reply.n_entries = N;
    rl__buf_reset(&b);
    rl__buf_append(&b, "x", 1);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    ASSERT_RC(rl__msg_frame_encode(&b, 1, &m, &why), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(b.len, 1);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "exceeds") != NULL);
    /* Unknown types and bad flags are refused by the encoder too. */
    m.type = 5;
    ASSERT_RC(rl__msg_encode(&b, &m, NULL), RL_E_INVALID_ARGUMENT);
    m.type = RL_MSG_AUTH_CHALLENGE; /* known, but a request only: no reply (m.flags is R) */
    ASSERT_RC(rl__msg_encode(&b, &m, NULL), RL_E_INVALID_ARGUMENT);
    m.type = RL_MSG_RESERVED_ADMIN_FIRST + 3; /* 33: reserved, not a message */
    ASSERT_RC(rl__msg_encode(&b, &m, NULL), RL_E_INVALID_ARGUMENT);
    m.type = RL_MSG_GET;
    m.flags = RL_FRAME_ERROR;
    ASSERT_RC(rl__msg_encode(&b, &m, NULL), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(b.len, 1);
    rl__buf_release(&b);
    rl__arena_release(&a);
}

/* ---- net_3: damaged input ---------------------------------------------------------------- */

/* net_3_1: every payload cut at every length before its end, or with a byte after it, is
 * refused (malformed, never a crash or another code). */
TEST(net_3_1_truncation) {
    rl_arena a, d_arena;
    rl_buf b;
    rl__arena_init(&a, 0);
    rl__arena_init(&d_arena, 0);
    rl__buf_init(&b);
    for (int k = 0; k < N_KINDS; k++) {
        for (int v = V_TYPICAL; v <= V_EMPTY; v++) {
            rl__msg m, d;
            sample(k, v, &a, &m);
            encode_into(&b, &m);
            /* An exact copy of the right size, so a read past len is caught by ASan. */
            for (size_t len = 0; len < b.len; len++) {
                uint8_t *cut = len ? malloc(len) : NULL;
                if (len) memcpy(cut, b.data, len);
                rl__errdetail why;
                rl__errdetail_init(&why, NULL);
                int rc = rl__msg_decode(m.type, m.flags, cut, len, &d_arena, &d, &why);
                if (rc != RL_E_MALFORMED_FRAME)
                    fail_msg("%s cut to %zu of %zu bytes: %s", KINDS[k].name, len, b.len, rl_error_name(rc));
                ASSERT_TRUE(rl__errdetail_get(&why)[0] != 0);
                free(cut);
                rl__arena_reset(&d_arena);
            }
            rl__buf_append_byte(&b, 0);
            rl__errdetail why;
            rl__errdetail_init(&why, NULL);
            ASSERT_RC(rl__msg_decode(m.type, m.flags, b.data, b.len, &d_arena, &d, &why), RL_E_MALFORMED_FRAME);
            ASSERT_TRUE(strstr(rl__errdetail_get(&why), "trailing") != NULL);
        }
    }
    rl__buf_release(&b);
    rl__arena_release(&a);
    rl__arena_release(&d_arena);
}

/* Damage b in place: 1-3 random edits (bit flip, byte set, insert, delete, a u32 overwritten
 * with an interesting value). */
static void damage(rl_buf *b, uint64_t *rng) {
    static const uint32_t interesting[] = {0,     1,      2,      0x7f,       0xff,        0x100,       10001,
                                           10002, 100000, 100001, 0x7fffffff, 0x80000000u, 0xfffffffeu, 0xffffffffu};
    int edits = 1 + (int)rl_test_rand_below(rng, 3);
    for (int e = 0; e < edits; e++) {
        size_t n = b->len;
        uint64_t op = rl_test_rand_below(rng, 5);
        if (n == 0) op = 2;
        size_t at = n ? (size_t)rl_test_rand_below(rng, n) : 0;
        if (op == 0) {
            b->data[at] ^= (uint8_t)(1u << rl_test_rand_below(rng, 8));
        } else if (op == 1) {
            b->data[at] = (uint8_t)rl_test_rand(rng);
        } else if (op == 2) {
            size_t pos = (size_t)rl_test_rand_below(rng, n + 1);
            rl__buf_append_byte(b, 0);
            memmove(b->data + pos + 1, b->data + pos, n - pos);
            b->data[pos] = (uint8_t)rl_test_rand(rng);
        } else if (op == 3) {
            memmove(b->data + at, b->data + at + 1, n - at - 1);
            rl__buf_truncate(b, n - 1);
        } else if (n >= 4) {
            size_t pos = (size_t)rl_test_rand_below(rng, n - 3);
            uint32_t v = interesting[rl_test_rand_below(rng, sizeof interesting / sizeof interesting[0])];
            for (int i = 0; i < 4; i++) b->data[pos + i] = (uint8_t)(v >> (8 * i));
        }
    }
}

/* net_3_2 (randomized, seeded): damaged encodings either fail as malformed (HELLO, AUTH_CHALLENGE
 * and the AUTH request: or as incompatible) or decode to a struct that re-encodes to exactly the
 * damaged bytes. */
TEST(net_3_2_random_damage) {
    uint64_t rng = rl_test_seed();
    rl_arena a, d_arena;
    rl_buf b, again;
    rl__arena_init(&a, 0);
    rl__arena_init(&d_arena, 0);
    rl__buf_init(&b);
    rl__buf_init(&again);
    long accepted = 0, refused = 0;
    for (int iter = 0; iter < 200000; iter++) {
        int k = (int)rl_test_rand_below(&rng, N_KINDS);
        int v = (int)rl_test_rand_below(&rng, 2);
        rl__msg m, d;
        rl__arena_reset(&a);
        sample(k, v, &a, &m);
        encode_into(&b, &m);
        damage(&b, &rng);
        uint8_t *copy = malloc(b.len ? b.len : 1);
        memcpy(copy, b.data, b.len);
        rl__arena_reset(&d_arena);
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        int rc = rl__msg_decode(m.type, m.flags, copy, b.len, &d_arena, &d, &why);
        if (rc == RL_OK) {
            accepted++;
            rl__buf_reset(&again);
            int erc = rl__msg_encode(&again, &d, &why);
            if (erc != RL_OK)
                fail_msg("iter %d %s: decoded but does not encode: %s", iter, KINDS[k].name, rl__errdetail_get(&why));
            if (again.len != b.len || memcmp(again.data, copy, b.len) != 0)
                fail_msg("iter %d %s: decoded but re-encodes differently (%zu vs %zu bytes)", iter, KINDS[k].name,
                         again.len, b.len);
        } else {
            refused++;
            int versioned =
                m.type == RL_MSG_HELLO || m.type == RL_MSG_AUTH_CHALLENGE || (m.type == RL_MSG_AUTH && m.flags == 0);
            if (!(rc == RL_E_MALFORMED_FRAME || (rc == RL_E_INCOMPATIBLE_PROTOCOL_VERSION && versioned)))
                fail_msg("iter %d %s: %s", iter, KINDS[k].name, rl_error_name(rc));
            ASSERT_TRUE(rl__errdetail_get(&why)[0] != 0);
        }
        free(copy);
    }
    print_message("net_3_2: %ld damaged encodings accepted (and canonical), %ld refused\n", accepted, refused);
    ASSERT_TRUE(accepted > 0 && refused > 0);
    rl__buf_release(&b);
    rl__buf_release(&again);
    rl__arena_release(&a);
    rl__arena_release(&d_arena);
}

/* Bytes allocated by the calling thread while decoding p as (type, flags) into a fresh arena;
 * *rc gets the result. */
static uint64_t decode_bytes(uint16_t type, uint16_t flags, const uint8_t *p, size_t len, int *rc) {
    rl_arena a;
    rl__msg d;
    rl_alloc_stats st;
    rl__arena_init(&a, 0);
    rl_alloc_reset_stats();
    *rc = rl__msg_decode(type, flags, p, len, &a, &d, NULL);
    rl_alloc_get_stats(&st);
    rl__arena_release(&a);
    return st.bytes;
}

/* net_3_3: a count of ~4 billion in a small payload fails before any allocation, in every
 * counted field; and a payload filled with the smallest possible elements allocates at most
 * about 4.2 x its length. */
TEST(net_3_3_huge_counts) {
    /* Each case: type, flags, the bytes before the count (zeros are valid there), the count is
     * 0xffffffff followed by 16 zero bytes. */
    static const struct {
        uint16_t type, flags;
        size_t prefix;
        const char *field;
    } cases[] = {
        {RL_MSG_COMMIT, 0, 8, "reads"},          {RL_MSG_COMMIT, 0, 12, "writes"},
        {RL_MSG_COMMIT, 0, 16, "mutations"},     {RL_MSG_GET_SHARD_MAP, R, 8, "servers"},
        {RL_MSG_GET_SHARD_MAP, R, 12, "shards"}, {RL_MSG_REGISTER_STORAGE, R, 8, "ranges"},
        {RL_MSG_PEEK, R, 8, "versions"},         {RL_MSG_PEEK, R, 12, "changes"},
        {RL_MSG_GET_RANGE, R, 0, "kvs"},         {RL_MSG_GET_MAPPED_RANGE, R, 0, "entries"},
        {RL_MSG_GET_MULTI, 0, 8, "items"},       {RL_MSG_GET_MULTI, R, 0, "results"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t p[64];
        memset(p, 0, sizeof p);
        memset(p + cases[i].prefix, 0xff, 4);
        for (uint32_t count = 0xffffffffu; count >= 0x10000u; count >>= 4) {
            for (int j = 0; j < 4; j++) p[cases[i].prefix + j] = (uint8_t)(count >> (8 * j));
            int rc;
            rl__errdetail why;
            rl__errdetail_init(&why, NULL);
            rl_arena a;
            rl__msg d;
            rl__arena_init(&a, 0);
            rl_alloc_reset_stats();
            rc = rl__msg_decode(cases[i].type, cases[i].flags, p, cases[i].prefix + 4 + 16, &a, &d, &why);
            rl_alloc_stats st;
            rl_alloc_get_stats(&st);
            rl__arena_release(&a);
            ASSERT_RC(rc, RL_E_MALFORMED_FRAME);
            ASSERT_EQ(st.allocs, 0);
            if (!strstr(rl__errdetail_get(&why), cases[i].field))
                fail_msg("'%s' does not name %s", rl__errdetail_get(&why), cases[i].field);
        }
    }
    /* Nested counts: a mapped entry's kvs, a peek version's mutations, a shard's team, an item
     * result's kvs. */
    {
        uint8_t p[64];
        memset(p, 0, sizeof p);
        p[0] = 1;                           /* one entry */
        memset(p + 4 + 8 + 1 + 8, 0xff, 4); /* after index kv, is_range, begin, end: n_kvs */
        int rc;
        ASSERT_TRUE(decode_bytes(RL_MSG_GET_MAPPED_RANGE, R, p, 64, &rc) < 16384);
        ASSERT_RC(rc, RL_E_MALFORMED_FRAME);
        memset(p, 0, sizeof p);
        p[8] = 1;                    /* one version */
        memset(p + 12 + 8, 0xff, 4); /* its n_muts */
        ASSERT_TRUE(decode_bytes(RL_MSG_PEEK, R, p, 64, &rc) < 16384);
        ASSERT_RC(rc, RL_E_MALFORMED_FRAME);
        memset(p, 0, sizeof p);
        p[0] = 1;                   /* one result */
        memset(p + 4 + 4, 0xff, 4); /* its n_kvs */
        ASSERT_TRUE(decode_bytes(RL_MSG_GET_MULTI, R, p, 64, &rc) < 16384);
        ASSERT_RC(rc, RL_E_MALFORMED_FRAME);
    }
    /* The densest legal payloads: counts exactly filled with the smallest elements. */
    enum { LEN = 1 << 20 };
    uint8_t *p = calloc(LEN + 64, 1);
    static const struct {
        uint16_t type, flags;
        size_t prefix, min_each;
    } dense[] = {
        {RL_MSG_GET_RANGE, R, 0, 8},         /* empty kvs */
        {RL_MSG_COMMIT, 0, 16, 9},           /* 0 reads, 0 writes, SET "" "" */
        {RL_MSG_GET_MULTI, R, 0, 9},         /* results without rows */
        {RL_MSG_GET_MAPPED_RANGE, R, 0, 23}, /* empty point entries */
        {RL_MSG_REGISTER_STORAGE, R, 8, 8},  /* "" .. "" ranges are empty: refused later */
    };
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        memset(p, 0, LEN + 64);
        size_t tail = dense[i].type == RL_MSG_GET_RANGE || dense[i].type == RL_MSG_GET_MAPPED_RANGE
                          ? 2 + 12 + (dense[i].type == RL_MSG_GET_MAPPED_RANGE ? 24 + 20 + 4 : 0)
                          : 0;
        uint32_t n = (uint32_t)((LEN - dense[i].prefix - 4 - tail) / dense[i].min_each);
        for (int j = 0; j < 4; j++) p[dense[i].prefix + j] = (uint8_t)(n >> (8 * j));
        size_t len = dense[i].prefix + 4 + (size_t)n * dense[i].min_each + tail;
        int rc;
        uint64_t bytes = decode_bytes(dense[i].type, dense[i].flags, p, len, &rc);
        if (dense[i].type == RL_MSG_REGISTER_STORAGE) ASSERT_RC(rc, RL_E_MALFORMED_FRAME);
        else ASSERT_OK(rc);
        if (bytes > len * 5 + 65536)
            fail_msg("type %u: %llu bytes allocated for a %zu-byte payload", dense[i].type, (unsigned long long)bytes,
                     len);
    }
    free(p);
}

/* ---- net_4: field rules ------------------------------------------------------------------ */

/* A fresh typical sample of (type, flags) in *m. */
static void typical(rl_arena *a, uint16_t type, uint16_t flags, rl__msg *m) {
    int k = kind_of(type, flags);
    assert_true(k >= 0);
    sample(k, V_TYPICAL, a, m);
}

/* The first len bytes of p (decoded from an exact copy, so a read past them is caught by ASan) are
 * refused as (type, flags): malformed, with a reason containing want. */
static void expect_refused(uint16_t type, uint16_t flags, const uint8_t *p, size_t len, const char *want) {
    uint8_t *c = malloc(len ? len : 1);
    assert_non_null(c);
    if (len) memcpy(c, p, len);
    rl_arena a;
    rl__msg d;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    rl__arena_init(&a, 0);
    int rc = rl__msg_decode(type, flags, len ? c : NULL, len, &a, &d, &why);
    if (rc != RL_E_MALFORMED_FRAME || !strstr(rl__errdetail_get(&why), want))
        fail_msg("type %u flags %u, %zu bytes: %s '%s', expected malformed_frame '%s'", type, flags, len,
                 rl_error_name(rc), rl__errdetail_get(&why), want);
    free(c);
    rl__arena_release(&a);
}

/* net_4_1: every byte-string limit at the limit is accepted and one past it refused; the
 * handshake's fixed-length fields take exactly their length. */
TEST(net_4_1_length_limits) {
    rl_arena a;
    rl__arena_init(&a, 0);
    const uint8_t *big = fill(&a, RL_PROTO_MAX_JSON + 1, 'x');
    rl__msg m;
#define AT_LIMIT(type, flags, ptr, len, limit, field) \
    do {                                              \
        typical(&a, type, flags, &m);                 \
        ptr = big, len = (limit);                     \
        expect_good(&m);                              \
        typical(&a, type, flags, &m);                 \
        ptr = big, len = (limit) + 1;                 \
        expect_bad(&m, field);                        \
    } while (0)
    AT_LIMIT(RL_MSG_HELLO, 0, m.u.hello_req.host, m.u.hello_req.host_len, 4096, "host");
    AT_LIMIT(RL_MSG_HELLO, R, m.u.hello_reply.host, m.u.hello_reply.host_len, 4096, "host");
    AT_LIMIT(RL_MSG_PING, 0, m.u.ping_req.payload, m.u.ping_req.payload_len, 4096, "payload");
    AT_LIMIT(RL_MSG_PING, R, m.u.ping_reply.payload, m.u.ping_reply.payload_len, 4096, "payload");
    AT_LIMIT(RL_MSG_GET, E, m.u.error.message, m.u.error.message_len, 4096, "message");
    AT_LIMIT(RL_MSG_STATUS, R, m.u.status_reply.json, m.u.status_reply.json_len, 16u << 20, "json");
    AT_LIMIT(RL_MSG_GET, 0, m.u.get_req.key, m.u.get_req.key_len, 10001, "key");
    AT_LIMIT(RL_MSG_GET, R, m.u.get_reply.value, m.u.get_reply.value_len, 100000, "value");
    AT_LIMIT(RL_MSG_GET_KEY, 0, m.u.get_key_req.sel.key, m.u.get_key_req.sel.key_len, 10001, "sel.key");
    AT_LIMIT(RL_MSG_GET_KEY, R, m.u.get_key_reply.sel.key, m.u.get_key_reply.sel.key_len, 10001, "sel.key");
    AT_LIMIT(RL_MSG_GET_RANGE, 0, m.u.get_range_req.begin.key, m.u.get_range_req.begin.key_len, 10001, "begin.key");
    AT_LIMIT(RL_MSG_GET_RANGE, 0, m.u.get_range_req.end.key, m.u.get_range_req.end.key_len, 10001, "end.key");
    AT_LIMIT(RL_MSG_GET_RANGE, R, m.u.get_range_reply.read_through, m.u.get_range_reply.read_through_len, 10001,
             "read_through");
    AT_LIMIT(RL_MSG_GET_RANGE, R, m.u.get_range_reply.resolved_begin, m.u.get_range_reply.resolved_begin_len, 10001,
             "resolved_begin");
    AT_LIMIT(RL_MSG_GET_RANGE, R, m.u.get_range_reply.resolved_end, m.u.get_range_reply.resolved_end_len, 10001,
             "resolved_end");
    AT_LIMIT(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.mapper, m.u.get_mapped_range_req.mapper_len, 10000,
             "mapper");
    AT_LIMIT(RL_MSG_GET_MAPPED_RANGE, R, m.u.get_mapped_range_reply.read_through,
             m.u.get_mapped_range_reply.read_through_len, 10001, "read_through");
    AT_LIMIT(RL_MSG_REGISTER_STORAGE, 0, m.u.register_storage_req.host, m.u.register_storage_req.host_len, 4096,
             "host");

    /* Inside arrays: the element's fields (the samples' arrays live in the arena: patch them). */
#define AT_LIMIT_ARR(type, flags, arr_t, arr, idx, ptr, len, limit, field) \
    do {                                                                   \
        for (int over = 0; over <= 1; over++) {                            \
            typical(&a, type, flags, &m);                                  \
            arr_t *x_ = (arr_t *)(arr);                                    \
            x_[idx].ptr = big, x_[idx].len = (limit) + (uint32_t)over;     \
            if (over) expect_bad(&m, field);                               \
            else expect_good(&m);                                          \
        }                                                                  \
    } while (0)
    /* Range ends (the samples' range ends sort after any run of 'x' begins? keep begin <= end:
     * patch the end of [a, b) to 'x'... which is > "a"). */
    AT_LIMIT_ARR(RL_MSG_COMMIT, 0, rl__keyrange, m.u.commit_req.reads, 0, end, end_len, 10001, "reads[0].end");
    AT_LIMIT_ARR(RL_MSG_GET_RANGE, R, rl_keyvalue, m.u.get_range_reply.kvs, 1, key, key_len, 10001, "kvs[1].key");
    AT_LIMIT_ARR(RL_MSG_GET_RANGE, R, rl_keyvalue, m.u.get_range_reply.kvs, 2, value, value_len, 100000,
                 "kvs[2].value");
    AT_LIMIT_ARR(RL_MSG_GET_MULTI, R, rl_keyvalue, m.u.get_multi_reply.results[0].kvs, 0, value, value_len, 100000,
                 "results[0].kvs[0].value");
    AT_LIMIT_ARR(RL_MSG_GET_MAPPED_RANGE, R, rl_keyvalue, m.u.get_mapped_range_reply.entries[0].kvs, 1, key, key_len,
                 10001, "entries[0].kvs[1].key");
    AT_LIMIT_ARR(RL_MSG_GET_MAPPED_RANGE, R, rl_mapped_keyvalue, m.u.get_mapped_range_reply.entries, 2, index.value,
                 index.value_len, 100000, "entries[2].index.value");
    AT_LIMIT_ARR(RL_MSG_GET_MAPPED_RANGE, R, rl_mapped_keyvalue, m.u.get_mapped_range_reply.entries, 1, end, end_len,
                 10001, "entries[1].end");
    AT_LIMIT_ARR(RL_MSG_GET_SHARD_MAP, R, rl__msg_server, m.u.get_shard_map_reply.servers, 2, host, host_len, 4096,
                 "servers[2].host");
    AT_LIMIT_ARR(RL_MSG_GET_MULTI, 0, rl__msg_read_item, m.u.get_multi_req.items, 1, end, end_len, 10001,
                 "items[1].end");
    AT_LIMIT_ARR(RL_MSG_PEEK, R, rl__mutation, m.u.peek_reply.versions[0].muts, 0, p2, len2, 100004,
                 "versions[0].mutations[0].p2");

    /* Mutation parameters by type: p1 10,001 (10,005 for SET_VERSIONSTAMPED_KEY), p2 100,004
     * (CLEAR_RANGE: a key, 10,001; CLEAR: nothing). */
    AT_LIMIT_ARR(RL_MSG_COMMIT, 0, rl__mutation, m.u.commit_req.muts, 0, p1, len1, 10001, "mutations[0].p1");
    AT_LIMIT_ARR(RL_MSG_COMMIT, 0, rl__mutation, m.u.commit_req.muts, 0, p2, len2, 100004, "mutations[0].p2");
    AT_LIMIT_ARR(RL_MSG_COMMIT, 0, rl__mutation, m.u.commit_req.muts, 3, p1, len1, 10005, "mutations[3].p1");
    AT_LIMIT_ARR(RL_MSG_COMMIT, 0, rl__mutation, m.u.commit_req.muts, 1, p2, len2, 10001, "mutations[1].p2");
    AT_LIMIT_ARR(RL_MSG_COMMIT, 0, rl__mutation, m.u.commit_req.muts, 4, p2, len2, 0, "mutations[4].p2");
    {
        /* SET_VERSIONSTAMPED_VALUE takes the same 100,004 as every other p2. */
        typical(&a, RL_MSG_COMMIT, 0, &m);
        rl__mutation *mu = (rl__mutation *)m.u.commit_req.muts;
        mu[0] = mut_of(RL_MUT_SET_VERSIONSTAMPED_VALUE, LIT("k"), big, 100004);
        expect_good(&m);
        mu[0].len2 = 100005;
        expect_bad(&m, "mutations[0].p2");
    }

    /* The handshake's nonces (16 bytes) and proofs (32 bytes) have no length prefix: a payload one
     * byte short of any of them is truncated there (the field named), one byte more is trailing. */
    {
        rl_buf b;
        rl__buf_init(&b);
        typical(&a, RL_MSG_AUTH_CHALLENGE, 0, &m);
        encode_into(&b, &m);
        ASSERT_EQ(b.len, 4 + 4 + 16);
        for (size_t len = 8; len < 24; len++)
            expect_refused(RL_MSG_AUTH_CHALLENGE, 0, b.data, len, "AUTH_CHALLENGE: nonce is truncated");
        rl__buf_append_byte(&b, 0);
        expect_refused(RL_MSG_AUTH_CHALLENGE, 0, b.data, b.len, "AUTH_CHALLENGE: has 1 trailing bytes");

        typical(&a, RL_MSG_AUTH, 0, &m);
        encode_into(&b, &m);
        ASSERT_EQ(b.len, 4 + 4 + 1 + 16 + 32);
        expect_refused(RL_MSG_AUTH, 0, b.data, 8, "AUTH request: auth_class is truncated");
        for (size_t len = 9; len < 25; len++)
            expect_refused(RL_MSG_AUTH, 0, b.data, len, "AUTH request: nonce is truncated");
        for (size_t len = 25; len < 57; len++)
            expect_refused(RL_MSG_AUTH, 0, b.data, len, "AUTH request: proof is truncated");
        rl__buf_append(&b, "xy", 2);
        expect_refused(RL_MSG_AUTH, 0, b.data, b.len, "AUTH request: has 2 trailing bytes");

        typical(&a, RL_MSG_AUTH, R, &m);
        encode_into(&b, &m);
        ASSERT_EQ(b.len, 32);
        for (size_t len = 0; len < 32; len++)
            expect_refused(RL_MSG_AUTH, R, b.data, len, "AUTH reply: proof is truncated");
        rl__buf_append_byte(&b, 0);
        expect_refused(RL_MSG_AUTH, R, b.data, b.len, "AUTH reply: has 1 trailing bytes");
        rl__buf_release(&b);
    }
    rl__arena_release(&a);
#undef AT_LIMIT
#undef AT_LIMIT_ARR
}

/* net_4_2: the COMMIT size rule: mutations plus ranges at exactly RL_TXN_SIZE_LIMIT bytes pass,
 * one byte more is refused. */
TEST(net_4_2_commit_size_limit) {
    rl_arena a;
    rl__arena_init(&a, 0);
    const uint8_t *v = fill(&a, RL_PROTO_MAX_MUT_PARAM, 'v');
    /* 99 SETs of "" -> 100,004 bytes = 9,900,396; one range [a, x...) makes up the rest. */
    enum { N = 99 };
    rl__mutation *mu = alloc0(&a, N * sizeof *mu);
    for (int i = 0; i < N; i++) mu[i] = mut_of(RL_MUT_SET, NULL, 0, v, RL_PROTO_MAX_MUT_PARAM);
    uint32_t rest = (uint32_t)(RL_TXN_SIZE_LIMIT - (size_t)N * RL_PROTO_MAX_MUT_PARAM); /* 99,604 */
    rl__keyrange *r = alloc0(&a, 20 * sizeof *r);
    uint32_t n_r = 0;
    const uint8_t *xs = fill(&a, KMAX, 'x');
    while (rest > 0) { /* ranges ["", x^len) of at most 10,001 bytes */
        uint32_t l = rest > KMAX ? KMAX : rest;
        r[n_r++] = range_of(LIT(""), xs, l);
        rest -= l;
    }
    rl__msg m;
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_COMMIT;
    m.u.commit_req = (rl__msg_commit_req){1, r, n_r, NULL, 0, mu, N};
    expect_good(&m);
    rl_buf b;
    rl__buf_init(&b);
    encode_into(&b, &m);
    ASSERT_TRUE(b.len > RL_TXN_SIZE_LIMIT && b.len < RL_TXN_SIZE_LIMIT + 2000);
    r[0].begin = (const uint8_t *)"";
    r[0].begin_len = 0;
    mu[0].p1 = (const uint8_t *)"k";
    mu[0].len1 = 1;
    expect_bad(&m, "more than 10000000");
    rl__buf_release(&b);
    rl__arena_release(&a);
}

/* net_4_3: enums, booleans, signs and the special integer rules. */
TEST(net_4_3_enums_and_integers) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg m;
#define BAD(type, flags, stmt, field) \
    do {                              \
        typical(&a, type, flags, &m); \
        stmt;                         \
        expect_bad(&m, field);        \
    } while (0)
#define GOOD(type, flags, stmt)       \
    do {                              \
        typical(&a, type, flags, &m); \
        stmt;                         \
        expect_good(&m);              \
    } while (0)
    BAD(RL_MSG_HELLO, 0, m.u.hello_req.role = 4, "role");
    GOOD(RL_MSG_HELLO, 0, m.u.hello_req.role = RL_ROLE_ADMIN);
    BAD(RL_MSG_HELLO, 0, (m.u.hello_req.role = RL_ROLE_CLIENT, m.u.hello_req.id = 5), "id");
    BAD(RL_MSG_HELLO, R, m.u.hello_reply.role = 9, "role");
    BAD(RL_MSG_HELLO, R, (m.u.hello_reply.role = RL_ROLE_CLIENT, m.u.hello_reply.id = 1), "id");
    BAD(RL_MSG_AUTH, 0, m.u.auth_req.auth_class = RL_AUTH_NONE, "auth_class");
    BAD(RL_MSG_AUTH, 0, m.u.auth_req.auth_class = 3, "auth_class");
    BAD(RL_MSG_AUTH, 0, m.u.auth_req.auth_class = 255, "auth_class has unknown value 255");
    GOOD(RL_MSG_AUTH, 0, m.u.auth_req.auth_class = RL_AUTH_CLIENT);
    GOOD(RL_MSG_AUTH, 0, m.u.auth_req.auth_class = RL_AUTH_MEMBER);
    /* Nonces and proofs are opaque bytes: any value goes. */
    GOOD(RL_MSG_AUTH, 0, (memset(m.u.auth_req.nonce, 0, 16), memset(m.u.auth_req.proof, 0xff, 32)));
    GOOD(RL_MSG_AUTH_CHALLENGE, 0, memset(m.u.auth_challenge.nonce, 0x80, 16));
    GOOD(RL_MSG_AUTH, R, memset(m.u.auth_reply.proof, 0, 32));
    BAD(RL_MSG_GET, E, m.u.error.code = 0, "code");
    BAD(RL_MSG_GET, E, m.u.error.code = -1, "code");
    GOOD(RL_MSG_GET, E, m.u.error.code = 999999);
    BAD(RL_MSG_GET_READ_VERSION, 0, m.u.get_read_version_req.flags = 1, "flags");
    BAD(RL_MSG_GET_READ_VERSION, 0, m.u.get_read_version_req.flags = 0x80000000u, "flags");
    BAD(RL_MSG_COMMIT, R, m.u.commit_reply.result = -1, "result");
    GOOD(RL_MSG_COMMIT, R, m.u.commit_reply.result = RL_E_NOT_COMMITTED);
    BAD(RL_MSG_GET, R, m.u.get_reply.present = 2, "present");
    BAD(RL_MSG_GET, R, m.u.get_reply.present = 0, "value");
    GOOD(RL_MSG_GET, R, (m.u.get_reply.present = 0, m.u.get_reply.value_len = 0));
    GOOD(RL_MSG_GET, R, m.u.get_reply.value_len = 0); /* present and empty */
    BAD(RL_MSG_GET_KEY, 0, m.u.get_key_req.sel.or_equal = 2, "sel.or_equal");
    BAD(RL_MSG_GET_KEY, 0, m.u.get_key_req.sel.or_equal = -1, "sel.or_equal");
    BAD(RL_MSG_GET_KEY, 0, m.u.get_key_req.sel.offset = INT32_MIN, "sel.offset");
    GOOD(RL_MSG_GET_KEY, 0, m.u.get_key_req.sel.offset = INT32_MIN + 1);
    GOOD(RL_MSG_GET_KEY, 0, m.u.get_key_req.sel.offset = INT32_MAX);
    BAD(RL_MSG_GET_KEY, R, m.u.get_key_reply.resolved = 2, "resolved");
    BAD(RL_MSG_GET_KEY, R, m.u.get_key_reply.sel.offset = 2, "sel");
    BAD(RL_MSG_GET_KEY, R, m.u.get_key_reply.sel.or_equal = 1, "sel");
    GOOD(RL_MSG_GET_KEY, R, (m.u.get_key_reply.resolved = 0, m.u.get_key_reply.sel.offset = -7));
    BAD(RL_MSG_GET_RANGE, 0, m.u.get_range_req.limit = -1, "limit");
    GOOD(RL_MSG_GET_RANGE, 0, m.u.get_range_req.limit = 0);
    BAD(RL_MSG_GET_RANGE, 0, m.u.get_range_req.target_bytes = -1, "target_bytes");
    BAD(RL_MSG_GET_RANGE, 0, m.u.get_range_req.target_bytes = INT64_MIN, "target_bytes");
    BAD(RL_MSG_GET_RANGE, 0, m.u.get_range_req.reverse = 2, "reverse");
    BAD(RL_MSG_GET_RANGE, 0, m.u.get_range_req.end.offset = INT32_MIN, "end.offset");
    BAD(RL_MSG_GET_RANGE, R, m.u.get_range_reply.more = 2, "more");
    BAD(RL_MSG_GET_RANGE, R, m.u.get_range_reply.status = 2, "status");
    BAD(RL_MSG_GET_RANGE, R, m.u.get_range_reply.status = RL_RANGE_SELECTOR_UNRESOLVED, "status");
    BAD(RL_MSG_GET_RANGE, R, (m.u.get_range_reply.status = RL_RANGE_SELECTOR_UNRESOLVED, m.u.get_range_reply.n_kvs = 0),
        "status");
    GOOD(RL_MSG_GET_RANGE, R,
         (m.u.get_range_reply.status = RL_RANGE_SELECTOR_UNRESOLVED, m.u.get_range_reply.n_kvs = 0,
          m.u.get_range_reply.more = 0));
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.strategy = 3, "strategy");
    GOOD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.strategy = RL_FETCH_DEFAULT);
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.batch = RL_PROTO_MAX_BATCH + 1, "batch");
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.limit = -5, "limit");
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.secondary_row_limit = -1, "secondary_row_limit");
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.secondary_byte_limit = -1, "secondary_byte_limit");
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.reverse = 9, "reverse");
    BAD(RL_MSG_GET_MAPPED_RANGE, R, m.u.get_mapped_range_reply.status = 5, "status");
    BAD(RL_MSG_GET_MAPPED_RANGE, R, m.u.get_mapped_range_reply.status = 1, "status");
    BAD(RL_MSG_GET_MAPPED_RANGE, R, ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[0].is_range = 4,
        "entries[0].is_range");
    /* RL_MAPPED_OMIT_INDEX: the request's bit, an omitted entry (empty index, its length carried). */
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.omit_index = 8, "omit_index");
    GOOD(RL_MSG_GET_MAPPED_RANGE, 0, (m.u.get_mapped_range_req.omit_index = 1, m.u.get_mapped_range_req.reverse = 1));
    BAD(RL_MSG_GET_MAPPED_STREAM, 0, m.u.get_mapped_stream_req.r.omit_index = 5, "omit_index");
    GOOD(RL_MSG_GET_MAPPED_STREAM, 0, m.u.get_mapped_stream_req.r.omit_index = 1);
    /* RL_MAPPED_DEFER_REMOTE: bit 2 of the same byte. */
    BAD(RL_MSG_GET_MAPPED_RANGE, 0, m.u.get_mapped_range_req.defer_remote = 2, "defer_remote");
    GOOD(RL_MSG_GET_MAPPED_RANGE, 0, (m.u.get_mapped_range_req.defer_remote = 1, m.u.get_mapped_range_req.reverse = 1));
    GOOD(RL_MSG_GET_MAPPED_STREAM, 0,
         (m.u.get_mapped_stream_req.r.defer_remote = 1, m.u.get_mapped_stream_req.r.omit_index = 1));
    BAD(RL_MSG_GET_MAPPED_RANGE, R, ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[1].index_omitted = 2,
        "index_omitted");
    BAD(RL_MSG_GET_MAPPED_RANGE, R, ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[0].index_omitted = 1,
        "entries[0].index is omitted but not empty");
    GOOD(RL_MSG_GET_MAPPED_RANGE, R, omit_entry((rl_mapped_keyvalue *)&m.u.get_mapped_range_reply.entries[1], 9));
    GOOD(RL_MSG_MAPPED_CHUNK, 0, omit_entry((rl_mapped_keyvalue *)&m.u.mapped_chunk.entries[0], 70000));
    BAD(RL_MSG_GET_MAPPED_RANGE, R, ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[1].more = 2,
        "entries[1].more");
    BAD(RL_MSG_GET_MAPPED_RANGE, R, ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[2].served_locally = 3,
        "entries[2].served_locally");
    /* A point entry has at most one row. */
    BAD(RL_MSG_GET_MAPPED_RANGE, R, ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[0].is_range = 0,
        "entries[0].kvs");
    BAD(RL_MSG_GET_MULTI, 0, ((rl__msg_read_item *)m.u.get_multi_req.items)[0].is_range = 2, "items[0].is_range");
    BAD(RL_MSG_GET_METRICS, 0, m.u.get_metrics_req.op = 3, "op");
    BAD(RL_MSG_GET_METRICS, 0, m.u.get_metrics_req.chunk = 0, "chunk");
    BAD(RL_MSG_GET_METRICS, 0, m.u.get_metrics_req.range = range_of(LIT("a"), LIT("a")), "range");
    BAD(RL_MSG_GET_METRICS, R, ((rl_slice *)m.u.get_metrics_reply.cuts)[1].data = (const uint8_t *)"a", "cuts[1]");
    BAD(RL_MSG_GET_METRICS, R, m.u.get_metrics_reply.bytes = -1, "bytes");
    BAD(RL_MSG_GET_MULTI, 0, ((rl__msg_read_item *)m.u.get_multi_req.items)[0].row_limit = -1, "items[0].row_limit");
    BAD(RL_MSG_GET_MULTI, 0, ((rl__msg_read_item *)m.u.get_multi_req.items)[1].byte_limit = -1, "items[1].byte_limit");
    BAD(RL_MSG_GET_MULTI, R, ((rl__msg_read_result *)m.u.get_multi_reply.results)[1].error = -3, "results[1].error");
    BAD(RL_MSG_GET_MULTI, R, ((rl__msg_read_result *)m.u.get_multi_reply.results)[0].error = 1009, "results[0].error");
    BAD(RL_MSG_GET_MULTI, R, ((rl__msg_read_result *)m.u.get_multi_reply.results)[2].more = 2, "results[2].more");
    BAD(RL_MSG_GET_MULTI, R, (((rl__msg_read_result *)m.u.get_multi_reply.results)[1].more = 1), "results[1].error");
    BAD(RL_MSG_PEEK, R, ((rl__msg_shard_change *)m.u.peek_reply.changes)[0].kind = 0, "changes[0].kind");
    BAD(RL_MSG_PEEK, R, ((rl__msg_shard_change *)m.u.peek_reply.changes)[1].kind = 3, "changes[1].kind");
    BAD(RL_MSG_GET_SHARD_MAP, R, ((rl__msg_server *)m.u.get_shard_map_reply.servers)[0].role = RL_ROLE_CLIENT,
        "servers[0].role");
    BAD(RL_MSG_GET_SHARD_MAP, R, ((rl__msg_server *)m.u.get_shard_map_reply.servers)[1].role = RL_ROLE_ADMIN,
        "servers[1].role");
    BAD(RL_MSG_GET_SHARD_MAP, R, ((rl__msg_server *)m.u.get_shard_map_reply.servers)[1].healthy = 2,
        "servers[1].healthy");
    BAD(RL_MSG_GET_SHARD_MAP, R, ((rl__msg_server *)m.u.get_shard_map_reply.servers)[2].port = 0, "servers[2].port");
    BAD(RL_MSG_REGISTER_STORAGE, 0, m.u.register_storage_req.port = 0, "port");
    /* Mutation types: every rl__mutation_type in COMMIT; nothing else; no versionstamps in PEEK. */
    for (int t = 0; t < 256; t++) {
        static const int known[] = {0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 20};
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= known[i] == t;
        typical(&a, RL_MSG_COMMIT, 0, &m);
        rl__mutation *mu = (rl__mutation *)m.u.commit_req.muts;
        mu[0] = mut_of(t, LIT("k"), t == RL_MUT_CLEAR ? NULL : (const uint8_t *)"z", t == RL_MUT_CLEAR ? 0 : 1);
        if (ok) expect_good(&m);
        else expect_bad(&m, "mutations[0].type");
        typical(&a, RL_MSG_PEEK, R, &m);
        rl__msg_peek_version *pv = (rl__msg_peek_version *)m.u.peek_reply.versions;
        mu = (rl__mutation *)pv[2].muts;
        mu[0] = mut_of(t, LIT("k"), t == RL_MUT_CLEAR ? NULL : (const uint8_t *)"z", t == RL_MUT_CLEAR ? 0 : 1);
        if (ok && t != RL_MUT_SET_VERSIONSTAMPED_KEY && t != RL_MUT_SET_VERSIONSTAMPED_VALUE) expect_good(&m);
        else expect_bad(&m, "versions[2].mutations[0].type");
    }
    rl__arena_release(&a);
#undef BAD
#undef GOOD
}

/* net_4_4: ordering rules: ranges not inverted, shards sorted and contiguous with real teams,
 * server ids increasing, owned ranges sorted, peek versions increasing and bounded, addresses
 * dotted IPv4. */
TEST(net_4_4_structure_rules) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg m;
    rl__keyrange *kr;
    rl__mutation *mu;
    rl__msg_shard *sh;
    rl__msg_server *sv;
    rl__msg_peek_version *pv;
    rl__msg_shard_change *ch;
    /* COMMIT: conflict ranges and CLEAR_RANGE may be empty, not inverted. */
    typical(&a, RL_MSG_COMMIT, 0, &m);
    kr = (rl__keyrange *)m.u.commit_req.reads;
    kr[0] = range_of(LIT("b"), LIT("a"));
    expect_bad(&m, "reads[0] is inverted");
    typical(&a, RL_MSG_COMMIT, 0, &m);
    kr = (rl__keyrange *)m.u.commit_req.writes;
    kr[0] = range_of(LIT("k\0"), LIT("k"));
    expect_bad(&m, "writes[0] is inverted");
    kr[0] = range_of(LIT("k"), LIT("k"));
    expect_good(&m);
    mu = (rl__mutation *)m.u.commit_req.muts;
    mu[1] = mut_of(RL_MUT_CLEAR_RANGE, LIT("b"), LIT("a"));
    expect_bad(&m, "mutations[1] is an inverted CLEAR_RANGE");
    mu[1] = mut_of(RL_MUT_CLEAR_RANGE, LIT("b"), LIT("b"));
    expect_good(&m);

    /* GET_SHARD_MAP: contiguity, order, teams, servers. */
    typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
    sh = (rl__msg_shard *)m.u.get_shard_map_reply.shards;
    sh[1].begin = (const uint8_t *)"n"; /* gap [m, n) */
    expect_bad(&m, "shards[1].begin is not the previous shard's end");
    sh[1].begin = (const uint8_t *)"l"; /* overlap */
    expect_bad(&m, "shards[1].begin");
    typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
    sh = (rl__msg_shard *)m.u.get_shard_map_reply.shards;
    sh[0].end = (const uint8_t *)"", sh[0].end_len = 0; /* empty first shard */
    expect_bad(&m, "shards[0] is empty");
    typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
    sh = (rl__msg_shard *)m.u.get_shard_map_reply.shards;
    sh[1].end = (const uint8_t *)"a", sh[1].end_len = 1; /* inverted */
    expect_bad(&m, "shards[1] is empty or inverted");
    typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
    sh = (rl__msg_shard *)m.u.get_shard_map_reply.shards;
    sh[0].n_team = 0; /* (in the last shard the shard count's minimum catches it first) */
    expect_bad(&m, "shards[0].team has 0 members");
    sh[0].n_team = 1;
    uint32_t team17[17];
    for (int i = 0; i < 17; i++) team17[i] = (uint32_t)i + 1;
    sh[1].team = team17, sh[1].n_team = 17;
    expect_bad(&m, "shards[1].team has 17 members");
    sh[1].n_team = 16;
    expect_good(&m);
    team17[15] = 3;
    expect_bad(&m, "shards[1].team holds id 3 twice");
    typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
    sv = (rl__msg_server *)m.u.get_shard_map_reply.servers;
    sv[1].id = 1;
    expect_bad(&m, "servers[1].id");
    sv[1].id = 0;
    expect_bad(&m, "servers[1].id");
    typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
    m.u.get_shard_map_reply.n_servers = 0; /* a map without servers is structurally fine */
    expect_good(&m);

    /* A mapped reply's per-peer stats: at most RL_PROTO_MAX_PEER_STATS, distinct storage ids. */
    typical(&a, RL_MSG_GET_MAPPED_RANGE, R, &m);
    rl__msg_s2s_peer peers[RL_PROTO_MAX_PEER_STATS + 1];
    for (int i = 0; i <= RL_PROTO_MAX_PEER_STATS; i++) peers[i] = (rl__msg_s2s_peer){(uint32_t)i + 1, 1, 2, 3, 4};
    m.u.get_mapped_range_reply.stats.peer_stats = peers;
    m.u.get_mapped_range_reply.stats.n_peer_stats = RL_PROTO_MAX_PEER_STATS;
    expect_good(&m);
    m.u.get_mapped_range_reply.stats.n_peer_stats = RL_PROTO_MAX_PEER_STATS + 1;
    expect_bad(&m, "peer_stats has 65 entries");
    m.u.get_mapped_range_reply.stats.n_peer_stats = 3;
    peers[2].server_id = 2;
    expect_bad(&m, "peer_stats names server 2 twice");
    peers[2].server_id = 0;
    expect_bad(&m, "peer_stats names server 0");

    /* Addresses. */
    static const char *good_addr[] = {"0.0.0.0", "127.0.0.1", "255.255.255.255", "10.20.30.40", "1.0.10.100"};
    static const char *bad_addr[] = {"",         "1.2.3",     "1.2.3.4.5", "256.1.1.1", "01.2.3.4",  "1.2.3.4 ",
                                     " 1.2.3.4", "1..3.4",    "1.2.3.",    "a.b.c.d",   "1.2.3.4:5", "1000.1.1.1",
                                     "1.2.3.-4", "localhost", "::1",       "1.2.3.4\n"};
    for (size_t i = 0; i < sizeof good_addr / sizeof good_addr[0]; i++) {
        typical(&a, RL_MSG_REGISTER_STORAGE, 0, &m);
        m.u.register_storage_req.address = (const uint8_t *)good_addr[i];
        m.u.register_storage_req.address_len = (uint32_t)strlen(good_addr[i]);
        expect_good(&m);
        typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
        sv = (rl__msg_server *)m.u.get_shard_map_reply.servers;
        sv[1].address = (const uint8_t *)good_addr[i];
        sv[1].address_len = (uint32_t)strlen(good_addr[i]);
        expect_good(&m);
    }
    for (size_t i = 0; i < sizeof bad_addr / sizeof bad_addr[0]; i++) {
        typical(&a, RL_MSG_REGISTER_STORAGE, 0, &m);
        m.u.register_storage_req.address = (const uint8_t *)bad_addr[i];
        m.u.register_storage_req.address_len = (uint32_t)strlen(bad_addr[i]);
        expect_bad(&m, "address is not dotted IPv4");
        typical(&a, RL_MSG_GET_SHARD_MAP, R, &m);
        sv = (rl__msg_server *)m.u.get_shard_map_reply.servers;
        sv[2].address = (const uint8_t *)bad_addr[i];
        sv[2].address_len = (uint32_t)strlen(bad_addr[i]);
        expect_bad(&m, "servers[2].address");
    }

    /* REGISTER_STORAGE reply: ranges non-empty, sorted, non-overlapping; adjacent is fine. */
    typical(&a, RL_MSG_REGISTER_STORAGE, R, &m);
    kr = (rl__keyrange *)m.u.register_storage_reply.ranges;
    kr[1] = range_of(LIT("b"), LIT("f"));
    expect_bad(&m, "ranges[1].begin");
    kr[1] = range_of(LIT("d"), LIT("d"));
    expect_bad(&m, "ranges[1] is empty");
    kr[1] = range_of(LIT("d"), LIT("e"));
    expect_good(&m);
    kr[2] = range_of(LIT("a"), LIT("b"));
    expect_bad(&m, "ranges[2].begin");

    /* PEEK reply. */
    typical(&a, RL_MSG_PEEK, R, &m);
    pv = (rl__msg_peek_version *)m.u.peek_reply.versions;
    pv[1].version = 101;
    expect_bad(&m, "versions[1].version");
    pv[1].version = 100;
    expect_bad(&m, "versions[1].version");
    typical(&a, RL_MSG_PEEK, R, &m);
    m.u.peek_reply.end_version = 119;
    expect_bad(&m, "versions[2].version is 120, above end_version 119");
    typical(&a, RL_MSG_PEEK, R, &m);
    ch = (rl__msg_shard_change *)m.u.peek_reply.changes;
    ch[1].version = 104;
    expect_bad(&m, "changes[1].version");
    ch[1].version = 121;
    expect_bad(&m, "changes[1].version");
    ch[1].version = 120;
    expect_good(&m);
    ch[0].range = range_of(LIT("m"), LIT("m"));
    expect_bad(&m, "changes[0].range is empty");
    ch[0].range = range_of(LIT("n"), LIT("m"));
    expect_bad(&m, "changes[0].range is inverted");

    /* GET_MULTI: a range item is not inverted; a point item's end is carried as is. */
    typical(&a, RL_MSG_GET_MULTI, 0, &m);
    rl__msg_read_item *it = (rl__msg_read_item *)m.u.get_multi_req.items;
    it[0].begin = (const uint8_t *)"c";
    expect_bad(&m, "items[0] is an inverted range");
    it[0].is_range = 0;
    expect_good(&m);
    rl__arena_release(&a);
}

/* net_4_5: the PEEK reply rules that need the request (rl__msg_peek_reply_check). */
TEST(net_4_5_peek_check) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg m;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    typical(&a, RL_MSG_PEEK, R, &m);
    rl__msg_peek_reply *p = &m.u.peek_reply;
    ASSERT_OK(rl__msg_peek_reply_check(p, 100, &why));
    ASSERT_OK(rl__msg_peek_reply_check(p, 0, &why));
    ASSERT_RC(rl__msg_peek_reply_check(p, 101, &why), RL_E_MALFORMED_FRAME);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "versions[0].version is 101") != NULL);
    ASSERT_RC(rl__msg_peek_reply_check(p, 121, &why), RL_E_MALFORMED_FRAME);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "end_version") != NULL);
    p->n_versions = 0;
    ASSERT_OK(rl__msg_peek_reply_check(p, 104, &why));
    ASSERT_RC(rl__msg_peek_reply_check(p, 105, &why), RL_E_MALFORMED_FRAME);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "changes[0].version") != NULL);
    p->n_changes = 0;
    ASSERT_OK(rl__msg_peek_reply_check(p, 120, &why)); /* nothing new: end_version may equal */
    rl__arena_release(&a);
}

/* net_4_6: the handshake: a foreign magic or version is incompatible_protocol_version, with the
 * received values kept for the log (and nothing after them decoded); encoders still write them
 * (for tests of bad handshakes). HELLO, AUTH_CHALLENGE and the AUTH request share the rule. */
TEST(net_4_6_handshake_versions) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg m;
    static const uint8_t zero[32];
    typical(&a, RL_MSG_HELLO, 0, &m);
    m.u.hello_req.magic = 0x12345678;
    expect_bad_rc(&m, "magic 0x12345678", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    rl_buf b;
    rl__buf_init(&b);
    ASSERT_OK(rl__msg_hello_req_encode(&b, &m.u.hello_req, NULL));
    rl__msg_hello_req h;
    ASSERT_RC(rl__msg_hello_req_decode(b.data, b.len, &a, &h, NULL), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_EQ(h.magic, 0x12345678);
    ASSERT_EQ(h.protocol_version, RL_PROTOCOL_VERSION);
    ASSERT_TRUE(h.role == 0 && h.id == 0 && h.host == NULL && h.host_len == 0);
    ASSERT_EQ(RL_PROTOCOL_VERSION, 2);
    typical(&a, RL_MSG_HELLO, 0, &m);
    m.u.hello_req.protocol_version = 1; /* a peer of the protocol before the handshake */
    expect_bad_rc(&m, "version 1", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    typical(&a, RL_MSG_HELLO, 0, &m);
    m.u.hello_req.protocol_version = 3;
    expect_bad_rc(&m, "version 3", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    /* Only the fixed 8 bytes matter: what follows a foreign version is not looked at. */
    rl__buf_reset(&b);
    rl__buf_append(&b, "RLKV\x01\0\0\0garbage", 15);
    ASSERT_RC(rl__msg_hello_req_decode(b.data, b.len, &a, &h, NULL), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_EQ(h.protocol_version, 1);
    /* Shorter than 8 bytes is malformed. */
    ASSERT_RC(rl__msg_hello_req_decode(b.data, 7, &a, &h, NULL), RL_E_MALFORMED_FRAME);
    typical(&a, RL_MSG_HELLO, R, &m);
    m.u.hello_reply.protocol_version = 0;
    expect_bad_rc(&m, "version 0", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    typical(&a, RL_MSG_HELLO, R, &m);
    m.u.hello_reply.protocol_version = 1;
    expect_bad_rc(&m, "version 1", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);

    /* AUTH_CHALLENGE. */
    typical(&a, RL_MSG_AUTH_CHALLENGE, 0, &m);
    m.u.auth_challenge.magic = 0x12345678;
    expect_bad_rc(&m, "magic 0x12345678", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_auth_challenge_encode(&b, &m.u.auth_challenge, NULL));
    ASSERT_EQ(b.len, 24);
    rl__msg_auth_challenge c;
    ASSERT_RC(rl__msg_auth_challenge_decode(b.data, b.len, &a, &c, NULL), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_EQ(c.magic, 0x12345678);
    ASSERT_EQ(c.protocol_version, RL_PROTOCOL_VERSION);
    ASSERT_MEM_EQ(c.nonce, 16, zero, 16);
    typical(&a, RL_MSG_AUTH_CHALLENGE, 0, &m);
    m.u.auth_challenge.protocol_version = 1;
    expect_bad_rc(&m, "version 1", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    typical(&a, RL_MSG_AUTH_CHALLENGE, 0, &m);
    m.u.auth_challenge.protocol_version = 3;
    expect_bad_rc(&m, "version 3", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    rl__buf_reset(&b);
    rl__buf_append(&b, "RLKV\x01\0\0\0garbage", 15);
    ASSERT_RC(rl__msg_auth_challenge_decode(b.data, b.len, &a, &c, NULL), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_EQ(c.magic, RL_PROTOCOL_MAGIC);
    ASSERT_EQ(c.protocol_version, 1);
    ASSERT_RC(rl__msg_auth_challenge_decode(b.data, 7, &a, &c, NULL), RL_E_MALFORMED_FRAME);
    b.data[4] = 2; /* our version: then the short nonce is malformed */
    ASSERT_RC(rl__msg_auth_challenge_decode(b.data, b.len, &a, &c, NULL), RL_E_MALFORMED_FRAME);

    /* The AUTH request. */
    typical(&a, RL_MSG_AUTH, 0, &m);
    m.u.auth_req.magic = 0x12345678;
    expect_bad_rc(&m, "magic 0x12345678", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    rl__buf_reset(&b);
    ASSERT_OK(rl__msg_auth_req_encode(&b, &m.u.auth_req, NULL));
    ASSERT_EQ(b.len, 57);
    rl__msg_auth_req r;
    ASSERT_RC(rl__msg_auth_req_decode(b.data, b.len, &a, &r, NULL), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_EQ(r.magic, 0x12345678);
    ASSERT_EQ(r.protocol_version, RL_PROTOCOL_VERSION);
    ASSERT_EQ(r.auth_class, 0);
    ASSERT_MEM_EQ(r.nonce, 16, zero, 16);
    ASSERT_MEM_EQ(r.proof, 32, zero, 32);
    typical(&a, RL_MSG_AUTH, 0, &m);
    m.u.auth_req.protocol_version = 1;
    expect_bad_rc(&m, "version 1", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    typical(&a, RL_MSG_AUTH, 0, &m);
    m.u.auth_req.protocol_version = 3;
    expect_bad_rc(&m, "version 3", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    /* A foreign version goes before a bad auth_class (which is not looked at). */
    typical(&a, RL_MSG_AUTH, 0, &m);
    m.u.auth_req.protocol_version = 1, m.u.auth_req.auth_class = 9;
    expect_bad_rc(&m, "version 1", RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    rl__buf_reset(&b);
    rl__buf_append(&b, "RLKV\x01\0\0\0garbage", 15);
    ASSERT_RC(rl__msg_auth_req_decode(b.data, b.len, &a, &r, NULL), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_EQ(r.protocol_version, 1);
    ASSERT_RC(rl__msg_auth_req_decode(b.data, 7, &a, &r, NULL), RL_E_MALFORMED_FRAME);
    b.data[4] = 2; /* our version: then 'g' is not an auth class */
    ASSERT_RC(rl__msg_auth_req_decode(b.data, b.len, &a, &r, NULL), RL_E_MALFORMED_FRAME);

    /* The AUTH reply has no magic or version: 32 bytes that look like a foreign header are a proof. */
    rl__buf_reset(&b);
    rl__buf_append(&b, "RLKV\x01\0\0\0", 8);
    rl__buf_append(&b, zero, 24);
    rl__msg d;
    ASSERT_OK(rl__msg_decode(RL_MSG_AUTH, R, b.data, b.len, &a, &d, NULL));
    ASSERT_MEM_EQ(d.u.auth_reply.proof, 32, b.data, 32);
    rl__buf_release(&b);
    rl__arena_release(&a);
}

/* net_4_7: the dispatcher: unknown and reserved types, bad flags; error replies of any type. */
TEST(net_4_7_dispatch) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg d;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    uint8_t p[16] = {0};
    ASSERT_RC(rl__msg_decode(5, 0, p, 8, &a, &d, &why), RL_E_MALFORMED_FRAME);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "type 5") != NULL);
    /* The handshake's types are known: AUTH_CHALLENGE as a request only, AUTH both ways. */
    uint8_t z[32] = {0};
    ASSERT_RC(rl__msg_decode(RL_MSG_AUTH_CHALLENGE, 0, z, 24, &a, &d, &why), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_RC(rl__msg_decode(RL_MSG_AUTH_CHALLENGE, R, z, 24, &a, &d, &why), RL_E_MALFORMED_FRAME);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "type 3 (AUTH_CHALLENGE)") != NULL);
    ASSERT_RC(rl__msg_decode(RL_MSG_AUTH, 0, z, 32, &a, &d, &why), RL_E_INCOMPATIBLE_PROTOCOL_VERSION);
    ASSERT_OK(rl__msg_decode(RL_MSG_AUTH, R, z, 32, &a, &d, &why));
    ASSERT_EQ(d.type, RL_MSG_AUTH);
    ASSERT_EQ(d.flags, R);
    for (int t = 30; t <= 49; t++) {
        if (t == RL_MSG_SET_DELAY) continue; /* known: SET_DELAY */
        ASSERT_RC(rl__msg_decode((uint16_t)t, 0, p, 8, &a, &d, &why), RL_E_MALFORMED_FRAME);
        ASSERT_RC(rl__msg_decode((uint16_t)t, R, p, 8, &a, &d, &why), RL_E_MALFORMED_FRAME);
    }
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "DELAY_RESERVED") != NULL);
    /* GET_READ_VERSION request (u32 flags = 0) with every flag combination. */
    ASSERT_OK(rl__msg_decode(RL_MSG_GET_READ_VERSION, 0, p, 4, &a, &d, &why));
    ASSERT_RC(rl__msg_decode(RL_MSG_GET_READ_VERSION, RL_FRAME_ERROR, p, 4, &a, &d, &why), RL_E_MALFORMED_FRAME);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "ERROR without REPLY") != NULL);
    ASSERT_RC(rl__msg_decode(RL_MSG_GET_READ_VERSION, 0x4, p, 4, &a, &d, &why), RL_E_MALFORMED_FRAME);
    ASSERT_RC(rl__msg_decode(RL_MSG_GET_READ_VERSION, 0x5, p, 4, &a, &d, &why), RL_E_MALFORMED_FRAME);
    /* An error reply's payload does not depend on the type, reserved and unknown ones included. */
    uint8_t err[] = {0xe9, 0x03, 0, 0, 0, 0, 0, 0};
    for (int t = 0; t < 64; t++) {
        ASSERT_OK(rl__msg_decode((uint16_t)t, E, err, sizeof err, &a, &d, &why));
        ASSERT_EQ(d.u.error.code, 1001);
        ASSERT_EQ(d.type, t);
    }
    /* NULL payload with a length, NULL arena where one is needed. */
    ASSERT_RC(rl__msg_decode(RL_MSG_GET, 0, NULL, 4, &a, &d, &why), RL_E_INVALID_ARGUMENT);
    uint8_t one_kv[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    ASSERT_RC(rl__msg_decode(RL_MSG_GET_RANGE, R, one_kv, 4 + 8 + 14, NULL, &d, &why), RL_E_INVALID_ARGUMENT);
    ASSERT_OK(rl__msg_decode(RL_MSG_GET_RANGE, R, one_kv, 4 + 8 + 14, &a, &d, &why));
    ASSERT_EQ(d.u.get_range_reply.n_kvs, 1);
    rl__arena_release(&a);
}

/* net_4_8: out of memory: a failing arena makes a decoder return out_of_memory; an encoder
 * returns it for a buffer whose sticky error is set or that fails while growing. */
TEST(net_4_8_out_of_memory) {
    rl_arena a, d_arena;
    rl__arena_init(&a, 0);
    rl_buf b;
    rl__buf_init(&b);
    for (int k = 0; k < N_KINDS; k++) {
        rl__msg m, d;
        sample(k, V_TYPICAL, &a, &m);
        encode_into(&b, &m);
        /* Fail each allocation in turn until the decode succeeds. */
        for (long n = 0;; n++) {
            rl__arena_init(&d_arena, 64);
            rl_alloc_fail_after(n);
            int rc = rl__msg_decode(m.type, m.flags, b.data, b.len, &d_arena, &d, NULL);
            rl_alloc_fail_after(-1);
            rl__arena_release(&d_arena);
            if (rc == RL_OK) break;
            ASSERT_RC(rc, RL_E_OUT_OF_MEMORY);
            ASSERT_TRUE(n < 100);
        }
        /* Encoding into a buffer that cannot grow. */
        for (long n = 0;; n++) {
            rl_buf e;
            rl__buf_init(&e);
            rl_alloc_fail_after(n);
            int rc = rl__msg_encode(&e, &m, NULL);
            rl_alloc_fail_after(-1);
            rl__buf_release(&e);
            if (rc == RL_OK) break;
            ASSERT_RC(rc, RL_E_OUT_OF_MEMORY);
            ASSERT_TRUE(n < 100);
        }
    }
    /* A buffer already in error. */
    rl__msg m;
    sample(kind_of(RL_MSG_GET, 0), V_TYPICAL, &a, &m);
    rl_buf e;
    rl__buf_init(&e);
    rl_alloc_fail_after(0);
    rl__buf_append(&e, "x", 1);
    rl_alloc_fail_after(-1);
    ASSERT_RC(rl__buf_error(&e), RL_E_OUT_OF_MEMORY);
    ASSERT_RC(rl__msg_encode(&e, &m, NULL), RL_E_OUT_OF_MEMORY);
    ASSERT_RC(rl__msg_frame_encode(&e, 1, &m, NULL), RL_E_OUT_OF_MEMORY);
    rl__buf_release(&e);
    rl__buf_release(&b);
    rl__arena_release(&a);
}

/* net_4_9: encoders refuse NULL pointers with a length or count, and negative entry counts. */
TEST(net_4_9_encoder_null_pointers) {
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__msg m;
    rl_buf b;
    rl__buf_init(&b);
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    typical(&a, RL_MSG_GET, 0, &m);
    m.u.get_req.key = NULL;
    ASSERT_RC(rl__msg_encode(&b, &m, &why), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "GET request: key is NULL") != NULL);
    typical(&a, RL_MSG_COMMIT, 0, &m);
    m.u.commit_req.muts = NULL;
    ASSERT_RC(rl__msg_encode(&b, &m, &why), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "mutations is NULL") != NULL);
    typical(&a, RL_MSG_GET_MAPPED_RANGE, R, &m);
    ((rl_mapped_keyvalue *)m.u.get_mapped_range_reply.entries)[1].n_kvs = -1;
    ASSERT_RC(rl__msg_encode(&b, &m, &why), RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&why), "entries[1].kvs") != NULL);
    ASSERT_EQ(b.len, 0);
    /* Empty strings may be NULL. */
    typical(&a, RL_MSG_GET, 0, &m);
    m.u.get_req.key = NULL, m.u.get_req.key_len = 0;
    ASSERT_OK(rl__msg_encode(&b, &m, NULL));
    rl__buf_release(&b);
    rl__arena_release(&a);
}

/* ---- net_5: the mapped reply's fast entry paths against the field-by-field walk ---------- */

/* A random GET_MAPPED_RANGE reply of n entries (valid): point and range entries, 0..3 rows, empty
 * strings with and without a pointer, lengths up to 40 (and now and then a limit-sized one). */
static void random_mapped_reply(rl_arena *a, uint64_t *rng, uint32_t n, rl__msg *m) {
    memset(m, 0, sizeof *m);
    m->type = RL_MSG_GET_MAPPED_RANGE;
    m->flags = R;
    rl__msg_get_mapped_range_reply *g = &m->u.get_mapped_range_reply;
#define RSTR(ptr, len, max)                                                                        \
    do {                                                                                           \
        uint32_t l_ = (uint32_t)rl_test_rand_below(rng, 41);                                       \
        if (rl_test_rand_below(rng, 200) == 0) l_ = (max);                                         \
        (len) = l_;                                                                                \
        (ptr) = l_ || rl_test_rand_below(rng, 2) ? fill(a, l_, (uint8_t)rl_test_rand(rng)) : NULL; \
    } while (0)
    rl_mapped_keyvalue *e = n ? alloc0(a, n * sizeof *e) : NULL;
    for (uint32_t i = 0; i < n; i++) {
        RSTR(e[i].index.key, e[i].index.key_len, RL_PROTO_MAX_KEY);
        RSTR(e[i].index.value, e[i].index.value_len, RL_PROTO_MAX_VALUE);
        e[i].is_range = (int)rl_test_rand_below(rng, 2);
        RSTR(e[i].begin, e[i].begin_len, RL_PROTO_MAX_KEY);
        RSTR(e[i].end, e[i].end_len, RL_PROTO_MAX_KEY);
        e[i].n_kvs = (int)rl_test_rand_below(rng, e[i].is_range ? 4 : 2);
        rl_keyvalue *kv = e[i].n_kvs ? alloc0(a, (size_t)e[i].n_kvs * sizeof *kv) : NULL;
        for (int j = 0; j < e[i].n_kvs; j++) {
            RSTR(kv[j].key, kv[j].key_len, RL_PROTO_MAX_KEY);
            RSTR(kv[j].value, kv[j].value_len, RL_PROTO_MAX_VALUE);
        }
        e[i].kvs = kv;
        e[i].more = (int)rl_test_rand_below(rng, 2);
        e[i].served_locally = (int)rl_test_rand_below(rng, 2);
        if (rl_test_rand_below(rng, 3) == 0) omit_entry(&e[i], (uint32_t)rl_test_rand(rng));
    }
#undef RSTR
    g->entries = e;
    g->n_entries = n;
    g->more = (uint8_t)rl_test_rand_below(rng, 2);
    g->resolved_begin = (const uint8_t *)"a";
    g->resolved_begin_len = 1;
    g->stats.secondaries_local = (uint32_t)rl_test_rand(rng);
}

/* Decode p both ways and require the same outcome: rc, reason, and (on RL_OK) the same struct —
 * every field, every pointer (they point into p). */
static void same_decode(const uint8_t *p, size_t len, const char *what) {
    rl_arena a1, a2;
    rl__arena_init(&a1, 0);
    rl__arena_init(&a2, 0);
    rl__msg_get_mapped_range_reply x, y;
    rl__errdetail w1, w2;
    rl__errdetail_init(&w1, NULL);
    rl__errdetail_init(&w2, NULL);
    int r1 = rl__msg_get_mapped_range_reply_decode(p, len, &a1, &x, &w1);
    int r2 = rl__msg_get_mapped_range_reply_decode_walk(p, len, &a2, &y, &w2);
    if (r1 != r2)
        fail_msg("%s: fast decode %s, walk %s (%s)", what, rl_error_name(r1), rl_error_name(r2),
                 rl__errdetail_get(&w2));
    if (r1 != RL_OK) {
        if (strcmp(rl__errdetail_get(&w1), rl__errdetail_get(&w2)) != 0)
            fail_msg("%s: reasons differ: '%s' vs '%s'", what, rl__errdetail_get(&w1), rl__errdetail_get(&w2));
    } else {
        ASSERT_EQ(x.n_entries, y.n_entries);
        for (uint32_t i = 0; i < x.n_entries; i++) {
            const rl_mapped_keyvalue *e = &x.entries[i], *f = &y.entries[i];
            if (e->index.key != f->index.key || e->index.key_len != f->index.key_len ||
                e->index.value != f->index.value || e->index.value_len != f->index.value_len ||
                e->is_range != f->is_range || e->begin != f->begin || e->begin_len != f->begin_len ||
                e->end != f->end || e->end_len != f->end_len || e->n_kvs != f->n_kvs || e->more != f->more ||
                e->served_locally != f->served_locally || (!e->kvs) != (!f->kvs) ||
                e->index_omitted != f->index_omitted || e->index_omitted_len != f->index_omitted_len)
                fail_msg("%s: entry %u differs", what, i);
            for (int j = 0; j < e->n_kvs; j++)
                if (e->kvs[j].key != f->kvs[j].key || e->kvs[j].key_len != f->kvs[j].key_len ||
                    e->kvs[j].value != f->kvs[j].value || e->kvs[j].value_len != f->kvs[j].value_len)
                    fail_msg("%s: entry %u row %d differs", what, i, j);
        }
        ASSERT_EQ(x.more, y.more);
        ASSERT_TRUE(x.resolved_begin == y.resolved_begin && x.resolved_begin_len == y.resolved_begin_len);
        ASSERT_EQ(x.stats.secondaries_local, y.stats.secondaries_local);
    }
    rl__arena_release(&a1);
    rl__arena_release(&a2);
}

/* Encode m both ways: the same rc, reason and bytes; the buffer (holding a prefix) untouched on
 * failure. */
static void same_encode(const rl__msg *m, const char *what, rl_buf *b1) {
    rl_buf b2;
    rl__buf_init(&b2);
    rl__buf_reset(b1);
    rl__buf_append(b1, "pre", 3);
    rl__buf_append(&b2, "pre", 3);
    rl__errdetail w1, w2;
    rl__errdetail_init(&w1, NULL);
    rl__errdetail_init(&w2, NULL);
    int r1 = rl__msg_get_mapped_range_reply_encode(b1, &m->u.get_mapped_range_reply, &w1);
    int r2 = rl__msg_get_mapped_range_reply_encode_walk(&b2, &m->u.get_mapped_range_reply, &w2);
    if (r1 != r2) fail_msg("%s: fast encode %s, walk %s", what, rl_error_name(r1), rl_error_name(r2));
    if (r1 != RL_OK && strcmp(rl__errdetail_get(&w1), rl__errdetail_get(&w2)) != 0)
        fail_msg("%s: reasons differ: '%s' vs '%s'", what, rl__errdetail_get(&w1), rl__errdetail_get(&w2));
    if (b1->len != b2.len || memcmp(b1->data, b2.data, b1->len) != 0 || b1->data[b1->len] != 0)
        fail_msg("%s: the encodings differ (%zu vs %zu bytes)", what, b1->len, b2.len);
    if (r1 != RL_OK) ASSERT_EQ(b1->len, 3);
    rl__buf_release(&b2);
}

/* net_5_1: random valid replies encode to the walk's bytes and decode to its structs; every
 * broken rule of an entry fails the same way; cut and damaged encodings decode (or fail, with
 * the same reason) as the walk does. */
TEST(net_5_1_mapped_fast_paths) {
    uint64_t rng = rl_test_seed();
    rl_arena a;
    rl_buf b, d;
    rl__arena_init(&a, 0);
    rl__buf_init(&b);
    rl__buf_init(&d);
    char what[96];
    for (int iter = 0; iter < 1000; iter++) {
        rl__msg m;
        rl__arena_reset(&a);
        uint32_t n = (uint32_t)rl_test_rand_below(&rng, iter % 10 == 0 ? 200 : 6);
        random_mapped_reply(&a, &rng, n, &m);
        snprintf(what, sizeof what, "iter %d (%u entries)", iter, n);
        same_encode(&m, what, &b);
        const uint8_t *enc = b.data + 3;
        size_t len = b.len - 3;
        same_decode(enc, len, what);
        /* Cut (at every length for small replies, else at random ones) and damaged. */
        for (size_t cut = 0; cut < len; cut += len < 300 ? 1 : 1 + (size_t)rl_test_rand_below(&rng, 197)) {
            snprintf(what, sizeof what, "iter %d cut at %zu of %zu", iter, cut, len);
            same_decode(enc, cut, what);
        }
        for (int k = 0; k < 20; k++) {
            rl__buf_reset(&d);
            rl__buf_append(&d, enc, len);
            damage(&d, &rng);
            snprintf(what, sizeof what, "iter %d damage %d", iter, k);
            same_decode(d.data, d.len, what);
        }
        /* One rule of one entry broken (the encoders refuse it with the walk's reason). */
        if (n == 0) continue;
        rl_mapped_keyvalue *e = (rl_mapped_keyvalue *)&m.u.get_mapped_range_reply.entries[rl_test_rand_below(&rng, n)];
        switch (rl_test_rand_below(&rng, 12)) {
        case 0: e->index.key_len = RL_PROTO_MAX_KEY + 1; break;
        case 10: e->index_omitted = 2; break;
        case 11: e->index_omitted = 1, e->index.key = (const uint8_t *)"k", e->index.key_len = 1; break;
        case 1: e->index.value = NULL, e->index.value_len = 1; break;
        case 2: e->is_range = 2; break;
        case 3: e->begin_len = RL_PROTO_MAX_KEY + 1; break;
        case 4: e->end = NULL, e->end_len = 3; break;
        case 5: e->n_kvs = -1; break;
        case 6: e->kvs = NULL, e->n_kvs = 1; break;
        case 7: { /* rows the walk reads before it refuses their count */
            rl_keyvalue *kv = alloc0(&a, 2 * sizeof *kv);
            kv[0] = kv_of(LIT("k"), LIT("v")), kv[1] = kv_of(LIT("l"), LIT(""));
            e->is_range = 0, e->kvs = kv, e->n_kvs = 2;
            break;
        }
        case 8: e->more = -1; break;
        default: e->served_locally = 5; break;
        }
        snprintf(what, sizeof what, "iter %d broken", iter);
        same_encode(&m, what, &b);
    }
    rl__buf_release(&b);
    rl__buf_release(&d);
    rl__arena_release(&a);
}

/* Decode (type, flags, p) with rl__msg_decode and rl__msg_decode_walk: the same rc and reason, and
 * on RL_OK the same GET struct (pointers into p included) and the walk's re-encoding of it. */
static void same_get_decode(uint16_t flags, const uint8_t *p, size_t len, const char *what) {
    rl_arena a1, a2;
    rl__arena_init(&a1, 0);
    rl__arena_init(&a2, 0);
    rl__msg x, y;
    rl__errdetail w1, w2;
    rl__errdetail_init(&w1, NULL);
    rl__errdetail_init(&w2, NULL);
    int r1 = rl__msg_decode(RL_MSG_GET, flags, p, len, &a1, &x, &w1);
    int r2 = rl__msg_decode_walk(RL_MSG_GET, flags, p, len, &a2, &y, &w2);
    if (r1 != r2)
        fail_msg("%s: decode %s, walk %s (%s)", what, rl_error_name(r1), rl_error_name(r2), rl__errdetail_get(&w2));
    if (strcmp(rl__errdetail_get(&w1), rl__errdetail_get(&w2)) != 0)
        fail_msg("%s: reasons differ: '%s' vs '%s'", what, rl__errdetail_get(&w1), rl__errdetail_get(&w2));
    if (x.type != y.type || x.flags != y.flags) fail_msg("%s: the decoded headers differ", what);
    if (r1 == RL_OK && flags == 0 &&
        (x.u.get_req.version != y.u.get_req.version || x.u.get_req.key != y.u.get_req.key ||
         x.u.get_req.key_len != y.u.get_req.key_len))
        fail_msg("%s: the decoded requests differ", what);
    if (r1 == RL_OK && flags != 0 &&
        (x.u.get_reply.present != y.u.get_reply.present || x.u.get_reply.value != y.u.get_reply.value ||
         x.u.get_reply.value_len != y.u.get_reply.value_len))
        fail_msg("%s: the decoded replies differ", what);
    rl__arena_release(&a1);
    rl__arena_release(&a2);
}

/* Encode m with rl__msg_encode and rl__msg_encode_walk after a prefix: the same rc, reason and
 * bytes (the prefix alone on failure). */
static void same_get_encode(const rl__msg *m, const char *what) {
    rl_buf b1, b2;
    rl__buf_init(&b1);
    rl__buf_init(&b2);
    rl__buf_append(&b1, "pre", 3);
    rl__buf_append(&b2, "pre", 3);
    rl__errdetail w1, w2;
    rl__errdetail_init(&w1, NULL);
    rl__errdetail_init(&w2, NULL);
    int r1 = rl__msg_encode(&b1, m, &w1);
    int r2 = rl__msg_encode_walk(&b2, m, &w2);
    if (r1 != r2) fail_msg("%s: encode %s, walk %s", what, rl_error_name(r1), rl_error_name(r2));
    if (strcmp(rl__errdetail_get(&w1), rl__errdetail_get(&w2)) != 0)
        fail_msg("%s: reasons differ: '%s' vs '%s'", what, rl__errdetail_get(&w1), rl__errdetail_get(&w2));
    if (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0 || b1.data[b1.len] != 0)
        fail_msg("%s: the encodings differ (%zu vs %zu bytes)", what, b1.len, b2.len);
    if (r1 != RL_OK) ASSERT_EQ(b1.len, 3);
    rl__buf_release(&b1);
    rl__buf_release(&b2);
}

/* net_5_2: the hand-coded GET request and reply (rl__msg_decode / rl__msg_encode's fast paths)
 * against the generic walk: random valid messages (keys and values up to the limits), each broken
 * rule, every cut and random damage give the same results, bytes and reasons; and the O(1) type
 * lookup knows exactly the protocol's message types. */
TEST(net_5_2_get_fast_paths) {
    uint64_t rng = rl_test_seed();
    static uint8_t big[RL_PROTO_MAX_VALUE + 2];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
    char what[96];
    rl_buf enc, d;
    rl__buf_init(&enc);
    rl__buf_init(&d);
    for (int iter = 0; iter < 2000; iter++) {
        rl__msg m;
        memset(&m, 0, sizeof m);
        m.type = RL_MSG_GET;
        int reply = iter & 1;
        m.flags = reply ? RL_FRAME_REPLY : 0;
        uint32_t lim = reply ? RL_PROTO_MAX_VALUE : RL_PROTO_MAX_KEY;
        uint32_t n = iter % 50 == 0 ? lim : (uint32_t)rl_test_rand_below(&rng, iter % 7 == 0 ? lim + 1 : 40);
        if (reply) {
            m.u.get_reply.present = (uint8_t)(n > 0 || rl_test_rand_below(&rng, 2));
            m.u.get_reply.value = n || rl_test_rand_below(&rng, 2) ? big : NULL;
            m.u.get_reply.value_len = n;
        } else {
            m.u.get_req.version = rl_test_rand(&rng);
            m.u.get_req.key = n || rl_test_rand_below(&rng, 2) ? big : NULL;
            m.u.get_req.key_len = n;
        }
        snprintf(what, sizeof what, "iter %d (%s, %u bytes)", iter, reply ? "reply" : "request", n);
        same_get_encode(&m, what);
        rl__errdetail why;
        rl__errdetail_init(&why, NULL);
        rl__buf_reset(&enc);
        ASSERT_OK(rl__msg_encode_walk(&enc, &m, &why));
        same_get_decode(m.flags, enc.data, enc.len, what);
        for (size_t cut = 0; cut < enc.len; cut += enc.len < 64 ? 1 : 1 + (size_t)rl_test_rand_below(&rng, 997)) {
            snprintf(what, sizeof what, "iter %d cut at %zu of %zu", iter, cut, enc.len);
            same_get_decode(m.flags, cut ? enc.data : NULL, cut, what);
        }
        for (int k = 0; k < 10 && enc.len < 200; k++) {
            rl__buf_reset(&d);
            rl__buf_append(&d, enc.data, enc.len);
            damage(&d, &rng);
            snprintf(what, sizeof what, "iter %d damage %d", iter, k);
            same_get_decode(m.flags, d.data, d.len, what);
        }
        /* One rule broken: both encoders refuse it with the same reason. */
        switch (rl_test_rand_below(&rng, 4)) {
        case 0:
            if (reply) m.u.get_reply.value = big, m.u.get_reply.value_len = RL_PROTO_MAX_VALUE + 1;
            else m.u.get_req.key = big, m.u.get_req.key_len = RL_PROTO_MAX_KEY + 1;
            break;
        case 1:
            if (reply) m.u.get_reply.value = NULL, m.u.get_reply.value_len = 1;
            else m.u.get_req.key = NULL, m.u.get_req.key_len = 1;
            break;
        case 2:
            if (reply) m.u.get_reply.present = 2;
            else m.flags = RL_FRAME_ERROR; /* ERROR without REPLY */
            break;
        default:
            if (reply) m.u.get_reply.present = 0, m.u.get_reply.value = big, m.u.get_reply.value_len = 3;
            else m.flags = 0x80; /* unknown bits */
            break;
        }
        snprintf(what, sizeof what, "iter %d broken", iter);
        same_get_encode(&m, what);
    }
    /* The types: exactly the protocol's (proto.h; update this list with it). */
    static const int known[] = {RL_MSG_HELLO,
                                RL_MSG_PING,
                                RL_MSG_AUTH_CHALLENGE,
                                RL_MSG_AUTH,
                                RL_MSG_GET_READ_VERSION,
                                RL_MSG_COMMIT,
                                RL_MSG_GET_SHARD_MAP,
                                RL_MSG_REGISTER_STORAGE,
                                RL_MSG_PEEK,
                                RL_MSG_POP,
                                RL_MSG_STATUS,
                                RL_MSG_GET,
                                RL_MSG_GET_KEY,
                                RL_MSG_GET_RANGE,
                                RL_MSG_GET_MAPPED_RANGE,
                                RL_MSG_GET_MULTI,
                                RL_MSG_SPLIT_SHARD,
                                RL_MSG_ASSIGN_SHARD,
                                RL_MSG_MOVE_SHARD,
                                RL_MSG_SET_DELAY,
                                RL_MSG_GET_METRICS,
                                RL_MSG_WATCH_VALUE,
                                RL_MSG_GET_MAPPED_STREAM,
                                RL_MSG_MAPPED_CHUNK,
                                RL_MSG_MAPPED_CREDIT};
    for (int t = -2; t <= 70000; t++) {
        int want = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) want |= known[i] == t;
        if (rl__msg_type_known(t) != want) fail_msg("type %d: known %d, want %d", t, rl__msg_type_known(t), want);
    }
    rl__buf_release(&enc);
    rl__buf_release(&d);
}

RL_TEST_MAIN(T(net_1_1_type_names), T(net_2_1_round_trip_typical), T(net_2_2_round_trip_empty),
             T(net_2_3_round_trip_max), T(net_2_4_golden_bytes), T(net_2_5_frame_encode), T(net_3_1_truncation),
             T(net_3_2_random_damage), T(net_3_3_huge_counts), T(net_4_1_length_limits), T(net_4_2_commit_size_limit),
             T(net_4_3_enums_and_integers), T(net_4_4_structure_rules), T(net_4_5_peek_check),
             T(net_4_6_handshake_versions), T(net_4_7_dispatch), T(net_4_8_out_of_memory),
             T(net_4_9_encoder_null_pointers), T(net_5_1_mapped_fast_paths), T(net_5_2_get_fast_paths))
