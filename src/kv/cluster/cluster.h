/* cluster.h (internal) — the `cluster:FILE` backend (backend.h) and the pure retry rules it
 * follows, exposed so tests can check them without a network.
 *
 * cluster.c's file comment describes the backend: its network thread, connections, location
 * cache, request life cycle and timeouts.
 */
#ifndef RL_KV_CLUSTER_CLUSTER_H
#define RL_KV_CLUSTER_CLUSTER_H

#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "kv/backend.h"

/* Timing of the client (ns unless named otherwise). */
#define RL_CLUSTER_CONNECT_TIMEOUT_MS 1000          /* one TCP connect (loopback) */
#define RL_CLUSTER_RETRY_WINDOW_NS 5000000000ull    /* retry a lost server this long, then 1026 */
#define RL_CLUSTER_READ_TIMEOUT_NS 5000000000ull    /* one read / GRV / map attempt without reply */
#define RL_CLUSTER_MAPPED_TIMEOUT_NS 10000000000ull /* one mapped read attempt (s2s reads) */
/* Streamed mapped reads (GET_MAPPED_STREAM; docs/design.md §8.5): a chunk is sent once its entries
 * reach this many bytes, and the server has at most the window of chunk bytes in flight that the
 * client has not credited back (the client credits each chunk as it decodes it). cluster:FILE?
 * stream=0 asks for whole GET_MAPPED_RANGE replies instead; chunk= and window= override these. */
#define RL_CLUSTER_STREAM_CHUNK (256u << 10)
#define RL_CLUSTER_STREAM_WINDOW (4u << 20)
#define RL_CLUSTER_COMMIT_TIMEOUT_NS 10000000000ull /* a commit without reply: 1021 */
#define RL_CLUSTER_BACKOFF_MIN_NS 5000000ull        /* first retry delay, doubling ... */
#define RL_CLUSTER_BACKOFF_MAX_NS 250000000ull      /* ... up to this */
#define RL_CLUSTER_WRONG_SHARD_RETRIES 8            /* 1001 replies per step before giving up */
#define RL_CLUSTER_STATUS_TIMEOUT_MS 6000           /* status_json's wait for the coordinator */

/* rl__kv_cluster_open — open the backend for the cluster file at path: read it
 * (clusterfile.h), start the network thread, connect to the coordinator and fetch the shard map
 * (retrying up to RL_CLUSTER_RETRY_WINDOW_NS). Options used: mapped_secondary_row_limit /
 * _byte_limit (sent with every mapped read), read_only (commits that write are refused with
 * RL_E_READ_ONLY_DATABASE), mapped_secondary_strategy, wait_report_ms / wait_report /
 * wait_report_ud (the wait report, cluster.c invariant 9); the others belong to the servers or
 * the transaction layer (transaction_timeout_ms reaches the backend as each request's
 * deadline_ns, backend.h contract 7). [out] out: the backend (its
 * close() frees it). On failure a message naming the file or the address is appended to
 * err. Errors: RL_E_FILE_NOT_FOUND / RL_E_IO_ERROR / RL_E_CONNECTION_STRING_INVALID (the
 * file), RL_E_CONNECTION_FAILED (no coordinator within the window), RL_E_MALFORMED_FRAME (its
 * map was unusable), RL_E_INVALID_ARGUMENT, RL_E_OUT_OF_MEMORY, RL_E_OPERATION_FAILED (no
 * thread or event loop). [any] */
int rl__kv_cluster_open(const char *cluster_file, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err);

/* rl__kv_cluster_ping — one PING round trip to server id (0: the coordinator) on the client's
 * own connection, issued and waited for exactly as a read is (the calling thread sends, the
 * network thread takes the reply and wakes the caller). [out] out_ns: the round trip seen by the
 * caller. For benchmarks and tests (not part of backend.h). Errors: RL_E_INVALID_ARGUMENT (not a
 * cluster backend, or an unknown id), RL_E_CONNECTION_FAILED, RL_E_TIMED_OUT. [any thread but the
 * network thread] */
int rl__kv_cluster_ping(rl__kv_backend *b, uint32_t server_id, uint64_t *out_ns);
/* rl__kv_cluster_ping_within — rl__kv_cluster_ping waiting at most timeout_ms (>= 0; the plain
 * call waits RL_CLUSTER_STATUS_TIMEOUT_MS) for the reply: RL_E_TIMED_OUT after it. A server that
 * refuses connections fails sooner, after the client's retry window, with
 * RL_E_CONNECTION_FAILED. */
int rl__kv_cluster_ping_within(rl__kv_backend *b, uint32_t server_id, int timeout_ms, uint64_t *out_ns);

/* Round-trip figures of n pings to one server (rl__kv_cluster_ping, one after another). */
#define RL_KV_PING_MAX 1000000
typedef struct {
    uint32_t server_id;                               /* the server pinged (0: the coordinator) */
    int n;                                            /* pings measured (0 on error) */
    uint64_t min_ns, p50_ns, p99_ns, max_ns, mean_ns; /* of the n round trips (nearest rank) */
} rl__kv_ping_stats;

/* rl__kv_cluster_ping_stats — n (1..RL_KV_PING_MAX) PINGs to server_id on the client's own
 * connection, so an injected delay is on the path (what `rl ping` and the campaign's RTT probe
 * report). [out] out: zeroed, then filled on RL_OK. Errors: as rl__kv_cluster_ping, plus
 * RL_E_INVALID_ARGUMENT (n out of range), RL_E_OUT_OF_MEMORY. [any thread but the network
 * thread] */
int rl__kv_cluster_ping_stats(rl__kv_backend *b, uint32_t server_id, int n, rl__kv_ping_stats *out);
/* rl__kv_cluster_ping_stats_within — the same, each ping waiting at most timeout_ms
 * (rl__kv_cluster_ping_within). */
int rl__kv_cluster_ping_stats_within(rl__kv_backend *b, uint32_t server_id, int n, int timeout_ms,
                                     rl__kv_ping_stats *out);

/* rl__db_cluster_ping_stats — the same for an open rl_db (its backend must be cluster:, else
 * RL_E_INVALID_ARGUMENT). For callers above the kv layer (the campaign, rl ping). */
int rl__db_cluster_ping_stats(rl_db *db, uint32_t server_id, int n, rl__kv_ping_stats *out);
/* rl__db_cluster_ping, rl__db_cluster_servers, rl__db_cluster_delay — rl__kv_cluster_ping,
 * rl__kv_cluster_servers and rl__kv_cluster_delay for an open rl_db (the layers above kv and the
 * tools never reach into the rl_db). RL_E_INVALID_ARGUMENT for a NULL db or another backend. */
int rl__db_cluster_ping(rl_db *db, uint32_t server_id, uint64_t *out_ns);
/* rl__db_cluster_ping_within, rl__db_cluster_ping_stats_within — the _within calls for an open
 * rl_db (rl ping --timeout). */
int rl__db_cluster_ping_within(rl_db *db, uint32_t server_id, int timeout_ms, uint64_t *out_ns);
int rl__db_cluster_ping_stats_within(rl_db *db, uint32_t server_id, int n, int timeout_ms, rl__kv_ping_stats *out);
int rl__db_cluster_servers(rl_db *db, uint32_t *ids, int cap, int *out_n);
int rl__db_cluster_delay(rl_db *db, uint32_t *out_delay_us, uint32_t *out_jitter_us);

/* rl__kv_cluster_servers — the ids of the current shard map's server list (0: the coordinator,
 * then the storage servers), ascending, into ids (cap entries); *out_n: how many there are.
 * RL_E_INVALID_ARGUMENT when not a cluster backend or more than cap. [any] */
int rl__kv_cluster_servers(rl__kv_backend *b, uint32_t *ids, int cap, int *out_n);

/* rl__kv_cluster_delay — the injected delay the client applies now (from its last map). [any] */
int rl__kv_cluster_delay(rl__kv_backend *b, uint32_t *out_delay_us, uint32_t *out_jitter_us);

/* Replicas (teams of more than one storage server). A storage server whose connection was lost
 * or refused is avoided by reads for this long (or until a connection to it opens again). */
#define RL_CLUSTER_AVOID_NS 1000000000ull

/* Hedged reads. A plain read (GET, GET_KEY, GET_RANGE) of a shard whose team has another member,
 * still without reply after rl__cluster_hedge_threshold of its server's recent round trips, is
 * sent to another member too; the first reply wins and the other is dropped (counted as a late
 * reply). Commits, read versions, the map and mapped reads (their servers wait for other servers:
 * a point read's p50 does not predict them) are never hedged. */
#define RL_CLUSTER_HEDGE_FACTOR 4          /* threshold: this many times the server's p50 ... */
#define RL_CLUSTER_HEDGE_MIN_NS 2000000ull /* ... and at least this */
#define RL_CLUSTER_HEDGE_SAMPLES 16        /* round trips kept per connection for its p50 */
#define RL_CLUSTER_HEDGE_MAX_OUT 32        /* hedges in flight at once per client, at most */
#define RL_CLUSTER_HEDGE_TICK_NS \
    1000000ull /* the hedge timer fires no sooner than a tenth of this
                                              * after it looked (a burst's reads are taken together) */
/* RL_CLUSTER_HEDGE=0 in the environment when a database is opened turns hedging off for it (to
 * measure what it costs). */

/* ---- Retry rules (pure) ------------------------------------------------------------------- */

typedef enum {
    RL_CREQ_READ = 1,   /* rl__kv_read */
    RL_CREQ_GRV = 2,    /* rl__kv_grv */
    RL_CREQ_COMMIT = 3, /* rl__kv_commit */
    RL_CREQ_MAP = 4,    /* the client's own GET_SHARD_MAP */
    RL_CREQ_STATUS = 5, /* status_json's STATUS */
    RL_CREQ_PING = 6,   /* rl__kv_cluster_ping */
} rl__creq_kind;

typedef enum {
    RL_CRETRY_FAIL = 0,    /* complete the operation with .err */
    RL_CRETRY_BACKOFF = 1, /* send the same request again after .delay_ns */
    RL_CRETRY_REFRESH = 2, /* after .delay_ns, refresh the shard map, then send it again */
} rl__cretry_action;

typedef struct {
    int action;        /* rl__cretry_action */
    int err;           /* RL_CRETRY_FAIL: the operation's outcome */
    uint64_t delay_ns; /* BACKOFF / REFRESH */
} rl__cretry;

/* rl__cluster_retry_decide — what to do after an attempt failed.
 * [in] kind        rl__creq_kind of the operation.
 * [in] err         an error reply's code (is_reply 1), or the transport's failure (is_reply 0:
 *                  RL_E_CONNECTION_FAILED for a refused or lost connection, RL_E_TIMED_OUT for an
 *                  attempt without reply, RL_E_INCOMPATIBLE_PROTOCOL_VERSION for a foreign peer).
 * [in] sent        commits: the request may have reached the coordinator.
 * [in] since_ns    when the first transport failure of this step happened (is_reply 0).
 * [in] now_ns      now (the same clock).
 * [in] attempts    transport failures of this step so far, this one included (>= 1).
 * [in] wrong_shard wrong_shard_server replies of this step so far, this one included.
 * Rules: an error reply fails the operation with its code, except wrong_shard_server to a read,
 * which refreshes the map and retries (immediately the first time, then with backoff) up to
 * RL_CLUSTER_WRONG_SHARD_RETRIES times. A transport failure of a commit that may have been
 * sent is commit_unknown_result (1021); a foreign protocol fails at once; otherwise the request
 * is sent again with backoff (RL_CLUSTER_BACKOFF_MIN_NS doubling to _MAX_NS) until
 * RL_CLUSTER_RETRY_WINDOW_NS after the first failure, then connection_failed (1026). */
rl__cretry rl__cluster_retry_decide(int kind, int err, int is_reply, int sent, uint64_t since_ns, uint64_t now_ns,
                                    int attempts, int wrong_shard);

/* rl__cluster_failover_now — whether a read's failed attempt goes to another member of its
 * team at once, without the backoff of rl__cluster_retry_decide: a read (kind RL_CREQ_READ)
 * whose shard has team_size > 1 members, after a transport failure (is_reply 0: the connection
 * was lost or refused, the attempt timed out; not out_of_memory / operation_cancelled / a
 * foreign protocol) or a future_version reply (is_reply 1: that member is behind, e.g. catching
 * up after a restart, and another may not be), as long as tries — the attempts of this step
 * that failed so, this one included — is below team_size (each member gets one immediate try;
 * then the ordinary rules apply). Pure. */
int rl__cluster_failover_now(int kind, int err, int is_reply, uint32_t team_size, int tries);

/* rl__cluster_hedge_threshold — how long a plain read waits for its reply before it is hedged:
 * max(RL_CLUSTER_HEDGE_FACTOR x the median of rtt_ns[0..n), RL_CLUSTER_HEDGE_MIN_NS); with no
 * sample (n 0) RL_CLUSTER_HEDGE_MIN_NS. The samples are the connection's last round trips of
 * plain reads (at most RL_CLUSTER_HEDGE_SAMPLES; not changed). Pure. */
uint64_t rl__cluster_hedge_threshold(const uint64_t *rtt_ns, int n);

#endif
