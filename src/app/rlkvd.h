/* rlkvd.h (internal) — the entry points of rlkvd's roles (tools/rlkvd/main.c calls them).
 * Each parses its options with the shared parser (src/app/args.h), runs the role until SIGTERM
 * or SIGINT, and returns the process exit code (0 clean stop, 1 failure, 2 usage).
 * argv[0] is the role name. */
#ifndef RL_APP_RLKVD_H
#define RL_APP_RLKVD_H

#include <stdint.h>

#include "app/args.h"
#include "net/loop.h"
#include "net/netem.h"
#include "server/keyfile.h"

/* The options both roles take, parsed into one struct from one table (RL__RLKVD_COMMON_OPTS),
 * so their names, ranges and help cannot drift apart. */
typedef struct {
    const char *listen;    /* "IP:PORT" inside 127.0.0.0/8; port 0 picks a free port */
    const char *port_file; /* where to write the bound port; NULL: nowhere */
    const char *host;      /* the host label (delay injection) */
    int no_sync;           /* never fsync (benchmarks only) */
    uint64_t window;       /* the MVCC window, in versions */
    uint64_t delay_us, jitter_us;
    const char *key_file; /* the cluster's key file (server/keyfile.h): required */
    uint64_t max_conns;   /* rl__net_limits (net/loop.h): 0 fields are never given (umin 1) */
    uint64_t max_handshakes;
    uint64_t handshake_timeout_ms;
    uint64_t max_queued_bytes;
} rl__rlkvd_opts;

#define RL__RLKVD_OPTS_INIT                                                                                           \
    {                                                                                                                 \
        .listen = "127.0.0.1:0", .host = "host1", .window = 5000000, .max_conns = RL_NET_DEFAULT_MAX_CONNS,           \
        .max_handshakes = RL_NET_DEFAULT_MAX_HANDSHAKES, .handshake_timeout_ms = RL_NET_DEFAULT_HANDSHAKE_TIMEOUT_MS, \
        .max_queued_bytes = RL_NET_DEFAULT_MAX_QUEUED_BYTES                                                           \
    }

/* The rl__arg entries of rl__rlkvd_opts *c (a table's other entries come before or after). */
#define RL__RLKVD_COMMON_OPTS(c)                                                                         \
    {.name = "key-file",                                                                                 \
     .kind = RL_ARG_STRING,                                                                              \
     .dest = &(c)->key_file,                                                                             \
     .metavar = "FILE",                                                                                  \
     .help = "the cluster's key file (its name and member secret, mode 0600; rl cluster up writes "      \
             "DIR/cluster.key): every connection must prove it knows them",                              \
     .flags = RL_ARG_REQUIRED | RL_ARG_NONEMPTY},                                                        \
        {.name = "max-connections",                                                                      \
         .kind = RL_ARG_UINT64,                                                                          \
         .dest = &(c)->max_conns,                                                                        \
         .metavar = "N",                                                                                 \
         .help = "accepted connections open at once; more are closed at once",                           \
         .umin = 1,                                                                                      \
         .umax = 1000000},                                                                               \
        {.name = "max-handshakes",                                                                       \
         .kind = RL_ARG_UINT64,                                                                          \
         .dest = &(c)->max_handshakes,                                                                   \
         .metavar = "N",                                                                                 \
         .help = "accepted connections still in the handshake; one more closes the oldest",              \
         .umin = 1,                                                                                      \
         .umax = 1000000},                                                                               \
        {.name = "handshake-timeout-ms",                                                                 \
         .kind = RL_ARG_UINT64,                                                                          \
         .dest = &(c)->handshake_timeout_ms,                                                             \
         .metavar = "MS",                                                                                \
         .help = "close an accepted connection not through the handshake by then",                       \
         .umin = 1,                                                                                      \
         .umax = 3600000},                                                                               \
        {.name = "max-queued-bytes",                                                                     \
         .kind = RL_ARG_UINT64,                                                                          \
         .dest = &(c)->max_queued_bytes,                                                                 \
         .metavar = "N",                                                                                 \
         .help = "stop reading a connection's requests while more than N bytes of replies wait for it",  \
         .umin = 1,                                                                                      \
         .umax = 1ull << 40},                                                                            \
        {.name = "listen",                                                                               \
         .kind = RL_ARG_STRING,                                                                          \
         .dest = &(c)->listen,                                                                           \
         .metavar = "IP:PORT",                                                                           \
         .help = "address to listen on, inside 127.0.0.0/8; port 0 picks a free port",                   \
         .flags = RL_ARG_NONEMPTY},                                                                      \
        {.name = "port-file",                                                                            \
         .kind = RL_ARG_STRING,                                                                          \
         .dest = &(c)->port_file,                                                                        \
         .metavar = "FILE",                                                                              \
         .help = "write the port (\"PORT\\n\") here, atomically, once listening",                        \
         .flags = RL_ARG_NONEMPTY | RL_ARG_NO_DEFAULT},                                                  \
        {.name = "host",                                                                                 \
         .kind = RL_ARG_STRING,                                                                          \
         .dest = &(c)->host,                                                                             \
         .metavar = "LABEL",                                                                             \
         .help = "the host label of this process (delay injection)",                                     \
         .flags = RL_ARG_NONEMPTY},                                                                      \
        {.name = "no-sync",                                                                              \
         .kind = RL_ARG_FLAG,                                                                            \
         .dest = &(c)->no_sync,                                                                          \
         .help = "never fsync (benchmarks only: an acknowledged commit may be lost in a crash)"},        \
        {.name = "window-versions",                                                                      \
         .kind = RL_ARG_UINT64,                                                                          \
         .dest = &(c)->window,                                                                           \
         .metavar = "N",                                                                                 \
         .help = "the MVCC and conflict window, in versions (1,000,000 per second)",                     \
         .umin = 1000,                                                                                   \
         .umax = 1000000000000ull},                                                                      \
        {.name = "delay-us",                                                                             \
         .kind = RL_ARG_UINT64,                                                                          \
         .dest = &(c)->delay_us,                                                                         \
         .metavar = "N",                                                                                 \
         .help = "injected one-way delay, in µs, on what this process sends to other hosts (not to "    \
                 "admin tools); at most 10,000,000; changed at run time by SET_DELAY",                   \
         .umin = 0,                                                                                      \
         .umax = RL_NETEM_MAX_US},                                                                       \
    {                                                                                                    \
        .name = "jitter-us", .kind = RL_ARG_UINT64, .dest = &(c)->jitter_us, .metavar = "N",             \
        .help = "a uniform jitter in [0, N] µs added to each delayed frame (never reorders)", .umin = 0, \
        .umax = RL_NETEM_MAX_US                                                                          \
    }

/* rl__rlkvd_credentials — read c's key file into *out_kf (its reason printed to stderr, prefixed
 * with who, on failure) and c's limits into *out_lim. Returns rl__keyfile_read's code. */
int rl__rlkvd_credentials(const rl__rlkvd_opts *c, const char *who, rl__keyfile *out_kf, rl__net_limits *out_lim);

int rl__rlkvd_coordinator_main(int argc, char **argv);
int rl__rlkvd_storage_main(int argc, char **argv);

#endif
