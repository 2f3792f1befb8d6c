/* cluster_runner.c — `rl_with_cluster`: run one test program against a fresh local cluster.
 *
 *   rl_with_cluster [rl cluster up's topology options] [--split-file FILE] -- PROGRAM [ARGS...]
 * The topology options are rl cluster up's own (RL__CLUSTER_UP_OPTS, src/app/cluster_admin.h:
 * --storage, --hosts, --storage-per-host, --host-addresses, --replication, --delay-us,
 * --jitter-us, --shards, --split, --engine, --no-sync, --window-versions); --storage defaults to 1.
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
    rl__cluster_up_args ua = RL__CLUSTER_UP_ARGS_INIT;
    const char *split_file = NULL;
    const char *prog[256];
    int n_prog = 0;
    const rl__arg opts[] = {RL__CLUSTER_UP_OPTS(&ua),
                            {.name = "split-file",
                             .kind = RL_ARG_STRING,
                             .dest = &split_file,
                             .metavar = "FILE",
                             .flags = RL_ARG_NONEMPTY,
                             .help = "split keys, one per line (printable form; '#' comments)"},
                            {0}};
    const rl__arg pos[] = {{.name = "PROGRAM",
                            .kind = RL_ARG_STRING,
                            .dest = prog,
                            .flags = RL_ARG_MULTI,
                            .max_count = 255,
                            .count = &n_prog,
                            .help = "the test program and its arguments"},
                           {0}};
    const rl__args_cmd cmd = {.name = "rl_with_cluster",
                              .summary = "Run PROGRAM with RL_TEST_URL pointing at a fresh local cluster.",
                              .opts = opts,
                              .pos = pos};
    int code;
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *keys[RL_CLUSTER_MAX_SHARDS - 1];
    char *copy = NULL, *file_text = NULL;
    rl__cluster_up_opts o;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (!ua.n_storage && !ua.n_hosts) ua.n_storage = 1;
    if (split_file && ua.split) return rl__args_usage_error(&cmd, "--split and --split-file exclude each other");
    int rc = rl__cluster_up_args_apply(&ua, keys, RL_CLUSTER_MAX_SHARDS - 1, &copy, &o, &msg);
    if (rc) return rl__args_usage_error(&cmd, "%s", rl__errdetail_get(&msg));
    const char *split = ua.split;
    if (split_file) {
        FILE *f = fopen(split_file, "r");
        if (!f) {
            fprintf(stderr, "rl_with_cluster: cannot open %s: %s\n", split_file, strerror(errno));
            return 2;
        }
        size_t cap = 1 << 20, len = fread(file_text = malloc(cap), 1, cap - 1, f);
        fclose(f);
        file_text[len] = 0;
        int nk = 0;
        for (char *line = strtok(file_text, "\n"); line && nk < RL_CLUSTER_MAX_SHARDS - 1; line = strtok(NULL, "\n"))
            if (line[0] && line[0] != '#') keys[nk++] = line;
        o.split = keys;
        o.n_split = nk;
        split = split_file;
    }
    o.timeout_ms = 60000;
    rl_test_cluster c;
    rc = rl_test_cluster_start(&c, &o);
    free(copy);
    free(file_text);
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
    printf("cluster: %d storage server%s, %s%s, url %s\n", c.n_storage, c.n_storage == 1 ? "" : "s",
           split ? "split at " : "default layout", split ? split : "", c.url);
    if (ua.n_hosts || ua.delay_us || ua.jitter_us)
        printf("cluster: %d host%s, injected delay %llu us (jitter %llu us)\n", ua.n_hosts ? ua.n_hosts : 1,
               ua.n_hosts > 1 ? "s" : "", (unsigned long long)ua.delay_us, (unsigned long long)ua.jitter_us);
    setenv("RL_TEST_URL", c.url, 1);
    char wbuf[32];
    snprintf(wbuf, sizeof wbuf, "%lld", (long long)ua.window);
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
