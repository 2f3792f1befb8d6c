/* backend.h (internal) — the interface between the generic transaction layer (txn.c, ryw.c) and
 * the thing that actually stores data: the embedded engine (embedded.c) today, the cluster client
 * and FoundationDB later.
 *
 * Contract:
 *   1. A backend serves reads at an explicit version and commits fully-formed transactions (read
 *      version, read and write conflict ranges, mutations in order). It knows nothing about write
 *      maps, read-your-writes, selectors over uncommitted data, options or retries: all of that
 *      lives above it, once, for every backend.
 *   2. Every read fills caller-owned memory: results are copied into the arena it is given, which
 *      is the arena of the rl_future the caller will return, so results live exactly as long as
 *      that future.
 *   3. Calls are synchronous for the embedded backend. A network backend keeps the same shapes
 *      but may complete an rl_future later (future.c has the ready flag, the error, the callback
 *      list and a condition variable for that); the transaction layer only ever hands results to
 *      the user through futures, so that change stays local to the backend and txn.c.
 *   4. Errors are codes of include/reclayer/error.h: RL_E_TRANSACTION_TOO_OLD and
 *      RL_E_FUTURE_VERSION for versions outside the readable window, RL_E_NOT_COMMITTED for a
 *      conflict, RL_E_IO_ERROR, RL_E_OUT_OF_MEMORY, and the mapper codes (2030–2043).
 *   5. A backend handle is shared by every thread using the rl_db; each function must be
 *      thread-safe.
 */
#ifndef RL_KV_BACKEND_H
#define RL_KV_BACKEND_H

#include "base/arena.h"
#include "base/buf.h"
#include "commit/commit.h"
#include "reclayer/kv.h"
#include "storage/mapped.h"
#include "storage/storage.h"

typedef struct rl_kv_backend rl_kv_backend;

typedef struct {
    const char *name; /* "embedded", "cluster", "fdb" */
    /* Release everything. NULL-safe is the caller's business (never called with NULL). */
    void (*close)(rl_kv_backend *b);
    /* The newest committed (durable) version: the read version of a new transaction. */
    int (*get_read_version)(rl_kv_backend *b, rl_version *out);
    /* Point read at v. *out_present = 0 for a missing key. */
    int (*get)(rl_kv_backend *b, rl_version v, const uint8_t *key, uint32_t key_len, rl_arena *a,
               int *out_present, const uint8_t **out_value, uint32_t *out_len);
    /* Resolve a selector at v over committed data, clamped to ["", "\xff\xff"]. */
    int (*get_key)(rl_kv_backend *b, rl_version v, const rl_key_selector *sel, rl_arena *a,
                   const uint8_t **out_key, uint32_t *out_len);
    /* Rows of [begin, end) at v: at most limit rows (0 = unlimited), about target_bytes (0 =
     * unlimited, the crossing row included); *out_more = 1 if rows remain. */
    int (*get_range)(rl_kv_backend *b, rl_version v, const uint8_t *begin, uint32_t begin_len,
                     const uint8_t *end, uint32_t end_len, int limit, long target_bytes,
                     int reverse, rl_arena *a, rl_keyvalue **out_kvs, int *out_n, int *out_more);
    /* Mapped range of the index range [begin, end) at v with a packed mapper (parsed by the
     * backend; mapper errors are FoundationDB's codes). */
    int (*get_mapped_range)(rl_kv_backend *b, rl_version v, const uint8_t *begin,
                            uint32_t begin_len, const uint8_t *end, uint32_t end_len,
                            const uint8_t *mapper, size_t mapper_len, int limit,
                            long target_bytes, int reverse, rl_arena *a,
                            rl_mapped_keyvalue **out, int *out_n, int *out_more);
    /* Commit one transaction: fills req->result, commit_version and batch_order; returns
     * req->result. Blocks until durable (or failed). */
    int (*commit)(rl_kv_backend *b, rl_commit_request *req);
    /* Append a JSON object describing the backend to out. */
    int (*status_json)(rl_kv_backend *b, rl_buf *out);
} rl_kv_backend_vtable;

/* Every backend struct begins with this header. */
struct rl_kv_backend {
    const rl_kv_backend_vtable *vt;
};

/* embedded.c: open "mem:" (dir == NULL) or "file:DIR". On failure a message is appended to
 * errmsg. Errors as rl__storage_open, plus RL_E_OUT_OF_MEMORY. */
int rl__kv_embedded_open(const char *dir, const rl_db_options *opts, rl_kv_backend **out,
                         rl_buf *errmsg);

#endif
