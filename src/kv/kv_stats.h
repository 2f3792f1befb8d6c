/* kv_stats.h (internal) — what the layers above the transaction layer may read of a read's
 * network figures (and, for the ADAPTIVE fetch method, a database's locality figures and one
 * per-database slot): the backend's counters of a completed read (rl__kv_read_stats, summed over the
 * read's requests) and, when the transaction is traced, the events of its requests. The query
 * cursor uses it for its tracing counters (rl_query_counters) and its timeline
 * (rl_cursor_get_trace); nothing here changes a read's result.
 *
 * Threads: the figures are written by the backend's thread before the future becomes ready, so
 * they may be read by whoever waited for it (rl_future_wait, rl_future_is_ready returning 1),
 * never before.
 */
#ifndef RL_KV_KV_STATS_H
#define RL_KV_KV_STATS_H

#include "kv/backend.h"
#include "reclayer/kv.h"

/* rl__txn_db — the database of t (borrowed: it outlives t). */
rl_db *rl__txn_db(const rl_txn *t);

/* rl__txn_rv_wait — when t asked for its read version and when it arrived, in rl__clock_mono_ns()
 * time (asked 0: t did not wait for one since its last reset — it was set, or the backend is
 * synchronous (embedded), where the version is known at once; ready 0: not arrived yet). The
 * ADAPTIVE fetch method subtracts the part of that wait that falls inside a page's time: both
 * methods pay it. Thread-safe, never blocks; the figures may change under a concurrent reset. */
void rl__txn_rv_wait(rl_txn *t, uint64_t *out_asked_ns, uint64_t *out_ready_ns);

/* rl__txn_wrote — 1 if t holds any write (a mutation or a write-map entry) since its last reset.
 * Thread-safe (t's lock). The query cursor consumes a mapped page's entries before the page
 * completes only while it is 0: a page's get_mapped_range_reads_your_writes check (2039) is made at
 * its completion against the writes made by then, as FoundationDB's is. */
int rl__txn_wrote(rl_txn *t);

/* rl__db_slot — the upper layers' one per-database slot (the query layer keeps the ADAPTIVE
 * method's model there): size bytes, zeroed, passed to init (may be NULL) the first time it is
 * asked for, and to fini (may be NULL) then freed by rl_db_close. Later calls return the same
 * memory whatever their arguments (there is one slot: one user). Thread-safe; the slot's own
 * contents are the caller's to guard. NULL on out of memory (a later call tries again). */
void *rl__db_slot(rl_db *db, size_t size, void (*init)(void *p), void (*fini)(void *p));

/* rl__db_locality — where a read of key[0..key_len) goes and the round trip the client measured
 * to those servers (backend.h: rl__kv_locality); all zero for a local backend (embedded: RTT 0,
 * everything on one server). Thread-safe; never blocks on the network. */
void rl__db_locality(rl_db *db, const uint8_t *key, size_t key_len, rl__kv_locality *out);

/* rl__future_read_stats — the counters of the ready read future f (all zero for a future that
 * is not a read, failed before its first request, or is not ready). Borrowed from f: valid until
 * rl_future_free(f). */
const rl__kv_read_stats *rl__future_read_stats(const rl_future *f);

/* rl__future_trace — the first of f's request events, oldest first (follow ->next), or NULL
 * (not traced, or no request). Borrowed from f's arena: valid until rl_future_free(f). Only for
 * a ready future. */
const rl__kv_trace_event *rl__future_trace(const rl_future *f);

/* rl__future_mapped_wait — wait until the mapped read f is ready (returns 1: take its result as
 * usual) or more than `have` of its entries are final before it completes (returns 0, *out and
 * *out_n: n > have entries, borrowed from f's arena until rl_future_free(f)): they are the first n
 * of the result f will hold if it succeeds — it may still fail, after them. Only a streamed read
 * of the cluster backend publishes entries early; for the others this is rl_future_wait. Waits
 * as long as rl_future_wait (the read's own deadline ends it). */
int rl__future_mapped_wait(rl_future *f, int have, const rl_mapped_keyvalue **out, int *out_n);

/* rl__kv_trace_type_name — the short name of a trace event's request type ("get", "get_key",
 * "get_range", "get_mapped_range", "get_read_version", else "other"): static text. */
const char *rl__kv_trace_type_name(uint16_t type);

/* rl__txn_trace — start (delta 1) or stop (delta -1) wanting per-request events of t's reads;
 * reads issued while at least one tracer is on record them (the others cost nothing). Calls must
 * pair; thread-safe. */
void rl__txn_trace(rl_txn *t, int delta);

#endif
