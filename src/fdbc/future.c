/* future.c — FDBFuture over rl_future: readiness, callbacks on the network thread, cancellation,
 * destruction at any time, and the getters with FoundationDB's struct layouts.
 *
 * An FDBFuture either wraps an rl_future (`inner`, owned) whose completion it converts, or is
 * completed by the library itself (argument errors, unsupported calls, on_error's outcome).
 *
 *     pending --inner completes / fdbc_future_complete--> ready
 *     pending --fdb_future_cancel / fdb_future_destroy--> ready with operation_cancelled (1101)
 *     ready   --fdb_future_release_memory--> ready, results released (getters: future_released)
 *
 * Invariants:
 *   1. ready goes from 0 to 1 once, under mu; the fields it guards (err, results) never change
 *      afterwards except that release_memory / destroy free the results.
 *   2. refs counts the user's handle (until fdb_future_destroy), the inner future's callback
 *      (until it ran, or until rl_future_free of the inner future guaranteed it never will:
 *      inner_cb_done) and a posted callback task (until it ran). The memory is freed when refs
 *      drops to 0, so a late inner completion or a queued task never touches freed memory.
 *   3. A callback set on a ready future runs at once in the setting thread; one set on a pending
 *      future runs on the network thread (fdbc_post) after the future is ready — FoundationDB's
 *      rule — or, with CALLBACKS_ON_EXTERNAL_THREADS (network option 61), on the thread that
 *      completed the inner future (a cancel still posts). It runs at most once, and never after
 *      fdb_future_destroy returned (destroying a pending future cancels it and drops its
 *      callback).
 *   4. Results borrow the inner future's memory (values, keys, rows): the inner future is freed
 *      only by release_memory or destroy, after which no getter hands them out.
 *   5. No lock is held while calling the user's callback or rl_future_free (which waits for a
 *      callback of the inner future running on another thread, and that callback takes mu).
 *   6. get_addresses_for_key's future (FK_STRINGS) has two inner futures, the key's shard map
 *      entry and the server list, read on a transaction of its own (aux_txn, holding a reference
 *      to the database so that it outlives the user's transaction). Each inner counts in refs as
 *      `inner` does (inner_cb_done, inner2_cb_done); the future is ready when both completed (or
 *      at the first error) with the addresses copied out (conv), and aux_txn is freed with the
 *      inner futures by release_memory or destroy, on the caller's thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fdbc/fdbc.h"

/* The future handed out when not even an error future can be allocated. Never freed. */
static FDBFuture oom_future = {
    .kind = FK_NONE,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .ready = 1,
    .err = FDBC_E_LARGE_ALLOC_FAILED,
    .refs = 1,
    .inner_cb_done = 1,
};

static const FDBKeyValue no_rows[1];

static void run_task(fdbc_task *t);

FDBFuture *fdbc_future_new(int kind) {
    FDBFuture *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->kind = kind;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->refs = 1;
    f->inner_cb_done = 1;
    f->task.fn = run_task;
    return f;
}

FDBFuture *fdbc_future_error(int kind, int err) {
    FDBFuture *f = fdbc_future_new(kind);
    if (!f) return &oom_future;
    f->ready = 1;
    f->err = err;
    return f;
}

static void future_free(FDBFuture *f) {
    free(f->conv);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

/* Drop one reference (under no lock); frees after the last (invariant 2). */
static void unref(FDBFuture *f) {
    pthread_mutex_lock(&f->mu);
    int last = --f->refs == 0;
    pthread_mutex_unlock(&f->mu);
    if (last) future_free(f);
}

/* Mark f ready with err and hand its callback to the network thread — or, when here is set,
 * return 1 so that the caller runs f->task itself once it released f->mu (invariant 3). Under
 * f->mu. */
static int mark_ready_here(FDBFuture *f, int err, int here) {
    f->ready = 1;
    f->err = err;
    pthread_cond_broadcast(&f->cv);
    if (!f->cb) return 0;
    f->refs++; /* the task's reference */
    if (here) return 1;
    fdbc_post(&f->task);
    return 0;
}

static void mark_ready(FDBFuture *f, int err) { (void)mark_ready_here(f, err, 0); }

/* The posted callback, on the network thread. */
static void run_task(fdbc_task *t) {
    FDBFuture *f = (FDBFuture *)((char *)t - offsetof(FDBFuture, task));
    pthread_mutex_lock(&f->mu);
    FDBCallback cb = f->destroyed ? NULL : f->cb;
    void *param = f->cb_param;
    f->cb = NULL;
    pthread_mutex_unlock(&f->mu);
    if (cb) cb(f, param);
    unref(f);
}

void fdbc_future_complete(FDBFuture *f, int err) {
    if (f == &oom_future) return;
    pthread_mutex_lock(&f->mu);
    if (!f->ready) mark_ready(f, err);
    pthread_mutex_unlock(&f->mu);
}

/* Convert the inner future's result into f's (kind-specific; FoundationDB's layouts). Returns
 * the FoundationDB code the future completes with. Under f->mu. */
static int convert(FDBFuture *f, rl_future *in) {
    int rc = rl_future_get_error(in);
    if (rc) return fdbc_err(rc);
    switch (f->kind) {
    case FK_NONE: return 0;
    case FK_INT64: return fdbc_err(rl_future_get_int64(in, &f->i64));
    case FK_KEY: return fdbc_err(rl_future_get_key(in, &f->bytes, &f->len));
    case FK_VALUE: return fdbc_err(rl_future_get_value(in, &f->present, &f->bytes, &f->len));
    case FK_KVS: {
        const rl_keyvalue *kvs;
        int n, more;
        if ((rc = rl_future_get_keyvalue_array(in, &kvs, &n, &more))) return fdbc_err(rc);
        FDBKeyValue *out = n ? malloc((size_t)n * sizeof *out) : NULL;
        if (n && !out) return FDBC_E_LARGE_ALLOC_FAILED;
        for (int i = 0; i < n; i++) {
            out[i].key = kvs[i].key;
            out[i].key_length = (int)kvs[i].key_len;
            out[i].value = kvs[i].value;
            out[i].value_length = (int)kvs[i].value_len;
        }
        f->conv = out;
        f->count = n;
        f->more = more;
        return 0;
    }
    case FK_KEYS: {
        const rl_slice *keys;
        int n;
        if ((rc = rl_future_get_key_array(in, &keys, &n))) return fdbc_err(rc);
        FDBKey *out = n ? malloc((size_t)n * sizeof *out) : NULL;
        if (n && !out) return FDBC_E_LARGE_ALLOC_FAILED;
        for (int i = 0; i < n; i++) {
            out[i].key = keys[i].data ? keys[i].data : (const uint8_t *)"";
            out[i].key_length = (int)keys[i].len;
        }
        f->conv = out;
        f->count = n;
        return 0;
    }
    case FK_MAPPED: {
        const rl_mapped_keyvalue *m;
        int n, more;
        if ((rc = rl_future_get_mapped_keyvalue_array(in, &m, &n, &more))) return fdbc_err(rc);
        size_t rows = 0;
        for (int i = 0; i < n; i++) rows += (size_t)m[i].n_kvs;
        size_t sz = (size_t)n * sizeof(FDBMappedKeyValue) + rows * sizeof(FDBKeyValue);
        FDBMappedKeyValue *out = sz ? calloc(1, sz) : NULL;
        if (sz && !out) return FDBC_E_LARGE_ALLOC_FAILED;
        FDBKeyValue *rowp = out ? (FDBKeyValue *)(out + n) : NULL;
        for (int i = 0; i < n; i++) {
            FDBMappedKeyValue *o = &out[i];
            o->key.key = m[i].index.key;
            o->key.key_length = (int)m[i].index.key_len;
            o->value.key = m[i].index.value;
            o->value.key_length = (int)m[i].index.value_len;
            o->getRange.begin.key.key = m[i].begin;
            o->getRange.begin.key.key_length = (int)m[i].begin_len;
            o->getRange.begin.orEqual = 0;
            o->getRange.begin.offset = 1;
            o->getRange.end.key.key = m[i].end;
            o->getRange.end.key.key_length = (int)m[i].end_len;
            o->getRange.end.orEqual = 0;
            o->getRange.end.offset = 1;
            o->getRange.data = m[i].n_kvs ? rowp : (FDBKeyValue *)no_rows;
            o->getRange.m_size = m[i].n_kvs;
            o->getRange.m_capacity = m[i].n_kvs;
            for (int j = 0; j < m[i].n_kvs; j++, rowp++) {
                rowp->key = m[i].kvs[j].key;
                rowp->key_length = (int)m[i].kvs[j].key_len;
                rowp->value = m[i].kvs[j].value;
                rowp->value_length = (int)m[i].kvs[j].value_len;
            }
            o->buffer[RL_FDB_MKV_MORE] = m[i].more ? 1 : 0;
            o->buffer[RL_FDB_MKV_VARIANT] = 1;
        }
        f->conv = out;
        f->count = n;
        f->more = more;
        return 0;
    }
    }
    return FDBC_E_INTERNAL_ERROR;
}

static int addresses_part(FDBFuture *f, rl_future *in, int bit, int here);

/* The inner future completed (any thread, or inline inside rl_future_set_callback). */
static void on_inner(rl_future *in, void *ud) {
    FDBFuture *f = ud;
    int here = fdbc_callbacks_anywhere(), run_now = 0;
    pthread_mutex_lock(&f->mu);
    if (f->kind == FK_STRINGS) {
        run_now = addresses_part(f, in, 1, here);
    } else if (!f->ready && f->inner == in) {
        int err = convert(f, in);
        if (f->on_error_sub && err == f->on_error_sub) err = f->on_error_code;
        run_now = mark_ready_here(f, err, here);
    }
    f->inner_cb_done = 1; /* before the callback runs: it may destroy f (the task's reference
                             keeps the memory) */
    int last = --f->refs == 0;
    pthread_mutex_unlock(&f->mu);
    if (run_now) run_task(&f->task);
    else if (last) future_free(f);
}

FDBFuture *fdbc_future_attach(FDBFuture *f, rl_future *inner) {
    pthread_mutex_lock(&f->mu);
    f->inner = inner;
    f->refs++;
    f->inner_cb_done = 0;
    pthread_mutex_unlock(&f->mu);
    int rc = rl_future_set_callback(inner, on_inner, f);
    if (rc) { /* the callback will never run (kv.h's callback rule) */
        pthread_mutex_lock(&f->mu);
        f->inner_cb_done = 1;
        f->refs--;
        if (!f->ready) mark_ready(f, fdbc_err(rc));
        pthread_mutex_unlock(&f->mu);
    }
    return f;
}

/* Free in, taken out of f as its inner (which 1) or inner2 (which 2); account for its callback
 * (invariant 2). */
static void drop_inner_at(FDBFuture *f, rl_future *in, int which) {
    if (!in) return;
    rl_future_free(in); /* cancels it; waits for its callback if that is running elsewhere */
    pthread_mutex_lock(&f->mu);
    int *done = which == 2 ? &f->inner2_cb_done : &f->inner_cb_done;
    if (!*done) {
        *done = 1;
        f->refs--;
    }
    pthread_mutex_unlock(&f->mu);
}

static void drop_inner(FDBFuture *f, rl_future *in) { drop_inner_at(f, in, 1); }

/* Free get_addresses_for_key's transaction and its database reference (invariant 6), once its
 * inner futures are freed. Caller's thread, no lock held. */
static void drop_aux(FDBFuture *f) {
    pthread_mutex_lock(&f->mu);
    rl_txn *aux = f->aux_txn;
    FDBDatabase *d = f->aux_db;
    f->aux_txn = NULL;
    f->aux_db = NULL;
    pthread_mutex_unlock(&f->mu);
    rl_txn_free(aux);
    if (d) fdbc_database_unref(d);
}

/* ---- get_addresses_for_key (invariant 6) ------------------------------------------------- */

#define SERVERLIST_LEN (sizeof FDBC_SERVERLIST - 1)
#define MAX_TEAM 16

/* FoundationDB's tuple encoding, the two element types the shard map's values use: a
 * non-negative integer (0x14 zero, 0x14 + n: n bytes big-endian) and a string (0x02 ... 0x00, a
 * 0x00 inside escaped as 0x00 0xff). Each decodes the element at *pos of v[0..len) and advances
 * *pos; 0, or -1 when it is malformed or of another type. */
static int tuple_uint(const uint8_t *v, int len, int *pos, uint64_t *out) {
    if (*pos >= len) return -1;
    int n = v[*pos] - 0x14;
    if (n < 0 || n > 8 || *pos + 1 + n > len) return -1;
    uint64_t x = 0;
    for (int i = 0; i < n; i++) x = x << 8 | v[*pos + 1 + i];
    *pos += 1 + n;
    *out = x;
    return 0;
}

static int tuple_string(const uint8_t *v, int len, int *pos, char *out, size_t cap) {
    if (*pos >= len || v[*pos] != 0x02) return -1;
    size_t n = 0;
    for (int i = *pos + 1; i < len; i++) {
        if (v[i] == 0x00) {
            if (i + 1 < len && v[i + 1] == 0xff) {
                i++;
            } else {
                out[n] = 0;
                *pos = i + 1;
                return 0;
            }
        }
        if (n + 1 >= cap) return -1;
        out[n++] = (char)v[i];
    }
    return -1;
}

/* The addresses of the key's team, "IP:PORT" as FoundationDB gives them (just "IP" below API
 * version 630 unless include_port_in_address was set: f->addr_no_port), from the shard map entry
 * (at most one row: "\xff/keyServers/BEGIN" -> tuple of server ids) and the server list
 * ("\xff/serverList/" + 4-byte big-endian id -> (address, port, host)), into f->conv (an array of
 * count pointers followed by the strings). A server missing from the list is left out; no entry
 * (no shard map: not a cluster) gives none. Returns the code the future completes with. Under
 * f->mu, both inner futures complete. */
static int addresses_convert(FDBFuture *f) {
    const rl_keyvalue *ks, *sl;
    int n_ks, n_sl, more, rc;
    if ((rc = rl_future_get_keyvalue_array(f->inner, &ks, &n_ks, &more)) ||
        (rc = rl_future_get_keyvalue_array(f->inner2, &sl, &n_sl, &more)))
        return fdbc_err(rc);
    uint64_t team[MAX_TEAM];
    int n_team = 0, pos = 0;
    if (n_ks > 0) {
        const uint8_t *v = ks[0].value;
        int len = (int)ks[0].value_len;
        while (pos < len && n_team < MAX_TEAM)
            if (tuple_uint(v, len, &pos, &team[n_team++])) return FDBC_E_INTERNAL_ERROR; /* not reclayer's map */
    }
    char addr[MAX_TEAM][64];
    int n = 0;
    size_t bytes = 0;
    for (int t = 0; t < n_team; t++)
        for (int i = 0; i < n_sl; i++) {
            const uint8_t *k = sl[i].key + SERVERLIST_LEN;
            if (sl[i].key_len != SERVERLIST_LEN + 4 ||
                ((uint64_t)k[0] << 24 | (uint64_t)k[1] << 16 | (uint64_t)k[2] << 8 | k[3]) != team[t])
                continue;
            char ip[48];
            uint64_t port;
            int p = 0;
            if (tuple_string(sl[i].value, (int)sl[i].value_len, &p, ip, sizeof ip) ||
                tuple_uint(sl[i].value, (int)sl[i].value_len, &p, &port) || port > 65535)
                return FDBC_E_INTERNAL_ERROR;
            if (f->addr_no_port) snprintf(addr[n], sizeof addr[n], "%s", ip);
            else snprintf(addr[n], sizeof addr[n], "%s:%u", ip, (unsigned)port);
            bytes += strlen(addr[n]) + 1;
            n++;
            break;
        }
    char **out = malloc((size_t)n * sizeof *out + bytes + 1);
    if (!out) return FDBC_E_LARGE_ALLOC_FAILED;
    char *p = (char *)(out + n);
    for (int i = 0; i < n; i++) {
        size_t l = strlen(addr[i]) + 1;
        memcpy(p, addr[i], l);
        out[i] = p;
        p += l;
    }
    f->conv = out;
    f->count = n;
    return 0;
}

/* One of the two reads completed (bit 1: the shard map entry, 2: the server list): the first
 * error completes f, the second success converts. Returns mark_ready_here's. Under f->mu. */
static int addresses_part(FDBFuture *f, rl_future *in, int bit, int here) {
    if (f->ready || (bit == 1 ? f->inner : f->inner2) != in) return 0;
    int rc = rl_future_get_error(in);
    if (rc) return mark_ready_here(f, fdbc_err(rc), here);
    f->parts |= bit;
    if (f->parts != 3) return 0;
    return mark_ready_here(f, addresses_convert(f), here);
}

/* The server list's read completed (the shard map entry's is on_inner). */
static void on_inner2(rl_future *in, void *ud) {
    FDBFuture *f = ud;
    int here = fdbc_callbacks_anywhere();
    pthread_mutex_lock(&f->mu);
    int run_now = addresses_part(f, in, 2, here);
    f->inner2_cb_done = 1;
    int last = --f->refs == 0;
    pthread_mutex_unlock(&f->mu);
    if (run_now) run_task(&f->task);
    else if (last) future_free(f);
}

FDBFuture *fdbc_future_attach_addresses(FDBFuture *f, rl_future *ks, rl_future *sl, rl_txn *aux, FDBDatabase *d) {
    pthread_mutex_lock(&d->mu);
    d->refs++;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_lock(&f->mu);
    f->aux_txn = aux;
    f->aux_db = d;
    f->inner = ks;
    f->inner2 = sl;
    f->refs += 2;
    f->inner_cb_done = 0;
    f->inner2_cb_done = 0;
    pthread_mutex_unlock(&f->mu);
    for (int which = 1; which <= 2; which++) {
        int rc = rl_future_set_callback(which == 1 ? ks : sl, which == 1 ? on_inner : on_inner2, f);
        if (rc) { /* that callback will never run */
            pthread_mutex_lock(&f->mu);
            *(which == 1 ? &f->inner_cb_done : &f->inner2_cb_done) = 1;
            f->refs--;
            if (!f->ready) mark_ready(f, fdbc_err(rc));
            pthread_mutex_unlock(&f->mu);
        }
    }
    return f;
}

/* ---- The public functions ---------------------------------------------------------------- */

/* Cancel: a pending future becomes ready with operation_cancelled and its operation is
 * cancelled; its callback runs (on the network thread). No effect on a ready future. */
FDBC_API void fdb_future_cancel(FDBFuture *f) {
    if (!f || f == &oom_future) return;
    pthread_mutex_lock(&f->mu);
    if (f->ready || f->destroyed) {
        pthread_mutex_unlock(&f->mu);
        return;
    }
    rl_future *in = f->inner, *in2 = f->inner2;
    f->inner = f->inner2 = NULL;
    mark_ready(f, FDBC_E_OPERATION_CANCELLED);
    pthread_mutex_unlock(&f->mu);
    drop_inner(f, in);
    drop_inner_at(f, in2, 2);
}

/* Release the result's memory; the error stays readable, getters return future_released. */
FDBC_API void fdb_future_release_memory(FDBFuture *f) {
    if (!f || f == &oom_future) return;
    pthread_mutex_lock(&f->mu);
    if (!f->ready || f->released) {
        pthread_mutex_unlock(&f->mu);
        return;
    }
    f->released = 1;
    rl_future *in = f->inner, *in2 = f->inner2;
    f->inner = f->inner2 = NULL;
    free(f->conv);
    f->conv = NULL;
    pthread_mutex_unlock(&f->mu);
    drop_inner(f, in);
    drop_inner_at(f, in2, 2);
    drop_aux(f);
}

/* Destroy (exactly once per future): cancels a pending one; its callback never runs after this
 * returns (invariant 3). */
FDBC_API void fdb_future_destroy(FDBFuture *f) {
    if (!f || f == &oom_future) return;
    pthread_mutex_lock(&f->mu);
    f->destroyed = 1;
    f->cb = NULL;
    rl_future *in = f->inner, *in2 = f->inner2;
    f->inner = f->inner2 = NULL;
    if (!f->ready) {
        f->ready = 1;
        f->err = FDBC_E_OPERATION_CANCELLED;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    drop_inner(f, in);
    drop_inner_at(f, in2, 2);
    drop_aux(f);
    unref(f);
}

/* Wait until ready. Never from a callback on the network thread for a pending future (that would
 * wait for itself): blocked_from_network_thread, as FoundationDB detects. The wait wakes every
 * second to re-check (no unbounded wait); it ends when the future is ready. */
FDBC_API fdb_error_t fdb_future_block_until_ready(FDBFuture *f) {
    if (!f) return FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_lock(&f->mu);
    if (!f->ready && fdbc_on_network_thread()) {
        pthread_mutex_unlock(&f->mu);
        return FDBC_E_BLOCKED_FROM_NETWORK_THREAD;
    }
    while (!f->ready) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&f->cv, &f->mu, &ts);
    }
    pthread_mutex_unlock(&f->mu);
    return 0;
}

FDBC_API fdb_bool_t fdb_future_is_ready(FDBFuture *f) {
    if (!f) return 0;
    pthread_mutex_lock(&f->mu);
    int r = f->ready;
    pthread_mutex_unlock(&f->mu);
    return r;
}

/* Set the future's one callback (invariant 3). A second callback is client_invalid_operation. */
FDBC_API fdb_error_t fdb_future_set_callback(FDBFuture *f, FDBCallback cb, void *param) {
    if (!f || !cb) return FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_lock(&f->mu);
    if (f->cb || f->destroyed) {
        pthread_mutex_unlock(&f->mu);
        return FDBC_E_CLIENT_INVALID_OPERATION;
    }
    if (f->ready) {
        pthread_mutex_unlock(&f->mu);
        cb(f, param);
        return 0;
    }
    f->cb = cb;
    f->cb_param = param;
    pthread_mutex_unlock(&f->mu);
    return 0;
}

FDBC_API fdb_error_t fdb_future_get_error(FDBFuture *f) {
    if (!f) return FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_lock(&f->mu);
    int rc = f->ready ? f->err : FDBC_E_FUTURE_NOT_SET;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* The common checks of a getter: ready, no error, not released, the right kind. */
static int check(FDBFuture *f, int kind) {
    if (!f) return FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    if (!f->ready) rc = FDBC_E_FUTURE_NOT_SET;
    else if (f->err) rc = f->err;
    else if (f->released) rc = FDBC_E_FUTURE_RELEASED;
    else if (f->kind != kind) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_int64(FDBFuture *f, int64_t *out) {
    int rc = check(f, FK_INT64);
    if (rc == 0 && !out) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) *out = f->i64;
    return rc;
}

/* fdb_future_get_version: fdb_future_get_int64 under its name before API version 620, which
 * removed it (FoundationDB's FDB_API_REMOVED: the program's header version decides). Called by a
 * program built for 620 or later, FoundationDB's client aborts; this one says so and fails with
 * api_version_not_supported instead. */
FDBC_API fdb_error_t fdb_future_get_version(FDBFuture *f, int64_t *out) {
    if (fdbc_header_version() >= 620) {
        fprintf(stderr, "libfdb_c (reclayer): fdb_future_get_version was removed in API version 620; "
                        "use fdb_future_get_int64\n");
        return FDBC_E_API_VERSION_NOT_SUPPORTED;
    }
    return fdb_future_get_int64(f, out);
}

FDBC_API fdb_error_t fdb_future_get_uint64(FDBFuture *f, uint64_t *out) {
    int rc = check(f, FK_UINT64);
    if (rc == 0 && !out) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) *out = (uint64_t)f->i64;
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_bool(FDBFuture *f, fdb_bool_t *out) {
    int rc = check(f, FK_BOOL);
    if (rc == 0 && !out) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) *out = f->i64 != 0;
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_double(FDBFuture *f, double *out) {
    int rc = check(f, FK_DOUBLE);
    if (rc == 0 && !out) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) *out = (double)f->i64;
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_key(FDBFuture *f, const uint8_t **out_key, int *out_len) {
    int rc = check(f, FK_KEY);
    if (rc == 0 && (!out_key || !out_len)) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) {
        *out_key = f->bytes ? f->bytes : (const uint8_t *)"";
        *out_len = f->len;
    }
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_value(FDBFuture *f, fdb_bool_t *out_present, const uint8_t **out_value,
                                          int *out_len) {
    int rc = check(f, FK_VALUE);
    if (rc == 0 && (!out_present || !out_value || !out_len)) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) {
        *out_present = f->present;
        if (f->present) {
            *out_value = f->bytes ? f->bytes : (const uint8_t *)"";
            *out_len = f->len;
        }
    }
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_keyvalue_array(FDBFuture *f, const FDBKeyValue **out_kv, int *out_count,
                                                   fdb_bool_t *out_more) {
    int rc = check(f, FK_KVS);
    if (rc == 0 && (!out_kv || !out_count)) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) {
        *out_kv = f->conv ? f->conv : no_rows;
        *out_count = f->count;
        if (out_more) *out_more = f->more;
    }
    return rc;
}

FDBC_API fdb_error_t fdb_future_get_mappedkeyvalue_array(FDBFuture *f, const FDBMappedKeyValue **out_kv, int *out_count,
                                                         fdb_bool_t *out_more) {
    static const FDBMappedKeyValue no_entries[1];
    int rc = check(f, FK_MAPPED);
    if (rc == 0 && (!out_kv || !out_count)) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) {
        *out_kv = f->conv ? f->conv : no_entries;
        *out_count = f->count;
        if (out_more) *out_more = f->more;
    }
    return rc;
}

/* get_range_split_points' keys: borrowed from the future until it is destroyed or its memory
 * released. */
FDBC_API fdb_error_t fdb_future_get_key_array(FDBFuture *f, const FDBKey **out, int *out_count) {
    static const FDBKey no_keys[1];
    int rc = check(f, FK_KEYS);
    if (rc == 0 && (!out || !out_count)) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) {
        *out = f->conv ? f->conv : no_keys;
        *out_count = f->count;
    }
    return rc;
}

/* get_addresses_for_key's strings: borrowed from the future until it is destroyed or its memory
 * released. */
FDBC_API fdb_error_t fdb_future_get_string_array(FDBFuture *f, const char ***out, int *out_count) {
    static const char *no_strings[1];
    int rc = check(f, FK_STRINGS);
    if (rc == 0 && (!out || !out_count)) rc = FDBC_E_CLIENT_INVALID_OPERATION;
    if (rc == 0) {
        *out = f->conv ? (const char **)f->conv : no_strings;
        *out_count = f->count;
    }
    return rc;
}

/* Kinds this library never produces a value for (their futures always hold an error, so the
 * getters return that error, or client_invalid_operation for a future of another kind). */
FDBC_API fdb_error_t fdb_future_get_keyrange_array(FDBFuture *f, const FDBKeyRange **out, int *out_count) {
    (void)out;
    (void)out_count;
    int rc = check(f, FK_RANGES);
    return rc ? rc : FDBC_E_UNSUPPORTED_OPERATION;
}

FDBC_API fdb_error_t fdb_future_get_granule_summary_array(FDBFuture *f, const FDBGranuleSummary **out, int *out_count) {
    (void)out;
    (void)out_count;
    int rc = check(f, FK_RANGES);
    return rc ? rc : FDBC_E_UNSUPPORTED_OPERATION;
}

FDBC_API fdb_error_t fdb_future_readbg_get_descriptions(FDBFuture *f, void **out, int *desc_count) {
    (void)out;
    (void)desc_count;
    int rc = check(f, FK_RANGES);
    return rc ? rc : FDBC_E_UNSUPPORTED_OPERATION;
}
