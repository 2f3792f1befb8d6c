/* test_cluster_concurrency.c — several client processes with several threads each against one
 * real cluster (Tests: "Concurrency"): mixed commits, reads, range reads, mapped reads
 * and cross-thread snapshot reads, checked against a model (seeded; the seed is printed and
 * RL_SEED=N replays the choices).
 *
 * Data, per thread (p, t) of process p: records ("cc", p, t, k) -> value and index entries
 * ("ci", p, t, k) -> "" for k in [0, K), always written and cleared together; a counter
 * ("cn", p, t) and a global counter ("ct") that every write transaction ADDs 1 to. Each thread
 * owns its keys, so its model is exact; commits whose outcome is unknown (1021) are resolved by
 * reading the thread's counter. The cluster has three storage servers and the keyspace split at
 * ("cc", 1), ("cc", 2), ("ci", 1), ("ci", 2), so each process's records and its index entries
 * are on different servers and every mapped read fetches its records storage-to-storage.
 *
 * Checks: own point and range reads equal the model; the index entries are exactly the present
 * records; a mapped read over the own index returns each present record's value; a snapshot of
 * another thread's records and index always has the same key set (no transaction half visible);
 * at the end each thread's counter equals its committed write transactions and the global counter
 * equals the sum of all of them.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/bytes.h"
#include "cluster_fixture.h"
#include "test.h"
#include "tuple/tuple.h"

#define NP 3  /* client processes */
#define NT 3  /* threads per process */
#define NK 16 /* keys per thread */

typedef struct {
    rl_db *db;
    int p, t;
    uint64_t rs;
    int ops;
    char model[NK][48]; /* "" = absent */
    int64_t writes;     /* committed write transactions */
    int gen;
    char err[512]; /* the first failure */
    int n_mapped, n_cross, n_reads, n_commits, n_unknown;
} thr;

static void key3(rl_buf *b, const char *tag, int p, int t, int k) {
    rl__buf_reset(b);
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, b);
    rl__tuple_pack_string(&pk, tag, strlen(tag));
    if (p >= 0) rl__tuple_pack_int(&pk, p);
    if (t >= 0) rl__tuple_pack_int(&pk, t);
    if (k >= 0) rl__tuple_pack_int(&pk, k);
}

#define CHECK(th, cond, ...)                                                             \
    do {                                                                                 \
        if (!(cond) && !(th)->err[0]) snprintf((th)->err, sizeof(th)->err, __VA_ARGS__); \
        if ((th)->err[0]) return -1;                                                     \
    } while (0)

static int64_t read_counter(rl_db *db, const rl_buf *k, int *rc_out) {
    rl_txn *t;
    int64_t v = 0;
    *rc_out = rl_txn_begin(db, &t);
    if (*rc_out) return 0;
    for (int attempt = 0; attempt < 50; attempt++) {
        rl_future *f = rl_txn_get(t, k->data, k->len, 0);
        int rc = rl_future_wait(f);
        if (rc == RL_OK) {
            int present, vl;
            const uint8_t *val;
            rl_future_get_value(f, &present, &val, &vl);
            v = 0;
            for (int i = 0; present && i < vl && i < 8; i++) v |= (int64_t)val[i] << (8 * i);
            rl_future_free(f);
            *rc_out = RL_OK;
            rl_txn_free(t);
            return v;
        }
        rl_future_free(f);
        rl_future *e = rl_txn_on_error(t, rc);
        int erc = rl_future_wait(e);
        rl_future_free(e);
        if (erc) {
            *rc_out = erc;
            break;
        }
    }
    rl_txn_free(t);
    return 0;
}

/* One write transaction: keys (mask), set (values) or clear; returns 0 or -1 (th->err). */
static int op_write(thr *th, int all) {
    char vals[NK][48];
    int touch[NK] = {0};
    th->gen++;
    for (int k = 0; k < NK; k++) {
        vals[k][0] = 0;
        if (all) {
            touch[k] = 1;
            snprintf(vals[k], sizeof vals[k], "G%d.%d.%d", th->gen, th->p, th->t);
        }
    }
    if (!all) {
        int m = 1 + (int)rl_test_rand_below(&th->rs, 3);
        for (int i = 0; i < m; i++) {
            int k = (int)rl_test_rand_below(&th->rs, NK);
            touch[k] = 1;
            if (rl_test_rand_below(&th->rs, 4) != 0)
                snprintf(vals[k], sizeof vals[k], "g%d.%d.%d.%d", th->gen, th->p, th->t, k);
            else vals[k][0] = 0;
        }
    }
    rl_txn *t;
    CHECK(th, rl_txn_begin(th->db, &t) == RL_OK, "begin");
    rl_buf kb;
    rl__buf_init(&kb);
    static const uint8_t one[8] = {1};
    for (int k = 0; k < NK; k++) {
        if (!touch[k]) continue;
        key3(&kb, "cc", th->p, th->t, k);
        if (vals[k][0]) rl_txn_set(t, kb.data, kb.len, vals[k], strlen(vals[k]));
        else rl_txn_clear(t, kb.data, kb.len);
        key3(&kb, "ci", th->p, th->t, k);
        if (vals[k][0]) rl_txn_set(t, kb.data, kb.len, "", 0);
        else rl_txn_clear(t, kb.data, kb.len);
    }
    key3(&kb, "cn", th->p, th->t, -1);
    rl_txn_atomic_op(t, kb.data, kb.len, one, 8, RL_ATOMIC_ADD);
    rl_buf tot;
    rl__buf_init(&tot);
    key3(&tot, "ct", -1, -1, -1);
    rl_txn_atomic_op(t, tot.data, tot.len, one, 8, RL_ATOMIC_ADD);
    rl__buf_release(&tot);
    rl_future *f = rl_txn_commit(t);
    int rc = rl_future_wait(f);
    rl_future_free(f);
    rl_txn_free(t);
    int committed = rc == RL_OK;
    if (rc == RL_E_COMMIT_UNKNOWN_RESULT || rc == RL_E_CONNECTION_FAILED) {
        /* Resolve the outcome with the counter. */
        th->n_unknown++;
        int rrc;
        int64_t c = read_counter(th->db, &kb, &rrc);
        if (rrc) rl__buf_release(&kb);
        CHECK(th, rrc == RL_OK, "reading the counter after %s: %s", rl_error_name(rc), rl_error_name(rrc));
        CHECK(th, c == th->writes || c == th->writes + 1, "counter %lld after an unknown commit, model %lld",
              (long long)c, (long long)th->writes);
        committed = c == th->writes + 1;
    } else if (rc != RL_OK) {
        rl__buf_release(&kb);
        CHECK(th, 0, "commit: %s", rl_error_name(rc));
    }
    rl__buf_release(&kb);
    if (committed) {
        th->writes++;
        th->n_commits++;
        for (int k = 0; k < NK; k++)
            if (touch[k]) {
                memcpy(th->model[k], vals[k], sizeof th->model[k]);
                th->model[k][sizeof th->model[k] - 1] = 0;
            }
    }
    return 0;
}

/* Range [prefix, prefix + \xff) of one transaction; all rows (paging on more). */
static int read_prefix(rl_txn *t, const rl_buf *prefix, int flags, rl_keyvalue *out, char (*vals)[48],
                       uint8_t (*keys)[64], int cap, int *n_out) {
    uint8_t end[64];
    memcpy(end, prefix->data, prefix->len);
    end[prefix->len] = 0xff;
    rl_future *f =
        rl_txn_get_range(t, RL_FIRST_GREATER_OR_EQUAL(prefix->data, prefix->len),
                         RL_FIRST_GREATER_OR_EQUAL(end, prefix->len + 1), 0, 0, RL_STREAMING_WANT_ALL, 0, flags);
    int rc = rl_future_wait(f);
    if (rc) {
        rl_future_free(f);
        return rc;
    }
    const rl_keyvalue *kvs;
    int n, more;
    rl_future_get_keyvalue_array(f, &kvs, &n, &more);
    *n_out = 0;
    for (int i = 0; i < n && i < cap; i++) {
        memcpy(keys[i], kvs[i].key, kvs[i].key_len < 64 ? kvs[i].key_len : 64);
        snprintf(vals[i], 48, "%.*s", (int)kvs[i].value_len, (const char *)kvs[i].value);
        out[i].key = keys[i];
        out[i].key_len = kvs[i].key_len;
        (*n_out)++;
    }
    rl_future_free(f);
    return more ? RL_E_INTERNAL_ERROR : RL_OK;
}

/* The k of a key ("cc"/"ci", p, t, k): its last byte (k < 20 packs as \x15 k, 0 as \x14). */
static int key_k(const rl_keyvalue *kv) {
    uint8_t last = kv->key[kv->key_len - 1];
    return kv->key[kv->key_len - 2] == 0x15 ? last : 0;
}

static int op_verify_own(thr *th) {
    rl_txn *t;
    CHECK(th, rl_txn_begin(th->db, &t) == RL_OK, "begin");
    rl_buf pre;
    rl__buf_init(&pre);
    rl_keyvalue rk[NK + 1], ik[NK + 1];
    char rv[NK + 1][48], iv[NK + 1][48];
    uint8_t rkeys[NK + 1][64], ikeys[NK + 1][64];
    int nr = 0, ni = 0, rc;
    key3(&pre, "cc", th->p, th->t, -1);
    rc = read_prefix(t, &pre, 0, rk, rv, rkeys, NK + 1, &nr);
    if (!rc) {
        key3(&pre, "ci", th->p, th->t, -1);
        rc = read_prefix(t, &pre, 0, ik, iv, ikeys, NK + 1, &ni);
    }
    int k = (int)rl_test_rand_below(&th->rs, NK), present = 0, vl = 0;
    const uint8_t *v = NULL;
    rl_future *f = NULL;
    if (!rc) {
        key3(&pre, "cc", th->p, th->t, k);
        f = rl_txn_get(t, pre.data, pre.len, 0);
        rc = rl_future_wait(f);
        if (!rc) rl_future_get_value(f, &present, &v, &vl);
    }
    rl__buf_release(&pre);
    char got[48] = "";
    if (!rc && present) snprintf(got, sizeof got, "%.*s", vl, (const char *)v);
    rl_future_free(f);
    rl_txn_free(t);
    CHECK(th, rc == RL_OK, "own reads: %s", rl_error_name(rc));
    th->n_reads++;
    CHECK(th, !strcmp(got, th->model[k]), "get k=%d: '%s', model '%s'", k, got, th->model[k]);
    int want = 0;
    for (int i = 0; i < NK; i++) want += th->model[i][0] != 0;
    CHECK(th, nr == want && ni == want, "range: %d records and %d index entries, model %d", nr, ni, want);
    for (int i = 0; i < nr; i++) {
        int kk = key_k(&rk[i]);
        CHECK(th, kk >= 0 && kk < NK && !strcmp(rv[i], th->model[kk]), "range row k=%d '%.47s', model '%.47s'", kk,
              rv[i], kk >= 0 && kk < NK ? th->model[kk] : "?");
        CHECK(th, key_k(&ik[i]) == kk, "index entry %d is k=%d, record k=%d", i, key_k(&ik[i]), kk);
    }
    return 0;
}

static int op_mapped(thr *th) {
    rl_buf pre, mapper;
    rl__buf_init(&pre);
    rl__buf_init(&mapper);
    key3(&pre, "ci", th->p, th->t, -1);
    uint8_t end[64];
    memcpy(end, pre.data, pre.len);
    end[pre.len] = 0xff;
    rl__tuple_packer pk;
    rl__tuple_packer_init(&pk, &mapper);
    rl__tuple_pack_string(&pk, "cc", 2);
    rl__tuple_pack_string(&pk, "{K[1]}", 6);
    rl__tuple_pack_string(&pk, "{K[2]}", 6);
    rl__tuple_pack_string(&pk, "{K[3]}", 6);
    rl_txn *t;
    CHECK(th, rl_txn_begin(th->db, &t) == RL_OK, "begin");
    rl_future *f = rl_txn_get_mapped_range(t, RL_FIRST_GREATER_OR_EQUAL(pre.data, pre.len),
                                           RL_FIRST_GREATER_OR_EQUAL(end, pre.len + 1), mapper.data, mapper.len, 0, 0,
                                           RL_STREAMING_WANT_ALL, 0, 0);
    int rc = rl_future_wait(f);
    const rl_mapped_keyvalue *m = NULL;
    int n = 0, more = 0;
    if (!rc) rc = rl_future_get_mapped_keyvalue_array(f, &m, &n, &more);
    int want = 0, bad = -1, seen_remote = 0;
    for (int i = 0; i < NK; i++) want += th->model[i][0] != 0;
    for (int i = 0; !rc && i < n; i++) {
        int kk = key_k(&m[i].index);
        char got[48] = "";
        if (m[i].n_kvs == 1)
            snprintf(got, sizeof got, "%.*s", (int)m[i].kvs[0].value_len, (const char *)m[i].kvs[0].value);
        if (kk < 0 || kk >= NK || m[i].n_kvs != 1 || strcmp(got, th->model[kk])) bad = i;
        seen_remote += !m[i].served_locally;
    }
    rl_future_free(f);
    rl_txn_free(t);
    rl__buf_release(&pre);
    rl__buf_release(&mapper);
    CHECK(th, rc == RL_OK, "mapped read: %s", rl_error_name(rc));
    th->n_mapped++;
    CHECK(th, !more && n == want, "mapped read: %d entries (more %d), model %d", n, more, want);
    CHECK(th, bad < 0, "mapped read: entry %d does not match the model", bad);
    /* The records are on another storage server than the index: every secondary is remote. */
    CHECK(th, seen_remote == n, "mapped read: %d of %d secondaries remote, expected all", seen_remote, n);
    return 0;
}

static int op_cross(thr *th) {
    int p = (int)rl_test_rand_below(&th->rs, NP), tt = (int)rl_test_rand_below(&th->rs, NT);
    rl_txn *t;
    CHECK(th, rl_txn_begin(th->db, &t) == RL_OK, "begin");
    rl_buf pre;
    rl__buf_init(&pre);
    rl_keyvalue rk[NK + 1], ik[NK + 1];
    char rv[NK + 1][48], iv[NK + 1][48];
    uint8_t rkeys[NK + 1][64], ikeys[NK + 1][64];
    int nr = 0, ni = 0;
    key3(&pre, "cc", p, tt, -1);
    int rc = read_prefix(t, &pre, RL_SNAPSHOT, rk, rv, rkeys, NK + 1, &nr);
    if (!rc) {
        key3(&pre, "ci", p, tt, -1);
        rc = read_prefix(t, &pre, RL_SNAPSHOT, ik, iv, ikeys, NK + 1, &ni);
    }
    rl__buf_release(&pre);
    rl_txn_free(t);
    CHECK(th, rc == RL_OK, "cross read of (%d, %d): %s", p, tt, rl_error_name(rc));
    th->n_cross++;
    CHECK(th, nr == ni, "thread (%d, %d) seen half-applied: %d records, %d index entries", p, tt, nr, ni);
    int gen = -1;
    for (int i = 0; i < nr; i++) {
        CHECK(th, key_k(&rk[i]) == key_k(&ik[i]), "thread (%d, %d): record k=%d beside index k=%d", p, tt,
              key_k(&rk[i]), key_k(&ik[i]));
        /* Values name their writer: (p, tt). */
        char who[16];
        snprintf(who, sizeof who, ".%d.%d", p, tt);
        CHECK(th, strstr(rv[i], who) != NULL, "thread (%d, %d): value '%.47s' written by someone else", p, tt, rv[i]);
        (void)gen;
    }
    return 0;
}

static void *thread_main(void *arg) {
    thr *th = arg;
    for (int i = 0; i < th->ops && !th->err[0]; i++) {
        uint64_t r = rl_test_rand_below(&th->rs, 100);
        if (r < 35) op_write(th, 0);
        else if (r < 45) op_write(th, 1);
        else if (r < 65) op_verify_own(th);
        else if (r < 85) op_mapped(th);
        else op_cross(th);
    }
    if (!th->err[0]) op_verify_own(th);
    if (!th->err[0]) {
        rl_buf kb;
        rl__buf_init(&kb);
        key3(&kb, "cn", th->p, th->t, -1);
        int rc;
        int64_t c = read_counter(th->db, &kb, &rc);
        rl__buf_release(&kb);
        if (rc || c != th->writes)
            snprintf(th->err, sizeof th->err, "counter %lld (%s), committed writes %lld", (long long)c,
                     rl_error_name(rc), (long long)th->writes);
    }
    return NULL;
}

/* A client process: NT threads on one rl_db. Exits 0, or 1 after printing the first failure. */
static void client_main(const char *url, int p, uint64_t seed, int ops) {
    rl_db *db = NULL;
    int rc = rl_db_open(url, NULL, &db);
    if (rc) {
        printf("process %d: open: %s\n", p, rl_error_name(rc));
        _exit(1);
    }
    thr ths[NT];
    pthread_t tids[NT];
    for (int t = 0; t < NT; t++) {
        memset(&ths[t], 0, sizeof ths[t]);
        ths[t].db = db;
        ths[t].p = p;
        ths[t].t = t;
        ths[t].rs = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(p * NT + t + 1));
        ths[t].ops = ops;
        pthread_create(&tids[t], NULL, thread_main, &ths[t]);
    }
    int failed = 0;
    for (int t = 0; t < NT; t++) {
        pthread_join(tids[t], NULL);
        printf("process %d thread %d: %d commits (%d unknown, resolved), %d reads, %d mapped, %d cross%s%s\n", p, t,
               ths[t].n_commits, ths[t].n_unknown, ths[t].n_reads, ths[t].n_mapped, ths[t].n_cross,
               ths[t].err[0] ? ": FAILED: " : "", ths[t].err);
        failed |= ths[t].err[0] != 0;
    }
    fflush(stdout);
    rl_db_close(db);
    _exit(failed ? 1 : 0);
}

/* conc-1.1: NP processes x NT threads, mixed operations, checked against the model. */
TEST(conc_1_1_processes_threads_model) {
    rl_buf b;
    rl__buf_init(&b);
    const char *splits[4];
    rl_buf pr[4];
    for (int i = 0; i < 4; i++) {
        rl__buf_init(&pr[i]);
        key3(&b, i < 2 ? "cc" : "ci", i % 2 + 1, -1, -1);
        rl__bytes_printable(&pr[i], b.data, b.len);
        splits[i] = (const char *)pr[i].data;
    }
    rl__buf_release(&b);
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 3;
    o.split = splits;
    o.n_split = 4;
    rl_test_cluster c;
    int rc = rl_test_cluster_start(&c, &o);
    for (int i = 0; i < 4; i++) rl__buf_release(&pr[i]);
    ASSERT_OK(rc);
    rl_db *probe = NULL; /* the cluster opens (or the test fails here, not in a forked client) */
    ASSERT_OK(rl_db_open(c.url, NULL, &probe));
    rl_db_close(probe);
    const char *ops_env = getenv("RL_CONC_OPS");
    int ops = ops_env && *ops_env ? atoi(ops_env) : 120;
    uint64_t seed = rl_test_seed();
    fflush(stdout);
    pid_t kids[NP];
    for (int p = 0; p < NP; p++) {
        kids[p] = fork();
        if (kids[p] == 0) client_main(c.url, p, seed, ops);
        ASSERT_TRUE(kids[p] > 0);
    }
    int failed = 0;
    for (int p = 0; p < NP; p++) {
        int st = 0;
        ASSERT_EQ(waitpid(kids[p], &st, 0), kids[p]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    ASSERT_FALSE(failed);
    /* The global counter is the sum of every thread's. */
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    rl_buf kb;
    rl__buf_init(&kb);
    int64_t sum = 0;
    for (int p = 0; p < NP; p++)
        for (int t = 0; t < NT; t++) {
            key3(&kb, "cn", p, t, -1);
            sum += read_counter(db, &kb, &rc);
            ASSERT_OK(rc);
        }
    key3(&kb, "ct", -1, -1, -1);
    int64_t total = read_counter(db, &kb, &rc);
    ASSERT_OK(rc);
    printf("global counter %lld, sum of the threads' %lld\n", (long long)total, (long long)sum);
    ASSERT_EQ(total, sum);
    rl__buf_release(&kb);
    rl_db_close(db);
    rl_test_cluster_stop(&c);
}

RL_TEST_MAIN(T(conc_1_1_processes_threads_model))
