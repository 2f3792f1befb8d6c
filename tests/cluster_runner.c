/* cluster_runner.c — `rl_with_cluster`: run one test program against a fresh local cluster.
 *
 *   rl_with_cluster [--storage N] [--shards K | --split KEY,... | --split-file FILE]
 *                   [--window-versions N] [--no-sync] [--hosts H] [--delay-us N] [--jitter-us J]
 *                   -- PROGRAM [ARGS...]
 * --hosts H puts the N storage servers on H hosts (N must be a multiple of H; host addresses on),
 * --delay-us / --jitter-us inject a delay between hosts and to the client (issue 14).
 *
 * --split-file: one split key per line (printable form), '#' comment lines and blank lines
 * skipped (tests/cluster_splits.txt).
 *
 * Starts a cluster with the test fixture (tests/cluster_fixture.h: temporary directory, stopped by
 * recorded pid at exit, on signals, and by a guardian process if this runner is killed), checks
 * that cluster: URLs open, runs PROGRAM with RL_TEST_URL=cluster:DIR/reclayer.cluster and
 * RL_TEST_CLUSTER_DIR=DIR (and RL_TEST_CLUSTER_WINDOW_VERSIONS=N, 0 for the servers' default),
 * then stops the cluster and exits with PROGRAM's exit code. SIGTERM and
 * SIGINT are passed on to PROGRAM. PROGRAM dies with the runner (PDEATHSIG).
 *
 * Exit codes: PROGRAM's; 1 when the cluster does not start, or starts but its cluster: URL does
 * not open (the reason and the servers' last log lines are printed: a broken cluster fails the
 * test, it is never skipped — rlkvd and the cluster: backend are always built); 2 usage.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/args.h"
#include "cluster_fixture.h"
#include "test.h"

static volatile sig_atomic_t g_child;

static void forward(int sig) {
    if (g_child > 0) kill((pid_t)g_child, sig);
}

/* Print the last lines of the servers' logs of c. */
static void print_server_logs(const rl_test_cluster *c) {
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "tail -n 20 '%s'/logs/*.log 2>/dev/null", c->dir);
    printf("---- server logs (last lines):\n");
    fflush(stdout);
    if (system(cmd) != 0) printf("(no logs)\n");
}

int main(int argc, char **argv) {
    int n_storage = 1, shards = 0, no_sync = 0, n_hosts = 0;
    int64_t window = 0, delay_us = 0, jitter_us = 0;
    const char *split = NULL, *split_file = NULL, *engine = NULL;
    const char *prog[256];
    int n_prog = 0;
    const rl_arg opts[] = {
        {.name = "storage",
         .kind = RL_ARG_INT,
         .dest = &n_storage,
         .metavar = "N",
         .min = 1,
         .max = RL_CLUSTER_MAX_STORAGE,
         .help = "storage servers"},
        {.name = "shards",
         .kind = RL_ARG_INT,
         .dest = &shards,
         .metavar = "K",
         .min = 0,
         .max = 255,
         .help = "even split by first byte"},
        {.name = "split", .kind = RL_ARG_STRING, .dest = &split, .metavar = "KEY,...", .help = "split keys"},
        {.name = "split-file",
         .kind = RL_ARG_STRING,
         .dest = &split_file,
         .metavar = "FILE",
         .help = "split keys, one per line"},
        {.name = "window-versions",
         .kind = RL_ARG_INT64,
         .dest = &window,
         .metavar = "N",
         .min = 0,
         .max = INT64_C(1000000000000),
         .help = "the servers' MVCC window"},
        {.name = "no-sync", .kind = RL_ARG_FLAG, .dest = &no_sync, .help = "no fsync"},
        {.name = "hosts",
         .kind = RL_ARG_INT,
         .dest = &n_hosts,
         .metavar = "H",
         .min = 0,
         .max = RL_CLUSTER_MAX_STORAGE,
         .help = "hosts of the storage servers (with host addresses)"},
        {.name = "delay-us",
         .kind = RL_ARG_INT64,
         .dest = &delay_us,
         .metavar = "N",
         .min = 0,
         .max = 10000000,
         .help = "injected one-way delay between hosts (the client included)"},
        {.name = "jitter-us",
         .kind = RL_ARG_INT64,
         .dest = &jitter_us,
         .metavar = "J",
         .min = 0,
         .max = 10000000,
         .help = "its jitter"},
        {.name = "engine",
         .kind = RL_ARG_STRING,
         .dest = &engine,
         .metavar = "NAME",
         .help = "the storage servers' engine (memory or ssd)"},
        {0}};
    const rl_arg pos[] = {{.name = "PROGRAM",
                           .kind = RL_ARG_STRING,
                           .dest = prog,
                           .flags = RL_ARG_MULTI,
                           .max_count = 255,
                           .count = &n_prog,
                           .help = "the test program and its arguments"},
                          {0}};
    const rl_args_cmd cmd = {.name = "rl_with_cluster",
                             .summary = "Run PROGRAM with RL_TEST_URL pointing at a fresh local cluster.",
                             .opts = opts,
                             .pos = pos};
    int code;
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *keys[RL_CLUSTER_MAX_SHARDS];
    int nk = 0;
    char *copy = NULL;
    if (split) {
        copy = strdup(split);
        for (char *p = copy; nk < RL_CLUSTER_MAX_SHARDS - 1;) {
            char *comma = strchr(p, ',');
            if (comma) *comma = 0;
            keys[nk++] = p;
            if (!comma) break;
            p = comma + 1;
        }
    } else if (split_file) {
        FILE *f = fopen(split_file, "r");
        if (!f) {
            fprintf(stderr, "rl_with_cluster: cannot open %s: %s\n", split_file, strerror(errno));
            return 2;
        }
        size_t cap = 1 << 20, len = fread(copy = malloc(cap), 1, cap - 1, f);
        fclose(f);
        copy[len] = 0;
        for (char *line = strtok(copy, "\n"); line && nk < RL_CLUSTER_MAX_SHARDS - 1; line = strtok(NULL, "\n"))
            if (line[0] && line[0] != '#') keys[nk++] = line;
        split = split_file;
    }
    rl_cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = n_storage;
    o.n_shards = shards;
    o.split = keys;
    o.n_split = nk;
    o.no_sync = no_sync;
    o.window_versions = window;
    o.delay_us = (uint32_t)delay_us;
    o.jitter_us = (uint32_t)jitter_us;
    if (n_hosts > 0) {
        if (n_storage % n_hosts) {
            fprintf(stderr, "rl_with_cluster: --storage %d is not a multiple of --hosts %d\n", n_storage, n_hosts);
            return 2;
        }
        o.n_hosts = n_hosts;
        o.storage_per_host = n_storage / n_hosts;
        o.host_addresses = 1;
    }
    o.engine = engine;
    o.timeout_ms = 60000;
    rl_test_cluster c;
    int rc = rl_test_cluster_start(&c, &o);
    free(copy);
    if (rc) {
        printf("FAILED: the cluster for %s did not start (above: why)\n", prog[0]);
        return 1;
    }
    rl_db *db = NULL;
    rc = rl_db_open(c.url, NULL, &db);
    if (rc) {
        printf("FAILED: the cluster started but %s does not open: %s: %s\n", c.url, rl_error_name(rc),
               rl_last_error_detail());
        print_server_logs(&c);
        rl_test_cluster_stop(&c);
        return 1;
    }
    rl_db_close(db);
    printf("cluster: %d storage server%s, %s%s, url %s\n", n_storage, n_storage == 1 ? "" : "s",
           split ? "split at " : "default layout", split ? split : "", c.url);
    if (n_hosts || delay_us || jitter_us)
        printf("cluster: %d host%s, injected delay %lld us (jitter %lld us)\n", n_hosts ? n_hosts : 1,
               n_hosts > 1 ? "s" : "", (long long)delay_us, (long long)jitter_us);
    setenv("RL_TEST_URL", c.url, 1);
    char wbuf[32];
    snprintf(wbuf, sizeof wbuf, "%lld", (long long)window);
    setenv("RL_TEST_CLUSTER_WINDOW_VERSIONS", wbuf, 1);
    char *slash = strrchr(c.file, '/');
    if (slash) {
        *slash = 0;
        setenv("RL_TEST_CLUSTER_DIR", c.file, 1);
        *slash = '/';
    }
    fflush(stdout);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        char *av[257];
        for (int i = 0; i < n_prog; i++) av[i] = (char *)prog[i];
        av[n_prog] = NULL;
        execvp(av[0], av);
        fprintf(stderr, "rl_with_cluster: cannot run %s: %s\n", av[0], strerror(errno));
        _exit(127);
    }
    int status = 0, exit_code = 1;
    if (child > 0) {
        g_child = child;
        signal(SIGTERM, forward);
        signal(SIGINT, forward);
        while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
        g_child = 0;
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        if (exit_code != 0) print_server_logs(&c); /* the test's failure may be theirs */
    } else {
        fprintf(stderr, "rl_with_cluster: fork: %s\n", strerror(errno));
    }
    rl_test_cluster_stop(&c);
    return exit_code;
}
