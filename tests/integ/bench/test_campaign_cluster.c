/* test_campaign_cluster.c — `rlbench campaign` on the `single` topology with no injected delay: a
 * local cluster (one coordinator, one storage server on 127.0.0.1) started by the campaign itself
 * through src/server/cluster_admin.h, the dataset loaded through the cluster: client, and the
 * cluster stopped at the end. Tiny protocol: 100 records, 2 blocks, 1 repeat of 0.05 s, two cases.
 *
 *   campaign_4_1  the single topology runs: integrity_ok and the defect controls on the cluster,
 *                 ordinary, remote and adaptive available, the SQLite arm reported as not
 *                 applicable there, the RTT probe applicable (200 pings, min <= p50 <= p99 <= max),
 *                 the receipts (layout and shard map) equal before and after every case, the
 *                 servers' pids recorded and every one of them gone after the run; requests and
 *                 round trips recorded as null (not counted through the cluster yet); a single topology
 *                 with an injected delay is reported as not available (delay injection: issue 14)
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include <jansson.h>

#include "test.h"

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

TEST(campaign_4_1_single_topology) {
    char *dir = rl_test_tmpdir("campaign-cluster"), path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, "{\"name\": \"tiny-single\", \"dataset\": {\"records\": 100},\n"
               " \"topologies\": [{\"name\": \"single-0\", \"kind\": \"single\", \"delay_us\": 0},\n"
               "                {\"name\": \"single\", \"kind\": \"single\", \"delay_us\": 250}],\n"
               " \"cases\": [\"small-rows10-forward\", \"split-limit1-reverse\"],\n"
               " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"
               " \"statistics\": {\"resamples\": 500, \"seed\": 1},\n"
               " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 100}}\n");
    fclose(f);
    char *out, *err;
    int rc = rl_test_run("rlbench", &out, &err, "campaign --protocol '%s/p.json' --out '%s/o'", dir, dir);
    if (rc != 0) fail_msg("exit %d: %s", rc, err);
    snprintf(path, sizeof path, "%s/o/results.json", dir);
    json_t *r = json_load_file(path, 0, NULL);
    ASSERT_NOT_NULL(r);
    ASSERT_TRUE(json_is_true(json_object_get(r, "ok")));
    json_t *t = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_STR_EQ(jstr(t, "status"), "ran");
    ASSERT_STR_EQ(jstr(t, "kind"), "single");
    ASSERT_TRUE(json_is_true(json_object_get(t, "defect_controls_passed")));
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(t, "datasets"), i, x) {
        ASSERT_TRUE(json_is_true(json_object_get(x, "integrity_ok")));
        ASSERT_NOT_NULL(strstr(jstr(x, "url"), "cluster:"));
    }
    json_array_foreach(json_object_get(t, "arms"), i, x) {
        const char *a = jstr(x, "arm");
        int want = !strcmp(a, "ordinary") || !strcmp(a, "remote") || !strcmp(a, "adaptive"); /* issue 11 */
        ASSERT_EQ(json_is_true(json_object_get(x, "available")), want);
    }
    /* The servers were recorded, and none of them is left. */
    json_t *pids = json_object_get(t, "server_pids");
    ASSERT_EQ(json_array_size(pids), 2);
    json_array_foreach(pids, i, x) {
        pid_t pid = (pid_t)json_integer_value(x);
        ASSERT_TRUE(pid > 0);
        int gone = kill(pid, 0) != 0 && errno == ESRCH;
        if (!gone) {
            char proc[64], buf[256] = "";
            snprintf(proc, sizeof proc, "/proc/%d/cmdline", (int)pid);
            FILE *pf = fopen(proc, "r");
            if (pf) {
                size_t n = fread(buf, 1, sizeof buf - 1, pf);
                buf[n] = 0;
                fclose(pf);
            }
            /* A recycled pid running something else is not ours. */
            if (strstr(buf, "rlkvd") && strstr(buf, dir)) fail_msg("server %d is still running", (int)pid);
        }
    }
    ASSERT_EQ(json_array_size(json_object_get(r, "samples")), 2 * 2 * 3); /* cases x blocks x (ordinary, remote, adaptive) */
    /* Requests, round trips and network bytes are counted through the cluster (the sqlite arm
     * does not run on it): every query sends at least its read version and one read. */
    json_array_foreach(json_object_get(r, "samples"), i, x) {
        ASSERT_TRUE(json_number_value(json_object_get(x, "requests_per_op")) >= 2);
        ASSERT_TRUE(json_number_value(json_object_get(x, "round_trips_per_op")) >= 2);
        ASSERT_TRUE(json_number_value(json_object_get(x, "net_bytes_received_per_op")) > 0);
        ASSERT_TRUE(json_number_value(json_object_get(x, "ns_per_op")) > 0);
    }
    json_array_foreach(json_object_get(r, "cases"), i, x) {
        json_t *ch = json_object_get(x, "checks"), *rtt = json_object_get(ch, "rtt_before");
        ASSERT_TRUE(json_is_true(json_object_get(rtt, "applicable")));
        ASSERT_EQ(json_integer_value(json_object_get(rtt, "pings")), 200);
        double mn = json_number_value(json_object_get(rtt, "min_us")), p50 = json_number_value(json_object_get(rtt, "p50_us"));
        double p99 = json_number_value(json_object_get(rtt, "p99_us")), mx = json_number_value(json_object_get(rtt, "max_us"));
        ASSERT_TRUE(mn > 0 && mn <= p50 && p50 <= p99 && p99 <= mx);
        ASSERT_TRUE(json_is_true(json_object_get(json_object_get(ch, "rtt_after"), "applicable")));
        ASSERT_TRUE(json_is_true(json_object_get(ch, "receipts_equal")));
        ASSERT_TRUE(json_integer_value(json_object_get(json_object_get(ch, "receipt_before"), "shard_map_entries")) >= 1);
    }
    json_t *t2 = json_array_get(json_object_get(r, "topologies"), 1);
    ASSERT_STR_EQ(jstr(t2, "status"), "not_available");
    ASSERT_NOT_NULL(strstr(jstr(t2, "reason"), "delay injection"));
    json_decref(r);
    free(out);
    free(err);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(campaign_4_1_single_topology))
