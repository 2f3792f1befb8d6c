/* embedded.c — the embedded backend: the storage engine and the committer in the calling
 * process, behind the backend interface of backend.h.
 *
 *   txn.c ──commit──▶ committer (sequencer, resolver, group commit)
 *                        │ sink.apply / sink.sync
 *                        ▼
 *   txn.c ──reads───▶ storage (MVCC window over the memory engine, WAL in DIR for file:)
 *
 * Invariants:
 *   1. Reads go straight to the storage engine at the version the transaction chose; the
 *      storage engine locks internally, so no lock is taken here.
 *   2. The read version handed out is the committer's newest durable version, so a read version
 *      never exposes a commit that is not yet durable (an acknowledged commit survives kill -9).
 *   3. The committer starts after the storage engine's recovered version.
 *   4. A read-only database (rl_db_options.read_only) refuses every commit that would write
 *      (mutations or write conflict ranges) here, before the committer: the committer never
 *      hands a version to the storage engine, whose apply would refuse it too and poison the
 *      committer. Commits that only read succeed (txn.c never sends them).
 */
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "kv/backend.h"

typedef struct {
    rl_kv_backend base; /* must be first */
    rl_storage *st;
    rl_committer *cm;
    int is_durable;
    int read_only;             /* rl_db_options.read_only */
    char *dir;                 /* heap copy or NULL */
    int secondary_row_limit;   /* mapped-range secondary limits; 0 = storage's default */
    long secondary_byte_limit;
} embedded;

static int sink_apply(void *ctx, rl_version v, const rl_mutation *muts, size_t n) {
    return rl__storage_apply(ctx, v, muts, n);
}

static int sink_sync(void *ctx) { return rl__storage_sync(ctx); }

static void emb_close(rl_kv_backend *b) {
    embedded *e = (embedded *)b;
    rl__committer_free(e->cm);
    rl__storage_close(e->st);
    rl__free(e->dir);
    rl__free(e);
}

static int emb_get_read_version(rl_kv_backend *b, rl_version *out) {
    embedded *e = (embedded *)b;
    *out = rl__committer_read_version(e->cm);
    return RL_OK;
}

static int emb_get(rl_kv_backend *b, rl_version v, const uint8_t *key, uint32_t key_len,
                   rl_arena *a, int *out_present, const uint8_t **out_value, uint32_t *out_len) {
    embedded *e = (embedded *)b;
    return rl__storage_get(e->st, v, key, key_len, a, out_present, out_value, out_len);
}

static int emb_get_key(rl_kv_backend *b, rl_version v, const rl_key_selector *sel, rl_arena *a,
                       const uint8_t **out_key, uint32_t *out_len) {
    embedded *e = (embedded *)b;
    return rl__storage_get_key(e->st, v, sel, a, out_key, out_len);
}

static int emb_get_range(rl_kv_backend *b, rl_version v, const uint8_t *begin, uint32_t begin_len,
                         const uint8_t *end, uint32_t end_len, int limit, long target_bytes,
                         int reverse, rl_arena *a, rl_keyvalue **out_kvs, int *out_n,
                         int *out_more) {
    embedded *e = (embedded *)b;
    return rl__storage_get_range(e->st, v, begin, begin_len, end, end_len, limit, target_bytes,
                                 reverse, a, out_kvs, out_n, out_more);
}

static int emb_get_mapped_range(rl_kv_backend *b, rl_version v, const uint8_t *begin,
                                uint32_t begin_len, const uint8_t *end, uint32_t end_len,
                                const uint8_t *mapper, size_t mapper_len, int limit,
                                long target_bytes, int reverse, rl_arena *a,
                                rl_mapped_keyvalue **out, int *out_n, int *out_more) {
    embedded *e = (embedded *)b;
    rl_mapper *m = NULL;
    int rc = rl__mapper_parse(mapper, mapper_len, a, &m);
    if (rc) return rc;
    rl_mapped_options o;
    memset(&o, 0, sizeof o);
    o.limit = limit;
    o.target_bytes = target_bytes;
    o.reverse = reverse;
    o.secondary_row_limit = e->secondary_row_limit;
    o.secondary_byte_limit = e->secondary_byte_limit;
    return rl__storage_get_mapped_range(e->st, v, begin, begin_len, end, end_len, m, &o, NULL,
                                        NULL, a, out, out_n, out_more);
}

static int emb_commit(rl_kv_backend *b, rl_commit_request *req) {
    embedded *e = (embedded *)b;
    if (e->read_only && (req->n_muts > 0 || req->n_writes > 0))
        return req->result = RL_E_READ_ONLY_DATABASE;
    return rl__committer_commit(e->cm, req);
}

/* Append s to out as a JSON string (quotes, backslashes and control bytes escaped; other bytes
 * copied, so a path that is not UTF-8 gives a string that is not either). NULL gives null. */
static void json_str(rl_buf *out, const char *s) {
    if (!s) {
        rl__buf_append(out, "null", 4);
        return;
    }
    rl__buf_append(out, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            rl__buf_printf(out, "\\%c", c);
        else if (c < 0x20)
            rl__buf_printf(out, "\\u%04x", c);
        else
            rl__buf_append(out, s, 1);
    }
    rl__buf_append(out, "\"", 1);
}

/* Status: versions from the committer and the storage engine, sizes, log and checkpoints. */
static int emb_status_json(rl_kv_backend *b, rl_buf *out) {
    embedded *e = (embedded *)b;
    rl_storage_status s;
    memset(&s, 0, sizeof s);
    rl__storage_get_status(e->st, &s);
    rl__buf_printf(out,
                   "{\"backend\": \"embedded\", \"durable\": %s, \"read_version\": %llu, "
                   "\"oldest_read_version\": %llu, \"latest_version\": %llu, "
                   "\"durable_version\": %llu, \"oldest_version\": %llu, \"keys\": %llu, "
                   "\"bytes\": %llu, \"log_bytes\": %llu, \"checkpoint_version\": %llu, "
                   "\"checkpoints\": %llu, \"read_only\": %s, ",
                   e->is_durable ? "true" : "false",
                   (unsigned long long)rl__committer_read_version(e->cm),
                   (unsigned long long)rl__committer_oldest_version(e->cm),
                   (unsigned long long)s.latest_version, (unsigned long long)s.durable_version,
                   (unsigned long long)s.oldest_version, (unsigned long long)s.keys,
                   (unsigned long long)s.bytes, (unsigned long long)s.log_bytes,
                   (unsigned long long)s.checkpoint_version, (unsigned long long)s.checkpoints,
                   e->read_only ? "true" : "false");
    /* What the last open's recovery found at the end of the log (docs/file-format.md,
     * Recovery): "log_tail" is clean, torn, bad_checksum or bad_record; when it is not clean,
     * the bytes from "offset" of "log" were moved to "moved_to" (null: left in place). */
    rl__buf_printf(out, "\"recovery\": {\"log_tail\": \"%s\"",
                   rl__storage_tail_name(s.recovery_tail));
    if (s.recovery_tail != RL_TAIL_CLEAN) {
        rl__buf_printf(out, ", \"log\": ");
        json_str(out, s.recovery_log);
        rl__buf_printf(out, ", \"offset\": %llu, \"bytes\": %llu, \"moved_to\": ",
                       (unsigned long long)s.recovery_tail_offset,
                       (unsigned long long)s.recovery_tail_bytes);
        json_str(out, s.recovery_moved_to);
    }
    rl__buf_printf(out, "}}");
    return rl__buf_error(out);
}

static const rl_kv_backend_vtable embedded_vt = {
    .name = "embedded",
    .close = emb_close,
    .get_read_version = emb_get_read_version,
    .get = emb_get,
    .get_key = emb_get_key,
    .get_range = emb_get_range,
    .get_mapped_range = emb_get_mapped_range,
    .commit = emb_commit,
    .status_json = emb_status_json,
};

/* Open the storage engine (recovering it for file:) and a committer over it. On failure nothing
 * is left open and errmsg says why (the storage engine's message for files). */
int rl__kv_embedded_open(const char *dir, const rl_db_options *opts, rl_kv_backend **out,
                         rl_buf *errmsg) {
    int rc;
    embedded *e = rl__calloc(1, sizeof *e);
    if (!e) return RL_E_OUT_OF_MEMORY;
    e->base.vt = &embedded_vt;
    if (dir) {
        e->dir = rl__strdup(dir);
        if (!e->dir) {
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        e->is_durable = 1;
    }
    rl_storage_options so;
    memset(&so, 0, sizeof so);
    so.engine = RL_ENGINE_MEMORY;
    so.dir = e->dir;
    if (opts) {
        so.no_sync = opts->no_sync;
        so.window_versions = opts->window_versions;
        so.checkpoint_log_bytes = opts->checkpoint_log_bytes;
        /* Fields added after the first version are read only when the caller's struct has them
         * (size 0: a zero-initialised struct of this version). */
        size_t have = opts->size ? opts->size : sizeof *opts;
        if (have >= offsetof(rl_db_options, mapped_secondary_byte_limit) + sizeof(long)) {
            if (opts->mapped_secondary_row_limit < 0 || opts->mapped_secondary_byte_limit < 0) {
                rc = RL_E_INVALID_ARGUMENT;
                if (errmsg) rl__buf_printf(errmsg, "mapped secondary limits must not be negative");
                goto fail;
            }
            e->secondary_row_limit = opts->mapped_secondary_row_limit;
            e->secondary_byte_limit = opts->mapped_secondary_byte_limit;
        }
        if (have >= offsetof(rl_db_options, read_only) + sizeof(int))
            e->read_only = opts->read_only != 0;
    }
    so.read_only = e->read_only;
    rc = rl__storage_open(&so, &e->st, errmsg);
    if (rc) goto fail;
    rl_committer_options co;
    memset(&co, 0, sizeof co);
    co.window_versions = so.window_versions;
    rl_log_sink sink = {e->st, sink_apply, sink_sync};
    rc = rl__committer_new(&co, sink, rl__storage_latest_version(e->st), &e->cm);
    if (rc) {
        if (errmsg) rl__buf_printf(errmsg, "cannot start the committer: %s", rl_error_name(rc));
        goto fail;
    }
    *out = &e->base;
    return RL_OK;
fail:
    if (e->st) rl__storage_close(e->st);
    rl__free(e->dir);
    rl__free(e);
    return rc;
}
