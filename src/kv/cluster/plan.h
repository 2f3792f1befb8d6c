/* plan.h (internal) — the cluster client's read planner: turns one backend read (rl__kv_read:
 * GET, GET_KEY, GET_RANGE, GET_MAPPED) into the sequence of requests the cluster needs, one at a
 * time, and assembles their replies into exactly the result the embedded backend gives.
 *
 * The planner is pure: it knows nothing of connections, threads or the shard map. Each request
 * it asks for carries a *route* — "the shard holding key K" (forward) or "the shard holding the
 * keys just below K" (backward) — which the transport resolves through the location cache
 * (locmap.h) and may resend any number of times (retries after a lost connection or a
 * wrong_shard_server reply) before handing the planner the reply.
 *
 * What it does, by operation (FoundationDB's client; docs/design.md §8.5):
 *   GET       one GET to the shard holding the key.
 *   GET_KEY   a GET_KEY to the shard holding the selector's anchor (backward for offset <= 0);
 *             a reply that is not resolved carries the selector to continue with on the adjacent
 *             shard; the result is clamped to ["", max_key].
 *   GET_RANGE / GET_MAPPED
 *             the first request carries the selectors as given, to the shard holding the begin
 *             anchor (forward) or the keys below the end anchor (reverse); the reply says how the
 *             selectors resolved. Then pages with firstGreaterOrEqual bounds continue after the
 *             last row (the server cut its reply off) or at read_through (the range goes on in
 *             the next shard) until the row limit (index entries) and target bytes are met or
 *             the range ends. A selector the first server cannot resolve (status
 *             selector_unresolved) is resolved with GET_KEY steps (FoundationDB's
 *             getRangeFallback), then the range is read between the resolved keys.
 *
 * Invariants:
 *   1. The result equals the embedded backend's for the same data: rows, order, rbegin/rend (the
 *      resolved bounds), and `more` exactly — when a page meets the limit right at a shard's
 *      end, a probe (GET_RANGE, limit 1, also for mapped reads) finds out whether rows remain.
 *   2. Every reply is checked before it is used: rows inside the part of the range asked for, in
 *      the read's direction, strictly monotonic across pages; a selector continuation and a
 *      read_through must make progress. A reply that breaks this fails the read
 *      (RL_E_MALFORMED_FRAME), so a confused server can never loop the client.
 *   3. Everything the planner keeps — copied keys, pages of rows, the result arrays — lives in
 *      the read's arena (r->arena). Replies are borrowed only during rl__cplan_reply, except
 *      that their byte strings must live in r->arena (the transport decodes a copy of the
 *      payload held there), because result rows point into them without copying.
 *   4. The request in p->req and its route stay valid and unchanged until the next call, so the
 *      transport can resend it.
 *   5. Byte targets across pages charge what the servers charge: key + value bytes per row; for a
 *      mapped entry its index key and value plus every secondary row (mapped.c's accounting).
 *   6. With system keys readable (max_key "\xff\xff"), a storage server clamps a selector at
 *      "\xff" (its shard map knows no more), where the embedded engine would walk on into the
 *      system keyspace; so then a range with a selector offset other than 1 is resolved by
 *      GET_KEY steps, and a GET_KEY clamped at "\xff" is finished by counting the keys left
 *      below "\xff" with a range read and continuing on the system shard.
 *
 * Threads: none of its own; a plan is driven by one thread at a time (the caller's, then the
 * network thread's).
 */
#ifndef RL_KV_CLUSTER_PLAN_H
#define RL_KV_CLUSTER_PLAN_H

#include <stdint.h>

#include "kv/backend.h"
#include "net/proto.h"

/* A read op of the cluster client's own (never from the transaction layer): one WATCH_VALUE
 * request for r->key at r->version against r->watch_* (backend.h), routed like a GET; the
 * reply sets r->watch_changed and r->watch_version (docs/design.md §8.5, "Watches"). */
#define RL_CPLAN_WATCH 101

/* Options of mapped reads, from the database's options. */
typedef struct {
    int32_t secondary_row_limit;  /* 0: the server's default */
    int64_t secondary_byte_limit; /* 0: the server's default */
    uint8_t strategy;             /* rl__fetch_strategy of reads that name none
                                   * (rl__kv_read.secondary_strategy 0) */
    uint32_t batch;               /* 0: the server's default */
} rl__cplan_options;

typedef struct rl__cplan_page rl__cplan_page;

/* The planner's state for one read (caller-owned; usually in r->arena). */
typedef struct {
    /* The next request (valid after a call that set *out_send; invariant 4). */
    rl__msg req;              /* type and u.<type>_req; flags 0 */
    const uint8_t *route_key; /* locate the shard by this key ... */
    uint32_t route_key_len;
    int route_backward; /* ... 1: the shard holding the keys just below it */
    /* Private. */
    rl__kv_read *r;
    rl__cplan_options o;
    int phase;
    uint32_t requests;          /* requests asked for (a bound against loops) */
    rl_key_selector sel;        /* selector being resolved (GET_KEY steps) */
    int sel_for;                /* what the resolved key is for */
    long count_want, count_got; /* counting keys below "\xff" (invariant 6) */
    const uint8_t *count_from;
    uint32_t count_from_len;
    const uint8_t *rb, *re; /* the resolved range */
    uint32_t rbl, rel;
    const uint8_t *cb, *ce; /* the part not read yet (pages) or probed (probe) */
    uint32_t cbl, cel;
    int rows;                    /* rows (entries) so far */
    long bytes;                  /* bytes charged so far (invariant 5) */
    rl__cplan_page *head, *tail; /* pages of rows, in arrival order */
    /* RL__CPLAN_METRICS (appended): the keys of a split so far (begin, cuts, boundaries), in
     * r->arena. */
    rl_slice *mkeys;
    int n_mkeys, cap_mkeys;
} rl__cplan;

/* The rl__kv_read.op of a size-estimate request (backend.h, rl__kv_metrics) that the cluster
 * backend runs through the planner and the read path (cluster.c, cl_metrics): r->ud is the
 * rl__kv_metrics, whose outputs the planner fills (bytes, or keys in r->arena); r->arena is its
 * arena. The plan: a GET_METRICS to the shard holding the range's begin (the range clipped to
 * "\xff": storage servers hold no more), then to the shard at each read_through the replies
 * give, one after another; estimates are summed, cuts concatenated with the shard boundaries
 * between them (FoundationDB's client puts every boundary in the list), and the list framed by
 * begin and end. */
#define RL__CPLAN_METRICS 100

/* rl__cplan_start — plan read r (inputs set as backend.h describes; r->arena receives
 * everything). On RL_OK, *out_send = 1: send p->req along p->route_*, then call
 * rl__cplan_reply with its reply; *out_send = 0: the read is complete (r's outputs are set).
 * Errors (the read fails with them): RL_E_OUT_OF_MEMORY, RL_E_INVALID_ARGUMENT (an unknown op),
 * mapper errors for a mapped read over an empty range (checked here, as the embedded backend
 * does). [in] o: copied. */
int rl__cplan_start(rl__cplan *p, rl__kv_read *r, const rl__cplan_options *o, int *out_send);

/* rl__cplan_reply — take the (successful, non-error) reply to p->req: msg->type must be
 * p->req.type and its byte strings must live in r->arena (invariant 3). *out_send as for
 * rl__cplan_start. Errors: RL_E_MALFORMED_FRAME (a reply breaking invariant 2, or of the wrong
 * type), RL_E_OUT_OF_MEMORY. Mapped replies add their s2s counters to r->stats. */
int rl__cplan_reply(rl__cplan *p, const rl__msg *msg, int *out_send);

/* rl__cplan_stream_prefix — of ents[0..n), the entries a streamed reply to p->req has brought so
 * far (before its final reply reached rl__cplan_reply), how many are certainly the first
 * entries of the read's result (rl__kv_read.progress): only while no earlier reply gave rows,
 * and only entries that pass invariant 2's checks against bounds known before the reply — the
 * unread part of a later page, or for the first request selectors of offset 1 — and the read's
 * limit. ents[0..from) passed an earlier call; returns a count >= from (from: none more, or the
 * bounds are not known yet). The final reply is still checked in full. Pure. */
uint32_t rl__cplan_stream_prefix(const rl__cplan *p, const rl_mapped_keyvalue *ents, uint32_t from, uint32_t n);

#endif
