/* placement_store.h (internal) — `rl placement place` and `show` over a record store (the
 * library part of tools/rl/cmd_placement.c, and what the campaign's placed topologies use): the
 * record layer names the store's record and index ranges (app/tool.h), src/app/placement.h
 * moves shards and computes the fractions and the receipt. docs/design.md §8.6 (rl placement).
 * Both block their caller; errors are codes of reclayer/error.h with a reason appended to err.
 */
#ifndef RL_APP_PLACEMENT_STORE_H
#define RL_APP_PLACEMENT_STORE_H

#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "app/tool.h"
#include "base/errdetail.h"

/* rl__tool_placement_show — rl placement show: read the shard map, the server list and the entries of `index` of the
 * store at one read version and build {"receipt": rl__pl_receipt(...), "read_version": V} into
 * *out (the caller's, json_decref). w (NULL: none): the transactions' timeout and wait report
 * (rl__tool_open_with). Errors with a reason in err. */
int rl__tool_placement_show(const char *url, const char *store, const char *index, const rl__tool_wait *w, json_t **out,
                            rl__errdetail *err);
/* rl__tool_placement_place — rl placement place: move the index's entries to index_team, then the store's records, split
 * evenly by record into n_rec_teams contiguous ranges, range j to rec_teams[j] (each move waits
 * until done, timeout_ms each). key_file: the cluster's key file, or NULL for the one beside the
 * cluster file (rl__placement_assign). w (NULL: none): the transactions' timeout and wait report
 * (rl__tool_open_with). Errors with a reason in err. */
int rl__tool_placement_place(const char *url, const char *key_file, const char *store, const char *index,
                             const uint32_t *index_team, uint32_t n_index_team, const uint32_t *const *rec_teams,
                             const uint32_t *n_rec_team, uint32_t n_rec_teams, int timeout_ms, const rl__tool_wait *w,
                             rl__errdetail *err);

/* rl__tool_placement_place_runs — rl__tool_placement_place with each record's team chosen by the
 * caller: team_of[i] (an index into rec_teams) for the i-th record in key order, n_team_of the
 * number of records (it must be the store's); consecutive records of one team make one range.
 * team_of NULL: the even split of rl__tool_placement_place. Errors as there, and
 * RL_E_INVALID_ARGUMENT when n_team_of is not the store's count or a team index is out of range. */
int rl__tool_placement_place_runs(const char *url, const char *key_file, const char *store, const char *index,
                                  const uint32_t *index_team, uint32_t n_index_team, const uint32_t *const *rec_teams,
                                  const uint32_t *n_rec_team, uint32_t n_rec_teams, const uint32_t *team_of,
                                  size_t n_team_of, int timeout_ms, const rl__tool_wait *w, rl__errdetail *err);

#endif
