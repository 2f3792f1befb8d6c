/* tool.h — the record commands of `rl` and `rlbench` (tool.c): open a database with the benchmark's
 * Order metadata and store, load Orders, print records as JSON. The Order schema (proto/order.proto)
 * is the benchmark's, not part of the public API, so its metadata is built here
 * (rl__order_metadata, order.c).
 */
#ifndef RL_APP_TOOL_H
#define RL_APP_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include "app/args.h"
#include "base/buf.h"
#include "base/errdetail.h"
#include "reclayer/record.h"

/* rl__order_metadata — the benchmark's metadata, built: type reclayer.Order (proto/order.proto)
 * with primary key order_id and the VALUE index price_idx on price; version 1. *out is the
 * caller's (rl_metadata_free). RL_OK or RL_E_OUT_OF_MEMORY. */
int rl__order_metadata(rl_metadata **out);

#define RL__TOOL_DEFAULT_STORE "[\"bench\",\"orders\"]"

/* ---- Which database (docs/design.md §8.9, "The database of a command") ----
 * Every rl command that opens a database finds it as fdbcli finds its cluster file: --db URL
 * when given, else the environment variable RL_DB, else the cluster file ./reclayer.cluster when
 * the current directory holds one (cluster:<its absolute path>), else none: a usage error
 * naming the three ways (exit 2). mem: is never a default: chosen explicitly, a note on stderr
 * says its data is discarded at exit. */
#define RL__TOOL_DB_ENV "RL_DB"
#define RL__TOOL_DB_CLUSTER_FILE "reclayer.cluster"
#define RL__TOOL_DB_URL_MAX 4200 /* "cluster:" + a path of up to PATH_MAX */

/* The --db option (rl__arg of app/args.h; ptr: the const char ** the parser fills, NULL when not
 * given) with help text what (e.g. "the database: mem:, file:DIR, cluster:FILE or fdb:FILE"),
 * which the defaults are appended to; one definition so every command says the same. */
#define RL__TOOL_OPT_DB_HELP(ptr, what)                                                                   \
    {                                                                                                     \
        .name = "db", .kind = RL_ARG_STRING, .dest = (ptr), .metavar = "URL", .flags = RL_ARG_NO_DEFAULT, \
        .help = what "; default: the RL_DB environment variable, else cluster:./reclayer.cluster when "   \
                     "the current directory holds that cluster file"                                      \
    }
#define RL__TOOL_OPT_DB(ptr) RL__TOOL_OPT_DB_HELP(ptr, "the database: mem:, file:DIR, cluster:FILE or fdb:FILE")

/* The database a command found (rl__tool_db_find). Caller-owned; nothing to release. */
typedef struct {
    const char *url;               /* the URL to open: --db's or RL_DB's value (borrowed from argv or
                                   * the environment), or buf */
    const char *source;            /* how it was found: "--db", "RL_DB" or "./reclayer.cluster" (static) */
    int is_mem;                    /* 1: a mem: database, whose data is discarded at exit */
    char buf[RL__TOOL_DB_URL_MAX]; /* "cluster:" + the absolute path of ./reclayer.cluster */
} rl__tool_db;

/* rl__tool_db_find — find the database (above): given is --db's value (NULL: not given;
 * borrowed, and so is RL_DB's value: out->url may point at either). Fills *out. Returns RL_OK, or
 * RL_E_USAGE with msg (reset first) saying why: there is none (the message names the three
 * ways), or the current directory's path is too long for out->buf. Reads the environment and the
 * current directory; changes nothing. */
int rl__tool_db_find(const char *given, rl__tool_db *out, rl_buf *msg);

/* rl__tool_db_choose — rl__tool_db_find for command cmd (its name prefixes the messages): on
 * RL_E_USAGE prints the usage error (rl__args_usage_error) and returns 1 with *out_code
 * RL_ARGS_USAGE (2); otherwise prints, for a mem: database, one note on stderr ("NAME: note:
 * mem: is an empty in-memory database; what this command writes is discarded at exit") and
 * returns 0 (go on with out->url). */
int rl__tool_db_choose(const rl__args_cmd *cmd, const char *given, rl__tool_db *out, int *out_code);

/* The --store option of the record commands (ptr: the const char ** the parser fills). */
#define RL__TOOL_OPT_STORE(ptr)                                                                                 \
    {                                                                                                           \
        .name = "store", .kind = RL_ARG_STRING, .dest = (ptr), .metavar = "PREFIX", .flags = RL_ARG_NO_DEFAULT, \
        .help = "the store's prefix, a JSON array (default '" RL__TOOL_DEFAULT_STORE "')"                       \
    }

/* The limits of `rl load` (rlbench query uses the padding limit too).
 * RL__TOOL_COUNT_MAX: --count, order_ids 1..N; 100 million Orders of ~60 bytes are ~6 GB of
 * records plus the index, about what the embedded memory engine can hold on a large machine.
 * RL__TOOL_PADDING_MAX: --padding. One Order is saved in one transaction, and everything it
 * writes must fit RL_TXN_SIZE_LIMIT (10,000,000 bytes, as counted by rl_txn: each chunk of
 * RL_RECORD_SPLIT_SIZE bytes with 3x its key, the record's clear range, its version key, the
 * index entry, the record count and the read conflict range of the old record). Measured with
 * the default store, order_id 100,000,000 (the longest key --count allows) and price 999 (the
 * longest index entry), the largest padding that fits is 9,992,269 bytes for a new record and
 * 9,992,220 when it replaces one; the maximum is that rounded down to 9,990,000, so a change of
 * a few bytes in the accounting does not move it (test cli_1_2 saves both cases at the
 * maximum). A longer --store prefix lengthens every key and lowers the real limit; rl load then
 * reports transaction_too_large naming the padding. */
#define RL__TOOL_COUNT_MAX 100000000
#define RL__TOOL_PADDING_MAX 9990000

/* ---- Waiting for servers (docs/design.md §8.5, "Waiting for a server") ----
 * The rl commands that open a database report on stderr, after RL__TOOL_REPORT_MS, what a
 * request waits for (cluster: databases: the server's role, id, address and host, the request
 * type, since when, why), again every RL__TOOL_REPORT_MS while it waits, and give up once a
 * transaction has run --timeout seconds (default RL__TOOL_DEFAULT_TIMEOUT_S; 0: never) with
 * FoundationDB's transaction_timed_out (1031), printed with its code and name (exit 1). */
#define RL__TOOL_DEFAULT_TIMEOUT_S 30
#define RL__TOOL_REPORT_MS 3000

typedef struct {
    const char *prog;   /* the reports' prefix, e.g. "rl load" (borrowed) */
    int64_t timeout_ms; /* every transaction's timeout (0: none) */
    int pings;          /* 1 (rl ping): timeout_ms bounds each ping instead, and is not a
                         * transaction timeout */
} rl__tool_wait;

/* The --timeout option of those commands (ptr: a double, seconds, initially
 * RL__TOOL_DEFAULT_TIMEOUT_S). */
#define RL__TOOL_OPT_TIMEOUT(ptr)                                                                                  \
    {                                                                                                              \
        .name = "timeout", .kind = RL_ARG_DOUBLE, .dest = (ptr), .metavar = "S", .dmin = 0, .dmax = 86400,         \
        .help = "seconds a transaction may run (retries included) before the command gives up with "               \
                "transaction_timed_out (1031); 0: never. A request that waits for a server is reported on stderr " \
                "after 3 s"                                                                                        \
    }

/* rl__tool_wait_ms — --timeout's seconds as the milliseconds of rl__tool_wait.timeout_ms. */
static inline int64_t rl__tool_wait_ms(double seconds) { return (int64_t)(seconds * 1000.0 + 0.5); }

/* rl__tool_db_options — set o's transaction_timeout_ms and wait report for w (NULL: leave o as
 * it is): the report prints "PROG: LINE" to stderr, with the timeout it will give up at. w is
 * borrowed by the database opened with o: it must outlive it. o->size must cover the fields
 * (sizeof). */
void rl__tool_db_options(rl_db_options *o, const rl__tool_wait *w);

/* rl__tool_retry — the retry step of a transaction the caller runs itself (when it needs more
 * than rl_db_run gives, e.g. the committed version or the futures' results): rl_txn_on_error(t,
 * rc), waited for. RL_OK: t was reset after the backoff, run it again; otherwise the error to stop
 * with (rc itself when it is not retryable, transaction_timed_out once the timeout passed, the
 * retry limit's last error). */
int rl__tool_retry(rl_txn *t, int rc);

/* Flags of rl__tool_open. */
#define RL__TOOL_MUST_EXIST 0x1 /* RL_E_NOT_FOUND instead of creating the store */
#define RL__TOOL_READ_ONLY \
    0x2 /* open the database read-only (rl_db_options.read_only: no file
                                 * is written); implies RL__TOOL_MUST_EXIST */

/* An open database with the Order metadata and its store. */
typedef struct {
    rl_db *db;
    rl_metadata *md;
    rl_store *s;
    rl__errdetail err; /* why rl__tool_open failed (rl__tool_errmsg); kept by rl__tool_close */
} rl__tool;

/* rl__tool_errmsg — the detail of rl__tool_open's failure ("" if none); owned by t. Failures of
 * the store calls made afterwards are on the store (rl_store_errmsg(t->s)). */
static inline const char *rl__tool_errmsg(const rl__tool *t) { return rl__errdetail_get(&t->err); }

/* Pack a --store JSON array (strings and integers) as a tuple, appended to out. RL_OK or
 * RL_E_INVALID_ARGUMENT (the detail in err, which may be NULL). */
int rl__tool_store_prefix(const char *json, rl_buf *out, rl__errdetail *err);
/* Open url, the Order metadata and the store at store_json (NULL: the default) in one
 * transaction; create_flags apply if the store is created. open_flags: RL__TOOL_*. On failure t
 * is closed and rl__tool_errmsg(t) says why (RL_E_NOT_FOUND: no store there, with
 * RL__TOOL_MUST_EXIST). t owns what it opened until rl__tool_close. */
int rl__tool_open(rl__tool *t, const char *url, const char *store_json, uint32_t create_flags, unsigned open_flags);
/* rl__tool_open_with — rl__tool_open with the timeout and wait report of w (rl__tool_db_options;
 * NULL: none), which must outlive t's database (until rl__tool_close). */
int rl__tool_open_with(rl__tool *t, const char *url, const char *store_json, uint32_t create_flags, unsigned open_flags,
                       const rl__tool_wait *w);
/* Close what rl__tool_open opened; t may be zeroed (a no-op). */
void rl__tool_close(rl__tool *t);
/* The price rl__tool_save_orders gives the Order with order_id id under seed (0..999). Pure. */
int64_t rl__tool_order_price(uint64_t seed, int64_t id);
/* Save the Orders of `rl load` with order_id first .. first+n-1 into s within txn: price drawn
 * from (seed, id) by splitmix64 (0..999), quantity 1..10, customer "customer-NNN" (id % 100),
 * and pad[0..pad_len) as padding when pad_len > 0 (pad borrowed). RL_OK or rl_store_save's
 * error. */
int rl__tool_save_orders(rl_store *s, rl_txn *txn, int64_t first, int64_t n, uint64_t seed, const uint8_t *pad,
                         size_t pad_len);
/* Append the JSON object of a message's set scalar fields (bytes as hex, repeated fields as a
 * count), read through its descriptor. */
int rl__tool_message_json(const ProtobufCMessage *m, rl_buf *out);
/* Append {"type", "pk", "version" (24 hex digits or null), "stored_bytes", "chunks", "record"}. */
int rl__tool_record_json(const rl_record *r, rl_buf *out);

/* ---- rl placement's ranges (tool.c; src/app/placement_store.c uses them) ---- */

/* The key ranges `rl placement` places for store s: its records [(1,), (1,)+1) and the entries
 * of index `index` [(2, subspace_key), +1) (the store's prefix first). Reset and filled; RL_OK,
 * RL_E_NOT_FOUND (no such index: rl_store_errmsg(s) says so), RL_E_OUT_OF_MEMORY. */
int rl__tool_placement_ranges(const rl_store *s, const char *index, rl_buf *rec_b, rl_buf *rec_e, rl_buf *idx_b,
                              rl_buf *idx_e);
/* The first key of the record an entry key of index `index` points to: the store's records
 * prefix + the primary key (rebuilt from the entry's values and appended columns), into out
 * (reset). RL_OK, RL_E_NOT_FOUND (no such index), RL_E_CORRUPT_DATA (not an entry of it). */
int rl__tool_index_entry_record(const rl_store *s, const char *index, const uint8_t *key, size_t len, rl_buf *out);

#endif
