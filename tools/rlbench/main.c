/* main.c — `rlbench`, reclayer's benchmark driver. Subcommands:
 *   micro     the KV micro-benchmark: reclayer mem:/file:, LMDB and SQLite side by side
 *   query     the query micro-benchmark: index scans with each fetch method beside SQLite
 *   campaign  the reference reports' campaign (src/bench/campaign.h): protocol, design, checks,
 *             statistics, report, plots, manifest
 *   campaign-worker  (not listed: the campaign runs it) one (block, case, arm) process
 *
 * Arguments go through the shared parser (app/args.h): every number is checked against the range
 * its help shows, and a usage error exits 2. A --json FILE is created before the benchmark runs
 * (a file that cannot be created fails at once, exit 1, naming it). The logic is in src/bench.
 * Exit codes: 0 done, 1 a failure (a system failed, the JSON file, the scratch directory), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/args.h"
#include "bench/campaign.h"
#include "bench/micro.h"
#include "bench/query_micro.h"
#include "reclayer/error.h"
#include "reclayer/version.h"
#include "app/tool.h"

/* Create path for the JSON report now, so that a bad path fails before the benchmark runs.
 * Returns the open file, or NULL after printing "CMD: cannot create PATH: <strerror>". */
static FILE *open_json(const char *cmd, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) fprintf(stderr, "%s: cannot create %s: %s\n", cmd, path, strerror(errno));
    return f;
}

/* Write the JSON document to f and close it. 0, or 1 after printing the error. */
static int write_json(const char *cmd, const char *path, FILE *f, const rl_buf *json) {
    int bad = fwrite(json->data, 1, json->len, f) != json->len || fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    if (bad) {
        fprintf(stderr, "%s: cannot write %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    return 0;
}

/* The options every timed-round command shares (micro, query): --seconds and --repeats into o's
 * fields of those names, within the command's bounds, and --json into json_path. */
#define ROUND_OPTS(o, json_path, seconds_min, seconds_max, repeats_max)                                           \
    {.name = "seconds",                                                                                           \
     .kind = RL_ARG_DOUBLE,                                                                                       \
     .dest = &(o).seconds,                                                                                        \
     .metavar = "S",                                                                                              \
     .dmin = (seconds_min),                                                                                       \
     .dmax = (seconds_max),                                                                                       \
     .help = "per system per round"},                                                                             \
        {.name = "repeats",                                                                                       \
         .kind = RL_ARG_INT,                                                                                      \
         .dest = &(o).repeats,                                                                                    \
         .metavar = "R",                                                                                          \
         .min = 1,                                                                                                \
         .max = (repeats_max),                                                                                    \
         .help = "rounds (the table shows their median)"},                                                        \
    {                                                                                                             \
        .name = "json", .kind = RL_ARG_STRING, .dest = &(json_path), .metavar = "FILE", .flags = RL_ARG_NONEMPTY, \
        .help = "also write the results as JSON to FILE (created before the run)"                                 \
    }

static int cmd_micro(int argc, char **argv) {
    rl__micro_options o = {
        .keys = 100000, .value_len = 100, .seconds = 0.5, .repeats = 5, .seed = (unsigned long long)time(NULL)};
    const char *json_path = NULL;
    uint64_t seed = o.seed;
    int code;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    const rl__arg opts[] = {
        {.name = "keys",
         .kind = RL_ARG_INT,
         .dest = &o.keys,
         .min = RL__MICRO_KEYS_MIN,
         .max = RL__MICRO_KEYS_MAX,
         .help = "records in the dataset"},
        {.name = "value-len",
         .kind = RL_ARG_INT,
         .dest = &o.value_len,
         .metavar = "B",
         .min = 1,
         .max = RL__MICRO_VALUE_LEN_MAX,
         .help = "bytes per value"},
        ROUND_OPTS(o, json_path, RL__MICRO_SECONDS_MIN, RL__MICRO_SECONDS_MAX, RL__MICRO_REPEATS_MAX),
        {.name = "dir",
         .kind = RL_ARG_STRING,
         .dest = &o.dir,
         .metavar = "DIR",
         .flags = RL_ARG_NONEMPTY,
         .help = "an existing directory to make the scratch directory in (default $TMPDIR or /tmp)"},
        {.name = "only",
         .kind = RL_ARG_STRING,
         .dest = &o.only,
         .metavar = "WORKLOAD",
         .help = "run one workload: point, range1000, mapped1000, commit100 or txn-writes"},
        {.name = "seed",
         .kind = RL_ARG_UINT64,
         .dest = &seed,
         .metavar = "N",
         .flags = RL_ARG_NO_DEFAULT,
         .help = "the random seed (default: from the clock; printed)"},
        {0}};
    const rl__args_cmd cmd = {
        .name = "rlbench micro",
        .summary = "Runs the same work on reclayer (mem:, file: and file:?engine=ssd), LMDB and SQLite:\n"
                   "point (random reads in one transaction), range1000, mapped1000 (1,000 index entries\n"
                   "joined to their records) and commit100 (100 small writes, durable commit).\n"
                   "Each round runs every system for S seconds, alternating the order; the table shows\n"
                   "the median of R rounds. The durable systems write into a new directory\n"
                   "rlbench-micro-XXXXXX inside DIR, removed at the end (also after a failure).",
        .epilog = "Exit codes: 0 done, 1 a system or the JSON file failed, 2 usage.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    o.seed = seed;
    if (rl__bench_micro_check(&o, &msg)) return rl__args_usage_error(&cmd, "%s", rl__errdetail_get(&msg));
    FILE *jf = NULL;
    if (json_path && !(jf = open_json(cmd.name, json_path))) return 1;
    rl_buf json;
    rl__buf_init(&json);
    int rc = rl__bench_micro_run(&o, stdout, jf ? &json : NULL);
    int bad = jf ? write_json(cmd.name, json_path, jf, &json) : 0;
    rl__buf_release(&json);
    if (rc) fprintf(stderr, "rlbench micro: %s: %s\n", rl_error_name(rc), rl_error_message(rc));
    return rc || bad ? 1 : 0;
}

static int cmd_query(int argc, char **argv) {
    rl__query_micro_options o = {.records = 1000, .padding = 100000, .seconds = 0.3, .repeats = 5};
    static const rl__arg_choice secondaries[] = {{"default", RL_SECONDARY_DEFAULT},
                                                 {"individual", RL_SECONDARY_INDIVIDUAL},
                                                 {"grouped", RL_SECONDARY_GROUPED},
                                                 {NULL, 0}};
    const char *json_path = NULL;
    int code;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    const rl__arg opts[] = {
        {.name = "records",
         .kind = RL_ARG_INT,
         .dest = &o.records,
         .min = 1,
         .max = RL__QUERY_MICRO_RECORDS_MAX,
         .help = "Orders per dataset"},
        {.name = "padding",
         .kind = RL_ARG_INT,
         .dest = &o.padding,
         .metavar = "B",
         .min = 0,
         .max = RL__TOOL_PADDING_MAX,
         .help = "bytes of padding of the split dataset's records"},
        ROUND_OPTS(o, json_path, RL__QUERY_MICRO_SECONDS_MIN, RL__QUERY_MICRO_SECONDS_MAX, RL__QUERY_MICRO_REPEATS_MAX),
        {.name = "only",
         .kind = RL_ARG_STRING,
         .dest = &o.only,
         .metavar = "CASE",
         .help = "run the cases whose name dataset/rows/direction/system contains CASE"},
        {.name = "db",
         .kind = RL_ARG_STRING,
         .dest = &o.db,
         .metavar = "URL",
         .flags = RL_ARG_NONEMPTY,
         .help = "run the reclayer cases on this database (e.g. cluster:DIR/reclayer.cluster; its "
                 "(\"bench\",\"orders\",DATASET) stores are cleared and loaded) instead of a fresh mem:"},
        {.name = "stats",
         .kind = RL_ARG_FLAG,
         .dest = &o.stats,
         .help = "also print each case's trace summary (requests per link, round trips, critical round "
                 "trips, bytes) from one untimed op after its rounds"},
        {.name = "secondary",
         .kind = RL_ARG_ENUM,
         .dest = &o.secondary,
         .metavar = "STRATEGY",
         .choices = secondaries,
         .help = "remote cases on a cluster: how storage servers read records other servers hold "
                 "(individual: batches of 10 reads; grouped: one multi-read per server per page)"},
        {0}};
    const rl__args_cmd cmd = {
        .name = "rlbench query",
        .summary = "Index scans of the Order store (price_idx) on mem: returning 1, 10 and 1,000 rows,\n"
                   "forward and reverse, with each fetch method (scan, remote, remote-fallback, adaptive), beside\n"
                   "SQLite running SELECT ... ORDER BY price [DESC] LIMIT n on an in-memory table with an\n"
                   "index on price, in the same process. Datasets: small (no padding) and split (B bytes\n"
                   "of padding: two chunks per record). Reports ns/op, allocs/op, B/op, rows/op and the\n"
                   "ratio to SQLite (median of R rounds of S seconds per system, alternating the order).\n"
                   "Case names are dataset/rows/direction/system, e.g. 'small/rows1000' or\n"
                   "'split/limit1/reverse/remote' select cases; nothing is written to disk.",
        .epilog = "Exit codes: 0 done, 1 a case or the JSON file failed, 2 usage.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    if (rl__bench_query_micro_check(&o, &msg)) return rl__args_usage_error(&cmd, "%s", rl__errdetail_get(&msg));
    FILE *jf = NULL;
    if (json_path && !(jf = open_json(cmd.name, json_path))) return 1;
    rl_buf json;
    rl__buf_init(&json);
    int rc = rl__bench_query_micro_run(&o, stdout, jf ? &json : NULL);
    int bad = jf ? write_json(cmd.name, json_path, jf, &json) : 0;
    rl__buf_release(&json);
    if (rc) fprintf(stderr, "rlbench query: %s: %s\n", rl_error_name(rc), rl_error_message(rc));
    return rc || bad ? 1 : 0;
}

/* Read the whole file at path (at most 1 MiB) into out. 0, or 1 after printing why. */
static int read_file(const char *cmd, const char *path, rl_buf *out) {
    char buf[65536];
    size_t n;
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    while ((n = fread(buf, 1, sizeof buf, f)) > 0 && out->len <= (1u << 20)) rl__buf_append(out, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad || out->len > (1u << 20)) {
        fprintf(stderr, "%s: cannot read %s: %s\n", cmd, path, bad ? "read error" : "larger than 1 MiB");
        return 1;
    }
    return 0;
}

/* rlbench campaign compare A B: the table of what changed between two runs. */
static int cmd_campaign_compare(int argc, char **argv) {
    const char *a = NULL, *b = NULL, *metric = "ns_per_op";
    int code;
    const rl__arg opts[] = {{.name = "metric",
                             .kind = RL_ARG_STRING,
                             .dest = &metric,
                             .metavar = "NAME",
                             .flags = RL_ARG_NONEMPTY,
                             .help = "the metric compared (ns_per_op, bytes_per_op, ... as in summary.csv), or all"},
                            {0}};
    const rl__arg pos[] = {{.name = "A", .kind = RL_ARG_STRING, .dest = &a, .help = "the first run's --out directory"},
                           {.name = "B", .kind = RL_ARG_STRING, .dest = &b, .help = "the second run's --out directory"},
                           {0}};
    const rl__args_cmd cmd = {
        .name = "rlbench campaign compare",
        .summary = "What changed between two campaign runs: for every (topology, case, comparison) both ratios\n"
                   "with their intervals, B/A, whether the intervals overlap and whether the ratios point the\n"
                   "same way, and the cases' labels when either is not clean; then the throughput levels\n"
                   "(queries/s, p50, B/A) when either run has them. Reads each run's results\n"
                   "(DIR/results.json.zst, or a results file).",
        .epilog = "Exit codes: 0 the table was printed, 1 a run could not be read, 2 usage.",
        .opts = opts,
        .pos = pos};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__camp_compare_dirs(a, b, metric, stdout, &msg);
    if (rc == RL_E_INVALID_ARGUMENT) return rl__args_usage_error(&cmd, "%s", rl__errdetail_get(&msg));
    if (rc) fprintf(stderr, "%s: %s: %s\n", cmd.name, rl_error_name(rc), rl__errdetail_get(&msg));
    return rc ? 1 : 0;
}

/* rlbench campaign report DIR: the run's report written again from its results. */
static int cmd_campaign_report(int argc, char **argv) {
    const char *dir = NULL;
    int code;
    const rl__arg opts[] = {{0}};
    const rl__arg pos[] = {{.name = "DIR", .kind = RL_ARG_STRING, .dest = &dir, .help = "the run's --out directory"},
                           {0}};
    const rl__args_cmd cmd = {
        .name = "rlbench campaign report",
        .summary = "Write a run's report.md and report.html again from its results (DIR/results.json.zst and\n"
                   "DIR/manifest.json) with this binary's report code — after the report gained a section, say —\n"
                   "and print the main table. The results, the CSVs and the plots are left as the run wrote them.",
        .epilog = "Exit codes: 0 written, 1 the run could not be read or the report not written, 2 usage.",
        .opts = opts,
        .pos = pos};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__camp_report_redo(dir, stdout, &msg);
    if (rc) fprintf(stderr, "%s: %s: %s\n", cmd.name, rl_error_name(rc), rl__errdetail_get(&msg));
    return rc ? 1 : 0;
}

static int cmd_campaign(int argc, char **argv) {
    const char *protocol_path = NULL, *out_dir = NULL;
    int quick = 0, print = 0, code;
    if (argc > 1 && !strcmp(argv[1], "compare")) return cmd_campaign_compare(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "report")) return cmd_campaign_report(argc - 1, argv + 1);
    /* --out is required unless --print-protocol (which runs nothing) is given. */
    int printing = 0;
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) printing |= !strcmp(argv[i], "--print-protocol");
    rl__arg opts[] = {{.name = "protocol",
                       .kind = RL_ARG_STRING,
                       .dest = &protocol_path,
                       .metavar = "FILE|NAME",
                       .flags = RL_ARG_NONEMPTY,
                       .help = "the protocol (JSON) declaring the whole campaign, or a built-in one: full, "
                               "quick, c3 (the C3 report's design), m2 (the M2 report's); ./NAME for a file"},
                      {.name = "quick",
                       .kind = RL_ARG_FLAG,
                       .dest = &quick,
                       .help = "the built-in quick protocol (embedded and single at 250 us; about 4 minutes)"},
                      {.name = "out",
                       .kind = RL_ARG_STRING,
                       .dest = &out_dir,
                       .metavar = "DIR",
                       .flags = RL_ARG_NONEMPTY | RL_ARG_REQUIRED,
                       .help = "a new or empty directory for results.json.zst, samples.csv, summary.csv, "
                               "report.md, report.html, plots/, manifest.json"},
                      {.name = "print-protocol",
                       .kind = RL_ARG_FLAG,
                       .dest = &print,
                       .help = "print the built-in protocol (full, the quick one with --quick, or the one "
                               "named by --protocol) and exit (no --out)"},
                      {0}};
    if (printing) opts[2].flags &= ~(unsigned)RL_ARG_REQUIRED;
    const rl__args_cmd cmd = {
        .name = "rlbench campaign",
        .summary = "The reference reports' benchmark campaign: a protocol declares topologies, dataset, cases,\n"
                   "arms, blocks, repeats, the timed loop, the bootstrap and the contamination threshold before\n"
                   "anything is timed. The dataset is loaded once per topology and checked (integrity checker,\n"
                   "three defect controls); every (block, case, arm) runs in a fresh process, the order of arms\n"
                   "alternating between blocks; each case is surrounded by an RTT probe, placement receipts and\n"
                   "CPU telemetry. Writes DIR/results.json.zst (every raw sample, check and the summary, as JSON\n"
                   "compressed with zstd: `zstd -d` gives results.json), samples.csv (one row per sample),\n"
                   "summary.csv (one row per case, arm and metric, with the ratio's interval), report.md,\n"
                   "report.html (one self-contained page), plots/ (SVG and PNG, gnuplot) and manifest.json,\n"
                   "prints the main table; progress and the time left for the whole run go to\n"
                   "stderr. Without --protocol, the built-in full protocol runs (--quick: the quick one). A single\n"
                   "topology runs on a local rlkvd cluster, with its injected delay on\n"
                   "the client's links (removed and probed again at the end); a multi topology on a local\n"
                   "cluster of several hosts (127.0.0.H) with replication teams, the index and the records\n"
                   "placed on teams disjoint or colocated, the delay between hosts and to the client. An fdb\n"
                   "topology ({\"kind\": \"fdb\", \"url\": \"fdb:PATH/fdb.cluster\"}) runs the arms against an\n"
                   "existing FoundationDB database (the client library from RL_FDB_LIBRARY, default\n"
                   "libfdb_c.so): the campaign loads and checks its data under (\"bench\", NAME), clears it\n"
                   "afterwards, and records the RTT probe and the placement receipt as n/a there.",
        .epilog = "`rlbench campaign compare A B` prints what changed between two runs, `rlbench campaign report DIR`\n"
                  "writes a run's report again from its results (--help there).\n"
                  "Exit codes: 0 every check passed and every process ran (contaminated cases are labelled,\n"
                  "not failures), 1 a check or a process failed or the output could not be written (the\n"
                  "outputs say which), 2 usage or a bad protocol.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    if (protocol_path && quick) return rl__args_usage_error(&cmd, "--protocol and --quick exclude each other");
    rl__camp_protocol p;
    /* --protocol NAME: a built-in protocol (full, quick, c3, m2); anything else is a file. */
    int named = protocol_path && rl__camp_protocol_named(protocol_path, &p) == RL_OK;
    if (print && protocol_path && !named)
        return rl__args_usage_error(&cmd, "--print-protocol prints a built-in protocol (full, quick, c3, m2): "
                                          "not a file given with --protocol");
    if (print && out_dir) return rl__args_usage_error(&cmd, "--print-protocol runs nothing: not with --out");
    rl_buf text;
    rl__buf_init(&text);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = 0;
    if (named) {
        rl__camp_protocol_print(&p, &text);
    } else if (protocol_path) {
        if (read_file(cmd.name, protocol_path, &text)) {
            rc = 1;
            goto done;
        }
        if (rl__camp_protocol_parse((const char *)text.data, text.len, &p, &msg)) {
            fprintf(stderr, "%s: %s: %s\n", cmd.name, protocol_path, rl__errdetail_get(&msg));
            rc = 2;
            goto done;
        }
    } else {
        rl__camp_protocol_builtin(quick, &p);
        rl__camp_protocol_print(&p, &text);
    }
    if (print) {
        fwrite(text.data, 1, text.len, stdout);
        goto done;
    }
    if (!out_dir) {
        rc = rl__args_usage_error(&cmd, "option --out is required (or --print-protocol)");
        goto done;
    }
    rl__camp_run_options o = {.protocol = &p,
                              .protocol_text = (const char *)text.data,
                              .protocol_len = text.len,
                              .protocol_source = named           ? p.name
                                                 : protocol_path ? protocol_path
                                                 : quick         ? "built-in quick"
                                                                 : "built-in full",
                              .out_dir = out_dir,
                              .argc = argc,
                              .argv = argv,
                              .out = stdout,
                              .progress = stderr,
                              .test_break_receipt = getenv("RL_CAMPAIGN_TEST_BREAK_RECEIPT"),
                              .test_fail_worker = getenv("RL_CAMPAIGN_TEST_FAIL_WORKER")};
    int e = rl__camp_run(&o, &msg);
    if (e) {
        fprintf(stderr, "%s: %s: %s\n", cmd.name, rl_error_name(e), rl__errdetail_get(&msg));
        rc = 1;
    }
done:
    rl__buf_release(&text);
    return rc;
}

static int cmd_campaign_worker(int argc, char **argv) {
    static const rl__arg_choice arms[] = {
        {"ordinary", RL_CAMP_ORDINARY}, {"remote", RL_CAMP_REMOTE}, {"remote-grouped", RL_CAMP_REMOTE_GROUPED},
        {"adaptive", RL_CAMP_ADAPTIVE}, {"sqlite", RL_CAMP_SQLITE}, {NULL, 0}};
    rl__camp_worker_options o = {.repeats = 1, .seconds = 0.1, .warmup_seconds = 0, .pipeline_depth = 10};
    int arm = RL_CAMP_ORDINARY, code;
    const rl__arg opts[] = {{.name = "url",
                             .kind = RL_ARG_STRING,
                             .dest = &o.url,
                             .metavar = "URL",
                             .flags = RL_ARG_REQUIRED,
                             .help = "the database"},
                            {.name = "store",
                             .kind = RL_ARG_STRING,
                             .dest = &o.store,
                             .metavar = "JSON",
                             .flags = RL_ARG_REQUIRED,
                             .help = "the store's prefix as a JSON array"},
                            {.name = "case",
                             .kind = RL_ARG_STRING,
                             .dest = &o.case_name,
                             .metavar = "NAME",
                             .flags = RL_ARG_REQUIRED,
                             .help = "VARIANT-ROWS-DIRECTION"},
                            {.name = "arm", .kind = RL_ARG_ENUM, .dest = &arm, .choices = arms, .help = "the arm"},
                            {.name = "sqlite",
                             .kind = RL_ARG_STRING,
                             .dest = &o.sqlite,
                             .metavar = "FILE",
                             .flags = RL_ARG_NONEMPTY,
                             .help = "the SQLite peer (sqlite arm)"},
                            {.name = "repeats",
                             .kind = RL_ARG_INT,
                             .dest = &o.repeats,
                             .min = 1,
                             .max = RL_CAMP_MAX_REPEATS,
                             .help = "timed loops"},
                            {.name = "seconds",
                             .kind = RL_ARG_DOUBLE,
                             .dest = &o.seconds,
                             .dmin = 0.001,
                             .dmax = 3600,
                             .help = "per timed loop"},
                            {.name = "warmup",
                             .kind = RL_ARG_DOUBLE,
                             .dest = &o.warmup_seconds,
                             .dmin = 0,
                             .dmax = 3600,
                             .help = "untimed loop first (at least one op)"},
                            {.name = "pipeline-depth",
                             .kind = RL_ARG_INT,
                             .dest = &o.pipeline_depth,
                             .min = 1,
                             .max = 1000,
                             .help = "SCAN_AND_FETCH loads in flight"},
                            {.name = "throughput-seconds",
                             .kind = RL_ARG_DOUBLE,
                             .dest = &o.throughput_seconds,
                             .dmin = 0,
                             .dmax = 3600,
                             .help = "throughput mode: one closed-loop window this long instead of the repeats"},
                            {.name = "start-at-us",
                             .kind = RL_ARG_UINT64,
                             .dest = &o.start_at_us,
                             .help = "throughput mode: the window starts at this wall-clock time (us since the "
                                     "epoch; 0: at once)"},
                            {0}};
    const rl__args_cmd cmd = {.name = "rlbench campaign-worker",
                              .summary =
                                  "One (block, case, arm) process of `rlbench campaign` (which runs it): one JSON\n"
                                  "line of per-op figures per repeat on stdout.",
                              .epilog = "Exit codes: 0 done, 1 failed (a JSON error line says why), 2 usage.",
                              .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    o.arm = (rl__camp_arm)arm;
    return rl__camp_worker(&o, stdout) ? 1 : 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: rlbench COMMAND [ARGS...]\n\ncommands:\n"
               "  micro     KV micro-benchmark against LMDB and SQLite\n"
               "  query     query micro-benchmark: index scans per fetch method against SQLite\n"
               "  campaign  the reference reports' campaign: protocol, checks, statistics, report, plots\n"
               "\n`rlbench COMMAND --help` describes one command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("%s\n", rl_version_string());
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "micro")) return cmd_micro(argc - 1, argv + 1);
    if (!strcmp(argv[1], "query")) return cmd_query(argc - 1, argv + 1);
    if (!strcmp(argv[1], "campaign")) return cmd_campaign(argc - 1, argv + 1);
    if (!strcmp(argv[1], "campaign-worker")) return cmd_campaign_worker(argc - 1, argv + 1);
    fprintf(stderr, "rlbench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
