/* test_campaign_protocol.c — the campaign's protocol, case names, arm order and process helpers
 * (src/bench/campaign_protocol.c, campaign_proc.c).
 *
 *   campaign_proto_1_1  the built-in protocols: the full one has the reports' 16 cases, 6 blocks x
 *                       3 repeats of 3 s, 20,000 resamples, topologies embedded/single/multi; the
 *                       quick one only embedded; printing and parsing give the same text back
 *   campaign_proto_1_2  bad protocols are refused with the field named (ranges, kinds, unknown
 *                       fields, duplicates, cluster fields on embedded, arms without ordinary...)
 *   campaign_proto_1_3  case names: the 16 of the reports parse to the right variant, skip, limit
 *                       and direction; malformed names are refused with the reason
 *   campaign_proto_1_4  the order of arms alternates between blocks: AB BA AB BA, ABC CBA ABC
 *   campaign_proto_1_5  CPU accounting between two snapshots (known ticks: other = busy - campaign,
 *                       never below 0; the fraction of cores x wall time); a real snapshot reads /proc
 *   campaign_proto_1_6  child processes: exit codes and output captured, a child past its deadline
 *                       is killed by its pid and reported as timed out, a missing program is 127
 *   campaign_proto_1_7  the reports' built-in protocols by name: c3 (one single topology, one
 *                       storage server, memory, 250 us, small- and split-rows1000-forward, arms
 *                       ordinary remote adaptive, 6 x 3 x 3 s, seed 391706) and m2 (multi, 3 hosts
 *                       x 3 servers, replication 2, ssd, 250 us, placement reports, secondary
 *                       reads individual, the 16 cases, arms ordinary remote remote-grouped
 *                       adaptive, seed 492817); each prints and parses back to the same text; full and quick
 *                       by name are the built-ins; another name is refused; placement "reports" is
 *                       refused outside multi; the remote-grouped arm parses and prints by name
 *                       and applies to multi topologies only (the SQLite peer to embedded only)
 *   campaign_proto_1_8  the throughput phase's fields: full has 1, 4, 16 clients for 10 s on
 *                       small-rows10-forward, quick 1 and 2 for 1 s, c3 its small full scan; a file
 *                       without "throughput" runs none, "clients": [] none; given fields parse and
 *                       print back; bad counts, unknown fields and bad cases are refused by name
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench/campaign.h"
#include "bench/campaign_proc.h"
#include "test.h"

static void print_of(const rl__camp_protocol *p, rl_buf *b) {
    rl__buf_init(b);
    ASSERT_OK(rl__camp_protocol_print(p, b));
}

TEST(campaign_proto_1_1_builtin) {
    rl__camp_protocol p, q;
    rl_buf t1, t2;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__camp_protocol_builtin(0, &p);
    ASSERT_EQ(p.n_cases, 16);
    ASSERT_EQ(p.blocks, 6);
    ASSERT_EQ(p.repeats, 3);
    ASSERT_TRUE(p.seconds == 3);
    ASSERT_EQ(p.resamples, 20000);
    ASSERT_EQ(p.records, 1000);
    ASSERT_EQ(p.split_padding, 100000);
    ASSERT_EQ(p.n_topologies, 3);
    ASSERT_STR_EQ(p.topologies[0].name, "embedded");
    ASSERT_EQ(p.topologies[1].kind, RL_CAMP_SINGLE);
    ASSERT_EQ(p.topologies[1].delay_us, 250);
    ASSERT_EQ(p.topologies[2].kind, RL_CAMP_MULTI);
    ASSERT_EQ(p.topologies[2].replication, 2);
    ASSERT_STR_EQ(p.topologies[2].placement, "disjoint");
    ASSERT_EQ(p.n_arms, 5);
    ASSERT_EQ(p.arms[0], RL_CAMP_ORDINARY);
    ASSERT_EQ(p.arms[2], RL_CAMP_REMOTE_GROUPED);
    ASSERT_STR_EQ(p.topologies[2].secondary, "individual"); /* remote is FoundationDB's there */
    ASSERT_STR_EQ(p.cases[12].name, "skip3-rows10-forward");
    for (int quick = 0; quick < 2; quick++) {
        rl__camp_protocol_builtin(quick, &p);
        print_of(&p, &t1);
        rl__errdetail_clear(&msg);
        if (rl__camp_protocol_parse((const char *)t1.data, t1.len, &q, &msg)) fail_msg("%s", rl__errdetail_get(&msg));
        print_of(&q, &t2);
        ASSERT_MEM_EQ(t1.data, t1.len, t2.data, t2.len);
        rl__buf_release(&t1);
        rl__buf_release(&t2);
    }
    rl__camp_protocol_builtin(1, &p);
    ASSERT_EQ(p.n_topologies, 2); /* embedded, single at 250 us */
    ASSERT_EQ(p.topologies[1].kind, RL_CAMP_SINGLE);
    ASSERT_EQ(p.topologies[1].delay_us, 250);
    ASSERT_EQ(p.n_cases, 16);
    ASSERT_TRUE(p.seconds < 1);
    /* A protocol giving only some fields takes the others from the full one. */
    const char *part = "{\"name\": \"x\", \"design\": {\"blocks\": 2}}";
    ASSERT_OK(rl__camp_protocol_parse(part, strlen(part), &q, &msg));
    ASSERT_EQ(q.blocks, 2);
    ASSERT_EQ(q.repeats, 3);
    ASSERT_EQ(q.n_cases, 16);
    ASSERT_STR_EQ(q.description, "");
}

TEST(campaign_proto_1_2_errors) {
    struct {
        const char *doc, *want;
    } bad[] = {
        {"[", "not valid JSON"},
        {"[]", "must be an object"},
        {"{\"blokcs\": 3}", "unknown field 'blokcs'"},
        {"{\"design\": {\"blocks\": 0}}", "design.blocks: 0 is out of range [1, 100]"},
        {"{\"design\": {\"blocks\": 2.5}}", "design.blocks: must be an integer"},
        {"{\"design\": {\"seconds\": 0}}", "design.seconds: 0 is out of range [0.001, 3600]"},
        {"{\"design\": {\"repeats\": 65}}", "design.repeats: 65 is out of range [1, 64]"},
        {"{\"design\": {\"sceonds\": 1}}", "unknown field 'design.sceonds'"},
        {"{\"statistics\": {\"level\": 1}}", "statistics.level: 1 is out of range (0, 1)"},
        {"{\"statistics\": {\"resamples\": 0}}", "statistics.resamples: 0 is out of range"},
        {"{\"checks\": {\"contamination_threshold\": 1.5}}", "checks.contamination_threshold: 1.5 is out of range"},
        {"{\"dataset\": {\"records\": 0}}", "dataset.records: 0 is out of range [1, 1000000]"},
        {"{\"dataset\": {\"seed\": -1}}", "dataset.seed: -1 is out of range"},
        {"{\"topologies\": []}", "topologies: must be an array of 1 to 8"},
        {"{\"topologies\": [{\"name\": \"e\", \"kind\": \"cloud\"}]}",
         "topologies[0].kind: 'cloud' is not one of embedded, single, multi"},
        {"{\"topologies\": [{\"kind\": \"embedded\"}]}", "topologies[0]: needs a name and a kind"},
        {"{\"topologies\": [{\"name\": \"e\", \"kind\": \"embedded\", \"delay_us\": 5}]}",
         "topologies[0].delay_us: an embedded topology has no network"},
        {"{\"topologies\": [{\"name\": \"e\", \"kind\": \"embedded\", \"replication\": 2}]}",
         "topologies[0].replication: only for single and multi"},
        {"{\"topologies\": [{\"name\": \"s\", \"kind\": \"single\", \"storage_servers\": 2}]}",
         "topologies[0]: a single topology has one storage server"},
        {"{\"topologies\": [{\"name\": \"m\", \"kind\": \"multi\", \"storage_servers\": 3}]}",
         "disjoint placement needs two teams of 2: at least 4 storage servers, not 3"},
        {"{\"topologies\": [{\"name\": \"m\", \"kind\": \"multi\", \"placement\": \"random\"}]}",
         "topologies[0].placement: 'random' is not one of colocated, disjoint"},
        {"{\"topologies\": [{\"name\": \"e\", \"kind\": \"embedded\"}, {\"name\": \"e\", \"kind\": \"embedded\"}]}",
         "topologies[1]: the name 'e' is given twice"},
        {"{\"cases\": [\"small-rows5-forward\"]}",
         "cases[0]: 'small-rows5-forward': ROWS must be limit1, rows10 or rows1000"},
        {"{\"cases\": [\"small-rows10-forward\", \"small-rows10-forward\"]}",
         "cases[1]: 'small-rows10-forward' is given twice"},
        {"{\"cases\": [7]}", "cases[0]: must be a string"},
        {"{\"arms\": [\"remote\"]}", "list ordinary"},
        {"{\"arms\": [\"ordinary\", \"adaptive\"]}", "list ordinary, and remote with adaptive"},
        {"{\"arms\": [\"ordinary\", \"fast\"]}",
         "arms[1]: must be one of ordinary, remote, remote-grouped, adaptive, sqlite"},
        {"{\"arms\": [\"remote-grouped\"]}", "list ordinary"},
        {"{\"arms\": [\"ordinary\", \"remote-grouped\", \"remote-grouped\"]}",
         "arms[2]: 'remote-grouped' is given twice"},
        {"{\"arms\": [\"ordinary\", \"ordinary\"]}", "arms[1]: 'ordinary' is given twice"},
        {"{\"keep_data\": 1}", "keep_data: must be true or false"},
        {"{\"name\": \"\"}", "name: must be a non-empty string"},
        {"{\"design\": {\"blocks\": 3}, \"design\": {\"blocks\": 4}}", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl__camp_protocol p;
        rl__errdetail msg;
        rl__errdetail_init(&msg, NULL);
        int rc = rl__camp_protocol_parse(bad[i].doc, strlen(bad[i].doc), &p, &msg);
        if (rc != RL_E_INVALID_ARGUMENT || !strstr(rl__errdetail_get(&msg), bad[i].want))
            fail_msg("%s: rc %d, message '%s', want '%s'", bad[i].doc, rc, rl__errdetail_get(&msg), bad[i].want);
    }
}

TEST(campaign_proto_1_3_cases) {
    rl__camp_protocol p;
    rl__camp_case c;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__camp_protocol_builtin(0, &p);
    for (int i = 0; i < 16; i++) {
        const rl__camp_case *k = &p.cases[i];
        ASSERT_EQ(k->variant, i < 6 || i >= 12 ? RL_CAMP_SMALL : RL_CAMP_SPLIT);
        ASSERT_EQ(k->skip, i >= 12 ? 3 : 0);
        ASSERT_EQ(k->reverse, i % 2);
        int rows = i >= 12 ? (i < 14 ? 10 : 1000) : (i % 6 < 2 ? 1 : i % 6 < 4 ? 10 : 1000);
        ASSERT_EQ(k->limit, rows);
    }
    ASSERT_OK(rl__camp_case_parse("split-rows1000-reverse", &c, &msg));
    ASSERT_EQ(c.variant, RL_CAMP_SPLIT);
    ASSERT_EQ(c.limit, 1000);
    ASSERT_EQ(c.reverse, 1);
    const char *badnames[] = {"",
                              "small",
                              "small-rows10",
                              "small-rows10-forward-x",
                              "tiny-rows10-forward",
                              "small-rows10-sideways",
                              "small-rows100-forward",
                              "-rows10-forward"};
    for (size_t i = 0; i < sizeof badnames / sizeof badnames[0]; i++) {
        rl__errdetail_clear(&msg);
        ASSERT_RC(rl__camp_case_parse(badnames[i], &c, &msg), RL_E_INVALID_ARGUMENT);
        ASSERT_TRUE(rl__errdetail_len(&msg) > 0);
    }
}

TEST(campaign_proto_1_4_arm_order) {
    rl__camp_arm two[2] = {RL_CAMP_ORDINARY, RL_CAMP_REMOTE},
                 three[3] = {RL_CAMP_ORDINARY, RL_CAMP_REMOTE, RL_CAMP_SQLITE};
    rl__camp_arm out[3];
    for (int b = 0; b < 6; b++) {
        rl__camp_arm_order(b, two, 2, out);
        ASSERT_EQ(out[0], b % 2 ? RL_CAMP_REMOTE : RL_CAMP_ORDINARY);
        ASSERT_EQ(out[1], b % 2 ? RL_CAMP_ORDINARY : RL_CAMP_REMOTE);
        rl__camp_arm_order(b, three, 3, out);
        ASSERT_EQ(out[0], b % 2 ? RL_CAMP_SQLITE : RL_CAMP_ORDINARY);
        ASSERT_EQ(out[1], RL_CAMP_REMOTE);
        ASSERT_EQ(out[2], b % 2 ? RL_CAMP_ORDINARY : RL_CAMP_SQLITE);
    }
    rl__camp_arm_order(1, three, 1, out);
    ASSERT_EQ(out[0], RL_CAMP_ORDINARY);
}

TEST(campaign_proto_1_5_cpu) {
    long hz = sysconf(_SC_CLK_TCK), cores = sysconf(_SC_NPROCESSORS_ONLN);
    rl__camp_cpu a = {1, 1000, 100, 50, 10.0}, b = {1, 1000 + (uint64_t)hz * 3 / 2, 100 + (uint64_t)hz / 2, 50, 12.0};
    rl__camp_cpu_use u;
    rl__camp_cpu_between(&a, &b, &u);
    ASSERT_TRUE(u.ok);
    ASSERT_TRUE(fabs(u.wall_s - 2.0) < 1e-9);
    ASSERT_TRUE(fabs(u.busy_s - 1.5) < 0.02);
    ASSERT_TRUE(fabs(u.campaign_s - 0.5) < 0.02);
    ASSERT_TRUE(fabs(u.other_s - 1.0) < 0.03);
    ASSERT_TRUE(fabs(u.other_fraction - 1.0 / (2.0 * (double)cores)) < 0.02);
    /* The campaign's own servers count as the campaign's. */
    b.others_owned = 50 + (uint64_t)hz;
    rl__camp_cpu_between(&a, &b, &u);
    ASSERT_TRUE(u.other_s == 0);
    /* An unreadable snapshot makes the use unverifiable. */
    b.ok = 0;
    rl__camp_cpu_between(&a, &b, &u);
    ASSERT_FALSE(u.ok);
    rl__camp_cpu s1, s2;
    int me = (int)getpid();
    rl__camp_cpu_snapshot(&me, 1, &s1);
    ASSERT_TRUE(s1.ok);
    ASSERT_TRUE(s1.busy > 0);
    int nobody = 0x7ffffff0;
    rl__camp_cpu_snapshot(&nobody, 1, &s2);
    ASSERT_FALSE(s2.ok);
}

TEST(campaign_proto_1_6_children) {
    rl__camp_child c;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    char *sh[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    ASSERT_OK(rl__camp_child_run(sh, 20, &c, &msg));
    ASSERT_EQ(c.exit_code, 3);
    ASSERT_FALSE(c.timed_out);
    ASSERT_STR_EQ((const char *)c.out.data, "out\n");
    ASSERT_STR_EQ((const char *)c.err.data, "err\n");
    rl__camp_child_release(&c);
    char *slow[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    ASSERT_OK(rl__camp_child_run(slow, 0.3, &c, &msg));
    ASSERT_TRUE(c.timed_out);
    ASSERT_EQ(c.exit_code, -1);
    ASSERT_EQ(c.signal, 9);
    ASSERT_TRUE(c.wall_s < 10);
    ASSERT_TRUE(c.pid > 0);
    rl__camp_child_release(&c);
    char *missing[] = {"rl-no-such-program-anywhere", NULL};
    ASSERT_OK(rl__camp_child_run(missing, 20, &c, &msg));
    ASSERT_EQ(c.exit_code, 127);
    rl__camp_child_release(&c);
}

TEST(campaign_proto_1_7_reports_protocols) {
    rl__camp_protocol p, q;
    rl_buf t1, t2;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__camp_protocol_named("c3", &p));
    ASSERT_STR_EQ(p.name, "c3");
    ASSERT_EQ(p.n_topologies, 1);
    ASSERT_EQ(p.topologies[0].kind, RL_CAMP_SINGLE);
    ASSERT_EQ(p.topologies[0].storage_servers, 1);
    ASSERT_STR_EQ(p.topologies[0].engine, "memory");
    ASSERT_EQ(p.topologies[0].delay_us, 250);
    ASSERT_EQ(p.n_cases, 2);
    ASSERT_STR_EQ(p.cases[0].name, "small-rows1000-forward");
    ASSERT_STR_EQ(p.cases[1].name, "split-rows1000-forward");
    ASSERT_EQ(p.n_arms, 3);
    ASSERT_TRUE(p.arms[0] == RL_CAMP_ORDINARY && p.arms[1] == RL_CAMP_REMOTE && p.arms[2] == RL_CAMP_ADAPTIVE);
    ASSERT_TRUE(p.blocks == 6 && p.repeats == 3 && p.seconds == 3 && p.resamples == 20000);
    ASSERT_EQ(p.bootstrap_seed, 391706);
    ASSERT_EQ(p.records, 1000);
    ASSERT_OK(rl__camp_protocol_named("m2", &p));
    ASSERT_EQ(p.n_topologies, 1);
    const rl__camp_topology *t = &p.topologies[0];
    ASSERT_EQ(t->kind, RL_CAMP_MULTI);
    ASSERT_TRUE(t->hosts == 3 && t->storage_servers == 9 && t->replication == 2 && t->delay_us == 250);
    ASSERT_STR_EQ(t->engine, "ssd");
    ASSERT_STR_EQ(t->placement, "reports");
    ASSERT_EQ(p.n_cases, 16);
    ASSERT_STR_EQ(t->secondary, "individual");
    ASSERT_EQ(p.n_arms, 4);
    ASSERT_TRUE(p.arms[0] == RL_CAMP_ORDINARY && p.arms[1] == RL_CAMP_REMOTE && p.arms[2] == RL_CAMP_REMOTE_GROUPED &&
                p.arms[3] == RL_CAMP_ADAPTIVE);
    ASSERT_TRUE(p.blocks == 6 && p.repeats == 3 && p.seconds == 3);
    ASSERT_EQ(p.bootstrap_seed, 492817);
    static const char *const names[4] = {"c3", "m2", "full", "quick"};
    for (int i = 0; i < 4; i++) {
        ASSERT_OK(rl__camp_protocol_named(names[i], &p));
        print_of(&p, &t1);
        rl__errdetail_clear(&msg);
        if (rl__camp_protocol_parse((const char *)t1.data, t1.len, &q, &msg)) fail_msg("%s", rl__errdetail_get(&msg));
        print_of(&q, &t2);
        ASSERT_MEM_EQ(t1.data, t1.len, t2.data, t2.len);
        rl__buf_release(&t1);
        rl__buf_release(&t2);
    }
    rl__camp_protocol_named("quick", &p);
    rl__camp_protocol_builtin(1, &q);
    ASSERT_MEM_EQ(&p, sizeof p, &q, sizeof q);
    ASSERT_EQ(rl__camp_protocol_named("c4", &p), RL_E_INVALID_ARGUMENT);
    const char *bad = "{\"topologies\": [{\"name\": \"s\", \"kind\": \"single\", \"placement\": \"reports\"}]}";
    rl__errdetail_clear(&msg);
    ASSERT_EQ(rl__camp_protocol_parse(bad, strlen(bad), &q, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "only for multi topologies"));
    /* The remote-grouped arm: parsed by name, printed back, without remote or adaptive; it runs
     * on multi topologies only, the SQLite peer on embedded only. */
    const char *rg = "{\"arms\": [\"ordinary\", \"remote-grouped\"]}";
    rl__errdetail_clear(&msg);
    if (rl__camp_protocol_parse(rg, strlen(rg), &q, &msg)) fail_msg("%s", rl__errdetail_get(&msg));
    ASSERT_EQ(q.n_arms, 2);
    ASSERT_EQ(q.arms[1], RL_CAMP_REMOTE_GROUPED);
    print_of(&q, &t1);
    ASSERT_NOT_NULL(strstr((const char *)t1.data, "\"remote-grouped\""));
    rl__buf_release(&t1);
    ASSERT_STR_EQ(rl__camp_arm_name(RL_CAMP_REMOTE_GROUPED), "remote-grouped");
    ASSERT_EQ(rl__camp_arm_of("remote-grouped"), RL_CAMP_REMOTE_GROUPED);
    ASSERT_STR_EQ(rl__camp_comparison_name(1), "remote-grouped/ordinary");
    const char *why = NULL;
    ASSERT_TRUE(rl__camp_arm_applies(RL_CAMP_REMOTE_GROUPED, RL_CAMP_MULTI, &why) && !why);
    ASSERT_FALSE(rl__camp_arm_applies(RL_CAMP_REMOTE_GROUPED, RL_CAMP_SINGLE, &why));
    ASSERT_NOT_NULL(strstr(why, "multi topologies only"));
    ASSERT_FALSE(rl__camp_arm_applies(RL_CAMP_REMOTE_GROUPED, RL_CAMP_FDB, NULL));
    ASSERT_FALSE(rl__camp_arm_applies(RL_CAMP_SQLITE, RL_CAMP_MULTI, NULL));
    ASSERT_TRUE(rl__camp_arm_applies(RL_CAMP_SQLITE, RL_CAMP_EMBEDDED, NULL));
    ASSERT_TRUE(rl__camp_arm_applies(RL_CAMP_REMOTE, RL_CAMP_SINGLE, NULL));
}

TEST(campaign_proto_1_8_throughput) {
    rl__camp_protocol p, q;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl__camp_protocol_builtin(0, &p);
    ASSERT_EQ(p.n_tp_clients, 3);
    ASSERT_TRUE(p.tp_clients[0] == 1 && p.tp_clients[1] == 4 && p.tp_clients[2] == 16);
    ASSERT_TRUE(p.tp_seconds == 10);
    ASSERT_EQ(p.n_tp_cases, 1);
    ASSERT_STR_EQ(p.tp_cases[0].name, "small-rows10-forward");
    rl__camp_protocol_builtin(1, &p);
    ASSERT_EQ(p.n_tp_clients, 2);
    ASSERT_TRUE(p.tp_clients[0] == 1 && p.tp_clients[1] == 2 && p.tp_seconds == 1);
    ASSERT_OK(rl__camp_protocol_named("c3", &p));
    ASSERT_STR_EQ(p.tp_cases[0].name, "small-rows1000-forward");
    const char *none = "{\"name\": \"x\"}";
    ASSERT_OK(rl__camp_protocol_parse(none, strlen(none), &q, &msg));
    ASSERT_EQ(q.n_tp_clients, 0);
    const char *empty = "{\"throughput\": {\"clients\": []}}";
    ASSERT_OK(rl__camp_protocol_parse(empty, strlen(empty), &q, &msg));
    ASSERT_EQ(q.n_tp_clients, 0);
    const char *dflt = "{\"throughput\": {\"seconds\": 2}}";
    ASSERT_OK(rl__camp_protocol_parse(dflt, strlen(dflt), &q, &msg));
    ASSERT_EQ(q.n_tp_clients, 3);
    ASSERT_TRUE(q.tp_seconds == 2);
    const char *given = "{\"throughput\": {\"clients\": [2, 8], \"seconds\": 0.5, \"warmup_seconds\": 0.25, "
                        "\"cases\": [\"split-limit1-reverse\", \"skip3-rows10-forward\"]}}";
    ASSERT_OK(rl__camp_protocol_parse(given, strlen(given), &q, &msg));
    ASSERT_TRUE(q.n_tp_clients == 2 && q.tp_clients[0] == 2 && q.tp_clients[1] == 8);
    ASSERT_TRUE(q.tp_seconds == 0.5 && q.tp_warmup_seconds == 0.25);
    ASSERT_EQ(q.n_tp_cases, 2);
    ASSERT_EQ(q.tp_cases[1].skip, 3);
    rl_buf t1, t2;
    print_of(&q, &t1);
    ASSERT_NOT_NULL(strstr((const char *)t1.data, "\"throughput\": {\"clients\": [2, 8], \"seconds\": 0.5"));
    ASSERT_OK(rl__camp_protocol_parse((const char *)t1.data, t1.len, &p, &msg));
    print_of(&p, &t2);
    ASSERT_MEM_EQ(t1.data, t1.len, t2.data, t2.len);
    rl__buf_release(&t1);
    rl__buf_release(&t2);
    struct {
        const char *doc, *want;
    } bad[] = {{"{\"throughput\": {\"clients\": [0]}}", "throughput.clients[0]"},
               {"{\"throughput\": {\"clients\": [65]}}", "throughput.clients[0]"},
               {"{\"throughput\": {\"clients\": 4}}", "throughput.clients"},
               {"{\"throughput\": {\"client\": [4]}}", "unknown field 'throughput.client'"},
               {"{\"throughput\": {\"seconds\": 0}}", "throughput.seconds"},
               {"{\"throughput\": {\"cases\": [\"small-rows5-forward\"]}}", "throughput.cases[0]"},
               {"{\"throughput\": {\"cases\": []}}", "throughput.cases"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl__errdetail_clear(&msg);
        ASSERT_EQ(rl__camp_protocol_parse(bad[i].doc, strlen(bad[i].doc), &q, &msg), RL_E_INVALID_ARGUMENT);
        if (!strstr(rl__errdetail_get(&msg), bad[i].want))
            fail_msg("%s: '%s' lacks '%s'", bad[i].doc, rl__errdetail_get(&msg), bad[i].want);
    }
}

RL_TEST_MAIN(T(campaign_proto_1_1_builtin), T(campaign_proto_1_2_errors), T(campaign_proto_1_3_cases),
             T(campaign_proto_1_4_arm_order), T(campaign_proto_1_5_cpu), T(campaign_proto_1_6_children),
             T(campaign_proto_1_7_reports_protocols), T(campaign_proto_1_8_throughput))
