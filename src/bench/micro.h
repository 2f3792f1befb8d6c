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
 *   txn-writes reclayer alone: set and clear_range calls in one uncommitted transaction on mem:,
 *              ns per call at 1,000 and at 100,000 calls and their ratio (the write path's growth:
 *              O(log n) per call keeps it near 1)
 * Design: for each workload, `repeats` rounds; in each round every system runs the workload for
 * `seconds` and its ns/op is recorded; the order of systems alternates between rounds. The
 * summary per system is the median of its rounds, with allocations per op for reclayer. A system
 * that fails (setup or a workload) is shown as "failed" with its error, and ratios involving it as
 * "n/a"; the run then returns the first error.
 *
 * Files: the durable systems write into a fresh scratch directory made inside `dir` (scratch.h:
 * reclayer/, lmdb/, sqlite.db and its -wal/-shm), removed at the end of the run, also when it
 * fails; nothing is written anywhere else.
 */
#ifndef RL_BENCH_MICRO_H
#define RL_BENCH_MICRO_H

#include <stdio.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* The ranges of the options (rlbench micro shows them in its help). */
#define RL__MICRO_KEYS_MIN 2000 /* range1000/mapped1000 read 1,000 rows from a random start */
#define RL__MICRO_KEYS_MAX 10000000
#define RL__MICRO_VALUE_LEN_MAX 100000 /* RL_VALUE_SIZE_LIMIT: the largest value reclayer stores */
#define RL__MICRO_SECONDS_MIN 0.001
#define RL__MICRO_SECONDS_MAX 3600.0
#define RL__MICRO_REPEATS_MAX 64 /* rounds kept per system and workload */

typedef struct {
    int keys;         /* records in the dataset (default 100,000), RL__MICRO_KEYS_MIN..MAX */
    int value_len;    /* bytes per value (default 100), 1..RL__MICRO_VALUE_LEN_MAX */
    double seconds;   /* per system per round (default 0.5), RL__MICRO_SECONDS_MIN..MAX */
    int repeats;      /* rounds (default 5), 1..RL__MICRO_REPEATS_MAX */
    const char *dir;  /* where the scratch directory is made (an existing directory; NULL: $TMPDIR
                       * or /tmp); the empty string is refused */
    const char *only; /* run only this workload (NULL: all); one of the names of rl__bench_micro_check */
    unsigned long long seed;
    const char *fail_setup; /* for tests: the system of this name fails its setup with io_error
                             * (NULL: none) */
} rl__micro_options;

/* rl__bench_micro_check — check the options before a run: every field in its range, dir not
 * empty, only a workload name. RL_OK, or RL_E_INVALID_ARGUMENT with the reason in err (may be NULL),
 * naming the option as rlbench does ("--only: 'bogus' is not a workload (point, range1000,
 * mapped1000, commit100)"). */
int rl__bench_micro_check(const rl__micro_options *o, rl__errdetail *err);

/* Run the micro-benchmark, printing a table to out and appending a JSON document to json (may be
 * NULL). The options are checked first (rl__bench_micro_check; its message goes to stderr).
 * Progress and the scratch directory's path go to stderr. Returns RL_OK, RL_E_INVALID_ARGUMENT,
 * the error of the scratch directory (rl__bench_scratch_create), or the first error of a system
 * (named on stderr and in the table). */
int rl__bench_micro_run(const rl__micro_options *o, FILE *out, rl_buf *json);

#endif
