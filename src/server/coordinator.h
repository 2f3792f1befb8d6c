/* coordinator.h (internal) — the coordinator role of rlkvd: read versions, commit batching
 * (sequencer, resolver, group commit over src/commit/), the durable commit log
 * (src/server/commitlog.h) that storage servers PEEK and POP, the shard map and the server list
 * in the system keyspace, and server health. docs/design.md §8.3 describes the design,
 * docs/protocol.md §9 what it answers. The functions below are coord_life.c's; the role's files
 * and how they depend on each other are described in coord_int.h.
 *
 * Life cycle:
 *   rl__coordinator_open   recover DIR (commit log, system keyspace), lay out a fresh cluster
 *                          from --init, listen, publish its own address, write the port file
 *   rl__coordinator_run    serve on the calling thread until rl__coordinator_stop
 *   rl__coordinator_close  stop the committer thread, close connections, close the files
 *
 * Threads: the thread that calls rl__coordinator_run runs the event loop (every connection,
 * every request handler, PEEK parking and timers); the committer thread (src/commit/) runs the
 * batches and the sink (log append, fdatasync, system-keyspace apply). rl__coordinator_stop is
 * safe from any thread and from a signal handler.
 */
#ifndef RL_SERVER_COORDINATOR_H
#define RL_SERVER_COORDINATOR_H

#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "net/loop.h"

typedef struct rl__coordinator rl__coordinator;

typedef struct rl__coordinator_options {
    const char *dir;              /* the coordinator's directory (created if missing) */
    const char *listen_ip;        /* inside 127.0.0.0/8; NULL: "127.0.0.1" */
    uint16_t listen_port;         /* 0: an ephemeral port */
    const char *port_file;        /* NULL, or a file that gets "PORT\n" once listening */
    const char *host;             /* host label; NULL: "host1" */
    const char *init_file;        /* NULL, or the initial layout (JSON), read only on first start */
    int no_sync;                  /* no fdatasync anywhere (benchmarks only) */
    uint64_t window_versions;     /* MVCC and resolver window; 0 = 5,000,000 */
    uint64_t segment_bytes;       /* commit log segment size; 0 = 8 MiB (tests use less) */
    uint32_t delay_us;            /* injected one-way delay on connections to other hosts (netem.h);
                                    at most RL_NETEM_MAX_US; changed at run time by SET_DELAY */
    uint32_t jitter_us;           /* its jitter (same bound) */
    const rl__net_auth *auth;     /* the cluster's credentials, member key included (rl__keyfile_read):
                                 required; copied */
    const rl__net_limits *limits; /* NULL: the defaults of loop.h */
} rl__coordinator_options;

/* rl__coordinator_open — recover and start a coordinator (it serves once rl__coordinator_run
 * runs; connections that arrive before wait in the listen backlog).
 * [in] o        borrowed for the call (strings are copied).
 * [out] out     the coordinator (rl__coordinator_close); set only on RL_OK.
 * [out] err  may be NULL; on failure a one-line reason naming the file or option.
 * Errors: RL_E_INVALID_ARGUMENT (bad options or --init file, no credentials or no member key), RL_E_DATABASE_LOCKED_BY_PROCESS,
 * RL_E_LOG_CORRUPT / RL_E_CHECKPOINT_CORRUPT / RL_E_CORRUPT_DATA (recovery), RL_E_IO_ERROR,
 * RL_E_NO_SPACE, RL_E_ADDRESS_IN_USE, RL_E_BIND_FAILED, RL_E_OUT_OF_MEMORY. [owner] */
int rl__coordinator_open(const rl__coordinator_options *o, rl__coordinator **out, rl__errdetail *err);

/* rl__coordinator_run — serve until rl__coordinator_stop. Returns RL_OK after a stop. [owner] */
int rl__coordinator_run(rl__coordinator *c);

/* rl__coordinator_stop — make rl__coordinator_run return soon. Async-signal-safe. [any] */
void rl__coordinator_stop(rl__coordinator *c);

/* rl__coordinator_port — the port it listens on. [any] */
uint16_t rl__coordinator_port(const rl__coordinator *c);

/* rl__coordinator_close — finish the batches in flight, close every connection and file, free
 * everything (NULL is a no-op). Not while rl__coordinator_run runs. [owner] */
void rl__coordinator_close(rl__coordinator *c);

#endif
