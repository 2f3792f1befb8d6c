/* campaign_run.c — the campaign runner (rl__camp_run, campaign.h): the design loop, the checks
 * around every case, the workers, progress with the time left, the summary, and the outputs.
 *
 * Order of a run:
 *   1. DIR is made (it must be absent or empty); the protocol's SHA-256 is taken of its exact bytes.
 *   2. Per topology (in protocol order): `available`, else recorded as not available and skipped.
 *      `up`; every dataset the cases need is loaded once, checked (integrity_ok must be true), the
 *      SQLite peer made (embedded, when the sqlite arm is listed); `place`; the three defect
 *      controls. A topology whose data failed a check is not timed (recorded as such).
 *   3. The rows check: each listed arm runs each case once in this process; an arm refused with
 *      unsupported_operation is "not available" (adaptive today); the others must return the same
 *      rows in the same order (compared by a hash of the order_ids).
 *   4. Per case: the RTT probe and the placement receipt before; CPU counters; for each block the
 *      available arms in the block's order (rl__camp_arm_order), each in a fresh worker process; the
 *      CPU counters, the receipt and the RTT probe after; the receipts compared; the case labelled
 *      clean or contaminated; its summary.
 *   5. The restoration probe; `down`; DIR/data/NAME removed unless keep_data.
 *   6. plots/, results.json.zst (report_results.c), samples.csv and summary.csv (report_csv.c),
 *      manifest.json, report.md and report.html (report.c, report_html.c); the main table to o->out.
 * A failed check or process is recorded in the results ("failures", and at its place) and in the
 * report, and makes the run's result an error; nothing that ran is dropped.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/sha256.h"
#include "bench/campaign_int.h"
#include "bench/campaign_proc.h"
#include "bench/scratch.h"
#include "bench/stats.h"

/* The figures of one worker process. */
typedef struct {
    int ok;                                         /* every repeat arrived and the process exited 0 */
    int n;                                          /* repeats parsed */
    double v[RL_CAMP_MAX_REPEATS][RL_CAMP_METRICS]; /* NaN: not measured (SQLite's allocations
                                                       * when its allocator could not be wrapped) */
} proc_result;

/* The comparisons of the summary: arm / baseline (best: the smallest of ordinary, remote and, where
 * it runs, remote-grouped — the arms ADAPTIVE chooses among: it reads with grouped secondaries,
 * campaign_ops.c). */
typedef struct {
    const char *name;
    rl__camp_arm arm;
    rl__camp_arm base;
    int best;        /* baseline is min(ordinary, remote[, remote-grouped]) per block and metric */
    int all_metrics; /* 0: time, bytes, allocations and rows only (the SQLite peer) */
} comparison;

/* Besides the baseline (ordinary), the arms "best" takes the smaller of, where they run (remote
 * must: the comparison is skipped without it). */
static const rl__camp_arm best_also[2] = {RL_CAMP_REMOTE, RL_CAMP_REMOTE_GROUPED};

static const comparison comparisons[RL_CAMP_COMPARISONS] = {
    {"remote/ordinary", RL_CAMP_REMOTE, RL_CAMP_ORDINARY, 0, 1},
    {"remote-grouped/ordinary", RL_CAMP_REMOTE_GROUPED, RL_CAMP_ORDINARY, 0, 1},
    {"adaptive/best", RL_CAMP_ADAPTIVE, RL_CAMP_ORDINARY, 1, 1},
    {"sqlite/ordinary", RL_CAMP_SQLITE, RL_CAMP_ORDINARY, 0, 0},
};

typedef struct {
    const rl__camp_run_options *o;
    const rl__camp_protocol *p;
    char self[RL_CAMP_PATH_MAX];
    json_t *root, *topos, *cases, *samples, *summary, *arm_summary, *failures, *throughput;
    int failed_checks, failed_procs;
    int total, done, seq;            /* processes planned in the whole run (estimate), run, sequence number */
    int est[RL_CAMP_MAX_TOPOLOGIES]; /* each topology's share of total before its plan is known */
    double t0, proc_s;               /* start; seconds spent in workers */
    double t_first;                  /* when the first worker started (0: none yet): the rate of the ETA */
    FILE *progress;
} run_ctx;

static double now_s(void) { return (double)rl__clock_mono_ns() / 1e9; }

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static void utc_now(char *buf, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void fmt_dur(double s, char *buf, size_t cap) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
}

static void progress(run_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(run_ctx *c, const char *fmt, ...) {
    va_list ap;
    if (!c->progress) return;
    va_start(ap, fmt);
    fprintf(c->progress, "campaign: ");
    vfprintf(c->progress, fmt, ap);
    fprintf(c->progress, "\n");
    fflush(c->progress);
    va_end(ap);
}

/* Record a failure (what: "integrity", "defect-control", "receipt", "rows", "process", "load", ...). */
static void add_failure(run_ctx *c, int is_check, const char *what, const char *topo, const char *kase, const char *fmt,
                        ...) __attribute__((format(printf, 6, 7)));
static void add_failure(run_ctx *c, int is_check, const char *what, const char *topo, const char *kase, const char *fmt,
                        ...) {
    char detail[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_t *f = json_pack("{s:s, s:s, s:s}", "what", what, "kind", is_check ? "check" : "process", "detail", detail);
    if (topo) json_object_set_new(f, "topology", json_string(topo));
    if (kase) json_object_set_new(f, "case", json_string(kase));
    json_array_append_new(c->failures, f);
    if (is_check) c->failed_checks++;
    else c->failed_procs++;
    progress(c, "FAILED %s%s%s%s%s: %s", what, topo ? " " : "", topo ? topo : "", kase ? " " : "", kase ? kase : "",
             detail);
}

/* ---- The output directory ---------------------------------------------------------------------- */

static int prepare_out(const char *dir, rl__errdetail *err) {
    struct stat st;
    char path[RL_CAMP_PATH_MAX];
    if (strlen(dir) > RL_CAMP_DIR_MAX - 100) {
        rl__errdetail_append(err, "--out: the path is longer than %d bytes", RL_CAMP_DIR_MAX - 100);
        return RL_E_INVALID_ARGUMENT;
    }
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            rl__errdetail_append(err, "--out: %s is not a directory", dir);
            return RL_E_INVALID_ARGUMENT;
        }
        DIR *d = opendir(dir);
        if (!d) {
            rl__errdetail_append(err, "--out: cannot read %s: %s", dir, strerror(errno));
            return RL_E_IO_ERROR;
        }
        struct dirent *e;
        int empty = 1;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
        closedir(d);
        if (!empty) {
            rl__errdetail_append(err, "--out: %s is not empty (a campaign writes only into a new or empty directory)",
                                 dir);
            return RL_E_ALREADY_EXISTS;
        }
    } else if (mkdir(dir, 0755) != 0) {
        rl__errdetail_append(err, "--out: cannot create %s: %s", dir, strerror(errno));
        return errno == ENOENT ? RL_E_FILE_NOT_FOUND : RL_E_IO_ERROR;
    }
    const char *subs[] = {"data", "plots"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, subs[i]);
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            rl__errdetail_append(err, "cannot create %s: %s", path, strerror(errno));
            return RL_E_IO_ERROR;
        }
    }
    return RL_OK;
}

/* ---- Workers ----------------------------------------------------------------------------------- */

/* Run one worker and parse its lines into r; append its samples and return its process record. */
static json_t *run_worker(run_ctx *c, rl__camp_topo *tp, const rl__camp_case *k, rl__camp_arm arm, int block, int pos,
                          proc_result *r) {
    const rl__camp_protocol *p = c->p;
    char reps[16], secs[32], warm[32], depth[16], hook[128];
    const char *url = tp->query_url[k->variant];
    snprintf(hook, sizeof hook, "%s/%s/%d", k->name, rl__camp_arm_name(arm), block + 1);
    if (c->o->test_fail_worker && !strcmp(c->o->test_fail_worker, hook)) url = "bad-url-for-a-test:";
    snprintf(reps, sizeof reps, "%d", p->repeats);
    snprintf(secs, sizeof secs, "%.17g", p->seconds);
    snprintf(warm, sizeof warm, "%.17g", p->warmup_seconds);
    snprintf(depth, sizeof depth, "%d", p->pipeline_depth);
    char *argv[24];
    int n = 0;
    argv[n++] = c->self;
    argv[n++] = "campaign-worker";
    argv[n++] = "--url", argv[n++] = (char *)url;
    argv[n++] = "--store", argv[n++] = tp->store[k->variant];
    argv[n++] = "--case", argv[n++] = (char *)k->name;
    argv[n++] = "--arm", argv[n++] = (char *)rl__camp_arm_name(arm);
    argv[n++] = "--repeats", argv[n++] = reps;
    argv[n++] = "--seconds", argv[n++] = secs;
    argv[n++] = "--warmup", argv[n++] = warm;
    argv[n++] = "--pipeline-depth", argv[n++] = depth;
    if (arm == RL_CAMP_SQLITE) argv[n++] = "--sqlite", argv[n++] = tp->sqlite[k->variant];
    argv[n] = NULL;

    rl__camp_child ch;
    rl__camp_cpu a, b;
    rl__camp_cpu_use use;
    rl__errdetail err;
    rl__errdetail why; /* what failed, for the report */
    rl__errdetail_init(&err, NULL);
    rl__errdetail_init(&why, NULL);
    memset(r, 0, sizeof *r);
    int seq = ++c->seq, done = 0;
    double open_s = NAN;
    if (c->t_first == 0) c->t_first = now_s();
    rl__camp_cpu_snapshot(tp->pids, tp->n_pids, &a);
    int rc = rl__camp_child_run(argv, rl__camp_process_timeout(p), &ch, &err);
    rl__camp_cpu_snapshot(tp->pids, tp->n_pids, &b);
    rl__camp_cpu_between(&a, &b, &use);
    if (rc) {
        rl__errdetail_append(&why, "%s", rl__errdetail_get(&err));
    } else {
        /* One JSON object per line. */
        char *line = (char *)ch.out.data, *end;
        for (; *line; line = end + (*end != 0)) {
            end = strchr(line, '\n');
            if (!end) end = line + strlen(line);
            json_error_t jerr;
            json_t *o = json_loadb(line, (size_t)(end - line), 0, &jerr);
            if (!o) {
                if (end > line && !rl__errdetail_len(&why))
                    rl__errdetail_append(&why, "unreadable line from the worker: %.200s", line);
                continue;
            }
            if (json_object_get(o, "error") && !rl__errdetail_len(&why)) {
                rl__errdetail_append(&why, "%s: %s", json_string_value(json_object_get(o, "error")),
                                     json_string_value(json_object_get(o, "message")));
            } else if (json_object_get(o, "repeat") && r->n < RL_CAMP_MAX_REPEATS) {
                json_t *s = json_pack("{s:s, s:s, s:s, s:i, s:O, s:i, s:i}", "topology", tp->t->name, "case", k->name,
                                      "arm", rl__camp_arm_name(arm), "block", block + 1, "repeat",
                                      json_object_get(o, "repeat"), "position", pos + 1, "seq", seq);
                json_object_set(s, "ops", json_object_get(o, "ops"));
                json_object_set(s, "seconds", json_object_get(o, "seconds"));
                int complete = 1;
                for (int m = 0; m < RL_CAMP_METRICS; m++) {
                    json_t *v = json_object_get(o, rl__camp_metric_name((rl__camp_metric)m));
                    complete &= v != NULL && (json_is_number(v) || json_is_null(v));
                    r->v[r->n][m] = v && json_is_number(v) ? json_number_value(v) : NAN;
                    json_object_set_new(s, rl__camp_metric_name((rl__camp_metric)m), jnum(r->v[r->n][m]));
                }
                json_object_set(s, "rows_hash", json_object_get(o, "rows_hash"));
                json_object_set(s, "last_rows", json_object_get(o, "last_rows"));
                if (!complete && !rl__errdetail_len(&why)) rl__errdetail_append(&why, "a repeat line lacks a metric");
                json_array_append_new(c->samples, s);
                r->n++;
            } else if (json_object_get(o, "done")) {
                done = 1;
                open_s = json_number_value(json_object_get(o, "open_seconds"));
            }
            json_decref(o);
        }
        if (!rl__errdetail_len(&why) && ch.timed_out)
            rl__errdetail_append(&why, "still running after %.0f s: killed", rl__camp_process_timeout(p));
        if (!rl__errdetail_len(&why) && ch.exit_code != 0)
            rl__errdetail_append(&why, "exit code %d (signal %d): %.500s", ch.exit_code, ch.signal, ch.err.data);
        if (!rl__errdetail_len(&why) && (r->n != p->repeats || !done))
            rl__errdetail_append(&why, "%d of %d repeats%s", r->n, p->repeats, done ? "" : ", no end line");
    }
    r->ok = !rl__errdetail_len(&why);
    /* Hash check input: the rows hash of every repeat is compared by the caller from samples. */
    json_t *proc =
        json_pack("{s:i, s:s, s:i, s:i, s:i, s:f, s:b, s:b}", "block", block + 1, "arm", rl__camp_arm_name(arm),
                  "position", pos + 1, "seq", seq, "exit_code", rc ? -1 : ch.exit_code, "wall_seconds",
                  rc ? 0.0 : ch.wall_s, "timed_out", rc ? 0 : ch.timed_out, "ok", r->ok);
    json_object_set_new(proc, "open_seconds", jnum(open_s));
    json_object_set_new(proc, "other_cpu_fraction", use.ok ? jnum(use.other_fraction) : json_null());
    json_object_set_new(proc, "error", rl__errdetail_len(&why) ? json_string(rl__errdetail_get(&why)) : json_null());
    if (!r->ok) {
        json_object_set_new(proc, "stderr", json_string(rc ? "" : rl__camp_str(&ch.err)));
        add_failure(c, 0, "process", tp->t->name, k->name, "block %d %s: %s", block + 1, rl__camp_arm_name(arm),
                    rl__errdetail_get(&why));
    }
    c->proc_s += rc ? 0 : ch.wall_s;
    rl__camp_child_release(&ch);
    return proc;
}

/* ---- The summary of a case --------------------------------------------------------------------- */

/* The median of process r's repeats for metric m (NaN if it did not run). */
static double proc_median(const proc_result *r, int m) {
    double v[RL_CAMP_MAX_REPEATS], tmp[RL_CAMP_MAX_REPEATS];
    if (!r->ok || r->n == 0) return NAN;
    for (int i = 0; i < r->n; i++) v[i] = r->v[i][m];
    for (int i = 0; i < r->n; i++)
        if (isnan(v[i])) return NAN;
    return rl__stats_median(v, (size_t)r->n, tmp);
}

/* {"median", "min", "max", "n_samples"} of arm a for metric m over the blocks. */
static json_t *arm_figures(const rl__camp_protocol *p, proc_result (*res)[RL_CAMP_ARM_KINDS], rl__camp_arm a, int m) {
    double med[RL_CAMP_MAX_BLOCKS], tmp[RL_CAMP_MAX_BLOCKS], lo = NAN, hi = NAN;
    int nb = 0, ns = 0;
    for (int b = 0; b < p->blocks; b++) {
        const proc_result *r = &res[b][a];
        double x = proc_median(r, m);
        if (!isnan(x)) med[nb++] = x;
        for (int i = 0; r->ok && i < r->n; i++) {
            double v = r->v[i][m];
            if (isnan(v)) continue;
            lo = ns == 0 || v < lo ? v : lo;
            hi = ns == 0 || v > hi ? v : hi;
            ns++;
        }
    }
    json_t *o = json_object();
    json_object_set_new(o, "median", jnum(nb ? rl__stats_median(med, (size_t)nb, tmp) : NAN));
    json_object_set_new(o, "min", jnum(lo));
    json_object_set_new(o, "max", jnum(hi));
    json_object_set_new(o, "n_blocks", json_integer(nb));
    json_object_set_new(o, "n_samples", json_integer(ns));
    return o;
}

static const char *status_name(rl__stats_ratio_status s) {
    return s == RL_STATS_RATIO_OK ? "ok" : s == RL_STATS_RATIO_ZERO_ZERO ? "zero_zero" : "undefined";
}

/* Append the case's summary entries (comparisons x metrics) and per-arm figures. */
static int summarise_case(run_ctx *c, const rl__camp_topology *t, const rl__camp_case *k, const int *runs,
                          proc_result (*res)[RL_CAMP_ARM_KINDS]) {
    const rl__camp_protocol *p = c->p;
    for (int a = 0; a < RL_CAMP_ARM_KINDS; a++) {
        if (!runs[a]) continue;
        json_t *o = json_pack("{s:s, s:s, s:s}", "topology", t->name, "case", k->name, "arm", rl__camp_arm_name(a));
        json_t *ms = json_object();
        for (int m = 0; m < RL_CAMP_METRICS; m++)
            json_object_set_new(ms, rl__camp_metric_name((rl__camp_metric)m), arm_figures(p, res, (rl__camp_arm)a, m));
        json_object_set_new(o, "metrics", ms);
        json_array_append_new(c->arm_summary, o);
    }
    for (int ci = 0; ci < RL_CAMP_COMPARISONS; ci++) {
        const comparison *cmp = &comparisons[ci];
        if (!runs[cmp->arm] || !runs[cmp->base] || (cmp->best && !runs[RL_CAMP_REMOTE])) continue;
        for (int m = 0; m < RL_CAMP_METRICS; m++) {
            if (!cmp->all_metrics && m > RL_CAMP_M_ROWS) continue;
            double num[RL_CAMP_MAX_BLOCKS], den[RL_CAMP_MAX_BLOCKS], br[RL_CAMP_MAX_BLOCKS];
            int blk[RL_CAMP_MAX_BLOCKS], nb = 0;
            for (int b = 0; b < p->blocks; b++) {
                const proc_result *x = &res[b][cmp->arm], *y = &res[b][cmp->base];
                int ok = x->ok && y->ok;
                for (int i = 0; cmp->best && i < 2; i++) ok &= !runs[best_also[i]] || res[b][best_also[i]].ok;
                if (!ok) continue;
                num[nb] = proc_median(x, m);
                den[nb] = proc_median(y, m);
                for (int i = 0; cmp->best && i < 2; i++) {
                    double r2 = runs[best_also[i]] ? proc_median(&res[b][best_also[i]], m) : den[nb];
                    den[nb] = r2 < den[nb] ? r2 : den[nb];
                }
                blk[nb++] = b + 1;
            }
            rl__stats_summary s;
            int rc = rl__stats_summarise(num, den, (size_t)nb, p->resamples, p->bootstrap_seed, p->level, br, &s);
            if (rc) return rc;
            json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "topology", t->name, "case", k->name, "comparison",
                                  cmp->name, "arm", rl__camp_arm_name(cmp->arm), "baseline",
                                  cmp->best ? "best" : rl__camp_arm_name(cmp->base), "metric",
                                  rl__camp_metric_name((rl__camp_metric)m));
            json_object_set_new(o, "ratio", jnum(s.ratio));
            json_object_set_new(o, "ci_low", jnum(s.ci_low));
            json_object_set_new(o, "ci_high", jnum(s.ci_high));
            json_object_set_new(o, "status", json_string(status_name(s.status)));
            json_object_set_new(o, "n_blocks", json_integer(nb));
            json_t *bl = json_array(), *brs = json_array(), *nums = json_array(), *dens = json_array();
            for (int i = 0; i < nb; i++) {
                json_array_append_new(bl, json_integer(blk[i]));
                json_array_append_new(brs, jnum(br[i]));
                json_array_append_new(nums, jnum(num[i]));
                json_array_append_new(dens, jnum(den[i]));
            }
            json_object_set_new(o, "blocks", bl);
            json_object_set_new(o, "block_ratios", brs);
            json_object_set_new(o, "block_arm_medians", nums);
            json_object_set_new(o, "block_baseline_medians", dens);
            json_t *arms = json_object();
            json_object_set_new(arms, rl__camp_arm_name(cmp->arm), arm_figures(p, res, cmp->arm, m));
            json_object_set_new(arms, rl__camp_arm_name(cmp->base), arm_figures(p, res, cmp->base, m));
            for (int i = 0; cmp->best && i < 2; i++)
                if (runs[best_also[i]])
                    json_object_set_new(arms, rl__camp_arm_name(best_also[i]), arm_figures(p, res, best_also[i], m));
            json_object_set_new(o, "arms", arms);
            json_array_append_new(c->summary, o);
        }
    }
    return RL_OK;
}

/* ---- One case ---------------------------------------------------------------------------------- */

/* Probe with hook fn (rtt or receipt) into a json value; a failed probe is recorded as an object
 * with "error". */
static json_t *probe_rtt(run_ctx *c, rl__camp_topo *tp, const char *kase) {
    json_t *o = NULL;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = tp->ops->rtt(tp, c->p->rtt_pings, &o, &err);
    if (rc) {
        add_failure(c, 1, "rtt", tp->t->name, kase, "%s", rl__errdetail_get(&err));
        o = json_pack("{s:b, s:s}", "applicable", 1, "error", rl__errdetail_get(&err));
    } else if (json_is_false(json_object_get(o, "shows_delay"))) {
        add_failure(c, 1, "rtt", tp->t->name, kase,
                    "the RTT probe does not show the injected delay: p50 %.1f us < %.1f us",
                    json_number_value(json_object_get(o, "p50_us")),
                    json_number_value(json_object_get(o, "expected_min_p50_us")));
    }
    return o;
}

static json_t *probe_receipt(rl__camp_topo *tp, const rl__camp_case *k) {
    json_t *o = NULL;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    int rc = tp->ops->receipt(tp, k->variant, &o, &err);
    if (rc) o = json_pack("{s:s}", "error", rl__errdetail_get(&err));
    return o;
}

/* The case's arms in protocol order that run (available and passed the rows check). */
static int case_arms(const rl__camp_protocol *p, const int *runs, rl__camp_arm *out) {
    int n = 0;
    for (int i = 0; i < p->n_arms; i++)
        if (runs[p->arms[i]]) out[n++] = p->arms[i];
    return n;
}

static void print_eta(run_ctx *c, const char *topo, const rl__camp_case *k, int block, rl__camp_arm arm,
                      const proc_result *r) {
    char el[32], left[32];
    double elapsed = now_s() - c->t0;
    double per = c->done ? (now_s() - c->t_first) / c->done : 0;
    fmt_dur(elapsed, el, sizeof el);
    fmt_dur(per * (c->total > c->done ? c->total - c->done : 0), left, sizeof left);
    double ns = proc_median(r, RL_CAMP_M_NS);
    if (!c->progress) return;
    fprintf(c->progress, "campaign: [%d/%d] %s %s block %d/%d %-8s ", c->done, c->total, topo, k->name, block + 1,
            c->p->blocks, rl__camp_arm_name(arm));
    if (isnan(ns)) fprintf(c->progress, "failed");
    else if (ns >= 1e6) fprintf(c->progress, "%8.3f ms/op", ns / 1e6);
    else fprintf(c->progress, "%8.2f us/op", ns / 1e3);
    fprintf(c->progress, "  elapsed %s, about %s left\n", el, left);
    fflush(c->progress);
}

static int run_case(run_ctx *c, rl__camp_topo *tp, const rl__camp_case *k, const int *runs, const char *rows_hash) {
    const rl__camp_protocol *p = c->p;
    proc_result(*res)[RL_CAMP_ARM_KINDS] = rl__calloc((size_t)p->blocks, sizeof *res);
    rl__camp_arm arms[RL_CAMP_MAX_ARMS], order[RL_CAMP_MAX_ARMS];
    rl__camp_cpu a, b;
    rl__camp_cpu_use use;
    int n_arms = case_arms(p, runs, arms), rc = RL_OK;
    if (!res) return RL_E_OUT_OF_MEMORY;
    json_t *kc = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s}", "topology", tp->t->name, "case", k->name, "variant",
                           rl__camp_variant_name(k->variant), "skip", k->skip, "limit", k->limit, "direction",
                           k->reverse ? "reverse" : "forward");
    json_t *checks = json_object(), *procs = json_array();
    json_object_set_new(checks, "rtt_before", probe_rtt(c, tp, k->name));
    json_t *rb = probe_receipt(tp, k);
    rl__camp_cpu_snapshot(tp->pids, tp->n_pids, &a);
    for (int blk = 0; blk < p->blocks; blk++) {
        rl__camp_arm_order(blk, arms, n_arms, order);
        for (int i = 0; i < n_arms; i++) {
            json_t *pr = run_worker(c, tp, k, order[i], blk, i, &res[blk][order[i]]);
            json_array_append_new(procs, pr);
            c->done++;
            print_eta(c, tp->t->name, k, blk, order[i], &res[blk][order[i]]);
        }
    }
    rl__camp_cpu_snapshot(tp->pids, tp->n_pids, &b);
    rl__camp_cpu_between(&a, &b, &use);
    json_t *ra = probe_receipt(tp, k);
    if (c->o->test_break_receipt && !strcmp(c->o->test_break_receipt, k->name))
        json_object_set_new(ra, "altered_by_test_hook", json_true());
    json_object_set_new(checks, "rtt_after", probe_rtt(c, tp, k->name));
    int equal = !json_object_get(rb, "error") && !json_object_get(ra, "error") && json_equal(rb, ra);
    json_object_set_new(checks, "receipt_before", rb);
    json_object_set_new(checks, "receipt_after", ra);
    json_object_set_new(checks, "receipts_equal", json_boolean(equal));
    if (!equal) add_failure(c, 1, "receipt", tp->t->name, k->name, "the placement receipts before and after differ");
    const char *label = !use.ok                                           ? "unverifiable"
                        : use.other_fraction > p->contamination_threshold ? "contaminated"
                                                                          : "clean";
    json_t *cpu = json_pack("{s:b, s:f, s:f, s:f, s:f, s:i, s:f, s:s}", "ok", use.ok, "wall_seconds", use.wall_s,
                            "busy_cpu_seconds", use.busy_s, "campaign_cpu_seconds", use.campaign_s, "other_cpu_seconds",
                            use.other_s, "cores", use.cores, "threshold", p->contamination_threshold, "label", label);
    json_object_set_new(cpu, "other_fraction", use.ok ? jnum(use.other_fraction) : json_null());
    json_object_set_new(checks, "cpu", cpu);
    /* Every repeat of every worker must have returned the rows of the rows check. */
    int consistent = 1;
    size_t i;
    json_t *s;
    json_array_foreach(c->samples, i, s) {
        if (strcmp(json_string_value(json_object_get(s, "case")), k->name) ||
            strcmp(json_string_value(json_object_get(s, "topology")), tp->t->name))
            continue;
        const char *h = json_string_value(json_object_get(s, "rows_hash"));
        if (!h || strcmp(h, rows_hash)) consistent = 0;
    }
    json_object_set_new(checks, "worker_rows_match", json_boolean(consistent));
    if (!consistent)
        add_failure(c, 1, "rows", tp->t->name, k->name, "a worker returned other rows than the rows check");
    json_object_set_new(kc, "label", json_string(label));
    json_object_set_new(kc, "checks", checks);
    json_object_set_new(kc, "processes", procs);
    json_t *ar = json_array();
    for (int j = 0; j < n_arms; j++) json_array_append_new(ar, json_string(rl__camp_arm_name(arms[j])));
    json_object_set_new(kc, "arms_run", ar);
    rc = summarise_case(c, tp->t, k, runs, res);
    json_array_append_new(c->cases, kc);
    progress(c, "%s %s: receipts %s, CPU of other processes %.1f%% of the machine (%s)", tp->t->name, k->name,
             equal ? "equal" : "DIFFER", use.ok ? 100 * use.other_fraction : 0.0, label);
    rl__free(res);
    return rc;
}

/* ---- The throughput phase ---------------------------------------------------------------------- */

/* The servers' CPU at the window's start and end (rl__camp_children_run's marks). */
typedef struct {
    const rl__camp_topo *tp;
    rl__camp_cpu snap[2];
} tp_marks;

static void tp_at(void *ud, int j) {
    tp_marks *m = ud;
    rl__camp_cpu_snapshot(m->tp->pids, m->tp->n_pids, &m->snap[j]);
}

/* One level: n clients of (case, arm) at once; returns its entry of results' "throughput". */
static json_t *throughput_level(run_ctx *c, rl__camp_topo *tp, const rl__camp_case *k, rl__camp_arm arm, int n) {
    const rl__camp_protocol *p = c->p;
    char secs[32], warm[32], depth[16], start[32];
    const char *url = tp->query_url[k->variant];
    rl__camp_child *ch = rl__calloc((size_t)n, sizeof *ch);
    char ***argvs = rl__calloc((size_t)n, sizeof *argvs);
    uint64_t *hist = rl__calloc(RL_STATS_HIST_BUCKETS, sizeof *hist);
    rl__errdetail err, why;
    tp_marks m;
    rl__errdetail_init(&err, NULL);
    rl__errdetail_init(&why, NULL);
    memset(&m, 0, sizeof m);
    m.tp = tp;
    /* Every client opens and warms up first; the window starts for all at one wall-clock time, far
     * enough ahead for n processes to get there on this machine. */
    double margin = 1.0 + 0.3 * n + p->tp_warmup_seconds;
    if (c->t_first == 0) c->t_first = now_s();
    uint64_t start_us = rl__clock_wall_us() + (uint64_t)(margin * 1e6);
    double marks[2] = {now_s() + margin, now_s() + margin + p->tp_seconds};
    snprintf(secs, sizeof secs, "%.17g", p->tp_seconds);
    snprintf(warm, sizeof warm, "%.17g", p->tp_warmup_seconds);
    snprintf(depth, sizeof depth, "%d", p->pipeline_depth);
    snprintf(start, sizeof start, "%llu", (unsigned long long)start_us);
    json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:f}", "topology", tp->t->name, "case", k->name, "arm",
                          rl__camp_arm_name(arm), "clients", n, "seconds", p->tp_seconds);
    if (!ch || !argvs || !hist) {
        rl__errdetail_append(&why, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char **a = rl__calloc(24, sizeof *a);
        if (!a) {
            rl__errdetail_append(&why, "out of memory");
            goto done;
        }
        int j = 0;
        a[j++] = c->self, a[j++] = "campaign-worker";
        a[j++] = "--url", a[j++] = (char *)url;
        a[j++] = "--store", a[j++] = tp->store[k->variant];
        a[j++] = "--case", a[j++] = (char *)k->name;
        a[j++] = "--arm", a[j++] = (char *)rl__camp_arm_name(arm);
        a[j++] = "--warmup", a[j++] = warm;
        a[j++] = "--pipeline-depth", a[j++] = depth;
        a[j++] = "--throughput-seconds", a[j++] = secs;
        a[j++] = "--start-at-us", a[j++] = start;
        if (arm == RL_CAMP_SQLITE) a[j++] = "--sqlite", a[j++] = tp->sqlite[k->variant];
        argvs[i] = a;
    }
    int rc = rl__camp_children_run(argvs, n, margin + p->tp_seconds + rl__camp_process_timeout(p), marks, 2, tp_at, &m,
                                   ch, &err);
    if (rc) rl__errdetail_append(&why, "%s", rl__errdetail_get(&err));
    double qps = 0, client_cpu = 0, client_cpu_total = 0, late = 0;
    uint64_t ops = 0;
    int ok_clients = 0;
    for (int i = 0; i < n && !rc; i++) {
        int got = 0, done = 0;
        char *line = (char *)ch[i].out.data, *end;
        for (; *line; line = end + (*end != 0)) {
            end = strchr(line, '\n');
            if (!end) end = line + strlen(line);
            json_t *o = json_loadb(line, (size_t)(end - line), 0, NULL);
            if (!o) continue;
            if (json_object_get(o, "error") && !rl__errdetail_len(&why))
                rl__errdetail_append(&why, "client %d: %s: %s", i + 1, json_string_value(json_object_get(o, "error")),
                                     json_string_value(json_object_get(o, "message")));
            if (json_is_true(json_object_get(o, "throughput"))) {
                uint64_t n_ops = (uint64_t)json_integer_value(json_object_get(o, "ops"));
                double sec = json_number_value(json_object_get(o, "seconds"));
                json_t *cpu = json_object_get(o, "cpu_seconds");
                ops += n_ops;
                qps += sec > 0 ? (double)n_ops / sec : 0;
                client_cpu += json_is_number(cpu) ? json_number_value(cpu) : NAN;
                double l = json_number_value(json_object_get(o, "late_seconds"));
                late = l > late ? l : late;
                size_t hi;
                json_t *b;
                json_array_foreach(json_object_get(o, "hist"), hi, b) {
                    json_int_t bi = json_integer_value(json_array_get(b, 0));
                    if (bi >= 0 && bi < RL_STATS_HIST_BUCKETS)
                        hist[bi] += (uint64_t)json_integer_value(json_array_get(b, 1));
                }
                got = 1;
            }
            if (json_is_true(json_object_get(o, "done"))) done = 1;
            json_decref(o);
        }
        client_cpu_total += ch[i].cpu_s;
        if (!rl__errdetail_len(&why) && ch[i].timed_out)
            rl__errdetail_append(&why, "client %d still running at its deadline: killed", i + 1);
        if (!rl__errdetail_len(&why) && (ch[i].exit_code != 0 || !got || !done))
            rl__errdetail_append(&why, "client %d: exit code %d (signal %d): %.300s", i + 1, ch[i].exit_code,
                                 ch[i].signal, rl__camp_str(&ch[i].err));
        ok_clients += got && done && ch[i].exit_code == 0;
    }
    long hz = sysconf(_SC_CLK_TCK);
    int srv_ok = tp->n_pids > 0 && m.snap[0].ok && m.snap[1].ok && hz > 0;
    double server_cpu = srv_ok ? (double)(m.snap[1].others_owned - m.snap[0].others_owned) / (double)hz : NAN;
    json_object_set_new(e, "ok", json_boolean(!rl__errdetail_len(&why) && ok_clients == n));
    json_object_set_new(e, "ops", json_integer((json_int_t)ops));
    json_object_set_new(e, "queries_per_second", jnum(qps));
    json_object_set_new(e, "p50_ns", jnum(rl__stats_hist_quantile(hist, 0.50)));
    json_object_set_new(e, "p99_ns", jnum(rl__stats_hist_quantile(hist, 0.99)));
    json_object_set_new(e, "client_cpu_seconds", jnum(client_cpu));
    json_object_set_new(e, "client_cpu_seconds_per_query", jnum(ops ? client_cpu / (double)ops : NAN));
    json_object_set_new(e, "client_cpu_seconds_lifetime", jnum(client_cpu_total));
    json_object_set_new(e, "server_cpu_seconds", jnum(server_cpu));
    json_object_set_new(e, "server_cpu_seconds_per_query", jnum(ops ? server_cpu / (double)ops : NAN));
    json_object_set_new(e, "servers", json_integer(tp->n_pids));
    json_object_set_new(e, "max_late_seconds", jnum(late));
    if (rl__errdetail_len(&why)) {
        json_object_set_new(e, "error", json_string(rl__errdetail_get(&why)));
        add_failure(c, 0, "throughput", tp->t->name, k->name, "%s, %d clients: %s", rl__camp_arm_name(arm), n,
                    rl__errdetail_get(&why));
    }
done:
    if (!json_object_get(e, "ok")) {
        json_object_set_new(e, "ok", json_false());
        json_object_set_new(e, "error", json_string(rl__errdetail_get(&why)));
        add_failure(c, 0, "throughput", tp->t->name, k->name, "%s", rl__errdetail_get(&why));
    }
    for (int i = 0; ch && argvs && i < n; i++) {
        rl__camp_child_release(&ch[i]);
        rl__free(argvs[i]);
    }
    rl__free(ch);
    rl__free(argvs);
    rl__free(hist);
    return e;
}

/* The throughput phase of a topology: per throughput case, per available arm (protocol order), per
 * client count. */
static void run_throughput(run_ctx *c, rl__camp_topo *tp, const int *avail) {
    const rl__camp_protocol *p = c->p;
    char el[32], left[32];
    for (int k = 0; k < p->n_tp_cases; k++)
        for (int i = 0; i < p->n_arms; i++) {
            rl__camp_arm a = p->arms[i];
            if (!avail[a] || (a == RL_CAMP_SQLITE && !tp->sqlite[p->tp_cases[k].variant][0])) {
                c->total -= p->n_tp_clients;
                continue;
            }
            for (int l = 0; l < p->n_tp_clients; l++) {
                json_t *e = throughput_level(c, tp, &p->tp_cases[k], a, p->tp_clients[l]);
                json_array_append_new(c->throughput, e);
                c->done++;
                double per = c->done ? (now_s() - c->t_first) / c->done : 0;
                fmt_dur(now_s() - c->t0, el, sizeof el);
                fmt_dur(per * (c->total > c->done ? c->total - c->done : 0), left, sizeof left);
                progress(c,
                         "[%d/%d] %s throughput %s %-8s %2d clients: %.0f queries/s, p50 %.3f ms, p99 %.3f ms  "
                         "elapsed %s, about %s left",
                         c->done, c->total, tp->t->name, p->tp_cases[k].name, rl__camp_arm_name(a), p->tp_clients[l],
                         json_number_value(json_object_get(e, "queries_per_second")),
                         json_number_value(json_object_get(e, "p50_ns")) / 1e6,
                         json_number_value(json_object_get(e, "p99_ns")) / 1e6, el, left);
            }
        }
}

/* ---- One topology ------------------------------------------------------------------------------ */

/* Load, check and prepare the datasets. Returns 1 when the data passed every check. */
static int prepare_data(run_ctx *c, rl__camp_topo *tp, json_t *tj, const int *need) {
    const rl__camp_protocol *p = c->p;
    int ok = 1, has_sqlite = 0;
    rl__errdetail err;
    rl__errdetail_init(&err, NULL);
    for (int i = 0; i < p->n_arms; i++) has_sqlite |= p->arms[i] == RL_CAMP_SQLITE;
    json_t *ds = json_array();
    for (int v = 0; v < RL_CAMP_VARIANTS; v++) {
        if (!need[v]) continue;
        int padding = v == RL_CAMP_SPLIT ? p->split_padding : 0;
        double t0 = now_s();
        progress(c, "%s: loading %d %s Orders (padding %d) into %s", tp->t->name, p->records,
                 rl__camp_variant_name((rl__camp_variant)v), padding, tp->url[v]);
        rl__errdetail_clear(&err);
        json_t *d = json_pack("{s:s, s:s, s:s, s:i, s:i}", "variant", rl__camp_variant_name((rl__camp_variant)v), "url",
                              tp->url[v], "store", tp->store[v], "records", p->records, "padding", padding);
        int rc = rl__camp_load(tp->url[v], tp->store[v], p, padding, &err);
        json_object_set_new(d, "load_seconds", json_real(now_s() - t0));
        json_t *chk = NULL;
        if (!rc) rc = rl__camp_integrity(tp->url[v], tp->store[v], &chk, &err);
        if (rc) {
            add_failure(c, 1, "load", tp->t->name, NULL, "%s", rl__errdetail_get(&err));
            json_object_set_new(d, "error", json_string(rl__errdetail_get(&err)));
            ok = 0;
        } else {
            tp->loaded[v] = 1;
            int iok = json_is_true(json_object_get(chk, "integrity_ok"));
            json_object_set_new(d, "integrity_ok", json_boolean(iok));
            json_object_set(d, "integrity", chk);
            if (!iok) {
                add_failure(c, 1, "integrity", tp->t->name, NULL, "%s: integrity_ok = false (%zu defects)",
                            rl__camp_variant_name((rl__camp_variant)v),
                            json_array_size(json_object_get(chk, "defects")));
                ok = 0;
            }
            progress(c, "%s: %s: integrity_ok = %s (%lld records, %lld index entries)", tp->t->name,
                     rl__camp_variant_name((rl__camp_variant)v), iok ? "true" : "false",
                     (long long)json_integer_value(json_object_get(chk, "records")),
                     (long long)json_integer_value(json_object_get(chk, "index_entries")));
            json_decref(chk);
        }
        if (ok && has_sqlite && tp->sqlite[v][0]) {
            rl__errdetail_clear(&err);
            if ((rc = rl__camp_sqlite_peer(tp->url[v], tp->store[v], tp->sqlite[v], &err))) {
                add_failure(c, 1, "sqlite-peer", tp->t->name, NULL, "%s", rl__errdetail_get(&err));
                ok = 0;
            }
            json_object_set_new(d, "sqlite", json_string(tp->sqlite[v]));
        }
        json_array_append_new(ds, d);
    }
    json_object_set_new(tj, "datasets", ds);
    rl__errdetail_clear(&err);
    if (ok) {
        double t0 = now_s();
        if (tp->ops->place(tp, &err)) {
            add_failure(c, 1, "placement", tp->t->name, NULL, "%s", rl__errdetail_get(&err));
            ok = 0;
        } else if (tp->placed_text[0]) {
            progress(c, "%s: placed (%s) in %.1f s", tp->t->name, tp->placed_text, now_s() - t0);
            json_t *pl = json_pack("{s:s, s:f}", "teams", tp->placed_text, "seconds", now_s() - t0);
            if (tp->place_info) json_object_set(pl, "plan", tp->place_info);
            json_object_set_new(tj, "placement", pl);
        }
    }
    json_t *controls = NULL;
    int passed = 0;
    rl__errdetail_clear(&err);
    progress(c, "%s: defect controls (delete-chunk, stray-suffix, version-key) on a scratch copy", tp->t->name);
    if (rl__camp_defect_controls(tp->control_url, p, &controls, &passed, &err))
        add_failure(c, 1, "defect-control", tp->t->name, NULL, "%s", rl__errdetail_get(&err));
    else if (!passed)
        add_failure(c, 1, "defect-control", tp->t->name, NULL, "a defect did not make the checker fail as expected");
    json_object_set_new(tj, "defect_controls", controls ? controls : json_array());
    json_object_set_new(tj, "defect_controls_passed", json_boolean(passed));
    return ok && passed;
}

/* The rows check: every arm once per case; fills runs[case][arm] and hash[case]. One variant's
 * store is open at a time (its cases run, then it is closed): over fdb: on an embedded database,
 * reclayer's libfdb_c.so opens the one directory per database handle, and a directory takes one
 * writer. */
static void rows_check(run_ctx *c, rl__camp_topo *tp, json_t *tj, int (*runs)[RL_CAMP_ARM_KINDS], char (*hash)[17]) {
    const rl__camp_protocol *p = c->p;
    rl__camp_conn conn;
    int avail[RL_CAMP_ARM_KINDS] = {0};
    char why[RL_CAMP_ARM_KINDS][256];
    rl__errdetail err;
    json_t **per_case = rl__calloc((size_t)p->n_cases, sizeof *per_case);
    rl__errdetail_init(&err, NULL);
    memset(why, 0, sizeof why);
    for (int i = 0; i < p->n_arms; i++) avail[p->arms[i]] = 1;
    if (avail[RL_CAMP_SQLITE] && !tp->sqlite[0][0]) {
        avail[RL_CAMP_SQLITE] = 0;
        snprintf(why[RL_CAMP_SQLITE], sizeof why[0], "the SQLite peer runs on embedded topologies only");
    }
    const char *na;
    if (avail[RL_CAMP_REMOTE_GROUPED] && !rl__camp_arm_applies(RL_CAMP_REMOTE_GROUPED, (int)tp->t->kind, &na)) {
        avail[RL_CAMP_REMOTE_GROUPED] = 0;
        snprintf(why[RL_CAMP_REMOTE_GROUPED], sizeof why[0], "%s", na);
    }
    for (int v = 0; per_case && v < RL_CAMP_VARIANTS; v++) {
        int used = 0, opened = 0;
        for (int k = 0; k < p->n_cases; k++) used |= p->cases[k].variant == (rl__camp_variant)v;
        if (!used) continue;
        rl__errdetail_clear(&err);
        const char *sq = avail[RL_CAMP_SQLITE] && tp->sqlite[v][0] ? tp->sqlite[v] : NULL;
        memset(&conn, 0, sizeof conn);
        if (rl__camp_conn_open(&conn, tp->query_url[v], tp->store[v], sq, &err))
            add_failure(c, 1, "rows", tp->t->name, NULL, "%s", rl__errdetail_get(&err));
        else opened = 1;
        for (int k = 0; k < p->n_cases; k++) {
            const rl__camp_case *kc = &p->cases[k];
            if (kc->variant != (rl__camp_variant)v) continue;
            json_t *per = json_object();
            int agree = 1, first = -1;
            for (int i = 0; i < p->n_arms; i++) {
                rl__camp_arm a = p->arms[i];
                rl__camp_sums s;
                memset(&s, 0, sizeof s);
                runs[k][a] = 0;
                if (!avail[a] || !opened) continue;
                rl__errdetail_clear(&err);
                int rc = rl__camp_op(&conn, kc, a, p->pipeline_depth, &s, &err);
                if (rc == RL_E_UNSUPPORTED_OPERATION) {
                    avail[a] = 0;
                    snprintf(why[a], sizeof why[a], "%s", rl__errdetail_get(&err));
                    continue;
                }
                if (rc) {
                    add_failure(c, 1, "rows", tp->t->name, kc->name, "%s: %s", rl__camp_arm_name(a),
                                rl__errdetail_get(&err));
                    continue;
                }
                char h[17];
                snprintf(h, sizeof h, "%016llx", (unsigned long long)s.hash);
                json_object_set_new(per, rl__camp_arm_name(a),
                                    json_pack("{s:I, s:s}", "rows", (json_int_t)s.last_rows, "hash", h));
                if (first < 0) {
                    first = a;
                    memcpy(hash[k], h, sizeof h);
                } else if (strcmp(h, hash[k])) {
                    agree = 0;
                }
                runs[k][a] = 1;
            }
            if (!agree) {
                add_failure(c, 1, "rows", tp->t->name, kc->name, "the arms returned different rows");
                memset(runs[k], 0, sizeof runs[k]);
            }
            per_case[k] = json_pack("{s:s, s:b, s:o}", "case", kc->name, "agree", agree, "arms", per);
        }
        if (opened) rl__camp_conn_close(&conn);
    }
    json_t *rows = json_array();
    for (int k = 0; per_case && k < p->n_cases; k++)
        if (per_case[k]) json_array_append_new(rows, per_case[k]);
    json_t *arms = json_array();
    for (int i = 0; i < p->n_arms; i++) {
        rl__camp_arm a = p->arms[i];
        json_t *o = json_pack("{s:s, s:b}", "arm", rl__camp_arm_name(a), "available", avail[a]);
        if (!avail[a]) json_object_set_new(o, "reason", json_string(why[a][0] ? why[a] : "not available"));
        json_array_append_new(arms, o);
        if (!avail[a]) progress(c, "%s: arm %s is not available: %s", tp->t->name, rl__camp_arm_name(a), why[a]);
    }
    json_object_set_new(tj, "arms", arms);
    json_object_set_new(tj, "rows_check", rows);
    if (!per_case) add_failure(c, 1, "rows", tp->t->name, NULL, "out of memory");
    rl__free(per_case);
}

static int run_topology(run_ctx *c, int ti) {
    const rl__camp_protocol *p = c->p;
    const rl__camp_topology *t = &p->topologies[ti];
    rl__camp_topo tp;
    rl__errdetail err;
    int rc = RL_OK, need[RL_CAMP_VARIANTS] = {0};
    int(*runs)[RL_CAMP_ARM_KINDS] = rl__calloc((size_t)p->n_cases, sizeof *runs);
    char(*hash)[17] = rl__calloc((size_t)p->n_cases, sizeof *hash);
    memset(&tp, 0, sizeof tp);
    rl__errdetail_init(&err, NULL);
    if (!runs || !hash) {
        rc = RL_E_OUT_OF_MEMORY;
        goto done;
    }
    tp.t = t, tp.p = p, tp.ops = rl__camp_topo_ops(t->kind);
    snprintf(tp.dir, sizeof tp.dir, "%s/data/%s", c->o->out_dir, t->name);
    json_t *tj = json_pack("{s:s, s:s, s:i}", "name", t->name, "kind", rl__camp_topo_kind_name(t->kind), "delay_us",
                           t->delay_us);
    json_array_append_new(c->topos, tj);
    if (tp.ops->available(t, &err)) {
        json_object_set_new(tj, "status", json_string("not_available"));
        json_object_set_new(tj, "reason", json_string(rl__errdetail_get(&err)));
        progress(c, "topology %s is not available: %s", t->name, rl__errdetail_get(&err));
        goto done;
    }
    for (int k = 0; k < p->n_cases; k++) need[p->cases[k].variant] = 1;
    for (int k = 0; p->n_tp_clients && k < p->n_tp_cases; k++) need[p->tp_cases[k].variant] = 1;
    if (tp.ops->up(&tp, &err)) {
        add_failure(c, 1, "topology", t->name, NULL, "%s", rl__errdetail_get(&err));
        json_object_set_new(tj, "status", json_string("failed"));
        goto done;
    }
    json_t *pids = json_array();
    for (int i = 0; i < tp.n_pids; i++) json_array_append_new(pids, json_integer(tp.pids[i]));
    json_object_set_new(tj, "server_pids", pids);
    json_object_set_new(tj, "query_url", json_string(tp.query_url[0]));
    if (tp.info) json_object_set(tj, "backend", tp.info);
    if (!prepare_data(c, &tp, tj, need)) {
        json_object_set_new(tj, "status", json_string("checks_failed"));
        progress(c, "%s: the data failed a check: no case of this topology is timed", t->name);
        goto down;
    }
    rows_check(c, &tp, tj, runs, hash);
    /* The plan is now known: the topology's estimate in the run's total becomes its plan. */
    c->total -= c->est[ti];
    c->est[ti] = 0;
    for (int k = 0; k < p->n_cases; k++) {
        int n = 0;
        for (int a = 0; a < RL_CAMP_ARM_KINDS; a++) n += runs[k][a];
        c->total += n * p->blocks;
    }
    int tp_avail[RL_CAMP_ARM_KINDS] = {0}, n_avail = 0;
    size_t ai;
    json_t *ao;
    json_array_foreach(json_object_get(tj, "arms"), ai, ao) {
        int a = rl__camp_arm_of(json_string_value(json_object_get(ao, "arm")));
        if (a >= 0 && json_is_true(json_object_get(ao, "available"))) tp_avail[a] = 1, n_avail++;
    }
    c->total += n_avail * p->n_tp_clients * p->n_tp_cases;
    for (int k = 0; k < p->n_cases && rc == RL_OK; k++) rc = run_case(c, &tp, &p->cases[k], runs[k], hash[k]);
    if (rc == RL_OK && p->n_tp_clients) run_throughput(c, &tp, tp_avail);
    json_t *rest = NULL;
    rl__errdetail_clear(&err);
    if (tp.ops->restore(&tp, p->rtt_pings, &rest, &err)) {
        add_failure(c, 1, "restoration", t->name, NULL, "%s", rl__errdetail_get(&err));
        rest = json_pack("{s:s}", "error", rl__errdetail_get(&err));
    } else if (json_is_false(json_object_get(rest, "restored"))) {
        add_failure(c, 1, "restoration", t->name, NULL,
                    "the RTT probe still shows the delay after its removal: p50 %.1f us >= %.1f us",
                    json_number_value(json_object_get(rest, "p50_us")), 2.0 * t->delay_us);
    }
    json_object_set_new(tj, "restoration", rest);
    json_object_set_new(tj, "status", json_string("ran"));
down:
    tp.ops->down(&tp);
    if (!p->keep_data) {
        rl__errdetail m;
        rl__errdetail_init(&m, NULL);
        if (rl__bench_scratch_remove(tp.dir, &m)) progress(c, "%s", rl__errdetail_get(&m));
    }
done:
    c->total -= c->est[ti]; /* not timed: none of its processes will run */
    c->est[ti] = 0;
    json_decref(tp.info);
    json_decref(tp.place_info);
    rl__free(runs);
    rl__free(hash);
    return rc;
}

/* ---- The run ----------------------------------------------------------------------------------- */

static int write_json(const char *dir, const char *name, json_t *doc, rl__errdetail *err) {
    char path[RL_CAMP_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (json_dump_file(doc, path, RL_CAMP_RESULTS_JSON_FLAGS) != 0) {
        rl__errdetail_append(err, "cannot write %s", path);
        return RL_E_IO_ERROR;
    }
    return RL_OK;
}

int rl__camp_run(const rl__camp_run_options *o, rl__errdetail *err) {
    const rl__camp_protocol *p = o->protocol;
    run_ctx c;
    rl_buf self, ptext;
    char when[32], hex[RL_SHA256_HEX_LEN + 1], el[32];
    uint8_t digest[RL_SHA256_LEN];
    json_t *man = NULL; /* the manifest, taken before the run (written at its end) */
    int rc;
    memset(&c, 0, sizeof c);
    rl__buf_init(&self);
    rl__buf_init(&ptext);
    c.o = o, c.p = p, c.progress = o->progress;
    if ((rc = prepare_out(o->out_dir, err))) goto done;
    if (o->self_exe) rl__buf_append_str(&self, o->self_exe);
    else if ((rc = rl__camp_self_exe(&self))) {
        rl__errdetail_append(err, "cannot find the running program (/proc/self/exe)");
        goto done;
    }
    snprintf(c.self, sizeof c.self, "%s", rl__camp_str(&self));
    rl__sha256(o->protocol_text, o->protocol_len, digest);
    rl__sha256_hex(digest, hex);
    utc_now(when, sizeof when);
    rl__camp_protocol_print(p, &ptext);
    c.root = json_object();
    json_object_set_new(c.root, "format", json_string("reclayer-campaign-results/1"));
    json_object_set_new(c.root, "protocol_name", json_string(p->name));
    json_object_set_new(c.root, "protocol_source", json_string(o->protocol_source ? o->protocol_source : ""));
    json_object_set_new(c.root, "protocol_sha256", json_string(hex));
    json_object_set_new(c.root, "protocol", json_loadb(rl__camp_str(&ptext), ptext.len, 0, NULL));
    json_object_set_new(c.root, "started_utc", json_string(when));
    json_object_set_new(c.root, "topologies", c.topos = json_array());
    json_object_set_new(c.root, "cases", c.cases = json_array());
    json_object_set_new(c.root, "samples", c.samples = json_array());
    json_object_set_new(c.root, "throughput", c.throughput = json_array());
    json_object_set_new(c.root, "summary", c.summary = json_array());
    json_object_set_new(c.root, "arm_summary", c.arm_summary = json_array());
    json_object_set_new(c.root, "failures", c.failures = json_array());
    /* the reference reports' published figures, shown beside ours by report.c and report_plot.c */
    json_object_set_new(c.root, "reference", rl__camp_reference_json());
    /* The manifest is taken now, before anything runs: the binaries' digests and the work tree's
     * revision are those the run starts from (taken at the end, a commit or a rebuild during a
     * long run was recorded as if the run had used it). */
    if ((rc = rl__camp_manifest(o, c.self, &man, err))) goto done;
    json_object_set_new(man, "protocol_sha256", json_string(hex));
    c.t0 = now_s();
    rl_buf arms;
    rl__buf_init(&arms);
    for (int i = 0; i < p->n_arms; i++) rl__buf_printf(&arms, "%s%s", i ? ", " : "", rl__camp_arm_name(p->arms[i]));
    progress(&c, "protocol %s (%s, sha256 %.16s...): %d topologies, %d cases, arms %s", p->name,
             o->protocol_source ? o->protocol_source : "", hex, p->n_topologies, p->n_cases, rl__camp_str(&arms));
    rl__buf_release(&arms);
    progress(&c, "%d blocks x %d repeats of %g s per process (warm-up %g s); output in %s", p->blocks, p->repeats,
             p->seconds, p->warmup_seconds, o->out_dir);
    /* One progress counter for the whole run: every topology's processes are counted from the start
     * (every listed arm, the SQLite peer on embedded only), and each topology's share is replaced by
     * its plan once its rows check has shown which arms run. */
    for (int ti = 0; ti < p->n_topologies; ti++) {
        int n = 0;
        for (int i = 0; i < p->n_arms; i++) n += rl__camp_arm_applies(p->arms[i], (int)p->topologies[ti].kind, NULL);
        c.est[ti] = n * (p->n_cases * p->blocks + p->n_tp_clients * p->n_tp_cases);
        c.total += c.est[ti];
    }
    for (int ti = 0; ti < p->n_topologies && rc == RL_OK; ti++) rc = run_topology(&c, ti);
    if (!p->keep_data) {
        char data[RL_CAMP_DIR_MAX];
        snprintf(data, sizeof data, "%s/data", o->out_dir);
        rmdir(data); /* empty once every topology removed its own; left alone otherwise */
    }
    if (rc) {
        rl__errdetail_append(err, "the run stopped: %s", rl_error_name(rc));
        add_failure(&c, 0, "run", NULL, NULL, "stopped early: %s", rl_error_name(rc));
    }
    utc_now(when, sizeof when);
    json_object_set_new(c.root, "finished_utc", json_string(when));
    json_object_set_new(c.root, "wall_seconds", json_real(now_s() - c.t0));
    json_object_set_new(c.root, "ok", json_boolean(!c.failed_checks && !c.failed_procs && !rc));
    json_object_set_new(c.root, "failed_checks", json_integer(c.failed_checks));
    json_object_set_new(c.root, "failed_processes", json_integer(c.failed_procs));
    json_t *plots = NULL;
    rl__camp_plots(o->out_dir, c.root, &plots, NULL);
    json_object_set_new(c.root, "plots", plots ? plots : json_null());
    int wrc = rl__camp_results_write(o->out_dir, c.root, err);
    if (!wrc) wrc = rl__camp_csv_write(o->out_dir, c.root, err);
    if (!wrc) wrc = write_json(o->out_dir, "manifest.json", man, err);
    if (!wrc) wrc = rl__camp_report_write(o->out_dir, c.root, man, o->out, err);
    fmt_dur(now_s() - c.t0, el, sizeof el);
    progress(&c, "done in %s: %d processes, %d failed checks, %d failed processes; report %s/report.md", el, c.done,
             c.failed_checks, c.failed_procs, o->out_dir);
    if (!rc) rc = wrc;
    if (!rc && c.failed_checks) rc = RL_E_INTEGRITY_DEFECTS;
    if (!rc && c.failed_procs) rc = RL_E_OPERATION_FAILED;
    if (rc && !rl__errdetail_len(err))
        rl__errdetail_append(err, "%d failed checks and %d failed processes (see %s/report.md)", c.failed_checks,
                             c.failed_procs, o->out_dir);
done:
    json_decref(man);
    json_decref(c.root);
    rl__buf_release(&self);
    rl__buf_release(&ptext);
    return rc;
}
