/* cluster_admin.h (internal) — start, inspect, restart, re-delay and stop a local reclayer cluster:
 * one `rlkvd coordinator` and N `rlkvd storage` processes on 127.0.0.0/8 (every process on
 * 127.0.0.1, or host h on 127.0.0.h with host addresses), all under one directory. The
 * library part of `rl cluster` (tools/rl/cmd_cluster.c is a thin main over it) and of the test
 * harness (tests/cluster_fixture.h).
 *
 * Directory layout (DIR is the cluster's directory, created by rl__cluster_up):
 *
 *   DIR/init.json           the initial layout (--init of the coordinator; docs/design.md §8)
 *   DIR/reclayer.cluster    the cluster file (src/kv/cluster/clusterfile.h), written once healthy
 *   DIR/pids.json           what was started: the topology and the current injected delay; per
 *                           process role, id, address, host label, pid, port, start times
 *   DIR/coordinator/        the coordinator's --dir (commit log, system keyspace)
 *   DIR/storage-ID/         storage server ID's --dir (its engine)
 *   DIR/<role dir>/fatal.json  why the process stopped last, if it stopped on an error
 *                           (src/server/fatal.h; `status` shows it)
 *   DIR/run/ROLE[-ID].port  the port files the processes write once listening
 *   DIR/logs/coordinator.log, DIR/logs/storage-ID.log   each process's stderr and stdout
 *   DIR/lock                flock()ed by every command that changes pids.json
 *
 * Invariants:
 *   1. A process is only ever signalled by the pid recorded in pids.json, and only after the start
 *      time the kernel reports for that pid (/proc/PID/stat field 22) equals the recorded one, so a
 *      recycled pid is never mistaken for ours. Nothing is stopped by name or pattern.
 *   2. Every wait has a deadline: the port file (the health timeout), a STATUS or a request (at
 *      most the time left, capped at a few seconds), a stop (SIGTERM, then SIGKILL after 10 s).
 *   3. rl__cluster_up either returns RL_OK with every process healthy and pids.json and the cluster
 *      file written, or stops everything it started and returns an error whose message names the
 *      log file to read.
 *   4. pids.json is replaced atomically (write, fsync, rename) under DIR/lock.
 *
 * Processes are started with fork/exec (no shell), each in its own process group, stdin
 * /dev/null, stdout and stderr appended to its log. The rlkvd binary is opts->rlkvd, else the
 * RL_RLKVD environment variable, else `rlkvd` in the directory of the running program
 * (/proc/self/exe).
 *
 * Health (rl__cluster_wait_healthy): the coordinator's STATUS lists every storage server as
 * registered and healthy; a test commit through the coordinator (SET of a key in the system
 * keyspace, read back at the commit version, then CLEARed, so nothing is left behind) works; and
 * every storage server's STATUS reports known_version >= that commit's version and it answers a
 * GET at that version for a key of a shard it owns.
 *
 * Errors: codes of include/reclayer/error.h (never errno), with a one-line reason appended to the
 * caller's err (rl__errdetail): RL_E_INVALID_ARGUMENT (bad options, a directory that is not empty),
 * RL_E_ALREADY_EXISTS (the directory holds a running cluster), RL_E_FILE_NOT_FOUND (no cluster in
 * the directory, no rlkvd), RL_E_IO_ERROR, RL_E_TIMED_OUT (not healthy in time),
 * RL_E_SERVER_UNAVAILABLE (a process is down or unhealthy), RL_E_CONNECTION_FAILED,
 * RL_E_OUT_OF_MEMORY.
 *
 * Threads: the functions are not thread-safe with respect to one directory (DIR/lock serializes
 * processes, not threads); different directories are independent. They block the caller.
 */
#ifndef RL_APP_CLUSTER_ADMIN_H
#define RL_APP_CLUSTER_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "app/args.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "net/netem.h"
#include "net/proto.h"

#define RL_CLUSTER_MAX_STORAGE 64  /* storage servers per local cluster */
#define RL_CLUSTER_MAX_SHARDS 1024 /* user-keyspace shards in the initial layout */
#define RL_CLUSTER_DEFAULT_TIMEOUT_MS 30000
#define RL_CLUSTER_STOP_TIMEOUT_MS 10000 /* SIGTERM, then SIGKILL */

/* rl__cluster_up_opts.flags */
enum {
    /* The processes get SIGKILL when the thread that started them exits (prctl PDEATHSIG): for
     * test fixtures, so a test killed outright leaves no server behind. Not for `rl cluster up`,
     * which exits after starting them. */
    RL_CLUSTER_DIE_WITH_PARENT = 0x1,
};

/* rl__cluster_restart flags */
enum {
    RL_CLUSTER_KILL = 0x1, /* stop with SIGKILL instead of SIGTERM (a crash) */
};

typedef struct {
    int n_storage;            /* storage servers, 1..RL_CLUSTER_MAX_STORAGE */
    int n_shards;             /* 0: one shard per storage server; else 1..255 shards split evenly
                                 * by first byte (boundary i at byte 256*i/K); excludes split */
    const char *const *split; /* split keys in FoundationDB's printable form (\xNN), strictly
                                 * increasing, non-empty, below \xff; NULL: use n_shards */
    int n_split;              /* entries of split (< RL_CLUSTER_MAX_SHARDS) */
    int no_sync;              /* pass --no-sync to every process (benchmarks only) */
    int64_t window_versions;  /* pass --window-versions N (0: the servers' default) */
    int timeout_ms;           /* health wait (0: RL_CLUSTER_DEFAULT_TIMEOUT_MS) */
    const char *rlkvd;        /* path of rlkvd (NULL: see the file comment) */
    unsigned flags;           /* RL_CLUSTER_* */
    /* Topology (docs/design.md §8.6). Hosts: with n_hosts H >= 1 and storage_per_host S >= 1 the cluster has
     * H * S storage servers (n_storage must be 0 or equal), server id i on host label
     * "host<h>" with h = (i - 1) / S + 1; the coordinator is on host1. n_hosts 0: every process on
     * host1, n_storage servers. host_addresses 1: host h listens on 127.0.0.<h> (host1 on
     * 127.0.0.1); 0: everything on 127.0.0.1. */
    int n_hosts;
    int storage_per_host;
    int host_addresses;
    /* Replication: each shard's team has this many storage servers (0 or 1: single, 2: double,
     * 3: triple), on distinct hosts when there are enough hosts (rl__cluster_layout). */
    int replication;
    /* Injected one-way delay (and jitter) on every message between processes of different host
     * labels, the client ("client") included: the processes' --delay-us / --jitter-us. */
    uint32_t delay_us;
    uint32_t jitter_us;
    /* The storage engine of every storage server ("memory" or "ssd"; NULL: memory). */
    const char *engine;
    /* A complete layout to use instead of the generated one (the coordinator's --init JSON,
     * rl__cluster_layout's format); NULL: generated. For tests that need exact teams. */
    const char *init_json;
} rl__cluster_up_opts;

/* ---------------------------------------------------------------------------------------------
 * The command-line options that shape a cluster (`rl cluster up` and the tests' rl_with_cluster
 * share them, so their names, ranges and help cannot drift apart)
 * ------------------------------------------------------------------------------------------ */

typedef struct {
    int n_storage, n_hosts, storage_per_host, host_addresses;
    int replication; /* 1 single, 2 double, 3 triple */
    int shards;
    const char *split; /* "KEY,KEY,..." (FoundationDB's printable form) or NULL */
    int engine;        /* 1 memory, 2 ssd */
    int no_sync;
    int64_t window;
    uint64_t delay_us, jitter_us;
} rl__cluster_up_args;

#define RL__CLUSTER_UP_ARGS_INIT \
    { .replication = 1, .engine = 1 }

/* The rl__arg choices of --replication and --engine (static tables). */
extern const rl__arg_choice rl__cluster_replication_choices[];
extern const rl__arg_choice rl__cluster_engine_choices[];

/* The rl__arg entries of rl__cluster_up_args *a (a table's other entries come before or after). */
#define RL__CLUSTER_UP_OPTS(a)                                                                                    \
    {.name = "storage",                                                                                           \
     .kind = RL_ARG_INT,                                                                                          \
     .dest = &(a)->n_storage,                                                                                     \
     .metavar = "N",                                                                                              \
     .flags = RL_ARG_NO_DEFAULT,                                                                                  \
     .min = 1,                                                                                                    \
     .max = RL_CLUSTER_MAX_STORAGE,                                                                               \
     .help = "storage servers to start (ids 1..N), all on host1"},                                                \
        {.name = "hosts",                                                                                         \
         .kind = RL_ARG_INT,                                                                                      \
         .dest = &(a)->n_hosts,                                                                                   \
         .metavar = "H",                                                                                          \
         .flags = RL_ARG_NO_DEFAULT,                                                                              \
         .min = 1,                                                                                                \
         .max = RL_CLUSTER_MAX_STORAGE,                                                                           \
         .help = "hosts (labels host1..hostH); storage server i is on host (i-1)/S+1, the coordinator on host1"}, \
        {.name = "storage-per-host",                                                                              \
         .kind = RL_ARG_INT,                                                                                      \
         .dest = &(a)->storage_per_host,                                                                          \
         .metavar = "S",                                                                                          \
         .flags = RL_ARG_NO_DEFAULT,                                                                              \
         .min = 1,                                                                                                \
         .max = RL_CLUSTER_MAX_STORAGE,                                                                           \
         .help = "storage servers per host (with --hosts; default 1)"},                                           \
        {.name = "host-addresses",                                                                                \
         .kind = RL_ARG_FLAG,                                                                                     \
         .dest = &(a)->host_addresses,                                                                            \
         .help = "host h listens on 127.0.0.h instead of every process on 127.0.0.1 (with --hosts)"},             \
        {.name = "replication",                                                                                   \
         .kind = RL_ARG_ENUM,                                                                                     \
         .dest = &(a)->replication,                                                                               \
         .choices = rl__cluster_replication_choices,                                                              \
         .help = "storage servers per shard's team, on distinct hosts when possible"},                            \
        {.name = "delay-us",                                                                                      \
         .kind = RL_ARG_UINT64,                                                                                   \
         .dest = &(a)->delay_us,                                                                                  \
         .metavar = "N",                                                                                          \
         .umin = 0,                                                                                               \
         .umax = RL_NETEM_MAX_US,                                                                                 \
         .help = "injected one-way delay in µs on every message between different hosts, the client included "   \
                 "(the round trip gains 2N)"},                                                                    \
        {.name = "jitter-us",                                                                                     \
         .kind = RL_ARG_UINT64,                                                                                   \
         .dest = &(a)->jitter_us,                                                                                 \
         .metavar = "J",                                                                                          \
         .umin = 0,                                                                                               \
         .umax = RL_NETEM_MAX_US,                                                                                 \
         .help = "a uniform jitter in [0, J] µs on each delayed message (never reorders)"},                       \
        {.name = "shards",                                                                                        \
         .kind = RL_ARG_INT,                                                                                      \
         .dest = &(a)->shards,                                                                                    \
         .metavar = "K",                                                                                          \
         .min = 0,                                                                                                \
         .max = 255,                                                                                              \
         .help = "split the user keyspace evenly by first byte into K shards, round-robin over the servers "      \
                 "(0: one per server)"},                                                                          \
        {.name = "split",                                                                                         \
         .kind = RL_ARG_STRING,                                                                                   \
         .dest = &(a)->split,                                                                                     \
         .metavar = "KEY,...",                                                                                    \
         .flags = RL_ARG_NONEMPTY,                                                                                \
         .help = "split the user keyspace at these keys instead (FoundationDB's printable form, \\xNN; \\x2c "    \
                 "for a comma), strictly increasing; shards go round-robin to the servers"},                      \
        {.name = "engine",                                                                                        \
         .kind = RL_ARG_ENUM,                                                                                     \
         .dest = &(a)->engine,                                                                                    \
         .choices = rl__cluster_engine_choices,                                                                   \
         .help = "the storage servers' engine (docs/design.md §4): memory, or ssd (LMDB below the MVCC window)"}, \
        {.name = "no-sync",                                                                                       \
         .kind = RL_ARG_FLAG,                                                                                     \
         .dest = &(a)->no_sync,                                                                                   \
         .help = "run every process without fsync (benchmarks only: a crash may lose acknowledged commits)"},     \
    {                                                                                                             \
        .name = "window-versions", .kind = RL_ARG_INT64, .dest = &(a)->window, .metavar = "N", .min = 0,          \
        .max = INT64_C(1000000000000), .help = "the servers' MVCC window in versions (0: their default, 5 s)"     \
    }

/* rl__cluster_up_args_apply — turn parsed options a into *o (memset first). Split keys: when
 * a->split is set, its comma-separated keys are cut into *out_copy (a heap copy, the caller's to
 * free(), NULL otherwise) and pointed at by keys[0..cap) (o->split, o->n_split); split_file_keys
 * (NULL, or n_file_keys keys of a file the caller read) is the alternative. Checks what the table
 * cannot: --storage or --hosts given, --shards and --split together, more than cap keys; then the
 * topology and the layout (a bad split key). Returns RL_OK, RL_E_INVALID_ARGUMENT (a usage error:
 * err says why) or RL_E_OUT_OF_MEMORY. */
int rl__cluster_up_args_apply(const rl__cluster_up_args *a, const char **keys, int cap, char **out_copy,
                              rl__cluster_up_opts *o, rl__errdetail *err);

/* rl__cluster_layout — the initial layout of rl__cluster_up as the JSON of the coordinator's
 * --init: {"storage": [1..n], "shards": [{"begin": hex, "end": hex, "team": [id, ...]}, ...]},
 * the shards covering ["", "\xff"). n is n_storage, or n_hosts * storage_per_host when
 * n_storage is 0. Shard i's team has max(replication, 1) members: the primary i % n + 1 (the
 * round-robin of single replication), then one member on each following host in turn (host
 * (h0 + m) mod H, at the primary's position within its host) while hosts are left, then the
 * servers after the primary in id order — so the members are on distinct hosts whenever there
 * are at least as many hosts as members, and each server is primary and second member of about
 * as many shards as any other. Deterministic. Replication above n (or RL_PROTO_MAX_TEAM) is
 * refused. rl__cluster_up writes o->init_json verbatim instead when it is set.
 * [in] o  only n_storage, n_hosts, storage_per_host, replication, n_shards, split and n_split
 *         are read.
 * [out] out  the JSON text is appended (NUL-terminated). Pure.
 * Returns RL_OK, RL_E_INVALID_ARGUMENT (reason in err), RL_E_OUT_OF_MEMORY. */
int rl__cluster_layout(const rl__cluster_up_opts *o, rl_buf *out, rl__errdetail *err);

/* rl__cluster_topology — check o's topology and resolve it into *out (a copy of o): with n_hosts
 * H >= 1, storage_per_host 0 becomes 1 and n_storage H x S (a given n_storage must equal it);
 * replication 0..3 and not above n_storage; delay and jitter at most RL_NETEM_MAX_US each;
 * storage_per_host and host_addresses only with hosts. Pure. RL_OK or RL_E_INVALID_ARGUMENT
 * (reason in err). rl__cluster_up calls it first; rl__cluster_layout takes its output. */
int rl__cluster_topology(const rl__cluster_up_opts *o, rl__cluster_up_opts *out, rl__errdetail *err);

/* rl__cluster_up — create dir (absent or empty; a directory holding a running cluster is
 * RL_E_ALREADY_EXISTS, any other non-empty one RL_E_INVALID_ARGUMENT), write init.json, start the
 * coordinator then the storage servers, wait until healthy (o->timeout_ms), write pids.json and
 * reclayer.cluster. On failure everything started is stopped (pids.json records them stopped)
 * and err names the log to read. [in] o: borrowed for the call. */
int rl__cluster_up(const char *dir, const rl__cluster_up_opts *o, rl__errdetail *err);

/* rl__cluster_down — stop every recorded process that is still ours (start time verified):
 * storage servers first, the coordinator last; SIGTERM, up to RL_CLUSTER_STOP_TIMEOUT_MS, then
 * SIGKILL. Idempotent (a stopped cluster is RL_OK). RL_E_FILE_NOT_FOUND if dir has no pids.json.
 * *out_stopped (may be NULL) gets the number of processes signalled. */
int rl__cluster_down(const char *dir, int *out_stopped, rl__errdetail *err);

/* rl__cluster_restart — rl__cluster_restart_many of the one process id. */
int rl__cluster_restart(const char *dir, uint32_t id, unsigned flags, int timeout_ms, rl__errdetail *err);

/* rl__cluster_restart_many — restart the processes ids[0..n_ids) (0: the coordinator, 1..N:
 * storage servers) together: stop each with SIGTERM (or SIGKILL with RL_CLUSTER_KILL; a process
 * already gone is simply started), storage servers first; start each again with the same
 * directory, options and port, the coordinator first; record the new pids; then wait
 * (timeout_ms, 0: the default) until the processes named, the coordinator and every other
 * process still running are healthy. A process that is down and not named is not waited for:
 * on RL_OK err holds a note naming it ("note: not restarted and still down: storage-3 ..."),
 * and is otherwise empty. RL_E_INVALID_ARGUMENT for an unknown id, an id named twice or n_ids
 * out of 1..RL_CLUSTER_MAX_STORAGE + 1; RL_E_SERVER_UNAVAILABLE when a process named (or the
 * coordinator) exits; RL_E_TIMED_OUT when they are not healthy in time. */
int rl__cluster_restart_many(const char *dir, const uint32_t *ids, int n_ids, unsigned flags, int timeout_ms,
                             rl__errdetail *err);

/* rl__cluster_wait_healthy — wait until the cluster in dir is healthy (see the file comment), at
 * most timeout_ms (0: the default). RL_OK, RL_E_TIMED_OUT (err says what was missing last),
 * RL_E_SERVER_UNAVAILABLE (a recorded process has exited: err names its log). */
int rl__cluster_wait_healthy(const char *dir, int timeout_ms, rl__errdetail *err);

/* rl__cluster_status — the state of every recorded process as JSON, to the caller (json_decref):
 *   {"dir": ..., "cluster_file": ..., "cluster_id", "delay_us", "jitter_us" (recorded), "ok": bool,
 *    "processes": [{"role", "id", "address", "host", "port", "pid", "log", "alive", "healthy",
 *    "delay_us", "jitter_us" (its STATUS's, else recorded), "status": <its STATUS reply or null>,
 *    "error": <why STATUS failed, when it did>, "stopped_on": <for a process that is down and
 *    recorded why it stopped (src/server/fatal.h): {"code", "name", "message", "what", "role",
 *    "id", "pid", "time", "time_unix", "summary"}>}, ...]}
 * A process that is down gets "error": "stopped on no_space (3005) at 2026-01-02T03:04:05Z:
 * syncing the engine: No space left on device" when it recorded a fatal error, else "not running
 * (the recorded pid is gone)" or "stopped" (a process killed, or stopped cleanly, records none).
 * healthy: the coordinator answered STATUS (coordinator) / the coordinator lists the server as
 * registered and healthy and it answered STATUS (storage). Returns RL_OK when every process is
 * alive and healthy, RL_E_SERVER_UNAVAILABLE when something is down (*out still filled), other
 * errors (no pids.json, memory) with *out NULL. timeout_ms bounds each STATUS (0: 2000). */
int rl__cluster_status(const char *dir, int timeout_ms, json_t **out, rl__errdetail *err);

/* rl__cluster_pid — the recorded pid of process id (0: coordinator) if it is alive and ours
 * (start time verified), else 0 in *out_pid with RL_OK; RL_E_INVALID_ARGUMENT for an unknown id.
 * *out_port (may be NULL) gets its recorded port. */
int rl__cluster_pid(const char *dir, uint32_t id, int *out_pid, uint16_t *out_port, rl__errdetail *err);

/* rl__cluster_addr — the recorded address (out_ip, 16 bytes, NUL-terminated), port and host
 * label (out_host, 16 bytes) of process id (0: the coordinator); each out may be NULL.
 * RL_E_INVALID_ARGUMENT for an unknown id. */
int rl__cluster_addr(const char *dir, uint32_t id, char out_ip[16], uint16_t *out_port, char out_host[16],
                     rl__errdetail *err);

/* rl__cluster_delay — set the injected delay of the cluster in dir: record it in pids.json (so a
 * restarted process starts with it), then send SET_DELAY (delay_us, jitter_us) to every running
 * process, storage servers first and the coordinator last (clients learn the delay from the
 * coordinator's shard map, within about a second while they send, so a client that sees the new
 * setting knows every server has it). *out_set (may be NULL): processes that took it.
 * RL_OK when every process took it; RL_E_INVALID_ARGUMENT (above 10 s: nothing changed),
 * RL_E_SERVER_UNAVAILABLE (a process is down: the others were set, err names it), the first
 * error of a SET_DELAY otherwise; RL_E_FILE_NOT_FOUND without a cluster. */
int rl__cluster_delay(const char *dir, uint32_t delay_us, uint32_t jitter_us, int *out_set, rl__errdetail *err);

/* rl__cluster_storage_count — the number of storage servers recorded in dir's pids.json. */
int rl__cluster_storage_count(const char *dir, int *out_n, rl__errdetail *err);

/* ---- A blocking admin connection (HELLO as RL_ROLE_ADMIN, one request at a time) ----------- */

typedef struct rl__admin_conn rl__admin_conn;

/* rl__admin_conn_open — connect to 127.0.0.1:port (rl__admin_conn_open_at for another address),
 * run the handshake with auth (docs/protocol.md §2: the server's challenge, our AUTH as a member
 * of the cluster, the server's proof checked), then send HELLO (role admin, host "rl") and check
 * the reply, within timeout_ms. auth must hold the member key (the cluster's key file,
 * server/keyfile.h); it is borrowed for the call. *out is the caller's (rl__admin_conn_close).
 * RL_OK, RL_E_CONNECTION_FAILED, RL_E_TIMED_OUT, RL_E_INCOMPATIBLE_PROTOCOL_VERSION,
 * RL_E_INVALID_CLUSTER_ID / RL_E_UNAUTHORIZED_ATTEMPT (the server is not the key file's cluster,
 * or refused our proof), RL_E_MALFORMED_FRAME, RL_E_OUT_OF_MEMORY (reason in err). */
int rl__admin_conn_open(uint16_t port, const rl__net_auth *auth, int timeout_ms, rl__admin_conn **out,
                        rl__errdetail *err);

/* rl__admin_conn_open_at — as rl__admin_conn_open, to ip:port (dotted IPv4 inside 127.0.0.0/8,
 * e.g. the address pids.json records for a process on host 2: 127.0.0.2). Anything else is
 * RL_E_INVALID_ARGUMENT. */
int rl__admin_conn_open_at(const char *ip, uint16_t port, const rl__net_auth *auth, int timeout_ms,
                           rl__admin_conn **out, rl__errdetail *err);

/* rl__admin_conn_call — send req (a request: req->flags 0) and wait up to timeout_ms for the reply
 * with its id, decoding it into *reply. The reply borrows the connection's buffers: valid until
 * the next call or the close. An error reply returns its code (its message in err); a closed or
 * broken connection RL_E_CONNECTION_FAILED; an undecodable reply RL_E_MALFORMED_FRAME (the
 * connection is then unusable: close it). */
int rl__admin_conn_call(rl__admin_conn *c, const rl__msg *req, rl__msg *reply, int timeout_ms, rl__errdetail *err);

/* rl__admin_conn_close — close and free (NULL is a no-op). */
void rl__admin_conn_close(rl__admin_conn *c);

#endif
