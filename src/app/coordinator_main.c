/* coordinator_main.c — `rlkvd coordinator`: parse the options (src/app/args.h), open the
 * coordinator (src/server/coordinator.h), serve until SIGTERM or SIGINT, close.
 *
 *   rlkvd coordinator --dir DIR --key-file FILE [--listen IP:PORT] [--port-file FILE] [--host LABEL]
 *                     [--init FILE] [--no-sync] [--window-versions N] [--log-segment-bytes N]
 *                     [--delay-us N] [--jitter-us N] [--max-connections N] [--max-handshakes N]
 *                     [--handshake-timeout-ms MS] [--max-queued-bytes N]
 *
 * Exit codes: 0 after a clean stop (SIGTERM/SIGINT), 1 when the coordinator cannot start or
 * fails, 2 for a usage error. Why it stopped (src/server/fatal.h): a start that fails and a
 * failure while serving are recorded in DIR/fatal.json before the exit; a successful start
 * clears the record. Logs go to stderr (the launcher redirects them); the level is
 * info unless RL_LOG says otherwise.
 *
 * Signals: SIGTERM and SIGINT call rl__coordinator_stop from the handler (it only bumps an
 * atomic counter and writes the loop's eventfd, both async-signal-safe); SIGPIPE is ignored
 * (a peer that vanished is a failed send, not a dead server). The handler's one global is the
 * coordinator being served.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/coordinator.h"
#include "server/fatal.h"
#include "app/rlkvd.h"

static rl__coordinator *volatile g_served;     /* for the signal handler only */
static volatile sig_atomic_t g_stop_requested; /* a signal came before serving started */

/* SIGTERM / SIGINT: stop serving (or, during startup, stop right after it). */
static void on_signal(int sig) {
    (void)sig;
    g_stop_requested = 1;
    rl__coordinator *c = g_served;
    if (c) rl__coordinator_stop(c);
}

/* See server.h: parse, install the signal handlers, open, serve, close; the exit code. */
int rl__rlkvd_coordinator_main(int argc, char **argv) {
    const char *dir = NULL, *init = NULL;
    rl__rlkvd_opts c = RL__RLKVD_OPTS_INIT;
    uint64_t segment_bytes = 8ull << 20;
    const rl__arg opts[] = {{.name = "dir",
                             .kind = RL_ARG_STRING,
                             .dest = &dir,
                             .metavar = "DIR",
                             .help = "the coordinator's directory (commit log, system keyspace); created if missing",
                             .flags = RL_ARG_REQUIRED | RL_ARG_NONEMPTY},
                            RL__RLKVD_COMMON_OPTS(&c),
                            {.name = "init",
                             .kind = RL_ARG_STRING,
                             .dest = &init,
                             .metavar = "FILE",
                             .help = "the initial layout (JSON: storage ids and shards), read on the first start only "
                                     "(default: one shard on storage server 1)",
                             .flags = RL_ARG_NONEMPTY | RL_ARG_NO_DEFAULT},
                            {.name = "log-segment-bytes",
                             .kind = RL_ARG_UINT64,
                             .dest = &segment_bytes,
                             .metavar = "N",
                             .help = "start a new commit log segment once one holds this many bytes (truncation "
                                     "deletes whole segments; tests use small ones)",
                             .umin = 4096,
                             .umax = 1ull << 40},
                            {0}};
    const rl__args_cmd cmd = {.name = "rlkvd coordinator",
                              .summary = "Run the cluster's coordinator: read versions, commits (sequencer, resolver, "
                                         "group commit), the durable commit log that storage servers pull, the shard "
                                         "map and the server list (the system keyspace), and health. Stops cleanly on "
                                         "SIGTERM or SIGINT.",
                              .opts = opts};
    int code;
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;
    char ip[16];
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint16_t port = 0;
    if (rl__args_ip_port(c.listen, 0, ip, &port, &msg) != RL_OK)
        return rl__args_usage_error(&cmd, "--listen: %s", rl__errdetail_get(&msg));
    if (!getenv("RL_LOG")) rl__log_set_level(RL_LOG_INFO);
    rl__keyfile kf;
    rl__net_limits lim;
    if (rl__rlkvd_credentials(&c, "rlkvd coordinator", &kf, &lim) != RL_OK) return 1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    rl__coordinator_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.listen_ip = ip;
    o.listen_port = port;
    o.port_file = c.port_file;
    o.host = c.host;
    o.init_file = init;
    o.no_sync = c.no_sync;
    o.window_versions = c.window;
    o.segment_bytes = segment_bytes;
    o.delay_us = (uint32_t)c.delay_us;
    o.jitter_us = (uint32_t)c.jitter_us;
    o.auth = &kf.auth;
    o.limits = &lim;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    rl__coordinator *co = NULL;
    rl__fatal_file ff;
    rl__fatal_init(&ff);
    int rc = rl__coordinator_open(&o, &co, &err);
    if (rc != RL_OK) {
        fprintf(stderr, "rlkvd coordinator: cannot start: %s (%s)\n",
                rl__errdetail_len(&err) ? rl__errdetail_get(&err) : rl_error_message(rc), rl_error_name(rc));
        char what[512];
        snprintf(what, sizeof what, "starting: %s", rl__errdetail_len(&err) ? rl__errdetail_get(&err) : "");
        (void)rl__fatal_record(NULL, dir, "coordinator", 0, rc, what);
        return 1;
    }
    rl__errdetail_clear(&err);
    /* Started: an older record goes, and the file stays open for one (fatal.h invariant 1). */
    if (rl__fatal_reserve(&ff, dir, c.no_sync, &err) != RL_OK)
        fprintf(stderr, "rlkvd coordinator: cannot reserve %s/%s: %s (a fatal error will not be recorded)\n", dir,
                RL_FATAL_FILE, rl__errdetail_get(&err));
    fprintf(stderr, "rlkvd coordinator: serving %s on %s:%u (host %s, pid %ld)%s\n", dir, ip, rl__coordinator_port(co),
            c.host, (long)getpid(), c.no_sync ? "; --no-sync: commits are NOT fsynced (benchmarks only)" : "");
    g_served = co;
    if (g_stop_requested) rl__coordinator_stop(co); /* a signal during startup */
    rc = rl__coordinator_run(co);
    g_served = NULL;
    fprintf(stderr, "rlkvd coordinator: stopping (%s)\n", rc == RL_OK ? "signal" : rl_error_name(rc));
    if (rc != RL_OK) (void)rl__fatal_record(&ff, dir, "coordinator", 0, rc, "serving");
    rl__fatal_release(&ff);
    rl__coordinator_close(co);
    return rc == RL_OK ? 0 : 1;
}
