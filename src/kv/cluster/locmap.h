/* locmap.h (internal) — the cluster client's location cache: one immutable snapshot of the
 * coordinator's shard map (GET_SHARD_MAP: the process list and the shards with their teams),
 * searched by key to find which process serves a read.
 *
 * Invariants of a snapshot (rl__locmap_new checks them and refuses a map that breaks one):
 *   1. Shards are sorted, non-empty and contiguous (each begin is the previous end), the first
 *      begins at "" and the last ends at "\xff\xff" (the system shard, held by the coordinator),
 *      so every key below "\xff\xff" has exactly one shard.
 *   2. Servers are sorted by id (strictly increasing); every team member is an index into the
 *      server list, or -1 when the map names an id the list does not hold (a refresh is needed
 *      before such a member can be used).
 *   3. A snapshot never changes after rl__locmap_new; every byte it points to lives in its own
 *      arena (nothing is borrowed from the reply it was built from).
 *
 * Lifetimes and threads: a snapshot is reference counted (rl__locmap_ref / _unref, atomic), so
 * the backend can swap in a newer one while other threads still route with the old one. Lookups
 * are pure functions of the snapshot: any thread, no locks.
 */
#ifndef RL_KV_CLUSTER_LOCMAP_H
#define RL_KV_CLUSTER_LOCMAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "net/proto.h"

/* One process of the map. */
typedef struct {
    uint32_t id;      /* 0: the coordinator; 1..N: storage servers */
    uint8_t role;     /* RL_ROLE_COORDINATOR or RL_ROLE_STORAGE */
    char address[16]; /* dotted IPv4, NUL-terminated */
    uint16_t port;
    const char *host; /* host label, NUL-terminated, in the snapshot's arena */
    int healthy;      /* the coordinator's view when the map was fetched */
} rl__loc_server;

/* One shard [begin, end) and the servers that hold it. */
typedef struct {
    const uint8_t *begin; /* in the snapshot's arena */
    uint32_t begin_len;
    const uint8_t *end;
    uint32_t end_len;
    uint32_t n_team; /* 1..RL_PROTO_MAX_TEAM */
    uint32_t team_id[RL_PROTO_MAX_TEAM];
    int team_idx[RL_PROTO_MAX_TEAM]; /* index into servers, or -1 (invariant 2) */
} rl__loc_shard;

typedef struct rl__locmap {
    int refs;            /* atomic */
    rl__version version; /* the map's version (GET_SHARD_MAP reply) */
    rl_arena arena;      /* everything below */
    rl__loc_server *servers;
    uint32_t n_servers;
    rl__loc_shard *shards;
    uint32_t n_shards;
    uint32_t delay_us; /* the cluster's injected delay (GET_SHARD_MAP reply; set by the client,
                            not by rl__locmap_new) */
    uint32_t jitter_us;
} rl__locmap;

/* rl__locmap_new — build a snapshot from a decoded GET_SHARD_MAP reply (copied: m may be freed
 * afterwards). [out] out: the snapshot with one reference (rl__locmap_unref). On failure a
 * message naming what is wrong is appended to err (may be NULL). Returns RL_OK,
 * RL_E_MALFORMED_FRAME (a map breaking invariant 1, or a server address that is not loopback
 * IPv4) or RL_E_OUT_OF_MEMORY. Pure. */
int rl__locmap_new(const rl__msg_get_shard_map_reply *m, rl__locmap **out, rl__errdetail *err);

/* Take / drop a reference (atomic; any thread). The last drop frees the snapshot. NULL is a
 * no-op. */
void rl__locmap_ref(rl__locmap *m);
void rl__locmap_unref(rl__locmap *m);

/* rl__locmap_find — the shard serving a read routed by key.
 * backward 0: the shard with begin <= key < end (a point read, a forward selector's anchor).
 * backward 1: the shard holding the keys just below key, begin < key <= end (a reverse range's
 * end, a backward selector's anchor); the empty key has nothing below it and maps to the first
 * shard. Returns the shard's index, or -1 when no shard holds the key (key >= "\xff\xff"). */
int rl__locmap_find(const rl__locmap *m, const uint8_t *key, uint32_t key_len, int backward);

/* rl__locmap_pick — which team member of shard s serves the next attempt: scanning the team from
 * position (salt % n_team), the first member that is known and healthy, else the first that is
 * known. Returns an index into m->servers, or -1 when no member is in the server list (the map
 * must be refreshed). */
int rl__locmap_pick(const rl__locmap *m, const rl__loc_shard *s, uint32_t salt);

/* rl__locmap_pick_avoid — rl__locmap_pick that also steers clear of the servers the caller has
 * just seen fail (avoid[0..n_avoid): server ids; NULL / 0: none). Scanning the team from
 * position (salt % n_team), the first member that is known, healthy and not avoided; else the
 * first known and not avoided; else the first known and healthy; else the first known — so a
 * team keeps being served while any member works, and a team whose members all failed still
 * gets an attempt (on the best of them). Returns an index into m->servers or -1 (no member is in
 * the server list). Pure. */
int rl__locmap_pick_avoid(const rl__locmap *m, const rl__loc_shard *s, uint32_t salt, const uint32_t *avoid,
                          int n_avoid);

/* rl__locmap_server — the index of server id in m->servers, or -1. */
int rl__locmap_server(const rl__locmap *m, uint32_t id);

#endif
