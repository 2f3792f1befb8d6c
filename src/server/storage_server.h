/* storage_server.h (internal) — the storage server role of rlkvd (`rlkvd storage`):
 * holds shards in its own durable engine, pulls their mutations from the coordinator's log
 * (PEEK / POP), serves reads at a version and mapped reads whose secondaries may live on other
 * storage servers (storage-to-storage GET_MULTI). docs/design.md §8.4 describes the
 * design; docs/protocol.md §9 the messages it answers. rl__ss_new, rl__ss_run and rl__ss_free are
 * ss_life.c's, the rest storage_server.c's; the role's files and how they depend on each other
 * are described in ss_int.h.
 *
 * Life cycle:
 *   rl__ss_new   open (recover) the engine in DIR, bind the listener (the port is known on
 *                return), start the worker, sync and nothing else: no connection is made yet.
 *   rl__ss_run   run the event loop on the calling thread: connect to the coordinator (HELLO,
 *                REGISTER_STORAGE, GET_SHARD_MAP, the PEEK loop; reconnecting with backoff),
 *                accept clients and peers, until rl__ss_stop or a fatal error.
 *   rl__ss_stop  ask rl__ss_run to return (any thread; not async-signal-safe: call it from a
 *                thread that waited for the signal).
 *   rl__ss_free  join the threads, close everything, close the engine.
 *
 * Threads: the loop thread (the caller of rl__ss_run) owns every connection and all replication
 * state; a pool of worker threads runs mapped reads (which may wait for other storage servers);
 * one sync thread makes the engine durable (rl__storage_sync) in the background. Functions are
 * [owner] (the thread that created the server, while rl__ss_run is not running) unless tagged
 * [any].
 *
 * Errors are rl error codes (include/reclayer/error.h), never errno; a message goes to err
 * where one is taken, and to the log (stderr).
 */
#ifndef RL_SERVER_STORAGE_SERVER_H
#define RL_SERVER_STORAGE_SERVER_H

#include <stdint.h>

#include "base/buf.h"
#include "base/errdetail.h"
#include "net/loop.h"
#include "server/ss_options.h"

typedef struct rl__ss rl__ss;

/* rl__ss_options: server/ss_options.h. */

/* rl__ss_new — create a storage server: open the engine in o->dir (recovering it), bind the
 * listener, start the threads.
 * [in] o       the options (borrowed for the call).
 * [out] out    the server, owned by the caller (rl__ss_free); untouched on error.
 * [out] err may be NULL; on failure a message naming what failed is appended.
 * Returns RL_OK, RL_E_INVALID_ARGUMENT (a missing or bad option, no member key), the engine's open errors
 * (RL_E_DATABASE_LOCKED_BY_PROCESS, RL_E_LOG_CORRUPT, …), the listener's (RL_E_ADDRESS_IN_USE,
 * RL_E_BIND_FAILED), RL_E_IO_ERROR (the directory cannot be created), RL_E_OUT_OF_MEMORY. */
int rl__ss_new(const rl__ss_options *o, rl__ss **out, rl__errdetail *err);

/* rl__ss_port — the bound listening port. [any] */
uint16_t rl__ss_port(const rl__ss *ss);

/* rl__ss_run — serve until rl__ss_stop (returns RL_OK) or a fatal error: the engine failed to
 * apply or sync (RL_E_IO_ERROR, RL_E_NO_SPACE, … — the server must not go on acknowledging), or
 * the loop failed. Call once. */
int rl__ss_run(rl__ss *ss);

/* rl__ss_fatal_what — after rl__ss_run returned a fatal error: what the server was doing when it
 * failed ("syncing the engine", "applying version 42", …; "" if not known), for the record of
 * src/server/fatal.h. Valid until rl__ss_free. [owner] */
const char *rl__ss_fatal_what(const rl__ss *ss);

/* rl__ss_stop — make rl__ss_run return soon. [any] */
void rl__ss_stop(rl__ss *ss);

/* rl__ss_free — stop the threads, close every connection and the engine, free (NULL is a
 * no-op). Not while rl__ss_run runs. */
void rl__ss_free(rl__ss *ss);

/* Counters and versions (for tests; STATUS reports the same). [any] */
typedef struct {
    uint64_t applied_version; /* newest version applied to the engine */
    uint64_t known_version;   /* every mutation of its shards up to here is applied */
    uint64_t durable_version; /* newest version the engine has synced */
    uint64_t popped_version;  /* newest POP sent */
    uint64_t reads, mapped_reads, secondaries_local, secondaries_remote, s2s_requests, s2s_round_trips, peeks,
        parked_reads, future_version_errors;
    int registered;         /* 1 while registered with the coordinator */
    uint64_t registrations; /* successful REGISTER_STORAGE replies since start */
    /* Tracing: reads served by type, GET_MULTI requests (and their items) served for peers,
     * storage-to-storage bytes of this server's mapped reads (frames with headers); gauges:
     * mapped reads waiting for a worker, being run, reads parked now. */
    uint64_t gets, get_keys, get_ranges, get_multi_served, get_multi_items_served;
    uint64_t s2s_bytes_sent, s2s_bytes_received;
    int64_t mapped_queued, mapped_running, parked_now;
} rl__ss_stats;
void rl__ss_get_stats(rl__ss *ss, rl__ss_stats *out);

#endif
