/* test_cluster_admin.c — the parts of src/app/cluster_admin.h that need no real rlkvd: the
 * initial layout, the refusals of rl__cluster_up, the process life cycle against a fake rlkvd (a
 * shell script that writes its port file and sleeps: the health wait times out, and everything
 * started must be stopped), and the pid checks (a pid whose start time differs from the recorded
 * one is never signalled). The real cluster is tested in tests/integ/server/.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "app/cluster_admin.h"
#include "test.h"

static int layout(int n, int k, const char *const *split, int ns, rl_buf *out, rl__errdetail *msg) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = n;
    o.n_shards = k;
    o.split = split;
    o.n_split = ns;
    rl__buf_reset(out);
    rl__errdetail_clear(msg);
    return rl__cluster_layout(&o, out, msg);
}

/* cluster-1.1: layouts — even split by first byte, round-robin teams, split keys, refusals. */
TEST(cluster_1_1_layout) {
    rl_buf out;
    rl__errdetail msg;
    rl__buf_init(&out);
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(layout(1, 0, NULL, 0, &out, &msg));
    ASSERT_STR_EQ((char *)out.data,
                  "{\"storage\": [1], \"shards\": [{\"begin\": \"\", \"end\": \"ff\", \"team\": [1]}]}\n");
    ASSERT_OK(layout(3, 4, NULL, 0, &out, &msg));
    ASSERT_STR_EQ((char *)out.data,
                  "{\"storage\": [1, 2, 3], \"shards\": [{\"begin\": \"\", \"end\": \"40\", \"team\": [1]}, "
                  "{\"begin\": \"40\", \"end\": \"80\", \"team\": [2]}, {\"begin\": \"80\", \"end\": \"c0\", "
                  "\"team\": [3]}, {\"begin\": \"c0\", \"end\": \"ff\", \"team\": [1]}]}\n");
    /* The default is one shard per server; boundary i at byte 256*i/K. */
    ASSERT_OK(layout(3, 0, NULL, 0, &out, &msg));
    ASSERT_NOT_NULL(strstr((char *)out.data, "\"end\": \"55\""));
    ASSERT_NOT_NULL(strstr((char *)out.data, "\"end\": \"aa\""));
    /* 255 shards (the most: with 256 the last boundary would be \xff itself). */
    ASSERT_OK(layout(2, 255, NULL, 0, &out, &msg));
    ASSERT_NOT_NULL(strstr((char *)out.data, "{\"begin\": \"fe\", \"end\": \"ff\", \"team\": [1]}"));
    const char *keys[] = {"a\\x00b", "m", "\\x80"};
    ASSERT_OK(layout(2, 0, keys, 3, &out, &msg));
    ASSERT_STR_EQ((char *)out.data,
                  "{\"storage\": [1, 2], \"shards\": [{\"begin\": \"\", \"end\": \"610062\", \"team\": [1]}, "
                  "{\"begin\": \"610062\", \"end\": \"6d\", \"team\": [2]}, {\"begin\": \"6d\", \"end\": \"80\", "
                  "\"team\": [1]}, {\"begin\": \"80\", \"end\": \"ff\", \"team\": [2]}]}\n");
    /* Every layout is valid JSON. */
    json_error_t je;
    json_t *j = json_loads((char *)out.data, 0, &je);
    ASSERT_NOT_NULL(j);
    json_decref(j);
    /* Refusals, each with a reason. */
    ASSERT_RC(layout(0, 0, NULL, 0, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "--storage 0"));
    ASSERT_RC(layout(65, 0, NULL, 0, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(layout(1, 256, NULL, 0, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_RC(layout(1, 2, keys, 1, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "exclude"));
    const char *dec[] = {"m", "b"};
    ASSERT_RC(layout(1, 0, dec, 2, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "strictly increasing"));
    const char *dup[] = {"m", "m"};
    ASSERT_RC(layout(1, 0, dup, 2, &out, &msg), RL_E_INVALID_ARGUMENT);
    const char *empty[] = {""};
    ASSERT_RC(layout(1, 0, empty, 1, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "empty"));
    const char *sys[] = {"\\xff/x"};
    ASSERT_RC(layout(1, 0, sys, 1, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "system keyspace"));
    const char *bad[] = {"\\xZZ"};
    ASSERT_RC(layout(1, 0, bad, 1, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "bad escape"));
    rl__buf_release(&out);
}

/* The teams of a layout (JSON) into teams[shard][member] (-1 past a team's end); returns the
 * number of shards. */
static int layout_teams(const rl_buf *out, int teams[][RL_PROTO_MAX_TEAM], int cap) {
    json_error_t je;
    json_t *root = json_loads((const char *)out->data, 0, &je);
    ASSERT_NOT_NULL(root);
    json_t *shards = json_object_get(root, "shards");
    int n = (int)json_array_size(shards);
    ASSERT_TRUE(n <= cap);
    for (int i = 0; i < n; i++) {
        json_t *t = json_object_get(json_array_get(shards, (size_t)i), "team");
        for (int j = 0; j < RL_PROTO_MAX_TEAM; j++)
            teams[i][j] = j < (int)json_array_size(t) ? (int)json_integer_value(json_array_get(t, (size_t)j)) : -1;
    }
    json_decref(root);
    return n;
}

/* cluster-1.5: replication teams — sizes, distinct members, distinct hosts when there are enough,
 * the primary rotating per shard (load spread: every server is primary and member of as many
 * shards as any other, give or take one), determinism, refusals. */
TEST(cluster_1_5_layout_teams) {
    rl_buf out, out2;
    rl__errdetail msg;
    rl__buf_init(&out);
    rl__buf_init(&out2);
    rl__errdetail_init(&msg, NULL);
    static int teams[256][RL_PROTO_MAX_TEAM];
    struct {
        int hosts, per, n, r, shards;
    } cases[] = {
        {0, 0, 2, 2, 0}, {0, 0, 4, 2, 0}, {0, 0, 3, 3, 12},  {3, 3, 0, 2, 0},   {3, 3, 0, 3, 27},
        {3, 1, 0, 2, 9}, {2, 2, 0, 3, 8}, {3, 3, 9, 2, 100}, {4, 2, 0, 2, 255}, {0, 0, 5, 1, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rl__cluster_up_opts o;
        memset(&o, 0, sizeof o);
        o.n_hosts = cases[c].hosts;
        o.storage_per_host = cases[c].per;
        o.n_storage = cases[c].n;
        o.replication = cases[c].r;
        o.n_shards = cases[c].shards;
        rl__buf_reset(&out);
        rl__buf_reset(&out2);
        ASSERT_OK(rl__cluster_layout(&o, &out, &msg));
        ASSERT_OK(rl__cluster_layout(&o, &out2, &msg));
        ASSERT_STR_EQ((char *)out.data, (char *)out2.data); /* deterministic */
        int n = o.n_storage ? o.n_storage : o.n_hosts * o.storage_per_host;
        int hosts = o.n_hosts ? o.n_hosts : 1;
        int r = o.replication;
        int k = layout_teams(&out, teams, 256);
        ASSERT_EQ(k, o.n_shards ? o.n_shards : n);
        int primary[65] = {0}, member[65] = {0};
        for (int i = 0; i < k; i++) {
            ASSERT_EQ(teams[i][0], i % n + 1); /* the round-robin primary */
            ASSERT_EQ(teams[i][r < RL_PROTO_MAX_TEAM ? r : 0] == -1 || r == RL_PROTO_MAX_TEAM, 1);
            int hosts_used = 0;
            for (int j = 0; j < r; j++) {
                int id = teams[i][j];
                ASSERT_TRUE(id >= 1 && id <= n);
                for (int m = 0; m < j; m++) ASSERT_NE(teams[i][m], id); /* distinct servers */
                int h = o.n_hosts ? (id - 1) / o.storage_per_host + 1 : 1;
                int seen = 0;
                for (int m = 0; m < j; m++) {
                    int hm = o.n_hosts ? (teams[i][m] - 1) / o.storage_per_host + 1 : 1;
                    seen |= hm == h;
                }
                hosts_used += !seen;
                member[id]++;
            }
            primary[teams[i][0]]++;
            /* Distinct hosts as far as there are hosts. */
            ASSERT_EQ(hosts_used, r < hosts ? r : hosts);
        }
        int pmin = k, pmax = 0, mmin = k * r, mmax = 0;
        for (int id = 1; id <= n; id++) {
            if (primary[id] < pmin) pmin = primary[id];
            if (primary[id] > pmax) pmax = primary[id];
            if (member[id] < mmin) mmin = member[id];
            if (member[id] > mmax) mmax = member[id];
        }
        ASSERT_TRUE(pmax - pmin <= 1);
        ASSERT_TRUE(mmax - mmin <= r);         /* a partial last round of shards */
        if (k % n == 0) ASSERT_EQ(mmax, mmin); /* whole rounds: every server equally loaded */
    }
    /* Double replication, 2 servers, one host: both servers hold both shards. */
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.replication = 2;
    rl__buf_reset(&out);
    ASSERT_OK(rl__cluster_layout(&o, &out, &msg));
    ASSERT_STR_EQ((char *)out.data, "{\"storage\": [1, 2], \"shards\": [{\"begin\": \"\", \"end\": \"80\", \"team\": "
                                    "[1, 2]}, {\"begin\": \"80\", \"end\": \"ff\", \"team\": [2, 1]}]}\n");
    /* 3 hosts x 3: the second member is on the next host at the same position. */
    memset(&o, 0, sizeof o);
    o.n_hosts = 3;
    o.storage_per_host = 3;
    o.replication = 2;
    rl__buf_reset(&out);
    ASSERT_OK(rl__cluster_layout(&o, &out, &msg));
    layout_teams(&out, teams, 256);
    int want[9][2] = {{1, 4}, {2, 5}, {3, 6}, {4, 7}, {5, 8}, {6, 9}, {7, 1}, {8, 2}, {9, 3}};
    for (int i = 0; i < 9; i++) ASSERT_EQ(teams[i][0], want[i][0]), ASSERT_EQ(teams[i][1], want[i][1]);
    /* Refusals: more members than servers, hosts that disagree with the count. */
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.replication = 3;
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__cluster_layout(&o, &out, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "replication 3"));
    memset(&o, 0, sizeof o);
    o.n_hosts = 2;
    o.storage_per_host = 2;
    o.n_storage = 3;
    ASSERT_RC(rl__cluster_layout(&o, &out, &msg), RL_E_INVALID_ARGUMENT);
    memset(&o, 0, sizeof o);
    o.n_hosts = 2;
    o.storage_per_host = 1;
    o.replication = 3;
    ASSERT_RC(rl__cluster_layout(&o, &out, &msg), RL_E_INVALID_ARGUMENT);
    rl__buf_release(&out);
    rl__buf_release(&out2);
}

/* A fake rlkvd: writes its port file (a port nobody answers on) and sleeps. */
static char *fake_rlkvd(const char *dir) {
    char *path = malloc(4200);
    snprintf(path, 4200, "%s/fake-rlkvd", dir);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs("#!/bin/sh\n"
          "while [ $# -gt 0 ]; do case \"$1\" in --port-file) pf=\"$2\"; shift;; esac; shift; done\n"
          "echo 1 > \"$pf.tmp\" && mv \"$pf.tmp\" \"$pf\"\n"
          "exec sleep 120\n",
          f);
    fclose(f);
    chmod(path, 0755);
    return path;
}

/* The pids recorded in dir/pids.json (up to cap), for checks. */
static int recorded_pids(const char *dir, int *pids, int cap) {
    char path[4400];
    snprintf(path, sizeof path, "%s/pids.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return -1;
    int n = 0;
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(root, "processes"), i, p) if (n < cap) pids[n++] =
        (int)json_integer_value(json_object_get(p, "pid"));
    json_decref(root);
    return n;
}

static int pid_alive(int pid) {
    int st;
    (void)waitpid(pid, &st, WNOHANG);
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* cluster-1.2: a cluster that never becomes healthy: up fails in time with a message naming the
 * logs, and every process it started is gone; a second up into the same directory is refused;
 * down is idempotent; status says every process is down and exits non-zero. */
TEST(cluster_1_2_unhealthy_start_stops_everything) {
    char *base = rl_test_tmpdir("cadm");
    char *fake = fake_rlkvd(base);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/c", base);
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 2;
    o.timeout_ms = 800;
    o.rlkvd = fake;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int rc = rl__cluster_up(dir, &o, &msg);
    ASSERT_RC(rc, RL_E_TIMED_OUT);
    printf("up failed as expected: %s\n", rl__errdetail_get(&msg));
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "/logs/"));
    int pids[8];
    int n = recorded_pids(dir, pids, 8);
    ASSERT_EQ(n, 3);
    for (int i = 0; i < n; i++) {
        ASSERT_TRUE(pids[i] > 0);
        ASSERT_FALSE(pid_alive(pids[i]));
    }
    /* The logs exist; the cluster file was never written. */
    char path[4300];
    snprintf(path, sizeof path, "%s/logs/storage-2.log", dir);
    ASSERT_EQ(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/reclayer.cluster", dir);
    ASSERT_NE(access(path, F_OK), 0);
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__cluster_up(dir, &o, &msg), RL_E_INVALID_ARGUMENT);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "not empty"));
    int stopped = -1;
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__cluster_down(dir, &stopped, &msg));
    ASSERT_EQ(stopped, 0);
    json_t *st = NULL;
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__cluster_status(dir, 200, &st, &msg), RL_E_SERVER_UNAVAILABLE);
    ASSERT_NOT_NULL(st);
    ASSERT_FALSE(json_is_true(json_object_get(st, "ok")));
    json_decref(st);
    /* No cluster at all. */
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__cluster_down(base, &stopped, &msg), RL_E_FILE_NOT_FOUND);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "rl cluster up"));
    free(fake);
    rl_test_rmtree(base);
    free(base);
}

/* cluster-1.3: a process that exits at once fails up at once (not after the timeout), naming its
 * log; the storage servers it had started are stopped. */
TEST(cluster_1_3_process_exits) {
    char *base = rl_test_tmpdir("cadm");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/c", base);
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    o.timeout_ms = 20000;
    o.rlkvd = "/bin/false";
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    int64_t t0 = (int64_t)time(NULL);
    ASSERT_RC(rl__cluster_up(dir, &o, &msg), RL_E_SERVER_UNAVAILABLE);
    ASSERT_TRUE((int64_t)time(NULL) - t0 < 5);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "coordinator.log"));
    /* A missing binary is named. */
    char dir2[4300];
    snprintf(dir2, sizeof dir2, "%s/d", base);
    o.rlkvd = "/nonexistent/rlkvd";
    rl__errdetail_clear(&msg);
    ASSERT_RC(rl__cluster_up(dir2, &o, &msg), RL_E_FILE_NOT_FOUND);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "/nonexistent/rlkvd"));
    rl_test_rmtree(base);
    free(base);
}

/* cluster-1.4: only our pids are signalled. pids.json names a live process (a sleep we start)
 * with another start time, as a recycled pid would have: down leaves it alone; with the right
 * start time it is stopped. */
TEST(cluster_1_4_recycled_pid_is_not_ours) {
    char *base = rl_test_tmpdir("cadm");
    char *fake = fake_rlkvd(base);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/c", base);
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    o.timeout_ms = 300;
    o.rlkvd = fake;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_RC(rl__cluster_up(dir, &o, &msg), RL_E_TIMED_OUT);
    pid_t victim = fork();
    if (victim == 0) {
        execl("/bin/sleep", "sleep", "30", (char *)NULL);
        _exit(127);
    }
    ASSERT_TRUE(victim > 0);
    /* It is the unrelated process of the scenario once it runs sleep (10 s at most). */
    char comm_path[64], comm[32] = "";
    snprintf(comm_path, sizeof comm_path, "/proc/%d/comm", (int)victim);
    for (int i = 0; i < 1000 && strcmp(comm, "sleep\n") != 0; i++) {
        FILE *cf = fopen(comm_path, "r");
        if (!cf || !fgets(comm, sizeof comm, cf)) comm[0] = 0;
        if (cf) fclose(cf);
        if (strcmp(comm, "sleep\n") != 0) usleep(10000);
    }
    ASSERT_STR_EQ(comm, "sleep\n");
    /* Rewrite pids.json: the storage server's entry gets the victim's pid, a wrong start time, and
     * running = true. */
    char path[4300];
    snprintf(path, sizeof path, "%s/pids.json", dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    ASSERT_NOT_NULL(root);
    json_t *p = json_array_get(json_object_get(root, "processes"), 1);
    json_object_set_new(p, "pid", json_integer(victim));
    json_object_set_new(p, "proc_start_ticks", json_integer(1));
    json_object_set_new(p, "running", json_true());
    ASSERT_EQ(json_dump_file(root, path, 0), 0);
    int stopped = -1;
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__cluster_down(dir, &stopped, &msg));
    ASSERT_EQ(stopped, 0);
    ASSERT_TRUE(pid_alive(victim));
    int pid = -1;
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__cluster_pid(dir, 1, &pid, NULL, &msg));
    ASSERT_EQ(pid, 0);
    /* With its real start time it is ours and gets stopped. */
    char sp[64], buf[1024];
    snprintf(sp, sizeof sp, "/proc/%d/stat", (int)victim);
    FILE *f = fopen(sp, "r");
    ASSERT_NOT_NULL(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *q = strrchr(buf, ')') + 2;
    for (int field = 3; field < 22; field++) q = strchr(q, ' ') + 1;
    json_object_set_new(p, "proc_start_ticks", json_integer(strtoll(q, NULL, 10)));
    ASSERT_EQ(json_dump_file(root, path, 0), 0);
    json_decref(root);
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__cluster_pid(dir, 1, &pid, NULL, &msg));
    ASSERT_EQ(pid, (int)victim);
    rl__errdetail_clear(&msg);
    ASSERT_OK(rl__cluster_down(dir, &stopped, &msg));
    ASSERT_EQ(stopped, 1);
    ASSERT_FALSE(pid_alive(victim));
    free(fake);
    rl_test_rmtree(base);
    free(base);
}

RL_TEST_MAIN(T(cluster_1_1_layout), T(cluster_1_5_layout_teams), T(cluster_1_2_unhealthy_start_stops_everything),
             T(cluster_1_3_process_exits), T(cluster_1_4_recycled_pid_is_not_ours))
