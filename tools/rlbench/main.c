/* main.c — `rlbench`, reclayer's benchmark driver. Subcommands:
 *   micro   the KV micro-benchmark: reclayer mem:/file:, LMDB and SQLite side by side
 *   query   the query micro-benchmark: index scans with each fetch method beside SQLite
 *
 * Arguments go through the shared parser (base/args.h): every number is checked against the range
 * its help shows, and a usage error exits 2. A --json FILE is created before the benchmark runs
 * (a file that cannot be created fails at once, exit 1, naming it). The logic is in src/bench.
 * Exit codes: 0 done, 1 a failure (a system failed, the JSON file, the scratch directory), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/args.h"
#include "bench/micro.h"
#include "bench/query_micro.h"
#include "reclayer/error.h"
#include "record/record_int.h"

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

static int cmd_micro(int argc, char **argv) {
    rl_micro_options o = {.keys = 100000, .value_len = 100, .seconds = 0.5, .repeats = 5,
                          .seed = (unsigned long long)time(NULL)};
    const char *json_path = NULL;
    uint64_t seed = o.seed;
    int code;
    char msg[512];
    const rl_arg opts[] = {
        {.name = "keys", .kind = RL_ARG_INT, .dest = &o.keys, .min = RL__MICRO_KEYS_MIN, .max = RL__MICRO_KEYS_MAX,
         .help = "records in the dataset"},
        {.name = "value-len", .kind = RL_ARG_INT, .dest = &o.value_len, .metavar = "B", .min = 1,
         .max = RL__MICRO_VALUE_LEN_MAX, .help = "bytes per value"},
        {.name = "seconds", .kind = RL_ARG_DOUBLE, .dest = &o.seconds, .metavar = "S", .dmin = RL__MICRO_SECONDS_MIN,
         .dmax = RL__MICRO_SECONDS_MAX, .help = "per system per round"},
        {.name = "repeats", .kind = RL_ARG_INT, .dest = &o.repeats, .metavar = "R", .min = 1,
         .max = RL__MICRO_REPEATS_MAX, .help = "rounds (the table shows their median)"},
        {.name = "dir", .kind = RL_ARG_STRING, .dest = &o.dir, .metavar = "DIR", .flags = RL_ARG_NONEMPTY,
         .help = "an existing directory to make the scratch directory in (default $TMPDIR or /tmp)"},
        {.name = "only", .kind = RL_ARG_STRING, .dest = &o.only, .metavar = "WORKLOAD",
         .help = "run one workload: point, range1000, mapped1000 or commit100"},
        {.name = "json", .kind = RL_ARG_STRING, .dest = &json_path, .metavar = "FILE", .flags = RL_ARG_NONEMPTY,
         .help = "also write the results as JSON to FILE (created before the run)"},
        {.name = "seed", .kind = RL_ARG_UINT64, .dest = &seed, .metavar = "N", .flags = RL_ARG_NO_DEFAULT,
         .help = "the random seed (default: from the clock; printed)"},
        {0}};
    const rl_args_cmd cmd = {
        .name = "rlbench micro",
        .summary = "Runs the same work on reclayer (mem: and file:), LMDB and SQLite, side by side:\n"
                   "point (random reads in one transaction), range1000, mapped1000 (1,000 index entries\n"
                   "joined to their records) and commit100 (100 small writes, durable commit).\n"
                   "Each round runs every system for S seconds, alternating the order; the table shows\n"
                   "the median of R rounds. The durable systems write into a new directory\n"
                   "rlbench-micro-XXXXXX inside DIR, removed at the end (also after a failure).",
        .epilog = "Exit codes: 0 done, 1 a system or the JSON file failed, 2 usage.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    o.seed = seed;
    if (rl__bench_micro_check(&o, msg, sizeof msg)) return rl__args_usage_error(&cmd, "%s", msg);
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
    rl_query_micro_options o = {.records = 1000, .padding = 100000, .seconds = 0.3, .repeats = 5};
    const char *json_path = NULL;
    int code;
    char msg[512];
    const rl_arg opts[] = {
        {.name = "records", .kind = RL_ARG_INT, .dest = &o.records, .min = 1, .max = RL__QUERY_MICRO_RECORDS_MAX,
         .help = "Orders per dataset"},
        {.name = "padding", .kind = RL_ARG_INT, .dest = &o.padding, .metavar = "B", .min = 0,
         .max = RL__TOOL_PADDING_MAX, .help = "bytes of padding of the split dataset's records"},
        {.name = "seconds", .kind = RL_ARG_DOUBLE, .dest = &o.seconds, .metavar = "S",
         .dmin = RL__QUERY_MICRO_SECONDS_MIN, .dmax = RL__QUERY_MICRO_SECONDS_MAX, .help = "per system per round"},
        {.name = "repeats", .kind = RL_ARG_INT, .dest = &o.repeats, .metavar = "R", .min = 1,
         .max = RL__QUERY_MICRO_REPEATS_MAX, .help = "rounds (the table shows their median)"},
        {.name = "only", .kind = RL_ARG_STRING, .dest = &o.only, .metavar = "CASE",
         .help = "run the cases whose name dataset/rows/direction/system contains CASE"},
        {.name = "json", .kind = RL_ARG_STRING, .dest = &json_path, .metavar = "FILE", .flags = RL_ARG_NONEMPTY,
         .help = "also write the results as JSON to FILE (created before the run)"},
        {0}};
    const rl_args_cmd cmd = {
        .name = "rlbench query",
        .summary = "Index scans of the Order store (price_idx) on mem: returning 1, 10 and 1,000 rows,\n"
                   "forward and reverse, with each fetch method (scan, remote, remote-fallback), beside\n"
                   "SQLite running SELECT ... ORDER BY price [DESC] LIMIT n on an in-memory table with an\n"
                   "index on price, in the same process. Datasets: small (no padding) and split (B bytes\n"
                   "of padding: two chunks per record). Reports ns/op, allocs/op, B/op, rows/op and the\n"
                   "ratio to SQLite (median of R rounds of S seconds per system, alternating the order).\n"
                   "Case names are dataset/rows/direction/system, e.g. 'small/rows1000' or\n"
                   "'split/limit1/reverse/remote' select cases; nothing is written to disk.",
        .epilog = "Exit codes: 0 done, 1 a case or the JSON file failed, 2 usage.",
        .opts = opts};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    if (rl__bench_query_micro_check(&o, msg, sizeof msg)) return rl__args_usage_error(&cmd, "%s", msg);
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

static void usage(FILE *f) {
    fprintf(f, "usage: rlbench COMMAND [ARGS...]\n\ncommands:\n"
               "  micro   KV micro-benchmark against LMDB and SQLite\n"
               "  query   query micro-benchmark: index scans per fetch method against SQLite\n"
               "\n`rlbench COMMAND --help` describes one command.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "micro")) return cmd_micro(argc - 1, argv + 1);
    if (!strcmp(argv[1], "query")) return cmd_query(argc - 1, argv + 1);
    fprintf(stderr, "rlbench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
