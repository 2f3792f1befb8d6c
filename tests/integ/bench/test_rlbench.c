/* test_rlbench.c — `rlbench` checks its arguments, fails loudly on a JSON file
 * it cannot create, refuses unknown --only names, reports a failed system as failed, and leaves
 * no scratch data behind (never writing outside the directory it was given).
 *
 *   cli_2_1  bad numbers (NaN, infinities, values that wrapped through atoi, --repeats over 64)
 *            and an empty --dir are usage errors naming the option (before: NaN looped forever,
 *            4294969296 ran with 2,000 keys, 4294967297 records with 1, --dir '' wrote at /)
 *   cli_2_2  --json in a missing directory fails at once (exit 1, the file and strerror named,
 *            nothing loaded) for micro and query (before: micro dropped it with exit 0)
 *   cli_2_3  --only bogus is refused with the valid names (before: ran nothing, exit 0)
 *   cli_2_4  a run leaves no scratch directory: with --dir D, D holds afterwards exactly what it
 *            held before; without --dir, $TMPDIR is empty again; a --dir that is a file fails
 *   cli_2_5  a system whose setup fails is shown as "failed" with its error and its ratios as
 *            "n/a" (before: "ratio 0.00"); the run returns the error and still removes its
 *            scratch directory; the JSON marks it failed
 *   cli_2_6  a tiny query run works and writes its JSON
 *   cli_2_9  on a cluster, query prints the raw-TCP floor of each remote case (the bytes the remote
 *            arm received, over one loopback connection) in its table and its JSON; on mem: none
 *   cli_2_7  removing a scratch directory removes what is in it, never what a symbolic link in
 *            it points to; creating one in a missing or empty base fails with the reason
 * Every run is tiny (--keys 2000, --seconds 0.001, one round, one workload).
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/micro.h"
#include "bench/scratch.h"
#include "cluster_fixture.h"
#include "test.h"

#define TINY "--keys 2000 --seconds 0.001 --repeats 1 --only point"

static int dir_entries(const char *d) {
    DIR *dh = opendir(d);
    ASSERT_NOT_NULL(dh);
    int n = 0;
    for (struct dirent *e; (e = readdir(dh));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dh);
    return n;
}

/* `rlbench ARGS` must exit with code, stderr containing want (if not NULL). Returns stderr. */
static char *expect(int code, const char *want, const char *args) {
    char *out, *err;
    int rc = rl_test_run("rlbench", &out, &err, "%s", args);
    if (rc != code) fail_msg("rlbench %s: exit %d, want %d (stderr: %s)", args, rc, code, err);
    if (want && !strstr(err, want)) fail_msg("rlbench %s: stderr '%s' lacks '%s'", args, err, want);
    free(out);
    return err;
}

TEST(cli_2_1_numbers_and_dir_checked) {
    struct {
        const char *args, *want;
    } cases[] = {
        {"micro --seconds nan", "rlbench micro: --seconds: 'nan' is not a finite number"},
        {"micro --seconds=-inf", "--seconds: '-inf' is not a finite number"},
        {"micro --seconds inf", "--seconds: 'inf' is not a finite number"},
        {"micro --seconds 0", "--seconds: 0 is out of range [0.001, 3600]"},
        {"micro --seconds 1e999", "--seconds: 1e999 is out of range"},
        {"micro --keys 4294969296", "--keys: 4294969296 is out of range [2000, 10000000]"},
        {"micro --keys 1999", "--keys: 1999 is out of range [2000, 10000000]"},
        {"micro --value-len 100001", "--value-len: 100001 is out of range [1, 100000]"},
        {"micro --repeats 65", "--repeats: 65 is out of range [1, 64]"},
        {"micro --repeats 0", "--repeats: 0 is out of range [1, 64]"},
        {"micro --seed -1", "--seed: -1 is out of range"},
        {"micro --dir ''", "rlbench micro: --dir must not be empty"},
        {"micro --dir", "option --dir needs a value"},
        {"micro --json ''", "--json must not be empty"},
        {"query --records 4294967297", "rlbench query: --records: 4294967297 is out of range [1, 1000000]"},
        {"query --records 0", "--records: 0 is out of range [1, 1000000]"},
        {"query --padding 9990001", "--padding: 9990001 is out of range [0, 9990000]"},
        {"query --seconds nan", "--seconds: 'nan' is not a finite number"},
        {"query --repeats 65", "--repeats: 65 is out of range [1, 64]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) free(expect(2, cases[i].want, cases[i].args));
    /* The help shows the ranges, the repeats cap included. */
    char *out;
    ASSERT_EQ(rl_test_rlbench(&out, "micro --help"), 0);
    ASSERT_TRUE(strstr(out, "integer in [1, 64]") && strstr(out, "number in [0.001, 3600]") &&
                strstr(out, "integer in [2000, 10000000]"));
    free(out);
    ASSERT_EQ(rl_test_rlbench(&out, "query --help"), 0);
    ASSERT_TRUE(strstr(out, "integer in [1, 1000000]") && strstr(out, "integer in [0, 9990000]"));
    free(out);
}

TEST(cli_2_2_json_checked_first) {
    char *err = expect(1, "rlbench micro: cannot create /nonexistent/x.json: No such file or directory",
                       "micro " TINY " --json /nonexistent/x.json");
    ASSERT_TRUE(strstr(err, "loading") == NULL); /* failed before the benchmark */
    free(err);
    err = expect(
        1, "rlbench query: cannot create /nonexistent/x.json: No such file or directory",
        "query --records 10 --seconds 0.001 --repeats 1 --only small/limit1/forward/scan --json /nonexistent/x.json");
    ASSERT_TRUE(strstr(err, "loading") == NULL);
    free(err);
}

TEST(cli_2_3_only_checked) {
    free(expect(
        2, "rlbench micro: --only: 'bogus' is not a workload (point, range1000, mapped1000, commit100, txn-writes)",
        "micro "
        "--keys 2000 --only bogus"));
    free(expect(2, "rlbench query: --only: no case name contains 'bogus'", "query --only bogus"));
    char *err = expect(2, "small|split", "query --only bogus");
    ASSERT_TRUE(strstr(err, "scan|remote|remote-fallback|adaptive|sqlite") != NULL);
    free(err);
}

TEST(cli_2_4_no_scratch_left) {
    char *d = rl_test_tmpdir("cli24"), path[4200];
    snprintf(path, sizeof path, "%s/keep.txt", d);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs("mine\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/lmdb", d); /* a name the benchmark uses: must not be touched */
    ASSERT_EQ(mkdir(path, 0755), 0);
    char args[4400], *err;
    snprintf(args, sizeof args,
             "micro --keys 2000 --seconds 0.001 --repeats 1 --only commit100 --dir %s --json %s/r.json", d, d);
    err = expect(0, "(removed at the end)", args);
    free(err);
    ASSERT_EQ(dir_entries(d), 3); /* keep.txt, lmdb/ (still empty), r.json */
    ASSERT_EQ(dir_entries(path), 0);
    snprintf(path, sizeof path, "%s/r.json", d);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("bad JSON in %s: %s", path, je.text);
    ASSERT_EQ(json_array_size(json_object_get(j, "results")), 5); /* mem, file, lmdb, sqlite, ssd */
    json_decref(j);
    /* Without --dir: under $TMPDIR, and gone afterwards. */
    char *t = rl_test_tmpdir("cli24t"), *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
    setenv("TMPDIR", t, 1);
    err = expect(0, t, "micro " TINY);
    free(err);
    if (old) setenv("TMPDIR", old, 1);
    else unsetenv("TMPDIR");
    free(old);
    ASSERT_EQ(dir_entries(t), 0);
    /* A --dir that is a file: refused at once, naming it. */
    snprintf(path, sizeof path, "%s/keep.txt", d);
    snprintf(args, sizeof args, "micro " TINY " --dir %s", path);
    err = expect(1, "Not a directory", args);
    ASSERT_TRUE(strstr(err, path) != NULL);
    free(err);
    rl_test_rmtree(t);
    free(t);
    rl_test_rmtree(d);
    free(d);
}

TEST(cli_2_5_failed_system_reported) {
    char *d = rl_test_tmpdir("cli25"), *text = NULL;
    size_t len = 0;
    rl__micro_options o = {.keys = 2000,
                           .value_len = 16,
                           .seconds = 0.001,
                           .repeats = 1,
                           .dir = d,
                           .only = "range1000",
                           .seed = 1,
                           .fail_setup = "lmdb"};
    rl_buf json;
    rl__buf_init(&json);
    FILE *out = open_memstream(&text, &len);
    ASSERT_NOT_NULL(out);
    ASSERT_RC(rl__bench_micro_run(&o, out, &json), RL_E_IO_ERROR);
    fclose(out);
    if (!strstr(text, "failed") || !strstr(text, "mem/lmdb = n/a") || !strstr(text, "file/lmdb = n/a"))
        fail_msg("table:\n%s", text);
    ASSERT_TRUE(strstr(text, "0.00") == NULL);
    ASSERT_TRUE(strstr(text, "failed: lmdb in setup: io_error") != NULL);
    ASSERT_EQ(dir_entries(d), 0); /* the scratch directory was removed after the failure too */
    json_error_t je;
    json_t *j = json_loadb((const char *)json.data, json.len, 0, &je);
    if (!j) fail_msg("bad JSON: %s", je.text);
    json_t *r = json_object_get(j, "results");
    int failed = 0;
    for (size_t i = 0; i < json_array_size(r); i++) {
        json_t *e = json_array_get(r, i);
        if (json_is_true(json_object_get(e, "failed"))) {
            failed++;
            ASSERT_STR_EQ(json_string_value(json_object_get(e, "system")), "lmdb");
            ASSERT_STR_EQ(json_string_value(json_object_get(e, "error")), "io_error");
            ASSERT_TRUE(json_is_null(json_object_get(e, "median_ns_per_op")));
        }
    }
    ASSERT_EQ(failed, 1);
    json_decref(j);
    rl__buf_release(&json);
    free(text);
    /* Bad options are refused by the library too, before any file is made. */
    o.fail_setup = NULL;
    o.only = "bogus";
    ASSERT_RC(rl__bench_micro_run(&o, stdout, NULL), RL_E_INVALID_ARGUMENT);
    o.only = NULL;
    o.seconds = 0.0 / 0.0;
    ASSERT_RC(rl__bench_micro_run(&o, stdout, NULL), RL_E_INVALID_ARGUMENT);
    o.seconds = 0.001;
    o.dir = "";
    ASSERT_RC(rl__bench_micro_run(&o, stdout, NULL), RL_E_INVALID_ARGUMENT);
    ASSERT_EQ(dir_entries(d), 0);
    rl_test_rmtree(d);
    free(d);
}

TEST(cli_2_6_query_tiny_run) {
    char *d = rl_test_tmpdir("cli26"), args[4400], *out;
    snprintf(args, sizeof args,
             "query --records 20 --padding 0 --seconds 0.001 --repeats 1 --only small/limit1/forward --json %s/q.json",
             d);
    ASSERT_EQ(rl_test_rlbench(&out, "%s", args), 0);
    ASSERT_TRUE(strstr(out, "small   limit1    forward  sqlite") != NULL);
    ASSERT_NULL(strstr(out, "raw TCP floor")); /* nothing crossed a network */
    free(out);
    ASSERT_EQ(dir_entries(d), 1);
    rl_test_rmtree(d);
    free(d);
}

/* cli_2_8: --stats adds the trace summary per case (all 0 on mem:) and a "trace" object per
 * reclayer result in the JSON; SQLite has none. */
TEST(cli_2_8_query_stats) {
    char *d = rl_test_tmpdir("cli28"), args[4600], path[4200], *out;
    snprintf(path, sizeof path, "%s/q.json", d);
    snprintf(args, sizeof args,
             "query --records 20 --padding 0 --seconds 0.001 --repeats 1 --only small/rows10/forward --stats --json %s",
             path);
    ASSERT_EQ(rl_test_rlbench(&out, "%s", args), 0);
    ASSERT_NOT_NULL(strstr(out, "trace summary per op"));
    ASSERT_NOT_NULL(strstr(strstr(out, "trace summary per op"), "small   rows10    forward  remote"));
    free(out);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err), *x;
    ASSERT_NOT_NULL(j);
    size_t i;
    int traced = 0;
    json_array_foreach(json_object_get(j, "results"), i, x) {
        json_t *t = json_object_get(x, "trace");
        if (!strcmp(json_string_value(json_object_get(x, "system")), "sqlite")) {
            ASSERT_NULL(t);
            continue;
        }
        ASSERT_NOT_NULL(t);
        ASSERT_EQ(json_integer_value(json_object_get(t, "requests")), 0);
        ASSERT_EQ(json_integer_value(json_object_get(t, "critical_round_trips")), 0);
        traced++;
    }
    ASSERT_EQ(traced, 4); /* scan, remote, remote-fallback, adaptive */
    json_decref(j);
    rl_test_rmtree(d);
    free(d);
}

/* cli_2_9: the raw-TCP floor beside the remote arm, on a one-server cluster. */
TEST(cli_2_9_query_tcp_floor) {
    rl__cluster_up_opts o;
    memset(&o, 0, sizeof o);
    o.n_storage = 1;
    rl_test_cluster c;
    ASSERT_OK(rl_test_cluster_start(&c, &o));
    char *d = rl_test_tmpdir("cli29"), args[9000], path[4200], *out;
    snprintf(path, sizeof path, "%s/q.json", d);
    snprintf(args, sizeof args,
             "query --db %s --records 20 --padding 1000 --seconds 0.001 --repeats 2 --only split/rows10/forward "
             "--json %s",
             c.url, path);
    int rc = rl_test_rlbench(&out, "%s", args);
    rl_test_cluster_stop(&c);
    ASSERT_EQ(rc, 0);
    const char *t = strstr(out, "raw TCP floor");
    ASSERT_NOT_NULL(t);
    ASSERT_NOT_NULL(strstr(t, "split   rows10    forward"));
    free(out);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err), *f = json_object_get(j, "tcp_floor");
    ASSERT_NOT_NULL(j);
    ASSERT_EQ(json_array_size(f), 1);
    json_t *x = json_array_get(f, 0);
    ASSERT_STR_EQ(json_string_value(json_object_get(x, "dataset")), "split");
    ASSERT_TRUE(json_integer_value(json_object_get(x, "bytes_per_op")) > 10 * 1000); /* 10 records of 1 KB+ */
    ASSERT_TRUE(json_real_value(json_object_get(x, "floor_ns_per_op")) > 0);
    ASSERT_TRUE(json_real_value(json_object_get(x, "remote_ns_per_op")) > 0);
    json_decref(j);
    rl_test_rmtree(d);
    free(d);
}

TEST(cli_2_7_scratch_remove_stays_inside) {
    char *base = rl_test_tmpdir("cli27"), *outside = rl_test_tmpdir("cli27o"), path[4400];
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    rl_buf p;
    rl__buf_init(&p);
    ASSERT_OK(rl__bench_scratch_create(base, "micro", &p, &msg));
    const char *s = (const char *)p.data;
    ASSERT_TRUE(strncmp(s, base, strlen(base)) == 0 && strstr(s, "/rlbench-micro-") != NULL);
    snprintf(path, sizeof path, "%s/victim", outside);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sub", s);
    ASSERT_EQ(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/sub/file", s);
    f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sub/link", s);
    ASSERT_EQ(symlink(outside, path), 0);
    ASSERT_OK(rl__bench_scratch_remove(s, &msg));
    ASSERT_EQ(dir_entries(base), 0);
    ASSERT_EQ(dir_entries(outside), 1);           /* the link's target is untouched */
    ASSERT_OK(rl__bench_scratch_remove(s, &msg)); /* gone already: fine */
    rl__buf_reset(&p);
    ASSERT_RC(rl__bench_scratch_create("/nonexistent/rl", "micro", &p, &msg), RL_E_FILE_NOT_FOUND);
    ASSERT_TRUE(strstr(rl__errdetail_get(&msg),
                       "cannot create /nonexistent/rl/rlbench-micro-XXXXXX: No such file or directory") != NULL);
    ASSERT_EQ(p.len, 0);
    ASSERT_RC(rl__bench_scratch_create("", "micro", &p, &msg), RL_E_INVALID_ARGUMENT);
    rl__buf_release(&p);
    rl_test_rmtree(outside);
    rl_test_rmtree(base);
    free(outside);
    free(base);
}

RL_TEST_MAIN(T(cli_2_1_numbers_and_dir_checked), T(cli_2_2_json_checked_first), T(cli_2_3_only_checked),
             T(cli_2_4_no_scratch_left), T(cli_2_5_failed_system_reported), T(cli_2_6_query_tiny_run),
             T(cli_2_7_scratch_remove_stays_inside), T(cli_2_8_query_stats), T(cli_2_9_query_tcp_floor))
