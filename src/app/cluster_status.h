/* cluster_status.h (internal) — a cluster's processes as one JSON shape and one table, whether
 * they were found through the cluster's directory (`rl cluster status --dir`: pids.json, /proc,
 * an admin connection to each process) or through the cluster file alone (`rl shell`'s status:
 * the client's rl_db_status_json, which holds the coordinator's STATUS and each storage
 * server's).
 *
 * The shape (rl__cluster_status in cluster_admin.h fills it from a directory):
 *   {"dir" (directory view only), "cluster_file", "coordinator" ("IP:PORT", client view only),
 *    "ok": bool, "processes": [{"role", "id", "address", "host", "port", "pid", "alive"
 *    (directory view only), "healthy", "delay_us", "jitter_us", "status": <the process's STATUS
 *    reply, or null>, "error": <why it is not healthy, when it is not>, "log" (directory view
 *    only)}, ...], ...}
 * A field a view does not have is absent, and the table shows "-" for it.
 */
#ifndef RL_APP_CLUSTER_STATUS_H
#define RL_APP_CLUSTER_STATUS_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

/* rl__cluster_status_print — print st (the shape above; borrowed) as the table of `rl cluster
 * status`: a header line naming the cluster, then one line per process (role, id, host, address,
 * delay, pid, alive, health, and its versions and shards from its STATUS; why it is down, and its
 * log when known). Missing fields print as "-". Never fails; prints what it can of a partial st. */
void rl__cluster_status_print(FILE *f, json_t *st);

/* rl__cluster_status_from_client — the shape above from the client's view: db_status is the
 * parsed rl_db_status_json of a cluster: database (borrowed; {"cluster_file", "coordinator",
 * "read_version", "keys", "client", "cluster": <coordinator STATUS>, "storage": [<STATUS>...],
 * "errors"}). The processes are the coordinator and every storage server of the client's shard
 * map (and any other the coordinator lists), each with its STATUS when it answered. A storage
 * server is healthy when it answered and the coordinator lists it as registered and healthy.
 * "read_version", "keys", "errors" and "client" are copied over. *out is the caller's
 * (json_decref). Returns RL_OK when every process is healthy, RL_E_SERVER_UNAVAILABLE when one is
 * not (*out still filled), RL_E_INVALID_ARGUMENT when db_status is not a cluster's status (*out
 * NULL), RL_E_OUT_OF_MEMORY. */
int rl__cluster_status_from_client(json_t *db_status, json_t **out);

/* rl__cluster_coord_lists_healthy — 1 when the coordinator's STATUS reply coord_status (borrowed)
 * lists storage server id as registered and healthy, else 0. Pure. */
int rl__cluster_coord_lists_healthy(json_t *coord_status, uint32_t id);

#endif
