/* cmd_ping.c — `rl ping`: round trips to a cluster's processes through the client's own path (the
 * PING of docs/protocol.md on the cluster: backend's connection, so an injected delay is on it).
 *
 *   rl ping [--db cluster:FILE] [--to coordinator|storage:ID|all] [-n 100] [--json] [--timeout S]
 *   (-n = --n)
 *
 * Prints, per target, min / p50 / p99 / max (and mean) of the n round trips in µs; --json prints
 * {"db", "delay_us", "jitter_us", "targets": [{"role", "id", "n", "min_us", "p50_us", "p99_us",
 * "max_us", "mean_us"}]} on one line. The pings go one after another (a round trip each), after
 * one unmeasured ping per target (the connection is opened by it). With `rl cluster up --delay-us
 * 250` a round trip to any process is about 0.5 ms plus loopback. A URL that is not cluster: is a
 * usage error. A ping waiting for its server is reported on stderr after 3 s (app/tool.h,
 * rl__tool_wait); each ping waits at most --timeout seconds (default 30; 0: as long as the
 * client retries) and then fails with timed_out (1004); a server that refuses connections fails
 * sooner, after the client's 5 s retry window, with connection_failed (1026). Exit codes: 0 ok,
 * 1 failure, 2 usage.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "base/buf.h"
#include "kv/cluster/cluster.h"
#include "app/tool.h"
#include "reclayer/error.h"
#include "reclayer/kv.h"

#define PING_MAX_TARGETS 256

int rl_cmd_ping(int argc, char **argv) {
    const char *url = NULL, *to = "all";
    int n = 100, as_json = 0, code;
    double timeout_s = RL__TOOL_DEFAULT_TIMEOUT_S;
    const rl__arg opts[] = {
        RL__TOOL_OPT_DB_HELP(&url, "the database: cluster:FILE (a cluster file, e.g. DIR/reclayer.cluster of rl "
                                   "cluster up)"),
        {.name = "to",
         .kind = RL_ARG_STRING,
         .dest = &to,
         .metavar = "TARGET",
         .flags = RL_ARG_NONEMPTY,
         .help = "coordinator, storage:ID or all (every process of the shard map's server list)"},
        {.name = "n",
         .kind = RL_ARG_INT,
         .dest = &n,
         .metavar = "N",
         .min = 1,
         .max = RL_KV_PING_MAX,
         .help = "round trips per target"},
        {.name = "json", .kind = RL_ARG_FLAG, .dest = &as_json, .help = "print the figures as JSON"},
        {.name = "timeout",
         .kind = RL_ARG_DOUBLE,
         .dest = &timeout_s,
         .metavar = "S",
         .dmin = 0,
         .dmax = 86400,
         .help = "seconds each ping waits for its reply before failing with timed_out (1004); 0: as long as the "
                 "client retries (a server refusing connections fails after 5 s with connection_failed, 1026). A "
                 "ping that waits is reported on stderr after 3 s"},
        {0}};
    const rl__args_cmd cmd = {.name = "rl ping",
                              .summary = "Measure round trips to a cluster's processes through the client's own\n"
                                         "connections (the path reads take, injected delay included): min, p50,\n"
                                         "p99 and max in microseconds per target.",
                              .epilog = "Exit codes: 0 ok, 1 failure, 2 usage.",
                              .opts = opts};
    /* -n N is accepted as --n N (the ping tools' spelling; the parser knows long options only). */
    char **av = malloc(((size_t)argc + 1) * sizeof *av);
    if (!av) return 1;
    for (int i = 0; i < argc; i++) av[i] = !strcmp(argv[i], "-n") ? (char *)"--n" : argv[i];
    av[argc] = NULL;
    int stop = rl__args_parse(&cmd, argc, av, &code);
    free(av);
    if (stop) return code;
    rl__tool_db dbu;
    if (rl__tool_db_choose(&cmd, url, &dbu, &code)) return code;
    url = dbu.url;
    if (strncmp(url, "cluster:", 8) != 0)
        return rl__args_usage_error(&cmd,
                                    "--db %s: rl ping measures a cluster (cluster:FILE); mem: and file: "
                                    "databases have no network to measure",
                                    url);
    uint32_t ids[PING_MAX_TARGETS];
    int n_ids = 0, want_all = 0;
    if (!strcmp(to, "coordinator")) {
        ids[n_ids++] = 0;
    } else if (!strncmp(to, "storage:", 8)) {
        char *end = NULL;
        unsigned long v = strtoul(to + 8, &end, 10);
        if (!to[8] || !end || *end || v < 1 || v > 1000000)
            return rl__args_usage_error(&cmd, "--to %s: storage:ID needs an id >= 1", to);
        ids[n_ids++] = (uint32_t)v;
    } else if (!strcmp(to, "all")) {
        want_all = 1;
    } else {
        return rl__args_usage_error(&cmd, "--to %s: give coordinator, storage:ID or all", to);
    }
    rl_db_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    const rl__tool_wait w = {
        .prog = "rl ping", .timeout_ms = rl__tool_wait_ms(timeout_s), .pings = 1}; /* the timeout bounds each ping */
    rl__tool_db_options(&o, &w);
    int timeout_ms = w.timeout_ms <= 0 || w.timeout_ms > INT_MAX ? INT_MAX : (int)w.timeout_ms;
    rl_db *db = NULL;
    int rc = rl_db_open(url, &o, &db);
    if (rc) {
        fprintf(stderr, "rl ping: cannot open %s: %s (%d): %s\n", url, rl_error_name(rc), rc, rl_error_message(rc));
        return 1;
    }
    if (want_all && (rc = rl__db_cluster_servers(db, ids, PING_MAX_TARGETS, &n_ids))) {
        fprintf(stderr, "rl ping: cannot list the servers of %s: %s\n", url, rl_error_name(rc));
        rl_db_close(db);
        return 1;
    }
    uint32_t d_us = 0, j_us = 0;
    (void)rl__db_cluster_delay(db, &d_us, &j_us);
    rl_buf out;
    rl__buf_init(&out);
    if (as_json) {
        rl__buf_printf(&out, "{\"db\": \"");
        for (const char *p = url; *p; p++) {
            if (*p == '"' || *p == '\\') rl__buf_append_byte(&out, '\\');
            if ((unsigned char)*p >= 0x20) rl__buf_append_byte(&out, (uint8_t)*p);
        }
        rl__buf_printf(&out, "\", \"delay_us\": %u, \"jitter_us\": %u, \"targets\": [", d_us, j_us);
    } else {
        printf("%s: injected delay %u us one way (jitter %u us); %d round trips per target\n", url, d_us, j_us, n);
        printf("%-12s %4s %10s %10s %10s %10s %10s\n", "TARGET", "ID", "MIN_US", "P50_US", "P99_US", "MAX_US",
               "MEAN_US");
    }
    int exit_code = 0;
    for (int i = 0; i < n_ids; i++) {
        uint64_t warm = 0;
        rl__kv_ping_stats st;
        rc = rl__db_cluster_ping_within(db, ids[i], timeout_ms, &warm); /* opens the connection: not measured */
        if (rc == RL_OK) rc = rl__db_cluster_ping_stats_within(db, ids[i], n, timeout_ms, &st);
        const char *role = ids[i] ? "storage" : "coordinator";
        if (rc) {
            fprintf(stderr, "rl ping: %s %u: %s (%d): %s\n", role, ids[i], rl_error_name(rc), rc, rl_error_message(rc));
            exit_code = 1;
            continue;
        }
        if (as_json)
            rl__buf_printf(&out,
                           "%s{\"role\": \"%s\", \"id\": %u, \"n\": %d, \"min_us\": %.1f, \"p50_us\": %.1f, "
                           "\"p99_us\": %.1f, \"max_us\": %.1f, \"mean_us\": %.1f}",
                           i ? ", " : "", role, ids[i], st.n, (double)st.min_ns / 1e3, (double)st.p50_ns / 1e3,
                           (double)st.p99_ns / 1e3, (double)st.max_ns / 1e3, (double)st.mean_ns / 1e3);
        else
            printf("%-12s %4u %10.1f %10.1f %10.1f %10.1f %10.1f\n", role, ids[i], (double)st.min_ns / 1e3,
                   (double)st.p50_ns / 1e3, (double)st.p99_ns / 1e3, (double)st.max_ns / 1e3, (double)st.mean_ns / 1e3);
    }
    if (as_json) {
        rl__buf_printf(&out, "]}");
        if (!rl__buf_error(&out)) printf("%s\n", (const char *)out.data);
    }
    rl__buf_release(&out);
    rl_db_close(db);
    return exit_code;
}
