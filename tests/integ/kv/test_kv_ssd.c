/* test_kv_ssd.c — choosing the ssd engine through the public API and the tools:
 * file:DIR?engine=ssd creates an ssd database, file:DIR then opens what the directory holds, the
 * other engine (URL or rl_db_options.engine) is refused naming both, bad URL options are
 * bad_url, a read-only open reads the data, `rl kv status` reports the engine, and
 * checkpoint_bytes=N makes the data reach LMDB (flushes counted in the status).
 */
#include <stdlib.h>
#include <string.h>

#include "../../unit/kv/kvtest.h"

static void put(rl_db *db, const char *k, const char *v) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    ASSERT_OK(rl_txn_set(t, k, strlen(k), v, strlen(v)));
    ASSERT_OK(kvt_commit(t));
    rl_txn_free(t);
}

static char *status(rl_db *db) {
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(db, &js));
    return js;
}

TEST(ssd_kv_1_1_engine_by_url_and_options) {
    char *dir = rl_test_tmpdir("kvssd"), url[4300];
    rl_db *db = NULL;
    snprintf(url, sizeof url, "file:%s?engine=ssd&checkpoint_bytes=4096", dir);
    ASSERT_OK(rl_db_open(url, NULL, &db));
    char k[32], v[64];
    for (int i = 0; i < 200; i++) { /* enough log for several flushes */
        snprintf(k, sizeof k, "key%04d", i);
        snprintf(v, sizeof v, "value-%d-0123456789012345678901234567890123456789", i);
        put(db, k, v);
    }
    char *js = status(db);
    ASSERT_NOT_NULL(strstr(js, "\"engine\": \"ssd\""));
    ASSERT_NULL(strstr(js, "\"checkpoints\": 0,"));
    rl_free(js);
    rl_db_close(db);

    /* No engine named: what the directory holds. */
    snprintf(url, sizeof url, "file:%s", dir);
    ASSERT_OK(rl_db_open(url, NULL, &db));
    js = status(db);
    ASSERT_NOT_NULL(strstr(js, "\"engine\": \"ssd\""));
    ASSERT_NOT_NULL(strstr(js, "\"keys\": 200,"));
    rl_free(js);
    rl_db_close(db);

    /* The other engine, by URL and by option: refused, naming both. */
    snprintf(url, sizeof url, "file:%s?engine=memory", dir);
    ASSERT_RC(rl_db_open(url, NULL, &db), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "ssd"));
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "memory"));
    rl_db_options o = {0};
    o.size = sizeof o;
    o.engine = RL_DB_ENGINE_MEMORY;
    snprintf(url, sizeof url, "file:%s", dir);
    ASSERT_RC(rl_db_open(url, &o, &db), RL_E_INVALID_ARGUMENT);

    /* Bad options. */
    snprintf(url, sizeof url, "file:%s?engine=btrfs", dir);
    ASSERT_RC(rl_db_open(url, NULL, &db), RL_E_BAD_URL);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "btrfs"));
    snprintf(url, sizeof url, "file:%s?checkpoint_bytes=0", dir);
    ASSERT_RC(rl_db_open(url, NULL, &db), RL_E_BAD_URL);
    snprintf(url, sizeof url, "file:%s?engine=ssd&colour=blue", dir);
    ASSERT_RC(rl_db_open(url, NULL, &db), RL_E_BAD_URL);
    o.engine = 7;
    ASSERT_RC(rl_db_open(url, &o, &db), RL_E_BAD_URL); /* the URL is checked first */
    snprintf(url, sizeof url, "file:%s", dir);
    ASSERT_RC(rl_db_open(url, &o, &db), RL_E_INVALID_ARGUMENT);

    /* Read-only: the data, and `rl kv status` names the engine. */
    o.engine = RL_DB_ENGINE_DEFAULT;
    o.read_only = 1;
    ASSERT_OK(rl_db_open(url, &o, &db));
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    int present = 0, len = 0;
    char buf[128];
    ASSERT_OK(kvt_get(t, "key0123", 7, 0, &present, buf, sizeof buf, &len));
    ASSERT_TRUE(present);
    ASSERT_MEM_EQ(buf, (size_t)len, "value-123-0123456789012345678901234567890123456789", 50);
    rl_txn_free(t);
    rl_db_close(db);
    char *out = NULL;
    ASSERT_EQ(rl_test_rl(&out, "kv status --db 'file:%s'", dir), 0);
    ASSERT_NOT_NULL(strstr(out, "\"engine\": \"ssd\""));
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

/* mem: cannot be ssd (nothing on disk). */
TEST(ssd_kv_1_2_mem_refuses_ssd) {
    rl_db_options o = {0};
    o.size = sizeof o;
    o.engine = RL_DB_ENGINE_SSD;
    rl_db *db = NULL;
    ASSERT_RC(rl_db_open("mem:", &o, &db), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl_last_error_detail(), "ssd"));
}

RL_TEST_MAIN(T(ssd_kv_1_1_engine_by_url_and_options), T(ssd_kv_1_2_mem_refuses_ssd))
