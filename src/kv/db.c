/* db.c — rl_db: opening a database from a URL, its status, the retry loop, and the thread-local
 * error detail of rl_db_open.
 *
 * URL schemes (kv.h): "mem:" (exactly: nothing may follow the colon) and "file:DIR" open the
 * embedded backend (embedded.c); "cluster:FILE" opens the cluster client (cluster/cluster.c) for
 * the cluster file FILE; "fdb:FILE" opens FoundationDB's cluster FILE through its client library
 * (fdb/; "fdb:" alone: FoundationDB's default cluster file); anything else is RL_E_BAD_URL. A DIR that
 * does not exist is RL_E_FILE_NOT_FOUND, one that is not a directory RL_E_INVALID_ARGUMENT, one
 * that cannot be examined RL_E_IO_ERROR (with strerror in the detail). The detail of the last failure of
 * rl_db_open in a thread is kept in a thread-local rl__errdetail (rl_last_error_detail): rl_db_open
 * has no handle to leave it on (the rule for every other call is in reclayer/error.h).
 * "file:DIR?engine=NAME&checkpoint_bytes=N" (also inside defer:) names the storage engine,
 * memory or ssd, and the checkpoint (ssd: flush) threshold (rl__kv_file_url); a '?' followed
 * by neither option is part of DIR.
 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/errdetail.h"
#include "kv/cluster/cluster.h"
#include "kv/fdb/fdb.h"
#include "kv/kv_int.h"
#include "kv/kv_stats.h"

int rl__kv_file_url(const char *rest, const rl_db_options *opts, char **out_dir, rl_db_options *out_opts,
                    rl__errdetail *err) {
    const char *q = strchr(rest, '?');
    while (q && strncmp(q, "?engine=", 8) && strncmp(q, "?checkpoint_bytes=", 18)) q = strchr(q + 1, '?');
    size_t dl = q ? (size_t)(q - rest) : strlen(rest);
    memset(out_opts, 0, sizeof *out_opts);
    if (opts) {
        size_t have = opts->size ? opts->size : sizeof *opts;
        memcpy(out_opts, opts, have < sizeof *opts ? have : sizeof *opts);
    }
    out_opts->size = sizeof *out_opts;
    /* The options: NAME=VALUE pairs joined by '&'. */
    for (const char *p = q ? q + 1 : NULL; p && *p;) {
        const char *end = strchr(p, '&');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 10 && !strncmp(p, "engine=ssd", 10)) {
            out_opts->engine = RL_DB_ENGINE_SSD;
        } else if (n == 13 && !strncmp(p, "engine=memory", 13)) {
            out_opts->engine = RL_DB_ENGINE_MEMORY;
        } else if (n > 17 && !strncmp(p, "checkpoint_bytes=", 17)) {
            char num[32];
            char *e;
            size_t nl = n - 17 < sizeof num - 1 ? n - 17 : sizeof num - 1;
            memcpy(num, p + 17, nl);
            num[nl] = 0;
            unsigned long long v = strtoull(num, &e, 10);
            if (*e || v == 0) goto bad;
            out_opts->checkpoint_log_bytes = v;
        } else {
            goto bad;
        }
        p = end ? end + 1 : NULL;
        continue;
    bad:
        rl__errdetail_append(err,
                             "file: option '%.*s' not understood (expected engine=memory, "
                             "engine=ssd or checkpoint_bytes=N)",
                             (int)(n < 100 ? n : 100), p);
        return RL_E_BAD_URL;
    }
    *out_dir = rl__malloc(dl + 1);
    if (!*out_dir) return RL_E_OUT_OF_MEMORY;
    memcpy(*out_dir, rest, dl);
    (*out_dir)[dl] = 0;
    return RL_OK;
}

static void set_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_detail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    rl__errdetail_vset(rl__thread_detail(), fmt, ap);
    va_end(ap);
}

/* Open the backend named by url; see the file comment. On failure *out is NULL and the detail
 * message is set. */
int rl_db_open(const char *url, const rl_db_options *opts, rl_db **out) {
    int rc;
    rl_db *db = NULL;
    char *fdir = NULL; /* file:: the directory without its ?engine= */
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__errdetail_init(rl__thread_detail(), NULL); /* valid until the next rl_db_open (kv.h) */
    if (!out) return RL_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!url) {
        set_detail("no database URL");
        rc = RL_E_BAD_URL;
        goto fail;
    }
    if (opts && opts->size != 0 && opts->size < sizeof(uint32_t)) {
        set_detail("rl_db_options.size is %u", opts->size);
        rc = RL_E_INVALID_ARGUMENT;
        goto fail;
    }
    db = rl__calloc(1, sizeof *db);
    if (!db) {
        rc = RL_E_OUT_OF_MEMORY;
        goto fail;
    }
    pthread_mutex_init(&db->mu, NULL);
    db->max_watches = RL__DEFAULT_MAX_WATCHES;
    db->seed = rl__clock_mono_ns() ^ (uint64_t)(uintptr_t)db;
    if (opts && (opts->size ? opts->size : sizeof *opts) >=
                    offsetof(rl_db_options, transaction_timeout_ms) + sizeof opts->transaction_timeout_ms) {
        if (opts->transaction_timeout_ms < 0) {
            set_detail("rl_db_options.transaction_timeout_ms is %lld (ms: 0 for none, or more)",
                       (long long)opts->transaction_timeout_ms);
            rc = RL_E_INVALID_ARGUMENT;
            goto fail_db;
        }
        db->txn_timeout_ms = opts->transaction_timeout_ms;
    }
    if (!strncmp(url, "mem:", 4)) {
        if (url[4]) {
            set_detail("database URL '%.200s': mem: takes nothing after the colon (use mem: or file:DIR)", url);
            rc = RL_E_BAD_URL;
            goto fail_db;
        }
        rc = rl__kv_embedded_open(NULL, opts, &db->be, &msg);
    } else if (!strncmp(url, "file:", 5)) {
        rl_db_options fo;
        rc = rl__kv_file_url(url + 5, opts, &fdir, &fo, &msg);
        if (rc) {
            set_detail("%s: %s", url, rl__errdetail_len(&msg) ? rl__errdetail_get(&msg) : rl_error_message(rc));
            goto fail_db;
        }
        const char *dir = fdir;
        struct stat sb;
        if (!*dir) {
            set_detail("file: needs a directory (file:DIR)");
            rc = RL_E_BAD_URL;
            goto fail_db;
        }
        if (stat(dir, &sb) != 0) {
            int e = errno;
            if (e == ENOENT) {
                set_detail("database directory %s does not exist", dir);
                rc = RL_E_FILE_NOT_FOUND;
            } else if (e == ENOTDIR) {
                set_detail("database directory %s: a component of the path is not a directory", dir);
                rc = RL_E_FILE_NOT_FOUND;
            } else {
                set_detail("database directory %s: %s", dir, strerror(e));
                rc = RL_E_IO_ERROR;
            }
            goto fail_db;
        }
        if (!S_ISDIR(sb.st_mode)) {
            set_detail("database directory %s is not a directory (file:DIR names a directory)", dir);
            rc = RL_E_INVALID_ARGUMENT;
            goto fail_db;
        }
        rc = rl__kv_embedded_open(dir, &fo, &db->be, &msg);
    } else if (!strncmp(url, "defer:", 6)) { /* the test backend (backend.h) */
        rc = rl__kv_deferred_open(url + 6, opts, &db->be, &msg);
    } else if (!strncmp(url, "cluster:", 8)) {
        if (!url[8]) {
            set_detail("cluster: needs the path of a cluster file (cluster:FILE)");
            rc = RL_E_BAD_URL;
            goto fail_db;
        }
        rc = rl__kv_cluster_open(url + 8, opts, &db->be, &msg);
    } else if (!strncmp(url, "fdb:", 4)) { /* FoundationDB (kv/fdb/; "fdb:" alone: its default cluster file) */
        rc = rl__kv_fdb_open(url + 4, opts, &db->be, &msg);
    } else {
        set_detail("database URL '%s' not understood (expected mem:, file:DIR, cluster:FILE or "
                   "fdb:FILE)",
                   url);
        rc = RL_E_BAD_URL;
        goto fail_db;
    }
    if (rc) {
        set_detail("%s: %s", url, rl__errdetail_len(&msg) ? rl__errdetail_get(&msg) : rl_error_message(rc));
        goto fail_db;
    }
    rl__free(fdir);
    *out = db;
    return RL_OK;
fail_db:
    pthread_mutex_destroy(&db->mu);
    rl__free(db);
fail:
    rl__free(fdir);
    return rc;
}

void rl_db_close(rl_db *db) {
    if (!db) return;
    db->be->vt->close(db->be);
    if (db->slot) {
        if (db->slot_fini) db->slot_fini(db->slot);
        rl__free(db->slot);
    }
    pthread_mutex_destroy(&db->mu);
    rl__free(db);
}

/* The backend's status as a heap JSON string (rl_free). */
int rl_db_status_json(rl_db *db, char **out) {
    if (!db || !out) return RL_E_INVALID_ARGUMENT;
    rl_buf b;
    rl__buf_init(&b);
    int rc = db->be->vt->status_json(db->be, &b);
    if (rc == RL_OK) rc = rl__buf_error(&b);
    if (rc) {
        rl__buf_release(&b);
        return rc;
    }
    size_t len;
    uint8_t *p = rl__buf_detach(&b, &len);
    if (!p) p = (uint8_t *)rl__strdup("");
    if (!p) return RL_E_OUT_OF_MEMORY;
    *out = (char *)p;
    return RL_OK;
}

int rl_db_status_fdb_json(rl_db *db, char **out) {
    if (!db || !out) return RL_E_INVALID_ARGUMENT;
    *out = NULL;
    rl_buf b;
    rl__buf_init(&b);
    int rc = rl__status_fdb_json(db, &b);
    size_t len;
    if (rc == RL_OK && !(*out = (char *)rl__buf_detach(&b, &len))) rc = RL_E_OUT_OF_MEMORY;
    rl__buf_release(&b);
    return rc;
}

/* The standard retry loop (kv.h). */
int rl_db_run(rl_db *db, int (*fn)(rl_txn *txn, void *ctx), void *ctx) {
    if (!db || !fn) return RL_E_INVALID_ARGUMENT;
    rl_txn *txn = NULL;
    int rc = rl_txn_begin(db, &txn);
    if (rc) return rc;
    for (;;) {
        rc = fn(txn, ctx);
        if (rc == RL_OK) {
            rl_future *f = rl_txn_commit(txn);
            rc = rl_future_wait(f);
            rl_future_free(f);
            if (rc == RL_OK) break;
        }
        rl_future *f = rl_txn_on_error(txn, rc);
        int rc2 = rl_future_wait(f);
        rl_future_free(f);
        if (rc2) {
            rc = rc2;
            break;
        }
    }
    rl_txn_free(txn);
    return rc;
}

/* ---- Tests: the sequencer's clock (kv_int.h) ------------------------------------------------ */

int rl__db_set_clock(rl_db *db, uint64_t (*fn)(void *ud), void *ud) {
    if (!db->be->vt->set_clock) return RL_E_UNSUPPORTED_OPERATION;
    return db->be->vt->set_clock(db->be, fn, ud);
}

/* ---- The upper layers' per-database slot and locality figures (kv_stats.h) ------------------ */

rl_db *rl__txn_db(const rl_txn *t) { return t->db; }

void rl__txn_rv_wait(rl_txn *t, uint64_t *out_asked_ns, uint64_t *out_ready_ns) {
    /* Ready before asked: a reader that sees ready != 0 also sees the asked time it goes with
     * (both are stored release; a reset zeroes asked first, then ready: see txn.c). */
    *out_ready_ns = __atomic_load_n(&t->rv_ready_ns, __ATOMIC_ACQUIRE);
    *out_asked_ns = __atomic_load_n(&t->rv_asked_ns, __ATOMIC_ACQUIRE);
}

int rl__txn_wrote(rl_txn *t) {
    rl__txn_lock(t);
    int w = t->n_muts > 0 || !rl__wmap_empty(&t->wm);
    rl__txn_unlock(t);
    return w;
}

void *rl__db_slot(rl_db *db, size_t size, void (*init)(void *p), void (*fini)(void *p)) {
    void *q = __atomic_load_n(&db->slot, __ATOMIC_ACQUIRE); /* set once: no lock after that */
    if (q) return q;
    pthread_mutex_lock(&db->mu);
    if (!db->slot) {
        void *p = rl__calloc(1, size ? size : 1);
        if (p) {
            if (init) init(p);
            db->slot_fini = fini;
            __atomic_store_n(&db->slot, p, __ATOMIC_RELEASE);
        }
    }
    void *p = db->slot;
    pthread_mutex_unlock(&db->mu);
    return p;
}

void rl__db_locality(rl_db *db, const uint8_t *key, size_t key_len, rl__kv_locality *out) {
    memset(out, 0, sizeof *out);
    if (db->be->vt->locality && key_len <= UINT32_MAX) db->be->vt->locality(db->be, key, (uint32_t)key_len, out);
}
