/* campaign.h (internal) — `rlbench campaign`: the reference reports' benchmark campaign on one
 * machine (docs/design.md §8.7). This header holds the protocol (what a run is declared to be before
 * anything is timed), the cases, arms and metrics, the runner and the worker.
 *
 * Files:
 *   campaign_protocol.c  the protocol: JSON parse with every field checked, the canonical print,
 *                        the built-in full and quick protocols, case names, the order of arms
 *   campaign_topology.c  the topologies behind one table of hooks: embedded; single (one storage
 *                        server) and multi (hosts, replication, placed teams) on a local cluster
 *                        with the injected delay
 *   campaign_dataset.c   loading, the integrity check, the defect controls, the SQLite peer, the
 *                        embedded placement receipt, the rows cross-check between arms
 *   campaign_worker.c    the worker process (`rlbench campaign-worker`): one (block, case, arm)
 *   campaign_proc.c      child processes with deadlines, /proc CPU accounting, machine facts
 *   campaign_run.c       the runner: the design loop, checks, progress, the summary
 *   report.c             report.md and the main table; report_plot.c the gnuplot plots;
 *   report_html.c        report.html (report.md's text as one self-contained page, plots inline);
 *   report_csv.c         samples.csv and summary.csv, and the CSV reader;
 *   report_compare.c     `rlbench campaign compare A B`;
 *   report_manifest.c    manifest.json; report_results.c results.json.zst (written compressed,
 *                        read back compressed or not)
 *
 * The design: for each topology, the dataset is loaded once and checked; then for
 * each case, for each block b = 0..B-1, each available arm runs in a fresh worker process, the arms
 * in protocol order in even blocks and reversed in odd blocks (ABAB / BABA; with three arms ABC /
 * CBA). A worker opens the database, warms up for warmup_seconds, runs `repeats` repeats of a timed
 * loop of `seconds` each and prints one JSON line of per-op figures per repeat.
 *
 * Statistics (stats.h): per process, the median of its repeats (per metric); per block, the ratio of
 * each arm to its baseline: remote/ordinary, remote-grouped/ordinary (multi only),
 * adaptive/min(ordinary, remote) (the best of the two in that block, per metric), sqlite/ordinary
 * (an extra, on embedded only); per case the geometric mean
 * of the block ratios with the bootstrap interval, the median of the block medians per arm and the
 * raw min/max of all its repeats.
 *
 * Checks around every case: the RTT probe before and after (embedded: recorded as not applicable);
 * the placement receipt before and after, which must compare equal (embedded: the layout of the
 * case's store: key counts, bytes, a hash of the keys); the CPU used on the machine by processes
 * that are not the campaign's during the case, marking it clean or contaminated. Before timing: the
 * integrity checker on every dataset (integrity_ok must be true) and the three defect controls on a
 * scratch copy (each must make the checker fail); and the rows check (every arm returns the same
 * rows in the same order as the others for every case).
 *
 * Errors: codes of reclayer/error.h with a one-line reason in the caller's err (rl__errdetail).
 */
#ifndef RL_BENCH_CAMPAIGN_H
#define RL_BENCH_CAMPAIGN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "base/errdetail.h"

/* ---- Limits of a protocol ------------------------------------------------------------------ */

#define RL_CAMP_MAX_TOPOLOGIES 8
#define RL_CAMP_MAX_CASES 64
#define RL_CAMP_MAX_ARMS 5
#define RL_CAMP_MAX_BLOCKS 100
#define RL_CAMP_MAX_REPEATS 64
#define RL_CAMP_MAX_RECORDS 1000000
#define RL_CAMP_NAME_MAX 48       /* bytes of a name, NUL included */
#define RL_CAMP_MAX_TP_LEVELS 8   /* client counts of the throughput phase */
#define RL_CAMP_MAX_TP_CLIENTS 64 /* clients at one level */
#define RL_CAMP_MAX_TP_CASES 4

/* ---- Cases, arms, metrics -------------------------------------------------------------------- */

/* Dataset variants: small (one key-value per record) and split (padding bytes each: with the
 * default 100,000 the record is stored in 2 chunks). skip3 cases query the small dataset. */
typedef enum { RL_CAMP_SMALL = 0, RL_CAMP_SPLIT = 1, RL_CAMP_VARIANTS = 2 } rl__camp_variant;

/* The arms. The order of this enum is the order of their names in protocols and reports. */
typedef enum {
    RL_CAMP_ORDINARY = 0,       /* SCAN_AND_FETCH */
    RL_CAMP_REMOTE = 1,         /* USE_REMOTE_FETCH with the database's secondary strategy (the
                                 * topology's secondary_reads: "individual", FoundationDB's, in the
                                 * built-in protocols; the reports' arm) */
    RL_CAMP_REMOTE_GROUPED = 2, /* USE_REMOTE_FETCH with the query's secondary_strategy grouped
                                 * (docs/design.md §8.4), multi topologies only: elsewhere no
                                 * secondary leaves its server and it would be remote again */
    RL_CAMP_ADAPTIVE = 3,       /* ADAPTIVE, with the database's secondary strategy */
    RL_CAMP_SQLITE = 4,         /* the SQLite peer, embedded topologies only */
    RL_CAMP_ARM_KINDS = 5
} rl__camp_arm;

/* rl__camp_arm_applies — 1 when arm a runs on a topology of kind kind (sqlite: embedded;
 * remote-grouped: multi; the others everywhere), else 0 with why (a static sentence) for the
 * report. Pure. */
int rl__camp_arm_applies(rl__camp_arm a, int kind, const char **why);

/* One case, from its name: VARIANT-ROWS-DIRECTION with VARIANT small|split|skip3, ROWS
 * limit1|rows10|rows1000, DIRECTION forward|reverse ("small-rows10-reverse"). */
typedef struct {
    char name[RL_CAMP_NAME_MAX];
    rl__camp_variant variant; /* the dataset it queries */
    int skip;                 /* 3 for skip3, else 0 (pushed down into the index read) */
    int limit;                /* 1, 10 or 1000 rows */
    int reverse;              /* 1: descending price order */
} rl__camp_case;

/* The per-op figures of one repeat. The order is the order of results.json's fields and of the
 * report's tables. */
typedef enum {
    RL_CAMP_M_NS = 0,          /* ns_per_op: wall time of one query (transaction included) */
    RL_CAMP_M_BYTES,           /* bytes_per_op: bytes allocated (rl_alloc counters; SQLite's own
                                 * allocator counted by a wrapper) */
    RL_CAMP_M_ALLOCS,          /* allocs_per_op */
    RL_CAMP_M_ROWS,            /* rows_per_op: rows returned */
    RL_CAMP_M_REQUESTS,        /* requests_per_op: client requests over the network
                                 * (rl_query_counters.requests; 0 on embedded) */
    RL_CAMP_M_ROUND_TRIPS,     /* round_trips_per_op: round trips on the critical path
                                 * (rl_query_counters.critical_round_trips; 0 on embedded) */
    RL_CAMP_M_KV_BYTES,        /* kv_bytes_per_op: key+value bytes received by the client */
    RL_CAMP_M_INDEX_ENTRIES,   /* index_entries_per_op */
    RL_CAMP_M_CLIENT_READS,    /* client_reads_per_op: gets + range reads + mapped reads issued */
    RL_CAMP_M_MAPPED_REQUESTS, /* mapped_requests_per_op */
    RL_CAMP_M_RECORD_LOADS,    /* record_loads_per_op: records the client loaded itself */
    RL_CAMP_M_NET_BYTES,       /* net_bytes_received_per_op: reply bytes the client received over
                                 * the network (frames, from storage and coordinator; 0 embedded) */
    RL_CAMP_METRICS
} rl__camp_metric;

/* Names: "ordinary" ..., "ns_per_op" ..., "small" / "split". Static strings. */
const char *rl__camp_arm_name(rl__camp_arm a);
const char *rl__camp_metric_name(rl__camp_metric m);
const char *rl__camp_variant_name(rl__camp_variant v);
/* The comparisons of the summary, in report order: "remote/ordinary", "remote-grouped/ordinary",
 * "adaptive/best", "sqlite/ordinary" (i in 0..RL_CAMP_COMPARISONS-1; else "unknown"). Static. */
#define RL_CAMP_COMPARISONS 4
const char *rl__camp_comparison_name(int i);
/* The arm or metric of a name, or -1. */
int rl__camp_arm_of(const char *name);
int rl__camp_metric_of(const char *name);

/* rl__camp_case_parse — fill c from a case name (see rl__camp_case). RL_OK or RL_E_INVALID_ARGUMENT
 * with the reason in err. */
int rl__camp_case_parse(const char *name, rl__camp_case *c, rl__errdetail *err);

/* rl__camp_arm_order — the order in which block `block` (from 0) runs the n arms given in
 * protocol order: as given in even blocks, reversed in odd blocks. [out] out: n arms. Pure. */
void rl__camp_arm_order(int block, const rl__camp_arm *arms, int n, rl__camp_arm *out);

/* ---- The protocol ---------------------------------------------------------------------------- */

typedef enum { RL_CAMP_EMBEDDED = 0, RL_CAMP_SINGLE = 1, RL_CAMP_MULTI = 2, RL_CAMP_FDB = 3 } rl__camp_topo_kind;

#define RL_CAMP_URL_MAX 1024 /* bytes of an fdb topology's url, NUL included */

/* One topology. The cluster fields are what the single and multi kinds use (campaign_topology.c);
 * embedded requires delay_us == 0 and ignores them. multi needs storage_servers divisible by hosts.
 * fdb runs against an existing database named by url ("fdb:CLUSTER_FILE", FoundationDB's client
 * library from RL_FDB_LIBRARY as for any fdb: URL); it requires delay_us == 0 (the campaign does
 * not control that network) and takes none of the cluster fields. */
typedef struct {
    char name[RL_CAMP_NAME_MAX];
    rl__camp_topo_kind kind;
    char url[RL_CAMP_URL_MAX]; /* fdb: the database, "fdb:" or "fdb:FILE"; "" for the other kinds */
    int delay_us;              /* injected one-way delay per direction between hosts and between the
                          * client and the servers, in µs (the added round trip is twice this),
                          * 0..1,000,000 */
    int jitter_us;             /* 0..delay_us */
    int storage_servers;       /* single: 1; multi: >= 2 * replication for disjoint teams */
    int hosts;                 /* host labels the storage servers are spread over (multi: 3) */
    int replication;           /* team size: 1 single, 2 double, 3 triple */
    char placement[16];        /* "colocated" (index and records on one team), "disjoint" (the index
                          * shard and the record shards on teams that share no storage server) or
                          * "reports" (multi: the M2 report's placement, campaign_topology.c) */
    char secondary[16];        /* mapped-range secondary reads that leave the server: "individual"
                          * (FoundationDB's) or "grouped" (docs/design.md §8.4) */
    char engine[16];           /* storage engine of the servers: "memory" or "ssd" */
} rl__camp_topology;

typedef struct {
    char name[RL_CAMP_NAME_MAX];
    char description[256];
    /* Dataset */
    int records;        /* Orders per variant, 1..RL_CAMP_MAX_RECORDS (default 1,000) */
    uint64_t data_seed; /* the Orders' prices (rl__tool_save_orders) */
    int split_padding;  /* bytes of padding of the split variant (default 100,000) */
    /* What runs */
    rl__camp_topology topologies[RL_CAMP_MAX_TOPOLOGIES];
    int n_topologies;
    rl__camp_case cases[RL_CAMP_MAX_CASES];
    int n_cases;
    rl__camp_arm arms[RL_CAMP_MAX_ARMS]; /* distinct, in protocol order; ordinary always first
                                         * need not be: ratios need ordinary (and remote for
                                         * adaptive) in the list */
    int n_arms;
    int blocks;            /* 1..RL_CAMP_MAX_BLOCKS */
    int repeats;           /* 1..RL_CAMP_MAX_REPEATS */
    double seconds;        /* timed loop of one repeat, 0.001..3600 */
    double warmup_seconds; /* untimed loop before the first repeat, 0..3600 (at least one op) */
    int pipeline_depth;    /* SCAN_AND_FETCH loads in flight, 1..1000 (default 10) */
    /* Statistics */
    int resamples; /* bootstrap resamples, 1..1,000,000 */
    uint64_t bootstrap_seed;
    double level; /* nominal coverage of the interval, (0, 1) (0.95) */
    /* Checks */
    double contamination_threshold; /* a case is contaminated when the CPU other processes used
                                     * during it exceeds this fraction of the machine's capacity
                                     * (cores x wall time), 0..1 */
    int rtt_pings;                  /* pings of each RTT probe (cluster topologies), 1..10,000 */
    double process_timeout_seconds; /* a worker still running after this is killed (by its pid)
                                     * and recorded as failed; 0: 60 + 3 x (warmup + repeats x
                                     * seconds) */
    int keep_data;                  /* 1: keep DIR/data after the run (default: removed) */
    /* The throughput phase (after a topology's cases): per case listed here, per available arm, per
     * client count, that many worker processes run the case in a closed loop for tp_seconds at
     * once. n_tp_clients 0: no phase (a protocol file without "throughput" asks for none). */
    int tp_clients[RL_CAMP_MAX_TP_LEVELS]; /* 1..RL_CAMP_MAX_TP_CLIENTS each */
    int n_tp_clients;
    rl__camp_case tp_cases[RL_CAMP_MAX_TP_CASES];
    int n_tp_cases;           /* 1.. when n_tp_clients > 0 */
    double tp_seconds;        /* the closed loop's window, 0.01..3600 */
    double tp_warmup_seconds; /* each client's untimed loop before the window, 0..3600 */
} rl__camp_protocol;

/* rl__camp_protocol_builtin — the built-in protocol: quick = 0 the full campaign (topologies
 * embedded, single and multi at 250 µs one way, multi's secondary reads individual; the reports' 16
 * cases; arms ordinary, remote, remote-grouped (multi only), adaptive, sqlite (embedded only); 6 blocks, 3 repeats of 3 s; 20,000 resamples), quick = 1 the small one
 * (embedded only, the same cases and arms, 4 blocks, 3 repeats of 0.1 s, 2,000 resamples; about two
 * minutes on a 2-core machine). */
void rl__camp_protocol_builtin(int quick, rl__camp_protocol *out);

/* rl__camp_protocol_named — the built-in protocol called name: "full" and "quick" (above), "c3"
 * (the C3 report's design: topology c3, kind single, one storage server, memory engine, 250 us one
 * way; cases small-rows1000-forward and split-rows1000-forward; arms ordinary, remote, adaptive;
 * 6 blocks x 3 repeats of 3 s; bootstrap seed 391706) or "m2" (the M2 report's: topology m2,
 * kind multi, 3 hosts x 3 storage servers, replication 2, ssd engine, 250 us one way, placement
 * "reports", secondary reads individual; the 16 cases; the same arms plus remote-grouped and the
 * same design; seed 492817). RL_OK, or
 * RL_E_INVALID_ARGUMENT for another name (out untouched). */
int rl__camp_protocol_named(const char *name, rl__camp_protocol *out);

/* rl__camp_protocol_parse — parse and check a protocol's JSON text (every field named in
 * campaign_protocol.c's table; unknown fields are refused, missing ones take the full protocol's
 * defaults). RL_OK, or RL_E_INVALID_ARGUMENT with err naming the field: "blocks: 0 is out of range
 * [1, 100]", "topologies[1].kind: 'foo' is not one of embedded, single, multi, fdb", "cases[3]:
 * 'small-rows5-forward': ROWS must be limit1, rows10 or rows1000", "unknown field 'blokcs'". */
int rl__camp_protocol_parse(const char *text, size_t len, rl__camp_protocol *out, rl__errdetail *err);

/* rl__camp_protocol_print — the canonical JSON text of p (two-space indent, fields in table
 * order), ending in a newline, appended to out. Parsing it gives p back. RL_OK or
 * RL_E_OUT_OF_MEMORY. */
int rl__camp_protocol_print(const rl__camp_protocol *p, rl_buf *out);

/* The process timeout of p in seconds (its own, or the default formula). */
double rl__camp_process_timeout(const rl__camp_protocol *p);

/* ---- The reference reports' figures (campaign_reference.c) --------------------------------- */

/* One published figure: the time ratio remote/ordinary of one case in one report, with the line of
 * the report's file it is on. NaN (or 0 for the range) where the report printed nothing. */
typedef struct {
    const char *report;            /* "C3" or "M2" */
    rl__camp_topo_kind kind;       /* the topologies it is shown beside: C3 single, M2 multi */
    const char *case_name;         /* our case name */
    double ratio;                  /* remote/ordinary, NaN: not published for this case */
    double ci_low, ci_high;        /* its 95% interval, NaN: not published */
    double range_low, range_high;  /* a range covering this case (M2's 1,000-row cases), 0: none */
    double remote_ms, ordinary_ms; /* medians of the block medians in ms, NaN: not published */
    int line;                      /* the line of the report's file the figure is on */
    const char *quote;             /* the figure as the report words it */
} rl__camp_reference;

/* The published figure for (kind, case), or NULL (not published). Static data. */
const rl__camp_reference *rl__camp_reference_find(rl__camp_topo_kind kind, const char *kase);
/* The report matched to a topology kind: "C3" (single), "M2" (multi), or NULL (no report). */
const char *rl__camp_reference_report(rl__camp_topo_kind kind);

/* ---- The runner ------------------------------------------------------------------------------ */

typedef struct {
    const rl__camp_protocol *protocol; /* checked (parse or builtin); borrowed */
    const char *protocol_text;         /* the exact bytes the SHA-256 is taken of (the file as read,
                                       * or the canonical print of a built-in one); borrowed */
    size_t protocol_len;
    const char *protocol_source; /* "FILE" or "built-in quick" / "built-in full" */
    const char *out_dir;         /* created; must be absent or an empty directory */
    const char *self_exe;        /* the rlbench to run workers with (NULL: /proc/self/exe) */
    int argc;                    /* the command line, for the manifest */
    char **argv;
    FILE *out;      /* the main table at the end (stdout); NULL: none */
    FILE *progress; /* progress and the time left (stderr); NULL: none */
    /* Test hooks (tests/integ/bench/test_campaign.c; rlbench sets them from the environment
     * variables RL_CAMPAIGN_TEST_BREAK_RECEIPT and RL_CAMPAIGN_TEST_FAIL_WORKER): */
    const char *test_break_receipt; /* case name: its "after" receipt is altered, so the
                                       * comparison fails (a failed check must be reported) */
    const char *test_fail_worker;   /* "CASE/ARM/BLOCK": that worker is given a bad argument and
                                       * fails (a failed process must be reported) */
} rl__camp_run_options;

/* rl__camp_run — run the campaign and write DIR/results.json.zst, samples.csv, summary.csv,
 * report.md, report.html, plots/, manifest.json
 * (also after failures: whatever ran is written, with the failures named). Returns RL_OK when
 * every planned process ran and every check passed (contaminated cases and arms or topologies
 * that are not available yet do not count as failures), RL_E_INTEGRITY_DEFECTS when a check
 * failed (integrity, a defect control, a receipt comparison, the rows check), RL_E_OPERATION_FAILED
 * when a process failed, or the error that stopped the run early (out directory, out of memory),
 * with the reason in err. */
int rl__camp_run(const rl__camp_run_options *o, rl__errdetail *err);

/* rl__camp_compare_dirs — `rlbench campaign compare A B`: read the results of the runs in dir_a and
 * dir_b (directories or results files, rl__camp_results_load) and print to out the table of what
 * changed (report_compare.c). metric: a metric's name, "all", or NULL (ns_per_op is the caller's
 * default). RL_OK, the loader's errors, RL_E_INVALID_ARGUMENT (an unknown metric) or
 * RL_E_OUT_OF_MEMORY, with the reason in err. */
int rl__camp_compare_dirs(const char *dir_a, const char *dir_b, const char *metric, FILE *out, rl__errdetail *err);

/* rl__camp_report_redo — `rlbench campaign report DIR`: write DIR/report.md and DIR/report.html
 * again from the run's results (DIR/results.json.zst) and manifest (DIR/manifest.json), with this
 * binary's report code — the raw results, CSVs and plots stay as the run wrote them — and print
 * the main table to out (NULL: nothing). RL_OK, the loader's errors, RL_E_IO_ERROR (manifest
 * unreadable, a report not written) or RL_E_OUT_OF_MEMORY, with the reason in err. */
int rl__camp_report_redo(const char *dir, FILE *out, rl__errdetail *err);

/* ---- The worker ------------------------------------------------------------------------------ */

typedef struct {
    const char *url;    /* the database (file:DIR, cluster:FILE) */
    const char *store;  /* the store's prefix as a JSON array (rl __tool_store_prefix) */
    const char *sqlite; /* the SQLite peer's database file (the sqlite arm) */
    const char *case_name;
    rl__camp_arm arm;
    int repeats;
    double seconds;
    double warmup_seconds;
    int pipeline_depth;
    /* The throughput mode (throughput_seconds > 0): after the warm-up, wait until the wall clock
     * reaches start_at_us (µs since the epoch; 0: at once), then run the case in a closed loop for
     * throughput_seconds, timing every op into a latency histogram (stats.h), and print one line
     * {"throughput": true, "ops", "seconds", "late_seconds" (how far past start_at_us the window
     * began), "cpu_seconds" (this process's utime+stime over the window, /proc/self/stat), "rows_hash",
     * "hist": [[bucket, count], ...]} instead of the repeats. */
    double throughput_seconds;
    uint64_t start_at_us;
} rl__camp_worker_options;

/* rl__camp_worker — run one (case, arm) process: open the database read-only, warm up, then print
 * one JSON line per repeat to out: {"repeat": i, "ops": n, "seconds": s, "<metric>": value, ...,
 * "rows_hash": "16 hex digits"} and at the end {"done": true, "open_seconds": s}. On failure one
 * line {"error": NAME, "message": TEXT}. Returns RL_OK, RL_E_UNSUPPORTED_OPERATION (the arm is
 * not available), or the failure's code. */
int rl__camp_worker(const rl__camp_worker_options *o, FILE *out);

#endif
