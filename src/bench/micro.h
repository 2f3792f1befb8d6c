/* micro.h (internal) — the KV micro-benchmark (`rlbench micro`): the same work, side by side in
 * one run, on reclayer (mem: and file:), LMDB and SQLite.
 *
 * Workloads (all on one dataset of `keys` records, tuple-encoded keys ("r", pk, 0) -> value of
 * value_len bytes, plus a VALUE-index-like entry ("i", price, pk) per record):
 *   point      random point reads inside one read transaction (ns per read)
 *   range1000  one 1,000-row range read from a random start (ns per range)
 *   mapped1000 1,000 index entries joined to their records: reclayer's mapped range; LMDB an index
 *              cursor scan plus a get per record; SQLite `ORDER BY price LIMIT 1000` over a table
 *              with an index on price (ns per 1,000-entry read)
 *   commit100  one transaction of 100 small writes, committed durably (fsync; SQLite in WAL mode
 *              with synchronous=FULL; LMDB with its default sync); reclayer mem: commits without a
 *              disk and is shown for reference
 * Design: for each workload, `repeats` rounds; in each round every system runs the workload for
 * `seconds` and its ns/op is recorded; the order of systems alternates between rounds. The
 * summary per system is the median of its rounds, with allocations per op for reclayer.
 */
#ifndef RL_BENCH_MICRO_H
#define RL_BENCH_MICRO_H

#include <stdio.h>

#include "base/buf.h"

typedef struct {
    int keys;         /* records in the dataset (default 100,000) */
    int value_len;    /* bytes per value (default 100) */
    double seconds;   /* per system per round (default 0.5) */
    int repeats;      /* rounds (default 5) */
    const char *dir;  /* scratch directory for the durable systems (must exist) */
    const char *only; /* run only this workload (NULL: all) */
    unsigned long long seed;
} rl_micro_options;

/* Run the micro-benchmark, printing a table to out and appending a JSON document to json (may be
 * NULL). Returns RL_OK or the first error of a system (named on stderr). */
int rl__bench_micro_run(const rl_micro_options *o, FILE *out, rl_buf *json);

#endif
