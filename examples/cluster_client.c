/* cluster_client.c — a client of a reclayer cluster: several threads share one rl_db (the
 * cluster client's connections and location cache), each commits its own keys; then one
 * range read brings them all back, and the database's status says which servers it talks to.
 *
 *   rl cluster up --dir /tmp/c1 --storage 2       (prints the cluster file)
 *   cc cluster_client.c $(pkg-config --cflags --libs reclayer) -o cluster_client
 *   ./cluster_client cluster:/tmp/c1/reclayer.cluster
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <reclayer/kv.h>
#include <reclayer/tuple.h>

#define THREADS 4
#define KEYS 25

typedef struct {
    rl_db *db;
    int thread;
    int rc;
} worker;

typedef struct {
    int thread, i;
} put_ctx;

static int put(rl_txn *txn, void *ud) {
    const put_ctx *c = ud;
    rl_tuple_builder *b = NULL;
    const uint8_t *k;
    size_t n;
    char v[32];
    int rc = rl_tuple_builder_new(&b);
    if (rc == RL_OK) {
        rl_tuple_add_string(b, "cluster_client", 14);
        rl_tuple_add_int(b, c->thread);
        rl_tuple_add_int(b, c->i);
        rc = rl_tuple_builder_result(b, &k, &n);
    }
    snprintf(v, sizeof v, "thread %d key %d", c->thread, c->i);
    if (rc == RL_OK) rc = rl_txn_set(txn, k, n, v, strlen(v));
    rl_tuple_builder_free(b);
    return rc;
}

static void *work(void *arg) {
    worker *w = arg;
    for (int i = 0; i < KEYS && w->rc == RL_OK; i++) {
        put_ctx c = {w->thread, i};
        w->rc = rl_db_run(w->db, put, &c); /* one transaction per key, retried on conflicts */
    }
    return NULL;
}

typedef struct {
    int count;
} range_ctx;

static int count_all(rl_txn *txn, void *ud) {
    range_ctx *r = ud;
    rl_tuple_builder *b = NULL;
    const uint8_t *p;
    size_t n;
    uint8_t begin[64], end[64];
    int rc = rl_tuple_builder_new(&b);
    if (rc == RL_OK) {
        rl_tuple_add_string(b, "cluster_client", 14);
        rc = rl_tuple_builder_result(b, &p, &n);
    }
    if (rc == RL_OK && n + 1 > sizeof begin) rc = RL_E_INVALID_ARGUMENT;
    if (rc == RL_OK) { /* the tuple's range: prefix + 0x00 .. prefix + 0xff */
        memcpy(begin, p, n), begin[n] = 0x00;
        memcpy(end, p, n), end[n] = 0xff;
    }
    r->count = 0;
    rl_key_selector sb = RL_FIRST_GREATER_OR_EQUAL(begin, (int)n + 1), se = RL_FIRST_GREATER_OR_EQUAL(end, (int)n + 1);
    int more = rc == RL_OK;
    while (more && rc == RL_OK) {
        rl_future *f = rl_txn_get_range(txn, sb, se, 0, 0, RL_STREAMING_WANT_ALL, 0, 0);
        const rl_keyvalue *kvs;
        int cnt;
        rc = rl_future_wait(f);
        if (rc == RL_OK) rc = rl_future_get_keyvalue_array(f, &kvs, &cnt, &more);
        if (rc == RL_OK) {
            r->count += cnt;
            if (more && cnt > 0) {
                n = (size_t)kvs[cnt - 1].key_len;
                if (n > sizeof begin) rc = RL_E_INVALID_ARGUMENT;
                else memcpy(begin, kvs[cnt - 1].key, n), sb = RL_FIRST_GREATER_THAN(begin, (int)n);
            }
        }
        rl_future_free(f);
    }
    rl_tuple_builder_free(b);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: cluster_client cluster:FILE\n");
        return 2;
    }
    rl_db *db = NULL;
    int rc = rl_db_open(argv[1], NULL, &db);
    if (rc != RL_OK) {
        fprintf(stderr, "cannot open %s: %s: %s\n", argv[1], rl_error_name(rc), rl_last_error_detail());
        return 1;
    }
    pthread_t t[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){db, i, RL_OK};
        pthread_create(&t[i], NULL, work, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        if (w[i].rc != RL_OK && rc == RL_OK) rc = w[i].rc;
    }
    range_ctx r = {0};
    if (rc == RL_OK) rc = rl_db_run(db, count_all, &r);
    if (rc == RL_OK)
        printf("%d threads committed %d keys; a range read returns %d\n", THREADS, THREADS * KEYS, r.count);
    char *status = NULL;
    if (rc == RL_OK && rl_db_status_json(db, &status) == RL_OK) printf("status: %.200s...\n", status);
    rl_free(status);
    if (rc != RL_OK) fprintf(stderr, "cluster_client: %s (%d): %s\n", rl_error_name(rc), rc, rl_error_message(rc));
    rl_db_close(db);
    return rc == RL_OK && r.count == THREADS * KEYS ? 0 : 1;
}
