/* cmd_cluster.c — `rl cluster`: start, inspect, restart and stop a local cluster (one rlkvd
 * coordinator and N rlkvd storage servers on 127.0.0.0/8, with host labels and injected delay). A thin main over
 * src/app/cluster_admin.h, where the logic and its invariants live.
 *
 *   rl cluster up --dir D (--storage N | --hosts H [--storage-per-host S] [--host-addresses])
 *                 [--replication single|double|triple] [--delay-us N] [--jitter-us J]
 *                 [--engine memory|ssd]
 *                 [--shards K | --split KEY,...] [--no-sync] [--window-versions N] [--timeout S]
 *   rl cluster status --dir D [--json]
 *   rl cluster delay --dir D --delay-us N [--jitter-us J]
 *   rl cluster down --dir D
 *   rl cluster restart --dir D [--storage ID[,ID...]]... [--coordinator] [--kill] [--timeout S]
 *
 * Exit codes: 0 success, 1 failure (the reason on stderr; for status: something is down),
 * 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "app/args.h"
#include "base/buf.h"
#include "reclayer/error.h"
#include "net/netem.h"
#include "app/cluster_admin.h"
#include "app/cluster_status.h"

enum { C_UP, C_STATUS, C_DOWN, C_RESTART, C_DELAY };

#define SPLIT_MAX (RL_CLUSTER_MAX_SHARDS - 1)

static int failed(const char *what, int rc, const rl__errdetail *err) {
    fprintf(stderr, "rl cluster %s: %s (%d): %s\n", what, rl_error_name(rc), rc,
            rl__errdetail_len(err) ? rl__errdetail_get(err) : rl_error_message(rc));
    return 1;
}

int rl_cmd_cluster(int argc, char **argv) {
    const char *dir = NULL;
    int which = -1, code, as_json = 0, coordinator = 0, hard = 0;
    uint64_t delay_us = 0, jitter_us = 0;
    double timeout_s = RL_CLUSTER_DEFAULT_TIMEOUT_MS / 1000.0;
    const rl__arg opts[] = {{.name = "dir",
                             .kind = RL_ARG_STRING,
                             .dest = &dir,
                             .metavar = "DIR",
                             .flags = RL_ARG_REQUIRED | RL_ARG_NONEMPTY,
                             .help = "the cluster's directory (data, logs, pids.json, reclayer.cluster)"},
                            {0}};
    rl__cluster_up_args ua = RL__CLUSTER_UP_ARGS_INIT;
    const rl__arg up_opts[] = {RL__CLUSTER_UP_OPTS(&ua),
                               {.name = "timeout",
                                .kind = RL_ARG_DOUBLE,
                                .dest = &timeout_s,
                                .metavar = "S",
                                .dmin = 0.1,
                                .dmax = 3600,
                                .help = "seconds to wait until healthy; then stop everything and fail"},
                               {0}};
    const rl__arg status_opts[] = {
        {.name = "json", .kind = RL_ARG_FLAG, .dest = &as_json, .help = "print the status as JSON"}, {0}};
    const char *restart_ids[RL_CLUSTER_MAX_STORAGE];
    int n_restart_ids = 0;
    const rl__arg restart_opts[] = {
        {.name = "storage",
         .kind = RL_ARG_STRING,
         .dest = restart_ids,
         .metavar = "ID[,ID...]",
         .flags = RL_ARG_MULTI | RL_ARG_NONEMPTY,
         .max_count = RL_CLUSTER_MAX_STORAGE,
         .count = &n_restart_ids,
         .help = "restart these storage servers (a comma list, or the option repeated)"},
        {.name = "coordinator",
         .kind = RL_ARG_FLAG,
         .dest = &coordinator,
         .help = "restart the coordinator (with --storage: all of them together, the coordinator first)"},
        {.name = "kill",
         .kind = RL_ARG_FLAG,
         .dest = &hard,
         .help = "stop it with SIGKILL (a crash) instead of SIGTERM"},
        {.name = "timeout",
         .kind = RL_ARG_DOUBLE,
         .dest = &timeout_s,
         .metavar = "S",
         .dmin = 0.1,
         .dmax = 3600,
         .help = "seconds to wait until the cluster is healthy again"},
        {0}};
    const rl__args_cmd up = {
        .name = "rl cluster up",
        .brief = "create DIR and start a coordinator and N storage servers; print the cluster file",
        .summary = "Creates DIR (absent or empty), writes DIR/init.json (the shard layout), starts\n"
                   "`rlkvd coordinator` and N `rlkvd storage` on 127.0.0.1 (with --hosts H\n"
                   "--storage-per-host S: H x S servers labelled host1..hostH, host h on 127.0.0.h\n"
                   "with --host-addresses; --delay-us between hosts; ports chosen by the\n"
                   "kernel), waits until every server is registered and healthy and a test\n"
                   "commit works, then writes DIR/reclayer.cluster and DIR/pids.json and prints\n"
                   "the cluster file's path (use it as --db cluster:PATH).",
        .opts = up_opts};
    const rl__args_cmd status = {.name = "rl cluster status",
                                 .brief = "show every process: role, id, host, address, delay, pid, alive, versions, "
                                          "shards, health (exit 1 if something is down)",
                                 .opts = status_opts};
    const rl__args_cmd down = {.name = "rl cluster down",
                               .brief =
                                   "stop exactly the processes rl cluster started (by recorded pid; storage first)"};
    const rl__args_cmd restart = {
        .name = "rl cluster restart",
        .brief = "stop the processes named and start them again on their ports; wait until healthy",
        .summary = "Stops each process named (SIGTERM, or SIGKILL with --kill; one already gone is just\n"
                   "started), starts it again with its directory, options and port, and waits until the\n"
                   "processes named, the coordinator and every other process still running are healthy.\n"
                   "A process that is down and not named is left down, and a note on stderr names it.",
        .opts = restart_opts};
    const rl__arg delay_opts[] = {{.name = "delay-us",
                                   .kind = RL_ARG_UINT64,
                                   .dest = &delay_us,
                                   .metavar = "N",
                                   .flags = RL_ARG_REQUIRED,
                                   .umin = 0,
                                   .umax = RL_NETEM_MAX_US,
                                   .help = "the new one-way delay in µs between different hosts (0: none)"},
                                  {.name = "jitter-us",
                                   .kind = RL_ARG_UINT64,
                                   .dest = &jitter_us,
                                   .metavar = "J",
                                   .umin = 0,
                                   .umax = RL_NETEM_MAX_US,
                                   .help = "the new jitter in µs"},
                                  {0}};
    const rl__args_cmd delay = {.name = "rl cluster delay",
                                .brief = "change the injected delay of a running cluster (every process, the "
                                         "coordinator last; clients follow within about a second)",
                                .summary =
                                    "Records the delay in DIR/pids.json (a restarted process starts with it) and\n"
                                    "sends SET_DELAY to every process, storage servers first and the coordinator\n"
                                    "last. Clients take the new delay from the coordinator's shard map, which they\n"
                                    "fetch again at most every second while they send requests.",
                                .opts = delay_opts};
    const rl__args_cmd *subs[] = {&up, &status, &down, &restart, &delay, NULL};
    const rl__args_cmd cmd = {
        .name = "rl cluster",
        .summary = "Run a local reclayer cluster: one coordinator and N storage servers on 127.0.0.0/8\n"
                   "(one address per host with --host-addresses), under one directory (data in DIR/coordinator and "
                   "DIR/storage-ID, logs in DIR/logs/).",
        .epilog = "Processes are only ever signalled by the pid recorded in DIR/pids.json, after checking\n"
                  "that the pid still belongs to the process that was started (its start time).\n"
                  "Exit codes: 0 success, 1 failure, 2 usage.",
        .opts = opts,
        .subs = subs,
        .sub_dest = &which};
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = 0, exit_code = 0;
    int timeout_ms = (int)(timeout_s * 1000.0);
    switch (which) {
    case C_UP: {
        const char *keys[SPLIT_MAX];
        char *copy = NULL;
        rl__cluster_up_opts o;
        rc = rl__cluster_up_args_apply(&ua, keys, SPLIT_MAX, &copy, &o, &msg);
        o.timeout_ms = timeout_ms;
        if (rc) {
            free(copy);
            exit_code = rc == RL_E_INVALID_ARGUMENT ? rl__args_usage_error(&up, "%s", rl__errdetail_get(&msg))
                                                    : failed("up", rc, &msg);
            break;
        }
        rl__errdetail_clear(&msg);
        rc = rl__cluster_up(dir, &o, &msg);
        free(copy);
        if (rc) {
            exit_code = failed("up", rc, &msg);
            break;
        }
        printf("%s/reclayer.cluster\n", dir);
        break;
    }
    case C_STATUS: {
        json_t *st = NULL;
        rc = rl__cluster_status(dir, 0, &st, &msg);
        if (!st) {
            exit_code = failed("status", rc, &msg);
            break;
        }
        if (as_json) {
            char *s = json_dumps(st, JSON_INDENT(2));
            if (s) printf("%s\n", s);
            free(s);
        } else {
            rl__cluster_status_print(stdout, st);
        }
        json_decref(st);
        exit_code = rc ? 1 : 0;
        break;
    }
    case C_DOWN: {
        int n = 0;
        rc = rl__cluster_down(dir, &n, &msg);
        if (rc) {
            exit_code = failed("down", rc, &msg);
            break;
        }
        printf("stopped %d process%s\n", n, n == 1 ? "" : "es");
        break;
    }
    case C_RESTART: {
        uint32_t ids[RL_CLUSTER_MAX_STORAGE + 1];
        int n_ids = 0;
        if (coordinator) ids[n_ids++] = 0;
        for (int i = 0; i < n_restart_ids && exit_code == 0; i++) {
            /* Each --storage value is ID or a comma list of ids, every one parsed strictly. */
            char item[32];
            rl__errdetail why;
            rl__errdetail_init(&why, NULL);
            for (const char *p = restart_ids[i]; exit_code == 0;) {
                const char *comma = strchr(p, ',');
                size_t len = comma ? (size_t)(comma - p) : strlen(p);
                snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
                int64_t v = 0;
                if (len >= sizeof item)
                    exit_code = rl__args_usage_error(&restart, "--storage: '%s' is not an id", item);
                else if (rl__args_int64(item, 1, RL_CLUSTER_MAX_STORAGE, &v, &why) != RL_OK)
                    exit_code = rl__args_usage_error(&restart, "--storage: %s", rl__errdetail_get(&why));
                else if (n_ids == RL_CLUSTER_MAX_STORAGE + 1)
                    exit_code = rl__args_usage_error(&restart, "--storage: too many ids");
                else ids[n_ids++] = (uint32_t)v;
                if (!comma) break;
                p = comma + 1;
            }
        }
        if (exit_code) break;
        if (n_ids == 0) {
            exit_code = rl__args_usage_error(&restart, "give --storage ID[,ID...] and/or --coordinator");
            break;
        }
        rc = rl__cluster_restart_many(dir, ids, n_ids, hard ? RL_CLUSTER_KILL : 0, timeout_ms, &msg);
        if (rc) {
            exit_code = failed("restart", rc, &msg);
            break;
        }
        if (rl__errdetail_len(&msg)) fprintf(stderr, "rl cluster restart: %s\n", rl__errdetail_get(&msg));
        for (int i = 0; i < n_ids; i++) {
            int pid = 0;
            uint16_t port = 0;
            rl__errdetail_clear(&msg);
            rl__cluster_pid(dir, ids[i], &pid, &port, &msg);
            if (ids[i] == 0) printf("restarted the coordinator: pid %d, port %u\n", pid, port);
            else printf("restarted storage server %u: pid %d, port %u\n", ids[i], pid, port);
        }
        break;
    }
    case C_DELAY: {
        int set = 0;
        rc = rl__cluster_delay(dir, (uint32_t)delay_us, (uint32_t)jitter_us, &set, &msg);
        if (rc) {
            exit_code = failed("delay", rc, &msg);
            break;
        }
        printf("delay %llu us, jitter %llu us on %d process%s\n", (unsigned long long)delay_us,
               (unsigned long long)jitter_us, set, set == 1 ? "" : "es");
        break;
    }
    default: exit_code = 2;
    }
    return exit_code;
}
