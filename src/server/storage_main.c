/* storage_main.c — `rlkvd storage`: parse the options (src/base/args.h), create the storage
 * server (storage_server.h), write the port file, run until SIGTERM or SIGINT.
 *
 *   rlkvd storage --dir DIR --id N --coordinator IP:PORT [--listen IP:PORT] [--port-file FILE]
 *                 [--host LABEL] [--no-sync] [--window-versions N] [--delay-us N] [--jitter-us N]
 *                 [--coordinator-host LABEL] [--engine memory|ssd]
 *
 * Signals: SIGTERM and SIGINT are blocked in every thread and taken by a dedicated thread with
 * sigwait, which calls rl__ss_stop (a plain function call, no async-signal-safety needed);
 * SIGPIPE is ignored (a peer that vanished is a closed connection, not a dead process).
 * Exit codes: 0 clean stop, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/args.h"
#include "base/buf.h"
#include "base/log.h"
#include "reclayer/error.h"
#include "net/netem.h"
#include "server/server.h"
#include "server/storage_server.h"

/* Parse "IP:PORT" (dotted IPv4, port in [min_port, 65535]) into ip (NUL-terminated, 16 bytes)
 * and *port. Returns 0 or -1 with a reason in msg. */
static int parse_addr(const char *s, int min_port, char ip[16], uint16_t *port, char *msg, size_t cap) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) {
        snprintf(msg, cap, "'%s' is not IP:PORT", s);
        return -1;
    }
    size_t n = (size_t)(colon - s);
    if (n >= 16) {
        snprintf(msg, cap, "'%s': the address is not dotted IPv4", s);
        return -1;
    }
    memcpy(ip, s, n);
    ip[n] = 0;
    int dots = 0;
    for (size_t i = 0; i < n; i++) {
        if (ip[i] == '.') dots++;
        else if (ip[i] < '0' || ip[i] > '9') {
            snprintf(msg, cap, "'%s': the address is not dotted IPv4", s);
            return -1;
        }
    }
    if (dots != 3) {
        snprintf(msg, cap, "'%s': the address is not dotted IPv4", s);
        return -1;
    }
    int64_t p;
    char why[128];
    if (rl__args_int64(colon + 1, min_port, 65535, &p, why, sizeof why) != RL_OK) {
        snprintf(msg, cap, "'%s': port %s", s, why);
        return -1;
    }
    *port = (uint16_t)p;
    return 0;
}

/* Write "PORT\n" to path atomically: path.tmp, fsync, rename. Returns 0 or -1 (logged). */
static int write_port_file(const char *path, uint16_t port) {
    char tmp[4096], line[16];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return -1;
    int n = snprintf(line, sizeof line, "%u\n", port);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rl__log(RL_LOG_ERROR, "rlkvd storage: cannot create %s: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = write(fd, line, (size_t)n) == n && fsync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        rl__log(RL_LOG_ERROR, "rlkvd storage: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

typedef struct {
    rl_ss *ss;
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
    const char *dir = NULL, *coord = NULL, *listen = "127.0.0.1:0", *port_file = NULL, *host = "host1",
               *coord_host = NULL;
    int64_t id = 0;
    int no_sync = 0;
    uint64_t window = 5000000, delay_us = 0, jitter_us = 0;
    const char *engine = NULL;
    const rl_arg opts[] = {{.name = "dir",
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
                           {.name = "listen",
                            .kind = RL_ARG_STRING,
                            .dest = &listen,
                            .metavar = "IP:PORT",
                            .help = "where to listen (127.0.0.0/8 only; port 0: any free port)"},
                           {.name = "port-file",
                            .kind = RL_ARG_STRING,
                            .dest = &port_file,
                            .metavar = "FILE",
                            .help = "write the bound port here once listening",
                            .flags = RL_ARG_NONEMPTY},
                           {.name = "host",
                            .kind = RL_ARG_STRING,
                            .dest = &host,
                            .metavar = "LABEL",
                            .help = "host label (delay injection)",
                            .flags = RL_ARG_NONEMPTY},
                           {.name = "no-sync",
                            .kind = RL_ARG_FLAG,
                            .dest = &no_sync,
                            .help = "do not fsync (benchmarks only: a crash may lose acknowledged data)"},
                           {.name = "window-versions",
                            .kind = RL_ARG_UINT64,
                            .dest = &window,
                            .metavar = "N",
                            .help = "MVCC window in versions",
                            .umin = 1000,
                            .umax = 1000000000000ull},
                           {.name = "coordinator-host",
                            .kind = RL_ARG_STRING,
                            .dest = &coord_host,
                            .metavar = "LABEL",
                            .help =
                                "the coordinator's host label, when known (delay injection: no delay to it when it is "
                                "this host's; unknown, it is delayed until its HELLO reply names its host)",
                            .flags = RL_ARG_NONEMPTY | RL_ARG_NO_DEFAULT},
                           {.name = "delay-us",
                            .kind = RL_ARG_UINT64,
                            .dest = &delay_us,
                            .metavar = "N",
                            .help = "injected one-way delay, in µs, on what this process sends to other hosts (not to "
                                    "admin tools); at most 10,000,000; changed at run time by SET_DELAY",
                            .umin = 0,
                            .umax = RL_NETEM_MAX_US},
                           {.name = "jitter-us",
                            .kind = RL_ARG_UINT64,
                            .dest = &jitter_us,
                            .metavar = "N",
                            .help = "a uniform jitter in [0, N] µs added to each delayed frame (never reorders)",
                            .umin = 0,
                            .umax = RL_NETEM_MAX_US},
                           {.name = "engine",
                            .kind = RL_ARG_STRING,
                            .dest = &engine,
                            .metavar = "NAME",
                            .help = "storage engine of a new directory, memory or ssd (default: what DIR holds, "
                                    "memory if new)",
                            .flags = RL_ARG_NONEMPTY},
                           {0}};
    const rl_args_cmd cmd = {.name = "rlkvd storage",
                             .summary = "Run a storage server: it holds shards, pulls their mutations from the "
                                        "coordinator's log, serves reads at a version and mapped reads (with "
                                        "storage-to-storage reads for secondaries held elsewhere). Stops cleanly on "
                                        "SIGTERM or SIGINT.",
                             .opts = opts};
    int code;
    if (rl__args_parse(&cmd, argc, argv, &code)) return code;

    char cip[16], lip[16], msg[256];
    uint16_t cport = 0, lport = 0;
    if (parse_addr(coord, 1, cip, &cport, msg, sizeof msg) != 0)
        return rl__args_usage_error(&cmd, "--coordinator: %s", msg);
    if (parse_addr(listen, 0, lip, &lport, msg, sizeof msg) != 0)
        return rl__args_usage_error(&cmd, "--listen: %s", msg);
    if (strlen(host) > 4096) return rl__args_usage_error(&cmd, "--host: longer than 4096 bytes");
    if (coord_host && strlen(coord_host) > 4096)
        return rl__args_usage_error(&cmd, "--coordinator-host: longer than 4096 bytes");
    if (rl__log_level() > RL_LOG_INFO && !getenv("RL_LOG")) rl__log_set_level(RL_LOG_INFO);

    /* Signals: blocked here, so every thread created below inherits the mask. */
    sig_ctx sc;
    sigemptyset(&sc.set);
    sigaddset(&sc.set, SIGTERM);
    sigaddset(&sc.set, SIGINT);
    sigaddset(&sc.set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &sc.set, NULL);
    signal(SIGPIPE, SIG_IGN);

    rl_ss_options o;
    memset(&o, 0, sizeof o);
    o.dir = dir;
    o.id = (uint32_t)id;
    o.coordinator_ip = cip;
    o.coordinator_port = cport;
    o.listen_ip = lip;
    o.listen_port = lport;
    o.host = host;
    o.no_sync = no_sync;
    o.window_versions = window;
    o.delay_us = (uint32_t)delay_us;
    o.jitter_us = (uint32_t)jitter_us;
    o.coordinator_host = coord_host;
    o.engine = engine;
    rl_buf err;
    rl__buf_init(&err);
    rl_ss *ss = NULL;
    int rc = rl__ss_new(&o, &ss, &err);
    if (rc != RL_OK) {
        fprintf(stderr, "rlkvd storage: %s\n", err.len ? (const char *)err.data : rl_error_name(rc));
        rl__buf_release(&err);
        return 1;
    }
    rl__buf_release(&err);
    if (port_file && write_port_file(port_file, rl__ss_port(ss)) != 0) {
        rl__ss_free(ss);
        return 1;
    }
    if (no_sync) fprintf(stderr, "rlkvd storage %u: --no-sync: acknowledged data may be lost\n", o.id);
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
    rl__ss_free(ss);
    if (rc != RL_OK) {
        fprintf(stderr, "rlkvd storage %u: stopped on %s\n", o.id, rl_error_name(rc));
        return 1;
    }
    return 0;
}
