/* test_campaign_results.c — the campaign's results file (src/bench/report_results.c): written as
 * one zstd frame, read back compressed or not.
 *
 *   campaign_results_1_1  a written document: DIR/results.json.zst only, one frame recording its
 *                         size and checksum, decoding to exactly json_dumps with RL_CAMP_RESULTS_JSON_FLAGS (the
 *                         old results.json's bytes); reading it gives an equal document
 *   campaign_results_1_2  the reader's other forms: a plain results.json (by directory and by file),
 *                         zstd data without a recorded size in two frames (what the zstd program
 *                         writes from a pipe, concatenated), and .zst preferred when both are there
 *   campaign_results_1_3  errors: no results in a directory or no such file (file_not_found), a
 *                         truncated frame, damaged zstd data and text that is not JSON
 *                         (corrupt_data), each with the file named in the message
 */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <zstd.h>

#include "bench/campaign_int.h"
#include "test.h"

/* A document with what results hold: reals needing 17 digits, large integers, nulls, nesting,
 * non-ASCII text, and enough repeated samples to compress. */
static json_t *sample_doc(int tag) {
    json_t *d = json_pack("{s:s, s:i, s:b, s:n, s:f, s:f, s:I, s:s}", "format", "reclayer-campaign-results/1", "tag",
                          tag, "ok", 1, "nothing", "third", 0.1 + 0.2, "tiny", 1e-300, "big",
                          (json_int_t)9007199254740993LL, "text", "µs \"quoted\" \\ tab\t");
    json_t *samples = json_array();
    for (int i = 0; i < 500; i++)
        json_array_append_new(samples, json_pack("{s:s, s:s, s:i, s:f, s:f}", "case", "small-rows10-forward", "arm",
                                                 i % 2 ? "remote" : "ordinary", "block", i / 2, "ns_per_op",
                                                 1000.0 + i / 7.0, "rows_per_op", 10.0));
    json_object_set_new(d, "samples", samples);
    return d;
}

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(p, 1, n, f), n);
    ASSERT_EQ(fclose(f), 0);
}

static void *read_file(const char *path, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc((size_t)n + 1);
    ASSERT_NOT_NULL(p);
    ASSERT_EQ(fread(p, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *out_len = (size_t)n;
    return p;
}

/* Load path and check it equals want. */
static void load_equal(const char *path, json_t *want) {
    rl__errdetail msg;
    json_t *got = NULL;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(path, &got, &msg)) fail_msg("%s: %s", path, rl__errdetail_get(&msg));
    ASSERT_TRUE(json_equal(got, want));
    json_decref(got);
}

/* Load path, expecting the error code and a message naming what. */
static void load_fails(const char *path, int code, const char *what) {
    rl__errdetail msg;
    json_t *got = (json_t *)1;
    rl__errdetail_init(&msg, NULL);
    ASSERT_RC(rl__camp_results_load(path, &got, &msg), code);
    ASSERT_NULL(got);
    if (!strstr(rl__errdetail_get(&msg), what))
        fail_msg("%s: '%s' does not say '%s'", path, rl__errdetail_get(&msg), what);
}

TEST(campaign_results_1_1_written) {
    char *dir = rl_test_tmpdir("camp-results"), path[600];
    json_t *doc = sample_doc(1);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__camp_results_write(dir, doc, &msg));
    snprintf(path, sizeof path, "%s/results.json", dir);
    ASSERT_NE(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/results.json.zst", dir);
    size_t zlen;
    void *z = read_file(path, &zlen);
    ASSERT_EQ(ZSTD_findFrameCompressedSize(z, zlen), zlen);
    unsigned long long n = ZSTD_getFrameContentSize(z, zlen);
    ASSERT_TRUE(n != ZSTD_CONTENTSIZE_UNKNOWN && n != ZSTD_CONTENTSIZE_ERROR);
    ASSERT_TRUE(((const uint8_t *)z)[4] & 0x04); /* Frame_Header_Descriptor: Content_Checksum_flag */
    char *text = malloc((size_t)n);
    ASSERT_NOT_NULL(text);
    ASSERT_EQ(ZSTD_decompress(text, (size_t)n, z, zlen), (size_t)n);
    char *want = json_dumps(doc, RL_CAMP_RESULTS_JSON_FLAGS);
    ASSERT_MEM_EQ(text, (size_t)n, want, strlen(want));
    ASSERT_TRUE(zlen * 4 < (size_t)n);
    load_equal(dir, doc);
    load_equal(path, doc);
    free(want);
    free(text);
    free(z);
    json_decref(doc);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(campaign_results_1_2_forms) {
    char *dir = rl_test_tmpdir("camp-results"), path[600];
    json_t *doc = sample_doc(2), *other = sample_doc(3);
    char *text = json_dumps(doc, RL_CAMP_RESULTS_JSON_FLAGS);
    size_t len = strlen(text);
    /* Plain results.json, by directory and by file. */
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_file(path, text, len);
    load_equal(dir, doc);
    load_equal(path, doc);
    /* Two frames without a recorded size, as `cat a | zstd; cat b | zstd` would write. */
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ASSERT_NOT_NULL(c);
    ASSERT_FALSE(ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)));
    size_t cap = 2 * ZSTD_compressBound(len) + 64, zlen = 0;
    uint8_t *z = malloc(cap);
    ASSERT_NOT_NULL(z);
    for (int part = 0; part < 2; part++) {
        ZSTD_inBuffer in = {text + (part ? len / 2 : 0), part ? len - len / 2 : len / 2, 0};
        ZSTD_outBuffer out = {z, cap, zlen};
        size_t left;
        do left = ZSTD_compressStream2(c, &out, &in, ZSTD_e_end);
        while (left != 0 && !ZSTD_isError(left));
        ASSERT_FALSE(ZSTD_isError(left));
        zlen = out.pos;
    }
    ZSTD_freeCCtx(c);
    ASSERT_EQ(ZSTD_getFrameContentSize(z, zlen), ZSTD_CONTENTSIZE_UNKNOWN);
    snprintf(path, sizeof path, "%s/piped.zst", dir);
    write_file(path, z, zlen);
    load_equal(path, doc);
    /* With both in the directory, results.json.zst is read. */
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    ASSERT_OK(rl__camp_results_write(dir, other, &msg));
    load_equal(dir, other);
    free(z);
    free(text);
    json_decref(doc);
    json_decref(other);
    rl_test_rmtree(dir);
    free(dir);
}

TEST(campaign_results_1_3_errors) {
    char *dir = rl_test_tmpdir("camp-results"), path[600];
    json_t *doc = sample_doc(4);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    load_fails(dir, RL_E_FILE_NOT_FOUND, "neither");
    snprintf(path, sizeof path, "%s/no-such-file.json", dir);
    load_fails(path, RL_E_FILE_NOT_FOUND, path);
    /* A truncated frame. */
    ASSERT_OK(rl__camp_results_write(dir, doc, &msg));
    snprintf(path, sizeof path, "%s/results.json.zst", dir);
    size_t zlen;
    uint8_t *z = read_file(path, &zlen);
    char cut[600];
    snprintf(cut, sizeof cut, "%s/cut.zst", dir);
    write_file(cut, z, zlen / 2);
    load_fails(cut, RL_E_CORRUPT_DATA, "truncated");
    /* Damaged data after the magic number. */
    for (size_t i = 8; i < zlen; i++) z[i] ^= 0x5a;
    write_file(cut, z, zlen);
    load_fails(cut, RL_E_CORRUPT_DATA, cut);
    /* Text that is not JSON. */
    write_file(cut, "{\"samples\": [1, 2", 17);
    load_fails(cut, RL_E_CORRUPT_DATA, "not JSON");
    free(z);
    json_decref(doc);
    rl_test_rmtree(dir);
    free(dir);
}

/* A results document with one case of embedded whose remote/ordinary time ratio is `ratio` and whose
 * medians are ordinary `o` and remote `r` ns. */
static json_t *direction_doc(double ratio, double o, double r) {
    return json_pack("{s:{s:[s], s:{s:f}, s:{s:i}}, s:[{s:s, s:s, s:i}], s:[{s:s, s:s, s:s}],"
                     " s:[{s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:s, s:i}],"
                     " s:[{s:s, s:s, s:s, s:{s:{s:f}}}, {s:s, s:s, s:s, s:{s:{s:f}}}]}",
                     "protocol", "cases", "small-rows10-forward", "statistics", "level", 0.95, "design", "blocks", 6,
                     "topologies", "name", "embedded", "status", "ran", "delay_us", 0, "cases", "topology", "embedded",
                     "case", "small-rows10-forward", "label", "clean", "summary", "topology", "embedded", "case",
                     "small-rows10-forward", "comparison", "remote/ordinary", "arm", "remote", "baseline", "ordinary",
                     "metric", "ns_per_op", "ratio", ratio, "ci_low", ratio - 0.05, "ci_high", ratio + 0.05, "status",
                     "ok", "n_blocks", 6, "arm_summary", "topology", "embedded", "case", "small-rows10-forward", "arm",
                     "ordinary", "metrics", "ns_per_op", "median", o, "topology", "embedded", "case",
                     "small-rows10-forward", "arm", "remote", "metrics", "ns_per_op", "median", r);
}

/* campaign_results_1_4: the main table notes a case whose ratio and medians point different ways
 * (and says why that can happen), and only such a case. */
TEST(campaign_results_1_4_direction_note) {
    json_t *d = direction_doc(0.97, 10000, 11000);
    ASSERT_NOT_NULL(d);
    rl_buf b;
    rl__buf_init(&b);
    rl__camp_report_main_table(d, &b);
    const char *t = (const char *)b.data;
    ASSERT_NOT_NULL(strstr(t, "Note, small-rows10-forward remote/ordinary: the ratio 0.970 says remote is faster"));
    ASSERT_NOT_NULL(strstr(t, "say slower"));
    ASSERT_NOT_NULL(strstr(t, "pairs the arms within each block"));
    json_decref(d);
    rl__buf_reset(&b);
    d = direction_doc(0.97, 11000, 10000); /* both say faster */
    rl__camp_report_main_table(d, &b);
    ASSERT_NULL(strstr((const char *)b.data, "Note,"));
    json_decref(d);
    rl__buf_release(&b);
}

/* campaign_results_1_5: the reference reports' figures (campaign_reference.c): every entry names a
 * case the protocol parser takes, a report matched to its topology kind and a line; the published
 * figures are there (C3 small 0.224 [0.222, 0.226] 24 vs 108 ms, split 1.053 [1.008, 1.101] 276.9 vs
 * 266.4 ms; M2 skip3-rows10-reverse 0.158 [0.155, 0.160] 4.87 vs 31.13 ms, split-rows10 0.873 /
 * 0.854, small-limit1-forward 0.979, the 1,000-row cases as the range 1.226–2.326 only); a results
 * document of a multi topology shows M2's forms: a ratio with its interval and times, a ratio
 * without interval, the range only, "not published", and "same direction?" from each; each case
 * that goes the other way (and only such a case) gets a note with each arm's counters. */
TEST(campaign_results_1_5_reference) {
    static const char *const ks[5] = {"skip3-rows10-reverse", "split-rows10-forward", "small-rows1000-reverse",
                                      "small-limit1-reverse", "split-rows10-reverse"};
    const rl__camp_reference *x = rl__camp_reference_find(RL_CAMP_SINGLE, "small-rows1000-forward");
    ASSERT_NOT_NULL(x);
    ASSERT_TRUE(x->ratio == 0.224 && x->ci_low == 0.222 && x->ci_high == 0.226 && x->remote_ms == 24.0 &&
                x->ordinary_ms == 108.0 && x->line == 29);
    x = rl__camp_reference_find(RL_CAMP_SINGLE, "split-rows1000-forward");
    ASSERT_TRUE(x && x->ratio == 1.053 && x->ci_low == 1.008 && x->ci_high == 1.101 && x->remote_ms == 276.9 &&
                x->ordinary_ms == 266.4 && x->line == 30);
    x = rl__camp_reference_find(RL_CAMP_MULTI, "skip3-rows10-reverse");
    ASSERT_TRUE(x && x->ratio == 0.158 && x->ci_low == 0.155 && x->ci_high == 0.160 && x->remote_ms == 4.87 &&
                x->ordinary_ms == 31.13 && x->line == 40);
    x = rl__camp_reference_find(RL_CAMP_MULTI, "split-rows10-forward");
    ASSERT_TRUE(x && x->ratio == 0.873 && isnan(x->ci_low) && x->line == 41);
    x = rl__camp_reference_find(RL_CAMP_MULTI, "split-rows10-reverse");
    ASSERT_TRUE(x && x->ratio == 0.854 && x->line == 41);
    x = rl__camp_reference_find(RL_CAMP_MULTI, "small-limit1-forward");
    ASSERT_TRUE(x && x->ratio == 0.979 && x->line == 41);
    static const char *const v[3] = {"small", "split", "skip3"};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 2; d++) {
            char k[64];
            snprintf(k, sizeof k, "%s-rows1000-%s", v[i], d ? "reverse" : "forward");
            x = rl__camp_reference_find(RL_CAMP_MULTI, k);
            ASSERT_TRUE(x && isnan(x->ratio) && x->range_low == 1.226 && x->range_high == 2.326 && x->line == 43);
        }
    ASSERT_NULL(rl__camp_reference_find(RL_CAMP_MULTI, "small-limit1-reverse"));
    ASSERT_NULL(rl__camp_reference_find(RL_CAMP_EMBEDDED, "small-rows1000-forward"));
    ASSERT_STR_EQ(rl__camp_reference_report(RL_CAMP_SINGLE), "C3");
    ASSERT_STR_EQ(rl__camp_reference_report(RL_CAMP_MULTI), "M2");
    json_t *ref = rl__camp_reference_json(), *f;
    size_t i;
    ASSERT_NOT_NULL(ref);
    json_array_foreach(json_object_get(ref, "figures"), i, f) {
        rl__camp_case c;
        ASSERT_OK(rl__camp_case_parse(json_string_value(json_object_get(f, "case")), &c, NULL));
        ASSERT_TRUE(json_integer_value(json_object_get(f, "line")) > 0);
    }
    /* A multi topology's results beside M2. */
    json_t *d = json_pack("{s:{s:[s,s,s,s,s], s:{s:f}, s:{s:i}}, s:[{s:s, s:s, s:s, s:i}], s:[], s:[], s:[], s:o}",
                          "protocol", "cases", ks[0], ks[1], ks[2], ks[3], ks[4], "statistics", "level", 0.95, "design",
                          "blocks", 6, "topologies", "name", "m2", "kind", "multi", "status", "ran", "delay_us", 250,
                          "cases", "summary", "arm_summary", "reference", ref);
    ASSERT_NOT_NULL(d);
    for (int k = 0; k < 5; k++) {
        double ratio = k == 4 ? 1.2 : 0.5; /* split-rows10-reverse: the other way from M2's 0.854 */
        json_array_append_new(json_object_get(d, "cases"),
                              json_pack("{s:s, s:s, s:s}", "topology", "m2", "case", ks[k], "label", "clean"));
        json_array_append_new(json_object_get(d, "summary"),
                              json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:f, s:s, s:i}", "topology", "m2",
                                        "case", ks[k], "comparison", "remote/ordinary", "arm", "remote", "baseline",
                                        "ordinary", "metric", "ns_per_op", "ratio", ratio, "ci_low", ratio - 0.1,
                                        "ci_high", ratio + 0.1, "status", "ok", "n_blocks", 6));
        for (int a = 0; a < 2; a++)
            json_array_append_new(json_object_get(d, "arm_summary"),
                                  json_pack("{s:s, s:s, s:s, s:{s:{s:f}, s:{s:f}, s:{s:f}}}", "topology", "m2", "case",
                                            ks[k], "arm", a ? "remote" : "ordinary", "metrics", "ns_per_op", "median",
                                            a ? 1e6 * ratio : 1e6, "round_trips_per_op", "median", a ? 2.0 : 104.0,
                                            "net_bytes_received_per_op", "median", a ? 2.5e6 : 1500.0));
    }
    rl_buf b;
    rl__buf_init(&b);
    rl__camp_report_main_table(d, &b);
    const char *t = (const char *)b.data;
    ASSERT_NOT_NULL(strstr(t, "Beside the reference report M2"));
    ASSERT_NOT_NULL(strstr(t, "| skip3-rows10-reverse | 0.500 [0.400, 0.600] | 500 µs vs 1.00 ms | 0.158 [0.155, "
                              "0.160] | 4.87 ms vs 31.13 ms | yes | `003_98b222c7124c87d0.txt` line 40 |"));
    ASSERT_NOT_NULL(strstr(t, "| split-rows10-forward | 0.500 [0.400, 0.600] | 500 µs vs 1.00 ms | 0.873 (no "
                              "interval published) | not published | yes | `003_98b222c7124c87d0.txt` line 41 |"));
    ASSERT_NOT_NULL(strstr(t, "| small-rows1000-reverse | 0.500 [0.400, 0.600] | 500 µs vs 1.00 ms | not published "
                              "(only the range 1.226–2.326 over the 1,000-row cases) | not published | **no** | "
                              "`003_98b222c7124c87d0.txt` line 43 |"));
    ASSERT_NOT_NULL(strstr(t, "| small-limit1-reverse | 0.500 [0.400, 0.600] | 500 µs vs 1.00 ms | not published | "
                              "not published | — | — |"));
    ASSERT_NOT_NULL(strstr(t, "| split-rows10-reverse | 1.200 [1.100, 1.300] | 1.20 ms vs 1.00 ms | 0.854 (no "
                              "interval published) | not published | **no** |"));
    ASSERT_NULL(strstr(t, "ping before its phase")); /* C3's ping is for single topologies */
    /* A note with each arm's counters for the two cases that go the other way, and only for them. */
    ASSERT_NOT_NULL(strstr(t, "Where our direction differs from the report's"));
    ASSERT_NOT_NULL(strstr(t, "- **small-rows1000-reverse** (ours 0.500, the report's above 1: remote slower): "
                              "`ordinary` 104 critical round trips, n/a requests (n/a mapped, n/a record loads), "
                              "1.5 kB received; `remote` 2 critical round trips, n/a requests (n/a mapped, n/a "
                              "record loads), 2.5 MB received.\n"));
    ASSERT_NOT_NULL(strstr(t, "- **split-rows10-reverse** (ours 1.200, the report's below 1: remote faster): "));
    ASSERT_NULL(strstr(t, "- **skip3-rows10-reverse**"));
    ASSERT_NULL(strstr(t, "- **split-rows10-forward**"));
    rl__buf_release(&b);
    json_decref(d);
}

RL_TEST_MAIN(T(campaign_results_1_1_written), T(campaign_results_1_2_forms), T(campaign_results_1_3_errors),
             T(campaign_results_1_4_direction_note), T(campaign_results_1_5_reference))
