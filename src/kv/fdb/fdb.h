/* fdb.h (internal) — the fdb: backend: reclayer's transaction layer over a FoundationDB cluster,
 * through FoundationDB's client library loaded at run time (fdb_client.c) and the backend
 * interface of kv/backend.h (fdb_backend.c). docs/design.md §8.8 describes the design.
 */
#ifndef RL_KV_FDB_H
#define RL_KV_FDB_H

#include "base/errdetail.h"
#include "kv/backend.h"

/* Open "fdb:FILE": load the client library (RL_FDB_LIBRARY, default "libfdb_c.so") and start its
 * network thread if this is the process's first fdb: database, then create the FoundationDB
 * database of cluster file FILE (NULL or "": FoundationDB's default cluster file). opts: only
 * read_only is honoured (the other options describe embedded engines). On failure a message is
 * appended to err. Errors: RL_E_FILE_NOT_FOUND (no client library: the message names what to
 * install), RL_E_UNSUPPORTED_OPERATION (a library older than API version 710, or one that lacks a
 * needed function), FoundationDB's own codes from selecting the API version, setting up the
 * network or creating the database, RL_E_OUT_OF_MEMORY. */
int rl__kv_fdb_open(const char *cluster_file, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err);

/* rl__kv_fdb_load — load FoundationDB's client library and start its network as the first fdb:
 * open does, without opening a database: can this process use fdb: at all (`rlbench campaign`'s
 * fdb topology asks). RL_OK, or the loader's error (as rl__kv_fdb_open's) with its message, which
 * names what to install, appended to err. Thread-safe. */
int rl__kv_fdb_load(rl__errdetail *err);

#endif
