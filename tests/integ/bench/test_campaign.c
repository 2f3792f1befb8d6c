/* test_campaign.c — `rlbench campaign` end to end on a tiny protocol: 2 blocks, 1 repeat
 * of 0.05 s, two cases (small-rows10-forward, split-limit1-reverse), 100 records, arms ordinary,
 * remote and sqlite (campaign_1_4: ordinary, remote and adaptive), on the embedded topology plus a multi
 * one whose 5 storage servers do not spread over its 3 hosts (not available: the reason is reported).
 * Each run takes a few seconds (about 12 s under ASan).
 *
 *   campaign_1_1  the results are complete: a sample for every (topology, case, available arm,
 *                 block, repeat) with every per-op figure; the uneven multi reported as
 *                 not available with a reason; the checks of every case (RTT slots, receipts equal, CPU
 *                 telemetry with a label), integrity_ok true, the three defect controls failing the
 *                 checker as expected, the rows check; report.md, the plots and manifest.json exist,
 *                 and the manifest's protocol SHA-256 is the protocol file's
 *   campaign_1_5  the results are written compressed only (results.json.zst, no results.json): one
 *                 zstd frame that decodes to exactly the JSON an uncompressed write prints, and the
 *                 reader gives the same document from it and from that JSON written plainly
 *   campaign_1_2  the summary recomputed from the raw samples by this test, independently (medians,
 *                 block ratios, geometric means, and the bootstrap from its written specification:
 *                 splitmix64 + xoshiro256**, rejection draws, type-7 quantiles): equal
 *   campaign_1_3  the order of arms alternates between blocks (ordinary remote sqlite, then sqlite
 *                 remote ordinary), in the processes' sequence numbers and in the samples
 *   campaign_1_4  the adaptive arm: available, sampled in every block, its rows agree, and the
 *                 summary's adaptive/best ratio (per block against the better fixed arm) is there;
 *                 scripts/adaptive-decompose.py reads the run's compressed results (with python3)
 *   campaign_2_1  a contaminated case is labelled: a busy thread in this (non-campaign) process during
 *                 the run, threshold 2 % — every case is "contaminated", its samples are kept, the
 *                 report says so, the plots mark it (the data's flag, the script's marker) and
 *                 report.html shades its rows
 *   campaign_2_2  a failed receipt comparison is reported (RL_CAMPAIGN_TEST_BREAK_RECEIPT): exit 1,
 *                 receipts_equal false for that case only, a failure entry, the report shows it
 *   campaign_2_3  a failed process is reported (RL_CAMPAIGN_TEST_FAIL_WORKER): its block is left out
 *                 of that comparison (n_blocks 1), the failure names the process
 *   campaign_3_1  the command line: --print-protocol (full and quick) parses back, bad protocols exit
 *                 2 naming the field, a non-empty --out is refused, exclusive options are usage errors
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <zstd.h>

#include "base/sha256.h"
#include "bench/campaign_int.h"
#include "reclayer/version.h"
#include "test.h"

#define TINY                                                                                                \
    "{\"name\": \"tiny\", \"dataset\": {\"records\": 100},\n"                                               \
    " \"topologies\": [{\"name\": \"embedded\", \"kind\": \"embedded\"}, {\"name\": \"uneven\", \"kind\": " \
    "\"multi\", \"storage_servers\": 5, \"hosts\": 3, \"replication\": 2}],\n"                              \
    " \"cases\": [\"small-rows10-forward\", \"split-limit1-reverse\"],\n"                                   \
    " \"arms\": [%s],\n"                                                                                    \
    " \"design\": {\"blocks\": 2, \"repeats\": 1, \"seconds\": 0.05, \"warmup_seconds\": 0.01},\n"          \
    " \"statistics\": {\"resamples\": 2000, \"seed\": 391706},\n"                                           \
    " \"checks\": {\"contamination_threshold\": %s}}\n"

static const char *const metrics[] = {
    "ns_per_op",           "bytes_per_op",           "allocs_per_op",       "rows_per_op",
    "requests_per_op",     "round_trips_per_op",     "kv_bytes_per_op",     "index_entries_per_op",
    "client_reads_per_op", "mapped_requests_per_op", "record_loads_per_op", "net_bytes_received_per_op"};
#define N_METRICS 12

typedef struct {
    char *dir;     /* the test's temporary directory (heap) */
    char out[400]; /* --out */
    char proto[400];
    int exit_code;
    char *stdout_text, *stderr_text;
    json_t *results, *manifest;
    char *report;
} run;

/* The bytes of the file at path, NUL-terminated (heap), and their count in *out_len; NULL if it
 * cannot be opened. */
static char *slurp_n(const char *path, size_t *out_len) {
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
    *out_len = (size_t)n;
    return s;
}

static char *slurp(const char *path) {
    size_t n;
    return slurp_n(path, &n);
}

static atomic_int spin_stop;
static void *spin(void *ud) {
    volatile uint64_t x = 0;
    (void)ud;
    while (!atomic_load(&spin_stop)) x++;
    return NULL;
}

#define ARMS_3 "\"ordinary\", \"remote\", \"sqlite\""
#define ARMS_ADAPTIVE "\"ordinary\", \"remote\", \"adaptive\""

/* Run the tiny campaign with the arms and the threshold; busy: a spinning thread meanwhile. */
static void run_tiny_arms(run *r, const char *tag, const char *arms, const char *threshold, int busy) {
    char path[600];
    memset(r, 0, sizeof *r);
    r->dir = rl_test_tmpdir(tag);
    snprintf(r->proto, sizeof r->proto, "%s/tiny.json", r->dir);
    snprintf(r->out, sizeof r->out, "%s/out", r->dir);
    FILE *f = fopen(r->proto, "w");
    ASSERT_NOT_NULL(f);
    fprintf(f, TINY, arms, threshold);
    fclose(f);
    pthread_t th;
    atomic_store(&spin_stop, 0);
    if (busy) ASSERT_EQ(pthread_create(&th, NULL, spin, NULL), 0);
    r->exit_code = rl_test_run("rlbench", &r->stdout_text, &r->stderr_text, "campaign --protocol '%s' --out '%s'",
                               r->proto, r->out);
    if (busy) {
        atomic_store(&spin_stop, 1);
        pthread_join(th, NULL);
    }
    json_error_t jerr;
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    if (rl__camp_results_load(r->out, &r->results, &msg))
        fail_msg("results: %s (stderr: %s)", rl__errdetail_get(&msg), r->stderr_text);
    snprintf(path, sizeof path, "%s/manifest.json", r->out);
    r->manifest = json_load_file(path, 0, &jerr);
    ASSERT_NOT_NULL(r->manifest);
    snprintf(path, sizeof path, "%s/report.md", r->out);
    r->report = slurp(path);
    ASSERT_NOT_NULL(r->report);
}

static void run_tiny(run *r, const char *tag, const char *threshold, int busy) {
    run_tiny_arms(r, tag, ARMS_3, threshold, busy);
}

static void run_free(run *r) {
    json_decref(r->results);
    json_decref(r->manifest);
    free(r->report);
    free(r->stdout_text);
    free(r->stderr_text);
    rl_test_rmtree(r->dir);
    free(r->dir);
}

/* The two runs the tests share: the normal one (campaign_1_*) and the broken one (campaign_2_*). */
static run run_a, run_b;
static int have_a, have_b;

/* The normal run, shared by campaign_1_*. */
static run *normal(void) {
    if (!have_a) {
        run_tiny(&run_a, "campaign-a", "1", 0);
        have_a = 1;
    }
    return &run_a;
}

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_t *find_case(json_t *res, const char *kase) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(res, "cases"), i, c) if (!strcmp(jstr(c, "case"), kase)) return c;
    return NULL;
}

static const char *cases[2] = {"small-rows10-forward", "split-limit1-reverse"};
static const char *arms_run[3] = {"ordinary", "remote", "sqlite"};

TEST(campaign_1_1_results_complete) {
    run *r = normal();
    if (r->exit_code != 0) fail_msg("exit %d: %s", r->exit_code, r->stderr_text);
    json_t *res = r->results;
    ASSERT_TRUE(json_is_true(json_object_get(res, "ok")));
    ASSERT_EQ(json_array_size(json_object_get(res, "failures")), 0);
    /* Topologies: embedded ran, the uneven multi is not available with its reason. */
    json_t *tops = json_object_get(res, "topologies");
    ASSERT_EQ(json_array_size(tops), 2);
    json_t *emb = json_array_get(tops, 0), *uneven = json_array_get(tops, 1);
    ASSERT_STR_EQ(jstr(emb, "status"), "ran");
    ASSERT_STR_EQ(jstr(uneven, "status"), "not_available");
    ASSERT_NOT_NULL(strstr(jstr(uneven, "reason"), "do not spread evenly over 3 hosts"));
    /* Datasets checked, defect controls failed the checker. */
    size_t i;
    json_t *d;
    ASSERT_EQ(json_array_size(json_object_get(emb, "datasets")), 2);
    json_array_foreach(json_object_get(emb, "datasets"), i, d) {
        ASSERT_TRUE(json_is_true(json_object_get(d, "integrity_ok")));
        ASSERT_EQ(json_integer_value(json_object_get(json_object_get(d, "integrity"), "records")), 100);
    }
    ASSERT_TRUE(json_is_true(json_object_get(emb, "defect_controls_passed")));
    ASSERT_EQ(json_array_size(json_object_get(emb, "defect_controls")), 3);
    json_array_foreach(json_object_get(emb, "defect_controls"), i, d) {
        ASSERT_TRUE(json_is_true(json_object_get(d, "clean_before")));
        ASSERT_FALSE(json_is_true(json_object_get(d, "integrity_ok_after")));
        ASSERT_TRUE(json_is_true(json_object_get(d, "passed")));
        int found = 0;
        size_t j;
        json_t *k;
        json_array_foreach(json_object_get(d, "found"), j, k) found |=
            !strcmp(json_string_value(k), jstr(d, "expected"));
        ASSERT_TRUE(found);
    }
    /* Arms: every one available. */
    json_array_foreach(json_object_get(emb, "arms"), i, d) ASSERT_TRUE(json_is_true(json_object_get(d, "available")));
    json_array_foreach(json_object_get(emb, "rows_check"), i, d) ASSERT_TRUE(json_is_true(json_object_get(d, "agree")));
    /* Every sample is there exactly once, with every figure. */
    json_t *samples = json_object_get(res, "samples");
    ASSERT_EQ(json_array_size(samples), 2 * 3 * 2 * 1);
    for (int k = 0; k < 2; k++)
        for (int a = 0; a < 3; a++)
            for (int b = 1; b <= 2; b++) {
                int n = 0;
                json_t *s;
                json_array_foreach(samples, i, s) {
                    if (strcmp(jstr(s, "case"), cases[k]) || strcmp(jstr(s, "arm"), arms_run[a]) ||
                        json_integer_value(json_object_get(s, "block")) != b)
                        continue;
                    n++;
                    ASSERT_STR_EQ(jstr(s, "topology"), "embedded");
                    ASSERT_EQ(json_integer_value(json_object_get(s, "repeat")), 1);
                    ASSERT_TRUE(json_integer_value(json_object_get(s, "ops")) >= 1);
                    for (int m = 0; m < N_METRICS; m++) {
                        json_t *v = json_object_get(s, metrics[m]);
                        if (!json_is_number(v))
                            fail_msg("%s %s block %d: %s missing", cases[k], arms_run[a], b, metrics[m]);
                    }
                    ASSERT_TRUE(json_number_value(json_object_get(s, "ns_per_op")) > 0);
                    ASSERT_TRUE(json_number_value(json_object_get(s, "rows_per_op")) == (k == 0 ? 10 : 1));
                    ASSERT_TRUE(json_number_value(json_object_get(s, "round_trips_per_op")) == 0);
                    ASSERT_TRUE(json_number_value(json_object_get(s, "requests_per_op")) == 0);
                    ASSERT_TRUE(json_number_value(json_object_get(s, "net_bytes_received_per_op")) == 0);
                    if (!strcmp(arms_run[a], "remote"))
                        ASSERT_TRUE(json_number_value(json_object_get(s, "mapped_requests_per_op")) >= 1);
                    if (!strcmp(arms_run[a], "ordinary"))
                        ASSERT_TRUE(json_number_value(json_object_get(s, "record_loads_per_op")) == (k == 0 ? 10 : 1));
                }
                ASSERT_EQ(n, 1);
            }
    /* The checks of every case. */
    for (int k = 0; k < 2; k++) {
        json_t *c = find_case(res, cases[k]), *ch = json_object_get(c, "checks");
        ASSERT_NOT_NULL(c);
        ASSERT_FALSE(json_is_true(json_object_get(json_object_get(ch, "rtt_before"), "applicable")));
        ASSERT_FALSE(json_is_true(json_object_get(json_object_get(ch, "rtt_after"), "applicable")));
        ASSERT_TRUE(json_is_true(json_object_get(ch, "receipts_equal")));
        ASSERT_TRUE(json_equal(json_object_get(ch, "receipt_before"), json_object_get(ch, "receipt_after")));
        ASSERT_EQ(json_integer_value(json_object_get(json_object_get(ch, "receipt_before"), "index_entries")), 100);
        ASSERT_TRUE(json_is_true(json_object_get(ch, "worker_rows_match")));
        json_t *cpu = json_object_get(ch, "cpu");
        ASSERT_TRUE(json_is_true(json_object_get(cpu, "ok")));
        ASSERT_TRUE(json_number_value(json_object_get(cpu, "other_fraction")) >= 0);
        ASSERT_STR_EQ(jstr(c, "label"), jstr(cpu, "label")); /* threshold 1: cannot be exceeded */
        ASSERT_STR_EQ(jstr(c, "label"), "clean");
        ASSERT_EQ(json_array_size(json_object_get(c, "processes")), 6);
    }
    /* Summary entries for both comparisons, every metric. */
    json_t *sum = json_object_get(res, "summary");
    ASSERT_EQ(json_array_size(sum), 2 * (N_METRICS + 4));
    /* Outputs. */
    ASSERT_NOT_NULL(strstr(r->report, "## Main table"));
    ASSERT_NOT_NULL(strstr(r->report, "| small-rows10-forward | clean |"));
    ASSERT_NOT_NULL(strstr(r->report, "remote took"));
    ASSERT_NOT_NULL(strstr(r->report, "Not run: multi: 5 storage servers do not spread evenly over 3 hosts"));
    ASSERT_NOT_NULL(strstr(r->stdout_text, "| split-limit1-reverse |"));
    ASSERT_NOT_NULL(strstr(r->stderr_text, "left"));
    json_t *pl = json_object_get(res, "plots");
    json_array_foreach(json_object_get(pl, "files"), i, d) {
        char path[1200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", r->out, json_string_value(d));
        ASSERT_EQ(stat(path, &st), 0);
        ASSERT_TRUE(st.st_size > 100);
    }
    if (access("/usr/bin/gnuplot", X_OK) == 0) ASSERT_EQ(json_array_size(json_object_get(pl, "files")), 4);
    char hex[65];
    ASSERT_OK(rl__sha256_file(r->proto, hex));
    ASSERT_STR_EQ(jstr(r->manifest, "protocol_sha256"), hex);
    ASSERT_STR_EQ(jstr(res, "protocol_sha256"), hex);
    json_t *bin = json_array_get(json_object_get(r->manifest, "binaries"), 0);
    ASSERT_STR_EQ(jstr(bin, "name"), "rlbench");
    ASSERT_OK(rl__sha256_file(jstr(bin, "path"), hex));
    ASSERT_STR_EQ(jstr(bin, "sha256"), hex);
    json_t *mach = json_object_get(r->manifest, "machine");
    ASSERT_TRUE(json_integer_value(json_object_get(mach, "cores")) >= 1);
    ASSERT_TRUE(json_integer_value(json_object_get(mach, "memory_bytes")) > 0);
    ASSERT_NOT_NULL(json_object_get(r->manifest, "git"));
    ASSERT_STR_EQ(jstr(r->manifest, "reclayer"), rl_version_string()); /* the build rlbench reports */
    ASSERT_NOT_NULL(json_object_get(json_object_get(r->manifest, "libraries"), "sqlite"));
    /* The datasets were removed (keep_data false). */
    char data[1200];
    snprintf(data, sizeof data, "%s/data", r->out);
    ASSERT_NE(access(data, F_OK), 0);
}

/* ---- An independent recomputation ------------------------------------------------------------ */

static uint64_t sm64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t xo(uint64_t s[4]) {
    uint64_t r = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t;
    s[3] = s[3] << 45 | s[3] >> 19;
    return r;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double q7(const double *s, size_t n, double p) {
    double h = (double)(n - 1) * p;
    size_t lo = (size_t)floor(h);
    return lo + 1 >= n ? s[n - 1] : s[lo] + (h - (double)lo) * (s[lo + 1] - s[lo]);
}

static double med(double *v, size_t n) {
    qsort(v, n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median over its repeats of the samples of (case, arm, block) for metric m. */
static double proc_med(json_t *samples, const char *kase, const char *arm, int block, const char *m) {
    double v[64];
    size_t n = 0, i;
    json_t *s;
    json_array_foreach(samples, i, s) {
        if (!strcmp(jstr(s, "case"), kase) && !strcmp(jstr(s, "arm"), arm) &&
            json_integer_value(json_object_get(s, "block")) == block)
            v[n++] = json_number_value(json_object_get(s, m));
    }
    return n ? med(v, n) : NAN;
}

static void near(double a, double b, const char *what) {
    if (!(fabs(a - b) <= 1e-12 * fabs(b))) fail_msg("%s: %.17g, recomputed %.17g", what, a, b);
}

TEST(campaign_1_2_summary_recomputed) {
    run *r = normal();
    json_t *res = r->results, *samples = json_object_get(res, "samples"), *s;
    json_t *st = json_object_get(json_object_get(res, "protocol"), "statistics");
    uint64_t seed = (uint64_t)json_integer_value(json_object_get(st, "seed"));
    int resamples = (int)json_integer_value(json_object_get(st, "resamples"));
    size_t i, checked = 0, zz = 0, undefined = 0, allocs_none = 0;
    json_array_foreach(json_object_get(res, "summary"), i, s) {
        const char *kase = jstr(s, "case"), *arm = jstr(s, "arm"), *base = jstr(s, "baseline"), *m = jstr(s, "metric");
        /* allocs_per_op and bytes_per_op (allocated) may be 0 in a block (parked cursors and
         * transactions allocate nothing on a short embedded query): their status then follows
         * the same rules, counted apart. */
        int is_allocs = !strcmp(m, "allocs_per_op") || !strcmp(m, "bytes_per_op");
        double ratios[2];
        int nr = 0, all_zero = 1;
        for (int b = 1; b <= 2; b++) {
            double num = proc_med(samples, kase, arm, b, m), den = proc_med(samples, kase, base, b, m);
            all_zero &= num == 0 && den == 0;
            if (num > 0 && den > 0) ratios[nr++] = num / den;
        }
        if (all_zero) {
            ASSERT_STR_EQ(jstr(s, "status"), "zero_zero");
            ASSERT_TRUE(json_is_null(json_object_get(s, "ratio")));
            if (is_allocs) allocs_none++;
            else zz++;
            continue;
        }
        if (nr < 2) { /* a block with x/0 or 0/x (e.g. mapped requests of ordinary): no ratio */
            ASSERT_STR_EQ(jstr(s, "status"), "undefined");
            ASSERT_TRUE(json_is_null(json_object_get(s, "ratio")));
            if (is_allocs) allocs_none++;
            else undefined++;
            continue;
        }
        ASSERT_STR_EQ(jstr(s, "status"), "ok");
        double g = exp((log(ratios[0]) + log(ratios[1])) / 2);
        near(json_number_value(json_object_get(s, "ratio")), g, m);
        /* The bootstrap, from its specification. */
        uint64_t x = seed, state[4];
        for (int k = 0; k < 4; k++) state[k] = sm64(&x);
        double *stat = malloc((size_t)resamples * sizeof *stat), l[2] = {log(ratios[0]), log(ratios[1])};
        ASSERT_NOT_NULL(stat);
        for (int k = 0; k < resamples; k++) {
            double sum = 0;
            for (int j = 0; j < 2; j++) {
                uint64_t v, threshold = (0 - (uint64_t)2) % 2;
                do v = xo(state);
                while (v < threshold);
                sum += l[v % 2];
            }
            stat[k] = exp(sum / 2);
        }
        qsort(stat, (size_t)resamples, sizeof *stat, cmpd);
        near(json_number_value(json_object_get(s, "ci_low")), q7(stat, (size_t)resamples, 0.025), "ci_low");
        near(json_number_value(json_object_get(s, "ci_high")), q7(stat, (size_t)resamples, 0.975), "ci_high");
        free(stat);
        /* Per-arm figures: median of the block medians and the raw min/max. */
        json_t *fig = json_object_get(json_object_get(s, "arms"), arm);
        double bm[2] = {proc_med(samples, kase, arm, 1, m), proc_med(samples, kase, arm, 2, m)};
        double lo = fmin(bm[0], bm[1]), hi = fmax(bm[0], bm[1]);
        near(json_number_value(json_object_get(fig, "median")), med(bm, 2), "median");
        near(json_number_value(json_object_get(fig, "min")), lo, "min");
        near(json_number_value(json_object_get(fig, "max")), hi, "max");
        checked++;
    }
    ASSERT_TRUE(checked + allocs_none >= 2 * 9);
    ASSERT_TRUE(allocs_none <= 2 * 2 * 2); /* at most the two metrics of each case and compared arm */
    ASSERT_EQ(zz, 2 * 3);                  /* requests, round trips, network bytes: 0 in both on embedded */
    ASSERT_EQ(undefined, 2 * 2);           /* mapped requests (0 for ordinary), record loads (0 for remote) */
}

TEST(campaign_1_3_arms_alternate) {
    run *r = normal();
    for (int k = 0; k < 2; k++) {
        json_t *c = find_case(r->results, cases[k]), *p;
        size_t i;
        int last_seq = 0;
        const char *want[2][3] = {{"ordinary", "remote", "sqlite"}, {"sqlite", "remote", "ordinary"}};
        json_array_foreach(json_object_get(c, "processes"), i, p) {
            int b = (int)json_integer_value(json_object_get(p, "block")),
                pos = (int)json_integer_value(json_object_get(p, "position"));
            int seq = (int)json_integer_value(json_object_get(p, "seq"));
            ASSERT_TRUE(seq > last_seq); /* listed in the order they ran */
            last_seq = seq;
            ASSERT_EQ(b, (int)i / 3 + 1);
            ASSERT_EQ(pos, (int)i % 3 + 1);
            ASSERT_STR_EQ(jstr(p, "arm"), want[b - 1][pos - 1]);
        }
        ASSERT_EQ(i, 6);
    }
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r->results, "samples"), i, s) {
        int b = (int)json_integer_value(json_object_get(s, "block")),
            pos = (int)json_integer_value(json_object_get(s, "position"));
        const char *want = b == 1 ? (pos == 1   ? "ordinary"
                                     : pos == 2 ? "remote"
                                                : "sqlite")
                                  : (pos == 1   ? "sqlite"
                                     : pos == 2 ? "remote"
                                                : "ordinary");
        ASSERT_STR_EQ(jstr(s, "arm"), want);
    }
}

/* campaign_1_4: the adaptive arm is available, runs in every block with the rows of
 * the others, and the summary compares it with the better of ordinary and remote per block. */
TEST(campaign_1_4_adaptive_arm) {
    run r;
    run_tiny_arms(&r, "campaign-c", ARMS_ADAPTIVE, "1", 0);
    if (r.exit_code != 0) fail_msg("exit %d: %s", r.exit_code, r.stderr_text);
    json_t *d, *s, *emb = json_array_get(json_object_get(r.results, "topologies"), 0);
    size_t i;
    int n_adaptive = 0, n_best = 0;
    ASSERT_STR_EQ(jstr(emb, "status"), "ran");
    ASSERT_EQ(json_array_size(json_object_get(emb, "arms")), 3);
    json_array_foreach(json_object_get(emb, "arms"), i, d) ASSERT_TRUE(json_is_true(json_object_get(d, "available")));
    json_array_foreach(json_object_get(emb, "rows_check"), i, d) ASSERT_TRUE(json_is_true(json_object_get(d, "agree")));
    json_array_foreach(json_object_get(r.results, "samples"), i, s) {
        if (strcmp(jstr(s, "arm"), "adaptive")) continue;
        n_adaptive++;
        ASSERT_TRUE(json_number_value(json_object_get(s, "ns_per_op")) > 0);
        int k = !strcmp(jstr(s, "case"), cases[0]) ? 0 : 1;
        ASSERT_TRUE(json_number_value(json_object_get(s, "rows_per_op")) == (k == 0 ? 10 : 1));
    }
    ASSERT_EQ(n_adaptive, 2 * 2); /* two cases, two blocks, one repeat */
    json_array_foreach(json_object_get(r.results, "summary"), i, s) {
        if (strcmp(jstr(s, "arm"), "adaptive") || strcmp(jstr(s, "metric"), "ns_per_op")) continue;
        ASSERT_STR_EQ(jstr(s, "baseline"), "best");
        ASSERT_STR_EQ(jstr(s, "status"), "ok");
        ASSERT_TRUE(json_number_value(json_object_get(s, "ratio")) > 0);
        n_best++;
    }
    ASSERT_EQ(n_best, 2);
    /* scripts/adaptive-decompose.py reads the compressed results and takes both cases apart. */
    if (access("/usr/bin/python3", X_OK) == 0) {
        char cmd[1400], line[512];
        rl_buf out;
        rl__buf_init(&out);
        snprintf(cmd, sizeof cmd, "python3 '%s/../../scripts/adaptive-decompose.py' '%s' 2>&1", RL_TEST_DATA_DIR,
                 r.out);
        FILE *p = popen(cmd, "r");
        ASSERT_NOT_NULL(p);
        while (fgets(line, sizeof line, p)) rl__buf_append_str(&out, line);
        int st = pclose(p);
        if (st != 0) fail_msg("%s: status %d: %s", cmd, st, out.data);
        ASSERT_NOT_NULL(strstr((const char *)out.data, "| small-rows10-forward | "));
        ASSERT_NOT_NULL(strstr((const char *)out.data, "| split-limit1-reverse | "));
        ASSERT_NOT_NULL(strstr((const char *)out.data, "of 2 cases"));
        rl__buf_release(&out);
    } else {
        printf("scripts/adaptive-decompose.py not run: no /usr/bin/python3\n");
    }
    run_free(&r);
}

/* campaign_1_5: the results file of the normal run is compressed, and decodes to what an
 * uncompressed write prints; the reader takes both forms to the same document. */
TEST(campaign_1_5_results_compressed) {
    run *r = normal();
    char path[1200], plain[1000];
    size_t zlen;
    snprintf(path, sizeof path, "%s/results.json", r->out);
    ASSERT_NE(access(path, F_OK), 0); /* no uncompressed copy */
    snprintf(path, sizeof path, "%s/%s", r->out, RL_CAMP_RESULTS_NAME);
    char *z = slurp_n(path, &zlen);
    ASSERT_NOT_NULL(z);
    /* One zstd frame recording its size, whose content is the JSON an uncompressed write prints. */
    ASSERT_EQ(ZSTD_findFrameCompressedSize(z, zlen), zlen);
    unsigned long long n = ZSTD_getFrameContentSize(z, zlen);
    ASSERT_TRUE(n != ZSTD_CONTENTSIZE_UNKNOWN && n != ZSTD_CONTENTSIZE_ERROR);
    char *text = malloc((size_t)n + 1);
    ASSERT_NOT_NULL(text);
    ASSERT_EQ(ZSTD_decompress(text, (size_t)n, z, zlen), (size_t)n);
    text[n] = 0;
    char *dumped = json_dumps(r->results, RL_CAMP_RESULTS_JSON_FLAGS);
    ASSERT_NOT_NULL(dumped);
    ASSERT_EQ(strlen(dumped), (size_t)n);
    ASSERT_TRUE(!memcmp(dumped, text, (size_t)n));
    ASSERT_TRUE(zlen * 4 < (size_t)n); /* it is worth it */
    /* The same JSON written plainly (as before compression) reads to the same document, from the
     * directory and from the file. */
    snprintf(plain, sizeof plain, "%s/plain", r->dir);
    ASSERT_EQ(mkdir(plain, 0755), 0);
    snprintf(path, sizeof path, "%s/results.json", plain);
    FILE *f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    ASSERT_EQ(fwrite(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    rl__errdetail msg;
    rl__errdetail_init(&msg, NULL);
    const char *from[3] = {plain, path, NULL};
    char zpath[1200];
    snprintf(zpath, sizeof zpath, "%s/%s", r->out, RL_CAMP_RESULTS_NAME);
    from[2] = zpath;
    for (int i = 0; i < 3; i++) {
        json_t *doc = NULL;
        if (rl__camp_results_load(from[i], &doc, &msg)) fail_msg("%s: %s", from[i], rl__errdetail_get(&msg));
        ASSERT_TRUE(json_equal(doc, r->results));
        json_decref(doc);
    }
    free(dumped);
    free(text);
    free(z);
}

/* ---- Failures reported ---------------------------------------------------------------------- */

static run *broken(void) {
    if (!have_b) {
        setenv("RL_CAMPAIGN_TEST_BREAK_RECEIPT", "split-limit1-reverse", 1);
        setenv("RL_CAMPAIGN_TEST_FAIL_WORKER", "small-rows10-forward/remote/2", 1);
        run_tiny(&run_b, "campaign-b", "0.02", 1);
        unsetenv("RL_CAMPAIGN_TEST_BREAK_RECEIPT");
        unsetenv("RL_CAMPAIGN_TEST_FAIL_WORKER");
        have_b = 1;
    }
    return &run_b;
}

TEST(campaign_2_1_contaminated_labelled) {
    run *r = broken();
    for (int k = 0; k < 2; k++) {
        json_t *c = find_case(r->results, cases[k]), *cpu = json_object_get(json_object_get(c, "checks"), "cpu");
        ASSERT_STR_EQ(jstr(c, "label"), "contaminated");
        ASSERT_TRUE(json_number_value(json_object_get(cpu, "other_fraction")) > 0.02);
        ASSERT_TRUE(json_number_value(json_object_get(cpu, "other_cpu_seconds")) > 0);
    }
    /* Kept: its samples and summary are there. */
    ASSERT_EQ(json_array_size(json_object_get(r->results, "samples")), 2 * 3 * 2 - 1);
    ASSERT_TRUE(json_array_size(json_object_get(r->results, "summary")) > 0);
    ASSERT_NOT_NULL(strstr(r->report, "| split-limit1-reverse | contaminated |"));
    ASSERT_NOT_NULL(strstr(r->report, "2 of 2 cases are contaminated"));
    ASSERT_NOT_NULL(strstr(r->stdout_text, "contaminated"));
    /* Marked on the plots (the data's flag column, the script's marker) and in report.html. */
    char path[1000];
    snprintf(path, sizeof path, "%s/plots/ratios-embedded.dat", r->out);
    char *dat = slurp(path);
    ASSERT_NOT_NULL(dat);
    ASSERT_NOT_NULL(strstr(dat, "0 small-rows10-forward "));
    ASSERT_NOT_NULL(strstr(dat, " 1 ? ? ?\n")); /* contaminated, no reference figure on embedded */
    free(dat);
    snprintf(path, sizeof path, "%s/plots/plots-embedded-svg.gp", r->out);
    char *gp = slurp(path);
    ASSERT_NOT_NULL(gp);
    ASSERT_NOT_NULL(strstr(gp, "title 'contaminated case'"));
    free(gp);
    snprintf(path, sizeof path, "%s/report.html", r->out);
    char *html = slurp(path);
    ASSERT_NOT_NULL(html);
    ASSERT_NOT_NULL(strstr(html, "<tr class=\"contaminated\"><td>split-limit1-reverse</td>"));
    free(html);
}

TEST(campaign_2_2_failed_receipt_reported) {
    run *r = broken();
    ASSERT_EQ(r->exit_code, 1);
    ASSERT_FALSE(json_is_true(json_object_get(r->results, "ok")));
    json_t *bad = find_case(r->results, "split-limit1-reverse"), *good = find_case(r->results, "small-rows10-forward");
    ASSERT_FALSE(json_is_true(json_object_get(json_object_get(bad, "checks"), "receipts_equal")));
    ASSERT_TRUE(json_is_true(json_object_get(json_object_get(good, "checks"), "receipts_equal")));
    size_t i;
    json_t *f;
    int found = 0;
    json_array_foreach(json_object_get(r->results, "failures"), i, f) {
        if (!strcmp(jstr(f, "what"), "receipt")) {
            ASSERT_STR_EQ(jstr(f, "case"), "split-limit1-reverse");
            ASSERT_STR_EQ(jstr(f, "kind"), "check");
            found++;
        }
    }
    ASSERT_EQ(found, 1);
    ASSERT_NOT_NULL(strstr(r->report, "**NO (failed)**"));
    ASSERT_NOT_NULL(strstr(r->report, "- receipt (check) embedded split-limit1-reverse"));
    ASSERT_NOT_NULL(strstr(r->stderr_text, "FAILED receipt"));
}

TEST(campaign_2_3_failed_process_reported) {
    run *r = broken();
    json_t *c = find_case(r->results, "small-rows10-forward"), *p, *f, *s;
    size_t i;
    int failed = 0;
    json_array_foreach(json_object_get(c, "processes"), i, p) {
        if (json_is_true(json_object_get(p, "ok"))) continue;
        failed++;
        ASSERT_STR_EQ(jstr(p, "arm"), "remote");
        ASSERT_EQ(json_integer_value(json_object_get(p, "block")), 2);
        ASSERT_NOT_NULL(strstr(jstr(p, "error"), "bad_url"));
    }
    ASSERT_EQ(failed, 1);
    int named = 0;
    json_array_foreach(json_object_get(r->results, "failures"), i, f) named +=
        !strcmp(jstr(f, "what"), "process") && !strcmp(jstr(f, "case"), "small-rows10-forward");
    ASSERT_EQ(named, 1);
    json_array_foreach(json_object_get(r->results, "summary"), i, s) {
        if (strcmp(jstr(s, "case"), "small-rows10-forward") || strcmp(jstr(s, "comparison"), "remote/ordinary"))
            continue;
        ASSERT_EQ(json_integer_value(json_object_get(s, "n_blocks")), 1);
    }
    ASSERT_EQ(json_integer_value(json_object_get(r->results, "failed_processes")), 1);
}

TEST(campaign_3_1_command_line) {
    char *out = NULL, *err = NULL;
    ASSERT_EQ(rl_test_run("rlbench", &out, &err, "campaign --print-protocol"), 0);
    json_t *p = json_loads(out, 0, NULL);
    ASSERT_NOT_NULL(p);
    ASSERT_EQ(json_array_size(json_object_get(p, "cases")), 16);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(p, "design"), "blocks")), 6);
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(p, "statistics"), "resamples")), 20000);
    json_decref(p);
    free(out), free(err);
    ASSERT_EQ(rl_test_run("rlbench", &out, &err, "campaign --print-protocol --quick"), 0);
    p = json_loads(out, 0, NULL);
    ASSERT_NOT_NULL(p);
    ASSERT_EQ(json_array_size(json_object_get(p, "topologies")), 2); /* embedded, single 250 us */
    ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(json_object_get(p, "topologies"), 1), "kind")),
                  "single");
    ASSERT_EQ(json_integer_value(json_object_get(json_array_get(json_object_get(p, "topologies"), 1), "delay_us")),
              250);
    json_decref(p);
    free(out), free(err);
    char *dir = rl_test_tmpdir("campaign-cli"), cmd[1200];
    snprintf(cmd, sizeof cmd, "%s/p.json", dir);
    FILE *f = fopen(cmd, "w");
    fprintf(f, "{\"design\": {\"blocks\": 0}}");
    fclose(f);
    ASSERT_EQ(rl_test_run("rlbench", &out, &err, "campaign --protocol '%s/p.json' --out '%s/o'", dir, dir), 2);
    ASSERT_NOT_NULL(strstr(err, "design.blocks: 0 is out of range [1, 100]"));
    free(out), free(err);
    ASSERT_EQ(rl_test_run("rlbench", &out, &err, "campaign --protocol '%s/missing.json' --out '%s/o'", dir, dir), 1);
    ASSERT_NOT_NULL(strstr(err, "cannot open"));
    free(out), free(err);
    /* A non-empty --out is refused before anything runs. */
    ASSERT_EQ(rl_test_run("rlbench", &out, &err, "campaign --quick --out '%s'", dir), 1);
    ASSERT_NOT_NULL(strstr(err, "is not empty"));
    free(out), free(err);
    const char *usage[] = {"campaign --quick --protocol x.json --out o", "campaign --print-protocol --out o",
                           "campaign --quick", "campaign --bogus", "campaign-worker --url mem: --store '[\"a\"]'"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        ASSERT_EQ(rl_test_run("rlbench", &out, &err, "%s", usage[i]), 2);
        ASSERT_EQ(strlen(out), 0);
        free(out), free(err);
    }
    rl_test_rmtree(dir);
    free(dir);
}

/* Remove both runs' directories after the group. */
static int teardown(void **state) {
    (void)state;
    if (have_a) run_free(&run_a);
    if (have_b) run_free(&run_b);
    return 0;
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {T(campaign_1_1_results_complete),
                                       T(campaign_1_2_summary_recomputed),
                                       T(campaign_1_3_arms_alternate),
                                       T(campaign_1_4_adaptive_arm),
                                       T(campaign_1_5_results_compressed),
                                       T(campaign_2_1_contaminated_labelled),
                                       T(campaign_2_2_failed_receipt_reported),
                                       T(campaign_2_3_failed_process_reported),
                                       T(campaign_3_1_command_line)};
    rl_test_init(argc, argv);
    int rc = cmocka_run_group_tests_name(rl_test_group_name(argv[0]), tests, NULL, teardown);
    return rc;
}
