/* test_shell_cluster.c — the built `rl shell` against a real local cluster (the fixture: a
 * coordinator and three storage servers, the keyspace in three shards), through its cluster file:
 *
 *   shell-3.1  set in one invocation, get in another; a transaction whose writes span every
 *              storage server commits once and getrange reads them back in order
 *   shell-3.2  status from the cluster file alone (run from another directory): one line per
 *              process, each healthy, the coordinator's address, the read version
 *   shell-3.3  status json: JSON naming every process (the coordinator and each storage server,
 *              with the ids, addresses and ports `rl cluster status --dir` records), each with
 *              its own STATUS reply, "ok": true
 *   shell-3.4  the cluster file ./reclayer.cluster in the current directory is the database when
 *              neither --db nor RL_DB is given: rl shell and rl kv read and write the cluster
 *   shell-3.5  a storage server killed: status (text and JSON) shows it not healthy, with why,
 *              and the others healthy; "ok": false; the status command itself succeeds
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cluster_fixture.h"
#include "test.h"

#define N_STORAGE 3

static void expect_in(const char *hay, const char *needle, const char *what) {
    if (!strstr(hay, needle)) fail_msg("%s: [%s] lacks [%s]", what, hay, needle);
}

static rl_test_cluster cl;
static char *elsewhere; /* a directory without a cluster file */

/* Start the cluster the tests share, unless it runs (a test run alone starts it too). */
static void start(void) {
    if (cl.dir) return;
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = N_STORAGE;
    o.n_shards = 3; /* ["", \x55), [\x55, \xaa), [\xaa, \xff): one per storage server */
    ASSERT_OK(rl_test_cluster_start(&cl, &o));
    elsewhere = rl_test_tmpdir("sh3");
}

/* `rl shell --db URL --exec CMDS` from elsewhere; must succeed; stdout (to free). */
static char *exec_ok(const char *cmds) {
    char *out, *err;
    int rc = rl_test_run_in(elsewhere, NULL, NULL, "rl", &out, &err, "shell --db '%s' --exec '%s'", cl.url, cmds);
    if (rc) fail_msg("rl shell --exec '%s': exit %d\n%s\n%s", cmds, rc, out, err);
    free(err);
    return out;
}

TEST(shell_3_1_set_get_across_invocations) {
    start();
    char *out = exec_ok("writemode on; set hello world");
    expect_in(out, "Committed (", "set");
    free(out);
    out = exec_ok("get hello");
    ASSERT_STR_EQ(out, "`hello' is `world'\n");
    free(out);
    /* One transaction over the three shards (three storage servers). */
    out = exec_ok("writemode on; begin; set \\x10 a; set \\x90 b; set \\xc0 c; getrangekeys \\x00 \\xff; commit");
    expect_in(out, "\nRange limited to 25 keys\n`\\x10'\n`hello'\n`\\x90'\n`\\xc0'\n\n>>> commit\nCommitted (", "txn");
    free(out);
    out = exec_ok("getrange \\x00 \\xff");
    ASSERT_STR_EQ(out, "\nRange limited to 25 keys\n`\\x10' is `a'\n`hello' is `world'\n`\\x90' is `b'\n`\\xc0' is "
                       "`c'\n\n");
    free(out);
}

/* rl cluster status --dir's processes: (role, id, address, port). */
static json_t *dir_status(void) {
    char *out, *err;
    ASSERT_EQ(rl_test_run_in(elsewhere, NULL, NULL, "rl", &out, &err, "cluster status --dir '%s' --json", cl.dir), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("rl cluster status --json: %s: %s", je.text, out);
    free(out);
    free(err);
    return j;
}

TEST(shell_3_2_status_text) {
    start();
    char *out = exec_ok("status");
    char want[4400];
    snprintf(want, sizeof want, "cluster %s (coordinator 127.0.0.1:", cl.file);
    ASSERT_TRUE(!strncmp(out, want, strlen(want)));
    expect_in(out, "ROLE          ID  HOST   ADDRESS", "header");
    json_t *ds = dir_status();
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(ds, "processes"), i, p) {
        char line[256];
        snprintf(line, sizeof line, "%-12s %3lld  host1  127.0.0.1:%-6lld",
                 json_string_value(json_object_get(p, "role")), (long long)json_integer_value(json_object_get(p, "id")),
                 (long long)json_integer_value(json_object_get(p, "port")));
        expect_in(out, line, "a process line");
    }
    json_decref(ds);
    int healthy = 0;
    for (const char *q = out; (q = strstr(q, " healthy ")); q++) healthy++;
    ASSERT_EQ(healthy, 1 + N_STORAGE);
    ASSERT_TRUE(strstr(out, "DOWN") == NULL);
    expect_in(out, "; the cluster is healthy\n", "summary");
    expect_in(out, "read version ", "summary");
    free(out);
}

/* status json of the shell, parsed. */
static json_t *shell_status_json(void) {
    char *out = exec_ok("status json");
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("status json is not JSON (%s): %s", je.text, out);
    free(out);
    return j;
}

TEST(shell_3_3_status_json_names_every_process) {
    start();
    json_t *j = shell_status_json();
    char url[4400];
    snprintf(url, sizeof url, "%s", cl.url);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "database")), url);
    ASSERT_STR_EQ(json_string_value(json_object_get(j, "cluster_file")), cl.file);
    ASSERT_TRUE(json_is_true(json_object_get(j, "ok")));
    ASSERT_TRUE(json_integer_value(json_object_get(j, "read_version")) > 0);
    json_t *procs = json_object_get(j, "processes");
    ASSERT_EQ(json_array_size(procs), 1 + N_STORAGE);
    /* The same processes `rl cluster status --dir` knows from pids.json. */
    json_t *ds = dir_status();
    json_t *dprocs = json_object_get(ds, "processes");
    ASSERT_EQ(json_array_size(dprocs), 1 + N_STORAGE);
    for (size_t i = 0; i < json_array_size(dprocs); i++) {
        json_t *d = json_array_get(dprocs, i);
        json_int_t id = json_integer_value(json_object_get(d, "id"));
        const char *role = json_string_value(json_object_get(d, "role"));
        json_t *mine = NULL;
        for (size_t k = 0; k < json_array_size(procs); k++) {
            json_t *p = json_array_get(procs, k);
            if (json_integer_value(json_object_get(p, "id")) == id &&
                !strcmp(json_string_value(json_object_get(p, "role")), role))
                mine = p;
        }
        if (!mine) fail_msg("status json does not name %s %lld", role, (long long)id);
        ASSERT_EQ(json_integer_value(json_object_get(mine, "port")), json_integer_value(json_object_get(d, "port")));
        ASSERT_STR_EQ(json_string_value(json_object_get(mine, "address")),
                      json_string_value(json_object_get(d, "address")));
        ASSERT_EQ(json_integer_value(json_object_get(mine, "pid")), json_integer_value(json_object_get(d, "pid")));
        ASSERT_TRUE(json_is_true(json_object_get(mine, "healthy")));
        json_t *st = json_object_get(mine, "status");
        ASSERT_TRUE(json_is_object(st));
        ASSERT_STR_EQ(json_string_value(json_object_get(st, "role")), role);
        ASSERT_EQ(json_integer_value(json_object_get(st, "id")), id);
    }
    json_decref(ds);
    json_decref(j);
}

TEST(shell_3_4_cluster_file_in_cwd) {
    start();
    char *out, *err;
    /* cl.dir holds reclayer.cluster: no --db, no RL_DB. */
    ASSERT_EQ(
        rl_test_run_in(cl.dir, NULL, NULL, "rl", &out, &err, "shell --exec 'writemode on; set viacwd 1; get viacwd'"),
        0);
    expect_in(out, "`viacwd' is `1'", "shell in the cluster's directory");
    ASSERT_STR_EQ(err, "");
    free(out);
    free(err);
    ASSERT_EQ(rl_test_run_in(cl.dir, NULL, NULL, "rl", &out, &err, "kv get viacwd"), 0);
    ASSERT_STR_EQ(out, "1\n");
    free(out);
    free(err);
    ASSERT_EQ(rl_test_run_in(cl.dir, NULL, NULL, "rl", &out, &err, "shell --exec status"), 0);
    expect_in(out, "; the cluster is healthy\n", "status via ./reclayer.cluster");
    free(out);
    free(err);
    /* Elsewhere the same command finds nothing. */
    ASSERT_EQ(rl_test_run_in(elsewhere, NULL, NULL, "rl", &out, &err, "kv get viacwd"), 2);
    expect_in(err, "no database", "elsewhere");
    free(out);
    free(err);
}

TEST(shell_3_5_status_with_a_server_down) {
    start();
    int pid = rl_test_cluster_pid(&cl, 2);
    ASSERT_TRUE(pid > 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0); /* a process of our own cluster, by its recorded pid */
    json_t *j = shell_status_json();
    ASSERT_TRUE(json_is_false(json_object_get(j, "ok")));
    json_t *procs = json_object_get(j, "processes");
    ASSERT_EQ(json_array_size(procs), 1 + N_STORAGE);
    for (size_t k = 0; k < json_array_size(procs); k++) {
        json_t *p = json_array_get(procs, k);
        int is_down = !strcmp(json_string_value(json_object_get(p, "role")), "storage") &&
                      json_integer_value(json_object_get(p, "id")) == 2;
        ASSERT_EQ(json_is_true(json_object_get(p, "healthy")), !is_down);
        if (is_down) {
            ASSERT_TRUE(json_is_null(json_object_get(p, "status")));
            expect_in(json_string_value(json_object_get(p, "error")), "no STATUS reply", "why");
        }
    }
    json_decref(j);
    char *out = exec_ok("status");
    expect_in(out, "DOWN", "status text");
    expect_in(out, "the cluster is NOT healthy", "status text");
    free(out);
    rl_test_cluster_stop(&cl);
    rl_test_rmtree(elsewhere);
    free(elsewhere);
}

RL_TEST_MAIN(T(shell_3_1_set_get_across_invocations), T(shell_3_2_status_text),
             T(shell_3_3_status_json_names_every_process), T(shell_3_4_cluster_file_in_cwd),
             T(shell_3_5_status_with_a_server_down))
