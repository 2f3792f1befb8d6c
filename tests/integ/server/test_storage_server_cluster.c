/* test_storage_server_cluster.c — the storage server against the real coordinator: a real
 * `rlkvd coordinator` and two real `rlkvd storage` processes (tests/integ/kv/cluster_procs.h
 * starts them with --init, port 0 and port files, and stops them by their recorded pids whatever
 * happens). Commits go through the cluster: client; the test keeps a reference engine (one local
 * rl__storage) with every acknowledged commit applied at its commit version, then reads each
 * storage server directly over the protocol (ss_test.h) at every commit version and compares.
 *
 * Layout (tuples of small integers, so keys have no NUL bytes): records (1, pk, chunk), an
 * index (2, price, pk); shards ["", (1, 60)) on server 1, [(1, 60), (2)) on server 2,
 * [(2), \xff) on server 1 — the index and the records of pk < 60 on server 1, the other records
 * on server 2.
 *
 * ssc-1.1: every version readable and right on each server; mapped reads on server 1 equal the
 *          reference engine's, local below pk 60 and storage-to-storage above; kill -9 of each
 *          storage server after acknowledged commits (more commits while it is down), restart on
 *          its port: it catches up (STATUS known_version reaches the last commit) and serves
 *          every version again, mapped reads included; the coordinator killed with -9 and
 *          restarted, then stopped and restarted cleanly: both storage servers reconnect,
 *          register again and keep up with new commits.
 */
#include <jansson.h>

#include "base/bytes.h"
#include "integ/kv/cluster_procs.h"
#include "storage/mapped.h"
#include "storage/storage.h"
#include "unit/server/ss_test.h"

#define NPK 120
#define SPLIT_PK 60

static void rkey(rl_buf *b, int pk, int chunk) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_int(&p, 1);
    rl__tuple_pack_int(&p, pk);
    rl__tuple_pack_int(&p, chunk);
}
static void ikey(rl_buf *b, int price, int pk) {
    rl__tuple_packer p;
    rl__buf_reset(b);
    rl__tuple_packer_init(&p, b);
    rl__tuple_pack_int(&p, 2);
    rl__tuple_pack_int(&p, price);
    rl__tuple_pack_int(&p, pk);
}

static const char MAPPER[] = "\x15\x01\x02{K[2]}\x00\x02{...}\x00";

/* The reference: every acknowledged commit at its version, and the keys ever written. */
typedef struct {
    rl__storage *ref;
    int64_t versions[400];
    int n_versions;
    rl_buf keys[2 * NPK * 3];
    int n_keys;
    int known[NPK][3]; /* keys[] index of (pk, chunk), -1 */
} model;

static int server_of(const uint8_t *k, uint32_t kl) {
    /* ["", (1, 60)) and [(2), \xff) on 1; [(1, 60), (2)) on 2 */
    static const uint8_t s1[] = {0x15, 0x01, 0x15, SPLIT_PK}, s2[] = {0x15, 0x02};
    if (rl__bytes_cmp(k, kl, s1, sizeof s1) < 0) return 1;
    if (rl__bytes_cmp(k, kl, s2, sizeof s2) < 0) return 2;
    return 1;
}

/* Commit one transaction of random writes (records, index entries, clears); apply it to the
 * reference at its version. */
static void commit_one(rl_db *db, model *md, uint64_t *seed) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    rl__mutation muts[16];
    rl_buf kb[16], vb[16];
    int n = 0;
    int writes = 1 + (int)rl_test_rand_below(seed, 4);
    for (int w = 0; w < writes; w++) {
        int pk = (int)rl_test_rand_below(seed, NPK);
        int chunks = 1 + pk % 3;
        int clear = rl_test_rand_below(seed, 8) == 0;
        for (int ch = 0; ch < chunks && n < 14; ch++) {
            rl__buf_init(&kb[n]);
            rl__buf_init(&vb[n]);
            rkey(&kb[n], pk, ch);
            if (clear) {
                ASSERT_OK(rl_txn_clear(t, kb[n].data, kb[n].len));
                muts[n] = (rl__mutation){RL_MUT_CLEAR, kb[n].data, (uint32_t)kb[n].len, NULL, 0};
            } else {
                rl__buf_printf(&vb[n], "pk%d/%d/%llu", pk, ch, (unsigned long long)rl_test_rand(seed));
                ASSERT_OK(rl_txn_set(t, kb[n].data, kb[n].len, vb[n].data, vb[n].len));
                muts[n] = (rl__mutation){RL_MUT_SET, kb[n].data, (uint32_t)kb[n].len, vb[n].data, (uint32_t)vb[n].len};
            }
            if (md->known[pk][ch] < 0) {
                md->known[pk][ch] = md->n_keys;
                rl__buf_init(&md->keys[md->n_keys]);
                rl__buf_append(&md->keys[md->n_keys], kb[n].data, kb[n].len);
                md->n_keys++;
            }
            n++;
        }
        rl__buf_init(&kb[n]);
        rl__buf_init(&vb[n]);
        ikey(&kb[n], (pk * 37) % 11, pk);
        if (clear) {
            ASSERT_OK(rl_txn_clear(t, kb[n].data, kb[n].len));
            muts[n] = (rl__mutation){RL_MUT_CLEAR, kb[n].data, (uint32_t)kb[n].len, NULL, 0};
        } else {
            ASSERT_OK(rl_txn_set(t, kb[n].data, kb[n].len, "", 0));
            muts[n] = (rl__mutation){RL_MUT_SET, kb[n].data, (uint32_t)kb[n].len, (const uint8_t *)"", 0};
        }
        n++;
    }
    rl_future *f = rl_txn_commit(t);
    ASSERT_OK(rl_future_wait(f));
    rl_future_free(f);
    int64_t v;
    ASSERT_OK(rl_txn_get_committed_version(t, &v));
    rl_txn_free(t);
    ASSERT_OK(rl__storage_apply(md->ref, (rl__version)v, muts, (size_t)n));
    md->versions[md->n_versions++] = v;
    for (int i = 0; i < n; i++) {
        rl__buf_release(&kb[i]);
        rl__buf_release(&vb[i]);
    }
}

/* Wait until storage server port's STATUS says known_version >= v (10 s). */
static void wait_known(uint16_t port, int64_t v) {
    uint64_t end = sst_now_ms() + SS_T_WAIT_MS;
    for (;;) {
        sst_client c;
        sst_client_open(&c, port, RL_ROLE_CLIENT, 0);
        rl__msg q = sst_req(RL_MSG_STATUS), r;
        ASSERT_EQ(sst_call(&c, &q, &r), 0);
        json_t *j = json_loadb((const char *)r.u.status_reply.json, r.u.status_reply.json_len, 0, NULL);
        ASSERT_NOT_NULL(j);
        json_int_t known = json_integer_value(json_object_get(j, "known_version"));
        int registered = json_is_true(json_object_get(j, "registered"));
        json_decref(j);
        sst_client_close(&c);
        if (registered && known >= v) return;
        if (sst_now_ms() > end)
            fail_msg("storage server on port %u: known %lld, waiting for %lld", port, (long long)known, (long long)v);
        rl__clock_sleep_us(20000);
    }
}

/* Keys at versions, from the server that holds each, against the reference. */
static void check_versions(cp_cluster *c, model *md) {
    sst_client cl[3];
    sst_client_open(&cl[1], (uint16_t)c->port[1], RL_ROLE_CLIENT, 0);
    sst_client_open(&cl[2], (uint16_t)c->port[2], RL_ROLE_CLIENT, 0);
    rl_arena a;
    rl__arena_init(&a, 0);
    rl_buf val;
    rl__buf_init(&val);
    /* Every key at every 4th version and the last 4 (about 60,000 reads in the whole test). */
    for (int i = 0; i < md->n_versions; i++)
        for (int k = 0; k < md->n_keys && (i % 4 == 0 || i >= md->n_versions - 4); k++) {
            const rl_buf *key = &md->keys[k];
            int s = server_of(key->data, (uint32_t)key->len);
            int present = 0;
            int rc = sst_get(&cl[s], (rl__version)md->versions[i], (const char *)key->data, key->len, &present, &val);
            if (rc) fail_msg("GET at %lld from server %d: %s", (long long)md->versions[i], s, rl_error_name(rc));
            int want = 0;
            const uint8_t *wv = NULL;
            uint32_t wl = 0;
            rl__arena_reset(&a);
            ASSERT_OK(rl__storage_get(md->ref, (rl__version)md->versions[i], key->data, key->len, &a, &want, &wv, &wl));
            ASSERT_EQ(present, want);
            if (present) ASSERT_MEM_EQ(val.data, val.len, wv, wl);
        }
    rl__buf_release(&val);
    rl__arena_release(&a);
    sst_client_close(&cl[1]);
    sst_client_close(&cl[2]);
}

/* A mapped read of the whole index on server 1 at version v against the reference. */
static void check_mapped(cp_cluster *c, model *md, int64_t v, int reverse) {
    sst_client cl;
    sst_client_open(&cl, (uint16_t)c->port[1], RL_ROLE_CLIENT, 0);
    rl__msg q = sst_req(RL_MSG_GET_MAPPED_RANGE), r;
    q.u.get_mapped_range_req.version = (rl__version)v;
    q.u.get_mapped_range_req.begin = RL_FIRST_GREATER_OR_EQUAL("\x15\x02", 2);
    q.u.get_mapped_range_req.end = RL_FIRST_GREATER_OR_EQUAL("\x15\x03", 2);
    q.u.get_mapped_range_req.mapper = (const uint8_t *)MAPPER;
    q.u.get_mapped_range_req.mapper_len = sizeof MAPPER - 1;
    q.u.get_mapped_range_req.reverse = (uint8_t)reverse;
    q.u.get_mapped_range_req.strategy = RL_FETCH_INDIVIDUAL; /* counted below (the default is grouped) */
    int rc = sst_call(&cl, &q, &r);
    if (rc) fail_msg("mapped read: %s: %.*s", rl_error_name(rc), (int)r.u.error.message_len, r.u.error.message);
    const rl__msg_get_mapped_range_reply *g = &r.u.get_mapped_range_reply;
    rl_arena a;
    rl__arena_init(&a, 0);
    rl__mapper *m;
    ASSERT_OK(rl__mapper_parse(MAPPER, sizeof MAPPER - 1, &a, &m));
    rl__mapped_options o;
    memset(&o, 0, sizeof o);
    o.reverse = reverse;
    rl__mapped_entry *ents;
    int n, more;
    ASSERT_OK(rl__storage_get_mapped_range(md->ref, (rl__version)v, "\x15\x02", 2, "\x15\x03", 2, m, &o, NULL, NULL, &a,
                                           &ents, &n, &more));
    ASSERT_EQ(g->n_entries, (uint32_t)n);
    ASSERT_TRUE(n > 0);
    uint32_t remote = 0;
    for (int i = 0; i < n; i++) {
        const rl_mapped_keyvalue *x = &g->entries[i], *y = &ents[i];
        ASSERT_MEM_EQ(x->index.key, x->index.key_len, y->index.key, y->index.key_len);
        ASSERT_EQ(x->n_kvs, y->n_kvs);
        for (int j = 0; j < x->n_kvs; j++) {
            ASSERT_MEM_EQ(x->kvs[j].key, x->kvs[j].key_len, y->kvs[j].key, y->kvs[j].key_len);
            ASSERT_MEM_EQ(x->kvs[j].value, x->kvs[j].value_len, y->kvs[j].value, y->kvs[j].value_len);
        }
        ASSERT_EQ(x->more, y->more);
        ASSERT_EQ(x->served_locally, server_of(x->begin, x->begin_len) == 1);
        remote += !x->served_locally;
    }
    ASSERT_EQ(g->stats.secondaries_remote, remote);
    ASSERT_EQ(g->stats.s2s_requests, remote); /* individual: one GET_MULTI per remote secondary */
    rl__arena_release(&a);
    sst_client_close(&cl);
}

TEST(ssc_1_1_real_coordinator) {
    static const char *const splits[] = {"\x15\x01\x15\x3c", "\x15\x02"};
    cp_cluster c;
    cp_start(&c, 2, splits, 2, 0);
    rl_db *db;
    ASSERT_OK(rl_db_open(c.url, NULL, &db));
    static model md;
    memset(&md, 0, sizeof md);
    memset(md.known, -1, sizeof md.known);
    rl__storage_options so;
    memset(&so, 0, sizeof so);
    ASSERT_OK(rl__storage_open(&so, &md.ref, NULL));
    uint64_t seed = rl_test_seed();

    for (int i = 0; i < 60; i++) commit_one(db, &md, &seed);
    int64_t last = md.versions[md.n_versions - 1];
    check_versions(&c, &md); /* reads at versions just committed wait for the PEEK if needed */
    check_mapped(&c, &md, last, 0);
    check_mapped(&c, &md, last, 1);

    for (int victim = 2; victim >= 1; victim--) {
        /* kill -9 after acknowledged commits; more commits while it is down. */
        for (int i = 0; i < 20; i++) commit_one(db, &md, &seed);
        cp_kill(&c, victim, SIGKILL);
        for (int i = 0; i < 20; i++) commit_one(db, &md, &seed);
        last = md.versions[md.n_versions - 1];
        cp_spawn(&c, victim, c.port[victim]);
        wait_known((uint16_t)c.port[victim], last);
        check_versions(&c, &md);
        check_mapped(&c, &md, last, 0);
        check_mapped(&c, &md, md.versions[md.n_versions / 2], 1);
    }
    /* The coordinator: kill -9 and restart, then a clean restart. The storage servers reconnect
     * (backoff) and register again; new commits reach them. A fresh client each time, so no
     * commit is in doubt. */
    for (int round = 0; round < 2; round++) {
        rl_db_close(db);
        if (round == 0) {
            cp_kill(&c, 0, SIGKILL);
            cp_spawn(&c, 0, c.port[0]);
        } else {
            cp_restart(&c, 0);
        }
        uint64_t end = sst_now_ms() + SS_T_WAIT_MS;
        int rc;
        while ((rc = rl_db_open(c.url, NULL, &db)) != RL_OK && sst_now_ms() < end) rl__clock_sleep_us(20000);
        ASSERT_OK(rc);
        for (int i = 0; i < 20; i++) commit_one(db, &md, &seed);
        last = md.versions[md.n_versions - 1];
        wait_known((uint16_t)c.port[1], last);
        wait_known((uint16_t)c.port[2], last);
        check_versions(&c, &md);
        check_mapped(&c, &md, last, 0);
    }
    rl_db_close(db);
    /* A clean stop: every process exits 0 on SIGTERM. */
    for (int i = 2; i >= 0; i--) {
        pid_t p = c.pid[i];
        kill(p, SIGTERM);
        int st = 0;
        uint64_t end = sst_now_ms() + SS_T_WAIT_MS;
        while (waitpid(p, &st, WNOHANG) != p) {
            if (sst_now_ms() > end) fail_msg("process %d did not stop on SIGTERM", i);
            rl__clock_sleep_us(5000);
        }
        c.pid[i] = 0;
        cp_refresh_pids();
        ASSERT_TRUE(WIFEXITED(st));
        ASSERT_EQ(WEXITSTATUS(st), 0);
    }
    cp_stop(&c);
    rl__storage_close(md.ref);
    for (int k = 0; k < md.n_keys; k++) rl__buf_release(&md.keys[k]);
}

RL_TEST_MAIN(T(ssc_1_1_real_coordinator))
