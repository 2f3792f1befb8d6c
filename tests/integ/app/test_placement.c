/* test_placement.c — shard splits and moves on a real cluster:
 *
 *   placement-2.1  split, then reads and writes across the new boundary; a second split is a
 *                  no-op; the map holds the boundary
 *   placement-2.2  moves under a model-checked workload: a writer commits known values, readers
 *                  check every read (range and point) against the model at their read version,
 *                  while ranges move to one team, across several shards, and to a double team;
 *                  no row is lost, duplicated or read at the wrong version (seeded: RL_SEED=N)
 *   placement-2.3  a coordinator restart during a move: the move record is durable, the
 *                  restarted coordinator resumes the move; the data survives, and a restart after
 *                  the move keeps the new map
 *   placement-2.4  bad input: an unknown team id, an empty range, keys in the system keyspace
 *                  (refused by the coordinator itself, through a raw admin connection)
 *   placement-2.5  a destination killed during its move registers again, is assigned the range
 *                  again and finishes it (a range beginning at "", recorded in DIR/moved-in)
 *   placement-2.6  a source drops the rows of a range that moved away once the move left its
 *                  MVCC window
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/bytes.h"
#include "cluster_fixture.h"
#include "app/placement.h"
#include "test.h"

#define NKEYS 200

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void msleep(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int start(rl_test_cluster *c, int n) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = n;
    o.n_shards = 1; /* ["", "\xff") on storage server 1 */
    return rl_test_cluster_start(c, &o);
}

/* Run fn in transactions until it succeeds (retrying what on_error retries). */
static int run(rl_db *db, int (*fn)(rl_txn *, void *), void *ud) { return rl_db_run(db, fn, ud); }

/* The map as the system keyspace holds it now. */
typedef struct {
    rl__pl_map m;
} map_ctx;

static int read_rows(rl_txn *t, const char *b, size_t bl, const char *e, size_t el, rl_buf *keys, rl_keyvalue **out,
                     int *n) {
    /* Copies: offsets into keys first (it grows), pointers at the end. */
    size_t *off = NULL, cap = 0;
    int total = 0, rc = RL_OK, more = 1;
    rl_buf cur;
    rl__buf_init(&cur);
    rl__buf_append(&cur, b, bl);
    for (int it = 1; more && rc == RL_OK; it++) {
        rl_future *f = rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(cur.data, cur.len),
                                        RL_FIRST_GREATER_OR_EQUAL(e, el), 0, 0, RL_STREAMING_WANT_ALL, it, 0);
        const rl_keyvalue *kvs = NULL;
        int m = 0;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_keyvalue_array(f, &kvs, &m, &more);
        for (int i = 0; rc == RL_OK && i < m; i++) {
            if ((size_t)total * 4 + 4 > cap) {
                cap = cap ? cap * 2 : 1024;
                off = rl__realloc(off, cap * sizeof *off);
            }
            off[total * 4] = keys->len, off[total * 4 + 1] = kvs[i].key_len;
            rl__buf_append(keys, kvs[i].key, kvs[i].key_len);
            off[total * 4 + 2] = keys->len, off[total * 4 + 3] = kvs[i].value_len;
            rl__buf_append(keys, kvs[i].value, kvs[i].value_len);
            total++;
        }
        if (rc == RL_OK && more && m) {
            rl__buf_reset(&cur);
            rl__buf_append(&cur, kvs[m - 1].key, kvs[m - 1].key_len);
            rl__buf_append_byte(&cur, 0);
        }
        if (!m) more = 0;
        rl_future_free(f);
    }
    rl__buf_release(&cur);
    *n = total;
    *out = rl__calloc((size_t)total + 1, sizeof **out);
    for (int i = 0; i < total; i++)
        (*out)[i] = (rl_keyvalue){keys->data + off[i * 4], (uint32_t)off[i * 4 + 1], keys->data + off[i * 4 + 2],
                                  (uint32_t)off[i * 4 + 3]};
    rl__free(off);
    return rc;
}

static int map_fn(rl_txn *t, void *ud) {
    map_ctx *c = ud;
    rl__pl_map_free(&c->m);
    int rc = rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
    rl_buf k1, k2;
    rl__buf_init(&k1);
    rl__buf_init(&k2);
    rl_keyvalue *ks = NULL, *sl = NULL;
    int nks = 0, nsl = 0;
    if (rc == RL_OK) rc = read_rows(t, "\xff/keyServers/", 13, "\xff/keyServers0", 13, &k1, &ks, &nks);
    if (rc == RL_OK) rc = read_rows(t, "\xff/serverList/", 13, "\xff/serverList0", 13, &k2, &sl, &nsl);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rc == RL_OK) rc = rl__pl_map_parse(ks, nks, sl, nsl, &c->m, &msg);
    rl__free(ks);
    rl__free(sl);
    rl__buf_release(&k1);
    rl__buf_release(&k2);
    return rc;
}

/* The team of the shard holding key, as "1,2" (empty if none), and whether key is a boundary. */
static void team_of(rl_db *db, const char *key, char *out, size_t cap, int *boundary) {
    map_ctx c;
    memset(&c, 0, sizeof c);
    ASSERT_OK(run(db, map_fn, &c));
    const rl__pl_shard *s = rl__pl_shard_of(&c.m, (const uint8_t *)key, strlen(key));
    out[0] = 0;
    if (boundary) *boundary = 0;
    if (s) {
        size_t k = 0;
        for (uint32_t i = 0; i < s->n_team; i++)
            k += (size_t)snprintf(out + k, cap - k, "%s%u", i ? "," : "", s->team[i]);
        if (boundary)
            *boundary = rl__bytes_cmp(s->begin, s->begin_len, (const uint8_t *)key, (uint32_t)strlen(key)) == 0;
    }
    rl__pl_map_free(&c.m);
}

/* ---- placement-2.1 ------------------------------------------------------------------------ */

static int fill_fn(rl_txn *t, void *ud) {
    (void)ud;
    char k[16];
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof k, "s/%03d", i);
        rl_txn_set(t, k, strlen(k), "a", 1);
    }
    return RL_OK;
}

static int cross_fn(rl_txn *t, void *ud) {
    (void)ud;
    rl_txn_set(t, "s/049", 5, "x", 1);
    rl_txn_set(t, "s/050", 5, "y", 1);
    rl_txn_clear(t, "s/051", 5);
    return RL_OK;
}

typedef struct {
    int n;
    char first[16], last[16];
    int bad;
} scan_ctx;

static int scan_fn(rl_txn *t, void *ud) {
    scan_ctx *c = ud;
    c->n = 0;
    c->bad = 0;
    rl_buf keys;
    rl__buf_init(&keys);
    rl_keyvalue *kv = NULL;
    int n = 0;
    int rc = read_rows(t, "s/", 2, "s0", 2, &keys, &kv, &n);
    for (int i = 0; rc == RL_OK && i < n; i++) {
        if (i && rl__bytes_cmp(kv[i - 1].key, kv[i - 1].key_len, kv[i].key, kv[i].key_len) >= 0) c->bad++;
        char want = !memcmp(kv[i].key, "s/049", 5) ? 'x' : !memcmp(kv[i].key, "s/050", 5) ? 'y' : 'a';
        if (kv[i].value_len != 1 || kv[i].value[0] != want) c->bad++;
        if (!memcmp(kv[i].key, "s/051", 5)) c->bad++;
    }
    c->n = n;
    rl__free(kv);
    rl__buf_release(&keys);
    return rc;
}

TEST(placement_2_1_split) {
    rl_test_cluster c;
    int rc = start(&c, 2);
    ASSERT_OK(rc);
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    ASSERT_OK(run(db, fill_fn, NULL));
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__version v1 = 0, v2 = 0;
    int did = -1;
    ASSERT_OK(rl__placement_split(c.url, NULL, (const uint8_t *)"s/050", 5, 10000, &v1, &did, &msg));
    ASSERT_EQ(did, 1);
    ASSERT_TRUE(v1 > 0);
    ASSERT_OK(rl__placement_split(c.url, NULL, (const uint8_t *)"s/050", 5, 10000, &v2, &did, &msg));
    ASSERT_EQ(did, 0);
    ASSERT_TRUE(v2 >= v1);
    char team[64];
    int boundary = 0;
    team_of(db, "s/050", team, sizeof team, &boundary);
    ASSERT_TRUE(boundary);
    ASSERT_STR_EQ(team, "1"); /* both halves keep the team */
    team_of(db, "s/049", team, sizeof team, &boundary);
    ASSERT_FALSE(boundary);
    ASSERT_STR_EQ(team, "1");
    ASSERT_OK(run(db, cross_fn, NULL));
    scan_ctx sc;
    ASSERT_OK(run(db, scan_fn, &sc));
    ASSERT_EQ(sc.n, 99);
    ASSERT_EQ(sc.bad, 0);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

/* ---- placement-2.2 ------------------------------------------------------------------------ */

typedef struct {
    rl__version v;
    int present;
    uint32_t val;
} ver_t;

typedef struct {
    ver_t *h;
    int n, cap;
} hist_t;

typedef struct {
    rl_db *db;
    pthread_mutex_t mu;
    hist_t model[NKEYS];
    uint64_t started, recorded; /* writer commits begun / recorded in the model (under mu) */
    atomic_int stop;
    char err[512];
    uint64_t seed;
    atomic_long reads_checked, rows_checked, commits, retries;
} wl_t;

static void wl_fail(wl_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wl_fail(wl_t *w, const char *fmt, ...) {
    pthread_mutex_lock(&w->mu);
    if (!w->err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof w->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&w->mu);
    atomic_store(&w->stop, 1);
}

static void wkey(char *k, int i) { snprintf(k, 16, "w/%05d", i); }

/* The model's value of key i at version rv (under mu): 1 present with *val, 0 absent. */
static int model_at(wl_t *w, int i, rl__version rv, uint32_t *val) {
    const hist_t *h = &w->model[i];
    int present = 0;
    for (int j = 0; j < h->n && h->h[j].v <= rv; j++) present = h->h[j].present, *val = h->h[j].val;
    return present;
}

static void *writer(void *arg) {
    wl_t *w = arg;
    uint64_t rs = w->seed;
    uint32_t gen = 0;
    while (!atomic_load(&w->stop)) {
        int keys[3], n = 1 + (int)rl_test_rand_below(&rs, 3), pres[3];
        uint32_t vals[3];
        for (int j = 0; j < n; j++) {
            keys[j] = (int)rl_test_rand_below(&rs, NKEYS);
            pres[j] = rl_test_rand_below(&rs, 5) != 0;
            vals[j] = ++gen;
        }
        pthread_mutex_lock(&w->mu);
        w->started++;
        pthread_mutex_unlock(&w->mu);
        rl_txn *t;
        if (rl_txn_begin(w->db, &t) != RL_OK) {
            wl_fail(w, "writer: begin");
            break;
        }
        rl__version cv = 0;
        for (int attempt = 0;; attempt++) {
            char k[16], v[16];
            for (int j = 0; j < n; j++) {
                wkey(k, keys[j]);
                snprintf(v, sizeof v, "%u", vals[j]);
                if (pres[j]) rl_txn_set(t, k, strlen(k), v, strlen(v));
                else rl_txn_clear(t, k, strlen(k));
            }
            rl_future *f = rl_txn_commit(t);
            int rc = rl_future_wait(f);
            rl_future_free(f);
            if (rc == RL_OK) {
                int64_t x = 0;
                rl_txn_get_committed_version(t, &x);
                cv = (rl__version)x;
                break;
            }
            if (rc == RL_E_COMMIT_UNKNOWN_RESULT) {
                wl_fail(w, "writer: commit_unknown_result (the model cannot tell)");
                break;
            }
            atomic_fetch_add(&w->retries, 1);
            rl_future *e = rl_txn_on_error(t, rc);
            int erc = rl_future_wait(e);
            rl_future_free(e);
            if (erc != RL_OK || attempt > 200) {
                wl_fail(w, "writer: commit failed: %s", rl_error_name(rc));
                break;
            }
        }
        rl_txn_free(t);
        if (atomic_load(&w->stop) && cv == 0) break;
        pthread_mutex_lock(&w->mu);
        for (int j = 0; j < n; j++) {
            hist_t *h = &w->model[keys[j]];
            if (h->n == h->cap) {
                h->cap = h->cap ? h->cap * 2 : 16;
                h->h = realloc(h->h, (size_t)h->cap * sizeof *h->h);
            }
            /* Several writes to one key in a transaction: the last wins. */
            if (h->n && h->h[h->n - 1].v == cv) h->n--;
            h->h[h->n++] = (ver_t){cv, pres[j], vals[j]};
        }
        w->recorded = w->started;
        pthread_mutex_unlock(&w->mu);
        atomic_fetch_add(&w->commits, 1);
    }
    return NULL;
}

/* One checked read: a range over every key and a few point reads at one read version. */
static int check_once(wl_t *w, uint64_t *rs) {
    rl_txn *t;
    if (rl_txn_begin(w->db, &t) != RL_OK) return -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        rl_future *gf = rl_txn_get_read_version(t);
        int64_t rv = 0;
        int rc = rl_future_wait(gf);
        if (rc == RL_OK) rl_future_get_int64(gf, &rv);
        rl_future_free(gf);
        pthread_mutex_lock(&w->mu);
        uint64_t s0 = w->started;
        pthread_mutex_unlock(&w->mu);
        rl_buf keys;
        rl__buf_init(&keys);
        rl_keyvalue *kv = NULL;
        int n = 0;
        int pk[3];
        int ppresent[3] = {0};
        char pval[3][16];
        if (rc == RL_OK) rc = read_rows(t, "w/", 2, "w0", 2, &keys, &kv, &n);
        for (int j = 0; j < 3 && rc == RL_OK; j++) {
            char k[16];
            pk[j] = (int)rl_test_rand_below(rs, NKEYS);
            wkey(k, pk[j]);
            rl_future *f = rl_txn_get(t, k, strlen(k), 0);
            rc = rl_future_wait(f);
            if (rc == RL_OK) {
                const uint8_t *val;
                int vl;
                rl_future_get_value(f, &ppresent[j], &val, &vl);
                snprintf(pval[j], sizeof pval[j], "%.*s", ppresent[j] ? vl : 0, ppresent[j] ? (const char *)val : "");
            }
            rl_future_free(f);
        }
        if (rc != RL_OK) {
            rl__free(kv);
            rl__buf_release(&keys);
            atomic_fetch_add(&w->retries, 1);
            rl_future *e = rl_txn_on_error(t, rc);
            int erc = rl_future_wait(e);
            rl_future_free(e);
            if (erc != RL_OK) {
                wl_fail(w, "reader: %s, not retryable", rl_error_name(rc));
                rl_txn_free(t);
                return -1;
            }
            continue;
        }
        /* Every commit at or below rv is in the model once the writer recorded what it had begun. */
        for (int waited = 0;; waited++) {
            pthread_mutex_lock(&w->mu);
            int ok = w->recorded >= s0 || w->err[0];
            pthread_mutex_unlock(&w->mu);
            if (ok) break;
            if (waited > 20000) {
                wl_fail(w, "reader: the writer did not record its commit in 20 s");
                break;
            }
            msleep(1);
        }
        pthread_mutex_lock(&w->mu);
        int seen[NKEYS] = {0}, row_of[NKEYS];
        for (int i = 0; i < n && !w->err[0]; i++) {
            int id = -1;
            char kb[8];
            if (kv[i].key_len == 7) {
                memcpy(kb, kv[i].key, 7);
                kb[7] = 0;
                if (sscanf(kb, "w/%5d", &id) != 1) id = -1;
            }
            if (id < 0 || id >= NKEYS || seen[id]) {
                pthread_mutex_unlock(&w->mu);
                wl_fail(w, "reader: range row %d at version %lld: %s key %.*s", i, (long long)rv,
                        id >= 0 && id < NKEYS ? "duplicated" : "unknown", (int)kv[i].key_len, kv[i].key);
                pthread_mutex_lock(&w->mu);
                break;
            }
            seen[id] = 1;
            row_of[id] = i;
        }
        for (int id = 0; id < NKEYS && !w->err[0]; id++) {
            uint32_t want = 0;
            int present = model_at(w, id, (rl__version)rv, &want);
            char got[16] = "";
            if (seen[id]) snprintf(got, sizeof got, "%.*s", (int)kv[row_of[id]].value_len, kv[row_of[id]].value);
            char ws[16];
            snprintf(ws, sizeof ws, "%u", want);
            if (present != seen[id] || (present && strcmp(got, ws))) {
                snprintf(w->err, sizeof w->err,
                         "reader: key w/%05d at version %lld: read %s%s, the model "
                         "says %s%s",
                         id, (long long)rv, seen[id] ? "" : "nothing", got, present ? "" : "absent", present ? ws : "");
                atomic_store(&w->stop, 1);
            }
        }
        for (int j = 0; j < 3 && !w->err[0]; j++) {
            uint32_t want = 0;
            int present = model_at(w, pk[j], (rl__version)rv, &want);
            char ws[16];
            snprintf(ws, sizeof ws, "%u", want);
            if (present != ppresent[j] || (present && strcmp(ws, pval[j]))) {
                snprintf(w->err, sizeof w->err, "reader: GET w/%05d at version %lld: %s, the model says %s", pk[j],
                         (long long)rv, ppresent[j] ? pval[j] : "absent", present ? ws : "absent");
                atomic_store(&w->stop, 1);
            }
        }
        pthread_mutex_unlock(&w->mu);
        atomic_fetch_add(&w->reads_checked, 1);
        atomic_fetch_add(&w->rows_checked, n);
        rl__free(kv);
        rl__buf_release(&keys);
        rl_txn_free(t);
        return 0;
    }
    rl_txn_free(t);
    wl_fail(w, "reader: 100 retries");
    return -1;
}

static void *reader(void *arg) {
    wl_t *w = arg;
    uint64_t rs = w->seed ^ (uint64_t)(uintptr_t)&rs;
    while (!atomic_load(&w->stop))
        if (check_once(w, &rs) != 0) break;
    return NULL;
}

static void assign(rl_test_cluster *c, const char *b, const char *e, const uint32_t *team, uint32_t n) {
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t moved = 0;
    rl__version v = 0;
    uint64_t t0 = now_ns();
    int rc = rl__placement_assign(c->url, NULL, (const uint8_t *)b, strlen(b), (const uint8_t *)e, strlen(e), team, n,
                                  20000, &v, &moved, &msg);
    printf("assign [%s, %s) to %u%s: %s, %u shards moved at version %llu in %.1f ms %s\n", b, e, team[0],
           n > 1 ? ",..." : "", rl_error_name(rc), moved, (unsigned long long)v, (double)(now_ns() - t0) / 1e6,
           rl__errdetail_len(&msg) ? rl__errdetail_get(&msg) : "");
    ASSERT_OK(rc);
}

/* Wait (30 s at most) until the workload has committed 6 more transactions and checked 3 more
 * reads than now, or stopped on an error (w->err says which). */
static void wl_progress(wl_t *w) {
    long commits = atomic_load(&w->commits) + 6, reads = atomic_load(&w->reads_checked) + 3;
    for (uint64_t t0 = now_ns();
         !atomic_load(&w->stop) && (atomic_load(&w->commits) < commits || atomic_load(&w->reads_checked) < reads);) {
        if (now_ns() - t0 > 30000000000ull)
            fail_msg("the workload made no progress in 30 s: %ld commits, %ld checked reads", atomic_load(&w->commits),
                     atomic_load(&w->reads_checked));
        msleep(2);
    }
}

TEST(placement_2_2_moves_under_load) {
    rl_test_cluster c;
    int rc = start(&c, 3);
    ASSERT_OK(rc);
    static wl_t w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    w.seed = rl_test_seed();
    ASSERT_OK(rl_db_open(c.url, NULL, &w.db));
    pthread_t wt, rt[2];
    pthread_create(&wt, NULL, writer, &w);
    for (int i = 0; i < 2; i++) pthread_create(&rt[i], NULL, reader, &w);
    uint32_t t1[] = {1}, t2[] = {2}, t3[] = {3}, t12[] = {1, 2};
    (void)t1;
    /* The workload makes progress before, between and after the moves (so each move runs under
     * load and the totals asserted below are reached), counted rather than slept for. */
    wl_progress(&w);
    if (!atomic_load(&w.stop)) assign(&c, "w/00050", "w/00150", t2, 1);
    wl_progress(&w);
    if (!atomic_load(&w.stop)) assign(&c, "w/", "w0", t3, 1); /* three shards, two source teams */
    wl_progress(&w);
    if (!atomic_load(&w.stop)) assign(&c, "w/00100", "w0", t12, 2); /* to a double team */
    wl_progress(&w);
    atomic_store(&w.stop, 1);
    pthread_join(wt, NULL);
    for (int i = 0; i < 2; i++) pthread_join(rt[i], NULL);
    printf("commits %ld, checked reads %ld (%ld rows), retries %ld\n", atomic_load(&w.commits),
           atomic_load(&w.reads_checked), atomic_load(&w.rows_checked), atomic_load(&w.retries));
    if (w.err[0]) fail_msg("%s", w.err);
    /* A final check at the newest version, with nothing in flight. */
    atomic_store(&w.stop, 0);
    uint64_t rs = 7;
    ASSERT_EQ(check_once(&w, &rs), 0);
    if (w.err[0]) fail_msg("%s", w.err);
    ASSERT_TRUE(atomic_load(&w.commits) > 20);
    ASSERT_TRUE(atomic_load(&w.reads_checked) > 10);
    char team[64];
    team_of(w.db, "w/00000", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "3");
    team_of(w.db, "w/00099", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "3");
    team_of(w.db, "w/00100", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "1,2");
    team_of(w.db, "w/00199", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "1,2");
    team_of(w.db, "x", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "1");
    rl_db_close(w.db);
    for (int i = 0; i < NKEYS; i++) free(w.model[i].h);
    pthread_mutex_destroy(&w.mu);
    rl_test_cluster_stop(&c);
}

/* ---- placement-2.3 ------------------------------------------------------------------------ */

static int rfill_fn(rl_txn *t, void *ud) {
    (void)ud;
    char k[16], v[16];
    for (int i = 0; i < 50; i++) {
        snprintf(k, sizeof k, "r/%03d", i);
        snprintf(v, sizeof v, "v%d", i);
        rl_txn_set(t, k, strlen(k), v, strlen(v));
    }
    return RL_OK;
}

typedef struct {
    int n, bad, moving;
} rcheck_t;

static int rcheck_fn(rl_txn *t, void *ud) {
    rcheck_t *c = ud;
    rl_buf keys;
    rl__buf_init(&keys);
    rl_keyvalue *kv = NULL;
    int n = 0;
    c->bad = 0;
    int rc = read_rows(t, "r/", 2, "r0", 2, &keys, &kv, &n);
    for (int i = 0; rc == RL_OK && i < n; i++) {
        char want[32];
        snprintf(want, sizeof want, "r/%03d=v%d", i, i);
        char got[64];
        snprintf(got, sizeof got, "%.*s=%.*s", (int)kv[i].key_len, kv[i].key, (int)kv[i].value_len, kv[i].value);
        if (strcmp(want, got)) c->bad++;
    }
    c->n = n;
    rl__free(kv);
    rl__buf_release(&keys);
    rl__buf_init(&keys);
    kv = NULL;
    if (rc == RL_OK) rc = rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0);
    if (rc == RL_OK) rc = read_rows(t, "\xff/moveKeys/", 11, "\xff/moveKeys0", 11, &keys, &kv, &n);
    c->moving = n;
    rl__free(kv);
    rl__buf_release(&keys);
    return rc;
}

/* Every row r/000..r/049 reads back with its value; moving >= 0: that many move records in
 * \xff/moveKeys/ (moving < 0: not checked). */
static void expect_rows(rl_db *db, int moving) {
    rcheck_t rcx;
    ASSERT_OK(run(db, rcheck_fn, &rcx));
    ASSERT_EQ(rcx.n, 50);
    ASSERT_EQ(rcx.bad, 0);
    if (moving >= 0) ASSERT_EQ(rcx.moving, moving);
}

/* A 2-server cluster (the test is skipped when the roles are not built) with r/000..r/049 on
 * storage 1, *db open on it, and storage 2, the destination of the moves, stopped (SIGSTOP):
 * returns its pid. */
static int start_with_frozen_destination(rl_test_cluster *c, rl_db **db) {
    int rc = start(c, 2);
    ASSERT_OK(rc);
    ASSERT_OK(rl_db_open(c->url, NULL, db));
    ASSERT_OK(run(*db, rfill_fn, NULL));
    int dest = rl_test_cluster_pid(c, 2);
    ASSERT_TRUE(dest > 0);
    ASSERT_EQ(kill(dest, SIGSTOP), 0);
    return dest;
}

/* The first line of storage 2's DIR/moved-in (the range it holds and since when) starts with
 * want. */
static void expect_moved_in(const rl_test_cluster *c, const char *want) {
    char path[4400], line[512] = "";
    snprintf(path, sizeof path, "%s/storage-2/moved-in", c->dir);
    FILE *mf = fopen(path, "r");
    ASSERT_NOT_NULL(mf);
    ASSERT_NOT_NULL(fgets(line, sizeof line, mf));
    fclose(mf);
    if (strncmp(line, want, strlen(want)) != 0) fail_msg("moved-in is '%s', want '%s...'", line, want);
}

TEST(placement_2_3_coordinator_restart) {
    rl_test_cluster c;
    rl_db *db;
    /* The destination is frozen: the move starts (its record is committed) and cannot finish. */
    int dest = start_with_frozen_destination(&c, &db);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t t2[] = {2};
    int rc = rl__placement_assign(c.url, NULL, (const uint8_t *)"r/", 2, (const uint8_t *)"r0", 2, t2, 1, 1500, NULL,
                                  NULL, &msg);
    printf("assign with the destination stopped: %s (%s)\n", rl_error_name(rc),
           rl__errdetail_len(&msg) ? rl__errdetail_get(&msg) : "");
    ASSERT_RC(rc, RL_E_TIMED_OUT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg), "destinations 2") != NULL);
    expect_rows(db, 1); /* the durable move record */
    /* Kill the coordinator while the move is in flight; it comes back (not healthy while the
     * destination is stopped), then the destination resumes. */
    rl__errdetail_clear(&msg);
    rc = rl__cluster_restart(c.dir, 0, RL_CLUSTER_KILL, 1000, &msg);
    printf("coordinator restarted: %s\n", rl_error_name(rc));
    ASSERT_EQ(kill(dest, SIGCONT), 0);
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__cluster_wait_healthy(c.dir, 20000, &msg));
    /* The resumed move finishes: the same request now returns once it is done. */
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__placement_assign(c.url, NULL, (const uint8_t *)"r/", 2, (const uint8_t *)"r0", 2, t2, 1, 20000, NULL,
                                   NULL, &msg));
    char team[64];
    team_of(db, "r/000", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "2");
    expect_rows(db, 0);
    /* After the move: a restart keeps the new map and the data. */
    ASSERT_EQ(rl_test_cluster_restart(&c, 0, 1), 0);
    team_of(db, "r/049", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "2");
    expect_rows(db, -1);
    /* The destination recorded the range and the version it holds it from (DIR/moved-in), and a
     * crash of it keeps both the data and that version (its STATUS shows "since"). */
    expect_moved_in(&c, "x722f x7230 "); /* "r/" .. "r0" */
    ASSERT_EQ(rl_test_cluster_restart(&c, 2, 1), 0);
    expect_rows(db, -1);
    char *out = NULL;
    ASSERT_EQ(rl_test_run("rl", &out, NULL, "cluster status --dir '%s' --json", c.dir), 0);
    ASSERT_TRUE(strstr(out, "\"since\":") != NULL);
    free(out);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

/* ---- placement-2.5 ------------------------------------------------------------------------ */

/* A destination killed during its move: it registers again, the coordinator assigns it the range
 * again at its registration's version, and the move finishes with every row. */
TEST(placement_2_5_destination_restart) {
    rl_test_cluster c;
    rl_db *db;
    (void)start_with_frozen_destination(&c, &db);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t t2[] = {2};
    ASSERT_RC(rl__placement_assign(c.url, NULL, (const uint8_t *)"", 0, (const uint8_t *)"r0", 2, t2, 1, 1000, NULL,
                                   NULL, &msg),
              RL_E_TIMED_OUT);
    ASSERT_EQ(rl_test_cluster_restart(&c, 2, 1), 0); /* SIGKILL (it is stopped), then start */
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__placement_assign(c.url, NULL, (const uint8_t *)"", 0, (const uint8_t *)"r0", 2, t2, 1, 20000, NULL,
                                   NULL, &msg));
    char team[64];
    team_of(db, "", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "2");
    team_of(db, "r/049", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "2");
    team_of(db, "r0", team, sizeof team, NULL);
    ASSERT_STR_EQ(team, "1");
    expect_rows(db, 0);
    /* The moved range begins at "": its record has an empty begin key. */
    expect_moved_in(&c, "x x7230 ");
    ASSERT_EQ(rl_test_cluster_restart(&c, 2, 1), 0);
    expect_rows(db, -1);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

/* ---- placement-2.6 ------------------------------------------------------------------------ */

static int touch_fn(rl_txn *t, void *ud) {
    (void)ud;
    return rl_txn_set(t, "a", 1, "tick", 4);
}

/* The storage STATUS of server id from `rl cluster status --json` (heap JSON, the caller's). */
static json_t *storage_status(rl_test_cluster *c, int id) {
    char *out = NULL;
    rl_test_run("rl", &out, NULL, "cluster status --dir '%s' --json", c->dir);
    json_error_t je;
    json_t *j = out ? json_loads(out, 0, &je) : NULL;
    free(out);
    json_t *st = json_incref(json_object_get(json_array_get(json_object_get(j, "processes"), (size_t)id), "status"));
    json_decref(j);
    return st;
}

/* A source drops the rows of a range that moved away once the move left its MVCC window (0.3 s
 * here): STATUS counts the dropped range and the keys are gone; reads of the range keep working
 * on its new team. */
TEST(placement_2_6_source_drops_rows) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.n_shards = 1;
    o.window_versions = 300000;
    rl_test_cluster c;
    int rc = rl_test_cluster_start(&c, &o);
    ASSERT_OK(rc);
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    ASSERT_OK(run(db, rfill_fn, NULL));
    ASSERT_OK(run(db, touch_fn, NULL));
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t t2[] = {2};
    ASSERT_OK(rl__placement_assign(c.url, NULL, (const uint8_t *)"r/", 2, (const uint8_t *)"r0", 2, t2, 1, 20000, NULL,
                                   NULL, &msg));
    json_t *st = NULL;
    int dropped = 0;
    for (int i = 0; i < 100 && !dropped; i++) { /* versions move with commits only */
        ASSERT_OK(run(db, touch_fn, NULL));
        msleep(50);
        json_decref(st);
        st = storage_status(&c, 1);
        dropped = json_integer_value(json_object_get(st, "dropped_ranges")) >= 1;
    }
    ASSERT_TRUE(dropped);
    ASSERT_EQ(json_integer_value(json_object_get(st, "keys")), 1); /* only "a" is left */
    json_decref(st);
    expect_rows(db, -1);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

/* ---- placement-2.4 ------------------------------------------------------------------------ */

TEST(placement_2_4_bad_input) {
    rl_test_cluster c;
    int rc = start(&c, 2);
    ASSERT_OK(rc);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    uint32_t t9[] = {9}, t1[] = {1};
    ASSERT_RC(rl__placement_assign(c.url, NULL, (const uint8_t *)"a", 1, (const uint8_t *)"b", 1, t9, 1, 5000, NULL,
                                   NULL, &msg),
              RL_E_INVALID_ARGUMENT);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg), "9") != NULL);
    /* The coordinator's own checks, past the library's: a raw admin connection. */
    char ip[16];
    uint16_t port;
    ASSERT_OK(rl__placement_coordinator(c.url, ip, &port, &msg));
    rl__admin_conn *ac;
    ASSERT_OK(rl__admin_conn_open(port, &c.key.auth, 5000, &ac, &msg));
    rl__msg req, rep;
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_SPLIT_SHARD;
    req.u.split_shard_req.key = (const uint8_t *)"\xff\x01";
    req.u.split_shard_req.key_len = 2;
    ASSERT_RC(rl__admin_conn_call(ac, &req, &rep, 5000, &msg), RL_E_INVALID_ARGUMENT);
    req.u.split_shard_req.key = (const uint8_t *)"";
    req.u.split_shard_req.key_len = 0;
    ASSERT_RC(rl__admin_conn_call(ac, &req, &rep, 5000, &msg), RL_E_INVALID_ARGUMENT);
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_ASSIGN_SHARD;
    req.u.assign_shard_req.range = (rl__keyrange){(const uint8_t *)"a", 1, (const uint8_t *)"\xff\x01", 2};
    req.u.assign_shard_req.team = t1;
    req.u.assign_shard_req.n_team = 1;
    ASSERT_RC(rl__admin_conn_call(ac, &req, &rep, 5000, &msg), RL_E_INVALID_ARGUMENT);
    req.u.assign_shard_req.range = (rl__keyrange){(const uint8_t *)"a", 1, (const uint8_t *)"b", 1};
    req.u.assign_shard_req.team = t9;
    ASSERT_RC(rl__admin_conn_call(ac, &req, &rep, 5000, &msg), RL_E_INVALID_ARGUMENT);
    /* MOVE_SHARD from an admin connection is refused; the connection stays usable. */
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_MOVE_SHARD;
    req.u.move_shard_req.storage_id = 1;
    req.u.move_shard_req.range = (rl__keyrange){(const uint8_t *)"a", 1, (const uint8_t *)"b", 1};
    ASSERT_RC(rl__admin_conn_call(ac, &req, &rep, 5000, &msg), RL_E_CLIENT_INVALID_OPERATION);
    memset(&req, 0, sizeof req);
    req.type = RL_MSG_SPLIT_SHARD;
    req.u.split_shard_req.key = (const uint8_t *)"q";
    req.u.split_shard_req.key_len = 1;
    ASSERT_OK(rl__admin_conn_call(ac, &req, &rep, 5000, &msg));
    ASSERT_EQ(rep.u.split_shard_reply.split, 1);
    rl__admin_conn_close(ac);
    /* A client transaction may not write the move records either. */
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set_option(t, RL_TXN_OPT_ACCESS_SYSTEM_KEYS, 0));
    ASSERT_OK(rl_txn_set(t, "\xff/moveKeys/a", 12, "x", 1));
    rl_future *f = rl_txn_commit(t);
    ASSERT_RC(rl_future_wait(f), RL_E_SYSTEM_KEY_WRITE);
    rl_future_free(f);
    rl_txn_free(t);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(placement_2_1_split), T(placement_2_2_moves_under_load), T(placement_2_3_coordinator_restart),
             T(placement_2_4_bad_input), T(placement_2_5_destination_restart), T(placement_2_6_source_drops_rows))
