/* watch.c — rl_txn_watch: FoundationDB's watches over any backend that has them (backend.h,
 * rl__kv_watch), with the transaction's part — pending until the commit, fired by the
 * transaction's own writes, failed by its commit or its reset — kept here, once, above them all
 * (docs/design.md §2, "Watches").
 *
 * A watch's life:
 *
 *   rl_txn_watch ──▶ PENDING (on t->watches) ──commit ok──▶ REGISTERING ──▶ REGISTERED ──change──▶ done
 *                      │ own write changes the value: fired at once     │ read version,   │ (backend
 *                      │ commit fails: its error                        │ value (backend) │  done)
 *                      │ reset / cancel / free: transaction_cancelled   ▼                 ▼
 *                      └───────────────────────────────────────────▶ done ◀── rl_future_free: cancelled
 *
 *   transition            function                           thread
 *   --------------------  ---------------------------------  --------------------------------------
 *   -> PENDING            rl_txn_watch                       caller
 *   PENDING -> done       rl__watch_take_written, _committed the writer's / the commit's completer
 *   -> REGISTERING        rl__watch_committed (register_*)   the commit's completer
 *   -> REGISTERED         register_start                     whoever completed the last step
 *   REGISTERED -> done    on_change (the backend's done)     the backend's (backend.h)
 *   * -> cancelled        rl__watch_cancel                   the caller of rl_future_free
 *
 * Invariants:
 *   1. A watch holds one reference to its future from rl_txn_watch until it is finished
 *      (finish: the `done` exchange makes that exactly once), so the rl__watch — in the future's
 *      arena — lives at least that long; the user's reference keeps it alive during a cancel.
 *   2. A watch counts in db->n_watches from rl_txn_watch until it finishes or is cancelled,
 *      whichever comes first (the `counted` exchange makes the release exactly once):
 *      FoundationDB's too_many_watches counts watches that have not reported.
 *   3. The value a watch compares with is the one its transaction saw: written by it before the
 *      watch (W_OWN, or W_OWN_UNKNOWN: atomic operations, read back at the commit version), or
 *      stored at its read version (W_STORED; no read version: a fresh one at the commit). The
 *      backend is handed that value and that version and reports any change after it.
 *   4. `reg` settles the race of a cancel with the registration: whoever of the two comes second
 *      calls the backend's watch_cancel, and the registering side holds an extra reference to the
 *      future across the backend call, so the watch is alive when it does.
 *   5. No lock of this file or of the transaction is held while a future completes.
 */
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "kv/kv_int.h"

enum { W_STORED = 0, W_OWN = 1, W_OWN_UNKNOWN = 2 };

#define MAX_MAX_WATCHES 1000000

/* ---- Counting (invariant 2) ----------------------------------------------------------------- */

int rl_db_set_option(rl_db *db, rl_db_option opt, int64_t value) {
    if (!db) return RL_E_INVALID_ARGUMENT;
    if (opt != RL_DB_OPT_MAX_WATCHES) return RL_E_INVALID_OPTION;
    if (value < 0 || value > MAX_MAX_WATCHES) return RL_E_INVALID_OPTION_VALUE;
    pthread_mutex_lock(&db->mu);
    db->max_watches = value;
    pthread_mutex_unlock(&db->mu);
    return RL_OK;
}

static void uncount(rl__watch *w) {
    if (!__atomic_exchange_n(&w->counted, 0, __ATOMIC_ACQ_REL)) return;
    pthread_mutex_lock(&w->db->mu);
    w->db->n_watches--;
    pthread_mutex_unlock(&w->db->mu);
}

/* Complete the watch with err once (invariant 1): release its count and its reference. */
static void finish(rl__watch *w, int err) {
    if (__atomic_exchange_n(&w->done, 1, __ATOMIC_ACQ_REL)) return;
    uncount(w);
    rl__future_complete_unref(w->f, err);
}

/* ---- Creating ------------------------------------------------------------------------------- */

static int validate(rl_txn *t, const void *key, size_t key_len) {
    int rc = rl__txn_check_usable(t);
    if (rc) return rc;
    if (t->committed) return RL_E_USED_DURING_COMMIT;
    if (t->ryw_disabled) return RL_E_WATCHES_DISABLED;
    if (key_len > RL_KEY_SIZE_LIMIT) return RL_E_KEY_TOO_LARGE;
    const uint8_t *k = key;
    if (key_len && k[0] == 0xff && (!t->access_system_keys || (key_len >= 2 && k[1] == 0xff)))
        return RL_E_KEY_OUTSIDE_LEGAL_RANGE;
    if (!t->db->be->vt->watch) return RL_E_UNSUPPORTED_OPERATION;
    return RL_OK;
}

/* What the write map says of key k: 1 and the value (present, v) when it is known, 0 when the
 * transaction did not write it, -1 when it wrote atomic operations over an unknown value. */
static int written_value(const rl_txn *t, const uint8_t *k, uint32_t kl, int *present, const uint8_t **v,
                         uint32_t *vl) {
    const rl__wm_point *p = rl__wmap_find(&t->wm, k, kl);
    *present = 0, *v = NULL, *vl = 0;
    if (p) {
        if (p->kind == WM_VALUE) {
            *present = 1, *v = p->value, *vl = p->value_len;
            return 1;
        }
        if (p->kind == WM_CLEARED) return 1;
        return -1;
    }
    return rl__wmap_in_clear(&t->wm, k, kl) ? 1 : 0;
}

rl_future *rl_txn_watch(rl_txn *t, const void *key, size_t key_len) {
    if (!t || (!key && key_len)) return rl__future_error(RL_FUT_NONE, RL_E_INVALID_ARGUMENT);
    rl_future *f = rl__future_new(RL_FUT_NONE);
    if (f->is_static) return f;
    rl__txn_lock(t);
    int rc = validate(t, key, key_len);
    rl__watch *w = NULL;
    if (rc == RL_OK) {
        w = rl__arena_alloc(&f->arena, sizeof *w);
        uint8_t *kc = rl__arena_memdup(&f->arena, key, key_len);
        if (!w || !kc) rc = RL_E_OUT_OF_MEMORY;
        else {
            memset(w, 0, sizeof *w);
            w->key = kc;
            w->key_len = (uint32_t)key_len;
        }
    }
    if (rc == RL_OK) {
        int present;
        const uint8_t *v;
        uint32_t vl;
        int known = written_value(t, w->key, w->key_len, &present, &v, &vl);
        w->kind = known > 0 ? W_OWN : known < 0 ? W_OWN_UNKNOWN : W_STORED;
        if (known > 0 && present) {
            w->value = rl__arena_memdup(&f->arena, v, vl);
            if (!w->value) rc = RL_E_OUT_OF_MEMORY;
            w->present = 1;
            w->value_len = vl;
        }
    }
    if (rc == RL_OK) {
        rl_db *db = t->db;
        pthread_mutex_lock(&db->mu);
        if (db->n_watches >= db->max_watches) rc = RL_E_TOO_MANY_WATCHES;
        else db->n_watches++;
        pthread_mutex_unlock(&db->mu);
    }
    if (rc) {
        rl__txn_unlock(t);
        rl__future_complete_unseen(f, rc);
        return f;
    }
    w->f = f;
    w->db = t->db;
    w->counted = 1;
    w->owner = t;
    w->next = t->watches;
    t->watches = w;
    rl__future_ref(f); /* invariant 1 */
    f->watch = w;
    rl__txn_unlock(t);
    return f;
}

/* ---- Before the commit ---------------------------------------------------------------------- */

rl__watch *rl__watch_take_written(rl_txn *t, const uint8_t *b, uint32_t bl, const uint8_t *e, uint32_t el) {
    rl__watch *fired = NULL, **pp = &t->watches;
    while (*pp) {
        rl__watch *w = *pp;
        int hit = e ? rl__bytes_cmp(w->key, w->key_len, b, bl) >= 0 && rl__bytes_cmp(w->key, w->key_len, e, el) < 0
                    : rl__bytes_cmp(w->key, w->key_len, b, bl) == 0;
        int fire = 0;
        if (hit && w->kind != W_STORED) {
            /* A value the watch knows: fire unless the write left the same value. A stored
             * value the transaction has not read: the registration compares (invariant 3). */
            int present;
            const uint8_t *v;
            uint32_t vl;
            int known = written_value(t, w->key, w->key_len, &present, &v, &vl);
            fire = w->kind == W_OWN_UNKNOWN || known <= 0 || present != w->present ||
                   (present && (vl != w->value_len || (vl && memcmp(v, w->value, vl))));
        }
        if (!fire) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->owner = NULL;
        w->next = fired;
        fired = w;
    }
    return fired;
}

void rl__watch_fire(rl__watch *list) {
    while (list) {
        rl__watch *next = list->next;
        list->next = NULL;
        finish(list, RL_OK);
        list = next;
    }
}

rl__watch *rl__watch_take(rl_txn *t) {
    rl__watch *list = t->watches;
    t->watches = NULL;
    for (rl__watch *w = list; w; w = w->next) w->owner = NULL;
    return list;
}

/* ---- Registering (invariants 3, 4) ------------------------------------------------------------ */

static void on_change(rl__kv_watch *kw, int err) { finish((rl__watch *)kw, err); }

/* Hand the watch to the backend (version and value set). */
static void register_start(rl__watch *w) {
    if (__atomic_load_n(&w->cancel, __ATOMIC_ACQUIRE)) {
        finish(w, RL_E_OPERATION_CANCELLED);
        return;
    }
    rl__kv_backend *be = w->db->be;
    w->w.key = w->key;
    w->w.key_len = w->key_len;
    w->w.present = w->present;
    w->w.value = w->value;
    w->w.value_len = w->value_len;
    w->w.done = on_change;
    w->w.ud = w;
    rl_future *f = w->f;
    rl__future_ref(f); /* invariant 4: w lives through the call and the check below */
    be->vt->watch(be, &w->w);
    int expect = 0;
    if (!__atomic_compare_exchange_n(&w->reg, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        be->vt->watch_cancel(be, &w->w); /* the cancel came first (reg 2): ours to pass on */
    rl__future_unref(f);
}

static void on_value(rl__kv_read *r, int err) {
    rl__watch *w = r->ud;
    if (err) {
        finish(w, err);
        return;
    }
    w->present = r->present;
    w->value = (uint8_t *)(r->present ? r->value : NULL);
    w->value_len = r->present ? r->value_len : 0;
    register_start(w);
}

/* Read the key's value at w->w.version (through the backend, like any read), then register. */
static void read_value(rl__watch *w) {
    if (__atomic_load_n(&w->cancel, __ATOMIC_ACQUIRE)) {
        finish(w, RL_E_OPERATION_CANCELLED);
        return;
    }
    static const uint8_t max_key[2] = {0xff, 0xff};
    rl__kv_read *r = &w->r;
    memset(r, 0, sizeof *r);
    r->op = RL_KV_GET;
    r->version = w->w.version;
    r->key = w->key;
    r->key_len = w->key_len;
    r->max_key = max_key;
    r->max_key_len = 2;
    r->arena = &w->f->arena; /* only the backend uses it until done */
    r->done = on_value;
    r->ud = w;
    rl__kv_backend *be = w->db->be;
    be->vt->read(be, r);
}

static void on_version(rl__kv_grv *g, int err) {
    rl__watch *w = g->ud;
    if (err) {
        finish(w, err);
        return;
    }
    w->w.version = g->version;
    read_value(w);
}

/* Register one watch of a transaction that committed (invariant 3). */
static void register_watch(rl__watch *w, int has_rv, rl__version rv, int64_t cv) {
    if (w->kind == W_OWN) {
        w->w.version = cv >= 0 ? (rl__version)cv : rv; /* a write map entry means a commit version */
        register_start(w);
    } else if (w->kind == W_OWN_UNKNOWN && cv >= 0) {
        w->w.version = (rl__version)cv;
        read_value(w);
    } else if (has_rv) {
        w->w.version = rv;
        read_value(w);
    } else {
        memset(&w->g, 0, sizeof w->g);
        w->g.done = on_version;
        w->g.ud = w;
        rl__kv_backend *be = w->db->be;
        be->vt->get_read_version(be, &w->g);
    }
}

void rl__watch_committed(rl__watch *list, int err, int has_rv, rl__version rv, int64_t cv) {
    while (list) {
        rl__watch *next = list->next;
        list->next = NULL;
        if (err) finish(list, err);
        else register_watch(list, has_rv, rv, cv);
        list = next;
    }
}

/* ---- Cancelling ------------------------------------------------------------------------------- */

void rl__watch_cancel(rl__watch *w) {
    uncount(w);
    if (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) return;
    rl_txn *owner = w->owner; /* the transaction's thread frees its futures (kv.h) */
    if (owner) {
        int found = 0;
        rl__txn_lock(owner);
        for (rl__watch **pp = &owner->watches; *pp; pp = &(*pp)->next)
            if (*pp == w) {
                *pp = w->next;
                w->owner = NULL;
                w->next = NULL;
                found = 1;
                break;
            }
        rl__txn_unlock(owner);
        if (found) {
            finish(w, RL_E_OPERATION_CANCELLED);
            return;
        }
    }
    __atomic_store_n(&w->cancel, 1, __ATOMIC_RELEASE); /* the registration steps look at it */
    int expect = 0;
    if (!__atomic_compare_exchange_n(&w->reg, &expect, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        rl__kv_backend *be = w->db->be; /* registered (reg 1): the backend's to cancel */
        be->vt->watch_cancel(be, &w->w);
    }
}
