/* test_campaign_outputs.c — what a campaign run writes for a reader besides results.json.zst, on two
 * tiny embedded runs (100 records, cases small-rows10-forward and split-limit1-reverse, arms
 * ordinary, remote and adaptive, 2 blocks x 1 repeat of 0.05 s; about 2 s each):
 *
 *   campaign_6_1  samples.csv and summary.csv round trip: parsed back (rl__camp_csv_parse), every row
 *                 of samples.csv is the sample of results.json at its place with the same values
 *                 (reals to the last bit), summary.csv has one row per (case, arm, metric) with the
 *                 arm's figures and, for compared arms, the ratio and interval of results.json;
 *                 the parser refuses a short row and an unclosed quote
 *   campaign_6_2  report.html: produced, one page, both SVG plots inline (their ids prefixed per
 *                 plot), the main table and the manifest in it, and nothing loaded from outside
 *                 (no script, link, src=, @import, or href/url to anything but an id in the page)
 *   campaign_6_3  `rlbench campaign compare A B`: one row per (case, comparison) with both ratios
 *                 and intervals as in each run's summary, B/A, and the overlap of the intervals as
 *                 computed here; --metric all lists every metric; an unknown metric is a usage
 *                 error (2) and a missing run exit 1
 *   campaign_6_4  the help shows --out as required; --print-protocol runs without it; a run without
 *                 it is a usage error
 *   campaign_6_5  the reference report beside a tiny run on a single topology (one storage server,
 *                 250 us one way; small-rows1000-forward, split-rows10-forward; about 2 s): the
 *                 results record the reports' figures; report.md (and report.html) show C3's table
 *                 with our ratio [interval] and medians as in the summary beside C3's 0.224
 *                 [0.222, 0.226] and 24 vs 108 ms (line 29), "same direction?" computed from both,
 *                 "not published" for split-rows10-forward, and our RTT p50 beside C3's ping p50
 *                 0.597 ms (line 9); the ratios plot's data carry C3's ratio and interval
 *   campaign_6_6  --protocol c3|m2 --print-protocol prints the built-in protocol (parsing back to
 *                 it); a file given with --protocol is not printed (usage error); --protocol
 *                 ./FILE still reads a file
 *   campaign_6_7  the reports' placement on a tiny m2-like topology (3 hosts x 3 servers,
 *                 replication 2, ssd, 250 us, placement reports; 100 records; about 5 s): the
 *                 plan puts rows10 forward and reverse on the index's team (planned fraction 0),
 *                 30 of 100 records colocated (rows1000 0.70), the receipt after placing counts
 *                 70 server-disjoint records, every split case's receipt has fraction 0.70 and one
 *                 index shard with several record shards, every small case's 1.0, the receipts
 *                 equal before and after each case, the report shows M2's table
 *   campaign_6_8  a tiny throughput phase (embedded and single at 250 us; ordinary and remote; 1
 *                 and 2 clients for 0.2 s; about 16 s): one entry per (topology, arm, clients), each
 *                 ok with ops and queries/s, p50 <= p99, on single p50 at least the round trip
 *                 (0.5 ms), client CPU measured, server CPU measured on single (2 servers) and
 *                 n/a on embedded, the clients' windows started together (late < 0.5 s);
 *                 throughput.csv parsed back equals the results; the report's table and the
 *                 throughput plots (inline in report.html); one progress counter for the whole
 *                 run: every "[done/total]" line has total 12, the last is [12/12]; `compare`
 *                 of the run with itself lists every level with B/A 1.000
 *   campaign_6_9  `rlbench campaign report DIR` writes the run's report.md and report.html again,
 *                 byte for byte, and prints the main table; a directory without a run is exit 1
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench/campaign_int.h"
#include "test.h"

#define TINY                                                                                       \
    "{\"name\": \"tiny\", \"dataset\": {\"records\": 100},\n"                                      \
    " \"topologies\": [{\"name\": \"embedded\", \"kind\": \"embedded\"}],\n"                       \
    " \"cases\": [\"small-rows10-forward\", \"split-limit1-reverse\"],\n"                          \
    " \"arms\": [\"ordinary\", \"remote\", \"adaptive\"],\n"                                       \
    " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n" \
    " \"statistics\": {\"resamples\": 2000, \"seed\": 391706}, \"checks\": {\"contamination_threshold\": 1}}\n"

static char *dir;
static char out_a[600], out_b[600];
static json_t *res_a, *res_b;

static char *slurp(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    if (out_len) *out_len = (size_t)n;
    return s;
}

/* Run the tiny protocol into out and load its results. */
static json_t *tiny_run(const char *out) {
    char proto[700], *so = NULL, *se = NULL;
    snprintf(proto, sizeof proto, "%s/tiny.json", dir);
    FILE *f = fopen(proto, "w");
    ASSERT_NOT_NULL(f);
    fputs(TINY, f);
    fclose(f);
    int rc = rl_test_run("rlbench", &so, &se, "campaign --protocol '%s' --out '%s'", proto, out);
    if (rc != 0) fail_msg("exit %d: %s", rc, se);
    free(so), free(se);
    json_t *r = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(out, &r, &msg)) fail_msg("results: %s", rl__errdetail_get(&msg));
    return r;
}

static int setup(void **state) {
    (void)state;
    dir = rl_test_tmpdir("campaign-outputs");
    snprintf(out_a, sizeof out_a, "%s/a", dir);
    snprintf(out_b, sizeof out_b, "%s/b", dir);
    res_a = tiny_run(out_a);
    res_b = tiny_run(out_b);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    json_decref(res_a);
    json_decref(res_b);
    rl_test_rmtree(dir);
    free(dir);
    return 0;
}

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_t *parse_csv(const char *name) {
    char path[700];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", out_a, name);
    char *text = slurp(path, &n);
    ASSERT_NOT_NULL(text);
    json_t *rows = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_csv_parse(text, n, &rows, &msg)) fail_msg("%s: %s", name, rl__errdetail_get(&msg));
    free(text);
    return rows;
}

/* The column of name in header, or fail. */
static size_t col(json_t *header, const char *name) {
    for (size_t i = 0; i < json_array_size(header); i++)
        if (!strcmp(json_string_value(json_array_get(header, i)), name)) return i;
    fail_msg("no column %s", name);
    return 0;
}

/* The field equals the JSON value: a string, an integer, a real (exactly), or empty for null. */
static void same_value(const char *field, json_t *v, const char *what) {
    if (!v || json_is_null(v)) {
        if (*field) fail_msg("%s: '%s' where the results have null", what, field);
    } else if (json_is_string(v)) {
        ASSERT_STR_EQ(field, json_string_value(v));
    } else if (json_is_integer(v)) {
        if (strtoll(field, NULL, 10) != json_integer_value(v))
            fail_msg("%s: %s != %lld", what, field, (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        double x = strtod(field, NULL);
        if (x != json_real_value(v)) fail_msg("%s: %s != %.17g", what, field, json_real_value(v));
    } else {
        fail_msg("%s: unexpected JSON type", what);
    }
}

TEST(campaign_6_1_csv_round_trip) {
    json_t *rows = parse_csv(RL_CAMP_SAMPLES_CSV), *samples = json_object_get(res_a, "samples");
    json_t *header = json_array_get(rows, 0);
    /* 2 cases x 3 arms x 2 blocks x 1 repeat */
    ASSERT_EQ(json_array_size(samples), 12);
    ASSERT_EQ(json_array_size(rows), json_array_size(samples) + 1);
    for (size_t i = 0; i < json_array_size(samples); i++) {
        json_t *s = json_array_get(samples, i), *row = json_array_get(rows, i + 1);
        for (size_t c = 0; c < json_array_size(header); c++) {
            const char *name = json_string_value(json_array_get(header, c));
            ASSERT_NOT_NULL(json_object_get(s, name));
            same_value(json_string_value(json_array_get(row, c)), json_object_get(s, name), name);
        }
    }
    json_decref(rows);
    /* summary.csv: one row per (case, arm, metric), 2 x 3 x 12. */
    rows = parse_csv(RL_CAMP_SUMMARY_CSV);
    header = json_array_get(rows, 0);
    ASSERT_EQ(json_array_size(rows), 1 + 2 * 3 * 12);
    size_t ck = col(header, "case"), ca = col(header, "arm"), cm = col(header, "metric"), cmed = col(header, "median"),
           cmin = col(header, "min"), cmax = col(header, "max"), cr = col(header, "ratio"), clo = col(header, "ci_low"),
           chi = col(header, "ci_high");
    int ratios = 0;
    for (size_t i = 1; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        const char *k = json_string_value(json_array_get(row, ck)), *a = json_string_value(json_array_get(row, ca)),
                   *m = json_string_value(json_array_get(row, cm));
        json_t *fig = NULL, *s;
        size_t j;
        json_array_foreach(json_object_get(res_a, "arm_summary"), j,
                           s) if (!strcmp(jstr(s, "case"), k) && !strcmp(jstr(s, "arm"), a)) fig =
            json_object_get(json_object_get(s, "metrics"), m);
        ASSERT_NOT_NULL(fig);
        same_value(json_string_value(json_array_get(row, cmed)), json_object_get(fig, "median"), "median");
        same_value(json_string_value(json_array_get(row, cmin)), json_object_get(fig, "min"), "min");
        same_value(json_string_value(json_array_get(row, cmax)), json_object_get(fig, "max"), "max");
        json_t *sum = NULL;
        json_array_foreach(json_object_get(res_a, "summary"), j, s) if (!strcmp(jstr(s, "case"), k) &&
                                                                        !strcmp(jstr(s, "arm"), a) &&
                                                                        !strcmp(jstr(s, "metric"), m)) sum = s;
        if (!strcmp(a, "ordinary")) ASSERT_NULL(sum);
        else ASSERT_NOT_NULL(sum);
        same_value(json_string_value(json_array_get(row, cr)), sum ? json_object_get(sum, "ratio") : NULL, "ratio");
        same_value(json_string_value(json_array_get(row, clo)), sum ? json_object_get(sum, "ci_low") : NULL, "lo");
        same_value(json_string_value(json_array_get(row, chi)), sum ? json_object_get(sum, "ci_high") : NULL, "hi");
        ratios += sum != NULL && !strcmp(m, "ns_per_op");
    }
    ASSERT_EQ(ratios, 4); /* remote and adaptive, 2 cases */
    json_decref(rows);
    /* The reader: quoting, and what it refuses. */
    const char good[] = "a,b\n\"x,\"\"y\"\"\",\n";
    json_t *g = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__camp_csv_parse(good, strlen(good), &g, &msg));
    ASSERT_EQ(json_array_size(g), 2);
    ASSERT_STR_EQ(json_string_value(json_array_get(json_array_get(g, 1), 0)), "x,\"y\"");
    ASSERT_STR_EQ(json_string_value(json_array_get(json_array_get(g, 1), 1)), "");
    json_decref(g);
    ASSERT_EQ(rl__camp_csv_parse("a,b\n1\n", 6, &g, &msg), RL_E_CORRUPT_DATA);
    ASSERT_NOT_NULL(strstr(rl__errdetail_get(&msg), "line 2"));
    ASSERT_EQ(rl__camp_csv_parse("a\n\"x\n", 5, &g, &msg), RL_E_CORRUPT_DATA);
}

TEST(campaign_6_2_html_self_contained) {
    char path[700];
    snprintf(path, sizeof path, "%s/report.html", out_a);
    char *h = slurp(path, NULL);
    ASSERT_NOT_NULL(h);
    ASSERT_NOT_NULL(strstr(h, "<!DOCTYPE html>"));
    ASSERT_NOT_NULL(strstr(h, "</html>"));
    /* both plots inline, their ids kept apart */
    int svgs = 0;
    for (const char *p = h; (p = strstr(p, "<svg")); p++) svgs++;
    ASSERT_EQ(svgs, 2);
    ASSERT_NOT_NULL(strstr(h, "id=\"p1-gnuplot_canvas\""));
    ASSERT_NOT_NULL(strstr(h, "id=\"p2-gnuplot_canvas\""));
    /* the main table, the checks and the manifest */
    ASSERT_NOT_NULL(strstr(h, "<td>small-rows10-forward</td>"));
    ASSERT_NOT_NULL(strstr(h, "<h2>Manifest</h2>"));
    ASSERT_NOT_NULL(strstr(h, "\"protocol_sha256\""));
    /* nothing from outside */
    static const char *const bad[] = {"<script", "<link", "src=", "@import", "<img", "<iframe", "<object", NULL};
    for (int i = 0; bad[i]; i++)
        if (strstr(h, bad[i])) fail_msg("report.html holds %s", bad[i]);
    for (const char *p = h; (p = strstr(p, "href=")); p++)
        if (p[6] != '#') fail_msg("report.html links outside itself: %.60s", p);
    for (const char *p = h; (p = strstr(p, "url(")); p++)
        if (p[4] != '#') fail_msg("report.html loads %.60s", p);
    free(h);
}

static json_t *find_sum(json_t *r, const char *k, const char *cmp) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "summary"), i, s) if (!strcmp(jstr(s, "case"), k) &&
                                                                !strcmp(jstr(s, "comparison"), cmp) &&
                                                                !strcmp(jstr(s, "metric"), "ns_per_op")) return s;
    return NULL;
}

TEST(campaign_6_3_compare) {
    char *so = NULL, *se = NULL, want[400];
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign compare '%s' '%s'", out_a, out_b), 0);
    ASSERT_NOT_NULL(strstr(so, "The same protocol."));
    static const char *const ks[2] = {"small-rows10-forward", "split-limit1-reverse"};
    static const char *const cs[2] = {"remote/ordinary", "adaptive/best"};
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < 2; c++) {
            json_t *a = find_sum(res_a, ks[k], cs[c]), *b = find_sum(res_b, ks[k], cs[c]);
            ASSERT_NOT_NULL(a);
            ASSERT_NOT_NULL(b);
            double alo = json_real_value(json_object_get(a, "ci_low")),
                   ahi = json_real_value(json_object_get(a, "ci_high")),
                   blo = json_real_value(json_object_get(b, "ci_low")),
                   bhi = json_real_value(json_object_get(b, "ci_high"));
            int overlap = alo <= bhi && blo <= ahi;
            snprintf(want, sizeof want,
                     "| embedded | %s | %s | ns_per_op | %.3f [%.3f, %.3f] | %.3f [%.3f, %.3f] | %.3f | %s |", ks[k],
                     cs[c], json_real_value(json_object_get(a, "ratio")), alo, ahi,
                     json_real_value(json_object_get(b, "ratio")), blo, bhi,
                     json_real_value(json_object_get(b, "ratio")) / json_real_value(json_object_get(a, "ratio")),
                     overlap ? "yes" : "**no**");
            if (!strstr(so, want)) fail_msg("no row\n%s\nin\n%s", want, so);
        }
    free(so), free(se);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign compare --metric all '%s' '%s'", out_a, out_b), 0);
    ASSERT_NOT_NULL(strstr(so, "| bytes_per_op |"));
    ASSERT_NOT_NULL(strstr(so, "| allocs_per_op |"));
    free(so), free(se);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign compare --metric frob '%s' '%s'", out_a, out_b), 2);
    free(so), free(se);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign compare '%s' '%s/none'", out_a, dir), 1);
    ASSERT_NOT_NULL(strstr(se, "file_not_found"));
    free(so), free(se);
}

TEST(campaign_6_4_out_required) {
    char *so = NULL, *se = NULL;
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign --help"), 0);
    ASSERT_NOT_NULL(strstr(so, "[--quick] --out DIR"));
    ASSERT_NOT_NULL(strstr(so, "required"));
    free(so), free(se);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign --print-protocol"), 0);
    ASSERT_NOT_NULL(strstr(so, "\"name\": \"full\""));
    free(so), free(se);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign --quick"), 2);
    ASSERT_NOT_NULL(strstr(se, "option --out is required"));
    free(so), free(se);
}

TEST(campaign_6_5_reference_beside_a_run) {
    char out[700], path[800], want[600];
    snprintf(out, sizeof out, "%s/single", dir);
    char proto[700], *so = NULL, *se = NULL;
    snprintf(proto, sizeof proto, "%s/single.json", dir);
    FILE *f = fopen(proto, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"name\": \"tiny-c3\", \"dataset\": {\"records\": 100},\n"
          " \"topologies\": [{\"name\": \"single\", \"kind\": \"single\", \"delay_us\": 250}],\n"
          " \"cases\": [\"small-rows1000-forward\", \"split-rows10-forward\"], \"arms\": [\"ordinary\", \"remote\"],\n"
          " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"
          " \"statistics\": {\"resamples\": 500, \"seed\": 1},\n"
          " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 20}}\n",
          f);
    fclose(f);
    int rc = rl_test_run("rlbench", &so, &se, "campaign --protocol '%s' --out '%s'", proto, out);
    if (rc != 0) fail_msg("exit %d: %s", rc, se);
    json_t *r = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(out, &r, &msg)) fail_msg("results: %s", rl__errdetail_get(&msg));
    json_t *ref = json_object_get(r, "reference");
    ASSERT_NOT_NULL(ref);
    ASSERT_EQ(json_array_size(json_object_get(ref, "reports")), 2);
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = slurp(path, NULL);
    ASSERT_NOT_NULL(md);
    ASSERT_NOT_NULL(strstr(md, "Beside the reference report C3"));
    /* our figures, as the summary has them, beside C3's */
    json_t *s = find_sum(r, "small-rows1000-forward", "remote/ordinary");
    ASSERT_NOT_NULL(s);
    double ratio = json_real_value(json_object_get(s, "ratio"));
    snprintf(want, sizeof want, "| small-rows1000-forward | %.3f [%.3f, %.3f] | ", ratio,
             json_real_value(json_object_get(s, "ci_low")), json_real_value(json_object_get(s, "ci_high")));
    char *row = strstr(md, want);
    if (!row) fail_msg("no row %s in\n%s", want, md);
    char *eol = strchr(row, '\n');
    ASSERT_NOT_NULL(eol);
    *eol = 0;
    ASSERT_NOT_NULL(strstr(row, "| 0.224 [0.222, 0.226] | 24 ms vs 108 ms | "));
    ASSERT_NOT_NULL(strstr(row, ratio < 1 ? "| yes" : "| **no**"));
    ASSERT_NOT_NULL(strstr(row, "`000_df0452837ce99cb3.txt` line 29 |"));
    *eol = '\n';
    row = strstr(md, "| split-rows10-forward | ");
    ASSERT_NOT_NULL(row);
    ASSERT_NOT_NULL(strstr(row, "| not published | not published | — | — |"));
    ASSERT_NOT_NULL(
        strstr(md, "C3's ping before its phase p50 0.597 ms, p99 0.628 ms (`000_df0452837ce99cb3.txt` line 9)"));
    ASSERT_NOT_NULL(strstr(md, "Round trip: ours p50 "));
    ASSERT_NOT_NULL(strstr(so, "Beside the reference report C3")); /* the main table printed too */
    free(md);
    snprintf(path, sizeof path, "%s/report.html", out);
    char *h = slurp(path, NULL);
    ASSERT_NOT_NULL(h);
    ASSERT_NOT_NULL(strstr(h, "<td>0.224 [0.222, 0.226]</td>"));
    free(h);
    snprintf(path, sizeof path, "%s/plots/ratios-single.dat", out);
    char *dat = slurp(path, NULL);
    ASSERT_NOT_NULL(dat);
    ASSERT_NOT_NULL(strstr(dat, " 0 0.224 0.222 0.226\n"));
    ASSERT_NOT_NULL(strstr(dat, " 0 ? ? ?\n"));
    free(dat);
    json_decref(r);
    free(so), free(se);
}

TEST(campaign_6_6_print_reports_protocols) {
    char *so = NULL, *se = NULL;
    static const char *const names[2] = {"c3", "m2"};
    for (int i = 0; i < 2; i++) {
        ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign --protocol %s --print-protocol", names[i]), 0);
        rl__camp_protocol p, q;
        rl__errdetail msg;
        rl__errdetail_init(&msg, NULL);
        if (rl__camp_protocol_parse(so, strlen(so), &p, &msg)) fail_msg("%s", rl__errdetail_get(&msg));
        ASSERT_OK(rl__camp_protocol_named(names[i], &q));
        rl_buf a, b;
        rl__buf_init(&a);
        rl__buf_init(&b);
        rl__camp_protocol_print(&p, &a);
        rl__camp_protocol_print(&q, &b);
        ASSERT_MEM_EQ(a.data, a.len, b.data, b.len);
        ASSERT_MEM_EQ(a.data, a.len, so, strlen(so));
        rl__buf_release(&a);
        rl__buf_release(&b);
        free(so), free(se);
    }
    char path[700];
    snprintf(path, sizeof path, "%s/tiny.json", dir);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign --protocol '%s' --print-protocol", path), 2);
    ASSERT_NOT_NULL(strstr(se, "not a file given with --protocol"));
    free(so), free(se);
    /* ./c3 is a file (absent here): the name is not taken for it */
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign --protocol ./c3 --out '%s/never'", dir), 1);
    ASSERT_NOT_NULL(strstr(se, "cannot open ./c3"));
    free(so), free(se);
}

TEST(campaign_6_7_reports_placement) {
    char out[700], proto[700], *so = NULL, *se = NULL;
    snprintf(out, sizeof out, "%s/m2", dir);
    snprintf(proto, sizeof proto, "%s/m2.json", dir);
    FILE *f = fopen(proto, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"name\": \"tiny-m2\", \"dataset\": {\"records\": 100},\n"
          " \"topologies\": [{\"name\": \"m2\", \"kind\": \"multi\", \"delay_us\": 250, \"storage_servers\": 9,"
          " \"hosts\": 3, \"replication\": 2, \"placement\": \"reports\", \"engine\": \"ssd\"}],\n"
          " \"cases\": [\"split-rows10-forward\", \"split-rows10-reverse\", \"split-rows1000-forward\","
          " \"small-rows10-forward\"],\n"
          " \"arms\": [\"ordinary\", \"remote\"],\n"
          " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"
          " \"statistics\": {\"resamples\": 500, \"seed\": 1},\n"
          " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 10}}\n",
          f);
    fclose(f);
    int rc = rl_test_run("rlbench", &so, &se, "campaign --protocol '%s' --out '%s'", proto, out);
    if (rc != 0) fail_msg("exit %d: %s", rc, se);
    json_t *r = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(out, &r, &msg)) fail_msg("results: %s", rl__errdetail_get(&msg));
    json_t *t = json_array_get(json_object_get(r, "topologies"), 0);
    ASSERT_STR_EQ(jstr(t, "status"), "ran");
    json_t *plan = json_object_get(json_object_get(t, "placement"), "plan");
    ASSERT_NOT_NULL(plan);
    ASSERT_EQ(json_integer_value(json_object_get(plan, "records")), 100);
    ASSERT_EQ(json_integer_value(json_object_get(plan, "colocated_records")), 30);
    ASSERT_EQ(json_integer_value(json_object_get(plan, "receipt_server_disjoint")), 70);
    json_t *pf = json_object_get(plan, "planned_server_disjoint_fraction");
    ASSERT_TRUE(json_real_value(json_object_get(pf, "split-rows10-forward")) == 0);
    ASSERT_TRUE(json_real_value(json_object_get(pf, "split-rows10-reverse")) == 0);
    ASSERT_TRUE(fabs(json_real_value(json_object_get(pf, "split-rows1000-forward")) - 0.70) < 1e-9);
    size_t i;
    json_t *c;
    ASSERT_EQ(json_array_size(json_object_get(r, "cases")), 4);
    json_array_foreach(json_object_get(r, "cases"), i, c) {
        json_t *ch = json_object_get(c, "checks");
        ASSERT_TRUE(json_is_true(json_object_get(ch, "receipts_equal")));
        json_t *rp = json_object_get(json_object_get(ch, "receipt_before"), "placement");
        double fr = json_real_value(json_object_get(json_object_get(rp, "fractions"), "server_disjoint_fraction"));
        ASSERT_EQ(json_array_size(json_object_get(json_object_get(rp, "index"), "shards")), 1);
        if (!strncmp(jstr(c, "case"), "split", 5)) {
            ASSERT_TRUE(fabs(fr - 0.70) < 1e-9);
            ASSERT_TRUE(json_array_size(json_object_get(json_object_get(rp, "records"), "shards")) > 3);
        } else {
            ASSERT_TRUE(fr == 1.0);
        }
    }
    char path[800];
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = slurp(path, NULL);
    ASSERT_NOT_NULL(md);
    ASSERT_NOT_NULL(strstr(md, "Beside the reference report M2"));
    ASSERT_NOT_NULL(strstr(md, "split-rows10-forward 0.000"));
    ASSERT_NOT_NULL(strstr(md, "counted 70 server-disjoint records"));
    free(md);
    json_decref(r);
    free(so), free(se);
}

TEST(campaign_6_8_throughput_phase) {
    char out[700], proto[700], path[800], *so = NULL, *se = NULL;
    snprintf(out, sizeof out, "%s/tp", dir);
    snprintf(proto, sizeof proto, "%s/tp.json", dir);
    FILE *f = fopen(proto, "w");
    ASSERT_NOT_NULL(f);
    fputs("{\"name\": \"tiny-tp\", \"dataset\": {\"records\": 100},\n"
          " \"topologies\": [{\"name\": \"embedded\", \"kind\": \"embedded\"},"
          " {\"name\": \"single\", \"kind\": \"single\", \"delay_us\": 250}],\n"
          " \"cases\": [\"small-rows10-forward\"], \"arms\": [\"ordinary\", \"remote\"],\n"
          " \"design\": {\"blocks\": 1, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"
          " \"statistics\": {\"resamples\": 200, \"seed\": 1},\n"
          " \"checks\": {\"contamination_threshold\": 1, \"rtt_pings\": 10},\n"
          " \"throughput\": {\"clients\": [1, 2], \"seconds\": 0.2, \"warmup_seconds\": 0.02,"
          " \"cases\": [\"small-rows10-forward\"]}}\n",
          f);
    fclose(f);
    int rc = rl_test_run("rlbench", &so, &se, "campaign --protocol '%s' --out '%s'", proto, out);
    if (rc != 0) fail_msg("exit %d: %s", rc, se);
    json_t *r = NULL;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(out, &r, &msg)) fail_msg("results: %s", rl__errdetail_get(&msg));
    json_t *tps = json_object_get(r, "throughput"), *e;
    ASSERT_EQ(json_array_size(tps), 8);
    size_t i;
    json_array_foreach(tps, i, e) {
        int single = !strcmp(jstr(e, "topology"), "single");
        ASSERT_TRUE(json_is_true(json_object_get(e, "ok")));
        ASSERT_EQ(json_integer_value(json_object_get(e, "clients")), (json_int_t)(i % 2 + 1));
        ASSERT_STR_EQ(jstr(e, "arm"), i % 4 < 2 ? "ordinary" : "remote");
        ASSERT_TRUE(json_integer_value(json_object_get(e, "ops")) > 0);
        ASSERT_TRUE(json_real_value(json_object_get(e, "queries_per_second")) > 0);
        double p50 = json_real_value(json_object_get(e, "p50_ns")), p99 = json_real_value(json_object_get(e, "p99_ns"));
        ASSERT_TRUE(p50 > 0 && p50 <= p99);
        if (single) ASSERT_TRUE(p50 >= 500000 * 0.98); /* two crossings of 250 us, within the bucket */
        ASSERT_TRUE(json_is_number(json_object_get(e, "client_cpu_seconds")));
        ASSERT_TRUE(json_number_value(json_object_get(e, "client_cpu_seconds")) >= 0);
        ASSERT_EQ(json_integer_value(json_object_get(e, "servers")), single ? 2 : 0);
        if (single) ASSERT_TRUE(json_is_number(json_object_get(e, "server_cpu_seconds_per_query")));
        else ASSERT_TRUE(json_is_null(json_object_get(e, "server_cpu_seconds")));
        ASSERT_TRUE(json_number_value(json_object_get(e, "max_late_seconds")) < 0.5);
    }
    /* throughput.csv */
    snprintf(path, sizeof path, "%s/" RL_CAMP_THROUGHPUT_CSV, out);
    size_t n;
    char *text = slurp(path, &n);
    ASSERT_NOT_NULL(text);
    json_t *rows = NULL;
    ASSERT_OK(rl__camp_csv_parse(text, n, &rows, &msg));
    ASSERT_EQ(json_array_size(rows), 9);
    json_t *header = json_array_get(rows, 0);
    json_array_foreach(tps, i, e) {
        json_t *row = json_array_get(rows, i + 1);
        for (size_t c = 0; c < json_array_size(header); c++) {
            const char *name = json_string_value(json_array_get(header, c));
            json_t *v = json_object_get(e, name);
            if (json_is_boolean(v))
                ASSERT_STR_EQ(json_string_value(json_array_get(row, c)), json_is_true(v) ? "true" : "false");
            else same_value(json_string_value(json_array_get(row, c)), v, name);
        }
    }
    json_decref(rows);
    free(text);
    /* the report, the plots */
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = slurp(path, NULL);
    ASSERT_NOT_NULL(md);
    ASSERT_NOT_NULL(strstr(md, "### Throughput"));
    ASSERT_NOT_NULL(strstr(md, "| small-rows10-forward | remote | 2 | "));
    ASSERT_NOT_NULL(strstr(md, "n/a (no servers)"));
    free(md);
    snprintf(path, sizeof path, "%s/plots/throughput-single.svg", out);
    char *svg = slurp(path, NULL);
    ASSERT_NOT_NULL(svg);
    free(svg);
    snprintf(path, sizeof path, "%s/report.html", out);
    char *h = slurp(path, NULL);
    ASSERT_NOT_NULL(h);
    ASSERT_NOT_NULL(strstr(h, "<figcaption>plots/throughput-single.svg</figcaption>"));
    free(h);
    /* one progress counter for the whole run: 2 timed processes + 4 throughput levels per topology */
    int lines = 0;
    for (const char *p = se; (p = strstr(p, "campaign: [")); p++) {
        int done = 0, total = 0;
        ASSERT_EQ(sscanf(p, "campaign: [%d/%d]", &done, &total), 2);
        if (total != 12) fail_msg("a progress line with total %d: %.120s", total, p);
        lines++;
    }
    ASSERT_EQ(lines, 12);
    ASSERT_NOT_NULL(strstr(se, "campaign: [12/12]"));
    free(so), free(se);
    /* compare lists the levels: the run against itself changes by 1.000 */
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign compare '%s' '%s'", out, out), 0);
    json_t *l = json_array_get(tps, 7);
    char want[300];
    snprintf(
        want, sizeof want,
        "| single | small-rows10-forward | remote | 2 | %.0f (p50 %.3f ms) | %.0f (p50 %.3f ms) | 1.000 |",
        json_real_value(json_object_get(l, "queries_per_second")), json_real_value(json_object_get(l, "p50_ns")) / 1e6,
        json_real_value(json_object_get(l, "queries_per_second")), json_real_value(json_object_get(l, "p50_ns")) / 1e6);
    if (!strstr(so, want)) fail_msg("no row\n%s\nin\n%s", want, so);
    json_decref(r);
    free(so), free(se);
}

/* campaign_6_9: `rlbench campaign report DIR` writes a run's report.md and report.html again from its
 * results and manifest: byte for byte what the run wrote (same binary), the main table on stdout;
 * a directory without a run is exit 1 naming file_not_found. */
TEST(campaign_6_9_report_again) {
    char path[700], *so = NULL, *se = NULL;
    size_t n0, n1, h0, h1;
    snprintf(path, sizeof path, "%s/report.md", out_a);
    char *md = slurp(path, &n0);
    ASSERT_NOT_NULL(md);
    ASSERT_EQ(unlink(path), 0);
    snprintf(path, sizeof path, "%s/report.html", out_a);
    char *html = slurp(path, &h0);
    ASSERT_NOT_NULL(html);
    ASSERT_EQ(unlink(path), 0);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign report '%s'", out_a), 0);
    ASSERT_NOT_NULL(strstr(so, "small-rows10-forward"));
    ASSERT_NOT_NULL(strstr(so, "report: "));
    char *html2 = slurp(path, &h1);
    snprintf(path, sizeof path, "%s/report.md", out_a);
    char *md2 = slurp(path, &n1);
    ASSERT_NOT_NULL(md2);
    ASSERT_NOT_NULL(html2);
    ASSERT_MEM_EQ(md2, n1, md, n0);
    ASSERT_MEM_EQ(html2, h1, html, h0);
    free(md), free(md2), free(html), free(html2), free(so), free(se);
    ASSERT_EQ(rl_test_run("rlbench", &so, &se, "campaign report '%s/none'", dir), 1);
    ASSERT_NOT_NULL(strstr(se, "file_not_found"));
    free(so), free(se);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(campaign_6_1_csv_round_trip),
                                       T(campaign_6_2_html_self_contained),
                                       T(campaign_6_3_compare),
                                       T(campaign_6_4_out_required),
                                       T(campaign_6_5_reference_beside_a_run),
                                       T(campaign_6_6_print_reports_protocols),
                                       T(campaign_6_7_reports_placement),
                                       T(campaign_6_8_throughput_phase),
                                       T(campaign_6_9_report_again)};
    rl_test_init(argc, argv);
    return cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, setup, teardown);
}
