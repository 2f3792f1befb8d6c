/* test_campaign_cluster.c — `rlbench campaign` on the `single` topology, without and with an
 * injected delay: a local cluster (one coordinator, one storage server on 127.0.0.1) started by the
 * campaign itself
 * through src/app/cluster_admin.h, the dataset loaded through the cluster: client, and the
 * cluster stopped at the end. Tiny protocol: 100 records, 2 blocks, 1 repeat of 0.05 s, two cases.
 *
 *   campaign_4_1  the single topology runs: integrity_ok and the defect controls on the cluster,
 *                 ordinary, remote and adaptive available, the SQLite and remote-grouped arms
 *                 reported as not applicable there, the RTT probe applicable (200 pings, min <= p50 <= p99 <= max),
 *                 the receipts (layout and shard map) equal before and after every case, the
 *                 servers' pids recorded and every one of them gone after the run; requests and
 *                 round trips counted through the cluster; the second topology (single, 1000 us one
 *                 way) runs too: every RTT probe before and after a case shows the delay (p50 >=
 *                 2 x 1000 us, "shows_delay"), the queries take at least two round trips of it, and
 *                 the restoration removes it (applicable, "restored", p50 below 2 ms, both
 *                 processes set), while delay 0 has no restoration to do
 *   campaign_4_2  a failed receipt comparison on the cluster is reported
 *                 (RL_CAMPAIGN_TEST_BREAK_RECEIPT): exit 1, the case's receipts_equal false, a
 *                 "receipt" failure naming the topology and the case, the other case equal
 *   campaign_4_3  multi: 3 hosts x 2 storage servers (127.0.0.1-3), double replication, 500 us
 *                 between hosts and to the client, disjoint placement: the placement is recorded
 *                 (index team {1,3}, records {5,2} {4,6}), every receipt carries rl placement's
 *                 with server_disjoint_fraction 1 and teams of two on distinct hosts, equal
 *                 before and after; the probes show the delay, the restoration removes it; the
 *                 colocated twin (secondary_reads grouped) has fraction 0; the workers' URL
 *                 carries ?secondary= (individual, grouped); 7 server pids; the remote-grouped
 *                 arm runs on both, agrees in the rows check and has its ratio to ordinary, shown
 *                 beside remote/ordinary in report.md, summary.csv and the ratio plot
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include <jansson.h>

#include "bench/campaign_int.h"
#include "test.h"

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* Write protocol (JSON text) to DIR/p.json, run `rlbench campaign` on it into DIR/o (with
 * RL_CAMPAIGN_TEST_BREAK_RECEIPT=break_case when break_case is not NULL), check that it exits
 * with want_exit, and return the results DIR/o holds (results.json.zst; the caller json_decrefs it). */
static json_t *run_campaign(const char *dir, const char *protocol, int want_exit, const char *break_case) {
    char path[600];
    snprintf(path, sizeof path, "%s/p.json", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(protocol, f);
    fclose(f);
    char *out, *err;
    if (break_case) setenv("RL_CAMPAIGN_TEST_BREAK_RECEIPT", break_case, 1);
    int rc = rl_test_run("rlbench", &out, &err, "campaign --protocol '%s/p.json' --out '%s/o'", dir, dir);
    if (break_case) unsetenv("RL_CAMPAIGN_TEST_BREAK_RECEIPT");
    if (rc != want_exit) fail_msg("exit %d (want %d): %s", rc, want_exit, err);
    free(out);
    free(err);
    snprintf(path, sizeof path, "%s/o", dir);
    json_t *r = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(path, &r, &msg)) fail_msg("results: %s", rl__errdetail_get(&msg));
    return r;
}

TEST(campaign_4_1_single_topology) {
    char *dir = rl_test_tmpdir("campaign-cluster");
    json_t *r =
        run_campaign(dir,
                     "{\"name\": \"tiny-single\", \"dataset\": {\"records\": 100},\n"
                     " \"topologies\": [{\"name\": \"single-0\", \"kind\": \"single\", \"delay_us\": 0},\n"
                     "                {\"name\": \"single-d\", \"kind\": \"single\", \"delay_us\": 1000}],\n"
                     " \"cases\": [\"small-rows10-forward\", \"split-limit1-reverse\"],\n"
                     " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"
                     " \"statistics\": {\"resamples\": 500, \"seed\": 1},\n"
                     " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 100}}\n",
                     0, NULL);
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
        int want = !strcmp(a, "ordinary") || !strcmp(a, "remote") || !strcmp(a, "adaptive");
        ASSERT_EQ(json_is_true(json_object_get(x, "available")), want);
        if (!strcmp(a, "remote-grouped")) ASSERT_NOT_NULL(strstr(jstr(x, "reason"), "multi topologies only"));
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
    ASSERT_EQ(json_array_size(json_object_get(r, "samples")),
              2 * 2 * 2 * 3); /* topologies x cases x blocks x (ordinary, remote, adaptive) */
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
        double mn = json_number_value(json_object_get(rtt, "min_us")),
               p50 = json_number_value(json_object_get(rtt, "p50_us"));
        double p99 = json_number_value(json_object_get(rtt, "p99_us")),
               mx = json_number_value(json_object_get(rtt, "max_us"));
        ASSERT_TRUE(mn > 0 && mn <= p50 && p50 <= p99 && p99 <= mx);
        ASSERT_TRUE(json_is_true(json_object_get(json_object_get(ch, "rtt_after"), "applicable")));
        ASSERT_TRUE(json_is_true(json_object_get(ch, "receipts_equal")));
        ASSERT_TRUE(json_integer_value(json_object_get(json_object_get(ch, "receipt_before"), "shard_map_entries")) >=
                    1);
    }
    /* The delay: shown by every probe while injected, gone after the restoration. */
    int n_delayed = 0;
    json_array_foreach(json_object_get(r, "cases"), i, x) {
        json_t *ch = json_object_get(x, "checks");
        int delayed = !strcmp(jstr(x, "topology"), "single-d");
        const char *probes[] = {"rtt_before", "rtt_after"};
        for (int j = 0; j < 2; j++) {
            json_t *rtt = json_object_get(ch, probes[j]);
            double p50 = json_number_value(json_object_get(rtt, "p50_us"));
            if (delayed) {
                ASSERT_TRUE(json_is_true(json_object_get(rtt, "shows_delay")));
                ASSERT_TRUE(p50 >= 2000.0);
                ASSERT_TRUE(json_number_value(json_object_get(rtt, "expected_min_p50_us")) == 2000.0);
            } else {
                ASSERT_NULL(json_object_get(rtt, "shows_delay"));
            }
        }
        n_delayed += delayed;
    }
    ASSERT_EQ(n_delayed, 2);
    json_array_foreach(json_object_get(r, "samples"), i, x) {
        if (strcmp(jstr(x, "topology"), "single-d")) continue;
        ASSERT_TRUE(json_number_value(json_object_get(x, "ns_per_op")) >= 2 * 2 * 1000 * 1000.0);
    }
    json_t *t0 = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_TRUE(json_is_false(json_object_get(json_object_get(t0, "restoration"), "applicable")));
    json_t *t2 = json_array_get(json_object_get(r, "topologies"), 1);
    ASSERT_STR_EQ(jstr(t2, "status"), "ran");
    ASSERT_EQ(json_integer_value(json_object_get(t2, "delay_us")), 1000);
    json_t *rest = json_object_get(t2, "restoration");
    ASSERT_TRUE(json_is_true(json_object_get(rest, "applicable")));
    ASSERT_TRUE(json_is_true(json_object_get(rest, "restored")));
    ASSERT_EQ(json_integer_value(json_object_get(rest, "processes_set")), 2);
    ASSERT_EQ(json_integer_value(json_object_get(rest, "removed_delay_us")), 1000);
    ASSERT_TRUE(json_number_value(json_object_get(rest, "p50_us")) < 2000.0);
    json_decref(r);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(campaign_4_2_cluster_receipt_differs) {
    char *dir = rl_test_tmpdir("campaign-cluster-receipt");
    json_t *r =
        run_campaign(dir,
                     "{\"name\": \"tiny-receipt\", \"dataset\": {\"records\": 50},\n"
                     " \"topologies\": [{\"name\": \"single-d\", \"kind\": \"single\", \"delay_us\": 500}],\n"
                     " \"cases\": [\"small-rows10-forward\", \"split-limit1-reverse\"],\n"
                     " \"arms\": [\"ordinary\", \"remote\"],\n"
                     " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.02, \"warmup_seconds\": 0.01},\n"
                     " \"statistics\": {\"resamples\": 200, \"seed\": 1},\n"
                     " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 20}}\n",
                     1, "split-limit1-reverse");
    ASSERT_TRUE(json_is_false(json_object_get(r, "ok")));
    size_t i;
    json_t *x;
    int broken = 0, equal = 0, reported = 0;
    json_array_foreach(json_object_get(r, "cases"), i, x) {
        json_t *ch = json_object_get(x, "checks");
        ASSERT_TRUE(json_integer_value(json_object_get(json_object_get(ch, "receipt_before"), "shard_map_entries")) >=
                    1);
        if (!strcmp(jstr(x, "case"), "split-limit1-reverse"))
            broken += json_is_false(json_object_get(ch, "receipts_equal"));
        else equal += json_is_true(json_object_get(ch, "receipts_equal"));
    }
    json_array_foreach(json_object_get(r, "failures"), i, x) {
        if (!strcmp(jstr(x, "what"), "receipt") && !strcmp(jstr(x, "topology"), "single-d") &&
            !strcmp(jstr(x, "case"), "split-limit1-reverse"))
            reported++;
    }
    ASSERT_EQ(broken, 1);
    ASSERT_EQ(equal, 1);
    ASSERT_EQ(reported, 1);
    json_decref(r);
    rl_test_rmtree(dir);
    free(dir);
}

/* The receipt's fractions of a case's "before" receipt. */
static double frac(json_t *kc, const char *which) {
    json_t *rb = json_object_get(json_object_get(kc, "checks"), "receipt_before");
    return json_number_value(json_object_get(json_object_get(json_object_get(rb, "placement"), "fractions"), which));
}

TEST(campaign_4_3_multi_topology) {
    char *dir = rl_test_tmpdir("campaign-multi");
    json_t *r = run_campaign(
        dir,
        "{\"name\": \"tiny-multi\", \"dataset\": {\"records\": 60},\n"
        " \"topologies\": [{\"name\": \"multi\", \"kind\": \"multi\", \"delay_us\": 500, \"storage_servers\": 6,\n"
        "                  \"hosts\": 3, \"replication\": 2, \"placement\": \"disjoint\"},\n"
        "                {\"name\": \"multi-co\", \"kind\": \"multi\", \"delay_us\": 0, \"storage_servers\": 2,\n"
        "                  \"hosts\": 2, \"replication\": 1, \"placement\": \"colocated\",\n"
        "                  \"secondary_reads\": \"grouped\"}],\n"
        " \"cases\": [\"small-rows10-forward\", \"split-rows10-reverse\"],\n"
        " \"arms\": [\"ordinary\", \"remote\", \"remote-grouped\"],\n"
        " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.02, \"warmup_seconds\": 0.01},\n"
        " \"statistics\": {\"resamples\": 200, \"seed\": 1},\n"
        " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 10}}\n",
        0, NULL);
    ASSERT_TRUE(json_is_true(json_object_get(r, "ok")));
    json_t *t = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_STR_EQ(jstr(t, "status"), "ran");
    ASSERT_STR_EQ(jstr(t, "kind"), "multi");
    ASSERT_EQ(json_array_size(json_object_get(t, "server_pids")), 7);
    ASSERT_STR_EQ(jstr(json_object_get(t, "placement"), "teams"), "index {1,3}, records {5,2} {4,6}");
    ASSERT_TRUE(json_is_true(json_object_get(json_object_get(t, "restoration"), "restored")));
    json_t *t2 = json_array_get(json_object_get(r, "topologies"), 1);
    ASSERT_STR_EQ(jstr(t2, "status"), "ran");
    ASSERT_STR_EQ(jstr(json_object_get(t2, "placement"), "teams"), "index {1}, records {1}");
    /* The workers' URL carries the protocol's secondary_reads. */
    ASSERT_NOT_NULL(strstr(jstr(t, "query_url"), "reclayer.cluster?secondary=individual"));
    ASSERT_NOT_NULL(strstr(jstr(t2, "query_url"), "reclayer.cluster?secondary=grouped"));
    size_t i, j;
    json_t *x, *sh;
    int n_multi = 0, n_co = 0;
    json_array_foreach(json_object_get(r, "cases"), i, x) {
        json_t *ch = json_object_get(x, "checks");
        ASSERT_TRUE(json_is_true(json_object_get(ch, "receipts_equal")));
        json_t *pl = json_object_get(json_object_get(ch, "receipt_before"), "placement");
        ASSERT_NOT_NULL(pl);
        if (!strcmp(jstr(x, "topology"), "multi")) {
            n_multi++;
            ASSERT_TRUE(frac(x, "server_disjoint_fraction") == 1.0);
            ASSERT_TRUE(json_is_true(json_object_get(json_object_get(ch, "rtt_before"), "shows_delay")));
            ASSERT_TRUE(json_is_true(json_object_get(json_object_get(ch, "rtt_after"), "shows_delay")));
            /* Every record shard has a team of two servers on two hosts. */
            json_array_foreach(json_object_get(json_object_get(pl, "records"), "shards"), j, sh) {
                json_t *team = json_object_get(sh, "team");
                ASSERT_EQ(json_array_size(team), 2);
                assert_string_not_equal(jstr(json_array_get(team, 0), "host"), jstr(json_array_get(team, 1), "host"));
            }
        } else {
            n_co++;
            ASSERT_TRUE(frac(x, "server_disjoint_fraction") == 0.0);
        }
    }
    ASSERT_EQ(n_multi, 2);
    ASSERT_EQ(n_co, 2);
    /* remote-grouped ran beside remote on both multi topologies: the same rows as the others in the
     * rows check, and its time ratio against ordinary in the summary for every case. */
    json_array_foreach(json_object_get(r, "topologies"), i, x) {
        json_t *a;
        json_array_foreach(json_object_get(x, "arms"), j, a) ASSERT_TRUE(json_is_true(json_object_get(a, "available")));
        json_array_foreach(json_object_get(x, "rows_check"), j, a) {
            ASSERT_TRUE(json_is_true(json_object_get(a, "agree")));
            ASSERT_NOT_NULL(json_object_get(json_object_get(a, "arms"), "remote-grouped"));
        }
    }
    int n_rg = 0;
    json_array_foreach(json_object_get(r, "summary"), i, x) {
        if (strcmp(jstr(x, "comparison"), "remote-grouped/ordinary") || strcmp(jstr(x, "metric"), "ns_per_op"))
            continue;
        ASSERT_STR_EQ(jstr(x, "status"), "ok");
        n_rg++;
    }
    ASSERT_EQ(n_rg, 4);
    /* ... and beside remote/ordinary in the report's main table, summary.csv and the ratio plot. */
    static const char *const files[3][2] = {{"report.md", "| remote/ordinary | remote-grouped/ordinary |"},
                                            {"summary.csv", "remote-grouped/ordinary"},
                                            {"plots/plots-multi-svg.gp", "title 'remote-grouped/ordinary'"}};
    for (int fi = 0; fi < 3; fi++) {
        char path[700];
        snprintf(path, sizeof path, "%s/o/%s", dir, files[fi][0]);
        FILE *f = fopen(path, "r");
        ASSERT_NOT_NULL(f);
        static char text[1 << 20];
        size_t len = fread(text, 1, sizeof text - 1, f);
        text[len] = 0;
        fclose(f);
        if (!strstr(text, files[fi][1])) fail_msg("%s: no '%s'", files[fi][0], files[fi][1]);
    }
    json_decref(r);
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(campaign_4_1_single_topology), T(campaign_4_2_cluster_receipt_differs), T(campaign_4_3_multi_topology))
