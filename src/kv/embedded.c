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
 *   2. The read version handed out is the committer's fresh read version
 *      (rl__committer_fresh_read_version): with no batch running or queued, a version reserved
 *      from the sequencer, which follows the clock; while a batch runs, the newest version
 *      handed out so far. Either way it never exposes a commit that is not yet durable (an
 *      acknowledged commit survives kill -9), and versions advance with time whether or not
 *      anything commits, so a read version is inside the MVCC window at the next commit however
 *      long the database was idle, and a retry after transaction_too_old gets a fresh one
 *      (docs/design.md §5). The cost is one clock reading under the committer's mutex per read
 *      version.
 *   2a. A reserved version is usually above the storage engine's latest version, which advances
 *      only when something commits. The engine serves a read at v <= the committer's read
 *      ceiling (the newest version handed out; no batch will ever be applied at or below it
 *      beyond what the engine holds) at min(v, latest) — the same data
 *      (rl__storage_set_read_ceiling, installed at open), and still refuses a version above the
 *      ceiling (a user's rl_txn_set_read_version into the future) with future_version. The
 *      ceiling is one atomic load, asked only by reads above latest.
 *   3. The committer starts after the storage engine's recovered version.
 *   4. A read-only database (rl_db_options.read_only) refuses every commit that would write
 *      (mutations or write conflict ranges) here, before the committer: the committer never
 *      hands a version to the storage engine, whose apply would refuse it too and poison the
 *      committer. Commits that only read succeed (txn.c never sends them).
 *   5. Watches (docs/design.md §2, "Watches"): the registered ones are in `watches`, sorted by
 *      key, under wmu. A watch is checked against the key's history when it registers
 *      (rl__storage_watch_changed) and, once registered, by the sink after every version it
 *      applies that writes its key (the value at that version against the watch's): both under
 *      wmu, so no version falls between the two. Lock order: wmu, then the engine's lock. Fired
 *      watches wait in `fired` and complete, outside every lock, at the end of the commit that
 *      applied the change (every emb_commit drains the list after its commit returns: the
 *      applying sink runs inside some commit), so callbacks run on that committing thread, never
 *      inside the committer. n_watches lets the sink skip all this when nothing is watched.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "commit/commit.h"
#include "kv/backend.h"
#include "storage/mapped.h"
#include "storage/storage.h"

typedef struct {
    rl__kv_backend base; /* must be first */
    rl__storage *st;
    rl__committer *cm;
    int is_durable;
    int read_only;           /* rl_db_options.read_only */
    char *dir;               /* heap copy or NULL */
    int secondary_row_limit; /* mapped-range secondary limits; 0 = storage's default */
    long secondary_byte_limit;
    /* Watches (invariant 5). */
    pthread_mutex_t wmu;
    rl__kv_watch **watches; /* heap array sorted by key, n_w entries (under wmu) */
    size_t n_w, cap_w;
    int n_watches;       /* atomic: n_w, read by the sink without wmu */
    rl__kv_watch *fired; /* fired, linked by be_link, not completed yet (under wmu) */
} embedded;

/* ---- Watches (invariant 5) ------------------------------------------------------------------ */

static int wcmp(const rl__kv_watch *w, const uint8_t *k, uint32_t kl) {
    return rl__bytes_cmp(w->key, w->key_len, k, kl);
}

/* The first index whose key is >= k. Under wmu. */
static size_t wfind(const embedded *e, const uint8_t *k, uint32_t kl) {
    size_t lo = 0, hi = e->n_w;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (wcmp(e->watches[mid], k, kl) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void wremove_at(embedded *e, size_t i) {
    memmove(&e->watches[i], &e->watches[i + 1], (e->n_w - i - 1) * sizeof *e->watches);
    e->n_w--;
    __atomic_store_n(&e->n_watches, (int)e->n_w, __ATOMIC_RELEASE);
}

/* Check the watches of the keys in [b, e) (e NULL: the key b) against version v's values and
 * move those that changed to `fired`. Under wmu. */
static void wcheck(embedded *e, rl__version v, const uint8_t *b, uint32_t bl, const uint8_t *end, uint32_t el,
                   rl_arena *a) {
    size_t i = wfind(e, b, bl);
    while (i < e->n_w) {
        rl__kv_watch *w = e->watches[i];
        if (end ? wcmp(w, end, el) >= 0 : wcmp(w, b, bl) != 0) break;
        int present = 0, differs = 1;
        const uint8_t *val = NULL;
        uint32_t vl = 0;
        if (rl__storage_get(e->st, v, w->key, w->key_len, a, &present, &val, &vl) == RL_OK)
            differs = present != w->present || (present && (vl != w->value_len || (vl && memcmp(val, w->value, vl))));
        if (!differs) {
            i++;
            continue;
        }
        wremove_at(e, i);
        w->be_link = e->fired;
        e->fired = w;
    }
}

/* Complete the fired watches (no lock held). */
static void wdrain(embedded *e) {
    if (!__atomic_load_n(&e->fired, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&e->wmu);
    rl__kv_watch *list = e->fired;
    e->fired = NULL;
    pthread_mutex_unlock(&e->wmu);
    while (list) {
        rl__kv_watch *next = list->be_link;
        list->be_link = NULL;
        list->done(list, RL_OK);
        list = next;
    }
}

static int sink_apply(void *ctx, rl__version v, const rl__mutation *muts, size_t n) {
    embedded *e = ctx;
    int rc = rl__storage_apply(e->st, v, muts, n);
    if (rc != RL_OK || !__atomic_load_n(&e->n_watches, __ATOMIC_ACQUIRE)) return rc;
    rl_arena a;
    rl__arena_init(&a, 512);
    pthread_mutex_lock(&e->wmu);
    for (size_t i = 0; i < n && e->n_w; i++) {
        const rl__mutation *m = &muts[i];
        if (m->type == RL_MUT_CLEAR_RANGE) wcheck(e, v, m->p1, m->len1, m->p2, m->len2, &a);
        else wcheck(e, v, m->p1, m->len1, NULL, 0, &a);
        rl__arena_reset(&a);
    }
    pthread_mutex_unlock(&e->wmu);
    rl__arena_release(&a);
    return rc;
}

static int sink_sync(void *ctx) { return rl__storage_sync(((embedded *)ctx)->st); }

static void emb_watch(rl__kv_backend *b, rl__kv_watch *w) {
    embedded *e = (embedded *)b;
    int changed = 0;
    pthread_mutex_lock(&e->wmu);
    int rc = rl__storage_watch_changed(e->st, w->version, w->key, w->key_len, w->present, w->value, w->value_len,
                                       &changed, NULL);
    if (rc == RL_OK && !changed) {
        if (RL_GROW(e->watches, e->cap_w, e->n_w + 1, 16)) {
            rc = RL_E_OUT_OF_MEMORY;
        } else {
            size_t i = wfind(e, w->key, w->key_len);
            memmove(&e->watches[i + 1], &e->watches[i], (e->n_w - i) * sizeof *e->watches);
            e->watches[i] = w;
            e->n_w++;
            __atomic_store_n(&e->n_watches, (int)e->n_w, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&e->wmu);
    if (rc != RL_OK || changed) w->done(w, rc);
}

static void emb_watch_cancel(rl__kv_backend *b, rl__kv_watch *w) {
    embedded *e = (embedded *)b;
    int found = 0;
    pthread_mutex_lock(&e->wmu);
    for (size_t i = wfind(e, w->key, w->key_len); i < e->n_w && !wcmp(e->watches[i], w->key, w->key_len); i++)
        if (e->watches[i] == w) {
            wremove_at(e, i);
            found = 1;
            break;
        }
    pthread_mutex_unlock(&e->wmu);
    if (found) w->done(w, RL_E_OPERATION_CANCELLED);
}

static void emb_close(rl__kv_backend *b) {
    embedded *e = (embedded *)b;
    /* Watches whose futures were never freed: they end cancelled (the futures stay valid). */
    wdrain(e);
    while (e->n_w) {
        rl__kv_watch *w = e->watches[e->n_w - 1];
        e->n_w--;
        w->done(w, RL_E_OPERATION_CANCELLED);
    }
    rl__free(e->watches);
    pthread_mutex_destroy(&e->wmu);
    rl__committer_free(e->cm);
    rl__storage_close(e->st);
    rl__free(e->dir);
    rl__free(e);
}

static void emb_get_read_version(rl__kv_backend *b, rl__kv_grv *g) {
    embedded *e = (embedded *)b;
    g->version = rl__committer_fresh_read_version(e->cm); /* invariant 2 */
    g->done(g, RL_OK);
}

/* The storage engine's read ceiling (invariant 2a): the committer's newest handed-out read
 * version. */
static rl__version read_ceiling(void *ud) { return rl__committer_read_ceiling(ud); }

static const uint8_t empty_key[1] = {0};

/* One read, at once (invariant 1). Selectors resolve within the whole readable keyspace
 * ["", max_key), so they always resolve (clamped at its ends). */
static int emb_read_now(embedded *e, rl__kv_read *r) {
    int rc;
    rl__range_bounds bd;
    switch (r->op) {
    case RL_KV_GET:
        return rl__storage_get(e->st, r->version, r->key, r->key_len, r->arena, &r->present, &r->value, &r->value_len);
    case RL_KV_GET_KEY: {
        rl__select_result s;
        rc = rl__storage_select(e->st, r->version, &r->begin, empty_key, 0, 1, r->max_key, r->max_key_len, 1, r->arena,
                                &s);
        if (rc == RL_OK) r->rbegin = s.key, r->rbegin_len = s.key_len;
        return rc;
    }
    case RL_KV_GET_RANGE:
        if (r->begin.offset == 1 && r->end.offset == 1 && !r->begin.or_equal && !r->end.or_equal) {
            /* firstGreaterOrEqual at both ends (scans, record loads): the bounds are the keys,
             * already within ["", max_key] (txn_op.c checks), so nothing to resolve or clip. */
            r->rbegin = r->begin.key, r->rbegin_len = r->begin.key_len;
            r->rend = r->end.key, r->rend_len = r->end.key_len;
            return rl__storage_get_range(e->st, r->version, r->begin.key, r->begin.key_len, r->end.key, r->end.key_len,
                                         r->limit, r->target_bytes, r->reverse, r->arena, &r->kvs, &r->n, &r->more);
        }
        break;
    case RL_KV_GET_MAPPED: break;
    default: return RL_E_INTERNAL_ERROR;
    }
    rc = rl__storage_range_bounds(e->st, r->version, &r->begin, &r->end, empty_key, 0, 1, r->max_key, r->max_key_len, 1,
                                  r->reverse, r->arena, &bd);
    if (rc) return rc;
    if (bd.unresolved) return RL_E_INTERNAL_ERROR; /* cannot happen within the whole keyspace */
    r->rbegin = bd.rbegin, r->rbegin_len = bd.rbegin_len;
    r->rend = bd.rend, r->rend_len = bd.rend_len;
    r->n = 0;
    r->more = 0;
    int empty = rl__bytes_cmp(bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len) >= 0;
    if (r->op == RL_KV_GET_RANGE) {
        if (empty) return RL_OK;
        return rl__storage_get_range(e->st, r->version, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len, r->limit,
                                     r->target_bytes, r->reverse, r->arena, &r->kvs, &r->n, &r->more);
    }
    rl__mapper *m = NULL;
    if ((rc = rl__mapper_parse(r->mapper, r->mapper_len, r->arena, &m))) return rc;
    if (empty) return RL_OK;
    rl__mapped_options o;
    memset(&o, 0, sizeof o);
    o.limit = r->limit;
    o.target_bytes = r->target_bytes;
    o.reverse = r->reverse;
    o.secondary_row_limit = e->secondary_row_limit;
    o.secondary_byte_limit = e->secondary_byte_limit;
    o.omit_index = r->omit_index;
    return rl__storage_get_mapped_range(e->st, r->version, bd.cbegin, bd.cbegin_len, bd.cend, bd.cend_len, m, &o, NULL,
                                        NULL, r->arena, &r->mkvs, &r->n, &r->more);
}

static void emb_read(rl__kv_backend *b, rl__kv_read *r) { r->done(r, emb_read_now((embedded *)b, r)); }

static int emb_get_now(rl__kv_backend *b, rl__version version, const uint8_t *key, uint32_t key_len, rl_arena *arena,
                       int *out_present, const uint8_t **out_value, uint32_t *out_value_len) {
    return rl__storage_get(((embedded *)b)->st, version, key, key_len, arena, out_present, out_value, out_value_len);
}

static void emb_commit(rl__kv_backend *b, rl__kv_commit *c) {
    embedded *e = (embedded *)b;
    if (e->read_only && (c->n_muts || c->n_writes)) { /* invariant 4 */
        c->done(c, RL_E_READ_ONLY_DATABASE);
        return;
    }
    rl__commit_request req;
    memset(&req, 0, sizeof req);
    req.read_version = c->read_version;
    req.reads = c->reads;
    req.n_reads = c->n_reads;
    req.writes = c->writes;
    req.n_writes = c->n_writes;
    req.muts = c->muts;
    req.n_muts = c->n_muts;
    int rc = rl__committer_commit(e->cm, &req);
    if (rc == RL_OK) {
        c->commit_version = req.commit_version;
        c->batch_order = req.batch_order;
    }
    c->done(c, rc);
    wdrain(e); /* invariant 5: after the commit's own completion */
}

/* Append s to out as a JSON string (rl__buf_append_json_str); NULL gives null. */
static void json_str(rl_buf *out, const char *s) {
    if (s) rl__buf_append_json_str(out, s, strlen(s));
    else rl__buf_append(out, "null", 4);
}

/* Status: versions from the committer and the storage engine, sizes, log and checkpoints. */
static int emb_status_json(rl__kv_backend *b, rl_buf *out) {
    embedded *e = (embedded *)b;
    rl__storage_status s;
    memset(&s, 0, sizeof s);
    rl__storage_get_status(e->st, &s);
    rl__buf_printf(out,
                   "{\"backend\": \"embedded\", \"engine\": \"%s\", \"window_rows\": %llu, "
                   "\"durable\": %s, \"read_version\": %llu, "
                   "\"oldest_read_version\": %llu, \"latest_version\": %llu, "
                   "\"durable_version\": %llu, \"oldest_version\": %llu, \"keys\": %llu, "
                   "\"bytes\": %llu, \"log_bytes\": %llu, \"checkpoint_version\": %llu, "
                   "\"checkpoints\": %llu, \"read_only\": %s, ",
                   s.engine, (unsigned long long)s.window_rows, e->is_durable ? "true" : "false",
                   (unsigned long long)rl__committer_read_version(e->cm),
                   (unsigned long long)rl__committer_oldest_version(e->cm), (unsigned long long)s.latest_version,
                   (unsigned long long)s.durable_version, (unsigned long long)s.oldest_version,
                   (unsigned long long)s.keys, (unsigned long long)s.bytes, (unsigned long long)s.log_bytes,
                   (unsigned long long)s.checkpoint_version, (unsigned long long)s.checkpoints,
                   e->read_only ? "true" : "false");
    /* What the last open's recovery found at the end of the log (docs/file-format.md,
     * Recovery): "log_tail" is clean, torn, bad_checksum or bad_record; when it is not clean,
     * the bytes from "offset" of "log" were moved to "moved_to" (null: left in place). */
    rl__buf_printf(out, "\"recovery\": {\"log_tail\": \"%s\"", rl__storage_tail_name(s.recovery_tail));
    if (s.recovery_tail != RL_TAIL_CLEAN) {
        rl__buf_printf(out, ", \"log\": ");
        json_str(out, s.recovery_log);
        rl__buf_printf(out, ", \"offset\": %llu, \"bytes\": %llu, \"moved_to\": ",
                       (unsigned long long)s.recovery_tail_offset, (unsigned long long)s.recovery_tail_bytes);
        json_str(out, s.recovery_moved_to);
    }
    rl__buf_printf(out, "}}");
    return rl__buf_error(out);
}

static int emb_set_clock(rl__kv_backend *b, uint64_t (*fn)(void *ud), void *ud) {
    rl__committer_set_clock(((embedded *)b)->cm, fn, ud);
    return RL_OK;
}

/* Size estimates from the storage engine's byte sample (docs/design.md §4, "Size estimates"). */
static void emb_metrics(rl__kv_backend *b, rl__kv_metrics *m) {
    rl__storage *st = ((embedded *)b)->st;
    int rc;
    if (m->op == RL_KV_ESTIMATE) {
        rc = rl__storage_estimate_bytes(st, m->begin, m->begin_len, m->end, m->end_len, &m->bytes);
    } else {
        rl_slice *cuts;
        int n;
        rc = rl__storage_split_points(st, m->begin, m->begin_len, m->end, m->end_len, m->chunk, m->arena, &cuts, &n);
        if (rc == RL_OK)
            rc = rl__kv_split_list(m->arena, m->begin, m->begin_len, cuts, n, m->end, m->end_len, &m->keys, &m->n_keys);
    }
    m->done(m, rc);
}

static const rl__kv_backend_vtable embedded_vt = {
    .name = "embedded",
    .completes_inline = 1,
    .close = emb_close,
    .get_read_version = emb_get_read_version,
    .read = emb_read,
    .commit = emb_commit,
    .status_json = emb_status_json,
    .set_clock = emb_set_clock,
    .get_now = emb_get_now,
    .metrics = emb_metrics,
    .watch = emb_watch,
    .watch_cancel = emb_watch_cancel,
};

/* Open the storage engine (recovering it for file:) and a committer over it. On failure nothing
 * is left open and err says why (the storage engine's message for files). */
int rl__kv_embedded_open(const char *dir, const rl_db_options *opts, rl__kv_backend **out, rl__errdetail *err) {
    int rc;
    embedded *e = rl__calloc(1, sizeof *e);
    if (!e) return RL_E_OUT_OF_MEMORY;
    e->base.vt = &embedded_vt;
    pthread_mutex_init(&e->wmu, NULL);
    if (dir) {
        e->dir = rl__strdup(dir);
        if (!e->dir) {
            rc = RL_E_OUT_OF_MEMORY;
            goto fail;
        }
        e->is_durable = 1;
    }
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    so.engine = dir ? RL_ENGINE_AUTO : RL_ENGINE_MEMORY;
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
                rl__errdetail_append(err, "mapped secondary limits must not be negative");
                goto fail;
            }
            e->secondary_row_limit = opts->mapped_secondary_row_limit;
            e->secondary_byte_limit = opts->mapped_secondary_byte_limit;
        }
        if (have >= offsetof(rl_db_options, read_only) + sizeof(int)) e->read_only = opts->read_only != 0;
        if (have >= offsetof(rl_db_options, engine) + sizeof(int)) {
            switch (opts->engine) {
            case RL_DB_ENGINE_DEFAULT: break;
            case RL_DB_ENGINE_MEMORY: so.engine = RL_ENGINE_MEMORY; break;
            case RL_DB_ENGINE_SSD: so.engine = RL_ENGINE_SSD; break;
            default:
                rc = RL_E_INVALID_ARGUMENT;
                rl__errdetail_append(err, "unknown storage engine %d", opts->engine);
                goto fail;
            }
        }
    }
    so.read_only = e->read_only;
    rc = rl__storage_open(&so, &e->st, err);
    if (rc) goto fail;
    rl__committer_options co;
    memset(&co, 0, sizeof co);
    co.window_versions = so.window_versions;
    rl__log_sink sink = {e, sink_apply, sink_sync};
    rc = rl__committer_new(&co, sink, rl__storage_latest_version(e->st), &e->cm);
    if (rc) {
        rl__errdetail_append(err, "cannot start the committer: %s", rl_error_name(rc));
        goto fail;
    }
    rl__storage_set_read_ceiling(e->st, read_ceiling, e->cm);
    *out = &e->base;
    return RL_OK;
fail:
    if (e->st) rl__storage_close(e->st);
    pthread_mutex_destroy(&e->wmu);
    rl__free(e->dir);
    rl__free(e);
    return rc;
}
