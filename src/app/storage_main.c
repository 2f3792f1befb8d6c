/* storage_main.c — `rlkvd storage`: parse the options (src/app/args.h), create the storage
 * server (storage_server.h), write the port file, run until SIGTERM or SIGINT.
 *
 *   rlkvd storage --dir DIR --id N --coordinator IP:PORT --key-file FILE [--listen IP:PORT]
 *                 [--port-file FILE] [--host LABEL] [--no-sync] [--window-versions N] [--delay-us N]
 *                 [--jitter-us N] [--coordinator-host LABEL] [--engine memory|ssd] [--max-connections N]
 *                 [--max-handshakes N] [--handshake-timeout-ms MS] [--max-queued-bytes N]
 *
 * Signals: SIGTERM and SIGINT are blocked in every thread and taken by a dedicated thread with
 * sigwait, which calls rl__ss_stop (a plain function call, no async-signal-safety needed);
 * SIGPIPE is ignored (a peer that vanished is a closed connection, not a dead process).
 * Why it stopped (src/server/fatal.h): a start that fails and a fatal error (a failed apply or
 * sync: no_space, io_error, …) are recorded in DIR/fatal.json before the exit; a successful
 * start clears the record. Exit codes: 0 clean stop, 1 failure, 2 usage.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "base/buf.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "server/fatal.h"
#include "app/rlkvd.h"
#include "server/storage_server.h"
#include "storage/os.h"

/* Write "PORT\n" to path atomically (rl__os_write_file_atomic). Returns 0 or -1 (logged). */
static int write_port_file(const char *path, uint16_t port) {
    char line[16];
    int n = snprintf(line, sizeof line, "%u\n", port);
    return rl__os_write_file_atomic(path, line, (size_t)n, 0, "rlkvd storage", NULL) == RL_OK ? 0 : -1;
}

typedef struct {
    rl__ss *ss;
    sigset_t set;
} sig_ctx;

static void *signal_main(void *arg) {
    sig_ctx *c = arg;
    int sig = 0;
    while (sigwait(&c->set, &sig) != 0) {}
    if (sig == SIGUSR2) return NULL; /* the main thread's own wake-up at exit */
    rl__log(RL_LOG_INFO, "rlkvd storage: signal %d: stopping", sig);
    rl__ss_stop(c->ss);
    return NULL;
}

int rl__rlkvd_storage_main(int argc, char **argv) {
    const char *dir = NULL, *coord = NULL, *coord_host = NULL, *engine = NULL;
    int64_t id = 0;
    rl__rlkvd_opts c = RL__RLKVD_OPTS_INIT;
    const rl__arg opts[] = {{.name = "dir",
                             .kind = RL_ARG_STRING,
                             .dest = &dir,
                             .metavar = "DIR",
                             .help = "the storage engine's directory (created if missing)",
                             .flags = RL_ARG_REQUIRED | RL_ARG_NONEMPTY},
                            {.name = "id",
                             .kind = RL_ARG_INT64,
                             .dest = &id,
                             .metavar = "N",
                             .help = "this storage server's id",
                             .flags = RL_ARG_REQUIRED,
                             .min = 1,
                             .max = 1000000},
                            {.name = "coordinator",
                             .kind = RL_ARG_STRING,
                             .dest = &coord,
                             .metavar = "IP:PORT",
                             .help = "the coordinator's address",
                             .flags = RL_ARG_REQUIRED | RL_ARG_NONEMPTY},
                            RL__RLKVD_COMMON_OPTS(&c),
                            {.name = "coordinator-host",
                             .kind = RL_ARG_STRING,
                             .dest = &coord_host,
                             .metavar = "LABEL",
                             .help =
                                 "the coordinator's host label, when known (delay injection: no delay to it when it is "
                                 "this host's; unknown, it is delayed until its HELLO reply names its host)",
                             .flags = RL_ARG_NONEMPTY | RL_ARG_NO_DEFAULT},
                            {.name = "engine",
                             .kind = RL_ARG_STRING,
                             .dest = &engine,
                             .metavar = "NAME",
                             .help = "storage engine of a new directory, memory or ssd (default: what DIR holds, "
                                     "memory if new)",
                             .flags = RL_ARG_NONEMPTY},
                            {0}};
    const rl__args_cmd cmd = {.name = "rlkvd storage",
                              .summary = "Run a storage server: it holds shards, pulls their mutations from the "
                                         "coordinator's log, serves reads at a version and mapped reads (with "
                                         "storage-to-storage reads for secondaries held elsewhere). Stops cleanly on "
                                         "SIGTERM or SIGINT.",
                              .opts = opts};
    int code;
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;

    char cip[16], lip[16];
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint16_t cport = 0, lport = 0;
    if (rl__args_ip_port(coord, 1, cip, &cport, &msg) != RL_OK)
        return rl__args_usage_error(&cmd, "--coordinator: %s", rl__errdetail_get(&msg));
    if (rl__args_ip_port(c.listen, 0, lip, &lport, &msg) != RL_OK)
        return rl__args_usage_error(&cmd, "--listen: %s", rl__errdetail_get(&msg));
    if (strlen(c.host) > 4096) return rl__args_usage_error(&cmd, "--host: longer than 4096 bytes");
    if (coord_host && strlen(coord_host) > 4096)
        return rl__args_usage_error(&cmd, "--coordinator-host: longer than 4096 bytes");
    if (rl__log_level() > RL_LOG_INFO && !getenv("RL_LOG")) rl__log_set_level(RL_LOG_INFO);
    rl__keyfile kf;
    rl__net_limits lim;
    if (rl__rlkvd_credentials(&c, "rlkvd storage", &kf, &lim) != RL_OK) return 1;

    /* Signals: blocked here, so every thread created below inherits the mask. */
    sig_ctx sc;
    sigemptyset(&sc.set);
    sigaddset(&sc.set, SIGTERM);
    sigaddset(&sc.set, SIGINT);
    sigaddset(&sc.set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
    signal(SIGPIPE, SIG_IGN);

    rl__ss_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.id = (uint32_t)id;
    o.coordinator_ip = cip;
    o.coordinator_port = cport;
    o.listen_ip = lip;
    o.listen_port = lport;
    o.host = c.host;
    o.no_sync = c.no_sync;
    o.window_versions = c.window;
    o.delay_us = (uint32_t)c.delay_us;
    o.jitter_us = (uint32_t)c.jitter_us;
    o.coordinator_host = coord_host;
    o.engine = engine;
    o.auth = &kf.auth;
    o.limits = &lim;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    rl__ss *ss = NULL;
    rl__fatal_file ff;
    rl__fatal_init(&ff);
    int rc = rl__ss_new(&o, &ss, &err);
    if (rc != RL_OK) {
        fprintf(stderr, "rlkvd storage: %s\n", rl__errdetail_len(&err) ? rl__errdetail_get(&err) : rl_error_name(rc));
        char what[512];
        snprintf(what, sizeof what, "starting: %s", rl__errdetail_len(&err) ? rl__errdetail_get(&err) : "");
        (void)rl__fatal_record(NULL, dir, "storage", o.id, rc, what);
        return 1;
    }
    rl__errdetail_clear(&err);
    /* Started: an older record of a fatal error goes (fatal.h invariant 2); the file stays open
     * so that a fatal error on a full disk can still be recorded. */
    if (rl__fatal_reserve(&ff, dir, c.no_sync, &err) != RL_OK)
        rl__log(RL_LOG_WARN, "rlkvd storage %u: cannot reserve %s/%s: %s (a fatal error will not be recorded)", o.id,
                dir, RL_FATAL_FILE, rl__errdetail_get(&err));
    if (c.port_file && write_port_file(c.port_file, rl__ss_port(ss)) != 0) {
        (void)rl__fatal_record(&ff, dir, "storage", o.id, RL_E_IO_ERROR, "writing the port file");
        rl__fatal_release(&ff);
        rl__ss_free(ss);
        return 1;
    }
    if (c.no_sync) fprintf(stderr, "rlkvd storage %u: --no-sync: acknowledged data may be lost\n", o.id);
    sc.ss = ss;
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_main, &sc) != 0) {
        rl__ss_free(ss);
        return 1;
    }
    rc = rl__ss_run(ss);
    /* Wake the signal thread if no signal came (a fatal error stopped the server). */
    pthread_kill(sig_thread, SIGUSR2);
    pthread_join(sig_thread, NULL);
    if (rc != RL_OK) (void)rl__fatal_record(&ff, dir, "storage", o.id, rc, rl__ss_fatal_what(ss));
    rl__fatal_release(&ff);
    rl__ss_free(ss);
    if (rc != RL_OK) {
        fprintf(stderr, "rlkvd storage %u: stopped on %s\n", o.id, rl_error_name(rc));
        return 1;
    }
    return 0;
}
