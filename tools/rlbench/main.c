/* main.c — `rlbench`, reclayer's benchmark driver. Subcommands:
 *   micro   the KV micro-benchmark: reclayer mem:/file:, LMDB and SQLite side by side
 *   query   the query micro-benchmark: index scans with each fetch method beside SQLite
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/micro.h"
#include "bench/query_micro.h"
#include "reclayer/error.h"

static void usage_micro(FILE *f) {
    fprintf(f,
            "usage: rlbench micro [--keys N] [--value-len B] [--seconds S] [--repeats R]\n"
            "                     [--dir DIR] [--only WORKLOAD] [--json FILE] [--seed N]\n\n"
            "Runs the same work on reclayer (mem: and file:), LMDB and SQLite, side by side:\n"
            "point (random reads in one transaction), range1000, mapped1000 (1,000 index entries\n"
            "joined to their records) and commit100 (100 small writes, durable commit).\n"
            "Each round runs every system for S seconds, alternating the order; the table shows\n"
            "the median of R rounds. Defaults: --keys 100000 --value-len 100 --seconds 0.5\n"
            "--repeats 5 --dir /tmp/rlbench-micro-PID.\n");
}

static int cmd_micro(int argc, char **argv) {
    rl_micro_options o = {.keys = 100000, .value_len = 100, .seconds = 0.5, .repeats = 5,
                          .seed = (unsigned long long)time(NULL)};
    const char *json_path = NULL;
    char dirbuf[256];
    snprintf(dirbuf, sizeof dirbuf, "/tmp/rlbench-micro-%d", (int)getpid());
    o.dir = dirbuf;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_micro(stdout);
            return 0;
        }
        if (!v) {
            usage_micro(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--keys")) o.keys = atoi(v);
        else if (!strcmp(a, "--value-len")) o.value_len = atoi(v);
        else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
        else if (!strcmp(a, "--repeats")) o.repeats = atoi(v);
        else if (!strcmp(a, "--dir")) o.dir = v;
        else if (!strcmp(a, "--only")) o.only = v;
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "rlbench micro: unknown option %s\n", a);
            usage_micro(stderr);
            return 2;
        }
    }
    if (o.keys < 2000 || o.value_len < 1 || o.seconds <= 0 || o.repeats < 1) {
        fprintf(stderr, "rlbench micro: --keys must be >= 2000, the others positive\n");
        return 2;
    }
    mkdir(o.dir, 0755);
    fprintf(stderr, "rlbench micro: seed %llu, scratch %s\n", o.seed, o.dir);
    rl_buf json;
    rl__buf_init(&json);
    int rc = rl__bench_micro_run(&o, stdout, json_path ? &json : NULL);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (f) {
            fwrite(json.data, 1, json.len, f);
            fputc('\n', f);
            fclose(f);
        }
    }
    rl__buf_release(&json);
    if (rc) fprintf(stderr, "rlbench micro: %s: %s\n", rl_error_name(rc), rl_error_message(rc));
    return rc ? 1 : 0;
}

static void usage_query(FILE *f) {
    fprintf(f,
            "usage: rlbench query [--records N] [--padding B] [--seconds S] [--repeats R]\n"
            "                     [--only CASE] [--json FILE]\n\n"
            "Index scans of the Order store (price_idx) on mem: returning 1, 10 and 1,000 rows,\n"
            "forward and reverse, with each fetch method (scan, remote, remote-fallback), beside\n"
            "SQLite running SELECT ... ORDER BY price [DESC] LIMIT n on an in-memory table with an\n"
            "index on price, in the same process. Datasets: small (no padding) and split (B bytes\n"
            "of padding: two chunks per record). Reports ns/op, allocs/op, B/op, rows/op and the\n"
            "ratio to SQLite (median of R rounds of S seconds per system, alternating the order).\n"
            "CASE selects cases whose name dataset/rows/direction/system contains it, e.g.\n"
            "'small/rows1000' or 'split/limit1/reverse/remote'. Defaults: --records 1000\n"
            "--padding 100000 --seconds 0.3 --repeats 5.\n");
}

static int cmd_query(int argc, char **argv) {
    rl_query_micro_options o = {.records = 1000, .padding = 100000, .seconds = 0.3, .repeats = 5};
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_query(stdout);
            return 0;
        }
        if (!v) {
            usage_query(stderr);
            return 2;
        }
        i++;
        if (!strcmp(a, "--records")) o.records = atoi(v);
        else if (!strcmp(a, "--padding")) o.padding = atoi(v);
        else if (!strcmp(a, "--seconds")) o.seconds = atof(v);
        else if (!strcmp(a, "--repeats")) o.repeats = atoi(v);
        else if (!strcmp(a, "--only")) o.only = v;
        else if (!strcmp(a, "--json")) json_path = v;
        else {
            fprintf(stderr, "rlbench query: unknown option %s\n", a);
            usage_query(stderr);
            return 2;
        }
    }
    if (o.records < 1 || o.records > 1000000 || o.padding < 0 || o.padding > 10000000 ||
        o.seconds <= 0 || o.repeats < 1) {
        fprintf(stderr, "rlbench query: --records must be 1..1000000, --padding 0..10000000, "
                        "--seconds and --repeats positive\n");
        return 2;
    }
    rl_buf json;
    rl__buf_init(&json);
    int rc = rl__bench_query_micro_run(&o, stdout, json_path ? &json : NULL);
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (f) {
            fwrite(json.data, 1, json.len, f);
            fputc('\n', f);
            fclose(f);
        } else {
            fprintf(stderr, "rlbench query: cannot write %s\n", json_path);
            rc = rc ? rc : RL_E_IO_ERROR;
        }
    }
    rl__buf_release(&json);
    if (rc) fprintf(stderr, "rlbench query: %s: %s\n", rl_error_name(rc), rl_error_message(rc));
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("usage: rlbench COMMAND [ARGS...]\n\ncommands:\n  micro   KV micro-benchmark against LMDB and SQLite\n"
               "  query   query micro-benchmark: index scans per fetch method against SQLite\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "micro")) return cmd_micro(argc - 1, argv + 1);
    if (!strcmp(argv[1], "query")) return cmd_query(argc - 1, argv + 1);
    fprintf(stderr, "rlbench: unknown command '%s'\n", argv[1]);
    return 2;
}
