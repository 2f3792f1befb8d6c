/* test_cluster_plan.c — cluster_plan_*: the cluster client's read planner (src/kv/cluster/plan.h)
 * and location cache (locmap.h) as pure logic, against a fake cluster.
 *
 * The fake cluster is one storage engine holding the data and a shard map (an rl__locmap built
 * from a GET_SHARD_MAP reply, so the location cache is tested too). Each request the planner
 * asks for is routed through the map and answered exactly as docs/protocol.md §9 says a
 * storage server (or the coordinator, for the system shard) answers: ownership checks
 * (wrong_shard_server), selectors resolved within the shard with rl__storage_select /
 * rl__storage_range_bounds (lo_is_min = begin == "", hi_is_max = end == "\xff" or "\xff\xff"),
 * read_through at the shard boundary, and replies cut off at a small random row cap with `more`
 * (what the servers' 8 MiB bound does). Replies go through the real codecs: encoded, copied
 * into the read's arena and decoded, as the transport does. The oracle is the embedded backend
 * over the same data at the same versions: every result — error, value, resolved key, rows,
 * rbegin/rend, more — must be equal.
 *
 * This test reads no RL_TEST_URL: it runs the same whatever backend the KV suite is run on. */
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "kv/backend.h"
#include "kv/cluster/locmap.h"
#include "kv/cluster/plan.h"
#include "net/proto.h"
#include "storage/mapped.h"
#include "storage/storage.h"
#include "test.h"
#include "tuple/tuple.h"

static const uint8_t kff[1] = {0xff};
static const uint8_t kffff[2] = {0xff, 0xff};

typedef struct {
    rl__kv_backend *emb; /* the oracle */
    rl__storage *st;     /* the fake cluster's data (same mutations, same versions) */
    rl__locmap *map;
    rl__version v;
    uint64_t rng;
    int cap;         /* rows per reply at most (0: no cap) */
    int wrong_shard; /* 1001 answers (must stay 0: the planner routes right) */
    int requests;
} fx;

/* ---- Data ------------------------------------------------------------------------------------ */

static void on_commit(rl__kv_commit *c, int err) { *(int *)c->ud = err; }

/* Commit muts to both the oracle and the fake cluster's engine. */
static void write_both(fx *x, const rl__mutation *muts, size_t n) {
    rl__kv_commit c;
    memset(&c, 0, sizeof c);
    int err = -1;
    c.read_version = x->v;
    c.muts = muts;
    c.n_muts = n;
    c.done = on_commit;
    c.ud = &err;
    x->emb->vt->commit(x->emb, &c);
    ASSERT_OK(err);
    ASSERT_OK(rl__storage_apply(x->st, c.commit_version, muts, n));
    x->v = c.commit_version;
}

static void fx_open(fx *x, uint64_t seed) {
    memset(x, 0, sizeof *x);
    x->rng = seed;
    ASSERT_OK(rl__kv_embedded_open(NULL, NULL, &x->emb, NULL));
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    ASSERT_OK(rl__storage_open(&so, &x->st, NULL));
    x->v = 0;
}

static void fx_close(fx *x) {
    x->emb->vt->close(x->emb);
    rl__storage_close(x->st);
    rl__locmap_unref(x->map);
}

/* The shard map: boundaries (sorted, unique, non-empty, below "\xff") between "" and "\xff",
 * then the system shard on the coordinator. Teams of 1-2 of storage servers 1..3. */
static void fx_map(fx *x, const rl_buf *bounds, int nb) {
    rl__msg_server servers[4];
    memset(servers, 0, sizeof servers);
    for (int i = 0; i < 4; i++) {
        servers[i].id = (uint32_t)i;
        servers[i].role = i == 0 ? RL_ROLE_COORDINATOR : RL_ROLE_STORAGE;
        servers[i].address = (const uint8_t *)"127.0.0.1";
        servers[i].address_len = 9;
        servers[i].port = (uint16_t)(4000 + i);
        servers[i].host = (const uint8_t *)"h";
        servers[i].host_len = 1;
        servers[i].healthy = 1;
    }
    rl__msg_shard sh[40];
    uint32_t teams[40][2];
    int ns = 0;
    const uint8_t *prev = (const uint8_t *)"";
    uint32_t prevl = 0;
    for (int i = 0; i <= nb; i++) {
        sh[ns].begin = prev, sh[ns].begin_len = prevl;
        if (i < nb) sh[ns].end = bounds[i].data, sh[ns].end_len = (uint32_t)bounds[i].len;
        else sh[ns].end = kff, sh[ns].end_len = 1;
        teams[ns][0] = 1 + (uint32_t)rl_test_rand_below(&x->rng, 3);
        teams[ns][1] = 1 + (teams[ns][0] % 3);
        sh[ns].team = teams[ns];
        sh[ns].n_team = 1 + (uint32_t)rl_test_rand_below(&x->rng, 2);
        prev = sh[ns].end, prevl = sh[ns].end_len;
        ns++;
    }
    teams[ns][0] = 0;
    sh[ns].begin = kff, sh[ns].begin_len = 1;
    sh[ns].end = kffff, sh[ns].end_len = 2;
    sh[ns].team = teams[ns];
    sh[ns].n_team = 1;
    ns++;
    rl__msg_get_shard_map_reply m = {7, servers, 4, sh, (uint32_t)ns, 0, 0};
    /* Through the codec too: what the client really receives. */
    rl_buf enc;
    rl__buf_init(&enc);
    ASSERT_OK(rl__msg_get_shard_map_reply_encode(&enc, &m, NULL));
    rl_arena a;
    rl__arena_init(&a, 1024);
    rl__msg_get_shard_map_reply d;
    ASSERT_OK(rl__msg_get_shard_map_reply_decode(enc.data, enc.len, &a, &d, NULL));
    rl__locmap_unref(x->map);
    x->map = NULL;
    ASSERT_OK(rl__locmap_new(&d, &x->map, NULL));
    rl__arena_release(&a);
    rl__buf_release(&enc);
}

/* ---- The fake servers ------------------------------------------------------------------------ */

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

static const uint8_t *anchor(rl_arena *a, const rl_key_selector *s, uint32_t *len) {
    if (!s->or_equal) {
        *len = s->key_len;
        return s->key;
    }
    uint8_t *p = rl__arena_alloc(a, s->key_len + 1u);
    if (s->key_len) memcpy(p, s->key, s->key_len);
    p[s->key_len] = 0;
    *len = s->key_len + 1;
    return p;
}

static int cap_limit(const fx *x, int limit) {
    if (!x->cap) return limit;
    return limit && limit < x->cap ? limit : x->cap;
}

/* Answer req as the server holding shard si does. Returns RL_OK with the reply's payload in
 * out, or the code of an error reply. */
static int serve(fx *x, int si, const rl__msg *req, rl_buf *out) {
    const rl__loc_shard *s = &x->map->shards[si];
    const uint8_t *lo = s->begin, *hi = s->end;
    uint32_t lol = s->begin_len, hil = s->end_len;
    int lo_min = lol == 0;
    int hi_max = !kcmp(hi, hil, kff, 1) || !kcmp(hi, hil, kffff, 2);
    rl_arena a;
    rl__arena_init(&a, 4096);
    int rc = RL_OK;
    x->requests++;
    switch (req->type) {
    case RL_MSG_GET: {
        const rl__msg_get_req *q = &req->u.get_req;
        if (kcmp(q->key, q->key_len, lo, lol) < 0 || kcmp(q->key, q->key_len, hi, hil) >= 0) {
            rc = RL_E_WRONG_SHARD_SERVER;
            break;
        }
        rl__msg_get_reply r = {0};
        int present;
        rc = rl__storage_get(x->st, q->version, q->key, q->key_len, &a, &present, &r.value, &r.value_len);
        if (rc) break;
        r.present = (uint8_t)present;
        if (!present) r.value_len = 0;
        ASSERT_OK(rl__msg_get_reply_encode(out, &r, NULL));
        break;
    }
    case RL_MSG_GET_KEY: {
        const rl__msg_get_key_req *q = &req->u.get_key_req;
        rl__select_result sr;
        rc = rl__storage_select(x->st, q->version, &q->sel, lo, lol, lo_min, hi, hil, hi_max, &a, &sr);
        if (rc) break;
        rl__msg_get_key_reply r;
        memset(&r, 0, sizeof r);
        r.resolved = (uint8_t)sr.resolved;
        r.sel.key = sr.key;
        r.sel.key_len = sr.key_len;
        r.sel.or_equal = 0;
        r.sel.offset = sr.resolved ? 1 : sr.offset;
        ASSERT_OK(rl__msg_get_key_reply_encode(out, &r, NULL));
        break;
    }
    default: { /* GET_RANGE, GET_MAPPED_RANGE */
        int mapped = req->type == RL_MSG_GET_MAPPED_RANGE;
        const rl_key_selector *b = mapped ? &req->u.get_mapped_range_req.begin : &req->u.get_range_req.begin;
        const rl_key_selector *e = mapped ? &req->u.get_mapped_range_req.end : &req->u.get_range_req.end;
        int reverse = mapped ? req->u.get_mapped_range_req.reverse : req->u.get_range_req.reverse;
        int limit = mapped ? req->u.get_mapped_range_req.limit : req->u.get_range_req.limit;
        long target = (long)(mapped ? req->u.get_mapped_range_req.target_bytes : req->u.get_range_req.target_bytes);
        rl__version v = mapped ? req->u.get_mapped_range_req.version : req->u.get_range_req.version;
        /* Ownership: the shard holds the begin anchor (forward) / the keys below the end anchor. */
        uint32_t al;
        const uint8_t *an = anchor(&a, reverse ? e : b, &al);
        int owns = reverse ? ((kcmp(an, al, lo, lol) > 0 || (al == 0 && lol == 0)) && kcmp(an, al, hi, hil) <= 0)
                           : (kcmp(an, al, lo, lol) >= 0 && kcmp(an, al, hi, hil) < 0);
        if (!owns) {
            rc = RL_E_WRONG_SHARD_SERVER;
            break;
        }
        rl__mapper *m = NULL;
        if (mapped &&
            (rc = rl__mapper_parse(req->u.get_mapped_range_req.mapper, req->u.get_mapped_range_req.mapper_len, &a, &m)))
            break;
        rl__range_bounds bd;
        rc = rl__storage_range_bounds(x->st, v, b, e, lo, lol, lo_min, hi, hil, hi_max, reverse, &a, &bd);
        if (rc) break;
        rl__msg_get_range_reply rr;
        rl__msg_get_mapped_range_reply mr;
        memset(&rr, 0, sizeof rr);
        memset(&mr, 0, sizeof mr);
        if (bd.unresolved) {
            rr.status = mr.status = RL_RANGE_SELECTOR_UNRESOLVED;
        } else {
            const uint8_t *rt = NULL;
            uint32_t rtl = 0;
            if (bd.read_through) rt = reverse ? lo : hi, rtl = reverse ? lol : hil;
            int more = 0, n = 0;
            if (kcmp(bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len) < 0) {
                if (!mapped) {
                    rl_keyvalue *kvs = NULL;
                    rc = rl__storage_get_range(x->st, v, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len,
                                               cap_limit(x, limit), target, reverse, &a, &kvs, &n, &more);
                    rr.kvs = kvs;
                } else {
                    rl__mapped_options o;
                    memset(&o, 0, sizeof o);
                    o.limit = cap_limit(x, limit);
                    o.target_bytes = target;
                    o.reverse = reverse;
                    o.secondary_row_limit = req->u.get_mapped_range_req.secondary_row_limit;
                    o.secondary_byte_limit = (long)req->u.get_mapped_range_req.secondary_byte_limit;
                    rl__mapped_entry *ents = NULL;
                    rc = rl__storage_get_mapped_range(x->st, v, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len, m, &o,
                                                      NULL, NULL, &a, &ents, &n, &more);
                    mr.entries = ents;
                }
                if (rc) break;
            }
            rr.n_kvs = mr.n_entries = (uint32_t)n;
            rr.more = mr.more = (uint8_t)more;
            rr.read_through = mr.read_through = rt;
            rr.read_through_len = mr.read_through_len = rtl;
            rr.resolved_begin = mr.resolved_begin = bd.rbegin;
            rr.resolved_begin_len = mr.resolved_begin_len = bd.rbegin_len;
            rr.resolved_end = mr.resolved_end = bd.rend;
            rr.resolved_end_len = mr.resolved_end_len = bd.rend_len;
        }
        if (mapped) ASSERT_OK(rl__msg_get_mapped_range_reply_encode(out, &mr, NULL));
        else ASSERT_OK(rl__msg_get_range_reply_encode(out, &rr, NULL));
        break;
    }
    }
    rl__arena_release(&a);
    if (rc == RL_E_WRONG_SHARD_SERVER) x->wrong_shard++;
    return rc;
}

/* Run r through the planner against the fake cluster. */
static int run_cluster(fx *x, rl__kv_read *r) {
    rl__cplan p;
    rl__cplan_options o;
    memset(&o, 0, sizeof o);
    int send = 0;
    int rc = rl__cplan_start(&p, r, &o, &send);
    while (rc == RL_OK && send) {
        int si = rl__locmap_find(x->map, p.route_key, p.route_key_len, p.route_backward);
        ASSERT_TRUE(si >= 0);
        ASSERT_TRUE(rl__locmap_pick(x->map, &x->map->shards[si], 0) >= 0);
        rl_buf out;
        rl__buf_init(&out);
        int code = serve(x, si, &p.req, &out);
        if (code) {
            rl__buf_release(&out);
            return code;
        }
        /* The transport's path: copy into the read's arena, decode there. */
        uint8_t *copy = out.len ? rl__arena_memdup(r->arena, out.data, out.len) : NULL;
        rl__msg m;
        ASSERT_OK(rl__msg_decode(p.req.type, RL_FRAME_REPLY, copy, out.len, r->arena, &m, NULL));
        rl__buf_release(&out);
        rc = rl__cplan_reply(&p, &m, &send);
    }
    return rc;
}

static void on_read(rl__kv_read *r, int err) { *(int *)r->ud = err; }

static int run_oracle(fx *x, rl__kv_read *r) {
    int err = -1;
    r->done = on_read;
    r->ud = &err;
    x->emb->vt->read(x->emb, r);
    return err;
}

static void expect_bytes(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl, const char *what) {
    if (kcmp(a, al, b, bl) != 0) fail_msg("%s differs (lengths %u and %u)", what, al, bl);
}

/* Compare the cluster's result (c) with the oracle's (o). */
static void compare(const rl__kv_read *c, int crc, const rl__kv_read *o, int orc) {
    ASSERT_RC(crc, orc);
    if (crc) return;
    switch (c->op) {
    case RL_KV_GET:
        ASSERT_EQ(c->present, o->present);
        if (c->present) expect_bytes(c->value, c->value_len, o->value, o->value_len, "value");
        return;
    case RL_KV_GET_KEY: expect_bytes(c->rbegin, c->rbegin_len, o->rbegin, o->rbegin_len, "resolved key"); return;
    default: break;
    }
    expect_bytes(c->rbegin, c->rbegin_len, o->rbegin, o->rbegin_len, "rbegin");
    expect_bytes(c->rend, c->rend_len, o->rend, o->rend_len, "rend");
    ASSERT_EQ(c->n, o->n);
    ASSERT_EQ(c->more, o->more);
    for (int i = 0; i < c->n; i++) {
        if (c->op == RL_KV_GET_RANGE) {
            expect_bytes(c->kvs[i].key, c->kvs[i].key_len, o->kvs[i].key, o->kvs[i].key_len, "row key");
            expect_bytes(c->kvs[i].value, c->kvs[i].value_len, o->kvs[i].value, o->kvs[i].value_len, "row value");
        } else {
            const rl_mapped_keyvalue *a = &c->mkvs[i], *b = &o->mkvs[i];
            expect_bytes(a->index.key, a->index.key_len, b->index.key, b->index.key_len, "index key");
            expect_bytes(a->index.value, a->index.value_len, b->index.value, b->index.value_len, "index value");
            ASSERT_EQ(a->is_range, b->is_range);
            expect_bytes(a->begin, a->begin_len, b->begin, b->begin_len, "secondary begin");
            expect_bytes(a->end, a->end_len, b->end, b->end_len, "secondary end");
            ASSERT_EQ(a->n_kvs, b->n_kvs);
            ASSERT_EQ(a->more, b->more);
            for (int j = 0; j < a->n_kvs; j++) {
                expect_bytes(a->kvs[j].key, a->kvs[j].key_len, b->kvs[j].key, b->kvs[j].key_len, "secondary key");
                expect_bytes(a->kvs[j].value, a->kvs[j].value_len, b->kvs[j].value, b->kvs[j].value_len,
                             "secondary value");
            }
        }
    }
}

static void dump_key(const char *what, const uint8_t *k, uint32_t kl) {
    rl_buf b;
    rl__buf_init(&b);
    rl__bytes_printable(&b, k, kl);
    printf("  %s '%s'\n", what, (const char *)b.data);
    rl__buf_release(&b);
}

/* Print a read that failed and the map it ran on (for replaying a seed). */
static void dump(const fx *x, const rl__kv_read *r) {
    printf("read op %d reverse %d limit %d target %ld max_key_len %u cap %d\n", r->op, r->reverse, r->limit,
           r->target_bytes, r->max_key_len, x->cap);
    if (r->op == RL_KV_GET) dump_key("key", r->key, r->key_len);
    dump_key("begin", r->begin.key, r->begin.key_len);
    printf("    or_equal %d offset %d\n", r->begin.or_equal, r->begin.offset);
    dump_key("end", r->end.key, r->end.key_len);
    printf("    or_equal %d offset %d\n", r->end.or_equal, r->end.offset);
    for (uint32_t i = 0; i < x->map->n_shards; i++)
        dump_key("shard begin", x->map->shards[i].begin, x->map->shards[i].begin_len);
}

/* Run one read both ways and compare. */
static void check_read(fx *x, const rl__kv_read *tmpl) {
    rl_arena ac, ao;
    rl__arena_init(&ac, 4096);
    rl__arena_init(&ao, 4096);
    rl__kv_read c = *tmpl, o = *tmpl;
    c.arena = &ac;
    o.arena = &ao;
    int crc = run_cluster(x, &c);
    int orc = run_oracle(x, &o);
    if (crc != orc || (crc == RL_OK && c.op >= RL_KV_GET_RANGE && (c.n != o.n || c.more != o.more))) dump(x, tmpl);
    compare(&c, crc, &o, orc);
    ASSERT_EQ(x->wrong_shard, 0);
    rl__arena_release(&ac);
    rl__arena_release(&ao);
}

/* ---- Random keys ---------------------------------------------------------------------------- */

static const uint8_t alpha[] = {0x00, 'a', 'b', 'c', 0xfe};

static void rand_key(fx *x, rl_buf *k, int maxlen) {
    rl__buf_reset(k);
    int n = (int)rl_test_rand_below(&x->rng, (uint64_t)maxlen + 1);
    for (int i = 0; i < n; i++) rl__buf_append_byte(k, alpha[rl_test_rand_below(&x->rng, sizeof alpha)]);
}

static int cmp_buf(const void *a, const void *b) {
    const rl_buf *x = a, *y = b;
    return rl__bytes_cmp(x->data, x->len, y->data, y->len);
}

/* Random shard boundaries from the same alphabet: up to max non-empty unique keys. */
static int rand_bounds(fx *x, rl_buf *bounds, int max) {
    int n = (int)rl_test_rand_below(&x->rng, (uint64_t)max + 1), m = 0;
    for (int i = 0; i < n; i++) {
        rl__buf_init(&bounds[m]);
        rand_key(x, &bounds[m], 3);
        if (bounds[m].len == 0) {
            rl__buf_release(&bounds[m]);
            continue;
        }
        m++;
    }
    qsort(bounds, (size_t)m, sizeof *bounds, cmp_buf);
    int u = 0;
    for (int i = 0; i < m; i++) {
        if (u && !cmp_buf(&bounds[u - 1], &bounds[i])) {
            rl__buf_release(&bounds[i]);
            continue;
        }
        bounds[u++] = bounds[i];
    }
    return u;
}

/* A selector the transaction layer would pass for max key mk: key <= mk, an or_equal anchor at
 * mk normalised away (txn_op.c's copy_sel). */
static rl_key_selector rand_sel(fx *x, rl_buf *k, const uint8_t *mk, uint32_t mkl) {
    rl_key_selector s;
    if (rl_test_rand_below(&x->rng, 8) == 0) {
        rl__buf_reset(k);
        rl__buf_append(k, mk, mkl);
    } else {
        rand_key(x, k, 3);
    }
    s.key = k->data;
    s.key_len = (uint32_t)k->len;
    s.or_equal = (int)rl_test_rand_below(&x->rng, 2);
    static const int offs[] = {1, 1, 1, 0, 0, 2, 3, -1, -2, 5, -4, 4};
    s.offset = offs[rl_test_rand_below(&x->rng, sizeof offs / sizeof offs[0])];
    if (s.or_equal && !kcmp(s.key, s.key_len, mk, mkl)) s.or_equal = 0;
    return s;
}

/* ---- Tests ------------------------------------------------------------------------------------- */

/* cluster-plan-1.1: the location cache: forward and backward lookups at and around every
 * boundary, the empty key, the system shard, keys past "\xff\xff", team picks, and refused maps. */
TEST(cluster_plan_1_1_locmap) {
    fx x;
    fx_open(&x, 1);
    rl_buf b[2];
    rl__buf_init(&b[0]);
    rl__buf_init(&b[1]);
    rl__buf_append(&b[0], "b", 1);
    rl__buf_append(&b[1], "d", 1);
    fx_map(&x, b, 2); /* ["", b) [b, d) [d, \xff) [\xff, \xff\xff) */
    const rl__locmap *m = x.map;
    ASSERT_EQ(m->n_shards, 4);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"", 0, 0), 0);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"", 0, 1), 0);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"a", 1, 0), 0);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"b", 1, 0), 1);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"b", 1, 1), 0); /* the keys below b */
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"b\x00", 2, 1), 1);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"d", 1, 1), 1);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"d", 1, 0), 2);
    ASSERT_EQ(rl__locmap_find(m, kff, 1, 0), 3);
    ASSERT_EQ(rl__locmap_find(m, kff, 1, 1), 2);
    ASSERT_EQ(rl__locmap_find(m, kffff, 2, 1), 3);
    ASSERT_EQ(rl__locmap_find(m, kffff, 2, 0), -1);
    ASSERT_EQ(rl__locmap_find(m, (const uint8_t *)"\xff\xff\x00", 3, 1), -1);
    /* The system shard is the coordinator's. */
    ASSERT_EQ(m->shards[3].n_team, 1);
    ASSERT_EQ(m->servers[rl__locmap_pick(m, &m->shards[3], 5)].id, 0);
    ASSERT_EQ(rl__locmap_server(m, 2), 2);
    ASSERT_EQ(rl__locmap_server(m, 9), -1);
    ASSERT_EQ(strcmp(m->servers[1].address, "127.0.0.1"), 0);
    ASSERT_EQ(m->servers[1].port, 4001);
    /* Picks: healthy first, rotating with the salt; unknown members skipped. */
    rl__loc_shard s = m->shards[1];
    s.n_team = 2;
    s.team_id[0] = 1, s.team_idx[0] = 1;
    s.team_id[1] = 2, s.team_idx[1] = 2;
    ASSERT_EQ(rl__locmap_pick(m, &s, 0), 1);
    ASSERT_EQ(rl__locmap_pick(m, &s, 1), 2);
    x.map->servers[2].healthy = 0;
    ASSERT_EQ(rl__locmap_pick(m, &s, 1), 1);
    /* Avoided members (failed just now) go last: healthy and not avoided, then not avoided,
     * then healthy, then known. */
    x.map->servers[2].healthy = 1;
    uint32_t av1[1] = {1}, av12[2] = {1, 2};
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 0, NULL, 0), 1);
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 0, av1, 1), 2);
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 1, av1, 1), 2);
    x.map->servers[2].healthy = 0;
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 0, av1, 1), 2);  /* unhealthy beats avoided */
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 0, av12, 2), 1); /* both avoided: the healthy one */
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 1, av12, 2), 1);
    x.map->servers[1].healthy = 0;
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 1, av12, 2), 2); /* all down: rotation */
    x.map->servers[1].healthy = 1;
    s.team_idx[0] = -1;
    ASSERT_EQ(rl__locmap_pick_avoid(m, &s, 0, NULL, 0), 2);
    ASSERT_EQ(rl__locmap_pick(m, &s, 0), 2); /* known but unhealthy beats unknown */
    s.team_idx[1] = -1;
    ASSERT_EQ(rl__locmap_pick(m, &s, 0), -1);
    /* Maps that do not cover ["", "\xff\xff") are refused with a reason. */
    rl__msg_server srv = {0, RL_ROLE_COORDINATOR, (const uint8_t *)"127.0.0.1", 9, 1, (const uint8_t *)"h", 1, 1};
    uint32_t team0[1] = {0};
    rl__msg_shard one = {(const uint8_t *)"a", 1, kffff, 2, team0, 1};
    rl__msg_get_shard_map_reply bad = {1, &srv, 1, &one, 1, 0, 0};
    rl__locmap *lm = NULL;
    rl__errdetail why;
    rl__errdetail_init(&why, NULL);
    ASSERT_RC(rl__locmap_new(&bad, &lm, &why), RL_E_MALFORMED_FRAME);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&why), "begin"));
    one.begin_len = 0;
    one.end = kff, one.end_len = 1;
    rl__errdetail_clear(&why);
    ASSERT_RC(rl__locmap_new(&bad, &lm, &why), RL_E_MALFORMED_FRAME);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&why), "end"));
    one.end = kffff, one.end_len = 2;
    srv.address = (const uint8_t *)"10.0.0.1", srv.address_len = 8;
    ASSERT_RC(rl__locmap_new(&bad, &lm, NULL), RL_E_MALFORMED_FRAME);
    srv.address = (const uint8_t *)"127.0.0.1", srv.address_len = 9;
    ASSERT_OK(rl__locmap_new(&bad, &lm, NULL));
    ASSERT_EQ(lm->shards[0].team_idx[0], 0);
    rl__locmap_unref(lm);
    rl__buf_release(&b[0]);
    rl__buf_release(&b[1]);
    fx_close(&x);
}

/* Load random keys (the alphabet, lengths 0-3, plus some system keys) into both sides. */
static void load_random(fx *x, int nkeys) {
    rl__mutation muts[80] = {{0}};
    rl_buf keys[80], vals[80];
    int n = 0;
    for (int i = 0; i < nkeys && n < 80; i++, n++) {
        rl__buf_init(&keys[n]);
        rl__buf_init(&vals[n]);
        if (rl_test_rand_below(&x->rng, 8) == 0) { /* a system key: \xff, \xff + "a", \xff\xfe */
            int t = (int)rl_test_rand_below(&x->rng, 3);
            rl__buf_append_byte(&keys[n], 0xff);
            if (t == 1) rl__buf_append(&keys[n], "a", 1);
            if (t == 2) rl__buf_append_byte(&keys[n], 0xfe);
        } else {
            rand_key(x, &keys[n], 3);
        }
        rl__buf_printf(&vals[n], "v%d-%llu", i, (unsigned long long)rl_test_rand_below(&x->rng, 1000));
        if (rl_test_rand_below(&x->rng, 4) == 0) rl__buf_append(&vals[n], "0123456789abcdef", 16);
        muts[n].type = RL_MUT_SET;
        muts[n].p1 = keys[n].data;
        muts[n].len1 = (uint32_t)keys[n].len;
        muts[n].p2 = vals[n].data;
        muts[n].len2 = (uint32_t)vals[n].len;
    }
    write_both(x, muts, (size_t)n);
    for (int i = 0; i < n; i++) {
        rl__buf_release(&keys[i]);
        rl__buf_release(&vals[i]);
    }
}

/* cluster-plan-1.2: random gets, get_keys and ranges (selectors with offsets, limits, target
 * bytes, both directions, with and without system keys) over random data and random shard maps,
 * with random reply caps: every result equals the embedded backend's. */
TEST(cluster_plan_1_2_random_reads) {
    uint64_t seed = rl_test_seed();
    fx x;
    fx_open(&x, seed);
    rl_buf ka, kb;
    rl__buf_init(&ka);
    rl__buf_init(&kb);
    int rounds = 60, reads = 150;
    for (int round = 0; round < rounds; round++) {
        load_random(&x, 1 + (int)rl_test_rand_below(&x.rng, 25));
        if (round % 3 == 2) { /* clear some, so shards go empty */
            rand_key(&x, &ka, 2);
            rand_key(&x, &kb, 3);
            if (cmp_buf(&ka, &kb) > 0) {
                rl_buf t = ka;
                ka = kb;
                kb = t;
            }
            rl__mutation cm = {RL_MUT_CLEAR_RANGE, ka.data, (uint32_t)ka.len, kb.data, (uint32_t)kb.len};
            write_both(&x, &cm, 1);
        }
        rl_buf bounds[12];
        int nb = rand_bounds(&x, bounds, 10);
        fx_map(&x, bounds, nb);
        for (int i = 0; i < nb; i++) rl__buf_release(&bounds[i]);
        static const int caps[] = {0, 0, 1, 2, 3, 7};
        for (int i = 0; i < reads; i++) {
            x.cap = caps[rl_test_rand_below(&x.rng, sizeof caps / sizeof caps[0])];
            rl__kv_read r;
            memset(&r, 0, sizeof r);
            int sys = (int)rl_test_rand_below(&x.rng, 3) == 0;
            r.max_key = sys ? kffff : kff;
            r.max_key_len = sys ? 2 : 1;
            r.version = x.v - rl_test_rand_below(&x.rng, 2) * (x.v > 1);
            int op = 1 + (int)rl_test_rand_below(&x.rng, 3); /* GET, GET_KEY, GET_RANGE */
            r.op = op;
            if (op == RL_KV_GET) {
                rand_key(&x, &ka, 3);
                if (sys && rl_test_rand_below(&x.rng, 3) == 0) {
                    rl__buf_reset(&ka);
                    rl__buf_append_byte(&ka, 0xff);
                    if (rl_test_rand_below(&x.rng, 2)) rl__buf_append(&ka, "a", 1);
                }
                r.key = ka.data;
                r.key_len = (uint32_t)ka.len;
            } else {
                r.begin = rand_sel(&x, &ka, r.max_key, r.max_key_len);
                r.end = rand_sel(&x, &kb, r.max_key, r.max_key_len);
                r.reverse = (int)rl_test_rand_below(&x.rng, 2);
                static const int limits[] = {0, 0, 1, 2, 3, 5, 10};
                r.limit = limits[rl_test_rand_below(&x.rng, sizeof limits / sizeof limits[0])];
                static const long targets[] = {0, 0, 0, 1, 10, 25, 60};
                r.target_bytes = targets[rl_test_rand_below(&x.rng, sizeof targets / sizeof targets[0])];
            }
            check_read(&x, &r);
        }
    }
    rl__buf_release(&ka);
    rl__buf_release(&kb);
    fx_close(&x);
}

/* ---- Mapped reads -------------------------------------------------------------------------------- */

static void pack_key(rl_buf *b, const char *s, int64_t a, int64_t c, int nc) {
    rl__tuple_packer pk;
    rl__buf_reset(b);
    rl__tuple_packer_init(&pk, b);
    rl__tuple_pack_string(&pk, s, strlen(s));
    rl__tuple_pack_int(&pk, a);
    if (nc > 0) rl__tuple_pack_int(&pk, c);
}

/* Records ("r", id, chunk) with 1-3 chunks (some ids missing: orphans), index ("i", price, id),
 * written to both sides; the packed keys are returned for shard boundaries. */
static int load_orders(fx *x, int n, rl_buf *keys, int maxkeys) {
    rl__mutation muts[400] = {{0}};
    rl_buf kb[400], vb[400];
    int nm = 0, nk = 0;
    for (int id = 1; id <= n; id++) {
        int chunks = (int)rl_test_rand_below(&x->rng, 4); /* 0: missing record */
        for (int c = 0; c < chunks && nm < 400; c++, nm++) {
            rl__buf_init(&kb[nm]);
            rl__buf_init(&vb[nm]);
            pack_key(&kb[nm], "r", id, c, 1);
            rl__buf_printf(&vb[nm], "rec%d.%d", id, c);
            muts[nm] = (rl__mutation){RL_MUT_SET, kb[nm].data, (uint32_t)kb[nm].len, vb[nm].data, (uint32_t)vb[nm].len};
            if (nk < maxkeys && rl_test_rand_below(&x->rng, 6) == 0) {
                rl__buf_init(&keys[nk]);
                rl__buf_append(&keys[nk++], kb[nm].data, kb[nm].len);
            }
        }
        if (nm >= 400) break;
        rl__buf_init(&kb[nm]);
        rl__buf_init(&vb[nm]);
        rl__tuple_packer pk;
        rl__tuple_packer_init(&pk, &kb[nm]);
        rl__tuple_pack_string(&pk, "i", 1);
        rl__tuple_pack_int(&pk, (int64_t)rl_test_rand_below(&x->rng, 50));
        rl__tuple_pack_int(&pk, id);
        muts[nm] = (rl__mutation){RL_MUT_SET, kb[nm].data, (uint32_t)kb[nm].len, vb[nm].data, 0};
        if (nk < maxkeys && rl_test_rand_below(&x->rng, 6) == 0) {
            rl__buf_init(&keys[nk]);
            rl__buf_append(&keys[nk++], kb[nm].data, kb[nm].len);
        }
        nm++;
    }
    write_both(x, muts, (size_t)nm);
    for (int i = 0; i < nm; i++) {
        rl__buf_release(&kb[i]);
        rl__buf_release(&vb[i]);
    }
    return nk;
}

/* cluster-plan-1.3: random mapped reads (index ranges given by selectors with offsets, limits,
 * both directions, secondaries split across shards) equal the embedded backend's; with target
 * bytes, whose accounting depends on where the pages fall, the rows are still the embedded
 * result's first rows and `more` is right about what follows them. Also the mapper errors. */
TEST(cluster_plan_1_3_random_mapped) {
    uint64_t seed = rl_test_seed();
    fx x;
    fx_open(&x, seed);
    rl_buf mapper, ka, kb;
    rl__buf_init(&mapper);
    rl__buf_init(&ka);
    rl__buf_init(&kb);
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, &mapper);
    rl__tuple_pack_string(&pk, "r", 1);
    rl__tuple_pack_string(&pk, "{K[2]}", 6);
    rl__tuple_pack_string(&pk, "{...}", 5);
    for (int round = 0; round < 12; round++) {
        rl_buf keys[40];
        int nk = load_orders(&x, 40 + (int)rl_test_rand_below(&x.rng, 60), keys, 30);
        qsort(keys, (size_t)nk, sizeof *keys, cmp_buf);
        int u = 0;
        for (int i = 0; i < nk; i++) {
            if (u && !cmp_buf(&keys[u - 1], &keys[i])) {
                rl__buf_release(&keys[i]);
                continue;
            }
            keys[u++] = keys[i];
        }
        fx_map(&x, keys, u);
        for (int i = 0; i < u; i++) rl__buf_release(&keys[i]);
        for (int i = 0; i < 150; i++) {
            static const int caps[] = {0, 0, 1, 3, 7};
            x.cap = caps[rl_test_rand_below(&x.rng, 5)];
            rl__kv_read r;
            memset(&r, 0, sizeof r);
            r.op = RL_KV_GET_MAPPED;
            r.max_key = kff;
            r.max_key_len = 1;
            r.version = x.v;
            r.mapper = mapper.data;
            r.mapper_len = mapper.len;
            int lo = (int)rl_test_rand_below(&x.rng, 52) - 1, hi = lo + (int)rl_test_rand_below(&x.rng, 30);
            pack_key(&ka, "i", lo, 0, 0);
            pack_key(&kb, "i", hi, 0, 0);
            if (rl_test_rand_below(&x.rng, 10) == 0) rl__buf_reset(&ka); /* from "" */
            r.begin = (rl_key_selector){ka.data, (uint32_t)ka.len, (int)rl_test_rand_below(&x.rng, 2), 1};
            r.end = (rl_key_selector){kb.data, (uint32_t)kb.len, 0, 1};
            static const int offs[] = {1, 1, 1, 2, 4, 0, -1};
            r.begin.offset = offs[rl_test_rand_below(&x.rng, 7)];
            r.end.offset = offs[rl_test_rand_below(&x.rng, 7)];
            r.reverse = (int)rl_test_rand_below(&x.rng, 2);
            static const int limits[] = {0, 0, 1, 2, 5, 9};
            r.limit = limits[rl_test_rand_below(&x.rng, 6)];
            if (rl_test_rand_below(&x.rng, 4) == 0) {
                r.target_bytes = 1 + (long)rl_test_rand_below(&x.rng, 200);
                rl_arena ac, ao;
                rl__arena_init(&ac, 4096);
                rl__arena_init(&ao, 4096);
                rl__kv_read c = r, o = r;
                c.arena = &ac;
                o.arena = &ao;
                o.target_bytes = 0;
                o.limit = 0;
                ASSERT_OK(run_cluster(&x, &c));
                ASSERT_OK(run_oracle(&x, &o));
                ASSERT_TRUE(c.n <= o.n);
                ASSERT_TRUE(c.n >= 1 || o.n == 0);
                ASSERT_EQ(c.more, c.n < o.n);
                for (int j = 0; j < c.n; j++)
                    expect_bytes(c.mkvs[j].index.key, c.mkvs[j].index.key_len, o.mkvs[j].index.key,
                                 o.mkvs[j].index.key_len, "index key");
                rl__arena_release(&ac);
                rl__arena_release(&ao);
                continue;
            }
            check_read(&x, &r);
        }
    }
    /* Mapper errors: from the server, and for an empty range from the planner itself. */
    rl_buf bad;
    rl__buf_init(&bad);
    rl__tuple_packer_init(&pk, &bad);
    rl__tuple_pack_string(&pk, "{...}", 5);
    rl__tuple_pack_string(&pk, "r", 1);
    for (int empty = 0; empty < 2; empty++) {
        rl__kv_read r;
        memset(&r, 0, sizeof r);
        r.op = RL_KV_GET_MAPPED;
        r.max_key = kff;
        r.max_key_len = 1;
        r.version = x.v;
        r.mapper = bad.data;
        r.mapper_len = bad.len;
        pack_key(&ka, "i", 0, 0, 0);
        pack_key(&kb, "i", empty ? 0 : 60, 0, 0);
        r.begin = (rl_key_selector){ka.data, (uint32_t)ka.len, 0, 1};
        r.end = (rl_key_selector){kb.data, (uint32_t)kb.len, 0, 1};
        check_read(&x, &r);
    }
    rl__buf_release(&bad);
    rl__buf_release(&mapper);
    rl__buf_release(&ka);
    rl__buf_release(&kb);
    fx_close(&x);
}

/* cluster-plan-1.4: a limit met exactly at a shard's end costs one probe, which finds out whether
 * rows remain (more exact), skipping empty shards; a range split over every shard pages through
 * all of them in order; reverse too. */
TEST(cluster_plan_1_4_paging_and_probe) {
    fx x;
    fx_open(&x, 4);
    rl__mutation muts[4];
    const char *ks[4] = {"a1", "a2", "c1", "e1"};
    for (int i = 0; i < 4; i++)
        muts[i] = (rl__mutation){RL_MUT_SET, (const uint8_t *)ks[i], 2, (const uint8_t *)"v", 1};
    write_both(&x, muts, 4);
    rl_buf b[4];
    const char *bs[4] = {"b", "c", "d", "e"}; /* [,b) [b,c) [c,d) [d,e) [e,\xff) */
    for (int i = 0; i < 4; i++) {
        rl__buf_init(&b[i]);
        rl__buf_append(&b[i], bs[i], 1);
    }
    fx_map(&x, b, 4);
    rl__kv_read r;
    memset(&r, 0, sizeof r);
    r.op = RL_KV_GET_RANGE;
    r.version = x.v;
    r.max_key = kff;
    r.max_key_len = 1;
    r.begin = RL_FIRST_GREATER_OR_EQUAL("", 0);
    r.end = RL_FIRST_GREATER_OR_EQUAL("\xff", 1);
    /* Limit 2 ends exactly at shard ["", b): one probe over the empty [b, c) into [c, d). */
    r.limit = 2;
    x.requests = 0;
    check_read(&x, &r);
    ASSERT_EQ(x.requests, 3); /* the page, a probe of the empty [b, c), a probe that finds c1 */
    /* Everything: pages over all five shards (empty ones included). */
    r.limit = 0;
    x.requests = 0;
    check_read(&x, &r);
    ASSERT_EQ(x.requests, 5);
    /* Limit 4 ends at the last row, in the last shard: no probe. */
    r.limit = 4;
    x.requests = 0;
    check_read(&x, &r);
    ASSERT_EQ(x.requests, 5);
    /* Reverse, limit 1: "e1" from the last shard, more (probe finds c1 after empty [d, e)). */
    r.limit = 1;
    r.reverse = 1;
    x.requests = 0;
    check_read(&x, &r);
    ASSERT_EQ(x.requests, 1 + 2);
    /* Reverse limit 4: every row; the probe is not needed at "" (the range's end). */
    r.limit = 4;
    x.requests = 0;
    check_read(&x, &r);
    ASSERT_EQ(x.requests, 5);
    for (int i = 0; i < 4; i++) rl__buf_release(&b[i]);
    fx_close(&x);
}

/* cluster-plan-1.5: selectors walk across shards: a get_key with a large offset crosses every
 * shard with one GET_KEY each (forward and backward) and clamps at "" and max_key; with system
 * keys, a selector clamped at "\xff" by the last user shard continues into the system shard. */
TEST(cluster_plan_1_5_selector_steps) {
    fx x;
    fx_open(&x, 5);
    rl__mutation muts[6];
    const char *ks[6] = {"a", "b1", "c1", "c2", "\xff", "\xff/x"};
    for (int i = 0; i < 6; i++)
        muts[i] = (rl__mutation){RL_MUT_SET, (const uint8_t *)ks[i], (uint32_t)strlen(ks[i]), (const uint8_t *)"v", 1};
    write_both(&x, muts, 6);
    rl_buf b[2];
    rl__buf_init(&b[0]);
    rl__buf_init(&b[1]);
    rl__buf_append(&b[0], "b", 1);
    rl__buf_append(&b[1], "c", 1);
    fx_map(&x, b, 2);
    rl__kv_read r;
    memset(&r, 0, sizeof r);
    r.op = RL_KV_GET_KEY;
    r.version = x.v;
    r.max_key = kff;
    r.max_key_len = 1;
    for (int off = -6; off <= 6; off++) {
        r.begin = (rl_key_selector){(const uint8_t *)"b", 1, 0, off};
        check_read(&x, &r);
        r.begin = (rl_key_selector){(const uint8_t *)"", 0, 1, off};
        check_read(&x, &r);
    }
    /* firstGreaterOrEqual("a") + 3 = "c2": three shards, three GET_KEYs. */
    r.begin = (rl_key_selector){(const uint8_t *)"a", 1, 0, 4};
    x.requests = 0;
    check_read(&x, &r);
    ASSERT_EQ(x.requests, 3);
    /* With system keys: c2 + 2 = "\xff/x" through the count fallback. */
    r.max_key = kffff;
    r.max_key_len = 2;
    for (int off = 1; off <= 7; off++) {
        r.begin = (rl_key_selector){(const uint8_t *)"b", 1, 0, off};
        check_read(&x, &r);
    }
    for (int off = -6; off <= 0; off++) {
        r.begin = (rl_key_selector){(const uint8_t *)"\xff/y", 3, 0, off};
        check_read(&x, &r);
    }
    /* A range whose end selector runs into the system keyspace. */
    r.op = RL_KV_GET_RANGE;
    r.begin = RL_FIRST_GREATER_OR_EQUAL("b", 1);
    r.end = (rl_key_selector){(const uint8_t *)"c2", 2, 0, 3};
    check_read(&x, &r);
    r.reverse = 1;
    check_read(&x, &r);
    rl__buf_release(&b[0]);
    rl__buf_release(&b[1]);
    fx_close(&x);
}

/* cluster-plan-1.6: replies that break the rules fail the read with malformed_frame instead of
 * looping: rows out of order or outside the range, more without rows, a read_through that goes
 * backwards, a selector continuation that does not move, a reply of the wrong type. */
TEST(cluster_plan_1_6_bad_replies) {
    rl_arena a;
    rl__arena_init(&a, 4096);
    rl__kv_read r;
    memset(&r, 0, sizeof r);
    r.op = RL_KV_GET_RANGE;
    r.arena = &a;
    r.max_key = kff;
    r.max_key_len = 1;
    r.begin = RL_FIRST_GREATER_OR_EQUAL("b", 1);
    r.end = RL_FIRST_GREATER_OR_EQUAL("m", 1);
    rl__cplan p;
    int send;
    rl__msg m;
    rl_keyvalue rows[2] = {{(const uint8_t *)"d", 1, (const uint8_t *)"", 0},
                           {(const uint8_t *)"c", 1, (const uint8_t *)"", 0}};
    /* Out of order. */
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    ASSERT_EQ(send, 1);
    ASSERT_EQ(p.route_backward, 0);
    ASSERT_MEM_EQ(p.route_key, p.route_key_len, "b", 1);
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_RANGE;
    m.flags = RL_FRAME_REPLY;
    m.u.get_range_reply.kvs = rows;
    m.u.get_range_reply.n_kvs = 2;
    m.u.get_range_reply.resolved_begin = (const uint8_t *)"b";
    m.u.get_range_reply.resolved_begin_len = 1;
    m.u.get_range_reply.resolved_end = (const uint8_t *)"m";
    m.u.get_range_reply.resolved_end_len = 1;
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    /* Outside the range. */
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    rows[0].key = (const uint8_t *)"a";
    m.u.get_range_reply.n_kvs = 1;
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    /* more without rows. */
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    m.u.get_range_reply.n_kvs = 0;
    m.u.get_range_reply.more = 1;
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    /* read_through that does not move past the start. */
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    m.u.get_range_reply.more = 0;
    m.u.get_range_reply.read_through = (const uint8_t *)"a";
    m.u.get_range_reply.read_through_len = 1;
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    /* A good read_through moves the next page there. */
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    m.u.get_range_reply.read_through = (const uint8_t *)"f";
    ASSERT_OK(rl__cplan_reply(&p, &m, &send));
    ASSERT_EQ(send, 1);
    ASSERT_MEM_EQ(p.route_key, p.route_key_len, "f", 1);
    ASSERT_MEM_EQ(p.req.u.get_range_req.begin.key, p.req.u.get_range_req.begin.key_len, "f", 1);
    ASSERT_MEM_EQ(p.req.u.get_range_req.end.key, p.req.u.get_range_req.end.key_len, "m", 1);
    /* Wrong reply type. */
    m.type = RL_MSG_GET;
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    /* A GET_KEY continuation must move forward. */
    r.op = RL_KV_GET_KEY;
    r.begin = (rl_key_selector){(const uint8_t *)"c", 1, 0, 3};
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    ASSERT_EQ(p.req.type, RL_MSG_GET_KEY);
    memset(&m, 0, sizeof m);
    m.type = RL_MSG_GET_KEY;
    m.flags = RL_FRAME_REPLY;
    m.u.get_key_reply.resolved = 0;
    m.u.get_key_reply.sel = (rl_key_selector){(const uint8_t *)"c", 1, 0, 2};
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    m.u.get_key_reply.sel = (rl_key_selector){(const uint8_t *)"d", 1, 0, 4}; /* offset grew */
    ASSERT_RC(rl__cplan_reply(&p, &m, &send), RL_E_MALFORMED_FRAME);
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    m.u.get_key_reply.sel = (rl_key_selector){(const uint8_t *)"d", 1, 0, 2};
    ASSERT_OK(rl__cplan_reply(&p, &m, &send));
    ASSERT_EQ(send, 1);
    ASSERT_MEM_EQ(p.route_key, p.route_key_len, "d", 1);
    /* Backward steps route to the shard below their anchor. */
    r.begin = (rl_key_selector){(const uint8_t *)"c", 1, 1, -1};
    ASSERT_OK(rl__cplan_start(&p, &r, NULL, &send));
    ASSERT_EQ(p.route_backward, 1);
    ASSERT_MEM_EQ(p.route_key, p.route_key_len, "c\x00", 2);
    rl__arena_release(&a);
}

RL_TEST_MAIN(T(cluster_plan_1_1_locmap), T(cluster_plan_1_2_random_reads), T(cluster_plan_1_3_random_mapped),
             T(cluster_plan_1_4_paging_and_probe), T(cluster_plan_1_5_selector_steps), T(cluster_plan_1_6_bad_replies))
