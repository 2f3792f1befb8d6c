/* ss_options.h (internal) — the options of a storage server, rl__ss_options: what the program
 * (storage_main.c) and the tests fill in for rl__ss_new (storage_server.h includes this file), and
 * what every file of the role reads its knobs from (ss->o, ss_int.h). A header of its own so that
 * the role's private header needs nothing of its public one.
 */
#ifndef RL_SERVER_SS_OPTIONS_H
#define RL_SERVER_SS_OPTIONS_H

#include <stdint.h>

#include "net/loop.h"

/* Options of a storage server. Strings are copied by rl__ss_new. Knobs left at 0 take their
 * default; they exist for tests (the command line sets only the documented options). */
typedef struct {
    const char *dir;               /* required: the engine's directory (created if missing) */
    uint32_t id;                   /* required: the server id, >= 1 */
    const char *coordinator_ip;    /* required: dotted IPv4 inside 127.0.0.0/8 */
    uint16_t coordinator_port;     /* required, not 0 */
    const char *listen_ip;         /* NULL: "127.0.0.1" */
    uint16_t listen_port;          /* 0: an ephemeral port */
    const char *host;              /* host label; NULL: "host1" */
    int no_sync;                   /* skip fsync (benchmarks only) */
    uint64_t window_versions;      /* MVCC window; 0: the engine's default (5,000,000) */
    uint64_t checkpoint_log_bytes; /* engine checkpoint threshold; 0: the engine's default */
    uint32_t delay_us;             /* injected one-way delay on connections to other hosts (netem.h),
                                   at most RL_NETEM_MAX_US; changed at run time by SET_DELAY */
    uint32_t jitter_us;            /* its jitter (same bound) */
    const char *coordinator_host;  /* the coordinator's host label if known (rl cluster passes it);
                                     NULL: learnt from its HELLO reply, delayed until then */
    const char *engine;            /* "memory" or "ssd"; NULL: what dir holds (memory if new) */
    const rl__net_auth *auth;      /* required: the cluster's credentials with the member key
                                      (rl__keyfile_read); copied by rl__ss_new */
    const rl__net_limits *limits;  /* NULL: the defaults of loop.h */
    /* Knobs. */
    int workers;            /* mapped-read worker threads; 0: 3 (at most 16) */
    int future_wait_ms;     /* how long a read at a version not yet known waits; 0: 1000 */
    int s2s_timeout_ms;     /* how long a storage-to-storage read may take; 0: 2000 */
    int peek_wait_ms;       /* PEEK's max_wait_ms; 0: 500 */
    int sync_interval_ms;   /* at most one engine sync per this many ms; 0: 10 */
    int map_refresh_ms;     /* GET_SHARD_MAP refresh period; 0: 5000 */
    int connect_timeout_ms; /* coordinator and peer connects; 0: 1000 */
    int co_timeout_ms;      /* a coordinator reply (REGISTER_STORAGE, PEEK beyond its max wait)
                             later than this drops the connection; 0: 5000 */
    int stream_credit_ms;   /* a streamed mapped read waiting this long for credit (a client that
                             stopped reading) fails with timed_out; 0: 30000 */
} rl__ss_options;

#endif
