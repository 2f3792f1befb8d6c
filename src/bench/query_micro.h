/* query_micro.h (internal) — the query micro-benchmark (`rlbench query`, the performance
 * part): index scans of the Order store with each fetch method, side by side with SQLite doing
 * the same query, in one process, warm.
 *
 * Datasets (each loaded into its own `mem:` database and its own in-memory SQLite database):
 *   small  `records` Orders, no padding (about 40 bytes per record)
 *   split  `records` Orders with a `padding`-byte padding field (default 100,000 bytes: with
 *          the union framing the record exceeds RL_RECORD_SPLIT_SIZE and is stored in 2 chunks)
 * Records: order_id 1..records, price (order_id * 7919) % records (a permutation, so index order
 * differs from primary-key order), customer "customer-NNN", quantity 1..10. The reclayer store is
 * ("bench", "orders") with split long records and record versions (as `rl load` makes it).
 *
 * Cases: {limit1, rows10, rows1000} x {forward, reverse} x {scan, remote, remote-fallback,
 * adaptive, sqlite}. One op = begin a transaction, run the query to completion reading every field of every
 * returned record, end the transaction:
 *   reclayer  rl_txn_begin, rl_cursor_open(price_idx, limit n, fetch method, reverse),
 *             rl_cursor_next until NULL (each row's decoded Order is read), rl_cursor_free,
 *             rl_txn_free
 *   sqlite    BEGIN; SELECT order_id, price, padding, customer, quantity FROM orders
 *             ORDER BY price [DESC] LIMIT n (prepared once, every column read); COMMIT
 * Before measuring, every case's row sequence (order_ids in order) is checked against SQLite's,
 * so the systems provably do the same work.
 *
 * Design (as micro.h): for each (dataset, rows, direction) group, `repeats` rounds; in each round
 * every system runs the op for `seconds`, the order of systems alternating between rounds; the
 * summary is the median of the rounds. Allocations per op and bytes per op come from
 * rl_alloc_get_stats deltas for reclayer and from a counting wrapper installed around SQLite's
 * allocator (SQLITE_CONFIG_MALLOC; lookaside hits are not heap calls and are not counted; "n/a"
 * when SQLite was initialised before the wrapper could be installed).
 */
#ifndef RL_BENCH_QUERY_MICRO_H
#define RL_BENCH_QUERY_MICRO_H

#include <stdio.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* The ranges of the options (rlbench query shows them in its help); padding is at most
 * RL__TOOL_PADDING_MAX (app/tool.h), the largest that fits one transaction. */
#define RL__QUERY_MICRO_RECORDS_MAX 1000000
#define RL__QUERY_MICRO_SECONDS_MIN 0.001
#define RL__QUERY_MICRO_SECONDS_MAX 3600.0
#define RL__QUERY_MICRO_REPEATS_MAX 64 /* rounds kept per case */

typedef struct {
    int records;      /* Orders per dataset (default 1,000), 1..RL__QUERY_MICRO_RECORDS_MAX */
    int padding;      /* padding bytes of the split dataset (default 100,000), 0..RL__TOOL_PADDING_MAX */
    double seconds;   /* per system per round (default 0.3) */
    int repeats;      /* rounds (default 5), 1..RL__QUERY_MICRO_REPEATS_MAX */
    const char *db;   /* the database the reclayer cases run on (NULL: a fresh mem: per
                       * dataset); any URL, e.g. cluster:FILE — the datasets are stored under
                       * ("bench", "orders", DATASET), cleared and loaded at the start */
    const char *only; /* run only cases whose name "dataset/rows/direction/system" contains this
                       * (NULL: all); datasets no selected case uses are not loaded; a string no
                       * case name contains is refused */
    int stats;        /* 1: after each case's rounds, one more op (untimed) with the query's
                       * tracing counters, printed as a trace summary table per case (requests,
                       * round trips, bytes per op; all 0 on embedded) and in the JSON */
    int secondary;    /* rl_query_options.secondary_strategy of the remote cases (0: the
                       * database's; only a cluster uses it) */
} rl__query_micro_options;

/* rl__bench_query_micro_check — check the options before a run: every field in its range and
 * `only` contained in some case name. RL_OK, or RL_E_INVALID_ARGUMENT with the reason in err (may
 * be NULL), naming the option as rlbench does; for --only it lists the names cases are made of. */
int rl__bench_query_micro_check(const rl__query_micro_options *o, rl__errdetail *err);

/* Run the query micro-benchmark, printing a table to out and appending one JSON document to json
 * (may be NULL). The options are checked first (rl__bench_query_micro_check). Progress goes to
 * stderr. A case that fails is shown as "failed" with its error (its ratio "n/a"), cases after it
 * as "not run". Returns RL_OK, RL_E_INVALID_ARGUMENT, or the first error of a setup, a
 * cross-check (RL_E_INTERNAL_ERROR: a case returned other rows than SQLite) or an op. */
int rl__bench_query_micro_run(const rl__query_micro_options *o, FILE *out, rl_buf *json);

#endif
