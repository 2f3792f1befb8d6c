/* placement.h (internal) — the library part of `rl placement` (tools/rl/cmd_placement.c):
 * shard splits and moves through the coordinator (SPLIT_SHARD, ASSIGN_SHARD over an admin
 * connection), the shard map as the system keyspace holds it at one read version, the
 * "server-disjoint" fractions of a record store's placement (a pure function), and the placement
 * receipt (deterministic JSON). docs/design.md §8.6 (rl placement) is the design.
 *
 * Errors: codes of include/reclayer/error.h with a one-line reason appended to err.
 * Threads: every function blocks its caller and shares nothing; the pure ones are reentrant.
 */
#ifndef RL_APP_PLACEMENT_H
#define RL_APP_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "base/kvtypes.h"
#include "net/proto.h"

#define RL_PLACEMENT_DEFAULT_TIMEOUT_MS 60000

/* ---- Admin operations -------------------------------------------------------------------- */

/* rl__placement_coordinator — the coordinator's address and port from a database URL
 * ("cluster:FILE", or the path of a cluster file). RL_OK, RL_E_INVALID_ARGUMENT (another URL
 * kind), or the cluster file's errors (RL_E_FILE_NOT_FOUND, RL_E_CONNECTION_STRING_INVALID). */
int rl__placement_coordinator(const char *db, char ip[16], uint16_t *port, rl__errdetail *err);

/* The admin requests below need the cluster's key file (server/keyfile.h): key_file, or NULL for
 * "cluster.key" in the cluster file's directory (where rl cluster up writes both). Its errors
 * (RL_E_FILE_NOT_FOUND, RL_E_INVALID_ARGUMENT for an open mode, …) are returned as they are.
 *
 * rl__placement_split — split the shard holding key at key (SPLIT_SHARD). *out_version: the
 * version the boundary is in the map from; *out_split 1 if it was added, 0 if key already was a
 * boundary. Errors: RL_E_INVALID_ARGUMENT (key "" or at or above "\xff"), connection errors,
 * RL_E_TIMED_OUT. timeout_ms 0: RL_PLACEMENT_DEFAULT_TIMEOUT_MS. */
int rl__placement_split(const char *db, const char *key_file, const uint8_t *key, size_t key_len, int timeout_ms,
                        rl__version *out_version, int *out_split, rl__errdetail *err);

/* rl__placement_assign — make [begin, end) whole shards and move them to team (ASSIGN_SHARD);
 * returns once every shard of the range is on the team. A lost coordinator connection (a
 * restart) is reconnected and the request sent again (it is idempotent) until the deadline.
 * *out_version: the version of the last switch; *out_moved: shards whose team changed (either may
 * be NULL). Errors: RL_E_INVALID_ARGUMENT (begin >= end, end beyond "\xff", an unknown or repeated
 * team id, a team of 0 or more than 16), RL_E_TIMED_OUT (err names the pending destinations; the
 * move goes on), connection errors. */
int rl__placement_assign(const char *db, const char *key_file, const uint8_t *begin, size_t begin_len,
                         const uint8_t *end, size_t end_len, const uint32_t *team, uint32_t n_team, int timeout_ms,
                         rl__version *out_version, uint32_t *out_moved, rl__errdetail *err);

/* ---- The shard map ------------------------------------------------------------------------ */

typedef struct {
    uint32_t id;
    char address[16];
    uint16_t port;
    char host[RL_PROTO_MAX_STRING + 1]; /* NUL-terminated (a label with NUL bytes is cut) */
} rl__pl_server_entry;

typedef struct {
    uint8_t *begin, *end; /* heap */
    uint32_t begin_len, end_len;
    uint32_t team[RL_PROTO_MAX_TEAM];
    uint32_t n_team;
} rl__pl_shard;

/* The user shards "" .. "\xff" (sorted, contiguous) and the storage servers, by id. */
typedef struct {
    rl__pl_server_entry *servers;
    uint32_t n_servers;
    rl__pl_shard *shards;
    uint32_t n_shards;
} rl__pl_map;

/* rl__pl_map_parse — the map from the rows of \xff/keyServers/ and \xff/serverList/ (as a read of
 * the system keyspace returns them, key order). *out is the caller's (rl__pl_map_free).
 * RL_OK, RL_E_CORRUPT_DATA (err says what), RL_E_OUT_OF_MEMORY. */
int rl__pl_map_parse(const rl_keyvalue *key_servers, int n_ks, const rl_keyvalue *server_list, int n_sl,
                     rl__pl_map *out, rl__errdetail *err);
void rl__pl_map_free(rl__pl_map *m);
/* The shard holding key (every key below "\xff" has one), or NULL. */
const rl__pl_shard *rl__pl_shard_of(const rl__pl_map *m, const uint8_t *key, size_t len);
/* The server with id, or NULL. */
const rl__pl_server_entry *rl__pl_server(const rl__pl_map *m, uint32_t id);

/* ---- Fractions and the receipt -------------------------------------------------------------- */

/* One record and its index entry: the record's first key and the entry's key. */
typedef struct {
    const uint8_t *record_key;
    size_t record_len;
    const uint8_t *index_key;
    size_t index_len;
} rl__pl_pair;

typedef struct {
    uint64_t records;         /* pairs counted */
    uint64_t server_disjoint; /* pairs whose two teams share no storage server */
    uint64_t host_disjoint;   /* ... no host label */
    double server_fraction;   /* server_disjoint / records (0 when there are none) */
    double host_fraction;
} rl__pl_fraction_counts;

/* rl__pl_fractions — count, for each pair, whether the team of the shard holding its record key
 * shares a storage server (and a host: the servers' host labels; a server missing from the list
 * counts as its own host "id:N") with the team of the shard holding its index key. Pure. */
void rl__pl_fractions(const rl__pl_map *m, const rl__pl_pair *pairs, size_t n, rl__pl_fraction_counts *out);

/* rl__pl_receipt — the placement receipt: {"index": {"begin", "end", "shards": [...]},
 * "records": {"begin", "end", "shards": [{..., "records": n}]}, "fractions": {...}} with keys in
 * FoundationDB's printable form, shards as {"begin", "end", "team": [{"id", "address", "port",
 * "host"}]} for every shard meeting the range, in key order. Deterministic: the same map and
 * pairs give the same JSON (json_dumps with JSON_SORT_KEYS | JSON_COMPACT). pairs must be sorted
 * by record key for the per-shard counts. *out is the caller's (json_decref); NULL on OOM. */
json_t *rl__pl_receipt(const rl__pl_map *m, const uint8_t *idx_b, size_t idx_bl, const uint8_t *idx_e, size_t idx_el,
                       const uint8_t *rec_b, size_t rec_bl, const uint8_t *rec_e, size_t rec_el,
                       const rl__pl_pair *pairs, size_t n);

/* rl__pl_split_points — the record keys at which `keys` (n sorted record first-keys) divide into
 * k contiguous parts of nearly equal counts: points[i] = keys[(i + 1) * n / k] for i < k - 1
 * (fewer when n < k: parts may then be empty and are left out). Returns how many points. Pure. */
size_t rl__pl_split_points(size_t n, size_t k, size_t *points);

#endif
