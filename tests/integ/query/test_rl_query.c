/* test_rl_query.c — `rl query` end to end on a store loaded by `rl load` on file:DIR.
 *
 * The model is built independently of the query path: `rl get` of every order_id gives each
 * record's price, and the test sorts (price, order_id) itself. Every fetch method, bounds,
 * direction, skip and limit must print exactly the model's rows; paging with the continuation of
 * --stats (switching methods between pages) must too; bad input gives the documented exit codes.
 *
 * Test IDs: query_3_*.
 */
#include <stdlib.h>
#include <sys/wait.h>

#include <jansson.h>

#include "test.h"

#define N 24

typedef struct {
    long long id, price;
} rec;

static rec model[N];

static int by_price(const void *a, const void *b) {
    const rec *x = a, *y = b;
    if (x->price != y->price) return x->price < y->price ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Prices of order_id 1..N through `rl get`, sorted by (price, id). */
static void build_model(const char *dir, const char *extra) {
    for (int i = 1; i <= N; i++) {
        char *out;
        ASSERT_EQ(rl_test_rl(&out, "get --db file:%s %s --pk %d", dir, extra, i), 0);
        json_error_t err;
        json_t *j = json_loads(out, 0, &err);
        if (!j) fail_msg("rl get printed no JSON: %.200s", out);
        json_t *r = json_object_get(j, "record");
        model[i - 1].id = json_integer_value(json_object_get(r, "order_id"));
        model[i - 1].price = json_integer_value(json_object_get(r, "price"));
        ASSERT_EQ(model[i - 1].id, i);
        json_decref(j);
        free(out);
    }
    qsort(model, N, sizeof model[0], by_price);
}

/* Parse the output of `rl query`: order ids into ids (returns the count); the --stats line's
 * continuation (hex, or "" when null) into cont, its reason into reason. */
static int parse(char *out, long long *ids, char *cont, size_t cont_cap, char *reason) {
    int n = 0;
    if (cont) cont[0] = 0;
    if (reason) reason[0] = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        if (!j) fail_msg("not JSON: %.200s", line);
        json_t *st = json_object_get(j, "stats");
        if (st) {
            json_t *c = json_object_get(j, "continuation");
            if (cont && json_is_string(c)) snprintf(cont, cont_cap, "%s", json_string_value(c));
            if (reason) snprintf(reason, 64, "%s", json_string_value(json_object_get(j, "no_next_reason")));
        } else {
            ids[n++] = json_integer_value(json_object_get(json_object_get(j, "record"), "order_id"));
        }
        json_decref(j);
    }
    return n;
}

/* The model's ids for bounds [lo, hi] (inclusive, -1 = open), direction, skip, limit. */
static int expect(long long lo, long long hi, int rev, int skip, int limit, long long *ids) {
    long long all[N];
    int n = 0, m = 0;
    for (int i = 0; i < N; i++)
        if ((lo < 0 || model[i].price >= lo) && (hi < 0 || model[i].price <= hi)) all[n++] = model[i].id;
    for (int i = skip; i < n && (!limit || m < limit); i++) ids[m++] = all[rev ? n - 1 - i : i];
    return m;
}

static const char *FETCH[] = {"scan", "remote", "remote-fallback"};

static void check_cases(const char *dir, const char *extra) {
    long long mid = model[N / 2].price;
    struct {
        long long lo, hi;
        int rev, skip, limit;
    } cases[] = {{-1, -1, 0, 0, 0},  {-1, -1, 1, 0, 0},  {-1, -1, 0, 3, 5}, {-1, -1, 1, 3, 5},
                 {mid, -1, 0, 0, 0}, {-1, mid, 1, 1, 0}, {0, mid, 0, 2, 4}, {mid, mid, 0, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int f = 0; f < 3; f++) {
            char args[512], *out;
            long long got[N], want[N];
            int n = snprintf(args, sizeof args, "--index price_idx --fetch %s", FETCH[f]);
            if (cases[c].lo >= 0) n += snprintf(args + n, sizeof args - (size_t)n, " --ge %lld", cases[c].lo);
            if (cases[c].hi >= 0) n += snprintf(args + n, sizeof args - (size_t)n, " --le %lld", cases[c].hi);
            if (cases[c].rev) n += snprintf(args + n, sizeof args - (size_t)n, " --reverse");
            n += snprintf(args + n, sizeof args - (size_t)n, " --skip %d --limit %d", cases[c].skip, cases[c].limit);
            ASSERT_EQ(rl_test_rl(&out, "query --db file:%s %s %s", dir, extra, args), 0);
            int ng = parse(out, got, NULL, 0, NULL);
            int nw = expect(cases[c].lo, cases[c].hi, cases[c].rev, cases[c].skip, cases[c].limit, want);
            if (ng != nw) fail_msg("rl query %s: %d rows, expected %d", args, ng, nw);
            for (int i = 0; i < nw; i++)
                if (got[i] != want[i]) fail_msg("rl query %s: row %d is %lld, expected %lld", args, i, got[i], want[i]);
            free(out);
        }
}

/* query_3_1: every method, bounds, direction, skip and limit against the model (small records). */
TEST(query_3_1_rows_match_model) {
    char *dir = rl_test_tmpdir("qcli1"), *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count %d --seed 11", dir, N), 0);
    free(out);
    build_model(dir, "");
    check_cases(dir, "");
    rl_test_rmtree(dir);
    free(dir);
}

/* query_3_2: split records in another store; paging through --stats continuations with the
 * fetch method switched on every page. */
TEST(query_3_2_split_and_paging) {
    char *dir = rl_test_tmpdir("qcli2"), *out;
    const char *st = "--store '[\"q\",2]'";
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s %s --count %d --padding 110000 --seed 3", dir, st, N), 0);
    free(out);
    build_model(dir, st);
    check_cases(dir, st);
    long long want[N], got[N];
    int nw = expect(-1, -1, 1, 2, 0, want), ng = 0, pages = 0;
    char cont[512] = "", reason[64];
    for (;;) {
        char copt[600] = "";
        long long ids[N];
        if (cont[0]) snprintf(copt, sizeof copt, "--continuation %s", cont);
        ASSERT_EQ(
            rl_test_rl(&out,
                       "query --db file:%s %s --index price_idx --reverse --skip 2 --limit 5 --fetch %s --stats %s",
                       dir, st, FETCH[pages % 3], copt),
            0);
        int n = parse(out, ids, cont, sizeof cont, reason);
        free(out);
        for (int i = 0; i < n; i++) got[ng++] = ids[i];
        pages++;
        if (!cont[0]) {
            ASSERT_STR_EQ(reason, "source_exhausted");
            break;
        }
        ASSERT_STR_EQ(reason, "return_limit_reached");
        ASSERT_TRUE(pages < 20);
    }
    ASSERT_EQ(ng, nw);
    for (int i = 0; i < nw; i++) ASSERT_EQ(got[i], want[i]);
    rl_test_rmtree(dir);
    free(dir);
}

/* query_3_3: errors and exit codes. */
TEST(query_3_3_errors) {
    char *dir = rl_test_tmpdir("qcli3"), *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count 5", dir), 0);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s", dir), 2); /* no --index */
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --fetch fast", dir), 2);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --continuation xyz", dir), 2);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index nope", dir), 1);
    ASSERT_TRUE(strstr(out, "index_unknown") != NULL);
    free(out);
    /* ADAPTIVE runs: 5 rows, one explain line for its one page, every line JSON. */
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --fetch adaptive --explain --stats", dir), 0);
    {
        int rows = 0, explains = 0, stats = 0;
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            json_error_t jerr;
            json_t *j = json_loads(line, 0, &jerr);
            if (!j) fail_msg("not JSON: %s (%s)", line, jerr.text);
            if (json_object_get(j, "explain")) {
                explains++;
                const char *e = json_string_value(json_object_get(j, "explain"));
                ASSERT_NOT_NULL(e);
                ASSERT_TRUE(strstr(e, "page 1: adaptive: rows ") == e);
                ASSERT_TRUE(strstr(e, "-> SCAN_AND_FETCH") || strstr(e, "-> USE_REMOTE_FETCH"));
            } else if (json_object_get(j, "stats")) {
                stats++;
                json_t *a = json_object_get(json_object_get(j, "stats"), "adaptive");
                ASSERT_EQ(json_integer_value(json_object_get(a, "pages_scan_and_fetch")) +
                              json_integer_value(json_object_get(a, "pages_remote_fetch")),
                          1);
            } else {
                rows++;
            }
            json_decref(j);
        }
        ASSERT_EQ(rows, 5);
        ASSERT_EQ(explains, 1);
        ASSERT_EQ(stats, 1);
    }
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --continuation 524c71630101", dir), 1);
    ASSERT_TRUE(strstr(out, "continuation_invalid") != NULL);
    free(out);
    /* A continuation of other bounds. */
    char cont[512], reason[64];
    long long ids[8];
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --limit 2 --stats", dir), 0);
    ASSERT_EQ(parse(out, ids, cont, sizeof cont, reason), 2);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --ge 0 --continuation %s", dir, cont), 1);
    ASSERT_TRUE(strstr(out, "continuation_invalid") != NULL);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --db file:%s --index price_idx --continuation %s", dir, cont), 0);
    ASSERT_EQ(parse(out, ids, NULL, 0, NULL), 3);
    free(out);
    ASSERT_EQ(rl_test_rl(&out, "query --help"), 0);
    free(out);
    rl_test_rmtree(dir);
    free(dir);
}

/* The --stats line's counter name of `rl query` output out (-1: none). */
static long long stat_of(const char *out, const char *name) {
    const char *line = strstr(out, "{\"stats\"");
    if (!line) return -1;
    json_error_t err;
    json_t *j = json_loads(line, JSON_DISABLE_EOF_CHECK, &err);
    if (!j) fail_msg("stats line not JSON: %.200s", line);
    json_t *v = json_object_get(json_object_get(j, "stats"), name);
    long long r = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(j);
    return r;
}

/* query_3_4: `rl query --stats` reports index_bytes_omitted: remote fetch leaves out the index
 * entries it rebuilds (the same rows and continuation as --keep-index-entries, which omits none,
 * and exactly the bytes received less), SCAN_AND_FETCH omits none. */
TEST(query_3_4_index_bytes_omitted) {
    char *dir = rl_test_tmpdir("qcli4"), *out;
    ASSERT_EQ(rl_test_rl(&out, "load --db file:%s --count %d --seed 5", dir, N), 0);
    free(out);
    static const char *const args[] = {"--limit 10", "--reverse --skip 3", ""};
    for (int i = 0; i < 3; i++) {
        char *on, *keep, *scan;
        ASSERT_EQ(rl_test_rl(&on, "query --db file:%s --index price_idx --fetch remote --stats %s", dir, args[i]), 0);
        ASSERT_EQ(rl_test_rl(&keep,
                             "query --db file:%s --index price_idx --fetch remote --stats --keep-index-entries %s", dir,
                             args[i]),
                  0);
        ASSERT_EQ(rl_test_rl(&scan, "query --db file:%s --index price_idx --fetch scan --stats %s", dir, args[i]), 0);
        long long om = stat_of(on, "index_bytes_omitted");
        if (om <= 0) fail_msg("%s: index_bytes_omitted %lld", args[i], om);
        ASSERT_EQ(stat_of(keep, "index_bytes_omitted"), 0);
        ASSERT_EQ(stat_of(scan, "index_bytes_omitted"), 0);
        ASSERT_EQ(stat_of(on, "index_keys_read_back"), 0);
        ASSERT_EQ(stat_of(on, "kv_bytes_received") + om, stat_of(keep, "kv_bytes_received"));
        /* Rows and the stats line's continuation and reason: the same text but for the counters. */
        long long a[N], b[N];
        char ca[512], cb[512], ra[64], rb[64];
        int na = parse(on, a, ca, sizeof ca, ra), nb = parse(keep, b, cb, sizeof cb, rb);
        ASSERT_EQ(na, nb);
        ASSERT_TRUE(na > 0);
        ASSERT_MEM_EQ(a, sizeof a[0] * (size_t)na, b, sizeof b[0] * (size_t)nb);
        ASSERT_STR_EQ(ca, cb);
        ASSERT_STR_EQ(ra, rb);
        free(on);
        free(keep);
        free(scan);
    }
    rl_test_rmtree(dir);
    free(dir);
}

RL_TEST_MAIN(T(query_3_1_rows_match_model), T(query_3_2_split_and_paging), T(query_3_3_errors),
             T(query_3_4_index_bytes_omitted))
