/* test_campaign_fdb.c — `rlbench campaign` on the fdb topology: the arms run against an
 * existing database through the fdb: backend, with RL_FDB_LIBRARY pointing at reclayer's own
 * build/fdb/libfdb_c.so — over a one-server local cluster (the library opens the cluster file
 * given in the fdb: URL, as FoundationDB's would) and over an embedded file: database
 * (RL_FDBC_URL). Tiny protocol: 40 records, two cases, ordinary, remote, adaptive and sqlite,
 * 2 blocks x 1 repeat of 0.05 s; a few seconds each.
 *
 *   campaign_5_1  fdb: over a one-server cluster: the topology ran (kind fdb, the backend's status
 *                 recorded: library, API version 730, the cluster file), both datasets loaded and
 *                 checked (integrity_ok, 40 records), the defect controls failed the checker as
 *                 expected, the backend networked (locality), ordinary/remote/adaptive available and
 *                 their rows agreeing, sqlite not
 *                 available with its reason; a sample for every (case, arm, block) with every per-op
 *                 figure; around every case the RTT probe not applicable (no ping through FoundationDB's
 *                 C API) carrying a point-read latency (min <= p50 <= p99 <= max), the receipts equal
 *                 with the placement part not applicable; the restoration not applicable; report.md
 *                 says n/a; afterwards the campaign's ranges are empty and a key of the user's
 *                 outside them is untouched, and a stale key inside them (planted before) is gone
 *   campaign_5_2  fdb: over an embedded file: database: the same checks (RL_FDBC_URL=file:DIR),
 *                 the backend local
 *   campaign_5_3  the protocol: an fdb topology needs an fdb: url, takes no delay and no cluster
 *                 field, other kinds take no url; printing and parsing give it back
 *   campaign_5_4  no client library (RL_FDB_LIBRARY names none): the topology is not available,
 *                 with the loader's reason naming FoundationDB's client package (exit 0, nothing
 *                 run); a cluster file that does not exist: the topology failed (exit 1, a
 *                 "topology" failure naming it)
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/campaign_int.h"
#include "cluster_fixture.h"
#include "reclayer/kv.h"
#include "test.h"

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static const char *lib_path(void) { return RL_BIN_DIR "/fdb/libfdb_c.so"; }

/* The tuple ("bench", "fdbtopo") packed by hand (0x02 string ... 0x00), the campaign's range for a
 * topology of that name, and a key of the user's outside every campaign range. */
static const char bench_topo[] = "\x02"
                                 "bench"
                                 "\x00"
                                 "\x02"
                                 "fdbtopo"
                                 "\x00";
#define BENCH_TOPO_LEN (sizeof bench_topo - 1)
static const char user_key[] = "user/kept";

static int plant_fn(rl_txn *txn, void *ud) {
    (void)ud;
    char stale[64];
    memcpy(stale, bench_topo, BENCH_TOPO_LEN);
    memcpy(stale + BENCH_TOPO_LEN, "stale", 5);
    int rc = rl_txn_set(txn, stale, BENCH_TOPO_LEN + 5, "x", 1);
    if (!rc) rc = rl_txn_set(txn, user_key, strlen(user_key), "mine", 4);
    return rc;
}

/* Plant a stale key inside the campaign's range and a user key outside it, through the database's
 * own URL (inner: cluster:FILE or file:DIR). */
static void plant(const char *inner) {
    rl_db *db = NULL;
    ASSERT_OK(rl_db_open(inner, NULL, &db));
    ASSERT_OK(rl_db_run(db, plant_fn, NULL));
    rl_db_close(db);
}

/* Count the keys under ("bench",) and check the user key, through inner. */
static void check_after(const char *inner) {
    rl_db *db = NULL;
    rl_txn *txn = NULL;
    const rl_keyvalue *kvs;
    int n, more, present = 0, len = 0;
    const uint8_t *v;
    ASSERT_OK(rl_db_open(inner, NULL, &db));
    ASSERT_OK(rl_txn_begin(db, &txn));
    rl_future *f = rl_txn_get_range(txn,
                                    RL_FIRST_GREATER_OR_EQUAL("\x02"
                                                              "bench"
                                                              "\x00",
                                                              7),
                                    RL_FIRST_GREATER_OR_EQUAL("\x02"
                                                              "bench"
                                                              "\x00\xff",
                                                              8),
                                    0, 0, RL_STREAMING_WANT_ALL, 0, RL_SNAPSHOT);
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_keyvalue_array(f, &kvs, &n, &more));
    if (n) fail_msg("%d keys left under (\"bench\",) after the run", n);
    rl_future_free(f);
    f = rl_txn_get(txn, user_key, strlen(user_key), RL_SNAPSHOT);
    ASSERT_OK(rl_future_wait(f));
    ASSERT_OK(rl_future_get_value(f, &present, &v, &len));
    ASSERT_TRUE(present);
    ASSERT_EQ(len, 4);
    ASSERT_EQ(memcmp(v, "mine", 4), 0);
    rl_future_free(f);
    rl_txn_free(txn);
    rl_db_close(db);
}

static const char *const metrics[] = {
    "ns_per_op",           "bytes_per_op",           "allocs_per_op",       "rows_per_op",
    "requests_per_op",     "round_trips_per_op",     "kv_bytes_per_op",     "index_entries_per_op",
    "client_reads_per_op", "mapped_requests_per_op", "record_loads_per_op", "net_bytes_received_per_op"};
static const char *const cases[2] = {"small-rows10-forward", "split-limit1-reverse"};
static const char *const arms_run[3] = {"ordinary", "remote", "adaptive"};

/* Run the tiny campaign on `fdb:URL_REST` and check its results, report.md and the database. */
static void run_on(const char *fdb_url, const char *inner, const char *want_cluster_file) {
    char *dir = rl_test_tmpdir("campaign-fdb"), path[1200];
    plant(inner);
    snprintf(path, sizeof path, "%s/p.json", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f,
            "{\"name\": \"tiny-fdb\", \"dataset\": {\"records\": 40},\n"
            " \"topologies\": [{\"name\": \"fdbtopo\", \"kind\": \"fdb\", \"url\": \"%s\"}],\n"
            " \"cases\": [\"small-rows10-forward\", \"split-limit1-reverse\"],\n"
            " \"arms\": [\"ordinary\", \"remote\", \"adaptive\", \"sqlite\"],\n"
            " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"
            " \"statistics\": {\"resamples\": 500, \"seed\": 1},\n"
            " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 20}}\n",
            fdb_url);
    fclose(f);
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
    char *out = NULL, *err = NULL;
    int rc = rl_test_run("rlbench", &out, &err, "campaign --protocol '%s/p.json' --out '%s/o'", dir, dir);
    if (rc != 0) fail_msg("exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/o", dir);
    json_t *r = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(path, &r, &msg)) fail_msg("results: %s", rl__errdetail_get(&msg));
    ASSERT_TRUE(json_is_true(json_object_get(r, "ok")));
    ASSERT_EQ(json_array_size(json_object_get(r, "failures")), 0);
    json_t *t = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_STR_EQ(jstr(t, "status"), "ran");
    ASSERT_STR_EQ(jstr(t, "kind"), "fdb");
    ASSERT_STR_EQ(jstr(t, "query_url"), fdb_url);
    ASSERT_EQ(json_array_size(json_object_get(t, "server_pids")), 0);
    /* The backend's status: FoundationDB's C API through reclayer's library. */
    json_t *be = json_object_get(t, "backend");
    ASSERT_STR_EQ(jstr(be, "backend"), "fdb");
    ASSERT_STR_EQ(jstr(be, "library"), lib_path());
    ASSERT_EQ(json_integer_value(json_object_get(be, "api_version")), 730);
    if (want_cluster_file) ASSERT_STR_EQ(jstr(be, "cluster_file"), want_cluster_file);
    else ASSERT_TRUE(json_is_null(json_object_get(be, "cluster_file")));
    /* Locality (ADAPTIVE's priors): networked over the cluster, local over file:. */
    json_t *loc = json_object_get(be, "locality");
    ASSERT_TRUE(json_is_boolean(json_object_get(loc, "networked")));
    ASSERT_EQ(json_is_true(json_object_get(loc, "networked")), want_cluster_file != NULL);
    /* The data: loaded through fdb:, checked, the defect controls failing the checker. */
    size_t i;
    json_t *x;
    ASSERT_EQ(json_array_size(json_object_get(t, "datasets")), 2);
    json_array_foreach(json_object_get(t, "datasets"), i, x) {
        ASSERT_STR_EQ(jstr(x, "url"), fdb_url);
        ASSERT_TRUE(json_is_true(json_object_get(x, "integrity_ok")));
        ASSERT_EQ(json_integer_value(json_object_get(json_object_get(x, "integrity"), "records")), 40);
        ASSERT_NOT_NULL(strstr(jstr(x, "store"), "\"fdbtopo\""));
    }
    ASSERT_TRUE(json_is_true(json_object_get(t, "defect_controls_passed")));
    ASSERT_EQ(json_array_size(json_object_get(t, "defect_controls")), 3);
    json_array_foreach(json_object_get(t, "defect_controls"), i, x) {
        ASSERT_TRUE(json_is_true(json_object_get(x, "clean_before")));
        ASSERT_TRUE(json_is_true(json_object_get(x, "passed")));
    }
    json_array_foreach(json_object_get(t, "arms"), i, x) {
        int want = strcmp(jstr(x, "arm"), "sqlite") != 0;
        ASSERT_EQ(json_is_true(json_object_get(x, "available")), want);
        if (!want) ASSERT_NOT_NULL(strstr(jstr(x, "reason"), "embedded topologies only"));
    }
    json_array_foreach(json_object_get(t, "rows_check"), i, x) ASSERT_TRUE(json_is_true(json_object_get(x, "agree")));
    /* Every sample once, with every figure. */
    json_t *samples = json_object_get(r, "samples");
    ASSERT_EQ(json_array_size(samples), 2 * 3 * 2);
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 3; a++)
            for (int b = 1; b <= 2; b++) {
                int n = 0;
                json_array_foreach(samples, i, x) {
                    if (strcmp(jstr(x, "case"), cases[k]) || strcmp(jstr(x, "arm"), arms_run[a]) ||
                        json_integer_value(json_object_get(x, "block")) != b)
                        continue;
                    n++;
                    ASSERT_STR_EQ(jstr(x, "topology"), "fdbtopo");
                    ASSERT_TRUE(json_integer_value(json_object_get(x, "ops")) >= 1);
                    for (size_t m = 0; m < sizeof metrics / sizeof *metrics; m++)
                        if (!json_is_number(json_object_get(x, metrics[m])))
                            fail_msg("%s %s block %d: %s missing", cases[k], arms_run[a], b, metrics[m]);
                    ASSERT_TRUE(json_number_value(json_object_get(x, "ns_per_op")) > 0);
                    ASSERT_TRUE(json_number_value(json_object_get(x, "rows_per_op")) == (k == 0 ? 10 : 1));
                    /* fdb: counts the requests it makes of FoundationDB's client (at least one
                     * read per query, one round trip each; not the read version) and no bytes. */
                    ASSERT_TRUE(json_number_value(json_object_get(x, "requests_per_op")) >= 1);
                    ASSERT_TRUE(json_number_value(json_object_get(x, "round_trips_per_op")) >= 1);
                    ASSERT_TRUE(json_number_value(json_object_get(x, "net_bytes_received_per_op")) == 0);
                    if (a == 1) ASSERT_TRUE(json_number_value(json_object_get(x, "mapped_requests_per_op")) >= 1);
                }
                ASSERT_EQ(n, 1);
            }
    /* The checks of every case: no ping through fdb:, a read latency instead; receipts equal. */
    ASSERT_EQ(json_array_size(json_object_get(r, "cases")), 2);
    json_array_foreach(json_object_get(r, "cases"), i, x) {
        json_t *ch = json_object_get(x, "checks");
        const char *probes[2] = {"rtt_before", "rtt_after"};
        for (int j = 0; j < 2; j++) {
            json_t *p = json_object_get(ch, probes[j]), *rl = json_object_get(p, "read_latency");
            ASSERT_TRUE(json_is_false(json_object_get(p, "applicable")));
            ASSERT_NOT_NULL(strstr(jstr(p, "reason"), "no ping"));
            ASSERT_EQ(json_integer_value(json_object_get(rl, "reads")), 20);
            double mn = json_number_value(json_object_get(rl, "min_us")),
                   p50 = json_number_value(json_object_get(rl, "p50_us"));
            double p99 = json_number_value(json_object_get(rl, "p99_us")),
                   mx = json_number_value(json_object_get(rl, "max_us"));
            ASSERT_TRUE(mn > 0 && mn <= p50 && p50 <= p99 && p99 <= mx);
        }
        ASSERT_TRUE(json_is_true(json_object_get(ch, "receipts_equal")));
        json_t *rb = json_object_get(ch, "receipt_before");
        ASSERT_STR_EQ(jstr(rb, "kind"), "layout");
        ASSERT_EQ(json_integer_value(json_object_get(rb, "index_entries")), 40);
        ASSERT_TRUE(json_is_false(json_object_get(json_object_get(rb, "placement"), "applicable")));
        ASSERT_TRUE(json_is_true(json_object_get(ch, "worker_rows_match")));
        ASSERT_EQ(json_array_size(json_object_get(x, "processes")), 6);
    }
    ASSERT_TRUE(json_is_false(json_object_get(json_object_get(t, "restoration"), "applicable")));
    /* The summary has the comparisons; the report says n/a for the probes. */
    ASSERT_TRUE(json_array_size(json_object_get(r, "summary")) > 0);
    snprintf(path, sizeof path, "%s/o/report.md", dir);
    FILE *rf = fopen(path, "r");
    ASSERT_NOT_NULL(rf);
    char report[65536];
    size_t rn = fread(report, 1, sizeof report - 1, rf);
    report[rn] = 0;
    fclose(rf);
    ASSERT_NOT_NULL(strstr(report, "## Topology `fdbtopo` (fdb,"));
    ASSERT_NOT_NULL(strstr(report, "n/a"));
    /* The campaign's ranges were cleared (the stale key with them); the user's key stays. */
    check_after(inner);
    json_decref(r);
    free(out);
    free(err);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(campaign_5_1_fdb_over_cluster) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    rl_test_cluster c;
    int rc = rl_test_cluster_start(&c, &o);
    ASSERT_OK(rc);
    char url[4400];
    snprintf(url, sizeof url, "fdb:%s", c.file);
    unsetenv("RL_FDBC_URL"); /* the library opens the cluster file of the URL */
    run_on(url, c.url, c.file);
    rl_test_cluster_stop(&c);
}

TEST(campaign_5_2_fdb_over_embedded) {
    char *db = rl_test_tmpdir("campaign-fdb-db"), inner[600];
    snprintf(inner, sizeof inner, "file:%s", db);
    setenv("RL_FDBC_URL", inner, 1); /* the library opens this URL instead of a cluster file */
    run_on("fdb:", inner, NULL);
    unsetenv("RL_FDBC_URL");
    rl_test_rmtree(db);
    free(db);
}

TEST(campaign_5_3_fdb_protocol) {
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"{\"topologies\": [{\"name\": \"f\", \"kind\": \"fdb\"}]}", "topologies[0]: an fdb topology needs a url"},
        {"{\"topologies\": [{\"name\": \"f\", \"kind\": \"fdb\", \"url\": \"cluster:/x\"}]}",
         "topologies[0].url: 'cluster:/x' is not an fdb: URL"},
        {"{\"topologies\": [{\"name\": \"f\", \"kind\": \"fdb\", \"url\": \"fdb:\", \"delay_us\": 5}]}",
         "topologies[0].delay_us: the campaign injects no delay"},
        {"{\"topologies\": [{\"name\": \"f\", \"kind\": \"fdb\", \"url\": \"fdb:\", \"storage_servers\": 1}]}",
         "topologies[0].storage_servers: only for single and multi"},
        {"{\"topologies\": [{\"name\": \"s\", \"kind\": \"single\", \"url\": \"fdb:\"}]}",
         "topologies[0].url: only for fdb topologies"},
        {"{\"topologies\": [{\"name\": \"f\", \"kind\": \"fdb\", \"url\": 3}]}",
         "topologies[0].url: must be a non-empty string"},
        {"{\"topologies\": [{\"name\": \"e\", \"kind\": \"cloud\"}]}",
         "topologies[0].kind: 'cloud' is not one of embedded, single, multi, fdb"},
    };
    rl__camp_protocol p, q;
    rl_buf t1, t2;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        rl__errdetail_clear(&msg);
        ASSERT_RC(rl__camp_protocol_parse(bad[i].text, strlen(bad[i].text), &p, &msg), RL_E_INVALID_ARGUMENT);
        if (!strstr(rl__errdetail_get(&msg), bad[i].want))
            fail_msg("%s: got '%s', want '%s'", bad[i].text, rl__errdetail_get(&msg), bad[i].want);
    }
    const char *good = "{\"topologies\": [{\"name\": \"e\", \"kind\": \"embedded\"},"
                       " {\"name\": \"f\", \"kind\": \"fdb\", \"url\": \"fdb:/etc/foundationdb/fdb.cluster\"}]}";
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__camp_protocol_parse(good, strlen(good), &p, &msg));
    ASSERT_EQ(p.n_topologies, 2);
    ASSERT_EQ(p.topologies[1].kind, RL_CAMP_FDB);
    ASSERT_STR_EQ(p.topologies[1].url, "fdb:/etc/foundationdb/fdb.cluster");
    ASSERT_EQ(p.topologies[1].delay_us, 0);
    ASSERT_STR_EQ(p.topologies[0].url, "");
    rl__buf_init(&t1);
    rl__buf_init(&t2);
    ASSERT_OK(rl__camp_protocol_print(&p, &t1));
    ASSERT_NOT_NULL(strstr((const char *)t1.data, "{\"name\": \"f\", \"kind\": \"fdb\", \"delay_us\": 0, \"url\": "
                                                  "\"fdb:/etc/foundationdb/fdb.cluster\"}"));
    ASSERT_OK(rl__camp_protocol_parse((const char *)t1.data, t1.len, &q, &msg));
    ASSERT_OK(rl__camp_protocol_print(&q, &t2));
    ASSERT_STR_EQ((const char *)t1.data, (const char *)t2.data);
    rl__buf_release(&t1);
    rl__buf_release(&t2);
}

/* Run a one-topology protocol on url; *out_r: its results (the caller's). Returns the exit code. */
static int run_small(const char *dir, const char *url, json_t **out_r) {
    char path[1200];
    snprintf(path, sizeof path, "%s/p.json", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f,
            "{\"name\": \"tiny-fdb-bad\", \"dataset\": {\"records\": 10},\n"
            " \"topologies\": [{\"name\": \"fdbtopo\", \"kind\": \"fdb\", \"url\": \"%s\"}],\n"
            " \"cases\": [\"small-rows10-forward\"], \"arms\": [\"ordinary\"],\n"
            " \"design\": {\"blocks\": 1, \"repeats\": 1, \"seconds\": 0.01, \"warmup_seconds\": 0},\n"
            " \"statistics\": {\"resamples\": 10}}\n",
            url);
    fclose(f);
    char *out = NULL, *err = NULL;
    int rc = rl_test_run("rlbench", &out, &err, "campaign --protocol '%s/p.json' --out '%s/o'", dir, dir);
    snprintf(path, sizeof path, "%s/o", dir);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(path, out_r, &msg))
        fail_msg("no results (exit %d): %s: %s", rc, rl__errdetail_get(&msg), err);
    free(out);
    free(err);
    return rc;
}

TEST(campaign_5_4_fdb_unavailable_and_failed) {
    char *dir = rl_test_tmpdir("campaign-fdb-bad");
    json_t *r = NULL;
    unsetenv("RL_FDBC_URL");
    setenv("RL_FDB_LIBRARY", "/nonexistent/dir/libfdb_c.so", 1);
    ASSERT_EQ(run_small(dir, "fdb:", &r), 0);
    json_t *t = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_STR_EQ(jstr(t, "status"), "not_available");
    ASSERT_NOT_NULL(strstr(jstr(t, "reason"), "/nonexistent/dir/libfdb_c.so"));
    ASSERT_NOT_NULL(strstr(jstr(t, "reason"), "FoundationDB's client package"));
    ASSERT_EQ(json_array_size(json_object_get(r, "samples")), 0);
    json_decref(r);
    rl_test_rmtree(dir);
    free(dir);
    dir = rl_test_tmpdir("campaign-fdb-bad");
    setenv("RL_FDB_LIBRARY", lib_path(), 1);
    ASSERT_EQ(run_small(dir, "fdb:/nonexistent/dir/fdb.cluster", &r), 1);
    t = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_STR_EQ(jstr(t, "status"), "failed");
    json_t *fl = json_array_get(json_object_get(r, "failures"), 0);
    ASSERT_STR_EQ(jstr(fl, "what"), "topology");
    ASSERT_NOT_NULL(strstr(jstr(fl, "detail"), "/nonexistent/dir/fdb.cluster"));
    json_decref(r);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(campaign_5_3_fdb_protocol), T(campaign_5_1_fdb_over_cluster), T(campaign_5_2_fdb_over_embedded),
             T(campaign_5_4_fdb_unavailable_and_failed))
