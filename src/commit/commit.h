/* commit.h (internal) — the commit path: sequencer, resolver and the committer that batches
 * transactions, resolves them, stamps versionstamps and hands their mutations to a log sink.
 *
 * Versions (docs/design.md §2): one sequencer issues them, about 1,000,000 per second of wall
 * time (version = max(last + 1, base + elapsed microseconds)), so "5 seconds" is a version
 * distance. Versions must advance with time whether or not anything commits, or a read version
 * handed out after an idle spell is already older than the window at the next commit: the
 * embedded backend reserves its read versions from the sequencer
 * (rl__committer_fresh_read_version), the coordinator commits an empty batch (a tick request,
 * rl__commit_request.is_tick) whenever none became durable for a while (docs/design.md §5).
 *
 * Resolution (serializable optimistic concurrency): a transaction commits only if none of its
 * read conflict ranges intersects a write conflict range committed at a version greater than its
 * read version. Inside one batch, transactions are resolved in order and a committed
 * transaction's writes conflict with the later transactions of the same batch. A read version
 * older than the resolver's window gives RL_E_TRANSACTION_TOO_OLD.
 *
 * Versionstamps: every transaction of a batch shares the batch's commit version and gets its own
 * 2-byte order (its index in the batch); its versionstamp is the 8-byte big-endian version then
 * the 2-byte big-endian order.
 */
#ifndef RL_COMMIT_COMMIT_H
#define RL_COMMIT_COMMIT_H

#include <pthread.h>

#include "storage/storage.h"

/* ---- Sequencer -------------------------------------------------------------------------- */

/* A monotonic clock in nanoseconds (never goes backwards), for the sequencer. ud is the
 * installer's. The default, when none is installed, is rl__clock_mono_ns. Tests install one
 * they advance by hand, so version distances ("5 seconds" of MVCC window) need no sleeping. */
typedef uint64_t (*rl_seq_clock_fn)(void *ud);

typedef struct {
    rl__version last;      /* last version issued */
    rl__version base;      /* version at base_mono_ns */
    uint64_t base_mono_ns; /* clock reading when base was taken */
    rl_seq_clock_fn clock; /* NULL: rl__clock_mono_ns (the real clock, no indirection) */
    void *clock_ud;
} rl__sequencer;

/* Start after `recovered` (the last version known durable), on the real clock. */
void rl__sequencer_init(rl__sequencer *s, rl__version recovered);
/* The next commit version: > every version issued or reserved before. Not thread-safe (callers
 * lock). */
rl__version rl__sequencer_next(rl__sequencer *s);
/* rl__sequencer_reserve — a read version that follows the clock: max(last, base + elapsed
 * microseconds), which becomes the last version, so every later rl__sequencer_next is greater.
 * Consumes nothing: calls within one microsecond share the version. Not thread-safe (callers
 * lock, as for rl__sequencer_next). */
rl__version rl__sequencer_reserve(rl__sequencer *s);
/* rl__sequencer_set_clock — read time from fn(ud) from now on (fn NULL: the real clock again).
 * Versions keep increasing across the switch: the next one is > every version issued, and later
 * ones advance by the new clock's microseconds. Not thread-safe (as rl__sequencer_next). */
void rl__sequencer_set_clock(rl__sequencer *s, rl_seq_clock_fn fn, void *ud);

/* ---- Resolver --------------------------------------------------------------------------- */

typedef struct rl__resolver rl__resolver;

/* window_versions: how far back writes are remembered (0 = 5,000,000). */
int rl__resolver_new(uint64_t window_versions, rl__resolver **out);
void rl__resolver_free(rl__resolver *r);
/* RL_OK if no read range intersects a write newer than read_version; RL_E_NOT_COMMITTED if one
 * does; RL_E_TRANSACTION_TOO_OLD if read_version < rl__resolver_oldest and n > 0 (as in
 * FoundationDB, a transaction without read ranges is never too old). Empty ranges (begin >= end)
 * never conflict. Reads are borrowed for the call. */
int rl__resolver_check(rl__resolver *r, rl__version read_version, const rl__keyrange *reads, size_t n);
/* Remember writes committed at version v (v >= every version added before). Forgets writes that
 * fell out of the window. RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__resolver_add(rl__resolver *r, rl__version v, const rl__keyrange *writes, size_t n);
/* The oldest read version the resolver can still check: max(floor, newest - window). */
rl__version rl__resolver_oldest(const rl__resolver *r);
/* Reads below v are too old from now on, whatever the window: the resolver knows nothing
 * committed before v (the committer sets it to the recovered version). Never lowers the floor. */
void rl__resolver_set_floor(rl__resolver *r, rl__version v);
/* Boundaries currently held (memory use; tests check that old writes are forgotten). */
size_t rl__resolver_size(const rl__resolver *r);

/* ---- Committer -------------------------------------------------------------------------- */

/* Where committed mutations go: apply one version's mutations (already versionstamp-resolved),
 * then make everything applied durable. Embedded: the storage engine; cluster: the log. */
typedef struct {
    void *ctx;
    int (*apply)(void *ctx, rl__version v, const rl__mutation *muts, size_t n);
    int (*sync)(void *ctx);
} rl__log_sink;

/* One transaction submitted for commit. Inputs are borrowed until rl__committer_commit returns. */
typedef struct {
    rl__version read_version;
    const rl__keyrange *reads;
    size_t n_reads;
    const rl__keyrange *writes;
    size_t n_writes;
    const rl__mutation *muts; /* may contain SET_VERSIONSTAMPED_KEY / _VALUE */
    size_t n_muts;
    int is_tick; /* 1: a version tick — commit with a version even with no mutations, reads or
                  * write ranges (otherwise such a request is read-only and gets none): its batch
                  * reaches the sink, which logs and syncs it (an empty batch), so versions and
                  * the durable version advance while nothing else commits. Its read_version
                  * should be 0 (never too old, never a future version). */
    /* Results. */
    int result;                 /* RL_OK, RL_E_NOT_COMMITTED, RL_E_TRANSACTION_TOO_OLD, … (the
                               * full list is in the header of committer.c) */
    rl__version commit_version; /* the batch version; 0 if read-only or not committed */
    uint16_t batch_order;       /* index of the request in its batch */
} rl__commit_request;

typedef struct rl__committer rl__committer;

typedef struct {
    uint64_t window_versions; /* 0 = 5,000,000 */
    int max_batch;            /* transactions per batch; 0 = 256 */
} rl__committer_options;

/* Create a committer over a sink; `recovered` is the sink's last durable version. */
int rl__committer_new(const rl__committer_options *o, rl__log_sink sink, rl__version recovered, rl__committer **out);
/* Free the committer: stops and joins its thread (rl__committer_submit started it) after the
 * thread has completed every request still queued. No rl__committer_commit or submit may be in
 * progress or follow. NULL is a no-op. */
void rl__committer_free(rl__committer *c);
/* Commit one transaction, blocking until its batch is durable (or failed). Concurrent callers
 * are batched together (group commit: one version, one sync per batch). Returns req->result. A
 * read-only request (no mutations and no write ranges, not a tick) commits at once without a
 * version (RL_OK, commit_version 0), as in FoundationDB. A read version newer than any version
 * handed out as a read version (rl__committer_read_ceiling) gives RL_E_FUTURE_VERSION. A sink
 * failure gives the batch's requests RL_E_COMMIT_UNKNOWN_RESULT (the log may or may not hold
 * them) and poisons the committer: every later commit fails with the sink's own error
 * (RL_E_IO_ERROR, RL_E_NO_SPACE, RL_E_OUT_OF_MEMORY …). */
int rl__committer_commit(rl__committer *c, rl__commit_request *req);
/* Called when a request given to rl__committer_submit is done: req->result (and, on RL_OK,
 * commit_version and batch_order) is set. Runs on the committer's thread; it must not call
 * rl__committer_commit, rl__committer_submit or rl__committer_free (it may hand the request to
 * another thread, e.g. with rl__loop_post). ud is the submitter's. */
typedef void (*rl_commit_done_fn)(rl__commit_request *req, void *ud);

/* rl__committer_submit — queue req for commit and return at once (the asynchronous form of
 * rl__committer_commit, for servers that must not block their event loop).
 * The first call starts the committer's own thread ("rl-committer"); from then on that thread
 * leads every batch (blocking rl__committer_commit callers queue behind it and wait), taking
 * everything queued, up to max_batch requests (and the batch byte limit, below), per batch — the
 * longer the sink's sync takes, the larger the next batch. done(req, ud) is called exactly once,
 * on that thread, after the batch holding req is durable or failed; a read-only request (no
 * mutations, no write ranges) is done without a batch (RL_OK, commit_version 0), and a poisoned
 * committer completes requests with its sink's error, as rl__committer_commit does.
 * [in] req  borrowed, with everything it points to, until done has been called; its result
 *           fields are written by the committer.
 * Returns RL_OK, RL_E_INVALID_ARGUMENT (NULL c, req or done), RL_E_OUT_OF_MEMORY, or
 * RL_E_OPERATION_FAILED (the thread could not be started); on an error done is never called.
 * [any thread] */
int rl__committer_submit(rl__committer *c, rl__commit_request *req, rl_commit_done_fn done, void *ud);

/* rl__committer_set_clock — the sequencer of c reads fn(ud) instead of the monotonic clock (NULL:
 * the real one again; rl__sequencer_set_clock). For tests. Call it while no commit is in progress
 * on c (before the first, or between commits of one thread); fn is called by whichever thread
 * leads a batch or reserves a read version (rl__committer_fresh_read_version) and must stay
 * callable until rl__committer_free or the next call. */
void rl__committer_set_clock(rl__committer *c, rl_seq_clock_fn fn, void *ud);
/* rl__committer_set_max_batch_bytes — bound a batch's mutation bytes (every mutation's len1 +
 * len2 + 9, its size in a log record of storage/wal.h): a batch takes queued requests while their
 * sum stays <= bytes (but always at least one request). 0, the default, means no bound. A server
 * sets it so that one version's mutations fit a log record and a PEEK reply. Call before the
 * first commit. */
void rl__committer_set_max_batch_bytes(rl__committer *c, uint64_t bytes);

/* The newest version whose batch is durable: the read version the coordinator hands to new
 * transactions (its storage servers learn versions only from the log, so it must never hand out
 * a version that is not logged). [any thread] */
rl__version rl__committer_read_version(rl__committer *c);
/* rl__committer_fresh_read_version — a read version that follows the clock, for a committer
 * whose sink is read in-process (the embedded backend's opt-in; never the coordinator's). With
 * no batch running or queued and the committer not poisoned it reserves one from the sequencer
 * (rl__sequencer_reserve, under the mutex this call takes anyway: one clock reading more than
 * rl__committer_read_version): every later batch gets a greater version, so the snapshot at it
 * equals the snapshot at the newest durable batch and is final, and it is never older than the
 * window at the next commit however long nothing committed. Otherwise it returns the newest
 * version handed out so far (>= the newest durable batch). Readers of the sink must serve a
 * version v <= rl__committer_read_ceiling at min(v, what the sink holds). [any thread] */
rl__version rl__committer_fresh_read_version(rl__committer *c);
/* rl__committer_read_ceiling — the newest version handed out as a read version (reserved or
 * durable; >= rl__committer_read_version): no batch will ever get a version at or below it that
 * the sink does not hold already. Lock-free (an atomic load), so a reader may call it on every
 * read of a version the sink does not hold yet. [any thread] */
rl__version rl__committer_read_ceiling(rl__committer *c);
/* The oldest read version the resolver still checks. */
rl__version rl__committer_oldest_version(rl__committer *c);

/* Counters of a committer (a consistent snapshot taken under its lock). */
typedef struct {
    uint64_t batches;   /* batches that reached the sink (one apply + one sync each) */
    uint64_t committed; /* requests committed with a version */
    uint64_t conflicts; /* requests failed with RL_E_NOT_COMMITTED */
    uint64_t ticks;     /* tick requests committed (rl__commit_request.is_tick; not in committed) */
    uint64_t queued;    /* requests waiting for a batch right now (not the running batch) */
    int poisoned;       /* 1 once a sink call failed */
} rl__committer_stats;

void rl__committer_get_stats(rl__committer *c, rl__committer_stats *out);

/* Substitute a versionstamp (10 bytes: version BE, order BE) into a SET_VERSIONSTAMPED_KEY or
 * _VALUE parameter whose last 4 bytes are the little-endian offset; result appended to out.
 * RL_E_CLIENT_INVALID_OPERATION if the offset does not fit. */
int rl__versionstamp_substitute(const uint8_t *param, size_t len, rl__version v, uint16_t order, rl_buf *out);

#endif
