/* plan.c — the cluster client's read planner (plan.h states what it does and its invariants).
 *
 * Phases of a plan and the request each one waits for:
 *
 *     start ──GET──────────────▶ PH_GET ────────────────────────────────────────▶ done
 *       ├──GET_KEY─────────────▶ PH_SEL ──unresolved: next shard──▶ PH_SEL
 *       │                          │  └──clamped at \xff (system keys)──▶ PH_COUNT ──▶ PH_SEL
 *       │                          └──resolved──▶ (GET_KEY: done; fallback: next selector / pages)
 *       ├──range, selectors──────▶ PH_FIRST ──selector_unresolved──▶ fallback: PH_SEL (begin, end)
 *       │                          └──rows──▶ page logic
 *       └──range, fallback at once (invariant 6)──▶ PH_SEL ... ──▶ PH_PAGE
 *
 *     page logic (after PH_FIRST / PH_PAGE):
 *       limit or target met:  more from the server → done (more 1)
 *                             read_through       → PH_PROBE (GET_RANGE limit 1) → done
 *                             else               → done (more 0)
 *       not met:              more               → PH_PAGE after the last row
 *                             read_through       → PH_PAGE at the boundary
 *                             else               → done
 *
 *     function       phase(s) it handles
 *     -------------  --------------------------------------------
 *     sel_step       sends the GET_KEY of the selector being resolved (or answers it at once)
 *     sel_done       a selector resolved: finishes GET_KEY, or moves the fallback on
 *     on_sel_reply   PH_SEL
 *     count_*        PH_COUNT
 *     page_*         PH_FIRST, PH_PAGE
 *     probe_*        PH_PROBE
 */
#include <string.h>

#include "base/bytes.h"
#include "kv/cluster/plan.h"
#include "storage/mapped.h"

enum { PH_NONE = 0, PH_GET, PH_SEL, PH_COUNT, PH_FIRST, PH_PAGE, PH_PROBE, PH_DONE, PH_METRICS, PH_WATCH };
enum { SEL_GETKEY = 1, SEL_BEGIN, SEL_END };

/* A bound on the requests of one read: far beyond any real read (each request makes progress
 * over a finite shard map), it only stops a server that keeps answering with tiny steps. */
#define MAX_REQUESTS 10000000u

struct rl__cplan_page {
    const void *items; /* rl_keyvalue or rl_mapped_keyvalue, n of them (in the arena) */
    int n;
    rl__cplan_page *next;
};

static const uint8_t key_ff[1] = {0xff};

/* ---- Small helpers ----------------------------------------------------------------------- */

static int kcmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) { return rl__bytes_cmp(a, al, b, bl); }

static int is_mapped(const rl__cplan *p) { return p->r->op == RL_KV_GET_MAPPED; }

/* The anchor of a selector: its key, or key + "\x00" with or_equal (the first key >= it is the
 * selector's offset 1). NULL on OOM. */
static const uint8_t *anchor_of(rl_arena *a, const rl_key_selector *s, uint32_t *out_len) {
    const uint8_t *k = s->key ? s->key : (const uint8_t *)"";
    if (!s->or_equal) {
        *out_len = s->key_len;
        return k;
    }
    uint8_t *x = rl__arena_alloc(a, (size_t)s->key_len + 1);
    if (!x) return NULL;
    if (s->key_len) memcpy(x, k, s->key_len);
    x[s->key_len] = 0;
    *out_len = s->key_len + 1;
    return x;
}

static rl_key_selector fge(const uint8_t *k, uint32_t kl) {
    rl_key_selector s = {k ? k : (const uint8_t *)"", kl, 0, 1};
    return s;
}

/* Set the route of the next request and count it. */
static int route(rl__cplan *p, const uint8_t *k, uint32_t kl, int backward, int *out_send) {
    if (++p->requests > MAX_REQUESTS) return RL_E_MALFORMED_FRAME;
    p->route_key = k ? k : (const uint8_t *)"";
    p->route_key_len = kl;
    p->route_backward = backward;
    p->req.flags = 0;
    *out_send = 1;
    return RL_OK;
}

/* ---- Finishing ----------------------------------------------------------------------------- */

/* Join the pages into r's result array (one page is used as it is). */
static int finish_range(rl__cplan *p, int more, int *out_send) {
    rl__kv_read *r = p->r;
    size_t esz = is_mapped(p) ? sizeof(rl_mapped_keyvalue) : sizeof(rl_keyvalue);
    const void *items = NULL;
    if (p->head && !p->head->next) {
        items = p->head->items;
    } else if (p->rows > 0) {
        uint8_t *all = rl__arena_alloc(r->arena, esz * (size_t)p->rows);
        if (!all) return RL_E_OUT_OF_MEMORY;
        size_t off = 0;
        for (rl__cplan_page *g = p->head; g; g = g->next) {
            if (g->n) memcpy(all + off, g->items, esz * (size_t)g->n);
            off += esz * (size_t)g->n;
        }
        items = all;
    }
    if (is_mapped(p)) r->mkvs = (rl_mapped_keyvalue *)items;
    else r->kvs = (rl_keyvalue *)items;
    r->n = p->rows;
    r->more = more;
    r->rbegin = p->rb, r->rbegin_len = p->rbl;
    r->rend = p->re, r->rend_len = p->rel;
    p->phase = PH_DONE;
    *out_send = 0;
    return RL_OK;
}

/* An empty range needs no request; a mapped read still checks its mapper (as the embedded
 * backend does before it looks at the range). */
static int finish_empty(rl__cplan *p, int *out_send) {
    if (is_mapped(p)) {
        rl__mapper *m = NULL;
        int rc = rl__mapper_parse(p->r->mapper, p->r->mapper_len, p->r->arena, &m);
        if (rc) return rc;
    }
    return finish_range(p, 0, out_send);
}

/* ---- Selectors (GET_KEY steps) ------------------------------------------------------------- */

static int page_send(rl__cplan *p, int *out_send);
static int sel_step(rl__cplan *p, int *out_send);

/* The selector being resolved resolved to key (in the arena or static). */
static int sel_done(rl__cplan *p, const uint8_t *key, uint32_t kl, int *out_send) {
    rl__kv_read *r = p->r;
    switch (p->sel_for) {
    case SEL_GETKEY:
        r->rbegin = key, r->rbegin_len = kl;
        p->phase = PH_DONE;
        *out_send = 0;
        return RL_OK;
    case SEL_BEGIN: {
        p->rb = key, p->rbl = kl;
        p->sel_for = SEL_END;
        if (r->end.offset == 1) { /* a range bound of offset 1 is its anchor, unread */
            uint32_t al;
            const uint8_t *an = anchor_of(r->arena, &r->end, &al);
            if (!an) return RL_E_OUT_OF_MEMORY;
            return sel_done(p, an, al, out_send);
        }
        p->sel = r->end;
        return sel_step(p, out_send);
    }
    default: /* SEL_END: read [rb, re) */
        p->re = key, p->rel = kl;
        if (kcmp(p->rb, p->rbl, p->re, p->rel) >= 0) return finish_empty(p, out_send);
        p->cb = p->rb, p->cbl = p->rbl;
        p->ce = p->re, p->cel = p->rel;
        p->phase = PH_PAGE;
        return page_send(p, out_send);
    }
}

/* Send the GET_KEY of p->sel, or answer it at once when its anchor is at an end of the readable
 * keyspace: forward from max_key stays there; backward from "" stays there. */
static int sel_step(rl__cplan *p, int *out_send) {
    rl__kv_read *r = p->r;
    uint32_t al;
    const uint8_t *an = anchor_of(r->arena, &p->sel, &al);
    if (!an) return RL_E_OUT_OF_MEMORY;
    int backward = p->sel.offset <= 0;
    if (!backward && kcmp(an, al, r->max_key, r->max_key_len) >= 0)
        return sel_done(p, r->max_key, r->max_key_len, out_send);
    if (backward && al == 0) return sel_done(p, (const uint8_t *)"", 0, out_send);
    p->phase = PH_SEL;
    memset(&p->req, 0, sizeof p->req);
    p->req.type = RL_MSG_GET_KEY;
    p->req.u.get_key_req.version = r->version;
    p->req.u.get_key_req.sel = p->sel;
    p->req.u.get_key_req.sel.or_equal = p->sel.or_equal != 0;
    if (!p->req.u.get_key_req.sel.key) p->req.u.get_key_req.sel.key = (const uint8_t *)"";
    return route(p, an, al, backward, out_send);
}

/* Count keys in [count_from, "\xff") forward (invariant 6). */
static int count_send(rl__cplan *p, int *out_send) {
    rl__kv_read *r = p->r;
    p->phase = PH_COUNT;
    memset(&p->req, 0, sizeof p->req);
    p->req.type = RL_MSG_GET_RANGE;
    rl__msg_get_range_req *q = &p->req.u.get_range_req;
    q->version = r->version;
    q->begin = fge(p->count_from, p->count_from_len);
    q->end = fge(key_ff, 1);
    long left = p->count_want - p->count_got;
    q->limit = left > 0x7fffffffL ? 0x7fffffff : (int32_t)left;
    return route(p, p->count_from, p->count_from_len, 0, out_send);
}

static int on_sel_reply(rl__cplan *p, const rl__msg_get_key_reply *g, int *out_send) {
    rl__kv_read *r = p->r;
    uint32_t al;
    const uint8_t *an = anchor_of(r->arena, &p->sel, &al);
    if (!an) return RL_E_OUT_OF_MEMORY;
    const uint8_t *k = g->sel.key ? g->sel.key : (const uint8_t *)"";
    uint32_t kl = g->sel.key_len;
    if (g->resolved) {
        if (r->max_key_len == 2 && p->sel.offset >= 1 && kl == 1 && k[0] == 0xff &&
            kcmp(an, al, key_ff, 1) < 0) { /* clamped at the user keyspace's end (invariant 6) */
            p->count_want = p->sel.offset;
            p->count_got = 0;
            p->count_from = an, p->count_from_len = al;
            return count_send(p, out_send);
        }
        if (kcmp(k, kl, r->max_key, r->max_key_len) > 0) k = r->max_key, kl = r->max_key_len;
        if (p->sel.offset >= 1 ? kcmp(k, kl, an, al) < 0 : kcmp(k, kl, an, al) >= 0)
            return RL_E_MALFORMED_FRAME; /* resolved on the wrong side of its anchor */
        return sel_done(p, k, kl, out_send);
    }
    /* Continue on the adjacent shard: forward past the shard's end, or backward from its
     * begin; either way the selector must move (invariant 2). */
    rl_key_selector n = g->sel;
    n.or_equal = 0;
    if (p->sel.offset >= 1) {
        if (n.offset < 1 || n.offset > p->sel.offset || kcmp(k, kl, an, al) <= 0) return RL_E_MALFORMED_FRAME;
    } else {
        if (n.offset > 0 || n.offset < p->sel.offset || kcmp(k, kl, an, al) >= 0) return RL_E_MALFORMED_FRAME;
    }
    n.key = k;
    p->sel = n;
    return sel_step(p, out_send);
}

/* Rows checked in order inside [from, "\xff"); counting continues or ends. */
static int on_count_reply(rl__cplan *p, const rl__msg_get_range_reply *g, int *out_send) {
    if (g->status != RL_RANGE_OK) return RL_E_MALFORMED_FRAME;
    const uint8_t *prev = p->count_from;
    uint32_t prevl = p->count_from_len;
    for (uint32_t i = 0; i < g->n_kvs; i++) {
        const rl_keyvalue *kv = &g->kvs[i];
        int c = kcmp(kv->key, kv->key_len, prev, prevl);
        if ((i == 0 ? c < 0 : c <= 0) || kcmp(kv->key, kv->key_len, key_ff, 1) >= 0) return RL_E_MALFORMED_FRAME;
        prev = kv->key, prevl = kv->key_len;
    }
    if ((long)g->n_kvs > p->count_want - p->count_got) return RL_E_MALFORMED_FRAME;
    p->count_got += g->n_kvs;
    if (p->count_got == p->count_want && g->n_kvs > 0) {
        const rl_keyvalue *last = &g->kvs[g->n_kvs - 1];
        return sel_done(p, last->key, last->key_len, out_send);
    }
    if (g->more) {
        if (g->n_kvs == 0) return RL_E_MALFORMED_FRAME;
        const rl_keyvalue *last = &g->kvs[g->n_kvs - 1];
        p->count_from = rl__arena_key_after(p->r->arena, last->key, last->key_len);
        if (!p->count_from) return RL_E_OUT_OF_MEMORY;
        p->count_from_len = last->key_len + 1;
        return count_send(p, out_send);
    }
    if (g->read_through_len && kcmp(g->read_through, g->read_through_len, key_ff, 1) < 0) {
        if (kcmp(g->read_through, g->read_through_len, p->count_from, p->count_from_len) <= 0)
            return RL_E_MALFORMED_FRAME;
        p->count_from = g->read_through, p->count_from_len = g->read_through_len;
        return count_send(p, out_send);
    }
    /* Every key below "\xff" counted: continue on the system shard. */
    long left = p->count_want - p->count_got;
    p->sel.key = key_ff;
    p->sel.key_len = 1;
    p->sel.or_equal = 0;
    p->sel.offset = (int)left;
    return sel_step(p, out_send);
}

/* ---- Range pages ----------------------------------------------------------------------------- */

/* Fill the range or mapped request over selectors b, e with what is left of the limits. */
static void range_req(rl__cplan *p, int type, rl_key_selector b, rl_key_selector e, int32_t limit, int64_t target) {
    rl__kv_read *r = p->r;
    memset(&p->req, 0, sizeof p->req);
    p->req.type = (uint16_t)type;
    b.or_equal = b.or_equal != 0;
    e.or_equal = e.or_equal != 0;
    if (!b.key) b.key = (const uint8_t *)"";
    if (!e.key) e.key = (const uint8_t *)"";
    if (type == RL_MSG_GET_RANGE) {
        rl__msg_get_range_req *q = &p->req.u.get_range_req;
        q->version = r->version;
        q->begin = b;
        q->end = e;
        q->limit = limit;
        q->target_bytes = target;
        q->reverse = r->reverse != 0;
    } else {
        rl__msg_get_mapped_range_req *q = &p->req.u.get_mapped_range_req;
        q->version = r->version;
        q->begin = b;
        q->end = e;
        q->mapper = r->mapper;
        q->mapper_len = (uint32_t)r->mapper_len;
        q->limit = limit;
        q->target_bytes = target;
        q->reverse = r->reverse != 0;
        q->secondary_row_limit = p->o.secondary_row_limit;
        q->secondary_byte_limit = p->o.secondary_byte_limit;
        /* The request's own strategy (RL_MAPPED_* flags), else the database's. */
        q->strategy = r->secondary_strategy == RL_SECONDARY_GROUPED      ? RL_FETCH_GROUPED
                      : r->secondary_strategy == RL_SECONDARY_INDIVIDUAL ? RL_FETCH_INDIVIDUAL
                                                                         : p->o.strategy;
        q->batch = p->o.batch;
        q->omit_index = r->omit_index != 0;
        q->defer_remote = r->defer_remote != 0;
    }
}

static int32_t limit_left(const rl__cplan *p) { return p->r->limit > 0 ? (int32_t)(p->r->limit - p->rows) : 0; }

static int64_t target_left(const rl__cplan *p) {
    return p->r->target_bytes > 0 ? (int64_t)(p->r->target_bytes - p->bytes) : 0;
}

/* The next page of [cb, ce). */
static int page_send(rl__cplan *p, int *out_send) {
    if (kcmp(p->cb, p->cbl, p->ce, p->cel) >= 0) return finish_range(p, 0, out_send);
    p->phase = PH_PAGE;
    range_req(p, is_mapped(p) ? RL_MSG_GET_MAPPED_RANGE : RL_MSG_GET_RANGE, fge(p->cb, p->cbl), fge(p->ce, p->cel),
              limit_left(p), target_left(p));
    if (p->r->reverse) return route(p, p->ce, p->cel, 1, out_send);
    return route(p, p->cb, p->cbl, 0, out_send);
}

/* Probe [cb, ce) (what is left after the rows taken) for one more row. */
static int probe_send(rl__cplan *p, int *out_send) {
    if (kcmp(p->cb, p->cbl, p->ce, p->cel) >= 0) return finish_range(p, 0, out_send);
    p->phase = PH_PROBE;
    range_req(p, RL_MSG_GET_RANGE, fge(p->cb, p->cbl), fge(p->ce, p->cel), 1, 0);
    if (p->r->reverse) return route(p, p->ce, p->cel, 1, out_send);
    return route(p, p->cb, p->cbl, 0, out_send);
}

/* Move the unread part to read_through (the shard boundary the server stopped at). It must lie
 * strictly past the request's route key (start: the server's shard holds it forward, the keys
 * below it in reverse, so its boundary is beyond) and not before the rows it returned
 * (invariant 2). Returns 1 when the boundary ends the part. */
static int advance_to(rl__cplan *p, const uint8_t *start, uint32_t startl, const uint8_t *rt, uint32_t rtl,
                      int *out_bad) {
    *out_bad = 0;
    if (!p->r->reverse) {
        if (kcmp(rt, rtl, start, startl) <= 0 || kcmp(rt, rtl, p->cb, p->cbl) < 0) {
            *out_bad = 1;
            return 0;
        }
        if (kcmp(rt, rtl, p->ce, p->cel) >= 0) return 1;
        p->cb = rt, p->cbl = rtl;
    } else {
        if (kcmp(rt, rtl, start, startl) >= 0 || kcmp(rt, rtl, p->ce, p->cel) > 0) {
            *out_bad = 1;
            return 0;
        }
        if (kcmp(rt, rtl, p->cb, p->cbl) <= 0) return 1;
        p->ce = rt, p->cel = rtl;
    }
    return 0;
}

/* A page of n items (keys at key(i)) inside [cb, ce), in the read's direction. */
static const rl_keyvalue *item_kv(const rl__cplan *p, const void *items, uint32_t i) {
    if (is_mapped(p)) return &((const rl_mapped_keyvalue *)items)[i].index;
    return &((const rl_keyvalue *)items)[i];
}

/* Item i of a page: a mapped entry's index (ents 1) or a row. */
static const rl_keyvalue *page_kv(const void *items, uint32_t i, int ents) {
    return ents ? &((const rl_mapped_keyvalue *)items)[i].index : &((const rl_keyvalue *)items)[i];
}

/* 1 if item i is a mapped entry without its index key-value (RL_MAPPED_OMIT_INDEX). */
static int page_omitted(const void *items, uint32_t i, int ents) {
    return ents && ((const rl_mapped_keyvalue *)items)[i].index_omitted;
}

/* Check a page of n items (ents 1: mapped entries; 0: rows, as a probe's): inside [cb, ce) and
 * strictly in the read's direction. Sorted items need one compare each (with their predecessor)
 * plus the two ends against the bounds. Entries without their index key (omitted) are skipped;
 * they come only when asked for, and never first or last. */
static int page_check(const rl__cplan *p, const void *items, uint32_t n, int ents) {
    if (n == 0) return RL_OK;
    if (ents && !p->r->omit_index) {
        for (uint32_t i = 0; i < n; i++)
            if (page_omitted(items, i, ents)) return RL_E_MALFORMED_FRAME; /* not asked for */
    }
    if (page_omitted(items, 0, ents) || page_omitted(items, n - 1, ents)) return RL_E_MALFORMED_FRAME;
    const rl_keyvalue *first = page_kv(items, 0, ents), *last = page_kv(items, n - 1, ents);
    const rl_keyvalue *lo = p->r->reverse ? last : first, *hi = p->r->reverse ? first : last;
    if (kcmp(lo->key, lo->key_len, p->cb, p->cbl) < 0 || kcmp(hi->key, hi->key_len, p->ce, p->cel) >= 0)
        return RL_E_MALFORMED_FRAME;
    const rl_keyvalue *pv = first;
    for (uint32_t i = 1; i < n; i++) {
        if (page_omitted(items, i, ents)) continue;
        const rl_keyvalue *kv = page_kv(items, i, ents);
        int c = kcmp(kv->key, kv->key_len, pv->key, pv->key_len);
        if (p->r->reverse ? c >= 0 : c <= 0) return RL_E_MALFORMED_FRAME;
        pv = kv;
    }
    return RL_OK;
}

static long charge(const rl__cplan *p, const void *items, uint32_t n) {
    long b = 0;
    if (is_mapped(p)) {
        const rl_mapped_keyvalue *m = items;
        for (uint32_t i = 0; i < n; i++) {
            b += (long)m[i].index.key_len + m[i].index.value_len + (long)m[i].index_omitted_len;
            for (int j = 0; j < m[i].n_kvs; j++) b += (long)m[i].kvs[j].key_len + m[i].kvs[j].value_len;
        }
    } else {
        const rl_keyvalue *kv = items;
        for (uint32_t i = 0; i < n; i++) b += (long)kv[i].key_len + kv[i].value_len;
    }
    return b;
}

/* Take one page (PH_FIRST or PH_PAGE) and decide what follows (the file comment's page logic). */
static int page_take(rl__cplan *p, const void *items, uint32_t n, int more, const uint8_t *rt, uint32_t rtl,
                     int *out_send) {
    rl__kv_read *r = p->r;
    int rc = page_check(p, items, n, is_mapped(p));
    if (rc) return rc;
    if (more && n == 0) return RL_E_MALFORMED_FRAME; /* would never make progress */
    const uint8_t *start = p->route_key;             /* the request's: its shard holds it (or the keys below) */
    uint32_t startl = p->route_key_len;
    if (n > 0) {
        rl__cplan_page *g = rl__arena_alloc(r->arena, sizeof *g);
        if (!g) return RL_E_OUT_OF_MEMORY;
        g->items = items;
        g->n = (int)n;
        g->next = NULL;
        if (p->tail) p->tail->next = g;
        else p->head = g;
        p->tail = g;
        if ((long)p->rows + n > 0x7fffffffL) return RL_E_MALFORMED_FRAME;
        p->rows += (int)n;
        p->bytes += charge(p, items, n);
        const rl_keyvalue *last = item_kv(p, items, n - 1);
        if (!r->reverse) {
            p->cb = rl__arena_key_after(r->arena, last->key, last->key_len);
            if (!p->cb) return RL_E_OUT_OF_MEMORY;
            p->cbl = last->key_len + 1;
        } else {
            p->ce = last->key, p->cel = last->key_len;
        }
    }
    if (r->limit > 0 && p->rows > r->limit) return RL_E_MALFORMED_FRAME;
    int hit = (r->limit > 0 && p->rows >= r->limit) || (r->target_bytes > 0 && p->bytes >= r->target_bytes);
    if (more) {
        if (hit) return finish_range(p, 1, out_send);
        return page_send(p, out_send);
    }
    if (rtl > 0) {
        int bad, end = advance_to(p, start, startl, rt, rtl, &bad);
        if (bad) return RL_E_MALFORMED_FRAME;
        if (end) return finish_range(p, 0, out_send);
        return hit ? probe_send(p, out_send) : page_send(p, out_send);
    }
    return finish_range(p, 0, out_send);
}

static int on_probe_reply(rl__cplan *p, const rl__msg_get_range_reply *g, int *out_send) {
    if (g->status != RL_RANGE_OK) return RL_E_MALFORMED_FRAME;
    int rc = page_check(p, g->kvs, g->n_kvs, 0);
    if (rc) return rc;
    if (g->n_kvs > 0 || g->more) return finish_range(p, 1, out_send);
    if (g->read_through_len) {
        const uint8_t *start = p->route_key;
        uint32_t startl = p->route_key_len;
        int bad, end = advance_to(p, start, startl, g->read_through, g->read_through_len, &bad);
        if (bad) return RL_E_MALFORMED_FRAME;
        if (!end) return probe_send(p, out_send);
    }
    return finish_range(p, 0, out_send);
}

/* The fallback (FoundationDB's getRangeFallback): resolve both selectors, then read. */
static int fallback(rl__cplan *p, int *out_send) {
    rl__kv_read *r = p->r;
    p->sel_for = SEL_BEGIN;
    if (r->begin.offset == 1) {
        uint32_t al;
        const uint8_t *an = anchor_of(r->arena, &r->begin, &al);
        if (!an) return RL_E_OUT_OF_MEMORY;
        return sel_done(p, an, al, out_send);
    }
    p->sel = r->begin;
    return sel_step(p, out_send);
}

static int on_first_reply(rl__cplan *p, const void *items, uint32_t n, int more, int status, const uint8_t *rt,
                          uint32_t rtl, const uint8_t *rb, uint32_t rbl, const uint8_t *re, uint32_t rel,
                          int *out_send) {
    if (status == RL_RANGE_SELECTOR_UNRESOLVED) {
        if (n || more) return RL_E_MALFORMED_FRAME;
        return fallback(p, out_send);
    }
    if (status != RL_RANGE_OK) return RL_E_MALFORMED_FRAME;
    p->rb = rb ? rb : (const uint8_t *)"", p->rbl = rbl;
    p->re = re ? re : (const uint8_t *)"", p->rel = rel;
    if (kcmp(p->rb, p->rbl, p->re, p->rel) >= 0) {
        if (n || more) return RL_E_MALFORMED_FRAME;
        return finish_range(p, 0, out_send);
    }
    p->cb = p->rb, p->cbl = p->rbl;
    p->ce = p->re, p->cel = p->rel;
    return page_take(p, items, n, more, rt, rtl, out_send);
}

/* ---- Entries before the reply (streamed mapped reads) ---------------------------------------- */

uint32_t rl__cplan_stream_prefix(const rl__cplan *p, const rl_mapped_keyvalue *ents, uint32_t from, uint32_t n) {
    const rl__kv_read *r = p->r;
    if (!is_mapped(p) || p->rows != 0 || (p->phase != PH_FIRST && p->phase != PH_PAGE)) return from;
    /* The bounds the rows must lie in: [lo, hi) with lo excluded when !lo_in, hi included when hi_in. */
    const uint8_t *lo = p->cb, *hi = p->ce;
    uint32_t lol = p->cbl, hil = p->cel;
    int lo_in = 1, hi_in = 0;
    if (p->phase == PH_FIRST) { /* the selectors as sent: only offset 1 gives a bound before the reply */
        const rl_key_selector *b = &p->req.u.get_mapped_range_req.begin, *e = &p->req.u.get_mapped_range_req.end;
        if (b->offset != 1 || e->offset != 1) return from;
        lo = b->key, lol = b->key_len, lo_in = !b->or_equal;
        hi = e->key, hil = e->key_len, hi_in = e->or_equal != 0;
    }
    uint32_t cap = n;
    if (r->limit > 0 && (uint32_t)r->limit < cap) cap = (uint32_t)r->limit;
    const rl_keyvalue *pv = NULL; /* the last entry with its index key before `from` */
    for (uint32_t i = from; i-- > 0;)
        if (!ents[i].index_omitted) {
            pv = &ents[i].index;
            break;
        }
    uint32_t i = from;
    for (; i < cap; i++) {
        const rl_mapped_keyvalue *m = &ents[i];
        if (m->index_omitted) { /* page_check's rule: asked for, never first */
            if (i == 0 || !r->omit_index) break;
            continue;
        }
        const rl_keyvalue *kv = &m->index;
        int cl = kcmp(kv->key, kv->key_len, lo, lol), ch = kcmp(kv->key, kv->key_len, hi, hil);
        if (cl < 0 || (cl == 0 && !lo_in) || ch > 0 || (ch == 0 && !hi_in)) break;
        if (r->max_key && kcmp(kv->key, kv->key_len, r->max_key, r->max_key_len) >= 0) break;
        if (pv) {
            int c = kcmp(kv->key, kv->key_len, pv->key, pv->key_len);
            if (r->reverse ? c >= 0 : c <= 0) break;
        }
        pv = kv;
    }
    return i;
}

/* ---- Entry points ---------------------------------------------------------------------------- */

/* ---- Size estimates (RL__CPLAN_METRICS, plan.h) ------------------------------------------- */

/* Append k (borrowed: in r->arena or static) to the split's keys. */
static int mkey_add(rl__cplan *p, const uint8_t *k, uint32_t kl) {
    if (p->n_mkeys == p->cap_mkeys) {
        int cap = p->cap_mkeys ? 2 * p->cap_mkeys : 16;
        rl_slice *v = rl__arena_alloc(p->r->arena, (size_t)cap * sizeof *v);
        if (!v) return RL_E_OUT_OF_MEMORY;
        if (p->n_mkeys) memcpy(v, p->mkeys, (size_t)p->n_mkeys * sizeof *v);
        p->mkeys = v;
        p->cap_mkeys = cap;
    }
    p->mkeys[p->n_mkeys].data = k;
    p->mkeys[p->n_mkeys].len = kl;
    p->n_mkeys++;
    return RL_OK;
}

/* The request for the part [p->cb, p->ce) not answered yet, or the end: the result. */
static int metrics_next(rl__cplan *p, int *out_send) {
    rl__kv_metrics *m = p->r->ud;
    if (kcmp(p->cb, p->cbl, p->ce, p->cel) < 0) {
        p->req.type = RL_MSG_GET_METRICS;
        rl__msg_get_metrics_req *g = &p->req.u.get_metrics_req;
        g->op = m->op == RL_KV_ESTIMATE ? RL_METRICS_ESTIMATE : RL_METRICS_SPLIT;
        g->range.begin = p->cb, g->range.begin_len = p->cbl;
        g->range.end = p->ce, g->range.end_len = p->cel;
        g->chunk = m->op == RL_KV_ESTIMATE ? 0 : m->chunk;
        return route(p, p->cb, p->cbl, 0, out_send);
    }
    p->phase = PH_DONE;
    if (m->op == RL_KV_ESTIMATE) {
        m->bytes = p->bytes;
        return RL_OK;
    }
    if (kcmp(m->begin, m->begin_len, m->end, m->end_len) != 0) {
        int rc = mkey_add(p, m->end, m->end_len);
        if (rc) return rc;
    }
    m->keys = p->mkeys;
    m->n_keys = p->n_mkeys;
    return RL_OK;
}

static int metrics_start(rl__cplan *p, int *out_send) {
    rl__kv_metrics *m = p->r->ud;
    p->phase = PH_METRICS;
    p->cb = m->begin, p->cbl = m->begin_len;
    p->ce = m->end, p->cel = m->end_len;
    if (kcmp(p->ce, p->cel, key_ff, 1) > 0) p->ce = key_ff, p->cel = 1;
    if (m->op == RL_KV_SPLIT) {
        int rc = mkey_add(p, m->begin, m->begin_len);
        if (rc) return rc;
    }
    return metrics_next(p, out_send);
}

/* A server's answer for [p->cb, min(p->ce, read_through)): checked (cuts ascending inside it, a
 * read_through that makes progress: invariant 2), added, and the rest asked for. */
static int on_metrics_reply(rl__cplan *p, const rl__msg_get_metrics_reply *g, int *out_send) {
    rl__kv_metrics *m = p->r->ud;
    const uint8_t *hi = p->ce;
    uint32_t hil = p->cel;
    if (g->read_through_len) {
        if (kcmp(g->read_through, g->read_through_len, p->cb, p->cbl) <= 0 ||
            kcmp(g->read_through, g->read_through_len, p->ce, p->cel) >= 0)
            return RL_E_MALFORMED_FRAME;
        hi = g->read_through, hil = g->read_through_len;
    }
    if (m->op == RL_KV_ESTIMATE) {
        if (g->n_cuts) return RL_E_MALFORMED_FRAME;
        p->bytes += (long)g->bytes;
    } else {
        for (uint32_t i = 0; i < g->n_cuts; i++) {
            const rl_slice *c = &g->cuts[i];
            if (kcmp(c->data, (uint32_t)c->len, p->cb, p->cbl) <= 0 || kcmp(c->data, (uint32_t)c->len, hi, hil) >= 0)
                return RL_E_MALFORMED_FRAME;
            int rc = mkey_add(p, c->data, (uint32_t)c->len);
            if (rc) return rc;
        }
        if (g->read_through_len) { /* the shard boundary is a split point too */
            int rc = mkey_add(p, g->read_through, g->read_through_len);
            if (rc) return rc;
        }
    }
    p->cb = hi, p->cbl = hil;
    return metrics_next(p, out_send);
}

int rl__cplan_start(rl__cplan *p, rl__kv_read *r, const rl__cplan_options *o, int *out_send) {
    memset(p, 0, sizeof *p);
    p->r = r;
    if (o) p->o = *o;
    *out_send = 0;
    r->present = 0;
    r->value = NULL, r->value_len = 0;
    r->rbegin = r->rend = NULL;
    r->rbegin_len = r->rend_len = 0;
    r->kvs = NULL;
    r->mkvs = NULL;
    r->n = 0;
    r->more = 0;
    switch (r->op) {
    case RL_KV_GET:
        p->phase = PH_GET;
        p->req.type = RL_MSG_GET;
        p->req.u.get_req.version = r->version;
        p->req.u.get_req.key = r->key ? r->key : (const uint8_t *)"";
        p->req.u.get_req.key_len = r->key_len;
        return route(p, p->req.u.get_req.key, r->key_len, 0, out_send);
    case RL_CPLAN_WATCH: {
        p->phase = PH_WATCH;
        p->req.type = RL_MSG_WATCH_VALUE;
        rl__msg_watch_value_req *w = &p->req.u.watch_value_req;
        w->version = r->version;
        w->key = r->key ? r->key : (const uint8_t *)"";
        w->key_len = r->key_len;
        w->present = r->watch_present ? 1 : 0;
        w->value = r->watch_present && r->watch_value ? r->watch_value : (const uint8_t *)"";
        w->value_len = r->watch_present ? r->watch_value_len : 0;
        w->hold_ms = r->watch_hold_ms;
        return route(p, w->key, r->key_len, 0, out_send);
    }
    case RL_KV_GET_KEY:
        p->sel_for = SEL_GETKEY;
        p->sel = r->begin;
        return sel_step(p, out_send);
    case RL_KV_GET_RANGE:
    case RL_KV_GET_MAPPED: break;
    case RL__CPLAN_METRICS: return metrics_start(p, out_send);
    default: return RL_E_INVALID_ARGUMENT;
    }
    if (r->limit < 0 || r->target_bytes < 0) return RL_E_RANGE_LIMITS_INVALID;
    uint32_t abl, ael;
    const uint8_t *ab = anchor_of(r->arena, &r->begin, &abl);
    const uint8_t *ae = anchor_of(r->arena, &r->end, &ael);
    if (!ab || !ae) return RL_E_OUT_OF_MEMORY;
    if (r->begin.offset == 1 && r->end.offset == 1) {
        if (kcmp(ab, abl, ae, ael) >= 0) { /* empty: the bounds are the anchors */
            p->rb = ab, p->rbl = abl;
            p->re = ae, p->rel = ael;
            return finish_empty(p, out_send);
        }
    } else if (r->max_key_len == 2 || (r->begin.offset != 1 && kcmp(ab, abl, r->max_key, r->max_key_len) >= 0) ||
               (r->end.offset != 1 && kcmp(ae, ael, r->max_key, r->max_key_len) >= 0)) {
        return fallback(p, out_send); /* invariant 6; and anchors at the keyspace's end */
    }
    p->phase = PH_FIRST;
    range_req(p, is_mapped(p) ? RL_MSG_GET_MAPPED_RANGE : RL_MSG_GET_RANGE, r->begin, r->end, r->limit,
              r->target_bytes);
    if (r->reverse) return route(p, ae, ael, 1, out_send);
    return route(p, ab, abl, 0, out_send);
}

int rl__cplan_reply(rl__cplan *p, const rl__msg *msg, int *out_send) {
    *out_send = 0;
    if (msg->type != p->req.type || msg->flags != RL_FRAME_REPLY) return RL_E_MALFORMED_FRAME;
    rl__kv_read *r = p->r;
    switch (p->phase) {
    case PH_GET:
        r->present = msg->u.get_reply.present;
        r->value = msg->u.get_reply.value;
        r->value_len = msg->u.get_reply.value_len;
        if (!r->value) r->value = (const uint8_t *)"";
        p->phase = PH_DONE;
        return RL_OK;
    case PH_WATCH:
        r->watch_changed = msg->u.watch_value_reply.changed;
        r->watch_version = msg->u.watch_value_reply.version;
        p->phase = PH_DONE;
        return RL_OK;
    case PH_SEL: return on_sel_reply(p, &msg->u.get_key_reply, out_send);
    case PH_COUNT: return on_count_reply(p, &msg->u.get_range_reply, out_send);
    case PH_PROBE: return on_probe_reply(p, &msg->u.get_range_reply, out_send);
    case PH_METRICS: return on_metrics_reply(p, &msg->u.get_metrics_reply, out_send);
    case PH_FIRST:
    case PH_PAGE: break;
    default: return RL_E_MALFORMED_FRAME;
    }
    const void *items;
    uint32_t n;
    int more, status;
    const uint8_t *rt, *rb, *re;
    uint32_t rtl, rbl, rel;
    if (msg->type == RL_MSG_GET_RANGE) {
        const rl__msg_get_range_reply *g = &msg->u.get_range_reply;
        items = g->kvs, n = g->n_kvs, more = g->more, status = g->status;
        rt = g->read_through, rtl = g->read_through_len;
        rb = g->resolved_begin, rbl = g->resolved_begin_len;
        re = g->resolved_end, rel = g->resolved_end_len;
    } else {
        const rl__msg_get_mapped_range_reply *g = &msg->u.get_mapped_range_reply;
        items = g->entries, n = g->n_entries, more = g->more, status = g->status;
        rt = g->read_through, rtl = g->read_through_len;
        rb = g->resolved_begin, rbl = g->resolved_begin_len;
        re = g->resolved_end, rel = g->resolved_end_len;
        r->stats.s2s_requests += g->stats.s2s_requests;
        r->stats.s2s_round_trips += g->stats.s2s_round_trips;
        r->stats.s2s_bytes_sent += g->stats.s2s_bytes_sent;
        r->stats.s2s_bytes_received += g->stats.s2s_bytes_received;
        if (g->stats.s2s_peers > r->stats.s2s_peers) r->stats.s2s_peers = g->stats.s2s_peers;
    }
    if (p->phase == PH_FIRST) return on_first_reply(p, items, n, more, status, rt, rtl, rb, rbl, re, rel, out_send);
    if (status != RL_RANGE_OK) return RL_E_MALFORMED_FRAME;
    return page_take(p, items, n, more, rt, rtl, out_send);
}
