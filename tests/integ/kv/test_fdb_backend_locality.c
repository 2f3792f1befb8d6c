/* test_fdb_backend_locality.c — the fdb: backend's locality figures (rl__kv_locality, which the
 * ADAPTIVE fetch method reads) from fdb_transaction_get_addresses_for_key and its own reads'
 * latency, with reclayer's build/fdb/libfdb_c.so as the client library: over a real two-server
 * cluster (cluster_procs.h: a shard boundary at "m", server 1 below, server 2 above; the fdb: URL
 * names its cluster file, as a FoundationDB user's would) and over embedded databases
 * (RL_FDBC_URL=mem: / file:DIR).
 *
 *   fdb-loc-1.1  over the cluster: networked at once after open (the open's probe answered), a
 *                team of one for "" and the status saying so; after 30 point reads the round-trip
 *                EWMA has samples and is above 0; "q" gets its own team (the other server) once
 *                its background lookup answered, and "a" the first one's
 *   fdb-loc-1.2  over mem:: not networked — every figure 0, as the embedded backends (the library
 *                answers unsupported_operation); the status says networked false
 *   fdb-loc-1.3  ADAPTIVE end to end through `rl` (load, then query --fetch adaptive --explain): on
 *                fdb: over the cluster the explained inputs carry a measured round trip (rtt
 *                index > 0); on fdb: over file: they are the embedded ones (rtt 0)
 */
#include <stdlib.h>
#include <string.h>

#include "cluster_procs.h"
#include "kv/backend.h"
#include "kv/kv_stats.h"
#include "reclayer/kv.h"
#include "test.h"

static cp_cluster clu; /* static: the exit hook finds it after a failed assertion */
static int clu_up;
static char fdb_url[700];

static const char *lib_path(void) {
    const char *p = getenv("RL_FDBC_LIB");
    return p && *p ? p : RL_BIN_DIR "/fdb/libfdb_c.so";
}

/* The cluster and "fdb:" + its cluster file (started once, from the main thread, first). */
static cp_cluster *cluster(void) {
    static const char *const split[] = {"m"};
    if (!clu_up) {
        cp_start(&clu, 2, split, 1, 1);
        clu_up = 1;
        snprintf(fdb_url, sizeof fdb_url, "fdb:%s", clu.file);
    }
    return &clu;
}

static rl_db *open_url(const char *url, const char *fdbc_url) {
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
    if (fdbc_url) setenv("RL_FDBC_URL", fdbc_url, 1);
    else unsetenv("RL_FDBC_URL");
    rl_db *db = NULL;
    int rc = rl_db_open(url, NULL, &db);
    if (rc) fail_msg("rl_db_open(%s): %s %s", url, rl_error_name(rc), rl_last_error_detail());
    return db;
}

static void get_n(rl_db *db, int n) {
    rl_txn *t;
    ASSERT_OK(rl_txn_begin(db, &t));
    for (int i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%03d", i);
        rl_future *f = rl_txn_get(t, k, strlen(k), RL_SNAPSHOT);
        ASSERT_OK(rl_future_wait(f));
        rl_future_free(f);
    }
    rl_txn_free(t);
}

/* The locality of key, polled until its team is one server, {want} when want is not 0 and not
 * {avoid} (a background lookup answers), 5 s at most. */
static uint32_t team_of(rl_db *db, const char *key, uint32_t want, uint32_t avoid) {
    rl__kv_locality l;
    double t0 = cp_now();
    for (;;) {
        memset(&l, 0, sizeof l);
        rl__db_locality(db, (const uint8_t *)key, strlen(key), &l);
        ASSERT_EQ(l.networked, 1);
        if (l.n_team == 1 && (!want || l.team[0] == want) && l.team[0] != avoid) return l.team[0];
        if (cp_now() - t0 > 5) fail_msg("key '%s': team of %u (first %u), want {%u}", key, l.n_team, l.team[0], want);
        usleep(120000); /* beyond the backend's 100 ms between lookups */
    }
}

TEST(fdb_loc_1_1) {
    cluster();
    rl_db *db = open_url(fdb_url, NULL);
    rl__kv_locality l;
    memset(&l, 0, sizeof l);
    rl__db_locality(db, (const uint8_t *)"", 0, &l);
    ASSERT_EQ(l.networked, 1);
    ASSERT_EQ(l.n_team, 1);
    uint32_t first = l.team[0];
    ASSERT_TRUE(first >= 1);
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(db, &js));
    ASSERT_NOT_NULL(strstr(js, "\"locality\": {\"networked\": true"));
    rl_free(js);
    get_n(db, 30);
    memset(&l, 0, sizeof l);
    rl__db_locality(db, (const uint8_t *)"k001", 4, &l);
    ASSERT_TRUE(l.rtt_samples >= 30);
    ASSERT_TRUE(l.rtt_ns > 0);
    printf("# fdb: over the cluster: read RTT EWMA %.1f us over %u samples\n", l.rtt_ns / 1e3, l.rtt_samples);
    /* "q" first shares ""'s entry (the longest common prefix), then has its own answer. */
    uint32_t other = team_of(db, "q", 0, first);
    ASSERT_TRUE(other >= 1);
    ASSERT_EQ(team_of(db, "a", first, 0), first);
    ASSERT_EQ(team_of(db, "zz", other, 0), other);
    rl_db_close(db);
}

TEST(fdb_loc_1_2) {
    cluster();
    rl_db *db = open_url("fdb:", "mem:");
    get_n(db, 5);
    rl__kv_locality l, zero;
    memset(&l, 0, sizeof l);
    memset(&zero, 0, sizeof zero);
    rl__db_locality(db, (const uint8_t *)"k", 1, &l);
    ASSERT_EQ(memcmp(&l, &zero, sizeof l), 0);
    char *js = NULL;
    ASSERT_OK(rl_db_status_json(db, &js));
    ASSERT_NOT_NULL(strstr(js, "\"locality\": {\"networked\": false"));
    rl_free(js);
    rl_db_close(db);
}

/* The largest "rtt index X µs" of rl query's explain lines (-1: none). */
static double max_rtt_index(const char *out) {
    double mx = -1;
    for (const char *p = out; (p = strstr(p, "rtt index ")); p += 10) {
        double v = strtod(p + 10, NULL);
        if (v > mx) mx = v;
    }
    return mx;
}

static double adaptive_rtt(const char *url) {
    char *out = NULL;
    int rc = rl_test_run("rl", &out, NULL, "load --db '%s' --count 300", url);
    if (rc) fail_msg("rl load --db %s: exit %d: %s", url, rc, out ? out : "");
    free(out);
    out = NULL;
    rc = rl_test_run("rl", &out, NULL, "query --db '%s' --index price_idx --fetch adaptive --explain --limit 200", url);
    if (rc) fail_msg("rl query --db %s: exit %d: %s", url, rc, out ? out : "");
    ASSERT_NOT_NULL(strstr(out, "{\"explain\": \"page 1: adaptive:"));
    double v = max_rtt_index(out);
    free(out);
    return v;
}

TEST(fdb_loc_1_3) {
    cluster();
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
    unsetenv("RL_FDBC_URL");
    double net = adaptive_rtt(fdb_url);
    printf("# ADAPTIVE on fdb: over the cluster: rtt index up to %.1f us\n", net);
    ASSERT_TRUE(net > 0);
    char *dir = rl_test_tmpdir("fdb-loc-file"), inner[600];
    snprintf(inner, sizeof inner, "file:%s", dir);
    setenv("RL_FDBC_URL", inner, 1);
    double local = adaptive_rtt("fdb:");
    unsetenv("RL_FDBC_URL");
    ASSERT_TRUE(local == 0);
    rl_test_rmtree(dir);
    free(dir);
}

static int teardown(void **state) {
    (void)state;
    if (clu_up) cp_stop(&clu);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(fdb_loc_1_1), T(fdb_loc_1_2), T(fdb_loc_1_3)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
}
