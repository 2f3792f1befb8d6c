/* report_compare.c — `rlbench campaign compare A B`: what changed between two runs, from their
 * results documents alone (rl__camp_compare, rl__camp_compare_dirs).
 *
 * The table has one row per (topology, case, comparison, metric) found in either run, in A's order
 * then B's new ones: A's ratio [interval], B's, the change of the ratio (B / A), whether the two
 * intervals overlap (two intervals that do not overlap are a change the runs resolve; overlapping
 * ones are not evidence of no change), and the cases' labels when either is not clean. A row found
 * in one run only says so. Before the table: each run's protocol name and SHA-256, and whether the
 * protocols are the same.
 *
 * After it, when either run has a throughput phase, a table of its levels: queries/s (and p50) in A
 * and B and B/A (one window per level: no interval).
 *
 * Nothing is measured or recomputed: every figure is one of the two results documents'.
 */
#include <math.h>
#include <string.h>

#include "bench/campaign_int.h"

static const char *jstr(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static double jnumv(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_t *find_same(json_t *r, json_t *like) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "summary"), i, s) {
        if (!strcmp(jstr(s, "topology"), jstr(like, "topology")) && !strcmp(jstr(s, "case"), jstr(like, "case")) &&
            !strcmp(jstr(s, "comparison"), jstr(like, "comparison")) &&
            !strcmp(jstr(s, "metric"), jstr(like, "metric")))
            return s;
    }
    return NULL;
}

static const char *label_of(json_t *r, json_t *like) {
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "cases"), i, c) {
        if (!strcmp(jstr(c, "topology"), jstr(like, "topology")) && !strcmp(jstr(c, "case"), jstr(like, "case")))
            return jstr(c, "label");
    }
    return "";
}

static int ratio_ok(json_t *s) { return s && !strcmp(jstr(s, "status"), "ok") && isfinite(jnumv(s, "ratio")); }

static void put_ratio(rl_buf *b, json_t *s) {
    if (!s) rl__buf_append_str(b, "not in this run");
    else if (ratio_ok(s))
        rl__buf_printf(b, "%.3f [%.3f, %.3f]", jnumv(s, "ratio"), jnumv(s, "ci_low"), jnumv(s, "ci_high"));
    else rl__buf_printf(b, "n/a (%s)", jstr(s, "status"));
}

static void row(rl_buf *b, json_t *ra, json_t *rb, json_t *sa, json_t *sb) {
    json_t *s = sa ? sa : sb;
    rl__buf_printf(b, "| %s | %s | %s | %s | ", jstr(s, "topology"), jstr(s, "case"), jstr(s, "comparison"),
                   jstr(s, "metric"));
    put_ratio(b, sa);
    rl__buf_append_str(b, " | ");
    put_ratio(b, sb);
    if (ratio_ok(sa) && ratio_ok(sb)) {
        int overlap = jnumv(sa, "ci_low") <= jnumv(sb, "ci_high") && jnumv(sb, "ci_low") <= jnumv(sa, "ci_high");
        int dir_a = jnumv(sa, "ratio") < 1, dir_b = jnumv(sb, "ratio") < 1;
        rl__buf_printf(b, " | %.3f | %s | %s |", jnumv(sb, "ratio") / jnumv(sa, "ratio"), overlap ? "yes" : "**no**",
                       dir_a == dir_b ? "yes" : "**no**");
    } else {
        rl__buf_append_str(b, " | — | — | — |");
    }
    const char *la = sa ? label_of(ra, sa) : "", *lb = sb ? label_of(rb, sb) : "";
    if ((*la && strcmp(la, "clean")) || (*lb && strcmp(lb, "clean")))
        rl__buf_printf(b, " %s → %s |\n", *la ? la : "—", *lb ? lb : "—");
    else rl__buf_append_str(b, " |\n");
}

/* The throughput entry of b matching a's entry like (topology, case, arm, clients), or NULL. */
static json_t *find_level(json_t *r, json_t *like) {
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r, "throughput"), i, e) {
        if (!strcmp(jstr(e, "topology"), jstr(like, "topology")) && !strcmp(jstr(e, "case"), jstr(like, "case")) &&
            !strcmp(jstr(e, "arm"), jstr(like, "arm")) &&
            json_integer_value(json_object_get(e, "clients")) == json_integer_value(json_object_get(like, "clients")))
            return e;
    }
    return NULL;
}

static void put_qps(rl_buf *b, json_t *e) {
    if (!e) rl__buf_append_str(b, "not in this run");
    else if (!json_is_true(json_object_get(e, "ok"))) rl__buf_append_str(b, "failed");
    else rl__buf_printf(b, "%.0f (p50 %.3f ms)", jnumv(e, "queries_per_second"), jnumv(e, "p50_ns") / 1e6);
}

/* The throughput levels of either run: queries/s and p50 of each, and B/A. One window per level:
 * no interval, so a change here is a measurement, not a resolved difference. */
static void throughput_rows(json_t *a, json_t *b, rl_buf *out) {
    size_t i;
    json_t *e;
    if (!json_array_size(json_object_get(a, "throughput")) && !json_array_size(json_object_get(b, "throughput")))
        return;
    rl__buf_append_str(out, "\nThroughput (one window per level, no interval):\n\n| topology | case | arm | clients | "
                            "A queries/s | B queries/s | B/A |\n|---|---|---|---|---|---|---|\n");
    for (int pass = 0; pass < 2; pass++) json_array_foreach(json_object_get(pass ? b : a, "throughput"), i, e) {
            json_t *ea = pass ? find_level(a, e) : e, *eb = pass ? e : find_level(b, e);
            if (pass && ea) continue;
            rl__buf_printf(out, "| %s | %s | %s | %lld | ", jstr(e, "topology"), jstr(e, "case"), jstr(e, "arm"),
                           (long long)json_integer_value(json_object_get(e, "clients")));
            put_qps(out, ea);
            rl__buf_append_str(out, " | ");
            put_qps(out, eb);
            double qa = ea ? jnumv(ea, "queries_per_second") : NAN, qb = eb ? jnumv(eb, "queries_per_second") : NAN;
            if (qa > 0 && qb > 0) rl__buf_printf(out, " | %.3f |\n", qb / qa);
            else rl__buf_append_str(out, " | — |\n");
        }
}

void rl__camp_compare(json_t *a, json_t *b, const char *name_a, const char *name_b, const char *metric, rl_buf *out) {
    size_t i;
    json_t *s;
    int same = !strcmp(jstr(a, "protocol_sha256"), jstr(b, "protocol_sha256"));
    rl__buf_printf(out, "A: %s — protocol %s, sha256 %.16s…, started %s\n", name_a, jstr(a, "protocol_name"),
                   jstr(a, "protocol_sha256"), jstr(a, "started_utc"));
    rl__buf_printf(out, "B: %s — protocol %s, sha256 %.16s…, started %s\n", name_b, jstr(b, "protocol_name"),
                   jstr(b, "protocol_sha256"), jstr(b, "started_utc"));
    rl__buf_printf(out, "%s\n\n",
                   same ? "The same protocol."
                        : "The protocols differ: a change may be the protocol's, not the code's.");
    rl__buf_append_str(out, "| topology | case | comparison | metric | A ratio [interval] | B ratio [interval] | B/A | "
                            "intervals overlap | same direction | labels (A → B) |\n"
                            "|---|---|---|---|---|---|---|---|---|---|\n");
    int n = 0;
    json_array_foreach(json_object_get(a, "summary"), i, s) {
        if (metric && strcmp(jstr(s, "metric"), metric)) continue;
        row(out, a, b, s, find_same(b, s));
        n++;
    }
    json_array_foreach(json_object_get(b, "summary"), i, s) {
        if (metric && strcmp(jstr(s, "metric"), metric)) continue;
        if (find_same(a, s)) continue;
        row(out, a, b, NULL, s);
        n++;
    }
    if (!n) rl__buf_append_str(out, "| (no ratio in either run) | | | | | | | | | |\n");
    rl__buf_append_str(out, "\nIntervals that do not overlap are a change the two runs resolve; overlapping ones "
                            "do not show that nothing changed.\n");
    throughput_rows(a, b, out);
}

int rl__camp_compare_dirs(const char *dir_a, const char *dir_b, const char *metric, FILE *out, rl__errdetail *err) {
    json_t *a = NULL, *b = NULL;
    rl_buf t;
    int rc = rl__camp_results_load(dir_a, &a, err);
    if (!rc) rc = rl__camp_results_load(dir_b, &b, err);
    if (!rc && metric && strcmp(metric, "all") && rl__camp_metric_of(metric) < 0) {
        rl__errdetail_append(err, "--metric: '%s' is not a metric (ns_per_op, bytes_per_op, ..., or all)", metric);
        rc = RL_E_INVALID_ARGUMENT;
    }
    if (!rc) {
        rl__buf_init(&t);
        rl__camp_compare(a, b, dir_a, dir_b, metric && !strcmp(metric, "all") ? NULL : metric, &t);
        if (!(rc = rl__buf_error(&t))) fwrite(t.data, 1, t.len, out);
        rl__buf_release(&t);
    }
    json_decref(a);
    json_decref(b);
    return rc;
}
